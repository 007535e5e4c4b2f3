/*
 * The queue's runs: starting and stopping one (a decision for the caller to
 * carry out), the nodes it holds, and what its end means for the experiment.
 */
#include "queue/queue_int.h"

static int emit(struct isc_queue *q, const struct isc_queue_decision *d)
{
	if (GROW(q->dec, q->cap_dec, q->n_dec + 1))
		return ISC_ENOMEM;
	q->dec[q->n_dec++] = *d;
	return 0;
}

static void running_remove(struct isc_queue *q, struct qexp *e)
{
	size_t pos = (size_t)e->running_pos;
	size_t last = q->n_running - 1;
	if (pos != last) {
		q->running[pos] = q->running[last];
		q->exps[q->running[pos]].running_pos = (int)pos;
	}
	q->n_running--;
	e->running_pos = NONE;
}

/* Starts e on nnodes free nodes of class cls; emits the START decision. */
int queue_start_run(struct isc_queue *q, struct qexp *e, int cls, int nnodes, int nproc,
                    int64_t allot_ms, int64_t now_ms)
{
	if (GROW(q->running, q->cap_running, q->n_running + 1))
		return ISC_ENOMEM;
	int k = 0;
	for (size_t i = 0; i < q->n_nodes && k < nnodes; i++) {
		struct qnode *nd = &q->nodes[i];
		if (nd->cls != cls || nd->state != ISC_QUEUE_NODE_UP || nd->owner != NONE)
			continue;
		queue_run_of(q, e)->node_idx[k] = (int)i;
		queue_run_of(q, e)->node_ids[k] = nd->id;
		k++;
	}
	if (k < nnodes)
		return ISC_EINVALID; /* the class counts promised them: a bug, refuse rather than
		                        share */
	int s = queue_slot_of(q, e);
	for (int i = 0; i < k; i++)
		q->nodes[queue_run_of(q, e)->node_idx[i]].owner = s;
	q->classes[cls].free -= nnodes;
	queue_cq_remove(q, e);
	int resume = e->cycle_count > 0;
	e->state = ISC_QUEUE_RUNNING;
	e->cls = cls;
	e->nnodes = nnodes;
	e->nproc = nproc;
	e->cycle_count = isc_queue_next_cycle(e->cycle_count);
	e->run_started_ms = now_ms;
	e->run_allot_ms = allot_ms;
	e->run_period = q->period_number;
	e->cancel_requested = 0;
	if (e->first_start_ms < 0)
		e->first_start_ms = now_ms;
	e->running_pos = (int)q->n_running;
	q->running[q->n_running++] = s;
	struct isc_queue_decision d = {.action = ISC_QUEUE_START,
	                               .exp_id = e->id,
	                               .resume = resume,
	                               .cycle_count = e->cycle_count,
	                               .cycle_time_ms = allot_ms,
	                               .nnodes = nnodes,
	                               .nproc = nproc,
	                               .node_ids = queue_run_of(q, e)->node_ids};
	return emit(q, &d);
}

int queue_stop_run(struct isc_queue *q, struct qexp *e, enum isc_queue_stop_reason why)
{
	e->state = ISC_QUEUE_STOPPING;
	e->stop_reason = why;
	for (int i = 0; i < e->nnodes; i++)
		if (q->nodes[queue_run_of(q, e)->node_idx[i]].state == ISC_QUEUE_NODE_UP)
			q->classes[e->cls].stopping++;
	struct isc_queue_decision d = {.action = ISC_QUEUE_STOP, .exp_id = e->id, .reason = why};
	return emit(q, &d);
}

/* Gives e's nodes back; a node that went down or is draining stays out of the free count. */
static void release_nodes(struct isc_queue *q, struct qexp *e, int was_stopping)
{
	for (int i = 0; i < e->nnodes; i++) {
		struct qnode *nd = &q->nodes[queue_run_of(q, e)->node_idx[i]];
		nd->owner = NONE;
		if (nd->state == ISC_QUEUE_NODE_UP) {
			q->classes[nd->cls].free++;
			if (was_stopping)
				q->classes[nd->cls].stopping--;
		}
	}
	e->nnodes = 0;
	running_remove(q, e);
}

int isc_queue_run_ended(struct isc_queue *q, int64_t exp_id, enum isc_queue_outcome how,
                        int64_t now_ms, enum isc_queue_state *final, struct isc_err *err)
{
	struct qexp *e = queue_exp_get(q, exp_id);
	if (!e)
		return isc_err_set(err, ISC_ENOTFOUND, "experiment %lld is not queued",
		                   (long long)exp_id);
	if (e->state != ISC_QUEUE_RUNNING && e->state != ISC_QUEUE_STOPPING)
		return isc_err_set(err, ISC_ECONFLICT, "experiment %lld is not running (%s)",
		                   (long long)exp_id, isc_queue_state_name(e->state));
	int was_stopping = e->state == ISC_QUEUE_STOPPING;
	int64_t ran = now_ms - e->run_started_ms;
	if (ran < 0)
		ran = 0;
	if (e->mode == ISC_QUEUE_INTERRUPTIBLE && e->member_of == q->period_number &&
	    e->run_period == q->period_number)
		e->owed_ms = ran >= e->owed_ms ? 0 : e->owed_ms - ran;
	release_nodes(q, e, was_stopping);

	switch (how) {
	case ISC_QUEUE_EXIT_OK:
		queue_finish(q, e, ISC_QUEUE_COMPLETED);
		break;
	case ISC_QUEUE_EXIT_FAILED:
		queue_finish(q, e, ISC_QUEUE_FAILED);
		break;
	case ISC_QUEUE_NODE_LOST:
		/* an interruption: back in front, the next run counts one more start */
		e->state = ISC_QUEUE_PAUSED;
		if (e->mode == ISC_QUEUE_CYCLE)
			queue_cq_append(q, e, 1);
		break;
	case ISC_QUEUE_STOPPED:
		if (!was_stopping) {
			/* stopped by something other than the queue: an interruption too */
			e->state = ISC_QUEUE_PAUSED;
			if (e->mode == ISC_QUEUE_CYCLE)
				queue_cq_append(q, e, 1);
			break;
		}
		switch (e->stop_reason) {
		case ISC_QUEUE_STOP_CYCLE_END:
			e->cycles_done++;
			e->state = ISC_QUEUE_PAUSED;
			queue_cq_append(q, e, 0);
			break;
		case ISC_QUEUE_STOP_LAST_CYCLE:
			e->cycles_done++;
			queue_finish(q, e, ISC_QUEUE_COMPLETED);
			break;
		case ISC_QUEUE_STOP_BLOCK_END:
			if (e->run_period == q->period_number) {
				e->owed_ms = 0;
				queue_leave_round(q, e);
			}
			e->state = ISC_QUEUE_PAUSED;
			break;
		case ISC_QUEUE_STOP_PERIOD_END:
		case ISC_QUEUE_STOP_PREEMPTED:
			e->state = ISC_QUEUE_PAUSED;
			break;
		case ISC_QUEUE_STOP_CANCELLED:
			queue_finish(q, e, ISC_QUEUE_CANCELLED);
			break;
		}
		break;
	default:
		return isc_err_set(err, ISC_EINVALID, "experiment %lld: unknown run outcome %d",
		                   (long long)exp_id, (int)how);
	}
	if (e->mode == ISC_QUEUE_INTERRUPTIBLE && e->state == ISC_QUEUE_PAUSED &&
	    e->member_of == q->period_number && e->owed_ms == 0)
		queue_leave_round(q, e);
	if (final)
		*final = e->state;
	return 0;
}
