/*
 * Each rank's exit code, recorded once, when the broker first sees it. The
 * experiment's outcome is every rank's (the first rank to fail with its code
 * names the failure), and `isc status` lists them.
 */
#ifndef ISC_STORE_STORE_RANKS_H
#define ISC_STORE_STORE_RANKS_H

#include "store/store.h"

struct isc_rank_outcome {
	char *cluster_id;
	int cycle; /* the cluster's cycle */
	int rank;
	int code;      /* the container's exit code; 128+signal when killed; -1 vanished */
	int64_t at_ms; /* when the broker first saw it */
};

/* Records rank's exit unless one is recorded already (*inserted says which; may be NULL). */
int isc_store_rank_exit_record(struct isc_store *s, const char *cluster_id, int rank, int code,
                               int *inserted, struct isc_err *err);
/* The experiment's rank exits by cycle, then in the order they were seen, then rank. */
int isc_store_rank_exit_list(struct isc_store *s, const char *experiment_id,
                             struct isc_rank_outcome **out, size_t *n, struct isc_err *err);
void isc_rank_outcome_list_free(struct isc_rank_outcome *list, size_t n);

#endif
