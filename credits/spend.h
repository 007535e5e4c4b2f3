/*
 * The spend report's renderings: a table for people, CSV for spreadsheets
 * (RFC 4180, CRLF, a header row and a final TOTAL row) and JSON with integer
 * micro-dollars next to exact decimal strings. Rows come from
 * isc_store_ledger_spend; the total is their exact integer sum.
 */
#ifndef ISC_CREDITS_SPEND_H
#define ISC_CREDITS_SPEND_H

#include "common/buf.h"
#include "common/err.h"
#include "credits/spend_format.h"
#include "store/store_ledger.h"

/* Exact sum of the rows; ISC_EINVALID on int64 overflow. */
int isc_spend_total(const struct isc_spend_row *rows, size_t n, int64_t *total,
                    struct isc_err *err);

/* Appends the report to out. */
int isc_spend_render(const struct isc_spend_row *rows, size_t n, enum isc_spend_by by,
                     enum isc_spend_format format, struct isc_buf *out, struct isc_err *err);

/*
 * Appends one CSV field, quoted when it holds a comma, quote, CR, LF or edge spaces.
 * Spreadsheet-safe: a field starting with = + - @ TAB or CR that is not a plain
 * number (-1.50 is one) is written as "'..." so no spreadsheet runs it as a formula.
 */
int isc_csv_field(struct isc_buf *out, const char *field);

#endif
