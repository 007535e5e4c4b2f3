/* The manifests of checkpoint versions in the bucket (store/store_artifacts.h). */
#include "store/store_artifacts.h"

#include "store/store_int.h"

#include <stdlib.h>
#include <string.h>

void isc_manifest_row_cleanup(struct isc_manifest_row *r)
{
	if (!r)
		return;
	free(r->experiment_id);
	free(r->json);
	memset(r, 0, sizeof(*r));
}

void isc_manifest_row_list_free(struct isc_manifest_row *rows, size_t n)
{
	for (size_t i = 0; rows && i < n; i++)
		isc_manifest_row_cleanup(&rows[i]);
	free(rows);
}

int isc_store_manifest_add(struct isc_store *s, const char *experiment_id, int64_t version,
                           int64_t org_id, int64_t total_bytes, const char *json,
                           struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc =
	    isc_store_prepare(s,
	                      "INSERT INTO artifact_manifests (experiment_id, version, org_id, "
	                      "total_bytes, manifest_json, created_at_ms) VALUES (?, ?, ?, ?, "
	                      "?, ?)",
	                      &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, experiment_id, -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 2, version);
	isc_db_bind_int64(st, 3, org_id);
	isc_db_bind_int64(st, 4, total_bytes);
	isc_db_bind_text(st, 5, json, -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 6, isc_store_now_ms());
	rc = isc_db_step(st);
	isc_db_finalize(st);
	if (rc == ISC_DB_CONSTRAINT)
		return isc_err_set(err, ISC_ECONFLICT,
		                   "%s: manifest version %lld is recorded already", experiment_id,
		                   (long long)version);
	return rc == ISC_DB_DONE ? 0 : isc_store_db_err(s, rc, "recording a manifest", err);
}

static int rows(struct isc_store *s, const char *sql, const char *experiment_id,
                struct isc_manifest_row **out, size_t *n, struct isc_err *err)
{
	struct isc_db_stmt *st;
	struct isc_manifest_row *list = NULL;
	size_t cnt = 0;
	int rc = isc_store_prepare(s, sql, &st, err), oom = 0;

	*out = NULL;
	*n = 0;
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, experiment_id, -1, ISC_DB_STATIC);
	while ((rc = isc_db_step(st)) == ISC_DB_ROW) {
		struct isc_manifest_row *g = realloc(list, (cnt + 1) * sizeof(*g)), *r;
		if (!g) {
			oom = 1;
			break;
		}
		list = g;
		r = &list[cnt++];
		memset(r, 0, sizeof(*r));
		r->experiment_id = strdup((const char *)isc_db_column_text(st, 0));
		r->version = isc_db_column_int64(st, 1);
		r->org_id = isc_db_column_int64(st, 2);
		r->total_bytes = isc_db_column_int64(st, 3);
		r->json = strdup((const char *)isc_db_column_text(st, 4));
		r->created_at_ms = isc_db_column_int64(st, 5);
		if (!r->experiment_id || !r->json) {
			oom = 1;
			break;
		}
	}
	isc_db_finalize(st);
	if (oom || (rc != ISC_DB_DONE && rc != ISC_DB_ROW)) {
		isc_manifest_row_list_free(list, cnt);
		return oom ? isc_err_set(err, ISC_ENOMEM, "out of memory")
		           : isc_store_db_err(s, rc, "reading manifests", err);
	}
	*out = list;
	*n = cnt;
	return 0;
}

#define ROW_COLS "experiment_id, version, org_id, total_bytes, manifest_json, created_at_ms"

int isc_store_manifest_list(struct isc_store *s, const char *experiment_id,
                            struct isc_manifest_row **out, size_t *n, struct isc_err *err)
{
	return rows(s,
	            "SELECT " ROW_COLS " FROM artifact_manifests WHERE experiment_id = ? ORDER BY "
	            "version",
	            experiment_id, out, n, err);
}

int isc_store_manifest_current(struct isc_store *s, const char *experiment_id,
                               struct isc_manifest_row *out, struct isc_err *err)
{
	struct isc_manifest_row *list;
	size_t n;
	int rc =
	    rows(s,
	         "SELECT " ROW_COLS " FROM artifact_manifests WHERE experiment_id = ? ORDER BY "
	         "version DESC LIMIT 1",
	         experiment_id, &list, &n, err);
	memset(out, 0, sizeof(*out));
	if (rc)
		return rc;
	if (!n) {
		free(list);
		return isc_err_set(err, ISC_ENOTFOUND,
		                   "%s: no checkpoint version in the bucket yet", experiment_id);
	}
	*out = list[0];
	free(list);
	return 0;
}

int isc_store_manifest_delete(struct isc_store *s, const char *experiment_id, int64_t version,
                              struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(
	    s, "DELETE FROM artifact_manifests WHERE experiment_id = ? AND version = ?", &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, experiment_id, -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 2, version);
	rc = isc_db_step(st);
	isc_db_finalize(st);
	return rc == ISC_DB_DONE ? 0 : isc_store_db_err(s, rc, "deleting a manifest", err);
}

int isc_store_manifest_org_bytes(struct isc_store *s, int64_t org_id, int64_t *bytes,
                                 struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(
	    s,
	    "SELECT COALESCE(SUM(m.total_bytes), 0) FROM artifact_manifests m WHERE m.org_id = ? "
	    "AND m.version = (SELECT MAX(x.version) FROM artifact_manifests x WHERE "
	    "x.experiment_id = m.experiment_id)",
	    &st, err);
	*bytes = 0;
	if (rc)
		return rc;
	isc_db_bind_int64(st, 1, org_id);
	rc = isc_db_step(st);
	if (rc == ISC_DB_ROW)
		*bytes = isc_db_column_int64(st, 0);
	isc_db_finalize(st);
	return rc == ISC_DB_ROW ? 0 : isc_store_db_err(s, rc, "counting manifests' bytes", err);
}
