/*
 * Replica identity (issue 48, docs/ha.md "Store outages, replica identity and
 * clocks"): the store records the broker_id its replicas run with and a shared
 * store refuses another, naming both and docs/ha.md; a replica's row carries its
 * host's boot id and its broker_id beside host and pid; only a replica of this
 * very host (name and boot id) whose pid is gone is dead for sure. Runs on
 * SQLite, and on PostgreSQL under ISC_TEST_PG_DIR (tests/unit/store_fixture.c).
 */
#include "store/store_replicas.h"
#include "tests/unit/store_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define LEASE 8000

static int setup(void **state)
{
	*state = store_fixture_new("identity");
	return 0;
}

static int teardown(void **state)
{
	store_fixture_free(*state);
	return 0;
}

static void test_broker_id_recorded_and_refused(void **state)
{
	struct store_fixture *f = *state;
	struct isc_err err;
	char *had = NULL;

	/* The first replica records its own. */
	assert_int_equal(isc_store_broker_id_check(f->s, "isc-aaaa", "rep_1", 1, &had, &err), 0);
	assert_string_equal(had, "");
	free(had);
	/* The same one again, from another replica: accepted. */
	assert_int_equal(isc_store_broker_id_check(f->s, "isc-aaaa", "rep_2", 1, &had, &err), 0);
	assert_string_equal(had, "isc-aaaa");
	free(had);
	/* Another, on a shared store with a replica of the first registered: refused, naming
	 * both, who recorded it and docs/ha.md. */
	assert_int_equal(
	    isc_store_replica_register_as(f->s, "rep_1", "host-1", 41, "boot-1", "isc-aaaa", &err),
	    0);
	assert_int_equal(isc_store_broker_id_check(f->s, "isc-bbbb", "rep_3", 1, &had, &err),
	                 ISC_ECONFLICT);
	assert_null(had);
	assert_non_null(strstr(err.msg, "isc-aaaa"));
	assert_non_null(strstr(err.msg, "isc-bbbb"));
	assert_non_null(strstr(err.msg, "rep_1"));
	assert_non_null(strstr(err.msg, "docs/ha.md"));
	/* Refused, it changed nothing. */
	assert_int_equal(isc_store_broker_id_check(f->s, "isc-aaaa", "rep_4", 1, NULL, &err), 0);
	/* Not enforced (one iscd on SQLite, its operator changed config.toml): recorded. */
	assert_int_equal(isc_store_broker_id_check(f->s, "isc-cccc", "rep_5", 0, &had, &err), 0);
	assert_string_equal(had, "isc-aaaa");
	free(had);
	assert_int_equal(isc_store_broker_id_check(f->s, "isc-aaaa", "rep_6", 1, NULL, &err),
	                 ISC_ECONFLICT);
	assert_non_null(strstr(err.msg, "isc-cccc"));
	/* Nothing of the recorded id left (its replicas stopped cleanly, no cluster open): a
	 * new one is recorded, even on a shared store. */
	assert_int_equal(isc_store_replica_remove(f->s, "rep_1", &err), 0);
	assert_int_equal(isc_store_broker_id_check(f->s, "isc-dddd", "rep_7", 1, &had, &err), 0);
	assert_string_equal(had, "isc-cccc");
	free(had);
	/* ... and then holds as the first did. */
	assert_int_equal(
	    isc_store_replica_register_as(f->s, "rep_7", "host-1", 47, "boot-1", "isc-dddd", &err),
	    0);
	assert_int_equal(isc_store_broker_id_check(f->s, "isc-aaaa", "rep_8", 1, NULL, &err),
	                 ISC_ECONFLICT);
	assert_non_null(strstr(err.msg, "isc-dddd"));
}

static void test_replica_row_carries_boot_and_broker(void **state)
{
	struct store_fixture *f = *state;
	struct isc_replica *r;
	struct isc_err err;
	size_t n;

	assert_int_equal(
	    isc_store_replica_register_as(f->s, "rep_x", "host-1", 42, "boot-1", "isc-aaaa", &err),
	    0);
	assert_int_equal(isc_store_replica_register(f->s, "rep_y", "host-2", 43, &err), 0);
	assert_int_equal(isc_store_replica_list_live(f->s, LEASE, &r, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_string_equal(r[0].id, "rep_x");
	assert_string_equal(r[0].boot_id, "boot-1");
	assert_string_equal(r[0].broker_id, "isc-aaaa");
	assert_string_equal(r[1].boot_id, "");
	assert_string_equal(r[1].broker_id, "");
	isc_replica_list_free(r, n);
}

/* A pid that is gone: a child that has exited and been reaped. */
static pid_t gone_pid(void)
{
	pid_t p = fork();
	int status;

	assert_true(p >= 0);
	if (p == 0)
		_exit(0);
	assert_int_equal(waitpid(p, &status, 0), p);
	return p;
}

static void test_dead_here_needs_host_and_boot(void **state)
{
	char boot[64];
	pid_t dead = gone_pid();
	struct isc_replica r = {.host = "h1", .boot_id = "b1", .pid = dead};

	(void)state;
	isc_replica_boot_id(boot, sizeof(boot));
	assert_true(strlen(boot) >= 32); /* Linux: a UUID */
	assert_int_equal(isc_replica_dead_here(&r, "h1", "b1"), 1);
	/* Another host of the same name (another boot id), or this one before a reboot. */
	assert_int_equal(isc_replica_dead_here(&r, "h1", "b2"), 0);
	/* Another host name. */
	assert_int_equal(isc_replica_dead_here(&r, "h2", "b1"), 0);
	/* A row of an iscd that recorded no boot id: left to its lease. */
	r.boot_id = "";
	assert_int_equal(isc_replica_dead_here(&r, "h1", ""), 0);
	assert_int_equal(isc_replica_dead_here(&r, "h1", "b1"), 0);
	/* A live pid (this process, and its parent) is never dead. */
	r.boot_id = "b1";
	r.pid = getpid();
	assert_int_equal(isc_replica_dead_here(&r, "h1", "b1"), 0);
	r.pid = getppid();
	assert_int_equal(isc_replica_dead_here(&r, "h1", "b1"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_broker_id_recorded_and_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_replica_row_carries_boot_and_broker, setup,
	                                    teardown),
	    cmocka_unit_test(test_dead_here_needs_host_and_boot),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
