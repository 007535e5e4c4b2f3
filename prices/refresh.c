/* Live spot prices (see refresh.h). */
#include "prices/refresh.h"

#include "common/clock.h"
#include "common/log.h"
#include "providers/provider_config.h"
#include "store/store_shapes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void isc_price_targets_free(struct isc_price_target *t, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(t[i].provider);
		free(t[i].region);
		free(t[i].instance_type);
	}
	free(t);
}

int isc_price_targets_add(struct isc_price_target **v, size_t *n, const char *provider,
                          const char *region, const char *instance_type)
{
	struct isc_price_target *grown, *t;

	for (size_t i = 0; i < *n; i++)
		if (!strcmp((*v)[i].provider, provider) && !strcmp((*v)[i].region, region) &&
		    !strcmp((*v)[i].instance_type, instance_type))
			return 0;
	if (!(grown = realloc(*v, (*n + 1) * sizeof(**v))))
		return ISC_ENOMEM;
	*v = grown;
	t = &grown[*n];
	t->provider = strdup(provider);
	t->region = strdup(region);
	t->instance_type = strdup(instance_type);
	(*n)++;
	return t->provider && t->region && t->instance_type ? 0 : ISC_ENOMEM;
}

static int region_configured(const struct isc_provider_config *pc, const char *region)
{
	for (size_t i = 0; i < pc->n_regions; i++)
		if (strcmp(pc->regions[i], region) == 0)
			return 1;
	return 0;
}

int isc_price_targets_configured(struct isc_store *s, const struct isc_config *cfg,
                                 const char *provider, struct isc_price_target **out, size_t *n,
                                 struct isc_err *err)
{
	*out = NULL;
	*n = 0;
	for (size_t p = 0; p < cfg->n_providers; p++) {
		const struct isc_provider_config *pc = &cfg->providers[p];
		struct isc_shape *shapes;
		size_t ns;
		int rc;

		if (provider && strcmp(pc->name, provider) != 0)
			continue;
		if ((rc = isc_store_shape_list(s, pc->name, &shapes, &ns, err))) {
			isc_price_targets_free(*out, *n);
			return rc;
		}
		for (size_t i = 0; i < ns && !rc; i++)
			if (shapes[i].spot && region_configured(pc, shapes[i].region))
				rc = isc_price_targets_add(out, n, pc->name, shapes[i].region,
				                           shapes[i].instance_type);
		isc_shape_list_free(shapes, ns);
		if (rc) {
			isc_price_targets_free(*out, *n);
			*out = NULL;
			*n = 0;
			return isc_err_set(err, ISC_ENOMEM, "out of memory");
		}
	}
	return 0;
}

/* Is `zone` one of the comma-separated `zones`? */
static int zone_listed(const char *zones, const char *zone)
{
	size_t zl = strlen(zone);
	for (const char *z = zones; *z;) {
		const char *end = strchr(z, ',');
		size_t len = end ? (size_t)(end - z) : strlen(z);
		if (len == zl && strncmp(z, zone, zl) == 0)
			return 1;
		z += len + (end ? 1 : 0);
	}
	return 0;
}

/* The shape's price from the points: the highest over its zones (any zone when it lists none). */
static int shape_price(const struct isc_shape *sh, const struct isc_price_point *pts, size_t n,
                       int64_t *price)
{
	int found = 0;
	for (size_t i = 0; i < n; i++) {
		if (strcmp(pts[i].instance_type, sh->instance_type) != 0)
			continue;
		if (sh->zones[0] && !zone_listed(sh->zones, pts[i].zone))
			continue;
		if (!found || pts[i].price_micros_per_hour > *price)
			*price = pts[i].price_micros_per_hour;
		found = 1;
	}
	return found;
}

/* Writes the batch's prices onto the spot shapes of provider+region. */
static int apply_batch(struct isc_store *s, const char *provider, const char *region,
                       const struct isc_price_point *pts, size_t npts, int64_t checked_ms,
                       struct isc_price_refresh_result *res, struct isc_err *err)
{
	struct isc_shape *shapes;
	size_t ns;
	char today[16];
	time_t t = (time_t)(checked_ms / 1000);
	struct tm tm;
	int rc;

	gmtime_r(&t, &tm);
	strftime(today, sizeof(today), "%Y-%m-%d", &tm);
	if ((rc = isc_store_shape_list(s, provider, &shapes, &ns, err)))
		return rc;
	for (size_t i = 0; i < ns && !rc; i++) {
		int64_t price = 0;
		if (!shapes[i].spot || strcmp(shapes[i].region, region) != 0 ||
		    !shape_price(&shapes[i], pts, npts, &price))
			continue;
		rc =
		    isc_store_shape_set_price(s, shapes[i].id, NULL, price, today, checked_ms, err);
		if (!rc) {
			res->updated++;
			res->changed += price != shapes[i].price_micros;
		}
	}
	isc_shape_list_free(shapes, ns);
	return rc;
}

static int cmp_target(const void *a, const void *b)
{
	const struct isc_price_target *x = a, *y = b;
	int c = strcmp(x->provider, y->provider);
	return c ? c : strcmp(x->region, y->region);
}

int isc_prices_refresh(struct isc_store *s, const struct isc_config *cfg,
                       const struct isc_price_target *targets, size_t n,
                       struct isc_price_refresh_result *res, struct isc_err *err)
{
	struct isc_price_target *sorted = NULL;
	const char **types = NULL;
	int rc = 0;

	memset(res, 0, sizeof(*res));
	if (n == 0)
		return 0;
	sorted = malloc(n * sizeof(*sorted));
	types = malloc(n * sizeof(*types));
	if (!sorted || !types) {
		free(sorted);
		free(types);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	memcpy(sorted, targets, n * sizeof(*sorted));
	qsort(sorted, n, sizeof(*sorted), cmp_target);
	for (size_t i = 0; i < n && !rc;) {
		struct isc_provider_session *sess = NULL;
		struct isc_price_point *pts = NULL;
		struct isc_err berr;
		size_t j = i, nt = 0, npts = 0;
		int brc;

		/* One batch: every instance type of this provider and region. */
		while (j < n && cmp_target(&sorted[i], &sorted[j]) == 0)
			types[nt++] = sorted[j++].instance_type;
		res->calls++;
		brc = isc_provider_session_open(cfg, sorted[i].provider, sorted[i].region, &sess,
		                                &berr);
		if (!brc && !sess->provider->refresh_prices) {
			res->list_only++;
		} else if (!brc) {
			brc = sess->provider->refresh_prices(sess, types, nt, &pts, &npts, &berr);
			if (!brc)
				rc = apply_batch(
				    s, sorted[i].provider, sorted[i].region, pts, npts,
				    isc_clock_system()->now_ms(isc_clock_system()->ctx), res, err);
			isc_price_points_free(pts, npts);
		}
		if (sess)
			sess->provider->session_free(sess);
		if (brc) {
			res->failed++;
			snprintf(res->last_error, sizeof(res->last_error), "%.16s %.64s: %.400s",
			         sorted[i].provider, sorted[i].region, berr.msg);
			isc_log(ISC_LOG_WARN, "price refresh: %s", res->last_error);
		}
		i = j;
	}
	free(types);
	free(sorted);
	return rc;
}
