/*
 * iscd's messages to its service manager (systemd's notify protocol,
 * sd_notify(3)): READY=1 once the API answers, WATCHDOG=1 while the tick loop
 * runs, STOPPING=1 on the way out, STATUS= lines for `systemctl status`.
 * Outside systemd (no NOTIFY_SOCKET) every call does nothing.
 *
 * With libsystemd at build time (the Makefile finds it with pkg-config) the
 * messages go through sd_notify(); without it, through the few lines of the
 * datagram protocol in notify.c (one AF_UNIX datagram to $NOTIFY_SOCKET, "@"
 * meaning the abstract namespace), which is all sd_notify does for these.
 */
#ifndef ISC_DAEMON_NOTIFY_H
#define ISC_DAEMON_NOTIFY_H

#include <stdint.h>

/* Sends one message ("READY=1\nSTATUS=..."); a no-op without NOTIFY_SOCKET. */
void isc_notify(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * The watchdog interval systemd asked for (WatchdogSec=, given as WATCHDOG_USEC
 * and, when set, WATCHDOG_PID naming this process), in ms; 0 when there is none.
 */
int64_t isc_notify_watchdog_ms(void);

/* Which implementation this iscd was built with: "libsystemd" or "built-in". */
const char *isc_notify_impl(void);

#endif
