#include "common/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

static int64_t system_now_ms(void *ctx)
{
	struct timespec ts;
	(void)ctx;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t isc_wall_ms(void)
{
	return system_now_ms(NULL);
}

static void system_sleep_ms(void *ctx, int64_t ms)
{
	struct timespec ts;
	(void)ctx;
	if (ms <= 0)
		return;
	ts.tv_sec = ms / 1000;
	ts.tv_nsec = (ms % 1000) * 1000000;
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static uint64_t system_random_u64(void *ctx)
{
	static _Thread_local uint64_t state;
	(void)ctx;
	if (state == 0) {
		int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			if (read(fd, &state, sizeof(state)) != (ssize_t)sizeof(state))
				state = 0;
			close(fd);
		}
		if (state == 0)
			state = (uint64_t)system_now_ms(NULL) ^ ((uint64_t)getpid() << 32) ^
			        0x9e3779b97f4a7c15ULL;
	}
	state ^= state << 13;
	state ^= state >> 7;
	state ^= state << 17;
	return state;
}

static const struct isc_clock system_clock = {
    .now_ms = system_now_ms,
    .sleep_ms = system_sleep_ms,
    .random_u64 = system_random_u64,
    .ctx = NULL,
};

const struct isc_clock *isc_clock_system(void)
{
	return &system_clock;
}

int64_t isc_monotonic_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t isc_monotonic_ms(void)
{
	return isc_monotonic_us() / 1000;
}

struct timespec isc_monotonic_deadline(int64_t ms)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	t.tv_sec += ms / 1000;
	t.tv_nsec += (ms % 1000) * 1000000L;
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	return t;
}
