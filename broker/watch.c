/*
 * Watching the clouds: one describe per account and region covers every cluster
 * there; describes run in the background, one in flight per target (below). What it sees updates
 * the node rows (state, addresses, launch time, interruption notices, confirmed termination).
 * Terminating clusters are closed once every node is confirmed terminated.
 *
 * Reconciliation is the same pass over every configured region: an instance
 * with this broker's tag that no open cluster owns is terminated. An instance
 * of a cluster whose launch intent is still pending is left alone: the intent's
 * retry (same token) will record it.
 */
#include "broker/broker_int.h"

#include "common/clock.h"
#include "common/crashpoint.h"
#include "store/store_keys.h"
#include "common/log.h"
#include "common/metrics.h"
#include "launcher/keys.h"
#include "providers/provider.h"
#include "store/store_sshkeys.h"

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct target {
	char *provider, *account, *region;
};

static void add_target(struct target **v, size_t *n, const char *provider, const char *account,
                       const char *region)
{
	struct target *grown;
	for (size_t i = 0; i < *n; i++)
		if (!strcmp((*v)[i].provider, provider) && !strcmp((*v)[i].account, account) &&
		    !strcmp((*v)[i].region, region))
			return;
	grown = realloc(*v, (*n + 1) * sizeof(**v));
	if (!grown)
		return;
	*v = grown;
	grown[*n].provider = strdup(provider);
	grown[*n].account = strdup(account);
	grown[*n].region = strdup(region);
	(*n)++;
}

static void targets_free(struct target *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].provider);
		free(v[i].account);
		free(v[i].region);
	}
	free(v);
}

static int is_gone(const char *state)
{
	return strcmp(state, "terminated") == 0;
}

static int is_ending(const char *state)
{
	return is_gone(state) || strcmp(state, "shutting-down") == 0;
}

int broker_cluster_terminate(struct isc_broker *b, struct isc_store *s, const struct isc_cluster *c,
                             struct isc_err *err)
{
	struct isc_node *nodes;
	const char **ids;
	size_t n, k = 0;
	int rc;

	if ((rc = isc_store_cluster_set_state(s, c->id, "terminating", err)))
		return rc;
	if ((rc = isc_store_node_list(s, c->id, &nodes, &n, err)))
		return rc;
	ids = calloc(n ? n : 1, sizeof(*ids));
	if (!ids) {
		isc_node_list_free(nodes, n);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < n; i++)
		if (!is_ending(nodes[i].state))
			ids[k++] = nodes[i].instance_id;
	rc = k ? broker_cloud_terminate(b, s, c->provider, c->account, c->region, ids, k, err) : 0;
	/*
	 * A node counted terminated only because the listings left it out may run still,
	 * unseen (issue 48): it is terminated too. One call each, and "not found" is no
	 * failure: a cloud that no longer knows the id has nothing to terminate, and that
	 * answer for one id must not keep the others alive.
	 */
	for (size_t i = 0; i < n; i++) {
		const char *one[1] = {nodes[i].instance_id};
		struct isc_err e1;
		int r1;
		if (!isc_node_gone_by_absence(&nodes[i]))
			continue;
		r1 = broker_cloud_terminate(b, s, c->provider, c->account, c->region, one, 1, &e1);
		if (r1 && r1 != ISC_ENOTFOUND)
			isc_log(ISC_LOG_WARN,
			        "cluster %s: terminating %s (counted gone by absence): %s", c->id,
			        nodes[i].instance_id, e1.msg);
	}
	free(ids);
	isc_node_list_free(nodes, n);
	return rc;
}

/*
 * When a launch whose answer never came can no longer have made anything the
 * cloud has not listed yet: no launch call is made for an intent after its
 * boot deadline (advance.c), and a describe may lag a launch by up to
 * node_absence_confirm_ms (the window in which absence is not yet believed).
 */
static int64_t intent_settled_at_ms(const struct isc_broker *b, const struct isc_intent *in)
{
	return in->created_at_ms + b->config->boot_deadline_ms + b->config->node_absence_confirm_ms;
}

/*
 * Closes a terminating cluster whose nodes are all confirmed terminated; asks again
 * otherwise. A cluster whose launch intent is still pending (a launch given up
 * before its answer came: a cancel, a stop) may still own instances the cloud does
 * not list yet: the watch records and terminates each the tick it appears (stray),
 * and the cluster closes once the intent's deadline has passed with nothing live
 * listed. No cluster stays terminating beyond that.
 */
static void settle_terminating(struct isc_broker *b, const struct isc_cluster *c)
{
	struct isc_node *nodes;
	struct isc_err err;
	size_t n, gone = 0;

	if (isc_store_node_list(b->store, c->id, &nodes, &n, &err))
		return;
	for (size_t i = 0; i < n; i++)
		gone += is_gone(nodes[i].state);
	if (gone == n) {
		struct isc_intent intent;
		int wait = 0;
		if (isc_store_intent_for_cluster(b->store, c->id, &intent, &err) == 0) {
			if (strcmp(intent.state, "pending") == 0) {
				wait = isc_store_now_ms() < intent_settled_at_ms(b, &intent);
				if (!wait &&
				    isc_store_intent_resolve(
				        b->store, intent.token, "failed",
				        "launch given up; the cloud listed nothing more for it "
				        "past its deadline",
				        &err))
					wait = 1; /* closed only with the intent settled */
			}
			isc_intent_cleanup(&intent);
		}
		if (!wait) {
			isc_store_cluster_set_state(b->store, c->id, "closed", &err);
			isc_crash_point("settle.cluster_closed");
			if (isc_cluster_key_delete_sealed(b->store, b->home, c->id, &err))
				isc_log(ISC_LOG_ERROR, "the key of cluster %s: %s", c->id, err.msg);
			isc_log(ISC_LOG_INFO,
			        "cluster %s closed: all %zu node(s) confirmed terminated", c->id,
			        n);
		}
	} else if (b->ticks % 5 == 1) {
		/* Terminate is idempotent; repeat it now and then in case a call was lost. */
		broker_cluster_terminate(b, b->store, c, &err);
	}
	isc_node_list_free(nodes, n);
}

/*
 * An instance of a cluster that is being torn down or closed, which no node row
 * knows: a launch given up before its answer came made it, and a lagging listing
 * shows it only now. It is recorded as a node of that cluster (ranked after the
 * others, the cluster's node price, the launch time the cloud reports), so the meter
 * charges every second it ran, and the cluster (reopened if it had closed) stays
 * terminating until the cloud confirms it gone. Returns 1 when recorded.
 */
static int adopt_late(struct isc_store *s, const struct broker_instance *in,
                      const struct isc_cluster *c)
{
	struct isc_node nd = {0};
	struct isc_node *nodes = NULL;
	struct isc_err err;
	size_t n = 0;
	char msg[ISC_ERR_MSG_MAX];
	int rc;

	if (isc_store_node_list(s, c->id, &nodes, &n, &err))
		return 0;
	isc_node_list_free(nodes, n);
	nd.cluster_id = c->id;
	nd.rank = (int)n;
	nd.instance_id = in->instance_id;
	nd.state = in->state;
	nd.private_ip = in->private_ip;
	nd.public_ip = in->public_ip;
	nd.zone = in->zone;
	nd.price_micros = c->price_micros;
	nd.launched_at_ms = in->launched_at_ms;
	rc = isc_store_begin(s, &err);
	if (!rc)
		rc = isc_store_node_add(s, &nd, &err);
	if (!rc && strcmp(c->state, "closed") == 0)
		rc = isc_store_cluster_set_state(s, c->id, "terminating", &err);
	if (!rc)
		rc = isc_store_commit(s, &err);
	else
		isc_store_rollback(s);
	if (rc) {
		isc_log(ISC_LOG_WARN, "cluster %s: recording instance %s: %s", c->id,
		        in->instance_id, err.msg);
		return 0;
	}
	snprintf(msg, sizeof(msg),
	         "instance %s of cluster %s (%s; its launch was given up) is listed only now: "
	         "recorded, terminated, and charged from its launch",
	         in->instance_id, c->id, c->state);
	isc_log(ISC_LOG_WARN, "%s: %s", c->experiment_id, msg);
	if (isc_store_event_add(s, c->experiment_id, "late_instance", msg, &err))
		isc_log(ISC_LOG_WARN, "%s: recording an event: %s", c->experiment_id, err.msg);
	return 1;
}

/* The cluster an instance belongs to: its isc:cluster tag, else its launch's token isc-<id>. */
static const char *instance_cluster(const struct broker_instance *in)
{
	if (in->cluster_id)
		return in->cluster_id;
	if (in->client_token && strncmp(in->client_token, "isc-", 4) == 0)
		return in->client_token + 4;
	return NULL;
}

/* What to do with an instance no node row knows. */
static void stray(struct isc_broker *b, struct isc_store *s, const struct target *t,
                  const struct broker_instance *in, int reconcile)
{
	struct isc_cluster c;
	struct isc_intent intent;
	struct isc_err err;
	const char *cluster_id = instance_cluster(in);
	int owned = 0, known = 0, have_cluster = 0, ended = 0;

	if (is_ending(in->state))
		return;
	/*
	 * Known now? The describe was read a moment ago and a worker may have recorded
	 * the node since (then moved its cluster on from launching): an instance is a
	 * stray only if no node row has it at the moment of the decision.
	 */
	if (isc_store_node_known(s, in->instance_id, &known, &err) || known)
		return;
	if (cluster_id && isc_store_cluster_get(s, cluster_id, &c, &err) == 0) {
		/* Another live replica steps that burst: its strays are its own to judge. */
		if (broker_lease_elsewhere(b, c.experiment_id)) {
			isc_cluster_cleanup(&c);
			return;
		}
		have_cluster = 1;
		if (strcmp(c.state, "launching") == 0 &&
		    isc_store_intent_for_cluster(s, c.id, &intent, &err) == 0) {
			owned = strcmp(intent.state, "pending") == 0 ||
			        strcmp(intent.state, "launched") == 0;
			isc_intent_cleanup(&intent);
		}
		ended = strcmp(c.state, "closed") == 0 || strcmp(c.state, "terminating") == 0;
	}
	if (owned || (!reconcile && have_cluster && !ended)) {
		/* Its launch will record it; or a cluster's record may be a moment behind the
		 * cloud: strays of live clusters wait for reconcile. */
		if (have_cluster)
			isc_cluster_cleanup(&c);
		return;
	}
	/* Every second an instance of ours ran is charged: record it before it goes. */
	if (have_cluster && ended)
		adopt_late(s, in, &c);
	else
		isc_log(ISC_LOG_WARN,
		        "reconcile: %s %s in %s (cluster %s) belongs to no live cluster; "
		        "terminating",
		        t->provider, in->instance_id, t->region, cluster_id ? cluster_id : "?");
	if (have_cluster)
		isc_cluster_cleanup(&c);
	{
		const char *ids[1] = {in->instance_id};
		if (broker_cloud_terminate(b, s, t->provider, t->account, t->region, ids, 1, &err))
			isc_log(ISC_LOG_WARN, "reconcile: terminating %s: %s", in->instance_id,
			        err.msg);
	}
}

/*
 * A node counted terminated because the listings left it out, that a listing shows
 * again (issue 48): the absence was a lagging listing, not a termination. The broker
 * has acted on the loss already (a replacement, a failover, a teardown that skipped
 * it), so the node is terminated now, whatever its cluster's state; the observe that
 * came before dropped its recorded termination, so the meter charges it through to the
 * termination the cloud confirms. Its cluster, closed meanwhile, reopens as
 * terminating: the watch follows its node again, settle_terminating repeats the
 * terminate until the cloud confirms it, and closes it then.
 */
static void revived(struct isc_broker *b, struct isc_store *s, const struct target *t,
                    const struct broker_instance *in, const struct isc_node *nd)
{
	struct isc_cluster c;
	struct isc_err err;
	char msg[ISC_ERR_MSG_MAX];
	int have = isc_store_cluster_get(s, nd->cluster_id, &c, &err) == 0;

	if (have && strcmp(c.state, "closed") == 0 &&
	    isc_store_cluster_set_state(s, c.id, "terminating", &err))
		isc_log(ISC_LOG_WARN, "cluster %s: reopening it: %s", c.id, err.msg);
	snprintf(msg, sizeof(msg),
	         "node %s (rank %d) of cluster %s, counted terminated after the listings left it "
	         "out, is listed again (%s): the absence was a lagging listing; %s, and charged "
	         "until the cloud confirms its termination",
	         in->instance_id, nd->rank, nd->cluster_id, in->state,
	         is_ending(in->state) ? "it is ending" : "terminating it");
	isc_log(ISC_LOG_WARN, "%s", msg);
	if (have && isc_store_event_add(s, c.experiment_id, "absence_false", msg, &err))
		isc_log(ISC_LOG_WARN, "%s: recording an event: %s", c.experiment_id, err.msg);
	if (have)
		isc_cluster_cleanup(&c);
	if (!is_ending(in->state)) {
		const char *ids[1] = {in->instance_id};
		if (broker_cloud_terminate(b, s, t->provider, t->account, t->region, ids, 1, &err))
			isc_log(ISC_LOG_WARN, "terminating %s (listed again after its absence): %s",
			        in->instance_id, err.msg);
	}
}

/*
 * Of the nodes a describe did not list (missing[]), those the cloud confirms it no
 * longer has: confirmed[k] = 1 for missing[k]. Asked only of a node whose cluster is
 * terminating (the broker asked for its deletion) on a cloud with a per-instance read
 * (confirm_gone): Compute Engine drops a deleted instance from its listings at once, so
 * there a deleted node is only ever seen missing, and waiting node_absence_confirm_ms
 * for it held every GCP teardown (its cost settling, its cluster terminating) for 30 s.
 * A node of a live cluster keeps the absence rule whatever the cloud: a lagging listing
 * must never end a running gang, and no read is spent on it. Called outside the store's
 * write transaction (cloud calls never hold it); once per node per describe.
 */
static void confirm_deleted(struct isc_broker *b, struct isc_store *s, const struct target *t,
                            const struct isc_node *nodes, const size_t *missing, size_t n_missing,
                            int *confirmed)
{
	const struct isc_provider *p = isc_provider_find(t->provider);
	const char **ids = NULL, **zones = NULL;
	size_t *which = NULL, k = 0;
	int *gone = NULL, terminating = 0, rc;
	const char *last = NULL;
	struct isc_err err;

	if (!n_missing || !p || !p->confirm_gone)
		return;
	ids = calloc(n_missing, sizeof(*ids));
	zones = calloc(n_missing, sizeof(*zones));
	which = calloc(n_missing, sizeof(*which));
	gone = calloc(n_missing, sizeof(*gone));
	if (!ids || !zones || !which || !gone)
		goto out;
	for (size_t j = 0; j < n_missing; j++) {
		const struct isc_node *nd = &nodes[missing[j]];
		if (!nd->zone || !nd->zone[0] || !nd->cluster_id)
			continue;
		/* Sorted by instance id, which on GCP begins with the cluster's: one read each. */
		if (!last || strcmp(last, nd->cluster_id) != 0) {
			struct isc_cluster c;
			last = nd->cluster_id;
			terminating = 0;
			if (isc_store_cluster_get(s, nd->cluster_id, &c, &err) == 0) {
				terminating = strcmp(c.state, "terminating") == 0;
				isc_cluster_cleanup(&c);
			}
		}
		if (!terminating)
			continue;
		ids[k] = nd->instance_id;
		zones[k] = nd->zone;
		which[k++] = j;
	}
	if (!k)
		goto out;
	rc = broker_cloud_confirm_gone(b, s, t->provider, t->account, t->region, ids, zones, k,
	                               gone, &err);
	if (rc)
		isc_log(ISC_LOG_WARN,
		        "%s %s: asking the cloud whether %zu deleted node(s) are gone: %s (the "
		        "absence rule goes on for those not answered)",
		        t->provider, t->region, k, err.msg);
	for (size_t i = 0; i < k; i++)
		confirmed[which[i]] = gone[i];
out:
	free(ids);
	free(zones);
	free(which);
	free(gone);
}

/* A describe (cloud call and recording) this long is logged with where its time went. */
#define SLOW_DESCRIBE_MS 5000

static int node_cmp(const void *key, const void *elem)
{
	return strcmp(key, ((const struct isc_node *)elem)->instance_id);
}

static int node_sort_cmp(const void *a, const void *b)
{
	return strcmp(((const struct isc_node *)a)->instance_id,
	              ((const struct isc_node *)b)->instance_id);
}

static int seen_cmp(const void *a, const void *b)
{
	return strcmp(((const struct broker_instance *)a)->instance_id,
	              ((const struct broker_instance *)b)->instance_id);
}

static int seen_find_cmp(const void *key, const void *elem)
{
	return strcmp(key, ((const struct broker_instance *)elem)->instance_id);
}

/*
 * One describe of one account and region, recorded. The nodes of the region's open
 * clusters are read in one query and compared with the listing here, so only what
 * changed is written: most ticks nothing is, and the store's write lock (shared by
 * every replica on PostgreSQL) is not taken at all.
 */
static int describe_may_record(struct isc_broker *b, struct isc_err *err);

/* 0 when what the describe saw was recorded; else why not (err). */
static int watch_target(struct isc_broker *b, struct isc_store *s, const struct target *t,
                        int reconcile, struct isc_err *err_out)
{
	struct broker_instance *seen;
	struct isc_node *nodes = NULL;
	struct isc_err err;
	size_t n_seen, n_nodes = 0, n_strays = 0, n_writes = 0, n_missing = 0, n_revived = 0;
	size_t *strays = NULL, *writes = NULL, *missing = NULL, *revive = NULL, n_closed = 0;
	int *confirmed = NULL; /* per missing[]: the cloud confirmed it gone (confirm_deleted) */
	/* closed clusters' nodes counted gone by absence that this listing shows running */
	struct isc_node *closed_nodes = NULL;
	int64_t now = isc_store_now_ms(), t0 = isc_monotonic_ms(), t_cloud;
	int64_t us0 = isc_monotonic_us();
	int batch, rc;

	rc = broker_cloud_describe(b, s, t->provider, t->account, t->region, &seen, &n_seen,
	                           err_out);
	/* The cloud's part, answered or failed: what a slow or failing provider shows. */
	isc_metric_observe(ISC_M_DESCRIBE_DURATION, ISC_LABELS(t->provider),
	                   (double)(isc_monotonic_us() - us0) / 1e6);
	if (rc) {
		isc_log(ISC_LOG_WARN, "describe %s %s: %s", t->provider, t->region, err_out->msg);
		return rc;
	}
	t_cloud = isc_monotonic_ms();
	/* It may have been out for a while: whether its answer may still be written. */
	if ((rc = describe_may_record(b, err_out))) {
		isc_log(ISC_LOG_WARN, "describe %s %s %s: %s", t->provider, t->account, t->region,
		        err_out->msg);
		broker_instances_free(seen, n_seen);
		return rc;
	}
	/* A closed cluster's nodes counted gone by absence are looked for at reconciliation
	 * only: reading them means reading every closed cluster's nodes in the region. Those
	 * of clusters not closed are looked for on every describe. */
	if (isc_store_node_list_in(s, t->provider, t->account, t->region, reconcile, &nodes,
	                           &n_nodes, &err)) {
		isc_log(ISC_LOG_WARN, "describe %s %s: reading nodes: %s", t->provider, t->region,
		        err.msg);
		broker_instances_free(seen, n_seen);
		return isc_err_set(err_out, err.code, "reading nodes: %s", err.msg);
	}
	strays = calloc(n_seen ? n_seen : 1, sizeof(*strays));
	writes = calloc(n_seen ? n_seen : 1, sizeof(*writes));
	missing = calloc(n_nodes ? n_nodes : 1, sizeof(*missing));
	revive = calloc(n_nodes ? n_nodes : 1, sizeof(*revive));
	closed_nodes = calloc(n_seen ? n_seen : 1, sizeof(*closed_nodes));
	if (!strays || !writes || !missing || !revive || !closed_nodes) {
		rc = isc_err_set(err_out, ISC_ENOMEM, "out of memory");
		goto out;
	}
	/* Sorted here, not by the store: PostgreSQL's collation need not be strcmp's. */
	if (n_seen)
		qsort(seen, n_seen, sizeof(*seen), seen_cmp);
	if (n_nodes)
		qsort(nodes, n_nodes, sizeof(*nodes), node_sort_cmp);
	for (size_t i = 0; i < n_seen; i++) {
		const struct isc_node *nd =
		    n_nodes ? bsearch(seen[i].instance_id, nodes, n_nodes, sizeof(*nodes), node_cmp)
		            : NULL;
		struct isc_node *found = NULL;
		size_t n_found = 0;
		if (nd) {
			if (isc_node_gone_by_absence(nd))
				revive[n_revived++] = (size_t)(nd - nodes);
			if (isc_node_observe_changes(nd, seen[i].state, seen[i].private_ip,
			                             seen[i].public_ip, seen[i].launched_at_ms,
			                             seen[i].notice_at_ms))
				writes[n_writes++] = i;
			continue;
		}
		/* A closed cluster's nodes are final, and an ending instance is never a stray:
		 * nothing to do (the cloud lists terminated instances for a while). One counted
		 * gone by absence is looked for at reconciliation (node_list_in above). */
		if (is_ending(seen[i].state))
			continue;
		/* Not an open cluster's: recorded a moment ago by a step, a closed cluster's
		 * node counted gone by absence and listed running again, or a stray. */
		if (isc_store_node_find(s, seen[i].instance_id, &found, &n_found, &err) == 0 &&
		    n_found) {
			if (isc_node_gone_by_absence(&found[0])) {
				closed_nodes[n_closed++] = found[0]; /* the row moves over */
				memset(&found[0], 0, sizeof(found[0]));
			}
			writes[n_writes++] = i;
		} else {
			strays[n_strays++] = i;
		}
		isc_node_list_free(found, n_found);
		found = NULL;
		n_found = 0;
	}
	/*
	 * Nodes this describe did not list. The cloud keeps terminated instances
	 * listed for a while, but its describe is eventually consistent: a node
	 * launched a moment ago may be missing from one reply. A node counts as gone
	 * only once it has been missing for node_absence_confirm_ms.
	 */
	/* A node launched after the describe was asked for cannot be in its answer: a slow
	 * answer (issue 49) says nothing of it. */
	for (size_t i = 0; i < n_nodes; i++)
		if (!is_gone(nodes[i].state) && nodes[i].launched_at_ms > 0 &&
		    nodes[i].launched_at_ms < now &&
		    (!n_seen ||
		     !bsearch(nodes[i].instance_id, seen, n_seen, sizeof(*seen), seen_find_cmp)))
			missing[n_missing++] = i;
	/*
	 * What changed goes into the store in one write transaction (the lock taken once
	 * per describe, not once per node). Strays are handled after it: terminating one
	 * is a cloud call, never made while holding the lock; so is asking the cloud about
	 * deleted nodes (confirm_deleted), done before it.
	 */
	confirmed = calloc(n_missing ? n_missing : 1, sizeof(*confirmed));
	if (!confirmed) {
		rc = isc_err_set(err_out, ISC_ENOMEM, "out of memory");
		goto out;
	}
	confirm_deleted(b, s, t, nodes, missing, n_missing, confirmed);
	batch = (n_writes || n_missing) && isc_store_begin(s, &err) == 0;
	for (size_t k = 0; k < n_writes; k++) {
		const struct broker_instance *in = &seen[writes[k]];
		if (isc_store_node_observe(s, in->instance_id, in->state, in->private_ip,
		                           in->public_ip, in->launched_at_ms, in->notice_at_ms, now,
		                           &err))
			isc_log(ISC_LOG_WARN, "node %s: %s", in->instance_id, err.msg);
	}
	for (size_t k = 0; k < n_missing; k++) {
		const struct isc_node *nd = &nodes[missing[k]];
		int gone = 0;
		/* Confirmed by the cloud: gone now, ended at its first miss, and charged as a
		 * confirmed termination (the provider's minimum included), not as an absence
		 * that a later listing might prove false. */
		if (confirmed[k]
		        ? isc_store_node_gone_confirmed(s, nd->instance_id, now, &gone, &err)
		        : isc_store_node_missed(s, nd->instance_id, now,
		                                b->config->node_absence_confirm_ms, &gone, &err))
			isc_log(ISC_LOG_WARN, "node %s: %s", nd->instance_id, err.msg);
		else if (gone && confirmed[k])
			isc_log(ISC_LOG_INFO,
			        "node %s of cluster %s: deleted, and the cloud says it no longer "
			        "exists: terminated",
			        nd->instance_id, nd->cluster_id);
		else if (gone)
			isc_log(ISC_LOG_WARN,
			        "node %s of cluster %s missing from every describe for %ld ms: "
			        "counted as terminated",
			        nd->instance_id, nd->cluster_id,
			        b->config->node_absence_confirm_ms);
	}
	if (batch && isc_store_commit(s, &err)) {
		isc_log(ISC_LOG_WARN, "describe %s %s: recording: %s", t->provider, t->region,
		        err.msg);
		isc_store_rollback(s);
		rc = isc_err_set(err_out, err.code, "recording: %s", err.msg);
	}
	/* A slow describe says whose time it was: the cloud's answer or the store's. */
	if (isc_monotonic_ms() - t0 >= SLOW_DESCRIBE_MS)
		isc_log(ISC_LOG_INFO,
		        "describe %s %s took %lld ms: the cloud %lld ms (%zu instances), recording "
		        "%lld ms (%zu written, %zu missing)",
		        t->provider, t->region, (long long)(isc_monotonic_ms() - t0),
		        (long long)(t_cloud - t0), n_seen,
		        (long long)(isc_monotonic_ms() - t_cloud), n_writes, n_missing);
	for (size_t k = 0; k < n_revived; k++) {
		const struct isc_node *nd = &nodes[revive[k]];
		const struct broker_instance *in =
		    bsearch(nd->instance_id, seen, n_seen, sizeof(*seen), seen_find_cmp);
		if (in)
			revived(b, s, t, in, nd);
	}
	for (size_t k = 0; k < n_closed; k++) {
		const struct broker_instance *in = bsearch(closed_nodes[k].instance_id, seen,
		                                           n_seen, sizeof(*seen), seen_find_cmp);
		if (in)
			revived(b, s, t, in, &closed_nodes[k]);
	}
	for (size_t k = 0; k < n_strays; k++)
		stray(b, s, t, &seen[strays[k]], reconcile);
out:
	isc_node_list_free(closed_nodes, n_closed);
	free(confirmed);
	free(revive);
	free(strays);
	free(writes);
	free(missing);
	isc_node_list_free(nodes, n_nodes);
	broker_instances_free(seen, n_seen);
	return rc;
}

/*
 * Describes run in the background (issue 49): a describe is a cloud call, which takes
 * 1-28 s under load, and a tick that waited for its describes made every burst's steps
 * wait for the slowest cloud. Each account and region has one describe at most in
 * flight, on a thread and a store connection of its own; it records what it saw when
 * it returns. The tick starts one for a target that has none in flight and whose last
 * one started a tick interval ago or more, and never joins it: steps, followers and the
 * meter read the latest observation, the store rows the describes wrote.
 *
 * Who needs an observation newer than some moment asks (broker_observed_since) or
 * waits for one (broker_watch with wait_fresh: iscd's first tick, so --once, and a
 * takeover's reconciliation), with a deadline (describe_wait_ms), and says which
 * target it gave up on.
 *
 * At most WATCH_IN_FLIGHT describes run at once (each holds a store connection: with
 * PostgreSQL, replicas share max_connections); the others start, oldest first, as
 * those end.
 */
#define WATCH_IN_FLIGHT 8

struct describe {
	struct target t;
	struct isc_broker *b;
	struct broker_watcher *w;
	pthread_t thread;
	/* The main thread's only. */
	int running;        /* a thread was started and is not joined yet */
	int reconcile_next; /* the next describe reconciles */
	int reconcile_now;  /* the one running reconciles */
	int wanted;         /* a target of this tick */
	int64_t started_ms; /* monotonic: when the latest describe started (0: never) */
	/* Under w->lock. */
	int finished;        /* the running describe returned: its thread is to be joined */
	int64_t answered_ms; /* the start of the latest describe that ended, recorded or not */
	int64_t observed_ms; /* the start of the latest describe that recorded what it saw */
	uint64_t seq;        /* observations recorded */
	char why[ISC_ERR_MSG_MAX]; /* the latest describe's failure; "" when it recorded */
};

struct broker_watcher {
	pthread_mutex_t lock;
	pthread_cond_t ended; /* a describe ended */
	struct describe **v;
	size_t n;
	size_t in_flight;    /* under lock */
	atomic_int stopping; /* iscd stops: describes still out record nothing */
};

static struct broker_watcher *watcher_of(struct isc_broker *b)
{
	struct broker_watcher *w = b->watcher;
	pthread_condattr_t ca;

	if (w)
		return w;
	if (!(w = calloc(1, sizeof(*w))))
		return NULL;
	pthread_mutex_init(&w->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->ended, &ca);
	pthread_condattr_destroy(&ca);
	atomic_init(&w->stopping, 0);
	b->watcher = w;
	return w;
}

static struct describe *describe_of(struct broker_watcher *w, struct isc_broker *b,
                                    const struct target *t)
{
	struct describe *d, **grown;

	for (size_t i = 0; i < w->n; i++) {
		d = w->v[i];
		if (!strcmp(d->t.provider, t->provider) && !strcmp(d->t.account, t->account) &&
		    !strcmp(d->t.region, t->region))
			return d;
	}
	if (!(d = calloc(1, sizeof(*d))) || !(grown = realloc(w->v, (w->n + 1) * sizeof(*grown)))) {
		free(d);
		return NULL;
	}
	w->v = grown;
	d->t.provider = strdup(t->provider);
	d->t.account = strdup(t->account);
	d->t.region = strdup(t->region);
	if (!d->t.provider || !d->t.account || !d->t.region) {
		free(d->t.provider);
		free(d->t.account);
		free(d->t.region);
		free(d);
		return NULL;
	}
	d->b = b;
	d->w = w;
	w->v[w->n++] = d;
	return d;
}

/* Whether a describe that returns now may record what it saw (watch_target). */
static int describe_may_record(struct isc_broker *b, struct isc_err *err)
{
	if (b->watcher && atomic_load(&b->watcher->stopping))
		return isc_err_set(err, ISC_ECONFLICT, "iscd is stopping: not recorded");
	/*
	 * A replica that is not sure it is live (its heartbeat failed or stalled: a pause,
	 * a cut-off store) may have been counted dead, and another replica's describes and
	 * steps go on: its answer, old by now, is not written over theirs.
	 */
	if (!broker_replica_sure(b))
		return isc_err_set(err, ISC_ELEASE,
		                   "this replica is not sure it is live (its heartbeat is late): "
		                   "not recorded");
	return 0;
}

static void *describe_main(void *arg)
{
	struct describe *d = arg;
	struct broker_watcher *w = d->w;
	struct isc_store *s;
	struct isc_err err;
	int rc;

	isc_err_clear(&err);
	rc = isc_store_open(d->b->home, 0, &s, &err);
	if (rc) {
		isc_log(ISC_LOG_WARN, "describe %s %s: opening the store: %s", d->t.provider,
		        d->t.region, err.msg);
	} else {
		rc = watch_target(d->b, s, &d->t, d->reconcile_now, &err);
		isc_store_free(s);
	}
	pthread_mutex_lock(&w->lock);
	d->answered_ms = d->started_ms;
	if (!rc) {
		d->observed_ms = d->started_ms;
		d->seq++;
		d->why[0] = 0;
	} else {
		snprintf(d->why, sizeof(d->why), "%s", err.msg[0] ? err.msg : "failed");
	}
	d->finished = 1;
	w->in_flight--;
	pthread_cond_broadcast(&w->ended);
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

/* Joins the describes that ended. */
static void describes_reap(struct broker_watcher *w)
{
	for (size_t i = 0; i < w->n; i++) {
		struct describe *d = w->v[i];
		int done;
		if (!d->running)
			continue;
		pthread_mutex_lock(&w->lock);
		done = d->finished;
		pthread_mutex_unlock(&w->lock);
		if (done) {
			pthread_join(d->thread, NULL);
			d->running = 0;
			d->finished = 0;
		}
	}
}

/* Starts d's next describe; 0 when no room (WATCH_IN_FLIGHT) or no thread. */
static int describe_start(struct broker_watcher *w, struct describe *d)
{
	sigset_t block, old;
	int rc;

	pthread_mutex_lock(&w->lock);
	if (w->in_flight >= WATCH_IN_FLIGHT) {
		pthread_mutex_unlock(&w->lock);
		return 0;
	}
	w->in_flight++;
	pthread_mutex_unlock(&w->lock);
	d->reconcile_now = d->reconcile_next;
	d->started_ms = isc_monotonic_ms();
	d->finished = 0;
	/* SIGTERM/SIGINT stay the main loop's, so a stop is prompt. */
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	rc = pthread_create(&d->thread, NULL, describe_main, d);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		pthread_mutex_lock(&w->lock);
		w->in_flight--;
		pthread_mutex_unlock(&w->lock);
		isc_log(ISC_LOG_WARN, "describe %s %s %s: cannot start a thread", d->t.provider,
		        d->t.account, d->t.region);
		return 0;
	}
	d->running = 1;
	d->reconcile_next = 0;
	return 1;
}

/*
 * Starts the describes that are due: a wanted target with none in flight whose last
 * one started at least a tick interval ago (or never, or that owes a reconciliation),
 * or, with since > 0, whose latest describe did not start after since. Oldest first.
 */
static void describes_start_due(struct isc_broker *b, struct broker_watcher *w, int64_t since)
{
	int64_t now = isc_monotonic_ms();
	for (;;) {
		struct describe *best = NULL;
		for (size_t i = 0; i < w->n; i++) {
			struct describe *d = w->v[i];
			int due;
			if (!d->wanted || d->running)
				continue;
			if (since > 0)
				due = d->started_ms < since;
			else
				due = d->started_ms == 0 || d->reconcile_next ||
				      now - d->started_ms >= b->config->tick_interval_ms;
			if (due && (!best || d->started_ms < best->started_ms))
				best = d;
		}
		if (!best || !describe_start(w, best))
			return;
	}
}

int broker_observed_since(struct isc_broker *b, const char *provider, const char *account,
                          const char *region, int64_t since_ms)
{
	struct broker_watcher *w = b->watcher;
	int yes = 0;

	if (!w)
		return 0;
	pthread_mutex_lock(&w->lock);
	for (size_t i = 0; i < w->n && !yes; i++) {
		const struct describe *d = w->v[i];
		yes = !strcmp(d->t.provider, provider) && !strcmp(d->t.account, account) &&
		      !strcmp(d->t.region, region) && d->observed_ms >= since_ms &&
		      d->observed_ms > 0;
	}
	pthread_mutex_unlock(&w->lock);
	return yes;
}

/*
 * Waits until every wanted target has a describe that started at or after since and
 * ended, starting them as room frees, for describe_wait_ms at most. Names every
 * target it gave up on, or whose fresh describe failed.
 */
static void describes_wait_fresh(struct isc_broker *b, struct broker_watcher *w, int64_t since)
{
	int64_t deadline = since + b->config->describe_wait_ms;

	for (;;) {
		size_t left = 0;
		describes_reap(w);
		describes_start_due(b, w, since);
		pthread_mutex_lock(&w->lock);
		for (size_t i = 0; i < w->n; i++)
			left += w->v[i]->wanted && w->v[i]->answered_ms < since;
		if (left && isc_monotonic_ms() < deadline) {
			struct timespec until = isc_monotonic_deadline(
			    deadline - isc_monotonic_ms() < 200 ? deadline - isc_monotonic_ms()
			                                        : 200);
			pthread_cond_timedwait(&w->ended, &w->lock, &until);
		}
		pthread_mutex_unlock(&w->lock);
		if (!left || isc_monotonic_ms() >= deadline)
			break;
	}
	describes_reap(w);
	pthread_mutex_lock(&w->lock);
	for (size_t i = 0; i < w->n; i++) {
		const struct describe *d = w->v[i];
		if (!d->wanted)
			continue;
		if (d->answered_ms < since)
			isc_log(ISC_LOG_WARN,
			        "gave up waiting for a fresh describe of %s %s %s after %ld ms "
			        "(describe_wait_ms): going on with its last observation",
			        d->t.provider, d->t.account, d->t.region,
			        b->config->describe_wait_ms);
		else if (d->observed_ms < since)
			isc_log(
			    ISC_LOG_WARN,
			    "the fresh describe of %s %s %s failed (%s): going on with its last "
			    "observation",
			    d->t.provider, d->t.account, d->t.region, d->why);
	}
	pthread_mutex_unlock(&w->lock);
}

void broker_watch_stop(struct isc_broker *b)
{
	struct broker_watcher *w = b->watcher;
	size_t out = 0;

	if (!w)
		return;
	atomic_store(&w->stopping, 1);
	describes_reap(w);
	for (size_t i = 0; i < w->n; i++)
		if (w->v[i]->running) {
			isc_log(
			    ISC_LOG_INFO,
			    "stopping: waiting for the describe of %s %s %s, out for %lld ms (it "
			    "records nothing now)",
			    w->v[i]->t.provider, w->v[i]->t.account, w->v[i]->t.region,
			    (long long)(isc_monotonic_ms() - w->v[i]->started_ms));
			out++;
		}
	for (size_t i = 0; i < w->n; i++) {
		struct describe *d = w->v[i];
		if (d->running)
			pthread_join(d->thread, NULL);
		free(d->t.provider);
		free(d->t.account);
		free(d->t.region);
		free(d);
	}
	if (out)
		isc_log(ISC_LOG_INFO, "stopping: %zu describe(s) returned", out);
	free(w->v);
	pthread_cond_destroy(&w->ended);
	pthread_mutex_destroy(&w->lock);
	free(w);
	b->watcher = NULL;
}

/*
 * Reconciliation also covers organisations' own accounts: every registered key, in
 * each configured region of its provider that it covers, so a node left behind on
 * an organisation's account is found even when no open cluster points there.
 */
static void add_key_targets(struct isc_broker *b, struct target **targets, size_t *n_targets)
{
	struct isc_cloud_key *keys = NULL;
	struct isc_err err;
	size_t n = 0;

	if (isc_store_key_list(b->store, 0, &keys, &n, &err)) {
		isc_log(ISC_LOG_WARN, "reconcile: listing cloud keys: %s", err.msg);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const struct isc_provider_config *pc =
		    isc_config_provider(b->config, keys[i].provider);
		for (size_t r = 0; pc && r < pc->n_regions; r++)
			if (isc_cloud_key_covers(&keys[i], pc->regions[r]))
				add_target(targets, n_targets, keys[i].provider, keys[i].id,
				           pc->regions[r]);
	}
	isc_cloud_key_list_free(keys, n);
}

/*
 * The sealed keys of clusters that are closed (or gone from the store): a crash
 * between closing a cluster and deleting its key (settle_terminating) leaves one
 * behind, with nothing left to use it.
 */
static void sweep_keys(struct isc_broker *b)
{
	char **ids = NULL;
	size_t n = 0;
	struct isc_err err;

	if (isc_store_sshkey_ids(b->store, &ids, &n, &err))
		return;
	for (size_t i = 0; i < n; i++) {
		struct isc_cluster c;
		int rc = isc_store_cluster_get(b->store, ids[i], &c, &err);
		if (rc == 0 && strcmp(c.state, "closed") == 0 &&
		    isc_cluster_key_delete_sealed(b->store, b->home, c.id, &err) == 0)
			isc_log(ISC_LOG_INFO, "cluster %s is closed: its key removed", c.id);
		if (rc == 0)
			isc_cluster_cleanup(&c);
		free(ids[i]);
	}
	free(ids);
}

int broker_watch(struct isc_broker *b, int reconcile, int wait_fresh, struct isc_err *err)
{
	struct isc_cluster *clusters;
	struct target *targets = NULL;
	struct broker_watcher *w;
	size_t n, n_targets = 0;
	int64_t since = isc_monotonic_ms();
	int rc;

	if (!(w = watcher_of(b)))
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	describes_reap(w);
	if ((rc = isc_store_cluster_list_open(b->store, &clusters, &n, err)))
		return rc;
	for (size_t i = 0; i < n; i++)
		add_target(&targets, &n_targets, clusters[i].provider, clusters[i].account,
		           clusters[i].region);
	if (reconcile || wait_fresh) {
		for (size_t p = 0; p < b->config->n_providers; p++) {
			const struct isc_provider_config *pc = &b->config->providers[p];
			for (size_t r = 0; r < pc->n_regions; r++)
				add_target(&targets, &n_targets, pc->name, "default",
				           pc->regions[r]);
		}
		add_key_targets(b, &targets, &n_targets);
	}
	for (size_t i = 0; i < w->n; i++)
		w->v[i]->wanted = 0;
	for (size_t i = 0; i < n_targets; i++) {
		struct describe *d = describe_of(w, b, &targets[i]);
		if (!d)
			continue;
		d->wanted = 1;
		d->reconcile_next |= reconcile || wait_fresh;
	}
	if (wait_fresh)
		describes_wait_fresh(b, w, since);
	else
		describes_start_due(b, w, 0);
	if (reconcile || wait_fresh) {
		isc_log(ISC_LOG_INFO,
		        "reconcil%s %zu account/region(s) against %zu open cluster(s)",
		        wait_fresh ? "ed" : "ing", n_targets, n);
		sweep_keys(b);
	}
	for (size_t i = 0; i < n; i++)
		if (strcmp(clusters[i].state, "terminating") == 0)
			settle_terminating(b, &clusters[i]);
	targets_free(targets, n_targets);
	isc_cluster_list_free(clusters, n);
	return 0;
}
