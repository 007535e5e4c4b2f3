/*
 * The on-prem pool's table: add with every field checked, list, find by id or
 * host, drain, mark down, remove; a node known twice is a conflict.
 */
#include "store/store.h"
#include "store/store_pool.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fixture {
	char dir[64];
	char *home;
	struct isc_store *s;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "/tmp/isc-pool-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	assert_int_not_equal(asprintf(&f->home, "%s/home", f->dir), -1);
	assert_int_equal(isc_store_open(f->home, 1, &f->s, NULL), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char *cmd;
	isc_store_free(f->s);
	if (asprintf(&cmd, "rm -rf '%s'", f->dir) >= 0) {
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", f->dir);
		free(cmd);
	}
	free(f->home);
	free(f);
	return 0;
}

static void test_add_list_find(void **state)
{
	struct fixture *f = *state;
	struct isc_err err;
	int64_t a, b, c;
	assert_int_equal(isc_store_pool_add(f->s, "gpu-1.lab", 22, "isc", 8, &a, &err), 0);
	assert_int_equal(isc_store_pool_add(f->s, "gpu-1.lab", 2222, "isc", 8, &b, &err), 0);
	assert_int_equal(isc_store_pool_add(f->s, "127.0.0.1", 40022, "root", 4, &c, &err), 0);
	assert_int_equal(isc_store_pool_add(f->s, "gpu-1.lab", 22, "isc", 8, NULL, &err),
	                 ISC_ECONFLICT);
	assert_non_null(strstr(err.msg, "gpu-1.lab:22"));

	struct isc_pool_node *v;
	size_t n;
	assert_int_equal(isc_store_pool_list(f->s, &v, &n, &err), 0);
	assert_int_equal(n, 3);
	assert_string_equal(v[2].host, "127.0.0.1");
	assert_int_equal(v[2].port, 40022);
	assert_string_equal(v[2].user, "root");
	assert_int_equal(v[2].gpus, 4);
	assert_string_equal(v[2].state, "up");
	assert_true(v[2].added_ms > 0);
	isc_pool_nodes_free(v, n);

	struct isc_pool_node nd;
	assert_int_equal(isc_store_pool_find(f->s, "gpu-1.lab", &nd, &err), ISC_EINVALID);
	assert_non_null(strstr(err.msg, "ambiguous"));
	assert_int_equal(isc_store_pool_find(f->s, "gpu-1.lab:2222", &nd, &err), 0);
	assert_int_equal(nd.id, b);
	isc_pool_node_cleanup(&nd);
	char id[32];
	snprintf(id, sizeof(id), "%lld", (long long)c);
	assert_int_equal(isc_store_pool_find(f->s, id, &nd, &err), 0);
	assert_string_equal(nd.host, "127.0.0.1");
	isc_pool_node_cleanup(&nd);
	assert_int_equal(isc_store_pool_find(f->s, "nowhere", &nd, &err), ISC_ENOTFOUND);
	(void)a;
}

static void test_bad_fields(void **state)
{
	struct fixture *f = *state;
	struct isc_err err;
	assert_int_equal(isc_store_pool_add(f->s, "", 22, "isc", 8, NULL, &err), ISC_EINVALID);
	assert_non_null(strstr(err.msg, "host"));
	assert_int_equal(isc_store_pool_add(f->s, "a b", 22, "isc", 8, NULL, &err), ISC_EINVALID);
	assert_int_equal(isc_store_pool_add(f->s, "-oProxyCommand=x", 22, "isc", 8, NULL, &err),
	                 ISC_EINVALID);
	assert_int_equal(isc_store_pool_add(f->s, "h", 0, "isc", 8, NULL, &err), ISC_EINVALID);
	assert_non_null(strstr(err.msg, "port"));
	assert_int_equal(isc_store_pool_add(f->s, "h", 65536, "isc", 8, NULL, &err), ISC_EINVALID);
	assert_int_equal(isc_store_pool_add(f->s, "h", 22, "Root;", 8, NULL, &err), ISC_EINVALID);
	assert_non_null(strstr(err.msg, "user"));
	assert_int_equal(isc_store_pool_add(f->s, "h", 22, "isc", 0, NULL, &err), ISC_EINVALID);
	assert_non_null(strstr(err.msg, "gpus"));
	assert_int_equal(isc_store_pool_add(f->s, "h", 22, "isc", 65, NULL, &err), ISC_EINVALID);
	struct isc_pool_node *v;
	size_t n;
	assert_int_equal(isc_store_pool_list(f->s, &v, &n, &err), 0);
	assert_int_equal(n, 0); /* nothing half-written */
	isc_pool_nodes_free(v, n);
}

static void test_state_and_remove(void **state)
{
	struct fixture *f = *state;
	struct isc_err err;
	int64_t id;
	assert_int_equal(isc_store_pool_add(f->s, "gpu-2", 22, "isc", 8, &id, &err), 0);
	assert_int_equal(isc_store_pool_set_state(f->s, id, "draining", &err), 0);
	struct isc_pool_node nd;
	assert_int_equal(isc_store_pool_find(f->s, "gpu-2", &nd, &err), 0);
	assert_string_equal(nd.state, "draining");
	isc_pool_node_cleanup(&nd);
	assert_int_equal(isc_store_pool_set_state(f->s, id, "down", &err), 0);
	assert_int_equal(isc_store_pool_set_state(f->s, id, "gone", &err), ISC_EINVALID);
	assert_int_equal(isc_store_pool_set_state(f->s, id + 100, "up", &err), ISC_ENOTFOUND);
	assert_int_equal(isc_store_pool_remove(f->s, id, &err), 0);
	assert_int_equal(isc_store_pool_remove(f->s, id, &err), ISC_ENOTFOUND);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_add_list_find, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_fields, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_state_and_remove, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
