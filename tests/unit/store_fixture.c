/* The unit tests' temporary store (see store_fixture.h). */
#include "tests/unit/store_fixture.h"
#include "store/store_int.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * With ISC_TEST_PG_DIR (a server of tests/pg/pg-server), each temporary store
 * is a new PostgreSQL database named after its folder, so the unit tests run
 * on both stores (tests/run-all runs them once more so).
 */
static void use_pg_database(const struct store_fixture *t)
{
	const char *pg = getenv("ISC_TEST_PG_DIR");
	char *cmd, url[512] = "", name[64];
	const char *leaf = strrchr(t->dir, '/') + 1;
	size_t k = 0;
	FILE *p;

	if (!pg || !*pg)
		return;
	for (const char *c = leaf; *c && k < sizeof(name) - 1; c++)
		name[k++] = (char)(isalnum((unsigned char)*c) ? tolower((unsigned char)*c) : '_');
	name[k] = 0;
	assert_int_not_equal(asprintf(&cmd, "tests/pg/pg-server createdb '%s' '%s'", pg, name), -1);
	p = popen(cmd, "r");
	free(cmd);
	assert_non_null(p);
	if (!fgets(url, sizeof(url), p))
		url[0] = 0;
	if (pclose(p) != 0 || !url[0])
		fail_msg("could not make database %s on the server in %s", name, pg);
	url[strcspn(url, "\n")] = 0;
	assert_int_equal(setenv("ISC_STORE_URL", url, 1), 0);
}

void store_fixture_init_at(struct store_fixture *t, const char *name, size_t version)
{
	struct isc_err err;

	snprintf(t->dir, sizeof(t->dir), "/tmp/isc-%s-XXXXXX", name);
	assert_non_null(mkdtemp(t->dir));
	assert_int_not_equal(asprintf(&t->home, "%s/home", t->dir), -1);
	use_pg_database(t);
	if (isc_store_open_at(t->home, 1, version, &t->s, &err))
		fail_msg("isc_store_open %s: %s", t->home, err.msg);
}

void store_fixture_init(struct store_fixture *t, const char *name)
{
	store_fixture_init_at(t, name, isc_store_migration_count());
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
