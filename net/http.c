/*
 * The HTTP layer: a libcurl transport, and the retry loop every cloud driver
 * goes through. Only outcomes the caller's classifier calls throttled or
 * transient are retried; the delay before retry n is drawn uniformly from
 * [0, min(max_delay, base * 2^(n-1))] ("full jitter"), so many brokers backing
 * off from one throttled account do not retry in lockstep.
 */
#include "net/http.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <openssl/crypto.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void isc_http_response_init(struct isc_http_response *r)
{
	r->status = 0;
	isc_buf_init(&r->body, 0);
	isc_buf_init(&r->headers, 64 * 1024);
}

void isc_http_response_cleanup(struct isc_http_response *r)
{
	isc_buf_cleanup(&r->body);
	isc_buf_cleanup(&r->headers);
	r->status = 0;
}

struct isc_http_policy isc_http_policy_default(void)
{
	struct isc_http_policy p = {
	    .max_attempts = 5,
	    .base_delay_ms = 100,
	    .max_delay_ms = 20000,
	    .timeout_ms = 30000,
	    .connect_timeout_ms = 5000,
	    .max_response_bytes = 8 * 1024 * 1024,
	};
	return p;
}

void isc_http_client_init(struct isc_http_client *c, const struct isc_http_transport *t,
                          const struct isc_clock *clock)
{
	c->transport = t ? t : isc_http_transport_curl();
	c->clock = clock ? clock : isc_clock_system();
	c->policy = isc_http_policy_default();
	c->attempts_made = 0;
}

int isc_http_classify_status(void *ctx, const struct isc_http_response *resp, struct isc_err *err)
{
	long s = resp->status;
	(void)ctx;
	if (s >= 200 && s < 300)
		return 0;
	if (s == 429)
		return isc_err_set(err, ISC_ETHROTTLED, "HTTP 429: too many requests");
	if (s >= 500)
		return isc_err_set(err, ISC_ETRANSIENT, "HTTP %ld: server error", s);
	if (s == 401 || s == 403)
		return isc_err_set(err, ISC_EAUTH, "HTTP %ld: not authorised", s);
	if (s == 404)
		return isc_err_set(err, ISC_ENOTFOUND, "HTTP 404: not found");
	return isc_err_set(err, ISC_EINVALID, "HTTP %ld: request refused", s);
}

long isc_http_backoff_ms(const struct isc_http_policy *p, const struct isc_clock *clock,
                         int attempt)
{
	long ceiling = p->base_delay_ms;
	for (int i = 1; i < attempt && ceiling < p->max_delay_ms; i++)
		ceiling *= 2;
	if (ceiling > p->max_delay_ms)
		ceiling = p->max_delay_ms;
	if (ceiling <= 0)
		return 0;
	return (long)(clock->random_u64(clock->ctx) % (uint64_t)(ceiling + 1));
}

/* The URL without its query string, so errors never echo signed parameters. */
static void url_for_message(const char *url, char *out, size_t cap)
{
	size_t n = strcspn(url, "?#");
	if (n >= cap)
		n = cap - 1;
	memcpy(out, url, n);
	out[n] = '\0';
}

/* The host of url ("[::1]" without brackets) into out; 0, or -1 when there is none. */
static int url_host(const char *url, char *out, size_t cap)
{
	const char *p = strstr(url, "://"), *end;
	size_t auth_len, n;

	if (!p)
		return -1;
	p += 3;
	auth_len = strcspn(p, "/?#");
	/* userinfo@host: the host is after the last '@' of the authority */
	for (const char *at = p; (at = memchr(at, '@', auth_len - (size_t)(at - p))) != NULL;) {
		auth_len -= (size_t)(at + 1 - p);
		p = at + 1;
		at = p;
	}
	if (*p == '[') {
		end = memchr(p, ']', auth_len);
		if (!end)
			return -1;
		p++;
		n = (size_t)(end - p);
	} else {
		end = memchr(p, ':', auth_len);
		n = end ? (size_t)(end - p) : auth_len;
	}
	if (n == 0 || n >= cap)
		return -1;
	memcpy(out, p, n);
	out[n] = '\0';
	return 0;
}

int isc_http_url_is_loopback(const char *url)
{
	char host[256];
	struct in_addr v4;
	struct in6_addr v6;

	if (url_host(url, host, sizeof(host)) != 0)
		return 0;
	/* RFC 6761: every name under .localhost is loopback (curl resolves them so itself). */
	if (strcasecmp(host, "localhost") == 0 ||
	    (strlen(host) > 10 && strcasecmp(host + strlen(host) - 10, ".localhost") == 0))
		return 1;
	if (inet_pton(AF_INET, host, &v4) == 1)
		return (ntohl(v4.s_addr) >> 24) == 127;
	if (inet_pton(AF_INET6, host, &v6) == 1)
		return IN6_IS_ADDR_LOOPBACK(&v6) ||
		       (IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127);
	return 0;
}

int isc_http_endpoint_check(const char *url, int allow_insecure, struct isc_err *err)
{
	char where[256];

	url_for_message(url, where, sizeof(where));
	if (strncasecmp(url, "https://", 8) == 0)
		return 0;
	if (strncasecmp(url, "http://", 7) != 0)
		return isc_err_set(err, ISC_EINVALID, "endpoint '%s' is not an http(s) URL", where);
	if (allow_insecure || isc_http_url_is_loopback(url))
		return 0;
	return isc_err_set(err, ISC_EINVALID,
	                   "endpoint '%s' is plain http to a host that is not loopback: "
	                   "credentials and signed requests would travel in clear text (use "
	                   "https, or set allow_insecure_endpoint = true for this provider)",
	                   where);
}

int isc_http_do(struct isc_http_client *c, const struct isc_http_request *req,
                isc_http_classify_fn classify, void *classify_ctx, struct isc_http_response *resp,
                struct isc_err *err)
{
	int attempt, rc = ISC_ETRANSIENT;
	int max = c->policy.max_attempts > 0 ? c->policy.max_attempts : 1;

	if (!classify)
		classify = isc_http_classify_status;
	c->attempts_made = 0;
	/* Before any connection: a request that would leak in clear text is never sent. */
	if ((rc = isc_http_endpoint_check(req->url, c->policy.allow_insecure, err)))
		return rc;
	/*
	 * libcurl sends a header line as given, so a CR or LF inside a name or value (a
	 * caller's credential, say) would add headers of someone else's choosing: never
	 * sent. The header is named, its value (perhaps a token) is not.
	 */
	for (size_t i = 0; i < req->n_headers; i++)
		if (strpbrk(req->headers[i].name, "\r\n:") ||
		    strpbrk(req->headers[i].value, "\r\n"))
			return isc_err_set(
			    err, ISC_EINVALID,
			    "HTTP header '%.64s' holds a CR or LF (or its name a ':'); "
			    "request not sent",
			    req->headers[i].name);
	for (attempt = 1; attempt <= max; attempt++) {
		isc_buf_reset(&resp->body);
		isc_buf_reset(&resp->headers);
		resp->status = 0;
		c->attempts_made = attempt;
		if (req->sink && req->sink->begin && (rc = req->sink->begin(req->sink->ctx, err)))
			return rc;
		rc = c->transport->send(c->transport->ctx, req, c->policy.timeout_ms,
		                        c->policy.connect_timeout_ms, c->policy.max_response_bytes,
		                        resp, err);
		if (rc == 0)
			rc = classify(classify_ctx, resp, err);
		/* A transport that buffered a 2xx body: the sink gets it now, in one piece. */
		if (rc == 0 && req->sink && !c->transport->streams && resp->body.len) {
			rc = req->sink->write(req->sink->ctx, resp, resp->body.data, resp->body.len,
			                      err);
			isc_buf_reset(&resp->body);
		}
		if (rc == 0 || !isc_code_is_retryable(rc))
			return rc;
		if (attempt < max)
			c->clock->sleep_ms(c->clock->ctx,
			                   isc_http_backoff_ms(&c->policy, c->clock, attempt));
	}
	if (err)
		isc_err_wrap(err, "gave up after %d attempts", max);
	return rc;
}

/* ---- the libcurl transport ---- */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_init_once(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

struct sink {
	struct isc_buf *buf;
	int overflow;
	/* Streaming a 2xx body (req->sink): the handle to ask the status, the reply so far. */
	const struct isc_http_sink *to;
	CURL *h;
	struct isc_http_response *resp;
	int sink_rc;
	struct isc_err sink_err;
};

static size_t write_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	struct sink *s = userdata;
	size_t n = size * nmemb;
	if (s->to) {
		long status = 0;
		curl_easy_getinfo(s->h, CURLINFO_RESPONSE_CODE, &status);
		if (status >= 200 && status < 300) {
			s->resp->status = status;
			s->sink_rc = s->to->write(s->to->ctx, s->resp, ptr, n, &s->sink_err);
			return s->sink_rc ? 0 : n; /* 0 aborts the transfer */
		}
	}
	if (isc_buf_append(s->buf, ptr, n) != 0) {
		s->overflow = 1;
		return 0; /* aborts the transfer */
	}
	return n;
}

/* One request on handle h (fresh, or reset and keeping its live connections). */
static int curl_send_on(CURL *h, const struct isc_http_request *req, long timeout_ms,
                        long connect_timeout_ms, size_t max_response_bytes,
                        struct isc_http_response *resp, struct isc_err *err)
{
	CURLcode cc;
	struct curl_slist *hdrs = NULL;
	struct sink body = {&resp->body, 0, req->sink, h, resp, 0, {0}}, head = {&resp->headers, 0};
	char errbuf[CURL_ERROR_SIZE] = "";
	char where[256];
	int rc = 0;

	resp->body.max = max_response_bytes;
	for (size_t i = 0; i < req->n_headers; i++) {
		char *line = NULL;
		struct curl_slist *next;
		if (asprintf(&line, "%s: %s", req->headers[i].name, req->headers[i].value) < 0) {
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
			goto out;
		}
		next = curl_slist_append(hdrs, line);
		OPENSSL_cleanse(line, strlen(line)); /* a header may carry a session token */
		free(line);
		if (!next) {
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
			goto out;
		}
		hdrs = next;
	}
	/* curl would add "Expect: 100-continue" to larger POSTs: an extra round trip for nothing.
	 */
	hdrs = curl_slist_append(hdrs, "Expect:");
	curl_easy_setopt(h, CURLOPT_URL, req->url);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req->method);
	if (req->body) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, req->body);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
	} else if (strcmp(req->method, "GET") == 0) {
		curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
	} else if (strcmp(req->method, "HEAD") == 0) {
		/* A HEAD reply announces a Content-Length but carries no body: don't wait for one.
		 */
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	}
	/*
	 * A streamed body arrives in larger pieces: fewer callbacks and write(2)s. 64 KiB,
	 * not more: the dataset cache streams on several connections at once, each with
	 * its own buffer, and iscd's memory must not grow with them (docs/datasets.md).
	 */
	if (req->sink)
		curl_easy_setopt(h, CURLOPT_BUFFERSIZE, 64L * 1024);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, write_cb);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, &head);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, connect_timeout_ms);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
	cc = curl_easy_perform(h);
	url_for_message(req->url, where, sizeof(where));
	if (body.sink_rc) {
		rc = body.sink_rc;
		if (err)
			*err = body.sink_err;
	} else if (body.overflow) {
		rc = isc_err_set(err, ISC_EINVALID, "%s: reply larger than %zu bytes", where,
		                 max_response_bytes);
	} else if (cc != CURLE_OK) {
		rc = isc_err_set(err, ISC_ETRANSIENT, "cannot reach %s: %s", where,
		                 errbuf[0] ? errbuf : curl_easy_strerror(cc));
	} else {
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &resp->status);
	}
out:
	for (struct curl_slist *l = hdrs; l; l = l->next)
		OPENSSL_cleanse(l->data, strlen(l->data));
	curl_slist_free_all(hdrs);
	/* The handle keeps no pointer to our locals or the freed header list. */
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
	return rc;
}

static int curl_send(void *ctx, const struct isc_http_request *req, long timeout_ms,
                     long connect_timeout_ms, size_t max_response_bytes,
                     struct isc_http_response *resp, struct isc_err *err)
{
	CURL *h;
	int rc;
	(void)ctx;

	pthread_once(&curl_once, curl_init_once);
	h = curl_easy_init();
	if (!h)
		return isc_err_set(err, ISC_ENOMEM, "cannot create an HTTP handle");
	rc = curl_send_on(h, req, timeout_ms, connect_timeout_ms, max_response_bytes, resp, err);
	curl_easy_cleanup(h);
	return rc;
}

static const struct isc_http_transport curl_transport = {
    .send = curl_send, .ctx = NULL, .streams = 1};

const struct isc_http_transport *isc_http_transport_curl(void)
{
	return &curl_transport;
}

/* ---- a kept-alive session ---- */

static int session_send(void *ctx, const struct isc_http_request *req, long timeout_ms,
                        long connect_timeout_ms, size_t max_response_bytes,
                        struct isc_http_response *resp, struct isc_err *err)
{
	CURL *h = ctx;
	/* Options back to defaults; the connection cache survives a reset. */
	curl_easy_reset(h);
	return curl_send_on(h, req, timeout_ms, connect_timeout_ms, max_response_bytes, resp, err);
}

struct isc_http_transport *isc_http_transport_curl_session_new(void)
{
	struct isc_http_transport *t = calloc(1, sizeof(*t));
	pthread_once(&curl_once, curl_init_once);
	if (!t)
		return NULL;
	t->ctx = curl_easy_init();
	if (!t->ctx) {
		free(t);
		return NULL;
	}
	t->send = session_send;
	t->streams = 1;
	return t;
}

void isc_http_transport_curl_session_free(struct isc_http_transport *t)
{
	if (!t)
		return;
	curl_easy_cleanup(t->ctx);
	free(t);
}
