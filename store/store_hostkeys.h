/*
 * Pinned SSH host keys: the first key seen for a target (an instance id) is
 * recorded; a different key later is refused.
 */
#ifndef ISC_STORE_STORE_HOSTKEYS_H
#define ISC_STORE_STORE_HOSTKEYS_H

#include "store/store.h"

/* 0 when the key matches the pin or was pinned now; ISC_EAUTH when it changed. */
int isc_store_hostkey_check(struct isc_store *s, const char *target, const char *key_type,
                            const char *sha256_hex, struct isc_err *err);

#endif
