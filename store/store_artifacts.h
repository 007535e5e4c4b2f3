/*
 * The manifests of experiments' checkpoint versions in the bucket (issue 45,
 * docs/artifacts.md; migration 25). A row is written only for a complete, verified
 * version; the highest version of an experiment is its current one.
 */
#ifndef ISC_STORE_STORE_ARTIFACTS_H
#define ISC_STORE_STORE_ARTIFACTS_H

#include "store/store.h"

#include <stdint.h>

struct isc_manifest_row {
	char *experiment_id;
	int64_t version;
	int64_t org_id;
	int64_t total_bytes;
	char *json; /* artifacts/manifest.h's JSON */
	int64_t created_at_ms;
};
void isc_manifest_row_cleanup(struct isc_manifest_row *r);

/* Records a version; ISC_ECONFLICT when that version exists. */
int isc_store_manifest_add(struct isc_store *s, const char *experiment_id, int64_t version,
                           int64_t org_id, int64_t total_bytes, const char *json,
                           struct isc_err *err);
/* The current (highest) version; ISC_ENOTFOUND when there is none. */
int isc_store_manifest_current(struct isc_store *s, const char *experiment_id,
                               struct isc_manifest_row *out, struct isc_err *err);
/* Every version of the experiment, lowest first (JSON included). */
int isc_store_manifest_list(struct isc_store *s, const char *experiment_id,
                            struct isc_manifest_row **out, size_t *n, struct isc_err *err);
void isc_manifest_row_list_free(struct isc_manifest_row *rows, size_t n);
/* Removes one version's row (its objects are the caller's to delete first). */
int isc_store_manifest_delete(struct isc_store *s, const char *experiment_id, int64_t version,
                              struct isc_err *err);
/* The bytes of the organisation's current manifests, all its experiments together. */
int isc_store_manifest_org_bytes(struct isc_store *s, int64_t org_id, int64_t *bytes,
                                 struct isc_err *err);

#endif
