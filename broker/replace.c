/*
 * Lost nodes (issue 32): replace only what was lost. The replacement cluster keeps the
 * nodes that are still there, launches the lost ranks alone into the gang's placement,
 * and drains the old cluster into it; when that cannot be had, the whole gang fails over.
 */
#include "broker/broker_int.h"
#include "broker/liveness.h"
#include "broker/step.h"

#include "common/crashpoint.h"
#include "launcher/launcher.h"
#include "launcher/keys.h"
#include "queue/queue.h"
#include "store/store_ranks.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * The replacement's key is the replaced cluster's: the kept nodes authorised that one
 * when they were launched, and the replacements are launched with it too. A copy made
 * before a crash is used again (isc_cluster_key_copy_sealed).
 */
/* Removes the key copied for a replacement that was never recorded. */
static void drop_key_copy(struct isc_broker *b, const char *id)
{
	struct isc_store *own = NULL;
	struct isc_err err;

	if (isc_store_open(b->home, 0, &own, &err) == 0)
		isc_cluster_key_delete_sealed(own, b->home, id, &err);
	isc_store_free(own);
}

/* The experiment's cluster that replaces cluster_id (in any state), into *out. */
int broker_replacement_of(struct isc_store *s, const char *experiment_id, const char *cluster_id,
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
void broker_replace_fallback(struct isc_broker *b, struct isc_store *s, struct isc_experiment *e,
                             const struct isc_cluster *r, const char *why)
{
	struct isc_intent intent;
	struct isc_err err;
	int fill[BROKER_MAX_NODES];
	int k = broker_fill_ranks(r, fill, BROKER_MAX_NODES);

	/* It terminates the kept nodes: never for a replacement another replica now runs. */
	if (!broker_step_may_act(b, s, e, 1))
		return;
	broker_note(s, e, "replace_fallback",
	            "replacing %d of %d node(s) in %s failed: %s; falling back to a whole new gang "
	            "(the kept nodes are terminated)",
	            k, r->nnodes, r->zone, why);
	broker_restored_free(broker_restored_take(r->id));
	if (isc_store_intent_for_cluster(s, r->id, &intent, &err) == 0) {
		if (strcmp(intent.state, "pending") == 0) {
			broker_collect_launch(b, s, e, r);
			isc_store_intent_resolve(s, intent.token, "failed", why, &err);
		}
		isc_intent_cleanup(&intent);
	}
	isc_crash_point("lostnodes.fallback_started");
	broker_teardown(b, s, e, r, 0, 0, 1);
	broker_exclusions_clear(b, e->id);
	broker_set_status(s, e, "placing",
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
void broker_drain_replaced(struct isc_broker *b, struct isc_store *s,
                           const struct isc_experiment *e, const struct isc_cluster *d,
                           const struct isc_cluster *r)
{
	struct isc_node *nodes = NULL;
	struct isc_err err;
	size_t n = 0, kept = 0, moved = 0;
	int rc;

	if (!broker_step_may_act(b, s, e, 1))
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
			broker_note(s, e, "artifacts",
			            "could not bring artifacts home from rank 0: %s",
			            rank0 ? err.msg : "no rank 0");
		else if (r->cycle != d->cycle)
			broker_note(s, e, "artifacts",
			            "checkpoint, crud and lossy folders brought home from rank 0");
		for (size_t i = 0; i < n; i++) {
			int code, inserted = 0;
			if (broker_follower_rank_exit(b, d->id, nodes[i].rank, &code) &&
			    isc_store_rank_exit_record(s, d->id, nodes[i].rank, code, &inserted,
			                               &err) == 0 &&
			    inserted)
				broker_note(s, e, "rank_exit", "rank %d exited with code %d",
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
			if (!broker_lease_lost(s, rc))
				broker_note(
				    s, e, "error",
				    "moving the kept nodes of %s: %s; nothing terminated, tried "
				    "again at the next step",
				    d->id, err.msg);
			isc_node_list_free(nodes, n);
			return;
		}
		broker_note(s, e, "replace",
		            "%zu kept node(s) of cluster %s go on in cluster %s, never terminated",
		            moved, d->id, r->id);
		isc_crash_point("lostnodes.kept_moved");
	}
	isc_node_list_free(nodes, n);
	broker_restored_free(
	    broker_restored_take(d->id)); /* a replacement that grew: its early work is void */
	if (broker_cluster_terminate(b, s, d, &err))
		broker_note(s, e, "terminate", "terminating cluster %s: %s (will retry)", d->id,
		            err.msg);
}

/*
 * Launches (or asks again for) the replacements of a replacement cluster: only its fill
 * ranks, in its zone, into its gang's placement, with its intent's token. The cloud's
 * refusal is the whole-gang failover.
 */
void broker_launch_replacement(struct isc_broker *b, struct isc_store *s, struct isc_experiment *e,
                               const struct isc_cluster *r, const struct broker_candidate *cand,
                               const char *token, const char *resume_zone)
{
	struct isc_err err;
	char *pubkey = NULL;
	int rc = isc_cluster_key_public_sealed(s, b->home, r->id, &pubkey, &err);

	isc_crash_point("lostnodes.before_launch");
	if (!rc)
		rc =
		    broker_cloud_launch(b, s, r, e->org_id, cand, token, resume_zone, pubkey, &err);
	free(pubkey);
	if (broker_lease_lost(s, rc))
		return; /* the replacement is another replica's to launch and keep */
	if (rc == 0) {
		isc_crash_point("lostnodes.replacement_launched");
		isc_store_intent_resolve(s, token, "launched", "", &err);
		broker_note(s, e, "launched",
		            "%s: replacement node(s) for rank(s) %s launched in %s", r->shape_id,
		            r->fill_ranks, r->zone);
	} else if (isc_code_is_retryable(rc)) {
		broker_note(
		    s, e, "launch_unknown",
		    "%s: %s: %s; the replacement's launch will be repeated with the same token",
		    r->shape_id, isc_code_name(rc), err.msg);
	} else {
		char why[ISC_ERR_MSG_MAX + 32];
		snprintf(why, sizeof(why), "%s: %s", isc_code_name(rc), err.msg);
		/* Before the fallback's teardown: the kept nodes must not move into it. */
		isc_store_intent_resolve(s, token, "failed", why, &err);
		broker_replace_fallback(b, s, e, r, why);
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
int broker_replace_lost(struct isc_broker *b, struct isc_store *s, struct isc_experiment *e,
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
	if (!broker_candidate_for_cluster(b, s, e, c, &cand)) {
		broker_note(
		    s, e, "replace_fallback",
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
	rc = isc_cluster_key_copy_sealed(s, b->home, c->id, id, &err);
	if (!rc)
		rc = isc_store_cluster_replace(s, &r, token, kept_ids, kept_ranks, m, &err);
	if (broker_lease_lost(s, rc)) {
		/* Nothing recorded: the copy of the key is this step's alone. No fallback.
		 * (Not on s: its fence refuses every write now; a short connection.) */
		drop_key_copy(b, id);
		broker_candidate_cleanup(&cand);
		taken = 1;
		goto out;
	}
	if (rc) {
		broker_note(s, e, "replace_fallback", "recording the replacement of rank(s) %s: %s",
		            lost_list, err.msg);
		drop_key_copy(b, id);
		broker_candidate_cleanup(&cand);
		goto out;
	}
	taken = 1;
	isc_crash_point("lostnodes.replacement_recorded");
	broker_note(
	    s, e, "interrupted",
	    "rank(s) %s of cluster %s lost (notice or gone)%s; replacing %zu of %zu node(s) in "
	    "%s (placement of %s), keeping rank(s) %s%s; cluster %s for cycle %d",
	    lost_list, c->id, ran ? "" : " before its ranks ran", k, n, c->zone, placement,
	    kept_list, remap > 0 ? " (rank 0 lost: a kept node becomes rank 0)" : "", id, r.cycle);
	if (broker_set_status(s, e, "placing",
	                      "interrupted on %s: replacing %zu of %zu node(s) (rank(s) %s) in %s, "
	                      "keeping the rest, for cycle %d",
	                      c->shape_id, k, n, lost_list, c->zone, r.cycle) == 0)
		broker_set_status(
		    s, e, "provisioning",
		    "replacing %zu of %zu node(s) in %s for cycle %d: launching rank(s) %s "
		    "into the gang's placement, cluster %s",
		    k, n, c->zone, r.cycle, fill, id);
	rc = broker_credits_reserve(b, s, e, id, c->price_micros * c->nnodes, &limit, &err);
	if (broker_lease_lost(s, rc)) {
		/* Held past the lease after recording it: the replacement, the kept nodes and
		 * the drain are the replica's that holds the burst now (issue 48). */
		broker_candidate_cleanup(&cand);
		goto out;
	}
	/*
	 * Rank 0 about to go (a notice) on a cloud whose launch call outlasts its notice (GCP:
	 * the call waits for the boot, the notice is 30 s): drain first, so its final
	 * checkpoint comes home before the node goes (issue 46). Elsewhere (EC2's RunInstances
	 * answers at once, the notice is 2 minutes) the launch goes first: the new node boots
	 * while the old cluster drains.
	 */
	if (ran && lost[0] && nodes[0].notice_at_ms &&
	    broker_node_reachable_in_notice(&nodes[0], c->provider, isc_store_now_ms()) &&
	    broker_drain_first(c->provider, 10000)) {
		broker_note(
		    s, e, "drain_first",
		    "rank 0 (%s) has a notice on %s (%ld s): its checkpoint comes home before "
		    "the replacement's launch",
		    nodes[0].instance_id, c->provider, broker_notice_ms(c->provider) / 1000);
		broker_drain(b, s, e);
	}
	if (rc) {
		char why[ISC_ERR_MSG_MAX + 16];
		snprintf(why, sizeof(why), "credits: %s", err.msg);
		isc_store_intent_resolve(s, token, "failed", why, &err);
		broker_replace_fallback(b, s, e, &r, why);
	} else {
		broker_launch_replacement(b, s, e, &r, &cand, token, NULL);
	}
	broker_candidate_cleanup(&cand);
	broker_drain(b, s, e);
out:
	free(id);
	free(placement);
	free(lost);
	free(kept_ids);
	free(kept_ranks);
	return taken;
}

int broker_replace_stragglers(struct isc_broker *b, struct isc_store *s, struct isc_experiment *e,
                              const struct isc_cluster *c, const struct isc_node *nodes, size_t n)
{
	struct broker_candidate cand;
	struct isc_node *marked = NULL;
	int *late = NULL;
	const char *family;
	char list[512] = "";
	long deadline;
	size_t k;
	int done = 0;

	if (n < 2 || n != (size_t)c->nnodes || b->config->replace_deadline_ms <= 0)
		return 0;
	/* Cheap first: any node still pending while another runs, past the shortest deadline. */
	if (!(late = calloc(n, sizeof(*late))))
		return 0;
	deadline = b->config->boot_deadline_vm_ms;
	if (b->config->boot_deadline_gpu_ms < deadline)
		deadline = b->config->boot_deadline_gpu_ms;
	if (b->config->boot_deadline_metal_ms < deadline)
		deadline = b->config->boot_deadline_metal_ms;
	if (!broker_stragglers(nodes, n, c->created_at_ms, isc_store_now_ms(), deadline, late) ||
	    !broker_candidate_for_cluster(b, s, e, c, &cand))
		goto out;
	family = broker_boot_family(c->provider, cand.instance_type);
	deadline = !strcmp(family, "metal") ? b->config->boot_deadline_metal_ms
	           : !strcmp(family, "gpu") ? b->config->boot_deadline_gpu_ms
	                                    : b->config->boot_deadline_vm_ms;
	broker_candidate_cleanup(&cand);
	k = broker_stragglers(nodes, n, c->created_at_ms, isc_store_now_ms(), deadline, late);
	if (!k || !(marked = malloc(n * sizeof(*marked))))
		goto out;
	/* The rows as broker_replace_lost reads them, a straggler no longer "pending": lost. */
	memcpy(marked, nodes, n * sizeof(*marked));
	for (size_t i = 0; i < n; i++) {
		if (!late[i])
			continue;
		marked[i].state = "straggling";
		snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s (rank %d)",
		         list[0] ? ", " : "", nodes[i].instance_id, nodes[i].rank);
	}
	broker_note(s, e, "straggler",
	            "%s: %zu of %zu node(s) still booting %ld s after the launch, past the %s "
	            "family's boot deadline (%ld s): %s; replacing them alone, keeping the %zu up",
	            c->shape_id, k, n, (long)((isc_store_now_ms() - c->created_at_ms) / 1000),
	            family, deadline / 1000, list, n - k);
	done = broker_replace_lost(b, s, e, c, marked, n);
out:
	free(marked);
	free(late);
	return done;
}
