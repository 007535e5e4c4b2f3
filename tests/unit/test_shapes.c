/*
 * Shapes units: exact decimal prices, the NNODES x N_PROC layout rule, and
 * the ranking (priority list, price order and its tie-breaks, filters, the
 * 48-GPU limit, top-K against a brute-force sort).
 */
#include "shapes/accelerator.h"
#include "shapes/catalog.h"
#include "shapes/priority.h"
#include "shapes/shape.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- money ---- */

static void test_decimal_to_micros(void **state)
{
	static const struct {
		const char *in;
		int64_t want;
	} ok[] = {
	    {"55.04", 55040000},     {"21.957642", 21957642}, {"8", 8000000},
	    {"0.0185", 18500},       {".5", 500000},          {"5.", 5000000},
	    {"0.0000005", 1},        {"0.0000004", 0},        {"1.9999995", 2000000},
	    {"28.106467", 28106467}, {"0.00000049999", 0},    {"9223372036854.775807", INT64_MAX},
	};
	static const char *const bad[] = {
	    "", ".", "-1", "+1", "1e3", "1.2.3", " 1", "1 ", "abc", "9223372036855", "0x10"};
	int64_t v;
	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		assert_int_equal(isc_decimal_to_micros(ok[i].in, &v), 0);
		assert_true(v == ok[i].want);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(isc_decimal_to_micros(bad[i], &v), ISC_EINVALID);
	/* GiB -> MiB */
	assert_int_equal(isc_decimal_scaled("7.5", 1024, &v), 0);
	assert_true(v == 7680);
	assert_int_equal(isc_decimal_scaled("680.0", 1024, &v), 0);
	assert_true(v == 696320);
	assert_int_equal(isc_decimal_scaled("0.613", 1024, &v), 0);
	assert_true(v == 628); /* 627.712 rounds up */
}

static void test_micros_format(void **state)
{
	char b[ISC_MICROS_STR_MAX];
	(void)state;
	assert_string_equal(isc_micros_format(55040000, b), "55.04");
	assert_string_equal(isc_micros_format(21957642, b), "21.957642");
	assert_string_equal(isc_micros_format(0, b), "0.00");
	assert_string_equal(isc_micros_format(1, b), "0.000001");
	assert_string_equal(isc_micros_format(80000000, b), "80.00");
	assert_string_equal(isc_micros_format(-500000, b), "-0.50");
	assert_string_equal(isc_micros_format(INT64_MAX, b), "9223372036854.775807");
}

/* ---- layout ---- */

static void test_layout(void **state)
{
	static const struct {
		int gpus, per_node, nnodes, nproc;
	} cases[] = {
	    {1, 8, 1, 1},                  /* G = 1 */
	    {7, 8, 1, 7},                  /* G < g */
	    {2, 16, 1, 2},  {8, 8, 1, 8},  /* G = g */
	    {16, 8, 2, 8},  {48, 8, 6, 8}, /* G a multiple of g */
	    {24, 1, 24, 1}, {12, 8, 2, 6}, /* ceil = 2 divides 12 */
	    {13, 8, 13, 1},                /* prime: only 13 is >= 2 */
	    {47, 8, 47, 1}, {9, 8, 3, 3},  /* ceil 2 does not divide 9: 3 */
	    {10, 4, 5, 2},  {6, 4, 2, 3},  {40, 16, 4, 10}, {18, 8, 3, 6},
	};
	int nn, np;
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(isc_shape_layout(cases[i].gpus, cases[i].per_node, &nn, &np), 0);
		assert_int_equal(nn, cases[i].nnodes);
		assert_int_equal(np, cases[i].nproc);
		assert_int_equal(nn * np, cases[i].gpus);
	}
	/* The rule against its definition for every request size and node size. */
	for (int g = 1; g <= 16; g++)
		for (int G = 1; G <= 48; G++) {
			assert_int_equal(isc_shape_layout(G, g, &nn, &np), 0);
			int want = (G + g - 1) / g;
			while (G % want)
				want++;
			assert_int_equal(nn, want);
			assert_true(np <= g);
		}
	assert_int_equal(isc_shape_layout(0, 8, &nn, &np), ISC_EINVALID);
	assert_int_equal(isc_shape_layout(8, 0, &nn, &np), ISC_EINVALID);
}

static void test_cluster_price(void **state)
{
	int64_t v;
	(void)state;
	assert_int_equal(isc_cluster_price(55040000, 6, &v), 0);
	assert_true(v == 330240000);
	assert_int_equal(isc_cluster_price(INT64_MAX / 2, 3, &v), ISC_EINVALID);
	assert_int_equal(isc_cluster_price(-1, 1, &v), ISC_EINVALID);
}

/* ---- ranking ---- */

struct spec {
	const char *provider, *region, *itype;
	int spot;
	const char *gpu;
	int gpus;
	int64_t price;
	int64_t gpu_mem_mib; /* whole node; 0: unknown */
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
		sh->gpu_mem_mib = sp[i].gpu_mem_mib;
		sh->zones = strdup("");
		sh->price_date = strdup("2026-01-01");
		assert_int_equal(isc_shape_make_id(sh), 0);
	}
	assert_int_equal(isc_catalog_new(list, n, &c, NULL), 0);
	return c;
}

static const struct spec small[] = {
    {"aws", "us-east-1", "p5.48xlarge", 0, "H100", 8, 55040000},
    {"aws", "us-east-1", "p5.48xlarge", 1, "H100", 8, 28106467},
    {"aws", "us-east-1", "g5.xlarge", 0, "A10G", 1, 1006000},
    {"gcp", "us-central1", "a3-highgpu-8g", 0, "H100", 8, 43066150},
    {"gcp", "us-central1", "a3-highgpu-8g", 1, "H100", 8, 35873580},
    {"gcp", "us-central1", "a2-megagpu-16g", 0, "A100", 16, 60000000},
    {"oci", "us-ashburn-1", "BM.GPU.H100.8", 0, "H100", 8, 80000000},
    {"oci", "us-ashburn-1", "VM.GPU3.1", 1, "V100", 1, 1475000},
};

/* The user's list checked where it is written: warnings at each item's place, by index. */
static void test_priority_check(void **state)
{
	struct isc_catalog *c = make_catalog(small, sizeof(small) / sizeof(small[0]));
	char *items[] = {"aws-us-east-1-p5.48xlarg-spot", "GCP-us-central1-a3-highgpu-8g-spot",
	                 "nothing-like-it"};
	struct isc_launch_pos pos[] = {{5, 30, 0}, {5, 65, 1}, {6, 3, 3}};
	struct isc_strlist ids = {items, pos, 3};
	struct isc_launch_problems p;
	struct isc_priority_verdict v;
	(void)state;

	isc_launch_problems_init(&p);
	assert_int_equal(isc_priority_check(c, NULL, &ids, &p, &v, NULL), 0);
	assert_int_equal(v.n_ids, 3);
	assert_int_equal(v.n_exist, 1);
	assert_int_equal(v.n_placeable, 1); /* no checker: whatever exists counts */
	assert_false(v.exists[0]);
	assert_true(v.exists[1]); /* ids are case-insensitive */
	assert_false(v.exists[2]);
	assert_int_equal(p.len, 2);
	assert_true(p.items[0].warning);
	assert_int_equal(p.items[0].line, 5);
	assert_int_equal(p.items[0].col, 30);
	assert_string_equal(p.items[0].field, "burst_shape_priority_list[0]");
	assert_string_equal(p.items[0].msg, "no shape \"aws-us-east-1-p5.48xlarg-spot\"; did you "
	                                    "mean \"aws-us-east-1-p5.48xlarge-spot\"?");
	/* The index is the item's place in the file, not in the deduplicated list. */
	assert_string_equal(p.items[1].field, "burst_shape_priority_list[3]");
	assert_string_equal(p.items[1].msg, "no shape \"nothing-like-it\"");
	/* Did-you-mean: the other market first, else the nearest id by edit distance. */
	assert_string_equal(isc_catalog_suggest(c, "gcp-us-central1-a2-megagpu-16g-spot")->id,
	                    "gcp-us-central1-a2-megagpu-16g-ondemand");
	assert_string_equal(isc_catalog_suggest(c, "oci-us-ashburn-1-vm.gpu3.2-spot")->id,
	                    "oci-us-ashburn-1-vm.gpu3.1-spot");
	assert_null(isc_catalog_suggest(c, "azure-eastus-nd96asr-spot"));
	isc_priority_verdict_cleanup(&v);
	isc_launch_problems_cleanup(&p);
	isc_catalog_free(c);
}

static void test_rank_priority(void **state)
{
	struct isc_catalog *c = make_catalog(small, sizeof(small) / sizeof(small[0]));
	const char *prio[] = {"oci-us-ashburn-1-BM.GPU.H100.8-ondemand", "aws-us-east-1-nope-spot",
	                      "GCP-US-CENTRAL1-A3-HIGHGPU-8G-SPOT",
	                      "oci-us-ashburn-1-bm.gpu.h100.8-ondemand" /* duplicate */,
	                      "aws-us-east-1-p5.48xlarge-ondemand"};
	struct isc_rank_request req = {.gpus = 16, .priority = prio, .n_priority = 5};
	struct isc_ranking r;
	(void)state;

	assert_int_equal(isc_catalog_rank(c, &req, &r, NULL), 0);
	assert_true(r.from_priority);
	assert_int_equal(r.n, 3);
	assert_string_equal(r.entries[0].shape->display_id,
	                    "oci-us-ashburn-1-BM.GPU.H100.8-ondemand");
	assert_string_equal(r.entries[1].shape->id, "gcp-us-central1-a3-highgpu-8g-spot");
	assert_string_equal(r.entries[2].shape->id, "aws-us-east-1-p5.48xlarge-ondemand");
	assert_int_equal(r.entries[0].nnodes, 2);
	assert_int_equal(r.entries[0].nproc, 8);
	assert_true(r.entries[0].cluster_price_micros == 160000000);
	assert_int_equal(r.n_warnings, 1);
	assert_non_null(strstr(r.warnings[0], "'aws-us-east-1-nope-spot'"));
	isc_ranking_cleanup(&r);

	/* limit keeps the user's order */
	req.limit = 1;
	assert_int_equal(isc_catalog_rank(c, &req, &r, NULL), 0);
	assert_int_equal(r.n, 1);
	assert_string_equal(r.entries[0].shape->id, "oci-us-ashburn-1-bm.gpu.h100.8-ondemand");
	isc_ranking_cleanup(&r);
	isc_catalog_free(c);
}

static void test_rank_all_invalid_falls_back(void **state)
{
	struct isc_catalog *c = make_catalog(small, sizeof(small) / sizeof(small[0]));
	const char *prio[] = {"aws-us-east-1-p5.48xlarge-spto",
	                      "oci-us-ashburn-1-VM.GPU3.1-ondemand"};
	struct isc_rank_request req = {.gpus = 8, .priority = prio, .n_priority = 2};
	struct isc_ranking r;
	(void)state;

	assert_int_equal(isc_catalog_rank(c, &req, &r, NULL), 0);
	assert_false(r.from_priority);
	assert_int_equal(r.n, 8); /* every shape */
	assert_int_equal(r.n_warnings, 3);
	/* the neighbour in id order shares most of the text: a did-you-mean */
	assert_non_null(strstr(r.warnings[0], "did you mean 'aws-us-east-1-p5.48xlarge-spot'"));
	/* the other market of the same machine */
	assert_non_null(strstr(r.warnings[1], "did you mean 'oci-us-ashburn-1-VM.GPU3.1-spot'"));
	assert_non_null(strstr(r.warnings[2], "ranking every shape by price"));
	/* 8 GPUs: V100 x1 needs 8 nodes x 1.475 = 11.80; A10G 8 x 1.006 = 8.048 */
	assert_string_equal(r.entries[0].shape->id, "aws-us-east-1-g5.xlarge-ondemand");
	assert_int_equal(r.entries[0].nnodes, 8);
	assert_string_equal(r.entries[1].shape->id, "oci-us-ashburn-1-vm.gpu3.1-spot");
	assert_string_equal(r.entries[2].shape->id, "aws-us-east-1-p5.48xlarge-spot");
	for (size_t i = 1; i < r.n; i++)
		assert_true(r.entries[i - 1].cluster_price_micros <=
		            r.entries[i].cluster_price_micros);
	isc_ranking_cleanup(&r);
	isc_catalog_free(c);
}

static void test_rank_ties(void **state)
{
	/* 16 GPUs, all at 16.00/h for the cluster: 1 node before 2 nodes, then by id. */
	static const struct spec tie[] = {
	    {"aws", "r1", "eight", 0, "T4", 8, 8000000},
	    {"gcp", "r1", "sixteen-b", 0, "T4", 16, 16000000},
	    {"aws", "r1", "sixteen-a", 0, "T4", 16, 16000000},
	    {"oci", "r1", "four", 0, "T4", 4, 4000000},
	    {"oci", "r0", "eight", 0, "T4", 8, 8000000},
	};
	struct isc_catalog *c = make_catalog(tie, 5);
	struct isc_rank_request req = {.gpus = 16};
	struct isc_ranking r;
	(void)state;
	assert_int_equal(isc_catalog_rank(c, &req, &r, NULL), 0);
	assert_int_equal(r.n, 5);
	assert_string_equal(r.entries[0].shape->id, "aws-r1-sixteen-a-ondemand");
	assert_string_equal(r.entries[1].shape->id, "gcp-r1-sixteen-b-ondemand");
	assert_string_equal(r.entries[2].shape->id, "aws-r1-eight-ondemand");
	assert_string_equal(r.entries[3].shape->id, "oci-r0-eight-ondemand");
	assert_string_equal(r.entries[4].shape->id, "oci-r1-four-ondemand");
	assert_int_equal(r.entries[4].nnodes, 4);
	isc_ranking_cleanup(&r);
	isc_catalog_free(c);
}

static void test_rank_filters(void **state)
{
	struct isc_catalog *c = make_catalog(small, sizeof(small) / sizeof(small[0]));
	struct isc_rank_request req = {
	    .gpus = 8, .gpu_type = "h100", .market = ISC_MARKET_ONDEMAND};
	struct isc_ranking r;
	(void)state;
	assert_int_equal(isc_catalog_rank(c, &req, &r, NULL), 0);
	assert_int_equal(r.n, 3);
	assert_string_equal(r.entries[0].shape->id, "gcp-us-central1-a3-highgpu-8g-ondemand");
	assert_string_equal(r.entries[1].shape->id, "aws-us-east-1-p5.48xlarge-ondemand");
	assert_string_equal(r.entries[2].shape->id, "oci-us-ashburn-1-bm.gpu.h100.8-ondemand");
	isc_ranking_cleanup(&r);

	req = (struct isc_rank_request){.gpus = 8, .provider = "aws", .market = ISC_MARKET_SPOT};
	assert_int_equal(isc_catalog_rank(c, &req, &r, NULL), 0);
	assert_int_equal(r.n, 1);
	assert_string_equal(r.entries[0].shape->id, "aws-us-east-1-p5.48xlarge-spot");
	isc_ranking_cleanup(&r);

	req = (struct isc_rank_request){.region = "US-CENTRAL1"};
	assert_int_equal(isc_catalog_rank(c, &req, &r, NULL), 0);
	assert_int_equal(r.n, 3);
	assert_int_equal(r.entries[0].nnodes, 1); /* gpus 0: one node each */
	assert_int_equal(r.entries[0].nproc, 8);
	isc_ranking_cleanup(&r);

	req = (struct isc_rank_request){.gpu_type = "TPU"};
	assert_int_equal(isc_catalog_rank(c, &req, &r, NULL), 0);
	assert_int_equal(r.n, 0);
	isc_ranking_cleanup(&r);
	isc_catalog_free(c);
}

/* The platform's containers are CUDA images: other accelerators only when asked for by name. */
static void test_rank_accelerator_fit(void **state)
{
	static const struct spec mixed[] = {
	    {"aws", "us-east-1", "g4ad.xlarge", 1, "V520", 1, 100000, 8192},
	    {"aws", "us-east-1", "g4dn.xlarge", 1, "T4", 1, 200000, 16384},
	    {"oci", "r1", "bm.gpu.mi300x.8", 0, "MI300X", 8, 500000, 8 * 196608},
	    {"gcp", "r1", "a2-ultragpu-1g", 0, "A100-80GB", 1, 900000, 81920},
	    {"gcp", "r1", "new-1", 0, "Z9000", 1, 50000, 0}, /* a model nobody classified */
	};
	struct isc_catalog *c = make_catalog(mixed, sizeof(mixed) / sizeof(mixed[0]));
	const char *prio[] = {"aws-us-east-1-g4ad.xlarge-spot"};
	struct isc_rank_request req = {.gpus = 8};
	struct isc_ranking r;
	(void)state;
	assert_int_equal(isc_catalog_rank(c, &req, &r, NULL), 0);
	assert_int_equal(r.n, 2); /* T4 and A100-80GB; never the V520, MI300X or the unknown */
	assert_string_equal(r.entries[0].shape->gpu_type, "T4");
	assert_string_equal(r.entries[1].shape->gpu_type, "A100-80GB");
	isc_ranking_cleanup(&r);

	req = (struct isc_rank_request){.gpus = 8, .gpu_type = "mi300x, v520"};
	assert_int_equal(isc_catalog_rank(c, &req, &r, NULL), 0);
	assert_int_equal(r.n, 2);
	assert_string_equal(r.entries[0].shape->gpu_type, "MI300X"); /* 1 x 0.50 < 8 x 0.10 */
	assert_string_equal(r.entries[1].shape->gpu_type, "V520");
	isc_ranking_cleanup(&r);

	/* A priority list is the user's own choice: it is not filtered. */
	req = (struct isc_rank_request){.gpus = 1, .priority = prio, .n_priority = 1};
	assert_int_equal(isc_catalog_rank(c, &req, &r, NULL), 0);
	assert_int_equal(r.n, 1);
	assert_string_equal(r.entries[0].shape->gpu_type, "V520");
	isc_ranking_cleanup(&r);

	/* At least 80 GB per GPU: of the CUDA shapes only the A100-80GB (80 GiB) passes. */
	req = (struct isc_rank_request){.gpus = 1, .min_gpu_mem_mib = 76294};
	assert_int_equal(isc_catalog_rank(c, &req, &r, NULL), 0);
	assert_int_equal(r.n, 1);
	assert_string_equal(r.entries[0].shape->gpu_type, "A100-80GB");
	isc_ranking_cleanup(&r);
	isc_catalog_free(c);

	assert_string_equal(isc_accelerator_of("A100-80GB")->family, "Ampere");
	assert_string_equal(isc_accelerator_of("h100-mega")->vendor, "nvidia");
	assert_string_equal(isc_accelerator_of("L40S")->family, "Ada Lovelace");
	assert_string_equal(isc_accelerator_of("MI355X")->vendor, "amd");
	assert_false(isc_accelerator_of("V520")->cuda);
	assert_false(isc_accelerator_of("Z9000")->cuda);
	assert_string_equal(isc_accelerator_of(NULL)->vendor, "unknown");
}

static void test_size_parse(void **state)
{
	static const struct {
		const char *in;
		int64_t want;
	} ok[] = {{"40G", 40000000000}, {"80Gi", 85899345920},
	          {"512M", 512000000},  {"1Ti", 1099511627776},
	          {"10", 10},           {"40GB", 40000000000},
	          {"16KiB", 16384}};
	static const char *const bad[] = {"",           "G",      "-1G",
	                                  "1.5G",       "40g",    "40 G",
	                                  "40X",        "40GiBB", "99999999999999999999",
	                                  "9999999999T"};
	int64_t v;
	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		assert_int_equal(isc_size_parse(ok[i].in, &v), 0);
		assert_true(v == ok[i].want);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(isc_size_parse(bad[i], &v), ISC_EINVALID);
}

static void test_rank_limit_48(void **state)
{
	struct isc_catalog *c = make_catalog(small, 2);
	struct isc_rank_request req = {.gpus = 49};
	struct isc_ranking r;
	struct isc_err err;
	(void)state;
	assert_int_equal(isc_catalog_rank(c, &req, &r, &err), ISC_EINVALID);
	assert_non_null(strstr(err.msg, "burst requests are limited to 48 GPUs"));
	req.gpus = 48;
	assert_int_equal(isc_catalog_rank(c, &req, &r, &err), 0);
	assert_int_equal(r.entries[0].nnodes, 6);
	isc_ranking_cleanup(&r);
	req.gpus = -1;
	assert_int_equal(isc_catalog_rank(c, &req, &r, &err), ISC_EINVALID);
	isc_catalog_free(c);
}

/* The merge with a top-K cut gives exactly the prefix of a full brute-force sort. */
static const struct isc_catalog *bf_cat;
static int bf_gpus;
static int cmp_bf(const void *a, const void *b)
{
	const struct isc_rank_entry *x = a, *y = b;
	(void)bf_cat;
	if (x->cluster_price_micros != y->cluster_price_micros)
		return x->cluster_price_micros < y->cluster_price_micros ? -1 : 1;
	if (x->nnodes != y->nnodes)
		return x->nnodes - y->nnodes;
	return strcmp(x->shape->id, y->shape->id);
}

static void test_rank_matches_brute_force(void **state)
{
	enum { N = 3000 };
	static const int per_node[] = {1, 2, 4, 8, 16};
	struct spec *sp = calloc(N, sizeof(*sp));
	char(*names)[32] = calloc(N, 32);
	(void)state;
	srand(7);
	for (int i = 0; i < N; i++) {
		snprintf(names[i], 32, "t%d", i);
		sp[i] = (struct spec){i % 3 == 0   ? "aws"
		                      : i % 3 == 1 ? "gcp"
		                                   : "oci",
		                      "r",
		                      names[i],
		                      i % 2,
		                      "L4",
		                      per_node[rand() % 5],
		                      (rand() % 50) * 250000};
	}
	struct isc_catalog *c = make_catalog(sp, N);
	struct isc_rank_entry *all = calloc(N, sizeof(*all));
	for (int G = 1; G <= 48; G += 5) {
		bf_cat = c;
		bf_gpus = G;
		for (size_t i = 0; i < N; i++) {
			all[i].shape = isc_catalog_at(c, i);
			isc_shape_layout(G, all[i].shape->gpus_per_node, &all[i].nnodes,
			                 &all[i].nproc);
			all[i].cluster_price_micros = all[i].shape->price_micros * all[i].nnodes;
		}
		qsort(all, N, sizeof(*all), cmp_bf);
		for (size_t limit = 0; limit <= 100; limit += 50) {
			struct isc_rank_request req = {.gpus = G, .limit = limit};
			struct isc_ranking r;
			assert_int_equal(isc_catalog_rank(c, &req, &r, NULL), 0);
			assert_int_equal(r.n, limit ? limit : N);
			for (size_t i = 0; i < r.n; i++) {
				assert_ptr_equal(r.entries[i].shape, all[i].shape);
				assert_int_equal(r.entries[i].nnodes, all[i].nnodes);
			}
			isc_ranking_cleanup(&r);
		}
	}
	assert_int_equal(bf_gpus, 46);
	free(all);
	isc_catalog_free(c);
	free(sp);
	free(names);
}

/* A priority list as typed ("a,b,,c"): split in place, blanks and empty items dropped. */
static void test_shape_ids_split(void **state)
{
	char buf[] = "aws-a, gcp-b,,  ,oci-c,";
	char empty[] = "";
	char **ids = NULL;
	size_t n = 99;
	(void)state;
	assert_int_equal(isc_shape_ids_split(buf, &ids, &n), 0);
	assert_int_equal(n, 3);
	assert_string_equal(ids[0], "aws-a");
	assert_string_equal(ids[1], "gcp-b");
	assert_string_equal(ids[2], "oci-c");
	free(ids);
	assert_int_equal(isc_shape_ids_split(empty, &ids, &n), 0);
	assert_int_equal(n, 0);
	free(ids);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_decimal_to_micros),
	    cmocka_unit_test(test_micros_format),
	    cmocka_unit_test(test_layout),
	    cmocka_unit_test(test_cluster_price),
	    cmocka_unit_test(test_rank_priority),
	    cmocka_unit_test(test_rank_all_invalid_falls_back),
	    cmocka_unit_test(test_rank_ties),
	    cmocka_unit_test(test_rank_filters),
	    cmocka_unit_test(test_rank_accelerator_fit),
	    cmocka_unit_test(test_size_parse),
	    cmocka_unit_test(test_rank_limit_48),
	    cmocka_unit_test(test_priority_check),
	    cmocka_unit_test(test_rank_matches_brute_force),
	    cmocka_unit_test(test_shape_ids_split),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
