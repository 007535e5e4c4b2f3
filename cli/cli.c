/* Helpers shared by the isc subcommands. */
#include "cli/cli.h"

#include "cli/client.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void isc_cli_errorf(const char *fmt, ...)
{
	va_list ap;
	fputs("isc: error: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int isc_cli_fail(const struct isc_err *err)
{
	isc_cli_errorf("%s", err->msg[0] ? err->msg : isc_code_name(err->code));
	return ISC_EXIT_FAIL;
}

int isc_cli_usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "isc %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\ntry 'isc %s --help'\n", cmd);
	return ISC_EXIT_USAGE;
}

int isc_cli_wants_help(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0)
			return 0;
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			return 1;
	}
	return 0;
}

/* iscd answers its API within wait_ms (asked every 100 ms: a daemon started a moment ago). */
static int daemon_answers(struct isc_cli *cli, long wait_ms)
{
	for (long waited = 0;; waited += 100) {
		if (isc_client_ping(cli))
			return 1;
		if (waited >= wait_ms)
			return 0;
		usleep(100 * 1000);
	}
}

int isc_cli_need_daemon(struct isc_cli *cli, const char *cmd, int wait_for_daemon)
{
	if (daemon_answers(cli, 1200))
		return ISC_EXIT_OK;
	if (wait_for_daemon) {
		fprintf(
		    stderr,
		    "isc %s: iscd is not running for %s yet; waiting for it (--wait-for-daemon); "
		    "start it with: iscd --home %s &\n",
		    cmd, cli->home, cli->home);
		return ISC_EXIT_OK;
	}
	isc_cli_errorf("iscd is not running for %s, so nothing would move", cli->home);
	fprintf(stderr,
	        "start it with: iscd --home %s & (or add --wait-for-daemon to wait for it)\n",
	        cli->home);
	return ISC_EXIT_FAIL;
}

int isc_cli_daemon_still_there(struct isc_cli *cli, const char *cmd, int wait_for_daemon,
                               int *was_running)
{
	int running = isc_client_ping(cli);

	if (running && !*was_running)
		fprintf(stderr, "isc %s: iscd is running for %s\n", cmd, cli->home);
	if (!running && *was_running) {
		if (!wait_for_daemon) {
			isc_cli_errorf("iscd is not running for %s any more, so nothing moves (the "
			               "experiment goes on from where it is once it runs again)",
			               cli->home);
			fprintf(
			    stderr,
			    "start it with: iscd --home %s & (or add --wait-for-daemon to wait for "
			    "it)\n",
			    cli->home);
			return ISC_EXIT_FAIL;
		}
		fprintf(stderr,
		        "isc %s: iscd is not running for %s; waiting for it (--wait-for-daemon); "
		        "start it with: iscd --home %s &\n",
		        cmd, cli->home, cli->home);
	}
	*was_running = running;
	return ISC_EXIT_OK;
}

int isc_cli_print_listing(json_t *reply, int json, const struct isc_table_spec *spec)
{
	int rc = ISC_EXIT_OK;
	if (json) {
		isc_json_print(reply, stdout);
	} else if (isc_table_print_rows(spec, reply, stdout)) {
		isc_cli_errorf("out of memory");
		rc = ISC_EXIT_FAIL;
	}
	json_decref(reply);
	return rc;
}
