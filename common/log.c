#include "common/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

static const char *program = "isc";
static enum isc_log_level min_level = ISC_LOG_INFO;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

void isc_log_set_program(const char *name)
{
	program = name;
}

void isc_log_set_level(enum isc_log_level level)
{
	min_level = level;
}

void isc_log(enum isc_log_level level, const char *fmt, ...)
{
	static const char *const names[] = {"debug", "info", "warn", "error"};
	struct timespec ts;
	struct tm tm;
	char stamp[32];
	va_list ap;

	if (level < min_level)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	/* One locked write per line, so lines from threads never interleave. */
	pthread_mutex_lock(&log_lock);
	fprintf(stderr, "%s.%03ldZ %s %s: ", stamp, ts.tv_nsec / 1000000, program, names[level]);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
	pthread_mutex_unlock(&log_lock);
}
