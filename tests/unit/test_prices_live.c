/*
 * Live list prices (issue 43): the Cloud Billing Catalog reader (pages, Money's
 * units/nanos, what it skips, malformed replies named), a GCP machine type's
 * price from its SKUs per family, and the store's batch write with its source,
 * age and failed refreshes. No network: the HTTP replies are scripted.
 */
#include "prices/gcp_prices.h"
#include "prices/oci_prices.h"
#include "providers/aws/pricing.h"
#include "providers/gcp/gcp_billing.h"
#include "store/store_int.h"
#include "store/store_shapes.h"
#include "tests/unit/driver_script.h"
#include "tests/unit/store_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- scripted HTTP ---- */

static struct {
	char *url[16];
	size_t calls;
} S;

static void script_reset(void)
{
	for (size_t i = 0; i < S.calls; i++)
		free(S.url[i]);
	memset(&S, 0, sizeof(S));
	driver_script_reset();
}

static int scripted_send(void *ctx, const struct isc_http_request *req, long t1, long t2,
                         size_t max, struct isc_http_response *resp, struct isc_err *err)
{
	(void)ctx, (void)t1, (void)t2, (void)max;
	assert_true(S.calls < 16);
	S.url[S.calls++] = strdup(req->url);
	return driver_script_answer(req, S.calls, "refused", resp, err);
}

static const struct isc_http_transport scripted = {scripted_send, NULL, 0};

static int64_t clock_now = 1763900000000LL;
static int64_t fixed_now(void *c)
{
	(void)c;
	return clock_now;
}
static void fake_sleep(void *c, int64_t ms)
{
	(void)c;
	clock_now += ms;
}
static uint64_t fixed_random(void *c)
{
	(void)c;
	return 7;
}
static const struct isc_clock fake_clock = {fixed_now, fake_sleep, fixed_random, NULL};

/* One SKU as the API writes it. */
#define SKU(id, desc, group, usage, unit, units, nanos, regions)                                   \
	"{\"name\":\"services/6F81-5844-456A/skus/" id "\",\"skuId\":\"" id                        \
	"\",\"description\":\"" desc "\",\"category\":{\"serviceDisplayName\":\"Compute "          \
	"Engine\",\"resourceFamily\":\"Compute\",\"resourceGroup\":\"" group                       \
	"\",\"usageType\":\"" usage "\"},\"serviceRegions\":[" regions                             \
	"],\"pricingInfo\":[{\"pricingExpression\":{\"usageUnit\":\"" unit                         \
	"\",\"tieredRates\":[{\"startUsageAmount\":0,\"unitPrice\":{\"currencyCode\":\"USD\","     \
	"\"units\":\"" units "\",\"nanos\":" nanos "}}]}}]}"

static void test_billing_parse_money(void **state)
{
	struct isc_gcp_sku *v = NULL;
	size_t n = 0, cap = 0;
	char *next = NULL;
	struct isc_err err;
	/* 2 units + 933908000 nanos; a SKU without units; a commitment and a Storage SKU
	 * skipped; a price tier above 0 ignored. */
	const char *page = "{\"skus\":[" SKU(
	    "AAAA-0001", "Nvidia Tesla A100 GPU running in Americas", "GPU", "OnDemand", "h", "2",
	    "933908000",
	    "\"us-central1\",\"us-east1\"") ","
	                                    "{\"skuId\":\"AAAA-0002\",\"description\":\"N1 "
	                                    "Predefined Instance Core running in "
	                                    "Americas\",\"category\":{\"resourceFamily\":"
	                                    "\"Compute\",\"resourceGroup\":"
	                                    "\"N1Standard\",\"usageType\":\"Preemptible\"},"
	                                    "\"serviceRegions\":[\"us-central1\"],"
	                                    "\"pricingInfo\":[{\"pricingExpression\":{"
	                                    "\"usageUnit\":\"h\",\"tieredRates\":[{"
	                                    "\"startUsageAmount\":0,\"unitPrice\":{"
	                                    "\"currencyCode\":\"USD\",\"nanos\":6655000}},"
	                                    "{\"startUsageAmount\":100,\"unitPrice\":{"
	                                    "\"currencyCode\":\"USD\",\"units\":\"9\"}}]}}]}," SKU(
	                                        "AAAA-0003",
	                                        "Commitment v1: A2 Cpu in Americas for 1 Year",
	                                        "CPU", "Commit1Yr", "h", "0", "19915000",
	                                        "\"us-central1\"") ","
	                                                           "{\"skuId\":\"AAAA-0004\","
	                                                           "\"description\":\"Storage PD "
	                                                           "Capacity\",\"category\":{"
	                                                           "\"resourceFamily\":\"Storage\","
	                                                           "\"usageType\":\"OnDemand\"}}"
	                                                           "],\"nextPageToken\":\"tok/"
	                                                           "2+\"}";
	(void)state;
	assert_int_equal(
	    isc_gcp_billing_parse(page, strlen(page), 1, "USD", &v, &n, &cap, &next, &err), 0);
	assert_int_equal(n, 2);
	assert_string_equal(v[0].sku_id, "AAAA-0001");
	assert_true(v[0].nanos == 2933908000LL);
	assert_string_equal(v[0].usage_unit, "h");
	assert_string_equal(v[0].regions, "us-central1,us-east1");
	assert_false(v[0].preemptible);
	assert_true(v[1].nanos == 6655000LL); /* units absent: 0 */
	assert_true(v[1].preemptible);
	assert_string_equal(next, "tok/2+");
	free(next);
	isc_gcp_skus_free(v, n);
}

/* Each malformed reply names the page, the SKU and what is wrong with it. */
static void test_billing_parse_malformed(void **state)
{
	static const struct {
		const char *body, *want;
	} cases[] = {
	    {"<html>", "page 3: not a JSON object"},
	    {"{\"skus\":{}}", "page 3: \"skus\" is not an array"},
	    {"{\"skus\":[{\"description\":\"x\"}]}", "page 3: SKU #1 has no skuId"},
	    {"{\"skus\":[" SKU("BBBB-0001", "L4", "GPU", "OnDemand", "h", "1.5", "0",
	                       "\"us-east1\"") "]}",
	     "SKU BBBB-0001 (L4): unitPrice.units is not a non-negative integer string"},
	    {"{\"skus\":[" SKU("BBBB-0002", "L4", "GPU", "OnDemand", "h", "0", "1000000000",
	                       "\"us-east1\"") "]}",
	     "SKU BBBB-0002 (L4): unitPrice.nanos is not an integer in [0, 999999999]"},
	    {"{\"skus\":[" SKU("BBBB-0003", "L4", "GPU", "OnDemand", "h", "0", "-5",
	                       "\"us-east1\"") "]}",
	     "unitPrice.nanos is not an integer"},
	    {"{\"skus\":[{\"skuId\":\"BBBB-0004\",\"category\":{\"resourceFamily\":\"Compute\","
	     "\"usageType\":\"OnDemand\"}}]}",
	     "SKU BBBB-0004 (): no pricingInfo[0].pricingExpression"},
	    {"{\"skus\":[{\"skuId\":\"BBBB-0005\",\"category\":{\"resourceFamily\":\"Compute\","
	     "\"usageType\":\"OnDemand\"},\"pricingInfo\":[{\"pricingExpression\":{\"usageUnit\":"
	     "\"h\",\"tieredRates\":[{\"startUsageAmount\":0,\"unitPrice\":{\"currencyCode\":"
	     "\"EUR\",\"units\":\"1\"}}]}}]}]}",
	     "currencyCode is not the currency asked for"},
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct isc_gcp_sku *v = NULL;
		size_t n = 0, cap = 0;
		char *next = NULL;
		struct isc_err err;
		int rc = isc_gcp_billing_parse(cases[i].body, strlen(cases[i].body), 3, "USD", &v,
		                               &n, &cap, &next, &err);
		if (rc != ISC_EINVALID || !strstr(err.msg, cases[i].want))
			fail_msg("case %zu: rc %d, message '%s', want '%s'", i, rc, err.msg,
			         cases[i].want);
		assert_null(next);
		isc_gcp_skus_free(v, n);
	}
}

/* Two pages: the token goes back percent-encoded, the key on every page, never in a message. */
static void test_billing_pages(void **state)
{
	struct isc_http_client http;
	struct isc_gcp_billing_opts o = {.base_url = "http://127.0.0.1:9/v1/",
	                                 .api_key = "AIzaSECRETKEY"};
	struct isc_gcp_sku *v = NULL;
	size_t n = 0;
	struct isc_err err;
	(void)state;
	script_reset();
	isc_http_client_init(&http, &scripted, &fake_clock);
	reply(200, "{\"skus\":[" SKU("CCCC-0001", "L4 GPU", "GPU", "OnDemand", "h", "0",
	                             "560631000", "\"us-east1\"") "],\"nextPageToken\":\"p/2=\"}");
	reply(200, "{\"skus\":[" SKU("CCCC-0002", "L4 GPU", "GPU", "Preemptible", "h", "0",
	                             "224252000", "\"us-east1\"") "],\"nextPageToken\":\"\"}");
	assert_int_equal(isc_gcp_billing_list(&http, &o, &v, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_int_equal(S.calls, 2);
	assert_string_equal(S.url[0], "http://127.0.0.1:9/v1/services/6F81-5844-456A/skus?"
	                              "currencyCode=USD&pageSize=5000&key=AIzaSECRETKEY");
	assert_string_equal(S.url[1], "http://127.0.0.1:9/v1/services/6F81-5844-456A/skus?"
	                              "currencyCode=USD&pageSize=5000&pageToken=p%2F2%3D&"
	                              "key=AIzaSECRETKEY");
	isc_gcp_skus_free(v, n);

	/* A refused key: ISC_EAUTH, Google's message, and neither the key nor the query. */
	script_reset();
	reply(400, "{\"error\":{\"code\":400,\"message\":\"API key not valid. Please pass a valid "
	           "API key.\",\"status\":\"INVALID_ARGUMENT\"}}");
	assert_int_equal(isc_gcp_billing_list(&http, &o, &v, &n, &err), ISC_EAUTH);
	assert_non_null(strstr(err.msg, "API key not valid"));
	assert_null(strstr(err.msg, "AIzaSECRETKEY"));
	assert_null(v);

	/* A second page that is not JSON: the whole list fails (no half a catalog). */
	script_reset();
	reply(200, "{\"skus\":[],\"nextPageToken\":\"x\"}");
	reply(200, "{\"skus\":[");
	assert_int_equal(isc_gcp_billing_list(&http, &o, &v, &n, &err), ISC_EINVALID);
	assert_non_null(strstr(err.msg, "page 2: not a JSON object"));
	assert_null(v);
	assert_int_equal(n, 0);

	/* No key: refused before any request. */
	script_reset();
	o.api_key = "";
	assert_int_equal(isc_gcp_billing_list(&http, &o, &v, &n, &err), ISC_EAUTH);
	assert_int_equal(S.calls, 0);
	script_reset();
}

/* ---- a machine type's price per family ---- */

static struct isc_gcp_sku sku(const char *desc, int spot, const char *unit, int64_t nanos,
                              const char *regions)
{
	struct isc_gcp_sku s;
	memset(&s, 0, sizeof(s));
	snprintf(s.sku_id, sizeof(s.sku_id), "T-%zu", strlen(desc));
	snprintf(s.description, sizeof(s.description), "%s%s", spot ? "Spot Preemptible " : "",
	         desc);
	s.preemptible = spot;
	snprintf(s.usage_unit, sizeof(s.usage_unit), "%s", unit);
	s.nanos = nanos;
	s.regions = strdup(regions);
	return s;
}

static struct isc_shape shape(const char *it, int spot, const char *gpu, int gpus, int vcpus,
                              int64_t mem_mib)
{
	struct isc_shape sh;
	memset(&sh, 0, sizeof(sh));
	sh.id = (char *)it;
	sh.instance_type = (char *)it;
	sh.region = (char *)"us-central1";
	sh.spot = spot;
	sh.gpu_type = (char *)gpu;
	sh.gpus_per_node = gpus;
	sh.vcpus = vcpus;
	sh.mem_mib = mem_mib;
	return sh;
}

static void test_gcp_family_prices(void **state)
{
	const char *am = "us-central1,us-east1";
	struct isc_gcp_sku v[] = {
	    sku("N1 Predefined Instance Core running in Americas", 0, "h", 31611000, am),
	    sku("N1 Predefined Instance Ram running in Americas", 0, "GiBy.h", 4237000, am),
	    sku("Nvidia Tesla T4 GPU running in Americas", 0, "h", 350000000, am),
	    sku("N1 Predefined Instance Core running in Americas", 1, "h", 6655000, am),
	    sku("N1 Predefined Instance Ram running in Americas", 1, "GiBy.h", 892000, am),
	    sku("Nvidia Tesla T4 GPU running in Americas", 1, "h", 140000000, am),
	    sku("A2 Instance Core running in Americas", 0, "h", 31611000, am),
	    sku("A2 Instance Ram running in Americas", 0, "GiBy.h", 4237000, am),
	    sku("Nvidia Tesla A100 GPU running in Americas", 0, "h", 2933908000LL, am),
	    sku("G2 Instance Core running in Americas", 0, "h", 24988000, am),
	    sku("G2 Instance Ram running in Americas", 0, "GiBy.h", 2927000, am),
	    sku("Nvidia L4 GPU running in Americas", 0, "h", 560631000, am),
	    sku("A3 Instance Core running in Americas", 0, "h", 29563000, am),
	    sku("A3 Instance Ram running in Americas", 0, "GiBy.h", 3963000, am),
	    sku("Nvidia H100 80GB GPU running in Americas", 0, "h", 9796550000LL, am),
	    /* A3 Mega's own core SKU only: its RAM must not come from plain A3's */
	    sku("A3 Mega Instance Core running in Americas", 0, "h", 29563000, am),
	    sku("A4 Nvidia B200 (1 gpu slice) running in Americas", 1, "h", 4940000000LL, am),
	    /* another geography's dearer core must not be mixed in */
	    sku("A2 Instance Core running in EMEA", 0, "h", 99000000, "europe-west4"),
	};
	size_t n = sizeof(v) / sizeof(v[0]);
	struct isc_shape sh;
	int64_t p;
	char why[256];
	(void)state;

	/* N1 + T4: 8 x 0.031611 + 30 GiB x 0.004237 + 0.35 = 0.25288800 + 0.1271100 + 0.35 */
	sh = shape("n1-standard-8+T4x1", 0, "T4", 1, 8, 30 * 1024);
	assert_int_equal(isc_gcp_shape_price(&sh, v, n, &p, why, sizeof(why)), 0);
	assert_true(p == 729998); /* 0.729998 */
	/* the same machine on Spot: the Preemptible SKUs */
	sh.spot = 1;
	assert_int_equal(isc_gcp_shape_price(&sh, v, n, &p, why, sizeof(why)), 0);
	assert_true(p == 220000); /* 8 x 0.006655 + 30 x 0.000892 + 0.14 = 0.22 exactly */
	/* A2: 12 vCPUs, 85 GiB, 1 A100 */
	sh = shape("a2-highgpu-1g", 0, "A100", 1, 12, 85 * 1024);
	assert_int_equal(isc_gcp_shape_price(&sh, v, n, &p, why, sizeof(why)), 0);
	assert_true(p == 3673385); /* 0.379332 + 0.360145 + 2.933908 */
	/* G2 with a fractional GiB count: 4 vCPUs, 16 GiB + 512 MiB, 1 L4 */
	sh = shape("g2-standard-4", 0, "L4", 1, 4, 16 * 1024 + 512);
	assert_int_equal(isc_gcp_shape_price(&sh, v, n, &p, why, sizeof(why)), 0);
	/* 0.099952 + 16.5 x 0.002927 (0.0482955) + 0.560631 = 0.7088785 -> 0.708879 */
	assert_true(p == 708879);
	/* A3 High: 208 vCPUs, 1872 GiB, 8 H100 */
	sh = shape("a3-highgpu-8g", 0, "H100", 8, 208, 1872 * 1024);
	assert_int_equal(isc_gcp_shape_price(&sh, v, n, &p, why, sizeof(why)), 0);
	assert_true(p == 6149104 + 7418736 + 78372400);
	/* A4 Spot: 8 slices, nothing else */
	sh = shape("a4-highgpu-8g", 1, "B200", 8, 224, 3968 * 1024);
	assert_int_equal(isc_gcp_shape_price(&sh, v, n, &p, why, sizeof(why)), 0);
	assert_true(p == 39520000);
	/* A missing part: not found, naming it; never priced from another series */
	sh = shape("a3-megagpu-8g", 0, "H100-MEGA", 8, 208, 1872 * 1024);
	assert_int_equal(isc_gcp_shape_price(&sh, v, n, &p, why, sizeof(why)), ISC_ENOTFOUND);
	assert_non_null(strstr(why, "\"A3 Mega Instance Ram\""));
	sh = shape("a2-highgpu-1g", 0, "A100", 1, 12, 85 * 1024);
	sh.region = (char *)"asia-east1";
	assert_int_equal(isc_gcp_shape_price(&sh, v, n, &p, why, sizeof(why)), ISC_ENOTFOUND);
	assert_non_null(strstr(why, "for asia-east1"));
	/* on-demand A4 has no slice SKU here */
	sh = shape("a4-highgpu-8g", 0, "B200", 8, 224, 3968 * 1024);
	assert_int_equal(isc_gcp_shape_price(&sh, v, n, &p, why, sizeof(why)), ISC_ENOTFOUND);
	/* a GPU SKU in the wrong unit is refused, not multiplied */
	snprintf(v[2].usage_unit, sizeof(v[2].usage_unit), "GiBy.h");
	sh = shape("n1-standard-8+T4x1", 0, "T4", 1, 8, 30 * 1024);
	assert_int_equal(isc_gcp_shape_price(&sh, v, n, &p, why, sizeof(why)), ISC_EINVALID);
	assert_non_null(strstr(why, "per 'GiBy.h', not per 'h'"));
	for (size_t i = 0; i < n; i++)
		free(v[i].regions);
}

/* ---- OCI's price list ---- */

#define OCI_ITEM(part, name, metric, cat, value)                                                   \
	"{\"partNumber\":\"" part "\",\"displayName\":\"" name "\",\"metricName\":\"" metric       \
	"\",\"serviceCategory\":\"" cat "\",\"currencyCodeLocalizations\":[{\"currencyCode\":"     \
	"\"USD\",\"prices\":[{\"model\":\"PAY_AS_YOU_GO\",\"value\":" value "}]}]}"

static void test_oci_list(void **state)
{
	struct isc_http_client http;
	struct isc_oci_product *v = NULL;
	size_t n = 0, cap = 0;
	int more;
	struct isc_err err;
	(void)state;

	/* Dollars as JSON numbers, exact to the micro-dollar; an item without a PAYG price
	 * skipped; ORDS paging by offset. */
	script_reset();
	isc_http_client_init(&http, &scripted, &fake_clock);
	reply(200, "{\"items\":[" OCI_ITEM(
	               "B98415", "Compute - GPU - H100", "GPU Per Hour", "Compute - GPU",
	               "10.0") ","
	                       "{\"partNumber\":\"B0FREE\",\"displayName\":\"Free\","
	                       "\"currencyCodeLocalizations\":[]}],\"hasMore\":true}");
	reply(200, "{\"items\":[" OCI_ITEM("B9M011", "Compute - GPU Standard - X7 - P100",
	                                   "GPU Per Hour", "Compute - GPU",
	                                   "1.275") "],"
	                                            "\"hasMore\":false}");
	assert_int_equal(
	    isc_oci_price_list_fetch(&http, "http://127.0.0.1:9/products/", &v, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_true(v[0].price_micros == 10000000);
	assert_true(v[1].price_micros == 1275000);
	assert_string_equal(S.url[0], "http://127.0.0.1:9/products/?currencyCode=USD");
	assert_string_equal(S.url[1], "http://127.0.0.1:9/products/?currencyCode=USD&offset=2");
	free(v);
	v = NULL;

	/* malformed replies, named */
	n = 0;
	assert_int_equal(isc_oci_price_list_parse("[]", 2, 1, "USD", &v, &n, &cap, &more, &err),
	                 ISC_EINVALID);
	assert_non_null(strstr(err.msg, "OCI price list reply 1: not a JSON object"));
	assert_int_equal(isc_oci_price_list_parse("{}", 2, 2, "USD", &v, &n, &cap, &more, &err),
	                 ISC_EINVALID);
	assert_non_null(strstr(err.msg, "reply 2: no \"items\" array"));
	{
		const char *bad =
		    "{\"items\":[" OCI_ITEM("B9BAD", "Compute - GPU - A10", "GPU Per Hour",
		                            "Compute - GPU", "\"2.00\"") "]}";
		assert_int_equal(
		    isc_oci_price_list_parse(bad, strlen(bad), 1, "USD", &v, &n, &cap, &more, &err),
		    ISC_EINVALID);
		assert_non_null(strstr(err.msg, "part B9BAD: its PAY_AS_YOU_GO value is not a "
		                                "non-negative number"));
	}
	free(v);
	script_reset();
}

static struct isc_oci_product product(const char *part, const char *name, const char *metric,
                                      const char *cat, int64_t micros)
{
	struct isc_oci_product p;
	memset(&p, 0, sizeof(p));
	snprintf(p.part_number, sizeof(p.part_number), "%s", part);
	snprintf(p.display_name, sizeof(p.display_name), "%s", name);
	snprintf(p.metric_name, sizeof(p.metric_name), "%s", metric);
	snprintf(p.service_category, sizeof(p.service_category), "%s", cat);
	p.price_micros = micros;
	return p;
}

static void test_oci_shape_prices(void **state)
{
	struct isc_oci_product v[] = {
	    product("B98415", "Compute - GPU - H100", "GPU Per Hour", "Compute - GPU", 10000000),
	    /* a licence billed per GPU-hour on top: never the H100's price */
	    product("B9M014", "OCI - NVIDIA AI Enterprise - H100", "GPU Per Hour",
	            "Compute - GPU - Other", 12500000),
	    product("B9M012", "Compute - GPU Standard - X7 - V100", "GPU Per Hour", "Compute - GPU",
	            2950000),
	    product("B9M013", "Compute - GPU - A100", "GPU Per Hour", "Compute - GPU", 3050000),
	    /* A100-v2 must not be taken for A100 nor the reverse */
	    product("B9M002", "Compute - GPU - A100-v2", "GPU Per Hour", "Compute - GPU", 4000000),
	    product("B9M001", "Compute - GPU - A10", "Node Per Hour", "Compute - GPU", 2000000),
	};
	size_t n = sizeof(v) / sizeof(v[0]);
	struct isc_shape sh;
	int64_t p;
	char part[24], why[256];
	(void)state;

	sh = shape("BM.GPU.H100.8", 0, "H100", 8, 224, 2048 * 1024);
	assert_int_equal(isc_oci_shape_price(&sh, v, n, &p, part, why, sizeof(why)), 0);
	assert_true(p == 80000000); /* 8 GPUs x 10.00 */
	assert_string_equal(part, "B98415");
	sh = shape("VM.GPU3.2", 1, "V100", 2, 12, 180 * 1024);
	assert_int_equal(isc_oci_shape_price(&sh, v, n, &p, part, why, sizeof(why)), 0);
	assert_true(p == 2950000); /* preemptible: half of 2 x 2.95 */
	sh = shape("VM.GPU3.1", 1, "V100", 1, 6, 90 * 1024);
	v[2].price_micros = 2950001; /* an odd micro-dollar: half rounds up */
	assert_int_equal(isc_oci_shape_price(&sh, v, n, &p, part, why, sizeof(why)), 0);
	assert_true(p == 1475001);
	sh = shape("BM.GPU4.8", 0, "A100", 8, 128, 2048 * 1024);
	assert_int_equal(isc_oci_shape_price(&sh, v, n, &p, part, why, sizeof(why)), 0);
	assert_true(p == 24400000);
	assert_string_equal(part, "B9M013");
	sh = shape("BM.GPU.A100-v2.8", 0, "A100-80GB", 8, 256, 2048 * 1024);
	assert_int_equal(isc_oci_shape_price(&sh, v, n, &p, part, why, sizeof(why)), 0);
	assert_true(p == 32000000);
	/* no preemptible bare metal */
	sh = shape("BM.GPU.H100.8", 1, "H100", 8, 224, 2048 * 1024);
	assert_int_equal(isc_oci_shape_price(&sh, v, n, &p, part, why, sizeof(why)), ISC_EINVALID);
	/* a product in another metric is refused, not multiplied */
	sh = shape("VM.GPU.A10.1", 0, "A10", 1, 15, 240 * 1024);
	assert_int_equal(isc_oci_shape_price(&sh, v, n, &p, part, why, sizeof(why)), ISC_EINVALID);
	assert_non_null(strstr(why, "per 'Node Per Hour', not per GPU hour"));
	/* none in the list: not found */
	sh = shape("BM.GPU.L40S.4", 0, "L40S", 4, 112, 1024 * 1024);
	assert_int_equal(isc_oci_shape_price(&sh, v, n, &p, part, why, sizeof(why)), ISC_ENOTFOUND);
	assert_non_null(strstr(why, "'... L40S'"));
}

/* ---- AWS Price List GetProducts ---- */

static void test_aws_get_products(void **state)
{
	struct isc_price_point *v = NULL;
	size_t n = 0, cap = 0;
	char *next = NULL;
	struct isc_err err;
	struct isc_buf b;
	int64_t m;
	/* two products of p5.48xlarge (the dearer wins), one of g5.xlarge, each a JSON string */
	const char *reply =
	    "{\"FormatVersion\":\"aws_v1\",\"PriceList\":["
	    "\"{\\\"product\\\":{\\\"sku\\\":\\\"S1\\\",\\\"attributes\\\":{"
	    "\\\"instanceType\\\":\\\"p5.48xlarge\\\"}},\\\"terms\\\":{\\\"OnDemand"
	    "\\\":{\\\"S1.T\\\":{\\\"priceDimensions\\\":{\\\"S1.T.R\\\":{\\\"unit"
	    "\\\":\\\"Hrs\\\",\\\"pricePerUnit\\\":{\\\"USD\\\":\\\"98.3200000000"
	    "\\\"}}}}}}}\","
	    "\"{\\\"product\\\":{\\\"sku\\\":\\\"S2\\\",\\\"attributes\\\":{"
	    "\\\"instanceType\\\":\\\"p5.48xlarge\\\"}},\\\"terms\\\":{\\\"OnDemand"
	    "\\\":{\\\"S2.T\\\":{\\\"priceDimensions\\\":{\\\"S2.T.R\\\":{\\\"unit"
	    "\\\":\\\"Hrs\\\",\\\"pricePerUnit\\\":{\\\"USD\\\":\\\"98.3200005\\\""
	    "}}}}}}}\","
	    "\"{\\\"product\\\":{\\\"sku\\\":\\\"S3\\\",\\\"attributes\\\":{"
	    "\\\"instanceType\\\":\\\"g5.xlarge\\\"}},\\\"terms\\\":{\\\"OnDemand"
	    "\\\":{\\\"S3.T\\\":{\\\"priceDimensions\\\":{\\\"S3.T.R\\\":{\\\"unit"
	    "\\\":\\\"Hrs\\\",\\\"pricePerUnit\\\":{\\\"USD\\\":\\\"1.006\\\"}}}}}}}\""
	    "],\"NextToken\":\"abc\"}";
	(void)state;
	assert_int_equal(isc_aws_pricing_parse(reply, strlen(reply), 1, &v, &n, &cap, &next, &err),
	                 0);
	assert_int_equal(n, 2);
	assert_string_equal(v[0].instance_type, "p5.48xlarge");
	assert_true(v[0].price_micros_per_hour == 98320001); /* 98.3200005 rounds half up */
	assert_string_equal(v[1].instance_type, "g5.xlarge");
	assert_true(v[1].price_micros_per_hour == 1006000);
	assert_string_equal(next, "abc");
	free(next);
	free(v);
	v = NULL;
	n = cap = 0;

	/* exact decimals */
	assert_int_equal(isc_aws_pricing_decimal("3.0600000000", &m), 0);
	assert_true(m == 3060000);
	assert_int_equal(isc_aws_pricing_decimal("8", &m), 0);
	assert_true(m == 8000000);
	assert_int_equal(isc_aws_pricing_decimal("0.0000004", &m), 0);
	assert_true(m == 0);
	assert_int_equal(isc_aws_pricing_decimal("1e3", &m), -1);
	assert_int_equal(isc_aws_pricing_decimal("-1", &m), -1);

	/* malformed: named */
	{
		const char *bad1 = "{\"PriceList\":[{\"product\":{}}]}";
		const char *bad2 = "{\"PriceList\":[\"{\\\"product\\\":{\\\"sku\\\":"
		                   "\\\"S9\\\",\\\"attributes\\\":{\\\"instanceType\\\":"
		                   "\\\"g5.xlarge\\\"}},\\\"terms\\\":{}}\"]}";
		assert_int_equal(
		    isc_aws_pricing_parse(bad1, strlen(bad1), 2, &v, &n, &cap, &next, &err),
		    ISC_EINVALID);
		assert_non_null(strstr(err.msg, "GetProducts reply 2: PriceList[0] is not a string "
		                                "of JSON"));
		assert_int_equal(
		    isc_aws_pricing_parse(bad2, strlen(bad2), 3, &v, &n, &cap, &next, &err),
		    ISC_EINVALID);
		assert_non_null(
		    strstr(err.msg, "GetProducts reply 3: product S9: no terms.OnDemand"));
		assert_int_equal(isc_aws_pricing_parse("{}", 2, 4, &v, &n, &cap, &next, &err),
		                 ISC_EINVALID);
		assert_non_null(strstr(err.msg, "no PriceList array"));
	}
	free(v);

	/* the request: the six filters, and the token when paging */
	isc_buf_init(&b, 0);
	assert_int_equal(isc_aws_pricing_request(&b, "g5.xlarge", "us-west-2", "tok"), 0);
	assert_int_equal(isc_buf_putc(&b, '\0'), 0);
	assert_non_null(strstr(b.data, "\"ServiceCode\":\"AmazonEC2\""));
	assert_non_null(strstr(b.data, "{\"Type\":\"TERM_MATCH\",\"Field\":\"instanceType\","
	                               "\"Value\":\"g5.xlarge\"}"));
	assert_non_null(strstr(b.data, "\"Field\":\"regionCode\",\"Value\":\"us-west-2\""));
	assert_non_null(strstr(b.data, "\"Field\":\"operatingSystem\",\"Value\":\"Linux\""));
	assert_non_null(strstr(b.data, "\"Field\":\"tenancy\",\"Value\":\"Shared\""));
	assert_non_null(strstr(b.data, "\"Field\":\"preInstalledSw\",\"Value\":\"NA\""));
	assert_non_null(strstr(b.data, "\"Field\":\"capacitystatus\",\"Value\":\"Used\""));
	assert_non_null(strstr(b.data, "\"NextToken\":\"tok\""));
	isc_buf_cleanup(&b);
}

/* ---- the store: a batch with its source; a failure keeps prices and their age ---- */

static void test_store_batch_and_failure(void **state)
{
	struct store_fixture tmp;
	struct isc_shape a = {0}, got;
	struct isc_shapes_apply_result ar;
	struct isc_shape_price_update u[1];
	struct isc_price_refresh_row *rows;
	size_t changed, nr;
	struct isc_err err;
	(void)state;
	store_fixture_init(&tmp, "prices-live");
	a.id = "gcp-us-central1-g2-standard-4-ondemand";
	a.display_id = a.id;
	a.provider = "gcp";
	a.region = "us-central1";
	a.instance_type = "g2-standard-4";
	a.gpu_type = "L4";
	a.gpus_per_node = 1;
	a.vcpus = 4;
	a.mem_mib = 16384;
	a.price_micros = 700000;
	a.zones = "";
	a.price_date = "2026-05-20";
	assert_int_equal(isc_store_shapes_apply(tmp.s, "gcp", &a, 1, 0, &ar, &err), 0);
	u[0].shape_id = a.id;
	u[0].price_micros = 711000;
	assert_int_equal(isc_store_shape_prices_set(tmp.s, "gcp-billing-catalog", u, 1,
	                                            1800000000000LL, &changed, &err),
	                 0);
	assert_int_equal(changed, 1);
	assert_int_equal(isc_store_shape_get(tmp.s, a.id, &got, &err), 0);
	assert_true(got.price_micros == 711000);
	assert_string_equal(got.price_source, "gcp-billing-catalog");
	assert_true(got.price_checked_ms == 1800000000000LL);
	isc_shape_cleanup(&got);
	/* the same price again: written (fresher), not moved */
	assert_int_equal(isc_store_shape_prices_set(tmp.s, "gcp-billing-catalog", u, 1,
	                                            1800000060000LL, &changed, &err),
	                 0);
	assert_int_equal(changed, 0);
	/* a failed refresh: the price and its time stay, the failure is noted */
	assert_int_equal(isc_store_price_refresh_failed(tmp.s, "gcp-billing-catalog",
	                                                1800000120000LL, "HTTP 503", &err),
	                 0);
	assert_int_equal(isc_store_shape_get(tmp.s, a.id, &got, &err), 0);
	assert_true(got.price_micros == 711000);
	assert_true(got.price_checked_ms == 1800000060000LL);
	isc_shape_cleanup(&got);
	assert_int_equal(isc_store_price_refresh_list(tmp.s, &rows, &nr, &err), 0);
	assert_int_equal(nr, 1);
	assert_string_equal(rows[0].source, "gcp-billing-catalog");
	assert_true(rows[0].tried_at_ms == 1800000120000LL);
	assert_true(rows[0].ok_at_ms == 1800000060000LL);
	assert_true(rows[0].shapes == 1);
	assert_string_equal(rows[0].error, "HTTP 503");
	isc_price_refresh_rows_free(rows, nr);
	/* an unknown shape fails the batch: nothing written */
	u[0].shape_id = "gcp-nowhere-x-ondemand";
	assert_int_equal(isc_store_shape_prices_set(tmp.s, "gcp-billing-catalog", u, 1,
	                                            1800000180000LL, &changed, &err),
	                 ISC_ENOTFOUND);
	assert_int_equal(isc_store_price_refresh_list(tmp.s, &rows, &nr, &err), 0);
	assert_string_equal(rows[0].error, "HTTP 503");
	isc_price_refresh_rows_free(rows, nr);
	store_fixture_cleanup(&tmp);
}

/* Migration 25: a price read from the spot history before it ('live') names its API. */
static void test_migration_25(void **state)
{
	struct store_fixture old = {0};
	struct isc_shape a = {0}, got;
	struct isc_shapes_apply_result ar;
	struct isc_price_refresh_row *rows = NULL;
	struct isc_store *again = NULL;
	struct isc_err err;
	size_t nr = 9;
	(void)state;
	/* the schema just before this step (migration 25): later steps run on top, as on an
	 * upgrade from any older version */
	store_fixture_init_at(&old, "prices-migrate", 24);
	a.id = "aws-us-east-1-g5.xlarge-spot";
	a.display_id = a.id;
	a.provider = "aws";
	a.region = "us-east-1";
	a.instance_type = "g5.xlarge";
	a.spot = 1;
	a.gpu_type = "A10G";
	a.gpus_per_node = 1;
	a.price_micros = 400000;
	a.zones = "";
	a.price_date = "2026-11-01";
	assert_int_equal(isc_store_shapes_apply(old.s, "aws", &a, 1, 0, &ar, &err), 0);
	assert_int_equal(
	    isc_db_exec(isc_store_db(old.s),
	                "UPDATE shapes SET price_source = 'live', price_checked_ms = 5"),
	    ISC_DB_OK);
	if (isc_store_open(old.home, 0, &again, &err))
		fail_msg("migrating: %s", err.msg);
	isc_store_free(old.s);
	old.s = again;
	assert_int_equal(isc_store_shape_get(old.s, a.id, &got, &err), 0);
	assert_string_equal(got.price_source, "aws-spot-history");
	assert_true(got.price_checked_ms == 5);
	isc_shape_cleanup(&got);
	assert_int_equal(isc_store_price_refresh_list(old.s, &rows, &nr, &err), 0);
	assert_int_equal(nr, 0);
	isc_price_refresh_rows_free(rows, nr);
	store_fixture_cleanup(&old);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_billing_parse_money),
	    cmocka_unit_test(test_billing_parse_malformed),
	    cmocka_unit_test(test_billing_pages),
	    cmocka_unit_test(test_gcp_family_prices),
	    cmocka_unit_test(test_oci_list),
	    cmocka_unit_test(test_oci_shape_prices),
	    cmocka_unit_test(test_aws_get_products),
	    cmocka_unit_test(test_store_batch_and_failure),
	    cmocka_unit_test(test_migration_25),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
