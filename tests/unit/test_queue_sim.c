/*
 * The short simulation `make check` runs: 1,000 experiments of mixed modes,
 * sizes, run lengths and failures, with lost nodes, on a 64-node pool. The
 * simulator checks after every decision that no node is held twice (in its own
 * map, apart from the module's), that a waiting cycle experiment has
 * pre-empted the interruptible runs it needs and none started beside it, and
 * that the period's blocks are contiguous and sum to the period; here we add
 * that nobody starves: every experiment ends, and no wait exceeds its bound.
 */
#include "queue/sim.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>

static void run(struct isc_queue_sim_params *p, struct isc_queue_sim_result *r)
{
	struct isc_err err = {0};
	int rc = isc_queue_sim_run(p, r, &err);
	if (rc)
		fail_msg("%s", err.msg);
	printf(
	    "# %d experiments, %lld ticks, %d starts, %d pre-emptions, %d node losses, "
	    "%d periods; utilisation while waiting %.3f, Jain %.3f (min %.3f), worst cycle first "
	    "wait %lld s, worst interruptible wait %lld s\n",
	    p->experiments, (long long)r->ticks, r->starts, r->preemptions, r->node_losses,
	    r->periods, r->utilisation_waiting, r->jain_mean, r->jain_min,
	    (long long)r->worst_cycle_first_wait_ms / 1000,
	    (long long)r->worst_interruptible_wait_ms / 1000);
	assert_int_equal(r->unfinished, 0);
	assert_int_equal(r->completed + r->failed, p->experiments);
}

static void test_short_simulation(void **st)
{
	(void)st;
	struct isc_queue_sim_params p;
	isc_queue_sim_params_default(&p);
	p.experiments = 1000;
	p.seed = 7;
	p.int_work_min_ms = 10 * 60 * 1000;
	p.int_work_max_ms = 90 * 60 * 1000;
	p.node_loss_per_day = 2.0; /* plenty of interruptions in a short run */
	/* a cycle experiment never waits for more than the cycles ahead of it, an interruptible
	 * one for more than two periods plus the time cycle work holds the pool */
	p.starve_limit_ms = 3 * p.period_ms;
	struct isc_queue_sim_result r;
	run(&p, &r);
	assert_true(r.preemptions > 0);
	assert_true(r.node_losses > 0);
	assert_true(r.failed > 0);
	assert_true(r.periods > 1);
	assert_true(r.jain_periods > 0);
}

/* Seconds instead of minutes, as the integration test runs it: same rules, other scale. */
static void test_short_scale(void **st)
{
	(void)st;
	struct isc_queue_sim_params p;
	isc_queue_sim_params_default(&p);
	p.experiments = 300;
	p.seed = 11;
	p.nodes = 4;
	p.cycle_ms = 2000;
	p.period_ms = 20000;
	p.grace_ms = 500;
	p.tick_ms = 100;
	p.int_work_min_ms = 5000;
	p.int_work_max_ms = 60000;
	p.starve_limit_ms = 0;
	p.node_loss_per_day = 0;
	struct isc_queue_sim_result r;
	run(&p, &r);
}

/* Everything at once: the queue drains a backlog without breaking a rule. */
static void test_backlog(void **st)
{
	(void)st;
	struct isc_queue_sim_params p;
	isc_queue_sim_params_default(&p);
	p.experiments = 600;
	p.all_at_once = 1;
	p.seed = 3;
	p.int_work_min_ms = 10 * 60 * 1000;
	p.int_work_max_ms = 60 * 60 * 1000;
	struct isc_queue_sim_result r;
	run(&p, &r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_short_simulation),
	    cmocka_unit_test(test_short_scale),
	    cmocka_unit_test(test_backlog),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
