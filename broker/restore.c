/*
 * Restoring the last cycle's folders onto a new cluster before its containers start,
 * and the kept nodes' head start while a replacement's new nodes boot: their restore
 * and their containers (in memory only; after a restart booting does it all again).
 */
#include "broker/broker_int.h"
#include "broker/liveness.h"
#include "broker/step.h"

#include "common/crashpoint.h"
#include "common/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether the kept nodes' containers started before the new nodes were up. */
enum kept_start { KEPT_START_WAITING, KEPT_STARTED, KEPT_START_FAILED };

/*
 * What a replacement cluster's kept nodes already hold while its new nodes boot, in
 * memory only (after a restart, booting does it all again): the restore, and once
 * started, their containers too.
 */
struct restored {
	char cluster_id[64];
	char **ids;
	size_t n;
	enum kept_start start;
	struct restored *next;
};
static struct restored *restored_list;
static pthread_mutex_t restored_lock = PTHREAD_MUTEX_INITIALIZER;

void broker_restored_free(struct restored *r)
{
	for (size_t i = 0; r && i < r->n; i++)
		free(r->ids[i]);
	if (r)
		free(r->ids);
	free(r);
}

/* Removes and returns the cluster's entry (NULL: none). Caller frees with restored_free. */
struct restored *broker_restored_take(const char *cluster_id)
{
	struct restored **p, *r = NULL;
	pthread_mutex_lock(&restored_lock);
	for (p = &restored_list; *p; p = &(*p)->next)
		if (strcmp((*p)->cluster_id, cluster_id) == 0) {
			r = *p;
			*p = r->next;
			break;
		}
	pthread_mutex_unlock(&restored_lock);
	return r;
}

/* The cluster's entry for these nodes; NULL when out of memory. */
static struct restored *restored_new(const char *cluster_id, const struct isc_node *nodes, size_t n)
{
	struct restored *r = calloc(1, sizeof(*r));
	if (!r || !(r->ids = calloc(n ? n : 1, sizeof(*r->ids)))) {
		free(r);
		return NULL; /* booting restores onto every node, as without it */
	}
	snprintf(r->cluster_id, sizeof(r->cluster_id), "%s", cluster_id);
	for (size_t i = 0; i < n; i++)
		if ((r->ids[r->n] = strdup(nodes[i].instance_id)))
			r->n++;
	return r;
}

/* Hands r (may be NULL) to the list. */
void broker_restored_put(struct restored *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&restored_lock);
	r->next = restored_list;
	restored_list = r;
	pthread_mutex_unlock(&restored_lock);
}

static int restored_has(const struct restored *r, const char *instance_id)
{
	for (size_t i = 0; r && i < r->n; i++)
		if (strcmp(r->ids[i], instance_id) == 0)
			return 1;
	return 0;
}

/*
 * Restores what the last cycle brought home onto every node of the new cluster
 * before any container starts, all nodes at once: every rank resumes from the
 * same files, as on the platform, where these folders are one folder all nodes
 * share (docs/launcher.md, "What each rank sees"). A target the watch has already
 * seen go is not tried, and one that goes while the copies run ends them at once
 * (a node watcher cancels the launcher's retries): the caller then treats it as
 * an interruption. Nodes in `done` already hold it and are left out.
 */
int broker_restore_artifacts(struct isc_broker *b, const struct isc_experiment *e,
                             const struct isc_cluster *c, const struct isc_node *nodes, size_t n,
                             const struct restored *done, struct isc_err *err)
{
	const char **ids = calloc(n ? n : 1, sizeof(*ids));
	struct isc_node *todo = calloc(n ? n : 1, sizeof(*todo));
	struct broker_node_watch *w = NULL;
	struct isc_err werr;
	volatile int gone = 0;
	int rc = 0, masters = 0;
	size_t m = 0;

	if (!ids || !todo) {
		free(ids);
		free(todo);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		masters += nodes[i].rank == 0;
		if (restored_has(done, nodes[i].instance_id))
			continue;
		todo[m] = nodes[i]; /* a shallow copy: nodes owns the strings */
		ids[m++] = nodes[i].instance_id;
	}
	if (masters == 0)
		rc = isc_err_set(err, ISC_EINVALID, "cluster %s has no rank 0", c->id);
	if (!rc)
		isc_crash_point("boot.restore_started");
	for (size_t i = 0; i < m && !rc; i++)
		if (broker_node_gone(&todo[i]))
			rc = isc_err_set(err, ISC_ETRANSIENT, "rank %d (%s) is %s", todo[i].rank,
			                 todo[i].instance_id, todo[i].state);
	if (!rc && m > 0) {
		if (broker_node_watch_start(b->home, c->id, ids, m, &gone, &w, &werr))
			isc_log(ISC_LOG_WARN, "%s: %s", e->id, werr.msg);
		rc = broker_artifacts_push(b, e, c, todo, m, &gone, err);
		broker_node_watch_stop(w);
		if (rc && gone)
			isc_err_wrap(err, "a node of the cluster went away");
	}
	free(todo);
	free(ids);
	return rc;
}

/*
 * Starts the containers of the restored kept nodes while the new ones still boot, once
 * every node's address is known (a new node's comes with the launch on AWS, with
 * the instance on GCP, once its VNIC is attached on OCI): each rank's environment names the whole
 * gang, and the kept ranks wait for the new ones in the rendezvous. Booting then starts only the
 * new nodes' containers. On a failure the launcher has removed what it started, and booting starts
 * every node.
 */
static enum kept_start start_kept_early(struct isc_broker *b, struct isc_store *s,
                                        const struct isc_experiment *e, const struct isc_cluster *c,
                                        const struct isc_node *nodes, size_t n,
                                        const struct restored *kept)
{
	int *only;
	struct isc_err err;
	enum kept_start start = KEPT_START_FAILED;

	for (size_t i = 0; i < n; i++)
		if (!nodes[i].private_ip[0])
			return KEPT_START_WAITING; /* a new node's address is not known yet */
	if (!(only = calloc(n ? n : 1, sizeof(*only))))
		return KEPT_START_FAILED;
	for (size_t i = 0; i < n; i++)
		only[i] = restored_has(kept, nodes[i].instance_id);
	if (broker_boot_cluster(b, s, e, c, nodes, n, only, &err) == 0) {
		isc_crash_point("lostnodes.kept_started");
		broker_note(
		    s, e, "boot",
		    "started the %zu kept node(s)' containers; they wait for the new one(s) in "
		    "the rendezvous",
		    kept->n);
		start = KEPT_STARTED;
	} else {
		isc_log(ISC_LOG_INFO, "%s: early start on the kept nodes: %s", e->id, err.msg);
	}
	free(only);
	return start;
}

/* Whether the node runs and has an address to reach it at. */
int broker_node_reachable(const struct isc_node *n)
{
	return strcmp(n->state, "running") == 0 && (n->private_ip[0] || n->public_ip[0]);
}

/* Whether every node of the cluster runs with an address, as the store says now. */
static int all_nodes_up(struct isc_store *s, const struct isc_cluster *c)
{
	struct isc_node *nodes = NULL;
	struct isc_err err;
	size_t n = 0, up = 0;

	if (isc_store_node_list(s, c->id, &nodes, &n, &err))
		return 0;
	for (size_t i = 0; i < n; i++)
		up += broker_node_reachable(&nodes[i]);
	isc_node_list_free(nodes, n);
	return (int)n == c->nnodes && up == n;
}

/*
 * While a replacement cluster's new nodes boot, its kept nodes (moved in once the
 * checkpoint came home) take the restore and then start their containers, so that
 * booting waits only for the new nodes' copies and container. Each is tried once per
 * cluster; a failure here only leaves the work to booting. 1 when the new nodes came
 * up during the restore: then booting starts every node together, in this step.
 */
int broker_restore_kept_early(struct isc_broker *b, struct isc_store *s,
                              const struct isc_experiment *e, const struct isc_cluster *c,
                              const struct isc_node *nodes, size_t n)
{
	struct restored *r = broker_restored_take(c->id);
	struct isc_node *up = NULL;
	struct isc_err err;
	size_t kept_left = 1, m = 0;
	int all_up = 0;

	/* Restoring onto nodes and starting containers: only under the lease. */
	if (!broker_step_may_act(b, s, e, 1)) {
		broker_restored_put(r);
		return 0;
	}
	if (!r && isc_store_cluster_kept_count(s, c->replaces, &kept_left, &err) == 0 &&
	    kept_left == 0 && (up = calloc(n ? n : 1, sizeof(*up)))) {
		for (size_t i = 0; i < n; i++)
			if (broker_node_reachable(&nodes[i]))
				up[m++] = nodes[i];
		if (m > 0 && broker_restore_artifacts(b, e, c, up, m, NULL, &err) == 0) {
			broker_note(s, e, "artifacts",
			            "restored onto the %zu kept node(s) while the new one(s) boot",
			            m);
			r = restored_new(c->id, up, m);
		} else if (m > 0) {
			/* Tried once: booting restores onto every node, and says why not. */
			r = restored_new(c->id, up, 0);
			isc_log(ISC_LOG_INFO, "%s: early restore onto the kept nodes: %s", e->id,
			        err.msg);
		}
		free(up);
	}
	if (r && r->n > 0 && r->start == KEPT_START_WAITING && !(all_up = all_nodes_up(s, c)))
		r->start = start_kept_early(b, s, e, c, nodes, n, r);
	broker_restored_put(r);
	return all_up;
}
/* Starts the containers of the nodes whose containers did not start early (all, usually). */
int broker_boot_the_rest(struct isc_broker *b, struct isc_store *s, const struct isc_experiment *e,
                         const struct isc_cluster *c, const struct isc_node *nodes, size_t n,
                         const struct restored *done, struct isc_err *err)
{
	int *only, rc, any = 0;

	if (!done || done->start != KEPT_STARTED)
		return broker_boot_cluster(b, s, e, c, nodes, n, NULL, err);
	if (!(only = calloc(n ? n : 1, sizeof(*only))))
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++)
		any |= only[i] = !restored_has(done, nodes[i].instance_id);
	rc = any ? broker_boot_cluster(b, s, e, c, nodes, n, only, err) : 0;
	free(only);
	return rc;
}
