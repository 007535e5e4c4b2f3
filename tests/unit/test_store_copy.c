/*
 * isc store copy (store/store_copy.c): a store with rows in every table copied
 * into a SQLite file and compared (ids, blobs with NUL bytes, a token's parent,
 * the ledger's totals rebuilt by the trigger, sequences past the ids), and the
 * refusals: a destination with rows, iscd's lock held, a source of another
 * schema version, a live replica (PostgreSQL); a copy that fails part way or
 * at its verification leaves the destination empty, or no file it made. With
 * ISC_TEST_PG_DIR the source is a PostgreSQL database (store_fixture.c), so
 * the copy goes PostgreSQL to SQLite, and test_copy_into_postgres copies it
 * into a second PostgreSQL database.
 */
#include "store/store_copy.h"
#include "store/store_int.h"
#include "store/store_replicas.h"
#include "tests/unit/store_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* Bytes with NULs inside, as a sealed key's nonce and ciphertext are. */
static const unsigned char NONCE[12] = {0, 1, 2, 0, 0, 255, 7, 0, 9, 10, 0, 12};
static const unsigned char CIPHER[9] = {'a', 0, 'b', 0, 0, 0xfe, 'c', 0, 0};

/* Every table gets rows; ids are explicit where a sequence numbers them. */
static const char FILL_SQL[] =
    "INSERT INTO orgs (id, name, created_at_ms) VALUES (1, 'acme', 1000), (7, 'globex', 1001);"
    "INSERT INTO projects (id, org_id, name, created_at_ms, budget_micros) VALUES "
    "  ('prj_a', 1, 'vision', 1002, 5000000), ('prj_b', 7, 'speech', 1003, NULL);"
    "INSERT INTO experiments (id, project_id, org_id, name, compute_mode, gpus, spec_json, "
    "  status, created_at_ms, updated_at_ms, owner) VALUES "
    "  ('exp_1', 'prj_a', 1, 'resnet', 'burst', 8, '{\"a\":\"\\u00e9\"}', 'running', 1004, 1005, "
    "'alice'),"
    "  ('exp_2', 'prj_b', 7, 'whisper', 'cycle', 2, '{}', 'queued', 1006, 1006, '');"
    "INSERT INTO events (id, experiment_id, at_ms, kind, message) VALUES "
    "  (11, 'exp_1', 1007, 'state', 'running: it''s up'), (12, NULL, 1008, 'note', 'none');"
    "INSERT INTO shapes (id, display_id, provider, region, instance_type, spot, gpu_type, "
    "  gpus_per_node, gpu_mem_mib, vcpus, mem_mib, price_micros, zones, price_date, "
    "  updated_at_ms) VALUES ('aws:p5', 'AWS:p5', 'aws', 'us-east-1', 'p5.48xlarge', 0, "
    "  'H100', 8, 655360, 192, 2097152, 98320000, 'a,b', '2026-11-01', 1009);"
    "INSERT INTO risk_facts (provider, region, zone, instance_type, market, source, target, "
    "  value, value2, detail, fetched_ms) VALUES ('aws', 'us-east-1', '', 'p5.48xlarge', "
    "  'spot', 'spot-advisor', 0, 100, 4, '>20%', 1009);"
    "INSERT INTO price_refreshes (source, tried_at_ms, ok_at_ms, shapes, error) VALUES "
    "  ('gcp-billing-catalog', 1010, 1009, 12, 'HTTP 503');"
    "INSERT INTO clusters (id, experiment_id, shape_id, provider, account, region, nnodes, "
    "  nproc, cycle, price_micros, state, created_at_ms, closed_at_ms) VALUES "
    "  ('cl_1', 'exp_1', 'aws:p5', 'aws', 'default', 'us-east-1', 2, 8, 0, 98320000, 'running', "
    "   1010, NULL);"
    "INSERT INTO intents (token, cluster_id, shape_id, zone, count, state, created_at_ms) "
    "  VALUES ('int_1', 'cl_1', 'aws:p5', 'a', 2, 'launched', 1011);"
    "INSERT INTO nodes (id, cluster_id, rank, instance_id, state, price_micros) VALUES "
    "  (21, 'cl_1', 0, 'i-0', 'running', 98320000), (22, 'cl_1', 1, 'i-1', 'running', 98320000);"
    "INSERT INTO host_keys (target, key_type, sha256, first_seen_ms) VALUES "
    "  ('i-0', 'ssh-ed25519', 'abc', 1012);"
    "INSERT INTO ledger (id, at_ms, org_id, project_id, experiment_id, kind, amount_micros, "
    "  billing, node_instance_id, period_start_ms, period_end_ms, note) VALUES "
    "  (31, 1013, 1, NULL, NULL, 'grant', 10000000, 'credits', NULL, NULL, NULL, 'welcome'),"
    "  (32, 1014, 1, 'prj_a', 'exp_1', 'reserve', 2000000, 'credits', NULL, NULL, NULL, ''),"
    "  (33, 1015, 1, 'prj_a', 'exp_1', 'charge', 500000, 'credits', 'i-0', 0, 60000, ''),"
    "  (34, 1016, 1, 'prj_a', 'exp_1', 'release', 1500000, 'credits', NULL, NULL, NULL, ''),"
    "  (35, 1017, 7, 'prj_b', 'exp_2', 'charge', 250000, 'byo', 'i-9', 0, 60000, ''),"
    "  (36, 1018, 1, NULL, NULL, 'refund', 100000, 'credits', NULL, NULL, NULL, 'sorry'),"
    "  (37, 1019, 7, NULL, NULL, 'adjustment', -5, 'credits', NULL, NULL, NULL, '');"
    "INSERT INTO pool_nodes (id, host, port, \"user\", gpus, added_ms) VALUES "
    "  (3, '127.0.0.2', 22, 'isc', 4, 1020), (9, '127.0.0.3', 22, 'isc', 4, 1021);"
    /* A removed node: on SQLite its id stays used (AUTOINCREMENT), and so in the copy. */
    "DELETE FROM pool_nodes WHERE id = 9;"
    "INSERT INTO queue_state (experiment_id, updated_ms) VALUES ('exp_2', 1022);"
    "INSERT INTO rank_exits (cluster_id, rank, code, at_ms) VALUES ('cl_1', 0, 0, 1023);"
    "INSERT INTO users (id, name, created_at_ms) VALUES (41, 'alice', 1024);"
    "INSERT INTO memberships (user_id, org_id, role, created_at_ms) VALUES "
    "  (41, 1, 'admin', 1025);"
    /* tok_a was made with tok_b, which comes after it in key order. */
    "INSERT INTO api_tokens (id, user_id, hash, created_at_ms, parent_id) VALUES "
    "  ('tok_b', 41, 'h2', 1026, NULL);"
    "INSERT INTO api_tokens (id, user_id, hash, created_at_ms, parent_id) VALUES "
    "  ('tok_a', 41, 'h1', 1027, 'tok_b');"
    "INSERT INTO audit (id, at_ms, actor, address, org_id, action, target, status) VALUES "
    "  (51, 1028, 'alice', '127.0.0.1', 1, 'experiment.create', 'exp_1', 201);"
    "INSERT INTO burst_waits (experiment_id, why, at_ms) VALUES ('exp_2', 3, 1029);"
    "INSERT INTO shape_exclusions (experiment_id, shape_id, at_ms) VALUES "
    "  ('exp_1', 'aws:p4', 1030);"
    "INSERT INTO sync_clocks (cluster_id, checkpoints_at_ms, lossy_at_ms) VALUES "
    "  ('cl_1', 1031, 1032);"
    /* A replica that stopped long ago (not live). */
    "INSERT INTO replicas (id, host, pid, started_ms, heartbeat_ms, boot_id, broker_id) VALUES "
    "  ('rep_old', 'host-a', 99, 1, 2, 'boot-a', 'isc-copy');"
    "INSERT INTO leases (experiment_id, replica_id, token, expires_ms) VALUES "
    "  ('exp_1', 'rep_old', 'tk', 3);"
    "INSERT INTO store_identity (id, broker_id, set_by, set_ms) VALUES "
    "  (1, 'isc-copy', 'rep_old', 4);"
    "INSERT INTO artifact_manifests (experiment_id, version, org_id, total_bytes, "
    "  manifest_json, created_at_ms) VALUES ('exp_1', 2, 1, 5, '{\"version\":2}', 1030);";

struct fixture {
	struct store_fixture st;
	char *dest;     /* DIR/copy.db */
	char *dest_url; /* sqlite:DIR/copy.db */
};

static void exec_ok(struct isc_store *s, const char *sql)
{
	if (isc_db_exec(isc_store_db(s), sql) != ISC_DB_OK)
		fail_msg("%s: %s", sql, isc_db_errmsg(isc_store_db(s)));
}

static void insert_blobs(struct isc_store *s)
{
	static const char *const sql[] = {
	    "INSERT INTO cloud_keys (id, org_id, provider, name, nonce, ciphertext, created_at_ms) "
	    "VALUES ('key_1', 1, 'aws', 'main', ?, ?, 1033)",
	    "INSERT INTO cloud_key_master (id, nonce, ciphertext, created_at_ms) "
	    "VALUES (1, ?, ?, 1034)",
	    "INSERT INTO datasets (id, org_id, name, uri, bucket, key, is_folder, etag, "
	    "version_id, "
	    "credentials, size_bytes, volume_bytes, cached_bytes, state, reason, copy_name, "
	    "manifest_json, created_at_ms, updated_at_ms, credentials_nonce, "
	    "credentials_ciphertext) VALUES ('ds_1', 1, 'imagenet', 's3://b/k', 'b', 'k', 0, 'e', "
	    "'', 'sealed:ab', 10, 20, 0, 'created', '', '@1/imagenet', NULL, 1035, 1036, ?, ?)",
	    /* issue 45: a cluster's sealed SSH key, and a rank log's row (nonce as its data) */
	    "INSERT INTO cluster_ssh_keys (cluster_id, nonce, ciphertext, created_at_ms) "
	    "VALUES ('cl_1', ?, ?, 1037)",
	    "INSERT INTO rank_logs (experiment_id, rank, off, len, cluster_id, data, "
	    "created_at_ms) VALUES ('exp_1', 0, 0, 12, 'cl_1', ?, 1038)",
	};
	for (size_t i = 0; i < sizeof(sql) / sizeof(sql[0]); i++) {
		struct isc_db_stmt *st;
		assert_int_equal(isc_db_prepare(isc_store_db(s), sql[i], 0, &st), ISC_DB_OK);
		isc_db_bind_blob(st, 1, NONCE, sizeof(NONCE), ISC_DB_STATIC);
		if (isc_db_bind_parameter_count(st) > 1)
			isc_db_bind_blob(st, 2, CIPHER, sizeof(CIPHER), ISC_DB_STATIC);
		if (isc_db_step(st) != ISC_DB_DONE)
			fail_msg("%s: %s", sql[i], isc_db_errmsg(isc_store_db(s)));
		isc_db_finalize(st);
	}
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	store_fixture_init(&f->st, "store-copy");
	assert_int_not_equal(asprintf(&f->dest, "%s/copy.db", f->st.dir), -1);
	assert_int_not_equal(asprintf(&f->dest_url, "sqlite:%s", f->dest), -1);
	exec_ok(f->st.s, FILL_SQL);
	insert_blobs(f->st.s);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	store_fixture_cleanup(&f->st);
	free(f->dest);
	free(f->dest_url);
	free(f);
	return 0;
}

/* The source's URL: the fixture's (ISC_STORE_URL under ISC_TEST_PG_DIR) or its home's SQLite. */
static struct isc_store_copy_options options(const struct fixture *f)
{
	struct isc_store_copy_options o = {
	    .home = f->st.home, .from_url = NULL, .to_url = f->dest_url, .replica_live_ms = 8000};
	return o;
}

static int64_t count(struct isc_store *s, const char *sql)
{
	struct isc_db_stmt *st;
	int64_t n = -1;
	assert_int_equal(isc_db_prepare(isc_store_db(s), sql, 0, &st), ISC_DB_OK);
	if (isc_db_step(st) == ISC_DB_ROW)
		n = isc_db_column_int64(st, 0);
	isc_db_finalize(st);
	return n;
}

static struct isc_store *open_dest(const struct fixture *f)
{
	struct isc_store *d = NULL;
	struct isc_err err;
	if (isc_store_open_url(f->st.home, f->dest_url, 0, &d, &err))
		fail_msg("opening the copy: %s", err.msg);
	return d;
}

/* Every table of the destination has no row (but the three a new store starts with a row
 * in: its schema's version, its auth version (migration 23) and its risk version (30)). */
static void assert_dest_empty(const struct fixture *f)
{
	struct isc_store *d = open_dest(f);
	struct isc_db_stmt *st;
	assert_int_equal(isc_db_prepare(isc_store_db(d),
	                                "SELECT name FROM sqlite_master WHERE type = 'table' AND "
	                                "name NOT LIKE 'sqlite%' AND name != 'schema_version' AND "
	                                "name != 'auth_version' AND name != 'risk_version'",
	                                0, &st),
	                 ISC_DB_OK);
	while (isc_db_step(st) == ISC_DB_ROW) {
		char sql[160];
		snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM \"%s\"",
		         (const char *)isc_db_column_text(st, 0));
		if (count(d, sql) != 0)
			fail_msg("table %s of the destination has rows", isc_db_column_text(st, 0));
	}
	isc_db_finalize(st);
	isc_store_free(d);
}

static void assert_blob(struct isc_store *d, const char *sql)
{
	struct isc_db_stmt *st;
	assert_int_equal(isc_db_prepare(isc_store_db(d), sql, 0, &st), ISC_DB_OK);
	assert_int_equal(isc_db_step(st), ISC_DB_ROW);
	assert_int_equal(isc_db_column_type(st, 0), ISC_DB_BLOB);
	assert_int_equal(isc_db_column_bytes(st, 0), sizeof(NONCE));
	assert_memory_equal(isc_db_column_blob(st, 0), NONCE, sizeof(NONCE));
	assert_int_equal(isc_db_column_bytes(st, 1), sizeof(CIPHER));
	assert_memory_equal(isc_db_column_blob(st, 1), CIPHER, sizeof(CIPHER));
	isc_db_finalize(st);
}

static void test_copy_every_table(void **state)
{
	struct fixture *f = *state;
	struct isc_store_copy_options o = options(f);
	struct isc_store_copy_report r;
	struct isc_store *d;
	struct isc_db_stmt *st;
	struct isc_err err;
	int64_t id, ledger_sum = 0;

	if (isc_store_copy(&o, &r, &err))
		fail_msg("copy: %s", err.msg);
	assert_int_equal(r.schema_version, isc_store_latest_version());
	assert_true(r.n_tables >= 26);
	for (size_t i = 0; i < r.n_tables; i++) {
		char sql[160];
		if (r.tables[i].rows <= 0)
			fail_msg("table %s: no rows copied (FILL_SQL should fill every table)",
			         r.tables[i].name);
		snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM \"%s\"", r.tables[i].name);
		assert_int_equal(r.tables[i].rows, count(f->st.s, sql));
		assert_int_equal(r.tables[i].rebuilt,
		                 strcmp(r.tables[i].name, "ledger_totals") == 0);
	}
	/* Foreign-key order: orgs before projects before experiments before clusters. */
	{
		size_t at[4] = {0};
		const char *names[4] = {"orgs", "projects", "experiments", "clusters"};
		for (size_t i = 0; i < r.n_tables; i++)
			for (size_t k = 0; k < 4; k++)
				if (!strcmp(r.tables[i].name, names[k]))
					at[k] = i;
		assert_true(at[0] < at[1] && at[1] < at[2] && at[2] < at[3]);
	}
	/* The ledger: 7 kind/billing groups; their sums add up to the rows'. */
	assert_int_equal(r.n_ledger, 7);
	for (size_t i = 0; i < r.n_ledger; i++)
		ledger_sum += r.ledger[i].sum_micros;
	assert_int_equal(ledger_sum, 10000000 + 2000000 + 500000 + 1500000 + 250000 + 100000 - 5);
	/* org 1, org 7, prj_a, prj_b, exp_1, exp_2 */
	assert_int_equal(r.ledger_totals_rows, 6);
	isc_store_copy_report_cleanup(&r);

	d = open_dest(f);
	assert_false(isc_store_is_postgres(d));
	/* Ids kept, text as it was, the token's parent set after both rows were in. */
	assert_int_equal(count(d, "SELECT id FROM orgs WHERE name = 'globex'"), 7);
	assert_int_equal(count(d, "SELECT COUNT(*) FROM events WHERE id = 11 AND message = "
	                          "'running: it''s up'"),
	                 1);
	assert_int_equal(count(d, "SELECT COUNT(*) FROM experiments WHERE spec_json = "
	                          "'{\"a\":\"\\u00e9\"}'"),
	                 1);
	assert_int_equal(
	    count(d, "SELECT COUNT(*) FROM api_tokens WHERE id = 'tok_a' AND parent_id = 'tok_b'"),
	    1);
	assert_int_equal(count(d, "SELECT COUNT(*) FROM projects WHERE budget_micros IS NULL"), 1);
	/* The totals the trigger rebuilt: acme 10,000,000 - 500,000 + 100,000; 500,000 held. */
	assert_int_equal(count(d,
	                       "SELECT balance_micros FROM ledger_totals WHERE scope = 'org' AND "
	                       "key = '1'"),
	                 9600000);
	assert_int_equal(count(d, "SELECT reserved_micros FROM ledger_totals WHERE scope = "
	                          "'project' AND key = 'prj_a'"),
	                 500000);
	assert_int_equal(count(d, "SELECT charged_micros FROM ledger_totals WHERE scope = "
	                          "'experiment' AND key = 'exp_2'"),
	                 250000);
	assert_blob(d, "SELECT nonce, ciphertext FROM cloud_keys WHERE id = 'key_1'");
	assert_blob(d, "SELECT nonce, ciphertext FROM cloud_key_master WHERE id = 1");
	assert_blob(d, "SELECT credentials_nonce, credentials_ciphertext FROM datasets");
	/* The ledger still refuses changes, and a new row continues after the copied ids. */
	assert_int_not_equal(isc_db_exec(isc_store_db(d), "DELETE FROM ledger WHERE id = 31"),
	                     ISC_DB_OK);
	exec_ok(d, "INSERT INTO ledger (at_ms, org_id, kind, amount_micros) VALUES "
	           "(2000, 1, 'grant', 1)");
	assert_int_equal(count(d, "SELECT MAX(id) FROM ledger"), 38);
	/* pool_nodes is AUTOINCREMENT: a SQLite source's removed id 9 is never given again. */
	assert_int_equal(isc_db_prepare(isc_store_db(d),
	                                "INSERT INTO pool_nodes (host, port, \"user\", gpus, "
	                                "added_ms) VALUES ('127.0.0.4', 22, 'isc', 1, 3000) "
	                                "RETURNING id",
	                                0, &st),
	                 ISC_DB_OK);
	assert_int_equal(isc_db_step(st), ISC_DB_ROW);
	id = isc_db_column_int64(st, 0);
	isc_db_finalize(st);
	assert_int_equal(id, isc_store_is_postgres(f->st.s) ? 4 : 10);
	isc_store_free(d);
}

static void test_refuses_non_empty_destination(void **state)
{
	struct fixture *f = *state;
	struct isc_store_copy_options o = options(f);
	struct isc_store_copy_report r;
	struct isc_store *d;
	struct isc_err err;

	assert_int_equal(isc_store_copy(&o, &r, &err), 0);
	isc_store_copy_report_cleanup(&r);
	assert_int_equal(isc_store_copy(&o, &r, &err), ISC_ECONFLICT);
	assert_non_null(strstr(err.msg, "not empty"));
	/* Nothing merged: one copy of each row. */
	d = open_dest(f);
	assert_int_equal(count(d, "SELECT COUNT(*) FROM ledger"), 7);
	assert_int_equal(count(d, "SELECT COUNT(*) FROM orgs"), 2);
	isc_store_free(d);
	/* Copying a store onto itself is refused before it is opened. */
	o.to_url = o.from_url = "sqlite:";
	assert_int_equal(isc_store_copy(&o, &r, &err), ISC_EINVALID);
	assert_non_null(strstr(err.msg, "same store"));
}

/* A table late in the order refuses its rows: the whole copy is undone. */
static void test_failure_mid_copy_leaves_destination_empty(void **state)
{
	struct fixture *f = *state;
	struct isc_store_copy_options o = options(f);
	struct isc_store_copy_report r;
	struct isc_store *d;
	struct isc_err err;

	/* An empty store at the destination, with a trigger that refuses api_tokens' rows. */
	if (isc_store_open_url(f->st.home, f->dest_url, 1, &d, &err))
		fail_msg("%s", err.msg);
	exec_ok(d, "CREATE TRIGGER refuse_tokens BEFORE INSERT ON api_tokens BEGIN "
	           "SELECT RAISE(ABORT, 'refused by the test'); END;");
	isc_store_free(d);

	assert_int_equal(isc_store_copy(&o, &r, &err), ISC_EIO);
	assert_non_null(strstr(err.msg, "api_tokens"));
	assert_non_null(strstr(err.msg, "refused by the test"));
	assert_int_equal(access(f->dest, F_OK), 0); /* not made by the copy: it stays */
	assert_dest_empty(f);
}

/* Totals that do not add up in the source fail the verification: nothing is committed. */
static void test_verification_failure_removes_new_file(void **state)
{
	struct fixture *f = *state;
	struct isc_store_copy_options o = options(f);
	struct isc_store_copy_report r;
	struct isc_err err;

	exec_ok(f->st.s, "UPDATE ledger_totals SET balance_micros = balance_micros + 1 "
	                 "WHERE scope = 'org' AND key = '7'");
	assert_int_equal(isc_store_copy(&o, &r, &err), ISC_EIO);
	assert_non_null(strstr(err.msg, "ledger_totals"));
	/* The file the copy made is gone again. */
	assert_int_not_equal(access(f->dest, F_OK), 0);
}

static void test_refused_while_iscd_holds_the_lock(void **state)
{
	struct fixture *f = *state;
	struct isc_store_copy_options o = options(f);
	struct isc_store_copy_report r;
	struct isc_err err;
	char *path;
	int fd;

	assert_int_not_equal(asprintf(&path, "%s/iscd.lock", f->st.home), -1);
	fd = open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	/* The lock of daemon/iscd.c's take_lock, as a running iscd holds it. */
	assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
	assert_int_equal(isc_store_copy(&o, &r, &err), ISC_ECONFLICT);
	assert_non_null(strstr(err.msg, "iscd is running"));
	assert_int_not_equal(access(f->dest, F_OK), 0);
	close(fd);
	free(path);

	/* A file in another home whose iscd runs (it holds that home's lock) is refused too. */
	{
		char *other, *url;
		assert_int_not_equal(asprintf(&other, "%s/other", f->st.dir), -1);
		assert_int_not_equal(asprintf(&path, "%s/iscd.lock", other), -1);
		assert_int_not_equal(asprintf(&url, "sqlite:%s/isc.db", other), -1);
		assert_int_equal(mkdir(other, 0700), 0);
		fd = open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0600);
		assert_true(fd >= 0);
		assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
		o.to_url = url;
		assert_int_equal(isc_store_copy(&o, &r, &err), ISC_ECONFLICT);
		assert_non_null(strstr(err.msg, other));
		close(fd);
		assert_int_equal(isc_store_copy(&o, &r, &err), 0);
		isc_store_copy_report_cleanup(&r);
		o.to_url = f->dest_url;
		free(other);
		free(path);
		free(url);
	}
	assert_int_equal(isc_store_copy(&o, &r, &err), 0);
	isc_store_copy_report_cleanup(&r);
}

/* A live replica on a PostgreSQL source refuses the copy; SQLite relies on the lock. */
static void test_refused_with_a_live_replica(void **state)
{
	struct fixture *f = *state;
	struct isc_store_copy_options o = options(f);
	struct isc_store_copy_report r;
	struct isc_err err;

	assert_int_equal(isc_store_replica_register(f->st.s, "rep_live", "host-b", 1234, &err), 0);
	if (!isc_store_is_postgres(f->st.s)) {
		assert_int_equal(isc_store_copy(&o, &r, &err), 0);
		isc_store_copy_report_cleanup(&r);
		return;
	}
	assert_int_equal(isc_store_copy(&o, &r, &err), ISC_ECONFLICT);
	assert_non_null(strstr(err.msg, "rep_live"));
	assert_int_not_equal(access(f->dest, F_OK), 0);
}

/* A source one migration behind this program is refused, and not migrated by the copy. */
static void test_refuses_other_schema_version(void **state)
{
	struct fixture *f = *state;
	struct isc_store_copy_options o = options(f);
	struct isc_store_copy_report r;
	struct isc_store *old;
	struct isc_err err;
	char *home, *old_url;
	int version = 0;

	assert_int_not_equal(asprintf(&home, "%s/old", f->st.dir), -1);
	assert_int_not_equal(asprintf(&old_url, "sqlite:%s/old.db", f->st.dir), -1);
	if (isc_store_open_url_at(home, old_url, 1, isc_store_migration_count() - 1, &old, &err))
		fail_msg("%s", err.msg);
	isc_store_free(old);
	o.from_url = old_url;
	assert_int_equal(isc_store_copy(&o, &r, &err), ISC_EINVALID);
	assert_non_null(strstr(err.msg, "schema is version"));
	if (isc_store_open_url_at(home, old_url, 0, 0, &old, &err))
		fail_msg("%s", err.msg);
	assert_int_equal(isc_store_schema_version(old, &version, &err), 0);
	assert_int_equal(version, isc_store_latest_version() - 1);
	isc_store_free(old);
	free(home);
	free(old_url);
}

/* A new database on the test server of ISC_TEST_PG_DIR (tests/pg/pg-server); its URI. */
static char *pg_database(const char *pgdir, const char *name)
{
	char *cmd, url[512] = "";
	FILE *p;

	assert_int_not_equal(asprintf(&cmd, "tests/pg/pg-server createdb '%s' '%s'", pgdir, name),
	                     -1);
	p = popen(cmd, "r");
	free(cmd);
	assert_non_null(p);
	if (!fgets(url, sizeof(url), p))
		url[0] = 0;
	if (pclose(p) != 0 || !url[0])
		fail_msg("could not make database %s", name);
	url[strcspn(url, "\n")] = 0;
	return strdup(url);
}

/*
 * Into PostgreSQL (from the fixture's store, PostgreSQL too under
 * ISC_TEST_PG_DIR): the totals built in one pass equal the source's, the
 * ledger's trigger is on again after the copy, and identities continue after
 * the copied ids. Skipped without a test server.
 */
static void test_copy_into_postgres(void **state)
{
	struct fixture *f = *state;
	struct isc_store_copy_options o = options(f);
	struct isc_store_copy_report r;
	struct isc_store *d;
	struct isc_db_stmt *st;
	struct isc_err err;
	const char *pgdir = getenv("ISC_TEST_PG_DIR");
	char name[64], *url;

	if (!pgdir || !*pgdir) {
		skip();
		return;
	}
	snprintf(name, sizeof(name), "copy_into_%ld", (long)getpid());
	url = pg_database(pgdir, name);
	o.to_url = url;
	if (isc_store_copy(&o, &r, &err))
		fail_msg("copy: %s", err.msg);
	assert_int_equal(r.ledger_totals_rows, 6);
	isc_store_copy_report_cleanup(&r);
	if (isc_store_open_url(f->st.home, url, 0, &d, &err))
		fail_msg("%s", err.msg);
	assert_true(isc_store_is_postgres(d));
	assert_int_equal(count(d,
	                       "SELECT balance_micros FROM ledger_totals WHERE scope = 'org' AND "
	                       "key = '1'"),
	                 9600000);
	exec_ok(d, "INSERT INTO ledger (at_ms, org_id, kind, amount_micros) VALUES "
	           "(2000, 1, 'grant', 1)");
	assert_int_equal(count(d, "SELECT MAX(id) FROM ledger"), 38);
	assert_int_equal(count(d,
	                       "SELECT balance_micros FROM ledger_totals WHERE scope = 'org' AND "
	                       "key = '1'"),
	                 9600001);
	assert_int_equal(isc_db_prepare(isc_store_db(d),
	                                "INSERT INTO orgs (name, created_at_ms) VALUES ('initech', "
	                                "3000) RETURNING id",
	                                0, &st),
	                 ISC_DB_OK);
	assert_int_equal(isc_db_step(st), ISC_DB_ROW);
	assert_int_equal(isc_db_column_int64(st, 0), 8);
	isc_db_finalize(st);
	assert_blob(d, "SELECT nonce, ciphertext FROM cloud_keys WHERE id = 'key_1'");
	isc_store_free(d);
	/* Into the same database again: it has rows now. */
	assert_int_equal(isc_store_copy(&o, &r, &err), ISC_ECONFLICT);
	free(url);
}

static void test_url_masked(void **state)
{
	static const char *const cases[][2] = {
	    {"postgresql://isc:s3cret@db.example:5432/isc",
	     "postgresql://isc:***@db.example:5432/isc"},
	    {"postgresql://isc@db/isc?password=s3cret&sslmode=require",
	     "postgresql://isc@db/isc?password=***&sslmode=require"},
	    {"postgresql:///isc?host=/run/pg&user=postgres",
	     "postgresql:///isc?host=/run/pg&user=postgres"},
	    {"postgres://u:p%40ss@h/d?PASSWORD=x", "postgres://u:***@h/d?PASSWORD=***"},
	    {"sqlite:/var/lib/isc/isc.db", "sqlite:/var/lib/isc/isc.db"},
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *m = isc_store_url_masked(cases[i][0]);
		assert_non_null(m);
		assert_string_equal(m, cases[i][1]);
		free(m);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_copy_every_table, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_refuses_non_empty_destination, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_failure_mid_copy_leaves_destination_empty, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_verification_failure_removes_new_file, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_refused_while_iscd_holds_the_lock, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_refused_with_a_live_replica, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_refuses_other_schema_version, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_copy_into_postgres, setup, teardown),
	    cmocka_unit_test(test_url_masked),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
