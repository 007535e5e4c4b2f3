/*
 * The broker's tick, run by iscd:
 *   1. reap finished workers;
 *   2. watch: starts, in the background, one describe per account and region with
 *      open clusters (and, every reconcile_every_ticks and at start, every
 *      configured one) that has none in flight; each updates nodes and terminates
 *      strays when it returns (watch.c). The tick closes terminated clusters. Only
 *      the first tick and a takeover wait for fresh describes;
 *   3. follow: start output followers for running clusters;
 *   4. meter credits;
 *   5. start one worker per active burst experiment that has none, which runs
 *      one step of its state machine (advance.c).
 * Workers open their own store connection; the main thread keeps its own.
 *
 * Several iscd replicas may share one store (docs/ha.md). Each burst is then
 * stepped only by the replica holding its lease (store/store_replicas.h), which a
 * heartbeat thread renews every lease_ms/4; followers, metering and the
 * reconciler's stray terminator leave alone what another live replica holds.
 */
#include "broker/broker_int.h"
#include "broker/logship.h"
#include "broker/memo.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/metrics.h"
#include "keys/keys.h"
#include "launcher/keys.h"
#include "launcher/launcher.h"
#include "store/store_replicas.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
	b->quotas = broker_quotas_new();
	pthread_mutex_init(&b->lock, NULL);
	if (!b->home || !b->quotas) {
		isc_broker_free(b);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	if ((rc = isc_config_load(b->home, &b->config, err))) {
		isc_broker_free(b);
		return rc;
	}
	if (!b->config->broker_id || !b->config->broker_id[0]) {
		/* the message names the config's path: set it before the config is freed */
		isc_err_set(err, ISC_EINVALID, "%s has no broker_id: run 'isc init'",
		            b->config->path[0] ? b->config->path : "config.toml");
		isc_broker_free(b);
		return ISC_EINVALID;
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
	/*
	 * Cluster keys of before issue 45, files under $ISC_HOME/keys: sealed into the
	 * store (every replica's) and removed. A key that cannot be moved stops iscd
	 * here, naming it: without it the cluster's nodes cannot be reached.
	 */
	{
		size_t moved = 0;
		rc = isc_cluster_key_import_files(store, b->home, &moved, err);
		if (rc) {
			isc_broker_free(b);
			return isc_err_wrap(err, "moving cluster keys into the store");
		}
		if (moved)
			isc_log(ISC_LOG_INFO,
			        "%zu cluster key file(s) sealed into the store and removed from "
			        "%s/keys",
			        moved, b->home);
	}
	/* Every configured provider's series from the first scrape (docs/metrics.md). */
	for (size_t i = 0; i < b->config->n_providers; i++)
		isc_metrics_touch_provider(b->config->providers[i].name);
	*out = b;
	return 0;
}

/* ---- leases: which bursts this replica steps (issue 33, docs/ha.md) ---- */

struct held {
	char *experiment_id;
	char *token;
	int64_t claimed_ms; /* monotonic: when the claim that took it was started */
	int64_t sure_ms;    /* monotonic: worked on until then, unless renewed */
};

struct broker_leases {
	char *replica_id;
	char boot_id[64]; /* this host's boot, recorded beside host and pid */
	int64_t lease_ms;
	pthread_mutex_t lock; /* guards held, view, leader */
	struct held *held;
	size_t n_held;
	struct isc_lease *view; /* every lease row, as of this tick */
	size_t n_view;
	int leader;            /* this replica is the live one with the smallest id (this tick) */
	int64_t alive_sure_ms; /* monotonic: sure of its own row until then, unless renewed */
	/* The heartbeat thread, with its own store connection. */
	struct isc_store *hb_store;
	pthread_t thread;
	int thread_started;
	pthread_cond_t wake;
	int stopping;
};

/*
 * How long after the start of a claim or renewal the replica counts on the lease:
 * three quarters of it. The database's expiry is counted from a later moment (its
 * clock when the statement ran), so the replica stops before anyone may take over,
 * even if its heartbeat thread stalls (self-fence: ha-facts pitfall 3).
 */
static int64_t sure_for(const struct broker_leases *L)
{
	return L->lease_ms - L->lease_ms / 4;
}

/*
 * The held leases and the view are kept sorted by experiment id (strcmp), so each
 * of the tick's many lookups (per cluster, node and burst) is a binary search.
 * held_find: the index of the experiment, or -(insertion point) - 1.
 */
static ssize_t held_find(const struct broker_leases *L, const char *experiment_id)
{
	size_t lo = 0, hi = L->n_held;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(L->held[mid].experiment_id, experiment_id);
		if (c == 0)
			return (ssize_t)mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -(ssize_t)lo - 1;
}

/* Takes entry i out of the list (its strings now the caller's). */
static struct held held_take(struct broker_leases *L, size_t i)
{
	struct held h = L->held[i];
	memmove(&L->held[i], &L->held[i + 1], (L->n_held - i - 1) * sizeof(*L->held));
	L->n_held--;
	return h;
}

static void held_drop(struct broker_leases *L, size_t i)
{
	struct held h = held_take(L, i);
	free(h.experiment_id);
	free(h.token);
}

/* Takes ownership of token. 0, or ISC_ENOMEM (token freed). */
static int held_put(struct broker_leases *L, const char *experiment_id, char *token,
                    int64_t claimed_ms)
{
	ssize_t i = held_find(L, experiment_id);
	struct held *grown, h = {NULL, token, claimed_ms, claimed_ms + sure_for(L)};
	size_t at;

	if (i >= 0) {
		free(L->held[i].token);
		L->held[i].token = token;
		L->held[i].claimed_ms = claimed_ms;
		L->held[i].sure_ms = h.sure_ms;
		return 0;
	}
	at = (size_t)(-i - 1);
	grown = realloc(L->held, (L->n_held + 1) * sizeof(*grown));
	if (!grown || !(h.experiment_id = strdup(experiment_id))) {
		if (grown)
			L->held = grown;
		free(token);
		return ISC_ENOMEM;
	}
	L->held = grown;
	memmove(&grown[at + 1], &grown[at], (L->n_held - at) * sizeof(*grown));
	grown[at] = h;
	L->n_held++;
	return 0;
}

char *broker_lease_token(struct isc_broker *b, const char *experiment_id)
{
	struct broker_leases *L = b->leases;
	char *token = NULL;
	ssize_t i;

	if (!L)
		return NULL;
	pthread_mutex_lock(&L->lock);
	i = held_find(L, experiment_id);
	if (i >= 0 && L->held[i].token)
		token = strdup(L->held[i].token);
	pthread_mutex_unlock(&L->lock);
	return token;
}

int broker_lease_mine(struct isc_broker *b, const char *experiment_id)
{
	struct broker_leases *L = b->leases;
	ssize_t i;
	int mine;

	if (!L)
		return 1;
	pthread_mutex_lock(&L->lock);
	i = held_find(L, experiment_id);
	mine = i >= 0 && isc_monotonic_ms() < L->held[i].sure_ms;
	pthread_mutex_unlock(&L->lock);
	return mine;
}

static int lease_cmp(const void *a, const void *b)
{
	return strcmp(((const struct isc_lease *)a)->experiment_id,
	              ((const struct isc_lease *)b)->experiment_id);
}

/* The view's row of the experiment, or NULL; with L->lock held. */
static const struct isc_lease *view_find(const struct broker_leases *L, const char *experiment_id)
{
	struct isc_lease key = {.experiment_id = (char *)experiment_id};
	if (!L->n_view)
		return NULL;
	return bsearch(&key, L->view, L->n_view, sizeof(*L->view), lease_cmp);
}

int broker_lease_elsewhere(struct isc_broker *b, const char *experiment_id)
{
	struct broker_leases *L = b->leases;
	const struct isc_lease *l;
	int other;

	if (!L)
		return 0;
	pthread_mutex_lock(&L->lock);
	l = view_find(L, experiment_id);
	other = l && l->live && strcmp(l->replica_id, L->replica_id) != 0;
	pthread_mutex_unlock(&L->lock);
	return other;
}

int broker_replica_sure(struct isc_broker *b)
{
	struct broker_leases *L = b->leases;
	int sure;

	if (!L)
		return 1;
	pthread_mutex_lock(&L->lock);
	sure = isc_monotonic_ms() < L->alive_sure_ms;
	pthread_mutex_unlock(&L->lock);
	return sure;
}

int broker_meters(struct isc_broker *b, const char *experiment_id)
{
	struct broker_leases *L = b->leases;
	const struct isc_lease *l;
	int yes;

	if (!L || broker_lease_mine(b, experiment_id))
		return 1;
	/*
	 * Nobody's (an ended burst whose lease was given up, or one no replica has stepped
	 * yet): one replica meters it, so no two insert the same charge (on PostgreSQL the
	 * charge-once index's refusal would abort the meter's transaction).
	 */
	pthread_mutex_lock(&L->lock);
	l = view_find(L, experiment_id);
	yes = !(l && l->live) && L->leader;
	pthread_mutex_unlock(&L->lock);
	return yes;
}

/*
 * One heartbeat: the replica's row, then every lease in one UPDATE. A lease the
 * renewal did not return is no longer this replica's; a renewal that failed leaves
 * it sure of none. Either way it stops stepping them at once (pitfall 3); the tick
 * claims them again if they are still free.
 */
static void heartbeat_once(struct isc_broker *b)
{
	struct broker_leases *L = b->leases;
	struct isc_lease *renewed = NULL;
	struct isc_err err;
	size_t n = 0, lost = 0;
	int64_t t0 = isc_monotonic_ms();
	int rc;

	isc_err_clear(&err);
	/* The store's clock, read again: every deadline and window compares with it. */
	if (isc_store_clock_sync(L->hb_store, &err))
		isc_log(ISC_LOG_WARN, "replica %s: reading the store's clock: %s", L->replica_id,
		        err.msg);
	isc_err_clear(&err);
	rc = isc_store_replica_heartbeat(L->hb_store, L->replica_id, &err);
	if (rc == ISC_ENOTFOUND) {
		char host[256] = "";
		isc_log(ISC_LOG_WARN,
		        "replica %s was removed from the store as dead: registering again",
		        L->replica_id);
		gethostname(host, sizeof(host) - 1);
		rc = isc_store_replica_register_as(L->hb_store, L->replica_id, host,
		                                   (int64_t)getpid(), L->boot_id,
		                                   b->config->broker_id, &err);
	}
	if (rc) {
		isc_log(ISC_LOG_WARN, "replica %s: heartbeat: %s", L->replica_id, err.msg);
	} else {
		pthread_mutex_lock(&L->lock);
		L->alive_sure_ms = t0 + sure_for(L);
		pthread_mutex_unlock(&L->lock);
	}
	isc_err_clear(&err);
	rc = isc_store_lease_renew(L->hb_store, L->replica_id, L->lease_ms, &renewed, &n, &err);
	pthread_mutex_lock(&L->lock);
	for (size_t i = L->n_held; i-- > 0;) {
		struct held *h = &L->held[i];
		int kept = 0;
		if (h->claimed_ms >= t0)
			continue; /* claimed after the renewal started: not in its answer */
		for (size_t k = 0; !rc && k < n && !kept; k++)
			kept = strcmp(renewed[k].experiment_id, h->experiment_id) == 0 &&
			       strcmp(renewed[k].token, h->token) == 0;
		if (kept) {
			h->sure_ms = t0 + sure_for(L);
		} else {
			if (!rc)
				isc_log(
				    ISC_LOG_WARN,
				    "%s: the lease is no longer this replica's: not stepped here",
				    h->experiment_id);
			held_drop(L, i);
			lost++;
		}
	}
	pthread_mutex_unlock(&L->lock);
	if (rc && lost)
		isc_log(ISC_LOG_ERROR,
		        "replica %s: renewing its leases: %s; stepping none of its %zu burst(s) "
		        "until they are claimed again",
		        L->replica_id, err.msg, lost);
	isc_lease_list_free(renewed, n);
}

static void *heartbeat_main(void *arg)
{
	struct isc_broker *b = arg;
	struct broker_leases *L = b->leases;

	pthread_mutex_lock(&L->lock);
	while (!L->stopping) {
		struct timespec until = isc_monotonic_deadline(L->lease_ms / 4);
		while (!L->stopping &&
		       pthread_cond_timedwait(&L->wake, &L->lock, &until) != ETIMEDOUT)
			;
		if (L->stopping)
			break;
		pthread_mutex_unlock(&L->lock);
		heartbeat_once(b);
		pthread_mutex_lock(&L->lock);
	}
	pthread_mutex_unlock(&L->lock);
	return NULL;
}

static void leases_free(struct broker_leases *L)
{
	if (!L)
		return;
	while (L->n_held)
		held_drop(L, L->n_held - 1);
	free(L->held);
	isc_lease_list_free(L->view, L->n_view);
	isc_store_free(L->hb_store);
	pthread_cond_destroy(&L->wake);
	pthread_mutex_destroy(&L->lock);
	free(L->replica_id);
	free(L);
}

static struct broker_leases *leases_new(int64_t lease_ms)
{
	struct broker_leases *L = calloc(1, sizeof(*L));
	pthread_condattr_t ca;

	if (!L)
		return NULL;
	L->lease_ms = lease_ms;
	pthread_mutex_init(&L->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&L->wake, &ca);
	pthread_condattr_destroy(&ca);
	if (!(L->replica_id = isc_store_new_id("rep_"))) {
		leases_free(L);
		return NULL;
	}
	return L;
}

/* Another live replica, for the refusal without artifact_root; 0 when there is none. */
static int other_live(struct isc_broker *b, const char *self, char *who, size_t cap,
                      struct isc_err *err)
{
	struct isc_replica *r;
	size_t n;
	int found = 0, rc;

	if ((rc = isc_store_replica_list_live(b->store, b->config->lease_ms, &r, &n, err)))
		return rc;
	for (size_t i = 0; i < n && !found; i++) {
		if (strcmp(r[i].id, self) == 0)
			continue;
		snprintf(who, cap, "%s (host %s, pid %lld)", r[i].id, r[i].host,
		         (long long)r[i].pid);
		found = 1;
	}
	isc_replica_list_free(r, n);
	return found ? ISC_ECONFLICT : 0;
}

/*
 * PostgreSQL: replicas registered from this host whose process is gone (iscd
 * killed or crashed, then started again) are dead for sure: forgotten with their
 * leases now rather than after lease_ms, so a restart steps its bursts at once,
 * as on SQLite, and is not taken for a second live replica. "This host" is its name
 * and its boot id both (isc_replica_dead_here): another host of the same name, or
 * this one before a reboot, is left to its lease.
 */
static int forget_dead_here(struct isc_broker *b, const char *host, const char *boot_id,
                            struct isc_err *err)
{
	struct isc_replica *r;
	size_t n;
	int rc = isc_store_replica_list_live(b->store, b->config->lease_ms, &r, &n, err);

	for (size_t i = 0; !rc && i < n; i++) {
		if (!isc_replica_dead_here(&r[i], host, boot_id))
			continue;
		isc_log(ISC_LOG_INFO,
		        "replica %s (pid %lld on this host) is gone: its leases freed", r[i].id,
		        (long long)r[i].pid);
		rc = isc_store_replica_remove(b->store, r[i].id, err);
	}
	isc_replica_list_free(r, n);
	return rc;
}

int isc_broker_replica_start(struct isc_broker *b, struct isc_err *err)
{
	struct broker_leases *L;
	sigset_t block, old;
	char host[256] = "", who[512];
	int rc;

	if (b->leases)
		return 0;
	if (!(L = leases_new(b->config->lease_ms)))
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	gethostname(host, sizeof(host) - 1);
	isc_replica_boot_id(L->boot_id, sizeof(L->boot_id));
	/*
	 * Every replica of a store runs with one broker_id (its instances' tag): a shared
	 * store refuses another (docs/ha.md).
	 */
	rc = isc_store_broker_id_check(b->store, b->config->broker_id, L->replica_id,
	                               isc_store_replicas_shared(b->store), NULL, err);
	if (rc) {
		leases_free(L);
		return rc;
	}
	/*
	 * SQLite: iscd's pid lock proves no other iscd uses this store, so every registered
	 * replica is a dead one (a crash): forgotten with its leases, and a restart steps at
	 * once, as before replicas existed. PostgreSQL: the long dead are pruned; a replica
	 * that died a moment ago keeps its leases until they expire.
	 */
	if (!isc_store_replicas_shared(b->store))
		rc = isc_store_replica_forget_others(b->store, L->replica_id, err);
	else if (!(rc = isc_store_replica_prune(b->store, 10 * L->lease_ms, err)))
		rc = forget_dead_here(b, host, L->boot_id, err);
	L->alive_sure_ms = isc_monotonic_ms() + sure_for(L);
	if (!rc)
		rc = isc_store_replica_register_as(b->store, L->replica_id, host, (int64_t)getpid(),
		                                   L->boot_id, b->config->broker_id, err);
	if (rc) {
		leases_free(L);
		return isc_err_wrap(err, "registering this iscd as a replica");
	}
	/* Checked after registering: of two replicas starting together, neither misses the other.
	 */
	rc = other_live(b, L->replica_id, who, sizeof(who), err);
	if (rc == ISC_ECONFLICT && !b->config->artifact_root[0]) {
		struct isc_err ignored;
		isc_store_replica_remove(b->store, L->replica_id, &ignored);
		leases_free(L);
		return isc_err_set(
		    err, ISC_ECONFLICT,
		    "another iscd replica is live on this store: %s; artifact_root is not set in "
		    "%s, so this replica would keep checkpoints and rank logs where the others "
		    "cannot find them: set artifact_root to a folder every replica shares "
		    "(docs/ha.md)",
		    who, b->config->path[0] ? b->config->path : "config.toml");
	}
	if (rc && rc != ISC_ECONFLICT) {
		leases_free(L);
		return isc_err_wrap(err, "listing replicas");
	}
	if ((rc = isc_store_open(b->home, 0, &L->hb_store, err))) {
		struct isc_err ignored;
		isc_store_replica_remove(b->store, L->replica_id, &ignored);
		leases_free(L);
		return isc_err_wrap(err, "the replica's heartbeat connection");
	}
	b->leases = L;
	/* The heartbeat blocks SIGTERM/SIGINT: they stay the main loop's. */
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	L->thread_started = pthread_create(&L->thread, NULL, heartbeat_main, b) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!L->thread_started) {
		struct isc_err ignored;
		isc_store_replica_remove(b->store, L->replica_id, &ignored);
		b->leases = NULL;
		leases_free(L);
		return isc_err_set(err, ISC_EIO, "cannot start the replica's heartbeat thread");
	}
	{
		struct isc_err ignored;
		isc_store_clock_sync(L->hb_store, &ignored);
	}
	isc_log(ISC_LOG_INFO,
	        "replica %s on %s (pid %ld): leases of %lld ms, renewed every %lld ms; the "
	        "store's clock is %+lld ms from this host's",
	        L->replica_id, host, (long)getpid(), (long long)L->lease_ms,
	        (long long)(L->lease_ms / 4), (long long)isc_store_clock_skew_ms());
	return 0;
}

const char *isc_broker_replica_id(const struct isc_broker *b)
{
	return b->leases ? b->leases->replica_id : NULL;
}

/* A clean stop: the heartbeat ends, the row goes and the leases are given up at once. */
static void replica_stop(struct isc_broker *b)
{
	struct broker_leases *L = b->leases;
	struct isc_err err;

	if (!L)
		return;
	if (L->thread_started) {
		pthread_mutex_lock(&L->lock);
		L->stopping = 1;
		pthread_cond_signal(&L->wake);
		pthread_mutex_unlock(&L->lock);
		pthread_join(L->thread, NULL);
	}
	if (isc_store_replica_remove(b->store, L->replica_id, &err))
		isc_log(ISC_LOG_WARN, "replica %s: removing its row: %s", L->replica_id, err.msg);
	else
		isc_log(ISC_LOG_INFO, "replica %s removed; its leases are free", L->replica_id);
	b->leases = NULL;
	leases_free(L);
}

/* This tick's view: every lease row (whose each burst is) and whether this replica leads. */
static void leases_refresh(struct isc_broker *b)
{
	struct broker_leases *L = b->leases;
	struct isc_lease *view;
	struct isc_replica *live;
	struct isc_err err;
	size_t n_view, n_live;
	int leader = 0;

	if (!L)
		return;
	if (isc_store_lease_list(b->store, &view, &n_view, &err)) {
		/* The last view stays: the stray terminator keeps sparing what it spared. */
		isc_log(ISC_LOG_WARN, "reading leases: %s", err.msg);
		view = NULL;
		n_view = SIZE_MAX;
	}
	if (isc_store_replica_list_live(b->store, L->lease_ms, &live, &n_live, &err) == 0) {
		leader = n_live > 0 && strcmp(live[0].id, L->replica_id) == 0;
		isc_replica_list_free(live, n_live);
	} else {
		isc_log(ISC_LOG_WARN, "reading replicas: %s", err.msg);
	}
	/* Sorted here, not by the database: its collation may not order ids as strcmp does. */
	if (n_view != SIZE_MAX && n_view > 1)
		qsort(view, n_view, sizeof(*view), lease_cmp);
	pthread_mutex_lock(&L->lock);
	if (n_view != SIZE_MAX) {
		isc_lease_list_free(L->view, L->n_view);
		L->view = view;
		L->n_view = n_view;
	}
	L->leader = leader;
	pthread_mutex_unlock(&L->lock);
}

/*
 * The burst's lease for this replica: 1 when it holds it (claimed now if it did not),
 * *taken_over set when it was another replica's that stopped renewing it.
 */
static int lease_take(struct isc_broker *b, const struct isc_experiment *e, int *taken_over)
{
	struct broker_leases *L = b->leases;
	struct isc_err err;
	char *token = NULL, *from = NULL;
	int64_t t0;
	int held = 0, rc;

	*taken_over = 0;
	if (!L || broker_lease_mine(b, e->id))
		return 1;
	t0 = isc_monotonic_ms();
	if (isc_store_lease_claim(b->store, e->id, L->replica_id, L->lease_ms, &held, &token, &from,
	                          &err)) {
		isc_log(ISC_LOG_WARN, "%s: claiming its lease: %s", e->id, err.msg);
		return 0;
	}
	if (!held)
		return 0;
	pthread_mutex_lock(&L->lock);
	rc = held_put(L, e->id, token, t0);
	pthread_mutex_unlock(&L->lock);
	if (rc) {
		free(from);
		return 0;
	}
	if (from) {
		char msg[ISC_ERR_MSG_MAX];
		snprintf(msg, sizeof(msg),
		         "replica %s took the burst over from replica %s, whose lease expired: "
		         "reconciled, then stepped here",
		         L->replica_id, from);
		isc_log(ISC_LOG_WARN, "%s: %s", e->id, msg);
		if (isc_store_event_add(b->store, e->id, "takeover", msg, &err))
			isc_log(ISC_LOG_WARN, "%s: recording an event: %s", e->id, err.msg);
		*taken_over = 1;
		isc_metric_add(ISC_M_LEASE_TAKEOVERS, NULL, 1);
		free(from);
	}
	return 1;
}

/*
 * Gives up the leases of bursts this replica no longer steps (ended, or run on-prem):
 * owned[] lists the experiments it steps now. A burst with a step in flight keeps its
 * lease until the step is done.
 */
static int job_running(struct isc_broker *b, const char *experiment_id);

static void leases_release_unowned(struct isc_broker *b, const char *const *owned, size_t n)
{
	struct broker_leases *L = b->leases;
	struct held *gone = NULL;
	size_t n_gone = 0;

	if (!L)
		return;
	pthread_mutex_lock(&L->lock);
	gone = calloc(L->n_held ? L->n_held : 1, sizeof(*gone));
	for (size_t i = L->n_held; gone && i-- > 0;) {
		int keep = job_running(b, L->held[i].experiment_id);
		for (size_t k = 0; k < n && !keep; k++)
			keep = strcmp(owned[k], L->held[i].experiment_id) == 0;
		if (keep)
			continue;
		gone[n_gone++] = held_take(L, i);
	}
	pthread_mutex_unlock(&L->lock);
	for (size_t i = 0; i < n_gone; i++) {
		struct isc_err err;
		if (isc_store_lease_release(b->store, gone[i].experiment_id, L->replica_id,
		                            gone[i].token, &err))
			isc_log(ISC_LOG_WARN, "%s: giving its lease up: %s", gone[i].experiment_id,
			        err.msg);
		free(gone[i].experiment_id);
		free(gone[i].token);
	}
	free(gone);
}

static int job_done(const struct broker_job *j);

static void reap_jobs(struct isc_broker *b, int wait_all)
{
	struct broker_job **p = &b->jobs;
	while (*p) {
		struct broker_job *j = *p;
		if (wait_all || job_done(j)) {
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
	/* First: a describe out uses the leases' view and the config freed below. */
	broker_watch_stop(b);
	/* A periodic sync still trickling in would hold the stop up: cut short (the copy
	 * at home stays whole). Teardowns and boots finish. */
	for (struct broker_job *j = b->jobs; j; j = j->next)
		if (!j->stop)
			j->stop = BROKER_STOP_SHUTDOWN;
	reap_jobs(b, 1);
	replica_stop(b);
	/* Every follower told first, then each waited for: their SSH sessions close side by
	 * side (one by one, a stop with 175 running clusters took minutes). */
	for (struct broker_follower *f = b->followers; f; f = f->next)
		isc_launch_follow_cancel(f->follow);
	while (b->followers) {
		struct broker_follower *f = b->followers;
		b->followers = f->next;
		follower_free(f);
	}
	isc_logship_free(b->logship); /* after the follows: what they wrote is written */
	broker_memo_close(b);         /* the notes stay in the store for the next iscd */
	broker_quotas_free(b->quotas);
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

/* The stop flag of the step this thread runs (broker_step_stop). */
static _Thread_local volatile int *step_stop;

volatile int *broker_step_stop(void)
{
	return step_stop;
}

static void *job_main(void *arg)
{
	struct broker_job *j = arg;
	struct isc_store *s;
	struct isc_err err;

	step_stop = &j->stop;
	if (isc_store_open(j->broker->home, 0, &s, &err) == 0) {
		/* The step's transactions commit only while this replica holds the lease. */
		char *token = broker_lease_token(j->broker, j->experiment_id);
		if (isc_store_fence(s, j->experiment_id, token, &err))
			isc_log(ISC_LOG_WARN, "%s: fencing the step: %s", j->experiment_id,
			        err.msg);
		free(token);
		broker_advance(j->broker, s, j->experiment_id);
		isc_store_free(s);
	} else {
		isc_log(ISC_LOG_ERROR, "%s: opening the store: %s", j->experiment_id, err.msg);
	}
	step_stop = NULL;
	atomic_store_explicit((_Atomic int *)&j->done, 1, memory_order_release);
	return NULL;
}

static size_t jobs_count(const struct isc_broker *b)
{
	size_t n = 0;
	for (const struct broker_job *j = b->jobs; j; j = j->next)
		n++;
	return n;
}

static struct broker_job *job_find(struct isc_broker *b, const char *experiment_id)
{
	for (struct broker_job *j = b->jobs; j; j = j->next)
		if (strcmp(j->experiment_id, experiment_id) == 0)
			return j;
	return NULL;
}

static int job_running(struct isc_broker *b, const char *experiment_id)
{
	return job_find(b, experiment_id) != NULL;
}

static int job_done(const struct broker_job *j)
{
	return atomic_load_explicit((_Atomic int *)&j->done, memory_order_acquire);
}

static void start_job(struct isc_broker *b, const struct isc_experiment *e)
{
	const char *experiment_id = e->id;
	struct broker_job *j = calloc(1, sizeof(*j));
	if (!j || !(j->experiment_id = strdup(experiment_id))) {
		free(j);
		return;
	}
	j->broker = b;
	j->org_id = e->org_id;
	j->began_cancelled = e->cancel_requested != 0;
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
	struct isc_logship *logship;
	struct isc_err err;

	pthread_mutex_lock(&b->lock);
	for (p = &b->followers; *p; p = &(*p)->next) {
		if (strcmp((*p)->cluster_id, cluster_id) == 0) {
			gone = *p;
			*p = gone->next;
			break;
		}
	}
	logship = b->logship;
	pthread_mutex_unlock(&b->lock);
	if (!gone)
		return;
	follower_free(gone);
	/* The follows are joined: their last bytes (a rank's end) are in the shipper's buffers,
	 * written at its next tick. Written now, before the teardown records the end, so a
	 * reader (`isc logs --follow` of any replica) that stops at the end finds them. */
	if (logship && isc_logship_flush(logship, &err))
		isc_log(ISC_LOG_WARN,
		        "cluster %s: its rank logs' last bytes are not in the store "
		        "yet (retried): %s",
		        cluster_id, err.msg);
}

static void start_followers(struct isc_broker *b)
{
	struct isc_cluster *list;
	struct isc_err err;
	size_t n;

	if (isc_store_cluster_list_open(b->store, &list, &n, &err))
		return;
	for (size_t i = 0; i < n; i++) {
		int have, mine;
		if (strcmp(list[i].state, "running") != 0)
			continue;
		pthread_mutex_lock(&b->lock);
		have = follower_find(b, list[i].id) != NULL;
		pthread_mutex_unlock(&b->lock);
		/*
		 * Only the replica stepping the burst follows it, and lets go once another
		 * replica holds it. A lease this replica is merely unsure of (a renewal that
		 * failed, claimed again this tick) keeps its follower.
		 */
		mine = broker_lease_mine(b, list[i].experiment_id);
		if (!mine) {
			if (have && broker_lease_elsewhere(b, list[i].experiment_id))
				broker_follower_stop(b, list[i].id);
			continue;
		}
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

/* ---- the workers: a fair share per organisation (issue 42) ---- */

/* One organisation's steps this tick: running and due (a burst whose turn it is). */
struct org_use {
	int64_t org_id;
	size_t running, due;
};

static struct org_use *org_use_of(struct org_use *v, size_t *n, int64_t org_id)
{
	for (size_t i = 0; i < *n; i++)
		if (v[i].org_id == org_id)
			return &v[i];
	v[*n] = (struct org_use){org_id, 0, 0};
	return &v[(*n)++];
}

/*
 * A cancel pre-empts the step's periodic sync: `isc cancel` of an experiment whose
 * sync trickles in ends that sync within about 100 ms (the launcher's cancel flag),
 * and the next tick's step tears the cluster down. A step started for the cancel
 * (the teardown) is left alone.
 */
static void stop_cancelled_syncs(struct isc_broker *b, const struct isc_experiment *active,
                                 size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct broker_job *j;
		if (!active[i].cancel_requested || !(j = job_find(b, active[i].id)) ||
		    j->began_cancelled || j->stop || job_done(j))
			continue;
		j->stop = BROKER_STOP_CANCELLED;
		isc_log(ISC_LOG_INFO, "%s: cancelled while its step runs: its sync is cut short",
		        active[i].id);
	}
}

/*
 * Waits up to ms for the jobs told to yield to end (they stop at their next
 * transfer poll, about 100 ms), then reaps what ended.
 */
static void wait_yielded(struct isc_broker *b, int64_t ms)
{
	int64_t until = isc_monotonic_ms() + ms;
	for (;;) {
		int left = 0;
		for (struct broker_job *j = b->jobs; j && !left; j = j->next)
			left = j->stop == BROKER_STOP_YIELD && !job_done(j);
		if (!left || isc_monotonic_ms() >= until)
			break;
		usleep(10 * 1000);
	}
	reap_jobs(b, 0);
}

/*
 * Starts the due steps (turn[j].go) on at most broker_workers threads (each holds a
 * store connection: with PostgreSQL, replicas share max_connections), fairly between
 * organisations:
 *   1. each organisation with a running or due step may hold up to its share,
 *      max(1, broker_workers / such organisations), taken in turn (the round starts
 *      a tick later where this one stopped, so every burst gets its turn);
 *   2. workers still free then go to whoever has more due, in the same turn (none
 *      sits idle while steps wait);
 *   3. an organisation under its share whose step finds every worker busy is owed
 *      one: a step of an organisation over its share is told to yield
 *      (BROKER_STOP_YIELD: its periodic sync ends at its next poll, the copy at home
 *      stays whole), and the owed step starts as soon as that worker is free, this
 *      tick if it frees within the wait (a tick at most), else the next.
 * So one organisation's slow or hostile nodes never keep another's step waiting more
 * than a tick (tests/integration/transfers.sh).
 */
static void dispatch(struct isc_broker *b, const struct isc_experiment *active, const size_t *which,
                     const struct isc_burst_turn *turn, size_t k)
{
	size_t workers = (size_t)b->config->broker_workers, running = 0, n_orgs = 0, wanting = 0;
	size_t n_owed = 0, share, cap = k + jobs_count(b) + 1;
	struct org_use *orgs = calloc(cap, sizeof(*orgs));
	size_t *owed = calloc(k ? k : 1, sizeof(*owed));
	unsigned char *started = calloc(k ? k : 1, 1);
	int deferred = 0, yielded = 0;

	if (!orgs || !owed || !started) {
		free(orgs);
		free(owed);
		free(started);
		return;
	}
	for (struct broker_job *j = b->jobs; j; j = j->next, running++)
		org_use_of(orgs, &n_orgs, j->org_id)->running++;
	for (size_t j = 0; j < k; j++)
		if (turn[j].go && !job_running(b, active[which[j]].id))
			org_use_of(orgs, &n_orgs, active[which[j]].org_id)->due++;
	for (size_t i = 0; i < n_orgs; i++)
		wanting += orgs[i].running || orgs[i].due;
	share = wanting ? workers / wanting : workers;
	if (share < 1)
		share = 1;
	for (int pass = 0; pass < 2; pass++) {
		for (size_t x = 0; x < k; x++) {
			size_t j = (b->next_turn + x) % k;
			const struct isc_experiment *e = &active[which[j]];
			struct org_use *o;
			if (!turn[j].go || started[j] || job_running(b, e->id))
				continue;
			o = org_use_of(orgs, &n_orgs, e->org_id);
			if (running < workers && (pass == 1 || o->running < share)) {
				start_job(b, e);
				started[j] = 1;
				o->running++;
				running++;
			} else if (pass == 1 && !deferred) {
				deferred = 1;
				b->next_turn = j;
			}
			if (pass == 1 && !started[j] && o->running < share) {
				size_t q = 0;
				while (q < n_owed && active[which[owed[q]]].org_id != e->org_id)
					q++;
				if (q == n_owed) /* one owed step per organisation and tick */
					owed[n_owed++] = j;
			}
		}
	}
	if (!deferred)
		b->next_turn = 0;
	/* 3. A worker per owed step, from the organisation furthest over its share. */
	for (size_t q = 0; q < n_owed; q++) {
		struct broker_job *victim = NULL;
		struct org_use *from = NULL;
		for (struct broker_job *j = b->jobs; j; j = j->next) {
			struct org_use *o = org_use_of(orgs, &n_orgs, j->org_id);
			if (j->stop || job_done(j) || o->running <= share)
				continue;
			if (!from || o->running > from->running)
				from = o, victim = j;
		}
		if (!victim)
			break;
		victim->stop = BROKER_STOP_YIELD;
		from->running--;
		yielded++;
		isc_log(ISC_LOG_INFO,
		        "%s: its step yields its worker to organisation %lld's %s (fair share: %zu "
		        "of %zu workers each)",
		        victim->experiment_id, (long long)active[which[owed[q]]].org_id,
		        active[which[owed[q]]].id, share, workers);
	}
	if (yielded) {
		long tick = b->config->tick_interval_ms;
		wait_yielded(b, tick < 1000 ? tick : 1000);
		running = jobs_count(b);
		for (size_t q = 0; q < n_owed && running < workers; q++) {
			const struct isc_experiment *e = &active[which[owed[q]]];
			if (job_running(b, e->id))
				continue;
			start_job(b, e);
			running++;
		}
	}
	free(orgs);
	free(owed);
	free(started);
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
	const char **owned = calloc(n ? n : 1, sizeof(*owned));
	struct active_set set = {active, n};
	size_t k = 0;
	int rc = 0, reconcile = 0;

	if (!ent || !turn || !which || !owned) {
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
	if ((rc = isc_burst_order(ent, k, isc_store_now_ms(), turn, err)))
		goto out;
	/*
	 * Only the replica holding a burst's lease steps it (claimed here when free); one
	 * another live replica holds is skipped. A burst taken over from a replica that
	 * died gets what a restart of iscd gives every burst: a reconciliation (the watch
	 * of a tick at start), then the same step.
	 */
	for (size_t j = 0; j < k; j++) {
		struct isc_experiment *e = &active[which[j]];
		int taken_over = 0;
		owned[j] = e->id;
		if (job_running(b, e->id) || (!turn[j].go && turn[j].behind < 0))
			continue;
		if (!lease_take(b, e, &taken_over))
			turn[j].go = 0, turn[j].behind = -1;
		reconcile |= taken_over;
	}
	if (reconcile)
		leases_refresh(b); /* the dead replica's leases are no longer live in the view */
	if (reconcile && broker_watch(b, 1, 1, err))
		isc_log(ISC_LOG_WARN, "watch (bursts taken over): %s", err->msg);
	stop_cancelled_syncs(b, active, n);
	dispatch(b, active, which, turn, k);
	for (size_t j = 0; j < k; j++)
		if (!turn[j].go && turn[j].behind >= 0 && !job_running(b, active[which[j]].id))
			broker_hold(b, &active[which[j]], &active[which[turn[j].behind]], &turn[j]);
	leases_release_unowned(b, owned, k);
out:
	free(ent);
	free(turn);
	free(which);
	free(owned);
	return rc;
}

static const char *const phase_names[BROKER_TICK_PHASES] = {"watch", "followers", "meter", "prices",
                                                            "steps"};

/* Adds the time since *mark to the phase's figures, and moves the mark on. */
static void phase_done(struct isc_broker *b, int phase, int64_t *mark)
{
	int64_t now = isc_monotonic_ms(), took = now - *mark;
	b->phase_sum_ms[phase] += took;
	if (took > b->phase_max_ms[phase])
		b->phase_max_ms[phase] = took;
	*mark = now;
}

void isc_broker_tick_phases(const struct isc_broker *b, char *out, size_t cap)
{
	size_t at = 0;
	if (cap)
		out[0] = 0;
	for (int i = 0; b->ticks && i < BROKER_TICK_PHASES && at < cap; i++) {
		int w =
		    snprintf(out + at, cap - at, "%s%s mean %.1f ms, max %lld ms", i ? "; " : "",
		             phase_names[i], (double)b->phase_sum_ms[i] / (double)b->ticks,
		             (long long)b->phase_max_ms[i]);
		if (w < 0)
			break;
		at += (size_t)w;
	}
}

int isc_broker_tick(struct isc_broker *b, struct isc_err *err)
{
	struct isc_experiment *active;
	size_t n;
	int rc, reconcile = b->ticks % (uint64_t)b->config->reconcile_every_ticks == 0;
	/* iscd's first tick (so --once) steps after a fresh describe of everything, as the
	 * synchronous watch gave it: what a crash left in the clouds is known first. */
	int at_start = b->ticks == 0;
	int64_t mark = isc_monotonic_ms(), start_us = isc_monotonic_us();

	/*
	 * Lateness as iscd's loop counts it: ticks are due one interval after the previous
	 * one started, so a long tick shows in the lateness of the next.
	 */
	if (b->ticks > 0) {
		double late = (double)(start_us - b->tick_due_us) / 1e6;
		isc_metric_observe(ISC_M_TICK_LATENESS, NULL, late > 0 ? late : 0);
		if (late * 1000 > (double)b->config->tick_interval_ms)
			isc_metric_add(ISC_M_TICKS_LATE, NULL, 1);
	}
	b->tick_due_us = start_us + 1000LL * b->config->tick_interval_ms;
	b->ticks++;
	reap_jobs(b, 0);
	leases_refresh(b);
	if (broker_watch(b, reconcile, at_start, err))
		isc_log(ISC_LOG_WARN, "watch: %s", err->msg);
	phase_done(b, 0, &mark);
	start_followers(b);
	phase_done(b, 1, &mark);
	if (broker_meter(b, err))
		isc_log(ISC_LOG_WARN, "meter: %s", err->msg);
	phase_done(b, 2, &mark);
	broker_refresh_prices(b, isc_store_now_ms());
	broker_refresh_risk(b, isc_store_now_ms());
	phase_done(b, 3, &mark);
	if ((rc = isc_store_experiment_list_active(b->store, &active, &n, err)) == 0) {
		rc = advance_bursts(b, active, n, err);
		isc_experiment_list_free(active, n);
	}
	phase_done(b, 4, &mark);
	if (b->leases) {
		size_t held;
		pthread_mutex_lock(&b->leases->lock);
		held = b->leases->n_held;
		pthread_mutex_unlock(&b->leases->lock);
		isc_metric_set(ISC_M_LEASES_HELD, NULL, (double)held);
	}
	isc_metric_observe(ISC_M_TICK_DURATION, NULL,
	                   (double)(isc_monotonic_us() - start_us) / 1e6);
	return rc;
}
