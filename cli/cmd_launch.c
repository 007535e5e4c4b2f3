/*
 * isc validate, isc train, isc burst: from a launch file to an experiment
 * recorded as enqueued. Nothing is written unless the whole file is valid and
 * its project exists. `isc burst --wait` then follows the experiment live.
 */
#include "cli/client.h"
#include "cli/commands.h"
#include "common/buf.h"
#include "credits/money.h"
#include "launchfile/launchfile.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/*
 * Loads and validates; prints every problem as FILE:LINE:COL: error: FIELD: message.
 * default_burst: a file without compute_mode is validated as a burst (isc burst),
 * so burst-only fields such as burst_shape_priority_list are allowed in it.
 */
static int load_launch(const char *path, int default_burst, struct isc_launch **out)
{
	struct isc_launch_problems problems;
	struct isc_err err;
	char *text = NULL;
	size_t len = 0;
	int rc;

	isc_launch_problems_init(&problems);
	isc_err_clear(&err);
	rc = isc_launch_read_file(path, ISC_LAUNCH_MAX_FILE_BYTES, &text, &len, &err);
	if (!rc && default_burst)
		rc = isc_launch_default_burst(&text, &len, &err);
	if (!rc)
		rc = isc_launch_parse(path, text, len, out, &problems, &err);
	free(text);
	if (rc && problems.len > 0)
		isc_launch_problems_print(&problems, path, stderr);
	else if (rc)
		isc_cli_fail(&err);
	isc_launch_problems_cleanup(&problems);
	return rc ? ISC_EXIT_FAIL : ISC_EXIT_OK;
}

/*
 * What only iscd can check (the store, the catalog and config.toml it reads), named
 * when it does not answer, so "valid" never claims more than was checked.
 */
static const char *const daemon_checks =
    "the project exists and you may launch into it; burst_shape_priority_list against the "
    "catalog and the clouds this broker configures; the datasets are the organisation's "
    "and Available";

int cmd_validate(struct isc_cli *cli, int argc, char **argv)
{
	struct isc_launch *l;
	struct isc_reply r = {0};
	struct isc_err err;
	const char *path = NULL;
	char *text = NULL, *url = NULL;
	size_t len = 0;
	json_t *o = NULL;
	int json = 0, daemon_up, rc;

	if (isc_cli_wants_help(argc, argv)) {
		printf("usage: isc validate FILE.isc [--json]\n\n"
		       "Checks a launch file as isc train and isc burst do, without creating\n"
		       "anything. With iscd running it runs every check they run (one set of\n"
		       "checks, in iscd): the project exists and you may launch into it, the\n"
		       "priority list names shapes this broker can place, the datasets are\n"
		       "Available. Without iscd only the file itself is checked, and a note\n"
		       "names what was not. Exit 0 when valid (with --json, prints the\n"
		       "normalized experiment); otherwise exit 1 and one line per problem:\n"
		       "  FILE:LINE:COL: error: FIELD: message\n"
		       "Ids of burst_shape_priority_list that name no shape are warnings while\n"
		       "another id of the list names a placeable shape (burst skips them):\n"
		       "  FILE:LINE:COL: warning: burst_shape_priority_list[i]: no shape \"ID\"; "
		       "did you mean \"ID2\"?\n"
		       "See docs/launch-files.md.\n");
		return ISC_EXIT_OK;
	}
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			json = 1;
		else if (argv[i][0] == '-' || path)
			return isc_cli_usage_error("validate", "unexpected argument '%s'", argv[i]);
		else
			path = argv[i];
	}
	if (!path)
		return isc_cli_usage_error("validate", "a launch file is required");
	if ((rc = load_launch(path, 0, &l)))
		return rc;
	isc_err_clear(&err);
	if (!(daemon_up = isc_client_ping(cli))) {
		fprintf(stderr,
		        "%s: note: iscd is not running, so these were not checked: %s (start it: "
		        "iscd --home %s &)\n",
		        path, daemon_checks, cli->home);
	} else if (isc_launch_read_file(path, ISC_LAUNCH_MAX_FILE_BYTES, &text, &len, &err)) {
		rc = isc_cli_fail(&err);
	} else if (!(url = strdup("/v1/experiments")) || isc_client_query_add(&url, "file", path) ||
	           isc_client_query_add(&url, "dry_run", "1")) {
		isc_cli_errorf("out of memory");
		rc = ISC_EXIT_FAIL;
	} else if (!(rc = isc_client_request(cli, "POST", url, text, len, &r))) {
		/* The same checks isc burst's POST runs, nothing recorded. */
		if (r.status != 200) {
			rc = isc_client_fail(&r);
		} else {
			o = json_loadb(r.body, r.len, 0, NULL);
			if (json_string_value(json_object_get(o, "warnings")))
				fputs(json_string_value(json_object_get(o, "warnings")), stderr);
		}
	}
	if (!rc && json) {
		json_t *out = isc_launch_to_json(l);
		json_dumpf(out, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		putchar('\n');
		json_decref(out);
	} else if (!rc) {
		printf("%s: valid%s\n", path, daemon_up ? "" : " (the file only: see the note)");
	}
	json_decref(o);
	isc_reply_cleanup(&r);
	free(text);
	free(url);
	isc_launch_free(l);
	return rc;
}

static const char *final_exit_status(const char *status, int *code)
{
	*code = strcmp(status, "completed") == 0 ? ISC_EXIT_OK : ISC_EXIT_FAIL;
	return status;
}

/*
 * The experiment's cost once it is final: its last node periods are charged on a meter
 * tick after it ended (docs/credits.md), so the wait goes on until the cost settles
 * (COST_SETTLE_WAIT_S at most; then it says the cost is still settling).
 */
#define COST_SETTLE_WAIT_S 60
static void print_final_cost(struct isc_cli *cli, const char *id)
{
	char path[160], cost[40];
	json_t *o = NULL;
	int settling = 1;

	snprintf(path, sizeof(path), "/v1/experiments/%s", id);
	for (int i = 0; i < COST_SETTLE_WAIT_S * 5; i++) {
		json_decref(o);
		o = NULL;
		if (isc_client_json(cli, "GET", path, NULL, &o))
			return;
		if (!(settling = json_is_true(json_object_get(o, "cost_settling"))))
			break;
		usleep(200 * 1000);
	}
	isc_money_dollars(json_integer_value(json_object_get(o, "cost_micros")), cost,
	                  sizeof(cost));
	if (settling)
		printf("%s: cost %s so far, still settling (isc status %s shows the final cost)\n",
		       id, cost, id);
	else
		printf("%s: cost %s (final)\n", id, cost);
	json_decref(o);
}

/*
 * Live progress of a burst until it ends: events as they come, polled over the API.
 * A wait on a daemon that went away says so (and goes on waiting with --wait-for-daemon).
 */
static int wait_for(struct isc_cli *cli, const char *id, int wait_for_daemon)
{
	long long last_event = 0;
	int rc, code = ISC_EXIT_FAIL, daemon_up = 1;

	printf("waiting for %s (Ctrl-C stops waiting; the experiment goes on)\n", id);
	for (;;) {
		char path[160];
		json_t *o = NULL, *ev, *events;
		size_t i;

		if (!isc_client_ping(cli) || !daemon_up) {
			if ((rc = isc_cli_daemon_still_there(cli, "burst", wait_for_daemon,
			                                     &daemon_up)))
				return rc;
			if (!daemon_up) {
				usleep(500 * 1000);
				continue;
			}
		}
		snprintf(path, sizeof(path), "/v1/experiments/%s/events?after=%lld", id,
		         last_event);
		if ((rc = isc_client_json(cli, "GET", path, NULL, &o)))
			return rc;
		events = json_object_get(o, "events");
		json_array_foreach(events, i, ev)
		{
			time_t t =
			    (time_t)(json_integer_value(json_object_get(ev, "at_ms")) / 1000);
			struct tm tm;
			char when[16];
			gmtime_r(&t, &tm);
			strftime(when, sizeof(when), "%H:%M:%S", &tm);
			printf("  %s  %-14s %s\n", when,
			       json_string_value(json_object_get(ev, "kind")),
			       json_string_value(json_object_get(ev, "message")));
			last_event = json_integer_value(json_object_get(ev, "id"));
		}
		fflush(stdout);
		if (json_is_true(json_object_get(o, "final"))) {
			const char *reason = json_string_value(json_object_get(o, "status_reason"));
			printf("%s: %s%s%s\n", id,
			       final_exit_status(json_string_value(json_object_get(o, "status")),
			                         &code),
			       reason && reason[0] ? ": " : "", reason ? reason : "");
			json_decref(o);
			print_final_cost(cli, id);
			return code;
		}
		json_decref(o);
		usleep(200 * 1000);
	}
}

static int submit(struct isc_cli *cli, int argc, char **argv, int burst)
{
	const char *cmd = burst ? "burst" : "train";
	struct isc_launch *l = NULL;
	struct isc_reply r = {0};
	struct isc_err err;
	const char *path = NULL;
	char *text = NULL, *url = NULL;
	size_t len = 0;
	json_t *o = NULL;
	int wait = 0, wait_for_daemon = 0, rc;

	if (isc_cli_wants_help(argc, argv)) {
		if (burst)
			printf(
			    "usage: isc burst FILE.isc [--wait [--wait-for-daemon]]\n\nRecords a "
			    "burst experiment (compute_mode \"burst\", set when absent) as "
			    "enqueued;\niscd places it on a cloud cluster. --wait follows it live "
			    "until it ends;\nthe exit status is then 0 only if every rank exited "
			    "0. "
			    "Without a running\niscd it exits 1 saying how to start one, unless "
			    "--wait-for-daemon asks to\nwait for it. Ids of "
			    "burst_shape_priority_list that name no shape are skipped\nwith a "
			    "warning; a list with no valid id, or none this broker can place, is\n"
			    "refused.\n");
		else
			printf("usage: isc train FILE.isc\n\nRecords an experiment (any compute "
			       "mode) as "
			       "enqueued.\n");
		return ISC_EXIT_OK;
	}
	for (int i = 1; i < argc; i++) {
		if (burst && strcmp(argv[i], "--wait") == 0)
			wait = 1;
		else if (burst && strcmp(argv[i], "--wait-for-daemon") == 0)
			wait = wait_for_daemon = 1;
		else if (argv[i][0] == '-' || path)
			return isc_cli_usage_error(cmd, "unexpected argument '%s'", argv[i]);
		else
			path = argv[i];
	}
	if (!path)
		return isc_cli_usage_error(cmd, "a launch file is required");
	/* Checked here first so problems show at once; iscd checks again (it trusts no client). */
	if ((rc = load_launch(path, burst, &l)))
		return rc;
	if (burst) {
		/* A burst file may omit compute_mode (then it is a burst); another mode is a
		 * mistake. */
		if (l->compute_mode != ISC_MODE_BURST) {
			fprintf(
			    stderr,
			    "%s: error: compute_mode: isc burst needs compute_mode = \"burst\" (or "
			    "none), not \"%s\"\n",
			    path, isc_compute_mode_name(l->compute_mode));
			rc = ISC_EXIT_FAIL;
			goto out;
		}
		if (l->gpus > 48) {
			fprintf(stderr,
			        "%s: error: gpus: burst requests are limited to 48 GPUs, not %d\n",
			        path, l->gpus);
			rc = ISC_EXIT_FAIL;
			goto out;
		}
	}
	isc_err_clear(&err);
	if (isc_launch_read_file(path, ISC_LAUNCH_MAX_FILE_BYTES, &text, &len, &err)) {
		rc = isc_cli_fail(&err);
		goto out;
	}
	/* Before anything is recorded: a --wait with no daemon to wait on is refused, or waits
	 * for one (iscd records the experiment, so it must answer first). */
	if (wait && (rc = isc_cli_need_daemon(cli, cmd, wait_for_daemon)))
		goto out;
	while (wait_for_daemon && !isc_client_ping(cli))
		usleep(200 * 1000);
	if (!(url = strdup("/v1/experiments")) || isc_client_query_add(&url, "file", path) ||
	    (burst && isc_client_query_add(&url, "default_mode", "burst"))) {
		rc = ISC_EXIT_FAIL;
		goto out;
	}
	if ((rc = isc_client_request(cli, "POST", url, text, len, &r)))
		goto out;
	if (r.status != 201) {
		rc = isc_client_fail(&r);
		goto out;
	}
	o = json_loadb(r.body, r.len, 0, NULL);
	/* Warnings about the priority list (ids that name no shape), as FILE:LINE:COL lines. */
	if (json_string_value(json_object_get(o, "warnings")))
		fputs(json_string_value(json_object_get(o, "warnings")), stderr);
	if (!json_string_value(json_object_get(o, "id"))) {
		isc_cli_errorf("iscd's reply names no experiment");
		rc = ISC_EXIT_FAIL;
		goto out;
	}
	printf("Success: Experiment created\n%s\n", json_string_value(json_object_get(o, "id")));
	fflush(stdout);
	if (wait)
		rc = wait_for(cli, json_string_value(json_object_get(o, "id")), wait_for_daemon);
out:
	json_decref(o);
	isc_reply_cleanup(&r);
	free(text);
	free(url);
	isc_launch_free(l);
	return rc;
}

int cmd_train(struct isc_cli *cli, int argc, char **argv)
{
	return submit(cli, argc, argv, 0);
}

int cmd_burst(struct isc_cli *cli, int argc, char **argv)
{
	return submit(cli, argc, argv, 1);
}
