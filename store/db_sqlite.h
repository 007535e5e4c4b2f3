/*
 * The SQLite side of store/db.h (db_sqlite.c): the same calls, prefixed
 * isc_db_sqlite_, which store/db.c dispatches to for a SQLite connection.
 */
#ifndef ISC_STORE_DB_SQLITE_H
#define ISC_STORE_DB_SQLITE_H

#include "store/db.h"

void isc_db_sqlite_close(struct isc_db *db);
int isc_db_sqlite_exec(struct isc_db *db, const char *sql);
int isc_db_sqlite_prepare(struct isc_db *db, const char *sql, int flags, struct isc_db_stmt **out);
const char *isc_db_sqlite_sql(const struct isc_db_stmt *st);
struct isc_db *isc_db_sqlite_handle(struct isc_db_stmt *st);
int isc_db_sqlite_bind_parameter_count(const struct isc_db_stmt *st);
int isc_db_sqlite_bind_int64(struct isc_db_stmt *st, int i, int64_t v);
int isc_db_sqlite_bind_text(struct isc_db_stmt *st, int i, const char *text, int n, int copy);
int isc_db_sqlite_bind_blob(struct isc_db_stmt *st, int i, const void *b, int n, int copy);
int isc_db_sqlite_bind_null(struct isc_db_stmt *st, int i);
int isc_db_sqlite_clear_bindings(struct isc_db_stmt *st);
int isc_db_sqlite_step(struct isc_db_stmt *st);
int isc_db_sqlite_reset(struct isc_db_stmt *st);
int isc_db_sqlite_finalize(struct isc_db_stmt *st);
int isc_db_sqlite_column_type(struct isc_db_stmt *st, int col);
int64_t isc_db_sqlite_column_int64(struct isc_db_stmt *st, int col);
const unsigned char *isc_db_sqlite_column_text(struct isc_db_stmt *st, int col);
const void *isc_db_sqlite_column_blob(struct isc_db_stmt *st, int col);
int isc_db_sqlite_column_bytes(struct isc_db_stmt *st, int col);
int64_t isc_db_sqlite_changes(struct isc_db *db);
int64_t isc_db_sqlite_total_changes(struct isc_db *db);
const char *isc_db_sqlite_errmsg(struct isc_db *db);
int isc_db_sqlite_in_transaction(struct isc_db *db);
/* 1 when the last call failed with SQLITE_BUSY (any of its extended codes). */
int isc_db_sqlite_transient(struct isc_db *db);
/* How long a statement waits for another connection's write lock. */
void isc_db_sqlite_busy_timeout(struct isc_db *db, int ms);

#endif
