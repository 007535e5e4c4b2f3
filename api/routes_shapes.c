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

static int64_t age_s(int64_t now, int64_t at)
{
	return at > 0 && now > at ? (now - at) / 1000 : 0;
}

/* Micro-dollars (a double cost) as the money fields (docs/api.md), null when unknown. */
static int cost_member(struct isc_buf *b, const char *name, double micros, int *first)
{
	return isc_json_out_money_member(b, name, micros >= 0,
	                                 micros >= 0 ? (int64_t)(micros + 0.5) : 0, first);
}

/*
 * What the ranking knew about the shape's speed and the risk of losing it, each
 * with its source (issue 43): "throughput" null when nobody measured the GPU.
 */
static int entry_rank_write(struct isc_buf *b, const struct isc_catalog *cat, int gpus,
                            const struct isc_rank_entry *entry, int64_t now, int *first)
{
	const struct isc_throughput *t = isc_throughput_of(entry->shape->gpu_type);
	struct isc_rank_entry one = *entry, *e = &one;
	struct isc_rank_risk r;
	int rc, f = 1;

	isc_catalog_entry_costs(cat, gpus, e, &r); /* also in mode price, for the columns */
	rc = t ? isc_json_out_real_member(b, "throughput", t->milli / 1000.0, first)
	       : isc_json_out_null_member(b, "throughput", first);
	rc = rc ? rc
	        : isc_json_out_str_member(b, "throughput_source",
	                                  t ? t->source : "unknown: no public measurement", first);
	rc = rc ? rc : cost_member(b, "work_cost", e->work_cost, first);
	rc = rc ? rc : cost_member(b, "expected_cost", e->expected_cost, first);
	rc = rc ? rc : isc_json_out_key(b, "risk", first);
	rc = rc ? rc : isc_buf_putc(b, '{');
	if (rc)
		return rc;
	if (r.band >= 0) {
		int g = 1;
		rc = isc_json_out_key(b, "band", &f) || isc_buf_putc(b, '{') ||
		     isc_json_out_int_member(b, "index", r.band, &g) ||
		     isc_json_out_str_member(b, "label", r.band_label, &g) ||
		     isc_json_out_int_member(b, "max_pct", r.band_max_pct, &g) ||
		     isc_json_out_str_member(b, "source", ISC_RISK_SPOT_ADVISOR, &g) ||
		     isc_json_out_int_member(b, "age_s", age_s(now, r.band_fetched_ms), &g) ||
		     isc_buf_putc(b, '}');
	} else {
		rc = isc_json_out_null_member(b, "band", &f);
	}
	if (!rc && r.score > 0) {
		int g = 1;
		rc = isc_json_out_key(b, "score", &f) || isc_buf_putc(b, '{') ||
		     isc_json_out_int_member(b, "score", r.score, &g) ||
		     isc_json_out_int_member(b, "target_capacity", r.score_target, &g) ||
		     isc_json_out_str_member(b, "zone", r.score_zone, &g) ||
		     isc_json_out_str_member(b, "source", ISC_RISK_PLACEMENT, &g) ||
		     isc_json_out_int_member(b, "age_s", age_s(now, r.score_fetched_ms), &g) ||
		     isc_buf_putc(b, '}');
	} else if (!rc) {
		rc = isc_json_out_null_member(b, "score", &f);
	}
	if (!rc && r.capacity_status) {
		int g = 1;
		rc = isc_json_out_key(b, "capacity", &f) || isc_buf_putc(b, '{') ||
		     isc_json_out_str_member(b, "status", r.capacity_status, &g) ||
		     isc_json_out_int_member(b, "available", r.capacity, &g) ||
		     isc_json_out_str_member(b, "source", ISC_RISK_OCI_CAPACITY, &g) ||
		     isc_json_out_int_member(b, "age_s", age_s(now, r.capacity_fetched_ms), &g) ||
		     isc_buf_putc(b, '}');
	} else if (!rc) {
		rc = isc_json_out_null_member(b, "capacity", &f);
	}
	if (!rc && r.obtainability_milli >= 0)
		rc = isc_json_out_real_member(b, "obtainability", r.obtainability_milli / 1000.0,
		                              &f);
	if (!rc && r.interruptions >= 0) {
		int g = 1;
		rc = isc_json_out_key(b, "history", &f) || isc_buf_putc(b, '{') ||
		     isc_json_out_int_member(b, "interruptions_30d", r.interruptions, &g) ||
		     isc_json_out_int_member(b, "node_hours_30d", r.node_seconds / 3600, &g) ||
		     isc_json_out_str_member(b, "source", ISC_RISK_HISTORY, &g) ||
		     isc_buf_putc(b, '}');
	} else if (!rc) {
		rc = isc_json_out_null_member(b, "history", &f);
	}
	if (!rc)
		rc = isc_json_out_real_member(b, "node_rate_per_hour", r.node_rate, &f) ||
		     isc_json_out_str_member(b, "rate_source", r.rate_source, &f) ||
		     isc_json_out_real_member(b, "q", r.q, &f) ||
		     isc_json_out_str_member(b, "q_source", r.q_source, &f) ||
		     isc_json_out_real_member(b, "factor", r.factor, &f) || isc_buf_putc(b, '}');
	return rc ? ISC_ENOMEM : 0;
}

/*
 * One shape of the answer, written straight into b (issue 43's cost): building a
 * jansson object of about a hundred values per shape, then dumping and freeing it,
 * was most of iscd's CPU for `isc shapes`. The text is what json_dumps(JSON_COMPACT |
 * JSON_PRESERVE_ORDER) wrote of that object.
 */
static int entry_write(struct isc_buf *b, const struct isc_catalog *cat, int gpus,
                       const struct isc_rank_entry *e, size_t rank, const char *why, int64_t now,
                       const struct isc_config *cfg)
{
	const struct isc_shape *sh = e->shape;
	const struct isc_accelerator *acc = isc_accelerator_of(sh->gpu_type);
	const char *source = sh->price_source ? sh->price_source : "catalog";
	int64_t as_of = isc_shape_price_as_of_ms(sh);
	/* A live price is stale past its own source's interval (prices/lists.h). */
	int64_t stale_ms = isc_price_source_every_ms(cfg, source);
	int f = 1;
	int rc = isc_buf_putc(b, '{') || isc_json_out_int_member(b, "rank", (int64_t)rank, &f) ||
	         isc_json_out_str_member(b, "id", sh->display_id, &f) ||
	         isc_json_out_str_member(b, "provider", sh->provider, &f) ||
	         isc_json_out_str_member(b, "region", sh->region, &f) ||
	         isc_json_out_str_member(b, "instance_type", sh->instance_type, &f) ||
	         isc_json_out_str_member(b, "gpu_type", sh->gpu_type, &f) ||
	         isc_json_out_int_member(b, "gpus_per_node", sh->gpus_per_node, &f) ||
	         isc_json_out_int_member(b, "gpu_mem_mib", sh->gpu_mem_mib, &f) ||
	         isc_json_out_bool_member(b, "spot", sh->spot, &f) ||
	         isc_json_out_int_member(b, "nnodes", e->nnodes, &f) ||
	         isc_json_out_int_member(b, "nproc", e->nproc, &f) ||
	         isc_json_out_str_member(b, "zones", sh->zones, &f) ||
	         isc_json_out_str_member(b, "price_date", sh->price_date, &f) ||
	         isc_json_out_money_member(b, "node_price", 1, sh->price_micros, &f) ||
	         isc_json_out_money_member(b, "cluster_price", 1, e->cluster_price_micros, &f) ||
	         isc_json_out_str_member(b, "accelerator_vendor", acc->vendor, &f) ||
	         isc_json_out_str_member(b, "accelerator_family", acc->family, &f) ||
	         isc_json_out_bool_member(b, "cuda", acc->cuda, &f) ||
	         isc_json_out_str_member(b, "price_source", source, &f) ||
	         isc_json_out_int_member(b, "price_as_of_ms", as_of, &f) ||
	         isc_json_out_int_member(b, "price_age_s", (now - as_of) / 1000, &f) ||
	         isc_json_out_bool_member(b, "price_stale", stale_ms > 0 && now - as_of > stale_ms,
	                                  &f) ||
	         entry_rank_write(b, cat, gpus, e, now, &f) ||
	         isc_json_out_bool_member(b, "placeable", why == NULL, &f) ||
	         (why && isc_json_out_str_member(b, "why", why, &f)) || isc_buf_putc(b, '}');
	return rc ? ISC_ENOMEM : 0;
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

/*
 * The answer: the shapes written one at a time into one buffer (entry_write), inside
 * the envelope jansson writes ("shapes" first, then the rest in order). ?pretty=1
 * (people with curl) is the same text read back and written indented.
 */
static void reply_shapes(struct isc_api_call *c, json_t *envelope, const struct isc_ranking *r,
                         const struct isc_catalog *cat, int gpus, char **why, int64_t now,
                         const struct isc_config *cfg, int pretty)
{
	static const char head[] = "{\"shapes\":[]";
	struct isc_buf b;
	char *rest = json_dumps(envelope, JSON_COMPACT | JSON_PRESERVE_ORDER);
	int rc = !rest || strncmp(rest, head, sizeof(head) - 1);

	isc_buf_init(&b, 0);
	rc = rc || isc_buf_puts(&b, "{\"shapes\":[");
	for (size_t i = 0; !rc && i < r->n; i++)
		rc = (i && isc_buf_putc(&b, ',')) ||
		     entry_write(&b, cat, gpus, &r->entries[i], i + 1, why[i], now, cfg);
	rc = rc || isc_buf_putc(&b, ']') || isc_buf_puts(&b, rest + sizeof(head) - 1) ||
	     isc_buf_putc(&b, '\n'); /* as isc_api_reply_json ends its answer */
	free(rest);
	if (rc) {
		isc_buf_cleanup(&b);
		isc_api_reply_error(c, 500, "out of memory");
		return;
	}
	if (pretty) {
		json_error_t jerr;
		json_t *all = json_loadb(b.data, b.len, 0, &jerr);
		isc_buf_cleanup(&b);
		if (!all)
			isc_api_reply_error(c, 500, "the answer is not JSON: %s", jerr.text);
		else
			isc_api_reply_json(c, 200, all);
		return;
	}
	{
		size_t len = b.len;
		isc_api_reply_text(c, 200, "application/json", isc_buf_detach(&b), len);
	}
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
	json_t *warn, *envelope;

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
	warn = json_array();
	for (size_t i = 0; i < r.n_warnings; i++)
		json_array_append_new(warn, json_string(r.warnings[i]));
	envelope = json_pack("{s:[],s:o,s:I,s:o,s:s}", "shapes", "warnings", warn, "catalog_size",
	                     (json_int_t)isc_catalog_size(cat), "price_sources",
	                     sources_json(c->store, now), "rank", isc_rank_mode_name(req.mode));
	if (!envelope)
		isc_api_reply_error(c, 500, "out of memory");
	else
		reply_shapes(c, envelope, &r, cat, req.gpus, why, now, cfg,
		             pretty && strcmp(pretty, "0") != 0);
	json_decref(envelope);
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
