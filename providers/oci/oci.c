/*
 * The OCI driver: the isc_provider table for OCI Core (compute, VNICs,
 * subnets, security lists) and Identity (users, availability domains), API
 * 20160918. Every call is JSON over HTTPS signed with the API key
 * (oci_sign.c) and sent through the shared HTTP layer, whose retry loop asks
 * oci_classify() what a reply means.
 *
 * OCI has no gang launch: a gang is one LaunchInstance per node, each with an
 * opc-retry-token derived from the broker's token, the availability domain
 * and the node's index, so a retry or a crash replay returns the same
 * instance instead of a new one. If a node cannot be had in an AD, the nodes
 * that did come up are terminated before the next AD is tried.
 *
 * Sessions live for one broker call, so what must outlive them (the private
 * IPs of instances, which never change, and the instances this process
 * terminated itself) is kept in a small process-wide table.
 */
#include "common/log.h"
#include "providers/busy.h"
#include "providers/oci/oci_config.h"
#include "providers/oci/oci_int.h"
#include "providers/oci/oci_sign.h"
#include "providers/provider.h"
#include "providers/sweep.h"

#include <jansson.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define API          "/20160918"
#define PAGE_LIMIT   "100"
#define MAX_PAGES    1000 /* a runaway opc-next-page loop ends here */
#define MAX_NODES    1000
#define CACHE_SLOTS  4096
#define CONTENT_JSON "application/json"

enum oci_service { SVC_CORE, SVC_IDENTITY };

struct oci_session {
	struct isc_oci_config cfg;
	char *url[2];    /* per enum oci_service: scheme://host[:port][/prefix], no trailing / */
	char *host[2];   /* authority of url[], for the signed host header */
	char *prefix[2]; /* path part of url[] ("" or "/prefix"), signed in (request-target) */
	char *compartment_id;
	char *subnet_id;
	char *image_id;
	int compute_clusters; /* compute_clusters=auto: one per (gang, AD) for RDMA shapes */
	long disk_size_gb;    /* boot volume size: OCI takes 50..32768 GB; its default is ~47 */
	int manage_security_list;
	int assign_public_ip;
	int tenant_isolation;  /* tenant_isolation=auto: a network security group per tenant */
	char *tenant_ssh_cidr; /* who reaches a tenant's nodes on SSH (the broker) */
	long tenant_ssh_port;
	char tenant_nsg[256];        /* during a launch: the tenant's NSG, "" without one */
	unsigned launch_parallelism; /* LaunchInstance calls in flight per AD, 1..64 */
	const struct isc_clock *clock;
	struct isc_http_client http;
};

/* What oci_classify learns from a reply, for the caller's decisions. */
struct call_ctx {
	const char *action;
	char code[128];
	char message[400];
	struct isc_http_client *http; /* NULL: the session's (one thread at a time) */
};

static struct oci_session *impl(struct isc_provider_session *s)
{
	return s->impl;
}

/* ---- what outlives a session ---- */

struct cache_entry {
	char id[256];
	char private_ip[46];
	char public_ip[46];
	int terminated_by_us;    /* our TerminateInstance: not a preemption */
	int64_t preempt_seen_ms; /* when we first saw a preemptible node go */
	uint64_t used;
};

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cache_entry cache[CACHE_SLOTS];
static uint64_t cache_clock;

/* The entry of id (created when `create`), with cache_lock held; NULL if absent. */
static struct cache_entry *cache_get(const char *id, int create)
{
	struct cache_entry *free_slot = NULL, *oldest = NULL;
	for (size_t i = 0; i < CACHE_SLOTS; i++) {
		struct cache_entry *e = &cache[i];
		if (e->id[0] && strcmp(e->id, id) == 0) {
			e->used = ++cache_clock;
			return e;
		}
		if (!e->id[0] && !free_slot)
			free_slot = e;
		if (e->id[0] && (!oldest || e->used < oldest->used))
			oldest = e;
	}
	if (!create)
		return NULL;
	if (!free_slot)
		free_slot = oldest; /* forgetting an IP costs two calls later, nothing else */
	memset(free_slot, 0, sizeof(*free_slot));
	snprintf(free_slot->id, sizeof(free_slot->id), "%s", id);
	free_slot->used = ++cache_clock;
	return free_slot;
}

/* Subnets whose training rule was found (or added) by this process. */
static pthread_mutex_t subnet_lock = PTHREAD_MUTEX_INITIALIZER;
static char subnets_ok[64][256];
static size_t n_subnets_ok;

static int subnet_known(const char *id)
{
	int found = 0;
	pthread_mutex_lock(&subnet_lock);
	for (size_t i = 0; i < n_subnets_ok && !found; i++)
		found = strcmp(subnets_ok[i], id) == 0;
	pthread_mutex_unlock(&subnet_lock);
	return found;
}

static void subnet_remember(const char *id)
{
	pthread_mutex_lock(&subnet_lock);
	snprintf(subnets_ok[n_subnets_ok % 64], sizeof(subnets_ok[0]), "%s", id);
	if (n_subnets_ok < 64)
		n_subnets_ok++;
	pthread_mutex_unlock(&subnet_lock);
}

/* ---- one signed call ---- */

static int oci_classify(void *vctx, const struct isc_http_response *resp, struct isc_err *err)
{
	struct call_ctx *cc = vctx;
	struct isc_oci_error e;
	char rid[96] = "";
	int code;

	cc->code[0] = cc->message[0] = '\0';
	if (resp->status >= 200 && resp->status < 300)
		return 0;
	isc_oci_header(resp->headers.data, "opc-request-id", rid, sizeof(rid));
	if (isc_oci_parse_error(resp->body.data, resp->body.len, &e) == 0) {
		snprintf(cc->code, sizeof(cc->code), "%s", e.code);
		snprintf(cc->message, sizeof(cc->message), "%s", e.message);
		code = isc_oci_classify(resp->status, e.code, e.message);
		return isc_err_set(err, code, "%s: %s: %s (HTTP %ld%s%s)", cc->action, e.code,
		                   e.message, resp->status, rid[0] ? ", opc-request-id " : "", rid);
	}
	code = isc_oci_classify(resp->status, NULL, NULL);
	return isc_err_set(err, code, "%s: HTTP %ld without an OCI error body%s%s", cc->action,
	                   resp->status, rid[0] ? ", opc-request-id " : "", rid);
}

/*
 * Sends one signed request: `path` starts with /20160918 and carries its
 * query string already encoded. resp holds the reply on success.
 */
static int oci_call(struct oci_session *s, enum oci_service svc, const char *method,
                    const char *path, const char *body, const char *retry_token,
                    const char *if_match, struct call_ctx *cc, struct isc_http_response *resp,
                    struct isc_err *err)
{
	struct isc_oci_sign_request sreq = {0};
	struct isc_oci_signed sig;
	struct isc_http_header hdrs[10];
	struct isc_http_request req;
	char date[32], *url = NULL, *target = NULL;
	size_t nh = 0;
	int rc;

	memset(cc->code, 0, sizeof(cc->code));
	cc->message[0] = '\0';
	if (asprintf(&url, "%s%s", s->url[svc], path) < 0 ||
	    asprintf(&target, "%s%s", s->prefix[svc], path) < 0) {
		free(url);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	isc_oci_format_date(s->clock->now_ms(s->clock->ctx), date);
	sreq.method = method;
	sreq.target = target;
	sreq.host = s->host[svc];
	sreq.date = date;
	sreq.content_type = CONTENT_JSON;
	sreq.body = body;
	sreq.body_len = body ? strlen(body) : 0;
	rc = isc_oci_sign(s->cfg.key, s->cfg.key_id, &sreq, &sig, err);
	if (rc)
		goto out;
	hdrs[nh++] = (struct isc_http_header){"host", s->host[svc]};
	hdrs[nh++] = (struct isc_http_header){"accept", CONTENT_JSON};
	for (size_t i = 0; i < sig.n_add; i++)
		hdrs[nh++] = sig.add[i];
	if (retry_token)
		hdrs[nh++] = (struct isc_http_header){"opc-retry-token", retry_token};
	if (if_match)
		hdrs[nh++] = (struct isc_http_header){"if-match", if_match};
	req = (struct isc_http_request){method, url, hdrs, nh, body, sreq.body_len};
	rc = isc_http_do(cc->http ? cc->http : &s->http, &req, oci_classify, cc, resp, err);
out:
	isc_oci_signed_cleanup(&sig);
	free(url);
	free(target);
	return rc;
}

/* oci_call, then the reply as JSON (*out owned by the caller). */
static int oci_call_json(struct oci_session *s, enum oci_service svc, const char *method,
                         const char *path, const char *body, const char *retry_token,
                         struct call_ctx *cc, struct isc_http_response *resp, json_t **out,
                         struct isc_err *err)
{
	int rc = oci_call(s, svc, method, path, body, retry_token, NULL, cc, resp, err);
	*out = NULL;
	if (rc)
		return rc;
	*out = json_loadb(resp->body.data ? resp->body.data : "", resp->body.len, 0, NULL);
	if (!*out)
		return isc_err_set(err, ISC_EINVALID, "%s: the reply is not JSON", cc->action);
	return 0;
}

/* Appends "&name=value" (or "?..." first) with the value percent-encoded. */
static int query_add(char *q, size_t cap, const char *name, const char *value)
{
	size_t n = strlen(q);
	int w = snprintf(q + n, cap - n, "%c%s=", strchr(q, '?') ? '&' : '?', name);
	if (w < 0 || (size_t)w >= cap - n)
		return -1;
	n += (size_t)w;
	for (const unsigned char *p = (const unsigned char *)value; *p; p++) {
		if (n + 4 > cap)
			return -1;
		if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		    (*p >= '0' && *p <= '9') || strchr("-._~", *p))
			q[n++] = (char)*p;
		else
			n += (size_t)snprintf(q + n, 4, "%%%02X", *p);
	}
	q[n] = '\0';
	return 0;
}

/* ---- session ---- */

static int setting_true(const struct isc_provider_settings *st, const char *key)
{
	const char *v = isc_provider_setting(st, key);
	return v && (!strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "yes"));
}

/* The endpoint of svc: setting endpoint_<svc> > endpoint > the region's; {region} expanded. */
static char *endpoint_resolve(const struct isc_provider_settings *st, const char *svc,
                              const char *region)
{
	char key[32], *tmpl, *out = NULL, *at;
	const char *e;
	size_t n;

	snprintf(key, sizeof(key), "endpoint_%s", svc);
	e = isc_provider_setting(st, key);
	if (!e || !e[0])
		e = isc_provider_setting(st, "endpoint");
	if (e && e[0])
		tmpl = strdup(e);
	else if (asprintf(&tmpl, "https://%s.{region}.oraclecloud.com",
	                  strcmp(svc, "core") == 0 ? "iaas" : "identity") < 0)
		tmpl = NULL;
	if (!tmpl)
		return NULL;
	at = strstr(tmpl, "{region}");
	if (at) {
		*at = '\0';
		if (asprintf(&out, "%s%s%s", tmpl, region, at + 8) < 0)
			out = NULL;
		free(tmpl);
	} else {
		out = tmpl;
	}
	/* One spelling: no trailing slash; requests add /20160918/... */
	n = out ? strlen(out) : 0;
	while (n > 0 && out[n - 1] == '/')
		out[--n] = '\0';
	return out;
}

/* "https://h:p/x/y" -> host "h:p" and prefix "/x/y". */
static int split_url(const char *url, char **host, char **prefix)
{
	const char *p = strstr(url, "://");
	size_t n;
	p = p ? p + 3 : url;
	n = strcspn(p, "/?#");
	if (n == 0 || memchr(p, '@', n) || p[n] == '?' || p[n] == '#')
		return ISC_EINVALID;
	*host = strndup(p, n);
	*prefix = strdup(p + n);
	return *host && *prefix ? 0 : ISC_ENOMEM;
}

static void oci_session_free(struct isc_provider_session *ps)
{
	struct oci_session *s;
	if (!ps)
		return;
	s = ps->impl;
	if (s) {
		isc_oci_config_cleanup(&s->cfg);
		for (int i = 0; i < 2; i++) {
			free(s->url[i]);
			free(s->host[i]);
			free(s->prefix[i]);
		}
		free(s->compartment_id);
		free(s->tenant_ssh_cidr);
		free(s->subnet_id);
		free(s->image_id);
		free(s);
	}
	free(ps);
}

extern const struct isc_provider isc_provider_oci;

static int oci_session_new(const struct isc_provider_settings *settings, const char *region,
                           const struct isc_http_transport *t, const struct isc_clock *clock,
                           struct isc_provider_session **out, struct isc_err *err)
{
	static const char *const svc_name[2] = {"core", "identity"};
	struct isc_provider_session *ps = calloc(1, sizeof(*ps));
	struct oci_session *s = calloc(1, sizeof(*s));
	int rc, allow_insecure;

	*out = NULL;
	if (!ps || !s) {
		free(ps);
		free(s);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	ps->provider = &isc_provider_oci;
	ps->impl = s;
	allow_insecure = setting_true(settings, "allow_insecure_endpoint");
	if ((rc = isc_oci_config_resolve(settings, region, &s->cfg, err)))
		goto fail;
	snprintf(ps->region, sizeof(ps->region), "%s", s->cfg.region);
	for (int i = 0; i < 2; i++) {
		s->url[i] = endpoint_resolve(settings, svc_name[i], s->cfg.region);
		if (!s->url[i]) {
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
			goto fail;
		}
		if ((strncmp(s->url[i], "http://", 7) != 0 &&
		     strncmp(s->url[i], "https://", 8) != 0) ||
		    (rc = split_url(s->url[i], &s->host[i], &s->prefix[i])) == ISC_EINVALID) {
			rc = isc_err_set(err, ISC_EINVALID,
			                 "[providers.oci] endpoint_%s '%.200s' is not an http(s) "
			                 "URL of a host (with an optional path)",
			                 svc_name[i], s->url[i]);
			goto fail;
		}
		if (rc) {
			rc = isc_err_set(err, rc, "out of memory");
			goto fail;
		}
		/* Signed requests never go out in clear text by accident. */
		if ((rc = isc_http_endpoint_check(s->url[i], allow_insecure, err))) {
			isc_err_wrap(err, "[providers.oci] endpoint_%s", svc_name[i]);
			goto fail;
		}
	}
	/* The root compartment (the tenancy) unless the operator names one. */
	s->compartment_id = isc_provider_setting_dup(settings, "compartment_id", s->cfg.tenancy);
	s->subnet_id = isc_provider_setting_dup(settings, "subnet_id", NULL);
	s->image_id = isc_provider_setting_dup(settings, "image_id", NULL);
	if (isc_provider_setting(settings, "compute_cluster_id") &&
	    isc_provider_setting(settings, "compute_cluster_id")[0]) {
		/* One cluster for every AD and shape cannot work: a cluster is AD-bound. */
		rc =
		    isc_err_set(err, ISC_EINVALID,
		                "[providers.oci] compute_cluster_id is no longer read: the driver "
		                "makes a compute cluster per gang and availability domain for RDMA "
		                "shapes (compute_clusters = \"auto\" or \"never\")");
		goto fail;
	}
	{
		const char *v = isc_provider_setting(settings, "compute_clusters");
		s->compute_clusters = !v || !v[0] || !strcmp(v, "auto");
		if (v && v[0] && strcmp(v, "auto") && strcmp(v, "never")) {
			rc = isc_err_set(err, ISC_EINVALID,
			                 "[providers.oci] compute_clusters '%.40s' is neither "
			                 "\"auto\" nor \"never\"",
			                 v);
			goto fail;
		}
	}
	s->manage_security_list = setting_true(settings, "manage_security_list");
	{
		const char *v = isc_provider_setting(settings, "tenant_isolation");
		const char *port = isc_provider_setting(settings, "tenant_ssh_port");
		char *end = NULL;
		s->tenant_isolation = !v || !v[0] || !strcmp(v, "auto");
		if (v && v[0] && strcmp(v, "auto") && strcmp(v, "never")) {
			rc = isc_err_set(err, ISC_EINVALID,
			                 "[providers.oci] tenant_isolation '%.40s' is neither "
			                 "\"auto\" nor \"never\"",
			                 v);
			goto fail;
		}
		s->tenant_ssh_port = port && port[0] ? strtol(port, &end, 10) : 22;
		if (port && port[0] &&
		    (*end || s->tenant_ssh_port < 1 || s->tenant_ssh_port > 65535)) {
			rc = isc_err_set(err, ISC_EINVALID,
			                 "[providers.oci] tenant_ssh_port '%.20s' is not a port",
			                 port);
			goto fail;
		}
		v = isc_provider_setting(settings, "tenant_ssh_cidr");
		s->tenant_ssh_cidr = strdup(v && v[0] ? v : "0.0.0.0/0");
		if (!s->tenant_ssh_cidr) {
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
			goto fail;
		}
	}
	s->assign_public_ip = setting_true(settings, "assign_public_ip");
	{
		/* Boot volumes are 50 GB to 32 TB (OCI docs, "Boot Volumes": custom boot volume
		 * size); the image default (about 47 GB) is small for a PyTorch image plus data. */
		const char *v = isc_provider_setting(settings, "disk_size_gb");
		char *end = NULL;
		long gb = v && v[0] ? strtol(v, &end, 10) : 200;
		if (v && v[0] && (*end || gb < 50 || gb > 32768)) {
			rc = isc_err_set(
			    err, ISC_EINVALID,
			    "[providers.oci] disk_size_gb '%.40s' is not 50 to 32768 (GB)", v);
			goto fail;
		}
		s->disk_size_gb = gb;
	}
	s->launch_parallelism = 8;
	if (isc_provider_setting(settings, "launch_parallelism")) {
		const char *v = isc_provider_setting(settings, "launch_parallelism");
		char *end = NULL;
		long n = strtol(v, &end, 10);
		if (!v[0] || *end || n < 1 || n > 64) {
			rc = isc_err_set(
			    err, ISC_EINVALID,
			    "[providers.oci] launch_parallelism '%.20s' is not 1 to 64", v);
			goto fail;
		}
		s->launch_parallelism = (unsigned)n;
	}
	if (!s->compartment_id) {
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		goto fail;
	}
	s->clock = clock ? clock : isc_clock_system();
	isc_http_client_init(&s->http, t, s->clock);
	s->http.policy.allow_insecure = allow_insecure;
	*out = ps;
	return 0;
fail:
	oci_session_free(ps);
	return rc;
}

/* ---- check_credentials ---- */

static int oci_check_credentials(struct isc_provider_session *ps, struct isc_identity *out,
                                 struct isc_err *err)
{
	struct oci_session *s = impl(ps);
	struct isc_http_response resp;
	struct call_ctx cc = {"GetUser"};
	char path[512];
	json_t *u = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	snprintf(path, sizeof(path), API "/users/%s", s->cfg.user);
	isc_http_response_init(&resp);
	rc = oci_call_json(s, SVC_IDENTITY, "GET", path, NULL, NULL, &cc, &resp, &u, err);
	if (!rc) {
		const char *id = json_string_value(json_object_get(u, "id"));
		const char *tenancy = json_string_value(json_object_get(u, "compartmentId"));
		const char *name = json_string_value(json_object_get(u, "name"));
		if (!id) {
			rc = isc_err_set(err, ISC_EINVALID, "GetUser: the reply has no user id");
		} else {
			snprintf(out->account, sizeof(out->account), "%.127s",
			         tenancy ? tenancy : s->cfg.tenancy);
			snprintf(out->principal, sizeof(out->principal), "%s", id);
			snprintf(out->user_id, sizeof(out->user_id), "%s", name ? name : "");
		}
	}
	json_decref(u);
	isc_http_response_cleanup(&resp);
	return rc;
}

/* ---- listing instances ---- */

/* Every instance of the compartment (all ADs), page by page; *out is a JSON array. */
static int list_instances(struct oci_session *s, json_t **out, struct isc_err *err)
{
	struct isc_http_response resp;
	struct call_ctx cc = {"ListInstances"};
	json_t *all = json_array();
	char page[1024] = "";
	int rc = 0, pages = 0;

	*out = NULL;
	if (!all)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	isc_http_response_init(&resp);
	do {
		char path[2048] = API "/instances";
		json_t *arr = NULL;
		if (query_add(path, sizeof(path), "compartmentId", s->compartment_id) ||
		    query_add(path, sizeof(path), "limit", PAGE_LIMIT) ||
		    (page[0] && query_add(path, sizeof(path), "page", page))) {
			rc = isc_err_set(err, ISC_EINVALID, "ListInstances: request too long");
			break;
		}
		rc = oci_call_json(s, SVC_CORE, "GET", path, NULL, NULL, &cc, &resp, &arr, err);
		if (!rc && !json_is_array(arr))
			rc = isc_err_set(err, ISC_EINVALID,
			                 "ListInstances: the reply is not a list");
		if (!rc && json_array_extend(all, arr))
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		json_decref(arr);
		if (rc || isc_oci_header(resp.headers.data, "opc-next-page", page, sizeof(page)))
			page[0] = '\0';
	} while (!rc && page[0] && ++pages < MAX_PAGES);
	isc_http_response_cleanup(&resp);
	if (rc) {
		json_decref(all);
		return rc;
	}
	*out = all;
	return 0;
}

/* The primary VNIC's addresses of one instance: ListVnicAttachments + GetVnic. */
static int instance_ips(struct oci_session *s, const char *instance_id, char priv[46], char pub[46],
                        struct isc_err *err)
{
	struct isc_http_response resp;
	struct call_ctx cc = {"ListVnicAttachments"};
	char path[2048] = API "/vnicAttachments";
	const char *vnic_id = NULL;
	json_t *atts = NULL, *vnic = NULL, *a;
	size_t i;
	int rc;

	priv[0] = pub[0] = '\0';
	if (query_add(path, sizeof(path), "compartmentId", s->compartment_id) ||
	    query_add(path, sizeof(path), "instanceId", instance_id))
		return isc_err_set(err, ISC_EINVALID, "ListVnicAttachments: request too long");
	isc_http_response_init(&resp);
	rc = oci_call_json(s, SVC_CORE, "GET", path, NULL, NULL, &cc, &resp, &atts, err);
	json_array_foreach(rc ? NULL : atts, i, a)
	{
		const char *st = json_string_value(json_object_get(a, "lifecycleState"));
		const char *v = json_string_value(json_object_get(a, "vnicId"));
		/* The primary VNIC is attached first (nicIndex 0); it is all we use. */
		if (v && st && strcmp(st, "ATTACHED") == 0) {
			vnic_id = v;
			break;
		}
	}
	if (!rc && vnic_id) {
		struct call_ctx gc = {"GetVnic"};
		snprintf(path, sizeof(path), API "/vnics/%s", vnic_id);
		rc = oci_call_json(s, SVC_CORE, "GET", path, NULL, NULL, &gc, &resp, &vnic, err);
		if (!rc) {
			const char *p = json_string_value(json_object_get(vnic, "privateIp"));
			const char *q = json_string_value(json_object_get(vnic, "publicIp"));
			if (p && strlen(p) < 46)
				snprintf(priv, 46, "%s", p);
			if (q && strlen(q) < 46)
				snprintf(pub, 46, "%s", q);
		}
	}
	json_decref(atts);
	json_decref(vnic);
	isc_http_response_cleanup(&resp);
	return rc;
}

/*
 * Addresses from the cache, or from the cloud once per instance; preemption
 * of a preemptible node we did not terminate becomes an interruption notice.
 */
static void enrich(struct oci_session *s, struct isc_node_info *ni)
{
	struct cache_entry *e;
	int known, ours = 0;
	int64_t seen = 0;
	int live = ni->state == ISC_NODE_PENDING || ni->state == ISC_NODE_RUNNING;
	char priv[46], pub[46];

	pthread_mutex_lock(&cache_lock);
	e = cache_get(ni->id, 0);
	known = e && e->private_ip[0];
	if (e) {
		snprintf(ni->private_ip, sizeof(ni->private_ip), "%s", e->private_ip);
		snprintf(ni->public_ip, sizeof(ni->public_ip), "%s", e->public_ip);
		ours = e->terminated_by_us;
	}
	if (ni->spot && !live && !ours) {
		e = cache_get(ni->id, 1);
		if (!e->preempt_seen_ms)
			e->preempt_seen_ms = s->clock->now_ms(s->clock->ctx);
		seen = e->preempt_seen_ms;
	}
	pthread_mutex_unlock(&cache_lock);
	if (seen) {
		ni->interruption_noticed = 1;
		ni->interruption_at_ms = seen;
	}
	if (known || !live)
		return;
	/*
	 * A node without its address yet (VNIC still attaching, or a lookup that
	 * failed) is described all the same; the next describe asks again.
	 */
	if (instance_ips(s, ni->id, priv, pub, NULL) || !priv[0])
		return;
	snprintf(ni->private_ip, sizeof(ni->private_ip), "%s", priv);
	snprintf(ni->public_ip, sizeof(ni->public_ip), "%s", pub);
	pthread_mutex_lock(&cache_lock);
	e = cache_get(ni->id, 1);
	snprintf(e->private_ip, sizeof(e->private_ip), "%s", priv);
	snprintf(e->public_ip, sizeof(e->public_ip), "%s", pub);
	pthread_mutex_unlock(&cache_lock);
}

/* ---- compute clusters ---- */

/*
 * The shapes that can join a compute cluster (OCI docs, "Compute Clusters", supported
 * shapes: the bare-metal RDMA GPU and HPC shapes). Another shape in a cluster is refused
 * (400 InvalidParameter), and gains nothing without RDMA.
 */
static const char *const rdma_shapes[] = {
    "BM.GPU.A100-v2.8", "BM.GPU4.8",        "BM.GPU.B4.8",    "BM.GPU.H100.8",
    "BM.GPU.H200.8",    "BM.GPU.B200.8",    "BM.GPU.GB200.4", "BM.GPU.MI300X.8",
    "BM.HPC2.36",       "BM.Optimized3.36", "BM.HPC.E5.144",  NULL,
};

int isc_oci_rdma_shape(const char *shape)
{
	for (size_t i = 0; shape && rdma_shapes[i]; i++)
		if (strcmp(rdma_shapes[i], shape) == 0)
			return 1;
	return 0;
}

/* Compute clusters a launch of this process is filling, by their isc:token tag. */
static struct isc_busy_names busy_clusters = ISC_BUSY_NAMES_INIT;

/* The index that names a gang's compute cluster among its nodes' retry tokens (> MAX_NODES). */
#define CLUSTER_TOKEN_INDEX 99999u

/*
 * CreateComputeCluster in `ad` for the gang, tagged like its instances (+ isc:token), with
 * a retry token derived from the gang's token and the AD: a replay gets the same cluster.
 * *id gets its OCID.
 */
static int create_cluster(struct oci_session *s, const struct isc_launch_spec *spec, const char *ad,
                          const char *token, char id[256], struct isc_err *err)
{
	struct isc_http_response resp;
	struct call_ctx cc = {"CreateComputeCluster"};
	json_t *body = json_object(), *tags = json_object(), *out = NULL;
	char name[300], *text = NULL;
	const char *cluster = "gang", *got;
	int rc, bad = !body || !tags;

	for (size_t t = 0; t < spec->n_tags; t++) {
		bad |=
		    json_object_set_new(tags, spec->tags[t].key, json_string(spec->tags[t].value));
		if (strcmp(spec->tags[t].key, ISC_TAG_CLUSTER) == 0)
			cluster = spec->tags[t].value;
	}
	bad |= json_object_set_new(tags, "isc:token", json_string(token));
	snprintf(name, sizeof(name), "isc-%s-%s", cluster,
	         strrchr(ad, ':') ? strrchr(ad, ':') + 1 : ad);
	bad |= json_object_set_new(body, "availabilityDomain", json_string(ad));
	bad |= json_object_set_new(body, "compartmentId", json_string(s->compartment_id));
	bad |= json_object_set_new(body, "displayName", json_string(name));
	bad |= json_object_set(body, "freeformTags", tags);
	if (bad || !(text = json_dumps(body, JSON_COMPACT))) {
		json_decref(body);
		json_decref(tags);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	json_decref(body);
	json_decref(tags);
	isc_http_response_init(&resp);
	rc = oci_call_json(s, SVC_CORE, "POST", API "/computeClusters", text, token, &cc, &resp,
	                   &out, err);
	got = json_string_value(json_object_get(out, "id"));
	if (!rc && (!got || strlen(got) >= 256))
		rc = isc_err_set(err, ISC_ETRANSIENT,
		                 "CreateComputeCluster was accepted but its reply has no id");
	if (!rc)
		snprintf(id, 256, "%s", got);
	json_decref(out);
	free(text);
	isc_http_response_cleanup(&resp);
	return rc;
}

/*
 * Every compute cluster of the compartment (ListComputeClusters, page by page) given to
 * visit(ctx, item); visit answers 1 to stop the walk, 0 to go on, or an error code (< 0)
 * that ends it. *cut (when not NULL): 1 when MAX_PAGES ended the walk with pages left.
 */
static int each_cluster(struct oci_session *s, int (*visit)(void *ctx, const json_t *c), void *ctx,
                        int *cut, struct isc_err *err)
{
	struct isc_http_response resp;
	struct call_ctx cc = {"ListComputeClusters"};
	char page[1024] = "";
	int rc = 0, stop = 0, pages = 0;

	isc_http_response_init(&resp);
	do {
		char path[2048] = API "/computeClusters";
		json_t *coll = NULL, *items, *c;
		size_t i;
		if (query_add(path, sizeof(path), "compartmentId", s->compartment_id) ||
		    query_add(path, sizeof(path), "limit", PAGE_LIMIT) ||
		    (page[0] && query_add(path, sizeof(path), "page", page))) {
			rc =
			    isc_err_set(err, ISC_EINVALID, "ListComputeClusters: request too long");
			break;
		}
		rc = oci_call_json(s, SVC_CORE, "GET", path, NULL, NULL, &cc, &resp, &coll, err);
		items = json_object_get(coll, "items");
		if (!rc && !json_is_array(items))
			rc = isc_err_set(err, ISC_EINVALID,
			                 "ListComputeClusters: the reply is not a collection");
		if (rc || isc_oci_header(resp.headers.data, "opc-next-page", page, sizeof(page)))
			page[0] = '\0';
		json_array_foreach(rc ? NULL : items, i, c)
		{
			int v = visit(ctx, c);
			if (v < 0)
				rc = v;
			if (v) {
				stop = 1;
				break;
			}
		}
		json_decref(coll);
	} while (!rc && !stop && page[0] && ++pages < MAX_PAGES);
	isc_http_response_cleanup(&resp);
	if (cut)
		*cut = !rc && !stop && page[0];
	return rc;
}

struct cluster_wanted {
	const char *ad, *token;
	char *id; /* [256] */
};

static int match_cluster(void *ctx, const json_t *c)
{
	struct cluster_wanted *w = ctx;
	const json_t *tags = json_object_get(c, "freeformTags");
	const char *cid = json_string_value(json_object_get(c, "id"));
	const char *state = json_string_value(json_object_get(c, "lifecycleState"));
	const char *t = json_string_value(json_object_get(tags, "isc:token"));
	const char *in = json_string_value(json_object_get(c, "availabilityDomain"));
	if (!cid || strlen(cid) >= 256 || !state || strcmp(state, "ACTIVE") != 0 || !t ||
	    strcmp(t, w->token) != 0 || (in && strcmp(in, w->ad) != 0))
		return 0;
	snprintf(w->id, 256, "%s", cid);
	return 1;
}

/*
 * The ACTIVE compute cluster in `ad` tagged isc:token=token (a replacement joins the
 * one its gang's launch made: asking CreateComputeCluster again would carry this
 * launch's tags and name, another body under the same retry token, which OCI refuses).
 * *id is "" when there is none.
 */
static int find_cluster(struct oci_session *s, const char *ad, const char *token, char id[256],
                        struct isc_err *err)
{
	struct cluster_wanted w = {ad, token, id};
	id[0] = '\0';
	return each_cluster(s, match_cluster, &w, NULL, err);
}

/* DeleteComputeCluster; *deleted = 0 while OCI refuses (instances still in it: 409). */
static int delete_cluster(struct oci_session *s, const char *id, int *deleted, struct isc_err *err)
{
	struct isc_http_response resp;
	struct call_ctx cc = {"DeleteComputeCluster"};
	char path[512];
	int rc;

	*deleted = 0;
	if (snprintf(path, sizeof(path), API "/computeClusters/%s", id) >= (int)sizeof(path))
		return isc_err_set(err, ISC_EINVALID, "DeleteComputeCluster: id too long");
	isc_http_response_init(&resp);
	rc = oci_call(s, SVC_CORE, "DELETE", path, NULL, NULL, NULL, &cc, &resp, err);
	isc_http_response_cleanup(&resp);
	if (!rc || rc == ISC_ENOTFOUND) {
		*deleted = 1;
		return 0;
	}
	if (resp.status == 409 || !strcmp(cc.code, "IncorrectState") ||
	    !strcmp(cc.code, "Conflict"))
		return 0;
	return rc;
}

/*
 * Teardown and crash recovery of compute clusters: every ACTIVE cluster of the
 * compartment tagged isc:broker=broker_id that no live instance (of `all`, the whole
 * listing) is in, and no launch of this process is filling, is deleted. OCI refuses
 * while instances are still terminating; a later describe asks again. providers/sweep.h
 * says when a describe sweeps (not every describe: ListComputeClusters is one more call
 * per region and tick). At most CLUSTER_DELETES_PER_SWEEP deletes per sweep, one call
 * each: after a mass teardown the rest go at the next describes instead of holding this
 * one for hundreds of calls. Best effort: a failure is logged, the listing stands, the
 * next describe sweeps again.
 */
#define CLUSTER_DELETES_PER_SWEEP 10

/*
 * Fills sw from the listing `all`: a use per instance of this broker in a compute
 * cluster (its computeClusterId; live unless TERMINATED, as reap_cluster counts). 1 when
 * this describe sweeps (providers/sweep.h).
 */
static int clusters_sweep_due(const struct oci_session *s, const char *broker_id, const json_t *all,
                              struct isc_sweep *sw)
{
	size_t i;
	const json_t *inst;

	/* The endpoint, region and broker (providers/sweep.h) */
	isc_sweep_begin(sw, json_array_size(all), "oci %s %s %s", s->url[SVC_CORE], s->cfg.region,
	                broker_id);
	json_array_foreach(all, i, inst)
	{
		const char *cid = json_string_value(json_object_get(inst, "computeClusterId"));
		const char *ls = json_string_value(json_object_get(inst, "lifecycleState"));
		const char *b = json_string_value(
		    json_object_get(json_object_get(inst, "freeformTags"), ISC_TAG_BROKER));
		if (cid && cid[0] && b && strcmp(b, broker_id) == 0)
			isc_sweep_add(sw, cid, !ls || strcmp(ls, "TERMINATED") != 0);
	}
	return isc_sweep_ready(sw, s->clock->now_ms(s->clock->ctx));
}

struct cluster_reap {
	struct oci_session *s;
	const char *broker_id;
	const json_t *all;
	struct isc_err *err;
	struct isc_sweep *sw; /* an idle cluster listed ACTIVE that this sweep leaves is kept */
	size_t deletes, left;
};

/*
 * Deletes c when it is this broker's, ACTIVE, not being filled and holds no live instance
 * (at most CLUSTER_DELETES_PER_SWEEP a sweep). An idle cluster of the listing that stays
 * (refused, being filled, over the limit) is marked kept: not gone.
 */
static int reap_cluster(void *ctx, const json_t *c)
{
	struct cluster_reap *r = ctx;
	const json_t *tags = json_object_get(c, "freeformTags"), *inst;
	const char *id = json_string_value(json_object_get(c, "id"));
	const char *state = json_string_value(json_object_get(c, "lifecycleState"));
	const char *broker = json_string_value(json_object_get(tags, ISC_TAG_BROKER));
	const char *token = json_string_value(json_object_get(tags, "isc:token"));
	size_t k;
	int rc, deleted = 0;

	/* not ours, or going already: nothing this sweep would do, so not kept either */
	if (!id || !broker || strcmp(broker, r->broker_id) != 0 || !state ||
	    strcmp(state, "ACTIVE") != 0)
		return 0;
	if (token && isc_busy_names_has(&busy_clusters, token))
		goto keep;
	json_array_foreach(r->all, k, inst)
	{
		const char *in = json_string_value(json_object_get(inst, "computeClusterId"));
		const char *ls = json_string_value(json_object_get(inst, "lifecycleState"));
		if (in && !strcmp(in, id) && (!ls || strcmp(ls, "TERMINATED") != 0))
			goto keep;
	}
	if (r->deletes == CLUSTER_DELETES_PER_SWEEP) {
		r->left++;
		goto keep;
	}
	r->deletes++;
	if ((rc = delete_cluster(r->s, id, &deleted, r->err)))
		return rc;
	if (!deleted)
		goto keep;
	isc_log(ISC_LOG_INFO, "oci %s: compute cluster %s deleted (no live instance)",
	        r->s->cfg.region, id);
	return 0;
keep:
	isc_sweep_keep(r->sw, id);
	return 0;
}

static void reconcile_clusters(struct oci_session *s, const char *broker_id, const json_t *all,
                               struct isc_sweep *sw)
{
	struct isc_err err;
	struct cluster_reap r = {s, broker_id, all, &err, sw, 0, 0};
	int cut = 0;

	if (each_cluster(s, reap_cluster, &r, &cut, &err)) {
		isc_log(ISC_LOG_WARN,
		        "oci %s: compute cluster reconcile: %s (next describe retries)",
		        s->cfg.region, err.msg);
	} else {
		if (r.left)
			isc_log(
			    ISC_LOG_INFO,
			    "oci %s: %zu more unused compute cluster(s) go at the next describes",
			    s->cfg.region, r.left);
		/* A walk cut short may not have reached a cluster: none counts as absent. */
		isc_sweep_finish(sw, !cut, s->clock->now_ms(s->clock->ctx));
	}
}

static int nsgs_sweep_due(const struct oci_session *s, const char *broker_id, const json_t *all,
                          char *scope, size_t cap);
static void reconcile_nsgs(struct oci_session *s, const char *broker_id, const char *scope);

static int oci_describe(struct isc_provider_session *ps, const char *broker_id,
                        struct isc_node_info **out, size_t *n_out, struct isc_err *err)
{
	struct oci_session *s = impl(ps);
	struct isc_node_info *nodes = NULL;
	json_t *all = NULL, *inst;
	size_t i, n = 0;
	int rc;

	*out = NULL;
	*n_out = 0;
	if (!broker_id || !broker_id[0])
		return isc_err_set(err, ISC_EINVALID, "describe: empty broker id");
	/* ListInstances has no tag filter: the broker's tag is matched here. */
	if ((rc = list_instances(s, &all, err)))
		return rc;
	nodes = calloc(json_array_size(all) ? json_array_size(all) : 1, sizeof(*nodes));
	if (!nodes) {
		json_decref(all);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	json_array_foreach(all, i, inst)
	{
		struct isc_node_info ni;
		if (isc_oci_parse_instance(inst, &ni) || strcmp(ni.broker_id, broker_id) != 0)
			continue;
		nodes[n++] = ni;
	}
	if (s->compute_clusters) {
		struct isc_sweep sw;
		if (clusters_sweep_due(s, broker_id, all, &sw))
			reconcile_clusters(s, broker_id, all, &sw);
		isc_sweep_cleanup(&sw);
	}
	if (s->tenant_isolation) {
		char scope[700];
		if (nsgs_sweep_due(s, broker_id, all, scope, sizeof(scope)))
			reconcile_nsgs(s, broker_id, scope);
	}
	json_decref(all);
	for (i = 0; i < n; i++)
		enrich(s, &nodes[i]);
	*out = nodes;
	*n_out = n;
	return 0;
}

/* ---- terminate ---- */

static int terminate_one(struct oci_session *s, const char *id, struct isc_err *err)
{
	struct isc_http_response resp;
	struct call_ctx cc = {"TerminateInstance"};
	char path[512];
	int rc;

	pthread_mutex_lock(&cache_lock);
	cache_get(id, 1)->terminated_by_us = 1;
	pthread_mutex_unlock(&cache_lock);
	snprintf(path, sizeof(path), API "/instances/%s?preserveBootVolume=false", id);
	isc_http_response_init(&resp);
	rc = oci_call(s, SVC_CORE, "DELETE", path, NULL, NULL, NULL, &cc, &resp, err);
	isc_http_response_cleanup(&resp);
	return rc == ISC_ENOTFOUND ? 0 : rc; /* already gone: done */
}

static int valid_ocid(const char *id)
{
	return id && strncmp(id, "ocid1.", 6) == 0 && strlen(id) < 256 &&
	       strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") ==
	           strlen(id);
}

static int oci_terminate(struct isc_provider_session *ps, const char *const *ids, size_t n,
                         struct isc_err *err)
{
	struct oci_session *s = impl(ps);
	int first = 0;
	struct isc_err e1;

	for (size_t i = 0; i < n; i++)
		if (!valid_ocid(ids[i]))
			return isc_err_set(err, ISC_EINVALID, "terminate: bad instance OCID");
	/* One failure never keeps the others from being terminated; the first is reported. */
	for (size_t i = 0; i < n; i++) {
		int rc = terminate_one(s, ids[i], first ? NULL : &e1);
		if (rc && !first)
			first = rc;
	}
	if (first && err)
		*err = e1;
	return first;
}

/* ---- the training network ---- */

/*
 * The one walk of a subnet's security lists (lists: its securityListIds): the first
 * whose ingress rules let all TCP in from cidr (isc_oci_rules_allow_training), its id
 * into allowing ("" when none lets it in). The training check wants one; the tenants'
 * check wants none.
 */
static int find_training_list(struct oci_session *s, const json_t *lists, const char *cidr,
                              char allowing[257], struct isc_err *err)
{
	struct isc_http_response resp;
	char path[512];
	json_t *sl = NULL, *id;
	size_t i;
	int rc = 0;

	allowing[0] = '\0';
	isc_http_response_init(&resp);
	json_array_foreach(lists, i, id)
	{
		struct call_ctx lc = {"GetSecurityList"};
		const char *sid = json_string_value(id);
		if (!sid || strlen(sid) > 256)
			continue;
		snprintf(path, sizeof(path), API "/securityLists/%s", sid);
		json_decref(sl);
		if ((rc =
		         oci_call_json(s, SVC_CORE, "GET", path, NULL, NULL, &lc, &resp, &sl, err)))
			break;
		if (isc_oci_rules_allow_training(json_object_get(sl, "ingressSecurityRules"),
		                                 cidr) == 1) {
			snprintf(allowing, 257, "%s", sid);
			break;
		}
	}
	json_decref(sl);
	isc_http_response_cleanup(&resp);
	return rc;
}

static int ensure_training_rule(struct oci_session *s, struct isc_err *err)
{
	struct isc_http_response resp;
	struct call_ctx cc = {"GetSubnet"};
	char path[512], cidr[64], etag[256], allowing[257];
	json_t *subnet = NULL, *lists, *sl = NULL;
	const char *c;
	int rc, ok = 0;

	if (subnet_known(s->subnet_id))
		return 0;
	snprintf(path, sizeof(path), API "/subnets/%s", s->subnet_id);
	isc_http_response_init(&resp);
	rc = oci_call_json(s, SVC_CORE, "GET", path, NULL, NULL, &cc, &resp, &subnet, err);
	if (rc)
		goto out;
	c = json_string_value(json_object_get(subnet, "cidrBlock"));
	lists = json_object_get(subnet, "securityListIds");
	if (!c || strlen(c) >= sizeof(cidr) || !json_is_array(lists)) {
		rc = isc_err_set(err, ISC_EINVALID, "GetSubnet %s: no cidrBlock or securityListIds",
		                 s->subnet_id);
		goto out;
	}
	snprintf(cidr, sizeof(cidr), "%s", c);
	if ((rc = find_training_list(s, lists, cidr, allowing, err)))
		goto out;
	ok = allowing[0] != '\0';
	if (!ok && s->manage_security_list && json_array_size(lists) > 0) {
		/* UpdateSecurityList replaces the whole rule list: ours is appended, guarded by
		 * the etag so a concurrent change is not lost. */
		struct call_ctx uc = {"UpdateSecurityList"};
		const char *sid = json_string_value(json_array_get(lists, 0));
		json_t *rules, *body = NULL;
		char *text = NULL;
		snprintf(path, sizeof(path), API "/securityLists/%s", sid ? sid : "");
		rc = oci_call_json(s, SVC_CORE, "GET", path, NULL, NULL, &uc, &resp, &sl, err);
		if (rc)
			goto out;
		if (isc_oci_header(resp.headers.data, "etag", etag, sizeof(etag)))
			etag[0] = '\0';
		rules = json_deep_copy(json_object_get(sl, "ingressSecurityRules"));
		if (!json_is_array(rules)) {
			json_decref(rules);
			rules = json_array();
		}
		json_array_append_new(
		    rules, json_pack("{s:s, s:s, s:s, s:b, s:s}", "protocol", "6", "source", cidr,
		                     "sourceType", "CIDR_BLOCK", "isStateless", 0, "description",
		                     "isc-broker: training traffic between nodes (torchrun "
		                     "29400, NCCL)"));
		body = json_pack("{s:o}", "ingressSecurityRules", rules);
		text = body ? json_dumps(body, JSON_COMPACT) : NULL;
		json_decref(body);
		if (!text) {
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
			goto out;
		}
		rc = oci_call(s, SVC_CORE, "PUT", path, text, NULL, etag[0] ? etag : NULL, &uc,
		              &resp, err);
		free(text);
		if (rc)
			goto out;
		ok = 1;
	}
	if (!ok) {
		rc = isc_err_set(
		    err, ISC_EINVALID,
		    "subnet %.120s (%s): no security list lets the nodes reach each other for "
		    "training; add a stateful ingress rule to one of its security lists: protocol "
		    "TCP (6), source %s (CIDR), all destination ports (torchrun's %d and NCCL's "
		    "ports), or set manage_security_list = true in [providers.oci]",
		    s->subnet_id, cidr, cidr, ISC_OCI_RDZV_PORT);
		goto out;
	}
	subnet_remember(s->subnet_id);
out:
	json_decref(subnet);
	json_decref(sl);
	isc_http_response_cleanup(&resp);
	return rc;
}

/* ---- tenants on the platform's account (docs/security.md, issue 42) ---- */

/* Tenant NSGs a launch of this process is about to use (the sweep leaves them). */
static struct isc_busy_names busy_nsgs = ISC_BUSY_NAMES_INIT;

int isc_oci_tenant_nsg_name(const char *broker_id, const char *tenant, char out[256],
                            struct isc_err *err)
{
	int n;
	if (!isc_tenant_name_ok(tenant))
		return isc_err_set(err, ISC_EINVALID,
		                   "launch: tenant '%.40s' is not 1 to 32 of a-z, 0-9 and '-'",
		                   tenant ? tenant : "");
	n = snprintf(out, 256, "isc-tenant-%s-%s", broker_id ? broker_id : "", tenant);
	if (!broker_id || !broker_id[0] || n <= 0 || n >= 256)
		return isc_err_set(err, ISC_EINVALID, "launch: no usable %s tag", ISC_TAG_BROKER);
	return 0;
}

/*
 * A tenant's launch: the subnet's VCN (an NSG lives in one), and no security list rule of
 * the subnet that lets all TCP in from the subnet (the "training rule" a launch without a
 * tenant needs): security lists and NSGs add up ("a packet is allowed if any rule in any
 * of the lists and groups allows it", OCI docs, "Comparison of Security Lists and Network
 * Security Groups"), so such a rule would let every tenant's nodes reach every other's.
 */
static int check_tenant_subnet(struct oci_session *s, char vcn[256], struct isc_err *err)
{
	struct isc_http_response resp;
	struct call_ctx cc = {"GetSubnet"};
	char path[512], cidr[64], allowing[257];
	json_t *subnet = NULL, *lists;
	const char *c, *v;
	int rc;

	snprintf(path, sizeof(path), API "/subnets/%s", s->subnet_id);
	isc_http_response_init(&resp);
	rc = oci_call_json(s, SVC_CORE, "GET", path, NULL, NULL, &cc, &resp, &subnet, err);
	if (rc)
		goto out;
	c = json_string_value(json_object_get(subnet, "cidrBlock"));
	v = json_string_value(json_object_get(subnet, "vcnId"));
	lists = json_object_get(subnet, "securityListIds");
	if (!c || strlen(c) >= sizeof(cidr) || !v || strlen(v) >= 256 || !json_is_array(lists)) {
		rc = isc_err_set(err, ISC_EINVALID,
		                 "GetSubnet %s: no cidrBlock, vcnId or securityListIds",
		                 s->subnet_id);
		goto out;
	}
	snprintf(cidr, sizeof(cidr), "%s", c);
	snprintf(vcn, 256, "%s", v);
	if (!(rc = find_training_list(s, lists, cidr, allowing, err)) && allowing[0])
		rc = isc_err_set(
		    err, ISC_EINVALID,
		    "subnet %.120s: security list %.120s lets all TCP in from %s (the "
		    "subnet), "
		    "so the organisations on this tenancy would reach each other's nodes; "
		    "remove that rule (each organisation's nodes get a network security "
		    "group of their own) or set [providers.oci] tenant_isolation = "
		    "\"never\" "
		    "(docs/security.md, \"Tenants on the platform's account\")",
		    s->subnet_id, allowing, cidr);
out:
	json_decref(subnet);
	isc_http_response_cleanup(&resp);
	return rc;
}

/* 1 when the NSG's rules (ListNetworkSecurityGroupSecurityRules) admit all from itself. */
static int nsg_has_self_rule(struct oci_session *s, const char *id, struct isc_err *err, int *rc)
{
	struct isc_http_response resp;
	struct call_ctx cc = {"ListNetworkSecurityGroupSecurityRules"};
	char path[512];
	json_t *rules = NULL, *r;
	size_t i;
	int ok = 0;

	snprintf(path, sizeof(path), API "/networkSecurityGroups/%s/securityRules", id);
	isc_http_response_init(&resp);
	*rc = oci_call_json(s, SVC_CORE, "GET", path, NULL, NULL, &cc, &resp, &rules, err);
	json_array_foreach(*rc ? NULL : rules, i, r)
	{
		const char *dir = json_string_value(json_object_get(r, "direction"));
		const char *proto = json_string_value(json_object_get(r, "protocol"));
		const char *src = json_string_value(json_object_get(r, "source"));
		const char *st = json_string_value(json_object_get(r, "sourceType"));
		if (dir && !strcmp(dir, "INGRESS") && proto && !strcmp(proto, "all") && src &&
		    !strcmp(src, id) && st && !strcmp(st, "NETWORK_SECURITY_GROUP"))
			ok = 1;
	}
	json_decref(rules);
	isc_http_response_cleanup(&resp);
	return ok;
}

/*
 * The tenant's network security group in the subnet's VCN, found by display name
 * (ListNetworkSecurityGroups) or made (CreateNetworkSecurityGroup, freeform tags isc:broker
 * and isc:tenant, a retry token from its name), with its rules
 * (AddNetworkSecurityGroupSecurityRules): ingress all from the group itself (sourceType
 * NETWORK_SECURITY_GROUP: "the rule applies to VNICs in the source NSG", OCI docs, "Network
 * Security Groups") and TCP tenant_ssh_port from tenant_ssh_cidr. Its id into s->tenant_nsg.
 */
static int ensure_tenant_nsg(struct oci_session *s, const struct isc_launch_spec *spec,
                             const char *broker_id, const char *vcn, const char *name,
                             struct isc_err *err)
{
	struct isc_http_response resp;
	struct call_ctx cc = {"ListNetworkSecurityGroups"};
	char path[2048] = API "/networkSecurityGroups", token[65];
	json_t *list = NULL, *g, *made = NULL, *body;
	char *text;
	size_t i;
	int rc;

	s->tenant_nsg[0] = '\0';
	if (query_add(path, sizeof(path), "compartmentId", s->compartment_id) ||
	    query_add(path, sizeof(path), "vcnId", vcn) ||
	    query_add(path, sizeof(path), "displayName", name))
		return isc_err_set(err, ISC_EINVALID,
		                   "ListNetworkSecurityGroups: request too long");
	isc_http_response_init(&resp);
	rc = oci_call_json(s, SVC_CORE, "GET", path, NULL, NULL, &cc, &resp, &list, err);
	json_array_foreach(rc ? NULL : list, i, g)
	{
		const char *id = json_string_value(json_object_get(g, "id"));
		const char *st = json_string_value(json_object_get(g, "lifecycleState"));
		const char *dn = json_string_value(json_object_get(g, "displayName"));
		if (id && strlen(id) < sizeof(s->tenant_nsg) && dn && !strcmp(dn, name) && st &&
		    (!strcmp(st, "AVAILABLE") || !strcmp(st, "PROVISIONING")))
			snprintf(s->tenant_nsg, sizeof(s->tenant_nsg), "%s", id);
	}
	json_decref(list);
	if (!rc && !s->tenant_nsg[0]) {
		struct call_ctx mc = {"CreateNetworkSecurityGroup"};
		isc_oci_retry_token(name, "nsg", 0, token, NULL);
		body =
		    json_pack("{s:s, s:s, s:s, s:{s:s, s:s}}", "compartmentId", s->compartment_id,
		              "vcnId", vcn, "displayName", name, "freeformTags", ISC_TAG_BROKER,
		              broker_id, "isc:tenant", spec->tenant);
		text = body ? json_dumps(body, JSON_COMPACT) : NULL;
		json_decref(body);
		if (!text)
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		else
			rc = oci_call_json(s, SVC_CORE, "POST", API "/networkSecurityGroups", text,
			                   token, &mc, &resp, &made, err);
		free(text);
		if (!rc) {
			const char *id = json_string_value(json_object_get(made, "id"));
			if (!id || strlen(id) >= sizeof(s->tenant_nsg))
				rc = isc_err_set(err, ISC_EINVALID,
				                 "CreateNetworkSecurityGroup: no id in the reply");
			else
				snprintf(s->tenant_nsg, sizeof(s->tenant_nsg), "%s", id);
		}
		json_decref(made);
	}
	if (!rc && !nsg_has_self_rule(s, s->tenant_nsg, err, &rc) && !rc) {
		struct call_ctx ac = {"AddNetworkSecurityGroupSecurityRules"};
		json_t *out = NULL;
		snprintf(path, sizeof(path),
		         API "/networkSecurityGroups/%s/actions/addSecurityRules", s->tenant_nsg);
		body = json_pack(
		    "{s:[{s:s, s:s, s:s, s:s, s:b, s:s}, {s:s, s:s, s:s, s:s, s:b, "
		    "s:{s:{s:I, s:I}}, s:s}]}",
		    "securityRules", "direction", "INGRESS", "protocol", "all", "source",
		    s->tenant_nsg, "sourceType", "NETWORK_SECURITY_GROUP", "isStateless", 0,
		    "description", "isc-broker: the tenant's nodes reach one another", "direction",
		    "INGRESS", "protocol", "6", "source", s->tenant_ssh_cidr, "sourceType",
		    "CIDR_BLOCK", "isStateless", 0, "tcpOptions", "destinationPortRange", "min",
		    (json_int_t)s->tenant_ssh_port, "max", (json_int_t)s->tenant_ssh_port,
		    "description", "isc-broker: SSH from the broker");
		text = body ? json_dumps(body, JSON_COMPACT) : NULL;
		json_decref(body);
		if (!text)
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		else
			rc = oci_call_json(s, SVC_CORE, "POST", path, text, NULL, &ac, &resp, &out,
			                   err);
		free(text);
		json_decref(out);
	}
	if (rc) {
		s->tenant_nsg[0] = '\0';
		if (err)
			isc_err_wrap(err, "tenant network security group %s", name);
	}
	isc_http_response_cleanup(&resp);
	return rc;
}

/*
 * Teardown of tenants' NSGs: every NSG of the compartment tagged isc:broker = this broker
 * and isc:tenant that no launch of this process is about to use and that has no VNIC
 * (ListNetworkSecurityGroupVnics: the cloud's own membership) is deleted
 * (DeleteNetworkSecurityGroup; a 409 while a VNIC still goes waits). Due as
 * providers/sweep.h says, with the listing's instances tagged isc:tenant as the uses (a
 * tenant's NSG is idle once its instances are all TERMINATED). Best effort: logged.
 */
#define NSG_DELETES_PER_SWEEP 10

static int nsgs_sweep_due(const struct oci_session *s, const char *broker_id, const json_t *all,
                          char *scope, size_t cap)
{
	size_t n = json_array_size(all), k = 0, i;
	struct isc_sweep_use *uses = calloc(n ? n : 1, sizeof(*uses));
	char(*names)[256] = calloc(n ? n : 1, sizeof(*names));
	json_t *inst;
	int due;

	snprintf(scope, cap, "oci-nsg %s %s %s", s->url[SVC_CORE], s->compartment_id, broker_id);
	if (!uses || !names) {
		free(uses);
		free(names);
		return 1;
	}
	json_array_foreach(all, i, inst)
	{
		json_t *tags = json_object_get(inst, "freeformTags");
		const char *b = json_string_value(json_object_get(tags, ISC_TAG_BROKER));
		const char *t = json_string_value(json_object_get(tags, "isc:tenant"));
		const char *st = json_string_value(json_object_get(inst, "lifecycleState"));
		if (!b || strcmp(b, broker_id) || !t ||
		    isc_oci_tenant_nsg_name(broker_id, t, names[k], NULL))
			continue;
		uses[k] = (struct isc_sweep_use){names[k], !st || strcmp(st, "TERMINATED") != 0};
		k++;
	}
	due = isc_sweep_due(scope, uses, k, s->clock->now_ms(s->clock->ctx));
	free(uses);
	free(names);
	return due;
}

static void reconcile_nsgs(struct oci_session *s, const char *broker_id, const char *scope)
{
	struct isc_http_response resp;
	struct call_ctx cc = {"ListNetworkSecurityGroups"};
	char path[2048] = API "/networkSecurityGroups";
	json_t *list = NULL, *g;
	struct isc_err err;
	size_t i, deletes = 0;
	int rc;

	isc_http_response_init(&resp);
	if (query_add(path, sizeof(path), "compartmentId", s->compartment_id))
		return;
	rc = oci_call_json(s, SVC_CORE, "GET", path, NULL, NULL, &cc, &resp, &list, &err);
	json_array_foreach(rc ? NULL : list, i, g)
	{
		json_t *tags = json_object_get(g, "freeformTags");
		const char *b = json_string_value(json_object_get(tags, ISC_TAG_BROKER));
		const char *t = json_string_value(json_object_get(tags, "isc:tenant"));
		const char *id = json_string_value(json_object_get(g, "id"));
		const char *dn = json_string_value(json_object_get(g, "displayName"));
		const char *st = json_string_value(json_object_get(g, "lifecycleState"));
		struct call_ctx vc = {"ListNetworkSecurityGroupVnics"},
		                dc = {"DeleteNetworkSecurityGroup"};
		char vpath[512];
		json_t *vnics = NULL;
		if (!b || strcmp(b, broker_id) || !t || !id || strlen(id) > 256 || !st ||
		    strcmp(st, "AVAILABLE") || (dn && isc_busy_names_has(&busy_nsgs, dn)) ||
		    deletes == NSG_DELETES_PER_SWEEP)
			continue;
		snprintf(vpath, sizeof(vpath), API "/networkSecurityGroups/%s/vnics", id);
		if ((rc = oci_call_json(s, SVC_CORE, "GET", vpath, NULL, NULL, &vc, &resp, &vnics,
		                        &err)))
			break;
		if (json_array_size(vnics) == 0) {
			deletes++;
			snprintf(vpath, sizeof(vpath), API "/networkSecurityGroups/%s", id);
			rc = oci_call(s, SVC_CORE, "DELETE", vpath, NULL, NULL, NULL, &dc, &resp,
			              &err);
			if (!rc)
				isc_log(ISC_LOG_INFO,
				        "oci: tenant network security group %s deleted (no VNIC)",
				        dn ? dn : id);
			else if (rc == ISC_ENOTFOUND || rc == ISC_ECONFLICT || rc == ISC_ETRANSIENT)
				rc = 0; /* gone already, or a VNIC still going: the next sweep */
		}
		json_decref(vnics);
		if (rc)
			break;
	}
	json_decref(list);
	isc_http_response_cleanup(&resp);
	if (rc)
		isc_log(ISC_LOG_WARN, "oci: tenant NSG reconcile: %s (next describe retries)",
		        err.msg);
	else
		isc_sweep_done(scope, NULL, 0, s->clock->now_ms(s->clock->ctx));
}

/* ---- launch_gang ---- */

/* The availability domains of the region (Identity ListAvailabilityDomains), as a JSON array. */
static int list_ads(struct oci_session *s, json_t **out, struct isc_err *err)
{
	struct isc_http_response resp;
	struct call_ctx cc = {"ListAvailabilityDomains"};
	char path[1024] = API "/availabilityDomains";
	int rc;

	if (query_add(path, sizeof(path), "compartmentId", s->cfg.tenancy))
		return isc_err_set(err, ISC_EINVALID, "ListAvailabilityDomains: request too long");
	isc_http_response_init(&resp);
	rc = oci_call_json(s, SVC_IDENTITY, "GET", path, NULL, NULL, &cc, &resp, out, err);
	isc_http_response_cleanup(&resp);
	if (!rc && !json_is_array(*out)) {
		json_decref(*out);
		*out = NULL;
		rc = isc_err_set(err, ISC_EINVALID, "ListAvailabilityDomains: not a list");
	}
	return rc;
}

/*
 * The AD name for a catalog zone: exact, or the tenancy-prefixed name whose
 * part after ':' equals it ignoring case ("US-ASHBURN-AD-1" ->
 * "Uocm:US-ASHBURN-AD-1"). NULL if the region has no such AD.
 */
static const char *ad_for_zone(const json_t *ads, const char *zone)
{
	size_t i;
	const json_t *a;
	json_array_foreach(ads, i, a)
	{
		const char *name = json_string_value(json_object_get(a, "name"));
		const char *tail;
		if (!name)
			continue;
		tail = strrchr(name, ':');
		tail = tail ? tail + 1 : name;
		if (!strcmp(name, zone) || !strcasecmp(tail, zone))
			return name;
	}
	return NULL;
}

/* Finds the live instance created with retry token `token` (its isc:token tag). */
static int find_by_token(struct oci_session *s, const char *token, struct isc_node_info *ni,
                         int *found, struct isc_err *err)
{
	json_t *all = NULL, *inst;
	size_t i;
	int rc = list_instances(s, &all, err);

	*found = 0;
	json_array_foreach(rc ? NULL : all, i, inst)
	{
		struct isc_node_info x;
		if (isc_oci_parse_instance(inst, &x) == 0 && strcmp(x.client_token, token) == 0 &&
		    (x.state == ISC_NODE_PENDING || x.state == ISC_NODE_RUNNING)) {
			*ni = x;
			*found = 1;
			break;
		}
	}
	json_decref(all);
	return rc;
}

enum ad_outcome { AD_OK, AD_NEXT, AD_STOP };

/* What one node's LaunchInstance came to. */
enum node_outcome {
	N_NOT_TRIED,   /* another node failed first */
	N_UP,          /* launched (or handed back by its retry token), pending or running */
	N_LISTED_GONE, /* handed back already TERMINATING/TERMINATED */
	N_INVALIDATED, /* 409 InvalidatedRetryToken: look it up by its token */
	N_FAILED,      /* rc and err say why */
};

struct node_job {
	enum node_outcome outcome;
	int rc;
	struct isc_err err;
	struct isc_node_info info;
	char token[65];
};

/* One AD's launches, shared by the workers. */
struct ad_run {
	struct oci_session *s;
	const struct isc_launch_spec *spec;
	const char *ad, *cluster;
	const char *compute_cluster_id; /* the gang's compute cluster in this AD, or NULL */
	struct node_job *jobs;
	pthread_mutex_t lock;
	unsigned next; /* the next node index to launch */
	int stop;      /* a node failed: launch no more */
};

static void launch_node(struct ad_run *r, struct isc_http_client *http, unsigned i)
{
	const struct isc_launch_spec *spec = r->spec;
	struct oci_session *s = r->s;
	struct node_job *j = &r->jobs[i];
	struct isc_oci_launch l = {0};
	struct isc_kv tags[16];
	struct isc_http_response resp;
	struct call_ctx cc = {"LaunchInstance"};
	char name[300], *body = NULL;
	json_t *inst = NULL;
	int rc;

	cc.http = http;
	isc_oci_retry_token(spec->idempotency_token, r->ad, i, j->token, NULL);
	snprintf(name, sizeof(name), "isc-%s-%u", r->cluster[0] ? r->cluster : "node", i);
	l.ad = r->ad;
	l.compartment_id = s->compartment_id;
	l.shape = spec->instance_type;
	l.image_id = s->image_id;
	l.subnet_id = s->subnet_id;
	l.display_name = name;
	l.ssh_public_key = spec->ssh_public_key;
	l.user_data = spec->user_data;
	l.retry_token = j->token;
	l.preemptible = spec->spot;
	l.assign_public_ip = s->assign_public_ip;
	l.tags = spec->tags;
	l.n_tags = spec->n_tags;
	if (s->tenant_nsg[0] && spec->n_tags < 15) {
		/* The tenant on the node too: the NSG sweep reads its uses from the listing. */
		memcpy(tags, spec->tags, spec->n_tags * sizeof(*tags));
		tags[spec->n_tags] = (struct isc_kv){"isc:tenant", spec->tenant};
		l.tags = tags;
		l.n_tags = spec->n_tags + 1;
	}
	l.compute_cluster_id = r->compute_cluster_id;
	l.boot_volume_gb = s->disk_size_gb;
	l.nsg_id = s->tenant_nsg[0] ? s->tenant_nsg : NULL;
	j->outcome = N_FAILED;
	if ((j->rc = isc_oci_launch_body(&l, &body, &j->err)))
		return;
	isc_http_response_init(&resp);
	rc = oci_call_json(s, SVC_CORE, "POST", API "/instances", body, j->token, &cc, &resp, &inst,
	                   &j->err);
	if ((rc == ISC_EINVALID && resp.status >= 200 && resp.status < 300) ||
	    (!rc && isc_oci_parse_instance(inst, &j->info))) {
		/* OCI accepted the launch: the node may exist though we cannot read it, so the
		 * outcome is unknown and the same token must be asked again. */
		rc =
		    isc_err_set(&j->err, ISC_ETRANSIENT,
		                "LaunchInstance in %s was accepted (HTTP %ld) but its reply cannot "
		                "be read; the node may exist",
		                r->ad, resp.status);
	}
	free(body);
	isc_http_response_cleanup(&resp);
	json_decref(inst);
	j->rc = rc;
	if (rc == ISC_ECONFLICT && strcmp(cc.code, "InvalidatedRetryToken") == 0)
		j->outcome = N_INVALIDATED;
	else if (!rc && (j->info.state == ISC_NODE_PENDING || j->info.state == ISC_NODE_RUNNING))
		j->outcome = N_UP;
	else if (!rc)
		j->outcome = N_LISTED_GONE;
}

static void *ad_worker(void *arg)
{
	struct ad_run *r = arg;
	/* Its own client: the retry loop keeps per-call state in it. */
	struct isc_http_client http = r->s->http;

	for (;;) {
		unsigned i;
		pthread_mutex_lock(&r->lock);
		if (r->stop || r->next >= r->spec->count) {
			pthread_mutex_unlock(&r->lock);
			return NULL;
		}
		i = r->next++;
		pthread_mutex_unlock(&r->lock);
		launch_node(r, &http, i);
		if (r->jobs[i].outcome != N_UP) {
			pthread_mutex_lock(&r->lock);
			r->stop = 1;
			pthread_mutex_unlock(&r->lock);
		}
	}
}

/* Runs the launches of one AD on up to s->launch_parallelism threads (1: this one). */
static void run_launches(struct ad_run *r)
{
	unsigned n = r->s->launch_parallelism;
	pthread_t th[64];
	unsigned started = 0;

	if (n > r->spec->count)
		n = r->spec->count;
	for (unsigned k = 1; k < n && k < 64; k++)
		if (pthread_create(&th[started], NULL, ad_worker, r) == 0)
			started++;
	ad_worker(r);
	for (unsigned k = 0; k < started; k++)
		pthread_join(th[k], NULL);
}

/* Gives back every node of the AD that is, or may still be, up. */
static int rollback_jobs(struct oci_session *s, struct node_job *jobs, unsigned n,
                         struct isc_err *err)
{
	int first = 0;
	for (unsigned i = 0; i < n; i++) {
		int rc;
		if (jobs[i].outcome != N_UP && jobs[i].outcome != N_LISTED_GONE)
			continue;
		rc = terminate_one(s, jobs[i].info.id, first ? NULL : err);
		if (rc && !first)
			first = rc;
	}
	return first;
}

/*
 * Launches the gang in one AD: one LaunchInstance per node, up to
 * launch_parallelism at once (spec->before_zone hears of the AD first, as
 * zone_label: the spec's zone). AD_OK: nodes[0..count) are ours. AD_NEXT:
 * this AD cannot take the gang (whatever came up was terminated); `last`
 * says why. AD_STOP: give up with rc. A retryable failure leaves the
 * launched nodes in place: the broker repeats the launch with the same token
 * and the retry tokens hand them back (that wins over a capacity error of
 * another node, whose rollback could miss a node whose reply was lost).
 */
static enum ad_outcome launch_in_ad(struct oci_session *s, const struct isc_launch_spec *spec,
                                    const char *zone_label, const char *ad,
                                    struct isc_node_info *nodes, char *last, size_t last_cap,
                                    int *rc_out, struct isc_err *err)
{
	struct ad_run r = {0};
	struct node_job *jobs = calloc(spec->count, sizeof(*jobs));
	const struct node_job *retryable = NULL, *capacity = NULL, *gone = NULL, *other = NULL;
	enum ad_outcome out = AD_OK;
	/* Close together on RDMA: a compute cluster of the gang's own in this AD. */
	int clustered = s->compute_clusters && (spec->count >= 2 || spec->placement_token) &&
	                isc_oci_rdma_shape(spec->instance_type);
	char cc_token[65] = "", cc_id[256] = "";
	int rc;

	if (!jobs) {
		*rc_out = isc_err_set(err, ISC_ENOMEM, "out of memory");
		return AD_STOP;
	}
	r.s = s;
	r.spec = spec;
	r.ad = ad;
	r.cluster = "";
	r.jobs = jobs;
	pthread_mutex_init(&r.lock, NULL);
	for (size_t t = 0; t < spec->n_tags; t++)
		if (strcmp(spec->tags[t].key, ISC_TAG_CLUSTER) == 0)
			r.cluster = spec->tags[t].value;
	if (spec->before_zone)
		spec->before_zone(spec->before_zone_ctx, zone_label);
	if (clustered) {
		/* A replacement joins the compute cluster its gang's launch made in this AD (the
		 * same retry token returns it). */
		isc_oci_retry_token(spec->placement_token ? spec->placement_token
		                                          : spec->idempotency_token,
		                    ad, CLUSTER_TOKEN_INDEX, cc_token, NULL);
		isc_busy_names_add(&busy_clusters, cc_token, +1);
		if (spec->placement_token) {
			rc = find_cluster(s, ad, cc_token, cc_id, err);
			if (!rc && !cc_id[0])
				/* The gang's cluster is gone: the replacement cannot join it here.
				 */
				rc = isc_err_set(err, ISC_ECAPACITY,
				                 "the gang's compute cluster in %s is gone", ad);
		} else {
			rc = create_cluster(s, spec, ad, cc_token, cc_id, err);
		}
		if (rc) {
			isc_busy_names_add(&busy_clusters, cc_token, -1);
			pthread_mutex_destroy(&r.lock);
			free(jobs);
			if (err)
				isc_err_wrap(err, "availability domain %s", ad);
			*rc_out = rc;
			return AD_STOP;
		}
		r.compute_cluster_id = cc_id;
	}
	run_launches(&r);
	pthread_mutex_destroy(&r.lock);
	for (unsigned i = 0; i < spec->count; i++) {
		struct node_job *j = &jobs[i];
		if (j->outcome == N_INVALIDATED) {
			/* The token outlived its request: the node is ours if it still runs. */
			int found = 0;
			j->rc = find_by_token(s, j->token, &j->info, &found, &j->err);
			j->outcome = j->rc ? N_FAILED : found ? N_UP : N_NOT_TRIED;
			if (!j->rc && !found && !gone)
				gone = j; /* nothing of it is left to terminate */
		}
		if (j->outcome == N_LISTED_GONE && !gone)
			gone = j;
		if (j->outcome != N_FAILED)
			continue;
		if (isc_code_is_retryable(j->rc) && !retryable)
			retryable = j;
		else if (j->rc == ISC_ECAPACITY && !capacity)
			capacity = j;
		else if (!other && !isc_code_is_retryable(j->rc))
			other = j;
	}
	if (retryable) {
		rc = retryable->rc;
		if (err) {
			*err = retryable->err;
			isc_err_wrap(err, "availability domain %s, node %u", ad,
			             (unsigned)(retryable - jobs));
		}
		*rc_out = rc;
		out = AD_STOP;
	} else if (capacity || gone) {
		/* A node that is already gone: a replay of a gang rolled back before, or
		 * reclaimed at once. Either way this AD cannot hold the gang now. */
		if (capacity)
			snprintf(last, last_cap, "%s", capacity->err.msg);
		else
			snprintf(last, last_cap,
			         "LaunchInstance in %s: node %u is already terminated", ad,
			         (unsigned)(gone - jobs));
		out = AD_NEXT;
		if ((rc = rollback_jobs(s, jobs, spec->count, err))) {
			*rc_out = rc;
			out = AD_STOP;
		} else if (clustered && !spec->placement_token) {
			/* Empty now, or soon: an AD that holds no node gives its cluster back (a
			 * replacement's gang keeps its live members there). */
			struct isc_err ignored;
			int deleted;
			delete_cluster(s, cc_id, &deleted, &ignored);
		}
	} else if (other) {
		struct isc_err ignored;
		rollback_jobs(s, jobs, spec->count, &ignored);
		if (err) {
			*err = other->err;
			isc_err_wrap(err, "availability domain %s, node %u", ad,
			             (unsigned)(other - jobs));
		}
		*rc_out = other->rc;
		out = AD_STOP;
	} else {
		for (unsigned i = 0; i < spec->count; i++) {
			nodes[i] = jobs[i].info;
			isc_node_info_from_spec(&nodes[i], spec, jobs[i].token);
		}
	}
	if (clustered)
		isc_busy_names_add(&busy_clusters, cc_token, -1);
	free(jobs);
	return out;
}

static int launch_with_nsg(struct oci_session *s, const struct isc_launch_spec *spec,
                           struct isc_launch_result *out, struct isc_err *err);

static const char *broker_tag(const struct isc_launch_spec *spec)
{
	for (size_t i = 0; i < spec->n_tags; i++)
		if (strcmp(spec->tags[i].key, ISC_TAG_BROKER) == 0)
			return spec->tags[i].value;
	return NULL;
}

static int oci_launch_gang(struct isc_provider_session *ps, const struct isc_launch_spec *spec,
                           struct isc_launch_result *out, struct isc_err *err)
{
	struct oci_session *s = impl(ps);
	char token[65];
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (!spec->instance_type || !spec->instance_type[0] || spec->count == 0)
		return isc_err_set(err, ISC_EINVALID, "launch: a shape and a count are required");
	if (spec->count > MAX_NODES)
		return isc_err_set(err, ISC_EINVALID, "launch: %u nodes is too many", spec->count);
	if ((rc = isc_oci_retry_token(spec->idempotency_token, "x", 0, token, err)))
		return rc;
	if (!s->subnet_id || !s->image_id)
		return isc_err_set(err, ISC_EINVALID,
		                   "launch: set subnet_id and image_id in [providers.oci] "
		                   "(the private subnet and the image of the nodes)");
	if (spec->tenant && s->tenant_isolation) {
		/* The tenant's own NSG instead of the subnet-wide training rule (issue 42). */
		char vcn[256], name[256];
		if ((rc = isc_oci_tenant_nsg_name(broker_tag(spec), spec->tenant, name, err)) ||
		    (rc = check_tenant_subnet(s, vcn, err)))
			return rc;
		isc_busy_names_add(&busy_nsgs, name, +1);
		rc = ensure_tenant_nsg(s, spec, broker_tag(spec), vcn, name, err);
		if (!rc)
			rc = launch_with_nsg(s, spec, out, err);
		s->tenant_nsg[0] = '\0';
		isc_busy_names_add(&busy_nsgs, name, -1);
		return rc;
	}
	if ((rc = ensure_training_rule(s, err)))
		return rc;
	return launch_with_nsg(s, spec, out, err);
}

/* The rest of a launch, once its network is settled (s->tenant_nsg, or the training rule). */
static int launch_with_nsg(struct oci_session *s, const struct isc_launch_spec *spec,
                           struct isc_launch_result *out, struct isc_err *err)
{
	struct isc_node_info *nodes = NULL;
	json_t *ads = NULL;
	char last[ISC_ERR_MSG_MAX] = "";
	size_t tried = 0, n_try;
	int rc = 0;

	if ((rc = list_ads(s, &ads, err)))
		return rc;
	nodes = calloc(spec->count, sizeof(*nodes));
	if (!nodes) {
		json_decref(ads);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	/* Without zones from the catalog, every AD of the region in the cloud's order. */
	n_try = spec->n_zones ? spec->n_zones : json_array_size(ads);
	rc = ISC_ECAPACITY;
	for (size_t z = 0; z < n_try; z++) {
		const char *ad =
		    spec->n_zones
		        ? ad_for_zone(ads, spec->zones[z])
		        : json_string_value(json_object_get(json_array_get(ads, z), "name"));
		int stop_rc = 0;
		if (!ad) {
			snprintf(last, sizeof(last), "region %s has no availability domain %s",
			         s->cfg.region, spec->zones[z]);
			continue;
		}
		tried++;
		memset(nodes, 0, spec->count * sizeof(*nodes));
		switch (launch_in_ad(s, spec, spec->n_zones ? spec->zones[z] : ad, ad, nodes, last,
		                     sizeof(last), &stop_rc, err)) {
		case AD_OK:
			snprintf(out->zone, sizeof(out->zone), "%s", ad);
			isc_oci_retry_token(spec->idempotency_token, ad, 0, out->token, NULL);
			out->nodes = nodes;
			out->n_nodes = spec->count;
			nodes = NULL;
			rc = 0;
			goto done;
		case AD_NEXT:
			continue;
		case AD_STOP:
			rc = stop_rc;
			goto done;
		}
	}
	isc_err_set(err, ISC_ECAPACITY,
	            "no capacity for %u x %s in %zu availability domain(s) of %s; last: %s",
	            spec->count, spec->instance_type, tried, s->cfg.region, last);
done:
	free(nodes);
	json_decref(ads);
	return rc;
}

/* The [providers.oci] keys (docs/config.md). */
static const char *const oci_setting_keys[] = {
    "compartment_id",
    "subnet_id",
    "image_id",
    "manage_security_list",
    "tenant_isolation",
    "tenant_ssh_cidr",
    "tenant_ssh_port",
    "assign_public_ip",
    "compute_cluster_id",
    "compute_clusters",
    "disk_size_gb",
    "launch_parallelism",
    "endpoint",
    "endpoint_core",
    "endpoint_identity",
    "profile",
    "config_file",
    "allow_insecure_endpoint",
    "price_list_endpoint", /* read by prices/lists.c: the public price list */
    "live_prices",         /* prices/lists.c: read this cloud's price list (opt-in) */
    NULL,
};

/* ---- capacity (issue 43): CreateComputeCapacityReport ---- */

/*
 * One CreateComputeCapacityReport per AD of q->zones (every AD of the region when q
 * names none) for all of q's shapes. The compartment is the tenancy: the API reference
 * says it "should always be the root compartment", whatever compartment_id launches use.
 * The report is a hint: dstack saw it call H100 bare metal out of capacity while
 * launches succeeded, and the ranking never reads it as a certain no.
 */
static int oci_capacity(struct isc_provider_session *ps, const struct isc_capacity_query *q,
                        struct isc_capacity_fact **out, size_t *n_out, struct isc_err *err)
{
	struct oci_session *s = ps->impl;
	struct isc_capacity_fact *v = NULL;
	json_t *ads = NULL;
	size_t n = 0, cap = 0, nads;
	int rc;

	*out = NULL;
	*n_out = 0;
	if (q->n == 0)
		return 0;
	if ((rc = list_ads(s, &ads, err)))
		return rc;
	nads = q->n_zones ? q->n_zones : json_array_size(ads);
	for (size_t z = 0; z < nads && !rc; z++) {
		const char *ad =
		    q->n_zones ? ad_for_zone(ads, q->zones[z])
		               : json_string_value(json_object_get(json_array_get(ads, z), "name"));
		const char *zone_name = q->n_zones ? q->zones[z] : ad;
		struct isc_http_response resp;
		struct call_ctx cc = {"CreateComputeCapacityReport"};
		json_t *body, *arr, *reply = NULL, *item;
		char *text;
		size_t i;

		if (!ad)
			continue; /* a catalog AD this region does not have: nothing to ask */
		arr = json_array();
		for (size_t t = 0; t < q->n; t++)
			json_array_append_new(
			    arr, json_pack("{s:s}", "instanceShape", q->instance_types[t]));
		body = json_pack("{s:s, s:s, s:o}", "compartmentId", s->cfg.tenancy,
		                 "availabilityDomain", ad, "shapeAvailabilities", arr);
		text = body ? json_dumps(body, JSON_COMPACT) : NULL;
		json_decref(body);
		if (!text) {
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
			break;
		}
		isc_http_response_init(&resp);
		rc = oci_call_json(s, SVC_CORE, "POST", API "/computeCapacityReports", text, NULL,
		                   &cc, &resp, &reply, err);
		isc_http_response_cleanup(&resp);
		free(text);
		json_array_foreach(rc ? NULL : json_object_get(reply, "shapeAvailabilities"), i,
		                   item)
		{
			struct isc_capacity_fact f = {.target = q->target};
			const char *shape =
			    json_string_value(json_object_get(item, "instanceShape"));
			const char *st =
			    json_string_value(json_object_get(item, "availabilityStatus"));
			json_t *cnt = json_object_get(item, "availableCount");
			if (!shape || !st)
				continue;
			snprintf(f.source, sizeof(f.source), "oci-capacity");
			snprintf(f.instance_type, sizeof(f.instance_type), "%s", shape);
			snprintf(f.zone, sizeof(f.zone), "%s", zone_name);
			snprintf(f.detail, sizeof(f.detail), "%s", st);
			f.value = json_is_integer(cnt) ? json_integer_value(cnt) : 0;
			if (cap == n) {
				size_t nc = cap ? cap * 2 : 16;
				struct isc_capacity_fact *nv = realloc(v, nc * sizeof(*nv));
				if (!nv) {
					rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
					break;
				}
				v = nv;
				cap = nc;
			}
			v[n++] = f;
		}
		json_decref(reply);
	}
	json_decref(ads);
	if (rc) {
		free(v);
		return rc;
	}
	*out = v;
	*n_out = n;
	return 0;
}

const struct isc_provider isc_provider_oci = {
    .name = "oci",
    .setting_keys = oci_setting_keys,
    .session_new = oci_session_new,
    .session_free = oci_session_free,
    .check_credentials = oci_check_credentials,
    .credential_keys = isc_oci_credential_keys,
    .credentials_valid = isc_oci_credentials_valid,
    /* OCI has no spot market: preemptible capacity sells at a fixed discount of the list
     * price, which the catalog holds; prices/ counts such a provider as list-only. */
    .refresh_prices = NULL,
    .launch_gang = oci_launch_gang,
    .describe = oci_describe,
    .terminate = oci_terminate,
    .capacity = oci_capacity,
};
