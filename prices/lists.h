/*
 * List prices read live: each cloud's public price API, on its own schedule,
 * mapped onto the shapes of the store. Where DescribeSpotPriceHistory
 * (refresh.h) moves hourly and is asked per candidate, these change rarely and
 * come whole: one read prices every shape of the provider in its configured
 * regions.
 *
 *   source               provider  API                                  prices
 *   gcp-billing-catalog  gcp       Cloud Billing Catalog services.skus  on-demand and Spot
 *   oci-price-list       oci       apexapps cetools products (public)   on-demand and preemptible
 *   aws-price-list       aws       Price List GetProducts               on-demand
 *
 * Every price written names its source (shapes.price_source) and when it was
 * read (price_checked_ms). A source that cannot be read changes no price: the
 * shapes keep their last one and its age, and price_refreshes says when the
 * source was last tried, last read, and why it failed. A cluster's price is
 * the one recorded on it at launch (its nodes, hold and charges), so no
 * refresh ever changes what a running cluster costs.
 */
#ifndef ISC_PRICES_LISTS_H
#define ISC_PRICES_LISTS_H

#include "common/err.h"
#include "config/config.h"
#include "net/http.h"
#include "store/store.h"

#include <stddef.h>

#define ISC_PRICE_SRC_AWS_SPOT     "aws-spot-history"
#define ISC_PRICE_SRC_GCP          "gcp-billing-catalog"
#define ISC_PRICE_SRC_OCI          "oci-price-list"
#define ISC_PRICE_SRC_AWS_ONDEMAND "aws-price-list"

/* The list-price sources, in the order iscd refreshes them. */
extern const char *const isc_price_list_sources[];
extern const size_t isc_price_list_n_sources;

/* The provider a source prices ("gcp" ...), or NULL for an unknown source. */
const char *isc_price_source_provider(const char *source);

/*
 * How often iscd refreshes `source` (config: price_refresh_gcp_ms,
 * price_refresh_oci_ms, price_refresh_aws_ondemand_ms; price_refresh_ms for
 * aws-spot-history and anything else); 0: never. Also the age past which
 * `isc shapes` marks a price of that source stale.
 */
long isc_price_source_every_ms(const struct isc_config *cfg, const char *source);

/*
 * Whether `source` is set up: its provider's [providers.NAME] section says
 * live_prices = true (iscd calls a public price API only where asked to), and
 * for GCP an API key is given (billing_api_key_file or ISC_GCP_BILLING_API_KEY).
 * Otherwise the provider keeps the catalog's prices.
 */
int isc_price_source_enabled(const struct isc_config *cfg, const char *source);

struct isc_price_list_result {
	const char *source;
	int configured;  /* isc_price_source_enabled */
	int failed;      /* the API could not be read; error says why */
	size_t shapes;   /* shapes of the provider in its configured regions */
	size_t updated;  /* priced (and written) */
	size_t changed;  /* of those, prices that moved */
	size_t unpriced; /* no price for them in the API's answer: they keep theirs */
	char unpriced_example[256];
	char error[ISC_ERR_MSG_MAX];
};

/*
 * Reads `source` now and writes its prices. t NULL: the real (curl)
 * transport. A source not set up is skipped (configured 0).
 * An API that fails (down, refused, a reply that is not its shape) is
 * res->failed, noted in price_refreshes, logged, and returns 0: only store
 * errors fail the call.
 */
int isc_prices_refresh_list(struct isc_store *s, const struct isc_config *cfg, const char *source,
                            const struct isc_http_transport *t, struct isc_price_list_result *res,
                            struct isc_err *err);

#endif
