/*
 * Credits: grants, holds, charges and budgets over the append-only ledger.
 * Each operation that checks a sum before it appends does both inside one
 * BEGIN IMMEDIATE transaction (isc_store_begin): SQLite lets one writer in at
 * a time, so a racing process reads the sums only after our row is committed.
 */
#include "credits/credits.h"
#include "common/buf.h"
#include "store/store_clusters.h"
#include "store/store_experiments.h"
#include "store/store_ledger.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MS_PER_HOUR INT64_C(3600000)

int64_t isc_credits_cost_micros(int64_t price_micros_per_hour, int64_t duration_ms)
{
	__int128 product, cost;

	if (price_micros_per_hour < 0 || duration_ms < 0)
		return -1;
	product = (__int128)price_micros_per_hour * duration_ms;
	cost = (product + MS_PER_HOUR - 1) / MS_PER_HOUR;
	return cost > ISC_MONEY_MAX_MICROS ? -1 : (int64_t)cost;
}

int64_t isc_credits_interval_cost_micros(int64_t price_micros_per_hour, int64_t launched_ms,
                                         int64_t start_ms, int64_t end_ms, int64_t minimum_ms)
{
	int64_t to, from;

	if (launched_ms > start_ms || start_ms > end_ms || minimum_ms < 0)
		return -1;
	if (minimum_ms > 0 && end_ms - launched_ms < minimum_ms)
		end_ms = launched_ms + minimum_ms; /* the cloud's minimum per start */
	to = isc_credits_cost_micros(price_micros_per_hour, end_ms - launched_ms);
	from = isc_credits_cost_micros(price_micros_per_hour, start_ms - launched_ms);
	/* Both rounded up the same way from the same origin: the charges of one node
	 * telescope to the cost of its whole interval, rounded once. */
	return to < 0 || from < 0 ? -1 : to - from;
}

int64_t isc_credits_minimum_ms(const char *provider, const char *shape_id)
{
	/* OCI bills bare metal (GPU bare metal included) for at least an hour per start;
	 * AWS, GCP and OCI VMs for at least a minute. The shape ids of the catalog name
	 * the instance type ("oci-REGION-BM.GPU4.8-ondemand"). */
	if (provider && strcmp(provider, "oci") == 0 && shape_id && strstr(shape_id, "BM."))
		return 3600000;
	return 60000;
}

static const char *billing_name(enum isc_billing b)
{
	return b == ISC_BILLING_BYO ? "byo" : "credits";
}

static enum isc_billing billing_of_account(const char *account)
{
	return account && *account && strcmp(account, "default") != 0 ? ISC_BILLING_BYO
	                                                              : ISC_BILLING_CREDITS;
}

/* The waiting messages' amounts: money's one form for people (credits/money.h). */
static const char *money(int64_t micros, char *buf, size_t size)
{
	return isc_money_dollars(micros, buf, size);
}

/* micros rounded up to a whole cent: an amount that, once granted, is enough. */
static int64_t cents_up(int64_t micros)
{
	return micros <= 0 ? 0 : (micros + 9999) / 10000 * 10000;
}

/* One credits row of an organisation alone (a grant or an adjustment), checked already. */
static int append_org_row(struct isc_store *s, const char *org_name, const char *kind,
                          int64_t amount_micros, const char *note, struct isc_err *err)
{
	struct isc_ledger_row row = {0};
	struct isc_org org;
	int rc;

	if ((rc = isc_store_org_find(s, org_name, &org, err)))
		return rc;
	row.org_id = org.id;
	row.kind = kind;
	row.billing = "credits";
	row.amount_micros = amount_micros;
	row.note = note;
	rc = isc_store_ledger_append(s, &row, err);
	isc_org_cleanup(&org);
	return rc;
}

int isc_credits_grant(struct isc_store *s, const char *org_name, int64_t amount_micros,
                      const char *note, struct isc_err *err)
{
	if (amount_micros <= 0)
		return isc_err_set(err, ISC_EINVALID, "a grant must be a positive amount");
	if (amount_micros > ISC_MONEY_MAX_MICROS)
		return isc_err_set(err, ISC_EINVALID, "a grant may be at most $%lld",
		                   (long long)(ISC_MONEY_MAX_MICROS / ISC_MICROS_PER_DOLLAR));
	if (!org_name || !*org_name)
		return isc_err_set(err, ISC_EINVALID, "a grant needs an organisation");
	return append_org_row(s, org_name, "grant", amount_micros, note, err);
}

int isc_credits_adjust(struct isc_store *s, const char *org_name, int64_t amount_micros,
                       const char *note, struct isc_err *err)
{
	if (amount_micros == 0 || amount_micros > ISC_MONEY_MAX_MICROS ||
	    amount_micros < -ISC_MONEY_MAX_MICROS)
		return isc_err_set(err, ISC_EINVALID,
		                   "an adjustment must be non-zero and at most $%lld",
		                   (long long)(ISC_MONEY_MAX_MICROS / ISC_MICROS_PER_DOLLAR));
	if (!note || !*note)
		return isc_err_set(err, ISC_EINVALID, "an adjustment needs a note saying why");
	return append_org_row(s, org_name, "adjustment", amount_micros, note, err);
}

int isc_credits_balance(struct isc_store *s, const char *org_name, struct isc_credit_balance *out,
                        struct isc_err *err)
{
	struct isc_org org;
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = isc_store_org_find(s, org_name, &org, err)))
		return rc;
	rc = isc_store_ledger_org_sums(s, org.id, &out->balance_micros, &out->reserved_micros, err);
	out->available_micros = out->balance_micros - out->reserved_micros;
	isc_org_cleanup(&org);
	return rc;
}

int isc_project_money_get(struct isc_store *s, const char *project_id,
                          struct isc_project_money *out, struct isc_err *err)
{
	struct isc_project p;
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = isc_store_project_resolve(s, project_id, &p, err)))
		return rc;
	out->has_budget = p.has_budget;
	out->budget_micros = p.budget_micros;
	isc_project_cleanup(&p);
	rc = isc_store_ledger_project_sums(s, project_id, &out->spent_micros, &out->reserved_micros,
	                                   err);
	out->remaining_micros = out->budget_micros - out->spent_micros - out->reserved_micros;
	return rc;
}

int isc_project_set_budget(struct isc_store *s, const char *org_name, const char *project,
                           int64_t amount_micros, struct isc_err *err)
{
	struct isc_project *list = NULL;
	const char *id = NULL;
	size_t n = 0;
	int rc;

	if (amount_micros < -1 || amount_micros > ISC_MONEY_MAX_MICROS)
		return isc_err_set(err, ISC_EINVALID,
		                   "a budget must be between $0 and $%lld, or none",
		                   (long long)(ISC_MONEY_MAX_MICROS / ISC_MICROS_PER_DOLLAR));
	if (!org_name || !project)
		return isc_err_set(err, ISC_EINVALID,
		                   "a budget needs an organisation and a project");
	{
		struct isc_org org;
		if ((rc = isc_store_org_find(s, org_name, &org, err)))
			return rc;
		isc_org_cleanup(&org);
	}
	if ((rc = isc_store_project_list(s, org_name, &list, &n, err)))
		return rc;
	for (size_t i = 0; i < n && !id; i++)
		if (strcmp(list[i].id, project) == 0 || strcmp(list[i].name, project) == 0)
			id = list[i].id;
	if (!id)
		rc = isc_err_set(err, ISC_ENOTFOUND, "organisation '%s' has no project '%s'",
		                 org_name, project);
	else
		rc = isc_store_project_set_budget(s, id, amount_micros >= 0, amount_micros, err);
	isc_project_list_free(list, n);
	return rc;
}

int isc_credits_cluster_billing(struct isc_store *s, const char *cluster_id, enum isc_billing *out,
                                struct isc_err *err)
{
	struct isc_cluster c;
	int rc = isc_store_cluster_get(s, cluster_id, &c, err);
	if (rc)
		return rc;
	*out = billing_of_account(c.account);
	isc_cluster_cleanup(&c);
	return 0;
}

/* "for the next hour", "for the next 3 hours", "for the next 20 minutes", from the cluster's rate.
 */
static void window_phrase(int64_t amount, int64_t hourly, char *buf, size_t size)
{
	if (hourly <= 0) {
		snprintf(buf, size, "for its reservation");
	} else if (amount % hourly == 0) {
		int64_t h = amount / hourly;
		if (h == 1)
			snprintf(buf, size, "for the next hour");
		else
			snprintf(buf, size, "for the next %lld hours", (long long)h);
	} else {
		int64_t minutes = (int64_t)(((__int128)amount * 60 + hourly - 1) / hourly);
		snprintf(buf, size, "for the next %lld minute%s", (long long)minutes,
		         minutes == 1 ? "" : "s");
	}
}

/* Appends a release of min(amount, held) for the experiment; amount < 0 releases everything. */
static int release_held(struct isc_store *s, const struct isc_experiment *e, const char *cluster_id,
                        int64_t amount, const char *note, struct isc_err *err)
{
	struct isc_ledger_row row = {0};
	int64_t held;
	int rc = isc_store_ledger_experiment_held(s, e->id, &held, err);

	if (rc || held <= 0)
		return rc;
	row.org_id = e->org_id;
	row.project_id = e->project_id;
	row.experiment_id = e->id;
	row.cluster_id = cluster_id;
	row.kind = "release";
	row.billing = "credits";
	row.amount_micros = amount < 0 || amount > held ? held : amount;
	row.note = note;
	if (row.amount_micros == 0)
		return 0;
	return isc_store_ledger_append(s, &row, err);
}

/*
 * Ledger note of the release that consumed a hold by a charge, as charges wrote it
 * before migration 24 (a charge now records what it consumed in its own row); the
 * overspend check still reads the old rows by it.
 */
#define CONSUMED_NOTE "consumed by a charge"

/*
 * A cluster whose nodes a hold still covers: launching, booting, running or
 * draining. A terminating cluster's hold was released by its teardown (its last
 * charges consume what is left); a closed one has nothing left to bill.
 */
static int cluster_takes_holds(const char *state)
{
	return strcmp(state, "terminating") != 0 && strcmp(state, "closed") != 0;
}

/*
 * The shared body of reserve and renew, and the one rule for holds
 * (docs/credits.md, "Holds"). Everything is read in the transaction that writes:
 * - an experiment that has ended holds nothing: renew releases what is left
 *   (a renewal that raced the experiment's end), reserve is refused;
 * - a cluster that is terminating or closed takes no hold: renew is a no-op,
 *   reserve is refused;
 * - renew tops the experiment's hold up to `amount` (never adds to a full one,
 *   so a renewal and the broker's first hold of a cluster, in either order,
 *   hold one window); reserve adds `amount` to it.
 */
static int hold(struct isc_store *s, const char *experiment_id, const char *cluster_id,
                int64_t amount, int renew, int64_t below, enum isc_credits_limit *limit,
                struct isc_err *err)
{
	struct isc_experiment e = {0};
	struct isc_cluster c = {0};
	struct isc_project_money pm;
	struct isc_ledger_row row = {0};
	int64_t balance, reserved, available, held = 0, need, hourly = 0;
	char a[48], b[48], c3[48], d[48], phrase[64];
	int rc, have_cluster = 0;

	if (!experiment_id || !*experiment_id)
		return isc_err_set(err, ISC_EINVALID, "a reservation needs an experiment");
	if (amount <= 0 || amount > ISC_MONEY_MAX_MICROS)
		return isc_err_set(err, ISC_EINVALID,
		                   "a reservation must be positive and at most $%lld",
		                   (long long)(ISC_MONEY_MAX_MICROS / ISC_MICROS_PER_DOLLAR));
	if ((rc = isc_store_begin(s, err)))
		return rc;
	if ((rc = isc_store_experiment_get(s, experiment_id, &e, err)))
		goto out;
	if (isc_status_is_final(e.status)) {
		if (renew)
			rc = release_held(s, &e, cluster_id, -1, "released: the experiment ended",
			                  err);
		else
			rc = isc_err_set(err, ISC_ECONFLICT,
			                 "experiment %s is %s: an experiment that ended holds no "
			                 "credits",
			                 experiment_id, e.status);
		goto out;
	}
	if (cluster_id) {
		if ((rc = isc_store_cluster_get(s, cluster_id, &c, err)))
			goto out;
		have_cluster = 1;
		if (strcmp(c.experiment_id, experiment_id) != 0) {
			rc = isc_err_set(err, ISC_EINVALID,
			                 "cluster %s belongs to experiment %s, not %s", cluster_id,
			                 c.experiment_id, experiment_id);
			goto out;
		}
		if (billing_of_account(c.account) == ISC_BILLING_BYO)
			goto out; /* billed by the org's own cloud: nothing to hold */
		if (!cluster_takes_holds(c.state)) {
			if (!renew)
				rc = isc_err_set(err, ISC_ECONFLICT,
				                 "cluster %s is %s: it takes no new hold",
				                 cluster_id, c.state);
			goto out; /* a renewal that raced the teardown: nothing to renew */
		}
		if (c.nnodes > 0 && c.price_micros > 0 && c.price_micros <= ISC_MONEY_MAX_MICROS)
			hourly = c.price_micros * c.nnodes;
	}
	if ((rc = isc_store_ledger_experiment_held(s, experiment_id, &held, err)))
		goto out;
	/* A renewal re-authorises only a hold that fell below its threshold: one reserve
	 * row per half window (by default), not one per tick (issue 49). */
	if (renew && held >= below)
		goto out;
	need = renew ? amount - held : amount;
	if (need <= 0)
		goto out;
	window_phrase(amount, hourly, phrase, sizeof(phrase));
	if ((rc = isc_store_ledger_org_sums(s, e.org_id, &balance, &reserved, err)))
		goto out;
	available = balance - reserved;
	if (available < need) {
		char unblock[160];
		if (limit)
			*limit = ISC_CREDITS_LIMIT_ORG;
		/* What unblocks it: a grant of the shortfall, rounded up to the cent. */
		int64_t gap = cents_up(need - available);
		snprintf(unblock, sizeof(unblock),
		         "; a grant of %s or more unblocks it (isc credits grant --org %s %s)",
		         money(gap, d, sizeof(d)), e.org_name, d + 1);
		if (renew && held > 0)
			rc = isc_err_set(
			    err, ISC_ECREDITS,
			    "organisation %s has %s available; the cluster needs %s more to hold "
			    "%s %s%s",
			    e.org_name, money(available, a, sizeof(a)), money(need, b, sizeof(b)),
			    money(amount, c3, sizeof(c3)), phrase, unblock);
		else
			rc = isc_err_set(
			    err, ISC_ECREDITS,
			    "organisation %s has %s available; the cluster needs %s %s%s",
			    e.org_name, money(available, a, sizeof(a)), money(need, b, sizeof(b)),
			    phrase, unblock);
		goto out;
	}
	if ((rc = isc_project_money_get(s, e.project_id, &pm, err)))
		goto out;
	if (pm.has_budget && pm.remaining_micros < need) {
		if (limit)
			*limit = ISC_CREDITS_LIMIT_PROJECT;
		/* What unblocks it: a budget larger by the shortfall, rounded up to the cent. */
		const char *pname = e.project_name ? e.project_name : e.project_id;
		money(cents_up(pm.budget_micros + need - pm.remaining_micros), d, sizeof(d));
		rc =
		    isc_err_set(err, ISC_ECREDITS,
		                "project %s has %s of its %s budget left; the cluster needs %s %s; "
		                "a budget of %s or more unblocks it (isc project budget --org %s "
		                "--project %s %s)",
		                pname, money(pm.remaining_micros, a, sizeof(a)),
		                money(pm.budget_micros, c3, sizeof(c3)), money(need, b, sizeof(b)),
		                phrase, d, e.org_name, pname, d + 1);
		goto out;
	}
	row.org_id = e.org_id;
	row.project_id = e.project_id;
	row.experiment_id = experiment_id;
	row.cluster_id = cluster_id;
	row.kind = "reserve";
	row.billing = "credits";
	row.amount_micros = need;
	row.provider = have_cluster ? c.provider : NULL;
	row.shape_id = have_cluster ? c.shape_id : NULL;
	row.note = renew && held > 0 ? "renew" : NULL; /* a first hold reads as a reservation */
	rc = isc_store_ledger_append(s, &row, err);
out:
	if (!rc)
		rc = isc_store_commit(s, err);
	if (rc)
		isc_store_rollback(s);
	isc_experiment_cleanup(&e);
	isc_cluster_cleanup(&c);
	return rc;
}

int isc_credits_reserve(struct isc_store *s, const char *experiment_id, const char *cluster_id,
                        int64_t amount_micros, struct isc_err *err)
{
	return hold(s, experiment_id, cluster_id, amount_micros, 0, 0, NULL, err);
}

int isc_credits_reserve_limit(struct isc_store *s, const char *experiment_id,
                              const char *cluster_id, int64_t amount_micros,
                              enum isc_credits_limit *limit, struct isc_err *err)
{
	*limit = ISC_CREDITS_LIMIT_NONE;
	return hold(s, experiment_id, cluster_id, amount_micros, 0, 0, limit, err);
}

int isc_credits_renew(struct isc_store *s, const char *experiment_id, const char *cluster_id,
                      int64_t window_amount_micros, struct isc_err *err)
{
	return hold(s, experiment_id, cluster_id, window_amount_micros, 1, window_amount_micros,
	            NULL, err);
}

int isc_credits_renew_limit(struct isc_store *s, const char *experiment_id, const char *cluster_id,
                            int64_t window_amount_micros, enum isc_credits_limit *limit,
                            struct isc_err *err)
{
	*limit = ISC_CREDITS_LIMIT_NONE;
	return hold(s, experiment_id, cluster_id, window_amount_micros, 1, window_amount_micros,
	            limit, err);
}

int isc_credits_renew_below(struct isc_store *s, const char *experiment_id, const char *cluster_id,
                            int64_t window_amount_micros, int64_t below_micros, struct isc_err *err)
{
	if (below_micros <= 0 || below_micros > window_amount_micros)
		return isc_err_set(err, ISC_EINVALID,
		                   "a renewal threshold must be above zero and at most the window");
	return hold(s, experiment_id, cluster_id, window_amount_micros, 1, below_micros, NULL, err);
}

/* *open: how many of the experiment's clusters are not closed; *window: the largest's window. */
static int open_clusters(struct isc_store *s, const char *experiment_id, int64_t window_ms,
                         size_t *open, int64_t *window, struct isc_err *err)
{
	struct isc_cluster *list;
	size_t n;
	int rc = isc_store_cluster_list_for_experiment(s, experiment_id, 1, &list, &n, err);

	*open = 0;
	*window = 0;
	if (rc)
		return rc;
	for (size_t i = 0; i < n; i++) {
		int64_t w =
		    list[i].nnodes > 0 && list[i].price_micros >= 0 &&
		            list[i].price_micros <= ISC_MONEY_MAX_MICROS
		        ? isc_credits_cost_micros(list[i].price_micros * list[i].nnodes, window_ms)
		        : -1;
		if (strcmp(list[i].state, "closed") == 0)
			continue;
		(*open)++;
		if (w > *window)
			*window = w;
	}
	isc_cluster_list_free(list, n);
	return 0;
}

int isc_credits_settle(struct isc_store *s, const char *experiment_id, int64_t window_ms,
                       int64_t *released_micros, int *ended, struct isc_err *err)
{
	struct isc_experiment e = {0};
	int64_t before = 0, after = 0, window = 0;
	size_t open = 0;
	int rc;

	if (released_micros)
		*released_micros = 0;
	if (ended)
		*ended = 0;
	if (!experiment_id || !*experiment_id)
		return isc_err_set(err, ISC_EINVALID, "settling a hold needs an experiment");
	if ((rc = isc_store_begin(s, err)))
		return rc;
	if ((rc = isc_store_experiment_get(s, experiment_id, &e, err)))
		goto out;
	if (!isc_status_is_final(e.status) &&
	    (rc = open_clusters(s, experiment_id, window_ms, &open, &window, err)))
		goto out;
	if ((rc = isc_store_ledger_experiment_held(s, experiment_id, &before, err)))
		goto out;
	if (isc_status_is_final(e.status) || open == 0)
		rc = release_held(s, &e, NULL, -1,
		                  isc_status_is_final(e.status) ? "released: the experiment ended"
		                                                : "released: no open cluster",
		                  err);
	else if (window >= 0 && before > window)
		/*
		 * A live experiment holds one window of its largest open cluster. A larger
		 * cluster that closed (a drained one replaced at a lower spot price) leaves
		 * its larger hold behind, which renewals only ever top up: give back the
		 * part no open cluster can consume.
		 */
		rc = release_held(s, &e, NULL, before - window,
		                  "released: more than one window of its open clusters", err);
	if (!rc)
		rc = isc_store_ledger_experiment_held(s, experiment_id, &after, err);
out:
	if (!rc)
		rc = isc_store_commit(s, err);
	if (rc) {
		isc_store_rollback(s);
	} else {
		if (released_micros)
			*released_micros = before - after;
		if (ended)
			*ended = e.status && isc_status_is_final(e.status);
	}
	isc_experiment_cleanup(&e);
	return rc;
}

static void violation(struct isc_buf *report, size_t *violations, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void violation(struct isc_buf *report, size_t *violations, const char *fmt, ...)
{
	va_list ap;
	(*violations)++;
	if (!report)
		return;
	va_start(ap, fmt);
	isc_buf_vprintf(report, fmt, ap);
	va_end(ap);
	isc_buf_putc(report, '\n');
}

/* The renewal threshold of the experiment's largest cluster that takes holds (0: none). */
static int renewal_floor(struct isc_store *s, const char *experiment_id, int64_t below_ms,
                         int64_t *floor, struct isc_err *err)
{
	struct isc_cluster *list;
	size_t n;
	int rc = isc_store_cluster_list_for_experiment(s, experiment_id, 1, &list, &n, err);

	*floor = 0;
	if (rc)
		return rc;
	for (size_t i = 0; i < n; i++) {
		int64_t f;
		if (!cluster_takes_holds(list[i].state) ||
		    billing_of_account(list[i].account) != ISC_BILLING_CREDITS ||
		    list[i].nnodes <= 0 || list[i].price_micros < 0 ||
		    list[i].price_micros > ISC_MONEY_MAX_MICROS)
			continue;
		f = isc_credits_cost_micros(list[i].price_micros * list[i].nnodes, below_ms);
		if (f > *floor)
			*floor = f;
	}
	isc_cluster_list_free(list, n);
	return 0;
}

/* One experiment that holds credits, against the invariants. */
static int check_holder(struct isc_store *s, const char *id, enum isc_holds_check what,
                        int64_t window_ms, int64_t below_ms, struct isc_buf *report,
                        size_t *violations, struct isc_err *err)
{
	struct isc_experiment e = {0};
	int64_t held, window;
	size_t open;
	char a[48], b[48];
	int rc;

	if ((rc = isc_store_ledger_experiment_held(s, id, &held, err)))
		return rc;
	if (held == 0)
		return 0;
	if (held < 0) {
		violation(report, violations, "experiment %s holds %s: a hold below zero", id,
		          money(held, a, sizeof(a)));
		return 0;
	}
	rc = isc_store_experiment_get(s, id, &e, err);
	if (rc == ISC_ENOTFOUND) {
		isc_err_clear(err);
		violation(report, violations, "%s is held for experiment %s, which does not exist",
		          money(held, a, sizeof(a)), id);
		return 0;
	}
	if (rc)
		return rc;
	if (isc_status_is_final(e.status)) {
		violation(report, violations,
		          "experiment %s is %s but still holds %s: an ended experiment holds "
		          "nothing",
		          id, e.status, money(held, a, sizeof(a)));
	} else if (what == ISC_HOLDS_CHECK_ALL) {
		if ((rc = open_clusters(s, id, window_ms, &open, &window, err)))
			goto out;
		if (open == 0)
			violation(report, violations,
			          "experiment %s (%s) holds %s without an open cluster: nothing "
			          "will consume or release it",
			          id, e.status, money(held, a, sizeof(a)));
		else if (held > window)
			violation(report, violations,
			          "experiment %s (%s) holds %s, more than the %s window of its "
			          "largest open cluster: a hold was doubled",
			          id, e.status, money(held, a, sizeof(a)),
			          money(window, b, sizeof(b)));
		/* Issue 49: after the meter's renewals a live experiment that is not stopping
		 * holds at least the renewal threshold of its clusters that take holds (a
		 * renewal either topped it up or, refused, stopped it). */
		if (below_ms > 0 && strcmp(e.status, "stopping") != 0) {
			int64_t floor = 0;
			if ((rc = renewal_floor(s, id, below_ms, &floor, err)))
				goto out;
			if (held < floor)
				violation(
				    report, violations,
				    "experiment %s (%s) holds %s, below the %s renewal threshold "
				    "of its largest open cluster: a renewal was missed",
				    id, e.status, money(held, a, sizeof(a)),
				    money(floor, b, sizeof(b)));
		}
	}
out:
	isc_experiment_cleanup(&e);
	return rc;
}

int isc_credits_holds_check(struct isc_store *s, enum isc_holds_check what, int64_t window_ms,
                            int (*skip)(const char *experiment_id, void *ctx), void *ctx,
                            struct isc_buf *report, size_t *violations, struct isc_err *err)
{
	return isc_credits_holds_check_below(s, what, window_ms, 0, skip, ctx, report, violations,
	                                     err);
}

int isc_credits_holds_check_below(struct isc_store *s, enum isc_holds_check what, int64_t window_ms,
                                  int64_t below_ms,
                                  int (*skip)(const char *experiment_id, void *ctx), void *ctx,
                                  struct isc_buf *report, size_t *violations, struct isc_err *err)
{
	struct isc_ledger_org_cover *cover = NULL;
	char **ids = NULL;
	size_t n = 0, n_cover = 0;
	int rc;

	*violations = 0;
	/* One transaction: one snapshot of holds, experiments and clusters. */
	if ((rc = isc_store_begin(s, err)))
		return rc;
	if ((rc = isc_store_ledger_holders(s, &ids, &n, err)))
		goto out;
	for (size_t i = 0; i < n && !rc; i++)
		if (!skip || !skip(ids[i], ctx))
			rc = check_holder(s, ids[i], what, window_ms, below_ms, report, violations,
			                  err);
	if (rc || what != ISC_HOLDS_CHECK_ALL)
		goto out;
	if ((rc = isc_store_ledger_org_cover(s, CONSUMED_NOTE, &cover, &n_cover, err)))
		goto out;
	for (size_t i = 0; i < n_cover; i++) {
		const struct isc_ledger_org_cover *c = &cover[i];
		char a[48], b[48], d[48], f[48];
		/* Every hold was granted only while available covered it; since then only
		 * charges beyond a hold and finance's corrections downwards lower what covers
		 * the holds (docs/credits.md, "Overspend bound"). */
		if (c->reserved_micros < 0 ||
		    c->reserved_micros >
		        c->balance_micros + c->uncovered_micros + c->negative_adjustments_micros)
			violation(report, violations,
			          "organisation %lld holds %s with a balance of %s, of which %s is "
			          "charges no hold covered and %s negative adjustments: holds "
			          "exceed what covered them",
			          (long long)c->org_id, money(c->reserved_micros, a, sizeof(a)),
			          money(c->balance_micros, b, sizeof(b)),
			          money(c->uncovered_micros, d, sizeof(d)),
			          money(c->negative_adjustments_micros, f, sizeof(f)));
	}
out:
	if (!rc)
		rc = isc_store_commit(s, err);
	if (rc)
		isc_store_rollback(s);
	for (size_t i = 0; i < n; i++)
		free(ids[i]);
	free(ids);
	free(cover);
	return rc;
}

int isc_credits_release(struct isc_store *s, const char *experiment_id, struct isc_err *err)
{
	struct isc_experiment e = {0};
	int rc;

	if (!experiment_id || !*experiment_id)
		return isc_err_set(err, ISC_EINVALID, "a release needs an experiment");
	if ((rc = isc_store_begin(s, err)))
		return rc;
	rc = isc_store_experiment_get(s, experiment_id, &e, err);
	if (!rc)
		rc = release_held(s, &e, NULL, -1, "released", err);
	if (!rc)
		rc = isc_store_commit(s, err);
	if (rc)
		isc_store_rollback(s);
	isc_experiment_cleanup(&e);
	return rc;
}

static int check_charge(const struct isc_charge *c, struct isc_err *err)
{
	if (!c || !c->experiment_id || !*c->experiment_id)
		return isc_err_set(err, ISC_EINVALID, "a charge needs an experiment");
	if (!c->node_instance_id || !*c->node_instance_id)
		return isc_err_set(err, ISC_EINVALID, "a charge needs a node instance id");
	if (c->price_micros < 0 || c->price_micros > ISC_MONEY_MAX_MICROS)
		return isc_err_set(err, ISC_EINVALID,
		                   "node price %lld micros per hour is out of range",
		                   (long long)c->price_micros);
	if (c->period_start_ms < 0 || c->period_end_ms <= c->period_start_ms)
		return isc_err_set(err, ISC_EINVALID,
		                   "charge period [%lld, %lld) ms is empty or reversed",
		                   (long long)c->period_start_ms, (long long)c->period_end_ms);
	if (c->billing != ISC_BILLING_CREDITS && c->billing != ISC_BILLING_BYO)
		return isc_err_set(err, ISC_EINVALID, "unknown billing %d", (int)c->billing);
	if (c->launched_ms < 0 || c->minimum_ms < 0 || c->minimum_ms > 24 * MS_PER_HOUR)
		return isc_err_set(err, ISC_EINVALID,
		                   "charge for node %s: launch or minimum out of range",
		                   c->node_instance_id);
	if (isc_credits_cost_micros(c->price_micros, c->period_end_ms - c->period_start_ms) < 0)
		return isc_err_set(err, ISC_EINVALID, "charge for node %s is implausibly large",
		                   c->node_instance_id);
	return 0;
}

int isc_credits_charge_node_report(struct isc_store *s, const struct isc_charge *c,
                                   int64_t *charged_micros, struct isc_err *err)
{
	struct isc_experiment e = {0};
	struct isc_cluster cl = {0};
	struct isc_ledger_row row = {0};
	int64_t until = 0, start, launched;
	int rc, found = 0;

	if (charged_micros)
		*charged_micros = 0;
	if ((rc = check_charge(c, err)))
		return rc;
	if ((rc = isc_store_begin(s, err)))
		return rc;
	if ((rc = isc_store_experiment_get(s, c->experiment_id, &e, err)))
		goto out;
	if (c->cluster_id) {
		if ((rc = isc_store_cluster_get(s, c->cluster_id, &cl, err)))
			goto out;
		if (billing_of_account(cl.account) != c->billing) {
			rc = isc_err_set(
			    err, ISC_EINVALID, "cluster %s is billed to %s, but the charge says %s",
			    c->cluster_id, billing_name(billing_of_account(cl.account)),
			    billing_name(c->billing));
			goto out;
		}
	}
	if ((rc = isc_store_ledger_node_charged_until(s, c->node_instance_id, &until, &found, err)))
		goto out;
	start = found && until > c->period_start_ms ? until : c->period_start_ms;
	if (start >= c->period_end_ms)
		goto out; /* already charged: a retry after a crash, or an overlapping tick */
	launched = c->launched_ms > 0 && c->launched_ms <= start ? c->launched_ms : start;
	row.org_id = e.org_id;
	row.project_id = e.project_id;
	row.experiment_id = c->experiment_id;
	row.cluster_id = c->cluster_id;
	row.node_instance_id = c->node_instance_id;
	row.kind = "charge";
	row.billing = billing_name(c->billing);
	/* The minimum counts from a launch the cloud reported, never from a period's start. */
	row.amount_micros = isc_credits_interval_cost_micros(
	    c->price_micros, launched, start, c->period_end_ms,
	    c->launched_ms > 0 && launched == c->launched_ms ? c->minimum_ms : 0);
	if (row.amount_micros < 0) {
		rc = isc_err_set(err, ISC_EINVALID, "charge for node %s is implausibly large",
		                 c->node_instance_id);
		goto out;
	}
	if (c->billing == ISC_BILLING_CREDITS) {
		/* The charge consumes the hold in its own row: what is left of it, at most
		 * the charge (a charge beyond its hold is the uncovered part the overspend
		 * bound counts, docs/credits.md). */
		int64_t held = 0;
		if ((rc = isc_store_ledger_experiment_held(s, c->experiment_id, &held, err)))
			goto out;
		row.consumed_micros = held <= 0                  ? 0
		                      : held < row.amount_micros ? held
		                                                 : row.amount_micros;
	}
	row.has_price = 1;
	row.price_micros = c->price_micros;
	row.provider = c->provider;
	row.shape_id = c->shape_id;
	row.has_period = 1;
	row.period_start_ms = start;
	row.period_end_ms = c->period_end_ms;
	if ((rc = isc_store_ledger_append(s, &row, err)))
		goto out;
	if ((rc = isc_store_ledger_node_mark(s, c->node_instance_id, c->period_end_ms, err)))
		goto out;
	if (charged_micros)
		*charged_micros = row.amount_micros;
out:
	if (!rc)
		rc = isc_store_commit(s, err);
	if (rc) {
		isc_store_rollback(s);
		if (charged_micros)
			*charged_micros = 0;
	}
	isc_experiment_cleanup(&e);
	isc_cluster_cleanup(&cl);
	return rc;
}

int isc_credits_charge_node(struct isc_store *s, const struct isc_charge *c, struct isc_err *err)
{
	return isc_credits_charge_node_report(s, c, NULL, err);
}

int isc_credits_experiment_cost(struct isc_store *s, const char *experiment_id, int64_t *micros,
                                struct isc_err *err)
{
	if (!experiment_id || !*experiment_id)
		return isc_err_set(err, ISC_EINVALID, "which experiment?");
	int64_t charged = 0, accrued = 0;
	int rc = isc_store_ledger_experiment_cost(s, experiment_id, &charged, err);
	if (!rc)
		rc = isc_store_ledger_experiment_accrued(s, experiment_id, isc_store_now_ms(),
		                                         &accrued, err);
	if (!rc)
		*micros = charged + accrued;
	return rc;
}
