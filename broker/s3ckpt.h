/*
 * Artifacts in object storage, for callers outside the broker (issue 45,
 * docs/artifacts.md): deleting an experiment's checkpoint versions.
 */
#ifndef ISC_BROKER_S3CKPT_H
#define ISC_BROKER_S3CKPT_H

#include "artifacts/manifest.h"
#include "config/config.h"
#include "launcher/s3node.h"
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

/*
 * A sync's quick check (as rsync's default): which of rank 0's listed files to upload
 * and which to carry over from the current version. A listed file whose path, size and
 * mtime_ns equal the current manifest's entry keeps that entry's object (key, ETag,
 * part size): nothing is uploaded for it. A manifest entry without mtime_ns never
 * matches.
 */
struct isc_s3_plan {
	long *from;      /* per listed entry: cur's entry carried over, or -1 (upload; dirs) */
	size_t n_upload; /* listed files to upload */
	size_t n_carry;  /* listed files carried over */
	/* 0: nothing to upload and the listing is cur's entries under `which` exactly (same
	 * paths, folders and files): no new version is needed. */
	int changed;
};

/*
 * The plan for listing l against cur (NULL: no version yet, everything is uploaded),
 * `which` the ISC_ARTIFACT_* folders listed (cur's entries outside them are not
 * compared). Pure: no I/O. 0 or ISC_ENOMEM; isc_s3_plan_cleanup after.
 */
int isc_s3_sync_plan(const struct isc_node_listing *l, const struct isc_manifest *cur, int which,
                     struct isc_s3_plan *out, struct isc_err *err);
void isc_s3_plan_cleanup(struct isc_s3_plan *p);

#endif
