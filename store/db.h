/*
 * The one SQL interface under store/: a connection and its prepared statements,
 * with SQLite (db_sqlite.c, the embedded default) or PostgreSQL (db_pg.c, libpq)
 * behind it. Only the store's own files include this; no other module sees SQL.
 *
 * The calls follow SQLite's statement model, which every store_*.c was written
 * against: prepare, bind (1-based), step until ISC_DB_DONE, read columns
 * (0-based) of each ISC_DB_ROW, then reset (to run again) or finalize.
 *
 * The SQL the store writes is the dialect both accept:
 *   - parameters are `?` or `?N` (db_pg.c numbers them `$N` the way SQLite
 *     does: a plain `?` takes the number after the largest one so far);
 *   - upserts are `INSERT ... ON CONFLICT (...) DO NOTHING / DO UPDATE`, never
 *     `INSERT OR IGNORE/REPLACE`; new ids come back with `RETURNING id`;
 *   - no SQLite-only functions (instr, printf, strftime, scalar max/min);
 *   - a parameter PostgreSQL cannot type from where it stands (`? IS NULL`,
 *     a bare `SELECT ?`) is written `CAST(? AS BIGINT)` or `CAST(? AS TEXT)`.
 * Integers are bound as 64-bit (PostgreSQL: int8), text untyped (PostgreSQL
 * types it from its place), blobs as bytes (bytea).
 *
 * Ownership: isc_db_open_* returns a connection freed with isc_db_close;
 * isc_db_prepare returns a statement freed with isc_db_finalize. Column
 * pointers stay valid until the next step, reset or finalize of the statement.
 */
#ifndef ISC_STORE_DB_H
#define ISC_STORE_DB_H

#include "common/err.h"

#include <stddef.h>
#include <stdint.h>

struct isc_db;
struct isc_db_stmt;

enum isc_db_kind { ISC_DB_SQLITE, ISC_DB_POSTGRES };

/* Result codes, numerically SQLite's (db_sqlite.c passes them through). */
#define ISC_DB_OK         0
#define ISC_DB_ERROR      1
#define ISC_DB_BUSY       5
#define ISC_DB_NOMEM      7
#define ISC_DB_CONSTRAINT 19 /* unique, check, foreign key, not null, a trigger's refusal */
#define ISC_DB_ROW        100
#define ISC_DB_DONE       101
#define ISC_DB_FENCED     1000 /* a write guard refused the statement (no SQLite code) */

/* Column types (only NULL is told apart by the store). */
#define ISC_DB_INTEGER 1
#define ISC_DB_TEXT    3
#define ISC_DB_BLOB    4
#define ISC_DB_NULL    5

/* bind_text/bind_blob: the value outlives the statement's next step (STATIC) or is copied. */
#define ISC_DB_STATIC    0
#define ISC_DB_TRANSIENT 1

/* isc_db_prepare: kept prepared on the server/connection for repeated use (the cache). */
#define ISC_DB_PREPARE_PERSISTENT 1

/*
 * SQLite: path is the database file (it must exist; the store creates it with
 * mode 0600). one_thread: the connection is used by one thread only (no mutex).
 */
int isc_db_open_sqlite(const char *path, int one_thread, struct isc_db **out, struct isc_err *err);
/*
 * PostgreSQL: conninfo is a libpq URI or key=value string. Errors name the
 * server's message, never the password. The session gets a statement timeout
 * and idle_in_transaction_session_timeout, so no replica holds a lock forever.
 */
int isc_db_open_pg(const char *conninfo, struct isc_db **out, struct isc_err *err);
void isc_db_close(struct isc_db *db);
/*
 * In a forked child, a connection inherited from the parent: the child must never use
 * it (it is the parent's session), and isc_db_close then frees it without a word to
 * the server. No-op on SQLite.
 */
void isc_db_disown(struct isc_db *db);
enum isc_db_kind isc_db_kind(const struct isc_db *db);

/*
 * A guard around every statement that writes (INSERT, UPDATE, DELETE, MERGE, or a WITH
 * holding one) and runs outside a transaction: before(ctx) is called just before the
 * statement is sent (it may open a transaction: the statement then runs inside it), and
 * after(ctx, ok) once its answer is in (ok: it succeeded). A code other than ISC_DB_OK
 * from either is what the step returns, and the statement's rows are dropped. The
 * store's lease fence uses it (store.c: a stale replica's single-statement write is
 * refused as its transactions are). PostgreSQL only: SQLite has one writer, one replica,
 * and ignores it. g NULL removes it; *g is copied.
 */
struct isc_db_write_guard {
	int (*before)(void *ctx);
	int (*after)(void *ctx, int ok);
	void *ctx;
};
void isc_db_set_write_guard(struct isc_db *db, const struct isc_db_write_guard *g);

/* Runs one or more ;-separated statements without parameters or rows. */
int isc_db_exec(struct isc_db *db, const char *sql);

int isc_db_prepare(struct isc_db *db, const char *sql, int flags, struct isc_db_stmt **out);
const char *isc_db_sql(const struct isc_db_stmt *st);
struct isc_db *isc_db_handle(struct isc_db_stmt *st);
int isc_db_bind_parameter_count(const struct isc_db_stmt *st);

int isc_db_bind_int64(struct isc_db_stmt *st, int i, int64_t v);
int isc_db_bind_int(struct isc_db_stmt *st, int i, int v);
/* n < 0: up to the NUL. copy: ISC_DB_STATIC or ISC_DB_TRANSIENT. text NULL binds NULL. */
int isc_db_bind_text(struct isc_db_stmt *st, int i, const char *text, int n, int copy);
int isc_db_bind_blob(struct isc_db_stmt *st, int i, const void *b, int n, int copy);
int isc_db_bind_null(struct isc_db_stmt *st, int i);
int isc_db_clear_bindings(struct isc_db_stmt *st);

/* ISC_DB_ROW, ISC_DB_DONE, or an error code (message: isc_db_errmsg). */
int isc_db_step(struct isc_db_stmt *st);
int isc_db_reset(struct isc_db_stmt *st);
int isc_db_finalize(struct isc_db_stmt *st);

int isc_db_column_type(struct isc_db_stmt *st, int col);
int64_t isc_db_column_int64(struct isc_db_stmt *st, int col);
int isc_db_column_int(struct isc_db_stmt *st, int col);
/* NULL for a NULL column. */
const unsigned char *isc_db_column_text(struct isc_db_stmt *st, int col);
const void *isc_db_column_blob(struct isc_db_stmt *st, int col);
int isc_db_column_bytes(struct isc_db_stmt *st, int col);

/* Rows the last INSERT/UPDATE/DELETE changed; every row changed since open. */
int64_t isc_db_changes(struct isc_db *db);
int64_t isc_db_total_changes(struct isc_db *db);
/* The last error's message (the server's, for PostgreSQL). */
const char *isc_db_errmsg(struct isc_db *db);
/* 1 inside a transaction (BEGIN without COMMIT/ROLLBACK yet). */
int isc_db_in_transaction(struct isc_db *db);
/*
 * 1 when the last failed call failed for a reason that passes: PostgreSQL's lost
 * connection (libpq's own error, no SQLSTATE, CONNECTION_BAD) or a SQLSTATE of
 * faults-facts.md's table (40001, 40P01, 55P03, 57P01-03, 57P05, 08xxx, 53300,
 * 25P03); SQLite's SQLITE_BUSY past the busy timeout (not SQLITE_LOCKED: a bug of
 * the connection's own). The store reports these as ISC_ESTORE.
 */
int isc_db_transient(struct isc_db *db);
/*
 * Before a kept connection is used again: PostgreSQL reads what the server sent
 * while it sat idle (a closed connection shows only then) and connects again when
 * it is gone. ISC_DB_OK when it is usable. SQLite: always ISC_DB_OK.
 */
int isc_db_check(struct isc_db *db);

#endif
