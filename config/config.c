/*
 * Reading config.toml. Every key is checked for type and range; an unknown
 * key is an error naming the file, line and column, so a typo never silently
 * falls back to a default.
 */
#include "config/config.h"

#include "common/suggest.h"
#include "providers/provider.h"
#include "store/store.h"
#include "toml/toml.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CONFIG_MAX_BYTES (1024 * 1024)

static void provider_cleanup(struct isc_provider_config *p)
{
	free(p->name);
	for (size_t i = 0; i < p->n_regions; i++)
		free(p->regions[i]);
	free(p->regions);
	free(p->ssh_user);
	for (size_t i = 0; i < p->n_settings; i++) {
		free(p->settings[i].key);
		free(p->settings[i].value);
	}
	free(p->settings);
}

void isc_config_free(struct isc_config *c)
{
	if (!c)
		return;
	free(c->path);
	free(c->broker_id);
	free(c->default_image);
	free(c->shm_size);
	free(c->efa_plugin_version);
	free(c->artifact_root);
	free(c->artifact_s3_bucket);
	free(c->artifact_s3_prefix);
	free(c->artifact_endpoint_s3);
	free(c->artifact_s3_region);
	free(c->artifact_s3_addressing);
	free(c->artifact_profile);
	free(c->artifact_credentials_file);
	free(c->store_url);
	free(c->api_socket);
	free(c->api_listen);
	free(c->metrics_listen);
	for (size_t i = 0; i < c->n_providers; i++)
		provider_cleanup(&c->providers[i]);
	free(c->providers);
	free(c);
}

/*
 * api_threads' default: one server thread per online CPU, at least 2. The slow
 * calls have their own threads (api/slow.h), so a server thread only waits for a
 * core, and more threads than cores only queue for them (docs/benchmarks.md).
 */
long isc_config_default_api_threads(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n < 2 ? 2 : n > 256 ? 256 : n;
}

static struct isc_config *config_defaults(void)
{
	struct isc_config *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->path = strdup("");
	c->broker_id = strdup("");
	c->default_image = strdup("pytorch/pytorch:latest");
	c->shm_size = strdup("");
	c->efa_plugin_version = strdup("");
	c->artifact_root = strdup("");
	c->artifact_endpoint_s3 = strdup("");
	c->artifact_s3_region = strdup("");
	c->artifact_s3_addressing = strdup("auto");
	c->artifact_profile = strdup("");
	c->artifact_credentials_file = strdup("");
	c->artifact_url_ttl_s = 900;
	c->store_url = strdup("sqlite:");
	c->api_socket = strdup("");
	c->api_listen = strdup("");
	c->metrics_listen = strdup("");
	c->api_max_connections = 512;
	c->api_max_connections_per_ip = 32;
	c->api_timeout_s = 30;
	c->api_header_timeout_s = 10;
	c->api_threads = isc_config_default_api_threads();
	c->api_slow_threads = 4;
	c->api_slow_queue = 64;
	c->tick_interval_ms = 2000;
	c->lease_ms = 8000;
	c->broker_workers = 32;
	c->retry_wait_ms = 30000;
	c->stop_grace_s = 30;
	c->boot_deadline_ms = 300000;
	c->replace_deadline_ms = 180000;
	/* Launch to SSH by family (docs/broker.md, "Stragglers"): about the 99th percentile of
	 * the clouds' published boots (docs/mock-cloud.md, "Timing model": CPU VMs median 25 s,
	 * GPU VMs 90 s, sigma 0.35; bare metal up to 20 min, dstack's OCI BM.* timeout). */
	c->boot_deadline_vm_ms = 60000;
	c->boot_deadline_gpu_ms = 240000;
	c->boot_deadline_metal_ms = 1200000;
	c->command_timeout_ms = 600000;
	c->image_pull_stall_ms = 120000;
	c->image_pull_max_ms = 3600000;
	c->master_port = 29500;
	c->reservation_window_ms = 3600000;
	c->charge_interval_ms = 60000;
	c->hold_renew_below_ppm = 500000;
	c->reconcile_every_ticks = 30;
	c->checkpoint_sync_ms = 600000;
	c->lossy_sync_ms = 30000;
	c->node_absence_confirm_ms = 30000;
	c->describe_wait_ms = 60000;
	c->price_refresh_ms = 3600000;
	c->price_refresh_gcp_ms = 21600000;
	c->price_refresh_oci_ms = 21600000;
	c->price_refresh_aws_ondemand_ms = 21600000;
	c->rank_log_max_bytes = 256LL << 20;
	c->experiment_log_max_bytes = 1LL << 30;
	c->artifact_max_bytes = 256LL << 30;
	c->artifact_max_entries = 200000;
	c->disk_reserve_bytes = 1LL << 30;
	c->transfer_deadline_ms = 7200000;
	c->transfer_min_bytes_per_s = 65536;
	c->transfer_window_ms = 60000;
	c->org_artifact_quota_bytes = 1LL << 40;
	c->cycle_ms = 90000;
	c->period_ms = 7200000;
	c->node_down_after_ms = 30000;
	c->node_probe_ms = 10000;
	if (!c->path || !c->broker_id || !c->default_image || !c->shm_size ||
	    !c->efa_plugin_version || !c->artifact_root || !c->artifact_endpoint_s3 ||
	    !c->artifact_s3_region || !c->artifact_s3_addressing || !c->artifact_profile ||
	    !c->artifact_credentials_file || !c->store_url || !c->api_socket || !c->api_listen ||
	    !c->metrics_listen) {
		isc_config_free(c);
		return NULL;
	}
	return c;
}

/* S3's bucket naming rules: 3-63 of a-z 0-9 . -, starting and ending with a letter or digit. */
static int bucket_name_ok(const char *b, size_t n)
{
	if (n < 3 || n > 63 || b[0] == '-' || b[0] == '.' || b[n - 1] == '-' || b[n - 1] == '.')
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((b[i] >= 'a' && b[i] <= 'z') || (b[i] >= '0' && b[i] <= '9') || b[i] == '-' ||
		      (b[i] == '.' && b[i + 1] != '.')))
			return 0;
	return 1;
}

int isc_config_artifact_root_parse(const char *root, char **bucket, char **prefix,
                                   struct isc_err *err)
{
	const char *b, *slash, *p;
	size_t bn;

	if (bucket)
		*bucket = NULL;
	if (prefix)
		*prefix = NULL;
	if (!root[0] || root[0] == '/')
		return 0;
	if (strncmp(root, "s3://", 5) != 0)
		return isc_err_set(err, ISC_EINVALID,
		                   "artifact_root '%.200s' is neither an absolute folder nor an "
		                   "s3://BUCKET/PREFIX URL (docs/artifacts.md)",
		                   root);
	b = root + 5;
	slash = strchr(b, '/');
	bn = slash ? (size_t)(slash - b) : strlen(b);
	if (!bucket_name_ok(b, bn))
		return isc_err_set(err, ISC_EINVALID,
		                   "artifact_root '%.200s': '%.*s' is not an S3 bucket name (3-63 "
		                   "of a-z, 0-9, '.', '-')",
		                   root, (int)(bn > 80 ? 80 : bn), b);
	p = slash ? slash + 1 : "";
	{
		size_t pn = strlen(p);
		while (pn && p[pn - 1] == '/')
			pn--;
		if (pn > 512)
			return isc_err_set(err, ISC_EINVALID,
			                   "artifact_root: the prefix is longer than 512 bytes");
		/* Every segment a plain name: the organisations' prefixes (@ORGID/) are
		 * below it, and a "..", "." or empty one would make two spellings of one key. */
		for (const char *q = p; q < p + pn;) {
			const char *e = memchr(q, '/', (size_t)(p + pn - q));
			size_t sn = e ? (size_t)(e - q) : (size_t)(p + pn - q);
			if (sn == 0 || (sn == 1 && q[0] == '.') ||
			    (sn == 2 && q[0] == '.' && q[1] == '.') || q[0] == '@')
				return isc_err_set(
				    err, ISC_EINVALID,
				    "artifact_root '%.200s': the prefix has an empty, "
				    "'.', '..' or '@' segment",
				    root);
			for (size_t i = 0; i < sn; i++)
				if ((unsigned char)q[i] < 0x20 || q[i] == 0x7f || q[i] == '\\')
					return isc_err_set(
					    err, ISC_EINVALID,
					    "artifact_root: the prefix has a control "
					    "character or a backslash");
			q += sn + 1;
		}
		if (bucket && prefix) {
			*bucket = strndup(b, bn);
			*prefix = strndup(p, pn);
			if (!*bucket || !*prefix) {
				free(*bucket);
				free(*prefix);
				*bucket = *prefix = NULL;
				return isc_err_set(err, ISC_ENOMEM, "out of memory");
			}
		}
	}
	return 0;
}

const struct isc_provider_config *isc_config_provider(const struct isc_config *c, const char *name)
{
	for (size_t i = 0; i < c->n_providers; i++)
		if (strcmp(c->providers[i].name, name) == 0)
			return &c->providers[i];
	return NULL;
}

char *isc_config_artifact_dir(const struct isc_config *c, const char *home,
                              const char *experiment_id)
{
	char *dir;
	/* By default the experiment's Output Path, next to its rank logs, where
	 * `isc experiments` points the user. */
	int ok = c->artifact_root[0] && !c->artifact_s3_bucket
	             ? asprintf(&dir, "%s/%s", c->artifact_root, experiment_id)
	             : asprintf(&dir, "%s/experiments/%s", home, experiment_id);
	return ok < 0 ? NULL : dir;
}

const char *isc_config_setting(const struct isc_provider_config *p, const char *key)
{
	for (size_t i = 0; i < p->n_settings; i++)
		if (strcmp(p->settings[i].key, key) == 0)
			return p->settings[i].value;
	return NULL;
}

struct ctx {
	const char *path;
	struct isc_err *err;
};

static int fail_at(struct ctx *x, const struct isc_toml_value *v, const char *key, const char *msg)
{
	return isc_err_set(x->err, ISC_EINVALID, "%s:%d:%d: %s: %s", x->path, isc_toml_key_line(v),
	                   isc_toml_key_col(v), key, msg);
}

/* "" or "A.B.C.D:PORT", as the API's listeners parse it (api/server.c). */
static int listen_ok(const char *text)
{
	char host[64], *end;
	const char *colon = strrchr(text, ':');
	struct in_addr a;
	long port;

	if (!text[0])
		return 1;
	if (!colon || (size_t)(colon - text) >= sizeof(host) || !colon[1])
		return 0;
	memcpy(host, text, (size_t)(colon - text));
	host[colon - text] = 0;
	port = strtol(colon + 1, &end, 10);
	return !*end && port >= 0 && port <= 65535 && inet_pton(AF_INET, host, &a) == 1;
}

static int get_string(struct ctx *x, const struct isc_toml_value *v, const char *key, char **out)
{
	const char *s;
	size_t len;
	char *copy;

	if (isc_toml_type(v) != ISC_TOML_STRING || isc_toml_get_string(v, &s, &len))
		return fail_at(x, v, key, "must be a string");
	if (strlen(s) != len || len > 4096)
		return fail_at(x, v, key,
		               "must be a string of at most 4096 characters without NUL");
	copy = strdup(s);
	if (!copy)
		return isc_err_set(x->err, ISC_ENOMEM, "out of memory");
	free(*out);
	*out = copy;
	return 0;
}

static int get_long(struct ctx *x, const struct isc_toml_value *v, const char *key, long lo,
                    long hi, long *out)
{
	int64_t i;
	char msg[96];
	if (isc_toml_type(v) != ISC_TOML_INTEGER || isc_toml_get_int(v, &i) || i < lo || i > hi) {
		snprintf(msg, sizeof(msg), "must be an integer from %ld to %ld", lo, hi);
		return fail_at(x, v, key, msg);
	}
	*out = (long)i;
	return 0;
}

static int get_int64(struct ctx *x, const struct isc_toml_value *v, const char *key, long lo,
                     long hi, int64_t *out)
{
	long l;
	int rc = get_long(x, v, key, lo, hi, &l);
	if (!rc)
		*out = l;
	return rc;
}

/* A driver setting as text: a string, or a boolean or integer (`allow_insecure_endpoint = true`).
 */
static int get_driver_value(struct ctx *x, const struct isc_toml_value *v, const char *key,
                            char **out)
{
	int64_t i;
	int b;
	if (isc_toml_type(v) == ISC_TOML_BOOL && !isc_toml_get_bool(v, &b))
		*out = strdup(b ? "true" : "false");
	else if (isc_toml_type(v) == ISC_TOML_INTEGER && !isc_toml_get_int(v, &i))
		return asprintf(out, "%lld", (long long)i) < 0
		           ? isc_err_set(x->err, ISC_ENOMEM, "out of memory")
		           : 0;
	else
		return get_string(x, v, key, out);
	return *out ? 0 : isc_err_set(x->err, ISC_ENOMEM, "out of memory");
}

static int is_top_key(const char *key);

/*
 * A key of [providers.NAME] must be one the driver declares (struct isc_provider's
 * setting_keys): a typo there would otherwise fall back to a default silently, and a
 * top-level key written after the first table (api_listen appended to the file) lands
 * in the last table, where nothing reads it.
 */
static int check_driver_key(struct ctx *x, const char *name, const struct isc_toml_value *v,
                            const char *key, const char *full)
{
	static const char *const own[] = {"regions", "ssh_user", "ssh_port"};
	const struct isc_provider *drv = isc_provider_find(name);
	struct isc_suggest sg;
	char msg[256];

	if (!drv || !drv->setting_keys)
		return 0; /* parse_providers names only drivers of this build */
	for (size_t i = 0; drv->setting_keys[i]; i++)
		if (strcmp(drv->setting_keys[i], key) == 0)
			return 0;
	if (is_top_key(key)) {
		snprintf(msg, sizeof(msg),
		         "a top-level key inside [providers.%s]: %s belongs before the first table "
		         "(move it above the first [section] line)",
		         name, key);
		return fail_at(x, v, full, msg);
	}
	isc_suggest_init(&sg, key, strlen(key));
	for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
		isc_suggest_consider(&sg, own[i]);
	for (size_t i = 0; drv->setting_keys[i]; i++)
		isc_suggest_consider(&sg, drv->setting_keys[i]);
	if (sg.best)
		snprintf(msg, sizeof(msg),
		         "unknown key in [providers.%s]; did you mean '%s'? (see docs/config.md)",
		         name, sg.best);
	else
		snprintf(msg, sizeof(msg), "unknown key in [providers.%s] (see docs/config.md)",
		         name);
	return fail_at(x, v, full, msg);
}

static int parse_provider(struct ctx *x, const char *name, const struct isc_toml_value *t,
                          struct isc_provider_config *p)
{
	size_t n = isc_toml_table_len(t);
	int rc;

	p->name = strdup(name);
	p->ssh_user = strdup("root");
	p->ssh_port = 22;
	if (!p->name || !p->ssh_user)
		return isc_err_set(x->err, ISC_ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		const char *key;
		size_t key_len;
		const struct isc_toml_value *v = isc_toml_table_at(t, i, &key, &key_len);
		char full[160];

		snprintf(full, sizeof(full), "providers.%s.%s", name, key);
		if (strcmp(key, "regions") == 0) {
			size_t nr = isc_toml_array_len(v);
			if (isc_toml_type(v) != ISC_TOML_ARRAY || nr == 0 || nr > 64)
				return fail_at(x, v, full,
				               "must be a list of 1 to 64 region names");
			p->regions = calloc(nr, sizeof(*p->regions));
			if (!p->regions)
				return isc_err_set(x->err, ISC_ENOMEM, "out of memory");
			for (size_t r = 0; r < nr; r++) {
				if ((rc = get_string(x, isc_toml_array_at(v, r), full,
				                     &p->regions[r])))
					return rc;
				p->n_regions++;
			}
		} else if (strcmp(key, "ssh_user") == 0) {
			if ((rc = get_string(x, v, full, &p->ssh_user)))
				return rc;
		} else if (strcmp(key, "ssh_port") == 0) {
			long port;
			if ((rc = get_long(x, v, full, 1, 65535, &port)))
				return rc;
			p->ssh_port = (int)port;
		} else if ((rc = check_driver_key(x, name, v, key, full))) {
			return rc;
		} else {
			/* Driver settings (endpoint, image_id, subnet_id, ...): the driver checks
			 * their values. */
			struct isc_config_setting *grown =
			    realloc(p->settings, (p->n_settings + 1) * sizeof(*grown));
			char *value = NULL;
			if (!grown)
				return isc_err_set(x->err, ISC_ENOMEM, "out of memory");
			p->settings = grown;
			if ((rc = get_driver_value(x, v, full, &value)))
				return rc;
			grown[p->n_settings].key = strdup(key);
			grown[p->n_settings].value = value;
			p->n_settings++;
			if (!grown[p->n_settings - 1].key)
				return isc_err_set(x->err, ISC_ENOMEM, "out of memory");
		}
	}
	if (p->n_regions == 0)
		return isc_err_set(x->err, ISC_EINVALID,
		                   "%s:%d:%d: providers.%s: 'regions' is required", x->path,
		                   isc_toml_key_line(t), isc_toml_key_col(t), name);
	return 0;
}

static int parse_providers(struct ctx *x, const struct isc_toml_value *t, struct isc_config *c)
{
	size_t n = isc_toml_table_len(t);
	if (isc_toml_type(t) != ISC_TOML_TABLE)
		return fail_at(x, t, "providers", "must be a table of [providers.NAME] sections");
	c->providers = calloc(n ? n : 1, sizeof(*c->providers));
	if (!c->providers)
		return isc_err_set(x->err, ISC_ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		const char *name;
		size_t len;
		const struct isc_toml_value *v = isc_toml_table_at(t, i, &name, &len);
		int rc;
		if (strcmp(name, "aws") && strcmp(name, "gcp") && strcmp(name, "oci"))
			return fail_at(x, v, "providers",
			               "unknown provider (known: aws, gcp, oci)");
		if (isc_toml_type(v) != ISC_TOML_TABLE)
			return fail_at(x, v, name, "must be a table");
		c->n_providers++;
		if ((rc = parse_provider(x, name, v, &c->providers[i])))
			return rc;
	}
	return 0;
}

static const char *nearest_top_key(const char *key);

static int parse_root(struct ctx *x, const struct isc_toml_value *root, struct isc_config *c)
{
	size_t n = isc_toml_table_len(root);
	int rc = 0;

	for (size_t i = 0; i < n && !rc; i++) {
		const char *key;
		size_t len;
		const struct isc_toml_value *v = isc_toml_table_at(root, i, &key, &len);
		long l;

		if (!strcmp(key, "broker_id"))
			rc = get_string(x, v, key, &c->broker_id);
		else if (!strcmp(key, "default_image"))
			rc = get_string(x, v, key, &c->default_image);
		else if (!strcmp(key, "shm_size"))
			rc = get_string(x, v, key, &c->shm_size);
		else if (!strcmp(key, "efa_plugin_version"))
			rc = get_string(x, v, key, &c->efa_plugin_version);
		else if (!strcmp(key, "artifact_root")) {
			if (!(rc = get_string(x, v, key, &c->artifact_root))) {
				struct isc_err e;
				free(c->artifact_s3_bucket);
				free(c->artifact_s3_prefix);
				c->artifact_s3_bucket = c->artifact_s3_prefix = NULL;
				if (isc_config_artifact_root_parse(c->artifact_root,
				                                   &c->artifact_s3_bucket,
				                                   &c->artifact_s3_prefix, &e))
					rc = fail_at(x, v, key, e.msg);
			}
		} else if (!strcmp(key, "artifact_endpoint_s3"))
			rc = get_string(x, v, key, &c->artifact_endpoint_s3);
		else if (!strcmp(key, "artifact_s3_region"))
			rc = get_string(x, v, key, &c->artifact_s3_region);
		else if (!strcmp(key, "artifact_profile"))
			rc = get_string(x, v, key, &c->artifact_profile);
		else if (!strcmp(key, "artifact_credentials_file"))
			rc = get_string(x, v, key, &c->artifact_credentials_file);
		else if (!strcmp(key, "artifact_s3_addressing")) {
			if (!(rc = get_string(x, v, key, &c->artifact_s3_addressing)) &&
			    strcmp(c->artifact_s3_addressing, "auto") &&
			    strcmp(c->artifact_s3_addressing, "path") &&
			    strcmp(c->artifact_s3_addressing, "virtual"))
				rc =
				    fail_at(x, v, key, "must be \"auto\", \"path\" or \"virtual\"");
		} else if (!strcmp(key, "artifact_allow_insecure_endpoint")) {
			if (isc_toml_type(v) != ISC_TOML_BOOL ||
			    isc_toml_get_bool(v, &c->artifact_allow_insecure_endpoint))
				rc = fail_at(x, v, key, "must be true or false");
		} else if (!strcmp(key, "artifact_url_ttl_s")) {
			/* Minutes, not days: a URL a node holds is a bearer credential for one
			 * upload or object (docs/security.md, "Artifacts in object storage"). */
			rc = get_long(x, v, key, 60, 3600, &c->artifact_url_ttl_s);
		} else if (!strcmp(key, "store_url")) {
			struct isc_err why;
			rc = get_string(x, v, key, &c->store_url);
			if (!rc && isc_store_url_check(c->store_url, &why))
				rc = fail_at(x, v, key, why.msg);
		} else if (!strcmp(key, "api_socket"))
			rc = get_string(x, v, key, &c->api_socket);
		else if (!strcmp(key, "api_listen"))
			rc = get_string(x, v, key, &c->api_listen);
		else if (!strcmp(key, "metrics_listen")) {
			rc = get_string(x, v, key, &c->metrics_listen);
			if (!rc && !listen_ok(c->metrics_listen))
				rc = fail_at(x, v, key,
				             "not an IPv4 address and a port (HOST:PORT, e.g. "
				             "127.0.0.1:9464), nor \"\"");
		} else if (!strcmp(key, "api_max_connections"))
			rc = get_long(x, v, key, 1, 100000, &c->api_max_connections);
		else if (!strcmp(key, "api_max_connections_per_ip"))
			rc = get_long(x, v, key, 1, 100000, &c->api_max_connections_per_ip);
		else if (!strcmp(key, "api_timeout_s"))
			rc = get_long(x, v, key, 1, 3600, &c->api_timeout_s);
		else if (!strcmp(key, "api_header_timeout_s"))
			rc = get_long(x, v, key, 1, 3600, &c->api_header_timeout_s);
		else if (!strcmp(key, "api_threads"))
			rc = get_long(x, v, key, 1, 256, &c->api_threads);
		else if (!strcmp(key, "api_slow_threads"))
			rc = get_long(x, v, key, 1, 64, &c->api_slow_threads);
		else if (!strcmp(key, "api_slow_queue"))
			rc = get_long(x, v, key, 1, 10000, &c->api_slow_queue);
		else if (!strcmp(key, "tick_interval_ms"))
			rc = get_long(x, v, key, 10, 3600000, &c->tick_interval_ms);
		else if (!strcmp(key, "retry_wait_ms"))
			rc = get_long(x, v, key, 0, 86400000, &c->retry_wait_ms);
		else if (!strcmp(key, "boot_deadline_ms"))
			rc = get_long(x, v, key, 1000, 86400000, &c->boot_deadline_ms);
		else if (!strcmp(key, "replace_deadline_ms"))
			rc = get_long(x, v, key, 0, 86400000, &c->replace_deadline_ms);
		else if (!strcmp(key, "boot_deadline_vm_ms"))
			rc = get_long(x, v, key, 1000, 86400000, &c->boot_deadline_vm_ms);
		else if (!strcmp(key, "boot_deadline_gpu_ms"))
			rc = get_long(x, v, key, 1000, 86400000, &c->boot_deadline_gpu_ms);
		else if (!strcmp(key, "boot_deadline_metal_ms"))
			rc = get_long(x, v, key, 1000, 86400000, &c->boot_deadline_metal_ms);
		else if (!strcmp(key, "command_timeout_ms"))
			rc = get_long(x, v, key, 1000, 86400000, &c->command_timeout_ms);
		else if (!strcmp(key, "image_pull_stall_ms"))
			rc = get_long(x, v, key, 1000, 3600000, &c->image_pull_stall_ms);
		else if (!strcmp(key, "image_pull_max_ms"))
			rc = get_long(x, v, key, 10000, 86400000, &c->image_pull_max_ms);
		else if (!strcmp(key, "checkpoint_sync_ms"))
			rc = get_long(x, v, key, 1000, 86400000, &c->checkpoint_sync_ms);
		else if (!strcmp(key, "lossy_sync_ms"))
			rc = get_long(x, v, key, 1000, 86400000, &c->lossy_sync_ms);
		else if (!strcmp(key, "node_absence_confirm_ms"))
			rc = get_long(x, v, key, 0, 3600000, &c->node_absence_confirm_ms);
		else if (!strcmp(key, "describe_wait_ms"))
			rc = get_long(x, v, key, 1000, 3600000, &c->describe_wait_ms);
		else if (!strcmp(key, "price_refresh_ms"))
			rc = get_long(x, v, key, 0, 7 * 86400000L, &c->price_refresh_ms);
		else if (!strcmp(key, "price_refresh_gcp_ms"))
			rc = get_long(x, v, key, 0, 7 * 86400000L, &c->price_refresh_gcp_ms);
		else if (!strcmp(key, "price_refresh_oci_ms"))
			rc = get_long(x, v, key, 0, 7 * 86400000L, &c->price_refresh_oci_ms);
		else if (!strcmp(key, "price_refresh_aws_ondemand_ms"))
			rc = get_long(x, v, key, 0, 7 * 86400000L,
			              &c->price_refresh_aws_ondemand_ms);
		else if (!strcmp(key, "rank_log_max_bytes"))
			rc = get_int64(x, v, key, 4096, 1LL << 50, &c->rank_log_max_bytes);
		else if (!strcmp(key, "experiment_log_max_bytes"))
			rc = get_int64(x, v, key, 4096, 1LL << 50, &c->experiment_log_max_bytes);
		else if (!strcmp(key, "artifact_max_bytes"))
			rc = get_int64(x, v, key, 1LL << 20, 1LL << 52, &c->artifact_max_bytes);
		else if (!strcmp(key, "artifact_max_entries"))
			rc = get_int64(x, v, key, 10, 1000000000, &c->artifact_max_entries);
		else if (!strcmp(key, "disk_reserve_bytes"))
			rc = get_int64(x, v, key, 0, 1LL << 50, &c->disk_reserve_bytes);
		else if (!strcmp(key, "transfer_deadline_ms"))
			rc = get_int64(x, v, key, 1000, 7 * 86400000LL, &c->transfer_deadline_ms);
		else if (!strcmp(key, "transfer_min_bytes_per_s"))
			rc = get_int64(x, v, key, 1, 1LL << 40, &c->transfer_min_bytes_per_s);
		else if (!strcmp(key, "transfer_window_ms"))
			rc = get_int64(x, v, key, 1000, 3600000, &c->transfer_window_ms);
		else if (!strcmp(key, "org_artifact_quota_bytes"))
			rc = get_int64(x, v, key, 1LL << 20, 1LL << 52,
			               &c->org_artifact_quota_bytes);
		else if (!strcmp(key, "cycle_ms"))
			rc = get_long(x, v, key, 1000, 86400000, &c->cycle_ms);
		else if (!strcmp(key, "period_ms"))
			rc = get_long(x, v, key, 1000, 7 * 86400000L, &c->period_ms);
		else if (!strcmp(key, "node_down_after_ms"))
			rc = get_long(x, v, key, 1000, 86400000, &c->node_down_after_ms);
		else if (!strcmp(key, "node_probe_ms"))
			rc = get_long(x, v, key, 1000, 86400000, &c->node_probe_ms);
		else if (!strcmp(key, "burst_validation")) {
			if (isc_toml_type(v) != ISC_TOML_BOOL ||
			    isc_toml_get_bool(v, &c->burst_validation))
				rc = fail_at(x, v, key, "must be true or false");
		} else if (!strcmp(key, "stop_grace_s")) {
			if (!(rc = get_long(x, v, key, 0, 3600, &l)))
				c->stop_grace_s = (int)l;
		} else if (!strcmp(key, "master_port")) {
			if (!(rc = get_long(x, v, key, 1, 65535, &l)))
				c->master_port = (int)l;
		} else if (!strcmp(key, "reconcile_every_ticks")) {
			if (!(rc = get_long(x, v, key, 1, 100000, &l)))
				c->reconcile_every_ticks = (int)l;
		} else if (!strcmp(key, "broker_workers")) {
			rc = get_long(x, v, key, 1, 1024, &c->broker_workers);
		} else if (!strcmp(key, "lease_ms")) {
			int64_t ms;
			/* Below 3 s a replica stalled by a slow store loses bursts it still steps
			 * (run twice); above 60 s a dead replica's bursts go unwatched too long. */
			if (isc_toml_type(v) != ISC_TOML_INTEGER || isc_toml_get_int(v, &ms) ||
			    ms < 3000 || ms > 60000)
				rc = fail_at(
				    x, v, key,
				    "must be from 3000 to 60000 ms: how long a burst stays with "
				    "a replica that stopped renewing its lease (docs/ha.md)");
			else
				c->lease_ms = (long)ms;
		} else if (!strcmp(key, "reservation_window_ms")) {
			if (!(rc = get_long(x, v, key, 60000, 7 * 86400000L, &l)))
				c->reservation_window_ms = l;
		} else if (!strcmp(key, "charge_interval_ms")) {
			rc = get_long(x, v, key, 1000, 3600000, &c->charge_interval_ms);
		} else if (!strcmp(key, "hold_renew_below")) {
			/* A fraction of the window, kept in millionths: the hold's threshold is
			 * then window x ppm / 10^6 in integers, never a float near money. */
			double f = 0;
			if ((isc_toml_type(v) != ISC_TOML_FLOAT &&
			     isc_toml_type(v) != ISC_TOML_INTEGER) ||
			    isc_toml_get_double(v, &f) || !(f >= 0.01 && f <= 1.0))
				rc = fail_at(
				    x, v, key,
				    "must be a number from 0.01 to 1: the part of one "
				    "reservation window below which a hold is re-authorised");
			else
				c->hold_renew_below_ppm = (int64_t)(f * 1000000.0 + 0.5);
		} else if (!strcmp(key, "providers"))
			rc = parse_providers(x, v, c);
		else {
			const char *near = nearest_top_key(key);
			char msg[160];
			if (near)
				snprintf(msg, sizeof(msg),
				         "unknown top-level key; did you mean '%.*s'? (see "
				         "docs/config.md)",
				         (int)strcspn(near, " "), near);
			else
				snprintf(msg, sizeof(msg),
				         "unknown top-level key (see docs/config.md)");
			rc = fail_at(x, v, key, msg);
		}
	}
	return rc;
}

int isc_config_load(const char *home, struct isc_config **out, struct isc_err *err)
{
	struct isc_config *c = config_defaults();
	struct isc_toml_doc *doc = NULL;
	struct ctx x;
	char *path = NULL, *text = NULL;
	size_t len = 0;
	FILE *f;
	int rc = 0;

	if (!c || asprintf(&path, "%s/config.toml", home) < 0) {
		isc_config_free(c);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	f = fopen(path, "rb");
	if (!f) {
		free(path);
		if (errno == ENOENT) {
			*out = c;
			return 0;
		}
		isc_config_free(c);
		return isc_err_set(err, ISC_EIO, "cannot read %s/config.toml: %s", home,
		                   strerror(errno));
	}
	text = malloc(CONFIG_MAX_BYTES + 1);
	if (text)
		len = fread(text, 1, CONFIG_MAX_BYTES + 1, f);
	fclose(f);
	if (!text)
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
	else if (len > CONFIG_MAX_BYTES)
		rc = isc_err_set(err, ISC_EINVALID, "%s: larger than %d bytes", path,
		                 CONFIG_MAX_BYTES);
	else if (isc_toml_parse(text, len, &doc, err))
		rc = isc_err_wrap(err, "%s", path);
	if (!rc) {
		x.path = path;
		x.err = err;
		rc = parse_root(&x, isc_toml_doc_root(doc), c);
	}
	if (!rc) {
		free(c->path);
		c->path = strdup(path);
		rc = isc_config_check_tick(c, c->tick_interval_ms, err);
	}
	isc_toml_doc_free(doc);
	free(text);
	if (rc) {
		free(path);
		isc_config_free(c);
		return rc;
	}
	free(c->path);
	c->path = path;
	*out = c;
	return 0;
}

int64_t isc_config_hold_renew_below_ms(const struct isc_config *c)
{
	return (int64_t)((__int128)c->reservation_window_ms * c->hold_renew_below_ppm / 1000000);
}

int isc_config_check_tick(const struct isc_config *c, long tick_interval_ms, struct isc_err *err)
{
	if (tick_interval_ms <= c->reservation_window_ms) {
		int64_t below = isc_config_hold_renew_below_ms(c);
		/* What a hold must cover between two renewals: a node's unbilled time, at most
		 * one charge interval and a tick (docs/credits.md, "Overspend bound"). The tick's
		 * part is bounded as before (a tick no longer than the window: API-only daemons
		 * of the suites tick once a minute); a threshold that cannot cover even one
		 * charge interval is a mistake of the config, refused. */
		if (below > (int64_t)c->charge_interval_ms)
			return 0;
		return isc_err_set(
		    err, ISC_EINVALID,
		    "%s: a hold is renewed below %lld ms of the %lld ms window (hold_renew_below), "
		    "which must exceed charge_interval_ms (%ld): the hold must cover a node's "
		    "unbilled time, or the overspend bound of docs/credits.md breaks; raise "
		    "reservation_window_ms or hold_renew_below, or lower charge_interval_ms",
		    c->path && c->path[0] ? c->path : "config.toml", (long long)below,
		    (long long)c->reservation_window_ms, c->charge_interval_ms);
	}
	return isc_err_set(err, ISC_EINVALID,
	                   "%s: reservation_window_ms (%lld) is shorter than the tick (%ld ms): "
	                   "each renewal must cover at least one tick, or the overspend bound of "
	                   "docs/credits.md breaks; raise reservation_window_ms or lower "
	                   "tick_interval_ms",
	                   c->path && c->path[0] ? c->path : "config.toml",
	                   (long long)c->reservation_window_ms, tick_interval_ms);
}

/*
 * The template isc init writes: every key of docs/config.md, commented out with its
 * default and what it means, so the file a user edits is its own reference.
 * tests/integration/firsthour.sh compares these keys with docs/config.md's tables.
 */
struct template_key {
	const char *line; /* "key = default" as TOML */
	const char *meaning;
};

static const struct template_key top_keys[] = {
    {"tick_interval_ms = 2000", "a tick of iscd starts this often (10..3600000)"},
    {"default_image = \"pytorch/pytorch:latest\"",
     "container image when the launch file has no image"},
    {"retry_wait_ms = 30000",
     "a waiting experiment (no capacity, no credits) is placed again after this"},
    {"stop_grace_s = 30", "docker stop grace period, so a training script can checkpoint"},
    {"boot_deadline_ms = 300000", "how long nodes may take to run and accept SSH"},
    {"replace_deadline_ms = 180000",
     "lost nodes of a gang are replaced alone within this, else the whole gang (0: always)"},
    {"boot_deadline_vm_ms = 60000",
     "a CPU VM of a gang whose other nodes run is replaced alone after this (a straggler)"},
    {"boot_deadline_gpu_ms = 240000", "the same for a GPU VM"},
    {"boot_deadline_metal_ms = 1200000", "the same for bare metal"},
    {"command_timeout_ms = 600000", "one remote command (the boot script, a check)"},
    {"image_pull_stall_ms = 120000",
     "the image's docker pull stops when it printed nothing for this long (1000..3600000)"},
    {"image_pull_max_ms = 3600000", "... and after this in all (10000..86400000)"},
    {"master_port = 29500", "MASTER_PORT of the containers"},
    {"shm_size = \"\"", "--shm-size of the containers (\"\": half the node's RAM)"},
    {"efa_plugin_version = \"\"",
     "the image's aws-ofi-nccl, for its EFA variables (\"\": 1.7 or later, none)"},
    {"reservation_window_ms = 3600000",
     "credits reserved ahead for a running cluster; at least one tick"},
    {"charge_interval_ms = 60000",
     "a running node is charged at most this often, and once more when it ends (1000..3600000)"},
    {"hold_renew_below = 0.5",
     "a hold is topped up to one window only when it falls below this part of it (0.01..1)"},
    {"reconcile_every_ticks = 30", "full reconciliation of every configured region, in ticks"},
    {"artifact_root = \"\"",
     "where checkpoints, crud and lossy are kept: \"\" (the Output Path), an absolute folder, "
     "or s3://BUCKET/PREFIX (docs/artifacts.md)"},
    {"artifact_endpoint_s3 = \"\"",
     "the bucket's S3 API (\"\": AWS_ENDPOINT_URL_S3, else https://s3.REGION.amazonaws.com)"},
    {"artifact_s3_region = \"\"", "the bucket's signing region (\"\": AWS_REGION, else us-east-1)"},
    {"artifact_s3_addressing = \"auto\"", "auto, path or virtual-hosted bucket addressing"},
    {"artifact_profile = \"\"", "the bucket's credentials: a profile of the shared file"},
    {"artifact_credentials_file = \"\"",
     "default: AWS_SHARED_CREDENTIALS_FILE, ~/.aws/credentials"},
    {"artifact_allow_insecure_endpoint = false", "true: plain http:// to a non-loopback endpoint"},
    {"artifact_url_ttl_s = 900", "a presigned URL handed to a node lives this long (60..3600)"},
    {"store_url = \"sqlite:\"",
     "the store: sqlite: ($ISC_HOME/isc.db) or a postgresql:// URL (docs/ha.md)"},
    {"broker_workers = 32", "bursts stepped at once, each with its own store connection"},
    {"lease_ms = 8000",
     "replicas on one store: a burst is another's this long after its replica stops (3000..60000)"},
    {"checkpoint_sync_ms = 600000", "how often checkpoints and crud are brought home from rank 0"},
    {"lossy_sync_ms = 30000", "how often the lossy folder is brought home"},
    {"price_refresh_ms = 3600000", "how often iscd reads live spot prices (0: never)"},
    {"price_refresh_gcp_ms = 21600000",
     "how often iscd reads GCP prices from the Cloud Billing Catalog (0: never)"},
    {"price_refresh_oci_ms = 21600000", "how often iscd reads OCI's public price list (0: never)"},
    {"price_refresh_aws_ondemand_ms = 21600000",
     "how often iscd reads AWS on-demand prices from the Price List API (0: never)"},
    {"rank_log_max_bytes = 268435456", "each rank_N.txt keeps this much output, then a marker"},
    {"experiment_log_max_bytes = 1073741824",
     "the store keeps this much of an experiment's rank logs (all ranks), then a marker"},
    {"artifact_max_bytes = 274877906944", "one artifact pull from rank 0: files' sizes together"},
    {"artifact_max_entries = 200000", "one artifact pull: archive members"},
    {"disk_reserve_bytes = 1073741824", "kept free on $ISC_HOME's disk for the ledger"},
    {"transfer_deadline_ms = 7200000",
     "one transfer to or from a node (artifact pull, restore, dataset copy) at most this long"},
    {"transfer_min_bytes_per_s = 65536",
     "a node transfer slower than this over a transfer_window_ms window is stopped"},
    {"transfer_window_ms = 60000", "the window over which transfer_min_bytes_per_s is judged"},
    {"org_artifact_quota_bytes = 1099511627776",
     "artifacts kept at home per organisation, all its experiments together"},
    {"node_absence_confirm_ms = 30000",
     "a node missing from the cloud's describes counts as terminated after this"},
    {"describe_wait_ms = 60000",
     "iscd's start (and --once) and a takeover wait this long for fresh describes (1000..3600000)"},
    {"cycle_ms = 90000", "on-prem: the length of one cycle run (1000..86400000)"},
    {"period_ms = 7200000", "on-prem: the interruptible apportioning period"},
    {"node_down_after_ms = 30000",
     "on-prem: a pool node holding a run, silent this long, is unreachable"},
    {"node_probe_ms = 10000", "on-prem: how often iscd logs in to every pool node"},
    {"burst_validation = false", "a burst first runs one cycle on the on-prem pool"},
    {"api_socket = \"\"",
     "iscd's API socket (\"\": $ISC_HOME/run/api.sock; docs/api.md); clients use ISC_SOCKET"},
    {"api_listen = \"\"", "HOST:PORT for the API over TCP with bearer tokens (\"\": none)"},
    {"metrics_listen = \"\"",
     "HOST:PORT serving GET /metrics to Prometheus without a token, e.g. \"127.0.0.1:9464\" "
     "(\"\": none; docs/metrics.md)"},
    {"api_max_connections = 512",
     "concurrent API connections, each listener (socket, TCP) its own; when full, the "
     "oldest one still waiting for its headers makes room"},
    {"api_max_connections_per_ip = 32", "TCP API connections from one IP address at once"},
    {"api_timeout_s = 30", "an API connection idle or slow this long is closed"},
    {"api_header_timeout_s = 10",
     "an API connection without a whole request's headers from a known caller this long, "
     "after it opened or its last request ended, is closed however it trickles"},
    {"api_threads = 2",
     "API server threads per listener (default: one per online CPU, at least 2)"},
    {"api_slow_threads = 4",
     "API threads for calls that wait on a cloud, S3 or SSH (docs/api.md, \"Slow calls\")"},
    {"api_slow_queue = 64", "slow API calls that may wait for one of those; more: 503"},
};

struct template_section {
	const char *name;
	const char *about;
	struct template_key keys[32];
};

static const struct template_section provider_sections[] = {
    {"aws",
     "credentials: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or ~/.aws/credentials (isc check aws)",
     {{"regions = [\"us-east-1\"]", "required: the regions bursts may use"},
      {"image_id = \"ami-...\"", "the nodes' AMI (Docker and the NVIDIA driver)"},
      {"subnet_id = \"subnet-...\"", "default: the default VPC's"},
      {"security_group_id = \"sg-...\"", "must allow all TCP between the nodes"},
      {"cluster_placement = \"auto\"", "auto: a cluster placement group per gang; never"},
      {"efa = \"auto\"", "auto: EFA interfaces on EFA types for gangs; never"},
      {"tenant_isolation = \"auto\"", "auto: a security group per organisation; never"},
      {"tenant_ssh_cidr = \"0.0.0.0/0\"",
       "who reaches an organisation's nodes on SSH (the broker)"},
      {"tenant_ssh_port = 22", "the port the broker's SSH uses (ssh_port)"},
      {"disk_size_gb = 200", "root volume size, gp3 (1..16384)"},
      {"root_device_name = \"\"", "default: the AMI's (DescribeImages)"},
      {"associate_public_ip = \"true\"", "a public IP per node"},
      {"endpoint = \"\"", "one endpoint for EC2 and STS (a mock cloud)"},
      {"endpoint_ec2 = \"\"", "default: https://ec2.REGION.amazonaws.com"},
      {"endpoint_sts = \"\"", "default: https://sts.REGION.amazonaws.com"},
      {"endpoint_pricing = \"\"", "default: https://api.pricing.us-east-1.amazonaws.com"},
      {"live_prices = false", "true: on-demand prices from the Price List API"},
      {"spot_advisor_url = \"\"",
       "default: AWS's spot-advisor-data.json (ENDPOINT/spot-advisor-data.json with endpoint)"},
      {"profile = \"\"", "a profile of the shared credentials file"},
      {"credentials_file = \"\"", "default: AWS_SHARED_CREDENTIALS_FILE, ~/.aws/credentials"},
      {"product_description = \"Linux/UNIX\"", "the spot price series read"},
      {"describe_max_pages = 100", "pages of 1000 a listing may take"},
      {"allow_insecure_endpoint = false", "true: plain http:// to a non-loopback endpoint"},
      {"endpoint_s3 = \"\"", "datasets: default https://s3.REGION.amazonaws.com"},
      {"s3_region = \"\"", "datasets: the buckets' region (default: the first of regions)"},
      {"s3_addressing = \"auto\"", "datasets: auto, path or virtual"},
      {"s3_parallelism = 8", "datasets: ranged GETs at once per object (1..64)"},
      {"ssh_user = \"root\"", "the image's login user"},
      {"ssh_port = 22", NULL}}},
    {"gcp",
     "credentials: a service-account key file (GOOGLE_APPLICATION_CREDENTIALS; isc check gcp)",
     {{"regions = [\"us-central1\"]", "required: the regions bursts may use"},
      {"credentials_file = \"\"", "default: GOOGLE_APPLICATION_CREDENTIALS"},
      {"project = \"\"", "default: the key's project_id"},
      {"endpoint_compute = \"\"", "default: https://compute.googleapis.com/compute/v1/"},
      {"source_image = \"projects/ubuntu-os-cloud/global/images/family/ubuntu-2204-lts\"",
       "boot image with cloud-init (Docker and the NVIDIA driver)"},
      {"network = \"global/networks/default\"", NULL},
      {"subnetwork = \"\"", NULL},
      {"external_ip = \"true\"", "an ephemeral external IP per node"},
      {"disk_size_gb = 200", "boot disk size (10..65536)"},
      {"compact_placement = \"auto\"", "auto: a compact placement policy per gang; never"},
      {"tenant_isolation = \"auto\"",
       "auto: a network tag and firewall rule per organisation; never"},
      {"ssh_key_user = \"root\"", "keep it equal to ssh_user"},
      {"operation_timeout_s = 900", "how long a bulkInsert may take (1..86400)"},
      {"describe_max_pages = 100", "pages of 500 a listing may take"},
      {"live_prices = false", "true: prices from the Cloud Billing Catalog (an API key)"},
      {"billing_api_key_file = \"\"", "default: ISC_GCP_BILLING_API_KEY"},
      {"billing_endpoint = \"\"", "default: https://cloudbilling.googleapis.com/v1/"},
      {"allow_insecure_endpoint = false", "true: plain http:// to a non-loopback endpoint"},
      {"ssh_user = \"root\"", NULL},
      {"ssh_port = 22", NULL}}},
    {"oci",
     "credentials: the OCI CLI's ~/.oci/config and OCI_CLI_* (isc check oci)",
     {{"regions = [\"us-ashburn-1\"]", "required: the regions bursts may use"},
      {"compartment_id = \"\"", "default: the tenancy (root compartment)"},
      {"subnet_id = \"ocid1.subnet...\"", "required to launch; all TCP inside its CIDR"},
      {"image_id = \"ocid1.image...\"", "required to launch"},
      {"manage_security_list = false", "true: add the missing training rule"},
      {"tenant_isolation = \"auto\"", "auto: a network security group per organisation; never"},
      {"tenant_ssh_cidr = \"0.0.0.0/0\"",
       "who reaches an organisation's nodes on SSH (the broker)"},
      {"tenant_ssh_port = 22", "the port the broker's SSH uses (ssh_port)"},
      {"assign_public_ip = false", "a public IP per node"},
      {"compute_clusters = \"auto\"", "auto: a compute cluster per gang and AD (RDMA); never"},
      {"disk_size_gb = 200", "boot volume size (50..32768)"},
      {"launch_parallelism = 8", "LaunchInstance calls in flight per AD (1..64)"},
      {"endpoint_core = \"\"", "default: https://iaas.{region}.oraclecloud.com"},
      {"endpoint_identity = \"\"", "default: https://identity.{region}.oraclecloud.com"},
      {"endpoint = \"\"", "both endpoints at once (a mock cloud)"},
      {"profile = \"DEFAULT\"", "default: OCI_CLI_PROFILE"},
      {"config_file = \"~/.oci/config\"", "default: OCI_CLI_CONFIG_FILE"},
      {"allow_insecure_endpoint = false", "true: plain http:// to a non-loopback endpoint"},
      {"live_prices = false", "true: prices from OCI's public price list"},
      {"price_list_endpoint = \"\"",
       "default: https://apexapps.oracle.com/pls/apex/cetools/api/v1/products/"},
      {"ssh_user = \"root\"", NULL},
      {"ssh_port = 22", NULL}}},
};

/* Whether key is one of the top-level keys of docs/config.md. */
static int is_top_key(const char *key)
{
	size_t len = strlen(key);
	if (!strcmp(key, "broker_id"))
		return 1;
	for (size_t i = 0; i < sizeof(top_keys) / sizeof(top_keys[0]); i++)
		if (strncmp(top_keys[i].line, key, len) == 0 && top_keys[i].line[len] == ' ')
			return 1;
	return 0;
}

/* The known top-level key nearest to key (up to its first space), or NULL. */
static const char *nearest_top_key(const char *key)
{
	static const char *const extra[] = {"broker_id", "providers"};
	const char *best = NULL;
	struct isc_suggest sg;
	char name[64];

	isc_suggest_init(&sg, key, strlen(key));
	for (size_t i = 0; i < sizeof(extra) / sizeof(extra[0]); i++) {
		isc_suggest_consider(&sg, extra[i]);
		if (sg.best == extra[i])
			best = extra[i];
	}
	for (size_t i = 0; i < sizeof(top_keys) / sizeof(top_keys[0]); i++) {
		snprintf(name, sizeof(name), "%.*s", (int)strcspn(top_keys[i].line, " "),
		         top_keys[i].line);
		isc_suggest_consider(&sg, name);
		if (sg.best == name) {
			best = top_keys[i].line;
			sg.best = best; /* name is reused on the next turn */
		}
	}
	return best;
}

static void write_template(FILE *f, const unsigned char raw[6])
{
	fprintf(f,
	        "# isc-broker configuration: every key, commented out with its default, as in\n"
	        "# docs/config.md. Uncomment a key to change it. A key with the wrong type or out\n"
	        "# of range, and any unknown key, is an error naming this file, the line, the\n"
	        "# table and the key.\n\n"
	        "# Tags every instance this broker creates; reconciliation finds them by it.\n"
	        "broker_id = \"isc-%02x%02x%02x%02x%02x%02x\"\n",
	        raw[0], raw[1], raw[2], raw[3], raw[4], raw[5]);
	for (size_t i = 0; i < sizeof(top_keys) / sizeof(top_keys[0]); i++)
		fprintf(f, "\n# %s\n# %s\n", top_keys[i].meaning, top_keys[i].line);
	fprintf(f,
	        "\n# One [providers.NAME] section per cloud bursts may use: a shape of a provider\n"
	        "# or region not named here cannot be placed by this broker (isc shapes says\n"
	        "# why). Uncomment a section and at least its regions.\n");
	for (size_t i = 0; i < sizeof(provider_sections) / sizeof(provider_sections[0]); i++) {
		const struct template_section *sec = &provider_sections[i];
		fprintf(f, "\n# [providers.%s]\n# (%s)\n", sec->name, sec->about);
		for (size_t k = 0;
		     k < sizeof(sec->keys) / sizeof(sec->keys[0]) && sec->keys[k].line; k++) {
			if (sec->keys[k].meaning)
				fprintf(f, "# %-40s # %s\n", sec->keys[k].line,
				        sec->keys[k].meaning);
			else
				fprintf(f, "# %s\n", sec->keys[k].line);
		}
	}
}

int isc_config_write_default(const char *home, struct isc_err *err)
{
	unsigned char raw[6];
	char *path = NULL, *tmp = NULL;
	FILE *f = NULL;
	int fd, rc = 0;

	if (asprintf(&path, "%s/config.toml", home) < 0 ||
	    asprintf(&tmp, "%s/.config.toml.%ld", home, (long)getpid()) < 0) {
		free(path);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	if (access(path, F_OK) == 0)
		goto out;
	/*
	 * Written aside, then linked into place: link() fails when config.toml is
	 * there, so of several inits at once one file wins whole, and no reader
	 * (another init opening the store) ever sees half a file.
	 */
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || !(f = fdopen(fd, "w"))) {
		rc = isc_err_set(err, ISC_EIO, "cannot create %s: %s", tmp, strerror(errno));
		if (fd >= 0)
			close(fd);
		goto out;
	}
	if (RAND_bytes(raw, sizeof(raw)) != 1)
		memset(raw, 0, sizeof(raw));
	write_template(f, raw);
	if (fflush(f) != 0 || fsync(fileno(f)) != 0) {
		rc = isc_err_set(err, ISC_EIO, "cannot write %s: %s", tmp, strerror(errno));
		fclose(f);
		goto out;
	}
	if (fclose(f) != 0) {
		rc = isc_err_set(err, ISC_EIO, "cannot write %s: %s", tmp, strerror(errno));
		goto out;
	}
	if (link(tmp, path) != 0 && errno != EEXIST)
		rc = isc_err_set(err, ISC_EIO, "cannot create %s: %s", path, strerror(errno));
out:
	if (tmp)
		unlink(tmp);
	free(path);
	free(tmp);
	return rc;
}
