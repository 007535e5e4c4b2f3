/*
 * The artifacts an organisation keeps at home (issue 42): every pull from a node
 * fits in what is left of org_artifact_quota_bytes, counted over all the
 * organisation's experiments, so one organisation can fill neither iscd's disk
 * nor disk_reserve_bytes for the others. See broker_int.h.
 *
 * What an organisation holds is measured once (a walk of its experiments' artifact
 * folders: the sum of file sizes, as artifact_max_bytes counts them) and then kept
 * up to date by each pull; it is measured again every QUOTA_REMEASURE_MS, so
 * folders removed by hand are seen. Pulls under way hold what they may still
 * bring (their cap) until they end, so concurrent pulls of one organisation share
 * what is left instead of each taking it all.
 */
#include "broker/broker_int.h"

#include "common/clock.h"
#include "launcher/launcher.h"
#include "store/store_experiments.h"

#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define QUOTA_REMEASURE_MS INT64_C(600000)

struct org_quota {
	int64_t org_id;
	int64_t bytes;       /* at home, as last measured and updated */
	int64_t reserved;    /* caps of the pulls under way */
	int64_t measured_ms; /* monotonic; 0: never */
	struct org_quota *next;
};

struct broker_quotas {
	pthread_mutex_t lock;
	struct org_quota *orgs;
};

struct broker_quotas *broker_quotas_new(void)
{
	struct broker_quotas *q = calloc(1, sizeof(*q));
	if (q)
		pthread_mutex_init(&q->lock, NULL);
	return q;
}

void broker_quotas_free(struct broker_quotas *q)
{
	if (!q)
		return;
	while (q->orgs) {
		struct org_quota *o = q->orgs;
		q->orgs = o->next;
		free(o);
	}
	pthread_mutex_destroy(&q->lock);
	free(q);
}

static const char *const folder_names[3] = {"checkpoints", "crud", "lossy"};

/* nftw has no context argument: the sum of the walk this thread runs. */
static _Thread_local int64_t walk_sum;

static int walk_add(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)path;
	(void)ftw;
	if (type == FTW_F && S_ISREG(st->st_mode) && st->st_size > 0)
		walk_sum += st->st_size;
	return 0;
}

/* The sizes of the regular files under dir (0 when it does not exist). */
static int64_t tree_bytes(const char *dir)
{
	walk_sum = 0;
	nftw(dir, walk_add, 16, FTW_PHYS);
	return walk_sum;
}

/* The experiment's artifact folders in `which` (ISC_ARTIFACT_* set), as they are at home. */
static int64_t folders_bytes(const struct isc_broker *b, const char *experiment_id, int which)
{
	char *dir = isc_config_artifact_dir(b->config, b->home, experiment_id), *path;
	int64_t sum = 0;

	for (int i = 0; dir && i < 3; i++) {
		if (!(which & (1 << i)) || asprintf(&path, "%s/%s", dir, folder_names[i]) < 0)
			continue;
		sum += tree_bytes(path);
		free(path);
	}
	free(dir);
	return sum;
}

/* Every experiment of the organisation, its artifact folders summed. */
static int measure_org(const struct isc_broker *b, struct isc_store *s, int64_t org_id,
                       int64_t *out, struct isc_err *err)
{
	struct isc_experiment *list;
	size_t n;
	int64_t sum = 0;
	int rc = isc_store_experiment_list(s, NULL, &list, &n, err);

	if (rc)
		return isc_err_wrap(err, "measuring organisation %lld's artifacts",
		                    (long long)org_id);
	for (size_t i = 0; i < n; i++)
		if (list[i].org_id == org_id)
			sum += folders_bytes(b, list[i].id, ISC_ARTIFACT_ALL);
	isc_experiment_list_free(list, n);
	*out = sum;
	return 0;
}

static struct org_quota *org_find(struct broker_quotas *q, int64_t org_id)
{
	for (struct org_quota *o = q->orgs; o; o = o->next)
		if (o->org_id == org_id)
			return o;
	return NULL;
}

int broker_quota_take(struct isc_broker *b, struct isc_store *s, const struct isc_experiment *e,
                      int which, uint64_t *cap, struct broker_quota_hold *h, struct isc_err *err)
{
	struct broker_quotas *q = b->quotas;
	int64_t quota = b->config->org_artifact_quota_bytes, now = isc_monotonic_ms(), measured = 0;
	int64_t replaced, room;
	struct org_quota *o;
	int fresh;

	memset(h, 0, sizeof(*h));
	if (!q || quota <= 0)
		return 0;
	pthread_mutex_lock(&q->lock);
	o = org_find(q, e->org_id);
	fresh = o && o->measured_ms && now - o->measured_ms < QUOTA_REMEASURE_MS;
	pthread_mutex_unlock(&q->lock);
	/* The walk runs unlocked: other organisations' pulls do not wait for it. */
	if (!fresh) {
		int rc = measure_org(b, s, e->org_id, &measured, err);
		if (rc)
			return rc;
	}
	replaced = folders_bytes(b, e->id, which);
	pthread_mutex_lock(&q->lock);
	if (!(o = org_find(q, e->org_id))) {
		if (!(o = calloc(1, sizeof(*o)))) {
			pthread_mutex_unlock(&q->lock);
			return isc_err_set(err, ISC_ENOMEM, "out of memory");
		}
		o->org_id = e->org_id;
		o->next = q->orgs;
		q->orgs = o;
	}
	if (!fresh) {
		o->bytes = measured;
		o->measured_ms = now;
	}
	/* What the pull replaces is freed by it: the room is counted without it. */
	room = quota - (o->bytes - replaced) - o->reserved;
	if (room <= 0) {
		int64_t held = o->bytes, reserved = o->reserved;
		pthread_mutex_unlock(&q->lock);
		return isc_err_set(
		    err, ISC_EQUOTA,
		    "not brought home: the organisation keeps %lld MiB of artifacts%s, at its "
		    "org_artifact_quota_bytes (%lld MiB); the previous copy stays. Free space by "
		    "removing old experiments' artifact folders, or raise the quota",
		    (long long)(held >> 20),
		    reserved ? " (and pulls under way may bring more)" : "",
		    (long long)(quota >> 20));
	}
	if (*cap == 0 || (uint64_t)room < *cap) {
		*cap = (uint64_t)room;
		h->capped = 1;
	}
	o->reserved += (int64_t)*cap;
	h->org_id = e->org_id;
	h->reserved = (int64_t)*cap;
	h->replaced = replaced;
	h->which = which;
	h->held = 1;
	pthread_mutex_unlock(&q->lock);
	return 0;
}

void broker_quota_give(struct isc_broker *b, const struct isc_experiment *e,
                       struct broker_quota_hold *h, int pulled)
{
	struct broker_quotas *q = b->quotas;
	struct org_quota *o;
	int64_t now_bytes = 0;

	if (!q || !h->held)
		return;
	/* Measured after the swap: what the pull actually left at home. */
	if (pulled)
		now_bytes = folders_bytes(b, e->id, h->which);
	pthread_mutex_lock(&q->lock);
	if ((o = org_find(q, h->org_id)) != NULL) {
		o->reserved -= h->reserved;
		if (pulled)
			o->bytes += now_bytes - h->replaced;
	}
	pthread_mutex_unlock(&q->lock);
	h->held = 0;
}
