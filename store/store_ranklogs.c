/* Rank logs in the store: the SQL of the rank_logs table (see store_ranklogs.h). */
#include "store/store_ranklogs.h"

#include "store/store_int.h"

#include <stdlib.h>
#include <string.h>

int isc_store_ranklog_append(struct isc_store *s, const struct isc_ranklog_chunk *c, size_t n,
                             struct isc_err *err)
{
	struct isc_db_stmt *st = NULL;
	int64_t now = isc_store_now_ms();
	int rc;

	for (size_t i = 0; i < n; i++)
		if (c[i].len == 0 || c[i].len > ISC_RANKLOG_ROW_MAX || !c[i].experiment_id ||
		    c[i].rank < 0 || c[i].offset > (uint64_t)INT64_MAX)
			return isc_err_set(err, ISC_EINVALID,
			                   "rank log chunk %zu (%s rank %d at %llu): %zu bytes, "
			                   "not 1..%d",
			                   i, c[i].experiment_id ? c[i].experiment_id : "?",
			                   c[i].rank, (unsigned long long)c[i].offset, c[i].len,
			                   ISC_RANKLOG_ROW_MAX);
	if (n == 0)
		return 0;
	if ((rc = isc_store_begin(s, err)))
		return rc;
	rc = isc_store_prepare_cached(
	    s,
	    "INSERT INTO rank_logs (experiment_id, rank, off, len, cluster_id, data, "
	    "created_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?) "
	    "ON CONFLICT (experiment_id, rank, off) DO NOTHING",
	    &st, err);
	for (size_t i = 0; !rc && i < n; i++) {
		isc_db_reset(st);
		isc_db_clear_bindings(st);
		isc_db_bind_text(st, 1, c[i].experiment_id, -1, ISC_DB_STATIC);
		isc_db_bind_int(st, 2, c[i].rank);
		isc_db_bind_int64(st, 3, (int64_t)c[i].offset);
		isc_db_bind_int64(st, 4, (int64_t)c[i].len);
		isc_db_bind_text(st, 5, c[i].cluster_id ? c[i].cluster_id : "", -1, ISC_DB_STATIC);
		isc_db_bind_blob(st, 6, c[i].data, (int)c[i].len, ISC_DB_STATIC);
		isc_db_bind_int64(st, 7, now);
		if ((rc = isc_db_step(st)) != ISC_DB_DONE)
			rc = isc_store_db_err(s, rc, "appending to a rank log", err);
		else
			rc = 0;
	}
	if (st)
		isc_store_finalize(s, st);
	if (rc) {
		isc_store_rollback(s);
		return rc;
	}
	return isc_store_commit(s, err);
}

int isc_store_ranklog_end(struct isc_store *s, const char *experiment_id, int rank, uint64_t *end,
                          char *last, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(s,
	                           "SELECT off, len, data FROM rank_logs WHERE experiment_id = ? "
	                           "AND rank = ? ORDER BY off DESC LIMIT 1",
	                           &st, err);

	*end = 0;
	if (last)
		*last = '\n';
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, experiment_id, -1, ISC_DB_STATIC);
	isc_db_bind_int(st, 2, rank);
	rc = isc_db_step(st);
	if (rc == ISC_DB_ROW) {
		const unsigned char *d = isc_db_column_blob(st, 2);
		int bytes = isc_db_column_bytes(st, 2);
		*end = (uint64_t)isc_db_column_int64(st, 0) + (uint64_t)isc_db_column_int64(st, 1);
		if (last && d && bytes > 0)
			*last = (char)d[bytes - 1];
		rc = 0;
	} else if (rc == ISC_DB_DONE) {
		rc = 0;
	} else {
		rc = isc_store_db_err(s, rc, "reading where a rank log ends", err);
	}
	isc_db_finalize(st);
	return rc;
}

int isc_store_ranklog_total(struct isc_store *s, const char *experiment_id, uint64_t *bytes,
                            struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(
	    s, "SELECT COALESCE(SUM(len), 0) FROM rank_logs WHERE experiment_id = ?", &st, err);

	*bytes = 0;
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, experiment_id, -1, ISC_DB_STATIC);
	rc = isc_db_step(st);
	if (rc == ISC_DB_ROW) {
		*bytes = (uint64_t)isc_db_column_int64(st, 0);
		rc = 0;
	} else {
		rc = isc_store_db_err(s, rc, "adding up an experiment's logs", err);
	}
	isc_db_finalize(st);
	return rc;
}

int isc_store_ranklog_read(struct isc_store *s, const char *experiment_id, int rank,
                           uint64_t offset, char *buf, size_t cap, size_t *got, uint64_t *next,
                           int *found, struct isc_err *err)
{
	struct isc_db_stmt *st;
	uint64_t pos = offset;
	int rc;

	*got = 0;
	*found = 0;
	*next = offset;
	/*
	 * The rows that hold bytes at or after offset: one that starts at most a row's
	 * size before it, in offset order (the primary key's), as many as fill cap.
	 */
	rc = isc_store_prepare(s,
	                       "SELECT off, len, data FROM rank_logs WHERE experiment_id = ? AND "
	                       "rank = ? AND off > ? AND off + len > ? ORDER BY off LIMIT ?",
	                       &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, experiment_id, -1, ISC_DB_STATIC);
	isc_db_bind_int(st, 2, rank);
	isc_db_bind_int64(st, 3, (int64_t)offset - ISC_RANKLOG_ROW_MAX);
	isc_db_bind_int64(st, 4, (int64_t)offset);
	isc_db_bind_int64(st, 5, 512); /* small rows: the reader asks again */
	while ((rc = isc_db_step(st)) == ISC_DB_ROW) {
		uint64_t off = (uint64_t)isc_db_column_int64(st, 0);
		const char *d = isc_db_column_blob(st, 2);
		uint64_t len = (uint64_t)isc_db_column_bytes(st, 2), take;

		*found = 1;
		if (off > pos) {
			/* A gap (bytes the shipper lost, said by its marker): a read that has
			 * nothing yet goes on after it; one that has stops before it. */
			if (*got)
				break;
			pos = off;
		}
		if (off + len <= pos)
			continue; /* overlapped by rows already read */
		take = off + len - pos;
		if (take > cap - *got)
			take = cap - *got;
		memcpy(buf + *got, d + (pos - off), (size_t)take);
		*got += (size_t)take;
		pos += take;
		if (*got == cap)
			break;
	}
	if (rc != ISC_DB_ROW && rc != ISC_DB_DONE) {
		rc = isc_store_db_err(s, rc, "reading a rank log", err);
		isc_db_finalize(st);
		return rc;
	}
	isc_db_finalize(st);
	*next = pos;
	if (!*found) {
		/* Past the end, or before the first row: is there any row of the rank? */
		uint64_t end;
		if ((rc = isc_store_ranklog_end(s, experiment_id, rank, &end, NULL, err)))
			return rc;
		*found = end > 0;
	}
	return 0;
}

int isc_store_ranklog_delete(struct isc_store *s, const char *experiment_id, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(s, "DELETE FROM rank_logs WHERE experiment_id = ?", &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, experiment_id, -1, ISC_DB_STATIC);
	if ((rc = isc_db_step(st)) != ISC_DB_DONE)
		rc = isc_store_db_err(s, rc, "removing an experiment's logs", err);
	else
		rc = 0;
	isc_db_finalize(st);
	return rc;
}
