/* Bring-your-own cloud keys: the SQL of cloud_keys and cloud_key_master (see store_keys.h). */
#include "store/store_keys.h"

#include "store/store_int.h"

#include <stdlib.h>
#include <string.h>

void isc_cloud_key_cleanup(struct isc_cloud_key *k)
{
	if (!k)
		return;
	free(k->id);
	free(k->org_name);
	free(k->provider);
	free(k->name);
	free(k->account);
	free(k->principal);
	free(k->regions);
	free(k->added_by);
	free(k->state);
	free(k->state_reason);
	free(k->fingerprint);
	free(k->nonce);
	free(k->ciphertext);
	memset(k, 0, sizeof(*k));
}

static void key_clean(void *rec)
{
	isc_cloud_key_cleanup(rec);
}

void isc_cloud_key_list_free(struct isc_cloud_key *list, size_t n)
{
	isc_store_rows_free(list, n, sizeof(*list), key_clean);
}

static int step_done(struct isc_store *s, struct isc_db_stmt *st, const char *what,
                     struct isc_err *err)
{
	int rc = isc_db_step(st);
	isc_db_finalize(st);
	if (rc == ISC_DB_DONE)
		return 0;
	return isc_store_db_err(s, rc, what, err);
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

int isc_store_key_add(struct isc_store *s, const struct isc_cloud_key *k, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(
	    s,
	    "INSERT INTO cloud_keys (id, org_id, provider, name, nonce, ciphertext, created_at_ms, "
	    "account, principal, regions, added_by, verified_at_ms, state, state_reason, "
	    "fingerprint) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,'active','',?)",
	    &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, k->id, -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 2, k->org_id);
	isc_db_bind_text(st, 3, k->provider, -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 4, k->name, -1, ISC_DB_STATIC);
	isc_db_bind_blob(st, 5, k->nonce, (int)k->nonce_len, ISC_DB_STATIC);
	isc_db_bind_blob(st, 6, k->ciphertext, (int)k->ciphertext_len, ISC_DB_STATIC);
	isc_db_bind_int64(st, 7, k->created_at_ms);
	isc_db_bind_text(st, 8, k->account ? k->account : "", -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 9, k->principal ? k->principal : "", -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 10, k->regions ? k->regions : "", -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 11, k->added_by ? k->added_by : "", -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 12, k->verified_at_ms);
	isc_db_bind_text(st, 13, k->fingerprint ? k->fingerprint : "", -1, ISC_DB_STATIC);
	rc = isc_db_step(st);
	isc_db_finalize(st);
	if (rc == ISC_DB_DONE)
		return 0;
	if ((rc & 0xff) == ISC_DB_CONSTRAINT)
		return isc_err_set(err, ISC_ECONFLICT,
		                   "the organisation already has a %s key named '%s'", k->provider,
		                   k->name);
	return isc_store_db_err(s, rc, "adding a cloud key", err);
}

#define KEY_COLS                                                                                   \
	"k.id, k.org_id, o.name, k.provider, k.name, k.account, k.principal, k.regions, "          \
	"k.added_by, k.state, k.state_reason, k.fingerprint, k.created_at_ms, k.verified_at_ms, "  \
	"k.nonce, k.ciphertext FROM cloud_keys k JOIN orgs o ON o.id = k.org_id "

static int read_row(struct isc_db_stmt *st, struct isc_cloud_key *k)
{
	int oom = 0;
	memset(k, 0, sizeof(*k));
	k->id = isc_store_col_text(st, 0, &oom);
	k->org_id = isc_db_column_int64(st, 1);
	k->org_name = isc_store_col_text(st, 2, &oom);
	k->provider = isc_store_col_text(st, 3, &oom);
	k->name = isc_store_col_text(st, 4, &oom);
	k->account = isc_store_col_text(st, 5, &oom);
	k->principal = isc_store_col_text(st, 6, &oom);
	k->regions = isc_store_col_text(st, 7, &oom);
	k->added_by = isc_store_col_text(st, 8, &oom);
	k->state = isc_store_col_text(st, 9, &oom);
	k->state_reason = isc_store_col_text(st, 10, &oom);
	k->fingerprint = isc_store_col_text(st, 11, &oom);
	k->created_at_ms = isc_db_column_int64(st, 12);
	k->verified_at_ms = isc_db_column_int64(st, 13);
	k->nonce = col_blob(st, 14, &k->nonce_len, &oom);
	k->ciphertext = col_blob(st, 15, &k->ciphertext_len, &oom);
	if (oom) {
		isc_cloud_key_cleanup(k);
		return ISC_ENOMEM;
	}
	return 0;
}

int isc_store_key_get(struct isc_store *s, const char *id, struct isc_cloud_key *out,
                      struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(s, "SELECT " KEY_COLS "WHERE k.id = ?", &st, err), step;

	memset(out, 0, sizeof(*out));
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, id, -1, ISC_DB_STATIC);
	step = isc_db_step(st);
	if (step == ISC_DB_ROW)
		rc = read_row(st, out) ? isc_err_set(err, ISC_ENOMEM, "out of memory") : 0;
	else if (step == ISC_DB_DONE)
		rc = isc_err_set(err, ISC_ENOTFOUND, "no cloud key '%s'", id);
	else
		rc = isc_store_db_err(s, step, "reading a cloud key", err);
	isc_db_finalize(st);
	return rc;
}

static int key_from_row(struct isc_db_stmt *st, void *rec)
{
	return read_row(st, rec);
}

int isc_store_key_list(struct isc_store *s, int64_t org_id, struct isc_cloud_key **out, size_t *n,
                       struct isc_err *err)
{
	struct isc_db_stmt *st;
	void *list;
	int rc = isc_store_prepare(
	    s,
	    "SELECT " KEY_COLS "WHERE ?1 <= 0 OR k.org_id = ?1 ORDER BY o.name, k.provider, k.name",
	    &st, err);

	*out = NULL;
	*n = 0;
	if (rc)
		return rc;
	isc_db_bind_int64(st, 1, org_id);
	rc = isc_store_read_rows(s, st, sizeof(**out), key_from_row, key_clean,
	                         "listing cloud keys", &list, n, err);
	if (!rc)
		*out = list;
	return rc;
}

int isc_store_key_page(struct isc_store *s, int all, int64_t user_id, int64_t org_id,
                       const char *after_org, const char *after_provider, const char *after_name,
                       size_t limit, struct isc_cloud_key **out, size_t *n, struct isc_err *err)
{
	struct isc_db_stmt *st;
	void *list;
	/* The first page's cursor ('', '', '') comes before every key (names are not empty). */
	int rc = isc_store_prepare_cached(
	    s,
	    "SELECT " KEY_COLS
	    "WHERE (?1 != 0 OR k.org_id IN (SELECT org_id FROM memberships WHERE "
	    "user_id = ?2 AND role = 'admin')) AND (?3 <= 0 OR k.org_id = ?3) AND (o.name, "
	    "k.provider, k.name) > (?4, ?5, ?6) ORDER BY o.name, k.provider, k.name LIMIT ?7",
	    &st, err);
	if (rc)
		return rc;
	isc_db_bind_int(st, 1, all != 0);
	isc_db_bind_int64(st, 2, user_id);
	isc_db_bind_int64(st, 3, org_id);
	isc_db_bind_text(st, 4, after_org ? after_org : "", -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 5, after_provider ? after_provider : "", -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 6, after_name ? after_name : "", -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 7, isc_store_page_limit(limit));
	rc = isc_store_read_rows(s, st, sizeof(**out), key_from_row, key_clean,
	                         "listing cloud keys", &list, n, err);
	if (!rc)
		*out = list;
	return rc;
}

/* True when the comma-separated list is empty or names region. */
static int covers(const char *regions, const char *region)
{
	size_t len = strlen(region);
	const char *p = regions;

	if (!regions || !regions[0])
		return 1;
	while (*p) {
		const char *e = strchr(p, ',');
		size_t l = e ? (size_t)(e - p) : strlen(p);
		if (l == len && strncmp(p, region, len) == 0)
			return 1;
		p += l + (e ? 1 : 0);
	}
	return 0;
}

int isc_cloud_key_covers(const struct isc_cloud_key *k, const char *region)
{
	return covers(k->regions, region);
}

int isc_store_key_for(struct isc_store *s, int64_t org_id, const char *provider, const char *region,
                      struct isc_cloud_key *out, int *found, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(s,
	                           "SELECT " KEY_COLS "WHERE k.org_id = ? AND k.provider = ? "
	                           /* an active key first, then the oldest */
	                           "ORDER BY k.state <> 'active', k.created_at_ms, k.id",
	                           &st, err);
	int step;

	*found = 0;
	memset(out, 0, sizeof(*out));
	if (rc)
		return rc;
	isc_db_bind_int64(st, 1, org_id);
	isc_db_bind_text(st, 2, provider, -1, ISC_DB_STATIC);
	while ((step = isc_db_step(st)) == ISC_DB_ROW) {
		const char *regions = (const char *)isc_db_column_text(st, 7);
		if (!covers(regions, region))
			continue;
		if (read_row(st, out))
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		else
			*found = 1;
		break;
	}
	if (!rc && step != ISC_DB_ROW && step != ISC_DB_DONE)
		rc = isc_store_db_err(s, step, "finding a cloud key", err);
	isc_db_finalize(st);
	return rc;
}

static int changed_one(struct isc_store *s, const char *id, int rc, struct isc_err *err)
{
	if (rc)
		return rc;
	if (isc_db_changes(isc_store_db(s)) == 0)
		return isc_err_set(err, ISC_ENOTFOUND, "no cloud key '%s'", id);
	return 0;
}

int isc_store_key_set_state(struct isc_store *s, const char *id, const char *state,
                            const char *reason, int64_t verified_at_ms, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(s,
	                           "UPDATE cloud_keys SET state = ?, state_reason = ?, "
	                           "verified_at_ms = CASE WHEN ? > 0 THEN ? ELSE verified_at_ms "
	                           "END WHERE id = ?",
	                           &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, state, -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 2, reason ? reason : "", -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 3, verified_at_ms);
	isc_db_bind_int64(st, 4, verified_at_ms);
	isc_db_bind_text(st, 5, id, -1, ISC_DB_STATIC);
	return changed_one(s, id, step_done(s, st, "updating a cloud key", err), err);
}

int isc_store_key_set_sealed(struct isc_store *s, const char *id, const unsigned char *nonce,
                             size_t nonce_len, const unsigned char *ct, size_t ct_len,
                             struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(
	    s, "UPDATE cloud_keys SET nonce = ?, ciphertext = ? WHERE id = ?", &st, err);
	if (rc)
		return rc;
	isc_db_bind_blob(st, 1, nonce, (int)nonce_len, ISC_DB_STATIC);
	isc_db_bind_blob(st, 2, ct, (int)ct_len, ISC_DB_STATIC);
	isc_db_bind_text(st, 3, id, -1, ISC_DB_STATIC);
	return changed_one(s, id, step_done(s, st, "re-sealing a cloud key", err), err);
}

int isc_store_key_delete(struct isc_store *s, const char *id, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(s, "DELETE FROM cloud_keys WHERE id = ?", &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, id, -1, ISC_DB_STATIC);
	return changed_one(s, id, step_done(s, st, "removing a cloud key", err), err);
}

int isc_store_key_delete_unused(struct isc_store *s, const char *id, int64_t *live,
                                struct isc_err *err)
{
	int rc;

	*live = 0;
	/*
	 * The count and the delete under one write lock: no cluster can be recorded on the
	 * key between them, so a key is never removed from under a cluster still running on
	 * it (which nothing could then watch or terminate).
	 */
	if ((rc = isc_store_begin(s, err)))
		return rc;
	rc = isc_store_key_live_clusters(s, id, live, err);
	if (!rc && *live > 0)
		rc = isc_err_set(err, ISC_ECONFLICT, "cloud key %s has %lld live cluster(s)", id,
		                 (long long)*live);
	if (!rc)
		rc = isc_store_key_delete(s, id, err);
	if (!rc)
		rc = isc_store_commit(s, err);
	if (rc)
		isc_store_rollback(s);
	return rc;
}

int isc_store_key_live_clusters(struct isc_store *s, const char *id, int64_t *n,
                                struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(
	    s, "SELECT COUNT(*) FROM clusters WHERE account = ? AND state <> 'closed'", &st, err);
	*n = 0;
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, id, -1, ISC_DB_STATIC);
	if ((rc = isc_db_step(st)) == ISC_DB_ROW) {
		*n = isc_db_column_int64(st, 0);
		rc = 0;
	} else {
		rc = isc_store_db_err(s, rc, "counting a key's clusters", err);
	}
	isc_db_finalize(st);
	return rc;
}

int isc_store_key_live_experiments(struct isc_store *s, const char *id, char ***out, size_t *n,
                                   struct isc_err *err)
{
	struct isc_db_stmt *st;
	char **v = NULL;
	size_t k = 0;
	int rc = isc_store_prepare(s,
	                           "SELECT DISTINCT experiment_id FROM clusters WHERE account = ? "
	                           "AND state <> 'closed' ORDER BY experiment_id",
	                           &st, err);
	int step;

	*out = NULL;
	*n = 0;
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, id, -1, ISC_DB_STATIC);
	while ((step = isc_db_step(st)) == ISC_DB_ROW) {
		char **grown = realloc(v, (k + 1) * sizeof(*v));
		int oom = 0;
		if (grown)
			v = grown;
		if (!grown || !(v[k] = isc_store_col_text(st, 0, &oom))) {
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
			break;
		}
		k++;
	}
	if (!rc && step != ISC_DB_DONE)
		rc = isc_store_db_err(s, step, "listing a key's experiments", err);
	isc_db_finalize(st);
	if (rc) {
		for (size_t i = 0; i < k; i++)
			free(v[i]);
		free(v);
		return rc;
	}
	*out = v;
	*n = k;
	return 0;
}

int isc_store_key_master_check_get(struct isc_store *s, unsigned char **nonce, size_t *nonce_len,
                                   unsigned char **ct, size_t *ct_len, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(s, "SELECT nonce, ciphertext FROM cloud_key_master WHERE id = 1",
	                           &st, err);
	int step, oom = 0;

	*nonce = *ct = NULL;
	*nonce_len = *ct_len = 0;
	if (rc)
		return rc;
	step = isc_db_step(st);
	if (step == ISC_DB_ROW) {
		*nonce = col_blob(st, 0, nonce_len, &oom);
		*ct = col_blob(st, 1, ct_len, &oom);
		if (oom) {
			free(*nonce);
			free(*ct);
			*nonce = *ct = NULL;
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		}
	} else if (step == ISC_DB_DONE) {
		rc = isc_err_set(err, ISC_ENOTFOUND, "no cloud key was ever stored");
	} else {
		rc = isc_store_db_err(s, step, "reading the master key check", err);
	}
	isc_db_finalize(st);
	return rc;
}

int isc_store_key_master_check_set(struct isc_store *s, const unsigned char *nonce,
                                   size_t nonce_len, const unsigned char *ct, size_t ct_len,
                                   struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(s,
	                           "INSERT INTO cloud_key_master (id, nonce, ciphertext, "
	                           "created_at_ms) VALUES (1, ?, ?, ?) ON CONFLICT(id) DO UPDATE "
	                           "SET nonce = excluded.nonce, ciphertext = excluded.ciphertext, "
	                           "created_at_ms = excluded.created_at_ms",
	                           &st, err);
	if (rc)
		return rc;
	isc_db_bind_blob(st, 1, nonce, (int)nonce_len, ISC_DB_STATIC);
	isc_db_bind_blob(st, 2, ct, (int)ct_len, ISC_DB_STATIC);
	isc_db_bind_int64(st, 3, isc_store_now_ms());
	return step_done(s, st, "writing the master key check", err);
}
