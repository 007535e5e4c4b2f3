/*
 * The PostgreSQL side of store/db.h (db_pg.c, libpq). Each function is db.h's
 * of the same name with isc_db_ renamed isc_db_pg_, and the same contract;
 * db.c's dispatcher calls these for a connection or statement whose kind is
 * ISC_DB_POSTGRES. isc_db_open_pg itself is declared in db.h and defined in
 * db_pg.c.
 *
 * Both backends' connection and statement structs start with an
 * `enum isc_db_kind kind` as their first member, so the dispatcher tells them
 * apart by reading that member (isc_db_pg_kind_of) before it knows which
 * backend's struct it holds. Only store/ includes this file.
 */
#ifndef ISC_STORE_DB_PG_H
#define ISC_STORE_DB_PG_H

#include "store/db.h"

#include <stddef.h>
#include <stdint.h>

/* The backend of a connection or statement of either kind: its first member. */
static inline enum isc_db_kind isc_db_pg_kind_of(const void *db_or_stmt)
{
	return *(const enum isc_db_kind *)db_or_stmt;
}

void isc_db_pg_close(struct isc_db *db);
void isc_db_pg_disown(struct isc_db *db);
enum isc_db_kind isc_db_pg_kind(const struct isc_db *db);

int isc_db_pg_exec(struct isc_db *db, const char *sql);
void isc_db_pg_set_write_guard(struct isc_db *db, const struct isc_db_write_guard *g);

int isc_db_pg_prepare(struct isc_db *db, const char *sql, int flags, struct isc_db_stmt **out);
const char *isc_db_pg_sql(const struct isc_db_stmt *st);
struct isc_db *isc_db_pg_handle(struct isc_db_stmt *st);
int isc_db_pg_bind_parameter_count(const struct isc_db_stmt *st);

int isc_db_pg_bind_int64(struct isc_db_stmt *st, int i, int64_t v);
int isc_db_pg_bind_int(struct isc_db_stmt *st, int i, int v);
int isc_db_pg_bind_text(struct isc_db_stmt *st, int i, const char *text, int n, int copy);
int isc_db_pg_bind_blob(struct isc_db_stmt *st, int i, const void *b, int n, int copy);
int isc_db_pg_bind_null(struct isc_db_stmt *st, int i);
int isc_db_pg_clear_bindings(struct isc_db_stmt *st);

int isc_db_pg_step(struct isc_db_stmt *st);
int isc_db_pg_reset(struct isc_db_stmt *st);
int isc_db_pg_finalize(struct isc_db_stmt *st);

int isc_db_pg_column_type(struct isc_db_stmt *st, int col);
int64_t isc_db_pg_column_int64(struct isc_db_stmt *st, int col);
int isc_db_pg_column_int(struct isc_db_stmt *st, int col);
const unsigned char *isc_db_pg_column_text(struct isc_db_stmt *st, int col);
const void *isc_db_pg_column_blob(struct isc_db_stmt *st, int col);
int isc_db_pg_column_bytes(struct isc_db_stmt *st, int col);

int64_t isc_db_pg_changes(struct isc_db *db);
int64_t isc_db_pg_total_changes(struct isc_db *db);
const char *isc_db_pg_errmsg(struct isc_db *db);
int isc_db_pg_in_transaction(struct isc_db *db);
int isc_db_pg_transient(struct isc_db *db);
int isc_db_pg_check(struct isc_db *db);
/* 1 for a SQLSTATE a client retries (faults-facts.md's table: 40001, 08xxx, 57P01, ...). */
int isc_db_pg_sqlstate_transient(const char *sqlstate);
/*
 * A failed command's verdict: its SQLSTATE (NULL for libpq's own errors, which carry
 * none) and whether the connection is now CONNECTION_BAD. 1: retry it.
 */
int isc_db_pg_failure_transient(const char *sqlstate, int connection_bad);

/*
 * The statement's SQL as PostgreSQL receives it: `?` and `?N` numbered `$N`
 * the way SQLite numbers them. Exposed for the unit test.
 */
const char *isc_db_pg_translated_sql(const struct isc_db_stmt *st);

#endif
