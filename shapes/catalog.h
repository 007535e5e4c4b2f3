/*
 * The in-memory shape catalog and the ranking of shapes for a burst request.
 *
 * The broker loads the catalog once (isc_catalog_load) and ranks each request
 * against it: the user's burst_shape_priority_list first, price second. The
 * catalog keeps its shapes sorted by id and, per GPUs-per-node count, an index
 * sorted by price, so a ranking is a merge of a few presorted lists (a top-K
 * request stops after K) instead of a sort of the whole catalog.
 */
#ifndef ISC_SHAPES_CATALOG_H
#define ISC_SHAPES_CATALOG_H

#include "common/err.h"
#include "shapes/shape.h"

#include <stddef.h>

struct isc_store;
struct isc_catalog;
struct isc_risk_fact; /* store/store_risk.h: the catalog is read from the store, never isc */

/* Reads every shape of the store. Free with isc_catalog_free. */
int isc_catalog_load(struct isc_store *s, struct isc_catalog **out, struct isc_err *err);
/* Builds a catalog from shapes, taking ownership of the array and its strings (also on failure). */
int isc_catalog_new(struct isc_shape *shapes, size_t n, struct isc_catalog **out,
                    struct isc_err *err);
void isc_catalog_free(struct isc_catalog *c);

size_t isc_catalog_size(const struct isc_catalog *c);
/* The i-th shape in id order (borrowed). */
const struct isc_shape *isc_catalog_at(const struct isc_catalog *c, size_t i);
/* A shape by id, any case; NULL when absent. Borrowed from the catalog. */
const struct isc_shape *isc_catalog_find(const struct isc_catalog *c, const char *id);

/*
 * Did-you-mean for an id that names no shape: the same machine in the other
 * market when the catalog has it, else the id nearest by edit distance over
 * every id of the catalog (common/suggest.h), else NULL. O(catalog) per call:
 * for the user's list at validate and submit time, not for the broker's tick.
 */
const struct isc_shape *isc_catalog_suggest(const struct isc_catalog *c, const char *id);

enum isc_market {
	ISC_MARKET_ANY = 0,
	ISC_MARKET_SPOT,
	ISC_MARKET_ONDEMAND,
};
/* "spot", "ondemand", "any" -> market; ISC_EINVALID otherwise. */
int isc_market_parse(const char *s, enum isc_market *out);

/*
 * A priority list as written on a command line or in a query ("a,b,,c"):
 * splits buf in place into ids, leading blanks and empty items dropped.
 * *ids (caller frees the array, not the strings) points into buf.
 * 0 or ISC_ENOMEM.
 */
int isc_shape_ids_split(char *buf, char ***ids, size_t *n);

/*
 * How shapes the priority list does not order are ranked (burst_rank, docs/shapes.md
 * "Ranking modes"): by cluster price (the default), by cost per unit of training work,
 * or by the expected cost to finish that work, interruptions and recoveries included.
 */
enum isc_rank_mode {
	ISC_RANK_PRICE = 0,
	ISC_RANK_WORK,
	ISC_RANK_EXPECTED,
};
/* "price", "work", "expected" -> mode; ISC_EINVALID otherwise. */
int isc_rank_mode_parse(const char *s, enum isc_rank_mode *out);
const char *isc_rank_mode_name(enum isc_rank_mode m);

/*
 * The expected-cost model's two parameters (docs/shapes.md): the cluster-hours one
 * recovery or one failed attempt to get the gang costs (work lost since the last
 * checkpoint, nodes billed while the gang is incomplete, a bare-metal minimum charge),
 * and the run length a first launch is spread over.
 */
#define ISC_RANK_RECOVERY_HOURS 1.0
#define ISC_RANK_RUN_HOURS      24.0
/* What an unknown chance of getting the gang counts as: AWS's lowest score, 1 of 10. */
#define ISC_RANK_Q_UNKNOWN 0.1
/* A capacity hint never counts as a certain "no" (dstack saw OCI report none, then launch). */
#define ISC_RANK_Q_FLOOR 0.1
/* An unknown spot interruption band counts as the worst (Spot Advisor's ">20%", max 100). */
#define ISC_RANK_BAND_UNKNOWN_PCT 100

/*
 * Attaches risk facts to the catalog (taking the array and its strings, also on
 * failure): the ranking of mode "expected" and isc_catalog_entry_risk read them.
 * isc_catalog_load attaches the store's risk_facts.
 */
int isc_catalog_set_risk(struct isc_catalog *c, struct isc_risk_fact *facts, size_t n,
                         struct isc_err *err);

struct isc_rank_request {
	int gpus;                    /* 1..48; 0: each shape as one whole node (listing) */
	const char *const *priority; /* shape ids in the user's order; may be NULL */
	size_t n_priority;
	/*
	 * Filters for the price ranking (not applied to a priority list). NULL/ANY: all,
	 * except that without gpu_type only accelerators that run CUDA images are
	 * candidates (shapes/accelerator.h): the platform's containers are CUDA images.
	 */
	const char *provider;
	const char *gpu_type;    /* case-insensitive, comma-separated: "h100,a100-80gb" */
	int64_t min_gpu_mem_mib; /* per GPU; 0: any */
	const char *region;
	enum isc_market market;
	size_t limit;            /* at most this many entries; 0: all */
	enum isc_rank_mode mode; /* orders what the priority list does not */
};

struct isc_rank_entry {
	const struct isc_shape *shape; /* borrowed from the catalog */
	int nnodes, nproc;
	int64_t cluster_price_micros; /* nnodes x node price, per hour */
	/*
	 * Modes work and expected (0 in mode price; isc_catalog_entry_costs fills them):
	 * micro-dollars per A100-80GB-hour of training work, plain and expected (with the
	 * risk); < 0 when the GPU's throughput is unknown (such entries rank after every
	 * known one).
	 */
	double work_cost, expected_cost;
};

/* What the ranking knew about losing an entry's nodes, for display and for "expected". */
struct isc_rank_risk {
	int band;               /* Spot Advisor band index; -1 unknown (or not spot/AWS) */
	int band_max_pct;       /* its upper bound, % of instances interrupted per month */
	const char *band_label; /* "<5%", ... (borrowed from the catalog) */
	int64_t band_fetched_ms;
	int score;              /* GetSpotPlacementScores 1..10; -1 unknown */
	int score_target;       /* the gang size it was asked for */
	const char *score_zone; /* "" for a region score */
	int64_t score_fetched_ms;
	int capacity;                /* OCI availableCount (best AD); -1 unknown */
	const char *capacity_status; /* AVAILABLE, OUT_OF_HOST_CAPACITY, ... */
	int64_t capacity_fetched_ms;
	int obtainability_milli; /* GCP capacity advice x 1000; -1 unknown */
	int64_t interruptions;   /* this broker's, 30 days; -1: never ran it */
	int64_t node_seconds;    /* node-seconds the broker ran it in that window */
	double node_rate;        /* interruptions per node-hour the model used */
	const char *rate_source; /* "spot-advisor", "history", "on-demand", "unknown: worst band" */
	double q;                /* chance of getting the gang per attempt */
	const char *q_source;    /* "placement-score", "oci-capacity", ..., "unknown" */
	double factor;           /* expected / work: 1 + H (rate x nnodes / q + (1/q - 1) / J) */
};

/*
 * Fills e->work_cost and e->expected_cost (whatever the mode: for display), gpus as in
 * the request (0: a whole node), and *risk (when not NULL) with the risk behind them.
 */
void isc_catalog_entry_costs(const struct isc_catalog *c, int gpus, struct isc_rank_entry *e,
                             struct isc_rank_risk *risk);

/* The risk the catalog's facts give for an entry (nnodes from the entry). */
void isc_catalog_entry_risk(const struct isc_catalog *c, const struct isc_rank_entry *e,
                            struct isc_rank_risk *out);

struct isc_ranking {
	struct isc_rank_entry *entries; /* best first */
	size_t n;
	char **warnings; /* for the user: unknown ids in the priority list, ... */
	size_t n_warnings;
	int from_priority; /* 1: entries are the priority list's valid ids */
};

/*
 * Ranks shapes for req. When the priority list names at least one shape of
 * the catalog, the entries are exactly those shapes in the user's order
 * (each once); every unknown id adds a warning. Otherwise every shape that
 * passes the filters, by cluster price, then fewer nodes, then id (mode price),
 * or by work_cost / expected_cost, unknown throughput last, then the same keys.
 * ISC_EINVALID for gpus outside 0..48 ("burst requests are limited to 48
 * GPUs"). An empty ranking is not an error. Clean up with isc_ranking_cleanup.
 */
int isc_catalog_rank(const struct isc_catalog *c, const struct isc_rank_request *req,
                     struct isc_ranking *out, struct isc_err *err);
void isc_ranking_cleanup(struct isc_ranking *r);

#endif
