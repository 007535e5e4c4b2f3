/* Host-key pinning: the SQL of the host_keys table (see store_hostkeys.h). */
#include "store/store_hostkeys.h"

#include "store/store_int.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int isc_store_hostkey_check(struct isc_store *s, const char *target, const char *key_type,
                            const char *sha256_hex, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc;

	if ((rc = isc_store_begin(s, err)))
		return rc;
	rc = isc_store_prepare(s, "SELECT key_type, sha256 FROM host_keys WHERE target = ?", &st,
	                       err);
	if (rc)
		goto out;
	isc_db_bind_text(st, 1, target, -1, ISC_DB_STATIC);
	if (isc_db_step(st) == ISC_DB_ROW) {
		const char *type = (const char *)isc_db_column_text(st, 0);
		const char *pinned = (const char *)isc_db_column_text(st, 1);
		if (strcmp(type, key_type) != 0 || strcmp(pinned, sha256_hex) != 0)
			rc = isc_err_set(err, ISC_EAUTH,
			                 "host key of %s changed: pinned %s sha256 %s, now %s "
			                 "sha256 %s; refusing to connect",
			                 target, type, pinned, key_type, sha256_hex);
		isc_db_finalize(st);
		goto out;
	}
	isc_db_finalize(st);
	rc = isc_store_prepare(
	    s,
	    "INSERT INTO host_keys (target, key_type, sha256, first_seen_ms) VALUES (?, ?, ?, ?)",
	    &st, err);
	if (rc)
		goto out;
	isc_db_bind_text(st, 1, target, -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 2, key_type, -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 3, sha256_hex, -1, ISC_DB_STATIC);
	isc_db_bind_int64(st, 4, isc_store_now_ms());
	if (isc_db_step(st) != ISC_DB_DONE)
		rc = isc_store_db_err(s, ISC_DB_ERROR, "pinning a host key", err);
	isc_db_finalize(st);
out:
	if (rc) {
		isc_store_rollback(s);
		return rc;
	}
	return isc_store_commit(s, err);
}

/*
 * A store that is out of reach for a moment (a PostgreSQL restart) is waited for, a
 * few seconds at most: the check is one idempotent transaction, and its failure
 * would otherwise cost the node's whole SSH step. What still fails is ISC_ESTORE,
 * which the broker retries at its next tick (docs/ha.md, issue 48).
 */
int isc_store_hostkey_check_home(void *home, const char *target, const char *key_type,
                                 const char *sha256_hex, struct isc_err *err)
{
	static const int waits_ms[] = {200, 500, 1000, 2000};
	struct isc_store *s;
	int rc;

	for (size_t attempt = 0;; attempt++) {
		rc = isc_store_open(home, 0, &s, err);
		if (!rc) {
			rc = isc_store_hostkey_check(s, target, key_type, sha256_hex, err);
			isc_store_free(s);
		}
		if (rc != ISC_ESTORE || attempt == sizeof(waits_ms) / sizeof(waits_ms[0]))
			return rc;
		usleep((useconds_t)waits_ms[attempt] * 1000);
	}
}

void isc_hostkey_cleanup(struct isc_hostkey *k)
{
	free(k->target);
	free(k->key_type);
	free(k->sha256);
	memset(k, 0, sizeof(*k));
}

static void hostkey_clean(void *rec)
{
	isc_hostkey_cleanup(rec);
}

static int hostkey_from_row(struct isc_db_stmt *st, void *rec)
{
	struct isc_hostkey *k = rec;
	int oom = 0;
	k->target = isc_store_col_text(st, 0, &oom);
	k->key_type = isc_store_col_text(st, 1, &oom);
	k->sha256 = isc_store_col_text(st, 2, &oom);
	k->first_seen_ms = isc_db_column_int64(st, 3);
	return oom ? ISC_ENOMEM : 0;
}

int isc_store_hostkey_get(struct isc_store *s, const char *target, struct isc_hostkey *out,
                          struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(
	    s, "SELECT target, key_type, sha256, first_seen_ms FROM host_keys WHERE target = ?",
	    &st, err);

	memset(out, 0, sizeof(*out));
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, target, -1, ISC_DB_STATIC);
	rc = isc_store_read_one(s, st, hostkey_from_row, hostkey_clean, out, sizeof(*out),
	                        "reading a host key", err);
	return rc == ISC_ENOTFOUND ? isc_err_set(err, rc, "no host key pinned for %s", target) : rc;
}

int isc_store_hostkey_forget(struct isc_store *s, const char *target, struct isc_err *err)
{
	struct isc_db_stmt *st;
	int rc = isc_store_prepare(s, "DELETE FROM host_keys WHERE target = ?", &st, err);
	if (rc)
		return rc;
	isc_db_bind_text(st, 1, target, -1, ISC_DB_STATIC);
	if ((rc = isc_db_step(st)) != ISC_DB_DONE)
		rc = isc_store_db_err(s, rc, "forgetting a host key", err);
	else
		rc = 0;
	isc_db_finalize(st);
	return rc;
}
