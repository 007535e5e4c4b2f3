/*
 * The artifact unpacker against crafted archives: streams built here member by
 * member (with libarchive's writer, which writes whatever names and types it is
 * given, and one ustar header assembled byte by byte), the way a hostile node
 * could send them. Each check looks at the disk: nothing lands outside the
 * target folder, each refusal is reported, caps end the unpack.
 */
#include "artifacts/unpack.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <archive.h>
#include <archive_entry.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static char base[64];    /* per test: base/outside and base/home */
static char outside[96]; /* a folder the archive tries to reach */
static char home[96];    /* the experiment's artifact folder */

static const char *const tops[] = {"checkpoints", "crud", "lossy"};

static int setup(void **state)
{
	(void)state;
	snprintf(base, sizeof(base), "/tmp/isc-unpack-XXXXXX");
	if (!mkdtemp(base))
		return -1;
	snprintf(outside, sizeof(outside), "%s/outside", base);
	snprintf(home, sizeof(home), "%s/home", base);
	return mkdir(outside, 0700) || mkdir(home, 0700);
}

static int teardown(void **state)
{
	(void)state;
	return isc_unpack_remove_tree(base, NULL);
}

/* ---- building archives ---- */

struct member {
	const char *name;
	unsigned type; /* AE_IFREG, AE_IFDIR, AE_IFLNK, AE_IFCHR, ... */
	int perm;
	const char *data;     /* regular files */
	const char *link;     /* symlink target */
	const char *hardlink; /* hard link target */
};

struct mem {
	char *data;
	size_t len, pos, chunk;
};

static struct mem build(const struct member *m, size_t n)
{
	struct mem out = {malloc(4 << 20), 0, 0, 700};
	struct archive *a = archive_write_new();
	assert_non_null(out.data);
	archive_write_set_format_pax_restricted(a);
	archive_write_set_bytes_in_last_block(a, 1);
	assert_int_equal(archive_write_open_memory(a, out.data, 4 << 20, &out.len), ARCHIVE_OK);
	for (size_t i = 0; i < n; i++) {
		struct archive_entry *e = archive_entry_new();
		size_t len = m[i].data ? strlen(m[i].data) : 0;
		archive_entry_set_pathname(e, m[i].name);
		archive_entry_set_filetype(e, m[i].type);
		archive_entry_set_perm(e, m[i].perm ? m[i].perm : 0644);
		if (m[i].link)
			archive_entry_set_symlink(e, m[i].link);
		if (m[i].hardlink)
			archive_entry_set_hardlink(e, m[i].hardlink);
		if (m[i].type == AE_IFCHR)
			archive_entry_set_rdev(e, makedev(1, 3));
		archive_entry_set_size(e,
		                       m[i].type == AE_IFREG && !m[i].hardlink ? (int64_t)len : 0);
		assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
		if (len)
			assert_int_equal(archive_write_data(a, m[i].data, len), (ssize_t)len);
		archive_entry_free(e);
	}
	assert_int_equal(archive_write_close(a), ARCHIVE_OK);
	archive_write_free(a);
	return out;
}

/* Hands the stream out in small pieces, as the SSH channel would. */
static ssize_t mem_read(void *ctx, const void **buf, struct isc_err *err)
{
	struct mem *m = ctx;
	size_t n = m->len - m->pos < m->chunk ? m->len - m->pos : m->chunk;
	(void)err;
	*buf = m->data + m->pos;
	m->pos += n;
	return (ssize_t)n;
}

static ssize_t failing_read(void *ctx, const void **buf, struct isc_err *err)
{
	(void)ctx;
	(void)buf;
	return isc_err_set(err, ISC_ETRANSIENT, "connection lost");
}

static struct isc_unpack_limits limits(void)
{
	struct isc_unpack_limits l = {1 << 20, 1000, 0, tops, 3};
	return l;
}

/* Unpacks into a fresh folder of home; returns its path (caller frees). */
static char *unpack(struct mem *m, const struct isc_unpack_limits *l, struct isc_unpack_report *r,
                    int *rc, struct isc_err *err)
{
	char *fresh = NULL;
	assert_int_equal(isc_unpack_fresh_dir(home, &fresh, err), 0);
	*rc = isc_unpack_stream(mem_read, m, fresh, l, r, err);
	free(m->data);
	return fresh;
}

static int exists(const char *fmt, ...)
{
	char path[512];
	struct stat st;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	return lstat(path, &st) == 0;
}

static mode_t mode_of(const char *fmt, ...)
{
	char path[512];
	struct stat st;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	assert_int_equal(lstat(path, &st), 0);
	return st.st_mode;
}

static int outside_is_empty(void)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "test -z \"$(ls -A %s)\"", outside);
	return system(cmd) == 0;
}

/* ---- tests ---- */

static void test_honest_archive_lands_owner_only(void **state)
{
	struct member m[] = {
	    {"checkpoints/", AE_IFDIR, 0755, 0, 0, 0},
	    {"checkpoints/step-10.pt", AE_IFREG, 0644, "weights", 0, 0},
	    {"checkpoints/run.sh", AE_IFREG, 0755, "#!/bin/sh\n", 0, 0},
	    {"./lossy/", AE_IFDIR, 0777, 0, 0, 0},
	    {"./lossy/sub/metrics.csv", AE_IFREG, 0666, "a,b\n", 0, 0},
	};
	struct mem s = build(m, 5);
	struct isc_unpack_limits l = limits();
	struct isc_unpack_report r;
	struct isc_err err;
	int rc;
	char *fresh = unpack(&s, &l, &r, &rc, &err);
	(void)state;
	assert_int_equal(rc, 0);
	assert_int_equal(r.refused, 0);
	assert_int_equal(r.files, 3);
	assert_int_equal(r.bytes, 7 + 10 + 4);
	assert_int_equal(r.tops_seen, 1 | 4);
	assert_int_equal(mode_of("%s/checkpoints/step-10.pt", fresh) & 07777, 0600);
	assert_int_equal(mode_of("%s/checkpoints/run.sh", fresh) & 07777, 0700);
	assert_int_equal(mode_of("%s/lossy", fresh) & 07777, 0700);
	assert_int_equal(mode_of("%s/lossy/sub", fresh) & 07777, 0700);
	assert_true(exists("%s/lossy/sub/metrics.csv", fresh));
	/* Swapped into place: checkpoints and lossy arrived, crud was not in this sync. */
	assert_int_equal(isc_unpack_swap_into(fresh, home, tops, 3, r.tops_seen, &err), 0);
	assert_false(exists("%s", fresh));
	assert_true(exists("%s/checkpoints/step-10.pt", home));
	assert_true(exists("%s/lossy/sub/metrics.csv", home));
	assert_false(exists("%s/crud", home));
	free(fresh);
}

static void test_symlink_then_member_through_it(void **state)
{
	struct member m[] = {
	    {"checkpoints/", AE_IFDIR, 0755, 0, 0, 0},
	    {"checkpoints/escape", AE_IFLNK, 0777, 0, outside, 0},
	    {"checkpoints/escape/planted", AE_IFREG, 0644, "gotcha", 0, 0},
	    {"checkpoints/up", AE_IFLNK, 0777, 0, "../../../..", 0},
	    {"checkpoints/up/tmp/planted2", AE_IFREG, 0644, "gotcha", 0, 0},
	};
	struct mem s = build(m, 5);
	struct isc_unpack_limits l = limits();
	struct isc_unpack_report r;
	struct isc_err err;
	int rc;
	char *fresh = unpack(&s, &l, &r, &rc, &err);
	(void)state;
	assert_int_equal(rc, 0);
	assert_int_equal(r.refused, 2);
	assert_non_null(strstr(r.first_refused, "checkpoints/escape: a symbolic link"));
	assert_true(outside_is_empty());
	assert_false(exists("/tmp/planted2"));
	/* What came through is a plain folder of the fresh tree, not the link. */
	assert_true(S_ISDIR(mode_of("%s/checkpoints/escape", fresh)));
	assert_true(exists("%s/checkpoints/escape/planted", fresh));
	isc_unpack_remove_tree(fresh, NULL);
	free(fresh);
}

static void test_hard_links_are_refused(void **state)
{
	char target[160];
	struct member m[] = {
	    {"checkpoints/inside", AE_IFREG, 0644, "x", 0, 0},
	    {"checkpoints/to-passwd", AE_IFREG, 0644, 0, 0, "/etc/passwd"},
	    {"checkpoints/to-outside", AE_IFREG, 0644, 0, 0, target},
	    {"checkpoints/to-inside", AE_IFREG, 0644, 0, 0, "checkpoints/inside"},
	};
	struct isc_unpack_limits l = limits();
	struct isc_unpack_report r;
	struct isc_err err;
	struct stat st;
	struct mem s;
	int rc;
	char *fresh;
	(void)state;
	snprintf(target, sizeof(target), "%s/secret", outside);
	FILE *f = fopen(target, "w");
	fputs("secret", f);
	fclose(f);
	s = build(m, 4);
	fresh = unpack(&s, &l, &r, &rc, &err);
	assert_int_equal(rc, 0);
	assert_int_equal(r.refused, 3);
	assert_non_null(strstr(r.first_refused, "a hard link"));
	assert_false(exists("%s/checkpoints/to-passwd", fresh));
	assert_false(exists("%s/checkpoints/to-outside", fresh));
	assert_int_equal(stat(target, &st), 0);
	assert_int_equal(st.st_nlink, 1);
	isc_unpack_remove_tree(fresh, NULL);
	free(fresh);
}

static void test_dotdot_and_absolute_names(void **state)
{
	char abs_name[160];
	struct member m[] = {
	    {"../escaped", AE_IFREG, 0644, "x", 0, 0},
	    {"checkpoints/../../escaped2", AE_IFREG, 0644, "x", 0, 0},
	    {"checkpoints/a/../../../escaped3", AE_IFREG, 0644, "x", 0, 0},
	    {abs_name, AE_IFREG, 0644, "x", 0, 0},
	    {"etc/passwd", AE_IFREG, 0644, "x", 0, 0},
	    {"checkpoints/ok", AE_IFREG, 0644, "fine", 0, 0},
	};
	struct isc_unpack_limits l = limits();
	struct isc_unpack_report r;
	struct isc_err err;
	struct mem s;
	int rc;
	char *fresh;
	(void)state;
	snprintf(abs_name, sizeof(abs_name), "%s/absolute", outside);
	s = build(m, 6);
	fresh = unpack(&s, &l, &r, &rc, &err);
	assert_int_equal(rc, 0);
	assert_int_equal(r.refused, 5);
	assert_non_null(strstr(r.first_refused, "\"..\""));
	assert_int_equal(r.files, 1);
	assert_true(outside_is_empty());
	assert_false(exists("%s/escaped", home));
	assert_false(exists("%s/escaped2", base));
	assert_false(exists("%s/escaped3", base));
	assert_false(exists("%s/etc", fresh));
	assert_true(exists("%s/checkpoints/ok", fresh));
	isc_unpack_remove_tree(fresh, NULL);
	free(fresh);
}

static void test_devices_fifos_and_set_id_bits(void **state)
{
	struct member m[] = {
	    {"checkpoints/null", AE_IFCHR, 0666, 0, 0, 0},
	    {"checkpoints/pipe", AE_IFIFO, 0666, 0, 0, 0},
	    {"checkpoints/suid", AE_IFREG, 04755, "#!/bin/sh\n", 0, 0},
	    {"checkpoints/sgid-dir/", AE_IFDIR, 02777, 0, 0, 0},
	};
	struct mem s = build(m, 4);
	struct isc_unpack_limits l = limits();
	struct isc_unpack_report r;
	struct isc_err err;
	int rc;
	char *fresh = unpack(&s, &l, &r, &rc, &err);
	(void)state;
	assert_int_equal(rc, 0);
	assert_int_equal(r.refused, 2);
	assert_non_null(strstr(r.first_refused, "a device"));
	assert_false(exists("%s/checkpoints/null", fresh));
	assert_false(exists("%s/checkpoints/pipe", fresh));
	assert_int_equal(r.stripped, 2);
	assert_int_equal(mode_of("%s/checkpoints/suid", fresh) & 07777, 0700);
	assert_int_equal(mode_of("%s/checkpoints/sgid-dir", fresh) & 07777, 0700);
	isc_unpack_remove_tree(fresh, NULL);
	free(fresh);
}

static void test_entry_cap(void **state)
{
	struct member m[300];
	char names[300][32];
	struct isc_unpack_limits l = limits();
	struct isc_unpack_report r;
	struct isc_err err;
	struct mem s;
	int rc;
	char *fresh;
	(void)state;
	for (int i = 0; i < 300; i++) {
		snprintf(names[i], sizeof(names[i]), "lossy/f%d", i);
		m[i] = (struct member){names[i], AE_IFREG, 0644, "", 0, 0};
	}
	s = build(m, 300);
	l.max_entries = 100;
	fresh = unpack(&s, &l, &r, &rc, &err);
	assert_int_equal(rc, ISC_EINVALID);
	assert_non_null(strstr(err.msg, "more than 100 members"));
	/* The unpack stopped at the cap, and the previous copy is what stays. */
	assert_int_equal(r.files, 100);
	isc_unpack_remove_tree(fresh, NULL);
	free(fresh);
}

static void test_byte_cap(void **state)
{
	static char big[3000];
	struct member m[] = {
	    {"crud/a", AE_IFREG, 0644, big, 0, 0},
	    {"crud/b", AE_IFREG, 0644, big, 0, 0},
	};
	struct isc_unpack_limits l = limits();
	struct isc_unpack_report r;
	struct isc_err err;
	struct mem s;
	int rc;
	char *fresh;
	(void)state;
	memset(big, 'x', sizeof(big) - 1);
	s = build(m, 2);
	l.max_bytes = 5000;
	fresh = unpack(&s, &l, &r, &rc, &err);
	assert_int_equal(rc, ISC_EINVALID);
	assert_non_null(strstr(err.msg, "more than 5000 bytes"));
	assert_non_null(strstr(err.msg, "crud/b"));
	assert_false(exists("%s/crud/b", fresh));
	isc_unpack_remove_tree(fresh, NULL);
	free(fresh);
}

static void test_disk_reserve(void **state)
{
	struct member m[] = {{"crud/a", AE_IFREG, 0644, "data", 0, 0}};
	struct mem s = build(m, 1);
	struct isc_unpack_limits l = limits();
	struct isc_unpack_report r;
	struct isc_err err;
	int rc;
	char *fresh;
	(void)state;
	l.min_free_bytes = UINT64_C(1) << 62; /* more than any disk has */
	fresh = unpack(&s, &l, &r, &rc, &err);
	assert_int_equal(rc, ISC_EIO);
	assert_non_null(strstr(err.msg, "nearly full"));
	isc_unpack_remove_tree(fresh, NULL);
	free(fresh);
}

static void test_only_the_folders_asked_for(void **state)
{
	struct member m[] = {
	    {"checkpoints/a", AE_IFREG, 0644, "x", 0, 0},
	    {"lossy/b", AE_IFREG, 0644, "x", 0, 0},
	};
	struct mem s = build(m, 2);
	struct isc_unpack_limits l = limits();
	struct isc_unpack_report r;
	struct isc_err err;
	int rc;
	char *fresh;
	(void)state;
	l.n_tops = 1; /* checkpoints only */
	fresh = unpack(&s, &l, &r, &rc, &err);
	assert_int_equal(rc, 0);
	assert_int_equal(r.refused, 1);
	assert_non_null(strstr(r.first_refused, "lossy/b: outside the artifact folders"));
	isc_unpack_remove_tree(fresh, NULL);
	free(fresh);
}

/* A ustar header written byte by byte: no tar program would produce this name. */
static void ustar_header(char h[512], const char *name, char type, size_t size)
{
	unsigned sum = 0;
	memset(h, 0, 512);
	snprintf(h, 100, "%s", name);
	snprintf(h + 100, 8, "%07o", 0644);
	snprintf(h + 108, 8, "%07o", 0);
	snprintf(h + 116, 8, "%07o", 0);
	snprintf(h + 124, 12, "%011zo", size);
	snprintf(h + 136, 12, "%011o", 0);
	h[156] = type;
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	memset(h + 148, ' ', 8);
	for (int i = 0; i < 512; i++)
		sum += (unsigned char)h[i];
	snprintf(h + 148, 8, "%06o", sum);
}

static void test_hand_made_header(void **state)
{
	struct mem s = {calloc(1, 512 * 6), 512 * 6, 0, 512};
	struct isc_unpack_limits l = limits();
	struct isc_unpack_report r;
	struct isc_err err;
	int rc;
	char *fresh;
	(void)state;
	ustar_header(s.data, "checkpoints/../../../../tmp/isc-raw-escape", '0', 5);
	memcpy(s.data + 512, "boom\n", 5);
	ustar_header(s.data + 1024, "checkpoints/fine", '0', 5);
	memcpy(s.data + 1536, "fine\n", 5);
	fresh = unpack(&s, &l, &r, &rc, &err);
	assert_int_equal(rc, 0);
	assert_int_equal(r.refused, 1);
	assert_false(exists("/tmp/isc-raw-escape"));
	assert_true(exists("%s/checkpoints/fine", fresh));
	isc_unpack_remove_tree(fresh, NULL);
	free(fresh);
}

static void test_garbage_and_broken_streams(void **state)
{
	struct mem s = {malloc(4096), 4096, 0, 4096};
	struct isc_unpack_limits l = limits();
	struct isc_unpack_report r;
	struct isc_err err;
	char *fresh = NULL;
	int rc;
	(void)state;
	memset(s.data, 'A', 4096);
	fresh = unpack(&s, &l, &r, &rc, &err);
	assert_int_equal(rc, ISC_EINVALID);
	isc_unpack_remove_tree(fresh, NULL);
	free(fresh);
	/* The reader's own failure (a lost connection) keeps its code and message. */
	assert_int_equal(isc_unpack_fresh_dir(home, &fresh, &err), 0);
	rc = isc_unpack_stream(failing_read, NULL, fresh, &l, &r, &err);
	assert_int_equal(rc, ISC_ETRANSIENT);
	assert_non_null(strstr(err.msg, "connection lost"));
	isc_unpack_remove_tree(fresh, NULL);
	free(fresh);
}

/* The swap replaces a folder whole; a reader never sees a mix of two syncs. */
static void test_swap_replaces_whole_folders(void **state)
{
	struct member first[] = {{"checkpoints/old", AE_IFREG, 0644, "1", 0, 0},
	                         {"crud/keep", AE_IFREG, 0644, "1", 0, 0}};
	struct member second[] = {{"checkpoints/new", AE_IFREG, 0644, "2", 0, 0}};
	struct isc_unpack_limits l = limits();
	struct isc_unpack_report r;
	struct isc_err err;
	struct mem s;
	int rc;
	char *fresh;
	(void)state;
	s = build(first, 2);
	fresh = unpack(&s, &l, &r, &rc, &err);
	assert_int_equal(rc, 0);
	assert_int_equal(isc_unpack_swap_into(fresh, home, tops, 3, 1 | 2, &err), 0);
	free(fresh);
	s = build(second, 1);
	fresh = unpack(&s, &l, &r, &rc, &err);
	assert_int_equal(rc, 0);
	assert_int_equal(isc_unpack_swap_into(fresh, home, tops, 3, 1 | 2, &err), 0);
	free(fresh);
	assert_true(exists("%s/checkpoints/new", home));
	assert_false(exists("%s/checkpoints/old", home));
	assert_true(exists("%s/crud/keep", home)); /* crud did not arrive: kept */
	{
		char cmd[256];
		snprintf(cmd, sizeof(cmd), "test $(ls -A %s | grep -c incoming) = 0", home);
		assert_int_equal(system(cmd), 0);
	}
	/* What a crash mid-unpack leaves is removed before the next one. */
	assert_int_equal(isc_unpack_fresh_dir(home, &fresh, &err), 0);
	{
		char inner[300];
		snprintf(inner, sizeof(inner), "%s/checkpoints", fresh);
		assert_int_equal(mkdir(inner, 0700), 0);
	}
	isc_unpack_remove_leftovers(home);
	assert_false(exists("%s", fresh));
	assert_true(exists("%s/checkpoints/new", home));
	free(fresh);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_honest_archive_lands_owner_only, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_symlink_then_member_through_it, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hard_links_are_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_dotdot_and_absolute_names, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_devices_fifos_and_set_id_bits, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_entry_cap, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_byte_cap, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_disk_reserve, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_only_the_folders_asked_for, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hand_made_header, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_garbage_and_broken_streams, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_swap_replaces_whole_folders, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
