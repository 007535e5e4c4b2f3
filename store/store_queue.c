/* The queue_state table (see store_queue.h). */
#include "store/store_queue.h"

#include "store/store_int.h"

#include <stdlib.h>
#include <string.h>

int isc_store_queue_put(struct isc_store *s, const struct isc_queue_row *r, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(
	    s,
	    "INSERT INTO queue_state (experiment_id, position, next_start_ms, "
	    "run_nodes, cycles_done, updated_ms) VALUES (?, ?, ?, ?, ?, ?) "
	    "ON CONFLICT (experiment_id) DO UPDATE SET position = excluded.position, "
	    "next_start_ms = excluded.next_start_ms, run_nodes = excluded.run_nodes, "
	    "cycles_done = excluded.cycles_done, updated_ms = excluded.updated_ms",
	    &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, r->experiment_id, -1, ISC_DB_STATIC);
	isc_db_bind_int(st, 2, r->position);
	isc_db_bind_int64(st, 3, r->next_start_ms);
	isc_db_bind_text(st, 4, r->run_nodes ? r->run_nodes : "", -1, ISC_DB_STATIC);
	isc_db_bind_int(st, 5, r->cycles_done);
	isc_db_bind_int64(st, 6, isc_store_now_ms());
	rc = isc_db_step(st);
	rc = rc == ISC_DB_DONE ? 0 : isc_store_db_err(s, rc, "recording the queue state", err);
	isc_db_finalize(st);
	return rc;
}

int isc_store_queue_get(struct isc_store *s, const char *experiment_id, struct isc_queue_row *out,
                        struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare_cached(s,
	                                  "SELECT position, next_start_ms, run_nodes, cycles_done, "
	                                  "updated_ms FROM queue_state WHERE experiment_id = ?",
	                                  &st, err);
	memset(out, 0, sizeof(*out));
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, experiment_id, -1, ISC_DB_STATIC);
	rc = isc_db_step(st);
	if (rc == ISC_DB_ROW) {
		out->experiment_id = strdup(experiment_id);
		out->position = isc_db_column_int(st, 0);
		out->next_start_ms = isc_db_column_int64(st, 1);
		out->run_nodes = strdup((const char *)isc_db_column_text(st, 2));
		out->cycles_done = isc_db_column_int(st, 3);
		out->updated_ms = isc_db_column_int64(st, 4);
		rc = out->experiment_id && out->run_nodes
		         ? 0
		         : isc_err_set(err, ISC_ENOMEM, "out of memory");
	} else if (rc == ISC_DB_DONE) {
		rc = isc_err_set(err, ISC_ENOTFOUND, "experiment %s was never queued on-prem",
		                 experiment_id);
	} else {
		rc = isc_store_db_err(s, rc, "reading the queue state", err);
	}
	isc_store_finalize(s, st);
	if (rc)
		isc_queue_row_cleanup(out);
	return rc;
}

void isc_queue_row_cleanup(struct isc_queue_row *r)
{
	free(r->experiment_id);
	free(r->run_nodes);
	memset(r, 0, sizeof(*r));
}

/* ---- the burst broker's notes (the migration of issue 30) ---- */

/* Runs a statement of up to three text parameters (NULL binds NULL) that returns no row. */
static int exec3(struct isc_store *s, const char *sql, const char *a, const char *b, const char *c,
                 const char *what, struct isc_err *err)
{
	const char *v[3] = {a, b, c};
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(s, sql, &st, err);
	if (rc)
		return rc;
	for (int i = 0; i < 3 && i < isc_db_bind_parameter_count(st); i++) {
		if (v[i])
			isc_db_bind_text(st, i + 1, v[i], -1, ISC_DB_STATIC);
		else
			isc_db_bind_null(st, i + 1);
	}
	rc = isc_db_step(st);
	rc = rc == ISC_DB_DONE ? 0 : isc_store_db_err(s, rc, what, err);
	isc_db_finalize(st);
	return rc;
}

int isc_store_burst_wait_put(struct isc_store *s, const char *experiment_id, int why,
                             struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(s,
	                           "INSERT INTO burst_waits (experiment_id, why, at_ms) VALUES "
	                           "(?1, ?2, ?3) ON CONFLICT (experiment_id) DO UPDATE SET why = "
	                           "?2, at_ms = ?3 WHERE burst_waits.why != ?2",
	                           &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, experiment_id, -1, ISC_DB_STATIC);
	isc_db_bind_int(st, 2, why);
	isc_db_bind_int64(st, 3, isc_store_now_ms());
	rc = isc_db_step(st);
	rc = rc == ISC_DB_DONE ? 0 : isc_store_db_err(s, rc, "noting why a burst waits", err);
	isc_db_finalize(st);
	return rc;
}

int isc_store_burst_wait_get(struct isc_store *s, const char *experiment_id, int *why,
                             struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare_cached(s, "SELECT why FROM burst_waits WHERE experiment_id = ?",
	                                  &st, err);
	*why = 0;
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, experiment_id, -1, ISC_DB_STATIC);
	rc = isc_db_step(st);
	if (rc == ISC_DB_ROW)
		*why = isc_db_column_int(st, 0);
	rc = rc == ISC_DB_ROW || rc == ISC_DB_DONE
	         ? 0
	         : isc_store_db_err(s, rc, "reading why a burst waits", err);
	isc_store_finalize(s, st);
	return rc;
}

static void id_clean(void *rec)
{
	free(*(char **)rec);
}

static int id_from_row(struct isc_db_stmt *st, void *rec)
{
	int oom = 0;
	*(char **)rec = isc_store_col_text(st, 0, &oom);
	return oom || !*(char **)rec ? ISC_ENOMEM : 0;
}

int isc_store_burst_noted(struct isc_store *s, char ***ids, size_t *n, struct isc_err *err)
{
	struct isc_db_stmt *st;
	void *rows = NULL;
	int rc = isc_store_prepare(s,
	                           "SELECT experiment_id FROM burst_waits UNION SELECT "
	                           "experiment_id FROM shape_exclusions",
	                           &st, err);
	*ids = NULL;
	*n = 0;
	if (rc)
		return rc;
	rc = isc_store_read_rows(s, st, sizeof(char *), id_from_row, id_clean,
	                         "reading the bursts' notes", &rows, n, err);
	if (!rc)
		*ids = rows;
	return rc;
}

int isc_store_burst_forget(struct isc_store *s, const char *experiment_id, struct isc_err *err)
{
	int rc = isc_store_begin(s, err);
	if (rc)
		return rc;
	rc = exec3(s, "DELETE FROM burst_waits WHERE experiment_id = ?", experiment_id, NULL, NULL,
	           "forgetting why a burst waits", err);
	if (!rc)
		rc = isc_store_shape_exclusions_clear(s, experiment_id, err);
	if (!rc)
		rc = isc_store_commit(s, err);
	if (rc)
		isc_store_rollback(s);
	return rc;
}

int isc_store_shape_exclude(struct isc_store *s, const char *experiment_id, const char *shape_id,
                            struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(s,
	                           "INSERT INTO shape_exclusions (experiment_id, shape_id, "
	                           "at_ms) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
	                           &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, experiment_id, -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 2, shape_id, -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 3, isc_store_now_ms());
	rc = isc_db_step(st);
	rc = rc == ISC_DB_DONE ? 0 : isc_store_db_err(s, rc, "excluding a shape", err);
	isc_db_finalize(st);
	return rc;
}

int isc_store_shape_excluded(struct isc_store *s, const char *experiment_id, const char *shape_id,
                             int *excluded, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare_cached(
	    s, "SELECT 1 FROM shape_exclusions WHERE experiment_id = ? AND shape_id = ?", &st, err);
	*excluded = 0;
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, experiment_id, -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 2, shape_id, -1, ISC_DB_STATIC);
	rc = isc_db_step(st);
	*excluded = rc == ISC_DB_ROW;
	rc = rc == ISC_DB_ROW || rc == ISC_DB_DONE
	         ? 0
	         : isc_store_db_err(s, rc, "reading a shape exclusion", err);
	isc_store_finalize(s, st);
	return rc;
}

int isc_store_shape_exclusions_clear(struct isc_store *s, const char *experiment_id,
                                     struct isc_err *err)
{
	return exec3(
	    s, "DELETE FROM shape_exclusions WHERE CAST(?1 AS TEXT) IS NULL OR experiment_id = ?1",
	    experiment_id, NULL, NULL, "clearing shape exclusions", err);
}

int isc_store_sync_clock_get(struct isc_store *s, const char *cluster_id,
                             int64_t *checkpoints_at_ms, int64_t *lossy_at_ms, int *found,
                             struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare_cached(
	    s, "SELECT checkpoints_at_ms, lossy_at_ms FROM sync_clocks WHERE cluster_id = ?", &st,
	    err);
	*found = 0;
	*checkpoints_at_ms = *lossy_at_ms = 0;
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, cluster_id, -1, ISC_DB_STATIC);
	rc = isc_db_step(st);
	if (rc == ISC_DB_ROW) {
		*found = 1;
		*checkpoints_at_ms = isc_db_column_int64(st, 0);
		*lossy_at_ms = isc_db_column_int64(st, 1);
	}
	rc = rc == ISC_DB_ROW || rc == ISC_DB_DONE
	         ? 0
	         : isc_store_db_err(s, rc, "reading a sync clock", err);
	isc_store_finalize(s, st);
	return rc;
}

int isc_store_sync_clock_put(struct isc_store *s, const char *cluster_id, int64_t checkpoints_at_ms,
                             int64_t lossy_at_ms, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(s,
	                           "INSERT INTO sync_clocks (cluster_id, "
	                           "checkpoints_at_ms, lossy_at_ms) VALUES (?, ?, ?) "
	                           "ON CONFLICT (cluster_id) DO UPDATE SET "
	                           "checkpoints_at_ms = excluded.checkpoints_at_ms, "
	                           "lossy_at_ms = excluded.lossy_at_ms",
	                           &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, cluster_id, -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 2, checkpoints_at_ms);
	isc_db_bind_int64(st, 3, lossy_at_ms);
	rc = isc_db_step(st);
	rc = rc == ISC_DB_DONE ? 0 : isc_store_db_err(s, rc, "recording a sync clock", err);
	isc_db_finalize(st);
	return rc;
}

int isc_store_sync_clock_forget(struct isc_store *s, const char *cluster_id, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc, stale;

	if (cluster_id)
		return exec3(s, "DELETE FROM sync_clocks WHERE cluster_id = ?", cluster_id, NULL,
		             NULL, "forgetting a sync clock", err);
	/* Read first: a DELETE takes the write lock even when it matches nothing. */
	rc = isc_store_prepare_cached(
	    s,
	    "SELECT 1 FROM sync_clocks s LEFT JOIN clusters c ON c.id = "
	    "s.cluster_id WHERE c.id IS NULL OR c.state = 'closed' LIMIT 1",
	    &st, err);
	if (rc)
		return rc;
	rc = isc_db_step(st);
	stale = rc == ISC_DB_ROW;
	rc = rc == ISC_DB_ROW || rc == ISC_DB_DONE
	         ? 0
	         : isc_store_db_err(s, rc, "reading the sync clocks", err);
	isc_store_finalize(s, st);
	if (rc || !stale)
		return rc;
	return exec3(s,
	             "DELETE FROM sync_clocks WHERE cluster_id IN (SELECT s.cluster_id FROM "
	             "sync_clocks s LEFT JOIN clusters c ON c.id = s.cluster_id WHERE c.id IS NULL "
	             "OR c.state = 'closed')",
	             NULL, NULL, NULL, "forgetting the sync clocks of closed clusters", err);
}
