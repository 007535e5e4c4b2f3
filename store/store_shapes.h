/*
 * The shapes table: the GPU catalog the ranking reads (via isc_catalog_load)
 * and the importers and price refreshers write. Ids are looked up
 * case-insensitively; the key is the lower-case id.
 */
#ifndef ISC_STORE_STORE_SHAPES_H
#define ISC_STORE_STORE_SHAPES_H

#include "common/model.h"
#include "store/store.h"

#include <stddef.h>
#include <stdint.h>

/* struct isc_shape, the table's row, and its cleanup and copy: common/model.h. */

/* Number of shapes of `provider` (NULL: all). */
int isc_store_shape_count(struct isc_store *s, const char *provider, int64_t *out,
                          struct isc_err *err);

/* Every shape (provider NULL) or one provider's, ordered by id. Free with isc_shape_list_free. */
int isc_store_shape_list(struct isc_store *s, const char *provider, struct isc_shape **out,
                         size_t *n, struct isc_err *err);

/* One shape by id, any (ASCII) case; ISC_ENOTFOUND when absent. Clean up with isc_shape_cleanup. */
int isc_store_shape_get(struct isc_store *s, const char *id, struct isc_shape *out,
                        struct isc_err *err);

struct isc_shapes_apply_result {
	size_t added, updated, unchanged, removed;
};

/*
 * Writes shapes in one transaction: new ids are added, known ones updated.
 * With `replace`, shapes of `provider` that are not in the list are removed
 * afterwards, so the provider's catalog is exactly the list; other providers
 * are never touched. Every shape must belong to `provider` (NULL: any, only
 * without replace). Nothing is written when anything fails.
 */
int isc_store_shapes_apply(struct isc_store *s, const char *provider,
                           const struct isc_shape *shapes, size_t n, int replace,
                           struct isc_shapes_apply_result *res, struct isc_err *err);

/*
 * Writes shapes only into an empty shapes table, checked under the store's
 * write lock, so of several processes seeding one new store at once exactly
 * one writes and the others wait for it once instead of each rewriting every
 * row (a shipped catalog is thousands). `added` is 0 when shapes were there.
 */
int isc_store_shapes_seed(struct isc_store *s, const struct isc_shape *shapes, size_t n,
                          size_t *added, struct isc_err *err);

/*
 * The price refresh slot (e.g. fed by EC2 DescribeSpotPriceHistory): sets the
 * node-hour price of one shape. The table keeps one price per shape, so a
 * driver that reads per-zone prices reports the zone it would launch in
 * (normally the cheapest) with that zone's price; `zone` (NULL or "": none)
 * is then moved to the front of the shape's zone list (added when absent),
 * so the launcher tries it first. `price_date` NULL means today (UTC). The
 * price becomes a live one (price_source "aws-spot-history"), read from the cloud at
 * checked_ms (0: now).
 * ISC_ENOTFOUND for an unknown shape.
 */
int isc_store_shape_set_price(struct isc_store *s, const char *shape_id, const char *zone,
                              int64_t price_micros, const char *price_date, int64_t checked_ms,
                              struct isc_err *err);

/* One shape's new price in a batch (isc_store_shape_prices_set). Borrowed. */
struct isc_shape_price_update {
	const char *shape_id;
	int64_t price_micros;
};

/*
 * The list-price refreshes (GCP billing catalog, OCI price list, AWS price
 * list): writes every price of the batch as coming from `source` (its name
 * is stored in price_source), read at checked_ms, and notes the source's
 * success (price_refreshes), in one transaction. `changed`: how many prices
 * moved. Nothing is written when anything fails (ISC_ENOTFOUND: a shape id).
 */
int isc_store_shape_prices_set(struct isc_store *s, const char *source,
                               const struct isc_shape_price_update *u, size_t n, int64_t checked_ms,
                               size_t *changed, struct isc_err *err);

/*
 * Notes that `source` could not be read at tried_ms, and why: its prices are
 * left alone, and so are the time and count of its last success.
 */
int isc_store_price_refresh_failed(struct isc_store *s, const char *source, int64_t tried_ms,
                                   const char *error, struct isc_err *err);

/* One row of price_refreshes: a price source's last attempt and last success. */
struct isc_price_refresh_row {
	char *source;
	int64_t tried_at_ms, ok_at_ms; /* 0: never */
	int64_t shapes;                /* priced by the last success */
	char *error;                   /* of the last attempt; "" when it succeeded */
};
int isc_store_price_refresh_list(struct isc_store *s, struct isc_price_refresh_row **out, size_t *n,
                                 struct isc_err *err);
void isc_price_refresh_rows_free(struct isc_price_refresh_row *rows, size_t n);

struct isc_shapes_summary {
	char *provider;
	int64_t shapes, regions;
	char *price_date_min, *price_date_max; /* YYYY-MM-DD */
};
/* One row per provider that has shapes, by provider name. */
int isc_store_shapes_summary(struct isc_store *s, struct isc_shapes_summary **out, size_t *n,
                             struct isc_err *err);
void isc_shapes_summary_free(struct isc_shapes_summary *list, size_t n);

#endif
