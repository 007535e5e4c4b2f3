/*
 * isc user, isc member, isc token, isc audit: who may use the platform and
 * what they did (docs/api.md). Users are added by the operator; memberships
 * by an organisation's admins; each user makes their own tokens.
 */
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/lib/table.h"

#include <getopt.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Scans "--name VALUE" / "--name=VALUE" / "--json" options; positional words into pos. */
struct opt {
	const char *name;
	const char **value; /* NULL for --json */
};

static int scan(const char *cmd, int argc, char **argv, int first, const struct opt *opts,
                int *json, const char **pos, int max_pos, int *npos)
{
	*npos = 0;
	for (int i = first; i < argc; i++) {
		const char *a = argv[i];
		const struct opt *o = NULL;
		const char *eq;
		size_t len;

		if (strncmp(a, "--", 2) != 0) {
			if (*npos >= max_pos)
				return isc_cli_usage_error(cmd, "unexpected argument '%s'", a);
			pos[(*npos)++] = a;
			continue;
		}
		if (strcmp(a, "--json") == 0 && json) {
			*json = 1;
			continue;
		}
		eq = strchr(a, '=');
		len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
		for (const struct opt *p = opts; p && p->name; p++)
			if (strlen(p->name) == len && strncmp(p->name, a + 2, len) == 0)
				o = p;
		if (!o)
			return isc_cli_usage_error(cmd, "unknown option '%s'", a);
		if (eq)
			*o->value = eq + 1;
		else if (i + 1 < argc)
			*o->value = argv[++i];
		else
			return isc_cli_usage_error(cmd, "option --%s needs a value", o->name);
	}
	return 0;
}

/* ---- isc user ---- */

static void user_row(json_t *u, const char **cells, char (*buf)[ISC_TABLE_CELL])
{
	cells[0] = isc_json_str(u, "name");
	cells[1] = isc_json_when(json_object_get(u, "created_at_ms"), buf[1], ISC_TABLE_CELL);
}

/*
 * What a new user does next, on stderr (stdout keeps the one line scripts read):
 * a user without a membership sees nothing, and on the socket iscd knows a
 * caller only by the OS login of the calling process, so the operator is told
 * what to hand the user: the role to give, the socket to use as that login,
 * and how the user makes a token of their own for TCP.
 */
static void user_next_steps(struct isc_cli *cli, const char *name)
{
	const char *url = getenv("ISC_API_URL"), *sock = getenv("ISC_SOCKET");
	char *own = NULL, *tcp_file = NULL, tcp[256] = "";
	FILE *f;

	fprintf(stderr,
	        "isc user: next, give %s a role: isc member add --org ORG %s --role "
	        "member|admin|finance (until then %s sees no organisation)\n",
	        name, name, name);
	if (url && *url) {
		/* A remote iscd: its socket is on its machine, under its store. */
		fprintf(
		    stderr,
		    "isc user: %s then logs in on iscd's machine as the OS user %s and runs isc "
		    "there (iscd's socket, HOME/run/api.sock or ISC_SOCKET, knows %s by that "
		    "login); for other machines %s makes a token there: isc token create "
		    "--expires 30d, then ISC_API_URL=%s ISC_TOKEN=<the token> isc ...\n",
		    name, name, name, name, url);
		return;
	}
	if (!(sock && *sock) && asprintf(&own, "%s/run/api.sock", cli->home) < 0)
		own = NULL;
	/* iscd writes its TCP address here when it listens on one (api_listen). */
	if (asprintf(&tcp_file, "%s/run/api.sock.tcp", cli->home) >= 0 &&
	    (f = fopen(tcp_file, "r")) != NULL) {
		if (!fgets(tcp, sizeof(tcp), f))
			tcp[0] = 0;
		tcp[strcspn(tcp, "\r\n")] = 0;
		fclose(f);
	}
	free(tcp_file);
	fprintf(stderr,
	        "isc user: %s then runs isc as the OS user %s on this machine: ISC_SOCKET=%s isc "
	        "experiments\n",
	        name, name,
	        sock && *sock ? sock
	        : own         ? own
	                      : "HOME/run/api.sock");
	if (tcp[0])
		fprintf(
		    stderr,
		    "isc user: for other machines %s makes a token here first: isc token create "
		    "--expires 30d, then ISC_API_URL=%s ISC_TOKEN=<the token> isc ...\n",
		    name, tcp);
	else
		fprintf(stderr,
		        "isc user: for other machines %s makes a token here (isc token create "
		        "--expires 30d) for ISC_API_URL + ISC_TOKEN, once iscd listens on TCP "
		        "(api_listen in config.toml)\n",
		        name);
	if (!getpwnam(name))
		fprintf(stderr,
		        "isc user: note: there is no OS user '%s' on this machine yet, and iscd's "
		        "socket knows a caller only by login name: create it (useradd %s)\n",
		        name, name);
	free(own);
}

int cmd_user(struct isc_cli *cli, int argc, char **argv)
{
	static const char *const headers[] = {"NAME", "CREATED (UTC)"};
	static const struct isc_table_spec users = {2, headers, NULL, user_row, NULL};
	const char *pos[1];
	int json = 0, npos, rc;
	json_t *reply = NULL;

	if (argc < 2 || isc_cli_wants_help(argc, argv)) {
		printf("usage: isc user add NAME\n       isc user list [--json]\n\n"
		       "Platform users (operator only). NAME is the user's OS login name: on the\n"
		       "local socket iscd knows a caller by the OS user of the calling process.\n");
		return argc < 2 ? ISC_EXIT_USAGE : ISC_EXIT_OK;
	}
	if (strcmp(argv[1], "add") == 0) {
		if ((rc = scan("user", argc, argv, 2, NULL, NULL, pos, 1, &npos)))
			return rc;
		/* iscd names the body's field; here it is the NAME argument. */
		static const char *const words[] = {"name: 1 to 64", "NAME: 1 to 64", NULL};
		if (npos != 1)
			return isc_cli_usage_error("user", "usage: isc user add NAME");
		cli->words = words;
		if ((rc = isc_client_json(cli, "POST", "/v1/users",
		                          json_pack("{s:s}", "name", pos[0]), NULL)))
			return rc;
		printf("user %s added\n", pos[0]);
		user_next_steps(cli, pos[0]);
		return ISC_EXIT_OK;
	}
	if (strcmp(argv[1], "list") != 0)
		return isc_cli_usage_error("user", "unknown subcommand '%s'", argv[1]);
	if ((rc = scan("user", argc, argv, 2, NULL, &json, pos, 0, &npos)))
		return rc;
	if ((rc = isc_client_json_all_pages(cli, "/v1/users", &reply)))
		return rc;
	return isc_cli_print_listing(reply, json, &users);
}

/* ---- isc member ---- */

static void member_row(json_t *m, const char **cells, char (*buf)[ISC_TABLE_CELL])
{
	(void)buf;
	cells[0] = isc_json_str(m, "org");
	cells[1] = isc_json_str(m, "user");
	cells[2] = isc_json_str(m, "role");
}

int cmd_member(struct isc_cli *cli, int argc, char **argv)
{
	static const char *const headers[] = {"ORG", "USER", "ROLE"};
	static const struct isc_table_spec members = {3, headers, NULL, member_row, NULL};
	const char *org = NULL, *role = NULL, *pos[1];
	const struct opt opts[] = {{"org", &org}, {"role", &role}, {NULL, NULL}};
	int json = 0, npos, rc;
	json_t *reply = NULL;
	char *path;

	if (argc < 2 || isc_cli_wants_help(argc, argv)) {
		printf("usage: isc member add --org ORG NAME --role member|admin|finance\n"
		       "       isc member list --org ORG [--json]\n"
		       "       isc member remove --org ORG NAME\n\n"
		       "An organisation's members and their roles (its admins, and the operator).\n"
		       "member: launch into the org's projects, see and cancel their own\n"
		       "experiments; admin: everything in the org; finance: spend, credits and\n"
		       "budgets, read only. add on an existing member changes the role.\n");
		return argc < 2 ? ISC_EXIT_USAGE : ISC_EXIT_OK;
	}
	if ((rc = scan("member", argc, argv, 2, opts, &json, pos, 1, &npos)))
		return rc;
	if (!org)
		return isc_cli_usage_error("member", "--org ORG is required");
	if (strcmp(argv[1], "add") == 0) {
		if (npos != 1 || !role)
			return isc_cli_usage_error(
			    "member",
			    "usage: isc member add --org ORG NAME --role member|admin|finance");
		if (strcmp(role, "member") && strcmp(role, "admin") && strcmp(role, "finance"))
			return isc_cli_usage_error(
			    "member", "--role: '%s' is not member, admin or finance", role);
		if ((rc = isc_client_json(
		         cli, "POST", "/v1/members",
		         json_pack("{s:s,s:s,s:s}", "org", org, "user", pos[0], "role", role),
		         NULL)))
			return rc;
		printf("%s is %s of %s\n", pos[0], role, org);
		return ISC_EXIT_OK;
	}
	if (strcmp(argv[1], "remove") == 0) {
		if (npos != 1)
			return isc_cli_usage_error("member",
			                           "usage: isc member remove --org ORG NAME");
		if (!(path = strdup("/v1/members")) || isc_client_query_add(&path, "org", org) ||
		    isc_client_query_add(&path, "user", pos[0])) {
			free(path);
			return ISC_EXIT_FAIL;
		}
		rc = isc_client_json(cli, "DELETE", path, NULL, NULL);
		free(path);
		if (!rc)
			printf("%s is no longer a member of %s\n", pos[0], org);
		return rc;
	}
	if (strcmp(argv[1], "list") != 0)
		return isc_cli_usage_error("member", "unknown subcommand '%s'", argv[1]);
	if (npos)
		return isc_cli_usage_error("member", "unexpected argument '%s'", pos[0]);
	if (!(path = strdup("/v1/members")) || isc_client_query_add(&path, "org", org)) {
		free(path);
		return ISC_EXIT_FAIL;
	}
	rc = isc_client_json_all_pages(cli, path, &reply);
	free(path);
	if (rc)
		return rc;
	return isc_cli_print_listing(reply, json, &members);
}

/* ---- isc token ---- */

/* "30d", "12h", "90m", "3600s" or plain seconds -> seconds; -1 when malformed. */
static long long parse_duration(const char *text)
{
	char *end;
	long long n = strtoll(text, &end, 10), mul = 1;
	if (end == text || n <= 0)
		return -1;
	if (*end == 'd')
		mul = 86400;
	else if (*end == 'h')
		mul = 3600;
	else if (*end == 'm')
		mul = 60;
	else if (*end == 's' || *end == 0)
		mul = 1;
	else
		return -1;
	if (*end && end[1])
		return -1;
	if (n > 10LL * 365 * 86400 / mul)
		return -1;
	return n * mul;
}

static void token_row(json_t *t, const char **cells, char (*buf)[ISC_TABLE_CELL])
{
	json_t *expires = json_object_get(t, "expires_at_ms");
	cells[0] = isc_json_str(t, "id");
	cells[1] = isc_json_str(t, "user");
	cells[2] = isc_json_when(json_object_get(t, "created_at_ms"), buf[2], ISC_TABLE_CELL);
	cells[3] =
	    json_is_integer(expires) ? isc_json_when(expires, buf[3], ISC_TABLE_CELL) : "never";
	cells[4] = isc_json_when(json_object_get(t, "revoked_at_ms"), buf[4], ISC_TABLE_CELL);
	/* The token it was made with over TCP ("-": made over the Unix socket). */
	cells[5] = json_is_string(json_object_get(t, "parent")) ? isc_json_str(t, "parent") : "-";
}

int cmd_token(struct isc_cli *cli, int argc, char **argv)
{
	static const char *const headers[] = {
	    "ID", "USER", "CREATED (UTC)", "EXPIRES (UTC)", "REVOKED (UTC)", "PARENT"};
	static const struct isc_table_spec tokens = {6, headers, NULL, token_row, NULL};
	const char *expires = NULL, *pos[1];
	const struct opt opts[] = {{"expires", &expires}, {NULL, NULL}};
	int json = 0, npos, rc;
	json_t *reply = NULL;

	if (argc < 2 || isc_cli_wants_help(argc, argv)) {
		printf("usage: isc token create [--expires D]\n       isc token list [--json]\n"
		       "       isc token revoke ID\n\n"
		       "Bearer tokens for reaching iscd over TCP (ISC_API_URL + ISC_TOKEN).\n"
		       "create prints the token once: iscd keeps only its SHA-256. D is a\n"
		       "duration: 30d, 12h, 90m or seconds; without it the token does not\n"
		       "expire, which only the Unix socket may ask for. A token made over TCP\n"
		       "is made with the token of that call (its PARENT): it needs --expires,\n"
		       "ends no later than its parent, and is revoked with it. A token acts\n"
		       "as the user who created it.\n");
		return argc < 2 ? ISC_EXIT_USAGE : ISC_EXIT_OK;
	}
	if ((rc = scan("token", argc, argv, 2, opts, &json, pos, 1, &npos)))
		return rc;
	if (strcmp(argv[1], "create") == 0) {
		/* iscd names the body's field; isc create's user gave --expires. */
		static const char *const words[] = {
		    "expires_in_s: a number of seconds up to 10 years",
		    "--expires: a duration up to 10 years (3650d)",
		    "expires_in_s is required",
		    "--expires is required",
		    "expires_in_s",
		    "--expires",
		    NULL};
		json_t *body = json_object();
		long long secs = 0;
		cli->words = words;
		if (npos)
			return isc_cli_usage_error("token", "unexpected argument '%s'", pos[0]);
		if (expires && (secs = parse_duration(expires)) < 0) {
			json_decref(body);
			return isc_cli_usage_error(
			    "token", "--expires: '%s' is not a duration such as 30d, 12h or 90m",
			    expires);
		}
		if (secs)
			json_object_set_new(body, "expires_in_s", json_integer(secs));
		/* The reply carries the new token: it travels only where a secret may. */
		if ((rc = isc_client_secret_json(cli,
		                                 "a request for a new token (the reply carries it)",
		                                 "POST", "/v1/tokens", body, 201, &reply)))
			return rc;
		if (json) {
			isc_json_print(reply, stdout);
		} else {
			char w[32];
			printf("%s\n", isc_json_str(reply, "token"));
			fprintf(stderr,
			        "token %s for %s, expires %s%s: shown once, keep it secret "
			        "(ISC_TOKEN)\n",
			        isc_json_str(reply, "id"), isc_json_str(reply, "user"),
			        json_is_integer(json_object_get(reply, "expires_at_ms"))
			            ? isc_json_when(json_object_get(reply, "expires_at_ms"), w,
			                            sizeof(w))
			            : "never",
			        json_is_true(json_object_get(reply, "expiry_cut_to_parent"))
			            ? " (with the token it was made with, which ends then)"
			            : "");
		}
		json_decref(reply);
		return ISC_EXIT_OK;
	}
	if (strcmp(argv[1], "revoke") == 0) {
		char *path = NULL;
		if (npos != 1)
			return isc_cli_usage_error("token", "usage: isc token revoke ID");
		if (strchr(pos[0], '.') || strchr(pos[0], '/'))
			return isc_cli_usage_error("token",
			                           "give the token's ID (tok_...), not the "
			                           "token itself");
		if (asprintf(&path, "/v1/tokens/%s", pos[0]) < 0)
			return ISC_EXIT_FAIL;
		rc = isc_client_json(cli, "DELETE", path, NULL, &reply);
		free(path);
		if (!rc) {
			json_int_t with =
			    json_integer_value(json_object_get(reply, "revoked_with_it"));
			if (with)
				printf("token %s revoked, and %" JSON_INTEGER_FORMAT
				       " token(s) made with it\n",
				       pos[0], with);
			else
				printf("token %s revoked\n", pos[0]);
		}
		json_decref(reply);
		return rc;
	}
	if (strcmp(argv[1], "list") != 0)
		return isc_cli_usage_error("token", "unknown subcommand '%s'", argv[1]);
	if (npos)
		return isc_cli_usage_error("token", "unexpected argument '%s'", pos[0]);
	if ((rc = isc_client_json_all_pages(cli, "/v1/tokens", &reply)))
		return rc;
	return isc_cli_print_listing(reply, json, &tokens);
}

/* ---- isc audit ---- */

/* A missing org or target prints as "-" (a change of the platform, not of one org). */
static const char *or_dash(const char *s)
{
	return s[0] ? s : "-";
}

static void audit_row(json_t *a, const char **cells, char (*buf)[ISC_TABLE_CELL])
{
	cells[0] = isc_json_when(json_object_get(a, "at_ms"), buf[0], ISC_TABLE_CELL);
	cells[1] = isc_json_str(a, "actor");
	cells[2] = isc_json_str(a, "address");
	cells[3] = or_dash(isc_json_str(a, "org"));
	cells[4] = isc_json_str(a, "action");
	cells[5] = or_dash(isc_json_str(a, "target"));
	snprintf(buf[6], ISC_TABLE_CELL, "%lld",
	         (long long)json_integer_value(json_object_get(a, "status")));
	cells[6] = buf[6];
}

int cmd_audit(struct isc_cli *cli, int argc, char **argv)
{
	static const char *const headers[] = {"WHEN (UTC)", "WHO",    "FROM",  "ORG",
	                                      "ACTION",     "TARGET", "STATUS"};
	static const struct isc_table_spec audit = {7, headers, "llllllr", audit_row, NULL};
	const char *org = NULL, *limit = NULL, *pos[1];
	const struct opt opts[] = {{"org", &org}, {"limit", &limit}, {NULL, NULL}};
	int json = 0, npos, rc;
	json_t *reply = NULL;
	char *path;

	if (isc_cli_wants_help(argc, argv)) {
		printf("usage: isc audit [--org ORG] [--limit N] [--json]\n\n"
		       "Every change made through iscd's API, newest first: who, when, from which\n"
		       "address, what, on what, and the answer. An organisation's admins read its\n"
		       "rows (--org); the operator reads every row.\n");
		return ISC_EXIT_OK;
	}
	if ((rc = scan("audit", argc, argv, 1, opts, &json, pos, 0, &npos)))
		return rc;
	/* iscd's words for the query are this command's flags. */
	static const char *const words[] = {"(org=)", "(--org ORG)", "limit: ", "--limit: ", NULL};
	cli->words = words;
	if (!(path = strdup("/v1/audit")) || isc_client_query_add(&path, "org", org) ||
	    isc_client_query_add(&path, "limit", limit)) {
		free(path);
		return ISC_EXIT_FAIL;
	}
	rc = isc_client_json(cli, "GET", path, NULL, &reply);
	free(path);
	if (rc)
		return rc;
	return isc_cli_print_listing(reply, json, &audit);
}
