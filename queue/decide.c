/*
 * The queue's decisions, per compute mode: interruptible periods apportioned
 * into rounds and blocks, the timeouts that end a cycle or a block, cycle
 * experiments started in queue order (pre-empting interruptible runs), then
 * interruptible ones in their blocks.
 */
#include "queue/queue_int.h"

#include <stdlib.h>

/* ---- periods ---- */

/*
 * Apportions the period starting at start_ms: every active interruptible
 * experiment that the pool can hold is packed (best fit, largest first) into
 * rounds whose node needs fit the usable pool; the period is split into as
 * many contiguous blocks as rounds, the remainder going 1 ms each to the
 * first ones, so the blocks sum to the period exactly.
 */
static int apportion(struct isc_queue *q, int64_t start_ms)
{
	/* compact the active list, dropping ended experiments */
	size_t w = 0;
	for (size_t i = 0; i < q->n_active; i++) {
		struct qexp *e = &q->exps[q->active[i]];
		if (e->in_use && e->mode == ISC_QUEUE_INTERRUPTIBLE && !queue_is_final(e->state))
			q->active[w++] = q->active[i];
	}
	q->n_active = w;

	size_t nc = q->n_classes ? q->n_classes : 1;
	int maxroom = 0;
	for (size_t c = 0; c < q->n_classes; c++)
		if (q->classes[c].usable > maxroom)
			maxroom = q->classes[c].usable;
	/* (nodes, slot) pairs; per round and class the room left and the stack link */
	int64_t *key = malloc((q->n_active + 1) * 2 * sizeof(*key));
	int *used = calloc((q->n_active + 1) * nc, sizeof(*used));
	int *next = malloc((q->n_active + 1) * nc * sizeof(*next));
	int *head = malloc(nc * (size_t)(maxroom + 1) * sizeof(*head));
	size_t *count = calloc(q->n_active + 2, sizeof(*count));
	int rc = 0;
	if (head)
		for (size_t i = 0; i < nc * (size_t)(maxroom + 1); i++)
			head[i] = NONE;
	if (!key || !used || !next || !head || !count ||
	    GROW(q->plan, q->cap_plan, q->n_active + 1) ||
	    GROW(q->rounds, q->cap_rounds, q->n_active + 1)) {
		rc = ISC_ENOMEM;
		goto out;
	}
	q->period_number++;
	q->period_start_ms = start_ms;
	q->n_rounds = 0;
	q->n_plan = 0;
	q->cursor = 0;
	q->newcomers = 0;
	q->pool_changed = 0;

	/* largest first, submission order among equals: a counting sort by node count (the
	 * active list is in submission order); key[] holds (nodes, slot) pairs */
	size_t by_n[ISC_QUEUE_MAX_GPUS + 2] = {0};
	size_t nk = 0;
	for (size_t i = 0; i < q->n_active; i++) {
		struct qexp *e = &q->exps[q->active[i]];
		int n, p, fit;
		e->member_of = -1;
		e->round = NONE;
		int c = queue_place(q, e, NULL, &n, &p, &fit);
		if (c == NONE) {
			next[i] = 0; /* the pool cannot hold it now; it waits for nodes */
			continue;
		}
		e->cls = c;
		next[i] = n; /* borrowed as scratch until the packing below */
		by_n[ISC_QUEUE_MAX_GPUS - n + 1]++;
		nk++;
	}
	for (size_t v = 1; v < ISC_QUEUE_MAX_GPUS + 2; v++)
		by_n[v] += by_n[v - 1];
	for (size_t i = 0; i < q->n_active; i++) {
		int n = next[i];
		if (n == 0)
			continue;
		size_t at = by_n[ISC_QUEUE_MAX_GPUS - n]++;
		key[at * 2] = n;
		key[at * 2 + 1] = q->active[i];
	}

	/*
	 * Best fit, largest first: per class, the rounds are kept in stacks by the room they
	 * have left in that class (head[c][room], linked through next[round][c]), so finding a
	 * round is a walk up from the room needed, not a scan of every round.
	 */
	for (size_t i = 0; i < nk; i++) {
		struct qexp *e = &q->exps[key[i * 2 + 1]];
		int n = (int)key[i * 2], c = e->cls, r = NONE;
		for (int v = n; v <= maxroom && r == NONE; v++) {
			int *h = &head[(size_t)c * (size_t)(maxroom + 1) + (size_t)v];
			if (*h == NONE)
				continue;
			r = *h; /* pop the round, it moves to the stack of its new room */
			*h = next[(size_t)r * nc + (size_t)c];
			used[(size_t)r * nc + (size_t)c] = v - n;
		}
		if (r == NONE) {
			r = (int)q->n_rounds;
			q->rounds[q->n_rounds++] = (struct qround){0};
			for (size_t k = 0; k < nc; k++) {
				int room = k == (size_t)c ? q->classes[k].usable - n
				                          : q->classes[k].usable;
				int *h = &head[k * (size_t)(maxroom + 1) + (size_t)room];
				next[(size_t)r * nc + k] = *h;
				*h = r;
			}
		} else {
			int *h = &head[(size_t)c * (size_t)(maxroom + 1) +
			               (size_t)used[(size_t)r * nc + (size_t)c]];
			next[(size_t)r * nc + (size_t)c] = *h;
			*h = r;
		}
		e->round = r;
		e->member_of = q->period_number;
		e->block_done = 0;
		q->rounds[r].pending++;
		count[r + 1]++;
	}

	int64_t k = (int64_t)q->n_rounds, at = 0;
	for (size_t r = 0; r < q->n_rounds; r++) {
		q->rounds[r].start_ms = at;
		q->rounds[r].len_ms = q->cfg.period_ms / k + ((int64_t)r < q->cfg.period_ms % k);
		at += q->rounds[r].len_ms;
	}
	/* the plan: members in round order, submission order within a round (a counting sort) */
	for (size_t r = 1; r <= q->n_rounds; r++)
		count[r] += count[r - 1];
	for (size_t i = 0; i < q->n_active; i++) {
		struct qexp *e = &q->exps[q->active[i]];
		if (e->member_of != q->period_number)
			continue;
		e->block_ms = q->rounds[e->round].len_ms;
		e->owed_ms = e->block_ms;
		q->plan[count[e->round]++] = q->active[i];
	}
	q->n_plan = nk;
out:
	free(key);
	free(used);
	free(next);
	free(head);
	free(count);
	return rc;
}

/* ---- deciding ---- */

int64_t queue_period_end(const struct isc_queue *q)
{
	return q->period_start_ms + q->cfg.period_ms;
}

static int decide_periods(struct isc_queue *q, int64_t now_ms)
{
	int rolled = 0;
	int64_t start = q->period_start_ms;
	if (now_ms >= queue_period_end(q)) {
		int64_t passed = (now_ms - q->period_start_ms) / q->cfg.period_ms;
		start = q->period_start_ms + passed * q->cfg.period_ms;
		rolled = 1;
	} else if ((q->newcomers > 0 || q->pool_changed) && q->n_active_live > 0) {
		/* Every member has had its block (or none was apportioned): a newcomer need not
		 * wait for the period's end while the pool idles, so a new period starts now. */
		int pending = 0;
		for (size_t r = 0; r < q->n_rounds; r++)
			pending += q->rounds[r].pending;
		if (pending == 0) {
			start = now_ms;
			rolled = 1;
		}
	}
	if (!rolled)
		return 0;
	for (size_t i = 0; i < q->n_running; i++) {
		struct qexp *e = &q->exps[q->running[i]];
		if (e->mode == ISC_QUEUE_INTERRUPTIBLE && e->state == ISC_QUEUE_RUNNING) {
			int rc = queue_stop_run(q, e, ISC_QUEUE_STOP_PERIOD_END);
			if (rc)
				return rc;
		}
	}
	return apportion(q, start);
}

static int decide_timeouts(struct isc_queue *q, int64_t now_ms)
{
	for (size_t i = 0; i < q->n_running; i++) {
		struct qexp *e = &q->exps[q->running[i]];
		int rc = 0;
		if (e->state != ISC_QUEUE_RUNNING)
			continue;
		if (e->cancel_requested)
			rc = queue_stop_run(q, e, ISC_QUEUE_STOP_CANCELLED);
		else if (now_ms - e->run_started_ms < e->run_allot_ms)
			continue;
		else if (e->mode == ISC_QUEUE_CYCLE)
			rc = queue_stop_run(q, e,
			                    e->cycles_done + 1 >= e->max_cycles
			                        ? ISC_QUEUE_STOP_LAST_CYCLE
			                        : ISC_QUEUE_STOP_CYCLE_END);
		else
			rc = queue_stop_run(q, e, ISC_QUEUE_STOP_BLOCK_END);
		if (rc)
			return rc;
	}
	return 0;
}

/* Pre-empts running interruptible runs on class c, largest first, until avail >= need. */
static int preempt_for(struct isc_queue *q, int c, int need, int *avail)
{
	while (*avail < need) {
		struct qexp *victim = NULL;
		for (size_t i = 0; i < q->n_running; i++) {
			struct qexp *e = &q->exps[q->running[i]];
			if (e->mode == ISC_QUEUE_INTERRUPTIBLE && e->state == ISC_QUEUE_RUNNING &&
			    e->cls == c && (!victim || e->nnodes > victim->nnodes))
				victim = e;
		}
		if (!victim)
			return 0;
		int before = q->classes[c].stopping;
		int rc = queue_stop_run(q, victim, ISC_QUEUE_STOP_PREEMPTED);
		if (rc)
			return rc;
		*avail += q->classes[c].stopping - before;
	}
	return 0;
}

/*
 * The cycle queue in order: each experiment that fits in the nodes not
 * reserved for those ahead starts; one that does not reserves its nodes and
 * pre-empts interruptible runs to get them. Stops walking once nothing more
 * can start or be pre-empted. *waiting counts placeable experiments seen
 * waiting (at least one when any waits).
 */
static int decide_cycles(struct isc_queue *q, int64_t now_ms, int *waiting)
{
	int reserved_small[16] = {0};
	int *reserved = q->n_classes <= 16 ? reserved_small : calloc(q->n_classes, sizeof(int));
	int rc = 0;
	if (!reserved)
		return ISC_ENOMEM;
	*waiting = 0;
	for (int s = q->cq_head; s != NONE;) {
		struct qexp *e = &q->exps[s];
		int next = e->cq_next;
		int n, p, fit;
		int c = queue_place(q, e, reserved, &n, &p, &fit);
		if (c != NONE && fit) {
			rc = queue_start_run(q, e, c, n, p, q->cfg.cycle_ms, now_ms);
			if (rc)
				break;
		} else if (c != NONE) {
			(*waiting)++;
			int avail = q->classes[c].free + q->classes[c].stopping - reserved[c];
			rc = preempt_for(q, c, n, &avail);
			if (rc)
				break;
			reserved[c] += n;
			/* nothing left to start or pre-empt anywhere: the rest of the queue waits
			 */
			int more = 0;
			for (size_t k = 0; k < q->n_classes && !more; k++)
				more = q->classes[k].free > reserved[k];
			for (size_t i = 0; i < q->n_running && !more; i++) {
				struct qexp *r = &q->exps[q->running[i]];
				more = r->mode == ISC_QUEUE_INTERRUPTIBLE &&
				       r->state == ISC_QUEUE_RUNNING;
			}
			if (!more)
				break; /* one waiting is enough to hold interruptible back */
		}
		s = next;
	}
	if (reserved != reserved_small)
		free(reserved);
	return rc;
}

static int decide_interruptible(struct isc_queue *q, int64_t now_ms, int *starts)
{
	*starts = 0;
	if (q->n_plan == 0)
		return 0;
	int64_t into = now_ms - q->period_start_ms;
	while ((size_t)q->cursor + 1 < q->n_rounds &&
	       (q->rounds[q->cursor].pending <= 0 || into >= q->rounds[q->cursor + 1].start_ms))
		q->cursor++;
	int64_t left = queue_period_end(q) - now_ms;
	if (left <= 0)
		return 0;
	int blocked_round = -1; /* a member that could not start holds back later rounds */
	for (size_t i = 0; i < q->n_plan; i++) {
		struct qexp *e = &q->exps[q->plan[i]];
		if (!e->in_use || e->member_of != q->period_number || !queue_is_waiting(e->state) ||
		    e->owed_ms <= 0 || e->block_done)
			continue;
		if (e->round > q->cursor || (blocked_round >= 0 && e->round > blocked_round))
			break;
		int n, p, fit;
		int c = queue_place(q, e, NULL, &n, &p, &fit);
		if (c == NONE || !fit) {
			if (blocked_round < 0)
				blocked_round = e->round;
			continue;
		}
		int rc =
		    queue_start_run(q, e, c, n, p, e->owed_ms < left ? e->owed_ms : left, now_ms);
		if (rc)
			return rc;
		(*starts)++;
	}
	return 0;
}

const struct isc_queue_decision *isc_queue_decide(struct isc_queue *q, int64_t now_ms, size_t *n)
{
	int waiting = 0, starts = 0;
	q->n_dec = 0;
	if (decide_periods(q, now_ms) || decide_timeouts(q, now_ms) ||
	    decide_cycles(q, now_ms, &waiting)) {
		*n = q->n_dec;
		return q->dec; /* out of memory part way: what was decided stands */
	}
	if (waiting == 0)
		decide_interruptible(q, now_ms, &starts);
	q->last_cycle_waiting = waiting;
	q->last_int_starts = starts;
	*n = q->n_dec;
	/* START decisions point at node ids inside the experiments, which stay put until the
	 * next call: the slot array only grows in isc_queue_submit/restore. */
	return q->dec;
}
