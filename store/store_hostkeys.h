/*
 * Pinned SSH host keys (table host_keys, migration 2): the first key seen for a
 * target (an instance id, or "host:port" when there is none) is recorded; a
 * different key later is refused. Keys are compared by type and SHA-256.
 *
 * Threads: a struct isc_store is one SQLite connection and belongs to one
 * thread at a time. The launcher calls its host-key check from node threads
 * (one call at a time); a caller whose own thread keeps using its store
 * meanwhile gives the check its own short-lived connection
 * (isc_store_hostkey_check_home), as the broker does.
 */
#ifndef ISC_STORE_STORE_HOSTKEYS_H
#define ISC_STORE_STORE_HOSTKEYS_H

#include "store/store.h"

#include <stdint.h>

/*
 * 0 when the key matches the pin or was pinned now; ISC_EAUTH when it changed
 * (the message names the target and both fingerprints). One transaction, so
 * two processes pinning the same target at once agree on one key.
 */
int isc_store_hostkey_check(struct isc_store *s, const char *target, const char *key_type,
                            const char *sha256_hex, struct isc_err *err);

/*
 * The same check on a connection of its own to the store in `home` (passed as
 * void *, so it fits the launcher's isc_ssh_hostkey_fn: ctx = the home folder).
 */
int isc_store_hostkey_check_home(void *home, const char *target, const char *key_type,
                                 const char *sha256_hex, struct isc_err *err);

struct isc_hostkey {
	char *target;
	char *key_type;
	char *sha256; /* lowercase hex */
	int64_t first_seen_ms;
};
/* The pin of target; ISC_ENOTFOUND when there is none. */
int isc_store_hostkey_get(struct isc_store *s, const char *target, struct isc_hostkey *out,
                          struct isc_err *err);
void isc_hostkey_cleanup(struct isc_hostkey *k);

/*
 * Forgets the pin of target (missing is fine). For when the instance is gone for
 * good: a "host:port" target may be reused by a new machine with a new key.
 */
int isc_store_hostkey_forget(struct isc_store *s, const char *target, struct isc_err *err);

#endif
