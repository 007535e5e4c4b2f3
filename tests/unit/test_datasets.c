/*
 * Datasets' rules (names, archive extensions, copy names) and the S3 client
 * against a scripted transport: the request it sends (URL, Host, signed
 * x-amz-content-sha256, Range, If-Match) for both addressing styles, what it
 * reads back (HeadObject headers, ListObjectsV2 pages, S3's XML errors) and the
 * shape of a presigned URL. The wire protocol itself is checked against the
 * botocore-verified mock S3 in tests/integration/datasets.sh.
 */
#include "datasets/datasets.h"
#include "providers/aws/s3.h"
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

#define SECRET "s3-secret-never-printed"

/* ---- scripted transport ---- */

static struct {
	long status;
	char body[4096];
	char headers[1024];
	/* what the client sent */
	char method[8], url[1024], host[256], range[64], if_match[96], sha[80], auth[512];
} T;

static int scripted_send(void *ctx, const struct isc_http_request *req, long timeout_ms,
                         long connect_timeout_ms, size_t max, struct isc_http_response *resp,
                         struct isc_err *err)
{
	(void)ctx, (void)timeout_ms, (void)connect_timeout_ms, (void)max, (void)err;
	snprintf(T.method, sizeof(T.method), "%s", req->method);
	snprintf(T.url, sizeof(T.url), "%s", req->url);
	T.host[0] = T.range[0] = T.if_match[0] = T.sha[0] = T.auth[0] = '\0';
	for (size_t i = 0; i < req->n_headers; i++) {
		const char *n = req->headers[i].name, *v = req->headers[i].value;
		assert_null(strstr(v, SECRET));
		if (!strcmp(n, "Host"))
			snprintf(T.host, sizeof(T.host), "%s", v);
		else if (!strcmp(n, "Range"))
			snprintf(T.range, sizeof(T.range), "%s", v);
		else if (!strcmp(n, "If-Match"))
			snprintf(T.if_match, sizeof(T.if_match), "%s", v);
		else if (!strcasecmp(n, "X-Amz-Content-Sha256"))
			snprintf(T.sha, sizeof(T.sha), "%s", v);
		else if (!strcmp(n, "Authorization"))
			snprintf(T.auth, sizeof(T.auth), "%s", v);
	}
	resp->status = T.status;
	isc_buf_puts(&resp->headers, T.headers);
	return isc_buf_puts(&resp->body, T.body);
}

static const struct isc_http_transport scripted = {scripted_send, NULL};

static int64_t fixed_now(void *c)
{
	(void)c;
	return 1440938160000LL; /* 2015-08-30T12:36:00Z */
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

static struct isc_s3_client *client(const char *endpoint, enum isc_s3_addressing a)
{
	struct isc_s3_config cfg = {endpoint, "us-east-1", a, 0, "AKIDEXAMPLE", SECRET, NULL};
	struct isc_s3_client *c = NULL;
	struct isc_err err;
	unsetenv("AWS_ENDPOINT_URL_S3");
	unsetenv("AWS_ENDPOINT_URL");
	assert_int_equal(isc_s3_client_new(&cfg, &scripted, &fake_clock, &c, &err), 0);
	return c;
}

/* ---- rules ---- */

static void test_names(void **state)
{
	static const struct {
		const char *bucket, *key, *want;
	} cases[] = {
	    {"b", "mnist.zip", "mnist"},
	    {"b", "", "b"},
	    {"b", "x/y/", "y"},
	    {"b", "a/imgs.tar.gz", "imgs"},
	    {"b", "c.tar.gz2", "c"},
	    {"b", "d.tbz2", "d"},
	    {"b", "e.txz", "e"},
	    {"b", "data.csv", "data.csv"},
	    {"my-bucket", "deep/er/set.tar", "set"},
	};
	char out[128];
	struct isc_err err;
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(
		    isc_dataset_default_name(cases[i].bucket, cases[i].key, out, sizeof(out), &err),
		    0);
		assert_string_equal(out, cases[i].want);
	}
	assert_int_equal(isc_dataset_name_check("../x", &err), ISC_EINVALID);
	assert_int_equal(isc_dataset_name_check(".hidden", &err), ISC_EINVALID);
	assert_int_equal(isc_dataset_name_check("a b", &err), ISC_EINVALID);
	assert_int_equal(isc_dataset_name_check("", &err), ISC_EINVALID);
	assert_int_equal(isc_dataset_name_check("imagenet-1k_v2.0", &err), 0);
	/* a key whose basename is only an extension has no usable default name */
	assert_int_equal(isc_dataset_default_name("b", "dir/.zip", out, sizeof(out), &err),
	                 ISC_EINVALID);
}

static void test_archives_and_copies(void **state)
{
	static const char *const yes[] = {"a.zip", "a.tar",  "a.tar.gz", "a.tgz", "a.tar.bz2",
	                                  "a.tbz", "a.tbz2", "a.tar.xz", "a.txz", "a.tar.gz2"};
	char *c;
	(void)state;
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		assert_non_null(isc_dataset_archive_ext(yes[i]));
	assert_null(isc_dataset_archive_ext("a.gz"));
	assert_null(isc_dataset_archive_ext("zip"));
	assert_string_equal(isc_dataset_archive_ext("x.tar.gz"), ".tar.gz");
	/* Named after the dataset that makes it (its id), never after its bytes. */
	c = isc_dataset_copy_name("mnist", "ds_0123456789abcdef");
	assert_string_equal(c, "mnist-ds_0123456789abcdef");
	free(c);
	c = isc_dataset_copy_name("mnist", "a/b:c");
	assert_string_equal(c, "mnist-a_b_c"); /* never a path */
	free(c);
}

/*
 * Issue 42: a dataset's own AWS keys follow the rules of an organisation's AWS key: a
 * CR or LF in the key id or the token (sent as headers) is refused at registration,
 * naming the field, before S3 is asked.
 */
static void test_own_keys_header_safe(void **state)
{
	struct isc_kv kv[3] = {{"access_key_id", "AKIDDATASET000000001"},
	                       {"secret_access_key", "dataset-secret"},
	                       {"session_token", "tok\r\nX-Injected: 1"}};
	struct isc_dataset_request req = {.org = "acme", .uri = "s3://bucket/set.zip"};
	struct isc_key_secret secret;
	struct isc_dataset d;
	struct isc_err err;
	(void)state;

	assert_int_equal(isc_key_secret_pack(kv, 3, &secret, NULL), 0);
	req.secret = &secret;
	/* No store, home or config: the request is refused before any is needed. */
	assert_int_equal(isc_dataset_register(NULL, NULL, NULL, &req, &d, &err), ISC_EINVALID);
	assert_non_null(strstr(err.msg, "session_token holds a control character"));
	assert_null(strstr(err.msg, "X-Injected"));
	isc_key_secret_cleanup(&secret);
	kv[0].value = "AKIDDATASET\n000000001";
	kv[2].value = "token";
	assert_int_equal(isc_key_secret_pack(kv, 3, &secret, NULL), 0);
	assert_int_equal(isc_dataset_register(NULL, NULL, NULL, &req, &d, &err), ISC_EINVALID);
	assert_non_null(strstr(err.msg, "access_key_id is not an access key id"));
	isc_key_secret_cleanup(&secret);
}

/* A copy name is only ever the folder of the dataset's own organisation. */
static void test_copy_split(void **state)
{
	const char *leaf = NULL;
	(void)state;
	assert_int_equal(isc_dataset_copy_split("@7/mnist-ds_01", 7, &leaf), 0);
	assert_string_equal(leaf, "mnist-ds_01");
	assert_int_equal(isc_dataset_copy_split("@7/mnist-ds_01", 70, NULL), -1);
	assert_int_equal(isc_dataset_copy_split("@70/mnist-ds_01", 7, NULL), -1);
	assert_int_equal(isc_dataset_copy_split("mnist-ds_01", 7, NULL), -1); /* old layout */
	assert_int_equal(isc_dataset_copy_split("@7/../@8/mnist", 7, NULL), -1);
	assert_int_equal(isc_dataset_copy_split("@7/a/b", 7, NULL), -1);
	assert_int_equal(isc_dataset_copy_split("@7/.manifests", 7, NULL), -1);
	assert_int_equal(isc_dataset_copy_split("@7/", 7, NULL), -1);
	assert_int_equal(isc_dataset_copy_split(NULL, 7, NULL), -1);
}

/* ---- copies in the store: one organisation each, shared only inside it ---- */

struct org_fixture {
	struct store_fixture tmp;
	int64_t org_a, org_b;
};

static int org_setup(void **state)
{
	struct org_fixture *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	store_fixture_init(&f->tmp, "datasets");
	assert_int_equal(isc_store_org_add(f->tmp.s, "acme", &f->org_a, NULL), 0);
	assert_int_equal(isc_store_org_add(f->tmp.s, "globex", &f->org_b, NULL), 0);
	*state = f;
	return 0;
}

static int org_teardown(void **state)
{
	struct org_fixture *f = *state;
	store_fixture_cleanup(&f->tmp);
	free(f);
	return 0;
}

/* Records NAME of ORG on s3://same-name-bucket/mnist.zip; its record in out. */
static void add_one(struct org_fixture *f, const char *org, const char *name, const char *id,
                    struct isc_dataset *out)
{
	struct isc_dataset d = {0};
	char *got = NULL, *leaf = isc_dataset_copy_name(name, id);
	d.id = (char *)id;
	d.name = (char *)name;
	d.uri = (char *)"s3://shared-name/mnist.zip";
	d.bucket = (char *)"shared-name";
	d.key = (char *)"mnist.zip";
	d.etag = d.version_id = d.credentials = (char *)"";
	d.size_bytes = 10;
	d.volume_bytes = 1000;
	d.copy_name = leaf;
	assert_int_equal(isc_store_dataset_add(f->tmp.s, org, &d, &got, NULL), 0);
	assert_int_equal(isc_store_dataset_find(f->tmp.s, org, got, out, NULL), 0);
	free(got);
	free(leaf);
}

static void test_copies_per_org(void **state)
{
	struct org_fixture *f = *state;
	struct isc_dataset a, b, a2, *donors = NULL;
	struct isc_err err;
	char want[64];
	size_t n = 9;
	int users = -1;

	/* Two organisations, one dataset name, one bucket name: two copies, two folders. */
	add_one(f, "acme", "mnist", "ds_000000000000000a", &a);
	add_one(f, "globex", "mnist", "ds_000000000000000b", &b);
	snprintf(want, sizeof(want), "@%lld/mnist-ds_000000000000000a", (long long)f->org_a);
	assert_string_equal(a.copy_name, want);
	snprintf(want, sizeof(want), "@%lld/mnist-ds_000000000000000b", (long long)f->org_b);
	assert_string_equal(b.copy_name, want);
	assert_int_equal(isc_dataset_copy_split(a.copy_name, a.org_id, NULL), 0);
	assert_int_equal(isc_dataset_copy_split(a.copy_name, b.org_id, NULL), -1);
	assert_int_equal(
	    isc_store_dataset_set_available(f->tmp.s, a.id, 10, "{\"objects\":[]}", NULL), 0);

	/* globex finds no donor in acme, and cannot be pointed at acme's copy. */
	assert_int_equal(isc_store_dataset_share_donors(f->tmp.s, b.org_id, "shared-name",
	                                                "mnist.zip", b.id, b.volume_bytes, &donors,
	                                                &n, NULL),
	                 0);
	assert_int_equal(n, 0);
	isc_dataset_list_free(donors, n);
	assert_int_equal(isc_store_dataset_set_shared(f->tmp.s, b.id, a.copy_name, 10, "{}", &err),
	                 ISC_ECONFLICT);
	isc_dataset_cleanup(&b);
	assert_int_equal(isc_store_dataset_find(f->tmp.s, "globex", "mnist", &b, NULL), 0);
	assert_string_equal(b.state, "created");
	assert_int_equal(isc_dataset_copy_split(b.copy_name, b.org_id, NULL), 0);

	/* A second acme dataset of the same object: acme's copy is its donor. */
	add_one(f, "acme", "mnist2", "ds_000000000000000c", &a2);
	assert_int_equal(isc_store_dataset_share_donors(f->tmp.s, a2.org_id, "shared-name",
	                                                "mnist.zip", a2.id, a2.volume_bytes,
	                                                &donors, &n, NULL),
	                 0);
	assert_int_equal(n, 1);
	assert_string_equal(donors[0].id, a.id);
	isc_dataset_list_free(donors, n);
	/* Not for a smaller volume: the donor's copy could exceed that cap. */
	assert_int_equal(isc_store_dataset_share_donors(f->tmp.s, a2.org_id, "shared-name",
	                                                "mnist.zip", a2.id, 999, &donors, &n, NULL),
	                 0);
	assert_int_equal(n, 0);
	isc_dataset_list_free(donors, n);
	assert_int_equal(isc_store_dataset_set_shared(f->tmp.s, a2.id, a.copy_name, 10, "{}", NULL),
	                 0);
	assert_int_equal(isc_store_dataset_copy_users(f->tmp.s, a.copy_name, a.id, &users, NULL),
	                 0);
	assert_int_equal(users, 1);
	assert_int_equal(isc_store_dataset_copy_users(f->tmp.s, b.copy_name, b.id, &users, NULL),
	                 0);
	assert_int_equal(users, 0);
	isc_dataset_cleanup(&a);
	isc_dataset_cleanup(&b);
	isc_dataset_cleanup(&a2);
}

/* ---- the S3 client ---- */

static void test_head_path_style(void **state)
{
	struct isc_s3_client *c = client("http://127.0.0.1:9000", ISC_S3_ADDRESSING_AUTO);
	struct isc_s3_object o;
	struct isc_err err;
	(void)state;
	T.status = 200;
	T.body[0] = '\0';
	snprintf(T.headers, sizeof(T.headers),
	         "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\nETag: "
	         "\"0123456789abcdef0123456789abcdef-3\"\r\n"
	         "x-amz-version-id: v42\r\nx-amz-mp-parts-count: 3\r\n\r\n");
	assert_int_equal(isc_s3_head(c, "my-bucket", "dir/a b.zip", "v42", 2, &o, &err), 0);
	assert_string_equal(T.method, "HEAD");
	assert_string_equal(
	    T.url, "http://127.0.0.1:9000/my-bucket/dir/a%20b.zip?partNumber=2&versionId=v42");
	assert_string_equal(T.host, "127.0.0.1:9000");
	/* S3 wants the payload hash on every signed request, and signed. */
	assert_string_equal(T.sha,
	                    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	assert_non_null(strstr(T.auth, "/us-east-1/s3/aws4_request"));
	assert_non_null(strstr(T.auth, "x-amz-content-sha256"));
	assert_int_equal(o.size, 1234);
	assert_string_equal(o.etag, "0123456789abcdef0123456789abcdef-3");
	assert_string_equal(o.version_id, "v42");
	assert_int_equal(o.parts_count, 3);
	isc_s3_object_cleanup(&o);
	isc_s3_client_free(c);
}

static void test_get_range_virtual(void **state)
{
	struct isc_s3_client *c =
	    client("https://s3.us-east-1.amazonaws.com", ISC_S3_ADDRESSING_AUTO);
	struct isc_buf out;
	struct isc_err err;
	(void)state;
	isc_buf_init(&out, 0);
	T.status = 206;
	snprintf(T.body, sizeof(T.body), "0123456789");
	snprintf(T.headers, sizeof(T.headers),
	         "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 100-109/5000\r\n\r\n");
	assert_int_equal(
	    isc_s3_get_range(c, "data-bucket", "k.bin", NULL, "abc", 100, 10, &out, &err), 0);
	assert_string_equal(T.url, "https://data-bucket.s3.us-east-1.amazonaws.com/k.bin");
	assert_string_equal(T.host, "data-bucket.s3.us-east-1.amazonaws.com");
	assert_string_equal(T.range, "bytes=100-109");
	assert_string_equal(T.if_match, "\"abc\"");
	assert_string_equal(isc_buf_cstr(&out), "0123456789");
	/* A server that ignores Range (200, whole object) is refused, not appended. */
	T.status = 200;
	T.headers[0] = '\0';
	assert_int_equal(
	    isc_s3_get_range(c, "data-bucket", "k.bin", NULL, NULL, 100, 10, &out, &err),
	    ISC_EINVALID);
	/* A dotted bucket stays path-style (the wildcard certificate would not match). */
	T.status = 206;
	snprintf(T.headers, sizeof(T.headers), "Content-Range: bytes 0-9/10\r\n");
	assert_int_equal(isc_s3_get_range(c, "data.bucket", "k", NULL, NULL, 0, 10, &out, &err), 0);
	assert_string_equal(T.url, "https://s3.us-east-1.amazonaws.com/data.bucket/k");
	isc_buf_cleanup(&out);
	isc_s3_client_free(c);
}

static void test_errors(void **state)
{
	struct isc_s3_client *c = client("http://localhost:9000", ISC_S3_ADDRESSING_PATH);
	struct isc_s3_object o;
	struct isc_buf out;
	struct isc_err err;
	(void)state;
	isc_buf_init(&out, 0);
	T.status = 404;
	T.headers[0] = '\0';
	snprintf(T.body, sizeof(T.body),
	         "<?xml version=\"1.0\"?><Error><Code>NoSuchKey</Code><Message>The specified key "
	         "does not exist.</Message></Error>");
	assert_int_equal(isc_s3_get_range(c, "bkt", "nope", NULL, NULL, 0, 1, &out, &err),
	                 ISC_ENOTFOUND);
	assert_non_null(strstr(err.msg, "NoSuchKey"));
	assert_non_null(strstr(err.msg, "s3://bkt/nope"));
	T.status = 412;
	snprintf(T.body, sizeof(T.body),
	         "<Error><Code>PreconditionFailed</Code><Message>At least one of the "
	         "pre-conditions you specified did not hold</Message></Error>");
	assert_int_equal(isc_s3_get_range(c, "bkt", "k", NULL, "e", 0, 1, &out, &err),
	                 ISC_ECONFLICT);
	T.status = 403;
	T.body[0] = '\0'; /* HEAD: no body, the status alone */
	assert_int_equal(isc_s3_head(c, "bkt", "k", NULL, 0, &o, &err), ISC_EAUTH);
	assert_null(strstr(err.msg, SECRET));
	assert_int_equal(isc_s3_head(c, "Bad_Bucket", "k", NULL, 0, &o, &err), ISC_EINVALID);
	isc_buf_cleanup(&out);
	isc_s3_client_free(c);
	/* Plain http to a host that is not loopback is refused before anything is sent. */
	{
		struct isc_s3_config cfg = {
		    "http://s3.example.com", "us-east-1", 0, 0, "AKID", SECRET, NULL};
		struct isc_s3_client *bad = NULL;
		assert_int_equal(isc_s3_client_new(&cfg, &scripted, &fake_clock, &bad, &err),
		                 ISC_EINVALID);
		assert_null(bad);
	}
}

static void test_list_pages(void **state)
{
	struct isc_s3_client *c = client("http://127.0.0.1:9000", ISC_S3_ADDRESSING_PATH);
	struct isc_s3_listing l;
	struct isc_err err;
	(void)state;
	T.status = 200;
	T.headers[0] = '\0';
	snprintf(T.body, sizeof(T.body),
	         "<?xml version=\"1.0\"?><ListBucketResult "
	         "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>b</Name>"
	         "<IsTruncated>true</IsTruncated><NextContinuationToken>tok/en=</"
	         "NextContinuationToken>"
	         "<Contents><Key>p/a</Key><Size>3</Size><ETag>&quot;e1&quot;</ETag></Contents>"
	         "<Contents><Key>p/b</Key><Size>5</Size><ETag>&quot;e2-2&quot;</ETag></Contents>"
	         "</ListBucketResult>");
	assert_int_equal(isc_s3_list_page(c, "bkt", "p/", "prev tok", 2, &l, &err), 0);
	assert_string_equal(T.url, "http://127.0.0.1:9000/bkt?continuation-token=prev%20tok&list-"
	                           "type=2&max-keys=2&prefix=p%2F");
	assert_int_equal(l.n, 2);
	assert_string_equal(l.objects[1].key, "p/b");
	assert_int_equal(l.objects[1].size, 5);
	assert_string_equal(l.objects[1].etag, "e2-2");
	assert_string_equal(l.next_token, "tok/en=");
	isc_s3_listing_cleanup(&l);
	/* Truncated without a token would loop forever: refused. */
	snprintf(T.body, sizeof(T.body),
	         "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>");
	assert_int_equal(isc_s3_list_page(c, "bkt", "", NULL, 1000, &l, &err), ISC_EINVALID);
	isc_s3_client_free(c);
}

static void test_presign(void **state)
{
	struct isc_s3_client *c = client("http://127.0.0.1:9000", ISC_S3_ADDRESSING_PATH);
	struct isc_err err;
	char *url = NULL;
	(void)state;
	assert_int_equal(isc_s3_presign_get(c, "bkt", "d/m.zip", "v 1", "etag1", 3600, &url, &err),
	                 0);
	assert_true(strncmp(url,
	                    "http://127.0.0.1:9000/bkt/d/m.zip?versionId=v%201&X-Amz-Algorithm="
	                    "AWS4-HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE%2F20150830%2Fus-east-1%"
	                    "2Fs3%2Faws4_request&X-Amz-Date=20150830T123600Z&X-Amz-Expires=3600&"
	                    "X-Amz-SignedHeaders=host%3Bif-match&X-Amz-Signature=",
	                    strlen("http://127.0.0.1:9000/bkt/d/m.zip?versionId=v%201&X-Amz-"
	                           "Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE%"
	                           "2F20150830%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date="
	                           "20150830T123600Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host%"
	                           "3Bif-match&X-Amz-Signature=")) == 0);
	assert_null(strstr(url, SECRET));
	free(url);
	assert_int_equal(isc_s3_presign_get(c, "bkt", "k", NULL, NULL, 0, &url, &err),
	                 ISC_EINVALID);
	isc_s3_client_free(c);
}

/* The configured endpoint (already the caller's resolution) beats the environment. */
static void test_endpoint_order(void **state)
{
	char *e;
	(void)state;
	setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.2:9000/", 1);
	setenv("AWS_ENDPOINT_URL", "http://127.0.0.3:9000", 1);
	e = isc_s3_endpoint_resolve("http://127.0.0.1:8000/", "eu-west-1");
	assert_string_equal(e, "http://127.0.0.1:8000");
	free(e);
	e = isc_s3_endpoint_resolve(NULL, "eu-west-1");
	assert_string_equal(e, "http://127.0.0.2:9000");
	free(e);
	unsetenv("AWS_ENDPOINT_URL_S3");
	e = isc_s3_endpoint_resolve("", "eu-west-1");
	assert_string_equal(e, "http://127.0.0.3:9000");
	free(e);
	unsetenv("AWS_ENDPOINT_URL");
	e = isc_s3_endpoint_resolve(NULL, "eu-west-1");
	assert_string_equal(e, "https://s3.eu-west-1.amazonaws.com");
	free(e);
}

static void test_uri(void **state)
{
	char *b, *k;
	struct isc_err err;
	(void)state;
	assert_int_equal(isc_s3_uri_parse("s3://bucket/a/b.zip", &b, &k, &err), 0);
	assert_string_equal(b, "bucket");
	assert_string_equal(k, "a/b.zip");
	free(b);
	free(k);
	assert_int_equal(isc_s3_uri_parse("s3://bucket", &b, &k, &err), 0);
	assert_string_equal(k, "");
	free(b);
	free(k);
	assert_int_equal(isc_s3_uri_parse("https://bucket/x", &b, &k, &err), ISC_EINVALID);
	assert_int_equal(isc_s3_uri_parse("s3://UPPER/x", &b, &k, &err), ISC_EINVALID);
	assert_int_equal(isc_s3_uri_parse("s3://ab/x", &b, &k, &err), ISC_EINVALID);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_names),
	    cmocka_unit_test(test_archives_and_copies),
	    cmocka_unit_test(test_head_path_style),
	    cmocka_unit_test(test_get_range_virtual),
	    cmocka_unit_test(test_errors),
	    cmocka_unit_test(test_own_keys_header_safe),
	    cmocka_unit_test(test_list_pages),
	    cmocka_unit_test(test_presign),
	    cmocka_unit_test(test_uri),
	    cmocka_unit_test(test_endpoint_order),
	    cmocka_unit_test(test_copy_split),
	    cmocka_unit_test_setup_teardown(test_copies_per_org, org_setup, org_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
