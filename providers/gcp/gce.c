/*
 * Compute Engine v1 JSON: the error envelope, Operations, instance lists
 * (plain and aggregated) and what their codes mean to the broker. Replies are
 * untrusted: every field is checked for type, copied with a bound, and a
 * missing field is an empty string, never a crash.
 */
#include "providers/gcp/gcp_int.h"

#include <jansson.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *jstr(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s ? s : "";
}

/* The last path segment of a resource URL ("…/zones/us-central1-a" -> "us-central1-a"). */
static void last_segment(const char *url, char *out, size_t cap)
{
	const char *p = strrchr(url, '/');
	snprintf(out, cap, "%s", p ? p + 1 : url);
}

static json_t *load(const char *body, size_t len)
{
	return json_loadb(body ? body : "", len, 0, NULL);
}

int64_t isc_gce_time_ms(const char *s)
{
	int y, mo, d, h, mi, sec, n = 0;
	long frac_ms = 0;
	struct tm tm = {0};
	int64_t t;
	const char *p;

	if (!s || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &n) != 6)
		return -1;
	p = s + n;
	if (*p == '.') {
		int digits = 0;
		for (p++; isdigit((unsigned char)*p); p++, digits++)
			if (digits < 3)
				frac_ms = frac_ms * 10 + (*p - '0');
		for (; digits < 3; digits++)
			frac_ms *= 10;
	}
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	t = (int64_t)timegm(&tm);
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int oh, om;
		if (sscanf(p + 1, "%2d:%2d", &oh, &om) != 2)
			return -1;
		/* local = UTC + offset, so UTC = local - offset */
		t -= (*p == '+' ? 1 : -1) * (int64_t)(oh * 3600 + om * 60);
		p += 6;
	} else {
		return -1;
	}
	return *p ? -1 : t * 1000 + frac_ms;
}

int isc_gce_parse_error(const char *body, size_t len, struct isc_gce_error *out)
{
	json_t *root = load(body, len), *e, *errs;
	memset(out, 0, sizeof(*out));
	e = json_object_get(root, "error");
	if (!json_is_object(e)) {
		json_decref(root);
		return ISC_EINVALID;
	}
	out->code = (long)json_integer_value(json_object_get(e, "code"));
	snprintf(out->status, sizeof(out->status), "%s", jstr(e, "status"));
	snprintf(out->message, sizeof(out->message), "%s", jstr(e, "message"));
	errs = json_object_get(e, "errors");
	if (json_is_array(errs) && json_array_size(errs) > 0) {
		json_t *first = json_array_get(errs, 0);
		snprintf(out->reason, sizeof(out->reason), "%s", jstr(first, "reason"));
		if (!out->message[0])
			snprintf(out->message, sizeof(out->message), "%s", jstr(first, "message"));
	}
	/* google.rpc.Status details carry the reason in ErrorInfo on newer front ends. */
	if (!out->reason[0]) {
		json_t *det = json_object_get(e, "details");
		for (size_t i = 0; json_is_array(det) && i < json_array_size(det); i++) {
			const char *r = jstr(json_array_get(det, i), "reason");
			if (r[0]) {
				snprintf(out->reason, sizeof(out->reason), "%s", r);
				break;
			}
		}
	}
	json_decref(root);
	return 0;
}

int isc_gce_classify(long status, const char *reason)
{
	static const struct {
		const char *reason;
		int code;
	} table[] = {
	    {"insufficientCapacity", ISC_ECAPACITY},
	    {"resourcePoolExhausted", ISC_ECAPACITY},
	    {"ZONE_RESOURCE_POOL_EXHAUSTED", ISC_ECAPACITY},
	    {"quotaExceeded", ISC_EQUOTA},
	    {"QUOTA_EXCEEDED", ISC_EQUOTA},
	    {"limitExceeded", ISC_EQUOTA},
	    {"rateLimitExceeded", ISC_ETHROTTLED},
	    {"userRateLimitExceeded", ISC_ETHROTTLED},
	    {"RATE_LIMIT_EXCEEDED", ISC_ETHROTTLED},
	    {"backendError", ISC_ETRANSIENT},
	    {"internalError", ISC_ETRANSIENT},
	    {"authError", ISC_EAUTH},
	    {"required", ISC_EAUTH},
	    {"forbidden", ISC_EAUTH},
	    {"insufficientPermissions", ISC_EAUTH},
	    {"accessNotConfigured", ISC_EAUTH},
	    {"SERVICE_DISABLED", ISC_EAUTH},
	    {"IAM_PERMISSION_DENIED", ISC_EAUTH},
	    {"notFound", ISC_ENOTFOUND},
	    {"alreadyExists", ISC_ECONFLICT},
	    {"conflict", ISC_ECONFLICT},
	};
	if (status >= 200 && status < 300)
		return 0;
	for (size_t i = 0; reason && i < sizeof(table) / sizeof(table[0]); i++)
		if (strcmp(reason, table[i].reason) == 0)
			return table[i].code;
	if (status == 429)
		return ISC_ETHROTTLED;
	if (status >= 500)
		return ISC_ETRANSIENT;
	if (status == 401 || status == 403)
		return ISC_EAUTH;
	if (status == 404)
		return ISC_ENOTFOUND;
	if (status == 409)
		return ISC_ECONFLICT;
	return ISC_EINVALID;
}

int isc_gce_classify_op(const char *code)
{
	if (!code || !code[0])
		return 0;
	if (strstr(code, "RESOURCE_POOL_EXHAUSTED") || strcmp(code, "RESOURCE_NOT_AVAILABLE") == 0)
		return ISC_ECAPACITY; /* ZONE_/REGION_..., _WITH_DETAILS */
	if (strcmp(code, "QUOTA_EXCEEDED") == 0)
		return ISC_EQUOTA;
	if (strcmp(code, "RATE_LIMIT_EXCEEDED") == 0)
		return ISC_ETHROTTLED;
	if (strcmp(code, "RESOURCE_ALREADY_EXISTS") == 0)
		return ISC_ECONFLICT;
	if (strcmp(code, "RESOURCE_NOT_FOUND") == 0)
		return ISC_ENOTFOUND;
	if (strcmp(code, "PERMISSIONS_ERROR") == 0 || strcmp(code, "FORBIDDEN") == 0)
		return ISC_EAUTH;
	return ISC_EINVALID;
}

static void operation_from(json_t *o, struct isc_gce_operation *op)
{
	json_t *errs = json_object_get(json_object_get(o, "error"), "errors");
	memset(op, 0, sizeof(*op));
	snprintf(op->name, sizeof(op->name), "%s", jstr(o, "name"));
	snprintf(op->status, sizeof(op->status), "%s", jstr(o, "status"));
	snprintf(op->type, sizeof(op->type), "%s", jstr(o, "operationType"));
	last_segment(jstr(o, "zone"), op->zone, sizeof(op->zone));
	last_segment(jstr(o, "targetLink"), op->target, sizeof(op->target));
	if (json_is_array(errs) && json_array_size(errs) > 0) {
		json_t *first = json_array_get(errs, 0);
		snprintf(op->error_code, sizeof(op->error_code), "%s", jstr(first, "code"));
		snprintf(op->error_message, sizeof(op->error_message), "%s",
		         jstr(first, "message"));
		if (!op->error_code[0])
			snprintf(op->error_code, sizeof(op->error_code), "UNKNOWN");
	}
	op->http_error = (long)json_integer_value(json_object_get(o, "httpErrorStatusCode"));
	op->insert_ms = isc_gce_time_ms(jstr(o, "insertTime"));
	if (op->insert_ms < 0)
		op->insert_ms = 0;
}

int isc_gce_parse_operation(const char *body, size_t len, struct isc_gce_operation *out,
                            struct isc_err *err)
{
	json_t *root = load(body, len);
	memset(out, 0, sizeof(*out));
	if (!json_is_object(root) || !json_is_string(json_object_get(root, "name")) ||
	    !json_is_string(json_object_get(root, "status"))) {
		json_decref(root);
		return isc_err_set(err, ISC_EINVALID, "Compute Engine: reply is not an Operation");
	}
	operation_from(root, out);
	json_decref(root);
	return 0;
}

/*
 * Calls fn for every element of the array `field` in a list (items[]) or an
 * aggregated list (items{"zones/Z": {field[]}}).
 */
static int each_item(json_t *root, const char *field, int (*fn)(json_t *, void *), void *ctx)
{
	json_t *items = json_object_get(root, "items");
	int rc = 0;
	if (json_is_array(items)) {
		for (size_t i = 0; i < json_array_size(items) && !rc; i++)
			rc = fn(json_array_get(items, i), ctx);
	} else if (json_is_object(items)) {
		const char *scope;
		json_t *v;
		json_object_foreach(items, scope, v)
		{
			json_t *arr = json_object_get(v, field);
			for (size_t i = 0; json_is_array(arr) && i < json_array_size(arr) && !rc;
			     i++)
				rc = fn(json_array_get(arr, i), ctx);
			if (rc)
				break;
		}
	}
	return rc;
}

static char *next_token(json_t *root)
{
	const char *t = json_string_value(json_object_get(root, "nextPageToken"));
	return t && t[0] ? strdup(t) : NULL;
}

/* A growing array of `size`-byte elements that each_item callbacks append to. */
struct acc {
	void *v;
	size_t n, cap, size;
};

/* The next free element of a (zeroed), or NULL when out of memory. */
static void *acc_next(struct acc *a)
{
	char *slot;
	if (a->n == a->cap) {
		size_t ncap = a->cap ? a->cap * 2 : 16;
		void *g = realloc(a->v, ncap * a->size);
		if (!g)
			return NULL;
		a->v = g;
		a->cap = ncap;
	}
	slot = (char *)a->v + a->n++ * a->size;
	memset(slot, 0, a->size);
	return slot;
}

/*
 * Appends the elements of `field` of a (plain or aggregated) list reply to a
 * through fn; *next_page is its nextPageToken (owned) or NULL. On failure a
 * keeps what it had; the caller still owns it.
 */
static int parse_list(const char *body, size_t len, const char *field, int (*fn)(json_t *, void *),
                      struct acc *a, char **next_page, struct isc_err *err)
{
	json_t *root = load(body, len);
	int rc;
	if (next_page)
		*next_page = NULL;
	if (!json_is_object(root)) {
		json_decref(root);
		return isc_err_set(err, ISC_EINVALID, "Compute Engine: %s list is not JSON", field);
	}
	rc = each_item(root, field, fn, a);
	if (!rc && next_page)
		*next_page = next_token(root);
	json_decref(root);
	return rc ? isc_err_set(err, ISC_ENOMEM, "out of memory") : 0;
}

static int add_op(json_t *o, void *vctx)
{
	struct isc_gce_operation *op;
	if (!json_is_object(o))
		return 0;
	if (!(op = acc_next(vctx)))
		return ISC_ENOMEM;
	operation_from(o, op);
	return 0;
}

int isc_gce_parse_operations(const char *body, size_t len, struct isc_gce_operation **out,
                             size_t *n, char **next_page, struct isc_err *err)
{
	struct acc a = {*out, *n, *n, sizeof(**out)};
	int rc = parse_list(body, len, "operations", add_op, &a, next_page, err);
	*out = a.v;
	*n = a.n;
	return rc;
}

static enum isc_node_state node_state(const char *status)
{
	static const struct {
		const char *status;
		enum isc_node_state state;
	} map[] = {
	    {"PROVISIONING", ISC_NODE_PENDING},
	    {"STAGING", ISC_NODE_PENDING},
	    {"PENDING", ISC_NODE_PENDING},
	    {"REPAIRING", ISC_NODE_PENDING},
	    {"RUNNING", ISC_NODE_RUNNING},
	    {"STOPPING", ISC_NODE_STOPPING},
	    {"PENDING_STOP", ISC_NODE_STOPPING},
	    {"SUSPENDING", ISC_NODE_STOPPING},
	    {"STOPPED", ISC_NODE_STOPPED},
	    {"SUSPENDED", ISC_NODE_STOPPED},
	    {"DEPROVISIONING", ISC_NODE_SHUTTING_DOWN},
	    {"TERMINATED", ISC_NODE_TERMINATED},
	};
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (strcmp(status, map[i].status) == 0)
			return map[i].state;
	return ISC_NODE_PENDING; /* a status newer than this code: not yet usable */
}

/* nvidia-tesla-t4 -> T4, nvidia-l4 -> L4, anything else as it is. */
static void accel_model(const char *type, char *out, size_t cap)
{
	char name[64];
	const char *p;
	last_segment(type, name, sizeof(name));
	p = name;
	if (strncmp(p, "nvidia-tesla-", 13) == 0)
		p += 13;
	else if (strncmp(p, "nvidia-", 7) == 0)
		p += 7;
	snprintf(out, cap, "%s", p);
	for (char *c = out; *c; c++)
		*c = (char)toupper((unsigned char)*c);
}

static void node_from(json_t *o, struct isc_node_info *ni)
{
	json_t *labels = json_object_get(o, "labels");
	json_t *nics = json_object_get(o, "networkInterfaces");
	json_t *sched = json_object_get(o, "scheduling");
	json_t *acc = json_object_get(o, "guestAccelerators");
	const char *created;

	memset(ni, 0, sizeof(*ni));
	snprintf(ni->id, sizeof(ni->id), "%s", jstr(o, "name"));
	ni->state = node_state(jstr(o, "status"));
	last_segment(jstr(o, "zone"), ni->zone, sizeof(ni->zone));
	last_segment(jstr(o, "machineType"), ni->instance_type, sizeof(ni->instance_type));
	if (json_is_array(acc) && json_array_size(acc) > 0) {
		json_t *a0 = json_array_get(acc, 0);
		char model[64];
		accel_model(jstr(a0, "acceleratorType"), model, sizeof(model));
		size_t l = strlen(ni->instance_type);
		snprintf(ni->instance_type + l, sizeof(ni->instance_type) - l, "+%sx%lld", model,
		         (long long)json_integer_value(json_object_get(a0, "acceleratorCount")));
	}
	if (json_is_array(nics) && json_array_size(nics) > 0) {
		json_t *nic = json_array_get(nics, 0);
		json_t *ac = json_object_get(nic, "accessConfigs");
		snprintf(ni->private_ip, sizeof(ni->private_ip), "%s", jstr(nic, "networkIP"));
		for (size_t i = 0; json_is_array(ac) && i < json_array_size(ac); i++) {
			const char *nat = jstr(json_array_get(ac, i), "natIP");
			if (nat[0]) {
				snprintf(ni->public_ip, sizeof(ni->public_ip), "%s", nat);
				break;
			}
		}
	}
	ni->spot = strcmp(jstr(sched, "provisioningModel"), "SPOT") == 0 ||
	           json_is_true(json_object_get(sched, "preemptible"));
	created = jstr(o, "creationTimestamp");
	ni->launched_at_ms = isc_gce_time_ms(created);
	if (ni->launched_at_ms < 0)
		ni->launched_at_ms = 0;
	snprintf(ni->broker_id, sizeof(ni->broker_id), "%s", jstr(labels, "isc-broker"));
	snprintf(ni->cluster_id, sizeof(ni->cluster_id), "%s", jstr(labels, "isc-cluster"));
	snprintf(ni->experiment_id, sizeof(ni->experiment_id), "%s",
	         jstr(labels, "isc-experiment"));
	snprintf(ni->client_token, sizeof(ni->client_token), "%s", jstr(labels, "isc-request"));
}

static int add_node(json_t *o, void *vctx)
{
	struct isc_node_info *ni;
	if (!json_is_object(o) || !json_is_string(json_object_get(o, "name")))
		return 0;
	if (!(ni = acc_next(vctx)))
		return ISC_ENOMEM;
	node_from(o, ni);
	return 0;
}

int isc_gce_get_gone(long http_status, const char *body, size_t len)
{
	struct isc_gce_error e;
	json_t *root;
	int gone;

	if (http_status == 404)
		return isc_gce_parse_error(body, len, &e) == 0 && strcmp(e.reason, "notFound") == 0;
	if (http_status != 200)
		return 0;
	root = load(body, len);
	gone = json_is_object(root) && strcmp(jstr(root, "status"), "TERMINATED") == 0;
	json_decref(root);
	return gone;
}

int isc_gce_parse_instances(const char *body, size_t len, struct isc_node_info **nodes, size_t *n,
                            char **next_page, struct isc_err *err)
{
	struct acc a = {*nodes, *n, *n, sizeof(**nodes)};
	int rc = parse_list(body, len, "instances", add_node, &a, next_page, err);
	*nodes = a.v;
	*n = a.n;
	return rc;
}

static int add_ref(json_t *o, void *vctx)
{
	json_t *id = json_object_get(o, "id");
	struct isc_gce_ref *r;
	if (!json_is_object(o) || !json_is_string(json_object_get(o, "name")))
		return 0;
	if (!(r = acc_next(vctx)))
		return ISC_ENOMEM;
	snprintf(r->name, sizeof(r->name), "%s", jstr(o, "name"));
	last_segment(jstr(o, "zone"), r->zone, sizeof(r->zone));
	/* uint64 ids travel as strings in Compute JSON; accept a number too. */
	if (json_is_integer(id))
		snprintf(r->id, sizeof(r->id), "%lld", (long long)json_integer_value(id));
	else
		snprintf(r->id, sizeof(r->id), "%s", jstr(o, "id"));
	return 0;
}

int isc_gce_parse_refs(const char *body, size_t len, struct isc_gce_ref **out, size_t *n,
                       char **next_page, struct isc_err *err)
{
	struct acc a = {*out, *n, *n, sizeof(**out)};
	int rc = parse_list(body, len, "instances", add_ref, &a, next_page, err);
	*out = a.v;
	*n = a.n;
	return rc;
}
