/*
 * Reading a key's secret from where each cloud's own tools keep it, for
 * `isc keys add`: never from argv. Every buffer that held a secret is wiped.
 */
#include "keys/keys.h"

#include "providers/aws/aws_creds.h"
#include "providers/oci/oci_config.h"

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/pem.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SECRET_FILE (64 * 1024)

static const char *nonempty(const char *s)
{
	return s && s[0] ? s : NULL;
}

/* The whole file (<= 64 KiB), NUL-terminated; *len without the NUL. Wipe with len + 1. */
static int read_small_file(const char *path, const char *what, char **out, size_t *len,
                           struct isc_err *err)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	size_t n;

	*out = NULL;
	*len = 0;
	if (!f)
		return isc_err_set(err, errno == ENOENT ? ISC_ENOTFOUND : ISC_EIO,
		                   "cannot read %s %s: %s", what, path, strerror(errno));
	buf = malloc(MAX_SECRET_FILE + 1);
	if (!buf) {
		fclose(f);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	n = fread(buf, 1, MAX_SECRET_FILE + 1, f);
	fclose(f);
	if (n > MAX_SECRET_FILE) {
		isc_vault_wipe_free(buf, MAX_SECRET_FILE + 1);
		return isc_err_set(err, ISC_EINVALID, "%s %s is larger than %d bytes", what, path,
		                   MAX_SECRET_FILE);
	}
	buf[n] = '\0';
	*out = buf;
	*len = n;
	return 0;
}

static int collect_aws(const struct isc_key_source *src, struct isc_key_secret *out,
                       struct isc_err *err)
{
	struct isc_aws_creds c = {0};
	struct isc_kv kv[3];
	size_t n = 0;
	int rc;

	if (src->from_env == !!src->profile)
		return isc_err_set(
		    err, ISC_EINVALID,
		    "aws keys come from --from-env or --profile P [--file F] (one of "
		    "them)");
	if (src->from_env) {
		const char *id = nonempty(getenv("AWS_ACCESS_KEY_ID"));
		const char *secret = nonempty(getenv("AWS_SECRET_ACCESS_KEY"));
		const char *token = nonempty(getenv("AWS_SESSION_TOKEN"));
		if (!id || !secret)
			return isc_err_set(
			    err, ISC_EINVALID,
			    "--from-env: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
			    "must both be set");
		kv[n++] = (struct isc_kv){"access_key_id", id};
		kv[n++] = (struct isc_kv){"secret_access_key", secret};
		if (token)
			kv[n++] = (struct isc_kv){"session_token", token};
		return isc_key_secret_pack(kv, n, out, err);
	}
	{
		/* The driver's own reader of the shared credentials file, for that profile only. */
		struct isc_kv items[2] = {{"profile", src->profile},
		                          {"credentials_file", src->file ? src->file : ""}};
		struct isc_provider_settings st = {items, src->file ? 2 : 1, NULL, 0};
		if ((rc = isc_aws_creds_resolve(&st, &c, err)))
			return rc;
	}
	kv[n++] = (struct isc_kv){"access_key_id", c.access_key_id};
	kv[n++] = (struct isc_kv){"secret_access_key", c.secret_access_key};
	if (c.session_token && c.session_token[0])
		kv[n++] = (struct isc_kv){"session_token", c.session_token};
	rc = isc_key_secret_pack(kv, n, out, err);
	isc_aws_creds_cleanup(&c);
	return rc;
}

static int collect_gcp(const struct isc_key_source *src, struct isc_key_secret *out,
                       struct isc_err *err)
{
	struct isc_kv kv[1];
	char *json = NULL;
	size_t len = 0;
	int rc;

	if (!src->file || src->from_env || src->profile || src->config_file)
		return isc_err_set(err, ISC_EINVALID,
		                   "gcp keys come from a service-account key file: --file F");
	if ((rc = read_small_file(src->file, "service-account key file", &json, &len, err)))
		return rc;
	if (strlen(json) != len)
		rc = isc_err_set(err, ISC_EINVALID, "service-account key file %s holds a NUL byte",
		                 src->file);
	if (!rc) {
		kv[0] = (struct isc_kv){"service_account_json", json};
		rc = isc_key_secret_pack(kv, 1, out, err);
	}
	isc_vault_wipe_free(json, len + 1);
	return rc;
}

/*
 * OCI: the driver resolves the profile (inheriting DEFAULT) and loads the API key,
 * decrypting it with pass_phrase; the key is kept as unencrypted PKCS#8 PEM inside
 * the sealed record, so no pass phrase needs storing. A memory BIO's buffer is
 * cleansed by OpenSSL when freed.
 */
static int collect_oci(const struct isc_key_source *src, struct isc_key_secret *out,
                       struct isc_err *err)
{
	struct isc_oci_config c;
	struct isc_kv items[2] = {{"config_file", src->config_file}, {"profile", src->profile}};
	struct isc_provider_settings st = {items, 2, NULL, 0};
	struct isc_kv kv[4];
	BIO *bio = NULL;
	char *pem = NULL;
	long pem_len;
	int rc;

	if (!src->config_file || !src->profile || src->from_env || src->file)
		return isc_err_set(err, ISC_EINVALID,
		                   "oci keys come from a config file and profile: --config F "
		                   "--profile P");
	if ((rc = isc_oci_config_resolve(&st, src->region, &c, err)))
		return rc;
	bio = BIO_new(BIO_s_mem());
	if (!bio || PEM_write_bio_PrivateKey(bio, c.key, NULL, NULL, 0, NULL, NULL) != 1) {
		rc = isc_err_set(err, ISC_EINVALID, "%s: the API key cannot be exported", c.source);
		goto out;
	}
	pem_len = BIO_get_mem_data(bio, &pem);
	{
		char *copy = malloc((size_t)pem_len + 1);
		if (!copy) {
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
			goto out;
		}
		memcpy(copy, pem, (size_t)pem_len);
		copy[pem_len] = '\0';
		kv[0] = (struct isc_kv){"tenancy", c.tenancy};
		kv[1] = (struct isc_kv){"user", c.user};
		kv[2] = (struct isc_kv){"fingerprint", c.fingerprint};
		kv[3] = (struct isc_kv){"private_key_pem", copy};
		rc = isc_key_secret_pack(kv, 4, out, err);
		isc_vault_wipe_free(copy, (size_t)pem_len + 1);
	}
out:
	BIO_free(bio);
	isc_oci_config_cleanup(&c);
	return rc;
}

int isc_keys_collect(const char *provider, const struct isc_key_source *src,
                     struct isc_key_secret *out, struct isc_err *err)
{
	memset(out, 0, sizeof(*out));
	if (strcmp(provider, "aws") == 0)
		return collect_aws(src, out, err);
	if (strcmp(provider, "gcp") == 0)
		return collect_gcp(src, out, err);
	if (strcmp(provider, "oci") == 0)
		return collect_oci(src, out, err);
	return isc_err_set(err, ISC_EINVALID, "no key kind for provider '%s' (aws, gcp, oci)",
	                   provider);
}
