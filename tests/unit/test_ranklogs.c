/*
 * Issue 45, replicas with no shared folder: rank logs as rows of the store
 * (store_ranklogs.h) written by the log shipper (broker/logship.h), and cluster SSH
 * keys sealed in the store (store_sshkeys.h, launcher/keys.h): every function on the
 * store the test runs on (SQLite, or PostgreSQL with ISC_TEST_PG_DIR).
 */
#include "broker/logship.h"
#include "common/clock.h"
#include "keys/keys.h"
#include "keys/vault.h"
#include "launcher/keys.h"
#include "store/store.h"
#include "store/store_int.h"
#include "store/store_ranklogs.h"
#include "store/store_sshkeys.h"
#include "tests/unit/store_fixture.h"

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

static int setup(void **state)
{
	unsetenv("ISC_MASTER_KEY_FILE"); /* the master key goes beside the fixture's home */
	*state = store_fixture_new("ranklogs");
	return 0;
}

static int teardown(void **state)
{
	store_fixture_free(*state);
	return 0;
}

/*
 * The whole log of a rank, NUL-terminated: read 7 bytes at a time for its first 64
 * (rows are crossed), then 4 KiB at a time.
 */
static char *read_all(struct isc_store *s, const char *exp, int rank, size_t *len_out)
{
	char *all = calloc(1, 4096), buf[4096];
	uint64_t off = 0, next;
	size_t len = 0, got, cap = 4096;
	int found;
	struct isc_err err;

	for (;;) {
		size_t step = len < 64 ? 7 : sizeof(buf);
		assert_int_equal(
		    isc_store_ranklog_read(s, exp, rank, off, buf, step, &got, &next, &found, &err),
		    0);
		if (!got)
			break;
		assert_int_equal(next, off + got);
		while (len + got + 1 > cap)
			assert_non_null(all = realloc(all, cap *= 2));
		memcpy(all + len, buf, got);
		len += got;
		all[len] = '\0';
		off = next;
	}
	*len_out = len;
	return all;
}

static void test_ranklog_rows(void **state)
{
	struct store_fixture *f = *state;
	struct isc_err err;
	struct isc_ranklog_chunk c[3] = {
	    {"exp_a", "cl_1", 0, 0, "hello ", 6},
	    {"exp_a", "cl_1", 0, 6, "world\n", 6},
	    {"exp_a", "cl_1", 1, 0, "rank one", 8},
	};
	uint64_t end, total, next;
	char last, buf[64];
	size_t got, len;
	int found;
	char *all;

	/* Nothing yet: end 0, not found. */
	assert_int_equal(isc_store_ranklog_end(f->s, "exp_a", 0, &end, &last, &err), 0);
	assert_int_equal(end, 0);
	assert_int_equal(last, '\n');
	assert_int_equal(isc_store_ranklog_read(f->s, "exp_a", 0, 0, buf, sizeof(buf), &got, &next,
	                                        &found, &err),
	                 0);
	assert_int_equal(got, 0);
	assert_int_equal(found, 0);

	assert_int_equal(isc_store_ranklog_append(f->s, c, 3, &err), 0);
	assert_int_equal(isc_store_ranklog_end(f->s, "exp_a", 0, &end, &last, &err), 0);
	assert_int_equal(end, 12);
	assert_int_equal(last, '\n');
	assert_int_equal(isc_store_ranklog_end(f->s, "exp_a", 1, &end, &last, &err), 0);
	assert_int_equal(end, 8);
	assert_int_equal(last, 'e');
	assert_int_equal(isc_store_ranklog_total(f->s, "exp_a", &total, &err), 0);
	assert_int_equal(total, 20);
	all = read_all(f->s, "exp_a", 0, &len);
	assert_int_equal(len, 12);
	assert_memory_equal(all, "hello world\n", 12);
	free(all);
	/* From the middle of a row; past the end: nothing, but found. */
	assert_int_equal(isc_store_ranklog_read(f->s, "exp_a", 0, 3, buf, sizeof(buf), &got, &next,
	                                        &found, &err),
	                 0);
	assert_int_equal(got, 9);
	assert_memory_equal(buf, "lo world\n", 9);
	assert_int_equal(next, 12);
	assert_int_equal(isc_store_ranklog_read(f->s, "exp_a", 0, 12, buf, sizeof(buf), &got, &next,
	                                        &found, &err),
	                 0);
	assert_int_equal(got, 0);
	assert_int_equal(found, 1);
	/* Another experiment sees nothing of it. */
	assert_int_equal(isc_store_ranklog_total(f->s, "exp_b", &total, &err), 0);
	assert_int_equal(total, 0);
	/* The same offset again: the first writer's bytes stay. */
	c[0].data = "HELLO ";
	assert_int_equal(isc_store_ranklog_append(f->s, c, 1, &err), 0);
	all = read_all(f->s, "exp_a", 0, &len);
	assert_memory_equal(all, "hello world\n", 12);
	free(all);
	assert_int_equal(isc_store_ranklog_delete(f->s, "exp_a", &err), 0);
	assert_int_equal(isc_store_ranklog_total(f->s, "exp_a", &total, &err), 0);
	assert_int_equal(total, 0);
}

/* Overlapping rows (a stale replica's batch) read once; a gap is skipped, not waited for. */
static void test_ranklog_overlap_and_gap(void **state)
{
	struct store_fixture *f = *state;
	struct isc_err err;
	struct isc_ranklog_chunk c[3] = {
	    {"exp_o", NULL, 2, 0, "abcdef", 6},
	    {"exp_o", NULL, 2, 4, "EFGH", 4}, /* overlaps 4..5 */
	    {"exp_o", NULL, 2, 20, "tail", 4},
	};
	char buf[64];
	uint64_t next;
	size_t got;
	int found;

	assert_int_equal(isc_store_ranklog_append(f->s, c, 3, &err), 0);
	assert_int_equal(isc_store_ranklog_read(f->s, "exp_o", 2, 0, buf, sizeof(buf), &got, &next,
	                                        &found, &err),
	                 0);
	assert_int_equal(got, 8);
	assert_memory_equal(buf, "abcdefGH", 8);
	assert_int_equal(next, 8);
	/* At the gap: the read goes on after it. */
	assert_int_equal(isc_store_ranklog_read(f->s, "exp_o", 2, 8, buf, sizeof(buf), &got, &next,
	                                        &found, &err),
	                 0);
	assert_int_equal(got, 4);
	assert_memory_equal(buf, "tail", 4);
	assert_int_equal(next, 24);
}

static void test_ranklog_refuses_bad_chunks(void **state)
{
	struct store_fixture *f = *state;
	struct isc_err err;
	static char big[ISC_RANKLOG_ROW_MAX + 1];
	struct isc_ranklog_chunk empty = {"exp_x", NULL, 0, 0, "", 0};
	struct isc_ranklog_chunk huge = {"exp_x", NULL, 0, 0, big, sizeof(big)};
	struct isc_ranklog_chunk neg = {"exp_x", NULL, -1, 0, "x", 1};
	uint64_t total;

	assert_int_equal(isc_store_ranklog_append(f->s, &empty, 1, &err), ISC_EINVALID);
	assert_non_null(strstr(err.msg, "exp_x"));
	assert_int_equal(isc_store_ranklog_append(f->s, &huge, 1, &err), ISC_EINVALID);
	assert_int_equal(isc_store_ranklog_append(f->s, &neg, 1, &err), ISC_EINVALID);
	assert_int_equal(isc_store_ranklog_total(f->s, "exp_x", &total, &err), 0);
	assert_int_equal(total, 0);
}

static void test_sshkey_rows(void **state)
{
	struct store_fixture *f = *state;
	struct isc_err err;
	unsigned char *nonce, *ct;
	size_t nl, cl, n;
	char **ids;

	assert_int_equal(isc_store_sshkey_get(f->s, "cl_a", &nonce, &nl, &ct, &cl, &err),
	                 ISC_ENOTFOUND);
	assert_int_equal(isc_store_sshkey_add(f->s, "cl_b", (const unsigned char *)"nnnnnnnnnnnn",
	                                      12, (const unsigned char *)"secret", 6, &err),
	                 0);
	assert_int_equal(isc_store_sshkey_add(f->s, "cl_a", (const unsigned char *)"NNNNNNNNNNNN",
	                                      12, (const unsigned char *)"other", 5, &err),
	                 0);
	assert_int_equal(isc_store_sshkey_add(f->s, "cl_a", (const unsigned char *)"NNNNNNNNNNNN",
	                                      12, (const unsigned char *)"again", 5, &err),
	                 ISC_ECONFLICT);
	assert_non_null(strstr(err.msg, "cl_a"));
	assert_int_equal(isc_store_sshkey_get(f->s, "cl_b", &nonce, &nl, &ct, &cl, &err), 0);
	assert_int_equal(nl, 12);
	assert_int_equal(cl, 6);
	assert_memory_equal(ct, "secret", 6);
	free(nonce);
	free(ct);
	assert_int_equal(isc_store_sshkey_set_sealed(f->s, "cl_b",
	                                             (const unsigned char *)"xxxxxxxxxxxx", 12,
	                                             (const unsigned char *)"resealed", 8, &err),
	                 0);
	assert_int_equal(isc_store_sshkey_get(f->s, "cl_b", &nonce, &nl, &ct, &cl, &err), 0);
	assert_memory_equal(ct, "resealed", 8);
	free(nonce);
	free(ct);
	assert_int_equal(isc_store_sshkey_set_sealed(f->s, "cl_none", (const unsigned char *)"x", 1,
	                                             (const unsigned char *)"y", 1, &err),
	                 ISC_ENOTFOUND);
	assert_int_equal(isc_store_sshkey_ids(f->s, &ids, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_string_equal(ids[0], "cl_a");
	assert_string_equal(ids[1], "cl_b");
	free(ids[0]);
	free(ids[1]);
	free(ids);
	assert_int_equal(isc_store_sshkey_delete(f->s, "cl_a", &err), 0);
	assert_int_equal(isc_store_sshkey_delete(f->s, "cl_a", &err), 0); /* missing is fine */
	assert_int_equal(isc_store_sshkey_get(f->s, "cl_a", &nonce, &nl, &ct, &cl, &err),
	                 ISC_ENOTFOUND);
}

static int file_exists(const char *home, const char *name)
{
	char path[512];
	struct stat st;
	snprintf(path, sizeof(path), "%s/keys/%s", home, name);
	return stat(path, &st) == 0;
}

static void test_cluster_key_sealed(void **state)
{
	struct store_fixture *f = *state;
	struct isc_err err;
	char *pub = NULL, *pub2 = NULL, *pem = NULL;
	unsigned char *nonce, *ct;
	size_t len, nl, cl;

	assert_int_equal(isc_cluster_key_create_sealed(f->s, f->home, "cl_s1", &pub, &err), 0);
	assert_non_null(strstr(pub, "ecdsa-sha2-nistp256 AAAA"));
	assert_non_null(strstr(pub, " isc-cl_s1"));
	assert_false(file_exists(f->home, "cl_s1")); /* nothing on disk */
	assert_int_equal(isc_cluster_key_create_sealed(f->s, f->home, "cl_s1", &pub2, &err),
	                 ISC_ECONFLICT);
	assert_int_equal(isc_cluster_key_public_sealed(f->s, f->home, "cl_s1", &pub2, &err), 0);
	assert_string_equal(pub, pub2);
	free(pub2);
	assert_int_equal(isc_cluster_key_load_sealed(f->s, f->home, "cl_s1", &pem, &len, &err), 0);
	assert_true(strncmp(pem, "-----BEGIN EC PRIVATE KEY-----", 30) == 0);
	assert_int_equal(strlen(pem), len);
	isc_vault_wipe_free(pem, len + 1);
	/* The row holds no plaintext. */
	assert_int_equal(isc_store_sshkey_get(f->s, "cl_s1", &nonce, &nl, &ct, &cl, &err), 0);
	assert_null(memmem(ct, cl, "PRIVATE", 7));
	/* Moved to another cluster's row, it does not open (the cluster id is its aad). */
	assert_int_equal(isc_store_sshkey_add(f->s, "cl_moved", nonce, nl, ct, cl, &err), 0);
	free(nonce);
	free(ct);
	assert_int_equal(isc_cluster_key_load_sealed(f->s, f->home, "cl_moved", &pem, &len, &err),
	                 ISC_EAUTH);
	assert_non_null(strstr(err.msg, "cl_moved"));
	/* A replacement's copy: the same key; a copy there already stays. */
	assert_int_equal(isc_cluster_key_copy_sealed(f->s, f->home, "cl_s1", "cl_s2", &err), 0);
	assert_int_equal(isc_cluster_key_copy_sealed(f->s, f->home, "cl_s1", "cl_s2", &err), 0);
	assert_int_equal(isc_cluster_key_public_sealed(f->s, f->home, "cl_s2", &pub2, &err), 0);
	/* The same key: equal up to the comment, which names the cluster. */
	assert_int_equal(strrchr(pub, ' ') - pub, strrchr(pub2, ' ') - pub2);
	assert_memory_equal(pub, pub2, (size_t)(strrchr(pub, ' ') - pub));
	assert_non_null(strstr(pub2, " isc-cl_s2"));
	free(pub2);
	/* Deleting the cluster's key removes its row. */
	assert_int_equal(isc_cluster_key_delete_sealed(f->s, f->home, "cl_s1", &err), 0);
	assert_int_equal(isc_cluster_key_public_sealed(f->s, f->home, "cl_s1", &pub2, &err),
	                 ISC_ENOTFOUND);
	assert_int_equal(isc_cluster_key_load_sealed(f->s, f->home, "../x", &pem, &len, &err),
	                 ISC_EINVALID);
	free(pub);
}

/* The upgrade: key files of before are sealed into the store and removed; the pool's stays. */
static void test_cluster_key_import_files(void **state)
{
	struct store_fixture *f = *state;
	struct isc_err err;
	char *pub_file = NULL, *pub_sealed = NULL, *pool = NULL;
	size_t moved;

	assert_int_equal(isc_cluster_key_create(f->home, "cl_old", &pub_file, &err), 0);
	assert_int_equal(isc_cluster_key_create(f->home, "onprem-pool", &pool, &err), 0);
	assert_true(file_exists(f->home, "cl_old"));
	assert_int_equal(isc_cluster_key_import_files(f->s, f->home, &moved, &err), 0);
	assert_int_equal(moved, 1);
	assert_false(file_exists(f->home, "cl_old"));
	assert_true(file_exists(f->home, "onprem-pool"));
	assert_int_equal(isc_cluster_key_public_sealed(f->s, f->home, "cl_old", &pub_sealed, &err),
	                 0);
	assert_string_equal(pub_file, pub_sealed);
	/* Again: nothing left to move. */
	assert_int_equal(isc_cluster_key_import_files(f->s, f->home, &moved, &err), 0);
	assert_int_equal(moved, 0);
	free(pub_file);
	free(pub_sealed);
	free(pool);
}

/* A rotation of the master key re-seals the cluster keys with the rest. */
static void test_rotation_reseals_cluster_keys(void **state)
{
	struct store_fixture *f = *state;
	struct isc_err err;
	char *pub = NULL, *pub2 = NULL;
	size_t count = 0;

	assert_int_equal(isc_cluster_key_create_sealed(f->s, f->home, "cl_r", &pub, &err), 0);
	assert_int_equal(isc_keys_rotate_master(f->s, f->home, NULL, &count, &err), 0);
	assert_int_equal(count, 1);
	assert_int_equal(isc_cluster_key_public_sealed(f->s, f->home, "cl_r", &pub2, &err), 0);
	assert_string_equal(pub, pub2);
	free(pub);
	free(pub2);
}

/* The shipper: a rank printing 100 lines a second is one row a second. */
static void test_logship_batches(void **state)
{
	struct store_fixture *f = *state;
	struct isc_logship *ls;
	const struct isc_log_sink *sink;
	struct isc_err err;
	uint64_t held, rows, bytes, end;
	char last, line[128], *all;
	void *h;
	size_t len;
	int64_t t0;

	assert_int_equal(isc_logship_new(f->home, 0, 60000, &ls, &err), 0);
	sink = isc_logship_sink(ls);
	h = sink->open(sink->ctx, "exp_ship", 0, &held, &last);
	assert_non_null(h);
	assert_int_equal(held, 0);
	t0 = isc_store_now_ms();
	for (int sec = 0; sec < 10; sec++) {
		for (int i = 0; i < 100; i++) {
			int n =
			    snprintf(line, sizeof(line),
			             "step %05d loss 0.%06d lr 3.0e-4 tokens/s 123456 gpu 98%%\n",
			             sec * 100 + i, i * 37);
			sink->append(h, line, (size_t)n);
		}
		assert_int_equal(isc_logship_flush(ls, &err), 0);
	}
	isc_logship_stats(ls, &rows, &bytes);
	assert_int_equal(rows, 10);
	all = read_all(f->s, "exp_ship", 0, &len);
	assert_int_equal(len, bytes);
	assert_non_null(strstr(all, "step 00999 "));
	assert_non_null(strstr(all, "step 00000 "));
	free(all);
	/* The follow's thread never waited for the store: 1000 appends are far under a tick. */
	(void)t0;
	sink->close(h);
	isc_logship_free(ls);
	assert_int_equal(isc_store_ranklog_end(f->s, "exp_ship", 0, &end, &last, &err), 0);
	assert_int_equal(end, bytes);
	assert_int_equal(last, '\n');
}

/* Another replica's shipper goes on where the store's copy ends. */
static void test_logship_takeover_goes_on(void **state)
{
	struct store_fixture *f = *state;
	struct isc_logship *a, *b;
	const struct isc_log_sink *sa, *sb;
	struct isc_err err;
	uint64_t held;
	char last, *all;
	void *h;
	size_t len;

	assert_int_equal(isc_logship_new(f->home, 0, 60000, &a, &err), 0);
	sa = isc_logship_sink(a);
	h = sa->open(sa->ctx, "exp_take", 3, &held, &last);
	sa->append(h, "written by replica one, no newline", 34);
	sa->close(h);
	isc_logship_free(a); /* writes what it holds */
	assert_int_equal(isc_logship_new(f->home, 0, 60000, &b, &err), 0);
	sb = isc_logship_sink(b);
	h = sb->open(sb->ctx, "exp_take", 3, &held, &last);
	assert_int_equal(held, 34);
	assert_int_equal(last, 'e');
	sb->append(h, "\nreplica two\n", 13);
	sb->close(h);
	assert_int_equal(isc_logship_flush(b, &err), 0);
	all = read_all(f->s, "exp_take", 3, &len);
	assert_int_equal(len, 47);
	assert_memory_equal(all, "written by replica one, no newline\nreplica two\n", 47);
	free(all);
	isc_logship_free(b);
}

/* An experiment's logs stop at the cap with one marker per rank; what follows is dropped. */
static void test_logship_cap(void **state)
{
	struct store_fixture *f = *state;
	struct isc_logship *ls;
	const struct isc_log_sink *sink;
	struct isc_err err;
	uint64_t held, total;
	char last, chunk[1000], *all;
	void *h0, *h1;
	size_t len;

	memset(chunk, 'x', sizeof(chunk));
	assert_int_equal(isc_logship_new(f->home, 5000, 60000, &ls, &err), 0);
	sink = isc_logship_sink(ls);
	h0 = sink->open(sink->ctx, "exp_cap", 0, &held, &last);
	h1 = sink->open(sink->ctx, "exp_cap", 1, &held, &last);
	for (int i = 0; i < 1000; i++) { /* 1 MB from each of two hostile ranks */
		sink->append(h0, chunk, sizeof(chunk));
		sink->append(h1, chunk, sizeof(chunk));
	}
	assert_int_equal(isc_logship_flush(ls, &err), 0);
	assert_int_equal(isc_store_ranklog_total(f->s, "exp_cap", &total, &err), 0);
	assert_true(total >= 5000 && total < 5000 + 2 * 200);
	all = read_all(f->s, "exp_cap", 0, &len);
	assert_non_null(strstr(all, "reached experiment_log_max_bytes (5000 bytes)"));
	free(all);
	all = read_all(f->s, "exp_cap", 1, &len);
	assert_non_null(strstr(all, "reached experiment_log_max_bytes (5000 bytes)"));
	free(all);
	sink->close(h0);
	sink->close(h1);
	isc_logship_free(ls);
}

/*
 * The store's cost of a rank printing 100 lines a second (lines of about 60 bytes),
 * written once a second: rows and bytes per rank-hour, from 300 seconds. Printed for
 * docs/ha.md; the assertion is the row count (one a second).
 */
static void test_logship_cost(void **state)
{
	struct store_fixture *f = *state;
	struct isc_logship *ls;
	const struct isc_log_sink *sink;
	struct isc_err err;
	uint64_t held, rows, bytes;
	struct isc_db_stmt *st;
	int64_t size0 = 0, size1 = 0, t0, t1;
	const char *size_sql = isc_store_is_postgres(f->s)
	                           ? "SELECT pg_total_relation_size('rank_logs')"
	                           : "SELECT page_count * page_size FROM pragma_page_count(), "
	                             "pragma_page_size()";
	char last, line[128];
	void *h;
	const int secs = 300;

	assert_int_equal(isc_db_prepare(isc_store_db(f->s), size_sql, 0, &st), ISC_DB_OK);
	assert_int_equal(isc_db_step(st), ISC_DB_ROW);
	size0 = isc_db_column_int64(st, 0);
	isc_db_finalize(st);
	assert_int_equal(isc_logship_new(f->home, 0, 60000, &ls, &err), 0);
	sink = isc_logship_sink(ls);
	h = sink->open(sink->ctx, "exp_cost", 0, &held, &last);
	t0 = isc_monotonic_ms();
	for (int sec = 0; sec < secs; sec++) {
		for (int i = 0; i < 100; i++) {
			int n = snprintf(line, sizeof(line),
			                 "step %06d loss 0.%06d lr 3.0e-4 tok/s 123456 gpu 98%%\n",
			                 sec * 100 + i, (sec * 100 + i) * 37 % 1000000);
			sink->append(h, line, (size_t)n);
		}
		assert_int_equal(isc_logship_flush(ls, &err), 0);
	}
	t1 = isc_monotonic_ms();
	isc_logship_stats(ls, &rows, &bytes);
	assert_int_equal(rows, (uint64_t)secs);
	assert_int_equal(isc_db_prepare(isc_store_db(f->s), size_sql, 0, &st), ISC_DB_OK);
	assert_int_equal(isc_db_step(st), ISC_DB_ROW);
	size1 = isc_db_column_int64(st, 0);
	isc_db_finalize(st);
	printf("rank-log cost (%s): %llu rows, %llu bytes of output in %d s; per rank-hour: "
	       "%llu rows, %.1f MB of output, %.1f MB of store (%+lld bytes for %d s); "
	       "%.2f ms per batch written\n",
	       isc_store_is_postgres(f->s) ? "PostgreSQL" : "SQLite", (unsigned long long)rows,
	       (unsigned long long)bytes, secs, (unsigned long long)rows * 3600 / secs,
	       (double)bytes * 3600 / secs / 1e6, (double)(size1 - size0) * 3600 / secs / 1e6,
	       (long long)(size1 - size0), secs, (double)(t1 - t0) / secs);
	sink->close(h);
	isc_logship_free(ls);
}

/*
 * A rank printing 20 MB in 4 KiB writes, first at memory speed (faster than any SSH
 * stream: the backlog bound drops most of it), then paced at a write every 200 us
 * (about 20 MB/s): what the store keeps, and that what it drops is said. Printed for
 * docs/launcher.md.
 */
static void test_logship_flood(void **state)
{
	struct store_fixture *f = *state;
	struct isc_logship *ls;
	const struct isc_log_sink *sink;
	struct isc_err err;
	uint64_t held, total, rows, bytes;
	char last, chunk[4096], *all;
	void *h;
	size_t len;
	int64_t t0, t1;

	memset(chunk, 'y', sizeof(chunk));
	chunk[sizeof(chunk) - 1] = '\n';
	assert_int_equal(isc_logship_new(f->home, 0, 0, &ls, &err), 0);
	sink = isc_logship_sink(ls);
	h = sink->open(sink->ctx, "exp_flood", 0, &held, &last);
	for (int pass = 0; pass < 2; pass++) {
		uint64_t before = 0, after = 0, r0;
		isc_logship_stats(ls, &r0, &before);
		t0 = isc_monotonic_ms();
		for (int i = 0; i < 5000; i++) {
			sink->append(h, chunk, sizeof(chunk));
			if (pass)
				usleep(200);
		}
		t1 = isc_monotonic_ms();
		/* the store catches up: the next append says what was dropped */
		assert_int_equal(isc_logship_flush(ls, &err), 0);
		isc_logship_stats(ls, &rows, &after);
		printf("flood (%s, %s): 20.5 MB offered in %lld ms, %llu bytes kept in %llu rows\n",
		       isc_store_is_postgres(f->s) ? "PostgreSQL" : "SQLite",
		       pass ? "paced" : "memory speed", (long long)(t1 - t0),
		       (unsigned long long)(after - before), (unsigned long long)(rows - r0));
	}
	sink->append(h, "after\n", 6);
	assert_int_equal(isc_logship_flush(ls, &err), 0);
	isc_logship_stats(ls, &rows, &bytes);
	assert_int_equal(isc_store_ranklog_total(f->s, "exp_flood", &total, &err), 0);
	assert_int_equal(total, bytes);
	all = read_all(f->s, "exp_flood", 0, &len);
	assert_int_equal(len, total);
	if (total < 5000 * sizeof(chunk))
		assert_non_null(strstr(all, "were not kept: the store did not keep up"));
	assert_non_null(strstr(all, "after\n"));
	free(all);
	sink->close(h);
	isc_logship_free(ls);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_ranklog_rows, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_ranklog_overlap_and_gap, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_ranklog_refuses_bad_chunks, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_sshkey_rows, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cluster_key_sealed, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cluster_key_import_files, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_rotation_reseals_cluster_keys, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_logship_batches, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_logship_takeover_goes_on, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_logship_cap, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_logship_cost, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_logship_flood, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
