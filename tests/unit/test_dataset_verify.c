/*
 * What the dataset cache checks bytes with: the CRCs S3 offers (standard
 * check vectors), which ETags are MD5s, HeadObject's additional checksum
 * (asked for with a signed x-amz-checksum-mode header), and the streamed
 * ranged GET (the sink sees only a 206 of the range asked for). The cache end
 * to end, with the botocore-checked mock S3: tests/integration/datasets-verify.sh.
 */
#include "datasets/checksum.h"
#include "providers/aws/s3.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void test_crc_vectors(void **state)
{
	const char *s = "123456789";
	uint32_t c;
	(void)state;
	assert_int_equal(isc_crc_update(ISC_CRC32, 0, s, 9), 0xCBF43926u);
	assert_int_equal(isc_crc_update(ISC_CRC32C, 0, s, 9), 0xE3069283u);
	/* In pieces of every split: the same value (the state carries across calls). */
	for (size_t k = 0; k <= 9; k++) {
		c = isc_crc_update(ISC_CRC32C, 0, s, k);
		assert_int_equal(isc_crc_update(ISC_CRC32C, c, s + k, 9 - k), 0xE3069283u);
	}
	assert_int_equal(isc_crc_update(ISC_CRC32, 0, "", 0), 0);
}

static void test_etag_is_md5(void **state)
{
	struct isc_s3_object o;
	(void)state;
	memset(&o, 0, sizeof(o));
	snprintf(o.etag, sizeof(o.etag), "0123456789abcdef0123456789abcdef");
	assert_true(isc_s3_etag_is_md5(&o));
	snprintf(o.sse, sizeof(o.sse), "AES256"); /* SSE-S3 keeps MD5 ETags */
	assert_true(isc_s3_etag_is_md5(&o));
	snprintf(o.sse, sizeof(o.sse), "aws:kms");
	assert_false(isc_s3_etag_is_md5(&o));
	snprintf(o.sse, sizeof(o.sse), "SSE-C");
	assert_false(isc_s3_etag_is_md5(&o));
	o.sse[0] = '\0';
	snprintf(o.etag, sizeof(o.etag), "0123456789abcdef0123456789abcdef-12");
	assert_true(isc_s3_etag_is_md5(&o));
	snprintf(o.etag, sizeof(o.etag), "0123456789abcdef0123456789abcdef-");
	assert_false(isc_s3_etag_is_md5(&o));
	snprintf(o.etag, sizeof(o.etag), "0123456789abcdef0123456789abcdeg");
	assert_false(isc_s3_etag_is_md5(&o));
	snprintf(o.etag, sizeof(o.etag), "abc");
	assert_false(isc_s3_etag_is_md5(&o));
}

/* ---- a scripted transport that does not stream (isc_http_do feeds the sink) ---- */

static struct {
	long status;
	char headers[1024], body[256];
	char checksum_mode[32], signed_headers[512];
} T;

static int scripted_send(void *ctx, const struct isc_http_request *req, long timeout_ms,
                         long connect_timeout_ms, size_t max, struct isc_http_response *resp,
                         struct isc_err *err)
{
	(void)ctx, (void)timeout_ms, (void)connect_timeout_ms, (void)max, (void)err;
	T.checksum_mode[0] = T.signed_headers[0] = '\0';
	for (size_t i = 0; i < req->n_headers; i++) {
		const char *n = req->headers[i].name, *v = req->headers[i].value, *sh;
		if (!strcasecmp(n, "x-amz-checksum-mode"))
			snprintf(T.checksum_mode, sizeof(T.checksum_mode), "%s", v);
		if (!strcmp(n, "Authorization") && (sh = strstr(v, "SignedHeaders=")))
			snprintf(T.signed_headers, sizeof(T.signed_headers), "%.*s",
			         (int)strcspn(sh + 14, ","), sh + 14);
	}
	resp->status = T.status;
	isc_buf_puts(&resp->headers, T.headers);
	return isc_buf_puts(&resp->body, T.body);
}

static const struct isc_http_transport scripted = {scripted_send, NULL, 0};

static int64_t fixed_now(void *c)
{
	(void)c;
	return 1440938160000LL;
}
static void no_sleep(void *c, int64_t ms)
{
	(void)c, (void)ms;
}
static uint64_t fake_rand(void *c)
{
	(void)c;
	return 7;
}
static const struct isc_clock fake_clock = {fixed_now, no_sleep, fake_rand, NULL};

static struct isc_s3_client *client(void)
{
	struct isc_s3_config cfg = {"http://127.0.0.1:9",
	                            "us-east-1",
	                            ISC_S3_ADDRESSING_PATH,
	                            0,
	                            "AKIDEXAMPLE",
	                            "secret",
	                            NULL};
	struct isc_s3_client *c = NULL;
	struct isc_err err;
	unsetenv("AWS_ENDPOINT_URL_S3");
	unsetenv("AWS_ENDPOINT_URL");
	assert_int_equal(isc_s3_client_new(&cfg, &scripted, &fake_clock, &c, &err), 0);
	return c;
}

static void test_head_checksum(void **state)
{
	struct isc_s3_client *c = client();
	struct isc_s3_object o;
	struct isc_err err;
	(void)state;
	T.status = 200;
	snprintf(
	    T.headers, sizeof(T.headers),
	    "HTTP/1.1 200 OK\r\nContent-Length: 30000000\r\nETag: \"6e0f6bd1c1d2cf2b1e7c7d2ad1a49b"
	    "17-3\"\r\nx-amz-server-side-encryption: aws:kms\r\nx-amz-checksum-crc32c: "
	    "NEqazA==-3\r\nx-amz-checksum-type: COMPOSITE\r\n\r\n");
	T.body[0] = '\0';
	assert_int_equal(isc_s3_head(c, "bkt", "k.bin", NULL, 0, &o, &err), 0);
	assert_string_equal(T.checksum_mode, "ENABLED");
	assert_non_null(strstr(T.signed_headers, "x-amz-checksum-mode"));
	assert_string_equal(o.checksum_algo, "CRC32C");
	assert_string_equal(o.checksum, "NEqazA==-3");
	assert_true(o.checksum_composite);
	assert_string_equal(o.sse, "aws:kms");
	assert_false(isc_s3_etag_is_md5(&o));
	isc_s3_object_cleanup(&o);

	snprintf(
	    T.headers, sizeof(T.headers),
	    "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nETag: \"900150983cd24fb0d6963f7d28e17f72\"\r\n"
	    "x-amz-checksum-sha256: ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=\r\n"
	    "x-amz-checksum-type: FULL_OBJECT\r\n\r\n");
	assert_int_equal(isc_s3_head(c, "bkt", "abc.txt", NULL, 0, &o, &err), 0);
	assert_string_equal(o.checksum_algo, "SHA256");
	assert_false(o.checksum_composite);
	assert_true(isc_s3_etag_is_md5(&o));
	isc_s3_object_cleanup(&o);
	isc_s3_client_free(c);
}

struct collect {
	char got[64];
	size_t n;
	int begins;
};

static int c_begin(void *ctx, struct isc_err *err)
{
	struct collect *k = ctx;
	(void)err;
	k->begins++;
	k->n = 0;
	return 0;
}

static int c_write(void *ctx, const struct isc_http_response *resp, const void *data, size_t n,
                   struct isc_err *err)
{
	struct collect *k = ctx;
	(void)resp, (void)err;
	assert_true(k->n + n < sizeof(k->got));
	memcpy(k->got + k->n, data, n);
	k->n += n;
	return 0;
}

static void test_get_range_to(void **state)
{
	struct isc_s3_client *c = client();
	struct collect k = {{0}, 0, 0};
	struct isc_http_sink sink = {c_begin, c_write, &k};
	struct isc_err err;
	(void)state;
	T.status = 206;
	snprintf(T.headers, sizeof(T.headers),
	         "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 10-14/100\r\n\r\n");
	snprintf(T.body, sizeof(T.body), "hello");
	assert_int_equal(isc_s3_get_range_to(c, "bkt", "k", NULL, "e", 10, 5, &sink, &err), 0);
	assert_int_equal(k.n, 5);
	assert_memory_equal(k.got, "hello", 5);
	assert_int_equal(k.begins, 1);

	/* Range ignored: a 200 with the whole object never reaches the sink. */
	k.n = 0;
	T.status = 200;
	snprintf(T.headers, sizeof(T.headers), "HTTP/1.1 200 OK\r\n\r\n");
	assert_int_equal(isc_s3_get_range_to(c, "bkt", "k", NULL, NULL, 10, 5, &sink, &err),
	                 ISC_EINVALID);
	assert_non_null(strstr(err.msg, "ignored the Range"));
	assert_int_equal(k.n, 0);

	/* Another range than asked for: refused. */
	T.status = 206;
	snprintf(T.headers, sizeof(T.headers),
	         "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-4/100\r\n\r\n");
	assert_int_equal(isc_s3_get_range_to(c, "bkt", "k", NULL, NULL, 10, 5, &sink, &err),
	                 ISC_EINVALID);
	assert_int_equal(k.n, 0);

	/* Short: what arrived is not the range. */
	snprintf(T.headers, sizeof(T.headers),
	         "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 10-19/100\r\n\r\n");
	assert_int_equal(isc_s3_get_range_to(c, "bkt", "k", NULL, NULL, 10, 10, &sink, &err),
	                 ISC_ETRANSIENT);
	/* 412: the object changed; nothing reaches the sink. */
	k.n = 0;
	T.status = 412;
	snprintf(T.headers, sizeof(T.headers), "HTTP/1.1 412 Precondition Failed\r\n\r\n");
	T.body[0] = '\0';
	assert_int_equal(isc_s3_get_range_to(c, "bkt", "k", NULL, "e", 10, 5, &sink, &err),
	                 ISC_ECONFLICT);
	assert_int_equal(k.n, 0);
	isc_s3_client_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_crc_vectors),
	    cmocka_unit_test(test_etag_is_md5),
	    cmocka_unit_test(test_head_checksum),
	    cmocka_unit_test(test_get_range_to),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
