/*
 * The in-memory catalog and the ranking. Precomputed at load: shapes sorted
 * by id (so an index order is the id order, the last tie-breaker) and, for
 * each distinct GPUs-per-node count, the shapes sorted by node price. For a
 * request of G GPUs every shape with g GPUs per node needs the same NNODES,
 * so within one group the cluster price order is the node price order; the
 * ranking merges the groups' lists and stops after `limit` entries.
 */
#include "shapes/catalog.h"
#include "store/store_risk.h"
#include "common/suggest.h"

#include "shapes/accelerator.h"
#include "shapes/throughput.h"

#include "store/store_shapes.h"

#include <ctype.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/*
 * What the merge reads for one shape, packed so that walking a group is a
 * sequential scan (the shapes themselves are in id order, so following them
 * in price order would miss the cache on every step). Filters compare
 * interned ids, never strings.
 */
struct slot {
	int64_t price;   /* node price, micros */
	uint32_t shape;  /* index into shapes */
	uint32_t gpu;    /* interned lower-case gpu_type */
	uint32_t region; /* interned lower-case region */
	uint8_t spot;
	uint8_t provider;    /* interned provider */
	uint8_t cuda;        /* the accelerator runs CUDA images (shapes/accelerator.h) */
	int64_t gpu_mem_mib; /* per GPU; 0 when unknown */
};

struct group {
	int gpus_per_node;
	struct slot *slots; /* by (price, shape index) */
	size_t n;
};

/* A sorted set of lower-case strings; a string's id is its index. */
struct names {
	char **v;
	size_t n;
};

/*
 * The store's risk facts, sorted, shared by every catalog loaded while they have not
 * changed: iscd loads a catalog per request and per placement, and reading every fact
 * each time would cost more than the ranking (tens of thousands of placement scores).
 * The store's risk version (isc_store_risk_version) says when to read them again.
 */
enum fact_kind { K_OTHER, K_BAND, K_SCORE, K_OCI, K_GCP, K_HISTORY };

/* What the ranking tests of a fact, classified once when the facts are read. */
struct fact_tag {
	uint8_t kind;   /* enum fact_kind */
	uint8_t market; /* 0: both, 1: spot, 2: on-demand */
	uint8_t zoned;  /* the fact is for one zone */
};

/* The facts of one (provider, region, instance type): facts[lo..hi). hi 0: an empty slot. */
struct fact_range {
	uint64_t hash;
	uint32_t lo, hi;
};

struct risk_set {
	struct isc_risk_fact *facts;
	struct fact_tag *tags; /* parallel to facts */
	size_t n;
	/*
	 * Each key's range, hashed: a catalog finds its shapes' ranges in one probe each
	 * instead of a binary search of case-blind string compares over every fact (a
	 * fifth of an answer's CPU with 165,000 facts). Open addressing, a power of two.
	 */
	struct fact_range *ranges;
	size_t ranges_mask;
	int64_t version;
	int refs; /* under cache_mu */
};

static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static struct risk_set *cache; /* the last set read, one reference held by the cache */

static void risk_set_drop(struct risk_set *r)
{
	int last;
	if (!r)
		return;
	pthread_mutex_lock(&cache_mu);
	last = --r->refs == 0;
	pthread_mutex_unlock(&cache_mu);
	if (last) {
		isc_risk_fact_list_free(r->facts, r->n);
		free(r->tags);
		free(r->ranges);
		free(r);
	}
}

struct isc_catalog {
	struct isc_shape *shapes; /* sorted by id */
	size_t n;
	struct group *groups;
	size_t n_groups;
	struct names gpus, regions, providers;
	/* Risk facts sorted by (provider, region, instance type), and each shape's range. */
	struct risk_set *risk; /* shared, read-only; NULL: none */
	const struct isc_risk_fact *facts;
	const struct fact_tag *tags;
	size_t n_facts;
	uint32_t *risk_lo, *risk_hi; /* per shape, NULL until isc_catalog_set_risk */
	int *tput_milli;             /* per shape: relative throughput x 1000, -1 unknown */
};

static int cmp_shape_id(const void *a, const void *b)
{
	return strcmp(((const struct isc_shape *)a)->id, ((const struct isc_shape *)b)->id);
}

static int cmp_slot(const void *a, const void *b)
{
	const struct slot *x = a, *y = b;
	if (x->price != y->price)
		return x->price < y->price ? -1 : 1;
	return (x->shape > y->shape) - (x->shape < y->shape);
}

static int cmp_pstr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void names_free(struct names *nm)
{
	for (size_t i = 0; i < nm->n; i++)
		free(nm->v[i]);
	free(nm->v);
	memset(nm, 0, sizeof(*nm));
}

/* Builds the set of lower-cased values of one string field of the shapes. */
static int names_build(struct names *nm, const struct isc_shape *shapes, size_t n, size_t off)
{
	memset(nm, 0, sizeof(*nm));
	if (!(nm->v = calloc(n ? n : 1, sizeof(*nm->v))))
		return ISC_ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const char *val = *(char *const *)((const char *)&shapes[i] + off);
		if (!(nm->v[nm->n++] = isc_shape_id_key(val ? val : "")))
			return ISC_ENOMEM;
	}
	if (nm->n)
		qsort(nm->v, nm->n, sizeof(*nm->v), cmp_pstr);
	size_t w = 0;
	for (size_t i = 0; i < nm->n; i++) {
		if (w && !strcmp(nm->v[w - 1], nm->v[i]))
			free(nm->v[i]);
		else
			nm->v[w++] = nm->v[i];
	}
	nm->n = w;
	return 0;
}

/* The id of a name (any case); UINT32_MAX when absent. */
static uint32_t names_find(const struct names *nm, const char *name)
{
	size_t lo = 0, hi = nm->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcasecmp(nm->v[mid], name);
		if (c == 0)
			return (uint32_t)mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return UINT32_MAX;
}

void isc_catalog_free(struct isc_catalog *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n_groups; i++)
		free(c->groups[i].slots);
	free(c->groups);
	names_free(&c->gpus);
	names_free(&c->regions);
	names_free(&c->providers);
	risk_set_drop(c->risk);
	free(c->risk_lo);
	free(c->risk_hi);
	free(c->tput_milli);
	isc_shape_list_free(c->shapes, c->n);
	free(c);
}

int isc_catalog_new(struct isc_shape *shapes, size_t n, struct isc_catalog **out,
                    struct isc_err *err)
{
	struct isc_catalog *c = calloc(1, sizeof(*c));
	if (!c) {
		isc_shape_list_free(shapes, n);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	c->shapes = shapes;
	c->n = n;
	if (n)
		qsort(c->shapes, n, sizeof(*c->shapes), cmp_shape_id);
	if (n > UINT32_MAX) {
		isc_catalog_free(c);
		return isc_err_set(err, ISC_EINVALID, "catalog too large");
	}
	if (names_build(&c->gpus, shapes, n, offsetof(struct isc_shape, gpu_type)) ||
	    names_build(&c->regions, shapes, n, offsetof(struct isc_shape, region)) ||
	    names_build(&c->providers, shapes, n, offsetof(struct isc_shape, provider)))
		goto oom;
	for (size_t i = 0; i < n; i++) {
		struct group *g = NULL;
		for (size_t k = 0; k < c->n_groups; k++)
			if (c->groups[k].gpus_per_node == shapes[i].gpus_per_node)
				g = &c->groups[k];
		if (!g) {
			struct group *ng = realloc(c->groups, (c->n_groups + 1) * sizeof(*ng));
			if (!ng)
				goto oom;
			c->groups = ng;
			g = &c->groups[c->n_groups++];
			memset(g, 0, sizeof(*g));
			g->gpus_per_node = shapes[i].gpus_per_node;
			/* Sized for the worst case: n is bounded by the catalog. */
			if (!(g->slots = malloc(n * sizeof(*g->slots))))
				goto oom;
		}
		g->slots[g->n++] = (struct slot){
		    .price = shapes[i].price_micros,
		    .shape = (uint32_t)i,
		    .gpu = names_find(&c->gpus, shapes[i].gpu_type),
		    .region = names_find(&c->regions, shapes[i].region),
		    .spot = (uint8_t)(shapes[i].spot != 0),
		    .provider = (uint8_t)names_find(&c->providers, shapes[i].provider),
		    .cuda = (uint8_t)isc_accelerator_of(shapes[i].gpu_type)->cuda,
		    .gpu_mem_mib = shapes[i].gpus_per_node > 0
		                       ? shapes[i].gpu_mem_mib / shapes[i].gpus_per_node
		                       : 0,
		};
	}
	for (size_t k = 0; k < c->n_groups; k++)
		qsort(c->groups[k].slots, c->groups[k].n, sizeof(struct slot), cmp_slot);
	if (!(c->tput_milli = malloc((n ? n : 1) * sizeof(*c->tput_milli))))
		goto oom;
	for (size_t i = 0; i < n; i++) {
		const struct isc_throughput *t = isc_throughput_of(shapes[i].gpu_type);
		c->tput_milli[i] = t ? t->milli : -1;
	}
	*out = c;
	return 0;
oom:
	isc_catalog_free(c);
	return isc_err_set(err, ISC_ENOMEM, "out of memory");
}

/* Facts order: provider, region, instance type (any case): one range per shape. */
static int cmp_fact_key(const struct isc_risk_fact *f, const char *provider, const char *region,
                        const char *itype)
{
	int c = strcasecmp(f->provider, provider);
	if (!c)
		c = strcasecmp(f->region, region);
	return c ? c : strcasecmp(f->instance_type, itype);
}

static int cmp_fact(const void *a, const void *b)
{
	const struct isc_risk_fact *y = b;
	return cmp_fact_key(a, y->provider, y->region, y->instance_type);
}

/* FNV-1a of the key, case-blind as cmp_fact_key. */
static uint64_t key_hash(const char *provider, const char *region, const char *itype)
{
	const char *parts[3] = {provider, region, itype};
	uint64_t h = 1469598103934665603ull;
	for (int k = 0; k < 3; k++) {
		for (const unsigned char *p = (const unsigned char *)parts[k]; *p; p++)
			h = (h ^ (uint64_t)tolower(*p)) * 1099511628211ull;
		h = (h ^ 0xffu) * 1099511628211ull; /* a separator no name byte is */
	}
	return h;
}

/* The ranges of r's sorted facts, by key. */
static int index_ranges(struct risk_set *r)
{
	size_t groups = 0, size = 16;
	for (size_t i = 0; i < r->n; i++)
		groups += i == 0 || cmp_fact(&r->facts[i - 1], &r->facts[i]) != 0;
	while (size < 2 * groups)
		size *= 2;
	if (!(r->ranges = calloc(size, sizeof(*r->ranges))))
		return ISC_ENOMEM;
	r->ranges_mask = size - 1;
	for (size_t lo = 0, hi; lo < r->n; lo = hi) {
		const struct isc_risk_fact *f = &r->facts[lo];
		uint64_t h = key_hash(f->provider, f->region, f->instance_type);
		size_t at = (size_t)h & r->ranges_mask;
		for (hi = lo + 1; hi < r->n && !cmp_fact(f, &r->facts[hi]); hi++)
			;
		while (r->ranges[at].hi)
			at = (at + 1) & r->ranges_mask;
		r->ranges[at] = (struct fact_range){h, (uint32_t)lo, (uint32_t)hi};
	}
	return 0;
}

/* A new set of one reference from facts (taken, also on failure), checked and sorted. */
static int risk_set_new(struct isc_risk_fact *facts, size_t n, int64_t version,
                        struct risk_set **out, struct isc_err *err)
{
	struct risk_set *r;
	for (size_t i = 0; i < n; i++)
		if (!facts[i].provider || !facts[i].region || !facts[i].instance_type ||
		    !facts[i].source) {
			isc_risk_fact_list_free(facts, n);
			return isc_err_set(err, ISC_EINVALID, "a risk fact without its key");
		}
	r = n > UINT32_MAX ? NULL : calloc(1, sizeof(*r));
	if (!r || !(r->tags = calloc(n ? n : 1, sizeof(*r->tags)))) {
		free(r);
		isc_risk_fact_list_free(facts, n);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	if (n)
		qsort(facts, n, sizeof(*facts), cmp_fact);
	for (size_t i = 0; i < n; i++) {
		const struct isc_risk_fact *f = &facts[i];
		struct fact_tag *t = &r->tags[i];
		t->kind = !strcmp(f->source, ISC_RISK_SPOT_ADVISOR)   ? K_BAND
		          : !strcmp(f->source, ISC_RISK_PLACEMENT)    ? K_SCORE
		          : !strcmp(f->source, ISC_RISK_OCI_CAPACITY) ? K_OCI
		          : !strcmp(f->source, ISC_RISK_GCP_ADVICE)   ? K_GCP
		          : !strcmp(f->source, ISC_RISK_HISTORY)      ? K_HISTORY
		                                                      : K_OTHER;
		t->market = !f->market || !*f->market            ? 0
		            : !strcasecmp(f->market, "spot")     ? 1
		            : !strcasecmp(f->market, "ondemand") ? 2
		                                                 : 3;
		t->zoned = f->zone && *f->zone;
	}
	r->facts = facts;
	r->n = n;
	if (index_ranges(r)) {
		isc_risk_fact_list_free(facts, n);
		free(r->tags);
		free(r);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	r->version = version;
	r->refs = 1;
	*out = r;
	return 0;
}

/* Points the catalog at r (taking the caller's reference) and finds each shape's range. */
static int attach_risk(struct isc_catalog *c, struct risk_set *r, struct isc_err *err)
{
	risk_set_drop(c->risk);
	free(c->risk_lo);
	free(c->risk_hi);
	c->risk = r;
	c->facts = r->facts;
	c->tags = r->tags;
	c->n_facts = r->n;
	c->risk_lo = malloc((c->n ? c->n : 1) * sizeof(*c->risk_lo));
	c->risk_hi = malloc((c->n ? c->n : 1) * sizeof(*c->risk_hi));
	if (!c->risk_lo || !c->risk_hi) {
		free(c->risk_lo);
		free(c->risk_hi);
		c->risk_lo = c->risk_hi = NULL;
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < c->n; i++) {
		const struct isc_shape *sh = &c->shapes[i];
		uint64_t h = key_hash(sh->provider, sh->region, sh->instance_type);
		size_t at = (size_t)h & r->ranges_mask;
		const struct fact_range *g;

		c->risk_lo[i] = c->risk_hi[i] = 0;
		for (; (g = &r->ranges[at])->hi; at = (at + 1) & r->ranges_mask)
			if (g->hash == h && !cmp_fact_key(&r->facts[g->lo], sh->provider,
			                                  sh->region, sh->instance_type)) {
				c->risk_lo[i] = g->lo;
				c->risk_hi[i] = g->hi;
				break;
			}
	}
	return 0;
}

int isc_catalog_set_risk(struct isc_catalog *c, struct isc_risk_fact *facts, size_t n,
                         struct isc_err *err)
{
	struct risk_set *r;
	int rc = risk_set_new(facts, n, -1, &r, err);
	return rc ? rc : attach_risk(c, r, err);
}

/* The store's facts: the cached set when the store's version is the cached one. */
static int risk_for(struct isc_store *s, struct risk_set **out, struct isc_err *err)
{
	struct isc_risk_fact *facts = NULL;
	struct risk_set *r = NULL, *old;
	size_t nf = 0;
	int64_t v;
	int rc = isc_store_risk_version(s, &v, err);

	if (rc)
		return rc;
	pthread_mutex_lock(&cache_mu);
	if (cache && cache->version == v) {
		cache->refs++;
		*out = cache;
		pthread_mutex_unlock(&cache_mu);
		return 0;
	}
	pthread_mutex_unlock(&cache_mu);
	if ((rc = isc_store_risk_list(s, &facts, &nf, err)) ||
	    (rc = risk_set_new(facts, nf, v, &r, err)))
		return rc;
	pthread_mutex_lock(&cache_mu);
	old = cache;
	cache = r;
	r->refs++; /* the cache's and the caller's */
	pthread_mutex_unlock(&cache_mu);
	risk_set_drop(old);
	*out = r;
	return 0;
}

int isc_catalog_load(struct isc_store *s, struct isc_catalog **out, struct isc_err *err)
{
	struct isc_shape *list;
	struct risk_set *r = NULL;
	size_t n;
	int rc = isc_store_shape_list(s, NULL, &list, &n, err);
	if (rc)
		return rc;
	if ((rc = isc_catalog_new(list, n, out, err)))
		return rc;
	if ((rc = risk_for(s, &r, err)) || (rc = attach_risk(*out, r, err))) {
		isc_catalog_free(*out);
		*out = NULL;
	}
	return rc;
}

int isc_rank_mode_parse(const char *s, enum isc_rank_mode *out)
{
	if (!strcmp(s, "price"))
		*out = ISC_RANK_PRICE;
	else if (!strcmp(s, "work"))
		*out = ISC_RANK_WORK;
	else if (!strcmp(s, "expected"))
		*out = ISC_RANK_EXPECTED;
	else
		return ISC_EINVALID;
	return 0;
}

const char *isc_rank_mode_name(enum isc_rank_mode m)
{
	return m == ISC_RANK_WORK ? "work" : m == ISC_RANK_EXPECTED ? "expected" : "price";
}

/* 1 when the shape's zone list ("a,b,c" as stored) names zone, or zone is "" (a region fact). */
static int zone_of(const char *zones, const char *zone)
{
	size_t len = strlen(zone);
	if (!len)
		return 1;
	for (const char *p = zones ? zones : ""; *p;) {
		const char *end = strpbrk(p, ",;");
		size_t l = end ? (size_t)(end - p) : strlen(p);
		if (l == len && !strncasecmp(p, zone, len))
			return 1;
		if (!end)
			break;
		p = end + 1;
	}
	/* A shape without zones (AWS: the driver picks) may land in any zone of the region. */
	return !zones || !*zones;
}

void isc_catalog_entry_risk(const struct isc_catalog *c, const struct isc_rank_entry *e,
                            struct isc_rank_risk *r)
{
	const struct isc_shape *sh = e->shape;
	size_t i = (size_t)(sh - c->shapes);
	const int want_market = sh->spot ? 1 : 2;
	int best_score_rank = INT32_MAX, region_score = 0;

	memset(r, 0, sizeof(*r));
	r->band = r->score = r->capacity = r->obtainability_milli = -1;
	r->interruptions = -1;
	for (size_t k = c->risk_lo ? c->risk_lo[i] : 0; c->risk_hi && k < c->risk_hi[i]; k++) {
		const struct isc_risk_fact *f = &c->facts[k];
		const struct fact_tag *tg = &c->tags[k];
		if ((tg->market && tg->market != want_market) || tg->kind == K_OTHER)
			continue;
		/* What cannot count for this shape, before the zone's string compares. */
		if ((tg->kind == K_BAND || tg->kind == K_SCORE) && !sh->spot)
			continue;
		if (tg->kind == K_SCORE && f->target < e->nnodes)
			continue;
		if (tg->zoned && !zone_of(sh->zones, f->zone))
			continue;
		if (tg->kind == K_BAND && sh->spot) {
			r->band = (int)f->value2;
			r->band_max_pct = (int)f->value;
			r->band_label = f->detail;
			r->band_fetched_ms = f->fetched_ms;
		} else if (tg->kind == K_SCORE && sh->spot) {
			/*
			 * The score asked for this gang's size is the one; else the nearest
			 * larger size (a gang that can have more can have this); a region's
			 * score over a zone's, and of zones the best (the launcher picks it).
			 */
			int is_region = !f->zone || !*f->zone;
			int dist = f->target == e->nnodes  ? 0
			           : f->target > e->nnodes ? f->target - e->nnodes
			                                   : -1;
			int rank;
			if (dist < 0)
				continue;
			rank = dist * 2 + !is_region;
			if (rank < best_score_rank ||
			    (rank == best_score_rank && !region_score && f->value > r->score)) {
				best_score_rank = rank;
				region_score = is_region;
				r->score = (int)f->value;
				r->score_target = f->target;
				r->score_zone = f->zone ? f->zone : "";
				r->score_fetched_ms = f->fetched_ms;
			}
		} else if (tg->kind == K_OCI) {
			/* Of the ADs, the one that has the most (the launcher tries ADs in turn).
			 */
			int avail = f->detail && !strcmp(f->detail, "AVAILABLE");
			int had = r->capacity_status && !strcmp(r->capacity_status, "AVAILABLE");
			if (!r->capacity_status || (avail && (!had || f->value > r->capacity))) {
				r->capacity = (int)f->value;
				r->capacity_status = f->detail;
				r->capacity_fetched_ms = f->fetched_ms;
			}
		} else if (tg->kind == K_GCP) {
			if (f->value > r->obtainability_milli)
				r->obtainability_milli = (int)f->value;
		} else if (tg->kind == K_HISTORY) {
			if (r->interruptions < 0)
				r->interruptions = 0;
			r->interruptions += f->value;
			r->node_seconds += f->value2;
		}
	}

	/* Interruptions per node-hour: the Spot Advisor's band per month (730 h). */
	if (!sh->spot) {
		r->node_rate = 0;
		r->rate_source = "on-demand";
	} else if (r->band >= 0) {
		r->node_rate = r->band_max_pct / 100.0 / 730.0;
		r->rate_source = ISC_RISK_SPOT_ADVISOR;
	} else {
		r->node_rate = ISC_RANK_BAND_UNKNOWN_PCT / 100.0 / 730.0;
		r->rate_source = "unknown: worst band";
	}
	/*
	 * Our own record counts once it covers a day of node-hours: a higher rate wins
	 * over the band, and without a band it replaces the worst-band guess.
	 */
	if (r->interruptions >= 0 && (r->node_seconds >= 86400 || r->interruptions > 0)) {
		double hours = r->node_seconds / 3600.0;
		double hist = r->interruptions / (hours > 1 ? hours : 1);
		if (hist > r->node_rate || (sh->spot && r->band < 0 && r->node_seconds >= 86400)) {
			r->node_rate = hist;
			r->rate_source = ISC_RISK_HISTORY;
		}
	}

	/* The chance of getting the whole gang on one attempt. */
	if (r->score > 0) {
		r->q = r->score / 10.0;
		r->q_source = ISC_RISK_PLACEMENT;
	} else if (r->capacity_status) {
		if (!strcmp(r->capacity_status, "AVAILABLE"))
			r->q = r->capacity >= e->nnodes ? 1.0 : (double)r->capacity / e->nnodes;
		else
			r->q = 0;
		r->q_source = ISC_RISK_OCI_CAPACITY;
	} else if (r->obtainability_milli >= 0) {
		r->q = r->obtainability_milli / 1000.0;
		r->q_source = ISC_RISK_GCP_ADVICE;
	} else {
		r->q = ISC_RANK_Q_UNKNOWN;
		r->q_source = "unknown";
	}
	if (r->q < ISC_RANK_Q_FLOOR)
		r->q = ISC_RANK_Q_FLOOR;
	r->factor = 1.0 + ISC_RANK_RECOVERY_HOURS * (r->node_rate * e->nnodes / r->q +
	                                             (1.0 / r->q - 1.0) / ISC_RANK_RUN_HOURS);
}

size_t isc_catalog_size(const struct isc_catalog *c)
{
	return c->n;
}

const struct isc_shape *isc_catalog_at(const struct isc_catalog *c, size_t i)
{
	return i < c->n ? &c->shapes[i] : NULL;
}

/* strcmp of a stored (lower-case) key against an id in any case. */
static int cmp_key_ci(const char *key, const char *id)
{
	for (;; key++, id++) {
		int a = (unsigned char)*key, b = tolower((unsigned char)*id);
		if (a != b || !a)
			return a - b;
	}
}

/* Index of the first shape whose id is >= id. */
static size_t lower_bound(const struct isc_catalog *c, const char *id)
{
	size_t lo = 0, hi = c->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (cmp_key_ci(c->shapes[mid].id, id) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

const struct isc_shape *isc_catalog_find(const struct isc_catalog *c, const char *id)
{
	size_t i = lower_bound(c, id);
	return i < c->n && cmp_key_ci(c->shapes[i].id, id) == 0 ? &c->shapes[i] : NULL;
}

int isc_market_parse(const char *s, enum isc_market *out)
{
	if (!strcmp(s, "any"))
		*out = ISC_MARKET_ANY;
	else if (!strcmp(s, "spot"))
		*out = ISC_MARKET_SPOT;
	else if (!strcmp(s, "ondemand") || !strcmp(s, "on-demand"))
		*out = ISC_MARKET_ONDEMAND;
	else
		return ISC_EINVALID;
	return 0;
}

int isc_shape_ids_split(char *buf, char ***ids, size_t *n)
{
	size_t cap = 1;
	for (char *p = buf; *p; p++)
		cap += *p == ',';
	if (!(*ids = calloc(cap, sizeof(**ids))))
		return ISC_ENOMEM;
	*n = 0;
	for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		while (*t == ' ')
			t++;
		if (*t)
			(*ids)[(*n)++] = t;
	}
	return 0;
}

void isc_ranking_cleanup(struct isc_ranking *r)
{
	if (!r)
		return;
	free(r->entries);
	for (size_t i = 0; i < r->n_warnings; i++)
		free(r->warnings[i]);
	free(r->warnings);
	memset(r, 0, sizeof(*r));
}

static int warn(struct isc_ranking *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int warn(struct isc_ranking *r, const char *fmt, ...)
{
	char *msg, **nw;
	va_list ap;
	va_start(ap, fmt);
	int n = vasprintf(&msg, fmt, ap);
	va_end(ap);
	if (n < 0)
		return ISC_ENOMEM;
	if (!(nw = realloc(r->warnings, (r->n_warnings + 1) * sizeof(*nw)))) {
		free(msg);
		return ISC_ENOMEM;
	}
	r->warnings = nw;
	r->warnings[r->n_warnings++] = msg;
	return 0;
}

static size_t common_prefix(const char *key, const char *id)
{
	size_t n = 0;
	while (key[n] && key[n] == tolower((unsigned char)id[n]))
		n++;
	return n;
}

static const struct isc_shape *other_market(const struct isc_catalog *c, const char *id);

/*
 * The ranking's cheap did-you-mean: the same id in the other market, else the
 * id's neighbour in sorted order when it shares most of the text (a typo near
 * the end, a missing market suffix). O(log n): the broker ranks on every
 * placement; isc_catalog_suggest is the thorough one for the user's list.
 */
static const struct isc_shape *suggest(const struct isc_catalog *c, const char *id)
{
	size_t len = strlen(id), best_lcp = 0;
	const struct isc_shape *best = other_market(c, id);

	if (best)
		return best;
	size_t pos = lower_bound(c, id);
	for (size_t k = pos ? pos - 1 : 0; k < c->n && k <= pos; k++) {
		size_t lcp = common_prefix(c->shapes[k].id, id);
		if (lcp > best_lcp) {
			best_lcp = lcp;
			best = &c->shapes[k];
		}
	}
	return best && best_lcp * 3 >= len * 2 && best_lcp >= 8 ? best : NULL;
}

/* The same machine in the other market ("-spot" <-> "-ondemand"), or NULL. */
static const struct isc_shape *other_market(const struct isc_catalog *c, const char *id)
{
	size_t len = strlen(id);
	char alt[512];

	if (len <= 9 || len >= 400)
		return NULL;
	if (!strcasecmp(id + len - 5, "-spot"))
		snprintf(alt, sizeof(alt), "%.*s-ondemand", (int)(len - 5), id);
	else if (!strcasecmp(id + len - 9, "-ondemand"))
		snprintf(alt, sizeof(alt), "%.*s-spot", (int)(len - 9), id);
	else
		return NULL;
	return isc_catalog_find(c, alt);
}

const struct isc_shape *isc_catalog_suggest(const struct isc_catalog *c, const char *id)
{
	const struct isc_shape *best = other_market(c, id);
	struct isc_suggest sg;

	if (best)
		return best;
	isc_suggest_init(&sg, id, strlen(id));
	for (size_t k = 0; k < c->n; k++) {
		isc_suggest_consider(&sg, c->shapes[k].id);
		if (sg.best == c->shapes[k].id)
			best = &c->shapes[k];
	}
	return best;
}

static int entry_for(const struct isc_shape *sh, int gpus, struct isc_rank_entry *e)
{
	e->shape = sh;
	if (gpus == 0) {
		e->nnodes = 1;
		e->nproc = sh->gpus_per_node;
	} else if (isc_shape_layout(gpus, sh->gpus_per_node, &e->nnodes, &e->nproc)) {
		return ISC_EINVALID;
	}
	return isc_cluster_price(sh->price_micros, e->nnodes, &e->cluster_price_micros);
}

static int rank_priority(const struct isc_catalog *c, const struct isc_rank_request *req,
                         struct isc_ranking *r)
{
	size_t cap = req->n_priority;
	if (!(r->entries = calloc(cap ? cap : 1, sizeof(*r->entries))))
		return ISC_ENOMEM;
	for (size_t i = 0; i < req->n_priority; i++) {
		const char *id = req->priority[i];
		const struct isc_shape *sh = id ? isc_catalog_find(c, id) : NULL;
		int dup = 0;
		if (!sh) {
			const struct isc_shape *s2 = id ? suggest(c, id) : NULL;
			int rc =
			    s2 ? warn(r,
			              "unknown shape '%s' in the priority list, ignored (did you "
			              "mean '%s'?)",
			              id ? id : "", s2->display_id)
			       : warn(r, "unknown shape '%s' in the priority list, ignored",
			              id ? id : "");
			if (rc)
				return rc;
			continue;
		}
		for (size_t k = 0; k < r->n && !dup; k++)
			dup = r->entries[k].shape == sh;
		if (dup || (req->limit && r->n >= req->limit))
			continue;
		if (entry_for(sh, req->gpus, &r->entries[r->n]) == 0)
			r->n++;
	}
	return 0;
}

#define FILTER_GPUS_MAX 16

/* A request's filters as interned ids; UINT32_MAX: no filter. */
struct filter {
	uint32_t gpus[FILTER_GPUS_MAX]; /* the gpu types asked for; n_gpus 0: any */
	size_t n_gpus;
	uint32_t region, provider;
	int market;
	int cuda_only;       /* no gpu type named: only accelerators that run CUDA images */
	int64_t min_mem_mib; /* per GPU */
	int none;            /* a filter names a value no shape has: nothing passes */
};

/* Interns the comma-separated gpu types of the request; unknown ones match nothing. */
static void filter_gpus(const struct isc_catalog *c, const char *list, struct filter *f)
{
	const char *p = list;

	while (*p && f->n_gpus < FILTER_GPUS_MAX) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		char one[64];

		while (len > 0 && (*p == ' ')) {
			p++;
			len--;
		}
		while (len > 0 && p[len - 1] == ' ')
			len--;
		if (len > 0 && len < sizeof(one)) {
			uint32_t id;
			memcpy(one, p, len);
			one[len] = '\0';
			if ((id = names_find(&c->gpus, one)) != UINT32_MAX)
				f->gpus[f->n_gpus++] = id;
		}
		if (!end)
			break;
		p = end + 1;
	}
	if (f->n_gpus == 0)
		f->none = 1;
}

static void filter_init(const struct isc_catalog *c, const struct isc_rank_request *req,
                        struct filter *f)
{
	memset(f, 0, sizeof(*f));
	f->region = f->provider = UINT32_MAX;
	f->market = req->market;
	f->min_mem_mib = req->min_gpu_mem_mib;
	if (req->gpu_type && req->gpu_type[0])
		filter_gpus(c, req->gpu_type, f);
	else
		f->cuda_only = 1;
	if (req->region && (f->region = names_find(&c->regions, req->region)) == UINT32_MAX)
		f->none = 1;
	if (req->provider && (f->provider = names_find(&c->providers, req->provider)) == UINT32_MAX)
		f->none = 1;
}

static int passes(const struct slot *sl, const struct filter *f)
{
	if (f->market == ISC_MARKET_SPOT && !sl->spot)
		return 0;
	if (f->market == ISC_MARKET_ONDEMAND && sl->spot)
		return 0;
	if (f->cuda_only && !sl->cuda)
		return 0;
	if (f->n_gpus) {
		size_t k = 0;
		while (k < f->n_gpus && sl->gpu != f->gpus[k])
			k++;
		if (k == f->n_gpus)
			return 0;
	}
	if (f->min_mem_mib > 0 && sl->gpu_mem_mib < f->min_mem_mib)
		return 0;
	if (f->region != UINT32_MAX && sl->region != f->region)
		return 0;
	return f->provider == UINT32_MAX || sl->provider == f->provider;
}

struct head {
	const struct group *g;
	size_t pos;
	int live;                  /* cur holds the group's next candidate */
	struct isc_rank_entry cur; /* nnodes/nproc fixed for the group */
};

/* Moves a group's head to its next shape that passes the filters. */
static void head_fill(const struct isc_catalog *c, const struct filter *f, struct head *h)
{
	h->live = 0;
	while (h->pos < h->g->n) {
		const struct slot *sl = &h->g->slots[h->pos];
		if (!passes(sl, f)) {
			h->pos++;
			continue;
		}
		if (isc_cluster_price(sl->price, h->cur.nnodes, &h->cur.cluster_price_micros)) {
			h->pos = h->g->n; /* sorted by price: the rest overflow too */
			return;
		}
		h->cur.shape = &c->shapes[sl->shape];
		h->live = 1;
		return;
	}
}

/* The price ranking: a k-way merge of the per-group price lists. */
static int rank_price(const struct isc_catalog *c, const struct isc_rank_request *req,
                      struct isc_ranking *r)
{
	struct head *heads, *h;
	struct filter f;
	size_t nh = 0, cap = req->limit && req->limit < c->n ? req->limit : c->n;

	filter_init(c, req, &f);
	if (f.none)
		cap = 0;
	if (!(r->entries = malloc((cap ? cap : 1) * sizeof(*r->entries))))
		return ISC_ENOMEM;
	if (!(heads = calloc(c->n_groups ? c->n_groups : 1, sizeof(*heads))))
		return ISC_ENOMEM;
	for (size_t k = 0; k < c->n_groups; k++) {
		h = &heads[nh];
		h->g = &c->groups[k];
		if (req->gpus == 0) {
			h->cur.nnodes = 1;
			h->cur.nproc = h->g->gpus_per_node;
		} else if (isc_shape_layout(req->gpus, h->g->gpus_per_node, &h->cur.nnodes,
		                            &h->cur.nproc)) {
			continue;
		}
		head_fill(c, &f, h);
		nh++;
	}
	while (r->n < cap) {
		struct head *bh = NULL;
		for (size_t k = 0; k < nh; k++) {
			h = &heads[k];
			if (!h->live)
				continue;
			if (!bh || h->cur.cluster_price_micros < bh->cur.cluster_price_micros ||
			    (h->cur.cluster_price_micros == bh->cur.cluster_price_micros &&
			     (h->cur.nnodes < bh->cur.nnodes ||
			      (h->cur.nnodes == bh->cur.nnodes && h->cur.shape < bh->cur.shape))))
				bh = h;
		}
		if (!bh)
			break;
		r->entries[r->n++] = bh->cur;
		bh->pos++;
		head_fill(c, &f, bh);
	}
	free(heads);
	return 0;
}

void isc_catalog_entry_costs(const struct isc_catalog *c, int gpus, struct isc_rank_entry *e,
                             struct isc_rank_risk *risk)
{
	int t = c->tput_milli[e->shape - c->shapes];
	int g = gpus ? gpus : e->nnodes * e->nproc;
	struct isc_rank_risk mine, *r = risk ? risk : &mine;

	e->work_cost = e->expected_cost = -1;
	if (risk)
		isc_catalog_entry_risk(c, e, r);
	if (t <= 0 || g <= 0)
		return;
	/* micro-dollars per A100-80GB-hour of work: cluster price / (GPUs x relative speed) */
	e->work_cost = (double)e->cluster_price_micros * 1000.0 / ((double)g * t);
	if (!risk)
		isc_catalog_entry_risk(c, e, r);
	e->expected_cost = e->work_cost * r->factor;
}

static void entry_costs(const struct isc_catalog *c, const struct isc_rank_request *req,
                        struct isc_rank_entry *e)
{
	isc_catalog_entry_costs(c, req->gpus, e, NULL);
}

/* The key of an entry in `mode`: work_cost or expected_cost; < 0 unknown. */
static double key_of(const struct isc_rank_entry *e, enum isc_rank_mode mode)
{
	return mode == ISC_RANK_WORK ? e->work_cost : e->expected_cost;
}

static int cmp_entry_cost_mode(const struct isc_rank_entry *x, const struct isc_rank_entry *y,
                               enum isc_rank_mode mode)
{
	double kx = key_of(x, mode), ky = key_of(y, mode);
	/* unknown (< 0) after every known one */
	int ux = kx < 0, uy = ky < 0;
	if (ux != uy)
		return ux - uy;
	if (!ux && kx != ky)
		return kx < ky ? -1 : 1;
	if (x->cluster_price_micros != y->cluster_price_micros)
		return x->cluster_price_micros < y->cluster_price_micros ? -1 : 1;
	if (x->nnodes != y->nnodes)
		return x->nnodes - y->nnodes;
	return (x->shape > y->shape) - (x->shape < y->shape);
}

/* One comparator per mode: qsort has no context, and iscd ranks on several threads. */
static int cmp_work(const void *a, const void *b)
{
	return cmp_entry_cost_mode(a, b, ISC_RANK_WORK);
}

static int cmp_expected(const void *a, const void *b)
{
	return cmp_entry_cost_mode(a, b, ISC_RANK_EXPECTED);
}

/*
 * Modes work and expected: the key is not monotonic in a group's price order (GPUs
 * differ in speed), so every candidate is costed and sorted; the limit applies after.
 */
static int rank_cost(const struct isc_catalog *c, const struct isc_rank_request *req,
                     struct isc_ranking *r)
{
	struct isc_rank_request all = *req;
	all.limit = 0;
	all.mode = ISC_RANK_PRICE;
	int rc = rank_price(c, &all, r);
	if (rc)
		return rc;
	for (size_t i = 0; i < r->n; i++)
		entry_costs(c, req, &r->entries[i]);
	if (r->n > 1)
		qsort(r->entries, r->n, sizeof(*r->entries),
		      req->mode == ISC_RANK_WORK ? cmp_work : cmp_expected);
	if (req->limit && r->n > req->limit)
		r->n = req->limit;
	return 0;
}

int isc_catalog_rank(const struct isc_catalog *c, const struct isc_rank_request *req,
                     struct isc_ranking *out, struct isc_err *err)
{
	int rc;

	memset(out, 0, sizeof(*out));
	if (req->gpus > ISC_BURST_GPUS_MAX)
		return isc_err_set(err, ISC_EINVALID,
		                   "burst requests are limited to %d GPUs (asked for %d)",
		                   ISC_BURST_GPUS_MAX, req->gpus);
	if (req->gpus < 0)
		return isc_err_set(err, ISC_EINVALID, "a burst request needs at least 1 GPU");
	rc = rank_priority(c, req, out);
	if (!rc && out->n > 0) {
		/* The user's order stands; the costs are there for display. */
		for (size_t i = 0; req->mode != ISC_RANK_PRICE && i < out->n; i++)
			entry_costs(c, req, &out->entries[i]);
		out->from_priority = 1;
		return 0;
	}
	if (!rc && req->n_priority > 0)
		rc = warn(out,
		          "no shape of the priority list is in the catalog; ranking every shape "
		          "by price");
	if (!rc) {
		free(out->entries);
		out->entries = NULL;
		out->n = 0;
		rc = req->mode == ISC_RANK_PRICE ? rank_price(c, req, out) : rank_cost(c, req, out);
	}
	if (rc) {
		isc_ranking_cleanup(out);
		return isc_err_set(err, rc, "out of memory");
	}
	return 0;
}
