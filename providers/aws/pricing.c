/* GetProducts of the AWS Price List Query API (see pricing.h). */
#include "providers/aws/pricing.h"

#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int isc_aws_pricing_request(struct isc_buf *b, const char *instance_type, const char *region,
                            const char *next)
{
	static const char *const fixed[][2] = {{"operatingSystem", "Linux"},
	                                       {"tenancy", "Shared"},
	                                       {"preInstalledSw", "NA"},
	                                       {"capacitystatus", "Used"}};
	json_t *o = json_object(), *f = json_array();
	char *text;
	int rc;

	json_array_append_new(f, json_pack("{s:s,s:s,s:s}", "Type", "TERM_MATCH", "Field",
	                                   "instanceType", "Value", instance_type));
	json_array_append_new(f, json_pack("{s:s,s:s,s:s}", "Type", "TERM_MATCH", "Field",
	                                   "regionCode", "Value", region));
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		json_array_append_new(f, json_pack("{s:s,s:s,s:s}", "Type", "TERM_MATCH", "Field",
		                                   fixed[i][0], "Value", fixed[i][1]));
	json_object_set_new(o, "ServiceCode", json_string("AmazonEC2"));
	json_object_set_new(o, "Filters", f);
	json_object_set_new(o, "FormatVersion", json_string("aws_v1"));
	json_object_set_new(o, "MaxResults", json_integer(100));
	if (next)
		json_object_set_new(o, "NextToken", json_string(next));
	text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (!text)
		return ISC_ENOMEM;
	isc_buf_reset(b);
	rc = isc_buf_puts(b, text);
	free(text);
	return rc;
}

int isc_aws_pricing_decimal(const char *s, int64_t *micros)
{
	int64_t v = 0;
	int frac = -1, round = 0;

	if (!s || !*s)
		return -1;
	for (const char *p = s; *p; p++) {
		if (*p == '.' && frac < 0) {
			frac = 0;
			continue;
		}
		if (!isdigit((unsigned char)*p))
			return -1;
		if (frac >= 6) {
			if (frac == 6)
				round = *p >= '5';
			frac++;
			continue;
		}
		if (v > 1000000000000000LL)
			return -1;
		v = v * 10 + (*p - '0');
		if (frac >= 0)
			frac++;
	}
	for (int k = frac < 0 ? 0 : frac > 6 ? 6 : frac; k < 6; k++)
		v *= 10;
	*micros = v + round;
	return 0;
}

static const char *str_at(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

/* The dearest hourly USD price of the product's OnDemand terms: 0, or -1 with why. */
static int ondemand_price(json_t *prod, int64_t *out, const char **why)
{
	json_t *terms = json_object_get(json_object_get(prod, "terms"), "OnDemand"), *term, *dims,
	       *dim;
	const char *tk, *dk;
	int found = 0;

	if (!json_is_object(terms) || json_object_size(terms) == 0) {
		*why = "no terms.OnDemand";
		return -1;
	}
	json_object_foreach(terms, tk, term)
	{
		dims = json_object_get(term, "priceDimensions");
		json_object_foreach(dims, dk, dim)
		{
			const char *unit = str_at(dim, "unit");
			const char *usd = str_at(json_object_get(dim, "pricePerUnit"), "USD");
			int64_t p;
			if (!unit || strcmp(unit, "Hrs") != 0)
				continue;
			if (isc_aws_pricing_decimal(usd, &p)) {
				*why = "pricePerUnit.USD is not a decimal";
				return -1;
			}
			if (!found || p > *out)
				*out = p;
			found = 1;
		}
	}
	if (!found) {
		*why = "no OnDemand price dimension in Hrs";
		return -1;
	}
	return 0;
}

int isc_aws_pricing_parse(const char *json, size_t len, int page, struct isc_price_point **v,
                          size_t *n, size_t *cap, char **next, struct isc_err *err)
{
	json_error_t jerr;
	json_t *root = json_loadb(json ? json : "", len, 0, &jerr), *list, *e;
	const char *tok;
	size_t i;
	int rc = 0;

	*next = NULL;
	if (!json_is_object(root)) {
		json_decref(root);
		return isc_err_set(err, ISC_EINVALID,
		                   "GetProducts reply %d: not a JSON object (%s)", page,
		                   jerr.text[0] ? jerr.text : "wrong type");
	}
	list = json_object_get(root, "PriceList");
	if (!json_is_array(list)) {
		json_decref(root);
		return isc_err_set(err, ISC_EINVALID, "GetProducts reply %d: no PriceList array",
		                   page);
	}
	json_array_foreach(list, i, e)
	{
		json_t *prod, *attrs;
		const char *sku, *it, *why = NULL;
		int64_t price = 0;
		size_t j;

		/* Each entry is a string holding the product's own JSON document. */
		if (!json_is_string(e) || !(prod = json_loads(json_string_value(e), 0, &jerr)) ||
		    !json_is_object(prod)) {
			rc = isc_err_set(
			    err, ISC_EINVALID,
			    "GetProducts reply %d: PriceList[%zu] is not a string of JSON", page,
			    i);
			break;
		}
		sku = str_at(json_object_get(prod, "product"), "sku");
		attrs = json_object_get(json_object_get(prod, "product"), "attributes");
		it = str_at(attrs, "instanceType");
		if (!it || !*it || strlen(it) >= sizeof((*v)->instance_type))
			why = "no product.attributes.instanceType";
		else
			ondemand_price(prod, &price, &why);
		if (why) {
			rc = isc_err_set(err, ISC_EINVALID, "GetProducts reply %d: product %s: %s",
			                 page, sku ? sku : "(no sku)", why);
			json_decref(prod);
			break;
		}
		for (j = 0; j < *n; j++)
			if (!strcmp((*v)[j].instance_type, it))
				break;
		if (j == *n) {
			if (*n == *cap) {
				size_t ncap = *cap ? *cap * 2 : 16;
				struct isc_price_point *g = realloc(*v, ncap * sizeof(*g));
				if (!g) {
					json_decref(prod);
					rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
					break;
				}
				*v = g;
				*cap = ncap;
			}
			memset(&(*v)[j], 0, sizeof((*v)[j]));
			snprintf((*v)[j].instance_type, sizeof((*v)[j].instance_type), "%s", it);
			(*v)[j].price_micros_per_hour = price;
			(*n)++;
		} else if (price > (*v)[j].price_micros_per_hour) {
			(*v)[j].price_micros_per_hour = price;
		}
		json_decref(prod);
	}
	tok = str_at(root, "NextToken");
	if (!rc && tok && *tok && !(*next = strdup(tok)))
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
	json_decref(root);
	return rc;
}
