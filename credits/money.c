/*
 * Exact dollar parsing and formatting in integer micro-dollars, and UTC dates.
 * No floating point anywhere: "0.1" is 100000 micros, not 0.1000000000000000055.
 */
#include "credits/money.h"

#include <stdio.h>
#include <string.h>

int isc_money_parse(const char *text, int64_t *micros, struct isc_err *err)
{
	const char *p = text;
	int64_t whole = 0, frac = 0;
	int int_digits = 0, frac_digits = 0;

	if (!text || !*text)
		return isc_err_set(err, ISC_EINVALID,
		                   "empty amount: expected dollars such as 1500 or 12.50");
	if (*p == '-')
		return isc_err_set(err, ISC_EINVALID,
		                   "amount '%s' is negative: it must be positive", text);
	if (*p == '$')
		p++;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (whole > ISC_MONEY_MAX_MICROS / ISC_MICROS_PER_DOLLAR)
			return isc_err_set(
			    err, ISC_EINVALID, "amount '%.40s' is too large (at most $%lld)", text,
			    (long long)(ISC_MONEY_MAX_MICROS / ISC_MICROS_PER_DOLLAR));
		whole = whole * 10 + (*p - '0');
		int_digits++;
	}
	if (*p == '.') {
		for (p++; *p >= '0' && *p <= '9'; p++) {
			if (++frac_digits > 6)
				return isc_err_set(err, ISC_EINVALID,
				                   "amount '%.40s' has more than 6 decimals (a "
				                   "micro-dollar is the "
				                   "smallest unit)",
				                   text);
			frac = frac * 10 + (*p - '0');
		}
		if (frac_digits == 0)
			return isc_err_set(err, ISC_EINVALID,
			                   "amount '%.40s' has no digits after the '.'", text);
	}
	if (*p || int_digits + frac_digits == 0)
		return isc_err_set(
		    err, ISC_EINVALID,
		    "malformed amount '%.40s': expected dollars such as 1500 or 12.50", text);
	if (int_digits == 0)
		return isc_err_set(err, ISC_EINVALID, "malformed amount '%.40s': write 0%s", text,
		                   text);
	for (int i = frac_digits; i < 6; i++)
		frac *= 10;
	if (whole > ISC_MONEY_MAX_MICROS / ISC_MICROS_PER_DOLLAR ||
	    whole * ISC_MICROS_PER_DOLLAR + frac > ISC_MONEY_MAX_MICROS)
		return isc_err_set(err, ISC_EINVALID, "amount '%.40s' is too large (at most $%lld)",
		                   text, (long long)(ISC_MONEY_MAX_MICROS / ISC_MICROS_PER_DOLLAR));
	*micros = whole * ISC_MICROS_PER_DOLLAR + frac;
	return 0;
}

char *isc_money_format(int64_t micros, int min_decimals, char *out, size_t size)
{
	/* Work on the magnitude as unsigned so INT64_MIN does not overflow. */
	uint64_t mag = micros < 0 ? (uint64_t)0 - (uint64_t)micros : (uint64_t)micros;
	char frac[8];
	int decimals = 6;

	if (min_decimals < 0)
		min_decimals = 0;
	if (min_decimals > 6)
		min_decimals = 6;
	snprintf(frac, sizeof(frac), "%06llu", (unsigned long long)(mag % 1000000));
	while (decimals > min_decimals && frac[decimals - 1] == '0')
		decimals--;
	frac[decimals] = '\0';
	snprintf(out, size, "%s%llu%s%s", micros < 0 ? "-" : "",
	         (unsigned long long)(mag / 1000000), decimals ? "." : "", frac);
	return out;
}

char *isc_money_dollars(int64_t micros, char *out, size_t size)
{
	char digits[ISC_MONEY_TEXT_MAX];
	isc_money_format(micros, 2, digits, sizeof(digits));
	snprintf(out, size, "%s$%s", digits[0] == '-' ? "-" : "", digits + (digits[0] == '-'));
	return out;
}

char *isc_money_decimal(int64_t micros, char *out, size_t size)
{
	return isc_money_format(micros, 6, out, size);
}

static int days_in_month(int y, int m)
{
	static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
	return m == 2 && leap ? 29 : days[m - 1];
}

/* Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
	int64_t era, yoe, doy, doe;
	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

int isc_date_parse(const char *text, int64_t *ms, struct isc_err *err)
{
	int y, m, d;

	if (!text || strlen(text) != 10 || text[4] != '-' || text[7] != '-')
		goto bad;
	for (int i = 0; i < 10; i++)
		if (i != 4 && i != 7 && (text[i] < '0' || text[i] > '9'))
			goto bad;
	y = (text[0] - '0') * 1000 + (text[1] - '0') * 100 + (text[2] - '0') * 10 + (text[3] - '0');
	m = (text[5] - '0') * 10 + (text[6] - '0');
	d = (text[8] - '0') * 10 + (text[9] - '0');
	if (y < 1970)
		return isc_err_set(err, ISC_EINVALID, "date '%s' is before 1970", text);
	if (m < 1 || m > 12)
		return isc_err_set(err, ISC_EINVALID, "date '%s' has no month %d", text, m);
	if (d < 1 || d > days_in_month(y, m))
		return isc_err_set(err, ISC_EINVALID,
		                   "date '%s' does not exist (month %d has %d days)", text, m,
		                   days_in_month(y, m));
	*ms = days_from_civil(y, m, d) * ISC_MS_PER_DAY;
	return 0;
bad:
	return isc_err_set(err, ISC_EINVALID, "malformed date '%.40s': expected YYYY-MM-DD (UTC)",
	                   text ? text : "");
}
