/*
 * The workers of on-prem execution. Each runs in its own thread with copies
 * of what it needs, so the tick never waits on a node: a boot (clean the
 * node's artifact folders, push the experiment's artifacts to every rank, start
 * every rank), a stop (stop following, docker stop with the grace period and
 * removal, artifacts home from rank 0), a periodic sync of a running run's
 * artifacts, or a probe (one SSH login per node).
 */
#include "onprem/onprem_int.h"

#include "artifacts/unpack.h"
#include "common/clock.h"
#include "common/log.h"
#include "launcher/launcher.h"
#include "launcher/ssh.h"
#include "store/store_hostkeys.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A pool node answers at once or not at all: no boot to wait for, unlike a cloud VM. */
#define CONNECT_MS 10000
#define PROBE_MS   2000

struct onprem_job *onprem_job_new(enum onprem_job_kind kind, const struct onprem_env *env, size_t n)
{
	struct onprem_job *j = calloc(1, sizeof(*j));
	if (!j)
		return NULL;
	j->kind = kind;
	j->env = env;
	j->suspect = -1;
	j->n = n;
	j->t = calloc(n ? n : 1, sizeof(*j->t));
	if (!j->t) {
		free(j);
		return NULL;
	}
	return j;
}

int onprem_job_done(const struct onprem_job *j)
{
	return atomic_load_explicit((_Atomic int *)&j->done, memory_order_acquire);
}

static void job_cleanup(struct onprem_job *j)
{
	for (size_t i = 0; i < j->n; i++) {
		free(j->t[i].host);
		free(j->t[i].user);
	}
	for (size_t i = 0; i < j->n_datasets; i++) {
		free(j->datasets[i]);
		if (j->ds) {
			free(j->ds[i].name);
			free(j->ds[i].copy);
			free(j->ds[i].local);
		}
	}
	free(j->datasets);
	free(j->ds);
	free(j->t);
	free(j->exp_id);
	free(j->name);
	free(j->compute_mode);
	free(j->command);
	free(j->image);
	if (j->follow)
		isc_launch_follow_free(j->follow);
	onprem_job_free(j->sync);
}

void onprem_job_free(struct onprem_job *j)
{
	if (!j)
		return;
	if (j->has_thread)
		pthread_join(j->thread, NULL);
	job_cleanup(j);
	free(j);
}

/* The launcher's view of the job: spec, targets (only those not skipped), options. */
struct launch_view {
	struct isc_boot_spec spec;
	const char **names;                /* the datasets' mount names */
	struct isc_boot_dataset *datasets; /* each shipped to the nodes beforehand */
	struct isc_node_target *targets;
	size_t *index; /* targets[k] is j->t[index[k]] */
	size_t n;
	struct isc_launcher_opts opts;
};

static int view_init(const struct onprem_job *j, struct launch_view *v)
{
	const struct isc_config *cfg = j->env->cfg;

	memset(v, 0, sizeof(*v));
	v->targets = calloc(j->n ? j->n : 1, sizeof(*v->targets));
	v->index = calloc(j->n ? j->n : 1, sizeof(*v->index));
	if (!v->targets || !v->index)
		return ISC_ENOMEM;
	v->spec.experiment_id = j->exp_id;
	v->spec.experiment_name = j->name;
	v->spec.compute_mode = j->compute_mode;
	v->spec.cycle_count = j->cycle_count;
	v->spec.cycle_time_ms = j->cycle_time_ms;
	v->spec.command = j->command;
	v->spec.image = j->image;
	v->spec.dataset_ids = (const char *const *)j->datasets;
	v->spec.n_datasets = j->n_datasets;
	if (j->ds && j->n_datasets) {
		/* Mounted from the copy iscd shipped to each node, at /data/<name>, read-only. */
		v->names = calloc(j->n_datasets, sizeof(*v->names));
		v->datasets = calloc(j->n_datasets, sizeof(*v->datasets));
		if (!v->names || !v->datasets)
			return ISC_ENOMEM;
		for (size_t i = 0; i < j->n_datasets; i++) {
			v->names[i] = j->ds[i].name;
			v->datasets[i] = (struct isc_boot_dataset){j->ds[i].copy, NULL, 0, 1};
		}
		v->spec.dataset_ids = v->names;
		v->spec.dataset_fetch = v->datasets;
	}
	v->spec.nnodes = j->nnodes;
	v->spec.nproc = j->nproc;
	v->spec.master_port = cfg->master_port;
	v->spec.shm_size = cfg->shm_size;
	for (size_t i = 0; i < j->n; i++) {
		if (j->t[i].skip)
			continue;
		/* A pool node has one address: it is also the one the ranks use between them. */
		v->targets[v->n] =
		    (struct isc_node_target){j->t[i].rank, j->t[i].host, j->t[i].port,
		                             j->t[i].host, j->t[i].pin,  j->t[i].user};
		v->index[v->n++] = i;
	}
	v->opts.user = "root";
	v->opts.key_path = j->env->key_path;
	v->opts.connect_deadline_ms = CONNECT_MS;
	v->opts.command_timeout_ms = cfg->command_timeout_ms;
	v->opts.image_pull_stall_ms = cfg->image_pull_stall_ms;
	v->opts.image_pull_max_ms = cfg->image_pull_max_ms;
	v->opts.check = isc_store_hostkey_check_home;
	v->opts.check_ctx = j->env->home;
	v->opts.artifact_max_bytes = (uint64_t)cfg->artifact_max_bytes;
	v->opts.artifact_max_entries = (uint64_t)cfg->artifact_max_entries;
	v->opts.log_max_bytes = (uint64_t)cfg->rank_log_max_bytes;
	v->opts.min_free_bytes = (uint64_t)cfg->disk_reserve_bytes;
	return 0;
}

static void view_cleanup(struct launch_view *v)
{
	free(v->targets);
	free(v->index);
	free(v->names);
	free(v->datasets);
}

/*
 * Each dataset onto each node that does not have it intact yet: iscd's cached
 * copy as a tar stream into /data/.isc/<copy>, so the boot can mount it
 * read-only (pool nodes cannot see iscd's disk, and hold no S3 credentials).
 */
static int ship_datasets(struct onprem_job *j, const struct launch_view *v)
{
	for (size_t k = 0; j->ds && k < v->n; k++) {
		struct onprem_target *t = &j->t[v->index[k]];
		for (size_t i = 0; i < j->n_datasets; i++) {
			int shipped = 0;
			int rc = isc_launcher_push_dataset(&v->targets[k], &v->opts, j->ds[i].local,
			                                   j->ds[i].copy, &shipped, &j->err);
			if (rc) {
				t->rc = rc;
				snprintf(t->msg, sizeof(t->msg), "%s", j->err.msg);
				isc_err_wrap(&j->err, "dataset %s, rank %d", j->ds[i].name,
				             v->targets[k].rank);
				return rc;
			}
			isc_log(ISC_LOG_INFO, "%s: dataset %s %s %s:%d", j->exp_id, j->ds[i].name,
			        shipped ? "shipped to" : "already intact on", t->host, t->port);
		}
	}
	return 0;
}

static int login(const struct onprem_job *j, const struct onprem_target *t, long deadline_ms,
                 struct isc_ssh **ssh, struct isc_err *err)
{
	struct isc_ssh_target st = {t->host, t->port, t->user, j->env->key_path, t->pin, NULL};
	return isc_ssh_connect(&st, isc_monotonic_ms() + deadline_ms, isc_store_hostkey_check_home,
	                       j->env->home, ssh, err);
}

/*
 * A pool node runs many experiments one after another: the artifact folders
 * an earlier run left must not leak into the next one. Rank 0 then gets this
 * experiment's own artifacts (if it has any) from the broker's side.
 *
 * A login that fails or a command cut off (connection lost, timed out) is transient:
 * the node may be back soon, and the run is requeued. A command that ran and exited
 * non-zero ("Permission denied": a user who is neither root nor allowed sudo) would
 * say the same on every try: the run fails, with the node's own words.
 */
static int clean_node(struct onprem_job *j, struct onprem_target *t)
{
	struct isc_ssh *ssh = NULL;
	struct onprem_words words = {{0}, 0, 0};
	struct isc_err err;
	int status = -1;
	int rc = login(j, t, CONNECT_MS, &ssh, &err);

	if (!rc)
		rc = isc_ssh_exec(ssh, "exec 2>&1; " ISC_ONPREM_CLEAN_MNT, NULL, 0, 60000,
		                  onprem_words_add, &words, NULL, &status, &err);
	if (!rc && status != 0)
		rc = isc_err_set(&err, ISC_EINVALID,
		                 "cleaning /mnt as %s exited with %d: %s (docs/queue.md, \"What a "
		                 "pool node needs\")",
		                 t->user, status, words.len ? words.buf : "no output");
	isc_ssh_free(ssh);
	if (rc) {
		t->rc = rc;
		snprintf(t->msg, sizeof(t->msg), "%s", err.msg);
		isc_err_set(&j->err, rc, "node %s:%d (rank %d): %s", t->host, t->port, t->rank,
		            err.msg);
	}
	return rc;
}

static void boot(struct onprem_job *j)
{
	struct launch_view v;
	struct isc_boot_result *res = NULL;
	int *rcs = NULL;
	char *dir = NULL;

	if (view_init(j, &v)) {
		j->rc = isc_err_set(&j->err, ISC_ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < j->n; i++)
		if ((j->rc = clean_node(j, &j->t[i])))
			goto out;
	if ((j->rc = ship_datasets(j, &v)))
		goto out;
	dir = isc_config_artifact_dir(j->env->cfg, j->env->home, j->exp_id);
	res = calloc(v.n ? v.n : 1, sizeof(*res));
	rcs = calloc(v.n ? v.n : 1, sizeof(*rcs));
	if (!res || !rcs) {
		j->rc = isc_err_set(&j->err, ISC_ENOMEM, "out of memory");
		goto out;
	}
	/*
	 * What came home goes onto every node, as for a burst (docs/launcher.md, "What each
	 * rank sees"): a rank that resumed without the checkpoint would wait for ever in a
	 * collective the others never join. Booting anyway would restart the run from scratch.
	 */
	if (dir &&
	    (j->rc = isc_launcher_push_artifacts_all(v.targets, v.n, &v.opts, dir, rcs, &j->err))) {
		for (size_t k = 0; k < v.n; k++) {
			struct onprem_target *t = &j->t[v.index[k]];
			if (!rcs[k])
				continue;
			t->rc = rcs[k];
			snprintf(t->msg, sizeof(t->msg), "%s", j->err.msg);
		}
		isc_err_wrap(&j->err, "restoring artifacts onto every node");
		goto out;
	}
	j->rc = isc_launcher_boot_nodes(&v.spec, v.targets, v.n, &v.opts, res, &j->err);
	for (size_t k = 0; k < v.n; k++) {
		struct onprem_target *t = &j->t[v.index[k]];
		t->rc = res[k].rc;
		if (res[k].rc)
			snprintf(t->msg, sizeof(t->msg), "%s", res[k].err.msg);
	}
out:
	free(res);
	free(rcs);
	free(dir);
	view_cleanup(&v);
}

/* The `which` artifact folders from rank 0 into the experiment's artifact folder. */
static void pull_rank0(struct onprem_job *j, const struct launch_view *v, int which)
{
	char *dir = NULL;

	j->pull_rc = 0;
	for (size_t k = 0; k < v->n; k++) {
		struct isc_unpack_report report;
		if (v->targets[k].rank != 0)
			continue;
		dir = isc_config_artifact_dir(j->env->cfg, j->env->home, j->exp_id);
		if (!dir) {
			j->pull_rc = isc_err_set(&j->pull_err, ISC_ENOMEM, "out of memory");
			return;
		}
		char *parent = strdup(dir);
		if (parent && strrchr(parent, '/')) {
			*strrchr(parent, '/') = '\0';
			mkdir(parent, 0700);
		}
		free(parent);
		j->pull_rc = isc_launcher_pull_artifacts(&v->targets[k], &v->opts, dir, which,
		                                         &report, &j->pull_err);
		break;
	}
	if (!dir)
		j->pull_rc = isc_err_set(&j->pull_err, ISC_ENOTFOUND,
		                         "rank 0's node is down: the artifacts last brought home "
		                         "are kept");
	free(dir);
}

static void stop(struct onprem_job *j)
{
	struct launch_view v;

	/*
	 * A rank killed with its node (a dying machine takes its containers along) reads
	 * as an exit code: whether its node still answers tells a lost node from a
	 * failing run.
	 */
	if (j->suspect >= 0 && (size_t)j->suspect < j->n) {
		struct onprem_target *t = &j->t[j->suspect];
		struct isc_ssh *ssh = NULL;
		struct isc_err err;
		if (login(j, t, PROBE_MS, &ssh, &err)) {
			j->lost = 1;
			t->skip = 1;
			snprintf(t->msg, sizeof(t->msg), "%s", err.msg);
		}
		isc_ssh_free(ssh);
	}
	if (view_init(j, &v)) {
		j->rc = isc_err_set(&j->err, ISC_ENOMEM, "out of memory");
		view_cleanup(&v);
		return;
	}
	if (v.n)
		isc_launcher_stop(&v.spec, v.targets, v.n, &v.opts, j->env->cfg->stop_grace_s);
	/*
	 * The follower after the stop, so the last lines (a checkpoint message) reach
	 * rank_N.txt; nobody reads its exit codes any more (the job owns it).
	 */
	if (j->follow) {
		isc_launch_follow_free(j->follow);
		j->follow = NULL;
	}
	/* One pull per folder at a time: a periodic sync still running finishes first. */
	onprem_job_free(j->sync);
	j->sync = NULL;
	if (j->pull)
		pull_rank0(j, &v, ISC_ARTIFACT_ALL);
	view_cleanup(&v);
}

static void sync(struct onprem_job *j)
{
	struct launch_view v;
	if (view_init(j, &v))
		j->pull_rc = isc_err_set(&j->pull_err, ISC_ENOMEM, "out of memory");
	else
		pull_rank0(j, &v, j->which);
	view_cleanup(&v);
}

/* Each target: one login with the pool key, its host key checked against its pin. */
static void probe(struct onprem_job *j)
{
	for (size_t i = 0; i < j->n; i++) {
		struct onprem_target *t = &j->t[i];
		struct isc_onprem_probe p = {.home = j->env->home,
		                             .host = t->host,
		                             .port = t->port,
		                             .user = t->user,
		                             .node_id = t->node_id,
		                             .timeout_ms = ISC_ONPREM_PROBE_MS};
		t->rc = isc_onprem_probe(&p);
		snprintf(t->msg, sizeof(t->msg), "%s", p.reason);
	}
}

static void *job_main(void *arg)
{
	struct onprem_job *j = arg;
	switch (j->kind) {
	case ONPREM_JOB_BOOT:
		boot(j);
		break;
	case ONPREM_JOB_STOP:
		stop(j);
		break;
	case ONPREM_JOB_PROBE:
		probe(j);
		break;
	case ONPREM_JOB_SYNC:
		sync(j);
		break;
	}
	atomic_store_explicit((_Atomic int *)&j->done, 1, memory_order_release);
	return NULL;
}

int onprem_job_start(struct onprem_job *j, struct isc_err *err)
{
	isc_err_clear(&j->err);
	isc_err_clear(&j->pull_err);
	if (pthread_create(&j->thread, NULL, job_main, j) != 0) {
		j->rc = isc_err_set(&j->err, ISC_EIO, "cannot start a worker thread");
		atomic_store_explicit((_Atomic int *)&j->done, 1, memory_order_release);
		return isc_err_set(err, ISC_EIO, "cannot start a worker thread");
	}
	j->has_thread = 1;
	return 0;
}

int onprem_follow_start(const struct onprem_job *boot_job, const char *out_dir,
                        struct isc_launch_follow **out, struct isc_err *err)
{
	struct launch_view v;
	int rc = view_init(boot_job, &v);
	if (rc) {
		view_cleanup(&v);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	rc = isc_launch_follow_start(&v.spec, v.targets, v.n, &v.opts, out_dir, out, err);
	view_cleanup(&v);
	return rc;
}
