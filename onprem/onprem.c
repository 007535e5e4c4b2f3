/*
 * On-prem execution's tick (see onprem.h and docs/queue.md):
 *   1. apply what finished workers found (a boot, a stop, a probe);
 *   2. read the pool from the store into the queue (added, drained, removed);
 *   3. read new work: cycle and interruptible experiments, and bursts waiting
 *      for their validation cycle when burst_validation is on; cancellations;
 *   4. poll the followers of running runs for exits;
 *   5. ask the queue for its decisions and start a worker for each;
 *   6. probe the pool's nodes: every node_probe_ms, and every second the ones
 *      that hold a run or are unreachable (one worker per node at a time);
 *   7. record each experiment's place in the queue for isc status.
 * Only this thread writes the store; workers get copies and report back. The
 * statuses are the queue's state names (isc_queue_state_name), plus "validating"
 * for a burst's validation cycle.
 */
#include "onprem/onprem_int.h"

#include "common/clock.h"
#include "common/log.h"
#include "launcher/keys.h"
#include "queue/burst.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void onprem_note(struct isc_onprem *o, const char *exp_id, const char *kind, const char *fmt, ...)
{
	char msg[ISC_ERR_MSG_MAX];
	struct isc_err err;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	isc_log(ISC_LOG_INFO, "%s: %s", exp_id, msg);
	if (isc_store_event_add(o->store, exp_id, kind, msg, &err))
		isc_log(ISC_LOG_ERROR, "%s: recording an event: %s", exp_id, err.msg);
}

/* Compare-and-set of the store status from what this thread last saw; 0 or ISC_ECONFLICT. */
int onprem_set_status(struct isc_onprem *o, struct onprem_exp *e, const char *to, const char *fmt,
                      ...)
{
	char reason[ISC_ERR_MSG_MAX];
	struct isc_err err;
	va_list ap;
	char *copy;
	int rc;

	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	/* A burst's states are queue/burst.h's, as the broker's are. */
	if (e->validation && isc_burst_transition_check(e->status, to, &err)) {
		isc_log(ISC_LOG_ERROR, "%s: refused: %s (%s)", e->id, err.msg, reason);
		return ISC_EINVALID;
	}
	rc = isc_store_experiment_transition(o->store, e->id, e->status, to, reason, &err);
	if (rc) {
		isc_log(rc == ISC_ECONFLICT ? ISC_LOG_INFO : ISC_LOG_ERROR, "%s: %s -> %s: %s",
		        e->id, e->status, to, err.msg);
		return rc;
	}
	isc_log(ISC_LOG_INFO, "%s: %s: %s", e->id, to, reason);
	if ((copy = strdup(to))) {
		free(e->status);
		e->status = copy;
	}
	return 0;
}

/* ---- the tick ---- */

int isc_onprem_tick(struct isc_onprem *o, struct isc_err *err)
{
	int64_t now = isc_wall_ms();
	(void)err;

	onprem_reap_orphans(o);
	for (struct onprem_node *nd = o->nodes; nd; nd = nd->next)
		if (nd->probe && onprem_job_done(nd->probe))
			onprem_probe_apply(o, nd, now);
	for (struct onprem_exp *e = o->exps, *next; e; e = next) {
		next = e->next; /* e may be dropped */
		if (!e->run || !e->run->job || !onprem_job_done(e->run->job))
			continue;
		if (e->run->phase == PHASE_BOOTING)
			onprem_boot_done(o, e, now);
		else if (e->run->phase == PHASE_STOPPING)
			onprem_stop_done(o, e, now);
	}
	onprem_sync_nodes(o);
	onprem_sync_experiments(o, now);
	onprem_review_waits(o);
	onprem_poll_runs(o);
	onprem_sync_runs(o, now);
	onprem_act(o, now);
	onprem_probe_start(o, now);
	for (struct onprem_exp *e = o->exps; e; e = e->next)
		onprem_record_queue_state(o, e, now);
	return 0;
}

int isc_onprem_new(struct isc_store *store, struct isc_onprem **out, struct isc_err *err)
{
	struct isc_onprem *o = calloc(1, sizeof(*o));
	struct isc_queue_config qcfg;
	char *pub = NULL;
	int rc;

	if (!o)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	o->store = store;
	o->env.home = strdup(isc_store_home(store));
	if (!o->env.home) {
		isc_onprem_free(o);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	if ((rc = isc_config_load(o->env.home, &o->env.cfg, err))) {
		isc_onprem_free(o);
		return rc;
	}
	o->env.key_path = isc_cluster_key_path(o->env.home, ONPREM_POOL_KEY_ID);
	rc = isc_onprem_pool_pubkey(o->env.home, &pub, err);
	free(pub);
	if (!rc && !o->env.key_path)
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
	qcfg.cycle_ms = o->env.cfg->cycle_ms;
	qcfg.period_ms = o->env.cfg->period_ms;
	if (!rc)
		rc = isc_queue_new(&qcfg, isc_wall_ms(), &o->q, err);
	if (rc) {
		isc_onprem_free(o);
		return rc;
	}
	onprem_sync_nodes(o);
	*out = o;
	return 0;
}

void isc_onprem_free(struct isc_onprem *o)
{
	if (!o)
		return;
	while (o->exps) {
		struct onprem_exp *e = o->exps;
		o->exps = e->next;
		onprem_run_free(e->run); /* joins a boot or stop in progress */
		isc_queue_row_cleanup(&e->written);
		free(e->id);
		free(e->status);
		free(e);
	}
	while (o->nodes) {
		struct onprem_node *nd = o->nodes;
		o->nodes = nd->next;
		onprem_node_free(nd); /* joins a probe in progress */
	}
	while (o->orphans) {
		struct onprem_orphan *x = o->orphans;
		o->orphans = x->next;
		onprem_job_free(x->job);
		free(x->exp_id);
		free(x);
	}
	isc_queue_free(o->q);
	isc_config_free(o->env.cfg);
	free(o->env.key_path);
	free(o->env.home);
	free(o);
}

int isc_onprem_pool_pubkey(const char *home, char **pub, struct isc_err *err)
{
	int rc = isc_cluster_key_public(home, ONPREM_POOL_KEY_ID, pub, err);
	if (rc == ISC_ENOTFOUND) {
		isc_err_clear(err);
		rc = isc_cluster_key_create(home, ONPREM_POOL_KEY_ID, pub, err);
		if (rc == ISC_ECONFLICT) { /* made by another thread or process meanwhile */
			isc_err_clear(err);
			rc = isc_cluster_key_public(home, ONPREM_POOL_KEY_ID, pub, err);
		}
	}
	return rc;
}
