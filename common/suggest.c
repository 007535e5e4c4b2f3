/* Did-you-mean by edit distance (see suggest.h for the rules). */
#include "common/suggest.h"

#include <stdint.h>
#include <string.h>

static int norm_char(int ch)
{
	if (ch >= 'A' && ch <= 'Z')
		return ch - 'A' + 'a';
	return ch == '-' || ch == ' ' ? '_' : ch;
}

size_t isc_edit_distance(const char *a, size_t la, const char *b, size_t lb)
{
	/* Three rows: the transposition step looks two rows back. */
	size_t rows[3][ISC_SUGGEST_MAX_LEN + 1];
	size_t *prev2 = rows[0], *prev = rows[1], *cur = rows[2];

	if (la > ISC_SUGGEST_MAX_LEN || lb > ISC_SUGGEST_MAX_LEN)
		return SIZE_MAX;
	for (size_t j = 0; j <= lb; j++)
		prev[j] = j;
	for (size_t i = 1; i <= la; i++) {
		int ca = norm_char((unsigned char)a[i - 1]);
		cur[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			int cb = norm_char((unsigned char)b[j - 1]);
			size_t best = prev[j] + 1;
			if (cur[j - 1] + 1 < best)
				best = cur[j - 1] + 1;
			if (prev[j - 1] + (ca != cb) < best)
				best = prev[j - 1] + (ca != cb);
			if (i > 1 && j > 1 && ca == norm_char((unsigned char)b[j - 2]) &&
			    norm_char((unsigned char)a[i - 2]) == cb && prev2[j - 2] + 1 < best)
				best = prev2[j - 2] + 1;
			cur[j] = best;
		}
		size_t *t = prev2;
		prev2 = prev;
		prev = cur;
		cur = t;
	}
	return prev[lb];
}

void isc_suggest_init(struct isc_suggest *s, const char *word, size_t len)
{
	s->word = word;
	s->len = len;
	s->best = NULL;
	s->best_distance = SIZE_MAX;
}

void isc_suggest_consider(struct isc_suggest *s, const char *candidate)
{
	size_t cl = strlen(candidate), limit = cl / 3 > 2 ? cl / 3 : 2, d;
	size_t gap = cl > s->len ? cl - s->len : s->len - cl;

	/* The lengths alone bound the distance from below: most candidates stop here. */
	if (s->len == 0 || gap > limit || gap >= s->best_distance)
		return;
	d = isc_edit_distance(s->word, s->len, candidate, cl);
	if (d <= limit && d < s->best_distance) {
		s->best = candidate;
		s->best_distance = d;
	}
}

const char *isc_suggest(const char *word, const char *const *candidates, size_t n)
{
	struct isc_suggest s;
	isc_suggest_init(&s, word, strlen(word));
	for (size_t i = 0; i < n; i++)
		isc_suggest_consider(&s, candidates[i]);
	return s.best;
}
