/*
 * The subcommands of `isc`. Each takes argv starting at its own name and
 * returns an exit code (ISC_EXIT_*). The dispatch table is in cli/isc.c.
 */
#ifndef ISC_CLI_COMMANDS_H
#define ISC_CLI_COMMANDS_H

#include "cli/cli.h"

int cmd_init(struct isc_cli *cli, int argc, char **argv);
int cmd_org(struct isc_cli *cli, int argc, char **argv);
int cmd_project(struct isc_cli *cli, int argc, char **argv);
int cmd_experiments(struct isc_cli *cli, int argc, char **argv);
int cmd_validate(struct isc_cli *cli, int argc, char **argv);
int cmd_train(struct isc_cli *cli, int argc, char **argv);
int cmd_burst(struct isc_cli *cli, int argc, char **argv);
int cmd_status(struct isc_cli *cli, int argc, char **argv);
int cmd_logs(struct isc_cli *cli, int argc, char **argv);
int cmd_cancel(struct isc_cli *cli, int argc, char **argv);
int cmd_shapes(struct isc_cli *cli, int argc, char **argv);
int cmd_catalog(struct isc_cli *cli, int argc, char **argv);
int cmd_check(struct isc_cli *cli, int argc, char **argv);
int cmd_credits(struct isc_cli *cli, int argc, char **argv);
int cmd_spend(struct isc_cli *cli, int argc, char **argv);
int cmd_nodes(struct isc_cli *cli, int argc, char **argv);
int cmd_keys(struct isc_cli *cli, int argc, char **argv);
int cmd_datasets(struct isc_cli *cli, int argc, char **argv);
int cmd_user(struct isc_cli *cli, int argc, char **argv);
int cmd_member(struct isc_cli *cli, int argc, char **argv);
int cmd_token(struct isc_cli *cli, int argc, char **argv);
int cmd_audit(struct isc_cli *cli, int argc, char **argv);
int cmd_store(struct isc_cli *cli, int argc, char **argv);
/* `isc project budget`, dispatched by cmd_project (argv[0] "project", argv[1] "budget"). */
int cmd_project_budget(struct isc_cli *cli, int argc, char **argv);

#endif
