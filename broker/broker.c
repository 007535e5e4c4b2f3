/*
 * The broker's tick, run by iscd:
 *   1. reap finished workers;
 *   2. watch: one describe per account and region with open clusters (and,
 *      every reconcile_every_ticks and at start, every configured one), which
 *      updates nodes, closes terminated clusters and terminates strays;
 *   3. follow: start output followers for running clusters;
 *   4. meter credits;
 *   5. start one worker per active burst experiment that has none, which runs
 *      one step of its state machine (advance.c).
 * Workers open their own store connection; the main thread keeps its own.
 */
#include "broker/broker_int.h"
#include "broker/memo.h"

#include "common/clock.h"
#include "common/log.h"
#include "keys/keys.h"
#include "launcher/launcher.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Why bursts wait, shape exclusions and sync clocks are kept in the store: broker/memo.c. */

char *broker_output_dir(const struct isc_broker *b, const char *experiment_id)
{
	char *out;
	if (asprintf(&out, "%s/experiments/%s", b->home, experiment_id) < 0)
		return NULL;
	return out;
}

int isc_broker_new(struct isc_store *store, struct isc_broker **out, struct isc_err *err)
{
	struct isc_broker *b = calloc(1, sizeof(*b));
	int rc;

	if (!b)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	b->store = store;
	b->home = strdup(isc_store_home(store));
	pthread_mutex_init(&b->lock, NULL);
	if (!b->home) {
		isc_broker_free(b);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	if ((rc = isc_config_load(b->home, &b->config, err))) {
		isc_broker_free(b);
		return rc;
	}
	if (!b->config->broker_id || !b->config->broker_id[0]) {
		isc_broker_free(b);
		return isc_err_set(err, ISC_EINVALID, "%s has no broker_id: run 'isc init'",
		                   b->config->path[0] ? b->config->path : "config.toml");
	}
	/*
	 * Organisations' own cloud keys: a master key that does not open them is refused
	 * now, not at the first launch or terminate that needs one.
	 */
	if (isc_keys_vault_in_use(store)) {
		struct isc_vault *v = NULL;
		rc = isc_keys_vault_open(store, b->home, 0, &v, err);
		isc_vault_free(v);
		if (rc) {
			isc_broker_free(b);
			return isc_err_wrap(err, "cloud keys");
		}
	}
	*out = b;
	return 0;
}

static void reap_jobs(struct isc_broker *b, int wait_all)
{
	struct broker_job **p = &b->jobs;
	while (*p) {
		struct broker_job *j = *p;
		if (wait_all ||
		    atomic_load_explicit((_Atomic int *)&j->done, memory_order_acquire)) {
			pthread_join(j->thread, NULL);
			*p = j->next;
			free(j->experiment_id);
			free(j);
		} else {
			p = &j->next;
		}
	}
}

static void follower_free(struct broker_follower *f)
{
	isc_launch_follow_free(f->follow);
	free(f->cluster_id);
	free(f);
}

void isc_broker_free(struct isc_broker *b)
{
	if (!b)
		return;
	reap_jobs(b, 1);
	while (b->followers) {
		struct broker_follower *f = b->followers;
		b->followers = f->next;
		follower_free(f);
	}
	broker_memo_close(b); /* the notes stay in the store for the next iscd */
	isc_config_free(b->config);
	pthread_mutex_destroy(&b->lock);
	free(b->home);
	free(b);
}

long isc_broker_tick_interval_ms(const struct isc_broker *b)
{
	return b->config->tick_interval_ms;
}

int isc_broker_set_tick_interval_ms(struct isc_broker *b, long ms, struct isc_err *err)
{
	int rc = isc_config_check_tick(b->config, ms, err);
	if (rc)
		return isc_err_wrap(err, "--interval-ms %ld", ms);
	b->config->tick_interval_ms = ms;
	return 0;
}

static void *job_main(void *arg)
{
	struct broker_job *j = arg;
	struct isc_store *s;
	struct isc_err err;

	if (isc_store_open(j->broker->home, 0, &s, &err) == 0) {
		broker_advance(j->broker, s, j->experiment_id);
		isc_store_free(s);
	} else {
		isc_log(ISC_LOG_ERROR, "%s: opening the store: %s", j->experiment_id, err.msg);
	}
	atomic_store_explicit((_Atomic int *)&j->done, 1, memory_order_release);
	return NULL;
}

static int job_running(struct isc_broker *b, const char *experiment_id)
{
	for (struct broker_job *j = b->jobs; j; j = j->next)
		if (strcmp(j->experiment_id, experiment_id) == 0)
			return 1;
	return 0;
}

static void start_job(struct isc_broker *b, const char *experiment_id)
{
	struct broker_job *j = calloc(1, sizeof(*j));
	if (!j || !(j->experiment_id = strdup(experiment_id))) {
		free(j);
		return;
	}
	j->broker = b;
	if (pthread_create(&j->thread, NULL, job_main, j) != 0) {
		isc_log(ISC_LOG_ERROR, "%s: cannot start a worker thread", experiment_id);
		free(j->experiment_id);
		free(j);
		return;
	}
	j->next = b->jobs;
	b->jobs = j;
}

/* ---- followers ---- */

static struct broker_follower *follower_find(struct isc_broker *b, const char *cluster_id)
{
	for (struct broker_follower *f = b->followers; f; f = f->next)
		if (strcmp(f->cluster_id, cluster_id) == 0)
			return f;
	return NULL;
}

int broker_follower_rank_exit(struct isc_broker *b, const char *cluster_id, int rank, int *code)
{
	struct broker_follower *f;
	int exited = 0;

	pthread_mutex_lock(&b->lock);
	f = follower_find(b, cluster_id);
	if (f)
		exited = isc_launch_follow_rank_exit(f->follow, rank, code);
	pthread_mutex_unlock(&b->lock);
	return exited;
}

void broker_follower_stop(struct isc_broker *b, const char *cluster_id)
{
	struct broker_follower **p, *gone = NULL;

	pthread_mutex_lock(&b->lock);
	for (p = &b->followers; *p; p = &(*p)->next) {
		if (strcmp((*p)->cluster_id, cluster_id) == 0) {
			gone = *p;
			*p = gone->next;
			break;
		}
	}
	pthread_mutex_unlock(&b->lock);
	if (gone)
		follower_free(gone);
}

static void start_followers(struct isc_broker *b)
{
	struct isc_cluster *list;
	struct isc_err err;
	size_t n;

	if (isc_store_cluster_list_open(b->store, &list, &n, &err))
		return;
	for (size_t i = 0; i < n; i++) {
		int have;
		if (strcmp(list[i].state, "running") != 0)
			continue;
		pthread_mutex_lock(&b->lock);
		have = follower_find(b, list[i].id) != NULL;
		pthread_mutex_unlock(&b->lock);
		if (!have && broker_follow_start(b, b->store, &list[i], &err))
			isc_log(ISC_LOG_WARN, "cluster %s: following output: %s", list[i].id,
			        err.msg);
	}
	isc_cluster_list_free(list, n);
}

struct active_set {
	const struct isc_experiment *v;
	size_t n;
};

static int is_active(const char *experiment_id, void *ctx)
{
	const struct active_set *a = ctx;
	for (size_t i = 0; i < a->n; i++)
		if (strcmp(a->v[i].id, experiment_id) == 0)
			return 1;
	return 0;
}

/*
 * Which bursts get a step this tick: the waiting order of queue/burst.h over
 * every burst the broker owns (not one whose validation cycle runs on-prem).
 * One that goes gets a worker; one held behind an older burst of its credits
 * line is told so (status waiting, with its place in line).
 */
static int advance_bursts(struct isc_broker *b, struct isc_experiment *active, size_t n,
                          struct isc_err *err)
{
	struct isc_burst_entry *ent = calloc(n ? n : 1, sizeof(*ent));
	struct isc_burst_turn *turn = calloc(n ? n : 1, sizeof(*turn));
	size_t *which = calloc(n ? n : 1, sizeof(*which));
	struct active_set set = {active, n};
	size_t k = 0;
	int rc = 0;

	if (!ent || !turn || !which) {
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		goto out;
	}
	broker_wait_prune(b, is_active, &set);
	for (size_t i = 0; i < n; i++) {
		const struct isc_experiment *e = &active[i];
		enum isc_burst_state st;
		if (strcmp(e->compute_mode, "burst") != 0 ||
		    isc_burst_state_parse(e->status, &st) ||
		    isc_burst_owner(st, e->cycle_count, e->cancel_requested,
		                    b->config->burst_validation) != ISC_BURST_OWNER_BROKER)
			continue;
		ent[k] = (struct isc_burst_entry){
		    .state = st,
		    .wait =
		        st == ISC_BURST_WAITING ? broker_wait_kind(b, e->id) : ISC_BURST_WAIT_NONE,
		    .org_id = e->org_id,
		    .project_id = e->project_id,
		    .created_ms = e->created_at_ms,
		    .cycle_count = e->cycle_count,
		    .cancel_requested = e->cancel_requested,
		    .next_attempt_ms = e->next_attempt_ms,
		};
		which[k++] = i;
	}
	if ((rc = isc_burst_order(ent, k, isc_wall_ms(), turn, err)))
		goto out;
	for (size_t j = 0; j < k; j++) {
		struct isc_experiment *e = &active[which[j]];
		if (job_running(b, e->id))
			continue;
		if (turn[j].go)
			start_job(b, e->id);
		else if (turn[j].behind >= 0)
			broker_hold(b, e, &active[which[turn[j].behind]], &turn[j]);
	}
out:
	free(ent);
	free(turn);
	free(which);
	return rc;
}

int isc_broker_tick(struct isc_broker *b, struct isc_err *err)
{
	struct isc_experiment *active;
	size_t n;
	int rc, reconcile = b->ticks % (uint64_t)b->config->reconcile_every_ticks == 0;

	b->ticks++;
	reap_jobs(b, 0);
	if (broker_watch(b, reconcile, err))
		isc_log(ISC_LOG_WARN, "watch: %s", err->msg);
	start_followers(b);
	if (broker_meter(b, err))
		isc_log(ISC_LOG_WARN, "meter: %s", err->msg);
	broker_refresh_prices(b, isc_wall_ms());
	if ((rc = isc_store_experiment_list_active(b->store, &active, &n, err)))
		return rc;
	rc = advance_bursts(b, active, n, err);
	isc_experiment_list_free(active, n);
	return rc;
}
