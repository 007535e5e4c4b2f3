/*
 * isc project budget: sets or removes a project's spending cap. Called by the
 * `isc project` dispatcher with argv[0] = "project", argv[1] = "budget".
 * A budget caps what the project's bursts may spend with credits: a
 * reservation that would take spent + held past it is refused.
 */
#include "cli/commands.h"
#include "credits/credits.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *dollars(int64_t micros, char *buf, size_t size)
{
	char tmp[40];
	snprintf(buf, size, "%s$%s", micros < 0 ? "-" : "",
	         isc_money_format(micros < 0 ? -micros : micros, 2, tmp, sizeof(tmp)));
	return buf;
}

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
	struct isc_project_money pm;
	struct isc_project p = {0};
	struct isc_store *s;
	struct isc_err err;
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
	if ((rc = isc_cli_store_open(cli, 0, &s)))
		return rc;
	rc = isc_project_set_budget(s, org, project, micros, &err);
	/* Report on the project by id: the name may be shared with another org's project. */
	if (!rc) {
		struct isc_project *list = NULL;
		size_t n = 0;
		rc = isc_store_project_list(s, org, &list, &n, &err);
		for (size_t i = 0; !rc && i < n; i++)
			if (strcmp(list[i].id, project) == 0 ||
			    strcmp(list[i].name, project) == 0) {
				p = list[i];
				memset(&list[i], 0, sizeof(list[i]));
				break;
			}
		isc_project_list_free(list, n);
		if (!rc && !p.id)
			rc = isc_err_set(&err, ISC_ENOTFOUND, "project '%s' vanished", project);
		if (!rc)
			rc = isc_project_money_get(s, p.id, &pm, &err);
	}
	isc_store_free(s);
	if (rc) {
		isc_project_cleanup(&p);
		return isc_cli_fail(&err);
	}
	if (micros < 0)
		printf("project %s (%s) of %s: no budget; spent %s, held %s\n", p.name, p.id, org,
		       dollars(pm.spent_micros, a, sizeof(a)),
		       dollars(pm.reserved_micros, b, sizeof(b)));
	else
		printf("project %s (%s) of %s: budget %s; spent %s, held %s, remaining %s\n",
		       p.name, p.id, org, dollars(micros, c, sizeof(c)),
		       dollars(pm.spent_micros, a, sizeof(a)),
		       dollars(pm.reserved_micros, b, sizeof(b)),
		       dollars(pm.remaining_micros, d, sizeof(d)));
	isc_project_cleanup(&p);
	return ISC_EXIT_OK;
}
