/*
 * Experiments and their event timeline. Every status change of an experiment
 * is written together with an event that says why, in one transaction.
 */
#ifndef ISC_STORE_STORE_EXPERIMENTS_H
#define ISC_STORE_STORE_EXPERIMENTS_H

#include "common/model.h"
#include "store/store.h"

struct isc_experiment {
	char *id; /* "exp_..." */
	char *project_id;
	char *project_name;
	int64_t org_id;
	char *org_name;
	char *name;
	char *compute_mode; /* cycle | interruptible | burst */
	int gpus;
	char *spec_json; /* the normalized launch file */
	char *status;    /* enqueued, placing, provisioning, booting, running, completed, failed,
	                    cancelled, stopped, waiting */
	char *status_reason;
	int nnodes, nproc;
	char *shape_id;
	int cycle_count;
	char *output_path;
	int cancel_requested;
	int64_t next_attempt_ms; /* a waiting experiment is not retried before this */
	int64_t created_at_ms, updated_at_ms;
	char *final_status; /* while stopping: the final status it heads for; else "" */
	/* Who launched it (a platform user's name; "" for the operator or before issue 29).
	 * Read with the row: a member's status request needs it, and a round trip of its own
	 * cost one more than the row (issue 49). */
	char *owner;
};

struct isc_event {
	int64_t id;
	char *experiment_id;
	int64_t at_ms;
	char *kind;
	char *message;
};

/* Inserts e (id, project_id, org_id, name, compute_mode, gpus, spec_json, status, output_path) and
 * an event. */
int isc_store_experiment_add(struct isc_store *s, const struct isc_experiment *e,
                             struct isc_err *err);
/*
 * *settling = 1 when experiment id is final but a node of it that ran is not yet charged
 * up to its termination (the cloud has not confirmed it, or the meter has not charged its
 * last period): its charges are not yet its final cost. 0 otherwise, and for an
 * experiment not final (its cost is still growing, by design). ISC_ENOTFOUND.
 */
int isc_store_experiment_settling(struct isc_store *s, const char *id, int *settling,
                                  struct isc_err *err);
int isc_store_experiment_get(struct isc_store *s, const char *id, struct isc_experiment *out,
                             struct isc_err *err);
/* status NULL: all, newest first; otherwise only that status, oldest first. */
int isc_store_experiment_list(struct isc_store *s, const char *status, struct isc_experiment **out,
                              size_t *n, struct isc_err *err);
/*
 * A position in the newest-first order of experiments (created_at_ms descending,
 * then id ascending, so experiments created in the same millisecond keep one
 * stable order): the listing goes on after the experiment it names.
 */
struct isc_experiment_cursor {
	int64_t created_at_ms;
	const char *id;
};
/*
 * One row of the API's experiment listing as the store read it. The strings
 * point into the store's row and are valid only while the callback runs: a
 * page is written straight from them, never copied.
 */
struct isc_experiment_view {
	const char *id, *name, *project_id, *org_name, *compute_mode, *output_path, *status,
	    *status_reason, *shape_id;
	const char *project_name; /* the project's name (its id when it is gone) */
	const char *owner;        /* who launched it: the member's login, "" for the operator */
	int gpus, nnodes, nproc, cycle_count;
	int64_t org_id, created_at_ms;
	int64_t cost_micros; /* charges so far + what its open intervals accrued since */
	/* 1: final, but a node is not yet charged up to its termination, so cost_micros
	 * still grows (isc_store_experiment_settling) */
	int cost_settling;
};
/* Takes one row; returns 0 to go on, nonzero (out of memory) to stop the page. */
typedef int (*isc_experiment_view_fn)(const struct isc_experiment_view *v, void *ctx);
/*
 * One page of what a caller of the API may list, newest first: all (the
 * operator), else the experiments of the orgs where user_id is admin and those
 * `owner` launched in the orgs where user_id is a member (store/store_access.h).
 * after (NULL: from the newest) and limit (0: no limit): fn gets at most limit
 * rows that come after the cursor, in order. The visibility condition applies to
 * every page, so a cursor (whoever made it) never shows a row the caller may not
 * see. Each of the caller's orgs is one index walk from the cursor, so a page
 * costs its own rows, not the org's.
 */
int isc_store_experiment_page(struct isc_store *s, int all, int64_t user_id, const char *owner,
                              const struct isc_experiment_cursor *after, size_t limit,
                              isc_experiment_view_fn fn, void *ctx, struct isc_err *err);
/* Experiments the broker still has work for (not completed/failed/cancelled/stopped). */
int isc_store_experiment_list_active(struct isc_store *s, struct isc_experiment **out, size_t *n,
                                     struct isc_err *err);
/*
 * Moves the experiment from status `from` to `to` with a reason and appends an
 * event (kind = to), in its own transaction unless one is open. A
 * compare-and-set: when the experiment is no longer in `from` (another writer,
 * such as the meter or a cancel, moved it first) nothing is written and the
 * answer is ISC_ECONFLICT naming the status it is in, so no writer ever
 * overwrites a transition it did not see.
 */
int isc_store_experiment_transition(struct isc_store *s, const char *id, const char *from,
                                    const char *to, const char *reason, struct isc_err *err);
/*
 * The same compare-and-set into "stopping", recording the final status the
 * teardown ends in (completed, failed, cancelled, stopped) and why: the
 * outcome is durable before any node is touched, so a crash mid-teardown
 * changes nothing but who finishes it.
 */
int isc_store_experiment_begin_stop(struct isc_store *s, const char *id, const char *from,
                                    const char *final_status, const char *reason,
                                    struct isc_err *err);
/* Updates the placement fields: nnodes, nproc, shape_id, cycle_count, next_attempt_ms. */
int isc_store_experiment_set_placement(struct isc_store *s, const struct isc_experiment *e,
                                       struct isc_err *err);
int isc_store_experiment_request_cancel(struct isc_store *s, const char *id, struct isc_err *err);
/*
 * The same, naming who asked (issue 47): the timeline's cancel_requested event says
 * "cancel requested by BY" and the final reason "cancelled by BY" (by NULL or "":
 * "user"). BY is a login ("alice"), "the operator", or what asked for it.
 */
int isc_store_experiment_request_cancel_by(struct isc_store *s, const char *id, const char *by,
                                           struct isc_err *err);
/*
 * The reason an experiment ends cancelled with, into out: "cancelled by BY" from its
 * last cancel_requested event, "cancelled by user" when there is none or it cannot be
 * read (the stop goes on either way).
 */
void isc_store_experiment_cancel_reason(struct isc_store *s, const char *id, char *out, size_t cap);
void isc_experiment_cleanup(struct isc_experiment *e);
void isc_experiment_list_free(struct isc_experiment *list, size_t n);

int isc_store_event_add(struct isc_store *s, const char *experiment_id, const char *kind,
                        const char *message, struct isc_err *err);
/* after_id: only events with a larger id (0 for all). */
int isc_store_event_list(struct isc_store *s, const char *experiment_id, int64_t after_id,
                         struct isc_event **out, size_t *n, struct isc_err *err);
void isc_event_list_free(struct isc_event *list, size_t n);

#endif
