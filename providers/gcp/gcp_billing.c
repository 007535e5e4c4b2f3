/* The Cloud Billing Catalog API's Compute SKUs (see gcp_billing.h). */
#include "providers/gcp/gcp_billing.h"

#include "common/buf.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void isc_gcp_skus_free(struct isc_gcp_sku *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i].regions);
	free(v);
}

static const char *str_at(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

/*
 * Money (google.type.Money): units is an int64 sent as a JSON string (proto3's
 * JSON mapping of int64), nanos an int32 in [0, 1e9) for a non-negative amount.
 * A price is never negative, so both must be >= 0.
 */
static int money_nanos(json_t *price, int64_t *out, const char **why)
{
	json_t *u = json_object_get(price, "units"), *nn = json_object_get(price, "nanos");
	long long units = 0, nanos = 0;

	if (u) {
		const char *s = json_is_string(u) ? json_string_value(u) : NULL;
		char *end;
		if (!s || !*s || !isdigit((unsigned char)s[0])) {
			*why = "unitPrice.units is not a non-negative integer string";
			return -1;
		}
		errno = 0;
		units = strtoll(s, &end, 10);
		if (*end || errno || units > 1000000000LL) {
			*why = "unitPrice.units is not a non-negative integer string";
			return -1;
		}
	}
	if (nn) {
		if (!json_is_integer(nn) || json_integer_value(nn) < 0 ||
		    json_integer_value(nn) >= 1000000000LL) {
			*why = "unitPrice.nanos is not an integer in [0, 999999999]";
			return -1;
		}
		nanos = json_integer_value(nn);
	}
	*out = (int64_t)units * 1000000000LL + (int64_t)nanos;
	return 0;
}

/* The SKU's price per usage unit: the first pricingInfo, its tier that starts at 0. */
static int sku_price(json_t *sku, const char *currency, struct isc_gcp_sku *out, const char **why)
{
	json_t *pi = json_array_get(json_object_get(sku, "pricingInfo"), 0);
	json_t *expr = json_object_get(pi, "pricingExpression");
	json_t *tiers = json_object_get(expr, "tieredRates"), *t;
	const char *unit = str_at(expr, "usageUnit"), *cur;
	size_t i;

	if (!pi || !json_is_object(expr)) {
		*why = "no pricingInfo[0].pricingExpression";
		return -1;
	}
	if (!unit || !*unit || strlen(unit) >= sizeof(out->usage_unit)) {
		*why = "no pricingExpression.usageUnit";
		return -1;
	}
	snprintf(out->usage_unit, sizeof(out->usage_unit), "%s", unit);
	if (!json_is_array(tiers) || json_array_size(tiers) == 0) {
		*why = "no pricingExpression.tieredRates";
		return -1;
	}
	/* Tiers are ordered by startUsageAmount; a machine's hours start at the first. */
	json_array_foreach(tiers, i, t)
	{
		json_t *start = json_object_get(t, "startUsageAmount");
		if (!start || json_number_value(start) == 0)
			break;
	}
	if (i == json_array_size(tiers)) {
		*why = "no tieredRates entry with startUsageAmount 0";
		return -1;
	}
	t = json_object_get(json_array_get(tiers, i), "unitPrice");
	if (!json_is_object(t)) {
		*why = "a tieredRates entry without unitPrice";
		return -1;
	}
	cur = str_at(t, "currencyCode");
	if (cur && strcmp(cur, currency) != 0) {
		*why = "unitPrice.currencyCode is not the currency asked for";
		return -1;
	}
	return money_nanos(t, &out->nanos, why);
}

static int regions_join(json_t *arr, char **out)
{
	struct isc_buf b;
	json_t *r;
	size_t i;
	int rc = 0;

	isc_buf_init(&b, 0);
	json_array_foreach(arr, i, r)
	{
		if (!json_is_string(r))
			continue;
		if (b.len)
			rc = rc ? rc : isc_buf_putc(&b, ',');
		rc = rc ? rc : isc_buf_puts(&b, json_string_value(r));
	}
	rc = rc ? rc : isc_buf_putc(&b, '\0');
	if (rc) {
		isc_buf_cleanup(&b);
		return ISC_ENOMEM;
	}
	*out = isc_buf_detach(&b);
	return *out ? 0 : ISC_ENOMEM;
}

int isc_gcp_billing_parse(const char *json, size_t len, int page, const char *currency,
                          struct isc_gcp_sku **v, size_t *n, size_t *cap, char **next,
                          struct isc_err *err)
{
	json_error_t jerr;
	json_t *root = json_loadb(json ? json : "", len, 0, &jerr), *skus, *sku;
	const char *tok;
	size_t i;
	int rc = 0;

	*next = NULL;
	if (!json_is_object(root)) {
		json_decref(root);
		return isc_err_set(err, ISC_EINVALID,
		                   "Cloud Billing Catalog skus page %d: not a JSON object (%s)",
		                   page, jerr.text[0] ? jerr.text : "wrong type");
	}
	skus = json_object_get(root, "skus");
	if (skus && !json_is_array(skus)) {
		json_decref(root);
		return isc_err_set(err, ISC_EINVALID,
		                   "Cloud Billing Catalog skus page %d: \"skus\" is not an array",
		                   page);
	}
	json_array_foreach(skus, i, sku)
	{
		json_t *cat = json_object_get(sku, "category");
		const char *id = str_at(sku, "skuId"), *fam = str_at(cat, "resourceFamily");
		const char *usage = str_at(cat, "usageType"), *desc = str_at(sku, "description");
		const char *group = str_at(cat, "resourceGroup"), *why = NULL;
		struct isc_gcp_sku s;

		if (!id || !*id || strlen(id) >= sizeof(s.sku_id)) {
			rc =
			    isc_err_set(err, ISC_EINVALID,
			                "Cloud Billing Catalog skus page %d: SKU #%zu has no skuId",
			                page, i + 1);
			break;
		}
		if (!json_is_object(cat) || !fam || !usage) {
			rc = isc_err_set(err, ISC_EINVALID,
			                 "Cloud Billing Catalog skus page %d: SKU %s has no "
			                 "category.resourceFamily/usageType",
			                 page, id);
			break;
		}
		if (strcmp(fam, "Compute") != 0 ||
		    (strcmp(usage, "OnDemand") != 0 && strcmp(usage, "Preemptible") != 0))
			continue;
		memset(&s, 0, sizeof(s));
		snprintf(s.sku_id, sizeof(s.sku_id), "%s", id);
		snprintf(s.description, sizeof(s.description), "%s", desc ? desc : "");
		snprintf(s.resource_group, sizeof(s.resource_group), "%s", group ? group : "");
		s.preemptible = strcmp(usage, "Preemptible") == 0;
		if (sku_price(sku, currency, &s, &why)) {
			rc = isc_err_set(err, ISC_EINVALID,
			                 "Cloud Billing Catalog skus page %d: SKU %s (%.80s): %s",
			                 page, id, s.description, why);
			break;
		}
		if (*n == *cap) {
			size_t ncap = *cap ? *cap * 2 : 64;
			struct isc_gcp_sku *g = realloc(*v, ncap * sizeof(*g));
			if (!g) {
				rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
				break;
			}
			*v = g;
			*cap = ncap;
		}
		if (regions_join(json_object_get(sku, "serviceRegions"), &s.regions)) {
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
			break;
		}
		(*v)[(*n)++] = s;
	}
	tok = str_at(root, "nextPageToken");
	if (!rc && tok && *tok && !(*next = strdup(tok)))
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
	json_decref(root);
	return rc;
}

/* Percent-encodes a query value (a page token is opaque; the key is the caller's). */
static int put_query_value(struct isc_buf *b, const char *v)
{
	int rc = 0;
	for (; *v && !rc; v++) {
		unsigned char c = (unsigned char)*v;
		if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~')
			rc = isc_buf_putc(b, (char)c);
		else
			rc = isc_buf_printf(b, "%%%02X", c);
	}
	return rc;
}

/* The API's error envelope {"error": {"code", "message", "status"}} into err. */
static int classify(void *ctx, const struct isc_http_response *resp, struct isc_err *err)
{
	json_t *root, *e;
	const char *msg, *status;
	int rc;

	(void)ctx;
	rc = isc_http_classify_status(NULL, resp, err);
	if (!rc)
		return 0;
	root = json_loadb(resp->body.data ? resp->body.data : "", resp->body.len, 0, NULL);
	e = json_object_get(root, "error");
	msg = str_at(e, "message");
	status = str_at(e, "status");
	/* An API key refused (400 INVALID_ARGUMENT "API key not valid") is an auth failure. */
	if (status && (!strcmp(status, "PERMISSION_DENIED") || !strcmp(status, "UNAUTHENTICATED") ||
	               (msg && strstr(msg, "API key"))))
		rc = ISC_EAUTH;
	isc_err_set(err, rc, "Cloud Billing Catalog services.skus.list: HTTP %ld %s: %.300s",
	            resp->status, status ? status : "", msg ? msg : "(no error message)");
	json_decref(root);
	return rc;
}

int isc_gcp_billing_list(struct isc_http_client *http, const struct isc_gcp_billing_opts *o,
                         struct isc_gcp_sku **out, size_t *n, struct isc_err *err)
{
	const char *base = o->base_url && *o->base_url ? o->base_url : ISC_GCP_BILLING_URL;
	const char *currency = o->currency && *o->currency ? o->currency : "USD";
	int max_pages = o->max_pages > 0 ? o->max_pages : 100;
	size_t cap = 0;
	char *next = NULL;
	int rc = 0, page = 0;

	*out = NULL;
	*n = 0;
	if (!o->api_key || !*o->api_key)
		return isc_err_set(err, ISC_EAUTH, "Cloud Billing Catalog: no API key");
	do {
		struct isc_http_request req = {.method = "GET"};
		struct isc_http_response resp;
		struct isc_buf url;

		page++;
		isc_buf_init(&url, 0);
		rc = isc_buf_printf(&url, "%s%sservices/%s/skus?currencyCode=", base,
		                    base[strlen(base) - 1] == '/' ? "" : "/",
		                    ISC_GCP_COMPUTE_SERVICE);
		rc = rc ? rc : put_query_value(&url, currency);
		rc = rc ? rc
		        : isc_buf_printf(&url, "&pageSize=%d",
		                         o->page_size > 0 ? o->page_size : 5000);
		if (!rc && next) {
			rc = isc_buf_puts(&url, "&pageToken=");
			rc = rc ? rc : put_query_value(&url, next);
		}
		rc = rc ? rc : isc_buf_puts(&url, "&key=");
		rc = rc ? rc : put_query_value(&url, o->api_key);
		rc = rc ? rc : isc_buf_putc(&url, '\0');
		free(next);
		next = NULL;
		if (rc) {
			isc_buf_cleanup(&url);
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
			break;
		}
		req.url = url.data;
		isc_http_response_init(&resp);
		rc = isc_http_do(http, &req, classify, NULL, &resp, err);
		/* The URL holds the key: wiped before it is freed. */
		memset(url.data, 0, url.len);
		isc_buf_cleanup(&url);
		if (!rc)
			rc = isc_gcp_billing_parse(resp.body.data, resp.body.len, page, currency,
			                           out, n, &cap, &next, err);
		isc_http_response_cleanup(&resp);
	} while (!rc && next && page < max_pages);
	if (!rc && next)
		rc = isc_err_set(
		    err, ISC_EINVALID,
		    "Cloud Billing Catalog: more than %d pages; the SKU list is incomplete",
		    max_pages);
	free(next);
	if (rc) {
		isc_gcp_skus_free(*out, *n);
		*out = NULL;
		*n = 0;
	}
	return rc;
}
