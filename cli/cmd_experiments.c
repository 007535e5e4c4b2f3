/* isc experiments: the platform's experiment table, as the API shows it to the caller. */
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/lib/table.h"

#include <stdio.h>
#include <string.h>

static const char *str(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s ? s : "";
}

/*
 * A finance user sees an organisation's money, not its experiments (docs/api.md):
 * for each organisation where the caller is finance, a line on stderr says so and
 * where that view is, so an empty or short listing is never read as "no experiments".
 * Returns how many such organisations there are.
 */
static size_t finance_notes(struct isc_cli *cli)
{
	json_t *who = NULL, *m;
	size_t i, n = 0;

	if (isc_client_json(cli, "GET", "/v1/whoami", NULL, &who))
		return 0;
	json_array_foreach(json_object_get(who, "orgs"), i, m)
	{
		if (strcmp(str(m, "role"), "finance") != 0)
			continue;
		fprintf(stderr,
		        "isc experiments: you are finance in %s: finance sees its money, not its "
		        "experiments; what each experiment spent: isc spend --org %s --by "
		        "experiment\n",
		        str(m, "org"), str(m, "org"));
		n++;
	}
	json_decref(who);
	return n;
}

/* 1 when the rows come from more than one organisation (the operator's, or a user's of
 * several): the table then says whose each row is. */
static int several_orgs(json_t *arr)
{
	const char *first = NULL;
	size_t i;
	json_t *e;

	json_array_foreach(arr, i, e)
	{
		if (!first)
			first = str(e, "org");
		else if (strcmp(first, str(e, "org")) != 0)
			return 1;
	}
	return 0;
}

int cmd_experiments(struct isc_cli *cli, int argc, char **argv)
{
	static const char *const headers[] = {"ID",          "Org",    "Name",  "NNodes",
	                                      "Output Path", "Status", "Shape", "Cost"};
	struct isc_table *t;
	json_t *arr = NULL, *e;
	size_t i;
	int rc, json = 0, org;

	if (isc_cli_wants_help(argc, argv)) {
		printf(
		    "usage: isc experiments [--json]\n\nLists the experiments you may see, newest "
		    "first: ID, Name, NNodes, Output Path, Status, Shape, Cost (\"(settling)\" "
		    "while an\n"
		    "ended experiment's last node periods are still to be charged)\n(and Org after "
		    "ID when the rows are of several organisations).\nA member sees "
		    "their "
		    "own, an admin their organisation's, the operator all; finance sees\nnone "
		    "(its view is the money: isc spend --by experiment), and a line says so.\n"
		    "--json prints a JSON array ([] when empty).\n");
		return ISC_EXIT_OK;
	}
	for (int a = 1; a < argc; a++) {
		if (strcmp(argv[a], "--json") == 0)
			json = 1;
		else
			return isc_cli_usage_error("experiments", "unknown argument '%s'", argv[a]);
	}
	/* Every page: the table and --json show every experiment the caller may see. */
	if ((rc = isc_client_json_all_pages(cli, "/v1/experiments", &arr)))
		return rc;
	/* The finance lines in both forms (stderr); the empty hint, as before, in the table's. */
	if (finance_notes(cli) == 0 && !json && json_array_size(arr) == 0)
		fprintf(stderr, "isc experiments: no experiments yet (isc burst FILE.isc "
		                "records one)\n");
	if (json) {
		isc_json_print(arr, stdout);
		json_decref(arr);
		return ISC_EXIT_OK;
	}
	/* Without the Org column the headers are the table's without "Org". */
	org = several_orgs(arr);
	{
		const char *h[8];
		size_t n = 0;
		for (size_t k = 0; k < 8; k++)
			if (k != 1 || org)
				h[n++] = headers[k];
		t = isc_table_new(n, h);
	}
	if (!t) {
		json_decref(arr);
		return ISC_EXIT_FAIL;
	}
	isc_table_align_right(t, 2 + org);
	isc_table_align_right(t, 6 + org);
	json_array_foreach(arr, i, e)
	{
		char nnodes[16], cost[40];
		const char *cells[8], *row[8];
		size_t n = 0;
		snprintf(nnodes, sizeof(nnodes), "%lld",
		         (long long)json_integer_value(json_object_get(e, "nnodes")));
		isc_json_dollars(e, "cost_micros", cost, sizeof(cost));
		/* Ended, but a node's last period is not charged yet: not the final cost. */
		if (json_is_true(json_object_get(e, "cost_settling")))
			strncat(cost, " (settling)", sizeof(cost) - strlen(cost) - 1);
		cells[0] = str(e, "id");
		cells[1] = str(e, "org");
		cells[2] = str(e, "name");
		cells[3] = nnodes;
		cells[4] = str(e, "output_path");
		cells[5] = str(e, "status");
		cells[6] = str(e, "shape")[0] ? str(e, "shape") : "-";
		cells[7] = cost;
		for (size_t k = 0; k < 8; k++)
			if (k != 1 || org)
				row[n++] = cells[k];
		if (isc_table_add(t, row)) {
			rc = ISC_EXIT_FAIL;
			break;
		}
	}
	if (!rc)
		isc_table_print(t, stdout);
	isc_table_free(t);
	json_decref(arr);
	return rc;
}
