/*
 * Internals of the broker shared by its files:
 *   broker.c   the tick: jobs (one worker thread per experiment step), followers
 *   advance.c  the state machine of one experiment, run in a worker (its steps:
 *              step.c, launch.c, replace.c, restore.c; broker/step.h)
 *   cloud.c    the bridge to the provider drivers (sessions per account+region)
 *   watch.c    one describe per account+region, node updates, reconciliation
 *   place.c    ranking and layout for an experiment (the shapes module)
 *   meter.c    credits: reservations and per-node charges
 */
#ifndef ISC_BROKER_BROKER_INT_H
#define ISC_BROKER_BROKER_INT_H

#include "broker/broker.h"
#include "config/config.h"
#include "credits/credits.h"
#include "queue/burst.h"
#include "store/store_clusters.h"
#include "store/store_experiments.h"

#include <pthread.h>
#include <stdint.h>

struct isc_launch_follow;

/* A candidate placement for an experiment, best first. */
struct broker_candidate {
	char *shape_id;
	char *provider;
	char *region;
	char *instance_type;
	int spot;
	char *zones; /* comma-separated, tried in order */
	int nnodes, nproc;
	int64_t node_price_micros;
};

/* Frees what one candidate holds (not the candidate itself, which may live on the stack). */
void broker_candidate_cleanup(struct broker_candidate *c);
/* Frees an array of n candidates made by broker_place. */
void broker_candidates_free(struct broker_candidate *c, size_t n);

/* What a describe says about one instance. */
struct broker_instance {
	char *instance_id;
	char *state; /* pending, running, shutting_down, terminated, stopping, stopped */
	char *private_ip, *public_ip, *zone;
	char *cluster_id;   /* from the isc:cluster tag; may be NULL */
	char *client_token; /* the token of the launch that made it; may be NULL */
	int64_t launched_at_ms;
	int64_t notice_at_ms; /* 0 unless an interruption notice is pending */
};

void broker_instances_free(struct broker_instance *v, size_t n);

/* Why a worker's step is asked to stop its periodic sync early (broker_job.stop). */
enum {
	BROKER_STOP_NONE = 0,
	BROKER_STOP_CANCELLED = 1, /* the experiment was cancelled while the step ran */
	BROKER_STOP_YIELD = 2,     /* the worker is owed to another organisation (fair share) */
	BROKER_STOP_SHUTDOWN = 3,  /* iscd is stopping */
};

/* A worker running one step of one experiment. */
struct broker_job {
	char *experiment_id;
	int64_t org_id;      /* whose step: the fair share of the workers (issue 42) */
	int began_cancelled; /* the step was started for a cancelled experiment (its teardown) */
	pthread_t thread;
	int done; /* set by the worker (atomic store) when it has finished */
	/* BROKER_STOP_*: set by the main thread, read by the step's transfers (a cancel flag) */
	volatile int stop;
	struct isc_broker *broker;
	struct broker_job *next;
};

/*
 * The stop flag of the step the calling thread runs (broker_job.stop), NULL outside
 * a worker. A periodic sync passes it to the launcher as its cancel flag.
 */
volatile int *broker_step_stop(void);

/* Output followers of running clusters, keyed by cluster id. */
struct broker_follower {
	char *cluster_id;
	struct isc_launch_follow *follow;
	struct broker_follower *next;
};

/* The phases of a tick, timed (isc_broker_tick_phases). */
#define BROKER_TICK_PHASES 5

struct isc_broker {
	struct isc_store *store; /* the main thread's connection; workers open their own */
	char *home;
	struct isc_config *config;
	struct broker_job *jobs;
	struct broker_follower *followers;
	pthread_mutex_t lock; /* guards followers */
	uint64_t ticks;
	/* Time spent in each phase of the ticks so far (isc_broker_tick_phases). */
	int64_t phase_sum_ms[BROKER_TICK_PHASES], phase_max_ms[BROKER_TICK_PHASES];
	size_t next_turn;     /* where the next tick starts its round of steps (broker_workers) */
	int64_t prices_at_ms; /* the last scheduled price refresh; 0: not yet */
	int64_t lists_checked_ms; /* the last look at the list-price sources' schedules */
	int64_t tick_due_us;      /* monotonic: when the next tick is due (its lateness's zero) */
	int64_t risk_at_ms;       /* the last scheduled risk refresh (risk.c); 0: not yet */
	struct broker_leases *leases;   /* this replica's leases (broker.c); NULL: not a replica */
	struct broker_quotas *quotas;   /* artifacts each organisation keeps at home (quota.c) */
	struct broker_watcher *watcher; /* the describes in the background (watch.c) */
	/* Rank logs into the store (logship.h), made at the first follow; under lock. */
	struct isc_logship *logship;
};

/* ---- quota.c: org_artifact_quota_bytes (issue 42) ---- */
struct broker_quotas;
struct broker_quotas *broker_quotas_new(void);
void broker_quotas_free(struct broker_quotas *q);
/* A pull's share of its organisation's quota, from broker_quota_take to broker_quota_give. */
struct broker_quota_hold {
	int64_t org_id;
	int64_t reserved; /* the pull's cap, held while it runs */
	int64_t replaced; /* what its folders held at home before */
	int which;
	int held;
	int capped; /* the cap is the quota's room, not artifact_max_bytes */
};
/*
 * Before a pull of e's folders in `which`: lowers *cap (artifact_max_bytes; 0: none)
 * to what the organisation may still bring home, counting what the pull replaces as
 * freed and what its other pulls under way may bring as taken. ISC_EQUOTA, with the
 * message for the timeline, when there is no room: the pull is not made.
 */
int broker_quota_take(struct isc_broker *b, struct isc_store *s, const struct isc_experiment *e,
                      int which, uint64_t *cap, struct broker_quota_hold *h, struct isc_err *err);
/* After the pull (pulled: it swapped its folders in): what it brought is counted. */
void broker_quota_give(struct isc_broker *b, const struct isc_experiment *e,
                       struct broker_quota_hold *h, int pulled);

/* ---- broker.c: leases of this replica on bursts (issue 33, docs/ha.md) ---- */
/*
 * 1 when this replica may work on the experiment: it holds the lease (and its last
 * renewal is recent enough to be sure of it), or it is no replica (leases off).
 */
int broker_lease_mine(struct isc_broker *b, const char *experiment_id);
/* The token of this replica's lease on the burst (caller frees), or NULL. */
char *broker_lease_token(struct isc_broker *b, const char *experiment_id);
/* 1 when another live replica holds the experiment's lease (as of this tick's view). */
int broker_lease_elsewhere(struct isc_broker *b, const char *experiment_id);
/*
 * 1 when this replica meters the experiment: it holds it, or nobody holds it (an
 * ended burst) and this replica is the live one with the smallest id.
 */
int broker_meters(struct isc_broker *b, const char *experiment_id);
/*
 * 1 while this replica is sure it is live: its last heartbeat succeeded less than
 * three quarters of lease_ms ago (monotonic), or it is no replica. A describe records
 * nothing otherwise (watch.c).
 */
int broker_replica_sure(struct isc_broker *b);

/* ---- advance.c ---- */
/* One step of the experiment's state machine, with the worker's own store connection. */
void broker_advance(struct isc_broker *b, struct isc_store *s, const char *experiment_id);

/* ---- place.c ---- */
int broker_place(struct isc_broker *b, struct isc_store *s, const struct isc_experiment *e,
                 struct broker_candidate **out, size_t *n, struct isc_err *err);
/* The same ranking against a catalog the caller loaded once for many experiments. */
struct isc_catalog;
int broker_place_in(struct isc_broker *b, const struct isc_catalog *cat,
                    const struct isc_experiment *e, struct broker_candidate **out, size_t *n,
                    struct isc_err *err);

/* ---- prices.c ---- */
/* Live spot prices of the candidates of active bursts, every price_refresh_ms (main thread). */
void broker_refresh_prices(struct isc_broker *b, int64_t now_ms);
/* risk.c: the clouds' risk answers for the candidates of placeable work, hourly (issue 43). */
void broker_refresh_risk(struct isc_broker *b, int64_t now_ms);

/* ---- cloud.c ---- */
/*
 * Whether the step working on s may still act for its burst (issue 48, docs/ha.md):
 * 0 when it may, ISC_ELEASE when its store connection's fence was refused or this
 * replica no longer counts the lease as its own (the connection is then marked lost,
 * so none of the step's later writes is made either). With ask_store, also the lease
 * row itself, by the database's clock: made right before every destructive call
 * (terminate, stopping or replacing containers, deleting a key file); a lease the
 * store cannot confirm there (an error) also marks the connection lost, so the step
 * ends as if it were. A connection with no fence (SQLite, the tick's own, a
 * non-replica) always may.
 */
int broker_step_holds(struct isc_broker *b, struct isc_store *s, int ask_store,
                      struct isc_err *err);
int broker_cloud_configured(struct isc_broker *b, const char *provider, struct isc_err *err);
/*
 * The organisation's own key for a shape's provider and region: *key_id and
 * *account (caller frees) when it has an active one, both NULL when it has none
 * (the platform's account is used). A key that is failing or being removed is
 * ISC_EAUTH with the reason: that provider takes no new launch for the org.
 */
int broker_key_for(struct isc_broker *b, struct isc_store *s, int64_t org_id, const char *provider,
                   const char *region, char **key_id, char **account, struct isc_err *err);
/*
 * Launches the gang for the cluster with its intent's token; the nodes are
 * recorded in the store. A replacement of lost nodes (c->fill_ranks) launches
 * only those, in c->zone, joining the placement of the gang c->placement_token
 * launched, and records them with the ranks they fill. resume_zone (the intent's attempt_zone, or
 * NULL) is asked first. Before each zone's call the zone is recorded on the intent. A gang that
 * launched but could not be recorded answers ISC_ETRANSIENT: the intent stays pending and
 * broker_cloud_adopt finds it.
 */
int broker_cloud_launch(struct isc_broker *b, struct isc_store *s, const struct isc_cluster *c,
                        int64_t org_id, const struct broker_candidate *cand, const char *token,
                        const char *resume_zone, const char *pubkey, struct isc_err *err);
/*
 * Looks for the cluster's nodes by its tag (a launch whose reply was lost, or
 * whose nodes were never recorded). *found is how many live ones the cloud
 * lists; when that is the whole gang they are recorded in the store.
 */
int broker_cloud_adopt(struct isc_broker *b, struct isc_store *s, const struct isc_cluster *c,
                       size_t *found, struct isc_err *err);
/* The most nodes a gang has (a replacement's fill list is read up to this). */
#define BROKER_MAX_NODES 1024
/*
 * The ranks a replacement of lost nodes fills (issue 32), in order, into ranks[cap];
 * how many. 0 for a cluster launched whole: its launch is c->nnodes nodes, ranks from 0.
 */
int broker_fill_ranks(const struct isc_cluster *c, int *ranks, int cap);
/*
 * A launch being given up (its cluster stopped while the intent was pending):
 * every live instance the cloud lists for the cluster (by its tag or the
 * intent's client token) that no node row has is recorded, partial gangs too,
 * so the teardown terminates it and the meter charges it from its launch.
 * *found is how many live ones the cloud lists.
 */
int broker_cloud_collect(struct isc_broker *b, struct isc_store *s, const struct isc_cluster *c,
                         size_t *found, struct isc_err *err);
int broker_cloud_describe(struct isc_broker *b, struct isc_store *s, const char *provider,
                          const char *account, const char *region, struct broker_instance **out,
                          size_t *n, struct isc_err *err);
int broker_cloud_terminate(struct isc_broker *b, struct isc_store *s, const char *provider,
                           const char *account, const char *region, const char *const *ids,
                           size_t n, struct isc_err *err);
/*
 * Asks the cloud of each instance ids[i] (in zones[i]) whether it still exists (the
 * provider's confirm_gone): gone[i] = 1 when the cloud says it does not. All 0 when the
 * provider has no such read (returns 0); on an error (returned, err says why) the ids
 * answered before it keep their answers, the others are 0.
 */
int broker_cloud_confirm_gone(struct isc_broker *b, struct isc_store *s, const char *provider,
                              const char *account, const char *region, const char *const *ids,
                              const char *const *zones, size_t n, int *gone, struct isc_err *err);

/* ---- watch.c ---- */
/*
 * The describes of a tick (issue 49): one per account+region with open clusters (and
 * every configured one when reconciling), each in the background, one in flight per
 * target; a target's next starts once its last one returned and started a tick
 * interval ago. The tick does not wait for them. With wait_fresh (iscd's first tick,
 * --once, a takeover) it waits, up to describe_wait_ms, for a describe of every
 * target (a reconciliation) started after the call, and logs each it gave up on.
 */
int broker_watch(struct isc_broker *b, int reconcile, int wait_fresh, struct isc_err *err);
/*
 * 1 when a describe of the target that started at or after since_ms (monotonic) has
 * recorded what it saw: steps and the meter read the store rows it wrote.
 */
int broker_observed_since(struct isc_broker *b, const char *provider, const char *account,
                          const char *region, int64_t since_ms);
/* iscd stops: describes out record nothing more, and are joined (main thread). */
void broker_watch_stop(struct isc_broker *b);
/* Terminates every node of the cluster that is not yet terminated; cluster goes to terminating. */
int broker_cluster_terminate(struct isc_broker *b, struct isc_store *s, const struct isc_cluster *c,
                             struct isc_err *err);

/* ---- meter.c ---- */
int broker_meter(struct isc_broker *b, struct isc_err *err);

/* ---- broker.c: followers ---- */
/* A rank's exit: 1 and *code when it has exited, 0 while it runs or is unknown. */
int broker_follower_rank_exit(struct isc_broker *b, const char *cluster_id, int rank, int *code);
void broker_follower_stop(struct isc_broker *b, const char *cluster_id);

/* Paths under the home: output folder of an experiment, key file of a cluster. */
char *broker_output_dir(const struct isc_broker *b, const char *experiment_id);

#endif

/*
 * The experiment's dataset_id_list resolved in its organisation: each must
 * exist and be Available (checked before placing, so no money is spent on an
 * experiment that cannot start). ISC_ENOTFOUND / ISC_ECONFLICT naming it.
 */
int broker_datasets_check(struct isc_store *s, const struct isc_experiment *e, struct isc_err *err);

/* ---- boot.c: the bridge to the launcher ---- */
/*
 * Starts the containers of the cluster's nodes (all n of them; with only, n entries,
 * those with only[i] set, each rank's environment still naming all n).
 */
int broker_boot_cluster(struct isc_broker *b, struct isc_store *s, const struct isc_experiment *e,
                        const struct isc_cluster *c, const struct isc_node *nodes, size_t n,
                        const int *only, struct isc_err *err);
/* Asks the containers to stop with the grace period, then removes them. Best effort. */
void broker_stop_containers(struct isc_broker *b, const struct isc_experiment *e,
                            const struct isc_cluster *c, const struct isc_node *nodes, size_t n);
/* Starts following output and exits of a running cluster (main thread). */
int broker_follow_start(struct isc_broker *b, struct isc_store *s, const struct isc_cluster *c,
                        struct isc_err *err);
/*
 * Artifacts: rank 0's /mnt folders to the broker's side (members the unpacker
 * refused are recorded as an event through s), and back onto a new cluster.
 */
int broker_artifacts_pull(struct isc_broker *b, struct isc_store *s, const struct isc_experiment *e,
                          const struct isc_cluster *c, const struct isc_node *rank0, int which,
                          struct isc_err *err);
/*
 * The same pull for the periodic sync of a running cluster: it may be cut short
 * (the step's broker_step_stop flag: a cancel of the experiment, the worker owed
 * to another organisation, iscd stopping), which the error says; the previous
 * copy then stays whole. Teardown pulls (the last copy of a cycle) are never cut.
 */
int broker_artifacts_sync(struct isc_broker *b, struct isc_store *s, const struct isc_experiment *e,
                          const struct isc_cluster *c, const struct isc_node *rank0, int which,
                          struct isc_err *err);
/*
 * 1 when the disk of $ISC_HOME has less than disk_reserve_bytes free, with why
 * filled for the experiment's status: no new work starts then, so a ledger
 * write never meets a full disk.
 */
int broker_disk_low(struct isc_broker *b, char *why, size_t cap);
/*
 * What came home, back onto every one of the nodes, all at once (each node's copy
 * retried on its own). cancel (may be NULL): set once a node is known gone; the
 * pushes then stop retrying.
 */
int broker_artifacts_push(struct isc_broker *b, const struct isc_experiment *e,
                          const struct isc_cluster *c, const struct isc_node *nodes, size_t n,
                          volatile int *cancel, struct isc_err *err);

/*
 * Artifacts in object storage (issue 45, broker/s3ckpt.c): when artifact_root is
 * s3://, the pulls and syncs above go from rank 0 straight to the bucket
 * (broker_s3_sync: a new manifest version, current only once every object is
 * verified), and the pushes restore the current version straight from the bucket
 * onto every node (broker_s3_restore).
 */
struct isc_node_target;
struct isc_launcher_opts;
int broker_s3_enabled(const struct isc_broker *b);
int broker_s3_sync(struct isc_broker *b, struct isc_store *s, const struct isc_experiment *e,
                   const struct isc_node_target *rank0, const struct isc_launcher_opts *opts,
                   int which, struct isc_err *err);
int broker_s3_restore(struct isc_broker *b, const struct isc_experiment *e,
                      const struct isc_node_target *targets, size_t n,
                      const struct isc_launcher_opts *opts, struct isc_err *err);

/*
 * The artifact folders (ISC_ARTIFACT_* set) due for a periodic sync of this
 * cluster now; the clock starts at the first call, and what is returned is
 * counted as synced.
 */
int broker_sync_due(struct isc_broker *b, const char *cluster_id, int64_t now_ms);
void broker_sync_forget(struct isc_broker *b, const char *cluster_id);

/* ---- why each waiting burst waits, for the waiting order (queue/burst.h); kept in memory ---- */
/* Notes why a burst waits (set by the worker that made it wait). */
void broker_wait_note(struct isc_broker *b, const char *experiment_id, enum isc_burst_wait why);
/* Why it waits; ISC_BURST_WAIT_NONE when not known (iscd restarted since). */
enum isc_burst_wait broker_wait_kind(struct isc_broker *b, const char *experiment_id);
/* Forgets every burst but those for which keep(experiment_id, ctx) is 1 (NULL: forget all). */
void broker_wait_prune(struct isc_broker *b, int (*keep)(const char *, void *), void *ctx);

/* ---- step.c: a burst the waiting order holds behind an older one (main thread) ---- */
/*
 * Records that e waits behind `head` in the line of the money head waits for
 * (status waiting, the reason naming head and its place in line, no try time of
 * its own), once per change of reason.
 */
void broker_hold(struct isc_broker *b, struct isc_experiment *e, const struct isc_experiment *head,
                 const struct isc_burst_turn *turn);

/* ---- shapes excluded for the rest of a placement round (after capacity or a partial gang) ---- */
void broker_exclude_shape(struct isc_broker *b, const char *experiment_id, const char *shape_id);
int broker_shape_excluded(struct isc_broker *b, const char *experiment_id, const char *shape_id);
void broker_exclusions_clear(struct isc_broker *b, const char *experiment_id);

/* ---- meter.c: credits for one cluster ---- */
/* *limit says, on ISC_ECREDITS, whether the org's credits or the project's budget refused it. */
int broker_credits_reserve(struct isc_broker *b, struct isc_store *s,
                           const struct isc_experiment *e, const char *cluster_id,
                           int64_t cluster_price_micros, enum isc_credits_limit *limit,
                           struct isc_err *err);
void broker_credits_release(struct isc_broker *b, struct isc_store *s, const char *experiment_id);
/* Makes sure the cluster's hold covers one reservation window (after a crash it may be missing). */
int broker_credits_ensure(struct isc_broker *b, struct isc_store *s, const struct isc_experiment *e,
                          const struct isc_cluster *c, struct isc_err *err);
