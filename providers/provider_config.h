/* Driver sessions configured from config.toml. */
#ifndef ISC_PROVIDERS_PROVIDER_CONFIG_H
#define ISC_PROVIDERS_PROVIDER_CONFIG_H

#include "config/config.h"
#include "providers/provider.h"

/*
 * A session of `provider` for `region` (NULL: the driver's default) with the
 * settings of cfg's [providers.NAME] section (cfg may be NULL). Free it with
 * (*out)->provider->session_free(*out).
 */
int isc_provider_session_open(const struct isc_config *cfg, const char *provider,
                              const char *region, struct isc_provider_session **out,
                              struct isc_err *err);

/*
 * The same with an organisation's own credentials (bring-your-own keys, borrowed for the
 * call; the driver copies and later wipes them). credentials NULL is the platform's chain;
 * any other value is an organisation's key, used alone even when n_credentials is 0 or a
 * field is missing (then ISC_EAUTH naming it): never completed from the platform's chain.
 */
int isc_provider_session_open_with(const struct isc_config *cfg, const char *provider,
                                   const char *region, const struct isc_kv *credentials,
                                   size_t n_credentials, struct isc_provider_session **out,
                                   struct isc_err *err);

#endif
