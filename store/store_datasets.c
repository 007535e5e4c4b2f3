/*
 * Every SQL statement about datasets (store_datasets.h).
 */
#include "store/store_datasets.h"
#include "store/store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DS_COLS                                                                                    \
	"d.id, d.org_id, o.name, d.name, d.uri, d.bucket, d.key, d.is_folder, d.etag, "            \
	"d.version_id, d.credentials, d.size_bytes, d.volume_bytes, d.cached_bytes, d.state, "     \
	"d.reason, d.copy_name, d.manifest_json, d.created_at_ms, d.updated_at_ms, "               \
	"d.credentials_nonce, d.credentials_ciphertext"
#define DS_FROM " FROM datasets d JOIN orgs o ON o.id = d.org_id "

void isc_dataset_cleanup(struct isc_dataset *d)
{
	if (!d)
		return;
	free(d->id);
	free(d->org_name);
	free(d->name);
	free(d->uri);
	free(d->bucket);
	free(d->key);
	free(d->etag);
	free(d->version_id);
	free(d->credentials);
	free(d->state);
	free(d->reason);
	free(d->copy_name);
	free(d->manifest_json);
	free(d->cred_nonce);
	free(d->cred_ciphertext);
	memset(d, 0, sizeof(*d));
}

static void dataset_clean(void *rec)
{
	isc_dataset_cleanup(rec);
}

void isc_dataset_list_free(struct isc_dataset *list, size_t n)
{
	isc_store_rows_free(list, n, sizeof(*list), dataset_clean);
}

static unsigned char *col_blob(struct isc_db_stmt *st, int col, size_t *len, int *oom)
{
	const void *b = isc_db_column_blob(st, col);
	int n = isc_db_column_bytes(st, col);
	unsigned char *copy;

	*len = 0;
	if (!b || n <= 0)
		return NULL;
	copy = malloc((size_t)n);
	if (!copy) {
		*oom = 1;
		return NULL;
	}
	memcpy(copy, b, (size_t)n);
	*len = (size_t)n;
	return copy;
}

static int row(struct isc_db_stmt *st, struct isc_dataset *d)
{
	int oom = 0;
	memset(d, 0, sizeof(*d));
	d->id = isc_store_col_text(st, 0, &oom);
	d->org_id = isc_db_column_int64(st, 1);
	d->org_name = isc_store_col_text(st, 2, &oom);
	d->name = isc_store_col_text(st, 3, &oom);
	d->uri = isc_store_col_text(st, 4, &oom);
	d->bucket = isc_store_col_text(st, 5, &oom);
	d->key = isc_store_col_text(st, 6, &oom);
	d->is_folder = isc_db_column_int(st, 7);
	d->etag = isc_store_col_text(st, 8, &oom);
	d->version_id = isc_store_col_text(st, 9, &oom);
	d->credentials = isc_store_col_text(st, 10, &oom);
	d->size_bytes = isc_db_column_int64(st, 11);
	d->volume_bytes = isc_db_column_int64(st, 12);
	d->cached_bytes = isc_db_column_int64(st, 13);
	d->state = isc_store_col_text(st, 14, &oom);
	d->reason = isc_store_col_text(st, 15, &oom);
	d->copy_name = isc_store_col_text(st, 16, &oom);
	if (isc_db_column_type(st, 17) != ISC_DB_NULL)
		d->manifest_json = isc_store_col_text(st, 17, &oom);
	d->created_at_ms = isc_db_column_int64(st, 18);
	d->updated_at_ms = isc_db_column_int64(st, 19);
	d->cred_nonce = col_blob(st, 20, &d->cred_nonce_len, &oom);
	d->cred_ciphertext = col_blob(st, 21, &d->cred_ciphertext_len, &oom);
	if (oom || !d->id || !d->org_name || !d->name || !d->uri || !d->bucket || !d->key ||
	    !d->etag || !d->version_id || !d->credentials || !d->state || !d->reason ||
	    !d->copy_name) {
		isc_dataset_cleanup(d);
		return ISC_ENOMEM;
	}
	return 0;
}

int isc_store_dataset_add(struct isc_store *s, const char *org_name, const struct isc_dataset *d,
                          char **id_out, struct isc_err *err)
{
	struct isc_db_stmt *st;
	char *id = d->id ? strdup(d->id) : isc_store_new_id("ds_");
	int rc, step;
	int64_t now = isc_store_now_ms();

	*id_out = NULL;
	if (!id)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	rc = isc_store_prepare(
	    s,
	    "INSERT INTO datasets (id, org_id, name, uri, bucket, key, is_folder, etag, "
	    "version_id, "
	    "credentials, size_bytes, volume_bytes, cached_bytes, state, reason, copy_name, "
	    "created_at_ms, updated_at_ms, credentials_nonce, credentials_ciphertext) "
	    "SELECT ?, o.id, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 'created', '', "
	    "'@' || o.id || '/' || ?, ?, ?, ?, ? "
	    "FROM orgs o WHERE o.name = ?",
	    &st, err);
	if (rc) {
		free(id);
		return rc;
	}
	isc_db_bind_text(st, 1, id, -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 2, d->name, -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 3, d->uri, -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 4, d->bucket, -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 5, d->key, -1, ISC_DB_STATIC);
	isc_db_bind_int(st, 6, d->is_folder);
	isc_db_bind_text(st, 7, d->etag ? d->etag : "", -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 8, d->version_id ? d->version_id : "", -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 9, d->credentials ? d->credentials : "", -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 10, d->size_bytes);
	isc_db_bind_int64(st, 11, d->volume_bytes);
	isc_db_bind_text(st, 12, d->copy_name, -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 13, now);
	isc_db_bind_int64(st, 14, now);
	if (d->cred_nonce && d->cred_ciphertext) {
		isc_db_bind_blob(st, 15, d->cred_nonce, (int)d->cred_nonce_len, ISC_DB_STATIC);
		isc_db_bind_blob(st, 16, d->cred_ciphertext, (int)d->cred_ciphertext_len,
		                 ISC_DB_STATIC);
	}
	isc_db_bind_text(st, 17, org_name, -1, ISC_DB_STATIC);
	step = isc_db_step(st);
	isc_db_finalize(st);
	if (step == ISC_DB_CONSTRAINT) {
		free(id);
		return isc_err_set(
		    err, ISC_ECONFLICT,
		    "organisation '%s' already has a dataset named '%s' (isc datasets "
		    "remove it, or give another --name)",
		    org_name, d->name);
	}
	if (step != ISC_DB_DONE) {
		free(id);
		return isc_store_db_err(s, step, "adding a dataset", err);
	}
	if (isc_db_changes(isc_store_db(s)) == 0) {
		free(id);
		return isc_err_set(err, ISC_ENOTFOUND, "no organisation named '%s'", org_name);
	}
	*id_out = id;
	return 0;
}

/* Runs a prepared SELECT of DS_COLS into a list. */
static int collect(struct isc_store *s, struct isc_db_stmt *st, struct isc_dataset **out, size_t *n,
                   struct isc_err *err)
{
	struct isc_dataset *list = NULL;
	size_t cnt = 0, cap = 0;
	int step, rc = 0;
	while ((step = isc_db_step(st)) == ISC_DB_ROW) {
		if (cnt == cap) {
			size_t nc = cap ? cap * 2 : 8;
			struct isc_dataset *nl = realloc(list, nc * sizeof(*nl));
			if (!nl) {
				rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
				break;
			}
			list = nl;
			cap = nc;
		}
		if (row(st, &list[cnt])) {
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
			break;
		}
		cnt++;
	}
	if (!rc && step != ISC_DB_DONE)
		rc = isc_store_db_err(s, step, "reading datasets", err);
	isc_db_finalize(st);
	if (rc) {
		isc_dataset_list_free(list, cnt);
		return rc;
	}
	*out = list;
	*n = cnt;
	return 0;
}

static int find_one(struct isc_store *s, struct isc_db_stmt *st, const char *what,
                    struct isc_dataset *out, struct isc_err *err)
{
	struct isc_dataset *list = NULL;
	size_t n = 0;
	int rc = collect(s, st, &list, &n, err);
	if (rc)
		return rc;
	if (n == 0) {
		isc_dataset_list_free(list, n);
		return isc_err_set(err, ISC_ENOTFOUND, "%s", what);
	}
	*out = list[0];
	for (size_t i = 1; i < n; i++)
		isc_dataset_cleanup(&list[i]);
	free(list);
	return 0;
}

int isc_store_dataset_find(struct isc_store *s, const char *org_name, const char *id_or_name,
                           struct isc_dataset *out, struct isc_err *err)
{
	struct isc_db_stmt *st;
	char what[300];
	int rc;
	memset(out, 0, sizeof(*out));
	if (org_name) {
		rc = isc_store_prepare(s,
		                       "SELECT " DS_COLS DS_FROM
		                       "WHERE o.name = ? AND (d.id = ? OR d.name = ?) "
		                       "ORDER BY d.id = ? DESC LIMIT 1",
		                       &st, err);
		if (rc)
			return rc;
		isc_db_bind_text(st, 1, org_name, -1, ISC_DB_STATIC);
		isc_db_bind_text(st, 2, id_or_name, -1, ISC_DB_STATIC);
		isc_db_bind_text(st, 3, id_or_name, -1, ISC_DB_STATIC);
		isc_db_bind_text(st, 4, id_or_name, -1, ISC_DB_STATIC);
		snprintf(what, sizeof(what), "organisation '%.64s' has no dataset '%.128s'",
		         org_name, id_or_name);
	} else {
		rc = isc_store_prepare(s, "SELECT " DS_COLS DS_FROM "WHERE d.id = ?", &st, err);
		if (rc)
			return rc;
		isc_db_bind_text(st, 1, id_or_name, -1, ISC_DB_STATIC);
		snprintf(what, sizeof(what), "no dataset '%.128s'", id_or_name);
	}
	return find_one(s, st, what, out, err);
}

int isc_store_dataset_list(struct isc_store *s, const char *org_name, int64_t visible_to,
                           const struct isc_dataset_cursor *after, size_t limit,
                           struct isc_dataset **out, size_t *n, struct isc_err *err)
{
	struct isc_db_stmt *st;
	/* The keyset condition sits in the same WHERE as the visibility one. */
	int rc = isc_store_prepare(
	    s,
	    "SELECT " DS_COLS DS_FROM "WHERE (CAST(?1 AS TEXT) IS NULL OR o.name = ?1) "
	    "AND (?2 = 0 OR d.org_id IN (SELECT m.org_id FROM memberships m WHERE m.user_id = ?2)) "
	    "AND (CAST(?3 AS TEXT) IS NULL OR o.name > ?3 OR (o.name = ?3 AND d.name > ?4)) "
	    "ORDER BY o.name, d.name LIMIT ?5",
	    &st, err);
	*out = NULL;
	*n = 0;
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, org_name, -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 2, visible_to);
	if (after) {
		isc_db_bind_text(st, 3, after->org_name, -1, ISC_DB_STATIC);
		isc_db_bind_text(st, 4, after->name, -1, ISC_DB_STATIC);
	}
	isc_db_bind_int64(st, 5, isc_store_page_limit(limit));
	return collect(s, st, out, n, err);
}

int isc_store_dataset_next_to_cache(struct isc_store *s, struct isc_dataset *out,
                                    struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc =
	    isc_store_prepare(s,
	                      "SELECT " DS_COLS DS_FROM "WHERE d.state IN ('caching', 'created') "
	                      "ORDER BY d.state = 'caching' DESC, d.created_at_ms, d.id LIMIT 1",
	                      &st, err);
	memset(out, 0, sizeof(*out));
	if (rc)
		return rc;
	return find_one(s, st, "no dataset to cache", out, err);
}

/* Statements number their parameters: ?1 the time, ?2 text, ?3 a number, ?4 the id. */
static int update(struct isc_store *s, const char *sql, const char *id, const char *text,
                  int64_t num, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(s, sql, &st, err), step;
	if (rc)
		return rc;
	isc_db_bind_int64(st, 1, isc_store_now_ms());
	isc_db_bind_text(st, 2, text, -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 3, num);
	isc_db_bind_text(st, 4, id, -1, ISC_DB_STATIC);
	step = isc_db_step(st);
	isc_db_finalize(st);
	if (step != ISC_DB_DONE)
		return isc_store_db_err(s, step, "updating a dataset", err);
	if (isc_db_changes(isc_store_db(s)) == 0)
		return isc_err_set(err, ISC_ENOTFOUND, "no dataset '%s'", id);
	return 0;
}

int isc_store_dataset_set_caching(struct isc_store *s, const char *id, struct isc_err *err)
{
	return update(s,
	              "UPDATE datasets SET updated_at_ms = ?1, state = 'caching', reason = ?2 "
	              "WHERE id = ?4",
	              id, "", 0, err);
}

int isc_store_dataset_set_failed(struct isc_store *s, const char *id, const char *reason,
                                 struct isc_err *err)
{
	return update(s,
	              "UPDATE datasets SET updated_at_ms = ?1, state = 'failed', reason = ?2 "
	              "WHERE id = ?4",
	              id, reason, 0, err);
}

int isc_store_dataset_set_available(struct isc_store *s, const char *id, int64_t size_bytes,
                                    const char *manifest_json, struct isc_err *err)
{
	return update(s,
	              "UPDATE datasets SET updated_at_ms = ?1, state = 'available', reason = '', "
	              "manifest_json = ?2, size_bytes = ?3, cached_bytes = ?3 WHERE id = ?4",
	              id, manifest_json, size_bytes, err);
}

int isc_store_dataset_reset(struct isc_store *s, const char *id, struct isc_err *err)
{
	return update(s,
	              "UPDATE datasets SET updated_at_ms = ?1, state = 'created', reason = ?2, "
	              "manifest_json = NULL, cached_bytes = ?3 WHERE id = ?4",
	              id, "", 0, err);
}

int isc_store_dataset_set_progress(struct isc_store *s, const char *id, int64_t cached_bytes,
                                   struct isc_err *err)
{
	return update(s,
	              "UPDATE datasets SET updated_at_ms = ?1, cached_bytes = ?3 "
	              "WHERE id = ?4",
	              id, "", cached_bytes, err);
}

int isc_store_dataset_copy_users(struct isc_store *s, const char *copy_name, const char *except_id,
                                 int *n, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(
	        s, "SELECT COUNT(*) FROM datasets WHERE copy_name = ? AND id != ?", &st, err),
	    step;
	*n = 0;
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, copy_name, -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 2, except_id ? except_id : "", -1, ISC_DB_STATIC);
	step = isc_db_step(st);
	if (step == ISC_DB_ROW)
		*n = isc_db_column_int(st, 0);
	isc_db_finalize(st);
	if (step != ISC_DB_ROW)
		return isc_store_db_err(s, step, "counting dataset copies", err);
	return 0;
}

int isc_store_dataset_share_donors(struct isc_store *s, int64_t org_id, const char *bucket,
                                   const char *key, const char *except_id, int64_t volume_max,
                                   struct isc_dataset **out, size_t *n, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc =
	    isc_store_prepare(s,
	                      "SELECT " DS_COLS DS_FROM
	                      "WHERE d.org_id = ? AND d.state = 'available' AND d.is_folder = 0 "
	                      "AND d.bucket = ? AND d.key = ? AND d.id != ? "
	                      "AND d.volume_bytes <= ? ORDER BY d.created_at_ms, d.id",
	                      &st, err);
	*out = NULL;
	*n = 0;
	if (rc)
		return rc;
	isc_db_bind_int64(st, 1, org_id);
	isc_db_bind_text(st, 2, bucket, -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 3, key, -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 4, except_id, -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 5, volume_max);
	return collect(s, st, out, n, err);
}

int isc_store_dataset_set_shared(struct isc_store *s, const char *id, const char *copy_name,
                                 int64_t size_bytes, const char *manifest_json, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(
	        s,
	        "UPDATE datasets SET updated_at_ms = ?1, state = 'available', reason = '', "
	        "copy_name = ?2, manifest_json = ?3, size_bytes = ?4, cached_bytes = ?4 "
	        "WHERE id = ?5 AND EXISTS (SELECT 1 FROM datasets o WHERE o.copy_name = ?2 "
	        "AND o.org_id = datasets.org_id AND o.state = 'available' AND o.id != ?5)",
	        &st, err),
	    step;
	if (rc)
		return rc;
	isc_db_bind_int64(st, 1, isc_store_now_ms());
	isc_db_bind_text(st, 2, copy_name, -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 3, manifest_json, -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 4, size_bytes);
	isc_db_bind_text(st, 5, id, -1, ISC_DB_STATIC);
	step = isc_db_step(st);
	isc_db_finalize(st);
	if (step != ISC_DB_DONE)
		return isc_store_db_err(s, step, "sharing a dataset copy", err);
	if (isc_db_changes(isc_store_db(s)) == 0)
		return isc_err_set(
		    err, ISC_ECONFLICT,
		    "no dataset of the organisation is Available on copy %s any more", copy_name);
	return 0;
}

int isc_store_dataset_remove(struct isc_store *s, const char *id, struct isc_err *err)
{
	struct isc_db_stmt *st;
	struct isc_dataset d;
	int rc = isc_store_prepare(s, "DELETE FROM datasets WHERE id = ? AND state != 'caching'",
	                           &st, err),
	    step;
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, id, -1, ISC_DB_STATIC);
	step = isc_db_step(st);
	isc_db_finalize(st);
	if (step != ISC_DB_DONE)
		return isc_store_db_err(s, step, "removing a dataset", err);
	if (isc_db_changes(isc_store_db(s)) > 0)
		return 0;
	/* Nothing deleted: either there is no such dataset or it is being cached. */
	if ((rc = isc_store_dataset_find(s, NULL, id, &d, err)))
		return rc;
	rc = isc_err_set(err, ISC_ECONFLICT,
	                 "dataset '%s' is Caching: wait until it is Available or Failed", d.name);
	isc_dataset_cleanup(&d);
	return rc;
}

int isc_store_dataset_sealed_list(struct isc_store *s, struct isc_dataset **out, size_t *n,
                                  struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(
	    s, "SELECT " DS_COLS DS_FROM "WHERE d.credentials_ciphertext IS NOT NULL ORDER BY d.id",
	    &st, err);
	*out = NULL;
	*n = 0;
	if (rc)
		return rc;
	return collect(s, st, out, n, err);
}

int isc_store_dataset_set_sealed(struct isc_store *s, const char *id, const unsigned char *nonce,
                                 size_t nonce_len, const unsigned char *ct, size_t ct_len,
                                 struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(s,
	                           "UPDATE datasets SET credentials_nonce = ?, "
	                           "credentials_ciphertext = ? WHERE id = ?",
	                           &st, err),
	    step;
	if (rc)
		return rc;
	isc_db_bind_blob(st, 1, nonce, (int)nonce_len, ISC_DB_STATIC);
	isc_db_bind_blob(st, 2, ct, (int)ct_len, ISC_DB_STATIC);
	isc_db_bind_text(st, 3, id, -1, ISC_DB_STATIC);
	step = isc_db_step(st);
	isc_db_finalize(st);
	if (step != ISC_DB_DONE)
		return isc_store_db_err(s, step, "re-sealing a dataset's credentials", err);
	if (isc_db_changes(isc_store_db(s)) == 0)
		return isc_err_set(err, ISC_ENOTFOUND, "no dataset '%s'", id);
	return 0;
}
