/*
 * The burst side of the queue (queue/burst.h): the states and their
 * transitions, who acts on a burst, the broker's step per state, and the
 * waiting order (credits lines per organisation and project, capacity
 * waiters holding back nobody, interrupted bursts first, cancels never held).
 */
#include "queue/burst.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

static void test_state_names_round_trip(void **state)
{
	(void)state;
	for (int i = ISC_BURST_ENQUEUED; i <= ISC_BURST_STOPPED; i++) {
		enum isc_burst_state st;
		const char *name = isc_burst_state_name((enum isc_burst_state)i);
		assert_int_equal(isc_burst_state_parse(name, &st), 0);
		assert_int_equal(st, i);
	}
	enum isc_burst_state st;
	assert_int_equal(isc_burst_state_parse("paused", &st), ISC_EINVALID);
	assert_int_equal(isc_burst_state_parse(NULL, &st), ISC_EINVALID);
	assert_true(isc_burst_is_final(ISC_BURST_STOPPED));
	assert_false(isc_burst_is_final(ISC_BURST_STOPPING));
}

static void test_transitions(void **state)
{
	struct isc_err err;
	(void)state;
	/* the broker's path and its detours */
	const char *ok[][2] = {
	    {"enqueued", "placing"},          {"placing", "provisioning"},
	    {"provisioning", "booting"},      {"booting", "running"},
	    {"running", "placing"},           {"running", "stopping"},
	    {"stopping", "completed"},        {"stopping", "stopped"},
	    {"placing", "waiting"},           {"waiting", "waiting"},
	    {"waiting", "provisioning"},      {"provisioning", "waiting"},
	    {"enqueued", "waiting"},          {"enqueued", "failed"},
	    {"enqueued", "validating"},       {"validating", "placing"},
	    {"validating", "failed"},         {"validating", "validating"},
	    {"validating", "cancelled"},      {"waiting", "stopping"},
	    {"booting", "placing"},           {"placing", "placing"},
	    {"provisioning", "provisioning"},
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (isc_burst_transition_check(ok[i][0], ok[i][1], &err))
			fail_msg("%s -> %s refused: %s", ok[i][0], ok[i][1], err.msg);
	const char *bad[][2] = {
	    {"completed", "placing"}, {"failed", "stopping"},  {"running", "booting"},
	    {"stopping", "running"},  {"enqueued", "running"}, {"validating", "stopping"},
	    {"running", "waiting"},   {"waiting", "booting"},  {"booting", "booting"},
	    {"running", "paused"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (isc_burst_transition_check(bad[i][0], bad[i][1], &err) != ISC_EINVALID)
			fail_msg("%s -> %s allowed", bad[i][0], bad[i][1]);
	assert_int_equal(isc_burst_transition_check("running", "booting", &err), ISC_EINVALID);
	assert_non_null(strstr(err.msg, "from running to booting"));
}

static void test_owner(void **state)
{
	(void)state;
	/* the policy off: the broker has every burst that has not ended */
	assert_int_equal(isc_burst_owner(ISC_BURST_ENQUEUED, 0, 0, 0), ISC_BURST_OWNER_BROKER);
	assert_int_equal(isc_burst_owner(ISC_BURST_COMPLETED, 0, 0, 0), ISC_BURST_OWNER_NONE);
	/* on: a new one is on-prem's for its validation cycle, unless being cancelled */
	assert_int_equal(isc_burst_owner(ISC_BURST_ENQUEUED, 0, 0, 1), ISC_BURST_OWNER_ONPREM);
	assert_int_equal(isc_burst_owner(ISC_BURST_ENQUEUED, 0, 1, 1), ISC_BURST_OWNER_BROKER);
	assert_int_equal(isc_burst_owner(ISC_BURST_VALIDATING, 0, 1, 1), ISC_BURST_OWNER_ONPREM);
	/* one that ran (a validated burst back in enqueued never happens, but counts say) */
	assert_int_equal(isc_burst_owner(ISC_BURST_ENQUEUED, 1, 0, 1), ISC_BURST_OWNER_BROKER);
	assert_int_equal(isc_burst_owner(ISC_BURST_PLACING, 1, 0, 1), ISC_BURST_OWNER_BROKER);
}

static void test_step_for(void **state)
{
	(void)state;
	assert_int_equal(isc_burst_step_for(ISC_BURST_ENQUEUED, 0, 0, 10), ISC_BURST_STEP_PLACE);
	assert_int_equal(isc_burst_step_for(ISC_BURST_WAITING, 0, 20, 10), ISC_BURST_STEP_NONE);
	assert_int_equal(isc_burst_step_for(ISC_BURST_WAITING, 0, 10, 10), ISC_BURST_STEP_PLACE);
	assert_int_equal(isc_burst_step_for(ISC_BURST_WAITING, 1, 20, 10), ISC_BURST_STEP_STOP);
	assert_int_equal(isc_burst_step_for(ISC_BURST_RUNNING, 0, 0, 10), ISC_BURST_STEP_RUN);
	assert_int_equal(isc_burst_step_for(ISC_BURST_STOPPING, 0, 0, 10), ISC_BURST_STEP_STOP);
	assert_int_equal(isc_burst_step_for(ISC_BURST_VALIDATING, 1, 0, 10), ISC_BURST_STEP_NONE);
	assert_int_equal(isc_burst_step_for(ISC_BURST_CANCELLED, 1, 0, 10), ISC_BURST_STEP_NONE);
}

static struct isc_burst_entry burst(enum isc_burst_state st, enum isc_burst_wait why, int64_t org,
                                    const char *project, int64_t created)
{
	return (struct isc_burst_entry){
	    .state = st, .wait = why, .org_id = org, .project_id = project, .created_ms = created};
}

/* An older burst waiting for its organisation's credits holds back newer ones of the org. */
static void test_credits_line_per_org(void **state)
{
	(void)state;
	struct isc_burst_entry v[] = {
	    burst(ISC_BURST_ENQUEUED, ISC_BURST_WAIT_NONE, 1, "p2", 300),       /* newer */
	    burst(ISC_BURST_WAITING, ISC_BURST_WAIT_CREDITS_ORG, 1, "p1", 100), /* head */
	    burst(ISC_BURST_ENQUEUED, ISC_BURST_WAIT_NONE, 2, "q1", 400),       /* other org */
	    burst(ISC_BURST_WAITING, ISC_BURST_WAIT_CREDITS_ORG, 1, "p1", 200), /* behind */
	    burst(ISC_BURST_RUNNING, ISC_BURST_WAIT_NONE, 1, "p1", 50),         /* has a cluster */
	    burst(ISC_BURST_ENQUEUED, ISC_BURST_WAIT_NONE, 1, "p3", 500),       /* newer */
	};
	struct isc_burst_turn t[6];
	v[1].next_attempt_ms = 1000; /* its next try is not due yet */
	v[3].next_attempt_ms = 0;
	assert_int_equal(isc_burst_order(v, 6, 500, t, NULL), 0);
	/* the head waits for its own next try; it holds the org's newer bursts */
	assert_int_equal(t[1].go, 0);
	assert_int_equal(t[1].behind, -1);
	assert_int_equal(t[1].position, 1);
	assert_int_equal(t[1].line, ISC_BURST_WAIT_CREDITS_ORG);
	assert_int_equal(t[3].go, 0);
	assert_int_equal(t[3].behind, 1);
	assert_int_equal(t[3].position, 2);
	assert_int_equal(t[0].go, 0);
	assert_int_equal(t[0].behind, 1);
	assert_int_equal(t[0].position, 3);
	assert_int_equal(t[5].behind, 1);
	assert_int_equal(t[5].position, 4);
	/* another organisation's money is not in that line; a running burst always steps */
	assert_int_equal(t[2].go, 1);
	assert_int_equal(t[2].behind, -1);
	assert_int_equal(t[4].go, 1);
	/* the head's try comes: it goes, and still holds the others this tick */
	assert_int_equal(isc_burst_order(v, 6, 1000, t, NULL), 0);
	assert_int_equal(t[1].go, 1);
	assert_int_equal(t[3].go, 0);
	/* once it has a cluster, the next in line is the head and tries at once */
	v[1].state = ISC_BURST_PROVISIONING;
	assert_int_equal(isc_burst_order(v, 6, 1000, t, NULL), 0);
	assert_int_equal(t[3].go, 1);
	assert_int_equal(t[3].position, 1);
	assert_int_equal(t[0].behind, 3);
	assert_int_equal(t[0].position, 2);
}

/* A project's budget is its own line: the organisation's other projects go on. */
static void test_credits_line_per_project(void **state)
{
	(void)state;
	struct isc_burst_entry v[] = {
	    burst(ISC_BURST_WAITING, ISC_BURST_WAIT_CREDITS_PROJECT, 1, "p1", 100),
	    burst(ISC_BURST_ENQUEUED, ISC_BURST_WAIT_NONE, 1, "p2", 200),
	    burst(ISC_BURST_ENQUEUED, ISC_BURST_WAIT_NONE, 1, "p1", 300),
	    burst(ISC_BURST_ENQUEUED, ISC_BURST_WAIT_NONE, 2, "p1", 400), /* same key, other org */
	    burst(ISC_BURST_ENQUEUED, ISC_BURST_WAIT_NONE, 1, NULL, 500),
	};
	struct isc_burst_turn t[5];
	assert_int_equal(isc_burst_order(v, 5, 0, t, NULL), 0);
	assert_int_equal(t[0].go, 1); /* next_attempt_ms 0: due */
	assert_int_equal(t[1].go, 1);
	assert_int_equal(t[2].go, 0);
	assert_int_equal(t[2].behind, 0);
	assert_int_equal(t[2].line, ISC_BURST_WAIT_CREDITS_PROJECT);
	assert_int_equal(t[3].go, 1);
	assert_int_equal(t[4].go, 1);
}

/* Capacity holds back nobody; its waiters are numbered in arrival order. */
static void test_capacity_holds_nobody(void **state)
{
	(void)state;
	struct isc_burst_entry v[] = {
	    burst(ISC_BURST_WAITING, ISC_BURST_WAIT_CAPACITY, 1, "p1", 200),
	    burst(ISC_BURST_WAITING, ISC_BURST_WAIT_CAPACITY, 1, "p1", 100),
	    burst(ISC_BURST_ENQUEUED, ISC_BURST_WAIT_NONE, 1, "p1", 300),
	    burst(ISC_BURST_WAITING, ISC_BURST_WAIT_OTHER, 1, "p1", 50),
	};
	struct isc_burst_turn t[4];
	v[0].next_attempt_ms = 900;
	v[1].next_attempt_ms = 1100;
	assert_int_equal(isc_burst_order(v, 4, 1000, t, NULL), 0);
	assert_int_equal(t[1].position, 1);
	assert_int_equal(t[0].position, 2);
	assert_int_equal(t[0].go, 1);
	assert_int_equal(t[1].go, 0); /* its own try is later */
	assert_int_equal(t[2].go, 1);
	assert_int_equal(t[2].behind, -1);
	assert_int_equal(t[3].go, 1);
	assert_int_equal(t[3].position, 0);
}

/* An interrupted burst (reprovisioning) goes before the line; a cancel is never held. */
static void test_interrupted_first_cancel_never_held(void **state)
{
	(void)state;
	struct isc_burst_entry v[] = {
	    burst(ISC_BURST_WAITING, ISC_BURST_WAIT_CREDITS_ORG, 1, "p1", 100),
	    burst(ISC_BURST_PLACING, ISC_BURST_WAIT_NONE, 1, "p1", 500),
	    burst(ISC_BURST_WAITING, ISC_BURST_WAIT_BEHIND, 1, "p1", 600),
	    burst(ISC_BURST_VALIDATING, ISC_BURST_WAIT_NONE, 1, "p1", 10),
	    burst(ISC_BURST_FAILED, ISC_BURST_WAIT_NONE, 1, "p1", 10),
	};
	struct isc_burst_turn t[5];
	v[0].next_attempt_ms = 5000;
	v[1].cycle_count = 3; /* interrupted: its replacement is placed first */
	v[2].cancel_requested = 1;
	assert_int_equal(isc_burst_order(v, 5, 1000, t, NULL), 0);
	assert_int_equal(t[1].go, 1);
	assert_int_equal(t[1].behind, -1);
	assert_int_equal(t[2].go, 1);
	assert_int_equal(t[2].behind, -1);
	assert_int_equal(t[3].go, 0); /* on-prem's */
	assert_int_equal(t[4].go, 0);
	/* an interrupted one that waits for credits heads the line, ahead of older new ones */
	v[1].state = ISC_BURST_WAITING;
	v[1].wait = ISC_BURST_WAIT_CREDITS_ORG;
	v[1].next_attempt_ms = 5000;
	v[2].cancel_requested = 0;
	assert_int_equal(isc_burst_order(v, 5, 1000, t, NULL), 0);
	assert_int_equal(t[1].position, 1);
	assert_int_equal(t[0].behind, 1);
	assert_int_equal(t[0].position, 2);
	assert_int_equal(t[2].behind, 1);
	/* one that ran before is never held (it may have a cluster draining): it goes */
	v[0].cycle_count = 1;
	v[0].state = ISC_BURST_PLACING;
	assert_int_equal(isc_burst_order(v, 5, 1000, t, NULL), 0);
	assert_int_equal(t[0].go, 1);
	assert_int_equal(t[0].behind, -1);
	assert_int_equal(t[2].behind, 1);
	v[0].cycle_count = 0;
	v[0].state = ISC_BURST_WAITING;
	/* a held one whose head is gone goes at once: it has no try time of its own */
	v[1].state = ISC_BURST_RUNNING;
	v[0].state = ISC_BURST_CANCELLED;
	assert_int_equal(isc_burst_order(v, 5, 1000, t, NULL), 0);
	assert_int_equal(t[2].go, 1);
	assert_int_equal(isc_burst_order(v, 0, 1000, t, NULL), 0);
}

/* The same arrival times: the caller's order decides, so the answer is stable. */
static void test_order_is_stable(void **state)
{
	(void)state;
	struct isc_burst_entry v[] = {
	    burst(ISC_BURST_WAITING, ISC_BURST_WAIT_CREDITS_ORG, 1, "p1", 100),
	    burst(ISC_BURST_WAITING, ISC_BURST_WAIT_CREDITS_ORG, 1, "p1", 100),
	};
	struct isc_burst_turn t[2];
	assert_int_equal(isc_burst_order(v, 2, 0, t, NULL), 0);
	assert_int_equal(t[0].position, 1);
	assert_int_equal(t[1].behind, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_state_names_round_trip),
	    cmocka_unit_test(test_transitions),
	    cmocka_unit_test(test_owner),
	    cmocka_unit_test(test_step_for),
	    cmocka_unit_test(test_credits_line_per_org),
	    cmocka_unit_test(test_credits_line_per_project),
	    cmocka_unit_test(test_capacity_holds_nobody),
	    cmocka_unit_test(test_interrupted_first_cancel_never_held),
	    cmocka_unit_test(test_order_is_stable),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
