/*
 * The queue's schedule quality and decision speed (docs/queue.md):
 * 10,000 experiments of mixed modes, sizes, run lengths and failures with
 * lost nodes on a 64-node pool, arriving at 90% load, then a backlog of
 * 10,500 arriving at once to time single decisions with at least 10,000
 * queued (goal < 1 ms).
 */
#include "common/clock.h"
#include "queue/sim.h"

#include <stdio.h>
#include <time.h>

/* The thread's CPU time: on a shared 2-core machine wall time mostly measures the others. */
static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int main(void)
{
	struct isc_queue_sim_params p;
	struct isc_queue_sim_result r;
	struct isc_err err = {0};

	isc_queue_sim_params_default(&p);
	int64_t t0 = isc_monotonic_ms();
	if (isc_queue_sim_run(&p, &r, &err)) {
		fprintf(stderr, "bench_queue: %s\n", err.msg);
		return 1;
	}
	printf("simulated %d experiments (%.0f%% cycle) on %d nodes x %d GPUs at %.0f%% load: "
	       "%.1f days in %lld ms\n",
	       p.experiments, p.cycle_share * 100, p.nodes, p.gpus_per_node, p.load * 100,
	       (double)r.sim_ms / 86400000.0, (long long)(isc_monotonic_ms() - t0));
	printf("  %d completed, %d failed, %d unfinished; %d starts, %d pre-emptions, %d node "
	       "losses, %d periods\n",
	       r.completed, r.failed, r.unfinished, r.starts, r.preemptions, r.node_losses,
	       r.periods);
	printf("  pool utilisation while work waits: %.1f%%\n", r.utilisation_waiting * 100);
	printf("  Jain's fairness of interruptible time per period: mean %.3f, worst %.3f over %d "
	       "periods\n",
	       r.jain_mean, r.jain_min, r.jain_periods);
	printf("  worst wait of a cycle experiment before its first run: %.1f s\n",
	       (double)r.worst_cycle_first_wait_ms / 1000.0);
	printf("  worst wait of an interruptible experiment for its next run: %.2f h\n",
	       (double)r.worst_interruptible_wait_ms / 3600000.0);

	isc_queue_sim_params_default(&p);
	p.experiments = 10500;
	p.all_at_once = 1;
	p.max_ticks = 5000;
	p.now_ns = now_ns;
	p.timing_min_queued = 10000;
	if (isc_queue_sim_run(&p, &r, &err)) {
		fprintf(stderr, "bench_queue: %s\n", err.msg);
		return 1;
	}
	printf(
	    "one scheduling decision with >= 10,000 queued (CPU time of %lld decisions, up to %d "
	    "queued): median %.1f us, p99 %.1f us, worst %.1f us (goal < 1 ms)\n",
	    (long long)r.decide_samples, r.max_queued, (double)r.decide_median_ns / 1000.0,
	    (double)r.decide_p99_ns / 1000.0, (double)r.decide_max_ns / 1000.0);
	return r.decide_samples > 0 ? 0 : 1;
}
