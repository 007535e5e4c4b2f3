/*
 * The OCI config file and API key (the order is in oci_config.h). The file is
 * a small INI file: `[PROFILE]` headers, `key = value` lines, `#`/`;`
 * comments. We read every profile's keys into memory once, pick the profile
 * (inheriting from DEFAULT), apply the OCI_CLI_* overrides and load the key.
 * The pass phrase and key text are wiped from every buffer they pass through.
 */
#include "providers/oci/oci_config.h"

#include "common/buf.h"

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CONFIG_BYTES (1 << 20)
#define MAX_KEY_BYTES    (64 * 1024)

/* The keys we use, in the order of enum field. */
enum field { F_USER, F_TENANCY, F_FINGERPRINT, F_KEY_FILE, F_PASS_PHRASE, F_REGION, F_N };
static const char *const field_names[F_N] = {"user",     "tenancy",     "fingerprint",
                                             "key_file", "pass_phrase", "region"};
static const char *const field_env[F_N] = {"OCI_CLI_USER",        "OCI_CLI_TENANCY",
                                           "OCI_CLI_FINGERPRINT", "OCI_CLI_KEY_FILE",
                                           "OCI_CLI_PASSPHRASE",  NULL};

/* One profile's values as read (owned), with the line each came from. */
struct profile_vals {
	char *v[F_N];
	int line[F_N];
	int found; /* the [name] header was seen */
};

static void wipe_free(char *s)
{
	if (s) {
		OPENSSL_cleanse(s, strlen(s));
		free(s);
	}
}

static void vals_cleanup(struct profile_vals *p)
{
	for (int i = 0; i < F_N; i++)
		wipe_free(p->v[i]);
	memset(p, 0, sizeof(*p));
}

static const char *nonempty(const char *s)
{
	return s && s[0] ? s : NULL;
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

int isc_oci_fingerprint_valid(const char *fp)
{
	if (!fp || strlen(fp) != 47)
		return 0;
	for (int i = 0; i < 47; i++) {
		if (i % 3 == 2) {
			if (fp[i] != ':')
				return 0;
		} else if (!isxdigit((unsigned char)fp[i])) {
			return 0;
		}
	}
	return 1;
}

/*
 * Reads `profile` and DEFAULT from the file at path. ISC_ENOTFOUND (with a
 * message) when the file cannot be opened; ISC_EINVALID for a malformed line
 * or a forbidden key.
 */
static int read_file(const char *path, const char *profile, struct profile_vals *want,
                     struct profile_vals *dflt, char *profiles, size_t profiles_cap,
                     struct isc_err *err)
{
	FILE *f = fopen(path, "r");
	char line[4096], section[256] = "";
	int lineno = 0, rc = 0;
	size_t total = 0;

	if (!f)
		return isc_err_set(err, ISC_ENOTFOUND, "cannot read OCI config %s: %s", path,
		                   strerror(errno));
	profiles[0] = '\0';
	while (fgets(line, sizeof(line), f)) {
		char *l, *eq, *k, *v;
		struct profile_vals *dst = NULL;
		lineno++;
		total += strlen(line);
		if (total > MAX_CONFIG_BYTES) {
			rc = isc_err_set(err, ISC_EINVALID, "OCI config %s is larger than %d bytes",
			                 path, MAX_CONFIG_BYTES);
			break;
		}
		if (!strchr(line, '\n') && !feof(f)) {
			rc = isc_err_set(err, ISC_EINVALID, "OCI config %s:%d: line too long", path,
			                 lineno);
			break;
		}
		l = trim(line);
		if (*l == '#' || *l == ';' || *l == '\0')
			continue;
		if (*l == '[') {
			char *end = strchr(l, ']');
			if (!end || end[1] != '\0' || end - l - 1 <= 0 ||
			    (size_t)(end - l - 1) >= sizeof(section)) {
				rc = isc_err_set(
				    err, ISC_EINVALID,
				    "OCI config %s:%d: malformed profile header '%.60s'", path,
				    lineno, l);
				break;
			}
			*end = '\0';
			snprintf(section, sizeof(section), "%s", trim(l + 1));
			if (strcmp(section, profile) == 0)
				want->found = 1;
			if (strcmp(section, "DEFAULT") == 0)
				dflt->found = 1;
			if (strlen(profiles) + strlen(section) + 3 < profiles_cap) {
				if (profiles[0])
					strcat(profiles, ", ");
				strcat(profiles, section);
			}
			continue;
		}
		if (!(eq = strchr(l, '='))) {
			rc = isc_err_set(err, ISC_EINVALID,
			                 "OCI config %s:%d: expected 'key = value' in profile [%s]",
			                 path, lineno, section[0] ? section : "(none)");
			break;
		}
		*eq = '\0';
		k = trim(l);
		v = trim(eq + 1);
		if (!section[0]) {
			rc =
			    isc_err_set(err, ISC_EINVALID,
			                "OCI config %s:%d: key '%.60s' before any [PROFILE] header",
			                path, lineno, k);
			break;
		}
		if (strcmp(k, "key_content") == 0) {
			/* The SDKs refuse it in the file too: key text belongs in key_file. */
			rc = isc_err_set(
			    err, ISC_EINVALID,
			    "OCI config %s:%d: profile [%s]: key_content is not allowed "
			    "in the config file; use key_file",
			    path, lineno, section);
			break;
		}
		if (strcmp(section, profile) == 0)
			dst = want;
		else if (strcmp(section, "DEFAULT") == 0)
			dst = dflt;
		for (int i = 0; dst && i < F_N; i++) {
			if (strcmp(k, field_names[i]) != 0)
				continue;
			wipe_free(dst->v[i]);
			dst->v[i] = strdup(v);
			dst->line[i] = lineno;
			if (!dst->v[i])
				rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		}
		if (rc)
			break;
	}
	OPENSSL_cleanse(line, sizeof(line));
	fclose(f);
	return rc;
}

static char *expand_home(const char *p)
{
	const char *home = getenv("HOME");
	char *out = NULL;
	if (p[0] == '~' && (p[1] == '/' || p[1] == '\0') && nonempty(home)) {
		if (asprintf(&out, "%s%s", home, p + 1) < 0)
			return NULL;
		return out;
	}
	return strdup(p);
}

int isc_oci_key_load_pem(const char *pem, size_t len, const char *pass_phrase, const char *what,
                         EVP_PKEY **out, struct isc_err *err)
{
	BIO *bio;
	EVP_PKEY *k;
	int encrypted = strstr(pem, "ENCRYPTED") != NULL;

	*out = NULL;
	if (len > MAX_KEY_BYTES)
		return isc_err_set(err, ISC_EINVALID, "%s: key larger than %d bytes", what,
		                   MAX_KEY_BYTES);
	if (encrypted && !nonempty(pass_phrase))
		return isc_err_set(err, ISC_EAUTH,
		                   "%s: the key is encrypted and no pass_phrase is set", what);
	bio = BIO_new_mem_buf(pem, (int)len);
	if (!bio)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	/* An empty pass phrase for unencrypted keys: OpenSSL must never prompt on a tty. */
	k = PEM_read_bio_PrivateKey(bio, NULL, NULL, (void *)(pass_phrase ? pass_phrase : ""));
	BIO_free(bio);
	ERR_clear_error();
	if (!k)
		return isc_err_set(err, encrypted ? ISC_EAUTH : ISC_EINVALID, "%s: %s", what,
		                   encrypted ? "cannot decrypt the key: wrong pass_phrase?"
		                             : "not a PEM private key");
	if (EVP_PKEY_base_id(k) != EVP_PKEY_RSA) {
		EVP_PKEY_free(k);
		return isc_err_set(err, ISC_EINVALID, "%s: OCI API keys are RSA keys", what);
	}
	*out = k;
	return 0;
}

static int load_key_file(const char *path, const char *pass, const char *what, EVP_PKEY **out,
                         struct isc_err *err)
{
	struct isc_buf b;
	char chunk[4096];
	size_t n;
	FILE *f;
	int rc = 0;

	f = fopen(path, "r");
	if (!f)
		return isc_err_set(err, ISC_EAUTH, "%s: cannot read %s: %s", what, path,
		                   strerror(errno));
	isc_buf_init(&b, MAX_KEY_BYTES);
	while (!rc && (n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		if (isc_buf_append(&b, chunk, n))
			rc = isc_err_set(err, ISC_EINVALID, "%s: %s is larger than %d bytes", what,
			                 path, MAX_KEY_BYTES);
	fclose(f);
	OPENSSL_cleanse(chunk, sizeof(chunk));
	if (!rc)
		rc = isc_oci_key_load_pem(isc_buf_cstr(&b), b.len, pass, what, out, err);
	if (b.data)
		OPENSSL_cleanse(b.data, b.cap);
	isc_buf_cleanup(&b);
	return rc;
}

static const char *kv_find(const struct isc_kv *kv, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (kv[i].key && strcmp(kv[i].key, key) == 0)
			return nonempty(kv[i].value);
	return NULL;
}

static int copy_field(char *dst, size_t cap, const char *v, const char *name, const char *where,
                      struct isc_err *err)
{
	if (strlen(v) >= cap || strpbrk(v, "\"\r\n/ "))
		return isc_err_set(err, ISC_EINVALID, "%s: '%s' is not a valid value", where, name);
	snprintf(dst, cap, "%s", v);
	return 0;
}

static int region_set(struct isc_oci_config *out, const char *r, const char *where,
                      struct isc_err *err)
{
	if (!r)
		return isc_err_set(err, ISC_EINVALID,
		                   "no OCI region: pass --region, set OCI_CLI_REGION, or set "
		                   "'region' in %s",
		                   where);
	if (strlen(r) >= sizeof(out->region) ||
	    strspn(r, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(r))
		return isc_err_set(err, ISC_EINVALID, "bad OCI region '%.64s' (%s)", r, where);
	snprintf(out->region, sizeof(out->region), "%s", r);
	return 0;
}

static int finish(struct isc_oci_config *out, struct isc_err *err)
{
	if (!isc_oci_fingerprint_valid(out->fingerprint))
		return isc_err_set(err, ISC_EINVALID,
		                   "%s: fingerprint '%.60s' is not 16 colon-separated hex pairs",
		                   out->source, out->fingerprint);
	if (strncmp(out->tenancy, "ocid1.", 6) != 0 || strncmp(out->user, "ocid1.", 6) != 0)
		return isc_err_set(err, ISC_EINVALID,
		                   "%s: tenancy and user must be OCIDs (ocid1...)", out->source);
	snprintf(out->key_id, sizeof(out->key_id), "%s/%s/%s", out->tenancy, out->user,
	         out->fingerprint);
	return 0;
}

const char *const isc_oci_credential_keys[] = {"tenancy",         "user",        "fingerprint",
                                               "private_key_pem", "pass_phrase", NULL};

/* An OCID as the request signature's keyId carries it: "ocid1." then [A-Za-z0-9._-]. */
static int ocid_valid(const char *v)
{
	return strncmp(v, "ocid1.", 6) == 0 && strlen(v) < 256 &&
	       strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") ==
	           strlen(v);
}

/*
 * The text fields of an organisation's OCI key: tenancy and user OCIDs and the key's
 * fingerprint, which make the keyId of every request's Authorization header (so no
 * control character, quote or space), and a private_key_pem. ISC_EINVALID naming
 * the field.
 */
static int explicit_fields(const struct isc_kv *c, size_t n, struct isc_err *err)
{
	static const char need[] = "(an OCI key needs tenancy, user, fingerprint and "
	                           "private_key_pem, and optionally pass_phrase)";
	const char *t = kv_find(c, n, "tenancy"), *u = kv_find(c, n, "user");
	const char *fp = kv_find(c, n, "fingerprint"), *pem = kv_find(c, n, "private_key_pem");

	if (!t)
		return isc_err_set(err, ISC_EINVALID, "OCI key: tenancy is missing %s", need);
	if (!u)
		return isc_err_set(err, ISC_EINVALID, "OCI key: user is missing %s", need);
	if (!fp)
		return isc_err_set(err, ISC_EINVALID, "OCI key: fingerprint is missing %s", need);
	if (!pem)
		return isc_err_set(err, ISC_EINVALID, "OCI key: private_key_pem is missing %s",
		                   need);
	if (!ocid_valid(t))
		return isc_err_set(err, ISC_EINVALID,
		                   "OCI key: tenancy is not an OCID (ocid1. then letters, digits, "
		                   "'.', '_' and '-')");
	if (!ocid_valid(u))
		return isc_err_set(err, ISC_EINVALID,
		                   "OCI key: user is not an OCID (ocid1. then letters, digits, "
		                   "'.', '_' and '-')");
	if (!isc_oci_fingerprint_valid(fp))
		return isc_err_set(err, ISC_EINVALID,
		                   "OCI key: fingerprint is not 16 colon-separated hex pairs");
	return 0;
}

int isc_oci_credentials_valid(const struct isc_kv *kv, size_t n, struct isc_err *err)
{
	const char *pem = kv_find(kv, n, "private_key_pem");
	EVP_PKEY *key = NULL;
	int rc = explicit_fields(kv, n, err);

	if (!rc)
		rc = isc_oci_key_load_pem(pem, strlen(pem), kv_find(kv, n, "pass_phrase"),
		                          "OCI key: private_key_pem", &key, err);
	EVP_PKEY_free(key);
	/* A wrong pass phrase is the caller's input here, not a refusal by the cloud. */
	if (rc == ISC_EAUTH && err)
		err->code = ISC_EINVALID;
	return rc == ISC_EAUTH ? ISC_EINVALID : rc;
}

static int from_explicit(const struct isc_provider_settings *st, const char *region,
                         struct isc_oci_config *out, struct isc_err *err)
{
	const struct isc_kv *c = st->credentials;
	size_t n = st->n_credentials;
	const char *t = kv_find(c, n, "tenancy"), *u = kv_find(c, n, "user");
	const char *fp = kv_find(c, n, "fingerprint"), *pem = kv_find(c, n, "private_key_pem");
	int rc;

	snprintf(out->source, sizeof(out->source), "explicit OCI credentials");
	/* Never completed from a config file or OCI_CLI_* variables: those are the platform's. */
	if ((rc = explicit_fields(c, n, err))) {
		if (err)
			err->code = ISC_EAUTH;
		return ISC_EAUTH;
	}
	if ((rc = copy_field(out->tenancy, sizeof(out->tenancy), t, "tenancy", out->source, err)) ||
	    (rc = copy_field(out->user, sizeof(out->user), u, "user", out->source, err)) ||
	    (rc = copy_field(out->fingerprint, sizeof(out->fingerprint), fp, "fingerprint",
	                     out->source, err)))
		return rc;
	if (!region)
		region = nonempty(getenv("OCI_CLI_REGION"));
	if (!region)
		region = nonempty(isc_provider_setting(st, "region"));
	if ((rc = region_set(out, region, "[providers.oci]", err)))
		return rc;
	/* A key that does not load is as unusable as a missing one: the key fails, not the
	 * settings. */
	if ((rc = isc_oci_key_load_pem(pem, strlen(pem), kv_find(c, n, "pass_phrase"),
	                               "explicit OCI credentials: private_key_pem", &out->key,
	                               err))) {
		if (rc == ISC_EINVALID && err)
			err->code = ISC_EAUTH;
		return rc == ISC_EINVALID ? ISC_EAUTH : rc;
	}
	return finish(out, err);
}

static char *config_path(const struct isc_provider_settings *st)
{
	const char *p = nonempty(isc_provider_setting(st, "config_file"));
	if (!p)
		p = nonempty(getenv("OCI_CLI_CONFIG_FILE"));
	if (!p)
		p = "~/.oci/config";
	return expand_home(p);
}

int isc_oci_config_resolve(const struct isc_provider_settings *st, const char *region,
                           struct isc_oci_config *out, struct isc_err *err)
{
	struct profile_vals want = {0}, dflt = {0};
	const char *v[F_N] = {0};
	const char *profile, *key_content;
	char profiles[256], where[F_N][400];
	char *path = NULL, *key_path = NULL;
	int rc, file_rc, env_complete;

	memset(out, 0, sizeof(*out));
	if (isc_provider_settings_byo(st)) {
		rc = from_explicit(st, nonempty(region), out, err);
		if (rc)
			isc_oci_config_cleanup(out);
		return rc;
	}
	profile = nonempty(isc_provider_setting(st, "profile"));
	if (!profile)
		profile = nonempty(getenv("OCI_CLI_PROFILE"));
	if (!profile)
		profile = "DEFAULT";
	path = config_path(st);
	if (!path)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	key_content = nonempty(getenv("OCI_CLI_KEY_CONTENT"));
	env_complete = nonempty(getenv("OCI_CLI_USER")) && nonempty(getenv("OCI_CLI_TENANCY")) &&
	               nonempty(getenv("OCI_CLI_FINGERPRINT")) &&
	               (key_content || nonempty(getenv("OCI_CLI_KEY_FILE")));
	file_rc = read_file(path, profile, &want, &dflt, profiles, sizeof(profiles), err);
	if (file_rc && (file_rc != ISC_ENOTFOUND || !env_complete)) {
		rc = file_rc == ISC_ENOTFOUND ? ISC_EAUTH : file_rc;
		if (err && file_rc == ISC_ENOTFOUND) {
			/* Name both places the CLI's chain looks, as `isc check oci` shows it. */
			char why[ISC_ERR_MSG_MAX];
			snprintf(why, sizeof(why), "%s", err->msg);
			isc_err_set(err, rc,
			            "no OCI credentials: %s, and OCI_CLI_USER, OCI_CLI_TENANCY, "
			            "OCI_CLI_FINGERPRINT and OCI_CLI_KEY_FILE (or "
			            "OCI_CLI_KEY_CONTENT) are not all set",
			            why);
		} else if (err) {
			err->code = rc;
		}
		goto out;
	}
	if (!file_rc && !want.found && (strcmp(profile, "DEFAULT") != 0 || !env_complete)) {
		rc = isc_err_set(err, ISC_EAUTH, "OCI config %s: no profile [%s] (profiles: %s)",
		                 path, profile, profiles[0] ? profiles : "none");
		goto out;
	}
	snprintf(out->source, sizeof(out->source), "profile [%s] of %s", profile, path);
	for (int i = 0; i < F_N; i++) {
		const char *env = field_env[i] ? nonempty(getenv(field_env[i])) : NULL;
		if (env) {
			v[i] = env;
			snprintf(where[i], sizeof(where[i]), "%s", field_env[i]);
		} else if (want.v[i]) {
			v[i] = want.v[i];
			snprintf(where[i], sizeof(where[i]), "OCI config %s:%d: profile [%s]: %s",
			         path, want.line[i], profile, field_names[i]);
		} else if (dflt.v[i]) {
			v[i] = dflt.v[i];
			snprintf(where[i], sizeof(where[i]),
			         "OCI config %s:%d: profile [%s] (from [DEFAULT]): %s", path,
			         dflt.line[i], profile, field_names[i]);
		}
	}
	for (int i = F_USER; i <= F_KEY_FILE; i++) {
		if (i == F_KEY_FILE && key_content)
			continue;
		if (!nonempty(v[i])) {
			rc =
			    isc_err_set(err, ISC_EAUTH, "OCI config %s: profile [%s]: missing '%s'",
			                path, profile, field_names[i]);
			goto out;
		}
	}
	if ((rc =
	         copy_field(out->user, sizeof(out->user), v[F_USER], "user", where[F_USER], err)) ||
	    (rc = copy_field(out->tenancy, sizeof(out->tenancy), v[F_TENANCY], "tenancy",
	                     where[F_TENANCY], err)))
		goto out;
	if (!isc_oci_fingerprint_valid(v[F_FINGERPRINT])) {
		rc = isc_err_set(err, ISC_EINVALID,
		                 "%s: '%.60s' is not 16 colon-separated hex pairs",
		                 where[F_FINGERPRINT], v[F_FINGERPRINT]);
		goto out;
	}
	snprintf(out->fingerprint, sizeof(out->fingerprint), "%s", v[F_FINGERPRINT]);
	if (!nonempty(region))
		region = nonempty(getenv("OCI_CLI_REGION"));
	if (!region)
		region = nonempty(v[F_REGION]);
	if ((rc = region_set(out, region, out->source, err)))
		goto out;
	if (key_content) {
		rc = isc_oci_key_load_pem(key_content, strlen(key_content), v[F_PASS_PHRASE],
		                          "OCI_CLI_KEY_CONTENT", &out->key, err);
	} else {
		key_path = expand_home(v[F_KEY_FILE]);
		rc = key_path ? load_key_file(key_path, v[F_PASS_PHRASE], where[F_KEY_FILE],
		                              &out->key, err)
		              : isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	if (!rc)
		rc = finish(out, err);
out:
	vals_cleanup(&want);
	vals_cleanup(&dflt);
	free(path);
	free(key_path);
	if (rc)
		isc_oci_config_cleanup(out);
	return rc;
}

void isc_oci_config_cleanup(struct isc_oci_config *c)
{
	if (!c)
		return;
	EVP_PKEY_free(c->key);
	OPENSSL_cleanse(c, sizeof(*c));
	memset(c, 0, sizeof(*c));
}
