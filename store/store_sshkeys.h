/*
 * Cluster SSH keys sealed in the store (table cluster_ssh_keys, migration 28,
 * issue 45): one row per cluster, the private key's PEM sealed by keys/vault.c
 * (nonce + AES-256-GCM ciphertext with its tag). This file only moves bytes:
 * nothing here sees a private key. Sealing and opening: broker/clusterkeys.c.
 */
#ifndef ISC_STORE_STORE_SSHKEYS_H
#define ISC_STORE_STORE_SSHKEYS_H

#include "store/store.h"

#include <stddef.h>

/* Inserts the cluster's sealed key: ISC_ECONFLICT when it has one. */
int isc_store_sshkey_add(struct isc_store *s, const char *cluster_id, const unsigned char *nonce,
                         size_t nonce_len, const unsigned char *ct, size_t ct_len,
                         struct isc_err *err);
/* The cluster's sealed key (*nonce, *ct: caller frees); ISC_ENOTFOUND when none. */
int isc_store_sshkey_get(struct isc_store *s, const char *cluster_id, unsigned char **nonce,
                         size_t *nonce_len, unsigned char **ct, size_t *ct_len,
                         struct isc_err *err);
/* A new sealed key for an existing row (master-key rotation); ISC_ENOTFOUND when none. */
int isc_store_sshkey_set_sealed(struct isc_store *s, const char *cluster_id,
                                const unsigned char *nonce, size_t nonce_len,
                                const unsigned char *ct, size_t ct_len, struct isc_err *err);
/* Every cluster that has a sealed key, by id (*ids: caller frees each and the array). */
int isc_store_sshkey_ids(struct isc_store *s, char ***ids, size_t *n, struct isc_err *err);
/* Removes the cluster's key; missing is fine. */
int isc_store_sshkey_delete(struct isc_store *s, const char *cluster_id, struct isc_err *err);

#endif
