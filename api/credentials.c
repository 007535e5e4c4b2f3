#include "api/credentials.h"

#include <stddef.h>

int isc_api_body_credentials(struct isc_api_call *c, json_t *body, const char *fields,
                             struct isc_key_secret *out)
{
	json_t *creds = json_object_get(body, "credentials");
	struct isc_kv kv[ISC_KEY_SECRET_MAX_FIELDS];
	struct isc_err err;
	const char *k;
	json_t *v;
	size_t n = 0;

	if (!json_is_object(creds) || json_object_size(creds) == 0 ||
	    json_object_size(creds) > ISC_KEY_SECRET_MAX_FIELDS) {
		if (fields)
			isc_api_reply_error(c, 400, "credentials: an object with %s", fields);
		else
			isc_api_reply_error(c, 400,
			                    "credentials: an object of 1 to %d string fields",
			                    ISC_KEY_SECRET_MAX_FIELDS);
		return 0;
	}
	json_object_foreach(creds, k, v)
	{
		/* The member's name is the caller's own text, never its value (a secret). */
		if (!json_is_string(v)) {
			isc_api_reply_error(c, 400, "credentials.%.64s: not a string", k);
			return 0;
		}
		kv[n].key = k;
		kv[n].value = json_string_value(v);
		n++;
	}
	isc_err_clear(&err);
	if (isc_key_secret_pack(kv, n, out, &err)) {
		isc_api_reply_err(c, &err);
		return 0;
	}
	return 1;
}
