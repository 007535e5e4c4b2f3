/*
 * What every step of a burst acts through: the lease check before an effect, the
 * status transitions and waiting reasons with their events, the stop that records an
 * outcome before its teardown, and the teardown itself (stop, bring home, terminate).
 */
#include "broker/broker_int.h"
#include "broker/step.h"

#include "common/metrics.h"
#include "common/crashpoint.h"
#include "common/log.h"
#include "launcher/launcher.h"
#include "store/store_ranks.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
 *     home, deleting a key file): broker_step_may_act() right before, as for a terminate.
 * ISC_ELEASE is not a failure: the step that meets it ends at once, with no error-path
 * write or call (there would be none to make anyway), and whoever holds the lease now
 * decides. ask_store: ask the lease row too (destructive effects), not only this
 * replica's memory of it.
 */
int broker_step_may_act(struct isc_broker *b, struct isc_store *s, const struct isc_experiment *e,
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
int broker_lease_lost(struct isc_store *s, int rc)
{
	return rc == ISC_ELEASE || isc_store_lease_lost(s);
}

/*
 * Moves the experiment from the status this step read to `status` (a
 * compare-and-set: when another writer moved it first, nothing is written and
 * the next step sees the newer status). Keeps e->status current.
 */
int broker_set_status(struct isc_store *s, struct isc_experiment *e, const char *status,
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

/*
 * Moves the experiment to (or keeps it in) waiting. A blocked experiment records
 * its reason once per change, not once per retry: when it is waiting already for
 * the same reason, only the time of the next try is written (the caller set it),
 * and the timeline stays as it was. `why` is kept for the waiting order
 * (queue/burst.h): a burst waiting for credits heads the line of that money.
 */
int broker_wait_again(struct isc_broker *b, struct isc_store *s, struct isc_experiment *e,
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
	return broker_set_status(s, e, "waiting", "%s", reason);
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
	broker_wait_again(
	    b, b->store, e, ISC_BURST_WAIT_BEHIND,
	    "credits: #%d in line for %s, behind %s (submitted earlier), which waits for "
	    "them; it tries once %s has its cluster or has ended",
	    turn->position, money, head->id, head->id);
}

/*
 * Records the outcome before the teardown that ends the experiment: status
 * "stopping", heading for `final_status`. A crash during the teardown leaves
 * that outcome for the next step to finish (stop_all).
 */
int broker_begin_stop(struct isc_store *s, struct isc_experiment *e, const char *final_status,
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
void broker_note(struct isc_store *s, const struct isc_experiment *e, const char *kind,
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
	if (strcmp(kind, "interrupted") == 0) {
		/* The provider is the shape's first word ("aws-us-east-1-..."). */
		char provider[16];
		snprintf(provider, sizeof(provider), "%.*s",
		         (int)strcspn(e->shape_id ? e->shape_id : "", "-"),
		         e->shape_id ? e->shape_id : "");
		isc_metric_add(ISC_M_INTERRUPTIONS, ISC_LABELS(provider), 1);
	}
	if ((rc = isc_store_event_add(s, e->id, kind, msg, &err)))
		isc_log(rc == ISC_ELEASE ? ISC_LOG_INFO : ISC_LOG_ERROR,
		        "%s: recording an event: %s", e->id, err.msg);
}

/* The cluster the experiment is working with: its newest one that is not being torn down. */
int broker_current_cluster(struct isc_store *s, const char *experiment_id, struct isc_cluster *out)
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
int broker_store_blip(const struct isc_experiment *e, int rc, const struct isc_err *err,
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
int broker_teardown(struct isc_broker *b, struct isc_store *s, const struct isc_experiment *e,
                    const struct isc_cluster *c, int stop_containers, int pull_artifacts,
                    int release_credits)
{
	struct isc_node *nodes = NULL;
	struct isc_err err;
	size_t n = 0;
	int rc;

	/* Destructive from its first effect (containers stopped): only under the lease. */
	if (!broker_step_may_act(b, s, e, 1))
		return 1;
	if ((rc = isc_store_node_list(s, c->id, &nodes, &n, &err)) &&
	    broker_store_blip(e, rc, &err, "listing the nodes to tear down"))
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
			if (broker_store_blip(e, rc, &err,
			                      "bringing artifacts home before terminating")) {
				isc_node_list_free(nodes, n);
				return 1;
			}
			broker_note(s, e, "artifacts",
			            "could not bring artifacts home from rank 0: %s", err.msg);
		} else if (pull_artifacts)
			broker_note(s, e, "artifacts",
			            "checkpoint, crud and lossy folders brought home from rank 0");
	}
	isc_crash_point("teardown.before_terminate");
	/* The exits of ranks stopped by the teardown, for isc status, before following ends. */
	for (size_t r = 0; r < n; r++) {
		int code, inserted = 0;
		if (broker_follower_rank_exit(b, c->id, (int)r, &code) &&
		    isc_store_rank_exit_record(s, c->id, (int)r, code, &inserted, &err) == 0 &&
		    inserted)
			broker_note(s, e, "rank_exit", "rank %zu exited with code %d", r, code);
	}
	broker_follower_stop(b, c->id);
	broker_sync_forget(b, c->id);
	broker_restored_free(broker_restored_take(c->id));
	isc_node_list_free(nodes, n);
	if (broker_cluster_terminate(b, s, c, &err))
		broker_note(s, e, "terminate", "terminating cluster %s: %s (will retry)", c->id,
		            err.msg);
	isc_crash_point("teardown.terminate_requested");
	if (release_credits)
		broker_credits_release(b, s, e->id);
	return 0;
}
