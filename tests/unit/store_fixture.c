/* The unit tests' temporary store (see store_fixture.h). */
#include "tests/unit/store_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>

void store_fixture_init(struct store_fixture *t, const char *name)
{
	struct isc_err err;

	snprintf(t->dir, sizeof(t->dir), "/tmp/isc-%s-XXXXXX", name);
	assert_non_null(mkdtemp(t->dir));
	assert_int_not_equal(asprintf(&t->home, "%s/home", t->dir), -1);
	if (isc_store_open(t->home, 1, &t->s, &err))
		fail_msg("isc_store_open %s: %s", t->home, err.msg);
}

void store_fixture_cleanup(struct store_fixture *t)
{
	char *cmd;

	isc_store_free(t->s);
	t->s = NULL;
	/* rm -rf: the store leaves its database, journal and keys in the home. */
	if (asprintf(&cmd, "rm -rf '%s'", t->dir) >= 0) {
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", t->dir);
		free(cmd);
	}
	free(t->home);
	t->home = NULL;
}

struct store_fixture *store_fixture_new(const char *name)
{
	struct store_fixture *t = calloc(1, sizeof(*t));
	assert_non_null(t);
	store_fixture_init(t, name);
	return t;
}

void store_fixture_free(struct store_fixture *t)
{
	if (!t)
		return;
	store_fixture_cleanup(t);
	free(t);
}
