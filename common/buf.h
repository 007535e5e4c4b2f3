/*
 * A growable byte buffer, always NUL-terminated so text can be used as a C string.
 * Sizes are checked for overflow; an optional cap bounds what untrusted input
 * (a cloud reply, a launch file) may make us allocate.
 */
#ifndef ISC_COMMON_BUF_H
#define ISC_COMMON_BUF_H

#include <stdarg.h>
#include <stddef.h>

struct isc_buf {
	char *data; /* owned; NULL until the first append */
	size_t len; /* bytes used, not counting the terminating NUL */
	size_t cap; /* bytes allocated */
	size_t max; /* 0 = unbounded; otherwise appends past max fail */
};

void isc_buf_init(struct isc_buf *b, size_t max);
void isc_buf_cleanup(struct isc_buf *b);
void isc_buf_reset(struct isc_buf *b);
/* These return 0, ISC_ENOMEM, or ISC_EINVALID when max would be exceeded. */
int isc_buf_append(struct isc_buf *b, const void *data, size_t len);
int isc_buf_puts(struct isc_buf *b, const char *s);
int isc_buf_putc(struct isc_buf *b, char c);
int isc_buf_printf(struct isc_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int isc_buf_vprintf(struct isc_buf *b, const char *fmt, va_list ap);
/* Hands the data to the caller (free() it); the buffer is empty afterwards. */
char *isc_buf_detach(struct isc_buf *b);
/* A C string even when empty (never NULL); borrowed. */
const char *isc_buf_cstr(const struct isc_buf *b);

#endif
