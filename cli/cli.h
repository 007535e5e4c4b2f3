/*
 * What every `isc` subcommand shares: the resolved home, opening the store,
 * printing errors the same way, and the exit codes (0 ok, 1 failure, 2 usage).
 */
#ifndef ISC_CLI_CLI_H
#define ISC_CLI_CLI_H

#include "cli/lib/table.h"
#include "common/err.h"

enum { ISC_EXIT_OK = 0, ISC_EXIT_FAIL = 1, ISC_EXIT_USAGE = 2 };

struct isc_cli {
	char *home; /* resolved ISC_HOME, owned */
	/* The command's words for the API's (cli/client.h, isc_client_fail_in); NULL: none. */
	const char *const *words;
};

/* "isc: error: <message>" on stderr. */
void isc_cli_errorf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints err's message as above and returns ISC_EXIT_FAIL. */
int isc_cli_fail(const struct isc_err *err);
/* "isc CMD: <message>" + "try 'isc CMD --help'" on stderr; returns ISC_EXIT_USAGE. */
int isc_cli_usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/*
 * For commands that wait on iscd (burst --wait, logs --follow): whether an iscd
 * answers its API (cli/client.c), asked for up to 1.2 s so a daemon
 * started just before has time to come up. When none runs, says so and how to
 * start it, and returns ISC_EXIT_FAIL; with wait_for_daemon it says it keeps
 * waiting and returns ISC_EXIT_OK. Nothing ever waits in silence.
 */
int isc_cli_need_daemon(struct isc_cli *cli, const char *cmd, int wait_for_daemon);
/*
 * The same during a wait, without the grace: 0 while iscd runs (or came back),
 * ISC_EXIT_FAIL once it is gone and the caller should stop (a line says so);
 * with wait_for_daemon a line says it is gone once, and the wait goes on.
 * *was_running carries what the last call saw (start it at 1).
 */
int isc_cli_daemon_still_there(struct isc_cli *cli, const char *cmd, int wait_for_daemon,
                               int *was_running);

/*
 * A listing from the API as a command prints it: the reply as --json when
 * json is set, else as spec's table. Frees reply; returns an exit code.
 */
int isc_cli_print_listing(json_t *reply, int json, const struct isc_table_spec *spec);

/* True when argv[i] is --help or -h. */
int isc_cli_wants_help(int argc, char **argv);

#endif
