/*
 * The ledger's SQL: inserting rows and summing them. Every statement binds its
 * parameters; none updates or deletes a ledger row (the schema's triggers
 * would refuse it anyway). Project budgets live in projects.budget_micros.
 */
#include "store/store_ledger.h"
#include "store/store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void bind_text_or_null(struct isc_db_stmt *st, int i, const char *v)
{
	if (v)
		isc_db_bind_text(st, i, v, -1, ISC_DB_STATIC);
	else
		isc_db_bind_null(st, i);
}

int isc_store_ledger_append(struct isc_store *s, const struct isc_ledger_row *r,
                            struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(
	    s,
	    "INSERT INTO ledger (at_ms, org_id, project_id, experiment_id, cluster_id, "
	    "node_instance_id, kind, amount_micros, price_micros, provider, shape_id, "
	    "period_start_ms, period_end_ms, note, billing, consumed_micros) "
	    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
	    &st, err);
	if (rc)
		return rc;
	isc_db_bind_int64(st, 1, isc_store_now_ms());
	isc_db_bind_int64(st, 2, r->org_id);
	bind_text_or_null(st, 3, r->project_id);
	bind_text_or_null(st, 4, r->experiment_id);
	bind_text_or_null(st, 5, r->cluster_id);
	bind_text_or_null(st, 6, r->node_instance_id);
	isc_db_bind_text(st, 7, r->kind, -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 8, r->amount_micros);
	if (r->has_price)
		isc_db_bind_int64(st, 9, r->price_micros);
	else
		isc_db_bind_null(st, 9);
	bind_text_or_null(st, 10, r->provider);
	bind_text_or_null(st, 11, r->shape_id);
	if (r->has_period) {
		isc_db_bind_int64(st, 12, r->period_start_ms);
		isc_db_bind_int64(st, 13, r->period_end_ms);
	} else {
		isc_db_bind_null(st, 12);
		isc_db_bind_null(st, 13);
	}
	isc_db_bind_text(st, 14, r->note ? r->note : "", -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 15, r->billing ? r->billing : "credits", -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 16, r->consumed_micros);
	rc = isc_db_step(st);
	isc_db_finalize(st);
	if (rc != ISC_DB_DONE)
		return isc_store_db_err(s, rc, "appending to the ledger", err);
	return 0;
}

/* Runs a one-row query of up to two integer columns with one text or integer parameter. */
static int sum_query(struct isc_store *s, const char *sql, const char *text_arg, int64_t int_arg,
                     int64_t *a, int64_t *b, const char *what, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(s, sql, &st, err);
	if (rc)
		return rc;
	if (text_arg)
		isc_db_bind_text(st, 1, text_arg, -1, ISC_DB_STATIC);
	else
		isc_db_bind_int64(st, 1, int_arg);
	rc = isc_db_step(st);
	if (rc == ISC_DB_ROW) {
		if (a)
			*a = isc_db_column_int64(st, 0);
		if (b)
			*b = isc_db_column_int64(st, 1);
		rc = 0;
	} else {
		rc = isc_store_db_err(s, rc, what, err);
	}
	isc_db_finalize(st);
	return rc;
}

/* A running total of migration 8 (ledger_totals); 0 when the scope has no row yet. */
static int totals(struct isc_store *s, const char *scope, const char *key, const char *cols,
                  int64_t *a, int64_t *b, const char *what, struct isc_err *err)
{
	char sql[160];
	snprintf(
	    sql, sizeof(sql),
	    "SELECT %s FROM (SELECT 1) AS one LEFT JOIN ledger_totals ON scope = '%s' AND key = ?",
	    cols, scope);
	return sum_query(s, sql, key, 0, a, b, what, err);
}

int isc_store_ledger_org_sums(struct isc_store *s, int64_t org_id, int64_t *balance_micros,
                              int64_t *reserved_micros, struct isc_err *err)
{
	char key[24];
	snprintf(key, sizeof(key), "%lld", (long long)org_id);
	return totals(s, "org", key, "COALESCE(balance_micros, 0), COALESCE(reserved_micros, 0)",
	              balance_micros, reserved_micros, "reading an organisation's totals", err);
}

int isc_store_ledger_project_sums(struct isc_store *s, const char *project_id,
                                  int64_t *spent_micros, int64_t *reserved_micros,
                                  struct isc_err *err)
{
	return totals(s, "project", project_id,
	              "COALESCE(spent_micros, 0), COALESCE(reserved_micros, 0)", spent_micros,
	              reserved_micros, "reading a project's totals", err);
}

int isc_store_ledger_experiment_held(struct isc_store *s, const char *experiment_id,
                                     int64_t *held_micros, struct isc_err *err)
{
	return totals(s, "experiment", experiment_id, "COALESCE(reserved_micros, 0)", held_micros,
	              NULL, "reading an experiment's holds", err);
}

int isc_store_ledger_experiment_cost(struct isc_store *s, const char *experiment_id,
                                     int64_t *cost_micros, struct isc_err *err)
{
	return totals(s, "experiment", experiment_id, "COALESCE(charged_micros, 0)", cost_micros,
	              NULL, "reading an experiment's charges", err);
}

int isc_store_ledger_experiment_accrued(struct isc_store *s, const char *experiment_id,
                                        int64_t now_ms, int64_t *accrued_micros,
                                        struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(s, "SELECT " ISC_STORE_ACCRUED_SQL("?1", "CAST(?2 AS BIGINT)"),
	                           &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, experiment_id, -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 2, now_ms);
	rc = isc_db_step(st);
	if (rc == ISC_DB_ROW) {
		*accrued_micros = isc_db_column_int64(st, 0);
		rc = 0;
	} else {
		rc = isc_store_db_err(s, rc, "reading an experiment's accrued cost", err);
	}
	isc_db_finalize(st);
	return rc;
}

int isc_store_ledger_node_charged_until(struct isc_store *s, const char *instance_id,
                                        int64_t *until_ms, int *found, struct isc_err *err)
{
	int64_t n = 0, until = 0;
	/* The newest charge by the ledger_node index: one row, however long the node ran. */
	int rc = sum_query(s,
	                   "SELECT COUNT(*), COALESCE(MAX(period_end_ms), 0) FROM (SELECT "
	                   "period_end_ms FROM ledger WHERE node_instance_id = ? AND kind = "
	                   "'charge' ORDER BY period_end_ms DESC LIMIT 1) AS newest",
	                   instance_id, 0, &n, &until, "reading a node's charges", err);
	if (rc)
		return rc;
	*found = n > 0;
	*until_ms = until;
	return 0;
}

int isc_store_ledger_node_mark(struct isc_store *s, const char *instance_id, int64_t until_ms,
                               struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(s,
	                           "UPDATE nodes SET charged_until_ms = ?1 WHERE instance_id = ?2 "
	                           "AND (charged_until_ms IS NULL OR charged_until_ms < ?1)",
	                           &st, err);
	if (rc)
		return rc;
	isc_db_bind_int64(st, 1, until_ms);
	isc_db_bind_text(st, 2, instance_id, -1, ISC_DB_STATIC);
	rc = isc_db_step(st);
	isc_db_finalize(st);
	return rc == ISC_DB_DONE ? 0 : isc_store_db_err(s, rc, "marking a node charged", err);
}

static void holder_clean(void *rec)
{
	free(*(char **)rec);
}

static int holder_from_row(struct isc_db_stmt *st, void *rec)
{
	int oom = 0;
	*(char **)rec = isc_store_col_text(st, 0, &oom);
	return oom || !*(char **)rec ? ISC_ENOMEM : 0;
}

int isc_store_ledger_holders(struct isc_store *s, char ***ids, size_t *n, struct isc_err *err)
{
	struct isc_db_stmt *st;
	void *rows = NULL;
	int rc = isc_store_prepare(s,
	                           "SELECT key FROM ledger_totals WHERE scope = 'experiment' AND "
	                           "reserved_micros != 0 ORDER BY key",
	                           &st, err);
	*ids = NULL;
	*n = 0;
	if (rc)
		return rc;
	rc = isc_store_read_rows(s, st, sizeof(char *), holder_from_row, holder_clean,
	                         "reading the experiments that hold credits", &rows, n, err);
	if (!rc)
		*ids = rows;
	return rc;
}

static void hold_clean(void *rec)
{
	free(((struct isc_ledger_hold *)rec)->experiment_id);
}

static int hold_from_row(struct isc_db_stmt *st, void *rec)
{
	struct isc_ledger_hold *h = rec;
	int oom = 0;
	h->experiment_id = isc_store_col_text(st, 0, &oom);
	h->held_micros = isc_db_column_int64(st, 1);
	return oom || !h->experiment_id ? ISC_ENOMEM : 0;
}

static int hold_cmp(const void *a, const void *b)
{
	return strcmp(((const struct isc_ledger_hold *)a)->experiment_id,
	              ((const struct isc_ledger_hold *)b)->experiment_id);
}

int isc_store_ledger_holds(struct isc_store *s, struct isc_ledger_hold **out, size_t *n,
                           struct isc_err *err)
{
	struct isc_db_stmt *st;
	void *rows = NULL;
	int rc = isc_store_prepare(s,
	                           "SELECT key, reserved_micros FROM ledger_totals WHERE scope = "
	                           "'experiment' AND reserved_micros != 0",
	                           &st, err);
	*out = NULL;
	*n = 0;
	if (rc)
		return rc;
	rc = isc_store_read_rows(s, st, sizeof(struct isc_ledger_hold), hold_from_row, hold_clean,
	                         "reading the experiments' holds", &rows, n, err);
	if (rc)
		return rc;
	/* Sorted here, not by the store: PostgreSQL's collation need not be strcmp's. */
	if (*n > 1)
		qsort(rows, *n, sizeof(struct isc_ledger_hold), hold_cmp);
	*out = rows;
	return 0;
}

void isc_ledger_holds_free(struct isc_ledger_hold *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i].experiment_id);
	free(v);
}

ptrdiff_t isc_ledger_holds_index(const struct isc_ledger_hold *v, size_t n,
                                 const char *experiment_id)
{
	struct isc_ledger_hold key = {(char *)experiment_id, 0};
	const struct isc_ledger_hold *h = n ? bsearch(&key, v, n, sizeof(*v), hold_cmp) : NULL;
	return h ? h - v : -1;
}

int64_t isc_ledger_holds_find(const struct isc_ledger_hold *v, size_t n, const char *experiment_id)
{
	ptrdiff_t k = isc_ledger_holds_index(v, n, experiment_id);
	return k < 0 ? 0 : v[k].held_micros;
}

static void cover_clean(void *rec)
{
	(void)rec; /* integers only */
}

static int cover_from_row(struct isc_db_stmt *st, void *rec)
{
	struct isc_ledger_org_cover *c = rec;
	c->org_id = isc_db_column_int64(st, 0);
	c->balance_micros = isc_db_column_int64(st, 1);
	c->reserved_micros = isc_db_column_int64(st, 2);
	c->uncovered_micros = isc_db_column_int64(st, 3);
	c->negative_adjustments_micros = isc_db_column_int64(st, 4);
	return 0;
}

int isc_store_ledger_org_cover(struct isc_store *s, const char *consumed_note,
                               struct isc_ledger_org_cover **out, size_t *n, struct isc_err *err)
{
	struct isc_db_stmt *st;
	void *rows = NULL;
	/* One statement: one snapshot of the ledger, whatever the writers do meanwhile. */
	int rc = isc_store_prepare(
	    s,
	    "SELECT org_id,"
	    " COALESCE(SUM(CASE kind WHEN 'grant' THEN amount_micros WHEN 'refund' THEN"
	    "  amount_micros WHEN 'adjustment' THEN amount_micros WHEN 'charge' THEN"
	    "  -amount_micros ELSE 0 END), 0),"
	    " COALESCE(SUM(CASE kind WHEN 'reserve' THEN amount_micros WHEN 'release' THEN"
	    "  -amount_micros WHEN 'charge' THEN -consumed_micros ELSE 0 END), 0),"
	    " COALESCE(SUM(CASE WHEN kind = 'charge' THEN amount_micros - consumed_micros WHEN"
	    "  kind = 'release' AND note = ?1 THEN -amount_micros ELSE 0 END), 0),"
	    " COALESCE(SUM(CASE WHEN kind = 'adjustment' AND amount_micros < 0 THEN"
	    "  -amount_micros ELSE 0 END), 0) "
	    "FROM ledger WHERE billing = 'credits' GROUP BY org_id ORDER BY org_id",
	    &st, err);
	*out = NULL;
	*n = 0;
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, consumed_note, -1, ISC_DB_STATIC);
	rc = isc_store_read_rows(s, st, sizeof(**out), cover_from_row, cover_clean,
	                         "reading what bounds the organisations' holds", &rows, n, err);
	if (!rc)
		*out = rows;
	return rc;
}

int isc_store_project_set_budget(struct isc_store *s, const char *project_id, int has_budget,
                                 int64_t budget_micros, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc =
	    isc_store_prepare(s, "UPDATE projects SET budget_micros = ? WHERE id = ?", &st, err);
	if (rc)
		return rc;
	if (has_budget)
		isc_db_bind_int64(st, 1, budget_micros);
	else
		isc_db_bind_null(st, 1);
	isc_db_bind_text(st, 2, project_id, -1, ISC_DB_STATIC);
	rc = isc_db_step(st);
	isc_db_finalize(st);
	if (rc != ISC_DB_DONE)
		return isc_store_db_err(s, rc, "setting a budget", err);
	if (isc_db_changes(isc_store_db(s)) != 1)
		return isc_err_set(err, ISC_ENOTFOUND, "no project with id '%s'", project_id);
	return 0;
}

static void spend_clean(void *rec)
{
	struct isc_spend_row *r = rec;
	free(r->key);
	free(r->id);
}

void isc_spend_rows_free(struct isc_spend_row *rows, size_t n)
{
	isc_store_rows_free(rows, n, sizeof(*rows), spend_clean);
}

static int spend_from_row(struct isc_db_stmt *st, void *rec)
{
	struct isc_spend_row *r = rec;
	int oom = 0;
	r->key = isc_store_col_text(st, 0, &oom);
	r->id = isc_store_col_text(st, 1, &oom);
	r->amount_micros = isc_db_column_int64(st, 2);
	/* Every key expression is COALESCEd to text: NULL here means the copy failed. */
	return oom || !r->key ? ISC_ENOMEM : 0;
}

int isc_store_ledger_spend(struct isc_store *s, const struct isc_spend_query *q,
                           struct isc_spend_row **out, size_t *n, struct isc_err *err)
{
	/* Key expression, id expression; one per isc_spend_by, in order. */
	static const char *const group[][2] = {
	    {"COALESCE(p.name, '(no project)')", "l.project_id"},
	    {"COALESCE(e.name, l.experiment_id, '(no experiment)')", "l.experiment_id"},
	    {"COALESCE(l.provider, '')", "NULL"},
	    {"COALESCE(l.shape_id, '')", "NULL"},
	    {"strftime('%Y-%m-%d', l.period_start_ms / 1000, 'unixepoch')", "NULL"},
	};
	/* The day's key in PostgreSQL's words (SQLite's strftime has no PostgreSQL twin). */
	static const char *const day_pg =
	    "to_char(to_timestamp(l.period_start_ms / 1000) AT TIME ZONE 'UTC', 'YYYY-MM-DD')";
	struct isc_db_stmt *st;
	void *rows;
	const char *key;
	char *sql;
	int rc;

	if ((unsigned)q->by >= sizeof(group) / sizeof(group[0]))
		return isc_err_set(err, ISC_EINVALID, "unknown spend grouping");
	key = group[q->by][0];
	if (q->by == ISC_SPEND_BY_DAY && isc_db_kind(isc_store_db(s)) == ISC_DB_POSTGRES)
		key = day_pg;
	if (asprintf(&sql,
	             "SELECT %s AS k, %s AS i, SUM(l.amount_micros) FROM ledger l "
	             "JOIN orgs o ON o.id = l.org_id "
	             "LEFT JOIN projects p ON p.id = l.project_id "
	             "LEFT JOIN experiments e ON e.id = l.experiment_id "
	             "WHERE l.kind = 'charge' "
	             "AND (CAST(?1 AS TEXT) IS NULL OR o.name = ?1) "
	             "AND (CAST(?2 AS TEXT) IS NULL OR p.id = ?2 OR p.name = ?2) "
	             "AND (CAST(?3 AS BIGINT) IS NULL OR l.period_start_ms >= ?3) "
	             "AND (CAST(?4 AS BIGINT) IS NULL OR l.period_start_ms <= ?4) "
	             "AND (CAST(?5 AS TEXT) IS NULL OR l.billing = ?5) "
	             "GROUP BY k, i ORDER BY k, i",
	             key, group[q->by][1]) < 0)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	rc = isc_store_prepare(s, sql, &st, err);
	free(sql);
	if (rc)
		return rc;
	bind_text_or_null(st, 1, q->org_name);
	bind_text_or_null(st, 2, q->project);
	if (q->has_from)
		isc_db_bind_int64(st, 3, q->from_ms);
	if (q->has_to)
		isc_db_bind_int64(st, 4, q->to_ms);
	bind_text_or_null(st, 5, q->billing);
	rc = isc_store_read_rows(s, st, sizeof(**out), spend_from_row, spend_clean, "reading spend",
	                         &rows, n, err);
	if (!rc)
		*out = rows;
	return rc;
}
