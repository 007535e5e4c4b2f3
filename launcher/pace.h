/*
 * The pace of a node transfer (issue 42): a total deadline and a minimum
 * throughput, so a node that trickles its archive (one byte every few seconds
 * never trips an idle limit) cannot hold a broker worker for long. Pure logic
 * on a caller's clock, so it is tested without a network (tests/unit/test_pace.c);
 * launcher/ssh.c applies it to every artifact and dataset stream.
 *
 * The throughput is judged per window: every window_ms from the start, the
 * bytes moved in that window must reach min_bytes_per_s * window_ms / 1000.
 * A trickle is stopped at the end of its first window; a transfer that stays
 * above the floor ends by the deadline at the latest.
 */
#ifndef ISC_LAUNCHER_PACE_H
#define ISC_LAUNCHER_PACE_H

#include <stddef.h>
#include <stdint.h>

/* The built-in limits (and config.toml's defaults, docs/config.md). */
#define ISC_PACE_DEFAULT_DEADLINE_MS INT64_C(7200000) /* transfer_deadline_ms: 2 h */
#define ISC_PACE_DEFAULT_MIN_BPS     UINT64_C(65536)  /* transfer_min_bytes_per_s: 64 KiB/s */
#define ISC_PACE_DEFAULT_WINDOW_MS   INT64_C(60000)   /* transfer_window_ms: 1 min */

struct isc_pace_limits {
	int64_t deadline_ms;      /* the whole transfer; 0: the default */
	uint64_t min_bytes_per_s; /* the floor; 0: the default */
	int64_t window_ms;        /* over which the floor is judged; 0: the default */
};

enum isc_pace_verdict {
	ISC_PACE_OK = 0,
	ISC_PACE_DEADLINE, /* ran past deadline_ms */
	ISC_PACE_SLOW,     /* a window moved fewer bytes than the floor asks */
};

struct isc_pace {
	struct isc_pace_limits lim; /* with the defaults filled in */
	int64_t start_ms;
	int64_t window_start_ms;
	uint64_t bytes;             /* since the start */
	uint64_t window_bytes;      /* since window_start_ms */
	uint64_t last_window_bytes; /* of the window that failed (for the message) */
};

/* The limits with 0s replaced by the defaults. */
struct isc_pace_limits isc_pace_limits_or_default(const struct isc_pace_limits *lim);
void isc_pace_start(struct isc_pace *p, const struct isc_pace_limits *lim, int64_t now_ms);
void isc_pace_add(struct isc_pace *p, uint64_t bytes);
/* ISC_PACE_OK while the transfer keeps within its limits at now_ms. */
enum isc_pace_verdict isc_pace_check(struct isc_pace *p, int64_t now_ms);
/*
 * Which limit broke and by how much, for an error message: "ran for 7200 s,
 * over transfer_deadline_ms (7200000)" or "moved 12 bytes in 60 s, under
 * transfer_min_bytes_per_s (65536) over transfer_window_ms (60000)".
 */
void isc_pace_explain(const struct isc_pace *p, enum isc_pace_verdict v, int64_t now_ms, char *out,
                      size_t cap);

#endif
