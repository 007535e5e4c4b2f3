/*
 * Oracle's public price list (no authentication):
 *   GET https://apexapps.oracle.com/pls/apex/cetools/api/v1/products/?currencyCode=USD
 * {"items": [{partNumber, displayName, metricName, serviceCategory,
 *   currencyCodeLocalizations: [{currencyCode, prices: [{model, value}]}]}]}
 * (Oracle's "Cost Estimator" API, as the price list page and public fetchers use it).
 * This module speaks the list only: which product prices which shape is
 * prices/oci_prices.c's business.
 */
#ifndef ISC_PROVIDERS_OCI_OCI_PRICELIST_H
#define ISC_PROVIDERS_OCI_OCI_PRICELIST_H

#include "common/err.h"
#include "net/http.h"

#include <stddef.h>
#include <stdint.h>

#define ISC_OCI_PRICE_LIST_URL "https://apexapps.oracle.com/pls/apex/cetools/api/v1/products/"

/* One product with a pay-as-you-go price in the currency asked for. */
struct isc_oci_product {
	char part_number[24];   /* "B98415" */
	char display_name[160]; /* "Compute - GPU - H100" */
	char metric_name[64];   /* "GPU Per Hour", "OCPU Per Hour", ... */
	char service_category[64];
	int64_t price_micros; /* per metric unit, PAY_AS_YOU_GO */
};

/*
 * Reads one reply of the list, appending its products to *v. Products
 * without a PAY_AS_YOU_GO price in `currency` (free tiers, other models) are
 * skipped. *more is 1 when the reply says hasMore (ORDS paging). A reply
 * that is not the list's shape (not JSON, no items array, an item without a
 * partNumber, a price that is not a non-negative number) is ISC_EINVALID
 * naming the reply and the part number.
 */
int isc_oci_price_list_parse(const char *json, size_t len, int page, const char *currency,
                             struct isc_oci_product **v, size_t *n, size_t *cap, int *more,
                             struct isc_err *err);

/*
 * The whole list from base_url (NULL: ISC_OCI_PRICE_LIST_URL), in USD. When
 * a reply says hasMore, the next is asked with offset= the items read so far
 * (ORDS's paging, of which this API's own pages say nothing); at most 50.
 */
int isc_oci_price_list_fetch(struct isc_http_client *http, const char *base_url,
                             struct isc_oci_product **out, size_t *n, struct isc_err *err);

#endif
