/*
 * isc credits (grant, show) and isc spend: the finance side of the command
 * line. Amounts are typed and printed in dollars but parsed and summed as
 * integer micro-dollars (credits/money.h), so what is shown is exact.
 */
#include "cli/commands.h"
#include "common/buf.h"
#include "credits/credits.h"
#include "credits/spend.h"
#include "store/store_ledger.h"

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

static const char *dollars(int64_t micros, char *buf, size_t size)
{
	char tmp[40];
	snprintf(buf, size, "%s$%s", micros < 0 ? "-" : "",
	         isc_money_format(micros < 0 ? -micros : micros, 2, tmp, sizeof(tmp)));
	return buf;
}

static int credits_grant(struct isc_cli *cli, int argc, char **argv)
{
	const char *org = NULL, *note = NULL, *pos[1];
	const struct opt opts[] = {{"org", &org, NULL}, {"note", &note, NULL}, {NULL, NULL, NULL}};
	struct isc_credit_balance bal;
	struct isc_store *s;
	struct isc_err err;
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
	if ((rc = isc_cli_store_open(cli, 0, &s)))
		return rc;
	rc = isc_credits_grant(s, org, micros, note, &err);
	if (!rc)
		rc = isc_credits_balance(s, org, &bal, &err);
	isc_store_free(s);
	if (rc)
		return isc_cli_fail(&err);
	printf("granted %s to %s; balance %s, available %s\n", dollars(micros, a, sizeof(a)), org,
	       dollars(bal.balance_micros, b, sizeof(b)),
	       dollars(bal.available_micros, c, sizeof(c)));
	return ISC_EXIT_OK;
}

static json_t *money_pair(json_t *o, const char *name, int64_t micros)
{
	char key[48], text[40];
	snprintf(key, sizeof(key), "%s_micros", name);
	json_object_set_new(o, key, json_integer(micros));
	json_object_set_new(o, name, json_string(isc_money_format(micros, 6, text, sizeof(text))));
	return o;
}

static int credits_show(struct isc_cli *cli, int argc, char **argv)
{
	const char *org = NULL, *pos[1];
	int json = 0, npos, rc;
	const struct opt opts[] = {{"org", &org, NULL}, {"json", NULL, &json}, {NULL, NULL, NULL}};
	struct isc_credit_balance *bal = NULL;
	struct isc_org *orgs = NULL;
	struct isc_store *s;
	struct isc_err err;
	size_t n = 0;

	if ((rc = scan_args("credits", argc, argv, 2, opts, pos, 0, &npos)))
		return rc;
	if ((rc = isc_cli_store_open(cli, 0, &s)))
		return rc;
	isc_err_clear(&err);
	if (org) {
		orgs = calloc(1, sizeof(*orgs));
		if (!orgs)
			rc = isc_err_set(&err, ISC_ENOMEM, "out of memory");
		else if (!(rc = isc_store_org_find(s, org, &orgs[0], &err)))
			n = 1;
	} else {
		rc = isc_store_org_list(s, &orgs, &n, &err);
	}
	if (!rc && n && !(bal = calloc(n, sizeof(*bal))))
		rc = isc_err_set(&err, ISC_ENOMEM, "out of memory");
	for (size_t i = 0; !rc && i < n; i++)
		rc = isc_credits_balance(s, orgs[i].name, &bal[i], &err);
	isc_store_free(s);
	if (rc) {
		isc_org_list_free(orgs, n);
		free(bal);
		return isc_cli_fail(&err);
	}
	if (json) {
		json_t *root = json_object(), *arr = json_array();
		for (size_t i = 0; i < n; i++) {
			json_t *o = json_pack("{s:s}", "org", orgs[i].name);
			money_pair(o, "balance", bal[i].balance_micros);
			money_pair(o, "reserved", bal[i].reserved_micros);
			money_pair(o, "available", bal[i].available_micros);
			json_array_append_new(arr, o);
		}
		json_object_set_new(root, "orgs", arr);
		json_dumpf(root, stdout, JSON_INDENT(2));
		putchar('\n');
		json_decref(root);
	} else {
		char a[48], b[48], c[48];
		if (n == 0)
			fprintf(stderr, "isc credits: no organisations yet (isc org add NAME)\n");
		printf("%-24s %16s %16s %16s\n", "ORG", "BALANCE", "RESERVED", "AVAILABLE");
		for (size_t i = 0; i < n; i++)
			printf("%-24s %16s %16s %16s\n", orgs[i].name,
			       dollars(bal[i].balance_micros, a, sizeof(a)),
			       dollars(bal[i].reserved_micros, b, sizeof(b)),
			       dollars(bal[i].available_micros, c, sizeof(c)));
	}
	isc_org_list_free(orgs, n);
	free(bal);
	return ISC_EXIT_OK;
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

/* Finds the project by id or name (within org when given); fills *id (owned). */
static int spend_project(struct isc_store *s, const char *org, const char *project, char **id,
                         struct isc_err *err)
{
	struct isc_project *list = NULL;
	size_t n = 0, matches = 0;
	int rc = isc_store_project_list(s, org, &list, &n, err);

	if (rc)
		return rc;
	for (size_t i = 0; i < n; i++)
		if (strcmp(list[i].id, project) == 0) {
			matches = 1;
			free(*id);
			*id = strdup(list[i].id);
			break;
		} else if (strcmp(list[i].name, project) == 0) {
			matches++;
			free(*id);
			*id = strdup(list[i].id);
		}
	isc_project_list_free(list, n);
	if (matches == 0)
		return org ? isc_err_set(err, ISC_ENOTFOUND,
		                         "organisation '%s' has no project '%s'", org, project)
		           : isc_err_set(err, ISC_ENOTFOUND, "no project with id or name '%s'",
		                         project);
	if (matches > 1)
		return isc_err_set(err, ISC_EINVALID,
		                   "%zu projects are named '%s': add --org or use the project id",
		                   matches, project);
	return *id ? 0 : isc_err_set(err, ISC_ENOMEM, "out of memory");
}

int cmd_spend(struct isc_cli *cli, int argc, char **argv)
{
	const char *org = NULL, *project = NULL, *from = NULL, *to = NULL, *by = "project";
	const char *format = "table", *billing = "credits", *pos[1];
	const struct opt opts[] = {{"org", &org, NULL},         {"project", &project, NULL},
	                           {"from", &from, NULL},       {"to", &to, NULL},
	                           {"by", &by, NULL},           {"format", &format, NULL},
	                           {"billing", &billing, NULL}, {NULL, NULL, NULL}};
	struct isc_spend_query q = {0};
	enum isc_spend_format fmt;
	struct isc_spend_row *rows = NULL;
	struct isc_store *s;
	struct isc_buf out;
	struct isc_err err;
	char *project_id = NULL;
	size_t n = 0;
	int npos, rc;

	if (isc_cli_wants_help(argc, argv)) {
		printf(
		    "usage: isc spend [--org ORG] [--project P] [--from DATE] [--to DATE]\n"
		    "                 [--by project|experiment|provider|shape|day]\n"
		    "                 [--format table|csv|json] [--billing credits|byo|all]\n\n"
		    "Sums the charges in the ledger, grouped as asked (default: project), with a\n"
		    "total. DATE is YYYY-MM-DD in UTC: --from counts from 00:00 of that day,\n"
		    "--to through 23:59:59.999 of that day. A charge belongs to the day its\n"
		    "period starts. --billing credits (the default) reports what was paid with\n"
		    "credits; byo what ran on organisations' own cloud keys; all both.\n"
		    "csv: RFC 4180 with CRLF line ends, a header row, amount (6 decimals) and\n"
		    "amount_micros columns, and a last row whose key is TOTAL.\n"
		    "json: "
		    "{\"rows\":[{\"key\",\"amount_micros\",\"amount\"}],\"total_micros\",\"total\"}"
		    ".\n");
		return ISC_EXIT_OK;
	}
	if ((rc = scan_args("spend", argc, argv, 1, opts, pos, 0, &npos)))
		return rc;
	isc_err_clear(&err);
	if (isc_spend_by_parse(by, &q.by, &err) || isc_spend_format_parse(format, &fmt, &err))
		return isc_cli_usage_error("spend", "%s", err.msg);
	if (strcmp(billing, "all") == 0)
		q.billing = NULL;
	else if (strcmp(billing, "credits") == 0 || strcmp(billing, "byo") == 0)
		q.billing = billing;
	else
		return isc_cli_usage_error("spend", "unknown billing '%s': use credits, byo or all",
		                           billing);
	if (from) {
		if (isc_date_parse(from, &q.from_ms, &err))
			return isc_cli_fail(&err);
		q.has_from = 1;
	}
	if (to) {
		if (isc_date_parse(to, &q.to_ms, &err))
			return isc_cli_fail(&err);
		q.to_ms += ISC_MS_PER_DAY - 1;
		q.has_to = 1;
	}
	if (from && to && q.from_ms > q.to_ms) {
		isc_cli_errorf("--from %s is after --to %s", from, to);
		return ISC_EXIT_FAIL;
	}
	if ((rc = isc_cli_store_open(cli, 0, &s)))
		return rc;
	q.org_name = org;
	if (org) {
		struct isc_org o;
		if (!(rc = isc_store_org_find(s, org, &o, &err)))
			isc_org_cleanup(&o);
	}
	if (!rc && project && !(rc = spend_project(s, org, project, &project_id, &err)))
		q.project = project_id;
	if (!rc)
		rc = isc_store_ledger_spend(s, &q, &rows, &n, &err);
	isc_store_free(s);
	isc_buf_init(&out, 0);
	if (!rc)
		rc = isc_spend_render(rows, n, q.by, fmt, &out, &err);
	if (!rc)
		fwrite(isc_buf_cstr(&out), 1, out.len, stdout);
	if (!rc && n == 0)
		fprintf(stderr, "isc spend: no charges match%s%s%s%s%s%s%s%s (billing %s)\n",
		        org ? " --org " : "", org ? org : "", project ? " --project " : "",
		        project ? project : "", from ? " --from " : "", from ? from : "",
		        to ? " --to " : "", to ? to : "", billing);
	isc_buf_cleanup(&out);
	isc_spend_rows_free(rows, n);
	free(project_id);
	return rc ? isc_cli_fail(&err) : ISC_EXIT_OK;
}
