/*
 * Shell quoting: every value that reaches a remote shell must come out of
 * /bin/sh byte for byte, whatever it holds (quotes, $(), backticks, newlines,
 * semicolons, globs, every byte 1..255). Checked by a real round trip through
 * `/bin/sh -c "printf %s QUOTED"`, plus the docker container names.
 */
#include "common/buf.h"
#include "launcher/launcher.h"
#include "launcher/shellquote.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Runs `printf %s QUOTED` under /bin/sh and returns what it printed (caller frees). */
static char *round_trip(const char *value, const char *shell_prefix)
{
	struct isc_buf cmd, q, out;
	char chunk[4096];
	size_t got;
	FILE *p;

	isc_buf_init(&cmd, 0);
	isc_buf_init(&q, 0);
	isc_buf_init(&out, 0);
	assert_int_equal(isc_shell_quote(&q, value), 0);
	/* A second level: the quoted command itself quoted again for `sh -c`, as over ssh. */
	if (shell_prefix) {
		struct isc_buf inner;
		isc_buf_init(&inner, 0);
		isc_buf_printf(&inner, "printf %%s %s", isc_buf_cstr(&q));
		isc_buf_printf(&cmd, "%s ", shell_prefix);
		isc_shell_quote(&cmd, isc_buf_cstr(&inner));
		isc_buf_cleanup(&inner);
	} else {
		isc_buf_printf(&cmd, "printf %%s %s", isc_buf_cstr(&q));
	}
	p = popen(isc_buf_cstr(&cmd), "r");
	assert_non_null(p);
	while ((got = fread(chunk, 1, sizeof(chunk), p)) > 0)
		isc_buf_append(&out, chunk, got);
	assert_int_equal(pclose(p), 0);
	isc_buf_cleanup(&cmd);
	isc_buf_cleanup(&q);
	return isc_buf_detach(&out) ?: strdup("");
}

static const char *const hostile[] = {
    "plain",
    "",
    "it's",
    "''",
    "'",
    "x'; touch /tmp/isc-pwned-quote; echo '",
    "$(touch /tmp/isc-pwned-sub)",
    "`touch /tmp/isc-pwned-bt`",
    "a\nb\n",
    "a; rm -rf /tmp/isc-never-there",
    "\"\\'\\\\",
    "$HOME ${PATH} $((1+1)) *  ? [a] ~root",
    "a && b || c | d > /tmp/isc-pwned-redir < /etc/passwd &",
    "\t leading and trailing spaces \t",
    "-n",
    "%s %d %%",
    "back\\slash at end\\",
};

static void assert_not_pwned(void)
{
	assert_int_not_equal(access("/tmp/isc-pwned-quote", F_OK), 0);
	assert_int_not_equal(access("/tmp/isc-pwned-sub", F_OK), 0);
	assert_int_not_equal(access("/tmp/isc-pwned-bt", F_OK), 0);
	assert_int_not_equal(access("/tmp/isc-pwned-redir", F_OK), 0);
}

static void test_hostile_strings_round_trip(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(hostile) / sizeof(hostile[0]); i++) {
		char *got = round_trip(hostile[i], NULL);
		assert_string_equal(got, hostile[i]);
		free(got);
	}
	assert_not_pwned();
}

/* Quoted twice, as a command that is itself an argument of `sh -c` (bash -lc COMMAND). */
static void test_nested_quoting_round_trip(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(hostile) / sizeof(hostile[0]); i++) {
		char *got = round_trip(hostile[i], "/bin/sh -c");
		assert_string_equal(got, hostile[i]);
		free(got);
	}
	assert_not_pwned();
}

static void test_every_byte_round_trips(void **state)
{
	char all[256];
	char *got;
	(void)state;
	for (int i = 1; i < 256; i++)
		all[i - 1] = (char)i;
	all[255] = '\0';
	got = round_trip(all, NULL);
	assert_memory_equal(got, all, 256);
	free(got);
}

static void test_quote_shape(void **state)
{
	struct isc_buf b;
	(void)state;
	isc_buf_init(&b, 0);
	isc_shell_quote(&b, "it's");
	assert_string_equal(isc_buf_cstr(&b), "'it'\\''s'");
	isc_buf_reset(&b);
	isc_shell_quote(&b, "");
	assert_string_equal(isc_buf_cstr(&b), "''");
	isc_buf_cleanup(&b);
	/* A bounded buffer refuses rather than truncating a quote open. */
	isc_buf_init(&b, 4);
	assert_int_not_equal(isc_shell_quote(&b, "abcdef"), 0);
	isc_buf_cleanup(&b);
}

static void test_container_names_are_sanitised(void **state)
{
	char *name;
	(void)state;
	name = isc_launcher_container_name("exp_0123abcd", 3);
	assert_string_equal(name, "isc-exp_0123abcd-r3");
	free(name);
	name = isc_launcher_container_name("x'; rm -rf / #$(id)`id`\n", 0);
	for (const char *p = name; *p; p++)
		assert_non_null(strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		                       "0123456789_.-",
		                       *p));
	assert_string_equal(name, "isc-x___rm_-rf______id__id__-r0");
	free(name);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_quote_shape),
	    cmocka_unit_test(test_hostile_strings_round_trip),
	    cmocka_unit_test(test_nested_quoting_round_trip),
	    cmocka_unit_test(test_every_byte_round_trips),
	    cmocka_unit_test(test_container_names_are_sanitised),
	};
	return cmocka_run_group_tests_name("shellquote", tests, NULL, NULL);
}
