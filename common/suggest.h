/*
 * Did-you-mean: the known word nearest to a mistyped one, by edit distance.
 * Used for unknown commands and options, launch-file keys and shape ids, so a
 * typo is named with its likely fix instead of a bare "unknown".
 *
 * The distance is the optimal string alignment distance (Levenshtein plus
 * adjacent transpositions), ignoring ASCII case and counting '-', '_' and ' '
 * as the same character. A candidate is near enough to be a typo when its
 * distance is at most max(2, its length / 3).
 */
#ifndef ISC_COMMON_SUGGEST_H
#define ISC_COMMON_SUGGEST_H

#include <stddef.h>

/* Strings longer than this are never compared (the distance counts as huge). */
#define ISC_SUGGEST_MAX_LEN 256

size_t isc_edit_distance(const char *a, size_t la, const char *b, size_t lb);

/* A running search over many candidates (a catalog need not be copied into an array). */
struct isc_suggest {
	const char *word;
	size_t len;
	const char *best; /* borrowed from the candidates; NULL while none is near */
	size_t best_distance;
};

void isc_suggest_init(struct isc_suggest *s, const char *word, size_t len);
/* Considers one candidate (an exact match counts as distance 0 and wins). */
void isc_suggest_consider(struct isc_suggest *s, const char *candidate);

/* The nearest of n candidates, or NULL when none is near enough. */
const char *isc_suggest(const char *word, const char *const *candidates, size_t n);

#endif
