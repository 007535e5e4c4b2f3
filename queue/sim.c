/*
 * The queue simulator (sim.h). One struct per simulated experiment with what
 * the "container" would know (how much work it has done, when it fails), a
 * list of running ones, and the pool as the simulator sees it. Randomness is
 * a seeded xorshift, so a run is repeatable.
 */
#include "queue/sim.h"

#include "queue/queue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum sim_state { S_FUTURE, S_WAITING, S_RUNNING, S_STOPPING, S_DONE };

struct sim_exp {
	int64_t arrive_ms, work_ms, fail_at_ms, progress_ms;
	enum isc_queue_mode mode;
	int gpus, cycles;
	enum sim_state st;
	int64_t stop_at_ms, waiting_since_ms, first_start_ms;
	int nnodes;
	int nodes[ISC_QUEUE_MAX_GPUS];
	int run_pos;
	int64_t period_time_ms; /* run time in the current period */
	int member;             /* member of the current period */
};

struct sim {
	const struct isc_queue_sim_params *p;
	struct isc_queue_sim_result *r;
	struct isc_queue *q;
	uint64_t rng;
	struct sim_exp *e;
	int *order; /* experiments by arrival */
	int *running;
	int n_running;
	int *holder;         /* per node: experiment index + 1, 0 when free */
	int64_t *down_until; /* per node: 0 when up */
	int64_t now;
	int arrived, finished;
	int64_t *samples;
	int64_t n_samples, cap_samples;
	double util_sum;
	int64_t util_ticks;
	double jain_sum;
	int64_t period_number;
};

void isc_queue_sim_params_default(struct isc_queue_sim_params *p)
{
	*p = (struct isc_queue_sim_params){
	    .seed = 42,
	    .experiments = 10000,
	    .nodes = 64,
	    .gpus_per_node = 8,
	    .load = 0.9,
	    .cycle_share = 0.6,
	    .cycle_ms = ISC_QUEUE_CYCLE_MS_DEFAULT,
	    .period_ms = ISC_QUEUE_PERIOD_MS_DEFAULT,
	    .grace_ms = 10000,
	    .tick_ms = 5000,
	    .int_work_min_ms = 20 * 60 * 1000,
	    .int_work_max_ms = 4 * 3600 * 1000,
	    .fail_share = 0.05,
	    .node_loss_per_day = 0.2,
	    .node_down_ms = 15 * 60 * 1000,
	    .starve_limit_ms = 0,
	};
}

static uint64_t rnd(struct sim *s)
{
	uint64_t x = s->rng;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	s->rng = x;
	return x;
}

static double rnd01(struct sim *s)
{
	return (double)(rnd(s) >> 11) / (double)(1ull << 53);
}

static int64_t rnd_range(struct sim *s, int64_t lo, int64_t hi)
{
	return lo + (int64_t)(rnd01(s) * (double)(hi - lo));
}

static int cmp_arrival(const void *a, const void *b, void *ctx)
{
	const struct sim_exp *e = ctx;
	int64_t x = e[*(const int *)a].arrive_ms, y = e[*(const int *)b].arrive_ms;
	return (x > y) - (x < y);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/* Sizes as the platform sees them: mostly one node or less, some multi-node. */
static int pick_gpus(struct sim *s)
{
	static const int sizes[] = {1, 2, 4, 8, 8, 8, 16, 16, 24, 32, 48, 64, 72};
	int pool = s->p->nodes * s->p->gpus_per_node, g;
	do /* a size the pool can never hold would only wait: the module's tests cover that */
		g = sizes[rnd(s) % (sizeof(sizes) / sizeof(sizes[0]))];
	while (g > pool && pool >= 1);
	return g;
}

static int generate(struct sim *s)
{
	const struct isc_queue_sim_params *p = s->p;
	double node_ms = 0;
	for (int i = 0; i < p->experiments; i++) {
		struct sim_exp *e = &s->e[i];
		e->mode = rnd01(s) < p->cycle_share ? ISC_QUEUE_CYCLE : ISC_QUEUE_INTERRUPTIBLE;
		e->gpus = pick_gpus(s);
		e->cycles = 1 + (int)(rnd(s) % 5);
		if (e->mode == ISC_QUEUE_CYCLE)
			/* some finish inside their cycles, the rest are stopped by the cycle count
			 */
			e->work_ms = rnd_range(s, p->cycle_ms / 3, 8 * p->cycle_ms);
		else
			e->work_ms = rnd_range(s, p->int_work_min_ms, p->int_work_max_ms);
		e->fail_at_ms = rnd01(s) < p->fail_share ? rnd_range(s, 0, e->work_ms) : -1;
		int nn, np;
		int per = p->gpus_per_node;
		nn = (e->gpus + per - 1) / per;
		while (e->gpus % nn)
			nn++;
		(void)np;
		int64_t run = e->mode == ISC_QUEUE_CYCLE && e->work_ms > e->cycles * p->cycle_ms
		                  ? e->cycles * p->cycle_ms
		                  : e->work_ms;
		node_ms += (double)nn * (double)(run + p->grace_ms);
		e->first_start_ms = -1;
		e->run_pos = -1;
	}
	double horizon = node_ms / ((double)p->nodes * (p->load > 0 ? p->load : 1));
	for (int i = 0; i < p->experiments; i++) {
		s->e[i].arrive_ms = p->all_at_once ? 0 : (int64_t)(rnd01(s) * horizon);
		s->order[i] = i;
	}
	qsort_r(s->order, (size_t)p->experiments, sizeof(int), cmp_arrival, s->e);
	return 0;
}

static int fail(struct sim *s, struct isc_err *err, const char *what)
{
	return isc_err_set(err, ISC_EINVALID, "simulation at %lld ms (tick %lld): %s",
	                   (long long)s->now, (long long)s->r->ticks, what);
}

static void release(struct sim *s, int i)
{
	struct sim_exp *e = &s->e[i];
	for (int k = 0; k < e->nnodes; k++)
		if (s->holder[e->nodes[k]] == i + 1)
			s->holder[e->nodes[k]] = 0;
	e->nnodes = 0;
	int pos = e->run_pos;
	s->running[pos] = s->running[--s->n_running];
	s->e[s->running[pos]].run_pos = pos;
	e->run_pos = -1;
}

/* Reports a run's end to the queue and updates the simulator's view. */
static int end_run(struct sim *s, int i, enum isc_queue_outcome how, struct isc_err *err)
{
	enum isc_queue_state final;
	int rc = isc_queue_run_ended(s->q, i, how, s->now, &final, err);
	if (rc)
		return rc;
	release(s, i);
	struct sim_exp *e = &s->e[i];
	if (final == ISC_QUEUE_COMPLETED || final == ISC_QUEUE_FAILED ||
	    final == ISC_QUEUE_CANCELLED) {
		e->st = S_DONE;
		s->finished++;
		if (final == ISC_QUEUE_COMPLETED)
			s->r->completed++;
		else
			s->r->failed++;
		return isc_queue_forget(s->q, i, err);
	}
	e->st = S_WAITING;
	e->waiting_since_ms = s->now;
	return 0;
}

static int apply(struct sim *s, const struct isc_queue_decision *d, size_t n, struct isc_err *err)
{
	char why[256];
	for (size_t k = 0; k < n; k++) {
		int i = (int)d[k].exp_id;
		struct sim_exp *e = &s->e[i];
		if (d[k].action == ISC_QUEUE_STOP) {
			if (e->st != S_RUNNING)
				return fail(s, err, "a STOP for a run that is not running");
			e->st = S_STOPPING;
			e->stop_at_ms = s->now + s->p->grace_ms;
			if (d[k].reason == ISC_QUEUE_STOP_PREEMPTED)
				s->r->preemptions++;
			continue;
		}
		if (e->st != S_WAITING)
			return fail(s, err, "a START for an experiment that is not waiting");
		if (d[k].nnodes * d[k].nproc != e->gpus || d[k].nproc > s->p->gpus_per_node) {
			snprintf(why, sizeof(why), "experiment %d: %d x %d for %d GPUs", i,
			         d[k].nnodes, d[k].nproc, e->gpus);
			return fail(s, err, why);
		}
		for (int j = 0; j < d[k].nnodes; j++) {
			int node = (int)d[k].node_ids[j];
			if (node < 0 || node >= s->p->nodes || s->holder[node] ||
			    s->down_until[node]) {
				snprintf(why, sizeof(why),
				         "over-committed: experiment %d given node %d (held by %d, "
				         "down until %lld)",
				         i, node,
				         node >= 0 && node < s->p->nodes ? s->holder[node] - 1 : -1,
				         (long long)(node >= 0 && node < s->p->nodes
				                         ? s->down_until[node]
				                         : 0));
				return fail(s, err, why);
			}
			s->holder[node] = i + 1;
			e->nodes[j] = node;
		}
		e->nnodes = d[k].nnodes;
		int64_t waited = s->now - e->waiting_since_ms;
		if (e->first_start_ms < 0) {
			e->first_start_ms = s->now;
			if (e->mode == ISC_QUEUE_CYCLE && waited > s->r->worst_cycle_first_wait_ms)
				s->r->worst_cycle_first_wait_ms = waited;
		}
		if (e->mode == ISC_QUEUE_INTERRUPTIBLE &&
		    waited > s->r->worst_interruptible_wait_ms)
			s->r->worst_interruptible_wait_ms = waited;
		if (s->p->starve_limit_ms > 0 && waited > s->p->starve_limit_ms) {
			snprintf(why, sizeof(why), "experiment %d (%s, %d GPUs) waited %lld ms", i,
			         e->mode == ISC_QUEUE_CYCLE ? "cycle" : "interruptible", e->gpus,
			         (long long)waited);
			return fail(s, err, why);
		}
		e->st = S_RUNNING;
		e->run_pos = s->n_running;
		s->running[s->n_running++] = i;
		s->r->starts++;
	}
	return 0;
}

/* Jain's index of the members' time in the period that just ended, then the new members. */
static void period_rolled(struct sim *s)
{
	double sum = 0, sq = 0;
	int n = 0;
	for (int i = 0; i < s->p->experiments; i++) {
		struct sim_exp *e = &s->e[i];
		if (e->member && e->st != S_DONE) {
			double x = (double)e->period_time_ms;
			sum += x;
			sq += x * x;
			n++;
		}
	}
	if (n >= 2 && sq > 0) {
		double j = sum * sum / ((double)n * sq);
		s->jain_sum += j;
		if (s->r->jain_periods == 0 || j < s->r->jain_min)
			s->r->jain_min = j;
		s->r->jain_periods++;
	}
	for (int i = 0; i < s->p->experiments; i++) {
		struct sim_exp *e = &s->e[i];
		int64_t a, b;
		e->period_time_ms = 0;
		e->member =
		    e->st != S_DONE && e->st != S_FUTURE && isc_queue_block(s->q, i, &a, &b) == 0;
	}
	s->r->periods++;
}

static int tick(struct sim *s, struct isc_err *err)
{
	const struct isc_queue_sim_params *p = s->p;
	int rc;
	s->now += p->tick_ms;
	s->r->ticks++;

	while (s->arrived < p->experiments && s->e[s->order[s->arrived]].arrive_ms <= s->now) {
		int i = s->order[s->arrived++];
		struct sim_exp *e = &s->e[i];
		struct isc_queue_submit sub = {
		    .exp_id = i, .mode = e->mode, .gpus = e->gpus, .max_cycles = e->cycles};
		rc = isc_queue_submit(s->q, &sub, s->now, err);
		if (rc)
			return rc;
		e->st = S_WAITING;
		e->waiting_since_ms = s->now;
	}

	/* nodes coming back */
	for (int n = 0; n < p->nodes; n++)
		if (s->down_until[n] && s->down_until[n] <= s->now) {
			s->down_until[n] = 0;
			if ((rc = isc_queue_node_set_state(s->q, n, ISC_QUEUE_NODE_UP, err)))
				return rc;
		}

	/* runs: stops that finished their grace, progress, exits */
	for (int k = 0; k < s->n_running;) {
		int i = s->running[k];
		struct sim_exp *e = &s->e[i];
		if (e->st == S_STOPPING) {
			if (e->stop_at_ms <= s->now) {
				if ((rc = end_run(s, i, ISC_QUEUE_STOPPED, err)))
					return rc;
				continue; /* release moved another run into k */
			}
			k++;
			continue;
		}
		e->progress_ms += p->tick_ms;
		if (e->mode == ISC_QUEUE_INTERRUPTIBLE)
			e->period_time_ms += p->tick_ms;
		enum isc_queue_outcome how;
		if (e->fail_at_ms >= 0 && e->progress_ms >= e->fail_at_ms)
			how = ISC_QUEUE_EXIT_FAILED;
		else if (e->progress_ms >= e->work_ms)
			how = ISC_QUEUE_EXIT_OK;
		else {
			k++;
			continue;
		}
		if ((rc = end_run(s, i, how, err)))
			return rc;
	}

	/* a node lost now and then: its run is interrupted */
	double p_loss = p->node_loss_per_day * (double)p->nodes * (double)p->tick_ms / 86400000.0;
	if (p_loss > 0 && rnd01(s) < p_loss) {
		int n = (int)(rnd(s) % (uint64_t)p->nodes);
		if (!s->down_until[n]) {
			s->down_until[n] = s->now + p->node_down_ms;
			s->r->node_losses++;
			if ((rc = isc_queue_node_set_state(s->q, n, ISC_QUEUE_NODE_DOWN, err)))
				return rc;
			if (s->holder[n] &&
			    (rc = end_run(s, s->holder[n] - 1, ISC_QUEUE_NODE_LOST, err)))
				return rc;
		}
	}

	int queued = s->arrived - s->finished - s->n_running;
	if (queued > s->r->max_queued)
		s->r->max_queued = queued;
	int64_t t0 = p->now_ns ? p->now_ns() : 0;
	size_t n;
	const struct isc_queue_decision *d = isc_queue_decide(s->q, s->now, &n);
	if (p->now_ns && queued >= p->timing_min_queued) {
		int64_t dt = p->now_ns() - t0;
		if (s->n_samples == s->cap_samples) {
			size_t cap = s->cap_samples ? (size_t)s->cap_samples * 2 : 4096;
			int64_t *ns = realloc(s->samples, cap * sizeof(*ns));
			if (!ns)
				return isc_err_set(err, ISC_ENOMEM, "simulation: out of memory");
			s->samples = ns;
			s->cap_samples = (int64_t)cap;
		}
		s->samples[s->n_samples++] = dt;
	}
	s->r->decisions += (int64_t)n;
	if ((rc = isc_queue_check(s->q, err)))
		return isc_err_wrap(err, "simulation at %lld ms (tick %lld)", (long long)s->now,
		                    (long long)s->r->ticks);
	if ((rc = apply(s, d, n, err)))
		return rc;

	struct isc_queue_period per;
	isc_queue_period_get(s->q, &per);
	if (per.number != s->period_number) {
		s->period_number = per.number;
		period_rolled(s);
	}

	/* utilisation while work waits: nodes held over nodes up */
	int up = 0, busy = 0;
	for (int k = 0; k < p->nodes; k++) {
		up += !s->down_until[k];
		busy += !s->down_until[k] && s->holder[k];
	}
	queued = s->arrived - s->finished - s->n_running;
	if (queued > 0 && up > 0) {
		s->util_sum += (double)busy / up;
		s->util_ticks++;
	}
	return 0;
}

int isc_queue_sim_run(const struct isc_queue_sim_params *p, struct isc_queue_sim_result *out,
                      struct isc_err *err)
{
	struct sim s = {.p = p, .r = out, .rng = p->seed ? p->seed : 1};
	struct isc_queue_config cfg = {.cycle_ms = p->cycle_ms, .period_ms = p->period_ms};
	int rc;
	memset(out, 0, sizeof(*out));
	if (p->experiments < 1 || p->nodes < 1 || p->gpus_per_node < 1 || p->tick_ms < 1)
		return isc_err_set(err, ISC_EINVALID,
		                   "simulation: experiments, nodes, GPUs per node "
		                   "and tick must be positive");
	s.e = calloc((size_t)p->experiments, sizeof(*s.e));
	s.order = calloc((size_t)p->experiments, sizeof(int));
	s.running = calloc((size_t)p->nodes + 1, sizeof(int));
	s.holder = calloc((size_t)p->nodes, sizeof(int));
	s.down_until = calloc((size_t)p->nodes, sizeof(int64_t));
	if (!s.e || !s.order || !s.running || !s.holder || !s.down_until) {
		rc = isc_err_set(err, ISC_ENOMEM, "simulation: out of memory");
		goto out;
	}
	if ((rc = isc_queue_new(&cfg, 0, &s.q, err)))
		goto out;
	for (int n = 0; n < p->nodes; n++)
		if ((rc = isc_queue_node_add(s.q, n, p->gpus_per_node, err)))
			goto out;
	generate(&s);
	while (s.finished < p->experiments && (p->max_ticks == 0 || out->ticks < p->max_ticks))
		if ((rc = tick(&s, err)))
			goto out;
	out->sim_ms = s.now;
	out->unfinished = p->experiments - s.finished;
	out->utilisation_waiting = s.util_ticks ? s.util_sum / (double)s.util_ticks : 1.0;
	out->jain_mean = out->jain_periods ? s.jain_sum / out->jain_periods : 1.0;
	if (!out->jain_periods)
		out->jain_min = 1.0;
	if (s.n_samples) {
		qsort(s.samples, (size_t)s.n_samples, sizeof(int64_t), cmp_i64);
		out->decide_samples = s.n_samples;
		out->decide_median_ns = s.samples[s.n_samples / 2];
		out->decide_p99_ns = s.samples[(s.n_samples * 99) / 100];
		out->decide_max_ns = s.samples[s.n_samples - 1];
	}
	/* the time waited by those still waiting counts too */
	for (int i = 0; i < p->experiments; i++) {
		struct sim_exp *e = &s.e[i];
		if (e->st != S_WAITING)
			continue;
		int64_t waited = s.now - e->waiting_since_ms;
		if (e->mode == ISC_QUEUE_INTERRUPTIBLE && waited > out->worst_interruptible_wait_ms)
			out->worst_interruptible_wait_ms = waited;
		if (e->mode == ISC_QUEUE_CYCLE && e->first_start_ms < 0 &&
		    waited > out->worst_cycle_first_wait_ms)
			out->worst_cycle_first_wait_ms = waited;
	}
	rc = 0;
out:
	isc_queue_free(s.q);
	free(s.e);
	free(s.order);
	free(s.running);
	free(s.holder);
	free(s.down_until);
	free(s.samples);
	return rc;
}
