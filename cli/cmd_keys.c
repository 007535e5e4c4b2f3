/*
 * isc keys: an organisation's own cloud keys (bring-your-own), through iscd's
 * API (routes in api/routes_keys.c; the org's admins only). The secret is read
 * here from where each cloud's tools keep it, never from argv, and sent to
 * iscd in the request body over the Unix socket (or TCP from loopback); iscd
 * verifies it with the cloud before storing it sealed. Every buffer that held
 * it is wiped (docs/keys.md).
 */
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/lib/table.h"
#include "keys/key_secret.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char keys_usage[] =
    "usage: isc keys add --org ORG [--name N] [--regions R1,R2] aws --from-env\n"
    "       isc keys add --org ORG [--name N] [--regions R1,R2] aws --profile P [--file F]\n"
    "       isc keys add --org ORG [--name N] [--regions R1,R2] gcp --file KEY.json\n"
    "       isc keys add --org ORG [--name N] [--regions R1,R2] oci --config F --profile P\n"
    "       isc keys list [--org ORG] [--json]\n"
    "       isc keys verify KEY [--json]\n"
    "       isc keys remove KEY [--force] [--timeout SECONDS]\n"
    "       isc keys rotate-master [--new-key-file F]\n"
    "\n"
    "An organisation's own cloud accounts (its admins only): its bursts on a provider\n"
    "(and region, with --regions) run there, billed by its cloud, not by credits.\n"
    "Secrets are never arguments: AWS from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY\n"
    "[/AWS_SESSION_TOKEN] (--from-env) or a profile of a shared credentials file\n"
    "(default ~/.aws/credentials); GCP from a service-account key file; OCI from a\n"
    "config file's profile (key_file, pass_phrase). iscd verifies the key with the\n"
    "cloud before it is stored (a refused key is not stored), encrypted with\n"
    "AES-256-GCM under the master key ($ISC_MASTER_KEY_FILE of iscd, else\n"
    "<ISC_HOME>.master-key, made on first use).\n"
    "remove refuses while a cluster runs on the key; --force cancels those experiments,\n"
    "waits (default 600 s) until iscd has terminated their clusters, then removes it.\n"
    "rotate-master (the operator) re-encrypts every key under a new master key in one\n"
    "transaction; with --new-key-file F, restart iscd with ISC_MASTER_KEY_FILE=F.\n";

static void fmt_time(json_int_t ms, char *buf, size_t cap)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	if (ms <= 0 || !gmtime_r(&t, &tm)) {
		snprintf(buf, cap, "never");
		return;
	}
	strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int keys_add(struct isc_cli *cli, int argc, char **argv)
{
	const char *org = NULL, *name = NULL, *regions = NULL, *provider = NULL;
	struct isc_key_source src = {0};
	struct isc_key_secret secret = {0};
	struct isc_err err;
	json_t *body, *creds, *reply = NULL;
	char region_buf[64];
	int rc;

	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];
		const char **slot = NULL;
		if (!strcmp(a, "--org"))
			slot = &org;
		else if (!strcmp(a, "--name"))
			slot = &name;
		else if (!strcmp(a, "--regions"))
			slot = &regions;
		else if (!strcmp(a, "--profile"))
			slot = &src.profile;
		else if (!strcmp(a, "--file"))
			slot = &src.file;
		else if (!strcmp(a, "--config"))
			slot = &src.config_file;
		else if (!strcmp(a, "--from-env")) {
			src.from_env = 1;
			continue;
		} else if (a[0] == '-')
			return isc_cli_usage_error("keys", "unknown option '%s'", a);
		else if (provider)
			return isc_cli_usage_error("keys", "unexpected argument '%s'", a);
		else {
			provider = a;
			continue;
		}
		if (i + 1 >= argc)
			return isc_cli_usage_error("keys", "%s needs a value", a);
		*slot = argv[++i];
	}
	if (!org)
		return isc_cli_usage_error("keys", "add: --org ORG is required");
	if (!provider)
		return isc_cli_usage_error("keys", "add: which provider? aws, gcp or oci");
	if (strcmp(provider, "aws") && strcmp(provider, "gcp") && strcmp(provider, "oci"))
		return isc_cli_usage_error(
		    "keys", "add: no key kind for provider '%s' (aws, gcp, oci)", provider);
	if (regions && regions[0]) {
		size_t n = strcspn(regions, ",");
		snprintf(region_buf, sizeof(region_buf), "%.*s", (int)n, regions);
		src.region = region_buf;
	}
	/* Said before the secret is even read: it would not be sent anyway. */
	if ((rc = isc_client_secret_transport_ok("a cloud key")))
		return rc;
	isc_err_clear(&err);
	if (isc_keys_collect(provider, &src, &secret, &err))
		return isc_cli_fail(&err);
	/* jansson's copies of the secret are wiped when freed. */
	isc_keys_json_wipe_on_free();
	creds = json_object();
	for (size_t i = 0; i < secret.n; i++)
		json_object_set_new(creds, secret.kv[i].key, json_string(secret.kv[i].value));
	body = json_pack("{s:s, s:s, s:o}", "org", org, "provider", provider, "credentials", creds);
	if (name)
		json_object_set_new(body, "name", json_string(name));
	if (regions)
		json_object_set_new(body, "regions", json_string(regions));
	isc_key_secret_cleanup(&secret);
	if (!body) {
		isc_cli_errorf("out of memory");
		return ISC_EXIT_FAIL;
	}
	rc = isc_client_secret_json(cli, "a cloud key", "POST", "/v1/keys", body, 201, &reply);
	if (!rc)
		printf("added %s: %s account %s, principal %s\n", isc_json_str(reply, "id"),
		       provider, isc_json_str(reply, "account"), isc_json_str(reply, "principal"));
	json_decref(reply);
	return rc;
}

static void key_row(json_t *k, const char **cells, char (*buf)[ISC_TABLE_CELL])
{
	const char *regions = isc_json_str(k, "regions");
	cells[0] = isc_json_str(k, "id");
	cells[1] = isc_json_str(k, "org");
	cells[2] = isc_json_str(k, "provider");
	cells[3] = isc_json_str(k, "account");
	cells[4] = isc_json_str(k, "principal");
	cells[5] = regions[0] ? regions : "all";
	cells[6] = isc_json_str(k, "state");
	cells[7] = isc_json_str(k, "added_by");
	fmt_time(json_integer_value(json_object_get(k, "added_at_ms")), buf[8], ISC_TABLE_CELL);
	cells[8] = buf[8];
	fmt_time(json_integer_value(json_object_get(k, "verified_at_ms")), buf[9], ISC_TABLE_CELL);
	cells[9] = buf[9];
	cells[10] = isc_json_str(k, "fingerprint");
}

static int keys_list(struct isc_cli *cli, int argc, char **argv)
{
	static const char *const headers[] = {
	    "ID",    "ORG",      "PROVIDER", "ACCOUNT",       "PRINCIPAL",  "REGIONS",
	    "STATE", "ADDED BY", "ADDED",    "LAST VERIFIED", "FINGERPRINT"};
	static const struct isc_table_spec keys = {11, headers, NULL, key_row, NULL};
	const char *org = NULL;
	char *path = strdup("/v1/keys");
	json_t *arr = NULL, *k;
	size_t i;
	int json = 0, rc;

	for (int a = 2; a < argc; a++) {
		if (!strcmp(argv[a], "--json"))
			json = 1;
		else if (!strcmp(argv[a], "--org") && a + 1 < argc)
			org = argv[++a];
		else {
			free(path);
			return isc_cli_usage_error("keys", "list: unexpected argument '%s'",
			                           argv[a]);
		}
	}
	if (!path || isc_client_query_add(&path, "org", org)) {
		free(path);
		isc_cli_errorf("out of memory");
		return ISC_EXIT_FAIL;
	}
	rc = isc_client_json_all_pages(cli, path, &arr);
	free(path);
	if (rc)
		return rc;
	/* A failing key's reason follows the table: it is too long for a column. */
	json_incref(arr);
	rc = isc_cli_print_listing(arr, json, &keys);
	if (!json && !rc)
		json_array_foreach(arr, i, k) if (isc_json_str(k, "state_reason")[0])
		    printf("%s %s: %s\n", isc_json_str(k, "id"), isc_json_str(k, "state"),
		           isc_json_str(k, "state_reason"));
	json_decref(arr);
	return rc;
}

/* "/v1/keys/ID" + tail, with ID checked to be a key id (no path tricks). */
static char *key_path(const char *id, const char *tail)
{
	char *p = NULL;
	if (strncmp(id, "key_", 4) != 0 || strspn(id + 4, "0123456789abcdef") != strlen(id + 4) ||
	    strlen(id) > 40)
		return NULL;
	if (asprintf(&p, "/v1/keys/%s%s", id, tail) < 0)
		return NULL;
	return p;
}

static int keys_verify(struct isc_cli *cli, int argc, char **argv)
{
	const char *id = NULL;
	char *path;
	json_t *reply = NULL;
	int json = 0, rc;

	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = 1;
		else if (argv[i][0] != '-' && !id)
			id = argv[i];
		else
			return isc_cli_usage_error("keys", "verify: unexpected argument '%s'",
			                           argv[i]);
	}
	if (!id)
		return isc_cli_usage_error("keys", "verify: which key?");
	if (!(path = key_path(id, "/verify"))) {
		isc_cli_errorf("no cloud key '%s'", id);
		return ISC_EXIT_FAIL;
	}
	rc = isc_client_json(cli, "POST", path, NULL, &reply);
	free(path);
	if (rc)
		return rc;
	if (json)
		isc_json_print(reply, stdout);
	else
		printf("%s verified: account %s, principal %s\n", id,
		       isc_json_str(reply, "account"), isc_json_str(reply, "principal"));
	json_decref(reply);
	return ISC_EXIT_OK;
}

static int keys_remove(struct isc_cli *cli, int argc, char **argv)
{
	/* iscd's word for the query's force=1 is this command's flag. */
	static const char *const words[] = {"force=1", "--force", NULL};
	const char *id = NULL;
	int force = 0, rc, announced = 0;
	long timeout_s = 600;
	struct isc_reply r;
	char *path;
	json_t *reply;

	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--force"))
			force = 1;
		else if (!strcmp(argv[i], "--timeout") && i + 1 < argc) {
			char *end;
			timeout_s = strtol(argv[++i], &end, 10);
			if (*end || timeout_s < 1 || timeout_s > 86400)
				return isc_cli_usage_error("keys", "--timeout: 1..86400 seconds");
		} else if (argv[i][0] != '-' && !id)
			id = argv[i];
		else
			return isc_cli_usage_error("keys", "remove: unexpected argument '%s'",
			                           argv[i]);
	}
	if (!id)
		return isc_cli_usage_error("keys", "remove: which key?");
	if (!(path = key_path(id, force ? "?force=1" : ""))) {
		isc_cli_errorf("no cloud key '%s'", id);
		return ISC_EXIT_FAIL;
	}
	/* With force: iscd answers 202 while the key's clusters are being ended; ask again. */
	for (long waited = 0;; waited++) {
		if ((rc = isc_client_request(cli, "DELETE", path, NULL, 0, &r)))
			break;
		reply = json_loadb(r.body, r.len, 0, NULL);
		if (r.status == 200) {
			printf("removed %s (%s account %s of %s)\n", id,
			       isc_json_str(reply, "provider"), isc_json_str(reply, "account"),
			       isc_json_str(reply, "org"));
		} else if (r.status == 202 && waited < timeout_s * 5) {
			if (!announced) {
				size_t i;
				json_t *e;
				json_array_foreach(json_object_get(reply, "cancelling"), i, e)
				    printf("cancelling %s (its cluster runs on %s)\n",
				           json_string_value(e), id);
				fflush(stdout);
				announced = 1;
			}
			json_decref(reply);
			isc_reply_cleanup(&r);
			nanosleep(&(struct timespec){0, 200 * 1000 * 1000}, NULL);
			continue;
		} else if (r.status == 202) {
			isc_cli_errorf(
			    "key %s: %lld cluster(s) still live after %ld s (is iscd's "
			    "broker running?); the key stays 'removing' (no new launches); "
			    "run the command again to finish",
			    id,
			    (long long)json_integer_value(json_object_get(reply, "live_clusters")),
			    timeout_s);
			rc = ISC_EXIT_FAIL;
		} else {
			rc = isc_client_fail_in(&r, words);
		}
		json_decref(reply);
		isc_reply_cleanup(&r);
		break;
	}
	free(path);
	return rc;
}

static int keys_rotate(struct isc_cli *cli, int argc, char **argv)
{
	const char *new_file = NULL;
	json_t *body = json_object(), *reply = NULL;
	int rc;

	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--new-key-file") && i + 1 < argc)
			new_file = argv[++i];
		else {
			json_decref(body);
			return isc_cli_usage_error(
			    "keys", "rotate-master: unexpected argument '%s'", argv[i]);
		}
	}
	if (new_file)
		json_object_set_new(body, "new_key_file", json_string(new_file));
	if ((rc = isc_client_json(cli, "POST", "/v1/keys/rotate-master", body, &reply)))
		return rc;
	printf("re-encrypted %lld key(s) under the new master key%s%s%s\n",
	       (long long)json_integer_value(json_object_get(reply, "reencrypted")),
	       new_file ? "; restart iscd with ISC_MASTER_KEY_FILE=" : "", new_file ? new_file : "",
	       "");
	json_decref(reply);
	return ISC_EXIT_OK;
}

int cmd_keys(struct isc_cli *cli, int argc, char **argv)
{
	if (argc < 2 || isc_cli_wants_help(argc, argv)) {
		fputs(keys_usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? ISC_EXIT_USAGE : ISC_EXIT_OK;
	}
	if (!strcmp(argv[1], "add"))
		return keys_add(cli, argc, argv);
	if (!strcmp(argv[1], "list"))
		return keys_list(cli, argc, argv);
	if (!strcmp(argv[1], "verify"))
		return keys_verify(cli, argc, argv);
	if (!strcmp(argv[1], "remove"))
		return keys_remove(cli, argc, argv);
	if (!strcmp(argv[1], "rotate-master"))
		return keys_rotate(cli, argc, argv);
	return isc_cli_usage_error("keys", "unknown subcommand '%s'", argv[1]);
}
