/*
 * Cluster SSH keys: one ECDSA P-256 key pair per cluster, generated with OpenSSL,
 * kept at $ISC_HOME/keys/<cluster id> (folder 0700, file 0600, created with
 * O_EXCL so it is never readable by others, not even briefly). The private key
 * never leaves that file: it is not printed, logged or passed in argv.
 * ECDSA rather than RSA: libssh2 1.10 signs RSA logins with SHA-1, which
 * current OpenSSH servers refuse.
 */
#ifndef ISC_LAUNCHER_KEYS_H
#define ISC_LAUNCHER_KEYS_H

#include "common/err.h"

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

#endif
