/* Oracle's public price list (see oci_pricelist.h). */
#include "providers/oci/oci_pricelist.h"

#include "common/buf.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PAGES 50

static const char *str_at(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

/*
 * A price is a JSON number of dollars (2.95, 0.0255). JSON numbers reach us as
 * doubles; every list price has at most 6 decimals and is far below 1e9, where a
 * double's 15 significant digits hold it exactly to the micro-dollar, so
 * rounding to the nearest micro-dollar gives the written value back.
 */
static int price_micros(json_t *v, int64_t *out)
{
	double d;
	if (json_is_integer(v)) {
		if (json_integer_value(v) < 0 || json_integer_value(v) > 1000000000LL)
			return -1;
		*out = (int64_t)json_integer_value(v) * 1000000;
		return 0;
	}
	if (!json_is_real(v))
		return -1;
	d = json_real_value(v);
	if (!(d >= 0) || d > 1e9)
		return -1;
	*out = (int64_t)llround(d * 1e6);
	return 0;
}

/* The PAY_AS_YOU_GO price in currency: 1 found, 0 none, -1 malformed. */
static int payg_price(json_t *item, const char *currency, int64_t *out)
{
	json_t *locs = json_object_get(item, "currencyCodeLocalizations"), *loc, *p;
	size_t i, k;
	json_array_foreach(locs, i, loc)
	{
		const char *cur = str_at(loc, "currencyCode");
		if (!cur || strcmp(cur, currency) != 0)
			continue;
		json_array_foreach(json_object_get(loc, "prices"), k, p)
		{
			const char *model = str_at(p, "model");
			if (!model || strcmp(model, "PAY_AS_YOU_GO") != 0)
				continue;
			return price_micros(json_object_get(p, "value"), out) ? -1 : 1;
		}
	}
	return 0;
}

int isc_oci_price_list_parse(const char *json, size_t len, int page, const char *currency,
                             struct isc_oci_product **v, size_t *n, size_t *cap, int *more,
                             struct isc_err *err)
{
	json_error_t jerr;
	json_t *root = json_loadb(json ? json : "", len, 0, &jerr), *items, *it;
	size_t i;
	int rc = 0;

	*more = 0;
	if (!json_is_object(root)) {
		json_decref(root);
		return isc_err_set(err, ISC_EINVALID,
		                   "OCI price list reply %d: not a JSON object (%s)", page,
		                   jerr.text[0] ? jerr.text : "wrong type");
	}
	items = json_object_get(root, "items");
	if (!json_is_array(items)) {
		json_decref(root);
		return isc_err_set(err, ISC_EINVALID, "OCI price list reply %d: no \"items\" array",
		                   page);
	}
	json_array_foreach(items, i, it)
	{
		const char *part = str_at(it, "partNumber"), *name = str_at(it, "displayName");
		const char *metric = str_at(it, "metricName"), *cat = str_at(it, "serviceCategory");
		struct isc_oci_product p;
		int got;

		if (!part || !*part || strlen(part) >= sizeof(p.part_number)) {
			rc = isc_err_set(err, ISC_EINVALID,
			                 "OCI price list reply %d: item #%zu has no partNumber",
			                 page, i + 1);
			break;
		}
		memset(&p, 0, sizeof(p));
		got = payg_price(it, currency, &p.price_micros);
		if (got < 0) {
			rc =
			    isc_err_set(err, ISC_EINVALID,
			                "OCI price list reply %d: part %s: its PAY_AS_YOU_GO value "
			                "is not a non-negative number",
			                page, part);
			break;
		}
		if (!got)
			continue;
		snprintf(p.part_number, sizeof(p.part_number), "%s", part);
		snprintf(p.display_name, sizeof(p.display_name), "%s", name ? name : "");
		snprintf(p.metric_name, sizeof(p.metric_name), "%s", metric ? metric : "");
		snprintf(p.service_category, sizeof(p.service_category), "%s", cat ? cat : "");
		if (*n == *cap) {
			size_t ncap = *cap ? *cap * 2 : 64;
			struct isc_oci_product *g = realloc(*v, ncap * sizeof(*g));
			if (!g) {
				rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
				break;
			}
			*v = g;
			*cap = ncap;
		}
		(*v)[(*n)++] = p;
	}
	*more = !rc && json_is_true(json_object_get(root, "hasMore"));
	json_decref(root);
	return rc;
}

int isc_oci_price_list_fetch(struct isc_http_client *http, const char *base_url,
                             struct isc_oci_product **out, size_t *n, struct isc_err *err)
{
	const char *base = base_url && *base_url ? base_url : ISC_OCI_PRICE_LIST_URL;
	size_t cap = 0, items_read = 0;
	int rc = 0, page = 0, more = 0;

	*out = NULL;
	*n = 0;
	do {
		struct isc_http_request req = {.method = "GET"};
		struct isc_http_response resp;
		struct isc_buf url;

		page++;
		isc_buf_init(&url, 0);
		rc = isc_buf_printf(&url, "%s?currencyCode=USD", base);
		if (!rc && items_read)
			rc = isc_buf_printf(&url, "&offset=%zu", items_read);
		rc = rc ? rc : isc_buf_putc(&url, '\0');
		if (rc) {
			isc_buf_cleanup(&url);
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
			break;
		}
		req.url = url.data;
		isc_http_response_init(&resp);
		rc = isc_http_do(http, &req, isc_http_classify_status, NULL, &resp, err);
		if (rc) {
			char why[ISC_ERR_MSG_MAX];
			snprintf(why, sizeof(why), "%s", err->msg);
			isc_err_set(err, rc, "OCI price list: %.400s", why);
		}
		isc_buf_cleanup(&url);
		if (!rc) {
			json_t *root = json_loadb(resp.body.data ? resp.body.data : "",
			                          resp.body.len, 0, NULL);
			/* offset counts the items of every reply, priced or not */
			items_read += json_array_size(json_object_get(root, "items"));
			json_decref(root);
			rc = isc_oci_price_list_parse(resp.body.data, resp.body.len, page, "USD",
			                              out, n, &cap, &more, err);
		}
		isc_http_response_cleanup(&resp);
	} while (!rc && more && page < MAX_PAGES);
	if (!rc && more)
		rc = isc_err_set(err, ISC_EINVALID,
		                 "OCI price list: more than %d replies; the list is incomplete",
		                 MAX_PAGES);
	if (rc) {
		free(*out);
		*out = NULL;
		*n = 0;
	}
	return rc;
}
