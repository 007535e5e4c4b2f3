/* isc status, isc logs, isc cancel: following one experiment through the API. */
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/lib/table.h"
#include "common/model.h"
#include "credits/money.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
 * Each rank of the latest cycle that has exits (the status reply's "ranks"): its
 * code, or "running" while the experiment runs ("no exit seen" once it has
 * ended); the first to fail marked.
 */
static void print_ranks(json_t *o)
{
	json_t *ranks = json_object_get(o, "ranks"), *r;
	size_t n = json_array_size(ranks), i;
	long long cycle, nranks = json_integer_value(json_object_get(o, "nnodes")),
	                 first_failed = -1;
	const char *status = json_string_value(json_object_get(o, "status"));

	if (n == 0)
		return;
	cycle = json_integer_value(json_object_get(json_array_get(ranks, n - 1), "cycle"));
	json_array_foreach(ranks, i, r)
	{
		long long rank = json_integer_value(json_object_get(r, "rank"));
		if (json_integer_value(json_object_get(r, "cycle")) != cycle)
			continue;
		if (rank + 1 > nranks)
			nranks = rank + 1;
		if (first_failed < 0 && json_integer_value(json_object_get(r, "exit_code")) != 0)
			first_failed = rank;
	}
	printf("  Ranks:    (cycle %lld)\n", cycle);
	for (long long k = 0; k < nranks; k++) {
		json_t *hit = NULL;
		json_array_foreach(ranks, i, r)
		{
			if (json_integer_value(json_object_get(r, "cycle")) == cycle &&
			    json_integer_value(json_object_get(r, "rank")) == k)
				hit = r;
		}
		if (!hit) {
			printf("    rank %-4lld %s\n", k,
			       status && isc_status_is_final(status) ? "no exit seen (stopped)"
			                                             : "running");
		} else {
			long long code = json_integer_value(json_object_get(hit, "exit_code"));
			if (code < 0)
				printf("    rank %-4lld vanished%s\n", k,
				       k == first_failed ? "   <- first to fail" : "");
			else
				printf("    rank %-4lld exit %lld%s\n", k, code,
				       k == first_failed ? "   <- first to fail" : "");
		}
	}
}

static long long num(json_t *o, const char *key)
{
	return (long long)json_integer_value(json_object_get(o, key));
}

/* "/v1/experiments/ID" + suffix, with the id escaped. Caller frees. */
static char *experiment_path(const char *id, const char *suffix)
{
	char *esc = curl_easy_escape(NULL, id, 0), *path = NULL;
	if (esc && asprintf(&path, "/v1/experiments/%s%s", esc, suffix) < 0)
		path = NULL;
	curl_free(esc);
	return path;
}

int cmd_status(struct isc_cli *cli, int argc, char **argv)
{
	const char *id = NULL;
	json_t *o = NULL, *ev;
	char *path;
	size_t i;
	int rc, json = 0;

	if (isc_cli_wants_help(argc, argv)) {
		printf("usage: isc status ID [--json]\n\nShows an experiment's state and the "
		       "timeline of its "
		       "events: every transition with its reason\n(which shape was tried, which "
		       "error came back).\n");
		return ISC_EXIT_OK;
	}
	for (int a = 1; a < argc; a++) {
		if (strcmp(argv[a], "--json") == 0)
			json = 1;
		else if (argv[a][0] == '-' || id)
			return isc_cli_usage_error("status", "unexpected argument '%s'", argv[a]);
		else
			id = argv[a];
	}
	if (!id)
		return isc_cli_usage_error("status", "an experiment ID is required");
	if (!(path = experiment_path(id, "")))
		return ISC_EXIT_FAIL;
	rc = isc_client_json(cli, "GET", path, NULL, &o);
	free(path);
	if (rc)
		return rc;
	if (json) {
		isc_json_print(o, stdout);
	} else {
		json_t *q = json_object_get(o, "queue");
		char when[32];
		printf("Experiment %s (%s)\n", isc_json_str(o, "id"), isc_json_str(o, "name"));
		printf("  Status:   %s%s%s\n", isc_json_str(o, "status"),
		       isc_json_str(o, "status_reason")[0] ? ": " : "",
		       isc_json_str(o, "status_reason"));
		if (strcmp(isc_json_str(o, "status"), "waiting") == 0 &&
		    num(o, "next_attempt_ms") > 0) {
			format_time(num(o, "next_attempt_ms"), when, sizeof(when));
			printf("  Next try: %s UTC\n", when);
		}
		printf("  GPUs:     %lld", num(o, "gpus"));
		if (num(o, "nnodes"))
			printf(" as %lld x %lld", num(o, "nnodes"), num(o, "nproc"));
		{
			/* Where rank 0's folders came home: the Output Path unless artifact_root.
			 */
			const char *out = isc_json_str(o, "output_path"),
			           *art = isc_json_str(o, "artifacts_path");
			int same = !art[0] || strcmp(art, out) == 0;
			printf("\n  Shape:    %s\n  Cycle:    %lld\n  Output:   %s%s\n",
			       isc_json_str(o, "shape")[0] ? isc_json_str(o, "shape") : "-",
			       num(o, "cycle_count"), out[0] ? out : "-",
			       same ? " (rank_N.txt; checkpoints, crud, lossy from rank 0)"
			            : " (rank_N.txt)");
			if (!same)
				printf(
				    "  Artifacts: %s (checkpoints, crud, lossy; artifact_root)\n",
				    art);
		}
		{
			char cost[40];
			isc_money_dollars(num(o, "cost_micros"), cost, sizeof(cost));
			printf("  Cost:     %s%s\n", cost,
			       json_is_true(json_object_get(o, "cost_settling"))
			           ? " (settling: a node's last period is still to be charged)"
			       : isc_status_is_final(isc_json_str(o, "status")) ? " (final)"
			                                                        : " so far");
		}
		/* The on-prem queue's view (iscd writes it); bursts that never queued have none. */
		if (q && num(q, "position") > 0 &&
		    !isc_status_is_final(isc_json_str(o, "status"))) {
			/* A burst in the queue is running its validation cycle (burst_validation).
			 */
			int validation = strcmp(isc_json_str(q, "compute_mode"), "burst") == 0;
			printf("  Queue:    waiting, #%lld among %s experiments%s",
			       num(q, "position"),
			       validation ? "cycle" : isc_json_str(q, "compute_mode"),
			       validation ? " (its validation cycle)" : "");
			if (num(q, "next_start_ms") >= 0) {
				format_time(num(q, "next_start_ms"), when, sizeof(when));
				printf("; next start expected %s UTC", when);
			}
			putchar('\n');
		}
		print_ranks(o);
		printf("\nTimeline (UTC):\n");
		json_array_foreach(json_object_get(o, "events"), i, ev)
		{
			format_time(num(ev, "at_ms"), when, sizeof(when));
			printf("  %s  %-16s %s\n", when, isc_json_str(ev, "kind"),
			       isc_json_str(ev, "message"));
		}
	}
	json_decref(o);
	return ISC_EXIT_OK;
}

int cmd_logs(struct isc_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {{"rank", required_argument, NULL, 'r'},
	                                     {"follow", no_argument, NULL, 'f'},
	                                     {"wait-for-daemon", no_argument, NULL, 'D'},
	                                     {NULL, 0, NULL, 0}};
	long long offset = 0;
	long rank = 0;
	int c, rc, follow = 0, wait_for_daemon = 0, printed = 0, daemon_up = 1;
	char said[32] = ""; /* the status last reported while there is no output yet */

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
	/* Nothing waits in silence: a follow without iscd says so (or waits, when asked). */
	if (follow && (rc = isc_cli_need_daemon(cli, "logs", wait_for_daemon)))
		return rc;
	/* Poll the API from the offset reached: each answer says where to go on and whether the
	 * experiment has ended (then one last read picks up what it wrote at the end). */
	for (int last = 0;;) {
		struct isc_reply r;
		char suffix[96], *path;
		if (follow && !isc_client_ping(cli)) {
			/* iscd went away (or is not there yet, with --wait-for-daemon). */
			if ((rc = isc_cli_daemon_still_there(cli, "logs", wait_for_daemon,
			                                     &daemon_up)))
				return rc;
			usleep(500 * 1000);
			continue;
		}
		if (!daemon_up &&
		    (rc = isc_cli_daemon_still_there(cli, "logs", wait_for_daemon, &daemon_up)))
			return rc;
		snprintf(suffix, sizeof(suffix), "/logs?rank=%ld&offset=%lld", rank, offset);
		if (!(path = experiment_path(argv[optind], suffix)))
			return ISC_EXIT_FAIL;
		rc = isc_client_request(cli, "GET", path, NULL, 0, &r);
		free(path);
		if (rc)
			return rc;
		if (r.status != 200) {
			rc = isc_client_fail(&r);
			isc_reply_cleanup(&r);
			return rc;
		}
		fwrite(r.body, 1, r.len, stdout);
		fflush(stdout);
		printed |= r.len > 0;
		offset = strtoll(r.offset, NULL, 10);
		if (!follow) {
			if (r.missing && !printed) {
				isc_cli_errorf("no output yet for rank %ld of %s (%s%s%s)", rank,
				               argv[optind], r.exp_status, r.reason[0] ? ": " : "",
				               r.reason);
				isc_reply_cleanup(&r);
				return ISC_EXIT_FAIL;
			}
			if (r.len == 1024 * 1024) { /* a full chunk: there is more */
				isc_reply_cleanup(&r);
				continue;
			}
			isc_reply_cleanup(&r);
			return ISC_EXIT_OK;
		}
		if (!r.final && r.missing && !printed && strcmp(said, r.exp_status) != 0) {
			/* Not started yet: say what it waits for, once per change of status. */
			fprintf(stderr,
			        "isc logs: rank %ld of %s has no output yet: the experiment is "
			        "%s%s%s\n",
			        rank, argv[optind], r.exp_status, r.reason[0] ? ": " : "",
			        r.reason);
			snprintf(said, sizeof(said), "%s", r.exp_status);
		}
		if (r.final && r.len < 1024 * 1024) {
			if (last) {
				isc_reply_cleanup(&r);
				return ISC_EXIT_OK;
			}
			last = 1;
			isc_reply_cleanup(&r);
			continue;
		}
		if (r.len < 1024 * 1024)
			usleep(500 * 1000);
		isc_reply_cleanup(&r);
	}
}

/* exp_ and 16 hex digits: the only names a queued cancel file may have. */
static int experiment_id_ok(const char *id)
{
	if (strncmp(id, "exp_", 4) != 0 || strlen(id) != 20)
		return 0;
	for (const char *p = id + 4; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return 0;
	return 1;
}

/*
 * isc cancel while no iscd runs (docs/broker.md): the request is left as the file
 * $ISC_HOME/run/cancel/ID, which iscd carries out when it starts, before its API and
 * first tick. Only the store's owner (the operator, who may cancel anything) can
 * write there: iscd honours only files of its own user. Nobody else opens the store
 * (only iscd and isc init do), so this is the one way to leave the request.
 */
static int cancel_queue(struct isc_cli *cli, const char *id)
{
	char *dir = NULL, *file = NULL;
	int fd = -1, rc = ISC_EXIT_FAIL, saved;

	if (getenv("ISC_API_URL")) {
		isc_cli_errorf("iscd does not answer at ISC_API_URL; nothing was cancelled (a "
		               "cancel is left for iscd only on its own machine)");
		return ISC_EXIT_FAIL;
	}
	if (asprintf(&dir, "%s/isc.db", cli->home) < 0 || access(dir, F_OK) != 0) {
		isc_cli_errorf("iscd is not running, and there is no store at %s (isc init makes "
		               "one): nothing to cancel",
		               cli->home);
		free(dir);
		return ISC_EXIT_FAIL;
	}
	free(dir);
	dir = NULL;
	if (asprintf(&dir, "%s/run", cli->home) < 0 || (mkdir(dir, 0755) && errno != EEXIST))
		goto denied;
	free(dir);
	dir = NULL;
	if (asprintf(&dir, "%s/run/cancel", cli->home) < 0 ||
	    (mkdir(dir, 0700) && errno != EEXIST) || asprintf(&file, "%s/%s", dir, id) < 0)
		goto denied;
	fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		goto denied;
	dprintf(fd, "isc cancel %s\n", id);
	if (close(fd) != 0)
		goto denied;
	printf("iscd is not running: the cancel of %s is recorded in %s and carried out when "
	       "iscd starts (iscd --home %s &)\n",
	       id, file, cli->home);
	rc = ISC_EXIT_OK;
	goto out;
denied:
	saved = errno;
	isc_cli_errorf("iscd is not running, and the cancel of %s could not be left for it in "
	               "%s/run/cancel (%s): only the owner of %s can; ask them to start iscd "
	               "(iscd --home %s &) and cancel again",
	               id, cli->home, strerror(saved), cli->home, cli->home);
out:
	free(dir);
	free(file);
	return rc;
}

int cmd_cancel(struct isc_cli *cli, int argc, char **argv)
{
	char *path;
	int rc;

	if (isc_cli_wants_help(argc, argv)) {
		printf("usage: isc cancel ID\n\nAsks the broker to cancel an experiment: its "
		       "containers are "
		       "stopped with a grace\nperiod (so the script can checkpoint), its nodes "
		       "terminated, and it "
		       "ends as cancelled.\nWithout a running iscd the request is recorded in "
		       "$ISC_HOME/run/cancel and carried\nout when iscd starts (the store's "
		       "owner only: docs/broker.md).\n");
		return ISC_EXIT_OK;
	}
	if (argc != 2 || argv[1][0] == '-')
		return isc_cli_usage_error("cancel", "exactly one experiment ID is required");
	if (!isc_client_ping(cli) && experiment_id_ok(argv[1])) {
		if ((rc = cancel_queue(cli, argv[1])) || !isc_client_ping(cli))
			return rc;
		/* iscd came up meanwhile and may have scanned before the file was there: ask it
		 * too (a cancel is idempotent); the file then only repeats the request. */
	}
	if (!(path = experiment_path(argv[1], "/cancel")))
		return ISC_EXIT_FAIL;
	rc = isc_client_json(cli, "POST", path, NULL, NULL);
	free(path);
	if (rc)
		return rc;
	printf("cancel requested for %s\n", argv[1]);
	return ISC_EXIT_OK;
}
