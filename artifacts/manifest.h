/*
 * A checkpoint version's manifest (issue 45, docs/artifacts.md): the files and folders of
 * rank 0's /mnt/checkpoints, /mnt/crud and /mnt/lossy as objects in the bucket, with
 * their keys, sizes and ETags. The broker writes it only after every object was
 * completed and verified; nodes restore from it. Its rules are today's pull rules
 * (artifacts/unpack.h): regular files and folders only, relative names under the three
 * folders, no "..", ".", empty components or control characters, sizes and counts
 * capped. They are checked when a manifest is recorded and again before one is used,
 * and the node's restore script checks them a third time before it writes anything.
 */
#ifndef ISC_ARTIFACTS_MANIFEST_H
#define ISC_ARTIFACTS_MANIFEST_H

#include "common/err.h"

#include <stddef.h>
#include <stdint.h>

#define ISC_MANIFEST_PATH_MAX 1024

struct isc_manifest_entry {
	char *path;         /* "checkpoints/a/b", relative to /mnt; owned */
	int is_dir;         /* 1: a folder (no object); 0: a regular file */
	uint64_t size;      /* bytes (files) */
	char *key;          /* the object's key (files); owned */
	char etag[80];      /* S3's ETag of the object, "HEX" or "HEX-N" (files) */
	uint64_t part_size; /* the upload's part size (files) */
	/* The file's mtime on rank 0 when it was listed, in ns since the epoch: the sync's
	 * quick check (size and mtime as rsync's). has_mtime 0: not recorded (a manifest
	 * from before mtime_ns, a directory): such an entry never matches a listing. */
	int has_mtime;
	int64_t mtime_ns;
};

struct isc_manifest {
	int64_t version; /* 1, 2, ...: the sync that made it */
	struct isc_manifest_entry *entries;
	size_t n;
	uint64_t total_bytes; /* the files' sizes together */
};

struct isc_manifest_limits {
	uint64_t max_bytes;     /* the files' sizes together; 0: no cap */
	uint64_t max_entries;   /* files and folders; 0: no cap */
	const char *key_prefix; /* every file's key is key_prefix + "vN/" + path */
};

/* NULL when path is a manifest path (see above), else why not (a static string). */
const char *isc_manifest_path_why(const char *path);

/*
 * Every rule: each path, no duplicates, no file with something below it, files'
 * keys, ETags and part sizes, and the caps. ISC_EINVALID naming the first entry
 * that breaks one (its path made printable) and the rule.
 */
int isc_manifest_check(const struct isc_manifest *m, const struct isc_manifest_limits *l,
                       struct isc_err *err);

/* {"version":N,"entries":[{"path","type":"file"|"dir","size","key","etag","part_size",
 * "mtime_ns" (optional, files)}]} */
int isc_manifest_from_json(const char *json, struct isc_manifest *out, struct isc_err *err);
/* Caller frees; NULL when out of memory. */
char *isc_manifest_to_json(const struct isc_manifest *m);
/* Appends an entry (copies path and key); 0 or ISC_ENOMEM. */
int isc_manifest_add(struct isc_manifest *m, const char *path, int is_dir, uint64_t size,
                     const char *key, const char *etag, uint64_t part_size);
void isc_manifest_cleanup(struct isc_manifest *m);

#endif
