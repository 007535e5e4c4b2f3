#include "common/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int isc_err_set(struct isc_err *err, int code, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		err->code = code;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
	}
	return code;
}

int isc_err_wrap(struct isc_err *err, const char *fmt, ...)
{
	char prefix[ISC_ERR_MSG_MAX];
	char old[ISC_ERR_MSG_MAX];
	va_list ap;

	if (!err)
		return ISC_EIO;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	memcpy(old, err->msg, sizeof(old));
	snprintf(err->msg, sizeof(err->msg), "%s: %s", prefix, old);
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
	case ISC_OK: return "ok";
	case ISC_EINVALID: return "invalid";
	case ISC_ENOTFOUND: return "not_found";
	case ISC_ECONFLICT: return "conflict";
	case ISC_EAUTH: return "auth";
	case ISC_EQUOTA: return "quota";
	case ISC_ECAPACITY: return "capacity";
	case ISC_ETHROTTLED: return "throttled";
	case ISC_ETRANSIENT: return "transient";
	case ISC_ECREDITS: return "credits";
	case ISC_EIO: return "io";
	case ISC_ENOMEM: return "nomem";
	default: return "unknown";
	}
}

int isc_code_is_retryable(int code)
{
	return code == ISC_ETHROTTLED || code == ISC_ETRANSIENT;
}
