/*
 * The dataset cache (datasets.h): download in ranged pieces, verify against the
 * ETag, expand archives safely, publish the shared copy and its manifest; and
 * the cacher thread that does it in iscd.
 */
#include "datasets/datasets_int.h"

#include "artifacts/unpack.h"
#include "common/clock.h"
#include "common/log.h"
#include "datasets/download.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
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

int dataset_mkdir_p(const char *path, struct isc_err *err)
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

char *dataset_path_join(const char *a, const char *b)
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
		    dataset_copy_paths(root, &donors[i], &tree, NULL, NULL, NULL) == 0 &&
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
	if ((rc = dataset_copy_paths(root, d, &final, &mpath, &work, err)))
		goto out;
	if (!(tree = dataset_path_join(work, "tree"))) {
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
		if ((rc = dataset_list_all(c, d->bucket, d->key, &objs, err)))
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
	if ((rc = dataset_mkdir_p(work, err)) || (rc = isc_unpack_remove_tree(tree, err)) ||
	    (rc = dataset_mkdir_p(tree, err)))
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
		if (!(dl = dataset_path_join(work, name))) {
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
			char *dst = dataset_path_join(tree, leaf);
			char *slash = dst ? strrchr(dst, '/') : NULL;
			if (!dst) {
				rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
				goto out;
			}
			*slash = '\0';
			rc = dataset_mkdir_p(dst, err);
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
		rc = dataset_mkdir_p(mdir, err);
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

/* ---- the cacher thread ---- */

struct isc_dataset_cacher {
	pthread_t thread;
	char *home;
	volatile int stop;
};

/* The kick: a count under a lock, so a kick between two looks is never lost. */
static pthread_mutex_t kick_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t kick_cv;
static pthread_once_t kick_once = PTHREAD_ONCE_INIT;

/* The kick's condition waits on the monotonic clock (common/clock.h): a stepped wall clock
 * neither cuts the idle wait short nor stretches it. */
static void kick_cv_init(void)
{
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&kick_cv, &ca);
	pthread_condattr_destroy(&ca);
}
static unsigned long kicks;

void isc_dataset_cacher_kick(void)
{
	pthread_once(&kick_once, kick_cv_init);
	pthread_mutex_lock(&kick_mu);
	kicks++;
	pthread_cond_broadcast(&kick_cv);
	pthread_mutex_unlock(&kick_mu);
}

/* Waits up to ms for a kick after `seen` (or a stop); returns the kicks now. */
static unsigned long kick_wait(struct isc_dataset_cacher *c, unsigned long seen, long ms)
{
	struct timespec until = isc_monotonic_deadline(ms);
	unsigned long now;
	pthread_once(&kick_once, kick_cv_init);
	pthread_mutex_lock(&kick_mu);
	while (kicks == seen && !c->stop)
		if (pthread_cond_timedwait(&kick_cv, &kick_mu, &until) != 0)
			break;
	now = kicks;
	pthread_mutex_unlock(&kick_mu);
	return now;
}

static void *cacher_main(void *arg)
{
	struct isc_dataset_cacher *c = arg;
	struct isc_store *s = NULL;
	struct isc_config *cfg = NULL;
	struct isc_err err;

	/*
	 * ISC_DATASET_CACHER_IDLE_MS: the idle look's interval, for tests only (a long
	 * one shows that an added dataset starts on the kick, not on the look).
	 */
	const char *idle = getenv("ISC_DATASET_CACHER_IDLE_MS");
	long idle_ms = idle && atol(idle) > 0 ? atol(idle) : 1000;

	isc_err_clear(&err);
	if (isc_store_open(c->home, 0, &s, &err) || isc_config_load(c->home, &cfg, &err)) {
		isc_log(ISC_LOG_ERROR, "dataset cacher: %s", err.msg);
		goto out;
	}
	while (!c->stop) {
		int did = 0;
		unsigned long seen;
		pthread_mutex_lock(&kick_mu);
		seen = kicks; /* a kick from here on is a reason to look again */
		pthread_mutex_unlock(&kick_mu);
		if (isc_dataset_cache_next(s, cfg, c->home, &c->stop, &did, &err))
			isc_log(ISC_LOG_WARN, "dataset cacher: %s", err.msg);
		/*
		 * Idle: look again when kicked (a dataset added in this process), else in
		 * a second (another replica's API); after a retryable failure in 15 s.
		 * A stop kicks too.
		 */
		if (did != 1)
			kick_wait(c, seen, did == 2 ? 15000 : idle_ms);
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
	isc_dataset_cacher_kick();
	pthread_join(c->thread, NULL);
	free(c->home);
	free(c);
}
