/*
 * The risk refresh: drivers' capacity answers and the broker's own history into
 * risk_facts (prices/risk.h).
 */
#include "prices/risk.h"

#include "common/clock.h"
#include "common/log.h"
#include "providers/provider.h"
#include "providers/provider_config.h"
#include "shapes/shape.h"
#include "store/store_risk.h"
#include "store/store_shapes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void isc_risk_targets_free(struct isc_risk_target *t, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(t[i].provider);
		free(t[i].region);
		free(t[i].instance_type);
		free(t[i].zones);
	}
	free(t);
}

int isc_risk_targets_add(struct isc_risk_target **v, size_t *n, const char *provider,
                         const char *region, const char *instance_type, const char *zones, int spot,
                         int nodes)
{
	struct isc_risk_target *nv, *t;
	for (size_t i = 0; i < *n; i++)
		if (!strcmp((*v)[i].provider, provider) && !strcmp((*v)[i].region, region) &&
		    !strcmp((*v)[i].instance_type, instance_type) && (*v)[i].spot == spot &&
		    (*v)[i].nodes == nodes)
			return 0;
	if (!(nv = realloc(*v, (*n + 1) * sizeof(*nv))))
		return ISC_ENOMEM;
	*v = nv;
	t = &nv[*n];
	t->provider = strdup(provider);
	t->region = strdup(region);
	t->instance_type = strdup(instance_type);
	t->zones = strdup(zones ? zones : "");
	t->spot = spot;
	t->nodes = nodes;
	(*n)++;
	return t->provider && t->region && t->instance_type && t->zones ? 0 : ISC_ENOMEM;
}

static int region_configured(const struct isc_provider_config *pc, const char *region)
{
	for (size_t i = 0; i < pc->n_regions; i++)
		if (strcmp(pc->regions[i], region) == 0)
			return 1;
	return 0;
}

int isc_risk_targets_configured(struct isc_store *s, const struct isc_config *cfg, int gpus,
                                struct isc_risk_target **out, size_t *n, struct isc_err *err)
{
	*out = NULL;
	*n = 0;
	for (size_t p = 0; p < cfg->n_providers; p++) {
		const struct isc_provider_config *pc = &cfg->providers[p];
		struct isc_shape *shapes;
		size_t ns;
		int rc;

		if (strcmp(pc->name, "aws") && strcmp(pc->name, "oci"))
			continue; /* GCP: no capacity source the driver uses (docs/shapes.md) */
		if ((rc = isc_store_shape_list(s, pc->name, &shapes, &ns, err))) {
			isc_risk_targets_free(*out, *n);
			*out = NULL;
			*n = 0;
			return rc;
		}
		for (size_t i = 0; i < ns && !rc; i++) {
			int nodes = 1, nproc;
			/* AWS: spot only (the advisor and the scores are about spot). */
			if ((!shapes[i].spot && !strcmp(pc->name, "aws")) ||
			    !region_configured(pc, shapes[i].region) ||
			    (gpus > 0 &&
			     isc_shape_layout(gpus, shapes[i].gpus_per_node, &nodes, &nproc)))
				continue;
			rc = isc_risk_targets_add(out, n, pc->name, shapes[i].region,
			                          shapes[i].instance_type, shapes[i].zones,
			                          shapes[i].spot, nodes);
		}
		isc_shape_list_free(shapes, ns);
		if (rc) {
			isc_risk_targets_free(*out, *n);
			*out = NULL;
			*n = 0;
			return isc_err_set(err, ISC_ENOMEM, "out of memory");
		}
	}
	return 0;
}

static int cmp_target(const void *a, const void *b)
{
	const struct isc_risk_target *x = a, *y = b;
	int c = strcmp(x->provider, y->provider);
	if (!c)
		c = strcmp(x->region, y->region);
	return c ? c : x->nodes - y->nodes;
}

/* The driver's answers as facts of provider+region, stamped now. */
static int to_facts(const char *provider, const char *region, const struct isc_capacity_fact *cf,
                    size_t n, int64_t now_ms, struct isc_risk_fact **out)
{
	struct isc_risk_fact *f = calloc(n ? n : 1, sizeof(*f));
	if (!f)
		return ISC_ENOMEM;
	for (size_t i = 0; i < n; i++) {
		f[i].provider = strdup(provider);
		f[i].region = strdup(region);
		f[i].zone = strdup(cf[i].zone);
		f[i].instance_type = strdup(cf[i].instance_type);
		f[i].market = strdup(cf[i].market);
		f[i].source = strdup(cf[i].source);
		f[i].detail = strdup(cf[i].detail);
		f[i].target = cf[i].target;
		f[i].value = cf[i].value;
		f[i].value2 = cf[i].value2;
		f[i].fetched_ms = now_ms;
		if (!f[i].provider || !f[i].region || !f[i].zone || !f[i].instance_type ||
		    !f[i].market || !f[i].source || !f[i].detail) {
			isc_risk_fact_list_free(f, n);
			return ISC_ENOMEM;
		}
	}
	*out = f;
	return 0;
}

/* Adds each zone of a shape's list ("a,b" as stored; "a;b" as in a CSV) to zones (unique). */
static int zones_add(const char ***zones, size_t *n, const char *list, char **owned)
{
	char *copy = strdup(list ? list : ""), *save = NULL;
	if (!copy)
		return ISC_ENOMEM;
	*owned = copy;
	for (char *z = strtok_r(copy, ",;", &save); z; z = strtok_r(NULL, ",;", &save)) {
		size_t k = 0;
		const char **nz;
		while (k < *n && strcmp((*zones)[k], z))
			k++;
		if (k < *n)
			continue;
		if (!(nz = realloc(*zones, (*n + 1) * sizeof(*nz))))
			return ISC_ENOMEM;
		*zones = nz;
		nz[(*n)++] = z;
	}
	return 0;
}

int isc_risk_refresh(struct isc_store *s, const struct isc_config *cfg,
                     const struct isc_risk_target *targets, size_t n, int64_t now_ms,
                     struct isc_risk_refresh_result *res, struct isc_err *err)
{
	struct isc_risk_target *sorted = NULL;
	struct isc_risk_fact *hist = NULL;
	size_t nh = 0;
	int rc = 0;

	memset(res, 0, sizeof(*res));
	if (n && !(sorted = malloc(n * sizeof(*sorted))))
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	if (n) {
		memcpy(sorted, targets, n * sizeof(*sorted));
		qsort(sorted, n, sizeof(*sorted), cmp_target);
	}
	for (size_t i = 0; i < n && !rc;) {
		struct isc_provider_session *sess = NULL;
		struct isc_capacity_fact *cf = NULL;
		struct isc_risk_fact *facts = NULL;
		const char **types = NULL, **zones = NULL;
		char **owned = NULL;
		size_t j = i, nt = 0, nz = 0, ncf = 0;
		struct isc_err berr;
		int brc;

		/* One question: every instance type of this provider, region and gang size. */
		while (j < n && cmp_target(&sorted[i], &sorted[j]) == 0)
			j++;
		types = calloc(j - i, sizeof(*types));
		owned = calloc(j - i, sizeof(*owned));
		if (!types || !owned) {
			free(types);
			free(owned);
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
			break;
		}
		for (size_t k = i; k < j && !rc; k++) {
			size_t d = 0;
			while (d < nt && strcmp(types[d], sorted[k].instance_type))
				d++;
			if (d == nt)
				types[nt++] = sorted[k].instance_type;
			if (zones_add(&zones, &nz, sorted[k].zones, &owned[k - i]))
				rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		}
		res->calls++;
		brc = rc ? rc
		         : isc_provider_session_open(cfg, sorted[i].provider, sorted[i].region,
		                                     &sess, &berr);
		if (!rc && !brc && !sess->provider->capacity) {
			res->none++;
		} else if (!rc && !brc) {
			struct isc_capacity_query q = {types, nt, sorted[i].nodes, zones, nz};
			brc = sess->provider->capacity(sess, &q, &cf, &ncf, &berr);
			if (!brc && ncf) {
				if (to_facts(sorted[i].provider, sorted[i].region, cf, ncf, now_ms,
				             &facts))
					rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
				else if (!(rc = isc_store_risk_put(s, NULL, facts, ncf, err)))
					res->facts += ncf;
				isc_risk_fact_list_free(facts, facts ? ncf : 0);
			}
			free(cf);
		}
		if (sess)
			sess->provider->session_free(sess);
		if (!rc && brc) {
			res->failed++;
			snprintf(res->last_error, sizeof(res->last_error), "%.16s %.64s: %.400s",
			         sorted[i].provider, sorted[i].region, berr.msg);
			isc_log(ISC_LOG_WARN, "risk refresh: %s", res->last_error);
		}
		for (size_t k = 0; k < j - i; k++)
			free(owned[k]);
		free(owned);
		free((void *)zones);
		free((void *)types);
		i = j;
	}
	free(sorted);
	if (rc)
		return rc;
	/* The broker's own record, recomputed whole over the window. */
	if ((rc = isc_store_risk_history(s, now_ms - ISC_RISK_HISTORY_MS, now_ms, &hist, &nh, err)))
		return rc;
	if (!(rc = isc_store_risk_put(s, ISC_RISK_HISTORY, hist, nh, err)))
		res->history = nh;
	isc_risk_fact_list_free(hist, nh);
	return rc;
}
