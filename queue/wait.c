/*
 * Reading the queue: an experiment's place, its expected next start, what it
 * waits for (isc_queue_wait_info), the current period and blocks.
 */
#include "queue/queue_int.h"

#include "shapes/shape.h"

static int position_of(const struct isc_queue *q, const struct qexp *e)
{
	int pos = 1;
	if (!queue_is_waiting(e->state))
		return 0;
	if (e->mode == ISC_QUEUE_CYCLE) {
		for (int s = q->cq_head; s != NONE; s = q->exps[s].cq_next, pos++)
			if (&q->exps[s] == e)
				return pos;
		return 0;
	}
	/* interruptible: members of this period in plan order, then the others in submission */
	for (size_t i = 0; i < q->n_plan; i++) {
		const struct qexp *m = &q->exps[q->plan[i]];
		if (!m->in_use || m->member_of != q->period_number || !queue_is_waiting(m->state))
			continue;
		if (m == e)
			return pos;
		pos++;
	}
	for (size_t i = 0; i < q->n_active; i++) {
		const struct qexp *m = &q->exps[q->active[i]];
		if (!m->in_use || m->member_of == q->period_number || !queue_is_waiting(m->state))
			continue;
		if (m == e)
			return pos;
		pos++;
	}
	return 0;
}

/*
 * An estimate, for people: a cycle experiment starts after the nodes of those
 * ahead of it have each had a cycle (waves of the usable pool); an
 * interruptible member at its block's start, a non-member at the next period.
 */
static int64_t next_start_of(const struct isc_queue *q, const struct qexp *e, int64_t now_ms)
{
	if (!queue_is_waiting(e->state))
		return -1;
	int usable = 0;
	for (size_t c = 0; c < q->n_classes; c++)
		usable += q->classes[c].usable;
	if (usable == 0)
		return -1;
	if (e->mode == ISC_QUEUE_CYCLE) {
		int64_t ahead = 0;
		int fit, n, p;
		for (int s = q->cq_head; s != NONE; s = q->exps[s].cq_next) {
			const struct qexp *m = &q->exps[s];
			if (queue_place(q, m, NULL, &n, &p, &fit) != NONE)
				ahead += n;
			if (m == e)
				break;
		}
		int free_now = 0;
		for (size_t c = 0; c < q->n_classes; c++)
			free_now += q->classes[c].free;
		if (ahead <= free_now)
			return now_ms;
		int64_t waves = (ahead - free_now + usable - 1) / usable;
		return now_ms + waves * q->cfg.cycle_ms;
	}
	if (e->member_of == q->period_number && !e->block_done && e->owed_ms > 0) {
		int64_t at = q->period_start_ms + q->rounds[e->round].start_ms;
		return at > now_ms ? at : now_ms;
	}
	return queue_period_end(q);
}

int isc_queue_info(const struct isc_queue *q, int64_t exp_id, int64_t now_ms,
                   struct isc_queue_info *out, struct isc_err *err)
{
	const struct qexp *e = queue_exp_get(q, exp_id);
	if (!e)
		return isc_err_set(err, ISC_ENOTFOUND, "experiment %lld is not queued",
		                   (long long)exp_id);
	*out = (struct isc_queue_info){
	    .exp_id = e->id,
	    .mode = e->mode,
	    .state = e->state,
	    .gpus = e->gpus,
	    .max_cycles = e->max_cycles,
	    .cycle_count = e->cycle_count,
	    .cycles_done = e->cycles_done,
	    .position = position_of(q, e),
	    .submitted_ms = e->submitted_ms,
	    .first_start_ms = e->first_start_ms,
	    .next_start_ms = next_start_of(q, e, now_ms),
	    .owed_ms = e->member_of == q->period_number ? e->owed_ms : 0,
	    .nnodes =
	        (e->state == ISC_QUEUE_RUNNING || e->state == ISC_QUEUE_STOPPING) ? e->nnodes : 0,
	};
	return 0;
}

int isc_queue_wait_info(const struct isc_queue *q, int64_t exp_id, struct isc_queue_wait *out,
                        struct isc_err *err)
{
	const struct qexp *e = queue_exp_get(q, exp_id);
	if (!e)
		return isc_err_set(err, ISC_ENOTFOUND, "experiment %lld is not queued",
		                   (long long)exp_id);
	*out = (struct isc_queue_wait){.why = ISC_QUEUE_READY};
	if (!queue_is_waiting(e->state))
		return 0;
	/* Per class: the layout, and how many nodes are registered (any state). */
	int best_reg = NONE, best_reg_n = 0, closest = NONE, closest_n = 0;
	for (size_t c = 0; c < q->n_classes; c++) {
		int n, p, registered = 0;
		if (isc_shape_layout(e->gpus, q->classes[c].gpus, &n, &p) != 0)
			continue;
		for (size_t i = 0; i < q->n_nodes; i++)
			registered += q->nodes[i].cls == (int)c;
		if (n <= ISC_QUEUE_MAX_GPUS && n <= registered &&
		    (best_reg == NONE || n < best_reg_n)) {
			best_reg = (int)c;
			best_reg_n = n;
		}
		if (closest == NONE ||
		    registered * q->classes[c].gpus > closest_n * q->classes[closest].gpus) {
			closest = (int)c;
			closest_n = registered;
		}
		(void)p;
	}
	if (best_reg == NONE) {
		out->why = ISC_QUEUE_NEVER_FITS;
		if (closest != NONE) {
			int n, p;
			if (isc_shape_layout(e->gpus, q->classes[closest].gpus, &n, &p) == 0)
				out->nnodes = n;
			out->node_gpus = q->classes[closest].gpus;
			out->free_nodes = q->classes[closest].free;
			out->usable_nodes = q->classes[closest].usable;
			out->registered_nodes = closest_n;
		}
		return 0;
	}
	int n, p, fit, c = queue_place(q, e, NULL, &n, &p, &fit);
	if (c == NONE) {
		/* the registered nodes could hold it; the up ones cannot */
		out->why = ISC_QUEUE_NODES_OUT;
		c = best_reg;
		n = best_reg_n;
	} else if (e->mode == ISC_QUEUE_INTERRUPTIBLE) {
		int cycles_wait = 0;
		for (int s = q->cq_head; s != NONE && !cycles_wait; s = q->exps[s].cq_next) {
			int n2, p2, f2;
			cycles_wait = queue_place(q, &q->exps[s], NULL, &n2, &p2, &f2) != NONE;
		}
		out->why = cycles_wait ? ISC_QUEUE_CYCLES_FIRST
		           : !fit      ? ISC_QUEUE_POOL_BUSY
		           : e->member_of == q->period_number && !e->block_done && e->owed_ms > 0 &&
		                   e->round <= q->cursor
		               ? ISC_QUEUE_READY
		               : ISC_QUEUE_NEXT_BLOCK;
	} else {
		out->why = fit ? ISC_QUEUE_READY : ISC_QUEUE_POOL_BUSY;
	}
	out->nnodes = n;
	out->node_gpus = q->classes[c].gpus;
	out->free_nodes = q->classes[c].free;
	out->usable_nodes = q->classes[c].usable;
	for (size_t i = 0; i < q->n_nodes; i++)
		out->registered_nodes += q->nodes[i].cls == c;
	return 0;
}

void isc_queue_period_get(const struct isc_queue *q, struct isc_queue_period *out)
{
	out->start_ms = q->period_start_ms;
	out->number = q->period_number;
	out->rounds = (int)q->n_rounds;
	out->members = (int)q->n_plan;
}

int isc_queue_block(const struct isc_queue *q, int64_t exp_id, int64_t *start_ms, int64_t *len_ms)
{
	const struct qexp *e = queue_exp_get(q, exp_id);
	if (!e || e->mode != ISC_QUEUE_INTERRUPTIBLE || e->member_of != q->period_number)
		return ISC_ENOTFOUND;
	*start_ms = q->rounds[e->round].start_ms;
	*len_ms = q->rounds[e->round].len_ms;
	return 0;
}
