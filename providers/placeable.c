/* Can this broker place a shape (see placeable.h). */
#include "providers/placeable.h"

#include "providers/provider_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One provider's answer, independent of the region. */
struct answer {
	char name[16];
	int ok;
	char why[ISC_ERR_MSG_MAX + 64];
};

struct isc_placeable {
	const struct isc_config *cfg;
	struct answer *answers;
	size_t n;
};

int isc_placeable_new(const struct isc_config *cfg, struct isc_placeable **out, struct isc_err *err)
{
	*out = calloc(1, sizeof(**out));
	if (!*out)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	(*out)->cfg = cfg;
	return 0;
}

void isc_placeable_free(struct isc_placeable *p)
{
	if (!p)
		return;
	free(p->answers);
	free(p);
}

/* Driver, section and credentials of one provider, worked out on first use. */
static const struct answer *provider_answer(struct isc_placeable *p, const char *provider)
{
	struct answer *a, *grown;
	const struct isc_provider *drv;

	for (size_t i = 0; i < p->n; i++)
		if (strcmp(p->answers[i].name, provider) == 0)
			return &p->answers[i];
	if (strlen(provider) >= sizeof(a->name) ||
	    !(grown = realloc(p->answers, (p->n + 1) * sizeof(*grown))))
		return NULL;
	p->answers = grown;
	a = &p->answers[p->n++];
	memset(a, 0, sizeof(*a));
	snprintf(a->name, sizeof(a->name), "%s", provider);
	drv = isc_provider_find(provider);
	if (!drv) {
		snprintf(a->why, sizeof(a->why), "no driver for provider '%s' in this build",
		         provider);
	} else if (!p->cfg || !isc_config_provider(p->cfg, provider)) {
		snprintf(a->why, sizeof(a->why), "[providers.%s] is not in %s", provider,
		         p->cfg && p->cfg->path[0] ? p->cfg->path : "config.toml");
	} else {
		struct isc_provider_session *s = NULL;
		struct isc_err err;
		const struct isc_provider_config *pc = isc_config_provider(p->cfg, provider);
		int rc;

		isc_err_clear(&err);
		/* A configured region, so a driver that wants one finds it. */
		rc = isc_provider_session_open(p->cfg, provider,
		                               pc->n_regions ? pc->regions[0] : NULL, &s, &err);
		if (s)
			s->provider->session_free(s);
		if (rc == ISC_EAUTH)
			snprintf(a->why, sizeof(a->why), "%s", err.msg);
		else if (rc)
			snprintf(a->why, sizeof(a->why), "[providers.%s]: %s", provider, err.msg);
		else
			a->ok = 1;
	}
	return a;
}

int isc_placeable_check(struct isc_placeable *p, const char *provider, const char *region,
                        char *why, size_t cap)
{
	const struct answer *a = provider_answer(p, provider);
	const struct isc_provider_config *pc;

	if (!a) {
		snprintf(why, cap, "out of memory");
		return 0;
	}
	if (!a->ok) {
		snprintf(why, cap, "%s", a->why);
		return 0;
	}
	pc = isc_config_provider(p->cfg, provider);
	for (size_t i = 0; i < pc->n_regions; i++)
		if (strcmp(pc->regions[i], region) == 0)
			return 1;
	snprintf(why, cap, "region '%s' is not in [providers.%s] regions of %s", region, provider,
	         p->cfg->path[0] ? p->cfg->path : "config.toml");
	return 0;
}
