/*
 * The broker: the state machine of every burst experiment, driven by ticks
 * of iscd. See docs/broker.md for the states, transitions and invariants.
 */
#ifndef ISC_BROKER_BROKER_H
#define ISC_BROKER_BROKER_H

#include "common/err.h"
#include "store/store.h"

struct isc_broker;

/* Borrows the store for the broker's life; reads config.toml from the store's home. */
int isc_broker_new(struct isc_store *store, struct isc_broker **out, struct isc_err *err);
void isc_broker_free(struct isc_broker *b);

/* The configured tick interval (config.toml tick_interval_ms, default 2000). */
long isc_broker_tick_interval_ms(const struct isc_broker *b);

/*
 * Overrides the tick interval (iscd --interval-ms). Refused when the tick is
 * longer than the reservation window (see isc_config_check_tick).
 */
int isc_broker_set_tick_interval_ms(struct isc_broker *b, long ms, struct isc_err *err);

/*
 * Makes this process a replica of the store (docs/ha.md): registers it ("rep_"
 * + hex, host name, pid) and starts its heartbeat thread, which renews the
 * replica's row and leases every lease_ms/4. From then on a burst is stepped only
 * under its lease. On a store only one iscd can use (SQLite, behind the pid lock)
 * every other registered replica is dead: forgotten with its leases, so a restart
 * resumes at once. Refused, naming artifact_root and docs/ha.md, when another
 * replica is live and artifact_root is unset. isc_broker_free removes the row and
 * gives the leases up (a clean stop).
 */
int isc_broker_replica_start(struct isc_broker *b, struct isc_err *err);
/* This replica's id, or NULL before isc_broker_replica_start. */
const char *isc_broker_replica_id(const struct isc_broker *b);

/* One pass: watch the clouds, advance experiments, meter, reconcile. */
int isc_broker_tick(struct isc_broker *b, struct isc_err *err);

/*
 * Where the ticks' time went so far, for iscd's "tick stats" at its stop: one
 * line, each phase of isc_broker_tick (watch: the describes and what they
 * record; followers; meter; prices; steps: choosing and starting the steps,
 * which run on worker threads) with its mean and max in ms. Empty before the
 * first tick.
 */
void isc_broker_tick_phases(const struct isc_broker *b, char *out, size_t cap);

#endif
