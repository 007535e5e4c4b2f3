/*
 * Service-account authentication: the key file, the RS256 JWT assertion and
 * its exchange for a bearer token at the key's own token_uri (RFC 7523,
 * "OAuth 2.0 for Server to Server Applications"). The private key's PEM lives
 * only in memory and is wiped with OPENSSL_cleanse on cleanup, as is every
 * access token. An organisation's own key may name only Google's token
 * endpoint or the operator's (isc_gcp_token_uri_check), and a refusal is
 * quoted by its OAuth error code alone, never the body of the answer.
 */
#include "providers/gcp/gcp_int.h"

#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void wipe_free(char *s)
{
	if (s) {
		OPENSSL_cleanse(s, strlen(s));
		free(s);
	}
}

void isc_gcp_key_cleanup(struct isc_gcp_key *k)
{
	if (!k)
		return;
	free(k->client_email);
	wipe_free(k->private_key_pem);
	free(k->private_key_id);
	free(k->token_uri);
	free(k->project_id);
	memset(k, 0, sizeof(*k));
}

void isc_gcp_token_cleanup(struct isc_gcp_token *t)
{
	if (!t)
		return;
	wipe_free(t->access_token);
	memset(t, 0, sizeof(*t));
}

/* A string field of o, or NULL when absent or not a string. */
static const char *str_field(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

static int http_url(const char *u)
{
	return u && (strncmp(u, "https://", 8) == 0 || strncmp(u, "http://", 7) == 0);
}

int isc_gcp_key_parse(const char *json, size_t len, const char *what, struct isc_gcp_key *out,
                      struct isc_err *err)
{
	json_error_t je;
	json_t *root;
	const char *type, *email, *pem, *uri;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	/* The text holds the private key: jansson's error position is fine, its text is not echoed.
	 */
	root = json_loadb(json, len, 0, &je);
	if (!root || !json_is_object(root)) {
		json_decref(root);
		return isc_err_set(err, ISC_EINVALID,
		                   "%s: not a service-account key file (JSON error at line %d)",
		                   what, je.line);
	}
	type = str_field(root, "type");
	email = str_field(root, "client_email");
	pem = str_field(root, "private_key");
	uri = str_field(root, "token_uri");
	if (!type || strcmp(type, "service_account") != 0)
		rc = isc_err_set(
		    err, ISC_EINVALID,
		    "%s: \"type\" is %s%s%s, the driver needs a \"service_account\" key", what,
		    type ? "\"" : "", type ? type : "missing", type ? "\"" : "");
	else if (!email || !email[0])
		rc = isc_err_set(err, ISC_EINVALID, "%s: \"client_email\" is missing", what);
	else if (!pem || !strstr(pem, "-----BEGIN"))
		rc = isc_err_set(err, ISC_EINVALID, "%s: \"private_key\" is missing or not PEM",
		                 what);
	else if (!http_url(uri))
		rc = isc_err_set(err, ISC_EINVALID,
		                 "%s: \"token_uri\" is missing or not an http(s) URL", what);
	if (!rc) {
		const char *kid = str_field(root, "private_key_id");
		const char *proj = str_field(root, "project_id");
		out->client_email = strdup(email);
		out->private_key_pem = strdup(pem);
		out->private_key_id = strdup(kid ? kid : "");
		out->token_uri = strdup(uri);
		out->project_id = strdup(proj ? proj : "");
		if (!out->client_email || !out->private_key_pem || !out->private_key_id ||
		    !out->token_uri || !out->project_id) {
			isc_gcp_key_cleanup(out);
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		}
	}
	/* jansson keeps its own copy of the PEM: wipe it before the object goes. */
	if (pem)
		OPENSSL_cleanse((char *)pem, strlen(pem));
	json_decref(root);
	return rc;
}

/* Never asks for a pass phrase: a service-account key is not encrypted (and iscd has no tty). */
static int no_pass_phrase(char *buf, int size, int rwflag, void *u)
{
	(void)buf;
	(void)size;
	(void)rwflag;
	(void)u;
	return -1;
}

int isc_gcp_key_private_valid(const struct isc_gcp_key *k, const char *what, struct isc_err *err)
{
	BIO *bio = BIO_new_mem_buf(k->private_key_pem, -1);
	EVP_PKEY *pkey = bio ? PEM_read_bio_PrivateKey(bio, NULL, no_pass_phrase, NULL) : NULL;
	int rc = 0;

	BIO_free(bio);
	if (!pkey)
		rc = isc_err_set(
		    err, ISC_EINVALID,
		    "%s: \"private_key\" is not a readable (unencrypted) PEM private key", what);
	else if (EVP_PKEY_base_id(pkey) != EVP_PKEY_RSA)
		rc = isc_err_set(err, ISC_EINVALID,
		                 "%s: \"private_key\" is not an RSA key (tokens are signed RS256)",
		                 what);
	EVP_PKEY_free(pkey);
	return rc;
}

/*
 * Google's token endpoint as Google's key files spell it: the current one
 * (Google OAuth 2.0 for service accounts: POST https://oauth2.googleapis.com/token) and the two
 * older spellings google-auth still accepts in keys made before it.
 */
static const char *const google_token_uris[] = {
    "https://oauth2.googleapis.com/token",
    "https://www.googleapis.com/oauth2/v4/token",
    "https://accounts.google.com/o/oauth2/token",
};

/* The length of "scheme://authority" of an http(s) URL, 0 when it is none. */
static size_t url_origin_len(const char *u)
{
	const char *host;
	if (strncmp(u, "https://", 8) == 0)
		host = u + 8;
	else if (strncmp(u, "http://", 7) == 0)
		host = u + 7;
	else
		return 0;
	host += strcspn(host, "/?#");
	return (size_t)(host - u);
}

int isc_gcp_token_uri_check(const char *token_uri, const char *compute_url, const char *what,
                            struct isc_err *err)
{
	size_t n = compute_url ? url_origin_len(compute_url) : 0;

	for (size_t i = 0; i < sizeof(google_token_uris) / sizeof(google_token_uris[0]); i++)
		if (strcmp(token_uri, google_token_uris[i]) == 0)
			return 0;
	/* The operator's own GCP endpoint: its token endpoint is theirs too. */
	if (n && strcmp(compute_url, ISC_GCP_COMPUTE_URL) != 0 &&
	    strncmp(token_uri, compute_url, n) == 0 && strcmp(token_uri + n, "/token") == 0)
		return 0;
	if (n && strcmp(compute_url, ISC_GCP_COMPUTE_URL) != 0)
		return isc_err_set(err, ISC_EINVALID,
		                   "%s: \"token_uri\" '%.120s' is neither Google's token endpoint "
		                   "(%s) nor this broker's own (%.*s/token, beside its "
		                   "[providers.gcp] endpoint_compute): a key cannot choose where "
		                   "iscd sends requests",
		                   what, token_uri, google_token_uris[0], (int)n, compute_url);
	return isc_err_set(err, ISC_EINVALID,
	                   "%s: \"token_uri\" '%.120s' is not Google's token endpoint (%s): a key "
	                   "cannot choose where iscd sends requests",
	                   what, token_uri, google_token_uris[0]);
}

size_t isc_gcp_b64url(const unsigned char *in, size_t n, char *out)
{
	static const char tab[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	size_t o = 0, i = 0;
	for (; i + 2 < n; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
		out[o++] = tab[v >> 18 & 63];
		out[o++] = tab[v >> 12 & 63];
		out[o++] = tab[v >> 6 & 63];
		out[o++] = tab[v & 63];
	}
	if (n - i == 1) {
		uint32_t v = (uint32_t)in[i] << 16;
		out[o++] = tab[v >> 18 & 63];
		out[o++] = tab[v >> 12 & 63];
	} else if (n - i == 2) {
		uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
		out[o++] = tab[v >> 18 & 63];
		out[o++] = tab[v >> 12 & 63];
		out[o++] = tab[v >> 6 & 63];
	}
	out[o] = '\0';
	return o;
}

/* Appends base64url(json text of o) to b; consumes o. */
static int put_b64_json(struct isc_buf *b, json_t *o)
{
	char *txt = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	char *enc;
	int rc;
	json_decref(o);
	if (!txt)
		return ISC_ENOMEM;
	enc = malloc(4 * ((strlen(txt) + 2) / 3) + 1);
	if (!enc) {
		free(txt);
		return ISC_ENOMEM;
	}
	isc_gcp_b64url((const unsigned char *)txt, strlen(txt), enc);
	rc = isc_buf_puts(b, enc);
	free(enc);
	free(txt);
	return rc;
}

/* RSASSA-PKCS1-v1_5 over SHA-256 of data with the key's PEM; *sig owned. */
static int rs256(const char *pem, const char *data, size_t len, unsigned char **sig,
                 size_t *sig_len, struct isc_err *err)
{
	BIO *bio = BIO_new_mem_buf(pem, -1);
	EVP_PKEY *pkey = bio ? PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL) : NULL;
	EVP_MD_CTX *md = pkey ? EVP_MD_CTX_new() : NULL;
	int rc = 0;

	*sig = NULL;
	BIO_free(bio);
	if (!pkey) {
		rc = isc_err_set(err, ISC_EAUTH,
		                 "the service account's private_key is not a readable PEM key");
		goto out;
	}
	if (EVP_PKEY_base_id(pkey) != EVP_PKEY_RSA) {
		rc = isc_err_set(err, ISC_EAUTH, "the service account's private_key is not RSA");
		goto out;
	}
	if (!md || EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, pkey) != 1 ||
	    EVP_DigestSign(md, NULL, sig_len, (const unsigned char *)data, len) != 1 ||
	    !(*sig = malloc(*sig_len)) ||
	    EVP_DigestSign(md, *sig, sig_len, (const unsigned char *)data, len) != 1) {
		free(*sig);
		*sig = NULL;
		rc = isc_err_set(err, ISC_EINVALID, "RS256 signing failed");
	}
out:
	EVP_MD_CTX_free(md);
	EVP_PKEY_free(pkey);
	return rc;
}

int isc_gcp_jwt(const struct isc_gcp_key *k, const char *scope, int64_t iat_s, char **out,
                struct isc_err *err)
{
	struct isc_buf b;
	json_t *hdr, *claims;
	unsigned char *sig = NULL;
	size_t sig_len = 0;
	char *enc;
	int rc;

	*out = NULL;
	isc_buf_init(&b, 0);
	/* Field order as google-auth writes it, so the bytes match its vectors. */
	hdr = json_pack("{s:s, s:s}", "alg", "RS256", "typ", "JWT");
	if (hdr && k->private_key_id[0])
		json_object_set_new(hdr, "kid", json_string(k->private_key_id));
	claims = json_pack("{s:s, s:s, s:s, s:I, s:I}", "iss", k->client_email, "scope", scope,
	                   "aud", k->token_uri, "exp", (json_int_t)(iat_s + ISC_GCP_TOKEN_LIFE_S),
	                   "iat", (json_int_t)iat_s);
	rc = put_b64_json(&b, hdr);
	rc = rc ? rc : isc_buf_putc(&b, '.');
	if (rc)
		json_decref(claims);
	else
		rc = put_b64_json(&b, claims);
	if (rc) {
		isc_buf_cleanup(&b);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	if ((rc = rs256(k->private_key_pem, b.data, b.len, &sig, &sig_len, err))) {
		isc_buf_cleanup(&b);
		return rc;
	}
	enc = malloc(4 * ((sig_len + 2) / 3) + 1);
	if (enc) {
		isc_gcp_b64url(sig, sig_len, enc);
		rc = isc_buf_putc(&b, '.');
		rc = rc ? rc : isc_buf_puts(&b, enc);
	}
	free(enc);
	free(sig);
	if (!enc || rc) {
		isc_buf_cleanup(&b);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	*out = isc_buf_detach(&b);
	return 0;
}

int isc_gcp_parse_token(const char *body, size_t len, int64_t now_ms, struct isc_gcp_token *out,
                        struct isc_err *err)
{
	json_t *root = json_loadb(body, len, 0, NULL);
	const char *tok = root ? str_field(root, "access_token") : NULL;
	json_t *exp = root ? json_object_get(root, "expires_in") : NULL;
	int64_t life;

	memset(out, 0, sizeof(*out));
	if (!tok || !tok[0]) {
		json_decref(root);
		return isc_err_set(err, ISC_EINVALID, "token endpoint: reply has no access_token");
	}
	/* expires_in is a number, though some servers send it as a string. */
	if (json_is_integer(exp))
		life = json_integer_value(exp);
	else if (json_is_string(exp))
		life = strtoll(json_string_value(exp), NULL, 10);
	else
		life = ISC_GCP_TOKEN_LIFE_S;
	if (life <= 0 || life > 24 * 3600)
		life = ISC_GCP_TOKEN_LIFE_S;
	out->access_token = strdup(tok);
	out->expires_at_ms = now_ms + life * 1000;
	OPENSSL_cleanse((char *)tok, strlen(tok));
	json_decref(root);
	if (!out->access_token)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	return 0;
}

/* An OAuth2 error code as RFC 6749 5.2 spells them (invalid_grant, ...): 1..64 of [A-Za-z0-9_.-].
 */
static int oauth_code_ok(const char *e)
{
	size_t n = e ? strlen(e) : 0;
	return n > 0 && n <= 64 &&
	       strspn(e, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == n;
}

/*
 * What a token endpoint reply means; OAuth2 errors are {"error", "error_description"}.
 * Only the error code is quoted: the description and any other text of the answer
 * never reach a message (the caller who added a key reads it).
 */
static int token_classify(void *ctx, const struct isc_http_response *resp, struct isc_err *err)
{
	json_t *root;
	const char *e = NULL;
	char what[100];
	int code;
	(void)ctx;

	if (resp->status >= 200 && resp->status < 300)
		return 0;
	root = json_loadb(resp->body.data ? resp->body.data : "", resp->body.len, 0, NULL);
	if (json_is_object(root)) {
		json_t *eo = json_object_get(root, "error");
		if (json_is_string(eo))
			e = json_string_value(eo);
		else if (json_is_object(eo)) /* some proxies answer in the Google API envelope */
			e = str_field(eo, "status");
	}
	snprintf(what, sizeof(what), "%s", oauth_code_ok(e) ? e : "no OAuth2 error code");
	if (resp->status == 429)
		code = ISC_ETHROTTLED;
	else if (resp->status >= 500)
		code = ISC_ETRANSIENT;
	else if (resp->status == 400 || resp->status == 401 || resp->status == 403)
		code = ISC_EAUTH; /* invalid_grant, invalid_client, unauthorized_client, ... */
	else
		code = ISC_EINVALID;
	code = isc_err_set(err, code, "token exchange: %.300s (HTTP %ld)", what, resp->status);
	json_decref(root);
	return code;
}

int isc_gcp_token_fetch(struct isc_http_client *http, const struct isc_gcp_key *k,
                        struct isc_gcp_token *out, struct isc_err *err)
{
	static const char grant[] =
	    "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer"
	    "&assertion=";
	const struct isc_http_header hdrs[] = {
	    {"Content-Type", "application/x-www-form-urlencoded"},
	    {"Accept", "application/json"},
	};
	int64_t now = http->clock->now_ms(http->clock->ctx);
	struct isc_http_response resp;
	struct isc_http_request req;
	struct isc_buf form;
	char *jwt = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = isc_gcp_jwt(k, ISC_GCP_SCOPE, now / 1000, &jwt, err)))
		return rc;
	/* base64url needs no escaping in a form body. */
	isc_buf_init(&form, 0);
	rc = isc_buf_puts(&form, grant);
	rc = rc ? rc : isc_buf_puts(&form, jwt);
	free(jwt);
	if (rc) {
		isc_buf_cleanup(&form);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	isc_http_response_init(&resp);
	req = (struct isc_http_request){"POST", k->token_uri, hdrs, 2, form.data, form.len};
	rc = isc_http_do(http, &req, token_classify, NULL, &resp, err);
	if (!rc)
		rc = isc_gcp_parse_token(resp.body.data, resp.body.len, now, out, err);
	/* The reply held the token: wipe both buffers before they go. */
	if (resp.body.data)
		OPENSSL_cleanse(resp.body.data, resp.body.len);
	isc_http_response_cleanup(&resp);
	isc_buf_cleanup(&form);
	return rc;
}

/* ---- the process's token cache ---- */

#define CACHE_SLOTS 16

struct cache_slot {
	unsigned char key[32];
	char *token; /* wiped when replaced */
	int64_t expires_at_ms;
};

static struct cache_slot cache[CACHE_SLOTS];
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

static int cache_key(const struct isc_gcp_key *k, unsigned char out[32])
{
	const char *parts[4] = {k->token_uri, k->client_email, k->private_key_id,
	                        k->private_key_pem};
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	unsigned int len = 0;
	int ok = c && EVP_DigestInit_ex(c, EVP_sha256(), NULL) == 1;
	for (int i = 0; ok && i < 4; i++)
		ok = EVP_DigestUpdate(c, parts[i], strlen(parts[i]) + 1) == 1; /* NUL separates */
	ok = ok && EVP_DigestFinal_ex(c, out, &len) == 1 && len == 32;
	EVP_MD_CTX_free(c);
	return ok ? 0 : -1;
}

static struct cache_slot *cache_find(const unsigned char key[32])
{
	for (int i = 0; i < CACHE_SLOTS; i++)
		if (cache[i].token && memcmp(cache[i].key, key, 32) == 0)
			return &cache[i];
	return NULL;
}

static void slot_clear(struct cache_slot *sl)
{
	wipe_free(sl->token);
	memset(sl, 0, sizeof(*sl));
}

int isc_gcp_token_cached(const struct isc_gcp_key *k, int64_t now_ms, struct isc_gcp_token *out)
{
	unsigned char key[32];
	struct cache_slot *sl;
	int hit = 0;

	if (cache_key(k, key))
		return 0;
	pthread_mutex_lock(&cache_lock);
	sl = cache_find(key);
	if (sl && now_ms < sl->expires_at_ms - ISC_GCP_TOKEN_MARGIN_MS) {
		out->access_token = strdup(sl->token);
		out->expires_at_ms = sl->expires_at_ms;
		hit = out->access_token != NULL;
	}
	pthread_mutex_unlock(&cache_lock);
	return hit;
}

void isc_gcp_token_remember(const struct isc_gcp_key *k, const struct isc_gcp_token *t)
{
	unsigned char key[32];
	struct cache_slot *sl;
	char *copy;

	if (!t->access_token || cache_key(k, key) || !(copy = strdup(t->access_token)))
		return;
	pthread_mutex_lock(&cache_lock);
	sl = cache_find(key);
	if (!sl) {
		/* A free slot, else the one that expires first. */
		sl = &cache[0];
		for (int i = 0; i < CACHE_SLOTS && sl->token; i++)
			if (!cache[i].token || cache[i].expires_at_ms < sl->expires_at_ms)
				sl = &cache[i];
	}
	slot_clear(sl);
	memcpy(sl->key, key, 32);
	sl->token = copy;
	sl->expires_at_ms = t->expires_at_ms;
	pthread_mutex_unlock(&cache_lock);
}

void isc_gcp_token_forget(const struct isc_gcp_key *k, const char *token)
{
	unsigned char key[32];
	struct cache_slot *sl;

	if (!token || cache_key(k, key))
		return;
	pthread_mutex_lock(&cache_lock);
	sl = cache_find(key);
	if (sl && strcmp(sl->token, token) == 0)
		slot_clear(sl);
	pthread_mutex_unlock(&cache_lock);
}

void isc_gcp_token_cache_clear(void)
{
	pthread_mutex_lock(&cache_lock);
	for (int i = 0; i < CACHE_SLOTS; i++)
		slot_clear(&cache[i]);
	pthread_mutex_unlock(&cache_lock);
}
