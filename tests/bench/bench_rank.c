/*
 * Ranking latency on a large catalog: the shipped catalog (shapes/PROVIDER.csv)
 * expanded with copies in synthetic regions to at least 100,000 shapes, then
 * many requests (G from 1 to 48, with and without a priority list, with and
 * without a top-K limit and filters). Prints one figure per line.
 */
#include "common/clock.h"
#include "shapes/catalog.h"
#include "shapes/catalog_import.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TARGET 100000

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	static const char *const providers[] = {"aws", "gcp", "oci"};
	const char *dir = argc > 1 ? argv[1] : "shapes";
	struct isc_catalog_parse parts[3];
	struct isc_shape *all = NULL;
	struct isc_catalog *cat;
	struct isc_err err;
	size_t base = 0, n = 0;

	for (int i = 0; i < 3; i++) {
		char path[4096];
		snprintf(path, sizeof(path), "%s/%s.csv", dir, providers[i]);
		if (isc_catalog_parse_file(path, ISC_CATALOG_ISC, providers[i], NULL, &parts[i],
		                           &err)) {
			fprintf(stderr, "bench_rank: %s (run from the repository root)\n", err.msg);
			return 1;
		}
		base += parts[i].n;
	}
	size_t copies = (TARGET + base - 1) / base;
	all = calloc(base * copies, sizeof(*all));
	if (!all)
		return 1;
	for (size_t c = 0; c < copies; c++)
		for (int i = 0; i < 3; i++)
			for (size_t k = 0; k < parts[i].n; k++) {
				struct isc_shape *sh = &all[n++];
				char region[128];
				if (isc_shape_copy(sh, &parts[i].shapes[k]))
					return 1;
				if (c) {
					/* A synthetic region, and a price moved a little so the
					 * order changes. */
					snprintf(region, sizeof(region), "%s-x%zu",
					         parts[i].shapes[k].region, c);
					free(sh->region);
					sh->region = strdup(region);
					sh->price_micros +=
					    (int64_t)((c * 7919 + k * 104729) % 1000) * 1000;
					if (!sh->region || isc_shape_make_id(sh))
						return 1;
				}
			}
	for (int i = 0; i < 3; i++)
		isc_catalog_parse_cleanup(&parts[i]);
	double t0 = isc_monotonic_us() / 1e3;
	if (isc_catalog_new(all, n, &cat, &err)) {
		fprintf(stderr, "bench_rank: %s\n", err.msg);
		return 1;
	}
	double build_ms = isc_monotonic_us() / 1e3 - t0;

	/* Requests: every G, five kinds each, repeated. */
	enum { ROUNDS = 5, KINDS = 5 };
	size_t nreq = 48 * KINDS * ROUNDS, done = 0, total_entries = 0;
	double *lat = calloc(nreq, sizeof(*lat)), worst = 0;
	double kind_worst[KINDS] = {0}, *kind_lat[KINDS];
	size_t kind_n[KINDS] = {0};
	for (int k = 0; k < KINDS; k++)
		kind_lat[k] = calloc(48 * ROUNDS, sizeof(double));
	const char *prio[4];
	prio[0] = isc_catalog_at(cat, n / 3)->display_id;
	prio[1] = "aws-nowhere-1-p9.huge-spot";
	prio[2] = isc_catalog_at(cat, n / 2)->id;
	prio[3] = isc_catalog_at(cat, 17)->display_id;
	for (int round = 0; round < ROUNDS; round++)
		for (int G = 1; G <= 48; G++)
			for (int kind = 0; kind < KINDS; kind++) {
				struct isc_rank_request req = {.gpus = G};
				struct isc_ranking r;
				if (kind == 1) { /* the broker's case: a priority list */
					req.priority = prio;
					req.n_priority = 4;
				} else if (kind == 2) { /* top 10 of everything */
					req.limit = 10;
				} else if (kind == 3) { /* filters, top 20 */
					req.gpu_type = "H100";
					req.market = ISC_MARKET_SPOT;
					req.limit = 20;
				} else if (kind ==
				           4) { /* an all-invalid priority list: full fallback */
					req.priority = prio + 1;
					req.n_priority = 1;
				}
				double t = isc_monotonic_us() / 1e3;
				if (isc_catalog_rank(cat, &req, &r, &err)) {
					fprintf(stderr, "bench_rank: %s\n", err.msg);
					return 1;
				}
				double d = isc_monotonic_us() / 1e3 - t;
				total_entries += r.n;
				isc_ranking_cleanup(&r);
				lat[done++] = d;
				if (d > worst)
					worst = d;
				kind_lat[kind][kind_n[kind]++] = d;
				if (d > kind_worst[kind])
					kind_worst[kind] = d;
			}
	qsort(lat, done, sizeof(*lat), cmp_double);
	printf("catalog shapes: %zu\n", n);
	printf("catalog build ms: %.2f\n", build_ms);
	printf("rankings: %zu\n", done);
	printf("ranking median ms: %.4f\n", lat[done / 2]);
	printf("ranking p99 ms: %.4f\n", lat[done * 99 / 100]);
	printf("ranking worst ms: %.4f\n", worst);
	static const char *const kind_name[KINDS] = {"full ranking of all shapes", "priority list",
	                                             "top-10", "filtered top-20",
	                                             "invalid priority fallback"};
	for (int k = 0; k < KINDS; k++) {
		qsort(kind_lat[k], kind_n[k], sizeof(double), cmp_double);
		printf("median ms %s: %.4f\n", kind_name[k], kind_lat[k][kind_n[k] / 2]);
		printf("worst ms %s: %.4f\n", kind_name[k], kind_worst[k]);
		free(kind_lat[k]);
	}
	printf("entries ranked: %zu\n", total_entries);
	free(lat);
	isc_catalog_free(cat);
	return 0;
}
