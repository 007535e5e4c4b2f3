/*
 * The datasets module's own header: what its rooms share. datasets.c holds names,
 * S3 access, registration and the burst nodes' fetch plan; datasets_cache.c the
 * cache (download, verify, expand, publish) and its thread; datasets_layout.c the
 * move of stores laid out before issue 29. Not for other modules.
 */
#ifndef ISC_DATASETS_DATASETS_INT_H
#define ISC_DATASETS_DATASETS_INT_H

#include "datasets/datasets.h"
#include "providers/aws/s3.h"

/*
 * The paths of d's copy under root: the tree, its manifest and its download
 * folder, all inside the organisation's own folder root/@ORGID. A copy name
 * that does not name d's organisation is refused. Any out may be NULL.
 */
int dataset_copy_paths(const char *root, const struct isc_dataset *d, char **tree, char **manifest,
                       char **partial, struct isc_err *err);
/* The S3 client of a recorded dataset (its own keys opened only while it is made). */
int dataset_client(struct isc_store *s, const char *home, const struct isc_config *cfg,
                   const struct isc_dataset *d, struct isc_s3_client **out, struct isc_err *err);
/* Every object under prefix (directory markers left out), all pages. */
int dataset_list_all(struct isc_s3_client *c, const char *bucket, const char *prefix,
                     struct isc_s3_listing *all, struct isc_err *err);
/* mkdir -p, 0700 for what it makes. */
int dataset_mkdir_p(const char *path, struct isc_err *err);
/* a "/" b, owned; NULL when out of memory. */
char *dataset_path_join(const char *a, const char *b);

#endif
