#include "common/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *program = "isc";
static enum isc_log_level min_level = ISC_LOG_INFO;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

/*
 * Under systemd, stderr is a stream to journald, which takes a "<N>" at the
 * start of a line as its syslog priority (sd-daemon(3)): "<3>" error, "<4>"
 * warning, "<6>" info, "<7>" debug, so `journalctl -p warning` finds the
 * warnings. systemd sets JOURNAL_STREAM to the stream's "DEVICE:INODE"; only
 * when stderr is that very stream (not redirected to a file by a script that
 * inherited the variable) do lines get the prefix. Decided once, at the first line.
 */
static int journal_stderr(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (!js || sscanf(js, "%llu:%llu", &dev, &ino) != 2 || fstat(STDERR_FILENO, &st) != 0)
		return 0;
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

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
	static const char *const priorities[] = {"<7>", "<6>", "<4>", "<3>"};
	static int journal = -1;
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
	if (journal < 0)
		journal = journal_stderr();
	if (journal)
		fputs(priorities[level], stderr);
	fprintf(stderr, "%s.%03ldZ %s %s: ", stamp, ts.tv_nsec / 1000000, program, names[level]);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
	pthread_mutex_unlock(&log_lock);
}
