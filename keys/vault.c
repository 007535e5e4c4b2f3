/* The master key file and AES-256-GCM sealing (see vault.h). */
#include "keys/vault.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct isc_vault {
	unsigned char key[ISC_VAULT_KEY_LEN];
	char *path;
};

void isc_vault_wipe_free(void *p, size_t len)
{
	if (!p)
		return;
	OPENSSL_cleanse(p, len);
	free(p);
}

int isc_vault_master_path(const char *home, char **out, struct isc_err *err)
{
	const char *env = getenv("ISC_MASTER_KEY_FILE");
	char home_abs[PATH_MAX], key_abs[PATH_MAX], *path = NULL, *slash;
	size_t hl;

	*out = NULL;
	if (env && *env) {
		path = strdup(env);
	} else {
		size_t n = strlen(home);
		while (n > 1 && home[n - 1] == '/')
			n--;
		if (asprintf(&path, "%.*s.master-key", (int)n, home) < 0)
			path = NULL;
	}
	if (!path)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	/* Compare real folders: the key's folder must not be the store's or below it. */
	if (realpath(home, home_abs)) {
		snprintf(key_abs, sizeof(key_abs), "%s", path);
		slash = strrchr(key_abs, '/');
		if (slash && slash != key_abs)
			*slash = '\0';
		else
			snprintf(key_abs, sizeof(key_abs), ".");
		{
			char dir_abs[PATH_MAX];
			if (realpath(key_abs, dir_abs)) {
				hl = strlen(home_abs);
				if (strncmp(dir_abs, home_abs, hl) == 0 &&
				    (dir_abs[hl] == '\0' || dir_abs[hl] == '/')) {
					isc_err_set(
					    err, ISC_EINVALID,
					    "master key file %s is inside the store's folder %s: "
					    "keep it outside, so a copy of the store holds no key",
					    path, home);
					free(path);
					return ISC_EINVALID;
				}
			}
		}
	}
	*out = path;
	return 0;
}

int isc_vault_from_bytes(const unsigned char key[ISC_VAULT_KEY_LEN], const char *path,
                         struct isc_vault **out, struct isc_err *err)
{
	struct isc_vault *v = calloc(1, sizeof(*v));
	*out = NULL;
	if (!v || !(v->path = strdup(path ? path : "(memory)"))) {
		free(v);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	memcpy(v->key, key, ISC_VAULT_KEY_LEN);
	*out = v;
	return 0;
}

void isc_vault_free(struct isc_vault *v)
{
	if (!v)
		return;
	OPENSSL_cleanse(v->key, sizeof(v->key));
	free(v->path);
	free(v);
}

const char *isc_vault_path(const struct isc_vault *v)
{
	return v->path;
}

static int hexval(int c)
{
	return isdigit(c) ? c - '0' : tolower(c) - 'a' + 10;
}

/* Writes 64 hex characters and a newline to a new file at path (0600), fsynced. */
static int write_key_file(const char *path, const unsigned char key[ISC_VAULT_KEY_LEN], int excl,
                          struct isc_err *err)
{
	static const char hex[] = "0123456789abcdef";
	char text[ISC_VAULT_KEY_LEN * 2 + 1];
	int fd, rc = 0;

	for (int i = 0; i < ISC_VAULT_KEY_LEN; i++) {
		text[2 * i] = hex[key[i] >> 4];
		text[2 * i + 1] = hex[key[i] & 15];
	}
	text[sizeof(text) - 1] = '\n';
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | (excl ? O_EXCL : O_TRUNC),
	          0600);
	if (fd < 0) {
		rc = isc_err_set(err, ISC_EIO, "cannot create master key file %s: %s", path,
		                 strerror(errno));
	} else {
		if (fchmod(fd, 0600) != 0 ||
		    write(fd, text, sizeof(text)) != (ssize_t)sizeof(text) || fsync(fd) != 0)
			rc = isc_err_set(err, ISC_EIO, "cannot write master key file %s: %s", path,
			                 strerror(errno));
		close(fd);
		if (rc)
			unlink(path);
	}
	OPENSSL_cleanse(text, sizeof(text));
	return rc;
}

int isc_vault_generate(const char *path, struct isc_vault **out, struct isc_err *err)
{
	unsigned char key[ISC_VAULT_KEY_LEN];
	int rc;

	*out = NULL;
	if (RAND_bytes(key, sizeof(key)) != 1)
		return isc_err_set(err, ISC_EIO, "no randomness for a master key");
	rc = write_key_file(path, key, 0, err);
	if (!rc)
		rc = isc_vault_from_bytes(key, path, out, err);
	OPENSSL_cleanse(key, sizeof(key));
	return rc;
}

int isc_vault_load(const char *path, int create, struct isc_vault **out, struct isc_err *err)
{
	unsigned char key[ISC_VAULT_KEY_LEN];
	char text[160];
	struct stat sb;
	ssize_t got;
	size_t len;
	int fd, rc;

	*out = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT && create) {
		if (RAND_bytes(key, sizeof(key)) != 1)
			return isc_err_set(err, ISC_EIO, "no randomness for a master key");
		rc = write_key_file(path, key, 1, err);
		if (!rc)
			rc = isc_vault_from_bytes(key, path, out, err);
		OPENSSL_cleanse(key, sizeof(key));
		return rc;
	}
	if (fd < 0)
		return isc_err_set(err, errno == ENOENT ? ISC_ENOTFOUND : ISC_EIO,
		                   "cannot read master key file %s: %s", path, strerror(errno));
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		close(fd);
		return isc_err_set(err, ISC_EINVALID, "master key file %s is not a regular file",
		                   path);
	}
	/* Group read is tolerated (a mounted secret's group), any other access is not. */
	if ((sb.st_mode & 0027) != 0 || (sb.st_uid != getuid() && sb.st_uid != 0)) {
		close(fd);
		return isc_err_set(
		    err, ISC_EINVALID,
		    "master key file %s is mode %03o owned by uid %u: it must not be "
		    "readable by others nor writable by anyone but its owner "
		    "(chmod 600)",
		    path, (unsigned)(sb.st_mode & 0777), (unsigned)sb.st_uid);
	}
	got = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (got < 0)
		return isc_err_set(err, ISC_EIO, "cannot read master key file %s: %s", path,
		                   strerror(errno));
	len = (size_t)got;
	while (len > 0 && isspace((unsigned char)text[len - 1]))
		len--;
	rc = len == 2 * ISC_VAULT_KEY_LEN ? 0 : ISC_EINVALID;
	for (size_t i = 0; !rc && i < len; i++)
		if (!isxdigit((unsigned char)text[i]))
			rc = ISC_EINVALID;
	if (rc) {
		OPENSSL_cleanse(text, sizeof(text));
		return isc_err_set(err, ISC_EINVALID,
		                   "master key file %s must hold 64 hex characters (32 bytes)",
		                   path);
	}
	for (int i = 0; i < ISC_VAULT_KEY_LEN; i++)
		key[i] = (unsigned char)(hexval((unsigned char)text[2 * i]) << 4 |
		                         hexval((unsigned char)text[2 * i + 1]));
	OPENSSL_cleanse(text, sizeof(text));
	rc = isc_vault_from_bytes(key, path, out, err);
	OPENSSL_cleanse(key, sizeof(key));
	return rc;
}

int isc_vault_seal(const struct isc_vault *v, const void *aad, size_t aad_len, const void *pt,
                   size_t pt_len, unsigned char nonce[ISC_VAULT_NONCE_LEN], unsigned char **ct,
                   size_t *ct_len, struct isc_err *err)
{
	EVP_CIPHER_CTX *ctx = NULL;
	unsigned char *out = NULL;
	int n = 0, fin = 0, rc = 0;

	*ct = NULL;
	*ct_len = 0;
	if (pt_len > INT_MAX - ISC_VAULT_TAG_LEN || aad_len > INT_MAX)
		return isc_err_set(err, ISC_EINVALID, "secret too large to seal");
	if (RAND_bytes(nonce, ISC_VAULT_NONCE_LEN) != 1)
		return isc_err_set(err, ISC_EIO, "no randomness for a nonce");
	out = malloc(pt_len + ISC_VAULT_TAG_LEN);
	ctx = EVP_CIPHER_CTX_new();
	if (!out || !ctx) {
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		goto done;
	}
	if (EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL) != 1 ||
	    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, ISC_VAULT_NONCE_LEN, NULL) != 1 ||
	    EVP_EncryptInit_ex(ctx, NULL, NULL, v->key, nonce) != 1 ||
	    (aad_len && EVP_EncryptUpdate(ctx, NULL, &n, aad, (int)aad_len) != 1) ||
	    EVP_EncryptUpdate(ctx, out, &n, pt, (int)pt_len) != 1 ||
	    EVP_EncryptFinal_ex(ctx, out + n, &fin) != 1 ||
	    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, ISC_VAULT_TAG_LEN, out + n + fin) != 1) {
		rc = isc_err_set(err, ISC_EIO, "AES-256-GCM sealing failed");
		goto done;
	}
	*ct = out;
	*ct_len = (size_t)(n + fin) + ISC_VAULT_TAG_LEN;
	out = NULL;
done:
	EVP_CIPHER_CTX_free(ctx);
	free(out);
	return rc;
}

int isc_vault_open(const struct isc_vault *v, const void *aad, size_t aad_len,
                   const unsigned char *nonce, size_t nonce_len, const unsigned char *ct,
                   size_t ct_len, unsigned char **pt, size_t *pt_len, struct isc_err *err)
{
	EVP_CIPHER_CTX *ctx = NULL;
	unsigned char *out = NULL, tag[ISC_VAULT_TAG_LEN];
	size_t body;
	int n = 0, fin = 0, rc = 0;

	*pt = NULL;
	*pt_len = 0;
	if (nonce_len != ISC_VAULT_NONCE_LEN || ct_len < ISC_VAULT_TAG_LEN || ct_len > INT_MAX ||
	    aad_len > INT_MAX)
		return isc_err_set(err, ISC_EAUTH,
		                   "sealed record is malformed (%zu-byte nonce, "
		                   "%zu-byte ciphertext)",
		                   nonce_len, ct_len);
	body = ct_len - ISC_VAULT_TAG_LEN;
	memcpy(tag, ct + body, ISC_VAULT_TAG_LEN);
	out = malloc(body + 1);
	ctx = EVP_CIPHER_CTX_new();
	if (!out || !ctx) {
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		goto done;
	}
	if (EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL) != 1 ||
	    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, ISC_VAULT_NONCE_LEN, NULL) != 1 ||
	    EVP_DecryptInit_ex(ctx, NULL, NULL, v->key, nonce) != 1 ||
	    (aad_len && EVP_DecryptUpdate(ctx, NULL, &n, aad, (int)aad_len) != 1) ||
	    EVP_DecryptUpdate(ctx, out, &n, ct, (int)body) != 1 ||
	    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, ISC_VAULT_TAG_LEN, tag) != 1) {
		rc = isc_err_set(err, ISC_EIO, "AES-256-GCM opening failed");
		goto done;
	}
	/* The tag check: another key, another aad or any changed byte ends here. */
	if (EVP_DecryptFinal_ex(ctx, out + n, &fin) != 1) {
		rc = isc_err_set(err, ISC_EAUTH,
		                 "sealed record does not open: wrong master key, a record moved "
		                 "to another organisation or key, or altered bytes");
		goto done;
	}
	out[n + fin] = '\0';
	*pt = out;
	*pt_len = (size_t)(n + fin);
	out = NULL;
done:
	EVP_CIPHER_CTX_free(ctx);
	isc_vault_wipe_free(out, body + 1);
	return rc;
}
