/*
 * AWS Signature Version 4, Authorization-header form: the canonical request,
 * the string to sign, the derived key and the header, for any service (EC2,
 * STS). Time comes from the caller so tests can fix the signing moment.
 */
#ifndef ISC_PROVIDERS_AWS_SIGV4_H
#define ISC_PROVIDERS_AWS_SIGV4_H

#include "common/err.h"
#include "net/http.h"

#include <stddef.h>
#include <stdint.h>

/* Borrowed credentials; the signer copies nothing but derived, wiped keys. */
struct isc_sigv4_key {
	const char *access_key_id;
	const char *secret_access_key;
	const char *session_token; /* NULL for long-term keys */
};

struct isc_sigv4_params {
	const char *region;
	const char *service;        /* "ec2", "sts", ... */
	int64_t time_ms;            /* the signing moment, ms since the epoch */
	int normalize_path;         /* remove dot segments and repeated slashes (all but S3) */
	int sign_body;              /* add and sign x-amz-content-sha256 */
	int unsigned_session_token; /* add X-Amz-Security-Token after signing, unsigned */
	/*
	 * The payload hash to sign instead of SHA-256(payload): S3's "UNSIGNED-PAYLOAD"
	 * (presigned URLs, streamed uploads). NULL: hash the payload.
	 */
	const char *payload_hash;
};

struct isc_sigv4_request {
	const char *method;
	const char *path;                      /* raw path, optionally "?query" */
	const struct isc_http_header *headers; /* must include Host; borrowed */
	size_t n_headers;
	const void *payload; /* may be NULL when payload_len is 0 */
	size_t payload_len;
};

struct isc_sigv4_signed {
	/* Headers to add to the request, in order; they point into this struct. */
	struct isc_http_header add[4];
	size_t n_add;
	char amz_date[17];       /* 20150830T123600Z */
	char content_sha256[65]; /* hex SHA-256 of the payload */
	char *authorization;     /* owned */
	/* Intermediates, kept for tests and debugging (no secret in them). */
	char *canonical_request; /* owned */
	char *string_to_sign;    /* owned */
	char signature[65];
};

/* Signs req; out must be cleaned up even on failure. */
int isc_sigv4_sign(const struct isc_sigv4_key *key, const struct isc_sigv4_params *p,
                   const struct isc_sigv4_request *req, struct isc_sigv4_signed *out,
                   struct isc_err *err);
void isc_sigv4_signed_cleanup(struct isc_sigv4_signed *s);

/* A presigned request (query-string SigV4): what to put after the path's '?'. */
struct isc_sigv4_presigned {
	char *
	    query; /* owned: the request's own parameters, the X-Amz-* ones, X-Amz-Signature last */
	char *canonical_request; /* owned, for tests */
	char *string_to_sign;    /* owned, for tests */
	char signature[65];
};

/*
 * Presigns req for expires_s seconds (1..604800): the signature goes into the
 * query (X-Amz-Algorithm, -Credential, -Date, -Expires, -SignedHeaders,
 * -Security-Token, -Signature) instead of an Authorization header, so anyone
 * holding the URL can make exactly this request until it expires, without the
 * secret. Every header of req is signed (Host at least). p->sign_body is
 * ignored; p->payload_hash as for isc_sigv4_sign. out must be cleaned up even
 * on failure. The query carries the session token: treat it as a secret.
 */
int isc_sigv4_presign(const struct isc_sigv4_key *key, const struct isc_sigv4_params *p,
                      const struct isc_sigv4_request *req, long expires_s,
                      struct isc_sigv4_presigned *out, struct isc_err *err);
void isc_sigv4_presigned_cleanup(struct isc_sigv4_presigned *s);

/* RFC 3986 percent-encoding as SigV4 wants it (unreserved kept, %XX upper case). */
int isc_sigv4_uri_encode(struct isc_buf *out, const char *s, size_t len, int keep_slash);

#endif
