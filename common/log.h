/*
 * One line per event on stderr: "2026-11-22T10:00:00.123Z iscd info: message".
 * Callers never pass secrets; messages built from cloud replies are already
 * scrubbed by the drivers. Under journald (JOURNAL_STREAM names stderr) each
 * line starts with its syslog priority, "<3>" for an error (log.c).
 */
#ifndef ISC_COMMON_LOG_H
#define ISC_COMMON_LOG_H

enum isc_log_level { ISC_LOG_DEBUG, ISC_LOG_INFO, ISC_LOG_WARN, ISC_LOG_ERROR };

void isc_log_set_program(const char *name);
void isc_log_set_level(enum isc_log_level level);
void isc_log(enum isc_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
