/*
 * A small RFC 4180 CSV reader over a buffer in memory: quoted fields with
 * commas, doubled quotes and line breaks, LF or CRLF line ends, a UTF-8 BOM.
 * It tracks the physical line each record starts on, so an importer can say
 * "gcp.csv:1234: ..." about a bad row.
 */
#ifndef ISC_SHAPES_CSV_H
#define ISC_SHAPES_CSV_H

#include "common/buf.h"

#include <stddef.h>

struct isc_csv {
	const char *data; /* borrowed input */
	size_t len, pos;
	size_t line;     /* physical line (1-based) where the next record starts */
	size_t rec_line; /* line where the current record started */
	char **fields;   /* current record; point into text */
	size_t n, cap;
	size_t *offs;
	struct isc_buf text;
};

void isc_csv_init(struct isc_csv *c, const char *data, size_t len);
void isc_csv_cleanup(struct isc_csv *c);
/*
 * Reads the next record into c->fields / c->n. Returns 1 for a record, 0 at
 * the end, ISC_EINVALID for a quote left open at the end of the input (the
 * record started at c->rec_line), ISC_ENOMEM.
 */
int isc_csv_next(struct isc_csv *c);
/* True when the current record is an empty line. */
int isc_csv_blank(const struct isc_csv *c);

#endif
