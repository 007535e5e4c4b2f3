/* Experiments and events. */
#include "store/store_experiments.h"

#include "store/store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int isc_status_is_final(const char *status)
{
	static const char *const finals[] = {"completed", "failed", "cancelled", "stopped"};
	for (size_t i = 0; i < sizeof(finals) / sizeof(finals[0]); i++)
		if (strcmp(status, finals[i]) == 0)
			return 1;
	return 0;
}

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
	memset(e, 0, sizeof(*e));
}

void isc_experiment_list_free(struct isc_experiment *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		isc_experiment_cleanup(&list[i]);
	free(list);
}

static void experiment_clean(void *rec)
{
	isc_experiment_cleanup(rec);
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
	for (size_t i = 0; i < n; i++)
		event_clean(&list[i]);
	free(list);
}

static int in_transaction(struct isc_store *s)
{
	return !sqlite3_get_autocommit(isc_store_db(s));
}

int isc_store_event_add(struct isc_store *s, const char *experiment_id, const char *kind,
                        const char *message, struct isc_err *err)
{
	sqlite3_stmt *st;
	int rc = isc_store_prepare(
	    s, "INSERT INTO events (experiment_id, at_ms, kind, message) VALUES (?, ?, ?, ?)", &st,
	    err);
	if (rc)
		return rc;
	sqlite3_bind_text(st, 1, experiment_id, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, isc_store_now_ms());
	sqlite3_bind_text(st, 3, kind, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, message, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : isc_store_sqlite_err(s, rc, "adding an event", err);
}

int isc_store_experiment_add(struct isc_store *s, const struct isc_experiment *e,
                             struct isc_err *err)
{
	sqlite3_stmt *st;
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
		sqlite3_bind_text(st, 1, e->id, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, e->project_id, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 3, e->org_id);
		sqlite3_bind_text(st, 4, e->name, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 5, e->compute_mode, -1, SQLITE_STATIC);
		sqlite3_bind_int(st, 6, e->gpus);
		sqlite3_bind_text(st, 7, e->spec_json, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 8, e->status, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 9, e->output_path ? e->output_path : "", -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 10, now);
		sqlite3_bind_int64(st, 11, now);
		rc = sqlite3_step(st);
		sqlite3_finalize(st);
		rc = rc == SQLITE_DONE ? 0
		                       : isc_store_sqlite_err(s, rc, "adding an experiment", err);
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
	"e.final_status "
#define EXPERIMENT_FROM                                                                            \
	"FROM experiments e JOIN projects p ON p.id = e.project_id JOIN orgs o ON o.id = "         \
	"e.org_id "
#define EXPERIMENT_COLS EXPERIMENT_SELECT EXPERIMENT_FROM

static int experiment_from_row(sqlite3_stmt *st, void *rec)
{
	struct isc_experiment *e = rec;
	int oom = 0;
	e->id = isc_store_col_text(st, 0, &oom);
	e->project_id = isc_store_col_text(st, 1, &oom);
	e->project_name = isc_store_col_text(st, 2, &oom);
	e->org_id = sqlite3_column_int64(st, 3);
	e->org_name = isc_store_col_text(st, 4, &oom);
	e->name = isc_store_col_text(st, 5, &oom);
	e->compute_mode = isc_store_col_text(st, 6, &oom);
	e->gpus = sqlite3_column_int(st, 7);
	e->spec_json = isc_store_col_text(st, 8, &oom);
	e->status = isc_store_col_text(st, 9, &oom);
	e->status_reason = isc_store_col_text(st, 10, &oom);
	e->nnodes = sqlite3_column_int(st, 11);
	e->nproc = sqlite3_column_int(st, 12);
	e->shape_id = isc_store_col_text(st, 13, &oom);
	e->cycle_count = sqlite3_column_int(st, 14);
	e->output_path = isc_store_col_text(st, 15, &oom);
	e->cancel_requested = sqlite3_column_int(st, 16);
	e->next_attempt_ms = sqlite3_column_int64(st, 17);
	e->created_at_ms = sqlite3_column_int64(st, 18);
	e->updated_at_ms = sqlite3_column_int64(st, 19);
	e->final_status = isc_store_col_text(st, 20, &oom);
	return oom ? ISC_ENOMEM : 0;
}

static int experiment_query(struct isc_store *s, sqlite3_stmt *st, struct isc_experiment **out,
                            size_t *n, struct isc_err *err)
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
	sqlite3_stmt *st;
	int rc = isc_store_prepare_cached(s, EXPERIMENT_COLS "WHERE e.id = ?", &st, err);
	if (rc)
		return rc;
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	rc = isc_store_read_one(s, st, experiment_from_row, experiment_clean, out, sizeof(*out),
	                        "reading an experiment", err);
	return rc == ISC_ENOTFOUND ? isc_err_set(err, rc, "no experiment with id '%s'", id) : rc;
}

int isc_store_experiment_list(struct isc_store *s, const char *status, struct isc_experiment **out,
                              size_t *n, struct isc_err *err)
{
	sqlite3_stmt *st;
	int rc = isc_store_prepare(s,
	                           status ? EXPERIMENT_COLS
	                               "WHERE e.status = ? ORDER BY e.created_at_ms, e.id"
	                                  : EXPERIMENT_COLS "ORDER BY e.created_at_ms DESC, e.id",
	                           &st, err);
	if (rc)
		return rc;
	if (status)
		sqlite3_bind_text(st, 1, status, -1, SQLITE_STATIC);
	return experiment_query(s, st, out, n, err);
}

/* The listing's columns: experiment_from_row's, then the experiment's charges (last). */
#define VISIBLE_COLS                                                                               \
	EXPERIMENT_SELECT ", COALESCE(t.charged_micros, 0) " EXPERIMENT_FROM                       \
	                  "LEFT JOIN ledger_totals t ON t.scope = 'experiment' AND t.key = e.id "

int isc_store_experiment_list_visible(struct isc_store *s, int all, int64_t user_id,
                                      const char *owner, const struct isc_experiment_cursor *after,
                                      size_t limit, struct isc_experiment **out,
                                      int64_t **cost_micros, size_t *n, struct isc_err *err)
{
	struct isc_experiment *list = NULL;
	int64_t *cost = NULL;
	size_t count = 0;
	sqlite3_stmt *st;
	int rc, cost_col;

	/*
	 * The first condition is what the experiments_org index answers; the second narrows a
	 * member's orgs to their own experiments. The page: rows after the cursor in the
	 * listing's order (newest first, then id), ?3 NULL for the first page; LIMIT -1 is
	 * none.
	 */
#define VISIBLE_PAGE                                                                               \
	"(?3 IS NULL OR e.created_at_ms < ?3 OR (e.created_at_ms = ?3 AND e.id > ?4)) "            \
	"ORDER BY e.created_at_ms DESC, e.id LIMIT ?5"
	rc = isc_store_prepare_cached(
	    s,
	    all ? VISIBLE_COLS "WHERE " VISIBLE_PAGE
	        : VISIBLE_COLS
	        "WHERE e.org_id IN (SELECT org_id FROM memberships WHERE user_id = ?1 "
	        "AND role IN ('admin', 'member')) AND (e.owner = ?2 OR e.org_id IN "
	        "(SELECT org_id FROM memberships WHERE user_id = ?1 AND role = "
	        "'admin')) AND " VISIBLE_PAGE,
	    &st, err);
#undef VISIBLE_PAGE
	if (rc)
		return rc;
	if (!all) {
		sqlite3_bind_int64(st, 1, user_id);
		sqlite3_bind_text(st, 2, owner ? owner : "", -1, SQLITE_STATIC);
	}
	if (after) {
		sqlite3_bind_int64(st, 3, after->created_at_ms);
		sqlite3_bind_text(st, 4, after->id, -1, SQLITE_STATIC);
	}
	sqlite3_bind_int64(st, 5, limit ? (sqlite3_int64)limit : -1);
	cost_col = sqlite3_column_count(st) - 1;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct isc_experiment *grown = realloc(list, (count + 1) * sizeof(*list));
		int64_t *grown_cost = grown ? realloc(cost, (count + 1) * sizeof(*cost)) : NULL;
		if (grown)
			list = grown;
		if (grown_cost)
			cost = grown_cost;
		if (!grown || !grown_cost)
			goto oom;
		memset(&list[count], 0, sizeof(*list));
		cost[count] = sqlite3_column_int64(st, cost_col);
		if (experiment_from_row(st, &list[count++]))
			goto oom;
	}
	isc_store_finalize(s, st);
	if (rc != SQLITE_DONE) {
		isc_experiment_list_free(list, count);
		free(cost);
		return isc_store_sqlite_err(s, rc, "reading experiments", err);
	}
	*out = list;
	*cost_micros = cost;
	*n = count;
	return 0;
oom:
	isc_store_finalize(s, st);
	isc_experiment_list_free(list, count);
	free(cost);
	return isc_err_set(err, ISC_ENOMEM, "out of memory");
}

int isc_store_experiment_list_active(struct isc_store *s, struct isc_experiment **out, size_t *n,
                                     struct isc_err *err)
{
	sqlite3_stmt *st;
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
	sqlite3_stmt *st;
	int rc = isc_store_prepare(s, "SELECT status FROM experiments WHERE id = ?", &st, err);
	if (rc)
		return rc;
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		snprintf(out, size, "%s", (const char *)sqlite3_column_text(st, 0));
		rc = 0;
	} else if (rc == SQLITE_DONE) {
		rc = isc_err_set(err, ISC_ENOTFOUND, "no experiment with id '%s'", id);
	} else {
		rc = isc_store_sqlite_err(s, rc, "reading an experiment", err);
	}
	sqlite3_finalize(st);
	return rc;
}

static int transition(struct isc_store *s, const char *id, const char *from, const char *to,
                      const char *final_status, const char *reason, struct isc_err *err)
{
	sqlite3_stmt *st;
	int rc, own = !in_transaction(s);

	if (own && (rc = isc_store_begin(s, err)))
		return rc;
	rc = isc_store_prepare(s,
	                       "UPDATE experiments SET status = ?, status_reason = ?, "
	                       "updated_at_ms = ?, final_status = ? WHERE id = ? AND status = ?",
	                       &st, err);
	if (!rc) {
		sqlite3_bind_text(st, 1, to, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, reason ? reason : "", -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 3, isc_store_now_ms());
		sqlite3_bind_text(st, 4, final_status, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 5, id, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 6, from, -1, SQLITE_STATIC);
		rc = sqlite3_step(st);
		sqlite3_finalize(st);
		if (rc != SQLITE_DONE) {
			rc = isc_store_sqlite_err(s, rc, "updating an experiment", err);
		} else if (sqlite3_changes(isc_store_db(s)) == 0) {
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
	sqlite3_stmt *st;
	int rc = isc_store_prepare(
	    s,
	    "UPDATE experiments SET nnodes = ?, nproc = ?, shape_id = ?, cycle_count = ?, "
	    "next_attempt_ms = ?, updated_at_ms = ? WHERE id = ?",
	    &st, err);
	if (rc)
		return rc;
	sqlite3_bind_int(st, 1, e->nnodes);
	sqlite3_bind_int(st, 2, e->nproc);
	sqlite3_bind_text(st, 3, e->shape_id ? e->shape_id : "", -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 4, e->cycle_count);
	sqlite3_bind_int64(st, 5, e->next_attempt_ms);
	sqlite3_bind_int64(st, 6, isc_store_now_ms());
	sqlite3_bind_text(st, 7, e->id, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : isc_store_sqlite_err(s, rc, "updating an experiment", err);
}

int isc_store_experiment_request_cancel(struct isc_store *s, const char *id, struct isc_err *err)
{
	struct isc_experiment e;
	sqlite3_stmt *st;
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
		sqlite3_bind_int64(st, 1, isc_store_now_ms());
		sqlite3_bind_text(st, 2, id, -1, SQLITE_STATIC);
		rc = sqlite3_step(st) == SQLITE_DONE
		         ? 0
		         : isc_store_sqlite_err(s, SQLITE_ERROR, "cancelling", err);
		sqlite3_finalize(st);
	}
	if (!rc)
		rc =
		    isc_store_event_add(s, id, "cancel_requested", "cancel requested by user", err);
	if (!rc && at_once) {
		/* ECONFLICT: iscd started it meanwhile; it is stopped with grace instead. */
		int t = transition(s, id, from, "cancelled", "", "cancelled by user", err);
		if (t && t != ISC_ECONFLICT)
			rc = t;
	}
	if (!rc)
		rc = isc_store_commit(s, err);
	if (rc)
		isc_store_rollback(s);
	return rc;
}

static int event_from_row(sqlite3_stmt *st, void *rec)
{
	struct isc_event *ev = rec;
	int oom = 0;
	ev->id = sqlite3_column_int64(st, 0);
	ev->experiment_id = isc_store_col_text(st, 1, &oom);
	ev->at_ms = sqlite3_column_int64(st, 2);
	ev->kind = isc_store_col_text(st, 3, &oom);
	ev->message = isc_store_col_text(st, 4, &oom);
	return oom ? ISC_ENOMEM : 0;
}

int isc_store_event_list(struct isc_store *s, const char *experiment_id, int64_t after_id,
                         struct isc_event **out, size_t *n, struct isc_err *err)
{
	sqlite3_stmt *st;
	void *list;
	int rc =
	    isc_store_prepare_cached(s,
	                             "SELECT id, experiment_id, at_ms, kind, message FROM events "
	                             "WHERE experiment_id = ? AND id > ? ORDER BY id",
	                             &st, err);
	if (rc)
		return rc;
	sqlite3_bind_text(st, 1, experiment_id, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, after_id);
	rc = isc_store_read_rows(s, st, sizeof(**out), event_from_row, event_clean,
	                         "reading events", &list, n, err);
	if (!rc)
		*out = list;
	return rc;
}
