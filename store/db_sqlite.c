/*
 * store/db.h on SQLite: thin wrappers over SQLite's own calls, whose model
 * db.h follows. A statement carries its connection, so the dispatcher
 * (store/db.c) and the store can reach it from either.
 */
#include "store/db_sqlite.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>

struct sqlite_db {
	enum isc_db_kind kind; /* first: store/db.c dispatches on it */
	sqlite3 *h;
};

struct sqlite_stmt {
	enum isc_db_kind kind; /* first, as above */
	sqlite3_stmt *h;
	struct sqlite_db *db;
};

static struct sqlite_db *db_of(struct isc_db *db)
{
	return (struct sqlite_db *)db;
}

static struct sqlite_stmt *stmt_of(const struct isc_db_stmt *st)
{
	return (struct sqlite_stmt *)st;
}

/*
 * SQLite counts every allocation in global statistics under one process-wide
 * mutex; with several API threads each on its own connection, that mutex was
 * the most contended lock in iscd. Nothing reads the statistics. Must run
 * before SQLite initialises (a later call is refused, harmlessly).
 */
static void sqlite_setup(void)
{
	sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

int isc_db_open_sqlite(const char *path, int one_thread, struct isc_db **out, struct isc_err *err)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	struct sqlite_db *d;
	int rc;

	*out = NULL;
	pthread_once(&once, sqlite_setup);
	if (!(d = calloc(1, sizeof(*d))))
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	d->kind = ISC_DB_SQLITE;
	/*
	 * SQLite's serialized mode takes the connection's mutex on every call (each step,
	 * each column read): 6% of an API page's CPU. A connection one thread alone uses
	 * needs none.
	 */
	rc = sqlite3_open_v2(path, &d->h,
	                     SQLITE_OPEN_READWRITE |
	                         (one_thread ? SQLITE_OPEN_NOMUTEX : SQLITE_OPEN_FULLMUTEX),
	                     NULL);
	if (rc != SQLITE_OK) {
		rc = isc_err_set(err, ISC_EIO, "store: cannot open database: %s",
		                 d->h ? sqlite3_errmsg(d->h) : sqlite3_errstr(rc));
		sqlite3_close(d->h);
		free(d);
		return rc;
	}
	*out = (struct isc_db *)d;
	return 0;
}

void isc_db_sqlite_close(struct isc_db *db)
{
	sqlite3_close(db_of(db)->h);
	free(db);
}

int isc_db_sqlite_exec(struct isc_db *db, const char *sql)
{
	return sqlite3_exec(db_of(db)->h, sql, NULL, NULL, NULL) & 0xff;
}

int isc_db_sqlite_prepare(struct isc_db *db, const char *sql, int flags, struct isc_db_stmt **out)
{
	struct sqlite_stmt *s = calloc(1, sizeof(*s));
	int rc;

	*out = NULL;
	if (!s)
		return ISC_DB_NOMEM;
	rc = sqlite3_prepare_v3(db_of(db)->h, sql, -1,
	                        (flags & ISC_DB_PREPARE_PERSISTENT) ? SQLITE_PREPARE_PERSISTENT : 0,
	                        &s->h, NULL);
	if (rc != SQLITE_OK) {
		free(s);
		return rc;
	}
	s->kind = ISC_DB_SQLITE;
	s->db = db_of(db);
	*out = (struct isc_db_stmt *)s;
	return ISC_DB_OK;
}

const char *isc_db_sqlite_sql(const struct isc_db_stmt *st)
{
	return sqlite3_sql(stmt_of(st)->h);
}

struct isc_db *isc_db_sqlite_handle(struct isc_db_stmt *st)
{
	return (struct isc_db *)stmt_of(st)->db;
}

int isc_db_sqlite_bind_parameter_count(const struct isc_db_stmt *st)
{
	return sqlite3_bind_parameter_count(stmt_of(st)->h);
}

int isc_db_sqlite_bind_int64(struct isc_db_stmt *st, int i, int64_t v)
{
	return sqlite3_bind_int64(stmt_of(st)->h, i, v);
}

int isc_db_sqlite_bind_text(struct isc_db_stmt *st, int i, const char *text, int n, int copy)
{
	return sqlite3_bind_text(stmt_of(st)->h, i, text, n,
	                         copy == ISC_DB_TRANSIENT ? SQLITE_TRANSIENT : SQLITE_STATIC);
}

int isc_db_sqlite_bind_blob(struct isc_db_stmt *st, int i, const void *b, int n, int copy)
{
	return sqlite3_bind_blob(stmt_of(st)->h, i, b, n,
	                         copy == ISC_DB_TRANSIENT ? SQLITE_TRANSIENT : SQLITE_STATIC);
}

int isc_db_sqlite_bind_null(struct isc_db_stmt *st, int i)
{
	return sqlite3_bind_null(stmt_of(st)->h, i);
}

int isc_db_sqlite_clear_bindings(struct isc_db_stmt *st)
{
	return sqlite3_clear_bindings(stmt_of(st)->h);
}

int isc_db_sqlite_step(struct isc_db_stmt *st)
{
	/* Extended codes (SQLITE_CONSTRAINT_UNIQUE, ...) fold to their primary code. */
	int rc = sqlite3_step(stmt_of(st)->h);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? rc : rc & 0xff;
}

int isc_db_sqlite_reset(struct isc_db_stmt *st)
{
	return sqlite3_reset(stmt_of(st)->h);
}

int isc_db_sqlite_finalize(struct isc_db_stmt *st)
{
	int rc;
	if (!st)
		return ISC_DB_OK;
	rc = sqlite3_finalize(stmt_of(st)->h);
	free(st);
	return rc;
}

int isc_db_sqlite_column_type(struct isc_db_stmt *st, int col)
{
	return sqlite3_column_type(stmt_of(st)->h, col);
}

int64_t isc_db_sqlite_column_int64(struct isc_db_stmt *st, int col)
{
	return sqlite3_column_int64(stmt_of(st)->h, col);
}

const unsigned char *isc_db_sqlite_column_text(struct isc_db_stmt *st, int col)
{
	return sqlite3_column_text(stmt_of(st)->h, col);
}

const void *isc_db_sqlite_column_blob(struct isc_db_stmt *st, int col)
{
	return sqlite3_column_blob(stmt_of(st)->h, col);
}

int isc_db_sqlite_column_bytes(struct isc_db_stmt *st, int col)
{
	return sqlite3_column_bytes(stmt_of(st)->h, col);
}

int64_t isc_db_sqlite_changes(struct isc_db *db)
{
	return sqlite3_changes64(db_of(db)->h);
}

int64_t isc_db_sqlite_total_changes(struct isc_db *db)
{
	return sqlite3_total_changes64(db_of(db)->h);
}

const char *isc_db_sqlite_errmsg(struct isc_db *db)
{
	return sqlite3_errmsg(db_of(db)->h);
}

int isc_db_sqlite_in_transaction(struct isc_db *db)
{
	return !sqlite3_get_autocommit(db_of(db)->h);
}

int isc_db_sqlite_transient(struct isc_db *db)
{
	/*
	 * SQLITE_BUSY past the busy timeout is another connection's write lock: it passes.
	 * SQLITE_LOCKED is a conflict inside this connection (an unfinalized statement),
	 * which no retry fixes (faults-facts.md).
	 */
	return (sqlite3_extended_errcode(db_of(db)->h) & 0xff) == SQLITE_BUSY;
}

void isc_db_sqlite_busy_timeout(struct isc_db *db, int ms)
{
	sqlite3_busy_timeout(db_of(db)->h, ms);
}
