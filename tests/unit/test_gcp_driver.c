/*
 * The GCP driver: the service-account JWT against Google's published vector
 * and verified with OpenSSL against the public key, the names and labels it
 * derives, Compute Engine JSON from real recorded replies
 * (tests/vectors/gcp), and the provider table over a scripted transport
 * (token exchange, bulkInsert, Operation polling, zone failover, quota,
 * 401 refresh, refused keys, describe with preemption, terminate).
 *
 * test_mock_* run only when MOCKCLOUD_URL and MOCKCLOUD_GCP_KEY point at
 * tests/mocks/mockcloud (tests/integration/gcp-mock.sh starts it).
 */
#include "providers/gcp/gcp_int.h"
#include "providers/provider.h"
#include "providers/sweep.h"
#include "tests/unit/driver_script.h"
#include "tests/unit/mock_control.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define VEC "tests/vectors/gcp/"
/* A string literal and its length. */
#define LIT(s) s, sizeof(s) - 1

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
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	if (len)
		*len = (size_t)n;
	return buf;
}

static void load_fake_key(struct isc_gcp_key *k)
{
	size_t n;
	char *txt = slurp(VEC "service-account/service_account.modern-layout.FAKE.json", &n);
	struct isc_err err;
	assert_int_equal(isc_gcp_key_parse(txt, n, "fake", k, &err), 0);
	free(txt);
}

/* ---- the JWT ---- */

static void test_jwt_matches_vector(void **state)
{
	struct isc_gcp_key k;
	char *jwt = NULL;
	json_t *vec = json_load_file(VEC "service-account/jwt-bearer-vector.json", 0, NULL);
	struct isc_err err;
	(void)state;
	assert_non_null(vec);
	load_fake_key(&k);
	assert_string_equal(k.private_key_id, "1");
	assert_int_equal(isc_gcp_jwt(&k, ISC_GCP_SCOPE, 1700000000, &jwt, &err), 0);
	/* RS256 is deterministic: the whole assertion, signature included, byte for byte. */
	assert_string_equal(jwt, json_string_value(json_object_get(vec, "assertion")));
	free(jwt);
	isc_gcp_key_cleanup(&k);
	assert_null(k.private_key_pem);
	json_decref(vec);
}

static unsigned char *b64url_decode(const char *s, size_t n, size_t *out_len)
{
	char *std = calloc(n + 4, 1);
	unsigned char *out = calloc(n + 4, 1);
	size_t i;
	int l;
	for (i = 0; i < n; i++)
		std[i] = s[i] == '-' ? '+' : s[i] == '_' ? '/' : s[i];
	while (i % 4)
		std[i++] = '=';
	l = EVP_DecodeBlock(out, (unsigned char *)std, (int)i);
	assert_true(l >= 0);
	*out_len = (size_t)l - (n % 4 == 2 ? 2 : n % 4 == 3 ? 1 : 0);
	free(std);
	return out;
}

/* Verifies the signature with OpenSSL against the published public key, and reads the claims. */
static void test_jwt_verifies_with_public_key(void **state)
{
	struct isc_gcp_key k;
	char *jwt = NULL, *dot1, *dot2;
	struct isc_err err;
	unsigned char *sig, *claims_raw;
	size_t sig_len, claims_len;
	EVP_PKEY *pub;
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	FILE *f = fopen(VEC "service-account/google-auth-tests-public_cert.pem", "r");
	X509 *cert;
	json_t *claims;
	(void)state;
	assert_non_null(f);
	cert = PEM_read_X509(f, NULL, NULL, NULL);
	fclose(f);
	assert_non_null(cert);
	pub = X509_get_pubkey(cert);
	load_fake_key(&k);
	assert_int_equal(isc_gcp_jwt(&k, ISC_GCP_SCOPE, 1763900000, &jwt, &err), 0);
	dot1 = strchr(jwt, '.');
	dot2 = strrchr(jwt, '.');
	assert_true(dot1 && dot2 && dot1 < dot2);
	sig = b64url_decode(dot2 + 1, strlen(dot2 + 1), &sig_len);
	assert_int_equal(sig_len, 256);
	assert_int_equal(EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, pub), 1);
	assert_int_equal(
	    EVP_DigestVerify(md, sig, sig_len, (unsigned char *)jwt, (size_t)(dot2 - jwt)), 1);
	/* A flipped byte of the signed part must not verify. */
	jwt[3] ^= 1;
	EVP_MD_CTX_reset(md);
	assert_int_equal(EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, pub), 1);
	assert_int_not_equal(
	    EVP_DigestVerify(md, sig, sig_len, (unsigned char *)jwt, (size_t)(dot2 - jwt)), 1);
	jwt[3] ^= 1;
	claims_raw = b64url_decode(dot1 + 1, (size_t)(dot2 - dot1 - 1), &claims_len);
	claims = json_loadb((char *)claims_raw, claims_len, 0, NULL);
	assert_non_null(claims);
	assert_string_equal(json_string_value(json_object_get(claims, "iss")),
	                    "service-account@example-project.iam.gserviceaccount.com");
	assert_string_equal(json_string_value(json_object_get(claims, "aud")),
	                    "https://oauth2.googleapis.com/token");
	assert_string_equal(json_string_value(json_object_get(claims, "scope")), ISC_GCP_SCOPE);
	assert_int_equal(json_integer_value(json_object_get(claims, "iat")), 1763900000);
	assert_int_equal(json_integer_value(json_object_get(claims, "exp")), 1763903600);
	json_decref(claims);
	free(claims_raw);
	free(sig);
	free(jwt);
	EVP_MD_CTX_free(md);
	EVP_PKEY_free(pub);
	X509_free(cert);
	isc_gcp_key_cleanup(&k);
}

static void test_key_file_errors(void **state)
{
	struct isc_gcp_key k;
	struct isc_err err;
	size_t n;
	char *legacy = slurp(VEC "service-account/google-auth-tests-service_account.json", &n);
	(void)state;
	/* The classic layout (legacy token_uri) is a key too. */
	assert_int_equal(isc_gcp_key_parse(legacy, n, "legacy", &k, &err), 0);
	assert_string_equal(k.token_uri, "https://accounts.google.com/o/oauth2/token");
	isc_gcp_key_cleanup(&k);
	free(legacy);
	assert_int_equal(
	    isc_gcp_key_parse(LIT("{\"type\":\"authorized_user\"}"), "f.json", &k, &err),
	    ISC_EINVALID);
	assert_non_null(strstr(err.msg, "f.json"));
	assert_non_null(strstr(err.msg, "service_account"));
	assert_int_equal(
	    isc_gcp_key_parse(LIT("{\"type\":\"service_account\",\"client_email\":\"a@b\","
	                          "\"private_key\":\"nope\",\"token_uri\":\"https://x\"}"),
	                      "f.json", &k, &err),
	    ISC_EINVALID);
	assert_non_null(strstr(err.msg, "private_key"));
	assert_int_equal(isc_gcp_key_parse(LIT("not json"), "f.json", &k, &err), ISC_EINVALID);
	assert_null(strstr(err.msg, "not json"));
}

static void test_token_reply(void **state)
{
	struct isc_gcp_token t;
	struct isc_err err;
	(void)state;
	assert_int_equal(isc_gcp_parse_token(LIT("{\"access_token\":\"ya29.x\",\"expires_in\":3599,"
	                                         "\"token_type\":\"Bearer\"}"),
	                                     1000, &t, &err),
	                 0);
	assert_string_equal(t.access_token, "ya29.x");
	assert_int_equal(t.expires_at_ms, 1000 + 3599000);
	isc_gcp_token_cleanup(&t);
	assert_int_equal(isc_gcp_parse_token(LIT("{\"error\":\"invalid_grant\"}"), 0, &t, &err),
	                 ISC_EINVALID);
}

/* ---- derived names ---- */

static void test_request_id(void **state)
{
	char a[37], b[37], c[37];
	(void)state;
	isc_gcp_request_id("tok-1", "us-central1-a", a);
	isc_gcp_request_id("tok-1", "us-central1-a", b);
	isc_gcp_request_id("tok-1", "us-central1-b", c);
	assert_string_equal(a, b);
	assert_string_not_equal(a, c);
	assert_int_equal(strlen(a), 36);
	assert_true(a[8] == '-' && a[13] == '-' && a[18] == '-' && a[23] == '-');
	assert_int_equal(a[14], '4');
	assert_non_null(strchr("89ab", a[19]));
}

static void test_labels_and_names(void **state)
{
	char key[64], prefix[41], m[64], acc[64];
	int n;
	struct isc_err err;
	(void)state;
	assert_int_equal(isc_gcp_label_key("isc:broker", key, &err), 0);
	assert_string_equal(key, "isc-broker");
	assert_int_equal(isc_gcp_label_key("isc:Experiment", key, &err), 0);
	assert_string_equal(key, "isc-experiment");
	assert_int_equal(isc_gcp_label_key(":x", key, &err), ISC_EINVALID);
	assert_true(isc_gcp_label_value_ok("cl_0123abcd"));
	assert_true(isc_gcp_label_value_ok("isc-0a1b2c3d4e5f"));
	assert_false(isc_gcp_label_value_ok("Upper"));
	assert_false(isc_gcp_label_value_ok("a:b"));
	isc_gcp_name_prefix("cl_0123456789abcdef", prefix);
	assert_string_equal(prefix, "isc-cl-0123456789abcdef");
	isc_gcp_name_prefix("A_very_long_cluster_identifier_that_goes_on_and_on", prefix);
	assert_true(strlen(prefix) <= 40);
	assert_int_not_equal(prefix[strlen(prefix) - 1], '-');
	assert_int_equal(isc_gcp_machine("a3-highgpu-8g", m, acc, &n, &err), 0);
	assert_string_equal(m, "a3-highgpu-8g");
	assert_string_equal(acc, "");
	assert_int_equal(isc_gcp_machine("n1-standard-16+T4x2", m, acc, &n, &err), 0);
	assert_string_equal(m, "n1-standard-16");
	assert_string_equal(acc, "nvidia-tesla-t4");
	assert_int_equal(n, 2);
	assert_int_equal(isc_gcp_machine("n1-standard-8+P100x1", m, acc, &n, &err), 0);
	assert_string_equal(acc, "nvidia-tesla-p100");
	assert_int_equal(isc_gcp_machine("n1-standard-8+Z9x1", m, acc, &n, &err), ISC_EINVALID);
	assert_int_equal(isc_gcp_machine("n1/evil", m, acc, &n, &err), ISC_EINVALID);
}

/* ---- Compute JSON (recorded replies) ---- */

static void parse_op_file(const char *path, struct isc_gce_operation *op)
{
	size_t n;
	char *txt = slurp(path, &n);
	struct isc_err err;
	assert_int_equal(isc_gce_parse_operation(txt, n, op, &err), 0);
	free(txt);
}

static void test_operations(void **state)
{
	struct isc_gce_operation op;
	(void)state;
	parse_op_file(VEC "libcloud-fixtures/zones_us-central1-a_instances_post.json", &op);
	assert_string_equal(op.status, "PENDING");
	assert_string_equal(op.zone, "us-central1-a");
	assert_string_equal(op.error_code, "");
	parse_op_file(
	    VEC "libcloud-fixtures/operations_operation_zones_us-central1-a_instances_post.json",
	    &op);
	assert_string_equal(op.status, "DONE");
	assert_string_equal(op.error_code, "");
	assert_true(op.insert_ms > 0);
	parse_op_file(
	    VEC "libcloud-fixtures/operations_operation_zones_europe-west1-a_instances_post.json",
	    &op);
	assert_string_equal(op.error_code, "RESOURCE_ALREADY_EXISTS");
	assert_int_equal(op.http_error, 409);
	assert_int_equal(isc_gce_classify_op(op.error_code), ISC_ECONFLICT);
	parse_op_file(VEC "composed/operation.insert.done-stockout.response.json", &op);
	assert_string_equal(op.error_code, "ZONE_RESOURCE_POOL_EXHAUSTED");
	assert_string_equal(op.target, "gpu-worker-1");
	assert_int_equal(isc_gce_classify_op(op.error_code), ISC_ECAPACITY);
	/* 2024-04-01T05:34:56.999-07:00 */
	assert_int_equal(op.insert_ms, 1711974896999LL);
	assert_int_equal(isc_gce_classify_op("ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"),
	                 ISC_ECAPACITY);
	assert_int_equal(isc_gce_classify_op("REGION_RESOURCE_POOL_EXHAUSTED"), ISC_ECAPACITY);
	assert_int_equal(isc_gce_classify_op("QUOTA_EXCEEDED"), ISC_EQUOTA);
}

static void test_instances(void **state)
{
	struct isc_node_info *ni = NULL;
	size_t n = 0, len;
	char *next = NULL, *txt;
	struct isc_err err;
	(void)state;
	txt = slurp(VEC "libcloud-fixtures/zones_us-central1-a_instances.json", &len);
	assert_int_equal(isc_gce_parse_instances(txt, len, &ni, &n, &next, &err), 0);
	free(txt);
	assert_int_equal(n, 1);
	assert_null(next);
	assert_string_equal(ni[0].id, "node-name");
	assert_int_equal(ni[0].state, ISC_NODE_RUNNING);
	assert_string_equal(ni[0].private_ip, "10.240.72.75");
	assert_string_equal(ni[0].public_ip, "23.236.58.15");
	assert_string_equal(ni[0].zone, "us-central1-a");
	assert_string_equal(ni[0].instance_type, "n1-standard-1");
	assert_int_equal(ni[0].spot, 0);
	assert_int_equal(ni[0].launched_at_ms, 1386960323351LL); /* 2013-12-13T10:45:23.351-08:00 */
	/* a TERMINATED one appended to the same array */
	txt = slurp(VEC "libcloud-fixtures/zones_us_central1_a_instances_stopped_node.json", &len);
	{
		/* instances.get returns one instance: wrap it as a list */
		char *wrapped = NULL;
		assert_true(asprintf(&wrapped, "{\"items\":[%s]}", txt) > 0);
		assert_int_equal(
		    isc_gce_parse_instances(wrapped, strlen(wrapped), &ni, &n, NULL, &err), 0);
		free(wrapped);
	}
	free(txt);
	assert_int_equal(n, 2);
	assert_int_equal(ni[1].state, ISC_NODE_TERMINATED);
	txt = slurp(VEC "composed/instances.get.spot-gpu.response.json", &len);
	{
		char *wrapped = NULL;
		assert_true(
		    asprintf(&wrapped, "{\"items\":{\"zones/x\":{\"instances\":[%s]}}}", txt) > 0);
		assert_int_equal(
		    isc_gce_parse_instances(wrapped, strlen(wrapped), &ni, &n, NULL, &err), 0);
		free(wrapped);
	}
	free(txt);
	assert_int_equal(n, 3);
	assert_int_equal(ni[2].spot, 1);
	assert_non_null(strchr(ni[2].instance_type, '+')); /* n1 + guest accelerators */
	free(ni);
}

static void test_error_envelope(void **state)
{
	struct isc_gce_error e;
	size_t len;
	char *txt = slurp(VEC "libcloud-fixtures/global_images_family_notfound.json", &len);
	(void)state;
	assert_int_equal(isc_gce_parse_error(txt, len, &e), 0);
	free(txt);
	assert_int_equal(e.code, 404);
	assert_string_equal(e.reason, "notFound");
	assert_int_equal(isc_gce_classify(404, e.reason), ISC_ENOTFOUND);
	/* capacity on 503 is capacity, not a 5xx to retry */
	assert_int_equal(isc_gce_classify(503, "insufficientCapacity"), ISC_ECAPACITY);
	assert_int_equal(isc_gce_classify(403, "quotaExceeded"), ISC_EQUOTA);
	assert_int_equal(isc_gce_classify(403, "rateLimitExceeded"), ISC_ETHROTTLED);
	assert_int_equal(isc_gce_classify(429, NULL), ISC_ETHROTTLED);
	assert_int_equal(isc_gce_classify(500, "backendError"), ISC_ETRANSIENT);
	assert_int_equal(isc_gce_classify(403, "forbidden"), ISC_EAUTH);
	assert_int_equal(isc_gce_classify(401, "authError"), ISC_EAUTH);
	assert_int_equal(isc_gce_parse_error("<html>", 6, &e), ISC_EINVALID);
	assert_int_equal(isc_gce_time_ms("1970-01-01T00:00:01Z"), 1000);
	assert_int_equal(isc_gce_time_ms("1970-01-01T01:00:00.5+01:00"), 500);
	assert_int_equal(isc_gce_time_ms("yesterday"), -1);
}

/* ---- scripted transport ---- */

static struct {
	char *url[256], *method[256], *body[256], *auth[256];
	size_t calls;
} S;

static void script_reset(void)
{
	driver_script_reset();
	for (size_t i = 0; i < S.calls; i++) {
		free(S.url[i]);
		free(S.method[i]);
		free(S.body[i]);
		free(S.auth[i]);
	}
	memset(&S, 0, sizeof(S));
	isc_gcp_token_cache_clear(); /* every scripted case starts with a token exchange */
}

static int scripted_send(void *ctx, const struct isc_http_request *req, long t1, long t2,
                         size_t max, struct isc_http_response *resp, struct isc_err *err)
{
	(void)ctx, (void)t1, (void)t2, (void)max;
	assert_true(S.calls < 256);
	S.url[S.calls] = strdup(req->url);
	S.method[S.calls] = strdup(req->method);
	S.body[S.calls] = strndup(req->body ? req->body : "", req->body_len);
	for (size_t i = 0; i < req->n_headers; i++)
		if (strcmp(req->headers[i].name, "Authorization") == 0)
			S.auth[S.calls] = strdup(req->headers[i].value);
	/* The key never travels: only the signature made with it. */
	assert_null(strstr(S.body[S.calls], "PRIVATE KEY"));
	S.calls++;
	return driver_script_answer(req, S.calls, "refused", resp, err);
}

static const struct isc_http_transport scripted = {scripted_send, NULL};

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
static uint64_t fake_rand(void *c)
{
	(void)c;
	return 7;
}
static const struct isc_clock fake_clock = {fixed_now, fake_sleep, fake_rand, NULL};

static char *fake_key_json;

/* compact_placement of session(): "never" keeps the older cases' calls as they were. */
static const char *cp_mode = "never";
/* firewall_check of session(): "never" likewise (test_firewall_* script its calls). */
static const char *fw_mode = "never";
/* tenant_isolation: "never" unless a test says (the tenant tests) */
static const char *ti_mode = "never";

static struct isc_provider_session *session(void)
{
	const struct isc_provider *p = isc_provider_find("gcp");
	const struct isc_kv creds[] = {{"service_account_json", fake_key_json}};
	const struct isc_kv items[] = {{"endpoint_compute", "http://127.0.0.1:9/compute/v1"},
	                               {"compact_placement", cp_mode},
	                               {"firewall_check", fw_mode},
	                               {"tenant_isolation", ti_mode}};
	struct isc_provider_settings st = {items, 4, creds, 1};
	struct isc_provider_session *s = NULL;
	struct isc_err err;
	assert_non_null(p);
	assert_int_equal(p->session_new(&st, "us-central1", &scripted, &fake_clock, &s, &err), 0);
	return s;
}

static int setup(void **state)
{
	(void)state;
	fake_key_json = slurp(VEC "service-account/service_account.modern-layout.FAKE.json", NULL);
	return 0;
}

/* Before each test: a process that has not swept yet (the sweep memory is per process). */
static int forget(void **state)
{
	(void)state;
	isc_sweep_forget_all();
	isc_gcp_seen_clusters_forget();
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	free(fake_key_json);
	script_reset();
	return 0;
}

#define TOKEN_OK "{\"access_token\":\"ya29.test\",\"expires_in\":3599,\"token_type\":\"Bearer\"}"
#define OP(name, status, err)                                                                      \
	"{\"kind\":\"compute#operation\",\"name\":\"" name "\",\"status\":\"" status               \
	"\",\"zone\":\"https://www.googleapis.com/compute/v1/projects/example-project/zones/"      \
	"us-central1-b\"" err "}"
#define STOCKOUT                                                                                   \
	",\"error\":{\"errors\":[{\"code\":\"ZONE_RESOURCE_POOL_EXHAUSTED\",\"message\":\"no "     \
	"room\"}]},\"httpErrorStatusCode\":503"

static const char *inst_json(const char *name, const char *zone, const char *status)
{
	static char buf[4][1024];
	static int k;
	char *b = buf[k++ % 4];
	snprintf(
	    b, sizeof(buf[0]),
	    "{\"name\":\"%s\",\"id\":\"1234%s\",\"status\":\"%s\","
	    "\"zone\":\"https://www.googleapis.com/compute/v1/projects/example-project/zones/%s\","
	    "\"machineType\":\"https://x/zones/%s/machineTypes/a3-highgpu-8g\","
	    "\"creationTimestamp\":\"2025-11-23T00:00:00.000-08:00\","
	    "\"networkInterfaces\":[{\"networkIP\":\"10.0.0.%zu\",\"accessConfigs\":[{"
	    "\"natIP\":\"34.1.1.%zu\"}]}],\"scheduling\":{\"provisioningModel\":\"SPOT\"},"
	    "\"labels\":{\"isc-broker\":\"b1\",\"isc-cluster\":\"cl_1\",\"isc-experiment\":\"e1\"}"
	    "}",
	    name, zone[strlen(zone) - 1] == 'a' ? "1" : "2", status, zone, zone, strlen(name),
	    strlen(name));
	return b;
}

static const struct isc_kv tags[] = {
    {ISC_TAG_BROKER, "b1"}, {ISC_TAG_CLUSTER, "cl_1"}, {ISC_TAG_EXPERIMENT, "e1"}};
static const char *const zones2[] = {"us-central1-a", "us-central1-b"};

static struct isc_launch_spec spec(unsigned n)
{
	struct isc_launch_spec sp = {0};
	sp.instance_type = "a3-highgpu-8g";
	sp.spot = 1;
	sp.zones = zones2;
	sp.n_zones = 2;
	sp.count = n;
	sp.idempotency_token = "intent-1";
	sp.tags = tags;
	sp.n_tags = 3;
	sp.ssh_public_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMockKey isc";
	return sp;
}

/*
 * A multi-node A3 gang: its compact placement policy first (regional, COLLOCATED, no
 * vmCount, described with broker and cluster), attached to the bulkInsert of every zone
 * tried; the default image has cloud-init and the user-data lets root in.
 */
static void test_compact_policy_for_the_gang(void **state)
{
	struct isc_provider_session *s;
	struct isc_launch_spec sp = spec(2);
	struct isc_launch_result r;
	struct isc_err err;
	json_t *body, *props, *gpp;
	char pname[64], link[128];
	(void)state;
	script_reset();
	cp_mode = "auto";
	s = session();
	cp_mode = "never";
	reply(200, TOKEN_OK);
	reply(200, "{\"kind\":\"compute#operation\",\"name\":\"op-p\",\"status\":\"DONE\"}");
	reply(200, OP("op-a", "PENDING", ""));
	reply(200, OP("op-a", "DONE", STOCKOUT));
	reply(200, OP("op-b", "DONE", ""));
	reply(200, "{\"items\":[%s,%s]}", inst_json("isc-cl-1-0001", "us-central1-b", "RUNNING"),
	      inst_json("isc-cl-1-0002", "us-central1-b", "RUNNING"));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_int_equal(S.calls, 6);
	assert_string_equal(S.method[1], "POST");
	assert_non_null(strstr(S.url[1], "projects/example-project/regions/us-central1/"
	                                 "resourcePolicies?requestId="));
	body = json_loads(S.body[1], 0, NULL);
	assert_non_null(body);
	isc_gcp_policy_name("intent-1", pname);
	assert_string_equal(json_string_value(json_object_get(body, "name")), pname);
	assert_int_equal(strlen(pname), 12 + 16);
	assert_string_equal(json_string_value(json_object_get(body, "description")),
	                    "isc:broker=b1 isc:cluster=cl_1");
	gpp = json_object_get(body, "groupPlacementPolicy");
	assert_string_equal(json_string_value(json_object_get(gpp, "collocation")), "COLLOCATED");
	/* no vmCount: the nodes that replace lost members join the policy later */
	assert_null(json_object_get(gpp, "vmCount"));
	assert_int_equal(json_integer_value(json_object_get(gpp, "availabilityDomainCount")), 1);
	json_decref(body);
	for (int i = 2; i <= 4; i += 2) {
		body = json_loads(S.body[i], 0, NULL);
		props = json_object_get(body, "instanceProperties");
		snprintf(link, sizeof(link), "regions/us-central1/resourcePolicies/%s", pname);
		assert_string_equal(json_string_value(json_array_get(
		                        json_object_get(props, "resourcePolicies"), 0)),
		                    link);
		json_decref(body);
	}
	assert_non_null(strstr(S.body[2], "ubuntu-os-cloud/global/images/family/ubuntu-2204-lts"));
	assert_non_null(
	    strstr(S.body[2], "#cloud-config\\ndisable_root: false\\nssh_authorized_keys"));
	assert_string_equal(r.zone, "us-central1-b");
	isc_launch_result_cleanup(&r);
	s->provider->session_free(s);
}

/*
 * No zone can take it: the gang's policy is deleted again. One node or an N1: no policy. A
 * replacement joins the gang's policy and never deletes it.
 */
static void test_compact_policy_given_back(void **state)
{
	struct isc_provider_session *s;
	struct isc_launch_spec sp = spec(2);
	struct isc_launch_result r;
	struct isc_err err;
	(void)state;
	script_reset();
	cp_mode = "auto";
	s = session();
	cp_mode = "never";
	reply(200, TOKEN_OK);
	reply(200, "{\"kind\":\"compute#operation\",\"name\":\"op-p\",\"status\":\"DONE\"}");
	reply(200, OP("op-a", "DONE", STOCKOUT));
	reply(200, OP("op-b", "DONE", STOCKOUT));
	reply(200, "{\"kind\":\"compute#operation\",\"name\":\"op-d\",\"status\":\"DONE\"}");
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), ISC_ECAPACITY);
	assert_int_equal(S.calls, 5);
	assert_string_equal(S.method[4], "DELETE");
	assert_non_null(strstr(S.url[4], "regions/us-central1/resourcePolicies/isc-compact-"));
	assert_true(isc_gcp_compact_machine("a2-ultragpu-8g"));
	assert_false(isc_gcp_compact_machine("n1-standard-8"));
	script_reset();
	sp = spec(1);
	reply(200, OP("op-s", "DONE", ""));
	reply(200, "{\"items\":[%s]}", inst_json("isc-cl-1-0001", "us-central1-a", "RUNNING"));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_int_equal(S.calls, 2); /* a cached token; bulkInsert, then the listing */
	assert_null(strstr(S.body[0], "resourcePolicies"));
	isc_launch_result_cleanup(&r);
	/* one node replacing a lost member joins the gang's policy: none made, none deleted */
	script_reset();
	sp = spec(1);
	sp.idempotency_token = "intent-2";
	sp.placement_token = "intent-1";
	sp.n_zones = 1;
	reply(200, OP("op-j", "DONE", STOCKOUT));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), ISC_ECAPACITY);
	assert_int_equal(S.calls, 1);
	assert_string_equal(S.method[0], "POST");
	assert_non_null(strstr(S.url[0], "/instances/bulkInsert"));
	{
		char pname[64], link[128];
		json_t *body = json_loads(S.body[0], 0, NULL), *props;
		assert_non_null(body);
		props = json_object_get(body, "instanceProperties");
		isc_gcp_policy_name("intent-1", pname);
		snprintf(link, sizeof(link), "regions/us-central1/resourcePolicies/%s", pname);
		assert_string_equal(json_string_value(json_array_get(
		                        json_object_get(props, "resourcePolicies"), 0)),
		                    link);
		json_decref(body);
	}
	s->provider->session_free(s);
}

/* describe deletes this broker's policies whose cluster has no live node, and only those. */
static void test_describe_reconciles_policies(void **state)
{
	struct isc_provider_session *s;
	struct isc_node_info *ni;
	size_t n;
	struct isc_err err;
	(void)state;
	script_reset();
	cp_mode = "auto";
	s = session();
	cp_mode = "never";
	reply(200, TOKEN_OK);
	reply(200, "{\"items\":{\"zones/us-central1-a\":{\"instances\":[%s]}}}",
	      inst_json("isc-cl-1-0001", "us-central1-a", "RUNNING"));
	reply(200,
	      "{\"items\":[{\"name\":\"isc-cl-1-compact\",\"description\":\"isc:broker=b1 "
	      "isc:cluster=cl_1\"},{\"name\":\"isc-cl-2-compact\",\"description\":\"isc:broker="
	      "b1 isc:cluster=cl_2\"},{\"name\":\"theirs\",\"description\":\"isc:broker=b9 "
	      "isc:cluster=cl_2\"},{\"name\":\"plain\"}]}");
	reply(400, "{\"error\":{\"code\":400,\"errors\":[{\"reason\":"
	           "\"resourceInUseByAnotherResource\",\"message\":\"in use\"}]}}");
	assert_int_equal(s->provider->describe(s, "b1", &ni, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(S.calls, 4);
	assert_non_null(strstr(S.url[2], "regions/us-central1/resourcePolicies?maxResults=500"));
	assert_string_equal(S.method[3], "DELETE");
	assert_non_null(strstr(S.url[3], "regions/us-central1/resourcePolicies/isc-cl-2-compact"));
	isc_node_infos_free(ni, n);
	s->provider->session_free(s);
}

/* In b (room for cap bytes): the first `from` replaced by `to`. */
static void replace_in(char *b, size_t cap, const char *from, const char *to)
{
	char *at = strstr(b, from), tail[1100];
	assert_non_null(at);
	snprintf(tail, sizeof(tail), "%s", at + strlen(from));
	snprintf(at, cap - (size_t)(at - b), "%s%s", to, tail);
}

/* inst_json's node in cluster `cluster` (its isc-cluster label), on demand (not spot). */
static const char *inst_in(const char *name, const char *cluster, const char *status)
{
	static char buf[32][1100];
	static int k;
	char *b = buf[k++ % 32], label[64];
	snprintf(b, sizeof(buf[0]), "%s", inst_json(name, "us-central1-a", status));
	snprintf(label, sizeof(label), "\"isc-cluster\":\"%s\"", cluster);
	replace_in(b, sizeof(buf[0]), "\"isc-cluster\":\"cl_1\"", label);
	/* a stopped spot node would need a preemption lookup too */
	replace_in(b, sizeof(buf[0]), "\"SPOT\"", "\"STANDARD\"");
	return b;
}

/* One compact policy of broker b1 for `cluster`, as resourcePolicies.list shows it. */
static const char *policy_item(const char *name, const char *cluster)
{
	static char buf[32][512];
	static int k;
	char *b = buf[k++ % 32];
	snprintf(b, sizeof(buf[0]),
	         "{\"name\":\"%s\",\"status\":\"READY\",\"description\":\"isc:broker=b1 "
	         "isc:cluster=%s\"}",
	         name, cluster);
	return b;
}

static size_t policy_lists(void)
{
	size_t n = 0;
	for (size_t i = 0; i < S.calls; i++)
		n += strstr(S.url[i], "/resourcePolicies?maxResults=") != NULL;
	return n;
}

#define POLICY_DELETED "{\"kind\":\"compute#operation\",\"name\":\"op-d\",\"status\":\"DONE\"}"

/*
 * When describe sweeps the compact policies (providers/sweep.h): the first time, then
 * only once a cluster's nodes are all gone (GCE lists a deleted VM no more, so a gang
 * whose nodes left the listing counts, as does one whose nodes all show TERMINATED) and no
 * sweep saw its policies go, or every 5 minutes; and at most 10 deletes a sweep, the rest
 * at the next describe.
 */
static void test_describe_sweeps_policies_when_due(void **state)
{
	struct isc_provider_session *s;
	struct isc_node_info *ni;
	size_t n;
	struct isc_err err;
	struct isc_buf nodes, pols;
	char names[12][32], clusters[12][32];
	(void)state;
#define DESCRIBE()                                                                                 \
	do {                                                                                       \
		assert_int_equal(s->provider->describe(s, "b1", &ni, &n, &err), 0);                \
		isc_node_infos_free(ni, n);                                                        \
	} while (0)
#define LISTING(...) reply(200, "{\"items\":{\"zones/us-central1-a\":{\"instances\":[" __VA_ARGS__)
	script_reset();
	cp_mode = "auto";
	s = session();
	cp_mode = "never";
	/* 1. The first describe sweeps; both clusters have live nodes: nothing deleted. */
	reply(200, TOKEN_OK);
	LISTING("%s,%s]}}}", inst_in("isc-a-0001", "cl_a", "RUNNING"),
	        inst_in("isc-b-0001", "cl_b", "RUNNING"));
	reply(200, "{\"items\":[%s,%s]}", policy_item("pol-a", "cl_a"),
	      policy_item("pol-b", "cl_b"));
	DESCRIBE();
	assert_int_equal(S.calls, 3);
	assert_int_equal(policy_lists(), 1);
	/* 2. Nothing changed: no sweep. */
	LISTING("%s,%s]}}}", inst_in("isc-a-0001", "cl_a", "RUNNING"),
	        inst_in("isc-b-0001", "cl_b", "RUNNING"));
	DESCRIBE();
	assert_int_equal(S.calls, 4);
	/* 3. cl_b's gang torn down, its node deleted (no longer listed): a sweep deletes pol-b. */
	LISTING("%s]}}}", inst_in("isc-a-0001", "cl_a", "RUNNING"));
	reply(200, "{\"items\":[%s,%s]}", policy_item("pol-a", "cl_a"),
	      policy_item("pol-b", "cl_b"));
	reply(200, POLICY_DELETED);
	DESCRIBE();
	assert_int_equal(S.calls, 7);
	assert_int_equal(policy_lists(), 2);
	assert_string_equal(S.method[6], "DELETE");
	assert_non_null(strstr(S.url[6], "regions/us-central1/resourcePolicies/pol-b"));
	/* 4. The same listing again: pol-b was seen go, no sweep. */
	LISTING("%s]}}}", inst_in("isc-a-0001", "cl_a", "RUNNING"));
	DESCRIBE();
	assert_int_equal(S.calls, 8);
	/* 5. cl_a's node stopped (listed TERMINATED): a sweep deletes pol-a; then not again,
	 * nor when the stopped node is deleted and leaves the listing. */
	LISTING("%s]}}}", inst_in("isc-a-0001", "cl_a", "TERMINATED"));
	reply(200, "{\"items\":[%s]}", policy_item("pol-a", "cl_a"));
	reply(200, POLICY_DELETED);
	DESCRIBE();
	assert_int_equal(S.calls, 11);
	assert_non_null(strstr(S.url[10], "regions/us-central1/resourcePolicies/pol-a"));
	LISTING("%s]}}}", inst_in("isc-a-0001", "cl_a", "TERMINATED"));
	DESCRIBE();
	reply(200, "{\"items\":{}}");
	DESCRIBE();
	assert_int_equal(S.calls, 13);
	assert_int_equal(policy_lists(), 3);
	/* 6. Five minutes on: swept again (a leftover with no node, cl_l's policy, goes). */
	clock_now += 5 * 60 * 1000;
	reply(200, "{\"items\":{}}");
	reply(200, "{\"items\":[%s]}", policy_item("pol-l", "cl_l"));
	reply(200, POLICY_DELETED);
	DESCRIBE();
	assert_int_equal(S.calls, 16);
	assert_int_equal(policy_lists(), 4);
	assert_non_null(strstr(S.url[15], "regions/us-central1/resourcePolicies/pol-l"));
	s->provider->session_free(s);

	/* 7. Twelve gangs torn down at once: 10 deletes, then the other 2 at the next one. */
	script_reset();
	isc_sweep_forget_all();
	isc_gcp_seen_clusters_forget();
	cp_mode = "auto";
	s = session();
	cp_mode = "never";
	isc_buf_init(&nodes, 0);
	isc_buf_init(&pols, 0);
	for (int i = 0; i < 12; i++) {
		snprintf(names[i], sizeof(names[i]), "pol-g%02d", i);
		snprintf(clusters[i], sizeof(clusters[i]), "cl_g%02d", i);
		assert_int_equal(isc_buf_puts(&nodes, i ? "," : ""), 0);
		assert_int_equal(
		    isc_buf_puts(&nodes, inst_in(names[i] + 4, clusters[i], "RUNNING")), 0);
		assert_int_equal(isc_buf_puts(&pols, i ? "," : ""), 0);
		assert_int_equal(isc_buf_puts(&pols, policy_item(names[i], clusters[i])), 0);
	}
	reply(200, TOKEN_OK);
	LISTING("%s]}}}", nodes.data);
	reply(200, "{\"items\":[%s]}", pols.data);
	DESCRIBE();
	assert_int_equal(S.calls, 3);
	reply(200, "{\"items\":{}}");
	reply(200, "{\"items\":[%s]}", pols.data);
	for (int i = 0; i < 10; i++)
		reply(200, POLICY_DELETED);
	DESCRIBE();
	assert_int_equal(S.calls, 15);
	assert_non_null(strstr(S.url[14], "regions/us-central1/resourcePolicies/pol-g09"));
	reply(200, "{\"items\":{}}");
	reply(200, "{\"items\":[%s,%s]}", policy_item(names[10], clusters[10]),
	      policy_item(names[11], clusters[11]));
	reply(200, POLICY_DELETED);
	reply(200, POLICY_DELETED);
	DESCRIBE();
	assert_int_equal(S.calls, 19);
	assert_non_null(strstr(S.url[17], "regions/us-central1/resourcePolicies/pol-g10"));
	assert_non_null(strstr(S.url[18], "regions/us-central1/resourcePolicies/pol-g11"));
	/* All twelve known gone: the next describe does not sweep. */
	reply(200, "{\"items\":{}}");
	DESCRIBE();
	assert_int_equal(S.calls, 20);
	assert_int_equal(policy_lists(), 3);
#undef LISTING
#undef DESCRIBE
	isc_buf_cleanup(&nodes);
	isc_buf_cleanup(&pols);
	s->provider->session_free(s);
}

/* ---- the firewall check (intra-cluster TCP) ---- */

#define FW_NET "https://www.googleapis.com/compute/v1/projects/example-project/global/networks/"
#define FW_RULE(name, extra)                                                                       \
	"{\"name\":\"" name "\",\"network\":\"" FW_NET "default\",\"direction\":\"INGRESS\","      \
	"\"disabled\":false" extra "}"
#define FW_INTERNAL                                                                                \
	FW_RULE("default-allow-internal",                                                          \
	        ",\"priority\":65534,\"sourceRanges\":[\"10.128.0.0/9\"],\"allowed\":[{"           \
	        "\"IPProtocol\":\"tcp\",\"ports\":[\"0-65535\"]},{\"IPProtocol\":\"udp\","         \
	        "\"ports\":[\"0-65535\"]},{\"IPProtocol\":\"icmp\"}]")
#define FW_SSH                                                                                     \
	FW_RULE("default-allow-ssh", ",\"priority\":65534,\"sourceRanges\":[\"0.0.0.0/0\"],"       \
	                             "\"allowed\":[{\"IPProtocol\":\"tcp\",\"ports\":[\"22\"]}]")

static int fw_ok(const char *page)
{
	struct isc_gcp_fw_scan sc;
	struct isc_err err;
	size_t added;
	char *next = NULL;
	assert_int_equal(isc_gcp_fw_scan_init(&sc, "default", "10.128.0.0/20", &err), 0);
	assert_int_equal(isc_gcp_fw_scan_page(&sc, page, strlen(page), &next, &added, &err), 0);
	assert_null(next);
	return isc_gcp_fw_scan_ok(&sc);
}

/* Which rule sets let a gang's nodes (subnet 10.128.0.0/20, no tags) talk all TCP. */
static void test_firewall_rules(void **state)
{
	struct isc_gcp_fw_scan sc;
	struct isc_err err;
	size_t added;
	char *next = NULL;
	(void)state;
	assert_true(fw_ok("{\"items\":[" FW_SSH "," FW_INTERNAL "]}"));
	assert_false(fw_ok("{\"items\":[" FW_SSH "]}"));
	assert_false(fw_ok("{}")); /* no rules: the implied deny */
	/* only the rendezvous port: gloo/NCCL's own ports stay shut */
	assert_false(fw_ok("{\"items\":[" FW_RULE("rdzv", ",\"sourceRanges\":[\"10.128.0.0/20\"],"
	                                                  "\"allowed\":[{\"IPProtocol\":\"tcp\","
	                                                  "\"ports\":[\"29500\"]}]") "]}"));
	/* two rules, each half the ports; "all" protocols with no ports */
	assert_true(fw_ok("{\"items\":[" FW_RULE(
	    "lo",
	    ",\"sourceRanges\":[\"10.0.0.0/8\"],"
	    "\"allowed\":[{\"IPProtocol\":\"tcp\","
	    "\"ports\":[\"0-32767\"]}]") "," FW_RULE("hi",
	                                             ",\"sourceRanges\":[\"10.128.0.0/"
	                                             "16\"],\"allowed\":[{\"IPProtocol\":\"tcp\","
	                                             "\"ports\":[\"32768-65535\"]}]") "]}"));
	assert_true(
	    fw_ok("{\"items\":[" FW_RULE("all", ",\"sourceRanges\":[\"10.128.0.0/20\"],"
	                                        "\"allowed\":[{\"IPProtocol\":\"all\"}]") "]}"));
	/* a range narrower than the subnet, other targets, disabled, egress, another network */
	assert_false(
	    fw_ok("{\"items\":[" FW_RULE("narrow", ",\"sourceRanges\":[\"10.128.0.0/24\"],"
	                                           "\"allowed\":[{\"IPProtocol\":\"tcp\"}]") "]}"));
	assert_false(
	    fw_ok("{\"items\":[" FW_RULE("tagged", ",\"sourceRanges\":[\"10.0.0.0/8\"],"
	                                           "\"targetTags\":[\"gpu\"],\"allowed\":[{"
	                                           "\"IPProtocol\":\"tcp\"}]") "]}"));
	assert_false(fw_ok("{\"items\":[{\"name\":\"off\",\"network\":\"" FW_NET
	                   "default\",\"disabled\":true,\"sourceRanges\":[\"10.0.0.0/8\"],"
	                   "\"allowed\":[{\"IPProtocol\":\"tcp\"}]}]}"));
	assert_false(fw_ok("{\"items\":[{\"name\":\"out\",\"network\":\"" FW_NET
	                   "default\",\"direction\":\"EGRESS\",\"sourceRanges\":[\"10.0.0.0/8\"],"
	                   "\"allowed\":[{\"IPProtocol\":\"tcp\"}]}]}"));
	assert_false(fw_ok("{\"items\":[{\"name\":\"x\",\"network\":\"" FW_NET
	                   "other\",\"sourceRanges\":[\"10.0.0.0/8\"],"
	                   "\"allowed\":[{\"IPProtocol\":\"tcp\"}]}]}"));
	/* a deny of stronger priority wins; a weaker one does not */
	assert_false(fw_ok("{\"items\":[" FW_INTERNAL "," FW_RULE(
	    "deny", ",\"priority\":1000,\"sourceRanges\":[\"10.128.0.0/9\"],\"denied\":[{"
	            "\"IPProtocol\":\"tcp\",\"ports\":[\"29500\"]}]") "]}"));
	assert_true(fw_ok("{\"items\":[" FW_RULE(
	    "allow",
	    ",\"priority\":100,\"sourceRanges\":[\"10."
	    "128.0.0/9\"],\"allowed\":[{"
	    "\"IPProtocol\":\"tcp\"}]") "," FW_RULE("deny", ",\"priority\":1000,\"sourceRanges\":["
	                                                    "\"10.128.0.0/9\"],\"denied\":[{"
	                                                    "\"IPProtocol\":\"tcp\"}]") "]}"));
	/* pages: the token is handed back; an unreadable page or CIDR is an error */
	assert_int_equal(isc_gcp_fw_scan_init(&sc, "default", "10.128.0.0/20", &err), 0);
	assert_int_equal(
	    isc_gcp_fw_scan_page(&sc, LIT("{\"items\":[" FW_SSH "],\"nextPageToken\":\"p2\"}"),
	                         &next, &added, &err),
	    0);
	assert_string_equal(next, "p2");
	assert_int_equal(added, 1);
	free(next);
	assert_int_equal(isc_gcp_fw_scan_page(&sc, LIT("[]"), &next, &added, &err), ISC_EINVALID);
	assert_int_equal(isc_gcp_fw_scan_init(&sc, "default", "10.128.0.0", &err), ISC_EINVALID);
}

/* A gang's launch reads the subnet and the firewall rules first; missing: refused, named. */
static void test_firewall_refuses_gang(void **state)
{
	struct isc_provider_session *s;
	struct isc_launch_spec sp = spec(2);
	struct isc_launch_result r;
	struct isc_err err;
	(void)state;
	script_reset();
	fw_mode = "auto";
	s = session();
	fw_mode = "never";
	reply(200, TOKEN_OK);
	reply(200, "{\"name\":\"default\",\"ipCidrRange\":\"10.128.0.0/20\"}");
	reply(200, "{\"items\":[" FW_SSH "]}");
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), ISC_EINVALID);
	assert_int_equal(S.calls, 3); /* nothing launched */
	assert_non_null(strstr(S.url[1], "projects/example-project/regions/us-central1/"
	                                 "subnetworks/default"));
	assert_non_null(strstr(S.url[2], "projects/example-project/global/firewalls?"));
	assert_non_null(strstr(S.url[2], "maxResults=500"));
	assert_non_null(strstr(err.msg, "network default lacks the firewall rule a gang needs: "
	                                "ingress: allow all TCP from 10.128.0.0/20"));
	assert_non_null(strstr(err.msg, "default-allow-internal"));
	/* a second page holds the rule: the gang launches */
	script_reset();
	reply(200, "{\"name\":\"default\",\"ipCidrRange\":\"10.128.0.0/20\"}");
	reply(200, "{\"items\":[" FW_SSH "],\"nextPageToken\":\"t2\"}");
	reply(200, "{\"items\":[" FW_INTERNAL "]}");
	reply(200, OP("op-a", "DONE", ""));
	reply(200, "{\"items\":[%s,%s]}", inst_json("isc-cl-1-0001", "us-central1-a", "RUNNING"),
	      inst_json("isc-cl-1-0002", "us-central1-a", "RUNNING"));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_int_equal(S.calls, 5); /* a cached token */
	assert_non_null(strstr(S.url[2], "pageToken=t2"));
	assert_non_null(strstr(S.url[3], "bulkInsert"));
	isc_launch_result_cleanup(&r);
	/* one node talks to nobody: no check */
	script_reset();
	sp = spec(1);
	reply(200, OP("op-s", "DONE", ""));
	reply(200, "{\"items\":[%s]}", inst_json("isc-cl-1-0001", "us-central1-a", "RUNNING"));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_int_equal(S.calls, 2);
	isc_launch_result_cleanup(&r);
	s->provider->session_free(s);
}

/*
 * A tenant's launch (issue 42): the network may have no rule that lets all TCP from the
 * subnet reach every instance (refused, named); the tenant's rule is made (firewalls.get
 * 404, firewalls.insert: INGRESS, sourceTags = targetTags = the tag, all protocols, a
 * global Operation) and the nodes carry the tag; a second launch finds the rule. Even one
 * node is checked. Without a tenant (an organisation's own project) none of it.
 */
static void test_tenant_firewall(void **state)
{
	struct isc_provider_session *s;
	struct isc_launch_spec sp = spec(1);
	struct isc_launch_result r;
	struct isc_err err;
	char tag[64];
	json_t *body;
	(void)state;
	assert_int_equal(isc_gcp_tenant_tag("b1", "17", tag, &err), 0);
	assert_int_equal(strlen(tag), strlen("isc-t-17-") + 8);
	assert_int_equal(strncmp(tag, "isc-t-17-", 9), 0);
	assert_int_equal(isc_gcp_tenant_tag("b1", "Org_A", tag, &err), ISC_EINVALID);
	assert_int_equal(isc_gcp_tenant_tag("b1", "17", tag, &err), 0);
	script_reset();
	fw_mode = "auto";
	ti_mode = "auto";
	s = session();
	fw_mode = ti_mode = "never";
	sp.tenant = "17";
	/* default-allow-internal lets every tenant in: refused before anything is made */
	reply(200, TOKEN_OK);
	reply(200, "{\"name\":\"default\",\"ipCidrRange\":\"10.128.0.0/20\"}");
	reply(200, "{\"items\":[" FW_SSH "," FW_INTERNAL "]}");
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), ISC_EINVALID);
	assert_int_equal(S.calls, 3);
	assert_non_null(strstr(err.msg, "firewall rule default-allow-internal lets all TCP from "
	                                "10.128.0.0/20 (the subnet) reach every instance"));
	/* without it: the rule is made, the node tagged */
	script_reset();
	reply(200, "{\"name\":\"default\",\"ipCidrRange\":\"10.128.0.0/20\"}");
	reply(200, "{\"items\":[" FW_SSH "]}");
	reply(404, "{\"error\":{\"code\":404,\"message\":\"not found\",\"errors\":[{\"reason\":"
	           "\"notFound\",\"message\":\"not found\"}]}}");
	reply(200, "{\"kind\":\"compute#operation\",\"name\":\"op-fw\",\"status\":\"DONE\"}");
	reply(200, OP("op-s", "DONE", ""));
	reply(200, "{\"items\":[%s]}", inst_json("isc-cl-1-0001", "us-central1-a", "RUNNING"));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_int_equal(S.calls, 6);
	assert_non_null(strstr(S.url[2], "projects/example-project/global/firewalls/isc-t-17-"));
	assert_string_equal(S.method[3], "POST");
	assert_non_null(strstr(S.url[3], "projects/example-project/global/firewalls?requestId="));
	body = json_loads(S.body[3], 0, NULL);
	assert_non_null(body);
	assert_string_equal(json_string_value(json_object_get(body, "name")), tag);
	assert_string_equal(json_string_value(json_object_get(body, "direction")), "INGRESS");
	assert_string_equal(
	    json_string_value(json_array_get(json_object_get(body, "sourceTags"), 0)), tag);
	assert_string_equal(
	    json_string_value(json_array_get(json_object_get(body, "targetTags"), 0)), tag);
	assert_int_equal(json_array_size(json_object_get(body, "sourceRanges")), 0);
	assert_string_equal(json_string_value(json_object_get(
	                        json_array_get(json_object_get(body, "allowed"), 0), "IPProtocol")),
	                    "all");
	json_decref(body);
	body = json_loads(S.body[4], 0, NULL);
	assert_string_equal(
	    json_string_value(json_array_get(
	        json_object_get(
	            json_object_get(json_object_get(body, "instanceProperties"), "tags"), "items"),
	        0)),
	    tag);
	json_decref(body);
	isc_launch_result_cleanup(&r);
	/* the rule is there: found, not made again */
	script_reset();
	reply(200, "{\"name\":\"default\",\"ipCidrRange\":\"10.128.0.0/20\"}");
	reply(200, "{\"items\":[" FW_SSH "]}");
	reply(200, "{\"name\":\"%s\"}", tag);
	reply(200, OP("op-s", "DONE", ""));
	reply(200, "{\"items\":[%s]}", inst_json("isc-cl-1-0001", "us-central1-a", "RUNNING"));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_int_equal(S.calls, 5);
	assert_string_equal(S.method[2], "GET");
	isc_launch_result_cleanup(&r);
	/* an organisation's own project: no tag, no rule, no check for one node */
	script_reset();
	sp.tenant = NULL;
	reply(200, OP("op-s", "DONE", ""));
	reply(200, "{\"items\":[%s]}", inst_json("isc-cl-1-0001", "us-central1-a", "RUNNING"));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_int_equal(S.calls, 2);
	assert_null(strstr(S.body[0], "\"tags\""));
	isc_launch_result_cleanup(&r);
	s->provider->session_free(s);
}

/* tagged: inst_json with network tag `tag`. */
static const char *tagged(const char *name, const char *status, const char *tag)
{
	static char buf[4][1200];
	static int k;
	char *b = buf[k++ % 4];
	const char *j = inst_json(name, "us-central1-a", status);
	snprintf(b, 1200, "{\"tags\":{\"items\":[\"%s\"]},%s", tag, j + 1);
	return b;
}

/*
 * describe sweeps the tenant rules of this broker (its hash in the name) no listed live
 * instance's tag names: deleted (a global Operation); a rule in use stays; then not again
 * until a tag seen live is gone.
 */
static void test_tenant_firewall_swept(void **state)
{
	struct isc_provider_session *s;
	struct isc_node_info *ni;
	size_t n;
	struct isc_err err;
	char ta[64], tb[64];
	(void)state;
	isc_gcp_tenant_tag("b1", "a", ta, &err);
	isc_gcp_tenant_tag("b1", "b", tb, &err);
	script_reset();
	ti_mode = "auto";
	s = session();
	ti_mode = "never";
	reply(200, TOKEN_OK);
	reply(200, "{\"items\":{\"zones/us-central1-a\":{\"instances\":[%s,%s]}}}",
	      tagged("isc-a-0001", "RUNNING", ta), tagged("isc-b-0001", "RUNNING", tb));
	reply(200, "{\"items\":[{\"name\":\"%s\"},{\"name\":\"%s\"}]}", ta, tb);
	assert_int_equal(s->provider->describe(s, "b1", &ni, &n, &err), 0);
	isc_node_infos_free(ni, n);
	assert_int_equal(S.calls, 3); /* the first describe sweeps: both in use */
	assert_non_null(strstr(S.url[2], "global/firewalls?maxResults=500&filter=name%20eq%20"));
	/* nothing changed: no sweep */
	reply(200, "{\"items\":{\"zones/us-central1-a\":{\"instances\":[%s,%s]}}}",
	      tagged("isc-a-0001", "RUNNING", ta), tagged("isc-b-0001", "RUNNING", tb));
	assert_int_equal(s->provider->describe(s, "b1", &ni, &n, &err), 0);
	isc_node_infos_free(ni, n);
	assert_int_equal(S.calls, 4);
	/* b's node is gone: its rule goes, a's stays */
	reply(200, "{\"items\":{\"zones/us-central1-a\":{\"instances\":[%s]}}}",
	      tagged("isc-a-0001", "RUNNING", ta));
	reply(200,
	      "{\"items\":[{\"name\":\"%s\"},{\"name\":\"%s\"},{\"name\":\"isc-t-b-0000ffff\"}]}",
	      ta, tb);
	reply(200, "{\"kind\":\"compute#operation\",\"name\":\"op-d\",\"status\":\"DONE\"}");
	assert_int_equal(s->provider->describe(s, "b1", &ni, &n, &err), 0);
	isc_node_infos_free(ni, n);
	assert_int_equal(S.calls, 7);
	assert_string_equal(S.method[6], "DELETE");
	assert_non_null(strstr(S.url[6], tb));
	s->provider->session_free(s);
}

static void test_launch_failover_and_body(void **state)
{
	struct isc_provider_session *s;
	struct isc_launch_spec sp = spec(2);
	struct isc_launch_result r;
	struct isc_err err;
	char rid_b[37];
	json_t *body, *props;
	(void)state;
	script_reset();
	s = session();
	reply(200, TOKEN_OK);
	reply(200, OP("op-a", "PENDING", ""));    /* zone a: accepted ... */
	reply(200, OP("op-a", "DONE", STOCKOUT)); /* ... then no room */
	reply(200, OP("op-b", "RUNNING", ""));    /* zone b */
	reply(200, OP("op-b", "DONE", ""));
	reply(200, "{\"items\":[%s,%s]}", inst_json("isc-cl-1-0002", "us-central1-b", "RUNNING"),
	      inst_json("isc-cl-1-0001", "us-central1-b", "STAGING"));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_int_equal(S.calls, 6);
	/* the token exchange: a jwt-bearer POST to the key's token_uri */
	assert_string_equal(S.url[0], "https://oauth2.googleapis.com/token");
	assert_non_null(strstr(S.body[0],
	                       "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-"
	                       "bearer&assertion=ey"));
	/* bulkInsert in zone a, then b, each with its own requestId */
	assert_string_equal(S.method[1], "POST");
	assert_non_null(strstr(S.url[1], "http://127.0.0.1:9/compute/v1/projects/example-project/"
	                                 "zones/us-central1-a/instances/bulkInsert?requestId="));
	isc_gcp_request_id("intent-1", "us-central1-b", rid_b);
	assert_non_null(strstr(S.url[3], rid_b));
	assert_string_equal(S.auth[1], "Bearer ya29.test");
	assert_string_equal(S.auth[3], "Bearer ya29.test"); /* cached, not exchanged again */
	assert_non_null(strstr(S.url[2], "zones/us-central1-a/operations/op-a"));
	assert_non_null(
	    strstr(S.url[5], "zones/us-central1-b/instances?filter=labels.isc-request"));
	body = json_loads(S.body[3], 0, NULL);
	assert_non_null(body);
	assert_string_equal(json_string_value(json_object_get(body, "count")), "2");
	assert_string_equal(json_string_value(json_object_get(body, "minCount")), "2");
	assert_string_equal(json_string_value(json_object_get(body, "namePattern")),
	                    "isc-cl-1-####");
	props = json_object_get(body, "instanceProperties");
	assert_string_equal(json_string_value(json_object_get(props, "machineType")),
	                    "a3-highgpu-8g");
	assert_string_equal(json_string_value(json_object_get(json_object_get(props, "scheduling"),
	                                                      "provisioningModel")),
	                    "SPOT");
	assert_string_equal(json_string_value(json_object_get(json_object_get(props, "scheduling"),
	                                                      "instanceTerminationAction")),
	                    "DELETE");
	assert_string_equal(json_string_value(json_object_get(json_object_get(props, "scheduling"),
	                                                      "onHostMaintenance")),
	                    "TERMINATE");
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(props, "labels"), "isc-broker")),
	    "b1");
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(props, "labels"), "isc-request")),
	    rid_b);
	assert_non_null(strstr(S.body[3], "\"ssh-keys\",\"value\":\"root:ssh-ed25519 "));
	json_decref(body);
	assert_string_equal(r.zone, "us-central1-b");
	assert_string_equal(r.token, rid_b);
	assert_int_equal(r.n_nodes, 2);
	assert_string_equal(r.nodes[0].id, "isc-cl-1-0001"); /* ranks in name order */
	assert_int_equal(r.nodes[0].state, ISC_NODE_PENDING);
	assert_string_equal(r.nodes[1].private_ip, "10.0.0.13");
	assert_string_equal(r.nodes[0].cluster_id, "cl_1");
	assert_int_equal(r.nodes[0].spot, 1);
	isc_launch_result_cleanup(&r);
	s->provider->session_free(s);
}

static void test_launch_quota_and_capacity(void **state)
{
	struct isc_provider_session *s;
	struct isc_launch_spec sp = spec(4);
	struct isc_launch_result r;
	struct isc_err err;
	(void)state;
	script_reset();
	s = session();
	reply(200, TOKEN_OK);
	reply(403, "{\"error\":{\"code\":403,\"message\":\"Quota 'GPUS' exceeded.\",\"errors\":[{"
	           "\"message\":\"Quota 'GPUS' exceeded.\",\"domain\":\"usageLimits\",\"reason\":"
	           "\"quotaExceeded\"}]}}");
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), ISC_EQUOTA);
	assert_int_equal(S.calls, 2); /* never retried, never tried in the next zone */
	assert_non_null(strstr(err.msg, "quotaExceeded"));
	s->provider->session_free(s);

	/* 503 insufficientCapacity at the call in a, stockout in b: capacity, both zones tried */
	script_reset();
	s = session();
	reply(200, TOKEN_OK);
	reply(503, "{\"error\":{\"code\":503,\"message\":\"no room\",\"errors\":[{\"reason\":"
	           "\"insufficientCapacity\",\"message\":\"no room\"}]}}");
	reply(200, OP("op-b", "DONE", STOCKOUT));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), ISC_ECAPACITY);
	assert_int_equal(S.calls, 3);
	assert_non_null(strstr(err.msg, "ZONE_RESOURCE_POOL_EXHAUSTED"));
	s->provider->session_free(s);

	/* rate limited twice, then accepted: retried by the HTTP layer with backoff */
	script_reset();
	s = session();
	sp.count = 1;
	reply(200, TOKEN_OK);
	reply(403, "{\"error\":{\"code\":403,\"errors\":[{\"reason\":\"rateLimitExceeded\"}]}}");
	reply(429, "{\"error\":{\"code\":429,\"status\":\"RESOURCE_EXHAUSTED\"}}");
	reply(200, OP("op-a", "DONE", ""));
	reply(200, "{\"items\":[%s]}", inst_json("isc-cl-1-0001", "us-central1-a", "RUNNING"));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_int_equal(S.calls, 5);
	assert_int_equal(r.n_nodes, 1);
	isc_launch_result_cleanup(&r);
	s->provider->session_free(s);
}

static char zones_seen[4][32];
static size_t n_zones_seen;

static void record_zone(void *ctx, const char *zone)
{
	(void)ctx;
	assert_true(n_zones_seen < 4);
	snprintf(zones_seen[n_zones_seen++], sizeof(zones_seen[0]), "%s", zone);
}

static void test_launch_unreadable_and_lagging(void **state)
{
	struct isc_provider_session *s;
	struct isc_launch_spec sp = spec(2);
	struct isc_launch_result r;
	struct isc_err err;
	(void)state;
	/* Each zone is announced before its bulkInsert; an accepted but unreadable reply is an
	 * unknown outcome (transient), never invalid, and no further zone is tried. */
	script_reset();
	n_zones_seen = 0;
	s = session();
	sp.before_zone = record_zone;
	reply(200, TOKEN_OK);
	reply(200, OP("op-a", "DONE", STOCKOUT));
	reply(200, "{\"kind\":\"compute#operation\",\"name\":\"op-b\",\"sta");
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), ISC_ETRANSIENT);
	assert_int_equal(err.code, ISC_ETRANSIENT);
	assert_non_null(strstr(err.msg, "accepted but a reply cannot be read"));
	assert_int_equal(S.calls, 3);
	assert_int_equal(n_zones_seen, 2);
	assert_string_equal(zones_seen[0], "us-central1-a");
	assert_string_equal(zones_seen[1], "us-central1-b");
	s->provider->session_free(s);

	/* The gang's listing lags behind the DONE Operation: read again, nothing deleted. */
	script_reset();
	s = session();
	sp.before_zone = NULL;
	reply(200, TOKEN_OK);
	reply(200, OP("op-a", "DONE", ""));
	reply(200, "{\"items\":[%s]}", inst_json("isc-cl-1-0001", "us-central1-a", "RUNNING"));
	reply(200, "{\"items\":[%s,%s]}", inst_json("isc-cl-1-0001", "us-central1-a", "RUNNING"),
	      inst_json("isc-cl-1-0002", "us-central1-a", "RUNNING"));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_int_equal(S.calls, 4);
	assert_int_equal(r.n_nodes, 2);
	for (size_t i = 0; i < S.calls; i++)
		assert_string_not_equal(S.method[i], "DELETE");
	isc_launch_result_cleanup(&r);
	s->provider->session_free(s);
}

static void test_auth_refresh_and_refusal(void **state)
{
	struct isc_provider_session *s;
	struct isc_identity id;
	struct isc_err err;
	(void)state;
	/* A 401 refreshes the token once and repeats the call. */
	script_reset();
	s = session();
	reply(200, TOKEN_OK);
	reply(401, "{\"error\":{\"code\":401,\"message\":\"Invalid Credentials\",\"errors\":[{"
	           "\"reason\":\"authError\"}]}}");
	reply(200, "{\"access_token\":\"ya29.second\",\"expires_in\":3599}");
	reply(200, "{\"kind\":\"compute#project\",\"name\":\"example-project\",\"id\":\"42\"}");
	assert_int_equal(s->provider->check_credentials(s, &id, &err), 0);
	assert_int_equal(S.calls, 4);
	assert_string_equal(S.auth[3], "Bearer ya29.second");
	assert_string_equal(id.account, "example-project");
	assert_string_equal(id.principal,
	                    "service-account@example-project.iam.gserviceaccount.com");
	assert_string_equal(id.user_id, "42");
	assert_string_equal(S.url[1], "http://127.0.0.1:9/compute/v1/projects/example-project");
	s->provider->session_free(s);

	/* Two 401s in a row: auth. */
	script_reset();
	s = session();
	reply(200, TOKEN_OK);
	reply(401, "{\"error\":{\"code\":401,\"errors\":[{\"reason\":\"authError\"}]}}");
	reply(200, TOKEN_OK);
	reply(401, "{\"error\":{\"code\":401,\"errors\":[{\"reason\":\"authError\"}]}}");
	assert_int_equal(s->provider->check_credentials(s, &id, &err), ISC_EAUTH);
	assert_int_equal(S.calls, 4);
	s->provider->session_free(s);

	/* A refused assertion: auth after exactly one token call, and no second one later. */
	script_reset();
	s = session();
	reply(400,
	      "{\"error\":\"invalid_grant\",\"error_description\":\"Invalid JWT Signature.\"}");
	assert_int_equal(s->provider->check_credentials(s, &id, &err), ISC_EAUTH);
	assert_int_equal(S.calls, 1);
	/* The OAuth error code only: the answer's own words never reach a message. */
	assert_non_null(strstr(err.msg, "token exchange: invalid_grant (HTTP 400)"));
	assert_null(strstr(err.msg, "Invalid JWT Signature"));
	assert_null(strstr(err.msg, "BEGIN"));
	assert_int_equal(s->provider->check_credentials(s, &id, &err), ISC_EAUTH);
	assert_int_equal(S.calls, 1);
	s->provider->session_free(s);

	/* The token endpoint unreachable: transient after the HTTP layer's retries. */
	script_reset();
	s = session();
	for (int i = 0; i < 5; i++)
		reply(0, "x");
	assert_int_equal(s->provider->check_credentials(s, &id, &err), ISC_ETRANSIENT);
	s->provider->session_free(s);
}

static void test_token_refreshed_before_expiry(void **state)
{
	struct isc_provider_session *s;
	struct isc_identity id;
	struct isc_err err;
	(void)state;
	script_reset();
	s = session();
	reply(200, "{\"access_token\":\"ya29.one\",\"expires_in\":600}");
	reply(200, "{\"name\":\"p\"}");
	reply(200, "{\"name\":\"p\"}");
	reply(200, "{\"access_token\":\"ya29.two\",\"expires_in\":600}");
	reply(200, "{\"name\":\"p\"}");
	assert_int_equal(s->provider->check_credentials(s, &id, &err), 0);
	clock_now += 200 * 1000; /* 400 s left: still good */
	assert_int_equal(s->provider->check_credentials(s, &id, &err), 0);
	clock_now += 150 * 1000; /* 250 s left: inside the margin, renewed first */
	assert_int_equal(s->provider->check_credentials(s, &id, &err), 0);
	assert_int_equal(S.calls, 5);
	assert_string_equal(S.auth[4], "Bearer ya29.two");
	s->provider->session_free(s);
}

static void test_token_shared_between_sessions(void **state)
{
	struct isc_provider_session *s1, *s2;
	struct isc_identity id;
	struct isc_err err;
	(void)state;
	script_reset();
	s1 = session();
	s2 = session();
	reply(200, TOKEN_OK);
	reply(200, "{\"name\":\"p\"}");
	reply(200, "{\"name\":\"p\"}");
	reply(401, "{\"error\":{\"code\":401,\"errors\":[{\"reason\":\"authError\"}]}}");
	reply(200, "{\"access_token\":\"ya29.new\",\"expires_in\":3599}");
	reply(200, "{\"name\":\"p\"}");
	reply(200, "{\"name\":\"p\"}");
	assert_int_equal(s1->provider->check_credentials(s1, &id, &err), 0);
	/* a second session of the same key: no second exchange */
	assert_int_equal(s2->provider->check_credentials(s2, &id, &err), 0);
	assert_int_equal(S.calls, 3);
	assert_string_equal(S.auth[2], "Bearer ya29.test");
	s2->provider->session_free(s2);
	/* a 401 in one session: the token is forgotten for all of them */
	assert_int_equal(s1->provider->check_credentials(s1, &id, &err), 0);
	assert_int_equal(S.calls, 6);
	s2 = session();
	assert_int_equal(s2->provider->check_credentials(s2, &id, &err), 0);
	assert_int_equal(S.calls, 7);
	assert_string_equal(S.auth[6], "Bearer ya29.new");
	s1->provider->session_free(s1);
	s2->provider->session_free(s2);
}

static void test_describe_preemption_and_terminate(void **state)
{
	struct isc_provider_session *s;
	struct isc_node_info *ni;
	size_t n;
	struct isc_err err;
	const char *ids[3] = {"isc-cl-1-0001", "isc-cl-1-0002", "isc-cl-1-0003"};
	(void)state;
	script_reset();
	s = session();
	reply(200, TOKEN_OK);
	reply(
	    200,
	    "{\"items\":{\"zones/us-central1-a\":{\"instances\":[%s,%s]},\"zones/europe-west4-a\":"
	    "{\"instances\":[%s]},\"zones/us-central1-c\":{\"warning\":{\"code\":"
	    "\"NO_RESULTS_ON_PAGE\"}}},\"nextPageToken\":\"p2\"}",
	    inst_json("isc-cl-1-0001", "us-central1-a", "RUNNING"),
	    inst_json("isc-cl-1-0002", "us-central1-a", "STOPPING"),
	    inst_json("isc-cl-9-0001", "europe-west4-a", "RUNNING"));
	reply(200, "{\"items\":{\"zones/us-central1-b\":{\"instances\":[%s]}}}",
	      inst_json("isc-cl-1-0003", "us-central1-b", "RUNNING"));
	reply(200,
	      "{\"items\":{\"zones/us-central1-a\":{\"operations\":[{\"name\":\"op-p\",\"status\":"
	      "\"DONE\",\"operationType\":\"compute.instances.preempted\",\"zone\":\"https://x/"
	      "zones/us-central1-a\",\"targetLink\":\"https://x/zones/us-central1-a/instances/"
	      "isc-cl-1-0002\",\"insertTime\":\"2025-11-23T08:00:00.000Z\"}]}}}");
	assert_int_equal(s->provider->describe(s, "b1", &ni, &n, &err), 0);
	assert_int_equal(S.calls, 4);
	assert_non_null(
	    strstr(S.url[1], "aggregated/instances?filter=labels.isc-broker%20%3D%20%22b1%22"));
	assert_non_null(strstr(S.url[2], "pageToken=p2"));
	assert_non_null(strstr(S.url[3], "aggregated/operations?filter=operationType"));
	assert_int_equal(n, 3); /* the europe-west4 node is another region's */
	assert_int_equal(ni[0].interruption_noticed, 0);
	assert_int_equal(ni[1].interruption_noticed, 1);
	assert_int_equal(ni[1].state, ISC_NODE_STOPPING);
	assert_int_equal(ni[1].interruption_at_ms, 1763884800000LL);
	assert_string_equal(ni[2].zone, "us-central1-b");
	assert_string_equal(ni[0].experiment_id, "e1");
	isc_node_infos_free(ni, n);
	s->provider->session_free(s);

	/* terminate: one lookup for the zones, one delete each; 404 is done already */
	script_reset();
	s = session();
	reply(200, TOKEN_OK);
	reply(200, "{\"items\":{\"zones/us-central1-a\":{\"instances\":[%s,%s]}}}",
	      inst_json("isc-cl-1-0001", "us-central1-a", "RUNNING"),
	      inst_json("isc-cl-1-0002", "us-central1-a", "RUNNING"));
	reply(200, OP("op-d1", "RUNNING", ""));
	reply(404, "{\"error\":{\"code\":404,\"errors\":[{\"reason\":\"notFound\"}]}}");
	assert_int_equal(s->provider->terminate(s, ids, 3, &err), 0);
	assert_int_equal(S.calls, 4);
	assert_non_null(strstr(S.url[1], "%28name%20%3D%20%22isc-cl-1-0001%22%29%20OR%20"));
	assert_string_equal(S.method[2], "DELETE");
	assert_non_null(strstr(S.url[2], "zones/us-central1-a/instances/isc-cl-1-0001?requestId="));
	assert_int_equal(s->provider->terminate(s, (const char *[]){"Bad Name"}, 1, &err),
	                 ISC_EINVALID);
	s->provider->session_free(s);
}

/* Google's answer to instances.get of a deleted instance (the reference: 404 notFound). */
#define GET_404                                                                                    \
	"{\"error\":{\"code\":404,\"message\":\"The resource "                                     \
	"'projects/p/zones/us-central1-a/instances/isc-cl-1-0001' was not found\",\"errors\":"     \
	"[{\"message\":\"The resource 'projects/p/zones/us-central1-a/instances/isc-cl-1-0001' "   \
	"was not found\",\"domain\":\"global\",\"reason\":\"notFound\"}]}}"

/* confirm_gone: instances.get's 404 notFound or TERMINATED is gone, anything else is not. */
static void test_confirm_gone(void **state)
{
	struct isc_provider_session *s;
	struct isc_err err;
	const char *ids[5] = {"isc-cl-1-0001", "isc-cl-1-0002", "isc-cl-1-0003", "isc-cl-1-0004",
	                      "Bad Name"};
	const char *zones[5] = {"us-central1-a", "us-central1-a", "us-central1-b", "europe-west4-a",
	                        "us-central1-a"};
	int gone[5] = {9, 9, 9, 9, 9};
	(void)state;

	assert_int_equal(isc_gce_get_gone(404, LIT(GET_404)), 1);
	assert_int_equal(isc_gce_get_gone(404, LIT("<html>Not Found</html>")), 0);
	assert_int_equal(
	    isc_gce_get_gone(404,
	                     LIT("{\"error\":{\"code\":404,\"errors\":[{\"reason\":\"x\"}]}}")),
	    0);
	assert_int_equal(isc_gce_get_gone(200, inst_json("a", "us-central1-a", "TERMINATED"),
	                                  strlen(inst_json("a", "us-central1-a", "TERMINATED"))),
	                 1);
	assert_int_equal(isc_gce_get_gone(200, inst_json("a", "us-central1-a", "RUNNING"),
	                                  strlen(inst_json("a", "us-central1-a", "RUNNING"))),
	                 0);
	assert_int_equal(isc_gce_get_gone(200, inst_json("a", "us-central1-a", "STOPPING"),
	                                  strlen(inst_json("a", "us-central1-a", "STOPPING"))),
	                 0);
	assert_int_equal(isc_gce_get_gone(503, LIT("{\"error\":{\"code\":503}}")), 0);
	assert_int_equal(isc_gce_get_gone(0, NULL, 0), 0);
	assert_int_equal(isc_gce_get_gone(200, LIT("not json")), 0);

	/* One GET per id of this region with a name and zone that can be ours. */
	script_reset();
	s = session();
	assert_non_null(s->provider->confirm_gone);
	reply(200, TOKEN_OK);
	reply(404, GET_404);
	reply(200, "%s", inst_json("isc-cl-1-0002", "us-central1-a", "RUNNING"));
	reply(200, "%s", inst_json("isc-cl-1-0003", "us-central1-b", "TERMINATED"));
	assert_int_equal(s->provider->confirm_gone(s, ids, zones, 5, gone, &err), 0);
	assert_int_equal(S.calls, 4);
	assert_string_equal(S.method[1], "GET");
	assert_non_null(strstr(S.url[1], "/zones/us-central1-a/instances/isc-cl-1-0001"));
	assert_non_null(strstr(S.url[3], "/zones/us-central1-b/instances/isc-cl-1-0003"));
	assert_int_equal(gone[0], 1);
	assert_int_equal(gone[1], 0);
	assert_int_equal(gone[2], 1);
	assert_int_equal(gone[3], 0); /* another region's: not asked */
	assert_int_equal(gone[4], 0); /* not an instance name: not asked */
	s->provider->session_free(s);

	/* A refusal stops the calls: the answers before it stand, the rest are not gone. */
	script_reset();
	s = session();
	reply(200, TOKEN_OK);
	reply(404, GET_404);
	reply(403, "{\"error\":{\"code\":403,\"errors\":[{\"reason\":\"forbidden\"}]}}");
	assert_int_equal(s->provider->confirm_gone(s, ids, zones, 3, gone, &err), ISC_EAUTH);
	assert_int_equal(S.calls, 3);
	assert_int_equal(gone[0], 1);
	assert_int_equal(gone[1], 0);
	assert_int_equal(gone[2], 0);
	s->provider->session_free(s);
}

static void test_listing_never_cut_short(void **state)
{
	const struct isc_provider *p = isc_provider_find("gcp");
	const struct isc_kv creds[] = {{"service_account_json", fake_key_json}};
	const struct isc_kv items[] = {{"endpoint_compute", "http://127.0.0.1:9/compute/v1"},
	                               {"describe_max_pages", "2"}};
	struct isc_provider_settings st = {items, 2, creds, 1};
	struct isc_provider_session *s = NULL;
	struct isc_node_info *ni;
	struct isc_buf big;
	size_t n;
	struct isc_err err;
	(void)state;
	script_reset();
	assert_int_equal(p->session_new(&st, "us-central1", &scripted, &fake_clock, &s, &err), 0);
	reply(200, TOKEN_OK);
	reply(200, "{\"items\":{},\"nextPageToken\":\"p2\"}");
	reply(200, "{\"items\":{},\"nextPageToken\":\"p3\"}");
	assert_int_equal(s->provider->describe(s, "b1", &ni, &n, &err), ISC_EINVALID);
	assert_non_null(strstr(err.msg, "describe_max_pages"));
	assert_int_equal(S.calls, 3);
	/* a page with more than the 500 asked for is not Compute talking */
	isc_buf_init(&big, 0);
	assert_int_equal(isc_buf_puts(&big, "{\"items\":[{\"name\":\"n\"}"), 0);
	for (int i = 0; i < 500; i++)
		assert_int_equal(isc_buf_puts(&big, ",{\"name\":\"n\"}"), 0);
	assert_int_equal(isc_buf_puts(&big, "]}"), 0);
	reply(200, "%s", big.data);
	assert_int_equal(s->provider->describe(s, "b1", &ni, &n, &err), ISC_EINVALID);
	assert_non_null(strstr(err.msg, "a page of 501 items"));
	isc_buf_cleanup(&big);
	s->provider->session_free(s);
}

static void test_session_errors(void **state)
{
	const struct isc_provider *p = isc_provider_find("gcp");
	struct isc_provider_session *s = NULL;
	struct isc_err err;
	const struct isc_kv bad_file[] = {{"credentials_file", "/nonexistent/key.json"}};
	const struct isc_kv bad_ep[] = {{"endpoint_compute", "ftp://x/compute/v1/"}};
	const struct isc_kv creds[] = {{"service_account_json", fake_key_json}};
	struct isc_provider_settings st1 = {bad_file, 1, NULL, 0};
	struct isc_provider_settings st2 = {bad_ep, 1, creds, 1};
	(void)state;
	unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
	assert_int_equal(p->session_new(&st1, "us-central1", &scripted, &fake_clock, &s, &err),
	                 ISC_EAUTH);
	assert_non_null(strstr(err.msg, "/nonexistent/key.json"));
	assert_int_equal(p->session_new(&st2, "us-central1", &scripted, &fake_clock, &s, &err),
	                 ISC_EINVALID);
	assert_non_null(strstr(err.msg, "ftp://"));
	/* plain http to a host that is not loopback: refused before any connection */
	{
		const struct isc_kv far[] = {
		    {"endpoint_compute", "http://compute.example.com/compute/v1/"}};
		const struct isc_kv far_ok[] = {
		    {"endpoint_compute", "http://compute.example.com/compute/v1/"},
		    {"allow_insecure_endpoint", "true"}};
		struct isc_provider_settings st3 = {far, 1, creds, 1};
		struct isc_provider_settings st4 = {far_ok, 2, creds, 1};
		json_t *k = json_loads(fake_key_json, 0, NULL);
		char *txt;
		assert_int_equal(
		    p->session_new(&st3, "us-central1", &scripted, &fake_clock, &s, &err),
		    ISC_EINVALID);
		assert_non_null(strstr(err.msg, "compute.example.com"));
		assert_non_null(strstr(err.msg, "allow_insecure_endpoint"));
		assert_int_equal(
		    p->session_new(&st4, "us-central1", &scripted, &fake_clock, &s, &err), 0);
		s->provider->session_free(s);
		json_object_set_new(k, "token_uri", json_string("http://oauth.example.com/token"));
		txt = json_dumps(k, 0);
		{
			const struct isc_kv c2[] = {{"service_account_json", txt}};
			const struct isc_kv it2[] = {
			    {"endpoint_compute", "http://127.0.0.1:9/compute/v1/"}};
			struct isc_provider_settings st5 = {it2, 1, c2, 1};
			assert_int_equal(
			    p->session_new(&st5, "us-central1", &scripted, &fake_clock, &s, &err),
			    ISC_EINVALID);
			assert_non_null(strstr(err.msg, "token_uri"));
		}
		free(txt);
		json_decref(k);
	}
	/* list prices: no refresh_prices slot, which prices/ counts as list-only */
	assert_null(p->refresh_prices);
}

/* A session on an organisation's key whose token_uri is uri; the error code of session_new. */
static int byo_session(const char *uri, const char *compute, struct isc_err *err)
{
	const struct isc_provider *p = isc_provider_find("gcp");
	struct isc_provider_session *s = NULL;
	json_t *k = json_loads(fake_key_json, 0, NULL);
	const struct isc_kv items[] = {{"endpoint_compute", compute}};
	struct isc_provider_settings st = {items, compute ? 1 : 0, NULL, 1};
	struct isc_kv creds[1];
	char *txt;
	int rc;

	json_object_set_new(k, "token_uri", json_string(uri));
	txt = json_dumps(k, 0);
	creds[0] = (struct isc_kv){"service_account_json", txt};
	st.credentials = creds;
	rc = p->session_new(&st, "us-central1", &scripted, &fake_clock, &s, err);
	if (s)
		s->provider->session_free(s);
	free(txt);
	json_decref(k);
	return rc;
}

/*
 * Issue 42: an organisation's key runs in the project its key file names, never in the
 * platform's ([providers.gcp] project), which the settings still carry.
 */
static void test_byo_key_runs_in_its_own_project(void **state)
{
	const struct isc_provider *p = isc_provider_find("gcp");
	struct isc_provider_session *s = NULL;
	const struct isc_kv creds[] = {{"service_account_json", fake_key_json}};
	const struct isc_kv items[] = {{"endpoint_compute", "http://127.0.0.1:9/compute/v1"},
	                               {"project", "platform-project"},
	                               {"compact_placement", "never"},
	                               {"firewall_check", "never"},
	                               {"tenant_isolation", "never"}};
	struct isc_provider_settings st = {items, 5, creds, 1, 1};
	struct isc_node_info *ni = NULL;
	size_t n = 0;
	struct isc_err err;
	(void)state;

	script_reset();
	assert_int_equal(p->session_new(&st, "us-central1", &scripted, &fake_clock, &s, &err), 0);
	reply(200, TOKEN_OK);
	reply(200, "{\"items\":{}}");
	assert_int_equal(s->provider->describe(s, "b1", &ni, &n, &err), 0);
	assert_true(S.calls >= 2);
	assert_non_null(strstr(S.url[1], "/projects/example-project/"));
	assert_null(strstr(S.url[1], "platform-project"));
	isc_node_infos_free(ni, n);
	s->provider->session_free(s);
}

/*
 * Issue 29: an organisation's key names no host iscd talks to. Its token_uri is
 * Google's (any of Google's spellings) or "/token" beside the operator's own
 * endpoint_compute; anything else is refused when the session is made, naming the
 * field, with no request sent. The operator's own key file may name its own.
 */
static void test_byo_token_uri_is_google_or_the_operators(void **state)
{
	const char *mock = "http://127.0.0.1:9/compute/v1/";
	static const char *const refused[] = {
	    "http://127.0.0.1:5555/token",        /* a loopback listener of the caller's */
	    "http://127.0.0.1:9/other",           /* the operator's host, another path */
	    "http://127.0.0.1:9/token?x=1",       /* ... or a query */
	    "http://127.0.0.1:9@127.0.0.2/token", /* userinfo trick */
	    "http://127.0.0.10:9/token",
	    "https://oauth2.googleapis.com.evil.example/token",
	    "https://oauth2.googleapis.com/token/../x",
	};
	struct isc_err err;
	(void)state;

	script_reset();
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		assert_int_equal(byo_session(refused[i], mock, &err), ISC_EINVALID);
		assert_non_null(strstr(err.msg, "\"token_uri\""));
		assert_non_null(strstr(err.msg, "the organisation's GCP key"));
		assert_non_null(strstr(err.msg, "http://127.0.0.1:9/token"));
	}
	/* (not even an http(s) URL to the parser: a malformed organisation's key, which the
	 * session refuses as unusable credentials, issue 42) */
	assert_int_equal(byo_session("HTTPS://OAUTH2.GOOGLEAPIS.COM/TOKEN", mock, &err), ISC_EAUTH);
	assert_non_null(strstr(err.msg, "\"token_uri\""));
	/* Without an operator endpoint only Google's own. */
	assert_int_equal(byo_session("https://compute.googleapis.com/token", NULL, &err),
	                 ISC_EINVALID);
	assert_non_null(strstr(err.msg, "is not Google's token endpoint"));
	assert_int_equal(byo_session("http://127.0.0.1:9/token", NULL, &err), ISC_EINVALID);
	assert_int_equal(S.calls, 0); /* refused before any request */
	assert_int_equal(byo_session("https://oauth2.googleapis.com/token", NULL, &err), 0);
	assert_int_equal(byo_session("https://oauth2.googleapis.com/token", mock, &err), 0);
	assert_int_equal(byo_session("https://accounts.google.com/o/oauth2/token", NULL, &err), 0);
	assert_int_equal(byo_session("https://www.googleapis.com/oauth2/v4/token", NULL, &err), 0);
	assert_int_equal(byo_session("http://127.0.0.1:9/token", mock, &err), 0);
	assert_int_equal(byo_session("http://127.0.0.1:9/token", "http://127.0.0.1:9", &err), 0);
	assert_int_equal(S.calls, 0);
	/* The operator's own key file: its token_uri is the operator's choice. */
	{
		const struct isc_provider *p = isc_provider_find("gcp");
		struct isc_provider_session *s = NULL;
		char path[] = "/tmp/isc-gcp-key-XXXXXX";
		json_t *k = json_loads(fake_key_json, 0, NULL);
		int fd = mkstemp(path);
		const struct isc_kv items[] = {{"credentials_file", path},
		                               {"endpoint_compute", mock}};
		struct isc_provider_settings st = {items, 2, NULL, 0};
		assert_true(fd >= 0);
		close(fd);
		json_object_set_new(k, "token_uri", json_string("http://127.0.0.1:5555/token"));
		assert_int_equal(json_dump_file(k, path, 0), 0);
		json_decref(k);
		assert_int_equal(
		    p->session_new(&st, "us-central1", &scripted, &fake_clock, &s, &err), 0);
		s->provider->session_free(s);
		unlink(path);
	}
}

/*
 * Issue 42: an organisation's key that lacks its service-account JSON (or has an empty
 * one) ran on the platform's own key file. Now such a key is refused when the session
 * is made (ISC_EAUTH naming the field) while credentials_file,
 * GOOGLE_APPLICATION_CREDENTIALS and GOOGLE_CLOUD_PROJECT all name the platform's.
 */
static void test_byo_key_never_the_platforms(void **state)
{
	const struct isc_provider *p = isc_provider_find("gcp");
	struct isc_provider_session *s = NULL;
	char path[] = "/tmp/isc-gcp-platform-XXXXXX";
	int fd = mkstemp(path);
	const struct isc_kv items[] = {{"credentials_file", path},
	                               {"endpoint_compute", "http://127.0.0.1:9/compute/v1/"}};
	json_t *k = json_loads(fake_key_json, 0, NULL);
	char *no_project;
	struct isc_err err;
	struct {
		struct isc_kv kv;
		size_t n;
		const char *named;
	} cases[3];
	(void)state;

	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(json_dump_file(k, path, 0), 0);
	setenv("GOOGLE_APPLICATION_CREDENTIALS", path, 1);
	setenv("GOOGLE_CLOUD_PROJECT", "platform-project", 1);
	json_object_del(k, "project_id");
	no_project = json_dumps(k, 0);
	cases[0].kv = (struct isc_kv){"x", "y"};
	cases[0].n = 1;
	cases[0].named = "service_account_json is missing";
	cases[1].kv = (struct isc_kv){"service_account_json", ""};
	cases[1].n = 1;
	cases[1].named = "service_account_json is empty";
	cases[2].kv = (struct isc_kv){"service_account_json", no_project};
	cases[2].n = 1;
	cases[2].named = "\"project_id\" is missing";
	script_reset();
	for (size_t i = 0; i < 3; i++) {
		struct isc_provider_settings st = {items, 2, &cases[i].kv, cases[i].n};
		isc_err_clear(&err);
		assert_int_equal(
		    p->session_new(&st, "us-central1", &scripted, &fake_clock, &s, &err),
		    ISC_EAUTH);
		assert_null(s);
		assert_non_null(strstr(err.msg, cases[i].named));
	}
	/* Marked as an organisation's key with no field at all: still never the platform's. */
	{
		struct isc_provider_settings st = {items, 2, NULL, 0, 1};
		assert_int_equal(
		    p->session_new(&st, "us-central1", &scripted, &fake_clock, &s, &err),
		    ISC_EAUTH);
		assert_non_null(strstr(err.msg, "service_account_json is missing"));
	}
	/* The same key file as the operator's own: the platform's session still works. */
	{
		struct isc_provider_settings st = {items, 2, NULL, 0};
		assert_int_equal(
		    p->session_new(&st, "us-central1", &scripted, &fake_clock, &s, &err), 0);
		s->provider->session_free(s);
	}
	assert_int_equal(S.calls, 0);
	unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
	unsetenv("GOOGLE_CLOUD_PROJECT");
	unlink(path);
	free(no_project);
	json_decref(k);
}

/* ---- against the mock cloud ---- */

static int mock_skip(void)
{
	const char *u = getenv("MOCKCLOUD_URL"), *k = getenv("MOCKCLOUD_GCP_KEY");
	return !u || !u[0] || !k || !k[0];
}

static struct isc_provider_session *mock_session_key(const char *key_json)
{
	const struct isc_provider *p = isc_provider_find("gcp");
	char ep[512];
	const struct isc_kv it[] = {{"endpoint_compute", ep}};
	const struct isc_kv c[] = {{"service_account_json", key_json}};
	struct isc_provider_settings st = {it, 1, c, 1};
	struct isc_provider_session *s = NULL;
	struct isc_err err;
	snprintf(ep, sizeof(ep), "%s/compute/v1/", getenv("MOCKCLOUD_URL"));
	assert_int_equal(p->session_new(&st, "us-central1", NULL, NULL, &s, &err), 0);
	return s;
}

static struct isc_provider_session *mock_session(void)
{
	char *key = slurp(getenv("MOCKCLOUD_GCP_KEY"), NULL);
	struct isc_provider_session *s = mock_session_key(key);
	free(key);
	return s;
}

static long mock_calls(const char *action)
{
	json_t *c = mock_api("GET", "calls", NULL);
	long n = (long)json_integer_value(json_object_get(json_object_get(c, "by_action"), action));
	json_decref(c);
	return n;
}

/* GCE instances of the mock carrying request id `rid` (deleted ones included). */
static size_t mock_count_request(const char *rid)
{
	json_t *all = mock_api("GET", "instances?provider=gcp", NULL), *v;
	size_t i, n = 0;
	json_array_foreach(all, i, v)
	{
		const char *t = json_string_value(json_object_get(v, "client_token"));
		if (t && strcmp(t, rid) == 0)
			n++;
	}
	json_decref(all);
	return n;
}

/*
 * The HTTP status of resourcePolicies.get of `name` (us-central1) on the mock, asked with
 * the bearer token the driver's describes cached: 200 while the policy stands, 404 after.
 */
static long mock_policy_status(const char *name)
{
	char *key_json = slurp(getenv("MOCKCLOUD_GCP_KEY"), NULL), url[512], auth[4200];
	struct isc_gcp_key k;
	struct isc_gcp_token t = {0};
	struct isc_err err;
	struct curl_slist *h = NULL;
	struct mock_mem m = {NULL, 0};
	long code = 0;
	CURL *c = curl_easy_init();
	assert_int_equal(isc_gcp_key_parse(key_json, strlen(key_json), "mock", &k, &err), 0);
	free(key_json);
	assert_int_equal(isc_gcp_token_cached(&k, isc_wall_ms(), &t), 1);
	snprintf(url, sizeof(url),
	         "%s/compute/v1/projects/isc-mock-project/regions/us-central1/resourcePolicies/%s",
	         getenv("MOCKCLOUD_URL"), name);
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s", t.access_token);
	h = curl_slist_append(h, auth);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, mock_mem_cb);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &m);
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_cleanup(c);
	curl_slist_free_all(h);
	free(m.p);
	isc_gcp_token_cleanup(&t);
	isc_gcp_key_cleanup(&k);
	return code;
}

static const struct isc_kv mtags[] = {
    {ISC_TAG_BROKER, "mock-gcp"}, {ISC_TAG_CLUSTER, "cl_m1"}, {ISC_TAG_EXPERIMENT, "exp_m1"}};

static struct isc_launch_spec mock_spec(unsigned n, const char *token)
{
	static const char *const z[] = {"us-central1-a", "us-central1-b", "us-central1-c"};
	struct isc_launch_spec sp = spec(n);
	sp.instance_type = "g2-standard-48";
	sp.zones = z;
	sp.n_zones = 3;
	sp.tags = mtags;
	sp.idempotency_token = token;
	return sp;
}

static void test_mock_gang_preempt_terminate(void **state)
{
	struct isc_provider_session *s;
	struct isc_launch_spec sp = mock_spec(4, "mock-gcp-gang-1");
	struct isc_launch_result r;
	struct isc_node_info *ni;
	struct isc_identity id;
	struct isc_err err;
	const char *ids[4];
	char body[512], pname[64];
	size_t n;
	(void)state;
	if (mock_skip())
		skip();
	s = mock_session();
	assert_int_equal(s->provider->check_credentials(s, &id, &err), 0);
	assert_string_equal(id.account, "isc-mock-project");
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_int_equal(r.n_nodes, 4);
	assert_string_equal(r.zone, "us-central1-a");
	assert_int_equal(s->provider->describe(s, "mock-gcp", &ni, &n, &err), 0);
	assert_int_equal(n, 4);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(ni[i].state, ISC_NODE_RUNNING);
		assert_int_equal(ni[i].spot, 1);
		assert_string_equal(ni[i].cluster_id, "cl_m1");
		assert_string_equal(ni[i].experiment_id, "exp_m1");
		assert_true(strncmp(ni[i].private_ip, "127.", 4) == 0);
		assert_int_equal(ni[i].interruption_noticed, 0);
	}
	isc_node_infos_free(ni, n);
	/* preempt node 1: STOPPING with the notice at once, then gone */
	snprintf(body, sizeof(body), "{\"kind\":\"preempt\",\"instance_id\":\"%s\",\"notice_s\":1}",
	         r.nodes[1].id);
	json_decref(mock_api("POST", "faults", body));
	assert_int_equal(s->provider->describe(s, "mock-gcp", &ni, &n, &err), 0);
	assert_int_equal(n, 4);
	for (size_t i = 0; i < n; i++) {
		int hit = strcmp(ni[i].id, r.nodes[1].id) == 0;
		assert_int_equal(ni[i].interruption_noticed, hit);
		if (hit) {
			assert_int_equal(ni[i].state, ISC_NODE_STOPPING);
			assert_true(ni[i].interruption_at_ms > 0);
		}
	}
	isc_node_infos_free(ni, n);
	for (int tries = 0;; tries++) {
		assert_true(tries < 100);
		usleep(100 * 1000);
		assert_int_equal(s->provider->describe(s, "mock-gcp", &ni, &n, &err), 0);
		isc_node_infos_free(ni, n);
		if (n == 3)
			break; /* instanceTerminationAction DELETE: the preempted node is gone */
	}
	for (int i = 0; i < 4; i++)
		ids[i] = r.nodes[i].id;
	isc_gcp_policy_name("mock-gcp-gang-1", pname);
	assert_int_equal(mock_policy_status(pname), 200);
	assert_int_equal(s->provider->terminate(s, ids, 4, &err), 0);
	assert_int_equal(s->provider->terminate(s, ids, 4, &err), 0); /* idempotent */
	for (int tries = 0;; tries++) {
		assert_true(tries < 100);
		usleep(100 * 1000);
		assert_int_equal(s->provider->describe(s, "mock-gcp", &ni, &n, &err), 0);
		isc_node_infos_free(ni, n);
		if (n == 0)
			break;
	}
	/*
	 * The gang's policy goes with its nodes: they left the listing (GCE lists deleted VMs
	 * no more), which makes a sweep due at once, not 5 minutes later.
	 */
	for (int tries = 0; mock_policy_status(pname) != 404; tries++) {
		assert_true(tries < 20);
		usleep(100 * 1000);
		assert_int_equal(s->provider->describe(s, "mock-gcp", &ni, &n, &err), 0);
		isc_node_infos_free(ni, n);
	}
	isc_launch_result_cleanup(&r);
	s->provider->session_free(s);
}

static void test_mock_lost_reply_and_failover(void **state)
{
	struct isc_provider_session *s;
	struct isc_launch_spec sp = mock_spec(2, "mock-gcp-gang-2");
	struct isc_launch_result r, r2;
	struct isc_err err;
	long before;
	(void)state;
	if (mock_skip())
		skip();
	s = mock_session();
	/* zone a out of capacity for this type, and zone b's reply lost after it took effect */
	json_decref(mock_api("POST", "faults",
	                     "{\"kind\":\"capacity\",\"provider\":\"gcp\",\"instance_type\":"
	                     "\"g2-standard-48\",\"zone\":\"us-central1-a\",\"count\":1}"));
	json_decref(mock_api("POST", "faults",
	                     "{\"kind\":\"lose_response\",\"provider\":\"gcp\",\"action\":"
	                     "\"instances.bulkInsert\",\"count\":1}"));
	before = mock_calls("instances.bulkInsert");
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_string_equal(r.zone, "us-central1-b");
	assert_int_equal(r.n_nodes, 2);
	/* a: stockout; b: lost, then replayed with the same requestId */
	assert_int_equal(mock_calls("instances.bulkInsert") - before, 3);
	assert_int_equal(mock_count_request(r.token), 2);
	/* the broker's crash replay: the same intent returns the same nodes, creates none */
	assert_int_equal(s->provider->launch_gang(s, &sp, &r2, &err), 0);
	assert_string_equal(r2.zone, "us-central1-b");
	assert_int_equal(r2.n_nodes, 2);
	assert_string_equal(r2.nodes[0].id, r.nodes[0].id);
	assert_int_equal(mock_count_request(r.token), 2);
	{
		const char *ids[2] = {r.nodes[0].id, r.nodes[1].id};
		assert_int_equal(s->provider->terminate(s, ids, 2, &err), 0);
	}
	isc_launch_result_cleanup(&r);
	isc_launch_result_cleanup(&r2);
	s->provider->session_free(s);
}

static void test_mock_garbled_reply_replayed(void **state)
{
	struct isc_provider_session *s;
	struct isc_launch_spec sp = mock_spec(3, "mock-gcp-gang-4");
	struct isc_launch_result r;
	struct isc_err err;
	char rid[37];
	(void)state;
	if (mock_skip())
		skip();
	s = mock_session();
	json_decref(mock_api("POST", "faults",
	                     "{\"kind\":\"garbled_reply\",\"provider\":\"gcp\",\"action\":"
	                     "\"instances.bulkInsert\"}"));
	json_decref(mock_api("POST", "faults",
	                     "{\"kind\":\"describe_lag\",\"provider\":\"gcp\",\"ms\":60000}"));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), ISC_ETRANSIENT);
	isc_gcp_request_id("mock-gcp-gang-4", "us-central1-a", rid);
	assert_int_equal(mock_count_request(rid), 3); /* it did happen */
	/* the broker asks again with the same token: the same gang, nothing new; the first
	 * listing of it lags and is read again */
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_int_equal(r.n_nodes, 3);
	assert_int_equal(mock_count_request(rid), 3);
	{
		const char *ids[3] = {r.nodes[0].id, r.nodes[1].id, r.nodes[2].id};
		assert_int_equal(s->provider->terminate(s, ids, 3, &err), 0);
	}
	isc_launch_result_cleanup(&r);
	s->provider->session_free(s);
}

static void test_mock_quota_and_wrong_key(void **state)
{
	struct isc_provider_session *s;
	struct isc_launch_spec sp = mock_spec(2, "mock-gcp-gang-3");
	struct isc_launch_result r;
	struct isc_identity id;
	struct isc_err err;
	long tokens;
	(void)state;
	if (mock_skip())
		skip();
	s = mock_session();
	json_decref(mock_api("POST", "faults", "{\"kind\":\"quota\",\"provider\":\"gcp\"}"));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), ISC_EQUOTA);
	assert_non_null(strstr(err.msg, "quotaExceeded"));
	s->provider->session_free(s);
	/* the published FAKE key claims to be someone the mock does not know: one token call */
	tokens = mock_calls("oauth2.token");
	{
		json_t *k = json_loads(fake_key_json, 0, NULL);
		json_t *mk = json_load_file(getenv("MOCKCLOUD_GCP_KEY"), 0, NULL);
		char *txt;
		/* the right email and token_uri, the wrong private key */
		json_object_set(k, "client_email", json_object_get(mk, "client_email"));
		json_object_set(k, "token_uri", json_object_get(mk, "token_uri"));
		json_object_set(k, "project_id", json_object_get(mk, "project_id"));
		json_object_del(k, "private_key_id");
		txt = json_dumps(k, 0);
		s = mock_session_key(txt);
		free(txt);
		json_decref(k);
		json_decref(mk);
	}
	assert_int_equal(s->provider->check_credentials(s, &id, &err), ISC_EAUTH);
	assert_non_null(strstr(err.msg, "invalid_grant"));
	assert_null(strstr(err.msg, "Invalid JWT Signature"));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), ISC_EAUTH);
	assert_int_equal(mock_calls("oauth2.token") - tokens, 1);
	s->provider->session_free(s);
	/* revoked tokens: a 401, one new exchange, and the call goes through */
	s = mock_session();
	assert_int_equal(s->provider->check_credentials(s, &id, &err), 0);
	json_decref(mock_api("DELETE", "gcp/tokens", NULL));
	tokens = mock_calls("oauth2.token");
	assert_int_equal(s->provider->check_credentials(s, &id, &err), 0);
	assert_int_equal(mock_calls("oauth2.token") - tokens, 1);
	s->provider->session_free(s);
}

/* The mock's default network: default-allow-internal lets a gang launch; without it, refused. */
static void test_mock_firewall(void **state)
{
	struct isc_provider_session *s;
	struct isc_launch_spec sp = mock_spec(2, "mock-gcp-gang-fw");
	struct isc_launch_result r;
	struct isc_err err;
	json_t *rules, *rule = NULL, *v;
	char *saved;
	size_t i;
	long inserts;
	(void)state;
	if (mock_skip())
		skip();
	s = mock_session();
	rules = mock_api("GET", "gcp/firewalls", NULL);
	json_array_foreach(rules, i, v) if (strcmp(json_string_value(json_object_get(v, "name")),
	                                           "default-allow-internal") == 0) rule = v;
	assert_non_null(rule);
	saved = json_dumps(rule, JSON_COMPACT);
	json_decref(rules);
	json_decref(mock_api("DELETE", "gcp/firewalls/default-allow-internal", NULL));
	inserts = mock_calls("instances.bulkInsert");
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), ISC_EINVALID);
	assert_non_null(strstr(err.msg, "network default lacks the firewall rule a gang needs"));
	assert_non_null(strstr(err.msg, "10.128.0.0/20"));
	assert_int_equal(mock_calls("instances.bulkInsert"), inserts);
	json_decref(mock_api("POST", "gcp/firewalls", saved));
	free(saved);
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_int_equal(r.n_nodes, 2);
	{
		const char *ids[2] = {r.nodes[0].id, r.nodes[1].id};
		assert_int_equal(s->provider->terminate(s, ids, 2, &err), 0);
	}
	isc_launch_result_cleanup(&r);
	s->provider->session_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_jwt_matches_vector, forget),
	    cmocka_unit_test_setup(test_jwt_verifies_with_public_key, forget),
	    cmocka_unit_test_setup(test_key_file_errors, forget),
	    cmocka_unit_test_setup(test_token_reply, forget),
	    cmocka_unit_test_setup(test_byo_token_uri_is_google_or_the_operators, forget),
	    cmocka_unit_test_setup(test_byo_key_runs_in_its_own_project, forget),
	    cmocka_unit_test_setup(test_byo_key_never_the_platforms, forget),
	    cmocka_unit_test_setup(test_request_id, forget),
	    cmocka_unit_test_setup(test_labels_and_names, forget),
	    cmocka_unit_test_setup(test_operations, forget),
	    cmocka_unit_test_setup(test_instances, forget),
	    cmocka_unit_test_setup(test_error_envelope, forget),
	    cmocka_unit_test_setup(test_launch_failover_and_body, forget),
	    cmocka_unit_test_setup(test_compact_policy_for_the_gang, forget),
	    cmocka_unit_test_setup(test_compact_policy_given_back, forget),
	    cmocka_unit_test_setup(test_describe_reconciles_policies, forget),
	    cmocka_unit_test_setup(test_describe_sweeps_policies_when_due, forget),
	    cmocka_unit_test_setup(test_firewall_rules, forget),
	    cmocka_unit_test_setup(test_firewall_refuses_gang, forget),
	    cmocka_unit_test_setup(test_tenant_firewall, forget),
	    cmocka_unit_test_setup(test_tenant_firewall_swept, forget),
	    cmocka_unit_test_setup(test_launch_quota_and_capacity, forget),
	    cmocka_unit_test_setup(test_launch_unreadable_and_lagging, forget),
	    cmocka_unit_test_setup(test_auth_refresh_and_refusal, forget),
	    cmocka_unit_test_setup(test_token_refreshed_before_expiry, forget),
	    cmocka_unit_test_setup(test_token_shared_between_sessions, forget),
	    cmocka_unit_test_setup(test_describe_preemption_and_terminate, forget),
	    cmocka_unit_test_setup(test_confirm_gone, forget),
	    cmocka_unit_test_setup(test_listing_never_cut_short, forget),
	    cmocka_unit_test_setup(test_session_errors, forget),
	    cmocka_unit_test_setup(test_mock_gang_preempt_terminate, forget),
	    cmocka_unit_test_setup(test_mock_lost_reply_and_failover, forget),
	    cmocka_unit_test_setup(test_mock_garbled_reply_replayed, forget),
	    cmocka_unit_test_setup(test_mock_quota_and_wrong_key, forget),
	    cmocka_unit_test_setup(test_mock_firewall, forget),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
