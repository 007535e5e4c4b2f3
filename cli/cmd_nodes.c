/* isc nodes: the on-prem node pool for cycle and interruptible experiments. */
#include "cli/commands.h"

#include "launcher/keys.h"
#include "store/store_pool.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The pool's key pair, kept with the cluster keys under $ISC_HOME/keys. */
#define POOL_KEY_ID "onprem-pool"

static const char nodes_usage[] =
    "usage: isc nodes add HOST [--port P] [--user U] --gpus N\n"
    "       isc nodes list [--json]\n"
    "       isc nodes drain NODE | undrain NODE | remove NODE\n"
    "       isc nodes pubkey\n"
    "\n"
    "The on-prem pool that runs cycle and interruptible experiments. NODE is an id\n"
    "or HOST[:PORT]. `pubkey` prints the line to put in each node's authorized_keys\n"
    "(the key pair is made on first use; its private half never leaves $ISC_HOME).\n"
    "A drained node keeps its run and gets no new one.\n";

/* A whole decimal number in [lo, hi]; 0 or -1. */
static int parse_int(const char *s, int lo, int hi, int *out)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (!*s || *end || v < lo || v > hi)
		return -1;
	*out = (int)v;
	return 0;
}

static int nodes_add(struct isc_cli *cli, int argc, char **argv)
{
	const char *host = NULL, *user = "isc";
	int port = 22, gpus = 0, have_gpus = 0;
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];
		int last = i + 1 >= argc;
		if (!strcmp(a, "--port")) {
			if (last || parse_int(argv[++i], 1, 65535, &port))
				return isc_cli_usage_error("nodes", "--port: give a port 1..65535");
		} else if (!strcmp(a, "--user")) {
			if (last)
				return isc_cli_usage_error("nodes", "--user: give a user name");
			user = argv[++i];
		} else if (!strcmp(a, "--gpus")) {
			if (last || parse_int(argv[++i], 1, ISC_POOL_MAX_GPUS, &gpus))
				return isc_cli_usage_error(
				    "nodes", "--gpus: give a GPU count 1..%d", ISC_POOL_MAX_GPUS);
			have_gpus = 1;
		} else if (a[0] == '-') {
			return isc_cli_usage_error("nodes", "unknown option '%s'", a);
		} else if (!host) {
			host = a;
		} else {
			return isc_cli_usage_error("nodes", "unexpected argument '%s'", a);
		}
	}
	if (!host || !have_gpus)
		return isc_cli_usage_error(
		    "nodes", "usage: isc nodes add HOST [--port P] [--user U] --gpus N");
	struct isc_store *s;
	struct isc_err err;
	int64_t id;
	int rc = isc_cli_store_open(cli, 0, &s);
	if (rc)
		return rc;
	isc_err_clear(&err);
	rc = isc_store_pool_add(s, host, port, user, gpus, &id, &err);
	isc_store_free(s);
	if (rc)
		return isc_cli_fail(&err);
	printf("node %lld added: %s@%s:%d, %d GPU(s)\n", (long long)id, user, host, port, gpus);
	return ISC_EXIT_OK;
}

static int nodes_list(struct isc_cli *cli, int argc, char **argv)
{
	int json = argc == 3 && !strcmp(argv[2], "--json");
	if (argc > 2 && !json)
		return isc_cli_usage_error("nodes", "usage: isc nodes list [--json]");
	struct isc_store *s;
	struct isc_pool_node *v;
	struct isc_err err;
	size_t n;
	int rc = isc_cli_store_open(cli, 0, &s);
	if (rc)
		return rc;
	isc_err_clear(&err);
	rc = isc_store_pool_list(s, &v, &n, &err);
	isc_store_free(s);
	if (rc)
		return isc_cli_fail(&err);
	if (json) {
		json_t *arr = json_array();
		for (size_t i = 0; i < n; i++)
			json_array_append_new(
			    arr, json_pack("{s:I,s:s,s:i,s:s,s:i,s:s,s:I}", "id",
			                   (json_int_t)v[i].id, "host", v[i].host, "port",
			                   v[i].port, "user", v[i].user, "gpus", v[i].gpus, "state",
			                   v[i].state, "added_ms", (json_int_t)v[i].added_ms));
		json_dumpf(arr, stdout, JSON_INDENT(2));
		putchar('\n');
		json_decref(arr);
	} else {
		if (n == 0)
			fprintf(stderr, "isc nodes: the pool is empty (isc nodes add HOST)\n");
		printf("%-4s %-32s %-6s %-12s %-5s %s\n", "ID", "HOST", "PORT", "USER", "GPUS",
		       "STATE");
		for (size_t i = 0; i < n; i++)
			printf("%-4lld %-32s %-6d %-12s %-5d %s\n", (long long)v[i].id, v[i].host,
			       v[i].port, v[i].user, v[i].gpus, v[i].state);
	}
	isc_pool_nodes_free(v, n);
	return ISC_EXIT_OK;
}

/* drain, undrain, remove: one NODE argument. */
static int nodes_change(struct isc_cli *cli, int argc, char **argv)
{
	const char *verb = argv[1];
	if (argc != 3)
		return isc_cli_usage_error("nodes", "usage: isc nodes %s NODE", verb);
	struct isc_store *s;
	struct isc_pool_node nd;
	struct isc_err err;
	int rc = isc_cli_store_open(cli, 0, &s);
	if (rc)
		return rc;
	isc_err_clear(&err);
	rc = isc_store_pool_find(s, argv[2], &nd, &err);
	if (rc == 0) {
		if (!strcmp(verb, "remove"))
			rc = isc_store_pool_remove(s, nd.id, &err);
		else
			rc = isc_store_pool_set_state(
			    s, nd.id, !strcmp(verb, "drain") ? "draining" : "up", &err);
	}
	isc_store_free(s);
	if (rc)
		return isc_cli_fail(&err);
	printf("node %lld (%s:%d) %s\n", (long long)nd.id, nd.host, nd.port,
	       !strcmp(verb, "remove")  ? "removed"
	       : !strcmp(verb, "drain") ? "draining: it keeps its run and gets no new one"
	                                : "up");
	isc_pool_node_cleanup(&nd);
	return ISC_EXIT_OK;
}

static int nodes_pubkey(struct isc_cli *cli, int argc)
{
	if (argc != 2)
		return isc_cli_usage_error("nodes", "usage: isc nodes pubkey");
	struct isc_err err;
	char *pub = NULL;
	isc_err_clear(&err);
	int rc = isc_cluster_key_public(cli->home, POOL_KEY_ID, &pub, &err);
	if (rc == ISC_ENOTFOUND) {
		isc_err_clear(&err);
		rc = isc_cluster_key_create(cli->home, POOL_KEY_ID, &pub, &err);
		if (rc == ISC_ECONFLICT) { /* made by another isc meanwhile */
			isc_err_clear(&err);
			rc = isc_cluster_key_public(cli->home, POOL_KEY_ID, &pub, &err);
		}
	}
	if (rc)
		return isc_cli_fail(&err);
	printf("%s\n", pub);
	free(pub);
	return ISC_EXIT_OK;
}

int cmd_nodes(struct isc_cli *cli, int argc, char **argv)
{
	if (argc < 2 || isc_cli_wants_help(argc, argv)) {
		fputs(nodes_usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? ISC_EXIT_USAGE : ISC_EXIT_OK;
	}
	if (!strcmp(argv[1], "add"))
		return nodes_add(cli, argc, argv);
	if (!strcmp(argv[1], "list"))
		return nodes_list(cli, argc, argv);
	if (!strcmp(argv[1], "drain") || !strcmp(argv[1], "undrain") || !strcmp(argv[1], "remove"))
		return nodes_change(cli, argc, argv);
	if (!strcmp(argv[1], "pubkey"))
		return nodes_pubkey(cli, argc);
	return isc_cli_usage_error("nodes", "unknown subcommand '%s'", argv[1]);
}
