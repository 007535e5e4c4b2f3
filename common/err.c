#include "common/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void isc_utf8_trim_partial(char *s)
{
	size_t n = strlen(s), lead = n, need;
	unsigned char b;

	while (lead > 0 && n - lead < 3 && ((unsigned char)s[lead - 1] & 0xc0) == 0x80)
		lead--;
	if (lead == 0)
		return;
	b = (unsigned char)s[lead - 1];
	need = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
	if (need > 1 && n - (lead - 1) < need)
		s[lead - 1] = '\0';
}

int isc_err_set(struct isc_err *err, int code, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		err->code = code;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
		isc_utf8_trim_partial(err->msg);
	}
	return code;
}

int isc_err_wrap(struct isc_err *err, const char *fmt, ...)
{
	char old[ISC_ERR_MSG_MAX];
	size_t used;
	va_list ap;
	int n;

	if (!err)
		return ISC_EIO;
	memcpy(old, err->msg, sizeof(old));
	va_start(ap, fmt);
	n = vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	used = n < 0 ? 0 : (size_t)n;
	if (used + 2 < sizeof(err->msg)) {
		/* Message truncation is acceptable; the prefix says where it happened. */
		memcpy(err->msg + used, ": ", 2);
		used += 2;
		strncpy(err->msg + used, old, sizeof(err->msg) - used - 1);
		err->msg[sizeof(err->msg) - 1] = '\0';
	}
	isc_utf8_trim_partial(err->msg);
	return err->code;
}

void isc_err_clear(struct isc_err *err)
{
	if (err) {
		err->code = ISC_OK;
		err->msg[0] = '\0';
	}
}

const char *isc_code_name(int code)
{
	switch (code) {
	case ISC_OK:
		return "ok";
	case ISC_EINVALID:
		return "invalid";
	case ISC_ENOTFOUND:
		return "not_found";
	case ISC_ECONFLICT:
		return "conflict";
	case ISC_EAUTH:
		return "auth";
	case ISC_EQUOTA:
		return "quota";
	case ISC_ECAPACITY:
		return "capacity";
	case ISC_ETHROTTLED:
		return "throttled";
	case ISC_ETRANSIENT:
		return "transient";
	case ISC_ECREDITS:
		return "credits";
	case ISC_EIO:
		return "io";
	case ISC_ENOMEM:
		return "nomem";
	case ISC_ESTORE:
		return "store_unavailable";
	case ISC_ELEASE:
		return "lease_lost";
	default:
		return "unknown";
	}
}

int isc_code_is_retryable(int code)
{
	return code == ISC_ETHROTTLED || code == ISC_ETRANSIENT || code == ISC_ESTORE;
}
