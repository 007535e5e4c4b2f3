/*
 * Live prices on the broker's schedule. The spot candidates of every burst
 * that is still to be placed or may be placed again (enqueued, placing,
 * waiting, and running ones, which reprovision after an interruption) whose
 * price is older than price_refresh_ms are priced from the clouds' own price
 * APIs, batched per provider and region (prices/refresh.h). Only the first
 * few candidates of each experiment: those are what a placement will try.
 * The check runs when new work arrives, and otherwise at most once a minute
 * (or every price_refresh_ms when that is shorter), so a cloud that refuses
 * is not asked again every tick.
 *
 * The list-price sources (prices/lists.h: GCP's billing catalog, OCI's price
 * list, AWS's Price List) are read whole, each on its own schedule, whether
 * or not work is queued: when the last attempt (price_refreshes.tried_at_ms,
 * in the store, so a restart or another replica does not read it again) is
 * older than the source's interval, or, after a failure, older than a minute.
 */
#include "broker/broker_int.h"

#include "common/log.h"
#include "prices/lists.h"
#include "prices/refresh.h"
#include "store/store_shapes.h"
#include "shapes/catalog.h"

#include <string.h>

/* How many of an experiment's ranked candidates are priced. */
#define PRICED_CANDIDATES 5
/* The longest pause between two checks for stale candidate prices. */
#define CHECK_EVERY_MS 60000

static int may_place(const char *status)
{
	return !strcmp(status, "enqueued") || !strcmp(status, "placing") ||
	       !strcmp(status, "waiting") || !strcmp(status, "running");
}

/* A failed read is tried again after this, or after its interval when that is shorter. */
#define LIST_RETRY_MS 60000
/* How often the sources' schedules are looked at. */
#define LIST_CHECK_MS 1000

static void refresh_lists(struct isc_broker *b, int64_t now_ms)
{
	struct isc_price_refresh_row *rows = NULL;
	struct isc_err err;
	size_t n = 0;

	size_t enabled = 0;

	if (b->lists_checked_ms && now_ms - b->lists_checked_ms < LIST_CHECK_MS)
		return;
	b->lists_checked_ms = now_ms;
	for (size_t i = 0; i < isc_price_list_n_sources; i++)
		enabled += isc_price_source_enabled(b->config, isc_price_list_sources[i]) &&
		           isc_price_source_every_ms(b->config, isc_price_list_sources[i]) > 0;
	if (!enabled) /* no store read a second for nothing */
		return;
	if (isc_store_price_refresh_list(b->store, &rows, &n, &err)) {
		isc_log(ISC_LOG_WARN, "price refresh: %s", err.msg);
		return;
	}
	for (size_t i = 0; i < isc_price_list_n_sources; i++) {
		const char *src = isc_price_list_sources[i];
		long every = isc_price_source_every_ms(b->config, src);
		const struct isc_price_refresh_row *last = NULL;
		struct isc_price_list_result res;

		if (every <= 0 || !isc_price_source_enabled(b->config, src))
			continue;
		for (size_t k = 0; k < n && !last; k++)
			if (!strcmp(rows[k].source, src))
				last = &rows[k];
		if (last && last->error[0] && every > LIST_RETRY_MS)
			every = LIST_RETRY_MS;
		if (last && now_ms - last->tried_at_ms < every)
			continue;
		if (isc_prices_refresh_list(b->store, b->config, src, NULL, &res, &err)) {
			isc_log(ISC_LOG_WARN, "price refresh %s: %s", src, err.msg);
			continue;
		}
		if (!res.failed)
			isc_log(
			    ISC_LOG_INFO,
			    "price refresh %s: %zu shape(s) priced, %zu moved, %zu not in the list",
			    src, res.updated, res.changed, res.unpriced);
	}
	isc_price_refresh_rows_free(rows, n);
}

void broker_refresh_prices(struct isc_broker *b, int64_t now_ms)
{
	struct isc_experiment *active = NULL;
	struct isc_price_target *targets = NULL;
	struct isc_price_refresh_result res;
	struct isc_catalog *cat = NULL;
	struct isc_err err;
	size_t n = 0, nt = 0;

	int64_t every = b->config->price_refresh_ms, newest = 0;
	int placing = 0;

	refresh_lists(b, now_ms);
	if (every <= 0)
		return;
	if (every > CHECK_EVERY_MS)
		every = CHECK_EVERY_MS;
	if (isc_store_experiment_list_active(b->store, &active, &n, &err)) {
		isc_log(ISC_LOG_WARN, "price refresh: %s", err.msg);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		if (strcmp(active[i].compute_mode, "burst") || !may_place(active[i].status))
			continue;
		placing = 1;
		if (active[i].created_at_ms > newest)
			newest = active[i].created_at_ms;
	}
	/* Nothing to place: no catalog load. New work is checked at once, the rest on the
	 * schedule. */
	if (!placing ||
	    (b->prices_at_ms && newest <= b->prices_at_ms && now_ms - b->prices_at_ms < every))
		goto out;
	b->prices_at_ms = now_ms;
	if (isc_catalog_load(b->store, &cat, &err)) {
		isc_log(ISC_LOG_WARN, "price refresh: %s", err.msg);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		struct broker_candidate *cands;
		size_t nc, priced = 0;

		if (strcmp(active[i].compute_mode, "burst") != 0 || !may_place(active[i].status) ||
		    broker_place_in(b, cat, &active[i], &cands, &nc, &err))
			continue;
		for (size_t k = 0; k < nc && priced < PRICED_CANDIDATES; k++) {
			const struct isc_shape *sh = isc_catalog_find(cat, cands[k].shape_id);
			if (!cands[k].spot || !sh)
				continue;
			priced++;
			if (now_ms - isc_shape_price_as_of_ms(sh) <= b->config->price_refresh_ms)
				continue; /* fresh enough */
			if (isc_price_targets_add(&targets, &nt, cands[k].provider, cands[k].region,
			                          cands[k].instance_type))
				break;
		}
		broker_candidates_free(cands, nc);
	}
	if (nt == 0)
		goto out;
	if (isc_prices_refresh(b->store, b->config, targets, nt, &res, &err)) {
		isc_log(ISC_LOG_WARN, "price refresh: %s", err.msg);
		goto out;
	}
	isc_log(ISC_LOG_INFO,
	        "price refresh: %zu instance type(s) in %zu call(s): %zu shape(s) priced, %zu "
	        "moved, %zu list-price batch(es), %zu failed",
	        nt, res.calls, res.updated, res.changed, res.list_only, res.failed);
out:
	isc_price_targets_free(targets, nt);
	isc_catalog_free(cat);
	isc_experiment_list_free(active, n);
}
