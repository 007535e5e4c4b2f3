/*
 * The GCP driver's compact placement (providers/gcp/gcp_session.h): a compact placement
 * policy per multi-node gang of an accelerator series that takes one, made before the
 * gang's bulkInsert, and the sweep that deletes those no live node uses.
 */
#include "common/log.h"
#include "providers/gcp/gcp_session.h"

#include <jansson.h>
#include <openssl/evp.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
struct isc_busy_names gcp_busy_policies = ISC_BUSY_NAMES_INIT;

/* "us-central1-a" -> "us-central1". */
void gcp_region_of(const char *zone, char out[64])
{
	const char *dash = strrchr(zone, '-');
	snprintf(out, 64, "%.*s", dash ? (int)(dash - zone) : (int)strlen(zone), zone);
}

/*
 * An Operation polled until DONE, in `region` (resource policies) or global (region NULL:
 * firewalls), with a doubling wait up to 4 s and op_timeout_ms in all; its error, if
 * any, as rc.
 */
int gcp_op_done(struct gcp_session *s, const char *region, struct isc_http_response *r,
                const char *what, struct isc_err *err)
{
	struct isc_gce_operation op;
	int64_t deadline = gcp_now_ms(s) + s->op_timeout_ms;
	long delay = 250;
	int rc = isc_gce_parse_operation(r->body.data, r->body.len, &op, err);

	while (!rc && strcmp(op.status, "DONE") != 0) {
		struct isc_http_response resp;
		char *url;
		if (gcp_now_ms(s) >= deadline)
			return isc_err_set(err, ISC_ETRANSIENT, "%s: operation %s not DONE", what,
			                   op.name);
		s->clock->sleep_ms(s->clock->ctx, delay);
		if (delay < 4000)
			delay *= 2;
		url = region ? gcp_api_url(s, "regions/%s/operations/%s", region, op.name)
		             : gcp_api_url(s, "global/operations/%s", op.name);
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

int gcp_insert(struct gcp_session *s, const char *region, const char *what, json_t *root, char *url,
               struct isc_err *err)
{
	char reason[64];
	char *body = root ? json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	struct isc_http_response resp;
	int rc;

	json_decref(root);
	if (!body || !url) {
		free(body);
		free(url);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	isc_http_response_init(&resp);
	rc = gcp_call_reason(s, "POST", what, url, body, &resp, reason, err);
	if (rc && strcmp(reason, "alreadyExists") == 0)
		rc = 0;
	else if (!rc)
		rc = gcp_op_done(s, region, &resp, what, err);
	isc_http_response_cleanup(&resp);
	free(body);
	free(url);
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
int gcp_create_policy(struct gcp_session *s, const struct isc_launch_spec *spec, const char *region,
                      const char *name, struct isc_err *err)
{
	const char *broker = gcp_tag_value(spec, ISC_TAG_BROKER),
	           *cluster = gcp_tag_value(spec, ISC_TAG_CLUSTER);
	char rid[37], *desc = NULL;
	json_t *root;

	isc_gcp_request_id(spec->idempotency_token, "compact-placement-policy", rid);
	if (asprintf(&desc, "isc:broker=%s isc:cluster=%s", broker ? broker : "",
	             cluster ? cluster : "") < 0)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	root = json_pack("{s:s, s:s, s:{s:s, s:i}}", "name", name, "description", desc,
	                 "groupPlacementPolicy", "collocation", "COLLOCATED",
	                 "availabilityDomainCount", 1);
	free(desc);
	/* alreadyExists: this gang's, from an earlier try */
	return gcp_insert(s, region, "resourcePolicies.insert", root,
	                  gcp_api_url(s, "regions/%s/resourcePolicies?requestId=%s", region, rid),
	                  err);
}

/* resourcePolicies.delete; *deleted = 0 while a VM still uses it (400 resourceInUse...). */
int gcp_delete_policy(struct gcp_session *s, const char *region, const char *name, int *deleted,
                      struct isc_err *err)
{
	struct isc_http_response resp;
	char reason[64], *url = gcp_api_url(s, "regions/%s/resourcePolicies/%s", region, name);
	int rc;

	*deleted = 0;
	if (!url)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	isc_http_response_init(&resp);
	rc = gcp_call_reason(s, "DELETE", "resourcePolicies.delete", url, NULL, &resp, reason, err);
	if (!rc)
		rc = gcp_op_done(s, region, &resp, "resourcePolicies.delete", err);
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

void gcp_policy_sweep_cleanup(struct policy_sweep *sw)
{
	for (size_t i = 0; i < sw->n_vanished; i++)
		free(sw->vanished[i]);
	free(sw->vanished);
	isc_sweep_cleanup(&sw->sweep);
}

/* Fills sw from the listing; 1 when this describe sweeps (providers/sweep.h). */
int gcp_policies_sweep_due(const struct gcp_session *s, const char *broker_id,
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
	return isc_sweep_ready(&sw->sweep, gcp_now_ms(s));
}

void gcp_reconcile_policies(struct gcp_session *s, const char *broker_id,
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
		url = gcp_api_url(s, "regions/%s/resourcePolicies?maxResults=%d%s%s", s->region,
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
			if (used || isc_busy_names_has(&gcp_busy_policies, name)) {
				isc_sweep_keep(&sw->sweep, d + pl); /* a policy of it stays */
				continue;
			}
			if (deletes == POLICY_DELETES_PER_SWEEP) {
				left++;
			} else {
				deletes++;
				if ((rc = gcp_delete_policy(s, s->region, name, &deleted, &err)))
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
		isc_sweep_finish(&sw->sweep, complete, gcp_now_ms(s));
		seen_swept(sw->sweep.scope, sw->sweep.gone, sw->sweep.n_gone);
	}
}
