/*
 * The log shipper (issue 45): the rank logs that follows write (launcher/follow.c,
 * through the isc_log_sink it gives) go to the store as rows (store_ranklogs.h), so
 * the API of every replica reads them without a shared folder.
 *
 * A follow's thread never waits on the store: append copies the bytes into the
 * rank's buffer and returns. One thread of the shipper, with a store connection of
 * its own (store/db.h: a connection is one thread's at a time), writes every
 * buffer once a second (sooner when one holds ISC_LOGSHIP_BATCH bytes), all in one
 * transaction, a row per rank and batch: a rank printing 100 lines a second costs
 * one row a second, and the broker's tick shares neither thread nor connection
 * with it. Offsets are the shipper's: it starts each rank's log where the store's
 * ends.
 *
 * Bounds: an experiment's logs in the store stop at experiment_log_max_bytes (each
 * rank whose output is cut then gets one marker line saying so); a rank whose
 * buffer holds ISC_LOGSHIP_BACKLOG bytes the store has not taken yet (the store is
 * out of reach) drops what comes next, and a marker says how much once it catches
 * up. A hostile node printing without end grows neither the store nor memory
 * without bound.
 */
#ifndef ISC_BROKER_LOGSHIP_H
#define ISC_BROKER_LOGSHIP_H

#include "common/err.h"
#include "launcher/launcher.h"

#include <stdint.h>

#define ISC_LOGSHIP_BATCH   (64 * 1024)   /* a buffer this full is written at once */
#define ISC_LOGSHIP_BACKLOG (1024 * 1024) /* per rank: beyond this, output is dropped */

struct isc_logship;

/*
 * Opens its own connection to home's store and starts its thread. exp_cap: the
 * bytes an experiment's logs may hold in the store (0: no cap); interval_ms: how
 * often the buffers are written (0: 1000).
 */
int isc_logship_new(const char *home, uint64_t exp_cap, long interval_ms, struct isc_logship **out,
                    struct isc_err *err);
/* Writes what is buffered and stops the thread. */
void isc_logship_free(struct isc_logship *ls);
/* The sink for isc_launcher_opts.log_sink; valid until isc_logship_free. */
const struct isc_log_sink *isc_logship_sink(struct isc_logship *ls);
/* Writes every buffer now and returns once written (0), or the store's error (the
 * broker, once a cluster's follows stopped; tests). */
int isc_logship_flush(struct isc_logship *ls, struct isc_err *err);
/* Rows and bytes written since the start (measurements, tests). */
void isc_logship_stats(struct isc_logship *ls, uint64_t *rows, uint64_t *bytes);

#endif
