/* isc datasets: S3 datasets of an organisation (docs/datasets.md). */
#include "cli/commands.h"

#include "config/config.h"
#include "artifacts/unpack.h"
#include "datasets/datasets.h"
#include "store/store_datasets.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char datasets_usage[] =
    "usage: isc datasets add s3://BUCKET[/KEY] --org ORG [--name N] [--etag E]\n"
    "                        [--version-id V] [--volume-size S]\n"
    "                        [--credentials-profile P | --credentials-from-env]\n"
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
    "DATASET is a name or an id. Credentials: the broker's AWS credentials unless\n"
    "a profile of the shared credentials file or iscd's environment is named; no\n"
    "secret is stored. States: Created, Caching, Available, Failed.\n";

static const char *state_word(const char *s)
{
	if (!strcmp(s, "created"))
		return "Created";
	if (!strcmp(s, "caching"))
		return "Caching";
	if (!strcmp(s, "available"))
		return "Available";
	if (!strcmp(s, "failed"))
		return "Failed";
	return s;
}

static json_t *to_json(const struct isc_dataset *d)
{
	json_t *o = json_pack(
	    "{s:s, s:s, s:s, s:s, s:b, s:s, s:s, s:I, s:I, s:I, s:s, s:s, s:s}", "id", d->id, "org",
	    d->org_name, "name", d->name, "uri", d->uri, "folder", d->is_folder, "etag", d->etag,
	    "version_id", d->version_id, "size_bytes", (json_int_t)d->size_bytes, "volume_bytes",
	    (json_int_t)d->volume_bytes, "cached_bytes", (json_int_t)d->cached_bytes, "state",
	    state_word(d->state), "reason", d->reason, "copy", d->copy_name);
	if (o)
		json_object_set_new(o, "mount", json_sprintf("/data/%s", d->name));
	return o;
}

static int print_json(json_t *v)
{
	char *text = v ? json_dumps(v, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
	json_decref(v);
	if (!text) {
		isc_cli_errorf("out of memory");
		return ISC_EXIT_FAIL;
	}
	printf("%s\n", text);
	free(text);
	return ISC_EXIT_OK;
}

static void print_one(const struct isc_dataset *d)
{
	printf("id:          %s\n", d->id);
	printf("name:        %s (mounted read-only at /data/%s)\n", d->name, d->name);
	printf("org:         %s\n", d->org_name);
	printf("source:      %s%s\n", d->uri, d->is_folder ? " (folder)" : "");
	if (d->etag[0])
		printf("etag:        %s\n", d->etag);
	if (d->version_id[0])
		printf("version id:  %s\n", d->version_id);
	printf("size:        %" PRId64 " bytes (volume %" PRId64 " bytes)\n", d->size_bytes,
	       d->volume_bytes);
	printf("state:       %s", state_word(d->state));
	if (!strcmp(d->state, "caching") && d->size_bytes > 0)
		printf(" (%" PRId64 " of %" PRId64 " bytes, %d%%)", d->cached_bytes, d->size_bytes,
		       (int)(d->cached_bytes * 100 / d->size_bytes));
	printf("\n");
	if (d->reason[0])
		printf("reason:      %s\n", d->reason);
	printf("copy:        %s\n", d->copy_name);
	printf("credentials: %s\n", d->credentials[0] ? d->credentials : "the broker's");
}

static int ds_add(struct isc_cli *cli, int argc, char **argv)
{
	struct isc_dataset_request req = {0};
	const char *profile = NULL;
	int from_env = 0;
	char *cred = NULL;
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];
		const char **slot = !strcmp(a, "--org")                   ? &req.org
		                    : !strcmp(a, "--name")                ? &req.name
		                    : !strcmp(a, "--etag")                ? &req.etag
		                    : !strcmp(a, "--version-id")          ? &req.version_id
		                    : !strcmp(a, "--volume-size")         ? &req.volume_size
		                    : !strcmp(a, "--credentials-profile") ? &profile
		                                                          : NULL;
		if (slot) {
			if (i + 1 >= argc || !argv[i + 1][0])
				return isc_cli_usage_error("datasets", "%s: give a value", a);
			*slot = argv[++i];
		} else if (!strcmp(a, "--credentials-from-env")) {
			from_env = 1;
		} else if (a[0] == '-') {
			return isc_cli_usage_error("datasets", "unknown option '%s'", a);
		} else if (!req.uri) {
			req.uri = a;
		} else {
			return isc_cli_usage_error("datasets", "unexpected argument '%s'", a);
		}
	}
	if (!req.uri || !req.org)
		return isc_cli_usage_error(
		    "datasets", "usage: isc datasets add s3://BUCKET[/KEY] --org ORG ...");
	if (profile && from_env)
		return isc_cli_usage_error(
		    "datasets",
		    "--credentials-profile and --credentials-from-env exclude each other");
	if (profile && asprintf(&cred, "profile:%s", profile) < 0)
		return ISC_EXIT_FAIL;
	req.credentials = cred ? cred : from_env ? "env" : NULL;

	struct isc_store *s;
	struct isc_config *cfg = NULL;
	struct isc_dataset d;
	struct isc_err err;
	int rc = isc_cli_store_open(cli, 0, &s);
	if (rc) {
		free(cred);
		return rc;
	}
	isc_err_clear(&err);
	rc = isc_config_load(cli->home, &cfg, &err);
	if (!rc)
		rc = isc_dataset_register(s, cfg, &req, &d, &err);
	isc_config_free(cfg);
	isc_store_free(s);
	free(cred);
	if (rc)
		return isc_cli_fail(&err);
	if (d.is_folder && ((req.etag && req.etag[0]) || (req.version_id && req.version_id[0])))
		fprintf(stderr, "isc: note: %s is a folder: --etag and --version-id are ignored\n",
		        req.uri);
	printf("dataset %s added: %s in %s, %" PRId64 " bytes, Created (iscd caches it; "
	       "isc datasets show %s --org %s)\n",
	       d.id, d.name, d.org_name, d.size_bytes, d.name, d.org_name);
	isc_dataset_cleanup(&d);
	return ISC_EXIT_OK;
}

static int ds_list(struct isc_cli *cli, int argc, char **argv)
{
	const char *org = NULL;
	int json = 0;
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--org") && i + 1 < argc)
			org = argv[++i];
		else if (!strcmp(argv[i], "--json"))
			json = 1;
		else
			return isc_cli_usage_error("datasets", "unexpected argument '%s'", argv[i]);
	}
	struct isc_store *s;
	struct isc_dataset *list;
	size_t n;
	struct isc_err err;
	int rc = isc_cli_store_open(cli, 0, &s);
	if (rc)
		return rc;
	isc_err_clear(&err);
	rc = isc_store_dataset_list(s, org, &list, &n, &err);
	isc_store_free(s);
	if (rc)
		return isc_cli_fail(&err);
	if (json) {
		json_t *arr = json_array();
		for (size_t i = 0; arr && i < n; i++)
			json_array_append_new(arr, to_json(&list[i]));
		isc_dataset_list_free(list, n);
		return print_json(arr);
	}
	printf("%-22s %-12s %-20s %-10s %14s  %s\n", "ID", "Org", "Name", "State", "Size",
	       "Source");
	for (size_t i = 0; i < n; i++)
		printf("%-22s %-12s %-20s %-10s %14" PRId64 "  %s\n", list[i].id, list[i].org_name,
		       list[i].name, state_word(list[i].state), list[i].size_bytes, list[i].uri);
	isc_dataset_list_free(list, n);
	return ISC_EXIT_OK;
}

/* show and remove: DATASET --org ORG [--json]. */
static int ds_one(struct isc_cli *cli, int argc, char **argv, int remove)
{
	const char *org = NULL, *what = NULL;
	int json = 0;
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
	struct isc_store *s;
	struct isc_dataset d;
	struct isc_err err;
	int rc = isc_cli_store_open(cli, 0, &s);
	if (rc)
		return rc;
	isc_err_clear(&err);
	rc = isc_store_dataset_find(s, org, what, &d, &err);
	if (rc) {
		isc_store_free(s);
		return isc_cli_fail(&err);
	}
	if (!remove) {
		isc_store_free(s);
		if (json)
			rc = print_json(to_json(&d));
		else
			print_one(&d);
		isc_dataset_cleanup(&d);
		return rc;
	}
	if (!strcmp(d.state, "caching")) {
		isc_err_set(&err, ISC_ECONFLICT,
		            "dataset '%s' is Caching: wait until it is Available or Failed",
		            d.name);
		rc = ISC_ECONFLICT;
	}
	if (!rc)
		rc = isc_store_dataset_remove(s, d.id, &err);
	if (!rc) {
		/* The shared copy goes with the last dataset that uses it. */
		int users = 1;
		char *root = isc_dataset_root(cli->home), *copy = NULL, *manifest = NULL;
		if (isc_store_dataset_copy_users(s, d.copy_name, d.id, &users, NULL) == 0 &&
		    users == 0 && root && asprintf(&copy, "%s/%s", root, d.copy_name) >= 0 &&
		    asprintf(&manifest, "%s/.manifests/%s.json", root, d.copy_name) >= 0) {
			unlink(manifest);
			isc_unpack_remove_tree(copy, NULL);
		}
		free(root);
		free(copy);
		free(manifest);
		printf("dataset %s (%s) removed\n", d.id, d.name);
	}
	isc_store_free(s);
	isc_dataset_cleanup(&d);
	return rc ? isc_cli_fail(&err) : ISC_EXIT_OK;
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
