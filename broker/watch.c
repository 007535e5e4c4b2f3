/*
 * Watching the clouds: one describe per account and region per tick covers
 * every cluster there. What it sees updates the node rows (state, addresses,
 * launch time, interruption notices, confirmed termination). Terminating
 * clusters are closed once every node is confirmed terminated.
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
#include "launcher/keys.h"

#include <dirent.h>
#include <pthread.h>
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
			isc_cluster_key_delete(b->home, c->id);
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
static void watch_target(struct isc_broker *b, struct isc_store *s, const struct target *t,
                         int reconcile)
{
	struct broker_instance *seen;
	struct isc_node *nodes = NULL;
	struct isc_err err;
	size_t n_seen, n_nodes = 0, n_strays = 0, n_writes = 0, n_missing = 0, n_revived = 0;
	size_t *strays = NULL, *writes = NULL, *missing = NULL, *revive = NULL, n_closed = 0;
	/* closed clusters' nodes counted gone by absence that this listing shows running */
	struct isc_node *closed_nodes = NULL;
	int64_t now = isc_store_now_ms(), t0 = isc_monotonic_ms(), t_cloud;
	int batch;

	if (broker_cloud_describe(b, s, t->provider, t->account, t->region, &seen, &n_seen, &err)) {
		isc_log(ISC_LOG_WARN, "describe %s %s: %s", t->provider, t->region, err.msg);
		return;
	}
	t_cloud = isc_monotonic_ms();
	/* A closed cluster's nodes counted gone by absence are looked for at reconciliation
	 * only: reading them means reading every closed cluster's nodes in the region. Those
	 * of clusters not closed are looked for on every describe. */
	if (isc_store_node_list_in(s, t->provider, t->account, t->region, reconcile, &nodes,
	                           &n_nodes, &err)) {
		isc_log(ISC_LOG_WARN, "describe %s %s: reading nodes: %s", t->provider, t->region,
		        err.msg);
		broker_instances_free(seen, n_seen);
		return;
	}
	strays = calloc(n_seen ? n_seen : 1, sizeof(*strays));
	writes = calloc(n_seen ? n_seen : 1, sizeof(*writes));
	missing = calloc(n_nodes ? n_nodes : 1, sizeof(*missing));
	revive = calloc(n_nodes ? n_nodes : 1, sizeof(*revive));
	closed_nodes = calloc(n_seen ? n_seen : 1, sizeof(*closed_nodes));
	if (!strays || !writes || !missing || !revive || !closed_nodes)
		goto out;
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
	for (size_t i = 0; i < n_nodes; i++)
		if (!is_gone(nodes[i].state) && nodes[i].launched_at_ms > 0 &&
		    (!n_seen ||
		     !bsearch(nodes[i].instance_id, seen, n_seen, sizeof(*seen), seen_find_cmp)))
			missing[n_missing++] = i;
	/*
	 * What changed goes into the store in one write transaction (the lock taken once
	 * per describe, not once per node). Strays are handled after it: terminating one
	 * is a cloud call, never made while holding the lock.
	 */
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
		if (isc_store_node_missed(s, nd->instance_id, now,
		                          b->config->node_absence_confirm_ms, &gone, &err))
			isc_log(ISC_LOG_WARN, "node %s: %s", nd->instance_id, err.msg);
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
	free(revive);
	free(strays);
	free(writes);
	free(missing);
	isc_node_list_free(nodes, n_nodes);
	broker_instances_free(seen, n_seen);
}

/*
 * The describes of a tick run side by side, one thread per account and region
 * (at most WATCH_THREADS at a time), each with its own store connection: a
 * describe is a cloud call, and a tick that made them one after another
 * stretched with every region and organisation's account in use. Their writes
 * still take the store's write lock one describe at a time. One target runs on
 * the tick's own thread and connection, as before.
 */
#define WATCH_THREADS 8

struct watch_job {
	struct isc_broker *b;
	const struct target *t;
	int reconcile;
	pthread_t thread;
};

static void *watch_job_main(void *arg)
{
	struct watch_job *j = arg;
	struct isc_store *s;
	struct isc_err err;

	if (isc_store_open(j->b->home, 0, &s, &err)) {
		isc_log(ISC_LOG_WARN, "describe %s %s: opening the store: %s", j->t->provider,
		        j->t->region, err.msg);
		return NULL;
	}
	watch_target(j->b, s, j->t, j->reconcile);
	isc_store_free(s);
	return NULL;
}

static void watch_targets(struct isc_broker *b, const struct target *targets, size_t n_targets,
                          int reconcile)
{
	struct watch_job jobs[WATCH_THREADS];

	if (n_targets == 1) {
		watch_target(b, b->store, &targets[0], reconcile);
		return;
	}
	for (size_t first = 0; first < n_targets; first += WATCH_THREADS) {
		size_t k = n_targets - first < WATCH_THREADS ? n_targets - first : WATCH_THREADS;
		int started[WATCH_THREADS] = {0};
		for (size_t i = 0; i < k; i++) {
			jobs[i] = (struct watch_job){b, &targets[first + i], reconcile, 0};
			started[i] =
			    pthread_create(&jobs[i].thread, NULL, watch_job_main, &jobs[i]) == 0;
			if (!started[i]) /* no thread to be had: this one here and now */
				watch_target(b, b->store, &targets[first + i], reconcile);
		}
		for (size_t i = 0; i < k; i++)
			if (started[i])
				pthread_join(jobs[i].thread, NULL);
	}
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
 * The key files of clusters that are closed: a crash between closing a cluster and
 * deleting its key (settle_terminating) leaves one behind, with nothing left to use
 * it. Files that name no cluster (not the broker's) are left alone.
 */
static void sweep_keys(struct isc_broker *b)
{
	char *dir = NULL;
	struct dirent *d;
	DIR *dh;

	if (asprintf(&dir, "%s/keys", b->home) < 0)
		return;
	dh = opendir(dir);
	free(dir);
	if (!dh)
		return;
	while ((d = readdir(dh)) != NULL) {
		struct isc_cluster c;
		struct isc_err err;
		if (d->d_name[0] == '.' || strncmp(d->d_name, "cl_", 3) != 0 ||
		    isc_store_cluster_get(b->store, d->d_name, &c, &err))
			continue;
		if (strcmp(c.state, "closed") == 0) {
			isc_cluster_key_delete(b->home, c.id);
			isc_log(ISC_LOG_INFO, "cluster %s is closed: its key file removed", c.id);
		}
		isc_cluster_cleanup(&c);
	}
	closedir(dh);
}

int broker_watch(struct isc_broker *b, int reconcile, struct isc_err *err)
{
	struct isc_cluster *clusters;
	struct target *targets = NULL;
	size_t n, n_targets = 0;
	int rc;

	if ((rc = isc_store_cluster_list_open(b->store, &clusters, &n, err)))
		return rc;
	for (size_t i = 0; i < n; i++)
		add_target(&targets, &n_targets, clusters[i].provider, clusters[i].account,
		           clusters[i].region);
	if (reconcile) {
		for (size_t p = 0; p < b->config->n_providers; p++) {
			const struct isc_provider_config *pc = &b->config->providers[p];
			for (size_t r = 0; r < pc->n_regions; r++)
				add_target(&targets, &n_targets, pc->name, "default",
				           pc->regions[r]);
		}
		add_key_targets(b, &targets, &n_targets);
	}
	watch_targets(b, targets, n_targets, reconcile);
	if (reconcile) {
		isc_log(ISC_LOG_INFO,
		        "reconciled %zu account/region(s) against %zu open cluster(s)", n_targets,
		        n);
		sweep_keys(b);
	}
	for (size_t i = 0; i < n; i++)
		if (strcmp(clusters[i].state, "terminating") == 0)
			settle_terminating(b, &clusters[i]);
	targets_free(targets, n_targets);
	isc_cluster_list_free(clusters, n);
	return 0;
}
