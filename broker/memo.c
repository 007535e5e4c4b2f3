/*
 * The broker's notes between steps, kept in the store (store/store_queue.h,
 * the migration of issue 30) so that a restart of iscd changes no decision:
 * - why each waiting burst waits: the waiting order (queue/burst.h) lines bursts
 *   up behind the one waiting for their money; a burst whose reason was only in
 *   memory headed no line for a retry interval after a restart, so the bursts
 *   behind it tried (and could take the credits it waited for);
 * - the shapes excluded for the rest of a placement round (after capacity, a
 *   partial gang, a failed boot): forgotten, a restart tried them again;
 * - the periodic artifact sync clocks: restarted, a restart postponed every
 *   cluster's next checkpoint sync by a whole period.
 * The tick and the workers call these outside any transaction of their own, so
 * one connection of the broker's own serves them, one call at a time.
 */
#include "broker/memo.h"

#include "broker/broker_int.h"
#include "common/log.h"
#include "launcher/launcher.h"
#include "store/store_queue.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t memo_lock = PTHREAD_MUTEX_INITIALIZER;
static struct isc_store *memo; /* guarded by memo_lock */
static char *memo_home;        /* the home memo was opened on */

/* The notes' connection for b's store, opened on first use; memo_lock held. NULL on error. */
static struct isc_store *memo_store(struct isc_broker *b)
{
	struct isc_err err;

	if (memo && memo_home && strcmp(memo_home, b->home) == 0)
		return memo;
	isc_store_free(memo);
	free(memo_home);
	memo = NULL;
	memo_home = strdup(b->home);
	if (!memo_home || isc_store_open(b->home, 0, &memo, &err)) {
		isc_log(ISC_LOG_ERROR, "broker notes: opening the store: %s",
		        memo_home ? err.msg : "out of memory");
		memo = NULL;
	}
	return memo;
}

void broker_memo_close(struct isc_broker *b)
{
	(void)b;
	pthread_mutex_lock(&memo_lock);
	isc_store_free(memo);
	free(memo_home);
	memo = NULL;
	memo_home = NULL;
	pthread_mutex_unlock(&memo_lock);
}

/* ---- shapes excluded for the rest of a placement round ---- */

void broker_exclude_shape(struct isc_broker *b, const char *experiment_id, const char *shape_id)
{
	struct isc_store *s;
	struct isc_err err;

	pthread_mutex_lock(&memo_lock);
	if ((s = memo_store(b)) && isc_store_shape_exclude(s, experiment_id, shape_id, &err))
		isc_log(ISC_LOG_WARN, "%s: excluding %s: %s", experiment_id, shape_id, err.msg);
	pthread_mutex_unlock(&memo_lock);
}

int broker_shape_excluded(struct isc_broker *b, const char *experiment_id, const char *shape_id)
{
	struct isc_store *s;
	struct isc_err err;
	int excluded = 0;

	pthread_mutex_lock(&memo_lock);
	if ((s = memo_store(b)) &&
	    isc_store_shape_excluded(s, experiment_id, shape_id, &excluded, &err))
		isc_log(ISC_LOG_WARN, "%s: reading exclusions: %s", experiment_id, err.msg);
	pthread_mutex_unlock(&memo_lock);
	return excluded;
}

void broker_exclusions_clear(struct isc_broker *b, const char *experiment_id)
{
	struct isc_store *s;
	struct isc_err err;

	pthread_mutex_lock(&memo_lock);
	if ((s = memo_store(b)) && isc_store_shape_exclusions_clear(s, experiment_id, &err))
		isc_log(ISC_LOG_WARN, "%s: clearing exclusions: %s",
		        experiment_id ? experiment_id : "every burst", err.msg);
	pthread_mutex_unlock(&memo_lock);
}

/* ---- why each waiting burst waits (the waiting order's input) ---- */

void broker_wait_note(struct isc_broker *b, const char *experiment_id, enum isc_burst_wait why)
{
	struct isc_store *s;
	struct isc_err err;

	pthread_mutex_lock(&memo_lock);
	if ((s = memo_store(b)) && isc_store_burst_wait_put(s, experiment_id, (int)why, &err))
		isc_log(ISC_LOG_WARN, "%s: noting why it waits: %s", experiment_id, err.msg);
	pthread_mutex_unlock(&memo_lock);
}

enum isc_burst_wait broker_wait_kind(struct isc_broker *b, const char *experiment_id)
{
	struct isc_store *s;
	struct isc_err err;
	int why = 0;

	pthread_mutex_lock(&memo_lock);
	if ((s = memo_store(b)) && isc_store_burst_wait_get(s, experiment_id, &why, &err))
		isc_log(ISC_LOG_WARN, "%s: reading why it waits: %s", experiment_id, err.msg);
	pthread_mutex_unlock(&memo_lock);
	/* A value this build does not know (a newer iscd wrote it) is not known. */
	return why >= ISC_BURST_WAIT_NONE && why <= ISC_BURST_WAIT_BEHIND ? (enum isc_burst_wait)why
	                                                                  : ISC_BURST_WAIT_NONE;
}

void broker_wait_prune(struct isc_broker *b, int (*keep)(const char *, void *), void *ctx)
{
	struct isc_store *s;
	struct isc_err err;
	char **ids = NULL;
	size_t n = 0;

	pthread_mutex_lock(&memo_lock);
	s = memo_store(b);
	if (s && isc_store_burst_noted(s, &ids, &n, &err))
		isc_log(ISC_LOG_WARN, "broker notes: %s", err.msg);
	for (size_t i = 0; i < n; i++) {
		if (s && !(keep && keep(ids[i], ctx)) && isc_store_burst_forget(s, ids[i], &err))
			isc_log(ISC_LOG_WARN, "%s: forgetting its notes: %s", ids[i], err.msg);
		free(ids[i]);
	}
	free(ids);
	/* The clocks of clusters that closed without their teardown forgetting them (a crash). */
	if (s && isc_store_sync_clock_forget(s, NULL, &err))
		isc_log(ISC_LOG_WARN, "broker notes: %s", err.msg);
	pthread_mutex_unlock(&memo_lock);
}

/* ---- periodic artifact sync clocks, per cluster ---- */

int broker_sync_due(struct isc_broker *b, const char *cluster_id, int64_t now_ms)
{
	struct isc_store *s;
	struct isc_err err;
	int64_t checkpoints_at = 0, lossy_at = 0;
	int found = 0, due = 0, rc;

	pthread_mutex_lock(&memo_lock);
	if (!(s = memo_store(b))) {
		pthread_mutex_unlock(&memo_lock);
		return 0;
	}
	rc = isc_store_sync_clock_get(s, cluster_id, &checkpoints_at, &lossy_at, &found, &err);
	if (!rc && !found) {
		/* The clock starts at the first call: the cluster has just started running. */
		rc = isc_store_sync_clock_put(s, cluster_id, now_ms, now_ms, &err);
	} else if (!rc) {
		if (now_ms - checkpoints_at >= b->config->checkpoint_sync_ms) {
			due |= ISC_ARTIFACT_CHECKPOINTS | ISC_ARTIFACT_CRUD;
			checkpoints_at = now_ms;
		}
		if (now_ms - lossy_at >= b->config->lossy_sync_ms) {
			due |= ISC_ARTIFACT_LOSSY;
			lossy_at = now_ms;
		}
		/* Not recorded, a sync is not counted: the next call finds it due again. */
		if (due &&
		    (rc = isc_store_sync_clock_put(s, cluster_id, checkpoints_at, lossy_at, &err)))
			due = 0;
	}
	if (rc)
		isc_log(ISC_LOG_WARN, "cluster %s: sync clock: %s", cluster_id, err.msg);
	pthread_mutex_unlock(&memo_lock);
	return due;
}

void broker_sync_forget(struct isc_broker *b, const char *cluster_id)
{
	struct isc_store *s;
	struct isc_err err;

	pthread_mutex_lock(&memo_lock);
	if ((s = memo_store(b)) && isc_store_sync_clock_forget(s, cluster_id, &err))
		isc_log(ISC_LOG_WARN, "cluster %s: forgetting its sync clock: %s",
		        cluster_id ? cluster_id : "(closed)", err.msg);
	pthread_mutex_unlock(&memo_lock);
}
