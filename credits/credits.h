/*
 * Credits: what organisations have bought, what their running bursts hold and
 * what they have spent, all as sums over the append-only ledger (integer
 * micro-dollars). Every decision that depends on a sum (may this experiment
 * reserve? was this node period already charged?) reads the sum and appends
 * its row inside one BEGIN IMMEDIATE transaction, so racing processes see each
 * other's rows and can never both spend the same credits.
 *
 * The broker's metering contract, sign conventions and the BYO-key rule are
 * in docs/credits.md.
 */
#ifndef ISC_CREDITS_CREDITS_H
#define ISC_CREDITS_CREDITS_H

#include "common/err.h"
#include "credits/money.h"
#include "store/store.h"

#include <stdint.h>

/* Who pays a cluster's cloud bill. */
enum isc_billing {
	ISC_BILLING_CREDITS = 0, /* our cloud account; paid with the org's credits */
	ISC_BILLING_BYO = 1,     /* the org's own cloud key: billed by their cloud, recorded only */
};

struct isc_credit_balance {
	int64_t balance_micros;   /* grants + refunds + adjustments - charges */
	int64_t reserved_micros;  /* reserves - releases: held for running bursts */
	int64_t available_micros; /* balance - reserved; what a new reservation may take */
};

/* Adds credits to an org: 0 < amount <= ISC_MONEY_MAX_MICROS. note may be NULL. */
int isc_credits_grant(struct isc_store *s, const char *org_name, int64_t amount_micros,
                      const char *note, struct isc_err *err);
/* A signed correction by finance (amount != 0, |amount| <= ISC_MONEY_MAX_MICROS); note required. */
int isc_credits_adjust(struct isc_store *s, const char *org_name, int64_t amount_micros,
                       const char *note, struct isc_err *err);
int isc_credits_balance(struct isc_store *s, const char *org_name, struct isc_credit_balance *out,
                        struct isc_err *err);

/*
 * Sets a project's spending cap (amount_micros >= 0), or removes it with -1.
 * project is an id or a name within org_name.
 */
int isc_project_set_budget(struct isc_store *s, const char *org_name, const char *project,
                           int64_t amount_micros, struct isc_err *err);

/* Spend, holds and budget of one project (credits billing only). */
struct isc_project_money {
	int has_budget;
	int64_t budget_micros;
	int64_t spent_micros;
	int64_t reserved_micros;
	int64_t remaining_micros; /* budget - spent - reserved; meaningless without a budget */
};
int isc_project_money_get(struct isc_store *s, const char *project_id,
                          struct isc_project_money *out, struct isc_err *err);

/* ISC_BILLING_BYO when the cluster runs on an org's own cloud key (account != "default"). */
int isc_credits_cluster_billing(struct isc_store *s, const char *cluster_id, enum isc_billing *out,
                                struct isc_err *err);

/*
 * Holds amount_micros (> 0) of the org's credits for the experiment. In one
 * transaction: checks the org's available credits and the project's remaining
 * budget, then appends a reserve row; else ISC_ECREDITS and nothing is written.
 * cluster_id may be NULL (a reservation before the cluster row exists); when it
 * names a BYO-billed cluster nothing is reserved and 0 is returned.
 */
int isc_credits_reserve(struct isc_store *s, const char *experiment_id, const char *cluster_id,
                        int64_t amount_micros, struct isc_err *err);
/* Which limit refused a hold: the organisation's credits or the project's budget. */
enum isc_credits_limit {
	ISC_CREDITS_LIMIT_NONE,
	ISC_CREDITS_LIMIT_ORG,
	ISC_CREDITS_LIMIT_PROJECT,
};
/*
 * isc_credits_reserve that also says, on ISC_ECREDITS, which limit refused it
 * (the broker's waiting order lines bursts up behind the money they wait for).
 */
int isc_credits_reserve_limit(struct isc_store *s, const char *experiment_id,
                              const char *cluster_id, int64_t amount_micros,
                              enum isc_credits_limit *limit, struct isc_err *err);
/* Releases everything the experiment still holds (a no-op when it holds nothing). */
int isc_credits_release(struct isc_store *s, const char *experiment_id, struct isc_err *err);
/*
 * Tops the experiment's hold back up to window_amount_micros (the cluster's
 * cost for the next reservation window), with the same checks as reserve.
 * ISC_ECREDITS when the org or the project cannot cover it: the broker then
 * stops the experiment. A BYO-billed cluster always succeeds without a hold.
 */
int isc_credits_renew(struct isc_store *s, const char *experiment_id, const char *cluster_id,
                      int64_t window_amount_micros, struct isc_err *err);

/*
 * isc_credits_renew that also says, on ISC_ECREDITS, which limit refused it. The
 * broker takes a new cluster's first hold with it too: a renewal by the meter and
 * the first hold, in either order, hold one window, never two.
 */
int isc_credits_renew_limit(struct isc_store *s, const char *experiment_id, const char *cluster_id,
                            int64_t window_amount_micros, enum isc_credits_limit *limit,
                            struct isc_err *err);
/*
 * The meter's renewal (issue 49): tops the hold up to window_amount_micros only when
 * what it holds has fallen below below_micros (0 < below <= window); otherwise a no-op
 * that writes nothing. ISC_ECREDITS as isc_credits_renew.
 */
int isc_credits_renew_below(struct isc_store *s, const char *experiment_id, const char *cluster_id,
                            int64_t window_amount_micros, int64_t below_micros,
                            struct isc_err *err);

/*
 * The release side of the rule for holds: in one transaction, releases whatever
 * the experiment holds if it has ended or has no open cluster left (then nothing
 * would consume or release it), and otherwise the part above one window
 * (window_ms at the rate of its largest open cluster). *released_micros (may be
 * NULL) says how much, *ended (may be NULL) whether the experiment had ended.
 */
int isc_credits_settle(struct isc_store *s, const char *experiment_id, int64_t window_ms,
                       int64_t *released_micros, int *ended, struct isc_err *err);

/*
 * The invariants of holds (docs/credits.md, "Invariants"), as test builds check
 * them after each tick. ISC_HOLDS_CHECK_ENDED: an experiment that has ended holds
 * nothing. ISC_HOLDS_CHECK_ALL adds: a hold has an open cluster of its experiment,
 * no experiment holds more than the largest window (window_ms at the cluster's
 * rate) of its open clusters, and per organisation reserved <= balance + the part
 * of its charges no hold covered + finance's negative adjustments. Experiments
 * for which skip(id, ctx) is 1 (a step in flight) are not checked. Each violation
 * is one line of *report (may be NULL); *violations counts them.
 */
enum isc_holds_check { ISC_HOLDS_CHECK_ENDED, ISC_HOLDS_CHECK_ALL };
struct isc_buf;
int isc_credits_holds_check(struct isc_store *s, enum isc_holds_check what, int64_t window_ms,
                            int (*skip)(const char *experiment_id, void *ctx), void *ctx,
                            struct isc_buf *report, size_t *violations, struct isc_err *err);
/*
 * The same, and (below_ms > 0, ISC_HOLDS_CHECK_ALL) the rule of issue 49's renewals: an
 * experiment that holds credits and is not stopping holds at least below_ms at the rate
 * of its largest cluster that takes holds (the meter renews a hold that fell below it,
 * or stops the experiment).
 */
int isc_credits_holds_check_below(struct isc_store *s, enum isc_holds_check what, int64_t window_ms,
                                  int64_t below_ms,
                                  int (*skip)(const char *experiment_id, void *ctx), void *ctx,
                                  struct isc_buf *report, size_t *violations, struct isc_err *err);

/* One node's usage for a period, as the broker meters it each tick. */
struct isc_charge {
	const char *experiment_id;    /* required */
	const char *cluster_id;       /* may be NULL */
	const char *node_instance_id; /* required: charges are deduplicated per node */
	int64_t price_micros;         /* per node-hour, the snapshot taken at launch; >= 0 */
	const char *provider;         /* e.g. "aws" */
	const char *shape_id;
	int64_t period_start_ms; /* [start, end) in ms since the epoch, end > start */
	int64_t period_end_ms;
	enum isc_billing billing; /* must match the cluster's account when cluster_id is known */
	/* The launch the cloud reported (0: unknown, then period_start_ms): a node's cost is
	 * priced from it, so its charges add up to its interval's cost exactly. */
	int64_t launched_ms;
	/* > 0: period_end_ms is the termination the cloud confirmed, and the node is billed
	 * at least this long from its launch (the provider's minimum per start). */
	int64_t minimum_ms;
};

/*
 * Charges a node for [period_start_ms, period_end_ms). Whatever part of the
 * period was already charged for this node is skipped (only time after the
 * node's latest charged period_end counts), so a retried or overlapping call
 * never charges twice. amount = cost(launch..end) - cost(launch..start), each
 * cost ceil(price x ms / 3,600,000) micros (isc_credits_interval_cost_micros):
 * however many charges a node's interval takes, they add up to the cost of the
 * whole interval, rounded once. A charge is never refused for lack of credits
 * (the cloud bills regardless); it consumes the experiment's hold by the same
 * amount, or what is left of it, recorded in the charge's own row
 * (consumed_micros). BYO-billed charges are recorded (billing 'byo') but move no
 * balance.
 */
int isc_credits_charge_node(struct isc_store *s, const struct isc_charge *c, struct isc_err *err);
/* The same, reporting what was written (0 when the period had been charged already). */
int isc_credits_charge_node_report(struct isc_store *s, const struct isc_charge *c,
                                   int64_t *charged_micros, struct isc_err *err);

/* ceil(price_micros x duration_ms / 3,600,000) with 128-bit intermediates; -1 if out of range. */
int64_t isc_credits_cost_micros(int64_t price_micros_per_hour, int64_t duration_ms);
/*
 * The part of a node's cost from start_ms to end_ms, priced from its launch:
 * cost(launch..end) - cost(launch..start); with minimum_ms > 0 the interval closes at
 * end_ms and is billed at least minimum_ms from the launch. -1 if out of range or
 * launch <= start <= end does not hold.
 */
int64_t isc_credits_interval_cost_micros(int64_t price_micros_per_hour, int64_t launched_ms,
                                         int64_t start_ms, int64_t end_ms, int64_t minimum_ms);
/*
 * The cloud's minimum billed time per instance start (../shared/docs/metering-facts.md):
 * one hour for OCI bare metal ("BM." shapes), one minute for every other shape.
 * store/store_int.h's ISC_STORE_MINIMUM_MS_SQL says the same in SQL.
 */
int64_t isc_credits_minimum_ms(const char *provider, const char *shape_id);

/*
 * What the experiment's nodes cost so far (credits and BYO), for `isc experiments`:
 * the charges, plus what the open intervals accrued since their last charge at the
 * store's now (isc_store_ledger_experiment_accrued). Once every node is charged to
 * its end, the charges alone, to the micro-dollar.
 */
int isc_credits_experiment_cost(struct isc_store *s, const char *experiment_id, int64_t *micros,
                                struct isc_err *err);

#endif
