/* Experiments and events. */
#include "store/store_experiments.h"

#include "store/store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void isc_experiment_cleanup(struct isc_experiment *e)
{
	free(e->id);
	free(e->project_id);
	free(e->project_name);
	free(e->org_name);
	free(e->name);
	free(e->compute_mode);
	free(e->spec_json);
	free(e->status);
	free(e->status_reason);
	free(e->shape_id);
	free(e->output_path);
	free(e->final_status);
	free(e->owner);
	memset(e, 0, sizeof(*e));
}

static void experiment_clean(void *rec)
{
	isc_experiment_cleanup(rec);
}

void isc_experiment_list_free(struct isc_experiment *list, size_t n)
{
	isc_store_rows_free(list, n, sizeof(*list), experiment_clean);
}

static void event_clean(void *rec)
{
	struct isc_event *ev = rec;
	free(ev->experiment_id);
	free(ev->kind);
	free(ev->message);
}

void isc_event_list_free(struct isc_event *list, size_t n)
{
	isc_store_rows_free(list, n, sizeof(*list), event_clean);
}

static int in_transaction(struct isc_store *s)
{
	return isc_db_in_transaction(isc_store_db(s));
}

int isc_store_event_add(struct isc_store *s, const char *experiment_id, const char *kind,
                        const char *message, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(
	    s, "INSERT INTO events (experiment_id, at_ms, kind, message) VALUES (?, ?, ?, ?)", &st,
	    err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, experiment_id, -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 2, isc_store_now_ms());
	isc_db_bind_text(st, 3, kind, -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 4, message, -1, ISC_DB_STATIC);
	rc = isc_db_step(st);
	isc_db_finalize(st);
	return rc == ISC_DB_DONE ? 0 : isc_store_db_err(s, rc, "adding an event", err);
}

int isc_store_experiment_add(struct isc_store *s, const struct isc_experiment *e,
                             struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc, own = !in_transaction(s);
	int64_t now = isc_store_now_ms();

	if (own && (rc = isc_store_begin(s, err)))
		return rc;
	rc = isc_store_prepare(
	    s,
	    "INSERT INTO experiments (id, project_id, org_id, name, compute_mode, gpus, "
	    "spec_json, status, output_path, created_at_ms, updated_at_ms) "
	    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
	    &st, err);
	if (!rc) {
		isc_db_bind_text(st, 1, e->id, -1, ISC_DB_STATIC);
		isc_db_bind_text(st, 2, e->project_id, -1, ISC_DB_STATIC);
		isc_db_bind_int64(st, 3, e->org_id);
		isc_db_bind_text(st, 4, e->name, -1, ISC_DB_STATIC);
		isc_db_bind_text(st, 5, e->compute_mode, -1, ISC_DB_STATIC);
		isc_db_bind_int(st, 6, e->gpus);
		isc_db_bind_text(st, 7, e->spec_json, -1, ISC_DB_STATIC);
		isc_db_bind_text(st, 8, e->status, -1, ISC_DB_STATIC);
		isc_db_bind_text(st, 9, e->output_path ? e->output_path : "", -1, ISC_DB_STATIC);
		isc_db_bind_int64(st, 10, now);
		isc_db_bind_int64(st, 11, now);
		rc = isc_db_step(st);
		isc_db_finalize(st);
		rc = rc == ISC_DB_DONE ? 0 : isc_store_db_err(s, rc, "adding an experiment", err);
	}
	if (!rc)
		rc = isc_store_event_add(s, e->id, e->status, "experiment created", err);
	if (own) {
		if (!rc)
			rc = isc_store_commit(s, err);
		if (rc)
			isc_store_rollback(s);
	}
	return rc;
}

/* The columns experiment_from_row reads, and the joins they come from. */
#define EXPERIMENT_SELECT                                                                          \
	"SELECT e.id, e.project_id, p.name, e.org_id, o.name, e.name, e.compute_mode, e.gpus, "    \
	"e.spec_json, e.status, e.status_reason, e.nnodes, e.nproc, e.shape_id, e.cycle_count, "   \
	"e.output_path, e.cancel_requested, e.next_attempt_ms, e.created_at_ms, e.updated_at_ms, " \
	"e.final_status, e.owner "
#define EXPERIMENT_FROM                                                                            \
	"FROM experiments e JOIN projects p ON p.id = e.project_id JOIN orgs o ON o.id = "         \
	"e.org_id "
#define EXPERIMENT_COLS EXPERIMENT_SELECT EXPERIMENT_FROM

static int experiment_from_row(struct isc_db_stmt *st, void *rec)
{
	struct isc_experiment *e = rec;
	int oom = 0;
	e->id = isc_store_col_text(st, 0, &oom);
	e->project_id = isc_store_col_text(st, 1, &oom);
	e->project_name = isc_store_col_text(st, 2, &oom);
	e->org_id = isc_db_column_int64(st, 3);
	e->org_name = isc_store_col_text(st, 4, &oom);
	e->name = isc_store_col_text(st, 5, &oom);
	e->compute_mode = isc_store_col_text(st, 6, &oom);
	e->gpus = isc_db_column_int(st, 7);
	e->spec_json = isc_store_col_text(st, 8, &oom);
	e->status = isc_store_col_text(st, 9, &oom);
	e->status_reason = isc_store_col_text(st, 10, &oom);
	e->nnodes = isc_db_column_int(st, 11);
	e->nproc = isc_db_column_int(st, 12);
	e->shape_id = isc_store_col_text(st, 13, &oom);
	e->cycle_count = isc_db_column_int(st, 14);
	e->output_path = isc_store_col_text(st, 15, &oom);
	e->cancel_requested = isc_db_column_int(st, 16);
	e->next_attempt_ms = isc_db_column_int64(st, 17);
	e->created_at_ms = isc_db_column_int64(st, 18);
	e->updated_at_ms = isc_db_column_int64(st, 19);
	e->final_status = isc_store_col_text(st, 20, &oom);
	e->owner = isc_store_col_text(st, 21, &oom);
	return oom ? ISC_ENOMEM : 0;
}

static int experiment_query(struct isc_store *s, struct isc_db_stmt *st,
                            struct isc_experiment **out, size_t *n, struct isc_err *err)
{
	void *list;
	int rc = isc_store_read_rows(s, st, sizeof(**out), experiment_from_row, experiment_clean,
	                             "reading experiments", &list, n, err);
	if (!rc)
		*out = list;
	return rc;
}

int isc_store_experiment_get(struct isc_store *s, const char *id, struct isc_experiment *out,
                             struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare_cached(s, EXPERIMENT_COLS "WHERE e.id = ?", &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, id, -1, ISC_DB_STATIC);
	rc = isc_store_read_one(s, st, experiment_from_row, experiment_clean, out, sizeof(*out),
	                        "reading an experiment", err);
	return rc == ISC_ENOTFOUND ? isc_err_set(err, rc, "no experiment with id '%s'", id) : rc;
}

/*
 * 1 while a node of the experiment (of any of its clusters) ran and is not yet charged up
 * to its termination: not terminated as the cloud confirmed, or terminated and its last
 * period not charged yet (the meter charges it on a tick after the experiment ended).
 * Until then the experiment's charges are not its final cost. A node that never launched
 * is never charged. Only final experiments are asked (the cost of a running one grows).
 */
#define SETTLING_SQL(e)                                                                            \
	"CASE WHEN " e ".status IN ('completed', 'failed', 'cancelled', 'stopped') AND EXISTS ("   \
	"SELECT 1 FROM clusters sc JOIN nodes sn ON sn.cluster_id = sc.id WHERE "                  \
	"sc.experiment_id = " e ".id AND sn.launched_at_ms IS NOT NULL AND "                       \
	"(sn.terminated_at_ms IS NULL OR "                                                         \
	"COALESCE(sn.charged_until_ms, sn.launched_at_ms) < sn.terminated_at_ms)) THEN 1 ELSE 0 "  \
	"END"

static int settling_from_row(struct isc_db_stmt *st, void *rec)
{
	*(int *)rec = isc_db_column_int(st, 0);
	return 0;
}

int isc_store_experiment_settling(struct isc_store *s, const char *id, int *settling,
                                  struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(
	    s, "SELECT " SETTLING_SQL("e") " FROM experiments e WHERE e.id = ?", &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, id, -1, ISC_DB_STATIC);
	rc = isc_store_read_one(s, st, settling_from_row, NULL, settling, sizeof(*settling),
	                        "reading whether an experiment's cost is final", err);
	return rc == ISC_ENOTFOUND ? isc_err_set(err, rc, "no experiment with id '%s'", id) : rc;
}

int isc_store_experiment_list(struct isc_store *s, const char *status, struct isc_experiment **out,
                              size_t *n, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(s,
	                           status ? EXPERIMENT_COLS
	                               "WHERE e.status = ? ORDER BY e.created_at_ms, e.id"
	                                  : EXPERIMENT_COLS "ORDER BY e.created_at_ms DESC, e.id",
	                           &st, err);
	if (rc)
		return rc;
	if (status)
		isc_db_bind_text(st, 1, status, -1, ISC_DB_STATIC);
	return experiment_query(s, st, out, n, err);
}

/*
 * The listing's pages (isc_store_experiment_page). Each query walks one index
 * in the listing's order (created_at_ms descending, then id) from the cursor,
 * so a page reads its own rows and no more: no sort, whatever the org's size.
 * The keyset condition is written as a range on created_at_ms (what the index
 * seeks to) and a filter for the rows of the cursor's own millisecond. The
 * first page binds the largest cursor. Only the listed columns are read (not
 * the launch file), and the org's name, the project's name and the charges are one
 * lookup each; the cost is the charges plus what the open intervals accrued since
 * (issue 49).
 */
#define PAGE_SELECT                                                                                \
	"SELECT e.id, e.name, e.project_id, o.name, e.compute_mode, e.gpus, e.nnodes, e.nproc, "   \
	"e.output_path, e.status, e.status_reason, e.shape_id, e.cycle_count, e.created_at_ms, "   \
	"COALESCE(t.charged_micros, 0) + " ISC_STORE_ACCRUED_SQL(                                  \
	    "e.id",                                                                                \
	    "CAST(?6 AS BIGINT)") ", e.org_id, COALESCE(p.name, e.project_id), "                   \
	                          "e.owner, " SETTLING_SQL("e") " FROM experiments e JOIN orgs o " \
	                                                        "ON o.id = e.org_id LEFT JOIN "    \
	                                                        "projects p ON p.id = "            \
	                                                        "e.project_id LEFT JOIN "          \
	                                                        "ledger_totals t ON "              \
	                                                        "t.scope = 'experiment' AND "      \
	                                                        "t.key = e.id WHERE "
#define PAGE_AFTER                                                                                 \
	"e.created_at_ms <= ?3 AND (e.created_at_ms < ?3 OR e.id > ?4) "                           \
	"ORDER BY e.created_at_ms DESC, e.id LIMIT ?5"
/* The operator: every org (index experiments_newest). */
static const char page_all_sql[] = PAGE_SELECT PAGE_AFTER;
/* An org's admin: the org's experiments (index experiments_org_newest). */
static const char page_org_sql[] = PAGE_SELECT "e.org_id = ?1 AND " PAGE_AFTER;
/* An org's member: their own experiments in it (index experiments_owner_newest). */
static const char page_owner_sql[] = PAGE_SELECT "e.org_id = ?1 AND e.owner = ?2 AND " PAGE_AFTER;

/* Fills v from st's row; 0, or ISC_ENOMEM when SQLite could not give a text. */
static int view_from_row(struct isc_db_stmt *st, struct isc_experiment_view *v)
{
#define TEXT(col) ((const char *)isc_db_column_text(st, col))
	v->id = TEXT(0);
	v->name = TEXT(1);
	v->project_id = TEXT(2);
	v->org_name = TEXT(3);
	v->compute_mode = TEXT(4);
	v->gpus = isc_db_column_int(st, 5);
	v->nnodes = isc_db_column_int(st, 6);
	v->nproc = isc_db_column_int(st, 7);
	v->output_path = TEXT(8);
	v->status = TEXT(9);
	v->status_reason = TEXT(10);
	v->shape_id = TEXT(11);
	v->cycle_count = isc_db_column_int(st, 12);
	v->created_at_ms = isc_db_column_int64(st, 13);
	v->cost_micros = isc_db_column_int64(st, 14);
	v->org_id = isc_db_column_int64(st, 15);
	v->project_name = TEXT(16);
	v->owner = TEXT(17);
	v->cost_settling = isc_db_column_int(st, 18);
#undef TEXT
	/* Every text column is NOT NULL: a NULL is SQLite out of memory. */
	return v->id && v->name && v->project_id && v->org_name && v->compute_mode &&
	               v->output_path && v->status && v->status_reason && v->shape_id &&
	               v->project_name && v->owner
	           ? 0
	           : ISC_ENOMEM;
}

/* 1 when the row st holds comes before the row of o in the listing's order. */
static int page_row_before(struct isc_db_stmt *st, struct isc_db_stmt *o)
{
	int64_t a = isc_db_column_int64(st, 13), b = isc_db_column_int64(o, 13);
	if (a != b)
		return a > b;
	return strcmp((const char *)isc_db_column_text(st, 0),
	              (const char *)isc_db_column_text(o, 0)) < 0;
}

/* The orgs whose experiments user_id may list: org ids and whether as admin. */
struct page_org {
	int64_t org_id;
	int admin;
};

static int page_orgs(struct isc_store *s, int64_t user_id, struct page_org **out, size_t *n,
                     struct isc_err *err)
{
	struct page_org *orgs = NULL;
	size_t count = 0;
	struct isc_db_stmt *st;
	int rc =
	    isc_store_prepare_cached(s,
	                             "SELECT org_id, role = 'admin' FROM memberships WHERE "
	                             "user_id = ? AND role IN ('admin', 'member') ORDER BY org_id",
	                             &st, err);
	if (rc)
		return rc;
	isc_db_bind_int64(st, 1, user_id);
	while ((rc = isc_db_step(st)) == ISC_DB_ROW) {
		struct page_org *grown = realloc(orgs, (count + 1) * sizeof(*orgs));
		if (!grown) {
			isc_store_finalize(s, st);
			free(orgs);
			return isc_err_set(err, ISC_ENOMEM, "out of memory");
		}
		orgs = grown;
		orgs[count].org_id = isc_db_column_int64(st, 0);
		orgs[count++].admin = isc_db_column_int(st, 1);
	}
	isc_store_finalize(s, st);
	if (rc != ISC_DB_DONE) {
		free(orgs);
		return isc_store_db_err(s, rc, "reading memberships", err);
	}
	*out = orgs;
	*n = count;
	return 0;
}

int isc_store_experiment_page(struct isc_store *s, int all, int64_t user_id, const char *owner,
                              const struct isc_experiment_cursor *after, size_t limit,
                              isc_experiment_view_fn fn, void *ctx, struct isc_err *err)
{
	struct page_org *orgs = NULL;
	struct isc_db_stmt **walk = NULL;
	int *live = NULL;
	size_t n_orgs = 1, n_walk = 0, shown = 0;
	int64_t now = isc_store_now_ms(); /* one moment for the page's accrued costs */
	int rc = 0;

	if (!all) {
		if ((rc = page_orgs(s, user_id, &orgs, &n_orgs, err)))
			return rc;
		if (n_orgs == 0)
			return 0;
	}
	walk = calloc(n_orgs, sizeof(*walk));
	live = calloc(n_orgs, sizeof(*live));
	if (!walk || !live) {
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		goto done;
	}
	/*
	 * One walk per org the caller sees, merged here: each walk is in the listing's
	 * order, so the page is the first `limit` rows of the merge and every walk reads at
	 * most that many. The statements stay prepared; a second walk of the same
	 * statement gets its own (isc_store_prepare_cached).
	 */
	for (; n_walk < n_orgs; n_walk++) {
		const char *sql = all                  ? page_all_sql
		                  : orgs[n_walk].admin ? page_org_sql
		                                       : page_owner_sql;
		struct isc_db_stmt *st;
		if ((rc = isc_store_prepare_cached(s, sql, &st, err)))
			goto done;
		walk[n_walk] = st;
		if (!all) {
			isc_db_bind_int64(st, 1, orgs[n_walk].org_id);
			isc_db_bind_text(st, 2, owner ? owner : "", -1, ISC_DB_STATIC);
		}
		isc_db_bind_int64(st, 3, after ? after->created_at_ms : INT64_MAX);
		isc_db_bind_text(st, 4, after ? after->id : "", -1, ISC_DB_STATIC);
		isc_db_bind_int64(st, 5, isc_store_page_limit(limit));
		isc_db_bind_int64(st, 6, now);
		rc = isc_db_step(st);
		if (rc != ISC_DB_ROW && rc != ISC_DB_DONE) {
			rc = isc_store_db_err(s, rc, "reading experiments", err);
			goto done;
		}
		live[n_walk] = rc == ISC_DB_ROW;
		rc = 0;
	}
	while (!limit || shown < limit) {
		struct isc_experiment_view v;
		size_t best = n_walk;
		int step;
		for (size_t i = 0; i < n_walk; i++)
			if (live[i] && (best == n_walk || page_row_before(walk[i], walk[best])))
				best = i;
		if (best == n_walk)
			break;
		if (view_from_row(walk[best], &v) || fn(&v, ctx)) {
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
			goto done;
		}
		shown++;
		step = isc_db_step(walk[best]);
		if (step != ISC_DB_ROW && step != ISC_DB_DONE) {
			rc = isc_store_db_err(s, step, "reading experiments", err);
			goto done;
		}
		live[best] = step == ISC_DB_ROW;
	}
done:
	for (size_t i = 0; i < n_walk; i++)
		isc_store_finalize(s, walk[i]);
	free(walk);
	free(live);
	free(orgs);
	return rc;
}

int isc_store_experiment_list_active(struct isc_store *s, struct isc_experiment **out, size_t *n,
                                     struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(
	    s,
	    EXPERIMENT_COLS "WHERE e.status NOT IN ('completed','failed','cancelled','stopped') "
	                    "ORDER BY e.created_at_ms, e.id",
	    &st, err);
	if (rc)
		return rc;
	return experiment_query(s, st, out, n, err);
}

/* The experiment's status now, for the message of a lost compare-and-set. */
static int current_status(struct isc_store *s, const char *id, char *out, size_t size,
                          struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(s, "SELECT status FROM experiments WHERE id = ?", &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, id, -1, ISC_DB_STATIC);
	rc = isc_db_step(st);
	if (rc == ISC_DB_ROW) {
		snprintf(out, size, "%s", (const char *)isc_db_column_text(st, 0));
		rc = 0;
	} else if (rc == ISC_DB_DONE) {
		rc = isc_err_set(err, ISC_ENOTFOUND, "no experiment with id '%s'", id);
	} else {
		rc = isc_store_db_err(s, rc, "reading an experiment", err);
	}
	isc_db_finalize(st);
	return rc;
}

static int transition(struct isc_store *s, const char *id, const char *from, const char *to,
                      const char *final_status, const char *reason, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc, own = !in_transaction(s);

	if (own && (rc = isc_store_begin(s, err)))
		return rc;
	rc = isc_store_prepare(s,
	                       "UPDATE experiments SET status = ?, status_reason = ?, "
	                       "updated_at_ms = ?, final_status = ? WHERE id = ? AND status = ?",
	                       &st, err);
	if (!rc) {
		isc_db_bind_text(st, 1, to, -1, ISC_DB_STATIC);
		isc_db_bind_text(st, 2, reason ? reason : "", -1, ISC_DB_STATIC);
		isc_db_bind_int64(st, 3, isc_store_now_ms());
		isc_db_bind_text(st, 4, final_status, -1, ISC_DB_STATIC);
		isc_db_bind_text(st, 5, id, -1, ISC_DB_STATIC);
		isc_db_bind_text(st, 6, from, -1, ISC_DB_STATIC);
		rc = isc_db_step(st);
		isc_db_finalize(st);
		if (rc != ISC_DB_DONE) {
			rc = isc_store_db_err(s, rc, "updating an experiment", err);
		} else if (isc_db_changes(isc_store_db(s)) == 0) {
			char now[32];
			rc = current_status(s, id, now, sizeof(now), err);
			if (!rc)
				rc = isc_err_set(err, ISC_ECONFLICT,
				                 "experiment %s is %s, not %s: not moved to %s", id,
				                 now, from, to);
		} else {
			rc = 0;
		}
	}
	if (!rc)
		rc = isc_store_event_add(s, id, to, reason ? reason : "", err);
	if (own) {
		if (!rc)
			rc = isc_store_commit(s, err);
		if (rc)
			isc_store_rollback(s);
	}
	return rc;
}

int isc_store_experiment_transition(struct isc_store *s, const char *id, const char *from,
                                    const char *to, const char *reason, struct isc_err *err)
{
	return transition(s, id, from, to, "", reason, err);
}

int isc_store_experiment_begin_stop(struct isc_store *s, const char *id, const char *from,
                                    const char *final_status, const char *reason,
                                    struct isc_err *err)
{
	if (!isc_status_is_final(final_status))
		return isc_err_set(err, ISC_EINVALID, "'%s' is not a final status", final_status);
	return transition(s, id, from, "stopping", final_status, reason, err);
}

int isc_store_experiment_set_placement(struct isc_store *s, const struct isc_experiment *e,
                                       struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(
	    s,
	    "UPDATE experiments SET nnodes = ?, nproc = ?, shape_id = ?, cycle_count = ?, "
	    "next_attempt_ms = ?, updated_at_ms = ? WHERE id = ?",
	    &st, err);
	if (rc)
		return rc;
	isc_db_bind_int(st, 1, e->nnodes);
	isc_db_bind_int(st, 2, e->nproc);
	isc_db_bind_text(st, 3, e->shape_id ? e->shape_id : "", -1, ISC_DB_STATIC);
	isc_db_bind_int(st, 4, e->cycle_count);
	isc_db_bind_int64(st, 5, e->next_attempt_ms);
	isc_db_bind_int64(st, 6, isc_store_now_ms());
	isc_db_bind_text(st, 7, e->id, -1, ISC_DB_STATIC);
	rc = isc_db_step(st);
	isc_db_finalize(st);
	return rc == ISC_DB_DONE ? 0 : isc_store_db_err(s, rc, "updating an experiment", err);
}

int isc_store_experiment_request_cancel(struct isc_store *s, const char *id, struct isc_err *err)
{
	return isc_store_experiment_request_cancel_by(s, id, NULL, err);
}

/* The cancel_requested event's words: the final reason is read back from them. */
#define CANCEL_REQUESTED_BY "cancel requested by "

int isc_store_experiment_request_cancel_by(struct isc_store *s, const char *id, const char *by,
                                           struct isc_err *err)
{
	struct isc_experiment e;
	char said[256], reason[256];
	struct isc_db_stmt *st;
	int rc;

	if ((rc = isc_store_experiment_get(s, id, &e, err)))
		return rc;
	if (isc_status_is_final(e.status)) {
		rc = isc_err_set(err, ISC_ECONFLICT, "experiment %s is already %s", id, e.status);
		isc_experiment_cleanup(&e);
		return rc;
	}
	/*
	 * A cycle or interruptible experiment that holds no nodes (waiting or paused)
	 * has nothing to stop: it ends cancelled now. The status is compared and set,
	 * so one iscd is starting at this moment either wins (and stops it with grace
	 * at its next tick) or sees it cancelled and boots nothing.
	 */
	int at_once = (strcmp(e.compute_mode, "cycle") == 0 ||
	               strcmp(e.compute_mode, "interruptible") == 0) &&
	              (strcmp(e.status, "enqueued") == 0 || strcmp(e.status, "paused") == 0);
	char from[16];
	snprintf(from, sizeof(from), "%s", e.status);
	isc_experiment_cleanup(&e);
	if ((rc = isc_store_begin(s, err)))
		return rc;
	rc = isc_store_prepare(
	    s, "UPDATE experiments SET cancel_requested = 1, updated_at_ms = ? WHERE id = ?", &st,
	    err);
	if (!rc) {
		isc_db_bind_int64(st, 1, isc_store_now_ms());
		isc_db_bind_text(st, 2, id, -1, ISC_DB_STATIC);
		rc = isc_db_step(st) == ISC_DB_DONE
		         ? 0
		         : isc_store_db_err(s, ISC_DB_ERROR, "cancelling", err);
		isc_db_finalize(st);
	}
	snprintf(said, sizeof(said), CANCEL_REQUESTED_BY "%s", by && *by ? by : "user");
	snprintf(reason, sizeof(reason), "cancelled by %s", by && *by ? by : "user");
	if (!rc)
		rc = isc_store_event_add(s, id, "cancel_requested", said, err);
	if (!rc && at_once) {
		/* ECONFLICT: iscd started it meanwhile; it is stopped with grace instead. */
		int t = transition(s, id, from, "cancelled", "", reason, err);
		if (t && t != ISC_ECONFLICT)
			rc = t;
	}
	if (!rc)
		rc = isc_store_commit(s, err);
	if (rc)
		isc_store_rollback(s);
	return rc;
}

void isc_store_experiment_cancel_reason(struct isc_store *s, const char *id, char *out, size_t cap)
{
	struct isc_event *ev = NULL;
	struct isc_err err;
	size_t n = 0, pre = strlen(CANCEL_REQUESTED_BY);

	snprintf(out, cap, "cancelled by user");
	isc_err_clear(&err);
	if (isc_store_event_list(s, id, 0, &ev, &n, &err))
		return; /* the reason without the name beats no stop at all */
	for (size_t i = n; i-- > 0;)
		if (strcmp(ev[i].kind, "cancel_requested") == 0) {
			if (strncmp(ev[i].message, CANCEL_REQUESTED_BY, pre) == 0)
				snprintf(out, cap, "cancelled by %s", ev[i].message + pre);
			break;
		}
	isc_event_list_free(ev, n);
}

static int event_from_row(struct isc_db_stmt *st, void *rec)
{
	struct isc_event *ev = rec;
	int oom = 0;
	ev->id = isc_db_column_int64(st, 0);
	ev->experiment_id = isc_store_col_text(st, 1, &oom);
	ev->at_ms = isc_db_column_int64(st, 2);
	ev->kind = isc_store_col_text(st, 3, &oom);
	ev->message = isc_store_col_text(st, 4, &oom);
	return oom ? ISC_ENOMEM : 0;
}

int isc_store_event_list(struct isc_store *s, const char *experiment_id, int64_t after_id,
                         struct isc_event **out, size_t *n, struct isc_err *err)
{
	struct isc_db_stmt *st;
	void *list;
	int rc =
	    isc_store_prepare_cached(s,
	                             "SELECT id, experiment_id, at_ms, kind, message FROM events "
	                             "WHERE experiment_id = ? AND id > ? ORDER BY id",
	                             &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, experiment_id, -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 2, after_id);
	rc = isc_store_read_rows(s, st, sizeof(**out), event_from_row, event_clean,
	                         "reading events", &list, n, err);
	if (!rc)
		*out = list;
	return rc;
}
