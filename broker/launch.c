/*
 * Placing and launching a burst's cluster: the walk of the ranked candidates (credits
 * held, cluster and intent recorded, launch), and the replay of a launch whose outcome
 * is unknown, which never launches where an earlier attempt may have succeeded.
 */
#include "broker/broker_int.h"
#include "broker/step.h"

#include "common/metrics.h"
#include "common/crashpoint.h"
#include "common/log.h"
#include "launcher/keys.h"
#include "queue/queue.h"
#include "store/store_keys.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
	broker_wait_again(b, s, e, ISC_BURST_WAIT_CAPACITY,
	                  "no shape could be provisioned (%zu tried%s%.300s); next try at %s",
	                  tried, last_error[0] ? "; last: " : "", last_error, when);
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
void broker_give_up_cluster(struct isc_broker *b, struct isc_store *s,
                            const struct isc_experiment *e, const char *cluster_id,
                            const char *token, const char *why)
{
	struct isc_err err;
	int rc = isc_store_cluster_set_state(s, cluster_id, "closed", &err);

	if (broker_lease_lost(s, rc))
		return; /* the cluster may be the one another replica runs now: leave it be */
	if (rc)
		isc_log(ISC_LOG_ERROR, "%s: closing cluster %s: %s", e->id, cluster_id, err.msg);
	isc_crash_point("place.cleanup_cluster_closed");
	/* The key is every replica's (the store's): never deleted by a stale step. */
	if (!broker_step_may_act(b, s, e, 1))
		return;
	if (isc_cluster_key_delete_sealed(s, b->home, cluster_id, &err))
		isc_log(ISC_LOG_ERROR, "%s: the key of cluster %s: %s", e->id, cluster_id, err.msg);
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

void broker_place_and_launch(struct isc_broker *b, struct isc_store *s, struct isc_experiment *e)
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
	char refused[16] = ""; /* the provider whose launch this round was refused last */

	struct isc_cluster live;

	/* A cluster recorded before a crash, with its intent: finish that launch first. */
	if (broker_current_cluster(s, e->id, &live)) {
		broker_set_status(s, e, "provisioning", "resuming cluster %s on %s", live.id,
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
		broker_wait_again(b, s, e, ISC_BURST_WAIT_OTHER, "%s", last_error);
		return;
	}
	/* Datasets are checked before any money is spent: each must still be Available. */
	if (broker_datasets_check(s, e, &err)) {
		if (!broker_store_blip(e, err.code, &err, "checking the datasets"))
			broker_set_status(s, e, "failed", "%s", err.msg);
		return;
	}
	if (broker_place(b, s, e, &cands, &n, &err)) {
		if (!broker_store_blip(e, err.code, &err, "placing"))
			broker_set_status(s, e, "failed", "cannot place: %s", err.msg);
		return;
	}
	/* A waiting experiment's retry goes straight to provisioning when it gets that far:
	 * a retry that ends waiting for the same reason leaves no trace in the timeline. */
	if (strcmp(e->status, "placing") != 0 && strcmp(e->status, "waiting") != 0)
		broker_set_status(s, e, "placing", "%zu candidate shape(s) for %d GPUs; first: %s",
		                  n, e->gpus, n ? cands[0].shape_id : "none");
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
			broker_note(s, e, "skip", "%s: %s", cand->shape_id, err.msg);
			continue;
		}
		/* The organisation's own key for this provider and region, else the platform's. */
		free(*key_id_p);
		free(*key_account_p);
		*key_id_p = *key_account_p = NULL;
		if (broker_key_for(b, s, e->org_id, cand->provider, cand->region, key_id_p,
		                   key_account_p, &err)) {
			broker_note(s, e, "skip", "%s: %s", cand->shape_id, err.msg);
			continue;
		}
		key_id = *key_id_p;
		key_account = *key_account_p;
		tried++;
		if (refused[0]) {
			/* The launch before was refused and this round moves on to another shape.
			 */
			isc_metric_add(ISC_M_FAILOVERS, ISC_LABELS(refused), 1);
			refused[0] = 0;
		}
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
		if (broker_lease_lost(s, rc)) {
			free(cluster_id);
			broker_candidates_free(cands, n);
			return;
		}
		if (rc) {
			broker_note(s, e, "error", "recording a cluster for %s: %s", cand->shape_id,
			            err.msg);
			free(cluster_id);
			break;
		}
		isc_crash_point("place.cluster_recorded");
		rc = broker_credits_reserve(b, s, e, cluster_id,
		                            cand->node_price_micros * cand->nnodes, &limit, &err);
		if (!rc)
			rc = isc_cluster_key_create_sealed(s, b->home, cluster_id, &pubkey, &err);
		if (broker_lease_lost(s, rc)) {
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
			broker_give_up_cluster(b, s, e, cluster_id, token, why);
			free(cluster_id);
			broker_candidates_free(cands, n);
			e->next_attempt_ms = isc_store_now_ms() + b->config->retry_wait_ms;
			isc_store_experiment_set_placement(s, e, &ignored);
			if (credits)
				broker_wait_again(b, s, e,
				                  limit == ISC_CREDITS_LIMIT_PROJECT
				                      ? ISC_BURST_WAIT_CREDITS_PROJECT
				                      : ISC_BURST_WAIT_CREDITS_ORG,
				                  "credits: %s", why);
			else
				broker_wait_again(b, s, e, ISC_BURST_WAIT_OTHER,
				                  "preparing a cluster for %s: %s", cand->shape_id,
				                  why);
			return;
		}
		e->nnodes = cand->nnodes;
		e->nproc = cand->nproc;
		free(e->shape_id);
		e->shape_id = strdup(cand->shape_id);
		e->next_attempt_ms = 0;
		isc_store_experiment_set_placement(s, e, &err);
		broker_set_status(
		    s, e, "provisioning",
		    "trying %s: %d node(s) x %d GPU(s), zones %s, cluster %s%s%s%s%s%s",
		    cand->shape_id, cand->nnodes, cand->nproc,
		    cand->zones[0] ? cand->zones : "any (the cloud picks)", cluster_id,
		    key_id ? ", on the organisation's key " : "", key_id ? key_id : "",
		    key_id ? " (account " : "", key_id ? key_account : "", key_id ? ")" : "");
		isc_crash_point("place.before_launch");
		rc = broker_cloud_launch(b, s, &c, e->org_id, cand, token, NULL, pubkey, &err);
		free(pubkey);
		if (broker_lease_lost(s, rc)) {
			free(cluster_id);
			broker_candidates_free(cands, n);
			return;
		}
		if (rc == 0) {
			isc_crash_point("launch.before_resolve");
			isc_store_intent_resolve(s, token, "launched", "", &err);
			broker_note(s, e, "launched",
			            "%s: %d node(s) launched; waiting for them to run",
			            cand->shape_id, cand->nnodes);
			free(cluster_id);
			broker_candidates_free(cands, n);
			return;
		}
		if (isc_code_is_retryable(rc)) {
			/* The call may have happened: keep the intent pending and ask again with
			 * its token. */
			broker_note(s, e, "launch_unknown",
			            "%s: %s: %s; the launch will be repeated with the same token",
			            cand->shape_id, isc_code_name(rc), err.msg);
			free(cluster_id);
			broker_candidates_free(cands, n);
			return;
		}
		snprintf(last_error, sizeof(last_error), "%s: %s", cand->shape_id, err.msg);
		broker_note(s, e, isc_code_name(rc), "%s: %s: %s", cand->shape_id,
		            isc_code_name(rc), err.msg);
		if (rc == ISC_EAUTH && key_id) {
			/* The org's key was refused: no new launches on it until it verifies again.
			 */
			struct isc_err kerr;
			if (isc_store_key_set_state(s, key_id, "failing", err.msg, 0, &kerr))
				isc_log(ISC_LOG_WARN, "cloud key %s: marking it failing: %s",
				        key_id, kerr.msg);
			broker_note(
			    s, e, "key_failing",
			    "cloud key %s (account %s) refused by %s; no new launches on it until "
			    "'isc keys verify %s' passes",
			    key_id, key_account, cand->provider, key_id);
		}
		if (rc != ISC_ECAPACITY && rc != ISC_EQUOTA &&
		    n_dead < sizeof(dead) / sizeof(dead[0]))
			snprintf(dead[n_dead++], sizeof(dead[0]), "%s", cand->provider);
		broker_give_up_cluster(b, s, e, cluster_id, token, err.msg);
		broker_exclude_shape(b, e->id, cand->shape_id);
		snprintf(refused, sizeof(refused), "%s", cand->provider);
		free(cluster_id);
	}
	broker_candidates_free(cands, n);
	round_exhausted(b, s, e, tried, last_error);
}

int broker_candidate_for_cluster(struct isc_broker *b, struct isc_store *s,
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
	broker_teardown(b, s, e, c, 0, 0, 1);
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
void broker_resume_launch(struct isc_broker *b, struct isc_store *s, struct isc_experiment *e,
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
	if (broker_lease_lost(s, rc))
		return;
	if (rc) {
		broker_note(s, e, "launch_unknown",
		            "%s: looking for cluster %s by its tag: %s; will ask again",
		            c->shape_id, c->id, err.msg);
		return;
	}
	if (found == whole) {
		isc_store_intent_resolve(s, intent->token, "launched", "", &err);
		broker_note(s, e, "launched", "%s: found all %zu node(s) of cluster %s by its tag",
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
			broker_replace_fallback(b, s, e, c, why);
			return;
		}
		broker_note(s, e, "partial",
		            "%s: only %zu/%d node(s) of cluster %s ever listed; rolling back",
		            c->shape_id, found, c->nnodes, c->id);
		broker_exclude_shape(b, e->id, c->shape_id);
		abandon_launch(b, s, e, c, intent, "partial gang");
		broker_set_status(s, e, "placing",
		                  "partial gang on %s rolled back; trying the next shape",
		                  c->shape_id);
		return;
	}
	if (k && isc_store_now_ms() - c->created_at_ms > deadline) {
		/* As below, the intent stays pending for the watch; the gang fails over. */
		snprintf(why, sizeof(why), "the launch never answered within %ld s",
		         deadline / 1000);
		broker_replace_fallback(b, s, e, c, why);
		return;
	}
	if (isc_store_now_ms() - c->created_at_ms > b->config->boot_deadline_ms) {
		/*
		 * The intent's deadline: no launch call is made for it any more, so the
		 * watch can tell when the cloud has listed all it ever will for it. The
		 * intent stays pending: whatever a lagging listing shows later is recorded,
		 * terminated and charged by the watch, which then closes the cluster.
		 */
		broker_note(s, e, "timeout",
		            "%s: cluster %s's launch never answered within %ld s; giving it up",
		            c->shape_id, c->id, b->config->boot_deadline_ms / 1000);
		broker_exclude_shape(b, e->id, c->shape_id);
		broker_teardown(b, s, e, c, 0, 0, 1);
		broker_set_status(s, e, "placing",
		                  "launch on %s never answered; trying the next shape",
		                  c->shape_id);
		return;
	}
	if (!broker_candidate_for_cluster(b, s, e, c, &cand)) {
		if (k) {
			isc_store_intent_resolve(s, intent->token, "failed", "shape gone", &err);
			broker_replace_fallback(b, s, e, c, "the shape is no longer a candidate");
			return;
		}
		broker_note(s, e, "error", "shape %s is no longer a candidate; rolling back",
		            c->shape_id);
		abandon_launch(b, s, e, c, intent, "shape gone");
		return;
	}
	rc = broker_credits_ensure(b, s, e, c, &err);
	if (broker_lease_lost(s, rc)) {
		broker_candidate_cleanup(&cand);
		return;
	}
	if (rc && k) {
		snprintf(why, sizeof(why), "credits: %.400s", err.msg);
		isc_store_intent_resolve(s, intent->token, "failed", why, &err);
		broker_replace_fallback(b, s, e, c, why);
		broker_candidate_cleanup(&cand);
		return;
	}
	if (rc) {
		snprintf(why, sizeof(why), "%s", err.msg);
		abandon_launch(b, s, e, c, intent, why);
		e->next_attempt_ms = isc_store_now_ms() + b->config->retry_wait_ms;
		isc_store_experiment_set_placement(s, e, &err);
		/* Which limit is not known here; the next try's reservation says. */
		broker_wait_again(b, s, e, ISC_BURST_WAIT_OTHER, "credits: %s", why);
		broker_candidate_cleanup(&cand);
		return;
	}
	isc_crash_point("replay.before_launch");
	if (k) {
		/* Its key is the replaced cluster's copy (never a new one: the kept nodes). */
		broker_launch_replacement(b, s, e, c, &cand, intent->token, intent->attempt_zone);
		broker_candidate_cleanup(&cand);
		return;
	}
	rc = isc_cluster_key_public_sealed(s, b->home, c->id, &pubkey, &err);
	/* A crash between the cluster's row and its key: no launch can have used a key that
	 * never existed, so a new one is as good. */
	if (rc == ISC_ENOTFOUND)
		rc = isc_cluster_key_create_sealed(s, b->home, c->id, &pubkey, &err);
	if (!rc)
		rc = broker_cloud_launch(b, s, c, e->org_id, &cand, intent->token,
		                         intent->attempt_zone, pubkey, &err);
	free(pubkey);
	broker_candidate_cleanup(&cand);
	if (broker_lease_lost(s, rc))
		return;
	if (rc == 0) {
		isc_crash_point("launch.before_resolve");
		isc_store_intent_resolve(s, intent->token, "launched", "", &err);
		broker_note(s, e, "launched", "%s: launch confirmed with token %s", c->shape_id,
		            intent->token);
	} else if (isc_code_is_retryable(rc)) {
		broker_note(s, e, "launch_unknown", "%s: %s; will ask again", c->shape_id, err.msg);
	} else {
		broker_note(s, e, isc_code_name(rc), "%s: %s", c->shape_id, err.msg);
		broker_exclude_shape(b, e->id, c->shape_id);
		abandon_launch(b, s, e, c, intent, err.msg);
		broker_set_status(s, e, "placing", "%s failed; trying the next shape", c->shape_id);
	}
}
