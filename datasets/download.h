/*
 * One S3 object into one file, for the dataset cache: the object is a grid of
 * 8 MiB blocks, fetched as runs of 1-8 blocks, one ranged GET each, on several
 * kept-alive connections at once (one S3 client and thread each), each GET
 * If-Match the ETag and retried on its own with backoff, its body
 * written at its offset in the file as it arrives (pwrite), never held in
 * memory. The MD5 of the ETag and the SHA-256 are computed in order by hashing
 * threads that read the file back (from the page cache) behind the completed
 * ranges, so ranges that finish out of order wait on disk; a multipart ETag's
 * part MD5s are computed by the connections themselves, in parallel, as their
 * parts arrive. Resumable after a crash: each finished run is fdatasync'd and
 * its blocks recorded in a bitmap beside the file, so a crash loses only the
 * runs in flight (see download.c). ISC_DATASET_TRACE=FILE appends per-block
 * timings. See docs/datasets.md, "Caching".
 */
#ifndef ISC_DATASETS_DOWNLOAD_H
#define ISC_DATASETS_DOWNLOAD_H

#include "common/err.h"
#include "providers/aws/s3.h"

#include <stddef.h>
#include <stdint.h>

/* Connections at once when nothing is configured, and the most allowed. */
#define ISC_DATASET_PARALLELISM_DEFAULT 8
#define ISC_DATASET_PARALLELISM_MAX     64

/* Called now and then with the bytes of this object on disk so far. */
typedef void (*isc_dataset_progress_fn)(void *ctx, uint64_t bytes);

struct isc_dataset_download {
	struct isc_s3_client *client; /* borrowed; the other connections get copies of it */
	const char *bucket;
	const struct isc_s3_object *object; /* from HeadObject: size, ETag, checksum, SSE */
	const char *version_id;             /* NULL: the current version */
	uint64_t part_size; /* bytes of part 1 of a multipart object (HeadObject partNumber=1) */
	const char *path;   /* the file; what it already holds is resumed from */
	isc_dataset_progress_fn progress; /* called on the calling thread only */
	void *progress_ctx;
	const volatile int *stop; /* non-zero: stop soon (ISC_ETRANSIENT "stopped") */
	int parallelism;          /* connections at once; 0: ISC_DATASET_PARALLELISM_DEFAULT */
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
 * reached (the file keeps the finished ranges, to resume from).
 */
int isc_dataset_download_run(const struct isc_dataset_download *d, struct isc_dataset_verified *out,
                             struct isc_err *err);

/*
 * The [providers.aws] s3_parallelism setting (NULL: the default) as a
 * connection count, 1..ISC_DATASET_PARALLELISM_MAX; ISC_EINVALID naming the key.
 */
int isc_dataset_parallelism_parse(const char *setting, int *out, struct isc_err *err);

/*
 * The block size for an object: 8 MiB, or the fewest whole parts that make 8
 * MiB at least when the object's parts (part_size, 0 for none) are at most 64
 * MiB, so each run's part MD5s are its own connection's to compute. The size
 * and parallelism no longer matter: a GET covers a run of blocks.
 */
uint64_t isc_dataset_range_bytes(uint64_t size, uint64_t part_size, int parallelism);

#endif
