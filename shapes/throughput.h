/*
 * Relative training throughput per GPU model: how much training work one GPU
 * does in an hour, with the A100 80GB SXM as 1.000, from public measurements
 * only (Lambda's PyTorch benchmarks, MLPerf Training). A model nobody measured
 * in those sources is "unknown", never a spec-sheet guess: the ranking never
 * favours an unknown figure (docs/shapes.md, "Ranking modes").
 */
#ifndef ISC_SHAPES_THROUGHPUT_H
#define ISC_SHAPES_THROUGHPUT_H

struct isc_throughput {
	const char *gpu_type; /* the catalog's normalized model ("H100", "A100-80GB") */
	int milli;            /* relative throughput x 1000; A100-80GB = 1000 */
	const char *source;   /* where the figure comes from, for isc shapes and the page */
};

/* The shipped row for a GPU model (any case); NULL when nobody measured it. */
const struct isc_throughput *isc_throughput_of(const char *gpu_type);
/* The whole shipped table, for docs and tests. */
const struct isc_throughput *isc_throughput_table(unsigned *n);

#endif
