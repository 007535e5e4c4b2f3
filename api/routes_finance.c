/*
 * Money: balances (finance and admins of the org, the operator), grants (the
 * operator) and the spend report (finance and admins of the org, the
 * operator), rendered by the server exactly as `isc spend` prints it, so a
 * spreadsheet can pull /v1/spend?...&format=csv with a finance token.
 */
#include "api/api_int.h"
#include "api/json_out.h"
#include "credits/credits.h"
#include "credits/money.h"
#include "credits/spend.h"

#include <stdlib.h>
#include <string.h>

#define MONEY_READERS (ISC_ROLE_ADMIN | ISC_ROLE_FINANCE)

/* GET /v1/credits[?org=O]: balances of the orgs whose money the caller may read. */
static void credits_show(struct isc_api_call *c)
{
	const char *org_name = isc_api_query(c, "org");
	struct isc_org *orgs = NULL;
	struct isc_err err;
	size_t n = 0;
	json_t *arr = json_array();

	isc_err_clear(&err);
	if (org_name) {
		orgs = calloc(1, sizeof(*orgs));
		if (!orgs) {
			isc_api_reply_error(c, 500, "out of memory");
			goto out;
		}
		if (!isc_api_find_org(c, org_name, &orgs[0]))
			goto out;
		n = 1;
		if (!isc_api_require_org_role(c, orgs[0].id, MONEY_READERS, "no such organisation"))
			goto out;
	} else if (isc_store_org_list(c->store, &orgs, &n, &err)) {
		isc_api_reply_err(c, &err);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		struct isc_credit_balance bal;
		json_t *o;
		if (!org_name && !(isc_api_role(c, orgs[i].id) & MONEY_READERS)) {
			if (c->status)
				goto out;
			continue;
		}
		if (isc_credits_balance(c->store, orgs[i].name, &bal, &err)) {
			isc_api_reply_err(c, &err);
			goto out;
		}
		o = json_pack("{s:s}", "org", orgs[i].name);
		isc_json_money(o, "balance", bal.balance_micros);
		isc_json_money(o, "reserved", bal.reserved_micros);
		isc_json_money(o, "available", bal.available_micros);
		json_array_append_new(arr, o);
	}
	isc_api_reply_json(c, 200, json_pack("{s:O}", "orgs", arr));
out:
	json_decref(arr);
	isc_org_list_free(orgs, n);
}

/* POST /v1/credits/grants {"org","amount_micros","note"} (operator). */
static void credits_grant(struct isc_api_call *c)
{
	json_t *body, *amount;
	const char *org_name, *note;
	struct isc_credit_balance bal;
	struct isc_org org = {0};
	struct isc_err err;

	if (!isc_api_require_operator(c) || !(body = isc_api_body_object(c)))
		return;
	org_name = json_string_value(json_object_get(body, "org"));
	note = json_string_value(json_object_get(body, "note"));
	amount = json_object_get(body, "amount_micros");
	isc_err_clear(&err);
	if (!org_name || !json_is_integer(amount)) {
		isc_api_reply_error(c, 400, "org and amount_micros are required");
	} else if (json_integer_value(amount) <= 0) {
		isc_api_reply_error(c, 400, "a grant must be more than $0");
	} else if (note && strlen(note) > 500) {
		isc_api_reply_error(c, 400, "the note is longer than 500 characters");
	} else if (isc_api_find_org(c, org_name, &org)) {
		isc_api_audit_target(c, org.id, org_name);
		if (isc_credits_grant(c->store, org_name, json_integer_value(amount), note, &err) ||
		    isc_credits_balance(c->store, org_name, &bal, &err))
			isc_api_reply_err(c, &err);
		else {
			json_t *o = json_pack("{s:s}", "org", org_name);
			isc_json_money(o, "granted", json_integer_value(amount));
			isc_json_money(o, "balance", bal.balance_micros);
			isc_json_money(o, "available", bal.available_micros);
			isc_api_reply_json(c, 200, o);
		}
		isc_org_cleanup(&org);
	}
	json_decref(body);
}

/*
 * The spend report's scope for a caller who is not the operator: the org
 * named, else the org of the project named, else the one org whose money the
 * caller may read. Fills *org_out (owned) or replies.
 */
static int spend_scope(struct isc_api_call *c, const char *org_name, const char *project,
                       char **org_out)
{
	struct isc_org org = {0};
	struct isc_err err;

	isc_err_clear(&err);
	if (org_name) {
		if (!isc_api_find_org(c, org_name, &org))
			return 0;
		if (!isc_api_require_org_role(c, org.id, MONEY_READERS, "no such organisation")) {
			isc_org_cleanup(&org);
			return 0;
		}
		*org_out = org.name;
		return 1;
	}
	if (project) {
		struct isc_project *list;
		size_t n, found = 0;
		int64_t org_id = 0;
		if (isc_store_project_list(c->store, NULL, &list, &n, &err)) {
			isc_api_reply_err(c, &err);
			return 0;
		}
		for (size_t i = 0; i < n; i++)
			if ((strcmp(list[i].id, project) == 0 ||
			     strcmp(list[i].name, project) == 0) &&
			    (c->is_operator || isc_api_role(c, list[i].org_id) != ISC_ROLE_NONE)) {
				if (found++ == 0) {
					org_id = list[i].org_id;
					*org_out = strdup(list[i].org_name);
				} else if (list[i].org_id != org_id) {
					/* The same name in two of the caller's orgs: --org says
					 * which. */
					free(*org_out);
					*org_out = NULL;
				}
			}
		isc_project_list_free(list, n);
		if (found == 0) {
			isc_api_reply_error(c, 404, "no project with id or name '%s'", project);
			return 0;
		}
		if (!*org_out) {
			isc_api_reply_error(
			    c, 400,
			    "projects named '%s' are in several of your organisations: "
			    "add --org",
			    project);
			return 0;
		}
		if (!isc_api_require_org_role(c, org_id, MONEY_READERS, "no such project")) {
			free(*org_out);
			*org_out = NULL;
			return 0;
		}
		return 1;
	}
	{
		struct isc_membership *m;
		size_t n, readable = 0;
		if (isc_store_member_list(c->store, 0, c->user_id, &m, &n, &err)) {
			isc_api_reply_err(c, &err);
			return 0;
		}
		for (size_t i = 0; i < n; i++)
			if (m[i].role & MONEY_READERS) {
				if (readable++ == 0)
					*org_out = strdup(m[i].org_name);
			}
		isc_membership_list_free(m, n);
		if (readable == 1 && *org_out)
			return 1;
		free(*org_out);
		*org_out = NULL;
		if (readable == 0)
			isc_api_reply_error(c, 403,
			                    "you read spend as finance or admin of an "
			                    "organisation, and you are neither anywhere");
		else
			isc_api_reply_error(
			    c, 400, "you read spend in %zu organisations: add --org", readable);
		return 0;
	}
}

/*
 * GET /v1/spend?org=&project=&from=&to=&by=&format=table|csv|json&billing=: the
 * report `isc spend` prints, as text/plain, text/csv or application/json.
 */
static void spend(struct isc_api_call *c)
{
	const char *org = isc_api_query(c, "org"), *project = isc_api_query(c, "project");
	const char *from = isc_api_query(c, "from"), *to = isc_api_query(c, "to");
	const char *by = isc_api_query(c, "by"), *format = isc_api_query(c, "format");
	const char *billing = isc_api_query(c, "billing");
	struct isc_spend_query q = {0};
	enum isc_spend_format fmt;
	struct isc_spend_row *rows = NULL;
	struct isc_buf out;
	struct isc_err err;
	char *scope_org = NULL, *project_id = NULL;
	size_t n = 0;

	isc_err_clear(&err);
	if (isc_spend_by_parse(by ? by : "project", &q.by, &err) ||
	    isc_spend_format_parse(format ? format : "table", &fmt, &err)) {
		isc_api_reply_err(c, &err);
		return;
	}
	if (!billing || strcmp(billing, "credits") == 0)
		q.billing = "credits";
	else if (strcmp(billing, "byo") == 0)
		q.billing = "byo";
	else if (strcmp(billing, "all") == 0)
		q.billing = NULL;
	else {
		isc_api_reply_error(c, 400, "unknown billing '%s': use credits, byo or all",
		                    billing);
		return;
	}
	if (from) {
		if (isc_date_parse(from, &q.from_ms, &err)) {
			isc_api_reply_err(c, &err);
			return;
		}
		q.has_from = 1;
	}
	if (to) {
		if (isc_date_parse(to, &q.to_ms, &err)) {
			isc_api_reply_err(c, &err);
			return;
		}
		q.to_ms += ISC_MS_PER_DAY - 1;
		q.has_to = 1;
	}
	if (from && to && q.from_ms > q.to_ms) {
		isc_api_reply_error(c, 400, "--from %s is after --to %s", from, to);
		return;
	}
	if (c->is_operator) {
		if (org) {
			struct isc_org o;
			if (isc_store_org_find(c->store, org, &o, &err)) {
				isc_api_reply_err(c, &err);
				return;
			}
			isc_org_cleanup(&o);
			scope_org = strdup(org);
		}
	} else if (!spend_scope(c, org, project, &scope_org)) {
		return;
	}
	q.org_name = scope_org;
	if (project) {
		/* The project by id or name, within the scope's org when there is one. */
		struct isc_project *list;
		size_t np, matches = 0;
		if (isc_store_project_list(c->store, scope_org, &list, &np, &err)) {
			isc_api_reply_err(c, &err);
			goto out;
		}
		for (size_t i = 0; i < np; i++)
			if (strcmp(list[i].id, project) == 0) {
				free(project_id);
				project_id = strdup(list[i].id);
				matches = 1;
				break;
			} else if (strcmp(list[i].name, project) == 0) {
				matches++;
				free(project_id);
				project_id = strdup(list[i].id);
			}
		isc_project_list_free(list, np);
		if (matches == 0) {
			if (scope_org)
				isc_api_reply_error(c, 404, "organisation '%s' has no project '%s'",
				                    scope_org, project);
			else
				isc_api_reply_error(c, 404, "no project with id or name '%s'",
				                    project);
			goto out;
		}
		if (matches > 1) {
			isc_api_reply_error(
			    c, 400, "%zu projects are named '%s': add --org or use the project id",
			    matches, project);
			goto out;
		}
		q.project = project_id;
	}
	isc_buf_init(&out, 0);
	if (isc_store_ledger_spend(c->store, &q, &rows, &n, &err) ||
	    isc_spend_render(rows, n, q.by, fmt, &out, &err)) {
		isc_api_reply_err(c, &err);
	} else {
		static __thread char rows_hdr[24];
		size_t len = out.len;
		snprintf(rows_hdr, sizeof(rows_hdr), "%zu", n);
		isc_api_header(c, "X-Isc-Rows", rows_hdr);
		isc_api_reply_text(c, 200,
		                   fmt == ISC_SPEND_CSV    ? "text/csv"
		                   : fmt == ISC_SPEND_JSON ? "application/json"
		                                           : "text/plain",
		                   isc_buf_detach(&out), len);
	}
	isc_buf_cleanup(&out);
	isc_spend_rows_free(rows, n);
out:
	free(project_id);
	free(scope_org);
}

const struct isc_api_route isc_api_routes_finance[] = {
    {"GET", "/v1/credits", credits_show},
    {"POST", "/v1/credits/grants", credits_grant},
    {"GET", "/v1/spend", spend},
    {NULL, NULL, NULL},
};
