/*
 * OCI request signing (Signature Version 1, draft-cavage-http-signatures-08
 * with rsa-sha256 in the Authorization header), as OCI's SDKs do it:
 *   - every request signs `date (request-target) host`, in that order;
 *   - POST, PUT and PATCH also sign `content-length content-type
 *     x-content-sha256`, where x-content-sha256 is the base64 SHA-256 of the
 *     body (an empty body included);
 *   - the signing string is one `name: value` line per signed header, joined
 *     by "\n"; (request-target) is "<lowercase method> <path>?<query as sent>";
 *   - the signature is RSASSA-PKCS1-v1_5 over SHA-256, base64.
 * The moment of signing comes from the caller, so a test fixes it.
 */
#ifndef ISC_PROVIDERS_OCI_OCI_SIGN_H
#define ISC_PROVIDERS_OCI_OCI_SIGN_H

#include "common/err.h"
#include "net/http.h"

#include <openssl/evp.h>

#include <stddef.h>
#include <stdint.h>

struct isc_oci_sign_request {
	const char *method;       /* "GET", "POST", ... (any case) */
	const char *target;       /* path and query exactly as sent: "/20160918/instances?..." */
	const char *host;         /* the Host header value (authority of the URL) */
	const char *date;         /* RFC 1123, e.g. "Thu, 05 Jan 2014 21:31:40 GMT" */
	const char *content_type; /* for bodies; NULL means "application/json" */
	const void *body;         /* may be NULL when body_len is 0 */
	size_t body_len;
};

struct isc_oci_signed {
	/* Headers to add to the request (besides Host), pointing into this struct. */
	struct isc_http_header add[5];
	size_t n_add;
	char date[32];
	char content_length[24];
	char content_sha256[48]; /* base64 of 32 bytes */
	const char *content_type;
	char headers[96];     /* the signed-header list, space separated */
	char *signing_string; /* owned; no secret in it */
	char *signature;      /* owned, base64 */
	char *authorization;  /* owned */
};

/* "Thu, 05 Jan 2014 21:31:40 GMT" for time_ms, independent of the locale. */
int isc_oci_format_date(int64_t time_ms, char out[32]);

/* True when the method carries a signed body (POST, PUT, PATCH). */
int isc_oci_method_has_body(const char *method);

/*
 * Builds the signing string of req (no key needed): out->headers,
 * out->signing_string and, for bodies, the body headers. out must be cleaned
 * up even on failure.
 */
int isc_oci_signing_string(const struct isc_oci_sign_request *req, struct isc_oci_signed *out,
                           struct isc_err *err);

/*
 * Signs req with key under key_id ("<tenancy>/<user>/<fingerprint>"): the
 * signing string, the signature, the Authorization header and the headers
 * to add. out must be cleaned up even on failure.
 */
int isc_oci_sign(EVP_PKEY *key, const char *key_id, const struct isc_oci_sign_request *req,
                 struct isc_oci_signed *out, struct isc_err *err);

void isc_oci_signed_cleanup(struct isc_oci_signed *s);

#endif
