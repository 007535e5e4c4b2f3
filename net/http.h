/*
 * HTTP for every cloud driver: one request/response model over libcurl, with
 * timeouts, a cap on response size, and a retry loop that retries only what
 * the caller's classifier calls throttled or transient, with exponential
 * backoff and full jitter (sleep = random(0, min(max_delay, base * 2^attempt))).
 *
 * The transport and the clock are injected so unit tests script replies and
 * time; isc_http_transport_curl() is the real one.
 */
#ifndef ISC_NET_HTTP_H
#define ISC_NET_HTTP_H

#include "common/buf.h"
#include "common/clock.h"
#include "common/err.h"

#include <stddef.h>

struct isc_http_header {
	const char *name;
	const char *value;
};

struct isc_http_response;

/*
 * Where a 2xx reply's body goes when the caller does not want it in memory
 * (a dataset download writes it to a file and hashes it as it arrives). A
 * reply that is not 2xx is still buffered in resp->body, for the classifier.
 */
struct isc_http_sink {
	/* Before every attempt: a retried request starts its body over. 0 or an isc code. */
	int (*begin)(void *ctx, struct isc_err *err);
	/*
	 * One piece of a 2xx body, in order; resp's status and headers are complete.
	 * 0, or an isc code (with err set) that aborts the transfer: the request then
	 * fails with that code (retried only if it is retryable).
	 */
	int (*write)(void *ctx, const struct isc_http_response *resp, const void *data, size_t n,
	             struct isc_err *err);
	void *ctx;
};

struct isc_http_request {
	const char *method; /* "GET", "POST", ... */
	const char *url;
	const struct isc_http_header *headers; /* borrowed */
	size_t n_headers;
	const char *body; /* may be NULL */
	size_t body_len;
	const struct isc_http_sink *sink; /* NULL: the body goes to resp->body */
};

struct isc_http_response {
	long status;            /* 0 until a reply arrived */
	struct isc_buf body;    /* owned; capped by the policy's max_response_bytes */
	struct isc_buf headers; /* raw header lines, owned */
};

void isc_http_response_init(struct isc_http_response *r);
void isc_http_response_cleanup(struct isc_http_response *r);

/*
 * One attempt on the wire. Returns 0 when an HTTP reply (any status) arrived;
 * ISC_ETRANSIENT for connect/reset/timeout; ISC_EINVALID for a reply over the cap;
 * a sink's own code when it refused a piece. `streams`: the transport hands a
 * 2xx body to req->sink itself; otherwise isc_http_do passes the buffered body
 * to the sink after the reply (scripted test transports).
 */
struct isc_http_transport {
	int (*send)(void *ctx, const struct isc_http_request *req, long timeout_ms,
	            long connect_timeout_ms, size_t max_response_bytes,
	            struct isc_http_response *resp, struct isc_err *err);
	void *ctx;
	int streams;
};

/*
 * The libcurl transport (thread-safe; curl_global_init happens once). Borrowed.
 * Each request gets a fresh handle, so a connection is not reused.
 */
const struct isc_http_transport *isc_http_transport_curl(void);

/*
 * A libcurl transport that keeps one handle, so consecutive requests to the
 * same host reuse one kept-alive connection (no TCP or TLS handshake per
 * request). Not thread-safe: one per thread or client. Caller frees.
 */
struct isc_http_transport *isc_http_transport_curl_session_new(void);
void isc_http_transport_curl_session_free(struct isc_http_transport *t);

/*
 * Decides what a reply means: 0 for success, otherwise an isc_code with a
 * message in err (a driver parses its cloud's error body here).
 */
typedef int (*isc_http_classify_fn)(void *ctx, const struct isc_http_response *resp,
                                    struct isc_err *err);

/* Default: 2xx ok, 429 throttled, 5xx transient, 401/403 auth, 404 not_found, else invalid. */
int isc_http_classify_status(void *ctx, const struct isc_http_response *resp, struct isc_err *err);

struct isc_http_policy {
	int max_attempts;   /* total tries, >= 1 */
	long base_delay_ms; /* first backoff ceiling */
	long max_delay_ms;  /* backoff ceiling cap */
	long timeout_ms;    /* whole request */
	long connect_timeout_ms;
	size_t max_response_bytes;
	int allow_insecure; /* plain http to a non-loopback host (allow_insecure_endpoint) */
};

/* 5 attempts, 100 ms base, 20 s cap, 30 s timeout, 5 s connect, 8 MiB. */
struct isc_http_policy isc_http_policy_default(void);

struct isc_http_client {
	const struct isc_http_transport *transport; /* borrowed */
	const struct isc_clock *clock;              /* borrowed */
	struct isc_http_policy policy;
	int attempts_made; /* of the last isc_http_do, for tests and logs */
};

void isc_http_client_init(struct isc_http_client *c, const struct isc_http_transport *t,
                          const struct isc_clock *clock);

/*
 * Sends req, retrying throttled/transient outcomes up to policy.max_attempts.
 * On return resp holds the last reply (if any). Returns 0 or the classified code.
 */
int isc_http_do(struct isc_http_client *c, const struct isc_http_request *req,
                isc_http_classify_fn classify, void *classify_ctx, struct isc_http_response *resp,
                struct isc_err *err);

/*
 * Whether url may carry credentials and signed requests: https, or http to a
 * loopback address (127.0.0.0/8, ::1, localhost), or anything http(s) when
 * allow_insecure is set. ISC_EINVALID naming the URL (without its query)
 * otherwise; nothing is sent. isc_http_do applies it to every request with the
 * policy's allow_insecure, so no driver can forget it.
 */
int isc_http_endpoint_check(const char *url, int allow_insecure, struct isc_err *err);

/* 1 when url's host is a loopback address or "localhost". */
int isc_http_url_is_loopback(const char *url);

/* The delay before retry number `attempt` (1-based), drawn with full jitter. */
long isc_http_backoff_ms(const struct isc_http_policy *p, const struct isc_clock *clock,
                         int attempt);

#endif
