/*
 * isc keys: an organisation's own cloud keys (bring-your-own). Secrets are read
 * from where each cloud's tools keep them, never from argv; they are verified
 * with the cloud before anything is stored, sealed under the master key, and
 * never printed (docs/keys.md).
 */
#include "cli/commands.h"

#include "keys/keys.h"
#include "store/store_experiments.h"
#include "store/store_keys.h"

#include <jansson.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
    "An organisation's own cloud accounts: its bursts on a provider (and region, with\n"
    "--regions) run there, billed by its cloud, not by credits. Secrets are never\n"
    "arguments: AWS from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY[/AWS_SESSION_TOKEN]\n"
    "(--from-env) or a profile of a shared credentials file (default ~/.aws/credentials);\n"
    "GCP from a service-account key file; OCI from a config file's profile (key_file,\n"
    "pass_phrase). The key is verified with the cloud before it is stored (a refused key\n"
    "is not stored), encrypted with AES-256-GCM under the master key\n"
    "($ISC_MASTER_KEY_FILE, else <ISC_HOME>.master-key, made on first use).\n"
    "remove refuses while a cluster runs on the key; --force cancels those experiments,\n"
    "waits (default 600 s) until iscd has terminated their clusters, then removes it.\n"
    "rotate-master re-encrypts every key under a new master key in one transaction.\n";

static const char *who_am_i(char *buf, size_t cap)
{
	struct passwd *pw = getpwuid(getuid());
	snprintf(buf, cap, "local user %s", pw ? pw->pw_name : "?");
	return buf;
}

static void fmt_time(int64_t ms, char *buf, size_t cap)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	if (ms <= 0 || !gmtime_r(&t, &tm)) {
		snprintf(buf, cap, "never");
		return;
	}
	strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* Loads config.toml for the providers' endpoints; NULL config is allowed by the drivers. */
static int load_config(struct isc_cli *cli, struct isc_config **cfg)
{
	struct isc_err err;
	isc_err_clear(&err);
	if (isc_config_load(cli->home, cfg, &err))
		return isc_cli_fail(&err);
	return ISC_EXIT_OK;
}

static int keys_add(struct isc_cli *cli, int argc, char **argv)
{
	struct isc_key_add req = {0};
	struct isc_key_source src = {0};
	struct isc_key_secret secret = {0};
	struct isc_identity who;
	struct isc_config *cfg = NULL;
	struct isc_store *s = NULL;
	struct isc_err err;
	char by[160], *id = NULL, region_buf[64];
	int rc;

	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];
		const char **slot = NULL;
		if (!strcmp(a, "--org"))
			slot = &req.org;
		else if (!strcmp(a, "--name"))
			slot = &req.name;
		else if (!strcmp(a, "--regions"))
			slot = &req.regions;
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
		else if (req.provider)
			return isc_cli_usage_error("keys", "unexpected argument '%s'", a);
		else {
			req.provider = a;
			continue;
		}
		if (i + 1 >= argc)
			return isc_cli_usage_error("keys", "%s needs a value", a);
		*slot = argv[++i];
	}
	if (!req.org)
		return isc_cli_usage_error("keys", "add: --org ORG is required");
	if (!req.provider)
		return isc_cli_usage_error("keys", "add: which provider? aws, gcp or oci");
	if (strcmp(req.provider, "aws") && strcmp(req.provider, "gcp") &&
	    strcmp(req.provider, "oci"))
		return isc_cli_usage_error(
		    "keys", "add: no key kind for provider '%s' (aws, gcp, oci)", req.provider);
	req.added_by = who_am_i(by, sizeof(by));
	if (req.regions && req.regions[0]) {
		size_t n = strcspn(req.regions, ",");
		snprintf(region_buf, sizeof(region_buf), "%.*s", (int)n, req.regions);
		src.region = region_buf;
	}
	isc_err_clear(&err);
	if (isc_keys_collect(req.provider, &src, &secret, &err))
		return isc_cli_fail(&err);
	if ((rc = isc_cli_store_open(cli, 0, &s)) || (rc = load_config(cli, &cfg)))
		goto out;
	if (isc_keys_add(s, cli->home, cfg, &req, &secret, &id, &who, &err)) {
		rc = isc_cli_fail(&err);
		goto out;
	}
	printf("added %s: %s account %s, principal %s\n", id, req.provider, who.account,
	       who.principal);
	rc = ISC_EXIT_OK;
out:
	isc_key_secret_cleanup(&secret);
	free(id);
	isc_config_free(cfg);
	isc_store_free(s);
	return rc;
}

static int keys_list(struct isc_cli *cli, int argc, char **argv)
{
	const char *org = NULL;
	int json = 0, rc;
	struct isc_store *s = NULL;
	struct isc_cloud_key *list = NULL;
	struct isc_org o = {0};
	struct isc_err err;
	size_t n = 0;

	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = 1;
		else if (!strcmp(argv[i], "--org") && i + 1 < argc)
			org = argv[++i];
		else
			return isc_cli_usage_error("keys", "list: unexpected argument '%s'",
			                           argv[i]);
	}
	if ((rc = isc_cli_store_open(cli, 0, &s)))
		return rc;
	isc_err_clear(&err);
	if ((org && isc_store_org_find(s, org, &o, &err)) ||
	    isc_store_key_list(s, org ? o.id : 0, &list, &n, &err)) {
		rc = isc_cli_fail(&err);
		goto out;
	}
	if (json) {
		json_t *arr = json_array();
		for (size_t i = 0; i < n; i++) {
			struct isc_cloud_key *k = &list[i];
			json_array_append_new(
			    arr, json_pack(
			             "{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I, "
			             "s:I, s:s}",
			             "id", k->id, "org", k->org_name, "provider", k->provider,
			             "name", k->name, "account", k->account, "principal",
			             k->principal, "regions", k->regions, "state", k->state,
			             "state_reason", k->state_reason, "added_by", k->added_by,
			             "added_at_ms", (json_int_t)k->created_at_ms, "verified_at_ms",
			             (json_int_t)k->verified_at_ms, "fingerprint", k->fingerprint));
		}
		json_dumpf(arr, stdout, JSON_INDENT(1));
		putchar('\n');
		json_decref(arr);
	} else {
		printf("%-20s %-10s %-4s %-14s %-44s %-16s %-8s %-20s %-20s %-20s %s\n", "ID",
		       "ORG", "PROV", "ACCOUNT", "PRINCIPAL", "REGIONS", "STATE", "ADDED BY",
		       "ADDED", "LAST VERIFIED", "FINGERPRINT");
		for (size_t i = 0; i < n; i++) {
			struct isc_cloud_key *k = &list[i];
			char added[32], verified[32];
			fmt_time(k->created_at_ms, added, sizeof(added));
			fmt_time(k->verified_at_ms, verified, sizeof(verified));
			printf("%-20s %-10s %-4s %-14s %-44s %-16s %-8s %-20s %-20s %-20s %s\n",
			       k->id, k->org_name, k->provider, k->account, k->principal,
			       k->regions[0] ? k->regions : "all", k->state, k->added_by, added,
			       verified, k->fingerprint);
			if (k->state_reason[0])
				printf("  %s: %s\n", k->state, k->state_reason);
		}
	}
	rc = ISC_EXIT_OK;
out:
	isc_org_cleanup(&o);
	isc_cloud_key_list_free(list, n);
	isc_store_free(s);
	return rc;
}

static int keys_verify(struct isc_cli *cli, int argc, char **argv)
{
	const char *id = NULL;
	int json = 0, rc;
	struct isc_store *s = NULL;
	struct isc_config *cfg = NULL;
	struct isc_identity who;
	struct isc_err err;

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
	if ((rc = isc_cli_store_open(cli, 0, &s)) || (rc = load_config(cli, &cfg)))
		goto out;
	isc_err_clear(&err);
	if (isc_keys_verify(s, cli->home, cfg, id, &who, &err)) {
		isc_cli_errorf("key %s failed verification: %s", id, err.msg);
		rc = ISC_EXIT_FAIL;
		goto out;
	}
	if (json) {
		json_t *o = json_pack("{s:s, s:b, s:s, s:s}", "id", id, "verified", 1, "account",
		                      who.account, "principal", who.principal);
		json_dumpf(o, stdout, JSON_INDENT(1));
		putchar('\n');
		json_decref(o);
	} else
		printf("%s verified: account %s, principal %s\n", id, who.account, who.principal);
	rc = ISC_EXIT_OK;
out:
	isc_config_free(cfg);
	isc_store_free(s);
	return rc;
}

static int keys_remove(struct isc_cli *cli, int argc, char **argv)
{
	const char *id = NULL;
	int force = 0, rc;
	long timeout_s = 600;
	struct isc_store *s = NULL;
	struct isc_cloud_key k = {0};
	struct isc_err err;
	int64_t live = 0;

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
	if ((rc = isc_cli_store_open(cli, 0, &s)))
		return rc;
	isc_err_clear(&err);
	if (isc_store_key_get(s, id, &k, &err) || isc_store_key_live_clusters(s, id, &live, &err)) {
		rc = isc_cli_fail(&err);
		goto out;
	}
	if (live > 0 && !force) {
		isc_cli_errorf("key %s has %lld live cluster(s); they must end first (or use "
		               "--force to cancel their experiments and wait for them to be "
		               "terminated)",
		               id, (long long)live);
		rc = ISC_EXIT_FAIL;
		goto out;
	}
	if (live > 0) {
		char **exps = NULL;
		size_t n = 0;
		/* No new launch on it from now on; what runs on it is still watched and ended. */
		if (isc_store_key_set_state(s, id, "removing", "isc keys remove --force", 0,
		                            &err) ||
		    isc_store_key_live_experiments(s, id, &exps, &n, &err)) {
			rc = isc_cli_fail(&err);
			goto out;
		}
		for (size_t i = 0; i < n; i++) {
			if (isc_store_experiment_request_cancel(s, exps[i], &err) == 0)
				printf("cancelling %s (its cluster runs on %s)\n", exps[i], id);
			else
				fprintf(stderr, "isc: warning: cancelling %s: %s\n", exps[i],
				        err.msg);
			free(exps[i]);
		}
		free(exps);
		fflush(stdout);
		for (long waited = 0; live > 0 && waited < timeout_s * 5; waited++) {
			struct timespec ts = {0, 200 * 1000 * 1000};
			nanosleep(&ts, NULL);
			if (isc_store_key_live_clusters(s, id, &live, &err)) {
				rc = isc_cli_fail(&err);
				goto out;
			}
		}
		if (live > 0) {
			isc_cli_errorf("key %s: %lld cluster(s) still live after %ld s (is iscd "
			               "running?); the key stays 'removing' (no new launches); run "
			               "the command again to finish",
			               id, (long long)live, timeout_s);
			rc = ISC_EXIT_FAIL;
			goto out;
		}
	}
	if (isc_store_key_delete(s, id, &err)) {
		rc = isc_cli_fail(&err);
		goto out;
	}
	printf("removed %s (%s account %s of %s)\n", id, k.provider, k.account, k.org_name);
	rc = ISC_EXIT_OK;
out:
	isc_cloud_key_cleanup(&k);
	isc_store_free(s);
	return rc;
}

static int keys_rotate(struct isc_cli *cli, int argc, char **argv)
{
	const char *new_file = NULL;
	struct isc_store *s = NULL;
	struct isc_err err;
	size_t count = 0;
	int rc;

	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--new-key-file") && i + 1 < argc)
			new_file = argv[++i];
		else
			return isc_cli_usage_error(
			    "keys", "rotate-master: unexpected argument '%s'", argv[i]);
	}
	if ((rc = isc_cli_store_open(cli, 0, &s)))
		return rc;
	isc_err_clear(&err);
	if (isc_keys_rotate_master(s, cli->home, new_file, &count, &err)) {
		rc = isc_cli_fail(&err);
	} else {
		printf("re-encrypted %zu key(s) under the new master key%s%s\n", count,
		       new_file ? "; point ISC_MASTER_KEY_FILE at " : "", new_file ? new_file : "");
		rc = ISC_EXIT_OK;
	}
	isc_store_free(s);
	return rc;
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
