/*
 * EC2/STS reply parsing on real samples (tests/vectors/aws-ec2, see its
 * SOURCES.md): every field the driver reads is compared with botocore's parse
 * of the same XML (.json / .expected.json). Also the hostile-input cases:
 * external entities are not loaded, oversized replies are refused.
 */
#include "providers/aws/ec2.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define V "tests/vectors/aws-ec2/"

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static json_t *load_json(const char *path)
{
	json_error_t e;
	json_t *j = json_load_file(path, 0, &e);
	if (!j)
		fail_msg("%s: %s", path, e.text);
	return j;
}

static const char *jstr(json_t *o, const char *path)
{
	char seg[64];
	while (o && *path) {
		size_t l = strcspn(path, ".");
		memcpy(seg, path, l);
		seg[l] = '\0';
		o = json_object_get(o, seg);
		path += l + (path[l] == '.');
	}
	return o && json_is_string(o) ? json_string_value(o) : "";
}

static long long jint(json_t *o, const char *a, const char *b)
{
	return json_integer_value(json_object_get(json_object_get(o, a), b));
}

/* The ISO time the parser saw, printed back from ms, must be the expected string's prefix. */
static void assert_time(int64_t ms, const char *iso)
{
	char back[32];
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(back, sizeof(back), "%Y-%m-%dT%H:%M:%S", &tm);
	assert_memory_equal(back, iso, strlen(back));
}

static const int state_codes[] = {0, 16, 32, 48, 64, 80};

static void check_instances(const char *xml_path, const char *json_path, int run_instances)
{
	size_t len, n, k = 0;
	char *xml = slurp(xml_path, &len), *next = (char *)1;
	json_t *want = load_json(json_path), *res;
	struct isc_node_info *ni;
	struct isc_err err;
	size_t ri;

	assert_int_equal(isc_ec2_parse_instances(xml, len, &ni, &n, &next, &err), 0);
	assert_null(next);
	res = run_instances ? json_pack("[{s:O}]", "Instances", json_object_get(want, "Instances"))
	                    : json_incref(json_object_get(want, "Reservations"));
	for (ri = 0; ri < json_array_size(res); ri++) {
		json_t *insts = json_object_get(json_array_get(res, ri), "Instances");
		for (size_t ii = 0; ii < json_array_size(insts); ii++, k++) {
			json_t *w = json_array_get(insts, ii);
			assert_true(k < n);
			assert_string_equal(ni[k].id, jstr(w, "InstanceId"));
			assert_int_equal(state_codes[ni[k].state], jint(w, "State", "Code") & 0xFF);
			assert_string_equal(isc_node_state_name(ni[k].state),
			                    jstr(w, "State.Name"));
			assert_string_equal(ni[k].private_ip, jstr(w, "PrivateIpAddress"));
			assert_string_equal(ni[k].public_ip, jstr(w, "PublicIpAddress"));
			assert_string_equal(ni[k].zone, jstr(w, "Placement.AvailabilityZone"));
			assert_string_equal(ni[k].instance_type, jstr(w, "InstanceType"));
			assert_string_equal(ni[k].client_token, jstr(w, "ClientToken"));
			assert_int_equal(ni[k].spot,
			                 strcmp(jstr(w, "InstanceLifecycle"), "spot") == 0);
			assert_time(ni[k].launched_at_ms, jstr(w, "LaunchTime"));
			assert_int_equal(ni[k].interruption_noticed, 0);
		}
	}
	assert_int_equal(k, n);
	json_decref(res);
	json_decref(want);
	free(ni);
	free(xml);
}

static void test_describe_instances_doc_example(void **state)
{
	(void)state;
	check_instances(V "transcribed/DescribeInstancesResponse-2016-11-15.xml",
	                V "transcribed/DescribeInstancesResponse-2016-11-15.expected.json", 0);
}

static void test_describe_instances_botocore(void **state)
{
	(void)state;
	check_instances(V "botocore-response-parsing/responses/ec2-describe-instances.xml",
	                V "botocore-response-parsing/responses/ec2-describe-instances.json", 0);
}

static void test_run_instances(void **state)
{
	(void)state;
	check_instances(V "botocore-response-parsing/responses/ec2-run-instances.xml",
	                V "botocore-response-parsing/responses/ec2-run-instances.json", 1);
}

static void check_state_changes(const char *xml_path, const char *json_path, const char *key)
{
	size_t len, n;
	char *xml = slurp(xml_path, &len);
	json_t *want = load_json(json_path), *arr = json_object_get(want, key);
	struct isc_ec2_state_change *sc;
	struct isc_err err;

	assert_int_equal(isc_ec2_parse_state_changes(xml, len, &sc, &n, &err), 0);
	assert_int_equal(n, json_array_size(arr));
	for (size_t i = 0; i < n; i++) {
		json_t *w = json_array_get(arr, i);
		assert_string_equal(sc[i].instance_id, jstr(w, "InstanceId"));
		assert_int_equal(state_codes[sc[i].current], jint(w, "CurrentState", "Code"));
		assert_int_equal(state_codes[sc[i].previous], jint(w, "PreviousState", "Code"));
	}
	free(sc);
	json_decref(want);
	free(xml);
}

static void test_terminate_and_stop(void **state)
{
	(void)state;
	check_state_changes(V "transcribed/TerminateInstancesResponse.xml",
	                    V "transcribed/TerminateInstancesResponse.expected.json",
	                    "TerminatingInstances");
	check_state_changes(V "botocore-response-parsing/responses/ec2-stop-instances.xml",
	                    V "botocore-response-parsing/responses/ec2-stop-instances.json",
	                    "StoppingInstances");
}

/* "0.010000" and 10000 micros mean the same when both print as the same decimal. */
static void assert_price(int64_t micros, const char *dec)
{
	char mine[40], theirs[40];
	size_t l;
	snprintf(mine, sizeof(mine), "%lld.%06lld", (long long)(micros / 1000000),
	         (long long)(micros % 1000000));
	snprintf(theirs, sizeof(theirs), "%s%s", dec, strchr(dec, '.') ? "000000" : ".000000");
	l = strlen(mine);
	assert_memory_equal(mine, theirs, l);
	for (const char *p = theirs + l; *p; p++)
		assert_int_equal(*p, '0');
}

static void test_spot_price_history(void **state)
{
	size_t len, n;
	char *xml = slurp(
	    V "botocore-response-parsing/responses/ec2-describe-spot-price-history.xml", &len);
	json_t *want =
	    load_json(V "botocore-response-parsing/responses/ec2-describe-spot-price-history.json");
	json_t *arr = json_object_get(want, "SpotPriceHistory");
	struct isc_ec2_spot_price *sp;
	struct isc_err err;
	char *next = NULL;
	(void)state;

	assert_int_equal(isc_ec2_parse_spot_prices(xml, len, &sp, &n, &next, &err), 0);
	assert_int_equal(n, json_array_size(arr));
	assert_int_equal(n, 1000);
	assert_string_equal(next, jstr(want, "NextToken"));
	for (size_t i = 0; i < n; i++) {
		json_t *w = json_array_get(arr, i);
		assert_string_equal(sp[i].instance_type, jstr(w, "InstanceType"));
		assert_string_equal(sp[i].product, jstr(w, "ProductDescription"));
		assert_string_equal(sp[i].zone, jstr(w, "AvailabilityZone"));
		assert_price(sp[i].price_micros, jstr(w, "SpotPrice"));
		assert_time(sp[i].at_ms, jstr(w, "Timestamp"));
	}
	free(next);
	free(sp);
	json_decref(want);
	free(xml);
}

static void test_spot_requests(void **state)
{
	size_t len, n;
	char *xml = slurp(
	    V "botocore-response-parsing/responses/ec2-describe-spot-instance-requests.xml", &len);
	json_t *want = load_json(
	    V "botocore-response-parsing/responses/ec2-describe-spot-instance-requests.json");
	json_t *arr = json_object_get(want, "SpotInstanceRequests");
	struct isc_ec2_spot_request *sr;
	struct isc_err err;
	char *next = NULL;
	(void)state;

	assert_int_equal(isc_ec2_parse_spot_requests(xml, len, &sr, &n, &next, &err), 0);
	assert_int_equal(n, json_array_size(arr));
	for (size_t i = 0; i < n; i++) {
		json_t *w = json_array_get(arr, i);
		assert_string_equal(sr[i].id, jstr(w, "SpotInstanceRequestId"));
		assert_string_equal(sr[i].instance_id, jstr(w, "InstanceId"));
		assert_string_equal(sr[i].state, jstr(w, "State"));
		assert_string_equal(sr[i].status_code, jstr(w, "Status.Code"));
		assert_string_equal(sr[i].zone, jstr(w, "LaunchedAvailabilityZone"));
		/* The sample's UpdateTime is the placeholder "YYYY-MM-DD...": unreadable, so 0. */
		assert_int_equal(sr[i].status_update_ms, 0);
	}
	assert_null(next);
	free(sr);
	json_decref(want);
	free(xml);
}

static void check_error(const char *xml_path, const char *json_path, int want_code)
{
	size_t len;
	char *xml = slurp(xml_path, &len);
	json_t *want = load_json(json_path);
	struct isc_ec2_error e;

	assert_int_equal(isc_ec2_parse_error(xml, len, &e), 0);
	assert_string_equal(e.code, jstr(want, "Error.Code"));
	assert_string_equal(e.message, jstr(want, "Error.Message"));
	assert_string_equal(e.request_id, jstr(want, "ResponseMetadata.RequestId"));
	assert_int_equal(isc_ec2_classify_code(e.code, 500), want_code);
	json_decref(want);
	free(xml);
}

static void test_errors(void **state)
{
	(void)state;
	check_error(V "transcribed/Error-InsufficientInstanceCapacity.xml",
	            V "transcribed/Error-InsufficientInstanceCapacity.expected.json",
	            ISC_ECAPACITY);
	check_error(V "botocore-response-parsing/errors/ec2-describe-instances.xml",
	            V "botocore-response-parsing/errors/ec2-describe-instances.json",
	            ISC_ETRANSIENT);
	/* Error-UnsupportedOperation: a 4xx code we do not know is invalid, not retried. */
	{
		size_t len;
		char *xml = slurp(V "transcribed/Error-UnsupportedOperation.xml", &len);
		struct isc_ec2_error e;
		assert_int_equal(isc_ec2_parse_error(xml, len, &e), 0);
		assert_int_equal(isc_ec2_classify_code(e.code, 400), ISC_EINVALID);
		free(xml);
	}
	/* A success document is not an error. */
	{
		size_t len;
		char *xml =
		    slurp(V "botocore-response-parsing/responses/ec2-run-instances.xml", &len);
		struct isc_ec2_error e;
		assert_int_equal(isc_ec2_parse_error(xml, len, &e), ISC_ENOTFOUND);
		free(xml);
	}
}

static void test_classification_table(void **state)
{
	static const struct {
		const char *code;
		int want;
	} t[] = {
	    {"RequestLimitExceeded", ISC_ETHROTTLED},
	    {"Throttling", ISC_ETHROTTLED},
	    {"InternalError", ISC_ETRANSIENT},
	    {"Unavailable", ISC_ETRANSIENT},
	    {"InsufficientInstanceCapacity", ISC_ECAPACITY},
	    {"InsufficientCapacity", ISC_ECAPACITY},
	    {"Unsupported", ISC_ECAPACITY},
	    {"UnfulfillableCapacity", ISC_ECAPACITY},
	    {"SpotMaxPriceTooLow", ISC_ECAPACITY},
	    {"InstanceLimitExceeded", ISC_EQUOTA},
	    {"VcpuLimitExceeded", ISC_EQUOTA},
	    {"MaxSpotInstanceCountExceeded", ISC_EQUOTA},
	    {"AuthFailure", ISC_EAUTH},
	    {"UnauthorizedOperation", ISC_EAUTH},
	    {"SignatureDoesNotMatch", ISC_EAUTH},
	    {"InvalidClientTokenId", ISC_EAUTH},
	    {"ExpiredToken", ISC_EAUTH},
	    {"IdempotentParameterMismatch", ISC_ECONFLICT},
	    {"InvalidInstanceID.NotFound", ISC_ENOTFOUND},
	    {"InvalidParameterValue", ISC_EINVALID},
	};
	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		assert_int_equal(isc_ec2_classify_code(t[i].code, 400), t[i].want);
	assert_int_equal(isc_ec2_classify_code(NULL, 503), ISC_ETRANSIENT);
	assert_int_equal(isc_ec2_classify_code(NULL, 429), ISC_ETHROTTLED);
}

static void test_sts_identity(void **state)
{
	static const char xml[] =
	    "<GetCallerIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">"
	    "<GetCallerIdentityResult><Arn>arn:aws:iam::123456789012:user/Alice</Arn>"
	    "<UserId>AIDAEXAMPLE</UserId><Account>123456789012</Account></GetCallerIdentityResult>"
	    "<ResponseMetadata><RequestId>01234567-89ab</RequestId></ResponseMetadata>"
	    "</GetCallerIdentityResponse>";
	static const char sts_err[] =
	    "<ErrorResponse "
	    "xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><Error><Type>Sender</Type>"
	    "<Code>InvalidClientTokenId</Code><Message>The security token included in the request "
	    "is "
	    "invalid.</Message></Error><RequestId>abc</RequestId></ErrorResponse>";
	struct isc_identity id;
	struct isc_ec2_error e;
	struct isc_err err;
	(void)state;
	assert_int_equal(isc_sts_parse_identity(xml, sizeof(xml) - 1, &id, &err), 0);
	assert_string_equal(id.account, "123456789012");
	assert_string_equal(id.principal, "arn:aws:iam::123456789012:user/Alice");
	assert_string_equal(id.user_id, "AIDAEXAMPLE");
	assert_int_equal(isc_ec2_parse_error(sts_err, sizeof(sts_err) - 1, &e), 0);
	assert_string_equal(e.code, "InvalidClientTokenId");
	assert_string_equal(e.request_id, "abc");
}

static void test_hostile_xml(void **state)
{
	/* An external entity must be neither fetched nor expanded into a field. */
	static const char xxe[] =
	    "<?xml version=\"1.0\"?><!DOCTYPE r [<!ENTITY x SYSTEM \"file:///etc/passwd\">]>"
	    "<DescribeInstancesResponse><reservationSet><item><instancesSet><item>"
	    "<instanceId>i-1&x;</instanceId><instanceState><code>16</code><name>running</name>"
	    "</instanceState></item></instancesSet></item></reservationSet></"
	    "DescribeInstancesResponse>";
	struct isc_node_info *ni = NULL;
	size_t n = 0;
	struct isc_err err;
	char *big;
	(void)state;
	if (isc_ec2_parse_instances(xxe, sizeof(xxe) - 1, &ni, &n, NULL, &err) == 0) {
		assert_int_equal(n, 1);
		assert_null(strstr(ni[0].id, "root"));
		free(ni);
	}
	big = calloc(1, ISC_EC2_MAX_XML + 2);
	memset(big, ' ', ISC_EC2_MAX_XML + 1);
	assert_int_equal(isc_ec2_parse_instances(big, ISC_EC2_MAX_XML + 1, &ni, &n, NULL, &err),
	                 ISC_EINVALID);
	free(big);
	assert_int_equal(isc_ec2_parse_instances("not xml", 7, &ni, &n, NULL, &err), ISC_EINVALID);
}

static void test_values(void **state)
{
	int64_t v;
	(void)state;
	assert_int_equal(isc_aws_price_micros("0.010000", &v), 0);
	assert_int_equal(v, 10000);
	assert_int_equal(isc_aws_price_micros("32.7726", &v), 0);
	assert_int_equal(v, 32772600);
	assert_int_equal(isc_aws_price_micros("1.0000001", &v), 0);
	assert_int_equal(v, 1000001); /* rounded up, never under */
	assert_int_equal(isc_aws_price_micros("3", &v), 0);
	assert_int_equal(v, 3000000);
	assert_int_equal(isc_aws_price_micros("-1", &v), ISC_EINVALID);
	assert_int_equal(isc_aws_price_micros("1e3", &v), ISC_EINVALID);
	assert_int_equal(isc_aws_parse_time_ms("2015-12-22T10:44:05.250Z", &v), 0);
	assert_int_equal(v, 1450781045250LL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_describe_instances_doc_example),
	    cmocka_unit_test(test_describe_instances_botocore),
	    cmocka_unit_test(test_run_instances),
	    cmocka_unit_test(test_terminate_and_stop),
	    cmocka_unit_test(test_spot_price_history),
	    cmocka_unit_test(test_spot_requests),
	    cmocka_unit_test(test_errors),
	    cmocka_unit_test(test_classification_table),
	    cmocka_unit_test(test_sts_identity),
	    cmocka_unit_test(test_hostile_xml),
	    cmocka_unit_test(test_values),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
