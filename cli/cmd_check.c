/*
 * isc check PROVIDER [--region R] [--json]: has iscd prove that the cloud
 * accepts the broker's credentials (iscd's environment and config.toml) with
 * one signed, side-effect-free call (AWS: sts:GetCallerIdentity; GCP: token
 * exchange + projects.get; OCI: GetUser) and prints who they belong to
 * (GET /v1/check/PROVIDER, the operator's; api/routes_check.c).
 */
#include "cli/client.h"
#include "cli/commands.h"
#include "providers/provider.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out)
{
	fprintf(out,
	        "usage: isc check PROVIDER [--region REGION] [--json]\n\n"
	        "Has iscd make one signed read-only call to PROVIDER (aws, gcp, oci) with the\n"
	        "broker's credentials and prints the account and principal they belong to.\n"
	        "Credentials, region and endpoint come from iscd's config.toml and the\n"
	        "provider's usual variables in iscd's environment\n"
	        "(AWS_ACCESS_KEY_ID, AWS_PROFILE, AWS_REGION, AWS_ENDPOINT_URL, ...;\n"
	        "GOOGLE_APPLICATION_CREDENTIALS, CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE;\n"
	        "~/.oci/config, OCI_CLI_PROFILE, OCI_CLI_REGION). For OCI the account is the\n"
	        "tenancy and the principal the user. The operator's command: an organisation's\n"
	        "own cloud keys are proved by its admins with isc keys verify KEY.\n");
}

int cmd_check(struct isc_cli *cli, int argc, char **argv)
{
	const char *name = NULL, *region = NULL;
	struct isc_reply r;
	json_t *o = NULL, *w;
	char *seg = NULL, *path = NULL;
	size_t i;
	int json = 0, rc;

	if (isc_cli_wants_help(argc, argv)) {
		usage(stdout);
		return ISC_EXIT_OK;
	}
	for (int k = 1; k < argc; k++) {
		if (strcmp(argv[k], "--json") == 0)
			json = 1;
		else if (strcmp(argv[k], "--region") == 0 && k + 1 < argc)
			region = argv[++k];
		else if (strncmp(argv[k], "--region=", 9) == 0)
			region = argv[k] + 9;
		else if (argv[k][0] == '-' || name)
			return isc_cli_usage_error("check", "unexpected argument '%s'", argv[k]);
		else
			name = argv[k];
	}
	if (!name)
		return isc_cli_usage_error("check", "which provider? (e.g. isc check aws)");
	if (!isc_provider_find(name))
		return isc_cli_usage_error("check", "no driver for provider '%s'", name);

	if (!(seg = curl_easy_escape(NULL, name, 0)) || asprintf(&path, "/v1/check/%s", seg) < 0 ||
	    isc_client_query_add(&path, "region", region)) {
		curl_free(seg);
		free(path);
		isc_cli_errorf("out of memory");
		return ISC_EXIT_FAIL;
	}
	curl_free(seg);
	rc = isc_client_request(cli, "GET", path, NULL, 0, &r);
	free(path);
	if (rc)
		return rc;
	/* Warnings come with a failure too: a check refused on a clear-text endpoint says so. */
	o = json_loadb(r.body, r.len, 0, NULL);
	json_array_foreach(json_object_get(o, "warnings"), i, w)
	    fprintf(stderr, "isc: warning: %s\n", json_string_value(w));
	if (r.status != 200) {
		rc = isc_client_fail(&r);
	} else if (!o) {
		isc_cli_errorf("iscd sent a reply that is not JSON");
		rc = ISC_EXIT_FAIL;
	} else if (json) {
		/* The reply without the warnings (they went to stderr): one compact line. */
		json_t *out = json_pack(
		    "{s:O,s:O,s:O,s:O}", "provider", json_object_get(o, "provider"), "account",
		    json_object_get(o, "account"), "principal", json_object_get(o, "principal"),
		    "user_id", json_object_get(o, "user_id"));
		char *txt = out ? json_dumps(out, JSON_COMPACT) : NULL;
		if (txt)
			printf("%s\n", txt);
		else
			rc = ISC_EXIT_FAIL;
		free(txt);
		json_decref(out);
	} else {
		printf("%s: credentials accepted\naccount: %s\nprincipal: %s\n", name,
		       json_string_value(json_object_get(o, "account")),
		       json_string_value(json_object_get(o, "principal")));
	}
	json_decref(o);
	isc_reply_cleanup(&r);
	return rc;
}
