/*
 * Time and randomness, injectable so tests can fix the moment a signature is
 * made, script retry delays without sleeping, and make jitter repeatable.
 */
#ifndef ISC_COMMON_CLOCK_H
#define ISC_COMMON_CLOCK_H

#include <stdint.h>
#include <time.h>

struct isc_clock {
	int64_t (*now_ms)(void *ctx); /* wall clock, ms since the epoch */
	void (*sleep_ms)(void *ctx, int64_t ms);
	uint64_t (*random_u64)(void *ctx); /* for jitter; need not be cryptographic */
	void *ctx;
};

/* The real clock (CLOCK_REALTIME, nanosleep, a per-thread xorshift seeded from urandom). Borrowed.
 */
const struct isc_clock *isc_clock_system(void);

/* The system clock's wall time, ms since the epoch (isc_clock_system()'s now_ms). */
int64_t isc_wall_ms(void);

/* Monotonic milliseconds, for deadlines and benchmarks. */
int64_t isc_monotonic_ms(void);
/* Monotonic microseconds, for timing what takes less than a millisecond. */
int64_t isc_monotonic_us(void);
/*
 * The monotonic clock's time ms from now, as pthread_cond_timedwait takes it for a
 * condition whose clock attribute is CLOCK_MONOTONIC.
 */
struct timespec isc_monotonic_deadline(int64_t ms);

#endif
