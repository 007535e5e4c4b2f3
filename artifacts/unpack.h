/*
 * Unpacking a tar stream that a tenant's node sent, in-process (libarchive),
 * into a fresh empty folder, then swapping the result into place.
 *
 * The stream is untrusted: it need not come from an honest tar. The unpacker
 * keeps regular files and folders only, under the top-level names the caller
 * asked for; it refuses (skips and reports) symbolic links, hard links,
 * devices, FIFOs and sockets, names that are absolute or contain "..", and
 * anything outside the allowed top-level folders; it strips set-id and sticky
 * bits and makes everything owner-only (folders 0700, files 0600 or 0700).
 * Caps on entries and bytes, and a free-space reserve on the target disk,
 * end the unpack with an error (the previous copy stays where it was).
 * See docs/security.md.
 */
#ifndef ISC_ARTIFACTS_UNPACK_H
#define ISC_ARTIFACTS_UNPACK_H

#include "common/err.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct isc_unpack_limits {
	uint64_t max_bytes;      /* sum of regular files' sizes; 0: no cap */
	uint64_t max_entries;    /* archive members, refused ones included; 0: no cap */
	uint64_t min_free_bytes; /* the target disk keeps at least this free; 0: no check */
	const char *const *tops; /* allowed top-level folder names ("checkpoints", ...) */
	size_t n_tops;
	int any_top;  /* 1: every top-level name is allowed (a dataset's root); tops ignored */
	int archives; /* 1: zip and gzip/bzip2/xz-compressed tar too, not only plain tar */
};

struct isc_unpack_report {
	uint64_t entries;        /* members seen */
	uint64_t files;          /* regular files written */
	uint64_t bytes;          /* their sizes (a sparse file counts its whole length) */
	uint64_t refused;        /* members skipped */
	uint64_t stripped;       /* members whose set-id/sticky bits were removed */
	unsigned tops_seen;      /* bit i: tops[i] arrived as a folder */
	char first_refused[256]; /* "NAME: why" of the first refused member, or "" */
};

/*
 * Where the stream comes from: returns the number of bytes made available at
 * *buf (valid until the next call), 0 at the end, or a negative isc_code with
 * a message in err.
 */
typedef ssize_t (*isc_unpack_read_fn)(void *ctx, const void **buf, struct isc_err *err);

/*
 * Unpacks the tar stream into dest, which must be an existing empty folder
 * (made by the caller, e.g. isc_unpack_fresh_dir). Refused members are skipped
 * and counted in report; a cap, a full disk, a broken stream or a failed write
 * returns an error (ISC_EINVALID for caps and malformed archives, ISC_EIO for
 * local failures, or the reader's code).
 */
int isc_unpack_stream(isc_unpack_read_fn read, void *ctx, const char *dest,
                      const struct isc_unpack_limits *limits, struct isc_unpack_report *report,
                      struct isc_err *err);

/* A new empty folder "<parent>/.incoming-XXXXXX" (0700); parent is created if missing. */
int isc_unpack_fresh_dir(const char *parent, char **out, struct isc_err *err);

/*
 * Moves each of the named folders of fresh into parent, replacing the one of the
 * same name atomically (renameat2 RENAME_EXCHANGE, then the old tree is removed),
 * and removes fresh. Only names whose bit is set in `which` are moved; the
 * others keep their previous copy.
 */
int isc_unpack_swap_into(const char *fresh, const char *parent, const char *const *names, size_t n,
                         unsigned which, struct isc_err *err);

/*
 * Removes the ".incoming-*" folders of parent: what an unpack cut short by a crash
 * left. Only for a caller that knows no unpack into parent is under way.
 */
void isc_unpack_remove_leftovers(const char *parent);

/* Removes a tree without following symbolic links; 0 or ISC_EIO. A missing path is fine. */
int isc_unpack_remove_tree(const char *path, struct isc_err *err);

/* Free bytes for unprivileged users on the filesystem of path, or -1 with errno. */
int64_t isc_unpack_free_bytes(const char *path);

#endif
