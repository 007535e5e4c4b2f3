/*
 * The mock cloud's control API (/_mock/..., JSON over loopback) for the unit tests
 * that run against tests/mocks/mockcloud when MOCKCLOUD_URL is set.
 */
#ifndef ISC_TESTS_UNIT_MOCK_CONTROL_H
#define ISC_TESTS_UNIT_MOCK_CONTROL_H

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct mock_mem {
	char *p;
	size_t n;
};

static size_t mock_mem_cb(char *d, size_t sz, size_t nm, void *u)
{
	struct mock_mem *m = u;
	char *np = realloc(m->p, m->n + sz * nm + 1);
	if (!np)
		return 0;
	memcpy(np + m->n, d, sz * nm);
	m->n += sz * nm;
	np[m->n] = '\0';
	m->p = np;
	return sz * nm;
}

/* METHOD $MOCKCLOUD_URL/_mock/PATH with an optional JSON body; the JSON reply or NULL. */
static json_t *mock_api(const char *method, const char *path, const char *body)
{
	char url[512];
	struct mock_mem m = {NULL, 0};
	json_t *j = NULL;
	CURL *h = curl_easy_init();
	snprintf(url, sizeof(url), "%s/_mock/%s", getenv("MOCKCLOUD_URL"), path);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	if (body)
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, mock_mem_cb);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &m);
	if (curl_easy_perform(h) == CURLE_OK && m.p)
		j = json_loads(m.p, 0, NULL);
	curl_easy_cleanup(h);
	free(m.p);
	return j;
}

#endif
