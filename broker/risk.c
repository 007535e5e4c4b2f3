/*
 * The scheduled risk refresh (issue 43, prices/risk.h): while bursts that rank by
 * expected cost (burst_rank = "expected") may be placed, at most once an hour, the
 * clouds are asked about the first candidates of each (the
 * Spot Advisor's bands, GetSpotPlacementScores for the gang's size, OCI capacity
 * reports) and this broker's own interruption history is recounted.
 *
 * Why hourly and why the same questions: GetSpotPlacementScores is free, but AWS "can
 * limit the number of new request configurations within a 24-hour period" (EC2 User
 * Guide, "Spot placement score", Limitations) while a configuration already used may be
 * retried; one question per (region, gang size) with the region's candidate types keeps
 * the configurations few and the same from hour to hour. The Spot Advisor's data is a
 * monthly figure: an hour is more than fresh enough.
 */
#include "broker/broker_int.h"

#include "common/log.h"
#include "prices/risk.h"
#include "shapes/catalog.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define RISK_EVERY_MS   (3600LL * 1000)
#define RISK_CANDIDATES 10 /* per burst: the ones placement would try first */

static int may_place(const char *status)
{
	return !strcmp(status, "enqueued") || !strcmp(status, "placing") ||
	       !strcmp(status, "waiting") || !strcmp(status, "running");
}

/*
 * A burst whose placement reads the risk: burst_rank = "expected". The other modes never
 * read it, so a broker whose bursts rank by price or work asks the clouds nothing more.
 */
static int wants_risk(const struct isc_experiment *e)
{
	json_t *spec;
	int yes;
	if (strcmp(e->compute_mode, "burst") || !may_place(e->status))
		return 0;
	spec = json_loads(e->spec_json, 0, NULL);
	yes = spec && json_is_string(json_object_get(spec, "burst_rank")) &&
	      !strcmp(json_string_value(json_object_get(spec, "burst_rank")), "expected");
	json_decref(spec);
	return yes;
}

void broker_refresh_risk(struct isc_broker *b, int64_t now_ms)
{
	struct isc_experiment *active = NULL;
	struct isc_risk_target *targets = NULL;
	struct isc_risk_refresh_result res;
	struct isc_catalog *cat = NULL;
	struct isc_err err;
	size_t n = 0, nt = 0;

	if (b->risk_at_ms && now_ms - b->risk_at_ms < RISK_EVERY_MS)
		return;
	if (isc_store_experiment_list_active(b->store, &active, &n, &err)) {
		isc_log(ISC_LOG_WARN, "risk refresh: %s", err.msg);
		return;
	}
	for (size_t i = 0; i < n && !cat; i++)
		if (wants_risk(&active[i]) && isc_catalog_load(b->store, &cat, &err))
			isc_log(ISC_LOG_WARN, "risk refresh: %s", err.msg);
	if (!cat)
		goto out; /* nothing to place (or no catalog): nothing to ask */
	b->risk_at_ms = now_ms;
	for (size_t i = 0; i < n; i++) {
		struct broker_candidate *cands;
		size_t nc;
		if (!wants_risk(&active[i]) ||
		    broker_place_in(b, cat, &active[i], &cands, &nc, &err))
			continue;
		for (size_t k = 0; k < nc && k < RISK_CANDIDATES; k++)
			/* AWS's sources are about spot; OCI's report about any of its shapes */
			if ((cands[k].spot || strcmp(cands[k].provider, "aws")) &&
			    strcmp(cands[k].provider, "gcp") &&
			    isc_risk_targets_add(&targets, &nt, cands[k].provider, cands[k].region,
			                         cands[k].instance_type, cands[k].zones,
			                         cands[k].spot, cands[k].nnodes))
				break;
		broker_candidates_free(cands, nc);
	}
	if (isc_risk_refresh(b->store, b->config, targets, nt, now_ms, &res, &err))
		isc_log(ISC_LOG_WARN, "risk refresh: %s", err.msg);
	else
		isc_log(ISC_LOG_INFO,
		        "risk refresh: %zu question(s), %zu fact(s), %zu failed; history %zu",
		        res.calls, res.facts, res.failed, res.history);
out:
	isc_risk_targets_free(targets, nt);
	isc_catalog_free(cat);
	isc_experiment_list_free(active, n);
}
