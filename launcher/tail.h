/*
 * The last bytes of what a node prints, in fixed memory. A node is not
 * trusted: a command that should print one line (`docker wait`, a boot
 * script's error) may print without end, so every output the launcher keeps
 * for a message or an exit code is read through one of these (issue 29).
 */
#ifndef ISC_LAUNCHER_TAIL_H
#define ISC_LAUNCHER_TAIL_H

#include <stddef.h>
#include <stdint.h>

/* How much of a node's output is kept: the last 4 KiB. */
#define ISC_TAIL_MAX 4096

struct isc_tail {
	char data[ISC_TAIL_MAX + 1]; /* the last len bytes, NUL-terminated */
	size_t len;
	uint64_t total; /* bytes seen, kept or not */
};

void isc_tail_init(struct isc_tail *t);
/* Appends, keeping only the last ISC_TAIL_MAX bytes. */
void isc_tail_add(struct isc_tail *t, const char *data, size_t len);
/* The kept bytes as a string (borrowed; a NUL inside cuts it short). */
const char *isc_tail_cstr(const struct isc_tail *t);
/* Drops trailing newlines and carriage returns. */
void isc_tail_trim(struct isc_tail *t);
/*
 * The last line of the kept bytes as an integer (docker wait's exit code);
 * -1 when that line is no plain decimal number.
 */
int isc_tail_last_int(const struct isc_tail *t);

/* isc_ssh_output_fn callbacks: ctx is a struct isc_tail; one keeps stdout, one stderr. */
void isc_tail_keep_stdout(void *ctx, const char *data, size_t len, int stderr_stream);
void isc_tail_keep_stderr(void *ctx, const char *data, size_t len, int stderr_stream);

#endif
