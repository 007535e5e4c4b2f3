/*
 * Datasets (datasets.h): names and sizes, registration against S3 and the burst
 * nodes' fetch plan. The cache is datasets_cache.c, the old layout's move
 * datasets_layout.c (datasets_int.h).
 */
#include "datasets/datasets_int.h"

#include "artifacts/unpack.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/log.h"
#include "datasets/download.h"
#include "providers/aws/aws_creds.h"
#include "providers/aws/s3.h"
#include "shapes/shape.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- names and sizes ---- */

static const char *const archive_exts[] = {".tar.gz2", ".tar.bz2", ".tar.gz", ".tar.xz", ".tbz2",
                                           ".tbz",     ".tgz",     ".txz",    ".tar",    ".zip"};

const char *isc_dataset_archive_ext(const char *key)
{
	size_t n = key ? strlen(key) : 0;
	for (size_t i = 0; i < sizeof(archive_exts) / sizeof(archive_exts[0]); i++) {
		size_t e = strlen(archive_exts[i]);
		if (n > e && strcmp(key + n - e, archive_exts[i]) == 0)
			return archive_exts[i];
	}
	return NULL;
}

int isc_dataset_name_check(const char *name, struct isc_err *err)
{
	size_t n = name ? strlen(name) : 0;
	if (n == 0 || n > ISC_DATASET_NAME_MAX || name[0] == '.' || name[0] == '-')
		goto bad;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)name[i]) && !strchr("._-", name[i]))
			goto bad;
	return 0;
bad:
	return isc_err_set(err, ISC_EINVALID,
	                   "dataset name '%.80s' is not 1..%d of letters, digits, '.', '_', '-' "
	                   "(not starting with '.' or '-')",
	                   name ? name : "", ISC_DATASET_NAME_MAX);
}

int isc_dataset_default_name(const char *bucket, const char *key, char *out, size_t cap,
                             struct isc_err *err)
{
	size_t n = strlen(key);
	const char *ext, *base;
	while (n > 0 && key[n - 1] == '/')
		n--;
	if (n == 0) {
		snprintf(out, cap, "%s", bucket);
	} else {
		base = key + n;
		while (base > key && base[-1] != '/')
			base--;
		snprintf(out, cap, "%.*s", (int)(key + n - base), base);
		ext = isc_dataset_archive_ext(out);
		if (ext && strlen(out) > strlen(ext))
			out[strlen(out) - strlen(ext)] = '\0';
	}
	return isc_dataset_name_check(out, err);
}

static void put_safe(struct isc_buf *b, const char *s)
{
	for (; *s; s++)
		isc_buf_putc(b, isalnum((unsigned char)*s) || strchr("._-", *s) ? *s : '_');
}

char *isc_dataset_copy_name(const char *name, const char *id)
{
	struct isc_buf b;
	isc_buf_init(&b, 0);
	put_safe(&b, name);
	isc_buf_putc(&b, '-');
	put_safe(&b, id);
	return isc_buf_detach(&b);
}

int isc_dataset_copy_split(const char *copy_name, int64_t org_id, const char **leaf)
{
	char want[32];
	size_t n = (size_t)snprintf(want, sizeof(want), "@%" PRId64 "/", org_id);
	const char *l;

	if (!copy_name || strncmp(copy_name, want, n) != 0)
		return -1;
	l = copy_name + n;
	if (!l[0] || l[0] == '.' || l[0] == '-')
		return -1;
	for (const char *p = l; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("._-", *p))
			return -1;
	if (leaf)
		*leaf = l;
	return 0;
}

/*
 * The paths of d's copy under root: the tree, its manifest and its download
 * folder, all inside the organisation's own folder root/@ORGID. A copy name
 * that does not name d's organisation is refused, so no record can point a
 * dataset at another organisation's copy. Any out may be NULL.
 */
int dataset_copy_paths(const char *root, const struct isc_dataset *d, char **tree, char **manifest,
                       char **partial, struct isc_err *err)
{
	const char *leaf;
	char *t = NULL, *m = NULL, *p = NULL;

	if (isc_dataset_copy_split(d->copy_name, d->org_id, &leaf))
		return isc_err_set(
		    err, ISC_EINVALID,
		    "dataset %s: its copy '%.80s' is not in its organisation's folder", d->name,
		    d->copy_name);
	if (asprintf(&t, "%s/%s", root, d->copy_name) < 0)
		t = NULL;
	if (asprintf(&m, "%s/@%" PRId64 "/.manifests/%s.json", root, d->org_id, leaf) < 0)
		m = NULL;
	if (asprintf(&p, "%s/@%" PRId64 "/.partial/%s", root, d->org_id, leaf) < 0)
		p = NULL;
	if (!t || !m || !p) {
		free(t);
		free(m);
		free(p);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	if (tree)
		*tree = t;
	else
		free(t);
	if (manifest)
		*manifest = m;
	else
		free(m);
	if (partial)
		*partial = p;
	else
		free(p);
	return 0;
}

char *isc_dataset_root(const char *home)
{
	char *out = NULL;
	return asprintf(&out, "%s/datasets", home) < 0 ? NULL : out;
}

/* ---- S3 access ---- */

/*
 * An S3 client for a dataset's credentials (its own keys `own`, else the
 * reference: "" the broker's, "env", "profile:NAME"), with [providers.aws]'s
 * settings: endpoint_s3 / endpoint (and AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL),
 * s3_region, s3_addressing (auto, path, virtual), allow_insecure_endpoint.
 */
static int client_for(const struct isc_config *cfg, const char *credentials,
                      const struct isc_key_secret *own, struct isc_s3_client **out,
                      struct isc_err *err)
{
	const struct isc_provider_config *pc = cfg ? isc_config_provider(cfg, "aws") : NULL;
	size_t n = pc ? pc->n_settings : 0, k = 0;
	struct isc_kv *items = calloc(n + 1, sizeof(*items));
	struct isc_provider_settings settings;
	struct isc_aws_creds creds;
	struct isc_s3_config sc;
	const char *v, *use_env = credentials && strcmp(credentials, "env") == 0 ? "1" : NULL;
	const char *profile =
	    credentials && strncmp(credentials, "profile:", 8) == 0 ? credentials + 8 : NULL;
	char region[64], *endpoint = NULL;
	int rc;

	*out = NULL;
	memset(&creds, 0, sizeof(creds));
	if (!items)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		/* The dataset's own choice of credentials beats the broker's profile. */
		if ((use_env || profile) && strcmp(pc->settings[i].key, "profile") == 0)
			continue;
		items[k++] = (struct isc_kv){pc->settings[i].key, pc->settings[i].value};
	}
	if (profile)
		items[k++] = (struct isc_kv){"profile", profile};
	/* Own keys are explicit credentials: they beat every other source. */
	settings = (struct isc_provider_settings){items, k, own ? own->kv : NULL, own ? own->n : 0};
	v = isc_provider_setting(&settings, "s3_region");
	if (!v && pc && pc->n_regions)
		v = pc->regions[0];
	if (isc_aws_region_resolve(v, region, sizeof(region), NULL))
		snprintf(region, sizeof(region), "us-east-1");
	rc = isc_aws_creds_resolve(&settings, &creds, err);
	if (rc) {
		isc_err_wrap(err, "dataset credentials");
		goto out;
	}
	endpoint = isc_aws_endpoint_resolve(&settings, "s3", region);
	if (!endpoint) {
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		goto out;
	}
	memset(&sc, 0, sizeof(sc));
	sc.endpoint = endpoint;
	sc.region = region;
	v = isc_provider_setting(&settings, "s3_addressing");
	sc.addressing = v && strcmp(v, "path") == 0      ? ISC_S3_ADDRESSING_PATH
	                : v && strcmp(v, "virtual") == 0 ? ISC_S3_ADDRESSING_VIRTUAL
	                                                 : ISC_S3_ADDRESSING_AUTO;
	if (v && strcmp(v, "path") && strcmp(v, "virtual") && strcmp(v, "auto")) {
		rc = isc_err_set(err, ISC_EINVALID,
		                 "[providers.aws] s3_addressing '%s' is not auto, path or virtual",
		                 v);
		goto out;
	}
	v = isc_provider_setting(&settings, "allow_insecure_endpoint");
	sc.allow_insecure = v && strcmp(v, "true") == 0;
	sc.access_key_id = creds.access_key_id;
	sc.secret_access_key = creds.secret_access_key;
	sc.session_token = creds.session_token;
	/* No transport given: the client keeps one connection alive for all its requests. */
	rc = isc_s3_client_new(&sc, NULL, isc_clock_system(), out, err);
out:
	isc_aws_creds_cleanup(&creds);
	free(endpoint);
	free(items);
	return rc;
}

/*
 * The S3 client of a recorded dataset: its own keys are opened from their sealed
 * record for the moment the client is made (the client keeps its own copy, wiped
 * when freed) and wiped before this returns.
 */
int dataset_client(struct isc_store *s, const char *home, const struct isc_config *cfg,
                   const struct isc_dataset *d, struct isc_s3_client **out, struct isc_err *err)
{
	struct isc_key_secret own = {0};
	struct isc_vault *v = NULL;
	char aad[256];
	int rc;

	*out = NULL;
	if (!d->cred_ciphertext)
		return client_for(cfg, d->credentials, NULL, out, err);
	if (isc_keys_dataset_aad(aad, sizeof(aad), d->org_id, d->id) < 0)
		return isc_err_set(err, ISC_EINVALID, "dataset id too long");
	if ((rc = isc_keys_vault_open(s, home, 0, &v, err)))
		return isc_err_wrap(err, "the keys of dataset %s", d->name);
	rc = isc_keys_open(v, aad, d->cred_nonce, d->cred_nonce_len, d->cred_ciphertext,
	                   d->cred_ciphertext_len, &own, err);
	isc_vault_free(v);
	if (rc == ISC_EAUTH)
		return isc_err_set(err, ISC_EAUTH,
		                   "the keys of dataset %s do not decrypt: its record was altered "
		                   "or moved from another organisation or dataset, or the master "
		                   "key is not the one they were sealed under",
		                   d->name);
	if (rc)
		return rc;
	rc = client_for(cfg, d->credentials, &own, out, err);
	isc_key_secret_cleanup(&own);
	return rc;
}

/* The prefix a folder URI lists: the key with one trailing slash ("" for a whole bucket). */
static char *folder_prefix(const char *key)
{
	size_t n = strlen(key);
	char *out = NULL;
	while (n > 0 && key[n - 1] == '/')
		n--;
	if (n == 0)
		return strdup("");
	return asprintf(&out, "%.*s/", (int)n, key) < 0 ? NULL : out;
}

/* Every object under prefix (directory markers left out), all pages. */
int dataset_list_all(struct isc_s3_client *c, const char *bucket, const char *prefix,
                     struct isc_s3_listing *all, struct isc_err *err)
{
	char *token = NULL;
	int rc = 0;
	memset(all, 0, sizeof(*all));
	do {
		struct isc_s3_listing page;
		struct isc_s3_object *grown;
		rc = isc_s3_list_page(c, bucket, prefix, token, 1000, &page, err);
		free(token);
		token = NULL;
		if (rc)
			break;
		if (all->n + page.n > ISC_DATASET_MAX_FOLDER_KEYS) {
			isc_s3_listing_cleanup(&page);
			rc = isc_err_set(
			    err, ISC_EINVALID,
			    "s3://%s/%s holds more than %d objects (the cap of a dataset "
			    "folder)",
			    bucket, prefix, ISC_DATASET_MAX_FOLDER_KEYS);
			break;
		}
		grown = realloc(all->objects, (all->n + page.n + 1) * sizeof(*grown));
		if (!grown) {
			isc_s3_listing_cleanup(&page);
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
			break;
		}
		all->objects = grown;
		for (size_t i = 0; i < page.n; i++) {
			size_t kl = strlen(page.objects[i].key);
			if (kl && page.objects[i].key[kl - 1] == '/')
				isc_s3_object_cleanup(&page.objects[i]);
			else
				all->objects[all->n++] = page.objects[i];
		}
		free(page.objects);
		token = page.next_token;
	} while (token);
	free(token);
	if (rc)
		isc_s3_listing_cleanup(all);
	return rc;
}

/* ---- registration ---- */

/* A dataset's own keys: AWS access_key_id and secret_access_key, maybe session_token. */
static int own_keys_check(const struct isc_key_secret *own, struct isc_err *err)
{
	int id = 0, secret = 0;
	for (size_t i = 0; i < own->n; i++) {
		const char *k = own->kv[i].key;
		if (!strcmp(k, "access_key_id"))
			id = own->kv[i].value[0] != '\0';
		else if (!strcmp(k, "secret_access_key"))
			secret = own->kv[i].value[0] != '\0';
		else if (strcmp(k, "session_token") != 0)
			/* The name of a field is not a secret; its value never appears. */
			return isc_err_set(err, ISC_EINVALID,
			                   "credentials: unknown field '%.40s' (access_key_id, "
			                   "secret_access_key, session_token)",
			                   k);
	}
	if (!id || !secret)
		return isc_err_set(err, ISC_EINVALID,
		                   "credentials: a dataset's own AWS keys need access_key_id and "
		                   "secret_access_key");
	/* The rules of an organisation's AWS key: the key id and token become headers. */
	if (isc_aws_credentials_valid(own->kv, own->n, err))
		return isc_err_wrap(err, "credentials");
	return 0;
}

/*
 * Records d, sealing its own keys first when it has them: the id is chosen here
 * because the sealed record is bound to it (and to the organisation). One
 * transaction, so a failure leaves neither the row nor a first master-key check.
 */
static int record(struct isc_store *s, const char *home, const char *org_name,
                  struct isc_dataset *d, const struct isc_key_secret *own, char **id_out,
                  struct isc_err *err)
{
	struct isc_org org = {0};
	struct isc_vault *v = NULL;
	unsigned char nonce[ISC_VAULT_NONCE_LEN], *ct = NULL;
	char aad[256], fp[32], *cred = NULL;
	size_t cl = 0;
	int rc;

	if (!own)
		return isc_store_dataset_add(s, org_name, d, id_out, err);
	if ((rc = isc_store_org_find(s, org_name, &org, err)))
		return rc;
	isc_keys_fingerprint(own, fp);
	if (asprintf(&cred, "sealed:%s", fp) < 0) {
		cred = NULL;
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		goto out;
	}
	if (isc_keys_dataset_aad(aad, sizeof(aad), org.id, d->id) < 0) {
		rc = isc_err_set(err, ISC_EINVALID, "dataset id too long");
		goto out;
	}
	if ((rc = isc_store_begin(s, err)))
		goto out;
	rc = isc_keys_vault_open(s, home, 1, &v, err);
	if (!rc)
		rc = isc_keys_seal(v, aad, own, nonce, &ct, &cl, err);
	if (!rc) {
		d->credentials = cred;
		d->cred_nonce = nonce;
		d->cred_nonce_len = sizeof(nonce);
		d->cred_ciphertext = ct;
		d->cred_ciphertext_len = cl;
		rc = isc_store_dataset_add(s, org_name, d, id_out, err);
		d->cred_nonce = d->cred_ciphertext = NULL;
		d->credentials = NULL;
	}
	if (!rc)
		rc = isc_store_commit(s, err);
	if (rc) {
		isc_store_rollback(s);
		free(*id_out);
		*id_out = NULL;
	}
out:
	isc_vault_free(v);
	isc_org_cleanup(&org);
	free(ct);
	free(cred);
	return rc;
}

int isc_dataset_register(struct isc_store *s, const char *home, const struct isc_config *cfg,
                         const struct isc_dataset_request *req, struct isc_dataset *out,
                         struct isc_err *err)
{
	struct isc_s3_client *c = NULL;
	struct isc_s3_object obj;
	struct isc_s3_listing listing;
	struct isc_dataset d = {0};
	char *bucket = NULL, *key = NULL, *prefix = NULL, *id = NULL, *copy = NULL;
	char name[ISC_DATASET_NAME_MAX + 32];
	uint64_t volume = ISC_DATASET_DEFAULT_VOLUME, size = 0;
	int rc, is_folder;

	memset(out, 0, sizeof(*out));
	memset(&obj, 0, sizeof(obj));
	memset(&listing, 0, sizeof(listing));
	if ((rc = isc_s3_uri_parse(req->uri, &bucket, &key, err)))
		return rc;
	if (req->secret && (rc = own_keys_check(req->secret, err)))
		goto out;
	if (req->name)
		rc = isc_dataset_name_check(req->name, err);
	else
		rc = isc_dataset_default_name(bucket, key, name, sizeof(name), err);
	if (rc)
		goto out;
	if (req->volume_size) {
		int64_t v = 0;
		/* The shape catalog's size syntax: K M G T and Ki Mi Gi Ti (docs/datasets.md). */
		if (isc_size_parse(req->volume_size, &v) || v <= 0) {
			rc = isc_err_set(
			    err, ISC_EINVALID,
			    "--volume-size '%.40s' is not a size such as 5Gi or 10G (K, M, "
			    "G, T, Ki, Mi, Gi, Ti)",
			    req->volume_size);
			goto out;
		}
		volume = (uint64_t)v;
	}
	if ((rc = client_for(cfg, "", req->secret, &c, err)))
		goto out;
	is_folder = key[0] == '\0' || key[strlen(key) - 1] == '/';
	if (!is_folder) {
		rc = isc_s3_head(c, bucket, key, req->version_id, 0, &obj, err);
		if (rc == ISC_ENOTFOUND && req->version_id && req->version_id[0]) {
			rc = isc_err_set(err, ISC_ECONFLICT,
			                 "%s has no version '%s' (VersionId mismatch): %s",
			                 req->uri, req->version_id, err ? err->msg : "");
			goto out;
		}
		if (rc == ISC_ENOTFOUND) {
			/* s3://b/images (no slash) may name a folder. */
			struct isc_err ferr;
			char *p = folder_prefix(key);
			struct isc_s3_listing one;
			int frc =
			    p ? isc_s3_list_page(c, bucket, p, NULL, 1, &one, &ferr) : ISC_ENOMEM;
			free(p);
			if (frc == 0 && one.n > 0)
				is_folder = 1;
			if (frc == 0)
				isc_s3_listing_cleanup(&one);
			if (!is_folder)
				goto out;
			rc = 0;
		} else if (rc) {
			goto out;
		}
	}
	if (is_folder) {
		prefix = folder_prefix(key);
		if (!prefix) {
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
			goto out;
		}
		if ((rc = dataset_list_all(c, bucket, prefix, &listing, err)))
			goto out;
		if (listing.n == 0) {
			rc = isc_err_set(err, ISC_ENOTFOUND, "%s: no objects under s3://%s/%s",
			                 req->uri, bucket, prefix);
			goto out;
		}
		for (size_t i = 0; i < listing.n; i++)
			size += listing.objects[i].size;
	} else {
		size = obj.size;
		if (req->etag && req->etag[0]) {
			char want[80];
			snprintf(want, sizeof(want), "%s", req->etag);
			if (want[0] == '"' && strlen(want) > 1 && want[strlen(want) - 1] == '"') {
				memmove(want, want + 1, strlen(want));
				want[strlen(want) - 1] = '\0';
			}
			if (strcmp(want, obj.etag) != 0) {
				rc = isc_err_set(err, ISC_ECONFLICT,
				                 "%s: ETag mismatch: given %s, S3 has %s", req->uri,
				                 want, obj.etag);
				goto out;
			}
		}
	}
	if (size > ISC_DATASET_MAX_BYTES) {
		rc = isc_err_set(err, ISC_EINVALID,
		                 "%s is %" PRIu64
		                 " bytes: over the 100 GB (%llu bytes) a dataset may "
		                 "hold",
		                 req->uri, size, (unsigned long long)ISC_DATASET_MAX_BYTES);
		goto out;
	}
	if (size > volume) {
		rc = isc_err_set(err, ISC_EINVALID,
		                 "%s is %" PRIu64 " bytes: more than its volume (%" PRIu64
		                 " bytes); give a larger --volume-size",
		                 req->uri, size, volume);
		goto out;
	}
	memset(&d, 0, sizeof(d));
	d.name = (char *)(req->name ? req->name : name);
	d.uri = (char *)req->uri;
	d.bucket = bucket;
	d.key = is_folder ? prefix : key;
	d.is_folder = is_folder;
	/* A folder URI ignores ETag and VersionId: there is no one object to pin. */
	d.etag = (char *)(!is_folder && req->etag && req->etag[0] ? obj.etag : "");
	d.version_id = (char *)(!is_folder && req->version_id ? req->version_id : "");
	d.credentials = (char *)"";
	d.size_bytes = (int64_t)size;
	d.volume_bytes = (int64_t)volume;
	/*
	 * The id is chosen first: sealing binds it, and the copy is named after it, so
	 * a copy is only ever found through the dataset that made it (the store puts
	 * it in the organisation's folder, "@ORGID/").
	 */
	d.id = isc_store_new_id("ds_");
	copy = d.id ? isc_dataset_copy_name(d.name, d.id) : NULL;
	if (!copy) {
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		goto out;
	}
	d.copy_name = copy;
	if ((rc = record(s, home, req->org, &d, req->secret, &id, err)))
		goto out;
	rc = isc_store_dataset_find(s, NULL, id, out, err);
out:
	isc_s3_object_cleanup(&obj);
	isc_s3_listing_cleanup(&listing);
	isc_s3_client_free(c);
	free(bucket);
	free(key);
	free(prefix);
	free(id);
	free(copy);
	free(d.id);
	return rc;
}

int isc_dataset_remove(struct isc_store *s, const char *home, const struct isc_dataset *d,
                       struct isc_err *err)
{
	char *root, *copy = NULL, *manifest = NULL, *partial = NULL;
	int users = 1, rc;

	if ((rc = isc_store_dataset_remove(s, d->id, err)))
		return rc;
	/*
	 * The copy goes with the last dataset of its organisation that uses it (only
	 * one organisation's datasets can: the name holds the organisation).
	 */
	root = isc_dataset_root(home);
	if (isc_store_dataset_copy_users(s, d->copy_name, d->id, &users, NULL) == 0 && users == 0 &&
	    root && dataset_copy_paths(root, d, &copy, &manifest, &partial, NULL) == 0) {
		unlink(manifest);
		isc_unpack_remove_tree(copy, NULL);
		isc_unpack_remove_tree(partial, NULL);
	}
	free(root);
	free(copy);
	free(manifest);
	free(partial);
	return 0;
}

int isc_dataset_resolve_one(struct isc_store *s, const char *org_name, const char *id,
                            struct isc_dataset *out, struct isc_err *err)
{
	int rc = isc_store_dataset_find(s, org_name, id, out, err);
	if (rc == ISC_ENOTFOUND)
		return isc_err_set(
		    err, ISC_ENOTFOUND,
		    "organisation '%s' has no dataset '%s' (isc datasets list --org %s)", org_name,
		    id, org_name);
	if (rc || strcmp(out->state, "available") == 0)
		return rc;
	if (strcmp(out->state, "failed") == 0)
		rc = isc_err_set(err, ISC_ECONFLICT, "dataset '%s' failed to cache: %s", id,
		                 out->reason);
	else
		rc = isc_err_set(err, ISC_ECONFLICT,
		                 "dataset '%s' is %s (%" PRId64 " of %" PRId64
		                 " bytes); it can be used once Available",
		                 id, strcmp(out->state, "created") == 0 ? "Created" : "Caching",
		                 out->cached_bytes, out->size_bytes);
	return rc;
}

int isc_dataset_resolve_all(struct isc_store *s, const char *org_name, const char *const *ids,
                            size_t n, struct isc_dataset **out, struct isc_err *err)
{
	struct isc_dataset *list = calloc(n ? n : 1, sizeof(*list));
	int rc = 0;
	size_t i;
	*out = NULL;
	if (!list)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	for (i = 0; i < n && !rc; i++) {
		rc = isc_dataset_resolve_one(s, org_name, ids[i], &list[i], err);
		if (rc == ISC_ENOTFOUND || rc == ISC_ECONFLICT)
			isc_err_wrap(err, "dataset_id_list[%zu]", i);
	}
	if (rc) {
		isc_dataset_list_free(list, n);
		return rc;
	}
	*out = list;
	return 0;
}

char *isc_dataset_verified_summary(const struct isc_dataset *d)
{
	json_t *m = d->manifest_json ? json_loads(d->manifest_json, 0, NULL) : NULL;
	json_t *objs = json_object_get(m, "objects"), *counts = json_object();
	struct isc_buf b;
	const char *k;
	json_t *v;
	char *out = NULL;

	isc_buf_init(&b, 0);
	for (size_t i = 0; counts && i < json_array_size(objs); i++) {
		const char *by =
		    json_string_value(json_object_get(json_array_get(objs, i), "verified_by"));
		if (by)
			json_object_set_new(
			    counts, by,
			    json_integer(json_integer_value(json_object_get(counts, by)) + 1));
	}
	json_object_foreach(counts, k, v)
	{
		if (b.len)
			isc_buf_puts(&b, "; ");
		if (json_array_size(objs) > 1)
			isc_buf_printf(&b, "%s: %" JSON_INTEGER_FORMAT " object%s", k,
			               json_integer_value(v),
			               json_integer_value(v) == 1 ? "" : "s");
		else
			isc_buf_puts(&b, k);
	}
	if (b.len)
		out = isc_buf_detach(&b);
	isc_buf_cleanup(&b);
	json_decref(counts);
	json_decref(m);
	return out;
}

/* ---- burst nodes ---- */

void isc_dataset_fetch_plan_free(struct isc_dataset_fetch_file *files, size_t n)
{
	for (size_t i = 0; files && i < n; i++) {
		if (files[i].url) {
			memset(files[i].url, 0, strlen(files[i].url));
			free(files[i].url);
		}
		free(files[i].etag);
		free(files[i].sha256);
		free(files[i].path);
	}
	free(files);
}

int isc_dataset_fetch_plan(struct isc_store *s, const char *home, const struct isc_config *cfg,
                           const struct isc_dataset *d, long expires_s,
                           struct isc_dataset_fetch_file **out, size_t *n, struct isc_err *err)
{
	struct isc_s3_client *c = NULL;
	json_t *m = NULL, *objs;
	struct isc_dataset_fetch_file *files = NULL;
	size_t cnt = 0;
	int rc;

	*out = NULL;
	*n = 0;
	if (!d->manifest_json || strcmp(d->state, "available") != 0)
		return isc_err_set(err, ISC_ECONFLICT, "dataset '%s' is not Available", d->name);
	m = json_loads(d->manifest_json, 0, NULL);
	objs = json_object_get(m, "objects");
	if (!json_is_array(objs) || json_array_size(objs) == 0) {
		json_decref(m);
		return isc_err_set(err, ISC_EINVALID, "dataset '%s' has an unreadable manifest",
		                   d->name);
	}
	if ((rc = dataset_client(s, home, cfg, d, &c, err)))
		goto out;
	files = calloc(json_array_size(objs), sizeof(*files));
	if (!files) {
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < json_array_size(objs); i++) {
		json_t *o = json_array_get(objs, i);
		const char *key = json_string_value(json_object_get(o, "key"));
		const char *vid = json_string_value(json_object_get(o, "version_id"));
		const char *etag = json_string_value(json_object_get(o, "etag"));
		const char *sha = json_string_value(json_object_get(o, "sha256"));
		const char *path = json_string_value(json_object_get(o, "path"));
		if (!key || !etag || !sha || !path) {
			rc = isc_err_set(err, ISC_EINVALID,
			                 "dataset '%s' has an unreadable manifest", d->name);
			goto out;
		}
		struct isc_dataset_fetch_file *f = &files[cnt++];
		/* The version S3 served when caching: nodes get exactly the bytes iscd verified. */
		rc = isc_s3_presign_get(c, d->bucket, key, vid, etag, expires_s, &f->url, err);
		f->etag = strdup(etag);
		f->sha256 = strdup(sha);
		f->path = strdup(path);
		f->archive = json_is_true(json_object_get(o, "archive"));
		if (rc)
			goto out;
		if (!f->etag || !f->sha256 || !f->path) {
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
			goto out;
		}
	}
	*out = files;
	*n = cnt;
	files = NULL;
	rc = 0;
out:
	isc_dataset_fetch_plan_free(files, cnt);
	isc_s3_client_free(c);
	json_decref(m);
	return rc;
}
