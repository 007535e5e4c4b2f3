/*
 * Metering by intervals (issue 49). The broker's own meter (broker_meter) against
 * the store, on SQLite and, with ISC_TEST_PG_DIR, on PostgreSQL, through an hour
 * and more of a running 2-node burst at the default 2 s tick, with the store's
 * clock pinned tick by tick (isc_store_clock_pin):
 * - the ledger writes at most 61 rows per running node-hour: a charge per node per
 *   charge interval (one row each, consuming the hold in it) and a renewal of the
 *   experiment's hold only when it falls below hold_renew_below of the window;
 * - a node's charges add up to its interval's cost to the micro-dollar, whatever
 *   their number, with the cloud's minimum applied at close; the cost shown while
 *   it runs is the charges plus the open intervals' accrued cost;
 * - a burst whose organisation (or project budget) runs out is stopped and never
 *   spends beyond its credits or budget;
 * - migration 24 changes no total of a ledger written on the schema before it.
 * Test builds check the invariants of holds after every meter (broker/meter.c).
 */
#include "broker/broker_int.h"
#include "common/buf.h"
#include "common/clock.h"
#include "credits/credits.h"
#include "store/store_clusters.h"
#include "store/store_experiments.h"
#include "store/store_int.h"
#include "store/store_ledger.h"
#include "tests/unit/store_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef ISC_TEST_HOOKS /* the store clock pin: the sanitizer build, which make check runs */

#define PRICE  INT64_C(32770001) /* micros per node-hour: no tick or minute divides it */
#define NNODES 2
#define TICK   2000
#define HOUR   INT64_C(3600000)
#define WINDOW ((PRICE * NNODES)) /* one hour at the cluster's rate (the default window) */

struct fixture {
	struct store_fixture tmp;
	struct isc_broker *b;
	int64_t org_id;
	char *project_id;
	int64_t t0;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct isc_err err;
	char *path;
	FILE *fp;

	assert_non_null(f);
	store_fixture_init(&f->tmp, "meter");
	assert_int_not_equal(asprintf(&path, "%s/config.toml", f->tmp.home), -1);
	assert_non_null(fp = fopen(path, "w"));
	/* The defaults under test: charge_interval_ms 60000, hold_renew_below 0.5, a window
	 * of an hour. */
	fprintf(fp, "broker_id = \"meter-test\"\n");
	fclose(fp);
	free(path);
	if (isc_broker_new(f->tmp.s, &f->b, &err))
		fail_msg("isc_broker_new: %s", err.msg);
	assert_int_equal(isc_store_org_add(f->tmp.s, "demo", &f->org_id, &err), 0);
	assert_int_equal(isc_store_project_add(f->tmp.s, "demo", "vision", &f->project_id, &err),
	                 0);
	/* A whole second, far from any charge boundary of the launch below. */
	f->t0 = isc_wall_ms() / 1000 * 1000;
	isc_store_clock_pin(f->t0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	isc_store_clock_pin(0);
	isc_broker_free(f->b);
	store_fixture_cleanup(&f->tmp);
	free(f->project_id);
	free(f);
	return 0;
}

static void at(int64_t ms)
{
	isc_store_clock_pin(ms);
}

static void meter(struct fixture *f)
{
	struct isc_err err;
	assert_int_equal(broker_meter(f->b, &err), 0);
}

/* A running burst: experiment exp_m, cluster cl_m of NNODES nodes launched at `launched`,
 * holding one window as the broker holds it before a launch. */
static void burst(struct fixture *f, int64_t launched)
{
	struct isc_experiment e = {0};
	struct isc_cluster c = {0};
	struct isc_err err;
	enum isc_credits_limit limit;

	e.id = "exp_m";
	e.project_id = f->project_id;
	e.org_id = f->org_id;
	e.name = "meter";
	e.compute_mode = "burst";
	e.gpus = NNODES;
	e.spec_json = "{}";
	e.status = "running";
	assert_int_equal(isc_store_experiment_add(f->tmp.s, &e, &err), 0);
	c.id = "cl_m";
	c.experiment_id = "exp_m";
	c.shape_id = "aws-us-east-1-g4dn.xlarge-ondemand";
	c.provider = "aws";
	c.account = "default";
	c.region = "us-east-1";
	c.nnodes = NNODES;
	c.nproc = 1;
	c.cycle = 1;
	c.price_micros = PRICE;
	assert_int_equal(isc_store_cluster_create(f->tmp.s, &c, "isc-cl_m", "", &err), 0);
	if (isc_credits_renew_limit(f->tmp.s, "exp_m", "cl_m", WINDOW, &limit, &err))
		fail_msg("first hold: %s", err.msg);
	assert_int_equal(isc_store_cluster_set_state(f->tmp.s, "cl_m", "running", &err), 0);
	for (int r = 0; r < NNODES; r++) {
		struct isc_node nd = {0};
		char id[16];
		snprintf(id, sizeof(id), "i-m%d", r);
		nd.cluster_id = "cl_m";
		nd.rank = r;
		nd.instance_id = id;
		nd.state = "running";
		nd.private_ip = "10.0.0.1";
		nd.public_ip = "";
		nd.zone = "us-east-1a";
		nd.price_micros = PRICE;
		nd.launched_at_ms = launched;
		if (isc_store_node_add(f->tmp.s, &nd, &err))
			fail_msg("node %s: %s", id, err.msg);
	}
}

static void terminate(struct fixture *f, const char *id, int64_t when)
{
	struct isc_err err;
	assert_int_equal(
	    isc_store_node_observe(f->tmp.s, id, "terminated", "10.0.0.1", "", 0, 0, when, &err),
	    0);
}

/* One integer of a query with one text parameter. */
static int64_t scan(struct fixture *f, const char *sql, const char *arg)
{
	struct isc_db_stmt *st;
	struct isc_err err;
	int64_t v;
	assert_int_equal(isc_store_prepare(f->tmp.s, sql, &st, &err), 0);
	if (arg)
		isc_db_bind_text(st, 1, arg, -1, ISC_DB_STATIC);
	assert_int_equal(isc_db_step(st), ISC_DB_ROW);
	v = isc_db_column_int64(st, 0);
	isc_db_finalize(st);
	return v;
}

static int64_t rows_of(struct fixture *f, const char *kind)
{
	return scan(f, "SELECT COUNT(*) FROM ledger WHERE experiment_id = 'exp_m' AND kind = ?",
	            kind);
}

static int64_t node_charged(struct fixture *f, const char *id)
{
	return scan(f,
	            "SELECT COALESCE(SUM(amount_micros), 0) FROM ledger WHERE kind = 'charge' "
	            "AND node_instance_id = ?",
	            id);
}

static int64_t held(struct fixture *f)
{
	struct isc_err err;
	int64_t h = 0;
	assert_int_equal(isc_store_ledger_experiment_held(f->tmp.s, "exp_m", &h, &err), 0);
	return h;
}

static int64_t cost_shown(struct fixture *f)
{
	struct isc_err err;
	int64_t c = 0;
	assert_int_equal(isc_credits_experiment_cost(f->tmp.s, "exp_m", &c, &err), 0);
	return c;
}

/* The listing's cost (GET /v1/experiments, isc experiments) of exp_m. */
static int page_cost(const struct isc_experiment_view *v, void *ctx)
{
	if (strcmp(v->id, "exp_m") == 0)
		*(int64_t *)ctx = v->cost_micros;
	return 0;
}

static int64_t listed_cost(struct fixture *f)
{
	struct isc_err err;
	int64_t c = -1;
	assert_int_equal(
	    isc_store_experiment_page(f->tmp.s, 1, 0, NULL, NULL, 0, page_cost, &c, &err), 0);
	return c;
}

/*
 * The rows of an hour and more, the renewals, and exactness at close. Before issue 49
 * the same hour wrote 2N + C = 5 rows a tick: 4,500 per node-hour.
 */
static void test_rows_per_node_hour(void **state)
{
	struct fixture *f = *state;
	struct isc_err err;
	const int64_t launched = f->t0 + 1234, end = f->t0 + 2 * HOUR;
	int64_t rows_hour, charges, renews, t, mid_cost = -1, mid_at = 0;

	assert_int_equal(isc_credits_grant(f->tmp.s, "demo", 1000 * WINDOW, "test", &err), 0);
	burst(f, launched);
	for (t = f->t0 + TICK; t <= end; t += TICK) {
		at(t);
		meter(f);
		/* Live: charges + open intervals x price, exactly the cost from the launch. */
		if (t == f->t0 + HOUR / 2 + 7 * TICK) {
			mid_at = t;
			mid_cost = cost_shown(f);
			assert_int_equal(mid_cost,
			                 NNODES * isc_credits_cost_micros(PRICE, t - launched));
			assert_int_equal(listed_cost(f), mid_cost);
		}
		/* A renewal only below the threshold: the hold never falls to it unrenewed. */
		assert_true(held(f) >= WINDOW / 2 - NNODES * isc_credits_cost_micros(PRICE, 62000));
		if (t == f->t0 + HOUR) {
			/* All but the first hold, written before the hour began. */
			rows_hour = scan(f, "SELECT COUNT(*) FROM ledger WHERE experiment_id = ?",
			                 "exp_m") -
			            1;
			print_message("ledger rows in the first hour of a running %d-node burst at "
			              "a %d ms tick: %lld (%.1f per node-hour)\n",
			              NNODES, TICK, (long long)rows_hour,
			              (double)rows_hour * HOUR / (NNODES * (t - launched)));
			assert_true(rows_hour * HOUR <= 61 * NNODES * (t - launched));
		}
	}
	assert_true(mid_at > 0 && mid_cost > 0);
	/* The cloud confirms both terminations; the meter closes the intervals. */
	terminate(f, "i-m0", end + 500);
	terminate(f, "i-m1", end + 700);
	at(end + TICK);
	assert_int_equal(cost_shown(f), isc_credits_cost_micros(PRICE, end + 500 - launched) +
	                                    isc_credits_cost_micros(PRICE, end + 700 - launched));
	meter(f);
	charges = rows_of(f, "charge");
	renews = scan(f,
	              "SELECT COUNT(*) FROM ledger WHERE experiment_id = 'exp_m' AND kind = "
	              "'reserve' AND note = ?",
	              "renew");
	print_message(
	    "%lld charges and %lld renewals for %d nodes over %.3f h; %lld rows in "
	    "all\n",
	    (long long)charges, (long long)renews, NNODES, (double)(end + 600 - launched) / HOUR,
	    (long long)scan(f, "SELECT COUNT(*) FROM ledger WHERE experiment_id = ?", "exp_m"));
	/* One row a minute per node and one at close; no release beside any charge. */
	assert_true(charges <= NNODES * (2 * 60 + 1));
	assert_int_equal(rows_of(f, "release"), 0);
	/* Renewed when half the window was consumed: about every 30 minutes, and each
	 * topped the hold up from below the threshold (more than half a window). */
	assert_true(renews >= 3 && renews <= 4);
	assert_int_equal(scan(f,
	                      "SELECT COUNT(*) FROM ledger WHERE experiment_id = 'exp_m' AND "
	                      "kind = 'reserve' AND note = 'renew' AND amount_micros * 2 <= "
	                      "CAST(? AS BIGINT)",
	                      "65540002"),
	                 0);
	/* Exact to the micro-dollar at close: each node's charges are its interval's cost,
	 * rounded once (per-charge rounding would have added up to one micro a charge). */
	assert_int_equal(node_charged(f, "i-m0"),
	                 isc_credits_cost_micros(PRICE, end + 500 - launched));
	assert_int_equal(node_charged(f, "i-m1"),
	                 isc_credits_cost_micros(PRICE, end + 700 - launched));
	assert_int_equal(cost_shown(f), node_charged(f, "i-m0") + node_charged(f, "i-m1"));
	assert_int_equal(listed_cost(f), cost_shown(f));
	/* What the charges consumed is in their rows, and the hold is what is left. */
	assert_int_equal(held(f), scan(f,
	                               "SELECT SUM(CASE kind WHEN 'reserve' THEN amount_micros "
	                               "ELSE -consumed_micros END) FROM ledger WHERE "
	                               "experiment_id = ? AND kind IN ('reserve', 'charge')",
	                               "exp_m"));
}

/* A node the cloud terminated 20 s after its launch is billed the provider's minute. */
static void test_minimum_at_close(void **state)
{
	struct fixture *f = *state;
	struct isc_err err;
	const int64_t launched = f->t0 + 1000;

	assert_int_equal(isc_credits_grant(f->tmp.s, "demo", 10 * WINDOW, "test", &err), 0);
	burst(f, launched);
	at(f->t0 + 10000);
	meter(f);
	assert_int_equal(rows_of(f, "charge"), 0); /* not due: under a charge interval */
	terminate(f, "i-m0", launched + 20000);
	at(f->t0 + 22000);
	meter(f);
	assert_int_equal(rows_of(f, "charge"), 1);
	assert_int_equal(node_charged(f, "i-m0"), isc_credits_cost_micros(PRICE, 60000));
	assert_int_equal(scan(f,
	                      "SELECT period_end_ms - period_start_ms FROM ledger WHERE "
	                      "node_instance_id = ?",
	                      "i-m0"),
	                 60000); /* the period billed: the launch to the minimum */
	assert_int_equal(cost_shown(f),
	                 isc_credits_cost_micros(PRICE, 60000) +
	                     isc_credits_cost_micros(PRICE, f->t0 + 22000 - launched));
	/* The other node: the teardown's release charges it to now, before its termination
	 * is observed (at an earlier time); the closing charge still bills the minimum. */
	broker_credits_release(f->b, f->tmp.s, "exp_m");
	assert_int_equal(node_charged(f, "i-m1"), isc_credits_cost_micros(PRICE, 21000));
	terminate(f, "i-m1", launched + 20500);
	at(f->t0 + 24000);
	meter(f);
	assert_int_equal(node_charged(f, "i-m1"), isc_credits_cost_micros(PRICE, 60000));
	assert_int_equal(cost_shown(f), 2 * isc_credits_cost_micros(PRICE, 60000));
	/* OCI bare metal: an hour per start; everything else a minute. */
	assert_int_equal(isc_credits_minimum_ms("oci", "oci-us-ashburn-1-BM.GPU4.8-ondemand"),
	                 HOUR);
	assert_int_equal(isc_credits_minimum_ms("oci", "oci-us-ashburn-1-VM.GPU.A10.1-ondemand"),
	                 60000);
	assert_int_equal(isc_credits_minimum_ms("gcp", "gcp-us-central1-a2-highgpu-1g-spot"),
	                 60000);
	assert_int_equal(isc_credits_interval_cost_micros(PRICE, 0, 30000, 90000, 60000),
	                 isc_credits_cost_micros(PRICE, 90000) -
	                     isc_credits_cost_micros(PRICE, 30000));
	assert_int_equal(isc_credits_interval_cost_micros(PRICE, 100, 50, 90000, 0), -1);
}

/*
 * The overspend rule at the coarser grain: a burst whose organisation (limit 0) or
 * project budget (limit 1) runs out is stopped when its hold cannot be re-authorised,
 * and its teardown's last charges stay within what covered them: never a spend
 * beyond credits or budget.
 */
static void run_out(struct fixture *f, int budget)
{
	struct isc_experiment e = {0};
	struct isc_err err;
	const int64_t launched = f->t0 + 500, limit_micros = WINDOW + WINDOW / 4;
	int64_t t, stopped_at = 0, bal = 0, res = 0;
	struct isc_project_money pm;

	assert_int_equal(
	    isc_credits_grant(f->tmp.s, "demo", budget ? 100 * WINDOW : limit_micros, "test", &err),
	    0);
	if (budget)
		assert_int_equal(
		    isc_project_set_budget(f->tmp.s, "demo", "vision", limit_micros, &err), 0);
	burst(f, launched);
	for (t = f->t0 + TICK; t <= f->t0 + 3 * HOUR && !stopped_at; t += TICK) {
		at(t);
		meter(f);
		assert_int_equal(isc_store_experiment_get(f->tmp.s, "exp_m", &e, &err), 0);
		if (strcmp(e.status, "stopping") == 0) {
			stopped_at = t;
			assert_non_null(strstr(e.status_reason, "out of credits"));
		}
		isc_experiment_cleanup(&e);
	}
	assert_true(stopped_at > 0);
	/* The teardown, a tick later: it asks the cloud to terminate and releases the hold,
	 * first charging every node to now (up to a charge interval was unbilled): the hold
	 * covers all of it, no charge went beyond it. */
	t = stopped_at + TICK;
	at(t);
	broker_credits_release(f->b, f->tmp.s, "exp_m");
	assert_int_equal(held(f), 0);
	assert_int_equal(scan(f,
	                      "SELECT COALESCE(SUM(amount_micros - consumed_micros), 0) FROM "
	                      "ledger WHERE kind = 'charge' AND experiment_id = ?",
	                      "exp_m"),
	                 0);
	assert_int_equal(node_charged(f, "i-m0"), isc_credits_cost_micros(PRICE, t - launched));
	assert_int_equal(
	    isc_store_experiment_transition(f->tmp.s, "exp_m", "stopping", "stopped", "", &err), 0);
	/* The cloud confirms the terminations a minute later: the meter closes the intervals
	 * (that minute beyond the released hold, the bound's teardown time). */
	for (t += TICK; t <= stopped_at + 90000; t += TICK) {
		at(t);
		if (t == stopped_at + 60000) {
			terminate(f, "i-m0", t);
			terminate(f, "i-m1", t);
		}
		meter(f);
	}
	at(t + TICK);
	meter(f);
	assert_int_equal(isc_store_ledger_org_sums(f->tmp.s, f->org_id, &bal, &res, &err), 0);
	assert_int_equal(isc_project_money_get(f->tmp.s, f->project_id, &pm, &err), 0);
	print_message("%s: stopped %.1f min after the launch; spent %lld of %lld micros\n",
	              budget ? "budget" : "credits", (double)(stopped_at - launched) / 60000,
	              (long long)pm.spent_micros, (long long)limit_micros);
	assert_int_equal(res, 0);
	assert_true(pm.spent_micros > WINDOW / 2);
	assert_true(pm.spent_micros <= limit_micros);
	assert_true(bal >= 0);
	/* Exact to its end as well. */
	assert_int_equal(pm.spent_micros,
	                 2 * isc_credits_cost_micros(PRICE, stopped_at + 60000 - launched));
}

static void test_out_of_credits(void **state)
{
	run_out(*state, 0);
}

static void test_out_of_budget(void **state)
{
	run_out(*state, 1);
}

/* The holds check's rule for renewals: a live hold below its threshold is a missed renewal. */
static void test_holds_check_threshold(void **state)
{
	struct fixture *f = *state;
	struct isc_err err;
	struct isc_charge c = {0};
	struct isc_buf report;
	size_t violations = 99;

	assert_int_equal(isc_credits_grant(f->tmp.s, "demo", 10 * WINDOW, "test", &err), 0);
	burst(f, f->t0);
	/* 40 minutes of a node charged at once: the hold falls below half the window. */
	c.experiment_id = "exp_m";
	c.cluster_id = "cl_m";
	c.node_instance_id = "i-m0";
	c.price_micros = PRICE * NNODES;
	c.provider = "aws";
	c.period_start_ms = f->t0;
	c.period_end_ms = f->t0 + 2400000;
	c.launched_ms = f->t0;
	c.billing = ISC_BILLING_CREDITS;
	assert_int_equal(isc_credits_charge_node(f->tmp.s, &c, &err), 0);
	assert_true(held(f) < WINDOW / 2);
	isc_buf_init(&report, 4096);
	assert_int_equal(isc_credits_holds_check_below(f->tmp.s, ISC_HOLDS_CHECK_ALL, HOUR,
	                                               HOUR / 2, NULL, NULL, &report, &violations,
	                                               &err),
	                 0);
	assert_int_equal(violations, 1);
	assert_non_null(strstr(isc_buf_cstr(&report), "a renewal was missed"));
	/* Without the threshold (the check before issue 49) nothing is wrong. */
	assert_int_equal(isc_credits_holds_check(f->tmp.s, ISC_HOLDS_CHECK_ALL, HOUR, NULL, NULL,
	                                         NULL, &violations, &err),
	                 0);
	assert_int_equal(violations, 0);
	/* The meter renews it (and its own check, on in test builds, passes). */
	at(f->t0 + 2400000);
	meter(f);
	assert_int_equal(held(f), WINDOW);
	assert_int_equal(isc_credits_holds_check_below(f->tmp.s, ISC_HOLDS_CHECK_ALL, HOUR,
	                                               HOUR / 2, NULL, NULL, NULL, &violations,
	                                               &err),
	                 0);
	assert_int_equal(violations, 0);
	isc_buf_cleanup(&report);
}

/* Every row of ledger_totals, as text, in order. */
static char *totals_text(struct isc_store *s)
{
	struct isc_db_stmt *st;
	struct isc_err err;
	char *out = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&out, &len);

	assert_non_null(m);
	assert_int_equal(isc_store_prepare(s,
	                                   "SELECT scope, key, balance_micros, reserved_micros, "
	                                   "spent_micros, charged_micros FROM ledger_totals "
	                                   "ORDER BY scope, key",
	                                   &st, &err),
	                 0);
	while (isc_db_step(st) == ISC_DB_ROW)
		fprintf(
		    m, "%s %s %lld %lld %lld %lld\n", (const char *)isc_db_column_text(st, 0),
		    (const char *)isc_db_column_text(st, 1), (long long)isc_db_column_int64(st, 2),
		    (long long)isc_db_column_int64(st, 3), (long long)isc_db_column_int64(st, 4),
		    (long long)isc_db_column_int64(st, 5));
	isc_db_finalize(st);
	fclose(m);
	return out;
}

/* The totals summed from the ledger's rows (the current rule), as totals_text says them. */
static char *sums_text(struct isc_store *s)
{
	char *sql;
	struct isc_db_stmt *st;
	struct isc_err err;
	char *out = NULL;
	size_t len = 0;
	int rc;
	FILE *m = open_memstream(&out, &len);

	assert_non_null(m);
	assert_int_not_equal(
	    asprintf(&sql,
	             "SELECT 'org', CAST(org_id AS TEXT), %s FROM ledger GROUP BY "
	             "org_id UNION ALL SELECT 'project', project_id, %s FROM ledger WHERE "
	             "project_id IS NOT NULL GROUP BY project_id UNION ALL SELECT 'experiment', "
	             "experiment_id, %s FROM ledger WHERE experiment_id IS NOT NULL GROUP BY "
	             "experiment_id ORDER BY 1, 2",
	             ISC_STORE_LEDGER_TOTALS_SUMS, ISC_STORE_LEDGER_TOTALS_SUMS,
	             ISC_STORE_LEDGER_TOTALS_SUMS),
	    -1);
	assert_int_equal(isc_store_prepare(s, sql, &st, &err), 0);
	free(sql);
	while ((rc = isc_db_step(st)) == ISC_DB_ROW)
		fprintf(
		    m, "%s %s %lld %lld %lld %lld\n", (const char *)isc_db_column_text(st, 0),
		    (const char *)isc_db_column_text(st, 1), (long long)isc_db_column_int64(st, 2),
		    (long long)isc_db_column_int64(st, 3), (long long)isc_db_column_int64(st, 4),
		    (long long)isc_db_column_int64(st, 5));
	if (rc != ISC_DB_DONE)
		fail_msg("summing the ledger: %s", isc_db_errmsg(isc_store_db(s)));
	isc_db_finalize(st);
	fclose(m);
	return out;
}

/*
 * Migration 24 on a ledger written before it: grants, holds, renewals, charges with
 * their "consumed by a charge" releases (credits and BYO), refunds, adjustments and
 * releases of two organisations; afterwards every organisation's, project's and
 * experiment's totals are what they were, and what the rows sum to.
 */
static void test_migration_keeps_totals(void **state)
{
	struct store_fixture old = {0};
	struct isc_experiment e = {0};
	struct isc_err err;
	struct isc_charge c = {0};
	int64_t org1, org2, h0, h1;
	char *p1 = NULL, *p2 = NULL, *before, *after, *sums, sql[512];
	const size_t v24 = 24;
	(void)state;

	assert_true(isc_store_migration_count() >= v24);
	store_fixture_init_at(&old, "meter-migrate", v24 - 1);
	assert_int_equal(isc_store_org_add(old.s, "one", &org1, &err), 0);
	assert_int_equal(isc_store_org_add(old.s, "two", &org2, &err), 0);
	assert_int_equal(isc_store_project_add(old.s, "one", "p", &p1, &err), 0);
	assert_int_equal(isc_store_project_add(old.s, "two", "q", &p2, &err), 0);
	e.compute_mode = "burst";
	e.gpus = 1;
	e.spec_json = "{}";
	e.status = "running";
	e.name = "x";
	e.id = "exp_1";
	e.project_id = p1;
	e.org_id = org1;
	assert_int_equal(isc_store_experiment_add(old.s, &e, &err), 0);
	e.id = "exp_2";
	e.project_id = p2;
	e.org_id = org2;
	assert_int_equal(isc_store_experiment_add(old.s, &e, &err), 0);
	/* The rows as the code before migration 24 wrote them (the schema has no
	 * consumed_micros yet). */
	{
		static const char *const rows[] = {
		    "%lld, NULL, NULL, 'grant', 100000000, 'credits', ''",
		    "%lld, '%s', 'exp_1', 'reserve', 6000000, 'credits', ''",
		    "%lld, '%s', 'exp_1', 'charge', 1000001, 'credits', ''",
		    "%lld, '%s', 'exp_1', 'release', 1000001, 'credits', 'consumed by a charge'",
		    "%lld, '%s', 'exp_1', 'reserve', 1000001, 'credits', 'renew'",
		    "%lld, '%s', 'exp_1', 'charge', 333, 'byo', ''",
		    "%lld, NULL, NULL, 'refund', 250000, 'credits', 'sorry'",
		    "%lld, NULL, NULL, 'adjustment', -70000, 'credits', 'fix'",
		};
		for (int o = 0; o < 2; o++)
			for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
				char values[256];
				int64_t org = o ? org2 : org1;
				const char *proj = o ? p2 : p1;
				snprintf(values, sizeof(values), rows[i], (long long)org, proj);
				/* The second organisation's rows are its own experiment's. */
				if (o)
					for (char *x = strstr(values, "exp_1"); x;
					     x = strstr(x, "exp_1"))
						x[4] = '2';
				snprintf(
				    sql, sizeof(sql),
				    "INSERT INTO ledger (at_ms, org_id, project_id, experiment_id, "
				    "kind, amount_micros, billing, note, node_instance_id, "
				    "period_start_ms, period_end_ms) VALUES (1000, %s, %s, %lld, "
				    "%lld)",
				    values,
				    strstr(values, "'charge'") ? (o ? "'i-2'" : "'i-1'") : "NULL",
				    strstr(values, "'charge'") ? (long long)(i * 1000) : 0LL,
				    strstr(values, "'charge'") ? (long long)(i * 1000 + 1000)
				                               : 0LL);
				if (isc_db_exec(isc_store_db(old.s), sql) != ISC_DB_OK)
					fail_msg("%s: %s", sql, isc_db_errmsg(isc_store_db(old.s)));
			}
		/* The second organisation's experiment ends: its hold is released. */
		snprintf(sql, sizeof(sql),
		         "INSERT INTO ledger (at_ms, org_id, project_id, experiment_id, kind, "
		         "amount_micros, billing, note) VALUES (2000, %lld, '%s', 'exp_2', "
		         "'release', 6000000, 'credits', 'released')",
		         (long long)org2, p2);
		assert_int_equal(isc_db_exec(isc_store_db(old.s), sql), ISC_DB_OK);
	}
	before = totals_text(old.s);
	assert_int_equal(isc_store_ledger_experiment_held(old.s, "exp_1", &h0, &err), 0);
	assert_int_equal(h0, 6000000);
	/* Open it again: migration 24 runs on the ledger as it is. (A second open while the
	 * first is open: on PostgreSQL a store freed first would be reused as it is.) */
	{
		struct isc_store *again = NULL;
		if (isc_store_open(old.home, 0, &again, &err))
			fail_msg("migrating: %s", err.msg);
		isc_store_free(old.s);
		old.s = again;
	}
	after = totals_text(old.s);
	sums = sums_text(old.s);
	assert_string_equal(before, after);
	assert_string_equal(after, sums);
	/* A charge after it: one row, which consumes the hold in itself. */
	c.experiment_id = "exp_1";
	c.node_instance_id = "i-1";
	c.price_micros = PRICE;
	c.period_start_ms = 100000;
	c.period_end_ms = 160000;
	c.launched_ms = 0;
	c.billing = ISC_BILLING_CREDITS;
	assert_int_equal(isc_credits_charge_node(old.s, &c, &err), 0);
	assert_int_equal(isc_store_ledger_experiment_held(old.s, "exp_1", &h1, &err), 0);
	assert_int_equal(h1, h0 - isc_credits_cost_micros(PRICE, 60000));
	free(after);
	free(sums);
	after = totals_text(old.s);
	sums = sums_text(old.s);
	assert_string_equal(after, sums);
	{
		struct store_fixture *t = &old;
		struct isc_db_stmt *st;
		assert_int_equal(isc_store_prepare(t->s,
		                                   "SELECT COUNT(*) FROM ledger WHERE at_ms > 2000",
		                                   &st, &err),
		                 0);
		assert_int_equal(isc_db_step(st), ISC_DB_ROW);
		assert_int_equal(isc_db_column_int64(st, 0), 1); /* no release beside it */
		isc_db_finalize(st);
	}
	free(before);
	free(after);
	free(sums);
	free(p1);
	free(p2);
	store_fixture_cleanup(&old);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_rows_per_node_hour, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_minimum_at_close, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_out_of_credits, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_out_of_budget, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_holds_check_threshold, setup, teardown),
	    cmocka_unit_test(test_migration_keeps_totals),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
#else
int main(void)
{
	/* The meter is driven through hours by pinning the store's clock, which only the test
	 * build (SAN=1) has; make check runs that build. */
	fprintf(stderr, "test_meter: needs the test build (make SAN=1): nothing ran\n");
	return 1;
}
#endif
