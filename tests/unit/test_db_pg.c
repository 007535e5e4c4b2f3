/*
 * store/db_pg.c against a real PostgreSQL (tests/pg/pg-server starts one in a
 * temporary folder; each test gets a database of its own): placeholders
 * numbered as SQLite numbers them, values of every kind both ways, changes,
 * errors, reset and rebind, persistent statements, transactions; and the
 * PostgreSQL schema (store/migrations_pg.c): it loads, its ledger and audit
 * refuse changes, a node period is charged once, the ledger's totals follow
 * its rows, and its tables have SQLite's columns (the schema parity test).
 */
#include "store/db.h"
#include "store/db_pg.h"
#include "store/db_sqlite.h"
#include "store/migrations_pg.h"
#include "store/store_int.h"
#include "store/store_pool.h"
#include "tests/unit/store_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <glob.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

/* The server of the whole run (group setup) and the database of each test. */
static char server_dir[64];
static char *admin_uri;
static struct isc_db *admin;
static int next_db;

struct t {
	char name[32];
	struct isc_db *db;
};

/* Runs tests/pg/pg-server with args; returns its one line of output (owned) or NULL. */
static char *pg_server(const char *args)
{
	char cmd[256], line[512];
	FILE *p;
	size_t n;

	snprintf(cmd, sizeof(cmd), "tests/pg/pg-server %s", args);
	p = popen(cmd, "r");
	if (!p)
		return NULL;
	if (!fgets(line, sizeof(line), p))
		line[0] = '\0';
	if (pclose(p) != 0 || !line[0])
		return NULL;
	n = strcspn(line, "\n");
	line[n] = '\0';
	return strdup(line);
}

static int group_setup(void **state)
{
	struct isc_err err;
	char args[128], *uri;

	(void)state;
	snprintf(server_dir, sizeof(server_dir), "/tmp/isc-dbpg-XXXXXX");
	if (!mkdtemp(server_dir))
		return -1;
	snprintf(args, sizeof(args), "start %s", server_dir);
	uri = pg_server(args);
	if (!uri) {
		fprintf(stderr, "test_db_pg: pg-server start %s failed\n", server_dir);
		return -1;
	}
	free(uri);
	/* pg-server's createdb, once: the tests' own databases are made over this connection. */
	snprintf(args, sizeof(args), "createdb %s isc_admin", server_dir);
	admin_uri = pg_server(args);
	if (!admin_uri || isc_db_open_pg(admin_uri, &admin, &err)) {
		fprintf(stderr, "test_db_pg: connecting to %s: %s\n", admin_uri ? admin_uri : "?",
		        admin_uri ? err.msg : "createdb failed");
		return -1;
	}
	return 0;
}

static int group_teardown(void **state)
{
	char args[128], cmd[160];

	(void)state;
	isc_db_close(admin);
	free(admin_uri);
	snprintf(args, sizeof(args), "tests/pg/pg-server stop %s", server_dir);
	if (system(args) != 0)
		fprintf(stderr, "test_db_pg: could not stop the server in %s\n", server_dir);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", server_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "test_db_pg: could not remove %s\n", server_dir);
	return 0;
}

static int setup(void **state)
{
	struct t *t = calloc(1, sizeof(*t));
	struct isc_err err;
	char sql[64], *uri;

	assert_non_null(t);
	snprintf(t->name, sizeof(t->name), "t%d", ++next_db);
	snprintf(sql, sizeof(sql), "CREATE DATABASE %s", t->name);
	assert_int_equal(isc_db_exec(admin, sql), ISC_DB_OK);
	assert_int_not_equal(
	    asprintf(&uri, "postgresql:///%s?host=%s&user=postgres", t->name, server_dir), -1);
	if (isc_db_open_pg(uri, &t->db, &err))
		fail_msg("isc_db_open_pg %s: %s", uri, err.msg);
	free(uri);
	*state = t;
	return 0;
}

static int teardown(void **state)
{
	struct t *t = *state;
	char sql[64];

	isc_db_close(t->db);
	snprintf(sql, sizeof(sql), "DROP DATABASE %s", t->name);
	isc_db_exec(admin, sql);
	free(t);
	return 0;
}

/* Runs sql (no parameters) and returns its one row's first column as an integer. */
static int64_t query_int(struct isc_db *db, const char *sql)
{
	struct isc_db_stmt *st;
	int64_t v;

	assert_int_equal(isc_db_prepare(db, sql, 0, &st), ISC_DB_OK);
	if (isc_db_step(st) != ISC_DB_ROW)
		fail_msg("%s: %s", sql, isc_db_errmsg(db));
	v = isc_db_column_int64(st, 0);
	assert_int_equal(isc_db_step(st), ISC_DB_DONE);
	isc_db_finalize(st);
	return v;
}

/* Steps a prepared statement that returns no rows; returns the result code. */
static int run_sql(struct isc_db *db, const char *sql)
{
	struct isc_db_stmt *st;
	int rc;

	assert_int_equal(isc_db_prepare(db, sql, 0, &st), ISC_DB_OK);
	rc = isc_db_step(st);
	isc_db_finalize(st);
	return rc;
}

static void test_placeholders(void **state)
{
	struct t *t = *state;
	struct isc_db_stmt *st;

	assert_int_equal(isc_db_kind(t->db), ISC_DB_POSTGRES);
	/* Plain ? takes the largest number so far plus one; quotes and comments are left alone. */
	assert_int_equal(isc_db_prepare(t->db,
	                                "SELECT ?, ?5, ?, ?2, '?', 'it''s ?', \"a?\" -- ?\n"
	                                ", /* ? */ ?, ?5",
	                                0, &st),
	                 ISC_DB_OK);
	assert_string_equal(isc_db_pg_translated_sql(st),
	                    "SELECT $1, $5, $6, $2, '?', 'it''s ?', \"a?\" -- ?\n, /* ? */ $7, $5");
	assert_string_equal(isc_db_sql(st), "SELECT ?, ?5, ?, ?2, '?', 'it''s ?', \"a?\" -- ?\n"
	                                    ", /* ? */ ?, ?5");
	assert_int_equal(isc_db_bind_parameter_count(st), 7);
	assert_ptr_equal(isc_db_handle(st), t->db);
	isc_db_finalize(st);

	/* For real: ?2 named twice is one parameter, the ? after it is the third. */
	assert_int_equal(isc_db_prepare(t->db,
	                                "SELECT CAST(?2 AS BIGINT) + CAST(?2 AS BIGINT), "
	                                "CAST(? AS TEXT), '?', CAST(?1 AS TEXT)",
	                                0, &st),
	                 ISC_DB_OK);
	assert_int_equal(isc_db_bind_parameter_count(st), 3);
	assert_int_equal(isc_db_bind_text(st, 1, "one", -1, ISC_DB_STATIC), ISC_DB_OK);
	assert_int_equal(isc_db_bind_int(st, 2, 21), ISC_DB_OK);
	assert_int_equal(isc_db_bind_text(st, 3, "three!", 5, ISC_DB_TRANSIENT), ISC_DB_OK);
	assert_int_not_equal(isc_db_bind_int(st, 4, 1), ISC_DB_OK);
	assert_int_not_equal(isc_db_bind_int(st, 0, 1), ISC_DB_OK);
	assert_int_equal(isc_db_step(st), ISC_DB_ROW);
	assert_int_equal(isc_db_column_int64(st, 0), 42);
	assert_string_equal(isc_db_column_text(st, 1), "three");
	assert_string_equal(isc_db_column_text(st, 2), "?");
	assert_string_equal(isc_db_column_text(st, 3), "one");
	assert_int_equal(isc_db_step(st), ISC_DB_DONE);
	isc_db_finalize(st);

	/*
	 * ?3 alone: the server is given a type for the two it never sees, and never their
	 * values (the store binds one layout for several statements: text where an unused
	 * parameter would be an integer), persistent or not.
	 */
	for (int flags = 0; flags <= ISC_DB_PREPARE_PERSISTENT;
	     flags += ISC_DB_PREPARE_PERSISTENT) {
		assert_int_equal(isc_db_prepare(t->db, "SELECT CAST(?3 AS TEXT)", flags, &st),
		                 ISC_DB_OK);
		assert_int_equal(isc_db_bind_parameter_count(st), 3);
		assert_int_equal(isc_db_bind_text(st, 1, "not a number", -1, ISC_DB_STATIC),
		                 ISC_DB_OK);
		assert_int_equal(isc_db_bind_blob(st, 2, "\0\1", 2, ISC_DB_STATIC), ISC_DB_OK);
		assert_int_equal(isc_db_bind_text(st, 3, "x", -1, ISC_DB_STATIC), ISC_DB_OK);
		assert_int_equal(isc_db_step(st), ISC_DB_ROW);
		assert_string_equal(isc_db_column_text(st, 0), "x");
		isc_db_reset(st);
		assert_int_equal(isc_db_bind_int64(st, 1, 7), ISC_DB_OK);
		assert_int_equal(isc_db_step(st), ISC_DB_ROW);
		assert_string_equal(isc_db_column_text(st, 0), "x");
		isc_db_finalize(st);
	}

	assert_int_equal(isc_db_prepare(t->db, "SELECT ?0", 0, &st), ISC_DB_ERROR);
	assert_null(st);
	assert_int_equal(isc_db_prepare(t->db, "SELECT ?32767", 0, &st), ISC_DB_ERROR);
}

static void test_values(void **state)
{
	struct t *t = *state;
	struct isc_db_stmt *st;
	const int64_t ints[] = {INT64_MIN, INT64_MAX, 0, -1, 1};
	const char *text = "it's \"quoted\" \\ -- ? ünïcødé ✓ 🚀";
	const unsigned char blob[] = {0, 1, 0, 0xff, '\\', 'x', 0};

	assert_int_equal(isc_db_exec(t->db, "CREATE TABLE v (n INTEGER, i BIGINT, s TEXT, "
	                                    "b BYTEA, f BOOLEAN)"),
	                 ISC_DB_OK);
	assert_int_equal(
	    isc_db_prepare(t->db, "INSERT INTO v (n, i, s, b, f) VALUES (?, ?, ?, ?, ?)", 0, &st),
	    ISC_DB_OK);
	for (size_t k = 0; k < sizeof(ints) / sizeof(ints[0]); k++) {
		assert_int_equal(isc_db_bind_int(st, 1, (int)k), ISC_DB_OK);
		assert_int_equal(isc_db_bind_int64(st, 2, ints[k]), ISC_DB_OK);
		assert_int_equal(isc_db_bind_text(st, 3, text, -1, ISC_DB_STATIC), ISC_DB_OK);
		assert_int_equal(isc_db_bind_blob(st, 4, blob, sizeof(blob), ISC_DB_STATIC),
		                 ISC_DB_OK);
		assert_int_equal(
		    isc_db_bind_text(st, 5, k % 2 ? "true" : "false", -1, ISC_DB_STATIC),
		    ISC_DB_OK);
		assert_int_equal(isc_db_step(st), ISC_DB_DONE);
		assert_int_equal(isc_db_reset(st), ISC_DB_OK);
	}
	/* NULLs of every kind, and an empty blob (a value, not NULL). */
	assert_int_equal(isc_db_clear_bindings(st), ISC_DB_OK);
	assert_int_equal(isc_db_bind_int(st, 1, 100), ISC_DB_OK);
	assert_int_equal(isc_db_bind_null(st, 2), ISC_DB_OK);
	assert_int_equal(isc_db_bind_text(st, 3, NULL, -1, ISC_DB_STATIC), ISC_DB_OK);
	assert_int_equal(isc_db_bind_blob(st, 4, "", 0, ISC_DB_STATIC), ISC_DB_OK);
	assert_int_equal(isc_db_step(st), ISC_DB_DONE);
	isc_db_finalize(st);

	assert_int_equal(isc_db_prepare(t->db, "SELECT i, s, b, f FROM v ORDER BY n", 0, &st),
	                 ISC_DB_OK);
	for (size_t k = 0; k < sizeof(ints) / sizeof(ints[0]); k++) {
		assert_int_equal(isc_db_step(st), ISC_DB_ROW);
		assert_int_equal(isc_db_column_type(st, 0), ISC_DB_INTEGER);
		assert_true(isc_db_column_int64(st, 0) == ints[k]);
		assert_int_equal(isc_db_column_type(st, 1), ISC_DB_TEXT);
		assert_string_equal(isc_db_column_text(st, 1), text);
		assert_int_equal(isc_db_column_bytes(st, 1), (int)strlen(text));
		assert_int_equal(isc_db_column_type(st, 2), ISC_DB_BLOB);
		assert_int_equal(isc_db_column_bytes(st, 2), (int)sizeof(blob));
		assert_memory_equal(isc_db_column_blob(st, 2), blob, sizeof(blob));
		/* Booleans read as SQLite's 0 and 1. */
		assert_int_equal(isc_db_column_type(st, 3), ISC_DB_INTEGER);
		assert_int_equal(isc_db_column_int(st, 3), k % 2 ? 1 : 0);
	}
	assert_int_equal(isc_db_step(st), ISC_DB_ROW);
	for (int c = 0; c < 4; c++) {
		if (c == 2)
			continue;
		assert_int_equal(isc_db_column_type(st, c), ISC_DB_NULL);
		assert_null(isc_db_column_text(st, c));
		assert_int_equal(isc_db_column_int64(st, c), 0);
		assert_null(isc_db_column_blob(st, c));
		assert_int_equal(isc_db_column_bytes(st, c), 0);
	}
	/* An empty blob: a value, of no bytes (SQLite gives a NULL pointer for it too). */
	assert_int_equal(isc_db_column_type(st, 2), ISC_DB_BLOB);
	assert_int_equal(isc_db_column_bytes(st, 2), 0);
	assert_null(isc_db_column_blob(st, 2));
	/* Out of range: NULL, as SQLite answers. */
	assert_int_equal(isc_db_column_type(st, 9), ISC_DB_NULL);
	assert_int_equal(isc_db_step(st), ISC_DB_DONE);
	isc_db_finalize(st);

	/*
	 * Text that is not UTF-8 (PostgreSQL refuses it; SQLite keeps any bytes): each
	 * byte that starts no character is U+FFFD, valid characters stay, and a NUL ends it.
	 */
	assert_int_equal(isc_db_prepare(t->db, "SELECT CAST(? AS TEXT)", 0, &st), ISC_DB_OK);
	assert_int_equal(isc_db_bind_text(st, 1,
	                                  "ok \xc3\xa9 \xff\xfe x \xe2\x82 \xc0\xaf "
	                                  "\xed\xa0\x80 \xf0\x9f\x9a\x80 cut \xe2\x9c",
	                                  -1, ISC_DB_STATIC),
	                 ISC_DB_OK);
	assert_int_equal(isc_db_step(st), ISC_DB_ROW);
	assert_string_equal(isc_db_column_text(st, 0),
	                    "ok \xc3\xa9 \xef\xbf\xbd\xef\xbf\xbd x \xef\xbf\xbd\xef\xbf\xbd "
	                    "\xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd "
	                    "\xf0\x9f\x9a\x80 cut \xef\xbf\xbd\xef\xbf\xbd");
	isc_db_reset(st);
	assert_int_equal(isc_db_bind_text(st, 1, "a\0b", 3, ISC_DB_STATIC), ISC_DB_OK);
	assert_int_equal(isc_db_step(st), ISC_DB_ROW);
	assert_string_equal(isc_db_column_text(st, 0), "a");
	isc_db_finalize(st);

	/* SUM of int8 is numeric in PostgreSQL: still an integer to the store. */
	assert_int_equal(isc_db_prepare(t->db, "SELECT SUM(n) FROM v", 0, &st), ISC_DB_OK);
	assert_int_equal(isc_db_step(st), ISC_DB_ROW);
	assert_int_equal(isc_db_column_type(st, 0), ISC_DB_INTEGER);
	assert_int_equal(isc_db_column_int64(st, 0), 0 + 1 + 2 + 3 + 4 + 100);
	isc_db_finalize(st);
}

static void test_changes_and_errors(void **state)
{
	struct t *t = *state;
	struct isc_db_stmt *st;
	int64_t total;

	assert_int_equal(isc_db_exec(t->db, "CREATE TABLE c (id BIGINT PRIMARY KEY, "
	                                    "name TEXT NOT NULL UNIQUE, n BIGINT CHECK (n >= 0));"
	                                    "INSERT INTO c VALUES (1, 'a', 1), (2, 'b', 2), "
	                                    "(3, 'c', 3)"),
	                 ISC_DB_OK);
	assert_int_equal(isc_db_changes(t->db), 3);
	total = isc_db_total_changes(t->db);
	assert_int_equal(total, 3);
	assert_int_equal(run_sql(t->db, "UPDATE c SET n = n + 1 WHERE id >= 2"), ISC_DB_DONE);
	assert_int_equal(isc_db_changes(t->db), 2);
	/* A SELECT changes nothing, and leaves the last count as it is. */
	assert_int_equal(query_int(t->db, "SELECT COUNT(*) FROM c"), 3);
	assert_int_equal(isc_db_changes(t->db), 2);
	assert_int_equal(run_sql(t->db, "DELETE FROM c WHERE id = 99"), ISC_DB_DONE);
	assert_int_equal(isc_db_changes(t->db), 0);
	assert_int_equal(isc_db_total_changes(t->db), 5);

	/* INSERT ... RETURNING: a row, and a change. */
	assert_int_equal(isc_db_prepare(t->db,
	                                "INSERT INTO c (id, name, n) VALUES (?, ?, ?) RETURNING id",
	                                0, &st),
	                 ISC_DB_OK);
	isc_db_bind_int64(st, 1, 4);
	isc_db_bind_text(st, 2, "d", -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 3, 0);
	assert_int_equal(isc_db_step(st), ISC_DB_ROW);
	assert_int_equal(isc_db_column_int64(st, 0), 4);
	assert_int_equal(isc_db_step(st), ISC_DB_DONE);
	assert_int_equal(isc_db_changes(t->db), 1);

	/* Unique, check and not-null violations are constraint errors with the server's words. */
	isc_db_reset(st);
	isc_db_bind_int64(st, 1, 5);
	isc_db_bind_text(st, 2, "a-secret-value", -1, ISC_DB_STATIC);
	assert_int_equal(isc_db_step(st), ISC_DB_ROW); /* nothing wrong yet */
	isc_db_reset(st);
	isc_db_bind_int64(st, 1, 6);
	assert_int_equal(isc_db_step(st), ISC_DB_CONSTRAINT);
	assert_non_null(strstr(isc_db_errmsg(t->db), "duplicate key value violates unique"));
	/* The primary message only: the row's values (the DETAIL) never reach the error. */
	assert_null(strstr(isc_db_errmsg(t->db), "a-secret-value"));
	isc_db_reset(st);
	isc_db_bind_int64(st, 1, 7);
	isc_db_bind_text(st, 2, "g", -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 3, -5);
	assert_int_equal(isc_db_step(st), ISC_DB_CONSTRAINT);
	assert_non_null(strstr(isc_db_errmsg(t->db), "violates check constraint"));
	isc_db_reset(st);
	isc_db_bind_null(st, 2);
	isc_db_bind_int64(st, 3, 5);
	assert_int_equal(isc_db_step(st), ISC_DB_CONSTRAINT);
	assert_non_null(strstr(isc_db_errmsg(t->db), "null value"));
	isc_db_finalize(st);

	/* Anything else is a plain error, with the server's message. */
	assert_int_equal(run_sql(t->db, "SELECT * FROM no_such_table"), ISC_DB_ERROR);
	assert_non_null(strstr(isc_db_errmsg(t->db), "no_such_table"));
	assert_int_equal(isc_db_exec(t->db, "SELEKT 1"), ISC_DB_ERROR);
	assert_non_null(strstr(isc_db_errmsg(t->db), "syntax error"));
	assert_int_equal(isc_db_exec(t->db, "INSERT INTO c VALUES (1, 'z', 1)"), ISC_DB_CONSTRAINT);
}

static void test_reset_rebind(void **state)
{
	struct t *t = *state;
	struct isc_db_stmt *st;

	assert_int_equal(isc_db_exec(t->db, "CREATE TABLE r (n BIGINT);"
	                                    "INSERT INTO r VALUES (1), (2), (3)"),
	                 ISC_DB_OK);
	assert_int_equal(isc_db_prepare(t->db, "SELECT n FROM r WHERE n >= ? ORDER BY n", 0, &st),
	                 ISC_DB_OK);
	isc_db_bind_int64(st, 1, 2);
	assert_int_equal(isc_db_step(st), ISC_DB_ROW);
	assert_int_equal(isc_db_column_int64(st, 0), 2);
	/* Reset in the middle: the next step runs it again from the start. */
	assert_int_equal(isc_db_reset(st), ISC_DB_OK);
	assert_int_equal(isc_db_step(st), ISC_DB_ROW);
	assert_int_equal(isc_db_column_int64(st, 0), 2);
	assert_int_equal(isc_db_step(st), ISC_DB_ROW);
	assert_int_equal(isc_db_column_int64(st, 0), 3);
	assert_int_equal(isc_db_step(st), ISC_DB_DONE);
	/* Rebound: the new value counts. */
	isc_db_reset(st);
	isc_db_bind_int64(st, 1, 3);
	assert_int_equal(isc_db_step(st), ISC_DB_ROW);
	assert_int_equal(isc_db_column_int64(st, 0), 3);
	assert_int_equal(isc_db_step(st), ISC_DB_DONE);
	/* A step after DONE runs it again, as SQLite's does. */
	assert_int_equal(isc_db_step(st), ISC_DB_ROW);
	assert_int_equal(isc_db_column_int64(st, 0), 3);
	/* Cleared bindings are NULL: no row is >= NULL. */
	isc_db_reset(st);
	isc_db_clear_bindings(st);
	assert_int_equal(isc_db_step(st), ISC_DB_DONE);
	isc_db_finalize(st);
}

/*
 * A statement prepared for one call and finalized (most of the store's) is still
 * parsed once per session: the connection keeps it prepared by its text and
 * parameter types, so the next prepare of the same text runs it from there.
 */
static void test_prepared_by_text(void **state)
{
	struct t *t = *state;
	static const char sql[] = "SELECT n FROM q WHERE s = ? AND n >= ?";
	struct isc_db_stmt *st;

	assert_int_equal(isc_db_exec(t->db, "CREATE TABLE q (n BIGINT, s TEXT);"
	                                    "INSERT INTO q VALUES (1, 'a'), (2, 'b')"),
	                 ISC_DB_OK);
	for (int round = 0; round < 3; round++) {
		assert_int_equal(isc_db_prepare(t->db, sql, 0, &st), ISC_DB_OK);
		isc_db_bind_text(st, 1, round % 2 ? "b" : "a", -1, ISC_DB_STATIC);
		isc_db_bind_int64(st, 2, 0);
		assert_int_equal(isc_db_step(st), ISC_DB_ROW);
		assert_int_equal(isc_db_column_int64(st, 0), round % 2 ? 2 : 1);
		assert_int_equal(isc_db_step(st), ISC_DB_DONE);
		isc_db_finalize(st);
	}
	assert_int_equal(query_int(t->db, "SELECT COUNT(*) FROM pg_prepared_statements WHERE "
	                                  "statement = 'SELECT n FROM q WHERE s = $1 AND n >= $2'"),
	                 1);
	/* Another type of a parameter (NULL is untyped) is a statement of its own. */
	assert_int_equal(isc_db_prepare(t->db, sql, 0, &st), ISC_DB_OK);
	isc_db_bind_text(st, 1, "a", -1, ISC_DB_STATIC);
	isc_db_bind_null(st, 2);
	assert_int_equal(isc_db_step(st), ISC_DB_DONE);
	isc_db_finalize(st);
	assert_int_equal(query_int(t->db, "SELECT COUNT(*) FROM pg_prepared_statements WHERE "
	                                  "statement = 'SELECT n FROM q WHERE s = $1 AND n >= $2'"),
	                 2);
	assert_int_equal(isc_db_exec(t->db, "DROP TABLE q"), ISC_DB_OK);
}

static void test_persistent(void **state)
{
	struct t *t = *state;
	struct isc_db_stmt *st, *other;

	assert_int_equal(isc_db_exec(t->db, "CREATE TABLE p (n BIGINT, s TEXT);"
	                                    "INSERT INTO p VALUES (1, 'one'), (2, 'two')"),
	                 ISC_DB_OK);
	assert_int_equal(
	    isc_db_prepare(t->db, "SELECT s FROM p WHERE n = ?", ISC_DB_PREPARE_PERSISTENT, &st),
	    ISC_DB_OK);
	assert_int_equal(
	    isc_db_prepare(t->db, "SELECT CAST(? AS TEXT)", ISC_DB_PREPARE_PERSISTENT, &other),
	    ISC_DB_OK);
	for (int round = 0; round < 3; round++) {
		isc_db_bind_int64(st, 1, 1 + round % 2);
		assert_int_equal(isc_db_step(st), ISC_DB_ROW);
		assert_string_equal(isc_db_column_text(st, 0), round % 2 ? "two" : "one");
		assert_int_equal(isc_db_step(st), ISC_DB_DONE);
		isc_db_reset(st);
	}
	/* Prepared once on the server, and run from there every time. */
	assert_int_equal(query_int(t->db, "SELECT COUNT(*) FROM pg_prepared_statements WHERE "
	                                  "statement = 'SELECT s FROM p WHERE n = $1'"),
	                 1);

	/* A parameter's type changing (integer, then text) gets a statement of the new types. */
	isc_db_bind_int64(other, 1, 7);
	assert_int_equal(isc_db_step(other), ISC_DB_ROW);
	assert_string_equal(isc_db_column_text(other, 0), "7");
	isc_db_reset(other);
	isc_db_bind_text(other, 1, "seven", -1, ISC_DB_STATIC);
	assert_int_equal(isc_db_step(other), ISC_DB_ROW);
	assert_string_equal(isc_db_column_text(other, 0), "seven");
	isc_db_reset(other);
	/* NULL fits any type: the same statement. */
	isc_db_bind_null(other, 1);
	assert_int_equal(isc_db_step(other), ISC_DB_ROW);
	assert_null(isc_db_column_text(other, 0));
	isc_db_reset(other);
	/* (The connection's statements prepared by text, isc_tN, are not the statement's.) */
	assert_int_equal(query_int(t->db, "SELECT COUNT(*) FROM pg_prepared_statements WHERE "
	                                  "name ~ '^isc_[0-9]+$'"),
	                 2);

	/* Finalize frees them on the server too. */
	isc_db_finalize(st);
	isc_db_finalize(other);
	assert_int_equal(query_int(t->db, "SELECT COUNT(*) FROM pg_prepared_statements WHERE "
	                                  "name ~ '^isc_[0-9]+$'"),
	                 0);
}

static void test_transactions(void **state)
{
	struct t *t = *state;

	assert_int_equal(isc_db_in_transaction(t->db), 0);
	assert_int_equal(isc_db_exec(t->db, "CREATE TABLE x (n BIGINT UNIQUE)"), ISC_DB_OK);
	assert_int_equal(isc_db_exec(t->db, "BEGIN"), ISC_DB_OK);
	assert_int_equal(isc_db_in_transaction(t->db), 1);
	assert_int_equal(run_sql(t->db, "INSERT INTO x VALUES (1)"), ISC_DB_DONE);
	assert_int_equal(isc_db_exec(t->db, "COMMIT"), ISC_DB_OK);
	assert_int_equal(isc_db_in_transaction(t->db), 0);

	/* A failed statement leaves the transaction open (failed): the caller rolls it back. */
	assert_int_equal(isc_db_exec(t->db, "BEGIN"), ISC_DB_OK);
	assert_int_equal(run_sql(t->db, "INSERT INTO x VALUES (2)"), ISC_DB_DONE);
	assert_int_equal(run_sql(t->db, "INSERT INTO x VALUES (1)"), ISC_DB_CONSTRAINT);
	assert_int_equal(isc_db_in_transaction(t->db), 1);
	assert_int_equal(isc_db_exec(t->db, "ROLLBACK"), ISC_DB_OK);
	assert_int_equal(isc_db_in_transaction(t->db), 0);
	assert_int_equal(query_int(t->db, "SELECT COUNT(*) FROM x"), 1);

	/*
	 * COMMIT after a failed statement: PostgreSQL rolls everything back, which
	 * SQLite never does, so it is an error and not a silent loss of the rows.
	 */
	assert_int_equal(isc_db_exec(t->db, "BEGIN"), ISC_DB_OK);
	assert_int_equal(run_sql(t->db, "INSERT INTO x VALUES (5)"), ISC_DB_DONE);
	assert_int_equal(run_sql(t->db, "INSERT INTO x VALUES (1)"), ISC_DB_CONSTRAINT);
	assert_int_equal(isc_db_exec(t->db, "COMMIT"), ISC_DB_ERROR);
	assert_non_null(strstr(isc_db_errmsg(t->db), "rolled back"));
	assert_int_equal(isc_db_in_transaction(t->db), 0);
	assert_int_equal(query_int(t->db, "SELECT COUNT(*) FROM x"), 1);

	/* Savepoints, as the store nests its transactions. */
	assert_int_equal(isc_db_exec(t->db, "BEGIN; SAVEPOINT sp1"), ISC_DB_OK);
	assert_int_equal(run_sql(t->db, "INSERT INTO x VALUES (3)"), ISC_DB_DONE);
	assert_int_equal(isc_db_exec(t->db, "SAVEPOINT sp2"), ISC_DB_OK);
	assert_int_equal(run_sql(t->db, "INSERT INTO x VALUES (1)"), ISC_DB_CONSTRAINT);
	assert_int_equal(isc_db_exec(t->db, "ROLLBACK TO sp2; RELEASE sp2"), ISC_DB_OK);
	assert_int_equal(isc_db_exec(t->db, "RELEASE sp1; COMMIT"), ISC_DB_OK);
	assert_int_equal(query_int(t->db, "SELECT COUNT(*) FROM x"), 2);
}

/* Ends the test database's session from the server side, as a restart of the server would. */
static void kill_session(struct isc_db *db)
{
	char sql[96];

	snprintf(sql, sizeof(sql), "SELECT pg_terminate_backend(%lld, 5000)",
	         (long long)query_int(db, "SELECT pg_backend_pid()"));
	assert_int_equal(isc_db_exec(admin, sql), ISC_DB_OK);
}

/*
 * A connection the server closed while it sat idle (pg_terminate_backend, as a
 * restart does) is found closed before the next call is sent, and that call runs on
 * a new session, with the session's settings and the persistent statements
 * prepared again (issue 48: before, the call was sent into the dead socket and
 * failed). A call that finds the server refusing connections fails, as a transient
 * failure, and the first call once it takes them again works.
 */
static void test_reconnect(void **state)
{
	struct t *t = *state;
	struct isc_db_stmt *st;
	int64_t pid = query_int(t->db, "SELECT pg_backend_pid()");
	char sql[96];

	assert_int_equal(
	    isc_db_prepare(t->db, "SELECT CAST(? AS BIGINT) + 1", ISC_DB_PREPARE_PERSISTENT, &st),
	    ISC_DB_OK);
	isc_db_bind_int64(st, 1, 41);
	assert_int_equal(isc_db_step(st), ISC_DB_ROW);
	assert_int_equal(isc_db_column_int64(st, 0), 42);
	isc_db_reset(st);

	kill_session(t->db);
	assert_int_equal(isc_db_step(st), ISC_DB_ROW);
	assert_int_equal(isc_db_column_int64(st, 0), 42);
	isc_db_reset(st);
	assert_true(query_int(t->db, "SELECT pg_backend_pid()") != pid);
	kill_session(t->db);
	assert_int_equal(isc_db_exec(t->db, "SELECT 1"), ISC_DB_OK);
	assert_int_equal(query_int(t->db, "SELECT COUNT(*) FROM pg_settings WHERE name = "
	                                  "'statement_timeout' AND setting = '60000'"),
	                 1);

	/*
	 * A server that refuses the new connection (down, or restarting): every call fails,
	 * outside any transaction, until it takes connections again; the first call then
	 * connects anew and works.
	 */
	snprintf(sql, sizeof(sql), "ALTER DATABASE %s WITH ALLOW_CONNECTIONS false", t->name);
	assert_int_equal(isc_db_exec(admin, sql), ISC_DB_OK);
	kill_session(t->db);
	assert_int_equal(isc_db_exec(t->db, "SELECT 1"), ISC_DB_ERROR);
	assert_int_equal(isc_db_transient(t->db), 1);
	assert_int_equal(isc_db_in_transaction(t->db), 0);
	assert_int_equal(isc_db_step(st), ISC_DB_ERROR);
	assert_int_equal(isc_db_transient(t->db), 1);
	isc_db_reset(st);
	snprintf(sql, sizeof(sql), "ALTER DATABASE %s WITH ALLOW_CONNECTIONS true", t->name);
	assert_int_equal(isc_db_exec(admin, sql), ISC_DB_OK);
	assert_int_equal(isc_db_step(st), ISC_DB_ROW);
	assert_int_equal(isc_db_column_int64(st, 0), 42);
	isc_db_reset(st);

	/*
	 * A transaction dies with its session. The new session must not run the rest of
	 * its statements one by one outside any transaction: each fails (transient) until
	 * the store's ROLLBACK, and nothing of it is committed.
	 */
	assert_int_equal(isc_db_exec(t->db, "CREATE TABLE y (n BIGINT)"), ISC_DB_OK);
	assert_int_equal(isc_db_exec(t->db, "BEGIN"), ISC_DB_OK);
	assert_int_equal(run_sql(t->db, "INSERT INTO y VALUES (1)"), ISC_DB_DONE);
	kill_session(t->db);
	assert_int_equal(run_sql(t->db, "INSERT INTO y VALUES (2)"), ISC_DB_ERROR);
	assert_int_equal(isc_db_transient(t->db), 1);
	assert_non_null(strstr(isc_db_errmsg(t->db), "lost inside a transaction"));
	assert_int_equal(isc_db_in_transaction(t->db), 1);
	assert_int_equal(isc_db_exec(t->db, "SELECT 1"), ISC_DB_ERROR);
	assert_int_equal(isc_db_exec(t->db, "ROLLBACK"), ISC_DB_OK);
	assert_int_equal(isc_db_in_transaction(t->db), 0);
	assert_int_equal(query_int(t->db, "SELECT COUNT(*) FROM y"), 0);
	/* Its COMMIT fails too: nothing was committed. */
	assert_int_equal(isc_db_exec(t->db, "BEGIN"), ISC_DB_OK);
	assert_int_equal(run_sql(t->db, "INSERT INTO y VALUES (3)"), ISC_DB_DONE);
	kill_session(t->db);
	assert_int_equal(isc_db_exec(t->db, "COMMIT"), ISC_DB_ERROR);
	assert_int_equal(isc_db_transient(t->db), 1);
	assert_int_equal(isc_db_in_transaction(t->db), 0);
	assert_int_equal(query_int(t->db, "SELECT COUNT(*) FROM y"), 0);
	assert_int_equal(isc_db_step(st), ISC_DB_ROW);
	isc_db_finalize(st);
}

/*
 * Which failures pass (faults-facts.md's table): the SQLSTATEs of a conflict, a
 * shutdown, a restart, a full server, a connection exception; and libpq's own
 * errors, which carry no SQLSTATE, when the connection is CONNECTION_BAD. A
 * constraint, a syntax error or bad input does not.
 */
static void test_transient_codes(void **state)
{
	static const char *const passing[] = {"40001", "40P01", "55P03", "57P01", "57P02",
	                                      "57P03", "57P05", "08000", "08003", "08006",
	                                      "08001", "08004", "53300", "25P03"};
	static const char *const lasting[] = {"23505", "23503", "42601", "42P01", "22P02",
	                                      "28P01", "3D000", "53200", "P0001", "XX000"};

	(void)state;
	for (size_t i = 0; i < sizeof(passing) / sizeof(passing[0]); i++) {
		if (!isc_db_pg_sqlstate_transient(passing[i]))
			fail_msg("SQLSTATE %s should be transient", passing[i]);
		assert_int_equal(isc_db_pg_failure_transient(passing[i], 0), 1);
	}
	for (size_t i = 0; i < sizeof(lasting) / sizeof(lasting[0]); i++) {
		if (isc_db_pg_sqlstate_transient(lasting[i]))
			fail_msg("SQLSTATE %s should not be transient", lasting[i]);
		assert_int_equal(isc_db_pg_failure_transient(lasting[i], 0), 0);
	}
	assert_int_equal(isc_db_pg_sqlstate_transient(NULL), 0);
	/* libpq's own error: no SQLSTATE; the connection's status decides. */
	assert_int_equal(isc_db_pg_failure_transient(NULL, 1), 1);
	assert_int_equal(isc_db_pg_failure_transient(NULL, 0), 0);
	assert_true(isc_code_is_retryable(ISC_ESTORE));
	assert_string_equal(isc_code_name(ISC_ESTORE), "store_unavailable");
}

/* SQLite: SQLITE_BUSY past the busy timeout passes (ISC_ESTORE); a constraint does not. */
static void test_transient_sqlite(void **state)
{
	char dir[] = "/tmp/isc-dbpg-busy-XXXXXX", path[64], cmd[96];
	struct isc_db *a, *b;
	struct isc_store *s;
	struct isc_err err;
	int fd;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/busy.db", dir);
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(isc_db_open_sqlite(path, 0, &a, &err), 0);
	assert_int_equal(isc_db_open_sqlite(path, 0, &b, &err), 0);
	isc_db_sqlite_busy_timeout(b, 0);
	assert_int_equal(
	    isc_db_exec(a, "CREATE TABLE z (n INTEGER UNIQUE); INSERT INTO z VALUES (1)"),
	    ISC_DB_OK);
	assert_int_equal(isc_db_exec(a, "BEGIN IMMEDIATE"), ISC_DB_OK);
	assert_int_equal(isc_db_exec(b, "BEGIN IMMEDIATE"), ISC_DB_BUSY);
	assert_int_equal(isc_db_transient(b), 1);
	assert_int_equal(isc_db_exec(a, "ROLLBACK"), ISC_DB_OK);
	assert_int_equal(run_sql(b, "INSERT INTO z VALUES (1)"), ISC_DB_CONSTRAINT);
	assert_int_equal(isc_db_transient(b), 0);
	isc_db_close(a);
	isc_db_close(b);

	/* The store's verdict on each. */
	unsetenv("ISC_STORE_URL");
	assert_int_equal(isc_store_open(dir, 1, &s, &err), 0);
	assert_int_equal(isc_store_db_err(s, ISC_DB_BUSY, "writing", &err), ISC_ESTORE);
	assert_int_equal(err.code, ISC_ESTORE);
	assert_int_equal(isc_store_db_err(s, ISC_DB_CONSTRAINT, "writing", &err), ISC_ECONFLICT);
	isc_store_free(s);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

static int64_t backend_pid(struct isc_store *s);

/*
 * The store's kept PostgreSQL connections are checked before reuse: one whose
 * session the server ended while it sat idle (pg_terminate_backend, then a whole
 * server restart) is connected again, and the next store call works. Before issue
 * 48 the first call on it failed with "no connection to the server". A store call
 * while the server refuses connections is ISC_ESTORE, never ISC_EIO.
 */
static void test_pool_reconnect(void **state)
{
	struct t *t = *state;
	struct isc_store *s;
	struct isc_store_version v;
	struct isc_err err;
	char dir[] = "/tmp/isc-dbpg-pool-XXXXXX", *uri, sql[128], args[128];
	int64_t pid, again;

	assert_non_null(mkdtemp(dir));
	assert_int_not_equal(
	    asprintf(&uri, "postgresql:///%s?host=%s&user=postgres", t->name, server_dir), -1);
	setenv("ISC_STORE_URL", uri, 1);
	if (isc_store_open(dir, 1, &s, &err))
		fail_msg("isc_store_open on PostgreSQL: %s", err.msg);
	pid = backend_pid(s);
	isc_store_free(s); /* kept idle */

	snprintf(sql, sizeof(sql), "SELECT pg_terminate_backend(%lld, 5000)", (long long)pid);
	assert_int_equal(isc_db_exec(admin, sql), ISC_DB_OK);
	if (isc_store_open(dir, 0, &s, &err))
		fail_msg("reopening: %s", err.msg);
	if (isc_store_version(s, &v, &err))
		fail_msg("the first call on a reused connection failed: %s", err.msg);
	again = backend_pid(s);
	assert_true(again > 0 && again != pid);
	isc_store_free(s);

	/* A whole server restart (pg_ctl restart -m fast) while the connection sits idle. */
	snprintf(args, sizeof(args), "tests/pg/pg-server restart %s fast", server_dir);
	assert_int_equal(system(args), 0);
	isc_db_exec(admin, "SELECT 1"); /* the test's own admin connection reconnects too */
	if (isc_store_open(dir, 0, &s, &err))
		fail_msg("reopening after a restart: %s", err.msg);
	if (isc_store_version(s, &v, &err))
		fail_msg("the first call after a restart failed: %s", err.msg);
	assert_true(backend_pid(s) > 0);

	/* Refused connections: a store error that passes. */
	snprintf(sql, sizeof(sql), "ALTER DATABASE %s WITH ALLOW_CONNECTIONS false", t->name);
	assert_int_equal(isc_db_exec(admin, sql), ISC_DB_OK);
	snprintf(sql, sizeof(sql), "SELECT pg_terminate_backend(%lld, 5000)",
	         (long long)backend_pid(s));
	assert_int_equal(isc_db_exec(admin, sql), ISC_DB_OK);
	assert_int_equal(isc_store_version(s, &v, &err), ISC_ESTORE);
	snprintf(sql, sizeof(sql), "ALTER DATABASE %s WITH ALLOW_CONNECTIONS true", t->name);
	assert_int_equal(isc_db_exec(admin, sql), ISC_DB_OK);
	if (isc_store_version(s, &v, &err))
		fail_msg("once the server takes connections again: %s", err.msg);
	isc_store_free(s);

	unsetenv("ISC_STORE_URL");
	free(uri);
	assert_int_not_equal(asprintf(&uri, "rm -rf '%s'", dir), -1);
	assert_int_equal(system(uri), 0);
	free(uri);
}

static void test_open_errors(void **state)
{
	struct isc_db *db = NULL;
	struct isc_err err;
	char *uri;

	(void)state;
	/* No such database: the server's message, and never the password. */
	assert_int_not_equal(
	    asprintf(&uri, "postgresql://postgres:hunter2-secret@/no_such_db?host=%s", server_dir),
	    -1);
	assert_int_equal(isc_db_open_pg(uri, &db, &err), ISC_EIO);
	assert_null(db);
	assert_non_null(strstr(err.msg, "no_such_db"));
	assert_null(strstr(err.msg, "hunter2"));
	assert_null(strchr(err.msg, '\n'));
	free(uri);
	/* A connection string libpq cannot parse: its quoted piece is not repeated. */
	assert_int_equal(isc_db_open_pg("host=x password=hunter2-secret junk", &db, &err),
	                 ISC_EINVALID);
	assert_null(strstr(err.msg, "hunter2"));
	assert_null(strstr(err.msg, "junk"));
	/* No server at that socket: a server down passes (ISC_ESTORE), a missing database not. */
	assert_int_equal(
	    isc_db_open_pg("postgresql:///x?host=/nonexistent-dir&password=hunter2", &db, &err),
	    ISC_ESTORE);
	assert_null(strstr(err.msg, "hunter2"));
}

/*
 * Makes the whole PostgreSQL schema as store.c does: the baseline in one
 * transaction, then each later step in its own, the version recorded with each.
 */
static void load_schema(struct isc_db *db)
{
	char sql[96];

	assert_int_equal(isc_db_exec(db, "BEGIN"), ISC_DB_OK);
	if (isc_db_exec(db, isc_store_pg_baseline_sql()) != ISC_DB_OK)
		fail_msg("the baseline: %s", isc_db_errmsg(db));
	snprintf(sql, sizeof(sql), "INSERT INTO schema_version (version) VALUES (%d)",
	         isc_store_pg_baseline_version());
	assert_int_equal(isc_db_exec(db, sql), ISC_DB_OK);
	assert_int_equal(isc_db_exec(db, "COMMIT"), ISC_DB_OK);
	for (size_t i = (size_t)isc_store_pg_baseline_version(); i < isc_store_pg_migration_count();
	     i++) {
		assert_int_equal(isc_db_exec(db, "BEGIN"), ISC_DB_OK);
		if (isc_db_exec(db, isc_store_pg_migration_sql(i)) != ISC_DB_OK)
			fail_msg("step %zu: %s", i + 1, isc_db_errmsg(db));
		snprintf(sql, sizeof(sql), "UPDATE schema_version SET version = %zu", i + 1);
		assert_int_equal(isc_db_exec(db, sql), ISC_DB_OK);
		assert_int_equal(isc_db_exec(db, "COMMIT"), ISC_DB_OK);
	}
}

static void test_migration_counts(void **state)
{
	(void)state;
	assert_int_equal(isc_store_pg_baseline_version(), 20);
	/* Both sides know the same versions: a migration appended to one is appended to both. */
	assert_int_equal(isc_store_pg_migration_count(), isc_store_migration_count());
	assert_true(isc_store_pg_baseline_version() <= (int)isc_store_pg_migration_count());
	assert_null(isc_store_pg_migration_sql(0));
	assert_null(isc_store_pg_migration_sql((size_t)isc_store_pg_baseline_version() - 1));
	for (size_t i = (size_t)isc_store_pg_baseline_version(); i < isc_store_pg_migration_count();
	     i++)
		assert_non_null(isc_store_pg_migration_sql(i));
	assert_null(isc_store_pg_migration_sql(isc_store_pg_migration_count()));
}

static void test_schema_loads(void **state)
{
	struct t *t = *state;

	load_schema(t->db);
	assert_int_equal(query_int(t->db, "SELECT version FROM schema_version"),
	                 isc_store_pg_migration_count());
	/* Constraints as SQLite's: a foreign key, a CHECK, pool_nodes' quoted column. */
	assert_int_equal(isc_db_exec(t->db, "INSERT INTO projects (id, org_id, name, "
	                                    "created_at_ms) VALUES ('p', 42, 'p', 0)"),
	                 ISC_DB_CONSTRAINT);
	assert_int_equal(isc_db_exec(t->db, "INSERT INTO pool_nodes (host, port, \"user\", gpus, "
	                                    "added_ms) VALUES ('h', 22, 'isc', 8, 0)"),
	                 ISC_DB_OK);
	assert_int_equal(query_int(t->db, "SELECT id FROM pool_nodes WHERE \"user\" = 'isc'"), 1);
	assert_int_equal(isc_db_exec(t->db, "INSERT INTO pool_nodes (host, port, \"user\", gpus, "
	                                    "added_ms) VALUES ('h', 0, 'isc', 8, 0)"),
	                 ISC_DB_CONSTRAINT);
	assert_int_equal(isc_db_exec(t->db, "INSERT INTO pool_nodes (host, port, \"user\", gpus, "
	                                    "added_ms) VALUES ('h', 22, 'other', 8, 0)"),
	                 ISC_DB_CONSTRAINT);
	assert_int_equal(isc_db_exec(t->db,
	                             "INSERT INTO pool_nodes (host, port, \"user\", gpus, "
	                             "state, added_ms) VALUES ('h2', 22, 'a', 8, 'down', 0)"),
	                 ISC_DB_CONSTRAINT);
	assert_int_equal(isc_db_exec(t->db, "INSERT INTO cloud_key_master (id, nonce, ciphertext, "
	                                    "created_at_ms) VALUES (2, '\\x00', '\\x00', 0)"),
	                 ISC_DB_CONSTRAINT);
}

/*
 * Rows copied in with their ids (isc store copy) and then the identity sync: new
 * rows take ids after the largest, in every table with an identity column.
 */
static void test_identity_sync(void **state)
{
	struct t *t = *state;

	load_schema(t->db);
	assert_int_equal(isc_db_exec(t->db,
	                             "INSERT INTO orgs (id, name, created_at_ms) VALUES "
	                             "(1, 'a', 0), (7, 'b', 0);"
	                             "INSERT INTO pool_nodes (id, host, port, \"user\", gpus, "
	                             "added_ms) VALUES (41, 'h', 22, 'u', 1, 0)"),
	                 ISC_DB_OK);
	/* Without it, the sequence still starts at 1. */
	assert_int_equal(
	    isc_db_exec(t->db, "INSERT INTO orgs (name, created_at_ms) VALUES ('c', 0)"),
	    ISC_DB_CONSTRAINT);
	assert_int_equal(isc_db_exec(t->db, isc_store_pg_identity_sync_sql()), ISC_DB_OK);
	assert_int_equal(query_int(t->db, "INSERT INTO orgs (name, created_at_ms) VALUES ('c', 0) "
	                                  "RETURNING id"),
	                 8);
	assert_int_equal(query_int(t->db, "INSERT INTO pool_nodes (host, port, \"user\", gpus, "
	                                  "added_ms) VALUES ('h', 23, 'u', 1, 0) RETURNING id"),
	                 42);
	/* An empty table starts at 1; running it again changes nothing. */
	assert_int_equal(isc_db_exec(t->db, isc_store_pg_identity_sync_sql()), ISC_DB_OK);
	assert_int_equal(query_int(t->db, "INSERT INTO users (name, created_at_ms) VALUES ('u', 0) "
	                                  "RETURNING id"),
	                 1);
	assert_int_equal(query_int(t->db, "INSERT INTO orgs (name, created_at_ms) VALUES ('d', 0) "
	                                  "RETURNING id"),
	                 9);
}

/* Appends one ledger row through a prepared statement; returns the result code. */
static int ledger_add(struct isc_db *db, const char *kind, const char *billing, int64_t amount,
                      const char *node, int64_t period_start)
{
	struct isc_db_stmt *st;
	int rc;

	assert_int_equal(isc_db_prepare(db,
	                                "INSERT INTO ledger (at_ms, org_id, project_id, "
	                                "experiment_id, node_instance_id, kind, amount_micros, "
	                                "period_start_ms, billing) VALUES (?, ?, ?, ?, ?, ?, ?, "
	                                "?, ?)",
	                                ISC_DB_PREPARE_PERSISTENT, &st),
	                 ISC_DB_OK);
	isc_db_bind_int64(st, 1, 1000);
	isc_db_bind_int64(st, 2, 1);
	isc_db_bind_text(st, 3, "proj", -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 4, "exp", -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 5, node, -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 6, kind, -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 7, amount);
	if (node)
		isc_db_bind_int64(st, 8, period_start);
	isc_db_bind_text(st, 9, billing, -1, ISC_DB_STATIC);
	rc = isc_db_step(st);
	isc_db_finalize(st);
	return rc;
}

static int64_t total(struct isc_db *db, const char *scope, const char *key, const char *column)
{
	char sql[192];
	snprintf(sql, sizeof(sql), "SELECT %s FROM ledger_totals WHERE scope = '%s' AND key = '%s'",
	         column, scope, key);
	return query_int(db, sql);
}

static void test_ledger(void **state)
{
	struct t *t = *state;

	load_schema(t->db);
	assert_int_equal(isc_db_exec(t->db, "INSERT INTO orgs (name, created_at_ms) "
	                                    "VALUES ('acme', 0);"
	                                    "INSERT INTO projects (id, org_id, name, created_at_ms)"
	                                    " VALUES ('proj', 1, 'p', 0)"),
	                 ISC_DB_OK);
	assert_int_equal(ledger_add(t->db, "grant", "credits", 1000000, NULL, 0), ISC_DB_DONE);
	assert_int_equal(ledger_add(t->db, "reserve", "credits", 300000, NULL, 0), ISC_DB_DONE);
	assert_int_equal(ledger_add(t->db, "charge", "credits", 2500, "i-1", 0), ISC_DB_DONE);
	assert_int_equal(ledger_add(t->db, "charge", "credits", 2500, "i-1", 60000), ISC_DB_DONE);
	/* The same node period twice: refused by ledger_charge_once, nothing counted. */
	assert_int_equal(ledger_add(t->db, "charge", "credits", 2500, "i-1", 60000),
	                 ISC_DB_CONSTRAINT);
	assert_non_null(strstr(isc_db_errmsg(t->db), "ledger_charge_once"));
	/* Only charges are unique per period (a partial index). */
	assert_int_equal(ledger_add(t->db, "release", "credits", 100000, "i-1", 60000),
	                 ISC_DB_DONE);
	assert_int_equal(ledger_add(t->db, "release", "credits", 100000, "i-1", 60000),
	                 ISC_DB_DONE);
	assert_int_equal(ledger_add(t->db, "charge", "byo", 7000, "i-2", 0), ISC_DB_DONE);
	assert_int_equal(ledger_add(t->db, "bogus", "credits", 1, NULL, 0), ISC_DB_CONSTRAINT);
	assert_int_equal(ledger_add(t->db, "grant", "cash", 1, NULL, 0), ISC_DB_CONSTRAINT);

	/* The totals, as migration 8's trigger keeps them, in all three scopes. */
	const char *scopes[][2] = {{"org", "1"}, {"project", "proj"}, {"experiment", "exp"}};
	for (int k = 0; k < 3; k++) {
		assert_int_equal(total(t->db, scopes[k][0], scopes[k][1], "balance_micros"),
		                 1000000 - 5000);
		assert_int_equal(total(t->db, scopes[k][0], scopes[k][1], "reserved_micros"),
		                 300000 - 200000);
		assert_int_equal(total(t->db, scopes[k][0], scopes[k][1], "spent_micros"), 5000);
		assert_int_equal(total(t->db, scopes[k][0], scopes[k][1], "charged_micros"),
		                 5000 + 7000);
	}
	assert_int_equal(query_int(t->db, "SELECT COUNT(*) FROM ledger_totals"), 3);
	/* And exactly the sums of the rows (the backfill's formula of migration 8). */
	assert_int_equal(query_int(t->db, "SELECT SUM(CASE kind WHEN 'grant' THEN amount_micros "
	                                  "WHEN 'charge' THEN -amount_micros ELSE 0 END) FROM "
	                                  "ledger WHERE billing = 'credits'"),
	                 total(t->db, "org", "1", "balance_micros"));

	/* Immutable: UPDATE, DELETE and TRUNCATE are refused as constraint errors. */
	assert_int_equal(run_sql(t->db, "UPDATE ledger SET amount_micros = 0"), ISC_DB_CONSTRAINT);
	assert_string_equal(isc_db_errmsg(t->db), "ledger rows are immutable");
	assert_int_equal(run_sql(t->db, "DELETE FROM ledger WHERE kind = 'charge'"),
	                 ISC_DB_CONSTRAINT);
	assert_string_equal(isc_db_errmsg(t->db), "ledger rows are immutable");
	assert_int_equal(isc_db_exec(t->db, "TRUNCATE ledger"), ISC_DB_CONSTRAINT);
	assert_int_equal(query_int(t->db, "SELECT COUNT(*) FROM ledger"), 7);
}

static void test_audit(void **state)
{
	struct t *t = *state;

	load_schema(t->db);
	assert_int_equal(isc_db_exec(t->db, "INSERT INTO audit (at_ms, actor, address, org_id, "
	                                    "action, target, status) VALUES "
	                                    "(1, 'op', 'unix', NULL, 'POST', '/x', 200)"),
	                 ISC_DB_OK);
	assert_int_equal(run_sql(t->db, "UPDATE audit SET status = 500"), ISC_DB_CONSTRAINT);
	assert_string_equal(isc_db_errmsg(t->db), "the audit is append-only");
	assert_int_equal(run_sql(t->db, "DELETE FROM audit"), ISC_DB_CONSTRAINT);
	assert_string_equal(isc_db_errmsg(t->db), "the audit is append-only");
	assert_int_equal(isc_db_exec(t->db, "TRUNCATE audit"), ISC_DB_CONSTRAINT);
	assert_int_equal(query_int(t->db, "SELECT status FROM audit"), 200);
}

/* The server process behind s's connection (-1 when the query fails). */
static int64_t backend_pid(struct isc_store *s)
{
	struct isc_db_stmt *st;
	struct isc_err err;
	int64_t pid = -1;

	if (isc_store_prepare(s, "SELECT pg_backend_pid()", &st, &err))
		return -1;
	if (isc_db_step(st) == ISC_DB_ROW)
		pid = isc_db_column_int64(st, 0);
	isc_db_finalize(st);
	return pid;
}

/*
 * A forked child never speaks on the connection its parent left idle (store.c keeps
 * freed PostgreSQL stores for the next open): its own open gets a session of its
 * own, and its exit (which closes what it holds) does not end the parent's session.
 */
static void test_fork_idle(void **state)
{
	struct t *t = *state;
	struct isc_store *s;
	struct isc_err err;
	char dir[] = "/tmp/isc-dbpg-fork-XXXXXX", *uri;
	int64_t parent_pid, child_pid = -1;
	int fds[2], status;
	pid_t child;

	assert_non_null(mkdtemp(dir));
	assert_int_not_equal(
	    asprintf(&uri, "postgresql:///%s?host=%s&user=postgres", t->name, server_dir), -1);
	setenv("ISC_STORE_URL", uri, 1);
	if (isc_store_open(dir, 1, &s, &err))
		fail_msg("isc_store_open on PostgreSQL: %s", err.msg);
	parent_pid = backend_pid(s);
	assert_true(parent_pid > 0);
	isc_store_free(s); /* kept idle for the next open */

	assert_int_equal(pipe(fds), 0);
	fflush(NULL);
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		int64_t mine = -1;
		close(fds[0]);
		if (isc_store_open(dir, 0, &s, &err) == 0) {
			mine = backend_pid(s);
			isc_store_free(s);
		}
		if (write(fds[1], &mine, sizeof(mine)) != sizeof(mine))
			_exit(2);
		exit(0); /* atexit closes the child's connections, inherited ones too */
	}
	close(fds[1]);
	assert_int_equal(read(fds[0], &child_pid, sizeof(child_pid)), sizeof(child_pid));
	close(fds[0]);
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_true(child_pid > 0);
	assert_true(child_pid != parent_pid);

	/* The parent's idle session outlived the child: the same server process answers. */
	if (isc_store_open(dir, 0, &s, &err))
		fail_msg("reopening in the parent: %s", err.msg);
	assert_true(backend_pid(s) == parent_pid);
	isc_store_free(s);

	unsetenv("ISC_STORE_URL");
	free(uri);
	assert_int_not_equal(asprintf(&uri, "rm -rf '%s'", dir), -1);
	assert_int_equal(system(uri), 0);
	free(uri);
}

/*
 * store.c on this backend: a store opened with ISC_STORE_URL naming a new
 * database gets the baseline and every later step (isc init), a second open
 * joins it, and the store's own SQL runs (pool_nodes' quoted "user").
 */
static void test_store_on_pg(void **state)
{
	struct t *t = *state;
	struct isc_store *s, *again;
	struct isc_pool_node *v;
	struct isc_err err;
	char dir[] = "/tmp/isc-dbpg-home-XXXXXX", *uri;
	int64_t id;
	size_t n;

	assert_non_null(mkdtemp(dir));
	assert_int_not_equal(
	    asprintf(&uri, "postgresql:///%s?host=%s&user=postgres", t->name, server_dir), -1);
	setenv("ISC_STORE_URL", uri, 1);
	if (isc_store_open(dir, 0, &s, &err) == 0)
		fail_msg("a database without the schema opened without isc init");
	if (isc_store_open(dir, 1, &s, &err))
		fail_msg("isc_store_open on PostgreSQL: %s", err.msg);
	assert_true(isc_store_is_postgres(s));
	assert_int_equal(query_int(t->db, "SELECT version FROM schema_version"),
	                 isc_store_pg_migration_count());
	assert_int_equal(query_int(t->db, "SELECT COUNT(*) FROM schema_version"), 1);
	if (isc_store_open(dir, 1, &again, &err))
		fail_msg("joining the PostgreSQL store: %s", err.msg);

	assert_int_equal(isc_store_pool_add(s, "gpu-1.lab", 22, "isc", 8, NULL, &id, &err), 0);
	assert_int_equal(isc_store_pool_add(again, "gpu-1.lab", 22, "isc", 8, NULL, NULL, &err),
	                 ISC_ECONFLICT);
	assert_int_equal(isc_store_pool_list(again, &v, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(v[0].id, id);
	assert_string_equal(v[0].user, "isc");
	isc_pool_nodes_free(v, n);

	isc_store_free(again);
	isc_store_free(s);
	unsetenv("ISC_STORE_URL");
	free(uri);
	assert_int_not_equal(asprintf(&uri, "rm -rf '%s'", dir), -1);
	assert_int_equal(system(uri), 0);
	free(uri);
}

/* Appends one column's description to *out ("a, b"): its name, type, key, NOT NULL, default. */
static void describe(char **out, const char *name, const char *type, int pk, int notnull,
                     const char *dflt)
{
	char *next;

	/* A primary key is NOT NULL on PostgreSQL, and (but for INTEGER ones) not on SQLite. */
	assert_int_not_equal(asprintf(&next, "%s%s%s %s%s%s%s%s", *out, **out ? ", " : "", name,
	                              type, pk ? " pk" : "", !pk && notnull ? " not null" : "",
	                              dflt ? " default " : "", dflt ? dflt : ""),
	                     -1);
	free(*out);
	*out = next;
}

/* SQLite's declared type in PostgreSQL's words (the translation of migrations_pg.c). */
static const char *pg_type_of(const char *sqlite_type)
{
	if (!strcasecmp(sqlite_type, "INTEGER") || !strcasecmp(sqlite_type, "BIGINT"))
		return "bigint";
	if (!strcasecmp(sqlite_type, "BLOB"))
		return "bytea";
	if (!strcasecmp(sqlite_type, "TEXT"))
		return "text";
	return sqlite_type;
}

/* One table's columns in order, described (owned). */
static char *sqlite_columns(sqlite3 *db, const char *table)
{
	char *sql = sqlite3_mprintf("PRAGMA table_info(\"%w\")", table), *out = strdup("");
	sqlite3_stmt *st;

	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
	while (sqlite3_step(st) == SQLITE_ROW)
		describe(&out, (const char *)sqlite3_column_text(st, 1),
		         pg_type_of((const char *)sqlite3_column_text(st, 2)),
		         sqlite3_column_int(st, 5) > 0, sqlite3_column_int(st, 3),
		         (const char *)sqlite3_column_text(st, 4));
	sqlite3_finalize(st);
	sqlite3_free(sql);
	return out;
}

static char *pg_columns(struct isc_db *db, const char *table)
{
	struct isc_db_stmt *st;
	char *out = strdup(""), dflt[64], *cast;
	const char *d;

	assert_int_equal(
	    isc_db_prepare(
	        db,
	        "SELECT c.column_name, c.data_type, EXISTS (SELECT 1 FROM "
	        "information_schema.table_constraints t JOIN "
	        "information_schema.key_column_usage k ON k.constraint_name = "
	        "t.constraint_name AND k.table_name = t.table_name WHERE t.table_schema = "
	        "'public' AND t.table_name = c.table_name AND t.constraint_type = "
	        "'PRIMARY KEY' AND k.column_name = c.column_name), c.is_nullable = 'NO', "
	        "c.column_default FROM information_schema.columns c WHERE "
	        "c.table_schema = 'public' AND c.table_name = ? ORDER BY c.ordinal_position",
	        0, &st),
	    ISC_DB_OK);
	isc_db_bind_text(st, 1, table, -1, ISC_DB_STATIC);
	while (isc_db_step(st) == ISC_DB_ROW) {
		/* '-1'::integer and 'up'::text are SQLite's -1 and 'up'. */
		d = (const char *)isc_db_column_text(st, 4);
		if (d) {
			snprintf(dflt, sizeof(dflt), "%s", d);
			if ((cast = strstr(dflt, "::")))
				*cast = '\0';
			if (dflt[0] == '\'' &&
			    (dflt[1] == '-' || (dflt[1] >= '0' && dflt[1] <= '9'))) {
				memmove(dflt, dflt + 1, strlen(dflt));
				dflt[strlen(dflt) - 1] = '\0';
			}
		}
		describe(&out, (const char *)isc_db_column_text(st, 0),
		         (const char *)isc_db_column_text(st, 1), (int)isc_db_column_int(st, 2),
		         (int)isc_db_column_int(st, 3), d ? dflt : NULL);
	}
	isc_db_finalize(st);
	return out;
}

/* One query's first column, all rows, "; "-separated (owned); table, if not NULL, is ?1. */
static char *sqlite_list(sqlite3 *db, const char *sql, const char *table)
{
	sqlite3_stmt *st;
	char *out = strdup("");

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		fail_msg("%s: %s", sql, sqlite3_errmsg(db));
	if (table)
		sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
	while (sqlite3_step(st) == SQLITE_ROW) {
		char *next;
		assert_int_not_equal(asprintf(&next, "%s%s%s", out, *out ? "; " : "",
		                              (const char *)sqlite3_column_text(st, 0)),
		                     -1);
		free(out);
		out = next;
	}
	sqlite3_finalize(st);
	return out;
}

static char *pg_list(struct isc_db *db, const char *sql, const char *table)
{
	struct isc_db_stmt *st;
	char *out = strdup("");
	int rc;

	assert_int_equal(isc_db_prepare(db, sql, 0, &st), ISC_DB_OK);
	if (table)
		isc_db_bind_text(st, 1, table, -1, ISC_DB_STATIC);
	while ((rc = isc_db_step(st)) == ISC_DB_ROW) {
		char *next;
		assert_int_not_equal(asprintf(&next, "%s%s%s", out, *out ? "; " : "",
		                              (const char *)isc_db_column_text(st, 0)),
		                     -1);
		free(out);
		out = next;
	}
	if (rc != ISC_DB_DONE)
		fail_msg("%s: %s", sql, isc_db_errmsg(db));
	isc_db_finalize(st);
	return out;
}

/*
 * A table's indexes but its primary key's, each as NAME[ unique](COLUMN[ desc],...)[ partial],
 * where a UNIQUE constraint's index (named by each engine its own way) is "unique".
 */
static const char sqlite_indexes[] =
    "SELECT CASE WHEN il.origin = 'u' THEN 'unique' ELSE il.name || CASE WHEN il.\"unique\" "
    "THEN ' unique' ELSE '' END END || '(' || (SELECT group_concat(x.name || CASE WHEN "
    "x.\"desc\" THEN ' desc' ELSE '' END, ',') FROM (SELECT name, \"desc\" FROM "
    "pragma_index_xinfo(il.name) WHERE key = 1 ORDER BY seqno) x) || ')' || CASE WHEN "
    "il.partial THEN ' partial' ELSE '' END FROM pragma_index_list(?1) il WHERE il.origin != "
    "'pk' ORDER BY 1";
static const char pg_indexes[] =
    "SELECT d FROM (SELECT CASE WHEN EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = "
    "i.indexrelid) "
    "THEN 'unique' ELSE ic.relname || CASE WHEN i.indisunique THEN ' unique' ELSE '' END END "
    "|| '(' || string_agg(a.attname || CASE WHEN i.indoption[n.ord - 1] & 1 = 1 THEN ' desc' "
    "ELSE '' END, ',' ORDER BY n.ord) || ')' || CASE WHEN i.indpred IS NOT NULL THEN "
    "' partial' ELSE '' END AS d FROM pg_index i JOIN pg_class tc ON tc.oid = i.indrelid JOIN "
    "pg_class ic ON ic.oid = i.indexrelid CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY "
    "AS n(attnum, ord) JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = n.attnum "
    "WHERE tc.relname = CAST(? AS TEXT) AND tc.relnamespace = 'public'::regnamespace AND NOT "
    "i.indisprimary GROUP BY ic.relname, i.indexrelid, i.indisunique, i.indpred IS NOT NULL "
    ") s ORDER BY d COLLATE \"C\"";
/* A table's foreign keys, each as COLUMN->TABLE(COLUMN). */
static const char sqlite_fkeys[] = "SELECT \"from\" || '->' || \"table\" || '(' || \"to\" || ')' "
                                   "FROM pragma_foreign_key_list(?1) ORDER BY 1";
static const char pg_fkeys[] =
    "SELECT d FROM (SELECT a.attname || '->' || rc.relname || '(' || ra.attname || ')' AS d FROM "
    "pg_constraint k "
    "JOIN pg_class tc ON tc.oid = k.conrelid JOIN pg_class rc ON rc.oid = k.confrelid JOIN "
    "pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = k.conkey[1] JOIN pg_attribute ra "
    "ON ra.attrelid = k.confrelid AND ra.attnum = k.confkey[1] WHERE k.contype = 'f' AND "
    "tc.relname = CAST(? AS TEXT) AND tc.relnamespace = 'public'::regnamespace ) s ORDER BY d "
    "COLLATE \"C\"";

/* How many CHECK constraints a table has (their wording differs between the engines). */
static const char sqlite_checks[] =
    "SELECT (length(sql) - length(replace(upper(sql), 'CHECK (', ''))) / 7 FROM sqlite_master "
    "WHERE type = 'table' AND name = ?1";
static const char pg_checks[] = "SELECT COUNT(*) FROM pg_constraint WHERE contype = 'c' AND "
                                "conrelid = to_regclass(CAST(? AS TEXT))";

/* Fails the test, naming the table, when the two engines' answers differ. */
static void same(const char *table, const char *what, char *lite, char *pg)
{
	if (strcmp(lite, pg) != 0)
		fail_msg("table %s, %s: SQLite has (%s), PostgreSQL (%s)", table, what, lite, pg);
	free(lite);
	free(pg);
}

/*
 * The schema parity test: a SQLite store made the usual way and the PostgreSQL
 * schema (the baseline and every later step) have the same tables, each with
 * the same columns in the same order, of the same types, keys, NOT NULLs and
 * defaults, the same indexes (names, columns, order, unique, partial; UNIQUE
 * constraints') and the same foreign keys, and as many CHECKs (each engine
 * words them its own way: the tests above try some).
 */
static void test_schema_parity(void **state)
{
	struct t *t = *state;
	struct store_fixture f;
	sqlite3 *lite;
	char *path, *lite_tables, *pg_tables, *table, *save;

	load_schema(t->db);
	store_fixture_init(&f, "dbpg-lite");
	assert_int_not_equal(asprintf(&path, "%s/isc.db", f.home), -1);
	assert_int_equal(sqlite3_open_v2(path, &lite, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);

	/* schema_version: store.c's record of the version on both (SQLite's stores before it had
	 * none). */
	lite_tables =
	    sqlite_list(lite,
	                "SELECT name FROM sqlite_master WHERE type = 'table' AND "
	                "name NOT LIKE 'sqlite_%' AND name != 'schema_version' ORDER BY name",
	                NULL);
	pg_tables = pg_list(t->db,
	                    "SELECT table_name FROM information_schema.tables WHERE "
	                    "table_schema = 'public' AND table_name != 'schema_version' "
	                    "ORDER BY table_name COLLATE \"C\"",
	                    NULL);
	assert_string_equal(pg_tables, lite_tables);
	assert_non_null(strstr(lite_tables, "ledger_totals"));
	for (table = strtok_r(lite_tables, ";", &save); table; table = strtok_r(NULL, ";", &save)) {
		table += strspn(table, " ");
		same(table, "columns", sqlite_columns(lite, table), pg_columns(t->db, table));
		same(table, "indexes", sqlite_list(lite, sqlite_indexes, table),
		     pg_list(t->db, pg_indexes, table));
		same(table, "foreign keys", sqlite_list(lite, sqlite_fkeys, table),
		     pg_list(t->db, pg_fkeys, table));
		same(table, "CHECK constraints", sqlite_list(lite, sqlite_checks, table),
		     pg_list(t->db, pg_checks, table));
	}
	free(lite_tables);
	free(pg_tables);
	sqlite3_close(lite);
	free(path);
	store_fixture_cleanup(&f);
}

/* 1 when the server's binaries are here (pg-server looks in the same places). */
static int have_postgres(void)
{
	glob_t g;
	int found = glob("/usr/lib/postgresql/*/bin/initdb", 0, NULL, &g) == 0;

	globfree(&g);
	return found || getenv("PG_BIN");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_migration_counts),
	    cmocka_unit_test(test_open_errors),
	    cmocka_unit_test_setup_teardown(test_placeholders, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_values, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_changes_and_errors, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_reset_rebind, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_prepared_by_text, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_persistent, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_transactions, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_reconnect, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_schema_loads, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_ledger, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_audit, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_identity_sync, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_schema_parity, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_store_on_pg, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_fork_idle, setup, teardown),
	    cmocka_unit_test(test_transient_codes),
	    cmocka_unit_test(test_transient_sqlite),
	    cmocka_unit_test_setup_teardown(test_pool_reconnect, setup, teardown),
	};
	/*
	 * This test runs its own server, and its parity test needs a SQLite store: the
	 * run of every unit test on PostgreSQL (ISC_TEST_PG_DIR, store_fixture.c) changes
	 * nothing here.
	 */
	unsetenv("ISC_TEST_PG_DIR");
	unsetenv("ISC_STORE_URL");
	/* Only a machine without the server's binaries skips: `make deps` installs them. */
	if (!have_postgres()) {
		printf("test_db_pg: SKIPPED: no PostgreSQL binaries in /usr/lib/postgresql/*/bin "
		       "(make deps installs postgresql)\n");
		return 0;
	}
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
