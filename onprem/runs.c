/*
 * On-prem execution's runs, in the tick: the queue's decisions started as boot
 * workers (jobs.c), their outcomes applied, rank exits polled, periodic artifact
 * syncs, stops with grace and what a run's end means for the experiment.
 */
#include "onprem/onprem_int.h"

#include "common/log.h"
#include "datasets/datasets.h"
#include "launcher/launcher.h"
#include "store/store_pool.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The job that says which nodes a run has: the finished boot, or the boot in progress. */
const struct onprem_job *onprem_run_nodes(const struct onprem_run *r)
{
	if (!r)
		return NULL;
	return r->spec ? r->spec : r->phase == PHASE_BOOTING ? r->job : NULL;
}

void onprem_run_free(struct onprem_run *r)
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
/* A worker for a booted run: its experiment, image, command and nodes (copies). */
static struct onprem_job *job_for_run(struct isc_onprem *o, const struct onprem_run *r,
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

void onprem_start_stop(struct isc_onprem *o, struct onprem_exp *e, enum isc_queue_outcome outcome,
                       const char *why, int suspect_rank)
{
	struct onprem_run *r = e->run;
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
static void run_finished(struct isc_onprem *o, struct onprem_exp *e, enum isc_queue_outcome how,
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
	onprem_run_free(e->run);
	e->run = NULL;
	isc_queue_info(o->q, e->qid, now, &info, &err);
	switch (final) {
	case ISC_QUEUE_PAUSED:
		if (e->validation)
			onprem_note(o, e->id, "paused",
			            "validation cycle interrupted (%s); it runs again", why);
		else
			onprem_set_status(
			    o, e, isc_queue_state_name(final), "run %d: %s", info.cycle_count,
			    how == ISC_QUEUE_STOPPED && queue_stop ? pause_words(reason) : why);
		onprem_record_queue_state(o, e, now);
		return;
	case ISC_QUEUE_COMPLETED:
		if (e->validation && how == ISC_QUEUE_STOPPED) {
			/* The cycle ran its length without failing: the cloud takes it from here.
			 */
			onprem_set_status(
			    o, e, "placing",
			    "validation cycle on-prem passed; bursting with its checkpoint "
			    "(cycle %d next)",
			    isc_queue_next_cycle(info.cycle_count));
		} else {
			onprem_set_status(o, e, isc_queue_state_name(final), "%s", why);
		}
		break;
	case ISC_QUEUE_FAILED:
		onprem_set_status(o, e, isc_queue_state_name(final), "%s%s",
		                  e->validation ? "validation cycle: " : "", why);
		break;
	case ISC_QUEUE_CANCELLED: {
		char who[256];
		isc_store_experiment_cancel_reason(o->store, e->id, who, sizeof(who));
		onprem_set_status(o, e, isc_queue_state_name(final), "%s", who);
		break;
	}
	default:
		break;
	}
	onprem_record_queue_state(o, e, now);
	onprem_exp_drop(o, e);
}

void onprem_boot_done(struct isc_onprem *o, struct onprem_exp *e, int64_t now)
{
	struct onprem_run *r = e->run;
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
		/* The Output Path: artifact_root/ID when set, as the API records it. */
		out_dir = isc_config_artifact_dir(o->env.cfg, o->env.home, e->id);
		if (!out_dir || onprem_follow_start(j, out_dir, &r->follow, &err))
			isc_log(ISC_LOG_WARN, "%s: following output: %s", e->id,
			        out_dir ? err.msg : "out of memory");
		free(out_dir);
		r->phase = PHASE_RUNNING;
		r->checkpoints_at_ms = r->lossy_at_ms = now;
		onprem_note(o, e->id, "started", "run %d started on %d node(s) (%s)",
		            j->cycle_count, j->nnodes,
		            r->stop_wanted ? "stopping at once" : "running");
		if (r->stop_wanted)
			onprem_start_stop(o, e, ISC_QUEUE_STOPPED, pause_words(r->reason), -1);
		return;
	}
	/* The launcher removed what it had started. Nodes that did not answer are down. */
	int lost = 0;
	for (size_t i = 0; i < j->n; i++) {
		struct onprem_target *t = &j->t[i];
		struct onprem_node *nd;
		if (t->rc != ISC_ETRANSIENT && t->rc != ISC_EAUTH)
			continue;
		if (strstr(t->msg, "cancelled"))
			continue; /* given up because another node failed first */
		lost = 1;
		if ((nd = onprem_node_by_id(o, t->node_id)))
			onprem_mark_unreachable(o, nd, t->msg);
	}
	onprem_note(o, e->id, "boot_failed", "run %d: %s", j->cycle_count, j->err.msg);
	/* A copy: run_finished frees the run, and the job (j->err) with it, before it
	 * writes the status its reason goes into. */
	char why[sizeof(j->err.msg)];
	snprintf(why, sizeof(why), "%s", j->err.msg);
	/* A cancel stands whatever the boot did; otherwise a lost node is an interruption. */
	if (r->stop_wanted && (r->reason == ISC_QUEUE_STOP_CANCELLED || !lost))
		run_finished(o, e, ISC_QUEUE_STOPPED, "stopped", now);
	else if (lost)
		run_finished(o, e, ISC_QUEUE_NODE_LOST, why, now);
	else
		run_finished(o, e, ISC_QUEUE_EXIT_FAILED, why, now);
}

void onprem_stop_done(struct isc_onprem *o, struct onprem_exp *e, int64_t now)
{
	struct onprem_run *r = e->run;
	struct onprem_job *j = r->job;
	char why[sizeof(r->why)];

	if (j->pull && j->pull_rc)
		onprem_note(o, e->id, "artifacts", "could not bring artifacts home from rank 0: %s",
		            j->pull_err.msg);
	snprintf(why, sizeof(why), "%s", r->why);
	if (j->lost && j->suspect >= 0) {
		/* the rank died with its node: an interruption, not a failure of the run */
		struct onprem_target *t = &j->t[j->suspect];
		struct onprem_node *nd = onprem_node_by_id(o, t->node_id);
		snprintf(why, sizeof(why), "node %s:%d stopped answering (%.200s)", t->host,
		         t->port, t->msg);
		onprem_note(o, e->id, "interrupted", "%s; requeued", why);
		r->outcome = ISC_QUEUE_NODE_LOST;
		if (nd)
			onprem_mark_unreachable(o, nd, t->msg);
	}
	run_finished(o, e, r->outcome, why, now);
}

/* Rank exits of running runs: any non-zero one fails the run, rank 0's 0 completes it. */
void onprem_poll_runs(struct isc_onprem *o)
{
	for (struct onprem_exp *e = o->exps; e; e = e->next) {
		struct isc_rank_exit exits[ISC_QUEUE_MAX_GPUS];
		struct onprem_run *r = e->run;
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
			onprem_start_stop(o, e, how, why, suspect);
	}
}

/*
 * The bursts' schedule for running runs too: checkpoints and crud every
 * checkpoint_sync_ms, lossy every lossy_sync_ms, from rank 0, so a node lost
 * mid-run resumes from a recent checkpoint. One sync per run at a time.
 */
void onprem_sync_runs(struct isc_onprem *o, int64_t now)
{
	for (struct onprem_exp *e = o->exps; e; e = e->next) {
		struct onprem_run *r = e->run;
		struct isc_err err;
		int which = 0;

		if (!r)
			continue;
		if (r->sync && onprem_job_done(r->sync)) {
			if (r->sync->pull_rc)
				onprem_note(o, e->id, "artifacts",
				            "periodic sync from rank 0 failed: %s",
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

int onprem_fill_spec(struct isc_onprem *o, struct onprem_job *j, const struct isc_experiment *row)
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

static void start_run(struct isc_onprem *o, struct onprem_exp *e,
                      const struct isc_queue_decision *d, int64_t now)
{
	struct isc_experiment row;
	struct onprem_job *j = NULL;
	struct isc_err err;
	struct onprem_run *r;
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
	rc = onprem_fill_spec(o, j, &row);
	j->cycle_count = d->cycle_count;
	j->cycle_time_ms = (long)d->cycle_time_ms;
	j->nnodes = d->nnodes;
	j->nproc = d->nproc;
	for (int i = 0; !rc && i < d->nnodes; i++) {
		struct onprem_node *nd = onprem_node_by_id(o, d->node_ids[i]);
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
		rc = onprem_set_status(
		    o, e, "validating",
		    "validation cycle (STRONG_CYCLE_COUNT %d, %lld ms) on %d node(s) x %d "
		    "GPU(s): %s",
		    d->cycle_count, (long long)d->cycle_time_ms, d->nnodes, d->nproc, nodes);
		e->blocker = ISC_QUEUE_READY;
	} else {
		rc = onprem_set_status(o, e, isc_queue_state_name(ISC_QUEUE_RUNNING),
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
		onprem_exp_drop(o, e);
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
	onprem_record_queue_state(o, e, now); /* the run's nodes, for isc status and a restart */
}

void onprem_act(struct isc_onprem *o, int64_t now)
{
	const struct isc_queue_decision *d;
	size_t n;

	d = isc_queue_decide(o->q, now, &n);
	for (size_t i = 0; i < n; i++) {
		struct onprem_exp *e = onprem_exp_by_qid(o, d[i].exp_id);
		if (!e)
			continue;
		if (d[i].action == ISC_QUEUE_STOP) {
			struct onprem_run *r = e->run;
			if (!r)
				continue;
			r->reason = d[i].reason;
			r->queue_stop = 1;
			if (r->phase == PHASE_BOOTING)
				r->stop_wanted = 1;
			else if (r->phase == PHASE_RUNNING)
				onprem_start_stop(o, e, ISC_QUEUE_STOPPED,
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
