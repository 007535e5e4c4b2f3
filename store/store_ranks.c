/* Rank exits (store_ranks.h). */
#include "store/store_ranks.h"

#include "store/store_int.h"

#include <stdlib.h>

int isc_store_rank_exit_record(struct isc_store *s, const char *cluster_id, int rank, int code,
                               int *inserted, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(s,
	                           "INSERT INTO rank_exits (cluster_id, rank, code, at_ms) "
	                           "VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
	                           &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, cluster_id, -1, ISC_DB_STATIC);
	isc_db_bind_int(st, 2, rank);
	isc_db_bind_int(st, 3, code);
	isc_db_bind_int64(st, 4, isc_store_now_ms());
	rc = isc_db_step(st);
	if (rc == ISC_DB_DONE && inserted)
		*inserted = isc_db_changes(isc_db_handle(st)) > 0;
	isc_db_finalize(st);
	return rc == ISC_DB_DONE ? 0 : isc_store_db_err(s, rc, "recording a rank's exit", err);
}

int isc_store_rank_exit_list(struct isc_store *s, const char *experiment_id,
                             struct isc_rank_outcome **out, size_t *n, struct isc_err *err)
{
	struct isc_rank_outcome *list = NULL;
	size_t count = 0;
	struct isc_db_stmt *st;
	int rc, oom = 0;

	*out = NULL;
	*n = 0;
	rc = isc_store_prepare_cached(s,
	                              "SELECT r.cluster_id, c.cycle, r.rank, r.code, r.at_ms "
	                              "FROM rank_exits r JOIN clusters c ON c.id = r.cluster_id "
	                              "WHERE c.experiment_id = ? ORDER BY c.cycle, r.at_ms, r.rank",
	                              &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, experiment_id, -1, ISC_DB_STATIC);
	while ((rc = isc_db_step(st)) == ISC_DB_ROW) {
		struct isc_rank_outcome *grown = realloc(list, (count + 1) * sizeof(*list)), *o;
		if (!grown) {
			oom = 1;
			break;
		}
		list = grown;
		o = &list[count++];
		o->cluster_id = isc_store_col_text(st, 0, &oom);
		o->cycle = isc_db_column_int(st, 1);
		o->rank = isc_db_column_int(st, 2);
		o->code = isc_db_column_int(st, 3);
		o->at_ms = isc_db_column_int64(st, 4);
		if (oom)
			break;
	}
	isc_store_finalize(s, st);
	if (oom || (rc != ISC_DB_DONE && rc != ISC_DB_ROW)) {
		isc_rank_outcome_list_free(list, count);
		return oom ? isc_err_set(err, ISC_ENOMEM, "out of memory")
		           : isc_store_db_err(s, rc, "reading rank exits", err);
	}
	*out = list;
	*n = count;
	return 0;
}

static void rank_outcome_clean(void *rec)
{
	free(((struct isc_rank_outcome *)rec)->cluster_id);
}

void isc_rank_outcome_list_free(struct isc_rank_outcome *list, size_t n)
{
	isc_store_rows_free(list, n, sizeof(*list), rank_outcome_clean);
}
