/*
 * Datasets: S3 objects and folders an organisation registers once and every
 * experiment of the organisation mounts read-only at /data/<name>.
 *
 * Registration checks the object (or folder) exists, its size (at most
 * ISC_DATASET_MAX_BYTES, and within the volume size) and that a pinned ETag
 * or VersionId matches, then records it as 'created'. iscd's cacher thread
 * (off the tick loop) downloads it into its organisation's own folder,
 * $ISC_HOME/datasets/@ORGID/<NAME-ID>, in ranged pieces (resumable after a crash), verifies the
 * bytes against the ETag (MD5, or the part MD5s of a multipart upload), expands a recognised
 * archive with the safe unpacker, and writes a manifest (each object's key,
 * size, ETag and SHA-256) that burst nodes use to fetch the same bytes with
 * presigned URLs and verify them. See docs/datasets.md.
 */
#ifndef ISC_DATASETS_DATASETS_H
#define ISC_DATASETS_DATASETS_H

#include "common/err.h"
#include "config/config.h"
#include "keys/keys.h"
#include "store/store.h"
#include "store/store_datasets.h"

#include <stddef.h>
#include <stdint.h>

#define ISC_DATASET_MAX_BYTES       100000000000ULL /* 100 GB */
#define ISC_DATASET_DEFAULT_VOLUME  (5ULL << 30)    /* 5Gi */
#define ISC_DATASET_NAME_MAX        64
#define ISC_DATASET_MAX_FOLDER_KEYS 100000
#define ISC_DATASET_URL_EXPIRES_S   (6 * 3600) /* presigned URLs handed to burst nodes */

/* The recognised archive extension key ends with (".tar.gz", ".zip", ...), or NULL. */
const char *isc_dataset_archive_ext(const char *key);

/*
 * The default name: the basename of the last path item, without a recognised
 * archive extension ("s3://b/mnist.zip" -> "mnist", "s3://b/x/" -> "x",
 * "s3://b" -> "b"). Then checked like any name.
 */
int isc_dataset_default_name(const char *bucket, const char *key, char *out, size_t cap,
                             struct isc_err *err);

/* 1..64 of [A-Za-z0-9._-], not starting with '.' or '-'. */
int isc_dataset_name_check(const char *name, struct isc_err *err);

/*
 * The leaf of a dataset's copy: "NAME-ID" (unsafe characters become '_'). Named
 * after the dataset that makes it, so it is found only through that dataset; the
 * store records it as "@ORGID/NAME-ID", inside the organisation's folder.
 */
char *isc_dataset_copy_name(const char *name, const char *id);

/*
 * 0 when copy_name is "@ORG_ID/LEAF" for this very org_id, with a LEAF of
 * [A-Za-z0-9._-] not starting with '.' or '-' (*leaf, when given, points at it);
 * -1 otherwise. A dataset is only ever pointed at a copy of its organisation.
 */
int isc_dataset_copy_split(const char *copy_name, int64_t org_id, const char **leaf);

/* What `isc datasets add` asks for (POST /v1/datasets). */
struct isc_dataset_request {
	const char *org;
	const char *uri;         /* s3://bucket[/key] */
	const char *name;        /* NULL: the default name */
	const char *etag;        /* NULL: not pinned */
	const char *version_id;  /* NULL: not pinned */
	const char *volume_size; /* NULL: 5Gi */
	/*
	 * The dataset's own AWS keys (access_key_id, secret_access_key, session_token?),
	 * sealed with the record; NULL: the broker's own credentials.
	 */
	const struct isc_key_secret *secret;
};

/*
 * Checks the request against S3 (with its own keys when given) and records the
 * dataset ('created'), its keys sealed under the master key of the store in home
 * in the same transaction; out gets the record. ISC_EINVALID for bad input or a
 * size over the caps, ISC_ECONFLICT for a pinned ETag/VersionId S3 does not have
 * (or a taken name), ISC_ENOTFOUND for a missing bucket/object, ISC_EAUTH for
 * refused credentials. No message ever holds a secret.
 */
int isc_dataset_register(struct isc_store *s, const char *home, const struct isc_config *cfg,
                         const struct isc_dataset_request *req, struct isc_dataset *out,
                         struct isc_err *err);

/*
 * Removes a dataset (refused while it is Caching: ISC_ECONFLICT) and, when it was
 * the last dataset of its organisation to use it, its copy under home.
 */
int isc_dataset_remove(struct isc_store *s, const char *home, const struct isc_dataset *d,
                       struct isc_err *err);

/*
 * Where copies live: $ISC_HOME/datasets, one folder per organisation in it
 * (@ORGID/<copy>, @ORGID/.manifests/<copy>.json, @ORGID/.partial/<copy>). Caller frees.
 */
char *isc_dataset_root(const char *home);

/*
 * Moves the copies of the layout before issue 29 ($ISC_HOME/datasets/<copy>, one
 * folder for every organisation) into their organisations' folders, for the
 * datasets migration 15 left Available on them and only once S3 confirmed (with
 * each dataset's own keys, cfg's endpoint) that the copy holds that dataset's
 * object; a dataset S3 does not confirm goes back to 'created'. Then removes what
 * no dataset uses any more (partial downloads included: they restart). *moved:
 * how many copies moved. Idempotent; iscd runs it as the cacher starts.
 */
int isc_dataset_layout_migrate(struct isc_store *s, const char *home, const struct isc_config *cfg,
                               int *moved, struct isc_err *err);

/*
 * Caches the next dataset that needs it (resuming one left 'caching' by a
 * crash first). A single object may instead share the copy of another dataset of
 * the same organisation on the same bucket and key, once S3 has confirmed (a
 * HeadObject with this dataset's own credentials) that the object still has the
 * ETag and VersionId that copy holds. *did is 1 when there was one (done, or 'failed' with its
 * reason), 2 when S3 could not be reached or throttled past the retries (it
 * stays 'caching' and resumes on a later call), 0 when nothing was waiting.
 * *stop, when it becomes non-zero, ends the download early (the dataset stays
 * 'caching' and resumes next time).
 */
int isc_dataset_cache_next(struct isc_store *s, const struct isc_config *cfg, const char *home,
                           const volatile int *stop, int *did, struct isc_err *err);

/* The cacher thread of iscd: its own store connection, polling for work. */
struct isc_dataset_cacher;
int isc_dataset_cacher_start(const char *home, struct isc_dataset_cacher **out,
                             struct isc_err *err);
/* Asks the thread to stop, waits for it and frees. NULL is a no-op. */
void isc_dataset_cacher_stop(struct isc_dataset_cacher *c);
/*
 * Wakes this process's cacher to look for work now (a dataset was added): it
 * otherwise looks once a second, which was up to a second of a 2 s cache. A
 * cacher in another replica still finds the work at its next look.
 */
void isc_dataset_cacher_kick(void);

/*
 * The datasets of an experiment: each entry of dataset_ids resolved in org_name
 * (by name or id), each required to be 'available'. ISC_ENOTFOUND / ISC_ECONFLICT
 * with a message naming the entry.
 */
int isc_dataset_resolve_all(struct isc_store *s, const char *org_name, const char *const *ids,
                            size_t n, struct isc_dataset **out, struct isc_err *err);
/*
 * One entry of a dataset_id_list: id (a name or id) resolved in org_name into *out
 * (isc_dataset_cleanup), required to be 'available'. ISC_ENOTFOUND / ISC_ECONFLICT with
 * a message about the entry, without the field (iscd's launch checks give each entry its
 * line and column); other codes are the store's.
 */
int isc_dataset_resolve_one(struct isc_store *s, const char *org_name, const char *id,
                            struct isc_dataset *out, struct isc_err *err);

/*
 * How the cached bytes were checked against S3, from the manifest: each
 * object's "verified_by" ("ETag (MD5)", "ChecksumCRC32C (composite, 3 parts)",
 * "If-Match on every range (...)"), the distinct ones joined with "; " and
 * counted for a folder ("ETag (MD5): 1000 objects"). NULL before Available or
 * for a manifest written before this was recorded. Caller frees.
 */
char *isc_dataset_verified_summary(const struct isc_dataset *d);

/* One file a node fetches for a dataset (launcher/launcher.h takes these). */
struct isc_dataset_fetch_file {
	char *url;    /* presigned GET: a bearer credential for one object, never logged */
	char *etag;   /* sent as If-Match */
	char *sha256; /* of the object's bytes, as iscd verified them */
	char *path;   /* where it goes under the dataset's root ("" for an archive) */
	int archive;  /* 1: expand at the root instead of storing */
};

/*
 * Presigned URLs for every object of an available dataset's manifest, signed with
 * its own keys when it has them (opened with the master key of the store in home).
 */
int isc_dataset_fetch_plan(struct isc_store *s, const char *home, const struct isc_config *cfg,
                           const struct isc_dataset *d, long expires_s,
                           struct isc_dataset_fetch_file **out, size_t *n, struct isc_err *err);
void isc_dataset_fetch_plan_free(struct isc_dataset_fetch_file *files, size_t n);

#endif
