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

/*
 * What the burst broker notes between steps and must keep across a restart of iscd
 * (the migration of issue 30), so that a restart changes no decision:
 * - why a waiting burst waits (queue/burst.h's enum isc_burst_wait as an integer):
 *   the waiting order's input, so credits lines and places in them survive;
 * - the shapes excluded for the rest of a burst's placement round;
 * - the periodic artifact sync clocks of clusters (the last sync of checkpoints and
 *   crud, and of the lossy folder).
 */
int isc_store_burst_wait_put(struct isc_store *s, const char *experiment_id, int why,
                             struct isc_err *err);
/* *why 0 (ISC_BURST_WAIT_NONE) when nothing is noted. */
int isc_store_burst_wait_get(struct isc_store *s, const char *experiment_id, int *why,
                             struct isc_err *err);
/* The bursts with a note (waits or exclusions); caller frees each id, then the array. */
int isc_store_burst_noted(struct isc_store *s, char ***ids, size_t *n, struct isc_err *err);
/* Forgets the burst's wait and exclusions. */
int isc_store_burst_forget(struct isc_store *s, const char *experiment_id, struct isc_err *err);

int isc_store_shape_exclude(struct isc_store *s, const char *experiment_id, const char *shape_id,
                            struct isc_err *err);
int isc_store_shape_excluded(struct isc_store *s, const char *experiment_id, const char *shape_id,
                             int *excluded, struct isc_err *err);
/* Every exclusion of the experiment, or of every experiment when experiment_id is NULL. */
int isc_store_shape_exclusions_clear(struct isc_store *s, const char *experiment_id,
                                     struct isc_err *err);

/* *found 0 when the cluster's clock has not started. */
int isc_store_sync_clock_get(struct isc_store *s, const char *cluster_id,
                             int64_t *checkpoints_at_ms, int64_t *lossy_at_ms, int *found,
                             struct isc_err *err);
int isc_store_sync_clock_put(struct isc_store *s, const char *cluster_id, int64_t checkpoints_at_ms,
                             int64_t lossy_at_ms, struct isc_err *err);
/* The clock of one cluster; with cluster_id NULL, of every cluster that is closed. */
int isc_store_sync_clock_forget(struct isc_store *s, const char *cluster_id, struct isc_err *err);

#endif
