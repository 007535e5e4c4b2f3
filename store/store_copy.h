/*
 * isc store copy: a whole store copied into a new, empty one, SQLite to
 * PostgreSQL, PostgreSQL to SQLite or the same kind, while iscd is stopped
 * (docs/ha.md, "Backup and move").
 *
 * The copy reads the source in one read transaction and writes the
 * destination in one write transaction: every table of the schema in
 * foreign-key order, every column by name and as its value's type (NULL,
 * integer, text, blob), rows keeping their ids. Tables a trigger keeps
 * (ledger_totals, from each ledger insert) are not copied but rebuilt from the
 * copied ledger (SQLite: by the trigger; PostgreSQL: in one pass, store_copy.c
 * says why) and compared with the source's. Sequences (PostgreSQL
 * identities, SQLite's AUTOINCREMENT) are set past the copied ids. Row counts
 * of every table and the ledger's sums per kind and billing are compared
 * before the commit: on any failure or difference nothing is committed.
 *
 * Ownership: the report's strings and arrays are the report's, freed by
 * isc_store_copy_report_cleanup.
 */
#ifndef ISC_STORE_STORE_COPY_H
#define ISC_STORE_STORE_COPY_H

#include "common/err.h"

#include <stddef.h>
#include <stdint.h>

struct isc_store_copy_options {
	/*
	 * The home: its iscd.lock is held for the whole copy (the copy is refused
	 * while iscd holds it), "sqlite:" names its isc.db.
	 */
	const char *home;
	const char *from_url; /* NULL: the home's store URL (isc_store_url_resolve) */
	/* "sqlite:" (home's isc.db), "sqlite:/path/file.db" (a file) or a PostgreSQL URI */
	const char *to_url;
	/* A PostgreSQL source is refused while a replica's heartbeat is this recent (ms). */
	int64_t replica_live_ms;
};

struct isc_store_copy_table {
	char *name;
	int64_t rows;
	int rebuilt; /* rebuilt from the ledger in the destination, compared rather than copied */
};

/* The ledger's rows of one kind and billing, and their sum, equal on both sides. */
struct isc_store_copy_ledger {
	char *kind;
	char *billing;
	int64_t rows;
	int64_t sum_micros;
};

/* A sequence set past the copied ids: the next new row gets last + 1. */
struct isc_store_copy_sequence {
	char *table;
	char *column;
	int64_t last;
};

struct isc_store_copy_report {
	int schema_version;
	struct isc_store_copy_table *tables; /* in the order they were copied */
	size_t n_tables;
	struct isc_store_copy_ledger *ledger;
	size_t n_ledger;
	struct isc_store_copy_sequence *sequences;
	size_t n_sequences;
	int64_t ledger_totals_rows; /* rows of ledger_totals found equal */
};

/*
 * Copies the store at o->from_url into the one at o->to_url. Refused
 * (ISC_ECONFLICT) while iscd runs on o->home, while a PostgreSQL source lists
 * a live replica, or when the destination holds any row; ISC_EINVALID when
 * the source's schema version is not this program's or the two schemas
 * differ. A SQLite file the copy created is removed again when it fails.
 * *out is filled on success only.
 */
int isc_store_copy(const struct isc_store_copy_options *o, struct isc_store_copy_report *out,
                   struct isc_err *err);
void isc_store_copy_report_cleanup(struct isc_store_copy_report *r);

/*
 * url with its password replaced by "***" (a URI's user:password@ and any
 * password= parameter), for printing. Caller frees; NULL when out of memory.
 */
char *isc_store_url_masked(const char *url);

#endif
