/*
 * The vault: AES-256-GCM (OpenSSL EVP) under a master key that never lives in
 * the store. The master key is 32 random bytes, kept as 64 hex characters in
 * a file: $ISC_MASTER_KEY_FILE (a mounted secret), else "<ISC_HOME>.master-key",
 * a 0600 file next to the store's folder, never inside it (a copy of the
 * folder holds ciphertext only). Each sealed record has its own random 96-bit
 * nonce; the caller's associated data (organisation, provider, key id) is
 * authenticated with it, so a row moved to another organisation does not open.
 *
 * Plaintext handed out by isc_vault_open is the caller's to wipe
 * (isc_vault_wipe_free); the master key is wiped by isc_vault_free.
 */
#ifndef ISC_KEYS_VAULT_H
#define ISC_KEYS_VAULT_H

#include "common/err.h"

#include <stddef.h>
#include <stdint.h>

#define ISC_VAULT_KEY_LEN   32
#define ISC_VAULT_NONCE_LEN 12
#define ISC_VAULT_TAG_LEN   16

struct isc_vault;

/*
 * Where the master key of the store in `home` lives (caller frees):
 * $ISC_MASTER_KEY_FILE, else "<home>.master-key". A path inside home is
 * refused (ISC_EINVALID): the key must not travel with the store.
 */
int isc_vault_master_path(const char *home, char **out, struct isc_err *err);

/*
 * Loads the master key from path. With `create`, a missing file is made
 * (O_EXCL, 0600, 32 bytes from RAND_bytes, fsynced). A file that others may
 * read or write, or whose content is not 64 hex characters, is refused.
 */
int isc_vault_load(const char *path, int create, struct isc_vault **out, struct isc_err *err);
/* A vault over the given key bytes (tests, rotation). */
int isc_vault_from_bytes(const unsigned char key[ISC_VAULT_KEY_LEN], const char *path,
                         struct isc_vault **out, struct isc_err *err);
/*
 * Writes a fresh random key to path (0600, replaced when present) and returns a vault
 * over it: the first half of a rotation.
 */
int isc_vault_generate(const char *path, struct isc_vault **out, struct isc_err *err);
void isc_vault_free(struct isc_vault *v);
const char *isc_vault_path(const struct isc_vault *v);

/* Seals pt: a fresh nonce into nonce, ciphertext || tag into *ct (malloc'd, *ct_len = len + 16). */
int isc_vault_seal(const struct isc_vault *v, const void *aad, size_t aad_len, const void *pt,
                   size_t pt_len, unsigned char nonce[ISC_VAULT_NONCE_LEN], unsigned char **ct,
                   size_t *ct_len, struct isc_err *err);
/*
 * Opens what isc_vault_seal made with the same aad. A tampered record, another
 * aad or another master key: ISC_EAUTH, nothing returned. *pt is NUL-terminated
 * (one byte past *pt_len) and must be released with isc_vault_wipe_free.
 */
int isc_vault_open(const struct isc_vault *v, const void *aad, size_t aad_len,
                   const unsigned char *nonce, size_t nonce_len, const unsigned char *ct,
                   size_t ct_len, unsigned char **pt, size_t *pt_len, struct isc_err *err);

/* OPENSSL_cleanse then free; NULL is a no-op. */
void isc_vault_wipe_free(void *p, size_t len);

#endif
