/*
 * The one table renderer of isc: each column is as wide as its widest cell
 * (header included), so a long cell widens its own column and never shifts
 * the alignment of the columns after it; cells are never cut. A cell's width
 * is its display width (wcwidth: 日本語 takes six columns). Numbers and money
 * can be right-aligned; money is written by isc_money_dollars (credits/money.h),
 * exact. And isc_json_print, the one way a command prints its --json (an empty
 * array is "[]").
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

/* The columns s (UTF-8) takes on a terminal, by wcwidth. */
size_t isc_text_width(const char *s);

/*
 * Prints v indented by 2 with a final newline ("[]" for an empty array). Every
 * integer NAME_micros member first gets NAME as a 6-place decimal string (money's
 * one JSON form), which is why v is not const.
 */
void isc_json_print(json_t *v, FILE *out);

/* The string o[key], or "" when it is missing or not a string. */
const char *isc_json_str(json_t *o, const char *key);
/*
 * The integer micro-dollars o[key] (0 when missing) as dollars for people
 * (isc_money_dollars: "$12.50") in out; returns out. Every amount the CLI prints
 * from a reply goes through here.
 */
const char *isc_json_dollars(json_t *o, const char *key, char *out, size_t cap);
/* Milliseconds since the epoch as "YYYY-MM-DD HH:MM:SS" (UTC) in buf; "-" when v is not an integer.
 */
const char *isc_json_when(json_t *v, char *buf, size_t cap);

/*
 * A listing as a table, one row per element of a JSON array (what most
 * commands print without --json). fill sets cells[0..ncols) for one element;
 * a formatted cell (a time, money, a number) goes into its own column's
 * scratch buffer of ISC_TABLE_CELL bytes.
 */
#define ISC_TABLE_CELL 64
typedef void (*isc_table_row_fn)(json_t *row, const char **cells, char (*scratch)[ISC_TABLE_CELL]);
struct isc_table_spec {
	size_t ncols;
	const char *const *headers;
	const char *right; /* NULL, or ncols chars: 'r' right-aligns that column */
	isc_table_row_fn fill;
	const char *empty_hint; /* printed to stderr when rows is empty, or NULL */
};
/* Prints rows as spec says. Returns 0, or -1 when out of memory (nothing printed). */
int isc_table_print_rows(const struct isc_table_spec *spec, json_t *rows, FILE *out);

#endif
