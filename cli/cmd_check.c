/*
 * isc check PROVIDER [--region R] [--json]: proves that the cloud accepts the
 * configured credentials with one signed, side-effect-free call (AWS:
 * sts:GetCallerIdentity; GCP: token exchange + projects.get) and prints who
 * they belong to. It goes through the provider table like the broker does, so
 * it also checks the endpoint and signing the broker will use.
 */
#include "cli/commands.h"
#include "providers/provider_config.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out)
{
	fprintf(out,
	        "usage: isc check PROVIDER [--region REGION] [--json]\n\n"
	        "Makes one signed read-only call to PROVIDER (aws, gcp, oci) with the configured\n"
	        "credentials and prints the account and principal they belong to.\n"
	        "Credentials, region and endpoint come from the provider's usual variables\n"
	        "(AWS_ACCESS_KEY_ID, AWS_PROFILE, AWS_REGION, AWS_ENDPOINT_URL, ...;\n"
	        "GOOGLE_APPLICATION_CREDENTIALS, CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE;\n"
	        "~/.oci/config, OCI_CLI_PROFILE, OCI_CLI_REGION). For OCI the account is the\n"
	        "tenancy and the principal the user.\n");
}

/* The transport's "cannot reach URL: why" without the retry loop's prefix. */
static const char *reach_message(const char *msg)
{
	const char *p = strstr(msg, "cannot reach ");
	return p ? p : msg;
}

int cmd_check(struct isc_cli *cli, int argc, char **argv)
{
	const struct isc_provider *p;
	struct isc_config *cfg = NULL;
	struct isc_provider_session *s = NULL;
	struct isc_identity id;
	struct isc_err err;
	const char *name = NULL, *region = NULL;
	int json = 0, rc;

	if (isc_cli_wants_help(argc, argv)) {
		usage(stdout);
		return ISC_EXIT_OK;
	}
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			json = 1;
		else if (strcmp(argv[i], "--region") == 0 && i + 1 < argc)
			region = argv[++i];
		else if (strncmp(argv[i], "--region=", 9) == 0)
			region = argv[i] + 9;
		else if (argv[i][0] == '-' || name)
			return isc_cli_usage_error("check", "unexpected argument '%s'", argv[i]);
		else
			name = argv[i];
	}
	if (!name)
		return isc_cli_usage_error("check", "which provider? (e.g. isc check aws)");
	p = isc_provider_find(name);
	if (!p)
		return isc_cli_usage_error("check", "no driver for provider '%s'", name);

	isc_err_clear(&err);
	/* The endpoint and other settings of config.toml, when the store has one. */
	rc = isc_config_load(cli->home, &cfg, &err);
	if (rc == 0) {
		const struct isc_provider_config *pc = isc_config_provider(cfg, name);
		const char *insecure =
		    pc ? isc_config_setting(pc, "allow_insecure_endpoint") : NULL;
		if (insecure && strcmp(insecure, "true") == 0)
			fprintf(
			    stderr,
			    "isc: warning: %s: providers.%s.allow_insecure_endpoint = true: with a "
			    "plain http:// endpoint that is not loopback, credentials and signed "
			    "requests travel in clear text\n",
			    cfg->path, name);
		rc = isc_provider_session_open(cfg, name, region, &s, &err);
	}
	if (rc == ISC_EAUTH) {
		/* None found: the driver's message names every place it looked. */
		isc_config_free(cfg);
		return isc_cli_fail(&err);
	}
	if (rc == 0)
		rc = p->check_credentials(s, &id, &err);
	p->session_free(s);
	isc_config_free(cfg);
	if (rc == ISC_EAUTH) {
		isc_cli_errorf("%s rejected the credentials: %s",
		               strcmp(name, "aws") == 0 ? "AWS" : name, err.msg);
		return ISC_EXIT_FAIL;
	}
	if (rc == ISC_ETRANSIENT && strstr(err.msg, "cannot reach ")) {
		isc_cli_errorf("%s", reach_message(err.msg));
		return ISC_EXIT_FAIL;
	}
	if (rc)
		return isc_cli_fail(&err);
	if (json) {
		json_t *o = json_pack("{s:s, s:s, s:s, s:s}", "provider", name, "account",
		                      id.account, "principal", id.principal, "user_id", id.user_id);
		char *txt = o ? json_dumps(o, JSON_COMPACT) : NULL;
		if (!txt) {
			json_decref(o);
			isc_cli_errorf("out of memory");
			return ISC_EXIT_FAIL;
		}
		printf("%s\n", txt);
		free(txt);
		json_decref(o);
	} else {
		printf("%s: credentials accepted\naccount: %s\nprincipal: %s\n", name, id.account,
		       id.principal);
	}
	return ISC_EXIT_OK;
}
