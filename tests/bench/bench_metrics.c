/*
 * What the metrics cost (docs/metrics.md, "Cost"): the CPU time of one update of
 * each kind on iscd's registry, with the API's histogram already holding 200 series
 * (every route and code a busy platform sees, the worst a lookup scans), and of one
 * render of that registry (what a scrape costs beside its store query).
 */
#include "common/metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* The thread's CPU time: on a shared 2-core machine wall time mostly measures the others. */
static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

#define N 1000000

int main(void)
{
	struct isc_metrics *m = isc_metrics_new(isc_metric_defs, ISC_M_COUNT);
	char route[64], code[8];
	struct isc_buf b;
	double t0, t1;
	size_t bytes = 0;

	if (!m)
		return 1;
	for (int r = 0; r < 50; r++)
		for (int c = 0; c < 4; c++) {
			snprintf(route, sizeof(route), "/v1/route%d/{}", r);
			snprintf(code, sizeof(code), "%d", 200 + c * 100);
			isc_metrics_observe(m, ISC_M_API_REQUEST_DURATION,
			                    ISC_LABELS("GET", route, code), 0.001);
		}
	for (int p = 0; p < 3; p++) {
		const char *prov = p == 0 ? "aws" : p == 1 ? "gcp" : "oci";
		isc_metrics_observe(m, ISC_M_DESCRIBE_DURATION, ISC_LABELS(prov), 0.2);
		isc_metrics_add(m, ISC_M_LAUNCHES, ISC_LABELS(prov, "us-east-1"), 1);
		isc_metrics_add(m, ISC_M_SPEND, ISC_LABELS(prov), 1000);
		isc_metrics_set(m, ISC_M_INSTANCES_LIVE, ISC_LABELS(prov), 10);
	}

	t0 = now_ns();
	for (int i = 0; i < N; i++)
		isc_metrics_observe(m, ISC_M_TICK_DURATION, NULL, 0.05);
	t1 = now_ns();
	printf("histogram observe, no labels:                 %6.1f ns\n", (t1 - t0) / N);

	t0 = now_ns();
	for (int i = 0; i < N; i++)
		isc_metrics_add(m, ISC_M_SPEND, ISC_LABELS("oci"), 7);
	t1 = now_ns();
	printf("counter add, 1 label (3 series):              %6.1f ns\n", (t1 - t0) / N);

	t0 = now_ns();
	for (int i = 0; i < N; i++)
		isc_metrics_observe(m, ISC_M_API_REQUEST_DURATION,
		                    ISC_LABELS("GET", "/v1/route49/{}", "500"), 0.002);
	t1 = now_ns();
	printf("API histogram, 3 labels, last of 200 series:  %6.1f ns\n", (t1 - t0) / N);

	t0 = now_ns();
	for (int i = 0; i < 100; i++) {
		isc_buf_init(&b, 0);
		isc_metrics_process_update(m);
		isc_metrics_render(m, &b);
		bytes = b.len;
		isc_buf_cleanup(&b);
	}
	t1 = now_ns();
	printf("render (with /proc reads), %zu bytes:     %6.3f ms\n", bytes,
	       (t1 - t0) / 100 / 1e6);
	isc_metrics_free(m);
	return 0;
}
