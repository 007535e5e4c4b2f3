/*
 * Money and dates as the command line and the reports spell them: dollar
 * amounts parsed exactly into integer micro-dollars and printed back without
 * ever passing through floating point, and UTC calendar dates (YYYY-MM-DD).
 */
#ifndef ISC_CREDITS_MONEY_H
#define ISC_CREDITS_MONEY_H

#include "common/err.h"

#include <stddef.h>
#include <stdint.h>

#define ISC_MICROS_PER_DOLLAR INT64_C(1000000)
/* The largest amount any single ledger row may carry: $1,000,000,000 (10^15 micros). */
#define ISC_MONEY_MAX_MICROS INT64_C(1000000000000000)

/*
 * Parses a non-negative dollar amount: digits, optionally '.' and 1 to 6 more
 * digits, optionally preceded by '$' ("1500", "12.50", "$0.000001"). Signs,
 * exponents, separators, spaces, more than 6 decimals and amounts above
 * ISC_MONEY_MAX_MICROS are ISC_EINVALID with a message naming the problem.
 */
int isc_money_parse(const char *text, int64_t *micros, struct isc_err *err);

/*
 * Formats micros as dollars with at least min_decimals (0..6) decimals and as
 * many more as needed to be exact: (12340000, 2) -> "12.34", (1, 2) -> "0.000001",
 * (-5000000, 2) -> "-5.00". Returns out. size >= 32 is always enough.
 */
char *isc_money_format(int64_t micros, int min_decimals, char *out, size_t size);

/* Parses YYYY-MM-DD (a real calendar date, years 1970..9999) as UTC midnight in ms. */
int isc_date_parse(const char *text, int64_t *ms, struct isc_err *err);

#define ISC_MS_PER_DAY INT64_C(86400000)

#endif
