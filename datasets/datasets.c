/*
 * Datasets (datasets.h): names and sizes, registration against S3, and the
 * cache: download in ranged pieces, verify against the ETag, expand archives
 * safely, publish the shared copy and its manifest.
 */
#include "datasets/datasets.h"

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
static int copy_paths(const char *root, const struct isc_dataset *d, char **tree, char **manifest,
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
static int dataset_client(struct isc_store *s, const char *home, const struct isc_config *cfg,
                          const struct isc_dataset *d, struct isc_s3_client **out,
                          struct isc_err *err)
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
static int list_all(struct isc_s3_client *c, const char *bucket, const char *prefix,
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
		if ((rc = list_all(c, bucket, prefix, &listing, err)))
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
	    root && copy_paths(root, d, &copy, &manifest, &partial, NULL) == 0) {
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

/* ---- caching ---- */

struct progress {
	struct isc_store *s;
	const char *id;
	int64_t done;    /* bytes of the objects already finished */
	int64_t last_ms; /* last store update */
};

static void progress_note(struct progress *p, int64_t bytes_now, int force)
{
	int64_t now = isc_clock_system()->now_ms(NULL);
	if (force || now - p->last_ms >= 500) {
		isc_store_dataset_set_progress(p->s, p->id, p->done + bytes_now, NULL);
		p->last_ms = now;
	}
}

/* The download's progress callback: bytes of the current object on top of those done. */
static void progress_bytes(void *ctx, uint64_t bytes)
{
	progress_note(ctx, (int64_t)bytes, 0);
}

struct file_reader {
	int fd;
	char buf[1 << 16];
};

static ssize_t file_read(void *ctx, const void **buf, struct isc_err *err)
{
	struct file_reader *r = ctx;
	ssize_t n = read(r->fd, r->buf, sizeof(r->buf));
	if (n < 0)
		return isc_err_set(err, ISC_EIO, "reading the archive: %s", strerror(errno));
	*buf = r->buf;
	return n;
}

/* Expands archive into the empty folder dest with the unpacker's caps; any refusal fails it. */
static int expand(const char *archive, const char *dest, uint64_t max_bytes, uint64_t min_free,
                  struct isc_err *err)
{
	struct isc_unpack_limits lim = {.max_bytes = max_bytes,
	                                .max_entries = 1000000,
	                                .min_free_bytes = min_free,
	                                .any_top = 1,
	                                .archives = 1};
	struct isc_unpack_report rep;
	struct file_reader *r = malloc(sizeof(*r));
	int rc;
	if (!r)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	r->fd = open(archive, O_RDONLY | O_CLOEXEC);
	if (r->fd < 0) {
		free(r);
		return isc_err_set(err, ISC_EIO, "%s: %s", archive, strerror(errno));
	}
	rc = isc_unpack_stream(file_read, r, dest, &lim, &rep, err);
	close(r->fd);
	free(r);
	if (rc)
		return isc_err_wrap(err, "expanding the archive");
	/*
	 * Nodes expand these same bytes (SHA-256 pinned) with the node's tar/unzip:
	 * an archive our unpacker had to censor is refused whole, so both agree.
	 */
	if (rep.refused)
		return isc_err_set(err, ISC_EINVALID,
		                   "the archive holds %" PRIu64
		                   " member(s) a dataset may not (links, "
		                   "devices, absolute or \"..\" names); first: %s",
		                   rep.refused, rep.first_refused);
	return 0;
}

static int mkdir_p(const char *path, struct isc_err *err)
{
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s", path);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0700) != 0 && errno != EEXIST)
			return isc_err_set(err, ISC_EIO, "%s: %s", tmp, strerror(errno));
		*p = '/';
	}
	if (mkdir(tmp, 0700) != 0 && errno != EEXIST)
		return isc_err_set(err, ISC_EIO, "%s: %s", tmp, strerror(errno));
	return 0;
}

/* A key's path under a folder dataset's root: relative, no "..", no empty parts. */
static int rel_ok(const char *rel)
{
	if (!rel[0] || rel[0] == '/')
		return 0;
	for (const char *p = rel; *p;) {
		size_t n = strcspn(p, "/");
		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return 0;
		p += n;
		if (*p == '/')
			p++;
	}
	return 1;
}

static char *path_join(const char *a, const char *b)
{
	char *out = NULL;
	return asprintf(&out, "%s/%s", a, b) < 0 ? NULL : out;
}

static int write_text(const char *path, const char *text, struct isc_err *err)
{
	char tmp[4200];
	FILE *f;
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f || fputs(text, f) < 0 || fflush(f) != 0 || fsync(fileno(f)) != 0) {
		if (f)
			fclose(f);
		return isc_err_set(err, ISC_EIO, "%s: %s", tmp, strerror(errno));
	}
	fclose(f);
	if (rename(tmp, path) != 0)
		return isc_err_set(err, ISC_EIO, "%s: %s", path, strerror(errno));
	return 0;
}

/*
 * Sharing inside one organisation: head is what S3 just said of d's object, asked
 * with d's own credentials. A dataset of d's organisation that is Available on
 * the same bucket and key, whose manifest holds that very ETag and VersionId,
 * lends its copy (recorded in one statement with the check that it is still
 * there). *shared: 1 when d is now Available on it. Another organisation's
 * copy is never looked at: the donors come from d's organisation only.
 */
static int try_share(struct isc_store *s, const char *root, const struct isc_dataset *d,
                     const struct isc_s3_object *head, int *shared, struct isc_err *err)
{
	struct isc_dataset *donors = NULL;
	size_t n = 0;
	int rc;

	*shared = 0;
	rc = isc_store_dataset_share_donors(s, d->org_id, d->bucket, d->key, d->id, d->volume_bytes,
	                                    &donors, &n, err);
	if (rc)
		return rc;
	for (size_t i = 0; i < n && !*shared; i++) {
		json_t *m =
		    json_loads(donors[i].manifest_json ? donors[i].manifest_json : "", 0, NULL);
		json_t *objs = json_object_get(m, "objects"), *o = json_array_get(objs, 0);
		const char *etag = json_string_value(json_object_get(o, "etag"));
		const char *vid = json_string_value(json_object_get(o, "version_id"));
		char *tree = NULL;
		struct stat st;
		struct isc_err serr;
		if (json_array_size(objs) == 1 && etag && vid && strcmp(etag, head->etag) == 0 &&
		    strcmp(vid, head->version_id) == 0 &&
		    copy_paths(root, &donors[i], &tree, NULL, NULL, NULL) == 0 &&
		    stat(tree, &st) == 0 && S_ISDIR(st.st_mode) &&
		    isc_store_dataset_set_shared(s, d->id, donors[i].copy_name,
		                                 donors[i].size_bytes, donors[i].manifest_json,
		                                 &serr) == 0) {
			*shared = 1;
			isc_log(ISC_LOG_INFO,
			        "dataset %s (%s): shares the copy of dataset %s (%s) of its "
			        "organisation: S3 confirmed ETag %s, VersionId %s with its own "
			        "credentials",
			        d->id, d->name, donors[i].id, donors[i].name, head->etag,
			        vid[0] ? vid : "(none)");
		}
		free(tree);
		json_decref(m);
	}
	isc_dataset_list_free(donors, n);
	return 0;
}

/*
 * Caches d into its organisation's folder, root/@ORGID/<leaf>; *manifest_out
 * (caller frees) on success. *shared: 1 when d was made Available on the copy
 * of another dataset of its organisation instead (nothing to record then).
 */
static int cache_dataset(struct isc_store *s, const char *home, const struct isc_config *cfg,
                         const char *root, const struct isc_dataset *d, const volatile int *stop,
                         char **manifest_out, int64_t *size_out, int *shared, struct isc_err *err)
{
	struct isc_s3_client *c = NULL;
	struct isc_s3_listing objs;
	struct progress prog = {s, d->id, 0, 0};
	char *work = NULL, *tree = NULL, *final = NULL, *mpath = NULL, *dl = NULL;
	json_t *manifest = json_object(), *arr = json_array();
	const char *ext = d->is_folder ? NULL : isc_dataset_archive_ext(d->key);
	uint64_t total = 0;
	int rc;

	memset(&objs, 0, sizeof(objs));
	*manifest_out = NULL;
	*shared = 0;
	if (!manifest || !arr) {
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		goto out;
	}
	if ((rc = copy_paths(root, d, &final, &mpath, &work, err)))
		goto out;
	if (!(tree = path_join(work, "tree"))) {
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		goto out;
	}
	/*
	 * This dataset's own copy, complete already (iscd stopped after publishing it,
	 * before recording it): the name holds the dataset's id and its organisation,
	 * so no other dataset can have made it.
	 */
	{
		struct stat st;
		json_error_t je;
		json_t *m = stat(final, &st) == 0 && S_ISDIR(st.st_mode)
		                ? json_load_file(mpath, 0, &je)
		                : NULL;
		if (m) {
			*size_out = (int64_t)json_integer_value(json_object_get(m, "bytes"));
			*manifest_out = json_dumps(m, JSON_COMPACT);
			json_decref(m);
			rc = *manifest_out ? 0 : isc_err_set(err, ISC_ENOMEM, "out of memory");
			goto out;
		}
	}
	if ((rc = dataset_client(s, home, cfg, d, &c, err)))
		goto out;
	if (d->is_folder) {
		if ((rc = list_all(c, d->bucket, d->key, &objs, err)))
			goto out;
		if (objs.n == 0) {
			rc = isc_err_set(err, ISC_ENOTFOUND, "no objects under s3://%s/%s any more",
			                 d->bucket, d->key);
			goto out;
		}
	} else {
		objs.objects = calloc(1, sizeof(*objs.objects));
		if (!objs.objects) {
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
			goto out;
		}
		rc = isc_s3_head(c, d->bucket, d->key, d->version_id, 0, &objs.objects[0], err);
		if (rc)
			goto out;
		objs.n = 1;
		if (d->etag[0] && strcmp(d->etag, objs.objects[0].etag) != 0) {
			rc = isc_err_set(err, ISC_ECONFLICT,
			                 "ETag mismatch: pinned %s, S3 now has %s", d->etag,
			                 objs.objects[0].etag);
			goto out;
		}
		/* Only now, S3 having answered this dataset's own credentials, may it share. */
		if ((rc = try_share(s, root, d, &objs.objects[0], shared, err)) || *shared)
			goto out;
	}
	for (size_t i = 0; i < objs.n; i++)
		total += objs.objects[i].size;
	if (total > ISC_DATASET_MAX_BYTES || total > (uint64_t)d->volume_bytes) {
		rc =
		    isc_err_set(err, ISC_EINVALID,
		                "%" PRIu64 " bytes now: over the dataset's cap (%" PRId64 " bytes)",
		                total, d->volume_bytes);
		goto out;
	}
	if ((rc = mkdir_p(work, err)) || (rc = isc_unpack_remove_tree(tree, err)) ||
	    (rc = mkdir_p(tree, err)))
		goto out;
	for (size_t i = 0; i < objs.n; i++) {
		struct isc_s3_object *o = &objs.objects[i];
		const char *vid =
		    d->is_folder ? NULL : (d->version_id[0] ? d->version_id : o->version_id);
		const char *rel = d->is_folder ? o->key + strlen(d->key) : NULL;
		uint64_t part_size = 0;
		struct isc_dataset_verified ver;
		char name[32];
		json_t *entry;
		if (d->is_folder && !rel_ok(rel)) {
			rc = isc_err_set(
			    err, ISC_EINVALID,
			    "s3://%s/%s: a key that is no safe path under the dataset's root",
			    d->bucket, o->key);
			goto out;
		}
		snprintf(name, sizeof(name), "object-%zu", i);
		free(dl);
		if (!(dl = path_join(work, name))) {
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
			goto out;
		}
		/*
		 * HeadObject of this very object (a folder's listing has neither its
		 * checksum nor its encryption), and of part 1 for a multipart ETag or
		 * a composite checksum: the part size the digests need as they go.
		 */
		if (d->is_folder) {
			struct isc_s3_object h;
			if ((rc = isc_s3_head(c, d->bucket, o->key, NULL, 0, &h, err)))
				goto fail_obj;
			free(h.key);
			h.key = o->key;
			*o = h;
		}
		if (strchr(o->etag, '-') || o->checksum_composite) {
			struct isc_s3_object p1;
			if ((rc = isc_s3_head(c, d->bucket, o->key, vid, 1, &p1, err)))
				goto fail_obj;
			part_size = p1.size;
			isc_s3_object_cleanup(&p1);
		}
		{
			/* [providers.aws] s3_parallelism: connections at once (docs/datasets.md).
			 */
			const struct isc_provider_config *apc =
			    cfg ? isc_config_provider(cfg, "aws") : NULL;
			struct isc_dataset_download job = {
			    c, d->bucket, o, vid, part_size, dl, progress_bytes, &prog, stop, 0};
			if ((rc = isc_dataset_parallelism_parse(
			         apc ? isc_config_setting(apc, "s3_parallelism") : NULL,
			         &job.parallelism, err)) ||
			    (rc = isc_dataset_download_run(&job, &ver, err)))
				goto fail_obj;
		}
		prog.done += (int64_t)o->size;
		progress_note(&prog, 0, 1);
		entry = json_pack("{s:s, s:s, s:s, s:I, s:s, s:s, s:s, s:s}", "key", o->key,
		                  "version_id", vid ? vid : "", "etag", o->etag, "size",
		                  (json_int_t)o->size, "sha256", ver.sha256, "verified_by", ver.by,
		                  "checksum", o->checksum_algo[0] ? o->checksum : "", "path",
		                  rel ? rel
		                      : (ext                    ? ""
		                         : strrchr(o->key, '/') ? strrchr(o->key, '/') + 1
		                                                : o->key));
		if (entry && json_object_set_new(entry, "archive", json_boolean(ext != NULL))) {
			json_decref(entry);
			entry = NULL;
		}
		if (!entry || json_array_append_new(arr, entry)) {
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
			goto out;
		}
		if (ext) {
			rc = expand(dl, tree, (uint64_t)d->volume_bytes,
			            cfg ? (uint64_t)cfg->disk_reserve_bytes : 0, err);
			if (rc) {
				isc_unpack_remove_tree(tree, NULL);
				goto out;
			}
			unlink(dl);
		} else {
			const char *leaf = json_string_value(json_object_get(entry, "path"));
			char *dst = path_join(tree, leaf);
			char *slash = dst ? strrchr(dst, '/') : NULL;
			if (!dst) {
				rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
				goto out;
			}
			*slash = '\0';
			rc = mkdir_p(dst, err);
			*slash = '/';
			if (!rc && rename(dl, dst) != 0)
				rc = isc_err_set(err, ISC_EIO, "%s: %s", dst, strerror(errno));
			free(dst);
			if (rc)
				goto out;
		}
		continue;
	fail_obj:
		isc_err_wrap(err, "s3://%s/%s", d->bucket, o->key);
		goto out;
	}
	if (json_object_set_new(manifest, "objects", arr) ||
	    json_object_set_new(manifest, "bytes", json_integer((json_int_t)total))) {
		arr = NULL;
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		goto out;
	}
	arr = NULL;
	*manifest_out = json_dumps(manifest, JSON_COMPACT);
	if (!*manifest_out) {
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		goto out;
	}
	/* Publish: the manifest first, then the folder (its presence means complete). */
	{
		char *mdir = strdup(mpath), *slash = mdir ? strrchr(mdir, '/') : NULL;
		if (!slash) {
			free(mdir);
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
			goto out;
		}
		*slash = '\0';
		rc = mkdir_p(mdir, err);
		free(mdir);
	}
	if (!rc)
		rc = write_text(mpath, *manifest_out, err);
	if (!rc && rename(tree, final) != 0)
		rc = isc_err_set(err, ISC_EIO, "%s: %s", final, strerror(errno));
	if (!rc) {
		isc_unpack_remove_tree(work, NULL);
		*size_out = (int64_t)total;
	}
out:
	if (rc) {
		free(*manifest_out);
		*manifest_out = NULL;
	}
	json_decref(arr);
	json_decref(manifest);
	isc_s3_listing_cleanup(&objs);
	isc_s3_client_free(c);
	free(work);
	free(tree);
	free(final);
	free(mpath);
	free(dl);
	return rc;
}

int isc_dataset_cache_next(struct isc_store *s, const struct isc_config *cfg, const char *home,
                           const volatile int *stop, int *did, struct isc_err *err)
{
	struct isc_dataset d;
	struct isc_err cerr;
	char *root = NULL, *manifest = NULL;
	int64_t size = 0;
	int rc, shared = 0;

	*did = 0;
	rc = isc_store_dataset_next_to_cache(s, &d, err);
	if (rc == ISC_ENOTFOUND) {
		isc_err_clear(err);
		return 0;
	}
	if (rc)
		return rc;
	*did = 1;
	root = isc_dataset_root(home);
	if (!root) {
		isc_dataset_cleanup(&d);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	if (strcmp(d.state, "caching") == 0)
		isc_log(ISC_LOG_INFO, "dataset %s (%s): resuming the cache at %" PRId64 " bytes",
		        d.id, d.name, d.cached_bytes);
	else
		isc_log(ISC_LOG_INFO, "dataset %s (%s): caching %s (%" PRId64 " bytes) as %s", d.id,
		        d.name, d.uri, d.size_bytes, d.copy_name);
	rc = isc_store_dataset_set_caching(s, d.id, err);
	if (!rc) {
		isc_err_clear(&cerr);
		int crc =
		    cache_dataset(s, home, cfg, root, &d, stop, &manifest, &size, &shared, &cerr);
		if (crc == 0 && shared) {
			isc_log(ISC_LOG_INFO, "dataset %s (%s): available", d.id, d.name);
		} else if (crc == 0) {
			rc = isc_store_dataset_set_available(s, d.id, size, manifest, err);
			isc_log(ISC_LOG_INFO, "dataset %s (%s): available, %" PRId64 " bytes", d.id,
			        d.name, size);
		} else if (stop && *stop) {
			isc_log(ISC_LOG_INFO, "dataset %s (%s): caching paused (%s)", d.id, d.name,
			        cerr.msg);
		} else if (isc_code_is_retryable(crc)) {
			/* S3 unreachable or throttling past the retries: stays Caching, resumes
			 * later. */
			isc_log(ISC_LOG_WARN, "dataset %s (%s): will retry: %s", d.id, d.name,
			        cerr.msg);
			*did = 2;
		} else {
			isc_log(ISC_LOG_WARN, "dataset %s (%s): failed: %s", d.id, d.name,
			        cerr.msg);
			rc = isc_store_dataset_set_failed(s, d.id, cerr.msg, err);
		}
	}
	free(manifest);
	free(root);
	isc_dataset_cleanup(&d);
	return rc;
}

/* ---- the layout of stores before issue 29 ---- */

/* Moves from to to when from exists and to does not (creating to's folder). */
static int move_into(const char *from, const char *to, struct isc_err *err)
{
	struct stat st;
	char *dir;
	int rc = 0;
	if (lstat(from, &st) != 0 || lstat(to, &st) == 0)
		return 0;
	if (!(dir = strdup(to)))
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	*strrchr(dir, '/') = '\0';
	if (!(rc = mkdir_p(dir, err)) && rename(from, to) != 0)
		rc = isc_err_set(err, ISC_EIO, "moving %s to %s: %s", from, to, strerror(errno));
	free(dir);
	return rc;
}

/*
 * Whether d's copy holds its own object's bytes, asked of S3 with d's own
 * credentials: the manifest's ETag and VersionId for one object (HeadObject, of
 * the pinned version when there is one), every object's key and ETag for a
 * folder (a fresh listing, in the manifest's order: both are S3's key order).
 * *same is 1 only when S3 confirmed it; an unreadable manifest, refused keys or
 * an S3 out of reach leave it 0.
 */
static void copy_confirmed(struct isc_store *s, const char *home, const struct isc_config *cfg,
                           const struct isc_dataset *d, int *same)
{
	struct isc_s3_client *c = NULL;
	struct isc_s3_listing all;
	struct isc_s3_object h;
	struct isc_err err;
	json_t *m = json_loads(d->manifest_json ? d->manifest_json : "", 0, NULL);
	json_t *objs = json_object_get(m, "objects");
	size_t n = json_array_size(objs);

	*same = 0;
	memset(&all, 0, sizeof(all));
	memset(&h, 0, sizeof(h));
	isc_err_clear(&err);
	if (n == 0 || dataset_client(s, home, cfg, d, &c, &err)) {
		/* Nothing to compare, or keys that do not open: not confirmed. */
	} else if (!d->is_folder) {
		json_t *o = json_array_get(objs, 0);
		const char *etag = json_string_value(json_object_get(o, "etag"));
		const char *vid = json_string_value(json_object_get(o, "version_id"));
		if (n == 1 && etag && vid &&
		    isc_s3_head(c, d->bucket, d->key, d->version_id, 0, &h, &err) == 0)
			*same = strcmp(etag, h.etag) == 0 && strcmp(vid, h.version_id) == 0;
		isc_s3_object_cleanup(&h);
	} else if (list_all(c, d->bucket, d->key, &all, &err) == 0 && all.n == n) {
		*same = 1;
		for (size_t i = 0; i < n && *same; i++) {
			json_t *o = json_array_get(objs, i);
			const char *key = json_string_value(json_object_get(o, "key"));
			const char *etag = json_string_value(json_object_get(o, "etag"));
			*same = key && etag && strcmp(key, all.objects[i].key) == 0 &&
			        strcmp(etag, all.objects[i].etag) == 0;
		}
	}
	if (!*same && err.msg[0])
		isc_log(ISC_LOG_WARN, "dataset %s (%s): %s", d->id, d->name, err.msg);
	isc_s3_listing_cleanup(&all);
	isc_s3_client_free(c);
	json_decref(m);
}

int isc_dataset_layout_migrate(struct isc_store *s, const char *home, const struct isc_config *cfg,
                               int *moved, struct isc_err *err)
{
	struct isc_dataset *list = NULL;
	char *root = isc_dataset_root(home), *old = NULL, *tree = NULL, *mpath = NULL, *work = NULL;
	char *from_tree = NULL, *from_manifest = NULL;
	size_t n = 0;
	DIR *dir = NULL;
	struct dirent *e;
	int rc;

	*moved = 0;
	if (!root)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	if ((rc = isc_store_dataset_list(s, NULL, 0, NULL, 0, &list, &n, err)))
		goto out;
	/*
	 * Migration 15 named each copy after its organisation ("@ORGID/LEAF") and
	 * sent the datasets of every organisation but the first back to 'created'.
	 * An Available dataset gets the old folder only once S3 confirmed, with its
	 * own keys, that the copy holds its own object (the organisation that made
	 * the copy may have removed its dataset before: then the first left is not
	 * the maker); otherwise it is cached again. A partial download of the old
	 * layout is never taken over: it may hold another organisation's bytes.
	 */
	for (size_t i = 0; i < n && !rc; i++) {
		struct isc_dataset *d = &list[i];
		const char *leaf;
		struct stat st;
		int same = 0;
		if (strcmp(d->state, "available") ||
		    isc_dataset_copy_split(d->copy_name, d->org_id, &leaf))
			continue;
		if ((rc = copy_paths(root, d, &tree, &mpath, &work, err)))
			break;
		from_tree = path_join(root, leaf);
		if (asprintf(&from_manifest, "%s/.manifests/%s.json", root, leaf) < 0)
			from_manifest = NULL;
		if (!from_tree || !from_manifest)
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		if (!rc && lstat(from_tree, &st) == 0 && S_ISDIR(st.st_mode) &&
		    lstat(tree, &st) != 0) {
			copy_confirmed(s, home, cfg, d, &same);
			if (!same) {
				isc_log(ISC_LOG_WARN,
				        "dataset %s (%s): S3 did not confirm that the copy of the "
				        "old layout holds its object: it is cached again",
				        d->id, d->name);
				rc = isc_store_dataset_reset(s, d->id, err);
			} else if (!(rc = move_into(from_tree, tree, err))) {
				(*moved)++;
				isc_log(ISC_LOG_INFO,
				        "dataset %s (%s): copy moved into its organisation's "
				        "folder, %s (S3 confirmed it with its own keys)",
				        d->id, d->name, tree);
				rc = move_into(from_manifest, mpath, err);
			}
		}
		free(from_tree);
		free(from_manifest);
		from_tree = from_manifest = NULL;
		free(tree);
		free(mpath);
		free(work);
		tree = mpath = work = NULL;
	}
	if (rc)
		goto out;
	/*
	 * What is left in the old places belongs to no dataset any more (a copy another
	 * organisation also used is cached again by it): removed, so no later dataset
	 * of any organisation can come across it.
	 */
	dir = opendir(root);
	while (dir && (e = readdir(dir))) {
		if (e->d_name[0] == '@' || strcmp(e->d_name, ".") == 0 ||
		    strcmp(e->d_name, "..") == 0)
			continue;
		if (!(old = path_join(root, e->d_name))) {
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
			break;
		}
		isc_log(ISC_LOG_INFO,
		        "datasets: removing %s, of the layout before copies "
		        "belonged to an organisation, which no dataset uses",
		        old);
		if (isc_unpack_remove_tree(old, NULL) != 0)
			unlink(old);
		free(old);
		old = NULL;
	}
out:
	if (dir)
		closedir(dir);
	isc_dataset_list_free(list, n);
	free(root);
	return rc;
}

/* ---- the cacher thread ---- */

struct isc_dataset_cacher {
	pthread_t thread;
	char *home;
	volatile int stop;
};

static void *cacher_main(void *arg)
{
	struct isc_dataset_cacher *c = arg;
	struct isc_store *s = NULL;
	struct isc_config *cfg = NULL;
	struct isc_err err;

	isc_err_clear(&err);
	if (isc_store_open(c->home, 0, &s, &err) || isc_config_load(c->home, &cfg, &err)) {
		isc_log(ISC_LOG_ERROR, "dataset cacher: %s", err.msg);
		goto out;
	}
	while (!c->stop) {
		int did = 0;
		if (isc_dataset_cache_next(s, cfg, c->home, &c->stop, &did, &err))
			isc_log(ISC_LOG_WARN, "dataset cacher: %s", err.msg);
		/*
		 * Idle: look again in a second; after a retryable failure in 15 s. Either
		 * way wake every 100 ms to notice a stop.
		 */
		for (int i = 0; did != 1 && i < (did == 2 ? 150 : 10) && !c->stop; i++) {
			struct timespec ts = {0, 100 * 1000000L};
			nanosleep(&ts, NULL);
		}
	}
out:
	isc_config_free(cfg);
	isc_store_free(s);
	return NULL;
}

int isc_dataset_cacher_start(const char *home, struct isc_dataset_cacher **out, struct isc_err *err)
{
	struct isc_dataset_cacher *c;
	struct isc_store *s = NULL;
	struct isc_config *cfg = NULL;
	int moved = 0, rc;

	*out = NULL;
	/*
	 * Copies of the old layout move into their organisations' folders before
	 * anything can look for them (the first tick's on-prem runs included).
	 */
	if ((rc = isc_store_open(home, 0, &s, err)) || (rc = isc_config_load(home, &cfg, err)) ||
	    (rc = isc_dataset_layout_migrate(s, home, cfg, &moved, err))) {
		isc_config_free(cfg);
		isc_store_free(s);
		return isc_err_wrap(err, "datasets");
	}
	isc_config_free(cfg);
	isc_store_free(s);
	c = calloc(1, sizeof(*c));
	if (!c || !(c->home = strdup(home))) {
		free(c);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	if (pthread_create(&c->thread, NULL, cacher_main, c) != 0) {
		free(c->home);
		free(c);
		return isc_err_set(err, ISC_EIO, "cannot start the dataset cacher thread");
	}
	*out = c;
	return 0;
}

void isc_dataset_cacher_stop(struct isc_dataset_cacher *c)
{
	if (!c)
		return;
	c->stop = 1;
	pthread_join(c->thread, NULL);
	free(c->home);
	free(c);
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
