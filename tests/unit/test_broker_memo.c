/*
 * The broker's notes between steps survive a restart of iscd (issue 30, item 5):
 * why a waiting burst waits (and with it the credits line it heads or waits in),
 * the shapes excluded for the rest of a placement round, and the periodic sync
 * clocks. Each test "restarts" by freeing the broker and its store and making new
 * ones on the same home, then asks the same questions: the answers must not change.
 */
#include "broker/broker_int.h"
#include "launcher/launcher.h"
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

struct fixture {
	struct store_fixture tmp;
	struct isc_broker *b;
};

static void start_broker(struct fixture *f)
{
	struct isc_err err;
	if (isc_broker_new(f->tmp.s, &f->b, &err))
		fail_msg("isc_broker_new: %s", err.msg);
}

static void start(struct fixture *f)
{
	struct isc_err err;
	assert_int_equal(isc_store_open(f->tmp.home, 1, &f->tmp.s, &err), 0);
	start_broker(f);
}

static void stop(struct fixture *f)
{
	isc_broker_free(f->b);
	isc_store_free(f->tmp.s);
	f->b = NULL;
	f->tmp.s = NULL;
}

/* What a restart of iscd does to the broker's memory: everything in it is gone. */
static void restart(struct fixture *f)
{
	stop(f);
	start(f);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char *path;
	FILE *fp;

	assert_non_null(f);
	store_fixture_init(&f->tmp, "memo");
	/* The broker reads its config from the store's home when it starts. */
	assert_int_not_equal(asprintf(&path, "%s/config.toml", f->tmp.home), -1);
	assert_non_null(fp = fopen(path, "w"));
	fputs("broker_id = \"memo-test\"\ncheckpoint_sync_ms = 60000\nlossy_sync_ms = 30000\n", fp);
	fclose(fp);
	free(path);
	start_broker(f);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	stop(f);
	store_fixture_cleanup(&f->tmp);
	free(f);
	return 0;
}

static void test_wait_kinds_survive(void **state)
{
	struct fixture *f = *state;

	broker_wait_note(f->b, "exp_head", ISC_BURST_WAIT_CREDITS_ORG);
	broker_wait_note(f->b, "exp_behind", ISC_BURST_WAIT_BEHIND);
	broker_wait_note(f->b, "exp_budget", ISC_BURST_WAIT_CREDITS_PROJECT);
	broker_wait_note(f->b, "exp_budget", ISC_BURST_WAIT_CAPACITY); /* a newer reason wins */
	restart(f);
	assert_int_equal(broker_wait_kind(f->b, "exp_head"), ISC_BURST_WAIT_CREDITS_ORG);
	assert_int_equal(broker_wait_kind(f->b, "exp_behind"), ISC_BURST_WAIT_BEHIND);
	assert_int_equal(broker_wait_kind(f->b, "exp_budget"), ISC_BURST_WAIT_CAPACITY);
	assert_int_equal(broker_wait_kind(f->b, "exp_never"), ISC_BURST_WAIT_NONE);
}

static int keep_head(const char *id, void *ctx)
{
	(void)ctx;
	return strcmp(id, "exp_head") == 0;
}

static void test_prune_forgets_only_the_rest(void **state)
{
	struct fixture *f = *state;

	broker_wait_note(f->b, "exp_head", ISC_BURST_WAIT_CREDITS_ORG);
	broker_wait_note(f->b, "exp_gone", ISC_BURST_WAIT_CAPACITY);
	broker_exclude_shape(f->b, "exp_head", "shape-a");
	broker_exclude_shape(f->b, "exp_gone", "shape-a");
	broker_wait_prune(f->b, keep_head, NULL);
	restart(f);
	assert_int_equal(broker_wait_kind(f->b, "exp_head"), ISC_BURST_WAIT_CREDITS_ORG);
	assert_int_equal(broker_wait_kind(f->b, "exp_gone"), ISC_BURST_WAIT_NONE);
	assert_true(broker_shape_excluded(f->b, "exp_head", "shape-a"));
	assert_false(broker_shape_excluded(f->b, "exp_gone", "shape-a"));
}

/* The waiting order after a restart is the order before it: the line and places hold. */
static void test_credits_line_survives(void **state)
{
	struct fixture *f = *state;
	struct isc_burst_entry v[2] = {
	    {.state = ISC_BURST_WAITING,
	     .org_id = 1,
	     .project_id = "p",
	     .created_ms = 1,
	     .next_attempt_ms = 1000000},
	    {.state = ISC_BURST_ENQUEUED, .org_id = 1, .project_id = "p", .created_ms = 2},
	};
	struct isc_burst_turn before[2], after[2];
	struct isc_err err;

	broker_wait_note(f->b, "exp_head", ISC_BURST_WAIT_CREDITS_ORG);
	v[0].wait = broker_wait_kind(f->b, "exp_head");
	assert_int_equal(isc_burst_order(v, 2, 10, before, &err), 0);
	assert_int_equal(before[1].go, 0);
	assert_int_equal(before[1].behind, 0);
	assert_int_equal(before[1].position, 2);
	restart(f);
	v[0].wait = broker_wait_kind(f->b, "exp_head");
	assert_int_equal(isc_burst_order(v, 2, 10, after, &err), 0);
	assert_memory_equal(before, after, sizeof(before));
}

static void test_exclusions_survive(void **state)
{
	struct fixture *f = *state;

	broker_exclude_shape(f->b, "exp_x", "aws-us-east-1-g4dn.xlarge-spot");
	broker_exclude_shape(f->b, "exp_x", "aws-us-east-1-g4dn.xlarge-spot"); /* once */
	broker_exclude_shape(f->b, "exp_y", "aws-us-east-1-g5.xlarge-spot");
	restart(f);
	assert_true(broker_shape_excluded(f->b, "exp_x", "aws-us-east-1-g4dn.xlarge-spot"));
	assert_false(broker_shape_excluded(f->b, "exp_x", "aws-us-east-1-g5.xlarge-spot"));
	assert_true(broker_shape_excluded(f->b, "exp_y", "aws-us-east-1-g5.xlarge-spot"));
	/* A new round starts with every shape again, for that experiment only. */
	broker_exclusions_clear(f->b, "exp_x");
	restart(f);
	assert_false(broker_shape_excluded(f->b, "exp_x", "aws-us-east-1-g4dn.xlarge-spot"));
	assert_true(broker_shape_excluded(f->b, "exp_y", "aws-us-east-1-g5.xlarge-spot"));
}

static void test_sync_clocks_survive(void **state)
{
	struct fixture *f = *state;
	const int64_t t0 = INT64_C(1700000000000);

	/* The clock starts at the first call; nothing is due then. */
	assert_int_equal(broker_sync_due(f->b, "cl_1", t0), 0);
	assert_int_equal(broker_sync_due(f->b, "cl_1", t0 + 29999), 0);
	restart(f);
	/* Due when it would have been without the restart (a new clock would wait 30 s more). */
	assert_int_equal(broker_sync_due(f->b, "cl_1", t0 + 30000), ISC_ARTIFACT_LOSSY);
	restart(f);
	assert_int_equal(broker_sync_due(f->b, "cl_1", t0 + 59999), 0);
	assert_int_equal(broker_sync_due(f->b, "cl_1", t0 + 60000),
	                 ISC_ARTIFACT_CHECKPOINTS | ISC_ARTIFACT_CRUD | ISC_ARTIFACT_LOSSY);
	restart(f);
	assert_int_equal(broker_sync_due(f->b, "cl_1", t0 + 60001), 0);
	/* Forgotten with its cluster: a new clock. */
	broker_sync_forget(f->b, "cl_1");
	assert_int_equal(broker_sync_due(f->b, "cl_1", t0 + 200000), 0);
	assert_int_equal(broker_sync_due(f->b, "cl_1", t0 + 230000), ISC_ARTIFACT_LOSSY);
}

/* A config without broker_id is refused with its path named (the message was once built
 * from the config after it had been freed: ASan's heap-use-after-free). */
static void test_no_broker_id_named(void **state)
{
	struct fixture *f = *state;
	struct isc_broker *b = NULL;
	struct isc_err err;
	char *path;
	FILE *fp;

	assert_int_not_equal(asprintf(&path, "%s/config.toml", f->tmp.home), -1);
	assert_non_null(fp = fopen(path, "w"));
	fputs("checkpoint_sync_ms = 60000\n", fp);
	fclose(fp);
	assert_int_equal(isc_broker_new(f->tmp.s, &b, &err), ISC_EINVALID);
	assert_null(b);
	assert_non_null(strstr(err.msg, "config.toml has no broker_id: run 'isc init'"));
	free(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_wait_kinds_survive, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_no_broker_id_named, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_prune_forgets_only_the_rest, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_credits_line_survives, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_exclusions_survive, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_sync_clocks_survive, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
