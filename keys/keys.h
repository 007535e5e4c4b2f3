/*
 * Bring-your-own cloud keys: an organisation's own AWS, GCP or OCI credentials,
 * verified with the driver's check_credentials before they are stored, sealed
 * by the vault (keys/vault.h) with the organisation, provider and key id as
 * associated data, and opened only for the moment a driver session is made.
 *
 *   keys.c     add, verify, remove checks, rotation, sessions on a key
 *   collect.c  reading a key's secret from where the cloud's tools keep it
 *              (environment, credentials file, service-account JSON, OCI config)
 *   vault.c    the master key and AES-256-GCM
 *
 * Secrets never reach a message, a log line, argv or the store in clear: the
 * plaintext lives in one buffer (struct isc_key_secret, keys/key_secret.h) that is
 * wiped when freed.
 */
#ifndef ISC_KEYS_KEYS_H
#define ISC_KEYS_KEYS_H

#include "common/err.h"
#include "config/config.h"
#include "keys/key_secret.h"
#include "keys/vault.h"
#include "providers/provider.h"
#include "store/store.h"
#include "store/store_keys.h"

#include <stddef.h>

/* ---- keys.c ---- */

/* The associated data of a key's record: organisation, provider and key id. */
int isc_keys_aad(char *out, size_t cap, int64_t org_id, const char *provider, const char *key_id);

/*
 * The master key of the store in home, checked against the store's check value.
 * create: make the key file (and the check value) when the store has never had a
 * key. A key that does not open the check value is refused (ISC_EAUTH); without
 * create, a store that never had a key gives ISC_ENOTFOUND.
 */
int isc_keys_vault_open(struct isc_store *s, const char *home, int create, struct isc_vault **out,
                        struct isc_err *err);
/* 1 when the store holds a master-key check value (a key was ever stored). */
int isc_keys_vault_in_use(struct isc_store *s);

/*
 * Sealed records other than cloud keys use the same code: a packed secret sealed
 * under the store's master key with associated data naming what it belongs to.
 * Today that is a dataset's own AWS keys (datasets/, docs/datasets.md), whose
 * associated data is isc_keys_dataset_aad; rotate-master re-seals them too.
 */
int isc_keys_dataset_aad(char *out, size_t cap, int64_t org_id, const char *dataset_id);
/* The associated data of a cluster's sealed SSH key (launcher/keys.h, issue 45). */
int isc_keys_cluster_aad(char *out, size_t cap, const char *cluster_id);
/* Seals secret with aad under v: a fresh nonce into nonce, ciphertext || tag into *ct. */
int isc_keys_seal(const struct isc_vault *v, const char *aad, const struct isc_key_secret *secret,
                  unsigned char nonce[ISC_VAULT_NONCE_LEN], unsigned char **ct, size_t *ct_len,
                  struct isc_err *err);
/* Opens what isc_keys_seal made with the same aad; ISC_EAUTH when it does not open. */
int isc_keys_open(const struct isc_vault *v, const char *aad, const unsigned char *nonce,
                  size_t nonce_len, const unsigned char *ct, size_t ct_len,
                  struct isc_key_secret *out, struct isc_err *err);

/* Opens the key's sealed secret. ISC_EAUTH (naming the key) when it does not open. */
int isc_keys_unseal(const struct isc_vault *v, const struct isc_cloud_key *k,
                    struct isc_key_secret *out, struct isc_err *err);

/*
 * Proves credentials with the driver's check_credentials: a session with cfg's
 * [providers.NAME] settings (endpoints) and the credentials, in region (NULL: the
 * first of cfg's regions for the provider, else the driver's default).
 */
int isc_keys_check(const struct isc_config *cfg, const char *provider, const char *region,
                   const struct isc_key_secret *secret, struct isc_identity *who,
                   struct isc_err *err);

/*
 * An organisation's key checked offline, before any cloud is asked (issue 42): every
 * field the provider's driver needs, present and well formed (its credentials_valid:
 * AWS access_key_id and secret_access_key; GCP a whole service-account JSON; OCI
 * tenancy, user, fingerprint and a private key that loads), and no field the provider's
 * key does not have. ISC_EINVALID naming the field, never a value.
 */
int isc_keys_fields_check(const char *provider, const struct isc_key_secret *secret,
                          struct isc_err *err);

struct isc_key_add {
	const char *org;      /* organisation name */
	const char *provider; /* aws | gcp | oci */
	const char *name;     /* NULL: "<provider>-<account>" */
	const char *regions;  /* comma-separated, NULL or "" = every region */
	const char *added_by;
};
/*
 * Checks the fields (isc_keys_fields_check), verifies the secret, then seals and
 * stores it in one transaction. A key the cloud refuses is ISC_EAUTH with the
 * cloud's reason, and nothing is written.
 * *id_out (caller frees) and *who on success.
 */
int isc_keys_add(struct isc_store *s, const char *home, const struct isc_config *cfg,
                 const struct isc_key_add *req, const struct isc_key_secret *secret, char **id_out,
                 struct isc_identity *who, struct isc_err *err);

/*
 * Re-checks a stored key: active again with verified_at now when the cloud
 * accepts it and proves the same account; otherwise failing with the reason
 * (returned as the error).
 */
int isc_keys_verify(struct isc_store *s, const char *home, const struct isc_config *cfg,
                    const char *id, struct isc_identity *who, struct isc_err *err);

/*
 * Re-seals every record (cloud keys and datasets' own keys) under a new master key in
 * one transaction. new_key_file
 * NULL: a fresh random key is written next to the current one ("<path>.new"),
 * the records re-sealed, then the file renamed over the old one (a crash in
 * between is finished by isc_keys_vault_open). Otherwise the key in
 * new_key_file (a mounted secret) is used, and the operator points
 * ISC_MASTER_KEY_FILE at it. *count = records re-sealed.
 */
int isc_keys_rotate_master(struct isc_store *s, const char *home, const char *new_key_file,
                           size_t *count, struct isc_err *err);

/*
 * A driver session on the key (for the broker): the secret is opened, handed
 * to session_new, and wiped before this returns.
 */
int isc_keys_session_open(const struct isc_vault *v, const struct isc_config *cfg,
                          const struct isc_cloud_key *k, const char *region,
                          struct isc_provider_session **out, struct isc_err *err);

#endif
