/*
 * The risk_facts table (migration 30, issue 43) on SQLite and, with ISC_TEST_PG_DIR, on
 * PostgreSQL: facts written and read back with their time, an upsert by key, a source
 * replaced whole, and this broker's interruption history from its clusters and events.
 */
#include "shapes/catalog.h"
#include "store/store.h"
#include "store/store_clusters.h"
#include "store/store_experiments.h"
#include "store/store_risk.h"
#include "store/store_shapes.h"
#include "store_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

static struct isc_risk_fact fact(const char *region, const char *itype, const char *source,
                                 int target, int64_t value, const char *detail, int64_t at)
{
	struct isc_risk_fact f = {0};
	f.provider = "aws";
	f.region = (char *)region;
	f.zone = "";
	f.instance_type = (char *)itype;
	f.market = "spot";
	f.source = (char *)source;
	f.target = target;
	f.value = value;
	f.detail = (char *)detail;
	f.fetched_ms = at;
	return f;
}

static void test_put_list(void **state)
{
	struct store_fixture t;
	struct isc_risk_fact in[3], *out;
	struct isc_err err;
	size_t n;
	(void)state;

	store_fixture_init(&t, "risk");
	int64_t v0, v1, v2;
	assert_int_equal(isc_store_risk_version(t.s, &v0, &err), 0);
	assert_int_equal(v0, 0);
	in[0] = fact("us-west-2", "p5.48xlarge", ISC_RISK_SPOT_ADVISOR, 0, 5, "<5%", 1000);
	in[1] = fact("us-east-1", "p5.48xlarge", ISC_RISK_PLACEMENT, 2, 7, "3 type(s)", 1000);
	in[2] = fact("us-east-1", "p5.48xlarge", ISC_RISK_PLACEMENT, 1, 9, "3 type(s)", 1000);
	assert_int_equal(isc_store_risk_put(t.s, NULL, in, 3, &err), 0);
	assert_int_equal(isc_store_risk_version(t.s, &v1, &err), 0);
	assert_true(v1 > 0); /* readers that keep the facts see they changed */
	/* the same key again: the new answer and its time replace the old */
	in[1].value = 2;
	in[1].fetched_ms = 2000;
	assert_int_equal(isc_store_risk_put(t.s, NULL, &in[1], 1, &err), 0);
	assert_int_equal(isc_store_risk_version(t.s, &v2, &err), 0);
	assert_true(v2 > 0 && v2 != v1);
	assert_int_equal(isc_store_risk_list(t.s, &out, &n, &err), 0);
	assert_int_equal(n, 3);
	assert_string_equal(out[0].region, "us-east-1"); /* by region, then source, target */
	assert_int_equal(out[0].target, 1);
	assert_int_equal(out[1].target, 2);
	assert_int_equal(out[1].value, 2);
	assert_int_equal(out[1].fetched_ms, 2000);
	assert_string_equal(out[2].detail, "<5%");
	isc_risk_fact_list_free(out, n);

	/* a source replaced whole: the placement scores go, the band stays */
	assert_int_equal(isc_store_risk_put(t.s, ISC_RISK_PLACEMENT, NULL, 0, &err), 0);
	assert_int_equal(isc_store_risk_list(t.s, &out, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_string_equal(out[0].source, ISC_RISK_SPOT_ADVISOR);
	isc_risk_fact_list_free(out, n);
	store_fixture_cleanup(&t);
}

static void test_history(void **state)
{
	struct store_fixture t;
	struct isc_experiment e = {0};
	struct isc_cluster c = {0};
	struct isc_shape sh = {0};
	struct isc_shapes_apply_result ar;
	struct isc_risk_fact *out;
	struct isc_err err;
	char *project_id = NULL;
	int64_t org_id, now = isc_store_now_ms();
	size_t n;
	(void)state;

	store_fixture_init(&t, "risk-history");
	sh.id = "aws-us-east-1-p5.48xlarge-spot";
	sh.display_id = "aws-us-east-1-p5.48xlarge-spot";
	sh.provider = "aws";
	sh.region = "us-east-1";
	sh.instance_type = "p5.48xlarge";
	sh.spot = 1;
	sh.gpu_type = "H100";
	sh.gpus_per_node = 8;
	sh.price_micros = 30000000;
	sh.zones = "";
	sh.price_date = "2026-01-01";
	assert_int_equal(isc_store_shapes_apply(t.s, "aws", &sh, 1, 0, &ar, &err), 0);
	assert_int_equal(isc_store_org_add(t.s, "demo", &org_id, &err), 0);
	assert_int_equal(isc_store_project_add(t.s, "demo", "vision", &project_id, &err), 0);
	e.id = "exp_risk";
	e.project_id = project_id;
	e.org_id = org_id;
	e.name = "risk";
	e.compute_mode = "burst";
	e.gpus = 16;
	e.spec_json = "{}";
	e.status = "running";
	assert_int_equal(isc_store_experiment_add(t.s, &e, &err), 0);
	free(project_id);
	c.id = "cl_risk";
	c.experiment_id = "exp_risk";
	c.shape_id = "aws-us-east-1-p5.48xlarge-spot";
	c.provider = "aws";
	c.account = "default";
	c.region = "us-east-1";
	c.nnodes = 2;
	c.nproc = 8;
	c.cycle = 1;
	c.price_micros = 30000000;
	assert_int_equal(isc_store_cluster_create(t.s, &c, "isc-cl_risk", "", &err), 0);
	assert_int_equal(isc_store_cluster_set_zone(t.s, "cl_risk", "us-east-1b", &err), 0);

	/* run, not interrupted: a clean record of 2 nodes for the hour asked about */
	assert_int_equal(
	    isc_store_risk_history(t.s, now - 86400000LL, now + 3600000, &out, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_string_equal(out[0].zone, "us-east-1b");
	assert_string_equal(out[0].market, "spot");
	assert_string_equal(out[0].source, ISC_RISK_HISTORY);
	assert_int_equal(out[0].value, 0);
	assert_true(out[0].value2 >= 7190 && out[0].value2 <= 7200);
	isc_risk_fact_list_free(out, n);

	assert_int_equal(isc_store_event_add(t.s, "exp_risk", "interrupted", "node lost", &err), 0);
	assert_int_equal(isc_store_event_add(t.s, "exp_risk", "placing", "not this", &err), 0);
	assert_int_equal(
	    isc_store_risk_history(t.s, now - 86400000LL, now + 3600000, &out, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(out[0].value, 1);
	assert_int_equal(isc_store_risk_put(t.s, ISC_RISK_HISTORY, out, n, &err), 0);
	isc_risk_fact_list_free(out, n);

	/* the catalog iscd loads sees the new record (its cache of facts follows the version) */
	{
		struct isc_catalog *cat;
		struct isc_rank_entry ent = {0};
		struct isc_rank_risk r;
		for (int round = 0; round < 2; round++) {
			assert_int_equal(isc_catalog_load(t.s, &cat, &err), 0);
			ent.shape = isc_catalog_find(cat, "aws-us-east-1-p5.48xlarge-spot");
			assert_non_null(ent.shape);
			ent.nnodes = 2;
			isc_catalog_entry_risk(cat, &ent, &r);
			assert_int_equal(r.interruptions, round == 0 ? 1 : 2);
			isc_catalog_free(cat);
			if (round == 0) {
				assert_int_equal(isc_store_event_add(t.s, "exp_risk", "interrupted",
				                                     "again", &err),
				                 0);
				assert_int_equal(isc_store_risk_history(t.s, now - 86400000LL,
				                                        now + 3600000, &out, &n,
				                                        &err),
				                 0);
				assert_int_equal(
				    isc_store_risk_put(t.s, ISC_RISK_HISTORY, out, n, &err), 0);
				isc_risk_fact_list_free(out, n);
			}
		}
	}

	/* a window that starts after the cluster closed has nothing */
	assert_int_equal(isc_store_cluster_set_state(t.s, "cl_risk", "closed", &err), 0);
	assert_int_equal(isc_store_risk_history(t.s, now + 7200000, now + 9000000, &out, &n, &err),
	                 0);
	assert_int_equal(n, 0);
	store_fixture_cleanup(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_put_list),
	    cmocka_unit_test(test_history),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
