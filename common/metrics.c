/*
 * The metrics registry (common/metrics.h) and iscd's families.
 */
#include "common/metrics.h"
#include "common/err.h"
#include "common/version.h"

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

struct series {
	uint64_t hash; /* of the label values: compared first, so a lookup rarely reads them */
	char *lv[ISC_METRICS_MAX_LABELS];
	_Atomic uint64_t value;    /* a double's bits: a counter's or gauge's value */
	_Atomic uint64_t sum;      /* a double's bits: a histogram's sum */
	_Atomic uint64_t *buckets; /* a histogram's counts per bucket (not cumulative), +Inf last */
};

struct family {
	const struct isc_metric_def *def;
	size_t n_labels;
	_Atomic(struct series *) series[ISC_METRICS_MAX_SERIES];
	_Atomic size_t n; /* series[0..n) are published */
};

struct isc_metrics {
	pthread_mutex_t lock; /* making a series */
	size_t n;
	struct family *f;
	_Atomic uint64_t dropped; /* updates dropped for a full family */
};

static uint64_t bits_of(double d)
{
	uint64_t u;
	memcpy(&u, &d, sizeof(u));
	return u;
}

static double double_of(uint64_t u)
{
	double d;
	memcpy(&d, &u, sizeof(d));
	return d;
}

static void atomic_add_double(_Atomic uint64_t *a, double v)
{
	uint64_t old = atomic_load_explicit(a, memory_order_relaxed), want;
	do {
		want = bits_of(double_of(old) + v);
	} while (!atomic_compare_exchange_weak_explicit(a, &old, want, memory_order_relaxed,
	                                                memory_order_relaxed));
}

struct isc_metrics *isc_metrics_new(const struct isc_metric_def *defs, size_t n)
{
	struct isc_metrics *m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->f = calloc(n ? n : 1, sizeof(*m->f));
	if (!m->f) {
		free(m);
		return NULL;
	}
	m->n = n;
	pthread_mutex_init(&m->lock, NULL);
	for (size_t i = 0; i < n; i++) {
		m->f[i].def = &defs[i];
		while (m->f[i].n_labels < ISC_METRICS_MAX_LABELS &&
		       defs[i].labels[m->f[i].n_labels])
			m->f[i].n_labels++;
	}
	return m;
}

static void series_free(struct series *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < ISC_METRICS_MAX_LABELS; i++)
		free(s->lv[i]);
	free(s->buckets);
	free(s);
}

void isc_metrics_free(struct isc_metrics *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++)
		for (size_t j = 0; j < m->f[i].n; j++)
			series_free(m->f[i].series[j]);
	free(m->f);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

static int same_labels(const struct series *s, size_t nl, const char *const *lv)
{
	for (size_t i = 0; i < nl; i++)
		if (strcmp(s->lv[i], lv && lv[i] ? lv[i] : "") != 0)
			return 0;
	return 1;
}

/* FNV-1a over the label values, each ended by a 0xff (no label value holds one in UTF-8). */
static uint64_t labels_hash(size_t nl, const char *const *lv)
{
	uint64_t h = 14695981039346656037ULL;
	for (size_t i = 0; i < nl; i++) {
		for (const unsigned char *p = (const unsigned char *)(lv && lv[i] ? lv[i] : ""); *p;
		     p++)
			h = (h ^ *p) * 1099511628211ULL;
		h = (h ^ 0xff) * 1099511628211ULL;
	}
	return h;
}

static struct series *scan(struct family *f, size_t from, size_t to, uint64_t h,
                           const char *const *lv)
{
	for (size_t i = from; i < to; i++) {
		struct series *s = atomic_load_explicit(&f->series[i], memory_order_acquire);
		if (s && s->hash == h && same_labels(s, f->n_labels, lv))
			return s;
	}
	return NULL;
}

/* The series of lv in family id, made when it is new; NULL when id is unknown or it is full. */
static struct series *series_of(struct isc_metrics *m, size_t id, const char *const *lv)
{
	struct family *f;
	struct series *s;
	uint64_t h;
	size_t n;

	if (!m || id >= m->n)
		return NULL;
	f = &m->f[id];
	h = labels_hash(f->n_labels, lv);
	n = atomic_load_explicit(&f->n, memory_order_acquire);
	if ((s = scan(f, 0, n, h, lv)))
		return s;
	pthread_mutex_lock(&m->lock);
	/* Another thread may have made it meanwhile: only the series after n are new. */
	s = scan(f, n, atomic_load_explicit(&f->n, memory_order_acquire), h, lv);
	if (!s && f->n < ISC_METRICS_MAX_SERIES && (s = calloc(1, sizeof(*s)))) {
		int ok = 1;
		s->hash = h;
		for (size_t i = 0; i < f->n_labels; i++)
			ok &= (s->lv[i] = strdup(lv && lv[i] ? lv[i] : "")) != NULL;
		if (ok && f->def->type == ISC_METRIC_HISTOGRAM)
			ok = (s->buckets = calloc(f->def->n_buckets + 1, sizeof(*s->buckets))) !=
			     NULL;
		if (ok) {
			size_t at = atomic_load_explicit(&f->n, memory_order_relaxed);
			atomic_store_explicit(&f->series[at], s, memory_order_release);
			atomic_store_explicit(&f->n, at + 1, memory_order_release);
		} else {
			series_free(s);
			s = NULL;
		}
	}
	pthread_mutex_unlock(&m->lock);
	if (!s)
		atomic_fetch_add_explicit(&m->dropped, 1, memory_order_relaxed);
	return s;
}

static enum isc_metric_type type_of(struct isc_metrics *m, size_t id)
{
	return m->f[id].def->type;
}

void isc_metrics_add(struct isc_metrics *m, size_t id, const char *const *lv, double v)
{
	struct series *s;

	if (!m || id >= m->n || type_of(m, id) == ISC_METRIC_HISTOGRAM)
		return;
	if (type_of(m, id) == ISC_METRIC_COUNTER && !(v >= 0))
		return; /* a counter never goes down (nor takes a NaN) */
	if ((s = series_of(m, id, lv)))
		atomic_add_double(&s->value, v);
}

/* A gauge, or a counter kept by someone else (the kernel's CPU time of the process). */
void isc_metrics_set(struct isc_metrics *m, size_t id, const char *const *lv, double v)
{
	struct series *s;

	if (!m || id >= m->n || type_of(m, id) == ISC_METRIC_HISTOGRAM)
		return;
	if ((s = series_of(m, id, lv)))
		atomic_store_explicit(&s->value, bits_of(v), memory_order_relaxed);
}

void isc_metrics_observe(struct isc_metrics *m, size_t id, const char *const *lv, double v)
{
	const struct isc_metric_def *d;
	struct series *s;
	size_t b = 0;

	if (!m || id >= m->n || type_of(m, id) != ISC_METRIC_HISTOGRAM || isnan(v))
		return;
	if (!(s = series_of(m, id, lv)))
		return;
	d = m->f[id].def;
	while (b < d->n_buckets && v > d->buckets[b])
		b++; /* le: a value on a bound counts in that bound's bucket */
	atomic_fetch_add_explicit(&s->buckets[b], 1, memory_order_relaxed);
	atomic_add_double(&s->sum, v);
}

void isc_metrics_touch(struct isc_metrics *m, size_t id, const char *const *lv)
{
	(void)series_of(m, id, lv);
}

void isc_metrics_zero(struct isc_metrics *m, size_t id)
{
	struct family *f;
	size_t n;

	if (!m || id >= m->n || type_of(m, id) != ISC_METRIC_GAUGE)
		return;
	f = &m->f[id];
	n = atomic_load_explicit(&f->n, memory_order_acquire);
	for (size_t i = 0; i < n; i++)
		atomic_store_explicit(&f->series[i]->value, bits_of(0), memory_order_relaxed);
}

double isc_metrics_value(struct isc_metrics *m, size_t id, const char *const *lv)
{
	struct family *f;
	struct series *s;
	double total = 0;

	if (!m || id >= m->n)
		return 0;
	f = &m->f[id];
	if (!(s = scan(f, 0, atomic_load_explicit(&f->n, memory_order_acquire),
	               labels_hash(f->n_labels, lv), lv)))
		return 0;
	if (f->def->type != ISC_METRIC_HISTOGRAM)
		return double_of(atomic_load_explicit(&s->value, memory_order_relaxed));
	for (size_t b = 0; b <= f->def->n_buckets; b++)
		total += (double)atomic_load_explicit(&s->buckets[b], memory_order_relaxed);
	return total;
}

unsigned long long isc_metrics_dropped(struct isc_metrics *m)
{
	return m ? (unsigned long long)atomic_load(&m->dropped) : 0;
}

/* ---- rendering ---- */

int isc_metrics_escape(struct isc_buf *out, const char *value)
{
	int rc = 0;
	for (const char *p = value; *p && !rc; p++) {
		if (*p == '\\')
			rc = isc_buf_puts(out, "\\\\");
		else if (*p == '"')
			rc = isc_buf_puts(out, "\\\"");
		else if (*p == '\n')
			rc = isc_buf_puts(out, "\\n");
		else
			rc = isc_buf_putc(out, *p);
	}
	return rc;
}

/*
 * HELP text escapes \ and newline (the text format's rule for docstrings); OpenMetrics
 * escapes " too.
 */
static int put_help(struct isc_buf *out, const char *help, int om)
{
	int rc = 0;
	for (const char *p = help; *p && !rc; p++) {
		if (*p == '"' && om)
			rc = isc_buf_puts(out, "\\\"");
		else if (*p == '\\')
			rc = isc_buf_puts(out, "\\\\");
		else if (*p == '\n')
			rc = isc_buf_puts(out, "\\n");
		else
			rc = isc_buf_putc(out, *p);
	}
	return rc;
}

/* A sample value: integers without a fraction, others with enough digits to round-trip. */
static int put_value(struct isc_buf *out, double v)
{
	if (isnan(v))
		return isc_buf_puts(out, "NaN");
	if (isinf(v))
		return isc_buf_puts(out, v > 0 ? "+Inf" : "-Inf");
	if (v == floor(v) && fabs(v) < 9007199254740992.0)
		return isc_buf_printf(out, "%.0f", v);
	return isc_buf_printf(out, "%.17g", v);
}

/* {a="x",b="y"} with an optional last label (le); nothing when there are none. */
static int put_labels(struct isc_buf *out, const struct family *f, const struct series *s,
                      const char *extra_name, const char *extra_value)
{
	int rc = 0, first = 1;

	if (!f->n_labels && !extra_name)
		return 0;
	rc |= isc_buf_putc(out, '{');
	for (size_t i = 0; i < f->n_labels; i++, first = 0) {
		rc |= isc_buf_printf(out, "%s%s=\"", first ? "" : ",", f->def->labels[i]);
		rc |= isc_metrics_escape(out, s->lv[i]);
		rc |= isc_buf_putc(out, '"');
	}
	if (extra_name)
		rc |= isc_buf_printf(out, "%s%s=\"%s\"", first ? "" : ",", extra_name, extra_value);
	rc |= isc_buf_putc(out, '}');
	return rc ? ISC_ENOMEM : 0;
}

static int render_family(struct isc_metrics *m, size_t id, struct isc_buf *out, int om)
{
	const struct family *f = &m->f[id];
	const struct isc_metric_def *d = f->def;
	size_t n = atomic_load_explicit(&f->n, memory_order_acquire);
	/* OpenMetrics names a counter's family without the _total of its samples. */
	int family_len = (int)strlen(d->name) - (om && d->type == ISC_METRIC_COUNTER ? 6 : 0);
	int rc = 0;

	rc |= isc_buf_printf(out, "# HELP %.*s ", family_len, d->name);
	rc |= put_help(out, d->help, om);
	rc |= isc_buf_printf(out, "\n# TYPE %.*s %s\n", family_len, d->name,
	                     d->type == ISC_METRIC_COUNTER ? "counter"
	                     : d->type == ISC_METRIC_GAUGE ? "gauge"
	                                                   : "histogram");
	for (size_t i = 0; i < n && !rc; i++) {
		const struct series *s = atomic_load_explicit(&f->series[i], memory_order_acquire);
		if (d->type != ISC_METRIC_HISTOGRAM) {
			rc |= isc_buf_puts(out, d->name);
			rc |= put_labels(out, f, s, NULL, NULL);
			rc |= isc_buf_putc(out, ' ');
			rc |= put_value(
			    out, double_of(atomic_load_explicit(&s->value, memory_order_relaxed)));
			rc |= isc_buf_putc(out, '\n');
			continue;
		}
		/* Cumulative buckets; _count is the +Inf bucket, so the two always agree. */
		uint64_t cum = 0;
		for (size_t b = 0; b <= d->n_buckets; b++) {
			char le[32];
			cum += atomic_load_explicit(&s->buckets[b], memory_order_relaxed);
			if (b < d->n_buckets)
				snprintf(le, sizeof(le), "%.17g", d->buckets[b]);
			else
				snprintf(le, sizeof(le), "+Inf");
			rc |= isc_buf_printf(out, "%s_bucket", d->name);
			rc |= put_labels(out, f, s, "le", le);
			rc |= isc_buf_printf(out, " %llu\n", (unsigned long long)cum);
		}
		rc |= isc_buf_printf(out, "%s_sum", d->name);
		rc |= put_labels(out, f, s, NULL, NULL);
		rc |= isc_buf_putc(out, ' ');
		rc |=
		    put_value(out, double_of(atomic_load_explicit(&s->sum, memory_order_relaxed)));
		rc |= isc_buf_printf(out, "\n%s_count", d->name);
		rc |= put_labels(out, f, s, NULL, NULL);
		rc |= isc_buf_printf(out, " %llu\n", (unsigned long long)cum);
	}
	return rc ? ISC_ENOMEM : 0;
}

int isc_metrics_render(struct isc_metrics *m, struct isc_buf *out)
{
	if (!m)
		return 0;
	for (size_t i = 0; i < m->n; i++)
		if (render_family(m, i, out, 0))
			return ISC_ENOMEM;
	return 0;
}

int isc_metrics_render_openmetrics(struct isc_metrics *m, struct isc_buf *out)
{
	for (size_t i = 0; m && i < m->n; i++)
		if (render_family(m, i, out, 1))
			return ISC_ENOMEM;
	return isc_buf_puts(out, "# EOF\n") ? ISC_ENOMEM : 0;
}

/* ---- iscd's families ---- */

/* Seconds: from a fast store transaction to a cloud's slowest provisioning. */
static const double fast_buckets[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                      0.25,  0.5,    1,     2.5,  5,     10};
static const double tick_buckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32};
static const double cloud_buckets[] = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
static const double slow_buckets[] = {1, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200};
#define B(a) a, sizeof(a) / sizeof(a[0])

const struct isc_metric_def isc_metric_defs[ISC_M_COUNT] = {
    [ISC_M_BURSTS] = {"isc_bursts",
                      ISC_METRIC_GAUGE,
                      "Burst experiments in the store by state (read at scrape, cached 1 s).",
                      {"state"}},
    [ISC_M_QUEUE_DEPTH] = {"isc_queue_depth",
                           ISC_METRIC_GAUGE,
                           "Experiments waiting (queued) by compute mode (read at scrape).",
                           {"mode"}},
    [ISC_M_INSTANCES_LIVE] = {"isc_instances_live",
                              ISC_METRIC_GAUGE,
                              "Cloud instances not known terminated, by provider (read at "
                              "scrape).",
                              {"provider"}},
    [ISC_M_SUBMIT_TO_RUNNING] = {"isc_submit_to_running_seconds",
                                 ISC_METRIC_HISTOGRAM,
                                 "From a burst's submission to its first running state.",
                                 {"provider"},
                                 B(slow_buckets)},
    [ISC_M_PROVISIONING] = {"isc_provisioning_seconds",
                            ISC_METRIC_HISTOGRAM,
                            "From a cluster's launch to every node booted.",
                            {"provider"},
                            B(slow_buckets)},
    [ISC_M_LAUNCHES] = {"isc_launches_total",
                        ISC_METRIC_COUNTER,
                        "Launch requests sent to a cloud (one per cluster and zone tried).",
                        {"provider", "region"}},
    [ISC_M_CAPACITY_REFUSALS] = {"isc_capacity_refusals_total",
                                 ISC_METRIC_COUNTER,
                                 "Launches the cloud refused for want of capacity.",
                                 {"provider", "region"}},
    [ISC_M_FAILOVERS] = {"isc_failovers_total",
                         ISC_METRIC_COUNTER,
                         "Placements that moved on to another shape, zone or region after "
                         "a refusal, by the provider refused.",
                         {"provider"}},
    [ISC_M_INTERRUPTIONS] = {"isc_interruptions_total",
                             ISC_METRIC_COUNTER,
                             "Running clusters that lost nodes (spot interruption, "
                             "termination).",
                             {"provider"}},
    [ISC_M_RECOVERIES] = {"isc_recoveries_total",
                          ISC_METRIC_COUNTER,
                          "Recoveries after an interruption, by path: replace (the lost "
                          "nodes) or gang (the whole cluster).",
                          {"path"}},
    [ISC_M_RECOVERY_DURATION] = {"isc_recovery_seconds",
                                 ISC_METRIC_HISTOGRAM,
                                 "From the interruption seen to the burst running again.",
                                 {"path"},
                                 B(slow_buckets)},
    [ISC_M_SPEND] = {"isc_spend_microdollars_total",
                     ISC_METRIC_COUNTER,
                     "Money charged to the ledger for cloud node time, in micro-dollars.",
                     {"provider"}},
    [ISC_M_TICK_DURATION] = {"isc_tick_duration_seconds",
                             ISC_METRIC_HISTOGRAM,
                             "How long one broker tick took.",
                             {NULL},
                             B(tick_buckets)},
    [ISC_M_TICK_LATENESS] = {"isc_tick_lateness_seconds",
                             ISC_METRIC_HISTOGRAM,
                             "How long after it was due a tick started.",
                             {NULL},
                             B(tick_buckets)},
    [ISC_M_TICKS_LATE] = {"isc_ticks_late_total",
                          ISC_METRIC_COUNTER,
                          "Ticks that started later than one tick interval after due.",
                          {NULL}},
    [ISC_M_DESCRIBE_DURATION] = {"isc_describe_duration_seconds",
                                 ISC_METRIC_HISTOGRAM,
                                 "One describe of a provider's region (the watch).",
                                 {"provider"},
                                 B(cloud_buckets)},
    [ISC_M_API_REQUEST_DURATION] = {"isc_api_request_duration_seconds",
                                    ISC_METRIC_HISTOGRAM,
                                    "API requests by method, route pattern and status code.",
                                    {"method", "route", "code"},
                                    B(fast_buckets)},
    [ISC_M_LEASES_HELD] = {"isc_leases_held",
                           ISC_METRIC_GAUGE,
                           "Burst leases this replica holds (as of its last tick).",
                           {NULL}},
    [ISC_M_LEASE_TAKEOVERS] = {"isc_lease_takeovers_total",
                               ISC_METRIC_COUNTER,
                               "Leases this replica took over from another replica.",
                               {NULL}},
    [ISC_M_STORE_TX_DURATION] = {"isc_store_transaction_duration_seconds",
                                 ISC_METRIC_HISTOGRAM,
                                 "Write transactions, from BEGIN to COMMIT or ROLLBACK.",
                                 {"outcome"},
                                 B(fast_buckets)},
    [ISC_M_STORE_TRANSIENT_ERRORS] = {"isc_store_transient_errors_total",
                                      ISC_METRIC_COUNTER,
                                      "Store calls that failed for a reason that passes "
                                      "(busy, lost connection, serialization); each is "
                                      "retried on a later tick.",
                                      {NULL}},
    [ISC_M_SCRAPE_STORE_ERRORS] = {"isc_metrics_store_errors_total",
                                   ISC_METRIC_COUNTER,
                                   "Scrapes whose store-derived gauges could not be read "
                                   "(they kept their last values).",
                                   {NULL}},
    [ISC_M_BUILD_INFO] = {"isc_build_info",
                          ISC_METRIC_GAUGE,
                          "Always 1; the version and commit iscd was built from.",
                          {"version", "commit"}},
    [ISC_M_PROCESS_CPU] = {"process_cpu_seconds_total",
                           ISC_METRIC_COUNTER,
                           "Total user and system CPU time spent in seconds.",
                           {NULL}},
    [ISC_M_PROCESS_RSS] = {"process_resident_memory_bytes",
                           ISC_METRIC_GAUGE,
                           "Resident memory size in bytes.",
                           {NULL}},
    [ISC_M_PROCESS_VSIZE] = {"process_virtual_memory_bytes",
                             ISC_METRIC_GAUGE,
                             "Virtual memory size in bytes.",
                             {NULL}},
    [ISC_M_PROCESS_OPEN_FDS] = {"process_open_fds",
                                ISC_METRIC_GAUGE,
                                "Number of open file descriptors.",
                                {NULL}},
    [ISC_M_PROCESS_MAX_FDS] = {"process_max_fds",
                               ISC_METRIC_GAUGE,
                               "Maximum number of open file descriptors.",
                               {NULL}},
    [ISC_M_PROCESS_START_TIME] = {"process_start_time_seconds",
                                  ISC_METRIC_GAUGE,
                                  "Start time of the process since unix epoch in seconds.",
                                  {NULL}},
    [ISC_M_DROPPED] = {"isc_metrics_dropped_total",
                       ISC_METRIC_COUNTER,
                       "Metric updates dropped because a family had too many series.",
                       {NULL}},
};

static struct isc_metrics *global;
static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static _Atomic int global_off;

static void global_make(void)
{
	/* The families without labels, and those whose label values are all known. */
	static const enum isc_metric_id plain[] = {
	    ISC_M_TICK_DURATION,   ISC_M_TICK_LATENESS,          ISC_M_TICKS_LATE,
	    ISC_M_LEASE_TAKEOVERS, ISC_M_STORE_TRANSIENT_ERRORS, ISC_M_SCRAPE_STORE_ERRORS,
	    ISC_M_DROPPED,
	};
	static const char *const paths[] = {"replace", "gang"};
	static const char *const outcomes[] = {"commit", "rollback"};

	global = isc_metrics_new(isc_metric_defs, ISC_M_COUNT);
	if (!global)
		return;
	isc_metrics_set(global, ISC_M_BUILD_INFO, ISC_LABELS(isc_version(), isc_build_commit()), 1);
	for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++)
		isc_metrics_touch(global, plain[i], NULL);
	for (size_t i = 0; i < 2; i++) {
		isc_metrics_touch(global, ISC_M_RECOVERIES, ISC_LABELS(paths[i]));
		isc_metrics_touch(global, ISC_M_RECOVERY_DURATION, ISC_LABELS(paths[i]));
		isc_metrics_touch(global, ISC_M_STORE_TX_DURATION, ISC_LABELS(outcomes[i]));
	}
}

void isc_metrics_touch_provider(const char *provider)
{
	static const enum isc_metric_id by_provider[] = {
	    ISC_M_SUBMIT_TO_RUNNING, ISC_M_PROVISIONING, ISC_M_FAILOVERS,
	    ISC_M_INTERRUPTIONS,     ISC_M_SPEND,        ISC_M_DESCRIBE_DURATION,
	};
	struct isc_metrics *m = isc_metrics_global();
	for (size_t i = 0; i < sizeof(by_provider) / sizeof(by_provider[0]); i++)
		isc_metrics_touch(m, by_provider[i], ISC_LABELS(provider));
}

struct isc_metrics *isc_metrics_global(void)
{
	if (atomic_load_explicit(&global_off, memory_order_relaxed))
		return NULL;
	pthread_once(&global_once, global_make);
	return global;
}

/*
 * ISC_METRICS_OFF=1 in iscd's environment: every update is a no-op and /metrics is
 * empty. Only to measure what the metrics cost (docs/metrics.md, "Cost").
 */
static void off_from_env(void) __attribute__((constructor));
static void off_from_env(void)
{
	const char *v = getenv("ISC_METRICS_OFF");
	if (v && strcmp(v, "1") == 0)
		isc_metrics_off();
}

void isc_metrics_off(void)
{
	atomic_store(&global_off, 1);
}

void isc_metric_add(enum isc_metric_id id, const char *const *lv, double v)
{
	isc_metrics_add(isc_metrics_global(), id, lv, v);
}

void isc_metric_set(enum isc_metric_id id, const char *const *lv, double v)
{
	isc_metrics_set(isc_metrics_global(), id, lv, v);
}

void isc_metric_observe(enum isc_metric_id id, const char *const *lv, double v)
{
	isc_metrics_observe(isc_metrics_global(), id, lv, v);
}

/* ---- the process ---- */

static double boot_time_s(void)
{
	char line[256];
	double t = 0;
	FILE *f = fopen("/proc/stat", "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "btime %lf", &t) == 1)
			break;
	fclose(f);
	return t;
}

void isc_metrics_process_update(struct isc_metrics *m)
{
	char buf[1024];
	long ticks = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
	unsigned long long utime = 0, stime = 0, start = 0, vsize = 0;
	long long rss = 0;
	struct rlimit rl;
	size_t fds = 0;
	DIR *d;
	FILE *f;

	if (!m)
		return;
	/* /proc/self/stat: the fields after the command's closing ')' (proc(5)). */
	if ((f = fopen("/proc/self/stat", "re"))) {
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);
		char *p;
		buf[n] = 0;
		fclose(f);
		p = strrchr(buf, ')');
		if (p &&
		    sscanf(p + 2,
		           "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d "
		           "%*d %*d %*d %llu %llu %lld",
		           &utime, &stime, &start, &vsize, &rss) == 5 &&
		    ticks > 0) {
			isc_metrics_set(m, ISC_M_PROCESS_CPU, NULL,
			                (double)(utime + stime) / (double)ticks);
			isc_metrics_set(m, ISC_M_PROCESS_VSIZE, NULL, (double)vsize);
			isc_metrics_set(m, ISC_M_PROCESS_RSS, NULL, (double)rss * (double)page);
			if (isc_metrics_value(m, ISC_M_PROCESS_START_TIME, NULL) == 0)
				isc_metrics_set(m, ISC_M_PROCESS_START_TIME, NULL,
				                boot_time_s() + (double)start / (double)ticks);
		}
	}
	if ((d = opendir("/proc/self/fd"))) {
		struct dirent *de;
		while ((de = readdir(d)))
			if (de->d_name[0] != '.')
				fds++;
		closedir(d);
		isc_metrics_set(m, ISC_M_PROCESS_OPEN_FDS, NULL, (double)(fds ? fds - 1 : 0));
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		isc_metrics_set(m, ISC_M_PROCESS_MAX_FDS, NULL,
		                rl.rlim_cur == RLIM_INFINITY ? INFINITY : (double)rl.rlim_cur);
}
