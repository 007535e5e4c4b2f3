/* JSON text written straight into a buffer (api/json_out.h says why). */
#include "api/json_out.h"

#include "common/err.h"
#include "credits/money.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The length of the valid UTF-8 sequence at s (at most n bytes), or 0 when it is not one. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t len;
	unsigned cp;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4, cp = s[0] & 0x07;
	else
		return 0;
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	/* Overlong forms, surrogates and code points past U+10FFFF are not UTF-8. */
	if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

/*
 * 1 for a byte a string holds as it is: ASCII from the space on but '"' and
 * '\\'. The others (controls, quotes, the bytes of multi-byte UTF-8) take the
 * slow path. A listing is mostly ids and names: most strings are one plain run.
 */
static int plain(unsigned char ch)
{
	return ch >= 0x20 && ch < 0x80 && ch != '"' && ch != '\\';
}

int isc_json_out_string(struct isc_buf *b, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	size_t run = 0, i = 0;
	int rc = isc_buf_putc(b, '"');

	/* Plain bytes are copied in runs; each escape flushes the run before it. */
	while (!rc) {
		const char *esc = NULL;
		char u[8];
		size_t len = 1;
		unsigned char ch;

		while (plain(p[i]))
			i++, run++;
		if (!(ch = p[i]))
			break;
		if (ch == '"')
			esc = "\\\"";
		else if (ch == '\\')
			esc = "\\\\";
		else if (ch == '\n')
			esc = "\\n";
		else if (ch == '\r')
			esc = "\\r";
		else if (ch == '\t')
			esc = "\\t";
		else if (ch == '\b')
			esc = "\\b";
		else if (ch == '\f')
			esc = "\\f";
		else if (ch < 0x20)
			snprintf(u, sizeof(u), "\\u%04X", ch), esc = u;
		else if (!(len = utf8_len(p + i, strnlen((const char *)p + i, 4))))
			esc = "\\ufffd", len = 1;
		if (!esc) {
			run += len;
			i += len;
			continue;
		}
		rc = isc_buf_append(b, p + i - run, run);
		if (!rc)
			rc = isc_buf_puts(b, esc);
		run = 0;
		i += len;
	}
	if (!rc)
		rc = isc_buf_append(b, p + i - run, run);
	return rc ? rc : isc_buf_putc(b, '"');
}

/* The length of s's first run of plain bytes (all of s when it needs no escape). */
static size_t plain_run(const char *s)
{
	size_t n = 0;
	while (plain((unsigned char)s[n]))
		n++;
	return n;
}

/*
 * ,"key": (no comma when first) into lit, when the key is plain and fits in size
 * with room for two more bytes: its length, else 0. A key is a name in the code.
 */
static size_t key_lit(char *lit, size_t size, const char *key, int first)
{
	size_t n = strlen(key), at = 0;

	if (n + 6 > size || plain_run(key) != n)
		return 0;
	if (!first)
		lit[at++] = ',';
	lit[at++] = '"';
	memcpy(lit + at, key, n);
	at += n;
	lit[at++] = '"';
	lit[at++] = ':';
	return at;
}

int isc_json_out_key(struct isc_buf *b, const char *key, int *first)
{
	char lit[64];
	size_t at = key_lit(lit, sizeof(lit), key, *first);
	int rc;

	if (at) {
		*first = 0;
		return isc_buf_append(b, lit, at);
	}
	rc = *first ? 0 : isc_buf_putc(b, ',');
	*first = 0;
	if (!rc)
		rc = isc_json_out_string(b, key);
	return rc ? rc : isc_buf_putc(b, ':');
}

int isc_json_out_str_member(struct isc_buf *b, const char *key, const char *value, int *first)
{
	const char *v = value ? value : "";
	char lit[256];
	size_t at = key_lit(lit, sizeof(lit), key, *first), n;
	int rc;

	/* The common member, a plain key and a short plain value, is one append. */
	if (at && (n = strlen(v)) + at + 2 <= sizeof(lit) && plain_run(v) == n) {
		lit[at++] = '"';
		memcpy(lit + at, v, n);
		at += n;
		lit[at++] = '"';
		*first = 0;
		return isc_buf_append(b, lit, at);
	}
	rc = isc_json_out_key(b, key, first);
	return rc ? rc : isc_json_out_string(b, value);
}

int isc_json_out_int_member(struct isc_buf *b, const char *key, int64_t value, int *first)
{
	/* Digits written from the end (snprintf was a tenth of a page's CPU). */
	char num[24], *at = num + sizeof(num), lit[64 + sizeof(num)];
	uint64_t mag = value < 0 ? (uint64_t)0 - (uint64_t)value : (uint64_t)value;
	size_t k = key_lit(lit, sizeof(lit) - sizeof(num), key, *first), len;
	int rc;

	do
		*--at = (char)('0' + mag % 10);
	while ((mag /= 10));
	if (value < 0)
		*--at = '-';
	len = (size_t)(num + sizeof(num) - at);
	if (k) {
		/* Key and number in one append. */
		memcpy(lit + k, at, len);
		*first = 0;
		return isc_buf_append(b, lit, k + len);
	}
	rc = isc_json_out_key(b, key, first);
	return rc ? rc : isc_buf_append(b, at, len);
}

json_t *isc_json_money_or_null(json_t *o, const char *name, int has, int64_t micros)
{
	char key[64], text[ISC_MONEY_TEXT_MAX];

	snprintf(key, sizeof(key), "%s_micros", name);
	json_object_set_new(o, key, has ? json_integer(micros) : json_null());
	json_object_set_new(o, name,
	                    has ? json_string(isc_money_decimal(micros, text, sizeof(text)))
	                        : json_null());
	return o;
}

json_t *isc_json_money(json_t *o, const char *name, int64_t micros)
{
	return isc_json_money_or_null(o, name, 1, micros);
}

int isc_json_out_bool_member(struct isc_buf *b, const char *key, int value, int *first)
{
	int rc = isc_json_out_key(b, key, first);
	return rc ? rc : isc_buf_puts(b, value ? "true" : "false");
}

int isc_json_out_null_member(struct isc_buf *b, const char *key, int *first)
{
	int rc = isc_json_out_key(b, key, first);
	return rc ? rc : isc_buf_puts(b, "null");
}

int isc_json_out_real_member(struct isc_buf *b, const char *key, double value, int *first)
{
	char num[40], *e;
	int len;

	if (!isfinite(value))
		return isc_json_out_null_member(b, key, first);
	len = snprintf(num, sizeof(num), "%.17g", value);
	if (len < 0 || (size_t)len + 3 > sizeof(num))
		return ISC_ENOMEM;
	/* A real keeps a '.' or an exponent, or a reader takes it for an integer. */
	if (!strchr(num, '.') && !strchr(num, 'e')) {
		memcpy(num + len, ".0", 3);
		len += 2;
	}
	/* "1e+20" and "1e-05" as jansson writes them: "1e20", "1e-5". */
	if ((e = strchr(num, 'e'))) {
		char *from = e + 1, *to = e + 1;
		if (*from == '+')
			from++;
		else if (*from == '-')
			from++, to++;
		while (*from == '0' && from[1])
			from++;
		memmove(to, from, strlen(from) + 1);
		len = (int)strlen(num);
	}
	{
		int rc = isc_json_out_key(b, key, first);
		return rc ? rc : isc_buf_append(b, num, (size_t)len);
	}
}

int isc_json_out_money_member(struct isc_buf *b, const char *name, int has, int64_t micros,
                              int *first)
{
	char key[64], text[ISC_MONEY_TEXT_MAX];
	int rc;

	snprintf(key, sizeof(key), "%s_micros", name);
	if (!has) {
		rc = isc_json_out_null_member(b, key, first);
		return rc ? rc : isc_json_out_null_member(b, name, first);
	}
	rc = isc_json_out_int_member(b, key, micros, first);
	return rc ? rc
	          : isc_json_out_str_member(b, name, isc_money_decimal(micros, text, sizeof(text)),
	                                    first);
}
