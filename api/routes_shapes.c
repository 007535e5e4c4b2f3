/*
 * The shape catalog, ranked for a request as the broker would rank it
 * (`isc shapes`): any platform user may read it, since it holds prices and
 * instance types, nothing of any organisation.
 */
#include "api/api_int.h"
#include "api/json_out.h"
#include "common/clock.h"
#include "config/config.h"
#include "prices/lists.h"
#include "prices/risk.h"
#include "providers/placeable.h"
#include "store/store_shapes.h"
#include "shapes/accelerator.h"
#include "shapes/catalog.h"
#include "store/store_risk.h"
#include "shapes/throughput.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

static int query_long(struct isc_api_call *c, const char *key, long lo, long hi, long *out)
{
	const char *v = isc_api_query(c, key);
	char *end;
	long n;
	if (!v)
		return 0;
	errno = 0;
	n = strtol(v, &end, 10);
	if (errno || end == v || *end || n < lo || n > hi) {
		isc_api_reply_error(c, 400, "%s: '%s' is not a number in %ld..%ld", key, v, lo, hi);
		return -1;
	}
	*out = n;
	return 0;
}

/*
 * Moves the shapes this broker can place before the others (a stable
 * partition: each group keeps its ranking), drops the others when
 * only_placeable, then keeps at most limit (0: all). (*why)[i] is NULL for a
 * placeable entry, else why not (owned).
 */
static int placeable_first(struct isc_placeable *pl, struct isc_ranking *r, int only_placeable,
                           size_t limit, char ***why, struct isc_err *err)
{
	struct isc_rank_entry *sorted = calloc(r->n ? r->n : 1, sizeof(*sorted));
	char **reasons = calloc(r->n ? r->n : 1, sizeof(*reasons)), **ordered;
	size_t at = 0;

	ordered = calloc(r->n ? r->n : 1, sizeof(*ordered));
	if (!sorted || !reasons || !ordered)
		goto oom;
	for (size_t i = 0; i < r->n; i++) {
		char buf[ISC_ERR_MSG_MAX];
		if (!isc_placeable_check(pl, r->entries[i].shape->provider,
		                         r->entries[i].shape->region, buf, sizeof(buf)) &&
		    !(reasons[i] = strdup(buf)))
			goto oom;
	}
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < r->n; i++)
			if ((reasons[i] == NULL) == (pass == 0) && (pass == 0 || !only_placeable)) {
				sorted[at] = r->entries[i];
				ordered[at++] = reasons[i];
				reasons[i] = NULL;
			}
	for (size_t i = 0; i < r->n; i++)
		free(reasons[i]); /* the unplaceable ones only_placeable dropped */
	free(reasons);
	if (limit && at > limit) {
		for (size_t i = limit; i < at; i++)
			free(ordered[i]);
		at = limit;
	}
	free(r->entries);
	r->entries = sorted;
	r->n = at;
	*why = ordered;
	return 0;
oom:
	for (size_t i = 0; reasons && i < r->n; i++)
		free(reasons[i]);
	free(reasons);
	free(ordered);
	free(sorted);
	return isc_err_set(err, ISC_ENOMEM, "out of memory");
}

/* Micro-dollars (a double cost) as the money fields (docs/api.md), null when unknown. */
static void money_or_null(json_t *o, const char *key, double micros)
{
	isc_json_money_or_null(o, key, micros >= 0, micros >= 0 ? (int64_t)(micros + 0.5) : 0);
}

static json_int_t age_s(int64_t now, int64_t at)
{
	return at > 0 && now > at ? (json_int_t)((now - at) / 1000) : 0;
}

/*
 * What the ranking knew about the shape's speed and the risk of losing it, each
 * with its source (issue 43): "throughput" null when nobody measured the GPU.
 */
static void entry_rank_json(json_t *o, const struct isc_catalog *cat, int gpus,
                            const struct isc_rank_entry *entry, int64_t now)
{
	const struct isc_throughput *t = isc_throughput_of(entry->shape->gpu_type);
	struct isc_rank_entry one = *entry, *e = &one;
	struct isc_rank_risk r;
	json_t *risk;

	isc_catalog_entry_costs(cat, gpus, e, &r); /* also in mode price, for the columns */
	json_object_set_new(o, "throughput", t ? json_real(t->milli / 1000.0) : json_null());
	json_object_set_new(o, "throughput_source",
	                    json_string(t ? t->source : "unknown: no public measurement"));
	money_or_null(o, "work_cost", e->work_cost);
	money_or_null(o, "expected_cost", e->expected_cost);
	risk = json_object();
	if (r.band >= 0)
		json_object_set_new(risk, "band",
		                    json_pack("{s:i,s:s,s:i,s:s,s:I}", "index", r.band, "label",
		                              r.band_label ? r.band_label : "", "max_pct",
		                              r.band_max_pct, "source", ISC_RISK_SPOT_ADVISOR,
		                              "age_s", age_s(now, r.band_fetched_ms)));
	else
		json_object_set_new(risk, "band", json_null());
	if (r.score > 0)
		json_object_set_new(
		    risk, "score",
		    json_pack("{s:i,s:i,s:s,s:s,s:I}", "score", r.score, "target_capacity",
		              r.score_target, "zone", r.score_zone ? r.score_zone : "", "source",
		              ISC_RISK_PLACEMENT, "age_s", age_s(now, r.score_fetched_ms)));
	else
		json_object_set_new(risk, "score", json_null());
	if (r.capacity_status)
		json_object_set_new(risk, "capacity",
		                    json_pack("{s:s,s:i,s:s,s:I}", "status", r.capacity_status,
		                              "available", r.capacity, "source",
		                              ISC_RISK_OCI_CAPACITY, "age_s",
		                              age_s(now, r.capacity_fetched_ms)));
	else
		json_object_set_new(risk, "capacity", json_null());
	if (r.obtainability_milli >= 0)
		json_object_set_new(risk, "obtainability",
		                    json_real(r.obtainability_milli / 1000.0));
	if (r.interruptions >= 0)
		json_object_set_new(risk, "history",
		                    json_pack("{s:I,s:I,s:s}", "interruptions_30d",
		                              (json_int_t)r.interruptions, "node_hours_30d",
		                              (json_int_t)(r.node_seconds / 3600), "source",
		                              ISC_RISK_HISTORY));
	else
		json_object_set_new(risk, "history", json_null());
	json_object_set_new(risk, "node_rate_per_hour", json_real(r.node_rate));
	json_object_set_new(risk, "rate_source", json_string(r.rate_source));
	json_object_set_new(risk, "q", json_real(r.q));
	json_object_set_new(risk, "q_source", json_string(r.q_source));
	json_object_set_new(risk, "factor", json_real(r.factor));
	json_object_set_new(o, "risk", risk);
}

static json_t *entry_json(const struct isc_rank_entry *e, size_t rank, int64_t now,
                          const struct isc_config *cfg)
{
	const struct isc_shape *sh = e->shape;
	const struct isc_accelerator *acc = isc_accelerator_of(sh->gpu_type);
	int64_t as_of = isc_shape_price_as_of_ms(sh), stale_ms;
	json_t *o = json_pack("{s:i,s:s,s:s,s:s,s:s,s:s,s:i,s:I,s:b,s:i,s:i,s:s,s:s}", "rank",
	                      (int)rank, "id", sh->display_id, "provider", sh->provider, "region",
	                      sh->region, "instance_type", sh->instance_type, "gpu_type",
	                      sh->gpu_type, "gpus_per_node", sh->gpus_per_node, "gpu_mem_mib",
	                      (json_int_t)sh->gpu_mem_mib, "spot", sh->spot, "nnodes", e->nnodes,
	                      "nproc", e->nproc, "zones", sh->zones, "price_date", sh->price_date);
	isc_json_money(o, "node_price", sh->price_micros);
	isc_json_money(o, "cluster_price", e->cluster_price_micros);
	json_object_set_new(o, "accelerator_vendor", json_string(acc->vendor));
	json_object_set_new(o, "accelerator_family", json_string(acc->family));
	json_object_set_new(o, "cuda", json_boolean(acc->cuda));
	json_object_set_new(o, "price_source",
	                    json_string(sh->price_source ? sh->price_source : "catalog"));
	json_object_set_new(o, "price_as_of_ms", json_integer(as_of));
	json_object_set_new(o, "price_age_s", json_integer((now - as_of) / 1000));
	/* A live price is stale past its own source's interval (prices/lists.h). */
	stale_ms = isc_price_source_every_ms(cfg, sh->price_source ? sh->price_source : "catalog");
	json_object_set_new(o, "price_stale", json_boolean(stale_ms > 0 && now - as_of > stale_ms));
	return o;
}

/* Each price source's last attempt and last success (price_refreshes), for the age of its
 * prices when a refresh failed. */
static json_t *sources_json(struct isc_store *s, int64_t now)
{
	struct isc_price_refresh_row *rows = NULL;
	struct isc_err err;
	json_t *a = json_array();
	size_t n = 0;

	if (isc_store_price_refresh_list(s, &rows, &n, &err))
		return a;
	for (size_t i = 0; i < n; i++)
		json_array_append_new(
		    a,
		    json_pack("{s:s,s:I,s:I,s:I,s:I,s:s}", "source", rows[i].source, "tried_at_ms",
		              (json_int_t)rows[i].tried_at_ms, "ok_at_ms",
		              (json_int_t)rows[i].ok_at_ms, "ok_age_s",
		              (json_int_t)(rows[i].ok_at_ms ? (now - rows[i].ok_at_ms) / 1000 : -1),
		              "shapes", (json_int_t)rows[i].shapes, "error", rows[i].error));
	isc_price_refresh_rows_free(rows, n);
	return a;
}

/* A growing text buffer for the streamed answer (json_dump_callback's sink). */
struct text_buf {
	char *p;
	size_t len, cap;
	int oom;
};

static int text_put(const char *b, size_t n, void *data)
{
	struct text_buf *t = data;
	if (t->oom)
		return -1;
	if (t->len + n + 1 > t->cap) {
		size_t cap = t->cap ? t->cap : 1 << 16;
		char *np;
		while (cap < t->len + n + 1)
			cap *= 2;
		if (!(np = realloc(t->p, cap))) {
			t->oom = 1;
			return -1;
		}
		t->p = np;
		t->cap = cap;
	}
	memcpy(t->p + t->len, b, n);
	t->len += n;
	t->p[t->len] = '\0';
	return 0;
}

/*
 * The compact answer, one shape at a time (issue 43's cost): each shape's object is
 * built, written out and freed before the next, so its few dozen allocations come back
 * from the allocator's caches still warm, instead of a tree of every shape (about a
 * hundred allocations each, 3,361 shapes) built whole, written, then freed and
 * coalesced. The text is exactly json_dumps' of the whole tree: the envelope (shapes
 * first, then the rest in order) around the shapes written the same way.
 */
static int reply_streamed(struct isc_api_call *c, json_t *envelope, const struct isc_ranking *r,
                          const struct isc_catalog *cat, int gpus, char **why, int64_t now,
                          const struct isc_config *cfg)
{
	static const char head[] = "{\"shapes\":[]";
	struct text_buf t = {0};
	char *rest = json_dumps(envelope, JSON_COMPACT | JSON_PRESERVE_ORDER);

	if (!rest || strncmp(rest, head, sizeof(head) - 1)) {
		free(rest);
		return -1;
	}
	text_put("{\"shapes\":[", sizeof(head) - 2, &t);
	for (size_t i = 0; i < r->n && !t.oom; i++) {
		json_t *o = entry_json(&r->entries[i], i + 1, now, cfg);
		entry_rank_json(o, cat, gpus, &r->entries[i], now);
		json_object_set_new(o, "placeable", json_boolean(why[i] == NULL));
		if (why[i])
			json_object_set_new(o, "why", json_string(why[i]));
		if (i)
			text_put(",", 1, &t);
		if (json_dump_callback(o, text_put, &t, JSON_COMPACT | JSON_PRESERVE_ORDER))
			t.oom = 1;
		json_decref(o);
	}
	text_put("]", 1, &t);
	text_put(rest + sizeof(head) - 1, strlen(rest + sizeof(head) - 1), &t);
	text_put("\n", 1, &t); /* as isc_api_reply_json ends its answer */
	free(rest);
	if (t.oom) {
		free(t.p);
		return -1;
	}
	isc_api_reply_text(c, 200, "application/json", t.p, t.len);
	return 0;
}

/*
 * GET /v1/shapes?gpus=&priority=ID,ID&provider=&market=&gpu_type=&region=
 * &min_gpu_mem_mib=&limit=&rank=price|work|expected: {"shapes": [best first, the `isc shapes
 * --json` objects], "warnings": [...], "catalog_size": N}.
 */
static void shapes_rank(struct isc_api_call *c)
{
	struct isc_rank_request req = {0};
	struct isc_ranking r = {0};
	struct isc_catalog *cat = NULL;
	struct isc_config *cfg = NULL;
	struct isc_err err;
	const char *prio_text = isc_api_query(c, "priority"), *market = isc_api_query(c, "market");
	const char *only = isc_api_query(c, "placeable"), *mode = isc_api_query(c, "rank");
	struct isc_placeable *pl = NULL;
	char **why = NULL; /* per entry: NULL when placeable, else why not */
	char *prio_buf = NULL, **prio = NULL;
	size_t n_prio = 0;
	int64_t now;
	long gpus = 0, mem = 0, limit = 0;
	const char *pretty = isc_api_query(c, "pretty");
	json_t *arr, *warn, *envelope;

	if (query_long(c, "gpus", 0, ISC_BURST_GPUS_MAX, &gpus) ||
	    query_long(c, "min_gpu_mem_mib", 0, LONG_MAX, &mem) ||
	    query_long(c, "limit", 0, 1000000000, &limit))
		return;
	req.gpus = (int)gpus;
	req.min_gpu_mem_mib = mem;
	/* The limit applies after the placeable shapes are moved first. */
	req.provider = isc_api_query(c, "provider");
	req.gpu_type = isc_api_query(c, "gpu_type");
	req.region = isc_api_query(c, "region");
	if (req.provider && !isc_provider_valid(req.provider)) {
		isc_api_reply_error(c, 400, "provider: '%s' is not aws, gcp or oci", req.provider);
		return;
	}
	if (market && isc_market_parse(market, &req.market)) {
		isc_api_reply_error(c, 400, "market: '%s' is not spot, ondemand or any", market);
		return;
	}
	if (mode && isc_rank_mode_parse(mode, &req.mode)) {
		isc_api_reply_error(c, 400, "rank: '%s' is not price, work or expected", mode);
		return;
	}
	if (prio_text &&
	    (!(prio_buf = strdup(prio_text)) || isc_shape_ids_split(prio_buf, &prio, &n_prio))) {
		isc_api_reply_error(c, 500, "out of memory");
		goto out;
	}
	req.priority = (const char *const *)prio;
	req.n_priority = n_prio;
	isc_err_clear(&err);
	/* Prices older than the refresh interval are marked (defaults when there is no
	 * config.toml). A config.toml that does not load is the answer, as isc burst and isc
	 * validate give it: without it every shape would read "not in config.toml". */
	if (isc_config_load(c->home, &cfg, &err)) {
		isc_api_reply_err(c, &err);
		goto out;
	}
	now = isc_clock_system()->now_ms(isc_clock_system()->ctx);
	/* Placeable is iscd's view: its config and the credentials in its environment. */
	if (isc_catalog_load(c->store, &cat, &err) || isc_catalog_rank(cat, &req, &r, &err) ||
	    isc_placeable_new(cfg, &pl, &err) ||
	    placeable_first(pl, &r, only && strcmp(only, "0") != 0, (size_t)limit, &why, &err)) {
		isc_api_reply_err(c, &err);
		goto out;
	}
	arr = json_array();
	warn = json_array();
	for (size_t i = 0; i < r.n_warnings; i++)
		json_array_append_new(warn, json_string(r.warnings[i]));
	envelope = json_pack("{s:o,s:o,s:I,s:o,s:s}", "shapes", arr, "warnings", warn,
	                     "catalog_size", (json_int_t)isc_catalog_size(cat), "price_sources",
	                     sources_json(c->store, now), "rank", isc_rank_mode_name(req.mode));
	/* ?pretty=1 (people with curl) takes the whole tree; the compact answer is streamed. */
	if (!envelope || (!(pretty && strcmp(pretty, "0") != 0) &&
	                  !reply_streamed(c, envelope, &r, cat, req.gpus, why, now, cfg))) {
		if (!envelope)
			isc_api_reply_error(c, 500, "out of memory");
		json_decref(envelope);
		goto out;
	}
	for (size_t i = 0; i < r.n; i++) {
		json_t *o = entry_json(&r.entries[i], i + 1, now, cfg);
		entry_rank_json(o, cat, req.gpus, &r.entries[i], now);
		json_object_set_new(o, "placeable", json_boolean(why[i] == NULL));
		if (why[i])
			json_object_set_new(o, "why", json_string(why[i]));
		json_array_append_new(arr, o);
	}
	isc_api_reply_json(c, 200, envelope);
out:
	for (size_t i = 0; why && i < r.n; i++)
		free(why[i]);
	free(why);
	isc_placeable_free(pl);
	isc_config_free(cfg);
	isc_ranking_cleanup(&r);
	isc_catalog_free(cat);
	free(prio);
	free(prio_buf);
}

/*
 * POST /v1/shapes/risk[?gpus=G] (the operator's): asks the clouds now what they say of
 * the risk of losing the nodes of every shape in a configured region, for the gang each
 * needs for G GPUs (one node without G), and recomputes this broker's own history
 * (prices/risk.h). {"calls", "facts", "none", "failed", "history", "last_error"}.
 */
static void shapes_risk_refresh(struct isc_api_call *c)
{
	struct isc_risk_target *targets = NULL;
	struct isc_risk_refresh_result res;
	struct isc_config *cfg = NULL;
	struct isc_err err;
	size_t nt = 0;
	long gpus = 0;
	int rc;

	if (!isc_api_require_operator(c) || query_long(c, "gpus", 0, ISC_BURST_GPUS_MAX, &gpus))
		return;
	isc_api_audit_target(c, 0, "risk");
	isc_err_clear(&err);
	if (isc_config_load(c->home, &cfg, &err)) {
		isc_api_reply_err(c, &err);
		return;
	}
	rc = isc_risk_targets_configured(c->store, cfg, (int)gpus, &targets, &nt, &err);
	if (!rc)
		rc = isc_risk_refresh(c->store, cfg, targets, nt,
		                      isc_clock_system()->now_ms(isc_clock_system()->ctx), &res,
		                      &err);
	isc_risk_targets_free(targets, nt);
	isc_config_free(cfg);
	if (rc) {
		isc_api_reply_err(c, &err);
		return;
	}
	isc_api_reply_json(c, 200,
	                   json_pack("{s:I,s:I,s:I,s:I,s:I,s:s}", "calls", (json_int_t)res.calls,
	                             "facts", (json_int_t)res.facts, "none", (json_int_t)res.none,
	                             "failed", (json_int_t)res.failed, "history",
	                             (json_int_t)res.history, "last_error", res.last_error));
}

const struct isc_api_route isc_api_routes_shapes[] = {
    {"GET", "/v1/shapes", shapes_rank},
    {"POST", "/v1/shapes/risk", shapes_risk_refresh, ISC_API_SLOW},
    {NULL, NULL, NULL},
};
