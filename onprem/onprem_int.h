/*
 * Internals of on-prem execution shared by its files:
 *   onprem.c   the tick (the order of its steps), lifecycle, events and statuses
 *   exps.c     experiments from the store into the queue, cancels, waits, queue_state
 *   runs.c     the queue's decisions carried out: boots, stops, exits, periodic syncs
 *   nodes.c    the pool from the store into the queue, node probes and their outcome
 *   orphans.c  runs a previous iscd left, stopped before their experiments resume
 *   jobs.c     the workers: boot a run, stop one (grace, artifacts home), sync, probe
 *   probe.c    one SSH probe of a node, and why it failed
 * Only the tick's thread (onprem.c, exps.c, runs.c, nodes.c, orphans.c) touches
 * struct isc_onprem and writes the store; workers get copies and report back.
 */
#ifndef ISC_ONPREM_ONPREM_INT_H
#define ISC_ONPREM_ONPREM_INT_H

#include "config/config.h"
#include "onprem/onprem.h"
#include "queue/queue.h"
#include "store/store_experiments.h"
#include "store/store_queue.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct isc_launch_follow;

/* The pool's key pair, kept with the cluster keys ($ISC_HOME/keys/onprem-pool). */
#define ONPREM_POOL_KEY_ID "onprem-pool"

/* A command's output on a node, bounded, its lines joined with "; ": the node's own words. */
struct onprem_words {
	char buf[ISC_ERR_MSG_MAX / 2];
	size_t len;
	int line_ended; /* a newline came: "; " before the next character */
};
/* An isc_ssh_output_fn (launcher/ssh.h) appending to the struct onprem_words ctx. */
void onprem_words_add(void *ctx, const char *data, size_t len, int stderr_stream);

/* What every worker needs; immutable while workers run. */
struct onprem_env {
	char *home;
	char *key_path; /* the pool's private key ($ISC_HOME/keys/onprem-pool) */
	struct isc_config *cfg;
};

/* One pool node as a worker sees it (owned copies). */
struct onprem_target {
	int64_t node_id;
	int rank;
	char *host, *user;
	int port;
	char pin[40]; /* host keys are pinned under "onprem-node-<id>" */
	int skip;     /* known down: not contacted */
	int rc;       /* boot: this node's outcome (0 or an isc_code); probe: 0 when it answered */
	char msg[ISC_ERR_MSG_MAX];
};

enum onprem_job_kind {
	ONPREM_JOB_BOOT,  /* clean the artifact folders, ship datasets, push the artifacts, boot */
	ONPREM_JOB_STOP,  /* stop following, docker stop with grace + rm, pull artifacts */
	ONPREM_JOB_PROBE, /* log in to each target once (isc_onprem_probe) */
	ONPREM_JOB_SYNC,  /* a running run's periodic sync: the `which` folders from rank 0 */
};

/* A dataset of a run, resolved in the experiment's organisation when the run starts. */
struct onprem_dataset {
	char *name;  /* mounted read-only at /data/<name> */
	char *copy;  /* NAME-ETAG-VERSIONID: the node keeps it as /data/.isc/<copy> */
	char *local; /* iscd's cached copy, $ISC_HOME/datasets/<copy> */
};

struct onprem_job {
	enum onprem_job_kind kind;
	const struct onprem_env *env;
	pthread_t thread;
	int has_thread;
	int done; /* set by the worker (atomic store) when it has finished */
	/* what to boot or stop (owned) */
	char *exp_id, *name, *compute_mode, *command, *image;
	char **datasets; /* as the launch file names them (name or id) */
	size_t n_datasets;
	struct onprem_dataset *ds; /* boot: each of them resolved (n_datasets entries) */
	int cycle_count;
	long cycle_time_ms;
	int nnodes, nproc;
	struct onprem_target *t;
	size_t n;
	struct isc_launch_follow *follow; /* stop: the run's follower, freed by the worker */
	int pull;                         /* stop: bring the artifacts home from rank 0 */
	int which;                        /* sync: ISC_ARTIFACT_* folders to bring home */
	struct onprem_job *sync; /* stop: a sync still running, waited for before the pull */
	int suspect; /* stop: index of a target whose rank died (-1: none): does it answer? */
	int lost;    /* stop: the suspect did not answer a login */
	/* results */
	int rc;
	struct isc_err err;
	int pull_rc;
	struct isc_err pull_err;
};

/* A job with its targets (n of them, zeroed); NULL when out of memory. */
struct onprem_job *onprem_job_new(enum onprem_job_kind kind, const struct onprem_env *env,
                                  size_t n);
/* Starts the worker thread; ISC_EIO when no thread could be made (the job is then done). */
int onprem_job_start(struct onprem_job *j, struct isc_err *err);
/* 1 once the worker has finished. */
int onprem_job_done(const struct onprem_job *j);
/* Joins (waits for) the worker if it was started, then frees. */
void onprem_job_free(struct onprem_job *j);

/* Starts following a booted run: rank_N.txt under out_dir, exit codes. */
int onprem_follow_start(const struct onprem_job *boot, const char *out_dir,
                        struct isc_launch_follow **out, struct isc_err *err);

/* ---- the tick's state (only the tick's thread touches it) ---- */

enum onprem_run_phase {
	PHASE_BOOTING,  /* a boot worker runs */
	PHASE_RUNNING,  /* followed */
	PHASE_STOPPING, /* a stop worker runs; the queue hears of the end when it is done */
};

struct onprem_run {
	enum onprem_run_phase phase;
	struct onprem_job *job;           /* the boot or stop worker, NULL while running */
	struct isc_launch_follow *follow; /* while running */
	struct onprem_job *spec;          /* the finished boot job: what the run is */
	int stop_wanted;                  /* the queue said stop while the boot was running */
	enum isc_queue_outcome outcome;   /* told to the queue once the stop worker is done */
	enum isc_queue_stop_reason reason;
	int queue_stop; /* the stop is the queue's decision (reason is valid) */
	char why[300];
	struct onprem_job *sync;                /* a periodic artifact sync in progress */
	int64_t checkpoints_at_ms, lossy_at_ms; /* last periodic sync (or the run's start) */
};

struct onprem_exp {
	int64_t qid;
	char *id;
	char *status;   /* the store's status as this thread last wrote or read it */
	int validation; /* a burst running its validation cycle */
	int cancel_seen;
	/* what its status reason last said it waits for (review_waits) */
	enum isc_queue_blocker blocker;
	struct onprem_run *run;
	struct isc_queue_row written; /* the queue_state row last written */
	struct onprem_exp *next;
};

struct onprem_node {
	int64_t id;
	char *host, *user;
	int port, gpus;
	char state[16];               /* as in the store */
	char reason[ISC_ERR_MSG_MAX]; /* as in the store: why its last probe failed */
	int in_queue;                 /* added to the queue */
	int orphan;                   /* a run a previous iscd left is being stopped here */
	int64_t first_fail_ms;    /* first failed probe of the current streak; 0 when answering */
	struct onprem_job *probe; /* a probe in progress */
	int64_t probed_ms;        /* when the last probe started */
	struct onprem_node *next;
};

struct onprem_orphan {
	struct onprem_job *job;
	char *exp_id;
	struct onprem_orphan *next;
};

struct isc_onprem {
	struct isc_store *store;
	struct onprem_env env;
	struct isc_queue *q;
	struct onprem_exp *exps;
	struct onprem_node *nodes;
	struct onprem_orphan *orphans;
	int64_t next_qid;
};

/* onprem.c: an event in the experiment's timeline (and the log). */
void onprem_note(struct isc_onprem *o, const char *exp_id, const char *kind, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* onprem.c: compare-and-set of the store status from what this thread last saw; 0 or
 * ISC_ECONFLICT. */
int onprem_set_status(struct isc_onprem *o, struct onprem_exp *e, const char *to, const char *fmt,
                      ...) __attribute__((format(printf, 4, 5)));

/* exps.c */
struct onprem_exp *onprem_exp_by_qid(struct isc_onprem *o, int64_t qid);
/* Drops an experiment the queue is done with (it ended, or left for the cloud). */
void onprem_exp_drop(struct isc_onprem *o, struct onprem_exp *gone);
/* The row of isc status: place, expected start, the run's nodes, cycles done. */
void onprem_record_queue_state(struct isc_onprem *o, struct onprem_exp *e, int64_t now);
/* New work and cancellations from the store. */
void onprem_sync_experiments(struct isc_onprem *o, int64_t now);
/* What waiting experiments say they wait for (once per change). */
void onprem_review_waits(struct isc_onprem *o);

/* runs.c */
/* The job that says which nodes a run has: the finished boot, or the boot in progress. */
const struct onprem_job *onprem_run_nodes(const struct onprem_run *r);
void onprem_run_free(struct onprem_run *r);
/* The queue's decisions: a boot worker per START, a stop per STOP. */
void onprem_act(struct isc_onprem *o, int64_t now);
/* A stop worker for a running run (suspect_rank: a rank that died, or -1). */
void onprem_start_stop(struct isc_onprem *o, struct onprem_exp *e, enum isc_queue_outcome outcome,
                       const char *why, int suspect_rank);
/* What a finished boot or stop worker found. */
void onprem_boot_done(struct isc_onprem *o, struct onprem_exp *e, int64_t now);
void onprem_stop_done(struct isc_onprem *o, struct onprem_exp *e, int64_t now);
/* Rank exits of running runs. */
void onprem_poll_runs(struct isc_onprem *o);
/* Periodic artifact syncs of running runs. */
void onprem_sync_runs(struct isc_onprem *o, int64_t now);
/* A job's experiment, image, command and datasets from the store's row. */
int onprem_fill_spec(struct isc_onprem *o, struct onprem_job *j, const struct isc_experiment *row);

/* nodes.c */
struct onprem_node *onprem_node_by_id(struct isc_onprem *o, int64_t id);
/* Frees a node; waits for its probe (only at the end: the tick leaves it while it runs). */
void onprem_node_free(struct onprem_node *nd);
/* The pool as the store has it now, into the queue. */
void onprem_sync_nodes(struct isc_onprem *o);
/* A node does not answer: unreachable in the store and the queue; its run is interrupted. */
void onprem_mark_unreachable(struct isc_onprem *o, struct onprem_node *n, const char *why);
/* Probes due now started; a finished one's outcome applied. */
void onprem_probe_start(struct isc_onprem *o, int64_t now);
void onprem_probe_apply(struct isc_onprem *o, struct onprem_node *nd, int64_t now);

/* orphans.c */
/* Stops what a previous iscd's run left on the nodes queue_state recorded (ids, rank order). */
void onprem_orphan_stop(struct isc_onprem *o, const struct isc_experiment *row, const char *nodes);
/* 1 while such a stop for the experiment is in progress. */
int onprem_orphan_pending(struct isc_onprem *o, const char *exp_id);
/* Finished orphan stops: their nodes are free again. */
void onprem_reap_orphans(struct isc_onprem *o);

#endif
