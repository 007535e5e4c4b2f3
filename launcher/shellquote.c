/*
 * POSIX single-quoting (see shellquote.h). Inside single quotes a POSIX shell
 * interprets nothing at all, so the only character needing care is the quote
 * itself: close the quote, add an escaped quote, reopen ('\'').
 */
#include "launcher/shellquote.h"

int isc_shell_quote(struct isc_buf *b, const char *s)
{
	int rc = isc_buf_putc(b, '\'');
	for (const char *p = s; !rc && *p; p++)
		rc = *p == '\'' ? isc_buf_puts(b, "'\\''") : isc_buf_putc(b, *p);
	return rc ? rc : isc_buf_putc(b, '\'');
}
