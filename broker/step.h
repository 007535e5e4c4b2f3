/*
 * The steps of one burst experiment, shared by the files that make its state machine:
 *   step.c     what every step acts through (lease checks, status, events, teardown)
 *   advance.c  the state machine: which step runs for each status
 *   launch.c   placing and launching a cluster, and replaying a launch
 *   replace.c  lost nodes: replace only what was lost, or fail the whole gang over
 *   restore.c  the last cycle's folders onto a new cluster, the kept nodes' head start
 * Every function here runs in a step's worker, on the step's own store connection.
 */
#ifndef ISC_BROKER_STEP_H
#define ISC_BROKER_STEP_H

#include "broker/broker_int.h"
#include "store/store_clusters.h"
#include "store/store_experiments.h"

#include <stddef.h>

/* ---- step.c ---- */

/*
 * 1 when the step may act (the burst's lease holds; ask_store: ask the lease row too,
 * for destructive effects); 0 ends the step with nothing more done (docs/ha.md).
 */
int broker_step_may_act(struct isc_broker *b, struct isc_store *s, const struct isc_experiment *e,
                        int ask_store);
/* 1 when rc (or the step's store) says this replica lost the burst's lease. */
int broker_lease_lost(struct isc_store *s, int rc);
/* Moves e from the status it was read with to status (a compare-and-set), with its event. */
int broker_set_status(struct isc_store *s, struct isc_experiment *e, const char *status,
                      const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Moves e to (or keeps it in) waiting, recording the reason once per change. */
int broker_wait_again(struct isc_broker *b, struct isc_store *s, struct isc_experiment *e,
                      enum isc_burst_wait why, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Records the outcome (status stopping, heading for final_status) before the teardown. */
int broker_begin_stop(struct isc_store *s, struct isc_experiment *e, const char *final_status,
                      const char *reason);
/* An event on the experiment's timeline (and the log). */
void broker_note(struct isc_store *s, const struct isc_experiment *e, const char *kind,
                 const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* The experiment's newest cluster not being torn down, into *out (1), or 0. */
int broker_current_cluster(struct isc_store *s, const char *experiment_id, struct isc_cluster *out);
/* 1 when rc is the store out of reach for a moment (logged; the step is tried again). */
int broker_store_blip(const struct isc_experiment *e, int rc, const struct isc_err *err,
                      const char *during);
/* Stops containers, brings artifacts home, terminates; 1 when it stopped short (see step.c). */
int broker_teardown(struct isc_broker *b, struct isc_store *s, const struct isc_experiment *e,
                    const struct isc_cluster *c, int stop_containers, int pull_artifacts,
                    int release_credits);

/* ---- advance.c ---- */

/* Tears down the experiment's draining clusters (or moves their kept nodes on). */
void broker_drain(struct isc_broker *b, struct isc_store *s, struct isc_experiment *e);
/* Terminates whatever a launch of unknown outcome made, for a cluster being torn down. */
void broker_collect_launch(struct isc_broker *b, struct isc_store *s,
                           const struct isc_experiment *e, const struct isc_cluster *c);
/* The teardown of a stopping experiment, then its final status. */
void broker_stop_all(struct isc_broker *b, struct isc_store *s, struct isc_experiment *e);

/* ---- launch.c ---- */

/* Walks the ranked candidates: hold credits, record cluster and intent, launch. */
void broker_place_and_launch(struct isc_broker *b, struct isc_store *s, struct isc_experiment *e);
/* Finishes a launch whose outcome is unknown (its intent is pending). */
void broker_resume_launch(struct isc_broker *b, struct isc_store *s, struct isc_experiment *e,
                          const struct isc_cluster *c, const struct isc_intent *intent);
/* Closes a cluster whose launch made nothing, then its key, holds and intent. */
void broker_give_up_cluster(struct isc_broker *b, struct isc_store *s,
                            const struct isc_experiment *e, const char *cluster_id,
                            const char *token, const char *why);
/* The ranked candidate of the cluster's shape, into *out (1), or 0 when it is none. */
int broker_candidate_for_cluster(struct isc_broker *b, struct isc_store *s,
                                 struct isc_experiment *e, const struct isc_cluster *c,
                                 struct broker_candidate *out);

/* ---- replace.c ---- */

/* Keeps what was not lost of cluster c and replaces the rest; 0 when not taken. */
/*
 * Stragglers (issue 46): a gang (or a replacement) some of whose nodes run while others
 * still boot past the shape family's boot deadline (boot_deadline_{vm,gpu,metal}_ms from
 * the launch) replaces those alone, keeping the nodes that run (broker_replace_lost with
 * the stragglers counted lost); the straggling instances are terminated with the drain.
 * Returns 1 when it did (the step is done), 0 when there is no straggler, the deadline has
 * not passed, or the lost-node path is not taken (boot_deadline_ms stays the gang's limit).
 */
int broker_replace_stragglers(struct isc_broker *b, struct isc_store *s, struct isc_experiment *e,
                              const struct isc_cluster *c, const struct isc_node *nodes, size_t n);
int broker_replace_lost(struct isc_broker *b, struct isc_store *s, struct isc_experiment *e,
                        const struct isc_cluster *c, const struct isc_node *nodes, size_t n);
/* A replacement could not be had: the whole-gang failover. */
void broker_replace_fallback(struct isc_broker *b, struct isc_store *s, struct isc_experiment *e,
                             const struct isc_cluster *r, const char *why);
/* Launches (or asks again for) a replacement cluster's fill ranks. */
void broker_launch_replacement(struct isc_broker *b, struct isc_store *s, struct isc_experiment *e,
                               const struct isc_cluster *r, const struct broker_candidate *cand,
                               const char *token, const char *resume_zone);
/* The drain of a cluster whose kept nodes move into its replacement r. */
void broker_drain_replaced(struct isc_broker *b, struct isc_store *s,
                           const struct isc_experiment *e, const struct isc_cluster *d,
                           const struct isc_cluster *r);
/* The experiment's cluster that replaces cluster_id (any state), into *out (1), or 0. */
int broker_replacement_of(struct isc_store *s, const char *experiment_id, const char *cluster_id,
                          struct isc_cluster *out);

/* ---- restore.c ---- */

/* What a replacement's kept nodes already hold while its new nodes boot (opaque). */
struct restored;
/* Removes and returns the cluster's entry (NULL: none); free with broker_restored_free. */
struct restored *broker_restored_take(const char *cluster_id);
/* Hands r (may be NULL) back to the list. */
void broker_restored_put(struct restored *r);
void broker_restored_free(struct restored *r);
/* Restores the last cycle's folders onto every node not in done, all at once. */
int broker_restore_artifacts(struct isc_broker *b, const struct isc_experiment *e,
                             const struct isc_cluster *c, const struct isc_node *nodes, size_t n,
                             const struct restored *done, struct isc_err *err);
/* The kept nodes' restore and containers while the new ones boot; 1 when all came up. */
int broker_restore_kept_early(struct isc_broker *b, struct isc_store *s,
                              const struct isc_experiment *e, const struct isc_cluster *c,
                              const struct isc_node *nodes, size_t n);
/* Starts the containers that did not start early (usually all). */
int broker_boot_the_rest(struct isc_broker *b, struct isc_store *s, const struct isc_experiment *e,
                         const struct isc_cluster *c, const struct isc_node *nodes, size_t n,
                         const struct restored *done, struct isc_err *err);
/* Whether the node runs and has an address to reach it at. */
int broker_node_reachable(const struct isc_node *n);

#endif
