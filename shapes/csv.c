/*
 * CSV reading for the catalog importers. Catalog files come from third
 * parties (SkyPilot, ec2instances.info) and from admins, so the reader is
 * strict about structure (an open quote is an error) but tolerant about line
 * ends: OCI's file is CRLF while the others are LF.
 */
#include "shapes/csv.h"

#include "common/err.h"

#include <stdlib.h>
#include <string.h>

void isc_csv_init(struct isc_csv *c, const char *data, size_t len)
{
	memset(c, 0, sizeof(*c));
	c->data = data;
	c->len = len;
	c->line = 1;
	isc_buf_init(&c->text, 0);
	if (len >= 3 && memcmp(data, "\xEF\xBB\xBF", 3) == 0)
		c->pos = 3;
}

void isc_csv_cleanup(struct isc_csv *c)
{
	free(c->fields);
	free(c->offs);
	isc_buf_cleanup(&c->text);
	memset(c, 0, sizeof(*c));
}

static int start_field(struct isc_csv *c)
{
	if (c->n == c->cap) {
		size_t ncap = c->cap ? c->cap * 2 : 16;
		size_t *no = realloc(c->offs, ncap * sizeof(*no));
		if (!no)
			return ISC_ENOMEM;
		c->offs = no;
		char **nf = realloc(c->fields, ncap * sizeof(*nf));
		if (!nf)
			return ISC_ENOMEM;
		c->fields = nf;
		c->cap = ncap;
	}
	c->offs[c->n++] = c->text.len;
	return 0;
}

int isc_csv_next(struct isc_csv *c)
{
	int rc, in_quotes = 0, at_start = 1;

	if (c->pos >= c->len)
		return 0;
	isc_buf_reset(&c->text);
	c->n = 0;
	c->rec_line = c->line;
	if ((rc = start_field(c)))
		return rc;
	while (c->pos < c->len) {
		char ch = c->data[c->pos];
		if (in_quotes) {
			if (ch == '"') {
				if (c->pos + 1 < c->len && c->data[c->pos + 1] == '"') {
					rc = isc_buf_putc(&c->text, '"');
					c->pos += 2;
				} else {
					in_quotes = 0;
					c->pos++;
				}
			} else {
				if (ch == '\n')
					c->line++;
				rc = isc_buf_putc(&c->text, ch);
				c->pos++;
			}
			if (rc)
				return rc;
			continue;
		}
		if (ch == '"' && at_start) {
			in_quotes = 1;
			at_start = 0;
			c->pos++;
			continue;
		}
		if (ch == ',') {
			c->pos++;
			if ((rc = isc_buf_putc(&c->text, '\0')) || (rc = start_field(c)))
				return rc;
			at_start = 1;
			continue;
		}
		if (ch == '\n' ||
		    (ch == '\r' && c->pos + 1 < c->len && c->data[c->pos + 1] == '\n')) {
			c->pos += ch == '\r' ? 2 : 1;
			c->line++;
			break;
		}
		at_start = 0;
		if ((rc = isc_buf_putc(&c->text, ch)))
			return rc;
		c->pos++;
	}
	if (in_quotes)
		return ISC_EINVALID;
	if ((rc = isc_buf_putc(&c->text, '\0')))
		return rc;
	for (size_t i = 0; i < c->n; i++)
		c->fields[i] = c->text.data + c->offs[i];
	return 1;
}

int isc_csv_blank(const struct isc_csv *c)
{
	return c->n == 1 && c->fields[0][0] == '\0';
}
