/*
 * Placement: the ranked shapes for an experiment (the shapes module does the
 * ranking), kept to the providers and regions configured for bursts.
 */
#include "broker/broker_int.h"

#include "shapes/catalog.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

void broker_candidate_cleanup(struct broker_candidate *c)
{
	free(c->shape_id);
	free(c->provider);
	free(c->region);
	free(c->instance_type);
	free(c->zones);
	memset(c, 0, sizeof(*c));
}

void broker_candidates_free(struct broker_candidate *c, size_t n)
{
	for (size_t i = 0; i < n; i++)
		broker_candidate_cleanup(&c[i]);
	free(c);
}

static int region_configured(const struct isc_config *cfg, const char *provider, const char *region)
{
	const struct isc_provider_config *pc = isc_config_provider(cfg, provider);
	if (!pc)
		return 0;
	for (size_t i = 0; i < pc->n_regions; i++)
		if (strcmp(pc->regions[i], region) == 0)
			return 1;
	return 0;
}

int broker_place(struct isc_broker *b, struct isc_store *s, const struct isc_experiment *e,
                 struct broker_candidate **out, size_t *n, struct isc_err *err)
{
	struct isc_catalog *cat = NULL;
	int rc = isc_catalog_load(s, &cat, err);
	if (!rc)
		rc = broker_place_in(b, cat, e, out, n, err);
	isc_catalog_free(cat);
	return rc;
}

int broker_place_in(struct isc_broker *b, const struct isc_catalog *cat,
                    const struct isc_experiment *e, struct broker_candidate **out, size_t *n,
                    struct isc_err *err)
{
	struct isc_rank_request req = {0};
	struct isc_ranking ranking = {0};
	struct broker_candidate *cands = NULL;
	const char **priority = NULL;
	json_t *spec, *list;
	size_t count = 0;
	int rc;

	*out = NULL;
	*n = 0;
	spec = json_loads(e->spec_json, 0, NULL);
	if (!spec)
		return isc_err_set(err, ISC_EINVALID, "experiment %s has an unreadable spec",
		                   e->id);
	list = json_object_get(spec, "burst_shape_priority_list");
	if (json_is_array(list) && json_array_size(list) > 0) {
		priority = calloc(json_array_size(list), sizeof(*priority));
		if (!priority) {
			json_decref(spec);
			return isc_err_set(err, ISC_ENOMEM, "out of memory");
		}
		for (size_t i = 0; i < json_array_size(list); i++)
			priority[req.n_priority++] = json_string_value(json_array_get(list, i));
	}
	req.gpus = e->gpus;
	req.priority = priority;
	/* burst_rank (absent: price), as validated when the experiment was written */
	if (json_is_string(json_object_get(spec, "burst_rank")) &&
	    isc_rank_mode_parse(json_string_value(json_object_get(spec, "burst_rank")), &req.mode))
		req.mode = ISC_RANK_PRICE;
	rc = isc_catalog_rank(cat, &req, &ranking, err);
	/* A list the user wrote is a constraint: none of its ids left is no placement, never
	 * the price ranking of every shape (isc burst refuses such a list up front). */
	if (!rc && req.n_priority > 0 && !ranking.from_priority)
		rc = isc_err_set(err, ISC_ENOTFOUND,
		                 "none of the %zu id(s) of burst_shape_priority_list names a shape "
		                 "of the catalog",
		                 req.n_priority);
	if (!rc) {
		cands = calloc(ranking.n ? ranking.n : 1, sizeof(*cands));
		if (!cands)
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	for (size_t i = 0; !rc && i < ranking.n; i++) {
		const struct isc_rank_entry *r = &ranking.entries[i];
		struct broker_candidate *c;
		if (!region_configured(b->config, r->shape->provider, r->shape->region))
			continue;
		c = &cands[count++];
		c->shape_id = strdup(r->shape->display_id);
		c->provider = strdup(r->shape->provider);
		c->region = strdup(r->shape->region);
		c->instance_type = strdup(r->shape->instance_type);
		c->zones = strdup(r->shape->zones);
		c->spot = r->shape->spot;
		c->nnodes = r->nnodes;
		c->nproc = r->nproc;
		c->node_price_micros = r->shape->price_micros;
		if (!c->shape_id || !c->provider || !c->region || !c->instance_type || !c->zones)
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	if (!rc && count == 0)
		rc = isc_err_set(
		    err, ISC_ENOTFOUND,
		    "none of the %zu ranked shape(s) is in a configured provider region%s",
		    ranking.n, ranking.from_priority ? " (from burst_shape_priority_list)" : "");
	isc_ranking_cleanup(&ranking);
	free(priority);
	json_decref(spec);
	if (rc) {
		broker_candidates_free(cands, count);
		return rc;
	}
	*out = cands;
	*n = count;
	return 0;
}
