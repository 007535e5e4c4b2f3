/*
 * The on-prem node pool (`isc nodes`): the machines cycle and interruptible
 * experiments run on, and the pool's SSH key pair. The pool is the operator's
 * (DESIGN.md: the operator manages the on-prem node pool); it belongs to no
 * organisation, so every other caller gets 403, listings included: host names,
 * login users and ports are the platform's infrastructure, not an org's data.
 *
 * A node is named in a path by its id or HOST[:PORT] (percent-encoded). The
 * key pair lives under iscd's home ($ISC_HOME/keys/onprem-pool); only its
 * public half ever leaves iscd.
 *
 * A node joins the pool only once it answered an SSH login with the pool key
 * (isc_onprem_probe, at most ISC_ONPREM_PROBE_MS, in this API thread); with
 * "force" it joins anyway, unreachable, with the reason, and iscd's probes
 * bring it up when it answers. Its host key is pinned as the probe saw it.
 */
#include "api/api_int.h"
#include "common/log.h"
#include "onprem/onprem.h"
#include "store/store_hostkeys.h"
#include "store/store_pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *node_json(const struct isc_pool_node *n)
{
	return json_pack("{s:I,s:s,s:i,s:s,s:i,s:s,s:s,s:I}", "id", (json_int_t)n->id, "host",
	                 n->host, "port", n->port, "user", n->user, "gpus", n->gpus, "state",
	                 n->state, "reason", n->reason ? n->reason : "", "added_ms",
	                 (json_int_t)n->added_ms);
}

/* GET /v1/nodes: every node, by id (the `isc nodes list --json` array). */
static void nodes_list(struct isc_api_call *c)
{
	struct isc_pool_node *v = NULL;
	struct isc_err err;
	size_t n = 0;
	json_t *arr;

	if (!isc_api_require_operator(c))
		return;
	isc_err_clear(&err);
	if (isc_store_pool_list(c->store, &v, &n, &err)) {
		isc_api_reply_err(c, &err);
		return;
	}
	arr = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(arr, node_json(&v[i]));
	isc_pool_nodes_free(v, n);
	isc_api_reply_json(c, 200, arr);
}

/* An optional whole number of the body in [lo, hi]; 1 when fine, 0 when a 400 was sent. */
static int body_int(struct isc_api_call *c, json_t *body, const char *key, int lo, int hi, int *out)
{
	json_t *v = json_object_get(body, key);
	if (!v)
		return 1;
	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
		isc_api_reply_error(c, 400, "%s: give a whole number %d..%d", key, lo, hi);
		return 0;
	}
	*out = (int)json_integer_value(v);
	return 1;
}

/*
 * A new node's probe: 0 when it answered, ISC_ECONFLICT when it did not
 * (probe->reason says why), or another code with err set. Host, port, user
 * and gpus were checked before: nothing unchecked reaches the network.
 */
static int probe_new(struct isc_api_call *c, struct isc_onprem_probe *probe, struct isc_err *err)
{
	char *pub = NULL;
	/* The pool key is made on first use: a login with a key that is not there fails. */
	int rc = isc_onprem_pool_pubkey(c->home, &pub, err);
	free(pub);
	if (rc)
		return rc;
	return isc_onprem_probe(probe) == 0 ? 0 : ISC_ECONFLICT;
}

/* Its host key, as the probe that let it in saw it, pinned under its new id. */
static void pin_new(struct isc_api_call *c, int64_t id, const struct isc_onprem_probe *probe)
{
	struct isc_err err;
	char pin[40];

	if (!probe->key_type[0])
		return; /* no handshake: pinned at its first answer to iscd */
	snprintf(pin, sizeof(pin), ISC_POOL_PIN_FMT, (long long)id);
	isc_err_clear(&err);
	if (isc_store_hostkey_forget(c->store, pin, &err) ||
	    isc_store_hostkey_check(c->store, pin, probe->key_type, probe->key_sha256, &err))
		isc_log(ISC_LOG_WARN, "pool node %lld: pinning its host key: %s", (long long)id,
		        err.msg);
}

/*
 * POST /v1/nodes {"host","port"?,"user"?,"gpus","force"?}: 201 with the node;
 * a node that does not answer: 409 with the reason, or with "force" 201 and
 * the node unreachable.
 */
static void nodes_add(struct isc_api_call *c)
{
	struct isc_onprem_probe probe = {0};
	struct isc_pool_node nd;
	struct isc_err err;
	const char *host, *user;
	char id_text[24], target[32], hp[300];
	json_t *body, *user_v, *force_v;
	int port = 22, gpus = 0, answered;
	int64_t id;

	if (!isc_api_require_operator(c) || !(body = isc_api_body_object(c)))
		return;
	host = json_string_value(json_object_get(body, "host"));
	user_v = json_object_get(body, "user");
	user = user_v ? json_string_value(user_v) : "isc";
	force_v = json_object_get(body, "force");
	isc_err_clear(&err);
	if (!host) {
		isc_api_reply_error(c, 400, "host: give the node's host name or address");
		goto out;
	}
	if (!user) {
		isc_api_reply_error(c, 400, "user: give a login name");
		goto out;
	}
	if (!json_object_get(body, "gpus")) {
		isc_api_reply_error(c, 400, "gpus: give a GPU count 1..%d", ISC_POOL_MAX_GPUS);
		goto out;
	}
	if (force_v && !json_is_boolean(force_v)) {
		isc_api_reply_error(c, 400, "force: give true or false");
		goto out;
	}
	if (!body_int(c, body, "port", 1, 65535, &port) ||
	    !body_int(c, body, "gpus", 1, ISC_POOL_MAX_GPUS, &gpus))
		goto out;
	isc_api_audit_target(c, 0, host);
	snprintf(hp, sizeof(hp), "%s:%d", host, port);
	/* Refused fields and a node already there cost no probe. */
	if (isc_store_pool_check(host, port, user, gpus, &err) == 0 &&
	    isc_store_pool_find(c->store, hp, &nd, &err) == 0) {
		isc_pool_node_cleanup(&nd);
		isc_err_set(&err, ISC_ECONFLICT, "node %s is already in the pool", hp);
	}
	if (err.code != ISC_OK && err.code != ISC_ENOTFOUND) {
		isc_api_reply_err(c, &err);
		goto out;
	}
	isc_err_clear(&err);
	probe = (struct isc_onprem_probe){
	    .home = c->home, .host = host, .port = port, .user = user, .check_needs = 1};
	answered = probe_new(c, &probe, &err);
	/* It answers, but a job would fail there: refused with the node's own words. */
	if (answered == ISC_ECONFLICT && probe.cannot_run && !json_is_true(force_v)) {
		isc_api_reply_error(c, 409,
		                    "node %s answers, but %s; not added (docs/queue.md, \"What a "
		                    "pool node needs\"; --force adds it marked unreachable with "
		                    "this reason)",
		                    hp, probe.reason);
		goto out;
	}
	if (answered == ISC_ECONFLICT && !json_is_true(force_v)) {
		isc_api_reply_error(c, 409,
		                    "node %s@%s does not answer: %s; not added (with \"force\": "
		                    "true it is added unreachable, and iscd marks it up once it "
		                    "answers)",
		                    user, hp, probe.reason);
		goto out;
	}
	if (answered && answered != ISC_ECONFLICT) {
		isc_api_reply_err(c, &err);
		goto out;
	}
	if (isc_store_pool_add(c->store, host, port, user, gpus, answered ? probe.reason : NULL,
	                       &id, &err)) {
		isc_api_reply_err(c, &err);
		goto out;
	}
	snprintf(id_text, sizeof(id_text), "%lld", (long long)id);
	snprintf(target, sizeof(target), "node:%s", id_text);
	isc_api_audit_target(c, 0, target);
	if (!answered)
		pin_new(c, id, &probe);
	/* Read back, so the reply is the row as stored (state, reason, added_ms). */
	if (isc_store_pool_find(c->store, id_text, &nd, &err)) {
		isc_api_reply_err(c, &err);
	} else {
		isc_api_reply_json(c, 201, node_json(&nd));
		isc_pool_node_cleanup(&nd);
	}
out:
	json_decref(body);
}

/* The node of the path's {} (id or HOST[:PORT]); 1 when found, 0 when a reply was sent. */
static int find_node(struct isc_api_call *c, struct isc_pool_node *nd)
{
	struct isc_err err;
	char target[64];

	isc_err_clear(&err);
	if (isc_store_pool_find(c->store, c->params[0], nd, &err)) {
		isc_api_reply_err(c, &err);
		return 0;
	}
	snprintf(target, sizeof(target), "node:%lld", (long long)nd->id);
	isc_api_audit_target(c, 0, target);
	return 1;
}

/* POST /v1/nodes/{node}/drain and /undrain: the node as it is now. */
static void set_state(struct isc_api_call *c, const char *state)
{
	struct isc_pool_node nd, now;
	struct isc_err err;
	char id_text[24];

	if (!isc_api_require_operator(c) || !find_node(c, &nd))
		return;
	isc_err_clear(&err);
	snprintf(id_text, sizeof(id_text), "%lld", (long long)nd.id);
	/* Read back: an undrained node whose last probe failed is unreachable, not up. */
	if (isc_store_pool_set_state(c->store, nd.id, state, &err) ||
	    isc_store_pool_find(c->store, id_text, &now, &err)) {
		isc_api_reply_err(c, &err);
	} else {
		isc_api_reply_json(c, 200, node_json(&now));
		isc_pool_node_cleanup(&now);
	}
	isc_pool_node_cleanup(&nd);
}

static void nodes_drain(struct isc_api_call *c)
{
	set_state(c, "draining");
}

static void nodes_undrain(struct isc_api_call *c)
{
	set_state(c, "up");
}

/* DELETE /v1/nodes/{node}: 409 naming the experiment while a run holds it. */
static void nodes_remove(struct isc_api_call *c)
{
	struct isc_pool_node nd;
	struct isc_err err;

	if (!isc_api_require_operator(c) || !find_node(c, &nd))
		return;
	isc_err_clear(&err);
	if (isc_store_pool_remove(c->store, nd.id, &err))
		isc_api_reply_err(c, &err);
	else
		isc_api_reply_json(c, 200,
		                   json_pack("{s:I,s:s,s:i,s:b}", "id", (json_int_t)nd.id, "host",
		                             nd.host, "port", nd.port, "removed", 1));
	isc_pool_node_cleanup(&nd);
}

/*
 * GET /v1/nodes/pubkey: {"public_key"}, the line for each node's authorized_keys.
 * The pair is made on first use (a read of the pool's identity, not a change of
 * the pool: no audit row), under iscd's home, owner-only.
 */
static void nodes_pubkey(struct isc_api_call *c)
{
	struct isc_err err;
	char *pub = NULL;
	int rc;

	if (!isc_api_require_operator(c))
		return;
	isc_err_clear(&err);
	rc = isc_onprem_pool_pubkey(c->home, &pub, &err);
	if (rc) {
		isc_api_reply_err(c, &err);
		return;
	}
	isc_api_reply_json(c, 200, json_pack("{s:s}", "public_key", pub));
	free(pub);
}

const struct isc_api_route isc_api_routes_nodes[] = {
    {"GET", "/v1/nodes", nodes_list},
    {"POST", "/v1/nodes", nodes_add, ISC_API_SLOW},
    {"GET", "/v1/nodes/pubkey", nodes_pubkey},
    {"POST", "/v1/nodes/{}/drain", nodes_drain},
    {"POST", "/v1/nodes/{}/undrain", nodes_undrain},
    {"DELETE", "/v1/nodes/{}", nodes_remove},
    {NULL, NULL, NULL},
};
