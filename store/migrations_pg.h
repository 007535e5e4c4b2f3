/*
 * The PostgreSQL schema (migrations_pg.c). PostgreSQL stores have no history
 * before it, so their schema starts at a baseline: one script that makes what
 * SQLite's migrations 1 to isc_store_pg_baseline_version() make, and after it
 * steps numbered as SQLite's are. Both sides always know the same number of
 * versions: isc_store_pg_migration_count() == isc_store_migration_count().
 */
#ifndef ISC_STORE_MIGRATIONS_PG_H
#define ISC_STORE_MIGRATIONS_PG_H

#include <stddef.h>

/* The schema version the baseline creates (20). */
int isc_store_pg_baseline_version(void);

/*
 * The baseline: every table, index, constraint and trigger of that version,
 * and the schema_version table if it is not there yet (left as it is: the
 * caller runs this in one transaction and records the version).
 */
const char *isc_store_pg_baseline_sql(void);

/* The versions the PostgreSQL side knows: the baseline's and every step after it. */
size_t isc_store_pg_migration_count(void);

/*
 * For index >= the baseline version: the step from schema version index to
 * index + 1. NULL for an index inside the baseline or past the last step.
 */
const char *isc_store_pg_migration_sql(size_t index);

/*
 * One statement (for isc_db_exec) that moves every identity column's sequence
 * past the largest id in its table: run it after copying rows in with their
 * ids (isc store copy), or the next new row takes an id already used.
 */
const char *isc_store_pg_identity_sync_sql(void);

#endif
