/*
 * The state machine of one burst experiment. broker_advance() runs one step
 * in a worker thread with its own store connection: it may block on a cloud
 * call or an SSH boot without holding up the other experiments or the tick.
 * Every transition goes through broker_set_status() (step.c), which writes the
 * event that explains it. Placing and launching are in launch.c, lost nodes in
 * replace.c, restores in restore.c.
 */
#include "broker/broker_int.h"
#include "broker/liveness.h"
#include "broker/step.h"

#include "common/metrics.h"
#include "common/crashpoint.h"
#include "common/log.h"
#include "queue/queue.h"
#include "store/store_metrics.h"
#include "store/store_ranks.h"

#include <stdio.h>
#include <string.h>

/* Nodes launched: wait for all of them to run; roll back a partial gang. */
static void provisioning(struct isc_broker *b, struct isc_store *s, struct isc_experiment *e)
{
	struct isc_cluster c;
	struct isc_intent intent;
	struct isc_node *nodes = NULL;
	struct isc_err err;
	size_t n = 0, running = 0;

	if (!broker_current_cluster(s, e->id, &c)) {
		broker_set_status(s, e, "placing", "no live cluster; placing again");
		return;
	}
	if (isc_store_intent_for_cluster(s, c.id, &intent, &err) == 0) {
		int pending = strcmp(intent.state, "pending") == 0;
		int failed = strcmp(intent.state, "failed") == 0;
		if (pending)
			broker_resume_launch(b, s, e, &c, &intent);
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
				broker_replace_fallback(b, s, e, &c, why);
				isc_intent_cleanup(&intent);
				goto out;
			}
			if (isc_store_node_list(s, c.id, &none, &n_none, &err) == 0 &&
			    n_none == 0) {
				broker_note(
				    s, e, "cleanup",
				    "cluster %s's launch had failed (%s); finishing its cleanup",
				    c.id, intent.error);
				broker_give_up_cluster(b, s, e, c.id, intent.token, intent.error);
				broker_set_status(s, e, "placing",
				                  "launch on %s had failed; placing again",
				                  c.shape_id);
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
			if (!broker_replace_lost(b, s, e, &c, nodes, n))
				broker_replace_fallback(b, s, e, &c, why);
			goto out;
		} else if (broker_node_reachable(&nodes[i])) {
			running++;
		} else if (strcmp(st, "pending") != 0 && strcmp(st, "running") != 0) {
			broker_note(
			    s, e, "partial",
			    "%s: node %s (rank %d) is %s before the cluster ran; rolling back "
			    "the gang",
			    c.shape_id, nodes[i].instance_id, nodes[i].rank, st);
			broker_exclude_shape(b, e->id, c.shape_id);
			broker_teardown(b, s, e, &c, 0, 0, 1);
			isc_crash_point("rollback.partial_torn_down");
			broker_set_status(s, e, "placing",
			                  "partial gang on %s rolled back; trying the next shape",
			                  c.shape_id);
			goto out;
		}
	}
	if (c.replaces[0] && e->cycle_count > 0 && running > 0 && running < (size_t)c.nnodes &&
	    broker_restore_kept_early(b, s, e, &c, nodes, n))
		running = n; /* the new nodes came up meanwhile */
	/* A gang is not held back for its slowest node past the family's boot deadline: the
	 * stragglers are replaced alone, the nodes up kept (issue 46). */
	if ((int)n == c.nnodes && running > 0 && running < n &&
	    broker_replace_stragglers(b, s, e, &c, nodes, n))
		goto out;
	if ((int)n == c.nnodes && running == n) {
		if (strcmp(c.state, "booting") != 0)
			isc_metric_observe(ISC_M_PROVISIONING, ISC_LABELS(c.provider),
			                   (double)(isc_store_now_ms() - c.created_at_ms) / 1e3);
		isc_store_cluster_set_state(s, c.id, "booting", &err);
		isc_crash_point("provision.cluster_booting");
		broker_set_status(s, e, "booting", "%zu/%d node(s) up; starting containers",
		                  running, c.nnodes);
	} else if (c.replaces[0] &&
	           isc_store_now_ms() - c.created_at_ms > b->config->replace_deadline_ms) {
		char why[ISC_ERR_MSG_MAX];
		snprintf(why, sizeof(why), "only %zu/%d node(s) running after %ld s", running,
		         c.nnodes, b->config->replace_deadline_ms / 1000);
		broker_replace_fallback(b, s, e, &c, why);
	} else if (isc_store_now_ms() - c.created_at_ms > b->config->boot_deadline_ms) {
		broker_note(s, e, "timeout",
		            "%s: only %zu/%d node(s) running after %ld s; rolling back", c.shape_id,
		            running, c.nnodes, b->config->boot_deadline_ms / 1000);
		broker_exclude_shape(b, e->id, c.shape_id);
		broker_teardown(b, s, e, &c, 0, 0, 1);
		broker_set_status(s, e, "placing",
		                  "nodes of %s did not come up; trying the next shape", c.shape_id);
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

	if (broker_store_blip(e, rc, &err, "listing the nodes left"))
		return; /* never a whole gang for want of the store */
	kept = rc == 0 && broker_replace_lost(b, s, e, c, nodes, n);
	isc_node_list_free(nodes, n);
	if (kept)
		return;
	broker_note(s, e, "interrupted", "%s while %s on %s; reprovisioning for cycle %d", why,
	            during, c->shape_id, c->cycle);
	broker_teardown(b, s, e, c, 0, 0, 1);
	broker_exclusions_clear(b, e->id);
	broker_set_status(s, e, "placing",
	                  "interrupted on %s while %s; reprovisioning for cycle %d", c->shape_id,
	                  during, c->cycle);
}
/*
 * Before the burst is recorded running: its first run is the end of its submission's
 * wait (isc_submit_to_running_seconds); a run after an interruption is a recovery,
 * by the path it took (a replacement of the lost nodes, else the whole gang), timed
 * from the first interruption seen since it last ran. Read from its timeline, so a
 * replica that took the burst over counts it as the one that saw it interrupted would.
 */
static void running_observe(struct isc_store *s, const struct isc_experiment *e,
                            const struct isc_cluster *c)
{
	struct isc_err err;
	int64_t now = isc_store_now_ms(), ran_before = 0, interrupted_ms = 0;

	if (isc_store_metrics_run_history(s, e->id, &ran_before, &interrupted_ms, &err)) {
		isc_log(ISC_LOG_DEBUG, "%s: metrics: %s", e->id, err.msg);
		return;
	}
	if (!ran_before) {
		isc_metric_observe(ISC_M_SUBMIT_TO_RUNNING, ISC_LABELS(c->provider),
		                   (double)(now - e->created_at_ms) / 1e3);
	} else if (interrupted_ms > 0) {
		const char *path = c->replaces[0] ? "replace" : "gang";
		isc_metric_add(ISC_M_RECOVERIES, ISC_LABELS(path), 1);
		isc_metric_observe(ISC_M_RECOVERY_DURATION, ISC_LABELS(path),
		                   (double)(now - interrupted_ms) / 1e3);
	}
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

	if (!broker_current_cluster(s, e->id, &c)) {
		broker_set_status(s, e, "placing", "no live cluster; placing again");
		return;
	}
	done = broker_restored_take(c.id);
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
	if (!broker_step_may_act(b, s, e, 1))
		goto out;
	/* The push retries a flaky node itself; what still fails is a failed boot step. */
	if (e->cycle_count > 0 && n > 0 &&
	    (rc = broker_restore_artifacts(b, e, &c, nodes, n, done, &err))) {
		if (broker_store_blip(e, rc, &err, "restoring the checkpoint")) {
			broker_restored_put(done); /* what the kept nodes hold stays theirs */
			done = NULL;
		} else if (cluster_interrupted(b, s, &c, 1, lost, sizeof(lost))) {
			lost_while_booting(b, s, e, &c, lost, "restoring the checkpoint");
		} else {
			/* Booting anyway would silently restart the run from scratch. */
			snprintf(why, sizeof(why), "cycle %d: %.480s", c.cycle, err.msg);
			if (broker_begin_stop(s, e, "failed", why) == 0)
				broker_stop_all(b, s, e);
		}
		goto out;
	}
	rc = broker_boot_the_rest(b, s, e, &c, nodes, n, done, &err);
	if (broker_store_blip(e, rc, &err, "booting")) {
		broker_restored_put(done);
		done = NULL;
	} else if (rc == 0) {
		isc_crash_point("boot.containers_started");
		e->cycle_count = c.cycle;
		isc_store_experiment_set_placement(s, e, &err);
		isc_store_cluster_set_state(s, c.id, "running", &err);
		running_observe(s, e, &c);
		broker_set_status(s, e, "running", "%zu container(s) started on %s (cycle %d)", n,
		                  c.shape_id, c.cycle);
	} else if (cluster_interrupted(b, s, &c, 1, lost, sizeof(lost))) {
		/* Whatever the boot said (a container that could not start on a node being
		 * reclaimed too): a lost node is an interruption. */
		lost_while_booting(b, s, e, &c, lost, "booting");
	} else if (rc == ISC_EINVALID) {
		/* The experiment itself cannot start (image or command): another shape will not
		 * help. */
		snprintf(why, sizeof(why), "boot failed: %.480s", err.msg);
		if (broker_begin_stop(s, e, "failed", why) == 0)
			broker_stop_all(b, s, e);
	} else {
		broker_note(s, e, "boot_failed", "%s: %s", c.shape_id, err.msg);
		broker_exclude_shape(b, e->id, c.shape_id);
		broker_teardown(b, s, e, &c, 0, 0, 1);
		isc_crash_point("rollback.boot_failed");
		broker_set_status(s, e, "placing", "boot on %s failed; trying the next shape",
		                  c.shape_id);
	}
out:
	broker_restored_free(done);
	isc_node_list_free(nodes, n);
	isc_cluster_cleanup(&c);
}

/*
 * Tears down the experiment's draining clusters (an interrupted cluster whose
 * replacement was launched first): stop with grace, artifacts home, terminate.
 * The replacement's credit hold stays. Also finishes a drain a crash cut short.
 */
void broker_drain(struct isc_broker *b, struct isc_store *s, struct isc_experiment *e)
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
		if (!broker_replacement_of(s, e->id, list[i].id, &r)) {
			broker_teardown(b, s, e, &list[i], 1, 1, 0);
			continue;
		}
		/* Lost nodes being replaced: the kept ones go on in the replacement. */
		live = strcmp(r.state, "launching") == 0 || strcmp(r.state, "booting") == 0 ||
		       strcmp(r.state, "running") == 0;
		if (live)
			broker_drain_replaced(b, s, e, &list[i], &r);
		else if (isc_store_cluster_kept_count(s, list[i].id, &kept, &err) == 0 && kept > 0)
			broker_teardown(b, s, e, &list[i], 1, 1,
			                0); /* nothing moved: a whole drain */
		else if (broker_cluster_terminate(b, s, &list[i], &err))
			broker_note(s, e, "terminate", "terminating cluster %s: %s (will retry)",
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
			broker_note(s, e, "rank_exit", "rank %zu exited with code %d", r, code);
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
		decided = broker_begin_stop(s, e, "failed", why) == 0;
	} else if (done == nranks && nranks > 0) {
		if (nranks == 1)
			snprintf(why, sizeof(why), "rank 0 exited with code 0");
		else
			snprintf(why, sizeof(why), "all %zu ranks exited with code 0", nranks);
		decided = broker_begin_stop(s, e, "completed", why) == 0;
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

	if (!broker_current_cluster(s, e->id, &c)) {
		broker_set_status(s, e, "placing", "cluster lost; placing again");
		return;
	}
	if (c.replaces[0] && strcmp(c.state, "launching") == 0) {
		/* A replacement of lost nodes recorded just before a crash: it provisions. */
		if (broker_set_status(s, e, "placing", "replacing lost nodes of %s with cluster %s",
		                      c.replaces, c.id) == 0)
			broker_set_status(s, e, "provisioning",
			                  "resuming the replacement %s of rank(s) %s", c.id,
			                  c.fill_ranks);
		isc_cluster_cleanup(&c);
		return;
	}
	if (isc_store_node_list(s, c.id, &nodes, &n, &err)) {
		isc_cluster_cleanup(&c);
		return;
	}
	if (ranks_ended(b, s, e, &c, nodes, n)) {
		broker_stop_all(b, s, e);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		/* Keep what was not lost (issue 32); else the whole gang fails over below. */
		if (nodes[i].notice_at_ms || strcmp(nodes[i].state, "running") != 0) {
			if (broker_replace_lost(b, s, e, &c, nodes, n))
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
			broker_note(s, e, "interrupted",
			            "node %s (rank %d) got an interruption notice; launching the "
			            "replacement "
			            "for cycle %d while the old cluster drains",
			            nodes[i].instance_id, nodes[i].rank,
			            isc_queue_next_cycle(c.cycle));
			isc_store_cluster_set_state(s, c.id, "draining", &err);
			isc_crash_point("reprovision.draining_marked");
			broker_exclusions_clear(b, e->id);
			if (broker_set_status(s, e, "placing",
			                      "interrupted on %s; reprovisioning for cycle %d",
			                      c.shape_id, isc_queue_next_cycle(c.cycle)) == 0)
				broker_place_and_launch(b, s, e);
			isc_crash_point("reprovision.replacement_launched");
			broker_drain(b, s, e);
			goto out;
		}
		if (strcmp(nodes[i].state, "running") != 0) {
			broker_note(s, e, "interrupted",
			            "node %s (rank %d) is %s; checkpointing and reprovisioning",
			            nodes[i].instance_id, nodes[i].rank, nodes[i].state);
			broker_teardown(b, s, e, &c, 1, 1, 1);
			isc_crash_point("interrupt.torn_down");
			broker_exclusions_clear(b, e->id);
			broker_set_status(s, e, "placing",
			                  "interrupted on %s; reprovisioning for cycle %d",
			                  c.shape_id, isc_queue_next_cycle(c.cycle));
			goto out;
		}
	}
	/* The platform's schedule: checkpoints and crud every 10 min, lossy every 30 s (config). */
	{
		int due = broker_step_may_act(b, s, e, 0)
		              ? broker_sync_due(b, c.id, isc_store_now_ms())
		              : 0;
		if (due && n > 0 && broker_artifacts_sync(b, s, e, &c, &nodes[0], due, &err))
			broker_note(s, e, "artifacts", "periodic sync from rank 0 failed: %s",
			            err.msg);
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
void broker_collect_launch(struct isc_broker *b, struct isc_store *s,
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
		broker_note(
		    s, e, "launch_unknown",
		    "cluster %s's launch (token %s) never answered; looking for what it made: %s; "
		    "the watch keeps looking",
		    c->id, intent.token, err.msg);
	else if (found)
		broker_note(s, e, "launch_unknown",
		            "cluster %s's launch (token %s) never answered; the cloud lists %zu "
		            "instance(s) "
		            "of it: terminating them",
		            c->id, intent.token, found);
	else
		broker_note(
		    s, e, "launch_unknown",
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
void broker_stop_all(struct isc_broker *b, struct isc_store *s, struct isc_experiment *e)
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
				broker_collect_launch(b, s, e, &list[i]);
			deferred |= broker_teardown(b, s, e, &list[i], live, ran, 1);
		}
		isc_cluster_list_free(list, n);
	}
	if (deferred)
		return; /* the store went away mid-teardown: the next tick finishes it */
	broker_credits_release(b, s, e->id);
	isc_crash_point("stop.before_final");
	snprintf(reason, sizeof(reason), "%s", e->status_reason ? e->status_reason : "");
	broker_set_status(s, e, final, "%s", reason[0] ? reason : "out of credits");
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
	if (step == ISC_BURST_STEP_STOP && st != ISC_BURST_STOPPING) {
		char why[256];
		isc_store_experiment_cancel_reason(s, e.id, why, sizeof(why));
		if (broker_begin_stop(s, &e, "cancelled", why) != 0)
			goto out;
	}
	broker_drain(b, s, &e); /* a drain a crash cut short; normally there is none */
	switch (step) {
	case ISC_BURST_STEP_STOP:
		broker_stop_all(b, s, &e);
		break;
	case ISC_BURST_STEP_PLACE:
		broker_place_and_launch(b, s, &e);
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
