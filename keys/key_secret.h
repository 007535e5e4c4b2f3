/*
 * A cloud key's secret in memory, and where it is read from: the part of keys/
 * that needs no store. `isc keys add` and `isc datasets add` collect a secret
 * on the user's machine and send it to the API; only iscd seals and stores it
 * (keys/keys.h). Secrets never reach a message, a log line or argv: the
 * plaintext lives in one buffer that is wiped when freed.
 */
#ifndef ISC_KEYS_KEY_SECRET_H
#define ISC_KEYS_KEY_SECRET_H

#include "common/err.h"
#include "providers/provider.h" /* struct isc_kv */

#include <stddef.h>

#define ISC_KEY_SECRET_MAX_FIELDS 8

/* Credential fields (names of provider.h) pointing into one buffer that is wiped on cleanup. */
struct isc_key_secret {
	unsigned char *buf; /* "name\0value\0name\0value\0..." */
	size_t len;
	struct isc_kv kv[ISC_KEY_SECRET_MAX_FIELDS];
	size_t n;
};

/* Packs the fields into one buffer (copies; the caller wipes its own copies). */
int isc_key_secret_pack(const struct isc_kv *kv, size_t n, struct isc_key_secret *out,
                        struct isc_err *err);
/* Wipes and frees the buffer; the struct may be reused. */
void isc_key_secret_cleanup(struct isc_key_secret *s);

/* ---- collect.c: where a secret comes from (isc keys add) ---- */
struct isc_key_source {
	int from_env;        /* aws: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN */
	const char *profile; /* aws: profile of the credentials file; oci: config profile */
	const char *file;    /* aws: credentials file; gcp: service-account JSON */
	const char *config_file; /* oci: config file (key_file, pass_phrase) */
	const char *region;      /* oci: when the profile names none */
};
/*
 * Reads the secret of provider from src. Problems name the file, profile or
 * variable at fault, never a value.
 */
int isc_keys_collect(const char *provider, const struct isc_key_source *src,
                     struct isc_key_secret *out, struct isc_err *err);

/*
 * From now on every buffer jansson frees is wiped first (its copies of a secret
 * sent or received as JSON). Process-wide; call before threads use jansson.
 */
void isc_keys_json_wipe_on_free(void);

/* "sha256:" + 12 hex of SHA-256 over the packed secret: tells keys apart, reveals nothing. */
void isc_keys_fingerprint(const struct isc_key_secret *s, char out[32]);

#endif
