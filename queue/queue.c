/*
 * The cycle and interruptible queue (queue.h has the rules). Everything here
 * is arithmetic on in-memory state: no clock, no store, no network, so the
 * same code answers iscd's ticks and the simulator's millions of steps.
 *
 * Layout of the state: experiments live in a slot array found by id through
 * an open-addressing table; waiting cycle experiments form a doubly linked
 * list in queue order (a pause appends, a lost node puts back in front);
 * running ones are listed apart so a tick looks at running work and the heads
 * of the queues, never at every experiment. Nodes are grouped in classes of
 * equal GPU count, each with its usable (up), free and stopping counts.
 */
#include "queue/queue.h"

#include "shapes/shape.h"

#include <stdlib.h>
#include <string.h>

#define NONE (-1)

struct qnode {
	int64_t id;
	int cls;
	enum isc_queue_node_state state;
	int owner; /* slot of the run holding it, NONE when free */
};

struct qclass {
	int gpus;
	int usable;   /* nodes up (not draining, not down) */
	int free;     /* up and not held */
	int stopping; /* held by runs told to stop: free soon */
};

struct qexp {
	int64_t id;
	int in_use;
	enum isc_queue_mode mode;
	enum isc_queue_state state;
	int gpus, max_cycles;
	int cycle_count, cycles_done;
	int64_t seq; /* submission order */
	int64_t submitted_ms, first_start_ms;
	/* the current run */
	int64_t run_started_ms, run_allot_ms, run_period;
	int cls, nnodes, nproc;
	int running_pos;      /* index in q->running, NONE */
	int cancel_requested; /* running: stop with reason cancelled at the next decide */
	enum isc_queue_stop_reason stop_reason;
	/* cycle queue links */
	int in_cq, cq_prev, cq_next;
	/* interruptible: membership in the current period */
	int64_t member_of; /* period number, -1 when none */
	int round;
	int64_t block_ms, owed_ms;
	int block_done;
};

/* The nodes a run holds, kept apart from struct qexp so that walks over many experiments
 * (apportioning thousands of them) stay in cache. Parallel to the slot array. */
struct qrun {
	int64_t node_ids[ISC_QUEUE_MAX_GPUS];
	int node_idx[ISC_QUEUE_MAX_GPUS];
};

struct qround {
	int64_t start_ms, len_ms; /* offset within the period */
	int pending;              /* members that still owe time in this round */
};

struct isc_queue {
	struct isc_queue_config cfg;

	struct qnode *nodes;
	size_t n_nodes, cap_nodes;
	struct qclass *classes;
	size_t n_classes, cap_classes;

	struct qexp *exps;
	size_t n_exps, cap_exps;
	struct qrun *runs; /* runs[slot] */
	size_t cap_runs;
	int *free_slots;
	size_t n_free_slots, cap_free_slots;
	int64_t next_seq;

	/* id -> slot + 1 (0 = empty), linear probing, power-of-two size */
	int64_t *ht_keys;
	int *ht_vals;
	size_t ht_cap, ht_count;

	int cq_head, cq_tail;
	size_t cq_len;

	int *running;
	size_t n_running, cap_running;

	/* active interruptible experiments (not final), in submission order; compacted lazily */
	int *active;
	size_t n_active, cap_active;
	size_t n_active_live;

	/* the current period */
	int64_t period_start_ms, period_number;
	struct qround *rounds;
	size_t n_rounds, cap_rounds;
	int *plan; /* member slots in round order */
	size_t n_plan, cap_plan;
	int cursor;
	int newcomers;    /* interruptible submissions since the last apportioning */
	int pool_changed; /* nodes added or back up since the last apportioning */

	/* the last decide, for isc_queue_check */
	int last_cycle_waiting, last_int_starts;

	struct isc_queue_decision *dec;
	size_t n_dec, cap_dec;
};

static int slot_of(const struct isc_queue *q, const struct qexp *e)
{
	return (int)(e - q->exps);
}

static struct qrun *run_of(const struct isc_queue *q, const struct qexp *e)
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

static int is_final(enum isc_queue_state st)
{
	return st == ISC_QUEUE_COMPLETED || st == ISC_QUEUE_FAILED || st == ISC_QUEUE_CANCELLED;
}

static int is_waiting(enum isc_queue_state st)
{
	return st == ISC_QUEUE_ENQUEUED || st == ISC_QUEUE_PAUSED;
}

/* Grows *arr (of elem bytes) to hold at least need elements. */
static int grow(void **arr, size_t *cap, size_t need, size_t elem)
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

#define GROW(arr, cap, need) grow((void **)&(arr), &(cap), (need), sizeof(*(arr)))

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
				if (run_of(q, e)->node_idx[k] == (int)last)
					run_of(q, e)->node_idx[k] = i;
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
static int place(const struct isc_queue *q, const struct qexp *e, const int *reserved, int *nnodes,
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

static struct qexp *exp_get(const struct isc_queue *q, int64_t id)
{
	int s = ht_find(q, id);
	return s == NONE ? NULL : &q->exps[s];
}

static void cq_append(struct isc_queue *q, struct qexp *e, int front)
{
	int s = slot_of(q, e);
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

static void cq_remove(struct isc_queue *q, struct qexp *e)
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
		cq_append(q, e, 0);
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
static void leave_round(struct isc_queue *q, struct qexp *e)
{
	if (e->member_of == q->period_number && !e->block_done) {
		e->block_done = 1;
		if (e->round >= 0 && (size_t)e->round < q->n_rounds)
			q->rounds[e->round].pending--;
	}
}

static void finish(struct isc_queue *q, struct qexp *e, enum isc_queue_state st)
{
	cq_remove(q, e);
	if (e->mode == ISC_QUEUE_INTERRUPTIBLE) {
		leave_round(q, e);
		if (!is_final(e->state))
			q->n_active_live--;
	}
	e->state = st;
}

int isc_queue_cancel(struct isc_queue *q, int64_t exp_id, int *stopping, struct isc_err *err)
{
	struct qexp *e = exp_get(q, exp_id);
	if (!e)
		return isc_err_set(err, ISC_ENOTFOUND, "experiment %lld is not queued",
		                   (long long)exp_id);
	if (is_final(e->state))
		return isc_err_set(err, ISC_ECONFLICT, "experiment %lld already ended (%s)",
		                   (long long)exp_id, isc_queue_state_name(e->state));
	if (is_waiting(e->state)) {
		finish(q, e, ISC_QUEUE_CANCELLED);
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
	struct qexp *e = exp_get(q, exp_id);
	if (!e)
		return isc_err_set(err, ISC_ENOTFOUND, "experiment %lld is not queued",
		                   (long long)exp_id);
	if (!is_final(e->state))
		return isc_err_set(err, ISC_ECONFLICT, "experiment %lld has not ended",
		                   (long long)exp_id);
	if (GROW(q->free_slots, q->cap_free_slots, q->n_free_slots + 1))
		return isc_err_set(err, ISC_ENOMEM, "queue: out of memory");
	int s = slot_of(q, e);
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

/* ---- runs ---- */

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
static int start_run(struct isc_queue *q, struct qexp *e, int cls, int nnodes, int nproc,
                     int64_t allot_ms, int64_t now_ms)
{
	if (GROW(q->running, q->cap_running, q->n_running + 1))
		return ISC_ENOMEM;
	int k = 0;
	for (size_t i = 0; i < q->n_nodes && k < nnodes; i++) {
		struct qnode *nd = &q->nodes[i];
		if (nd->cls != cls || nd->state != ISC_QUEUE_NODE_UP || nd->owner != NONE)
			continue;
		run_of(q, e)->node_idx[k] = (int)i;
		run_of(q, e)->node_ids[k] = nd->id;
		k++;
	}
	if (k < nnodes)
		return ISC_EINVALID; /* the class counts promised them: a bug, refuse rather than
		                        share */
	int s = slot_of(q, e);
	for (int i = 0; i < k; i++)
		q->nodes[run_of(q, e)->node_idx[i]].owner = s;
	q->classes[cls].free -= nnodes;
	cq_remove(q, e);
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
	                               .node_ids = run_of(q, e)->node_ids};
	return emit(q, &d);
}

static int stop_run(struct isc_queue *q, struct qexp *e, enum isc_queue_stop_reason why)
{
	e->state = ISC_QUEUE_STOPPING;
	e->stop_reason = why;
	for (int i = 0; i < e->nnodes; i++)
		if (q->nodes[run_of(q, e)->node_idx[i]].state == ISC_QUEUE_NODE_UP)
			q->classes[e->cls].stopping++;
	struct isc_queue_decision d = {.action = ISC_QUEUE_STOP, .exp_id = e->id, .reason = why};
	return emit(q, &d);
}

/* Gives e's nodes back; a node that went down or is draining stays out of the free count. */
static void release_nodes(struct isc_queue *q, struct qexp *e, int was_stopping)
{
	for (int i = 0; i < e->nnodes; i++) {
		struct qnode *nd = &q->nodes[run_of(q, e)->node_idx[i]];
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
	struct qexp *e = exp_get(q, exp_id);
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
		finish(q, e, ISC_QUEUE_COMPLETED);
		break;
	case ISC_QUEUE_EXIT_FAILED:
		finish(q, e, ISC_QUEUE_FAILED);
		break;
	case ISC_QUEUE_NODE_LOST:
		/* an interruption: back in front, the next run counts one more start */
		e->state = ISC_QUEUE_PAUSED;
		if (e->mode == ISC_QUEUE_CYCLE)
			cq_append(q, e, 1);
		break;
	case ISC_QUEUE_STOPPED:
		if (!was_stopping) {
			/* stopped by something other than the queue: an interruption too */
			e->state = ISC_QUEUE_PAUSED;
			if (e->mode == ISC_QUEUE_CYCLE)
				cq_append(q, e, 1);
			break;
		}
		switch (e->stop_reason) {
		case ISC_QUEUE_STOP_CYCLE_END:
			e->cycles_done++;
			e->state = ISC_QUEUE_PAUSED;
			cq_append(q, e, 0);
			break;
		case ISC_QUEUE_STOP_LAST_CYCLE:
			e->cycles_done++;
			finish(q, e, ISC_QUEUE_COMPLETED);
			break;
		case ISC_QUEUE_STOP_BLOCK_END:
			if (e->run_period == q->period_number) {
				e->owed_ms = 0;
				leave_round(q, e);
			}
			e->state = ISC_QUEUE_PAUSED;
			break;
		case ISC_QUEUE_STOP_PERIOD_END:
		case ISC_QUEUE_STOP_PREEMPTED:
			e->state = ISC_QUEUE_PAUSED;
			break;
		case ISC_QUEUE_STOP_CANCELLED:
			finish(q, e, ISC_QUEUE_CANCELLED);
			break;
		}
		break;
	default:
		return isc_err_set(err, ISC_EINVALID, "experiment %lld: unknown run outcome %d",
		                   (long long)exp_id, (int)how);
	}
	if (e->mode == ISC_QUEUE_INTERRUPTIBLE && e->state == ISC_QUEUE_PAUSED &&
	    e->member_of == q->period_number && e->owed_ms == 0)
		leave_round(q, e);
	if (final)
		*final = e->state;
	return 0;
}

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
		if (e->in_use && e->mode == ISC_QUEUE_INTERRUPTIBLE && !is_final(e->state))
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
		int c = place(q, e, NULL, &n, &p, &fit);
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

static int64_t period_end(const struct isc_queue *q)
{
	return q->period_start_ms + q->cfg.period_ms;
}

static int decide_periods(struct isc_queue *q, int64_t now_ms)
{
	int rolled = 0;
	int64_t start = q->period_start_ms;
	if (now_ms >= period_end(q)) {
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
			int rc = stop_run(q, e, ISC_QUEUE_STOP_PERIOD_END);
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
			rc = stop_run(q, e, ISC_QUEUE_STOP_CANCELLED);
		else if (now_ms - e->run_started_ms < e->run_allot_ms)
			continue;
		else if (e->mode == ISC_QUEUE_CYCLE)
			rc = stop_run(q, e,
			              e->cycles_done + 1 >= e->max_cycles
			                  ? ISC_QUEUE_STOP_LAST_CYCLE
			                  : ISC_QUEUE_STOP_CYCLE_END);
		else
			rc = stop_run(q, e, ISC_QUEUE_STOP_BLOCK_END);
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
		int rc = stop_run(q, victim, ISC_QUEUE_STOP_PREEMPTED);
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
		int c = place(q, e, reserved, &n, &p, &fit);
		if (c != NONE && fit) {
			rc = start_run(q, e, c, n, p, q->cfg.cycle_ms, now_ms);
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
	int64_t left = period_end(q) - now_ms;
	if (left <= 0)
		return 0;
	int blocked_round = -1; /* a member that could not start holds back later rounds */
	for (size_t i = 0; i < q->n_plan; i++) {
		struct qexp *e = &q->exps[q->plan[i]];
		if (!e->in_use || e->member_of != q->period_number || !is_waiting(e->state) ||
		    e->owed_ms <= 0 || e->block_done)
			continue;
		if (e->round > q->cursor || (blocked_round >= 0 && e->round > blocked_round))
			break;
		int n, p, fit;
		int c = place(q, e, NULL, &n, &p, &fit);
		if (c == NONE || !fit) {
			if (blocked_round < 0)
				blocked_round = e->round;
			continue;
		}
		int rc = start_run(q, e, c, n, p, e->owed_ms < left ? e->owed_ms : left, now_ms);
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

/* ---- reading ---- */

static int position_of(const struct isc_queue *q, const struct qexp *e)
{
	int pos = 1;
	if (!is_waiting(e->state))
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
		if (!m->in_use || m->member_of != q->period_number || !is_waiting(m->state))
			continue;
		if (m == e)
			return pos;
		pos++;
	}
	for (size_t i = 0; i < q->n_active; i++) {
		const struct qexp *m = &q->exps[q->active[i]];
		if (!m->in_use || m->member_of == q->period_number || !is_waiting(m->state))
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
	if (!is_waiting(e->state))
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
			if (place(q, m, NULL, &n, &p, &fit) != NONE)
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
	return period_end(q);
}

int isc_queue_info(const struct isc_queue *q, int64_t exp_id, int64_t now_ms,
                   struct isc_queue_info *out, struct isc_err *err)
{
	const struct qexp *e = exp_get(q, exp_id);
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
	const struct qexp *e = exp_get(q, exp_id);
	if (!e)
		return isc_err_set(err, ISC_ENOTFOUND, "experiment %lld is not queued",
		                   (long long)exp_id);
	*out = (struct isc_queue_wait){.why = ISC_QUEUE_READY};
	if (!is_waiting(e->state))
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
	int n, p, fit, c = place(q, e, NULL, &n, &p, &fit);
	if (c == NONE) {
		/* the registered nodes could hold it; the up ones cannot */
		out->why = ISC_QUEUE_NODES_OUT;
		c = best_reg;
		n = best_reg_n;
	} else if (e->mode == ISC_QUEUE_INTERRUPTIBLE) {
		int cycles_wait = 0;
		for (int s = q->cq_head; s != NONE && !cycles_wait; s = q->exps[s].cq_next) {
			int n2, p2, f2;
			cycles_wait = place(q, &q->exps[s], NULL, &n2, &p2, &f2) != NONE;
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
	const struct qexp *e = exp_get(q, exp_id);
	if (!e || e->mode != ISC_QUEUE_INTERRUPTIBLE || e->member_of != q->period_number)
		return ISC_ENOTFOUND;
	*start_ms = q->rounds[e->round].start_ms;
	*len_ms = q->rounds[e->round].len_ms;
	return 0;
}

/* ---- invariants ---- */

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
			listed += run_of(q, e)->node_idx[k] == (int)i;
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
			if (q->nodes[run_of(q, e)->node_idx[k]].owner != q->running[r] ||
			    q->nodes[run_of(q, e)->node_idx[k]].cls != e->cls)
				return isc_err_set(
				    err, ISC_EINVALID,
				    "experiment %lld lists node %lld it does not hold",
				    (long long)e->id, (long long)run_of(q, e)->node_ids[k]);
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
		int c = place(q, h, NULL, &n, &p, &fit);
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
