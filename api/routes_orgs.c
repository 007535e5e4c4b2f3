/*
 * Organisations (the operator adds them; a caller sees those they belong to),
 * projects (the org's admins add them; its members see them) and project
 * budgets (the org's admins set them).
 */
#include "api/api_int.h"
#include "api/json_out.h"
#include "common/names.h"
#include "credits/credits.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * GET /v1/orgs[?limit=N&after=CURSOR]: every org (the operator) or the caller's,
 * by name, a page at a time (the cursor: the last org's name).
 */
static void orgs_list(struct isc_api_call *c)
{
	struct isc_api_page page;
	struct isc_org *orgs;
	struct isc_err err;
	size_t n;
	json_t *arr;

	if (!isc_api_page_parse(c, ISC_API_PAGE_DEFAULT, ISC_API_PAGE_MAX, &page))
		return;
	isc_err_clear(&err);
	/* One row more than the page: whether it exists says whether a next page does. */
	if (isc_store_org_page(c->store, c->is_operator, c->user_id, page.after, page.limit + 1,
	                       &orgs, &n, &err)) {
		isc_api_reply_err(c, &err);
		return;
	}
	arr = json_array();
	for (size_t i = 0; i < n && i < page.limit; i++)
		json_array_append_new(arr, json_pack("{s:I,s:s,s:I}", "id", (json_int_t)orgs[i].id,
		                                     "name", orgs[i].name, "created_at_ms",
		                                     (json_int_t)orgs[i].created_at_ms));
	if (n > page.limit)
		isc_api_page_next(c, orgs[page.limit - 1].name);
	isc_org_list_free(orgs, n);
	isc_api_reply_json(c, 200, arr);
}

/* POST /v1/orgs {"name"} (operator). */
static void orgs_add(struct isc_api_call *c)
{
	json_t *body;
	const char *name;
	struct isc_err err;
	int64_t id;

	if (!isc_api_require_operator(c) || !(body = isc_api_body_object(c)))
		return;
	name = json_string_value(json_object_get(body, "name"));
	isc_err_clear(&err);
	if (!isc_name_valid(name)) {
		isc_api_reply_error(c, 400,
		                    "invalid organisation name: 1 to 64 characters, no spaces, "
		                    "slashes or commas");
	} else if (isc_store_org_add(c->store, name, &id, &err)) {
		isc_api_reply_err(c, &err);
	} else {
		isc_api_audit_target(c, id, name);
		isc_api_reply_json(c, 201,
		                   json_pack("{s:I,s:s}", "id", (json_int_t)id, "name", name));
	}
	json_decref(body);
}

static json_t *project_json(const struct isc_project *p)
{
	json_t *o = json_pack("{s:s,s:s,s:s}", "id", p->id, "org", p->org_name, "name", p->name);
	return isc_json_money_or_null(o, "budget", p->has_budget, p->budget_micros);
}

/*
 * A project's money beside its budget (`isc project show`, issue 47): spent, held
 * (reserved) and remaining (null without a budget), for the callers who read the
 * org's money (its admins and finance, the operator); a member's rows have none.
 * 0, or -1 when a reply (the error) was sent.
 */
static int project_money_add(struct isc_api_call *c, const struct isc_project *p, json_t *o)
{
	struct isc_project_money pm;
	struct isc_err err;
	enum isc_role r = c->is_operator ? ISC_ROLE_ADMIN : isc_api_role(c, p->org_id);

	if (c->status >= 500)
		return -1;
	if (!(r & (ISC_ROLE_ADMIN | ISC_ROLE_FINANCE)))
		return 0;
	isc_err_clear(&err);
	if (isc_project_money_get(c->store, p->id, &pm, &err)) {
		isc_api_reply_err(c, &err);
		return -1;
	}
	isc_json_money(o, "spent", pm.spent_micros);
	isc_json_money(o, "reserved", pm.reserved_micros);
	isc_json_money_or_null(o, "remaining", p->has_budget, pm.remaining_micros);
	return 0;
}

/*
 * GET /v1/projects[?org=O&limit=N&after=CURSOR]: the projects of the orgs the
 * caller belongs to, by org then name, a page at a time (the cursor: ORG/NAME of
 * the page's last project).
 */
static void projects_list(struct isc_api_call *c)
{
	const char *org_name = isc_api_query(c, "org"), *after[2] = {NULL, NULL};
	struct isc_project *list;
	struct isc_api_page page;
	struct isc_org org = {0};
	struct isc_err err;
	char buf[160];
	size_t n;
	json_t *arr;

	if (!isc_api_page_parse(c, ISC_API_PAGE_DEFAULT, ISC_API_PAGE_MAX, &page) ||
	    (page.after && !isc_api_page_cursor(c, page.after, 2, after, buf, sizeof(buf))))
		return;
	if (org_name && !isc_api_find_org(c, org_name, &org))
		return;
	isc_err_clear(&err);
	if (isc_store_project_page(c->store, c->is_operator, c->user_id, org_name, after[0],
	                           after[1], page.limit + 1, &list, &n, &err)) {
		isc_org_cleanup(&org);
		isc_api_reply_err(c, &err);
		return;
	}
	arr = json_array();
	for (size_t i = 0; i < n && i < page.limit; i++) {
		json_t *o = project_json(&list[i]);
		json_array_append_new(arr, o);
		if (project_money_add(c, &list[i], o)) {
			json_decref(arr);
			isc_project_list_free(list, n);
			isc_org_cleanup(&org);
			return;
		}
	}
	if (n > page.limit) {
		char cursor[sizeof(c->next_cursor)];
		snprintf(cursor, sizeof(cursor), "%s/%s", list[page.limit - 1].org_name,
		         list[page.limit - 1].name);
		isc_api_page_next(c, cursor);
	}
	isc_project_list_free(list, n);
	isc_org_cleanup(&org);
	isc_api_reply_json(c, 200, arr);
}

/* POST /v1/projects {"org","name"} (the org's admins). */
static void projects_add(struct isc_api_call *c)
{
	json_t *body = isc_api_body_object(c);
	const char *org_name, *name;
	struct isc_org org = {0};
	struct isc_err err;
	char *id = NULL;

	if (!body)
		return;
	org_name = json_string_value(json_object_get(body, "org"));
	name = json_string_value(json_object_get(body, "name"));
	isc_err_clear(&err);
	if (!org_name || !isc_name_valid(name)) {
		isc_api_reply_error(c, 400,
		                    "org and name are required; a project name is 1 to 64 "
		                    "characters, no spaces, slashes or commas");
	} else if (isc_api_find_org(c, org_name, &org)) {
		isc_api_audit_target(c, org.id, name);
		if (isc_api_require_org_role(c, org.id, ISC_ROLE_ADMIN, "no such organisation")) {
			if (isc_store_project_add(c->store, org_name, name, &id, &err))
				isc_api_reply_err(c, &err);
			else
				isc_api_reply_json(c, 201,
				                   json_pack("{s:s,s:s,s:s}", "id", id, "org",
				                             org_name, "name", name));
		}
		isc_org_cleanup(&org);
	}
	free(id);
	json_decref(body);
}

/*
 * POST /v1/budgets {"org","project","budget_micros"|null} (the org's admins):
 * replies with the project's money as `isc project budget` prints it.
 */
static void budgets_set(struct isc_api_call *c)
{
	json_t *body = isc_api_body_object(c), *b;
	const char *org_name, *project;
	struct isc_project *list = NULL;
	struct isc_project_money pm;
	struct isc_org org = {0};
	struct isc_err err;
	const struct isc_project *p = NULL;
	int64_t micros = -1;
	size_t n = 0;

	if (!body)
		return;
	org_name = json_string_value(json_object_get(body, "org"));
	project = json_string_value(json_object_get(body, "project"));
	b = json_object_get(body, "budget_micros");
	isc_err_clear(&err);
	if (!org_name || !project || (b && !json_is_null(b) && !json_is_integer(b)) ||
	    (b && json_is_integer(b) && json_integer_value(b) < 0)) {
		isc_api_reply_error(c, 400,
		                    "org, project and budget_micros (a non-negative integer, or "
		                    "null for none) are required");
		goto out;
	}
	if (b && json_is_integer(b))
		micros = json_integer_value(b);
	if (!isc_api_find_org(c, org_name, &org))
		goto out;
	isc_api_audit_target(c, org.id, project);
	if (!isc_api_require_org_role(c, org.id, ISC_ROLE_ADMIN, "no such organisation"))
		goto out;
	if (isc_project_set_budget(c->store, org_name, project, micros, &err) ||
	    isc_store_project_list(c->store, org_name, &list, &n, &err)) {
		isc_api_reply_err(c, &err);
		goto out;
	}
	for (size_t i = 0; i < n && !p; i++)
		if (strcmp(list[i].id, project) == 0 || strcmp(list[i].name, project) == 0)
			p = &list[i];
	if (!p)
		isc_api_reply_error(c, 404, "organisation '%s' has no project '%s'", org_name,
		                    project);
	else if (isc_project_money_get(c->store, p->id, &pm, &err))
		isc_api_reply_err(c, &err);
	else {
		json_t *o =
		    json_pack("{s:s,s:s,s:s}", "id", p->id, "org", org_name, "name", p->name);
		isc_json_money(o, "spent", pm.spent_micros);
		isc_json_money(o, "reserved", pm.reserved_micros);
		isc_json_money_or_null(o, "budget", micros >= 0, micros);
		isc_json_money_or_null(o, "remaining", micros >= 0, pm.remaining_micros);
		isc_api_reply_json(c, 200, o);
	}
out:
	isc_project_list_free(list, n);
	isc_org_cleanup(&org);
	json_decref(body);
}

const struct isc_api_route isc_api_routes_orgs[] = {
    {"GET", "/v1/orgs", orgs_list},         {"POST", "/v1/orgs", orgs_add},
    {"GET", "/v1/projects", projects_list}, {"POST", "/v1/projects", projects_add},
    {"POST", "/v1/budgets", budgets_set},   {NULL, NULL, NULL},
};
