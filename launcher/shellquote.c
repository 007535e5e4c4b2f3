#include "launcher/shellquote.h"

#include <string.h>

int isc_shell_quote(struct isc_buf *b, const char *s)
{
	int rc = isc_buf_putc(b, '\'');
	for (const char *p = s; !rc && *p; p++)
		rc = *p == '\'' ? isc_buf_puts(b, "'\\''") : isc_buf_putc(b, *p);
	return rc ? rc : isc_buf_putc(b, '\'');
}
