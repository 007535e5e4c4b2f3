/*
 * The keys vault and its records: AES-256-GCM round trip with a fresh nonce per
 * seal; a flipped bit anywhere (ciphertext, tag, nonce), other associated data,
 * a record moved to another organisation and a wrong master key all refuse to
 * open; the master key file's checks (mode, content, not inside the store's
 * folder); rotation re-seals every record and the old key stops working, and a
 * rotation cut short before its rename is finished on the next open; a key's
 * region coverage; the packed secret and its fingerprint.
 */
#include "keys/keys.h"
#include "keys/vault.h"
#include "store/store.h"
#include "store/store_int.h"
#include "store/store_datasets.h"
#include "store/store_keys.h"
#include "tests/unit/store_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char secret_value[] = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";

struct fixture {
	struct store_fixture tmp;
	char *key_path; /* DIR/master.key: beside the store's home, not in it */
	int64_t org_a, org_b;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	store_fixture_init(&f->tmp, "keys");
	assert_int_not_equal(asprintf(&f->key_path, "%s/master.key", f->tmp.dir), -1);
	setenv("ISC_MASTER_KEY_FILE", f->key_path, 1);
	assert_int_equal(isc_store_org_add(f->tmp.s, "acme", &f->org_a, NULL), 0);
	assert_int_equal(isc_store_org_add(f->tmp.s, "globex", &f->org_b, NULL), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	store_fixture_cleanup(&f->tmp);
	unsetenv("ISC_MASTER_KEY_FILE");
	free(f->key_path);
	free(f);
	return 0;
}

static void pack_aws(struct isc_key_secret *out)
{
	struct isc_kv kv[2] = {{"access_key_id", "AKIDEXAMPLE000000001"},
	                       {"secret_access_key", secret_value}};
	assert_int_equal(isc_key_secret_pack(kv, 2, out, NULL), 0);
}

/* Seals an AWS secret for org as key `id` and stores it (what isc_keys_add does after checking). */
static void store_key(struct fixture *f, const struct isc_vault *v, const char *id, int64_t org,
                      const char *regions, const char *state)
{
	struct isc_key_secret secret;
	struct isc_cloud_key k = {0};
	unsigned char nonce[ISC_VAULT_NONCE_LEN], *ct = NULL;
	char aad[256], fp[32], name[64];
	size_t cl;
	int n;

	pack_aws(&secret);
	n = isc_keys_aad(aad, sizeof(aad), org, "aws", id);
	assert_true(n > 0);
	assert_int_equal(
	    isc_vault_seal(v, aad, (size_t)n, secret.buf, secret.len, nonce, &ct, &cl, NULL), 0);
	isc_keys_fingerprint(&secret, fp);
	snprintf(name, sizeof(name), "n-%s", id);
	k.id = (char *)id;
	k.org_id = org;
	k.provider = "aws";
	k.name = name;
	k.account = "111122223333";
	k.principal = "arn:aws:iam::111122223333:user/byo";
	k.regions = (char *)regions;
	k.added_by = "test";
	k.fingerprint = fp;
	k.created_at_ms = 1;
	k.nonce = nonce;
	k.nonce_len = sizeof(nonce);
	k.ciphertext = ct;
	k.ciphertext_len = cl;
	assert_int_equal(isc_store_key_add(f->tmp.s, &k, NULL), 0);
	if (strcmp(state, "active") != 0)
		assert_int_equal(isc_store_key_set_state(f->tmp.s, id, state, "test", 0, NULL), 0);
	free(ct);
	isc_key_secret_cleanup(&secret);
}

static const char *secret_field(const struct isc_key_secret *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->kv[i].key, name) == 0)
			return s->kv[i].value;
	return NULL;
}

static void vault_with_byte(unsigned char b, struct isc_vault **v)
{
	unsigned char key[ISC_VAULT_KEY_LEN];
	memset(key, b, sizeof(key));
	assert_int_equal(isc_vault_from_bytes(key, NULL, v, NULL), 0);
}

static void test_round_trip_fresh_nonce(void **state)
{
	struct isc_vault *v;
	unsigned char n1[ISC_VAULT_NONCE_LEN], n2[ISC_VAULT_NONCE_LEN], *c1, *c2, *pt;
	size_t l1, l2, pl;
	const char aad[] = "org=1";
	(void)state;

	vault_with_byte(7, &v);
	assert_int_equal(
	    isc_vault_seal(v, aad, 5, secret_value, strlen(secret_value), n1, &c1, &l1, NULL), 0);
	assert_int_equal(
	    isc_vault_seal(v, aad, 5, secret_value, strlen(secret_value), n2, &c2, &l2, NULL), 0);
	assert_int_equal(l1, strlen(secret_value) + ISC_VAULT_TAG_LEN);
	assert_memory_not_equal(n1, n2, ISC_VAULT_NONCE_LEN);
	assert_memory_not_equal(c1, c2, l1);
	/* No run of the plaintext survives in the ciphertext. */
	assert_null(memmem(c1, l1, secret_value, 8));
	assert_int_equal(isc_vault_open(v, aad, 5, n1, sizeof(n1), c1, l1, &pt, &pl, NULL), 0);
	assert_int_equal(pl, strlen(secret_value));
	assert_string_equal((char *)pt, secret_value);
	isc_vault_wipe_free(pt, pl + 1);
	free(c1);
	free(c2);
	isc_vault_free(v);
}

static void test_tampered_and_wrong_aad(void **state)
{
	struct isc_vault *v, *other;
	unsigned char nonce[ISC_VAULT_NONCE_LEN], *ct, *pt = NULL;
	size_t cl, pl;
	struct isc_err err;
	const char aad[] = "isc:cloud-key:v1|org=1|provider=aws|key=key_1";
	(void)state;

	vault_with_byte(1, &v);
	vault_with_byte(2, &other);
	assert_int_equal(isc_vault_seal(v, aad, strlen(aad), secret_value, strlen(secret_value),
	                                nonce, &ct, &cl, NULL),
	                 0);
	/* Every byte of the ciphertext and tag is covered. */
	for (size_t i = 0; i < cl; i++) {
		ct[i] ^= 0x01;
		assert_int_equal(isc_vault_open(v, aad, strlen(aad), nonce, sizeof(nonce), ct, cl,
		                                &pt, &pl, &err),
		                 ISC_EAUTH);
		assert_null(pt);
		ct[i] ^= 0x01;
	}
	nonce[3] ^= 0x80;
	assert_int_equal(
	    isc_vault_open(v, aad, strlen(aad), nonce, sizeof(nonce), ct, cl, &pt, &pl, &err),
	    ISC_EAUTH);
	nonce[3] ^= 0x80;
	/* Another organisation's associated data. */
	assert_int_equal(isc_vault_open(v, "isc:cloud-key:v1|org=2|provider=aws|key=key_1",
	                                strlen(aad), nonce, sizeof(nonce), ct, cl, &pt, &pl, &err),
	                 ISC_EAUTH);
	assert_null(strstr(err.msg, secret_value));
	/* A truncated record and a short nonce. */
	assert_int_equal(
	    isc_vault_open(v, aad, strlen(aad), nonce, sizeof(nonce), ct, 10, &pt, &pl, &err),
	    ISC_EAUTH);
	assert_int_equal(isc_vault_open(v, aad, strlen(aad), nonce, 8, ct, cl, &pt, &pl, &err),
	                 ISC_EAUTH);
	/* Another master key. */
	assert_int_equal(
	    isc_vault_open(other, aad, strlen(aad), nonce, sizeof(nonce), ct, cl, &pt, &pl, &err),
	    ISC_EAUTH);
	assert_int_equal(
	    isc_vault_open(v, aad, strlen(aad), nonce, sizeof(nonce), ct, cl, &pt, &pl, &err), 0);
	isc_vault_wipe_free(pt, pl + 1);
	free(ct);
	isc_vault_free(v);
	isc_vault_free(other);
}

static void test_record_moved_to_other_org(void **state)
{
	struct fixture *f = *state;
	struct isc_vault *v;
	struct isc_cloud_key k;
	struct isc_key_secret secret;
	struct isc_err err;
	char sql[160];

	assert_int_equal(isc_keys_vault_open(f->tmp.s, f->tmp.home, 1, &v, &err), 0);
	store_key(f, v, "key_a", f->org_a, "", "active");
	assert_int_equal(isc_store_key_get(f->tmp.s, "key_a", &k, &err), 0);
	assert_int_equal(isc_keys_unseal(v, &k, &secret, &err), 0);
	assert_string_equal(secret_field(&secret, "secret_access_key"), secret_value);
	assert_string_equal(secret_field(&secret, "access_key_id"), "AKIDEXAMPLE000000001");
	isc_key_secret_cleanup(&secret);
	isc_cloud_key_cleanup(&k);
	/* Someone with write access to the database gives the row to another organisation. */
	snprintf(sql, sizeof(sql), "UPDATE cloud_keys SET org_id = %lld WHERE id = 'key_a'",
	         (long long)f->org_b);
	assert_int_equal(isc_db_exec(isc_store_db(f->tmp.s), sql), ISC_DB_OK);
	assert_int_equal(isc_store_key_get(f->tmp.s, "key_a", &k, &err), 0);
	assert_int_equal(isc_keys_unseal(v, &k, &secret, &err), ISC_EAUTH);
	assert_non_null(strstr(err.msg, "does not decrypt"));
	assert_non_null(strstr(err.msg, "globex"));
	assert_null(secret.buf);
	isc_cloud_key_cleanup(&k);
	/* Or renames it (the key id is bound too). */
	assert_int_equal(
	    isc_db_exec(isc_store_db(f->tmp.s), "UPDATE cloud_keys SET id = 'key_z', org_id = 1"),
	    ISC_DB_OK);
	assert_int_equal(isc_store_key_get(f->tmp.s, "key_z", &k, &err), 0);
	assert_int_equal(isc_keys_unseal(v, &k, &secret, &err), ISC_EAUTH);
	isc_cloud_key_cleanup(&k);
	isc_vault_free(v);
}

static void write_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
}

static void test_wrong_master_key_refused(void **state)
{
	struct fixture *f = *state;
	struct isc_vault *v;
	struct isc_err err;
	struct stat sb;

	/* No key was ever stored: nothing to open, and nothing is created without asking. */
	assert_int_equal(isc_keys_vault_open(f->tmp.s, f->tmp.home, 0, &v, &err), ISC_ENOTFOUND);
	assert_int_not_equal(stat(f->key_path, &sb), 0);
	assert_false(isc_keys_vault_in_use(f->tmp.s));
	assert_int_equal(isc_keys_vault_open(f->tmp.s, f->tmp.home, 1, &v, &err), 0);
	assert_int_equal(stat(f->key_path, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0600);
	assert_true(isc_keys_vault_in_use(f->tmp.s));
	isc_vault_free(v);
	/* Another key in the file: refused before any record is touched. */
	write_file(f->key_path,
	           "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n", 0600);
	assert_int_equal(isc_keys_vault_open(f->tmp.s, f->tmp.home, 0, &v, &err), ISC_EAUTH);
	assert_non_null(strstr(err.msg, "does not open"));
	assert_null(v);
	/* The file gone. */
	unlink(f->key_path);
	assert_int_equal(isc_keys_vault_open(f->tmp.s, f->tmp.home, 0, &v, &err), ISC_EAUTH);
	assert_non_null(strstr(err.msg, "missing"));
}

static void test_master_key_file_checks(void **state)
{
	struct fixture *f = *state;
	struct isc_vault *v;
	struct isc_err err;
	char *inside, *p;

	write_file(f->key_path, "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
	           0644);
	assert_int_equal(isc_vault_load(f->key_path, 0, &v, &err), ISC_EINVALID);
	assert_non_null(strstr(err.msg, "chmod 600"));
	write_file(f->key_path, "0011", 0600);
	assert_int_equal(isc_vault_load(f->key_path, 0, &v, &err), ISC_EINVALID);
	assert_non_null(strstr(err.msg, "64 hex"));
	write_file(f->key_path, "zz112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
	           0600);
	assert_int_equal(isc_vault_load(f->key_path, 0, &v, &err), ISC_EINVALID);
	write_file(f->key_path,
	           "00112233445566778899AABBCCDDEEFF00112233445566778899aabbccddeeff\n", 0600);
	assert_int_equal(isc_vault_load(f->key_path, 0, &v, &err), 0);
	isc_vault_free(v);
	/* Inside the store's folder: refused, so a copy of the folder never holds the key. */
	assert_int_not_equal(asprintf(&inside, "%s/master.key", f->tmp.home), -1);
	setenv("ISC_MASTER_KEY_FILE", inside, 1);
	assert_int_equal(isc_vault_master_path(f->tmp.home, &p, &err), ISC_EINVALID);
	assert_non_null(strstr(err.msg, "inside the store's folder"));
	/* The default: next to the folder, not in it. */
	unsetenv("ISC_MASTER_KEY_FILE");
	assert_int_equal(isc_vault_master_path(f->tmp.home, &p, &err), 0);
	assert_true(strlen(p) > strlen(f->tmp.home));
	assert_string_equal(p + strlen(f->tmp.home), ".master-key");
	free(p);
	free(inside);
	setenv("ISC_MASTER_KEY_FILE", f->key_path, 1);
}

/*
 * A dataset's own keys are sealed by the same code with associated data naming the
 * organisation and the dataset: they open for that dataset only, and rotation
 * re-seals them with the cloud keys.
 */
static void test_dataset_credentials(void **state)
{
	struct fixture *f = *state;
	struct isc_vault *v;
	struct isc_key_secret secret, opened;
	struct isc_dataset d = {0}, got;
	unsigned char nonce[ISC_VAULT_NONCE_LEN], *ct = NULL;
	char aad[256], other[256], *id = NULL;
	size_t cl = 0, count = 0;
	struct isc_err err;

	assert_int_equal(isc_keys_vault_open(f->tmp.s, f->tmp.home, 1, &v, &err), 0);
	store_key(f, v, "key_a", f->org_a, "", "active");
	pack_aws(&secret);
	assert_true(isc_keys_dataset_aad(aad, sizeof(aad), f->org_a, "ds_0000000000000001") > 0);
	assert_int_equal(isc_keys_seal(v, aad, &secret, nonce, &ct, &cl, &err), 0);
	assert_null(memmem(ct, cl, secret_value, strlen(secret_value)));
	d.id = "ds_0000000000000001";
	d.name = d.uri = d.bucket = d.copy_name = "set";
	d.key = "set.zip";
	d.credentials = "sealed:sha256:000000000000";
	d.cred_nonce = nonce;
	d.cred_nonce_len = sizeof(nonce);
	d.cred_ciphertext = ct;
	d.cred_ciphertext_len = cl;
	assert_int_equal(isc_store_dataset_add(f->tmp.s, "acme", &d, &id, &err), 0);
	assert_string_equal(id, "ds_0000000000000001");
	/* Another dataset's or another organisation's associated data does not open it. */
	assert_true(isc_keys_dataset_aad(other, sizeof(other), f->org_a, "ds_0000000000000002") >
	            0);
	assert_int_equal(isc_keys_open(v, other, nonce, sizeof(nonce), ct, cl, &opened, &err),
	                 ISC_EAUTH);
	assert_true(isc_keys_dataset_aad(other, sizeof(other), f->org_b, "ds_0000000000000001") >
	            0);
	assert_int_equal(isc_keys_open(v, other, nonce, sizeof(nonce), ct, cl, &opened, &err),
	                 ISC_EAUTH);
	isc_vault_free(v);

	/* Rotation counts and re-seals it; the new key opens the stored record. */
	assert_int_equal(isc_keys_rotate_master(f->tmp.s, f->tmp.home, NULL, &count, &err), 0);
	assert_int_equal(count, 2);
	assert_int_equal(isc_keys_vault_open(f->tmp.s, f->tmp.home, 0, &v, &err), 0);
	assert_int_equal(isc_store_dataset_find(f->tmp.s, NULL, id, &got, &err), 0);
	assert_memory_not_equal(got.cred_nonce, nonce, sizeof(nonce));
	assert_int_equal(isc_keys_open(v, aad, got.cred_nonce, got.cred_nonce_len,
	                               got.cred_ciphertext, got.cred_ciphertext_len, &opened, &err),
	                 0);
	assert_string_equal(secret_field(&opened, "secret_access_key"), secret_value);
	isc_key_secret_cleanup(&opened);
	isc_dataset_cleanup(&got);
	isc_vault_free(v);
	isc_key_secret_cleanup(&secret);
	free(ct);
	free(id);
}

static void test_rotation(void **state)
{
	struct fixture *f = *state;
	struct isc_vault *v, *old;
	struct isc_cloud_key k;
	struct isc_key_secret secret;
	struct isc_err err;
	char *old_copy, *next, cmd[512];
	size_t count;

	assert_int_equal(isc_keys_vault_open(f->tmp.s, f->tmp.home, 1, &v, &err), 0);
	store_key(f, v, "key_a", f->org_a, "", "active");
	store_key(f, v, "key_b", f->org_b, "us-east-1", "failing");
	isc_vault_free(v);
	assert_int_not_equal(asprintf(&old_copy, "%s/old.key", f->tmp.dir), -1);
	assert_int_not_equal(asprintf(&next, "%s.new", f->key_path), -1);
	snprintf(cmd, sizeof(cmd), "cp -p '%s' '%s'", f->key_path, old_copy);
	assert_int_equal(system(cmd), 0);

	assert_int_equal(isc_keys_rotate_master(f->tmp.s, f->tmp.home, NULL, &count, &err), 0);
	assert_int_equal(count, 2);
	assert_int_not_equal(access(next, F_OK), 0); /* renamed over the old file */
	/* The new key opens every record; the old one opens none. */
	assert_int_equal(isc_keys_vault_open(f->tmp.s, f->tmp.home, 0, &v, &err), 0);
	assert_int_equal(isc_vault_load(old_copy, 0, &old, &err), 0);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(isc_store_key_get(f->tmp.s, i ? "key_b" : "key_a", &k, &err), 0);
		assert_int_equal(isc_keys_unseal(v, &k, &secret, &err), 0);
		assert_string_equal(secret_field(&secret, "secret_access_key"), secret_value);
		isc_key_secret_cleanup(&secret);
		assert_int_equal(isc_keys_unseal(old, &k, &secret, &err), ISC_EAUTH);
		isc_cloud_key_cleanup(&k);
	}
	isc_vault_free(v);
	isc_vault_free(old);

	/*
	 * A rotation that committed but stopped before its rename: the records are under
	 * "<path>.new", the old key still at path. The next open finishes the rename.
	 */
	snprintf(cmd, sizeof(cmd), "mv '%s' '%s' && cp -p '%s' '%s'", f->key_path, next, old_copy,
	         f->key_path);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(isc_keys_vault_open(f->tmp.s, f->tmp.home, 0, &v, &err), 0);
	assert_int_not_equal(access(next, F_OK), 0);
	assert_int_equal(isc_store_key_get(f->tmp.s, "key_a", &k, &err), 0);
	assert_int_equal(isc_keys_unseal(v, &k, &secret, &err), 0);
	isc_key_secret_cleanup(&secret);
	isc_cloud_key_cleanup(&k);
	isc_vault_free(v);

	/* Rotation onto a given key file (a mounted secret). */
	write_file(old_copy, "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100",
	           0600);
	assert_int_equal(isc_keys_rotate_master(f->tmp.s, f->tmp.home, old_copy, &count, &err), 0);
	assert_int_equal(count, 2);
	assert_int_equal(isc_keys_vault_open(f->tmp.s, f->tmp.home, 0, &v, &err), ISC_EAUTH);
	setenv("ISC_MASTER_KEY_FILE", old_copy, 1);
	assert_int_equal(isc_keys_vault_open(f->tmp.s, f->tmp.home, 0, &v, &err), 0);
	isc_vault_free(v);
	setenv("ISC_MASTER_KEY_FILE", f->key_path, 1);
	free(old_copy);
	free(next);
}

static void test_key_for_region_and_state(void **state)
{
	struct fixture *f = *state;
	struct isc_vault *v;
	struct isc_cloud_key k;
	struct isc_err err;
	int found;
	int64_t live;

	assert_int_equal(isc_keys_vault_open(f->tmp.s, f->tmp.home, 1, &v, &err), 0);
	store_key(f, v, "key_east", f->org_a, "us-east-1,us-east-2", "active");
	isc_vault_free(v);
	assert_int_equal(
	    isc_store_key_for(f->tmp.s, f->org_a, "aws", "us-east-2", &k, &found, &err), 0);
	assert_true(found);
	assert_string_equal(k.id, "key_east");
	isc_cloud_key_cleanup(&k);
	/* "us-east" is not "us-east-1": names match whole. */
	assert_int_equal(isc_store_key_for(f->tmp.s, f->org_a, "aws", "us-east", &k, &found, &err),
	                 0);
	assert_false(found);
	assert_int_equal(
	    isc_store_key_for(f->tmp.s, f->org_a, "aws", "us-west-2", &k, &found, &err), 0);
	assert_false(found);
	/* Never another organisation's key. */
	assert_int_equal(
	    isc_store_key_for(f->tmp.s, f->org_b, "aws", "us-east-1", &k, &found, &err), 0);
	assert_false(found);
	assert_int_equal(
	    isc_store_key_for(f->tmp.s, f->org_a, "gcp", "us-east-1", &k, &found, &err), 0);
	assert_false(found);
	/* A failing key is still found (the broker refuses it with the reason). */
	assert_int_equal(
	    isc_store_key_set_state(f->tmp.s, "key_east", "failing", "refused", 0, &err), 0);
	assert_int_equal(
	    isc_store_key_for(f->tmp.s, f->org_a, "aws", "us-east-1", &k, &found, &err), 0);
	assert_true(found);
	assert_string_equal(k.state, "failing");
	assert_string_equal(k.state_reason, "refused");
	isc_cloud_key_cleanup(&k);
	assert_int_equal(isc_store_key_set_state(f->tmp.s, "key_east", "bogus", "", 0, &err),
	                 ISC_ECONFLICT);
	assert_int_equal(isc_store_key_live_clusters(f->tmp.s, "key_east", &live, &err), 0);
	assert_int_equal(live, 0);
	assert_int_equal(isc_store_key_delete(f->tmp.s, "key_east", &err), 0);
	assert_int_equal(isc_store_key_delete(f->tmp.s, "key_east", &err), ISC_ENOTFOUND);
}

static void test_secret_pack_and_fingerprint(void **state)
{
	struct isc_key_secret a, b;
	struct isc_kv bad[1] = {{"k", "v"}};
	char fa[32], fb[32];
	struct isc_kv other[2] = {{"access_key_id", "AKIDEXAMPLE000000001"},
	                          {"secret_access_key", "another-secret"}};
	(void)state;

	pack_aws(&a);
	assert_int_equal(a.n, 2);
	assert_int_equal(isc_key_secret_pack(other, 2, &b, NULL), 0);
	isc_keys_fingerprint(&a, fa);
	isc_keys_fingerprint(&b, fb);
	assert_int_equal(strncmp(fa, "sha256:", 7), 0);
	assert_int_equal(strlen(fa), 19);
	assert_string_not_equal(fa, fb);
	assert_null(strstr(fa, "EXAMPLE"));
	isc_key_secret_cleanup(&a);
	assert_null(a.buf);
	isc_key_secret_cleanup(&b);
	assert_int_equal(isc_key_secret_pack(bad, 0, &a, NULL), ISC_EINVALID);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trip_fresh_nonce),
	    cmocka_unit_test(test_tampered_and_wrong_aad),
	    cmocka_unit_test_setup_teardown(test_record_moved_to_other_org, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_wrong_master_key_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_master_key_file_checks, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_rotation, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_dataset_credentials, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_key_for_region_and_state, setup, teardown),
	    cmocka_unit_test(test_secret_pack_and_fingerprint),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
