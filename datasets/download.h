/*
 * One S3 object into one file, for the dataset cache: ranged GETs on one
 * kept-alive connection, each If-Match the ETag, the body written to the file
 * as it arrives and hashed in the same pass (SHA-256 always; the MD5 of an
 * MD5-based ETag; S3's additional checksum when the object has one), so the
 * bytes are read once and never held in memory. Resumable after a crash:
 * every range ends with fdatasync and a marker of how far the file is
 * durable (see download.c). See docs/datasets.md, "Caching".
 */
#ifndef ISC_DATASETS_DOWNLOAD_H
#define ISC_DATASETS_DOWNLOAD_H

#include "common/err.h"
#include "providers/aws/s3.h"

#include <stddef.h>
#include <stdint.h>

/* Called now and then with the bytes of this object on disk so far. */
typedef void (*isc_dataset_progress_fn)(void *ctx, uint64_t bytes);

struct isc_dataset_download {
	struct isc_s3_client *client; /* borrowed */
	const char *bucket;
	const struct isc_s3_object *object; /* from HeadObject: size, ETag, checksum, SSE */
	const char *version_id;             /* NULL: the current version */
	uint64_t part_size; /* bytes of part 1 of a multipart object (HeadObject partNumber=1) */
	const char *path;   /* the file; what it already holds is resumed from */
	isc_dataset_progress_fn progress;
	void *progress_ctx;
	const volatile int *stop; /* non-zero: stop soon (ISC_ETRANSIENT "stopped") */
};

/* The result: the bytes' SHA-256, and how they were checked against S3. */
struct isc_dataset_verified {
	char sha256[65];
	char by[160]; /* e.g. "ETag (MD5)", "ChecksumCRC32C (composite, 3 parts)" */
};

/*
 * Downloads and verifies. ISC_ECONFLICT when the bytes do not match the ETag
 * or checksum (the file is removed: a retry starts over) or when S3 answers
 * 412 (the object changed); ISC_ETRANSIENT/ISC_ETHROTTLED when S3 could not be
 * reached (the file keeps what arrived, to resume from).
 */
int isc_dataset_download_run(const struct isc_dataset_download *d, struct isc_dataset_verified *out,
                             struct isc_err *err);

#endif
