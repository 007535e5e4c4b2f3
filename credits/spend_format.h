/*
 * The spend report's words: its grouping (?by=, --by) and its rendering
 * (--format). Apart from credits/spend.h, which renders the store's rows, so
 * that the CLI, which only asks the API, parses its flags without the store.
 */
#ifndef ISC_CREDITS_SPEND_FORMAT_H
#define ISC_CREDITS_SPEND_FORMAT_H

#include "common/err.h"
#include "common/model.h"

enum isc_spend_format { ISC_SPEND_TABLE, ISC_SPEND_CSV, ISC_SPEND_JSON };

/* "project", "experiment", "provider", "shape", "day"; 0 or ISC_EINVALID naming the word. */
int isc_spend_by_parse(const char *text, enum isc_spend_by *out, struct isc_err *err);
const char *isc_spend_by_name(enum isc_spend_by by);
int isc_spend_format_parse(const char *text, enum isc_spend_format *out, struct isc_err *err);

#endif
