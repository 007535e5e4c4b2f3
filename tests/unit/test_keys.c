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
#include "store/store_clusters.h"
#include "store/store_datasets.h"
#include "store/store_experiments.h"
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

/* ---- issue 42: an organisation's key is whole, or it is refused ---- */

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = calloc(1, 65536);
	size_t n;
	assert_non_null(f);
	assert_non_null(buf);
	n = fread(buf, 1, 65535, f);
	fclose(f);
	buf[n] = '\0';
	return buf;
}

#define FAKE_SA "tests/vectors/gcp/service-account/service_account.modern-layout.FAKE.json"

/*
 * The platform's own GCP credentials, as iscd would have them: a valid key file in
 * GOOGLE_APPLICATION_CREDENTIALS whose token endpoint (like the compute endpoint)
 * is a closed loopback port, so nothing here can reach any cloud.
 */
static void platform_gcp_env(struct fixture *f, char *path, size_t cap)
{
	char *json = slurp(FAKE_SA), *at = strstr(json, "https://oauth2.googleapis.com/token");
	FILE *out;
	assert_non_null(at);
	snprintf(path, cap, "%s/platform-sa.json", f->tmp.dir);
	out = fopen(path, "w");
	assert_non_null(out);
	fprintf(out, "%.*shttp://127.0.0.1:9/token%s", (int)(at - json), json,
	        at + strlen("https://oauth2.googleapis.com/token"));
	fclose(out);
	free(json);
	setenv("GOOGLE_APPLICATION_CREDENTIALS", path, 1);
	setenv("CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE", "http://127.0.0.1:9/compute/v1/", 1);
	setenv("GOOGLE_CLOUD_PROJECT", "platform-project", 1);
}

static void platform_gcp_env_clear(void)
{
	unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
	unsetenv("CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE");
	unsetenv("GOOGLE_CLOUD_PROJECT");
}

/* isc_keys_fields_check on n fields; the message (static) or NULL when accepted. */
static const char *fields_err(const char *provider, const struct isc_kv *kv, size_t n)
{
	static struct isc_err err;
	struct isc_key_secret secret;
	int rc;
	isc_err_clear(&err);
	assert_int_equal(isc_key_secret_pack(kv, n, &secret, NULL), 0);
	rc = isc_keys_fields_check(provider, &secret, &err);
	isc_key_secret_cleanup(&secret);
	if (rc)
		assert_int_equal(rc, ISC_EINVALID);
	return rc ? err.msg : NULL;
}

/* Every field a provider's driver needs, checked before any cloud is asked; named when missing. */
static void test_fields_checked_per_provider(void **state)
{
	char *sa = slurp(FAKE_SA), *no_project, *bad_pem, *oci_pem;
	const char *m;
	(void)state;

	/* GCP: the whole service-account JSON, nothing standing in for it. */
	m = fields_err("gcp", (struct isc_kv[]){{"x", "y"}}, 1);
	assert_non_null(m);
	assert_non_null(strstr(m, "service_account_json is missing"));
	m = fields_err("gcp", (struct isc_kv[]){{"service_account_json", ""}}, 1);
	assert_non_null(m);
	assert_non_null(strstr(m, "service_account_json is empty"));
	m = fields_err("gcp", (struct isc_kv[]){{"service_account_json", "{\"type\":\"user\"}"}},
	               1);
	assert_non_null(m);
	assert_non_null(strstr(m, "\"type\""));
	no_project = strdup(sa);
	memcpy(strstr(no_project, "\"project_id\""), "\"projectXid\"", 12);
	m = fields_err("gcp", (struct isc_kv[]){{"service_account_json", no_project}}, 1);
	assert_non_null(m);
	assert_non_null(strstr(m, "\"project_id\" is missing"));
	bad_pem = strdup(sa);
	memcpy(strstr(bad_pem, "MIIE"), "XXXX", 4);
	m = fields_err("gcp", (struct isc_kv[]){{"service_account_json", bad_pem}}, 1);
	assert_non_null(m);
	assert_non_null(strstr(m, "\"private_key\" is not a readable"));
	assert_null(fields_err("gcp", (struct isc_kv[]){{"service_account_json", sa}}, 1));
	m = fields_err("gcp", (struct isc_kv[]){{"service_account_json", sa}, {"x", "y"}}, 2);
	assert_non_null(m);
	assert_non_null(strstr(m, "credentials.x is not a field of a gcp key"));

	/* AWS: id and secret; nothing that would become a header may carry CR, LF or control. */
	m = fields_err("aws", (struct isc_kv[]){{"x", "y"}}, 1);
	assert_non_null(m);
	assert_non_null(strstr(m, "access_key_id is missing"));
	m = fields_err("aws", (struct isc_kv[]){{"access_key_id", "AKIDEXAMPLE000000001"}}, 1);
	assert_non_null(m);
	assert_non_null(strstr(m, "secret_access_key is missing"));
	m = fields_err("aws",
	               (struct isc_kv[]){{"access_key_id", "AKIDEXAMPLE000000001"},
	                                 {"secret_access_key", secret_value},
	                                 {"session_token", "tok\r\nX-Injected: 1"}},
	               3);
	assert_non_null(m);
	assert_non_null(strstr(m, "session_token holds a control character"));
	assert_null(strstr(m, "X-Injected"));
	m = fields_err("aws",
	               (struct isc_kv[]){{"access_key_id", "AKIDEXAMPLE\r\nX-A: 1"},
	                                 {"secret_access_key", secret_value}},
	               2);
	assert_non_null(m);
	assert_non_null(strstr(m, "access_key_id is not an access key id"));
	m = fields_err("aws",
	               (struct isc_kv[]){{"access_key_id", "AKIDEXAMPLE000000001"},
	                                 {"secret_access_key", "a\tb"}},
	               2);
	assert_non_null(m);
	assert_non_null(strstr(m, "secret_access_key holds a control character"));
	assert_null(fields_err("aws",
	                       (struct isc_kv[]){{"access_key_id", "AKIDEXAMPLE000000001"},
	                                         {"secret_access_key", secret_value},
	                                         {"session_token", "FwoGZXIvYXdzE+/=="}},
	                       3));
	m = fields_err("aws",
	               (struct isc_kv[]){{"access_key_id", "AKIDEXAMPLE000000001"},
	                                 {"secret_access_key", secret_value},
	                                 {"region", "us-east-1"}},
	               3);
	assert_non_null(m);
	assert_non_null(strstr(m, "credentials.region is not a field of a aws key"));

	/* OCI: tenancy, user, fingerprint and a private key that loads. */
	oci_pem = slurp("tests/vectors/oci-signing/test_private_key.pem");
	{
		struct isc_kv oci[4] = {{"tenancy", "ocid1.tenancy.oc1..aaaa"},
		                        {"user", "ocid1.user.oc1..bbbb"},
		                        {"fingerprint",
		                         "20:3b:97:13:55:1c:5b:0d:d3:37:d8:50:4e:c5:3a:"
		                         "34"},
		                        {"private_key_pem", oci_pem}};
		assert_null(fields_err("oci", oci, 4));
		m = fields_err("oci", oci, 3);
		assert_non_null(m);
		assert_non_null(strstr(m, "private_key_pem is missing"));
		oci[0].value = "ocid1.tenancy.oc1..a\r\nX-A: 1";
		m = fields_err("oci", oci, 4);
		assert_non_null(m);
		assert_non_null(strstr(m, "tenancy is not an OCID"));
		oci[0].value = "ocid1.tenancy.oc1..aaaa";
		oci[3].value = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
		m = fields_err("oci", oci, 4);
		assert_non_null(m);
		assert_non_null(strstr(m, "private_key_pem"));
	}
	free(oci_pem);
	free(bad_pem);
	free(no_project);
	free(sa);
}

/*
 * The finding: an org's GCP key of {"x":"y"} was proved (and stored) with the
 * platform's own service account. Now it is refused before any request, naming the
 * field, and nothing is written (not even the master key).
 */
static void test_add_refuses_incomplete_gcp_key(void **state)
{
	struct fixture *f = *state;
	struct isc_key_add req = {.org = "acme", .provider = "gcp", .name = "fake"};
	struct isc_key_secret secret;
	struct isc_identity who;
	struct isc_cloud_key *list = NULL;
	struct isc_err err;
	char path[512], *id = NULL;
	size_t n = 9;
	struct stat sb;

	platform_gcp_env(f, path, sizeof(path));
	assert_int_equal(isc_key_secret_pack((struct isc_kv[]){{"x", "y"}}, 1, &secret, NULL), 0);
	assert_int_equal(isc_keys_add(f->tmp.s, f->tmp.home, NULL, &req, &secret, &id, &who, &err),
	                 ISC_EINVALID);
	assert_non_null(strstr(err.msg, "service_account_json is missing"));
	assert_null(id);
	isc_key_secret_cleanup(&secret);
	assert_int_equal(
	    isc_key_secret_pack((struct isc_kv[]){{"service_account_json", ""}}, 1, &secret, NULL),
	    0);
	assert_int_equal(isc_keys_add(f->tmp.s, f->tmp.home, NULL, &req, &secret, &id, &who, &err),
	                 ISC_EINVALID);
	assert_non_null(strstr(err.msg, "service_account_json is empty"));
	isc_key_secret_cleanup(&secret);
	assert_int_equal(isc_store_key_list(f->tmp.s, 0, &list, &n, &err), 0);
	assert_int_equal(n, 0);
	isc_cloud_key_list_free(list, n);
	assert_int_not_equal(stat(f->key_path, &sb), 0);
	platform_gcp_env_clear();
}

/* Seals fields for org as a `provider` key `id` and stores it, unchecked: a row made before
 * the fields were checked at registration. */
static void store_raw_key(struct fixture *f, const struct isc_vault *v, const char *id,
                          const char *provider, const struct isc_kv *kv, size_t nkv)
{
	struct isc_key_secret secret;
	struct isc_cloud_key k = {0};
	unsigned char nonce[ISC_VAULT_NONCE_LEN], *ct = NULL;
	char aad[256];
	size_t cl;

	assert_int_equal(isc_key_secret_pack(kv, nkv, &secret, NULL), 0);
	assert_true(isc_keys_aad(aad, sizeof(aad), f->org_a, provider, id) > 0);
	assert_int_equal(isc_keys_seal(v, aad, &secret, nonce, &ct, &cl, NULL), 0);
	k.id = (char *)id;
	k.org_id = f->org_a;
	k.provider = (char *)provider;
	k.name = (char *)id;
	k.nonce = nonce;
	k.nonce_len = sizeof(nonce);
	k.ciphertext = ct;
	k.ciphertext_len = cl;
	assert_int_equal(isc_store_key_add(f->tmp.s, &k, NULL), 0);
	free(ct);
	isc_key_secret_cleanup(&secret);
}

/* Use time: a stored key that lacks a field gives no session (ISC_EAUTH naming the field),
 * while the platform's own credentials for that cloud are right there. */
static void test_session_on_incomplete_key_refused(void **state)
{
	struct fixture *f = *state;
	struct isc_vault *v;
	struct isc_cloud_key k;
	struct isc_provider_session *sess = NULL;
	struct isc_err err;
	char path[512];

	platform_gcp_env(f, path, sizeof(path));
	setenv("AWS_ACCESS_KEY_ID", "AKIDPLATFORM00000001", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "platform-secret", 1);
	setenv("OCI_CLI_USER", "ocid1.user.oc1..platform", 1);
	setenv("OCI_CLI_TENANCY", "ocid1.tenancy.oc1..platform", 1);
	setenv("OCI_CLI_FINGERPRINT", "20:3b:97:13:55:1c:5b:0d:d3:37:d8:50:4e:c5:3a:34", 1);
	setenv("OCI_CLI_KEY_FILE", "tests/vectors/oci-signing/test_private_key.pem", 1);
	assert_int_equal(isc_keys_vault_open(f->tmp.s, f->tmp.home, 1, &v, &err), 0);
	store_raw_key(f, v, "key_gcpx", "gcp", (struct isc_kv[]){{"x", "y"}}, 1);
	store_raw_key(f, v, "key_gcpe", "gcp", (struct isc_kv[]){{"service_account_json", ""}}, 1);
	store_raw_key(f, v, "key_awsx", "aws", (struct isc_kv[]){{"x", "y"}}, 1);
	store_raw_key(f, v, "key_awsh", "aws",
	              (struct isc_kv[]){{"access_key_id", "AKIDEXAMPLE000000001"},
	                                {"secret_access_key", secret_value},
	                                {"session_token", "t\r\nX-Injected: 1"}},
	              3);
	store_raw_key(f, v, "key_ocix", "oci",
	              (struct isc_kv[]){{"tenancy", "ocid1.tenancy.oc1..aaaa"}}, 1);
	{
		static const char *const ids[] = {"key_gcpx", "key_gcpe", "key_awsx", "key_awsh",
		                                  "key_ocix"};
		static const char *const named[] = {
		    "service_account_json is missing", "service_account_json is empty",
		    "access_key_id is missing", "session_token holds a control character",
		    "user is missing"};
		for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
			assert_int_equal(isc_store_key_get(f->tmp.s, ids[i], &k, &err), 0);
			isc_err_clear(&err);
			assert_int_equal(
			    isc_keys_session_open(v, NULL, &k, "us-east-1", &sess, &err),
			    ISC_EAUTH);
			assert_null(sess);
			assert_non_null(strstr(err.msg, named[i]));
			assert_non_null(strstr(err.msg, ids[i]));
			isc_cloud_key_cleanup(&k);
		}
	}
	isc_vault_free(v);
	platform_gcp_env_clear();
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	unsetenv("OCI_CLI_USER");
	unsetenv("OCI_CLI_TENANCY");
	unsetenv("OCI_CLI_FINGERPRINT");
	unsetenv("OCI_CLI_KEY_FILE");
}

/* Records a cluster (of a new running experiment of acme's project) on account. */
static int add_cluster(struct fixture *f, const char *project, const char *id, const char *account,
                       struct isc_err *err)
{
	struct isc_cluster c = {0};
	struct isc_experiment e = {0};
	char exp[64], token[64];

	snprintf(exp, sizeof(exp), "exp_%s", id);
	snprintf(token, sizeof(token), "isc-%s", id);
	e.id = exp;
	e.org_id = f->org_a;
	e.project_id = (char *)project;
	e.name = exp;
	e.compute_mode = "burst";
	e.gpus = 8;
	e.spec_json = "{}";
	e.status = "running";
	assert_int_equal(isc_store_experiment_add(f->tmp.s, &e, err), 0);
	c.id = (char *)id;
	c.experiment_id = exp;
	c.shape_id = "aws:us-east-1:p4d.24xlarge";
	c.provider = "aws";
	c.account = (char *)account;
	c.region = "us-east-1";
	c.nnodes = 1;
	c.nproc = 8;
	return isc_store_cluster_create(f->tmp.s, &c, token, "us-east-1a", err);
}

/*
 * keys remove: the count of a key's open clusters and the delete are one transaction
 * (isc_store_key_delete_unused), and a cluster is recorded only on a key that is still
 * registered and active, under the same lock: a key never goes from under a cluster.
 */
static void test_remove_counts_and_deletes_at_once(void **state)
{
	struct fixture *f = *state;
	struct isc_vault *v;
	struct isc_err err;
	int64_t live = -1;
	char *p = NULL;

	assert_int_equal(isc_store_project_add(f->tmp.s, "acme", "vision", &p, &err), 0);
	assert_int_equal(isc_keys_vault_open(f->tmp.s, f->tmp.home, 1, &v, &err), 0);
	store_key(f, v, "key_busy", f->org_a, "", "active");
	store_key(f, v, "key_idle", f->org_a, "", "active");
	store_key(f, v, "key_going", f->org_a, "", "removing");
	isc_vault_free(v);
	assert_int_equal(add_cluster(f, p, "cl_busy", "key_busy", &err), 0);
	assert_int_equal(isc_store_key_delete_unused(f->tmp.s, "key_busy", &live, &err),
	                 ISC_ECONFLICT);
	assert_int_equal(live, 1);
	assert_int_equal(isc_store_key_live_clusters(f->tmp.s, "key_busy", &live, &err), 0);
	assert_int_equal(live, 1);
	{
		struct isc_cloud_key k;
		assert_int_equal(isc_store_key_get(f->tmp.s, "key_busy", &k, &err), 0);
		isc_cloud_key_cleanup(&k);
	}
	assert_int_equal(isc_store_key_delete_unused(f->tmp.s, "key_idle", &live, &err), 0);
	assert_int_equal(live, 0);
	assert_int_equal(isc_store_key_delete_unused(f->tmp.s, "key_idle", &live, &err),
	                 ISC_ENOTFOUND);
	/* No cluster on a key that is gone, or on its way out. */
	assert_int_equal(add_cluster(f, p, "cl_gone", "key_idle", &err), ISC_ECONFLICT);
	assert_non_null(strstr(err.msg, "no longer registered"));
	assert_int_equal(add_cluster(f, p, "cl_going", "key_going", &err), ISC_ECONFLICT);
	assert_non_null(strstr(err.msg, "removing"));
	assert_int_equal(add_cluster(f, p, "cl_platform", "default", &err), 0);
	free(p);
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
	    cmocka_unit_test(test_fields_checked_per_provider),
	    cmocka_unit_test_setup_teardown(test_add_refuses_incomplete_gcp_key, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_session_on_incomplete_key_refused, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_remove_counts_and_deletes_at_once, setup,
	                                    teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
