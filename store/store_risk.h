/*
 * The risk of losing a burst's nodes, as fetched (issue 43, docs/shapes.md
 * "Risk sources"): one row per fact a source gave for a (provider, region,
 * zone, instance type, market) and, where the source answers for a gang size,
 * that size. The broker fetches (prices/risk.c), the catalog reads them all
 * at load and the ranking combines them; each row keeps when it was fetched so
 * `isc shapes` can show its age and a stale row can be told apart.
 */
#ifndef ISC_STORE_RISK_H
#define ISC_STORE_RISK_H

#include "common/err.h"

#include <stddef.h>
#include <stdint.h>

struct isc_store;

/* Sources, as stored. */
#define ISC_RISK_SPOT_ADVISOR "spot-advisor"        /* AWS: interruption band */
#define ISC_RISK_PLACEMENT    "placement-score"     /* AWS: GetSpotPlacementScores */
#define ISC_RISK_OCI_CAPACITY "oci-capacity"        /* OCI: CreateComputeCapacityReport */
#define ISC_RISK_GCP_ADVICE   "gcp-capacity-advice" /* GCP: advice.capacity */
#define ISC_RISK_HISTORY      "history"             /* this broker's interruptions, 30 days */

struct isc_risk_fact {
	char *provider, *region;
	char *zone;          /* "" for a whole region */
	char *instance_type; /* the provider's spelling */
	char *market;        /* "spot", "ondemand", or "" for both */
	char *source;        /* ISC_RISK_* */
	int target;          /* the gang size asked about (scores, capacity); 0 otherwise */
	/*
	 * spot-advisor: the band's upper bound in percent per month ("max" of its range);
	 * placement-score: 1..10; oci-capacity: availableCount; gcp: obtainability x 1000;
	 * history: interruptions seen in the window.
	 */
	int64_t value;
	/* spot-advisor: the band index; history: node-seconds run in the window; else 0. */
	int64_t value2;
	char *detail; /* "<5%", "AVAILABLE", "OUT_OF_HOST_CAPACITY", ... */
	int64_t fetched_ms;
};

void isc_risk_fact_cleanup(struct isc_risk_fact *f);
void isc_risk_fact_list_free(struct isc_risk_fact *list, size_t n);

/*
 * Writes facts (insert or replace by their key), in one transaction. With
 * replace_source, every stored fact of that source goes first (the history is
 * recomputed whole: a shape no longer run in the window has no record left).
 */
int isc_store_risk_put(struct isc_store *s, const char *replace_source,
                       const struct isc_risk_fact *facts, size_t n, struct isc_err *err);
/*
 * The facts' version: a number that changes with every isc_store_risk_put (a random
 * one, so two stores never share a version by counting alike), 0 for a store that was
 * never written. Readers that keep the facts read them again when it changes.
 */
int isc_store_risk_version(struct isc_store *s, int64_t *out, struct isc_err *err);

/* Every stored fact, sorted by provider, region, instance type. */
int isc_store_risk_list(struct isc_store *s, struct isc_risk_fact **out, size_t *n,
                        struct isc_err *err);
/*
 * This broker's own history since since_ms: per (shape, zone) of a cluster, the
 * interruptions the broker recorded (events of kind "interrupted" while the
 * cluster was open) and the node-seconds its clusters of that shape ran in the
 * window, as facts of source "history" (fetched_ms = now_ms). Shapes run without
 * an interruption are there too, with value 0: a clean record counts.
 */
int isc_store_risk_history(struct isc_store *s, int64_t since_ms, int64_t now_ms,
                           struct isc_risk_fact **out, size_t *n, struct isc_err *err);

#endif
