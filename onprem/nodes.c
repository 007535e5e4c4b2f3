/*
 * On-prem execution's pool nodes, in the tick: the store's pool into the queue,
 * each node probed on its period (isc_onprem_probe in a worker), and a node that
 * does not answer marked unreachable (its run an interruption) or up again.
 */
#include "onprem/onprem_int.h"

#include "common/log.h"
#include "store/store_pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Nodes that hold a run (their loss interrupts it) and unreachable ones (so they are
 * back soon after they answer) are probed this often; the others every node_probe_ms. */
#define PROBE_EVERY_MS 1000
/* At most this many probes at once (each a thread that may wait ISC_ONPREM_PROBE_MS). */
#define PROBES_MAX 16

/* ---- nodes ---- */

struct onprem_node *onprem_node_by_id(struct isc_onprem *o, int64_t id)
{
	for (struct onprem_node *n = o->nodes; n; n = n->next)
		if (n->id == id)
			return n;
	return NULL;
}

static enum isc_queue_node_state queue_node_state(const struct onprem_node *n)
{
	if (strcmp(n->state, "unreachable") == 0)
		return ISC_QUEUE_NODE_DOWN;
	if (strcmp(n->state, "draining") == 0 || n->orphan)
		return ISC_QUEUE_NODE_DRAINING;
	return ISC_QUEUE_NODE_UP;
}

static struct onprem_run *run_on_node(struct isc_onprem *o, int64_t node_id,
                                      struct onprem_exp **owner)
{
	for (struct onprem_exp *e = o->exps; e; e = e->next) {
		const struct onprem_job *j = onprem_run_nodes(e->run);
		if (!j)
			continue;
		for (size_t i = 0; i < j->n; i++) {
			if (j->t[i].node_id == node_id) {
				*owner = e;
				return e->run;
			}
		}
	}
	return NULL;
}

/*
 * The store's state and reason for a node, compare-and-set from what this
 * thread last read: an operator's drain or undrain that came in meanwhile
 * wins (the next probe decides again). 0 when written.
 */
static int node_mark(struct isc_onprem *o, struct onprem_node *n, const char *to,
                     const char *reason)
{
	struct isc_err err;
	int rc = isc_store_pool_mark(o->store, n->id, n->state, to, reason, &err);
	if (rc) {
		isc_log(rc == ISC_ECONFLICT ? ISC_LOG_INFO : ISC_LOG_ERROR, "pool node %lld: %s",
		        (long long)n->id, err.msg);
		return rc;
	}
	snprintf(n->state, sizeof(n->state), "%s", to);
	snprintf(n->reason, sizeof(n->reason), "%s", reason);
	return 0;
}

/* A node does not answer: unreachable in the store and the queue; its run is an interruption. */
void onprem_mark_unreachable(struct isc_onprem *o, struct onprem_node *n, const char *why)
{
	struct isc_err err;
	struct onprem_exp *owner = NULL;
	struct onprem_run *r;

	if (strcmp(n->state, "unreachable") == 0)
		return;
	if (node_mark(o, n, "unreachable", why))
		return;
	isc_queue_node_set_state(o->q, n->id, ISC_QUEUE_NODE_DOWN, &err);
	isc_log(ISC_LOG_WARN, "pool node %lld (%s:%d) is unreachable: %s", (long long)n->id,
	        n->host, n->port, why);
	r = run_on_node(o, n->id, &owner);
	if (!r)
		return;
	for (size_t i = 0; r->spec && i < r->spec->n; i++)
		if (r->spec->t[i].node_id == n->id)
			r->spec->t[i].skip = 1; /* the stop does not wait on it */
	if (r->phase == PHASE_RUNNING) {
		char msg[400];
		snprintf(msg, sizeof(msg), "node %s:%d stopped answering (%.200s)", n->host,
		         n->port, why);
		onprem_note(o, owner->id, "interrupted",
		            "%s; stopping the other ranks and requeueing", msg);
		onprem_start_stop(o, owner, ISC_QUEUE_NODE_LOST, msg, -1);
	}
}

void onprem_node_free(struct onprem_node *nd)
{
	onprem_job_free(nd->probe);
	free(nd->host);
	free(nd->user);
	free(nd);
}

/* The pool as the store has it now, into the queue. */
void onprem_sync_nodes(struct isc_onprem *o)
{
	struct isc_pool_node *list = NULL;
	struct isc_err err;
	size_t n = 0;

	if (isc_store_pool_list(o->store, &list, &n, &err)) {
		isc_log(ISC_LOG_WARN, "reading the pool: %s", err.msg);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		struct onprem_node *nd = onprem_node_by_id(o, list[i].id);
		if (!nd) {
			nd = calloc(1, sizeof(*nd));
			if (!nd || !(nd->host = strdup(list[i].host)) ||
			    !(nd->user = strdup(list[i].user))) {
				if (nd)
					free(nd->host);
				free(nd);
				continue;
			}
			nd->id = list[i].id;
			nd->port = list[i].port;
			nd->gpus = list[i].gpus;
			nd->next = o->nodes;
			o->nodes = nd;
		}
		snprintf(nd->state, sizeof(nd->state), "%s", list[i].state);
		snprintf(nd->reason, sizeof(nd->reason), "%s", list[i].reason);
		if (!nd->in_queue) {
			if (isc_queue_node_add(o->q, nd->id, nd->gpus, &err)) {
				isc_log(ISC_LOG_WARN, "pool node %lld: %s", (long long)nd->id,
				        err.msg);
				continue;
			}
			nd->in_queue = 1;
		}
		isc_queue_node_set_state(o->q, nd->id, queue_node_state(nd), &err);
	}
	/* Removed from the store: out of the queue once no run holds the node. */
	for (struct onprem_node **p = &o->nodes; *p;) {
		struct onprem_node *nd = *p;
		int present = 0;
		for (size_t i = 0; i < n && !present; i++)
			present = list[i].id == nd->id;
		/* (a probe in progress is not waited for: the tick never waits on a node) */
		if (!present && (!nd->probe || onprem_job_done(nd->probe)) &&
		    (!nd->in_queue || isc_queue_node_remove(o->q, nd->id, &err) == 0)) {
			*p = nd->next;
			onprem_node_free(nd);
		} else {
			if (!present) /* keeps its run; gets nothing new */
				isc_queue_node_set_state(o->q, nd->id, ISC_QUEUE_NODE_DRAINING,
				                         &err);
			p = &nd->next;
		}
	}
	isc_pool_nodes_free(list, n);
}

/* ---- probes ---- */

/* What a node's finished probe found, into the store and the queue. */
void onprem_probe_apply(struct isc_onprem *o, struct onprem_node *nd, int64_t now)
{
	const struct onprem_target *t = &nd->probe->t[0];
	struct isc_err err;
	struct onprem_exp *owner;

	if (t->rc == 0) {
		nd->first_fail_ms = 0;
		if (strcmp(nd->state, "unreachable") == 0) {
			isc_log(ISC_LOG_INFO, "pool node %lld (%s:%d) answers again: up",
			        (long long)nd->id, nd->host, nd->port);
			if (node_mark(o, nd, "up", "") == 0)
				isc_queue_node_set_state(o->q, nd->id, queue_node_state(nd), &err);
		} else if (nd->reason[0]) {
			node_mark(o, nd, nd->state, ""); /* a draining node answers again */
		}
	} else if (run_on_node(o, nd->id, &owner)) {
		/* Its run is interrupted only once the node has been silent for a while. */
		if (!nd->first_fail_ms)
			nd->first_fail_ms = now;
		if (now - nd->first_fail_ms >= o->env.cfg->node_down_after_ms)
			onprem_mark_unreachable(o, nd, t->msg);
	} else if (strcmp(nd->state, "up") == 0) {
		onprem_mark_unreachable(o, nd, t->msg); /* nothing runs there: no reason to wait */
	} else if (strcmp(nd->reason, t->msg) != 0) {
		/* unreachable for another reason now, or a draining node that stopped answering */
		if (node_mark(o, nd, nd->state, t->msg) == 0)
			isc_log(ISC_LOG_WARN, "pool node %lld (%s:%d) is %s: %s", (long long)nd->id,
			        nd->host, nd->port, nd->state, t->msg);
	}
	onprem_job_free(nd->probe);
	nd->probe = NULL;
}

/*
 * Every node is probed every node_probe_ms; one that holds a run, or is
 * unreachable, every second. One probe per node at a time, each in its own
 * worker, so a silent node delays no other.
 */
void onprem_probe_start(struct isc_onprem *o, int64_t now)
{
	int running = 0;

	for (struct onprem_node *nd = o->nodes; nd; nd = nd->next)
		running += nd->probe != NULL;
	for (struct onprem_node *nd = o->nodes; nd && running < PROBES_MAX; nd = nd->next) {
		struct onprem_job *j;
		struct isc_err err;
		struct onprem_exp *owner;
		long every = o->env.cfg->node_probe_ms;

		if (nd->probe)
			continue;
		if (run_on_node(o, nd->id, &owner) || strcmp(nd->state, "unreachable") == 0)
			every = every < PROBE_EVERY_MS ? every : PROBE_EVERY_MS;
		if (nd->probed_ms && now - nd->probed_ms < every)
			continue;
		if (!(j = onprem_job_new(ONPREM_JOB_PROBE, &o->env, 1)))
			return;
		j->t[0].node_id = nd->id;
		j->t[0].port = nd->port;
		j->t[0].host = strdup(nd->host);
		j->t[0].user = strdup(nd->user);
		snprintf(j->t[0].pin, sizeof(j->t[0].pin), ISC_POOL_PIN_FMT, (long long)nd->id);
		if (!j->t[0].host || !j->t[0].user) {
			onprem_job_free(j);
			return;
		}
		nd->probe = j;
		nd->probed_ms = now;
		running++;
		onprem_job_start(j, &err); /* a failed start is a finished job with an error */
	}
}
