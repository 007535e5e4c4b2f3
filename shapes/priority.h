/*
 * The user's burst_shape_priority_list checked where it is written: each id
 * must name a shape of the catalog, and (when asked) one this broker can
 * place. A list the user wrote is a constraint, not a hint: `isc burst` goes on
 * with the valid ids only and refuses a list with none (docs/shapes.md).
 */
#ifndef ISC_SHAPES_PRIORITY_H
#define ISC_SHAPES_PRIORITY_H

#include "launchfile/launchfile.h"
#include "providers/placeable.h"
#include "shapes/catalog.h"

struct isc_priority_verdict {
	size_t n_ids;   /* items of the list */
	int *exists;    /* n_ids flags: the id names a shape of the catalog */
	int *placeable; /* n_ids flags: exists, and the broker can place it (1 without a checker) */
	size_t n_exist; /* how many exist */
	size_t n_placeable; /* how many exist and can be placed */
};

/*
 * Appends to problems, as warnings at each item's position, one line per id
 * that names no shape:
 *     burst_shape_priority_list[i]: no shape "ID"; did you mean "ID2"?
 * and, when pl is not NULL, one per shape this broker cannot place:
 *     burst_shape_priority_list[i]: shape "ID" cannot be placed by this broker: WHY
 * Fills *out (clean up with isc_priority_verdict_cleanup). 0 or ISC_ENOMEM.
 */
int isc_priority_check(const struct isc_catalog *c, struct isc_placeable *pl,
                       const struct isc_strlist *ids, struct isc_launch_problems *problems,
                       struct isc_priority_verdict *out, struct isc_err *err);
void isc_priority_verdict_cleanup(struct isc_priority_verdict *v);

#endif
