/*
 * Rendering the spend report. Amounts are printed from integer micros with
 * isc_money_format, so the CSV and JSON decimals are exact and the integer
 * columns let a reader check them.
 */
#include "credits/spend.h"
#include "cli/lib/table.h"
#include "credits/money.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const by_names[] = {"project", "experiment", "provider", "shape", "day"};

const char *isc_spend_by_name(enum isc_spend_by by)
{
	return (unsigned)by < sizeof(by_names) / sizeof(by_names[0]) ? by_names[by] : "?";
}

int isc_spend_by_parse(const char *text, enum isc_spend_by *out, struct isc_err *err)
{
	for (size_t i = 0; i < sizeof(by_names) / sizeof(by_names[0]); i++)
		if (text && strcmp(text, by_names[i]) == 0) {
			*out = (enum isc_spend_by)i;
			return 0;
		}
	return isc_err_set(
	    err, ISC_EINVALID,
	    "cannot group spend by '%.40s': use project, experiment, provider, shape or day",
	    text ? text : "");
}

int isc_spend_format_parse(const char *text, enum isc_spend_format *out, struct isc_err *err)
{
	if (text && strcmp(text, "table") == 0)
		*out = ISC_SPEND_TABLE;
	else if (text && strcmp(text, "csv") == 0)
		*out = ISC_SPEND_CSV;
	else if (text && strcmp(text, "json") == 0)
		*out = ISC_SPEND_JSON;
	else
		return isc_err_set(err, ISC_EINVALID,
		                   "unknown format '%.40s': use table, csv or json",
		                   text ? text : "");
	return 0;
}

int isc_spend_total(const struct isc_spend_row *rows, size_t n, int64_t *total, struct isc_err *err)
{
	int64_t sum = 0;
	for (size_t i = 0; i < n; i++)
		if (__builtin_add_overflow(sum, rows[i].amount_micros, &sum))
			return isc_err_set(err, ISC_EINVALID, "spend total overflows");
	*total = sum;
	return 0;
}

/* -1.50, +3, 42, 0.5: a number a spreadsheet reads as one, never as a formula. */
static int plain_number(const char *p)
{
	int digits = 0;

	if (*p == '-' || *p == '+')
		p++;
	for (; *p >= '0' && *p <= '9'; p++)
		digits++;
	if (*p == '.')
		for (p++; *p >= '0' && *p <= '9'; p++)
			digits++;
	return digits > 0 && !*p;
}

int isc_csv_field(struct isc_buf *out, const char *field)
{
	size_t len = strlen(field);
	/*
	 * A cell starting with = + - @ (or a tab or CR, which some spreadsheets skip
	 * before looking) is a formula to Excel, LibreOffice and Google Sheets: an
	 * experiment named =HYPERLINK("http://...?"&B3,"open") would run in the
	 * finance export of whoever opens it (issue 42). OWASP's rule: such a cell
	 * gets a leading ' (shown as text, never evaluated) and is quoted. A plain
	 * number (-1.50) is no formula and stays as it is.
	 */
	int formula = len && strchr("=+-@\t\r", field[0]) && !plain_number(field);
	int rc;

	if (!formula && strpbrk(field, ",\"\r\n") == NULL &&
	    !(len && (field[0] == ' ' || field[len - 1] == ' ')))
		return isc_buf_puts(out, field);
	if ((rc = isc_buf_putc(out, '"')) || (formula && (rc = isc_buf_putc(out, '\''))))
		return rc;
	for (const char *p = field; *p; p++)
		if ((rc = isc_buf_putc(out, *p)) || (*p == '"' && (rc = isc_buf_putc(out, '"'))))
			return rc;
	return isc_buf_putc(out, '"');
}

static int has_id(enum isc_spend_by by)
{
	return by == ISC_SPEND_BY_PROJECT || by == ISC_SPEND_BY_EXPERIMENT;
}

static int csv_row(struct isc_buf *out, enum isc_spend_by by, const char *key, const char *id,
                   int64_t micros)
{
	char amount[40];
	int rc = isc_csv_field(out, key);
	if (!rc && has_id(by) && !(rc = isc_buf_putc(out, ',')))
		rc = isc_csv_field(out, id ? id : "");
	if (!rc)
		rc = isc_buf_printf(out, ",%s,%lld\r\n",
		                    isc_money_format(micros, 6, amount, sizeof(amount)),
		                    (long long)micros);
	return rc;
}

static int render_csv(const struct isc_spend_row *rows, size_t n, enum isc_spend_by by,
                      int64_t total, struct isc_buf *out)
{
	const char *name = isc_spend_by_name(by);
	int rc = has_id(by) ? isc_buf_printf(out, "%s,%s_id,amount,amount_micros\r\n", name, name)
	                    : isc_buf_printf(out, "%s,amount,amount_micros\r\n", name);
	for (size_t i = 0; !rc && i < n; i++)
		rc = csv_row(out, by, rows[i].key, rows[i].id, rows[i].amount_micros);
	if (!rc)
		rc = csv_row(out, by, "TOTAL", "", total);
	return rc;
}

static int render_json(const struct isc_spend_row *rows, size_t n, enum isc_spend_by by,
                       int64_t total, struct isc_buf *out)
{
	json_t *root = json_object(), *arr = json_array();
	char amount[40], *text;
	int rc;

	if (!root || !arr)
		goto oom;
	json_object_set_new(root, "by", json_string(isc_spend_by_name(by)));
	for (size_t i = 0; i < n; i++) {
		json_t *o = json_object();
		if (!o)
			goto oom;
		json_object_set_new(o, "key", json_string(rows[i].key));
		if (has_id(by))
			json_object_set_new(o, "id",
			                    rows[i].id ? json_string(rows[i].id) : json_null());
		json_object_set_new(o, "amount_micros", json_integer(rows[i].amount_micros));
		json_object_set_new(o, "amount",
		                    json_string(isc_money_format(rows[i].amount_micros, 6, amount,
		                                                 sizeof(amount))));
		json_array_append_new(arr, o);
	}
	json_object_set_new(root, "rows", arr);
	arr = NULL;
	json_object_set_new(root, "total_micros", json_integer(total));
	json_object_set_new(root, "total",
	                    json_string(isc_money_format(total, 6, amount, sizeof(amount))));
	text = json_dumps(root, JSON_INDENT(2));
	json_decref(root);
	if (!text)
		return ISC_ENOMEM;
	rc = isc_buf_puts(out, text);
	if (!rc)
		rc = isc_buf_putc(out, '\n');
	free(text);
	return rc;
oom:
	json_decref(root);
	json_decref(arr);
	return ISC_ENOMEM;
}

/*
 * The report as text (format=table, for curl): drawn by the one table module of
 * isc (cli/lib/table.c), as isc spend draws it from the JSON, so cells are padded
 * by display width (a 日本語 experiment name does not shift its row).
 */
static int render_table(const struct isc_spend_row *rows, size_t n, enum isc_spend_by by,
                        int64_t total, struct isc_buf *out)
{
	const int with_id = has_id(by);
	const size_t ncols = with_id ? 3 : 2, amount_col = ncols - 1;
	const char *headers[3], *cells[3];
	char amount[ISC_MONEY_TEXT_MAX], head[16], *text = NULL;
	struct isc_table *t;
	size_t len = 0;
	FILE *f;
	int rc = 0;

	snprintf(head, sizeof(head), "%s",
	         by == ISC_SPEND_BY_DAY ? "day (utc)" : isc_spend_by_name(by));
	for (char *p = head; *p; p++)
		if (*p >= 'a' && *p <= 'z')
			*p = (char)(*p - 'a' + 'A');
	/* Projects and experiments by id and name: names need not be unique. */
	headers[0] = with_id ? "ID" : head;
	headers[1] = with_id ? head : "AMOUNT (USD)";
	headers[2] = "AMOUNT (USD)";
	if (!(t = isc_table_new(ncols, headers)))
		return ISC_ENOMEM;
	isc_table_align_right(t, amount_col);
	for (size_t i = 0; !rc && i <= n; i++) {
		int last = i == n; /* the total */
		cells[0] = last ? "TOTAL" : with_id ? rows[i].id : rows[i].key;
		if (with_id)
			cells[1] = last ? "" : rows[i].key;
		cells[amount_col] =
		    isc_money_decimal(last ? total : rows[i].amount_micros, amount, sizeof(amount));
		rc = isc_table_add(t, cells) ? ISC_ENOMEM : 0;
	}
	if (!rc && !(f = open_memstream(&text, &len)))
		rc = ISC_ENOMEM;
	if (!rc) {
		isc_table_print(t, f);
		rc = fclose(f) ? ISC_ENOMEM : isc_buf_append(out, text, len);
	}
	free(text);
	isc_table_free(t);
	return rc;
}

int isc_spend_render(const struct isc_spend_row *rows, size_t n, enum isc_spend_by by,
                     enum isc_spend_format format, struct isc_buf *out, struct isc_err *err)
{
	int64_t total = 0;
	int rc = isc_spend_total(rows, n, &total, err);

	if (rc)
		return rc;
	if ((unsigned)by >= sizeof(by_names) / sizeof(by_names[0]))
		return isc_err_set(err, ISC_EINVALID, "unknown spend grouping");
	switch (format) {
	case ISC_SPEND_CSV:
		rc = render_csv(rows, n, by, total, out);
		break;
	case ISC_SPEND_JSON:
		rc = render_json(rows, n, by, total, out);
		break;
	case ISC_SPEND_TABLE:
		rc = render_table(rows, n, by, total, out);
		break;
	default:
		return isc_err_set(err, ISC_EINVALID, "unknown spend format");
	}
	return rc ? isc_err_set(err, rc, "rendering the spend report: out of memory or too large")
	          : 0;
}
