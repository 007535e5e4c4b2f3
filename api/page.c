/*
 * Pages of listings (docs/api.md, "Pages"): ?limit= and ?after= in, X-Isc-Next
 * out. The cursor is each route's own (a position in its stable order); this
 * file only reads the arguments and writes the header, so every listing pages
 * the same way.
 */
#include "api/api_int.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int isc_api_page_parse(struct isc_api_call *c, size_t def, size_t max, struct isc_api_page *out)
{
	const char *limit = isc_api_query(c, "limit"), *after = isc_api_query(c, "after");

	out->limit = def;
	out->after = NULL;
	if (limit) {
		char *end;
		long long n;
		errno = 0;
		n = strtoll(limit, &end, 10);
		/* Digits only: strtoll would also take " 5" and "+5". */
		if (*limit < '0' || *limit > '9' || *end || errno || n < 1 ||
		    (unsigned long long)n > max) {
			isc_api_reply_error(c, 400, "limit: '%s' is not a page size (1..%zu)",
			                    limit, max);
			return 0;
		}
		out->limit = (size_t)n;
	}
	if (after) {
		if (!*after) {
			isc_api_reply_error(c, 400, "after: empty (give the X-Isc-Next of a page)");
			return 0;
		}
		out->after = after;
	}
	return 1;
}

void isc_api_page_next(struct isc_api_call *c, const char *cursor)
{
	snprintf(c->next_cursor, sizeof(c->next_cursor), "%s", cursor);
	isc_api_header(c, "X-Isc-Next", c->next_cursor);
}

int isc_api_page_cursor(struct isc_api_call *c, const char *after, size_t n, const char **parts,
                        char *buf, size_t size)
{
	size_t got = 0;
	char *p = buf;

	if (strlen(after) >= size)
		goto bad;
	memcpy(buf, after, strlen(after) + 1);
	while (got < n) {
		char *slash = got + 1 < n ? strchr(p, '/') : NULL;
		if (slash)
			*slash = 0;
		if (!*p || (got + 1 < n && !slash))
			goto bad;
		parts[got++] = p;
		p = slash ? slash + 1 : p;
	}
	return 1;
bad:
	isc_api_reply_error(c, 400, "after: '%s' is not a cursor of this listing (X-Isc-Next)",
	                    after);
	return 0;
}

int isc_api_page_cursor_ms_id(struct isc_api_call *c, const char *after, int64_t *ms,
                              const char **id)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(after, &end, 10);
	if (end == after || *end != '.' || errno || v < 0 || !end[1] || strlen(end + 1) > 64)
		goto bad;
	for (const char *p = end + 1; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '_' && *p != '-')
			goto bad;
	*ms = v;
	*id = end + 1;
	return 1;
bad:
	isc_api_reply_error(c, 400, "after: '%s' is not a cursor of this listing (X-Isc-Next)",
	                    after);
	return 0;
}

void isc_api_listing_cache_clear(struct isc_api_listing_cache *lc)
{
	for (size_t i = 0; i < ISC_API_LISTINGS; i++) {
		free(lc->e[i].key);
		free(lc->e[i].body);
	}
	memset(lc, 0, sizeof(*lc));
}

int isc_api_listing_cached(struct isc_api_call *c, const char *key)
{
	struct isc_api_listing_cache *lc = isc_api_listings(c);
	char *copy;

	if (!lc)
		return 0;
	for (size_t i = 0; i < ISC_API_LISTINGS; i++) {
		if (!lc->e[i].key || strcmp(lc->e[i].key, key) != 0)
			continue;
		/* A copy: the server frees the reply after sending, the cache may be gone by then.
		 */
		if (!(copy = malloc(lc->e[i].len ? lc->e[i].len : 1)))
			return 0;
		memcpy(copy, lc->e[i].body, lc->e[i].len);
		if (lc->e[i].next[0])
			isc_api_page_next(c, lc->e[i].next);
		isc_api_reply_text(c, 200, "application/json", copy, lc->e[i].len);
		return 1;
	}
	return 0;
}

void isc_api_listing_keep(struct isc_api_call *c, const char *key)
{
	struct isc_api_listing_cache *lc = isc_api_listings(c);
	char *k, *body;
	size_t at;

	if (!lc || c->status != 200 || !c->reply || c->reply_len > ISC_API_LISTING_MAX_BYTES)
		return;
	k = strdup(key);
	body = malloc(c->reply_len ? c->reply_len : 1);
	if (!k || !body) {
		free(k);
		free(body);
		return;
	}
	memcpy(body, c->reply, c->reply_len);
	at = lc->next;
	lc->next = (lc->next + 1) % ISC_API_LISTINGS;
	free(lc->e[at].key);
	free(lc->e[at].body);
	lc->e[at].key = k;
	lc->e[at].body = body;
	lc->e[at].len = c->reply_len;
	/* The next page's cursor, when the route named one (isc_api_page_next). */
	snprintf(lc->e[at].next, sizeof(lc->e[at].next), "%s", c->next_cursor);
}
