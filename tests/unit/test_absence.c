/*
 * Listing lag and absence (issue 48). A node the describes stop listing counts as
 * terminated only after node_absence_confirm_ms, and even then that is an
 * observation: the node keeps the mark of a termination by absence, a listing that
 * shows it again drops the recorded termination, and the meter charges it through
 * to the termination the cloud confirms. While it is missing it is charged up to its
 * first miss and no further. Also the rank choice of a lost-node replacement: rank 0
 * (MASTER_ADDR) goes to a kept node that is up, never to one still booting while
 * another runs.
 *
 * The meter is the broker's own (broker_meter against the store; no cloud call);
 * times are set relative to the wall clock the meter reads.
 */
#include "broker/broker_int.h"
#include "broker/liveness.h"
#include "common/clock.h"
#include "store/store_clusters.h"
#include "store/store_experiments.h"
#include "store/store_ledger.h"
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

#define CONFIRM_MS 30000
#define PRICE      3600000 /* micros per node-hour: one micro per millisecond */

struct fixture {
	struct store_fixture tmp;
	struct isc_broker *b;
};

static void add_node(struct isc_store *s, const char *cluster, int rank, const char *id,
                     const char *state, const char *ip, int64_t launched_at_ms)
{
	struct isc_node nd = {0};
	struct isc_err err;

	nd.cluster_id = (char *)cluster;
	nd.rank = rank;
	nd.instance_id = (char *)id;
	nd.state = (char *)state;
	nd.private_ip = (char *)ip;
	nd.public_ip = "";
	nd.zone = "us-east-1a";
	nd.price_micros = PRICE;
	nd.launched_at_ms = launched_at_ms;
	if (isc_store_node_add(s, &nd, &err))
		fail_msg("node %s: %s", id, err.msg);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct isc_experiment e = {0};
	struct isc_cluster c = {0};
	struct isc_err err;
	int64_t org_id;
	char *project_id = NULL, *path;
	FILE *fp;

	assert_non_null(f);
	store_fixture_init(&f->tmp, "absence");
	assert_int_not_equal(asprintf(&path, "%s/config.toml", f->tmp.home), -1);
	assert_non_null(fp = fopen(path, "w"));
	fprintf(fp, "broker_id = \"absence-test\"\nnode_absence_confirm_ms = %d\n", CONFIRM_MS);
	fclose(fp);
	free(path);
	if (isc_broker_new(f->tmp.s, &f->b, &err))
		fail_msg("isc_broker_new: %s", err.msg);
	assert_int_equal(isc_store_org_add(f->tmp.s, "demo", &org_id, &err), 0);
	assert_int_equal(isc_store_project_add(f->tmp.s, "demo", "vision", &project_id, &err), 0);
	/* Enough for the meter's renewals: the experiment is never stopped for credits. */
	assert_int_equal(isc_credits_grant(f->tmp.s, "demo", 1000000000, "test", &err), 0);
	e.id = "exp_abs";
	e.project_id = project_id;
	e.org_id = org_id;
	e.name = "absence";
	e.compute_mode = "burst";
	e.gpus = 2;
	e.spec_json = "{}";
	e.status = "running";
	assert_int_equal(isc_store_experiment_add(f->tmp.s, &e, &err), 0);
	free(project_id);
	c.id = "cl_abs";
	c.experiment_id = "exp_abs";
	c.shape_id = "aws-us-east-1-g4dn.xlarge-spot";
	c.provider = "aws";
	c.account = "default";
	c.region = "us-east-1";
	c.nnodes = 2;
	c.nproc = 1;
	c.cycle = 1;
	c.price_micros = PRICE;
	assert_int_equal(isc_store_cluster_create(f->tmp.s, &c, "isc-cl_abs", "", &err), 0);
	assert_int_equal(isc_store_cluster_set_state(f->tmp.s, "cl_abs", "running", &err), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	isc_broker_free(f->b);
	store_fixture_cleanup(&f->tmp);
	free(f);
	return 0;
}

static struct isc_node node_get(struct isc_store *s, const char *id)
{
	struct isc_node *nodes = NULL, out = {0};
	struct isc_err err;
	size_t n = 0;

	assert_int_equal(isc_store_node_list(s, "cl_abs", &nodes, &n, &err), 0);
	for (size_t i = 0; i < n; i++)
		if (strcmp(nodes[i].instance_id, id) == 0) {
			out.state = strdup(nodes[i].state);
			out.terminated_at_ms = nodes[i].terminated_at_ms;
			out.absent_since_ms = nodes[i].absent_since_ms;
			out.charged_until_ms = nodes[i].charged_until_ms;
		}
	isc_node_list_free(nodes, n);
	if (!out.state)
		fail_msg("no node %s", id);
	return out;
}

/* Up to when the ledger charged the node (0: never). */
static int64_t charged_until(struct isc_store *s, const char *id)
{
	struct isc_err err;
	int64_t until = 0;
	int found = 0;
	assert_int_equal(isc_store_ledger_node_charged_until(s, id, &until, &found, &err), 0);
	return found ? until : 0;
}

static void meter(struct fixture *f)
{
	struct isc_err err;
	assert_int_equal(broker_meter(f->b, &err), 0);
}

static int missed(struct isc_store *s, const char *id, int64_t at)
{
	struct isc_err err;
	int gone = -1;
	assert_int_equal(isc_store_node_missed(s, id, at, CONFIRM_MS, &gone, &err), 0);
	return gone;
}

static void seen(struct isc_store *s, const char *id, const char *state, int64_t at)
{
	struct isc_err err;
	assert_int_equal(isc_store_node_observe(s, id, state, "10.0.0.1", "", 0, 0, at, &err), 0);
}

/*
 * Item 7: a node missing from the listings is charged up to its first miss, not on
 * while the absence is being confirmed, and not past the termination that absence
 * records (before: node_absence_confirm_ms beyond it).
 */
static void test_missing_node_charged_to_first_miss(void **state)
{
	struct fixture *f = *state;
	int64_t now = isc_wall_ms(), first_miss = now - 20000;
	struct isc_node nd;

	add_node(f->tmp.s, "cl_abs", 0, "i-a", "running", "10.0.0.1", now - 120000);
	assert_int_equal(missed(f->tmp.s, "i-a", first_miss), 0); /* not yet confirmed */
	meter(f);
	assert_int_equal(charged_until(f->tmp.s, "i-a"), first_miss);
	/* Confirmed gone: its termination is the first miss, and nothing more is charged. */
	assert_int_equal(missed(f->tmp.s, "i-a", first_miss + CONFIRM_MS), 1);
	nd = node_get(f->tmp.s, "i-a");
	assert_string_equal(nd.state, "terminated");
	assert_int_equal(nd.terminated_at_ms, first_miss);
	assert_true(isc_node_gone_by_absence(&nd));
	free(nd.state);
	meter(f);
	assert_int_equal(charged_until(f->tmp.s, "i-a"), first_miss);
}

/*
 * Item 1: a node counted terminated by absence that a listing shows running again was
 * never gone. Its recorded termination is dropped, it is charged through while it runs,
 * and up to the termination the cloud then confirms, with no gap and nothing twice.
 */
static void test_false_absence_charged_through(void **state)
{
	struct fixture *f = *state;
	int64_t now = isc_wall_ms(), first_miss = now - 60000, terminated_at;
	struct isc_node nd;
	struct isc_err err;
	size_t n_nodes = 0;
	struct isc_node *in = NULL;

	add_node(f->tmp.s, "cl_abs", 0, "i-b", "running", "10.0.0.1", now - 120000);
	assert_int_equal(missed(f->tmp.s, "i-b", first_miss), 0);
	assert_int_equal(missed(f->tmp.s, "i-b", first_miss + CONFIRM_MS), 1);
	meter(f);
	assert_int_equal(charged_until(f->tmp.s, "i-b"), first_miss);
	/* The cluster is torn down and closed meanwhile (nothing else of it is live)... */
	assert_int_equal(isc_store_cluster_set_state(f->tmp.s, "cl_abs", "closed", &err), 0);
	/* ...and the reconciliation's describe of its region still reads the node: a listing
	 * may show it. The describe of every tick reads only clusters not closed. */
	assert_int_equal(
	    isc_store_node_list_in(f->tmp.s, "aws", "default", "us-east-1", 0, &in, &n_nodes, &err),
	    0);
	assert_int_equal(n_nodes, 0);
	isc_node_list_free(in, n_nodes);
	assert_int_equal(
	    isc_store_node_list_in(f->tmp.s, "aws", "default", "us-east-1", 1, &in, &n_nodes, &err),
	    0);
	assert_int_equal(n_nodes, 1);
	assert_true(isc_node_gone_by_absence(&in[0]));
	assert_true(isc_node_observe_changes(&in[0], "running", "10.0.0.1", "", 0, 0));
	isc_node_list_free(in, n_nodes);
	/* Listed again, running. */
	seen(f->tmp.s, "i-b", "running", isc_wall_ms());
	nd = node_get(f->tmp.s, "i-b");
	assert_string_equal(nd.state, "running");
	assert_int_equal(nd.terminated_at_ms, 0);
	assert_false(isc_node_gone_by_absence(&nd));
	free(nd.state);
	meter(f);
	assert_true(charged_until(f->tmp.s, "i-b") >= now);
	/* The cloud confirms the termination: charged exactly to it, once. */
	terminated_at = isc_wall_ms();
	seen(f->tmp.s, "i-b", "terminated", terminated_at);
	nd = node_get(f->tmp.s, "i-b");
	assert_int_equal(nd.terminated_at_ms, terminated_at);
	free(nd.state);
	meter(f);
	meter(f);
	assert_int_equal(charged_until(f->tmp.s, "i-b"), terminated_at);
	{
		int64_t cost = 0;
		assert_int_equal(isc_store_ledger_experiment_cost(f->tmp.s, "exp_abs", &cost, &err),
		                 0);
		/* One micro per ms from the launch to the confirmed termination, exactly:
		 * each charge is priced from the launch (issue 49). */
		assert_int_equal(cost, terminated_at - (now - 120000));
	}
	/* No longer a node of a closed cluster the describe must read. */
	assert_int_equal(
	    isc_store_node_list_in(f->tmp.s, "aws", "default", "us-east-1", 1, &in, &n_nodes, &err),
	    0);
	assert_int_equal(n_nodes, 0);
	isc_node_list_free(in, n_nodes);
}

/* A node seen again while its absence is being confirmed is charged through too. */
static void test_short_absence_charged_through(void **state)
{
	struct fixture *f = *state;
	int64_t now = isc_wall_ms();

	/* Missed over a charge interval (60 s) ago: the meter charges it through at once. */
	add_node(f->tmp.s, "cl_abs", 0, "i-c", "running", "10.0.0.1", now - 120000);
	assert_int_equal(missed(f->tmp.s, "i-c", now - 90000), 0);
	meter(f);
	assert_int_equal(charged_until(f->tmp.s, "i-c"), now - 90000);
	seen(f->tmp.s, "i-c", "running", isc_wall_ms());
	meter(f);
	assert_true(charged_until(f->tmp.s, "i-c") >= now);
}

/*
 * node_absence_confirm_ms = 0: the first miss is the termination (before: the
 * termination time stayed empty, and the meter charged the node on for ever).
 */
static void test_confirm_zero(void **state)
{
	struct fixture *f = *state;
	int64_t now = isc_wall_ms();
	struct isc_node nd;
	struct isc_err err;
	int gone = 0;

	add_node(f->tmp.s, "cl_abs", 0, "i-d", "running", "10.0.0.1", now - 60000);
	assert_int_equal(isc_store_node_missed(f->tmp.s, "i-d", now - 10000, 0, &gone, &err), 0);
	assert_int_equal(gone, 1);
	nd = node_get(f->tmp.s, "i-d");
	assert_int_equal(nd.terminated_at_ms, now - 10000);
	free(nd.state);
	meter(f);
	assert_int_equal(charged_until(f->tmp.s, "i-d"), now - 10000);
}

/* A node the cloud was seen ending that then leaves the listings is gone for sure. */
static void test_seen_ending_then_missing_is_no_absence(void **state)
{
	struct fixture *f = *state;
	int64_t now = isc_wall_ms();
	struct isc_node nd;

	add_node(f->tmp.s, "cl_abs", 0, "i-e", "running", "10.0.0.1", now - 60000);
	seen(f->tmp.s, "i-e", "shutting-down", now - 40000);
	assert_int_equal(missed(f->tmp.s, "i-e", now - 35000), 0);
	assert_int_equal(missed(f->tmp.s, "i-e", now - 35000 + CONFIRM_MS), 1);
	nd = node_get(f->tmp.s, "i-e");
	assert_string_equal(nd.state, "terminated");
	assert_false(isc_node_gone_by_absence(&nd));
	free(nd.state);
}

/*
 * A node the cloud confirms it no longer has (GCE's 404 after a deletion): terminated
 * at its first miss with no absence mark, so it is charged as a confirmed termination,
 * the provider's minimum included (it ran 20 s of a 60 s minimum), and never looked for
 * again. Ended by absence instead, it would be charged to its first miss only.
 */
static void test_confirmed_gone_is_a_termination(void **state)
{
	struct fixture *f = *state;
	int64_t now = isc_wall_ms(), launched = now - 30000, first_miss = now - 10000;
	struct isc_node nd;
	struct isc_err err;
	int gone = 0;

	add_node(f->tmp.s, "cl_abs", 0, "i-f", "running", "10.0.0.1", launched);
	assert_int_equal(missed(f->tmp.s, "i-f", first_miss), 0);
	assert_int_equal(isc_store_node_gone_confirmed(f->tmp.s, "i-f", now, &gone, &err), 0);
	assert_int_equal(gone, 1);
	nd = node_get(f->tmp.s, "i-f");
	assert_string_equal(nd.state, "terminated");
	assert_int_equal(nd.terminated_at_ms, first_miss);
	assert_false(isc_node_gone_by_absence(&nd));
	free(nd.state);
	meter(f);
	meter(f);
	assert_int_equal(charged_until(f->tmp.s, "i-f"), launched + 60000);
	/* Once terminated, a second confirmation changes nothing. */
	assert_int_equal(isc_store_node_gone_confirmed(f->tmp.s, "i-f", now + 5000, &gone, &err),
	                 0);
	assert_int_equal(gone, 0);
	nd = node_get(f->tmp.s, "i-f");
	assert_int_equal(nd.terminated_at_ms, first_miss);
	free(nd.state);
}

static void gang(struct isc_node *v, size_t n, const char *const *states, const int64_t *notices,
                 const char *const *ips)
{
	for (size_t i = 0; i < n; i++) {
		memset(&v[i], 0, sizeof(v[i]));
		v[i].rank = (int)i;
		v[i].state = (char *)states[i];
		v[i].notice_at_ms = notices[i];
		v[i].private_ip = (char *)ips[i];
		v[i].public_ip = "";
	}
}

/*
 * Item 6: rank 0 of a replacement still booting is lost; rank 1 is kept but still
 * pending (a node of the replacement's own launch), ranks 2 and 3 run. Rank 0 goes to
 * rank 2, a node that is up, not to the booting rank 1 (before: the lowest kept rank).
 */
static void test_rank0_goes_to_a_kept_node_that_is_up(void **state)
{
	const char *states[4] = {"running", "pending", "running", "running"};
	const int64_t notices[4] = {1000, 0, 0, 0};
	const char *ips[4] = {"10.0.0.1", "", "10.0.0.3", "10.0.0.4"};
	struct isc_node v[4];
	int lost[4], remap = 0;

	(void)state;
	gang(v, 4, states, notices, ips);
	assert_int_equal(broker_lost_ranks(v, 4, 0, lost, &remap), 1);
	assert_int_equal(lost[0], 1);
	assert_int_equal(lost[1], 0);
	assert_int_equal(remap, 2);
	/* A kept node that runs with no address yet is not up either. */
	v[2].private_ip = "";
	assert_int_equal(broker_lost_ranks(v, 4, 0, lost, &remap), 1);
	assert_int_equal(remap, 3);
	/* Rank 0 kept: nobody is moved. */
	v[0].notice_at_ms = 0;
	v[1].state = "terminated";
	assert_int_equal(broker_lost_ranks(v, 4, 0, lost, &remap), 1);
	assert_int_equal(lost[1], 1);
	assert_int_equal(remap, -1);
	/* No kept node up yet (every node of the replacement boots): the lowest kept rank,
	 * since no rank starts before all of them run. */
	{
		const char *st3[3] = {"terminated", "pending", "pending"};
		const int64_t no3[3] = {0, 0, 0};
		const char *ip3[3] = {"10.0.0.1", "", ""};
		gang(v, 3, st3, no3, ip3);
		assert_int_equal(broker_lost_ranks(v, 3, 0, lost, &remap), 1);
		assert_int_equal(remap, 1);
		/* A gang whose ranks ran: a pending node is lost too; all lost, nobody moves. */
		assert_int_equal(broker_lost_ranks(v, 3, 1, lost, &remap), 3);
		assert_int_equal(remap, -1);
	}
}

/*
 * Issue 46: the shape families, the stragglers of a gang past its family's boot deadline,
 * and a node in its pull stage that is not called dead.
 */
static void test_families_and_stragglers(void **state)
{
	const char *states[4] = {"running", "pending", "running", "pending"};
	const int64_t notices[4] = {0, 0, 0, 0};
	const char *ips[4] = {"10.0.0.1", "10.0.0.2", "10.0.0.3", ""};
	struct isc_node v[4];
	int late[4];

	(void)state;
	assert_string_equal(broker_boot_family("aws", "g4dn.xlarge"), "gpu");
	assert_string_equal(broker_boot_family("aws", "p5.48xlarge"), "gpu");
	assert_string_equal(broker_boot_family("aws", "g4dn.metal"), "metal");
	assert_string_equal(broker_boot_family("aws", "m7i.large"), "vm");
	assert_string_equal(broker_boot_family("gcp", "a3-highgpu-8g"), "gpu");
	assert_string_equal(broker_boot_family("gcp", "n2-standard-8"), "vm");
	assert_string_equal(broker_boot_family("oci", "BM.GPU.H100.8"), "metal");
	assert_string_equal(broker_boot_family("oci", "VM.GPU.A10.1"), "gpu");
	assert_string_equal(broker_boot_family("oci", "VM.Standard.E4.Flex"), "vm");

	gang(v, 4, states, notices, ips);
	/* Before the deadline: nobody straggles. */
	assert_int_equal(broker_stragglers(v, 4, 1000, 1000 + 240000, 240000, late), 0);
	assert_int_equal(late[1] + late[3], 0);
	/* After it: the two still pending, the two up kept. */
	assert_int_equal(broker_stragglers(v, 4, 1000, 1000 + 240001, 240000, late), 2);
	assert_int_equal(late[0], 0);
	assert_int_equal(late[1], 1);
	assert_int_equal(late[2], 0);
	assert_int_equal(late[3], 1);
	/* A pending node with a notice is lost, not a straggler: the lost-node path's. */
	v[3].notice_at_ms = 5;
	assert_int_equal(broker_stragglers(v, 4, 1000, 1000 + 240001, 240000, late), 0);
	v[3].notice_at_ms = 0;
	/* Nothing up yet: the gang as a whole is late (boot_deadline_ms), not a straggler. */
	{
		const char *st[2] = {"pending", "pending"};
		const int64_t no[2] = {0, 0};
		const char *ip[2] = {"", ""};
		gang(v, 2, st, no, ip);
		assert_int_equal(broker_stragglers(v, 2, 0, 999999999, 1000, late), 0);
	}

	/* The pull stage: under way (up to twice its expected length and 10 s) is alive. */
	assert_int_equal(
	    broker_node_in_pull_stage("pull pytorch/pytorch:latest 100000 275000", 200000), 1);
	assert_int_equal(broker_node_in_pull_stage("pull img:1 100000 275000", 100000 + 560000), 1);
	assert_int_equal(broker_node_in_pull_stage("pull img:1 100000 275000", 100000 + 560001), 0);
	assert_int_equal(broker_node_in_pull_stage("fetch 100000 50000", 120000), 1);
	assert_int_equal(broker_node_in_pull_stage("", 120000), 0);
	assert_int_equal(broker_node_in_pull_stage(NULL, 120000), 0);
	assert_int_equal(broker_node_in_pull_stage("run 100000 5", 100001), 0);
	assert_int_equal(broker_node_in_pull_stage("pull img:1 junk", 100001), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_missing_node_charged_to_first_miss, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_false_absence_charged_through, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_short_absence_charged_through, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_confirm_zero, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_seen_ending_then_missing_is_no_absence, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_confirmed_gone_is_a_termination, setup, teardown),
	    cmocka_unit_test(test_rank0_goes_to_a_kept_node_that_is_up),
	    cmocka_unit_test(test_families_and_stragglers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
