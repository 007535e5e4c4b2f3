/*
 * The cycle and interruptible queue's state (queue.h has the rules, queue_int.h
 * the layout): names, the id table, the lifecycle, nodes and experiments.
 * Everything in queue/ is arithmetic on in-memory state: no clock, no store,
 * no network, so the same code answers iscd's ticks and the simulator's
 * millions of steps.
 */
#include "queue/queue_int.h"

#include "shapes/shape.h"

#include <stdlib.h>
#include <string.h>

int queue_slot_of(const struct isc_queue *q, const struct qexp *e)
{
	return (int)(e - q->exps);
}

struct qrun *queue_run_of(const struct isc_queue *q, const struct qexp *e)
{
	return &q->runs[e - q->exps];
}

int isc_queue_next_cycle(int cycle_count)
{
	return cycle_count < 0 ? 1 : cycle_count + 1;
}

void isc_queue_config_default(struct isc_queue_config *cfg)
{
	cfg->cycle_ms = ISC_QUEUE_CYCLE_MS_DEFAULT;
	cfg->period_ms = ISC_QUEUE_PERIOD_MS_DEFAULT;
}

const char *isc_queue_state_name(enum isc_queue_state st)
{
	switch (st) {
	case ISC_QUEUE_ENQUEUED:
		return "enqueued";
	case ISC_QUEUE_RUNNING:
	case ISC_QUEUE_STOPPING:
		return "running";
	case ISC_QUEUE_PAUSED:
		return "paused";
	case ISC_QUEUE_COMPLETED:
		return "completed";
	case ISC_QUEUE_FAILED:
		return "failed";
	case ISC_QUEUE_CANCELLED:
		return "cancelled";
	}
	return "unknown";
}

int isc_queue_mode_parse(const char *s, enum isc_queue_mode *out)
{
	if (s && strcmp(s, "cycle") == 0)
		*out = ISC_QUEUE_CYCLE;
	else if (s && strcmp(s, "interruptible") == 0)
		*out = ISC_QUEUE_INTERRUPTIBLE;
	else
		return ISC_EINVALID;
	return 0;
}

const char *isc_queue_stop_reason_name(enum isc_queue_stop_reason r)
{
	switch (r) {
	case ISC_QUEUE_STOP_CYCLE_END:
		return "cycle over";
	case ISC_QUEUE_STOP_LAST_CYCLE:
		return "last cycle over";
	case ISC_QUEUE_STOP_BLOCK_END:
		return "block used up";
	case ISC_QUEUE_STOP_PERIOD_END:
		return "period over";
	case ISC_QUEUE_STOP_PREEMPTED:
		return "pre-empted by a cycle experiment";
	case ISC_QUEUE_STOP_CANCELLED:
		return "cancelled";
	}
	return "unknown";
}

int queue_is_final(enum isc_queue_state st)
{
	return st == ISC_QUEUE_COMPLETED || st == ISC_QUEUE_FAILED || st == ISC_QUEUE_CANCELLED;
}

int queue_is_waiting(enum isc_queue_state st)
{
	return st == ISC_QUEUE_ENQUEUED || st == ISC_QUEUE_PAUSED;
}

/* Grows *arr (of elem bytes) to hold at least need elements. */
int queue_grow(void **arr, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t ncap = *cap ? *cap : 16;
	while (ncap < need) {
		if (ncap > SIZE_MAX / 2 / elem)
			return ISC_ENOMEM;
		ncap *= 2;
	}
	void *p = realloc(*arr, ncap * elem);
	if (!p)
		return ISC_ENOMEM;
	*arr = p;
	*cap = ncap;
	return 0;
}

/* ---- id table ---- */

static size_t ht_hash(int64_t id, size_t cap)
{
	uint64_t x = (uint64_t)id * 0x9e3779b97f4a7c15ull;
	return (size_t)(x >> 17) & (cap - 1);
}

static int ht_find(const struct isc_queue *q, int64_t id)
{
	if (!q->ht_cap)
		return NONE;
	for (size_t i = ht_hash(id, q->ht_cap);; i = (i + 1) & (q->ht_cap - 1)) {
		if (!q->ht_vals[i])
			return NONE;
		if (q->ht_keys[i] == id)
			return q->ht_vals[i] - 1;
	}
}

static void ht_put_raw(int64_t *keys, int *vals, size_t cap, int64_t id, int slot)
{
	size_t i = ht_hash(id, cap);
	while (vals[i])
		i = (i + 1) & (cap - 1);
	keys[i] = id;
	vals[i] = slot + 1;
}

static int ht_put(struct isc_queue *q, int64_t id, int slot)
{
	if ((q->ht_count + 1) * 2 > q->ht_cap) {
		size_t ncap = q->ht_cap ? q->ht_cap * 2 : 64;
		int64_t *keys = calloc(ncap, sizeof(*keys));
		int *vals = calloc(ncap, sizeof(*vals));
		if (!keys || !vals) {
			free(keys);
			free(vals);
			return ISC_ENOMEM;
		}
		for (size_t i = 0; i < q->ht_cap; i++)
			if (q->ht_vals[i])
				ht_put_raw(keys, vals, ncap, q->ht_keys[i], q->ht_vals[i] - 1);
		free(q->ht_keys);
		free(q->ht_vals);
		q->ht_keys = keys;
		q->ht_vals = vals;
		q->ht_cap = ncap;
	}
	ht_put_raw(q->ht_keys, q->ht_vals, q->ht_cap, id, slot);
	q->ht_count++;
	return 0;
}

/* Removes id with backward-shift deletion, so lookups never need tombstones. */
static void ht_del(struct isc_queue *q, int64_t id)
{
	size_t mask = q->ht_cap - 1, i = ht_hash(id, q->ht_cap);
	while (q->ht_vals[i] && q->ht_keys[i] != id)
		i = (i + 1) & mask;
	if (!q->ht_vals[i])
		return;
	q->ht_vals[i] = 0;
	q->ht_count--;
	for (size_t j = (i + 1) & mask; q->ht_vals[j]; j = (j + 1) & mask) {
		size_t home = ht_hash(q->ht_keys[j], q->ht_cap);
		/* move j back to the hole i when its home is not within (i, j] */
		int keep = (i <= j) ? (home > i && home <= j) : (home > i || home <= j);
		if (!keep) {
			q->ht_keys[i] = q->ht_keys[j];
			q->ht_vals[i] = q->ht_vals[j];
			q->ht_vals[j] = 0;
			i = j;
		}
	}
}

/* ---- lifecycle ---- */

int isc_queue_new(const struct isc_queue_config *cfg, int64_t now_ms, struct isc_queue **out,
                  struct isc_err *err)
{
	if (!cfg || cfg->cycle_ms < 1 || cfg->period_ms < 1)
		return isc_err_set(err, ISC_EINVALID,
		                   "queue: cycle and period lengths must be at least 1 ms");
	struct isc_queue *q = calloc(1, sizeof(*q));
	if (!q)
		return isc_err_set(err, ISC_ENOMEM, "queue: out of memory");
	q->cfg = *cfg;
	q->cq_head = q->cq_tail = NONE;
	q->period_start_ms = now_ms;
	*out = q;
	return 0;
}

void isc_queue_free(struct isc_queue *q)
{
	if (!q)
		return;
	free(q->nodes);
	free(q->classes);
	free(q->exps);
	free(q->runs);
	free(q->free_slots);
	free(q->ht_keys);
	free(q->ht_vals);
	free(q->running);
	free(q->active);
	free(q->rounds);
	free(q->plan);
	free(q->dec);
	free(q);
}

/* ---- nodes ---- */

static int node_find(const struct isc_queue *q, int64_t id)
{
	for (size_t i = 0; i < q->n_nodes; i++)
		if (q->nodes[i].id == id)
			return (int)i;
	return NONE;
}

/* Adjusts the class counts for a node entering (+1) or leaving (-1) its current state. */
static void node_count(struct isc_queue *q, const struct qnode *nd, int sign)
{
	struct qclass *c = &q->classes[nd->cls];
	if (nd->state != ISC_QUEUE_NODE_UP)
		return;
	c->usable += sign;
	if (nd->owner == NONE)
		c->free += sign;
}

int isc_queue_node_add(struct isc_queue *q, int64_t node_id, int gpus, struct isc_err *err)
{
	if (gpus < 1)
		return isc_err_set(err, ISC_EINVALID, "node %lld: gpus must be at least 1, not %d",
		                   (long long)node_id, gpus);
	if (node_find(q, node_id) != NONE)
		return isc_err_set(err, ISC_ECONFLICT, "node %lld is already in the pool",
		                   (long long)node_id);
	size_t c;
	for (c = 0; c < q->n_classes && q->classes[c].gpus != gpus; c++)
		;
	if (c == q->n_classes) {
		if (GROW(q->classes, q->cap_classes, c + 1))
			return isc_err_set(err, ISC_ENOMEM, "queue: out of memory");
		q->classes[c] = (struct qclass){.gpus = gpus};
		q->n_classes++;
	}
	if (GROW(q->nodes, q->cap_nodes, q->n_nodes + 1))
		return isc_err_set(err, ISC_ENOMEM, "queue: out of memory");
	struct qnode *nd = &q->nodes[q->n_nodes++];
	*nd =
	    (struct qnode){.id = node_id, .cls = (int)c, .state = ISC_QUEUE_NODE_UP, .owner = NONE};
	node_count(q, nd, +1);
	q->pool_changed = 1;
	return 0;
}

int isc_queue_node_set_state(struct isc_queue *q, int64_t node_id, enum isc_queue_node_state st,
                             struct isc_err *err)
{
	int i = node_find(q, node_id);
	if (i == NONE)
		return isc_err_set(err, ISC_ENOTFOUND, "node %lld is not in the pool",
		                   (long long)node_id);
	struct qnode *nd = &q->nodes[i];
	/* a node held by a stopping run counts as "free soon" only while it is up */
	int held_stopping = nd->owner != NONE && q->exps[nd->owner].state == ISC_QUEUE_STOPPING;
	if (held_stopping && nd->state == ISC_QUEUE_NODE_UP)
		q->classes[nd->cls].stopping--;
	node_count(q, nd, -1);
	if (st == ISC_QUEUE_NODE_UP && nd->state != ISC_QUEUE_NODE_UP)
		q->pool_changed = 1;
	nd->state = st;
	node_count(q, nd, +1);
	if (held_stopping && nd->state == ISC_QUEUE_NODE_UP)
		q->classes[nd->cls].stopping++;
	return 0;
}

int isc_queue_node_remove(struct isc_queue *q, int64_t node_id, struct isc_err *err)
{
	int i = node_find(q, node_id);
	if (i == NONE)
		return isc_err_set(err, ISC_ENOTFOUND, "node %lld is not in the pool",
		                   (long long)node_id);
	if (q->nodes[i].owner != NONE)
		return isc_err_set(err, ISC_ECONFLICT,
		                   "node %lld runs experiment %lld; drain it and wait",
		                   (long long)node_id, (long long)q->exps[q->nodes[i].owner].id);
	node_count(q, &q->nodes[i], -1);
	/* runs hold node indexes: move the last node into the hole and renumber its holder */
	size_t last = q->n_nodes - 1;
	if ((size_t)i != last) {
		q->nodes[i] = q->nodes[last];
		int owner = q->nodes[i].owner;
		if (owner != NONE) {
			struct qexp *e = &q->exps[owner];
			for (int k = 0; k < e->nnodes; k++)
				if (queue_run_of(q, e)->node_idx[k] == (int)last)
					queue_run_of(q, e)->node_idx[k] = i;
		}
	}
	q->n_nodes--;
	return 0;
}

/*
 * The layout of e on the pool: the class that needs the fewest nodes among
 * those with enough usable nodes, preferring one with enough free nodes
 * (beyond `reserved` per class, may be NULL) to start now. Returns the class
 * or NONE when no class can ever hold it; *fits_now says whether it can start.
 */
int queue_place(const struct isc_queue *q, const struct qexp *e, const int *reserved, int *nnodes,
                int *nproc, int *fits_now)
{
	int best = NONE, best_n = 0, best_p = 0, best_fit = 0;
	for (size_t c = 0; c < q->n_classes; c++) {
		int n, p;
		if (isc_shape_layout(e->gpus, q->classes[c].gpus, &n, &p) != 0 ||
		    n > ISC_QUEUE_MAX_GPUS || n > q->classes[c].usable)
			continue;
		int avail = q->classes[c].free - (reserved ? reserved[c] : 0);
		int fit = avail >= n;
		if (best == NONE || fit > best_fit || (fit == best_fit && n < best_n)) {
			best = (int)c;
			best_n = n;
			best_p = p;
			best_fit = fit;
		}
	}
	*nnodes = best_n;
	*nproc = best_p;
	*fits_now = best_fit;
	return best;
}

/* ---- experiments ---- */

struct qexp *queue_exp_get(const struct isc_queue *q, int64_t id)
{
	int s = ht_find(q, id);
	return s == NONE ? NULL : &q->exps[s];
}

void queue_cq_append(struct isc_queue *q, struct qexp *e, int front)
{
	int s = queue_slot_of(q, e);
	e->in_cq = 1;
	if (front) {
		e->cq_prev = NONE;
		e->cq_next = q->cq_head;
		if (q->cq_head != NONE)
			q->exps[q->cq_head].cq_prev = s;
		else
			q->cq_tail = s;
		q->cq_head = s;
	} else {
		e->cq_next = NONE;
		e->cq_prev = q->cq_tail;
		if (q->cq_tail != NONE)
			q->exps[q->cq_tail].cq_next = s;
		else
			q->cq_head = s;
		q->cq_tail = s;
	}
	q->cq_len++;
}

void queue_cq_remove(struct isc_queue *q, struct qexp *e)
{
	if (!e->in_cq)
		return;
	if (e->cq_prev != NONE)
		q->exps[e->cq_prev].cq_next = e->cq_next;
	else
		q->cq_head = e->cq_next;
	if (e->cq_next != NONE)
		q->exps[e->cq_next].cq_prev = e->cq_prev;
	else
		q->cq_tail = e->cq_prev;
	e->in_cq = 0;
	q->cq_len--;
}

static int validate_submit(const struct isc_queue *q, const struct isc_queue_submit *sub,
                           struct isc_err *err)
{
	if (sub->mode != ISC_QUEUE_CYCLE && sub->mode != ISC_QUEUE_INTERRUPTIBLE)
		return isc_err_set(err, ISC_EINVALID,
		                   "experiment %lld: compute mode must be cycle or interruptible",
		                   (long long)sub->exp_id);
	if (sub->gpus < 1 || sub->gpus > ISC_QUEUE_MAX_GPUS)
		return isc_err_set(err, ISC_EINVALID, "experiment %lld: gpus must be 1..%d, not %d",
		                   (long long)sub->exp_id, ISC_QUEUE_MAX_GPUS, sub->gpus);
	if (sub->mode == ISC_QUEUE_CYCLE && (sub->max_cycles < 1 || sub->max_cycles > 5))
		return isc_err_set(err, ISC_EINVALID,
		                   "experiment %lld: max_rapid_cycles must be 1..5, not %d",
		                   (long long)sub->exp_id, sub->max_cycles);
	if (ht_find(q, sub->exp_id) != NONE)
		return isc_err_set(err, ISC_ECONFLICT, "experiment %lld is already queued",
		                   (long long)sub->exp_id);
	return 0;
}

static int add_exp(struct isc_queue *q, const struct isc_queue_submit *sub, int64_t submitted_ms,
                   struct qexp **out, struct isc_err *err)
{
	int rc = validate_submit(q, sub, err);
	if (rc)
		return rc;
	/* room first, so a failure changes nothing */
	int s = q->n_free_slots ? q->free_slots[q->n_free_slots - 1] : (int)q->n_exps;
	if (GROW(q->exps, q->cap_exps, q->n_exps + 1) ||
	    GROW(q->runs, q->cap_runs, q->n_exps + 1) ||
	    GROW(q->active, q->cap_active, q->n_active + 1) || ht_put(q, sub->exp_id, s))
		return isc_err_set(err, ISC_ENOMEM, "queue: out of memory");
	if (q->n_free_slots)
		q->n_free_slots--;
	else
		q->n_exps++;
	struct qexp *e = &q->exps[s];
	*e = (struct qexp){.id = sub->exp_id,
	                   .in_use = 1,
	                   .mode = sub->mode,
	                   .state = ISC_QUEUE_ENQUEUED,
	                   .gpus = sub->gpus,
	                   .max_cycles = sub->mode == ISC_QUEUE_CYCLE ? sub->max_cycles : 0,
	                   .seq = q->next_seq++,
	                   .submitted_ms = submitted_ms,
	                   .first_start_ms = -1,
	                   .running_pos = NONE,
	                   .cq_prev = NONE,
	                   .cq_next = NONE,
	                   .member_of = -1,
	                   .round = NONE};
	if (e->mode == ISC_QUEUE_CYCLE) {
		queue_cq_append(q, e, 0);
	} else {
		q->active[q->n_active++] = s;
		q->n_active_live++;
		q->newcomers++;
	}
	*out = e;
	return 0;
}

int isc_queue_submit(struct isc_queue *q, const struct isc_queue_submit *sub, int64_t now_ms,
                     struct isc_err *err)
{
	struct qexp *e;
	return add_exp(q, sub, now_ms, &e, err);
}

int isc_queue_restore(struct isc_queue *q, const struct isc_queue_submit *sub, int64_t submitted_ms,
                      int cycle_count, int cycles_done, struct isc_err *err)
{
	if (cycle_count < 0 || cycles_done < 0 || cycles_done > cycle_count)
		return isc_err_set(
		    err, ISC_EINVALID,
		    "experiment %lld: cycle counts %d started, %d done do not add up",
		    (long long)sub->exp_id, cycle_count, cycles_done);
	struct qexp *e;
	int rc = add_exp(q, sub, submitted_ms, &e, err);
	if (rc)
		return rc;
	e->cycle_count = cycle_count;
	e->cycles_done = cycles_done;
	if (cycle_count > 0) {
		e->state = ISC_QUEUE_PAUSED;
		e->first_start_ms = submitted_ms; /* ran before; the exact time is the store's */
	}
	return 0;
}

/* A member of the current period leaves its round (block used up, or the experiment ended). */
void queue_leave_round(struct isc_queue *q, struct qexp *e)
{
	if (e->member_of == q->period_number && !e->block_done) {
		e->block_done = 1;
		if (e->round >= 0 && (size_t)e->round < q->n_rounds)
			q->rounds[e->round].pending--;
	}
}

void queue_finish(struct isc_queue *q, struct qexp *e, enum isc_queue_state st)
{
	queue_cq_remove(q, e);
	if (e->mode == ISC_QUEUE_INTERRUPTIBLE) {
		queue_leave_round(q, e);
		if (!queue_is_final(e->state))
			q->n_active_live--;
	}
	e->state = st;
}

int isc_queue_cancel(struct isc_queue *q, int64_t exp_id, int *stopping, struct isc_err *err)
{
	struct qexp *e = queue_exp_get(q, exp_id);
	if (!e)
		return isc_err_set(err, ISC_ENOTFOUND, "experiment %lld is not queued",
		                   (long long)exp_id);
	if (queue_is_final(e->state))
		return isc_err_set(err, ISC_ECONFLICT, "experiment %lld already ended (%s)",
		                   (long long)exp_id, isc_queue_state_name(e->state));
	if (queue_is_waiting(e->state)) {
		queue_finish(q, e, ISC_QUEUE_CANCELLED);
		*stopping = 0;
		return 0;
	}
	if (e->state == ISC_QUEUE_RUNNING)
		e->cancel_requested = 1;
	else
		e->stop_reason = ISC_QUEUE_STOP_CANCELLED; /* already stopping: end cancelled */
	*stopping = 1;
	return 0;
}

/* Drops slot s from a list of slots, keeping the order. */
static void list_drop(int *list, size_t *n, int s)
{
	size_t w = 0;
	for (size_t i = 0; i < *n; i++)
		if (list[i] != s)
			list[w++] = list[i];
	*n = w;
}

int isc_queue_forget(struct isc_queue *q, int64_t exp_id, struct isc_err *err)
{
	struct qexp *e = queue_exp_get(q, exp_id);
	if (!e)
		return isc_err_set(err, ISC_ENOTFOUND, "experiment %lld is not queued",
		                   (long long)exp_id);
	if (!queue_is_final(e->state))
		return isc_err_set(err, ISC_ECONFLICT, "experiment %lld has not ended",
		                   (long long)exp_id);
	if (GROW(q->free_slots, q->cap_free_slots, q->n_free_slots + 1))
		return isc_err_set(err, ISC_ENOMEM, "queue: out of memory");
	int s = queue_slot_of(q, e);
	/* the slot will be reused: no list may still name it */
	if (e->mode == ISC_QUEUE_INTERRUPTIBLE) {
		list_drop(q->active, &q->n_active, s);
		list_drop(q->plan, &q->n_plan, s);
	}
	e->in_use = 0;
	ht_del(q, exp_id);
	q->free_slots[q->n_free_slots++] = s;
	return 0;
}
