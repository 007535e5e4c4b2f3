#include "daemon/notify.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef ISC_HAVE_LIBSYSTEMD
#include <systemd/sd-daemon.h>
#else
#include <sys/socket.h>
#include <sys/un.h>
#endif

#ifdef ISC_HAVE_LIBSYSTEMD
static void send_text(const char *text)
{
	(void)sd_notify(0, text);
}

int64_t isc_notify_watchdog_ms(void)
{
	uint64_t usec = 0;
	/* > 0 only when WATCHDOG_USEC is set and WATCHDOG_PID (if set) is this process. */
	if (sd_watchdog_enabled(0, &usec) <= 0)
		return 0;
	return usec / 1000 ? (int64_t)(usec / 1000) : 1;
}

const char *isc_notify_impl(void)
{
	return "libsystemd";
}
#else
/*
 * The protocol of sd_notify(3) for text messages: one datagram to the socket
 * named by $NOTIFY_SOCKET, a path or, with a leading '@', an abstract name.
 * No file descriptors are passed, so nothing more is needed.
 */
static void send_text(const char *text)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t len;
	socklen_t salen;
	int fd;

	if (!path || (path[0] != '/' && path[0] != '@'))
		return;
	len = strlen(path);
	if (len >= sizeof(sa.sun_path))
		return;
	memcpy(sa.sun_path, path, len);
	if (sa.sun_path[0] == '@')
		sa.sun_path[0] = '\0';
	salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	(void)sendto(fd, text, strlen(text), MSG_NOSIGNAL, (struct sockaddr *)&sa, salen);
	close(fd);
}

int64_t isc_notify_watchdog_ms(void)
{
	const char *us = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
	unsigned long long usec;
	char *end;

	if (!us || !*us)
		return 0;
	if (pid && *pid && strtol(pid, NULL, 10) != (long)getpid())
		return 0;
	errno = 0;
	usec = strtoull(us, &end, 10);
	if (errno || *end || usec == 0)
		return 0;
	return usec / 1000 ? (int64_t)(usec / 1000) : 1;
}

const char *isc_notify_impl(void)
{
	return "built-in";
}
#endif

void isc_notify(const char *fmt, ...)
{
	char text[512];
	va_list ap;

	if (!getenv("NOTIFY_SOCKET"))
		return;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	send_text(text);
}
