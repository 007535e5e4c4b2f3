/*
 * The node's transfer engine (issue 45): the shell a node's bash runs to move bytes
 * between its disk and an object store through presigned URLs, so the broker is never
 * the data path. One engine for every node-side transfer: the datasets a burst node
 * fetches (launcher/boot.c), checkpoint uploads (multipart, part PUTs) and restores
 * (ranged GETs) (broker/s3ckpt.c).
 *
 * A presigned URL is a bearer credential: it never reaches a process's argv (ps shows
 * argv to every user of the node). The caller sends URLs on the SSH channel's stdin;
 * the scripts here read them with bash builtins (read, printf) into files of mode 0600
 * in a private folder, and curl takes them from a config file (-K). A URL must fit a
 * quoted curl config string: isc_transfer_url_ok.
 *
 * Every word the caller gives as "shell" below is pasted as is: a quoted literal
 * (isc_shell_quote) or a "$variable" expression the caller's script set.
 */
#ifndef ISC_LAUNCHER_TRANSFER_H
#define ISC_LAUNCHER_TRANSFER_H

#include "common/buf.h"

#include <stddef.h>
#include <stdint.h>

/* Downloads: ranges of 16 MiB (whole MiB: dd seeks in MiB), 16 connections at once. */
#define ISC_TRANSFER_RANGE    (16u << 20)
#define ISC_TRANSFER_PARALLEL 16
/*
 * Uploads: parts of 8 to 64 MiB, 8 PUTs at once. S3 takes 5 MiB to 5 GiB a part
 * (the last may be smaller) and at most 10,000 parts (docs/artifacts.md, "Facts").
 */
#define ISC_TRANSFER_PART_MIN     (8ull << 20)
#define ISC_TRANSFER_PART_MAX     (64ull << 20)
#define ISC_TRANSFER_MAX_PARTS    10000u
#define ISC_TRANSFER_PUT_PARALLEL 8
/* The largest file one multipart upload of ISC_TRANSFER_PART_MAX parts can hold (625 GiB). */
#define ISC_TRANSFER_MAX_FILE (ISC_TRANSFER_PART_MAX * ISC_TRANSFER_MAX_PARTS)

/*
 * The part size for a file of size bytes: about 2 x ISC_TRANSFER_PUT_PARALLEL parts
 * (every connection busy), in whole MiB, from ISC_TRANSFER_PART_MIN to
 * ISC_TRANSFER_PART_MAX (so never more than 10,000 parts). 0 when the file is larger
 * than ISC_TRANSFER_MAX_FILE.
 */
uint64_t isc_transfer_part_size(uint64_t size);
/* How many parts of part_size a file of size bytes takes (an empty file: 1). */
unsigned isc_transfer_part_count(uint64_t size, uint64_t part_size);

/* 1 when url can go into a node's curl config: no control character, '"' or '\\'. */
int isc_transfer_url_ok(const char *url);

/* One object fetched with ranged GETs from one presigned URL, written at offsets. */
struct isc_transfer_get {
	const char *url_var; /* the shell variable holding the URL (read from stdin) */
	const char *header;  /* one header sent with every GET ("If-Match: \"ETAG\""), or NULL */
	const char *dest;    /* shell: the file written (created, truncated to the bytes) */
	const char *conf;    /* shell: where the 0600 curl config goes (removed after) */
	/* Bytes expected; ISC_TRANSFER_SIZE_PROBE: asked with a 1-byte range (an object it
	 * cannot size is fetched whole). A known size is checked after (stat). */
	uint64_t size;
	int parallel;         /* 0: ISC_TRANSFER_PARALLEL */
	const char *fail_msg; /* one line to stderr when the fetch fails */
	int fail_code;        /* then exit with this */
	/* Checks after the fetch, each optional (NULL): */
	const char *sha256;    /* lowercase hex of the bytes */
	const char *etag_md5;  /* S3's ETag of the bytes: "HEX", or "HEX-N" with part_size */
	uint64_t part_size;    /* the upload's part size, for a "HEX-N" ETag */
	const char *check_msg; /* one line to stderr when a check fails (exit fail_code) */
};
#define ISC_TRANSFER_SIZE_PROBE UINT64_MAX

/*
 * Appends the shell of one fetch; 0 or ISC_ENOMEM (ISC_EINVALID for a bad part_size).
 * It sets the shell variables s (the size) and h (the header): a caller keeps none of
 * its own under those names.
 */
int isc_transfer_get_script(const struct isc_transfer_get *g, struct isc_buf *b);

/*
 * Multipart upload of several files from presigned part-PUT URLs, all parts in one
 * pool of `parallel` curl PUTs. dir (shell) is a private folder (mode 0700) the
 * caller made, holding:
 *   dir/files  line K (1-based): the path of file K (no newline in it);
 *   dir/parts  one line per part: "K PART FIRST LEN URL" (written by
 *              isc_transfer_read_lines from stdin).
 * Each part is read from file K at FIRST for LEN bytes (dd), PUT with its
 * Content-Length (never chunked: S3 refuses that on a presigned PUT), tried up to
 * 3 times, and reported on stdout as "K PART ETAG" (ETag without quotes); parts
 * come in any order. A part that fails all its tries fails the script with
 * fail_code after the others finished (no torn object becomes current: the broker
 * completes only whole uploads).
 */
struct isc_transfer_put {
	const char *dir; /* shell */
	int parallel;    /* 0: ISC_TRANSFER_PUT_PARALLEL */
	int fail_code;
};
int isc_transfer_put_script(const struct isc_transfer_put *p, struct isc_buf *b);

/*
 * Shell that copies the next n lines of stdin into file (shell), mode 0600, with
 * bash's read and printf builtins only, so nothing else reads ahead of them on the
 * channel and no URL is in any argv.
 */
int isc_transfer_read_lines(const char *file, size_t n, struct isc_buf *b);

#endif
