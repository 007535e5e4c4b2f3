/* The move of a store's datasets laid out before issue 29 (datasets.h). */
#include "datasets/datasets_int.h"

#include "artifacts/unpack.h"
#include "common/log.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
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
	if (!(rc = dataset_mkdir_p(dir, err)) && rename(from, to) != 0)
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
	} else if (dataset_list_all(c, d->bucket, d->key, &all, &err) == 0 && all.n == n) {
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
		if ((rc = dataset_copy_paths(root, d, &tree, &mpath, &work, err)))
			break;
		from_tree = dataset_path_join(root, leaf);
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
		if (!(old = dataset_path_join(root, e->d_name))) {
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
