/*
 * isc datasets: S3 datasets of an organisation (docs/datasets.md), through
 * iscd's API (routes in api/routes_datasets.c): every user of the org lists
 * and shows them, its admins add and remove them. A dataset's own AWS keys are
 * read here, never from argv (the environment, or a profile of a shared
 * credentials file, as `isc keys add aws` reads them), and sent to iscd in the
 * request body over the Unix socket (or TCP from loopback); iscd checks them
 * with S3 and stores them sealed. Every buffer that held them is wiped.
 */
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/lib/table.h"
#include "keys/key_secret.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char datasets_usage[] =
    "usage: isc datasets add s3://BUCKET[/KEY] --org ORG [--name N] [--etag E]\n"
    "                        [--version-id V] [--volume-size S]\n"
    "                        [--credentials-from-env |\n"
    "                         --credentials-profile P [--credentials-file F]]\n"
    "       isc datasets list [--org ORG] [--json]\n"
    "       isc datasets show DATASET --org ORG [--json]\n"
    "       isc datasets remove DATASET --org ORG\n"
    "\n"
    "A dataset is an S3 object or folder (a URI ending in '/' or naming a prefix)\n"
    "that iscd caches once and every experiment of the organisation mounts\n"
    "read-only at /data/NAME. NAME defaults to the basename of the last path item\n"
    "without an archive extension (s3://b/mnist.zip is mnist, s3://b is b).\n"
    "--etag and --version-id pin the bytes (a folder ignores them). --volume-size\n"
    "caps the expanded copy (5Gi by default; K M G T, Ki Mi Gi Ti). At most 100 GB.\n"
    "DATASET is a name or an id. Every user of the organisation lists and shows\n"
    "its datasets; its admins add and remove them.\n"
    "Credentials: the dataset's own AWS keys, read by isc (never an argument) from\n"
    "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY[/AWS_SESSION_TOKEN] (--credentials-from-env)\n"
    "or a profile of a shared credentials file (default ~/.aws/credentials); iscd\n"
    "stores them encrypted like cloud keys (docs/keys.md). Without them the broker's\n"
    "own AWS credentials are used, which only the platform operator may do.\n"
    "States: Created, Caching (with progress), Available, Failed.\n";

static json_int_t num(json_t *o, const char *k)
{
	return json_integer_value(json_object_get(o, k));
}

static void print_one(json_t *d)
{
	const char *cred = isc_json_str(d, "credentials");
	printf("id:          %s\n", isc_json_str(d, "id"));
	printf("name:        %s (mounted read-only at %s)\n", isc_json_str(d, "name"),
	       isc_json_str(d, "mount"));
	printf("org:         %s\n", isc_json_str(d, "org"));
	printf("source:      %s%s\n", isc_json_str(d, "uri"),
	       json_is_true(json_object_get(d, "folder")) ? " (folder)" : "");
	if (isc_json_str(d, "etag")[0])
		printf("etag:        %s\n", isc_json_str(d, "etag"));
	if (isc_json_str(d, "version_id")[0])
		printf("version id:  %s\n", isc_json_str(d, "version_id"));
	printf("size:        %" JSON_INTEGER_FORMAT " bytes (volume %" JSON_INTEGER_FORMAT
	       " bytes)\n",
	       num(d, "size_bytes"), num(d, "volume_bytes"));
	printf("state:       %s", isc_json_str(d, "state"));
	if (!strcmp(isc_json_str(d, "state"), "Caching") && num(d, "size_bytes") > 0)
		printf(" (%" JSON_INTEGER_FORMAT " of %" JSON_INTEGER_FORMAT " bytes, %d%%)",
		       num(d, "cached_bytes"), num(d, "size_bytes"),
		       (int)(num(d, "cached_bytes") * 100 / num(d, "size_bytes")));
	printf("\n");
	if (isc_json_str(d, "reason")[0])
		printf("reason:      %s\n", isc_json_str(d, "reason"));
	/* The copy's name alone says nothing to a newcomer (issue 47): where it lives. */
	printf("copy:        %s (the bytes iscd caches, in its organisation's folder @ORGID:\n"
	       "             ISC_HOME/datasets/%s on iscd's host, /data/.isc/%s on nodes,\n"
	       "             mounted at %s; docs/datasets.md, \"Copies belong to one "
	       "organisation\")\n",
	       isc_json_str(d, "copy"), isc_json_str(d, "copy"), isc_json_str(d, "copy"),
	       isc_json_str(d, "mount"));
	if (isc_json_str(d, "verified_by")[0])
		printf("verified:    %s\n", isc_json_str(d, "verified_by"));
	if (!strncmp(cred, "sealed:", 7))
		printf("credentials: its own keys (sealed, %s)\n", cred + 7);
	else
		printf("credentials: %s\n", !strcmp(cred, "broker") ? "the broker's" : cred);
}

/* The request body of add, the dataset's own keys in it when given (jansson wipes its copies). */
static json_t *add_body(const char *org, const char *uri, const char *const opts[4],
                        const struct isc_key_source *src, int own, struct isc_err *err)
{
	static const char *const keys[4] = {"name", "etag", "version_id", "volume_size"};
	struct isc_key_secret secret = {0};
	json_t *body;

	if (own && isc_keys_collect("aws", src, &secret, err))
		return NULL;
	body = json_pack("{s:s, s:s}", "org", org, "uri", uri);
	for (int i = 0; body && i < 4; i++)
		if (opts[i])
			json_object_set_new(body, keys[i], json_string(opts[i]));
	if (body && own) {
		json_t *creds = json_object();
		for (size_t i = 0; i < secret.n; i++)
			json_object_set_new(creds, secret.kv[i].key,
			                    json_string(secret.kv[i].value));
		json_object_set_new(body, "credentials", creds);
	}
	isc_key_secret_cleanup(&secret);
	if (!body)
		isc_err_set(err, ISC_ENOMEM, "out of memory");
	return body;
}

static int ds_add(struct isc_cli *cli, int argc, char **argv)
{
	const char *org = NULL, *uri = NULL, *opts[4] = {NULL, NULL, NULL, NULL};
	struct isc_key_source src = {0};
	struct isc_err err;
	json_t *d = NULL, *body;
	int rc, own;

	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];
		const char **slot = !strcmp(a, "--org")                   ? &org
		                    : !strcmp(a, "--name")                ? &opts[0]
		                    : !strcmp(a, "--etag")                ? &opts[1]
		                    : !strcmp(a, "--version-id")          ? &opts[2]
		                    : !strcmp(a, "--volume-size")         ? &opts[3]
		                    : !strcmp(a, "--credentials-profile") ? &src.profile
		                    : !strcmp(a, "--credentials-file")    ? &src.file
		                                                          : NULL;
		if (slot) {
			if (i + 1 >= argc || !argv[i + 1][0])
				return isc_cli_usage_error("datasets", "%s: give a value", a);
			*slot = argv[++i];
		} else if (!strcmp(a, "--credentials-from-env")) {
			src.from_env = 1;
		} else if (a[0] == '-') {
			return isc_cli_usage_error("datasets", "unknown option '%s'", a);
		} else if (!uri) {
			uri = a;
		} else {
			return isc_cli_usage_error("datasets", "unexpected argument '%s'", a);
		}
	}
	if (!uri || !org)
		return isc_cli_usage_error(
		    "datasets", "usage: isc datasets add s3://BUCKET[/KEY] --org ORG ...");
	if (src.profile && src.from_env)
		return isc_cli_usage_error(
		    "datasets",
		    "--credentials-profile and --credentials-from-env exclude each other");
	if (src.file && !src.profile)
		return isc_cli_usage_error("datasets",
		                           "--credentials-file goes with --credentials-profile P");
	own = src.profile || src.from_env;
	/* A dataset's own keys leave only over a safe transport: said before they are read. */
	if (own && (rc = isc_client_secret_transport_ok("a dataset's own AWS keys")))
		return rc;
	/* jansson's copies of the keys are wiped when freed. */
	isc_keys_json_wipe_on_free();
	isc_err_clear(&err);
	body = add_body(org, uri, opts, &src, own, &err);
	if (!body)
		return isc_cli_fail(&err);
	/* The same call with or without keys; with them, only over a safe transport. */
	if (own)
		rc = isc_client_secret_json(cli, "a dataset's own AWS keys", "POST", "/v1/datasets",
		                            body, 201, &d);
	else
		rc = isc_client_json(cli, "POST", "/v1/datasets", body, &d);
	if (!rc) {
		if (json_is_true(json_object_get(d, "folder")) && (opts[1] || opts[2]))
			fprintf(stderr,
			        "isc: note: %s is a folder: --etag and --version-id are ignored\n",
			        uri);
		printf("dataset %s added: %s in %s, %" JSON_INTEGER_FORMAT
		       " bytes, Created (iscd caches it; "
		       "isc datasets show %s --org %s)\n",
		       isc_json_str(d, "id"), isc_json_str(d, "name"), isc_json_str(d, "org"),
		       num(d, "size_bytes"), isc_json_str(d, "name"), isc_json_str(d, "org"));
	}
	json_decref(d);
	return rc;
}

static void dataset_row(json_t *d, const char **cells, char (*scratch)[ISC_TABLE_CELL])
{
	snprintf(scratch[4], ISC_TABLE_CELL, "%" JSON_INTEGER_FORMAT, num(d, "size_bytes"));
	cells[0] = isc_json_str(d, "id");
	cells[1] = isc_json_str(d, "org");
	cells[2] = isc_json_str(d, "name");
	cells[3] = isc_json_str(d, "state");
	cells[4] = scratch[4];
	cells[5] = isc_json_str(d, "uri");
}

static int ds_list(struct isc_cli *cli, int argc, char **argv)
{
	static const char *const headers[] = {"ID", "Org", "Name", "State", "Size", "Source"};
	static const struct isc_table_spec spec = {6, headers, "....r.", dataset_row, NULL};
	const char *org = NULL;
	char *path = strdup("/v1/datasets");
	json_t *arr = NULL;
	int json = 0, rc;

	for (int a = 2; a < argc; a++) {
		if (!strcmp(argv[a], "--org") && a + 1 < argc)
			org = argv[++a];
		else if (!strcmp(argv[a], "--json"))
			json = 1;
		else {
			free(path);
			return isc_cli_usage_error("datasets", "unexpected argument '%s'", argv[a]);
		}
	}
	if (!path || isc_client_query_add(&path, "org", org)) {
		free(path);
		isc_cli_errorf("out of memory");
		return ISC_EXIT_FAIL;
	}
	/* Every page: the table and --json show every dataset the caller may see. */
	rc = isc_client_json_all_pages(cli, path, &arr);
	free(path);
	if (rc)
		return rc;
	return isc_cli_print_listing(arr, json, &spec);
}

/* show and remove: DATASET --org ORG [--json]. */
static int ds_one(struct isc_cli *cli, int argc, char **argv, int remove)
{
	const char *org = NULL, *what = NULL;
	char *path = NULL, *esc;
	json_t *d = NULL;
	int json = 0, rc;

	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--org") && i + 1 < argc)
			org = argv[++i];
		else if (!strcmp(argv[i], "--json") && !remove)
			json = 1;
		else if (argv[i][0] != '-' && !what)
			what = argv[i];
		else
			return isc_cli_usage_error("datasets", "unexpected argument '%s'", argv[i]);
	}
	if (!what || !org)
		return isc_cli_usage_error("datasets", "usage: isc datasets %s DATASET --org ORG",
		                           remove ? "remove" : "show");
	/* A name is one path segment: escaped, so '/' or '?' in it cannot reach another route. */
	esc = isc_client_escape(what);
	if (!esc || asprintf(&path, "/v1/datasets/%s", esc) < 0 ||
	    isc_client_query_add(&path, "org", org)) {
		free(esc);
		free(path);
		isc_cli_errorf("out of memory");
		return ISC_EXIT_FAIL;
	}
	free(esc);
	rc = isc_client_json(cli, remove ? "DELETE" : "GET", path, NULL, &d);
	free(path);
	if (rc)
		return rc;
	if (remove)
		printf("dataset %s (%s) removed\n", isc_json_str(d, "id"), isc_json_str(d, "name"));
	else if (json)
		isc_json_print(d, stdout);
	else
		print_one(d);
	json_decref(d);
	return ISC_EXIT_OK;
}

int cmd_datasets(struct isc_cli *cli, int argc, char **argv)
{
	if (argc < 2 || isc_cli_wants_help(argc, argv)) {
		fputs(datasets_usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? ISC_EXIT_USAGE : ISC_EXIT_OK;
	}
	if (!strcmp(argv[1], "add"))
		return ds_add(cli, argc, argv);
	if (!strcmp(argv[1], "list"))
		return ds_list(cli, argc, argv);
	if (!strcmp(argv[1], "show"))
		return ds_one(cli, argc, argv, 0);
	if (!strcmp(argv[1], "remove"))
		return ds_one(cli, argc, argv, 1);
	return isc_cli_usage_error("datasets", "unknown subcommand '%s'", argv[1]);
}
