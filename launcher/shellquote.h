/*
 * POSIX shell quoting for values that travel to a remote shell: every value
 * is wrapped in single quotes, and a single quote becomes '\''. Nothing inside
 * (quotes, $(), backticks, newlines, semicolons) is interpreted.
 */
#ifndef ISC_LAUNCHER_SHELLQUOTE_H
#define ISC_LAUNCHER_SHELLQUOTE_H

#include "common/buf.h"

/* Appends s, quoted, to b (the empty string becomes ''). Returns 0 or ISC_ENOMEM. */
int isc_shell_quote(struct isc_buf *b, const char *s);

#endif
