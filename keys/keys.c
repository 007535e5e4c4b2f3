/* Bring-your-own cloud keys: verify, seal, store, open (see keys.h). */
#include "keys/keys.h"

#include "common/clock.h"
#include "common/names.h"
#include "providers/provider_config.h"
#include "store/store_datasets.h"
#include "store/store_sshkeys.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <jansson.h>
#include <malloc.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What the master-key check value seals; its associated data names what it is. */
static const char check_plain[] = "isc-broker master key check v1";
static const char check_aad[] = "isc:cloud-key-master-check:v1";

void isc_key_secret_cleanup(struct isc_key_secret *s)
{
	if (!s)
		return;
	isc_vault_wipe_free(s->buf, s->len);
	memset(s, 0, sizeof(*s));
}

/* Points kv at the fields of s->buf ("name\0value\0..."). */
static int secret_index(struct isc_key_secret *s, struct isc_err *err)
{
	size_t off = 0;

	s->n = 0;
	while (off < s->len) {
		const char *k = (const char *)s->buf + off, *v;
		size_t kl = strnlen(k, s->len - off);
		if (off + kl >= s->len)
			break;
		v = k + kl + 1;
		off += kl + 1;
		if (off >= s->len || strnlen(v, s->len - off) == s->len - off ||
		    s->n == ISC_KEY_SECRET_MAX_FIELDS)
			return isc_err_set(err, ISC_EAUTH, "sealed secret is malformed");
		off += strlen(v) + 1;
		s->kv[s->n].key = k;
		s->kv[s->n].value = v;
		s->n++;
	}
	if (off != s->len || s->n == 0)
		return isc_err_set(err, ISC_EAUTH, "sealed secret is malformed");
	return 0;
}

int isc_key_secret_pack(const struct isc_kv *kv, size_t n, struct isc_key_secret *out,
                        struct isc_err *err)
{
	size_t len = 0, off = 0;

	memset(out, 0, sizeof(*out));
	if (n == 0 || n > ISC_KEY_SECRET_MAX_FIELDS)
		return isc_err_set(err, ISC_EINVALID, "a key has 1 to %d fields",
		                   ISC_KEY_SECRET_MAX_FIELDS);
	for (size_t i = 0; i < n; i++)
		len += strlen(kv[i].key) + strlen(kv[i].value) + 2;
	out->buf = malloc(len);
	if (!out->buf)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	out->len = len;
	for (size_t i = 0; i < n; i++) {
		size_t kl = strlen(kv[i].key) + 1, vl = strlen(kv[i].value) + 1;
		memcpy(out->buf + off, kv[i].key, kl);
		memcpy(out->buf + off + kl, kv[i].value, vl);
		off += kl + vl;
	}
	if (secret_index(out, err)) {
		isc_key_secret_cleanup(out);
		return isc_err_set(err, ISC_EINVALID, "a key field is empty or malformed");
	}
	return 0;
}

void isc_keys_fingerprint(const struct isc_key_secret *s, char out[32])
{
	unsigned char md[SHA256_DIGEST_LENGTH];
	SHA256(s->buf, s->len, md);
	snprintf(out, 32, "sha256:%02x%02x%02x%02x%02x%02x", md[0], md[1], md[2], md[3], md[4],
	         md[5]);
	OPENSSL_cleanse(md, sizeof(md));
}

int isc_keys_aad(char *out, size_t cap, int64_t org_id, const char *provider, const char *key_id)
{
	int n = snprintf(out, cap, "isc:cloud-key:v1|org=%lld|provider=%s|key=%s",
	                 (long long)org_id, provider, key_id);
	return n > 0 && (size_t)n < cap ? n : -1;
}

int isc_keys_vault_in_use(struct isc_store *s)
{
	unsigned char *nonce, *ct;
	size_t nl, cl;
	int rc = isc_store_key_master_check_get(s, &nonce, &nl, &ct, &cl, NULL);
	free(nonce);
	free(ct);
	return rc == 0;
}

/* 0 when v opens the check value. */
static int check_value_opens(const struct isc_vault *v, const unsigned char *nonce, size_t nl,
                             const unsigned char *ct, size_t cl)
{
	unsigned char *pt = NULL;
	size_t len = 0;
	int ok = isc_vault_open(v, check_aad, strlen(check_aad), nonce, nl, ct, cl, &pt, &len,
	                        NULL) == 0 &&
	         len == strlen(check_plain) && memcmp(pt, check_plain, len) == 0;
	isc_vault_wipe_free(pt, len + 1);
	return ok ? 0 : -1;
}

static int write_check_value(struct isc_store *s, const struct isc_vault *v, struct isc_err *err)
{
	unsigned char nonce[ISC_VAULT_NONCE_LEN], *ct = NULL;
	size_t cl = 0;
	int rc = isc_vault_seal(v, check_aad, strlen(check_aad), check_plain, strlen(check_plain),
	                        nonce, &ct, &cl, err);
	if (!rc)
		rc = isc_store_key_master_check_set(s, nonce, sizeof(nonce), ct, cl, err);
	free(ct);
	return rc;
}

int isc_keys_vault_open(struct isc_store *s, const char *home, int create, struct isc_vault **out,
                        struct isc_err *err)
{
	unsigned char *nonce = NULL, *ct = NULL;
	size_t nl = 0, cl = 0;
	struct isc_vault *v = NULL, *next = NULL;
	char *path = NULL, *next_path = NULL;
	int rc;

	*out = NULL;
	if ((rc = isc_vault_master_path(home, &path, err)))
		return rc;
	rc = isc_store_key_master_check_get(s, &nonce, &nl, &ct, &cl, err);
	if (rc == ISC_ENOTFOUND) {
		/* No key was ever sealed in this store: the first one sets the master key. */
		if (!create)
			goto done;
		if ((rc = isc_vault_load(path, 1, &v, err)))
			goto done;
		rc = write_check_value(s, v, err);
		goto done;
	}
	if (rc)
		goto done;
	rc = isc_vault_load(path, 0, &v, err);
	if (rc == ISC_ENOTFOUND) {
		isc_err_set(err, ISC_EAUTH,
		            "the master key file %s is missing: the store's cloud keys cannot be "
		            "opened (set ISC_MASTER_KEY_FILE to where the key is kept)",
		            path);
		rc = ISC_EAUTH;
		goto done;
	}
	if (rc)
		goto done;
	if (check_value_opens(v, nonce, nl, ct, cl) == 0)
		goto done;
	/*
	 * A rotation that committed the re-sealed records but stopped before renaming
	 * the new key file over the old one: the new file opens the store, so finish it.
	 */
	if (asprintf(&next_path, "%s.new", path) >= 0 &&
	    isc_vault_load(next_path, 0, &next, NULL) == 0 &&
	    check_value_opens(next, nonce, nl, ct, cl) == 0 && rename(next_path, path) == 0) {
		isc_vault_free(v);
		v = next;
		next = NULL;
		goto done;
	}
	rc = isc_err_set(err, ISC_EAUTH,
	                 "the master key in %s does not open this store's cloud keys (a key of "
	                 "another store, or a changed file); refusing to use it",
	                 path);
done:
	isc_vault_free(next);
	free(next_path);
	free(nonce);
	free(ct);
	free(path);
	if (rc) {
		isc_vault_free(v);
		return rc;
	}
	*out = v;
	return 0;
}

int isc_keys_cluster_aad(char *out, size_t cap, const char *cluster_id)
{
	int n = snprintf(out, cap, "isc:cluster-ssh-key:v1|cluster=%s", cluster_id);
	return n > 0 && (size_t)n < cap ? n : -1;
}

int isc_keys_dataset_aad(char *out, size_t cap, int64_t org_id, const char *dataset_id)
{
	int n = snprintf(out, cap, "isc:dataset-credentials:v1|org=%lld|dataset=%s",
	                 (long long)org_id, dataset_id);
	return n > 0 && (size_t)n < cap ? n : -1;
}

int isc_keys_seal(const struct isc_vault *v, const char *aad, const struct isc_key_secret *secret,
                  unsigned char nonce[ISC_VAULT_NONCE_LEN], unsigned char **ct, size_t *ct_len,
                  struct isc_err *err)
{
	return isc_vault_seal(v, aad, strlen(aad), secret->buf, secret->len, nonce, ct, ct_len,
	                      err);
}

int isc_keys_open(const struct isc_vault *v, const char *aad, const unsigned char *nonce,
                  size_t nonce_len, const unsigned char *ct, size_t ct_len,
                  struct isc_key_secret *out, struct isc_err *err)
{
	int rc;

	memset(out, 0, sizeof(*out));
	rc = isc_vault_open(v, aad, strlen(aad), nonce, nonce_len, ct, ct_len, &out->buf, &out->len,
	                    err);
	if (rc)
		return rc;
	if ((rc = secret_index(out, err))) {
		isc_key_secret_cleanup(out);
		return rc;
	}
	return 0;
}

int isc_keys_unseal(const struct isc_vault *v, const struct isc_cloud_key *k,
                    struct isc_key_secret *out, struct isc_err *err)
{
	char aad[512];
	int n = isc_keys_aad(aad, sizeof(aad), k->org_id, k->provider, k->id), rc;

	memset(out, 0, sizeof(*out));
	if (n < 0)
		return isc_err_set(err, ISC_EINVALID, "cloud key %s: id too long", k->id);
	rc = isc_keys_open(v, aad, k->nonce, k->nonce_len, k->ciphertext, k->ciphertext_len, out,
	                   err);
	if (rc == ISC_EAUTH)
		return isc_err_set(
		    err, ISC_EAUTH,
		    "cloud key %s (%s, organisation %s) does not decrypt: its record "
		    "was altered or moved from another organisation or key, or the "
		    "master key is not the one it was sealed under",
		    k->id, k->provider, k->org_name ? k->org_name : "?");
	return rc;
}

static const char *first_region(const struct isc_config *cfg, const char *provider)
{
	const struct isc_provider_config *pc = cfg ? isc_config_provider(cfg, provider) : NULL;
	return pc && pc->n_regions ? pc->regions[0] : NULL;
}

int isc_keys_check(const struct isc_config *cfg, const char *provider, const char *region,
                   const struct isc_key_secret *secret, struct isc_identity *who,
                   struct isc_err *err)
{
	struct isc_provider_session *sess = NULL;
	int rc;

	memset(who, 0, sizeof(*who));
	if (!region || !region[0])
		region = first_region(cfg, provider);
	rc = isc_provider_session_open_with(cfg, provider, region, secret->kv, secret->n, &sess,
	                                    err);
	if (!rc)
		rc = sess->provider->check_credentials(sess, who, err);
	if (sess)
		sess->provider->session_free(sess);
	return rc;
}

int isc_keys_session_open(const struct isc_vault *v, const struct isc_config *cfg,
                          const struct isc_cloud_key *k, const char *region,
                          struct isc_provider_session **out, struct isc_err *err)
{
	struct isc_key_secret secret;
	int rc;

	*out = NULL;
	if ((rc = isc_keys_unseal(v, k, &secret, err)))
		return rc;
	rc =
	    isc_provider_session_open_with(cfg, k->provider, region, secret.kv, secret.n, out, err);
	isc_key_secret_cleanup(&secret);
	if (rc)
		isc_err_wrap(err, "cloud key %s", k->id);
	return rc;
}

int isc_keys_fields_check(const char *provider, const struct isc_key_secret *secret,
                          struct isc_err *err)
{
	const struct isc_provider *drv = isc_provider_find(provider);
	int rc;

	if (!drv)
		return isc_err_set(err, ISC_EINVALID, "no driver for provider '%s'", provider);
	/* A driver without the rules cannot take an organisation's key at all. */
	if (!drv->credentials_valid || !drv->credential_keys)
		return isc_err_set(err, ISC_EINVALID, "the %s driver takes no organisation's keys",
		                   provider);
	if ((rc = drv->credentials_valid(secret->kv, secret->n, err)))
		return rc;
	for (size_t i = 0; i < secret->n; i++) {
		size_t j = 0;
		char known[160] = "";
		while (drv->credential_keys[j] &&
		       strcmp(drv->credential_keys[j], secret->kv[i].key))
			j++;
		if (drv->credential_keys[j])
			continue;
		for (j = 0; drv->credential_keys[j]; j++)
			snprintf(known + strlen(known), sizeof(known) - strlen(known), "%s%s",
			         j ? ", " : "", drv->credential_keys[j]);
		/* The field's name is the caller's own text; its value is never shown. */
		return isc_err_set(err, ISC_EINVALID,
		                   "%s key: credentials.%.64s is not a field of a %s key (%s)",
		                   provider, secret->kv[i].key, provider, known);
	}
	return 0;
}

/* The first region of a comma-separated list, into buf ("" when none). */
static const char *list_first(const char *list, char *buf, size_t cap)
{
	size_t n;
	if (!list || !list[0])
		return NULL;
	n = strcspn(list, ",");
	snprintf(buf, cap, "%.*s", (int)n, list);
	return buf;
}

/* Regions: comma-separated names of letters, digits and '-'. */
static int regions_valid(const char *r)
{
	if (!r)
		return 1;
	for (const char *p = r; *p; p++)
		if (!(*p == ',' || *p == '-' || (*p >= 'a' && *p <= 'z') ||
		      (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')))
			return 0;
	return strstr(r, ",,") == NULL && r[0] != ',' && (!r[0] || r[strlen(r) - 1] != ',');
}

int isc_keys_add(struct isc_store *s, const char *home, const struct isc_config *cfg,
                 const struct isc_key_add *req, const struct isc_key_secret *secret, char **id_out,
                 struct isc_identity *who, struct isc_err *err)
{
	struct isc_org org = {0};
	struct isc_vault *v = NULL;
	struct isc_cloud_key k = {0};
	unsigned char nonce[ISC_VAULT_NONCE_LEN], *ct = NULL;
	char aad[512], fp[32], region_buf[64], name_buf[200];
	size_t cl = 0;
	int rc, n;

	*id_out = NULL;
	if (!isc_provider_find(req->provider))
		return isc_err_set(err, ISC_EINVALID, "no driver for provider '%s'", req->provider);
	/* Before any request: a key that lacks a field must never be proved (or used) by the
	 * platform's own credentials standing in for it (issue 42). */
	if ((rc = isc_keys_fields_check(req->provider, secret, err)))
		return rc;
	if (!regions_valid(req->regions))
		return isc_err_set(err, ISC_EINVALID,
		                   "--regions: '%s' is not a comma-separated list of region names",
		                   req->regions);
	/* Names are listed, paged (the cursor is in a header) and put in CSV cells: the rule
	 * of org, project and user names. The name itself is not echoed: it may hold anything. */
	if (req->name && req->name[0] && !isc_name_valid(req->name))
		return isc_err_set(err, ISC_EINVALID,
		                   "--name: not a valid key name (1 to 64 printable characters, "
		                   "no spaces, slashes, backslashes or commas)");
	if ((rc = isc_store_org_find(s, req->org, &org, err)))
		return rc;
	/* Proved before anything is written: a refused key leaves no trace. */
	rc = isc_keys_check(cfg, req->provider,
	                    list_first(req->regions, region_buf, sizeof(region_buf)), secret, who,
	                    err);
	if (rc) {
		if (rc == ISC_EAUTH)
			isc_err_wrap(err, "%s refused the key", req->provider);
		goto out;
	}
	k.id = isc_store_new_id("key_");
	if (!k.id) {
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		goto out;
	}
	if (!req->name || !req->name[0])
		snprintf(name_buf, sizeof(name_buf), "%s-%s", req->provider, who->account);
	else
		snprintf(name_buf, sizeof(name_buf), "%s", req->name);
	isc_keys_fingerprint(secret, fp);
	k.org_id = org.id;
	k.provider = (char *)req->provider;
	k.name = name_buf;
	k.account = who->account;
	k.principal = who->principal;
	k.regions = (char *)(req->regions ? req->regions : "");
	k.added_by = (char *)(req->added_by ? req->added_by : "");
	k.fingerprint = fp;
	k.created_at_ms = k.verified_at_ms = isc_wall_ms();
	n = isc_keys_aad(aad, sizeof(aad), org.id, req->provider, k.id);
	if (n < 0) {
		rc = isc_err_set(err, ISC_EINVALID, "key id too long");
		goto out;
	}
	if ((rc = isc_store_begin(s, err)))
		goto out;
	rc = isc_keys_vault_open(s, home, 1, &v, err);
	if (!rc)
		rc = isc_vault_seal(v, aad, (size_t)n, secret->buf, secret->len, nonce, &ct, &cl,
		                    err);
	if (!rc) {
		k.nonce = nonce;
		k.nonce_len = sizeof(nonce);
		k.ciphertext = ct;
		k.ciphertext_len = cl;
		rc = isc_store_key_add(s, &k, err);
	}
	if (!rc)
		rc = isc_store_commit(s, err);
	if (rc)
		isc_store_rollback(s);
	else
		*id_out = k.id, k.id = NULL;
out:
	free(k.id);
	free(ct);
	isc_vault_free(v);
	isc_org_cleanup(&org);
	return rc;
}

int isc_keys_verify(struct isc_store *s, const char *home, const struct isc_config *cfg,
                    const char *id, struct isc_identity *who, struct isc_err *err)
{
	struct isc_cloud_key k;
	struct isc_key_secret secret = {0};
	struct isc_vault *v = NULL;
	struct isc_err why;
	char region_buf[64];
	int rc;

	memset(who, 0, sizeof(*who));
	if ((rc = isc_store_key_get(s, id, &k, err)))
		return rc;
	if ((rc = isc_keys_vault_open(s, home, 0, &v, err)))
		goto out;
	if ((rc = isc_keys_unseal(v, &k, &secret, err)))
		goto out;
	rc = isc_keys_check(cfg, k.provider, list_first(k.regions, region_buf, sizeof(region_buf)),
	                    &secret, who, &why);
	if (!rc && strcmp(who->account, k.account) != 0)
		rc = isc_err_set(&why, ISC_EAUTH,
		                 "the key now proves account %s, not %s it was registered for",
		                 who->account, k.account);
	if (rc) {
		/* Failing keys take no new launches; what runs on them is still watched. */
		if (strcmp(k.state, "removing") != 0)
			isc_store_key_set_state(s, k.id, "failing", why.msg, 0, NULL);
		*err = why;
		goto out;
	}
	rc = isc_store_key_set_state(s, k.id, strcmp(k.state, "removing") ? "active" : "removing",
	                             strcmp(k.state, "removing") ? "" : k.state_reason,
	                             isc_wall_ms(), err);
out:
	isc_key_secret_cleanup(&secret);
	isc_vault_free(v);
	isc_cloud_key_cleanup(&k);
	return rc;
}

/* Re-seals the datasets' own keys (inside reseal_all's transaction). */
static int reseal_datasets(struct isc_store *s, const struct isc_vault *from,
                           const struct isc_vault *to, size_t *count, struct isc_err *err)
{
	struct isc_dataset *list = NULL;
	size_t n = 0;
	int rc = isc_store_dataset_sealed_list(s, &list, &n, err);

	*count = 0;
	for (size_t i = 0; i < n && !rc; i++) {
		struct isc_key_secret secret;
		unsigned char nonce[ISC_VAULT_NONCE_LEN], *ct = NULL;
		char aad[256];
		size_t cl = 0;

		if (isc_keys_dataset_aad(aad, sizeof(aad), list[i].org_id, list[i].id) < 0) {
			rc = isc_err_set(err, ISC_EINVALID, "dataset id too long");
			break;
		}
		rc = isc_keys_open(from, aad, list[i].cred_nonce, list[i].cred_nonce_len,
		                   list[i].cred_ciphertext, list[i].cred_ciphertext_len, &secret,
		                   err);
		if (rc == ISC_EAUTH)
			rc = isc_err_set(err, ISC_EAUTH,
			                 "the credentials of dataset %s (organisation %s) do not "
			                 "decrypt: altered, moved from another dataset, or sealed "
			                 "under another master key",
			                 list[i].id, list[i].org_name);
		if (rc)
			break;
		rc = isc_keys_seal(to, aad, &secret, nonce, &ct, &cl, err);
		isc_key_secret_cleanup(&secret);
		if (!rc)
			rc = isc_store_dataset_set_sealed(s, list[i].id, nonce, sizeof(nonce), ct,
			                                  cl, err);
		free(ct);
	}
	if (!rc)
		*count = n;
	isc_dataset_list_free(list, n);
	return rc;
}

/* Re-seals the clusters' SSH keys (inside reseal_all's transaction; issue 45). */
static int reseal_cluster_keys(struct isc_store *s, const struct isc_vault *from,
                               const struct isc_vault *to, size_t *count, struct isc_err *err)
{
	char **ids = NULL;
	size_t n = 0;
	int rc = isc_store_sshkey_ids(s, &ids, &n, err);

	*count = 0;
	for (size_t i = 0; i < n && !rc; i++) {
		unsigned char *nonce = NULL, *ct = NULL, *pt = NULL, fresh[ISC_VAULT_NONCE_LEN];
		unsigned char *ct2 = NULL;
		size_t nl = 0, cl = 0, pl = 0, cl2 = 0;
		char aad[256];
		int al = isc_keys_cluster_aad(aad, sizeof(aad), ids[i]);

		if (al < 0) {
			rc = isc_err_set(err, ISC_EINVALID, "cluster id too long");
			break;
		}
		rc = isc_store_sshkey_get(s, ids[i], &nonce, &nl, &ct, &cl, err);
		if (!rc && (rc = isc_vault_open(from, aad, (size_t)al, nonce, nl, ct, cl, &pt, &pl,
		                                err)) == ISC_EAUTH)
			isc_err_set(
			    err, ISC_EAUTH,
			    "the SSH key of cluster %s does not decrypt: altered, moved from "
			    "another cluster, or sealed under another master key",
			    ids[i]);
		if (!rc)
			rc = isc_vault_seal(to, aad, (size_t)al, pt, pl, fresh, &ct2, &cl2, err);
		if (!rc)
			rc = isc_store_sshkey_set_sealed(s, ids[i], fresh, sizeof(fresh), ct2, cl2,
			                                 err);
		if (pt)
			isc_vault_wipe_free(pt, pl + 1);
		free(nonce);
		free(ct);
		free(ct2);
	}
	if (!rc)
		*count = n;
	for (size_t i = 0; i < n; i++)
		free(ids[i]);
	free(ids);
	return rc;
}

/* Re-seals every record of s from `from` to `to`, and the check value, in one transaction. */
static int reseal_all(struct isc_store *s, const struct isc_vault *from, const struct isc_vault *to,
                      size_t *count, struct isc_err *err)
{
	struct isc_cloud_key *list = NULL;
	size_t n = 0, n_ds = 0, n_cl = 0;
	int rc;

	*count = 0;
	if ((rc = isc_store_begin(s, err)))
		return rc;
	rc = isc_store_key_list(s, 0, &list, &n, err);
	for (size_t i = 0; i < n && !rc; i++) {
		struct isc_key_secret secret;
		unsigned char nonce[ISC_VAULT_NONCE_LEN], *ct = NULL;
		char aad[512];
		size_t cl = 0;
		int al =
		    isc_keys_aad(aad, sizeof(aad), list[i].org_id, list[i].provider, list[i].id);

		if ((rc = isc_keys_unseal(from, &list[i], &secret, err)))
			break;
		rc = al < 0 ? isc_err_set(err, ISC_EINVALID, "key id too long")
		            : isc_vault_seal(to, aad, (size_t)al, secret.buf, secret.len, nonce,
		                             &ct, &cl, err);
		isc_key_secret_cleanup(&secret);
		if (!rc)
			rc = isc_store_key_set_sealed(s, list[i].id, nonce, sizeof(nonce), ct, cl,
			                              err);
		free(ct);
	}
	if (!rc)
		rc = reseal_datasets(s, from, to, &n_ds, err);
	if (!rc)
		rc = reseal_cluster_keys(s, from, to, &n_cl, err);
	if (!rc)
		rc = write_check_value(s, to, err);
	if (!rc)
		rc = isc_store_commit(s, err);
	if (rc)
		isc_store_rollback(s);
	else
		*count = n + n_ds + n_cl;
	isc_cloud_key_list_free(list, n);
	return rc;
}

int isc_keys_rotate_master(struct isc_store *s, const char *home, const char *new_key_file,
                           size_t *count, struct isc_err *err)
{
	struct isc_vault *cur = NULL, *next = NULL;
	char *next_path = NULL;
	int rc;

	*count = 0;
	if ((rc = isc_keys_vault_open(s, home, 0, &cur, err))) {
		if (rc == ISC_ENOTFOUND)
			isc_err_set(err, ISC_ENOTFOUND,
			            "no cloud key was ever stored: nothing to rotate");
		return rc;
	}
	if (new_key_file) {
		rc = isc_vault_load(new_key_file, 0, &next, err);
	} else if (asprintf(&next_path, "%s.new", isc_vault_path(cur)) < 0) {
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
	} else {
		/* The new key is on disk before any record depends on it. */
		rc = isc_vault_generate(next_path, &next, err);
	}
	if (!rc)
		rc = reseal_all(s, cur, next, count, err);
	if (!rc && next_path && rename(next_path, isc_vault_path(cur)) != 0)
		/* The records are sealed under .new now: isc_keys_vault_open finishes this. */
		rc = isc_err_set(err, ISC_EIO,
		                 "records re-sealed, but renaming %s over %s failed: %s (the next "
		                 "command that opens the keys finishes the rotation)",
		                 next_path, isc_vault_path(cur), strerror(errno));
	if (rc && next_path && *count == 0)
		unlink(next_path);
	free(next_path);
	isc_vault_free(cur);
	isc_vault_free(next);
	return rc;
}

/* Wipes what malloc gave the block (jansson does not pass sizes to its free function). */
static void wipe_free(void *p)
{
	if (p) {
		OPENSSL_cleanse(p, malloc_usable_size(p));
		free(p);
	}
}

void isc_keys_json_wipe_on_free(void)
{
	json_set_alloc_funcs(malloc, wipe_free);
}
