/*
 * Crash points for tests (see crashpoint.h). The variable is parsed once; the
 * pass counter is shared by every thread, so "the Nth pass" counts passes of
 * all experiments' workers together.
 */
#include "common/crashpoint.h"

#ifdef ISC_TEST_HOOKS
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char target[96];
static long target_pass = 1;
static long passes;

static void parse(void)
{
	const char *v = getenv("ISC_CRASH_AT");
	const char *colon;
	size_t len;

	if (!v || !v[0])
		return;
	colon = strchr(v, ':');
	len = colon ? (size_t)(colon - v) : strlen(v);
	if (len >= sizeof(target))
		return;
	memcpy(target, v, len);
	target[len] = '\0';
	if (colon) {
		char *end;
		long n = strtol(colon + 1, &end, 10);
		target_pass = (*end || n < 1) ? 1 : n;
	}
}

void isc_crash_point(const char *name)
{
	int hit = 0;
	long pass = 0;

	pthread_once(&once, parse);
	if (!target[0] || strcmp(name, target) != 0)
		return;
	pthread_mutex_lock(&lock);
	pass = ++passes;
	hit = pass == target_pass;
	pthread_mutex_unlock(&lock);
	if (!hit)
		return;
	/* One write, no stdio buffering: this line is what the test looks for. */
	char line[160];
	int len = snprintf(line, sizeof(line), "crash point %s reached (pass %ld): aborting\n",
	                   name, pass);
	if (len > 0)
		(void)!write(STDERR_FILENO, line, (size_t)len);
	abort();
}
#else
/* ISO C forbids an empty translation unit. */
typedef int isc_crashpoint_unused;
#endif
