/*
 * The OCI driver: Oracle's published signing example (tests/vectors/oci-signing)
 * byte for byte; ~/.oci/config resolution and its error messages; error
 * classification, retry tokens, paging headers and the training-network rule;
 * and the provider table over a scripted transport (no network) with a fixed
 * clock: what it sends for each broker operation and how it reacts to
 * capacity, partial gangs, missing rules, paging, preemption, auth errors,
 * throttling and lost replies.
 */
#include "config/config.h"
#include "providers/oci/oci_config.h"
#include "providers/oci/oci_int.h"
#include "providers/oci/oci_sign.h"
#include "providers/provider.h"
#include "providers/sweep.h"
#include "tests/unit/driver_script.h"
#include "tests/unit/mock_control.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *vec_dir(void)
{
	const char *d = getenv("ISC_OCI_VECTORS");
	return d ? d : "tests/vectors/oci-signing";
}

static char *slurp(const char *dir, const char *name, size_t *len)
{
	char path[512];
	FILE *f;
	char *buf;
	long n;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "rb");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = calloc(1, (size_t)n + 1);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	if (len)
		*len = (size_t)n;
	return buf;
}

static EVP_PKEY *vector_key(void)
{
	size_t n;
	char *pem = slurp(vec_dir(), "test_private_key.pem", &n);
	EVP_PKEY *k = NULL;
	struct isc_err err;
	assert_int_equal(isc_oci_key_load_pem(pem, n, NULL, "vector key", &k, &err), 0);
	free(pem);
	return k;
}

/* ---- Oracle's published example, byte for byte ---- */

static void test_signing_vectors(void **state)
{
	json_t *v = NULL, *c;
	size_t i, ncases = 0;
	char *text;
	EVP_PKEY *key = vector_key();
	(void)state;

	text = slurp(vec_dir(), "oci_signing_vectors.json", NULL);
	v = json_loads(text, 0, NULL);
	free(text);
	assert_non_null(v);
	json_array_foreach(json_object_get(v, "cases"), i, c)
	{
		const json_t *h = json_object_get(c, "request_headers");
		const char *rt = json_string_value(json_object_get(c, "request_target"));
		const char *body_file = json_string_value(json_object_get(c, "body_file"));
		const char *ss_file = json_string_value(json_object_get(c, "signing_string_file"));
		const char *key_id =
		    json_string_value(json_object_get(json_object_get(v, "key"), "key_id"));
		struct isc_oci_sign_request req = {0};
		struct isc_oci_signed sig;
		struct isc_err err;
		char *body = NULL, *want_ss;
		size_t body_len = 0;

		req.method = json_string_value(json_object_get(c, "method"));
		req.target = strchr(rt, ' ') + 1;
		req.host = json_string_value(json_object_get(h, "host"));
		req.date = json_string_value(json_object_get(h, "date"));
		req.content_type = json_string_value(json_object_get(h, "content-type"));
		if (body_file) {
			body = slurp(vec_dir(), body_file, &body_len);
			req.body = body;
			req.body_len = body_len;
			assert_int_equal(body_len,
			                 json_integer_value(json_object_get(c, "body_length")));
		}
		assert_int_equal(isc_oci_sign(key, key_id, &req, &sig, &err), 0);
		want_ss = slurp(vec_dir(), ss_file, NULL);
		assert_string_equal(sig.signing_string, want_ss);
		assert_string_equal(sig.signing_string,
		                    json_string_value(json_object_get(c, "signing_string")));
		assert_string_equal(sig.signature,
		                    json_string_value(json_object_get(c, "expected_signature")));
		assert_string_equal(sig.authorization, json_string_value(json_object_get(
		                                           c, "expected_authorization")));
		if (body_file)
			assert_string_equal(sig.content_sha256, json_string_value(json_object_get(
			                                            h, "x-content-sha256")));
		isc_oci_signed_cleanup(&sig);
		free(want_ss);
		free(body);
		ncases++;
	}
	assert_int_equal(ncases, 2);
	json_decref(v);
	EVP_PKEY_free(key);
}

static void test_date_and_headers(void **state)
{
	char d[32];
	struct isc_oci_sign_request req = {"DELETE", "/20160918/instances/x", "h", "d", NULL, NULL,
	                                   0};
	struct isc_oci_signed sig;
	(void)state;
	/* (Oracle's example date, "Thu, 05 Jan 2014", was a Sunday: it is only signed text.) */
	assert_int_equal(isc_oci_format_date(1700000000000LL, d), 0);
	assert_string_equal(d, "Tue, 14 Nov 2023 22:13:20 GMT");
	assert_int_equal(isc_oci_format_date(1388957500999LL, d), 0);
	assert_string_equal(d, "Sun, 05 Jan 2014 21:31:40 GMT");
	/* DELETE signs no body headers; PUT signs them even for an empty body. */
	assert_int_equal(isc_oci_signing_string(&req, &sig, NULL), 0);
	assert_string_equal(sig.headers, "date (request-target) host");
	isc_oci_signed_cleanup(&sig);
	req.method = "PUT";
	assert_int_equal(isc_oci_signing_string(&req, &sig, NULL), 0);
	assert_non_null(strstr(sig.signing_string, "content-length: 0\n"));
	assert_non_null(strstr(sig.signing_string,
	                       "x-content-sha256: 47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="));
	isc_oci_signed_cleanup(&sig);
	/* A header value that would add a line to the signing string is refused. */
	req.host = "h\nx-evil: 1";
	assert_int_equal(isc_oci_signing_string(&req, &sig, NULL), ISC_EINVALID);
	isc_oci_signed_cleanup(&sig);
}

/* ---- ~/.oci/config ---- */

static char tmpdir[64];
static char cfg_path[128], key_path[128], enc_path[128];

#define FP  "20:3b:97:13:55:1c:5b:0d:d3:37:d8:50:4e:c5:3a:34"
#define TEN "ocid1.tenancy.oc1..aaaatenancy"
#define USR "ocid1.user.oc1..aaaauser"

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void write_config(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void write_config(const char *fmt, ...)
{
	va_list ap;
	FILE *f = fopen(cfg_path, "w");
	assert_non_null(f);
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fclose(f);
}

static void clear_env(void)
{
	static const char *const vars[] = {
	    "OCI_CLI_CONFIG_FILE", "OCI_CLI_PROFILE",     "OCI_CLI_REGION",
	    "OCI_CLI_USER",        "OCI_CLI_TENANCY",     "OCI_CLI_FINGERPRINT",
	    "OCI_CLI_KEY_FILE",    "OCI_CLI_KEY_CONTENT", "OCI_CLI_PASSPHRASE"};
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
}

static int config_setup(void **state)
{
	EVP_PKEY *k;
	BIO *b;
	(void)state;
	clear_env();
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/isc-oci-test.XXXXXX");
	assert_non_null(mkdtemp(tmpdir));
	snprintf(cfg_path, sizeof(cfg_path), "%s/config", tmpdir);
	snprintf(key_path, sizeof(key_path), "%s/key.pem", tmpdir);
	snprintf(enc_path, sizeof(enc_path), "%s/enc.pem", tmpdir);
	{
		char *pem = slurp(vec_dir(), "test_private_key.pem", NULL);
		write_file(key_path, pem);
		free(pem);
	}
	/* The same key encrypted with a pass phrase (PKCS#8, AES-256). */
	k = vector_key();
	b = BIO_new_file(enc_path, "w");
	assert_non_null(b);
	assert_int_equal(PEM_write_bio_PrivateKey(b, k, EVP_aes_256_cbc(),
	                                          (unsigned char *)"s3cret", 6, NULL, NULL),
	                 1);
	BIO_free(b);
	EVP_PKEY_free(k);
	setenv("OCI_CLI_CONFIG_FILE", cfg_path, 1);
	return 0;
}

static int config_teardown(void **state)
{
	char cmd[128];
	(void)state;
	clear_env();
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	assert_int_equal(system(cmd), 0);
	return 0;
}

static int resolve(const char *profile, const char *region, struct isc_oci_config *c,
                   struct isc_err *err)
{
	struct isc_kv items[1] = {{"profile", profile}};
	struct isc_provider_settings st = {items, profile ? 1 : 0, NULL, 0};
	return isc_oci_config_resolve(&st, region, c, err);
}

static void test_config_profiles(void **state)
{
	struct isc_oci_config c;
	struct isc_err err;
	(void)state;
	write_config("# the OCI CLI's file\n[DEFAULT]\nuser = %s\nfingerprint=%s\nkey_file=%s\n"
	             "tenancy=%s\nregion=us-ashburn-1\n\n[dev]\nuser=ocid1.user.oc1..dev\n"
	             "region = eu-frankfurt-1\n",
	             USR, FP, key_path, TEN);
	assert_int_equal(resolve(NULL, NULL, &c, &err), 0);
	assert_string_equal(c.key_id, TEN "/" USR "/" FP);
	assert_string_equal(c.region, "us-ashburn-1");
	assert_non_null(c.key);
	isc_oci_config_cleanup(&c);
	/* A named profile inherits what it does not set from DEFAULT. */
	assert_int_equal(resolve("dev", NULL, &c, &err), 0);
	assert_string_equal(c.key_id, TEN "/ocid1.user.oc1..dev/" FP);
	assert_string_equal(c.region, "eu-frankfurt-1");
	isc_oci_config_cleanup(&c);
	/* OCI_CLI_PROFILE picks it too; OCI_CLI_REGION beats the file, the argument beats both. */
	setenv("OCI_CLI_PROFILE", "dev", 1);
	setenv("OCI_CLI_REGION", "uk-london-1", 1);
	assert_int_equal(resolve(NULL, NULL, &c, &err), 0);
	assert_string_equal(c.user, "ocid1.user.oc1..dev");
	assert_string_equal(c.region, "uk-london-1");
	isc_oci_config_cleanup(&c);
	assert_int_equal(resolve(NULL, "us-phoenix-1", &c, &err), 0);
	assert_string_equal(c.region, "us-phoenix-1");
	isc_oci_config_cleanup(&c);
	/* OCI_CLI_USER overrides the profile's key. */
	setenv("OCI_CLI_USER", "ocid1.user.oc1..fromenv", 1);
	assert_int_equal(resolve(NULL, NULL, &c, &err), 0);
	assert_string_equal(c.user, "ocid1.user.oc1..fromenv");
	isc_oci_config_cleanup(&c);
	clear_env();
	setenv("OCI_CLI_CONFIG_FILE", cfg_path, 1);
}

static void expect_error(const char *profile, int code, const char *const *parts)
{
	struct isc_oci_config c;
	struct isc_err err;
	assert_int_equal(resolve(profile, NULL, &c, &err), code);
	for (; *parts; parts++)
		if (!strstr(err.msg, *parts)) {
			print_error("message '%s' lacks '%s'\n", err.msg, *parts);
			fail();
		}
	assert_null(c.key); /* nothing left allocated */
}

static void test_config_errors(void **state)
{
	(void)state;
	/* Every message names the file, the profile and the key at fault. */
	write_config("[DEFAULT]\nuser=%s\nkey_file=%s\ntenancy=%s\nregion=us-ashburn-1\n", USR,
	             key_path, TEN);
	expect_error(
	    NULL, ISC_EAUTH,
	    (const char *[]){cfg_path, "profile [DEFAULT]", "missing 'fingerprint'", NULL});
	expect_error("nope", ISC_EAUTH,
	             (const char *[]){cfg_path, "no profile [nope]", "profiles: DEFAULT", NULL});
	write_config("[DEFAULT]\nuser=%s\nfingerprint=20:3b:97\nkey_file=%s\ntenancy=%s\n"
	             "region=us-ashburn-1\n",
	             USR, key_path, TEN);
	expect_error(NULL, ISC_EINVALID,
	             (const char *[]){cfg_path, ":3:", "profile [DEFAULT]", "fingerprint",
	                              "16 colon-separated hex pairs", NULL});
	write_config("[DEFAULT]\nuser %s\n", USR);
	expect_error(NULL, ISC_EINVALID,
	             (const char *[]){cfg_path, ":2:", "expected 'key = value'", NULL});
	write_config("[DEFAULT]\nuser=%s\nfingerprint=%s\nkey_file=%s/none.pem\ntenancy=%s\n"
	             "region=us-ashburn-1\n",
	             USR, FP, tmpdir, TEN);
	expect_error(NULL, ISC_EAUTH,
	             (const char *[]){cfg_path, "profile [DEFAULT]: key_file", "none.pem",
	                              "No such file", NULL});
	write_config("[DEFAULT]\nkey_content=-----BEGIN\n");
	expect_error(NULL, ISC_EINVALID,
	             (const char *[]){cfg_path, "key_content is not allowed", NULL});
	write_config("[DEFAULT]\nuser=%s\nfingerprint=%s\nkey_file=%s\ntenancy=%s\n", USR, FP,
	             key_path, TEN);
	expect_error(NULL, ISC_EINVALID, (const char *[]){"no OCI region", cfg_path, NULL});
	unsetenv("OCI_CLI_CONFIG_FILE");
	{
		struct isc_kv items[1] = {{"config_file", "/nonexistent/oci/config"}};
		struct isc_provider_settings st = {items, 1, NULL, 0};
		struct isc_oci_config c;
		struct isc_err err;
		assert_int_equal(isc_oci_config_resolve(&st, NULL, &c, &err), ISC_EAUTH);
		assert_non_null(strstr(err.msg, "/nonexistent/oci/config"));
	}
	setenv("OCI_CLI_CONFIG_FILE", cfg_path, 1);
}

static void test_config_encrypted_key(void **state)
{
	struct isc_oci_config c;
	struct isc_err err;
	(void)state;
	write_config("[DEFAULT]\nuser=%s\nfingerprint=%s\nkey_file=%s\ntenancy=%s\n"
	             "region=us-ashburn-1\n[good]\npass_phrase=s3cret\n[bad]\npass_phrase=wrong\n",
	             USR, FP, enc_path, TEN);
	expect_error(NULL, ISC_EAUTH,
	             (const char *[]){"key_file", "encrypted and no pass_phrase", NULL});
	expect_error("bad", ISC_EAUTH, (const char *[]){"wrong pass_phrase", NULL});
	assert_int_equal(resolve("good", NULL, &c, &err), 0);
	assert_non_null(c.key);
	isc_oci_config_cleanup(&c);
	/* The pass phrase never reaches a message. */
	expect_error("bad", ISC_EAUTH, (const char *[]){"profile [bad]", NULL});
	setenv("OCI_CLI_PASSPHRASE", "s3cret", 1);
	assert_int_equal(resolve(NULL, NULL, &c, &err), 0);
	isc_oci_config_cleanup(&c);
	unsetenv("OCI_CLI_PASSPHRASE");
}

static void test_config_env_only_and_explicit(void **state)
{
	struct isc_oci_config c;
	struct isc_err err;
	char *pem = slurp(vec_dir(), "test_private_key.pem", NULL);
	struct isc_kv creds[] = {
	    {"tenancy", TEN}, {"user", USR}, {"fingerprint", FP}, {"private_key_pem", pem}};
	struct isc_provider_settings st = {NULL, 0, creds, 4};
	(void)state;
	/* No file, everything in the environment. */
	setenv("OCI_CLI_CONFIG_FILE", "/nonexistent/config", 1);
	setenv("OCI_CLI_USER", USR, 1);
	setenv("OCI_CLI_TENANCY", TEN, 1);
	setenv("OCI_CLI_FINGERPRINT", FP, 1);
	setenv("OCI_CLI_KEY_CONTENT", pem, 1);
	setenv("OCI_CLI_REGION", "us-ashburn-1", 1);
	assert_int_equal(resolve(NULL, NULL, &c, &err), 0);
	assert_string_equal(c.tenancy, TEN);
	isc_oci_config_cleanup(&c);
	clear_env();
	/* Bring-your-own keys in memory. */
	assert_int_equal(isc_oci_config_resolve(&st, "us-ashburn-1", &c, &err), 0);
	assert_string_equal(c.key_id, TEN "/" USR "/" FP);
	isc_oci_config_cleanup(&c);
	st.n_credentials = 3;
	assert_int_equal(isc_oci_config_resolve(&st, "us-ashburn-1", &c, &err), ISC_EAUTH);
	free(pem);
	setenv("OCI_CLI_CONFIG_FILE", cfg_path, 1);
}

/* config.toml's [providers.oci]: a TOML boolean switch reaches the driver as "true". */
static void test_config_toml_switch(void **state)
{
	struct isc_config *cfg = NULL;
	const struct isc_provider_config *pc;
	struct isc_err err;
	char path[160];
	(void)state;
	snprintf(path, sizeof(path), "%s/config.toml", tmpdir);
	write_file(path, "broker_id = \"b\"\n[providers.oci]\nregions = [\"us-ashburn-1\"]\n"
	                 "manage_security_list = true\nassign_public_ip = false\n"
	                 "subnet_id = \"ocid1.subnet.oc1..s\"\n");
	assert_int_equal(isc_config_load(tmpdir, &cfg, &err), 0);
	pc = isc_config_provider(cfg, "oci");
	assert_non_null(pc);
	assert_string_equal(isc_config_setting(pc, "manage_security_list"), "true");
	assert_string_equal(isc_config_setting(pc, "assign_public_ip"), "false");
	assert_string_equal(isc_config_setting(pc, "subnet_id"), "ocid1.subnet.oc1..s");
	isc_config_free(cfg);
	/* Other types are still refused with the file, line and key. */
	write_file(path, "[providers.oci]\nregions = [\"us-ashburn-1\"]\nsubnet_id = [7]\n");
	assert_int_equal(isc_config_load(tmpdir, &cfg, &err), ISC_EINVALID);
	assert_non_null(strstr(err.msg, "providers.oci.subnet_id"));
	unlink(path);
}

/* ---- the wire ---- */

static void test_classify(void **state)
{
	(void)state;
	assert_int_equal(isc_oci_classify(500, "InternalError", "Out of host capacity."),
	                 ISC_ECAPACITY);
	assert_int_equal(isc_oci_classify(500, "InternalError", "boom"), ISC_ETRANSIENT);
	assert_int_equal(isc_oci_classify(400, "LimitExceeded", "x"), ISC_EQUOTA);
	assert_int_equal(isc_oci_classify(400, "QuotaExceeded", "x"), ISC_EQUOTA);
	assert_int_equal(isc_oci_classify(429, "TooManyRequests", "x"), ISC_ETHROTTLED);
	assert_int_equal(isc_oci_classify(409, "IncorrectState", "x"), ISC_ETRANSIENT);
	assert_int_equal(isc_oci_classify(503, "ServiceUnavailable", "x"), ISC_ETRANSIENT);
	assert_int_equal(isc_oci_classify(501, "MethodNotImplemented", "x"), ISC_EINVALID);
	assert_int_equal(isc_oci_classify(401, "NotAuthenticated", "x"), ISC_EAUTH);
	assert_int_equal(isc_oci_classify(404, "NotAuthorizedOrNotFound", "x"), ISC_ENOTFOUND);
	assert_int_equal(isc_oci_classify(409, "InvalidatedRetryToken", "x"), ISC_ECONFLICT);
	assert_int_equal(isc_oci_classify(400, "InvalidParameter", "x"), ISC_EINVALID);
	assert_int_equal(isc_oci_classify(502, NULL, NULL), ISC_ETRANSIENT);
	assert_int_equal(isc_oci_classify(204, NULL, NULL), 0);
}

static void test_retry_tokens(void **state)
{
	char a[65], b[65], c[65], longtok[65];
	(void)state;
	assert_int_equal(isc_oci_retry_token("isc-cl_0123", "Mock:US-ASHBURN-AD-1", 2, a, NULL), 0);
	assert_string_equal(a, "isc-cl_0123-us-ashburn-ad-1-2");
	isc_oci_retry_token("isc-cl_0123", "Mock:US-ASHBURN-AD-2", 2, b, NULL);
	isc_oci_retry_token("isc-cl_0123", "Mock:US-ASHBURN-AD-1", 3, c, NULL);
	assert_string_not_equal(a, b);
	assert_string_not_equal(a, c);
	memset(longtok, 'T', 64);
	longtok[64] = '\0';
	assert_int_equal(isc_oci_retry_token(longtok, "Mock:US-ASHBURN-AD-1", 17, a, NULL), 0);
	assert_true(strlen(a) <= 64);
	isc_oci_retry_token(longtok, "Mock:US-ASHBURN-AD-1", 17, b, NULL);
	assert_string_equal(a, b); /* deterministic: a crash replay sends the same token */
	isc_oci_retry_token(longtok, "Mock:US-ASHBURN-AD-2", 17, c, NULL);
	assert_string_not_equal(a, c);
	assert_int_equal(isc_oci_retry_token("", "x", 0, a, NULL), ISC_EINVALID);
	assert_int_equal(isc_oci_retry_token("a b", "x", 0, a, NULL), ISC_EINVALID);
}

static void test_headers_state_time(void **state)
{
	char v[64];
	(void)state;
	assert_int_equal(isc_oci_header("HTTP/1.1 200 OK\r\nOPC-Next-Page: abc== \r\n"
	                                "opc-request-id: R1\r\n\r\n",
	                                "opc-next-page", v, sizeof(v)),
	                 0);
	assert_string_equal(v, "abc==");
	assert_int_equal(isc_oci_header("HTTP/1.1 200 OK\r\n\r\n", "opc-next-page", v, sizeof(v)),
	                 -1);
	assert_int_equal(isc_oci_node_state("PROVISIONING"), ISC_NODE_PENDING);
	assert_int_equal(isc_oci_node_state("RUNNING"), ISC_NODE_RUNNING);
	assert_int_equal(isc_oci_node_state("TERMINATING"), ISC_NODE_SHUTTING_DOWN);
	assert_int_equal(isc_oci_node_state("TERMINATED"), ISC_NODE_TERMINATED);
	assert_true(isc_oci_parse_time("2016-08-25T21:10:29.600Z") == 1472159429600LL);
	assert_true(isc_oci_parse_time("junk") == 0);
}

static void test_training_rules(void **state)
{
	json_t *r;
	(void)state;
#define RULES(...) json_loads(__VA_ARGS__, 0, NULL)
	r = RULES("[{\"protocol\":\"6\",\"source\":\"0.0.0.0/0\",\"tcpOptions\":{"
	          "\"destinationPortRange\":{\"min\":22,\"max\":22}}}]");
	assert_int_equal(isc_oci_rules_allow_training(r, "10.0.0.0/24"), 0);
	json_decref(r);
	r = RULES(
	    "[{\"protocol\":\"6\",\"source\":\"10.0.0.0/16\",\"sourceType\":\"CIDR_BLOCK\"}]");
	assert_int_equal(isc_oci_rules_allow_training(r, "10.0.0.0/24"), 1);
	assert_int_equal(isc_oci_rules_allow_training(r, "10.1.0.0/24"), 0);
	json_decref(r);
	r = RULES("[{\"protocol\":\"all\",\"source\":\"10.0.0.0/24\"}]");
	assert_int_equal(isc_oci_rules_allow_training(r, "10.0.0.0/24"), 1);
	json_decref(r);
	/* Only 29400 open: NCCL's ports would still be blocked. */
	r = RULES("[{\"protocol\":\"6\",\"source\":\"10.0.0.0/24\",\"tcpOptions\":{"
	          "\"destinationPortRange\":{\"min\":29400,\"max\":29400}}}]");
	assert_int_equal(isc_oci_rules_allow_training(r, "10.0.0.0/24"), 0);
	json_decref(r);
	r = RULES("[{\"protocol\":\"17\",\"source\":\"10.0.0.0/24\"}]");
	assert_int_equal(isc_oci_rules_allow_training(r, "10.0.0.0/24"), 0);
	json_decref(r);
	assert_int_equal(isc_oci_rules_allow_training(NULL, "10.0.0.0/24"), -1);
#undef RULES
}

/* ---- the driver over a scripted transport ---- */

struct sent {
	char *method, *url, *body, *retry_token, *auth, *if_match;
};

static struct {
	struct sent sent[256];
	size_t calls;
} S;

static void script_reset(void)
{
	driver_script_reset();
	for (size_t i = 0; i < S.calls; i++) {
		free(S.sent[i].method);
		free(S.sent[i].url);
		free(S.sent[i].body);
		free(S.sent[i].retry_token);
		free(S.sent[i].auth);
		free(S.sent[i].if_match);
	}
	memset(&S, 0, sizeof(S));
}

static char *header_of(const struct isc_http_request *req, const char *name)
{
	for (size_t i = 0; i < req->n_headers; i++)
		if (strcasecmp(req->headers[i].name, name) == 0)
			return strdup(req->headers[i].value);
	return NULL;
}

static int scripted_send(void *ctx, const struct isc_http_request *req, long timeout_ms,
                         long connect_timeout_ms, size_t max, struct isc_http_response *resp,
                         struct isc_err *err)
{
	struct sent *s;
	(void)ctx, (void)timeout_ms, (void)connect_timeout_ms, (void)max;
	assert_true(S.calls < 256);
	s = &S.sent[S.calls++];
	s->method = strdup(req->method);
	s->url = strdup(req->url);
	s->body = strndup(req->body ? req->body : "", req->body_len);
	s->retry_token = header_of(req, "opc-retry-token");
	s->auth = header_of(req, "authorization");
	s->if_match = header_of(req, "if-match");
	assert_non_null(s->auth);
	return driver_script_answer(req, S.calls, "reset", resp, err);
}

static const struct isc_http_transport scripted = {scripted_send, NULL};

static int64_t fake_now_ms = 1700000000000LL;
static int64_t fixed_now(void *c)
{
	(void)c;
	return fake_now_ms;
}
static void fake_sleep(void *c, int64_t ms)
{
	(void)c, (void)ms;
}
static uint64_t fake_rand(void *c)
{
	(void)c;
	return 7;
}
static const struct isc_clock fake_clock = {fixed_now, fake_sleep, fake_rand, NULL};

static char *pem_text;

/* compute_clusters for the sessions below: "never" keeps the older cases' call counts. */
static const char *cc_mode = "never";
/* tenant_isolation: "never" unless a test says (the tenant tests) */
static const char *ti_mode = "never";

static struct isc_provider_session *session_with(const char *extra_key, const char *extra_val)
{
	const struct isc_provider *p = isc_provider_find("oci");
	struct isc_kv creds[] = {
	    {"tenancy", TEN}, {"user", USR}, {"fingerprint", FP}, {"private_key_pem", pem_text}};
	struct isc_kv items[] = {{"endpoint", "http://127.0.0.1:9/oci/{region}"},
	                         {"subnet_id", "ocid1.subnet.oc1..sub"},
	                         {"image_id", "ocid1.image.oc1..img"},
	                         /* one call at a time: the script answers in order */
	                         {"launch_parallelism", "1"},
	                         {"compute_clusters", cc_mode},
	                         {"tenant_isolation", ti_mode},
	                         {extra_key ? extra_key : "unused", extra_val ? extra_val : ""}};
	struct isc_provider_settings st = {items, 7, creds, 4};
	struct isc_provider_session *s = NULL;
	struct isc_err err;
	assert_non_null(p);
	assert_int_equal(p->session_new(&st, "us-ashburn-1", &scripted, &fake_clock, &s, &err), 0);
	return s;
}

static struct isc_provider_session *session(void)
{
	return session_with(NULL, NULL);
}

static int driver_setup(void **state)
{
	(void)state;
	script_reset();
	isc_sweep_forget_all(); /* each test is a process that has not swept yet */
	if (!pem_text)
		pem_text = slurp(vec_dir(), "test_private_key.pem", NULL);
	return 0;
}

static const char *instance_json(const char *id, const char *ad, const char *lifecycle,
                                 const char *broker, int preemptible)
{
	static char buf[4][1024];
	static int k;
	char *b = buf[k++ % 4];
	snprintf(b, 1024,
	         "{\"id\":\"%s\",\"availabilityDomain\":\"%s\",\"shape\":\"VM.GPU3.1\","
	         "\"lifecycleState\":\"%s\",\"timeCreated\":\"2023-11-14T22:13:20.000Z\","
	         "\"freeformTags\":{\"isc:broker\":\"%s\",\"isc:cluster\":\"cl_1\","
	         "\"isc:experiment\":\"exp_1\",\"isc:token\":\"tok-%s\"}%s}",
	         id, ad, lifecycle, broker, id,
	         preemptible ? ",\"preemptibleInstanceConfig\":{\"preemptionAction\":{\"type\":"
	                       "\"TERMINATE\",\"preserveBootVolume\":false}}"
	                     : "");
	return b;
}

#define ADS                                                                                        \
	"[{\"name\":\"Mock:US-ASHBURN-AD-1\"},{\"name\":\"Mock:US-ASHBURN-AD-2\"},"                \
	"{\"name\":\"Mock:US-ASHBURN-AD-3\"}]"

static void script_network_ok(void)
{
	reply(200, "{\"id\":\"ocid1.subnet.oc1..sub\",\"cidrBlock\":\"10.0.0.0/24\","
	           "\"securityListIds\":[\"ocid1.securitylist.oc1..sl\"]}");
	reply(200, "{\"ingressSecurityRules\":[{\"protocol\":\"6\",\"source\":\"10.0.0.0/24\"}]}");
}

static const struct isc_kv gang_tags[] = {
    {ISC_TAG_BROKER, "isc-b1"}, {ISC_TAG_CLUSTER, "cl_1"}, {ISC_TAG_EXPERIMENT, "exp_1"}};
static const char *const ashburn_zones[] = {"US-ASHBURN-AD-1", "US-ASHBURN-AD-2"};

static struct isc_launch_spec gang_spec(unsigned count, int spot)
{
	struct isc_launch_spec sp = {0};
	sp.instance_type = "VM.GPU3.1";
	sp.spot = spot;
	sp.zones = ashburn_zones;
	sp.n_zones = 2;
	sp.count = count;
	sp.idempotency_token = "isc-cl_1";
	sp.tags = gang_tags;
	sp.n_tags = 3;
	sp.ssh_public_key = "ecdsa-sha2-nistp256 AAAAE2VjZHNh isc-cl_1";
	return sp;
}

/* A session that makes compute clusters for RDMA gangs (compute_clusters = "auto"). */
static struct isc_provider_session *session_clusters(void)
{
	struct isc_provider_session *s;
	cc_mode = "auto";
	s = session();
	cc_mode = "never";
	return s;
}

/*
 * The start of a compute-cluster case: a session that makes clusters, an RDMA gang of
 * count BM.GPU.H100.8 nodes in *sp, and the ADs as the script's first answer.
 */
static struct isc_provider_session *rdma_gang_start(unsigned count, struct isc_launch_spec *sp)
{
	struct isc_provider_session *s = session_clusters();
	*sp = gang_spec(count, 0);
	sp->instance_type = "BM.GPU.H100.8";
	reply(200, ADS);
	return s;
}

/* The call S.sent[i] (a LaunchInstance) puts its node in the compute cluster cluster_id. */
static void assert_joins(int i, const char *cluster_id)
{
	json_t *b = json_loads(S.sent[i].body, 0, NULL);
	assert_non_null(b);
	assert_string_equal(json_string_value(json_object_get(b, "computeClusterId")), cluster_id);
	json_decref(b);
}

static void test_check_credentials(void **state)
{
	struct isc_provider_session *s = session();
	struct isc_identity id;
	struct isc_err err;
	(void)state;
	reply(200, "{\"id\":\"%s\",\"compartmentId\":\"%s\",\"name\":\"alice\"}", USR, TEN);
	assert_int_equal(s->provider->check_credentials(s, &id, &err), 0);
	assert_string_equal(id.account, TEN);
	assert_string_equal(id.principal, USR);
	assert_string_equal(id.user_id, "alice");
	assert_string_equal(S.sent[0].method, "GET");
	assert_string_equal(S.sent[0].url,
	                    "http://127.0.0.1:9/oci/us-ashburn-1/20160918/users/" USR);
	assert_non_null(strstr(S.sent[0].auth, "keyId=\"" TEN "/" USR "/" FP "\""));
	assert_non_null(strstr(S.sent[0].auth, "headers=\"date (request-target) host\""));
	s->provider->session_free(s);
}

static void test_auth_error_single_call(void **state)
{
	struct isc_provider_session *s = session();
	struct isc_identity id;
	struct isc_err err;
	(void)state;
	reply_h(401, "opc-request-id: RID42\r\n",
	        "{\"code\":\"NotAuthenticated\",\"message\":\"The required information to "
	        "complete authentication was not provided or was incorrect.\"}");
	assert_int_equal(s->provider->check_credentials(s, &id, &err), ISC_EAUTH);
	assert_int_equal(S.calls, 1);
	assert_non_null(strstr(err.msg, "GetUser: NotAuthenticated"));
	assert_non_null(strstr(err.msg, "opc-request-id RID42"));
	s->provider->session_free(s);
}

static void test_throttling_retried(void **state)
{
	struct isc_provider_session *s = session();
	struct isc_identity id;
	struct isc_err err;
	(void)state;
	reply(429, "{\"code\":\"TooManyRequests\",\"message\":\"slow down\"}");
	reply(409, "{\"code\":\"IncorrectState\",\"message\":\"busy\"}");
	reply(200, "{\"id\":\"%s\",\"compartmentId\":\"%s\"}", USR, TEN);
	assert_int_equal(s->provider->check_credentials(s, &id, &err), 0);
	assert_int_equal(S.calls, 3);
	s->provider->session_free(s);
}

static void test_launch_gang_request(void **state)
{
	struct isc_provider_session *s = session();
	struct isc_launch_spec sp = gang_spec(2, 1);
	struct isc_launch_result r;
	struct isc_err err;
	json_t *b;
	(void)state;
	script_network_ok();
	reply(200, ADS);
	reply(200, "%s",
	      instance_json("ocid1.instance.oc1..n0", "Mock:US-ASHBURN-AD-1", "PROVISIONING",
	                    "isc-b1", 1));
	reply(200, "%s",
	      instance_json("ocid1.instance.oc1..n1", "Mock:US-ASHBURN-AD-1", "PROVISIONING",
	                    "isc-b1", 1));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_int_equal(r.n_nodes, 2);
	assert_string_equal(r.zone, "Mock:US-ASHBURN-AD-1");
	assert_string_equal(r.nodes[1].id, "ocid1.instance.oc1..n1");
	assert_string_equal(r.nodes[0].cluster_id, "cl_1");
	assert_int_equal(r.nodes[0].spot, 1);
	/* GetSubnet, GetSecurityList, ListAvailabilityDomains, 2 x LaunchInstance */
	assert_int_equal(S.calls, 5);
	assert_string_equal(S.sent[3].method, "POST");
	assert_string_equal(S.sent[3].url,
	                    "http://127.0.0.1:9/oci/us-ashburn-1/20160918/instances");
	assert_string_equal(S.sent[3].retry_token, "isc-cl_1-us-ashburn-ad-1-0");
	assert_string_equal(S.sent[4].retry_token, "isc-cl_1-us-ashburn-ad-1-1");
	assert_non_null(strstr(S.sent[3].auth, "content-length content-type x-content-sha256"));
	b = json_loads(S.sent[3].body, 0, NULL);
	assert_non_null(b);
	assert_string_equal(json_string_value(json_object_get(b, "availabilityDomain")),
	                    "Mock:US-ASHBURN-AD-1");
	assert_string_equal(json_string_value(json_object_get(b, "compartmentId")), TEN);
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(b, "freeformTags"), "isc:broker")),
	    "isc-b1");
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(b, "freeformTags"), "isc:token")),
	    "isc-cl_1-us-ashburn-ad-1-0");
	assert_string_equal(json_string_value(json_object_get(json_object_get(b, "metadata"),
	                                                      "ssh_authorized_keys")),
	                    sp.ssh_public_key);
	assert_string_equal(json_string_value(json_object_get(
	                        json_object_get(json_object_get(b, "preemptibleInstanceConfig"),
	                                        "preemptionAction"),
	                        "type")),
	                    "TERMINATE");
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(b, "createVnicDetails"), "subnetId")),
	    "ocid1.subnet.oc1..sub");
	/* the boot volume: disk_size_gb, default 200 (OCI's image default is about 47 GB) */
	assert_int_equal(json_integer_value(json_object_get(json_object_get(b, "sourceDetails"),
	                                                    "bootVolumeSizeInGBs")),
	                 200);
	json_decref(b);
	isc_launch_result_cleanup(&r);
	/* The subnet was checked once per process: the next launch goes straight to the ADs. */
	script_reset();
	reply(200, ADS);
	reply(200, "%s",
	      instance_json("ocid1.instance.oc1..n0", "Mock:US-ASHBURN-AD-1", "RUNNING", "isc-b1",
	                    1));
	reply(200, "%s",
	      instance_json("ocid1.instance.oc1..n1", "Mock:US-ASHBURN-AD-1", "RUNNING", "isc-b1",
	                    1));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_int_equal(S.calls, 3);
	isc_launch_result_cleanup(&r);
	s->provider->session_free(s);
}

static char zones_heard[256];
static void hear_zone(void *ctx, const char *zone)
{
	(void)ctx;
	strncat(zones_heard, zone, sizeof(zones_heard) - strlen(zones_heard) - 2);
	strcat(zones_heard, ";");
}

static void test_capacity_rolls_back_then_next_ad(void **state)
{
	struct isc_provider_session *s = session();
	struct isc_launch_spec sp = gang_spec(2, 0);
	struct isc_launch_result r;
	struct isc_err err;
	(void)state;
	zones_heard[0] = '\0';
	sp.before_zone = hear_zone;
	reply(200, ADS);
	reply(200, "%s",
	      instance_json("ocid1.instance.oc1..a0", "Mock:US-ASHBURN-AD-1", "PROVISIONING",
	                    "isc-b1", 0));
	reply(500, "{\"code\":\"InternalError\",\"message\":\"Out of host capacity.\"}");
	reply(204, "%s", "");
	reply(200, "%s",
	      instance_json("ocid1.instance.oc1..b0", "Mock:US-ASHBURN-AD-2", "PROVISIONING",
	                    "isc-b1", 0));
	reply(200, "%s",
	      instance_json("ocid1.instance.oc1..b1", "Mock:US-ASHBURN-AD-2", "PROVISIONING",
	                    "isc-b1", 0));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_string_equal(r.zone, "Mock:US-ASHBURN-AD-2");
	assert_string_equal(r.nodes[0].id, "ocid1.instance.oc1..b0");
	/* Capacity is not retried in place: one call, then the rollback of a0. */
	assert_int_equal(S.calls, 6);
	assert_string_equal(S.sent[3].method, "DELETE");
	assert_non_null(strstr(S.sent[3].url, "/instances/ocid1.instance.oc1..a0"));
	assert_non_null(strstr(S.sent[3].url, "preserveBootVolume=false"));
	assert_string_equal(S.sent[4].retry_token, "isc-cl_1-us-ashburn-ad-2-0");
	/* The broker heard of each AD before its first LaunchInstance, by the catalog's name. */
	assert_string_equal(zones_heard, "US-ASHBURN-AD-1;US-ASHBURN-AD-2;");
	isc_launch_result_cleanup(&r);
	s->provider->session_free(s);
}

/*
 * An RDMA gang (BM.GPU.H100.8 x 2): a compute cluster of its own per AD, created before
 * the AD's launches and joined by every node; AD-1 runs out of capacity, so its node is
 * rolled back and its cluster deleted (OCI refuses while the node terminates: tolerated),
 * and AD-2 gets a cluster of its own.
 */
static void test_rdma_gang_compute_cluster_per_ad(void **state)
{
	struct isc_launch_spec sp;
	struct isc_provider_session *s = rdma_gang_start(2, &sp);
	struct isc_launch_result r;
	struct isc_err err;
	json_t *b;
	(void)state;
	reply(200, "{\"id\":\"ocid1.computecluster.oc1..cc1\",\"availabilityDomain\":"
	           "\"Mock:US-ASHBURN-AD-1\",\"lifecycleState\":\"ACTIVE\"}");
	reply(200, "%s",
	      instance_json("ocid1.instance.oc1..a0", "Mock:US-ASHBURN-AD-1", "PROVISIONING",
	                    "isc-b1", 0));
	reply(500, "{\"code\":\"InternalError\",\"message\":\"Out of host capacity.\"}");
	reply(204, "%s", "");
	reply(409, "{\"code\":\"Conflict\",\"message\":\"still has instances\"}");
	reply(200, "{\"id\":\"ocid1.computecluster.oc1..cc2\",\"availabilityDomain\":"
	           "\"Mock:US-ASHBURN-AD-2\",\"lifecycleState\":\"ACTIVE\"}");
	reply(200, "%s",
	      instance_json("ocid1.instance.oc1..b0", "Mock:US-ASHBURN-AD-2", "PROVISIONING",
	                    "isc-b1", 0));
	reply(200, "%s",
	      instance_json("ocid1.instance.oc1..b1", "Mock:US-ASHBURN-AD-2", "PROVISIONING",
	                    "isc-b1", 0));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_string_equal(r.zone, "Mock:US-ASHBURN-AD-2");
	assert_int_equal(S.calls, 9);
	assert_string_equal(S.sent[1].method, "POST");
	assert_string_equal(S.sent[1].url,
	                    "http://127.0.0.1:9/oci/us-ashburn-1/20160918/computeClusters");
	assert_string_equal(S.sent[1].retry_token, "isc-cl_1-us-ashburn-ad-1-99999");
	b = json_loads(S.sent[1].body, 0, NULL);
	assert_non_null(b);
	assert_string_equal(json_string_value(json_object_get(b, "availabilityDomain")),
	                    "Mock:US-ASHBURN-AD-1");
	assert_string_equal(json_string_value(json_object_get(b, "compartmentId")), TEN);
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(b, "freeformTags"), "isc:broker")),
	    "isc-b1");
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(b, "freeformTags"), "isc:token")),
	    "isc-cl_1-us-ashburn-ad-1-99999");
	json_decref(b);
	assert_joins(2, "ocid1.computecluster.oc1..cc1");
	assert_string_equal(S.sent[4].method, "DELETE");
	assert_non_null(strstr(S.sent[4].url, "/instances/ocid1.instance.oc1..a0"));
	assert_string_equal(S.sent[5].method, "DELETE");
	assert_non_null(strstr(S.sent[5].url, "/computeClusters/ocid1.computecluster.oc1..cc1"));
	b = json_loads(S.sent[6].body, 0, NULL);
	assert_string_equal(json_string_value(json_object_get(b, "availabilityDomain")),
	                    "Mock:US-ASHBURN-AD-2");
	json_decref(b);
	for (int i = 7; i <= 8; i++)
		assert_joins(i, "ocid1.computecluster.oc1..cc2");
	isc_launch_result_cleanup(&r);
	s->provider->session_free(s);
}

/*
 * A node replacing a lost member of an RDMA gang joins the compute cluster its gang's
 * launch made in that AD (found by its isc:token tag, ACTIVE, in the AD), creating none;
 * with that cluster gone it is a capacity answer and nothing is deleted.
 */
static void test_replacement_joins_gang_cluster(void **state)
{
	struct isc_launch_spec sp;
	struct isc_provider_session *s = rdma_gang_start(1, &sp);
	struct isc_launch_result r;
	struct isc_err err;
	(void)state;
	sp.idempotency_token = "isc-cl_2";
	sp.placement_token = "isc-cl_1";
	sp.n_zones = 1;
	reply(200, "{\"items\":[{\"id\":\"ocid1.computecluster.oc1..other\",\"availabilityDomain\":"
	           "\"Mock:US-ASHBURN-AD-1\",\"lifecycleState\":\"ACTIVE\",\"freeformTags\":"
	           "{\"isc:token\":\"isc-cl_9-us-ashburn-ad-1-99999\"}},"
	           "{\"id\":\"ocid1.computecluster.oc1..cc1\",\"availabilityDomain\":"
	           "\"Mock:US-ASHBURN-AD-1\",\"lifecycleState\":\"ACTIVE\",\"freeformTags\":"
	           "{\"isc:token\":\"isc-cl_1-us-ashburn-ad-1-99999\"}}]}");
	reply(200, "%s",
	      instance_json("ocid1.instance.oc1..r0", "Mock:US-ASHBURN-AD-1", "PROVISIONING",
	                    "isc-b1", 0));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_int_equal(S.calls, 3);
	assert_string_equal(S.sent[1].method, "GET");
	assert_non_null(strstr(S.sent[1].url, "/computeClusters?compartmentId="));
	assert_joins(2, "ocid1.computecluster.oc1..cc1");
	isc_launch_result_cleanup(&r);
	/* the gang's cluster is gone: nothing launched, created or deleted */
	script_reset();
	reply(200, ADS);
	reply(200, "{\"items\":[{\"id\":\"ocid1.computecluster.oc1..cc1\",\"availabilityDomain\":"
	           "\"Mock:US-ASHBURN-AD-1\",\"lifecycleState\":\"DELETED\",\"freeformTags\":"
	           "{\"isc:token\":\"isc-cl_1-us-ashburn-ad-1-99999\"}}]}");
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), ISC_ECAPACITY);
	assert_int_equal(S.calls, 2); /* the ADs, then the clusters */
	assert_non_null(
	    strstr(err.msg, "the gang's compute cluster in Mock:US-ASHBURN-AD-1 is gone"));
	s->provider->session_free(s);
}

/* Only RDMA shapes join one, and only gangs: an A10 gang or a single H100 gets none. */
static void test_no_cluster_without_rdma_or_gang(void **state)
{
	struct isc_provider_session *s;
	struct isc_launch_spec sp = gang_spec(2, 0);
	struct isc_launch_result r;
	struct isc_err err;
	(void)state;
	s = session_clusters();
	assert_false(isc_oci_rdma_shape("BM.GPU.A10.4"));
	assert_true(isc_oci_rdma_shape("BM.GPU.A100-v2.8"));
	sp.instance_type = "BM.GPU.A10.4";
	reply(200, ADS);
	reply(200, "%s",
	      instance_json("ocid1.instance.oc1..c0", "Mock:US-ASHBURN-AD-1", "PROVISIONING",
	                    "isc-b1", 0));
	reply(200, "%s",
	      instance_json("ocid1.instance.oc1..c1", "Mock:US-ASHBURN-AD-1", "PROVISIONING",
	                    "isc-b1", 0));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_int_equal(S.calls, 3);
	assert_null(strstr(S.sent[1].body, "computeClusterId"));
	isc_launch_result_cleanup(&r);
	script_reset();
	sp = gang_spec(1, 0);
	sp.instance_type = "BM.GPU.H100.8";
	reply(200, ADS);
	reply(200, "%s",
	      instance_json("ocid1.instance.oc1..d0", "Mock:US-ASHBURN-AD-1", "PROVISIONING",
	                    "isc-b1", 0));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_int_equal(S.calls, 2);
	assert_null(strstr(S.sent[1].body, "computeClusterId"));
	isc_launch_result_cleanup(&r);
	s->provider->session_free(s);
}

/* describe deletes this broker's clusters no live instance is in, and nothing else. */
static void test_describe_reconciles_clusters(void **state)
{
	struct isc_provider_session *s;
	struct isc_node_info *nodes = NULL;
	size_t n = 0;
	struct isc_err err;
	(void)state;
	s = session_clusters();
	reply(200,
	      "[{\"id\":\"ocid1.instance.oc1..r0\",\"availabilityDomain\":\"Mock:US-ASHBURN-AD-1\","
	      "\"shape\":\"BM.GPU.H100.8\",\"lifecycleState\":\"RUNNING\",\"computeClusterId\":"
	      "\"ocid1.computecluster.oc1..live\",\"freeformTags\":{\"isc:broker\":\"isc-b1\"}},"
	      "{\"id\":\"ocid1.instance.oc1..r1\",\"availabilityDomain\":\"Mock:US-ASHBURN-AD-2\","
	      "\"shape\":\"BM.GPU.H100.8\",\"lifecycleState\":\"TERMINATED\",\"computeClusterId\":"
	      "\"ocid1.computecluster.oc1..dead\",\"freeformTags\":{\"isc:broker\":\"isc-b1\"}}]");
	reply(200, "{\"items\":[{\"id\":\"ocid1.computecluster.oc1..live\",\"lifecycleState\":"
	           "\"ACTIVE\",\"freeformTags\":{\"isc:broker\":\"isc-b1\"}},{\"id\":"
	           "\"ocid1.computecluster.oc1..dead\",\"lifecycleState\":\"ACTIVE\","
	           "\"freeformTags\":{\"isc:broker\":\"isc-b1\"}},{\"id\":"
	           "\"ocid1.computecluster.oc1..other\",\"lifecycleState\":\"ACTIVE\","
	           "\"freeformTags\":{\"isc:broker\":\"someone-else\"}}]}");
	reply(204, "%s", "");
	/* then r0's address (r1 is terminated: none looked up) */
	reply(200, "[{\"vnicId\":\"ocid1.vnic.oc1..vr0\",\"lifecycleState\":\"ATTACHED\"}]");
	reply(200, "{\"privateIp\":\"10.0.0.9\"}");
	assert_int_equal(s->provider->describe(s, "isc-b1", &nodes, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_non_null(strstr(S.sent[1].url, "/20160918/computeClusters?compartmentId="));
	assert_string_equal(S.sent[2].method, "DELETE");
	assert_non_null(strstr(S.sent[2].url, "/computeClusters/ocid1.computecluster.oc1..dead"));
	assert_int_equal(S.calls, 5);
	isc_node_infos_free(nodes, n);
	s->provider->session_free(s);
}

/* A BM.GPU.H100.8 instance of broker isc-b1 in compute cluster `cluster`. */
static const char *cc_inst(const char *id, const char *cluster, const char *lifecycle)
{
	static char buf[32][640];
	static int k;
	char *b = buf[k++ % 32];
	snprintf(
	    b, sizeof(buf[0]),
	    "{\"id\":\"ocid1.instance.oc1..%s\",\"availabilityDomain\":\"Mock:US-ASHBURN-AD-1\","
	    "\"shape\":\"BM.GPU.H100.8\",\"lifecycleState\":\"%s\",\"computeClusterId\":"
	    "\"ocid1.computecluster.oc1..%s\",\"freeformTags\":{\"isc:broker\":\"isc-b1\"}}",
	    id, lifecycle, cluster);
	return b;
}

/* One ACTIVE compute cluster of broker isc-b1, as ListComputeClusters shows it. */
static const char *cc_item(const char *cluster)
{
	static char buf[32][400];
	static int k;
	char *b = buf[k++ % 32];
	snprintf(b, sizeof(buf[0]),
	         "{\"id\":\"ocid1.computecluster.oc1..%s\",\"lifecycleState\":\"ACTIVE\","
	         "\"freeformTags\":{\"isc:broker\":\"isc-b1\"}}",
	         cluster);
	return b;
}

static size_t cluster_lists(void)
{
	size_t n = 0;
	for (size_t i = 0; i < S.calls; i++)
		n += strcmp(S.sent[i].method, "GET") == 0 &&
		     strstr(S.sent[i].url, "/computeClusters?compartmentId=") != NULL;
	return n;
}

/*
 * When describe sweeps the compute clusters (providers/sweep.h): the first time, then
 * only once a cluster's instances are all TERMINATED and no sweep saw it go, or every 5
 * minutes; and at most 10 deletes a sweep, the rest at the next describe.
 */
static void test_describe_sweeps_clusters_when_due(void **state)
{
	struct isc_provider_session *s = session_clusters();
	struct isc_node_info *nodes = NULL;
	size_t n = 0;
	struct isc_err err;
	struct isc_buf insts, ccs;
	char names[12][16];
	(void)state;
#define DESCRIBE()                                                                                 \
	do {                                                                                       \
		assert_int_equal(s->provider->describe(s, "isc-b1", &nodes, &n, &err), 0);         \
		isc_node_infos_free(nodes, n);                                                     \
	} while (0)
	/* 1. The first describe sweeps; both clusters hold a live instance: none deleted. */
	reply(200, "[%s,%s]", cc_inst("sw-a0", "sw-a", "RUNNING"),
	      cc_inst("sw-b0", "sw-b", "RUNNING"));
	reply(200, "{\"items\":[%s,%s]}", cc_item("sw-a"), cc_item("sw-b"));
	for (int i = 0; i < 2; i++) { /* the two addresses, looked up once */
		reply(200, "[{\"vnicId\":\"ocid1.vnic.oc1..v%d\",\"lifecycleState\":\"ATTACHED\"}]",
		      i);
		reply(200, "{\"privateIp\":\"10.0.0.%d\"}", 20 + i);
	}
	DESCRIBE();
	assert_int_equal(S.calls, 6);
	assert_int_equal(cluster_lists(), 1);
	/* 2. Nothing changed: no sweep. */
	reply(200, "[%s,%s]", cc_inst("sw-a0", "sw-a", "RUNNING"),
	      cc_inst("sw-b0", "sw-b", "RUNNING"));
	DESCRIBE();
	assert_int_equal(S.calls, 7);
	/* 3. sw-b's instance is terminated: a sweep deletes sw-b. */
	reply(200, "[%s,%s]", cc_inst("sw-a0", "sw-a", "RUNNING"),
	      cc_inst("sw-b0", "sw-b", "TERMINATED"));
	reply(200, "{\"items\":[%s,%s]}", cc_item("sw-a"), cc_item("sw-b"));
	reply(204, "%s", "");
	DESCRIBE();
	assert_int_equal(S.calls, 10);
	assert_int_equal(cluster_lists(), 2);
	assert_string_equal(S.sent[9].method, "DELETE");
	assert_non_null(strstr(S.sent[9].url, "/computeClusters/ocid1.computecluster.oc1..sw-b"));
	/* 4. The same listing again (OCI lists terminated instances for a while): sw-b is
	 * known gone, no sweep. */
	reply(200, "[%s,%s]", cc_inst("sw-a0", "sw-a", "RUNNING"),
	      cc_inst("sw-b0", "sw-b", "TERMINATED"));
	DESCRIBE();
	assert_int_equal(S.calls, 11);
	/* 5. Five minutes on: swept again (a leftover with no instance, sw-l, goes). */
	fake_now_ms += 5 * 60 * 1000;
	reply(200, "[%s,%s]", cc_inst("sw-a0", "sw-a", "RUNNING"),
	      cc_inst("sw-b0", "sw-b", "TERMINATED"));
	reply(200, "{\"items\":[%s,%s]}", cc_item("sw-a"), cc_item("sw-l"));
	reply(204, "%s", "");
	DESCRIBE();
	fake_now_ms -= 5 * 60 * 1000;
	assert_int_equal(S.calls, 14);
	assert_int_equal(cluster_lists(), 3);
	assert_non_null(strstr(S.sent[13].url, "/computeClusters/ocid1.computecluster.oc1..sw-l"));
	s->provider->session_free(s);

	/* 6. Twelve gangs torn down at once: 10 deletes, then the other 2 at the next one. */
	driver_setup(NULL);
	s = session_clusters();
	isc_buf_init(&insts, 0);
	isc_buf_init(&ccs, 0);
	for (int i = 0; i < 12; i++) {
		snprintf(names[i], sizeof(names[i]), "sw-g%02d", i);
		assert_int_equal(isc_buf_puts(&insts, i ? "," : ""), 0);
		assert_int_equal(isc_buf_puts(&insts, cc_inst(names[i], names[i], "TERMINATED")),
		                 0);
		assert_int_equal(isc_buf_puts(&ccs, i ? "," : ""), 0);
		assert_int_equal(isc_buf_puts(&ccs, cc_item(names[i])), 0);
	}
	reply(200, "[%s]", insts.data);
	reply(200, "{\"items\":[%s]}", ccs.data);
	for (int i = 0; i < 10; i++)
		reply(204, "%s", "");
	DESCRIBE();
	assert_int_equal(S.calls, 12);
	assert_non_null(
	    strstr(S.sent[11].url, "/computeClusters/ocid1.computecluster.oc1..sw-g09"));
	reply(200, "[%s]", insts.data);
	reply(200, "{\"items\":[%s,%s]}", cc_item(names[10]), cc_item(names[11]));
	reply(204, "%s", "");
	reply(204, "%s", "");
	DESCRIBE();
	assert_int_equal(S.calls, 16);
	assert_non_null(
	    strstr(S.sent[14].url, "/computeClusters/ocid1.computecluster.oc1..sw-g10"));
	assert_non_null(
	    strstr(S.sent[15].url, "/computeClusters/ocid1.computecluster.oc1..sw-g11"));
	/* All twelve known gone: the next describe does not sweep. */
	reply(200, "[%s]", insts.data);
	DESCRIBE();
	assert_int_equal(S.calls, 17);
	assert_int_equal(cluster_lists(), 2);
#undef DESCRIBE
	isc_buf_cleanup(&insts);
	isc_buf_cleanup(&ccs);
	s->provider->session_free(s);
}

static void test_compute_cluster_id_setting_refused(void **state)
{
	const struct isc_provider *p = isc_provider_find("oci");
	struct isc_kv creds[] = {
	    {"tenancy", TEN}, {"user", USR}, {"fingerprint", FP}, {"private_key_pem", pem_text}};
	struct isc_kv items[] = {{"endpoint", "http://127.0.0.1:9/oci/{region}"},
	                         {"compute_cluster_id", "ocid1.computecluster.oc1..one"}};
	struct isc_provider_settings st = {items, 2, creds, 4};
	struct isc_provider_session *s = NULL;
	struct isc_err err;
	(void)state;
	assert_int_equal(p->session_new(&st, "us-ashburn-1", &scripted, &fake_clock, &s, &err),
	                 ISC_EINVALID);
	assert_non_null(strstr(err.msg, "compute_clusters"));
	items[1] = (struct isc_kv){"compute_clusters", "sometimes"};
	assert_int_equal(p->session_new(&st, "us-ashburn-1", &scripted, &fake_clock, &s, &err),
	                 ISC_EINVALID);
	items[1] = (struct isc_kv){"disk_size_gb", "20"}; /* OCI's minimum is 50 GB */
	assert_int_equal(p->session_new(&st, "us-ashburn-1", &scripted, &fake_clock, &s, &err),
	                 ISC_EINVALID);
	assert_non_null(strstr(err.msg, "disk_size_gb"));
}

static void test_unreadable_launch_reply_is_unknown(void **state)
{
	struct isc_provider_session *s = session();
	struct isc_launch_spec sp = gang_spec(2, 0);
	struct isc_launch_result r;
	struct isc_err err;
	(void)state;
	reply(200, ADS);
	reply(200, "%s",
	      instance_json("ocid1.instance.oc1..g0", "Mock:US-ASHBURN-AD-1", "PROVISIONING",
	                    "isc-b1", 0));
	reply(200, "{\"id\":"); /* accepted, garbled */
	/* The node may exist: transient (the broker asks again with the same token), no rollback.
	 */
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), ISC_ETRANSIENT);
	assert_non_null(strstr(err.msg, "accepted"));
	assert_int_equal(S.calls, 3);
	for (size_t i = 0; i < S.calls; i++)
		assert_string_not_equal(S.sent[i].method, "DELETE");
	s->provider->session_free(s);
}

static void test_capacity_everywhere_and_quota(void **state)
{
	struct isc_provider_session *s = session();
	struct isc_launch_spec sp = gang_spec(1, 0);
	struct isc_launch_result r;
	struct isc_err err;
	(void)state;
	reply(200, ADS);
	reply(500, "{\"code\":\"InternalError\",\"message\":\"Out of host capacity.\"}");
	reply(500, "{\"code\":\"InternalError\",\"message\":\"Out of host capacity.\"}");
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), ISC_ECAPACITY);
	assert_non_null(strstr(err.msg, "2 availability domain(s)"));
	assert_null(r.nodes);
	script_reset();
	reply(200, ADS);
	reply(400, "{\"code\":\"LimitExceeded\",\"message\":\"service limit\"}");
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), ISC_EQUOTA);
	assert_int_equal(S.calls, 2);
	s->provider->session_free(s);
}

static void test_replayed_gang_that_was_rolled_back(void **state)
{
	struct isc_provider_session *s = session();
	struct isc_launch_spec sp = gang_spec(2, 0);
	struct isc_launch_result r;
	struct isc_err err;
	(void)state;
	/* A crash replay: AD-1's retry token returns its node, terminated by the earlier
	 * rollback; the driver moves on without launching the rest of AD-1. */
	reply(200, ADS);
	reply(200, "%s",
	      instance_json("ocid1.instance.oc1..a0", "Mock:US-ASHBURN-AD-1", "TERMINATED",
	                    "isc-b1", 0));
	reply(204, "%s", "");
	reply(200, "%s",
	      instance_json("ocid1.instance.oc1..b0", "Mock:US-ASHBURN-AD-2", "RUNNING", "isc-b1",
	                    0));
	reply(200, "%s",
	      instance_json("ocid1.instance.oc1..b1", "Mock:US-ASHBURN-AD-2", "RUNNING", "isc-b1",
	                    0));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_string_equal(r.zone, "Mock:US-ASHBURN-AD-2");
	assert_int_equal(S.calls, 5);
	isc_launch_result_cleanup(&r);
	/* An invalidated token whose node no longer lives counts the same way. */
	script_reset();
	reply(200, ADS);
	reply(409, "{\"code\":\"InvalidatedRetryToken\",\"message\":\"invalidated\"}");
	reply(200, "[]");
	reply(200, "%s",
	      instance_json("ocid1.instance.oc1..b0", "Mock:US-ASHBURN-AD-2", "RUNNING", "isc-b1",
	                    0));
	reply(200, "%s",
	      instance_json("ocid1.instance.oc1..b1", "Mock:US-ASHBURN-AD-2", "RUNNING", "isc-b1",
	                    0));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_string_equal(r.zone, "Mock:US-ASHBURN-AD-2");
	isc_launch_result_cleanup(&r);
	s->provider->session_free(s);
}

static void test_lost_reply_keeps_nodes(void **state)
{
	struct isc_provider_session *s = session();
	struct isc_launch_spec sp = gang_spec(2, 0);
	struct isc_launch_result r;
	struct isc_err err;
	(void)state;
	reply(200, ADS);
	reply(200, "%s",
	      instance_json("ocid1.instance.oc1..a0", "Mock:US-ASHBURN-AD-1", "PROVISIONING",
	                    "isc-b1", 0));
	for (int i = 0; i < 5; i++)
		reply(0, "%s", "");
	/* Retryable: nothing is terminated, so the broker's replay adopts node 0 by its token. */
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), ISC_ETRANSIENT);
	assert_int_equal(S.calls, 7);
	for (size_t i = 0; i < S.calls; i++)
		assert_string_not_equal(S.sent[i].method, "DELETE");
	assert_string_equal(S.sent[2].retry_token, S.sent[6].retry_token);
	s->provider->session_free(s);
}

static void test_training_rule_missing(void **state)
{
	struct isc_provider_session *s = session_with("subnet_id", "ocid1.subnet.oc1..norule");
	struct isc_launch_spec sp = gang_spec(1, 0);
	struct isc_launch_result r;
	struct isc_err err;
	(void)state;
	reply(200, "{\"cidrBlock\":\"10.9.0.0/24\",\"securityListIds\":[\"ocid1.sl.a\"]}");
	reply(200, "{\"ingressSecurityRules\":[{\"protocol\":\"6\",\"source\":\"0.0.0.0/0\","
	           "\"tcpOptions\":{\"destinationPortRange\":{\"min\":22,\"max\":22}}}]}");
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), ISC_EINVALID);
	assert_non_null(strstr(err.msg, "ocid1.subnet.oc1..norule"));
	assert_non_null(strstr(err.msg, "source 10.9.0.0/24"));
	assert_non_null(strstr(err.msg, "29400"));
	assert_non_null(strstr(err.msg, "manage_security_list"));
	assert_int_equal(S.calls, 2); /* nothing launched */
	s->provider->session_free(s);
}

static void test_training_rule_managed(void **state)
{
	const struct isc_provider *p = isc_provider_find("oci");
	struct isc_kv creds[] = {
	    {"tenancy", TEN}, {"user", USR}, {"fingerprint", FP}, {"private_key_pem", pem_text}};
	struct isc_kv items[] = {{"endpoint", "http://127.0.0.1:9"},
	                         {"subnet_id", "ocid1.subnet.oc1..managed"},
	                         {"image_id", "ocid1.image.oc1..img"},
	                         {"manage_security_list", "true"}};
	struct isc_provider_settings st = {items, 4, creds, 4};
	struct isc_provider_session *s = NULL;
	struct isc_launch_spec sp = gang_spec(1, 0);
	struct isc_launch_result r;
	struct isc_err err;
	json_t *b;
	(void)state;
	assert_int_equal(p->session_new(&st, "us-ashburn-1", &scripted, &fake_clock, &s, &err), 0);
	reply(200, "{\"cidrBlock\":\"10.9.0.0/24\",\"securityListIds\":[\"ocid1.sl.a\"]}");
	reply(200, "{\"ingressSecurityRules\":[]}");
	reply_h(200, "etag: E1\r\n",
	        "{\"ingressSecurityRules\":[{\"protocol\":\"1\","
	        "\"source\":\"0.0.0.0/0\"}]}");
	reply(200, "{}");
	reply(200, ADS);
	reply(200, "%s",
	      instance_json("ocid1.instance.oc1..m0", "Mock:US-ASHBURN-AD-1", "PROVISIONING",
	                    "isc-b1", 0));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_string_equal(S.sent[3].method, "PUT");
	assert_string_equal(S.sent[3].url, "http://127.0.0.1:9/20160918/securityLists/ocid1.sl.a");
	assert_string_equal(S.sent[3].if_match, "E1");
	b = json_loads(S.sent[3].body, 0, NULL);
	/* The existing rule is kept and ours appended. */
	assert_int_equal(json_array_size(json_object_get(b, "ingressSecurityRules")), 2);
	assert_int_equal(
	    isc_oci_rules_allow_training(json_object_get(b, "ingressSecurityRules"), "10.9.0.0/24"),
	    1);
	json_decref(b);
	isc_launch_result_cleanup(&r);
	s->provider->session_free(s);
}

/*
 * A tenant's launch (issue 42): the subnet's security lists may not let all TCP in from
 * the subnet (refused, named, nothing made); the tenant's NSG is found by name or made in
 * the subnet's VCN (tagged, a retry token), given its rules (all from itself; SSH from
 * tenant_ssh_cidr), and every node's VNIC is put in it, the node tagged isc:tenant.
 */
static void test_tenant_nsg(void **state)
{
	struct isc_provider_session *s;
	struct isc_launch_spec sp = gang_spec(1, 0);
	struct isc_launch_result r;
	struct isc_err err;
	json_t *b, *rules;
	(void)state;
	ti_mode = "auto";
	s = session_with("tenant_ssh_cidr", "192.0.2.0/24");
	ti_mode = "never";
	sp.tenant = "17";
	reply(200, "{\"cidrBlock\":\"10.9.0.0/24\",\"vcnId\":\"ocid1.vcn.v\","
	           "\"securityListIds\":[\"ocid1.sl.a\"]}");
	reply(200, "{\"ingressSecurityRules\":[{\"protocol\":\"6\",\"source\":\"10.9.0.0/16\"}]}");
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), ISC_EINVALID);
	assert_int_equal(S.calls, 2);
	assert_non_null(
	    strstr(err.msg, "security list ocid1.sl.a lets all TCP in from 10.9.0.0/24"));
	script_reset();
	reply(200, "{\"cidrBlock\":\"10.9.0.0/24\",\"vcnId\":\"ocid1.vcn.v\","
	           "\"securityListIds\":[\"ocid1.sl.a\"]}");
	reply(200, "{\"ingressSecurityRules\":[{\"protocol\":\"6\",\"source\":\"0.0.0.0/0\","
	           "\"tcpOptions\":{\"destinationPortRange\":{\"min\":22,\"max\":22}}}]}");
	reply(200, "[]");
	reply(200, "{\"id\":\"ocid1.nsg.t17\",\"lifecycleState\":\"AVAILABLE\"}");
	reply(200, "[]");
	reply(200, "{\"securityRules\":[]}");
	reply(200, ADS);
	reply(200, "%s",
	      instance_json("ocid1.instance.oc1..t0", "Mock:US-ASHBURN-AD-1", "PROVISIONING",
	                    "isc-b1", 0));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_int_equal(S.calls, 8);
	assert_non_null(strstr(S.sent[2].url, "/networkSecurityGroups?compartmentId="));
	assert_non_null(
	    strstr(S.sent[2].url, "&vcnId=ocid1.vcn.v&displayName=isc-tenant-isc-b1-17"));
	assert_string_equal(S.sent[3].method, "POST");
	assert_non_null(S.sent[3].retry_token);
	b = json_loads(S.sent[3].body, 0, NULL);
	assert_string_equal(json_string_value(json_object_get(b, "vcnId")), "ocid1.vcn.v");
	assert_string_equal(json_string_value(json_object_get(b, "displayName")),
	                    "isc-tenant-isc-b1-17");
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(b, "freeformTags"), "isc:tenant")),
	    "17");
	json_decref(b);
	assert_non_null(
	    strstr(S.sent[4].url, "/networkSecurityGroups/ocid1.nsg.t17/securityRules"));
	assert_non_null(
	    strstr(S.sent[5].url, "/networkSecurityGroups/ocid1.nsg.t17/actions/addSecurityRules"));
	b = json_loads(S.sent[5].body, 0, NULL);
	rules = json_object_get(b, "securityRules");
	assert_int_equal(json_array_size(rules), 2);
	assert_string_equal(json_string_value(json_object_get(json_array_get(rules, 0), "source")),
	                    "ocid1.nsg.t17");
	assert_string_equal(
	    json_string_value(json_object_get(json_array_get(rules, 0), "sourceType")),
	    "NETWORK_SECURITY_GROUP");
	assert_string_equal(
	    json_string_value(json_object_get(json_array_get(rules, 0), "protocol")), "all");
	assert_string_equal(json_string_value(json_object_get(json_array_get(rules, 1), "source")),
	                    "192.0.2.0/24");
	json_decref(b);
	b = json_loads(S.sent[7].body, 0, NULL);
	assert_string_equal(
	    json_string_value(json_array_get(
	        json_object_get(json_object_get(b, "createVnicDetails"), "nsgIds"), 0)),
	    "ocid1.nsg.t17");
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(b, "freeformTags"), "isc:tenant")),
	    "17");
	json_decref(b);
	isc_launch_result_cleanup(&r);
	/* found with its rule: no create, no add */
	script_reset();
	reply(200, "{\"cidrBlock\":\"10.9.0.0/24\",\"vcnId\":\"ocid1.vcn.v\","
	           "\"securityListIds\":[]}");
	reply(200, "[{\"id\":\"ocid1.nsg.t17\",\"displayName\":\"isc-tenant-isc-b1-17\","
	           "\"lifecycleState\":\"AVAILABLE\"}]");
	reply(200, "[{\"direction\":\"INGRESS\",\"protocol\":\"all\",\"source\":\"ocid1.nsg.t17\","
	           "\"sourceType\":\"NETWORK_SECURITY_GROUP\"}]");
	reply(200, ADS);
	reply(200, "%s",
	      instance_json("ocid1.instance.oc1..t0", "Mock:US-ASHBURN-AD-1", "PROVISIONING",
	                    "isc-b1", 0));
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_int_equal(S.calls, 5);
	isc_launch_result_cleanup(&r);
	s->provider->session_free(s);
}

/*
 * describe sweeps this broker's tenant NSGs that no VNIC is in (the cloud's own list):
 * deleted; one with a VNIC stays; another broker's is not touched.
 */
static void test_tenant_nsg_swept(void **state)
{
	struct isc_provider_session *s;
	struct isc_node_info *nodes = NULL;
	size_t n = 0;
	struct isc_err err;
	(void)state;
	ti_mode = "auto";
	s = session();
	ti_mode = "never";
	reply(200, "[]");
	reply(200, "[{\"id\":\"ocid1.nsg.a\",\"displayName\":\"isc-tenant-isc-b1-a\","
	           "\"lifecycleState\":\"AVAILABLE\",\"freeformTags\":{\"isc:broker\":\"isc-b1\","
	           "\"isc:tenant\":\"a\"}},"
	           "{\"id\":\"ocid1.nsg.b\",\"displayName\":\"isc-tenant-isc-b1-b\","
	           "\"lifecycleState\":\"AVAILABLE\",\"freeformTags\":{\"isc:broker\":\"isc-b1\","
	           "\"isc:tenant\":\"b\"}},"
	           "{\"id\":\"ocid1.nsg.x\",\"displayName\":\"isc-tenant-other-a\","
	           "\"lifecycleState\":\"AVAILABLE\",\"freeformTags\":{\"isc:broker\":\"other\","
	           "\"isc:tenant\":\"a\"}}]");
	reply(200, "[{\"vnicId\":\"ocid1.vnic.1\"}]");
	reply(200, "[]");
	reply(204, "%s", "");
	assert_int_equal(s->provider->describe(s, "isc-b1", &nodes, &n, &err), 0);
	isc_node_infos_free(nodes, n);
	assert_int_equal(S.calls, 5);
	assert_non_null(strstr(S.sent[2].url, "/networkSecurityGroups/ocid1.nsg.a/vnics"));
	assert_non_null(strstr(S.sent[3].url, "/networkSecurityGroups/ocid1.nsg.b/vnics"));
	assert_string_equal(S.sent[4].method, "DELETE");
	assert_non_null(strstr(S.sent[4].url, "/networkSecurityGroups/ocid1.nsg.b"));
	s->provider->session_free(s);
}

static void test_describe_paging_cache_preemption(void **state)
{
	struct isc_provider_session *s = session();
	struct isc_node_info *nodes = NULL;
	size_t n = 0;
	struct isc_err err;
	(void)state;
	/* Page 1: ours (running) + another broker's; page 2: ours (preempted). */
	reply_h(
	    200, "opc-next-page: P2\r\n", "[%s,%s]",
	    instance_json("ocid1.instance.oc1..d0", "Mock:US-ASHBURN-AD-1", "RUNNING", "isc-b1", 1),
	    instance_json("ocid1.instance.oc1..x0", "Mock:US-ASHBURN-AD-1", "RUNNING", "other", 0));
	reply(200, "[%s]",
	      instance_json("ocid1.instance.oc1..d1", "Mock:US-ASHBURN-AD-1", "TERMINATING",
	                    "isc-b1", 1));
	reply(200, "[{\"vnicId\":\"ocid1.vnic.oc1..v0\",\"lifecycleState\":\"ATTACHED\"}]");
	reply(200, "{\"privateIp\":\"10.0.0.5\",\"publicIp\":\"203.0.113.5\"}");
	assert_int_equal(s->provider->describe(s, "isc-b1", &nodes, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_string_equal(nodes[0].id, "ocid1.instance.oc1..d0");
	assert_string_equal(nodes[0].private_ip, "10.0.0.5");
	assert_string_equal(nodes[0].public_ip, "203.0.113.5");
	assert_string_equal(nodes[0].client_token, "tok-ocid1.instance.oc1..d0");
	assert_int_equal(nodes[0].interruption_noticed, 0);
	assert_int_equal(nodes[1].state, ISC_NODE_SHUTTING_DOWN);
	assert_int_equal(nodes[1].interruption_noticed, 1);
	assert_true(nodes[1].interruption_at_ms == fake_now_ms);
	assert_non_null(strstr(S.sent[1].url, "page=P2"));
	assert_non_null(strstr(S.sent[0].url, "compartmentId=ocid1.tenancy.oc1..aaaatenancy"));
	isc_node_infos_free(nodes, n);
	/* The next tick: one ListInstances, no VNIC calls (the address is known). */
	script_reset();
	reply(200, "[%s]",
	      instance_json("ocid1.instance.oc1..d0", "Mock:US-ASHBURN-AD-1", "RUNNING", "isc-b1",
	                    1));
	assert_int_equal(s->provider->describe(s, "isc-b1", &nodes, &n, &err), 0);
	assert_int_equal(S.calls, 1);
	assert_string_equal(nodes[0].private_ip, "10.0.0.5");
	isc_node_infos_free(nodes, n);
	s->provider->session_free(s);
}

static void test_describe_survives_a_failed_address_lookup(void **state)
{
	struct isc_provider_session *s = session();
	struct isc_node_info *nodes = NULL;
	size_t n = 0;
	struct isc_err err;
	(void)state;
	reply(200, "[%s]",
	      instance_json("ocid1.instance.oc1..v9", "Mock:US-ASHBURN-AD-1", "RUNNING", "isc-b1",
	                    0));
	reply(400, "{\"code\":\"InvalidParameter\",\"message\":\"no\"}");
	assert_int_equal(s->provider->describe(s, "isc-b1", &nodes, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_string_equal(nodes[0].private_ip, "");
	isc_node_infos_free(nodes, n);
	s->provider->session_free(s);
}

static void test_terminate(void **state)
{
	struct isc_provider_session *s = session();
	struct isc_node_info *nodes = NULL;
	size_t n = 0;
	const char *ids[] = {"ocid1.instance.oc1..t0", "ocid1.instance.oc1..t1"};
	const char *bad[] = {"i-0123; rm -rf"};
	struct isc_err err;
	(void)state;
	reply(404, "{\"code\":\"NotAuthorizedOrNotFound\",\"message\":\"gone\"}");
	reply(204, "%s", "");
	assert_int_equal(s->provider->terminate(s, ids, 2, &err), 0);
	assert_int_equal(S.calls, 2);
	assert_string_equal(S.sent[1].method, "DELETE");
	assert_int_equal(s->provider->terminate(s, bad, 1, &err), ISC_EINVALID);
	/* A preemptible node we terminated ourselves is no interruption. */
	script_reset();
	reply(200, "[%s]",
	      instance_json("ocid1.instance.oc1..t1", "Mock:US-ASHBURN-AD-1", "TERMINATED",
	                    "isc-b1", 1));
	assert_int_equal(s->provider->describe(s, "isc-b1", &nodes, &n, &err), 0);
	assert_int_equal(nodes[0].interruption_noticed, 0);
	isc_node_infos_free(nodes, n);
	s->provider->session_free(s);
}

/*
 * Issue 42: an organisation's OCI key is used alone. With OCI_CLI_USER, _TENANCY,
 * _FINGERPRINT and _KEY_FILE all naming the platform's key, a key that lacks a field
 * (or has none) is refused when the session is made, naming the field; OCIDs that
 * would carry a control character into the Authorization header's keyId are refused.
 */
static void test_byo_key_never_the_platforms(void **state)
{
	const struct isc_provider *p = isc_provider_find("oci");
	char key_file[600];
	struct isc_kv creds[] = {
	    {"tenancy", TEN}, {"user", USR}, {"fingerprint", FP}, {"private_key_pem", pem_text}};
	struct isc_provider_settings st = {NULL, 0, creds, 4};
	struct isc_provider_session *s = NULL;
	struct isc_err err;
	(void)state;

	snprintf(key_file, sizeof(key_file), "%s/test_private_key.pem", vec_dir());
	setenv("OCI_CLI_USER", USR, 1);
	setenv("OCI_CLI_TENANCY", TEN, 1);
	setenv("OCI_CLI_FINGERPRINT", FP, 1);
	setenv("OCI_CLI_KEY_FILE", key_file, 1);
	setenv("OCI_CLI_CONFIG_FILE", "/nonexistent/oci-config", 1);
	/* The platform's own session from those variables works. */
	st.credentials = NULL;
	st.n_credentials = 0;
	assert_int_equal(p->session_new(&st, "us-ashburn-1", &scripted, &fake_clock, &s, &err), 0);
	p->session_free(s);
	s = NULL;
	/* An organisation's key with no field. */
	st.byo = 1;
	assert_int_equal(p->session_new(&st, "us-ashburn-1", &scripted, &fake_clock, &s, &err),
	                 ISC_EAUTH);
	assert_non_null(strstr(err.msg, "tenancy is missing"));
	assert_null(s);
	/* ... with every field but its private key. */
	st.credentials = creds;
	st.n_credentials = 3;
	assert_int_equal(p->session_new(&st, "us-ashburn-1", &scripted, &fake_clock, &s, &err),
	                 ISC_EAUTH);
	assert_non_null(strstr(err.msg, "private_key_pem is missing"));
	/* ... with a tab (a control character) in its tenancy OCID. */
	creds[0].value = "ocid1.tenancy.oc1..aaaa\ttenancy";
	st.n_credentials = 4;
	assert_int_equal(p->session_new(&st, "us-ashburn-1", &scripted, &fake_clock, &s, &err),
	                 ISC_EAUTH);
	assert_non_null(strstr(err.msg, "tenancy is not an OCID"));
	assert_int_equal(p->credentials_valid(creds, 4, &err), ISC_EINVALID);
	creds[0].value = TEN;
	assert_int_equal(p->credentials_valid(creds, 4, &err), 0);
	/* A private key that does not load is the key's fault, not the settings'. */
	creds[3].value = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
	assert_int_equal(p->session_new(&st, "us-ashburn-1", &scripted, &fake_clock, &s, &err),
	                 ISC_EAUTH);
	assert_non_null(strstr(err.msg, "private_key_pem"));
	assert_int_equal(p->credentials_valid(creds, 4, &err), ISC_EINVALID);
	assert_int_equal(S.calls, 0);
	unsetenv("OCI_CLI_USER");
	unsetenv("OCI_CLI_TENANCY");
	unsetenv("OCI_CLI_FINGERPRINT");
	unsetenv("OCI_CLI_KEY_FILE");
	unsetenv("OCI_CLI_CONFIG_FILE");
}

static void test_session_errors(void **state)
{
	const struct isc_provider *p = isc_provider_find("oci");
	struct isc_kv creds[] = {
	    {"tenancy", TEN}, {"user", USR}, {"fingerprint", FP}, {"private_key_pem", pem_text}};
	struct isc_kv items[] = {{"endpoint_core", "ftp://x"}};
	struct isc_provider_settings st = {items, 1, creds, 4};
	struct isc_provider_session *s = NULL;
	struct isc_err err;
	(void)state;
	/* No spot market: list prices only, which the price refresh knows by a NULL slot. */
	assert_null(p->refresh_prices);
	assert_int_equal(p->session_new(&st, "us-ashburn-1", &scripted, &fake_clock, &s, &err),
	                 ISC_EINVALID);
	assert_non_null(strstr(err.msg, "endpoint_core"));
	assert_null(s);
	/* Plain http leaves loopback only with allow_insecure_endpoint = true. */
	items[0] = (struct isc_kv){"endpoint", "http://oci.example.com"};
	assert_int_equal(p->session_new(&st, "us-ashburn-1", &scripted, &fake_clock, &s, &err),
	                 ISC_EINVALID);
	assert_non_null(strstr(err.msg, "endpoint_core"));
	assert_null(s);
	/* Without settings, the region's real endpoints (no call is made here). */
	st.n_items = 0;
	assert_int_equal(p->session_new(&st, "us-ashburn-1", &scripted, &fake_clock, &s, &err), 0);
	reply(200, "{\"id\":\"%s\"}", USR);
	{
		struct isc_identity id;
		assert_int_equal(p->check_credentials(s, &id, &err), 0);
		assert_string_equal(
		    S.sent[0].url,
		    "https://identity.us-ashburn-1.oraclecloud.com/20160918/users/" USR);
	}
	p->session_free(s);
	/* Launch without subnet/image says which settings to add. */
	{
		struct isc_launch_spec sp = gang_spec(1, 0);
		struct isc_launch_result r;
		assert_int_equal(
		    p->session_new(&st, "us-ashburn-1", &scripted, &fake_clock, &s, &err), 0);
		assert_int_equal(p->launch_gang(s, &sp, &r, &err), ISC_EINVALID);
		assert_non_null(strstr(err.msg, "subnet_id and image_id"));
		p->session_free(s);
	}
}

/* ---- against the mock cloud (tests/integration/oci-mock.sh) ---- */

static char *mock_oci_config; /* OCI_CLI_CONFIG_FILE as the test started: the mock's */

static int mock_skip(void)
{
	const char *u = getenv("MOCKCLOUD_URL");
	return !u || !u[0];
}

#define MOCK_SUBNET "ocid1.subnet.oc1..aaaaaaaamocktraining"
#define MOCK_NORULE "ocid1.subnet.oc1..aaaaaaaamocknorule"

static int64_t skewed_now(void *c)
{
	(void)c;
	return (int64_t)time(NULL) * 1000 - 10 * 60 * 1000; /* ten minutes slow */
}
static void real_sleep(void *c, int64_t ms)
{
	(void)c;
	usleep((useconds_t)ms * 1000);
}
static const struct isc_clock skewed_clock = {skewed_now, real_sleep, fake_rand, NULL};

/* The curl transport, but the body is changed after it was signed. */
static int tampering_send(void *ctx, const struct isc_http_request *req, long timeout_ms,
                          long connect_timeout_ms, size_t max, struct isc_http_response *resp,
                          struct isc_err *err)
{
	const struct isc_http_transport *curl = isc_http_transport_curl();
	struct isc_http_request copy = *req;
	char *body = NULL;
	int rc;
	(void)ctx;
	if (req->body_len) {
		body = strndup(req->body, req->body_len);
		body[req->body_len / 2] = body[req->body_len / 2] == 'x' ? 'y' : 'x';
		copy.body = body;
	}
	rc = curl->send(curl->ctx, &copy, timeout_ms, connect_timeout_ms, max, resp, err);
	free(body);
	return rc;
}
static const struct isc_http_transport tampering = {tampering_send, NULL};

static struct isc_provider_session *
mock_session(const char *subnet, const struct isc_http_transport *t, const struct isc_clock *clock)
{
	const struct isc_provider *p = isc_provider_find("oci");
	char endpoint[512];
	struct isc_kv items[] = {{"endpoint", endpoint},
	                         {"config_file", mock_oci_config},
	                         {"subnet_id", subnet},
	                         {"image_id", "ocid1.image.oc1..aaaaaaaamockimage"}};
	struct isc_provider_settings st = {items, 4, NULL, 0};
	struct isc_provider_session *s = NULL;
	struct isc_err err;
	snprintf(endpoint, sizeof(endpoint), "%s/oci/{region}", getenv("MOCKCLOUD_URL"));
	if (p->session_new(&st, "us-ashburn-1", t, clock, &s, &err)) {
		print_error("session: %s\n", err.msg);
		fail();
	}
	return s;
}

/* Instances of the mock carrying isc:cluster=cluster, counted per AD suffix and state. */
static size_t mock_count(const char *cluster, const char *ad_suffix, int live)
{
	json_t *all = mock_api("GET", "instances", NULL), *v;
	size_t i, n = 0;
	json_array_foreach(all, i, v)
	{
		const char *c =
		    json_string_value(json_object_get(json_object_get(v, "tags"), "isc:cluster"));
		const char *z = json_string_value(json_object_get(v, "zone"));
		const char *st = json_string_value(json_object_get(v, "state"));
		int is_live = st && (!strcmp(st, "pending") || !strcmp(st, "running"));
		if (c && !strcmp(c, cluster) && z && (!ad_suffix || strstr(z, ad_suffix)) &&
		    is_live == live)
			n++;
	}
	json_decref(all);
	return n;
}

static struct isc_launch_spec mock_spec(const char *cluster, const char *token, unsigned count,
                                        int spot, struct isc_kv tags[3])
{
	struct isc_launch_spec sp = gang_spec(count, spot);
	tags[0] = (struct isc_kv){ISC_TAG_BROKER, "mock-oci"};
	tags[1] = (struct isc_kv){ISC_TAG_CLUSTER, cluster};
	tags[2] = (struct isc_kv){ISC_TAG_EXPERIMENT, "exp_mock"};
	sp.tags = tags;
	sp.instance_type = "VM.GPU2.1";
	sp.idempotency_token = token;
	sp.ssh_public_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHRlc3Q= mock";
	return sp;
}

static void terminate_result(struct isc_provider_session *s, struct isc_launch_result *r)
{
	const char *ids[16];
	struct isc_err err;
	for (size_t i = 0; i < r->n_nodes && i < 16; i++)
		ids[i] = r->nodes[i].id;
	assert_int_equal(s->provider->terminate(s, ids, r->n_nodes, &err), 0);
	isc_launch_result_cleanup(r);
}

static void test_mock_identity_and_refusals(void **state)
{
	struct isc_provider_session *s, *bad;
	struct isc_identity id;
	struct isc_kv tags[3];
	struct isc_launch_spec sp;
	struct isc_launch_result r;
	struct isc_err err;
	json_t *calls;
	(void)state;
	if (mock_skip())
		skip();
	s = mock_session(MOCK_SUBNET, NULL, NULL);
	assert_int_equal(s->provider->check_credentials(s, &id, &err), 0);
	assert_non_null(strstr(id.account, "ocid1.tenancy."));
	assert_non_null(strstr(id.principal, "ocid1.user."));
	s->provider->session_free(s);
	/* A clock ten minutes slow: refused, auth, exactly one call. */
	bad = mock_session(MOCK_SUBNET, NULL, &skewed_clock);
	json_decref(mock_api("DELETE", "calls", NULL));
	assert_int_equal(bad->provider->check_credentials(bad, &id, &err), ISC_EAUTH);
	assert_non_null(strstr(err.msg, "NotAuthenticated"));
	calls = mock_api("GET", "calls", NULL);
	assert_int_equal(json_integer_value(json_object_get(calls, "total")), 1);
	json_decref(calls);
	bad->provider->session_free(bad);
	/* A body changed after signing: refused as auth, nothing launched. */
	bad = mock_session(MOCK_SUBNET, &tampering, NULL);
	sp = mock_spec("cl_tamper", "mock-tamper", 1, 0, tags);
	assert_int_equal(bad->provider->launch_gang(bad, &sp, &r, &err), ISC_EAUTH);
	assert_non_null(strstr(err.msg, "LaunchInstance: NotAuthenticated"));
	assert_int_equal(mock_count("cl_tamper", NULL, 1) + mock_count("cl_tamper", NULL, 0), 0);
	bad->provider->session_free(bad);
}

static void test_mock_subnet_without_rule(void **state)
{
	struct isc_provider_session *s;
	struct isc_kv tags[3];
	struct isc_launch_spec sp;
	struct isc_launch_result r;
	struct isc_err err;
	(void)state;
	if (mock_skip())
		skip();
	s = mock_session(MOCK_NORULE, NULL, NULL);
	sp = mock_spec("cl_norule", "mock-norule", 2, 0, tags);
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), ISC_EINVALID);
	assert_non_null(strstr(err.msg, MOCK_NORULE));
	assert_non_null(strstr(err.msg, "protocol TCP (6), source 127.100.0.0/16"));
	assert_int_equal(mock_count("cl_norule", NULL, 1), 0);
	s->provider->session_free(s);
}

static void test_mock_ad_room_for_two_of_three(void **state)
{
	struct isc_provider_session *s;
	struct isc_kv tags[3];
	struct isc_launch_spec sp;
	struct isc_launch_result r;
	struct isc_err err;
	(void)state;
	if (mock_skip())
		skip();
	json_decref(mock_api("POST", "capacity",
	                     "{\"instance_type\":\"VM.GPU2.1\",\"zone\":\"US-ASHBURN-AD-1\","
	                     "\"available\":2}"));
	s = mock_session(MOCK_SUBNET, NULL, NULL);
	sp = mock_spec("cl_ad", "mock-ad", 3, 0, tags);
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_string_equal(r.zone, "Mock:US-ASHBURN-AD-2");
	/* The two that came up in AD-1 were rolled back; the gang lives in AD-2. */
	assert_int_equal(mock_count("cl_ad", "AD-1", 1), 0);
	assert_int_equal(mock_count("cl_ad", "AD-1", 0), 2);
	assert_int_equal(mock_count("cl_ad", "AD-2", 1), 3);
	json_decref(mock_api("POST", "capacity",
	                     "{\"instance_type\":\"VM.GPU2.1\",\"zone\":\"US-ASHBURN-AD-1\","
	                     "\"available\":null}"));
	/* The same launch again (a crash replay): the same nodes, nothing new. */
	{
		struct isc_launch_result again;
		assert_int_equal(s->provider->launch_gang(s, &sp, &again, &err), 0);
		assert_string_equal(again.zone, "Mock:US-ASHBURN-AD-2");
		for (size_t i = 0; i < 3; i++)
			assert_string_equal(again.nodes[i].id, r.nodes[i].id);
		isc_launch_result_cleanup(&again);
		assert_int_equal(mock_count("cl_ad", NULL, 1), 3);
	}
	terminate_result(s, &r);
	assert_int_equal(mock_count("cl_ad", NULL, 1), 0);
	s->provider->session_free(s);
}

/* The tagged compute clusters of broker `broker` in the mock: how many, and in `ad_suffix`. */
static size_t mock_clusters(const char *broker, const char *ad_suffix, size_t *members)
{
	json_t *all = mock_api("GET", "oci_compute_clusters", NULL), *c;
	size_t i, n = 0;
	*members = 0;
	json_array_foreach(all, i, c)
	{
		const char *b =
		    json_string_value(json_object_get(json_object_get(c, "tags"), "isc:broker"));
		const char *ad = json_string_value(json_object_get(c, "ad"));
		if (!b || strcmp(b, broker) != 0 || (ad_suffix && (!ad || !strstr(ad, ad_suffix))))
			continue;
		n++;
		*members += json_array_size(json_object_get(c, "members"));
	}
	json_decref(all);
	return n;
}

/*
 * An RDMA gang on the mock: AD-1 has no capacity, so its node is rolled back and its
 * compute cluster goes (at once, or at the describe after the node is terminated); AD-2's
 * cluster holds both nodes, and goes after the teardown.
 */
static void test_mock_rdma_gang_compute_clusters(void **state)
{
	struct isc_provider_session *s;
	struct isc_kv tags[3];
	struct isc_launch_spec sp;
	struct isc_launch_result r;
	struct isc_node_info *ni;
	size_t n, members;
	struct isc_err err;
	(void)state;
	if (mock_skip())
		skip();
	json_decref(mock_api("POST", "faults",
	                     "{\"kind\":\"capacity\",\"provider\":\"oci\",\"instance_type\":"
	                     "\"BM.GPU.H100.8\",\"zone\":\"US-ASHBURN-AD-1\",\"count\":1}"));
	s = mock_session(MOCK_SUBNET, NULL, NULL);
	sp = mock_spec("cl_rdma", "mock-rdma", 2, 0, tags);
	sp.instance_type = "BM.GPU.H100.8";
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_string_equal(r.zone, "Mock:US-ASHBURN-AD-2");
	assert_int_equal(mock_clusters(tags[0].value, "AD-2", &members), 1);
	assert_int_equal(members, 2);
	for (int tries = 0; mock_clusters(tags[0].value, "AD-1", &members); tries++) {
		assert_true(tries < 100);
		usleep(100 * 1000);
		assert_int_equal(s->provider->describe(s, tags[0].value, &ni, &n, &err), 0);
		isc_node_infos_free(ni, n);
	}
	terminate_result(s, &r);
	for (int tries = 0; mock_clusters(tags[0].value, NULL, &members); tries++) {
		assert_true(tries < 100);
		usleep(100 * 1000);
		assert_int_equal(s->provider->describe(s, tags[0].value, &ni, &n, &err), 0);
		isc_node_infos_free(ni, n);
	}
	s->provider->session_free(s);
}

static void test_mock_lost_reply_no_duplicate(void **state)
{
	struct isc_provider_session *s;
	struct isc_kv tags[3];
	struct isc_launch_spec sp;
	struct isc_launch_result r;
	struct isc_err err;
	(void)state;
	if (mock_skip())
		skip();
	json_decref(mock_api("POST", "faults",
	                     "{\"kind\":\"lose_response\",\"action\":\"LaunchInstance\","
	                     "\"provider\":\"oci\",\"count\":1}"));
	s = mock_session(MOCK_SUBNET, NULL, NULL);
	sp = mock_spec("cl_lost", "mock-lost", 2, 0, tags);
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_int_equal(r.n_nodes, 2);
	assert_int_equal(mock_count("cl_lost", NULL, 1), 2); /* the replayed token made none */
	terminate_result(s, &r);
	/* A reply cut off after the launch happened: transient; the replay adopts the node. */
	json_decref(mock_api("POST", "faults",
	                     "{\"kind\":\"garbled_reply\",\"action\":\"LaunchInstance\","
	                     "\"provider\":\"oci\",\"count\":1}"));
	sp = mock_spec("cl_garbled", "mock-garbled", 2, 0, tags);
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), ISC_ETRANSIENT);
	/* Nodes launch in parallel: the other one may be up already, and stays up. */
	assert_in_range(mock_count("cl_garbled", NULL, 1), 1, 2);
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	assert_int_equal(mock_count("cl_garbled", NULL, 1), 2);
	terminate_result(s, &r);
	s->provider->session_free(s);
}

static void test_mock_preemptible_gang_preempted(void **state)
{
	struct isc_provider_session *s;
	struct isc_kv tags[3];
	struct isc_launch_spec sp;
	struct isc_launch_result r;
	struct isc_node_info *ni;
	size_t n, ours;
	struct isc_err err;
	char body[512];
	int seen = 0;
	(void)state;
	if (mock_skip())
		skip();
	s = mock_session(MOCK_SUBNET, NULL, NULL);
	sp = mock_spec("cl_pre", "mock-pre", 3, 1, tags);
	assert_int_equal(s->provider->launch_gang(s, &sp, &r, &err), 0);
	/* Described by tag, with addresses once running. */
	for (int tries = 0; tries < 100; tries++) {
		size_t with_ip = 0;
		assert_int_equal(s->provider->describe(s, "mock-oci", &ni, &n, &err), 0);
		ours = 0;
		for (size_t i = 0; i < n; i++)
			if (!strcmp(ni[i].cluster_id, "cl_pre")) {
				ours++;
				assert_int_equal(ni[i].spot, 1);
				with_ip += ni[i].state == ISC_NODE_RUNNING && ni[i].private_ip[0];
			}
		isc_node_infos_free(ni, n);
		assert_int_equal(ours, 3);
		if (with_ip == 3)
			break;
		usleep(100 * 1000);
	}
	snprintf(body, sizeof(body),
	         "{\"kind\":\"interrupt\",\"instance_id\":\"%s\",\"notice_s\":0}", r.nodes[1].id);
	json_decref(mock_api("POST", "faults", body));
	for (int tries = 0; tries < 100 && !seen; tries++) {
		assert_int_equal(s->provider->describe(s, "mock-oci", &ni, &n, &err), 0);
		for (size_t i = 0; i < n; i++) {
			if (strcmp(ni[i].cluster_id, "cl_pre") != 0)
				continue;
			if (!strcmp(ni[i].id, r.nodes[1].id))
				seen =
				    ni[i].interruption_noticed && ni[i].state != ISC_NODE_RUNNING;
			else
				assert_int_equal(ni[i].interruption_noticed, 0);
		}
		isc_node_infos_free(ni, n);
		usleep(100 * 1000);
	}
	assert_true(seen);
	terminate_result(s, &r);
	s->provider->session_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_signing_vectors),
	    cmocka_unit_test(test_date_and_headers),
	    cmocka_unit_test(test_config_profiles),
	    cmocka_unit_test(test_config_errors),
	    cmocka_unit_test(test_config_encrypted_key),
	    cmocka_unit_test(test_config_env_only_and_explicit),
	    cmocka_unit_test(test_config_toml_switch),
	    cmocka_unit_test(test_classify),
	    cmocka_unit_test(test_retry_tokens),
	    cmocka_unit_test(test_headers_state_time),
	    cmocka_unit_test(test_training_rules),
	    cmocka_unit_test_setup(test_check_credentials, driver_setup),
	    cmocka_unit_test_setup(test_auth_error_single_call, driver_setup),
	    cmocka_unit_test_setup(test_throttling_retried, driver_setup),
	    cmocka_unit_test_setup(test_launch_gang_request, driver_setup),
	    cmocka_unit_test_setup(test_capacity_rolls_back_then_next_ad, driver_setup),
	    cmocka_unit_test_setup(test_rdma_gang_compute_cluster_per_ad, driver_setup),
	    cmocka_unit_test_setup(test_replacement_joins_gang_cluster, driver_setup),
	    cmocka_unit_test_setup(test_no_cluster_without_rdma_or_gang, driver_setup),
	    cmocka_unit_test_setup(test_describe_reconciles_clusters, driver_setup),
	    cmocka_unit_test_setup(test_describe_sweeps_clusters_when_due, driver_setup),
	    cmocka_unit_test_setup(test_compute_cluster_id_setting_refused, driver_setup),
	    cmocka_unit_test_setup(test_unreadable_launch_reply_is_unknown, driver_setup),
	    cmocka_unit_test_setup(test_capacity_everywhere_and_quota, driver_setup),
	    cmocka_unit_test_setup(test_replayed_gang_that_was_rolled_back, driver_setup),
	    cmocka_unit_test_setup(test_lost_reply_keeps_nodes, driver_setup),
	    cmocka_unit_test_setup(test_training_rule_missing, driver_setup),
	    cmocka_unit_test_setup(test_training_rule_managed, driver_setup),
	    cmocka_unit_test_setup(test_tenant_nsg, driver_setup),
	    cmocka_unit_test_setup(test_tenant_nsg_swept, driver_setup),
	    cmocka_unit_test_setup(test_describe_paging_cache_preemption, driver_setup),
	    cmocka_unit_test_setup(test_describe_survives_a_failed_address_lookup, driver_setup),
	    cmocka_unit_test_setup(test_terminate, driver_setup),
	    cmocka_unit_test_setup(test_session_errors, driver_setup),
	    cmocka_unit_test_setup(test_byo_key_never_the_platforms, driver_setup),
	    cmocka_unit_test_setup(test_mock_identity_and_refusals, driver_setup),
	    cmocka_unit_test_setup(test_mock_subnet_without_rule, driver_setup),
	    cmocka_unit_test_setup(test_mock_ad_room_for_two_of_three, driver_setup),
	    cmocka_unit_test_setup(test_mock_rdma_gang_compute_clusters, driver_setup),
	    cmocka_unit_test_setup(test_mock_lost_reply_no_duplicate, driver_setup),
	    cmocka_unit_test_setup(test_mock_preemptible_gang_preempted, driver_setup),
	};
	int rc;
	const char *mc = getenv("OCI_CLI_CONFIG_FILE");
	mock_oci_config = strdup(mc ? mc : "");
	rc = cmocka_run_group_tests(tests, config_setup, config_teardown);
	script_reset();
	free(pem_text);
	free(mock_oci_config);
	return rc;
}
