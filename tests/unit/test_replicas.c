/*
 * Replicas and leases (store/store_replicas.h): registration and liveness, a
 * claim held by one replica only, a takeover once the lease expired (a new
 * token, naming whose it was), renewal of only what is still held, release,
 * and what a replica's removal frees. Two store connections play two replicas.
 * An expired lease is made by claiming it for a negative time (its expiry is
 * already past by the store's clock), so nothing sleeps. Runs on SQLite, and on
 * PostgreSQL too under ISC_TEST_PG_DIR (tests/unit/store_fixture.c).
 */
#include "store/store_int.h"
#include "store/store_replicas.h"
#include "tests/unit/store_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#define LEASE 8000

struct two {
	struct store_fixture *f;
	struct isc_store *a, *b; /* replica A's and B's connections */
};

static int setup(void **state)
{
	struct two *t = calloc(1, sizeof(*t));
	struct isc_err err;
	assert_non_null(t);
	t->f = store_fixture_new("replicas");
	t->a = t->f->s;
	if (isc_store_open(t->f->home, 0, &t->b, &err))
		fail_msg("second connection: %s", err.msg);
	*state = t;
	return 0;
}

static int teardown(void **state)
{
	struct two *t = *state;
	isc_store_free(t->b);
	store_fixture_free(t->f);
	free(t);
	return 0;
}

static void reg(struct isc_store *s, const char *id, int64_t pid)
{
	struct isc_err err;
	if (isc_store_replica_register(s, id, "host-1", pid, &err))
		fail_msg("register %s: %s", id, err.msg);
}

/* Claims and checks whether it is held; returns the token (owned) or NULL. */
static char *claim(struct isc_store *s, const char *exp, const char *rep, int64_t lease_ms,
                   int want_held, char **from)
{
	struct isc_err err;
	char *token = NULL;
	int held = -1;
	if (isc_store_lease_claim(s, exp, rep, lease_ms, &held, &token, from, &err))
		fail_msg("claim %s by %s: %s", exp, rep, err.msg);
	assert_int_equal(held, want_held);
	if (want_held)
		assert_non_null(token);
	else
		assert_null(token);
	return token;
}

static void test_register_live_remove(void **state)
{
	struct two *t = *state;
	struct isc_replica *r;
	struct isc_err err;
	size_t n;

	reg(t->a, "rep_a", 100);
	reg(t->b, "rep_b", 200);
	assert_int_equal(isc_store_replica_list_live(t->a, LEASE, &r, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_string_equal(r[0].id, "rep_a");
	assert_string_equal(r[0].host, "host-1");
	assert_int_equal(r[0].pid, 100);
	assert_string_equal(r[1].id, "rep_b");
	assert_true(r[1].heartbeat_ms >= r[1].started_ms);
	isc_replica_list_free(r, n);

	assert_int_equal(isc_store_replica_heartbeat(t->b, "rep_b", &err), 0);
	assert_int_equal(isc_store_replica_heartbeat(t->b, "rep_gone", &err), ISC_ENOTFOUND);
	/* A heartbeat older than the lease time is not live: none is within -1 ms of now + 1. */
	assert_int_equal(isc_store_replica_list_live(t->a, -1000, &r, &n, &err), 0);
	assert_int_equal(n, 0);
	isc_replica_list_free(r, n);
	/* Pruning spares fresh rows. */
	assert_int_equal(isc_store_replica_prune(t->a, 60000, &err), 0);
	assert_int_equal(isc_store_replica_list_live(t->a, LEASE, &r, &n, &err), 0);
	assert_int_equal(n, 2);
	isc_replica_list_free(r, n);

	assert_int_equal(isc_store_replica_remove(t->a, "rep_a", &err), 0);
	assert_int_equal(isc_store_replica_list_live(t->b, LEASE, &r, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_string_equal(r[0].id, "rep_b");
	isc_replica_list_free(r, n);
	/* Prune everything older than a second from now: rep_b too. */
	assert_int_equal(isc_store_replica_prune(t->a, -1000, &err), 0);
	assert_int_equal(isc_store_replica_list_live(t->b, LEASE, &r, &n, &err), 0);
	assert_int_equal(n, 0);
	isc_replica_list_free(r, n);
}

static void test_claim_is_exclusive(void **state)
{
	struct two *t = *state;
	struct isc_lease l;
	struct isc_err err;
	char *from = (char *)"unset";
	char *tok = claim(t->a, "exp_1", "rep_a", LEASE, 1, &from);
	char *again;

	assert_null(from); /* a first claim takes it from nobody */
	claim(t->b, "exp_1", "rep_b", LEASE, 0, &from);
	assert_null(from);
	/* Its holder claims it again: the same token, still held. */
	again = claim(t->a, "exp_1", "rep_a", LEASE, 1, &from);
	assert_null(from);
	assert_string_equal(again, tok);
	assert_int_equal(isc_store_lease_get(t->b, "exp_1", &l, &err), 0);
	assert_string_equal(l.replica_id, "rep_a");
	assert_string_equal(l.token, tok);
	assert_true(l.live);
	isc_lease_cleanup(&l);
	assert_int_equal(isc_store_lease_get(t->b, "exp_none", &l, &err), ISC_ENOTFOUND);
	free(again);
	free(tok);
}

static void test_takeover_after_expiry(void **state)
{
	struct two *t = *state;
	struct isc_lease *list;
	struct isc_err err;
	size_t n;
	char *from = NULL;
	/* A's lease on exp_2 is already expired; its lease on exp_1 is not. */
	char *t1 = claim(t->a, "exp_1", "rep_a", LEASE, 1, NULL);
	char *ta = claim(t->a, "exp_2", "rep_a", -1, 1, NULL);
	char *tb = claim(t->b, "exp_2", "rep_b", LEASE, 1, &from);

	assert_string_not_equal(tb, ta); /* taken over: a new token */
	assert_non_null(from);
	assert_string_equal(from, "rep_a");
	free(from);
	/* B holds it now; A can neither claim it back nor renew it. */
	claim(t->a, "exp_2", "rep_a", LEASE, 0, NULL);
	claim(t->b, "exp_1", "rep_b", LEASE, 0, NULL);
	assert_int_equal(isc_store_lease_renew(t->a, "rep_a", LEASE, &list, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_string_equal(list[0].experiment_id, "exp_1");
	assert_string_equal(list[0].token, t1);
	isc_lease_list_free(list, n);
	/* Every row, with whose it is. */
	assert_int_equal(isc_store_lease_list(t->a, &list, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_string_equal(list[1].experiment_id, "exp_2");
	assert_string_equal(list[1].replica_id, "rep_b");
	assert_string_equal(list[1].token, tb);
	assert_true(list[1].live);
	isc_lease_list_free(list, n);
	free(t1);
	free(ta);
	free(tb);
}

static void test_renew_keeps_only_unexpired(void **state)
{
	struct two *t = *state;
	struct isc_lease *list, l;
	struct isc_err err;
	size_t n;
	char *from = NULL;
	char *t3 = claim(t->a, "exp_3", "rep_a", -1, 1, NULL);
	char *t4 = claim(t->a, "exp_4", "rep_a", LEASE, 1, NULL);
	char *again;

	assert_int_equal(isc_store_lease_get(t->a, "exp_3", &l, &err), 0);
	assert_false(l.live);
	isc_lease_cleanup(&l);
	/* The expired one is not renewed: someone may have acted on its expiry. */
	assert_int_equal(isc_store_lease_renew(t->a, "rep_a", LEASE, &list, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_string_equal(list[0].experiment_id, "exp_4");
	assert_true(list[0].live);
	isc_lease_list_free(list, n);
	/* Nobody took it: its holder claims it again, token kept, from nobody else. */
	again = claim(t->a, "exp_3", "rep_a", LEASE, 1, &from);
	assert_null(from);
	assert_string_equal(again, t3);
	assert_int_equal(isc_store_lease_renew(t->a, "rep_a", LEASE, &list, &n, &err), 0);
	assert_int_equal(n, 2);
	isc_lease_list_free(list, n);
	/* A replica with no leases renews none. */
	assert_int_equal(isc_store_lease_renew(t->b, "rep_b", LEASE, &list, &n, &err), 0);
	assert_int_equal(n, 0);
	assert_null(list);
	free(again);
	free(t3);
	free(t4);
}

static void test_release_and_remove(void **state)
{
	struct two *t = *state;
	struct isc_lease l;
	struct isc_err err;
	char *from = NULL;
	char *t5 = claim(t->a, "exp_5", "rep_a", LEASE, 1, NULL);
	char *t6 = claim(t->a, "exp_6", "rep_a", LEASE, 1, NULL);
	char *t7 = claim(t->a, "exp_7", "rep_a", LEASE, 1, NULL);
	char *tb;

	reg(t->a, "rep_a", 1);
	reg(t->b, "rep_b", 2);
	/* Not the holder, or another token: nothing happens. */
	assert_int_equal(isc_store_lease_release(t->b, "exp_5", "rep_b", NULL, &err), 0);
	assert_int_equal(isc_store_lease_release(t->a, "exp_5", "rep_a", "lease_other", &err), 0);
	assert_int_equal(isc_store_lease_get(t->a, "exp_5", &l, &err), 0);
	isc_lease_cleanup(&l);
	assert_int_equal(isc_store_lease_release(t->a, "exp_5", "rep_a", t5, &err), 0);
	assert_int_equal(isc_store_lease_get(t->a, "exp_5", &l, &err), ISC_ENOTFOUND);
	/* Released: B claims it at once, from nobody. */
	tb = claim(t->b, "exp_5", "rep_b", LEASE, 1, &from);
	assert_null(from);
	free(tb);
	/* A clean stop frees A's leases at once. */
	assert_int_equal(isc_store_replica_remove(t->a, "rep_a", &err), 0);
	assert_int_equal(isc_store_lease_get(t->b, "exp_6", &l, &err), ISC_ENOTFOUND);
	tb = claim(t->b, "exp_6", "rep_b", LEASE, 1, NULL);
	free(tb);
	/* A store only one iscd uses forgets every other replica and its leases. */
	reg(t->a, "rep_a", 1);
	free(claim(t->a, "exp_7", "rep_a", LEASE, 1, NULL));
	assert_int_equal(isc_store_replica_forget_others(t->b, "rep_b", &err), 0);
	assert_int_equal(isc_store_lease_get(t->b, "exp_7", &l, &err), ISC_ENOTFOUND);
	assert_int_equal(isc_store_lease_get(t->b, "exp_5", &l, &err), 0);
	assert_string_equal(l.replica_id, "rep_b");
	isc_lease_cleanup(&l);
	assert_int_equal(isc_store_replica_heartbeat(t->a, "rep_a", &err), ISC_ENOTFOUND);
	assert_int_equal(isc_store_replica_heartbeat(t->b, "rep_b", &err), 0);
	free(t5);
	free(t6);
	free(t7);
}

/* One write transaction under a fence: 0 when it committed, else the commit's error. */
static int fenced_write(struct isc_store *s, const char *org)
{
	struct isc_err err;
	int rc;
	if ((rc = isc_store_begin(s, &err)))
		return rc;
	rc = isc_store_org_add(s, org, NULL, &err);
	if (!rc)
		rc = isc_store_commit(s, &err);
	if (rc)
		isc_store_rollback(s);
	return rc;
}

/*
 * The commit fence (isc_store_fence): on PostgreSQL, a replica's step commits only
 * while its lease is held; once it expired (or another replica took it over, with a
 * new token), the commit fails and its writes are rolled back. On SQLite (one iscd)
 * it is a no-op.
 */
static void test_fence_stops_commits_after_the_lease(void **state)
{
	struct two *t = *state;
	struct isc_org o;
	struct isc_err err;
	char *token, *from = NULL, *taken;
	int pg = isc_store_is_postgres(t->a);

	reg(t->a, "rep_a", 1);
	reg(t->b, "rep_b", 2);
	token = claim(t->a, "exp_f", "rep_a", LEASE, 1, &from);
	assert_int_equal(isc_store_fence(t->a, "exp_f", token, &err), 0);
	assert_int_equal(fenced_write(t->a, "while-held"), 0);
	/* The lease runs out and B takes it over: A's next commit is refused. */
	/* Made on B's connection: A's is fenced, and would refuse it. */
	free(claim(t->b, "exp_f", "rep_a", -1000, 1, &from));
	taken = claim(t->b, "exp_f", "rep_b", LEASE, 1, &from);
	assert_int_equal(fenced_write(t->a, "after-takeover"), pg ? ISC_ELEASE : 0);
	assert_int_equal(isc_store_org_find(t->b, "after-takeover", &o, &err),
	                 pg ? ISC_ENOTFOUND : 0);
	if (!pg)
		isc_org_cleanup(&o);
	/* B, fenced with its own token, commits. */
	assert_int_equal(isc_store_fence(t->b, "exp_f", taken, &err), 0);
	assert_int_equal(fenced_write(t->b, "by-b"), 0);
	assert_int_equal(isc_store_fence(t->a, NULL, NULL, &err), 0);
	free(token);
	free(taken);
	free(from);
}

/* UPDATE orgs by name, one statement outside any transaction; *changed: rows it matched. */
static int rename_org(struct isc_store *s, const char *from, const char *to, int64_t *changed)
{
	struct isc_db_stmt *st;
	struct isc_err err;
	int rc = isc_store_prepare(s, "UPDATE orgs SET name = ? WHERE name = ?", &st, &err);

	if (rc)
		return rc;
	isc_db_bind_text(st, 1, to, -1, ISC_DB_STATIC);
	isc_db_bind_text(st, 2, from, -1, ISC_DB_STATIC);
	rc = isc_db_step(st);
	isc_db_finalize(st);
	*changed = isc_db_changes(isc_store_db(s));
	return rc == ISC_DB_DONE ? 0 : isc_store_db_err(s, rc, "renaming", &err);
}

/*
 * Issue 48: every write of a fenced step carries the lease, single statements
 * included. On PostgreSQL a statement that writes outside a transaction runs in one of
 * its own under the write lock and commits only while the lease holds (its row count
 * still answers the caller); after a takeover it is refused with ISC_ELEASE and nothing
 * is written, and from then on the connection refuses every write and transaction
 * without asking, and the lease check for a destructive cloud call says so too. SQLite
 * (one iscd) has no fence: everything commits.
 */
static void test_fence_refuses_single_statements(void **state)
{
	struct two *t = *state;
	struct isc_org o;
	struct isc_err err;
	char *token, *from = NULL, *taken;
	int64_t changed = -1;
	int pg = isc_store_is_postgres(t->a);

	reg(t->a, "rep_a", 1);
	reg(t->b, "rep_b", 2);
	token = claim(t->a, "exp_g", "rep_a", LEASE, 1, &from);
	assert_int_equal(isc_store_fence(t->a, "exp_g", token, &err), 0);
	/* Held: single statements commit, and report the rows they matched. */
	assert_int_equal(isc_store_org_add(t->a, "org-1", NULL, &err), 0);
	assert_int_equal(rename_org(t->a, "org-1", "org-2", &changed), 0);
	assert_int_equal(changed, 1);
	assert_int_equal(rename_org(t->a, "none", "org-3", &changed), 0);
	assert_int_equal(changed, 0);
	assert_int_equal(isc_store_fence_check(t->a, &err), 0);
	assert_false(isc_store_lease_lost(t->a));
	/* Expired and taken over by B. */
	/* Made on B's connection: A's is fenced, and would refuse it. */
	free(claim(t->b, "exp_g", "rep_a", -1000, 1, &from));
	taken = claim(t->b, "exp_g", "rep_b", LEASE, 1, &from);
	assert_int_equal(rename_org(t->a, "org-2", "stale", &changed), pg ? ISC_ELEASE : 0);
	assert_int_equal(isc_store_org_find(t->b, "stale", &o, &err), pg ? ISC_ENOTFOUND : 0);
	if (!pg)
		isc_org_cleanup(&o);
	if (pg) {
		assert_int_equal(isc_store_org_find(t->b, "org-2", &o, &err), 0);
		isc_org_cleanup(&o);
		/* Refused once, refused for good: inserts, transactions, the cloud's check. */
		assert_true(isc_store_lease_lost(t->a));
		assert_int_equal(isc_store_org_add(t->a, "org-4", NULL, &err), ISC_ELEASE);
		assert_non_null(strstr(err.msg, "lease was lost"));
		assert_int_equal(isc_store_begin(t->a, &err), ISC_ELEASE);
		assert_int_equal(isc_store_fence_check(t->a, &err), ISC_ELEASE);
		assert_int_equal(isc_store_org_find(t->b, "org-4", &o, &err), ISC_ENOTFOUND);
	}
	/* B's own fence holds: its single statements commit. */
	assert_int_equal(isc_store_fence(t->b, "exp_g", taken, &err), 0);
	assert_int_equal(isc_store_fence_check(t->b, &err), 0);
	assert_int_equal(isc_store_org_add(t->b, "by-b", NULL, &err), 0);
	/* The connection's next user (no fence) writes as before. */
	assert_int_equal(isc_store_fence(t->a, NULL, NULL, &err), 0);
	assert_false(isc_store_lease_lost(t->a));
	assert_int_equal(isc_store_org_add(t->a, "org-5", NULL, &err), 0);
	assert_int_equal(isc_store_fence(t->b, NULL, NULL, &err), 0);
	free(token);
	free(taken);
	free(from);
}

/*
 * The lease check made right before a destructive cloud call asks the lease row by
 * the database's clock: an expiry alone (nobody has taken it over yet) is enough.
 */
static void test_fence_check_sees_expiry(void **state)
{
	struct two *t = *state;
	struct isc_err err;
	char *token, *from = NULL;
	int pg = isc_store_is_postgres(t->a);

	reg(t->a, "rep_a", 1);
	token = claim(t->a, "exp_h", "rep_a", LEASE, 1, &from);
	assert_int_equal(isc_store_fence(t->a, "exp_h", token, &err), 0);
	assert_int_equal(isc_store_fence_check(t->a, &err), 0);
	/* Made on B's connection: A's is fenced, and would refuse it. */
	free(claim(t->b, "exp_h", "rep_a", -1000, 1, &from));
	/* Expired (by the database's clock), though nobody has taken it over. */
	assert_int_equal(isc_store_fence_check(t->a, &err), pg ? ISC_ELEASE : 0);
	assert_int_equal(isc_store_lease_lost(t->a), pg);
	assert_int_equal(isc_store_fence(t->a, NULL, NULL, &err), 0);
	free(token);
	free(from);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_register_live_remove, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_claim_is_exclusive, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_takeover_after_expiry, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_renew_keeps_only_unexpired, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_release_and_remove, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_fence_stops_commits_after_the_lease, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_fence_refuses_single_statements, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_fence_check_sees_expiry, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
