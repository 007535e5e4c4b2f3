/*
 * Shape values and their arithmetic. Prices are parsed from the catalogs'
 * decimal strings digit by digit so that "21.957642" is 21957642 micros and
 * never 21957641.999...; the ledger adds these up, so a float here would leak
 * cents into finance reports.
 */
#include "shapes/shape.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int isc_provider_valid(const char *p)
{
	return p && (!strcmp(p, "aws") || !strcmp(p, "gcp") || !strcmp(p, "oci"));
}

char *isc_shape_id_key(const char *id)
{
	char *k = strdup(id);
	if (k)
		for (char *p = k; *p; p++)
			*p = (char)tolower((unsigned char)*p);
	return k;
}

int isc_shape_make_id(struct isc_shape *sh)
{
	char *d;
	free(sh->display_id);
	free(sh->id);
	sh->display_id = sh->id = NULL;
	if (asprintf(&d, "%s-%s-%s-%s", sh->provider, sh->region, sh->instance_type,
	             sh->spot ? "spot" : "ondemand") < 0)
		return ISC_ENOMEM;
	sh->display_id = d;
	sh->id = isc_shape_id_key(d);
	return sh->id ? 0 : ISC_ENOMEM;
}

int isc_decimal_scaled(const char *s, int64_t unit, int64_t *out)
{
	/* value * unit in micros, then back to whole units: v = round(micros * unit / 1e6). */
	const int64_t max = INT64_MAX;
	int64_t ip = 0, frac = 0; /* frac: micro part, 0..999999 */
	int digits = 0, fdigits = 0, round_up = 0;
	const char *p = s;

	if (!s || unit < 1)
		return ISC_EINVALID;
	for (; isdigit((unsigned char)*p); p++, digits++) {
		if (ip > (max - 9) / 10)
			return ISC_EINVALID;
		ip = ip * 10 + (*p - '0');
	}
	if (*p == '.') {
		for (p++; isdigit((unsigned char)*p); p++, digits++, fdigits++) {
			if (fdigits < 6)
				frac = frac * 10 + (*p - '0');
			else if (fdigits == 6)
				round_up = *p >= '5';
		}
	}
	if (*p || digits == 0)
		return ISC_EINVALID;
	for (int i = fdigits; i < 6; i++)
		frac *= 10;
	frac += round_up;
	if (ip > (max - frac) / 1000000)
		return ISC_EINVALID;
	int64_t micros = ip * 1000000 + frac;
	if (unit == 1) {
		*out = micros;
		return 0;
	}
	/* Split to avoid overflow of micros * unit. */
	int64_t whole = micros / 1000000, rem = micros % 1000000;
	if (whole > max / unit)
		return ISC_EINVALID;
	*out = whole * unit + (rem * unit + 500000) / 1000000;
	return 0;
}

int isc_decimal_to_micros(const char *s, int64_t *out)
{
	return isc_decimal_scaled(s, 1, out);
}

char *isc_micros_format(int64_t micros, char buf[ISC_MICROS_STR_MAX])
{
	uint64_t u = micros < 0 ? (uint64_t)0 - (uint64_t)micros : (uint64_t)micros;
	char frac[8];
	int n = 6;

	snprintf(frac, sizeof(frac), "%06u", (unsigned)(u % 1000000));
	while (n > 2 && frac[n - 1] == '0')
		n--;
	frac[n] = '\0';
	snprintf(buf, ISC_MICROS_STR_MAX, "%s%llu.%s", micros < 0 ? "-" : "",
	         (unsigned long long)(u / 1000000), frac);
	return buf;
}

int isc_shape_layout(int gpus, int gpus_per_node, int *nnodes, int *nproc)
{
	if (gpus < 1 || gpus_per_node < 1)
		return ISC_EINVALID;
	int d = gpus / gpus_per_node + (gpus % gpus_per_node != 0);
	while (gpus % d != 0)
		d++; /* terminates: d == gpus divides gpus */
	*nnodes = d;
	*nproc = gpus / d;
	return 0;
}

int isc_cluster_price(int64_t node_price_micros, int nnodes, int64_t *out)
{
	if (node_price_micros < 0 || nnodes < 0)
		return ISC_EINVALID;
	if (nnodes && node_price_micros > INT64_MAX / nnodes)
		return ISC_EINVALID;
	*out = node_price_micros * nnodes;
	return 0;
}

int isc_size_parse(const char *s, int64_t *bytes)
{
	static const struct {
		const char *suffix;
		int64_t mult;
	} units[] = {{"", 1},           {"K", 1000},          {"M", 1000000},
	             {"G", 1000000000}, {"T", 1000000000000}, {"Ki", 1024},
	             {"Mi", 1048576},   {"Gi", 1073741824},   {"Ti", 1099511627776}};
	int64_t v = 0;
	const char *p = s;

	if (!s || !(*p >= '0' && *p <= '9'))
		return ISC_EINVALID;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (INT64_MAX - (*p - '0')) / 10)
			return ISC_EINVALID;
		v = v * 10 + (*p - '0');
	}
	/* The unit is what follows the digits, without an optional trailing "B". */
	char unit[4];
	size_t len = strlen(p);
	if (len > 0 && p[len - 1] == 'B')
		len--;
	if (len >= sizeof(unit))
		return ISC_EINVALID;
	memcpy(unit, p, len);
	unit[len] = '\0';
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(unit, units[i].suffix) != 0)
			continue;
		if (v > INT64_MAX / units[i].mult)
			return ISC_EINVALID;
		*bytes = v * units[i].mult;
		return 0;
	}
	return ISC_EINVALID;
}

int64_t isc_shape_price_as_of_ms(const struct isc_shape *sh)
{
	struct tm tm;
	if (sh->price_checked_ms > 0)
		return sh->price_checked_ms;
	memset(&tm, 0, sizeof(tm));
	if (!sh->price_date || !strptime(sh->price_date, "%Y-%m-%d", &tm))
		return 0;
	return (int64_t)timegm(&tm) * 1000;
}
