/*
 * Organisations' own cloud keys (docs/keys.md): an org's admins add, list,
 * verify and remove its keys; the operator sees every key and rotates the
 * master key. A key of an org the caller is not a member of is 404, word for
 * word as a key that does not exist; members and finance get 403.
 *
 * The secret arrives in the body of POST /v1/keys only, over the Unix socket
 * or over TCP from a loopback address (a plain-HTTP listener elsewhere would
 * carry it in clear). It is verified with the cloud, sealed, and never sent
 * back; the request body is wiped once read.
 */
#include "api/api_int.h"
#include "api/credentials.h"
#include "config/config.h"
#include "keys/keys.h"
#include "store/store_experiments.h"
#include "store/store_keys.h"

#include <openssl/crypto.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *key_json(const struct isc_cloud_key *k)
{
	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:s}", "id",
	                 k->id, "org", k->org_name, "provider", k->provider, "name", k->name,
	                 "account", k->account, "principal", k->principal, "regions", k->regions,
	                 "state", k->state, "state_reason", k->state_reason, "added_by",
	                 k->added_by, "added_at_ms", (json_int_t)k->created_at_ms, "verified_at_ms",
	                 (json_int_t)k->verified_at_ms, "fingerprint", k->fingerprint);
}

/* The key by id when the caller is an admin of its org (or the operator); 0 when replied. */
static int find_key(struct isc_api_call *c, const char *id, struct isc_cloud_key *k)
{
	char missing[160];
	struct isc_err err;
	int rc;

	snprintf(missing, sizeof(missing), "no cloud key '%.64s'", id);
	isc_err_clear(&err);
	rc = isc_store_key_get(c->store, id, k, &err);
	if (rc == ISC_ENOTFOUND) {
		isc_api_reply_error(c, 404, "%s", missing);
		return 0;
	}
	if (rc) {
		isc_api_reply_err(c, &err);
		return 0;
	}
	if (!isc_api_require_org_role(c, k->org_id, ISC_ROLE_ADMIN, missing)) {
		isc_cloud_key_cleanup(k);
		return 0;
	}
	isc_api_audit_target(c, k->org_id, k->id);
	return 1;
}

static int load_config(struct isc_api_call *c, struct isc_config **cfg)
{
	struct isc_err err;
	isc_err_clear(&err);
	if (isc_config_load(c->home, cfg, &err)) {
		isc_api_reply_err(c, &err);
		return 0;
	}
	return 1;
}

/*
 * GET /v1/keys[?org=O&limit=N&after=CURSOR]: the keys of the orgs where the caller is an
 * admin, by org, provider and name, a page at a time.
 */
static void keys_list(struct isc_api_call *c)
{
	const char *org_name = isc_api_query(c, "org"), *after[3] = {NULL, NULL, NULL};
	struct isc_org org = {0};
	struct isc_cloud_key *list = NULL;
	struct isc_api_page page;
	struct isc_err err;
	char buf[256];
	size_t n = 0;
	json_t *arr;

	/* The cursor: ORG/PROVIDER/NAME of the page's last key. */
	if (!isc_api_page_parse(c, ISC_API_PAGE_DEFAULT, ISC_API_PAGE_MAX, &page) ||
	    (page.after && !isc_api_page_cursor(c, page.after, 3, after, buf, sizeof(buf))))
		return;
	if (org_name && !isc_api_find_org(c, org_name, &org))
		return;
	isc_err_clear(&err);
	if (isc_store_key_page(c->store, c->is_operator, c->user_id, org_name ? org.id : 0,
	                       after[0], after[1], after[2], page.limit + 1, &list, &n, &err)) {
		isc_org_cleanup(&org);
		isc_api_reply_err(c, &err);
		return;
	}
	arr = json_array();
	for (size_t i = 0; i < n && i < page.limit; i++)
		json_array_append_new(arr, key_json(&list[i]));
	if (n > page.limit) {
		const struct isc_cloud_key *last = &list[page.limit - 1];
		char cursor[sizeof(c->next_cursor)];
		snprintf(cursor, sizeof(cursor), "%s/%s/%s", last->org_name, last->provider,
		         last->name);
		isc_api_page_next(c, cursor);
	}
	isc_cloud_key_list_free(list, n);
	isc_org_cleanup(&org);
	isc_api_reply_json(c, 200, arr);
}

/* GET /v1/keys/{id} */
static void keys_get(struct isc_api_call *c)
{
	struct isc_cloud_key k;
	if (!find_key(c, c->params[0], &k))
		return;
	isc_api_reply_json(c, 200, key_json(&k));
	isc_cloud_key_cleanup(&k);
}

/*
 * POST /v1/keys {"org","provider","name"?,"regions"?,"credentials":{...}} (the org's
 * admins): verified with the cloud, then sealed and stored.
 */
static void keys_add(struct isc_api_call *c)
{
	json_t *body;
	const char *org_name, *provider;
	struct isc_org org = {0};
	struct isc_key_secret secret = {0};
	struct isc_key_add req = {0};
	struct isc_config *cfg = NULL;
	struct isc_identity who;
	struct isc_err err;
	char *id = NULL, by[128];

	if (!isc_api_secret_transport_ok(c)) {
		OPENSSL_cleanse((char *)c->body, c->body_len);
		isc_api_reply_error(c, 400,
		                    "cloud keys are accepted only over the Unix socket or from a "
		                    "loopback address, not over TCP from %s",
		                    c->address);
		return;
	}
	body = isc_api_body_object(c);
	/* The parsed copy is all that is needed; the raw body held the secret. */
	OPENSSL_cleanse((char *)c->body, c->body_len);
	if (!body)
		return;
	org_name = json_string_value(json_object_get(body, "org"));
	provider = json_string_value(json_object_get(body, "provider"));
	if (!org_name || !provider) {
		isc_api_reply_error(c, 400, "org and provider are required");
		goto out;
	}
	if (!isc_api_find_org(c, org_name, &org) ||
	    !isc_api_require_org_role(c, org.id, ISC_ROLE_ADMIN, "no such organisation"))
		goto out;
	isc_api_audit_target(c, org.id, provider);
	if (!isc_api_body_credentials(c, body, NULL, &secret) || !load_config(c, &cfg))
		goto out;
	snprintf(by, sizeof(by), "%s", c->user ? c->user : "?");
	req.org = org_name;
	req.provider = provider;
	req.name = json_string_value(json_object_get(body, "name"));
	req.regions = json_string_value(json_object_get(body, "regions"));
	req.added_by = by;
	isc_err_clear(&err);
	if (isc_keys_add(c->store, c->home, cfg, &req, &secret, &id, &who, &err)) {
		/* A refusal by the cloud is the caller's input, not our authorisation. */
		isc_api_reply_error(c, err.code == ISC_EAUTH ? 400 : isc_api_status_for(err.code),
		                    "%s", err.msg);
		goto out;
	}
	isc_api_audit_target(c, org.id, id);
	isc_api_reply_json(c, 201,
	                   json_pack("{s:s, s:s, s:s, s:s, s:s}", "id", id, "org", org_name,
	                             "provider", provider, "account", who.account, "principal",
	                             who.principal));
out:
	isc_key_secret_cleanup(&secret);
	isc_config_free(cfg);
	isc_org_cleanup(&org);
	free(id);
	json_decref(body);
}

/* POST /v1/keys/{id}/verify */
static void keys_verify(struct isc_api_call *c)
{
	struct isc_cloud_key k;
	struct isc_config *cfg = NULL;
	struct isc_identity who;
	struct isc_err err;

	if (!find_key(c, c->params[0], &k))
		return;
	if (load_config(c, &cfg)) {
		isc_err_clear(&err);
		if (isc_keys_verify(c->store, c->home, cfg, k.id, &who, &err))
			isc_api_reply_error(
			    c, err.code == ISC_EAUTH ? 400 : isc_api_status_for(err.code),
			    "key %s failed verification: %s", k.id, err.msg);
		else
			isc_api_reply_json(c, 200,
			                   json_pack("{s:s, s:b, s:s, s:s}", "id", k.id, "verified",
			                             1, "account", who.account, "principal",
			                             who.principal));
	}
	isc_config_free(cfg);
	isc_cloud_key_cleanup(&k);
}

/*
 * DELETE /v1/keys/{id}[?force=1]: removes a key without live clusters. With force,
 * a key with live clusters goes to 'removing' (no new launch), their experiments are
 * cancelled, and 202 {"state":"removing","live_clusters":N} is answered; the caller
 * asks again until iscd has terminated them (then 200).
 */
static void keys_remove(struct isc_api_call *c)
{
	const char *force_q = isc_api_query(c, "force");
	int force = force_q && (!strcmp(force_q, "1") || !strcmp(force_q, "true"));
	struct isc_cloud_key k;
	struct isc_err err;
	int64_t live = 0;
	char **exps = NULL;
	size_t n = 0;

	if (!find_key(c, c->params[0], &k))
		return;
	isc_err_clear(&err);
	/* Counted and removed in one transaction: no cluster starts on the key in between. */
	if (isc_store_key_delete_unused(c->store, k.id, &live, &err) == 0) {
		isc_api_reply_json(c, 200,
		                   json_pack("{s:s, s:b, s:s, s:s, s:s}", "id", k.id, "removed", 1,
		                             "provider", k.provider, "account", k.account, "org",
		                             k.org_name));
	} else if (live == 0) {
		isc_api_reply_err(c, &err);
	} else if (!force) {
		isc_api_reply_error(c, 409,
		                    "key %s has %lld live cluster(s); they must end first (or use "
		                    "force=1 to cancel their experiments and wait for them to be "
		                    "terminated)",
		                    k.id, (long long)live);
	} else {
		if ((strcmp(k.state, "removing") != 0 &&
		     isc_store_key_set_state(c->store, k.id, "removing", "isc keys remove --force",
		                             0, &err)) ||
		    isc_store_key_live_experiments(c->store, k.id, &exps, &n, &err)) {
			isc_api_reply_err(c, &err);
		} else {
			json_t *cancelled = json_array();
			char by[160];
			snprintf(by, sizeof(by), "%s (isc keys remove --force %s)",
			         c->is_operator || !c->user ? "the operator" : c->user, k.id);
			for (size_t i = 0; i < n; i++) {
				if (isc_store_experiment_request_cancel_by(c->store, exps[i], by,
				                                           &err) == 0)
					json_array_append_new(cancelled, json_string(exps[i]));
				free(exps[i]);
			}
			free(exps);
			isc_api_reply_json(c, 202,
			                   json_pack("{s:s, s:s, s:I, s:o}", "id", k.id, "state",
			                             "removing", "live_clusters", (json_int_t)live,
			                             "cancelling", cancelled));
		}
	}
	isc_cloud_key_cleanup(&k);
}

/* POST /v1/keys/rotate-master {"new_key_file"?} (operator). */
static void keys_rotate(struct isc_api_call *c)
{
	json_t *body;
	const char *new_file;
	struct isc_err err;
	size_t count = 0;

	if (!isc_api_require_operator(c))
		return;
	body = c->body_len ? isc_api_body_object(c) : json_object();
	if (!body)
		return;
	new_file = json_string_value(json_object_get(body, "new_key_file"));
	isc_api_audit_target(c, 0, "master-key");
	isc_err_clear(&err);
	if (isc_keys_rotate_master(c->store, c->home, new_file, &count, &err))
		isc_api_reply_err(c, &err);
	else
		isc_api_reply_json(c, 200, json_pack("{s:I}", "reencrypted", (json_int_t)count));
	json_decref(body);
}

const struct isc_api_route isc_api_routes_keys[] = {
    {"GET", "/v1/keys", keys_list},
    {"POST", "/v1/keys", keys_add, ISC_API_SLOW},
    {"POST", "/v1/keys/rotate-master", keys_rotate},
    {"GET", "/v1/keys/{}", keys_get},
    {"POST", "/v1/keys/{}/verify", keys_verify, ISC_API_SLOW},
    {"DELETE", "/v1/keys/{}", keys_remove},
    {NULL, NULL, NULL},
};
