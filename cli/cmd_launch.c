/*
 * isc validate, isc train, isc burst: from a launch file to an experiment
 * recorded as enqueued. Nothing is written unless the whole file is valid and
 * its project exists. `isc burst --wait` then follows the experiment live.
 */
#include "cli/commands.h"
#include "launchfile/launchfile.h"
#include "store/store_experiments.h"
#include "toml/toml.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int mode_is_explicit_text(const char *text, size_t len);

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
	if (!rc && default_burst && !mode_is_explicit_text(text, len)) {
		/* Appended last, so every position the user sees is still that of their file. */
		static const char line[] = "\ncompute_mode = \"burst\"\n";
		char *grown = realloc(text, len + sizeof(line));
		if (!grown) {
			rc = isc_err_set(&err, ISC_ENOMEM, "out of memory");
		} else {
			text = grown;
			memcpy(text + len, line, sizeof(line));
			len += sizeof(line) - 1;
		}
	}
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

int cmd_validate(struct isc_cli *cli, int argc, char **argv)
{
	struct isc_launch *l;
	const char *path = NULL;
	int json = 0, rc;
	(void)cli;

	if (isc_cli_wants_help(argc, argv)) {
		printf("usage: isc validate FILE.isc [--json]\n\nChecks a launch file. Exit 0 when "
		       "valid (with "
		       "--json, prints the normalized\nexperiment); otherwise exit 1 and one line "
		       "per problem:\n"
		       "  FILE:LINE:COL: error: FIELD: message\nSee docs/launch-files.md.\n");
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
	if (json) {
		json_t *o = isc_launch_to_json(l);
		json_dumpf(o, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		putchar('\n');
		json_decref(o);
	} else {
		printf("%s: valid\n", path);
	}
	isc_launch_free(l);
	return ISC_EXIT_OK;
}

/* Whether the file sets compute_mode itself (an unparsable file: yes, so its own errors show). */
static int mode_is_explicit_text(const char *text, size_t len)
{
	struct isc_toml_doc *doc = NULL;
	struct isc_err err;
	int found = 1;

	if (isc_toml_parse(text, len, &doc, &err) == 0)
		found = isc_toml_table_get(isc_toml_doc_root(doc), "compute_mode") != NULL;
	isc_toml_doc_free(doc);
	return found;
}

static const char *final_exit_status(const char *status, int *code)
{
	*code = strcmp(status, "completed") == 0 ? ISC_EXIT_OK : ISC_EXIT_FAIL;
	return status;
}

/* Live progress of a burst until it ends: state changes and events as they come. */
static int wait_for(struct isc_cli *cli, const char *id)
{
	struct isc_store *s;
	struct isc_err err;
	int64_t last_event = 0;
	int rc, code = ISC_EXIT_FAIL;

	if ((rc = isc_cli_store_open(cli, 0, &s)))
		return rc;
	printf("waiting for %s (Ctrl-C stops waiting; the experiment goes on)\n", id);
	for (;;) {
		struct isc_experiment e;
		struct isc_event *ev;
		size_t n;

		isc_err_clear(&err);
		if (isc_store_event_list(s, id, last_event, &ev, &n, &err) ||
		    isc_store_experiment_get(s, id, &e, &err)) {
			rc = isc_cli_fail(&err);
			break;
		}
		for (size_t i = 0; i < n; i++) {
			time_t t = (time_t)(ev[i].at_ms / 1000);
			struct tm tm;
			char when[16];
			gmtime_r(&t, &tm);
			strftime(when, sizeof(when), "%H:%M:%S", &tm);
			printf("  %s  %-14s %s\n", when, ev[i].kind, ev[i].message);
			last_event = ev[i].id;
		}
		fflush(stdout);
		isc_event_list_free(ev, n);
		if (isc_status_is_final(e.status)) {
			printf("%s: %s%s%s\n", e.id, final_exit_status(e.status, &code),
			       e.status_reason[0] ? ": " : "", e.status_reason);
			isc_experiment_cleanup(&e);
			rc = code;
			break;
		}
		isc_experiment_cleanup(&e);
		usleep(200 * 1000);
	}
	isc_store_free(s);
	return rc;
}

static int submit(struct isc_cli *cli, int argc, char **argv, int burst)
{
	const char *cmd = burst ? "burst" : "train";
	struct isc_launch *l = NULL;
	struct isc_store *s = NULL;
	struct isc_project p = {0};
	struct isc_experiment e = {0};
	struct isc_err err;
	const char *path = NULL;
	char *spec = NULL, *id = NULL, *output = NULL;
	json_t *o = NULL;
	int wait = 0, rc;

	if (isc_cli_wants_help(argc, argv)) {
		if (burst)
			printf("usage: isc burst FILE.isc [--wait]\n\nRecords a burst experiment "
			       "(compute_mode "
			       "\"burst\", set when absent) as enqueued;\niscd places it on a "
			       "cloud cluster. "
			       "--wait follows it live until it ends;\nthe exit status is then 0 "
			       "only if it "
			       "completed.\n");
		else
			printf("usage: isc train FILE.isc\n\nRecords an experiment (any compute "
			       "mode) as "
			       "enqueued.\n");
		return ISC_EXIT_OK;
	}
	for (int i = 1; i < argc; i++) {
		if (burst && strcmp(argv[i], "--wait") == 0)
			wait = 1;
		else if (argv[i][0] == '-' || path)
			return isc_cli_usage_error(cmd, "unexpected argument '%s'", argv[i]);
		else
			path = argv[i];
	}
	if (!path)
		return isc_cli_usage_error(cmd, "a launch file is required");
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
	if ((rc = isc_cli_store_open(cli, 0, &s)))
		goto out;
	isc_err_clear(&err);
	if (isc_store_project_resolve(s, l->project_id, &p, &err)) {
		fprintf(stderr, "%s: error: isc_project_id: %s\n", path, err.msg);
		rc = ISC_EXIT_FAIL;
		goto out;
	}
	o = isc_launch_to_json(l);
	spec = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	id = isc_store_new_id("exp_");
	if (!spec || !id || asprintf(&output, "%s/experiments/%s", cli->home, id) < 0) {
		isc_cli_errorf("out of memory");
		rc = ISC_EXIT_FAIL;
		goto out;
	}
	e.id = id;
	e.project_id = p.id;
	e.org_id = p.org_id;
	e.name = l->experiment_name;
	e.compute_mode = (char *)isc_compute_mode_name(l->compute_mode);
	e.gpus = l->gpus;
	e.spec_json = spec;
	e.status = "enqueued";
	e.output_path = output;
	if (isc_store_experiment_add(s, &e, &err)) {
		rc = isc_cli_fail(&err);
		goto out;
	}
	printf("Success: Experiment created\n%s\n", id);
	fflush(stdout);
	if (wait)
		rc = wait_for(cli, id);
out:
	json_decref(o);
	free(spec);
	free(id);
	free(output);
	isc_project_cleanup(&p);
	isc_store_free(s);
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
