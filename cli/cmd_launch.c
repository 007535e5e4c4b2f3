/*
 * isc validate, isc train, isc burst: from a launch file to an experiment
 * recorded as enqueued. Nothing is written unless the whole file is valid and
 * its project exists. `isc burst --wait` then follows the experiment live.
 */
#include "cli/commands.h"
#include "common/buf.h"
#include "broker/liveness.h"
#include "config/config.h"
#include "datasets/datasets.h"
#include "launchfile/launchfile.h"
#include "providers/placeable.h"
#include "shapes/priority.h"
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

/* Drops the ids of l's priority list that name no shape, keeping the user's order. */
static void keep_existing(struct isc_strlist *list, const struct isc_priority_verdict *v)
{
	size_t at = 0;
	for (size_t i = 0; i < list->len; i++) {
		if (!v->exists[i]) {
			free(list->items[i]);
			continue;
		}
		list->items[at] = list->items[i];
		list->pos[at++] = list->pos[i];
	}
	list->len = at;
}

/*
 * The priority list against the store's catalog (and, for a submit, against
 * what this broker can place). Warnings are printed as FILE:LINE:COL lines.
 * For a submit, a list none of whose ids names a shape, or none of whose
 * shapes can be placed, is refused: the same lines as errors, then why, and
 * ISC_EXIT_FAIL. Otherwise the unknown ids are dropped from l and *skipped
 * (owned, may stay NULL) says which, for the timeline.
 */
static int check_priority(struct isc_cli *cli, struct isc_store *s, const char *path,
                          struct isc_launch *l, int submit, char **skipped)
{
	struct isc_launch_problems probs;
	struct isc_priority_verdict v = {0};
	struct isc_catalog *cat = NULL;
	struct isc_config *cfg = NULL;
	struct isc_placeable *pl = NULL;
	struct isc_err err;
	int rc = ISC_EXIT_OK;

	if (l->burst_shapes.len == 0)
		return ISC_EXIT_OK;
	isc_launch_problems_init(&probs);
	isc_err_clear(&err);
	if (isc_catalog_load(s, &cat, &err) ||
	    (submit &&
	     (isc_config_load(cli->home, &cfg, &err) || isc_placeable_new(cfg, &pl, &err))) ||
	    isc_priority_check(cat, pl, &l->burst_shapes, &probs, &v, &err)) {
		rc = isc_cli_fail(&err);
		goto out;
	}
	if (submit && (v.n_exist == 0 || v.n_placeable == 0)) {
		/* A list the user wrote is a constraint: no fallback to other shapes. */
		for (size_t i = 0; i < probs.len; i++)
			probs.items[i].warning = 0;
		isc_launch_problems_print(&probs, path, stderr);
		if (v.n_exist == 0)
			fprintf(
			    stderr,
			    "%s: error: burst_shape_priority_list: none of its %zu id(s) names a "
			    "shape of the catalog (isc shapes lists them); nothing was created\n",
			    path, v.n_ids);
		else
			fprintf(stderr,
			        "%s: error: burst_shape_priority_list: none of its shapes can be "
			        "placed by this broker; nothing was created\n",
			        path);
		rc = ISC_EXIT_FAIL;
		goto out;
	}
	isc_launch_problems_print(&probs, path, stderr);
	if (submit && v.n_exist < v.n_ids) {
		struct isc_buf msg;
		isc_buf_init(&msg, 0);
		const char *sep = "";
		isc_buf_printf(&msg, "skipped %zu of the %zu id(s) of burst_shape_priority_list:",
		               v.n_ids - v.n_exist, v.n_ids);
		for (size_t i = 0; i < probs.len; i++) {
			const char *index = strchr(probs.items[i].field, '[');
			if (strncmp(probs.items[i].msg, "no shape", 8) != 0)
				continue;
			isc_buf_printf(&msg, "%s %s %s", sep, index ? index : "",
			               probs.items[i].msg);
			sep = ";";
		}
		*skipped = strdup(isc_buf_cstr(&msg));
		isc_buf_cleanup(&msg);
		keep_existing(&l->burst_shapes, &v);
	}
out:
	isc_priority_verdict_cleanup(&v);
	isc_placeable_free(pl);
	isc_config_free(cfg);
	isc_catalog_free(cat);
	isc_launch_problems_cleanup(&probs);
	return rc;
}

int cmd_validate(struct isc_cli *cli, int argc, char **argv)
{
	struct isc_launch *l;
	const char *path = NULL;
	int json = 0, rc;
	(void)cli;

	if (isc_cli_wants_help(argc, argv)) {
		printf(
		    "usage: isc validate FILE.isc [--json]\n\nChecks a launch file. Exit 0 when "
		    "valid (with "
		    "--json, prints the normalized\nexperiment); otherwise exit 1 and one line "
		    "per problem:\n"
		    "  FILE:LINE:COL: error: FIELD: message\n"
		    "Ids of burst_shape_priority_list that name no shape of the catalog are\n"
		    "warnings (exit 0):\n"
		    "  FILE:LINE:COL: warning: burst_shape_priority_list[i]: no shape \"ID\"; did "
		    "you mean \"ID2\"?\n"
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
	/* The priority list against the catalog, when there is a store to hold one. */
	if (l->burst_shapes.len > 0) {
		struct isc_store *s = NULL;
		struct isc_err err;
		isc_err_clear(&err);
		if (isc_store_open(cli->home, 0, &s, &err) == 0) {
			rc = check_priority(cli, s, path, l, 0, NULL);
			isc_store_free(s);
			if (rc) {
				isc_launch_free(l);
				return rc;
			}
		} else {
			fprintf(stderr,
			        "%s: note: burst_shape_priority_list not checked: no store at %s "
			        "(isc init loads the shape catalog)\n",
			        path, cli->home);
		}
	}
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

/*
 * Live progress of a burst until it ends: state changes and events as they come.
 * iscd is asked after every 2 s: a wait on a daemon that went away says so.
 */
static int wait_for(struct isc_cli *cli, const char *id, int wait_for_daemon)
{
	struct isc_store *s;
	struct isc_err err;
	int64_t last_event = 0;
	int rc, code = ISC_EXIT_FAIL, daemon_up = isc_daemon_running(cli->home, NULL);
	unsigned turn = 0;

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
		if (++turn % 10 == 0 &&
		    (rc = isc_cli_daemon_still_there(cli, "burst", wait_for_daemon, &daemon_up)))
			break;
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
	char *spec = NULL, *id = NULL, *output = NULL, *skipped = NULL;
	json_t *o = NULL;
	int wait = 0, wait_for_daemon = 0, rc;

	if (isc_cli_wants_help(argc, argv)) {
		if (burst)
			printf(
			    "usage: isc burst FILE.isc [--wait [--wait-for-daemon]]\n\nRecords a "
			    "burst experiment (compute_mode \"burst\", set when absent) as "
			    "enqueued;\niscd places it on a cloud cluster. --wait follows it live "
			    "until it ends;\nthe exit status is then 0 only if it completed. "
			    "Without a running iscd,\n--wait records nothing and exits 1 saying "
			    "how to start one, unless\n--wait-for-daemon asks to wait for it.\n"
			    "Ids of burst_shape_priority_list that name no shape are skipped with "
			    "a "
			    "warning;\na list with no valid id, or none this broker can place, is "
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
	/* Before anything is recorded: a --wait with no daemon to wait on is refused. */
	if (wait && (rc = isc_cli_need_daemon(cli, cmd, wait_for_daemon)))
		goto out;
	isc_err_clear(&err);
	if (isc_store_project_resolve(s, l->project_id, &p, &err)) {
		fprintf(stderr, "%s: error: isc_project_id: %s\n", path, err.msg);
		rc = ISC_EXIT_FAIL;
		goto out;
	}
	if (l->compute_mode == ISC_MODE_BURST &&
	    (rc = check_priority(cli, s, path, l, 1, &skipped)))
		goto out;
	if (l->dataset_ids.len) {
		/* Every dataset must be the organisation's and Available before anything is queued.
		 */
		struct isc_dataset *ds = NULL;
		if (isc_dataset_resolve_all(s, p.org_name,
		                            (const char *const *)l->dataset_ids.items,
		                            l->dataset_ids.len, &ds, &err)) {
			fprintf(stderr, "%s: error: %s\n", path, err.msg);
			rc = ISC_EXIT_FAIL;
			goto out;
		}
		isc_dataset_list_free(ds, l->dataset_ids.len);
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
	/* The experiment and the note of what its list skipped, together or not at all. */
	if (isc_store_begin(s, &err) || isc_store_experiment_add(s, &e, &err) ||
	    (skipped && isc_store_event_add(s, id, "priority", skipped, &err)) ||
	    isc_store_commit(s, &err)) {
		isc_store_rollback(s);
		rc = isc_cli_fail(&err);
		goto out;
	}
	printf("Success: Experiment created\n%s\n", id);
	fflush(stdout);
	if (wait)
		rc = wait_for(cli, id, wait_for_daemon);
out:
	json_decref(o);
	free(spec);
	free(id);
	free(output);
	free(skipped);
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
