/*
 * Is an iscd running for this store? The CLI asks before it waits on the
 * daemon (isc burst --wait, isc logs --follow), so nothing waits in silence
 * for a daemon that is not there. iscd holds an flock on $ISC_HOME/iscd.lock
 * for its life and writes its pid into that file; the probe reads the pid and
 * looks the process up in /proc instead of taking the lock itself, so a probe
 * can never make a starting iscd believe another one runs.
 *
 * When `isc` becomes a client of iscd's HTTP API, "no iscd" is a refused
 * connection there; callers should keep asking through this one function.
 */
#ifndef ISC_BROKER_LIVENESS_H
#define ISC_BROKER_LIVENESS_H

#include <stddef.h>
#include <stdint.h>

/* 1 when an iscd runs for home (*pid, may be NULL, gets its pid), else 0. */
int isc_daemon_running(const char *home, long *pid);

/*
 * isc_daemon_running, asked again every 100 ms for up to wait_ms: a daemon
 * started a moment ago (`iscd & isc burst --wait`) has time to write its pid.
 */
int isc_daemon_wait_running(const char *home, long wait_ms, long *pid);

/*
 * Is a cloud node still there? The broker's steps ask before they wait on a
 * node (an SSH retry, a restore, a boot), so a step never waits on one the
 * watch has already seen go (docs/broker.md, "Interruptions").
 */
struct isc_node;
struct isc_err;

/* 1 when the watch has seen the node going or gone: shutting-down, terminated, stopping, stopped.
 */
int broker_node_gone(const struct isc_node *n);

/* 1 when the node runs and has an address to reach it at. */
int broker_node_up(const struct isc_node *n);

/*
 * Lost nodes (issue 32): which of a gang's n nodes (rows ordered by rank, rank i at
 * index i) are lost, into lost[n], and which kept node takes rank 0 when rank 0 is
 * lost (*remap, its old rank; -1 when rank 0 is kept or nothing is). A node is lost
 * with an interruption notice, or when it is neither running nor (in a gang whose
 * ranks never ran, `ran` 0) still pending. Rank 0 (MASTER_ADDR) goes to the lowest
 * kept rank whose node is up, so it is never a node still booting while a kept one
 * runs (issue 48); when no kept node is up yet, to the lowest kept rank. Returns how
 * many are lost.
 */
size_t broker_lost_ranks(const struct isc_node *nodes, size_t n, int ran, int *lost, int *remap);

/*
 * The family a shape's nodes boot as (issue 46): "metal", "gpu" or "vm", from the instance
 * type as each cloud names it (EC2 `*.metal` sizes and the p/g/trn/inf/dl families; Compute
 * Engine a2/a3/a4/g2; OCI BM.* and VM.GPU*). The mock cloud's timing model draws each
 * family's launch-to-SSH time from the clouds' published figures (docs/mock-cloud.md).
 */
const char *broker_boot_family(const char *provider, const char *instance_type);

/*
 * Stragglers (issue 46): which of a gang's n nodes still boot (pending) while the others
 * run, once deadline_ms has passed since the launch (created_at_ms; now_ms the time now):
 * into straggling[n], and how many. 0 when none runs yet (the gang as a whole is not late
 * for its slowest node: boot_deadline_ms is its limit) or the deadline has not passed.
 */
size_t broker_stragglers(const struct isc_node *nodes, size_t n, int64_t created_at_ms,
                         int64_t now_ms, long deadline_ms, int *straggling);

/*
 * Is a node that does not answer in its pull stage? (issue 46) A node's boot pulls the
 * image and fetches the dataset before its container runs: minutes on a fresh node
 * (docs/mock-cloud.md, "Timing model": 27.5 s per GB). `stage` is what the node says it is
 * doing ("pull REF START_MS EXPECTED_MS", "fetch START_MS EXPECTED_MS", as the mock nodes'
 * DIR/stage and a boot's progress lines say it); returns 1 while that stage is under way
 * and not overdue by more than twice its expected length, so such a node is not called
 * dead; 0 otherwise (no stage, unreadable, or overdue).
 */
int broker_node_in_pull_stage(const char *stage, int64_t now_ms);

/*
 * How long a cloud's interruption notice lasts, in ms (issue 46): AWS two minutes (EC2
 * "Spot Instance interruption notices"), GCP 30 s (Spot VMs' ACPI soft off), OCI none to
 * count on (a preemptible instance is reclaimed "at any time"): 0. Unknown providers: 0.
 */
long broker_notice_ms(const char *provider);

/*
 * Can a node still be reached for its folders? Running, or (GCP) stopping in the notice's
 * ACPI soft-off window: the node got its notice (notice_at_ms) less than the provider's
 * notice ago, and its sshd is still up while Compute shows it STOPPING (issue 46).
 */
int broker_node_reachable_in_notice(const struct isc_node *n, const char *provider, int64_t now_ms);

/*
 * Whether the drain of a cluster losing rank 0 must come before the replacement's launch
 * (issue 46): when the cloud's launch call waits for the boot (GCP's bulkInsert operation,
 * about a node's boot) or its notice is shorter than launch_ms (what a launch call may take),
 * rank 0 would be gone before a drain after the launch reached it, and its final
 * checkpoint with it.
 */
int broker_drain_first(const char *provider, long launch_ms);

/*
 * A watcher of some nodes of one cluster while a step talks to them: a thread
 * with its own store connection reads the nodes' rows (what the watch wrote)
 * every 100 ms and sets *gone to 1 as soon as one of them is gone, which the
 * launcher's retry loops and connects read as "give up now" (the opts' cancel).
 * Stopping it joins the thread. A watcher that cannot start leaves *gone alone
 * (the step then runs as before, bounded by its own deadlines).
 */
struct broker_node_watch;
int broker_node_watch_start(const char *home, const char *cluster_id,
                            const char *const *instance_ids, size_t n, volatile int *gone,
                            struct broker_node_watch **out, struct isc_err *err);
void broker_node_watch_stop(struct broker_node_watch *w);

#endif
