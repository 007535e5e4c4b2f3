/*
 * The Control Plane's static files (api/web.h): a served name is flat and of a
 * known kind, opened under the folder without following links; everything
 * else (traversal, hidden names, links, folders, unknown kinds) is 404 and
 * never shows another file's bytes.
 */
#include "api/web.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char root[64], outside[96];

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static int setup(void **state)
{
	char p[160];
	(void)state;
	snprintf(root, sizeof(root), "/tmp/isc-web-test.XXXXXX");
	assert_non_null(mkdtemp(root));
	snprintf(p, sizeof(p), "%s/web", root);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/web/index.html", root);
	write_file(p, "<!doctype html><title>in</title>");
	snprintf(p, sizeof(p), "%s/web/app.js", root);
	write_file(p, "'use strict';");
	snprintf(p, sizeof(p), "%s/web/sub.html", root);
	assert_int_equal(mkdir(p, 0755), 0); /* a folder with a page's name */
	snprintf(outside, sizeof(outside), "%s/secret.html", root);
	write_file(outside, "SECRET");
	snprintf(p, sizeof(p), "%s/web/link.html", root);
	assert_int_equal(symlink(outside, p), 0);
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];
	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	return system(cmd) == 0 ? 0 : -1;
}

static struct isc_web *open_web(void)
{
	char p[96];
	snprintf(p, sizeof(p), "%s/web", root);
	struct isc_web *w = isc_web_new(p);
	assert_non_null(w);
	assert_true(isc_web_available(w));
	return w;
}

static void expect_status(struct isc_web *w, const char *path, int status)
{
	struct isc_web_reply r;
	isc_web_get(w, path, &r);
	if (r.status != status)
		fail_msg("%s: %d, wanted %d", path, r.status, status);
	if (r.body && status != 200)
		assert_null(strstr(r.body, "SECRET"));
	free(r.body);
}

static void test_serves_pages(void **state)
{
	struct isc_web *w = open_web();
	struct isc_web_reply r;
	(void)state;
	isc_web_get(w, "/", &r);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.content_type, "text/html; charset=utf-8");
	assert_int_equal(r.len, strlen("<!doctype html><title>in</title>"));
	assert_memory_equal(r.body, "<!doctype html><title>in</title>", r.len);
	free(r.body);
	isc_web_get(w, "/app.js", &r);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.content_type, "text/javascript; charset=utf-8");
	free(r.body);
	isc_web_free(w);
}

static void test_refuses_everything_else(void **state)
{
	static const char *const bad[] = {
	    "/../secret.html", "/..",        "/.",        "/.hidden.js",   "/a/../app.js",
	    "/web/app.js",     "/APP.JS",    "/app.JS",   "/app.js.html",  "/app",
	    "/app.exe",        "/link.html", "/sub.html", "/missing.html", "//app.js",
	    "/app.js/",        "app.js",     "",          "/x y.html",     "/%2e%2e/secret.html",
	};
	struct isc_web *w = open_web();
	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_status(w, bad[i], 404);
	expect_status(w, NULL, 404);
	isc_web_free(w);
}

static void test_missing_folder(void **state)
{
	struct isc_web *w = isc_web_new("/nonexistent/isc/web");
	struct isc_web_reply r;
	(void)state;
	assert_non_null(w);
	assert_false(isc_web_available(w));
	isc_web_get(w, "/", &r);
	assert_int_equal(r.status, 404);
	assert_non_null(strstr(r.body, "share/isc/web"));
	free(r.body);
	isc_web_free(w);
}

static void test_default_root_beside_binary(void **state)
{
	char *p = isc_web_default_root();
	(void)state;
	assert_non_null(p);
	assert_non_null(strstr(p, "/../share/isc/web"));
	free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_serves_pages),
	    cmocka_unit_test(test_refuses_everything_else),
	    cmocka_unit_test(test_missing_folder),
	    cmocka_unit_test(test_default_root_beside_binary),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
