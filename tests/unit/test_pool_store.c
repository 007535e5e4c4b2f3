/*
 * The on-prem pool's table: add with every field checked, list, find by id or
 * host, drain, probe results (unreachable with a reason, up again; an operator's
 * change in between wins), remove (its pinned host key with it), ids never reused;
 * a node known twice is a conflict. The queue's
 * row per experiment (queue_state), and a cancel of waiting on-prem work that
 * ends it at once while a burst's only asks the broker.
 */
#include "store/store.h"
#include "store/store_experiments.h"
#include "store/store_hostkeys.h"
#include "store/store_pool.h"
#include "store/store_queue.h"
#include "tests/unit/store_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int setup(void **state)
{
	*state = store_fixture_new("pool");
	return 0;
}

static int teardown(void **state)
{
	store_fixture_free(*state);
	return 0;
}

static void test_add_list_find(void **state)
{
	struct store_fixture *f = *state;
	struct isc_err err;
	int64_t a, b, c;
	assert_int_equal(isc_store_pool_add(f->s, "gpu-1.lab", 22, "isc", 8, NULL, &a, &err), 0);
	assert_int_equal(isc_store_pool_add(f->s, "gpu-1.lab", 2222, "isc", 8, NULL, &b, &err), 0);
	assert_int_equal(isc_store_pool_add(f->s, "127.0.0.1", 40022, "root", 4, NULL, &c, &err),
	                 0);
	assert_int_equal(isc_store_pool_add(f->s, "gpu-1.lab", 22, "isc", 8, NULL, NULL, &err),
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
	struct store_fixture *f = *state;
	struct isc_err err;
	assert_int_equal(isc_store_pool_add(f->s, "", 22, "isc", 8, NULL, NULL, &err),
	                 ISC_EINVALID);
	assert_non_null(strstr(err.msg, "host"));
	assert_int_equal(isc_store_pool_add(f->s, "a b", 22, "isc", 8, NULL, NULL, &err),
	                 ISC_EINVALID);
	assert_int_equal(
	    isc_store_pool_add(f->s, "-oProxyCommand=x", 22, "isc", 8, NULL, NULL, &err),
	    ISC_EINVALID);
	assert_int_equal(isc_store_pool_add(f->s, "h", 0, "isc", 8, NULL, NULL, &err),
	                 ISC_EINVALID);
	assert_non_null(strstr(err.msg, "port"));
	assert_int_equal(isc_store_pool_add(f->s, "h", 65536, "isc", 8, NULL, NULL, &err),
	                 ISC_EINVALID);
	assert_int_equal(isc_store_pool_add(f->s, "h", 22, "Root;", 8, NULL, NULL, &err),
	                 ISC_EINVALID);
	assert_non_null(strstr(err.msg, "user"));
	assert_int_equal(isc_store_pool_add(f->s, "h", 22, "isc", 0, NULL, NULL, &err),
	                 ISC_EINVALID);
	assert_non_null(strstr(err.msg, "gpus"));
	assert_int_equal(isc_store_pool_add(f->s, "h", 22, "isc", 65, NULL, NULL, &err),
	                 ISC_EINVALID);
	struct isc_pool_node *v;
	size_t n;
	assert_int_equal(isc_store_pool_list(f->s, &v, &n, &err), 0);
	assert_int_equal(n, 0); /* nothing half-written */
	isc_pool_nodes_free(v, n);
}

static void test_state_and_remove(void **state)
{
	struct store_fixture *f = *state;
	struct isc_err err;
	int64_t id;
	assert_int_equal(isc_store_pool_add(f->s, "gpu-2", 22, "isc", 8, NULL, &id, &err), 0);
	assert_int_equal(isc_store_pool_set_state(f->s, id, "draining", &err), 0);
	struct isc_pool_node nd;
	assert_int_equal(isc_store_pool_find(f->s, "gpu-2", &nd, &err), 0);
	assert_string_equal(nd.state, "draining");
	isc_pool_node_cleanup(&nd);
	/* only the operator's words: the probe's state is iscd's (isc_store_pool_mark) */
	assert_int_equal(isc_store_pool_set_state(f->s, id, "unreachable", &err), ISC_EINVALID);
	assert_int_equal(isc_store_pool_set_state(f->s, id, "gone", &err), ISC_EINVALID);
	assert_int_equal(isc_store_pool_set_state(f->s, id + 100, "up", &err), ISC_ENOTFOUND);

	/* A probe's finding is compare-and-set: the drain above wins over a stale 'up'. */
	assert_int_equal(isc_store_pool_mark(f->s, id, "up", "unreachable", "timed out", &err),
	                 ISC_ECONFLICT);
	assert_non_null(strstr(err.msg, "draining"));
	assert_int_equal(isc_store_pool_set_state(f->s, id, "up", &err), 0);
	assert_int_equal(isc_store_pool_mark(f->s, id, "up", "unreachable",
	                                     "connection refused: nothing listens", &err),
	                 0);
	assert_int_equal(isc_store_pool_find(f->s, "gpu-2", &nd, &err), 0);
	assert_string_equal(nd.state, "unreachable");
	assert_string_equal(nd.reason, "connection refused: nothing listens");
	isc_pool_node_cleanup(&nd);
	/* A drain and undrain while it does not answer leave it unreachable, not up. */
	assert_int_equal(isc_store_pool_set_state(f->s, id, "draining", &err), 0);
	assert_int_equal(isc_store_pool_set_state(f->s, id, "up", &err), 0);
	assert_int_equal(isc_store_pool_find(f->s, "gpu-2", &nd, &err), 0);
	assert_string_equal(nd.state, "unreachable");
	isc_pool_node_cleanup(&nd);
	/* It answers: up, no reason. */
	assert_int_equal(isc_store_pool_mark(f->s, id, "unreachable", "up", "", &err), 0);
	assert_int_equal(isc_store_pool_find(f->s, "gpu-2", &nd, &err), 0);
	assert_string_equal(nd.state, "up");
	assert_string_equal(nd.reason, "");
	isc_pool_node_cleanup(&nd);
	assert_int_equal(isc_store_pool_mark(f->s, id + 100, "up", "up", "", &err), ISC_ENOTFOUND);

	/* Added unreachable (isc nodes add --force): the reason is kept. */
	int64_t id2;
	assert_int_equal(
	    isc_store_pool_add(f->s, "gpu-3", 22, "isc", 8, "timed out: gpu-3 port 22", &id2, &err),
	    0);
	assert_int_equal(isc_store_pool_find(f->s, "gpu-3", &nd, &err), 0);
	assert_string_equal(nd.state, "unreachable");
	assert_string_equal(nd.reason, "timed out: gpu-3 port 22");
	isc_pool_node_cleanup(&nd);

	/* Removed: its pinned host key goes with it, and its id is never given again. */
	char pin[40];
	struct isc_hostkey hk;
	snprintf(pin, sizeof(pin), ISC_POOL_PIN_FMT, (long long)id2);
	assert_int_equal(isc_store_hostkey_check(f->s, pin, "ssh-ed25519", "ab", &err), 0);
	assert_int_equal(isc_store_pool_remove(f->s, id2, &err), 0);
	assert_int_equal(isc_store_hostkey_get(f->s, pin, &hk, &err), ISC_ENOTFOUND);
	int64_t id3;
	assert_int_equal(isc_store_pool_add(f->s, "gpu-3", 22, "isc", 8, NULL, &id3, &err), 0);
	assert_true(id3 > id2);
	assert_int_equal(isc_store_pool_remove(f->s, id, &err), 0);
	assert_int_equal(isc_store_pool_remove(f->s, id, &err), ISC_ENOTFOUND);
}

/* An experiment of the given mode, enqueued in a fresh project; its id in id (17+ bytes). */
static void add_experiment(struct isc_store *s, const char *name, const char *mode, char *id)
{
	struct isc_err err;
	struct isc_project p;
	struct isc_experiment e = {0};
	char *pid = NULL;
	if (isc_store_project_resolve(s, "demo", &p, &err) != 0) {
		assert_int_equal(isc_store_org_add(s, "demo", NULL, &err), 0);
		assert_int_equal(isc_store_project_add(s, "demo", "demo", &pid, &err), 0);
		assert_int_equal(isc_store_project_resolve(s, "demo", &p, &err), 0);
		free(pid);
	}
	char *eid = isc_store_new_id("exp_");
	assert_non_null(eid);
	e.id = eid;
	e.project_id = p.id;
	e.org_id = p.org_id;
	e.name = (char *)name;
	e.compute_mode = (char *)mode;
	e.gpus = 1;
	e.spec_json = "{}";
	e.status = "enqueued";
	e.output_path = "/tmp/none";
	assert_int_equal(isc_store_experiment_add(s, &e, &err), 0);
	strcpy(id, eid);
	free(eid);
	isc_project_cleanup(&p);
}

static void test_queue_row_and_cancel(void **state)
{
	struct store_fixture *f = *state;
	struct isc_err err;
	struct isc_queue_row r = {0}, got;
	struct isc_experiment e;
	char cyc[64], burst[64];

	add_experiment(f->s, "c", "cycle", cyc);
	add_experiment(f->s, "b", "burst", burst);
	assert_int_equal(isc_store_queue_get(f->s, cyc, &got, &err), ISC_ENOTFOUND);
	r.experiment_id = cyc;
	r.position = 3;
	r.next_start_ms = 1234;
	r.run_nodes = "1,4";
	r.cycles_done = 2;
	assert_int_equal(isc_store_queue_put(f->s, &r, &err), 0);
	r.position = 2; /* replaces */
	assert_int_equal(isc_store_queue_put(f->s, &r, &err), 0);
	assert_int_equal(isc_store_queue_get(f->s, cyc, &got, &err), 0);
	assert_int_equal(got.position, 2);
	assert_int_equal(got.next_start_ms, 1234);
	assert_string_equal(got.run_nodes, "1,4");
	assert_int_equal(got.cycles_done, 2);
	isc_queue_row_cleanup(&got);

	/* a node that a run holds is not removed (the run's nodes are 1 and 4) */
	int64_t n1, n2;
	assert_int_equal(isc_store_pool_add(f->s, "gpu-a", 22, "isc", 1, NULL, &n1, &err), 0);
	assert_int_equal(isc_store_pool_add(f->s, "gpu-b", 22, "isc", 1, NULL, &n2, &err), 0);
	assert_int_equal(n1, 1);
	assert_int_equal(isc_store_pool_remove(f->s, n1, &err), ISC_ECONFLICT);
	assert_non_null(strstr(err.msg, cyc));
	assert_int_equal(isc_store_pool_remove(f->s, n2, &err), 0);
	r.run_nodes = "";
	assert_int_equal(isc_store_queue_put(f->s, &r, &err), 0);
	assert_int_equal(isc_store_pool_remove(f->s, n1, &err), 0);

	/* waiting on-prem work ends cancelled at once; a burst is the broker's to stop */
	assert_int_equal(isc_store_experiment_request_cancel(f->s, cyc, &err), 0);
	assert_int_equal(isc_store_experiment_get(f->s, cyc, &e, &err), 0);
	assert_string_equal(e.status, "cancelled");
	isc_experiment_cleanup(&e);
	assert_int_equal(isc_store_experiment_request_cancel(f->s, cyc, &err), ISC_ECONFLICT);
	assert_int_equal(isc_store_experiment_request_cancel(f->s, burst, &err), 0);
	assert_int_equal(isc_store_experiment_get(f->s, burst, &e, &err), 0);
	assert_string_equal(e.status, "enqueued");
	assert_int_equal(e.cancel_requested, 1);
	isc_experiment_cleanup(&e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_add_list_find, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_fields, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_state_and_remove, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_queue_row_and_cancel, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
