/*
 * Named crash points: the places where the broker's durable state and a
 * cloud's state can diverge (docs/broker.md lists them). In a build made for
 * tests (-DISC_TEST_HOOKS, which `make check` uses), ISC_CRASH_AT=NAME[:N]
 * makes the process abort() at the Nth pass (default 1) of the point NAME, so
 * a test can kill iscd exactly there and prove the next iscd finishes the job.
 * In a release build the points compile to nothing and the variable is never
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
