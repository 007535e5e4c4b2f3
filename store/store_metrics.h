/*
 * What the metrics read from the store at scrape (common/metrics.h, docs/metrics.md):
 * one query of counts, so a scrape costs one round trip however many bursts there are.
 */
#ifndef ISC_STORE_STORE_METRICS_H
#define ISC_STORE_STORE_METRICS_H

#include "common/err.h"
#include "store/store.h"

#include <stddef.h>
#include <stdint.h>

enum isc_store_count_kind {
	ISC_COUNT_BURST_STATE,    /* key: a burst's status */
	ISC_COUNT_QUEUED_MODE,    /* key: a compute mode, of experiments enqueued or waiting */
	ISC_COUNT_LIVE_INSTANCES, /* key: a provider, of nodes not known terminated */
};

struct isc_store_count {
	enum isc_store_count_kind kind;
	char key[48];
	int64_t n;
};

/* The counts, in one statement; *out is the caller's to free(). */
int isc_store_metrics_counts(struct isc_store *s, struct isc_store_count **out, size_t *n,
                             struct isc_err *err);

/*
 * From an experiment's timeline, before it is recorded running again: whether it ran
 * before (*ran_before: 1 or 0), and when it was first interrupted since it last ran
 * (*interrupted_ms, its event's time; 0 when it was not).
 */
int isc_store_metrics_run_history(struct isc_store *s, const char *experiment_id,
                                  int64_t *ran_before, int64_t *interrupted_ms,
                                  struct isc_err *err);

#endif
