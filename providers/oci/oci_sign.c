/*
 * OCI request signing (see oci_sign.h for the rules). The signing string is
 * built from the values that go on the wire, so what is signed is exactly
 * what is sent; the caller adds out->add[] and a Host header to the request.
 */
#include "providers/oci/oci_sign.h"

#include "common/buf.h"

#include <openssl/sha.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

int isc_oci_format_date(int64_t time_ms, char out[32])
{
	static const char *const days[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
	static const char *const months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
	                                     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
	time_t t = (time_t)(time_ms / 1000);
	struct tm tm;

	if (!gmtime_r(&t, &tm) || tm.tm_wday < 0 || tm.tm_wday > 6 || tm.tm_mon < 0 ||
	    tm.tm_mon > 11)
		return ISC_EINVALID;
	snprintf(out, 32, "%s, %02d %s %04d %02d:%02d:%02d GMT", days[tm.tm_wday], tm.tm_mday,
	         months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
	return 0;
}

int isc_oci_method_has_body(const char *method)
{
	return !strcasecmp(method, "POST") || !strcasecmp(method, "PUT") ||
	       !strcasecmp(method, "PATCH");
}

void isc_oci_signed_cleanup(struct isc_oci_signed *s)
{
	if (!s)
		return;
	free(s->signing_string);
	free(s->signature);
	free(s->authorization);
	memset(s, 0, sizeof(*s));
}

/* A header value must not break the signing string or the request into more lines. */
static int one_line(const char *v)
{
	return v && !strpbrk(v, "\r\n");
}

int isc_oci_signing_string(const struct isc_oci_sign_request *req, struct isc_oci_signed *out,
                           struct isc_err *err)
{
	struct isc_buf b;
	unsigned char digest[SHA256_DIGEST_LENGTH];
	int body = isc_oci_method_has_body(req->method);
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (!one_line(req->target) || !one_line(req->host) || !one_line(req->date) ||
	    req->target[0] != '/' || (req->content_type && !one_line(req->content_type)))
		return isc_err_set(err, ISC_EINVALID,
		                   "OCI signing: target, host and date must be one line each");
	if (strlen(req->date) >= sizeof(out->date))
		return isc_err_set(err, ISC_EINVALID, "OCI signing: date too long");
	snprintf(out->date, sizeof(out->date), "%s", req->date);
	snprintf(out->headers, sizeof(out->headers), "date (request-target) host%s",
	         body ? " content-length content-type x-content-sha256" : "");
	isc_buf_init(&b, 0);
	rc = isc_buf_printf(&b, "date: %s\n(request-target): ", req->date);
	for (const char *m = req->method; !rc && *m; m++)
		rc = isc_buf_putc(&b, (char)tolower((unsigned char)*m));
	if (!rc)
		rc = isc_buf_printf(&b, " %s\nhost: %s", req->target, req->host);
	if (!rc && body) {
		SHA256(req->body ? req->body : (const void *)"", req->body_len, digest);
		EVP_EncodeBlock((unsigned char *)out->content_sha256, digest, sizeof(digest));
		snprintf(out->content_length, sizeof(out->content_length), "%zu", req->body_len);
		out->content_type = req->content_type ? req->content_type : "application/json";
		rc = isc_buf_printf(&b,
		                    "\ncontent-length: %s\ncontent-type: %s\nx-content-sha256: %s",
		                    out->content_length, out->content_type, out->content_sha256);
	}
	if (rc) {
		isc_buf_cleanup(&b);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	out->signing_string = isc_buf_detach(&b);
	if (!out->signing_string)
		out->signing_string = strdup("");
	return out->signing_string ? 0 : isc_err_set(err, ISC_ENOMEM, "out of memory");
}

static char *base64(const unsigned char *bin, size_t n)
{
	char *out = malloc(4 * ((n + 2) / 3) + 1);
	if (out)
		EVP_EncodeBlock((unsigned char *)out, bin, (int)n);
	return out;
}

static int rsa_sha256(EVP_PKEY *key, const char *msg, char **out_b64, struct isc_err *err)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	unsigned char *sig = NULL;
	size_t siglen = 0;
	int rc = 0;

	*out_b64 = NULL;
	if (!ctx)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	if (EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, key) != 1 ||
	    EVP_DigestSign(ctx, NULL, &siglen, (const unsigned char *)msg, strlen(msg)) != 1) {
		rc = isc_err_set(err, ISC_EAUTH, "OCI signing: the API key cannot sign (RSA?)");
		goto out;
	}
	sig = malloc(siglen);
	if (!sig) {
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		goto out;
	}
	if (EVP_DigestSign(ctx, sig, &siglen, (const unsigned char *)msg, strlen(msg)) != 1) {
		rc = isc_err_set(err, ISC_EAUTH, "OCI signing: RSA-SHA256 failed");
		goto out;
	}
	*out_b64 = base64(sig, siglen);
	if (!*out_b64)
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
out:
	free(sig);
	EVP_MD_CTX_free(ctx);
	return rc;
}

int isc_oci_sign(EVP_PKEY *key, const char *key_id, const struct isc_oci_sign_request *req,
                 struct isc_oci_signed *out, struct isc_err *err)
{
	int rc = isc_oci_signing_string(req, out, err);

	if (rc)
		return rc;
	if (!one_line(key_id) || strchr(key_id, '"'))
		return isc_err_set(err, ISC_EINVALID, "OCI signing: bad keyId");
	if ((rc = rsa_sha256(key, out->signing_string, &out->signature, err)))
		return rc;
	if (asprintf(&out->authorization,
	             "Signature version=\"1\",headers=\"%s\",keyId=\"%s\",algorithm=\"rsa-sha256\","
	             "signature=\"%s\"",
	             out->headers, key_id, out->signature) < 0) {
		out->authorization = NULL;
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	out->add[out->n_add++] = (struct isc_http_header){"date", out->date};
	if (isc_oci_method_has_body(req->method)) {
		out->add[out->n_add++] =
		    (struct isc_http_header){"content-length", out->content_length};
		out->add[out->n_add++] =
		    (struct isc_http_header){"content-type", out->content_type};
		out->add[out->n_add++] =
		    (struct isc_http_header){"x-content-sha256", out->content_sha256};
	}
	out->add[out->n_add++] = (struct isc_http_header){"authorization", out->authorization};
	return 0;
}
