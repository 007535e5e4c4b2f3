/*
 * Live spot prices. The catalog's spot prices are a snapshot that can be days
 * old; spot prices move hourly. A refresh asks each cloud's own price API (the
 * driver's refresh_prices: EC2 DescribeSpotPriceHistory) for the instance
 * types of the spot shapes it is given, one call per provider and region, and
 * writes each shape's new price into the store as a live price, stamped with
 * when it was read. A shape's price is the highest of its zones' prices (of
 * the region's zones when the shape lists none, since the cloud may then pick
 * any zone): a hold made from it never under-reserves, the rule of the catalog
 * import (docs/shapes.md). On-demand shapes keep their list prices.
 *
 * Used by iscd on its schedule (price_refresh_ms, for the candidates of queued
 * and running bursts) and by `isc catalog refresh` on demand. The credit hold
 * and the charges of a cluster use the price recorded on the cluster when it
 * launched, so a refresh never changes what a running cluster costs.
 */
#ifndef ISC_PRICES_REFRESH_H
#define ISC_PRICES_REFRESH_H

#include "common/err.h"
#include "config/config.h"
#include "store/store.h"

#include <stddef.h>

/* One spot shape's instance type to price. Owned strings (isc_price_targets_free). */
struct isc_price_target {
	char *provider;
	char *region;
	char *instance_type;
};

void isc_price_targets_free(struct isc_price_target *t, size_t n);

/* Adds a target unless it is there already. 0 or ISC_ENOMEM. */
int isc_price_targets_add(struct isc_price_target **v, size_t *n, const char *provider,
                          const char *region, const char *instance_type);

/*
 * Every spot shape of the store in a region configured for `provider` (NULL:
 * every configured provider): what `isc catalog refresh` prices.
 */
int isc_price_targets_configured(struct isc_store *s, const struct isc_config *cfg,
                                 const char *provider, struct isc_price_target **out, size_t *n,
                                 struct isc_err *err);

struct isc_price_refresh_result {
	size_t calls;     /* provider+region batches asked */
	size_t updated;   /* shapes whose live price was written */
	size_t changed;   /* of those, shapes whose price moved */
	size_t list_only; /* batches of a provider whose prices are fixed list prices */
	size_t failed;    /* batches that failed; the last reason in last_error */
	char last_error[ISC_ERR_MSG_MAX];
};

/*
 * Refreshes the targets. A batch that fails (credentials, throttling after
 * the HTTP layer's retries, an unreadable reply) is counted and skipped: the
 * other batches still run, and the shapes it covers keep their older price.
 * Fails only on store errors.
 */
int isc_prices_refresh(struct isc_store *s, const struct isc_config *cfg,
                       const struct isc_price_target *targets, size_t n,
                       struct isc_price_refresh_result *res, struct isc_err *err);

#endif
