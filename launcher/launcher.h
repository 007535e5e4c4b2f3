/*
 * The launcher: boots an experiment's container on every node of a cluster
 * over SSH, in parallel (one thread per node, so a slow node never holds up
 * the others), stops them with a grace period, and follows their output and
 * exit codes. See docs/launcher.md.
 */
#ifndef ISC_LAUNCHER_LAUNCHER_H
#define ISC_LAUNCHER_LAUNCHER_H

#include "common/err.h"
#include "launcher/pace.h"
#include "launcher/ssh.h"

#include <stddef.h>
#include <stdint.h>

/* One object a burst node fetches for a dataset (datasets/datasets.h makes them). */
struct isc_boot_dataset_file {
	const char *url;    /* presigned GET: a bearer credential for one object; never logged */
	const char *etag;   /* sent as If-Match: S3 refuses other bytes */
	const char *sha256; /* the node checks the bytes against it */
	const char *path;   /* where the object goes under the dataset's root; "" for an archive */
	int archive; /* 0: a file; 1: a tar (any compression); 2: a zip: expanded at the root */
};

/*
 * A dataset the node fetches itself, once per node, into /data/.isc/<copy_name>;
 * or, with on_node (and no files), one already put there by
 * isc_launcher_push_dataset (on-prem: iscd's cached copy), which the boot only
 * checks is present.
 */
struct isc_boot_dataset {
	const char *copy_name;
	const struct isc_boot_dataset_file *files;
	size_t n_files;
	int on_node;
};

struct isc_boot_spec {
	const char *experiment_id;
	const char *experiment_name;
	const char *compute_mode;
	int cycle_count;     /* STRONG_CYCLE_COUNT */
	long cycle_time_ms;  /* STRONG_CYCLE_TIME_MS (0 for burst: no cycle limit) */
	const char *command; /* run as bash -lc COMMAND in the container (quoted, never parsed) */
	const char *image;
	const char *const *dataset_ids; /* mounted read-only at /data/<id> */
	size_t n_datasets;
	int nnodes, nproc;
	int master_port; /* 0: 29500 */
	/* --shm-size, e.g. "16g"; NULL or "": half the node's RAM, read on the node */
	const char *shm_size;
	/*
	 * The fabric the shape promises between its nodes (ISC_FABRIC_*): every node
	 * checks for its devices before its container starts and reports what it found
	 * (struct isc_boot_result.fabric). With fabric_required (a gang of several
	 * nodes), a node without them fails the boot with ISC_ECAPACITY before
	 * anything is pulled: the next shape may have them.
	 */
	int fabric;
	int fabric_required;
	/*
	 * The image's aws-ofi-nccl plugin version ("1.5", "1.6.0", ...) for the EFA
	 * variables it needs; NULL or "": 1.7 or later, which needs none.
	 */
	const char *efa_plugin_version;
	/*
	 * NULL: /data/<id> on the node is mounted as it is (a shared copy the node
	 * sees). Else one entry per dataset_ids: the node fetches, verifies and
	 * expands it before the container starts, and the copy is mounted read-only.
	 */
	const struct isc_boot_dataset *dataset_fetch;
};

/* What a shape promises between its nodes. */
enum {
	ISC_FABRIC_NONE = 0, /* TCP on the node's interface only */
	ISC_FABRIC_EFA = 1,  /* AWS Elastic Fabric Adapter: /dev/infiniband/uverbs* */
	ISC_FABRIC_RDMA = 2, /* RDMA NICs (OCI cluster networks): /dev/infiniband/uverbs* */
};
/* "none", "efa", "rdma" */
const char *isc_fabric_name(int fabric);

struct isc_node_target {
	int rank;         /* unique in a boot; exactly one node has rank 0 */
	const char *host; /* where to connect (public address, else private) */
	int port;
	const char *private_ip; /* MASTER_ADDR / IP_TO_RANK_MAPPING */
	const char
	    *pin_target;  /* host keys are pinned under this (the instance id); NULL: host:port */
	const char *user; /* login user of this node; NULL: the opts' user (on-prem nodes differ) */
};

/*
 * Where a follow's rank logs go besides <output_dir>/rank_N.txt (issue 45): the
 * broker's sink writes them to the store (broker/logship.c). Called from the
 * ranks' threads: open once per rank's follow, append for every byte the file
 * gets (markers included), close at its end. open gives a handle (NULL: this rank
 * is not sent to the sink) and what the sink's copy holds already (*bytes, and its
 * last byte), so a follow on another replica knows the log had output before it.
 * append never blocks on the network: the sink buffers, and its own thread writes.
 */
struct isc_log_sink {
	void *(*open)(void *ctx, const char *experiment_id, int rank, uint64_t *bytes, char *last);
	void (*append)(void *handle, const char *data, size_t len);
	void (*close)(void *handle);
	void *ctx;
};

struct isc_launcher_opts {
	const char *user;         /* NULL: "root" */
	const char *key_path;     /* the private key file (keys.h), when key_pem is NULL */
	long connect_deadline_ms; /* per node, from the start of the call, while it boots */
	long command_timeout_ms;  /* per remote command but the image's pull; 0: none */
	isc_ssh_hostkey_fn
	    check; /* host-key pinning; called from the node threads, one at a time */
	void *check_ctx;
	/* Caps on what a node sends home (docs/security.md); 0 for each: no cap. */
	uint64_t artifact_max_bytes;         /* one artifact pull, sum of file sizes */
	uint64_t artifact_max_entries;       /* one artifact pull, archive members */
	uint64_t log_max_bytes;              /* each rank_N.txt */
	const struct isc_log_sink *log_sink; /* optional: follows also write there */
	uint64_t min_free_bytes;             /* pulls and logs stop short of this much free disk */
	/*
	 * Every artifact pull and push and every dataset shipment (issue 42): a total
	 * deadline and a minimum throughput (launcher/pace.h; zeros: the built-in
	 * defaults, which are config.toml's). A transfer that breaks one fails with
	 * ISC_EIO naming the rank, the node and the limit; it is not retried.
	 */
	struct isc_pace_limits transfer;
	/*
	 * Optional: once non-zero, an artifact push or pull stops retrying a node, a
	 * transfer under way ends within about 100 ms, and a connect still waiting for
	 * it gives up (ISC_ETRANSIENT): the caller knows the node is gone
	 * (broker/liveness.h) or no longer wants the transfer (a cancelled experiment,
	 * a worker given to another organisation), so nothing waits on it. A boot
	 * treats it as its own first failure (the nodes still connecting give up; it
	 * may also set it to 1 itself).
	 */
	volatile int *cancel;
	/*
	 * Optional, n entries: a boot starts only the nodes with only[i] set. The others'
	 * ranks and addresses still make every started rank's environment (MASTER_ADDR,
	 * IP_TO_RANK_MAPPING): a gang's kept nodes start while its new nodes boot, and
	 * wait for them in the rendezvous. NULL: every node.
	 */
	const int *only;
	/*
	 * The cluster's private key opened from the store (keys.h, issue 45): logins read
	 * it from memory (libssh2's from-memory API), so it is never on disk. NULL:
	 * key_path.
	 */
	const char *key_pem;
	size_t key_pem_len;
	/*
	 * The image's pull (issue 46), judged by progress: it stops when the node printed
	 * nothing for image_pull_stall_ms, or after image_pull_max_ms in all. 0: the
	 * defaults, 120000 and 3600000 (config.toml's).
	 */
	long image_pull_stall_ms;
	long image_pull_max_ms;
};

/* What happened on one node during isc_launcher_boot_nodes. */
struct isc_boot_result {
	int rank;
	int rc;              /* 0, or this node's isc_code */
	int started;         /* its container was started (after a failed boot: and removed) */
	int rolled_back;     /* the cleanup (docker rm -f) ran on this node */
	long handshake_ms;   /* until the SSH handshake and host-key check were done; -1 if never */
	long connect_ms;     /* until logged in; -1 if never */
	long total_ms;       /* until this node's boot finished or failed */
	long pull_ms;        /* the image's docker pull; -1 if it never finished */
	char key_type[32];   /* host key seen ("" if the node never answered) */
	char key_sha256[65]; /* its SHA-256, lowercase hex */
	/* The node's fabric check, one line ("" if it never ran): docs/launcher.md, "The node" */
	char fabric[384];
	struct isc_err err; /* this node's own error (rc != 0), without the rank prefix */
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

/*
 * isc_launcher_boot with a report per node: results (n entries, may be NULL)
 * receives every node's outcome, in the order of nodes. When one node fails,
 * nodes still waiting to connect give up at once (their rc is ISC_ETRANSIENT,
 * "connecting cancelled"); nodes whose boot script already runs finish it, so
 * the rollback cannot race a late docker run. The returned error is the first
 * failing node's, prefixed with "rank N (host): ".
 */
int isc_launcher_boot_nodes(const struct isc_boot_spec *spec, const struct isc_node_target *nodes,
                            size_t n, const struct isc_launcher_opts *opts,
                            struct isc_boot_result *results, struct isc_err *err);

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
 * /mnt/lossy) of a node into local_dir (pull), or local_dir's folders back
 * onto a node (push), as a tar stream over the SSH channel, in pieces: memory
 * stays flat whatever the size.
 *
 * A pull unpacks in-process into a fresh folder under local_dir (removing
 * those an earlier pull cut short left: one pull per local_dir at a time) with the
 * caps of opts (artifacts/unpack.h: links, devices, "..", absolute names are
 * refused and counted in report, which may be NULL), then swaps each folder
 * that arrived into place; on any error the previous copy stays whole.
 * A push is tried up to 3 times while the node is unreachable or the
 * connection drops; an error means the node did not get the artifacts.
 */
/*
 * One SSH session to a node for a transfer: the node's user (else opts->user, else root),
 * the cluster key from memory (opts->key_pem) or a file (opts->key_path), its pinned host
 * key, opts->cancel; 15 s to connect. Every node-side transfer (boot.c, s3node.c) logs in
 * here, so a change of how keys are held reaches them all.
 */
struct isc_ssh;
int isc_launcher_connect(const struct isc_node_target *node, const struct isc_launcher_opts *opts,
                         struct isc_ssh **ssh, struct isc_err *err);

struct isc_unpack_report;
int isc_launcher_pull_artifacts(const struct isc_node_target *node,
                                const struct isc_launcher_opts *opts, const char *local_dir,
                                int which, struct isc_unpack_report *report, struct isc_err *err);
int isc_launcher_push_artifacts(const struct isc_node_target *node,
                                const struct isc_launcher_opts *opts, const char *local_dir,
                                struct isc_err *err);
/*
 * The same push onto every node at once, one thread per node, each retried on
 * its own as above: every rank starts from the same folders (on the platform
 * they are one folder all nodes share). rcs (n entries, may be NULL) receives
 * each node's outcome in the order of nodes. The error names the first node
 * that did not get them ("rank N (host): ..."), and how many failed.
 */
int isc_launcher_push_artifacts_all(const struct isc_node_target *nodes, size_t n,
                                    const struct isc_launcher_opts *opts, const char *local_dir,
                                    int *rcs, struct isc_err *err);

/*
 * Puts a dataset's cached copy (the folder local_copy, regular files and
 * folders only) on a node as /data/.isc/<copy_name>, read-only, as a tar
 * stream over the SSH channel (memory flat whatever the size), unless the node
 * already has it intact: the node's listing of the copy (every file's path
 * and size, `find -printf '%P %s'` sorted, SHA-256) matches the local one,
 * and so does the stamp /data/.isc/<copy_name>.stamp written after the last
 * complete shipment. It lands in a private .part folder first and is renamed
 * into place only whole. *shipped: 1 when bytes were sent, 0 when the node
 * had the copy. Tried up to 3 times while the node is unreachable.
 */
int isc_launcher_push_dataset(const struct isc_node_target *node,
                              const struct isc_launcher_opts *opts, const char *local_copy,
                              const char *copy_name, int *shipped, struct isc_err *err);

/* Following a running cluster: each rank's output into <output_dir>/rank_N.txt, and its exit code.
 */
struct isc_launch_follow;
int isc_launch_follow_start(const struct isc_boot_spec *spec, const struct isc_node_target *nodes,
                            size_t n, const struct isc_launcher_opts *opts, const char *output_dir,
                            struct isc_launch_follow **out, struct isc_err *err);
/*
 * 1 and *code once the rank's container has exited; 0 while it runs or is unknown.
 * Code -1: the container vanished (removed by someone else), so its code is unknown.
 */
int isc_launch_follow_rank_exit(struct isc_launch_follow *f, int rank, int *code);

struct isc_rank_exit {
	int rank;
	int code; /* the container's exit code; 128+signal when killed; -1 unknown (vanished) */
};
/*
 * For the broker's tick: fills out (room for cap) with every rank that has
 * exited so far, in the order of the nodes given to _start, and returns how many
 * did (which may exceed cap). Never blocks on the network.
 */
size_t isc_launch_follow_poll(struct isc_launch_follow *f, struct isc_rank_exit *out, size_t cap);
/*
 * Asks every rank's thread to stop following, without waiting: a process that
 * stops many follows cancels them all first, so their SSH sessions close side by
 * side, then frees each (which waits for its threads).
 */
void isc_launch_follow_cancel(struct isc_launch_follow *f);
/* Stops following (the containers keep running) and frees. */
void isc_launch_follow_free(struct isc_launch_follow *f);
/*
 * A boot replaced the container: a later follow of its log no longer goes on
 * where an earlier follow of this process stopped (follow.c keeps that per log).
 */
void isc_launch_follow_forget(const char *container_name);

#endif
