/*
 * The one table renderer of isc: each column is as wide as its widest cell
 * (header included), so a long cell widens its own column and never shifts
 * the alignment of the columns after it; cells are never cut. Numbers and
 * money can be right-aligned. Money is always printed by isc_table_money,
 * with the same two decimals everywhere. And isc_json_print, the one way a
 * command prints its --json (an empty array is "[]").
 */
#ifndef ISC_CLI_LIB_TABLE_H
#define ISC_CLI_LIB_TABLE_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

struct isc_table;

/* headers: ncols column titles (copied). NULL when out of memory. */
struct isc_table *isc_table_new(size_t ncols, const char *const *headers);
void isc_table_free(struct isc_table *t);
/* Right-aligns a column (numbers, money). */
void isc_table_align_right(struct isc_table *t, size_t col);
/* Adds a row of ncols cells (copied; NULL prints as "-"). Returns 0 or -1 out of memory. */
int isc_table_add(struct isc_table *t, const char *const *cells);
/* Columns two spaces apart; the last column is not padded. */
void isc_table_print(const struct isc_table *t, FILE *out);

/* "$1,234.50"-free money: "$1234.50" / "-$0.25", always 2 decimals (rounded half away). */
const char *isc_table_money(int64_t micros, char *buf, size_t size);

/* Prints v indented by 2 with a final newline ("[]" for an empty array). */
void isc_json_print(json_t *v, FILE *out);

#endif
