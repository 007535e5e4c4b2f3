/* Cluster key pairs (see keys.h). */
#include "launcher/keys.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A cluster id becomes a file name: [A-Za-z0-9_.-], not starting with a dot, at most 128. */
static int id_ok(const char *id)
{
	size_t n = 0;
	if (!id || !id[0] || id[0] == '.')
		return 0;
	for (const char *p = id; *p; p++, n++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '_' || *p == '.' || *p == '-'))
			return 0;
	return n <= 128;
}

char *isc_cluster_key_path(const char *home, const char *cluster_id)
{
	char *p;
	if (!home || !id_ok(cluster_id) || asprintf(&p, "%s/keys/%s", home, cluster_id) < 0)
		return NULL;
	return p;
}

/* Appends an SSH wire "string" (uint32 length + bytes). */
static void put_string(unsigned char *buf, size_t *off, const unsigned char *data, size_t len)
{
	buf[(*off)++] = (unsigned char)(len >> 24);
	buf[(*off)++] = (unsigned char)(len >> 16);
	buf[(*off)++] = (unsigned char)(len >> 8);
	buf[(*off)++] = (unsigned char)len;
	memcpy(buf + *off, data, len);
	*off += len;
}

static int openssh_public(EVP_PKEY *pkey, const char *cluster_id, char **out, struct isc_err *err)
{
	unsigned char point[133], blob[256];
	char b64[512];
	size_t point_len = 0, off = 0;

	if (!EVP_PKEY_get_octet_string_param(pkey, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, point,
	                                     sizeof(point), &point_len) ||
	    point_len != 65)
		return isc_err_set(err, ISC_EIO, "reading the cluster key's public part failed");
	put_string(blob, &off, (const unsigned char *)"ecdsa-sha2-nistp256", 19);
	put_string(blob, &off, (const unsigned char *)"nistp256", 8);
	put_string(blob, &off, point, point_len);
	EVP_EncodeBlock((unsigned char *)b64, blob, (int)off);
	if (asprintf(out, "ecdsa-sha2-nistp256 %s isc-%s", b64, cluster_id) < 0)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	return 0;
}

int isc_cluster_key_create(const char *home, const char *cluster_id, char **pubkey_out,
                           struct isc_err *err)
{
	EVP_PKEY *pkey = NULL;
	char *dir = NULL, *path = NULL;
	FILE *f = NULL;
	int fd = -1, rc = 0;

	*pubkey_out = NULL;
	if (!id_ok(cluster_id))
		return isc_err_set(err, ISC_EINVALID, "bad cluster id for a key file");
	if (asprintf(&dir, "%s/keys", home) < 0 ||
	    !(path = isc_cluster_key_path(home, cluster_id))) {
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		goto out;
	}
	(void)mkdir(home, 0700); /* usually there already (the store's folder) */
	if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
		rc = isc_err_set(err, ISC_EIO, "cannot create %s: %s", dir, strerror(errno));
		goto out;
	}
	/* An older or hand-made folder may be wider than 0700: narrow it. */
	if (chmod(dir, 0700) != 0) {
		rc = isc_err_set(err, ISC_EIO, "cannot protect %s: %s", dir, strerror(errno));
		goto out;
	}
	pkey = EVP_EC_gen("P-256");
	if (!pkey) {
		rc = isc_err_set(err, ISC_EIO, "generating the cluster key failed");
		goto out;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = isc_err_set(err, errno == EEXIST ? ISC_ECONFLICT : ISC_EIO,
		                 "cannot create the key of %s: %s", cluster_id, strerror(errno));
		goto out;
	}
	f = fdopen(fd, "w");
	if (!f) {
		close(fd);
		rc = isc_err_set(err, ISC_EIO, "cannot write the key of %s", cluster_id);
		goto out;
	}
	/* Traditional PEM: what libssh2's OpenSSL backend reads without a passphrase. */
	{
		BIO *bio = BIO_new_fp(f, BIO_NOCLOSE);
		int ok = bio &&
		         PEM_write_bio_PrivateKey_traditional(bio, pkey, NULL, NULL, 0, NULL, NULL);
		BIO_free(bio);
		if (!ok) {
			rc = isc_err_set(err, ISC_EIO, "cannot write the key of %s", cluster_id);
			goto out;
		}
	}
	if (fclose(f) != 0) {
		f = NULL;
		rc = isc_err_set(err, ISC_EIO, "cannot write the key of %s", cluster_id);
		goto out;
	}
	f = NULL;
	rc = openssh_public(pkey, cluster_id, pubkey_out, err);
out:
	if (f)
		fclose(f);
	if (rc && path && fd >= 0)
		unlink(path);
	EVP_PKEY_free(pkey);
	free(dir);
	free(path);
	return rc;
}

int isc_cluster_key_public(const char *home, const char *cluster_id, char **pubkey_out,
                           struct isc_err *err)
{
	char *path = isc_cluster_key_path(home, cluster_id);
	EVP_PKEY *pkey = NULL;
	FILE *f;
	int rc;

	*pubkey_out = NULL;
	if (!path)
		return isc_err_set(err, id_ok(cluster_id) ? ISC_ENOMEM : ISC_EINVALID,
		                   "no key path for cluster %s",
		                   id_ok(cluster_id) ? cluster_id : "?");
	f = fopen(path, "r");
	free(path);
	if (!f)
		return isc_err_set(err, ISC_ENOTFOUND, "cluster %s has no key", cluster_id);
	pkey = PEM_read_PrivateKey(f, NULL, NULL, NULL);
	fclose(f);
	if (!pkey)
		return isc_err_set(err, ISC_EIO, "the key of cluster %s is unreadable", cluster_id);
	rc = openssh_public(pkey, cluster_id, pubkey_out, err);
	EVP_PKEY_free(pkey);
	return rc;
}

void isc_cluster_key_delete(const char *home, const char *cluster_id)
{
	char *path = isc_cluster_key_path(home, cluster_id);
	if (path)
		unlink(path);
	free(path);
}
