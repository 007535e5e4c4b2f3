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

/* One pass: watch the clouds, advance experiments, meter, reconcile. */
int isc_broker_tick(struct isc_broker *b, struct isc_err *err);

#endif
