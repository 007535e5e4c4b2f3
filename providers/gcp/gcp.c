/*
 * The GCP driver: the isc_provider table for Compute Engine v1 (JSON over
 * HTTPS, bearer tokens from a service account). A gang is one
 * instances.bulkInsert per zone with count = minCount = N, so Google itself
 * creates all or nothing; its requestId is derived from the broker's token and
 * the zone, so a retry, a lost reply or a crash replay never creates a second
 * gang. Nodes carry labels (isc-broker, isc-cluster, isc-experiment,
 * isc-request), which is how describe and the launch itself find them again.
 */
#include "providers/gcp/gcp_session.h"

#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_PAGES       100 /* describe_max_pages: 100 pages of 500 = 50,000 instances */
#define TERMINATE_BATCH 50  /* names per lookup filter */
#define LIST_RETRIES    5   /* re-reads of a gang's listing that shows fewer nodes than made */
#define KEY_FILE_MAX    (64 * 1024)
/*
 * An image with cloud-init: Debian images run Google's guest agent only, which ignores the
 * user-data metadata (Compute Engine docs, "Operating system details"); Ubuntu's read it.
 */
#define DEFAULT_IMAGE   "projects/ubuntu-os-cloud/global/images/family/ubuntu-2204-lts"
#define DEFAULT_NETWORK "global/networks/default"

static struct gcp_session *impl(struct isc_provider_session *s)
{
	return s->impl;
}

/* ---- small helpers ---- */

int64_t gcp_now_ms(const struct gcp_session *s)
{
	return s->clock->now_ms(s->clock->ctx);
}

/* Percent-encodes everything but RFC 3986 unreserved characters. */
int gcp_pct(struct isc_buf *b, const char *s)
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
	if (s->token.access_token &&
	    gcp_now_ms(s) < s->token.expires_at_ms - ISC_GCP_TOKEN_MARGIN_MS)
		return 0;
	if (s->token_refused)
		return isc_err_set(err, ISC_EAUTH,
		                   "the token endpoint refused this service account");
	isc_gcp_token_cleanup(&s->token);
	if (isc_gcp_token_cached(&s->key, gcp_now_ms(s), &s->token))
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
int gcp_call(struct gcp_session *s, const char *method, const char *what, const char *url,
             const char *body, struct isc_http_response *resp, struct isc_err *err)
{
	return gcp_call_reason(s, method, what, url, body, resp, NULL, err);
}

int gcp_call_reason(struct gcp_session *s, const char *method, const char *what, const char *url,
                    const char *body, struct isc_http_response *resp, char *reason,
                    struct isc_err *err)
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

char *gcp_api_url(const struct gcp_session *s, const char *fmt, ...)
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
	char *url = gcp_api_url(s, "%s", "");
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

const char *gcp_tag_value(const struct isc_launch_spec *spec, const char *key)
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
	return isc_gcp_tenant_tag(gcp_tag_value(spec, ISC_TAG_BROKER), spec->tenant, out, err);
}

static int bulk_body(const struct gcp_session *s, const struct isc_launch_spec *spec,
                     const char *request_id, const char *policy, char **out, struct isc_err *err)
{
	char ttag[64];
	char machine[64], accel[64], count[16], disk[24], prefix[41], pattern[48];
	const char *cluster = gcp_tag_value(spec, ISC_TAG_CLUSTER);
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
	int64_t deadline = gcp_now_ms(s) + s->op_timeout_ms;
	long delay = 250;
	int rc = 0;

	while (strcmp(op->status, "DONE") != 0) {
		struct isc_http_response resp;
		char *url;
		if (gcp_now_ms(s) >= deadline)
			return isc_err_set(err, ISC_ETRANSIENT,
			                   "operation %s in %s not DONE after %ld s (still %s)",
			                   op->name, zone, s->op_timeout_ms / 1000, op->status);
		s->clock->sleep_ms(s->clock->ctx, delay);
		if (delay < 4000)
			delay *= 2;
		url = gcp_api_url(s, "zones/%s/operations/%s", zone, op->name);
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
int gcp_list_pages(struct gcp_session *s, const char *what, const char *base_url,
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
			rc = rc ? rc : gcp_pct(&url, next);
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
	char *url = gcp_api_url(s, "%s", collection);
	int rc;
	if (!url)
		return NULL;
	isc_buf_init(&b, 0);
	isc_buf_init(&f, 0);
	rc = isc_buf_printf(&f, "labels.%s = \"%s\"", key, value);
	rc = rc ? rc : isc_buf_printf(&b, "%s?filter=", url);
	rc = rc ? rc : gcp_pct(&b, f.data);
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
	url = gcp_api_url(s, "zones/%s/instances/bulkInsert?requestId=%s", zone, request_id);
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
		rc = gcp_list_pages(s, "instances.list", list_url, collect_nodes, &got, err);
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
	    (rc = gcp_check_firewall(s, spec->zones[0], ttag[0] ? ttag : NULL, err)))
		return rc;
	if (ttag[0]) {
		isc_busy_names_add(&gcp_busy_firewalls, ttag, +1);
		if ((rc = gcp_ensure_tenant_firewall(s, spec, ttag, err))) {
			isc_busy_names_add(&gcp_busy_firewalls, ttag, -1);
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
		gcp_region_of(spec->zones[0], policy_region);
		isc_busy_names_add(&gcp_busy_policies, policy_name, +1);
		if (!spec->placement_token &&
		    (rc = gcp_create_policy(s, spec, policy_region, policy_name, err))) {
			isc_busy_names_add(&gcp_busy_policies, policy_name, -1);
			if (ttag[0])
				isc_busy_names_add(&gcp_busy_firewalls, ttag, -1);
			return rc;
		}
		if (asprintf(&policy, "regions/%s/resourcePolicies/%s", policy_region,
		             policy_name) < 0) {
			isc_busy_names_add(&gcp_busy_policies, policy_name, -1);
			if (ttag[0])
				isc_busy_names_add(&gcp_busy_firewalls, ttag, -1);
			return isc_err_set(err, ISC_ENOMEM, "out of memory");
		}
	}
	for (size_t z = 0; z < spec->n_zones; z++) {
		char request_id[37], zr[64];
		isc_gcp_request_id(spec->idempotency_token, spec->zones[z], request_id);
		gcp_region_of(spec->zones[z], zr);
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
			gcp_delete_policy(s, policy_region, policy_name, &deleted, &derr);
		}
		isc_busy_names_add(&gcp_busy_policies, policy_name, -1);
		free(policy);
	}
	if (ttag[0])
		isc_busy_names_add(&gcp_busy_firewalls, ttag, -1);
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
	char *url = gcp_api_url(s, "%s", "aggregated/operations?filter=");
	int rc;
	if (!url)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	isc_buf_init(&b, 0);
	rc = isc_buf_puts(&b, url);
	rc = rc ? rc : gcp_pct(&b, "operationType = \"compute.instances.preempted\"");
	free(url);
	if (rc) {
		isc_buf_cleanup(&b);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	rc = gcp_list_pages(s, "globalOperations.aggregatedList", b.data, collect_ops, &ops, err);
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
	rc = gcp_list_pages(s, "instances.aggregatedList", url, collect_nodes, &all, err);
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
		if (gcp_policies_sweep_due(s, broker_id, all.v, kept, &sw))
			gcp_reconcile_policies(s, broker_id, all.v, kept, &sw);
		gcp_policy_sweep_cleanup(&sw);
	}
	/* Firewall rules are global: the tags come from the whole listing, every region. */
	if (!rc && s->tenant_isolation && gcp_tenant_sweep_due(s, broker_id, &all))
		gcp_reconcile_tenant_firewalls(s, broker_id, &all);
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
		url = gcp_api_url(s, "zones/%s/instances/%s?requestId=%s", refs[i].zone,
		                  refs[i].name, request_id);
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
		char *base = gcp_api_url(s, "%s", "aggregated/instances?filter=");
		size_t kept = 0;

		isc_buf_init(&f, 0);
		isc_buf_init(&url, 0);
		rc = base ? 0 : ISC_ENOMEM;
		for (size_t j = 0; j < m && !rc; j++)
			rc = isc_buf_printf(&f, "%s(name = \"%s\")", j ? " OR " : "", ids[i + j]);
		rc = rc ? rc : isc_buf_puts(&url, base);
		rc = rc ? rc : gcp_pct(&url, f.data);
		free(base);
		isc_buf_cleanup(&f);
		if (rc) {
			isc_buf_cleanup(&url);
			return isc_err_set(err, ISC_ENOMEM, "out of memory");
		}
		rc = gcp_list_pages(s, "instances.aggregatedList", url.data, collect_refs, &found,
		                    err);
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

/*
 * Compute Engine drops a deleted instance from instances.list and aggregatedList at once:
 * no TERMINATED entry lingers as EC2's and OCI's do, so a node the broker deleted is only
 * ever seen missing, and absence alone is believed after node_absence_confirm_ms. A
 * read of the instance itself is strongly consistent: instances.get answers 404
 * notFound for an instance that no longer exists
 * (https://cloud.google.com/compute/docs/reference/rest/v1/instances/get; deleted by
 * https://cloud.google.com/compute/docs/reference/rest/v1/instances/delete). One GET
 * per id (Compute has no batch read by name; the caller asks only for nodes it deleted).
 */
static int gcp_confirm_gone(struct isc_provider_session *ps, const char *const *ids,
                            const char *const *zones, size_t n, int *gone, struct isc_err *err)
{
	struct gcp_session *s = impl(ps);
	int rc = 0;

	for (size_t i = 0; i < n; i++)
		gone[i] = 0;
	for (size_t i = 0; i < n && !rc; i++) {
		struct isc_http_response resp;
		char *url;
		/* Only a name and zone that can be ours (the store has them from the cloud). */
		if (!name_ok(ids[i]) || !path_safe(zones[i]) || !in_region(s, zones[i]))
			continue;
		if (!(url = gcp_api_url(s, "zones/%s/instances/%s", zones[i], ids[i])))
			return isc_err_set(err, ISC_ENOMEM, "out of memory");
		isc_http_response_init(&resp);
		rc = gcp_call(s, "GET", "instances.get", url, NULL, &resp, err);
		gone[i] = isc_gce_get_gone(resp.status, resp.body.data, resp.body.len);
		if (rc == ISC_ENOTFOUND)
			rc = 0; /* the answer itself: gone when it is Google's notFound */
		isc_http_response_cleanup(&resp);
		free(url);
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
    /* read by prices/lists.c: the Cloud Billing Catalog's base URL and API key file */
    "billing_endpoint",
    "live_prices", /* prices/lists.c: read this cloud's price list (opt-in) */
    "billing_api_key_file",
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
     * No per-instance-type price call: Compute Engine has none. GCP's prices
     * (on-demand and Spot) are SKUs of the Cloud Billing Catalog
     * (gcp_billing.h), read on their own schedule by prices/lists.c.
     */
    .refresh_prices = NULL,
    .launch_gang = gcp_launch_gang,
    .describe = gcp_describe,
    .terminate = gcp_terminate,
    .confirm_gone = gcp_confirm_gone,
};
