/*
 * isc credits (grant, show) and isc spend: the finance side of the command
 * line. Amounts are typed and printed in dollars but parsed and summed as
 * integer micro-dollars (credits/money.h), so what is shown is exact.
 */
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/lib/table.h"
#include "common/buf.h"
#include "credits/money.h"
#include "credits/spend_format.h"
#include "common/model.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * A small option scanner shared by these commands: "--name VALUE",
 * "--name=VALUE" and bare flags. Words that start with '-' followed by a digit
 * or '.' are positional, so "-5" reaches the amount parser and is reported as
 * negative rather than as an unknown option.
 */
struct opt {
	const char *name;   /* without the dashes */
	const char **value; /* NULL for a flag */
	int *flag;
};

static int scan_args(const char *cmd, int argc, char **argv, int first, const struct opt *opts,
                     const char **pos, int max_pos, int *npos)
{
	int only_pos = 0;

	*npos = 0;
	for (int i = first; i < argc; i++) {
		const char *a = argv[i];
		const struct opt *o = NULL;
		const char *eq;
		size_t len;

		if (!only_pos && strcmp(a, "--") == 0) {
			only_pos = 1;
			continue;
		}
		if (only_pos || a[0] != '-' || (a[1] >= '0' && a[1] <= '9') || a[1] == '.' ||
		    !a[1]) {
			if (*npos >= max_pos)
				return isc_cli_usage_error(cmd, "unexpected argument '%s'", a);
			pos[(*npos)++] = a;
			continue;
		}
		if (a[1] != '-')
			return isc_cli_usage_error(cmd, "unknown option '%s'", a);
		eq = strchr(a + 2, '=');
		len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
		for (const struct opt *p = opts; p->name; p++)
			if (strlen(p->name) == len && strncmp(p->name, a + 2, len) == 0)
				o = p;
		if (!o)
			return isc_cli_usage_error(cmd, "unknown option '%s'", a);
		if (!o->value) {
			if (eq)
				return isc_cli_usage_error(cmd, "option --%s takes no value",
				                           o->name);
			*o->flag = 1;
		} else if (eq) {
			*o->value = eq + 1;
		} else if (i + 1 < argc) {
			*o->value = argv[++i];
		} else {
			return isc_cli_usage_error(cmd, "option --%s needs a value", o->name);
		}
	}
	return 0;
}

static int credits_grant(struct isc_cli *cli, int argc, char **argv)
{
	const char *org = NULL, *note = NULL, *pos[1];
	const struct opt opts[] = {{"org", &org, NULL}, {"note", &note, NULL}, {NULL, NULL, NULL}};
	struct isc_err err;
	json_t *body, *reply = NULL;
	int64_t micros;
	char a[48], b[48], c[48];
	int npos, rc;

	if ((rc = scan_args("credits", argc, argv, 2, opts, pos, 1, &npos)))
		return rc;
	if (!org)
		return isc_cli_usage_error("credits", "--org ORG is required");
	if (npos != 1)
		return isc_cli_usage_error(
		    "credits", "usage: isc credits grant --org ORG AMOUNT [--note TEXT]");
	isc_err_clear(&err);
	if (isc_money_parse(pos[0], &micros, &err))
		return isc_cli_fail(&err);
	if (micros == 0) {
		isc_cli_errorf("a grant must be more than $0");
		return ISC_EXIT_FAIL;
	}
	if (note && strlen(note) > 500) {
		isc_cli_errorf("the note is longer than 500 characters");
		return ISC_EXIT_FAIL;
	}
	body = json_pack("{s:s,s:I}", "org", org, "amount_micros", (json_int_t)micros);
	if (note)
		json_object_set_new(body, "note", json_string(note));
	if ((rc = isc_client_json(cli, "POST", "/v1/credits/grants", body, &reply)))
		return rc;
	printf("granted %s to %s; balance %s, available %s\n",
	       isc_money_dollars(micros, a, sizeof(a)), org,
	       isc_json_dollars(reply, "balance_micros", b, sizeof(b)),
	       isc_json_dollars(reply, "available_micros", c, sizeof(c)));
	json_decref(reply);
	return ISC_EXIT_OK;
}

static void credits_row(json_t *o, const char **cells, char (*buf)[ISC_TABLE_CELL])
{
	static const char *const key[] = {NULL, "balance_micros", "reserved_micros",
	                                  "available_micros"};
	cells[0] = isc_json_str(o, "org");
	for (size_t c = 1; c < 4; c++)
		cells[c] = isc_json_dollars(o, key[c], buf[c], ISC_TABLE_CELL);
}

static int credits_show(struct isc_cli *cli, int argc, char **argv)
{
	static const char *const headers[] = {"ORG", "BALANCE", "RESERVED", "AVAILABLE"};
	static const struct isc_table_spec orgs = {
	    4, headers, "lrrr", credits_row,
	    "isc credits: no organisations yet (isc org add NAME)"};
	const char *org = NULL, *pos[1];
	int json = 0, npos, rc;
	const struct opt opts[] = {{"org", &org, NULL}, {"json", NULL, &json}, {NULL, NULL, NULL}};
	json_t *reply = NULL;
	char *path;

	if ((rc = scan_args("credits", argc, argv, 2, opts, pos, 0, &npos)))
		return rc;
	if (!(path = strdup("/v1/credits")) || isc_client_query_add(&path, "org", org)) {
		free(path);
		return ISC_EXIT_FAIL;
	}
	rc = isc_client_json(cli, "GET", path, NULL, &reply);
	free(path);
	if (rc)
		return rc;
	if (json) {
		isc_json_print(reply, stdout);
	} else if (isc_table_print_rows(&orgs, json_object_get(reply, "orgs"), stdout)) {
		isc_cli_errorf("out of memory");
		rc = ISC_EXIT_FAIL;
	}
	json_decref(reply);
	return rc;
}

int cmd_credits(struct isc_cli *cli, int argc, char **argv)
{
	if (argc < 2 || isc_cli_wants_help(argc, argv)) {
		printf("usage: isc credits grant --org ORG AMOUNT [--note TEXT]\n"
		       "       isc credits show [--org ORG] [--json]\n\n"
		       "AMOUNT is in dollars with up to 6 decimals (1500, 12.50, 0.000001).\n"
		       "show prints each organisation's balance (grants + refunds + adjustments\n"
		       "- charges), what running bursts hold (reserved), and what is available.\n"
		       "--json gives integer micro-dollars and exact decimal strings.\n");
		return argc < 2 ? ISC_EXIT_USAGE : ISC_EXIT_OK;
	}
	if (strcmp(argv[1], "grant") == 0)
		return credits_grant(cli, argc, argv);
	if (strcmp(argv[1], "show") == 0)
		return credits_show(cli, argc, argv);
	return isc_cli_usage_error("credits", "unknown subcommand '%s'", argv[1]);
}

/*
 * The spend report as a table, drawn by cli/lib/table.c from the JSON form (so
 * names pad by display width like every other table): an ID column for projects
 * and experiments, the key, the amount with its 6 places, and a TOTAL row.
 */
static int spend_table(json_t *report, const char *by, FILE *out)
{
	static const char *const with_id[] = {"ID", NULL, "AMOUNT (USD)"};
	const char *headers[3], *cells[3];
	char key_head[32];
	int has_id = strcmp(by, "project") == 0 || strcmp(by, "experiment") == 0;
	size_t i, first = has_id ? 0 : 1;
	struct isc_table *t;
	json_t *row;
	int rc = 0;

	snprintf(key_head, sizeof(key_head), "%s", strcmp(by, "day") == 0 ? "day (utc)" : by);
	for (char *p = key_head; *p; p++)
		if (*p >= 'a' && *p <= 'z')
			*p = (char)(*p - 'a' + 'A');
	memcpy(headers, with_id, sizeof(headers));
	headers[1] = key_head;
	if (!(t = isc_table_new(3 - first, headers + first)))
		return -1;
	isc_table_align_right(t, 2 - first);
	json_array_foreach(json_object_get(report, "rows"), i, row)
	{
		cells[0] = json_string_value(json_object_get(row, "id"));
		cells[1] = isc_json_str(row, "key");
		cells[2] = isc_json_str(row, "amount");
		if ((rc = isc_table_add(t, cells + first)))
			break;
	}
	cells[0] = "TOTAL";
	cells[1] = has_id ? "" : "TOTAL";
	cells[2] = isc_json_str(report, "total");
	if (!rc && !(rc = isc_table_add(t, cells + first)))
		isc_table_print(t, out);
	isc_table_free(t);
	return rc;
}

int cmd_spend(struct isc_cli *cli, int argc, char **argv)
{
	const char *org = NULL, *project = NULL, *from = NULL, *to = NULL, *by = "project";
	const char *format = "table", *billing = "credits", *pos[1];
	int json = 0;
	const struct opt opts[] = {
	    {"org", &org, NULL},         {"project", &project, NULL}, {"from", &from, NULL},
	    {"to", &to, NULL},           {"by", &by, NULL},           {"format", &format, NULL},
	    {"billing", &billing, NULL}, {"json", NULL, &json},       {NULL, NULL, NULL}};
	enum isc_spend_by q_by;
	enum isc_spend_format fmt;
	struct isc_reply r;
	struct isc_err err;
	int64_t from_ms = 0, to_ms = 0;
	char *path;
	int npos, rc;

	if (isc_cli_wants_help(argc, argv)) {
		printf(
		    "usage: isc spend [--org ORG] [--project P] [--from DATE] [--to DATE]\n"
		    "                 [--by project|experiment|provider|shape|day]\n"
		    "                 [--format table|csv|json] [--json] [--billing "
		    "credits|byo|all]\n\n"
		    "Sums the charges in the ledger, grouped as asked (default: project), with a\n"
		    "total. DATE is YYYY-MM-DD in UTC: --from counts from 00:00 of that day,\n"
		    "--to through 23:59:59.999 of that day. A charge belongs to the day its\n"
		    "period starts. --billing credits (the default) reports what was paid with\n"
		    "credits; byo what ran on organisations' own cloud keys; all both.\n"
		    "csv: RFC 4180 with CRLF line ends, a header row, amount (6 decimals) and\n"
		    "amount_micros columns, and a last row whose key is TOTAL.\n"
		    "json: "
		    "{\"rows\":[{\"key\",\"amount_micros\",\"amount\"}],\"total_micros\",\"total\"}"
		    "\n(--json is --format json, as for every other command).\n");
		return ISC_EXIT_OK;
	}
	if ((rc = scan_args("spend", argc, argv, 1, opts, pos, 0, &npos)))
		return rc;
	if (json && strcmp(format, "table") != 0 && strcmp(format, "json") != 0)
		return isc_cli_usage_error(
		    "spend", "--json and --format %s are two formats: use one", format);
	if (json)
		format = "json";
	isc_err_clear(&err);
	if (isc_spend_by_parse(by, &q_by, &err) || isc_spend_format_parse(format, &fmt, &err))
		return isc_cli_usage_error("spend", "%s", err.msg);
	if (strcmp(billing, "all") != 0 && strcmp(billing, "credits") != 0 &&
	    strcmp(billing, "byo") != 0)
		return isc_cli_usage_error("spend", "unknown billing '%s': use credits, byo or all",
		                           billing);
	/* Dates are checked here too, so a typo is named before any request. */
	if (from && isc_date_parse(from, &from_ms, &err))
		return isc_cli_fail(&err);
	if (to && isc_date_parse(to, &to_ms, &err))
		return isc_cli_fail(&err);
	if (from && to && from_ms > to_ms + ISC_MS_PER_DAY - 1) {
		isc_cli_errorf("--from %s is after --to %s", from, to);
		return ISC_EXIT_FAIL;
	}
	if (!(path = strdup("/v1/spend")) || isc_client_query_add(&path, "org", org) ||
	    isc_client_query_add(&path, "project", project) ||
	    isc_client_query_add(&path, "from", from) || isc_client_query_add(&path, "to", to) ||
	    isc_client_query_add(&path, "by", by) ||
	    /* A table is drawn here from the JSON form (cli/lib/table.c). */
	    isc_client_query_add(&path, "format", fmt == ISC_SPEND_TABLE ? "json" : format) ||
	    isc_client_query_add(&path, "billing", billing)) {
		free(path);
		return ISC_EXIT_FAIL;
	}
	rc = isc_client_request(cli, "GET", path, NULL, 0, &r);
	free(path);
	if (rc)
		return rc;
	if (r.status != 200) {
		rc = isc_client_fail(&r);
	} else if (fmt == ISC_SPEND_TABLE) {
		json_t *report = json_loadb(r.body, r.len, 0, NULL);
		if (!report || spend_table(report, by, stdout)) {
			isc_cli_errorf("iscd's spend report could not be read");
			rc = ISC_EXIT_FAIL;
		}
		json_decref(report);
	} else {
		fwrite(r.body, 1, r.len, stdout);
	}
	if (!rc && r.status == 200) {
		if (r.rows == 0)
			fprintf(stderr,
			        "isc spend: no charges match%s%s%s%s%s%s%s%s (billing %s)\n",
			        org ? " --org " : "", org ? org : "", project ? " --project " : "",
			        project ? project : "", from ? " --from " : "", from ? from : "",
			        to ? " --to " : "", to ? to : "", billing);
	}
	isc_reply_cleanup(&r);
	return rc;
}
