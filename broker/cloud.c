/*
 * The broker's bridge to the provider drivers. A session is made per call:
 * session_new does no network I/O (it resolves credentials and endpoints), so
 * this keeps workers from sharing driver state across threads.
 */
#include "broker/broker_int.h"

#include "common/log.h"
#include "providers/provider_config.h"

#include <stdlib.h>
#include <string.h>

static int session_open(struct isc_broker *b, const char *provider, const char *account,
                        const char *region, struct isc_provider_session **out, struct isc_err *err)
{
	int rc = broker_cloud_configured(b, provider, err);
	if (rc)
		return rc;
	/* BYO cloud keys will name their account here; until then only the broker's own. */
	if (strcmp(account, "default") != 0)
		return isc_err_set(err, ISC_EINVALID,
		                   "cloud key accounts are not supported yet ('%s')", account);
	return isc_provider_session_open(b->config, provider, region, out, err);
}

int broker_cloud_configured(struct isc_broker *b, const char *provider, struct isc_err *err)
{
	if (!isc_provider_find(provider))
		return isc_err_set(err, ISC_EINVALID, "no driver for provider '%s' in this build",
		                   provider);
	if (!isc_config_provider(b->config, provider))
		return isc_err_set(err, ISC_EINVALID,
		                   "provider '%s' is not configured in config.toml", provider);
	return 0;
}

static char **split_zones(const char *zones, size_t *n)
{
	char **out = NULL, *copy = strdup(zones), *save = NULL, *tok;
	*n = 0;
	if (!copy)
		return NULL;
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char **grown = realloc(out, (*n + 1) * sizeof(*out));
		if (!grown)
			break;
		out = grown;
		out[(*n)++] = strdup(tok);
	}
	free(copy);
	return out;
}

int broker_cloud_launch(struct isc_broker *b, struct isc_store *s, const struct isc_cluster *c,
                        const struct broker_candidate *cand, const char *token, const char *pubkey,
                        struct isc_err *err)
{
	struct isc_provider_session *sess = NULL;
	struct isc_launch_result res = {0};
	struct isc_launch_spec spec = {0};
	struct isc_kv tags[3] = {{ISC_TAG_BROKER, b->config->broker_id},
	                         {ISC_TAG_CLUSTER, c->id},
	                         {ISC_TAG_EXPERIMENT, c->experiment_id}};
	size_t n_zones = 0;
	char **zones = split_zones(cand->zones, &n_zones);
	int rc;

	if ((rc = session_open(b, c->provider, c->account, c->region, &sess, err)))
		goto out;
	spec.instance_type = cand->instance_type;
	spec.spot = cand->spot;
	spec.zones = (const char *const *)zones;
	spec.n_zones = n_zones;
	spec.count = (unsigned)c->nnodes;
	spec.idempotency_token = token;
	spec.tags = tags;
	spec.n_tags = 3;
	spec.ssh_public_key = pubkey;
	rc = sess->provider->launch_gang(sess, &spec, &res, err);
	if (rc)
		goto out;
	if (isc_store_begin(s, err) == 0) {
		for (size_t i = 0; i < res.n_nodes && !rc; i++) {
			struct isc_node nd = {0};
			nd.cluster_id = c->id;
			nd.rank = (int)i;
			nd.instance_id = res.nodes[i].id;
			nd.state = (char *)isc_node_state_name(res.nodes[i].state);
			nd.private_ip = res.nodes[i].private_ip;
			nd.public_ip = res.nodes[i].public_ip;
			nd.zone = res.nodes[i].zone;
			nd.price_micros = c->price_micros;
			nd.launched_at_ms = res.nodes[i].launched_at_ms;
			rc = isc_store_node_add(s, &nd, err);
		}
		if (!rc)
			rc = isc_store_cluster_set_zone(s, c->id, res.zone, err);
		if (!rc)
			rc = isc_store_commit(s, err);
		if (rc)
			isc_store_rollback(s);
	} else {
		rc = ISC_EIO;
	}
out:
	isc_launch_result_cleanup(&res);
	if (sess)
		sess->provider->session_free(sess);
	for (size_t i = 0; i < n_zones; i++)
		free(zones[i]);
	free(zones);
	return rc;
}

void broker_instances_free(struct broker_instance *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].instance_id);
		free(v[i].state);
		free(v[i].private_ip);
		free(v[i].public_ip);
		free(v[i].zone);
		free(v[i].cluster_id);
	}
	free(v);
}

int broker_cloud_describe(struct isc_broker *b, const char *provider, const char *account,
                          const char *region, struct broker_instance **out, size_t *n,
                          struct isc_err *err)
{
	struct isc_provider_session *sess = NULL;
	struct isc_node_info *infos = NULL;
	struct broker_instance *v = NULL;
	size_t n_infos = 0;
	int rc;

	*out = NULL;
	*n = 0;
	if ((rc = session_open(b, provider, account, region, &sess, err)))
		return rc;
	rc = sess->provider->describe(sess, b->config->broker_id, &infos, &n_infos, err);
	sess->provider->session_free(sess);
	if (rc)
		return rc;
	v = calloc(n_infos ? n_infos : 1, sizeof(*v));
	if (!v) {
		isc_node_infos_free(infos, n_infos);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < n_infos; i++) {
		v[i].instance_id = strdup(infos[i].id);
		v[i].state = strdup(isc_node_state_name(infos[i].state));
		v[i].private_ip = strdup(infos[i].private_ip);
		v[i].public_ip = strdup(infos[i].public_ip);
		v[i].zone = strdup(infos[i].zone);
		v[i].cluster_id = infos[i].cluster_id[0] ? strdup(infos[i].cluster_id) : NULL;
		v[i].launched_at_ms = infos[i].launched_at_ms;
		v[i].notice_at_ms =
		    infos[i].interruption_noticed
		        ? (infos[i].interruption_at_ms ? infos[i].interruption_at_ms : 1)
		        : 0;
	}
	isc_node_infos_free(infos, n_infos);
	*out = v;
	*n = n_infos;
	return 0;
}

int broker_cloud_terminate(struct isc_broker *b, const char *provider, const char *account,
                           const char *region, const char *const *ids, size_t n,
                           struct isc_err *err)
{
	struct isc_provider_session *sess = NULL;
	int rc;

	if ((rc = session_open(b, provider, account, region, &sess, err)))
		return rc;
	rc = sess->provider->terminate(sess, ids, n, err);
	sess->provider->session_free(sess);
	if (!rc)
		isc_log(ISC_LOG_INFO, "terminate requested for %zu %s instance(s) in %s", n,
		        provider, region);
	return rc;
}
