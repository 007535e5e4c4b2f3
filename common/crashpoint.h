/*
 * Named crash points: the places where the broker's durable state and a
 * cloud's state can diverge (docs/broker.md lists them). In a build made for
 * tests (-DISC_TEST_HOOKS, which `make check` uses), ISC_CRASH_AT=NAME[:N]
 * makes the process abort() at the Nth pass (default 1) of the point NAME, so
 * a test can kill iscd exactly there and prove the next iscd finishes the job.
 *
 * The same points can also hold the process still, so a test can make the
 * cloud misbehave at exactly that moment (an interleaving a timer could only
 * hope for): with ISC_PAUSE_AT=NAME[:N] and ISC_PAUSE_FILE=PATH, the Nth pass
 * of NAME writes "pause point NAME reached" on stderr and waits while PATH
 * exists (at most 120 s); the test removes PATH to let it go on.
 *
 * In a release build the points compile to nothing and the variables are never
 * read.
 */
#ifndef ISC_COMMON_CRASHPOINT_H
#define ISC_COMMON_CRASHPOINT_H

#ifdef ISC_TEST_HOOKS
void isc_crash_point(const char *name);
#else
static inline void isc_crash_point(const char *name)
{
	(void)name;
}
#endif

#endif
