/*
 * The Spot Instance Advisor's public data (the JSON behind the Spot Instance Advisor
 * page, spot-bid-advisor.s3.amazonaws.com/spot-advisor-data.json; anonymous):
 * "ranges": [{index, label "<5%", ..., dots, max}], and
 * "spot_advisor"[region][os][instance_type] = {"s": savings %, "r": range index}.
 * The band is the frequency of interruption over the trailing month.
 */
#ifndef ISC_PROVIDERS_AWS_SPOT_ADVISOR_H
#define ISC_PROVIDERS_AWS_SPOT_ADVISOR_H

#include "common/err.h"

#include <stddef.h>

#define ISC_SPOT_ADVISOR_URL "https://spot-bid-advisor.s3.amazonaws.com/spot-advisor-data.json"

struct isc_spot_band {
	char instance_type[64];
	int band;        /* "r": the index into ranges */
	int max_pct;     /* ranges[band].max: the band's upper bound, percent per month */
	char label[24];  /* ranges[band].label */
	int savings_pct; /* "s": savings over on-demand, last 30 days */
};

/*
 * The bands of `types` (n of them) in `region` for `os` ("Linux"): one entry per type the
 * data has (a type it lacks is left out: unknown). ISC_EINVALID for a document without
 * ranges or spot_advisor, or a band index outside ranges. *out: caller frees.
 */
int isc_spot_advisor_parse(const char *json, size_t len, const char *region, const char *os,
                           const char *const *types, size_t n, struct isc_spot_band **out,
                           size_t *n_out, struct isc_err *err);

#endif
