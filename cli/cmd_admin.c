/*
 * isc init, isc org, isc project: setting up organisations and projects. isc init
 * is the one command here that opens the store itself (it makes it); the rest
 * speak the API.
 */
#include "cli/client.h"
#include "common/names.h"
#include "cli/commands.h"
#include "cli/lib/table.h"
#include "config/config.h"
#include "credits/money.h"
#include "shapes/catalog_import.h"
#include "common/home.h"
#include "store/store.h"
#include "store/store_copy.h"

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Opens the store under cli->home; on failure prints the error and returns ISC_EXIT_FAIL. */
static int store_open(struct isc_cli *cli, int create, struct isc_store **out)
{
	struct isc_err err;
	isc_err_clear(&err);
	if (isc_store_open(cli->home, create, out, &err))
		return isc_cli_fail(&err);
	return ISC_EXIT_OK;
}

/*
 * What `isc init` does to a freshly opened store: load the default shape
 * catalog when the store has none, write a default config.toml when absent.
 */
static int init_store(struct isc_cli *cli, struct isc_store *s)
{
	struct isc_err err;
	size_t loaded = 0;
	isc_err_clear(&err);
	if (isc_config_write_default(cli->home, &err))
		return isc_cli_fail(&err);
	/* The shipped catalog goes in once; later imports and refreshes are the admin's. */
	if (isc_catalog_load_default(s, NULL, &loaded, &err))
		return isc_cli_fail(&err);
	if (loaded)
		printf("loaded %zu shapes from the default catalog\n", loaded);
	return ISC_EXIT_OK;
}

int cmd_init(struct isc_cli *cli, int argc, char **argv)
{
	struct isc_store *s;
	int rc;

	if (isc_cli_wants_help(argc, argv)) {
		printf("usage: isc init [--home DIR]\n\nCreates the store in the home folder (mode "
		       "0700, database 0600)\n"
		       "(--home DIR, here or before the command, else $ISC_HOME, else ~/.isc)\n"
		       "and brings its schema up to date. Running it again changes nothing.\n"
		       "With a PostgreSQL store (store_url, ISC_STORE_URL) it makes the schema if\n"
		       "the database has none, or joins the one another replica made "
		       "(docs/ha.md).\n");
		return ISC_EXIT_OK;
	}
	/* The README's "isc init (or --home / $ISC_HOME)" reads as an option of init: the
	 * global --home is taken here too, and wins over the one before the command. */
	for (int i = 1; i < argc; i++) {
		const char *home = NULL;
		struct isc_err err;
		char *resolved;
		if (strcmp(argv[i], "--home") == 0 && i + 1 < argc)
			home = argv[++i];
		else if (strncmp(argv[i], "--home=", 7) == 0)
			home = argv[i] + 7;
		else if (strcmp(argv[i], "--home") == 0)
			return isc_cli_usage_error("init",
			                           "--home needs a folder: isc init --home DIR");
		else
			return isc_cli_usage_error("init", "unexpected argument '%s'", argv[i]);
		if (!*home)
			return isc_cli_usage_error("init",
			                           "--home needs a folder: isc init --home DIR");
		isc_err_clear(&err);
		if (!(resolved = isc_home_resolve(home, &err)))
			return isc_cli_fail(&err);
		free(cli->home);
		cli->home = resolved;
	}
	if ((rc = store_open(cli, 1, &s)))
		return rc;
	rc = init_store(cli, s);
	if (rc == ISC_EXIT_OK && isc_store_is_postgres(s)) {
		struct isc_err err;
		char *url = isc_store_url_resolve(cli->home, &err);
		char *shown = url ? isc_store_url_masked(url) : NULL;
		/* Another replica's init made it: this home joins the same store (docs/ha.md). */
		printf("store ready in PostgreSQL at %s (%s); home %s\n", shown ? shown : "?",
		       isc_store_was_created(s) ? "schema made now"
		                                : "joined: its schema was there",
		       cli->home);
		free(shown);
		free(url);
	} else if (rc == ISC_EXIT_OK) {
		printf("store ready at %s/isc.db\n", cli->home);
	}
	isc_store_free(s);
	return rc;
}

static int org_add(struct isc_cli *cli, int argc, char **argv)
{
	int rc;

	if (argc != 3)
		return isc_cli_usage_error("org", "usage: isc org add NAME");
	if (!isc_name_valid(argv[2]))
		return isc_cli_usage_error("org",
		                           "invalid organisation name '%s': 1 to 64 characters, "
		                           "no spaces, slashes or commas",
		                           argv[2]);
	if ((rc = isc_client_json(cli, "POST", "/v1/orgs", json_pack("{s:s}", "name", argv[2]),
	                          NULL)))
		return rc;
	printf("organisation %s added\n", argv[2]);
	return ISC_EXIT_OK;
}

static void org_row(json_t *o, const char **cells, char (*buf)[ISC_TABLE_CELL])
{
	(void)buf;
	cells[0] = isc_json_str(o, "name");
}

static int org_list(struct isc_cli *cli, int argc, char **argv)
{
	static const char *const headers[] = {"NAME"};
	static const struct isc_table_spec orgs = {
	    1, headers, NULL, org_row, "isc org: no organisations yet (isc org add NAME)"};
	json_t *arr = NULL;
	int rc, json = argc == 3 && strcmp(argv[2], "--json") == 0;

	if (argc > 2 && !json)
		return isc_cli_usage_error("org", "usage: isc org list [--json]");
	if ((rc = isc_client_json_all_pages(cli, "/v1/orgs", &arr)))
		return rc;
	return isc_cli_print_listing(arr, json, &orgs);
}

int cmd_org(struct isc_cli *cli, int argc, char **argv)
{
	if (argc < 2 || isc_cli_wants_help(argc, argv)) {
		printf("usage: isc org add NAME\n       isc org list [--json]\n");
		return argc < 2 ? ISC_EXIT_USAGE : ISC_EXIT_OK;
	}
	if (strcmp(argv[1], "add") == 0)
		return org_add(cli, argc, argv);
	if (strcmp(argv[1], "list") == 0)
		return org_list(cli, argc, argv);
	return isc_cli_usage_error("org", "unknown subcommand '%s'", argv[1]);
}

/*
 * The options of `isc project add|list`: --org ORG and --json. On return optind
 * indexes argv + 1 (the subcommand's own argv). Returns 0 or ISC_EXIT_USAGE.
 */
static int project_options(int argc, char **argv, const char **org, int *json)
{
	static const struct option opts[] = {{"org", required_argument, NULL, 'o'},
	                                     {"json", no_argument, NULL, 'j'},
	                                     {NULL, 0, NULL, 0}};
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc - 1, argv + 1, "", opts, NULL)) != -1) {
		if (c == 'o')
			*org = optarg;
		else if (c == 'j')
			*json = 1;
		else
			return isc_cli_usage_error("project", "unknown or incomplete option '%s'",
			                           argv[optind]);
	}
	return 0;
}

static int project_add(struct isc_cli *cli, int argc, char **argv)
{
	const char *org = NULL;
	json_t *reply = NULL;
	int rc, json = 0;

	if ((rc = project_options(argc, argv, &org, &json)))
		return rc;
	if (!org)
		return isc_cli_usage_error("project", "--org ORG is required");
	if (optind + 1 != argc - 1)
		return isc_cli_usage_error("project",
		                           "usage: isc project add --org ORG NAME [--json]");
	if (!isc_name_valid(argv[optind + 1]))
		return isc_cli_usage_error("project",
		                           "invalid project name '%s': 1 to 64 characters, "
		                           "no spaces, slashes or commas",
		                           argv[optind + 1]);
	if ((rc = isc_client_json(cli, "POST", "/v1/projects",
	                          json_pack("{s:s,s:s}", "org", org, "name", argv[optind + 1]),
	                          &reply)))
		return rc;
	if (json) {
		json_dumpf(reply, stdout, 0);
		putchar('\n');
	} else {
		/* The id alone on stdout (scripts keep it); what it is for, on stderr. */
		const char *id = json_string_value(json_object_get(reply, "id"));
		printf("%s\n", id);
		fprintf(stderr,
		        "isc project: created project '%s' (%s) in %s: launch files name it with "
		        "isc_project_id = \"%s\" (or its id); its members launch with isc burst "
		        "FILE.isc; isc project budget --org %s --project %s AMOUNT caps its "
		        "spending\n",
		        argv[optind + 1], id ? id : "?", org, argv[optind + 1], org,
		        argv[optind + 1]);
	}
	json_decref(reply);
	return ISC_EXIT_OK;
}

/*
 * Money member key of p as isc prints money ("$12.50"), into out: "none" when it is
 * null (no budget), NULL ("-" in a table) when p has no such member (a member of the
 * org, who does not read its money).
 */
static const char *project_money(json_t *p, const char *key, char *out, size_t cap)
{
	json_t *v = json_object_get(p, key);
	if (!v)
		return NULL;
	if (!json_is_integer(v))
		return "none";
	return isc_money_dollars(json_integer_value(v), out, cap);
}

static void project_row(json_t *p, const char **cells, char (*buf)[ISC_TABLE_CELL])
{
	cells[0] = isc_json_str(p, "id");
	cells[1] = isc_json_str(p, "org");
	cells[2] = isc_json_str(p, "name");
	cells[3] = project_money(p, "budget_micros", buf[3], ISC_TABLE_CELL);
	cells[4] = project_money(p, "spent_micros", buf[4], ISC_TABLE_CELL);
	cells[5] = project_money(p, "reserved_micros", buf[5], ISC_TABLE_CELL);
	cells[6] = project_money(p, "remaining_micros", buf[6], ISC_TABLE_CELL);
}

/* Every project of org (NULL: every org the caller belongs to) into *arr. */
static int projects_get(struct isc_cli *cli, const char *org, json_t **arr)
{
	char *path;
	int rc;

	if (!(path = strdup("/v1/projects")) || isc_client_query_add(&path, "org", org)) {
		free(path);
		return ISC_EXIT_FAIL;
	}
	rc = isc_client_json_all_pages(cli, path, arr);
	free(path);
	return rc;
}

static int project_list(struct isc_cli *cli, int argc, char **argv)
{
	static const char *const headers[] = {"ID",    "ORG",  "NAME",     "BUDGET",
	                                      "SPENT", "HELD", "REMAINING"};
	struct isc_table_spec projects = {7, headers, "lllrrrr", project_row, NULL};
	const char *org = NULL;
	json_t *arr = NULL;
	int rc, json = 0;

	if ((rc = project_options(argc, argv, &org, &json)))
		return rc;
	if (optind != argc - 1)
		return isc_cli_usage_error("project", "unexpected argument '%s'", argv[optind + 1]);
	if ((rc = projects_get(cli, org, &arr)))
		return rc;
	projects.empty_hint =
	    org ? "isc project: no projects in this organisation (isc project add --org ORG NAME)"
	        : "isc project: no projects yet (isc project add --org ORG NAME)";
	return isc_cli_print_listing(arr, json, &projects);
}

/*
 * isc project show [--org ORG] PROJECT: one project's budget and money (its
 * admins and finance; a member sees the project without its money).
 */
static int project_show(struct isc_cli *cli, int argc, char **argv)
{
	const char *org = NULL, *want;
	json_t *arr = NULL, *p, *found = NULL;
	char m[4][ISC_MONEY_TEXT_MAX];
	size_t i, matches = 0;
	int rc, json = 0;

	if ((rc = project_options(argc, argv, &org, &json)))
		return rc;
	if (optind != argc - 2)
		return isc_cli_usage_error("project",
		                           "usage: isc project show [--org ORG] PROJECT [--json]");
	want = argv[optind + 1];
	if ((rc = projects_get(cli, org, &arr)))
		return rc;
	json_array_foreach(arr, i, p)
	{
		if (strcmp(isc_json_str(p, "id"), want) != 0 &&
		    strcmp(isc_json_str(p, "name"), want) != 0)
			continue;
		if (!found || strcmp(isc_json_str(p, "id"), want) == 0)
			found = p;
		matches++;
	}
	if (!found || (matches > 1 && strcmp(isc_json_str(found, "id"), want) != 0)) {
		if (!found)
			isc_cli_errorf("no project '%s'%s%s (isc project list%s%s)", want,
			               org ? " in " : "", org ? org : "", org ? " --org " : "",
			               org ? org : "");
		else
			isc_cli_errorf("%zu organisations have a project '%s': name one with --org "
			               "ORG, or give the project's id",
			               matches, want);
		json_decref(arr);
		return ISC_EXIT_FAIL;
	}
	if (json) {
		isc_json_print(found, stdout);
		json_decref(arr);
		return ISC_EXIT_OK;
	}
	printf("project:    %s (%s)\norg:        %s\n", isc_json_str(found, "name"),
	       isc_json_str(found, "id"), isc_json_str(found, "org"));
	printf("budget:     %s\n", project_money(found, "budget_micros", m[0], sizeof(m[0])));
	if (!json_object_get(found, "spent_micros")) {
		printf("spent:      - (its money is for the org's admins and finance)\n");
	} else {
		printf("spent:      %s\nheld:       %s (reserved by running bursts)\n",
		       project_money(found, "spent_micros", m[1], sizeof(m[1])),
		       project_money(found, "reserved_micros", m[2], sizeof(m[2])));
		printf("remaining:  %s\n",
		       json_is_integer(json_object_get(found, "remaining_micros"))
		           ? project_money(found, "remaining_micros", m[3], sizeof(m[3]))
		           : "no cap (isc project budget --org ORG --project P AMOUNT sets one)");
	}
	json_decref(arr);
	return ISC_EXIT_OK;
}

int cmd_project(struct isc_cli *cli, int argc, char **argv)
{
	if (argc < 2 || isc_cli_wants_help(argc, argv)) {
		printf("usage: isc project add --org ORG NAME [--json]   (prints the new project's "
		       "id)\n"
		       "       isc project list [--org ORG] [--json]   (budget, spent, held, "
		       "remaining: for the org's admins and finance)\n"
		       "       isc project show [--org ORG] PROJECT [--json]\n"
		       "       isc project budget --org ORG --project P AMOUNT|none\n");
		return argc < 2 ? ISC_EXIT_USAGE : ISC_EXIT_OK;
	}
	if (strcmp(argv[1], "add") == 0)
		return project_add(cli, argc, argv);
	if (strcmp(argv[1], "list") == 0)
		return project_list(cli, argc, argv);
	if (strcmp(argv[1], "show") == 0)
		return project_show(cli, argc, argv);
	if (strcmp(argv[1], "budget") == 0)
		return cmd_project_budget(cli, argc, argv);
	return isc_cli_usage_error("project", "unknown subcommand '%s'", argv[1]);
}
