/*
 * Datasets (docs/datasets.md): S3 objects and folders an organisation registers
 * once. Every user of the org (member, admin, finance) lists and shows its
 * datasets, with state and caching progress; its admins add and remove them;
 * the operator may do all, for every org. A dataset of an org the caller is
 * not a member of is 404, word for word as one that does not exist.
 *
 * Adding checks the object or folder against S3 synchronously (the same checks
 * and messages `isc datasets add` always gave). A dataset reads S3 with its own
 * AWS keys, sent in the body of POST /v1/datasets and sealed with the record by
 * keys/ (only over the Unix socket or TCP from a loopback address, like a cloud
 * key; the body is wiped once parsed), or with the broker's own credentials,
 * which only the operator may lend: an org's admin must not be able to make
 * iscd read whatever bucket the platform's account can read.
 */
#include "api/api_int.h"
#include "api/credentials.h"
#include "config/config.h"
#include "datasets/datasets.h"
#include "keys/keys.h"
#include "store/store_datasets.h"

#include <openssl/crypto.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *state_word(const char *s)
{
	if (!strcmp(s, "created"))
		return "Created";
	if (!strcmp(s, "caching"))
		return "Caching";
	if (!strcmp(s, "available"))
		return "Available";
	if (!strcmp(s, "failed"))
		return "Failed";
	return s;
}

/* What a dataset looks like to every caller (`isc datasets list/show --json`). */
static json_t *dataset_json(const struct isc_dataset *d)
{
	json_t *o = json_pack(
	    "{s:s, s:s, s:s, s:s, s:b, s:s, s:s, s:I, s:I, s:I, s:s, s:s, s:s, s:s, s:I}", "id",
	    d->id, "org", d->org_name, "name", d->name, "uri", d->uri, "folder", d->is_folder,
	    "etag", d->etag, "version_id", d->version_id, "size_bytes", (json_int_t)d->size_bytes,
	    "volume_bytes", (json_int_t)d->volume_bytes, "cached_bytes",
	    (json_int_t)d->cached_bytes, "state", state_word(d->state), "reason", d->reason, "copy",
	    d->copy_name, "credentials",
	    d->credentials[0] ? d->credentials : "broker", /* a reference or a fingerprint */
	    "created_at_ms", (json_int_t)d->created_at_ms);
	if (o) {
		/* How the cached bytes were checked against S3 (from the manifest). */
		char *by = isc_dataset_verified_summary(d);
		json_object_set_new(o, "mount", json_sprintf("/data/%s", d->name));
		if (by)
			json_object_set_new(o, "verified_by", json_string(by));
		free(by);
	}
	return o;
}

/*
 * The dataset named by {id-or-name} (and ?org=O, needed for a name) when the
 * caller's role in its org is in `allowed`; 0 when replied. Not a member: 404
 * with the same text as a dataset that does not exist.
 */
static int find_dataset(struct isc_api_call *c, unsigned allowed, struct isc_dataset *d)
{
	const char *what = c->params[0], *org_name = isc_api_query(c, "org");
	struct isc_org org = {0};
	struct isc_err err;
	char missing[300];
	int rc;

	if (org_name && !isc_api_find_org(c, org_name, &org))
		return 0;
	isc_err_clear(&err);
	rc = isc_store_dataset_find(c->store, org_name, what, d, &err);
	isc_org_cleanup(&org);
	if (rc) {
		isc_api_reply_err(c, &err);
		return 0;
	}
	/* The store's own words for a missing dataset, so the two answers are the same. */
	if (org_name)
		snprintf(missing, sizeof(missing), "organisation '%.64s' has no dataset '%.128s'",
		         org_name, what);
	else
		snprintf(missing, sizeof(missing), "no dataset '%.128s'", what);
	/* Set first, so the org's admins see refused attempts on its datasets too. */
	isc_api_audit_target(c, d->org_id, d->id);
	if (!isc_api_require_org_role(c, d->org_id, allowed, missing)) {
		isc_dataset_cleanup(d);
		return 0;
	}
	return 1;
}

/*
 * The listing's cursor: "ORG/NAME" of the last dataset of a page (the order is by
 * organisation, then name; neither name may hold a '/'). Returns 1 when text is one.
 */
static int cursor_parse(const char *text, char *buf, size_t cap, struct isc_dataset_cursor *out)
{
	char *slash;
	if (strlen(text) >= cap)
		return 0;
	snprintf(buf, cap, "%s", text);
	slash = strchr(buf, '/');
	if (!slash || slash == buf || !slash[1] || strchr(slash + 1, '/'))
		return 0;
	*slash = '\0';
	out->org_name = buf;
	out->name = slash + 1;
	return 1;
}

/*
 * GET /v1/datasets[?org=O][&limit=N&after=CURSOR]: the datasets of the orgs the caller
 * belongs to (any role; the operator: all), by organisation then name, a page at a time
 * (docs/api.md, "Pages"): X-Isc-Next names the next page's cursor while rows remain.
 */
static void datasets_list(struct isc_api_call *c)
{
	const char *org_name = isc_api_query(c, "org");
	struct isc_org org = {0};
	struct isc_api_page page;
	struct isc_dataset_cursor after;
	struct isc_dataset *list = NULL;
	struct isc_err err;
	char cursor_buf[200];
	size_t n = 0, shown;
	json_t *arr;

	if (!isc_api_page_parse(c, ISC_API_PAGE_DEFAULT, ISC_API_PAGE_MAX, &page))
		return;
	if (page.after && !cursor_parse(page.after, cursor_buf, sizeof(cursor_buf), &after)) {
		isc_api_reply_error(c, 400,
		                    "after: '%.80s' is not a cursor of this listing (X-Isc-Next)",
		                    page.after);
		return;
	}
	if (org_name && !isc_api_find_org(c, org_name, &org))
		return;
	isc_org_cleanup(&org);
	isc_err_clear(&err);
	/* One row more than the page: whether it exists says whether a next page does. */
	if (isc_store_dataset_list(c->store, org_name, c->is_operator ? 0 : c->user_id,
	                           page.after ? &after : NULL, page.limit + 1, &list, &n, &err)) {
		isc_api_reply_err(c, &err);
		return;
	}
	shown = n;
	if (n > page.limit) {
		char cursor[sizeof(c->next_cursor)];
		const struct isc_dataset *last = &list[page.limit - 1];
		snprintf(cursor, sizeof(cursor), "%s/%s", last->org_name, last->name);
		isc_api_page_next(c, cursor);
		shown = page.limit;
	}
	arr = json_array();
	for (size_t i = 0; i < shown; i++)
		json_array_append_new(arr, dataset_json(&list[i]));
	isc_dataset_list_free(list, n);
	isc_api_reply_json(c, 200, arr);
}

/* GET /v1/datasets/{id-or-name}[?org=O] */
static void datasets_get(struct isc_api_call *c)
{
	struct isc_dataset d;
	if (!find_dataset(c, ISC_ROLE_MEMBER | ISC_ROLE_ADMIN | ISC_ROLE_FINANCE, &d))
		return;
	isc_api_reply_json(c, 200, dataset_json(&d));
	isc_dataset_cleanup(&d);
}

static const char *opt_string(struct isc_api_call *c, json_t *body, const char *key, int *bad)
{
	json_t *v = json_object_get(body, key);
	if (!v || json_is_null(v))
		return NULL;
	if (!json_is_string(v) || !json_string_value(v)[0]) {
		if (!*bad)
			isc_api_reply_error(c, 400, "%s: a non-empty string", key);
		*bad = 1;
		return NULL;
	}
	return json_string_value(v);
}

/*
 * POST /v1/datasets {"org","uri","name"?,"etag"?,"version_id"?,"volume_size"?,
 * "credentials"?:{"access_key_id","secret_access_key","session_token"?}} (the org's
 * admins; without credentials the operator only): checked with S3, then recorded.
 */
static void datasets_add(struct isc_api_call *c)
{
	json_t *body, *creds;
	struct isc_org org = {0};
	struct isc_key_secret secret = {0};
	struct isc_dataset_request req = {0};
	struct isc_config *cfg = NULL;
	struct isc_dataset d = {0};
	struct isc_err err;
	int bad = 0;

	body = isc_api_body_object(c);
	/* The parsed copy is all that is needed; the raw body may hold a secret. */
	OPENSSL_cleanse((char *)c->body, c->body_len);
	if (!body)
		return;
	req.org = opt_string(c, body, "org", &bad);
	req.uri = opt_string(c, body, "uri", &bad);
	req.name = opt_string(c, body, "name", &bad);
	req.etag = opt_string(c, body, "etag", &bad);
	req.version_id = opt_string(c, body, "version_id", &bad);
	req.volume_size = opt_string(c, body, "volume_size", &bad);
	creds = json_object_get(body, "credentials");
	if (bad)
		goto out;
	if (!req.org || !req.uri) {
		isc_api_reply_error(c, 400, "org and uri are required");
		goto out;
	}
	if (!isc_api_find_org(c, req.org, &org))
		goto out;
	isc_api_audit_target(c, org.id, req.uri);
	if (!isc_api_require_org_role(c, org.id, ISC_ROLE_ADMIN, "no such organisation"))
		goto out;
	if (creds && !json_is_null(creds)) {
		/* Plain HTTP to a remote caller would carry the secret in clear. */
		if (!isc_api_secret_transport_ok(c)) {
			isc_api_reply_error(
			    c, 400,
			    "a dataset's keys are accepted only over the Unix socket "
			    "or from a loopback address, not over TCP from %s",
			    c->address);
			goto out;
		}
		if (!isc_api_body_credentials(
		        c, body, "access_key_id, secret_access_key and optionally session_token",
		        &secret))
			goto out;
		req.secret = &secret;
	} else if (!c->is_operator) {
		isc_api_reply_error(c, 403,
		                    "only the platform operator may register a dataset on the "
		                    "broker's own AWS credentials: give the dataset its own keys "
		                    "(isc datasets add --credentials-from-env or "
		                    "--credentials-profile P)");
		goto out;
	}
	isc_err_clear(&err);
	if (isc_config_load(c->home, &cfg, &err)) {
		isc_api_reply_err(c, &err);
		goto out;
	}
	isc_err_clear(&err);
	if (isc_dataset_register(c->store, c->home, cfg, &req, &d, &err)) {
		/* S3 refusing the keys is the caller's input, not our authorisation. */
		isc_api_reply_error(c, err.code == ISC_EAUTH ? 400 : isc_api_status_for(err.code),
		                    "%s", err.msg);
		goto out;
	}
	isc_api_audit_target(c, org.id, d.id);
	/* The cacher starts on it now rather than at its next look (datasets_cache.c). */
	isc_dataset_cacher_kick();
	isc_api_reply_json(c, 201, dataset_json(&d));
out:
	isc_dataset_cleanup(&d);
	isc_key_secret_cleanup(&secret);
	isc_config_free(cfg);
	isc_org_cleanup(&org);
	json_decref(body);
}

/* DELETE /v1/datasets/{id-or-name}[?org=O] (the org's admins): refused while Caching. */
static void datasets_remove(struct isc_api_call *c)
{
	struct isc_dataset d;
	struct isc_err err;

	if (!find_dataset(c, ISC_ROLE_ADMIN, &d))
		return;
	isc_err_clear(&err);
	if (isc_dataset_remove(c->store, c->home, &d, &err))
		isc_api_reply_err(c, &err);
	else
		isc_api_reply_json(c, 200,
		                   json_pack("{s:s, s:s, s:s, s:b}", "id", d.id, "name", d.name,
		                             "org", d.org_name, "removed", 1));
	isc_dataset_cleanup(&d);
}

const struct isc_api_route isc_api_routes_datasets[] = {
    {"GET", "/v1/datasets", datasets_list},
    {"POST", "/v1/datasets", datasets_add, ISC_API_SLOW},
    {"GET", "/v1/datasets/{}", datasets_get},
    {"DELETE", "/v1/datasets/{}", datasets_remove, ISC_API_SLOW},
    {NULL, NULL, NULL},
};
