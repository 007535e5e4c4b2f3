/*
 * The cycle and interruptible queue: the platform's scheduling rules as a
 * module with no I/O. Callers feed it events (nodes, submissions, runs that
 * ended, cancellations) and the time; it answers with decisions (start this
 * experiment on these nodes with this STRONG_CYCLE_COUNT and
 * STRONG_CYCLE_TIME_MS; stop that run with grace, and why). On-prem
 * execution in iscd and the simulator (queue/sim.h) drive the same code.
 *
 * The rules (docs/queue.md):
 * - cycle: a run lasts cycle_ms, then is stopped with grace and goes to the
 *   back of the cycle queue; after max_cycles runs the experiment completes.
 *   The cycle queue is strictly first in, first out: its head waits for nodes
 *   rather than be overtaken.
 * - A waiting cycle experiment pre-empts running interruptible ones (as many
 *   as it needs to fit), and no interruptible run starts or resumes while any
 *   cycle experiment waits.
 * - interruptible: every period_ms the active interruptible experiments are
 *   enumerated and the period is apportioned to them in contiguous blocks,
 *   packed into rounds that fit the pool; rounds run in order. One pre-empted
 *   resumes, when no cycle experiment waits, for what is left of its block.
 *   A period ends every interruptible run still going (stopped with grace).
 * - A run that exits non-zero fails the experiment and drops it from the queue.
 *   A run that loses a node is an interruption: the experiment goes back to
 *   the front of its queue (interruptible keeps what is left of its block),
 *   and its next run counts as one more start, as a burst's reprovision does.
 * - GPUs are allocated as whole nodes with the burst node-layout rule
 *   (isc_shape_layout); a node belongs to at most one run at a time.
 *
 * Times are milliseconds on the caller's clock (injected: every call that
 * depends on time takes now_ms).
 */
#ifndef ISC_QUEUE_QUEUE_H
#define ISC_QUEUE_QUEUE_H

#include "common/err.h"

#include <stddef.h>
#include <stdint.h>

#define ISC_QUEUE_CYCLE_MS_DEFAULT  90000
#define ISC_QUEUE_PERIOD_MS_DEFAULT 7200000
#define ISC_QUEUE_MAX_GPUS          72 /* the platform's gpus limit: at most 72 nodes per run */

struct isc_queue_config {
	int64_t cycle_ms;  /* length of one cycle run (90 s on the platform) */
	int64_t period_ms; /* interruptible apportioning period (2 h) */
};

/*
 * STRONG_CYCLE_COUNT of the next run of an experiment whose runs so far had
 * counts up to cycle_count (0 before the first): every start, resume and
 * reprovision counts one. The queue's runs and the broker's clusters both take
 * their count from here.
 */
int isc_queue_next_cycle(int cycle_count);

/* The defaults: 90 s cycles, 2 h periods. */
void isc_queue_config_default(struct isc_queue_config *cfg);

enum isc_queue_mode {
	ISC_QUEUE_CYCLE,
	ISC_QUEUE_INTERRUPTIBLE,
};

enum isc_queue_state {
	ISC_QUEUE_ENQUEUED,  /* never ran */
	ISC_QUEUE_RUNNING,   /* a run holds nodes */
	ISC_QUEUE_STOPPING,  /* told to stop with grace; still holds its nodes */
	ISC_QUEUE_PAUSED,    /* ran before, waits for its next run */
	ISC_QUEUE_COMPLETED, /* final */
	ISC_QUEUE_FAILED,    /* final */
	ISC_QUEUE_CANCELLED, /* final */
};

/* "enqueued", "running", ... (the store's status words; stopping shows as "running"). */
const char *isc_queue_state_name(enum isc_queue_state st);
/* "cycle", "interruptible"; ISC_EINVALID for other words. */
int isc_queue_mode_parse(const char *s, enum isc_queue_mode *out);

enum isc_queue_node_state {
	ISC_QUEUE_NODE_UP,
	ISC_QUEUE_NODE_DRAINING, /* keeps its run, gets no new one */
	ISC_QUEUE_NODE_DOWN,     /* stopped answering; gets nothing */
};

/* Why a run is told to stop, which says what the experiment becomes once it stopped. */
enum isc_queue_stop_reason {
	ISC_QUEUE_STOP_CYCLE_END,  /* cycle run over: paused, back of the cycle queue */
	ISC_QUEUE_STOP_LAST_CYCLE, /* its max_cycles-th run is over: completed */
	ISC_QUEUE_STOP_BLOCK_END,  /* interruptible block used up: paused until next period */
	ISC_QUEUE_STOP_PERIOD_END, /* the period ended first: paused, re-apportioned */
	ISC_QUEUE_STOP_PREEMPTED,  /* a cycle experiment needs the nodes: paused, owes the rest */
	ISC_QUEUE_STOP_CANCELLED,  /* cancelled by its owner */
};

const char *isc_queue_stop_reason_name(enum isc_queue_stop_reason r);

enum isc_queue_action {
	ISC_QUEUE_START, /* boot the container on nodes (first run or resume) */
	ISC_QUEUE_STOP,  /* stop with grace, keep the artifacts; report isc_queue_run_ended */
};

struct isc_queue_decision {
	enum isc_queue_action action;
	int64_t exp_id;
	/* START */
	int resume;              /* 0 for the first run, 1 for any later one */
	int cycle_count;         /* STRONG_CYCLE_COUNT of this run (1 for the first) */
	int64_t cycle_time_ms;   /* STRONG_CYCLE_TIME_MS: time allotted to this run */
	int nnodes, nproc;       /* layout: nnodes * nproc == gpus */
	const int64_t *node_ids; /* nnodes node ids, rank order; borrowed until the next call */
	/* STOP */
	enum isc_queue_stop_reason reason;
};

/* How a run ended, as the executor saw it. */
enum isc_queue_outcome {
	ISC_QUEUE_EXIT_OK,     /* rank 0 exited 0 of its own accord: completed */
	ISC_QUEUE_EXIT_FAILED, /* rank 0 exited non-zero (or could not start): failed */
	ISC_QUEUE_STOPPED,     /* stopped as a STOP decision asked */
	ISC_QUEUE_NODE_LOST,   /* a node stopped answering: interrupted, requeued */
};

/* What the queue knows of one experiment (a copy). */
struct isc_queue_info {
	int64_t exp_id;
	enum isc_queue_mode mode;
	enum isc_queue_state state;
	int gpus, max_cycles;
	int cycle_count; /* starts and resumes so far (STRONG_CYCLE_COUNT of the last run) */
	int cycles_done; /* cycle runs that ran their full cycle */
	int position;    /* 1-based place among waiting experiments of its mode; 0 if none */
	int64_t submitted_ms;
	int64_t first_start_ms; /* -1 before the first run */
	int64_t next_start_ms;  /* expected next start, -1 when not waiting or unknown */
	int64_t owed_ms;        /* interruptible: what is left of its block this period */
	int nnodes;             /* nodes held now (0 when not running) */
};

struct isc_queue;

/* A queue whose clock starts at now_ms (the first period's start). */
int isc_queue_new(const struct isc_queue_config *cfg, int64_t now_ms, struct isc_queue **out,
                  struct isc_err *err);
void isc_queue_free(struct isc_queue *q);

/* Registers a node of the pool. ISC_ECONFLICT when the id is known, ISC_EINVALID for gpus < 1. */
int isc_queue_node_add(struct isc_queue *q, int64_t node_id, int gpus, struct isc_err *err);
/*
 * Marks a node up, draining or down. A down node's run is not ended here: the
 * executor reports it (ISC_QUEUE_NODE_LOST) once it stopped the other ranks.
 */
int isc_queue_node_set_state(struct isc_queue *q, int64_t node_id, enum isc_queue_node_state st,
                             struct isc_err *err);
/* Removes a node; ISC_ECONFLICT while a run holds it. */
int isc_queue_node_remove(struct isc_queue *q, int64_t node_id, struct isc_err *err);

struct isc_queue_submit {
	int64_t exp_id;
	enum isc_queue_mode mode;
	int gpus;       /* 1..ISC_QUEUE_MAX_GPUS */
	int max_cycles; /* cycle: 1..5; ignored for interruptible */
};

/* Adds an experiment at the back of its queue. ISC_ECONFLICT for a known id. */
int isc_queue_submit(struct isc_queue *q, const struct isc_queue_submit *sub, int64_t now_ms,
                     struct isc_err *err);

/*
 * Puts back an experiment that already ran (iscd restarting from its store):
 * paused, with cycle_count starts so far and cycles_done full cycles, at the
 * back of its queue. Same errors as isc_queue_submit.
 */
int isc_queue_restore(struct isc_queue *q, const struct isc_queue_submit *sub, int64_t submitted_ms,
                      int cycle_count, int cycles_done, struct isc_err *err);

/*
 * Cancels an experiment: a waiting one becomes cancelled at once (*stopping
 * = 0); a running one gets a STOP decision at the next isc_queue_decide and
 * becomes cancelled when it stopped (*stopping = 1). ISC_ENOTFOUND, or
 * ISC_ECONFLICT when it already ended.
 */
int isc_queue_cancel(struct isc_queue *q, int64_t exp_id, int *stopping, struct isc_err *err);

/*
 * The decisions at now_ms: every STOP first, then every START. The array is
 * owned by the queue and valid until the next call on q. Starting or stopping
 * is the caller's job; it reports each run's end with isc_queue_run_ended.
 */
const struct isc_queue_decision *isc_queue_decide(struct isc_queue *q, int64_t now_ms, size_t *n);

/*
 * A run ended. ISC_ENOTFOUND for an unknown id, ISC_ECONFLICT when it was not
 * running. *final (may be NULL) is the experiment's state after the event.
 */
int isc_queue_run_ended(struct isc_queue *q, int64_t exp_id, enum isc_queue_outcome how,
                        int64_t now_ms, enum isc_queue_state *final, struct isc_err *err);

/* A copy of what the queue knows about one experiment; ISC_ENOTFOUND. */
int isc_queue_info(const struct isc_queue *q, int64_t exp_id, int64_t now_ms,
                   struct isc_queue_info *out, struct isc_err *err);

/* What a waiting experiment waits for, from the pool's side. */
enum isc_queue_blocker {
	ISC_QUEUE_READY,        /* not waiting, or its nodes are free: it starts at a decision */
	ISC_QUEUE_NEVER_FITS,   /* no node class can hold it, counting every registered node */
	ISC_QUEUE_NODES_OUT,    /* the registered nodes could, but too many are down or draining */
	ISC_QUEUE_POOL_BUSY,    /* the nodes it needs are held by other runs */
	ISC_QUEUE_CYCLES_FIRST, /* interruptible: cycle experiments wait, and go first */
	ISC_QUEUE_NEXT_BLOCK,   /* interruptible: its block comes later, or in the next period */
};

struct isc_queue_wait {
	enum isc_queue_blocker why;
	/* The node class it waits on (the best one: fewest nodes, one that fits now first):
	 * nnodes of node_gpus GPUs each; of that class free, usable (up) and registered
	 * (any state) nodes. NEVER_FITS: the class that comes closest (most GPUs in all),
	 * with nnodes the nodes it would need; all 0 for an empty pool. */
	int nnodes, node_gpus;
	int free_nodes, usable_nodes, registered_nodes;
};

/*
 * Why a waiting experiment (enqueued or paused) waits; READY for one that
 * is not waiting. ISC_ENOTFOUND. The executor says it in the experiment's
 * status, and ends the wait of one that can never fit (docs/queue.md).
 */
int isc_queue_wait_info(const struct isc_queue *q, int64_t exp_id, struct isc_queue_wait *out,
                        struct isc_err *err);

/* Forgets an experiment that ended (completed, failed or cancelled); ISC_ECONFLICT otherwise. */
int isc_queue_forget(struct isc_queue *q, int64_t exp_id, struct isc_err *err);

/*
 * Checks the module's invariants (no node held twice nor held by a run on a
 * node that is not its own, every layout exact, a waiting cycle head never
 * left behind a running interruptible it could pre-empt, the current
 * period's blocks contiguous and summing to the period). 0 or ISC_EINVALID
 * with what broke. For tests and the simulator.
 */
int isc_queue_check(const struct isc_queue *q, struct isc_err *err);

/* The current period: its start and how many rounds its blocks were packed into. */
struct isc_queue_period {
	int64_t start_ms;
	int64_t number; /* 0 for the first period */
	int rounds;
	int members; /* interruptible experiments apportioned */
};
void isc_queue_period_get(const struct isc_queue *q, struct isc_queue_period *out);

/* The block of an experiment in the current period: start offset and length; ISC_ENOTFOUND. */
int isc_queue_block(const struct isc_queue *q, int64_t exp_id, int64_t *start_ms, int64_t *len_ms);

#endif
