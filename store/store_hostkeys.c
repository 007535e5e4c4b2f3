/* Host-key pinning (see store_hostkeys.h). */
#include "store/store_hostkeys.h"

#include "store/store_int.h"

#include <string.h>

int isc_store_hostkey_check(struct isc_store *s, const char *target, const char *key_type,
                            const char *sha256_hex, struct isc_err *err)
{
	sqlite3_stmt *st;
	int rc;

	if ((rc = isc_store_begin(s, err)))
		return rc;
	rc = isc_store_prepare(s, "SELECT key_type, sha256 FROM host_keys WHERE target = ?", &st,
	                       err);
	if (rc)
		goto out;
	sqlite3_bind_text(st, 1, target, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW) {
		const char *type = (const char *)sqlite3_column_text(st, 0);
		const char *pinned = (const char *)sqlite3_column_text(st, 1);
		if (strcmp(type, key_type) != 0 || strcmp(pinned, sha256_hex) != 0)
			rc = isc_err_set(err, ISC_EAUTH,
			                 "host key of %s changed: pinned %s SHA256:%s, now %s "
			                 "SHA256:%s; refusing "
			                 "to connect",
			                 target, type, pinned, key_type, sha256_hex);
		sqlite3_finalize(st);
		goto out;
	}
	sqlite3_finalize(st);
	rc = isc_store_prepare(
	    s,
	    "INSERT INTO host_keys (target, key_type, sha256, first_seen_ms) VALUES (?, ?, ?, ?)",
	    &st, err);
	if (rc)
		goto out;
	sqlite3_bind_text(st, 1, target, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, key_type, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, sha256_hex, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 4, isc_store_now_ms());
	if (sqlite3_step(st) != SQLITE_DONE)
		rc = isc_store_sqlite_err(s, SQLITE_ERROR, "pinning a host key", err);
	sqlite3_finalize(st);
out:
	if (rc) {
		isc_store_rollback(s);
		return rc;
	}
	return isc_store_commit(s, err);
}
