/*
 * Catalog import units, on real rows copied into tests/vectors/catalog (see
 * its SOURCES.md): the CSV reader, each format's rules (GCP VM + GPU pairing,
 * OCI CRLF and GpuInfo, AWS spot and filters), malformed rows with their line
 * numbers, the store's add/update/--replace semantics, the price refresh, and
 * loading the shipped catalog.
 */
#include "shapes/accelerator.h"
#include "shapes/catalog.h"
#include "shapes/catalog_import.h"
#include "shapes/csv.h"
#include "store/store_shapes.h"
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

#define VEC "tests/vectors/catalog/"

static const struct isc_shape *find(const struct isc_catalog_parse *p, const char *id)
{
	for (size_t i = 0; i < p->n; i++)
		if (!strcmp(p->shapes[i].id, id))
			return &p->shapes[i];
	return NULL;
}

static int has_skip(const struct isc_catalog_parse *p, const char *prefix)
{
	for (size_t i = 0; i < p->n_skipped; i++)
		if (strstr(p->skipped[i], prefix))
			return 1;
	return 0;
}

static void test_csv_reader(void **state)
{
	const char text[] = "a,\"b,1\",\"say \"\"hi\"\"\"\r\n"
	                    "\"multi\nline\",x,\r\n"
	                    "\n"
	                    "last,,\"\"";
	struct isc_csv c;
	(void)state;
	isc_csv_init(&c, text, sizeof(text) - 1);
	assert_int_equal(isc_csv_next(&c), 1);
	assert_int_equal(c.n, 3);
	assert_string_equal(c.fields[1], "b,1");
	assert_string_equal(c.fields[2], "say \"hi\"");
	assert_int_equal(isc_csv_next(&c), 1);
	assert_int_equal(c.rec_line, 2);
	assert_string_equal(c.fields[0], "multi\nline");
	assert_string_equal(c.fields[2], "");
	assert_int_equal(isc_csv_next(&c), 1);
	assert_true(isc_csv_blank(&c));
	assert_int_equal(isc_csv_next(&c), 1);
	assert_int_equal(c.rec_line, 5); /* the quoted newline counted */
	assert_int_equal(c.n, 3);
	assert_string_equal(c.fields[0], "last");
	assert_int_equal(isc_csv_next(&c), 0);
	isc_csv_cleanup(&c);

	isc_csv_init(&c, "x,\"open", 7);
	assert_int_equal(isc_csv_next(&c), ISC_EINVALID);
	isc_csv_cleanup(&c);
}

static void test_import_ec2instances(void **state)
{
	struct isc_catalog_parse p;
	const struct isc_shape *sh;
	(void)state;
	assert_int_equal(isc_catalog_parse_file(VEC "aws-gpu.csv", ISC_CATALOG_EC2INSTANCES, "aws",
	                                        "2025-11-30", &p, NULL),
	                 0);
	assert_int_equal(p.rows, 13);
	assert_int_equal(p.n_skipped, 0);
	/* dl2q, g5g (arm64), g6f (1/8 GPU), inf2, p5 in a Local Zone, trn1 */
	assert_int_equal(p.filtered, 6);
	assert_int_equal(p.n, 13);
	sh = find(&p, "aws-us-east-1-g5.xlarge-spot");
	assert_non_null(sh);
	assert_true(sh->price_micros == 393880); /* SpotPriceAvg */
	assert_string_equal(sh->gpu_type, "A10G");
	assert_string_equal(sh->zones, "");
	sh = find(&p, "aws-us-east-1-p4d.24xlarge-ondemand");
	assert_true(sh->price_micros == 21957642);
	assert_string_equal(sh->gpu_type, "A100");
	assert_true(sh->gpu_mem_mib == 320 * 1024);
	assert_int_equal(sh->vcpus, 96);
	assert_true(sh->mem_mib == 1152 * 1024);
	assert_string_equal(sh->price_date, "2025-11-30");
	assert_string_equal(find(&p, "aws-us-east-1-p4de.24xlarge-ondemand")->gpu_type,
	                    "A100-80GB");
	assert_string_equal(find(&p, "aws-us-east-1-g2.2xlarge-ondemand")->gpu_type, "K520");
	assert_null(find(&p, "aws-us-east-1-g2.2xlarge-spot")); /* no spot data */
	assert_null(find(&p, "aws-us-east-1-atl-1-p5.48xlarge-ondemand"));
	assert_true(find(&p, "aws-us-east-1-p5.48xlarge-spot")->price_micros == 28106467);
	isc_catalog_parse_cleanup(&p);
}

static void test_import_gcp_pairing(void **state)
{
	struct isc_catalog_parse p;
	const struct isc_shape *sh;
	(void)state;
	assert_int_equal(isc_catalog_parse_file(VEC "gcp-vms.csv", ISC_CATALOG_SKYPILOT, "gcp",
	                                        "2026-05-20", &p, NULL),
	                 0);
	assert_int_equal(p.n_skipped, 0);
	assert_int_equal(p.n, 8);
	/* host 5.91582 + A100x8 23.47126; spot 2.958 + 11.4728 */
	sh = find(&p, "gcp-us-central1-a2-highgpu-8g-ondemand");
	assert_non_null(sh);
	assert_true(sh->price_micros == 29387080);
	assert_string_equal(sh->zones, "us-central1-a,us-central1-b");
	assert_string_equal(sh->gpu_type, "A100");
	assert_int_equal(sh->gpus_per_node, 8);
	assert_true(sh->gpu_mem_mib == 8 * 40960);
	assert_true(find(&p, "gcp-us-central1-a2-highgpu-8g-spot")->price_micros == 14430800);
	assert_true(find(&p, "gcp-us-central1-a3-highgpu-8g-ondemand")->price_micros == 43066150);
	assert_true(find(&p, "gcp-us-central1-a3-highgpu-8g-spot")->price_micros == 35873580);
	sh = find(&p, "gcp-us-central1-g2-standard-4-ondemand");
	assert_true(sh->price_micros == 706830);
	assert_string_equal(sh->gpu_type, "L4");
	/* n1 + attached T4: the T4 row is only in zone a, so only zone a offers it */
	sh = find(&p, "gcp-us-central1-n1-standard-8+t4x1-spot");
	assert_non_null(sh);
	assert_string_equal(sh->display_id, "gcp-us-central1-n1-standard-8+T4x1-spot");
	assert_true(sh->price_micros == 139540 + 165400);
	assert_string_equal(sh->zones, "us-central1-a");
	assert_int_equal(sh->vcpus, 8);
	assert_true(sh->mem_mib == 30 * 1024);
	/* no TPU, no CPU-only VM */
	for (size_t i = 0; i < p.n; i++) {
		assert_null(strstr(p.shapes[i].id, "tpu"));
		assert_null(strstr(p.shapes[i].id, "n2-standard"));
	}
	isc_catalog_parse_cleanup(&p);
}

static void test_import_zone_price_max(void **state)
{
	/* Real row shapes; prices changed per zone to exercise the rule. */
	const char text[] =
	    "InstanceType,vCPUs,MemoryGiB,AcceleratorName,AcceleratorCount,GpuInfo,Region,"
	    "AvailabilityZone,Price,SpotPrice\n"
	    "g2-standard-4,4.0,16.0,,,,us-central1,us-central1-c,0.14679,0.06168\n"
	    "g2-standard-4,4.0,16.0,,,,us-central1,us-central1-a,0.14679,\n"
	    ",,,L4,1,{'Gpus': [{'MemoryInfo': {'SizeInMiB': 24576}}]},us-central1,us-central1-a,"
	    "0.56004,0.2343\n"
	    ",,,L4,1,{'Gpus': [{'MemoryInfo': {'SizeInMiB': 24576}}]},us-central1,us-central1-c,"
	    "0.66004,0.2343\n";
	struct isc_catalog_parse p;
	(void)state;
	assert_int_equal(isc_catalog_parse_mem("t.csv", text, sizeof(text) - 1,
	                                       ISC_CATALOG_SKYPILOT, "gcp", "2026-05-20", &p, NULL),
	                 0);
	assert_int_equal(p.n, 2);
	const struct isc_shape *od = find(&p, "gcp-us-central1-g2-standard-4-ondemand");
	assert_true(od->price_micros == 806830); /* the dearer zone c */
	assert_string_equal(od->zones, "us-central1-a,us-central1-c");
	/* zone a has no spot price for the host: only zone c offers spot */
	assert_string_equal(find(&p, "gcp-us-central1-g2-standard-4-spot")->zones, "us-central1-c");
	isc_catalog_parse_cleanup(&p);
}

static void test_import_oci_crlf(void **state)
{
	struct isc_catalog_parse p;
	const struct isc_shape *sh;
	(void)state;
	assert_int_equal(isc_catalog_parse_file(VEC "oci-vms.csv", ISC_CATALOG_SKYPILOT, "oci",
	                                        "2026-11-22", &p, NULL),
	                 0);
	assert_int_equal(p.n_skipped, 0);
	assert_int_equal(p.filtered, 1); /* the E4.Flex CPU row */
	assert_int_equal(p.n, 3);
	sh = find(&p, "oci-us-ashburn-1-bm.gpu.h100.8-ondemand");
	assert_non_null(sh);
	assert_string_equal(sh->display_id, "oci-us-ashburn-1-BM.GPU.H100.8-ondemand");
	assert_string_equal(sh->zones, "US-ASHBURN-AD-1,US-ASHBURN-AD-2,US-ASHBURN-AD-3");
	assert_true(sh->price_micros == 80000000);
	assert_true(sh->gpu_mem_mib == 655360);
	assert_int_equal(sh->vcpus, 224);
	assert_true(sh->mem_mib == 2048 * 1024);
	assert_true(find(&p, "oci-us-ashburn-1-vm.gpu3.1-spot")->price_micros == 1475000);
	assert_null(find(&p, "oci-us-ashburn-1-bm.gpu.h100.8-spot"));
	isc_catalog_parse_cleanup(&p);
}

static void test_import_malformed(void **state)
{
	struct isc_catalog_parse p;
	struct isc_err err;
	(void)state;
	assert_int_equal(isc_catalog_parse_file(VEC "aws-malformed.csv", ISC_CATALOG_EC2INSTANCES,
	                                        "aws", "2025-11-30", &p, NULL),
	                 0);
	assert_int_equal(p.n, 2);
	assert_int_equal(p.n_skipped, 3);
	assert_true(has_skip(&p, "aws-malformed.csv:3: bad Price '1.0O6'"));
	assert_true(has_skip(&p, "aws-malformed.csv:4: 10 fields, the header has 14"));
	assert_true(has_skip(&p, "aws-malformed.csv:5: bad AcceleratorCount 'one'"));
	isc_catalog_parse_cleanup(&p);

	assert_int_equal(isc_catalog_parse_file(VEC "oci-malformed.csv", ISC_CATALOG_SKYPILOT,
	                                        "oci", "2026-11-22", &p, NULL),
	                 0);
	assert_int_equal(p.n, 2); /* VM.GPU3.1 of line 3, on-demand and spot */
	assert_int_equal(p.n_skipped, 3);
	assert_true(has_skip(&p, "oci-malformed.csv:2: bad Region"));
	assert_true(has_skip(&p, "oci-malformed.csv:4: no Price"));
	assert_true(has_skip(&p, "oci-malformed.csv:5: unterminated quote"));
	isc_catalog_parse_cleanup(&p);

	/* zero valid rows: an error, with the reasons kept */
	const char bad[] =
	    "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,"
	    "Price,SpotPrice,Region,AvailabilityZone\nBM.GPU.H100.8,H100,8,224,2048,,"
	    "eighty,,us-ashburn-1,AD-1\n";
	assert_int_equal(isc_catalog_parse_mem("bad.csv", bad, sizeof(bad) - 1,
	                                       ISC_CATALOG_SKYPILOT, "oci", "2026-11-22", &p, &err),
	                 ISC_EINVALID);
	assert_non_null(strstr(err.msg, "no valid GPU shape"));
	assert_true(has_skip(&p, "bad.csv:2: bad Price 'eighty'"));
	isc_catalog_parse_cleanup(&p);

	/* a header without a needed column */
	assert_int_equal(isc_catalog_parse_mem("h.csv", "a,b\n1,2\n", 8, ISC_CATALOG_SKYPILOT,
	                                       "oci", NULL, &p, &err),
	                 ISC_EINVALID);
	assert_non_null(strstr(err.msg, "h.csv:1: header has no column 'InstanceType'"));
	isc_catalog_parse_cleanup(&p);
	assert_int_equal(
	    isc_catalog_parse_mem("h.csv", "a\n", 2, ISC_CATALOG_SKYPILOT, "azure", NULL, &p, &err),
	    ISC_EINVALID);
	isc_catalog_parse_cleanup(&p);
}

static void test_isc_format_roundtrip(void **state)
{
	struct isc_catalog_parse a, b;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	(void)state;
	assert_int_equal(isc_catalog_parse_file(VEC "oci-vms.csv", ISC_CATALOG_SKYPILOT, "oci",
	                                        "2026-11-22", &a, NULL),
	                 0);
	assert_int_equal(isc_catalog_write_csv(f, a.shapes, a.n, NULL), 0);
	fclose(f);
	assert_non_null(strstr(text, "US-ASHBURN-AD-1;US-ASHBURN-AD-2;US-ASHBURN-AD-3"));
	assert_int_equal(
	    isc_catalog_parse_mem("rt.csv", text, len, ISC_CATALOG_ISC, "oci", NULL, &b, NULL), 0);
	assert_int_equal(a.n, b.n);
	for (size_t i = 0; i < a.n; i++) {
		assert_string_equal(a.shapes[i].display_id, b.shapes[i].display_id);
		assert_string_equal(a.shapes[i].zones, b.shapes[i].zones);
		assert_true(a.shapes[i].price_micros == b.shapes[i].price_micros);
		assert_true(a.shapes[i].gpu_mem_mib == b.shapes[i].gpu_mem_mib);
	}
	isc_catalog_parse_cleanup(&b);
	/* the same shape twice, and a wrong provider, are reported with their lines */
	char *dup, *l1 = strchr(text, '\n') + 1, *l2 = strchr(l1, '\n') + 1;
	char *l2end = strchr(l2, '\n') + 1, *l2prov = strstr(l2, ",oci,");
	/* header, row 1, row 1 again, row 2 with provider gcp */
	assert_true(asprintf(&dup, "%.*s%.*s%.*s,gcp,%.*s", (int)(l2 - text), text, (int)(l2 - l1),
	                     l1, (int)(l2prov - l2), l2, (int)(l2end - l2prov - 5),
	                     l2prov + 5) > 0);
	assert_int_equal(isc_catalog_parse_mem("dup.csv", dup, strlen(dup), ISC_CATALOG_ISC, "oci",
	                                       NULL, &b, NULL),
	                 0);
	assert_true(has_skip(&b, "dup.csv:3: duplicate shape"));
	assert_true(has_skip(&b, "(first at line 2)"));
	assert_true(has_skip(&b, "dup.csv:4: provider 'gcp', expected 'oci'"));
	assert_int_equal(b.n_skipped, 2);
	assert_int_equal(b.n, 1);
	isc_catalog_parse_cleanup(&b);
	free(dup);
	isc_catalog_parse_cleanup(&a);
	free(text);
}

/* ---- store ---- */

static void test_store_apply_replace(void **state)
{
	struct isc_catalog_parse aws, oci;
	struct isc_shapes_apply_result res;
	struct isc_err err;
	struct store_fixture tmp;
	int64_t n;
	struct isc_store *s;
	(void)state;
	store_fixture_init(&tmp, "shapes");
	s = tmp.s;

	assert_int_equal(isc_catalog_parse_file(VEC "aws-gpu.csv", ISC_CATALOG_EC2INSTANCES, "aws",
	                                        "2025-11-30", &aws, NULL),
	                 0);
	assert_int_equal(isc_catalog_parse_file(VEC "oci-vms.csv", ISC_CATALOG_SKYPILOT, "oci",
	                                        "2026-11-22", &oci, NULL),
	                 0);
	assert_int_equal(isc_store_shapes_apply(s, "aws", aws.shapes, aws.n, 0, &res, NULL), 0);
	assert_int_equal(res.added, 13);
	assert_int_equal(isc_store_shapes_apply(s, "oci", oci.shapes, oci.n, 0, &res, NULL), 0);
	assert_int_equal(isc_store_shapes_apply(s, "aws", aws.shapes, aws.n, 0, &res, NULL), 0);
	assert_int_equal(res.unchanged, 13);
	assert_int_equal(res.added + res.updated + res.removed, 0);

	/* a new price: updated; without --replace, the shapes missing from the list stay */
	aws.shapes[0].price_micros += 1;
	assert_int_equal(isc_store_shapes_apply(s, "aws", aws.shapes, 5, 0, &res, NULL), 0);
	assert_int_equal(res.updated, 1);
	assert_int_equal(res.unchanged, 4);
	assert_int_equal(isc_store_shape_count(s, "aws", &n, NULL), 0);
	assert_true(n == 13);

	/* --replace: exactly the list for aws afterwards; oci untouched */
	assert_int_equal(isc_store_shapes_apply(s, "aws", aws.shapes, 5, 1, &res, NULL), 0);
	assert_int_equal(res.removed, 8);
	assert_int_equal(res.unchanged, 5);
	assert_int_equal(isc_store_shape_count(s, "aws", &n, NULL), 0);
	assert_true(n == 5);
	assert_int_equal(isc_store_shape_count(s, "oci", &n, NULL), 0);
	assert_true(n == 3);

	/* a shape of another provider fails the whole import: nothing changes */
	assert_int_equal(isc_store_shapes_apply(s, "aws", oci.shapes, oci.n, 1, &res, &err),
	                 ISC_EINVALID);
	assert_int_equal(isc_store_shape_count(s, NULL, &n, NULL), 0);
	assert_true(n == 8);

	/* case-insensitive get; the stored row round-trips */
	struct isc_shape got;
	assert_int_equal(
	    isc_store_shape_get(s, "OCI-US-ASHBURN-1-BM.GPU.H100.8-ONDEMAND", &got, NULL), 0);
	assert_string_equal(got.display_id, "oci-us-ashburn-1-BM.GPU.H100.8-ondemand");
	assert_string_equal(got.zones, "US-ASHBURN-AD-1,US-ASHBURN-AD-2,US-ASHBURN-AD-3");
	isc_shape_cleanup(&got);
	assert_int_equal(isc_store_shape_get(s, "nope", &got, NULL), ISC_ENOTFOUND);

	struct isc_shapes_summary *sum;
	size_t ns;
	assert_int_equal(isc_store_shapes_summary(s, &sum, &ns, NULL), 0);
	assert_int_equal(ns, 2);
	assert_string_equal(sum[0].provider, "aws");
	assert_string_equal(sum[1].price_date_max, "2026-11-22");
	assert_true(sum[1].regions == 1);
	isc_shapes_summary_free(sum, ns);

	isc_catalog_parse_cleanup(&aws);
	isc_catalog_parse_cleanup(&oci);
	store_fixture_cleanup(&tmp);
}

static void test_store_set_price(void **state)
{
	struct isc_catalog_parse p;
	struct isc_shapes_apply_result res;
	struct isc_shape got;
	struct store_fixture tmp;
	struct isc_store *s;
	(void)state;
	store_fixture_init(&tmp, "shapes");
	s = tmp.s;
	assert_int_equal(isc_catalog_parse_file(VEC "oci-vms.csv", ISC_CATALOG_SKYPILOT, "oci",
	                                        "2026-11-22", &p, NULL),
	                 0);
	assert_int_equal(isc_store_shapes_apply(s, "oci", p.shapes, p.n, 0, &res, NULL), 0);
	const char *id = "oci-us-ashburn-1-VM.GPU3.1-spot";
	assert_int_equal(
	    isc_store_shape_set_price(s, id, "US-ASHBURN-AD-2", 1200000, "2026-12-01", 1234, NULL),
	    0);
	assert_int_equal(isc_store_shape_get(s, id, &got, NULL), 0);
	assert_true(got.price_micros == 1200000);
	assert_string_equal(got.zones, "US-ASHBURN-AD-2,US-ASHBURN-AD-1,US-ASHBURN-AD-3");
	assert_string_equal(got.price_date, "2026-12-01");
	assert_string_equal(got.price_source, "aws-spot-history");
	assert_true(got.price_checked_ms == 1234);
	isc_shape_cleanup(&got);
	/* a re-import puts the catalog's price back, and says so */
	assert_int_equal(isc_store_shapes_apply(s, "oci", p.shapes, p.n, 0, &res, NULL), 0);
	assert_int_equal(isc_store_shape_get(s, id, &got, NULL), 0);
	assert_string_equal(got.price_source, "catalog");
	assert_true(got.price_checked_ms == 0);
	isc_shape_cleanup(&got);
	assert_int_equal(
	    isc_store_shape_set_price(s, id, "US-ASHBURN-AD-2", 1200000, "2026-12-01", 1234, NULL),
	    0);
	/* no zone: the price only */
	assert_int_equal(isc_store_shape_set_price(s, id, NULL, 1300000, NULL, 0, NULL), 0);
	assert_int_equal(isc_store_shape_get(s, id, &got, NULL), 0);
	assert_true(got.price_micros == 1300000);
	assert_string_equal(got.zones, "US-ASHBURN-AD-2,US-ASHBURN-AD-1,US-ASHBURN-AD-3");
	isc_shape_cleanup(&got);
	assert_int_equal(isc_store_shape_set_price(s, "oci-x-y-spot", NULL, 1, NULL, 0, NULL),
	                 ISC_ENOTFOUND);
	assert_int_equal(isc_store_shape_set_price(s, id, NULL, -1, NULL, 0, NULL), ISC_EINVALID);
	isc_catalog_parse_cleanup(&p);
	store_fixture_cleanup(&tmp);
}

static void test_load_default_and_rank(void **state)
{
	struct isc_catalog *cat;
	struct isc_ranking r;
	struct isc_err err;
	size_t loaded;
	int64_t n;
	struct store_fixture tmp;
	struct isc_store *s;
	(void)state;
	store_fixture_init(&tmp, "shapes");
	s = tmp.s;
	/* the shipped catalog of this tree */
	assert_int_equal(isc_catalog_load_default(s, "shapes", &loaded, &err), 0);
	assert_true(loaded > 3000);
	assert_int_equal(isc_store_shape_count(s, NULL, &n, NULL), 0);
	assert_true((size_t)n == loaded);
	/* a store that has shapes is left alone */
	assert_int_equal(isc_catalog_load_default(s, "shapes", &loaded, &err), 0);
	assert_int_equal(loaded, 0);

	assert_int_equal(isc_catalog_load(s, &cat, &err), 0);
	assert_true(isc_catalog_size(cat) == (size_t)n);
	struct isc_rank_request req = {.gpus = 16, .gpu_type = "H100", .limit = 5};
	assert_int_equal(isc_catalog_rank(cat, &req, &r, &err), 0);
	assert_int_equal(r.n, 5);
	assert_int_equal(r.entries[0].nnodes * r.entries[0].nproc, 16);
	isc_ranking_cleanup(&r);
	/* No default ranking of the shipped catalog, for any GPU count, holds a shape a CUDA
	 * image cannot use; asking for one by type still finds it. */
	for (int g = 1; g <= ISC_BURST_GPUS_MAX; g++) {
		req = (struct isc_rank_request){.gpus = g};
		assert_int_equal(isc_catalog_rank(cat, &req, &r, &err), 0);
		assert_true(r.n > 0);
		for (size_t i = 0; i < r.n; i++)
			assert_true(isc_accelerator_of(r.entries[i].shape->gpu_type)->cuda);
		isc_ranking_cleanup(&r);
	}
	req = (struct isc_rank_request){.gpus = 8, .gpu_type = "v520"};
	assert_int_equal(isc_catalog_rank(cat, &req, &r, &err), 0);
	assert_true(r.n > 0);
	assert_string_equal(r.entries[0].shape->gpu_type, "V520");
	isc_ranking_cleanup(&r);
	isc_catalog_free(cat);

	/* the lookup: $ISC_SHAPES_DIR first */
	setenv("ISC_SHAPES_DIR", "/some/where", 1);
	char *dir = isc_catalog_default_dir(&err);
	assert_string_equal(dir, "/some/where");
	free(dir);
	unsetenv("ISC_SHAPES_DIR");
	/* a fresh store and an empty folder: ENOTFOUND */
	store_fixture_cleanup(&tmp);
	store_fixture_init(&tmp, "shapes");
	s = tmp.s;
	assert_int_equal(isc_catalog_load_default(s, "/nonexistent", &loaded, &err), ISC_ENOTFOUND);
	store_fixture_cleanup(&tmp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_csv_reader),
	    cmocka_unit_test(test_import_ec2instances),
	    cmocka_unit_test(test_import_gcp_pairing),
	    cmocka_unit_test(test_import_zone_price_max),
	    cmocka_unit_test(test_import_oci_crlf),
	    cmocka_unit_test(test_import_malformed),
	    cmocka_unit_test(test_isc_format_roundtrip),
	    cmocka_unit_test(test_store_apply_replace),
	    cmocka_unit_test(test_store_set_price),
	    cmocka_unit_test(test_load_default_and_rank),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
