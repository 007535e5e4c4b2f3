/*
 * OCI credentials and region, resolved the way the OCI CLI does, so an
 * operator's existing ~/.oci/config works unchanged:
 *   1. explicit (bring-your-own) credentials in memory: tenancy, user,
 *      fingerprint, private_key_pem, pass_phrase (optional);
 *   2. otherwise the config file: settings `config_file` > OCI_CLI_CONFIG_FILE
 *      > ~/.oci/config; profile: settings `profile` > OCI_CLI_PROFILE >
 *      DEFAULT. A named profile inherits the keys of [DEFAULT] it does not set.
 *      OCI_CLI_USER, OCI_CLI_TENANCY, OCI_CLI_FINGERPRINT, OCI_CLI_KEY_FILE,
 *      OCI_CLI_KEY_CONTENT and OCI_CLI_PASSPHRASE override the profile's keys
 *      (with all four of user, tenancy, fingerprint and a key set there, no
 *      file is needed);
 *   region: the session's argument > OCI_CLI_REGION > the profile's `region`.
 * Problems name the file, the profile and the key at fault. The private key
 * may be PKCS#1 or PKCS#8 PEM, encrypted when pass_phrase is given.
 */
#ifndef ISC_PROVIDERS_OCI_OCI_CONFIG_H
#define ISC_PROVIDERS_OCI_OCI_CONFIG_H

#include "common/err.h"
#include "providers/provider.h"

#include <openssl/evp.h>

struct isc_oci_config {
	char tenancy[256];
	char user[256];
	char fingerprint[64];
	char region[64];
	char key_id[600]; /* "<tenancy>/<user>/<fingerprint>" */
	EVP_PKEY *key;    /* owned */
	char source[384]; /* for messages: "profile [DEFAULT] of /root/.oci/config" */
};

/* Fills out; on failure nothing is left allocated. */
int isc_oci_config_resolve(const struct isc_provider_settings *settings, const char *region,
                           struct isc_oci_config *out, struct isc_err *err);
void isc_oci_config_cleanup(struct isc_oci_config *c);

/* Loads a PEM private key (pass_phrase may be NULL); `what` names it in messages. */
int isc_oci_key_load_pem(const char *pem, size_t len, const char *pass_phrase, const char *what,
                         EVP_PKEY **out, struct isc_err *err);

/*
 * An organisation's own OCI key, offline: tenancy and user OCIDs, fingerprint, a
 * private_key_pem that loads (with pass_phrase when it is encrypted). ISC_EINVALID
 * naming the field. Session_new applies the same rules to explicit credentials and
 * never completes them from a config file or OCI_CLI_* variables.
 */
int isc_oci_credentials_valid(const struct isc_kv *kv, size_t n, struct isc_err *err);
/* The fields of an OCI key, NULL-terminated. */
extern const char *const isc_oci_credential_keys[];

/* True for 16 colon-separated pairs of hex digits. */
int isc_oci_fingerprint_valid(const char *fp);

#endif
