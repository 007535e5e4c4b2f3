/*
 * isc store copy's own header (store_copy.h is the module's): what its rooms share.
 * store_copy_schema.c reads both stores' schemas from their catalogs and orders the
 * tables; store_copy_verify.c compares the copy with its source; store_copy.c holds
 * the checks before a copy, the copying itself and the command's entry points.
 */
#ifndef ISC_STORE_STORE_COPY_INT_H
#define ISC_STORE_STORE_COPY_INT_H

#include "store/store_copy.h"
#include "store/store_int.h"

#include <stddef.h>
#include <stdint.h>

struct strv {
	char **v;
	size_t n;
};

struct table {
	char *name;
	char *quoted; /* "name", for SQL text and for PostgreSQL's regclass casts */
	struct strv cols;
	struct strv pk;       /* primary key columns, in key order */
	struct strv refs;     /* other tables its foreign keys reference */
	struct strv self_fks; /* its columns referencing itself: set after its rows */
	char *identity;       /* the column a sequence numbers (identity, AUTOINCREMENT) */
	int rebuilt;
	int copied;
	int64_t rows;
};

struct schema {
	struct table *t;
	size_t n;
};

/* ---- store_copy_schema.c ---- */

int copy_strv_has(const struct strv *s, const char *x);
void copy_schema_free(struct schema *sc);
struct table *copy_schema_find(const struct schema *sc, const char *name);
int copy_is_pg(struct isc_db *db);
/* ISC_ENOMEM, "out of memory". */
int copy_oom(struct isc_err *err);
/* err from the connection's last error: "<side>: <what>: <message>". */
int copy_db_fail(struct isc_db *db, const char *side, const char *what, struct isc_err *err);
int copy_prepare(struct isc_db *db, const char *side, const char *sql, const char *what,
                 struct isc_db_stmt **st, struct isc_err *err);
/* "name" with any " doubled: every table and column name goes into SQL text so. */
char *copy_quote_ident(const char *name);
/* Runs a query of one integer (bound ?1..?2 as texts when not NULL) into *out (0 when NULL). */
int copy_read_int(struct isc_db *db, const char *side, const char *sql, const char *a1,
                  const char *a2, const char *what, int64_t *out, struct isc_err *err);
/* Every table of the store but schema_version (each migration sets its own). */
int copy_read_schema(struct isc_db *db, const char *side, struct schema *sc, struct isc_err *err);
/* Both stores must name the same tables and columns (the order of columns may differ). */
int copy_schemas_match(const struct schema *src, const struct schema *dst, struct isc_err *err);
/* The tables in an order where each comes after every table it references. */
int copy_order(struct schema *sc, struct table ***out, struct isc_err *err);

/* ---- store_copy_verify.c ---- */

/* Row counts of every table, then the ledger's sums and its totals, equal on both sides. */
int copy_verify(struct isc_db *src, struct isc_db *dst, struct table **order, size_t n,
                struct isc_store_copy_report *r, struct isc_err *err);

#endif
