/* Tables sized to their content, exact money, and --json printing (cli/table.h). */
#include "cli/lib/table.h"

#include "credits/money.h"

#include <locale.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <wchar.h>

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

/*
 * The columns a UTF-8 string takes on a terminal: wcwidth() of each character (2 for
 * East Asian wide ones such as 日本語, 0 for combining marks), read in a UTF-8 locale
 * of this thread whatever the process's own locale is. A byte sequence that is not
 * UTF-8, or a character wcwidth does not know, counts one column per character.
 */
static locale_t utf8;
static pthread_once_t utf8_once = PTHREAD_ONCE_INIT;

static void utf8_make(void)
{
	utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
}

size_t isc_text_width(const char *s)
{
	locale_t prev = (locale_t)0;
	mbstate_t st;
	size_t w = 0, len;

	/* ASCII is a column a byte (controls too, as below): most cells are all ASCII, and
	 * the locale's decoder was a tenth of `isc shapes`' time for 3,361 rows. */
	while (*s && !((unsigned char)*s & 0x80))
		s++, w++;
	if (!*s)
		return w;
	len = strlen(s);
	/* Once per process: iscd's API threads draw tables too (the spend report's). */
	pthread_once(&utf8_once, utf8_make);
	if (utf8)
		prev = uselocale(utf8);
	memset(&st, 0, sizeof(st));
	while (len > 0) {
		wchar_t wc;
		size_t n = utf8 ? mbrtowc(&wc, s, len, &st) : (size_t)-1;
		int cw;
		if (n == (size_t)-1 || n == (size_t)-2) {
			/* Not UTF-8 (or no UTF-8 locale): a column per lead byte. */
			memset(&st, 0, sizeof(st));
			n = 1;
			while (n < len && ((unsigned char)s[n] & 0xc0) == 0x80)
				n++;
			cw = 1;
		} else {
			if (n == 0)
				break;
			cw = wcwidth(wc);
			if (cw < 0)
				cw = 1;
		}
		w += (size_t)cw;
		s += n;
		len -= n;
	}
	if (utf8)
		uselocale(prev);
	return w;
}

static size_t text_width(const char *s)
{
	return isc_text_width(s);
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

/*
 * Money in --json has one form: every integer NAME_micros member gets its NAME
 * member as the 6-place decimal string (isc_money_decimal), whatever route it came
 * from, so no command prints a rounded or differently shaped amount.
 */
static void json_money(json_t *v)
{
	const char *key;
	json_t *member, *add;
	size_t i;

	if (json_is_array(v)) {
		json_array_foreach(v, i, member) json_money(member);
		return;
	}
	if (!json_is_object(v))
		return;
	add = json_object();
	json_object_foreach(v, key, member)
	{
		size_t len = strlen(key);
		char name[128], text[ISC_MONEY_TEXT_MAX];
		if (json_is_integer(member) && len > 7 && len - 7 < sizeof(name) &&
		    strcmp(key + len - 7, "_micros") == 0) {
			snprintf(name, sizeof(name), "%.*s", (int)(len - 7), key);
			json_object_set_new(add, name,
			                    json_string(isc_money_decimal(
			                        json_integer_value(member), text, sizeof(text))));
		} else {
			json_money(member);
		}
	}
	if (add)
		json_object_update(v, add);
	json_decref(add);
}

void isc_json_print(json_t *v, FILE *out)
{
	json_money(v);
	json_dumpf(v, out, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	fputc('\n', out);
}

const char *isc_json_str(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s ? s : "";
}

const char *isc_json_dollars(json_t *o, const char *key, char *out, size_t cap)
{
	return isc_money_dollars(json_integer_value(json_object_get(o, key)), out, cap);
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
