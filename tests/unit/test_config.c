/*
 * config.toml's bounds of the image's pull (issue 46: a node in its pull stage is
 * not dead): image_pull_stall_ms and image_pull_max_ms have their defaults, take
 * values in range, and refuse others with the key's name and its range; isc init's
 * template lists them with their defaults.
 */
#include "config/config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char home[64];

static void write_config(const char *text)
{
	char path[128];
	FILE *f;
	snprintf(path, sizeof(path), "%s/config.toml", home);
	assert_non_null(f = fopen(path, "w"));
	fputs(text, f);
	fclose(f);
}

static int setup(void **state)
{
	(void)state;
	snprintf(home, sizeof(home), "/tmp/isc-config-test.XXXXXX");
	return mkdtemp(home) ? 0 : -1;
}

static int teardown(void **state)
{
	char path[128];
	(void)state;
	snprintf(path, sizeof(path), "%s/config.toml", home);
	unlink(path);
	rmdir(home);
	return 0;
}

static void test_pull_defaults(void **state)
{
	struct isc_config *c = NULL;
	struct isc_err err;
	(void)state;
	write_config("broker_id = \"b\"\n");
	assert_int_equal(isc_config_load(home, &c, &err), 0);
	assert_int_equal(c->image_pull_stall_ms, 120000);
	assert_int_equal(c->image_pull_max_ms, 3600000);
	/* The rest of the boot keeps its own bound. */
	assert_int_equal(c->command_timeout_ms, 600000);
	isc_config_free(c);
}

static void test_pull_values_in_range(void **state)
{
	struct isc_config *c = NULL;
	struct isc_err err;
	(void)state;
	write_config("broker_id = \"b\"\nimage_pull_stall_ms = 3000\n"
	             "image_pull_max_ms = 7200000\ncommand_timeout_ms = 5000\n");
	assert_int_equal(isc_config_load(home, &c, &err), 0);
	assert_int_equal(c->image_pull_stall_ms, 3000);
	assert_int_equal(c->image_pull_max_ms, 7200000);
	assert_int_equal(c->command_timeout_ms, 5000);
	isc_config_free(c);
	/* The ends of the ranges are allowed. */
	write_config("image_pull_stall_ms = 1000\nimage_pull_max_ms = 10000\n");
	assert_int_equal(isc_config_load(home, &c, &err), 0);
	assert_int_equal(c->image_pull_stall_ms, 1000);
	assert_int_equal(c->image_pull_max_ms, 10000);
	isc_config_free(c);
	write_config("image_pull_stall_ms = 3600000\nimage_pull_max_ms = 86400000\n");
	assert_int_equal(isc_config_load(home, &c, &err), 0);
	isc_config_free(c);
}

/* Each bad value: refused, and the message names the key and its range. */
static void refused(const char *text, const char *key, const char *range)
{
	struct isc_config *c = NULL;
	struct isc_err err;
	write_config(text);
	assert_int_equal(isc_config_load(home, &c, &err), ISC_EINVALID);
	assert_null(c);
	if (!strstr(err.msg, key) || !strstr(err.msg, range))
		fail_msg("'%s': the message lacks %s or %s: %s", text, key, range, err.msg);
}

static void test_pull_values_out_of_range(void **state)
{
	(void)state;
	refused("image_pull_stall_ms = 999\n", "image_pull_stall_ms", "from 1000 to 3600000");
	refused("image_pull_stall_ms = 0\n", "image_pull_stall_ms", "from 1000 to 3600000");
	refused("image_pull_stall_ms = 3600001\n", "image_pull_stall_ms", "from 1000 to 3600000");
	refused("image_pull_stall_ms = -5\n", "image_pull_stall_ms", "from 1000 to 3600000");
	refused("image_pull_stall_ms = \"120s\"\n", "image_pull_stall_ms", "integer");
	refused("image_pull_max_ms = 9999\n", "image_pull_max_ms", "from 10000 to 86400000");
	refused("image_pull_max_ms = 86400001\n", "image_pull_max_ms", "from 10000 to 86400000");
	refused("image_pull_max_ms = 1.5\n", "image_pull_max_ms", "integer");
}

static void test_template_lists_the_pull_keys(void **state)
{
	struct isc_config *c = NULL;
	struct isc_err err;
	char path[128], text[65536];
	size_t n;
	FILE *f;
	(void)state;
	assert_int_equal(isc_config_write_default(home, &err), 0);
	snprintf(path, sizeof(path), "%s/config.toml", home);
	assert_non_null(f = fopen(path, "r"));
	n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	assert_non_null(strstr(text, "image_pull_stall_ms = 120000"));
	assert_non_null(strstr(text, "image_pull_max_ms = 3600000"));
	/* What isc init writes loads, with the defaults. */
	assert_int_equal(isc_config_load(home, &c, &err), 0);
	assert_int_equal(c->image_pull_stall_ms, 120000);
	isc_config_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_pull_defaults, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_pull_values_in_range, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_pull_values_out_of_range, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_template_lists_the_pull_keys, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
