/* The queue_state table (see store_queue.h). */
#include "store/store_queue.h"

#include "store/store_int.h"

#include <stdlib.h>
#include <string.h>

int isc_store_queue_put(struct isc_store *s, const struct isc_queue_row *r, struct isc_err *err)
{
	sqlite3_stmt *st;
	int rc = isc_store_prepare(
	    s,
	    "INSERT OR REPLACE INTO queue_state (experiment_id, position, next_start_ms, "
	    "run_nodes, cycles_done, updated_ms) VALUES (?, ?, ?, ?, ?, ?)",
	    &st, err);
	if (rc)
		return rc;
	sqlite3_bind_text(st, 1, r->experiment_id, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 2, r->position);
	sqlite3_bind_int64(st, 3, r->next_start_ms);
	sqlite3_bind_text(st, 4, r->run_nodes ? r->run_nodes : "", -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 5, r->cycles_done);
	sqlite3_bind_int64(st, 6, isc_store_now_ms());
	rc = sqlite3_step(st);
	rc = rc == SQLITE_DONE ? 0 : isc_store_sqlite_err(s, rc, "recording the queue state", err);
	sqlite3_finalize(st);
	return rc;
}

int isc_store_queue_get(struct isc_store *s, const char *experiment_id, struct isc_queue_row *out,
                        struct isc_err *err)
{
	sqlite3_stmt *st;
	int rc = isc_store_prepare_cached(s,
	                                  "SELECT position, next_start_ms, run_nodes, cycles_done, "
	                                  "updated_ms FROM queue_state WHERE experiment_id = ?",
	                                  &st, err);
	memset(out, 0, sizeof(*out));
	if (rc)
		return rc;
	sqlite3_bind_text(st, 1, experiment_id, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		out->experiment_id = strdup(experiment_id);
		out->position = sqlite3_column_int(st, 0);
		out->next_start_ms = sqlite3_column_int64(st, 1);
		out->run_nodes = strdup((const char *)sqlite3_column_text(st, 2));
		out->cycles_done = sqlite3_column_int(st, 3);
		out->updated_ms = sqlite3_column_int64(st, 4);
		rc = out->experiment_id && out->run_nodes
		         ? 0
		         : isc_err_set(err, ISC_ENOMEM, "out of memory");
	} else if (rc == SQLITE_DONE) {
		rc = isc_err_set(err, ISC_ENOTFOUND, "experiment %s was never queued on-prem",
		                 experiment_id);
	} else {
		rc = isc_store_sqlite_err(s, rc, "reading the queue state", err);
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
