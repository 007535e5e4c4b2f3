/*
 * The risk of losing a burst's nodes, fetched and stored (issue 43): the broker asks
 * each cloud's driver (isc_provider.capacity: AWS Spot Advisor and
 * GetSpotPlacementScores, OCI CreateComputeCapacityReport) about the shapes it may
 * place, for the gang sizes it needs, and recomputes its own interruption history;
 * every answer goes to the store's risk_facts with when it was fetched, and the
 * ranking (shapes/catalog.c, mode "expected") combines them. Drivers know nothing of
 * the broker or the store: this module turns their answers into facts.
 */
#ifndef ISC_PRICES_RISK_H
#define ISC_PRICES_RISK_H

#include "common/err.h"
#include "config/config.h"
#include "store/store.h"

#include <stddef.h>
#include <stdint.h>

/* The window of the broker's own history. */
#define ISC_RISK_HISTORY_MS (30LL * 86400 * 1000)

/* One shape to ask about, for a gang of `nodes`. Owned strings (isc_risk_targets_free). */
struct isc_risk_target {
	char *provider, *region, *instance_type;
	char *zones; /* the shape's zones as stored, "a,b" (OCI ADs) */
	int spot;
	int nodes;
};

void isc_risk_targets_free(struct isc_risk_target *t, size_t n);
/* Adds a target unless the same (provider, region, type, market, nodes) is there. */
int isc_risk_targets_add(struct isc_risk_target **v, size_t *n, const char *provider,
                         const char *region, const char *instance_type, const char *zones, int spot,
                         int nodes);

struct isc_risk_refresh_result {
	size_t calls;   /* (provider, region, gang size) questions asked */
	size_t facts;   /* facts written */
	size_t none;    /* questions to a cloud without a capacity source (GCP: unknown) */
	size_t failed;  /* questions that failed; the last reason in last_error */
	size_t history; /* history facts written */
	char last_error[ISC_ERR_MSG_MAX];
};

/*
 * Asks the drivers about the targets, one question per (provider, region, gang size)
 * with every instance type of it (AWS scores a request of several types, not a type:
 * each type of the question gets its score), writes the answers and recomputes the
 * history. A question that fails is counted and skipped: the facts of its last answer
 * stay, with their age. Fails only on store errors.
 */
int isc_risk_refresh(struct isc_store *s, const struct isc_config *cfg,
                     const struct isc_risk_target *targets, size_t n, int64_t now_ms,
                     struct isc_risk_refresh_result *res, struct isc_err *err);

/*
 * Every shape of the store in a configured region (spot on AWS, all on OCI; GCP has no
 * source), each for the gang it needs for `gpus` GPUs (the layout rule; 0: one node).
 */
int isc_risk_targets_configured(struct isc_store *s, const struct isc_config *cfg, int gpus,
                                struct isc_risk_target **out, size_t *n, struct isc_err *err);

#endif
