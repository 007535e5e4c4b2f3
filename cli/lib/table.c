/* Tables sized to their content, fixed-decimal money, and --json printing (cli/table.h). */
#include "cli/lib/table.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

struct isc_table {
	size_t ncols, nrows;
	char **cells; /* (nrows + 1) * ncols; row 0 is the header */
	size_t *width;
	unsigned char *right;
};

static char *dup_cell(const char *s)
{
	return strdup(s ? s : "-");
}

/* Display width: UTF-8 continuation bytes take no column. */
static size_t text_width(const char *s)
{
	size_t w = 0;
	for (; *s; s++)
		if (((unsigned char)*s & 0xc0) != 0x80)
			w++;
	return w;
}

struct isc_table *isc_table_new(size_t ncols, const char *const *headers)
{
	struct isc_table *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->ncols = ncols;
	t->width = calloc(ncols, sizeof(*t->width));
	t->right = calloc(ncols, 1);
	if (!t->width || !t->right || isc_table_add(t, headers)) {
		isc_table_free(t);
		return NULL;
	}
	return t;
}

void isc_table_free(struct isc_table *t)
{
	if (!t)
		return;
	for (size_t i = 0; t->cells && i < t->nrows * t->ncols; i++)
		free(t->cells[i]);
	free(t->cells);
	free(t->width);
	free(t->right);
	free(t);
}

void isc_table_align_right(struct isc_table *t, size_t col)
{
	if (col < t->ncols)
		t->right[col] = 1;
}

int isc_table_add(struct isc_table *t, const char *const *cells)
{
	char **grown = realloc(t->cells, (t->nrows + 1) * t->ncols * sizeof(*grown));
	if (!grown)
		return -1;
	t->cells = grown;
	for (size_t c = 0; c < t->ncols; c++) {
		char *cell = dup_cell(cells[c]);
		size_t w;
		if (!cell) {
			for (size_t k = 0; k < c; k++)
				free(t->cells[t->nrows * t->ncols + k]);
			return -1;
		}
		t->cells[t->nrows * t->ncols + c] = cell;
		w = text_width(cell);
		if (w > t->width[c])
			t->width[c] = w;
	}
	t->nrows++;
	return 0;
}

void isc_table_print(const struct isc_table *t, FILE *out)
{
	for (size_t r = 0; r < t->nrows; r++) {
		for (size_t c = 0; c < t->ncols; c++) {
			const char *cell = t->cells[r * t->ncols + c];
			size_t pad = t->width[c] - text_width(cell);
			int last = c + 1 == t->ncols;
			if (c)
				fputs("  ", out);
			if (t->right[c])
				fprintf(out, "%*s%s", (int)pad, "", cell);
			else
				fprintf(out, "%s%*s", cell, last ? 0 : (int)pad, "");
		}
		fputc('\n', out);
	}
}

const char *isc_table_money(int64_t micros, char *buf, size_t size)
{
	/* Round half away from zero to cents, in integers: money never goes through a double. */
	uint64_t mag = micros < 0 ? (uint64_t)0 - (uint64_t)micros : (uint64_t)micros;
	uint64_t cents = (mag + 5000) / 10000;
	snprintf(buf, size, "%s$%llu.%02llu", micros < 0 && cents ? "-" : "",
	         (unsigned long long)(cents / 100), (unsigned long long)(cents % 100));
	return buf;
}

void isc_json_print(json_t *v, FILE *out)
{
	json_dumpf(v, out, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	fputc('\n', out);
}

const char *isc_json_str(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s ? s : "";
}

const char *isc_json_when(json_t *v, char *buf, size_t cap)
{
	time_t t;
	struct tm tm;
	if (!json_is_integer(v))
		return "-";
	t = (time_t)(json_integer_value(v) / 1000);
	if (!gmtime_r(&t, &tm) || !strftime(buf, cap, "%Y-%m-%d %H:%M:%S", &tm))
		return "-";
	return buf;
}

int isc_table_print_rows(const struct isc_table_spec *spec, json_t *rows, FILE *out)
{
	struct isc_table *t = isc_table_new(spec->ncols, spec->headers);
	const char **cells = calloc(spec->ncols, sizeof(*cells));
	char(*scratch)[ISC_TABLE_CELL] = calloc(spec->ncols, sizeof(*scratch));
	json_t *row;
	size_t i;
	int rc = t && cells && scratch ? 0 : -1;

	for (size_t c = 0; !rc && spec->right && c < spec->ncols && spec->right[c]; c++)
		if (spec->right[c] == 'r')
			isc_table_align_right(t, c);
	json_array_foreach(rows, i, row)
	{
		if (rc)
			break;
		for (size_t c = 0; c < spec->ncols; c++)
			cells[c] = NULL;
		spec->fill(row, cells, scratch);
		rc = isc_table_add(t, cells);
	}
	if (!rc) {
		if (json_array_size(rows) == 0 && spec->empty_hint)
			fprintf(stderr, "%s\n", spec->empty_hint);
		isc_table_print(t, out);
	}
	free(scratch);
	free(cells);
	isc_table_free(t);
	return rc;
}
