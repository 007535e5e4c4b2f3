/*
 * isc project budget: sets or removes a project's spending cap. Called by the
 * `isc project` dispatcher with argv[0] = "project", argv[1] = "budget".
 * A budget caps what the project's bursts may spend with credits: a
 * reservation that would take spent + held past it is refused.
 */
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/lib/table.h"
#include "credits/money.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "--name VALUE" or "--name=VALUE" at argv[*i]; 1 when matched (and *i advanced), -1 when the value
 * is missing. */
static int take(int argc, char **argv, int *i, const char *name, const char **value)
{
	size_t len = strlen(name);
	const char *a = argv[*i];

	if (strncmp(a, "--", 2) != 0 || strncmp(a + 2, name, len) != 0)
		return 0;
	if (a[2 + len] == '=') {
		*value = a + 3 + len;
		return 1;
	}
	if (a[2 + len] != '\0')
		return 0;
	if (*i + 1 >= argc)
		return -1;
	*value = argv[++*i];
	return 1;
}

int cmd_project_budget(struct isc_cli *cli, int argc, char **argv)
{
	const char *org = NULL, *project = NULL, *amount = NULL;
	struct isc_err err;
	const char *name, *id;
	json_t *body, *reply = NULL;
	int64_t micros = -1;
	char a[48], b[48], c[48], d[48];
	int rc;

	if (isc_cli_wants_help(argc, argv)) {
		printf("usage: isc project budget --org ORG --project PROJECT AMOUNT|none\n\n"
		       "Caps what the project's bursts may spend with credits (AMOUNT in dollars,\n"
		       "up to 6 decimals; 0 allows no spending); 'none' removes the cap. A\n"
		       "reservation is refused when spent + held + the new hold would pass it.\n"
		       "Bursts on the organisation's own cloud keys are not counted.\n");
		return ISC_EXIT_OK;
	}
	for (int i = 2; i < argc; i++) {
		int r = take(argc, argv, &i, "org", &org);
		if (!r)
			r = take(argc, argv, &i, "project", &project);
		if (r < 0)
			return isc_cli_usage_error("project", "option %s needs a value", argv[i]);
		if (r)
			continue;
		if (strncmp(argv[i], "--", 2) == 0 && argv[i][2])
			return isc_cli_usage_error("project", "unknown option '%s'", argv[i]);
		if (amount)
			return isc_cli_usage_error("project", "unexpected argument '%s'", argv[i]);
		amount = argv[i];
	}
	if (!org || !project || !amount)
		return isc_cli_usage_error(
		    "project", "usage: isc project budget --org ORG --project PROJECT AMOUNT|none");
	isc_err_clear(&err);
	if (strcmp(amount, "none") != 0 && isc_money_parse(amount, &micros, &err))
		return isc_cli_fail(&err);
	body = json_pack("{s:s,s:s}", "org", org, "project", project);
	json_object_set_new(body, "budget_micros", micros < 0 ? json_null() : json_integer(micros));
	if ((rc = isc_client_json(cli, "POST", "/v1/budgets", body, &reply)))
		return rc;
	name = json_string_value(json_object_get(reply, "name"));
	id = json_string_value(json_object_get(reply, "id"));
	if (micros < 0)
		printf("project %s (%s) of %s: no budget; spent %s, held %s\n", name, id, org,
		       isc_json_dollars(reply, "spent_micros", a, sizeof(a)),
		       isc_json_dollars(reply, "reserved_micros", b, sizeof(b)));
	else
		printf("project %s (%s) of %s: budget %s; spent %s, held %s, remaining %s\n", name,
		       id, org, isc_money_dollars(micros, c, sizeof(c)),
		       isc_json_dollars(reply, "spent_micros", a, sizeof(a)),
		       isc_json_dollars(reply, "reserved_micros", b, sizeof(b)),
		       isc_json_dollars(reply, "remaining_micros", d, sizeof(d)));
	json_decref(reply);
	return ISC_EXIT_OK;
}
