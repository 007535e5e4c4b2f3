/* isc status, isc logs, isc cancel: following one experiment. */
#include "cli/commands.h"
#include "config/config.h"
#include "broker/liveness.h"
#include "store/store_experiments.h"
#include "store/store_queue.h"
#include "store/store_ranks.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void format_time(int64_t ms, char *out, size_t cap)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(out, cap, "%Y-%m-%d %H:%M:%S", &tm);
}

/*
 * Each rank of the latest cycle that has exits: its code, or "running" while
 * the experiment runs ("no exit seen" once it has ended); the first to fail marked.
 */
static void print_ranks(const struct isc_experiment *e, const struct isc_rank_outcome *r, size_t n)
{
	int cycle = n ? r[n - 1].cycle : 0, nranks = e->nnodes, first_failed = -1;

	if (n == 0)
		return;
	for (size_t i = 0; i < n; i++)
		if (r[i].cycle == cycle && r[i].rank + 1 > nranks)
			nranks = r[i].rank + 1;
	for (size_t i = 0; i < n && first_failed < 0; i++)
		if (r[i].cycle == cycle && r[i].code != 0)
			first_failed = r[i].rank;
	printf("  Ranks:    (cycle %d)\n", cycle);
	for (int k = 0; k < nranks; k++) {
		const struct isc_rank_outcome *o = NULL;
		for (size_t i = 0; i < n; i++)
			if (r[i].cycle == cycle && r[i].rank == k)
				o = &r[i];
		if (!o)
			printf("    rank %-4d %s\n", k,
			       isc_status_is_final(e->status) ? "no exit seen (stopped)"
			                                      : "running");
		else if (o->code < 0)
			printf("    rank %-4d vanished%s\n", k,
			       k == first_failed ? "   <- first to fail" : "");
		else
			printf("    rank %-4d exit %d%s\n", k, o->code,
			       k == first_failed ? "   <- first to fail" : "");
	}
}

int cmd_status(struct isc_cli *cli, int argc, char **argv)
{
	struct isc_store *s;
	struct isc_experiment e;
	struct isc_event *ev;
	struct isc_rank_outcome *ranks = NULL;
	struct isc_err err;
	const char *id = NULL;
	struct isc_queue_row qrow = {0};
	struct isc_err qerr;
	size_t n, n_ranks = 0;
	char artifacts[4096];
	int rc, json = 0, have_queue = 0;

	if (isc_cli_wants_help(argc, argv)) {
		printf("usage: isc status ID [--json]\n\nShows an experiment's state and the "
		       "timeline of its "
		       "events: every transition with its reason\n(which shape was tried, which "
		       "error came back).\n");
		return ISC_EXIT_OK;
	}
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			json = 1;
		else if (argv[i][0] == '-' || id)
			return isc_cli_usage_error("status", "unexpected argument '%s'", argv[i]);
		else
			id = argv[i];
	}
	if (!id)
		return isc_cli_usage_error("status", "an experiment ID is required");
	if ((rc = isc_cli_store_open(cli, 0, &s)))
		return rc;
	isc_err_clear(&err);
	if ((rc = isc_store_experiment_get(s, id, &e, &err))) {
		isc_store_free(s);
		return isc_cli_fail(&err);
	}
	rc = isc_store_event_list(s, id, 0, &ev, &n, &err);
	/* The on-prem queue's view (iscd writes it); bursts that never queued have none. */
	have_queue = isc_store_queue_get(s, id, &qrow, &qerr) == 0;
	if (!rc && (rc = isc_store_rank_exit_list(s, id, &ranks, &n_ranks, &err)))
		isc_event_list_free(ev, n);
	isc_store_free(s);
	if (rc) {
		isc_experiment_cleanup(&e);
		return isc_cli_fail(&err);
	}
	{
		/* Where rank 0's folders come home: the Output Path unless artifact_root moves
		 * them (docs/config.md). */
		struct isc_config *cfg = NULL;
		char *dir = NULL;
		if (isc_config_load(cli->home, &cfg, NULL) == 0)
			dir = isc_config_artifact_dir(cfg, cli->home, e.id);
		snprintf(artifacts, sizeof(artifacts), "%s", dir ? dir : e.output_path);
		free(dir);
		isc_config_free(cfg);
	}
	if (json) {
		json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:i,s:i,s:i,s:s,s:i,s:s}", "id", e.id,
		                      "name", e.name, "project_id", e.project_id, "status",
		                      e.status, "status_reason", e.status_reason, "gpus", e.gpus,
		                      "nnodes", e.nnodes, "nproc", e.nproc, "shape", e.shape_id,
		                      "cycle_count", e.cycle_count, "output_path", e.output_path);
		json_t *arr = json_array();
		for (size_t i = 0; i < n; i++)
			json_array_append_new(arr, json_pack("{s:I,s:s,s:s}", "at_ms",
			                                     (json_int_t)ev[i].at_ms, "kind",
			                                     ev[i].kind, "message", ev[i].message));
		json_object_set_new(o, "next_attempt_ms", json_integer(e.next_attempt_ms));
		json_object_set_new(o, "artifacts_path", json_string(artifacts));
		json_object_set_new(o, "events", arr);
		if (have_queue)
			json_object_set_new(
			    o, "queue",
			    json_pack("{s:i,s:I,s:s,s:i}", "position", qrow.position,
			              "next_start_ms", (json_int_t)qrow.next_start_ms, "run_nodes",
			              qrow.run_nodes, "cycles_done", qrow.cycles_done));
		arr = json_array();
		for (size_t i = 0; i < n_ranks; i++)
			json_array_append_new(
			    arr, json_pack("{s:i,s:s,s:i,s:i,s:I}", "cycle", ranks[i].cycle,
			                   "cluster_id", ranks[i].cluster_id, "rank", ranks[i].rank,
			                   "exit_code", ranks[i].code, "at_ms",
			                   (json_int_t)ranks[i].at_ms));
		json_object_set_new(o, "ranks", arr);
		json_dumpf(o, stdout, JSON_INDENT(2));
		putchar('\n');
		json_decref(o);
	} else {
		char when[32];
		printf("Experiment %s (%s)\n", e.id, e.name);
		printf("  Status:   %s%s%s\n", e.status, e.status_reason[0] ? ": " : "",
		       e.status_reason);
		if (strcmp(e.status, "waiting") == 0 && e.next_attempt_ms > 0) {
			format_time(e.next_attempt_ms, when, sizeof(when));
			printf("  Next try: %s UTC\n", when);
		}
		printf("  GPUs:     %d", e.gpus);
		if (e.nnodes)
			printf(" as %d x %d", e.nnodes, e.nproc);
		printf("\n  Shape:    %s\n  Cycle:    %d\n  Output:   %s%s\n",
		       e.shape_id[0] ? e.shape_id : "-", e.cycle_count,
		       e.output_path[0] ? e.output_path : "-",
		       strcmp(artifacts, e.output_path) == 0
		           ? " (rank_N.txt; checkpoints, crud, lossy from rank 0)"
		           : " (rank_N.txt)");
		if (artifacts[0] && strcmp(artifacts, e.output_path) != 0)
			printf("  Artifacts: %s (checkpoints, crud, lossy; artifact_root)\n",
			       artifacts);
		if (have_queue && qrow.position > 0 && !isc_status_is_final(e.status)) {
			printf("  Queue:    waiting, #%d among %s experiments", qrow.position,
			       e.compute_mode);
			if (qrow.next_start_ms >= 0) {
				format_time(qrow.next_start_ms, when, sizeof(when));
				printf("; next start expected %s UTC", when);
			}
			putchar('\n');
		}
		print_ranks(&e, ranks, n_ranks);
		printf("\nTimeline (UTC):\n");
		for (size_t i = 0; i < n; i++) {
			format_time(ev[i].at_ms, when, sizeof(when));
			printf("  %s  %-16s %s\n", when, ev[i].kind, ev[i].message);
		}
	}
	isc_event_list_free(ev, n);
	isc_rank_outcome_list_free(ranks, n_ranks);
	isc_experiment_cleanup(&e);
	isc_queue_row_cleanup(&qrow);
	return ISC_EXIT_OK;
}

/* Copies new bytes of path from *offset to stdout; returns 0, or -1 if the file is missing. */
static int print_from(const char *path, long *offset)
{
	char buf[8192];
	size_t got;
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	if (fseek(f, *offset, SEEK_SET) == 0) {
		while ((got = fread(buf, 1, sizeof(buf), f)) > 0) {
			fwrite(buf, 1, got, stdout);
			*offset += (long)got;
		}
	}
	fclose(f);
	fflush(stdout);
	return 0;
}

int cmd_logs(struct isc_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {{"rank", required_argument, NULL, 'r'},
	                                     {"follow", no_argument, NULL, 'f'},
	                                     {"wait-for-daemon", no_argument, NULL, 'D'},
	                                     {NULL, 0, NULL, 0}};
	struct isc_store *s;
	struct isc_experiment e;
	struct isc_err err;
	char *path = NULL;
	long offset = 0, rank = 0;
	int c, rc, follow = 0, wait_for_daemon = 0, daemon_up = 1;
	unsigned turn = 0;
	char *said = NULL; /* the status last reported while there is no output yet */

	if (isc_cli_wants_help(argc, argv)) {
		printf("usage: isc logs ID [--rank N] [--follow [--wait-for-daemon]]\n\nPrints "
		       "rank N's output (default rank 0), as brought home by the broker\ninto the "
		       "experiment's output folder. --follow keeps printing until the experiment "
		       "ends;\nbefore the rank has output it says what the experiment waits for. "
		       "Without a\nrunning iscd, --follow exits 1 saying how to start one, unless "
		       "--wait-for-daemon\nasks to wait for it.\n");
		return ISC_EXIT_OK;
	}
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "f", opts, NULL)) != -1) {
		if (c == 'r') {
			char *end;
			errno = 0;
			rank = strtol(optarg, &end, 10);
			if (*end || errno || rank < 0 || rank > 4096)
				return isc_cli_usage_error(
				    "logs", "--rank: '%s' is not a rank number", optarg);
		} else if (c == 'f') {
			follow = 1;
		} else if (c == 'D') {
			follow = wait_for_daemon = 1;
		} else {
			return isc_cli_usage_error("logs", "unknown or incomplete option '%s'",
			                           argv[optind - 1]);
		}
	}
	if (optind != argc - 1)
		return isc_cli_usage_error("logs", "exactly one experiment ID is required");
	if ((rc = isc_cli_store_open(cli, 0, &s)))
		return rc;
	isc_err_clear(&err);
	if ((rc = isc_store_experiment_get(s, argv[optind], &e, &err))) {
		isc_store_free(s);
		return isc_cli_fail(&err);
	}
	/* Before placement the layout is unknown: any rank a GPU count allows. */
	if (rank >= (e.nnodes > 0 ? e.nnodes : e.gpus > 0 ? e.gpus : 1)) {
		isc_cli_errorf("experiment %s has %d node(s): no rank %ld", e.id, e.nnodes, rank);
		rc = ISC_EXIT_FAIL;
		goto out;
	}
	if (asprintf(&path, "%s/rank_%ld.txt", e.output_path, rank) < 0) {
		rc = ISC_EXIT_FAIL;
		goto out;
	}
	if (follow && !isc_status_is_final(e.status)) {
		if ((rc = isc_cli_need_daemon(cli, "logs", wait_for_daemon)))
			goto out;
		daemon_up = isc_daemon_running(cli->home, NULL);
	}
	for (;;) {
		int missing = print_from(path, &offset) != 0;
		int final = isc_status_is_final(e.status);
		if (follow && !final && missing && offset == 0 &&
		    (!said || strcmp(said, e.status) != 0)) {
			/* Not started yet: say what it waits for, once per change of status. */
			fprintf(stderr,
			        "isc logs: rank %ld of %s has no output yet: the experiment is "
			        "%s%s%s\n",
			        rank, e.id, e.status, e.status_reason[0] ? ": " : "",
			        e.status_reason);
			free(said);
			said = strdup(e.status);
		}
		if (follow && !final && ++turn % 4 == 0 &&
		    (rc = isc_cli_daemon_still_there(cli, "logs", wait_for_daemon, &daemon_up)))
			break;
		if (!follow || final) {
			if (missing && offset == 0 && !follow)
				isc_cli_errorf("no output yet for rank %ld of %s (%s%s%s)", rank,
				               e.id, e.status, e.status_reason[0] ? ": " : "",
				               e.status_reason);
			rc = missing && offset == 0 && !follow ? ISC_EXIT_FAIL : ISC_EXIT_OK;
			if (final && follow)
				print_from(path, &offset);
			break;
		}
		usleep(500 * 1000);
		isc_experiment_cleanup(&e);
		if (isc_store_experiment_get(s, argv[optind], &e, &err)) {
			rc = isc_cli_fail(&err);
			free(said);
			free(path);
			isc_store_free(s);
			return rc;
		}
	}
out:
	free(said);
	free(path);
	isc_experiment_cleanup(&e);
	isc_store_free(s);
	return rc;
}

int cmd_cancel(struct isc_cli *cli, int argc, char **argv)
{
	struct isc_store *s;
	struct isc_err err;
	int rc;

	if (isc_cli_wants_help(argc, argv)) {
		printf("usage: isc cancel ID\n\nAsks the broker to cancel an experiment: its "
		       "containers are "
		       "stopped with a grace\nperiod (so the script can checkpoint), its nodes "
		       "terminated, and it "
		       "ends as cancelled.\n");
		return ISC_EXIT_OK;
	}
	if (argc != 2 || argv[1][0] == '-')
		return isc_cli_usage_error("cancel", "exactly one experiment ID is required");
	if ((rc = isc_cli_store_open(cli, 0, &s)))
		return rc;
	isc_err_clear(&err);
	rc = isc_store_experiment_request_cancel(s, argv[1], &err);
	isc_store_free(s);
	if (rc)
		return isc_cli_fail(&err);
	printf("cancel requested for %s\n", argv[1]);
	if (!isc_daemon_running(cli->home, NULL))
		fprintf(stderr,
		        "isc cancel: no iscd is running for %s; it carries the cancel out once "
		        "started ('iscd --home %s &')\n",
		        cli->home, cli->home);
	return ISC_EXIT_OK;
}
