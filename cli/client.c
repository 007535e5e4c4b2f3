/* The API client of isc: libcurl over the Unix socket or TCP (cli/client.h). */
#include "cli/client.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <openssl/crypto.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* iscd answers from memory; anything slower than this is a hung daemon. */
#define REQUEST_TIMEOUT_MS 120000L
/* "When iscd is not running, say so within 2 s." */
#define CONNECT_TIMEOUT_MS  2000L
#define REPLY_MAX_BYTES     (64L * 1024 * 1024)
#define CONNECT_PATIENCE_MS 1500
#define CONNECT_RETRY_MS    100

void isc_reply_cleanup(struct isc_reply *r)
{
	free(r->body);
	memset(r, 0, sizeof(*r));
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *userp)
{
	struct isc_reply *r = userp;
	size_t n = size * nmemb;
	char *grown;
	if (r->len + n > (size_t)REPLY_MAX_BYTES)
		return 0;
	grown = realloc(r->body, r->len + n + 1);
	if (!grown)
		return 0;
	r->body = grown;
	memcpy(r->body + r->len, data, n);
	r->len += n;
	r->body[r->len] = 0;
	return n;
}

static void header_value(const char *line, size_t n, const char *name, char *out, size_t cap)
{
	size_t nl = strlen(name);
	if (n <= nl + 1 || strncasecmp(line, name, nl) != 0 || line[nl] != ':')
		return;
	line += nl + 1;
	n -= nl + 1;
	while (n && (*line == ' ' || *line == '\t')) {
		line++;
		n--;
	}
	while (n && (line[n - 1] == '\r' || line[n - 1] == '\n' || line[n - 1] == ' '))
		n--;
	if (n >= cap)
		n = cap - 1;
	memcpy(out, line, n);
	out[n] = 0;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *userp)
{
	struct isc_reply *r = userp;
	size_t n = size * nmemb;
	char flag[8] = "";
	header_value(data, n, "X-Isc-Offset", r->offset, sizeof(r->offset));
	header_value(data, n, "X-Isc-Status", r->exp_status, sizeof(r->exp_status));
	header_value(data, n, "X-Isc-Reason", r->reason, sizeof(r->reason));
	header_value(data, n, "X-Isc-Next", r->next, sizeof(r->next));
	header_value(data, n, "X-Isc-Final", flag, sizeof(flag));
	if (flag[0])
		r->final = flag[0] == '1';
	flag[0] = 0;
	header_value(data, n, "X-Isc-Missing", flag, sizeof(flag));
	if (flag[0])
		r->missing = flag[0] == '1';
	flag[0] = 0;
	header_value(data, n, "X-Isc-Rows", flag, sizeof(flag));
	if (flag[0])
		r->rows = strtol(flag, NULL, 10);
	return n;
}

static void not_running(struct isc_cli *cli, const char *where, const char *why)
{
	char *db = NULL;
	if (!getenv("ISC_API_URL") && !getenv("ISC_SOCKET") &&
	    asprintf(&db, "%s/isc.db", cli->home) >= 0 && access(db, F_OK) != 0 &&
	    errno == ENOENT) {
		/* Nothing was ever set up here: the fix is isc init, then iscd. */
		isc_cli_errorf("no store at %s: run 'isc init', then start iscd", cli->home);
		free(db);
		return;
	}
	free(db);
	isc_cli_errorf("iscd is not running (no answer on %s)", where);
	(void)why;
	if (getenv("ISC_API_URL"))
		fprintf(stderr, "start it on the server, or check ISC_API_URL\n");
	else
		fprintf(stderr, "start it with: iscd --home %s &\n", cli->home);
}

/* quiet: say nothing when iscd does not answer (isc_client_ping), and do not knock again. */
static int request(struct isc_cli *cli, const char *method, const char *path, const char *body,
                   size_t len, int quiet, struct isc_reply *out)
{
	const char *url_env = getenv("ISC_API_URL"), *token = getenv("ISC_TOKEN");
	const char *sock_env = getenv("ISC_SOCKET");
	struct curl_slist *hdrs = NULL;
	char *url = NULL, *sock = NULL, *auth = NULL;
	char errbuf[CURL_ERROR_SIZE] = "";
	CURL *h;
	CURLcode cc;
	int rc = ISC_EXIT_FAIL;

	memset(out, 0, sizeof(*out));
	out->rows = -1;
	if (url_env && *url_env) {
		if (!token || !*token) {
			isc_cli_errorf(
			    "ISC_API_URL is set but ISC_TOKEN is not: a remote iscd needs "
			    "a token (isc token create)");
			return ISC_EXIT_FAIL;
		}
		if (asprintf(&url, "%s%s", url_env, path) < 0 ||
		    asprintf(&auth, "Authorization: Bearer %s", token) < 0) {
			free(url);
			return ISC_EXIT_FAIL;
		}
	} else {
		if (sock_env && *sock_env)
			sock = strdup(sock_env);
		else if (asprintf(&sock, "%s/run/api.sock", cli->home) < 0)
			sock = NULL;
		if (!sock || asprintf(&url, "http://localhost%s", path) < 0) {
			free(sock);
			return ISC_EXIT_FAIL;
		}
	}
	h = curl_easy_init();
	if (!h)
		goto out;
	curl_easy_setopt(h, CURLOPT_URL, url);
	if (sock)
		curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, sock);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, REQUEST_TIMEOUT_MS);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, out);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	if (auth)
		hdrs = curl_slist_append(hdrs, auth);
	hdrs = curl_slist_append(hdrs, "Expect:");
	if (body) {
		hdrs = curl_slist_append(hdrs, "Content-Type: application/octet-stream");
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	} else if (strcmp(method, "POST") == 0) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
	}
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	/* A daemon that is starting (or restarting) binds its socket within moments: knock
	 * again for a while before saying it is not running, still inside 2 s. */
	for (int64_t waited = 0;; waited += CONNECT_RETRY_MS) {
		cc = curl_easy_perform(h);
		if (cc != CURLE_COULDNT_CONNECT || waited >= CONNECT_PATIENCE_MS || quiet)
			break;
		usleep(CONNECT_RETRY_MS * 1000);
	}
	if (cc == CURLE_COULDNT_CONNECT || (cc == CURLE_OPERATION_TIMEDOUT && out->status == 0) ||
	    cc == CURLE_COULDNT_RESOLVE_HOST) {
		if (!quiet)
			not_running(cli, sock ? sock : url_env,
			            errbuf[0] ? errbuf : curl_easy_strerror(cc));
	} else if (cc != CURLE_OK) {
		if (!quiet)
			isc_cli_errorf("talking to iscd: %s",
			               errbuf[0] ? errbuf : curl_easy_strerror(cc));
	} else {
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out->status);
		if (!out->body && !(out->body = calloc(1, 1)))
			goto out;
		rc = ISC_EXIT_OK;
	}
out:
	if (rc)
		isc_reply_cleanup(out);
	curl_slist_free_all(hdrs);
	if (h)
		curl_easy_cleanup(h);
	if (auth) {
		memset(auth, 0, strlen(auth));
		free(auth);
	}
	free(url);
	free(sock);
	return rc;
}

int isc_client_request(struct isc_cli *cli, const char *method, const char *path, const char *body,
                       size_t len, struct isc_reply *out)
{
	return request(cli, method, path, body, len, 0, out);
}

int isc_client_ping(struct isc_cli *cli)
{
	struct isc_reply r;
	if (request(cli, "GET", "/v1/whoami", NULL, 0, 1, &r))
		return 0;
	isc_reply_cleanup(&r);
	return 1;
}

/* msg with every words[2k] rewritten as words[2k + 1], in order (caller frees); NULL out of
 * memory. */
static char *words_rewritten(const char *msg, const char *const *words)
{
	char *text = strdup(msg);

	for (size_t k = 0; text && words && words[k] && words[k + 1]; k += 2) {
		size_t from = strlen(words[k]), to = strlen(words[k + 1]), n = 0;
		char *p, *out, *w;
		for (p = strstr(text, words[k]); p; p = strstr(p + from, words[k]))
			n++;
		if (!n || !(out = malloc(strlen(text) + n * to + 1 - n * from))) {
			if (n) {
				free(text);
				text = NULL;
			}
			continue;
		}
		w = out;
		for (const char *q = text; (p = strstr(q, words[k])); q = p + from) {
			memcpy(w, q, (size_t)(p - q));
			w += p - q;
			memcpy(w, words[k + 1], to);
			w += to;
			if (!strstr(p + from, words[k]))
				strcpy(w, p + from);
		}
		free(text);
		text = out;
	}
	return text;
}

int isc_client_fail_in(const struct isc_reply *r, const char *const *words)
{
	json_t *o = json_loadb(r->body ? r->body : "", r->len, 0, NULL);
	const char *msg = json_string_value(json_object_get(o, "error"));
	const char *problems = json_string_value(json_object_get(o, "problems"));

	if (problems) {
		/* A launch file's problems name its own fields: they stay as they are. */
		fputs(problems, stderr);
	} else if (msg) {
		char *said = words_rewritten(msg, words);
		isc_cli_errorf("%s", said ? said : msg);
		free(said);
	} else {
		isc_cli_errorf("iscd answered HTTP %ld", r->status);
	}
	json_decref(o);
	return ISC_EXIT_FAIL;
}

int isc_client_fail(const struct isc_reply *r)
{
	return isc_client_fail_in(r, NULL);
}

int isc_client_json(struct isc_cli *cli, const char *method, const char *path, json_t *body,
                    json_t **out)
{
	struct isc_reply r;
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	json_error_t jerr;
	int rc;

	json_decref(body);
	if (body && !text)
		return ISC_EXIT_FAIL;
	rc = isc_client_request(cli, method, path, text, text ? strlen(text) : 0, &r);
	free(text);
	if (rc)
		return rc;
	if (r.status < 200 || r.status > 299) {
		rc = isc_client_fail_in(&r, cli->words);
	} else if (out && !(*out = json_loadb(r.body, r.len, 0, &jerr))) {
		isc_cli_errorf("iscd sent a reply that is not JSON: %s", jerr.text);
		rc = ISC_EXIT_FAIL;
	}
	isc_reply_cleanup(&r);
	return rc;
}

int isc_client_json_all_pages(struct isc_cli *cli, const char *path, json_t **out)
{
	json_t *all = json_array();
	char *url = NULL, next[sizeof(((struct isc_reply *)0)->next)] = "";
	int rc = ISC_EXIT_OK;

	if (!all)
		return ISC_EXIT_FAIL;
	do {
		struct isc_reply r;
		json_error_t jerr;
		json_t *page;
		free(url);
		if (!(url = strdup(path)) || isc_client_query_add(&url, "limit", "1000") ||
		    isc_client_query_add(&url, "after", next[0] ? next : NULL)) {
			rc = ISC_EXIT_FAIL;
			break;
		}
		if ((rc = isc_client_request(cli, "GET", url, NULL, 0, &r)))
			break;
		if (r.status < 200 || r.status > 299) {
			rc = isc_client_fail_in(&r, cli->words);
		} else if (!(page = json_loadb(r.body, r.len, 0, &jerr)) || !json_is_array(page)) {
			isc_cli_errorf("iscd sent a listing that is not a JSON array%s%s",
			               page ? "" : ": ", page ? "" : jerr.text);
			json_decref(page);
			rc = ISC_EXIT_FAIL;
		} else {
			json_array_extend(all, page);
			json_decref(page);
			/* A cursor that does not move would loop for ever: stop and say so. */
			if (r.next[0] && strcmp(r.next, next) == 0) {
				isc_cli_errorf("iscd named the same next page twice (%s)", r.next);
				rc = ISC_EXIT_FAIL;
			}
			snprintf(next, sizeof(next), "%s", r.next);
		}
		isc_reply_cleanup(&r);
	} while (!rc && next[0]);
	free(url);
	if (rc) {
		json_decref(all);
		return rc;
	}
	*out = all;
	return ISC_EXIT_OK;
}

int isc_client_query_add(char **path, const char *key, const char *value)
{
	char *esc, *grown;
	int n;
	if (!value)
		return 0;
	esc = curl_easy_escape(NULL, value, 0);
	if (!esc)
		return -1;
	n = asprintf(&grown, "%s%c%s=%s", *path, strchr(*path, '?') ? '&' : '?', key, esc);
	curl_free(esc);
	if (n < 0)
		return -1;
	free(*path);
	*path = grown;
	return 0;
}

char *isc_client_escape(const char *value)
{
	char *esc = curl_easy_escape(NULL, value, 0), *out;
	if (!esc)
		return NULL;
	out = strdup(esc);
	curl_free(esc);
	return out;
}

/*
 * 1 when host (as written in a URL: "127.0.0.1", "[::1]", "localhost") is a loopback
 * address by its text alone. A name is never resolved: DNS could say anything.
 */
static int host_is_loopback(const char *host, size_t n)
{
	char buf[64];
	struct in_addr a4;
	struct in6_addr a6;

	if (n == 0 || n >= sizeof(buf))
		return 0;
	memcpy(buf, host, n);
	buf[n] = '\0';
	if (strcasecmp(buf, "localhost") == 0)
		return 1;
	if (buf[0] == '[' && buf[n - 1] == ']') {
		buf[n - 1] = '\0';
		return inet_pton(AF_INET6, buf + 1, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
	}
	/* inet_pton takes only the dotted quad: "127.1" or "0x7f.1" are not loopback here. */
	return inet_pton(AF_INET, buf, &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127;
}

int isc_client_secret_transport_ok(const char *what)
{
	const char *url = getenv("ISC_API_URL"), *auth, *host = "", *end;
	size_t n = 0;

	if (!url || !*url)
		return ISC_EXIT_OK; /* the Unix socket: never leaves the machine */
	if (strncasecmp(url, "https://", 8) == 0)
		return ISC_EXIT_OK;
	/* http://, or no scheme at all (curl then speaks http): the host must be loopback. */
	auth = strncasecmp(url, "http://", 7) == 0 ? url + 7 : strstr(url, "://") ? NULL : url;
	if (auth) {
		end = auth + strcspn(auth, "/?#");
		host = auth;
		for (const char *p = auth; p < end; p++)
			if (*p == '@')
				host = p + 1; /* user:password@host: the host is what follows */
		if (*host == '[') {
			const char *rb = memchr(host, ']', (size_t)(end - host));
			n = rb ? (size_t)(rb + 1 - host) : 0;
		} else {
			n = strcspn(host, ":/?#");
		}
		if (host_is_loopback(host, n))
			return ISC_EXIT_OK;
	}
	/* The host only: a password in the URL's userinfo stays out of the message. */
	isc_cli_errorf("refusing to send %s to %s%.*s (ISC_API_URL): plain http:// to a host that "
	               "is not loopback carries it in clear, so nothing was sent. Use an https:// "
	               "ISC_API_URL, or run isc on iscd's machine (its Unix socket)",
	               what, auth ? "" : "a URL of another scheme", (int)(n > 200 ? 200 : n), host);
	return ISC_EXIT_FAIL;
}

int isc_client_secret_json(struct isc_cli *cli, const char *what, const char *method,
                           const char *path, json_t *body, long want, json_t **out)
{
	struct isc_reply r;
	char *text;
	int rc;

	*out = NULL;
	if ((rc = isc_client_secret_transport_ok(what))) {
		json_decref(body);
		return rc;
	}
	text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	json_decref(body);
	if (body && !text) {
		isc_cli_errorf("out of memory");
		return ISC_EXIT_FAIL;
	}
	rc = isc_client_request(cli, method, path, text, text ? strlen(text) : 0, &r);
	if (text) {
		OPENSSL_cleanse(text, strlen(text));
		free(text);
	}
	if (rc)
		return rc;
	if (r.status != want) {
		rc = isc_client_fail_in(&r, cli->words);
	} else if (!(*out = json_loadb(r.body, r.len, 0, NULL))) {
		isc_cli_errorf("iscd sent a reply that is not JSON");
		rc = ISC_EXIT_FAIL;
	}
	/* The reply may hold the secret (a new token): wiped before it goes. */
	if (r.body)
		OPENSSL_cleanse(r.body, r.len);
	isc_reply_cleanup(&r);
	return rc;
}
