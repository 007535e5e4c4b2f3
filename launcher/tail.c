/* The last bytes of a node's output in fixed memory (see tail.h). */
#include "launcher/tail.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

void isc_tail_init(struct isc_tail *t)
{
	t->len = 0;
	t->total = 0;
	t->data[0] = '\0';
}

void isc_tail_add(struct isc_tail *t, const char *data, size_t len)
{
	t->total += len;
	if (len >= ISC_TAIL_MAX) {
		memcpy(t->data, data + len - ISC_TAIL_MAX, ISC_TAIL_MAX);
		t->len = ISC_TAIL_MAX;
	} else {
		if (t->len + len > ISC_TAIL_MAX) {
			size_t drop = t->len + len - ISC_TAIL_MAX;
			memmove(t->data, t->data + drop, t->len - drop);
			t->len -= drop;
		}
		memcpy(t->data + t->len, data, len);
		t->len += len;
	}
	t->data[t->len] = '\0';
}

const char *isc_tail_cstr(const struct isc_tail *t)
{
	return t->data;
}

void isc_tail_trim(struct isc_tail *t)
{
	while (t->len && (t->data[t->len - 1] == '\n' || t->data[t->len - 1] == '\r'))
		t->data[--t->len] = '\0';
}

int isc_tail_last_int(const struct isc_tail *t)
{
	size_t end = t->len, start;
	char line[16], *stop;
	long v;

	while (end && (t->data[end - 1] == '\n' || t->data[end - 1] == '\r'))
		end--;
	start = end;
	while (start && t->data[start - 1] != '\n')
		start--;
	if (end == start || end - start >= sizeof(line))
		return -1;
	memcpy(line, t->data + start, end - start);
	line[end - start] = '\0';
	if (strspn(line, "-0123456789") != end - start)
		return -1;
	errno = 0;
	v = strtol(line, &stop, 10);
	if (errno || *stop || v < INT_MIN || v > INT_MAX)
		return -1;
	return (int)v;
}

void isc_tail_keep_stdout(void *ctx, const char *data, size_t len, int stderr_stream)
{
	if (!stderr_stream)
		isc_tail_add(ctx, data, len);
}

void isc_tail_keep_stderr(void *ctx, const char *data, size_t len, int stderr_stream)
{
	if (stderr_stream)
		isc_tail_add(ctx, data, len);
}
