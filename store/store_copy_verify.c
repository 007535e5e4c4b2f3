/* isc store copy's checks of the copy against its source (store_copy_int.h). */
#include "store/store_copy_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static int count_rows(struct isc_db *db, const char *side, const struct table *t, int64_t *out,
                      struct isc_err *err)
{
	char *sql;
	int rc;

	if (asprintf(&sql, "SELECT COUNT(*) FROM %s", t->quoted) < 0)
		return copy_oom(err);
	rc = copy_read_int(db, side, sql, NULL, NULL, "counting rows", out, err);
	free(sql);
	return rc;
}

/* Text sorted the same way on both (PostgreSQL's default collation is the locale's). */
#define PG_C(col) col " COLLATE \"C\""

static const char SQ_TOTALS[] =
    "SELECT scope, key, balance_micros, reserved_micros, spent_micros, charged_micros "
    "FROM ledger_totals ORDER BY scope, key";
static const char PG_TOTALS[] =
    "SELECT scope, key, balance_micros, reserved_micros, spent_micros, charged_micros "
    "FROM ledger_totals ORDER BY " PG_C("scope") ", " PG_C("key");
static const char SQ_LEDGER_SUMS[] =
    "SELECT kind, billing, COUNT(*), COALESCE(SUM(amount_micros), 0) FROM ledger "
    "GROUP BY kind, billing ORDER BY kind, billing";
static const char PG_LEDGER_SUMS[] =
    "SELECT kind, billing, COUNT(*), COALESCE(SUM(amount_micros), 0) FROM ledger "
    "GROUP BY kind, billing ORDER BY " PG_C("kind") ", " PG_C("billing");

/*
 * Steps the same query on both stores row by row: every row must be equal,
 * column by column (text and integers; the queries above read no blob). Each
 * equal row is handed to on_row (may be NULL) with the source's statement.
 */
static int compare_rows(struct isc_db *src, struct isc_db *dst, const char *sq_sql,
                        const char *pg_sql, const char *what, int ncols,
                        int (*on_row)(struct isc_db_stmt *st, void *arg, struct isc_err *err),
                        void *arg, int64_t *rows, struct isc_err *err)
{
	struct isc_db_stmt *a = NULL, *b = NULL;
	int rc, sa, sb;

	*rows = 0;
	if ((rc = copy_prepare(src, "source", copy_is_pg(src) ? pg_sql : sq_sql, what, &a, err)))
		return rc;
	if ((rc = copy_prepare(dst, "destination", copy_is_pg(dst) ? pg_sql : sq_sql, what, &b,
	                       err))) {
		isc_db_finalize(a);
		return rc;
	}
	for (;;) {
		sa = isc_db_step(a);
		sb = isc_db_step(b);
		if (sa != ISC_DB_ROW && sa != ISC_DB_DONE) {
			rc = copy_db_fail(src, "source", what, err);
			break;
		}
		if (sb != ISC_DB_ROW && sb != ISC_DB_DONE) {
			rc = copy_db_fail(dst, "destination", what, err);
			break;
		}
		if (sa != sb) {
			rc = isc_err_set(
			    err, ISC_EIO, "%s: the %s has more rows than the %s (after %lld equal)",
			    what, sa == ISC_DB_ROW ? "source" : "destination",
			    sa == ISC_DB_ROW ? "destination" : "source", (long long)*rows);
			break;
		}
		if (sa == ISC_DB_DONE)
			break;
		for (int c = 0; c < ncols && !rc; c++) {
			const char *ta = (const char *)isc_db_column_text(a, c);
			const char *tb = (const char *)isc_db_column_text(b, c);
			int differ = isc_db_column_type(a, c) == ISC_DB_INTEGER
			                 ? isc_db_column_int64(a, c) != isc_db_column_int64(b, c)
			                 : strcmp(ta ? ta : "", tb ? tb : "") != 0;
			if (differ)
				rc = isc_err_set(err, ISC_EIO,
				                 "%s differ: row %lld, column %d: source %s, "
				                 "destination %s",
				                 what, (long long)*rows + 1, c + 1,
				                 ta ? ta : "NULL", tb ? tb : "NULL");
		}
		if (!rc && on_row)
			rc = on_row(a, arg, err);
		if (rc)
			break;
		(*rows)++;
	}
	isc_db_finalize(a);
	isc_db_finalize(b);
	return rc;
}

static int add_ledger_line(struct isc_db_stmt *st, void *arg, struct isc_err *err)
{
	struct isc_store_copy_report *r = arg;
	struct isc_store_copy_ledger *l = realloc(r->ledger, (r->n_ledger + 1) * sizeof(*l));
	const char *kind = (const char *)isc_db_column_text(st, 0);
	const char *billing = (const char *)isc_db_column_text(st, 1);

	if (!l)
		return copy_oom(err);
	r->ledger = l;
	l = &r->ledger[r->n_ledger++];
	memset(l, 0, sizeof(*l));
	l->rows = isc_db_column_int64(st, 2);
	l->sum_micros = isc_db_column_int64(st, 3);
	if (!(l->kind = strdup(kind ? kind : "")) || !(l->billing = strdup(billing ? billing : "")))
		return copy_oom(err);
	return 0;
}

static int has_table(struct table **order, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(order[i]->name, name))
			return 1;
	return 0;
}

/* Row counts of every table, then the ledger's sums and its totals, equal on both sides. */
int copy_verify(struct isc_db *src, struct isc_db *dst, struct table **order, size_t n,
                struct isc_store_copy_report *r, struct isc_err *err)
{
	int64_t rows;
	int rc;

	for (size_t i = 0; i < n; i++) {
		int64_t in_src, in_dst;
		if ((rc = count_rows(src, "source", order[i], &in_src, err)) ||
		    (rc = count_rows(dst, "destination", order[i], &in_dst, err)))
			return rc;
		if (in_src != in_dst)
			return isc_err_set(
			    err, ISC_EIO,
			    "table %s: %lld rows in the source, %lld in the destination",
			    order[i]->name, (long long)in_src, (long long)in_dst);
		order[i]->rows = in_dst;
	}
	if (!has_table(order, n, "ledger"))
		return 0;
	if ((rc = compare_rows(src, dst, SQ_LEDGER_SUMS, PG_LEDGER_SUMS,
	                       "the ledger's sums per kind and billing", 4, add_ledger_line, r,
	                       &rows, err)))
		return rc;
	if (!has_table(order, n, "ledger_totals"))
		return 0;
	return compare_rows(src, dst, SQ_TOTALS, PG_TOTALS, "the ledger's totals (ledger_totals)",
	                    6, NULL, NULL, &r->ledger_totals_rows, err);
}
