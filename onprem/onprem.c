/*
 * On-prem execution's tick (see onprem.h and docs/queue.md):
 *   1. apply what finished workers found (a boot, a stop, a probe);
 *   2. read the pool from the store into the queue (added, drained, removed);
 *   3. read new work: cycle and interruptible experiments, and bursts waiting
 *      for their validation cycle when burst_validation is on; cancellations;
 *   4. poll the followers of running runs for exits;
 *   5. ask the queue for its decisions and start a worker for each;
 *   6. probe the pool's nodes: every node_probe_ms, and every second the ones
 *      that hold a run or are unreachable (one worker per node at a time);
 *   7. record each experiment's place in the queue for isc status.
 * Only this thread writes the store; workers get copies and report back. The
 * statuses are the queue's state names (isc_queue_state_name), plus "validating"
 * for a burst's validation cycle.
 */
#include "onprem/onprem_int.h"

#include "common/clock.h"
#include "common/log.h"
#include "datasets/datasets.h"
#include "launcher/keys.h"
#include "launcher/launcher.h"
#include "queue/burst.h"
#include "queue/queue.h"
#include "store/store_experiments.h"
#include "store/store_pool.h"
#include "store/store_queue.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Nodes that hold a run (their loss interrupts it) and unreachable ones (so they are
 * back soon after they answer) are probed this often; the others every node_probe_ms. */
#define PROBE_EVERY_MS 1000
/* At most this many probes at once (each a thread that may wait ISC_ONPREM_PROBE_MS). */
#define PROBES_MAX 16

enum run_phase {
	PHASE_BOOTING,  /* a boot worker runs */
	PHASE_RUNNING,  /* followed */
	PHASE_STOPPING, /* a stop worker runs; the queue hears of the end when it is done */
};

struct run {
	enum run_phase phase;
	struct onprem_job *job;           /* the boot or stop worker, NULL while running */
	struct isc_launch_follow *follow; /* while running */
	struct onprem_job *spec;          /* the finished boot job: what the run is */
	int stop_wanted;                  /* the queue said stop while the boot was running */
	enum isc_queue_outcome outcome;   /* told to the queue once the stop worker is done */
	enum isc_queue_stop_reason reason;
	int queue_stop; /* the stop is the queue's decision (reason is valid) */
	char why[300];
	struct onprem_job *sync;                /* a periodic artifact sync in progress */
	int64_t checkpoints_at_ms, lossy_at_ms; /* last periodic sync (or the run's start) */
};

struct exp {
	int64_t qid;
	char *id;
	char *status;   /* the store's status as this thread last wrote or read it */
	int validation; /* a burst running its validation cycle */
	int cancel_seen;
	/* what its status reason last said it waits for (review_waits) */
	enum isc_queue_blocker blocker;
	struct run *run;
	struct isc_queue_row written; /* the queue_state row last written */
	struct exp *next;
};

struct node {
	int64_t id;
	char *host, *user;
	int port, gpus;
	char state[16];               /* as in the store */
	char reason[ISC_ERR_MSG_MAX]; /* as in the store: why its last probe failed */
	int in_queue;                 /* added to the queue */
	int orphan;                   /* a run a previous iscd left is being stopped here */
	int64_t first_fail_ms;    /* first failed probe of the current streak; 0 when answering */
	struct onprem_job *probe; /* a probe in progress */
	int64_t probed_ms;        /* when the last probe started */
	struct node *next;
};

struct orphan {
	struct onprem_job *job;
	char *exp_id;
	struct orphan *next;
};

struct isc_onprem {
	struct isc_store *store;
	struct onprem_env env;
	struct isc_queue *q;
	struct exp *exps;
	struct node *nodes;
	struct orphan *orphans;
	int64_t next_qid;
};

static int64_t now_ms(void)
{
	const struct isc_clock *c = isc_clock_system();
	return c->now_ms(c->ctx);
}

static void note(struct isc_onprem *o, const char *exp_id, const char *kind, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void note(struct isc_onprem *o, const char *exp_id, const char *kind, const char *fmt, ...)
{
	char msg[ISC_ERR_MSG_MAX];
	struct isc_err err;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	isc_log(ISC_LOG_INFO, "%s: %s", exp_id, msg);
	if (isc_store_event_add(o->store, exp_id, kind, msg, &err))
		isc_log(ISC_LOG_ERROR, "%s: recording an event: %s", exp_id, err.msg);
}

/* Compare-and-set of the store status from what this thread last saw; 0 or ISC_ECONFLICT. */
static int set_status(struct isc_onprem *o, struct exp *e, const char *to, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int set_status(struct isc_onprem *o, struct exp *e, const char *to, const char *fmt, ...)
{
	char reason[ISC_ERR_MSG_MAX];
	struct isc_err err;
	va_list ap;
	char *copy;
	int rc;

	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	/* A burst's states are queue/burst.h's, as the broker's are. */
	if (e->validation && isc_burst_transition_check(e->status, to, &err)) {
		isc_log(ISC_LOG_ERROR, "%s: refused: %s (%s)", e->id, err.msg, reason);
		return ISC_EINVALID;
	}
	rc = isc_store_experiment_transition(o->store, e->id, e->status, to, reason, &err);
	if (rc) {
		isc_log(rc == ISC_ECONFLICT ? ISC_LOG_INFO : ISC_LOG_ERROR, "%s: %s -> %s: %s",
		        e->id, e->status, to, err.msg);
		return rc;
	}
	isc_log(ISC_LOG_INFO, "%s: %s: %s", e->id, to, reason);
	if ((copy = strdup(to))) {
		free(e->status);
		e->status = copy;
	}
	return 0;
}

/* ---- experiments ---- */

static struct exp *exp_by_id(struct isc_onprem *o, const char *id)
{
	for (struct exp *e = o->exps; e; e = e->next)
		if (strcmp(e->id, id) == 0)
			return e;
	return NULL;
}

static struct exp *exp_by_qid(struct isc_onprem *o, int64_t qid)
{
	for (struct exp *e = o->exps; e; e = e->next)
		if (e->qid == qid)
			return e;
	return NULL;
}

/* The job that says which nodes a run has: the finished boot, or the boot in progress. */
static const struct onprem_job *run_nodes(const struct run *r)
{
	if (!r)
		return NULL;
	return r->spec ? r->spec : r->phase == PHASE_BOOTING ? r->job : NULL;
}

static void run_free(struct run *r)
{
	if (!r)
		return;
	onprem_job_free(r->job);
	onprem_job_free(r->sync);
	onprem_job_free(r->spec);
	if (r->follow)
		isc_launch_follow_free(r->follow);
	free(r);
}

/* Drops an experiment the queue is done with (it ended, or left for the cloud). */
static void exp_drop(struct isc_onprem *o, struct exp *gone)
{
	struct isc_err err;
	for (struct exp **p = &o->exps; *p; p = &(*p)->next) {
		if (*p == gone) {
			*p = gone->next;
			break;
		}
	}
	isc_queue_forget(o->q, gone->qid, &err);
	run_free(gone->run);
	isc_queue_row_cleanup(&gone->written);
	free(gone->id);
	free(gone->status);
	free(gone);
}

/* The row of isc status: place, expected start, the run's nodes, cycles done. */
static void record_queue_state(struct isc_onprem *o, struct exp *e, int64_t now)
{
	struct isc_queue_info info;
	struct isc_queue_row r = {0};
	struct isc_err err;
	char nodes[512] = "";

	if (isc_queue_info(o->q, e->qid, now, &info, &err))
		return;
	if (run_nodes(e->run)) {
		const struct onprem_job *j = run_nodes(e->run);
		size_t used = 0;
		/* node ids are set before the boot worker starts and never change */
		for (size_t i = 0; i < j->n && used < sizeof(nodes) - 24; i++)
			used += (size_t)snprintf(nodes + used, sizeof(nodes) - used, "%s%lld",
			                         i ? "," : "", (long long)j->t[i].node_id);
	}
	r.experiment_id = e->id;
	r.position = info.position;
	r.next_start_ms = info.next_start_ms;
	r.run_nodes = nodes;
	r.cycles_done = info.cycles_done;
	/* Unchanged rows are not written again: most ticks change nothing. */
	if (e->written.experiment_id && e->written.position == r.position &&
	    e->written.next_start_ms == r.next_start_ms &&
	    e->written.cycles_done == r.cycles_done && strcmp(e->written.run_nodes, nodes) == 0)
		return;
	if (isc_store_queue_put(o->store, &r, &err)) {
		isc_log(ISC_LOG_WARN, "%s: %s", e->id, err.msg);
		return;
	}
	isc_queue_row_cleanup(&e->written);
	e->written = r;
	e->written.experiment_id = strdup(e->id);
	e->written.run_nodes = strdup(nodes);
	if (!e->written.experiment_id || !e->written.run_nodes)
		isc_queue_row_cleanup(&e->written);
}

/* max_rapid_cycles of a spec; absent: one cycle. */
static int spec_max_cycles(const char *spec_json)
{
	json_t *o = json_loads(spec_json, 0, NULL);
	json_t *m = json_object_get(o, "max_rapid_cycles");
	int n = json_is_integer(m) ? (int)json_integer_value(m) : 1;
	json_decref(o);
	return n >= 1 && n <= 5 ? n : 1;
}

static struct exp *exp_add(struct isc_onprem *o, const struct isc_experiment *row, int validation)
{
	struct exp *e = calloc(1, sizeof(*e));
	if (!e || !(e->id = strdup(row->id)) || !(e->status = strdup(row->status))) {
		if (e)
			free(e->id);
		free(e);
		return NULL;
	}
	e->qid = ++o->next_qid;
	e->validation = validation;
	e->next = NULL;
	/* oldest first, as the store lists them */
	struct exp **p = &o->exps;
	while (*p)
		p = &(*p)->next;
	*p = e;
	return e;
}

/* ---- nodes ---- */

static struct node *node_by_id(struct isc_onprem *o, int64_t id)
{
	for (struct node *n = o->nodes; n; n = n->next)
		if (n->id == id)
			return n;
	return NULL;
}

static enum isc_queue_node_state queue_node_state(const struct node *n)
{
	if (strcmp(n->state, "unreachable") == 0)
		return ISC_QUEUE_NODE_DOWN;
	if (strcmp(n->state, "draining") == 0 || n->orphan)
		return ISC_QUEUE_NODE_DRAINING;
	return ISC_QUEUE_NODE_UP;
}

static struct run *run_on_node(struct isc_onprem *o, int64_t node_id, struct exp **owner)
{
	for (struct exp *e = o->exps; e; e = e->next) {
		const struct onprem_job *j = run_nodes(e->run);
		if (!j)
			continue;
		for (size_t i = 0; i < j->n; i++) {
			if (j->t[i].node_id == node_id) {
				*owner = e;
				return e->run;
			}
		}
	}
	return NULL;
}

static void start_stop(struct isc_onprem *o, struct exp *e, enum isc_queue_outcome outcome,
                       const char *why, int suspect_rank);

/*
 * The store's state and reason for a node, compare-and-set from what this
 * thread last read: an operator's drain or undrain that came in meanwhile
 * wins (the next probe decides again). 0 when written.
 */
static int node_mark(struct isc_onprem *o, struct node *n, const char *to, const char *reason)
{
	struct isc_err err;
	int rc = isc_store_pool_mark(o->store, n->id, n->state, to, reason, &err);
	if (rc) {
		isc_log(rc == ISC_ECONFLICT ? ISC_LOG_INFO : ISC_LOG_ERROR, "pool node %lld: %s",
		        (long long)n->id, err.msg);
		return rc;
	}
	snprintf(n->state, sizeof(n->state), "%s", to);
	snprintf(n->reason, sizeof(n->reason), "%s", reason);
	return 0;
}

/* A node does not answer: unreachable in the store and the queue; its run is an interruption. */
static void mark_unreachable(struct isc_onprem *o, struct node *n, const char *why)
{
	struct isc_err err;
	struct exp *owner = NULL;
	struct run *r;

	if (strcmp(n->state, "unreachable") == 0)
		return;
	if (node_mark(o, n, "unreachable", why))
		return;
	isc_queue_node_set_state(o->q, n->id, ISC_QUEUE_NODE_DOWN, &err);
	isc_log(ISC_LOG_WARN, "pool node %lld (%s:%d) is unreachable: %s", (long long)n->id,
	        n->host, n->port, why);
	r = run_on_node(o, n->id, &owner);
	if (!r)
		return;
	for (size_t i = 0; r->spec && i < r->spec->n; i++)
		if (r->spec->t[i].node_id == n->id)
			r->spec->t[i].skip = 1; /* the stop does not wait on it */
	if (r->phase == PHASE_RUNNING) {
		char msg[400];
		snprintf(msg, sizeof(msg), "node %s:%d stopped answering (%.200s)", n->host,
		         n->port, why);
		note(o, owner->id, "interrupted", "%s; stopping the other ranks and requeueing",
		     msg);
		start_stop(o, owner, ISC_QUEUE_NODE_LOST, msg, -1);
	}
}

static void node_free(struct node *nd)
{
	onprem_job_free(nd->probe);
	free(nd->host);
	free(nd->user);
	free(nd);
}

/* The pool as the store has it now, into the queue. */
static void sync_nodes(struct isc_onprem *o)
{
	struct isc_pool_node *list = NULL;
	struct isc_err err;
	size_t n = 0;

	if (isc_store_pool_list(o->store, &list, &n, &err)) {
		isc_log(ISC_LOG_WARN, "reading the pool: %s", err.msg);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		struct node *nd = node_by_id(o, list[i].id);
		if (!nd) {
			nd = calloc(1, sizeof(*nd));
			if (!nd || !(nd->host = strdup(list[i].host)) ||
			    !(nd->user = strdup(list[i].user))) {
				if (nd)
					free(nd->host);
				free(nd);
				continue;
			}
			nd->id = list[i].id;
			nd->port = list[i].port;
			nd->gpus = list[i].gpus;
			nd->next = o->nodes;
			o->nodes = nd;
		}
		snprintf(nd->state, sizeof(nd->state), "%s", list[i].state);
		snprintf(nd->reason, sizeof(nd->reason), "%s", list[i].reason);
		if (!nd->in_queue) {
			if (isc_queue_node_add(o->q, nd->id, nd->gpus, &err)) {
				isc_log(ISC_LOG_WARN, "pool node %lld: %s", (long long)nd->id,
				        err.msg);
				continue;
			}
			nd->in_queue = 1;
		}
		isc_queue_node_set_state(o->q, nd->id, queue_node_state(nd), &err);
	}
	/* Removed from the store: out of the queue once no run holds the node. */
	for (struct node **p = &o->nodes; *p;) {
		struct node *nd = *p;
		int present = 0;
		for (size_t i = 0; i < n && !present; i++)
			present = list[i].id == nd->id;
		/* (a probe in progress is not waited for: the tick never waits on a node) */
		if (!present && (!nd->probe || onprem_job_done(nd->probe)) &&
		    (!nd->in_queue || isc_queue_node_remove(o->q, nd->id, &err) == 0)) {
			*p = nd->next;
			node_free(nd);
		} else {
			if (!present) /* keeps its run; gets nothing new */
				isc_queue_node_set_state(o->q, nd->id, ISC_QUEUE_NODE_DRAINING,
				                         &err);
			p = &nd->next;
		}
	}
	isc_pool_nodes_free(list, n);
}

/* ---- runs ---- */

/* A worker for a booted run: its experiment, image, command and nodes (copies). */
static struct onprem_job *job_for_run(struct isc_onprem *o, const struct run *r,
                                      enum onprem_job_kind kind)
{
	struct onprem_job *j = onprem_job_new(kind, &o->env, r->spec->n);
	if (!j)
		return NULL;
	j->exp_id = strdup(r->spec->exp_id);
	j->name = strdup(r->spec->name);
	j->compute_mode = strdup(r->spec->compute_mode);
	j->command = strdup(r->spec->command);
	j->image = strdup(r->spec->image);
	j->nnodes = r->spec->nnodes;
	j->nproc = r->spec->nproc;
	for (size_t i = 0; i < r->spec->n; i++) {
		j->t[i] = r->spec->t[i];
		j->t[i].host = strdup(r->spec->t[i].host);
		j->t[i].user = strdup(r->spec->t[i].user);
	}
	if (!j->exp_id || !j->name || !j->compute_mode || !j->command || !j->image) {
		onprem_job_free(j);
		return NULL;
	}
	return j;
}

static void start_stop(struct isc_onprem *o, struct exp *e, enum isc_queue_outcome outcome,
                       const char *why, int suspect_rank)
{
	struct run *r = e->run;
	struct onprem_job *j;
	struct isc_err err;

	if (!r || r->phase != PHASE_RUNNING || !r->spec)
		return;
	j = job_for_run(o, r, ONPREM_JOB_STOP);
	if (!j)
		return; /* tried again at the next exit or decision */
	j->pull = 1;
	for (size_t i = 0; suspect_rank >= 0 && i < j->n; i++)
		if (j->t[i].rank == suspect_rank)
			j->suspect = (int)i;
	j->follow = r->follow;
	r->follow = NULL;
	j->sync = r->sync; /* the stop's own pull waits for it */
	r->sync = NULL;
	r->outcome = outcome;
	snprintf(r->why, sizeof(r->why), "%s", why);
	r->phase = PHASE_STOPPING;
	r->job = j;
	if (onprem_job_start(j, &err))
		isc_log(ISC_LOG_ERROR, "%s: %s", e->id, err.msg);
}

static const char *pause_words(enum isc_queue_stop_reason r)
{
	switch (r) {
	case ISC_QUEUE_STOP_CYCLE_END:
		return "cycle over; back of the cycle queue";
	case ISC_QUEUE_STOP_BLOCK_END:
		return "its block of this period is used; waits for the next period";
	case ISC_QUEUE_STOP_PERIOD_END:
		return "the period ended; apportioned again";
	case ISC_QUEUE_STOP_PREEMPTED:
		return "pre-empted by a cycle experiment; resumes for the rest of its block";
	default:
		return "stopped";
	}
}

/* The queue heard of the run's end: the store follows. */
static void run_finished(struct isc_onprem *o, struct exp *e, enum isc_queue_outcome how,
                         const char *why, int64_t now)
{
	enum isc_queue_state final;
	struct isc_queue_info info;
	struct isc_err err;
	enum isc_queue_stop_reason reason = e->run ? e->run->reason : ISC_QUEUE_STOP_CYCLE_END;
	int queue_stop = e->run && e->run->queue_stop;

	if (isc_queue_run_ended(o->q, e->qid, how, now, &final, &err)) {
		isc_log(ISC_LOG_ERROR, "%s: %s", e->id, err.msg);
		return;
	}
	run_free(e->run);
	e->run = NULL;
	isc_queue_info(o->q, e->qid, now, &info, &err);
	switch (final) {
	case ISC_QUEUE_PAUSED:
		if (e->validation)
			note(o, e->id, "paused", "validation cycle interrupted (%s); it runs again",
			     why);
		else
			set_status(
			    o, e, isc_queue_state_name(final), "run %d: %s", info.cycle_count,
			    how == ISC_QUEUE_STOPPED && queue_stop ? pause_words(reason) : why);
		record_queue_state(o, e, now);
		return;
	case ISC_QUEUE_COMPLETED:
		if (e->validation && how == ISC_QUEUE_STOPPED) {
			/* The cycle ran its length without failing: the cloud takes it from here.
			 */
			set_status(o, e, "placing",
			           "validation cycle on-prem passed; bursting with its checkpoint "
			           "(cycle %d next)",
			           isc_queue_next_cycle(info.cycle_count));
		} else {
			set_status(o, e, isc_queue_state_name(final), "%s", why);
		}
		break;
	case ISC_QUEUE_FAILED:
		set_status(o, e, isc_queue_state_name(final), "%s%s",
		           e->validation ? "validation cycle: " : "", why);
		break;
	case ISC_QUEUE_CANCELLED:
		set_status(o, e, isc_queue_state_name(final), "cancelled by user");
		break;
	default:
		break;
	}
	record_queue_state(o, e, now);
	exp_drop(o, e);
}

static void boot_done(struct isc_onprem *o, struct exp *e, int64_t now)
{
	struct run *r = e->run;
	struct onprem_job *j = r->job;
	struct isc_err err;
	char *out_dir = NULL;

	r->job = NULL;
	r->spec = j;
	if (j->rc == 0) {
		/* rank_N.txt under the experiment's output folder, as for bursts */
		char *parent = NULL;
		if (asprintf(&parent, "%s/experiments", o->env.home) >= 0) {
			mkdir(parent, 0700);
			free(parent);
		}
		if (asprintf(&out_dir, "%s/experiments/%s", o->env.home, e->id) < 0)
			out_dir = NULL;
		if (!out_dir || onprem_follow_start(j, out_dir, &r->follow, &err))
			isc_log(ISC_LOG_WARN, "%s: following output: %s", e->id,
			        out_dir ? err.msg : "out of memory");
		free(out_dir);
		r->phase = PHASE_RUNNING;
		r->checkpoints_at_ms = r->lossy_at_ms = now;
		note(o, e->id, "started", "run %d started on %d node(s) (%s)", j->cycle_count,
		     j->nnodes, r->stop_wanted ? "stopping at once" : "running");
		if (r->stop_wanted)
			start_stop(o, e, ISC_QUEUE_STOPPED, pause_words(r->reason), -1);
		return;
	}
	/* The launcher removed what it had started. Nodes that did not answer are down. */
	int lost = 0;
	for (size_t i = 0; i < j->n; i++) {
		struct onprem_target *t = &j->t[i];
		struct node *nd;
		if (t->rc != ISC_ETRANSIENT && t->rc != ISC_EAUTH)
			continue;
		if (strstr(t->msg, "cancelled"))
			continue; /* given up because another node failed first */
		lost = 1;
		if ((nd = node_by_id(o, t->node_id)))
			mark_unreachable(o, nd, t->msg);
	}
	note(o, e->id, "boot_failed", "run %d: %s", j->cycle_count, j->err.msg);
	/* A cancel stands whatever the boot did; otherwise a lost node is an interruption. */
	if (r->stop_wanted && (r->reason == ISC_QUEUE_STOP_CANCELLED || !lost))
		run_finished(o, e, ISC_QUEUE_STOPPED, "stopped", now);
	else if (lost)
		run_finished(o, e, ISC_QUEUE_NODE_LOST, j->err.msg, now);
	else
		run_finished(o, e, ISC_QUEUE_EXIT_FAILED, j->err.msg, now);
}

static void stop_done(struct isc_onprem *o, struct exp *e, int64_t now)
{
	struct run *r = e->run;
	struct onprem_job *j = r->job;
	char why[sizeof(r->why)];

	if (j->pull && j->pull_rc)
		note(o, e->id, "artifacts", "could not bring artifacts home from rank 0: %s",
		     j->pull_err.msg);
	snprintf(why, sizeof(why), "%s", r->why);
	if (j->lost && j->suspect >= 0) {
		/* the rank died with its node: an interruption, not a failure of the run */
		struct onprem_target *t = &j->t[j->suspect];
		struct node *nd = node_by_id(o, t->node_id);
		snprintf(why, sizeof(why), "node %s:%d stopped answering (%.200s)", t->host,
		         t->port, t->msg);
		note(o, e->id, "interrupted", "%s; requeued", why);
		r->outcome = ISC_QUEUE_NODE_LOST;
		if (nd)
			mark_unreachable(o, nd, t->msg);
	}
	run_finished(o, e, r->outcome, why, now);
}

/* Rank exits of running runs: any non-zero one fails the run, rank 0's 0 completes it. */
static void poll_runs(struct isc_onprem *o)
{
	for (struct exp *e = o->exps; e; e = e->next) {
		struct isc_rank_exit exits[ISC_QUEUE_MAX_GPUS];
		struct run *r = e->run;
		size_t k;
		char why[128] = "";
		enum isc_queue_outcome how = ISC_QUEUE_EXIT_OK;
		int suspect = -1;

		if (!r || r->phase != PHASE_RUNNING || !r->follow)
			continue;
		k = isc_launch_follow_poll(r->follow, exits, ISC_QUEUE_MAX_GPUS);
		if (k > ISC_QUEUE_MAX_GPUS)
			k = ISC_QUEUE_MAX_GPUS;
		for (size_t i = 0; i < k; i++) {
			if (exits[i].code != 0) {
				how = ISC_QUEUE_EXIT_FAILED;
				snprintf(why, sizeof(why), "rank %d exited with code %d",
				         exits[i].rank, exits[i].code);
				suspect = exits[i].rank;
				break;
			}
			if (exits[i].rank == 0)
				snprintf(why, sizeof(why), "rank 0 exited with code 0");
		}
		if (why[0])
			start_stop(o, e, how, why, suspect);
	}
}

/*
 * The bursts' schedule for running runs too: checkpoints and crud every
 * checkpoint_sync_ms, lossy every lossy_sync_ms, from rank 0, so a node lost
 * mid-run resumes from a recent checkpoint. One sync per run at a time.
 */
static void sync_runs(struct isc_onprem *o, int64_t now)
{
	for (struct exp *e = o->exps; e; e = e->next) {
		struct run *r = e->run;
		struct isc_err err;
		int which = 0;

		if (!r)
			continue;
		if (r->sync && onprem_job_done(r->sync)) {
			if (r->sync->pull_rc)
				note(o, e->id, "artifacts", "periodic sync from rank 0 failed: %s",
				     r->sync->pull_err.msg);
			onprem_job_free(r->sync);
			r->sync = NULL;
		}
		if (r->sync || r->phase != PHASE_RUNNING)
			continue;
		if (now - r->checkpoints_at_ms >= o->env.cfg->checkpoint_sync_ms)
			which |= ISC_ARTIFACT_CHECKPOINTS | ISC_ARTIFACT_CRUD;
		if (now - r->lossy_at_ms >= o->env.cfg->lossy_sync_ms)
			which |= ISC_ARTIFACT_LOSSY;
		if (!which || !(r->sync = job_for_run(o, r, ONPREM_JOB_SYNC)))
			continue;
		r->sync->which = which;
		if (which & ISC_ARTIFACT_CHECKPOINTS)
			r->checkpoints_at_ms = now;
		if (which & ISC_ARTIFACT_LOSSY)
			r->lossy_at_ms = now;
		if (onprem_job_start(r->sync, &err))
			isc_log(ISC_LOG_WARN, "%s: %s", e->id, err.msg);
	}
}

/* ---- decisions ---- */

static int fill_spec(struct isc_onprem *o, struct onprem_job *j, const struct isc_experiment *row)
{
	json_t *spec = json_loads(row->spec_json, 0, NULL);
	json_t *image = json_object_get(spec, "image");
	json_t *list = json_object_get(spec, "dataset_id_list");
	const char *command = json_string_value(json_object_get(spec, "command"));
	int rc = 0;

	j->exp_id = strdup(row->id);
	j->name = strdup(row->name);
	j->compute_mode = strdup(row->compute_mode);
	j->command = command ? strdup(command) : NULL;
	j->image =
	    strdup(json_is_string(image) ? json_string_value(image) : o->env.cfg->default_image);
	j->datasets = calloc(json_array_size(list) + 1, sizeof(*j->datasets));
	if (!j->exp_id || !j->name || !j->compute_mode || !j->image || !j->datasets)
		rc = ISC_ENOMEM;
	for (size_t i = 0; !rc && i < json_array_size(list); i++) {
		const char *d = json_string_value(json_array_get(list, i));
		if (d && !(j->datasets[j->n_datasets++] = strdup(d)))
			rc = ISC_ENOMEM;
	}
	if (!rc && !command)
		rc = ISC_EINVALID;
	json_decref(spec);
	return rc;
}

/*
 * The run's datasets, resolved in the experiment's organisation now, as it
 * starts: each must be one of the organisation's, Available, with its cached
 * copy on iscd's disk (the boot ships that copy to the nodes).
 */
static int resolve_datasets(struct isc_onprem *o, struct onprem_job *j, const char *org,
                            struct isc_err *err)
{
	struct isc_dataset *list = NULL;
	char *root = isc_dataset_root(o->env.home);
	int rc;

	if (!root)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	rc = isc_dataset_resolve_all(o->store, org, (const char *const *)j->datasets, j->n_datasets,
	                             &list, err);
	if (!rc && !(j->ds = calloc(j->n_datasets, sizeof(*j->ds))))
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
	for (size_t i = 0; !rc && i < j->n_datasets; i++) {
		struct onprem_dataset *ds = &j->ds[i];
		struct stat st;
		ds->name = strdup(list[i].name);
		ds->copy = strdup(list[i].copy_name);
		if (!ds->name || !ds->copy || asprintf(&ds->local, "%s/%s", root, ds->copy) < 0) {
			ds->local = NULL;
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		} else if (stat(ds->local, &st) != 0 || !S_ISDIR(st.st_mode)) {
			rc = isc_err_set(err, ISC_ECONFLICT,
			                 "dataset_id_list[%zu]: dataset '%s' is Available but its "
			                 "cached copy %s is not on iscd's disk",
			                 i, ds->name, ds->local);
		}
	}
	if (list)
		isc_dataset_list_free(list, j->n_datasets);
	free(root);
	return rc;
}

static void start_run(struct isc_onprem *o, struct exp *e, const struct isc_queue_decision *d,
                      int64_t now)
{
	struct isc_experiment row;
	struct onprem_job *j = NULL;
	struct isc_err err;
	struct run *r;
	char nodes[256] = "";
	size_t used = 0;
	int rc;

	if (isc_store_experiment_get(o->store, e->id, &row, &err)) {
		isc_log(ISC_LOG_ERROR, "%s: %s", e->id, err.msg);
		run_finished(o, e, ISC_QUEUE_NODE_LOST, err.msg, now);
		return;
	}
	r = calloc(1, sizeof(*r));
	j = onprem_job_new(ONPREM_JOB_BOOT, &o->env, (size_t)d->nnodes);
	if (!r || !j) {
		free(r);
		onprem_job_free(j);
		isc_experiment_cleanup(&row);
		run_finished(o, e, ISC_QUEUE_NODE_LOST, "out of memory", now);
		return;
	}
	e->run = r;
	r->phase = PHASE_BOOTING;
	r->job = j;
	rc = fill_spec(o, j, &row);
	j->cycle_count = d->cycle_count;
	j->cycle_time_ms = (long)d->cycle_time_ms;
	j->nnodes = d->nnodes;
	j->nproc = d->nproc;
	for (int i = 0; !rc && i < d->nnodes; i++) {
		struct node *nd = node_by_id(o, d->node_ids[i]);
		struct onprem_target *t = &j->t[i];
		if (!nd) {
			rc = ISC_ENOTFOUND;
			break;
		}
		t->node_id = nd->id;
		t->rank = i;
		t->port = nd->port;
		t->host = strdup(nd->host);
		t->user = strdup(nd->user);
		snprintf(t->pin, sizeof(t->pin), ISC_POOL_PIN_FMT, (long long)nd->id);
		if (!t->host || !t->user)
			rc = ISC_ENOMEM;
		if (used < sizeof(nodes) - 40)
			used += (size_t)snprintf(nodes + used, sizeof(nodes) - used, "%s%s:%d",
			                         i ? ", " : "", nd->host, nd->port);
	}
	if (rc) {
		/* A spec without a command cannot run anywhere; the rest is this iscd's trouble. */
		isc_experiment_cleanup(&row);
		r->job = NULL;
		r->spec = j;
		run_finished(o, e, rc == ISC_EINVALID ? ISC_QUEUE_EXIT_FAILED : ISC_QUEUE_NODE_LOST,
		             rc == ISC_EINVALID ? "the experiment has no command" : "cannot start",
		             now);
		return;
	}
	/* Before anything boots: a dataset removed, failed or of another organisation ends it. */
	if (j->n_datasets && resolve_datasets(o, j, row.org_name, &err)) {
		isc_experiment_cleanup(&row);
		r->job = NULL;
		r->spec = j;
		run_finished(o, e, ISC_QUEUE_EXIT_FAILED, err.msg, now);
		return;
	}
	/* The store first: a cancel that came in meanwhile wins, and nothing boots. */
	if (e->validation) {
		/* The reason says it runs now, no longer what it waited for. */
		rc = set_status(
		    o, e, "validating",
		    "validation cycle (STRONG_CYCLE_COUNT %d, %lld ms) on %d node(s) x %d "
		    "GPU(s): %s",
		    d->cycle_count, (long long)d->cycle_time_ms, d->nnodes, d->nproc, nodes);
		e->blocker = ISC_QUEUE_READY;
	} else {
		rc = set_status(o, e, isc_queue_state_name(ISC_QUEUE_RUNNING),
		                "run %d (%s, %lld ms) on %d node(s) x %d GPU(s): %s",
		                d->cycle_count, d->resume ? "resume" : "first start",
		                (long long)d->cycle_time_ms, d->nnodes, d->nproc, nodes);
	}
	if (rc == ISC_ECONFLICT) {
		/* It ended meanwhile (a cancel of a waiting experiment); the store has its final
		 * status, the queue only needs to drop it. */
		isc_experiment_cleanup(&row);
		r->job = NULL;
		r->spec = j;
		isc_queue_run_ended(o->q, e->qid, ISC_QUEUE_EXIT_FAILED, now, NULL, &err);
		exp_drop(o, e);
		return;
	}
	row.cycle_count = d->cycle_count;
	row.nnodes = d->nnodes;
	row.nproc = d->nproc;
	free(row.shape_id);
	row.shape_id = strdup("on-prem");
	if (isc_store_experiment_set_placement(o->store, &row, &err))
		isc_log(ISC_LOG_ERROR, "%s: %s", e->id, err.msg);
	isc_experiment_cleanup(&row);
	if (onprem_job_start(j, &err))
		isc_log(ISC_LOG_ERROR, "%s: %s", e->id, err.msg);
	record_queue_state(o, e, now); /* the run's nodes, for isc status and a restart */
}

static void act(struct isc_onprem *o, int64_t now)
{
	const struct isc_queue_decision *d;
	size_t n;

	d = isc_queue_decide(o->q, now, &n);
	for (size_t i = 0; i < n; i++) {
		struct exp *e = exp_by_qid(o, d[i].exp_id);
		if (!e)
			continue;
		if (d[i].action == ISC_QUEUE_STOP) {
			struct run *r = e->run;
			if (!r)
				continue;
			r->reason = d[i].reason;
			r->queue_stop = 1;
			if (r->phase == PHASE_BOOTING)
				r->stop_wanted = 1;
			else if (r->phase == PHASE_RUNNING)
				start_stop(o, e, ISC_QUEUE_STOPPED,
				           d[i].reason == ISC_QUEUE_STOP_LAST_CYCLE
				               ? "its last cycle is over"
				               : pause_words(d[i].reason),
				           -1);
			else if (r->outcome == ISC_QUEUE_STOPPED)
				continue; /* already stopping for the queue */
		} else if (!e->run) {
			start_run(o, e, &d[i], now);
		}
	}
}

/* ---- work from the store ---- */

static void orphan_stop(struct isc_onprem *o, const struct isc_experiment *row, const char *nodes)
{
	struct orphan *orph = calloc(1, sizeof(*orph));
	struct onprem_job *j;
	struct isc_err err;
	size_t n = 1, k = 0;

	for (const char *p = nodes; *p; p++)
		n += *p == ',';
	j = onprem_job_new(ONPREM_JOB_STOP, &o->env, n);
	if (!orph || !j || fill_spec(o, j, row) == ISC_ENOMEM) {
		free(orph);
		onprem_job_free(j);
		return;
	}
	{
		char *copy = strdup(nodes), *save = NULL;
		int rank = 0; /* the list is in rank order: container names follow it */
		for (char *tok = copy ? strtok_r(copy, ",", &save) : NULL; tok && k < n;
		     tok = strtok_r(NULL, ",", &save), rank++) {
			struct node *nd = node_by_id(o, strtoll(tok, NULL, 10));
			struct onprem_target *t = &j->t[k];
			if (!nd || strcmp(nd->state, "unreachable") == 0)
				continue;
			t->node_id = nd->id;
			t->rank = rank;
			t->port = nd->port;
			t->host = strdup(nd->host);
			t->user = strdup(nd->user);
			snprintf(t->pin, sizeof(t->pin), ISC_POOL_PIN_FMT, (long long)nd->id);
			nd->orphan = 1;
			k++;
		}
		free(copy);
	}
	j->n = k;
	/* Rank 0 was the first node of the run: its artifacts are the newest. */
	j->pull = 1;
	orph->job = j;
	orph->exp_id = strdup(row->id);
	orph->next = o->orphans;
	o->orphans = orph;
	note(o, row->id, "restart",
	     "iscd restarted during a run: stopping what is left on %zu node(s) before it "
	     "resumes",
	     k);
	onprem_job_start(j, &err);
}

static int orphan_pending(struct isc_onprem *o, const char *exp_id)
{
	for (struct orphan *x = o->orphans; x; x = x->next)
		if (strcmp(x->exp_id, exp_id) == 0)
			return 1;
	return 0;
}

static void reap_orphans(struct isc_onprem *o)
{
	for (struct orphan **p = &o->orphans; *p;) {
		struct orphan *x = *p;
		if (!onprem_job_done(x->job)) {
			p = &x->next;
			continue;
		}
		for (size_t i = 0; i < x->job->n; i++) {
			struct node *nd = node_by_id(o, x->job->t[i].node_id);
			if (nd)
				nd->orphan = 0;
		}
		*p = x->next;
		onprem_job_free(x->job);
		free(x->exp_id);
		free(x);
	}
}

/* A burst that waits for its validation cycle (burst_validation on): queue/burst.h says. */
static int wants_validation(const struct isc_onprem *o, const struct isc_experiment *row)
{
	enum isc_burst_state st;
	return strcmp(row->compute_mode, "burst") == 0 &&
	       isc_burst_state_parse(row->status, &st) == 0 &&
	       isc_burst_owner(st, row->cycle_count, row->cancel_requested,
	                       o->env.cfg->burst_validation) == ISC_BURST_OWNER_ONPREM;
}

static void take_new(struct isc_onprem *o, const struct isc_experiment *row, int64_t now)
{
	struct isc_queue_submit sub = {0};
	struct isc_queue_row qrow;
	struct isc_err err;
	int onprem = strcmp(row->compute_mode, "cycle") == 0 ||
	             strcmp(row->compute_mode, "interruptible") == 0;
	int validation = !onprem && wants_validation(o, row);
	int restore = strcmp(row->status, "enqueued") != 0;
	struct exp *e;

	if ((!onprem && !validation) || row->cancel_requested || orphan_pending(o, row->id))
		return;
	if (onprem && strcmp(row->status, "enqueued") != 0 && strcmp(row->status, "running") != 0 &&
	    strcmp(row->status, "paused") != 0)
		return;
	if (isc_store_queue_get(o->store, row->id, &qrow, &err) == 0) {
		if (qrow.run_nodes[0]) {
			/* a previous iscd's run: stop it first, then the experiment resumes */
			orphan_stop(o, row, qrow.run_nodes);
			free(qrow.run_nodes);
			qrow.run_nodes = strdup("");
			isc_store_queue_put(o->store, &qrow, &err);
			isc_queue_row_cleanup(&qrow);
			return;
		}
	} else {
		memset(&qrow, 0, sizeof(qrow));
	}
	e = exp_add(o, row, validation);
	if (!e) {
		isc_queue_row_cleanup(&qrow);
		return;
	}
	sub.exp_id = e->qid;
	sub.mode = strcmp(row->compute_mode, "interruptible") == 0 ? ISC_QUEUE_INTERRUPTIBLE
	                                                           : ISC_QUEUE_CYCLE;
	sub.gpus = row->gpus;
	/* A validation is one cycle; a cycle experiment cycles max_rapid_cycles times. */
	sub.max_cycles = validation ? 1 : spec_max_cycles(row->spec_json);
	if (restore && row->cycle_count > 0) {
		int done = qrow.cycles_done;
		if (isc_queue_restore(o->q, &sub, row->created_at_ms, row->cycle_count, done, &err))
			isc_log(ISC_LOG_ERROR, "%s: %s", row->id, err.msg);
	} else if (isc_queue_submit(o->q, &sub, now, &err)) {
		isc_log(ISC_LOG_ERROR, "%s: %s", row->id, err.msg);
	}
	isc_queue_row_cleanup(&qrow);
	if (validation && strcmp(row->status, "enqueued") == 0)
		set_status(o, e, "validating",
		           "burst_validation: one cycle on the on-prem pool before the cloud");
	else if (onprem && strcmp(row->status, "running") == 0)
		set_status(o, e, isc_queue_state_name(ISC_QUEUE_PAUSED),
		           "iscd restarted; waits for its next run");
	record_queue_state(o, e, now);
}

/*
 * A cycle or interruptible experiment that waits because of the pool itself
 * says so in its status reason (its state stays enqueued or paused): one the
 * pool can never hold (it waits for an operator to add nodes; the queue skips
 * it, so it blocks nobody) and one whose nodes are unreachable or draining. Waiting
 * for its turn is what the queue line of `isc status` shows, so only the way
 * out of those two is written, once.
 */
static void say_training_wait(struct isc_onprem *o, struct exp *e, const struct isc_queue_wait *w,
                              const char *pool)
{
	enum isc_queue_blocker was = e->blocker;

	e->blocker = w->why;
	if (w->why == ISC_QUEUE_NEVER_FITS)
		set_status(o, e, e->status,
		           "waits: the on-prem pool can never hold it: it needs %d node(s) of %d "
		           "GPU(s) and %s; an operator can add nodes (isc nodes add)",
		           w->nnodes, w->node_gpus, pool);
	else if (w->why == ISC_QUEUE_NODES_OUT)
		set_status(o, e, e->status,
		           "waits for %d node(s) of %d GPU(s); %s: the others are unreachable or "
		           "draining",
		           w->nnodes, w->node_gpus, pool);
	else if (was == ISC_QUEUE_NEVER_FITS || was == ISC_QUEUE_NODES_OUT)
		set_status(o, e, e->status,
		           "waits for its turn in the queue (isc status shows it)");
}

/*
 * Nothing waits in silence: a burst waiting for its validation cycle says
 * what the pool makes it wait for (once per change, in its status reason; its
 * place in the cycle queue and the expected start are in queue_state). One
 * that the pool can never hold, counting every registered node, is not
 * validated: the policy proves on the pool that an experiment runs before the
 * cloud is paid, and a pool that cannot run it cannot prove anything, while the
 * user asked for a burst. So it bursts at once without validation (its first
 * cloud run is STRONG_CYCLE_COUNT 1), with the reason in its timeline.
 */
static void review_waits(struct isc_onprem *o)
{
	for (struct exp *e = o->exps, *next; e; e = next) {
		struct isc_queue_wait w;
		struct isc_err err;
		char pool[160];
		int stopping = 0;

		next = e->next; /* e may be dropped */
		if (e->run || e->cancel_seen || isc_queue_wait_info(o->q, e->qid, &w, &err) ||
		    w.why == e->blocker)
			continue;
		if (w.registered_nodes == 0)
			snprintf(pool, sizeof(pool), "the on-prem pool has no nodes");
		else
			snprintf(pool, sizeof(pool),
			         "the on-prem pool has %d node(s) of %d GPU(s) (%d up, %d free)",
			         w.registered_nodes, w.node_gpus, w.usable_nodes, w.free_nodes);
		if (!e->validation) {
			say_training_wait(o, e, &w, pool);
			continue;
		}
		switch (w.why) {
		case ISC_QUEUE_NEVER_FITS:
			if (isc_queue_cancel(o->q, e->qid, &stopping, &err) || stopping)
				continue;
			if (w.registered_nodes == 0)
				note(o, e->id, "validation_skipped",
				     "burst_validation: %s, so it can never run the validation "
				     "cycle; bursting without it",
				     pool);
			else
				note(
				    o, e->id, "validation_skipped",
				    "burst_validation: the validation cycle needs %d node(s) of %d "
				    "GPU(s) and %s, so it can never run here; bursting without it",
				    w.nnodes, w.node_gpus, pool);
			set_status(
			    o, e, "placing",
			    "validation skipped: the on-prem pool can never hold it; bursting "
			    "without a validation cycle (cycle 1 in the cloud)");
			exp_drop(o, e);
			continue;
		case ISC_QUEUE_NODES_OUT:
			set_status(
			    o, e, "validating",
			    "burst_validation: its validation cycle waits for %d node(s) of %d "
			    "GPU(s); %s: the others are unreachable or draining",
			    w.nnodes, w.node_gpus, pool);
			break;
		case ISC_QUEUE_POOL_BUSY:
			set_status(
			    o, e, "validating",
			    "burst_validation: its validation cycle waits for %d free node(s) of "
			    "%d GPU(s); %s, the rest run other experiments",
			    w.nnodes, w.node_gpus, pool);
			break;
		default:
			break; /* it starts at this tick's decision */
		}
		e->blocker = w.why;
	}
}

/* A cancel: waiting ones end at once, running ones are stopped with grace. */
static void take_cancel(struct isc_onprem *o, struct exp *e, int64_t now)
{
	struct isc_err err;
	int stopping = 0;

	if (e->cancel_seen)
		return;
	e->cancel_seen = 1;
	if (isc_queue_cancel(o->q, e->qid, &stopping, &err)) {
		isc_log(ISC_LOG_WARN, "%s: %s", e->id, err.msg);
		return;
	}
	if (stopping) {
		note(o, e->id, "cancelling", "stopping the run with grace, then cancelled");
		return;
	}
	set_status(o, e, isc_queue_state_name(ISC_QUEUE_CANCELLED), "cancelled by user");
	record_queue_state(o, e, now);
	exp_drop(o, e);
}

static void sync_experiments(struct isc_onprem *o, int64_t now)
{
	struct isc_experiment *list = NULL;
	struct isc_err err;
	size_t n = 0;

	if (isc_store_experiment_list_active(o->store, &list, &n, &err)) {
		isc_log(ISC_LOG_WARN, "reading experiments: %s", err.msg);
		return;
	}
	/* Known ones that ended elsewhere (a cancel of a waiting one): out of the queue. */
	for (struct exp *e = o->exps, *next; e; e = next) {
		int active = 0;
		next = e->next;
		for (size_t i = 0; i < n && !active; i++)
			active = strcmp(list[i].id, e->id) == 0;
		if (!active) {
			int stopping = 0;
			if (!e->cancel_seen &&
			    isc_queue_cancel(o->q, e->qid, &stopping, &err) == 0) {
				e->cancel_seen = 1;
				if (!stopping)
					exp_drop(o, e);
			}
		}
	}
	for (size_t i = 0; i < n; i++) {
		struct exp *e = exp_by_id(o, list[i].id);
		if (!e)
			take_new(o, &list[i], now);
		else if (list[i].cancel_requested)
			take_cancel(o, e, now);
	}
	isc_experiment_list_free(list, n);
}

/* ---- probes ---- */

/* What a node's finished probe found, into the store and the queue. */
static void probe_apply(struct isc_onprem *o, struct node *nd, int64_t now)
{
	const struct onprem_target *t = &nd->probe->t[0];
	struct isc_err err;
	struct exp *owner;

	if (t->rc == 0) {
		nd->first_fail_ms = 0;
		if (strcmp(nd->state, "unreachable") == 0) {
			isc_log(ISC_LOG_INFO, "pool node %lld (%s:%d) answers again: up",
			        (long long)nd->id, nd->host, nd->port);
			if (node_mark(o, nd, "up", "") == 0)
				isc_queue_node_set_state(o->q, nd->id, queue_node_state(nd), &err);
		} else if (nd->reason[0]) {
			node_mark(o, nd, nd->state, ""); /* a draining node answers again */
		}
	} else if (run_on_node(o, nd->id, &owner)) {
		/* Its run is interrupted only once the node has been silent for a while. */
		if (!nd->first_fail_ms)
			nd->first_fail_ms = now;
		if (now - nd->first_fail_ms >= o->env.cfg->node_down_after_ms)
			mark_unreachable(o, nd, t->msg);
	} else if (strcmp(nd->state, "up") == 0) {
		mark_unreachable(o, nd, t->msg); /* nothing runs there: no reason to wait */
	} else if (strcmp(nd->reason, t->msg) != 0) {
		/* unreachable for another reason now, or a draining node that stopped answering */
		if (node_mark(o, nd, nd->state, t->msg) == 0)
			isc_log(ISC_LOG_WARN, "pool node %lld (%s:%d) is %s: %s", (long long)nd->id,
			        nd->host, nd->port, nd->state, t->msg);
	}
	onprem_job_free(nd->probe);
	nd->probe = NULL;
}

/*
 * Every node is probed every node_probe_ms; one that holds a run, or is
 * unreachable, every second. One probe per node at a time, each in its own
 * worker, so a silent node delays no other.
 */
static void probe_start(struct isc_onprem *o, int64_t now)
{
	int running = 0;

	for (struct node *nd = o->nodes; nd; nd = nd->next)
		running += nd->probe != NULL;
	for (struct node *nd = o->nodes; nd && running < PROBES_MAX; nd = nd->next) {
		struct onprem_job *j;
		struct isc_err err;
		struct exp *owner;
		long every = o->env.cfg->node_probe_ms;

		if (nd->probe)
			continue;
		if (run_on_node(o, nd->id, &owner) || strcmp(nd->state, "unreachable") == 0)
			every = every < PROBE_EVERY_MS ? every : PROBE_EVERY_MS;
		if (nd->probed_ms && now - nd->probed_ms < every)
			continue;
		if (!(j = onprem_job_new(ONPREM_JOB_PROBE, &o->env, 1)))
			return;
		j->t[0].node_id = nd->id;
		j->t[0].port = nd->port;
		j->t[0].host = strdup(nd->host);
		j->t[0].user = strdup(nd->user);
		snprintf(j->t[0].pin, sizeof(j->t[0].pin), ISC_POOL_PIN_FMT, (long long)nd->id);
		if (!j->t[0].host || !j->t[0].user) {
			onprem_job_free(j);
			return;
		}
		nd->probe = j;
		nd->probed_ms = now;
		running++;
		onprem_job_start(j, &err); /* a failed start is a finished job with an error */
	}
}

/* ---- the tick ---- */

int isc_onprem_tick(struct isc_onprem *o, struct isc_err *err)
{
	int64_t now = now_ms();
	(void)err;

	reap_orphans(o);
	for (struct node *nd = o->nodes; nd; nd = nd->next)
		if (nd->probe && onprem_job_done(nd->probe))
			probe_apply(o, nd, now);
	for (struct exp *e = o->exps, *next; e; e = next) {
		next = e->next; /* e may be dropped */
		if (!e->run || !e->run->job || !onprem_job_done(e->run->job))
			continue;
		if (e->run->phase == PHASE_BOOTING)
			boot_done(o, e, now);
		else if (e->run->phase == PHASE_STOPPING)
			stop_done(o, e, now);
	}
	sync_nodes(o);
	sync_experiments(o, now);
	review_waits(o);
	poll_runs(o);
	sync_runs(o, now);
	act(o, now);
	probe_start(o, now);
	for (struct exp *e = o->exps; e; e = e->next)
		record_queue_state(o, e, now);
	return 0;
}

int isc_onprem_new(struct isc_store *store, struct isc_onprem **out, struct isc_err *err)
{
	struct isc_onprem *o = calloc(1, sizeof(*o));
	struct isc_queue_config qcfg;
	char *pub = NULL;
	int rc;

	if (!o)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	o->store = store;
	o->env.home = strdup(isc_store_home(store));
	if (!o->env.home) {
		isc_onprem_free(o);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	if ((rc = isc_config_load(o->env.home, &o->env.cfg, err))) {
		isc_onprem_free(o);
		return rc;
	}
	o->env.key_path = isc_cluster_key_path(o->env.home, ONPREM_POOL_KEY_ID);
	rc = isc_onprem_pool_pubkey(o->env.home, &pub, err);
	free(pub);
	if (!rc && !o->env.key_path)
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
	qcfg.cycle_ms = o->env.cfg->cycle_ms;
	qcfg.period_ms = o->env.cfg->period_ms;
	if (!rc)
		rc = isc_queue_new(&qcfg, now_ms(), &o->q, err);
	if (rc) {
		isc_onprem_free(o);
		return rc;
	}
	sync_nodes(o);
	*out = o;
	return 0;
}

void isc_onprem_free(struct isc_onprem *o)
{
	if (!o)
		return;
	while (o->exps) {
		struct exp *e = o->exps;
		o->exps = e->next;
		run_free(e->run); /* joins a boot or stop in progress */
		isc_queue_row_cleanup(&e->written);
		free(e->id);
		free(e->status);
		free(e);
	}
	while (o->nodes) {
		struct node *nd = o->nodes;
		o->nodes = nd->next;
		node_free(nd); /* joins a probe in progress */
	}
	while (o->orphans) {
		struct orphan *x = o->orphans;
		o->orphans = x->next;
		onprem_job_free(x->job);
		free(x->exp_id);
		free(x);
	}
	isc_queue_free(o->q);
	isc_config_free(o->env.cfg);
	free(o->env.key_path);
	free(o->env.home);
	free(o);
}

int isc_onprem_pool_pubkey(const char *home, char **pub, struct isc_err *err)
{
	int rc = isc_cluster_key_public(home, ONPREM_POOL_KEY_ID, pub, err);
	if (rc == ISC_ENOTFOUND) {
		isc_err_clear(err);
		rc = isc_cluster_key_create(home, ONPREM_POOL_KEY_ID, pub, err);
		if (rc == ISC_ECONFLICT) { /* made by another thread or process meanwhile */
			isc_err_clear(err);
			rc = isc_cluster_key_public(home, ONPREM_POOL_KEY_ID, pub, err);
		}
	}
	return rc;
}
