/* The queue's invariants (isc_queue_check), for tests and the simulator. */
#include "queue/queue_int.h"

int isc_queue_check(const struct isc_queue *q, struct isc_err *err)
{
	/* nodes: held by one run that lists them; class counts match */
	for (size_t c = 0; c < q->n_classes; c++) {
		int usable = 0, free_n = 0;
		for (size_t i = 0; i < q->n_nodes; i++) {
			const struct qnode *nd = &q->nodes[i];
			if (nd->cls != (int)c || nd->state != ISC_QUEUE_NODE_UP)
				continue;
			usable++;
			free_n += nd->owner == NONE;
		}
		if (usable != q->classes[c].usable || free_n != q->classes[c].free)
			return isc_err_set(
			    err, ISC_EINVALID,
			    "class of %d-GPU nodes: counts %d usable, %d free; nodes say "
			    "%d, %d",
			    q->classes[c].gpus, q->classes[c].usable, q->classes[c].free, usable,
			    free_n);
		if (q->classes[c].free < 0 || q->classes[c].stopping < 0)
			return isc_err_set(err, ISC_EINVALID, "negative node count");
	}
	for (size_t i = 0; i < q->n_nodes; i++) {
		int o = q->nodes[i].owner;
		if (o == NONE)
			continue;
		const struct qexp *e = &q->exps[o];
		int listed = 0;
		for (int k = 0; k < e->nnodes; k++)
			listed += queue_run_of(q, e)->node_idx[k] == (int)i;
		if (listed != 1 ||
		    (e->state != ISC_QUEUE_RUNNING && e->state != ISC_QUEUE_STOPPING))
			return isc_err_set(
			    err, ISC_EINVALID,
			    "node %lld is held by experiment %lld (%s), listed %d times",
			    (long long)q->nodes[i].id, (long long)e->id,
			    isc_queue_state_name(e->state), listed);
	}
	for (size_t r = 0; r < q->n_running; r++) {
		const struct qexp *e = &q->exps[q->running[r]];
		if (e->nnodes * e->nproc != e->gpus || e->nproc > q->classes[e->cls].gpus)
			return isc_err_set(err, ISC_EINVALID,
			                   "experiment %lld: %d node(s) x %d GPU(s) for %d GPUs on "
			                   "%d-GPU nodes",
			                   (long long)e->id, e->nnodes, e->nproc, e->gpus,
			                   q->classes[e->cls].gpus);
		for (int k = 0; k < e->nnodes; k++)
			if (q->nodes[queue_run_of(q, e)->node_idx[k]].owner != q->running[r] ||
			    q->nodes[queue_run_of(q, e)->node_idx[k]].cls != e->cls)
				return isc_err_set(
				    err, ISC_EINVALID,
				    "experiment %lld lists node %lld it does not hold",
				    (long long)e->id, (long long)queue_run_of(q, e)->node_ids[k]);
	}
	/* cycle pre-empts interruptible */
	if (q->last_cycle_waiting > 0 && q->last_int_starts > 0)
		return isc_err_set(
		    err, ISC_EINVALID,
		    "%d interruptible run(s) started while %d cycle experiment(s) waited",
		    q->last_int_starts, q->last_cycle_waiting);
	for (int s = q->cq_head; s != NONE; s = q->exps[s].cq_next) {
		const struct qexp *h = &q->exps[s];
		int n, p, fit;
		int c = queue_place(q, h, NULL, &n, &p, &fit);
		if (c == NONE)
			continue; /* the pool cannot hold it; it does not block anyone */
		if (fit)
			break; /* it starts at the next decision */
		if (q->classes[c].free + q->classes[c].stopping >= n)
			break;
		for (size_t r = 0; r < q->n_running; r++) {
			const struct qexp *e = &q->exps[q->running[r]];
			if (e->mode == ISC_QUEUE_INTERRUPTIBLE && e->state == ISC_QUEUE_RUNNING &&
			    e->cls == c)
				return isc_err_set(
				    err, ISC_EINVALID,
				    "cycle experiment %lld waits for %d node(s) while "
				    "interruptible %lld runs on them",
				    (long long)h->id, n, (long long)e->id);
		}
		break;
	}
	/* blocks: contiguous, summing to the period, each member's block its round's */
	int64_t at = 0;
	for (size_t r = 0; r < q->n_rounds; r++) {
		if (q->rounds[r].start_ms != at || q->rounds[r].len_ms <= 0)
			return isc_err_set(err, ISC_EINVALID,
			                   "period %lld: block %zu starts at %lld, "
			                   "not %lld",
			                   (long long)q->period_number, r,
			                   (long long)q->rounds[r].start_ms, (long long)at);
		at += q->rounds[r].len_ms;
	}
	if (q->n_rounds && at != q->cfg.period_ms)
		return isc_err_set(
		    err, ISC_EINVALID, "period %lld: blocks sum to %lld ms, not %lld",
		    (long long)q->period_number, (long long)at, (long long)q->cfg.period_ms);
	for (size_t i = 0; i < q->n_plan; i++) {
		const struct qexp *e = &q->exps[q->plan[i]];
		if (!e->in_use || e->member_of != q->period_number)
			continue;
		if (e->block_ms != q->rounds[e->round].len_ms || e->owed_ms > e->block_ms ||
		    e->owed_ms < 0)
			return isc_err_set(
			    err, ISC_EINVALID,
			    "experiment %lld: block %lld ms, owes %lld ms, round of %lld ms",
			    (long long)e->id, (long long)e->block_ms, (long long)e->owed_ms,
			    (long long)q->rounds[e->round].len_ms);
	}
	return 0;
}
