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

/* 1 when an iscd runs for home (*pid, may be NULL, gets its pid), else 0. */
int isc_daemon_running(const char *home, long *pid);

/*
 * isc_daemon_running, asked again every 100 ms for up to wait_ms: a daemon
 * started a moment ago (`iscd & isc burst --wait`) has time to write its pid.
 */
int isc_daemon_wait_running(const char *home, long wait_ms, long *pid);

#endif
