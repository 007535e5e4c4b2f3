/* Checking a burst_shape_priority_list against the catalog and the broker (priority.h). */
#include "shapes/priority.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIELD "burst_shape_priority_list"

void isc_priority_verdict_cleanup(struct isc_priority_verdict *v)
{
	if (!v)
		return;
	free(v->exists);
	free(v->placeable);
	memset(v, 0, sizeof(*v));
}

int isc_priority_check(const struct isc_catalog *c, struct isc_placeable *pl,
                       const struct isc_strlist *ids, struct isc_launch_problems *problems,
                       struct isc_priority_verdict *out, struct isc_err *err)
{
	memset(out, 0, sizeof(*out));
	out->n_ids = ids->len;
	out->exists = calloc(ids->len ? ids->len : 1, sizeof(int));
	out->placeable = calloc(ids->len ? ids->len : 1, sizeof(int));
	if (!out->exists || !out->placeable)
		goto oom;
	for (size_t i = 0; i < ids->len; i++) {
		const char *id = ids->items[i];
		const struct isc_launch_pos *pos = &ids->pos[i];
		const struct isc_shape *sh = isc_catalog_find(c, id), *near;
		char field[64], why[ISC_ERR_MSG_MAX];
		int rc = 0;

		snprintf(field, sizeof(field), FIELD "[%zu]", pos->index);
		if (!sh) {
			near = isc_catalog_suggest(c, id);
			rc = near ? isc_launch_problems_add(problems, 1, pos->line, pos->col, field,
			                                    "no shape \"%s\"; did you mean \"%s\"?",
			                                    id, near->display_id)
			          : isc_launch_problems_add(problems, 1, pos->line, pos->col, field,
			                                    "no shape \"%s\"", id);
		} else {
			out->exists[i] = 1;
			out->n_exist++;
			if (!pl ||
			    isc_placeable_check(pl, sh->provider, sh->region, why, sizeof(why))) {
				out->placeable[i] = 1;
				out->n_placeable++;
			} else {
				rc = isc_launch_problems_add(
				    problems, 1, pos->line, pos->col, field,
				    "shape \"%s\" cannot be placed by this broker: %s",
				    sh->display_id, why);
			}
		}
		if (rc)
			goto oom;
	}
	return 0;
oom:
	isc_priority_verdict_cleanup(out);
	return isc_err_set(err, ISC_ENOMEM, "out of memory");
}
