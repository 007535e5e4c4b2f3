/*
 * A fresh store for one unit test: a new temporary folder with a store created and
 * migrated at its home/, and the folder removed with everything in it afterwards.
 * Tests whose fixture needs more (organisations, a master key's path) keep it in their
 * own struct beside this one.
 */
#ifndef ISC_TESTS_UNIT_STORE_FIXTURE_H
#define ISC_TESTS_UNIT_STORE_FIXTURE_H

#include "store/store.h"

#include <stddef.h>

struct store_fixture {
	char dir[64];        /* the temporary folder, /tmp/isc-NAME-XXXXXX */
	char *home;          /* DIR/home, the store's home (owned) */
	struct isc_store *s; /* the open store, or NULL once a test has freed it */
};

/*
 * Makes the folder /tmp/isc-NAME-XXXXXX (NAME says which test left it, should it stay)
 * and opens a new store at its home/. Any failure fails the running test.
 */
void store_fixture_init(struct store_fixture *t, const char *name);
/* The same with the store migrated only up to schema version `version` (a migration's
 * test builds the old schema, writes to it, then opens it again to migrate). */
void store_fixture_init_at(struct store_fixture *t, const char *name, size_t version);

/* Frees the store (when open) and the home's path, and removes the folder. */
void store_fixture_cleanup(struct store_fixture *t);

/* The same on the heap, for a test whose cmocka state is the fixture itself. */
struct store_fixture *store_fixture_new(const char *name);
void store_fixture_free(struct store_fixture *t);

#endif
