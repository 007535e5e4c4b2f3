/*
 * Launch-file validation units, driven by data (run from the repository root):
 *   tests/launchfiles/bad/NAME.isc   must fail; its problems, printed, must equal
 *                                    NAME.expected line for line;
 *   tests/launchfiles/good/NAME.isc  must validate to the JSON in NAME.json;
 *   examples/NAME.isc                must validate.
 * Each file is its own test case. A few API cases follow (file size cap, problem
 * lists shared across files, JSON defaults).
 */
#include "common/buf.h"
#include "launchfile/launchfile.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *slurp(const char *path)
{
	char *text = NULL;
	size_t len;
	struct isc_err err;

	if (isc_launch_read_file(path, 4 * ISC_LAUNCH_MAX_FILE_BYTES, &text, &len, &err))
		fail_msg("%s", err.msg);
	return text;
}

/* Replaces the extension .isc of path with ext (into buf). */
static const char *sibling(const char *path, const char *ext, char *buf, size_t cap)
{
	size_t n = strlen(path) - 4;
	snprintf(buf, cap, "%.*s%s", (int)n, path, ext);
	return buf;
}

static void test_bad_file(void **state)
{
	const char *path = *state;
	struct isc_launch_problems probs;
	struct isc_launch *l = NULL;
	struct isc_err err;
	struct isc_buf got;
	char epath[4096];
	char *want;
	int rc;

	isc_launch_problems_init(&probs);
	isc_buf_init(&got, 0);
	rc = isc_launch_load(path, &l, &probs, &err);
	if (rc != ISC_EINVALID)
		fail_msg("%s: want invalid, got %d (%s)", path, rc, err.msg);
	assert_null(l);
	assert_true(probs.len > 0);
	assert_int_equal(isc_launch_problems_write(&probs, path, &got), 0);
	want = slurp(sibling(path, ".expected", epath, sizeof(epath)));
	if (strcmp(want, isc_buf_cstr(&got)) != 0)
		fail_msg("%s: problems differ\n--- want\n%s--- got\n%s", path, want,
		         isc_buf_cstr(&got));
	free(want);
	isc_buf_cleanup(&got);
	isc_launch_problems_cleanup(&probs);
}

static void test_good_file(void **state)
{
	const char *path = *state;
	struct isc_launch_problems probs;
	struct isc_launch *l = NULL;
	struct isc_err err;
	char jpath[4096];
	json_error_t jerr;
	json_t *want, *got;

	isc_launch_problems_init(&probs);
	if (isc_launch_load(path, &l, &probs, &err)) {
		isc_launch_problems_print(&probs, path, stderr);
		fail_msg("%s: %s", path, err.msg);
	}
	assert_int_equal(probs.len, 0);
	got = isc_launch_to_json(l);
	assert_non_null(got);
	sibling(path, ".json", jpath, sizeof(jpath));
	if (access(jpath, F_OK) == 0) {
		want = json_load_file(jpath, 0, &jerr);
		if (!want)
			fail_msg("%s: %s", jpath, jerr.text);
		if (!json_equal(want, got)) {
			char *g = json_dumps(got, JSON_INDENT(2));
			fail_msg("%s: normalized JSON differs; got\n%s", path, g);
		}
		json_decref(want);
	} else if (strncmp(path, "examples/", 9) != 0) {
		fail_msg("%s: missing %s", path, jpath);
	}
	json_decref(got);
	isc_launch_free(l);
	isc_launch_problems_cleanup(&probs);
}

static void test_read_file_cap(void **state)
{
	char path[] = "/tmp/isc-launchfile-XXXXXX";
	int fd = mkstemp(path);
	char *text = NULL, block[1024];
	struct isc_err err;
	size_t len;
	(void)state;

	assert_true(fd >= 0);
	memset(block, '#', sizeof(block));
	for (int i = 0; i < 1025; i++)
		assert_int_equal(write(fd, block, sizeof(block)), (ssize_t)sizeof(block));
	close(fd);
	assert_int_equal(isc_launch_read_file(path, 0, &text, &len, &err), ISC_EINVALID);
	assert_null(text);
	assert_non_null(strstr(err.msg, "larger than the limit of 1048576 bytes"));
	assert_int_equal(isc_launch_read_file(path, 2 * 1024 * 1024, &text, &len, &err), 0);
	assert_int_equal(len, 1025 * 1024);
	free(text);
	unlink(path);
	assert_int_equal(isc_launch_read_file("/nonexistent/x.isc", 0, &text, &len, &err), ISC_EIO);
	assert_non_null(strstr(err.msg, "/nonexistent/x.isc: cannot open"));
	assert_int_equal(isc_launch_read_file("/tmp", 0, &text, &len, &err), ISC_EINVALID);
}

static void test_problems_accumulate(void **state)
{
	const char *a = "gpus = 0\n", *b = "isc_project_id = \"p\"\nexperiment_name = \"e\"\n"
	                                   "gpus = 1\ncommand = \"c\"\nimage = 1\n";
	struct isc_launch_problems probs;
	struct isc_launch *l;
	struct isc_err err;
	(void)state;

	/* One list may collect the problems of several files; each call sorts only its own. */
	isc_launch_problems_init(&probs);
	assert_int_equal(isc_launch_parse("a.isc", a, strlen(a), &l, &probs, &err), ISC_EINVALID);
	assert_string_equal(err.msg, "a.isc: 4 problems in launch file");
	assert_int_equal(probs.len, 4);
	assert_int_equal(isc_launch_parse("b.isc", b, strlen(b), &l, &probs, &err), ISC_EINVALID);
	assert_string_equal(err.msg, "b.isc: 1 problem in launch file");
	assert_int_equal(probs.len, 5);
	assert_string_equal(probs.items[3].field, "gpus");
	assert_int_equal(probs.items[3].line, 1);
	assert_int_equal(probs.items[3].col, 8);
	assert_string_equal(probs.items[4].field, "image");
	isc_launch_problems_cleanup(&probs);
}

static void test_many_problems_bounded(void **state)
{
	struct isc_buf text;
	struct isc_launch_problems probs;
	struct isc_launch *l;
	struct isc_err err;
	(void)state;

	isc_buf_init(&text, 0);
	for (int i = 0; i < 500; i++)
		isc_buf_printf(&text, "unknown_%d = 1\n", i);
	isc_launch_problems_init(&probs);
	assert_int_equal(isc_launch_parse("m.isc", text.data, text.len, &l, &probs, &err),
	                 ISC_EINVALID);
	assert_int_equal(probs.len, 101);
	assert_string_equal(probs.items[100].field, "file");
	assert_non_null(strstr(probs.items[100].msg, "too many problems"));
	isc_launch_problems_cleanup(&probs);
	isc_buf_cleanup(&text);
}

static void test_defaults_and_modes(void **state)
{
	const char *t =
	    "isc_project_id = \"p\"\nexperiment_name = \"e\"\ngpus = 48\ncommand = \"c\"\n";
	struct isc_launch_problems probs;
	struct isc_launch *l = NULL;
	enum isc_compute_mode m;
	struct isc_err err;
	(void)state;

	isc_launch_problems_init(&probs);
	assert_int_equal(isc_launch_parse("d.isc", t, strlen(t), &l, &probs, &err), 0);
	assert_int_equal(l->compute_mode, ISC_MODE_CYCLE);
	assert_int_equal(l->max_rapid_cycles, 0);
	assert_null(l->image);
	assert_int_equal(l->dataset_ids.len, 0);
	assert_int_equal(l->gpus, 48);
	isc_launch_free(l);
	assert_int_equal(isc_compute_mode_parse("burst", &m), 0);
	assert_int_equal(m, ISC_MODE_BURST);
	assert_int_equal(isc_compute_mode_parse("spot", &m), ISC_EINVALID);
	assert_string_equal(isc_compute_mode_name(ISC_MODE_INTERRUPTIBLE), "interruptible");
	isc_launch_problems_cleanup(&probs);
}

/* isc burst's default: compute_mode appended only when the file sets none and parses. */
static void test_default_burst(void **state)
{
	static const char *const cases[][2] = {
	    {"gpus = 8\n", "gpus = 8\n\ncompute_mode = \"burst\"\n"},
	    {"gpus = 8\ncompute_mode = \"cycle\"\n", "gpus = 8\ncompute_mode = \"cycle\"\n"},
	    {"gpus = = 8\n", "gpus = = 8\n"},
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct isc_err err;
		char *text = strdup(cases[i][0]);
		size_t len = strlen(text);
		assert_non_null(text);
		isc_err_clear(&err);
		assert_int_equal(isc_launch_default_burst(&text, &len, &err), 0);
		assert_string_equal(text, cases[i][1]);
		assert_int_equal(len, strlen(cases[i][1]));
		free(text);
	}
}

int main(void)
{
	static const char *const patterns[] = {"tests/launchfiles/bad/*.isc",
	                                       "tests/launchfiles/good/*.isc", "examples/*.isc"};
	struct CMUnitTest *tests;
	glob_t g[3];
	size_t n = 0, nbad;
	int rc;

	for (size_t i = 0; i < 3; i++) {
		if (glob(patterns[i], 0, NULL, &g[i]) != 0) {
			fprintf(stderr, "no files match %s (run from the repository root)\n",
			        patterns[i]);
			return 1;
		}
		n += g[i].gl_pathc;
	}
	nbad = g[0].gl_pathc;
	if (nbad < 30) {
		fprintf(stderr, "only %zu malformed launch files; want at least 30\n", nbad);
		return 1;
	}
	tests = calloc(n + 5, sizeof(*tests));
	if (!tests)
		return 1;
	n = 0;
	for (size_t i = 0; i < 3; i++) {
		for (size_t k = 0; k < g[i].gl_pathc; k++) {
			tests[n].name = g[i].gl_pathv[k];
			tests[n].test_func = i == 0 ? test_bad_file : test_good_file;
			tests[n].initial_state = g[i].gl_pathv[k];
			n++;
		}
	}
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_read_file_cap);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_problems_accumulate);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_many_problems_bounded);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_defaults_and_modes);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_default_burst);
	rc = _cmocka_run_group_tests("launchfiles", tests, n, NULL, NULL);
	free(tests);
	for (size_t i = 0; i < 3; i++)
		globfree(&g[i]);
	return rc;
}
