/*
 * The parallel dataset download (datasets/download.c) against an in-process
 * S3 that serves byte ranges from memory and streams them to the sink as
 * libcurl would: ranges fetched on several connections at once, each written
 * at its offset; the MD5 ETag (single and multipart, the part MD5s taken by
 * the connections) and the SHA-256 right whatever order ranges finish in; a
 * range cut mid-body retried on its own; corrupted bytes refused and the file
 * removed; a failed download resumed from its marker fetching only the ranges
 * not done, including a marker of the older single-connection format. The
 * cache end to end against the mock S3: tests/integration/datasets-verify.sh.
 */
#include "datasets/download.h"
#include "providers/aws/s3.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MIB (1ull << 20)

/* ---- the in-process S3 ---- */

static struct {
	pthread_mutex_t mu;
	unsigned char *obj;
	uint64_t size;
	char etag[80];
	int requests, in_flight, max_in_flight;
	uint64_t cut_first;     /* a range starting here is cut mid-body once (a reset) */
	uint64_t corrupt_first; /* a range starting here has one byte flipped, once */
	uint64_t refuse_from;   /* ranges starting here or later: 403 (UINT64_MAX: none) */
	uint64_t firsts[256];   /* the first byte of every range asked for */
	int n_firsts;
} S = {PTHREAD_MUTEX_INITIALIZER};

static int send_range(void *ctx, const struct isc_http_request *req, long timeout_ms,
                      long connect_timeout_ms, size_t max, struct isc_http_response *resp,
                      struct isc_err *err)
{
	unsigned long long a = 0, b = 0;
	char hdr[160], etag[96] = "";
	int cut = 0, corrupt = 0, refuse;
	(void)ctx, (void)timeout_ms, (void)connect_timeout_ms, (void)max;
	for (size_t i = 0; i < req->n_headers; i++) {
		if (!strcasecmp(req->headers[i].name, "Range"))
			sscanf(req->headers[i].value, "bytes=%llu-%llu", &a, &b);
		if (!strcasecmp(req->headers[i].name, "If-Match"))
			snprintf(etag, sizeof(etag), "%s", req->headers[i].value);
	}
	pthread_mutex_lock(&S.mu);
	S.requests++;
	if (++S.in_flight > S.max_in_flight)
		S.max_in_flight = S.in_flight;
	if (S.n_firsts < 256)
		S.firsts[S.n_firsts++] = a;
	if (a == S.cut_first) {
		cut = 1;
		S.cut_first = UINT64_MAX;
	}
	if (a == S.corrupt_first) {
		corrupt = 1;
		S.corrupt_first = UINT64_MAX;
	}
	refuse = a >= S.refuse_from;
	pthread_mutex_unlock(&S.mu);
	/* Every GET is If-Match the ETag, quoted. */
	assert_true(strlen(etag) == strlen(S.etag) + 2 &&
	            !strncmp(etag + 1, S.etag, strlen(S.etag)));
	usleep(3000); /* long enough that connections overlap */
	if (refuse) {
		resp->status = 403;
		isc_buf_puts(&resp->headers, "HTTP/1.1 403 Forbidden\r\n\r\n");
		isc_buf_puts(&resp->body,
		             "<Error><Code>AccessDenied</Code><Message>no</Message></Error>");
		pthread_mutex_lock(&S.mu);
		S.in_flight--;
		pthread_mutex_unlock(&S.mu);
		return 0;
	}
	resp->status = 206;
	snprintf(hdr, sizeof(hdr),
	         "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes %llu-%llu/%" PRIu64
	         "\r\n\r\n",
	         a, b, S.size);
	isc_buf_puts(&resp->headers, hdr);
	{
		int rc = 0;
		unsigned char *flip = NULL;
		uint64_t len = b - a + 1, half = len / 2;
		for (uint64_t off = 0; off < len && !rc; off += 64 * 1024) {
			size_t n = len - off < 64 * 1024 ? (size_t)(len - off) : 64 * 1024;
			const unsigned char *p = S.obj + a + off;
			if (cut && off + n > half) {
				rc = isc_err_set(err, ISC_ETRANSIENT, "connection reset");
				break;
			}
			if (corrupt && off <= half && half < off + n) {
				flip = malloc(n);
				memcpy(flip, p, n);
				flip[half - off] ^= 1;
				p = flip;
			}
			rc = req->sink->write(req->sink->ctx, resp, p, n, err);
			free(flip);
			flip = NULL;
		}
		pthread_mutex_lock(&S.mu);
		S.in_flight--;
		pthread_mutex_unlock(&S.mu);
		return rc;
	}
}

static const struct isc_http_transport streaming = {send_range, NULL, 1};

static int64_t now_ms(void *c)
{
	(void)c;
	return (int64_t)time(NULL) * 1000;
}
static void no_sleep(void *c, int64_t ms)
{
	(void)c, (void)ms;
}
static uint64_t seven(void *c)
{
	(void)c;
	return 7;
}
static const struct isc_clock quick_clock = {now_ms, no_sleep, seven, NULL};

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
	assert_int_equal(isc_s3_client_new(&cfg, &streaming, &quick_clock, &c, &err), 0);
	return c;
}

static void hexs(const unsigned char *md, unsigned n, char *out)
{
	for (unsigned i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", md[i]);
}

/* An object of `size` pseudo-random bytes; its ETag for parts of part_size (0: one part). */
static void object_make(uint64_t size, uint64_t part_size, struct isc_s3_object *o, char sha[65])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned n;
	uint64_t v = 88172645463325252ull;
	free(S.obj);
	S.obj = malloc(size ? size : 1);
	for (uint64_t i = 0; i < size; i++) {
		v ^= v << 13, v ^= v >> 7, v ^= v << 17;
		S.obj[i] = (unsigned char)v;
	}
	S.size = size;
	memset(o, 0, sizeof(*o));
	o->key = "obj.bin";
	o->size = size;
	if (!part_size) {
		EVP_Digest(S.obj, size, md, &n, EVP_md5(), NULL);
		hexs(md, n, o->etag);
	} else {
		EVP_MD_CTX *outer = EVP_MD_CTX_new();
		uint64_t parts = 0;
		EVP_DigestInit_ex(outer, EVP_md5(), NULL);
		for (uint64_t at = 0; at < size; at += part_size, parts++) {
			EVP_Digest(S.obj + at, size - at < part_size ? size - at : part_size, md,
			           &n, EVP_md5(), NULL);
			EVP_DigestUpdate(outer, md, n);
		}
		EVP_DigestFinal_ex(outer, md, &n);
		EVP_MD_CTX_free(outer);
		hexs(md, n, o->etag);
		sprintf(o->etag + 32, "-%" PRIu64, parts);
	}
	snprintf(S.etag, sizeof(S.etag), "%s", o->etag);
	EVP_Digest(S.obj, size, md, &n, EVP_sha256(), NULL);
	hexs(md, n, sha);
	S.requests = S.max_in_flight = S.n_firsts = 0;
	S.cut_first = S.corrupt_first = S.refuse_from = UINT64_MAX;
}

static char dir[64];

static char *path_in(const char *name)
{
	static char p[128];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return p;
}

static int file_equals_object(const char *path)
{
	FILE *f = fopen(path, "rb");
	unsigned char *buf = malloc(S.size + 1);
	size_t n = f ? fread(buf, 1, S.size + 1, f) : 0;
	int same = n == S.size && memcmp(buf, S.obj, S.size) == 0;
	if (f)
		fclose(f);
	free(buf);
	return same;
}

static int run(const struct isc_s3_object *o, uint64_t part_size, const char *file, int par,
               struct isc_dataset_verified *v, struct isc_err *err)
{
	struct isc_s3_client *c = client();
	struct isc_dataset_download d = {c,    "bkt", o,    NULL, part_size, path_in(file),
	                                 NULL, NULL,  NULL, par};
	int rc = isc_dataset_download_run(&d, v, err);
	isc_s3_client_free(c);
	return rc;
}

/* ---- the tests ---- */

static void test_range_bytes_and_setting(void **state)
{
	int p = 0;
	struct isc_err err;
	(void)state;
	/* 8 MiB blocks whatever the size and parallelism (a GET covers a run of them) */
	assert_int_equal(isc_dataset_range_bytes(512 * MIB, 0, 8), 8 * MIB);
	assert_int_equal(isc_dataset_range_bytes(2048 * MIB, 0, 8), 8 * MIB);
	assert_int_equal(isc_dataset_range_bytes(10 * MIB, 0, 8), 8 * MIB);
	assert_int_equal(isc_dataset_range_bytes(100000 * MIB, 0, 1), 8 * MIB);
	/* whole parts, 8 MiB at least: 5 MiB parts -> two; 50 MiB -> one; 16 and 8 stay */
	assert_int_equal(isc_dataset_range_bytes(40 * MIB, 5 * MIB, 8), 10 * MIB);
	assert_int_equal(isc_dataset_range_bytes(4096 * MIB, 50 * MIB, 8), 50 * MIB);
	assert_int_equal(isc_dataset_range_bytes(512 * MIB, 16 * MIB, 8), 16 * MIB);
	assert_int_equal(isc_dataset_range_bytes(4096 * MIB, 8 * MIB, 8), 8 * MIB);
	assert_int_equal(isc_dataset_parallelism_parse(NULL, &p, &err), 0);
	assert_int_equal(p, ISC_DATASET_PARALLELISM_DEFAULT);
	assert_int_equal(isc_dataset_parallelism_parse("16", &p, &err), 0);
	assert_int_equal(p, 16);
	assert_int_equal(isc_dataset_parallelism_parse("0", &p, &err), ISC_EINVALID);
	assert_non_null(strstr(err.msg, "s3_parallelism"));
	assert_int_equal(isc_dataset_parallelism_parse("65", &p, &err), ISC_EINVALID);
	assert_int_equal(isc_dataset_parallelism_parse("8x", &p, &err), ISC_EINVALID);
}

static void test_parallel_single_md5(void **state)
{
	struct isc_s3_object o;
	struct isc_dataset_verified v;
	struct isc_err err;
	char sha[65];
	(void)state;
	object_make(50 * MIB + 12345, 0, &o, sha); /* 8 MiB ranges: 7 of them, the last short */
	assert_int_equal(run(&o, 0, "single", 4, &v, &err), 0);
	assert_string_equal(v.sha256, sha);
	assert_string_equal(v.by, "ETag (MD5)");
	assert_true(file_equals_object(path_in("single")));
	assert_int_equal(S.requests, 7);
	assert_true(S.max_in_flight >= 2);
	assert_true(S.max_in_flight <= 4);
}

static void test_multipart_parts_by_connection(void **state)
{
	struct isc_s3_object o;
	struct isc_dataset_verified v;
	struct isc_err err;
	char sha[65];
	(void)state;
	/* 5 MiB parts: ranges of two parts; 9 parts, the last short. */
	object_make(42 * MIB + 7, 5 * MIB, &o, sha);
	assert_int_equal(run(&o, 5 * MIB, "multi", 8, &v, &err), 0);
	assert_string_equal(v.sha256, sha);
	assert_string_equal(v.by, "ETag (MD5 of 9 parts)");
	assert_int_equal(S.requests, 5);
	/* A range cut mid-body (the third) is asked again, alone; the digests are right. */
	object_make(42 * MIB + 7, 5 * MIB, &o, sha);
	S.cut_first = 20 * MIB;
	assert_int_equal(run(&o, 5 * MIB, "multi-cut", 3, &v, &err), 0);
	assert_string_equal(v.sha256, sha);
	assert_int_equal(S.requests, 6);
	assert_true(file_equals_object(path_in("multi-cut")));
	/* A cut in the first range, which the lanes were already hashing: right too. */
	object_make(30 * MIB, 0, &o, sha);
	S.cut_first = 0;
	assert_int_equal(run(&o, 0, "first-cut", 2, &v, &err), 0);
	assert_string_equal(v.sha256, sha);
	assert_string_equal(v.by, "ETag (MD5)");
}

/*
 * One GET per run of blocks: todo / (2 x connections) of them, 1..64 MiB. On one
 * connection 56 MiB (7 blocks of 8 MiB) goes as runs of 3, 2, 1, 1. The first run
 * cut half-way (12 MiB in, inside its second block) is asked again, alone, and the
 * MD5 is right; with 5 MiB parts (10 MiB blocks, 60 MiB: runs of 3, 1, 1, 1) the cut
 * run's part MD5s are taken again by its connection.
 */
static void test_runs_of_blocks(void **state)
{
	static const uint64_t single[] = {0, 0, 24 * MIB, 40 * MIB, 48 * MIB};
	static const uint64_t multi[] = {0, 0, 30 * MIB, 40 * MIB, 50 * MIB};
	struct isc_s3_object o;
	struct isc_dataset_verified v;
	struct isc_err err;
	char sha[65];
	(void)state;
	object_make(56 * MIB, 0, &o, sha);
	S.cut_first = 0;
	assert_int_equal(run(&o, 0, "runs", 1, &v, &err), 0);
	assert_string_equal(v.sha256, sha);
	assert_string_equal(v.by, "ETag (MD5)");
	assert_true(file_equals_object(path_in("runs")));
	assert_int_equal(S.n_firsts, 5);
	for (int i = 0; i < 5; i++)
		assert_int_equal(S.firsts[i], single[i]);
	object_make(60 * MIB, 5 * MIB, &o, sha);
	S.cut_first = 0;
	assert_int_equal(run(&o, 5 * MIB, "runs-multi", 1, &v, &err), 0);
	assert_string_equal(v.sha256, sha);
	assert_string_equal(v.by, "ETag (MD5 of 12 parts)");
	assert_true(file_equals_object(path_in("runs-multi")));
	assert_int_equal(S.n_firsts, 5);
	for (int i = 0; i < 5; i++)
		assert_int_equal(S.firsts[i], multi[i]);
}

static void test_corrupt_refused(void **state)
{
	struct isc_s3_object o;
	struct isc_dataset_verified v;
	struct isc_err err;
	char sha[65];
	struct stat st;
	(void)state;
	object_make(30 * MIB, 0, &o, sha);
	S.corrupt_first = 8 * MIB;
	assert_int_equal(run(&o, 0, "bad", 4, &v, &err), ISC_ECONFLICT);
	assert_non_null(strstr(err.msg, "do not match the ETag"));
	assert_int_not_equal(stat(path_in("bad"), &st), 0);
	assert_int_not_equal(stat(path_in("bad.sync"), &st), 0);
	object_make(42 * MIB, 5 * MIB, &o, sha);
	S.corrupt_first = 30 * MIB;
	assert_int_equal(run(&o, 5 * MIB, "bad-multi", 4, &v, &err), ISC_ECONFLICT);
	assert_non_null(strstr(err.msg, "parts of"));
}

static int count_ones(const char *marker)
{
	char line[4096];
	int n = 0;
	FILE *f = fopen(marker, "r");
	assert_non_null(f);
	assert_non_null(fgets(line, sizeof(line), f));
	fclose(f);
	assert_int_equal(strncmp(line, "ranges ", 7), 0);
	for (char *p = strrchr(line, ' ') + 1; *p == '0' || *p == '1'; p++)
		n += *p == '1';
	return n;
}

static void test_resume_fetches_only_what_is_missing(void **state)
{
	struct isc_s3_object o;
	struct isc_dataset_verified v;
	struct isc_err err;
	char sha[65];
	int done;
	(void)state;
	/* 80 MiB in 8 MiB parts and ranges (10); S3 refuses from 48 MiB on. */
	object_make(80 * MIB, 8 * MIB, &o, sha);
	S.refuse_from = 48 * MIB;
	assert_int_equal(run(&o, 8 * MIB, "resume", 4, &v, &err), ISC_EAUTH);
	/* The refusal stops the connections: ranges in flight then are lost, no others. */
	done = count_ones(path_in("resume.sync"));
	assert_true(done >= 6 - 4 && done <= 6);
	/* The resume asks for the missing ranges only, and rehashes the kept parts. */
	S.refuse_from = UINT64_MAX;
	S.requests = S.n_firsts = 0;
	assert_int_equal(run(&o, 8 * MIB, "resume", 4, &v, &err), 0);
	assert_string_equal(v.sha256, sha);
	assert_string_equal(v.by, "ETag (MD5 of 10 parts)");
	assert_int_equal(S.requests, 10 - done);
	assert_int_equal(count_ones(path_in("resume.sync")), 10);
}

static void test_old_marker_resume(void **state)
{
	struct isc_s3_object o;
	struct isc_dataset_verified v;
	struct isc_err err;
	char sha[65];
	FILE *f, *g;
	(void)state;
	object_make(100 * MIB, 5 * MIB, &o, sha); /* 64 MiB is no whole number of 5 MiB parts */
	/* That format wrote in order: the file is as long as what arrived (70 MiB). */
	g = fopen(path_in("old"), "w");
	assert_int_equal(fwrite(S.obj, 1, 70 * MIB, g), 70 * MIB);
	fclose(g);
	f = fopen(path_in("old.sync"), "w");
	fprintf(f, "00000000-0000-0000-0000-000000000000 %llu\n", 64 * MIB);
	fclose(f);
	assert_int_equal(run(&o, 5 * MIB, "old", 4, &v, &err), 0);
	assert_string_equal(v.sha256, sha);
	assert_string_equal(v.by, "ETag (MD5 of 20 parts)");
	/* Only the one 64 MiB range past the durable offset was asked for. */
	assert_int_equal(S.requests, 1);
	assert_int_equal(S.firsts[0], 64 * MIB);
}

static void test_empty_object(void **state)
{
	struct isc_s3_object o;
	struct isc_dataset_verified v;
	struct isc_err err;
	char sha[65];
	(void)state;
	object_make(0, 0, &o, sha);
	assert_int_equal(run(&o, 0, "empty", 8, &v, &err), 0);
	assert_string_equal(v.sha256, sha);
	assert_int_equal(S.requests, 0);
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/test_download.XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];
	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	free(S.obj);
	return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_range_bytes_and_setting),
	    cmocka_unit_test(test_parallel_single_md5),
	    cmocka_unit_test(test_multipart_parts_by_connection),
	    cmocka_unit_test(test_runs_of_blocks),
	    cmocka_unit_test(test_corrupt_refused),
	    cmocka_unit_test(test_resume_fetches_only_what_is_missing),
	    cmocka_unit_test(test_old_marker_resume),
	    cmocka_unit_test(test_empty_object),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
