/*
 * Credential, region and endpoint resolution for AWS (the order is in
 * aws_creds.h). The shared credentials file is a small INI file; we read only
 * the three keys we need from the one profile we want. Secrets are wiped from
 * every buffer they pass through.
 */
#include "providers/aws/aws_creds.h"

#include <openssl/crypto.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void wipe_free(char *s)
{
	if (s) {
		OPENSSL_cleanse(s, strlen(s));
		free(s);
	}
}

void isc_aws_creds_cleanup(struct isc_aws_creds *c)
{
	if (!c)
		return;
	free(c->access_key_id);
	wipe_free(c->secret_access_key);
	wipe_free(c->session_token);
	memset(c, 0, sizeof(*c));
}

static const char *nonempty(const char *s)
{
	return s && s[0] ? s : NULL;
}

static const char *kv_find(const struct isc_kv *kv, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (kv[i].key && strcmp(kv[i].key, key) == 0)
			return nonempty(kv[i].value);
	return NULL;
}

static int set3(struct isc_aws_creds *c, const char *id, const char *secret, const char *token,
                struct isc_err *err)
{
	c->access_key_id = strdup(id);
	c->secret_access_key = strdup(secret);
	c->session_token = token ? strdup(token) : NULL;
	if (!c->access_key_id || !c->secret_access_key || (token && !c->session_token)) {
		isc_aws_creds_cleanup(c);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	return 0;
}

static char *trim(char *s)
{
	char *e;
	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

/*
 * Reads [profile] from an INI credentials file. Returns 0 with creds set,
 * ISC_ENOTFOUND when the file or profile is missing or incomplete.
 */
static int read_profile(const char *path, const char *profile, struct isc_aws_creds *c,
                        struct isc_err *err)
{
	FILE *f = fopen(path, "r");
	char line[4096];
	char *id = NULL, *secret = NULL, *token = NULL;
	int in = 0, rc;

	if (!f)
		return isc_err_set(err, ISC_ENOTFOUND, "no credentials file %s", path);
	while (fgets(line, sizeof(line), f)) {
		char *l = trim(line), *eq, **slot = NULL;
		if (*l == '#' || *l == ';' || *l == '\0')
			continue;
		if (*l == '[') {
			char *end = strchr(l, ']');
			if (end)
				*end = '\0';
			l = trim(l + 1);
			/* ~/.aws/config spells it "profile NAME"; accept both. */
			if (strncmp(l, "profile ", 8) == 0)
				l = trim(l + 8);
			in = strcmp(l, profile) == 0;
			continue;
		}
		if (!in || !(eq = strchr(l, '=')))
			continue;
		*eq = '\0';
		char *k = trim(l), *v = trim(eq + 1);
		if (strcmp(k, "aws_access_key_id") == 0)
			slot = &id;
		else if (strcmp(k, "aws_secret_access_key") == 0)
			slot = &secret;
		else if (strcmp(k, "aws_session_token") == 0)
			slot = &token;
		if (slot) {
			wipe_free(*slot);
			*slot = strdup(v);
		}
	}
	OPENSSL_cleanse(line, sizeof(line));
	fclose(f);
	if (id && secret) {
		rc = set3(c, id, secret, token, err);
		if (!rc)
			snprintf(c->source, sizeof(c->source), "profile %s in %.80s", profile,
			         path);
	} else {
		rc = isc_err_set(err, ISC_ENOTFOUND, "profile '%s' not found or incomplete in %s",
		                 profile, path);
	}
	free(id);
	wipe_free(secret);
	wipe_free(token);
	return rc;
}

static char *credentials_path(const struct isc_provider_settings *settings)
{
	const char *p = nonempty(isc_provider_setting(settings, "credentials_file"));
	const char *home;
	char *out = NULL;
	if (!p)
		p = nonempty(getenv("AWS_SHARED_CREDENTIALS_FILE"));
	if (p)
		return strdup(p);
	home = nonempty(getenv("HOME"));
	if (!home)
		return NULL;
	if (asprintf(&out, "%s/.aws/credentials", home) < 0)
		return NULL;
	return out;
}

const char *const isc_aws_credential_keys[] = {"access_key_id", "secret_access_key",
                                               "session_token", NULL};

/* Printable ASCII without spaces: no CR, LF or other control character, nothing above 0x7e. */
static int visible_ascii(const char *v)
{
	for (const unsigned char *p = (const unsigned char *)v; *p; p++)
		if (*p < 0x21 || *p > 0x7e)
			return 0;
	return 1;
}

int isc_aws_credentials_valid(const struct isc_kv *kv, size_t n, struct isc_err *err)
{
	const char *id = kv_find(kv, n, "access_key_id");
	const char *secret = kv_find(kv, n, "secret_access_key");
	const char *token = kv_find(kv, n, "session_token");

	if (!id)
		return isc_err_set(err, ISC_EINVALID,
		                   "AWS key: access_key_id is missing (an AWS key needs "
		                   "access_key_id and secret_access_key, and optionally "
		                   "session_token)");
	if (!secret)
		return isc_err_set(err, ISC_EINVALID,
		                   "AWS key: secret_access_key is missing (an AWS key needs "
		                   "access_key_id and secret_access_key, and optionally "
		                   "session_token)");
	if (strlen(id) > 128 || strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	                                   "0123456789_") != strlen(id))
		return isc_err_set(err, ISC_EINVALID,
		                   "AWS key: access_key_id is not an access key id (letters, "
		                   "digits and '_', at most 128)");
	if (!visible_ascii(secret))
		return isc_err_set(err, ISC_EINVALID,
		                   "AWS key: secret_access_key holds a control character, a "
		                   "space or a non-ASCII byte");
	if (token && !visible_ascii(token))
		return isc_err_set(err, ISC_EINVALID,
		                   "AWS key: session_token holds a control character, a space "
		                   "or a non-ASCII byte (it is sent as an HTTP header)");
	return 0;
}

int isc_aws_creds_resolve(const struct isc_provider_settings *settings, struct isc_aws_creds *out,
                          struct isc_err *err)
{
	const char *id, *secret, *profile;
	char *path;
	int rc;

	memset(out, 0, sizeof(*out));
	/*
	 * 1. Bring-your-own keys handed over in memory: used alone. A key that lacks a
	 * field is refused, never completed from the settings' profile, the environment
	 * or a credentials file, which are the platform's own account (issue 42).
	 */
	if (isc_provider_settings_byo(settings)) {
		if ((rc = isc_aws_credentials_valid(settings->credentials, settings->n_credentials,
		                                    err))) {
			if (err)
				err->code = ISC_EAUTH;
			return ISC_EAUTH;
		}
		id = kv_find(settings->credentials, settings->n_credentials, "access_key_id");
		secret =
		    kv_find(settings->credentials, settings->n_credentials, "secret_access_key");
		rc = set3(out, id, secret,
		          kv_find(settings->credentials, settings->n_credentials, "session_token"),
		          err);
		if (!rc)
			snprintf(out->source, sizeof(out->source), "explicit credentials");
		return rc;
	}
	path = credentials_path(settings);
	/* 2. A profile named in the settings is an explicit choice: it beats the environment. */
	profile = nonempty(isc_provider_setting(settings, "profile"));
	if (profile) {
		rc = path ? read_profile(path, profile, out, err)
		          : isc_err_set(err, ISC_EAUTH, "no credentials file for profile '%s'",
		                        profile);
		free(path);
		if (rc == 0)
			return 0;
		/* Missing credentials are an authentication problem to the caller. */
		if (err)
			err->code = ISC_EAUTH;
		return ISC_EAUTH;
	}
	/* 3. The environment. */
	id = nonempty(getenv("AWS_ACCESS_KEY_ID"));
	secret = nonempty(getenv("AWS_SECRET_ACCESS_KEY"));
	if (id && secret) {
		free(path);
		rc = set3(out, id, secret, nonempty(getenv("AWS_SESSION_TOKEN")), err);
		if (!rc)
			snprintf(out->source, sizeof(out->source), "environment");
		return rc;
	}
	/* 4. The shared credentials file, profile AWS_PROFILE or "default". */
	profile = nonempty(getenv("AWS_PROFILE"));
	if (!profile)
		profile = "default";
	rc = path ? read_profile(path, profile, out, err) : ISC_ENOTFOUND;
	if (rc) {
		/* Where the chain looked, so the user knows what to set or create. */
		struct stat sb;
		rc = isc_err_set(
		    err, ISC_EAUTH,
		    "no AWS credentials: looked in the environment (AWS_ACCESS_KEY_ID and "
		    "AWS_SECRET_ACCESS_KEY %s) and in profile '%s' of %s (%s); set those variables "
		    "or add the profile",
		    id || secret ? "not both set" : "unset", profile,
		    path ? path : "~/.aws/credentials",
		    !path             ? "HOME unset"
		    : stat(path, &sb) ? "no such file"
		                      : "no such profile");
	}
	free(path);
	return rc;
}

int isc_aws_region_resolve(const char *arg, char *out, size_t cap, struct isc_err *err)
{
	const char *r = nonempty(arg);
	if (!r)
		r = nonempty(getenv("AWS_REGION"));
	if (!r)
		r = nonempty(getenv("AWS_DEFAULT_REGION"));
	if (!r)
		return isc_err_set(err, ISC_EINVALID,
		                   "no AWS region: pass --region or set AWS_REGION");
	if (strlen(r) >= cap || strspn(r, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(r))
		return isc_err_set(err, ISC_EINVALID, "bad AWS region '%.64s'", r);
	snprintf(out, cap, "%s", r);
	return 0;
}

char *isc_aws_endpoint_resolve(const struct isc_provider_settings *settings, const char *service,
                               const char *region)
{
	char key[32], env[64];
	const char *e;
	char *out = NULL;
	size_t n;

	snprintf(key, sizeof(key), "endpoint_%s", service);
	snprintf(env, sizeof(env), "AWS_ENDPOINT_URL_%s", service);
	for (char *p = env; *p; p++)
		*p = (char)toupper((unsigned char)*p);
	e = nonempty(isc_provider_setting(settings, key));
	if (!e)
		e = nonempty(getenv(env));
	if (!e)
		e = nonempty(getenv("AWS_ENDPOINT_URL"));
	if (!e)
		e = nonempty(isc_provider_setting(settings, "endpoint"));
	if (e)
		out = strdup(e);
	else if (asprintf(&out, "https://%s.%s.amazonaws.com", service, region) < 0)
		out = NULL;
	/* One spelling: no trailing slash; requests add the path. */
	n = out ? strlen(out) : 0;
	while (n > 0 && out[n - 1] == '/')
		out[--n] = '\0';
	return out;
}
