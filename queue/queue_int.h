/*
 * Internals of the queue shared by its files (queue.h has the rules):
 *   queue.c   state: names, the id table, lifecycle, nodes, experiments
 *   runs.c    starting and stopping runs, their ends
 *   decide.c  decisions per compute mode: periods and blocks, timeouts, cycle and
 *             interruptible starts, pre-emption
 *   wait.c    reading: an experiment's place, expected start, what it waits for
 *   check.c   the invariants (isc_queue_check)
 *
 * Layout of the state: experiments live in a slot array found by id through
 * an open-addressing table; waiting cycle experiments form a doubly linked
 * list in queue order (a pause appends, a lost node puts back in front);
 * running ones are listed apart so a tick looks at running work and the heads
 * of the queues, never at every experiment. Nodes are grouped in classes of
 * equal GPU count, each with its usable (up), free and stopping counts.
 */
#ifndef ISC_QUEUE_QUEUE_INT_H
#define ISC_QUEUE_QUEUE_INT_H

#include "queue/queue.h"

#include <stddef.h>
#include <stdint.h>

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

#define GROW(arr, cap, need) queue_grow((void **)&(arr), &(cap), (need), sizeof(*(arr)))

/* queue.c */
int queue_slot_of(const struct isc_queue *q, const struct qexp *e);
struct qrun *queue_run_of(const struct isc_queue *q, const struct qexp *e);
int queue_is_final(enum isc_queue_state st);
int queue_is_waiting(enum isc_queue_state st);
/* Grows *arr (of elem bytes) to hold at least need elements (GROW). */
int queue_grow(void **arr, size_t *cap, size_t need, size_t elem);
/* The experiment of an id, NULL when unknown. */
struct qexp *queue_exp_get(const struct isc_queue *q, int64_t id);
/* Into the cycle queue, at its back (or its front: a lost node's run goes first again). */
void queue_cq_append(struct isc_queue *q, struct qexp *e, int front);
void queue_cq_remove(struct isc_queue *q, struct qexp *e);
/* Leaves its round of the current period (it owes no more time there). */
void queue_leave_round(struct isc_queue *q, struct qexp *e);
/* Ends an experiment in a final state. */
void queue_finish(struct isc_queue *q, struct qexp *e, enum isc_queue_state st);
/* The node class and layout of e on the pool, NONE when no class can ever hold it. */
int queue_place(const struct isc_queue *q, const struct qexp *e, const int *reserved, int *nnodes,
                int *nproc, int *fits_now);

/* runs.c */
/* Starts a run on free nodes of class cls: holds them and emits a START. */
int queue_start_run(struct isc_queue *q, struct qexp *e, int cls, int nnodes, int nproc,
                    int64_t allot_ms, int64_t now_ms);
/* Emits a STOP for a running experiment (once). */
int queue_stop_run(struct isc_queue *q, struct qexp *e, enum isc_queue_stop_reason why);

/* decide.c */
/* When the current period ends. */
int64_t queue_period_end(const struct isc_queue *q);

#endif
