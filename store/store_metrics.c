/*
 * The store's counts for the metrics' gauges (store/store_metrics.h). Each part
 * reads an index: experiments_status, and the nodes of clusters not yet closed.
 */
#include "store/store_metrics.h"
#include "store/db.h"
#include "store/store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int isc_store_metrics_counts(struct isc_store *s, struct isc_store_count **out, size_t *n,
                             struct isc_err *err)
{
	struct isc_store_count *rows = NULL;
	size_t len = 0, cap = 0;
	struct isc_db_stmt *st;
	int rc;

	*out = NULL;
	*n = 0;
	rc = isc_store_prepare_cached(
	    s,
	    "SELECT 0, status, count(*) FROM experiments WHERE compute_mode = 'burst' "
	    "GROUP BY status "
	    "UNION ALL SELECT 1, compute_mode, count(*) FROM experiments "
	    "WHERE status IN ('enqueued', 'waiting') GROUP BY compute_mode "
	    "UNION ALL SELECT 2, c.provider, count(*) FROM nodes n "
	    "JOIN clusters c ON c.id = n.cluster_id "
	    "WHERE n.state != 'terminated' AND n.terminated_at_ms IS NULL GROUP BY c.provider",
	    &st, err);
	if (rc)
		return rc;
	while ((rc = isc_db_step(st)) == ISC_DB_ROW) {
		const char *key = (const char *)isc_db_column_text(st, 1);
		if (len == cap) {
			size_t ncap = cap ? cap * 2 : 32;
			struct isc_store_count *grown = realloc(rows, ncap * sizeof(*rows));
			if (!grown) {
				isc_store_finalize(s, st);
				free(rows);
				return isc_err_set(err, ISC_ENOMEM, "out of memory");
			}
			rows = grown;
			cap = ncap;
		}
		rows[len].kind = (enum isc_store_count_kind)isc_db_column_int(st, 0);
		snprintf(rows[len].key, sizeof(rows[len].key), "%s", key ? key : "");
		rows[len].n = isc_db_column_int64(st, 2);
		len++;
	}
	if (rc != ISC_DB_DONE) {
		rc = isc_store_db_err(s, rc, "counting for the metrics", err);
		isc_store_finalize(s, st);
		free(rows);
		return rc;
	}
	isc_store_finalize(s, st);
	*out = rows;
	*n = len;
	return 0;
}

int isc_store_metrics_run_history(struct isc_store *s, const char *experiment_id,
                                  int64_t *ran_before, int64_t *interrupted_ms, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc;

	*ran_before = *interrupted_ms = 0;
	rc = isc_store_prepare_cached(
	    s,
	    "SELECT (SELECT count(*) FROM events WHERE experiment_id = ?1 AND kind = 'running'), "
	    "(SELECT min(at_ms) FROM events WHERE experiment_id = ?1 AND kind = 'interrupted' "
	    "AND id > (SELECT COALESCE(max(id), 0) FROM events "
	    "WHERE experiment_id = ?1 AND kind = 'running'))",
	    &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, experiment_id, -1, ISC_DB_STATIC);
	rc = isc_db_step(st);
	if (rc != ISC_DB_ROW) {
		rc = isc_store_db_err(s, rc, "reading the timeline for the metrics", err);
		isc_store_finalize(s, st);
		return rc;
	}
	*ran_before = isc_db_column_int64(st, 0) > 0;
	if (isc_db_column_type(st, 1) != ISC_DB_NULL)
		*interrupted_ms = isc_db_column_int64(st, 1);
	isc_store_finalize(s, st);
	return 0;
}
