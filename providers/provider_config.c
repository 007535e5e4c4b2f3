/*
 * Opening a driver session from config.toml: the [providers.NAME] keys become
 * the driver's settings. A provider without a section gets no settings, and its
 * driver falls back to the ecosystem's own variables and files.
 */
#include "providers/provider_config.h"

#include <stdlib.h>

int isc_provider_session_open(const struct isc_config *cfg, const char *provider,
                              const char *region, struct isc_provider_session **out,
                              struct isc_err *err)
{
	return isc_provider_session_open_with(cfg, provider, region, NULL, 0, out, err);
}

int isc_provider_session_open_with(const struct isc_config *cfg, const char *provider,
                                   const char *region, const struct isc_kv *credentials,
                                   size_t n_credentials, struct isc_provider_session **out,
                                   struct isc_err *err)
{
	const struct isc_provider *drv = isc_provider_find(provider);
	const struct isc_provider_config *pc = cfg ? isc_config_provider(cfg, provider) : NULL;
	struct isc_provider_settings settings = {0};
	struct isc_kv *items = NULL;
	size_t n = pc ? pc->n_settings : 0;
	int rc;

	*out = NULL;
	if (!drv)
		return isc_err_set(err, ISC_EINVALID, "no driver for provider '%s' in this build",
		                   provider);
	if (n) {
		items = calloc(n, sizeof(*items));
		if (!items)
			return isc_err_set(err, ISC_ENOMEM, "out of memory");
		for (size_t i = 0; i < n; i++) {
			items[i].key = pc->settings[i].key;
			items[i].value = pc->settings[i].value;
		}
	}
	settings.items = items;
	settings.n_items = n;
	settings.credentials = credentials;
	settings.n_credentials = n_credentials;
	/* Credentials handed in are an organisation's key: the driver never completes them
	 * from the platform's own chain, whatever they hold. */
	settings.byo = credentials != NULL;
	rc = drv->session_new(&settings, region, NULL, NULL, out, err);
	free(items);
	return rc;
}
