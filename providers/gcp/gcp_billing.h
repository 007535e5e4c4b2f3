/*
 * The Cloud Billing Catalog API, as far as prices go: every SKU of the
 * Compute Engine service (services/6F81-5844-456A/skus), page by page
 * (pageToken -> nextPageToken), authenticated with an API key (`key=`; a
 * secret: it is in the request URL only, and the HTTP layer cuts the query
 * from every message). Reference:
 * https://cloud.google.com/billing/docs/reference/rest/v1/services.skus/list
 * and the Sku, PricingExpression and Money types it links.
 *
 * This module speaks the API only: which SKUs make up a machine type's price
 * is prices/gcp_prices.c's business.
 */
#ifndef ISC_PROVIDERS_GCP_GCP_BILLING_H
#define ISC_PROVIDERS_GCP_GCP_BILLING_H

#include "common/err.h"
#include "net/http.h"

#include <stddef.h>
#include <stdint.h>

#define ISC_GCP_BILLING_URL     "https://cloudbilling.googleapis.com/v1/"
#define ISC_GCP_COMPUTE_SERVICE "6F81-5844-456A"

/*
 * One priced Compute SKU: category.resourceFamily "Compute" and usageType
 * "OnDemand" or "Preemptible" (Spot). The others (commitments, other
 * families: storage, network, licences) are skipped while reading.
 */
struct isc_gcp_sku {
	char sku_id[32];
	char description[192];   /* "Spot Preemptible N1 Predefined Instance Core running in ..." */
	char resource_group[64]; /* "CPU", "RAM", "GPU", "N1Standard", ... */
	int preemptible;         /* usageType "Preemptible" */
	char usage_unit[16];     /* "h" (per vCPU or GPU hour) or "GiBy.h" */
	int64_t nanos;           /* USD nano-dollars per usage unit (units * 1e9 + nanos) */
	char *regions;           /* serviceRegions, comma-separated; owned */
};

void isc_gcp_skus_free(struct isc_gcp_sku *v, size_t n);

/*
 * Reads one page of services.skus.list, appending the Compute SKUs it prices
 * to *v (n entries, cap allocated). *next is the page's nextPageToken (owned;
 * NULL when it is the last page). The price is the first pricingInfo's
 * tier starting at usage 0, in `currency`. A page that is not the API's shape
 * (not JSON, a SKU without skuId/category/pricingInfo, a unitPrice whose units
 * are not an integer string or whose nanos are out of [0, 1e9), another
 * currency) is ISC_EINVALID naming the page and the SKU.
 */
int isc_gcp_billing_parse(const char *json, size_t len, int page, const char *currency,
                          struct isc_gcp_sku **v, size_t *n, size_t *cap, char **next,
                          struct isc_err *err);

struct isc_gcp_billing_opts {
	const char *base_url; /* NULL: ISC_GCP_BILLING_URL; ends with '/' */
	const char *api_key;  /* required; never logged */
	const char *currency; /* NULL: "USD" */
	int page_size;        /* 0: 5000, the API's default */
	int max_pages;        /* 0: 100; more is an error (an incomplete list) */
};

/* Every priced Compute SKU, all pages. *out owned (isc_gcp_skus_free). */
int isc_gcp_billing_list(struct isc_http_client *http, const struct isc_gcp_billing_opts *o,
                         struct isc_gcp_sku **out, size_t *n, struct isc_err *err);

#endif
