/*
 * A simulator over the queue module: experiments of mixed modes, sizes, run
 * lengths and failures arrive at a pool, runs progress tick by tick, stops take
 * a grace period, nodes get lost and come back. No processes and no sleeping:
 * simulated time only. It checks the queue's invariants after every decision
 * (and keeps its own map of which run holds which node, so over-commitment is
 * caught independently of the module's bookkeeping) and measures the
 * schedule's quality. `make check` runs a short simulation, `make bench` the
 * 10,000-experiment one (tests/unit/test_queue_sim.c, tests/bench/bench_queue.c).
 */
#ifndef ISC_QUEUE_SIM_H
#define ISC_QUEUE_SIM_H

#include "common/err.h"

#include <stdint.h>

struct isc_queue_sim_params {
	uint64_t seed;
	int experiments;
	int nodes, gpus_per_node;
	double load;        /* offered node-time over pool capacity (arrivals spread to match) */
	int all_at_once;    /* every experiment arrives at time 0 instead */
	double cycle_share; /* fraction of experiments in cycle mode */
	int64_t cycle_ms, period_ms, grace_ms, tick_ms;
	int64_t int_work_min_ms, int_work_max_ms; /* interruptible run lengths */
	double fail_share;        /* fraction of experiments whose run fails at some point */
	double node_loss_per_day; /* expected node losses per node per day */
	int64_t node_down_ms;     /* how long a lost node stays away */
	int64_t max_ticks;        /* 0: until every experiment ended */
	int64_t starve_limit_ms;  /* a wait longer than this is starvation (0: no limit) */
	/* Optional: a monotonic clock in ns to time each decision, taken only while at least
	 * timing_min_queued experiments wait. */
	int64_t (*now_ns)(void);
	int timing_min_queued;
};

/* Defaults: 64 nodes of 8 GPUs, 90 s cycles, 2 h periods, 10 s grace, 5 s ticks. */
void isc_queue_sim_params_default(struct isc_queue_sim_params *p);

struct isc_queue_sim_result {
	int64_t sim_ms, ticks, decisions;
	int completed, failed, unfinished;
	int starts, preemptions, node_losses, periods;
	double utilisation_waiting; /* busy nodes / usable nodes, over ticks where work waited */
	double jain_mean, jain_min; /* over periods with at least 2 members to the end */
	int jain_periods;
	int64_t worst_cycle_first_wait_ms, worst_interruptible_wait_ms;
	/* decision times (ns), when now_ns was given */
	int64_t decide_samples, decide_median_ns, decide_p99_ns, decide_max_ns;
	int max_queued;
};

/*
 * Runs a simulation. ISC_EINVALID with what broke when an invariant fails (the
 * tick and the experiment named), or when an experiment starved; ISC_ENOMEM.
 */
int isc_queue_sim_run(const struct isc_queue_sim_params *p, struct isc_queue_sim_result *out,
                      struct isc_err *err);

#endif
