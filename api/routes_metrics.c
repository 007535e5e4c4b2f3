/*
 * GET /metrics (issue 44, docs/metrics.md): this replica's metrics in the
 * Prometheus text format. The metrics say how the whole platform does (every
 * organisation's bursts, spend and errors together), so they are the operator's:
 * on the API's listeners only the operator (the socket's owner, an operator
 * token) gets them, anyone else 403; on metrics_listen, an address of their own
 * that the operator keeps to the scraper (loopback by default), without a token,
 * as Prometheus scrapes.
 *
 * The gauges of what the store holds (bursts by state, queue depth, live
 * instances) are read at scrape with one query, at most once a second however many
 * scrapers ask; the rest are kept current by the code that does the work.
 */
#include "api/api_int.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/metrics.h"
#include "queue/burst.h"
#include "store/store_metrics.h"

#include <pthread.h>
#include <stdlib.h>

#define STORE_COUNTS_MAX_AGE_MS 1000

static pthread_mutex_t scrape_lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t counted_ms = -1; /* monotonic: when the store was last counted */

/* The store's counts into their gauges; a failure keeps the last values and is counted. */
static void count_store(struct isc_metrics *m, struct isc_store *store)
{
	struct isc_store_count *rows = NULL;
	struct isc_err err;
	size_t n = 0;

	isc_err_clear(&err);
	if (isc_store_metrics_counts(store, &rows, &n, &err)) {
		isc_log(ISC_LOG_WARN, "metrics: the store's counts: %s", err.msg);
		isc_metrics_add(m, ISC_M_SCRAPE_STORE_ERRORS, NULL, 1);
		return;
	}
	/* Every state has its series from the first scrape, 0 when no burst is in it. */
	isc_metrics_zero(m, ISC_M_BURSTS);
	for (int st = ISC_BURST_ENQUEUED; st <= ISC_BURST_STOPPED; st++)
		isc_metrics_set(m, ISC_M_BURSTS,
		                ISC_LABELS(isc_burst_state_name((enum isc_burst_state)st)), 0);
	isc_metrics_zero(m, ISC_M_QUEUE_DEPTH);
	isc_metrics_zero(m, ISC_M_INSTANCES_LIVE);
	for (size_t i = 0; i < n; i++) {
		enum isc_metric_id id = rows[i].kind == ISC_COUNT_BURST_STATE ? ISC_M_BURSTS
		                        : rows[i].kind == ISC_COUNT_QUEUED_MODE
		                            ? ISC_M_QUEUE_DEPTH
		                            : ISC_M_INSTANCES_LIVE;
		isc_metrics_set(m, id, ISC_LABELS(rows[i].key), (double)rows[i].n);
	}
	free(rows);
}

int isc_api_metrics_text(struct isc_store *store, int openmetrics, char **out, size_t *len)
{
	struct isc_metrics *m = isc_metrics_global();
	struct isc_buf b;
	int64_t now = isc_monotonic_ms();
	int rc;

	isc_buf_init(&b, 0);
	/* One scrape at a time: the gauges it zeroes and sets are not seen half done. */
	pthread_mutex_lock(&scrape_lock);
	if (m && store && (counted_ms < 0 || now - counted_ms >= STORE_COUNTS_MAX_AGE_MS)) {
		count_store(m, store);
		counted_ms = now;
	}
	isc_metrics_process_update(m);
	isc_metrics_set(m, ISC_M_DROPPED, NULL, (double)isc_metrics_dropped(m));
	rc = openmetrics ? isc_metrics_render_openmetrics(m, &b) : isc_metrics_render(m, &b);
	pthread_mutex_unlock(&scrape_lock);
	if (rc || !b.data) {
		isc_buf_cleanup(&b);
		if (!rc) {
			/* Metrics off (isc_metrics_off): an empty exposition. */
			*out = calloc(1, 1);
			*len = 0;
			return *out ? 0 : ISC_ENOMEM;
		}
		return rc;
	}
	*len = b.len;
	*out = isc_buf_detach(&b);
	return 0;
}

/* GET /metrics on the API's listeners: the operator's only. */
static void get_metrics(struct isc_api_call *c)
{
	char *text;
	size_t len;

	if (!isc_api_require_operator(c))
		return;
	if (isc_api_metrics_text(c->store, 0, &text, &len)) {
		isc_api_reply_error(c, 500, "out of memory");
		return;
	}
	isc_api_reply_text(c, 200, ISC_METRICS_CONTENT_TYPE, text, len);
}

const struct isc_api_route isc_api_routes_metrics[] = {
    {"GET", "/metrics", get_metrics},
    {NULL, NULL, NULL},
};
