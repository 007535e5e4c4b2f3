/*
 * Crash points for tests (see crashpoint.h). The variables are parsed once; the
 * pass counters are shared by every thread, so "the Nth pass" counts passes of
 * all experiments' workers together.
 */
#include "common/crashpoint.h"

#ifdef ISC_TEST_HOOKS
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One armed point: its name, the pass it fires at, the passes seen. */
struct armed {
	char name[96];
	long at;
	long passes;
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct armed crash_at, pause_at;
static char pause_file[512];

static void parse_one(const char *var, struct armed *a)
{
	const char *v = getenv(var);
	const char *colon;
	size_t len;

	a->at = 1;
	if (!v || !v[0])
		return;
	colon = strchr(v, ':');
	len = colon ? (size_t)(colon - v) : strlen(v);
	if (len >= sizeof(a->name))
		return;
	memcpy(a->name, v, len);
	a->name[len] = '\0';
	if (colon) {
		char *end;
		long n = strtol(colon + 1, &end, 10);
		a->at = (*end || n < 1) ? 1 : n;
	}
}

static void parse(void)
{
	const char *f = getenv("ISC_PAUSE_FILE");

	parse_one("ISC_CRASH_AT", &crash_at);
	parse_one("ISC_PAUSE_AT", &pause_at);
	/* A pause needs the file that ends it: without one it would be a plain sleep. */
	if (!f || !f[0] || strlen(f) >= sizeof(pause_file))
		pause_at.name[0] = '\0';
	else
		snprintf(pause_file, sizeof(pause_file), "%s", f);
}

/* 1 when this pass of name is the armed one (counted under the lock). */
static int hit(struct armed *a, const char *name, long *pass)
{
	int fire;

	if (!a->name[0] || strcmp(name, a->name) != 0)
		return 0;
	pthread_mutex_lock(&lock);
	*pass = ++a->passes;
	fire = *pass == a->at;
	pthread_mutex_unlock(&lock);
	return fire;
}

/* One write, no stdio buffering: these lines are what the tests look for. */
static void say(const char *what, const char *name, long pass)
{
	char line[200];
	int len =
	    snprintf(line, sizeof(line), "%s point %s reached (pass %ld)%s\n", what, name, pass,
	             what[0] == 'c' ? ": aborting" : ": waiting for the pause file to go");
	if (len > 0)
		(void)!write(STDERR_FILENO, line, (size_t)len);
}

void isc_crash_point(const char *name)
{
	long pass = 0;

	pthread_once(&once, parse);
	if (hit(&pause_at, name, &pass)) {
		say("pause", name, pass);
		/* At most 120 s: a test that died must not leave iscd held forever. */
		for (int i = 0; i < 2400 && access(pause_file, F_OK) == 0; i++)
			usleep(50 * 1000);
	}
	if (hit(&crash_at, name, &pass)) {
		say("crash", name, pass);
		abort();
	}
}
#else
/* ISO C forbids an empty translation unit. */
typedef int isc_crashpoint_unused;
#endif
