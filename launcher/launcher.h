/*
 * The launcher: boots an experiment's container on every node of a cluster
 * over SSH, in parallel (one thread per node, so a slow node never holds up
 * the others), stops them with a grace period, and follows their output and
 * exit codes. See docs/launcher.md.
 */
#ifndef ISC_LAUNCHER_LAUNCHER_H
#define ISC_LAUNCHER_LAUNCHER_H

#include "common/err.h"
#include "launcher/ssh.h"

#include <stddef.h>

struct isc_boot_spec {
	const char *experiment_id;
	const char *experiment_name;
	const char *compute_mode;
	int cycle_count;     /* STRONG_CYCLE_COUNT */
	long cycle_time_ms;  /* STRONG_CYCLE_TIME_MS (0 for burst: no cycle limit) */
	const char *command; /* run as bash -lc COMMAND in the container */
	const char *image;
	const char *const *dataset_ids; /* mounted read-only at /data/<id> */
	size_t n_datasets;
	int nnodes, nproc;
	int master_port;
	const char *shm_size; /* e.g. "16g" */
};

struct isc_node_target {
	int rank;
	const char *host; /* where to connect (public address, else private) */
	int port;
	const char *private_ip; /* MASTER_ADDR / IP_TO_RANK_MAPPING */
	const char *pin_target; /* host keys are pinned under this (the instance id) */
};

struct isc_launcher_opts {
	const char *user;
	const char *key_path;
	long connect_deadline_ms; /* per node, while it boots */
	long command_timeout_ms;  /* per remote command (docker pull can be slow) */
	isc_ssh_hostkey_fn check; /* host-key pinning; called from the node threads */
	void *check_ctx;
};

/* "isc-<experiment id>-r<rank>", safe as a docker name. Caller frees. */
char *isc_launcher_container_name(const char *experiment_id, int rank);

/*
 * Boots every node in parallel: artifact folders, docker pull, docker run -d
 * with the full environment. If any node fails, the containers already started
 * elsewhere are removed and the error names the node and rank: ISC_EINVALID
 * when the image cannot be pulled or the container not started (another
 * cluster will not help), ISC_ETRANSIENT / ISC_EAUTH for unreachable nodes and
 * refused keys.
 */
int isc_launcher_boot(const struct isc_boot_spec *spec, const struct isc_node_target *nodes,
                      size_t n, const struct isc_launcher_opts *opts, struct isc_err *err);

/* docker stop -t grace_s (the script may checkpoint), then removal, on every node in parallel. */
void isc_launcher_stop(const struct isc_boot_spec *spec, const struct isc_node_target *nodes,
                       size_t n, const struct isc_launcher_opts *opts, int grace_s);

/* The artifact folders under /mnt, as a set. */
enum {
	ISC_ARTIFACT_CHECKPOINTS = 1,
	ISC_ARTIFACT_CRUD = 2,
	ISC_ARTIFACT_LOSSY = 4,
	ISC_ARTIFACT_ALL = 7,
};

/*
 * Artifacts: copies the folders in `which` (/mnt/checkpoints, /mnt/crud,
 * /mnt/lossy) of a node into local_dir (pull), or local_dir's content back
 * onto a node (push), as a tar stream over the SSH channel.
 */
int isc_launcher_pull_artifacts(const struct isc_node_target *node,
                                const struct isc_launcher_opts *opts, const char *local_dir,
                                int which, struct isc_err *err);
int isc_launcher_push_artifacts(const struct isc_node_target *node,
                                const struct isc_launcher_opts *opts, const char *local_dir,
                                struct isc_err *err);

/* Following a running cluster: each rank's output into <output_dir>/rank_N.txt, and its exit code.
 */
struct isc_launch_follow;
int isc_launch_follow_start(const struct isc_boot_spec *spec, const struct isc_node_target *nodes,
                            size_t n, const struct isc_launcher_opts *opts, const char *output_dir,
                            struct isc_launch_follow **out, struct isc_err *err);
/* 1 and *code once the rank's container has exited; 0 while it runs or is unknown. */
int isc_launch_follow_rank_exit(struct isc_launch_follow *f, int rank, int *code);
/* Stops following (the containers keep running) and frees. */
void isc_launch_follow_free(struct isc_launch_follow *f);

#endif
