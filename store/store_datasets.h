/*
 * Datasets (table datasets): S3 objects or folders registered once per
 * organisation, cached by iscd and mounted read-only on every node. States:
 * 'created' (registered, not yet picked up), 'caching' (iscd is downloading;
 * cached_bytes says how far), 'available' (the copy and its manifest are
 * ready), 'failed' (reason says why). See docs/datasets.md.
 */
#ifndef ISC_STORE_STORE_DATASETS_H
#define ISC_STORE_STORE_DATASETS_H

#include "store/store.h"

#include <stddef.h>
#include <stdint.h>

struct isc_dataset {
	char *id; /* "ds_..." */
	int64_t org_id;
	char *org_name;
	char *name; /* unique in its organisation; the mount is /data/<name> */
	char *uri;  /* "s3://bucket[/key]" as given */
	char *bucket;
	char *key; /* the object, or the folder's prefix ("" for a whole bucket) */
	int is_folder;
	char *etag;           /* pinned ETag, "" when not given */
	char *version_id;     /* pinned VersionId, "" when not given */
	char *credentials;    /* "" (the broker's AWS settings), "env", "profile:NAME" or
	                         "sealed:<fingerprint>" (its own keys, below); never a secret */
	int64_t size_bytes;   /* what S3 reported at registration (sum for a folder) */
	int64_t volume_bytes; /* the cap on the expanded copy */
	int64_t cached_bytes; /* downloaded so far */
	char *state;          /* "created", "caching", "available", "failed" */
	char *reason;         /* why it failed; "" otherwise */
	char *copy_name;      /* "@ORGID/NAME-ID": the copy's folder under $ISC_HOME/datasets
	                         (and /data/.isc on nodes), inside its organisation's own
	                         folder; another dataset of the same organisation may share it */
	char *manifest_json;  /* what nodes fetch and verify; NULL until available */
	int64_t created_at_ms;
	int64_t updated_at_ms;
	/* The dataset's own AWS keys sealed by keys/ (NULL when it has none): this file only
	 * moves the bytes, it never sees a plaintext secret. */
	unsigned char *cred_nonce;
	size_t cred_nonce_len;
	unsigned char *cred_ciphertext; /* ciphertext || tag */
	size_t cred_ciphertext_len;
};

void isc_dataset_cleanup(struct isc_dataset *d);
void isc_dataset_list_free(struct isc_dataset *list, size_t n);

/*
 * Records d (state 'created') in org_name, with its sealed credentials when it has
 * them; d->id is used when set (sealing binds the id, so it is chosen first), else
 * made here; org_id, state and times are filled here. d->copy_name is the copy's
 * leaf: the record keeps "@ORGID/" + leaf, the organisation's id taken in the same
 * statement, so a copy's path always names the organisation that owns it (issue 29).
 * ISC_ENOTFOUND for an unknown organisation, ISC_ECONFLICT when the organisation
 * already has a dataset of that name. *id_out: the new id.
 */
int isc_store_dataset_add(struct isc_store *s, const char *org_name, const struct isc_dataset *d,
                          char **id_out, struct isc_err *err);

/* By id or name within org_name (NULL: any organisation, by id only). ISC_ENOTFOUND. */
int isc_store_dataset_find(struct isc_store *s, const char *org_name, const char *id_or_name,
                           struct isc_dataset *out, struct isc_err *err);

/* Where a page of the dataset listing starts: after this organisation's dataset. */
struct isc_dataset_cursor {
	const char *org_name;
	const char *name;
};

/*
 * Datasets ordered by organisation name, then name: of org_name (NULL: every
 * organisation), only of organisations visible_to is a member of (0: all, the
 * operator), after the cursor (NULL: from the first), at most limit (0: no limit).
 */
int isc_store_dataset_list(struct isc_store *s, const char *org_name, int64_t visible_to,
                           const struct isc_dataset_cursor *after, size_t limit,
                           struct isc_dataset **out, size_t *n, struct isc_err *err);

/* The oldest dataset in 'caching' (resumed first) or 'created'. ISC_ENOTFOUND when none. */
int isc_store_dataset_next_to_cache(struct isc_store *s, struct isc_dataset *out,
                                    struct isc_err *err);

/* Moves to 'caching' / 'failed' (with reason) / 'available' (with its manifest). */
int isc_store_dataset_set_caching(struct isc_store *s, const char *id, struct isc_err *err);
int isc_store_dataset_set_failed(struct isc_store *s, const char *id, const char *reason,
                                 struct isc_err *err);
int isc_store_dataset_set_available(struct isc_store *s, const char *id, int64_t size_bytes,
                                    const char *manifest_json, struct isc_err *err);
int isc_store_dataset_set_progress(struct isc_store *s, const char *id, int64_t cached_bytes,
                                   struct isc_err *err);

/* How many datasets other than except_id use copy_name (a shared copy is removed with its last). */
int isc_store_dataset_copy_users(struct isc_store *s, const char *copy_name, const char *except_id,
                                 int *n, struct isc_err *err);

/*
 * The datasets of organisation org_id other than except_id whose copy could hold
 * the bytes of s3://bucket/key: Available, one object (no folder), the same bucket
 * and key, a volume no larger than volume_max (their copy fits its cap). The
 * caller still has S3 confirm the ETag and VersionId before sharing.
 */
int isc_store_dataset_share_donors(struct isc_store *s, int64_t org_id, const char *bucket,
                                   const char *key, const char *except_id, int64_t volume_max,
                                   struct isc_dataset **out, size_t *n, struct isc_err *err);

/*
 * Makes id Available on the copy copy_name of another dataset of its own
 * organisation, with that copy's manifest: only while such a dataset is still
 * Available on it (checked in the same statement, so a removal cannot take the
 * copy away in between). ISC_ECONFLICT when it no longer is.
 */
int isc_store_dataset_set_shared(struct isc_store *s, const char *id, const char *copy_name,
                                 int64_t size_bytes, const char *manifest_json,
                                 struct isc_err *err);

/*
 * Back to 'created' (no manifest, nothing cached): its copy is not to be trusted
 * and is cached again. ISC_ENOTFOUND.
 */
int isc_store_dataset_reset(struct isc_store *s, const char *id, struct isc_err *err);

/*
 * Removes the record unless it is 'caching' (ISC_ECONFLICT, naming it): checked in
 * the same statement, so the cacher cannot start on it in between. ISC_ENOTFOUND.
 */
int isc_store_dataset_remove(struct isc_store *s, const char *id, struct isc_err *err);

/* Every dataset with sealed credentials (master-key rotation). */
int isc_store_dataset_sealed_list(struct isc_store *s, struct isc_dataset **out, size_t *n,
                                  struct isc_err *err);
/* New sealed credentials (master-key rotation). ISC_ENOTFOUND. */
int isc_store_dataset_set_sealed(struct isc_store *s, const char *id, const unsigned char *nonce,
                                 size_t nonce_len, const unsigned char *ct, size_t ct_len,
                                 struct isc_err *err);

#endif
