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

/*
 * The one way money is shown to a person (isc's tables and messages, iscd's waiting
 * messages; web/app.js's money() follows the same rule): "$" and the exact amount
 * with at least two decimals, never rounded: $1499.965784, $0.000001, -$5.00.
 * Returns out; ISC_MONEY_TEXT_MAX is always enough.
 */
#define ISC_MONEY_TEXT_MAX 40
char *isc_money_dollars(int64_t micros, char *out, size_t size);

/*
 * The one form of money in JSON and CSV (next to an integer NAME_micros member): a
 * decimal string with exactly 6 places, "1499.965784", "0.500000", "-5.000000".
 */
char *isc_money_decimal(int64_t micros, char *out, size_t size);

/* Parses YYYY-MM-DD (a real calendar date, years 1970..9999) as UTC midnight in ms. */
int isc_date_parse(const char *text, int64_t *ms, struct isc_err *err);

#define ISC_MS_PER_DAY INT64_C(86400000)

#endif
