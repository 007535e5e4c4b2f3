/*
 * The shape catalog as a whole (`isc catalog`): what it holds per provider and
 * its normalized CSV may be read by any platform user, as the ranked shapes of
 * GET /v1/shapes are (prices and instance types, nothing of any organisation);
 * changing it (an import, a live price refresh) is the operator's alone.
 *
 * An import's file arrives in the request body (iscd runs as another user and
 * never opens a path the caller names); the body cap of every route holds, so
 * `isc catalog import` parses a large third-party file on the caller's side and
 * sends its normalized form, which this route parses again with the same parser.
 */
#include "api/api_int.h"
#include "config/config.h"
#include "prices/lists.h"
#include "prices/refresh.h"
#include "shapes/shape.h"
#include "shapes/catalog_import.h"
#include "store/store_shapes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ?provider= when given: 1 when absent or valid, 0 when a 400 was sent. */
static int query_provider(struct isc_api_call *c, const char **out)
{
	*out = isc_api_query(c, "provider");
	if (*out && !isc_provider_valid(*out)) {
		isc_api_reply_error(c, 400, "provider: '%s' is not aws, gcp or oci", *out);
		return 0;
	}
	return 1;
}

/* GET /v1/catalog: per provider, the number of shapes and regions and the price dates. */
static void catalog_show(struct isc_api_call *c)
{
	struct isc_shapes_summary *list = NULL;
	struct isc_err err;
	size_t n = 0;
	json_t *arr;

	isc_err_clear(&err);
	if (isc_store_shapes_summary(c->store, &list, &n, &err)) {
		isc_api_reply_err(c, &err);
		return;
	}
	arr = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(arr, json_pack("{s:s,s:I,s:I,s:s,s:s}", "provider",
		                                     list[i].provider, "shapes",
		                                     (json_int_t)list[i].shapes, "regions",
		                                     (json_int_t)list[i].regions, "price_date_min",
		                                     list[i].price_date_min, "price_date_max",
		                                     list[i].price_date_max));
	isc_shapes_summary_free(list, n);
	isc_api_reply_json(c, 200, arr);
}

/* GET /v1/catalog/export[?provider=P]: the store's shapes in the normalized CSV (text/csv). */
static void catalog_export(struct isc_api_call *c)
{
	const char *provider;
	struct isc_shape *list = NULL;
	struct isc_err err;
	char *text = NULL;
	size_t n = 0, len = 0;
	FILE *f;
	int rc;

	if (!query_provider(c, &provider))
		return;
	isc_err_clear(&err);
	if (isc_store_shape_list(c->store, provider, &list, &n, &err)) {
		isc_api_reply_err(c, &err);
		return;
	}
	if (!(f = open_memstream(&text, &len))) {
		isc_shape_list_free(list, n);
		isc_api_reply_error(c, 500, "out of memory");
		return;
	}
	rc = isc_catalog_write_csv(f, list, n, &err);
	isc_shape_list_free(list, n);
	if (fclose(f) != 0 && !rc)
		rc = isc_err_set(&err, ISC_ENOMEM, "out of memory");
	if (rc) {
		free(text);
		isc_api_reply_err(c, &err);
		return;
	}
	isc_api_reply_text(c, 200, "text/csv; charset=utf-8", text, len);
}

/*
 * POST /v1/catalog/import?provider=P&format=F[&replace=1][&price_date=D][&file=NAME]:
 * the body is the catalog file. One transaction: nothing is written unless the
 * file has a valid row and every write succeeds.
 */
static void catalog_import(struct isc_api_call *c)
{
	const char *provider, *fmt_name = isc_api_query(c, "format");
	const char *date = isc_api_query(c, "price_date"), *file = isc_api_query(c, "file");
	const char *replace = isc_api_query(c, "replace");
	enum isc_catalog_format fmt;
	struct isc_catalog_parse p;
	struct isc_shapes_apply_result res;
	struct isc_err err;
	char target[96];
	json_t *skipped;

	if (!isc_api_require_operator(c) || !query_provider(c, &provider))
		return;
	if (!provider) {
		isc_api_reply_error(c, 400, "provider: give aws, gcp or oci");
		return;
	}
	if (!fmt_name || isc_catalog_format_parse(fmt_name, &fmt)) {
		isc_api_reply_error(c, 400, "format: '%s' is not skypilot, ec2instances or isc",
		                    fmt_name ? fmt_name : "");
		return;
	}
	snprintf(target, sizeof(target), "catalog:%s", provider);
	isc_api_audit_target(c, 0, target);
	if (!file || !*file)
		file = "body";
	isc_err_clear(&err);
	if (isc_catalog_parse_mem(file, c->body, c->body_len, fmt, provider, date, &p, &err)) {
		isc_catalog_parse_cleanup(&p);
		isc_api_reply_err(c, &err);
		return;
	}
	if (isc_store_shapes_apply(c->store, provider, p.shapes, p.n,
	                           replace && strcmp(replace, "0") != 0, &res, &err)) {
		isc_catalog_parse_cleanup(&p);
		isc_api_reply_err(c, &err);
		return;
	}
	skipped = json_array();
	for (size_t i = 0; i < p.n_skipped; i++)
		json_array_append_new(skipped, json_string(p.skipped[i]));
	isc_api_reply_json(
	    c, 200,
	    json_pack("{s:s,s:s,s:I,s:I,s:I,s:o,s:I,s:I,s:I,s:I}", "file", file, "provider",
	              provider, "shapes", (json_int_t)p.n, "rows", (json_int_t)p.rows, "filtered",
	              (json_int_t)p.filtered, "skipped", skipped, "added", (json_int_t)res.added,
	              "updated", (json_int_t)res.updated, "unchanged", (json_int_t)res.unchanged,
	              "removed", (json_int_t)res.removed));
	isc_catalog_parse_cleanup(&p);
}

/*
 * POST /v1/catalog/refresh[?provider=P]: live spot prices from each configured
 * cloud's price API, with iscd's config and credentials (the ones the broker
 * launches with). Failed calls are counted in the reply, not an error status.
 */
static void catalog_refresh(struct isc_api_call *c)
{
	const char *provider;
	struct isc_price_target *targets = NULL;
	struct isc_price_refresh_result res;
	struct isc_config *cfg = NULL;
	struct isc_err err;
	json_t *lists;
	char target[32];
	size_t nt = 0;
	int rc;

	if (!isc_api_require_operator(c) || !query_provider(c, &provider))
		return;
	snprintf(target, sizeof(target), "prices:%s", provider ? provider : "all");
	isc_api_audit_target(c, 0, target);
	isc_err_clear(&err);
	if (isc_config_load(c->home, &cfg, &err)) {
		isc_api_reply_err(c, &err);
		return;
	}
	if (provider && !isc_config_provider(cfg, provider)) {
		isc_api_reply_error(
		    c, 400, "%s/config.toml has no [providers.%s] section: nothing to refresh",
		    c->home, provider);
		isc_config_free(cfg);
		return;
	}
	rc = isc_price_targets_configured(c->store, cfg, provider, &targets, &nt, &err);
	if (!rc)
		rc = isc_prices_refresh(c->store, cfg, targets, nt, &res, &err);
	isc_price_targets_free(targets, nt);
	/* The list-price sources of the provider(s), whole (prices/lists.h). */
	lists = json_array();
	for (size_t i = 0; !rc && i < isc_price_list_n_sources; i++) {
		const char *src = isc_price_list_sources[i];
		struct isc_price_list_result lr;
		if (provider && strcmp(provider, isc_price_source_provider(src)) != 0)
			continue;
		if ((rc = isc_prices_refresh_list(c->store, cfg, src, NULL, &lr, &err)) ||
		    !lr.configured)
			continue;
		json_array_append_new(
		    lists, json_pack("{s:s,s:b,s:I,s:I,s:I,s:I,s:s}", "source", src, "failed",
		                     lr.failed, "shapes", (json_int_t)lr.shapes, "updated",
		                     (json_int_t)lr.updated, "changed", (json_int_t)lr.changed,
		                     "unpriced", (json_int_t)lr.unpriced, "error", lr.error));
		if (lr.failed) {
			res.failed++;
			snprintf(res.last_error, sizeof(res.last_error), "%s: %.400s", src,
			         lr.error);
		}
	}
	isc_config_free(cfg);
	if (rc) {
		json_decref(lists);
		isc_api_reply_err(c, &err);
		return;
	}
	isc_api_reply_json(
	    c, 200,
	    json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:s,s:o}", "instance_types", (json_int_t)nt,
	              "calls", (json_int_t)res.calls, "updated", (json_int_t)res.updated, "changed",
	              (json_int_t)res.changed, "list_only", (json_int_t)res.list_only, "failed",
	              (json_int_t)res.failed, "last_error", res.last_error, "lists", lists));
}

const struct isc_api_route isc_api_routes_catalog[] = {
    {"GET", "/v1/catalog", catalog_show},
    {"GET", "/v1/catalog/export", catalog_export},
    {"POST", "/v1/catalog/import", catalog_import, ISC_API_SLOW},
    {"POST", "/v1/catalog/refresh", catalog_refresh, ISC_API_SLOW},
    {NULL, NULL, NULL},
};
