/*
 * The "credentials" member of a request body (POST /v1/keys, POST /v1/datasets):
 * one reading of it for every route that takes a secret, so the rules and the
 * messages naming the field are the same wherever a caller sends keys.
 */
#ifndef ISC_API_CREDENTIALS_H
#define ISC_API_CREDENTIALS_H

#include "api/api_int.h"
#include "keys/keys.h"

/*
 * body["credentials"] as a packed secret: an object of 1 to ISC_KEY_SECRET_MAX_FIELDS
 * string members. `fields` says what the route expects in the 400 that names
 * the field ("access_key_id, secret_access_key and optionally session_token"),
 * NULL for any string fields. Returns 1 with out filled (the caller cleans it
 * up), 0 when a 400 was replied. The caller wipes the raw body: this reads the
 * parsed copy only.
 */
int isc_api_body_credentials(struct isc_api_call *c, json_t *body, const char *fields,
                             struct isc_key_secret *out);

#endif
