/*
 * isc: the command line of the burst broker. Parses the global options
 * (--home), then hands argv to the subcommand, which owns the rest.
 * Exit codes: 0 ok, 1 failure, 2 usage.
 */
#include "cli/commands.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct command {
	const char *name;
	int (*run)(struct isc_cli *cli, int argc, char **argv);
	const char *summary;
};

static const struct command commands[] = {
    {"init", cmd_init, "create the store (and load the default shape catalog)"},
    {"org", cmd_org, "add and list organisations"},
    {"project", cmd_project, "add and list projects, set budgets"},
    {"validate", cmd_validate, "check a launch file (.isc)"},
    {"train", cmd_train, "record an experiment from a launch file"},
    {"burst", cmd_burst, "record a burst experiment; --wait follows it"},
    {"experiments", cmd_experiments, "list experiments"},
    {"check", cmd_check, "prove a cloud accepts the credentials"},
    {"shapes", cmd_shapes, "rank GPU shapes for a request"},
    {"catalog", cmd_catalog, "import and summarise the shape catalog"},
    {"status", cmd_status, "an experiment's state and timeline of events"},
    {"logs", cmd_logs, "a rank's output"},
    {"cancel", cmd_cancel, "cancel an experiment"},
    {"credits", cmd_credits, "grant credits, show balances"},
    {"spend", cmd_spend, "spend per project, experiment, provider, shape or day"},
    {"nodes", cmd_nodes, "the on-prem node pool: add, list, drain, remove, pubkey"},
};

static void usage(FILE *out)
{
	fprintf(out, "usage: isc [--home DIR] COMMAND [ARGS...]\n\n"
	             "The command line of the isc burst broker. The store lives in --home,\n"
	             "else $ISC_HOME, else ~/.isc.\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(out, "  %-12s %s\n", commands[i].name, commands[i].summary);
	fprintf(out, "\nRun 'isc COMMAND --help' for a command's options.\n");
}

int main(int argc, char **argv)
{
	struct isc_cli cli = {0};
	const char *home_flag = NULL;
	struct isc_err err;
	int i = 1, rc;

	umask(077); /* every file and folder isc makes is owner-only */
	while (i < argc && argv[i][0] == '-') {
		if (strcmp(argv[i], "--home") == 0 && i + 1 < argc) {
			home_flag = argv[i + 1];
			i += 2;
		} else if (strncmp(argv[i], "--home=", 7) == 0) {
			home_flag = argv[i] + 7;
			i++;
		} else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			usage(stdout);
			return ISC_EXIT_OK;
		} else {
			fprintf(stderr, "isc: unknown option '%s'\n", argv[i]);
			usage(stderr);
			return ISC_EXIT_USAGE;
		}
	}
	if (i >= argc) {
		usage(stderr);
		return ISC_EXIT_USAGE;
	}
	for (size_t c = 0; c < sizeof(commands) / sizeof(commands[0]); c++) {
		if (strcmp(commands[c].name, argv[i]) != 0)
			continue;
		isc_err_clear(&err);
		cli.home = isc_home_resolve(home_flag, &err);
		if (!cli.home)
			return isc_cli_fail(&err);
		rc = commands[c].run(&cli, argc - i, argv + i);
		free(cli.home);
		return rc;
	}
	fprintf(stderr, "isc: unknown command '%s'\n", argv[i]);
	usage(stderr);
	return ISC_EXIT_USAGE;
}
