/*
 * Artifacts in object storage, the node's side (issue 45, docs/artifacts.md): rank 0
 * lists its folders, uploads them with presigned part PUTs, and every node of a new
 * cluster restores a manifest with presigned ranged GETs, all through the node's
 * transfer engine (launcher/transfer.h). iscd sends URLs and reads listings and ETags
 * only: no artifact byte passes through it.
 */
#ifndef ISC_LAUNCHER_S3NODE_H
#define ISC_LAUNCHER_S3NODE_H

#include "artifacts/manifest.h"
#include "common/buf.h"
#include "launcher/launcher.h"

/* One file or folder of rank 0's artifact folders, as the node listed it. */
struct isc_node_entry {
	char *path; /* "checkpoints/a", relative to /mnt; owned */
	int is_dir;
	uint64_t size;
	int has_mtime;    /* files: mtime_ns was read (find's %T@, never before the epoch) */
	int64_t mtime_ns; /* the file's mtime, ns since the epoch (the sync's quick check) */
};

struct isc_node_listing {
	struct isc_node_entry *entries;
	size_t n;
	uint64_t total;   /* the files' sizes together */
	uint64_t refused; /* links, devices, FIFOs, sockets, names against the rules */
	char first_refused[160];
};
void isc_node_listing_cleanup(struct isc_node_listing *l);

/*
 * Lists the folders in `which` under the node's /mnt (find -printf, NUL-separated:
 * any name is read whole), each file with its size and mtime in ns. Regular files and folders with
 * names that pass isc_manifest_path_why are kept; the rest are refused and counted, never followed.
 * Over opts' artifact_max_entries or artifact_max_bytes: ISC_EINVALID naming the cap.
 */
int isc_launcher_list_artifacts(const struct isc_node_target *node,
                                const struct isc_launcher_opts *opts, int which,
                                struct isc_node_listing *out, struct isc_err *err);

/* One file to upload: its parts' presigned URLs in; their ETags out. */
struct isc_node_upload {
	const char *path; /* relative to /mnt, from the listing */
	uint64_t size, part_size;
	unsigned n_parts;
	char **part_urls;  /* n_parts presigned UploadPart URLs (bearer credentials) */
	char (*etags)[80]; /* n_parts; filled: S3's ETag of each part, without quotes */
};

/*
 * Runs the multipart part PUTs of every file on the node at once (the engine's pool of
 * parallel curls), URLs on stdin. 0 when every part of every file has its ETag.
 */
int isc_launcher_upload_artifacts(const struct isc_node_target *node,
                                  const struct isc_launcher_opts *opts,
                                  struct isc_node_upload *files, size_t n, struct isc_err *err);

/*
 * The restore script for manifest m with one presigned GET URL per file entry (in
 * entry order, read from stdin): it checks every path first (nothing outside root,
 * no "..", the three folders only) and the total against max_bytes, fetches each
 * object into a private staging folder under root with its size and ETag checked,
 * checks that staging holds regular files and folders only, and only then replaces
 * root's checkpoints, crud and lossy with it. A check that fails changes nothing.
 * root is "/mnt" on nodes (a test folder in unit tests). Exposed for tests.
 */
int isc_launcher_restore_script(const struct isc_manifest *m, const char *root, uint64_t max_bytes,
                                struct isc_buf *b);
#define ISC_RESTORE_REFUSED 96 /* the script's exit code for a manifest it refuses */

/*
 * Restores m onto every node at once, one thread each; urls: one per file entry.
 * rcs (n, may be NULL) gets each node's outcome; the error names the first node.
 */
int isc_launcher_restore_artifacts_all(const struct isc_node_target *nodes, size_t n,
                                       const struct isc_launcher_opts *opts,
                                       const struct isc_manifest *m, char *const *urls, int *rcs,
                                       struct isc_err *err);

#endif
