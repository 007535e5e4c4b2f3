/*
 * The broker's bridge to the provider drivers. A session is made per call:
 * session_new does no network I/O (it resolves credentials and endpoints), so
 * this keeps workers from sharing driver state across threads.
 */
#include "broker/broker_int.h"

#include "common/metrics.h"
#include "common/crashpoint.h"
#include "common/log.h"
#include "keys/keys.h"
#include "providers/provider_config.h"
#include "store/store_keys.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int broker_step_holds(struct isc_broker *b, struct isc_store *s, int ask_store, struct isc_err *err)
{
	const char *exp = isc_store_fence_experiment(s);
	int rc;

	if (!exp)
		return 0;
	if (!isc_store_lease_lost(s) && !broker_lease_mine(b, exp))
		isc_store_fence_lose(s); /* its renewal failed or did not return it */
	if (isc_store_lease_lost(s))
		return isc_err_set(err, ISC_ELEASE,
		                   "%s: this replica's lease was lost (expired or taken over): "
		                   "nothing more is done for it here",
		                   exp);
	if (!ask_store || !(rc = isc_store_fence_check(s, err)))
		return 0;
	/*
	 * Unsure is not sure: a lease the store could not confirm ends the step as a lost
	 * one does (nothing more written, no call), and the next step, on a new connection,
	 * asks again. Acting on would be worse: the step's next writes could record an
	 * effect (a teardown, a final status) that was never made.
	 */
	isc_store_fence_lose(s);
	return rc;
}

/*
 * A session on the platform's account ("default") or on an organisation's own
 * key (account = the key id). A key's secret is opened from the store for this
 * session only and wiped once the driver has its copy; the vault is read anew
 * each time, so a master-key rotation while iscd runs needs no restart.
 * expect_org > 0: the key must belong to that organisation (a launch).
 */
static int session_open(struct isc_broker *b, struct isc_store *s, const char *provider,
                        const char *account, const char *region, int64_t expect_org,
                        struct isc_provider_session **out, struct isc_err *err)
{
	struct isc_cloud_key k;
	struct isc_vault *v = NULL;
	int rc = broker_cloud_configured(b, provider, err);

	*out = NULL;
	if (rc)
		return rc;
	/* A step that lost its burst's lease makes no cloud call (issue 48). */
	if ((rc = broker_step_holds(b, s, 0, err)))
		return rc;
	if (strcmp(account, "default") == 0)
		return isc_provider_session_open(b->config, provider, region, out, err);
	if ((rc = isc_store_key_get(s, account, &k, err)))
		return rc == ISC_ENOTFOUND
		           ? isc_err_set(err, ISC_EAUTH, "cloud key %s is no longer registered",
		                         account)
		           : rc;
	if (strcmp(k.provider, provider) != 0)
		rc = isc_err_set(err, ISC_EAUTH, "cloud key %s is a %s key, not %s", k.id,
		                 k.provider, provider);
	else if (expect_org > 0 && k.org_id != expect_org)
		/* Never reached through placement, which only looks at the org's own keys. */
		rc = isc_err_set(err, ISC_EAUTH,
		                 "cloud key %s belongs to another organisation; refusing to use it",
		                 k.id);
	if (!rc)
		rc = isc_keys_vault_open(s, b->home, 0, &v, err);
	if (!rc)
		rc = isc_keys_session_open(v, b->config, &k, region, out, err);
	isc_vault_free(v);
	isc_cloud_key_cleanup(&k);
	return rc;
}

int broker_key_for(struct isc_broker *b, struct isc_store *s, int64_t org_id, const char *provider,
                   const char *region, char **key_id, char **account, struct isc_err *err)
{
	struct isc_cloud_key k;
	int found = 0, rc;

	(void)b;
	*key_id = *account = NULL;
	if ((rc = isc_store_key_for(s, org_id, provider, region, &k, &found, err)) || !found)
		return rc;
	if (strcmp(k.state, "active") != 0)
		rc = isc_err_set(err, ISC_EAUTH,
		                 "the organisation's %s key %s (account %s) is %s%s%s: no new "
		                 "launches on it (isc keys verify %s)",
		                 provider, k.id, k.account, k.state, k.state_reason[0] ? ": " : "",
		                 k.state_reason, k.id);
	else if (!(*key_id = strdup(k.id)) || !(*account = strdup(k.account))) {
		free(*key_id);
		*key_id = NULL;
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	isc_cloud_key_cleanup(&k);
	return rc;
}

int broker_cloud_configured(struct isc_broker *b, const char *provider, struct isc_err *err)
{
	if (!isc_provider_find(provider))
		return isc_err_set(err, ISC_EINVALID, "no driver for provider '%s' in this build",
		                   provider);
	if (!isc_config_provider(b->config, provider))
		return isc_err_set(err, ISC_EINVALID,
		                   "provider '%s' is not configured in config.toml", provider);
	return 0;
}

static char **split_zones(const char *zones, size_t *n)
{
	char **out = NULL, *copy = strdup(zones), *save = NULL, *tok;
	*n = 0;
	if (!copy)
		return NULL;
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char **grown = realloc(out, (*n + 1) * sizeof(*out));
		if (!grown)
			break;
		out = grown;
		out[(*n)++] = strdup(tok);
	}
	free(copy);
	return out;
}

int broker_fill_ranks(const struct isc_cluster *c, int *ranks, int cap)
{
	const char *p = c->fill_ranks;
	int n = 0;

	while (p && *p && n < cap) {
		char *end;
		long r = strtol(p, &end, 10);
		if (end == p || r < 0 || r >= c->nnodes)
			return 0; /* not written by this broker: treated as a whole gang */
		ranks[n++] = (int)r;
		p = *end == ',' ? end + 1 : end;
	}
	return n;
}

/*
 * Records the nodes of a gang in one transaction: ranks from first_rank in the given
 * order (or, for a replacement of lost nodes, the ranks it fills), and the zone.
 */
static int record_nodes(struct isc_store *s, const struct isc_cluster *c,
                        const struct isc_node_info *nodes, size_t n, const char *zone,
                        int first_rank, struct isc_err *err)
{
	int fill[BROKER_MAX_NODES];
	int n_fill = first_rank == 0 ? broker_fill_ranks(c, fill, BROKER_MAX_NODES) : 0;
	int rc = isc_store_begin(s, err);

	for (size_t i = 0; i < n && !rc; i++) {
		struct isc_node nd = {0};
		nd.cluster_id = c->id;
		nd.rank = (int)i < n_fill ? fill[i] : first_rank + (int)i;
		nd.instance_id = (char *)nodes[i].id;
		nd.state = (char *)isc_node_state_name(nodes[i].state);
		nd.private_ip = (char *)nodes[i].private_ip;
		nd.public_ip = (char *)nodes[i].public_ip;
		nd.zone = (char *)nodes[i].zone;
		nd.price_micros = c->price_micros;
		nd.launched_at_ms = nodes[i].launched_at_ms;
		rc = isc_store_node_add(s, &nd, err);
	}
	if (!rc)
		rc = isc_store_cluster_set_zone(s, c->id, zone, err);
	if (!rc)
		rc = isc_store_commit(s, err);
	else
		isc_store_rollback(s);
	return rc;
}

struct zone_note {
	struct isc_store *store;
	const char *token;
};

/* The driver's before_zone hook: the zone whose outcome a crash would leave unknown. */
static void note_attempt_zone(void *ctx, const char *zone)
{
	struct zone_note *zn = ctx;
	struct isc_err err;

	if (isc_store_intent_set_attempt_zone(zn->store, zn->token, zone, &err))
		isc_log(ISC_LOG_WARN, "intent %s: recording zone %s: %s", zn->token, zone, err.msg);
	isc_crash_point("launch.zone_noted");
}

/* Rotates zones so that `first` (when present) is asked first; the order is kept otherwise. */
static void rotate_zones(char **zones, size_t n, const char *first)
{
	size_t k = 0;

	if (!first || !first[0])
		return;
	while (k < n && strcmp(zones[k], first) != 0)
		k++;
	for (; k > 0 && k < n; k--) {
		/* One step left per turn: n is a handful of zones. */
		char *head = zones[0];
		memmove(zones, zones + 1, (n - 1) * sizeof(*zones));
		zones[n - 1] = head;
	}
}

int broker_cloud_launch(struct isc_broker *b, struct isc_store *s, const struct isc_cluster *c,
                        int64_t org_id, const struct broker_candidate *cand, const char *token,
                        const char *resume_zone, const char *pubkey, struct isc_err *err)
{
	struct isc_provider_session *sess = NULL;
	struct isc_launch_result res = {0};
	struct isc_launch_spec spec = {0};
	struct isc_kv tags[3] = {{ISC_TAG_BROKER, b->config->broker_id},
	                         {ISC_TAG_CLUSTER, c->id},
	                         {ISC_TAG_EXPERIMENT, c->experiment_id}};
	struct zone_note zn = {s, token};
	struct isc_intent gang = {0};
	int fill[BROKER_MAX_NODES];
	int n_fill = broker_fill_ranks(c, fill, BROKER_MAX_NODES);
	size_t n_zones = 0;
	/* Replacements of lost nodes go where their gang is, nowhere else. */
	char **zones = split_zones(n_fill ? c->zone : cand->zones, &n_zones);
	int rc;

	rotate_zones(zones, n_zones, resume_zone);
	if ((rc = session_open(b, s, c->provider, c->account, c->region, org_id, &sess, err)))
		goto out;
	spec.instance_type = cand->instance_type;
	spec.spot = cand->spot;
	spec.zones = (const char *const *)zones;
	spec.n_zones = n_zones;
	spec.count = (unsigned)(n_fill ? n_fill : c->nnodes);
	spec.placement_token = n_fill && c->placement_token[0] ? c->placement_token : NULL;
	if (spec.placement_token && strncmp(spec.placement_token, "isc-", 4) == 0 &&
	    isc_store_intent_for_cluster(s, spec.placement_token + 4, &gang, err) == 0)
		spec.placement_zone = gang.attempt_zone; /* what named the gang's placement */
	spec.idempotency_token = token;
	spec.tags = tags;
	spec.n_tags = 3;
	spec.ssh_public_key = pubkey;
	spec.before_zone = note_attempt_zone;
	spec.before_zone_ctx = &zn;
	/* On the platform's account organisations share one network: each gets its own group
	 * (docs/security.md, issue 42). An organisation's own account is its alone. */
	char tenant[32];
	snprintf(tenant, sizeof(tenant), "%lld", (long long)org_id);
	if (strcmp(c->account, "default") == 0 && org_id > 0)
		spec.tenant = tenant;
	rc = sess->provider->launch_gang(sess, &spec, &res, err);
	/* Every launch asked of a cloud: a new gang, a replacement, a resumed launch. */
	isc_metric_add(ISC_M_LAUNCHES, ISC_LABELS(c->provider, c->region), 1);
	if (rc == ISC_ECAPACITY)
		isc_metric_add(ISC_M_CAPACITY_REFUSALS, ISC_LABELS(c->provider, c->region), 1);
	if (rc)
		goto out;
	isc_crash_point("launch.before_record");
	if (record_nodes(s, c, res.nodes, res.n_nodes, res.zone, 0, err)) {
		/* The gang exists and runs: keep the intent pending; the replay finds it by tag. */
		isc_err_wrap(err, "%zu node(s) launched but not recorded", res.n_nodes);
		err->code = rc = ISC_ETRANSIENT;
	}
out:
	isc_intent_cleanup(&gang);
	isc_launch_result_cleanup(&res);
	if (sess)
		sess->provider->session_free(sess);
	for (size_t i = 0; i < n_zones; i++)
		free(zones[i]);
	free(zones);
	return rc;
}

/* Orders adopted nodes the way a launch reply would: by launch time, then id. */
static int by_launch(const void *a, const void *b)
{
	const struct isc_node_info *x = a, *y = b;
	if (x->launched_at_ms != y->launched_at_ms)
		return x->launched_at_ms < y->launched_at_ms ? -1 : 1;
	return strcmp(x->id, y->id);
}

/* 1 when the instance is the cluster's: its isc:cluster tag, or the client token of its launch. */
static int of_cluster(const struct isc_node_info *in, const struct isc_cluster *c)
{
	char token[80];

	if (strcmp(in->cluster_id, c->id) == 0)
		return 1;
	snprintf(token, sizeof(token), "isc-%s", c->id);
	return in->client_token[0] && strcmp(in->client_token, token) == 0;
}

/*
 * The cluster's live instances in one describe of its account and region. With
 * whole_only, they are recorded only when they are the whole gang (a replay adopts
 * a gang or nothing); without, every live one no node row knows is recorded, ranks
 * after the known ones (a launch being given up: whatever it made is terminated and
 * charged).
 */
static int find_cluster_nodes(struct isc_broker *b, struct isc_store *s,
                              const struct isc_cluster *c, int whole_only, size_t *found,
                              struct isc_err *err)
{
	struct isc_provider_session *sess = NULL;
	struct isc_node_info *infos = NULL, *mine;
	int fill[BROKER_MAX_NODES];
	int n_fill = broker_fill_ranks(c, fill, BROKER_MAX_NODES);
	size_t n_infos = 0, k = 0, whole = (size_t)(n_fill ? n_fill : c->nnodes);
	int rc;

	*found = 0;
	if ((rc = session_open(b, s, c->provider, c->account, c->region, 0, &sess, err)))
		return rc;
	rc = sess->provider->describe(sess, b->config->broker_id, &infos, &n_infos, err);
	sess->provider->session_free(sess);
	if (rc)
		return rc;
	mine = calloc(n_infos ? n_infos : 1, sizeof(*mine));
	if (!mine) {
		isc_node_infos_free(infos, n_infos);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < n_infos; i++)
		if (of_cluster(&infos[i], c) && infos[i].state != ISC_NODE_TERMINATED &&
		    infos[i].state != ISC_NODE_SHUTTING_DOWN)
			mine[k++] = infos[i];
	*found = k;
	qsort(mine, k, sizeof(*mine), by_launch);
	if (whole_only && k == whole) {
		rc = record_nodes(s, c, mine, k, mine[0].zone, 0, err);
	} else if (!whole_only && k > 0) {
		struct isc_node *known = NULL;
		size_t n_known = 0, m = 0;
		if (!(rc = isc_store_node_list(s, c->id, &known, &n_known, err))) {
			/* Only the ones no row has, ranked after the rows there are. */
			for (size_t i = 0; i < k; i++) {
				int have = 0;
				for (size_t j = 0; j < n_known && !have; j++)
					have = strcmp(known[j].instance_id, mine[i].id) == 0;
				if (!have)
					mine[m++] = mine[i];
			}
			if (m)
				rc = record_nodes(s, c, mine, m, mine[0].zone, (int)n_known, err);
			isc_node_list_free(known, n_known);
		}
	}
	free(mine);
	isc_node_infos_free(infos, n_infos);
	return rc;
}

int broker_cloud_adopt(struct isc_broker *b, struct isc_store *s, const struct isc_cluster *c,
                       size_t *found, struct isc_err *err)
{
	return find_cluster_nodes(b, s, c, 1, found, err);
}

int broker_cloud_collect(struct isc_broker *b, struct isc_store *s, const struct isc_cluster *c,
                         size_t *found, struct isc_err *err)
{
	return find_cluster_nodes(b, s, c, 0, found, err);
}

void broker_instances_free(struct broker_instance *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].instance_id);
		free(v[i].state);
		free(v[i].private_ip);
		free(v[i].public_ip);
		free(v[i].zone);
		free(v[i].cluster_id);
		free(v[i].client_token);
	}
	free(v);
}

int broker_cloud_describe(struct isc_broker *b, struct isc_store *s, const char *provider,
                          const char *account, const char *region, struct broker_instance **out,
                          size_t *n, struct isc_err *err)
{
	struct isc_provider_session *sess = NULL;
	struct isc_node_info *infos = NULL;
	struct broker_instance *v = NULL;
	size_t n_infos = 0;
	int rc;

	*out = NULL;
	*n = 0;
	if ((rc = session_open(b, s, provider, account, region, 0, &sess, err)))
		return rc;
	rc = sess->provider->describe(sess, b->config->broker_id, &infos, &n_infos, err);
	sess->provider->session_free(sess);
	if (rc)
		return rc;
	v = calloc(n_infos ? n_infos : 1, sizeof(*v));
	if (!v) {
		isc_node_infos_free(infos, n_infos);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < n_infos; i++) {
		v[i].instance_id = strdup(infos[i].id);
		v[i].state = strdup(isc_node_state_name(infos[i].state));
		v[i].private_ip = strdup(infos[i].private_ip);
		v[i].public_ip = strdup(infos[i].public_ip);
		v[i].zone = strdup(infos[i].zone);
		v[i].cluster_id = infos[i].cluster_id[0] ? strdup(infos[i].cluster_id) : NULL;
		v[i].client_token = infos[i].client_token[0] ? strdup(infos[i].client_token) : NULL;
		v[i].launched_at_ms = infos[i].launched_at_ms;
		v[i].notice_at_ms =
		    infos[i].interruption_noticed
		        ? (infos[i].interruption_at_ms ? infos[i].interruption_at_ms : 1)
		        : 0;
	}
	isc_node_infos_free(infos, n_infos);
	*out = v;
	*n = n_infos;
	return 0;
}

int broker_cloud_terminate(struct isc_broker *b, struct isc_store *s, const char *provider,
                           const char *account, const char *region, const char *const *ids,
                           size_t n, struct isc_err *err)
{
	struct isc_provider_session *sess = NULL;
	int rc;

	if ((rc = session_open(b, s, provider, account, region, 0, &sess, err)))
		return rc;
	/*
	 * Destructive: the lease row is asked right before the call (a pause may have come
	 * anywhere before it), so a stale step never terminates nodes another replica now
	 * runs. The store cannot fence a cloud call; this narrows the window to the call.
	 */
	if (!(rc = broker_step_holds(b, s, 1, err)))
		rc = sess->provider->terminate(sess, ids, n, err);
	sess->provider->session_free(sess);
	if (!rc)
		isc_log(ISC_LOG_INFO, "terminate requested for %zu %s instance(s) in %s", n,
		        provider, region);
	return rc;
}

int broker_cloud_confirm_gone(struct isc_broker *b, struct isc_store *s, const char *provider,
                              const char *account, const char *region, const char *const *ids,
                              const char *const *zones, size_t n, int *gone, struct isc_err *err)
{
	const struct isc_provider *p = isc_provider_find(provider);
	struct isc_provider_session *sess = NULL;
	int rc;

	for (size_t i = 0; i < n; i++)
		gone[i] = 0;
	if (!n || !p || !p->confirm_gone)
		return 0;
	if ((rc = session_open(b, s, provider, account, region, 0, &sess, err)))
		return rc;
	rc = sess->provider->confirm_gone
	         ? sess->provider->confirm_gone(sess, ids, zones, n, gone, err)
	         : 0;
	sess->provider->session_free(sess);
	return rc;
}
