/*
 * The state machine of one burst experiment. broker_advance() runs one step
 * in a worker thread with its own store connection: it may block on a cloud
 * call or an SSH boot without holding up the other experiments or the tick.
 * Every transition goes through set_status(), which writes the event that
 * explains it.
 */
#include "broker/broker_int.h"
#include "broker/liveness.h"

#include "common/clock.h"
#include "store/store_keys.h"
#include "common/crashpoint.h"
#include "common/log.h"
#include "launcher/keys.h"
#include "launcher/launcher.h"
#include "queue/burst.h"
#include "queue/queue.h"
#include "store/store_ranks.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int set_status(struct isc_store *s, struct isc_experiment *e, const char *status,
                      const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/*
 * A stale step cannot act (issue 48, docs/ha.md "What holds under a pause"). A step
 * decides from what it read and acts through three paths, each of which holds the lease:
 *   - the store: its connection is fenced with the burst's lease (broker.c), so every
 *     write, a single statement included, commits only while the lease holds, and once
 *     one is refused (ISC_ELEASE) every later one is, without a round trip;
 *   - the cloud: cloud.c makes no call for a step whose fence was refused or whose
 *     lease this replica no longer counts as its own, and asks the lease row right
 *     before every terminate;
 *   - SSH and files (stopping or starting containers, restoring or bringing folders
 *     home, deleting a key file): step_holds() right before, as for a terminate.
 * ISC_ELEASE is not a failure: the step that meets it ends at once, with no error-path
 * write or call (there would be none to make anyway), and whoever holds the lease now
 * decides. ask_store: ask the lease row too (destructive effects), not only this
 * replica's memory of it.
 */
static int step_holds(struct isc_broker *b, struct isc_store *s, const struct isc_experiment *e,
                      int ask_store)
{
	struct isc_err err;
	int rc = broker_step_holds(b, s, ask_store, &err);

	if (rc && rc != ISC_ELEASE)
		/* Unsure is not sure: the step ends (broker_step_holds marked its connection
		 * lost, so nothing more is written), and the next one asks again. */
		isc_log(ISC_LOG_WARN, "%s: checking the lease: %s; this step ends here", e->id,
		        err.msg);
	return rc == 0;
}

/* 1 when rc (or the step's store) says this replica lost the burst's lease. */
static int lease_lost(struct isc_store *s, int rc)
{
	return rc == ISC_ELEASE || isc_store_lease_lost(s);
}

/*
 * Moves the experiment from the status this step read to `status` (a
 * compare-and-set: when another writer moved it first, nothing is written and
 * the next step sees the newer status). Keeps e->status current.
 */
static int set_status(struct isc_store *s, struct isc_experiment *e, const char *status,
                      const char *fmt, ...)
{
	char reason[ISC_ERR_MSG_MAX];
	struct isc_err err;
	char *copy;
	va_list ap;
	int rc;

	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	/* The states are queue/burst.h's: a transition its table does not have is a bug. */
	if (isc_burst_transition_check(e->status, status, &err)) {
		isc_log(ISC_LOG_ERROR, "%s: refused: %s (%s)", e->id, err.msg, reason);
		return ISC_EINVALID;
	}
	rc = isc_store_experiment_transition(s, e->id, e->status, status, reason, &err);
	if (rc == ISC_ELEASE) {
		isc_log(ISC_LOG_INFO, "%s: not recording %s: %s", e->id, status, err.msg);
		return rc;
	}
	if (rc == ISC_ECONFLICT) {
		isc_log(ISC_LOG_INFO, "%s: %s", e->id, err.msg);
		return rc;
	}
	if (rc) {
		isc_log(ISC_LOG_ERROR, "%s: recording status %s: %s", e->id, status, err.msg);
		return rc;
	}
	isc_log(ISC_LOG_INFO, "%s: %s: %s", e->id, status, reason);
	if ((copy = strdup(status))) {
		free(e->status);
		e->status = copy;
	}
	return 0;
}

/* Whether two waiting reasons say the same, ignoring when the next try is. */
static int same_wait_reason(const char *a, const char *b)
{
	const char *ea = strstr(a, "; next try at "), *eb = strstr(b, "; next try at ");
	size_t la = ea ? (size_t)(ea - a) : strlen(a), lb = eb ? (size_t)(eb - b) : strlen(b);
	return la == lb && strncmp(a, b, la) == 0;
}

static int wait_again(struct isc_broker *b, struct isc_store *s, struct isc_experiment *e,
                      enum isc_burst_wait why, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/*
 * Moves the experiment to (or keeps it in) waiting. A blocked experiment records
 * its reason once per change, not once per retry: when it is waiting already for
 * the same reason, only the time of the next try is written (the caller set it),
 * and the timeline stays as it was. `why` is kept for the waiting order
 * (queue/burst.h): a burst waiting for credits heads the line of that money.
 */
static int wait_again(struct isc_broker *b, struct isc_store *s, struct isc_experiment *e,
                      enum isc_burst_wait why, const char *fmt, ...)
{
	char reason[ISC_ERR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	broker_wait_note(b, e->id, why);
	if (strcmp(e->status, "waiting") == 0 && e->status_reason &&
	    same_wait_reason(e->status_reason, reason))
		return 0;
	return set_status(s, e, "waiting", "%s", reason);
}

void broker_hold(struct isc_broker *b, struct isc_experiment *e, const struct isc_experiment *head,
                 const struct isc_burst_turn *turn)
{
	struct isc_err err;
	char money[200];

	if (turn->line == ISC_BURST_WAIT_CREDITS_PROJECT)
		snprintf(money, sizeof(money), "the budget of project %s",
		         head->project_name ? head->project_name : head->project_id);
	else
		snprintf(money, sizeof(money), "the credits of organisation %s",
		         head->org_name ? head->org_name : "?");
	broker_wait_note(b, e->id, ISC_BURST_WAIT_BEHIND);
	/* No try time of its own: it goes at the tick after the one ahead got its cluster or ended.
	 */
	if (e->next_attempt_ms != 0) {
		e->next_attempt_ms = 0;
		if (isc_store_experiment_set_placement(b->store, e, &err))
			isc_log(ISC_LOG_ERROR, "%s: %s", e->id, err.msg);
	}
	wait_again(b, b->store, e, ISC_BURST_WAIT_BEHIND,
	           "credits: #%d in line for %s, behind %s (submitted earlier), which waits for "
	           "them; it tries once %s has its cluster or has ended",
	           turn->position, money, head->id, head->id);
}

/*
 * Records the outcome before the teardown that ends the experiment: status
 * "stopping", heading for `final_status`. A crash during the teardown leaves
 * that outcome for the next step to finish (stop_all).
 */
static int begin_stop(struct isc_store *s, struct isc_experiment *e, const char *final_status,
                      const char *reason)
{
	struct isc_err err;
	char *st = strdup("stopping"), *fin = strdup(final_status), *why = strdup(reason);
	int rc = isc_burst_transition_check(e->status, "stopping", &err);

	if (!rc)
		rc = isc_store_experiment_begin_stop(s, e->id, e->status, final_status, reason,
		                                     &err);

	if (rc || !st || !fin || !why) {
		if (rc)
			isc_log(rc == ISC_ECONFLICT ? ISC_LOG_INFO : ISC_LOG_ERROR, "%s: %s", e->id,
			        err.msg);
		free(st);
		free(fin);
		free(why);
		return rc ? rc : ISC_ENOMEM;
	}
	isc_log(ISC_LOG_INFO, "%s: stopping (then %s): %s", e->id, final_status, reason);
	free(e->status);
	free(e->final_status);
	free(e->status_reason);
	e->status = st;
	e->final_status = fin;
	e->status_reason = why;
	return 0;
}

static void stop_all(struct isc_broker *b, struct isc_store *s, struct isc_experiment *e);
struct restored;
static struct restored *restored_take(const char *cluster_id);
static void restored_free(struct restored *r);
static void drain(struct isc_broker *b, struct isc_store *s, struct isc_experiment *e);
static void collect_launch(struct isc_broker *b, struct isc_store *s,
                           const struct isc_experiment *e, const struct isc_cluster *c);

static void note(struct isc_store *s, const struct isc_experiment *e, const char *kind,
                 const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void note(struct isc_store *s, const struct isc_experiment *e, const char *kind,
                 const char *fmt, ...)
{
	char msg[ISC_ERR_MSG_MAX];
	struct isc_err err;
	va_list ap;
	int rc;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	isc_log(ISC_LOG_INFO, "%s: %s", e->id, msg);
	if (isc_store_lease_lost(s))
		return; /* the store would refuse it: the burst is another replica's now */
	if ((rc = isc_store_event_add(s, e->id, kind, msg, &err)))
		isc_log(rc == ISC_ELEASE ? ISC_LOG_INFO : ISC_LOG_ERROR,
		        "%s: recording an event: %s", e->id, err.msg);
}

/* The cluster the experiment is working with: its newest one that is not being torn down. */
static int current_cluster(struct isc_store *s, const char *experiment_id, struct isc_cluster *out)
{
	struct isc_cluster *list;
	size_t n;
	struct isc_err err;
	int found = 0;

	if (isc_store_cluster_list_for_experiment(s, experiment_id, 1, &list, &n, &err))
		return 0;
	for (size_t i = n; i-- > 0;) {
		if (strcmp(list[i].state, "terminating") != 0 &&
		    strcmp(list[i].state, "draining") != 0) {
			*out = list[i];
			memset(&list[i], 0, sizeof(list[i]));
			found = 1;
			break;
		}
	}
	isc_cluster_list_free(list, n);
	return found;
}

/*
 * 1 when rc is the store out of reach for a moment (ISC_ESTORE, issue 48): never a
 * reason to fail an experiment, replace a whole gang or terminate kept nodes. The
 * step is left as it is, logged, and tried again at the next tick.
 */
static int store_blip(const struct isc_experiment *e, int rc, const struct isc_err *err,
                      const char *during)
{
	if (rc != ISC_ESTORE)
		return 0;
	isc_log(ISC_LOG_WARN, "%s: %s: %s; tried again next tick", e->id, during, err->msg);
	return 1;
}

/*
 * Tears the cluster down: stop containers (grace), bring artifacts home, terminate nodes.
 * Returns 1 when it stopped before terminating because the store was out of reach while
 * the artifacts came home (store_blip): the nodes, and the checkpoint on them, are kept
 * for the next try; or because this replica no longer holds the lease (nothing done:
 * whoever holds it decides).
 */
static int teardown(struct isc_broker *b, struct isc_store *s, const struct isc_experiment *e,
                    const struct isc_cluster *c, int stop_containers, int pull_artifacts,
                    int release_credits)
{
	struct isc_node *nodes = NULL;
	struct isc_err err;
	size_t n = 0;
	int rc;

	/* Destructive from its first effect (containers stopped): only under the lease. */
	if (!step_holds(b, s, e, 1))
		return 1;
	if ((rc = isc_store_node_list(s, c->id, &nodes, &n, &err)) &&
	    store_blip(e, rc, &err, "listing the nodes to tear down"))
		return 1;
	if (rc == 0 && n > 0) {
		/*
		 * Stop with grace first, so the script can write its checkpoint, then bring the
		 * folders home while rank 0's node still runs (an interruption notice gives ~2
		 * min).
		 */
		if (stop_containers) {
			broker_stop_containers(b, e, c, nodes, n);
			isc_crash_point("teardown.containers_stopped");
		}
		if (pull_artifacts &&
		    (rc = broker_artifacts_pull(b, s, e, c, &nodes[0], ISC_ARTIFACT_ALL, &err))) {
			if (store_blip(e, rc, &err, "bringing artifacts home before terminating")) {
				isc_node_list_free(nodes, n);
				return 1;
			}
			note(s, e, "artifacts", "could not bring artifacts home from rank 0: %s",
			     err.msg);
		} else if (pull_artifacts)
			note(s, e, "artifacts",
			     "checkpoint, crud and lossy folders brought home from rank 0");
	}
	isc_crash_point("teardown.before_terminate");
	/* The exits of ranks stopped by the teardown, for isc status, before following ends. */
	for (size_t r = 0; r < n; r++) {
		int code, inserted = 0;
		if (broker_follower_rank_exit(b, c->id, (int)r, &code) &&
		    isc_store_rank_exit_record(s, c->id, (int)r, code, &inserted, &err) == 0 &&
		    inserted)
			note(s, e, "rank_exit", "rank %zu exited with code %d", r, code);
	}
	broker_follower_stop(b, c->id);
	broker_sync_forget(b, c->id);
	restored_free(restored_take(c->id));
	isc_node_list_free(nodes, n);
	if (broker_cluster_terminate(b, s, c, &err))
		note(s, e, "terminate", "terminating cluster %s: %s (will retry)", c->id, err.msg);
	isc_crash_point("teardown.terminate_requested");
	if (release_credits)
		broker_credits_release(b, s, e->id);
	return 0;
}

static void round_exhausted(struct isc_broker *b, struct isc_store *s, struct isc_experiment *e,
                            size_t tried, const char *last_error)
{
	struct isc_err err;
	char when[32];
	time_t t;
	struct tm tm;

	broker_exclusions_clear(b, e->id);
	e->next_attempt_ms = isc_store_now_ms() + b->config->retry_wait_ms;
	if (isc_store_experiment_set_placement(s, e, &err))
		isc_log(ISC_LOG_ERROR, "%s: %s", e->id, err.msg);
	t = (time_t)(e->next_attempt_ms / 1000);
	gmtime_r(&t, &tm);
	strftime(when, sizeof(when), "%H:%M:%S UTC", &tm);
	wait_again(b, s, e, ISC_BURST_WAIT_CAPACITY,
	           "no shape could be provisioned (%zu tried%s%.300s); next try at %s", tried,
	           last_error[0] ? "; last: " : "", last_error, when);
}

static int provider_dead(char (*dead)[16], size_t n, const char *provider)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(dead[i], provider) == 0)
			return 1;
	return 0;
}

/*
 * The cleanup of a cluster whose launch is known to have made nothing (the
 * reservation or the key failed before any call, or the cloud refused the call):
 * the cluster closes first, then its key and holds go, then the intent is marked
 * failed. In this order a crash in between leaves a closed cluster, which nothing
 * resumes (the next step places again at once), never a live cluster whose intent
 * says failed, which would wait out the boot deadline and give the shape up.
 */
static void give_up_cluster(struct isc_broker *b, struct isc_store *s,
                            const struct isc_experiment *e, const char *cluster_id,
                            const char *token, const char *why)
{
	struct isc_err err;
	int rc = isc_store_cluster_set_state(s, cluster_id, "closed", &err);

	if (lease_lost(s, rc))
		return; /* the cluster may be the one another replica runs now: leave it be */
	if (rc)
		isc_log(ISC_LOG_ERROR, "%s: closing cluster %s: %s", e->id, cluster_id, err.msg);
	isc_crash_point("place.cleanup_cluster_closed");
	/* The key file is in the shared keys folder: never deleted by a stale step. */
	if (!step_holds(b, s, e, 1))
		return;
	isc_cluster_key_delete(b->home, cluster_id);
	broker_credits_release(b, s, e->id);
	if (isc_store_intent_resolve(s, token, "failed", why, &err))
		isc_log(ISC_LOG_ERROR, "%s: intent %s: %s", e->id, token, err.msg);
}

/*
 * Intents left pending on closed clusters (a crash inside give_up_cluster): the
 * launch made nothing, so they are marked failed; nothing asks the cloud for them.
 */
static void settle_closed_intents(struct isc_store *s, const struct isc_experiment *e)
{
	struct isc_cluster *list;
	struct isc_err err;
	size_t n;

	if (isc_store_cluster_list_for_experiment(s, e->id, 0, &list, &n, &err))
		return;
	for (size_t i = 0; i < n; i++) {
		struct isc_intent in;
		if (strcmp(list[i].state, "closed") != 0 ||
		    isc_store_intent_for_cluster(s, list[i].id, &in, &err))
			continue;
		if (strcmp(in.state, "pending") == 0 &&
		    isc_store_intent_resolve(s, in.token, "failed",
		                             "the launch failed; its cleanup was cut short", &err))
			isc_log(ISC_LOG_ERROR, "%s: intent %s: %s", e->id, in.token, err.msg);
		isc_intent_cleanup(&in);
	}
	isc_cluster_list_free(list, n);
}

/*
 * Walks the ranked candidates: reserve credits, record the cluster and its
 * intent, launch. capacity and quota move on to the next shape.
 */
static void place_keyed(struct isc_broker *b, struct isc_store *s, struct isc_experiment *e,
                        char **key_id_p, char **key_account_p);

static void place(struct isc_broker *b, struct isc_store *s, struct isc_experiment *e)
{
	/* The key of the candidate being tried lives here, so every return of the walk frees it. */
	char *key_id = NULL, *key_account = NULL;
	place_keyed(b, s, e, &key_id, &key_account);
	free(key_id);
	free(key_account);
}

static void place_keyed(struct isc_broker *b, struct isc_store *s, struct isc_experiment *e,
                        char **key_id_p, char **key_account_p)
{
	struct broker_candidate *cands = NULL;
	struct isc_err err;
	char last_error[ISC_ERR_MSG_MAX + 128] = "";
	char dead[4][16]; /* providers that answered auth/invalid: the rest of their shapes would
	                     too */
	size_t n_dead = 0;
	size_t n = 0, tried = 0;

	struct isc_cluster live;

	/* A cluster recorded before a crash, with its intent: finish that launch first. */
	if (current_cluster(s, e->id, &live)) {
		set_status(s, e, "provisioning", "resuming cluster %s on %s", live.id,
		           live.shape_id);
		isc_cluster_cleanup(&live);
		return;
	}
	/* Holds left by a step that died before its cluster was recorded. */
	broker_credits_release(b, s, e->id);
	settle_closed_intents(s, e);
	/* A full disk must never fail a ledger write: no new cluster while it is nearly full. */
	if (broker_disk_low(b, last_error, sizeof(last_error))) {
		e->next_attempt_ms = isc_store_now_ms() + b->config->retry_wait_ms;
		isc_store_experiment_set_placement(s, e, &err);
		wait_again(b, s, e, ISC_BURST_WAIT_OTHER, "%s", last_error);
		return;
	}
	/* Datasets are checked before any money is spent: each must still be Available. */
	if (broker_datasets_check(s, e, &err)) {
		if (!store_blip(e, err.code, &err, "checking the datasets"))
			set_status(s, e, "failed", "%s", err.msg);
		return;
	}
	if (broker_place(b, s, e, &cands, &n, &err)) {
		if (!store_blip(e, err.code, &err, "placing"))
			set_status(s, e, "failed", "cannot place: %s", err.msg);
		return;
	}
	/* A waiting experiment's retry goes straight to provisioning when it gets that far:
	 * a retry that ends waiting for the same reason leaves no trace in the timeline. */
	if (strcmp(e->status, "placing") != 0 && strcmp(e->status, "waiting") != 0)
		set_status(s, e, "placing", "%zu candidate shape(s) for %d GPUs; first: %s", n,
		           e->gpus, n ? cands[0].shape_id : "none");
	for (size_t i = 0; i < n; i++) {
		struct broker_candidate *cand = &cands[i];
		struct isc_cluster c = {0};
		const char *key_id, *key_account;
		char *cluster_id = NULL, *pubkey = NULL, token[80];
		enum isc_credits_limit limit = ISC_CREDITS_LIMIT_NONE;
		int rc;

		if (broker_shape_excluded(b, e->id, cand->shape_id) ||
		    provider_dead(dead, n_dead, cand->provider))
			continue;
		if (broker_cloud_configured(b, cand->provider, &err)) {
			note(s, e, "skip", "%s: %s", cand->shape_id, err.msg);
			continue;
		}
		/* The organisation's own key for this provider and region, else the platform's. */
		free(*key_id_p);
		free(*key_account_p);
		*key_id_p = *key_account_p = NULL;
		if (broker_key_for(b, s, e->org_id, cand->provider, cand->region, key_id_p,
		                   key_account_p, &err)) {
			note(s, e, "skip", "%s: %s", cand->shape_id, err.msg);
			continue;
		}
		key_id = *key_id_p;
		key_account = *key_account_p;
		tried++;
		cluster_id = isc_store_new_id("cl_");
		if (!cluster_id)
			break;
		snprintf(token, sizeof(token), "isc-%s", cluster_id);
		c.id = cluster_id;
		c.experiment_id = e->id;
		c.shape_id = cand->shape_id;
		c.provider = cand->provider;
		c.account = key_id ? (char *)key_id : "default";
		c.region = cand->region;
		c.nnodes = cand->nnodes;
		c.nproc = cand->nproc;
		c.cycle = isc_queue_next_cycle(e->cycle_count);
		c.price_micros = cand->node_price_micros;
		c.state = "launching";
		/* The cluster and its intent first: the reservation and every cloud call refer to
		 * them. */
		rc = isc_store_cluster_create(s, &c, token, cand->zones, &err);
		if (lease_lost(s, rc)) {
			free(cluster_id);
			broker_candidates_free(cands, n);
			return;
		}
		if (rc) {
			note(s, e, "error", "recording a cluster for %s: %s", cand->shape_id,
			     err.msg);
			free(cluster_id);
			break;
		}
		isc_crash_point("place.cluster_recorded");
		rc = broker_credits_reserve(b, s, e, cluster_id,
		                            cand->node_price_micros * cand->nnodes, &limit, &err);
		if (!rc)
			rc = isc_cluster_key_create(b->home, cluster_id, &pubkey, &err);
		if (lease_lost(s, rc)) {
			/* Another replica took the burst while this one was held: the cluster is
			 * its to resume, and nothing here is undone (issue 48). */
			free(pubkey);
			free(cluster_id);
			broker_candidates_free(cands, n);
			return;
		}
		if (rc) {
			struct isc_err ignored;
			int credits = rc == ISC_ECREDITS;
			char why[ISC_ERR_MSG_MAX];
			snprintf(why, sizeof(why), "%s", err.msg);
			give_up_cluster(b, s, e, cluster_id, token, why);
			free(cluster_id);
			broker_candidates_free(cands, n);
			e->next_attempt_ms = isc_store_now_ms() + b->config->retry_wait_ms;
			isc_store_experiment_set_placement(s, e, &ignored);
			if (credits)
				wait_again(b, s, e,
				           limit == ISC_CREDITS_LIMIT_PROJECT
				               ? ISC_BURST_WAIT_CREDITS_PROJECT
				               : ISC_BURST_WAIT_CREDITS_ORG,
				           "credits: %s", why);
			else
				wait_again(b, s, e, ISC_BURST_WAIT_OTHER,
				           "preparing a cluster for %s: %s", cand->shape_id, why);
			return;
		}
		e->nnodes = cand->nnodes;
		e->nproc = cand->nproc;
		free(e->shape_id);
		e->shape_id = strdup(cand->shape_id);
		e->next_attempt_ms = 0;
		isc_store_experiment_set_placement(s, e, &err);
		set_status(s, e, "provisioning",
		           "trying %s: %d node(s) x %d GPU(s), zones %s, cluster %s%s%s%s%s%s",
		           cand->shape_id, cand->nnodes, cand->nproc,
		           cand->zones[0] ? cand->zones : "any (the cloud picks)", cluster_id,
		           key_id ? ", on the organisation's key " : "", key_id ? key_id : "",
		           key_id ? " (account " : "", key_id ? key_account : "",
		           key_id ? ")" : "");
		isc_crash_point("place.before_launch");
		rc = broker_cloud_launch(b, s, &c, e->org_id, cand, token, NULL, pubkey, &err);
		free(pubkey);
		if (lease_lost(s, rc)) {
			free(cluster_id);
			broker_candidates_free(cands, n);
			return;
		}
		if (rc == 0) {
			isc_crash_point("launch.before_resolve");
			isc_store_intent_resolve(s, token, "launched", "", &err);
			note(s, e, "launched", "%s: %d node(s) launched; waiting for them to run",
			     cand->shape_id, cand->nnodes);
			free(cluster_id);
			broker_candidates_free(cands, n);
			return;
		}
		if (isc_code_is_retryable(rc)) {
			/* The call may have happened: keep the intent pending and ask again with
			 * its token. */
			note(s, e, "launch_unknown",
			     "%s: %s: %s; the launch will be repeated with the same token",
			     cand->shape_id, isc_code_name(rc), err.msg);
			free(cluster_id);
			broker_candidates_free(cands, n);
			return;
		}
		snprintf(last_error, sizeof(last_error), "%s: %s", cand->shape_id, err.msg);
		note(s, e, isc_code_name(rc), "%s: %s: %s", cand->shape_id, isc_code_name(rc),
		     err.msg);
		if (rc == ISC_EAUTH && key_id) {
			/* The org's key was refused: no new launches on it until it verifies again.
			 */
			struct isc_err kerr;
			if (isc_store_key_set_state(s, key_id, "failing", err.msg, 0, &kerr))
				isc_log(ISC_LOG_WARN, "cloud key %s: marking it failing: %s",
				        key_id, kerr.msg);
			note(s, e, "key_failing",
			     "cloud key %s (account %s) refused by %s; no new launches on it until "
			     "'isc keys verify %s' passes",
			     key_id, key_account, cand->provider, key_id);
		}
		if (rc != ISC_ECAPACITY && rc != ISC_EQUOTA &&
		    n_dead < sizeof(dead) / sizeof(dead[0]))
			snprintf(dead[n_dead++], sizeof(dead[0]), "%s", cand->provider);
		give_up_cluster(b, s, e, cluster_id, token, err.msg);
		broker_exclude_shape(b, e->id, cand->shape_id);
		free(cluster_id);
	}
	broker_candidates_free(cands, n);
	round_exhausted(b, s, e, tried, last_error);
}

static int candidate_for_cluster(struct isc_broker *b, struct isc_store *s,
                                 struct isc_experiment *e, const struct isc_cluster *c,
                                 struct broker_candidate *out)
{
	struct broker_candidate *cands;
	struct isc_err err;
	size_t n;
	int found = 0;

	if (broker_place(b, s, e, &cands, &n, &err))
		return 0;
	for (size_t i = 0; i < n; i++) {
		if (strcmp(cands[i].shape_id, c->shape_id) == 0) {
			*out = cands[i];
			memset(&cands[i], 0, sizeof(cands[i]));
			found = 1;
			break;
		}
	}
	broker_candidates_free(cands, n);
	return found;
}

/* Gives up on a launch intent: nothing more is asked of the cloud for it; the cluster closes. */
static void abandon_launch(struct isc_broker *b, struct isc_store *s, struct isc_experiment *e,
                           const struct isc_cluster *c, const struct isc_intent *intent,
                           const char *why)
{
	struct isc_err err;
	isc_store_intent_resolve(s, intent->token, "failed", why, &err);
	teardown(b, s, e, c, 0, 0, 1);
}

/* ---- lost nodes (issue 32): replace only what was lost ---- */

/*
 * The replacement's key is the replaced cluster's: the kept nodes authorised that one
 * when they were launched, and the replacements are launched with it too. A copy made
 * before a crash is used again.
 */
static int copy_cluster_key(const char *home, const char *from, const char *to, struct isc_err *err)
{
	char *src = isc_cluster_key_path(home, from), *dst = isc_cluster_key_path(home, to);
	char buf[8192];
	ssize_t got = -1;
	int in = -1, out = -1, rc = 0;

	if (!src || !dst)
		rc = isc_err_set(err, ISC_EINVALID, "no key path for cluster %s", to);
	if (!rc && (in = open(src, O_RDONLY | O_CLOEXEC)) < 0)
		rc = isc_err_set(err, ISC_ENOTFOUND, "the key of cluster %s: %s", from,
		                 strerror(errno));
	if (!rc && (got = read(in, buf, sizeof(buf))) <= 0)
		rc = isc_err_set(err, ISC_EIO, "reading the key of cluster %s", from);
	if (!rc) {
		out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (out < 0 && errno != EEXIST)
			rc = isc_err_set(err, ISC_EIO, "the key of cluster %s: %s", to,
			                 strerror(errno));
		else if (out >= 0 && (write(out, buf, (size_t)got) != got || fsync(out) != 0)) {
			rc = isc_err_set(err, ISC_EIO, "writing the key of cluster %s", to);
			unlink(dst);
		}
	}
	explicit_bzero(buf, sizeof(buf));
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	free(src);
	free(dst);
	return rc;
}

/* The experiment's cluster that replaces cluster_id (in any state), into *out. */
static int replacement_of(struct isc_store *s, const char *experiment_id, const char *cluster_id,
                          struct isc_cluster *out)
{
	struct isc_cluster *list;
	struct isc_err err;
	size_t n;
	int found = 0;

	if (isc_store_cluster_list_for_experiment(s, experiment_id, 0, &list, &n, &err))
		return 0;
	for (size_t i = 0; i < n && !found; i++) {
		if (strcmp(list[i].replaces, cluster_id) != 0)
			continue;
		*out = list[i];
		memset(&list[i], 0, sizeof(list[i]));
		found = 1;
	}
	isc_cluster_list_free(list, n);
	return found;
}

/*
 * The replacement of lost nodes could not be had (no capacity in the gang's zone, the
 * deadline passed, a kept node went too): today's whole-gang failover. Whatever the
 * replacement holds (kept nodes already moved, replacements launched) is terminated; the
 * checkpoint came home when the containers were stopped, so the new gang resumes from it
 * in the same cycle.
 */
static void replace_fallback(struct isc_broker *b, struct isc_store *s, struct isc_experiment *e,
                             const struct isc_cluster *r, const char *why)
{
	struct isc_intent intent;
	struct isc_err err;
	int fill[BROKER_MAX_NODES];
	int k = broker_fill_ranks(r, fill, BROKER_MAX_NODES);

	/* It terminates the kept nodes: never for a replacement another replica now runs. */
	if (!step_holds(b, s, e, 1))
		return;
	note(s, e, "replace_fallback",
	     "replacing %d of %d node(s) in %s failed: %s; falling back to a whole new gang "
	     "(the kept nodes are terminated)",
	     k, r->nnodes, r->zone, why);
	restored_free(restored_take(r->id));
	if (isc_store_intent_for_cluster(s, r->id, &intent, &err) == 0) {
		if (strcmp(intent.state, "pending") == 0) {
			collect_launch(b, s, e, r);
			isc_store_intent_resolve(s, intent.token, "failed", why, &err);
		}
		isc_intent_cleanup(&intent);
	}
	isc_crash_point("lostnodes.fallback_started");
	teardown(b, s, e, r, 0, 0, 1);
	broker_exclusions_clear(b, e->id);
	set_status(s, e, "placing",
	           "lost nodes not replaced (%.200s): whole-gang failover for cycle %d", why,
	           r->cycle);
}

/*
 * The drain of a cluster some of whose nodes are kept by its replacement: every rank's
 * container is stopped with the grace period, the checkpoint comes home from its rank
 * 0, the kept nodes move into the replacement with their new ranks, and what is left
 * (the lost nodes) is terminated. Run again after a crash, it does what is left: once the
 * kept nodes have moved, only the termination.
 */
static void drain_replaced(struct isc_broker *b, struct isc_store *s,
                           const struct isc_experiment *e, const struct isc_cluster *d,
                           const struct isc_cluster *r)
{
	struct isc_node *nodes = NULL;
	struct isc_err err;
	size_t n = 0, kept = 0, moved = 0;
	int rc;

	if (!step_holds(b, s, e, 1))
		return;
	if (isc_store_cluster_kept_count(s, d->id, &kept, &err) == 0 && kept > 0 &&
	    isc_store_node_list(s, d->id, &nodes, &n, &err) == 0) {
		const struct isc_node *rank0 = NULL;
		broker_stop_containers(b, e, d, nodes, n);
		isc_crash_point("lostnodes.containers_stopped");
		for (size_t i = 0; i < n && !rank0; i++)
			if (nodes[i].rank == 0)
				rank0 = &nodes[i];
		/* d's ranks never ran when r takes its cycle: nothing to bring home from it. */
		if (r->cycle != d->cycle &&
		    (!rank0 || broker_artifacts_pull(b, s, e, d, rank0, ISC_ARTIFACT_ALL, &err)))
			note(s, e, "artifacts", "could not bring artifacts home from rank 0: %s",
			     rank0 ? err.msg : "no rank 0");
		else if (r->cycle != d->cycle)
			note(s, e, "artifacts",
			     "checkpoint, crud and lossy folders brought home from rank 0");
		for (size_t i = 0; i < n; i++) {
			int code, inserted = 0;
			if (broker_follower_rank_exit(b, d->id, nodes[i].rank, &code) &&
			    isc_store_rank_exit_record(s, d->id, nodes[i].rank, code, &inserted,
			                               &err) == 0 &&
			    inserted)
				note(s, e, "rank_exit", "rank %d exited with code %d",
				     nodes[i].rank, code);
		}
		broker_follower_stop(b, d->id);
		broker_sync_forget(b, d->id);
		rc = isc_store_cluster_take_kept(s, d->id, r->id, &moved, &err);
		if (rc) {
			/*
			 * The kept nodes are still rows of d: terminating d now would terminate
			 * them. They stay, and the next step's drain moves them (issue 48).
			 */
			if (!lease_lost(s, rc))
				note(s, e, "error",
				     "moving the kept nodes of %s: %s; nothing terminated, tried "
				     "again at the next step",
				     d->id, err.msg);
			isc_node_list_free(nodes, n);
			return;
		}
		note(s, e, "replace",
		     "%zu kept node(s) of cluster %s go on in cluster %s, never terminated", moved,
		     d->id, r->id);
		isc_crash_point("lostnodes.kept_moved");
	}
	isc_node_list_free(nodes, n);
	restored_free(restored_take(d->id)); /* a replacement that grew: its early work is void */
	if (broker_cluster_terminate(b, s, d, &err))
		note(s, e, "terminate", "terminating cluster %s: %s (will retry)", d->id, err.msg);
}

/*
 * Launches (or asks again for) the replacements of a replacement cluster: only its fill
 * ranks, in its zone, into its gang's placement, with its intent's token. The cloud's
 * refusal is the whole-gang failover.
 */
static void launch_replacement(struct isc_broker *b, struct isc_store *s, struct isc_experiment *e,
                               const struct isc_cluster *r, const struct broker_candidate *cand,
                               const char *token, const char *resume_zone)
{
	struct isc_err err;
	char *pubkey = NULL;
	int rc = isc_cluster_key_public(b->home, r->id, &pubkey, &err);

	isc_crash_point("lostnodes.before_launch");
	if (!rc)
		rc =
		    broker_cloud_launch(b, s, r, e->org_id, cand, token, resume_zone, pubkey, &err);
	free(pubkey);
	if (lease_lost(s, rc))
		return; /* the replacement is another replica's to launch and keep */
	if (rc == 0) {
		isc_crash_point("lostnodes.replacement_launched");
		isc_store_intent_resolve(s, token, "launched", "", &err);
		note(s, e, "launched", "%s: replacement node(s) for rank(s) %s launched in %s",
		     r->shape_id, r->fill_ranks, r->zone);
	} else if (isc_code_is_retryable(rc)) {
		note(s, e, "launch_unknown",
		     "%s: %s: %s; the replacement's launch will be repeated with the same token",
		     r->shape_id, isc_code_name(rc), err.msg);
	} else {
		char why[ISC_ERR_MSG_MAX + 32];
		snprintf(why, sizeof(why), "%s: %s", isc_code_name(rc), err.msg);
		/* Before the fallback's teardown: the kept nodes must not move into it. */
		isc_store_intent_resolve(s, token, "failed", why, &err);
		replace_fallback(b, s, e, r, why);
	}
}

/*
 * A node (or several) of a running gang of N > 1 got an interruption notice, or is gone:
 * keep the others. The replacement cluster (cycle + 1, the same shape, zone and key) is
 * recorded with what it keeps in one transaction, launched for the lost ranks alone, and
 * the old cluster drained into it (drain_replaced). Ranks: a kept node keeps its rank,
 * unless rank 0 was lost: then the lowest kept rank becomes 0 (MASTER_ADDR is never a
 * node still booting) and the replacements fill what is left. Returns 0 when this path is
 * not taken (one node, nothing left to keep, no zone, replace_deadline_ms 0, the shape no
 * longer a candidate): the caller fails over the whole gang as before.
 *
 * A cluster whose ranks never ran (a replacement still provisioning or booting, or a gang
 * booting its first containers) that loses nodes is replaced the same way, for the same
 * cycle: a replacement grows by what it lost, its nodes still booting are kept too, and
 * nothing is brought home from it (the last cycle's folders at home stay the ones to
 * restore).
 */
static int replace_lost(struct isc_broker *b, struct isc_store *s, struct isc_experiment *e,
                        const struct isc_cluster *c, const struct isc_node *nodes, size_t n)
{
	struct broker_candidate cand;
	struct isc_cluster r = {0};
	struct isc_intent old_intent;
	struct isc_err err;
	const char **kept_ids = NULL;
	int *kept_ranks = NULL, *lost = NULL;
	char fill[512] = "", lost_list[512] = "", kept_list[512] = "", token[80];
	char *id = NULL, *placement = NULL;
	size_t k = 0, m = 0;
	int remap = -1, taken = 0, rc;
	int ran = e->cycle_count >= c->cycle; /* its cycle started: booting succeeded once */
	enum isc_credits_limit limit = ISC_CREDITS_LIMIT_NONE;

	if (b->config->replace_deadline_ms <= 0 || c->nnodes < 2 || n != (size_t)c->nnodes ||
	    !c->zone[0])
		return 0;
	lost = calloc(n, sizeof(*lost));
	kept_ids = calloc(n, sizeof(*kept_ids));
	kept_ranks = calloc(n, sizeof(*kept_ranks));
	if (!lost || !kept_ids || !kept_ranks)
		goto out;
	for (size_t i = 0; i < n; i++)
		if (nodes[i].rank != (int)i)
			goto out; /* not ranks 0..N-1 (the rows are read by rank) */
	/* Rank 0 lost: a kept node that is up takes it (liveness.c); its own rank is filled. */
	k = broker_lost_ranks(nodes, n, ran, lost, &remap);
	if (k == 0 || k == n)
		goto out;
	for (size_t i = 0; i < n; i++) {
		char *list = lost[i] ? lost_list : kept_list;
		snprintf(list + strlen(list), sizeof(lost_list) - strlen(list), "%s%d",
		         list[0] ? "," : "", (int)i);
		if (!lost[i]) {
			kept_ids[m] = nodes[i].instance_id;
			kept_ranks[m++] = (int)i == remap ? 0 : (int)i;
		}
		if ((lost[i] && i != 0) || (int)i == remap)
			snprintf(fill + strlen(fill), sizeof(fill) - strlen(fill), "%s%zu",
			         fill[0] ? "," : "", i);
	}
	if (!candidate_for_cluster(b, s, e, c, &cand)) {
		note(s, e, "replace_fallback",
		     "shape %s is no longer a candidate: the lost node(s) are not replaced alone",
		     c->shape_id);
		goto out;
	}
	/* The placement the replacements join: the gang launch this cluster's nodes came from. */
	if (c->placement_token[0])
		placement = strdup(c->placement_token);
	else if (isc_store_intent_for_cluster(s, c->id, &old_intent, &err) == 0) {
		placement = strdup(old_intent.token);
		isc_intent_cleanup(&old_intent);
	}
	if (!placement || !(id = isc_store_new_id("cl_"))) {
		broker_candidate_cleanup(&cand);
		goto out;
	}
	snprintf(token, sizeof(token), "isc-%s", id);
	r.id = id;
	r.experiment_id = e->id;
	r.shape_id = c->shape_id;
	r.provider = c->provider;
	r.account = c->account;
	r.region = c->region;
	r.zone = c->zone;
	r.nnodes = c->nnodes;
	r.nproc = c->nproc;
	r.cycle = ran ? isc_queue_next_cycle(c->cycle) : c->cycle;
	r.price_micros = c->price_micros;
	r.replaces = c->id;
	r.placement_token = placement;
	r.fill_ranks = fill;
	rc = copy_cluster_key(b->home, c->id, id, &err);
	if (!rc)
		rc = isc_store_cluster_replace(s, &r, token, kept_ids, kept_ranks, m, &err);
	if (lease_lost(s, rc)) {
		/* Nothing recorded: the copy of the key is this step's alone. No fallback. */
		isc_cluster_key_delete(b->home, id);
		broker_candidate_cleanup(&cand);
		taken = 1;
		goto out;
	}
	if (rc) {
		note(s, e, "replace_fallback", "recording the replacement of rank(s) %s: %s",
		     lost_list, err.msg);
		isc_cluster_key_delete(b->home, id);
		broker_candidate_cleanup(&cand);
		goto out;
	}
	taken = 1;
	isc_crash_point("lostnodes.replacement_recorded");
	note(s, e, "interrupted",
	     "rank(s) %s of cluster %s lost (notice or gone)%s; replacing %zu of %zu node(s) in "
	     "%s (placement of %s), keeping rank(s) %s%s; cluster %s for cycle %d",
	     lost_list, c->id, ran ? "" : " before its ranks ran", k, n, c->zone, placement,
	     kept_list, remap > 0 ? " (rank 0 lost: a kept node becomes rank 0)" : "", id, r.cycle);
	if (set_status(s, e, "placing",
	               "interrupted on %s: replacing %zu of %zu node(s) (rank(s) %s) in %s, "
	               "keeping the rest, for cycle %d",
	               c->shape_id, k, n, lost_list, c->zone, r.cycle) == 0)
		set_status(s, e, "provisioning",
		           "replacing %zu of %zu node(s) in %s for cycle %d: launching rank(s) %s "
		           "into the gang's placement, cluster %s",
		           k, n, c->zone, r.cycle, fill, id);
	rc = broker_credits_reserve(b, s, e, id, c->price_micros * c->nnodes, &limit, &err);
	if (lease_lost(s, rc)) {
		/* Held past the lease after recording it: the replacement, the kept nodes and
		 * the drain are the replica's that holds the burst now (issue 48). */
		broker_candidate_cleanup(&cand);
		goto out;
	}
	if (rc) {
		char why[ISC_ERR_MSG_MAX + 16];
		snprintf(why, sizeof(why), "credits: %s", err.msg);
		isc_store_intent_resolve(s, token, "failed", why, &err);
		replace_fallback(b, s, e, &r, why);
	} else {
		launch_replacement(b, s, e, &r, &cand, token, NULL);
	}
	broker_candidate_cleanup(&cand);
	drain(b, s, e);
out:
	free(id);
	free(placement);
	free(lost);
	free(kept_ids);
	free(kept_ranks);
	return taken;
}

/*
 * A launch whose outcome is unknown: a lost reply, retries run out, a reply
 * that could not be read or recorded, or a crash anywhere between the intent
 * and the nodes' rows. A replay must never launch where an earlier attempt of
 * the same intent may have succeeded, so, in order:
 *   1. look for the cluster's nodes by its tag, and adopt a whole gang;
 *   2. if only part of it is listed, wait: describes are eventually consistent
 *      (the deadline for nodes to come up still applies);
 *   3. make sure the credit hold exists (a crash may have come between the
 *      cluster's row and its hold);
 *   4. ask again with the same token, starting with the zone whose call was
 *      last started: if that call created the gang, the same token returns it
 *      before any other zone is tried.
 */
static void resume_launch(struct isc_broker *b, struct isc_store *s, struct isc_experiment *e,
                          const struct isc_cluster *c, const struct isc_intent *intent)
{
	struct broker_candidate cand;
	struct isc_err err;
	char *pubkey = NULL, why[ISC_ERR_MSG_MAX];
	int fill[BROKER_MAX_NODES];
	/* A replacement of lost nodes (issue 32): its fill ranks, and its own deadline. */
	int k = broker_fill_ranks(c, fill, BROKER_MAX_NODES);
	size_t found = 0, whole = (size_t)(k ? k : c->nnodes);
	long deadline = k ? b->config->replace_deadline_ms : b->config->boot_deadline_ms;
	int rc;

	rc = broker_cloud_adopt(b, s, c, &found, &err);
	if (lease_lost(s, rc))
		return;
	if (rc) {
		note(s, e, "launch_unknown",
		     "%s: looking for cluster %s by its tag: %s; will ask again", c->shape_id,
		     c->id, err.msg);
		return;
	}
	if (found == whole) {
		isc_store_intent_resolve(s, intent->token, "launched", "", &err);
		note(s, e, "launched", "%s: found all %zu node(s) of cluster %s by its tag",
		     c->shape_id, found, c->id);
		return;
	}
	if (found > 0) {
		if (isc_store_now_ms() - c->created_at_ms <= deadline)
			return; /* the rest may be one describe behind */
		if (k) {
			snprintf(why, sizeof(why), "only %zu of %d replacement(s) ever listed",
			         found, k);
			isc_store_intent_resolve(s, intent->token, "failed", why, &err);
			replace_fallback(b, s, e, c, why);
			return;
		}
		note(s, e, "partial",
		     "%s: only %zu/%d node(s) of cluster %s ever listed; rolling back", c->shape_id,
		     found, c->nnodes, c->id);
		broker_exclude_shape(b, e->id, c->shape_id);
		abandon_launch(b, s, e, c, intent, "partial gang");
		set_status(s, e, "placing", "partial gang on %s rolled back; trying the next shape",
		           c->shape_id);
		return;
	}
	if (k && isc_store_now_ms() - c->created_at_ms > deadline) {
		/* As below, the intent stays pending for the watch; the gang fails over. */
		snprintf(why, sizeof(why), "the launch never answered within %ld s",
		         deadline / 1000);
		replace_fallback(b, s, e, c, why);
		return;
	}
	if (isc_store_now_ms() - c->created_at_ms > b->config->boot_deadline_ms) {
		/*
		 * The intent's deadline: no launch call is made for it any more, so the
		 * watch can tell when the cloud has listed all it ever will for it. The
		 * intent stays pending: whatever a lagging listing shows later is recorded,
		 * terminated and charged by the watch, which then closes the cluster.
		 */
		note(s, e, "timeout",
		     "%s: cluster %s's launch never answered within %ld s; giving it up",
		     c->shape_id, c->id, b->config->boot_deadline_ms / 1000);
		broker_exclude_shape(b, e->id, c->shape_id);
		teardown(b, s, e, c, 0, 0, 1);
		set_status(s, e, "placing", "launch on %s never answered; trying the next shape",
		           c->shape_id);
		return;
	}
	if (!candidate_for_cluster(b, s, e, c, &cand)) {
		if (k) {
			isc_store_intent_resolve(s, intent->token, "failed", "shape gone", &err);
			replace_fallback(b, s, e, c, "the shape is no longer a candidate");
			return;
		}
		note(s, e, "error", "shape %s is no longer a candidate; rolling back", c->shape_id);
		abandon_launch(b, s, e, c, intent, "shape gone");
		return;
	}
	rc = broker_credits_ensure(b, s, e, c, &err);
	if (lease_lost(s, rc)) {
		broker_candidate_cleanup(&cand);
		return;
	}
	if (rc && k) {
		snprintf(why, sizeof(why), "credits: %.400s", err.msg);
		isc_store_intent_resolve(s, intent->token, "failed", why, &err);
		replace_fallback(b, s, e, c, why);
		broker_candidate_cleanup(&cand);
		return;
	}
	if (rc) {
		snprintf(why, sizeof(why), "%s", err.msg);
		abandon_launch(b, s, e, c, intent, why);
		e->next_attempt_ms = isc_store_now_ms() + b->config->retry_wait_ms;
		isc_store_experiment_set_placement(s, e, &err);
		/* Which limit is not known here; the next try's reservation says. */
		wait_again(b, s, e, ISC_BURST_WAIT_OTHER, "credits: %s", why);
		broker_candidate_cleanup(&cand);
		return;
	}
	isc_crash_point("replay.before_launch");
	if (k) {
		/* Its key is the replaced cluster's copy (never a new one: the kept nodes). */
		launch_replacement(b, s, e, c, &cand, intent->token, intent->attempt_zone);
		broker_candidate_cleanup(&cand);
		return;
	}
	rc = isc_cluster_key_public(b->home, c->id, &pubkey, &err);
	/* A crash between the cluster's row and its key: no launch can have used a key that
	 * never existed, so a new one is as good. */
	if (rc == ISC_ENOTFOUND)
		rc = isc_cluster_key_create(b->home, c->id, &pubkey, &err);
	if (!rc)
		rc = broker_cloud_launch(b, s, c, e->org_id, &cand, intent->token,
		                         intent->attempt_zone, pubkey, &err);
	free(pubkey);
	broker_candidate_cleanup(&cand);
	if (lease_lost(s, rc))
		return;
	if (rc == 0) {
		isc_crash_point("launch.before_resolve");
		isc_store_intent_resolve(s, intent->token, "launched", "", &err);
		note(s, e, "launched", "%s: launch confirmed with token %s", c->shape_id,
		     intent->token);
	} else if (isc_code_is_retryable(rc)) {
		note(s, e, "launch_unknown", "%s: %s; will ask again", c->shape_id, err.msg);
	} else {
		note(s, e, isc_code_name(rc), "%s: %s", c->shape_id, err.msg);
		broker_exclude_shape(b, e->id, c->shape_id);
		abandon_launch(b, s, e, c, intent, err.msg);
		set_status(s, e, "placing", "%s failed; trying the next shape", c->shape_id);
	}
}

/*
 * The nodes of a replacement cluster that already hold its cycle's restore: its kept
 * nodes, restored while the replacements boot, so that booting restores onto the
 * replacements alone. In memory only: after a restart every node is restored again (the
 * push is idempotent, and what is at home does not change once the kept nodes moved).
 */
/* Whether the kept nodes' containers started before the new nodes were up. */
enum kept_start { KEPT_START_WAITING, KEPT_STARTED, KEPT_START_FAILED };

/*
 * What a replacement cluster's kept nodes already hold while its new nodes boot, in
 * memory only (after a restart, booting does it all again): the restore, and once
 * started, their containers too.
 */
struct restored {
	char cluster_id[64];
	char **ids;
	size_t n;
	enum kept_start start;
	struct restored *next;
};
static struct restored *restored_list;
static pthread_mutex_t restored_lock = PTHREAD_MUTEX_INITIALIZER;

static void restored_free(struct restored *r)
{
	for (size_t i = 0; r && i < r->n; i++)
		free(r->ids[i]);
	if (r)
		free(r->ids);
	free(r);
}

/* Removes and returns the cluster's entry (NULL: none). Caller frees with restored_free. */
static struct restored *restored_take(const char *cluster_id)
{
	struct restored **p, *r = NULL;
	pthread_mutex_lock(&restored_lock);
	for (p = &restored_list; *p; p = &(*p)->next)
		if (strcmp((*p)->cluster_id, cluster_id) == 0) {
			r = *p;
			*p = r->next;
			break;
		}
	pthread_mutex_unlock(&restored_lock);
	return r;
}

/* The cluster's entry for these nodes; NULL when out of memory. */
static struct restored *restored_new(const char *cluster_id, const struct isc_node *nodes, size_t n)
{
	struct restored *r = calloc(1, sizeof(*r));
	if (!r || !(r->ids = calloc(n ? n : 1, sizeof(*r->ids)))) {
		free(r);
		return NULL; /* booting restores onto every node, as without it */
	}
	snprintf(r->cluster_id, sizeof(r->cluster_id), "%s", cluster_id);
	for (size_t i = 0; i < n; i++)
		if ((r->ids[r->n] = strdup(nodes[i].instance_id)))
			r->n++;
	return r;
}

/* Hands r (may be NULL) to the list. */
static void restored_put(struct restored *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&restored_lock);
	r->next = restored_list;
	restored_list = r;
	pthread_mutex_unlock(&restored_lock);
}

static int restored_has(const struct restored *r, const char *instance_id)
{
	for (size_t i = 0; r && i < r->n; i++)
		if (strcmp(r->ids[i], instance_id) == 0)
			return 1;
	return 0;
}

/*
 * Restores what the last cycle brought home onto every node of the new cluster
 * before any container starts, all nodes at once: every rank resumes from the
 * same files, as on the platform, where these folders are one folder all nodes
 * share (docs/launcher.md, "What each rank sees"). A target the watch has already
 * seen go is not tried, and one that goes while the copies run ends them at once
 * (a node watcher cancels the launcher's retries): the caller then treats it as
 * an interruption. Nodes in `done` already hold it and are left out.
 */
static int restore_artifacts(struct isc_broker *b, const struct isc_experiment *e,
                             const struct isc_cluster *c, const struct isc_node *nodes, size_t n,
                             const struct restored *done, struct isc_err *err)
{
	const char **ids = calloc(n ? n : 1, sizeof(*ids));
	struct isc_node *todo = calloc(n ? n : 1, sizeof(*todo));
	struct broker_node_watch *w = NULL;
	struct isc_err werr;
	volatile int gone = 0;
	int rc = 0, masters = 0;
	size_t m = 0;

	if (!ids || !todo) {
		free(ids);
		free(todo);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		masters += nodes[i].rank == 0;
		if (restored_has(done, nodes[i].instance_id))
			continue;
		todo[m] = nodes[i]; /* a shallow copy: nodes owns the strings */
		ids[m++] = nodes[i].instance_id;
	}
	if (masters == 0)
		rc = isc_err_set(err, ISC_EINVALID, "cluster %s has no rank 0", c->id);
	if (!rc)
		isc_crash_point("boot.restore_started");
	for (size_t i = 0; i < m && !rc; i++)
		if (broker_node_gone(&todo[i]))
			rc = isc_err_set(err, ISC_ETRANSIENT, "rank %d (%s) is %s", todo[i].rank,
			                 todo[i].instance_id, todo[i].state);
	if (!rc && m > 0) {
		if (broker_node_watch_start(b->home, c->id, ids, m, &gone, &w, &werr))
			isc_log(ISC_LOG_WARN, "%s: %s", e->id, werr.msg);
		rc = broker_artifacts_push(b, e, c, todo, m, &gone, err);
		broker_node_watch_stop(w);
		if (rc && gone)
			isc_err_wrap(err, "a node of the cluster went away");
	}
	free(todo);
	free(ids);
	return rc;
}

/*
 * Starts the containers of the restored kept nodes while the new ones still boot, once
 * every node's address is known (a new node's comes with the launch on AWS, with
 * the instance on GCP, once its VNIC is attached on OCI): each rank's environment names the whole
 * gang, and the kept ranks wait for the new ones in the rendezvous. Booting then starts only the
 * new nodes' containers. On a failure the launcher has removed what it started, and booting starts
 * every node.
 */
static enum kept_start start_kept_early(struct isc_broker *b, struct isc_store *s,
                                        const struct isc_experiment *e, const struct isc_cluster *c,
                                        const struct isc_node *nodes, size_t n,
                                        const struct restored *kept)
{
	int *only;
	struct isc_err err;
	enum kept_start start = KEPT_START_FAILED;

	for (size_t i = 0; i < n; i++)
		if (!nodes[i].private_ip[0])
			return KEPT_START_WAITING; /* a new node's address is not known yet */
	if (!(only = calloc(n ? n : 1, sizeof(*only))))
		return KEPT_START_FAILED;
	for (size_t i = 0; i < n; i++)
		only[i] = restored_has(kept, nodes[i].instance_id);
	if (broker_boot_cluster(b, s, e, c, nodes, n, only, &err) == 0) {
		isc_crash_point("lostnodes.kept_started");
		note(s, e, "boot",
		     "started the %zu kept node(s)' containers; they wait for the new one(s) in "
		     "the rendezvous",
		     kept->n);
		start = KEPT_STARTED;
	} else {
		isc_log(ISC_LOG_INFO, "%s: early start on the kept nodes: %s", e->id, err.msg);
	}
	free(only);
	return start;
}

/* Whether the node runs and has an address to reach it at. */
static int node_up(const struct isc_node *n)
{
	return strcmp(n->state, "running") == 0 && (n->private_ip[0] || n->public_ip[0]);
}

/* Whether every node of the cluster runs with an address, as the store says now. */
static int all_nodes_up(struct isc_store *s, const struct isc_cluster *c)
{
	struct isc_node *nodes = NULL;
	struct isc_err err;
	size_t n = 0, up = 0;

	if (isc_store_node_list(s, c->id, &nodes, &n, &err))
		return 0;
	for (size_t i = 0; i < n; i++)
		up += node_up(&nodes[i]);
	isc_node_list_free(nodes, n);
	return (int)n == c->nnodes && up == n;
}

/*
 * While a replacement cluster's new nodes boot, its kept nodes (moved in once the
 * checkpoint came home) take the restore and then start their containers, so that
 * booting waits only for the new nodes' copies and container. Each is tried once per
 * cluster; a failure here only leaves the work to booting. 1 when the new nodes came
 * up during the restore: then booting starts every node together, in this step.
 */
static int restore_kept_early(struct isc_broker *b, struct isc_store *s,
                              const struct isc_experiment *e, const struct isc_cluster *c,
                              const struct isc_node *nodes, size_t n)
{
	struct restored *r = restored_take(c->id);
	struct isc_node *up = NULL;
	struct isc_err err;
	size_t kept_left = 1, m = 0;
	int all_up = 0;

	/* Restoring onto nodes and starting containers: only under the lease. */
	if (!step_holds(b, s, e, 1)) {
		restored_put(r);
		return 0;
	}
	if (!r && isc_store_cluster_kept_count(s, c->replaces, &kept_left, &err) == 0 &&
	    kept_left == 0 && (up = calloc(n ? n : 1, sizeof(*up)))) {
		for (size_t i = 0; i < n; i++)
			if (node_up(&nodes[i]))
				up[m++] = nodes[i];
		if (m > 0 && restore_artifacts(b, e, c, up, m, NULL, &err) == 0) {
			note(s, e, "artifacts",
			     "restored onto the %zu kept node(s) while the new one(s) boot", m);
			r = restored_new(c->id, up, m);
		} else if (m > 0) {
			/* Tried once: booting restores onto every node, and says why not. */
			r = restored_new(c->id, up, 0);
			isc_log(ISC_LOG_INFO, "%s: early restore onto the kept nodes: %s", e->id,
			        err.msg);
		}
		free(up);
	}
	if (r && r->n > 0 && r->start == KEPT_START_WAITING && !(all_up = all_nodes_up(s, c)))
		r->start = start_kept_early(b, s, e, c, nodes, n, r);
	restored_put(r);
	return all_up;
}

/* Nodes launched: wait for all of them to run; roll back a partial gang. */
static void provisioning(struct isc_broker *b, struct isc_store *s, struct isc_experiment *e)
{
	struct isc_cluster c;
	struct isc_intent intent;
	struct isc_node *nodes = NULL;
	struct isc_err err;
	size_t n = 0, running = 0;

	if (!current_cluster(s, e->id, &c)) {
		set_status(s, e, "placing", "no live cluster; placing again");
		return;
	}
	if (isc_store_intent_for_cluster(s, c.id, &intent, &err) == 0) {
		int pending = strcmp(intent.state, "pending") == 0;
		int failed = strcmp(intent.state, "failed") == 0;
		if (pending)
			resume_launch(b, s, e, &c, &intent);
		if (failed) {
			/*
			 * A launch known to have failed whose cluster was never closed (a crash
			 * in the cleanup, in a store written before the cleanup closed the
			 * cluster first): finish the cleanup and place again now, rather than
			 * wait out the boot deadline and give the shape up.
			 */
			struct isc_node *none = NULL;
			size_t n_none = 0;
			if (c.replaces[0]) {
				/*
				 * A replacement of lost nodes whose launch failed: its fallback was
				 * cut short (a crash before its teardown). The kept nodes wait for
				 * nothing: the whole-gang failover now, not at replace_deadline_ms.
				 */
				char why[ISC_ERR_MSG_MAX];
				snprintf(why, sizeof(why), "its launch had failed: %.400s",
				         intent.error);
				replace_fallback(b, s, e, &c, why);
				isc_intent_cleanup(&intent);
				goto out;
			}
			if (isc_store_node_list(s, c.id, &none, &n_none, &err) == 0 &&
			    n_none == 0) {
				note(s, e, "cleanup",
				     "cluster %s's launch had failed (%s); finishing its cleanup",
				     c.id, intent.error);
				give_up_cluster(b, s, e, c.id, intent.token, intent.error);
				set_status(s, e, "placing",
				           "launch on %s had failed; placing again", c.shape_id);
				pending = 1; /* this step is done */
			}
			isc_node_list_free(none, n_none);
		}
		isc_intent_cleanup(&intent);
		if (pending)
			goto out;
	}
	if (isc_store_node_list(s, c.id, &nodes, &n, &err)) {
		isc_log(ISC_LOG_ERROR, "%s: %s", e->id, err.msg);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const char *st = nodes[i].state;
		/* A replacement's node with a notice is lost even while up (a kept node, issue
		 * 48): the notice is asked before whether the node runs. */
		if (c.replaces[0] && (nodes[i].notice_at_ms ||
		                      (strcmp(st, "pending") != 0 && strcmp(st, "running") != 0))) {
			char why[ISC_ERR_MSG_MAX];
			snprintf(why, sizeof(why), "node %s (rank %d) is %s%s before the gang ran",
			         nodes[i].instance_id, nodes[i].rank, st,
			         nodes[i].notice_at_ms ? " with an interruption notice" : "");
			/* A replacement that loses a node grows by it; else the whole gang. */
			if (!replace_lost(b, s, e, &c, nodes, n))
				replace_fallback(b, s, e, &c, why);
			goto out;
		} else if (node_up(&nodes[i])) {
			running++;
		} else if (strcmp(st, "pending") != 0 && strcmp(st, "running") != 0) {
			note(s, e, "partial",
			     "%s: node %s (rank %d) is %s before the cluster ran; rolling back "
			     "the gang",
			     c.shape_id, nodes[i].instance_id, nodes[i].rank, st);
			broker_exclude_shape(b, e->id, c.shape_id);
			teardown(b, s, e, &c, 0, 0, 1);
			isc_crash_point("rollback.partial_torn_down");
			set_status(s, e, "placing",
			           "partial gang on %s rolled back; trying the next shape",
			           c.shape_id);
			goto out;
		}
	}
	if (c.replaces[0] && e->cycle_count > 0 && running > 0 && running < (size_t)c.nnodes &&
	    restore_kept_early(b, s, e, &c, nodes, n))
		running = n; /* the new nodes came up meanwhile */
	if ((int)n == c.nnodes && running == n) {
		isc_store_cluster_set_state(s, c.id, "booting", &err);
		isc_crash_point("provision.cluster_booting");
		set_status(s, e, "booting", "%zu/%d node(s) up; starting containers", running,
		           c.nnodes);
	} else if (c.replaces[0] &&
	           isc_store_now_ms() - c.created_at_ms > b->config->replace_deadline_ms) {
		char why[ISC_ERR_MSG_MAX];
		snprintf(why, sizeof(why), "only %zu/%d node(s) running after %ld s", running,
		         c.nnodes, b->config->replace_deadline_ms / 1000);
		replace_fallback(b, s, e, &c, why);
	} else if (isc_store_now_ms() - c.created_at_ms > b->config->boot_deadline_ms) {
		note(s, e, "timeout", "%s: only %zu/%d node(s) running after %ld s; rolling back",
		     c.shape_id, running, c.nnodes, b->config->boot_deadline_ms / 1000);
		broker_exclude_shape(b, e->id, c.shape_id);
		teardown(b, s, e, &c, 0, 0, 1);
		set_status(s, e, "placing", "nodes of %s did not come up; trying the next shape",
		           c.shape_id);
	}
out:
	isc_node_list_free(nodes, n);
	isc_cluster_cleanup(&c);
}

/*
 * Whether the cloud took a node of the cluster away: the watch has seen one going
 * or gone, or has seen an interruption notice on one; with ask_cloud (after a step
 * failed on the cluster), also what one describe says now, in case the watch has
 * not caught up. *why names the node. An instance a lagging describe leaves out is
 * not counted (absence is confirmed over time, by the watch).
 */
static int cluster_interrupted(struct isc_broker *b, struct isc_store *s,
                               const struct isc_cluster *c, int ask_cloud, char *why, size_t cap)
{
	struct isc_node *nodes = NULL;
	struct broker_instance *seen = NULL;
	struct isc_err err;
	size_t n = 0, n_seen = 0;
	int lost = 0;

	if (isc_store_node_list(s, c->id, &nodes, &n, &err))
		return 0;
	for (size_t i = 0; i < n && !lost; i++) {
		if (broker_node_gone(&nodes[i]) || nodes[i].notice_at_ms) {
			snprintf(why, cap, "node %s (rank %d) is %s%s", nodes[i].instance_id,
			         nodes[i].rank, nodes[i].state,
			         nodes[i].notice_at_ms ? " with an interruption notice" : "");
			lost = 1;
		}
	}
	if (!lost && ask_cloud &&
	    broker_cloud_describe(b, s, c->provider, c->account, c->region, &seen, &n_seen, &err) ==
	        0) {
		for (size_t i = 0; i < n && !lost; i++)
			for (size_t k = 0; k < n_seen && !lost; k++) {
				if (strcmp(seen[k].instance_id, nodes[i].instance_id) != 0)
					continue;
				if (strcmp(seen[k].state, "running") != 0 &&
				    strcmp(seen[k].state, "pending") != 0)
					snprintf(why, cap, "node %s (rank %d) is %s",
					         seen[k].instance_id, nodes[i].rank, seen[k].state);
				else if (seen[k].notice_at_ms)
					snprintf(why, cap,
					         "node %s (rank %d) has an interruption notice",
					         seen[k].instance_id, nodes[i].rank);
				else
					continue;
				lost = 1;
			}
		broker_instances_free(seen, n_seen);
	}
	isc_node_list_free(nodes, n);
	return lost;
}

/*
 * A node lost while its cluster was being prepared (restore, boot): an interruption
 * like any other, whichever step it lands on. Nothing ran on this cluster yet, so
 * nothing is brought home from it (the last cycle's folders at home stay the ones to
 * restore). The nodes still there are kept and only the lost ones replaced, for the
 * same cycle (replace_lost); when that path is not taken the cluster is terminated and
 * the experiment placed again for the same cycle.
 */
static void lost_while_booting(struct isc_broker *b, struct isc_store *s, struct isc_experiment *e,
                               const struct isc_cluster *c, const char *why, const char *during)
{
	struct isc_node *nodes = NULL;
	struct isc_err err;
	size_t n = 0;
	int rc = isc_store_node_list(s, c->id, &nodes, &n, &err);
	int kept;

	if (store_blip(e, rc, &err, "listing the nodes left"))
		return; /* never a whole gang for want of the store */
	kept = rc == 0 && replace_lost(b, s, e, c, nodes, n);
	isc_node_list_free(nodes, n);
	if (kept)
		return;
	note(s, e, "interrupted", "%s while %s on %s; reprovisioning for cycle %d", why, during,
	     c->shape_id, c->cycle);
	teardown(b, s, e, c, 0, 0, 1);
	broker_exclusions_clear(b, e->id);
	set_status(s, e, "placing", "interrupted on %s while %s; reprovisioning for cycle %d",
	           c->shape_id, during, c->cycle);
}

/* Starts the containers of the nodes whose containers did not start early (all, usually). */
static int boot_the_rest(struct isc_broker *b, struct isc_store *s, const struct isc_experiment *e,
                         const struct isc_cluster *c, const struct isc_node *nodes, size_t n,
                         const struct restored *done, struct isc_err *err)
{
	int *only, rc, any = 0;

	if (!done || done->start != KEPT_STARTED)
		return broker_boot_cluster(b, s, e, c, nodes, n, NULL, err);
	if (!(only = calloc(n ? n : 1, sizeof(*only))))
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++)
		any |= only[i] = !restored_has(done, nodes[i].instance_id);
	rc = any ? broker_boot_cluster(b, s, e, c, nodes, n, only, err) : 0;
	free(only);
	return rc;
}

static void booting(struct isc_broker *b, struct isc_store *s, struct isc_experiment *e)
{
	struct isc_cluster c;
	struct restored *done = NULL;
	struct isc_node *nodes = NULL;
	struct isc_err err;
	char why[ISC_ERR_MSG_MAX], lost[256];
	size_t n = 0;
	int rc;

	if (!current_cluster(s, e->id, &c)) {
		set_status(s, e, "placing", "no live cluster; placing again");
		return;
	}
	done = restored_take(c.id);
	if (isc_store_node_list(s, c.id, &nodes, &n, &err)) {
		isc_log(ISC_LOG_ERROR, "%s: %s", e->id, err.msg);
		goto out;
	}
	/* A step never waits on a node the watch has already seen go. */
	if (cluster_interrupted(b, s, &c, 0, lost, sizeof(lost))) {
		lost_while_booting(b, s, e, &c, lost, "booting");
		goto out;
	}
	if (c.replaces[0] && e->cycle_count > 0 && n > 0)
		isc_crash_point("lostnodes.restore_started");
	/* The restore replaces the nodes' folders and the boot their containers. */
	if (!step_holds(b, s, e, 1))
		goto out;
	/* The push retries a flaky node itself; what still fails is a failed boot step. */
	if (e->cycle_count > 0 && n > 0 &&
	    (rc = restore_artifacts(b, e, &c, nodes, n, done, &err))) {
		if (store_blip(e, rc, &err, "restoring the checkpoint")) {
			restored_put(done); /* what the kept nodes hold stays theirs */
			done = NULL;
		} else if (cluster_interrupted(b, s, &c, 1, lost, sizeof(lost))) {
			lost_while_booting(b, s, e, &c, lost, "restoring the checkpoint");
		} else {
			/* Booting anyway would silently restart the run from scratch. */
			snprintf(why, sizeof(why), "cycle %d: %.480s", c.cycle, err.msg);
			if (begin_stop(s, e, "failed", why) == 0)
				stop_all(b, s, e);
		}
		goto out;
	}
	rc = boot_the_rest(b, s, e, &c, nodes, n, done, &err);
	if (store_blip(e, rc, &err, "booting")) {
		restored_put(done);
		done = NULL;
	} else if (rc == 0) {
		isc_crash_point("boot.containers_started");
		e->cycle_count = c.cycle;
		isc_store_experiment_set_placement(s, e, &err);
		isc_store_cluster_set_state(s, c.id, "running", &err);
		set_status(s, e, "running", "%zu container(s) started on %s (cycle %d)", n,
		           c.shape_id, c.cycle);
	} else if (cluster_interrupted(b, s, &c, 1, lost, sizeof(lost))) {
		/* Whatever the boot said (a container that could not start on a node being
		 * reclaimed too): a lost node is an interruption. */
		lost_while_booting(b, s, e, &c, lost, "booting");
	} else if (rc == ISC_EINVALID) {
		/* The experiment itself cannot start (image or command): another shape will not
		 * help. */
		snprintf(why, sizeof(why), "boot failed: %.480s", err.msg);
		if (begin_stop(s, e, "failed", why) == 0)
			stop_all(b, s, e);
	} else {
		note(s, e, "boot_failed", "%s: %s", c.shape_id, err.msg);
		broker_exclude_shape(b, e->id, c.shape_id);
		teardown(b, s, e, &c, 0, 0, 1);
		isc_crash_point("rollback.boot_failed");
		set_status(s, e, "placing", "boot on %s failed; trying the next shape", c.shape_id);
	}
out:
	restored_free(done);
	isc_node_list_free(nodes, n);
	isc_cluster_cleanup(&c);
}

/*
 * Tears down the experiment's draining clusters (an interrupted cluster whose
 * replacement was launched first): stop with grace, artifacts home, terminate.
 * The replacement's credit hold stays. Also finishes a drain a crash cut short.
 */
static void drain(struct isc_broker *b, struct isc_store *s, struct isc_experiment *e)
{
	struct isc_cluster *list;
	struct isc_err err;
	size_t n;

	if (isc_store_cluster_list_for_experiment(s, e->id, 1, &list, &n, &err))
		return;
	for (size_t i = 0; i < n; i++) {
		struct isc_cluster r;
		size_t kept = 0;
		int live;
		if (strcmp(list[i].state, "draining") != 0)
			continue;
		if (!replacement_of(s, e->id, list[i].id, &r)) {
			teardown(b, s, e, &list[i], 1, 1, 0);
			continue;
		}
		/* Lost nodes being replaced: the kept ones go on in the replacement. */
		live = strcmp(r.state, "launching") == 0 || strcmp(r.state, "booting") == 0 ||
		       strcmp(r.state, "running") == 0;
		if (live)
			drain_replaced(b, s, e, &list[i], &r);
		else if (isc_store_cluster_kept_count(s, list[i].id, &kept, &err) == 0 && kept > 0)
			teardown(b, s, e, &list[i], 1, 1, 0); /* nothing moved: a whole drain */
		else if (broker_cluster_terminate(b, s, &list[i], &err))
			note(s, e, "terminate", "terminating cluster %s: %s (will retry)",
			     list[i].id, err.msg);
		isc_cluster_cleanup(&r);
	}
	isc_cluster_list_free(list, n);
}

/*
 * An experiment's outcome is every rank's outcome, as with torchrun and Slurm:
 * it fails as soon as any rank exits non-zero (the others are then stopped with
 * the grace period and the artifacts brought home by the teardown), and it
 * completes when every rank has exited 0. Each exit is recorded once, when first
 * seen, so the first rank to fail is the one named. Returns 1 when the outcome is
 * decided and recorded (status stopping), else 0.
 */
static int ranks_ended(struct isc_broker *b, struct isc_store *s, struct isc_experiment *e,
                       const struct isc_cluster *c, const struct isc_node *nodes, size_t nranks)
{
	struct isc_rank_outcome *seen = NULL;
	struct isc_err err;
	size_t n_seen = 0, done = 0, failed = 0;
	const struct isc_rank_outcome *first = NULL;
	char why[160];
	int code, inserted, decided = 0, asked = 0;

	for (size_t r = 0; r < nranks; r++) {
		/* A rank whose node is being reclaimed is an interruption (reprovisioned
		 * below), not the script's outcome. */
		if (strcmp(nodes[r].state, "running") != 0 || nodes[r].notice_at_ms)
			continue;
		if (!broker_follower_rank_exit(b, c->id, (int)r, &code))
			continue;
		/*
		 * A failed rank may be a node the cloud took that no describe has recorded yet:
		 * describes run in the background (issue 49), so the latest observation may
		 * predate the loss. The cloud is asked once before the exit counts as the
		 * script's; a node going or gone leaves the exit unrecorded (an interruption,
		 * which the watch's next observation shows).
		 */
		if (code != 0 && !asked) {
			asked = 1;
			if (cluster_interrupted(b, s, c, 1, why, sizeof(why))) {
				isc_log(
				    ISC_LOG_INFO,
				    "%s: rank %zu exited with code %d, and %s: an interruption, "
				    "not the script's outcome",
				    e->id, r, code, why);
				return 0;
			}
		}
		if (isc_store_rank_exit_record(s, c->id, (int)r, code, &inserted, &err)) {
			isc_log(ISC_LOG_ERROR, "%s: %s", e->id, err.msg);
			return 0;
		}
		if (inserted)
			note(s, e, "rank_exit", "rank %zu exited with code %d", r, code);
	}
	if (isc_store_rank_exit_list(s, e->id, &seen, &n_seen, &err)) {
		isc_log(ISC_LOG_ERROR, "%s: %s", e->id, err.msg);
		return 0;
	}
	for (size_t i = 0; i < n_seen; i++) {
		if (strcmp(seen[i].cluster_id, c->id) != 0)
			continue;
		done++;
		if (seen[i].code != 0 && failed++ == 0)
			first = &seen[i];
	}
	if (first) {
		if (first->code < 0)
			snprintf(why, sizeof(why), "rank %d failed: its container vanished",
			         first->rank);
		else
			snprintf(why, sizeof(why), "rank %d exited with code %d", first->rank,
			         first->code);
		if (failed > 1)
			snprintf(why + strlen(why), sizeof(why) - strlen(why),
			         ", the first of %zu ranks to fail", failed);
		if (nranks > 1)
			snprintf(why + strlen(why), sizeof(why) - strlen(why),
			         "; the other ranks are stopped");
		decided = begin_stop(s, e, "failed", why) == 0;
	} else if (done == nranks && nranks > 0) {
		if (nranks == 1)
			snprintf(why, sizeof(why), "rank 0 exited with code 0");
		else
			snprintf(why, sizeof(why), "all %zu ranks exited with code 0", nranks);
		decided = begin_stop(s, e, "completed", why) == 0;
	}
	isc_rank_outcome_list_free(seen, n_seen);
	return decided;
}

static void running(struct isc_broker *b, struct isc_store *s, struct isc_experiment *e)
{
	struct isc_cluster c;
	struct isc_node *nodes = NULL;
	struct isc_err err;
	size_t n = 0;

	if (!current_cluster(s, e->id, &c)) {
		set_status(s, e, "placing", "cluster lost; placing again");
		return;
	}
	if (c.replaces[0] && strcmp(c.state, "launching") == 0) {
		/* A replacement of lost nodes recorded just before a crash: it provisions. */
		if (set_status(s, e, "placing", "replacing lost nodes of %s with cluster %s",
		               c.replaces, c.id) == 0)
			set_status(s, e, "provisioning",
			           "resuming the replacement %s of rank(s) %s", c.id, c.fill_ranks);
		isc_cluster_cleanup(&c);
		return;
	}
	if (isc_store_node_list(s, c.id, &nodes, &n, &err)) {
		isc_cluster_cleanup(&c);
		return;
	}
	if (ranks_ended(b, s, e, &c, nodes, n)) {
		stop_all(b, s, e);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		/* Keep what was not lost (issue 32); else the whole gang fails over below. */
		if (nodes[i].notice_at_ms || strcmp(nodes[i].state, "running") != 0) {
			if (replace_lost(b, s, e, &c, nodes, n))
				goto out;
			break;
		}
	}
	for (size_t i = 0; i < n; i++) {
		if (nodes[i].notice_at_ms && strcmp(nodes[i].state, "running") == 0) {
			/*
			 * Early warning: the node still runs out its notice. Launch the replacement
			 * first, then drain the old cluster (checkpoint, artifacts home, terminate)
			 * while the new nodes boot; the new containers start only after that.
			 */
			note(s, e, "interrupted",
			     "node %s (rank %d) got an interruption notice; launching the "
			     "replacement "
			     "for cycle %d while the old cluster drains",
			     nodes[i].instance_id, nodes[i].rank, isc_queue_next_cycle(c.cycle));
			isc_store_cluster_set_state(s, c.id, "draining", &err);
			isc_crash_point("reprovision.draining_marked");
			broker_exclusions_clear(b, e->id);
			if (set_status(s, e, "placing",
			               "interrupted on %s; reprovisioning for cycle %d", c.shape_id,
			               isc_queue_next_cycle(c.cycle)) == 0)
				place(b, s, e);
			isc_crash_point("reprovision.replacement_launched");
			drain(b, s, e);
			goto out;
		}
		if (strcmp(nodes[i].state, "running") != 0) {
			note(s, e, "interrupted",
			     "node %s (rank %d) is %s; checkpointing and reprovisioning",
			     nodes[i].instance_id, nodes[i].rank, nodes[i].state);
			teardown(b, s, e, &c, 1, 1, 1);
			isc_crash_point("interrupt.torn_down");
			broker_exclusions_clear(b, e->id);
			set_status(s, e, "placing",
			           "interrupted on %s; reprovisioning for cycle %d", c.shape_id,
			           isc_queue_next_cycle(c.cycle));
			goto out;
		}
	}
	/* The platform's schedule: checkpoints and crud every 10 min, lossy every 30 s (config). */
	{
		int due = step_holds(b, s, e, 0) ? broker_sync_due(b, c.id, isc_store_now_ms()) : 0;
		if (due && n > 0 && broker_artifacts_sync(b, s, e, &c, &nodes[0], due, &err))
			note(s, e, "artifacts", "periodic sync from rank 0 failed: %s", err.msg);
	}
out:
	isc_node_list_free(nodes, n);
	isc_cluster_cleanup(&c);
}

/*
 * A launching cluster being torn down while its launch's outcome is unknown (the
 * intent is pending: a lost reply, a crash): whatever the launch made must be
 * terminated and charged. One describe, by the cluster's tag and the intent's
 * client token, records every live instance it lists (partial gangs too), so the
 * teardown terminates them now. What a lagging listing does not show yet, the
 * watch records and terminates the tick it appears; the cluster closes once the
 * intent's deadline has passed with nothing live listed (watch.c).
 */
static void collect_launch(struct isc_broker *b, struct isc_store *s,
                           const struct isc_experiment *e, const struct isc_cluster *c)
{
	struct isc_intent intent;
	struct isc_err err;
	size_t found = 0;
	int rc;

	if (isc_store_intent_for_cluster(s, c->id, &intent, &err))
		return;
	if (strcmp(intent.state, "pending") != 0) {
		isc_intent_cleanup(&intent);
		return;
	}
	rc = broker_cloud_collect(b, s, c, &found, &err);
	if (rc)
		note(s, e, "launch_unknown",
		     "cluster %s's launch (token %s) never answered; looking for what it made: %s; "
		     "the watch keeps looking",
		     c->id, intent.token, err.msg);
	else if (found)
		note(s, e, "launch_unknown",
		     "cluster %s's launch (token %s) never answered; the cloud lists %zu "
		     "instance(s) "
		     "of it: terminating them",
		     c->id, intent.token, found);
	else
		note(s, e, "launch_unknown",
		     "cluster %s's launch (token %s) never answered and the cloud lists nothing of "
		     "it "
		     "yet; the watch terminates whatever it lists until the launch's deadline",
		     c->id, intent.token);
	isc_intent_cleanup(&intent);
}

/*
 * The teardown of a stopping experiment (cancelled, out of credits, or ended):
 * every open cluster is torn down gracefully, then the experiment takes the
 * final status begin_stop recorded. Run again after a crash, it finishes what
 * is left.
 */
static void stop_all(struct isc_broker *b, struct isc_store *s, struct isc_experiment *e)
{
	struct isc_cluster *list;
	struct isc_err err;
	char reason[ISC_ERR_MSG_MAX];
	/* A store written before final_status existed only stopped for credits. */
	const char *final = e->final_status && e->final_status[0] ? e->final_status : "stopped";
	size_t n;
	int deferred = 0;

	/* The meter's stop for credits was recorded (stopping, then stopped); nothing torn down. */
	if (strcmp(final, "stopped") == 0)
		isc_crash_point("stop.for_credits");
	if (isc_store_cluster_list_for_experiment(s, e->id, 1, &list, &n, &err) == 0) {
		for (size_t i = 0; i < n; i++) {
			/*
			 * Only a cluster whose ranks ran has folders worth bringing home: a
			 * booting one's hold the last cycle's restored copy at best, and
			 * nothing before its restore, which would replace that copy at home.
			 */
			int ran = strcmp(list[i].state, "running") == 0 ||
			          strcmp(list[i].state, "draining") == 0;
			int live = ran || strcmp(list[i].state, "booting") == 0;
			if (strcmp(list[i].state, "terminating") == 0)
				continue;
			if (strcmp(list[i].state, "launching") == 0)
				collect_launch(b, s, e, &list[i]);
			deferred |= teardown(b, s, e, &list[i], live, ran, 1);
		}
		isc_cluster_list_free(list, n);
	}
	if (deferred)
		return; /* the store went away mid-teardown: the next tick finishes it */
	broker_credits_release(b, s, e->id);
	isc_crash_point("stop.before_final");
	snprintf(reason, sizeof(reason), "%s", e->status_reason ? e->status_reason : "");
	set_status(s, e, final, "%s", reason[0] ? reason : "out of credits");
}

void broker_advance(struct isc_broker *b, struct isc_store *s, const char *experiment_id)
{
	struct isc_experiment e;
	struct isc_err err;
	enum isc_burst_state st;
	enum isc_burst_step step;

	if (isc_store_experiment_get(s, experiment_id, &e, &err)) {
		isc_log(ISC_LOG_ERROR, "%s: %s", experiment_id, err.msg);
		return;
	}
	if (strcmp(e.compute_mode, "burst") != 0 || isc_burst_state_parse(e.status, &st) ||
	    isc_burst_owner(st, e.cycle_count, e.cancel_requested, b->config->burst_validation) !=
	        ISC_BURST_OWNER_BROKER)
		goto out;
	step = isc_burst_step_for(st, e.cancel_requested, e.next_attempt_ms, isc_store_now_ms());
	if (step == ISC_BURST_STEP_STOP && st != ISC_BURST_STOPPING &&
	    begin_stop(s, &e, "cancelled", "cancelled by user") != 0)
		goto out;
	drain(b, s, &e); /* a drain a crash cut short; normally there is none */
	switch (step) {
	case ISC_BURST_STEP_STOP:
		stop_all(b, s, &e);
		break;
	case ISC_BURST_STEP_PLACE:
		place(b, s, &e);
		break;
	case ISC_BURST_STEP_PROVISION:
		provisioning(b, s, &e);
		/* Every node is up: start the containers now rather than a tick later. */
		if (strcmp(e.status, "booting") == 0)
			booting(b, s, &e);
		break;
	case ISC_BURST_STEP_BOOT:
		booting(b, s, &e);
		break;
	case ISC_BURST_STEP_RUN:
		running(b, s, &e);
		break;
	case ISC_BURST_STEP_NONE:
		break;
	}
	if (isc_store_lease_lost(s))
		isc_log(ISC_LOG_WARN,
		        "%s: the lease was lost during this step (expired or taken over): the step "
		        "ended there, with nothing undone; the replica holding it now decides",
		        e.id);
out:
	isc_experiment_cleanup(&e);
}
