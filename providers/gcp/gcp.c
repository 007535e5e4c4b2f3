/*
 * The GCP driver: the isc_provider table for Compute Engine v1 (JSON over
 * HTTPS, bearer tokens from a service account). A gang is one
 * instances.bulkInsert per zone with count = minCount = N, so Google itself
 * creates all or nothing; its requestId is derived from the broker's token and
 * the zone, so a retry, a lost reply or a crash replay never creates a second
 * gang. Nodes carry labels (isc-broker, isc-cluster, isc-experiment,
 * isc-request), which is how describe and the launch itself find them again.
 */
#include "common/log.h"
#include "providers/busy.h"
#include "providers/gcp/gcp_int.h"
#include "providers/sweep.h"

#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_PAGES       100 /* describe_max_pages: 100 pages of 500 = 50,000 instances */
#define PAGE_SIZE       500
#define TERMINATE_BATCH 50 /* names per lookup filter */
#define LIST_RETRIES    5  /* re-reads of a gang's listing that shows fewer nodes than made */
#define KEY_FILE_MAX    (64 * 1024)
/*
 * An image with cloud-init: Debian images run Google's guest agent only, which ignores the
 * user-data metadata (Compute Engine docs, "Operating system details"); Ubuntu's read it.
 */
#define DEFAULT_IMAGE   "projects/ubuntu-os-cloud/global/images/family/ubuntu-2204-lts"
#define DEFAULT_NETWORK "global/networks/default"

struct gcp_session {
	struct isc_gcp_key key;
	char project[128];
	char region[64];
	char *compute; /* base URL ending in '/' */
	char *source_image;
	char *network;
	char *subnetwork;
	char *ssh_user;
	long disk_gb;
	int external_ip;
	int compact_placement; /* compact_placement=auto: a compact policy per multi-node gang */
	int firewall_check;    /* firewall_check=auto: a gang's network must allow its TCP */
	int tenant_isolation;  /* tenant_isolation=auto: a network tag + rule per tenant */
	long op_timeout_ms;
	long max_pages; /* describe_max_pages: more is an error, never a shorter list */
	struct isc_gcp_token token;
	int token_refused; /* the token endpoint said no: never ask again in this session */
	const struct isc_clock *clock;
	struct isc_http_client http;
};

static struct gcp_session *impl(struct isc_provider_session *s)
{
	return s->impl;
}

/* ---- small helpers ---- */

static int64_t now_ms(const struct gcp_session *s)
{
	return s->clock->now_ms(s->clock->ctx);
}

/* Percent-encodes everything but RFC 3986 unreserved characters. */
static int pct(struct isc_buf *b, const char *s)
{
	int rc = 0;
	for (; *s && !rc; s++) {
		unsigned char c = (unsigned char)*s;
		if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~')
			rc = isc_buf_putc(b, (char)c);
		else
			rc = isc_buf_printf(b, "%%%02X", c);
	}
	return rc;
}

/* A zone or region name as it may appear in a URL path: [a-z0-9-]. */
static int path_safe(const char *s)
{
	if (!s || !s[0] || strlen(s) > 63)
		return 0;
	for (; *s; s++)
		if (!islower((unsigned char)*s) && !isdigit((unsigned char)*s) && *s != '-')
			return 0;
	return 1;
}

/* ---- calls ---- */

struct call_ctx {
	const char *what; /* "instances.bulkInsert", ... */
	struct isc_gce_error e;
	long status;
};

static int gcp_classify(void *vctx, const struct isc_http_response *resp, struct isc_err *err)
{
	struct call_ctx *cc = vctx;
	int code;

	cc->status = resp->status;
	memset(&cc->e, 0, sizeof(cc->e));
	if (resp->status >= 200 && resp->status < 300)
		return 0;
	if (isc_gce_parse_error(resp->body.data, resp->body.len, &cc->e) == 0) {
		code = isc_gce_classify(resp->status, cc->e.reason);
		return isc_err_set(err, code, "%s: %s: %s (HTTP %ld)", cc->what,
		                   cc->e.reason[0] ? cc->e.reason : cc->e.status, cc->e.message,
		                   resp->status);
	}
	code = isc_gce_classify(resp->status, NULL);
	return isc_err_set(err, code, "%s: HTTP %ld without a Google error document", cc->what,
	                   resp->status);
}

/* A bearer token valid for a while yet: the cached one, or a new exchange. */
static int ensure_token(struct gcp_session *s, struct isc_err *err)
{
	int rc;
	if (s->token.access_token && now_ms(s) < s->token.expires_at_ms - ISC_GCP_TOKEN_MARGIN_MS)
		return 0;
	if (s->token_refused)
		return isc_err_set(err, ISC_EAUTH,
		                   "the token endpoint refused this service account");
	isc_gcp_token_cleanup(&s->token);
	if (isc_gcp_token_cached(&s->key, now_ms(s), &s->token))
		return 0; /* another session of this key exchanged it a moment ago */
	rc = isc_gcp_token_fetch(&s->http, &s->key, &s->token, err);
	if (rc == ISC_EAUTH)
		s->token_refused = 1;
	if (!rc)
		isc_gcp_token_remember(&s->key, &s->token);
	return rc;
}

/*
 * One authorised Compute call. A 401 means the token died early (revoked,
 * clock skew): exchange once more and repeat; a second 401 is an auth error.
 */
/* gcp_call, with Google's error reason of a refused call in *reason (64 bytes) when asked. */
static int gcp_call_reason(struct gcp_session *s, const char *method, const char *what,
                           const char *url, const char *body, struct isc_http_response *resp,
                           char *reason, struct isc_err *err);

static int gcp_call(struct gcp_session *s, const char *method, const char *what, const char *url,
                    const char *body, struct isc_http_response *resp, struct isc_err *err)
{
	return gcp_call_reason(s, method, what, url, body, resp, NULL, err);
}

static int gcp_call_reason(struct gcp_session *s, const char *method, const char *what,
                           const char *url, const char *body, struct isc_http_response *resp,
                           char *reason, struct isc_err *err)
{
	struct call_ctx cc = {what, {0}, 0};
	int rc = 0;

	for (int attempt = 0; attempt < 2; attempt++) {
		struct isc_http_header hdrs[3];
		struct isc_http_request req;
		char *bearer = NULL;
		size_t nh = 0;

		if ((rc = ensure_token(s, err)))
			return rc;
		if (asprintf(&bearer, "Bearer %s", s->token.access_token) < 0)
			return isc_err_set(err, ISC_ENOMEM, "out of memory");
		hdrs[nh++] = (struct isc_http_header){"Authorization", bearer};
		hdrs[nh++] = (struct isc_http_header){"Accept", "application/json"};
		if (body)
			hdrs[nh++] = (struct isc_http_header){"Content-Type", "application/json"};
		req =
		    (struct isc_http_request){method, url, hdrs, nh, body, body ? strlen(body) : 0};
		rc = isc_http_do(&s->http, &req, gcp_classify, &cc, resp, err);
		OPENSSL_cleanse(bearer, strlen(bearer));
		free(bearer);
		if (rc != ISC_EAUTH || cc.status != 401 || attempt == 1)
			break;
		/* refresh once; no other session may use the refused token either */
		isc_gcp_token_forget(&s->key, s->token.access_token);
		isc_gcp_token_cleanup(&s->token);
	}
	if (reason)
		snprintf(reason, 64, "%s", rc ? cc.e.reason : "");
	return rc;
}

/* "{compute}projects/{project}/" + printf(fmt, ...) */
static char *api_url(const struct gcp_session *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static char *api_url(const struct gcp_session *s, const char *fmt, ...)
{
	struct isc_buf b;
	va_list ap;
	int rc;
	isc_buf_init(&b, 0);
	rc = isc_buf_printf(&b, "%sprojects/%s/", s->compute, s->project);
	va_start(ap, fmt);
	rc = rc ? rc : isc_buf_vprintf(&b, fmt, ap);
	va_end(ap);
	if (rc) {
		isc_buf_cleanup(&b);
		return NULL;
	}
	return isc_buf_detach(&b);
}

/* ---- session ---- */

static void gcp_session_free(struct isc_provider_session *ps)
{
	struct gcp_session *s;
	if (!ps)
		return;
	s = ps->impl;
	if (s) {
		isc_gcp_key_cleanup(&s->key);
		isc_gcp_token_cleanup(&s->token);
		free(s->compute);
		free(s->source_image);
		free(s->network);
		free(s->subnetwork);
		free(s->ssh_user);
		free(s);
	}
	free(ps);
}

static const char *nonempty(const char *v)
{
	return v && v[0] ? v : NULL;
}

/* Reads a key file into memory, then wipes the buffer once parsed. */
static int load_key_file(const char *path, struct isc_gcp_key *key, struct isc_err *err)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	size_t n;
	int rc;

	if (!f)
		return isc_err_set(err, ISC_EAUTH, "cannot read the GCP key file %s: %s", path,
		                   strerror(errno));
	buf = malloc(KEY_FILE_MAX + 1);
	if (!buf) {
		fclose(f);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	n = fread(buf, 1, KEY_FILE_MAX + 1, f);
	fclose(f);
	if (n > KEY_FILE_MAX) {
		OPENSSL_cleanse(buf, KEY_FILE_MAX + 1);
		free(buf);
		return isc_err_set(err, ISC_EINVALID, "%s: larger than %d bytes, not a key file",
		                   path, KEY_FILE_MAX);
	}
	rc = isc_gcp_key_parse(buf, n, path, key, err);
	OPENSSL_cleanse(buf, KEY_FILE_MAX + 1);
	free(buf);
	return rc;
}

static const char *const gcp_credential_keys[] = {"service_account_json", NULL};

/*
 * An organisation's own key: the whole service-account key file in
 * service_account_json, with type service_account, project_id, client_email, a
 * private_key that parses as RSA, and token_uri (checked against Google's and the
 * operator's endpoints by session_new). Nothing else stands in for a missing part.
 */
static int byo_key_parse(const struct isc_kv *kv, size_t n, struct isc_gcp_key *key,
                         struct isc_err *err)
{
	static const char what[] = "GCP key: service_account_json";
	const char *json = NULL;
	int rc;

	memset(key, 0, sizeof(*key));
	for (size_t i = 0; i < n; i++)
		if (kv[i].key && strcmp(kv[i].key, "service_account_json") == 0)
			json = kv[i].value;
	if (!nonempty(json))
		return isc_err_set(err, ISC_EINVALID,
		                   "GCP key: service_account_json is %s (a GCP key is a "
		                   "service-account key file's JSON: type, project_id, "
		                   "client_email, private_key, token_uri)",
		                   json ? "empty" : "missing");
	if ((rc = isc_gcp_key_parse(json, strlen(json), what, key, err)))
		return rc;
	if (!key->project_id[0])
		rc = isc_err_set(err, ISC_EINVALID, "%s: \"project_id\" is missing", what);
	else
		rc = isc_gcp_key_private_valid(key, what, err);
	if (rc)
		isc_gcp_key_cleanup(key);
	return rc;
}

static int gcp_credentials_valid(const struct isc_kv *kv, size_t n, struct isc_err *err)
{
	struct isc_gcp_key key;
	int rc = byo_key_parse(kv, n, &key, err);
	if (!rc)
		isc_gcp_key_cleanup(&key);
	return rc;
}

/*
 * The key: an organisation's own (bring-your-own) alone, else, in this order,
 * [providers.gcp] credentials_file, GOOGLE_APPLICATION_CREDENTIALS, gcloud's
 * application-default file when it holds a service account (the platform's).
 */
static int resolve_key(const struct isc_provider_settings *st, struct isc_gcp_key *key,
                       struct isc_err *err)
{
	const char *path, *home;
	char adc[4096];
	struct stat sb;
	int rc;

	/* Never the platform's key for an organisation's: a broken key fails (issue 42). */
	if (isc_provider_settings_byo(st)) {
		rc = byo_key_parse(st->credentials, st->n_credentials, key, err);
		if (rc == ISC_EINVALID) {
			if (err)
				err->code = ISC_EAUTH;
			rc = ISC_EAUTH;
		}
		return rc;
	}
	if ((path = nonempty(isc_provider_setting(st, "credentials_file"))) ||
	    (path = nonempty(getenv("GOOGLE_APPLICATION_CREDENTIALS"))))
		return load_key_file(path, key, err);
	home = getenv("HOME");
	if (home &&
	    snprintf(adc, sizeof(adc), "%s/.config/gcloud/application_default_credentials.json",
	             home) < (int)sizeof(adc) &&
	    stat(adc, &sb) == 0)
		return load_key_file(adc, key, err);
	return isc_err_set(
	    err, ISC_EAUTH,
	    "no GCP credentials: looked in [providers.gcp] credentials_file (unset), "
	    "GOOGLE_APPLICATION_CREDENTIALS (unset) and %s (no such file); set "
	    "one of the first two to a service-account key file",
	    home ? adc : "~/.config/gcloud/application_default_credentials.json");
}

static int resolve_endpoint(const struct isc_provider_settings *st, char **out, struct isc_err *err)
{
	const char *u = nonempty(isc_provider_setting(st, "endpoint_compute"));
	size_t l;
	if (!u)
		u = nonempty(getenv("CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE"));
	if (!u)
		u = ISC_GCP_COMPUTE_URL;
	if (strncmp(u, "https://", 8) != 0 && strncmp(u, "http://", 7) != 0)
		return isc_err_set(err, ISC_EINVALID,
		                   "GCP compute endpoint '%.200s' is not an http(s) URL", u);
	l = strlen(u);
	if (asprintf(out, "%s%s", u, u[l - 1] == '/' ? "" : "/") < 0) {
		*out = NULL;
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	return 0;
}

static char *dup_setting(const struct isc_provider_settings *st, const char *key, const char *dflt)
{
	const char *v = nonempty(isc_provider_setting(st, key));
	if (!v)
		v = dflt;
	return v ? strdup(v) : NULL;
}

static int long_setting(const struct isc_provider_settings *st, const char *key, long dflt, long lo,
                        long hi, long *out, struct isc_err *err)
{
	const char *v = nonempty(isc_provider_setting(st, key));
	char *end;
	long l;
	*out = dflt;
	if (!v)
		return 0;
	errno = 0;
	l = strtol(v, &end, 10);
	if (errno || *end || l < lo || l > hi)
		return isc_err_set(err, ISC_EINVALID,
		                   "[providers.gcp] %s: '%.40s' is not a number from %ld to %ld",
		                   key, v, lo, hi);
	*out = l;
	return 0;
}

extern const struct isc_provider isc_provider_gcp;

static int gcp_session_new(const struct isc_provider_settings *settings, const char *region,
                           const struct isc_http_transport *t, const struct isc_clock *clock,
                           struct isc_provider_session **out, struct isc_err *err)
{
	struct isc_provider_session *ps = calloc(1, sizeof(*ps));
	struct gcp_session *s = calloc(1, sizeof(*s));
	const char *project, *ext, *insecure;
	long timeout_s = 0;
	int rc, allow_insecure;

	*out = NULL;
	if (!ps || !s) {
		free(ps);
		free(s);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	ps->provider = &isc_provider_gcp;
	ps->impl = s;
	if (!region || !region[0])
		region = nonempty(getenv("CLOUDSDK_COMPUTE_REGION"));
	if (region && !path_safe(region)) {
		rc = isc_err_set(err, ISC_EINVALID, "GCP region '%.64s' is not a region name",
		                 region);
		goto fail;
	}
	snprintf(s->region, sizeof(s->region), "%s", region ? region : "");
	snprintf(ps->region, sizeof(ps->region), "%s", s->region);
	if ((rc = resolve_key(settings, &s->key, err)))
		goto fail;
	/*
	 * An organisation's key runs in the project its key file names, never in the one
	 * [providers.gcp] project sets for the platform's account, nor GOOGLE_CLOUD_PROJECT.
	 */
	if (isc_provider_settings_byo(settings)) {
		project = nonempty(s->key.project_id);
	} else {
		project = nonempty(isc_provider_setting(settings, "project"));
		if (!project)
			project = nonempty(s->key.project_id);
		if (!project)
			project = nonempty(getenv("GOOGLE_CLOUD_PROJECT"));
	}
	if (!project) {
		rc = isc_err_set(err, ISC_EINVALID,
		                 "no GCP project: the key file has no project_id; set "
		                 "[providers.gcp] project");
		goto fail;
	}
	if (strlen(project) >= sizeof(s->project) ||
	    strspn(project, "abcdefghijklmnopqrstuvwxyz"
	                    "0123456789-.:") != strlen(project)) {
		rc = isc_err_set(err, ISC_EINVALID, "GCP project '%.64s' is not a project id",
		                 project);
		goto fail;
	}
	snprintf(s->project, sizeof(s->project), "%s", project);
	if ((rc = resolve_endpoint(settings, &s->compute, err)))
		goto fail;
	/* An organisation's own key names no host iscd talks to (issue 29). */
	if (isc_provider_settings_byo(settings) &&
	    (rc = isc_gcp_token_uri_check(s->key.token_uri, s->compute,
	                                  "the organisation's GCP key", err)))
		goto fail;
	s->source_image = dup_setting(settings, "source_image", DEFAULT_IMAGE);
	s->network = dup_setting(settings, "network", DEFAULT_NETWORK);
	s->subnetwork = dup_setting(settings, "subnetwork", NULL);
	s->ssh_user = dup_setting(settings, "ssh_key_user", "root");
	if (!s->source_image || !s->network || !s->ssh_user) {
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		goto fail;
	}
	if ((rc = long_setting(settings, "disk_size_gb", 200, 10, 65536, &s->disk_gb, err)) ||
	    (rc = long_setting(settings, "operation_timeout_s", 900, 1, 86400, &timeout_s, err)) ||
	    (rc = long_setting(settings, "describe_max_pages", MAX_PAGES, 1, 100000, &s->max_pages,
	                       err)))
		goto fail;
	/* The assertion, the bearer token and signed calls never go out in clear text by accident.
	 */
	insecure = nonempty(isc_provider_setting(settings, "allow_insecure_endpoint"));
	allow_insecure = insecure && strcmp(insecure, "true") == 0;
	if ((rc = isc_http_endpoint_check(s->compute, allow_insecure, err))) {
		isc_err_wrap(err, "GCP compute endpoint");
		goto fail;
	}
	if ((rc = isc_http_endpoint_check(s->key.token_uri, allow_insecure, err))) {
		isc_err_wrap(err, "the GCP key's token_uri");
		goto fail;
	}
	s->op_timeout_ms = timeout_s * 1000;
	{
		const char *cp = nonempty(isc_provider_setting(settings, "compact_placement"));
		s->compact_placement = !cp || strcmp(cp, "auto") == 0;
		if (cp && strcmp(cp, "auto") != 0 && strcmp(cp, "never") != 0) {
			rc = isc_err_set(err, ISC_EINVALID,
			                 "[providers.gcp] compact_placement '%.40s' is neither "
			                 "\"auto\" nor \"never\"",
			                 cp);
			goto fail;
		}
	}
	{
		/* never: for a network whose rules firewalls.list does not show (firewall
		 * policies, hierarchical policies) */
		const char *fc = nonempty(isc_provider_setting(settings, "firewall_check"));
		s->firewall_check = !fc || strcmp(fc, "auto") == 0;
		if (fc && strcmp(fc, "auto") != 0 && strcmp(fc, "never") != 0) {
			rc = isc_err_set(err, ISC_EINVALID,
			                 "[providers.gcp] firewall_check '%.40s' is neither "
			                 "\"auto\" nor \"never\"",
			                 fc);
			goto fail;
		}
	}
	{
		const char *ti = nonempty(isc_provider_setting(settings, "tenant_isolation"));
		s->tenant_isolation = !ti || strcmp(ti, "auto") == 0;
		if (ti && strcmp(ti, "auto") != 0 && strcmp(ti, "never") != 0) {
			rc = isc_err_set(err, ISC_EINVALID,
			                 "[providers.gcp] tenant_isolation '%.40s' is neither "
			                 "\"auto\" nor \"never\"",
			                 ti);
			goto fail;
		}
	}
	ext = nonempty(isc_provider_setting(settings, "external_ip"));
	s->external_ip = !ext || strcmp(ext, "true") == 0 || strcmp(ext, "1") == 0;
	s->clock = clock ? clock : isc_clock_system();
	isc_http_client_init(&s->http, t, s->clock);
	s->http.policy.allow_insecure = allow_insecure;
	*out = ps;
	return 0;
fail:
	gcp_session_free(ps);
	return rc;
}

/* ---- check_credentials ---- */

static int gcp_check_credentials(struct isc_provider_session *ps, struct isc_identity *out,
                                 struct isc_err *err)
{
	struct gcp_session *s = impl(ps);
	struct isc_http_response resp;
	char *url = api_url(s, "%s", "");
	json_t *root = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!url)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	url[strlen(url) - 1] = '\0'; /* projects/{p}, no trailing slash */
	isc_http_response_init(&resp);
	rc = gcp_call(s, "GET", "projects.get", url, NULL, &resp, err);
	if (!rc) {
		root = json_loadb(resp.body.data, resp.body.len, 0, NULL);
		if (!json_is_string(json_object_get(root, "name")))
			rc = isc_err_set(err, ISC_EINVALID, "projects.get: reply is not a Project");
	}
	if (!rc) {
		json_t *id = json_object_get(root, "id");
		snprintf(out->account, sizeof(out->account), "%s",
		         json_string_value(json_object_get(root, "name")));
		snprintf(out->principal, sizeof(out->principal), "%s", s->key.client_email);
		if (json_is_string(id))
			snprintf(out->user_id, sizeof(out->user_id), "%s", json_string_value(id));
		else if (json_is_integer(id))
			snprintf(out->user_id, sizeof(out->user_id), "%lld",
			         (long long)json_integer_value(id));
	}
	json_decref(root);
	free(url);
	isc_http_response_cleanup(&resp);
	return rc;
}

/* ---- names, labels, machine types ---- */

void isc_gcp_request_id(const char *token, const char *zone, char out[37])
{
	unsigned char h[EVP_MAX_MD_SIZE];
	unsigned int hl = 0;
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	memset(h, 0, sizeof(h));
	if (c && EVP_DigestInit_ex(c, EVP_sha256(), NULL) == 1) {
		EVP_DigestUpdate(c, token, strlen(token));
		EVP_DigestUpdate(c, "", 1);
		EVP_DigestUpdate(c, zone, strlen(zone));
		EVP_DigestFinal_ex(c, h, &hl);
	}
	EVP_MD_CTX_free(c);
	h[6] = (unsigned char)((h[6] & 0x0f) | 0x40); /* version 4 */
	h[8] = (unsigned char)((h[8] & 0x3f) | 0x80); /* RFC 4122 variant: never all zeros */
	snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
	         h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7], h[8], h[9], h[10], h[11], h[12],
	         h[13], h[14], h[15]);
}

static int label_char(char c)
{
	return islower((unsigned char)c) || isdigit((unsigned char)c) || c == '_' || c == '-';
}

int isc_gcp_label_key(const char *tag, char out[64], struct isc_err *err)
{
	size_t n = tag ? strlen(tag) : 0;
	if (n == 0 || n > 63 || !isalpha((unsigned char)tag[0]))
		return isc_err_set(err, ISC_EINVALID,
		                   "tag '%.80s' cannot be a GCP label key (1..63 characters, "
		                   "starting with a letter)",
		                   tag ? tag : "");
	for (size_t i = 0; i < n; i++) {
		char c = (char)tolower((unsigned char)tag[i]);
		out[i] = label_char(c) ? c : '-'; /* "isc:broker" -> "isc-broker" */
	}
	out[n] = '\0';
	return 0;
}

int isc_gcp_label_value_ok(const char *v)
{
	size_t n = strlen(v);
	if (n > 63)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!label_char(v[i]))
			return 0;
	return 1;
}

void isc_gcp_name_prefix(const char *cluster_id, char out[41])
{
	size_t o = 0;
	memcpy(out, "isc-", 4);
	o = 4;
	for (const char *p = cluster_id; p && *p && o < 40; p++) {
		char c = (char)tolower((unsigned char)*p);
		out[o++] = (islower((unsigned char)c) || isdigit((unsigned char)c)) ? c : '-';
	}
	while (o > 4 && out[o - 1] == '-')
		o--;
	out[o] = '\0';
}

int isc_gcp_machine(const char *instance_type, char machine[64], char accel[64], int *accel_count,
                    struct isc_err *err)
{
	static const struct {
		const char *model, *type;
	} accels[] = {
	    {"T4", "nvidia-tesla-t4"},     {"P4", "nvidia-tesla-p4"},
	    {"P100", "nvidia-tesla-p100"}, {"V100", "nvidia-tesla-v100"},
	    {"K80", "nvidia-tesla-k80"},   {"A100", "nvidia-tesla-a100"},
	    {"L4", "nvidia-l4"},
	};
	const char *plus = instance_type ? strchr(instance_type, '+') : NULL;
	size_t ml =
	    plus ? (size_t)(plus - instance_type) : (instance_type ? strlen(instance_type) : 0);

	accel[0] = '\0';
	*accel_count = 0;
	if (ml == 0 || ml >= 64)
		return isc_err_set(err, ISC_EINVALID, "'%.80s' is not a GCP machine type",
		                   instance_type ? instance_type : "");
	memcpy(machine, instance_type, ml);
	machine[ml] = '\0';
	if (!path_safe(machine))
		return isc_err_set(err, ISC_EINVALID, "'%.80s' is not a GCP machine type",
		                   instance_type);
	if (plus) {
		const char *x = strrchr(plus, 'x');
		char model[32];
		size_t l = x ? (size_t)(x - plus - 1) : 0;
		char *end;
		long cnt = x ? strtol(x + 1, &end, 10) : 0;
		if (!x || l == 0 || l >= sizeof(model) || *end || cnt < 1 || cnt > 16)
			return isc_err_set(err, ISC_EINVALID,
			                   "'%.80s': accelerators must read +MODELxCOUNT",
			                   instance_type);
		memcpy(model, plus + 1, l);
		model[l] = '\0';
		for (size_t i = 0; i < sizeof(accels) / sizeof(accels[0]); i++)
			if (strcmp(model, accels[i].model) == 0)
				snprintf(accel, 64, "%s", accels[i].type);
		if (!accel[0])
			return isc_err_set(err, ISC_EINVALID, "'%.80s': unknown GPU model %s",
			                   instance_type, model);
		*accel_count = (int)cnt;
	}
	return 0;
}

/* ---- launch_gang ---- */

static int ssh_key_ok(const char *k)
{
	return k && (strncmp(k, "ssh-", 4) == 0 || strncmp(k, "ecdsa-", 6) == 0) &&
	       !strpbrk(k, "\r\n") && strlen(k) < 8192;
}

/* The instanceProperties.labels; fails on a tag value GCP cannot hold. */
static int labels_json(const struct isc_launch_spec *spec, const char *request_id, json_t **out,
                       struct isc_err *err)
{
	json_t *l = json_object();
	int rc = 0;
	if (!l)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	for (size_t i = 0; i < spec->n_tags && !rc; i++) {
		char key[64];
		if ((rc = isc_gcp_label_key(spec->tags[i].key, key, err)))
			break;
		if (!isc_gcp_label_value_ok(spec->tags[i].value))
			rc = isc_err_set(err, ISC_EINVALID,
			                 "tag %s = '%.80s' cannot be a GCP label value (lowercase "
			                 "letters, digits, _ and -, at most 63)",
			                 spec->tags[i].key, spec->tags[i].value);
		else
			json_object_set_new(l, key, json_string(spec->tags[i].value));
	}
	if (!rc)
		json_object_set_new(l, "isc-request", json_string(request_id));
	if (rc) {
		json_decref(l);
		return rc;
	}
	*out = l;
	return 0;
}

static const char *tag_value(const struct isc_launch_spec *spec, const char *key)
{
	for (size_t i = 0; i < spec->n_tags; i++)
		if (strcmp(spec->tags[i].key, key) == 0)
			return spec->tags[i].value;
	return NULL;
}

/* The bulkInsert body for one zone. *out owned (free). */
int isc_gcp_tenant_tag(const char *broker_id, const char *tenant, char out[64], struct isc_err *err)
{
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned int dl = 0;
	out[0] = '\0';
	if (!isc_tenant_name_ok(tenant))
		return isc_err_set(err, ISC_EINVALID,
		                   "launch: tenant '%.40s' is not 1 to 32 of a-z, 0-9 and '-'",
		                   tenant ? tenant : "");
	/* A network tag and a firewall rule's name: RFC 1035, at most 63 (6 + 32 + 1 + 8).
	 * The broker's id goes in as a hash: two brokers on one project keep apart. */
	if (!broker_id || !EVP_Digest(broker_id, strlen(broker_id), d, &dl, EVP_sha256(), NULL) ||
	    dl < 4)
		return isc_err_set(err, ISC_EINVALID, "launch: no %s tag", ISC_TAG_BROKER);
	snprintf(out, 64, "isc-t-%s-%02x%02x%02x%02x", tenant, d[0], d[1], d[2], d[3]);
	return 0;
}

/* The launch's tenant tag into out ("" without a tenant or with tenant_isolation never). */
static int tenant_tag_of(const struct gcp_session *s, const struct isc_launch_spec *spec,
                         char out[64], struct isc_err *err)
{
	out[0] = '\0';
	if (!spec->tenant || !s->tenant_isolation)
		return 0;
	return isc_gcp_tenant_tag(tag_value(spec, ISC_TAG_BROKER), spec->tenant, out, err);
}

static int bulk_body(const struct gcp_session *s, const struct isc_launch_spec *spec,
                     const char *request_id, const char *policy, char **out, struct isc_err *err)
{
	char ttag[64];
	char machine[64], accel[64], count[16], disk[24], prefix[41], pattern[48];
	const char *cluster = tag_value(spec, ISC_TAG_CLUSTER);
	json_t *labels = NULL, *props, *root, *nic, *meta;
	char *keys = NULL, *user_data = NULL;
	int n_acc, rc;

	*out = NULL;
	if ((rc = isc_gcp_machine(spec->instance_type, machine, accel, &n_acc, err)))
		return rc;
	if ((rc = tenant_tag_of(s, spec, ttag, err)))
		return rc;
	if ((rc = labels_json(spec, request_id, &labels, err)))
		return rc;
	/* Names need not be globally unique, only per zone; the cluster's id keeps them apart. */
	isc_gcp_name_prefix(cluster ? cluster : spec->idempotency_token, prefix);
	snprintf(pattern, sizeof(pattern), "%s-####", prefix);
	snprintf(count, sizeof(count), "%u", spec->count);
	snprintf(disk, sizeof(disk), "%ld", s->disk_gb);
	if (asprintf(&keys, "%s:%s", s->ssh_user, spec->ssh_public_key) < 0 ||
	    /* cloud-init puts the keys on the image's default user and, for root, a refusal
	     * unless disable_root is false (cloud-init cc_ssh): root is the default SSH user. */
	    asprintf(&user_data, "#cloud-config\n%sssh_authorized_keys:\n  - %s\n%s",
	             strcmp(s->ssh_user, "root") == 0 ? "disable_root: false\n" : "",
	             spec->ssh_public_key, spec->user_data ? spec->user_data : "") < 0) {
		free(keys);
		json_decref(labels);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	nic = json_pack("{s:s}", "network", s->network);
	if (nic && s->subnetwork)
		json_object_set_new(nic, "subnetwork", json_string(s->subnetwork));
	if (nic && s->external_ip)
		json_object_set_new(
		    nic, "accessConfigs",
		    json_pack("[{s:s, s:s}]", "type", "ONE_TO_ONE_NAT", "name", "External NAT"));
	meta = json_pack("{s:[{s:s, s:s}, {s:s, s:s}]}", "items", "key", "ssh-keys", "value", keys,
	                 "key", "user-data", "value", user_data);
	/* GPU hosts cannot live-migrate; a Spot node is deleted, never kept stopped and billed. */
	props = json_pack("{s:s, s:o, s:{s:s, s:b, s:s}, s:[{s:b, s:b, s:{s:s, s:s}}], s:[o], s:o}",
	                  "machineType", machine, "labels", labels, "scheduling",
	                  "onHostMaintenance", "TERMINATE", "automaticRestart", 0,
	                  "provisioningModel", spec->spot ? "SPOT" : "STANDARD", "disks", "boot", 1,
	                  "autoDelete", 1, "initializeParams", "sourceImage", s->source_image,
	                  "diskSizeGb", disk, "networkInterfaces", nic, "metadata", meta);
	free(keys);
	OPENSSL_cleanse(user_data, strlen(user_data));
	free(user_data);
	if (props && spec->spot)
		json_object_set_new(json_object_get(props, "scheduling"),
		                    "instanceTerminationAction", json_string("DELETE"));
	if (props && policy)
		json_object_set_new(props, "resourcePolicies", json_pack("[s]", policy));
	/* The tenant's network tag: its firewall rule admits traffic from that tag alone. */
	if (props && ttag[0])
		json_object_set_new(props, "tags", json_pack("{s:[s]}", "items", ttag));
	if (props && accel[0])
		json_object_set_new(
		    props, "guestAccelerators",
		    json_pack("[{s:s, s:i}]", "acceleratorType", accel, "acceleratorCount", n_acc));
	/* int64 fields travel as JSON strings in Compute's REST mapping. */
	root = props ? json_pack("{s:s, s:s, s:s, s:o}", "count", count, "minCount", count,
	                         "namePattern", pattern, "instanceProperties", props)
	             : NULL;
	*out = root ? json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	json_decref(root);
	if (!*out)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	return 0;
}

/* Polls a zone Operation until DONE (or the session's operation timeout). */
static int wait_operation(struct gcp_session *s, const char *zone, struct isc_gce_operation *op,
                          struct isc_err *err)
{
	int64_t deadline = now_ms(s) + s->op_timeout_ms;
	long delay = 250;
	int rc = 0;

	while (strcmp(op->status, "DONE") != 0) {
		struct isc_http_response resp;
		char *url;
		if (now_ms(s) >= deadline)
			return isc_err_set(err, ISC_ETRANSIENT,
			                   "operation %s in %s not DONE after %ld s (still %s)",
			                   op->name, zone, s->op_timeout_ms / 1000, op->status);
		s->clock->sleep_ms(s->clock->ctx, delay);
		if (delay < 4000)
			delay *= 2;
		url = api_url(s, "zones/%s/operations/%s", zone, op->name);
		if (!url)
			return isc_err_set(err, ISC_ENOMEM, "out of memory");
		isc_http_response_init(&resp);
		rc = gcp_call(s, "GET", "zoneOperations.get", url, NULL, &resp, err);
		if (!rc)
			rc = isc_gce_parse_operation(resp.body.data, resp.body.len, op, err);
		isc_http_response_cleanup(&resp);
		free(url);
		if (rc)
			return rc;
	}
	return 0;
}

/*
 * Every page of a list URL (with '?' already in it); fn reads each body and
 * says how many items it added. A page with more items than asked for, or a
 * page token still there after max_pages pages, is an error: a shorter list
 * would read as nodes that are gone.
 */
static int list_pages(struct gcp_session *s, const char *what, const char *base_url,
                      int (*fn)(void *ctx, const struct isc_http_response *r, char **next,
                                size_t *added, struct isc_err *err),
                      void *ctx, struct isc_err *err)
{
	char *next = NULL;
	int rc = 0;
	long pages = 0;
	do {
		struct isc_http_response resp;
		struct isc_buf url;
		size_t added = 0;
		isc_buf_init(&url, 0);
		rc = isc_buf_printf(&url, "%s&maxResults=%d", base_url, PAGE_SIZE);
		if (!rc && next) {
			rc = isc_buf_puts(&url, "&pageToken=");
			rc = rc ? rc : pct(&url, next);
		}
		free(next);
		next = NULL;
		if (rc) {
			isc_buf_cleanup(&url);
			return isc_err_set(err, ISC_ENOMEM, "out of memory");
		}
		isc_http_response_init(&resp);
		rc = gcp_call(s, "GET", what, url.data, NULL, &resp, err);
		if (!rc)
			rc = fn(ctx, &resp, &next, &added, err);
		if (!rc && added > PAGE_SIZE)
			rc = isc_err_set(err, ISC_EINVALID,
			                 "%s: a page of %zu items (at most %d asked)", what, added,
			                 PAGE_SIZE);
		isc_http_response_cleanup(&resp);
		isc_buf_cleanup(&url);
	} while (!rc && next && ++pages < s->max_pages);
	if (!rc && next)
		rc = isc_err_set(err, ISC_EINVALID,
		                 "%s: more than %ld pages (describe_max_pages); the listing is "
		                 "incomplete",
		                 what, s->max_pages);
	free(next);
	return rc;
}

struct node_list {
	struct isc_node_info *v;
	size_t n;
	int want_tags;    /* describe: also collect the tenant tags of live instances */
	char (*tags)[64]; /* "isc-t-..." network tags of instances not TERMINATED, each once */
	size_t n_tags;
};

/* The tenant tags ("isc-t-...") of a page's instances that are not TERMINATED, each once. */
static int collect_tenant_tags(struct node_list *l, const char *body, size_t len)
{
	json_t *root = json_loadb(body ? body : "", len, 0, NULL), *zones, *z, *inst, *t;
	const char *zk;
	size_t i, j;
	int rc = 0;

	zones = json_object_get(root, "items");
	json_object_foreach(zones, zk, z)
	{
		json_array_foreach(json_object_get(z, "instances"), i, inst)
		{
			const char *st = json_string_value(json_object_get(inst, "status"));
			if (st && strcmp(st, "TERMINATED") == 0)
				continue;
			json_array_foreach(json_object_get(json_object_get(inst, "tags"), "items"),
			                   j, t)
			{
				const char *v = json_string_value(t);
				size_t k = 0;
				if (!v || strncmp(v, "isc-t-", 6) != 0 || strlen(v) >= 64)
					continue;
				while (k < l->n_tags && strcmp(l->tags[k], v) != 0)
					k++;
				if (k < l->n_tags)
					continue;
				void *grown = realloc(l->tags, (l->n_tags + 1) * sizeof(*l->tags));
				if (!grown) {
					rc = ISC_ENOMEM;
					break;
				}
				l->tags = grown;
				snprintf(l->tags[l->n_tags++], 64, "%s", v);
			}
		}
	}
	json_decref(root);
	return rc;
}

static int collect_nodes(void *ctx, const struct isc_http_response *r, char **next, size_t *added,
                         struct isc_err *err)
{
	struct node_list *l = ctx;
	size_t before = l->n;
	int rc = isc_gce_parse_instances(r->body.data, r->body.len, &l->v, &l->n, next, err);
	*added = l->n - before;
	if (!rc && l->want_tags && collect_tenant_tags(l, r->body.data, r->body.len))
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
	return rc;
}

/* A list URL filtered on one label: "{base}…?filter=labels.KEY%3D%22VALUE%22". */
static char *label_filter_url(const struct gcp_session *s, const char *collection, const char *key,
                              const char *value)
{
	struct isc_buf b, f;
	char *url = api_url(s, "%s", collection);
	int rc;
	if (!url)
		return NULL;
	isc_buf_init(&b, 0);
	isc_buf_init(&f, 0);
	rc = isc_buf_printf(&f, "labels.%s = \"%s\"", key, value);
	rc = rc ? rc : isc_buf_printf(&b, "%s?filter=", url);
	rc = rc ? rc : pct(&b, f.data);
	free(url);
	isc_buf_cleanup(&f);
	if (rc) {
		isc_buf_cleanup(&b);
		return NULL;
	}
	return isc_buf_detach(&b);
}

/*
 * The zone's bulkInsert was accepted but a reply on its way (the Operation, the
 * gang's listing) cannot be read: the nodes may exist, so the outcome is
 * unknown, never "invalid" (provider.h); the broker asks again with the token.
 */
static int accepted_unreadable(struct isc_err *err, const char *zone)
{
	if (err) {
		isc_err_wrap(err,
		             "instances.bulkInsert in %s was accepted but a reply cannot be read; "
		             "the nodes may exist",
		             zone);
		err->code = ISC_ETRANSIENT;
	}
	return ISC_ETRANSIENT;
}

static int cmp_node_name(const void *a, const void *b)
{
	return strcmp(((const struct isc_node_info *)a)->id, ((const struct isc_node_info *)b)->id);
}

static int delete_refs(struct gcp_session *s, const struct isc_gce_ref *refs, size_t n,
                       struct isc_err *err);

/*
 * One zone: bulkInsert (replayed safely by requestId), the Operation to DONE,
 * then the gang read back by its isc-request label. Returns ISC_ECAPACITY
 * (with the reason in err) when the zone cannot take the whole gang.
 */
static int launch_in_zone(struct gcp_session *s, const struct isc_launch_spec *spec,
                          const char *zone, const char *request_id, const char *policy,
                          struct isc_launch_result *out, struct isc_err *err)
{
	struct isc_http_response resp;
	struct isc_gce_operation op;
	struct node_list got = {0};
	char *body = NULL, *url = NULL, *list_url = NULL;
	int rc;

	if ((rc = bulk_body(s, spec, request_id, policy, &body, err)))
		return rc;
	url = api_url(s, "zones/%s/instances/bulkInsert?requestId=%s", zone, request_id);
	if (!url) {
		free(body);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	isc_http_response_init(&resp);
	rc = gcp_call(s, "POST", "instances.bulkInsert", url, body, &resp, err);
	if (!rc && isc_gce_parse_operation(resp.body.data, resp.body.len, &op, err))
		rc = accepted_unreadable(err, zone);
	isc_http_response_cleanup(&resp);
	free(url);
	free(body);
	if (!rc) {
		rc = wait_operation(s, zone, &op, err);
		if (rc == ISC_EINVALID)
			rc = accepted_unreadable(err, zone);
	}
	if (!rc && op.error_code[0]) {
		rc = isc_gce_classify_op(op.error_code);
		return isc_err_set(err, rc, "instances.bulkInsert in %s: %s: %s", zone,
		                   op.error_code, op.error_message);
	}
	if (rc)
		return rc;
	list_url = label_filter_url(s, "zones/", "isc-request", request_id);
	if (!list_url)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	{
		/* zones/{zone}/instances?filter=... */
		char *z = NULL;
		const char *q = strchr(list_url, '?');
		if (asprintf(&z, "%.*s%s/instances%s", (int)(q - list_url), list_url, zone, q) < 0)
			z = NULL;
		free(list_url);
		list_url = z;
	}
	if (!list_url)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	/*
	 * The Operation is DONE without error, so Google made all N. A list is
	 * eventually consistent: one that shows fewer is asked again before the
	 * gang counts as short (a node may also be gone already, preempted).
	 */
	for (int attempt = 0;; attempt++) {
		got.n = 0;
		rc = list_pages(s, "instances.list", list_url, collect_nodes, &got, err);
		if (rc == ISC_EINVALID)
			rc = accepted_unreadable(err, zone);
		if (rc || got.n >= spec->count || attempt == LIST_RETRIES)
			break;
		s->clock->sleep_ms(s->clock->ctx, 1000);
	}
	free(list_url);
	if (rc) {
		free(got.v);
		return rc;
	}
	if (got.n != spec->count) {
		/* Never keep part of a gang (Google promises none, but a node may be gone already).
		 */
		struct isc_gce_ref *refs = calloc(got.n ? got.n : 1, sizeof(*refs));
		struct isc_err derr;
		int drc = refs ? 0 : ISC_ENOMEM;
		for (size_t i = 0; refs && i < got.n; i++) {
			snprintf(refs[i].name, sizeof(refs[i].name), "%.63s", got.v[i].id);
			snprintf(refs[i].zone, sizeof(refs[i].zone), "%s", zone);
		}
		if (!drc && got.n)
			drc = delete_refs(s, refs, got.n, &derr);
		free(refs);
		free(got.v);
		if (drc)
			return isc_err_set(
			    err, drc,
			    "bulkInsert in %s left %zu of %u nodes and deleting them "
			    "failed: %s",
			    zone, got.n, spec->count,
			    drc == ISC_ENOMEM ? "out of memory" : derr.msg);
		return isc_err_set(err, ISC_ECAPACITY,
		                   "instances.bulkInsert in %s gave %zu of %u nodes", zone, got.n,
		                   spec->count);
	}
	qsort(got.v, got.n, sizeof(*got.v), cmp_node_name);
	for (size_t i = 0; i < got.n; i++) {
		struct isc_node_info *ni = &got.v[i];
		if (!ni->client_token[0])
			snprintf(ni->client_token, sizeof(ni->client_token), "%s", request_id);
		if (spec->spot)
			ni->spot = 1;
		if (!ni->zone[0])
			snprintf(ni->zone, sizeof(ni->zone), "%s", zone);
	}
	snprintf(out->zone, sizeof(out->zone), "%s", zone);
	snprintf(out->token, sizeof(out->token), "%s", request_id);
	out->nodes = got.v;
	out->n_nodes = got.n;
	return 0;
}

/* ---- compact placement ---- */

/*
 * The accelerator-optimized series a compact placement policy serves (Compute Engine
 * docs, "Use compact placement policies": A4X, A4, A3, A2, G4, G2). Other series gain nothing here.
 */
static const char *const compact_series[] = {"a4x-", "a4-", "a3-", "a2-", "g4-", "g2-", NULL};

int isc_gcp_compact_machine(const char *machine)
{
	for (size_t i = 0; machine && compact_series[i]; i++)
		if (strncmp(machine, compact_series[i], strlen(compact_series[i])) == 0)
			return 1;
	return 0;
}

void isc_gcp_policy_name(const char *token, char out[64])
{
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned int dl = 0;
	/* One per launch intent, like its requestIds: a later gang of the cluster gets its own. */
	if (!EVP_Digest(token, strlen(token), d, &dl, EVP_sha256(), NULL) || dl < 8)
		memset(d, 0, 8);
	snprintf(out, 64, "isc-compact-%02x%02x%02x%02x%02x%02x%02x%02x", d[0], d[1], d[2], d[3],
	         d[4], d[5], d[6], d[7]);
}

/* Compact policies a launch of this process is filling (the reconcile skips them). */
static struct isc_busy_names busy_policies = ISC_BUSY_NAMES_INIT;

/* "us-central1-a" -> "us-central1". */
static void region_of(const char *zone, char out[64])
{
	const char *dash = strrchr(zone, '-');
	snprintf(out, 64, "%.*s", dash ? (int)(dash - zone) : (int)strlen(zone), zone);
}

/*
 * An Operation polled until DONE, in `region` (resource policies) or global (region NULL:
 * firewalls), with a doubling wait up to 4 s and op_timeout_ms in all; its error, if
 * any, as rc.
 */
static int op_done(struct gcp_session *s, const char *region, struct isc_http_response *r,
                   const char *what, struct isc_err *err)
{
	struct isc_gce_operation op;
	int64_t deadline = now_ms(s) + s->op_timeout_ms;
	long delay = 250;
	int rc = isc_gce_parse_operation(r->body.data, r->body.len, &op, err);

	while (!rc && strcmp(op.status, "DONE") != 0) {
		struct isc_http_response resp;
		char *url;
		if (now_ms(s) >= deadline)
			return isc_err_set(err, ISC_ETRANSIENT, "%s: operation %s not DONE", what,
			                   op.name);
		s->clock->sleep_ms(s->clock->ctx, delay);
		if (delay < 4000)
			delay *= 2;
		url = region ? api_url(s, "regions/%s/operations/%s", region, op.name)
		             : api_url(s, "global/operations/%s", op.name);
		if (!url)
			return isc_err_set(err, ISC_ENOMEM, "out of memory");
		isc_http_response_init(&resp);
		rc = gcp_call(s, "GET", region ? "regionOperations.get" : "globalOperations.get",
		              url, NULL, &resp, err);
		if (!rc)
			rc = isc_gce_parse_operation(resp.body.data, resp.body.len, &op, err);
		isc_http_response_cleanup(&resp);
		free(url);
	}
	if (!rc && op.error_code[0])
		rc = isc_err_set(err, isc_gce_classify_op(op.error_code), "%s: %s: %s", what,
		                 op.error_code, op.error_message);
	return rc;
}

/*
 * resourcePolicies.insert of the gang's compact placement policy in `region`:
 * groupPlacementPolicy {collocation COLLOCATED, availabilityDomainCount 1} (Compute Engine
 * docs, "Use compact placement policies"). No vmCount: a policy with one takes exactly that
 * many VMs created together and never one more (Compute v1 ResourcePolicyGroupPlacementPolicy:
 * "Google does not recommend that you use this field unless ... you want your policy to work
 * only if it contains this exact number of VMs"), and the nodes that replace a gang's lost
 * members join its policy. Resource policies carry no labels, so the description names the
 * broker and cluster for the reconcile. A policy of that name already there is this gang's (a
 * replay).
 */
static int create_policy(struct gcp_session *s, const struct isc_launch_spec *spec,
                         const char *region, const char *name, struct isc_err *err)
{
	const char *broker = tag_value(spec, ISC_TAG_BROKER),
	           *cluster = tag_value(spec, ISC_TAG_CLUSTER);
	struct isc_http_response resp;
	char rid[37], reason[64], *desc = NULL, *body = NULL, *url = NULL;
	json_t *root;
	int rc;

	isc_gcp_request_id(spec->idempotency_token, "compact-placement-policy", rid);
	if (asprintf(&desc, "isc:broker=%s isc:cluster=%s", broker ? broker : "",
	             cluster ? cluster : "") < 0)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	root = json_pack("{s:s, s:s, s:{s:s, s:i}}", "name", name, "description", desc,
	                 "groupPlacementPolicy", "collocation", "COLLOCATED",
	                 "availabilityDomainCount", 1);
	free(desc);
	body = root ? json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	json_decref(root);
	url = api_url(s, "regions/%s/resourcePolicies?requestId=%s", region, rid);
	if (!body || !url) {
		free(body);
		free(url);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	isc_http_response_init(&resp);
	rc = gcp_call_reason(s, "POST", "resourcePolicies.insert", url, body, &resp, reason, err);
	if (rc && strcmp(reason, "alreadyExists") == 0)
		rc = 0; /* this gang's, from an earlier try */
	else if (!rc)
		rc = op_done(s, region, &resp, "resourcePolicies.insert", err);
	isc_http_response_cleanup(&resp);
	free(body);
	free(url);
	return rc;
}

/* resourcePolicies.delete; *deleted = 0 while a VM still uses it (400 resourceInUse...). */
static int delete_policy(struct gcp_session *s, const char *region, const char *name, int *deleted,
                         struct isc_err *err)
{
	struct isc_http_response resp;
	char reason[64], *url = api_url(s, "regions/%s/resourcePolicies/%s", region, name);
	int rc;

	*deleted = 0;
	if (!url)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	isc_http_response_init(&resp);
	rc = gcp_call_reason(s, "DELETE", "resourcePolicies.delete", url, NULL, &resp, reason, err);
	if (!rc)
		rc = op_done(s, region, &resp, "resourcePolicies.delete", err);
	if (!rc || rc == ISC_ENOTFOUND || strcmp(reason, "notFound") == 0) {
		*deleted = 1;
		rc = 0;
	} else if (strcmp(reason, "resourceInUseByAnotherResource") == 0) {
		rc = 0; /* its VMs are still being deleted: a later describe asks again */
	}
	isc_http_response_cleanup(&resp);
	free(url);
	return rc;
}

/*
 * Teardown and crash recovery of compact policies: every policy of the session's region
 * whose description names this broker, whose cluster has no live node in this listing,
 * and which no launch of this process is filling, is deleted. providers/sweep.h says when
 * a describe sweeps (not every describe: resourcePolicies.list is one more call per region
 * and tick). At most POLICY_DELETES_PER_SWEEP deletes per sweep, each a call and an
 * Operation: after a mass teardown the rest go at the next describes instead of holding
 * this one for hundreds of calls. Best effort: logged, the listing stands, the next
 * describe sweeps again.
 */
#define POLICY_DELETES_PER_SWEEP 10

/* The scope of this session's sweeps (providers/sweep.h): API base, region, broker. */
static void sweep_scope(const struct gcp_session *s, const char *broker_id, char *out, size_t cap)
{
	snprintf(out, cap, "gcp %s %s %s", s->compute, s->region, broker_id);
}

/*
 * GCE lists a deleted VM no more (TERMINATED is a stopped one): a torn-down gang's nodes
 * leave the listing rather than show as terminated, so the sweep would never see "a
 * cluster whose nodes are all gone". The clusters of compact nodes each scope's last
 * listing had are kept here; one the listing no longer names is handed to the sweep as a
 * terminated use (VANISHED) until a sweep finds its policies gone. A cluster a sweep
 * found gone while the listing still names it (stopped nodes) is SWEPT: it is dropped,
 * not marked vanished, when it leaves the listing.
 */
enum seen_state { SEEN_LISTED, SEEN_VANISHED, SEEN_SWEPT };

struct seen_cluster {
	char *id;
	enum seen_state state;
};

struct seen_scope {
	char *name;
	struct seen_cluster *v;
	size_t n;
	struct seen_scope *next;
};

static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;
static struct seen_scope *seen_scopes;

/* A node a compact policy can hold: in a cluster, of a machine series that takes one. */
static int compact_node(const struct isc_node_info *ni)
{
	return ni->cluster_id[0] && isc_gcp_compact_machine(ni->instance_type);
}

static const struct seen_cluster *seen_find(const struct seen_scope *sc, const char *id)
{
	for (size_t i = 0; sc && i < sc->n; i++)
		if (strcmp(sc->v[i].id, id) == 0)
			return &sc->v[i];
	return NULL;
}

static struct seen_scope *seen_scope_get(const char *scope)
{
	struct seen_scope *sc;
	for (sc = seen_scopes; sc; sc = sc->next)
		if (strcmp(sc->name, scope) == 0)
			return sc;
	if (!(sc = calloc(1, sizeof(*sc))) || !(sc->name = strdup(scope))) {
		free(sc);
		return NULL;
	}
	sc->next = seen_scopes;
	seen_scopes = sc;
	return sc;
}

/*
 * The scope's memory brought up to this listing; *vanished (n_vanished; the caller frees
 * each and the array) gets the clusters no longer listed that no sweep found gone yet.
 * Out of memory: the memory stays as it was, and the sweep sees this listing only.
 */
static void seen_update(const char *scope, const struct isc_node_info *nodes, size_t n,
                        char ***vanished, size_t *n_vanished)
{
	struct seen_scope *sc;
	struct seen_cluster *v = NULL;
	size_t nv = 0, cap;
	char **out = NULL;
	size_t n_out = 0;

	*vanished = NULL;
	*n_vanished = 0;
	pthread_mutex_lock(&seen_lock);
	if (!(sc = seen_scope_get(scope)))
		goto done;
	cap = sc->n + n;
	if (!(v = calloc(cap ? cap : 1, sizeof(*v))) ||
	    !(out = calloc(cap ? cap : 1, sizeof(*out))))
		goto done;
	for (size_t i = 0; i < n; i++) {
		const struct seen_cluster *old;
		int live = 0, dup = 0;
		if (!compact_node(&nodes[i]))
			continue;
		for (size_t k = 0; k < nv && !dup; k++)
			dup = strcmp(v[k].id, nodes[i].cluster_id) == 0;
		if (dup)
			continue;
		for (size_t k = 0; k < n && !live; k++)
			live = compact_node(&nodes[k]) && nodes[k].state != ISC_NODE_TERMINATED &&
			       strcmp(nodes[k].cluster_id, nodes[i].cluster_id) == 0;
		old = seen_find(sc, nodes[i].cluster_id);
		v[nv].state = !live && old && old->state == SEEN_SWEPT ? SEEN_SWEPT : SEEN_LISTED;
		if (!(v[nv].id = strdup(nodes[i].cluster_id)))
			goto done;
		nv++;
	}
	for (size_t i = 0; i < sc->n; i++) {
		int listed = 0;
		for (size_t k = 0; k < nv && !listed; k++)
			listed = strcmp(v[k].id, sc->v[i].id) == 0;
		if (listed || sc->v[i].state == SEEN_SWEPT)
			continue;
		if (!(v[nv].id = strdup(sc->v[i].id)) || !(out[n_out] = strdup(sc->v[i].id)))
			goto done;
		v[nv++].state = SEEN_VANISHED;
		n_out++;
	}
	for (size_t i = 0; i < sc->n; i++)
		free(sc->v[i].id);
	free(sc->v);
	sc->v = v;
	sc->n = nv;
	v = NULL;
	nv = 0;
	*vanished = out;
	*n_vanished = n_out;
	out = NULL;
	n_out = 0;
done:
	pthread_mutex_unlock(&seen_lock);
	for (size_t i = 0; i < nv; i++)
		free(v[i].id);
	free(v);
	for (size_t i = 0; i < n_out; i++)
		free(out[i]);
	free(out);
}

/* A sweep found these clusters' policies gone: vanished ones are forgotten, listed SWEPT. */
static void seen_swept(const char *scope, const char *const *gone, size_t n_gone)
{
	struct seen_scope *sc;
	size_t kept = 0;

	pthread_mutex_lock(&seen_lock);
	for (sc = seen_scopes; sc && strcmp(sc->name, scope) != 0; sc = sc->next)
		;
	for (size_t i = 0; sc && i < sc->n; i++) {
		int is_gone = 0;
		for (size_t g = 0; g < n_gone && !is_gone; g++)
			is_gone = strcmp(gone[g], sc->v[i].id) == 0;
		if (is_gone && sc->v[i].state == SEEN_VANISHED) {
			free(sc->v[i].id);
			continue;
		}
		if (is_gone)
			sc->v[i].state = SEEN_SWEPT;
		sc->v[kept++] = sc->v[i];
	}
	if (sc)
		sc->n = kept;
	pthread_mutex_unlock(&seen_lock);
}

void isc_gcp_seen_clusters_forget(void)
{
	pthread_mutex_lock(&seen_lock);
	while (seen_scopes) {
		struct seen_scope *sc = seen_scopes;
		seen_scopes = sc->next;
		for (size_t i = 0; i < sc->n; i++)
			free(sc->v[i].id);
		free(sc->v);
		free(sc->name);
		free(sc);
	}
	pthread_mutex_unlock(&seen_lock);
}

/*
 * What a describe hands the sweep (providers/sweep.h): the uses of its compact nodes and
 * of the vanished clusters (pointers into the listing and into vanished).
 */
struct policy_sweep {
	struct isc_sweep sweep;
	char **vanished;
	size_t n_vanished;
};

static void policy_sweep_cleanup(struct policy_sweep *sw)
{
	for (size_t i = 0; i < sw->n_vanished; i++)
		free(sw->vanished[i]);
	free(sw->vanished);
	isc_sweep_cleanup(&sw->sweep);
}

/* Fills sw from the listing; 1 when this describe sweeps (providers/sweep.h). */
static int policies_sweep_due(const struct gcp_session *s, const char *broker_id,
                              const struct isc_node_info *nodes, size_t n, struct policy_sweep *sw)
{
	char scope[sizeof(sw->sweep.scope)];

	sweep_scope(s, broker_id, scope, sizeof(scope));
	seen_update(scope, nodes, n, &sw->vanished, &sw->n_vanished);
	isc_sweep_begin(&sw->sweep, n + sw->n_vanished, "%s", scope);
	for (size_t i = 0; i < n; i++)
		if (compact_node(&nodes[i]))
			isc_sweep_add(&sw->sweep, nodes[i].cluster_id,
			              nodes[i].state != ISC_NODE_TERMINATED);
	for (size_t i = 0; i < sw->n_vanished; i++)
		isc_sweep_add(&sw->sweep, sw->vanished[i], 0);
	return isc_sweep_ready(&sw->sweep, now_ms(s));
}

static void reconcile_policies(struct gcp_session *s, const char *broker_id,
                               const struct isc_node_info *nodes, size_t n, struct policy_sweep *sw)
{
	char prefix[300], *url, *next = NULL;
	struct isc_err err;
	int rc = 0, pages = 0, complete = 0;
	size_t pl, deletes = 0, left = 0;

	if (!s->region[0])
		return; /* policies are regional: without a region there is none to list */
	pl = (size_t)snprintf(prefix, sizeof(prefix), "isc:broker=%s isc:cluster=", broker_id);
	do {
		struct isc_http_response resp;
		json_t *root = NULL, *items, *it;
		size_t i;
		url = api_url(s, "regions/%s/resourcePolicies?maxResults=%d%s%s", s->region,
		              PAGE_SIZE, next ? "&pageToken=" : "", next ? next : "");
		free(next);
		next = NULL;
		if (!url) {
			rc = isc_err_set(&err, ISC_ENOMEM, "out of memory");
			break;
		}
		isc_http_response_init(&resp);
		rc = gcp_call(s, "GET", "resourcePolicies.list", url, NULL, &resp, &err);
		free(url);
		if (!rc && !(root = json_loadb(resp.body.data ? resp.body.data : "", resp.body.len,
		                               0, NULL)))
			rc = isc_err_set(&err, ISC_EINVALID, "resourcePolicies.list: not JSON");
		isc_http_response_cleanup(&resp);
		items = json_object_get(root, "items");
		json_array_foreach(rc ? NULL : items, i, it)
		{
			const char *name = json_string_value(json_object_get(it, "name"));
			const char *d = json_string_value(json_object_get(it, "description"));
			const char *status = json_string_value(json_object_get(it, "status"));
			int used = 0, deleted = 0;
			if (!name || !d || strncmp(d, prefix, pl) != 0)
				continue;
			for (size_t k = 0; k < n && !used; k++)
				used = nodes[k].state != ISC_NODE_TERMINATED &&
				       strcmp(nodes[k].cluster_id, d + pl) == 0;
			if (used || isc_busy_names_has(&busy_policies, name)) {
				isc_sweep_keep(&sw->sweep, d + pl); /* a policy of it stays */
				continue;
			}
			if (deletes == POLICY_DELETES_PER_SWEEP) {
				left++;
			} else {
				deletes++;
				if ((rc = delete_policy(s, s->region, name, &deleted, &err)))
					break;
				if (deleted)
					isc_log(ISC_LOG_INFO,
					        "gcp %s: compact placement policy %s deleted",
					        s->region, name);
			}
			/* one Compute is deleting counts as gone (its delete was asked already) */
			if (!deleted && !(status && strcmp(status, "DELETING") == 0))
				isc_sweep_keep(&sw->sweep, d + pl);
		}
		{
			const char *tok = json_string_value(json_object_get(root, "nextPageToken"));
			/* page tokens are URL-safe base64 in Compute */
			if (!rc && tok &&
			    strspn(tok, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
			                "0123456789-_=") == strlen(tok))
				next = strdup(tok);
			complete = !rc && !tok;
		}
		json_decref(root);
	} while (!rc && next && ++pages < s->max_pages);
	free(next);
	if (!rc && left)
		isc_log(
		    ISC_LOG_INFO,
		    "gcp %s: %zu more unused compact placement polic%s go at the next describes",
		    s->region, left, left == 1 ? "y" : "ies");
	if (rc) {
		isc_log(ISC_LOG_WARN,
		        "gcp %s: compact placement reconcile: %s (next describe retries)",
		        s->region, err.msg);
	} else {
		if (!complete)
			isc_log(ISC_LOG_WARN,
			        "gcp %s: more than %ld pages of resource policies "
			        "(describe_max_pages); the rest wait for the next sweep",
			        s->region, s->max_pages);
		/* A list cut short (describe_max_pages) may hide a cluster's policies: none gone.
		 */
		isc_sweep_finish(&sw->sweep, complete, now_ms(s));
		seen_swept(sw->sweep.scope, sw->sweep.gone, sw->sweep.n_gone);
	}
}

/* ---- firewall: intra-cluster TCP ---- */

/*
 * A gang's ranks talk TCP to one another: the rendezvous port (MASTER_PORT) and then the
 * ephemeral ports gloo's and NCCL's socket transports listen on, so every TCP port must
 * be open between the nodes. VPC firewall rules deny ingress unless a rule allows it
 * (implied deny, priority 65535); the default network's default-allow-internal does,
 * from 10.128.0.0/9 (https://cloud.google.com/firewall/docs/firewalls). Rules are read
 * with firewalls.list (https://cloud.google.com/compute/docs/reference/rest/v1/firewalls/list).
 */
static int cidr4(const char *s, uint32_t *addr, int *len)
{
	unsigned a, b, c, d;
	int n, used = 0;
	if (!s || sscanf(s, "%u.%u.%u.%u/%d%n", &a, &b, &c, &d, &n, &used) != 5 || s[used] ||
	    a > 255 || b > 255 || c > 255 || d > 255 || n < 0 || n > 32)
		return -1;
	*addr = (uint32_t)a << 24 | (uint32_t)b << 16 | (uint32_t)c << 8 | (uint32_t)d;
	*len = n;
	return 0;
}

static uint32_t prefix_mask(int len)
{
	return len == 0 ? 0 : 0xffffffffu << (32 - len);
}

int isc_gcp_fw_scan_init(struct isc_gcp_fw_scan *sc, const char *network, const char *cidr,
                         struct isc_err *err)
{
	memset(sc, 0, sizeof(*sc));
	sc->allow_prio = -1;
	sc->deny_prio = -1;
	snprintf(sc->network, sizeof(sc->network), "%s", network);
	if (cidr4(cidr, &sc->net, &sc->len))
		return isc_err_set(err, ISC_EINVALID, "subnet range '%.40s' is not an IPv4 CIDR",
		                   cidr ? cidr : "");
	sc->net &= prefix_mask(sc->len);
	return 0;
}

/* The name after ".../networks/" of a network URL or path. */
static const char *network_name(const char *v)
{
	const char *p = v ? strstr(v, "networks/") : NULL;
	return p ? p + strlen("networks/") : v ? v : "";
}

/* Whether one of a rule's sourceRanges covers (cover=1) or overlaps (cover=0) the subnet. */
static int ranges_match(const struct isc_gcp_fw_scan *sc, json_t *ranges, int cover)
{
	size_t i;
	json_t *r;
	json_array_foreach(ranges, i, r)
	{
		uint32_t a;
		int l;
		if (cidr4(json_string_value(r), &a, &l))
			continue; /* IPv6 ranges do not reach IPv4 nodes */
		if (cover ? l <= sc->len && (sc->net & prefix_mask(l)) == (a & prefix_mask(l))
		          : (sc->net & prefix_mask(l < sc->len ? l : sc->len)) ==
		                (a & prefix_mask(l < sc->len ? l : sc->len)))
			return 1;
	}
	return 0;
}

/* Marks (or, with mark NULL, just tests) the TCP ports of allowed[]/denied[]; 1 if any. */
static int tcp_ports(json_t *list, unsigned char *mark)
{
	size_t i, j;
	json_t *e, *p;
	int any = 0;
	json_array_foreach(list, i, e)
	{
		const char *proto = json_string_value(json_object_get(e, "IPProtocol"));
		json_t *ports = json_object_get(e, "ports");
		if (!proto || (strcmp(proto, "tcp") != 0 && strcmp(proto, "all") != 0 &&
		               strcmp(proto, "6") != 0))
			continue;
		if (json_array_size(ports) == 0) { /* no ports: every port */
			any = 1;
			if (mark)
				memset(mark, 0xff, 65536 / 8);
			continue;
		}
		json_array_foreach(ports, j, p)
		{
			unsigned lo, hi;
			int used = 0;
			const char *v = json_string_value(p);
			if (!v)
				continue;
			if (sscanf(v, "%u-%u%n", &lo, &hi, &used) != 2 || v[used]) {
				used = 0;
				if (sscanf(v, "%u%n", &lo, &used) != 1 || v[used])
					continue;
				hi = lo;
			}
			if (lo > hi || hi > 65535)
				continue;
			any = 1;
			for (unsigned q = lo; mark && q <= hi; q++)
				mark[q / 8] |= (unsigned char)(1u << (q % 8));
		}
	}
	return any;
}

int isc_gcp_fw_scan_page(struct isc_gcp_fw_scan *sc, const char *body, size_t len, char **next_page,
                         size_t *added, struct isc_err *err)
{
	json_error_t je;
	json_t *root = json_loadb(body, len, 0, &je), *items, *rule;
	const char *nt;
	size_t i;

	*added = 0;
	if (next_page)
		*next_page = NULL;
	items = root ? json_object_get(root, "items") : NULL;
	if (!json_is_object(root) || (items && !json_is_array(items))) {
		json_decref(root);
		return isc_err_set(err, ISC_EINVALID, "firewalls.list: unreadable reply");
	}
	json_array_foreach(items, i, rule)
	{
		const char *name = json_string_value(json_object_get(rule, "name"));
		const char *dir = json_string_value(json_object_get(rule, "direction"));
		json_t *prio_j = json_object_get(rule, "priority");
		long prio = json_is_integer(prio_j) ? (long)json_integer_value(prio_j) : 1000;
		json_t *ranges = json_object_get(rule, "sourceRanges");
		(*added)++;
		if (json_is_true(json_object_get(rule, "disabled")) ||
		    (dir && strcmp(dir, "INGRESS")) ||
		    strcmp(network_name(json_string_value(json_object_get(rule, "network"))),
		           sc->network) != 0)
			continue;
		/* A rule for tagged targets or service accounts is not for every node. */
		if (json_array_size(json_object_get(rule, "targetTags")) ||
		    json_array_size(json_object_get(rule, "targetServiceAccounts")))
			continue;
		if (json_object_get(rule, "denied")) {
			/* A deny wins over an allow of the same priority. */
			if (ranges_match(sc, ranges, 0) &&
			    tcp_ports(json_object_get(rule, "denied"), NULL) &&
			    (sc->deny_prio < 0 || prio < sc->deny_prio)) {
				sc->deny_prio = prio;
				snprintf(sc->deny_name, sizeof(sc->deny_name), "%s",
				         name ? name : "");
			}
			continue;
		}
		if (!ranges_match(sc, ranges, 1) ||
		    !tcp_ports(json_object_get(rule, "allowed"), NULL))
			continue;
		if (!sc->wide_name[0]) {
			/* One rule that opens every TCP port from the subnet to every instance:
			 * tenants' nodes on the network reach one another through it. */
			unsigned char own[65536 / 8] = {0};
			size_t k = 0;
			tcp_ports(json_object_get(rule, "allowed"), own);
			while (k < sizeof(own) && own[k] == 0xff)
				k++;
			if (k == sizeof(own))
				snprintf(sc->wide_name, sizeof(sc->wide_name), "%s",
				         name ? name : "");
		}
		tcp_ports(json_object_get(rule, "allowed"), sc->ports);
		if (prio > sc->allow_prio) {
			sc->allow_prio = prio;
			snprintf(sc->allow_name, sizeof(sc->allow_name), "%s", name ? name : "");
		}
	}
	nt = json_string_value(json_object_get(root, "nextPageToken"));
	if (next_page && nt && nt[0] && !(*next_page = strdup(nt))) {
		json_decref(root);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	json_decref(root);
	return 0;
}

int isc_gcp_fw_scan_ok(const struct isc_gcp_fw_scan *sc)
{
	for (size_t i = 0; i < sizeof(sc->ports); i++)
		if (sc->ports[i] != 0xff)
			return 0;
	return sc->deny_prio < 0 || sc->deny_prio > sc->allow_prio;
}

static int collect_firewalls(void *ctx, const struct isc_http_response *r, char **next,
                             size_t *added, struct isc_err *err)
{
	return isc_gcp_fw_scan_page(ctx, r->body.data, r->body.len, next, added, err);
}

/* The gang's subnet range: subnetworks.get of `subnetwork`, or of the auto mode network's
 * subnet in the region (named after the network). */
static int subnet_range(struct gcp_session *s, const char *region, char cidr[64],
                        struct isc_err *err)
{
	const char *sub = s->subnetwork ? strstr(s->subnetwork, "regions/") : NULL;
	const char *net = network_name(s->network);
	struct isc_http_response resp;
	json_t *root;
	char *url;
	int rc;

	if (s->subnetwork && !sub)
		url = api_url(s, "regions/%s/subnetworks/%s", region, s->subnetwork);
	else if (sub)
		url = api_url(s, "%s", sub);
	else
		url = api_url(s, "regions/%s/subnetworks/%s", region, net);
	if (!url)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	isc_http_response_init(&resp);
	rc = gcp_call(s, "GET", "subnetworks.get", url, NULL, &resp, err);
	free(url);
	root = rc ? NULL : json_loadb(resp.body.data, resp.body.len, 0, NULL);
	if (!rc && !json_string_value(json_object_get(root, "ipCidrRange")))
		rc = isc_err_set(err, ISC_EINVALID, "subnetworks.get: no ipCidrRange in the reply");
	if (!rc)
		snprintf(cidr, 64, "%s", json_string_value(json_object_get(root, "ipCidrRange")));
	json_decref(root);
	isc_http_response_cleanup(&resp);
	return rc;
}

/*
 * Before a gang of several nodes launches: an INGRESS rule of its network must allow all
 * TCP from a range covering its subnet to every node, else the launch is refused naming
 * the rule (as the AWS driver names the EFA security-group rule).
 */
static int check_firewall(struct gcp_session *s, const char *zone, const char *ttag,
                          struct isc_err *err)
{
	struct isc_gcp_fw_scan *sc;
	char region[64], cidr[64], *url;
	int rc;

	region_of(zone, region);
	if ((rc = subnet_range(s, region, cidr, err)))
		return rc;
	if (!(sc = malloc(sizeof(*sc))))
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	rc = isc_gcp_fw_scan_init(sc, network_name(s->network), cidr, err);
	url = rc ? NULL : api_url(s, "global/firewalls?");
	if (!rc && !url)
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
	if (!rc)
		rc = list_pages(s, "firewalls.list", url, collect_firewalls, sc, err);
	if (!rc && ttag) {
		/*
		 * A tenant's nodes get their own rule (sourceTags = targetTags = the tag). Rules
		 * only allow, so a rule that lets all TCP from the subnet reach every instance
		 * (default-allow-internal) would let every tenant's nodes reach every other's:
		 * refused, naming it.
		 */
		if (sc->wide_name[0])
			rc = isc_err_set(
			    err, ISC_EINVALID,
			    "network %s: firewall rule %s lets all TCP from %s (the subnet) reach "
			    "every instance, so the organisations on this project would reach each "
			    "other's nodes; remove it (each organisation's nodes get a rule of "
			    "their "
			    "own, %s) or set [providers.gcp] tenant_isolation = \"never\" "
			    "(docs/security.md, \"Tenants on the platform's account\")",
			    sc->network, sc->wide_name, cidr, ttag);
	} else if (!rc && !isc_gcp_fw_scan_ok(sc)) {
		if (sc->deny_prio >= 0 && sc->allow_prio >= 0 && sc->deny_prio <= sc->allow_prio)
			rc = isc_err_set(
			    err, ISC_EINVALID,
			    "network %s: firewall rule %s (priority %ld) denies the TCP the gang's "
			    "nodes need among themselves (VPC firewall rules, "
			    "https://cloud.google.com/firewall/docs/firewalls)",
			    sc->network, sc->deny_name, sc->deny_prio);
		else
			rc = isc_err_set(
			    err, ISC_EINVALID,
			    "network %s lacks the firewall rule a gang needs: ingress: allow all "
			    "TCP "
			    "from %s (the subnet) to all instances%s (VPC firewall rules, "
			    "https://cloud.google.com/firewall/docs/firewalls)",
			    sc->network, cidr,
			    strcmp(sc->network, "default") == 0 ? ", as default-allow-internal does"
			                                        : "");
	} else if (!rc)
		isc_log(ISC_LOG_DEBUG, "gcp: firewall rule %s allows TCP within %s", sc->allow_name,
		        cidr);
	free(url);
	free(sc);
	return rc;
}

/* ---- tenants on the platform's account (docs/security.md, issue 42) ---- */

/* Tenant rules a launch of this process is about to use (the sweep leaves them). */
static struct isc_busy_names busy_firewalls = ISC_BUSY_NAMES_INIT;

/*
 * The tenant's firewall rule, named like its tag, made on demand (firewalls.get, else
 * firewalls.insert with a requestId from the name; alreadyExists is a concurrent launch's):
 * INGRESS, sourceTags = targetTags = [tag], allowed all protocols (VPC firewall rules: "a
 * source tag ... the rule applies to traffic from instances that have one of the tags",
 * "target tags ... the rule applies only to instances with a matching network tag";
 * https://cloud.google.com/firewall/docs/firewalls). Ingress is denied unless a rule
 * allows it (implied deny), so only the tenant's own nodes reach its nodes, besides what
 * the network's other rules let in (SSH: default-allow-ssh, or the operator's).
 */
static int ensure_tenant_firewall(struct gcp_session *s, const struct isc_launch_spec *spec,
                                  const char *tag, struct isc_err *err)
{
	const char *broker = tag_value(spec, ISC_TAG_BROKER);
	struct isc_http_response resp;
	char rid[37], reason[64], *url = api_url(s, "global/firewalls/%s", tag), *desc = NULL,
	                          *body = NULL;
	json_t *root;
	int rc;

	if (!url)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	isc_http_response_init(&resp);
	rc = gcp_call_reason(s, "GET", "firewalls.get", url, NULL, &resp, reason, err);
	free(url);
	isc_http_response_cleanup(&resp);
	if (!rc)
		return 0; /* there already: the tenant's, made by an earlier launch */
	if (rc != ISC_ENOTFOUND && strcmp(reason, "notFound") != 0)
		return rc;
	isc_gcp_request_id(tag, "tenant-firewall", rid);
	if (asprintf(&desc, "isc:broker=%s isc:tenant=%s", broker ? broker : "", spec->tenant) < 0)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	root = json_pack("{s:s, s:s, s:s, s:s, s:i, s:[s], s:[s], s:[{s:s}]}", "name", tag,
	                 "description", desc, "network", s->network, "direction", "INGRESS",
	                 "priority", 1000, "sourceTags", tag, "targetTags", tag, "allowed",
	                 "IPProtocol", "all");
	free(desc);
	body = root ? json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	json_decref(root);
	url = api_url(s, "global/firewalls?requestId=%s", rid);
	if (!body || !url) {
		free(body);
		free(url);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	isc_http_response_init(&resp);
	rc = gcp_call_reason(s, "POST", "firewalls.insert", url, body, &resp, reason, err);
	if (rc && strcmp(reason, "alreadyExists") == 0)
		rc = 0;
	else if (!rc)
		rc = op_done(s, NULL, &resp, "firewalls.insert", err);
	if (rc && err)
		isc_err_wrap(err, "tenant firewall rule %s", tag);
	isc_http_response_cleanup(&resp);
	free(body);
	free(url);
	return rc;
}

static int gcp_launch_gang(struct isc_provider_session *ps, const struct isc_launch_spec *spec,
                           struct isc_launch_result *out, struct isc_err *err)
{
	struct gcp_session *s = impl(ps);
	char last[ISC_ERR_MSG_MAX] = "", machine[64], accel[64];
	char policy_name[64] = "", policy_region[64] = "", *policy = NULL, ttag[64] = "";
	size_t tl = spec->idempotency_token ? strlen(spec->idempotency_token) : 0;
	int n_acc, rc = 0, gang;

	memset(out, 0, sizeof(*out));
	if (!spec->instance_type || spec->count == 0)
		return isc_err_set(err, ISC_EINVALID,
		                   "launch: an instance type and a count are required");
	if (spec->count > 1000)
		return isc_err_set(err, ISC_EINVALID, "launch: %u nodes is too many", spec->count);
	if (spec->n_zones == 0)
		return isc_err_set(err, ISC_EINVALID,
		                   "launch: GCP needs a zone (the shape lists none)");
	if (tl == 0 || tl > 64)
		return isc_err_set(err, ISC_EINVALID, "idempotency token must be 1..64 characters");
	if (!ssh_key_ok(spec->ssh_public_key))
		return isc_err_set(err, ISC_EINVALID,
		                   "launch: the SSH public key must be one OpenSSH line");
	if ((rc = isc_gcp_machine(spec->instance_type, machine, accel, &n_acc, err)))
		return rc;
	for (size_t z = 0; z < spec->n_zones; z++)
		if (!path_safe(spec->zones[z]))
			return isc_err_set(err, ISC_EINVALID, "launch: '%.64s' is not a GCP zone",
			                   spec->zones[z]);
	/* Nodes joining a gang's placement are members of a gang, even one at a time. */
	gang = spec->count >= 2 || spec->placement_token;
	if ((rc = tenant_tag_of(s, spec, ttag, err)))
		return rc;
	/* A tenant's nodes are checked alone too: nothing may let another tenant in. */
	if (s->firewall_check && (gang || ttag[0]) &&
	    (rc = check_firewall(s, spec->zones[0], ttag[0] ? ttag : NULL, err)))
		return rc;
	if (ttag[0]) {
		isc_busy_names_add(&busy_firewalls, ttag, +1);
		if ((rc = ensure_tenant_firewall(s, spec, ttag, err))) {
			isc_busy_names_add(&busy_firewalls, ttag, -1);
			return rc;
		}
	}
	/*
	 * Close together: one compact policy for the gang, in the zones' region, made by the
	 * gang's launch. Nodes that replace lost members of a gang join that policy (named from
	 * the gang's token), in the gang's zone: a policy's VMs live in one zone.
	 */
	if (s->compact_placement && gang && isc_gcp_compact_machine(machine)) {
		isc_gcp_policy_name(spec->placement_token ? spec->placement_token
		                                          : spec->idempotency_token,
		                    policy_name);
		region_of(spec->zones[0], policy_region);
		isc_busy_names_add(&busy_policies, policy_name, +1);
		if (!spec->placement_token &&
		    (rc = create_policy(s, spec, policy_region, policy_name, err))) {
			isc_busy_names_add(&busy_policies, policy_name, -1);
			if (ttag[0])
				isc_busy_names_add(&busy_firewalls, ttag, -1);
			return rc;
		}
		if (asprintf(&policy, "regions/%s/resourcePolicies/%s", policy_region,
		             policy_name) < 0) {
			isc_busy_names_add(&busy_policies, policy_name, -1);
			if (ttag[0])
				isc_busy_names_add(&busy_firewalls, ttag, -1);
			return isc_err_set(err, ISC_ENOMEM, "out of memory");
		}
	}
	for (size_t z = 0; z < spec->n_zones; z++) {
		char request_id[37], zr[64];
		isc_gcp_request_id(spec->idempotency_token, spec->zones[z], request_id);
		region_of(spec->zones[z], zr);
		if (policy && strcmp(zr, policy_region) != 0) {
			/* a policy serves its own region only */
			rc = isc_err_set(err, ISC_EINVALID,
			                 "launch: zone %s is outside the gang's region %s",
			                 spec->zones[z], policy_region);
			break;
		}
		if (spec->before_zone)
			spec->before_zone(spec->before_zone_ctx, spec->zones[z]);
		rc = launch_in_zone(s, spec, spec->zones[z], request_id, policy, out, err);
		if (rc == ISC_ECAPACITY) {
			snprintf(last, sizeof(last), "%s", err ? err->msg : "");
			continue; /* the next zone may have room */
		}
		if (rc && err)
			isc_err_wrap(err, "zone %s", spec->zones[z]);
		break;
	}
	if (rc == ISC_ECAPACITY)
		isc_err_set(err, ISC_ECAPACITY, "no capacity for %u x %s in %zu zone(s); last: %s",
		            spec->count, spec->instance_type, spec->n_zones, last);
	if (policy) {
		if (rc && rc != ISC_ETRANSIENT && rc != ISC_ETHROTTLED && !spec->placement_token) {
			/* Nothing of the gang stands (a retryable outcome may still have nodes); a
			 * policy joined is its gang's. */
			struct isc_err derr;
			int deleted;
			delete_policy(s, policy_region, policy_name, &deleted, &derr);
		}
		isc_busy_names_add(&busy_policies, policy_name, -1);
		free(policy);
	}
	if (ttag[0])
		isc_busy_names_add(&busy_firewalls, ttag, -1);
	return rc;
}

/* ---- describe ---- */

struct op_list {
	struct isc_gce_operation *v;
	size_t n;
};

static int collect_ops(void *ctx, const struct isc_http_response *r, char **next, size_t *added,
                       struct isc_err *err)
{
	struct op_list *l = ctx;
	size_t before = l->n;
	int rc = isc_gce_parse_operations(r->body.data, r->body.len, &l->v, &l->n, next, err);
	*added = l->n - before;
	return rc;
}

/*
 * Preemption: Google records a compute.instances.preempted operation the
 * moment it starts (the node goes STOPPING, ~30 s before it is gone); that
 * tells a preemption from our own delete.
 */
static int mark_preempted(struct gcp_session *s, struct isc_node_info *nodes, size_t n,
                          struct isc_err *err)
{
	struct op_list ops = {0};
	struct isc_buf b;
	char *url = api_url(s, "%s", "aggregated/operations?filter=");
	int rc;
	if (!url)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	isc_buf_init(&b, 0);
	rc = isc_buf_puts(&b, url);
	rc = rc ? rc : pct(&b, "operationType = \"compute.instances.preempted\"");
	free(url);
	if (rc) {
		isc_buf_cleanup(&b);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	rc = list_pages(s, "globalOperations.aggregatedList", b.data, collect_ops, &ops, err);
	isc_buf_cleanup(&b);
	for (size_t i = 0; !rc && i < ops.n; i++)
		for (size_t j = 0; j < n; j++)
			if (nodes[j].spot && strcmp(nodes[j].id, ops.v[i].target) == 0 &&
			    strcmp(nodes[j].zone, ops.v[i].zone) == 0) {
				nodes[j].interruption_noticed = 1;
				if (!nodes[j].interruption_at_ms ||
				    ops.v[i].insert_ms > nodes[j].interruption_at_ms)
					nodes[j].interruption_at_ms = ops.v[i].insert_ms;
			}
	free(ops.v);
	return rc;
}

/* In this session's region (a zone is REGION-x); every zone when no region is set. */
static int in_region(const struct gcp_session *s, const char *zone)
{
	size_t l = strlen(s->region);
	return l == 0 || (strncmp(zone, s->region, l) == 0 && zone[l] == '-');
}

/*
 * Teardown of tenants' firewall rules (issue 42), as compact policies go: a rule of this
 * broker (named isc-t-TENANT-HASH, HASH from its id) whose tag no listed instance that is
 * not TERMINATED carries, and that no launch of this process is about to use, is deleted
 * (firewalls.delete, at most 10 a sweep). Deleted GCE instances leave the listing, so a
 * sweep is due, besides providers/sweep.h's first time and period, when a tag this process
 * saw live last time is gone from the listing. Best effort: logged, the listing stands.
 */
#define FIREWALL_DELETES_PER_SWEEP 10

static pthread_mutex_t tenant_seen_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	char scope[600];
	char *tags; /* the live tags of the scope's last listing, "\n"-separated */
} tenant_seen[16];

static int tenant_sweep_due(const struct gcp_session *s, const char *broker_id,
                            const struct node_list *l)
{
	char scope[600];
	struct isc_sweep_use *uses = calloc(l->n_tags ? l->n_tags : 1, sizeof(*uses));
	struct isc_buf now;
	int due = 0, slot = -1;

	snprintf(scope, sizeof(scope), "gcp-fw %s%s %s", s->compute, s->project, broker_id);
	isc_buf_init(&now, 0);
	for (size_t i = 0; i < l->n_tags; i++) {
		if (uses)
			uses[i] = (struct isc_sweep_use){l->tags[i], 1};
		isc_buf_printf(&now, "%s\n", l->tags[i]);
	}
	due = !uses || isc_sweep_due(scope, uses, l->n_tags, now_ms(s));
	free(uses);
	pthread_mutex_lock(&tenant_seen_lock);
	for (int k = 0; k < 16 && slot < 0; k++)
		if (strcmp(tenant_seen[k].scope, scope) == 0)
			slot = k;
	if (slot >= 0 && tenant_seen[slot].tags) {
		/* a tag live last time and not now: its nodes are gone */
		for (char *p = tenant_seen[slot].tags; *p && !due;) {
			char *nl = strchr(p, '\n');
			size_t len = nl ? (size_t)(nl - p) : strlen(p);
			int found = 0;
			for (size_t i = 0; i < l->n_tags && !found; i++)
				found =
				    strlen(l->tags[i]) == len && strncmp(l->tags[i], p, len) == 0;
			due = !found;
			p += len + (nl ? 1 : 0);
		}
	}
	if (slot < 0)
		for (int k = 0; k < 16 && slot < 0; k++)
			if (!tenant_seen[k].scope[0])
				slot = k;
	if (slot < 0)
		slot = 0; /* more scopes than slots: one is forgotten (it sweeps again) */
	snprintf(tenant_seen[slot].scope, sizeof(tenant_seen[slot].scope), "%s", scope);
	free(tenant_seen[slot].tags);
	tenant_seen[slot].tags = isc_buf_detach(&now);
	pthread_mutex_unlock(&tenant_seen_lock);
	isc_buf_cleanup(&now);
	return due;
}

static void reconcile_tenant_firewalls(struct gcp_session *s, const char *broker_id,
                                       const struct node_list *l)
{
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned int dl = 0;
	char suffix[16], scope[600];
	struct isc_buf b, f;
	struct isc_http_response resp;
	struct isc_err err;
	json_t *root = NULL, *it;
	size_t i, deletes = 0;
	int rc;

	if (!EVP_Digest(broker_id, strlen(broker_id), d, &dl, EVP_sha256(), NULL) || dl < 4)
		return;
	snprintf(suffix, sizeof(suffix), "-%02x%02x%02x%02x", d[0], d[1], d[2], d[3]);
	snprintf(scope, sizeof(scope), "gcp-fw %s%s %s", s->compute, s->project, broker_id);
	isc_buf_init(&b, 0);
	isc_buf_init(&f, 0);
	{
		char *base = api_url(s, "global/firewalls");
		rc = base ? 0 : ISC_ENOMEM;
		rc = rc ? rc : isc_buf_printf(&f, "name eq \"isc-t-.*%s\"", suffix);
		rc = rc ? rc : isc_buf_printf(&b, "%s?maxResults=%d&filter=", base, PAGE_SIZE);
		rc = rc ? rc : pct(&b, f.data);
		free(base);
	}
	isc_http_response_init(&resp);
	if (rc)
		rc = isc_err_set(&err, ISC_ENOMEM, "out of memory");
	else
		rc = gcp_call(s, "GET", "firewalls.list", b.data, NULL, &resp, &err);
	if (!rc &&
	    !(root = json_loadb(resp.body.data ? resp.body.data : "", resp.body.len, 0, NULL)))
		rc = isc_err_set(&err, ISC_EINVALID, "firewalls.list: not JSON");
	json_array_foreach(rc ? NULL : json_object_get(root, "items"), i, it)
	{
		const char *name = json_string_value(json_object_get(it, "name"));
		size_t nl = name ? strlen(name) : 0, sl = strlen(suffix);
		int used = 0;
		char *url;
		struct isc_http_response dr;
		char reason[64];
		/* the filter is the server's: the name is checked here again */
		if (!name || strncmp(name, "isc-t-", 6) != 0 || nl <= sl ||
		    strcmp(name + nl - sl, suffix) != 0)
			continue;
		for (size_t k = 0; k < l->n_tags && !used; k++)
			used = strcmp(l->tags[k], name) == 0;
		if (used || isc_busy_names_has(&busy_firewalls, name) ||
		    deletes == FIREWALL_DELETES_PER_SWEEP)
			continue;
		deletes++;
		if (!(url = api_url(s, "global/firewalls/%s", name))) {
			rc = isc_err_set(&err, ISC_ENOMEM, "out of memory");
			break;
		}
		isc_http_response_init(&dr);
		rc = gcp_call_reason(s, "DELETE", "firewalls.delete", url, NULL, &dr, reason, &err);
		if (!rc)
			rc = op_done(s, NULL, &dr, "firewalls.delete", &err);
		if (!rc)
			isc_log(ISC_LOG_INFO,
			        "gcp: tenant firewall rule %s deleted (no live instance)", name);
		else if (rc == ISC_ENOTFOUND || strcmp(reason, "notFound") == 0)
			rc = 0;
		isc_http_response_cleanup(&dr);
		free(url);
		if (rc)
			break;
	}
	json_decref(root);
	isc_http_response_cleanup(&resp);
	isc_buf_cleanup(&b);
	isc_buf_cleanup(&f);
	if (rc)
		isc_log(ISC_LOG_WARN, "gcp: tenant firewall reconcile: %s (next describe retries)",
		        err.msg);
	else
		isc_sweep_done(scope, NULL, 0, now_ms(s));
}

static int gcp_describe(struct isc_provider_session *ps, const char *broker_id,
                        struct isc_node_info **out, size_t *n_out, struct isc_err *err)
{
	struct gcp_session *s = impl(ps);
	struct node_list all = {0};
	char *url;
	size_t kept = 0;
	int rc, stopping_spot = 0;

	all.want_tags = s->tenant_isolation;

	*out = NULL;
	*n_out = 0;
	if (!broker_id || !broker_id[0])
		return isc_err_set(err, ISC_EINVALID, "describe: empty broker id");
	if (!isc_gcp_label_value_ok(broker_id))
		return isc_err_set(
		    err, ISC_EINVALID,
		    "broker id '%.80s' cannot be a GCP label value (lowercase letters, "
		    "digits, _ and -)",
		    broker_id);
	url = label_filter_url(s, "aggregated/instances", "isc-broker", broker_id);
	if (!url)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	rc = list_pages(s, "instances.aggregatedList", url, collect_nodes, &all, err);
	free(url);
	for (size_t i = 0; !rc && i < all.n; i++) {
		if (!in_region(s, all.v[i].zone))
			continue;
		all.v[kept++] = all.v[i];
		if (all.v[i].spot && all.v[i].state != ISC_NODE_RUNNING &&
		    all.v[i].state != ISC_NODE_PENDING)
			stopping_spot = 1;
	}
	if (!rc && stopping_spot)
		rc = mark_preempted(s, all.v, kept, err);
	if (!rc && s->compact_placement) {
		struct policy_sweep sw;
		if (policies_sweep_due(s, broker_id, all.v, kept, &sw))
			reconcile_policies(s, broker_id, all.v, kept, &sw);
		policy_sweep_cleanup(&sw);
	}
	/* Firewall rules are global: the tags come from the whole listing, every region. */
	if (!rc && s->tenant_isolation && tenant_sweep_due(s, broker_id, &all))
		reconcile_tenant_firewalls(s, broker_id, &all);
	free(all.tags);
	if (rc) {
		free(all.v);
		return rc;
	}
	*out = all.v;
	*n_out = kept;
	return 0;
}

/* ---- terminate ---- */

struct ref_list {
	struct isc_gce_ref *v;
	size_t n;
};

static int collect_refs(void *ctx, const struct isc_http_response *r, char **next, size_t *added,
                        struct isc_err *err)
{
	struct ref_list *l = ctx;
	size_t before = l->n;
	int rc = isc_gce_parse_refs(r->body.data, r->body.len, &l->v, &l->n, next, err);
	*added = l->n - before;
	return rc;
}

static int delete_refs(struct gcp_session *s, const struct isc_gce_ref *refs, size_t n,
                       struct isc_err *err)
{
	int rc = 0;
	for (size_t i = 0; i < n && !rc; i++) {
		struct isc_http_response resp;
		char seed[160], request_id[37], *url;
		/* The incarnation's id is in the seed: a later node of the same name is another
		 * delete. */
		snprintf(seed, sizeof(seed), "delete/%s/%s/%s", refs[i].zone, refs[i].name,
		         refs[i].id);
		isc_gcp_request_id(seed, refs[i].zone, request_id);
		url = api_url(s, "zones/%s/instances/%s?requestId=%s", refs[i].zone, refs[i].name,
		              request_id);
		if (!url)
			return isc_err_set(err, ISC_ENOMEM, "out of memory");
		isc_http_response_init(&resp);
		rc = gcp_call(s, "DELETE", "instances.delete", url, NULL, &resp, err);
		if (rc == ISC_ENOTFOUND)
			rc = 0; /* gone already */
		isc_http_response_cleanup(&resp);
		free(url);
	}
	return rc;
}

static int name_ok(const char *id)
{
	size_t n = id ? strlen(id) : 0;
	if (n == 0 || n > 63 || !islower((unsigned char)id[0]))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!islower((unsigned char)id[i]) && !isdigit((unsigned char)id[i]) &&
		    id[i] != '-')
			return 0;
	return 1;
}

static int gcp_terminate(struct isc_provider_session *ps, const char *const *ids, size_t n,
                         struct isc_err *err)
{
	struct gcp_session *s = impl(ps);
	int rc = 0;

	for (size_t i = 0; i < n; i++)
		if (!name_ok(ids[i]))
			return isc_err_set(err, ISC_EINVALID,
			                   "terminate: '%.80s' is not an instance name",
			                   ids[i] ? ids[i] : "");
	/* Names are per zone: find each one's zone (one filtered list per batch), then delete. */
	for (size_t i = 0; i < n && !rc; i += TERMINATE_BATCH) {
		size_t m = n - i < TERMINATE_BATCH ? n - i : TERMINATE_BATCH;
		struct ref_list found = {0};
		struct isc_buf f, url;
		char *base = api_url(s, "%s", "aggregated/instances?filter=");
		size_t kept = 0;

		isc_buf_init(&f, 0);
		isc_buf_init(&url, 0);
		rc = base ? 0 : ISC_ENOMEM;
		for (size_t j = 0; j < m && !rc; j++)
			rc = isc_buf_printf(&f, "%s(name = \"%s\")", j ? " OR " : "", ids[i + j]);
		rc = rc ? rc : isc_buf_puts(&url, base);
		rc = rc ? rc : pct(&url, f.data);
		free(base);
		isc_buf_cleanup(&f);
		if (rc) {
			isc_buf_cleanup(&url);
			return isc_err_set(err, ISC_ENOMEM, "out of memory");
		}
		rc = list_pages(s, "instances.aggregatedList", url.data, collect_refs, &found, err);
		isc_buf_cleanup(&url);
		/* Only what we asked for, in our region: a filter is no reason to trust a reply. */
		for (size_t k = 0; !rc && k < found.n; k++) {
			int asked = 0;
			for (size_t j = 0; j < m && !asked; j++)
				asked = strcmp(found.v[k].name, ids[i + j]) == 0;
			if (asked && in_region(s, found.v[k].zone))
				found.v[kept++] = found.v[k];
		}
		if (!rc)
			rc = delete_refs(s, found.v, kept, err);
		free(found.v);
	}
	return rc;
}

/* The [providers.gcp] keys (docs/config.md). */
static const char *const gcp_setting_keys[] = {
    "credentials_file",
    "project",
    "endpoint_compute",
    "source_image",
    "network",
    "subnetwork",
    "external_ip",
    "disk_size_gb",
    "compact_placement",
    "firewall_check",
    "tenant_isolation",
    "ssh_key_user",
    "operation_timeout_s",
    "describe_max_pages",
    "allow_insecure_endpoint",
    NULL,
};

const struct isc_provider isc_provider_gcp = {
    .name = "gcp",
    .setting_keys = gcp_setting_keys,
    .session_new = gcp_session_new,
    .session_free = gcp_session_free,
    .check_credentials = gcp_check_credentials,
    .credential_keys = gcp_credential_keys,
    .credentials_valid = gcp_credentials_valid,
    /*
     * No price API: Compute Engine has none (Spot prices are SKUs of the Cloud
     * Billing Catalog, changed at most monthly), so GCP's are the catalog's
     * list prices and prices/ counts them as such.
     */
    .refresh_prices = NULL,
    .launch_gang = gcp_launch_gang,
    .describe = gcp_describe,
    .terminate = gcp_terminate,
};
