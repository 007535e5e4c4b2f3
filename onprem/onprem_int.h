/*
 * Internals of on-prem execution shared by its files:
 *   onprem.c  the tick: pool and experiments from the store, queue decisions, statuses
 *   run.c     the workers: boot a run, stop one (grace, artifacts home), probe nodes
 *   probe.c   one SSH probe of a node, and why it failed
 */
#ifndef ISC_ONPREM_ONPREM_INT_H
#define ISC_ONPREM_ONPREM_INT_H

#include "config/config.h"
#include "onprem/onprem.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct isc_launch_follow;

/* The pool's key pair, kept with the cluster keys ($ISC_HOME/keys/onprem-pool). */
#define ONPREM_POOL_KEY_ID "onprem-pool"

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

#endif
