/*
 * Lost nodes (issue 32), the store's half: a replacement cluster is recorded with its
 * intent for the k lost nodes and the ranks the kept nodes take, in one transaction; the
 * kept nodes' rows then move into it with those ranks (their charging goes on from where
 * it was: the same rows); and the fill list the launch reads is parsed strictly.
 */
#include "broker/broker_int.h"
#include "store/store_clusters.h"
#include "store/store_experiments.h"
#include "tests/unit/store_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int setup(void **state)
{
	struct store_fixture *f = store_fixture_new("lost");
	struct isc_experiment e = {0};
	struct isc_cluster c = {0};
	struct isc_err err;
	int64_t org_id;
	char *project_id = NULL;

	assert_int_equal(isc_store_org_add(f->s, "demo", &org_id, &err), 0);
	assert_int_equal(isc_store_project_add(f->s, "demo", "vision", &project_id, &err), 0);
	e.id = "exp_lost";
	e.project_id = project_id;
	e.org_id = org_id;
	e.name = "lost";
	e.compute_mode = "burst";
	e.gpus = 4;
	e.spec_json = "{}";
	e.status = "running";
	assert_int_equal(isc_store_experiment_add(f->s, &e, &err), 0);
	free(project_id);
	/* A running 4-node gang: cl_old, nodes i-0..i-3 with ranks 0..3. */
	c.id = "cl_old";
	c.experiment_id = "exp_lost";
	c.shape_id = "aws-us-east-1-g4dn.xlarge-spot";
	c.provider = "aws";
	c.account = "default";
	c.region = "us-east-1";
	c.nnodes = 4;
	c.nproc = 1;
	c.cycle = 1;
	c.price_micros = 500000;
	assert_int_equal(isc_store_cluster_create(f->s, &c, "isc-cl_old", "", &err), 0);
	for (int r = 0; r < 4; r++) {
		struct isc_node nd = {0};
		char id[16];
		snprintf(id, sizeof(id), "i-%d", r);
		nd.cluster_id = "cl_old";
		nd.rank = r;
		nd.instance_id = id;
		nd.state = "running";
		nd.private_ip = "";
		nd.public_ip = "";
		nd.zone = "us-east-1a";
		nd.price_micros = 500000;
		nd.launched_at_ms = 1000;
		assert_int_equal(isc_store_node_add(f->s, &nd, &err), 0);
		assert_int_equal(isc_store_node_set_charged(f->s, id, 5000 + r, &err), 0);
	}
	assert_int_equal(isc_store_cluster_set_zone(f->s, "cl_old", "us-east-1a", &err), 0);
	assert_int_equal(isc_store_cluster_set_state(f->s, "cl_old", "running", &err), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	store_fixture_free(*state);
	return 0;
}

/* The replacement of rank 0 of cl_old: rank 1 becomes 0, the new node fills rank 1. */
static struct isc_cluster replacement(const char *fill)
{
	struct isc_cluster r = {0};
	r.id = "cl_new";
	r.experiment_id = "exp_lost";
	r.shape_id = "aws-us-east-1-g4dn.xlarge-spot";
	r.provider = "aws";
	r.account = "default";
	r.region = "us-east-1";
	r.zone = "us-east-1a";
	r.nnodes = 4;
	r.nproc = 1;
	r.cycle = 2;
	r.price_micros = 500000;
	r.replaces = "cl_old";
	r.placement_token = "isc-cl_old";
	r.fill_ranks = (char *)fill;
	return r;
}

static void test_replace_then_take_kept(void **state)
{
	struct store_fixture *f = *state;
	struct isc_cluster r = replacement("1"), got_old, got_new;
	const char *kept[3] = {"i-1", "i-2", "i-3"};
	int ranks[3] = {0, 2, 3};
	struct isc_intent in;
	struct isc_node *nodes;
	struct isc_err err;
	size_t n, kept_n, moved;

	assert_int_equal(isc_store_cluster_replace(f->s, &r, "isc-cl_new", kept, ranks, 3, &err),
	                 0);
	/* One transaction: the replacement launching with its intent for 1 node, the old
	 * cluster draining, three nodes kept. */
	assert_int_equal(isc_store_cluster_get(f->s, "cl_new", &got_new, &err), 0);
	assert_string_equal(got_new.state, "launching");
	assert_string_equal(got_new.replaces, "cl_old");
	assert_string_equal(got_new.placement_token, "isc-cl_old");
	assert_string_equal(got_new.fill_ranks, "1");
	assert_string_equal(got_new.zone, "us-east-1a");
	assert_int_equal(isc_store_intent_for_cluster(f->s, "cl_new", &in, &err), 0);
	assert_int_equal(in.count, 1);
	assert_string_equal(in.state, "pending");
	assert_string_equal(in.zone, "us-east-1a");
	isc_intent_cleanup(&in);
	assert_int_equal(isc_store_cluster_get(f->s, "cl_old", &got_old, &err), 0);
	assert_string_equal(got_old.state, "draining");
	assert_string_equal(got_old.replaces, "");
	assert_int_equal(isc_store_cluster_kept_count(f->s, "cl_old", &kept_n, &err), 0);
	assert_int_equal(kept_n, 3);

	/* The move: the same rows, new ranks, their charging where it was. */
	assert_int_equal(isc_store_cluster_take_kept(f->s, "cl_old", "cl_new", &moved, &err), 0);
	assert_int_equal(moved, 3);
	assert_int_equal(isc_store_node_list(f->s, "cl_new", &nodes, &n, &err), 0);
	assert_int_equal(n, 3);
	assert_int_equal(nodes[0].rank, 0);
	assert_string_equal(nodes[0].instance_id, "i-1");
	assert_int_equal(nodes[0].charged_until_ms, 5001);
	assert_int_equal(nodes[1].rank, 2);
	assert_string_equal(nodes[1].instance_id, "i-2");
	assert_int_equal(nodes[2].rank, 3);
	assert_string_equal(nodes[2].instance_id, "i-3");
	isc_node_list_free(nodes, n);
	assert_int_equal(isc_store_node_list(f->s, "cl_old", &nodes, &n, &err), 0);
	assert_int_equal(n, 1); /* the lost one stays with the old cluster, to be terminated */
	assert_string_equal(nodes[0].instance_id, "i-0");
	isc_node_list_free(nodes, n);
	/* Done once: a replay after a crash moves nothing more. */
	assert_int_equal(isc_store_cluster_kept_count(f->s, "cl_old", &kept_n, &err), 0);
	assert_int_equal(kept_n, 0);
	assert_int_equal(isc_store_cluster_take_kept(f->s, "cl_old", "cl_new", &moved, &err), 0);
	assert_int_equal(moved, 0);
	isc_cluster_cleanup(&got_old);
	isc_cluster_cleanup(&got_new);
}

/* A cluster no longer live (drained by another step, cancelled) is not replaced. */
static void test_replace_refused_when_not_running(void **state)
{
	struct store_fixture *f = *state;
	struct isc_cluster r = replacement("3"), got;
	const char *kept[1] = {"i-0"};
	int ranks[1] = {0};
	struct isc_err err;

	assert_int_equal(isc_store_cluster_set_state(f->s, "cl_old", "terminating", &err), 0);
	assert_int_equal(isc_store_cluster_replace(f->s, &r, "isc-cl_new", kept, ranks, 1, &err),
	                 ISC_ECONFLICT);
	/* Rolled back: no replacement, no intent. */
	assert_int_equal(isc_store_cluster_get(f->s, "cl_new", &got, &err), ISC_ENOTFOUND);
	r.fill_ranks = "";
	assert_int_equal(isc_store_cluster_replace(f->s, &r, "isc-cl_new", kept, ranks, 1, &err),
	                 ISC_EINVALID);
}

static void test_fill_ranks_parsed_strictly(void **state)
{
	struct isc_cluster c = replacement("1,3");
	int ranks[8];

	(void)state;
	assert_int_equal(broker_fill_ranks(&c, ranks, 8), 2);
	assert_int_equal(ranks[0], 1);
	assert_int_equal(ranks[1], 3);
	c.fill_ranks = "";
	assert_int_equal(broker_fill_ranks(&c, ranks, 8), 0); /* a whole gang */
	c.fill_ranks = "4";                                   /* not a rank of 4 nodes */
	assert_int_equal(broker_fill_ranks(&c, ranks, 8), 0);
	c.fill_ranks = "x";
	assert_int_equal(broker_fill_ranks(&c, ranks, 8), 0);
	c.fill_ranks = "0,1,2";
	assert_int_equal(broker_fill_ranks(&c, ranks, 2), 2); /* up to cap */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_replace_then_take_kept, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_replace_refused_when_not_running, setup, teardown),
	    cmocka_unit_test(test_fill_ranks_parsed_strictly),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
