/* isc experiments: the platform's experiment table. */
#include "cli/commands.h"
#include "credits/credits.h"
#include "store/store_experiments.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cmd_experiments(struct isc_cli *cli, int argc, char **argv)
{
	struct isc_store *s;
	struct isc_experiment *list;
	struct isc_err err;
	int64_t *cost; /* charges so far, micro-dollars */
	size_t n;
	int rc, json = 0;

	if (isc_cli_wants_help(argc, argv)) {
		printf(
		    "usage: isc experiments [--json]\n\nLists experiments, newest first: ID, Name, "
		    "NNodes, Output Path, Status, Shape.\n--json prints a JSON array ([] when "
		    "empty).\n");
		return ISC_EXIT_OK;
	}
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			json = 1;
		else
			return isc_cli_usage_error("experiments", "unknown argument '%s'", argv[i]);
	}
	if ((rc = isc_cli_store_open(cli, 0, &s)))
		return rc;
	isc_err_clear(&err);
	rc = isc_store_experiment_list(s, NULL, &list, &n, &err);
	if (rc) {
		isc_store_free(s);
		return isc_cli_fail(&err);
	}
	cost = calloc(n ? n : 1, sizeof(*cost));
	for (size_t i = 0; cost && i < n && !rc; i++)
		rc = isc_credits_experiment_cost(s, list[i].id, &cost[i], &err);
	isc_store_free(s);
	if (!cost || rc) {
		free(cost);
		isc_experiment_list_free(list, n);
		return cost ? isc_cli_fail(&err) : ISC_EXIT_FAIL;
	}
	if (json) {
		json_t *arr = json_array();
		for (size_t i = 0; i < n; i++) {
			struct isc_experiment *e = &list[i];
			char dollars[32];
			isc_money_format(cost[i], 2, dollars, sizeof(dollars));
			json_array_append_new(
			    arr,
			    json_pack(
			        "{s:s,s:s,s:s,s:s,s:i,s:i,s:i,s:s,s:s,s:s,s:s,s:i,s:I,s:I,s:s}",
			        "id", e->id, "name", e->name, "project_id", e->project_id, "org",
			        e->org_name, "gpus", e->gpus, "nnodes", e->nnodes, "nproc",
			        e->nproc, "output_path", e->output_path, "status", e->status,
			        "status_reason", e->status_reason, "shape", e->shape_id,
			        "cycle_count", e->cycle_count, "created_at_ms",
			        (json_int_t)e->created_at_ms, "cost_micros", (json_int_t)cost[i],
			        "cost", dollars));
		}
		json_dumpf(arr, stdout, JSON_INDENT(2));
		putchar('\n');
		json_decref(arr);
	} else {
		if (n == 0)
			fprintf(stderr, "isc experiments: no experiments yet (isc burst FILE.isc "
			                "records one)\n");
		printf("%-22s %-24s %-6s %-40s %-12s %-36s %s\n", "ID", "Name", "NNodes",
		       "Output Path", "Status", "Shape", "Cost");
		for (size_t i = 0; i < n; i++) {
			struct isc_experiment *e = &list[i];
			char dollars[32];
			isc_money_format(cost[i], 2, dollars, sizeof(dollars));
			printf("%-22s %-24.24s %-6d %-40s %-12s %-36s $%s\n", e->id, e->name,
			       e->nnodes, e->output_path, e->status,
			       e->shape_id[0] ? e->shape_id : "-", dollars);
		}
	}
	isc_experiment_list_free(list, n);
	free(cost);
	return ISC_EXIT_OK;
}
