/*
 * Cluster SSH keys: one ECDSA P-256 key pair per cluster, generated with OpenSSL.
 * A burst's cluster keeps its key sealed in the store (issue 45, the _sealed
 * functions: table cluster_ssh_keys, AES-256-GCM under the keys' master key with
 * the cluster id as associated data), so any replica with the store and the master
 * key reaches the cluster's nodes; the private key is opened into memory only, for
 * libssh2's from-memory login, and never written to disk. The on-prem pool's key
 * (one per host, onprem/) is still a file, $ISC_HOME/keys/<id> (folder 0700, file
 * 0600, created with O_EXCL so it is never readable by others, not even briefly).
 * Neither is printed, logged or passed in argv.
 * ECDSA rather than RSA: libssh2 1.10 signs RSA logins with SHA-1, which
 * current OpenSSH servers refuse.
 */
#ifndef ISC_LAUNCHER_KEYS_H
#define ISC_LAUNCHER_KEYS_H

#include "common/err.h"

#include <stddef.h>

struct isc_store;

/* Creates the key pair (ISC_ECONFLICT if it exists, ISC_EINVALID for a bad id); *pubkey_out
 * (caller frees): "ecdsa-sha2-nistp256 AAAA... isc-<cluster>". */
int isc_cluster_key_create(const char *home, const char *cluster_id, char **pubkey_out,
                           struct isc_err *err);
/* The public key of an existing pair, in OpenSSH one-line form. ISC_ENOTFOUND if absent. */
int isc_cluster_key_public(const char *home, const char *cluster_id, char **pubkey_out,
                           struct isc_err *err);
/* Path of the private key file (caller frees); NULL for a cluster id that is not
 * [A-Za-z0-9_.-]+ (no leading dot, at most 128), so no id can name another file. */
char *isc_cluster_key_path(const char *home, const char *cluster_id);
/* Removes the key pair; missing is fine. */
void isc_cluster_key_delete(const char *home, const char *cluster_id);

/*
 * Sealed in the store (s: the calling thread's connection; home: where the master
 * key is found, keys/vault.h). _create makes a new pair and stores it sealed
 * (ISC_ECONFLICT when the cluster has one; the master key file and the store's
 * check value are made when the store never had a key); *pubkey_out as above.
 */
int isc_cluster_key_create_sealed(struct isc_store *s, const char *home, const char *cluster_id,
                                  char **pubkey_out, struct isc_err *err);
/* The public key of the cluster's sealed pair; ISC_ENOTFOUND when it has none. */
int isc_cluster_key_public_sealed(struct isc_store *s, const char *home, const char *cluster_id,
                                  char **pubkey_out, struct isc_err *err);
/*
 * The cluster's private key, opened: PEM text in *pem (NUL-terminated, *len bytes),
 * released with isc_vault_wipe_free(*pem, *len + 1). ISC_ENOTFOUND when it has
 * none; ISC_EAUTH when it does not open (another master key, a row moved).
 */
int isc_cluster_key_load_sealed(struct isc_store *s, const char *home, const char *cluster_id,
                                char **pem, size_t *len, struct isc_err *err);
/* to gets from's key (a replacement's, broker/replace.c); one it already has stays. */
int isc_cluster_key_copy_sealed(struct isc_store *s, const char *home, const char *from,
                                const char *to, struct isc_err *err);
/* Removes the cluster's sealed key, and a key file of before issue 45 left in home. */
int isc_cluster_key_delete_sealed(struct isc_store *s, const char *home, const char *cluster_id,
                                  struct isc_err *err);
/*
 * The upgrade (issue 45): every cluster key file $ISC_HOME/keys/cl_* is sealed into
 * the store and removed (a file whose cluster already has a row is removed only).
 * The on-prem pool's key stays. *moved: how many were sealed.
 */
int isc_cluster_key_import_files(struct isc_store *s, const char *home, size_t *moved,
                                 struct isc_err *err);

#endif
