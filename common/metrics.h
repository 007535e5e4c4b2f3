/*
 * Metrics for Prometheus (issue 44, docs/metrics.md): counters, gauges and
 * histograms, each a family of series told apart by a fixed, small set of labels
 * (provider, region, state, path, route, code; never an experiment's or a user's
 * id), rendered in the Prometheus text exposition format, version 0.0.4.
 *
 * The families are declared up front in a table (struct isc_metric_def), so every
 * one has its HELP and TYPE lines from the first scrape and docs/metrics.md can list
 * them all. A series is made the first time its label values are used and then lives
 * as long as the registry: a counter only ever grows within a process, as Prometheus'
 * rate() expects.
 *
 * Threads: the tick, the broker's workers and the API's threads update series at
 * once. An update is lock-free (atomic adds on the series' value and buckets); only
 * making a new series takes the registry's mutex, and a family's series are
 * published with a release store, so a scrape reads them without a lock. A scrape
 * may see a histogram between the add to one bucket and the add to its sum; its
 * _count is always the sum of its buckets (rendered from them).
 *
 * A family holds at most ISC_METRICS_MAX_SERIES series: more label values than that
 * is a bug (a label of high cardinality); the update is dropped and counted in
 * isc_metrics_dropped_total rather than growing without bound.
 */
#ifndef ISC_COMMON_METRICS_H
#define ISC_COMMON_METRICS_H

#include "common/buf.h"

#include <stddef.h>

#define ISC_METRICS_MAX_LABELS  3
#define ISC_METRICS_MAX_SERIES  512
#define ISC_METRICS_MAX_BUCKETS 20

enum isc_metric_type { ISC_METRIC_COUNTER, ISC_METRIC_GAUGE, ISC_METRIC_HISTOGRAM };

struct isc_metric_def {
	const char *name; /* counters end in _total; times in _seconds */
	enum isc_metric_type type;
	const char *help;
	const char *labels[ISC_METRICS_MAX_LABELS]; /* names, NULL after the last */
	const double *buckets;                      /* histogram: upper bounds, ascending */
	size_t n_buckets;                           /* without +Inf, which is implied */
};

struct isc_metrics;

/* A registry of the n families in defs (borrowed: static storage). NULL: out of memory. */
struct isc_metrics *isc_metrics_new(const struct isc_metric_def *defs, size_t n);
void isc_metrics_free(struct isc_metrics *m);

/*
 * Updates family `id` (its index in defs) for the label values `lv` (as many as
 * the family has labels; NULL when it has none; a NULL value is ""):
 * add grows a counter or a gauge (a counter ignores v < 0), set sets a gauge,
 * observe counts v in a histogram. A wrong type is ignored (a bug, not data).
 */
void isc_metrics_add(struct isc_metrics *m, size_t id, const char *const *lv, double v);
void isc_metrics_set(struct isc_metrics *m, size_t id, const char *const *lv, double v);
void isc_metrics_observe(struct isc_metrics *m, size_t id, const char *const *lv, double v);
/*
 * Makes the series of lv at 0 if it is not there yet: a counter that shows from the
 * start, so Prometheus sees its first increase and a restart's reset (a series that
 * appears only when it first counts hides both).
 */
void isc_metrics_touch(struct isc_metrics *m, size_t id, const char *const *lv);
/* Sets every series of a gauge family to 0 (before setting what a scrape counted). */
void isc_metrics_zero(struct isc_metrics *m, size_t id);
/* The value of a counter or gauge series, or a histogram's count; 0 when it has none. */
double isc_metrics_value(struct isc_metrics *m, size_t id, const char *const *lv);

/* Updates dropped so far because a family was full. */
unsigned long long isc_metrics_dropped(struct isc_metrics *m);

/* Appends the exposition text of every family to out. 0 or ISC_ENOMEM. */
int isc_metrics_render(struct isc_metrics *m, struct isc_buf *out);

/*
 * The same in OpenMetrics 1.0 (application/openmetrics-text): a counter's family named
 * without _total in its HELP and TYPE lines, " escaped in HELP, and "# EOF" last.
 */
int isc_metrics_render_openmetrics(struct isc_metrics *m, struct isc_buf *out);

/* A label value as the exposition format quotes it: \\, \" and \n escaped. */
int isc_metrics_escape(struct isc_buf *out, const char *value);

/* Label values written in place: ISC_LABELS("aws", "us-east-1"). */
#define ISC_LABELS(...) ((const char *const[]){__VA_ARGS__})

/* ---- iscd's own families (the process-wide registry) ---- */

enum isc_metric_id {
	ISC_M_BURSTS,                 /* gauge {state}, from the store at scrape */
	ISC_M_QUEUE_DEPTH,            /* gauge {mode}, from the store at scrape */
	ISC_M_INSTANCES_LIVE,         /* gauge {provider}, from the store at scrape */
	ISC_M_SUBMIT_TO_RUNNING,      /* histogram {provider} */
	ISC_M_PROVISIONING,           /* histogram {provider} */
	ISC_M_LAUNCHES,               /* counter {provider, region} */
	ISC_M_CAPACITY_REFUSALS,      /* counter {provider, region} */
	ISC_M_FAILOVERS,              /* counter {provider} */
	ISC_M_INTERRUPTIONS,          /* counter {provider} */
	ISC_M_RECOVERIES,             /* counter {path} */
	ISC_M_RECOVERY_DURATION,      /* histogram {path} */
	ISC_M_SPEND,                  /* counter {provider}, micro-dollars */
	ISC_M_TICK_DURATION,          /* histogram */
	ISC_M_TICK_LATENESS,          /* histogram */
	ISC_M_TICKS_LATE,             /* counter: ticks late by more than one interval */
	ISC_M_DESCRIBE_DURATION,      /* histogram {provider} */
	ISC_M_API_REQUEST_DURATION,   /* histogram {method, route, code} */
	ISC_M_LEASES_HELD,            /* gauge */
	ISC_M_LEASE_TAKEOVERS,        /* counter */
	ISC_M_STORE_TX_DURATION,      /* histogram {outcome} */
	ISC_M_STORE_TRANSIENT_ERRORS, /* counter */
	ISC_M_SCRAPE_STORE_ERRORS,    /* counter */
	ISC_M_BUILD_INFO,             /* gauge {version, commit} = 1 */
	ISC_M_PROCESS_CPU,            /* process_*: as Prometheus' client libraries name them */
	ISC_M_PROCESS_RSS,
	ISC_M_PROCESS_VSIZE,
	ISC_M_PROCESS_OPEN_FDS,
	ISC_M_PROCESS_MAX_FDS,
	ISC_M_PROCESS_START_TIME,
	ISC_M_DROPPED, /* counter: updates dropped for a full family */
	ISC_M_COUNT
};

/* iscd's families (docs/metrics.md lists them). */
extern const struct isc_metric_def isc_metric_defs[ISC_M_COUNT];

/*
 * The process-wide registry of iscd's families, made on first use (NULL only when
 * out of memory, and then every update is a no-op). isc_metrics_off() makes every
 * update a no-op from then on (the cost measured with metrics off); so does
 * ISC_METRICS_OFF=1 in the environment, read when the program starts.
 */
struct isc_metrics *isc_metrics_global(void);
void isc_metrics_off(void);

/* Shorthands on the process-wide registry. */
void isc_metric_add(enum isc_metric_id id, const char *const *lv, double v);
void isc_metric_set(enum isc_metric_id id, const char *const *lv, double v);
void isc_metric_observe(enum isc_metric_id id, const char *const *lv, double v);
/* The series of a provider's families at 0 (isc_metrics_touch), for a configured provider. */
void isc_metrics_touch_provider(const char *provider);

/*
 * Sets the process_* gauges from /proc/self (CPU seconds, resident and virtual
 * memory, open and allowed fds; the start time once). Called before a render.
 */
void isc_metrics_process_update(struct isc_metrics *m);

#endif
