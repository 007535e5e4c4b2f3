/*
 * Artifacts in object storage (issue 45): artifact_root's parsing, the part sizes,
 * the manifest rules (a crafted manifest is refused), the presigned GET and UploadPart
 * URLs against SigV4 presign vectors (AWS's documented GET example; the UploadPart URL
 * as botocore's S3SigV4QueryAuth makes it for the same key and moment, under faketime),
 * and the node's restore script run in bash against crafted manifests: it refuses them
 * before it writes anything.
 */
#include "artifacts/manifest.h"
#include "broker/s3ckpt.h"
#include "config/config.h"
#include "launcher/s3node.h"
#include "launcher/transfer.h"
#include "providers/aws/s3.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void test_artifact_root(void **state)
{
	static const char *const good[] = {"", "/srv/artifacts", "s3://sandbox-data",
	                                   "s3://sandbox-data/x", "s3://a.b-c/p/q/"};
	static const char *const bad[] = {
	    "relative/dir",      "s3:/x",           "gs://bucket/x",
	    "s3://Bad_Bucket/x", "s3://ab/x",       "s3://bucket/a/../b",
	    "s3://bucket/a//b",  "s3://bucket/./b", "s3://bucket/@1/x",
	    "S3://bucket",       "s3://-bucket/x"};
	struct isc_err err;
	char *b, *p;
	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		assert_int_equal(isc_config_artifact_root_parse(good[i], &b, &p, &err), 0);
		free(b);
		free(p);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(isc_config_artifact_root_parse(bad[i], &b, &p, &err),
		                 ISC_EINVALID);
		assert_non_null(strstr(err.msg, "artifact_root"));
		assert_null(b);
	}
	assert_int_equal(isc_config_artifact_root_parse("s3://a.b-c/p/q/", &b, &p, &err), 0);
	assert_string_equal(b, "a.b-c");
	assert_string_equal(p, "p/q");
	free(b);
	free(p);
}

static void test_part_sizes(void **state)
{
	(void)state;
	/* 8 to 64 MiB in whole MiB; never more than 10,000 parts. */
	assert_int_equal(isc_transfer_part_size(0), 8u << 20);
	assert_int_equal(isc_transfer_part_size(100), 8u << 20);
	assert_int_equal(isc_transfer_part_size(1ull << 30), 64u << 20);
	assert_int_equal(isc_transfer_part_count(1ull << 30, 64u << 20), 16);
	assert_int_equal(isc_transfer_part_count(0, 8u << 20), 1);
	assert_int_equal(isc_transfer_part_size(ISC_TRANSFER_MAX_FILE), 64u << 20);
	assert_int_equal(isc_transfer_part_count(ISC_TRANSFER_MAX_FILE, 64u << 20), 10000);
	assert_int_equal(isc_transfer_part_size(ISC_TRANSFER_MAX_FILE + 1), 0);
	for (uint64_t s = 1; s < (1ull << 40); s = s * 3 + 7) {
		uint64_t ps = isc_transfer_part_size(s);
		assert_true(ps >= (8u << 20) && ps <= (64u << 20) && !(ps & 0xfffff));
		assert_true(isc_transfer_part_count(s, ps) <= 10000);
	}
	assert_true(isc_transfer_url_ok("https://b.s3.amazonaws.com/k?X-Amz-Signature=ab"));
	assert_false(isc_transfer_url_ok("https://x/\"; rm -rf /"));
	assert_false(isc_transfer_url_ok("https://x/a\nb"));
	assert_false(isc_transfer_url_ok(""));
}

#define PFX  "ckpt/@1/exp_1/"
#define MD5A "0123456789abcdef0123456789abcdef"

static struct isc_manifest good_manifest(void)
{
	struct isc_manifest m = {0};
	m.version = 2;
	assert_int_equal(isc_manifest_add(&m, "checkpoints", 1, 0, NULL, NULL, 0), 0);
	assert_int_equal(isc_manifest_add(&m, "checkpoints/sub", 1, 0, NULL, NULL, 0), 0);
	assert_int_equal(isc_manifest_add(&m, "checkpoints/step", 0, 2, PFX "v2/checkpoints/step",
	                                  MD5A, 8u << 20),
	                 0);
	assert_int_equal(isc_manifest_add(&m, "crud/model.pt", 0, 1ull << 30,
	                                  PFX "v1/crud/model.pt", MD5A "-16", 64u << 20),
	                 0);
	return m;
}

/* m with one more entry, checked; the error's text. */
static int check_with(const char *json_entry, char *msg, size_t cap)
{
	struct isc_manifest m;
	struct isc_manifest_limits lim = {2ull << 30, 100, PFX};
	struct isc_err err;
	char json[2048];
	int rc;
	/* No total_bytes: the entries' sizes are the total (isc_manifest_from_json). */
	snprintf(json, sizeof(json),
	         "{\"version\":2,\"entries\":[{\"path\":\"checkpoints\",\"type\":\"dir\"},%s]}",
	         json_entry);
	rc = isc_manifest_from_json(json, &m, &err);
	if (!rc)
		rc = isc_manifest_check(&m, &lim, &err);
	snprintf(msg, cap, "%s", rc ? err.msg : "");
	isc_manifest_cleanup(&m);
	return rc;
}

static void test_manifest_rules(void **state)
{
	struct isc_manifest m = good_manifest(), back;
	struct isc_manifest_limits lim = {2ull << 30, 100, PFX};
	struct isc_err err;
	char msg[512], *json;
	(void)state;
	assert_int_equal(isc_manifest_check(&m, &lim, &err), 0);
	json = isc_manifest_to_json(&m);
	assert_non_null(json);
	assert_int_equal(isc_manifest_from_json(json, &back, &err), 0);
	assert_int_equal(isc_manifest_check(&back, &lim, &err), 0);
	assert_int_equal(back.n, 4);
	assert_int_equal(back.total_bytes, (1ull << 30) + 2);
	free(json);
	isc_manifest_cleanup(&back);
	/* Caps: the total and the entries. */
	lim.max_bytes = 1ull << 30;
	assert_int_equal(isc_manifest_check(&m, &lim, &err), ISC_EINVALID);
	assert_non_null(strstr(err.msg, "artifact_max_bytes"));
	lim.max_bytes = 0;
	lim.max_entries = 3;
	assert_int_equal(isc_manifest_check(&m, &lim, &err), ISC_EINVALID);
	isc_manifest_cleanup(&m);

	/* Crafted entries, each refused with what is wrong. */
	static const struct {
		const char *entry, *says;
	} crafted[] = {
	    {"{\"path\":\"checkpoints/../../etc/passwd\",\"type\":\"file\",\"size\":1,\"key\":"
	     "\"" PFX "v2/checkpoints/../../etc/passwd\",\"etag\":\"" MD5A
	     "\",\"part_size\":8388608}",
	     "\"..\""},
	    {"{\"path\":\"/etc/passwd\",\"type\":\"file\",\"size\":1,\"key\":\"" PFX
	     "v2//etc/passwd\",\"etag\":\"" MD5A "\",\"part_size\":8388608}",
	     "absolute"},
	    {"{\"path\":\"root/.ssh/authorized_keys\",\"type\":\"file\",\"size\":1,\"key\":\"" PFX
	     "v2/root/.ssh/authorized_keys\",\"etag\":\"" MD5A "\",\"part_size\":8388608}",
	     "outside the artifact folders"},
	    {"{\"path\":\"checkpoints/l\",\"type\":\"symlink\",\"target\":\"/etc\"}", "type"},
	    {"{\"path\":\"checkpoints/dev\",\"type\":\"char\",\"size\":0}", "type"},
	    {"{\"path\":\"checkpoints/big\",\"type\":\"file\",\"size\":4294967296,\"key\":\"" PFX
	     "v2/checkpoints/big\",\"etag\":\"" MD5A "-64\",\"part_size\":67108864}",
	     "artifact_max_bytes"},
	    {"{\"path\":\"checkpoints/x\",\"type\":\"file\",\"size\":1,\"key\":\"other/@2/exp_9/v1/"
	     "checkpoints/x\",\"etag\":\"" MD5A "\",\"part_size\":8388608}",
	     "object key"},
	    {"{\"path\":\"checkpoints/x\",\"type\":\"file\",\"size\":1,\"key\":\"" PFX
	     "v2/checkpoints/y\",\"etag\":\"" MD5A "\",\"part_size\":8388608}",
	     "object key"},
	    {"{\"path\":\"checkpoints/x\",\"type\":\"file\",\"size\":1,\"key\":\"" PFX
	     "v2/checkpoints/x\",\"etag\":\"zz\\\"><x\",\"part_size\":8388608}",
	     "ETag"},
	    {"{\"path\":\"checkpoints/x\",\"type\":\"file\",\"size\":100,\"key\":\"" PFX
	     "v2/checkpoints/x\",\"etag\":\"" MD5A "-3\",\"part_size\":8388608}",
	     "part size"},
	    {"{\"path\":\"checkpoints/a\\nb\",\"type\":\"dir\"}", "control character"},
	    {"{\"path\":\"checkpoints/x\",\"type\":\"dir\"},{\"path\":\"checkpoints/x\","
	     "\"type\":\"dir\"}",
	     "twice"},
	    {"{\"path\":\"checkpoints/f\",\"type\":\"file\",\"size\":1,\"key\":\"" PFX
	     "v2/checkpoints/f\",\"etag\":\"" MD5A "\",\"part_size\":8388608},{\"path\":"
	     "\"checkpoints/f/g\",\"type\":\"dir\"}",
	     "below a file"},
	    {"{\"path\":\"crud\",\"type\":\"file\",\"size\":1,\"key\":\"" PFX
	     "v2/crud\",\"etag\":\"" MD5A "\",\"part_size\":8388608}",
	     "in place of an artifact folder"},
	};
	for (size_t i = 0; i < sizeof(crafted) / sizeof(crafted[0]); i++) {
		int rc = check_with(crafted[i].entry, msg, sizeof(msg));
		if (rc != ISC_EINVALID || !strstr(msg, crafted[i].says))
			fail_msg("crafted entry %zu: rc %d, '%s' (wanted '%s')", i, rc, msg,
			         crafted[i].says);
	}
}

/* mtime_ns: written for files that have it, read back; a manifest from before it (no
 * mtime_ns) is read fine, its files without one; a crafted one is refused. */
static void test_manifest_mtime(void **state)
{
	struct isc_manifest m = good_manifest(), back;
	struct isc_manifest_limits lim = {2ull << 30, 100, PFX};
	struct isc_err err;
	char msg[512], *json;
	(void)state;
	m.entries[2].has_mtime = 1;
	m.entries[2].mtime_ns = 1700000000123456789LL;
	json = isc_manifest_to_json(&m);
	assert_non_null(json);
	assert_non_null(strstr(json, "\"mtime_ns\":1700000000123456789"));
	assert_int_equal(isc_manifest_from_json(json, &back, &err), 0);
	assert_int_equal(isc_manifest_check(&back, &lim, &err), 0);
	assert_int_equal(back.entries[2].has_mtime, 1);
	assert_true(back.entries[2].mtime_ns == 1700000000123456789LL);
	assert_int_equal(back.entries[3].has_mtime, 0); /* written without: read without */
	assert_int_equal(back.entries[0].has_mtime, 0);
	free(json);
	/* Written again, the same text: nothing lost or made up. */
	json = isc_manifest_to_json(&back);
	{
		char *again = isc_manifest_to_json(&m);
		assert_string_equal(json, again);
		free(again);
	}
	free(json);
	isc_manifest_cleanup(&back);
	isc_manifest_cleanup(&m);
	/* A manifest from before mtime_ns. */
	assert_int_equal(check_with("{\"path\":\"checkpoints/x\",\"type\":\"file\",\"size\":1,"
	                            "\"key\":\"" PFX "v2/checkpoints/x\",\"etag\":\"" MD5A
	                            "\",\"part_size\":8388608}",
	                            msg, sizeof(msg)),
	                 0);
	/* Crafted: not a count of nanoseconds. */
	assert_int_equal(check_with("{\"path\":\"checkpoints/x\",\"type\":\"file\",\"size\":1,"
	                            "\"key\":\"" PFX "v2/checkpoints/x\",\"etag\":\"" MD5A
	                            "\",\"part_size\":8388608,\"mtime_ns\":\"soon\"}",
	                            msg, sizeof(msg)),
	                 ISC_EINVALID);
	assert_non_null(strstr(msg, "mtime_ns"));
	assert_int_equal(check_with("{\"path\":\"checkpoints/x\",\"type\":\"file\",\"size\":1,"
	                            "\"key\":\"" PFX "v2/checkpoints/x\",\"etag\":\"" MD5A
	                            "\",\"part_size\":8388608,\"mtime_ns\":-5}",
	                            msg, sizeof(msg)),
	                 ISC_EINVALID);
}

static void listed(struct isc_node_listing *l, const char *path, int is_dir, uint64_t size,
                   int has_mtime, int64_t mtime_ns)
{
	struct isc_node_entry *g = realloc(l->entries, (l->n + 1) * sizeof(*g));
	assert_non_null(g);
	l->entries = g;
	g[l->n] = (struct isc_node_entry){strdup(path), is_dir, size, has_mtime, mtime_ns};
	assert_non_null(g[l->n].path);
	l->total += size;
	l->n++;
}

/* The current version: checkpoints/{a,b,sub/,old} with mtimes, crud/m without one (a
 * manifest from before mtime_ns), lossy/l (not listed by a checkpoint sync). */
static struct isc_manifest plan_manifest(void)
{
	struct isc_manifest m = {0};
	m.version = 3;
	assert_int_equal(isc_manifest_add(&m, "checkpoints", 1, 0, NULL, NULL, 0), 0);
	assert_int_equal(
	    isc_manifest_add(&m, "checkpoints/a", 0, 10, PFX "v1/checkpoints/a", MD5A, 8u << 20),
	    0);
	m.entries[m.n - 1].has_mtime = 1;
	m.entries[m.n - 1].mtime_ns = 1000;
	assert_int_equal(
	    isc_manifest_add(&m, "checkpoints/b", 0, 20, PFX "v3/checkpoints/b", MD5A, 8u << 20),
	    0);
	m.entries[m.n - 1].has_mtime = 1;
	m.entries[m.n - 1].mtime_ns = 2000;
	assert_int_equal(isc_manifest_add(&m, "checkpoints/sub", 1, 0, NULL, NULL, 0), 0);
	assert_int_equal(isc_manifest_add(&m, "crud", 1, 0, NULL, NULL, 0), 0);
	assert_int_equal(isc_manifest_add(&m, "crud/m", 0, 30, PFX "v2/crud/m", MD5A, 8u << 20), 0);
	assert_int_equal(isc_manifest_add(&m, "lossy", 1, 0, NULL, NULL, 0), 0);
	assert_int_equal(isc_manifest_add(&m, "lossy/l", 0, 5, PFX "v3/lossy/l", MD5A, 8u << 20),
	                 0);
	m.entries[m.n - 1].has_mtime = 1;
	m.entries[m.n - 1].mtime_ns = 5;
	return m;
}

/* The listing as the current version has it (crud/m with its size: no mtime to match). */
static void plan_listing(struct isc_node_listing *l, int with_crud_m)
{
	memset(l, 0, sizeof(*l));
	/* Not in the manifest's order: the plan looks paths up. */
	listed(l, "checkpoints/b", 0, 20, 1, 2000);
	listed(l, "checkpoints", 1, 0, 0, 0);
	listed(l, "checkpoints/sub", 1, 0, 0, 0);
	listed(l, "checkpoints/a", 0, 10, 1, 1000);
	listed(l, "crud", 1, 0, 0, 0);
	if (with_crud_m)
		listed(l, "crud/m", 0, 30, 1, 3000);
}

static void test_sync_plan(void **state)
{
	const int ckpt = ISC_ARTIFACT_CHECKPOINTS | ISC_ARTIFACT_CRUD;
	struct isc_manifest cur = plan_manifest();
	struct isc_node_listing l;
	struct isc_s3_plan p;
	struct isc_err err;
	(void)state;

	/* Unchanged (crud/m gone from both sides): nothing to upload, no new version. */
	plan_listing(&l, 0);
	/* cur without crud/m. */
	{
		struct isc_manifest c2 = {0};
		c2.version = cur.version;
		for (size_t i = 0; i < cur.n; i++) {
			const struct isc_manifest_entry *e = &cur.entries[i];
			if (!strcmp(e->path, "crud/m"))
				continue;
			assert_int_equal(isc_manifest_add(&c2, e->path, e->is_dir, e->size, e->key,
			                                  e->etag, e->part_size),
			                 0);
			c2.entries[c2.n - 1].has_mtime = e->has_mtime;
			c2.entries[c2.n - 1].mtime_ns = e->mtime_ns;
		}
		assert_int_equal(isc_s3_sync_plan(&l, &c2, ckpt, &p, &err), 0);
		assert_int_equal(p.changed, 0);
		assert_int_equal(p.n_upload, 0);
		assert_int_equal(p.n_carry, 2);
		/* checkpoints/b is listed first and is c2's entry 2 (0: checkpoints, 1: a) */
		assert_int_equal(p.from[0], 2);
		assert_int_equal(p.from[1], -1); /* a folder */
		assert_int_equal(p.from[3], 1);
		isc_s3_plan_cleanup(&p);
		/* The lossy sync's listing (lossy only) is compared with lossy's entries. */
		{
			struct isc_node_listing ll;
			memset(&ll, 0, sizeof(ll));
			listed(&ll, "lossy", 1, 0, 0, 0);
			listed(&ll, "lossy/l", 0, 5, 1, 5);
			assert_int_equal(isc_s3_sync_plan(&ll, &c2, ISC_ARTIFACT_LOSSY, &p, &err),
			                 0);
			assert_int_equal(p.changed, 0);
			assert_int_equal(p.n_carry, 1);
			isc_s3_plan_cleanup(&p);
			isc_node_listing_cleanup(&ll);
		}
		/* A folder more on the node: a new version, still nothing uploaded. */
		listed(&l, "checkpoints/new", 1, 0, 0, 0);
		assert_int_equal(isc_s3_sync_plan(&l, &c2, ckpt, &p, &err), 0);
		assert_int_equal(p.changed, 1);
		assert_int_equal(p.n_upload, 0);
		isc_s3_plan_cleanup(&p);
		isc_node_listing_cleanup(&l);
		/* A file gone from the node: a new version without it. */
		plan_listing(&l, 0);
		free(l.entries[3].path);
		l.entries[3] = l.entries[--l.n]; /* drop checkpoints/a */
		assert_int_equal(isc_s3_sync_plan(&l, &c2, ckpt, &p, &err), 0);
		assert_int_equal(p.changed, 1);
		assert_int_equal(p.n_upload, 0);
		assert_int_equal(p.n_carry, 1);
		isc_s3_plan_cleanup(&p);
		isc_node_listing_cleanup(&l);
		isc_manifest_cleanup(&c2);
	}

	/* crud/m has no mtime_ns in the manifest (from before): uploaded, never matched. */
	plan_listing(&l, 1);
	assert_int_equal(isc_s3_sync_plan(&l, &cur, ckpt, &p, &err), 0);
	assert_int_equal(p.changed, 1);
	assert_int_equal(p.n_upload, 1);
	assert_int_equal(p.n_carry, 2);
	assert_int_equal(p.from[5], -1);
	isc_s3_plan_cleanup(&p);

	/* One file rewritten: a new mtime (same size), or a new size (same mtime). */
	l.entries[0].mtime_ns = 2001;
	assert_int_equal(isc_s3_sync_plan(&l, &cur, ckpt, &p, &err), 0);
	assert_int_equal(p.n_upload, 2);
	assert_int_equal(p.from[0], -1);
	assert_int_equal(p.from[3], 1);
	isc_s3_plan_cleanup(&p);
	l.entries[0].mtime_ns = 2000;
	l.entries[0].size = 21;
	assert_int_equal(isc_s3_sync_plan(&l, &cur, ckpt, &p, &err), 0);
	assert_int_equal(p.from[0], -1);
	isc_s3_plan_cleanup(&p);
	/* A listed file without an mtime (find printed none): uploaded. */
	l.entries[0].size = 20;
	l.entries[0].has_mtime = 0;
	assert_int_equal(isc_s3_sync_plan(&l, &cur, ckpt, &p, &err), 0);
	assert_int_equal(p.from[0], -1);
	isc_s3_plan_cleanup(&p);
	isc_node_listing_cleanup(&l);

	/* A folder where the manifest has a file of that name: never carried. */
	memset(&l, 0, sizeof(l));
	listed(&l, "checkpoints", 1, 0, 0, 0);
	listed(&l, "checkpoints/a", 1, 0, 0, 0);
	listed(&l, "checkpoints/b", 0, 20, 1, 2000);
	listed(&l, "checkpoints/sub", 1, 0, 0, 0);
	listed(&l, "crud", 1, 0, 0, 0);
	listed(&l, "crud/m", 0, 30, 1, 3000);
	assert_int_equal(isc_s3_sync_plan(&l, &cur, ckpt, &p, &err), 0);
	assert_int_equal(p.changed, 1);
	assert_int_equal(p.from[1], -1);
	isc_s3_plan_cleanup(&p);

	/* No version yet: everything is uploaded. */
	assert_int_equal(isc_s3_sync_plan(&l, NULL, ckpt, &p, &err), 0);
	assert_int_equal(p.changed, 1);
	assert_int_equal(p.n_upload, 2);
	assert_int_equal(p.n_carry, 0);
	isc_s3_plan_cleanup(&p);
	isc_node_listing_cleanup(&l);
	/* An empty listing against an empty version: unchanged. */
	{
		struct isc_manifest empty = {0};
		empty.version = 1;
		assert_int_equal(isc_s3_sync_plan(&l, &empty, ckpt, &p, &err), 0);
		assert_int_equal(p.changed, 0);
		isc_s3_plan_cleanup(&p);
	}
	isc_manifest_cleanup(&cur);
}

static int64_t fixed_now(void *ctx)
{
	(void)ctx;
	return 1369353600000LL; /* 2013-05-24T00:00:00Z, AWS's presign example */
}

static void test_presign_vectors(void **state)
{
	struct isc_clock clock = {fixed_now, NULL, NULL, NULL};
	struct isc_s3_config cfg = {"https://s3.amazonaws.com",
	                            "us-east-1",
	                            ISC_S3_ADDRESSING_VIRTUAL,
	                            0,
	                            "AKIAIOSFODNN7EXAMPLE",
	                            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
	                            NULL};
	struct isc_s3_client *c;
	struct isc_err err;
	char *url;
	(void)state;
	assert_int_equal(isc_s3_client_new(&cfg, NULL, &clock, &c, &err), 0);
	/* https://docs.aws.amazon.com/AmazonS3/latest/API/sigv4-query-string-auth.html */
	assert_int_equal(
	    isc_s3_presign_get(c, "examplebucket", "test.txt", NULL, NULL, 86400, &url, &err), 0);
	assert_non_null(strstr(url, "X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c2"
	                            "65957d157751f604d404"));
	assert_non_null(strstr(url, "https://examplebucket.s3.amazonaws.com/test.txt?"));
	free(url);
	/* The same moment and key, an UploadPart: botocore's S3SigV4QueryAuth gives this. */
	assert_int_equal(isc_s3_presign_upload_part(
	                     c, "examplebucket", "ckpt/@123/exp_1/v2/checkpoints/model.pt",
	                     "VXBsb2FkIElEIGZvciA2aWWpbmcncyBteS1tb3ZpZS5tMnRzIHVwbG9hZA", 7, 900,
	                     &url, &err),
	                 0);
	assert_string_equal(
	    url,
	    "https://examplebucket.s3.amazonaws.com/ckpt/%40123/exp_1/v2/checkpoints/"
	    "model.pt?partNumber=7&uploadId=VXBsb2FkIElEIGZvciA2aWWpbmcncyBteS1tb3ZpZS5tMnRzIHV"
	    "wbG9hZA&X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%"
	    "2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-"
	    "Expires=900&X-Amz-SignedHeaders=host&X-Amz-Signature="
	    "76ccf535be1b14995c1ba9d559846285758e742b0ea47b652f9818152ce048af");
	free(url);
	/* Part numbers 1..10000 only; an upload id with a space is refused. */
	assert_int_equal(
	    isc_s3_presign_upload_part(c, "examplebucket", "k", "id", 0, 900, &url, &err),
	    ISC_EINVALID);
	assert_int_equal(
	    isc_s3_presign_upload_part(c, "examplebucket", "k", "id", 10001, 900, &url, &err),
	    ISC_EINVALID);
	assert_int_equal(
	    isc_s3_presign_upload_part(c, "examplebucket", "k", "a b", 1, 900, &url, &err),
	    ISC_EINVALID);
	isc_s3_client_free(c);
}

/* Runs script in bash with stdin from the file in (NULL: empty); its exit code. */
static int run_bash_in(const char *script, const char *in)
{
	char path[] = "/tmp/isc-test-restore.XXXXXX", cmd[256];
	int fd = mkstemp(path), rc;
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	assert_non_null(f);
	fputs(script, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "bash %s <%s >/dev/null 2>&1", path, in ? in : "/dev/null");
	rc = system(cmd);
	unlink(path);
	return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static int run_bash(const char *script)
{
	return run_bash_in(script, NULL);
}

static void test_restore_script_refuses_crafted(void **state)
{
	char root[] = "/tmp/isc-test-mnt.XXXXXX", cmd[512], before[256];
	struct isc_buf b;
	static const char *const paths[] = {"checkpoints/../../outside", "/etc/outside",
	                                    "root/.ssh/authorized_keys", "checkpoints//x",
	                                    "checkpoints/./x",           ".."};
	(void)state;
	assert_non_null(mkdtemp(root));
	snprintf(cmd, sizeof(cmd),
	         "mkdir -p %s/checkpoints && echo 7 > %s/checkpoints/step && ln -s /etc "
	         "%s/checkpoints/keep",
	         root, root, root);
	assert_int_equal(system(cmd), 0);
	snprintf(before, sizeof(before), "cd %s && find . -printf '%%y %%s %%p\\n' | sort", root);
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		/* The broker's check is bypassed: the script is the last line of defence. */
		struct isc_manifest m = {0};
		FILE *p;
		char listing[2][4096];
		m.version = 1;
		assert_int_equal(isc_manifest_add(&m, paths[i], 0, 5, "k", MD5A, 8u << 20), 0);
		isc_buf_init(&b, 0);
		assert_int_equal(isc_launcher_restore_script(&m, root, 0, &b), 0);
		for (int k = 0; k < 2; k++) {
			size_t got;
			if (k == 1)
				assert_int_equal(run_bash(isc_buf_cstr(&b)), ISC_RESTORE_REFUSED);
			p = popen(before, "r");
			got = fread(listing[k], 1, sizeof(listing[k]) - 1, p);
			listing[k][got] = '\0';
			pclose(p);
		}
		assert_string_equal(listing[0], listing[1]);
		isc_buf_cleanup(&b);
		isc_manifest_cleanup(&m);
	}
	/* Over the per-experiment cap: refused before anything is written. */
	{
		struct isc_manifest m = {0};
		m.version = 1;
		assert_int_equal(
		    isc_manifest_add(&m, "checkpoints/big", 0, 5ull << 30, "k", MD5A, 64u << 20),
		    0);
		isc_buf_init(&b, 0);
		assert_int_equal(isc_launcher_restore_script(&m, root, 1ull << 30, &b), 0);
		assert_int_equal(run_bash(isc_buf_cstr(&b)), ISC_RESTORE_REFUSED);
		isc_buf_cleanup(&b);
		isc_manifest_cleanup(&m);
	}
	snprintf(cmd, sizeof(cmd),
	         "test \"$(cat %s/checkpoints/step)\" = 7 && test -L %s/checkpoints/keep", root,
	         root);
	assert_int_equal(system(cmd), 0);
	/* A manifest of folders only restores them in place of the old folders. */
	{
		struct isc_manifest m = {0};
		m.version = 1;
		assert_int_equal(isc_manifest_add(&m, "checkpoints", 1, 0, NULL, NULL, 0), 0);
		assert_int_equal(isc_manifest_add(&m, "checkpoints/a/b", 1, 0, NULL, NULL, 0), 0);
		isc_buf_init(&b, 0);
		assert_int_equal(isc_launcher_restore_script(&m, root, 0, &b), 0);
		assert_int_equal(run_bash(isc_buf_cstr(&b)), 0);
		isc_buf_cleanup(&b);
		isc_manifest_cleanup(&m);
		snprintf(cmd, sizeof(cmd),
		         "test -d %s/checkpoints/a/b && ! test -e %s/checkpoints/step && test -d "
		         "%s/crud && test -z \"$(ls -A %s | grep isc-restore)\"",
		         root, root, root, root);
		assert_int_equal(system(cmd), 0);
	}
	/* A file fetched through the engine (a file:// URL on stdin stands for the
	 * presigned GET), its size and multipart ETag checked, then swapped in. */
	{
		struct isc_manifest m = {0};
		char src[600], in[600];
		FILE *f;
		snprintf(src, sizeof(src), "%s/src.bin", root);
		snprintf(in, sizeof(in), "%s/urls", root);
		f = fopen(src, "w");
		assert_non_null(f);
		fputs("7\n", f);
		fclose(f);
		f = fopen(in, "w");
		fprintf(f, "file://%s\n", src);
		fclose(f);
		m.version = 1;
		/* MD5(MD5("7\n")) -1: S3's ETag of a one-part upload of these bytes */
		assert_int_equal(isc_manifest_add(&m, "checkpoints/step", 0, 2, "k",
		                                  "a819f872fc7e9fc241c5c1db99d30e93-1", 8u << 20),
		                 0);
		isc_buf_init(&b, 0);
		assert_int_equal(isc_launcher_restore_script(&m, root, 0, &b), 0);
		assert_int_equal(run_bash_in(isc_buf_cstr(&b), in), 0);
		snprintf(cmd, sizeof(cmd), "test \"$(cat %s/checkpoints/step)\" = 7", root);
		assert_int_equal(system(cmd), 0);
		/* With the manifest's mtime_ns, the restored file has that mtime to the
		 * nanosecond (find's %T@: the seconds, then 9 digits of ns and a 0). */
		m.entries[0].has_mtime = 1;
		m.entries[0].mtime_ns = 1600000000123456789LL;
		isc_buf_reset(&b);
		assert_int_equal(isc_launcher_restore_script(&m, root, 0, &b), 0);
		assert_int_equal(run_bash_in(isc_buf_cstr(&b), in), 0);
		{
			char mt[600];
			snprintf(
			    mt, sizeof(mt),
			    "test \"$(find %s/checkpoints/step -printf '%%T@' | cut -c1-20)\" = "
			    "1600000000.123456789",
			    root);
			assert_int_equal(system(mt), 0);
		}
		m.entries[0].has_mtime = 0;
		/* The same with an ETag the bytes do not have: refused, the folder kept. */
		isc_buf_reset(&b);
		snprintf(m.entries[0].etag, sizeof(m.entries[0].etag), "%s",
		         "b819f872fc7e9fc241c5c1db99d30e93-1");
		assert_int_equal(isc_launcher_restore_script(&m, root, 0, &b), 0);
		f = fopen(src, "w");
		fputs("8\n", f);
		fclose(f);
		assert_int_not_equal(run_bash_in(isc_buf_cstr(&b), in), 0);
		assert_int_equal(system(cmd), 0);
		isc_buf_cleanup(&b);
		isc_manifest_cleanup(&m);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_artifact_root),
	    cmocka_unit_test(test_part_sizes),
	    cmocka_unit_test(test_manifest_rules),
	    cmocka_unit_test(test_manifest_mtime),
	    cmocka_unit_test(test_sync_plan),
	    cmocka_unit_test(test_presign_vectors),
	    cmocka_unit_test(test_restore_script_refuses_crafted),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
