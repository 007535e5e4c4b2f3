/*
 * Pages of listings (docs/api.md, "Pages"): ?limit= and ?after= in, X-Isc-Next
 * out. The cursor is each route's own (a position in its stable order); this
 * file only reads the arguments and writes the header, so every listing pages
 * the same way.
 */
#include "api/api_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

int isc_api_page_parse(struct isc_api_call *c, size_t def, size_t max, struct isc_api_page *out)
{
	const char *limit = isc_api_query(c, "limit"), *after = isc_api_query(c, "after");

	out->limit = def;
	out->after = NULL;
	if (limit) {
		char *end;
		long long n;
		errno = 0;
		n = strtoll(limit, &end, 10);
		if (!*limit || *end || errno || n < 1 || (unsigned long long)n > max) {
			isc_api_reply_error(c, 400, "limit: '%s' is not a page size (1..%zu)",
			                    limit, max);
			return 0;
		}
		out->limit = (size_t)n;
	}
	if (after) {
		if (!*after) {
			isc_api_reply_error(c, 400, "after: empty (give the X-Isc-Next of a page)");
			return 0;
		}
		out->after = after;
	}
	return 1;
}

void isc_api_page_next(struct isc_api_call *c, const char *cursor)
{
	snprintf(c->next_cursor, sizeof(c->next_cursor), "%s", cursor);
	isc_api_header(c, "X-Isc-Next", c->next_cursor);
}
