/*
 * The store's auth version (migration 23, isc_store_version's auth; issue 49): the
 * API keeps its token and role caches while it is unchanged. It must move with
 * every write of who may do what (a token minted, revoked or cascaded, a
 * membership added, changed or removed, a user or organisation made or renamed),
 * in the same transaction, as seen from another connection (another replica on
 * PostgreSQL, ISC_TEST_PG_DIR); and it must stay put through the commits of
 * running bursts (a project, an experiment's rows, the ledger), which moved the
 * store's version that keyed the caches before.
 */
#include "store/db.h"
#include "store/store.h"
#include "store/store_access.h"
#include "store/store_int.h"
#include "tests/unit/store_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

static struct store_fixture tmp;
static struct isc_store *other; /* a second connection: another replica's view */

static int setup(void **state)
{
	struct isc_err err;
	(void)state;
	store_fixture_init(&tmp, "authver");
	assert_int_equal(isc_store_open_unshared(tmp.home, &other, &err), 0);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	isc_store_free(other);
	other = NULL;
	store_fixture_cleanup(&tmp);
	return 0;
}

/* The auth version as the other connection reads it now. */
static int64_t auth_seen(void)
{
	struct isc_store_version v;
	struct isc_err err;
	assert_int_equal(isc_store_version(other, &v, &err), 0);
	assert_true(v.auth > 0);
	return v.auth;
}

/* The whole version as the other connection reads it now. */
static struct isc_store_version version_seen(void)
{
	struct isc_store_version v;
	struct isc_err err;
	assert_int_equal(isc_store_version(other, &v, &err), 0);
	return v;
}

static void token(const char *id, const char *parent, int64_t user_id)
{
	struct isc_token t = {0};
	struct isc_err err;
	t.id = (char *)id;
	t.hash_hex = (char *)"00";
	t.user_id = user_id;
	t.parent_id = (char *)parent;
	t.expires_at_ms = parent ? isc_store_now_ms() + 3600 * 1000 : 0;
	assert_int_equal(isc_store_token_add(tmp.s, &t, &err), 0);
}

static void sql(struct isc_store *s, const char *text)
{
	assert_int_equal(isc_db_exec(isc_store_db(s), text), ISC_DB_OK);
}

static void test_access_writes_bump_it(void **state)
{
	struct isc_err err;
	int64_t org, user, v = auth_seen(), w;
	size_t cascaded;
	(void)state;

#define BUMPED(what)                                                                               \
	do {                                                                                       \
		w = auth_seen();                                                                   \
		if (w <= v)                                                                        \
			fail_msg("%s did not move the auth version (%lld)", what, (long long)w);   \
		v = w;                                                                             \
	} while (0)

	assert_int_equal(isc_store_org_add(tmp.s, "acme", &org, &err), 0);
	BUMPED("an organisation made");
	assert_int_equal(isc_store_user_add(tmp.s, "ann", &user, &err), 0);
	BUMPED("a user made");
	assert_int_equal(isc_store_member_set(tmp.s, org, user, ISC_ROLE_ADMIN, &err), 0);
	BUMPED("a membership added");
	assert_int_equal(isc_store_member_set(tmp.s, org, user, ISC_ROLE_MEMBER, &err), 0);
	BUMPED("a role changed");
	assert_int_equal(isc_store_member_remove(tmp.s, org, user, &err), 0);
	BUMPED("a membership removed");
	token("tok_root", NULL, user);
	BUMPED("a token minted");
	token("tok_child", "tok_root", user);
	BUMPED("a token minted with a token");
	assert_int_equal(isc_store_token_revoke(tmp.s, "tok_child", &cascaded, &err), 0);
	BUMPED("a token revoked");
	token("tok_child2", "tok_root", user);
	v = auth_seen();
	assert_int_equal(isc_store_token_revoke(tmp.s, "tok_root", &cascaded, &err), 0);
	assert_int_equal(cascaded, 1);
	BUMPED("a token revoked with its child");
	/* Writers outside store_access.c (an operator's SQL, a future route) are caught too. */
	sql(tmp.s, "UPDATE api_tokens SET expires_at_ms = 1 WHERE id = 'tok_child2'");
	BUMPED("a token's expiry set by hand");
	sql(tmp.s, "UPDATE users SET name = 'bob' WHERE name = 'ann'");
	BUMPED("a user renamed");
	sql(tmp.s, "DELETE FROM api_tokens WHERE id = 'tok_child2'");
	BUMPED("a token deleted");
	sql(tmp.s, "UPDATE orgs SET name = 'acme2' WHERE name = 'acme'");
	BUMPED("an organisation renamed");
#undef BUMPED
}

static void test_unrelated_commits_leave_it(void **state)
{
	struct isc_store_version before, after;
	struct isc_err err;
	char *project = NULL;
	int64_t org;
	(void)state;

	assert_int_equal(isc_store_org_add(tmp.s, "acme", &org, &err), 0);
	before = version_seen();
	/* What running bursts commit all the time: projects, rows of other tables. */
	assert_int_equal(isc_store_project_add(tmp.s, "acme", "vision", &project, &err), 0);
	free(project);
	sql(tmp.s, "INSERT INTO burst_waits (experiment_id, why, at_ms) VALUES ('exp_1', 1, 1)");
	sql(tmp.s, "UPDATE burst_waits SET why = 2 WHERE experiment_id = 'exp_1'");
	assert_int_equal(isc_store_begin(tmp.s, &err), 0);
	sql(tmp.s, "DELETE FROM burst_waits");
	assert_int_equal(isc_store_commit(tmp.s, &err), 0);
	after = version_seen();
	/* The store's version moved (the old key of the caches: they were all dropped)... */
	assert_true(after.others != before.others || after.own != before.own);
	/* ... the auth version did not. */
	assert_int_equal(after.auth, before.auth);
}

static void test_rolled_back_write_leaves_it(void **state)
{
	struct isc_err err;
	int64_t v, user;
	(void)state;

	v = auth_seen();
	assert_int_equal(isc_store_begin(tmp.s, &err), 0);
	assert_int_equal(isc_store_user_add(tmp.s, "ann", &user, &err), 0);
	/* Not committed: another connection still sees the old version (and no user). */
	assert_int_equal(auth_seen(), v);
	isc_store_rollback(tmp.s);
	assert_int_equal(auth_seen(), v);
	/* Several writes in one transaction: seen once committed, as one change or more. */
	assert_int_equal(isc_store_begin(tmp.s, &err), 0);
	assert_int_equal(isc_store_user_add(tmp.s, "ann", &user, &err), 0);
	assert_int_equal(isc_store_user_add(tmp.s, "bob", &user, &err), 0);
	assert_int_equal(isc_store_commit(tmp.s, &err), 0);
	assert_true(auth_seen() > v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_access_writes_bump_it, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_unrelated_commits_leave_it, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_rolled_back_write_leaves_it, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
