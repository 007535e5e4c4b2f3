/*
 * store/db.h's calls, sent to the backend a connection or statement belongs
 * to: both backends put an enum isc_db_kind first in their structs, so its
 * kind is read through the pointer without knowing the rest.
 */
#include "store/db.h"

#include "store/db_pg.h"
#include "store/db_sqlite.h"

static int is_pg(const void *db_or_stmt)
{
	return *(const enum isc_db_kind *)db_or_stmt == ISC_DB_POSTGRES;
}

enum isc_db_kind isc_db_kind(const struct isc_db *db)
{
	return *(const enum isc_db_kind *)(const void *)db;
}

void isc_db_close(struct isc_db *db)
{
	if (!db)
		return;
	if (is_pg(db))
		isc_db_pg_close(db);
	else
		isc_db_sqlite_close(db);
}

void isc_db_disown(struct isc_db *db)
{
	if (db && is_pg(db))
		isc_db_pg_disown(db);
}

void isc_db_set_write_guard(struct isc_db *db, const struct isc_db_write_guard *g)
{
	if (db && is_pg(db))
		isc_db_pg_set_write_guard(db, g);
}

int isc_db_exec(struct isc_db *db, const char *sql)
{
	return is_pg(db) ? isc_db_pg_exec(db, sql) : isc_db_sqlite_exec(db, sql);
}

int isc_db_prepare(struct isc_db *db, const char *sql, int flags, struct isc_db_stmt **out)
{
	return is_pg(db) ? isc_db_pg_prepare(db, sql, flags, out)
	                 : isc_db_sqlite_prepare(db, sql, flags, out);
}

const char *isc_db_sql(const struct isc_db_stmt *st)
{
	return is_pg(st) ? isc_db_pg_sql(st) : isc_db_sqlite_sql(st);
}

struct isc_db *isc_db_handle(struct isc_db_stmt *st)
{
	return is_pg(st) ? isc_db_pg_handle(st) : isc_db_sqlite_handle(st);
}

int isc_db_bind_parameter_count(const struct isc_db_stmt *st)
{
	return is_pg(st) ? isc_db_pg_bind_parameter_count(st)
	                 : isc_db_sqlite_bind_parameter_count(st);
}

int isc_db_bind_int64(struct isc_db_stmt *st, int i, int64_t v)
{
	return is_pg(st) ? isc_db_pg_bind_int64(st, i, v) : isc_db_sqlite_bind_int64(st, i, v);
}

int isc_db_bind_int(struct isc_db_stmt *st, int i, int v)
{
	return isc_db_bind_int64(st, i, v);
}

int isc_db_bind_text(struct isc_db_stmt *st, int i, const char *text, int n, int copy)
{
	if (!text)
		return isc_db_bind_null(st, i);
	return is_pg(st) ? isc_db_pg_bind_text(st, i, text, n, copy)
	                 : isc_db_sqlite_bind_text(st, i, text, n, copy);
}

int isc_db_bind_blob(struct isc_db_stmt *st, int i, const void *b, int n, int copy)
{
	return is_pg(st) ? isc_db_pg_bind_blob(st, i, b, n, copy)
	                 : isc_db_sqlite_bind_blob(st, i, b, n, copy);
}

int isc_db_bind_null(struct isc_db_stmt *st, int i)
{
	return is_pg(st) ? isc_db_pg_bind_null(st, i) : isc_db_sqlite_bind_null(st, i);
}

int isc_db_clear_bindings(struct isc_db_stmt *st)
{
	return is_pg(st) ? isc_db_pg_clear_bindings(st) : isc_db_sqlite_clear_bindings(st);
}

int isc_db_step(struct isc_db_stmt *st)
{
	return is_pg(st) ? isc_db_pg_step(st) : isc_db_sqlite_step(st);
}

int isc_db_reset(struct isc_db_stmt *st)
{
	return is_pg(st) ? isc_db_pg_reset(st) : isc_db_sqlite_reset(st);
}

int isc_db_finalize(struct isc_db_stmt *st)
{
	if (!st)
		return ISC_DB_OK;
	return is_pg(st) ? isc_db_pg_finalize(st) : isc_db_sqlite_finalize(st);
}

int isc_db_column_type(struct isc_db_stmt *st, int col)
{
	return is_pg(st) ? isc_db_pg_column_type(st, col) : isc_db_sqlite_column_type(st, col);
}

int64_t isc_db_column_int64(struct isc_db_stmt *st, int col)
{
	return is_pg(st) ? isc_db_pg_column_int64(st, col) : isc_db_sqlite_column_int64(st, col);
}

int isc_db_column_int(struct isc_db_stmt *st, int col)
{
	return (int)isc_db_column_int64(st, col);
}

const unsigned char *isc_db_column_text(struct isc_db_stmt *st, int col)
{
	return is_pg(st) ? isc_db_pg_column_text(st, col) : isc_db_sqlite_column_text(st, col);
}

const void *isc_db_column_blob(struct isc_db_stmt *st, int col)
{
	return is_pg(st) ? isc_db_pg_column_blob(st, col) : isc_db_sqlite_column_blob(st, col);
}

int isc_db_column_bytes(struct isc_db_stmt *st, int col)
{
	return is_pg(st) ? isc_db_pg_column_bytes(st, col) : isc_db_sqlite_column_bytes(st, col);
}

int64_t isc_db_changes(struct isc_db *db)
{
	return is_pg(db) ? isc_db_pg_changes(db) : isc_db_sqlite_changes(db);
}

int64_t isc_db_total_changes(struct isc_db *db)
{
	return is_pg(db) ? isc_db_pg_total_changes(db) : isc_db_sqlite_total_changes(db);
}

const char *isc_db_errmsg(struct isc_db *db)
{
	return is_pg(db) ? isc_db_pg_errmsg(db) : isc_db_sqlite_errmsg(db);
}

int isc_db_transient(struct isc_db *db)
{
	return is_pg(db) ? isc_db_pg_transient(db) : isc_db_sqlite_transient(db);
}

int isc_db_check(struct isc_db *db)
{
	return is_pg(db) ? isc_db_pg_check(db) : ISC_DB_OK;
}

int isc_db_in_transaction(struct isc_db *db)
{
	return is_pg(db) ? isc_db_pg_in_transaction(db) : isc_db_sqlite_in_transaction(db);
}
