/* The Spot Instance Advisor's JSON, read for the bands of a region's instance types. */
#include "providers/aws/spot_advisor.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int isc_spot_advisor_parse(const char *json, size_t len, const char *region, const char *os,
                           const char *const *types, size_t n, struct isc_spot_band **out,
                           size_t *n_out, struct isc_err *err)
{
	json_t *doc = json_loadb(json, len, 0, NULL), *ranges, *byos;
	struct isc_spot_band *v = NULL;
	size_t k = 0;
	int rc = 0;

	*out = NULL;
	*n_out = 0;
	if (!doc)
		return isc_err_set(err, ISC_EINVALID, "Spot Advisor data: not JSON");
	ranges = json_object_get(doc, "ranges");
	if (!json_is_array(ranges) || !json_is_object(json_object_get(doc, "spot_advisor"))) {
		json_decref(doc);
		return isc_err_set(
		    err, ISC_EINVALID,
		    "Spot Advisor data: no \"ranges\" array or \"spot_advisor\" object");
	}
	/* A region the data does not cover: every type unknown, not an error. */
	byos = json_object_get(json_object_get(json_object_get(doc, "spot_advisor"), region), os);
	if (!(v = calloc(n ? n : 1, sizeof(*v)))) {
		json_decref(doc);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < n && json_is_object(byos) && !rc; i++) {
		json_t *e = json_object_get(byos, types[i]), *r, *range = NULL;
		if (!json_is_object(e))
			continue;
		r = json_object_get(e, "r");
		/* "r" indexes ranges by their "index" member (they are listed in order) */
		for (size_t j = 0; json_is_integer(r) && j < json_array_size(ranges); j++) {
			json_t *x = json_array_get(ranges, j);
			if (json_integer_value(json_object_get(x, "index")) ==
			    json_integer_value(r))
				range = x;
		}
		if (!range || !json_is_integer(json_object_get(range, "max")) ||
		    !json_is_string(json_object_get(range, "label"))) {
			rc = isc_err_set(err, ISC_EINVALID,
			                 "Spot Advisor data: %s in %s has no valid band", types[i],
			                 region);
			break;
		}
		snprintf(v[k].instance_type, sizeof(v[k].instance_type), "%s", types[i]);
		v[k].band = (int)json_integer_value(r);
		v[k].max_pct = (int)json_integer_value(json_object_get(range, "max"));
		snprintf(v[k].label, sizeof(v[k].label), "%s",
		         json_string_value(json_object_get(range, "label")));
		v[k].savings_pct = (int)json_integer_value(json_object_get(e, "s"));
		k++;
	}
	json_decref(doc);
	if (rc) {
		free(v);
		return rc;
	}
	*out = v;
	*n_out = k;
	return 0;
}
