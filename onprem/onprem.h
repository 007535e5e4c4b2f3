/*
 * On-prem execution: iscd runs cycle and interruptible experiments (and, with
 * burst_validation on, a burst's validation cycle) on the operator's node pool.
 * The queue module (queue/) decides what starts and stops; this module carries
 * the decisions out over SSH with the launcher (pool key pair, pinned host
 * keys), follows output into rank_N.txt, keeps artifacts between runs and
 * records statuses in the store. See docs/queue.md.
 *
 * The tick never blocks on the network: boots, stops and node probes run in
 * worker threads; the tick starts them and applies what they found.
 */
#ifndef ISC_ONPREM_ONPREM_H
#define ISC_ONPREM_ONPREM_H

#include "common/err.h"
#include "store/store.h"

struct isc_onprem;

/*
 * Borrows the store (the main thread's connection) for the executor's life;
 * reads config.toml from the store's home and loads the pool and the queued
 * experiments. Runs a previous iscd left behind are stopped and requeued.
 */
int isc_onprem_new(struct isc_store *store, struct isc_onprem **out, struct isc_err *err);
/* Waits for the workers (a stop in progress finishes) and frees. */
void isc_onprem_free(struct isc_onprem *o);

/* One pass: apply what workers found, read the pool and new work, decide, act. */
int isc_onprem_tick(struct isc_onprem *o, struct isc_err *err);

/*
 * The pool's public key (an authorized_keys line), its key pair made under
 * home's keys on first use: what iscd logs in to pool nodes with and what
 * `isc nodes pubkey` prints. Safe against a concurrent first use. Caller frees.
 */
int isc_onprem_pool_pubkey(const char *home, char **pub, struct isc_err *err);

#endif
