/*
 * On-prem execution's experiments, as the tick reads them from the store: new
 * cycle and interruptible ones (and bursts waiting for their validation cycle)
 * into the queue, cancellations, what a waiting one says it waits for, and the
 * queue_state row isc status shows.
 */
#include "onprem/onprem_int.h"

#include "common/log.h"
#include "queue/burst.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct onprem_exp *exp_by_id(struct isc_onprem *o, const char *id)
{
	for (struct onprem_exp *e = o->exps; e; e = e->next)
		if (strcmp(e->id, id) == 0)
			return e;
	return NULL;
}

struct onprem_exp *onprem_exp_by_qid(struct isc_onprem *o, int64_t qid)
{
	for (struct onprem_exp *e = o->exps; e; e = e->next)
		if (e->qid == qid)
			return e;
	return NULL;
}

/* Drops an experiment the queue is done with (it ended, or left for the cloud). */
void onprem_exp_drop(struct isc_onprem *o, struct onprem_exp *gone)
{
	struct isc_err err;
	for (struct onprem_exp **p = &o->exps; *p; p = &(*p)->next) {
		if (*p == gone) {
			*p = gone->next;
			break;
		}
	}
	isc_queue_forget(o->q, gone->qid, &err);
	onprem_run_free(gone->run);
	isc_queue_row_cleanup(&gone->written);
	free(gone->id);
	free(gone->status);
	free(gone);
}

/* The row of isc status: place, expected start, the run's nodes, cycles done. */
void onprem_record_queue_state(struct isc_onprem *o, struct onprem_exp *e, int64_t now)
{
	struct isc_queue_info info;
	struct isc_queue_row r = {0};
	struct isc_err err;
	char nodes[512] = "";

	if (isc_queue_info(o->q, e->qid, now, &info, &err))
		return;
	if (onprem_run_nodes(e->run)) {
		const struct onprem_job *j = onprem_run_nodes(e->run);
		size_t used = 0;
		/* node ids are set before the boot worker starts and never change */
		for (size_t i = 0; i < j->n && used < sizeof(nodes) - 24; i++)
			used += (size_t)snprintf(nodes + used, sizeof(nodes) - used, "%s%lld",
			                         i ? "," : "", (long long)j->t[i].node_id);
	}
	r.experiment_id = e->id;
	r.position = info.position;
	r.next_start_ms = info.next_start_ms;
	r.run_nodes = nodes;
	r.cycles_done = info.cycles_done;
	/* Unchanged rows are not written again: most ticks change nothing. */
	if (e->written.experiment_id && e->written.position == r.position &&
	    e->written.next_start_ms == r.next_start_ms &&
	    e->written.cycles_done == r.cycles_done && strcmp(e->written.run_nodes, nodes) == 0)
		return;
	if (isc_store_queue_put(o->store, &r, &err)) {
		isc_log(ISC_LOG_WARN, "%s: %s", e->id, err.msg);
		return;
	}
	isc_queue_row_cleanup(&e->written);
	e->written = r;
	e->written.experiment_id = strdup(e->id);
	e->written.run_nodes = strdup(nodes);
	if (!e->written.experiment_id || !e->written.run_nodes)
		isc_queue_row_cleanup(&e->written);
}

/* max_rapid_cycles of a spec; absent: one cycle. */
static int spec_max_cycles(const char *spec_json)
{
	json_t *o = json_loads(spec_json, 0, NULL);
	json_t *m = json_object_get(o, "max_rapid_cycles");
	int n = json_is_integer(m) ? (int)json_integer_value(m) : 1;
	json_decref(o);
	return n >= 1 && n <= 5 ? n : 1;
}

static struct onprem_exp *exp_add(struct isc_onprem *o, const struct isc_experiment *row,
                                  int validation)
{
	struct onprem_exp *e = calloc(1, sizeof(*e));
	if (!e || !(e->id = strdup(row->id)) || !(e->status = strdup(row->status))) {
		if (e)
			free(e->id);
		free(e);
		return NULL;
	}
	e->qid = ++o->next_qid;
	e->validation = validation;
	e->next = NULL;
	/* oldest first, as the store lists them */
	struct onprem_exp **p = &o->exps;
	while (*p)
		p = &(*p)->next;
	*p = e;
	return e;
}

/* A burst that waits for its validation cycle (burst_validation on): queue/burst.h says. */
static int wants_validation(const struct isc_onprem *o, const struct isc_experiment *row)
{
	enum isc_burst_state st;
	return strcmp(row->compute_mode, "burst") == 0 &&
	       isc_burst_state_parse(row->status, &st) == 0 &&
	       isc_burst_owner(st, row->cycle_count, row->cancel_requested,
	                       o->env.cfg->burst_validation) == ISC_BURST_OWNER_ONPREM;
}

static void take_new(struct isc_onprem *o, const struct isc_experiment *row, int64_t now)
{
	struct isc_queue_submit sub = {0};
	struct isc_queue_row qrow;
	struct isc_err err;
	int onprem = strcmp(row->compute_mode, "cycle") == 0 ||
	             strcmp(row->compute_mode, "interruptible") == 0;
	int validation = !onprem && wants_validation(o, row);
	int restore = strcmp(row->status, "enqueued") != 0;
	struct onprem_exp *e;

	if ((!onprem && !validation) || row->cancel_requested || onprem_orphan_pending(o, row->id))
		return;
	if (onprem && strcmp(row->status, "enqueued") != 0 && strcmp(row->status, "running") != 0 &&
	    strcmp(row->status, "paused") != 0)
		return;
	if (isc_store_queue_get(o->store, row->id, &qrow, &err) == 0) {
		if (qrow.run_nodes[0]) {
			/* a previous iscd's run: stop it first, then the experiment resumes */
			onprem_orphan_stop(o, row, qrow.run_nodes);
			free(qrow.run_nodes);
			qrow.run_nodes = strdup("");
			isc_store_queue_put(o->store, &qrow, &err);
			isc_queue_row_cleanup(&qrow);
			return;
		}
	} else {
		memset(&qrow, 0, sizeof(qrow));
	}
	e = exp_add(o, row, validation);
	if (!e) {
		isc_queue_row_cleanup(&qrow);
		return;
	}
	sub.exp_id = e->qid;
	sub.mode = strcmp(row->compute_mode, "interruptible") == 0 ? ISC_QUEUE_INTERRUPTIBLE
	                                                           : ISC_QUEUE_CYCLE;
	sub.gpus = row->gpus;
	/* A validation is one cycle; a cycle experiment cycles max_rapid_cycles times. */
	sub.max_cycles = validation ? 1 : spec_max_cycles(row->spec_json);
	if (restore && row->cycle_count > 0) {
		int done = qrow.cycles_done;
		if (isc_queue_restore(o->q, &sub, row->created_at_ms, row->cycle_count, done, &err))
			isc_log(ISC_LOG_ERROR, "%s: %s", row->id, err.msg);
	} else if (isc_queue_submit(o->q, &sub, now, &err)) {
		isc_log(ISC_LOG_ERROR, "%s: %s", row->id, err.msg);
	}
	isc_queue_row_cleanup(&qrow);
	if (validation && strcmp(row->status, "enqueued") == 0)
		onprem_set_status(
		    o, e, "validating",
		    "burst_validation: one cycle on the on-prem pool before the cloud");
	else if (onprem && strcmp(row->status, "running") == 0)
		onprem_set_status(o, e, isc_queue_state_name(ISC_QUEUE_PAUSED),
		                  "iscd restarted; waits for its next run");
	onprem_record_queue_state(o, e, now);
}

/*
 * A cycle or interruptible experiment that waits because of the pool itself
 * says so in its status reason (its state stays enqueued or paused): one the
 * pool can never hold (it waits for an operator to add nodes; the queue skips
 * it, so it blocks nobody) and one whose nodes are unreachable or draining. Waiting
 * for its turn is what the queue line of `isc status` shows, so only the way
 * out of those two is written, once.
 */
static void say_training_wait(struct isc_onprem *o, struct onprem_exp *e,
                              const struct isc_queue_wait *w, const char *pool)
{
	enum isc_queue_blocker was = e->blocker;

	e->blocker = w->why;
	if (w->why == ISC_QUEUE_NEVER_FITS)
		onprem_set_status(
		    o, e, e->status,
		    "waits: the on-prem pool can never hold it: it needs %d node(s) of %d "
		    "GPU(s) and %s; an operator can add nodes (isc nodes add)",
		    w->nnodes, w->node_gpus, pool);
	else if (w->why == ISC_QUEUE_NODES_OUT)
		onprem_set_status(
		    o, e, e->status,
		    "waits for %d node(s) of %d GPU(s); %s: the others are unreachable or "
		    "draining",
		    w->nnodes, w->node_gpus, pool);
	else if (was == ISC_QUEUE_NEVER_FITS || was == ISC_QUEUE_NODES_OUT)
		onprem_set_status(o, e, e->status,
		                  "waits for its turn in the queue (isc status shows it)");
}

/*
 * Nothing waits in silence: a burst waiting for its validation cycle says
 * what the pool makes it wait for (once per change, in its status reason; its
 * place in the cycle queue and the expected start are in queue_state). One
 * that the pool can never hold, counting every registered node, is not
 * validated: the policy proves on the pool that an experiment runs before the
 * cloud is paid, and a pool that cannot run it cannot prove anything, while the
 * user asked for a burst. So it bursts at once without validation (its first
 * cloud run is STRONG_CYCLE_COUNT 1), with the reason in its timeline.
 */
void onprem_review_waits(struct isc_onprem *o)
{
	for (struct onprem_exp *e = o->exps, *next; e; e = next) {
		struct isc_queue_wait w;
		struct isc_err err;
		char pool[160];
		int stopping = 0;

		next = e->next; /* e may be dropped */
		if (e->run || e->cancel_seen || isc_queue_wait_info(o->q, e->qid, &w, &err) ||
		    w.why == e->blocker)
			continue;
		if (w.registered_nodes == 0)
			snprintf(pool, sizeof(pool), "the on-prem pool has no nodes");
		else
			snprintf(pool, sizeof(pool),
			         "the on-prem pool has %d node(s) of %d GPU(s) (%d up, %d free)",
			         w.registered_nodes, w.node_gpus, w.usable_nodes, w.free_nodes);
		if (!e->validation) {
			say_training_wait(o, e, &w, pool);
			continue;
		}
		switch (w.why) {
		case ISC_QUEUE_NEVER_FITS:
			if (isc_queue_cancel(o->q, e->qid, &stopping, &err) || stopping)
				continue;
			if (w.registered_nodes == 0)
				onprem_note(
				    o, e->id, "validation_skipped",
				    "burst_validation: %s, so it can never run the validation "
				    "cycle; bursting without it",
				    pool);
			else
				onprem_note(
				    o, e->id, "validation_skipped",
				    "burst_validation: the validation cycle needs %d node(s) of %d "
				    "GPU(s) and %s, so it can never run here; bursting without it",
				    w.nnodes, w.node_gpus, pool);
			onprem_set_status(
			    o, e, "placing",
			    "validation skipped: the on-prem pool can never hold it; bursting "
			    "without a validation cycle (cycle 1 in the cloud)");
			onprem_exp_drop(o, e);
			continue;
		case ISC_QUEUE_NODES_OUT:
			onprem_set_status(
			    o, e, "validating",
			    "burst_validation: its validation cycle waits for %d node(s) of %d "
			    "GPU(s); %s: the others are unreachable or draining",
			    w.nnodes, w.node_gpus, pool);
			break;
		case ISC_QUEUE_POOL_BUSY:
			onprem_set_status(
			    o, e, "validating",
			    "burst_validation: its validation cycle waits for %d free node(s) of "
			    "%d GPU(s); %s, the rest run other experiments",
			    w.nnodes, w.node_gpus, pool);
			break;
		default:
			break; /* it starts at this tick's decision */
		}
		e->blocker = w.why;
	}
}

/* A cancel: waiting ones end at once, running ones are stopped with grace. */
static void take_cancel(struct isc_onprem *o, struct onprem_exp *e, int64_t now)
{
	struct isc_err err;
	int stopping = 0;

	if (e->cancel_seen)
		return;
	e->cancel_seen = 1;
	if (isc_queue_cancel(o->q, e->qid, &stopping, &err)) {
		isc_log(ISC_LOG_WARN, "%s: %s", e->id, err.msg);
		return;
	}
	if (stopping) {
		onprem_note(o, e->id, "cancelling", "stopping the run with grace, then cancelled");
		return;
	}
	char who[256];
	isc_store_experiment_cancel_reason(o->store, e->id, who, sizeof(who));
	onprem_set_status(o, e, isc_queue_state_name(ISC_QUEUE_CANCELLED), "%s", who);
	onprem_record_queue_state(o, e, now);
	onprem_exp_drop(o, e);
}

void onprem_sync_experiments(struct isc_onprem *o, int64_t now)
{
	struct isc_experiment *list = NULL;
	struct isc_err err;
	size_t n = 0;

	if (isc_store_experiment_list_active(o->store, &list, &n, &err)) {
		isc_log(ISC_LOG_WARN, "reading experiments: %s", err.msg);
		return;
	}
	/* Known ones that ended elsewhere (a cancel of a waiting one): out of the queue. */
	for (struct onprem_exp *e = o->exps, *next; e; e = next) {
		int active = 0;
		next = e->next;
		for (size_t i = 0; i < n && !active; i++)
			active = strcmp(list[i].id, e->id) == 0;
		if (!active) {
			int stopping = 0;
			if (!e->cancel_seen &&
			    isc_queue_cancel(o->q, e->qid, &stopping, &err) == 0) {
				e->cancel_seen = 1;
				if (!stopping)
					onprem_exp_drop(o, e);
			}
		}
	}
	for (size_t i = 0; i < n; i++) {
		struct onprem_exp *e = exp_by_id(o, list[i].id);
		if (!e)
			take_new(o, &list[i], now);
		else if (list[i].cancel_requested)
			take_cancel(o, e, now);
	}
	isc_experiment_list_free(list, n);
}
