/*
 * The ledger table: append-only money rows in integer micro-dollars, and the
 * sums that balances, holds, budgets and the spend report are made of. Rows
 * are only ever inserted (triggers refuse UPDATE and DELETE). The rules that
 * decide whether a row may be written live in credits/credits.c; this file
 * only reads and writes, inside whatever transaction the caller holds.
 *
 * Amounts: amount_micros is positive for every kind except 'adjustment',
 * which is signed. The kind says which way money moves (see docs/credits.md).
 */
#ifndef ISC_STORE_STORE_LEDGER_H
#define ISC_STORE_STORE_LEDGER_H

#include "common/model.h"
#include "store/store.h"

#include <stddef.h>
#include <stdint.h>

struct isc_ledger_row {
	int64_t org_id;
	const char *project_id;    /* NULL for org-level rows (grants) */
	const char *experiment_id; /* NULL unless the row is about an experiment */
	const char *cluster_id;
	const char *node_instance_id; /* charges only */
	const char *kind;             /* grant reserve release charge refund adjustment */
	const char *billing;          /* "credits" or "byo" */
	int64_t amount_micros;
	int has_price; /* charges: price_micros is the node-hour snapshot */
	int64_t price_micros;
	const char *provider, *shape_id;
	int has_period;
	int64_t period_start_ms, period_end_ms;
	const char *note; /* NULL: "" */
	/* charges (credits): the part of the experiment's hold this charge consumed,
	 * 0..amount_micros; the totals subtract it from reserved (migration 23) */
	int64_t consumed_micros;
};

int isc_store_ledger_append(struct isc_store *s, const struct isc_ledger_row *r,
                            struct isc_err *err);

/* Credits rows of one org: balance = grants + refunds + adjustments - charges; reserved = reserves
 * - releases - what charges consumed. */
int isc_store_ledger_org_sums(struct isc_store *s, int64_t org_id, int64_t *balance_micros,
                              int64_t *reserved_micros, struct isc_err *err);
/* Credits rows of one project: charges, and reserves - releases. */
int isc_store_ledger_project_sums(struct isc_store *s, const char *project_id,
                                  int64_t *spent_micros, int64_t *reserved_micros,
                                  struct isc_err *err);
/* What an experiment still holds (credits reserves - releases - what charges consumed). */
int isc_store_ledger_experiment_held(struct isc_store *s, const char *experiment_id,
                                     int64_t *held_micros, struct isc_err *err);
/* All charges of an experiment, credits and byo. */
int isc_store_ledger_experiment_cost(struct isc_store *s, const char *experiment_id,
                                     int64_t *cost_micros, struct isc_err *err);
/*
 * What the experiment's nodes have run and the ledger has not charged yet, at
 * now_ms: per node launched and not charged to its end, the cost from its
 * charged_until (or launch) to its termination, its first miss, or now_ms,
 * priced from the launch as the meter prices it (ISC_STORE_ACCRUED_SQL).
 */
int isc_store_ledger_experiment_accrued(struct isc_store *s, const char *experiment_id,
                                        int64_t now_ms, int64_t *accrued_micros,
                                        struct isc_err *err);
/* The end of the latest charged period of a node; *found 0 when never charged. */
int isc_store_ledger_node_charged_until(struct isc_store *s, const char *instance_id,
                                        int64_t *until_ms, int *found, struct isc_err *err);
/* Keeps nodes.charged_until_ms in step with the ledger (no-op for unknown nodes). */
int isc_store_ledger_node_mark(struct isc_store *s, const char *instance_id, int64_t until_ms,
                               struct isc_err *err);

/*
 * The experiments that hold credits now (reserves - releases != 0), for the
 * meter's settling of holds and the holds check. *ids: caller frees each, then
 * the array.
 */
int isc_store_ledger_holders(struct isc_store *s, char ***ids, size_t *n, struct isc_err *err);

/* What one experiment holds now (isc_store_ledger_holds). */
struct isc_ledger_hold {
	char *experiment_id;
	int64_t held_micros;
};

/*
 * Every experiment's hold, in one read, sorted by experiment id (strcmp): the meter's
 * look at which holds are below their threshold costs one query a tick, not one per
 * cluster (issue 49). An experiment with no row holds 0. Free with
 * isc_ledger_holds_free.
 */
int isc_store_ledger_holds(struct isc_store *s, struct isc_ledger_hold **out, size_t *n,
                           struct isc_err *err);
void isc_ledger_holds_free(struct isc_ledger_hold *v, size_t n);
/* The index of experiment_id in v (sorted as isc_store_ledger_holds returns it); -1: none. */
ptrdiff_t isc_ledger_holds_index(const struct isc_ledger_hold *v, size_t n,
                                 const char *experiment_id);
/* The hold of experiment_id in v; 0: none. */
int64_t isc_ledger_holds_find(const struct isc_ledger_hold *v, size_t n, const char *experiment_id);

/*
 * What bounds an organisation's holds (docs/credits.md, "Overspend bound"), summed
 * over its credits rows in one statement: balance and reserved as the totals have
 * them; uncovered = the part of its charges no hold covered (charges - the releases
 * noted consumed_note); negative_adjustments = finance's corrections downwards, as
 * a positive amount.
 */
struct isc_ledger_org_cover {
	int64_t org_id;
	int64_t balance_micros, reserved_micros;
	int64_t uncovered_micros, negative_adjustments_micros;
};
int isc_store_ledger_org_cover(struct isc_store *s, const char *consumed_note,
                               struct isc_ledger_org_cover **out, size_t *n, struct isc_err *err);

/* has_budget 0: no cap (NULL). */
int isc_store_project_set_budget(struct isc_store *s, const char *project_id, int has_budget,
                                 int64_t budget_micros, struct isc_err *err);

/* The spend report: charges grouped by one key (enum isc_spend_by, common/model.h). */

struct isc_spend_query {
	const char *org_name; /* NULL: every org */
	const char *project;  /* id or name; NULL: every project */
	int has_from, has_to;
	int64_t from_ms; /* inclusive, on period_start_ms */
	int64_t to_ms;   /* inclusive */
	enum isc_spend_by by;
	const char *billing; /* "credits", "byo", or NULL for both */
};

struct isc_spend_row {
	char *key; /* project or experiment name, provider, shape id, YYYY-MM-DD (UTC) */
	char *id;  /* project or experiment id; NULL for the other keys */
	int64_t amount_micros;
};

/* Rows ordered by key; the sum is exact (SQLite integer sums fail loudly on overflow). */
int isc_store_ledger_spend(struct isc_store *s, const struct isc_spend_query *q,
                           struct isc_spend_row **out, size_t *n, struct isc_err *err);
void isc_spend_rows_free(struct isc_spend_row *rows, size_t n);

#endif
