/*
 * store/store_access.c: bearer tokens made with tokens (issue 29). A child is
 * refused without expiry, past its parent's expiry, or once the parent is
 * revoked (checked in the insert itself); revoking a token revokes its children
 * and grandchildren in one transaction, and nothing of another branch.
 */
#include "store/store_access.h"
#include "store/store_int.h"
#include "tests/unit/store_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct store_fixture tmp;

static int setup(void **state)
{
	(void)state;
	store_fixture_init(&tmp, "tokens");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	store_fixture_cleanup(&tmp);
	return 0;
}

/* Adds token id (parent NULL or an id) expiring at exp; returns the store's code. */
static int add(const char *id, const char *parent, int64_t exp)
{
	struct isc_token t = {0};
	struct isc_err err;
	t.id = (char *)id;
	t.hash_hex = (char *)"00";
	t.expires_at_ms = exp;
	t.parent_id = (char *)parent;
	return isc_store_token_add(tmp.s, &t, &err);
}

static int64_t revoked_at(const char *id)
{
	struct isc_token t;
	struct isc_err err;
	int64_t at;
	assert_int_equal(isc_store_token_get(tmp.s, id, &t, &err), 0);
	at = t.revoked_at_ms;
	isc_token_cleanup(&t);
	return at;
}

static void test_children_end_with_their_parent(void **state)
{
	int64_t now = isc_store_now_ms(), hour = now + 3600 * 1000;
	struct isc_token t;
	struct isc_err err;
	size_t cascaded = 99;
	(void)state;

	assert_int_equal(add("tok_root", NULL, 0), 0); /* made over the socket */
	assert_int_equal(add("tok_p", "tok_root", hour), 0);
	assert_int_equal(isc_store_token_get(tmp.s, "tok_p", &t, &err), 0);
	assert_string_equal(t.parent_id, "tok_root");
	isc_token_cleanup(&t);
	assert_int_equal(isc_store_token_get(tmp.s, "tok_root", &t, &err), 0);
	assert_string_equal(t.parent_id, "");
	isc_token_cleanup(&t);
	/* a child must expire, and no later than its parent */
	assert_int_equal(add("tok_forever", "tok_p", 0), ISC_EINVALID);
	assert_int_equal(add("tok_late", "tok_p", hour + 1), ISC_EAUTH);
	assert_int_equal(add("tok_c", "tok_p", hour), 0);
	assert_int_equal(add("tok_g", "tok_c", now + 60000), 0);
	assert_int_equal(add("tok_other", "tok_root", hour), 0); /* another branch */
	assert_int_equal(isc_store_token_revoke(tmp.s, "tok_p", &cascaded, &err), 0);
	assert_int_equal(cascaded, 2);
	assert_true(revoked_at("tok_p") > 0);
	assert_true(revoked_at("tok_c") > 0);
	assert_true(revoked_at("tok_g") > 0);
	assert_int_equal(revoked_at("tok_other"), 0);
	assert_int_equal(revoked_at("tok_root"), 0);
	/* a revoked parent makes nothing more; revoking twice is "no live token" */
	assert_int_equal(add("tok_after", "tok_c", now + 1000), ISC_EAUTH);
	assert_int_equal(isc_store_token_get(tmp.s, "tok_after", &t, &err), ISC_ENOTFOUND);
	assert_int_equal(isc_store_token_revoke(tmp.s, "tok_p", NULL, &err), ISC_ENOTFOUND);
	/* an expired parent makes nothing either */
	assert_int_equal(add("tok_old", "tok_root", now - 1000), 0);
	assert_int_equal(add("tok_of_old", "tok_old", now - 2000), ISC_EAUTH);
	/* the root goes: its whole tree with it */
	assert_int_equal(isc_store_token_revoke(tmp.s, "tok_root", &cascaded, &err), 0);
	assert_int_equal(cascaded, 2); /* tok_other and tok_old; the rest went before */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_children_end_with_their_parent),
	};
	return cmocka_run_group_tests_name("tokens", tests, setup, teardown);
}
