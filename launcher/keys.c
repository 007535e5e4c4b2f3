/* Cluster key pairs (see keys.h). */
#include "launcher/keys.h"

#include "keys/keys.h"
#include "keys/vault.h"
#include "store/store_sshkeys.h"

#include <dirent.h>
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

/* ---- sealed in the store (issue 45) ---- */

/* A new P-256 pair and its private key as traditional PEM in memory (*pem: wipe-free). */
static int generate_pem(EVP_PKEY **pkey_out, char **pem, size_t *len, struct isc_err *err)
{
	EVP_PKEY *pkey = EVP_EC_gen("P-256");
	BIO *bio = NULL;
	char *data = NULL;
	long n;
	int rc = 0;

	*pkey_out = NULL;
	*pem = NULL;
	*len = 0;
	if (!pkey)
		return isc_err_set(err, ISC_EIO, "generating the cluster key failed");
	bio = BIO_new(BIO_s_secmem());
	if (!bio) {
		EVP_PKEY_free(pkey);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	/* Traditional PEM: what libssh2's OpenSSL backend reads without a passphrase. */
	if (!PEM_write_bio_PrivateKey_traditional(bio, pkey, NULL, NULL, 0, NULL, NULL) ||
	    (n = BIO_get_mem_data(bio, &data)) <= 0) {
		rc = isc_err_set(err, ISC_EIO, "encoding the cluster key failed");
	} else if (!(*pem = malloc((size_t)n + 1))) {
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
	} else {
		memcpy(*pem, data, (size_t)n);
		(*pem)[n] = '\0';
		*len = (size_t)n;
	}
	BIO_free(bio); /* a secure-heap BIO: its buffer is cleansed */
	if (rc) {
		EVP_PKEY_free(pkey);
		return rc;
	}
	*pkey_out = pkey;
	return 0;
}

static int cluster_aad(const char *cluster_id, char *aad, size_t cap, size_t *len,
                       struct isc_err *err)
{
	int n;
	if (!id_ok(cluster_id))
		return isc_err_set(err, ISC_EINVALID, "bad cluster id for a key");
	n = isc_keys_cluster_aad(aad, cap, cluster_id);
	if (n < 0)
		return isc_err_set(err, ISC_EINVALID, "cluster id too long for a key");
	*len = (size_t)n;
	return 0;
}

/* Seals pem for cluster_id and adds the row. */
static int store_sealed(struct isc_store *s, const char *home, const char *cluster_id,
                        const char *pem, size_t len, struct isc_err *err)
{
	struct isc_vault *v = NULL;
	unsigned char nonce[ISC_VAULT_NONCE_LEN], *ct = NULL;
	size_t cl = 0, al;
	char aad[256];
	int rc = cluster_aad(cluster_id, aad, sizeof(aad), &al, err);

	if (!rc)
		rc = isc_keys_vault_open(s, home, 1, &v, err);
	if (!rc)
		rc = isc_vault_seal(v, aad, al, pem, len, nonce, &ct, &cl, err);
	if (!rc)
		rc = isc_store_sshkey_add(s, cluster_id, nonce, sizeof(nonce), ct, cl, err);
	free(ct);
	isc_vault_free(v);
	return rc;
}

int isc_cluster_key_create_sealed(struct isc_store *s, const char *home, const char *cluster_id,
                                  char **pubkey_out, struct isc_err *err)
{
	EVP_PKEY *pkey = NULL;
	char *pem = NULL;
	size_t len = 0;
	int rc;

	*pubkey_out = NULL;
	if (!id_ok(cluster_id))
		return isc_err_set(err, ISC_EINVALID, "bad cluster id for a key");
	rc = generate_pem(&pkey, &pem, &len, err);
	if (!rc)
		rc = store_sealed(s, home, cluster_id, pem, len, err);
	if (!rc)
		rc = openssh_public(pkey, cluster_id, pubkey_out, err);
	if (pem)
		isc_vault_wipe_free(pem, len + 1);
	EVP_PKEY_free(pkey);
	return rc;
}

int isc_cluster_key_load_sealed(struct isc_store *s, const char *home, const char *cluster_id,
                                char **pem, size_t *len, struct isc_err *err)
{
	struct isc_vault *v = NULL;
	unsigned char *nonce = NULL, *ct = NULL, *pt = NULL;
	size_t nl = 0, cl = 0, pl = 0, al;
	char aad[256];
	int rc = cluster_aad(cluster_id, aad, sizeof(aad), &al, err);

	*pem = NULL;
	*len = 0;
	if (!rc)
		rc = isc_store_sshkey_get(s, cluster_id, &nonce, &nl, &ct, &cl, err);
	if (!rc)
		rc = isc_keys_vault_open(s, home, 0, &v, err);
	if (rc == ISC_ENOTFOUND && nonce)
		rc = isc_err_set(err, ISC_EAUTH,
		                 "the key of cluster %s is sealed, but the store has no master key "
		                 "check value",
		                 cluster_id);
	if (!rc && (rc = isc_vault_open(v, aad, al, nonce, nl, ct, cl, &pt, &pl, err)) == ISC_EAUTH)
		isc_err_set(err, ISC_EAUTH,
		            "the key of cluster %s does not open: another master key, or a row "
		            "altered or moved from another cluster",
		            cluster_id);
	free(nonce);
	free(ct);
	isc_vault_free(v);
	if (rc)
		return rc;
	*pem = (char *)pt;
	*len = pl;
	return 0;
}

int isc_cluster_key_public_sealed(struct isc_store *s, const char *home, const char *cluster_id,
                                  char **pubkey_out, struct isc_err *err)
{
	EVP_PKEY *pkey = NULL;
	BIO *bio;
	char *pem = NULL;
	size_t len = 0;
	int rc;

	*pubkey_out = NULL;
	if ((rc = isc_cluster_key_load_sealed(s, home, cluster_id, &pem, &len, err)))
		return rc;
	bio = BIO_new_mem_buf(pem, (int)len);
	if (bio)
		pkey = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
	BIO_free(bio);
	isc_vault_wipe_free(pem, len + 1);
	if (!pkey)
		return isc_err_set(err, ISC_EIO, "the key of cluster %s is unreadable", cluster_id);
	rc = openssh_public(pkey, cluster_id, pubkey_out, err);
	EVP_PKEY_free(pkey);
	return rc;
}

int isc_cluster_key_copy_sealed(struct isc_store *s, const char *home, const char *from,
                                const char *to, struct isc_err *err)
{
	char *pem = NULL;
	size_t len = 0;
	int rc = isc_cluster_key_load_sealed(s, home, from, &pem, &len, err);

	if (!rc) {
		rc = store_sealed(s, home, to, pem, len, err);
		if (rc == ISC_ECONFLICT)
			rc = 0; /* a copy made before a crash: the same key */
		isc_vault_wipe_free(pem, len + 1);
	}
	return rc;
}

int isc_cluster_key_delete_sealed(struct isc_store *s, const char *home, const char *cluster_id,
                                  struct isc_err *err)
{
	if (!id_ok(cluster_id))
		return isc_err_set(err, ISC_EINVALID, "bad cluster id for a key");
	isc_cluster_key_delete(home, cluster_id);
	return isc_store_sshkey_delete(s, cluster_id, err);
}

/* Reads a key file of at most 16 KiB into a wipe-free buffer. */
static int read_key_file(const char *path, char **out, size_t *len)
{
	char *buf = NULL;
	size_t cap = 16384, got = 0;
	ssize_t r;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0 || !(buf = malloc(cap + 1))) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	while (got < cap && (r = read(fd, buf + got, cap - got)) > 0)
		got += (size_t)r;
	close(fd);
	if (got == 0 || got == cap) {
		isc_vault_wipe_free(buf, cap + 1);
		return -1;
	}
	buf[got] = '\0';
	*out = buf;
	*len = got;
	return 0;
}

int isc_cluster_key_import_files(struct isc_store *s, const char *home, size_t *moved,
                                 struct isc_err *err)
{
	char *dir = NULL;
	DIR *dh;
	struct dirent *d;
	int rc = 0;

	*moved = 0;
	if (asprintf(&dir, "%s/keys", home) < 0)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	dh = opendir(dir);
	if (!dh) {
		free(dir);
		return 0; /* no folder: nothing of before to move */
	}
	while (!rc && (d = readdir(dh)) != NULL) {
		char *path = NULL, *pem = NULL;
		size_t len = 0;

		if (strncmp(d->d_name, "cl_", 3) != 0 || !id_ok(d->d_name) ||
		    !(path = isc_cluster_key_path(home, d->d_name)))
			continue;
		if (read_key_file(path, &pem, &len) == 0) {
			rc = store_sealed(s, home, d->d_name, pem, len, err);
			if (!rc)
				(*moved)++;
			if (rc == ISC_ECONFLICT)
				rc = 0; /* moved before, the file's removal did not happen */
			isc_vault_wipe_free(pem, len + 1);
			if (!rc)
				unlink(path);
		}
		free(path);
	}
	closedir(dh);
	free(dir);
	return rc;
}
