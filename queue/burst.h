/*
 * The burst side of the queue: the rules the burst broker (broker/) and
 * on-prem execution (onprem/) share for burst experiments, as decisions with
 * no I/O (state in, decisions out, the clock passed in):
 * - the states of a burst and the transitions between them (one table, which
 *   every writer of a burst's status checks);
 * - who acts on a burst in a given state: the broker, or on-prem execution
 *   while its validation cycle runs (burst_validation);
 * - which step of the broker's state machine a state calls for, and when a
 *   waiting burst is due for its next try;
 * - the waiting order: which waiting bursts get a try now. Bursts without a
 *   cluster line up in arrival order (one that ran before, being reprovisioned
 *   or moving to the cloud after its validation cycle, in front and never held,
 *   as a lost node puts an on-prem run back in front of its queue).
 *   The first burst of a line that waits for credits holds back the newer
 *   bursts that would draw on the same money (its organisation's credits, or
 *   its project's budget), so a stream of smaller bursts never starves it; a
 *   burst waiting for capacity holds back nobody (another burst may want other
 *   shapes, and the cloud says whether there is room).
 * The cycle count of a burst's next cluster is isc_queue_next_cycle
 * (queue/queue.h), as for on-prem runs. docs/queue.md has the rules.
 */
#ifndef ISC_QUEUE_BURST_H
#define ISC_QUEUE_BURST_H

#include "common/err.h"

#include <stddef.h>
#include <stdint.h>

enum isc_burst_state {
	ISC_BURST_ENQUEUED,     /* recorded; nothing tried yet */
	ISC_BURST_VALIDATING,   /* its validation cycle runs on-prem (burst_validation) */
	ISC_BURST_PLACING,      /* ranking shapes; also after an interruption or a failed shape */
	ISC_BURST_WAITING,      /* blocked: credits, capacity, disk, or behind another burst */
	ISC_BURST_PROVISIONING, /* a cluster is being launched */
	ISC_BURST_BOOTING,      /* nodes up; containers starting */
	ISC_BURST_RUNNING,      /* containers run */
	ISC_BURST_STOPPING,     /* the outcome is recorded; the teardown runs */
	ISC_BURST_COMPLETED,    /* final */
	ISC_BURST_FAILED,       /* final */
	ISC_BURST_CANCELLED,    /* final */
	ISC_BURST_STOPPED,      /* final: out of credits */
};

/* The store's word for a state ("enqueued", ...). */
const char *isc_burst_state_name(enum isc_burst_state st);
/* ISC_EINVALID for a word that is no burst state. */
int isc_burst_state_parse(const char *s, enum isc_burst_state *out);
int isc_burst_is_final(enum isc_burst_state st);

/*
 * 0 when a burst may go from `from` to `to` (a waiting or placing burst may
 * go to the same state again with a new reason); ISC_EINVALID naming both
 * otherwise, or for a word that is no burst state.
 */
int isc_burst_transition_check(const char *from, const char *to, struct isc_err *err);

enum isc_burst_owner {
	ISC_BURST_OWNER_NONE,   /* it ended */
	ISC_BURST_OWNER_BROKER, /* the burst broker takes its next step */
	ISC_BURST_OWNER_ONPREM, /* on-prem execution runs its validation cycle */
};

/*
 * Who acts on a burst: on-prem execution for a validating one, and, with the
 * validation policy on, for an enqueued one that never ran and is not being
 * cancelled (it is taken for its validation cycle); the broker for every other
 * burst that has not ended.
 */
enum isc_burst_owner isc_burst_owner(enum isc_burst_state st, int cycle_count, int cancel_requested,
                                     int validation_policy);

/* The step of the broker's state machine a state calls for. */
enum isc_burst_step {
	ISC_BURST_STEP_NONE,      /* nothing now (ended, validating, or waiting for its next try) */
	ISC_BURST_STEP_PLACE,     /* rank shapes and launch a cluster */
	ISC_BURST_STEP_PROVISION, /* watch the launch */
	ISC_BURST_STEP_BOOT,      /* start the containers */
	ISC_BURST_STEP_RUN,       /* follow exits, interruptions, periodic syncs */
	ISC_BURST_STEP_STOP,      /* tear down and take the final status */
};

/*
 * The step for a burst in state st at now_ms: a waiting one is placed again
 * once now_ms reaches next_attempt_ms; a cancel asked of a burst that is not
 * stopping yet (and not validating) is a STOP.
 */
enum isc_burst_step isc_burst_step_for(enum isc_burst_state st, int cancel_requested,
                                       int64_t next_attempt_ms, int64_t now_ms);

/* Why a waiting burst waits, as its last try found (or as isc_burst_order decided). */
enum isc_burst_wait {
	ISC_BURST_WAIT_NONE,            /* not waiting, or not known (iscd restarted) */
	ISC_BURST_WAIT_CREDITS_ORG,     /* its organisation's credits cannot cover the cluster */
	ISC_BURST_WAIT_CREDITS_PROJECT, /* its project's budget cannot */
	ISC_BURST_WAIT_CAPACITY,        /* no shape could be provisioned */
	ISC_BURST_WAIT_OTHER,           /* the disk, a cluster that could not be prepared */
	ISC_BURST_WAIT_BEHIND,          /* held behind an older burst of its credits line */
};

/* One burst the broker is responsible for, as the tick read it. */
struct isc_burst_entry {
	enum isc_burst_state state;
	enum isc_burst_wait wait; /* WAITING: why (ISC_BURST_WAIT_NONE when not known) */
	int64_t org_id;
	const char *project_id; /* the budget's key; NULL or "" compares equal to nothing */
	int64_t created_ms;     /* arrival: the order within a line */
	int cycle_count;        /* > 0: ran before; an interrupted burst goes first */
	int cancel_requested;
	int64_t next_attempt_ms; /* WAITING: no try before this */
};

/* The order's answer for one entry. */
struct isc_burst_turn {
	int go;       /* 1: give it its step now */
	int behind;   /* index of the burst it is held behind (the head of its line), or -1 */
	int position; /* 1-based place in its line (see line), 0 when in none */
	enum isc_burst_wait line; /* CREDITS_ORG, CREDITS_PROJECT or CAPACITY; NONE */
};

/*
 * The waiting order at now_ms over n bursts (any order; ended and validating
 * ones get go = 0). Bursts with a cluster (provisioning, booting, running,
 * stopping) and bursts being cancelled always go. The others (enqueued,
 * placing, waiting) are taken interrupted ones first, then oldest first: one
 * that an earlier burst's credits line holds back gets go = 0 and behind set;
 * a waiting one goes when its next try is due; the rest go now. The first
 * burst waiting for credits of an organisation (or of a project's budget)
 * heads that line. out has n entries. Linear in n times the number of lines.
 * ISC_ENOMEM.
 */
int isc_burst_order(const struct isc_burst_entry *v, size_t n, int64_t now_ms,
                    struct isc_burst_turn *out, struct isc_err *err);

#endif
