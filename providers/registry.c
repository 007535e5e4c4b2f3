/*
 * The registry of cloud drivers: the only place that knows which drivers are
 * compiled in. Also the small helpers every driver and caller shares
 * (settings lookup, freeing returned arrays, state names).
 */
#include "providers/provider.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const struct isc_provider isc_provider_aws;
extern const struct isc_provider isc_provider_gcp;
extern const struct isc_provider isc_provider_oci;

static const struct isc_provider *const providers[] = {
    &isc_provider_aws,
    &isc_provider_gcp,
    &isc_provider_oci,
    NULL,
};

const struct isc_provider *isc_provider_find(const char *name)
{
	if (!name)
		return NULL;
	for (size_t i = 0; providers[i]; i++)
		if (strcmp(providers[i]->name, name) == 0)
			return providers[i];
	return NULL;
}

const struct isc_provider *const *isc_provider_list(void)
{
	return providers;
}

const char *isc_provider_setting(const struct isc_provider_settings *settings, const char *key)
{
	if (!settings)
		return NULL;
	/* The last occurrence wins, so a caller may append overrides. */
	for (size_t i = settings->n_items; i > 0; i--) {
		const struct isc_kv *kv = &settings->items[i - 1];
		if (kv->key && strcmp(kv->key, key) == 0)
			return kv->value;
	}
	return NULL;
}

int isc_provider_settings_byo(const struct isc_provider_settings *settings)
{
	return settings && (settings->byo || settings->n_credentials > 0);
}

char *isc_provider_setting_dup(const struct isc_provider_settings *settings, const char *key,
                               const char *dflt)
{
	const char *v = isc_provider_setting(settings, key);
	if (!v || !v[0])
		v = dflt;
	return v ? strdup(v) : NULL;
}

void isc_node_info_from_spec(struct isc_node_info *ni, const struct isc_launch_spec *spec,
                             const char *token)
{
	for (size_t t = 0; t < spec->n_tags; t++) {
		char *dst = NULL;
		if (strcmp(spec->tags[t].key, ISC_TAG_BROKER) == 0)
			dst = ni->broker_id;
		else if (strcmp(spec->tags[t].key, ISC_TAG_CLUSTER) == 0)
			dst = ni->cluster_id;
		else if (strcmp(spec->tags[t].key, ISC_TAG_EXPERIMENT) == 0)
			dst = ni->experiment_id;
		if (dst && !dst[0])
			snprintf(dst, sizeof(ni->broker_id), "%s", spec->tags[t].value);
	}
	if (!ni->client_token[0])
		snprintf(ni->client_token, sizeof(ni->client_token), "%s", token);
	if (spec->spot)
		ni->spot = 1;
}

const char *isc_node_state_name(enum isc_node_state s)
{
	switch (s) {
	case ISC_NODE_PENDING:
		return "pending";
	case ISC_NODE_RUNNING:
		return "running";
	case ISC_NODE_SHUTTING_DOWN:
		return "shutting-down";
	case ISC_NODE_TERMINATED:
		return "terminated";
	case ISC_NODE_STOPPING:
		return "stopping";
	case ISC_NODE_STOPPED:
		return "stopped";
	}
	return "unknown";
}

void isc_launch_result_cleanup(struct isc_launch_result *r)
{
	if (!r)
		return;
	free(r->nodes);
	memset(r, 0, sizeof(*r));
}

void isc_node_infos_free(struct isc_node_info *nodes, size_t n)
{
	(void)n; /* fixed-size fields: one block */
	free(nodes);
}

void isc_price_points_free(struct isc_price_point *prices, size_t n)
{
	(void)n;
	free(prices);
}

/* 1 for a tenant name the drivers take: 1..32 of [a-z0-9-] (provider.h). */
int isc_tenant_name_ok(const char *t)
{
	size_t n = t ? strlen(t) : 0;
	if (n < 1 || n > 32)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((t[i] >= 'a' && t[i] <= 'z') || (t[i] >= '0' && t[i] <= '9') || t[i] == '-'))
			return 0;
	return 1;
}
