/*
 * The artifact unpacker (see unpack.h): libarchive reads the tar stream and
 * writes to disk, but every member is judged here first, by its original
 * name and type, before libarchive sees a rewritten one. libarchive's own
 * guards (no extraction through a symbolic link, no "..") stay on as a second
 * line. Nothing here ever creates a symbolic link or a hard link, so the
 * fresh folder cannot grow a path that leads out of it.
 */
#include "artifacts/unpack.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

struct reader {
	isc_unpack_read_fn read;
	void *ctx;
	int rc; /* the reader's own failure, if any */
	struct isc_err err;
};

static la_ssize_t la_read(struct archive *a, void *data, const void **buf)
{
	struct reader *r = data;
	ssize_t n = r->read(r->ctx, buf, &r->err);
	if (n < 0) {
		r->rc = (int)n;
		archive_set_error(a, EIO, "%s", r->err.msg);
		return -1;
	}
	return n;
}

int64_t isc_unpack_free_bytes(const char *path)
{
	struct statvfs v;
	if (statvfs(path, &v) != 0)
		return -1;
	return (int64_t)v.f_bavail * (int64_t)v.f_frsize;
}

/* A member name for messages: printable ASCII only, cut to fit. */
static void printable(const char *name, char *out, size_t cap)
{
	size_t o = 0;
	for (const char *p = name ? name : "?"; *p && o + 1 < cap; p++)
		out[o++] = (*p >= 0x20 && *p < 0x7f) ? *p : '?';
	out[o] = '\0';
}

/*
 * The member's name as "top/a/b" in out, with "." and empty components
 * dropped; *top gets the index of its top-level folder. Returns NULL, or why
 * the name is refused. An empty result (the archive's own root) is "".
 */
static const char *clean_name(const char *name, const struct isc_unpack_limits *l, char *out,
                              size_t cap, size_t *top)
{
	size_t o = 0;

	out[0] = '\0';
	if (!name)
		return "a name that is not text";
	if (name[0] == '/')
		return "an absolute name";
	for (const char *p = name; *p;) {
		size_t n = strcspn(p, "/");
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return "a name with \"..\"";
		if (n > 0 && !(n == 1 && p[0] == '.')) {
			if (o == 0 && !l->any_top) {
				size_t i;
				for (i = 0; i < l->n_tops; i++)
					if (strlen(l->tops[i]) == n && !memcmp(l->tops[i], p, n))
						break;
				if (i == l->n_tops)
					return "outside the artifact folders";
				*top = i;
			}
			if (o + n + 2 > cap)
				return "a name too long";
			if (o)
				out[o++] = '/';
			memcpy(out + o, p, n);
			o += n;
			out[o] = '\0';
		}
		p += n;
		if (*p == '/')
			p++;
	}
	return NULL;
}

/* Why a member of this type is refused, or NULL for a regular file or a folder. */
static const char *refused_type(struct archive_entry *e)
{
	if (archive_entry_hardlink(e))
		return "a hard link";
	switch (archive_entry_filetype(e)) {
	case AE_IFREG:
	case AE_IFDIR:
		return NULL;
	case AE_IFLNK:
		return "a symbolic link";
	case AE_IFCHR:
	case AE_IFBLK:
		return "a device";
	case AE_IFIFO:
		return "a FIFO";
	case AE_IFSOCK:
		return "a socket";
	default:
		return "of an unknown type";
	}
}

static void note_refused(struct isc_unpack_report *rep, const char *name, const char *why)
{
	char shown[160];
	rep->refused++;
	if (rep->first_refused[0])
		return;
	printable(name, shown, sizeof(shown));
	snprintf(rep->first_refused, sizeof(rep->first_refused), "%s: %s", shown, why);
}

/* Copies one member's data blocks (holes stay holes: offsets are kept). */
static int copy_data(struct archive *in, struct archive *out, struct reader *r, struct isc_err *err)
{
	for (;;) {
		const void *buf;
		size_t len;
		la_int64_t off;
		int rc = archive_read_data_block(in, &buf, &len, &off);
		if (rc == ARCHIVE_EOF)
			return 0;
		if (rc < ARCHIVE_WARN)
			return r->rc ? isc_err_set(err, r->rc, "%s", r->err.msg)
			             : isc_err_set(err, ISC_EINVALID, "reading the archive: %s",
			                           archive_error_string(in));
		if (archive_write_data_block(out, buf, len, off) < ARCHIVE_WARN)
			return isc_err_set(err, ISC_EIO, "writing: %s", archive_error_string(out));
	}
}

/* Room for size more bytes on dest's disk, keeping the reserve. */
static int check_room(const char *dest, uint64_t size, const struct isc_unpack_limits *l,
                      struct isc_err *err)
{
	int64_t avail;
	if (!l->min_free_bytes)
		return 0;
	avail = isc_unpack_free_bytes(dest);
	if (avail >= 0 && (uint64_t)avail < size + l->min_free_bytes)
		return isc_err_set(err, ISC_EIO,
		                   "the disk of %s is nearly full (%lld bytes free, %llu more "
		                   "needed, %llu kept free for the store)",
		                   dest, (long long)avail, (unsigned long long)size,
		                   (unsigned long long)l->min_free_bytes);
	return 0;
}

/* One member: judged, rewritten under root, written (or skipped). */
static int one_member(struct archive *in, struct archive *out, struct archive_entry *e,
                      const char *root, const struct isc_unpack_limits *l, struct reader *r,
                      struct isc_unpack_report *rep, struct isc_err *err)
{
	const char *name = archive_entry_pathname(e), *why;
	char clean[PATH_MAX], full[PATH_MAX];
	size_t top = 0;
	uint64_t size = 0;
	mode_t perm;
	int rc;

	why = clean_name(name, l, clean, sizeof(clean) - strlen(root) - 2, &top);
	if (!why && !clean[0] && archive_entry_filetype(e) == AE_IFDIR)
		return archive_read_data_skip(in) < ARCHIVE_WARN ? ISC_EINVALID : 0; /* "./" */
	if (!why && !clean[0])
		why = "an empty name";
	if (!why)
		why = refused_type(e);
	if (why) {
		note_refused(rep, name, why);
		if (archive_read_data_skip(in) < ARCHIVE_WARN)
			return r->rc ? isc_err_set(err, r->rc, "%s", r->err.msg)
			             : isc_err_set(err, ISC_EINVALID, "reading the archive: %s",
			                           archive_error_string(in));
		return 0;
	}
	if (archive_entry_filetype(e) == AE_IFREG) {
		size = archive_entry_size_is_set(e) && archive_entry_size(e) > 0
		           ? (uint64_t)archive_entry_size(e)
		           : 0;
		if (l->max_bytes && (size > l->max_bytes || rep->bytes + size > l->max_bytes))
			return isc_err_set(err, ISC_EINVALID,
			                   "more than %llu bytes of files (the cap) at %s",
			                   (unsigned long long)l->max_bytes, clean);
		if ((rc = check_room(root, size, l, err)))
			return rc;
	}
	/* Owner-only, and never a set-id or sticky bit. */
	perm = archive_entry_perm(e);
	if (perm & 07000)
		rep->stripped++;
	if (archive_entry_filetype(e) == AE_IFDIR)
		perm = 0700;
	else
		perm = (perm & 0100) ? 0700 : 0600;
	archive_entry_set_perm(e, perm);
	if (snprintf(full, sizeof(full), "%s/%s", root, clean) >= (int)sizeof(full))
		return isc_err_set(err, ISC_EINVALID, "a name too long: %.100s", clean);
	/* Parents that the archive does not list are made here, owner-only (libarchive would
	 * follow the process umask). */
	for (char *p = full + strlen(root) + 1; (p = strchr(p, '/')) != NULL; p++) {
		*p = '\0';
		if (mkdir(full, 0700) != 0 && errno != EEXIST)
			return isc_err_set(err, ISC_EIO, "cannot create %s: %s", full,
			                   strerror(errno));
		*p = '/';
	}
	archive_entry_set_pathname(e, full);
	if (archive_write_header(out, e) < ARCHIVE_WARN)
		return isc_err_set(err, ISC_EIO, "cannot write %s: %s", clean,
		                   archive_error_string(out));
	if (size && (rc = copy_data(in, out, r, err)))
		return isc_err_wrap(err, "%s", clean);
	if (archive_write_finish_entry(out) < ARCHIVE_WARN)
		return isc_err_set(err, ISC_EIO, "cannot write %s: %s", clean,
		                   archive_error_string(out));
	if (archive_entry_filetype(e) == AE_IFDIR) {
		/* Only the top-level folder itself marks its arrival. */
		if (!strchr(clean, '/'))
			rep->tops_seen |= 1u << top;
	} else {
		rep->files++;
		rep->bytes += size;
	}
	return 0;
}

int isc_unpack_stream(isc_unpack_read_fn read, void *ctx, const char *dest,
                      const struct isc_unpack_limits *limits, struct isc_unpack_report *report,
                      struct isc_err *err)
{
	struct reader r = {read, ctx, 0, {0}};
	struct archive *in = NULL, *out = NULL;
	struct archive_entry *e;
	char root[PATH_MAX];
	int rc = 0;

	memset(report, 0, sizeof(*report));
	if (limits->n_tops > 32)
		return isc_err_set(err, ISC_EINVALID, "too many artifact folders");
	/* The canonical path: libarchive refuses to extract through any symlink in it. */
	if (!realpath(dest, root))
		return isc_err_set(err, ISC_EIO, "%s: %s", dest, strerror(errno));
	in = archive_read_new();
	out = archive_write_disk_new();
	if (!in || !out) {
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		goto out;
	}
	/* Plain tar (ustar, pax, GNU with sparse members): nothing else is expected. */
	archive_read_support_format_tar(in);
	if (limits->archives) {
		/* A dataset's archive: what docs/datasets.md lists, nothing more. */
		archive_read_support_format_zip(in);
		archive_read_support_filter_gzip(in);
		archive_read_support_filter_bzip2(in);
		archive_read_support_filter_xz(in);
	}
	archive_write_disk_set_options(
	    out, ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_SECURE_SYMLINKS |
	             ARCHIVE_EXTRACT_SECURE_NODOTDOT | ARCHIVE_EXTRACT_SPARSE);
	if (archive_read_open(in, &r, NULL, la_read, NULL) != ARCHIVE_OK) {
		rc = r.rc ? isc_err_set(err, r.rc, "%s", r.err.msg)
		          : isc_err_set(err, ISC_EINVALID, "not a tar stream: %s",
		                        archive_error_string(in));
		goto out;
	}
	for (;;) {
		int h = archive_read_next_header(in, &e);
		if (h == ARCHIVE_EOF)
			break;
		if (h < ARCHIVE_WARN) {
			rc = r.rc ? isc_err_set(err, r.rc, "%s", r.err.msg)
			          : isc_err_set(err, ISC_EINVALID, "not a valid tar stream: %s",
			                        archive_error_string(in));
			break;
		}
		if (++report->entries > limits->max_entries && limits->max_entries) {
			rc = isc_err_set(err, ISC_EINVALID, "more than %llu members (the cap)",
			                 (unsigned long long)limits->max_entries);
			break;
		}
		if ((rc = one_member(in, out, e, root, limits, &r, report, err)))
			break;
	}
	/* Applies deferred folder permissions and times, inside root only. */
	if (archive_write_close(out) != ARCHIVE_OK && !rc)
		rc = isc_err_set(err, ISC_EIO, "finishing %s: %s", dest, archive_error_string(out));
out:
	archive_read_free(in);
	archive_write_free(out);
	return rc;
}

int isc_unpack_fresh_dir(const char *parent, char **out, struct isc_err *err)
{
	char *path;

	*out = NULL;
	if (mkdir(parent, 0700) != 0 && errno != EEXIST)
		return isc_err_set(err, ISC_EIO, "cannot create %s: %s", parent, strerror(errno));
	if (asprintf(&path, "%s/.incoming-XXXXXX", parent) < 0)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	if (!mkdtemp(path)) {
		int e = errno;
		free(path);
		return isc_err_set(err, ISC_EIO, "cannot create a folder in %s: %s", parent,
		                   strerror(e));
	}
	*out = path;
	return 0;
}

static int remove_one(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
	(void)sb;
	(void)type;
	(void)ftw;
	return remove(path) != 0 && errno != ENOENT ? -1 : 0;
}

int isc_unpack_remove_tree(const char *path, struct isc_err *err)
{
	struct stat st;
	if (lstat(path, &st) != 0)
		return errno == ENOENT ? 0
		                       : isc_err_set(err, ISC_EIO, "%s: %s", path, strerror(errno));
	/* FTW_PHYS: a symbolic link is removed, never followed. */
	if (nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS) != 0)
		return isc_err_set(err, ISC_EIO, "cannot remove %s: %s", path, strerror(errno));
	return 0;
}

void isc_unpack_remove_leftovers(const char *parent)
{
	DIR *d = opendir(parent);
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d)) != NULL) {
		char *path;
		if (strncmp(de->d_name, ".incoming-", 10) != 0 ||
		    asprintf(&path, "%s/%s", parent, de->d_name) < 0)
			continue;
		isc_unpack_remove_tree(path, NULL);
		free(path);
	}
	closedir(d);
}

int isc_unpack_swap_into(const char *fresh, const char *parent, const char *const *names, size_t n,
                         unsigned which, struct isc_err *err)
{
	int rc = 0;

	for (size_t i = 0; i < n && !rc; i++) {
		char *src = NULL, *dst = NULL;
		struct stat st;
		if (!(which & (1u << i)))
			continue;
		if (asprintf(&src, "%s/%s", fresh, names[i]) < 0)
			src = NULL;
		if (asprintf(&dst, "%s/%s", parent, names[i]) < 0)
			dst = NULL;
		if (!src || !dst)
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		else if (lstat(src, &st) != 0 || !S_ISDIR(st.st_mode))
			; /* not in this sync: the previous copy stays */
		/* Atomic: a reader sees the old folder or the new one, never a mix or nothing. */
		else if (renameat2(AT_FDCWD, src, AT_FDCWD, dst, RENAME_EXCHANGE) != 0 &&
		         !(errno == ENOENT && rename(src, dst) == 0))
			rc = isc_err_set(err, ISC_EIO, "cannot move %s into place: %s", dst,
			                 strerror(errno));
		free(src);
		free(dst);
	}
	/* What is left in fresh: the replaced trees, and anything not asked for. */
	if (isc_unpack_remove_tree(fresh, rc ? NULL : err) && !rc)
		rc = ISC_EIO;
	return rc;
}
