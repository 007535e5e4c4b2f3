/*
 * The queue's rules, one test each: layout on whole nodes, cycle runs and
 * the back of the queue, first in first out, pre-emption of interruptible
 * work, blocks per period, failures, lost nodes, cancel, drain. Cycles of
 * 1 s and periods of 10 s on a fake clock; every step checks the invariants.
 */
#include "queue/queue.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#define CYCLE  1000
#define PERIOD 10000

static struct isc_queue *pool(int nodes, int gpus)
{
	struct isc_queue_config cfg = {.cycle_ms = CYCLE, .period_ms = PERIOD};
	struct isc_queue *q = NULL;
	assert_int_equal(isc_queue_new(&cfg, 0, &q, NULL), 0);
	for (int i = 0; i < nodes; i++)
		assert_int_equal(isc_queue_node_add(q, 100 + i, gpus, NULL), 0);
	return q;
}

static void submit(struct isc_queue *q, int64_t id, enum isc_queue_mode mode, int gpus, int cycles,
                   int64_t now)
{
	struct isc_queue_submit s = {
	    .exp_id = id, .mode = mode, .gpus = gpus, .max_cycles = cycles};
	struct isc_err err;
	assert_int_equal(isc_queue_submit(q, &s, now, &err), 0);
}

/* The decisions at now, with the invariants checked after them. */
static const struct isc_queue_decision *decide(struct isc_queue *q, int64_t now, size_t *n)
{
	const struct isc_queue_decision *d = isc_queue_decide(q, now, n);
	struct isc_err err;
	int rc = isc_queue_check(q, &err);
	if (rc)
		fail_msg("invariant: %s", err.msg);
	return d;
}

static const struct isc_queue_decision *find(const struct isc_queue_decision *d, size_t n,
                                             enum isc_queue_action a, int64_t id)
{
	for (size_t i = 0; i < n; i++)
		if (d[i].action == a && d[i].exp_id == id)
			return &d[i];
	return NULL;
}

static enum isc_queue_state state_of(struct isc_queue *q, int64_t id)
{
	struct isc_queue_info in;
	assert_int_equal(isc_queue_info(q, id, 0, &in, NULL), 0);
	return in.state;
}

static void ended(struct isc_queue *q, int64_t id, enum isc_queue_outcome how, int64_t now)
{
	struct isc_err err;
	assert_int_equal(isc_queue_run_ended(q, id, how, now, NULL, &err), 0);
}

static void test_layout_whole_nodes(void **st)
{
	(void)st;
	struct isc_queue *q = pool(4, 8);
	submit(q, 1, ISC_QUEUE_CYCLE, 12, 1, 0); /* 12 on 8-GPU nodes: 2 nodes x 6 */
	submit(q, 2, ISC_QUEUE_CYCLE, 5, 1, 0);  /* 1 node x 5, the node is whole */
	submit(q, 3, ISC_QUEUE_CYCLE, 8, 1, 0);
	submit(q, 4, ISC_QUEUE_CYCLE, 1, 1, 0); /* no node left */
	size_t n;
	const struct isc_queue_decision *d = decide(q, 0, &n);
	assert_int_equal(n, 3);
	const struct isc_queue_decision *a = find(d, n, ISC_QUEUE_START, 1);
	assert_non_null(a);
	assert_int_equal(a->nnodes, 2);
	assert_int_equal(a->nproc, 6);
	assert_int_equal(a->cycle_count, 1);
	assert_int_equal(a->resume, 0);
	assert_int_equal(a->cycle_time_ms, CYCLE);
	assert_true(a->node_ids[0] != a->node_ids[1]);
	a = find(d, n, ISC_QUEUE_START, 2);
	assert_int_equal(a->nnodes, 1);
	assert_int_equal(a->nproc, 5);
	assert_null(find(d, n, ISC_QUEUE_START, 4));
	assert_int_equal(state_of(q, 4), ISC_QUEUE_ENQUEUED);
	isc_queue_free(q);
}

static void test_layout_mixed_pool(void **st)
{
	(void)st;
	struct isc_queue *q = pool(2, 4);
	assert_int_equal(isc_queue_node_add(q, 500, 8, NULL), 0);
	submit(q, 1, ISC_QUEUE_CYCLE, 8, 1, 0); /* fewest nodes: the one 8-GPU node */
	submit(q, 2, ISC_QUEUE_CYCLE, 8, 1, 0); /* then two 4-GPU nodes */
	size_t n;
	const struct isc_queue_decision *d = decide(q, 0, &n);
	assert_int_equal(n, 2);
	assert_int_equal(d[0].nnodes, 1);
	assert_int_equal(d[0].node_ids[0], 500);
	assert_int_equal(d[1].nnodes, 2);
	assert_int_equal(d[1].nproc, 4);
	isc_queue_free(q);
}

static void test_cycle_runs_pauses_completes(void **st)
{
	(void)st;
	struct isc_queue *q = pool(1, 8);
	submit(q, 1, ISC_QUEUE_CYCLE, 8, 3, 0);
	size_t n;
	int64_t t = 0;
	for (int c = 1; c <= 3; c++) {
		const struct isc_queue_decision *d = decide(q, t, &n);
		assert_int_equal(n, 1);
		assert_int_equal(d[0].action, ISC_QUEUE_START);
		assert_int_equal(d[0].cycle_count, c);
		assert_int_equal(d[0].resume, c > 1);
		decide(q, t + CYCLE - 1, &n);
		assert_int_equal(n, 0); /* not before the cycle is over */
		d = decide(q, t + CYCLE, &n);
		assert_int_equal(n, 1);
		assert_int_equal(d[0].action, ISC_QUEUE_STOP);
		assert_int_equal(d[0].reason,
		                 c < 3 ? ISC_QUEUE_STOP_CYCLE_END : ISC_QUEUE_STOP_LAST_CYCLE);
		assert_int_equal(state_of(q, 1), ISC_QUEUE_STOPPING);
		decide(q, t + CYCLE + 10, &n);
		assert_int_equal(n, 0); /* nodes are held through the grace period */
		ended(q, 1, ISC_QUEUE_STOPPED, t + CYCLE + 200);
		t += CYCLE + 200;
		assert_int_equal(state_of(q, 1), c < 3 ? ISC_QUEUE_PAUSED : ISC_QUEUE_COMPLETED);
	}
	struct isc_queue_info in;
	assert_int_equal(isc_queue_info(q, 1, t, &in, NULL), 0);
	assert_int_equal(in.cycles_done, 3);
	assert_int_equal(in.cycle_count, 3);
	decide(q, t, &n);
	assert_int_equal(n, 0);
	isc_queue_free(q);
}

static void test_cycle_back_of_queue(void **st)
{
	(void)st;
	struct isc_queue *q = pool(2, 8);
	submit(q, 1, ISC_QUEUE_CYCLE, 8, 5, 0);
	submit(q, 2, ISC_QUEUE_CYCLE, 8, 5, 0);
	submit(q, 3, ISC_QUEUE_CYCLE, 8, 5, 0);
	size_t n;
	decide(q, 0, &n);
	assert_int_equal(n, 2);
	struct isc_queue_info in;
	assert_int_equal(isc_queue_info(q, 3, 0, &in, NULL), 0);
	assert_int_equal(in.position, 1);
	assert_int_equal(in.next_start_ms, CYCLE); /* one wave of the pool */
	decide(q, CYCLE, &n);
	assert_int_equal(n, 2);
	ended(q, 1, ISC_QUEUE_STOPPED, CYCLE + 50);
	/* 1 went to the back: behind 3 */
	assert_int_equal(isc_queue_info(q, 1, CYCLE + 50, &in, NULL), 0);
	assert_int_equal(in.position, 2);
	const struct isc_queue_decision *d = decide(q, CYCLE + 50, &n);
	assert_int_equal(n, 1);
	assert_int_equal(d[0].exp_id, 3);
	ended(q, 2, ISC_QUEUE_STOPPED, CYCLE + 60);
	d = decide(q, CYCLE + 60, &n);
	assert_int_equal(n, 1);
	assert_int_equal(d[0].exp_id, 1);
	assert_int_equal(d[0].cycle_count, 2);
	isc_queue_free(q);
}

static void test_cycle_head_not_overtaken(void **st)
{
	(void)st;
	struct isc_queue *q = pool(2, 8);
	submit(q, 1, ISC_QUEUE_CYCLE, 8, 1, 0);
	size_t n;
	decide(q, 0, &n);
	submit(q, 2, ISC_QUEUE_CYCLE, 16, 1, 1); /* needs both nodes */
	submit(q, 3, ISC_QUEUE_CYCLE, 8, 1, 2);  /* would fit the free node */
	decide(q, 10, &n);
	assert_int_equal(n, 0); /* 3 waits behind 2, which holds the free node */
	decide(q, CYCLE, &n);
	ended(q, 1, ISC_QUEUE_STOPPED, CYCLE + 1);
	const struct isc_queue_decision *d = decide(q, CYCLE + 1, &n);
	assert_int_equal(n, 1);
	assert_int_equal(d[0].exp_id, 2);
	assert_int_equal(d[0].nnodes, 2);
	isc_queue_free(q);
}

static void test_cycle_preempts_interruptible(void **st)
{
	(void)st;
	struct isc_queue *q = pool(4, 8);
	submit(q, 10, ISC_QUEUE_INTERRUPTIBLE, 32, 0, 0);
	size_t n;
	const struct isc_queue_decision *d = decide(q, 0, &n);
	assert_int_equal(n, 1);
	assert_int_equal(d[0].cycle_time_ms, PERIOD); /* alone: the whole period is its block */
	submit(q, 1, ISC_QUEUE_CYCLE, 8, 1, 1000);
	d = decide(q, 1000, &n);
	assert_int_equal(n, 1);
	assert_int_equal(d[0].action, ISC_QUEUE_STOP);
	assert_int_equal(d[0].exp_id, 10);
	assert_int_equal(d[0].reason, ISC_QUEUE_STOP_PREEMPTED);
	decide(q, 1100, &n);
	assert_int_equal(n, 0); /* grace: the cycle waits for the nodes */
	ended(q, 10, ISC_QUEUE_STOPPED, 1500);
	d = decide(q, 1500, &n);
	assert_int_equal(n, 1);
	assert_int_equal(d[0].exp_id, 1);
	/* 3 nodes are free, but no interruptible run while a cycle experiment is queued */
	assert_null(find(d, n, ISC_QUEUE_START, 10));
	struct isc_queue_info in;
	assert_int_equal(isc_queue_info(q, 10, 1500, &in, NULL), 0);
	assert_int_equal(in.owed_ms, PERIOD - 1500);
	decide(q, 1500 + CYCLE, &n);
	ended(q, 1, ISC_QUEUE_STOPPED, 2600);
	assert_int_equal(state_of(q, 1), ISC_QUEUE_COMPLETED);
	d = decide(q, 2600, &n);
	assert_int_equal(n, 1);
	assert_int_equal(d[0].exp_id, 10);
	assert_int_equal(d[0].resume, 1);
	assert_int_equal(d[0].cycle_count, 2);
	assert_int_equal(d[0].cycle_time_ms, PERIOD - 2600); /* the rest, up to the period's end */
	isc_queue_free(q);
}

static void test_preempts_only_what_it_needs(void **st)
{
	(void)st;
	struct isc_queue *q = pool(4, 8);
	submit(q, 10, ISC_QUEUE_INTERRUPTIBLE, 16, 0, 0);
	submit(q, 11, ISC_QUEUE_INTERRUPTIBLE, 8, 0, 0);
	submit(q, 12, ISC_QUEUE_INTERRUPTIBLE, 8, 0, 0);
	size_t n;
	decide(q, 0, &n);
	assert_int_equal(n, 3); /* 2 + 1 + 1 nodes: one round */
	submit(q, 1, ISC_QUEUE_CYCLE, 8, 1, 100);
	const struct isc_queue_decision *d = decide(q, 100, &n);
	assert_int_equal(n, 1); /* the largest holder goes: two nodes for a one-node need */
	assert_int_equal(d[0].exp_id, 10);
	assert_int_equal(state_of(q, 11), ISC_QUEUE_RUNNING);
	isc_queue_free(q);
}

static void test_blocks_contiguous_in_order(void **st)
{
	(void)st;
	struct isc_queue *q = pool(2, 8);
	submit(q, 1, ISC_QUEUE_INTERRUPTIBLE, 16, 0, 0);
	submit(q, 2, ISC_QUEUE_INTERRUPTIBLE, 16, 0, 0);
	submit(q, 3, ISC_QUEUE_INTERRUPTIBLE, 16, 0, 0);
	size_t n;
	const struct isc_queue_decision *d = decide(q, 0, &n);
	struct isc_queue_period p;
	isc_queue_period_get(q, &p);
	assert_int_equal(p.rounds, 3);
	assert_int_equal(p.members, 3);
	int64_t s[3], l[3];
	for (int i = 0; i < 3; i++)
		assert_int_equal(isc_queue_block(q, i + 1, &s[i], &l[i]), 0);
	assert_int_equal(s[0], 0);
	assert_int_equal(l[0], 3334);
	assert_int_equal(s[1], 3334);
	assert_int_equal(l[1], 3333);
	assert_int_equal(s[2], 6667);
	assert_int_equal(s[2] + l[2], PERIOD);
	assert_int_equal(n, 1);
	assert_int_equal(d[0].exp_id, 1);
	assert_int_equal(d[0].cycle_time_ms, 3334);
	decide(q, 3000, &n);
	assert_int_equal(n, 0);
	d = decide(q, 3334, &n);
	assert_int_equal(n, 1);
	assert_int_equal(d[0].reason, ISC_QUEUE_STOP_BLOCK_END);
	ended(q, 1, ISC_QUEUE_STOPPED, 3400);
	d = decide(q, 3400, &n);
	assert_int_equal(n, 1);
	assert_int_equal(d[0].exp_id, 2);
	assert_int_equal(d[0].cycle_time_ms, 3333);
	/* 1 used its block: it waits for the next period, not for 3 */
	struct isc_queue_info in;
	assert_int_equal(isc_queue_info(q, 1, 3400, &in, NULL), 0);
	assert_int_equal(in.next_start_ms, PERIOD);
	isc_queue_free(q);
}

static void test_blocks_packed_side_by_side(void **st)
{
	(void)st;
	struct isc_queue *q = pool(4, 8);
	submit(q, 1, ISC_QUEUE_INTERRUPTIBLE, 16, 0, 0);
	submit(q, 2, ISC_QUEUE_INTERRUPTIBLE, 16, 0, 0);
	size_t n;
	const struct isc_queue_decision *d = decide(q, 0, &n);
	assert_int_equal(n, 2);
	assert_int_equal(d[0].cycle_time_ms, PERIOD);
	assert_int_equal(d[1].cycle_time_ms, PERIOD);
	isc_queue_free(q);
}

static void test_period_end_reapportions(void **st)
{
	(void)st;
	struct isc_queue *q = pool(2, 8);
	submit(q, 1, ISC_QUEUE_INTERRUPTIBLE, 16, 0, 0);
	size_t n;
	decide(q, 0, &n);
	submit(q, 2, ISC_QUEUE_INTERRUPTIBLE, 16, 0, 10); /* waits for the next period */
	decide(q, 10, &n);
	assert_int_equal(n, 0);
	struct isc_queue_info in;
	assert_int_equal(isc_queue_info(q, 2, 10, &in, NULL), 0);
	assert_int_equal(in.next_start_ms, PERIOD);
	const struct isc_queue_decision *d = decide(q, PERIOD, &n);
	assert_int_equal(n, 1);
	assert_int_equal(d[0].action, ISC_QUEUE_STOP);
	assert_true(d[0].reason == ISC_QUEUE_STOP_PERIOD_END ||
	            d[0].reason == ISC_QUEUE_STOP_BLOCK_END);
	struct isc_queue_period p;
	isc_queue_period_get(q, &p);
	assert_int_equal(p.members, 2);
	assert_int_equal(p.rounds, 2);
	ended(q, 1, ISC_QUEUE_STOPPED, PERIOD + 100);
	d = decide(q, PERIOD + 100, &n);
	assert_int_equal(n, 1);
	assert_int_equal(d[0].exp_id, 1); /* round 0 of the new period */
	assert_int_equal(d[0].cycle_count, 2);
	assert_int_equal(d[0].cycle_time_ms, PERIOD / 2);
	isc_queue_free(q);
}

static void test_newcomer_when_pool_idle(void **st)
{
	(void)st;
	struct isc_queue *q = pool(2, 8);
	size_t n;
	decide(q, 0, &n);
	submit(q, 1, ISC_QUEUE_INTERRUPTIBLE, 8, 0, 500);
	const struct isc_queue_decision *d = decide(q, 500, &n);
	assert_int_equal(n, 1); /* nothing apportioned: a period starts now */
	assert_int_equal(d[0].cycle_time_ms, PERIOD);
	isc_queue_free(q);
}

static void test_failure_leaves_queue(void **st)
{
	(void)st;
	struct isc_queue *q = pool(1, 8);
	submit(q, 1, ISC_QUEUE_CYCLE, 8, 5, 0);
	submit(q, 2, ISC_QUEUE_CYCLE, 8, 5, 0);
	size_t n;
	decide(q, 0, &n);
	ended(q, 1, ISC_QUEUE_EXIT_FAILED, 300);
	assert_int_equal(state_of(q, 1), ISC_QUEUE_FAILED);
	const struct isc_queue_decision *d = decide(q, 300, &n);
	assert_int_equal(n, 1);
	assert_int_equal(d[0].exp_id, 2);
	decide(q, 300 + CYCLE, &n);
	ended(q, 2, ISC_QUEUE_STOPPED, 1400);
	d = decide(q, 1400, &n);
	assert_int_equal(d[0].exp_id, 2); /* 1 never comes back */
	struct isc_err err;
	assert_int_equal(isc_queue_run_ended(q, 1, ISC_QUEUE_STOPPED, 1500, NULL, &err),
	                 ISC_ECONFLICT);
	assert_int_equal(isc_queue_forget(q, 1, NULL), 0);
	assert_int_equal(isc_queue_info(q, 1, 0, &(struct isc_queue_info){0}, NULL), ISC_ENOTFOUND);
	isc_queue_free(q);
}

static void test_exit_ok_completes(void **st)
{
	(void)st;
	struct isc_queue *q = pool(1, 8);
	submit(q, 1, ISC_QUEUE_INTERRUPTIBLE, 8, 0, 0);
	size_t n;
	decide(q, 0, &n);
	ended(q, 1, ISC_QUEUE_EXIT_OK, 700);
	assert_int_equal(state_of(q, 1), ISC_QUEUE_COMPLETED);
	decide(q, 800, &n);
	assert_int_equal(n, 0);
	isc_queue_free(q);
}

static void test_node_lost_interrupts(void **st)
{
	(void)st;
	struct isc_queue *q = pool(3, 8);
	submit(q, 1, ISC_QUEUE_CYCLE, 8, 2, 0);
	submit(q, 2, ISC_QUEUE_CYCLE, 8, 2, 0);
	submit(q, 3, ISC_QUEUE_CYCLE, 8, 2, 0);
	submit(q, 4, ISC_QUEUE_CYCLE, 8, 2, 0);
	size_t n;
	const struct isc_queue_decision *d = decide(q, 0, &n);
	int64_t lost = d[0].node_ids[0];
	assert_int_equal(d[0].exp_id, 1);
	assert_int_equal(isc_queue_node_set_state(q, lost, ISC_QUEUE_NODE_DOWN, NULL), 0);
	ended(q, 1, ISC_QUEUE_NODE_LOST, 400);
	struct isc_queue_info in;
	assert_int_equal(isc_queue_info(q, 1, 400, &in, NULL), 0);
	assert_int_equal(in.state, ISC_QUEUE_PAUSED);
	assert_int_equal(in.position, 1); /* in front of 4 */
	assert_int_equal(in.cycles_done, 0);
	decide(q, 400, &n);
	assert_int_equal(n, 0); /* the down node is not given out */
	decide(q, CYCLE, &n);
	ended(q, 2, ISC_QUEUE_STOPPED, CYCLE + 10);
	d = decide(q, CYCLE + 10, &n);
	assert_int_equal(n, 1);
	assert_int_equal(d[0].exp_id, 1);
	assert_int_equal(d[0].cycle_count, 2); /* a resume counts, as a reprovision does */
	assert_true(d[0].node_ids[0] != lost);
	isc_queue_free(q);
}

static void test_cancel(void **st)
{
	(void)st;
	struct isc_queue *q = pool(1, 8);
	submit(q, 1, ISC_QUEUE_CYCLE, 8, 2, 0);
	submit(q, 2, ISC_QUEUE_CYCLE, 8, 2, 0);
	submit(q, 3, ISC_QUEUE_INTERRUPTIBLE, 8, 0, 0);
	size_t n;
	decide(q, 0, &n);
	int stopping = -1;
	assert_int_equal(isc_queue_cancel(q, 2, &stopping, NULL), 0);
	assert_int_equal(stopping, 0);
	assert_int_equal(state_of(q, 2), ISC_QUEUE_CANCELLED);
	assert_int_equal(isc_queue_cancel(q, 3, &stopping, NULL), 0);
	assert_int_equal(state_of(q, 3), ISC_QUEUE_CANCELLED);
	assert_int_equal(isc_queue_cancel(q, 1, &stopping, NULL), 0);
	assert_int_equal(stopping, 1);
	const struct isc_queue_decision *d = decide(q, 10, &n);
	assert_int_equal(n, 1);
	assert_int_equal(d[0].reason, ISC_QUEUE_STOP_CANCELLED);
	ended(q, 1, ISC_QUEUE_STOPPED, 50);
	assert_int_equal(state_of(q, 1), ISC_QUEUE_CANCELLED);
	struct isc_err err;
	assert_int_equal(isc_queue_cancel(q, 1, &stopping, &err), ISC_ECONFLICT);
	assert_int_equal(isc_queue_cancel(q, 99, &stopping, &err), ISC_ENOTFOUND);
	decide(q, 60, &n);
	assert_int_equal(n, 0);
	isc_queue_free(q);
}

static void test_drain_and_remove(void **st)
{
	(void)st;
	struct isc_queue *q = pool(2, 8);
	submit(q, 1, ISC_QUEUE_CYCLE, 8, 1, 0);
	size_t n;
	const struct isc_queue_decision *d = decide(q, 0, &n);
	int64_t held = d[0].node_ids[0], other = held == 100 ? 101 : 100;
	struct isc_err err;
	assert_int_equal(isc_queue_node_remove(q, held, &err), ISC_ECONFLICT);
	assert_non_null(strstr(err.msg, "drain"));
	assert_int_equal(isc_queue_node_set_state(q, other, ISC_QUEUE_NODE_DRAINING, NULL), 0);
	submit(q, 2, ISC_QUEUE_CYCLE, 8, 1, 1);
	decide(q, 1, &n);
	assert_int_equal(n, 0); /* the draining node gets nothing */
	assert_int_equal(isc_queue_node_remove(q, other, NULL), 0);
	decide(q, CYCLE, &n);
	ended(q, 1, ISC_QUEUE_STOPPED, CYCLE + 1);
	d = decide(q, CYCLE + 1, &n);
	assert_int_equal(n, 1);
	assert_int_equal(d[0].node_ids[0], held);
	isc_queue_free(q);
}

static void test_too_big_for_pool_does_not_block(void **st)
{
	(void)st;
	struct isc_queue *q = pool(2, 8);
	submit(q, 1, ISC_QUEUE_CYCLE, 64, 1, 0); /* 8 nodes: never fits */
	submit(q, 2, ISC_QUEUE_CYCLE, 8, 1, 0);
	submit(q, 3, ISC_QUEUE_INTERRUPTIBLE, 8, 0, 0);
	size_t n;
	const struct isc_queue_decision *d = decide(q, 0, &n);
	assert_int_equal(n, 2);
	assert_non_null(find(d, n, ISC_QUEUE_START, 2));
	assert_non_null(find(d, n, ISC_QUEUE_START, 3));
	isc_queue_free(q);
}

static void test_bad_input(void **st)
{
	(void)st;
	struct isc_queue *q = pool(1, 8);
	struct isc_err err;
	struct isc_queue_submit s = {
	    .exp_id = 1, .mode = ISC_QUEUE_CYCLE, .gpus = 0, .max_cycles = 1};
	assert_int_equal(isc_queue_submit(q, &s, 0, &err), ISC_EINVALID);
	assert_non_null(strstr(err.msg, "gpus"));
	s.gpus = 73;
	assert_int_equal(isc_queue_submit(q, &s, 0, &err), ISC_EINVALID);
	s.gpus = 8;
	s.max_cycles = 6;
	assert_int_equal(isc_queue_submit(q, &s, 0, &err), ISC_EINVALID);
	assert_non_null(strstr(err.msg, "max_rapid_cycles"));
	s.max_cycles = 5;
	assert_int_equal(isc_queue_submit(q, &s, 0, &err), 0);
	assert_int_equal(isc_queue_submit(q, &s, 0, &err), ISC_ECONFLICT);
	assert_int_equal(isc_queue_node_add(q, 100, 8, &err), ISC_ECONFLICT);
	assert_int_equal(isc_queue_node_add(q, 200, 0, &err), ISC_EINVALID);
	assert_int_equal(isc_queue_run_ended(q, 1, ISC_QUEUE_STOPPED, 0, NULL, &err),
	                 ISC_ECONFLICT);
	struct isc_queue_config bad = {.cycle_ms = 0, .period_ms = 1};
	struct isc_queue *q2 = NULL;
	assert_int_equal(isc_queue_new(&bad, 0, &q2, &err), ISC_EINVALID);
	enum isc_queue_mode m;
	assert_int_equal(isc_queue_mode_parse("interruptible", &m), 0);
	assert_int_equal(m, ISC_QUEUE_INTERRUPTIBLE);
	assert_int_equal(isc_queue_mode_parse("burst", &m), ISC_EINVALID);
	isc_queue_free(q);
}

static void test_restore(void **st)
{
	(void)st;
	struct isc_queue *q = pool(1, 8);
	struct isc_queue_submit s = {
	    .exp_id = 7, .mode = ISC_QUEUE_CYCLE, .gpus = 8, .max_cycles = 3};
	assert_int_equal(isc_queue_restore(q, &s, 0, 2, 2, NULL), 0);
	size_t n;
	const struct isc_queue_decision *d = decide(q, 0, &n);
	assert_int_equal(d[0].cycle_count, 3);
	assert_int_equal(d[0].resume, 1);
	d = decide(q, CYCLE, &n);
	assert_int_equal(d[0].reason, ISC_QUEUE_STOP_LAST_CYCLE);
	assert_int_equal(
	    isc_queue_restore(q,
	                      &(struct isc_queue_submit){
	                          .exp_id = 8, .mode = ISC_QUEUE_CYCLE, .gpus = 8, .max_cycles = 3},
	                      0, 1, 2, NULL),
	    ISC_EINVALID);
	isc_queue_free(q);
}

static void test_slot_reuse_after_forget(void **st)
{
	(void)st;
	struct isc_queue *q = pool(1, 8);
	size_t n;
	for (int64_t id = 1; id <= 200; id++) {
		submit(q, id, id % 2 ? ISC_QUEUE_CYCLE : ISC_QUEUE_INTERRUPTIBLE, 8, 1, id);
		int stopping;
		assert_int_equal(isc_queue_cancel(q, id, &stopping, NULL), 0);
		assert_int_equal(isc_queue_forget(q, id, NULL), 0);
		decide(q, id, &n);
	}
	submit(q, 1000, ISC_QUEUE_INTERRUPTIBLE, 8, 0, 300);
	const struct isc_queue_decision *d = decide(q, 300, &n);
	assert_int_equal(n, 1);
	assert_int_equal(d[0].exp_id, 1000);
	isc_queue_free(q);
}

static struct isc_queue_wait wait_of(struct isc_queue *q, int64_t id)
{
	struct isc_queue_wait w;
	struct isc_err err;
	assert_int_equal(isc_queue_wait_info(q, id, &w, &err), 0);
	return w;
}

/* What a waiting experiment waits for: the pool never holds it, nodes out, busy, cycles first. */
static void test_wait_info(void **st)
{
	(void)st;
	struct isc_queue *q = pool(4, 1);
	struct isc_err err;
	submit(q, 1, ISC_QUEUE_CYCLE, 8, 1, 0); /* 8 nodes of 1 GPU: never */
	submit(q, 2, ISC_QUEUE_CYCLE, 4, 1, 0); /* takes the whole pool */
	submit(q, 3, ISC_QUEUE_CYCLE, 1, 1, 0);
	submit(q, 4, ISC_QUEUE_INTERRUPTIBLE, 1, 0, 0);
	struct isc_queue_wait w = wait_of(q, 1);
	assert_int_equal(w.why, ISC_QUEUE_NEVER_FITS);
	assert_int_equal(w.nnodes, 8);
	assert_int_equal(w.node_gpus, 1);
	assert_int_equal(w.registered_nodes, 4);
	assert_int_equal(wait_of(q, 3).why, ISC_QUEUE_READY);
	size_t n;
	decide(q, 0, &n);
	assert_int_equal(wait_of(q, 2).why, ISC_QUEUE_READY); /* running: not waiting */
	w = wait_of(q, 3);
	assert_int_equal(w.why, ISC_QUEUE_POOL_BUSY);
	assert_int_equal(w.nnodes, 1);
	assert_int_equal(w.free_nodes, 0);
	assert_int_equal(w.usable_nodes, 4);
	assert_int_equal(wait_of(q, 4).why, ISC_QUEUE_CYCLES_FIRST);
	/* the pool drained and down: the registered nodes could hold it, the up ones cannot */
	ended(q, 2, ISC_QUEUE_EXIT_OK, 100);
	for (int i = 0; i < 4; i++)
		assert_int_equal(
		    isc_queue_node_set_state(
		        q, 100 + i, i % 2 ? ISC_QUEUE_NODE_DOWN : ISC_QUEUE_NODE_DRAINING, &err),
		    0);
	w = wait_of(q, 3);
	assert_int_equal(w.why, ISC_QUEUE_NODES_OUT);
	assert_int_equal(w.usable_nodes, 0);
	assert_int_equal(w.registered_nodes, 4);
	assert_int_equal(wait_of(q, 1).why, ISC_QUEUE_NEVER_FITS);
	/* a larger node joins: 8 GPUs fit one node of 8 */
	assert_int_equal(isc_queue_node_add(q, 200, 8, NULL), 0);
	w = wait_of(q, 1);
	assert_int_equal(w.why, ISC_QUEUE_READY);
	assert_int_equal(w.node_gpus, 8);
	assert_int_equal(w.nnodes, 1);
	assert_int_equal(isc_queue_wait_info(q, 99, &w, &err), ISC_ENOTFOUND);
	isc_queue_free(q);
	/* an empty pool never holds anything */
	q = pool(0, 1);
	submit(q, 1, ISC_QUEUE_CYCLE, 1, 1, 0);
	w = wait_of(q, 1);
	assert_int_equal(w.why, ISC_QUEUE_NEVER_FITS);
	assert_int_equal(w.registered_nodes, 0);
	assert_int_equal(w.nnodes, 0);
	isc_queue_free(q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_layout_whole_nodes),
	    cmocka_unit_test(test_layout_mixed_pool),
	    cmocka_unit_test(test_cycle_runs_pauses_completes),
	    cmocka_unit_test(test_cycle_back_of_queue),
	    cmocka_unit_test(test_cycle_head_not_overtaken),
	    cmocka_unit_test(test_cycle_preempts_interruptible),
	    cmocka_unit_test(test_preempts_only_what_it_needs),
	    cmocka_unit_test(test_blocks_contiguous_in_order),
	    cmocka_unit_test(test_blocks_packed_side_by_side),
	    cmocka_unit_test(test_period_end_reapportions),
	    cmocka_unit_test(test_newcomer_when_pool_idle),
	    cmocka_unit_test(test_failure_leaves_queue),
	    cmocka_unit_test(test_exit_ok_completes),
	    cmocka_unit_test(test_node_lost_interrupts),
	    cmocka_unit_test(test_cancel),
	    cmocka_unit_test(test_drain_and_remove),
	    cmocka_unit_test(test_too_big_for_pool_does_not_block),
	    cmocka_unit_test(test_bad_input),
	    cmocka_unit_test(test_restore),
	    cmocka_unit_test(test_slot_reuse_after_forget),
	    cmocka_unit_test(test_wait_info),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
