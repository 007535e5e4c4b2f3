/*
 * The ranking modes of issue 43 (docs/shapes.md "Ranking modes"): price per unit of
 * work (mode work) and the expected cost to finish (mode expected) from the risk
 * facts; unknown throughput or risk never favoured; the priority list always first;
 * the shipped throughput table; burst_rank in a launch file.
 */
#include "launchfile/launchfile.h"
#include "shapes/catalog.h"
#include "shapes/shape.h"
#include "shapes/throughput.h"
#include "store/store_risk.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct spec {
	const char *provider, *region, *itype;
	int spot;
	const char *gpu;
	int gpus;
	int64_t price;
	const char *zones;
};

static struct isc_catalog *make_catalog(const struct spec *sp, size_t n)
{
	struct isc_shape *list = calloc(n, sizeof(*list));
	struct isc_catalog *c;
	assert_non_null(list);
	for (size_t i = 0; i < n; i++) {
		struct isc_shape *sh = &list[i];
		sh->provider = strdup(sp[i].provider);
		sh->region = strdup(sp[i].region);
		sh->instance_type = strdup(sp[i].itype);
		sh->spot = sp[i].spot;
		sh->gpu_type = strdup(sp[i].gpu);
		sh->gpus_per_node = sp[i].gpus;
		sh->price_micros = sp[i].price;
		sh->zones = strdup(sp[i].zones ? sp[i].zones : "");
		sh->price_date = strdup("2026-01-01");
		assert_int_equal(isc_shape_make_id(sh), 0);
	}
	assert_int_equal(isc_catalog_new(list, n, &c, NULL), 0);
	return c;
}

struct fspec {
	const char *provider, *region, *zone, *itype, *market, *source;
	int target;
	int64_t value, value2;
	const char *detail;
};

static void set_facts(struct isc_catalog *c, const struct fspec *fs, size_t n)
{
	struct isc_risk_fact *f = calloc(n ? n : 1, sizeof(*f));
	assert_non_null(f);
	for (size_t i = 0; i < n; i++) {
		f[i].provider = strdup(fs[i].provider);
		f[i].region = strdup(fs[i].region);
		f[i].zone = strdup(fs[i].zone);
		f[i].instance_type = strdup(fs[i].itype);
		f[i].market = strdup(fs[i].market);
		f[i].source = strdup(fs[i].source);
		f[i].target = fs[i].target;
		f[i].value = fs[i].value;
		f[i].value2 = fs[i].value2;
		f[i].detail = strdup(fs[i].detail);
		f[i].fetched_ms = 1000;
	}
	assert_int_equal(isc_catalog_set_risk(c, f, n, NULL), 0);
}

static void rank(const struct isc_catalog *c, enum isc_rank_mode mode, int gpus,
                 struct isc_ranking *r)
{
	struct isc_rank_request req = {.gpus = gpus, .mode = mode, .gpu_type = "h100,a100,a10g,l4"};
	assert_int_equal(isc_catalog_rank(c, &req, r, NULL), 0);
}

/* Two spot shapes at the same price: the one in the worse band drops under expected. */
static void test_expected_band(void **state)
{
	static const struct spec sp[] = {
	    {"aws", "us-east-1", "p5.48xlarge", 1, "H100", 8, 30000000, NULL},
	    {"aws", "us-west-2", "p5.48xlarge", 1, "H100", 8, 30000000, NULL},
	};
	/* us-east-1 (first by id) in ">20%", us-west-2 in "<5%" */
	static const struct fspec fs[] = {
	    {"aws", "us-east-1", "", "p5.48xlarge", "spot", ISC_RISK_SPOT_ADVISOR, 0, 100, 4,
	     ">20%"},
	    {"aws", "us-west-2", "", "p5.48xlarge", "spot", ISC_RISK_SPOT_ADVISOR, 0, 5, 0, "<5%"},
	};
	struct isc_catalog *c = make_catalog(sp, 2);
	struct isc_ranking r;
	struct isc_rank_risk rk;
	(void)state;

	set_facts(c, fs, 2);
	rank(c, ISC_RANK_PRICE, 16, &r);
	assert_string_equal(r.entries[0].shape->region, "us-east-1"); /* a tie: by id */
	isc_ranking_cleanup(&r);
	rank(c, ISC_RANK_WORK, 16, &r);
	assert_string_equal(r.entries[0].shape->region, "us-east-1"); /* work knows no risk */
	isc_ranking_cleanup(&r);
	rank(c, ISC_RANK_EXPECTED, 16, &r);
	assert_string_equal(r.entries[0].shape->region, "us-west-2");
	assert_true(r.entries[0].expected_cost < r.entries[1].expected_cost);
	isc_catalog_entry_risk(c, &r.entries[1], &rk);
	assert_int_equal(rk.band, 4);
	assert_int_equal(rk.band_max_pct, 100);
	assert_string_equal(rk.rate_source, ISC_RISK_SPOT_ADVISOR);
	isc_ranking_cleanup(&r);
	isc_catalog_free(c);
}

/* Same band, same price: a low placement score for the gang's size drops the shape. */
static void test_expected_score(void **state)
{
	static const struct spec sp[] = {
	    {"aws", "us-east-1", "p5.48xlarge", 1, "H100", 8, 30000000, NULL},
	    {"aws", "us-west-2", "p5.48xlarge", 1, "H100", 8, 30000000, NULL},
	};
	static const struct fspec fs[] = {
	    {"aws", "us-east-1", "", "p5.48xlarge", "spot", ISC_RISK_SPOT_ADVISOR, 0, 10, 1,
	     "5-10%"},
	    {"aws", "us-west-2", "", "p5.48xlarge", "spot", ISC_RISK_SPOT_ADVISOR, 0, 10, 1,
	     "5-10%"},
	    /* the score for 2 nodes is the one that counts; the 1-node one is not this gang */
	    {"aws", "us-east-1", "", "p5.48xlarge", "spot", ISC_RISK_PLACEMENT, 2, 2, 0, ""},
	    {"aws", "us-east-1", "", "p5.48xlarge", "spot", ISC_RISK_PLACEMENT, 1, 10, 0, ""},
	    {"aws", "us-west-2", "", "p5.48xlarge", "spot", ISC_RISK_PLACEMENT, 2, 9, 0, ""},
	};
	struct isc_catalog *c = make_catalog(sp, 2);
	struct isc_ranking r;
	struct isc_rank_risk rk;
	(void)state;

	set_facts(c, fs, 5);
	rank(c, ISC_RANK_EXPECTED, 16, &r);
	assert_string_equal(r.entries[0].shape->region, "us-west-2");
	isc_catalog_entry_risk(c, &r.entries[1], &rk);
	assert_int_equal(rk.score, 2);
	assert_int_equal(rk.score_target, 2);
	assert_true(rk.q == 0.2);
	isc_ranking_cleanup(&r);
	/* 8 GPUs: one node; the 1-node score (10) is the one now, so us-east-1 ties and wins by id
	 */
	rank(c, ISC_RANK_EXPECTED, 8, &r);
	assert_string_equal(r.entries[0].shape->region, "us-east-1");
	isc_ranking_cleanup(&r);
	isc_catalog_free(c);
}

/* An H100 node beats a cheaper but slower A100 node per unit of work. */
static void test_work_h100(void **state)
{
	static const struct spec sp[] = {
	    {"aws", "us-east-1", "p5.48xlarge", 0, "H100", 8, 55040000, NULL},  /* 6.88/GPU-h */
	    {"aws", "us-east-1", "p4d.24xlarge", 0, "A100", 8, 40000000, NULL}, /* 5.00/GPU-h */
	};
	struct isc_catalog *c = make_catalog(sp, 2);
	struct isc_ranking r;
	(void)state;

	rank(c, ISC_RANK_PRICE, 8, &r);
	assert_string_equal(r.entries[0].shape->instance_type, "p4d.24xlarge");
	isc_ranking_cleanup(&r);
	rank(c, ISC_RANK_WORK, 8, &r);
	assert_string_equal(r.entries[0].shape->instance_type, "p5.48xlarge");
	/* 55.04 / (8 x 1.72) = 4.0000 $ per A100-80GB-hour; 40 / (8 x 0.88) = 5.6818 */
	assert_true((int64_t)(r.entries[0].work_cost + 0.5) == 4000000);
	assert_true((int64_t)(r.entries[1].work_cost + 0.5) == 5681818);
	isc_ranking_cleanup(&r);
	isc_catalog_free(c);
}

/* A GPU nobody measured never wins on a guess: it ranks after every known one. */
static void test_unknown_throughput_last(void **state)
{
	static const struct spec sp[] = {
	    {"gcp", "us-central1", "g2-standard-8", 0, "L4", 1, 100000, NULL}, /* very cheap */
	    {"aws", "us-east-1", "g5.xlarge", 0, "A10G", 1, 1006000, NULL},
	};
	struct isc_catalog *c = make_catalog(sp, 2);
	struct isc_ranking r;
	(void)state;

	rank(c, ISC_RANK_WORK, 1, &r);
	assert_int_equal(r.n, 2);
	assert_string_equal(r.entries[0].shape->gpu_type, "A10G");
	assert_true(r.entries[1].work_cost < 0);
	isc_ranking_cleanup(&r);
	rank(c, ISC_RANK_EXPECTED, 1, &r);
	assert_string_equal(r.entries[0].shape->gpu_type, "A10G");
	isc_ranking_cleanup(&r);
	isc_catalog_free(c);
}

/* Unknown risk counts as the worst: a spot shape without a band loses to one with "<5%". */
static void test_unknown_risk_not_favoured(void **state)
{
	static const struct spec sp[] = {
	    {"aws", "eu-west-1", "p5.48xlarge", 1, "H100", 8, 30000000, NULL},
	    {"aws", "us-west-2", "p5.48xlarge", 1, "H100", 8, 30000000, NULL},
	};
	static const struct fspec fs[] = {
	    {"aws", "us-west-2", "", "p5.48xlarge", "spot", ISC_RISK_SPOT_ADVISOR, 0, 5, 0, "<5%"},
	    {"aws", "us-west-2", "", "p5.48xlarge", "spot", ISC_RISK_PLACEMENT, 1, 5, 0, ""},
	};
	struct isc_catalog *c = make_catalog(sp, 2);
	struct isc_ranking r;
	struct isc_rank_risk rk;
	(void)state;

	set_facts(c, fs, 2);
	rank(c, ISC_RANK_EXPECTED, 8, &r);
	assert_string_equal(r.entries[0].shape->region, "us-west-2");
	isc_catalog_entry_risk(c, &r.entries[1], &rk);
	assert_int_equal(rk.band, -1);
	assert_string_equal(rk.rate_source, "unknown: worst band");
	assert_string_equal(rk.q_source, "unknown");
	isc_ranking_cleanup(&r);
	isc_catalog_free(c);
}

/* OCI's capacity report and our own history move shapes under expected. */
static void test_expected_oci_and_history(void **state)
{
	static const struct spec sp[] = {
	    {"oci", "us-ashburn-1", "BM.GPU.H100.8", 0, "H100", 8, 80000000, "AD-1,AD-2"},
	    {"oci", "us-phoenix-1", "BM.GPU.H100.8", 0, "H100", 8, 80000000, "AD-1"},
	};
	static const struct fspec fs[] = {
	    {"oci", "us-ashburn-1", "AD-1", "BM.GPU.H100.8", "", ISC_RISK_OCI_CAPACITY, 2, 0, 0,
	     "OUT_OF_HOST_CAPACITY"},
	    {"oci", "us-phoenix-1", "AD-1", "BM.GPU.H100.8", "", ISC_RISK_OCI_CAPACITY, 2, 3, 0,
	     "AVAILABLE"},
	};
	static const struct fspec hist[] = {
	    {"oci", "us-ashburn-1", "AD-1", "BM.GPU.H100.8", "", ISC_RISK_OCI_CAPACITY, 2, 4, 0,
	     "AVAILABLE"},
	    {"oci", "us-phoenix-1", "AD-1", "BM.GPU.H100.8", "", ISC_RISK_OCI_CAPACITY, 2, 3, 0,
	     "AVAILABLE"},
	    /* phoenix lost 3 nodes in 100 node-hours */
	    {"oci", "us-phoenix-1", "AD-1", "BM.GPU.H100.8", "ondemand", ISC_RISK_HISTORY, 0, 3,
	     360000, ""},
	};
	struct isc_catalog *c = make_catalog(sp, 2);
	struct isc_ranking r;
	struct isc_rank_risk rk;
	(void)state;

	set_facts(c, fs, 2);
	rank(c, ISC_RANK_EXPECTED, 16, &r);
	assert_string_equal(r.entries[0].shape->region, "us-phoenix-1");
	isc_catalog_entry_risk(c, &r.entries[0], &rk);
	assert_string_equal(rk.capacity_status, "AVAILABLE");
	assert_true(rk.q == 1.0);
	assert_true(rk.factor == 1.0);
	isc_ranking_cleanup(&r);

	set_facts(c, hist, 3);
	rank(c, ISC_RANK_EXPECTED, 16, &r);
	assert_string_equal(r.entries[0].shape->region, "us-ashburn-1");
	isc_catalog_entry_risk(c, &r.entries[1], &rk);
	assert_int_equal(rk.interruptions, 3);
	assert_string_equal(rk.rate_source, ISC_RISK_HISTORY);
	assert_true(rk.node_rate == 0.03);
	isc_ranking_cleanup(&r);
	isc_catalog_free(c);
}

/* The priority list comes first in every mode; the mode orders only the rest. */
static void test_priority_first(void **state)
{
	static const struct spec sp[] = {
	    {"aws", "us-east-1", "p5.48xlarge", 0, "H100", 8, 55040000, NULL},
	    {"aws", "us-east-1", "p4d.24xlarge", 0, "A100", 8, 40000000, NULL},
	};
	const char *prio[] = {"aws-us-east-1-p4d.24xlarge-ondemand"};
	struct isc_catalog *c = make_catalog(sp, 2);
	struct isc_ranking r;
	(void)state;

	for (int m = ISC_RANK_PRICE; m <= ISC_RANK_EXPECTED; m++) {
		struct isc_rank_request req = {
		    .gpus = 8, .priority = prio, .n_priority = 1, .mode = (enum isc_rank_mode)m};
		assert_int_equal(isc_catalog_rank(c, &req, &r, NULL), 0);
		assert_true(r.from_priority);
		assert_int_equal(r.n, 1);
		assert_string_equal(r.entries[0].shape->instance_type, "p4d.24xlarge");
		isc_ranking_cleanup(&r);
	}
	isc_catalog_free(c);
}

static void test_mode_names_and_table(void **state)
{
	enum isc_rank_mode m;
	unsigned n;
	const struct isc_throughput *t = isc_throughput_table(&n);
	(void)state;

	assert_int_equal(isc_rank_mode_parse("expected", &m), 0);
	assert_int_equal(m, ISC_RANK_EXPECTED);
	assert_int_equal(isc_rank_mode_parse("cheapest", &m), ISC_EINVALID);
	assert_string_equal(isc_rank_mode_name(ISC_RANK_WORK), "work");
	assert_int_equal(isc_throughput_of("a100-80gb")->milli, 1000);
	assert_null(isc_throughput_of("L4")); /* nobody measured it in the sources */
	assert_null(isc_throughput_of("B200"));
	for (unsigned i = 0; i < n; i++) {
		assert_true(t[i].milli > 0);
		assert_non_null(strstr(t[i].source, "Lambda"));
	}
}

static void parse(const char *text, int want_rc, struct isc_launch **l,
                  struct isc_launch_problems *p)
{
	isc_launch_problems_init(p);
	assert_int_equal(isc_launch_parse("t.isc", text, strlen(text), l, p, NULL), want_rc);
}

static void test_launchfile_burst_rank(void **state)
{
	struct isc_launch *l = NULL;
	struct isc_launch_problems p;
	json_t *j;
	(void)state;

	parse("isc_project_id = \"p\"\nexperiment_name = \"e\"\ngpus = 8\ncommand = \"x\"\n"
	      "compute_mode = \"burst\"\nburst_rank = \"expected\"\n",
	      0, &l, &p);
	assert_int_equal(l->burst_rank, ISC_RANK_EXPECTED);
	j = isc_launch_to_json(l);
	assert_string_equal(json_string_value(json_object_get(j, "burst_rank")), "expected");
	json_decref(j);
	isc_launch_free(l);
	isc_launch_problems_cleanup(&p);

	parse("isc_project_id = \"p\"\nexperiment_name = \"e\"\ngpus = 8\ncommand = \"x\"\n"
	      "compute_mode = \"burst\"\nburst_rank = \"cheapest\"\n",
	      ISC_EINVALID, &l, &p);
	assert_int_equal(p.len, 1);
	assert_int_equal(p.items[0].line, 6);
	assert_int_equal(p.items[0].col, 14);
	assert_string_equal(p.items[0].field, "burst_rank");
	assert_non_null(strstr(p.items[0].msg, "\"price\", \"work\", \"expected\""));
	isc_launch_problems_cleanup(&p);

	parse("isc_project_id = \"p\"\nexperiment_name = \"e\"\ngpus = 8\ncommand = \"x\"\n"
	      "compute_mode = \"burst\"\nburst_rank = 3\n",
	      ISC_EINVALID, &l, &p);
	assert_string_equal(p.items[0].field, "burst_rank");
	assert_non_null(strstr(p.items[0].msg, "expected a string"));
	isc_launch_problems_cleanup(&p);

	parse("isc_project_id = \"p\"\nexperiment_name = \"e\"\ngpus = 8\ncommand = \"x\"\n"
	      "compute_mode = \"cycle\"\nburst_rank = \"work\"\n",
	      ISC_EINVALID, &l, &p);
	assert_string_equal(p.items[0].field, "burst_rank");
	assert_non_null(strstr(p.items[0].msg, "only allowed when compute_mode is \"burst\""));
	isc_launch_problems_cleanup(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_expected_band),
	    cmocka_unit_test(test_expected_score),
	    cmocka_unit_test(test_work_h100),
	    cmocka_unit_test(test_unknown_throughput_last),
	    cmocka_unit_test(test_unknown_risk_not_favoured),
	    cmocka_unit_test(test_expected_oci_and_history),
	    cmocka_unit_test(test_priority_first),
	    cmocka_unit_test(test_mode_names_and_table),
	    cmocka_unit_test(test_launchfile_burst_rank),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
