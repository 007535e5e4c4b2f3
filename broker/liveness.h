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
