/*
 * What iscd's on-prem queue knows of an experiment (table queue_state,
 * migration 10): its place among the waiting experiments of its mode, the
 * expected next start, the pool nodes of its current run and the cycles it ran
 * to their end. iscd writes it every tick; isc status reads it; iscd reads it
 * back when it restarts (docs/queue.md).
 */
#ifndef ISC_STORE_STORE_QUEUE_H
#define ISC_STORE_STORE_QUEUE_H

#include "store/store.h"

#include <stdint.h>

struct isc_queue_row {
	char *experiment_id;
	int position;          /* 1-based among waiting experiments of its mode; 0: not waiting */
	int64_t next_start_ms; /* -1: not waiting, or unknown */
	char *run_nodes;       /* pool node ids of the current run, comma-separated; "" */
	int cycles_done;
	int64_t updated_ms;
};

/* Writes (inserts or replaces) the row of r->experiment_id. */
int isc_store_queue_put(struct isc_store *s, const struct isc_queue_row *r, struct isc_err *err);
/* The row of one experiment; ISC_ENOTFOUND when the queue never had it. */
int isc_store_queue_get(struct isc_store *s, const char *experiment_id, struct isc_queue_row *out,
                        struct isc_err *err);
void isc_queue_row_cleanup(struct isc_queue_row *r);

#endif
