/*
 * The S3 client (see s3.h): request targets for both addressing styles, the
 * S3 flavour of SigV4 (no path normalisation, x-amz-content-sha256 always
 * present), S3's XML errors mapped onto the project's codes, and the two
 * replies we parse (ListObjectsV2, and HeadObject's headers).
 */
#include "providers/aws/s3.h"
#include "providers/aws/sigv4.h"

#include <libxml/parser.h>
#include <libxml/tree.h>
#include <openssl/crypto.h>

#include <ctype.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define S3_MAX_GET       (64u << 20) /* one ranged GET */
#define S3_MAX_XML       (8u << 20)  /* a listing page or an error */
#define S3_EMPTY_SHA256  "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define S3_MAX_KEY_BYTES 1024

struct isc_s3_client {
	char *scheme;    /* "https" or "http" */
	char *authority; /* "host[:port]" of the endpoint */
	int aws_host;    /* the endpoint is *.amazonaws.com */
	char region[64];
	enum isc_s3_addressing addressing;
	char *akid, *secret, *token; /* secret and token wiped on free */
	const struct isc_clock *clock;
	struct isc_http_client http;
	struct isc_http_transport *own; /* the kept-alive session when no transport was given */
};

static void wipe_free(char *s)
{
	if (s)
		OPENSSL_cleanse(s, strlen(s));
	free(s);
}

static const char *nonempty(const char *s)
{
	return s && *s ? s : NULL;
}

char *isc_s3_endpoint_resolve(const char *configured, const char *region)
{
	/* A configured endpoint is the caller's resolution (datasets: [providers.aws]
	 * endpoint_s3 > AWS_ENDPOINT_URL_S3 > AWS_ENDPOINT_URL > endpoint, as for EC2 and STS):
	 * the environment must not override it again. */
	const char *e = nonempty(configured);
	char *out = NULL;
	size_t n;
	if (!e)
		e = nonempty(getenv("AWS_ENDPOINT_URL_S3"));
	if (!e)
		e = nonempty(getenv("AWS_ENDPOINT_URL"));
	if (e)
		out = strdup(e);
	else if (asprintf(&out, "https://s3.%s.amazonaws.com", region ? region : "us-east-1") < 0)
		out = NULL;
	n = out ? strlen(out) : 0;
	while (n > 0 && out[n - 1] == '/')
		out[--n] = '\0';
	return out;
}

void isc_s3_client_free(struct isc_s3_client *c)
{
	if (!c)
		return;
	free(c->scheme);
	free(c->authority);
	free(c->akid);
	wipe_free(c->secret);
	wipe_free(c->token);
	isc_http_transport_curl_session_free(c->own);
	free(c);
}

int isc_s3_client_new(const struct isc_s3_config *cfg, const struct isc_http_transport *t,
                      const struct isc_clock *clock, struct isc_s3_client **out,
                      struct isc_err *err)
{
	struct isc_s3_client *c;
	char *endpoint = NULL;
	const char *p, *rest;
	int rc = 0;

	*out = NULL;
	if (!cfg->access_key_id || !cfg->secret_access_key)
		return isc_err_set(err, ISC_EAUTH, "S3: no credentials");
	if (!cfg->region || !cfg->region[0] || strlen(cfg->region) >= 64)
		return isc_err_set(err, ISC_EINVALID, "S3: no region");
	c = calloc(1, sizeof(*c));
	endpoint = isc_s3_endpoint_resolve(cfg->endpoint, cfg->region);
	if (!c || !endpoint) {
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		goto out;
	}
	if ((rc = isc_http_endpoint_check(endpoint, cfg->allow_insecure, err)))
		goto out;
	p = strstr(endpoint, "://");
	rest = p + 3;
	if (rest[strcspn(rest, "/?#")] != '\0') {
		rc = isc_err_set(err, ISC_EINVALID,
		                 "S3 endpoint '%s' has a path; give only scheme, host and port",
		                 endpoint);
		goto out;
	}
	c->scheme = strndup(endpoint, (size_t)(p - endpoint));
	c->authority = strdup(rest);
	c->akid = strdup(cfg->access_key_id);
	c->secret = strdup(cfg->secret_access_key);
	c->token = cfg->session_token && cfg->session_token[0] ? strdup(cfg->session_token) : NULL;
	if (!c->scheme || !c->authority || !c->akid || !c->secret ||
	    (cfg->session_token && cfg->session_token[0] && !c->token)) {
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		goto out;
	}
	if (!c->authority[0] || strchr(c->authority, '@')) {
		rc =
		    isc_err_set(err, ISC_EINVALID, "S3 endpoint '%s' has no usable host", endpoint);
		goto out;
	}
	{
		size_t hl = strcspn(c->authority, ":");
		c->aws_host =
		    hl > 14 && strncasecmp(c->authority + hl - 14, ".amazonaws.com", 14) == 0;
	}
	snprintf(c->region, sizeof(c->region), "%s", cfg->region);
	c->addressing = cfg->addressing;
	c->clock = clock;
	if (!t && !(t = c->own = isc_http_transport_curl_session_new())) {
		rc = isc_err_set(err, ISC_ENOMEM, "cannot create an HTTP session");
		goto out;
	}
	isc_http_client_init(&c->http, t, clock);
	c->http.policy.max_response_bytes = S3_MAX_GET + 4096;
	c->http.policy.timeout_ms = 300000; /* a 64 MiB range over a slow link */
	c->http.policy.allow_insecure = cfg->allow_insecure;
out:
	free(endpoint);
	if (rc) {
		isc_s3_client_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

int isc_s3_client_dup(const struct isc_s3_client *c, struct isc_s3_client **out,
                      struct isc_err *err)
{
	struct isc_s3_client *d = calloc(1, sizeof(*d));
	const struct isc_http_transport *t = c->http.transport;

	*out = NULL;
	if (!d)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	d->scheme = strdup(c->scheme);
	d->authority = strdup(c->authority);
	d->akid = strdup(c->akid);
	d->secret = strdup(c->secret);
	d->token = c->token ? strdup(c->token) : NULL;
	/* A client with its own session gets its own too: one connection each. */
	if (c->own && !(t = d->own = isc_http_transport_curl_session_new()))
		t = NULL;
	if (!d->scheme || !d->authority || !d->akid || !d->secret || (c->token && !d->token) ||
	    !t) {
		isc_s3_client_free(d);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	d->aws_host = c->aws_host;
	memcpy(d->region, c->region, sizeof(d->region));
	d->addressing = c->addressing;
	d->clock = c->clock;
	isc_http_client_init(&d->http, t, c->clock);
	d->http.policy = c->http.policy;
	*out = d;
	return 0;
}

int isc_s3_etag_is_md5(const struct isc_s3_object *o)
{
	size_t n = strcspn(o->etag, "-");
	if (o->sse[0] && strcmp(o->sse, "AES256") != 0)
		return 0; /* SSE-KMS, DSSE-KMS, SSE-C: the ETag is not an MD5 of the bytes */
	if (n != 32)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!isxdigit((unsigned char)o->etag[i]))
			return 0;
	if (o->etag[n] == '-') {
		char *end;
		unsigned long parts = strtoul(o->etag + n + 1, &end, 10);
		return parts >= 1 && parts <= 10000 && *end == '\0' && end != o->etag + n + 1;
	}
	return 1;
}

void isc_s3_object_cleanup(struct isc_s3_object *o)
{
	if (o)
		free(o->key);
}

void isc_s3_listing_cleanup(struct isc_s3_listing *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n; i++)
		isc_s3_object_cleanup(&l->objects[i]);
	free(l->objects);
	free(l->next_token);
	memset(l, 0, sizeof(*l));
}

/* ---- names ---- */

/* S3's bucket naming rules: 3-63 of [a-z0-9.-], starting and ending alphanumeric. */
static int bucket_ok(const char *b)
{
	size_t n = strlen(b);
	if (n < 3 || n > 63 || !isalnum((unsigned char)b[0]) || !isalnum((unsigned char)b[n - 1]))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!(islower((unsigned char)b[i]) || isdigit((unsigned char)b[i]) || b[i] == '.' ||
		      b[i] == '-'))
			return 0;
	return 1;
}

static int check_names(const char *bucket, const char *key, struct isc_err *err)
{
	if (!bucket || !bucket_ok(bucket))
		return isc_err_set(err, ISC_EINVALID,
		                   "S3 bucket name '%s' is not valid (3-63 characters: a-z, 0-9, "
		                   "'.', '-')",
		                   bucket ? bucket : "");
	if (key && strlen(key) > S3_MAX_KEY_BYTES)
		return isc_err_set(err, ISC_EINVALID, "S3 key longer than %d bytes",
		                   S3_MAX_KEY_BYTES);
	return 0;
}

int isc_s3_uri_parse(const char *uri, char **bucket, char **key, struct isc_err *err)
{
	const char *b, *slash;
	int rc;
	*bucket = *key = NULL;
	if (!uri || strncmp(uri, "s3://", 5) != 0)
		return isc_err_set(err, ISC_EINVALID, "'%s' is not an s3:// URI", uri ? uri : "");
	b = uri + 5;
	slash = strchr(b, '/');
	*bucket = slash ? strndup(b, (size_t)(slash - b)) : strdup(b);
	*key = strdup(slash ? slash + 1 : "");
	if (!*bucket || !*key) {
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		goto fail;
	}
	if ((rc = check_names(*bucket, *key, err)))
		goto fail;
	return 0;
fail:
	free(*bucket);
	free(*key);
	*bucket = *key = NULL;
	return rc;
}

static int use_virtual(const struct isc_s3_client *c, const char *bucket)
{
	if (c->addressing == ISC_S3_ADDRESSING_VIRTUAL)
		return 1;
	if (c->addressing == ISC_S3_ADDRESSING_PATH)
		return 0;
	/* A dotted bucket breaks the wildcard certificate of virtual-hosted names. */
	return c->aws_host && !strchr(bucket, '.');
}

/*
 * The URL (encoded once), the Host header and the raw path the signer encodes
 * itself (so the canonical URI is the once-encoded path S3 expects).
 */
struct target {
	struct isc_buf url, host, raw_path;
};

static void target_cleanup(struct target *t)
{
	isc_buf_cleanup(&t->url);
	isc_buf_cleanup(&t->host);
	isc_buf_cleanup(&t->raw_path);
}

static int target_make(const struct isc_s3_client *c, const char *bucket, const char *key,
                       const char *query, struct target *t)
{
	int rc = 0;
	isc_buf_init(&t->url, 0);
	isc_buf_init(&t->host, 0);
	isc_buf_init(&t->raw_path, 0);
	if (use_virtual(c, bucket)) {
		rc |= isc_buf_printf(&t->host, "%s.%s", bucket, c->authority);
		rc |= isc_buf_putc(&t->raw_path, '/');
	} else {
		rc |= isc_buf_puts(&t->host, c->authority);
		rc |= isc_buf_printf(&t->raw_path, "/%s", bucket);
		if (key)
			rc |= isc_buf_putc(&t->raw_path, '/');
	}
	if (key)
		rc |= isc_buf_puts(&t->raw_path, key);
	rc |= isc_buf_printf(&t->url, "%s://%s", c->scheme, isc_buf_cstr(&t->host));
	rc |= isc_sigv4_uri_encode(&t->url, t->raw_path.data, t->raw_path.len, 1);
	if (query && *query) {
		rc |= isc_buf_printf(&t->url, "?%s", query);
		rc |= isc_buf_printf(&t->raw_path, "?%s", query);
	}
	return rc ? ISC_ENOMEM : 0;
}

/* ---- replies ---- */

/* The value of the last header `name` in the raw header lines, into out. */
static int header_get(const struct isc_http_response *r, const char *name, char *out, size_t cap)
{
	const char *p = isc_buf_cstr(&r->headers);
	size_t nl = strlen(name);
	int found = 0;
	while (*p) {
		size_t len = strcspn(p, "\r\n");
		if (len > nl && strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
			const char *v = p + nl + 1;
			size_t vl = len - nl - 1;
			while (vl && (*v == ' ' || *v == '\t'))
				v++, vl--;
			while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
				vl--;
			if (vl >= cap)
				vl = cap - 1;
			memcpy(out, v, vl);
			out[vl] = '\0';
			found = 1;
		}
		p += len;
		while (*p == '\r' || *p == '\n')
			p++;
	}
	return found;
}

/* An ETag without its quotes (S3 sends "hex" or "hex-N" in double quotes). */
static void etag_unquote(const char *in, char *out, size_t cap)
{
	size_t n = strlen(in);
	if (n >= 2 && in[0] == '"' && in[n - 1] == '"') {
		in++;
		n -= 2;
	}
	if (n >= cap)
		n = cap - 1;
	memcpy(out, in, n);
	out[n] = '\0';
}

static xmlDoc *xml_parse(const char *xml, size_t len)
{
	xmlDoc *d;
	if (!xml || len == 0 || len > S3_MAX_XML || len > INT_MAX)
		return NULL;
	xmlInitParser();
	d = xmlReadMemory(xml, (int)len, "s3-reply.xml", NULL,
	                  XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
	if (d && !xmlDocGetRootElement(d)) {
		xmlFreeDoc(d);
		d = NULL;
	}
	return d;
}

static int is_el(const xmlNode *n, const char *name)
{
	return n && n->type == XML_ELEMENT_NODE && strcmp((const char *)n->name, name) == 0;
}

static xmlNode *child(const xmlNode *parent, const char *name)
{
	for (xmlNode *c = parent ? parent->children : NULL; c; c = c->next)
		if (is_el(c, name))
			return c;
	return NULL;
}

/* The text of child `name` into out ("" when absent); 1 when present. */
static int child_text(const xmlNode *parent, const char *name, char *out, size_t cap)
{
	xmlNode *c = child(parent, name);
	xmlChar *t;
	out[0] = '\0';
	if (!c)
		return 0;
	t = xmlNodeGetContent(c);
	snprintf(out, cap, "%s", t ? (const char *)t : "");
	xmlFree(t);
	return 1;
}

static int code_for(const char *code, long status)
{
	static const struct {
		const char *code;
		int isc;
	} map[] = {
	    {"NoSuchKey", ISC_ENOTFOUND},          {"NoSuchBucket", ISC_ENOTFOUND},
	    {"NoSuchVersion", ISC_ENOTFOUND},      {"AccessDenied", ISC_EAUTH},
	    {"InvalidAccessKeyId", ISC_EAUTH},     {"SignatureDoesNotMatch", ISC_EAUTH},
	    {"ExpiredToken", ISC_EAUTH},           {"InvalidToken", ISC_EAUTH},
	    {"RequestTimeTooSkewed", ISC_EAUTH},   {"SlowDown", ISC_ETHROTTLED},
	    {"InternalError", ISC_ETRANSIENT},     {"ServiceUnavailable", ISC_ETRANSIENT},
	    {"PreconditionFailed", ISC_ECONFLICT},
	};
	for (size_t i = 0; code && i < sizeof(map) / sizeof(map[0]); i++)
		if (strcmp(code, map[i].code) == 0)
			return map[i].isc;
	if (status == 404)
		return ISC_ENOTFOUND;
	if (status == 401 || status == 403)
		return ISC_EAUTH;
	if (status == 412)
		return ISC_ECONFLICT;
	if (status == 429 || status == 503)
		return ISC_ETHROTTLED;
	if (status >= 500)
		return ISC_ETRANSIENT;
	return ISC_EINVALID;
}

struct call {
	const char *op;     /* "HeadObject", ... for messages */
	const char *bucket; /* for messages */
	const char *key;
};

/* S3's <Error><Code/><Message/></Error>, or the status alone (HEAD has no body). */
static int s3_classify(void *vctx, const struct isc_http_response *resp, struct isc_err *err)
{
	const struct call *cc = vctx;
	char code[64] = "", msg[256] = "";
	xmlDoc *d;
	if (resp->status >= 200 && resp->status < 300)
		return 0;
	d = xml_parse(resp->body.data, resp->body.len);
	if (d) {
		xmlNode *root = xmlDocGetRootElement(d);
		if (is_el(root, "Error")) {
			child_text(root, "Code", code, sizeof(code));
			child_text(root, "Message", msg, sizeof(msg));
		}
		xmlFreeDoc(d);
	}
	if (!code[0]) {
		const char *guess = resp->status == 404   ? "NotFound"
		                    : resp->status == 403 ? "Forbidden"
		                    : resp->status == 412 ? "PreconditionFailed"
		                                          : "HTTP error";
		snprintf(code, sizeof(code), "%s", guess);
	}
	return isc_err_set(err, code_for(code, resp->status),
	                   "S3 %s s3://%s%s%s: %s%s%s (HTTP %ld)", cc->op, cc->bucket,
	                   cc->key && cc->key[0] ? "/" : "", cc->key ? cc->key : "", code,
	                   msg[0] ? ": " : "", msg, resp->status);
}

/* Signs and sends one request; extra headers (Range, If-Match) are signed too. */
static int s3_send_body(struct isc_s3_client *c, const char *method, const struct target *t,
                        const struct isc_http_header *extra, size_t n_extra, const char *body,
                        size_t body_len, const struct isc_http_sink *sink, struct call *cc,
                        struct isc_http_response *resp, struct isc_err *err)
{
	struct isc_http_header hdrs[8];
	struct isc_sigv4_key key = {c->akid, c->secret, c->token};
	struct isc_sigv4_params p = {
	    .region = c->region,
	    .service = "s3",
	    .time_ms = c->clock->now_ms(c->clock->ctx),
	    .normalize_path = 0, /* S3 keys are taken literally */
	    .sign_body = 1,      /* S3 requires x-amz-content-sha256 on every signed request */
	};
	struct isc_sigv4_signed sig;
	struct isc_http_request req;
	size_t n = 0;
	int rc;

	hdrs[n++] = (struct isc_http_header){"Host", isc_buf_cstr(&t->host)};
	for (size_t i = 0; i < n_extra && n < 4; i++)
		hdrs[n++] = extra[i];
	rc = isc_sigv4_sign(&key, &p,
	                    &(struct isc_sigv4_request){method, isc_buf_cstr(&t->raw_path), hdrs, n,
	                                                body, body_len},
	                    &sig, err);
	if (rc) {
		isc_sigv4_signed_cleanup(&sig);
		return rc;
	}
	for (size_t i = 0; i < sig.n_add; i++)
		hdrs[n + i] = sig.add[i];
	req = (struct isc_http_request){
	    method, isc_buf_cstr(&t->url), hdrs, n + sig.n_add, body, body_len, sink};
	rc = isc_http_do(&c->http, &req, s3_classify, cc, resp, err);
	isc_sigv4_signed_cleanup(&sig);
	return rc;
}

static int s3_send(struct isc_s3_client *c, const char *method, const struct target *t,
                   const struct isc_http_header *extra, size_t n_extra,
                   const struct isc_http_sink *sink, struct call *cc,
                   struct isc_http_response *resp, struct isc_err *err)
{
	return s3_send_body(c, method, t, extra, n_extra, NULL, 0, sink, cc, resp, err);
}

/* "versionId=V&partNumber=N" as needed (encoded), into q. */
static int object_query(struct isc_buf *q, const char *version_id, unsigned part_number)
{
	int rc = 0;
	if (part_number)
		rc |= isc_buf_printf(q, "partNumber=%u", part_number);
	if (version_id && version_id[0]) {
		rc |= isc_buf_printf(q, "%sversionId=", q->len ? "&" : "");
		rc |= isc_sigv4_uri_encode(q, version_id, strlen(version_id), 0);
	}
	return rc ? ISC_ENOMEM : 0;
}

int isc_s3_head(struct isc_s3_client *c, const char *bucket, const char *key,
                const char *version_id, unsigned part_number, struct isc_s3_object *out,
                struct isc_err *err)
{
	struct isc_buf q;
	struct target t;
	struct isc_http_response resp;
	struct call cc = {"HeadObject", bucket, key};
	/* Without it S3 leaves out the object's additional checksum (SHA-256, CRC32C, ...). */
	struct isc_http_header extra[1] = {{"x-amz-checksum-mode", "ENABLED"}};
	size_t n_extra = 1;
	char v[1025];
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = check_names(bucket, key, err)))
		return rc;
	if (!key || !key[0])
		return isc_err_set(err, ISC_EINVALID, "S3 HeadObject needs a key");
	isc_buf_init(&q, 0);
	isc_http_response_init(&resp);
	if ((rc = object_query(&q, version_id, part_number)) ||
	    (rc = target_make(c, bucket, key, isc_buf_cstr(&q), &t))) {
		isc_buf_cleanup(&q);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	rc = s3_send(c, "HEAD", &t, extra, n_extra, NULL, &cc, &resp, err);
	if (rc)
		goto out;
	if (!header_get(&resp, "Content-Length", v, sizeof(v)) || !isdigit((unsigned char)v[0])) {
		rc = isc_err_set(err, ISC_EINVALID, "S3 HeadObject s3://%s/%s: no Content-Length",
		                 bucket, key);
		goto out;
	}
	out->size = strtoull(v, NULL, 10);
	if (header_get(&resp, "ETag", v, sizeof(v)))
		etag_unquote(v, out->etag, sizeof(out->etag));
	if (header_get(&resp, "x-amz-version-id", v, sizeof(v)) && strcmp(v, "null") != 0)
		snprintf(out->version_id, sizeof(out->version_id), "%s", v);
	if (header_get(&resp, "x-amz-mp-parts-count", v, sizeof(v)))
		out->parts_count = (unsigned)strtoul(v, NULL, 10);
	if (header_get(&resp, "x-amz-server-side-encryption", v, sizeof(v)))
		snprintf(out->sse, sizeof(out->sse), "%.31s", v);
	if (header_get(&resp, "x-amz-server-side-encryption-customer-algorithm", v, sizeof(v)))
		snprintf(out->sse, sizeof(out->sse), "SSE-C");
	/* S3 keeps one additional checksum per object; the strongest we can check wins. */
	{
		static const char *const algos[] = {"SHA256", "CRC32C", "CRC32"};
		for (size_t i = 0; i < sizeof(algos) / sizeof(algos[0]); i++) {
			char h[64];
			snprintf(h, sizeof(h), "x-amz-checksum-%s", algos[i]);
			if (header_get(&resp, h, v, sizeof(v)) && v[0] &&
			    strlen(v) < sizeof(out->checksum)) {
				snprintf(out->checksum_algo, sizeof(out->checksum_algo), "%s",
				         algos[i]);
				snprintf(out->checksum, sizeof(out->checksum), "%.95s", v);
				break;
			}
		}
		if (out->checksum[0] && header_get(&resp, "x-amz-checksum-type", v, sizeof(v)))
			out->checksum_composite = strcasecmp(v, "COMPOSITE") == 0;
		else if (out->checksum[0])
			out->checksum_composite = strchr(out->checksum, '-') != NULL;
	}
	out->key = strdup(key);
	if (!out->key)
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
out:
	isc_http_response_cleanup(&resp);
	target_cleanup(&t);
	isc_buf_cleanup(&q);
	return rc;
}

/*
 * What a ranged GET must look like before its first byte is passed on: 206
 * with exactly the range asked for (a 200 would be the whole object: the
 * server ignored Range), and never more bytes than asked.
 */
struct range_sink {
	const struct isc_http_sink *to;
	const char *bucket, *key;
	uint64_t first, len, got;
	int checked;
};

static int range_begin(void *ctx, struct isc_err *err)
{
	struct range_sink *r = ctx;
	r->got = 0;
	r->checked = 0;
	return r->to->begin ? r->to->begin(r->to->ctx, err) : 0;
}

static int range_write(void *ctx, const struct isc_http_response *resp, const void *data, size_t n,
                       struct isc_err *err)
{
	struct range_sink *r = ctx;
	if (!r->checked) {
		char v[128];
		uint64_t a = 0, b = 0;
		if (resp->status != 206 || !header_get(resp, "Content-Range", v, sizeof(v)))
			return isc_err_set(
			    err, ISC_EINVALID,
			    "S3 GetObject s3://%s/%s: the server ignored the Range (HTTP %ld)",
			    r->bucket, r->key, resp->status);
		if (sscanf(v, "bytes %" SCNu64 "-%" SCNu64, &a, &b) != 2 || a != r->first ||
		    b != r->first + r->len - 1)
			return isc_err_set(
			    err, ISC_EINVALID,
			    "S3 GetObject s3://%s/%s: Content-Range '%s' is not bytes "
			    "%" PRIu64 "-%" PRIu64 " asked for",
			    r->bucket, r->key, v, r->first, r->first + r->len - 1);
		r->checked = 1;
	}
	if (n > r->len - r->got)
		return isc_err_set(err, ISC_EINVALID,
		                   "S3 GetObject s3://%s/%s: more bytes than the %" PRIu64
		                   " asked for",
		                   r->bucket, r->key, r->len);
	r->got += n;
	return r->to->write(r->to->ctx, resp, data, n, err);
}

int isc_s3_get_range_to(struct isc_s3_client *c, const char *bucket, const char *key,
                        const char *version_id, const char *if_match, uint64_t first, uint64_t len,
                        const struct isc_http_sink *sink, struct isc_err *err)
{
	struct isc_buf q;
	struct target t;
	struct isc_http_response resp;
	struct isc_http_header extra[2];
	struct call cc = {"GetObject", bucket, key};
	struct range_sink rs = {sink, bucket, key, first, len, 0, 0};
	struct isc_http_sink wrap = {range_begin, range_write, &rs};
	char range[64], quoted[96];
	size_t n_extra = 0;
	int rc;

	if ((rc = check_names(bucket, key, err)))
		return rc;
	if (len == 0 || len > S3_MAX_GET || first > UINT64_MAX - len)
		return isc_err_set(err, ISC_EINVALID, "S3 GetObject: bad range length %" PRIu64,
		                   len);
	snprintf(range, sizeof(range), "bytes=%" PRIu64 "-%" PRIu64, first, first + len - 1);
	extra[n_extra++] = (struct isc_http_header){"Range", range};
	if (if_match && if_match[0]) {
		snprintf(quoted, sizeof(quoted), "\"%s\"", if_match);
		extra[n_extra++] = (struct isc_http_header){"If-Match", quoted};
	}
	isc_buf_init(&q, 0);
	isc_http_response_init(&resp);
	if ((rc = object_query(&q, version_id, 0)) ||
	    (rc = target_make(c, bucket, key, isc_buf_cstr(&q), &t))) {
		isc_buf_cleanup(&q);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	rc = s3_send(c, "GET", &t, extra, n_extra, &wrap, &cc, &resp, err);
	if (!rc && !rs.checked)
		rc = range_write(&rs, &resp, NULL, 0, err); /* an empty 2xx body: check it too */
	if (!rc && rs.got != len)
		rc =
		    isc_err_set(err, ISC_ETRANSIENT,
		                "S3 GetObject s3://%s/%s: %" PRIu64 " bytes of %" PRIu64 " arrived",
		                bucket, key, rs.got, len);
	isc_http_response_cleanup(&resp);
	target_cleanup(&t);
	isc_buf_cleanup(&q);
	return rc;
}

/* The buffered form: a sink appending to a buffer, rewound to its length before each try. */
struct buf_sink {
	struct isc_buf *out;
	size_t start;
};

static int buf_begin(void *ctx, struct isc_err *err)
{
	struct buf_sink *b = ctx;
	(void)err;
	b->out->len = b->start;
	if (b->out->data)
		b->out->data[b->start] = '\0';
	return 0;
}

static int buf_write(void *ctx, const struct isc_http_response *resp, const void *data, size_t n,
                     struct isc_err *err)
{
	struct buf_sink *b = ctx;
	(void)resp;
	if (n && isc_buf_append(b->out, data, n))
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	return 0;
}

int isc_s3_get_range(struct isc_s3_client *c, const char *bucket, const char *key,
                     const char *version_id, const char *if_match, uint64_t first, uint64_t len,
                     struct isc_buf *out, struct isc_err *err)
{
	struct buf_sink b = {out, out->len};
	struct isc_http_sink sink = {buf_begin, buf_write, &b};
	int rc = isc_s3_get_range_to(c, bucket, key, version_id, if_match, first, len, &sink, err);
	if (rc)
		buf_begin(&b, NULL);
	return rc;
}

static int parse_listing(const char *xml, size_t len, struct isc_s3_listing *out,
                         struct isc_err *err)
{
	xmlDoc *d = xml_parse(xml, len);
	xmlNode *root;
	char v[1200];
	size_t n = 0;
	int rc = 0;
	if (!d)
		return isc_err_set(err, ISC_EINVALID, "S3 ListObjectsV2: reply is not XML");
	root = xmlDocGetRootElement(d);
	if (!is_el(root, "ListBucketResult")) {
		rc = isc_err_set(err, ISC_EINVALID, "S3 ListObjectsV2: no ListBucketResult");
		goto out;
	}
	for (xmlNode *e = root->children; e; e = e->next)
		n += is_el(e, "Contents");
	out->objects = calloc(n ? n : 1, sizeof(*out->objects));
	if (!out->objects) {
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		goto out;
	}
	for (xmlNode *e = root->children; e; e = e->next) {
		struct isc_s3_object *o;
		char *end;
		if (!is_el(e, "Contents"))
			continue;
		o = &out->objects[out->n];
		if (!child_text(e, "Key", v, sizeof(v)) || !v[0] || strlen(v) > S3_MAX_KEY_BYTES) {
			rc = isc_err_set(err, ISC_EINVALID,
			                 "S3 ListObjectsV2: an entry without a Key");
			goto out;
		}
		o->key = strdup(v);
		out->n++;
		if (!o->key) {
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
			goto out;
		}
		child_text(e, "Size", v, sizeof(v));
		o->size = strtoull(v, &end, 10);
		if (!v[0] || *end) {
			rc = isc_err_set(err, ISC_EINVALID, "S3 ListObjectsV2: %s has no Size",
			                 o->key);
			goto out;
		}
		child_text(e, "ETag", v, sizeof(v));
		etag_unquote(v, o->etag, sizeof(o->etag));
	}
	child_text(root, "IsTruncated", v, sizeof(v));
	if (strcmp(v, "true") == 0) {
		if (!child_text(root, "NextContinuationToken", v, sizeof(v)) || !v[0]) {
			rc = isc_err_set(
			    err, ISC_EINVALID,
			    "S3 ListObjectsV2: truncated without NextContinuationToken");
			goto out;
		}
		if (!(out->next_token = strdup(v)))
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
out:
	xmlFreeDoc(d);
	return rc;
}

int isc_s3_list_page(struct isc_s3_client *c, const char *bucket, const char *prefix,
                     const char *token, int max_keys, struct isc_s3_listing *out,
                     struct isc_err *err)
{
	struct isc_buf q;
	struct target t;
	struct isc_http_response resp;
	struct call cc = {"ListObjectsV2", bucket, prefix};
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if ((rc = check_names(bucket, prefix, err)))
		return rc;
	if (max_keys < 1 || max_keys > 1000)
		return isc_err_set(err, ISC_EINVALID,
		                   "S3 ListObjectsV2: max-keys %d not in 1..1000", max_keys);
	isc_buf_init(&q, 0);
	isc_http_response_init(&resp);
	/* Parameters in canonical order, so the URL and the signed query agree byte for byte. */
	if (token && token[0]) {
		rc |= isc_buf_puts(&q, "continuation-token=");
		rc |= isc_sigv4_uri_encode(&q, token, strlen(token), 0);
		rc |= isc_buf_putc(&q, '&');
	}
	rc |= isc_buf_printf(&q, "list-type=2&max-keys=%d", max_keys);
	if (prefix && prefix[0]) {
		rc |= isc_buf_puts(&q, "&prefix=");
		rc |= isc_sigv4_uri_encode(&q, prefix, strlen(prefix), 0);
	}
	if (rc || (rc = target_make(c, bucket, NULL, isc_buf_cstr(&q), &t))) {
		isc_buf_cleanup(&q);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	rc = s3_send(c, "GET", &t, NULL, 0, NULL, &cc, &resp, err);
	if (!rc)
		rc = parse_listing(resp.body.data, resp.body.len, out, err);
	if (rc)
		isc_s3_listing_cleanup(out);
	isc_http_response_cleanup(&resp);
	target_cleanup(&t);
	isc_buf_cleanup(&q);
	return rc;
}

/* A presigned METHOD of bucket/key?query (query: canonical order, encoded; may be ""). */
static int presign(struct isc_s3_client *c, const char *method, const char *bucket, const char *key,
                   const char *query, const char *if_match, long expires_s, char **url_out,
                   struct isc_err *err)
{
	struct isc_buf url;
	struct target t;
	struct isc_http_header hdrs[2];
	struct isc_sigv4_key k = {c->akid, c->secret, c->token};
	struct isc_sigv4_params p = {
	    .region = c->region,
	    .service = "s3",
	    .time_ms = c->clock->now_ms(c->clock->ctx),
	    .normalize_path = 0,
	    .payload_hash = "UNSIGNED-PAYLOAD",
	};
	struct isc_sigv4_presigned ps;
	char quoted[96];
	size_t n = 0;
	int rc;

	*url_out = NULL;
	if ((rc = check_names(bucket, key, err)))
		return rc;
	if (!key || !key[0])
		return isc_err_set(err, ISC_EINVALID, "S3 presigned %s needs a key", method);
	isc_buf_init(&url, 0);
	if ((rc = target_make(c, bucket, key, NULL, &t)))
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	hdrs[n++] = (struct isc_http_header){"Host", isc_buf_cstr(&t.host)};
	if (if_match && if_match[0]) {
		snprintf(quoted, sizeof(quoted), "\"%s\"", if_match);
		hdrs[n++] = (struct isc_http_header){"If-Match", quoted};
	}
	if (query && query[0] && isc_buf_printf(&t.raw_path, "?%s", query)) {
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		goto out;
	}
	rc = isc_sigv4_presign(
	    &k, &p,
	    &(struct isc_sigv4_request){method, isc_buf_cstr(&t.raw_path), hdrs, n, NULL, 0},
	    expires_s, &ps, err);
	if (!rc) {
		if (isc_buf_printf(&url, "%s?%s", isc_buf_cstr(&t.url), ps.query))
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		else
			*url_out = isc_buf_detach(&url);
	}
	isc_sigv4_presigned_cleanup(&ps);
out:
	if (url.data)
		OPENSSL_cleanse(url.data, url.cap);
	isc_buf_cleanup(&url);
	target_cleanup(&t);
	return rc;
}

int isc_s3_presign_get(struct isc_s3_client *c, const char *bucket, const char *key,
                       const char *version_id, const char *if_match, long expires_s, char **url_out,
                       struct isc_err *err)
{
	struct isc_buf q;
	int rc;
	*url_out = NULL;
	isc_buf_init(&q, 0);
	if (object_query(&q, version_id, 0)) {
		isc_buf_cleanup(&q);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	rc = presign(c, "GET", bucket, key, isc_buf_cstr(&q), if_match, expires_s, url_out, err);
	isc_buf_cleanup(&q);
	return rc;
}

/* "partNumber=N&uploadId=ID" (canonical order, encoded), or "uploadId=ID" for part 0. */
static int upload_query(struct isc_buf *q, const char *upload_id, unsigned part_number)
{
	int rc = 0;
	if (part_number)
		rc |= isc_buf_printf(q, "partNumber=%u&", part_number);
	rc |= isc_buf_puts(q, "uploadId=");
	rc |= isc_sigv4_uri_encode(q, upload_id, strlen(upload_id), 0);
	return rc ? ISC_ENOMEM : 0;
}

static int upload_id_ok(const char *id, struct isc_err *err)
{
	if (!id || !id[0] || strlen(id) > 1024)
		return isc_err_set(err, ISC_EINVALID, "S3: an upload id of 1 to 1024 characters");
	for (const unsigned char *p = (const unsigned char *)id; *p; p++)
		if (*p < 0x21 || *p > 0x7e)
			return isc_err_set(err, ISC_EINVALID,
			                   "S3: the upload id has a space or control "
			                   "character");
	return 0;
}

int isc_s3_presign_upload_part(struct isc_s3_client *c, const char *bucket, const char *key,
                               const char *upload_id, unsigned part_number, long expires_s,
                               char **url_out, struct isc_err *err)
{
	struct isc_buf q;
	int rc;
	*url_out = NULL;
	if ((rc = upload_id_ok(upload_id, err)))
		return rc;
	if (part_number < 1 || part_number > 10000)
		return isc_err_set(err, ISC_EINVALID,
		                   "S3 UploadPart: part number %u not in 1..10000", part_number);
	isc_buf_init(&q, 0);
	if (upload_query(&q, upload_id, part_number)) {
		isc_buf_cleanup(&q);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	rc = presign(c, "PUT", bucket, key, isc_buf_cstr(&q), NULL, expires_s, url_out, err);
	isc_buf_cleanup(&q);
	return rc;
}

int isc_s3_multipart_create(struct isc_s3_client *c, const char *bucket, const char *key,
                            char **upload_id, struct isc_err *err)
{
	struct target t;
	struct isc_http_response resp;
	struct call cc = {"CreateMultipartUpload", bucket, key};
	char id[1025] = "";
	xmlDoc *d;
	int rc;

	*upload_id = NULL;
	if ((rc = check_names(bucket, key, err)))
		return rc;
	if (!key || !key[0])
		return isc_err_set(err, ISC_EINVALID, "S3 CreateMultipartUpload needs a key");
	if (target_make(c, bucket, key, "uploads=", &t))
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	isc_http_response_init(&resp);
	rc = s3_send_body(c, "POST", &t, NULL, 0, "", 0, NULL, &cc, &resp, err);
	if (!rc) {
		d = xml_parse(resp.body.data, resp.body.len);
		if (d) {
			xmlNode *root = xmlDocGetRootElement(d);
			if (is_el(root, "InitiateMultipartUploadResult"))
				child_text(root, "UploadId", id, sizeof(id));
			xmlFreeDoc(d);
		}
		if (!id[0] || upload_id_ok(id, NULL))
			rc = isc_err_set(
			    err, ISC_EIO,
			    "S3 CreateMultipartUpload s3://%s/%s: no usable UploadId in "
			    "the reply",
			    bucket, key);
		else if (!(*upload_id = strdup(id)))
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	isc_http_response_cleanup(&resp);
	target_cleanup(&t);
	return rc;
}

int isc_s3_multipart_complete(struct isc_s3_client *c, const char *bucket, const char *key,
                              const char *upload_id, const struct isc_s3_part *parts, size_t n,
                              char etag_out[80], struct isc_err *err)
{
	struct isc_buf q, body;
	struct target t;
	struct isc_http_response resp;
	struct call cc = {"CompleteMultipartUpload", bucket, key};
	char code[64] = "", v[128] = "";
	int rc = 0;

	etag_out[0] = '\0';
	if ((rc = check_names(bucket, key, err)) || (rc = upload_id_ok(upload_id, err)))
		return rc;
	if (n < 1 || n > 10000)
		return isc_err_set(err, ISC_EINVALID,
		                   "S3 CompleteMultipartUpload: %zu parts (1..10000)", n);
	isc_buf_init(&q, 0);
	isc_buf_init(&body, 0);
	isc_http_response_init(&resp);
	rc |= upload_query(&q, upload_id, 0);
	rc |= isc_buf_puts(&body, "<CompleteMultipartUpload "
	                          "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">");
	for (size_t i = 0; i < n && !rc; i++) {
		/* An ETag is hex (and "-N"): anything else would be markup in the body. */
		for (const char *e = parts[i].etag; *e; e++)
			if (!isxdigit((unsigned char)*e) && *e != '-') {
				rc = -1;
				break;
			}
		if (rc || (i && parts[i].number <= parts[i - 1].number)) {
			isc_buf_cleanup(&q);
			isc_buf_cleanup(&body);
			return isc_err_set(
			    err, ISC_EINVALID,
			    "S3 CompleteMultipartUpload: part %zu has a bad ETag or is "
			    "out of order",
			    i + 1);
		}
		rc |= isc_buf_printf(&body,
		                     "<Part><PartNumber>%u</PartNumber><ETag>\"%s\"</ETag></Part>",
		                     parts[i].number, parts[i].etag);
	}
	rc |= isc_buf_puts(&body, "</CompleteMultipartUpload>");
	if (rc || target_make(c, bucket, key, isc_buf_cstr(&q), &t)) {
		isc_buf_cleanup(&q);
		isc_buf_cleanup(&body);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	rc = s3_send_body(c, "POST", &t, NULL, 0, body.data, body.len, NULL, &cc, &resp, err);
	if (!rc) {
		/* S3 may answer 200 and put the error in the body (the request's page says so). */
		xmlDoc *d = xml_parse(resp.body.data, resp.body.len);
		if (d) {
			xmlNode *root = xmlDocGetRootElement(d);
			if (is_el(root, "CompleteMultipartUploadResult"))
				child_text(root, "ETag", v, sizeof(v));
			else if (is_el(root, "Error"))
				child_text(root, "Code", code, sizeof(code));
			xmlFreeDoc(d);
		}
		if (code[0] || !v[0])
			rc = isc_err_set(err, code[0] ? code_for(code, 200) : ISC_EIO,
			                 "S3 CompleteMultipartUpload s3://%s/%s: %s", bucket, key,
			                 code[0] ? code : "no ETag in the reply");
		else
			etag_unquote(v, etag_out, 80);
	}
	isc_http_response_cleanup(&resp);
	target_cleanup(&t);
	isc_buf_cleanup(&q);
	isc_buf_cleanup(&body);
	return rc;
}

/* DELETE of bucket/key?query: AbortMultipartUpload or DeleteObject. */
static int s3_delete(struct isc_s3_client *c, const char *op, const char *bucket, const char *key,
                     const char *query, struct isc_err *err)
{
	struct target t;
	struct isc_http_response resp;
	struct call cc = {op, bucket, key};
	int rc;
	if ((rc = check_names(bucket, key, err)))
		return rc;
	if (!key || !key[0])
		return isc_err_set(err, ISC_EINVALID, "S3 %s needs a key", op);
	if (target_make(c, bucket, key, query, &t))
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	isc_http_response_init(&resp);
	rc = s3_send(c, "DELETE", &t, NULL, 0, NULL, &cc, &resp, err);
	isc_http_response_cleanup(&resp);
	target_cleanup(&t);
	return rc;
}

int isc_s3_multipart_abort(struct isc_s3_client *c, const char *bucket, const char *key,
                           const char *upload_id, struct isc_err *err)
{
	struct isc_buf q;
	int rc;
	if ((rc = upload_id_ok(upload_id, err)))
		return rc;
	isc_buf_init(&q, 0);
	if (upload_query(&q, upload_id, 0)) {
		isc_buf_cleanup(&q);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	rc = s3_delete(c, "AbortMultipartUpload", bucket, key, isc_buf_cstr(&q), err);
	isc_buf_cleanup(&q);
	return rc;
}

int isc_s3_delete(struct isc_s3_client *c, const char *bucket, const char *key, struct isc_err *err)
{
	return s3_delete(c, "DeleteObject", bucket, key, NULL, err);
}
