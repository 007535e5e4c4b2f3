/*
 * isc nodes: the on-prem node pool for cycle and interruptible experiments,
 * the operator's, through iscd's API (/v1/nodes, api/routes_nodes.c).
 */
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/lib/table.h"
#include "common/model.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char nodes_usage[] =
    "usage: isc nodes add HOST [--port P] [--user U] --gpus N [--force]\n"
    "       isc nodes list [--json]\n"
    "       isc nodes drain NODE | undrain NODE | remove NODE\n"
    "       isc nodes pubkey\n"
    "\n"
    "The on-prem pool that runs cycle and interruptible experiments: the operator's\n"
    "(iscd's /v1/nodes; anyone else is refused). NODE is an id\n"
    "or HOST[:PORT]. `pubkey` prints the line to put in each node's authorized_keys\n"
    "(iscd makes the key pair on first use; its private half never leaves its home).\n"
    "A drained node keeps its run and gets no new one.\n"
    "\n"
    "`add` first logs in to the node with the pool key (at most 5 s) and refuses one\n"
    "that does not answer, saying why; --force adds it anyway, unreachable. iscd\n"
    "probes every node (node_probe_ms): one that does not answer is unreachable, with\n"
    "the reason in `list`, and gets no run; it is up again once it answers.\n";

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
	int port = 22, gpus = 0, have_gpus = 0, force = 0;
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
		} else if (!strcmp(a, "--force")) {
			force = 1;
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
		    "nodes", "usage: isc nodes add HOST [--port P] [--user U] --gpus N [--force]");
	json_t *o = NULL;
	/* iscd's words for the body's fields are this command's flags. */
	static const char *const words[] = {
	    "\"force\": true", "--force", "gpus: ", "--gpus: ", "user: ", "--user: ", NULL};
	cli->words = words;
	/* iscd probes the node first (up to 5 s): the reply says whether it answered. */
	int rc = isc_client_json(cli, "POST", "/v1/nodes",
	                         json_pack("{s:s,s:i,s:s,s:i,s:b}", "host", host, "port", port,
	                                   "user", user, "gpus", gpus, "force", force),
	                         &o);
	if (rc)
		return rc;
	const char *reason = isc_json_str(o, "reason");
	if (reason && reason[0])
		printf("node %lld added, unreachable: %s (iscd marks it up once it answers)\n",
		       (long long)json_integer_value(json_object_get(o, "id")), reason);
	else
		printf("node %lld added: %s@%s:%d, %d GPU(s), up (it answered a login with the "
		       "pool key)\n",
		       (long long)json_integer_value(json_object_get(o, "id")), user, host, port,
		       gpus);
	json_decref(o);
	return ISC_EXIT_OK;
}

static void node_row(json_t *n, const char **cells, char (*buf)[ISC_TABLE_CELL])
{
	cells[0] = buf[0];
	snprintf(buf[0], ISC_TABLE_CELL, "%lld",
	         (long long)json_integer_value(json_object_get(n, "id")));
	cells[1] = isc_json_str(n, "host");
	cells[2] = buf[2];
	snprintf(buf[2], ISC_TABLE_CELL, "%lld",
	         (long long)json_integer_value(json_object_get(n, "port")));
	cells[3] = isc_json_str(n, "user");
	cells[4] = buf[4];
	snprintf(buf[4], ISC_TABLE_CELL, "%lld",
	         (long long)json_integer_value(json_object_get(n, "gpus")));
	cells[5] = isc_json_str(n, "state");
	cells[6] = isc_json_str(n, "reason");
}

static int nodes_list(struct isc_cli *cli, int argc, char **argv)
{
	static const char *const headers[] = {"ID",   "HOST",  "PORT",  "USER",
	                                      "GPUS", "STATE", "REASON"};
	static const struct isc_table_spec nodes = {
	    7, headers, NULL, node_row, "isc nodes: the pool is empty (isc nodes add HOST)"};
	int json = argc == 3 && !strcmp(argv[2], "--json");
	if (argc > 2 && !json)
		return isc_cli_usage_error("nodes", "usage: isc nodes list [--json]");
	json_t *v = NULL;
	int rc = isc_client_json(cli, "GET", "/v1/nodes", NULL, &v);
	return rc ? rc : isc_cli_print_listing(v, json, &nodes);
}

/* drain, undrain, remove: one NODE argument (an id or HOST[:PORT], a path segment). */
static int nodes_change(struct isc_cli *cli, int argc, char **argv)
{
	const char *verb = argv[1];
	if (argc != 3)
		return isc_cli_usage_error("nodes", "usage: isc nodes %s NODE", verb);
	int remove = !strcmp(verb, "remove");
	char *seg = curl_easy_escape(NULL, argv[2], 0), *path = NULL;
	json_t *o = NULL;
	int rc;
	if (!seg ||
	    asprintf(&path, "/v1/nodes/%s%s%s", seg, remove ? "" : "/", remove ? "" : verb) < 0) {
		curl_free(seg);
		isc_cli_errorf("out of memory");
		return ISC_EXIT_FAIL;
	}
	curl_free(seg);
	rc = isc_client_json(cli, remove ? "DELETE" : "POST", path, NULL, &o);
	free(path);
	if (rc)
		return rc;
	printf("node %lld (%s:%lld) %s\n", (long long)json_integer_value(json_object_get(o, "id")),
	       json_string_value(json_object_get(o, "host")),
	       (long long)json_integer_value(json_object_get(o, "port")),
	       remove                   ? "removed"
	       : !strcmp(verb, "drain") ? "draining: it keeps its run and gets no new one"
	       : !strcmp(isc_json_str(o, "state"), "unreachable")
	           ? "undrained, unreachable: its last probe failed; up once it answers"
	           : "up");
	json_decref(o);
	return ISC_EXIT_OK;
}

/* The pool's public key, from iscd (which makes the pair on first use, under its home). */
static int nodes_pubkey(struct isc_cli *cli, int argc)
{
	if (argc != 2)
		return isc_cli_usage_error("nodes", "usage: isc nodes pubkey");
	json_t *o = NULL;
	int rc = isc_client_json(cli, "GET", "/v1/nodes/pubkey", NULL, &o);
	if (rc)
		return rc;
	printf("%s\n", json_string_value(json_object_get(o, "public_key")));
	json_decref(o);
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
