/*
 * Artifacts in object storage, for callers outside the broker (issue 45,
 * docs/artifacts.md): deleting an experiment's checkpoint versions.
 */
#ifndef ISC_BROKER_S3CKPT_H
#define ISC_BROKER_S3CKPT_H

#include "config/config.h"
#include "store/store.h"

#include <stddef.h>
#include <stdint.h>

/*
 * Deletes every object of every recorded version of the experiment (only keys under its
 * own PREFIX/@ORG/ID/ prefix), then their manifests. *objects: how many were deleted.
 * ISC_EINVALID when artifact_root is not a bucket.
 */
int isc_artifacts_s3_delete(const struct isc_config *cfg, struct isc_store *s,
                            const char *experiment_id, int64_t org_id, size_t *objects,
                            struct isc_err *err);

#endif
