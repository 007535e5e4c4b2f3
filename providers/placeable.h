/*
 * Whether this broker can place a shape at all: a driver for its provider is
 * compiled in, config.toml has a [providers.NAME] section whose regions hold the
 * shape's region, and the driver finds credentials (session_new resolves them
 * without any network call). `isc shapes` marks shapes that fail, `isc burst`
 * refuses a priority list of only such shapes, and the broker skips them with
 * the same words. Answers per provider are worked out once, so a catalog of
 * 100,000 shapes opens one session per provider, not per shape.
 *
 * Credentials are resolved in the environment of the process that asks: the
 * CLI's answer is the daemon's when both run with the same environment and
 * config.toml (the credentials_file / profile keys of a section are the same
 * for both).
 */
#ifndef ISC_PROVIDERS_PLACEABLE_H
#define ISC_PROVIDERS_PLACEABLE_H

#include "common/err.h"
#include "config/config.h"

#include <stddef.h>

struct isc_placeable;

/* cfg is borrowed and must outlive the checker; NULL means no config.toml. */
int isc_placeable_new(const struct isc_config *cfg, struct isc_placeable **out,
                      struct isc_err *err);
void isc_placeable_free(struct isc_placeable *p);

/*
 * 1 when the broker can place shapes of provider in region; 0 when it cannot,
 * with why in why[cap] ("no driver for provider 'x' in this build",
 * "[providers.aws] is not in config.toml", "region 'us-east-2' is not in
 * [providers.aws] regions", "no credentials: <where the driver looked>").
 */
int isc_placeable_check(struct isc_placeable *p, const char *provider, const char *region,
                        char *why, size_t cap);

#endif
