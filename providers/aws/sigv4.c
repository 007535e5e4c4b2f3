/*
 * AWS Signature Version 4 (header form). Follows the published algorithm and
 * the botocore / aws-c-auth test suites: path normalisation for every service
 * but S3, query parameters decoded and re-encoded with RFC 3986 then sorted by
 * key and value, header values trimmed with inner whitespace (including
 * obs-fold line breaks) collapsed, repeated headers joined with ",".
 * The secret only ever lives in the HMAC key chain, which is wiped.
 */
#include "providers/aws/sigv4.h"
#include "providers/aws/aws_int.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static int is_unreserved(unsigned char c)
{
	return isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

int isc_sigv4_uri_encode(struct isc_buf *out, const char *s, size_t len, int keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		int rc;
		if (is_unreserved(c) || (keep_slash && c == '/')) {
			rc = isc_buf_putc(out, (char)c);
		} else {
			char esc[3] = {'%', hex[c >> 4], hex[c & 15]};
			rc = isc_buf_append(out, esc, 3);
		}
		if (rc)
			return rc;
	}
	return 0;
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Percent-decodes s[0..len) into out; a malformed escape is kept literally. */
static int uri_decode(struct isc_buf *out, const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		int rc;
		if (s[i] == '%' && i + 2 < len && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
			rc = isc_buf_putc(out, (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2])));
			i += 2;
		} else {
			rc = isc_buf_putc(out, s[i]);
		}
		if (rc)
			return rc;
	}
	return 0;
}

void isc_sigv4_hex(const unsigned char *bin, size_t n, char *out)
{
	static const char hex[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hex[bin[i] >> 4];
		out[2 * i + 1] = hex[bin[i] & 15];
	}
	out[2 * n] = '\0';
}

void isc_sigv4_sha256_hex(const void *data, size_t len, char out[65])
{
	unsigned char md[SHA256_DIGEST_LENGTH];
	SHA256(data ? data : (const void *)"", len, md);
	isc_sigv4_hex(md, sizeof(md), out);
}

int isc_sigv4_canonical_uri(struct isc_buf *out, const char *path, size_t len, int normalize)
{
	struct isc_buf norm;
	int rc;

	if (len == 0)
		return isc_buf_putc(out, '/');
	if (!normalize)
		return isc_sigv4_uri_encode(out, path, len, 1);
	/* RFC 3986 remove_dot_segments, plus collapsing empty segments ("//"). */
	isc_buf_init(&norm, 0);
	rc = 0;
	{
		size_t i = 0;
		while (i < len && rc == 0) {
			size_t j = i;
			while (j < len && path[j] != '/')
				j++;
			size_t seg = j - i;
			if (seg == 0 || (seg == 1 && path[i] == '.')) {
				/* skip */
			} else if (seg == 2 && path[i] == '.' && path[i + 1] == '.') {
				while (norm.len > 0 && norm.data[norm.len - 1] != '/')
					norm.len--;
				if (norm.len > 0)
					norm.len--; /* the slash before the popped segment */
				if (norm.data)
					norm.data[norm.len] = '\0';
			} else {
				rc = isc_buf_putc(&norm, '/');
				if (!rc)
					rc = isc_buf_append(&norm, path + i, seg);
			}
			i = j + 1;
		}
	}
	if (!rc && (norm.len == 0 || path[len - 1] == '/'))
		rc = isc_buf_putc(&norm, '/');
	if (!rc)
		rc = isc_sigv4_uri_encode(out, norm.data, norm.len, 1);
	isc_buf_cleanup(&norm);
	return rc;
}

struct qparam {
	char *key; /* encoded */
	char *value;
};

static int qparam_cmp(const void *a, const void *b)
{
	const struct qparam *x = a, *y = b;
	int c = strcmp(x->key, y->key);
	return c ? c : strcmp(x->value, y->value);
}

/* Re-encodes one side of a key=value pair: decode, then RFC 3986 encode. */
static char *query_part(const char *s, size_t len)
{
	struct isc_buf dec, enc;
	char *res = NULL;
	isc_buf_init(&dec, 0);
	isc_buf_init(&enc, 0);
	if (uri_decode(&dec, s, len) == 0 &&
	    isc_sigv4_uri_encode(&enc, dec.data ? dec.data : "", dec.len, 0) == 0 &&
	    isc_buf_puts(&enc, "") == 0)
		res = isc_buf_detach(&enc);
	isc_buf_cleanup(&dec);
	isc_buf_cleanup(&enc);
	return res;
}

int isc_sigv4_canonical_query(struct isc_buf *out, const char *query)
{
	struct qparam *params = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;
	const char *p = query;

	while (p && *p) {
		size_t plen = strcspn(p, "&");
		if (plen > 0) {
			const char *eq = memchr(p, '=', plen);
			size_t klen = eq ? (size_t)(eq - p) : plen;
			if (n == cap) {
				size_t ncap = cap ? cap * 2 : 16;
				struct qparam *np = realloc(params, ncap * sizeof(*np));
				if (!np) {
					rc = ISC_ENOMEM;
					goto out;
				}
				params = np;
				cap = ncap;
			}
			params[n].key = query_part(p, klen);
			params[n].value = eq ? query_part(eq + 1, plen - klen - 1) : strdup("");
			n++;
			if (!params[n - 1].key || !params[n - 1].value) {
				rc = ISC_ENOMEM;
				goto out;
			}
		}
		p += plen;
		if (*p == '&')
			p++;
	}
	if (n > 1)
		qsort(params, n, sizeof(*params), qparam_cmp);
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = isc_buf_printf(out, "%s%s=%s", i ? "&" : "", params[i].key, params[i].value);
out:
	for (size_t i = 0; i < n; i++) {
		free(params[i].key);
		free(params[i].value);
	}
	free(params);
	return rc;
}

struct chdr {
	char *name;   /* lower case */
	char *value;  /* trimmed, whitespace collapsed */
	size_t order; /* position in the request, so repeated headers keep their order */
};

static int chdr_cmp(const void *a, const void *b)
{
	const struct chdr *x = a, *y = b;
	int c = strcmp(x->name, y->name);
	if (c)
		return c;
	return x->order < y->order ? -1 : x->order > y->order;
}

static char *lower_dup(const char *s)
{
	char *d = strdup(s);
	for (char *q = d; q && *q; q++)
		*q = (char)tolower((unsigned char)*q);
	return d;
}

/* Trims and collapses every run of whitespace (space, tab, CR, LF) to one space. */
static char *value_norm(const char *s)
{
	size_t n = strlen(s), o = 0;
	char *d = malloc(n + 1);
	int pending_space = 0;
	if (!d)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (isspace((unsigned char)s[i])) {
			pending_space = o > 0;
			continue;
		}
		if (pending_space)
			d[o++] = ' ';
		pending_space = 0;
		d[o++] = s[i];
	}
	d[o] = '\0';
	return d;
}

void isc_sigv4_signing_key(const char *secret, const char *date8, const char *region,
                           const char *service, unsigned char key[32])
{
	unsigned char k[32];
	unsigned int klen = 32;
	size_t slen = strlen(secret);
	char *seed = malloc(slen + 5);

	if (!seed) {
		memset(key, 0, 32);
		return;
	}
	memcpy(seed, "AWS4", 4);
	memcpy(seed + 4, secret, slen + 1);
	HMAC(EVP_sha256(), seed, (int)(slen + 4), (const unsigned char *)date8, strlen(date8), k,
	     &klen);
	OPENSSL_cleanse(seed, slen + 5);
	free(seed);
	HMAC(EVP_sha256(), k, 32, (const unsigned char *)region, strlen(region), k, &klen);
	HMAC(EVP_sha256(), k, 32, (const unsigned char *)service, strlen(service), k, &klen);
	HMAC(EVP_sha256(), k, 32, (const unsigned char *)"aws4_request", 12, key, &klen);
	OPENSSL_cleanse(k, sizeof(k));
}

/* Frees a string that may have held a session token, wiping it first. */
static void free_wiped(char *p)
{
	if (p)
		OPENSSL_cleanse(p, strlen(p));
	free(p);
}

/* The same for a buffer (its whole allocation). */
static void buf_wipe(struct isc_buf *b)
{
	if (b->data)
		OPENSSL_cleanse(b->data, b->cap);
	isc_buf_cleanup(b);
}

void isc_sigv4_signed_cleanup(struct isc_sigv4_signed *s)
{
	if (!s)
		return;
	/* The canonical request carries x-amz-security-token: the token itself. */
	free_wiped(s->authorization);
	free_wiped(s->canonical_request);
	free_wiped(s->string_to_sign);
	OPENSSL_cleanse(s, sizeof(*s));
}

int isc_sigv4_format_date(int64_t time_ms, char out[17])
{
	time_t t = (time_t)(time_ms / 1000);
	struct tm tm;
	if (!gmtime_r(&t, &tm))
		return ISC_EINVALID;
	strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
	return 0;
}

int isc_sigv4_sign(const struct isc_sigv4_key *key, const struct isc_sigv4_params *p,
                   const struct isc_sigv4_request *req, struct isc_sigv4_signed *out,
                   struct isc_err *err)
{
	struct chdr *hs = NULL;
	size_t nh = 0;
	struct isc_buf creq, sts, signed_list, hdr_lines;
	const char *qmark;
	size_t path_len;
	char date8[9], creq_hash[65];
	unsigned char skey[32], sig[32];
	unsigned int siglen = 32;
	int rc = 0, has_host = 0;
	int sign_token = key->session_token && key->session_token[0] && !p->unsigned_session_token;

	memset(out, 0, sizeof(*out));
	isc_buf_init(&creq, 0);
	isc_buf_init(&sts, 0);
	isc_buf_init(&signed_list, 0);
	isc_buf_init(&hdr_lines, 0);
	if (!key->access_key_id || !key->secret_access_key || !p->region || !p->service)
		return isc_err_set(err, ISC_EAUTH, "SigV4: incomplete credentials or scope");
	if (isc_sigv4_format_date(p->time_ms, out->amz_date))
		return isc_err_set(err, ISC_EINVALID, "SigV4: bad signing time");
	memcpy(date8, out->amz_date, 8);
	date8[8] = '\0';
	if (p->payload_hash) {
		if (strlen(p->payload_hash) >= sizeof(out->content_sha256))
			return isc_err_set(err, ISC_EINVALID, "SigV4: payload hash too long");
		strcpy(out->content_sha256, p->payload_hash);
	} else {
		isc_sigv4_sha256_hex(req->payload, req->payload_len, out->content_sha256);
	}

	hs = calloc(req->n_headers + 3, sizeof(*hs));
	if (!hs) {
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < req->n_headers; i++) {
		hs[nh].name = lower_dup(req->headers[i].name);
		hs[nh].value = value_norm(req->headers[i].value);
		hs[nh].order = nh;
		nh++;
		if (!hs[nh - 1].name || !hs[nh - 1].value) {
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
			goto out;
		}
		if (strcmp(hs[nh - 1].name, "host") == 0)
			has_host = 1;
		if (strcmp(hs[nh - 1].name, "x-amz-date") == 0 ||
		    strcmp(hs[nh - 1].name, "authorization") == 0) {
			rc = isc_err_set(err, ISC_EINVALID, "SigV4: the request already carries %s",
			                 hs[nh - 1].name);
			goto out;
		}
	}
	if (!has_host) {
		rc = isc_err_set(err, ISC_EINVALID, "SigV4: the request has no Host header");
		goto out;
	}
	{
		const char *extra[3][2] = {
		    {"x-amz-date", out->amz_date},
		    {sign_token ? "x-amz-security-token" : NULL, key->session_token},
		    {p->sign_body ? "x-amz-content-sha256" : NULL, out->content_sha256}};
		for (int i = 0; i < 3; i++) {
			if (!extra[i][0])
				continue;
			hs[nh].name = strdup(extra[i][0]);
			hs[nh].value = value_norm(extra[i][1]);
			hs[nh].order = nh;
			nh++;
			if (!hs[nh - 1].name || !hs[nh - 1].value) {
				rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
				goto out;
			}
		}
	}
	qsort(hs, nh, sizeof(*hs), chdr_cmp);

	/* 1-3: method, canonical URI, canonical query string */
	qmark = strchr(req->path, '?');
	path_len = qmark ? (size_t)(qmark - req->path) : strlen(req->path);
	rc = isc_buf_printf(&creq, "%s\n", req->method);
	if (!rc)
		rc = isc_sigv4_canonical_uri(&creq, req->path, path_len, p->normalize_path);
	if (!rc)
		rc = isc_buf_putc(&creq, '\n');
	if (!rc && qmark)
		rc = isc_sigv4_canonical_query(&creq, qmark + 1);
	if (!rc)
		rc = isc_buf_putc(&creq, '\n');
	/* 4-5: canonical headers (repeats joined with ","), signed header list */
	for (size_t i = 0; i < nh && !rc; i++) {
		if (i > 0 && strcmp(hs[i].name, hs[i - 1].name) == 0) {
			rc = isc_buf_printf(&hdr_lines, ",%s", hs[i].value);
			continue;
		}
		if (i > 0)
			rc = isc_buf_putc(&hdr_lines, '\n');
		if (!rc)
			rc = isc_buf_printf(&hdr_lines, "%s:%s", hs[i].name, hs[i].value);
		if (!rc)
			rc = isc_buf_printf(&signed_list, "%s%s", signed_list.len ? ";" : "",
			                    hs[i].name);
	}
	if (!rc)
		rc = isc_buf_printf(&creq, "%s\n\n%s\n%s", isc_buf_cstr(&hdr_lines),
		                    isc_buf_cstr(&signed_list), out->content_sha256);
	if (rc) {
		rc = isc_err_set(err, rc, "SigV4: cannot build the canonical request");
		goto out;
	}
	/* String to sign, key, signature. */
	isc_sigv4_sha256_hex(creq.data, creq.len, creq_hash);
	rc = isc_buf_printf(&sts, "AWS4-HMAC-SHA256\n%s\n%s/%s/%s/aws4_request\n%s", out->amz_date,
	                    date8, p->region, p->service, creq_hash);
	if (rc) {
		rc = isc_err_set(err, rc, "SigV4: out of memory");
		goto out;
	}
	isc_sigv4_signing_key(key->secret_access_key, date8, p->region, p->service, skey);
	HMAC(EVP_sha256(), skey, 32, (const unsigned char *)sts.data, sts.len, sig, &siglen);
	OPENSSL_cleanse(skey, sizeof(skey));
	isc_sigv4_hex(sig, 32, out->signature);
	if (asprintf(&out->authorization,
	             "AWS4-HMAC-SHA256 Credential=%s/%s/%s/%s/aws4_request, SignedHeaders=%s, "
	             "Signature=%s",
	             key->access_key_id, date8, p->region, p->service, isc_buf_cstr(&signed_list),
	             out->signature) < 0) {
		out->authorization = NULL;
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		goto out;
	}
	out->canonical_request = isc_buf_detach(&creq);
	out->string_to_sign = isc_buf_detach(&sts);
	out->add[out->n_add++] = (struct isc_http_header){"X-Amz-Date", out->amz_date};
	if (key->session_token && key->session_token[0])
		out->add[out->n_add++] =
		    (struct isc_http_header){"X-Amz-Security-Token", key->session_token};
	if (p->sign_body)
		out->add[out->n_add++] =
		    (struct isc_http_header){"X-Amz-Content-Sha256", out->content_sha256};
	out->add[out->n_add++] = (struct isc_http_header){"Authorization", out->authorization};
out:
	for (size_t i = 0; i < nh; i++) {
		free(hs[i].name);
		free_wiped(hs[i].value); /* may be the token */
	}
	free(hs);
	buf_wipe(&creq);
	buf_wipe(&sts);
	isc_buf_cleanup(&signed_list);
	buf_wipe(&hdr_lines);
	return rc;
}

/*
 * The canonical header block and signed-header list of a presigned request:
 * only the request's own headers (the date and token travel in the query).
 */
static int presign_headers(const struct isc_sigv4_request *req, struct isc_buf *lines,
                           struct isc_buf *list, struct isc_err *err)
{
	struct chdr *hs = calloc(req->n_headers ? req->n_headers : 1, sizeof(*hs));
	size_t nh = 0;
	int rc = 0, has_host = 0;
	if (!hs)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	for (size_t i = 0; i < req->n_headers; i++) {
		hs[nh].name = lower_dup(req->headers[i].name);
		hs[nh].value = value_norm(req->headers[i].value);
		hs[nh].order = nh;
		nh++;
		if (!hs[nh - 1].name || !hs[nh - 1].value) {
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
			goto out;
		}
		if (strcmp(hs[nh - 1].name, "host") == 0)
			has_host = 1;
	}
	if (!has_host) {
		rc = isc_err_set(err, ISC_EINVALID, "SigV4: the request has no Host header");
		goto out;
	}
	qsort(hs, nh, sizeof(*hs), chdr_cmp);
	for (size_t i = 0; i < nh && !rc; i++) {
		if (i > 0 && strcmp(hs[i].name, hs[i - 1].name) == 0) {
			rc = isc_buf_printf(lines, ",%s", hs[i].value);
			continue;
		}
		if (i > 0)
			rc = isc_buf_putc(lines, '\n');
		if (!rc)
			rc = isc_buf_printf(lines, "%s:%s", hs[i].name, hs[i].value);
		if (!rc)
			rc = isc_buf_printf(list, "%s%s", list->len ? ";" : "", hs[i].name);
	}
	if (rc)
		rc = isc_err_set(err, rc, "SigV4: cannot build the canonical headers");
out:
	for (size_t i = 0; i < nh; i++) {
		free(hs[i].name);
		free(hs[i].value);
	}
	free(hs);
	return rc;
}

/* key=value&... with both sides RFC 3986 encoded (the query of a presigned URL). */
static int put_param(struct isc_buf *b, const char *k, const char *v)
{
	int rc = isc_buf_printf(b, "%s%s=", b->len ? "&" : "", k);
	if (!rc)
		rc = isc_sigv4_uri_encode(b, v, strlen(v), 0);
	return rc;
}

int isc_sigv4_presign(const struct isc_sigv4_key *key, const struct isc_sigv4_params *p,
                      const struct isc_sigv4_request *req, long expires_s,
                      struct isc_sigv4_presigned *out, struct isc_err *err)
{
	struct isc_buf lines, list, ours, all, creq, sts;
	char amz_date[17], date8[9], payload_hash[65], creq_hash[65], expires[24], *cred = NULL;
	unsigned char skey[32], sig[32];
	unsigned int siglen = 32;
	const char *qmark;
	size_t path_len;
	int rc = 0;
	int token = key->session_token && key->session_token[0];
	int sign_token = token && !p->unsigned_session_token;

	memset(out, 0, sizeof(*out));
	isc_buf_init(&lines, 0);
	isc_buf_init(&list, 0);
	isc_buf_init(&ours, 0);
	isc_buf_init(&all, 0);
	isc_buf_init(&creq, 0);
	isc_buf_init(&sts, 0);
	if (!key->access_key_id || !key->secret_access_key || !p->region || !p->service)
		return isc_err_set(err, ISC_EAUTH, "SigV4: incomplete credentials or scope");
	if (expires_s < 1 || expires_s > 604800)
		return isc_err_set(err, ISC_EINVALID,
		                   "SigV4: a presigned URL lives 1..604800 s, not %ld", expires_s);
	if (isc_sigv4_format_date(p->time_ms, amz_date))
		return isc_err_set(err, ISC_EINVALID, "SigV4: bad signing time");
	memcpy(date8, amz_date, 8);
	date8[8] = '\0';
	if (p->payload_hash) {
		if (strlen(p->payload_hash) >= sizeof(payload_hash))
			return isc_err_set(err, ISC_EINVALID, "SigV4: payload hash too long");
		strcpy(payload_hash, p->payload_hash);
	} else {
		isc_sigv4_sha256_hex(req->payload, req->payload_len, payload_hash);
	}
	if ((rc = presign_headers(req, &lines, &list, err)))
		goto out;
	snprintf(expires, sizeof(expires), "%ld", expires_s);
	if (asprintf(&cred, "%s/%s/%s/%s/aws4_request", key->access_key_id, date8, p->region,
	             p->service) < 0) {
		cred = NULL;
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		goto out;
	}
	rc = put_param(&ours, "X-Amz-Algorithm", "AWS4-HMAC-SHA256");
	rc = rc ? rc : put_param(&ours, "X-Amz-Credential", cred);
	rc = rc ? rc : put_param(&ours, "X-Amz-Date", amz_date);
	rc = rc ? rc : put_param(&ours, "X-Amz-Expires", expires);
	if (sign_token)
		rc = rc ? rc : put_param(&ours, "X-Amz-Security-Token", key->session_token);
	rc = rc ? rc : put_param(&ours, "X-Amz-SignedHeaders", isc_buf_cstr(&list));
	/* The request's own query and ours, sorted together into the canonical query. */
	qmark = strchr(req->path, '?');
	path_len = qmark ? (size_t)(qmark - req->path) : strlen(req->path);
	if (!rc && qmark && qmark[1])
		rc = isc_buf_printf(&all, "%s&", qmark + 1);
	rc = rc ? rc : isc_buf_puts(&all, isc_buf_cstr(&ours));
	rc = rc ? rc : isc_buf_printf(&creq, "%s\n", req->method);
	rc = rc ? rc : isc_sigv4_canonical_uri(&creq, req->path, path_len, p->normalize_path);
	rc = rc ? rc : isc_buf_putc(&creq, '\n');
	rc = rc ? rc : isc_sigv4_canonical_query(&creq, isc_buf_cstr(&all));
	rc = rc ? rc
	        : isc_buf_printf(&creq, "\n%s\n\n%s\n%s", isc_buf_cstr(&lines), isc_buf_cstr(&list),
	                         payload_hash);
	if (rc) {
		rc = isc_err_set(err, rc, "SigV4: cannot build the canonical request");
		goto out;
	}
	isc_sigv4_sha256_hex(creq.data, creq.len, creq_hash);
	if ((rc = isc_buf_printf(&sts, "AWS4-HMAC-SHA256\n%s\n%s/%s/%s/aws4_request\n%s", amz_date,
	                         date8, p->region, p->service, creq_hash))) {
		rc = isc_err_set(err, rc, "SigV4: out of memory");
		goto out;
	}
	isc_sigv4_signing_key(key->secret_access_key, date8, p->region, p->service, skey);
	HMAC(EVP_sha256(), skey, 32, (const unsigned char *)sts.data, sts.len, sig, &siglen);
	OPENSSL_cleanse(skey, sizeof(skey));
	isc_sigv4_hex(sig, 32, out->signature);
	/* A token added after signing (some STS-style flows) is not in the canonical query. */
	if (token && !sign_token)
		rc = put_param(&all, "X-Amz-Security-Token", key->session_token);
	rc = rc ? rc : put_param(&all, "X-Amz-Signature", out->signature);
	if (rc) {
		rc = isc_err_set(err, rc, "SigV4: out of memory");
		goto out;
	}
	out->query = isc_buf_detach(&all);
	out->canonical_request = isc_buf_detach(&creq);
	out->string_to_sign = isc_buf_detach(&sts);
out:
	free(cred);
	isc_buf_cleanup(&lines);
	isc_buf_cleanup(&list);
	buf_wipe(&ours);
	buf_wipe(&all);
	buf_wipe(&creq);
	buf_wipe(&sts);
	return rc;
}

void isc_sigv4_presigned_cleanup(struct isc_sigv4_presigned *s)
{
	if (!s)
		return;
	free_wiped(s->query);
	free_wiped(s->canonical_request);
	free_wiped(s->string_to_sign);
	OPENSSL_cleanse(s, sizeof(*s));
}
