/*
 * Clusters, their nodes, and launch intents.
 *
 * A cluster is one attempt to run an experiment on one shape. Its intent
 * (the idempotency token and the shape and zone it was for) is written in the
 * same transaction that creates the cluster, before any cloud call, so that
 * after a crash the broker asks the cloud about that token instead of
 * launching again. Node rows are never deleted: a node is closed when the
 * cloud confirms its termination, and the ledger refers to it.
 */
#ifndef ISC_STORE_STORE_CLUSTERS_H
#define ISC_STORE_STORE_CLUSTERS_H

#include "store/store.h"

/* Cluster states: launching -> booting -> running -> terminating -> closed. */
struct isc_cluster {
	char *id;
	char *experiment_id;
	char *shape_id;
	char *provider;
	char *account; /* "default", or a BYO cloud key id */
	char *region;
	char *zone; /* where the gang came up; "" until then */
	int nnodes, nproc;
	int cycle;            /* STRONG_CYCLE_COUNT of this cluster */
	int64_t price_micros; /* node-hour price snapshot at launch */
	char *state;
	int64_t created_at_ms;
	int64_t closed_at_ms; /* 0 while open */
	/*
	 * A replacement of lost nodes (issue 32): the cluster it replaces, the token of the
	 * gang launch whose placement its nodes join, and the ranks its launch fills
	 * ("1,3"). All "" for a cluster launched whole.
	 */
	char *replaces;
	char *placement_token;
	char *fill_ranks;
};

struct isc_intent {
	char *token;
	char *cluster_id;
	char *shape_id;
	char *zone;
	int count;
	char *state; /* pending | launched | failed */
	char *error;
	int64_t created_at_ms;
	char *attempt_zone; /* the zone whose launch call was last started; "" before any */
};

struct isc_node {
	int64_t id;
	char *cluster_id;
	int rank;
	char *instance_id;
	char *state; /* the cloud's: pending, running, shutting_down, terminated, ... */
	char *private_ip, *public_ip, *zone;
	int64_t price_micros;
	int64_t launched_at_ms;   /* 0 until the cloud reports it */
	int64_t terminated_at_ms; /* 0 until the cloud confirms it */
	int64_t charged_until_ms; /* 0 until first charged */
	int64_t notice_at_ms;     /* 0 unless an interruption notice was seen */
	/* 0 unless describes stopped listing it (node_missed); kept once it is counted gone
	 * by that absence (isc_node_gone_by_absence) */
	int64_t absent_since_ms;
};

/* Creates the cluster (state launching) and its pending intent in one transaction. */
int isc_store_cluster_create(struct isc_store *s, const struct isc_cluster *c, const char *token,
                             const char *zones, struct isc_err *err);
/*
 * Lost nodes (issue 32), in one transaction: creates the replacement cluster r
 * (state launching; r->replaces, placement_token, fill_ranks and zone set) with its
 * pending intent for the fill_ranks' count of nodes in r->zone, marks the replaced
 * cluster draining (it must be launching, booting or running: ISC_ECONFLICT once it
 * drains or ends), and records for each kept node of it (kept_ids[i]) the rank it
 * takes in r (kept_ranks[i]). Every other node of the replaced cluster is marked not
 * kept.
 */
int isc_store_cluster_replace(struct isc_store *s, const struct isc_cluster *r, const char *token,
                              const char *const *kept_ids, const int *kept_ranks, size_t n_kept,
                              struct isc_err *err);
/*
 * Moves the kept nodes of the replaced cluster old_id into the replacement new_id with
 * the ranks recorded for them (their rows, and so their charging, go on). *moved says
 * how many (0 once done).
 */
int isc_store_cluster_take_kept(struct isc_store *s, const char *old_id, const char *new_id,
                                size_t *moved, struct isc_err *err);
/* How many nodes of the cluster are kept for a replacement and not yet moved. */
int isc_store_cluster_kept_count(struct isc_store *s, const char *cluster_id, size_t *n,
                                 struct isc_err *err);
int isc_store_cluster_get(struct isc_store *s, const char *id, struct isc_cluster *out,
                          struct isc_err *err);
/* Every cluster not closed, oldest first. */
int isc_store_cluster_list_open(struct isc_store *s, struct isc_cluster **out, size_t *n,
                                struct isc_err *err);
/* The experiment's open clusters (normally at most two: a dying one and its replacement). */
int isc_store_cluster_list_for_experiment(struct isc_store *s, const char *experiment_id,
                                          int open_only, struct isc_cluster **out, size_t *n,
                                          struct isc_err *err);
int isc_store_cluster_set_state(struct isc_store *s, const char *id, const char *state,
                                struct isc_err *err);
int isc_store_cluster_set_zone(struct isc_store *s, const char *id, const char *zone,
                               struct isc_err *err);
void isc_cluster_cleanup(struct isc_cluster *c);
void isc_cluster_list_free(struct isc_cluster *list, size_t n);

int isc_store_intent_for_cluster(struct isc_store *s, const char *cluster_id,
                                 struct isc_intent *out, struct isc_err *err);
int isc_store_intent_resolve(struct isc_store *s, const char *token, const char *state,
                             const char *error, struct isc_err *err);
void isc_intent_cleanup(struct isc_intent *i);
/* Records, before the call, the zone a launch is about to ask (see attempt_zone). */
int isc_store_intent_set_attempt_zone(struct isc_store *s, const char *token, const char *zone,
                                      struct isc_err *err);

/* Records a node the cloud created for the cluster (ignored if the instance is known). */
int isc_store_node_add(struct isc_store *s, const struct isc_node *n, struct isc_err *err);
/*
 * What the cloud reported in a describe: state, addresses, launch time, a
 * notice. terminated_at_ms is set the first time state is "terminated". A node
 * counted gone by absence that is listed again (in any state) was never gone: its
 * recorded termination is replaced by this listing's (state "terminated") or
 * dropped, so the meter charges it through (issue 48). A notice
 * on a node of a terminating or closed cluster is not recorded: the broker
 * terminated it itself (issue 30: after a restart OCI's describe cannot say so).
 */
int isc_store_node_observe(struct isc_store *s, const char *instance_id, const char *state,
                           const char *private_ip, const char *public_ip, int64_t launched_at_ms,
                           int64_t notice_at_ms, int64_t observed_at_ms, struct isc_err *err);
/*
 * A describe did not list the node. The first miss is recorded; a node counts
 * as terminated (from the time it was first missed) only once it has been
 * missing for confirm_ms, and then *gone is 1. A later observe clears the miss.
 * Counted gone, the node keeps its first miss as the mark of a termination by
 * absence (isc_node_gone_by_absence), unless the cloud was seen ending it.
 */
int isc_store_node_missed(struct isc_store *s, const char *instance_id, int64_t now_ms,
                          int64_t confirm_ms, int *gone, struct isc_err *err);
/*
 * A node the describe did not list and the cloud itself says it no longer has (a
 * per-instance read: GCE's 404 after a deletion the broker asked for). Terminated now,
 * ended at its first miss (or now), without the mark of a termination by absence: the
 * cloud confirmed it, so it is charged as any confirmed termination, the provider's
 * minimum included, and never looked for again. *gone is 1 when this call ended it.
 */
int isc_store_node_gone_confirmed(struct isc_store *s, const char *instance_id, int64_t now_ms,
                                  int *gone, struct isc_err *err);
int isc_store_node_set_charged(struct isc_store *s, const char *instance_id, int64_t until_ms,
                               struct isc_err *err);
/*
 * The nodes of every cluster not closed on one provider, account and region (what
 * one describe covers), sorted by instance id: one read for a whole describe. With
 * absent_closed, also the nodes of closed clusters there that count as gone by
 * absence (a listing may show them again; this reads every closed cluster's nodes).
 */
int isc_store_node_list_in(struct isc_store *s, const char *provider, const char *account,
                           const char *region, int absent_closed, struct isc_node **out, size_t *n,
                           struct isc_err *err);
/*
 * 1 when the node counts as terminated only because the describes stopped listing it
 * (state "terminated" with its first miss kept): an observation a later listing may
 * prove false, not a termination the cloud confirmed.
 */
int isc_node_gone_by_absence(const struct isc_node *nd);
/*
 * 1 when isc_store_node_observe with these values would change the node's row, 0
 * when the row already says all of it (the describe then writes nothing).
 */
int isc_node_observe_changes(const struct isc_node *nd, const char *state, const char *private_ip,
                             const char *public_ip, int64_t launched_at_ms, int64_t notice_at_ms);
int isc_store_node_list(struct isc_store *s, const char *cluster_id, struct isc_node **out,
                        size_t *n, struct isc_err *err);
/* The node row of an instance id, in any cluster: *n is 1, or 0 when none has it. */
int isc_store_node_find(struct isc_store *s, const char *instance_id, struct isc_node **out,
                        size_t *n, struct isc_err *err);
/* 1 if the instance id belongs to any node row, else 0. */
int isc_store_node_known(struct isc_store *s, const char *instance_id, int *known,
                         struct isc_err *err);
void isc_node_list_free(struct isc_node *list, size_t n);

/* A node with time not yet charged, with what a ledger row needs. */
struct isc_node_charge {
	char *instance_id;
	char *cluster_id;
	char *experiment_id;
	char *provider;
	char *shape_id;
	char *account;
	int64_t price_micros;
	int64_t from_ms; /* charged_until, or the launch time */
	/* the recorded termination (raised to the launch + the cloud's minimum per start);
	 * else, while the listings leave it out, its first miss (no charge past it until a
	 * listing shows it again); else 0: it runs */
	int64_t to_ms;
	int64_t launched_ms; /* the launch the cloud reported: where its cost is priced from */
	int closed; /* to_ms is the termination the cloud confirmed (the interval closes) */
};

/*
 * Nodes whose cloud-reported lifetime has a part not yet charged (open or closed
 * clusters) that is due: a node still running only when it was last charged at or
 * before due_before_ms (the meter's charge interval ago), a node terminated or
 * missed at once.
 */
int isc_store_nodes_to_charge(struct isc_store *s, int64_t now_ms, int64_t due_before_ms,
                              struct isc_node_charge **out, size_t *n, struct isc_err *err);
/* The same for one experiment's nodes (the teardown's last charges before its release). */
int isc_store_nodes_to_charge_experiment(struct isc_store *s, const char *experiment_id,
                                         int64_t now_ms, int64_t due_before_ms,
                                         struct isc_node_charge **out, size_t *n,
                                         struct isc_err *err);
void isc_node_charge_list_free(struct isc_node_charge *list, size_t n);

#endif
