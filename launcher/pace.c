/* The pace of a node transfer (see pace.h). */
#include "launcher/pace.h"

#include <stdio.h>

struct isc_pace_limits isc_pace_limits_or_default(const struct isc_pace_limits *lim)
{
	struct isc_pace_limits l = {0, 0, 0};
	if (lim)
		l = *lim;
	if (l.deadline_ms <= 0)
		l.deadline_ms = ISC_PACE_DEFAULT_DEADLINE_MS;
	if (l.min_bytes_per_s == 0)
		l.min_bytes_per_s = ISC_PACE_DEFAULT_MIN_BPS;
	if (l.window_ms <= 0)
		l.window_ms = ISC_PACE_DEFAULT_WINDOW_MS;
	return l;
}

void isc_pace_start(struct isc_pace *p, const struct isc_pace_limits *lim, int64_t now_ms)
{
	p->lim = isc_pace_limits_or_default(lim);
	p->start_ms = p->window_start_ms = now_ms;
	p->bytes = p->window_bytes = p->last_window_bytes = 0;
}

void isc_pace_add(struct isc_pace *p, uint64_t bytes)
{
	p->bytes += bytes;
	p->window_bytes += bytes;
}

/* The bytes a whole window must move: the floor times its length, without overflow. */
static uint64_t window_floor(const struct isc_pace_limits *l)
{
	uint64_t ms = (uint64_t)l->window_ms;
	if (l->min_bytes_per_s > UINT64_MAX / ms)
		return UINT64_MAX;
	return l->min_bytes_per_s * ms / 1000;
}

enum isc_pace_verdict isc_pace_check(struct isc_pace *p, int64_t now_ms)
{
	if (now_ms - p->start_ms > p->lim.deadline_ms)
		return ISC_PACE_DEADLINE;
	/*
	 * A window ends; a caller that looked late (a blocked write) judges each whole
	 * window that passed: the bytes moved are credited to the first, so a late look
	 * never fails a transfer that kept pace, and a silent stretch still fails.
	 */
	while (now_ms - p->window_start_ms >= p->lim.window_ms) {
		if (p->window_bytes < window_floor(&p->lim)) {
			p->last_window_bytes = p->window_bytes;
			return ISC_PACE_SLOW;
		}
		p->window_bytes = 0;
		p->window_start_ms += p->lim.window_ms;
	}
	return ISC_PACE_OK;
}

void isc_pace_explain(const struct isc_pace *p, enum isc_pace_verdict v, int64_t now_ms, char *out,
                      size_t cap)
{
	if (v == ISC_PACE_DEADLINE)
		snprintf(out, cap,
		         "ran for %lld s (%llu bytes moved), over transfer_deadline_ms (%lld)",
		         (long long)((now_ms - p->start_ms) / 1000), (unsigned long long)p->bytes,
		         (long long)p->lim.deadline_ms);
	else if (v == ISC_PACE_SLOW)
		snprintf(out, cap,
		         "moved %llu bytes in %lld ms, under transfer_min_bytes_per_s (%llu) over "
		         "transfer_window_ms (%lld)",
		         (unsigned long long)p->last_window_bytes, (long long)p->lim.window_ms,
		         (unsigned long long)p->lim.min_bytes_per_s, (long long)p->lim.window_ms);
	else
		snprintf(out, cap, "within its limits");
}
