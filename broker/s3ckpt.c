/*
 * Checkpoints straight to object storage (issue 45, docs/artifacts.md): with
 * artifact_root = "s3://BUCKET/PREFIX", a sync lists rank 0's folders, opens one
 * multipart upload per file under PREFIX/@ORG/EXPERIMENT/vN/, hands the node presigned
 * part URLs (one upload's parts, artifact_url_ttl_s), completes and verifies every
 * object (the ETag from the parts' ETags, then HeadObject's size and ETag), and only
 * then records version N's manifest as current. A restore hands every node presigned
 * GETs of the current manifest's objects. iscd moves names, sizes, ETags and URLs:
 * never an artifact byte.
 */
#include "broker/broker_int.h"
#include "broker/s3ckpt.h"

#include "artifacts/manifest.h"
#include "common/log.h"
#include "launcher/s3node.h"
#include "launcher/transfer.h"
#include "providers/aws/aws_creds.h"
#include "providers/aws/s3.h"
#include "store/store_artifacts.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int broker_s3_enabled(const struct isc_broker *b)
{
	return b->config->artifact_s3_bucket != NULL;
}

/* The bucket's client, with the credentials config.toml names (never from a node). */
static int artifact_client(const struct isc_config *cfg, struct isc_s3_client **out,
                           struct isc_err *err)
{
	struct isc_kv items[4];
	size_t k = 0;
	struct isc_provider_settings settings;
	struct isc_aws_creds creds;
	struct isc_s3_config sc;
	char region[64], *endpoint = NULL;
	int rc;

	*out = NULL;
	memset(&creds, 0, sizeof(creds));
	if (cfg->artifact_profile[0])
		items[k++] = (struct isc_kv){"profile", cfg->artifact_profile};
	if (cfg->artifact_credentials_file[0])
		items[k++] = (struct isc_kv){"credentials_file", cfg->artifact_credentials_file};
	if (cfg->artifact_endpoint_s3[0])
		items[k++] = (struct isc_kv){"endpoint_s3", cfg->artifact_endpoint_s3};
	settings = (struct isc_provider_settings){items, k, NULL, 0};
	if (isc_aws_region_resolve(cfg->artifact_s3_region[0] ? cfg->artifact_s3_region : NULL,
	                           region, sizeof(region), NULL))
		snprintf(region, sizeof(region), "us-east-1");
	if ((rc = isc_aws_creds_resolve(&settings, &creds, err))) {
		isc_err_wrap(err, "artifact_root's bucket credentials");
		return rc;
	}
	endpoint = isc_aws_endpoint_resolve(&settings, "s3", region);
	if (!endpoint) {
		isc_aws_creds_cleanup(&creds);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	memset(&sc, 0, sizeof(sc));
	sc.endpoint = endpoint;
	sc.region = region;
	sc.addressing = !strcmp(cfg->artifact_s3_addressing, "path") ? ISC_S3_ADDRESSING_PATH
	                : !strcmp(cfg->artifact_s3_addressing, "virtual")
	                    ? ISC_S3_ADDRESSING_VIRTUAL
	                    : ISC_S3_ADDRESSING_AUTO;
	sc.allow_insecure = cfg->artifact_allow_insecure_endpoint;
	sc.access_key_id = creds.access_key_id;
	sc.secret_access_key = creds.secret_access_key;
	sc.session_token = creds.session_token;
	rc = isc_s3_client_new(&sc, NULL, isc_clock_system(), out, err);
	isc_aws_creds_cleanup(&creds);
	free(endpoint);
	return rc;
}

/* "PREFIX/@ORG/EXPERIMENT/" (no PREFIX: "@ORG/EXPERIMENT/"); caller frees. */
static char *exp_prefix(const struct isc_config *cfg, int64_t org_id, const char *experiment_id)
{
	char *p = NULL;
	const char *pre = cfg->artifact_s3_prefix ? cfg->artifact_s3_prefix : "";
	if (asprintf(&p, "%s%s@%lld/%s/", pre, pre[0] ? "/" : "", (long long)org_id,
	             experiment_id) < 0)
		return NULL;
	return p;
}

/* S3's ETag of a multipart object from its parts' ETags: MD5 of their MD5s, "-N". */
static int composite_etag(char (*etags)[80], unsigned n, char out[80])
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	unsigned char md[16], raw[16];
	unsigned len = 0;
	int ok = ctx && EVP_DigestInit_ex(ctx, EVP_md5(), NULL);
	for (unsigned i = 0; ok && i < n; i++) {
		if (strlen(etags[i]) != 32)
			ok = 0;
		for (int j = 0; ok && j < 16; j++) {
			unsigned v;
			if (sscanf(etags[i] + 2 * j, "%2x", &v) != 1)
				ok = 0;
			raw[j] = (unsigned char)v;
		}
		ok = ok && EVP_DigestUpdate(ctx, raw, 16);
	}
	ok = ok && EVP_DigestFinal_ex(ctx, md, &len);
	EVP_MD_CTX_free(ctx);
	if (!ok)
		return -1;
	for (int j = 0; j < 16; j++)
		snprintf(out + 2 * j, 3, "%02x", md[j]);
	snprintf(out + 32, 80 - 32, "-%u", n);
	return 0;
}

/* The current manifest, checked; ISC_ENOTFOUND when there is none. */
static int current_manifest(struct isc_store *s, const struct isc_config *cfg,
                            const struct isc_experiment *e, const char *prefix,
                            struct isc_manifest *m, struct isc_err *err)
{
	struct isc_manifest_row row;
	struct isc_manifest_limits lim = {(uint64_t)cfg->artifact_max_bytes,
	                                  (uint64_t)cfg->artifact_max_entries, prefix};
	int rc = isc_store_manifest_current(s, e->id, &row, err);
	if (rc)
		return rc;
	rc = isc_manifest_from_json(row.json, m, err);
	if (!rc && m->version != row.version)
		rc = isc_err_set(err, ISC_EINVALID, "manifest: version %lld recorded as %lld",
		                 (long long)m->version, (long long)row.version);
	if (!rc)
		rc = isc_manifest_check(m, &lim, err);
	if (rc && rc != ISC_ENOMEM)
		isc_err_wrap(err, "%s: the current checkpoint version's manifest is refused",
		             e->id);
	isc_manifest_row_cleanup(&row);
	if (rc)
		isc_manifest_cleanup(m);
	return rc;
}

static int top_of(const char *path)
{
	static const char *const tops[3] = {"checkpoints", "crud", "lossy"};
	for (int i = 0; i < 3; i++) {
		size_t n = strlen(tops[i]);
		if (!strncmp(path, tops[i], n) && (path[n] == '/' || !path[n]))
			return 1 << i;
	}
	return 0;
}

/* Keys of m's files, for "is this object still referenced". */
static int referenced(const struct isc_manifest *m, const char *key)
{
	for (size_t i = 0; m && i < m->n; i++)
		if (m->entries[i].key && !strcmp(m->entries[i].key, key))
			return 1;
	return 0;
}

/*
 * Versions older than the previous one: their objects not referenced by the two kept
 * versions are deleted, then their rows. A failure is logged: the next sync retries.
 */
static void prune(struct isc_store *s, struct isc_s3_client *cl, const struct isc_config *cfg,
                  const struct isc_experiment *e, const struct isc_manifest *now,
                  const struct isc_manifest *prev)
{
	struct isc_manifest_row *rows = NULL;
	size_t n = 0;
	struct isc_err err;
	if (isc_store_manifest_list(s, e->id, &rows, &n, &err)) {
		isc_log(ISC_LOG_WARN, "%s: %s", e->id, err.msg);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		struct isc_manifest old;
		int ok = 1;
		if (rows[i].version >= now->version - 1)
			continue;
		if (isc_manifest_from_json(rows[i].json, &old, &err) == 0) {
			for (size_t k = 0; k < old.n && ok; k++)
				if (old.entries[k].key && !referenced(now, old.entries[k].key) &&
				    !referenced(prev, old.entries[k].key) &&
				    isc_s3_delete(cl, cfg->artifact_s3_bucket, old.entries[k].key,
				                  &err)) {
					isc_log(ISC_LOG_WARN, "%s: %s", e->id, err.msg);
					ok = 0;
				}
			isc_manifest_cleanup(&old);
		}
		if (ok && isc_store_manifest_delete(s, e->id, rows[i].version, &err))
			isc_log(ISC_LOG_WARN, "%s: %s", e->id, err.msg);
	}
	isc_manifest_row_list_free(rows, n);
}

static int by_entry_path(const void *a, const void *b)
{
	const struct isc_manifest_entry *x = *(const struct isc_manifest_entry *const *)a;
	const struct isc_manifest_entry *y = *(const struct isc_manifest_entry *const *)b;
	return strcmp(x->path, y->path);
}

void isc_s3_plan_cleanup(struct isc_s3_plan *p)
{
	if (p) {
		free(p->from);
		memset(p, 0, sizeof(*p));
	}
}

int isc_s3_sync_plan(const struct isc_node_listing *l, const struct isc_manifest *cur, int which,
                     struct isc_s3_plan *out, struct isc_err *err)
{
	const struct isc_manifest_entry **idx = NULL;
	size_t n_in = 0, matched = 0;

	memset(out, 0, sizeof(*out));
	out->from = malloc((l->n ? l->n : 1) * sizeof(*out->from));
	if (cur && cur->n && !(idx = malloc(cur->n * sizeof(*idx)))) {
		free(out->from);
		out->from = NULL;
	}
	if (!out->from)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	/* cur's entries under `which`, sorted by path: one lookup per listed entry. */
	for (size_t j = 0; cur && j < cur->n; j++)
		if (top_of(cur->entries[j].path) & which)
			idx[n_in++] = &cur->entries[j];
	if (n_in > 1)
		qsort(idx, n_in, sizeof(*idx), by_entry_path);
	for (size_t i = 0; i < l->n; i++) {
		const struct isc_node_entry *ne = &l->entries[i];
		const struct isc_manifest_entry *ce = NULL;
		size_t lo = 0, hi = n_in;
		out->from[i] = -1;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			int c = strcmp(ne->path, idx[mid]->path);
			if (!c) {
				ce = idx[mid];
				break;
			}
			if (c < 0)
				hi = mid;
			else
				lo = mid + 1;
		}
		if (ne->is_dir) {
			matched += ce && ce->is_dir;
			continue;
		}
		if (ce && !ce->is_dir && ce->has_mtime && ne->has_mtime && ce->size == ne->size &&
		    ce->mtime_ns == ne->mtime_ns) {
			out->from[i] = (long)(ce - cur->entries);
			out->n_carry++;
			matched++;
		} else {
			out->n_upload++;
		}
	}
	/* Every listed entry matched one of cur's (paths are unique on both sides), and
	 * cur has no other under `which`: the same tree. */
	out->changed = !cur || out->n_upload || matched != l->n || n_in != l->n;
	free(idx);
	return 0;
}

struct upload {
	char *key;
	char *upload_id;
	int completed;
	int has_mtime;
	int64_t mtime_ns;
	struct isc_node_upload f;
};

static void uploads_free(struct upload *u, size_t n)
{
	for (size_t i = 0; u && i < n; i++) {
		free(u[i].key);
		free(u[i].upload_id);
		for (unsigned p = 0; u[i].f.part_urls && p < u[i].f.n_parts; p++)
			if (u[i].f.part_urls[p]) {
				memset(u[i].f.part_urls[p], 0, strlen(u[i].f.part_urls[p]));
				free(u[i].f.part_urls[p]);
			}
		free(u[i].f.part_urls);
		free(u[i].f.etags);
	}
	free(u);
}

int broker_s3_sync(struct isc_broker *b, struct isc_store *s, const struct isc_experiment *e,
                   const struct isc_node_target *rank0, const struct isc_launcher_opts *opts,
                   int which, struct isc_err *err)
{
	const struct isc_config *cfg = b->config;
	struct isc_s3_client *cl = NULL;
	struct isc_node_listing list;
	struct isc_manifest cur, next;
	struct upload *up = NULL;
	struct isc_s3_plan plan;
	size_t n_up = 0;
	char *prefix = exp_prefix(cfg, e->org_id, e->id), *json = NULL;
	int have_cur = 0, rc;

	memset(&plan, 0, sizeof(plan));
	memset(&list, 0, sizeof(list));
	memset(&cur, 0, sizeof(cur));
	memset(&next, 0, sizeof(next));
	if (!prefix)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	rc = current_manifest(s, cfg, e, prefix, &cur, err);
	if (rc == ISC_ENOTFOUND)
		rc = 0;
	else if (!rc)
		have_cur = 1;
	if (!rc)
		rc = artifact_client(cfg, &cl, err);
	if (!rc)
		rc = isc_launcher_list_artifacts(rank0, opts, which, &list, err);
	next.version = have_cur ? cur.version + 1 : 1;
	if (!rc)
		rc = isc_s3_sync_plan(&list, have_cur ? &cur : NULL, which, &plan, err);
	if (!rc && !plan.changed) {
		/* The current version already is rank 0's folders: no version, no prune. */
		isc_log(ISC_LOG_DEBUG,
		        "%s: checkpoint version %lld in the bucket is unchanged (%zu file(s) "
		        "listed, none changed): nothing uploaded",
		        e->id, (long long)cur.version, plan.n_carry);
		goto out;
	}
	/* The organisation's current manifests, this one's replaced by what comes now. */
	if (!rc) {
		int64_t org = 0;
		uint64_t carried = 0, was = have_cur ? cur.total_bytes : 0;
		for (size_t i = 0; have_cur && i < cur.n; i++)
			if (!cur.entries[i].is_dir && !(top_of(cur.entries[i].path) & which))
				carried += cur.entries[i].size;
		rc = isc_store_manifest_org_bytes(s, e->org_id, &org, err);
		if (!rc && (uint64_t)org - was + list.total + carried >
		               (uint64_t)cfg->org_artifact_quota_bytes)
			rc = isc_err_set(
			    err, ISC_EINVALID,
			    "refused: this checkpoint version (%llu MiB) would take the "
			    "organisation's artifacts in the bucket over "
			    "org_artifact_quota_bytes (%lld MiB, %lld MiB used); the "
			    "previous version stays current",
			    (unsigned long long)((list.total + carried) >> 20),
			    (long long)(cfg->org_artifact_quota_bytes >> 20),
			    (long long)(org >> 20));
	}
	if (!rc && list.refused) {
		char msg[ISC_ERR_MSG_MAX];
		struct isc_err ignored;
		snprintf(msg, sizeof(msg),
		         "artifacts from rank 0: %llu entr%s refused (first: %s); not uploaded",
		         (unsigned long long)list.refused, list.refused == 1 ? "y" : "ies",
		         list.first_refused);
		isc_log(ISC_LOG_WARN, "%s: %s", e->id, msg);
		isc_store_event_add(s, e->id, "artifacts", msg, &ignored);
	}
	/* One multipart upload per file, its parts' URLs presigned for this upload only. */
	up = calloc(list.n ? list.n : 1, sizeof(*up));
	if (!rc && !up)
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
	for (size_t i = 0; !rc && i < list.n; i++) {
		const struct isc_node_entry *ne = &list.entries[i];
		struct upload *u;
		if (ne->is_dir || plan.from[i] >= 0)
			continue; /* folders have no object; carried files keep theirs */
		u = &up[n_up++];
		u->has_mtime = ne->has_mtime;
		u->mtime_ns = ne->mtime_ns;
		u->f.path = ne->path;
		u->f.size = ne->size;
		u->f.part_size = isc_transfer_part_size(ne->size);
		u->f.n_parts = isc_transfer_part_count(ne->size, u->f.part_size);
		if (!u->f.part_size) {
			rc = isc_err_set(err, ISC_EINVALID, "%s is larger than one upload holds",
			                 ne->path);
			break;
		}
		u->f.part_urls = calloc(u->f.n_parts, sizeof(char *));
		u->f.etags = calloc(u->f.n_parts, sizeof(*u->f.etags));
		if (!u->f.part_urls || !u->f.etags ||
		    asprintf(&u->key, "%sv%lld/%s", prefix, (long long)next.version, ne->path) <
		        0) {
			u->key = NULL;
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
			break;
		}
		rc = isc_s3_multipart_create(cl, cfg->artifact_s3_bucket, u->key, &u->upload_id,
		                             err);
		for (unsigned p = 0; !rc && p < u->f.n_parts; p++)
			rc = isc_s3_presign_upload_part(
			    cl, cfg->artifact_s3_bucket, u->key, u->upload_id, p + 1,
			    cfg->artifact_url_ttl_s, &u->f.part_urls[p], err);
	}
	if (!rc && n_up) {
		struct isc_node_upload *files = calloc(n_up, sizeof(*files));
		if (!files)
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		for (size_t i = 0; !rc && i < n_up; i++)
			files[i] = up[i].f;
		if (!rc)
			rc = isc_launcher_upload_artifacts(rank0, opts, files, n_up, err);
		free(files);
	}
	/* Complete, then verify each object: its ETag from the parts', HeadObject's size. */
	for (size_t i = 0; !rc && i < n_up; i++) {
		struct upload *u = &up[i];
		struct isc_s3_part *parts = calloc(u->f.n_parts, sizeof(*parts));
		struct isc_s3_object o;
		char etag[80], want[80];
		if (!parts) {
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
			break;
		}
		for (unsigned p = 0; p < u->f.n_parts; p++) {
			parts[p].number = p + 1;
			snprintf(parts[p].etag, sizeof(parts[p].etag), "%s", u->f.etags[p]);
		}
		rc = isc_s3_multipart_complete(cl, cfg->artifact_s3_bucket, u->key, u->upload_id,
		                               parts, u->f.n_parts, etag, err);
		free(parts);
		if (!rc)
			u->completed = 1;
		if (!rc && composite_etag(u->f.etags, u->f.n_parts, want))
			rc =
			    isc_err_set(err, ISC_EIO, "%s: a part's ETag is not an MD5", u->f.path);
		if (!rc && strcmp(etag, want))
			rc = isc_err_set(err, ISC_EIO,
			                 "%s: the bucket's ETag %s is not the parts' %s", u->f.path,
			                 etag, want);
		if (!rc &&
		    !(rc = isc_s3_head(cl, cfg->artifact_s3_bucket, u->key, NULL, 0, &o, err))) {
			if (o.size != u->f.size || strcmp(o.etag, want))
				rc = isc_err_set(
				    err, ISC_EIO,
				    "%s: the object holds %llu bytes (ETag %s), not the "
				    "%llu listed (%s)",
				    u->f.path, (unsigned long long)o.size, o.etag,
				    (unsigned long long)u->f.size, want);
			isc_s3_object_cleanup(&o);
		}
		if (!rc &&
		    isc_manifest_add(&next, u->f.path, 0, u->f.size, u->key, etag, u->f.part_size))
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		if (!rc) {
			next.entries[next.n - 1].has_mtime = u->has_mtime;
			next.entries[next.n - 1].mtime_ns = u->mtime_ns;
		}
	}
	/* Folders; the files unchanged since the current version, their objects reused
	 * (prune keeps what the current or previous version references); and what the
	 * folders not synced now hold in the current version. */
	for (size_t i = 0; !rc && i < list.n; i++) {
		const struct isc_manifest_entry *ce =
		    plan.from[i] >= 0 ? &cur.entries[plan.from[i]] : NULL;
		if (list.entries[i].is_dir &&
		    isc_manifest_add(&next, list.entries[i].path, 1, 0, NULL, NULL, 0))
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		else if (ce && isc_manifest_add(&next, ce->path, 0, ce->size, ce->key, ce->etag,
		                                ce->part_size))
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		else if (ce) {
			next.entries[next.n - 1].has_mtime = 1;
			next.entries[next.n - 1].mtime_ns = ce->mtime_ns;
		}
	}
	for (size_t i = 0; !rc && have_cur && i < cur.n; i++) {
		const struct isc_manifest_entry *ce = &cur.entries[i];
		if (!(top_of(ce->path) & which) &&
		    isc_manifest_add(&next, ce->path, ce->is_dir, ce->size, ce->key, ce->etag,
		                     ce->part_size))
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		else if (!(top_of(ce->path) & which)) {
			next.entries[next.n - 1].has_mtime = ce->has_mtime;
			next.entries[next.n - 1].mtime_ns = ce->mtime_ns;
		}
	}
	if (!rc) {
		struct isc_manifest_limits lim = {(uint64_t)cfg->artifact_max_bytes,
		                                  (uint64_t)cfg->artifact_max_entries, prefix};
		rc = isc_manifest_check(&next, &lim, err);
	}
	if (!rc && !(json = isc_manifest_to_json(&next)))
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
	if (!rc)
		rc = isc_store_manifest_add(s, e->id, next.version, e->org_id,
		                            (int64_t)next.total_bytes, json, err);
	if (rc) {
		/* A torn version never becomes current: its uploads are aborted, its objects
		 * deleted; the previous version stays. */
		struct isc_err ignored;
		for (size_t i = 0; cl && i < n_up; i++) {
			if (up[i].completed)
				isc_s3_delete(cl, cfg->artifact_s3_bucket, up[i].key, &ignored);
			else if (up[i].upload_id)
				isc_s3_multipart_abort(cl, cfg->artifact_s3_bucket, up[i].key,
				                       up[i].upload_id, &ignored);
		}
		if (rc != ISC_ENOMEM)
			isc_err_wrap(err, "checkpoint version %lld to the bucket; %s",
			             (long long)next.version,
			             have_cur ? "the previous version stays current"
			                      : "there is no version yet");
	} else {
		char msg[320], kept[96] = "";
		struct isc_err ignored;
		if (plan.n_carry)
			snprintf(kept, sizeof(kept),
			         "; %zu unchanged file(s) kept from version %lld", plan.n_carry,
			         (long long)cur.version);
		snprintf(msg, sizeof(msg),
		         "checkpoint version %lld in the bucket: %llu bytes; %zu file(s) sent by "
		         "rank 0 straight to s3://%s%s",
		         (long long)next.version, (unsigned long long)next.total_bytes, n_up,
		         cfg->artifact_s3_bucket, kept);
		isc_log(ISC_LOG_INFO, "%s: %s", e->id, msg);
		isc_store_event_add(s, e->id, "artifacts", msg, &ignored);
		prune(s, cl, cfg, e, &next, have_cur ? &cur : NULL);
	}
out:
	isc_s3_plan_cleanup(&plan);
	free(json);
	uploads_free(up, list.n);
	isc_node_listing_cleanup(&list);
	isc_manifest_cleanup(&cur);
	isc_manifest_cleanup(&next);
	isc_s3_client_free(cl);
	free(prefix);
	return rc;
}

int broker_s3_restore(struct isc_broker *b, const struct isc_experiment *e,
                      const struct isc_node_target *targets, size_t n,
                      const struct isc_launcher_opts *opts, struct isc_err *err)
{
	const struct isc_config *cfg = b->config;
	struct isc_store *s = NULL;
	struct isc_s3_client *cl = NULL;
	struct isc_manifest m;
	char **urls = NULL, *prefix = exp_prefix(cfg, e->org_id, e->id);
	size_t k = 0;
	int rc;

	memset(&m, 0, sizeof(m));
	if (!prefix)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	rc = isc_store_open(b->home, 0, &s, err);
	if (!rc)
		rc = current_manifest(s, cfg, e, prefix, &m, err);
	isc_store_free(s);
	if (rc == ISC_ENOTFOUND) {
		free(prefix);
		return 0; /* nothing was synced yet */
	}
	if (!rc)
		rc = artifact_client(cfg, &cl, err);
	if (!rc && !(urls = calloc(m.n ? m.n : 1, sizeof(*urls))))
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
	/* One URL per object, If-Match its ETag: it serves those bytes or nothing. */
	for (size_t i = 0; !rc && i < m.n; i++)
		if (!m.entries[i].is_dir)
			rc = isc_s3_presign_get(cl, cfg->artifact_s3_bucket, m.entries[i].key, NULL,
			                        NULL, cfg->artifact_url_ttl_s, &urls[k++], err);
	if (!rc)
		rc = isc_launcher_restore_artifacts_all(targets, n, opts, &m, urls, NULL, err);
	if (rc && rc != ISC_ENOMEM)
		isc_err_wrap(err, "restoring checkpoint version %lld from the bucket",
		             (long long)m.version);
	for (size_t i = 0; urls && i < k; i++)
		if (urls[i]) {
			memset(urls[i], 0, strlen(urls[i]));
			free(urls[i]);
		}
	free(urls);
	isc_manifest_cleanup(&m);
	isc_s3_client_free(cl);
	free(prefix);
	return rc;
}

int isc_artifacts_s3_delete(const struct isc_config *cfg, struct isc_store *s,
                            const char *experiment_id, int64_t org_id, size_t *objects,
                            struct isc_err *err)
{
	struct isc_manifest_row *rows = NULL;
	struct isc_s3_client *cl = NULL;
	char *prefix;
	size_t n = 0;
	int rc;

	*objects = 0;
	if (!cfg->artifact_s3_bucket)
		return isc_err_set(
		    err, ISC_EINVALID,
		    "artifact_root is not a bucket: an experiment's artifacts are the "
		    "folder %s/ID",
		    cfg->artifact_root[0] ? cfg->artifact_root : "$ISC_HOME/experiments");
	if (!(prefix = exp_prefix(cfg, org_id, experiment_id)))
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	rc = isc_store_manifest_list(s, experiment_id, &rows, &n, err);
	if (!rc && n)
		rc = artifact_client(cfg, &cl, err);
	/* Newest first: a version is removed only once its objects are gone. */
	for (size_t i = n; !rc && i-- > 0;) {
		struct isc_manifest m;
		if (isc_manifest_from_json(rows[i].json, &m, err) == 0) {
			for (size_t k = 0; !rc && k < m.n; k++) {
				const char *key = m.entries[k].key;
				/* Only this experiment's own keys, whatever a manifest says. */
				if (!key || strncmp(key, prefix, strlen(prefix)))
					continue;
				if (!(rc = isc_s3_delete(cl, cfg->artifact_s3_bucket, key, err)))
					(*objects)++;
			}
			isc_manifest_cleanup(&m);
		}
		if (!rc)
			rc = isc_store_manifest_delete(s, experiment_id, rows[i].version, err);
	}
	isc_manifest_row_list_free(rows, n);
	isc_s3_client_free(cl);
	free(prefix);
	return rc;
}
