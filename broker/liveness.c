/* Is an iscd running for this store (liveness.h). */
#include "broker/liveness.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

int isc_daemon_running(const char *home, long *pid_out)
{
	char path[4096], comm[64];
	long pid = 0;
	FILE *f;
	int alive;

	if (snprintf(path, sizeof(path), "%s/iscd.lock", home) >= (int)sizeof(path) ||
	    !(f = fopen(path, "r")))
		return 0; /* no daemon ever ran here */
	if (fscanf(f, "%ld", &pid) != 1)
		pid = 0;
	fclose(f);
	if (pid <= 0)
		return 0;
	/* A pid left by an iscd that was killed may now be another program's. */
	alive = kill((pid_t)pid, 0) == 0 || errno == EPERM;
	snprintf(path, sizeof(path), "/proc/%ld/comm", pid);
	if (!alive || !(f = fopen(path, "r")))
		return 0;
	alive = fgets(comm, sizeof(comm), f) && strncmp(comm, "iscd", 4) == 0 &&
	        (comm[4] == '\n' || comm[4] == '\0');
	fclose(f);
	if (alive && pid_out)
		*pid_out = pid;
	return alive;
}

int isc_daemon_wait_running(const char *home, long wait_ms, long *pid)
{
	struct timespec step = {0, 100 * 1000000L};
	for (long waited = 0;; waited += 100) {
		if (isc_daemon_running(home, pid))
			return 1;
		if (waited >= wait_ms)
			return 0;
		nanosleep(&step, NULL);
	}
}
