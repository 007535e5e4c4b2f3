#include "common/buf.h"

#include "common/err.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void isc_buf_init(struct isc_buf *b, size_t max)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
	b->max = max;
}

void isc_buf_cleanup(struct isc_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

void isc_buf_reset(struct isc_buf *b)
{
	b->len = 0;
	if (b->data)
		b->data[0] = '\0';
}

static int buf_reserve(struct isc_buf *b, size_t extra)
{
	size_t need, cap;
	char *p;

	if (extra > SIZE_MAX - b->len - 1)
		return ISC_ENOMEM;
	need = b->len + extra + 1;
	if (b->max && need - 1 > b->max)
		return ISC_EINVALID;
	if (need <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 64;
	while (cap < need) {
		if (cap > SIZE_MAX / 2) {
			cap = need;
			break;
		}
		cap *= 2;
	}
	p = realloc(b->data, cap);
	if (!p)
		return ISC_ENOMEM;
	b->data = p;
	b->cap = cap;
	return 0;
}

int isc_buf_append(struct isc_buf *b, const void *data, size_t len)
{
	int rc = buf_reserve(b, len);
	if (rc)
		return rc;
	if (len)
		memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = '\0';
	return 0;
}

int isc_buf_puts(struct isc_buf *b, const char *s)
{
	return isc_buf_append(b, s, strlen(s));
}

int isc_buf_putc(struct isc_buf *b, char c)
{
	return isc_buf_append(b, &c, 1);
}

int isc_buf_vprintf(struct isc_buf *b, const char *fmt, va_list ap)
{
	va_list cp;
	int n, rc;

	va_copy(cp, ap);
	n = vsnprintf(NULL, 0, fmt, cp);
	va_end(cp);
	if (n < 0)
		return ISC_EINVALID;
	rc = buf_reserve(b, (size_t)n);
	if (rc)
		return rc;
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
	return 0;
}

int isc_buf_printf(struct isc_buf *b, const char *fmt, ...)
{
	va_list ap;
	int rc;
	va_start(ap, fmt);
	rc = isc_buf_vprintf(b, fmt, ap);
	va_end(ap);
	return rc;
}

char *isc_buf_detach(struct isc_buf *b)
{
	char *p = b->data;
	if (!p)
		p = calloc(1, 1);
	b->data = NULL;
	b->len = b->cap = 0;
	return p;
}

const char *isc_buf_cstr(const struct isc_buf *b)
{
	return b->data ? b->data : "";
}
