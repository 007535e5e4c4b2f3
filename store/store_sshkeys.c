/* Cluster SSH keys sealed in the store: the SQL of cluster_ssh_keys (see store_sshkeys.h). */
#include "store/store_sshkeys.h"

#include "store/store_int.h"

#include <stdlib.h>
#include <string.h>

static int step_done(struct isc_store *s, struct isc_db_stmt *st, const char *what,
                     struct isc_err *err)
{
	int rc = isc_db_step(st);
	isc_db_finalize(st);
	if (rc == ISC_DB_DONE)
		return 0;
	return isc_store_db_err(s, rc, what, err);
}

static unsigned char *col_blob(struct isc_db_stmt *st, int col, size_t *len)
{
	const void *b = isc_db_column_blob(st, col);
	int n = isc_db_column_bytes(st, col);
	unsigned char *copy;

	*len = 0;
	if (!b || n <= 0 || !(copy = malloc((size_t)n)))
		return NULL;
	memcpy(copy, b, (size_t)n);
	*len = (size_t)n;
	return copy;
}

int isc_store_sshkey_add(struct isc_store *s, const char *cluster_id, const unsigned char *nonce,
                         size_t nonce_len, const unsigned char *ct, size_t ct_len,
                         struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(s,
	                           "INSERT INTO cluster_ssh_keys (cluster_id, nonce, ciphertext, "
	                           "created_at_ms) VALUES (?, ?, ?, ?)",
	                           &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, cluster_id, -1, ISC_DB_STATIC);
	isc_db_bind_blob(st, 2, nonce, (int)nonce_len, ISC_DB_STATIC);
	isc_db_bind_blob(st, 3, ct, (int)ct_len, ISC_DB_STATIC);
	isc_db_bind_int64(st, 4, isc_store_now_ms());
	rc = step_done(s, st, "storing a cluster key", err);
	if (rc == ISC_ECONFLICT)
		isc_err_set(err, ISC_ECONFLICT, "cluster %s already has a key", cluster_id);
	return rc;
}

int isc_store_sshkey_get(struct isc_store *s, const char *cluster_id, unsigned char **nonce,
                         size_t *nonce_len, unsigned char **ct, size_t *ct_len, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(
	    s, "SELECT nonce, ciphertext FROM cluster_ssh_keys WHERE cluster_id = ?", &st, err);

	*nonce = *ct = NULL;
	*nonce_len = *ct_len = 0;
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, cluster_id, -1, ISC_DB_STATIC);
	rc = isc_db_step(st);
	if (rc == ISC_DB_ROW) {
		*nonce = col_blob(st, 0, nonce_len);
		*ct = col_blob(st, 1, ct_len);
		rc = *nonce && *ct ? 0 : isc_err_set(err, ISC_ENOMEM, "out of memory");
	} else if (rc == ISC_DB_DONE) {
		rc = isc_err_set(err, ISC_ENOTFOUND, "cluster %s has no key", cluster_id);
	} else {
		rc = isc_store_db_err(s, rc, "reading a cluster key", err);
	}
	isc_db_finalize(st);
	if (rc) {
		free(*nonce);
		free(*ct);
		*nonce = *ct = NULL;
		*nonce_len = *ct_len = 0;
	}
	return rc;
}

int isc_store_sshkey_set_sealed(struct isc_store *s, const char *cluster_id,
                                const unsigned char *nonce, size_t nonce_len,
                                const unsigned char *ct, size_t ct_len, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(
	    s, "UPDATE cluster_ssh_keys SET nonce = ?, ciphertext = ? WHERE cluster_id = ?", &st,
	    err);
	if (rc)
		return rc;
	isc_db_bind_blob(st, 1, nonce, (int)nonce_len, ISC_DB_STATIC);
	isc_db_bind_blob(st, 2, ct, (int)ct_len, ISC_DB_STATIC);
	isc_db_bind_text(st, 3, cluster_id, -1, ISC_DB_STATIC);
	if ((rc = step_done(s, st, "re-sealing a cluster key", err)))
		return rc;
	if (isc_db_changes(isc_store_db(s)) == 0)
		return isc_err_set(err, ISC_ENOTFOUND, "cluster %s has no key", cluster_id);
	return 0;
}

int isc_store_sshkey_ids(struct isc_store *s, char ***ids, size_t *n, struct isc_err *err)
{
	struct isc_db_stmt *st;
	char **v = NULL;
	size_t k = 0, cap = 0;
	int rc = isc_store_prepare(s, "SELECT cluster_id FROM cluster_ssh_keys ORDER BY cluster_id",
	                           &st, err);

	*ids = NULL;
	*n = 0;
	if (rc)
		return rc;
	while ((rc = isc_db_step(st)) == ISC_DB_ROW) {
		const char *id = (const char *)isc_db_column_text(st, 0);
		if (k == cap) {
			char **grown = realloc(v, (cap = cap ? cap * 2 : 16) * sizeof(*v));
			if (!grown)
				break;
			v = grown;
		}
		if (!(v[k] = strdup(id ? id : "")))
			break;
		k++;
	}
	isc_db_finalize(st);
	if (rc != ISC_DB_DONE) {
		for (size_t i = 0; i < k; i++)
			free(v[i]);
		free(v);
		return rc == ISC_DB_ROW ? isc_err_set(err, ISC_ENOMEM, "out of memory")
		                        : isc_store_db_err(s, rc, "listing cluster keys", err);
	}
	*ids = v;
	*n = k;
	return 0;
}

int isc_store_sshkey_delete(struct isc_store *s, const char *cluster_id, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc =
	    isc_store_prepare(s, "DELETE FROM cluster_ssh_keys WHERE cluster_id = ?", &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, cluster_id, -1, ISC_DB_STATIC);
	return step_done(s, st, "removing a cluster key", err);
}
