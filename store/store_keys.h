/*
 * Bring-your-own cloud keys (table cloud_keys, migrations 3 and the keys
 * migration): one row per registered key, its secret sealed by keys/vault.c
 * (nonce + AES-256-GCM ciphertext with its tag). This file only moves bytes:
 * nothing here ever sees a plaintext secret. cloud_key_master holds the
 * check value that tells whether a master key is the one the rows were
 * sealed under.
 */
#ifndef ISC_STORE_STORE_KEYS_H
#define ISC_STORE_STORE_KEYS_H

#include "store/store.h"

#include <stddef.h>
#include <stdint.h>

struct isc_cloud_key {
	char *id; /* "key_..." */
	int64_t org_id;
	char *org_name; /* filled by reads */
	char *provider;
	char *name;      /* unique per org and provider */
	char *account;   /* what check_credentials proved: AWS account, GCP project, OCI tenancy */
	char *principal; /* ARN, service-account email, user OCID */
	char *regions;   /* comma-separated; "" = every region */
	char *added_by;  /* who registered it */
	char *state;     /* active | failing | removing */
	char *state_reason; /* why failing/removing; "" when active */
	char *fingerprint;  /* short hash of the sealed plaintext, for people */
	int64_t created_at_ms;
	int64_t verified_at_ms;
	unsigned char *nonce;
	size_t nonce_len;
	unsigned char *ciphertext; /* ciphertext || tag */
	size_t ciphertext_len;
};

void isc_cloud_key_cleanup(struct isc_cloud_key *k);
void isc_cloud_key_list_free(struct isc_cloud_key *list, size_t n);

/* Inserts a key; ISC_ECONFLICT when the org already has one of that provider and name. */
int isc_store_key_add(struct isc_store *s, const struct isc_cloud_key *k, struct isc_err *err);
/* ISC_ENOTFOUND when there is no such key. */
int isc_store_key_get(struct isc_store *s, const char *id, struct isc_cloud_key *out,
                      struct isc_err *err);
/*
 * A page of the keys of the orgs where user_id is admin (all: every org), only
 * org_id's when > 0, by org name, provider and name, after the key (after_org,
 * after_provider, after_name) (NULL after_org: the first page); at most limit
 * rows (0: all). The listings' pages: docs/api.md, "Pages".
 */
int isc_store_key_page(struct isc_store *s, int all, int64_t user_id, int64_t org_id,
                       const char *after_org, const char *after_provider, const char *after_name,
                       size_t limit, struct isc_cloud_key **out, size_t *n, struct isc_err *err);
/* Every key, or those of one organisation (org_id > 0), by org, provider and name. */
int isc_store_key_list(struct isc_store *s, int64_t org_id, struct isc_cloud_key **out, size_t *n,
                       struct isc_err *err);
/*
 * The org's key for provider that covers region (regions "" or naming it), any
 * state. *found 0 when the org has none: the platform's keys are used.
 */
int isc_store_key_for(struct isc_store *s, int64_t org_id, const char *provider, const char *region,
                      struct isc_cloud_key *out, int *found, struct isc_err *err);
/* 1 when the key may be used in region (its regions are "" or name it whole). */
int isc_cloud_key_covers(const struct isc_cloud_key *k, const char *region);
/* State and reason (reason "" for active); verified_at_ms 0 leaves it unchanged. */
int isc_store_key_set_state(struct isc_store *s, const char *id, const char *state,
                            const char *reason, int64_t verified_at_ms, struct isc_err *err);
/* New sealed secret (master-key rotation). */
int isc_store_key_set_sealed(struct isc_store *s, const char *id, const unsigned char *nonce,
                             size_t nonce_len, const unsigned char *ct, size_t ct_len,
                             struct isc_err *err);
int isc_store_key_delete(struct isc_store *s, const char *id, struct isc_err *err);
/*
 * Removes the key when no cluster on it is open, the count and the delete in one
 * transaction: ISC_ECONFLICT (with *live, the key kept) while one is, ISC_ENOTFOUND
 * when there is no such key.
 */
int isc_store_key_delete_unused(struct isc_store *s, const char *id, int64_t *live,
                                struct isc_err *err);
/* Clusters on the key that are not closed yet. */
int isc_store_key_live_clusters(struct isc_store *s, const char *id, int64_t *n,
                                struct isc_err *err);
/* Experiments with a cluster on the key that is not closed (ids, caller frees each and v). */
int isc_store_key_live_experiments(struct isc_store *s, const char *id, char ***out, size_t *n,
                                   struct isc_err *err);

/* The master key's check value; ISC_ENOTFOUND when no key was ever sealed. */
int isc_store_key_master_check_get(struct isc_store *s, unsigned char **nonce, size_t *nonce_len,
                                   unsigned char **ct, size_t *ct_len, struct isc_err *err);
int isc_store_key_master_check_set(struct isc_store *s, const unsigned char *nonce,
                                   size_t nonce_len, const unsigned char *ct, size_t ct_len,
                                   struct isc_err *err);

#endif
