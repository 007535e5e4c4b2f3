/*
 * `isc check PROVIDER`: proves that the cloud accepts the broker's own
 * credentials (the ones iscd launches with: its environment, its config.toml)
 * with one signed, side-effect-free call (AWS sts:GetCallerIdentity; GCP token
 * exchange + projects.get; OCI GetUser), through the provider table like the
 * broker, so the endpoint and signing are checked too.
 *
 * Those credentials are the platform's, so this is the operator's: anyone else
 * gets 403. An organisation's own cloud keys are proved by their admins with
 * POST /v1/keys/{id}/verify (routes_keys.c). Nothing is written, so this is a
 * GET and leaves no audit row; no reply carries a secret (the drivers' messages
 * never hold one, security.sh).
 */
#include "api/api_int.h"
#include "config/config.h"
#include "providers/provider.h"
#include "providers/provider_config.h"

#include <stdio.h>
#include <string.h>

/* The transport's "cannot reach URL: why" without the retry loop's prefix. */
static const char *reach_message(const char *msg)
{
	const char *p = strstr(msg, "cannot reach ");
	return p ? p : msg;
}

/*
 * An error reply that keeps the warnings found before it (a check that fails on
 * a clear-text endpoint must still say it was clear text).
 */
static void reply_failure(struct isc_api_call *c, int status, const char *code, const char *msg,
                          json_t *warnings)
{
	isc_api_reply_json(
	    c, status,
	    json_pack("{s:s,s:s,s:O}", "error", msg, "code", code, "warnings", warnings));
}

/* GET /v1/check/{provider}[?region=R]: {"provider","account","principal","user_id","warnings"}. */
static void check_provider(struct isc_api_call *c)
{
	const char *name = c->params[0], *region = isc_api_query(c, "region");
	const struct isc_provider *p;
	struct isc_config *cfg = NULL;
	struct isc_provider_session *s = NULL;
	struct isc_identity id;
	struct isc_err err;
	char msg[ISC_ERR_MSG_MAX + 64];
	json_t *warnings;
	int rc, opened;

	if (!isc_api_require_operator(c))
		return;
	if (!(p = isc_provider_find(name))) {
		isc_api_reply_error(c, 404, "no driver for provider '%s'", name);
		return;
	}
	isc_err_clear(&err);
	if (isc_config_load(c->home, &cfg, &err)) {
		isc_api_reply_err(c, &err);
		return;
	}
	warnings = json_array();
	{
		const struct isc_provider_config *pc = isc_config_provider(cfg, name);
		const char *insecure =
		    pc ? isc_config_setting(pc, "allow_insecure_endpoint") : NULL;
		if (insecure && strcmp(insecure, "true") == 0) {
			snprintf(msg, sizeof(msg),
			         "%s: providers.%s.allow_insecure_endpoint = true: with a plain "
			         "http:// endpoint that is not loopback, credentials and signed "
			         "requests travel in clear text",
			         cfg->path, name);
			json_array_append_new(warnings, json_string(msg));
		}
	}
	rc = isc_provider_session_open(cfg, name, region, &s, &err);
	opened = rc == 0;
	if (opened) {
		rc = p->check_credentials(s, &id, &err);
		p->session_free(s);
	}
	isc_config_free(cfg);
	if (rc == ISC_EAUTH && opened) {
		/* The cloud answered, and said no. */
		snprintf(msg, sizeof(msg), "%s rejected the credentials: %s",
		         strcmp(name, "aws") == 0 ? "AWS" : name, err.msg);
		reply_failure(c, 400, "invalid", msg, warnings);
	} else if (rc == ISC_EAUTH) {
		/* None found: the driver's message names every place it looked. */
		reply_failure(c, 400, "invalid", err.msg, warnings);
	} else if (rc == ISC_ETRANSIENT && strstr(err.msg, "cannot reach ")) {
		reply_failure(c, 502, "unreachable", reach_message(err.msg), warnings);
	} else if (rc) {
		/* The cloud's trouble is a bad gateway; what iscd holds (a key file it
		 * cannot read, a malformed profile) is the request's to fix. */
		int status = err.code == ISC_ENOMEM                                     ? 500
		             : err.code == ISC_ETRANSIENT || err.code == ISC_ETHROTTLED ? 502
		                                                                        : 400;
		reply_failure(c, status, isc_code_name(err.code),
		              err.msg[0] ? err.msg : isc_code_name(err.code), warnings);
	} else {
		isc_api_reply_json(c, 200,
		                   json_pack("{s:s,s:s,s:s,s:s,s:O}", "provider", name, "account",
		                             id.account, "principal", id.principal, "user_id",
		                             id.user_id, "warnings", warnings));
	}
	json_decref(warnings);
}

const struct isc_api_route isc_api_routes_check[] = {
    {"GET", "/v1/check/{}", check_provider, ISC_API_SLOW},
    {NULL, NULL, NULL},
};
