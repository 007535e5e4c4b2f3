/*
 * Who may do what: the caller's own identity, platform users (operator),
 * memberships (the org's admins and the operator), bearer tokens (each user
 * their own) and the audit (the org's admins and the operator).
 */
#include "api/api_int.h"
#include "common/clock.h"
#include "common/names.h"

#include <errno.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* GET /v1/whoami: the caller and their roles. */
static void whoami(struct isc_api_call *c)
{
	struct isc_membership *m = NULL;
	struct isc_err err;
	size_t n = 0;
	json_t *o, *orgs;

	isc_err_clear(&err);
	if (!c->is_operator && isc_store_member_list(c->store, 0, c->user_id, &m, &n, &err)) {
		isc_api_reply_err(c, &err);
		return;
	}
	orgs = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(orgs, json_pack("{s:s,s:s}", "org", m[i].org_name, "role",
		                                      isc_role_name(m[i].role)));
	isc_membership_list_free(m, n);
	o = json_pack("{s:s,s:b,s:s,s:o}", "user", c->user, "operator", c->is_operator, "address",
	              c->address, "orgs", orgs);
	isc_api_reply_json(c, 200, o);
}

/* GET /v1/users[?limit=N&after=NAME] (operator): by name, a page at a time. */
static void users_list(struct isc_api_call *c)
{
	struct isc_api_page page;
	struct isc_user *u;
	struct isc_err err;
	size_t n;
	json_t *arr;

	if (!isc_api_require_operator(c) ||
	    !isc_api_page_parse(c, ISC_API_PAGE_DEFAULT, ISC_API_PAGE_MAX, &page))
		return;
	isc_err_clear(&err);
	/* One row more than the page: whether it exists says whether a next page does. */
	if (isc_store_user_page(c->store, page.after, page.limit + 1, &u, &n, &err)) {
		isc_api_reply_err(c, &err);
		return;
	}
	arr = json_array();
	for (size_t i = 0; i < n && i < page.limit; i++)
		json_array_append_new(arr, json_pack("{s:I,s:s,s:I}", "id", (json_int_t)u[i].id,
		                                     "name", u[i].name, "created_at_ms",
		                                     (json_int_t)u[i].created_at_ms));
	if (n > page.limit)
		isc_api_page_next(c, u[page.limit - 1].name);
	isc_user_list_free(u, n);
	isc_api_reply_json(c, 200, arr);
}

/* POST /v1/users {"name"} (operator). */
static void users_add(struct isc_api_call *c)
{
	json_t *body;
	const char *name;
	struct isc_err err;
	int64_t id;

	if (!isc_api_require_operator(c) || !(body = isc_api_body_object(c)))
		return;
	name = json_string_value(json_object_get(body, "name"));
	isc_err_clear(&err);
	if (!name || !isc_name_valid(name))
		isc_api_reply_error(c, 400,
		                    "name: 1 to 64 characters, no spaces, slashes or commas (the "
		                    "user's OS login name)");
	else if (strcmp(name, "operator") == 0)
		isc_api_reply_error(c, 400, "'operator' names the platform operator, not a user");
	else if (isc_store_user_add(c->store, name, &id, &err))
		isc_api_reply_err(c, &err);
	else {
		isc_api_audit_target(c, 0, name);
		isc_api_reply_json(c, 201,
		                   json_pack("{s:I,s:s}", "id", (json_int_t)id, "name", name));
	}
	json_decref(body);
}

static json_t *membership_json(const struct isc_membership *m)
{
	return json_pack("{s:s,s:s,s:s,s:I}", "org", m->org_name, "user", m->user_name, "role",
	                 isc_role_name(m->role), "created_at_ms", (json_int_t)m->created_at_ms);
}

/* GET /v1/members?org=O[&limit=N&after=NAME]: an org's members by name (its admins, the operator).
 */
static void members_list(struct isc_api_call *c)
{
	const char *org_name = isc_api_query(c, "org");
	struct isc_membership *m;
	struct isc_api_page page;
	struct isc_org org = {0};
	struct isc_err err;
	size_t n;
	json_t *arr;

	if (!isc_api_page_parse(c, ISC_API_PAGE_DEFAULT, ISC_API_PAGE_MAX, &page))
		return;
	if (!org_name) {
		isc_api_reply_error(c, 400, "org is required");
		return;
	}
	if (!isc_api_find_org(c, org_name, &org))
		return;
	if (!isc_api_require_org_role(c, org.id, ISC_ROLE_ADMIN, "no such organisation")) {
		isc_org_cleanup(&org);
		return;
	}
	isc_err_clear(&err);
	if (isc_store_member_page(c->store, org.id, page.after, page.limit + 1, &m, &n, &err)) {
		isc_org_cleanup(&org);
		isc_api_reply_err(c, &err);
		return;
	}
	arr = json_array();
	for (size_t i = 0; i < n && i < page.limit; i++)
		json_array_append_new(arr, membership_json(&m[i]));
	if (n > page.limit)
		isc_api_page_next(c, m[page.limit - 1].user_name);
	isc_membership_list_free(m, n);
	isc_org_cleanup(&org);
	isc_api_reply_json(c, 200, arr);
}

/*
 * The org and user a membership change names, with the admin check: fills org
 * and user, returns 1 when the call may go on.
 */
static int member_target(struct isc_api_call *c, const char *org_name, const char *user_name,
                         struct isc_org *org, struct isc_user *user)
{
	struct isc_err err;

	if (!org_name || !user_name) {
		isc_api_reply_error(c, 400, "org and user are required");
		return 0;
	}
	if (!isc_api_find_org(c, org_name, org))
		return 0;
	isc_api_audit_target(c, org->id, user_name);
	if (!isc_api_require_org_role(c, org->id, ISC_ROLE_ADMIN, "no such organisation")) {
		isc_org_cleanup(org);
		return 0;
	}
	isc_err_clear(&err);
	if (isc_store_user_find(c->store, user_name, user, &err)) {
		isc_org_cleanup(org);
		isc_api_reply_err(c, &err);
		return 0;
	}
	return 1;
}

/* POST /v1/members {"org","user","role"}: add or change (the org's admins, the operator). */
static void members_add(struct isc_api_call *c)
{
	json_t *body = isc_api_body_object(c);
	struct isc_org org = {0};
	struct isc_user user = {0};
	struct isc_err err;
	enum isc_role role;
	const char *role_name;

	if (!body)
		return;
	role_name = json_string_value(json_object_get(body, "role"));
	isc_err_clear(&err);
	if (!role_name || isc_role_parse(role_name, &role, &err)) {
		isc_api_reply_error(c, 400, "role: use member, admin or finance");
		json_decref(body);
		return;
	}
	if (member_target(c, json_string_value(json_object_get(body, "org")),
	                  json_string_value(json_object_get(body, "user")), &org, &user)) {
		if (isc_store_member_set(c->store, org.id, user.id, role, &err))
			isc_api_reply_err(c, &err);
		else
			isc_api_reply_json(c, 200,
			                   json_pack("{s:s,s:s,s:s}", "org", org.name, "user",
			                             user.name, "role", isc_role_name(role)));
		isc_org_cleanup(&org);
		isc_user_cleanup(&user);
	}
	json_decref(body);
}

/* DELETE /v1/members?org=O&user=U (the org's admins, the operator). */
static void members_remove(struct isc_api_call *c)
{
	struct isc_org org = {0};
	struct isc_user user = {0};
	struct isc_err err;

	if (!member_target(c, isc_api_query(c, "org"), isc_api_query(c, "user"), &org, &user))
		return;
	isc_err_clear(&err);
	if (isc_store_member_remove(c->store, org.id, user.id, &err))
		isc_api_reply_err(c, &err);
	else
		isc_api_reply_json(c, 200,
		                   json_pack("{s:s,s:s}", "org", org.name, "removed", user.name));
	isc_org_cleanup(&org);
	isc_user_cleanup(&user);
}

static json_t *token_json(const struct isc_token *t)
{
	json_t *o =
	    json_pack("{s:s,s:s,s:I}", "id", t->id, "user", t->user_id ? t->user_name : "operator",
	              "created_at_ms", (json_int_t)t->created_at_ms);
	json_object_set_new(o, "expires_at_ms",
	                    t->expires_at_ms ? json_integer(t->expires_at_ms) : json_null());
	json_object_set_new(o, "revoked_at_ms",
	                    t->revoked_at_ms ? json_integer(t->revoked_at_ms) : json_null());
	json_object_set_new(
	    o, "parent", t->parent_id && t->parent_id[0] ? json_string(t->parent_id) : json_null());
	return o;
}

/*
 * POST /v1/tokens {"expires_in_s"}: a token for the caller. The secret is in
 * this reply only; the store keeps its SHA-256.
 *
 * A token made over TCP is made with the token of the call, its parent (issue 29):
 * it must expire (expires_in_s), no later than the parent (a later time is cut to
 * the parent's), and revoking the parent revokes it. A token without expiry is made
 * only over the Unix socket, where the caller is its uid (SO_PEERCRED), so a leaked
 * short-lived token cannot mint a permanent one.
 */
static void tokens_create(struct isc_api_call *c)
{
	json_t *body = c->body_len ? isc_api_body_object(c) : json_object();
	unsigned char id_raw[8], secret_raw[32], digest[SHA256_DIGEST_LENGTH];
	char id[24], secret[65], hash[65], *full = NULL;
	struct isc_token t = {0}, parent = {0};
	struct isc_err err;
	int clamped = 0;
	json_t *exp, *o;

	if (!body)
		return;
	exp = json_object_get(body, "expires_in_s");
	if (exp && !json_is_null(exp) &&
	    (!json_is_integer(exp) || json_integer_value(exp) <= 0 ||
	     json_integer_value(exp) > 10LL * 365 * 86400)) {
		isc_api_reply_error(c, 400, "expires_in_s: a number of seconds up to 10 years");
		json_decref(body);
		return;
	}
	if (RAND_bytes(id_raw, sizeof(id_raw)) != 1 ||
	    RAND_bytes(secret_raw, sizeof(secret_raw)) != 1) {
		isc_api_reply_error(c, 500, "no randomness for a token");
		json_decref(body);
		return;
	}
	snprintf(id, sizeof(id), "tok_");
	for (size_t i = 0; i < sizeof(id_raw); i++)
		snprintf(id + 4 + 2 * i, 3, "%02x", id_raw[i]);
	for (size_t i = 0; i < sizeof(secret_raw); i++)
		snprintf(secret + 2 * i, 3, "%02x", secret_raw[i]);
	SHA256((const unsigned char *)secret, 64, digest);
	for (size_t i = 0; i < sizeof(digest); i++)
		snprintf(hash + 2 * i, 3, "%02x", digest[i]);
	t.id = id;
	t.user_id = c->is_operator ? 0 : c->user_id;
	t.hash_hex = hash;
	t.expires_at_ms =
	    exp && json_is_integer(exp) ? isc_wall_ms() + json_integer_value(exp) * 1000 : 0;
	isc_err_clear(&err);
	isc_api_audit_target(c, 0, id);
	if (c->token_id) {
		/* Over TCP: made with the call's token, and never outliving it. */
		if (!t.expires_at_ms) {
			isc_api_reply_error(
			    c, 400,
			    "expires_in_s is required: a token made with a token (over TCP) "
			    "expires no later than it; a token without expiry is made only over "
			    "iscd's Unix socket");
			goto out;
		}
		if (isc_store_token_get(c->store, c->token_id, &parent, &err)) {
			isc_api_reply_err(c, &err);
			goto out;
		}
		if (parent.expires_at_ms && t.expires_at_ms > parent.expires_at_ms) {
			t.expires_at_ms = parent.expires_at_ms;
			clamped = 1;
		}
		t.parent_id = parent.id;
	}
	if (isc_store_token_add(c->store, &t, &err)) {
		isc_api_reply_err(c, &err);
	} else if (asprintf(&full, "%s.%s", id, secret) < 0) {
		isc_api_reply_error(c, 500, "out of memory");
	} else {
		o = json_pack("{s:s,s:s,s:s}", "id", id, "user", c->user, "token", full);
		json_object_set_new(o, "expires_at_ms",
		                    t.expires_at_ms ? json_integer(t.expires_at_ms) : json_null());
		json_object_set_new(o, "parent",
		                    t.parent_id ? json_string(t.parent_id) : json_null());
		/* Said, not hidden: the caller asked for longer than the parent lives. */
		if (clamped)
			json_object_set_new(o, "expiry_cut_to_parent", json_true());
		isc_api_reply_json(c, 201, o);
	}
out:
	isc_token_cleanup(&parent);
	OPENSSL_cleanse(secret, sizeof(secret));
	OPENSSL_cleanse(secret_raw, sizeof(secret_raw));
	if (full) {
		OPENSSL_cleanse(full, strlen(full));
		free(full);
	}
	json_decref(body);
}

/* GET /v1/tokens[?limit=N&after=MS.ID]: the caller's tokens (the operator: everyone's), oldest
 * first. */
static void tokens_list(struct isc_api_call *c)
{
	struct isc_api_page page;
	struct isc_token *t;
	struct isc_err err;
	const char *after_id = NULL;
	int64_t after_ms = 0;
	size_t n;
	json_t *arr;

	if (!isc_api_page_parse(c, ISC_API_PAGE_DEFAULT, ISC_API_PAGE_MAX, &page) ||
	    (page.after && !isc_api_page_cursor_ms_id(c, page.after, &after_ms, &after_id)))
		return;
	isc_err_clear(&err);
	if (isc_store_token_page(c->store, c->is_operator, c->user_id, after_ms, after_id,
	                         page.limit + 1, &t, &n, &err)) {
		isc_api_reply_err(c, &err);
		return;
	}
	arr = json_array();
	for (size_t i = 0; i < n && i < page.limit; i++)
		json_array_append_new(arr, token_json(&t[i]));
	if (n > page.limit) {
		char cursor[sizeof(c->next_cursor)];
		snprintf(cursor, sizeof(cursor), "%lld.%s",
		         (long long)t[page.limit - 1].created_at_ms, t[page.limit - 1].id);
		isc_api_page_next(c, cursor);
	}
	isc_token_list_free(t, n);
	isc_api_reply_json(c, 200, arr);
}

/*
 * DELETE /v1/tokens/{id}: the token's owner or the operator; another's token is 404.
 * Every token made with it (and with those) is revoked with it.
 */
static void tokens_revoke(struct isc_api_call *c)
{
	struct isc_token t = {0};
	struct isc_err err;
	size_t cascaded = 0;

	isc_err_clear(&err);
	isc_api_audit_target(c, 0, c->params[0]);
	if (isc_store_token_get(c->store, c->params[0], &t, &err)) {
		isc_api_reply_err(c, &err);
		return;
	}
	if (!c->is_operator && t.user_id != c->user_id)
		isc_api_reply_error(c, 404, "no token '%s'", c->params[0]);
	else if (isc_store_token_revoke(c->store, t.id, &cascaded, &err))
		isc_api_reply_err(c, &err);
	else
		isc_api_reply_json(c, 200,
		                   json_pack("{s:s,s:I}", "revoked", t.id, "revoked_with_it",
		                             (json_int_t)cascaded));
	isc_token_cleanup(&t);
}

/*
 * GET /v1/audit?org=O[&limit=N&after=ID]: an org's rows (its admins), or every
 * row (the operator), newest first, a page at a time (docs/api.md, "Pages"):
 * the cursor is the id of the page's last row. Pages of up to 100,000 rows, as
 * `isc audit --limit` always allowed; 1,000 by default.
 */
static void audit_list(struct isc_api_call *c)
{
	const char *org_name = isc_api_query(c, "org");
	struct isc_api_page page;
	struct isc_org org = {0};
	struct isc_audit *a;
	struct isc_err err;
	long long before = 0;
	size_t n, shown;
	json_t *arr;

	if (!isc_api_page_parse(c, 1000, 100000, &page))
		return;
	if (page.after) {
		char *end;
		errno = 0;
		before = strtoll(page.after, &end, 10);
		if (*end || errno || before < 1) {
			isc_api_reply_error(c, 400,
			                    "after: '%s' is not a cursor of the audit (X-Isc-Next)",
			                    page.after);
			return;
		}
	}
	if (!org_name && !c->is_operator) {
		isc_api_reply_error(c, 403,
		                    "only the operator reads every organisation's audit: "
		                    "name one (org=)");
		return;
	}
	if (org_name) {
		if (!isc_api_find_org(c, org_name, &org))
			return;
		if (!isc_api_require_org_role(c, org.id, ISC_ROLE_ADMIN, "no such organisation")) {
			isc_org_cleanup(&org);
			return;
		}
	}
	isc_err_clear(&err);
	/* One row more than the page: whether it exists says whether a next page does. */
	if (isc_store_audit_list(c->store, org.id, before, page.limit + 1, &a, &n, &err)) {
		isc_org_cleanup(&org);
		isc_api_reply_err(c, &err);
		return;
	}
	shown = n;
	if (n > page.limit) {
		char cursor[32];
		snprintf(cursor, sizeof(cursor), "%lld", (long long)a[page.limit - 1].id);
		isc_api_page_next(c, cursor);
		shown = page.limit;
	}
	arr = json_array();
	for (size_t i = 0; i < shown; i++)
		json_array_append_new(
		    arr, json_pack("{s:I,s:I,s:s,s:s,s:s,s:s,s:s,s:i}", "id", (json_int_t)a[i].id,
		                   "at_ms", (json_int_t)a[i].at_ms, "actor", a[i].actor, "address",
		                   a[i].address, "org", a[i].org_name, "action", a[i].action,
		                   "target", a[i].target, "status", a[i].status));
	isc_audit_list_free(a, n);
	isc_org_cleanup(&org);
	isc_api_reply_json(c, 200, arr);
}

const struct isc_api_route isc_api_routes_access[] = {
    {"GET", "/v1/whoami", whoami},
    {"GET", "/v1/users", users_list},
    {"POST", "/v1/users", users_add},
    {"GET", "/v1/members", members_list},
    {"POST", "/v1/members", members_add},
    {"DELETE", "/v1/members", members_remove},
    {"POST", "/v1/tokens", tokens_create},
    {"GET", "/v1/tokens", tokens_list},
    {"DELETE", "/v1/tokens/{}", tokens_revoke},
    {"GET", "/v1/audit", audit_list},
    {NULL, NULL, NULL},
};
