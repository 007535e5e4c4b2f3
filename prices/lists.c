/* List prices read live from each cloud's price API (see lists.h). */
#include "prices/lists.h"

#include "common/clock.h"
#include "common/log.h"
#include "prices/gcp_prices.h"
#include "prices/oci_prices.h"
#include "providers/gcp/gcp_billing.h"
#include "providers/oci/oci_pricelist.h"
#include "providers/provider_config.h"
#include "store/store_shapes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const isc_price_list_sources[] = {ISC_PRICE_SRC_GCP, ISC_PRICE_SRC_OCI,
                                              ISC_PRICE_SRC_AWS_ONDEMAND};
const size_t isc_price_list_n_sources =
    sizeof(isc_price_list_sources) / sizeof(isc_price_list_sources[0]);

/* A reply of the whole Compute SKU list is a few MB a page; 64 MiB leaves room. */
#define LIST_MAX_RESPONSE (64u << 20)

const char *isc_price_source_provider(const char *source)
{
	if (!strcmp(source, ISC_PRICE_SRC_GCP))
		return "gcp";
	if (!strcmp(source, ISC_PRICE_SRC_OCI))
		return "oci";
	if (!strcmp(source, ISC_PRICE_SRC_AWS_ONDEMAND) || !strcmp(source, ISC_PRICE_SRC_AWS_SPOT))
		return "aws";
	return NULL;
}

long isc_price_source_every_ms(const struct isc_config *cfg, const char *source)
{
	if (!strcmp(source, ISC_PRICE_SRC_GCP))
		return cfg->price_refresh_gcp_ms;
	if (!strcmp(source, ISC_PRICE_SRC_OCI))
		return cfg->price_refresh_oci_ms;
	if (!strcmp(source, ISC_PRICE_SRC_AWS_ONDEMAND))
		return cfg->price_refresh_aws_ondemand_ms;
	return cfg->price_refresh_ms;
}

int isc_price_source_enabled(const struct isc_config *cfg, const char *source)
{
	const char *provider = isc_price_source_provider(source), *v;
	const struct isc_provider_config *pc;

	if (!provider || !strcmp(source, ISC_PRICE_SRC_AWS_SPOT) ||
	    !(pc = isc_config_provider(cfg, provider)))
		return 0;
	/* Opt-in: iscd calls a public price API only where the operator asked for it. */
	v = isc_config_setting(pc, "live_prices");
	if (!v || strcmp(v, "true") != 0)
		return 0;
	if (!strcmp(source, ISC_PRICE_SRC_GCP)) {
		v = isc_config_setting(pc, "billing_api_key_file");
		return (v && *v) ||
		       (getenv("ISC_GCP_BILLING_API_KEY") && *getenv("ISC_GCP_BILLING_API_KEY"));
	}
	return 1;
}

static int region_configured(const struct isc_provider_config *pc, const char *region)
{
	for (size_t i = 0; i < pc->n_regions; i++)
		if (strcmp(pc->regions[i], region) == 0)
			return 1;
	return 0;
}

static void http_init(struct isc_http_client *http, const struct isc_http_transport *t,
                      const struct isc_provider_config *pc)
{
	const char *insecure = isc_config_setting(pc, "allow_insecure_endpoint");
	isc_http_client_init(http, t ? t : isc_http_transport_curl(), isc_clock_system());
	http->policy.max_response_bytes = LIST_MAX_RESPONSE;
	http->policy.allow_insecure = insecure && strcmp(insecure, "true") == 0;
}

/*
 * The API key for the Cloud Billing Catalog: the file named by [providers.gcp]
 * billing_api_key_file, else $ISC_GCP_BILLING_API_KEY. Never in config.toml
 * itself or on a command line. *out owned (wipe, then free); NULL when none.
 */
static int billing_key(const struct isc_provider_config *pc, char **out, char *why, size_t wl)
{
	const char *path = isc_config_setting(pc, "billing_api_key_file");
	const char *env = getenv("ISC_GCP_BILLING_API_KEY");
	char buf[512];
	size_t len;
	FILE *f;

	*out = NULL;
	if (!path || !*path) {
		if (env && *env)
			*out = strdup(env);
		else
			snprintf(why, wl,
			         "no Cloud Billing Catalog API key: set [providers.gcp] "
			         "billing_api_key_file or ISC_GCP_BILLING_API_KEY");
		return *out || !(env && *env) ? 0 : ISC_ENOMEM;
	}
	if (!(f = fopen(path, "r"))) {
		snprintf(why, wl, "cannot read billing_api_key_file %s", path);
		return 0;
	}
	len = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[len] = '\0';
	while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r' || buf[len - 1] == ' '))
		buf[--len] = '\0';
	if (len == 0 || strcspn(buf, " \t\r\n&#?") != len)
		snprintf(why, wl, "billing_api_key_file %s does not hold one API key", path);
	else if (!(*out = strdup(buf))) {
		memset(buf, 0, sizeof(buf));
		return ISC_ENOMEM;
	}
	memset(buf, 0, sizeof(buf));
	return 0;
}

static void wipe_free(char *s)
{
	if (s) {
		memset(s, 0, strlen(s));
		free(s);
	}
}

/* Prices shapes[] (already of the provider and its regions) from the Compute SKUs. */
static int gcp_price_shapes(const struct isc_provider_config *pc,
                            const struct isc_http_transport *t, const struct isc_shape *shapes,
                            size_t ns, struct isc_shape_price_update *u, size_t *nu,
                            struct isc_price_list_result *res)
{
	struct isc_gcp_billing_opts o = {0};
	struct isc_http_client http;
	struct isc_gcp_sku *skus = NULL;
	struct isc_err e;
	char *key = NULL;
	size_t nsk = 0;
	int rc;

	if ((rc = billing_key(pc, &key, res->error, sizeof(res->error))))
		return rc;
	if (!key) {
		res->failed = 1;
		return 0;
	}
	http_init(&http, t, pc);
	o.base_url = isc_config_setting(pc, "billing_endpoint");
	o.api_key = key;
	isc_err_clear(&e);
	rc = isc_gcp_billing_list(&http, &o, &skus, &nsk, &e);
	wipe_free(key);
	if (rc == ISC_ENOMEM)
		return rc;
	if (rc) {
		res->failed = 1;
		snprintf(res->error, sizeof(res->error), "%s", e.msg);
		return 0;
	}
	*nu = 0;
	for (size_t i = 0; i < ns; i++) {
		char why[256];
		int64_t micros;
		if (isc_gcp_shape_price(&shapes[i], skus, nsk, &micros, why, sizeof(why))) {
			if (!res->unpriced++)
				snprintf(res->unpriced_example, sizeof(res->unpriced_example),
				         "%.100s: %.150s", shapes[i].id, why);
			continue;
		}
		u[*nu].shape_id = shapes[i].id;
		u[(*nu)++].price_micros = micros;
	}
	isc_gcp_skus_free(skus, nsk);
	return 0;
}

/* Prices shapes[] from OCI's public price list (anonymous). */
static int oci_price_shapes(const struct isc_provider_config *pc,
                            const struct isc_http_transport *t, const struct isc_shape *shapes,
                            size_t ns, struct isc_shape_price_update *u, size_t *nu,
                            struct isc_price_list_result *res)
{
	struct isc_http_client http;
	struct isc_oci_product *v = NULL;
	struct isc_err e;
	size_t n = 0;
	int rc;

	http_init(&http, t, pc);
	isc_err_clear(&e);
	rc = isc_oci_price_list_fetch(&http, isc_config_setting(pc, "price_list_endpoint"), &v, &n,
	                              &e);
	if (rc == ISC_ENOMEM)
		return rc;
	if (rc) {
		res->failed = 1;
		snprintf(res->error, sizeof(res->error), "%s", e.msg);
		return 0;
	}
	*nu = 0;
	for (size_t i = 0; i < ns; i++) {
		char why[256], part[24];
		int64_t micros;
		if (isc_oci_shape_price(&shapes[i], v, n, &micros, part, why, sizeof(why))) {
			if (!res->unpriced++)
				snprintf(res->unpriced_example, sizeof(res->unpriced_example),
				         "%.100s: %.150s", shapes[i].id, why);
			continue;
		}
		u[*nu].shape_id = shapes[i].id;
		u[(*nu)++].price_micros = micros;
	}
	free(v);
	return 0;
}

/*
 * AWS on-demand: per configured region, GetProducts for the instance types of
 * its on-demand shapes, through the driver (ondemand_prices, with iscd's own
 * credentials). A region that fails fails the source: nothing is written.
 */
static int aws_price_shapes(const struct isc_config *cfg, const struct isc_provider_config *pc,
                            const struct isc_shape *shapes, size_t ns,
                            struct isc_shape_price_update *u, size_t *nu,
                            struct isc_price_list_result *res)
{
	const char **types = ns ? malloc(ns * sizeof(*types)) : NULL;
	int rc = 0;

	*nu = 0;
	if (ns && !types)
		return ISC_ENOMEM;
	for (size_t r = 0; r < pc->n_regions && !rc && !res->failed; r++) {
		struct isc_provider_session *sess = NULL;
		struct isc_price_point *pts = NULL;
		struct isc_err e;
		size_t nt = 0, npts = 0;

		for (size_t i = 0; i < ns; i++) {
			size_t k;
			if (shapes[i].spot || strcmp(shapes[i].region, pc->regions[r]) != 0)
				continue;
			for (k = 0; k < nt && strcmp(types[k], shapes[i].instance_type); k++)
				;
			if (k == nt)
				types[nt++] = shapes[i].instance_type;
		}
		if (nt == 0)
			continue;
		isc_err_clear(&e);
		rc = isc_provider_session_open(cfg, "aws", pc->regions[r], &sess, &e);
		if (!rc && !sess->provider->ondemand_prices)
			rc = isc_err_set(&e, ISC_EINVALID, "the aws driver has no ondemand_prices");
		if (!rc)
			rc = sess->provider->ondemand_prices(sess, types, nt, &pts, &npts, &e);
		if (sess)
			sess->provider->session_free(sess);
		if (rc == ISC_ENOMEM)
			break;
		if (rc) {
			res->failed = 1;
			snprintf(res->error, sizeof(res->error), "%.64s: %.400s", pc->regions[r],
			         e.msg);
			rc = 0;
			break;
		}
		for (size_t i = 0; i < ns; i++) {
			size_t k;
			if (shapes[i].spot || strcmp(shapes[i].region, pc->regions[r]) != 0)
				continue;
			for (k = 0;
			     k < npts && strcmp(pts[k].instance_type, shapes[i].instance_type); k++)
				;
			if (k == npts) {
				if (!res->unpriced++)
					snprintf(res->unpriced_example,
					         sizeof(res->unpriced_example),
					         "%.100s: not in the price list", shapes[i].id);
				continue;
			}
			u[*nu].shape_id = shapes[i].id;
			u[(*nu)++].price_micros = pts[k].price_micros_per_hour;
		}
		isc_price_points_free(pts, npts);
	}
	free(types);
	return rc;
}

int isc_prices_refresh_list(struct isc_store *s, const struct isc_config *cfg, const char *source,
                            const struct isc_http_transport *t, struct isc_price_list_result *res,
                            struct isc_err *err)
{
	const char *provider = isc_price_source_provider(source);
	const struct isc_provider_config *pc;
	struct isc_shape *all = NULL, *mine = NULL;
	struct isc_shape_price_update *u = NULL;
	size_t nall = 0, ns = 0, nu = 0;
	int64_t now = isc_clock_system()->now_ms(isc_clock_system()->ctx);
	int rc;

	memset(res, 0, sizeof(*res));
	res->source = source;
	if (!provider || !strcmp(source, ISC_PRICE_SRC_AWS_SPOT))
		return isc_err_set(err, ISC_EINVALID, "'%s' is not a list-price source", source);
	if (!isc_price_source_enabled(cfg, source) || !(pc = isc_config_provider(cfg, provider)))
		return 0;
	res->configured = 1;
	if ((rc = isc_store_shape_list(s, provider, &all, &nall, err)))
		return rc;
	/* The shapes of the configured regions, in place: the list is ours. */
	mine = all;
	for (size_t i = 0; i < nall; i++) {
		if (region_configured(pc, all[i].region)) {
			struct isc_shape tmp = mine[ns];
			mine[ns++] = all[i];
			all[i] = tmp;
		}
	}
	res->shapes = ns;
	if (ns && !(u = calloc(ns, sizeof(*u)))) {
		isc_shape_list_free(all, nall);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	rc = 0;
	if (!strcmp(source, ISC_PRICE_SRC_GCP))
		rc = gcp_price_shapes(pc, t, mine, ns, u, &nu, res);
	else if (!strcmp(source, ISC_PRICE_SRC_OCI))
		rc = oci_price_shapes(pc, t, mine, ns, u, &nu, res);
	else if (!strcmp(source, ISC_PRICE_SRC_AWS_ONDEMAND))
		rc = aws_price_shapes(cfg, pc, mine, ns, u, &nu, res);
	if (rc) {
		rc = isc_err_set(err, rc, "out of memory");
	} else if (res->failed) {
		isc_log(ISC_LOG_WARN, "price refresh %s: %s (the last prices are kept)", source,
		        res->error);
		rc = isc_store_price_refresh_failed(s, source, now, res->error, err);
	} else {
		rc = isc_store_shape_prices_set(s, source, u, nu, now, &res->changed, err);
		if (!rc)
			res->updated = nu;
		if (!rc && res->unpriced)
			isc_log(ISC_LOG_INFO,
			        "price refresh %s: %zu shape(s) not in the price list "
			        "(kept their price), e.g. %s",
			        source, res->unpriced, res->unpriced_example);
	}
	free(u);
	isc_shape_list_free(all, nall);
	return rc;
}
