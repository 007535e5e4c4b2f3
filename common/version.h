/*
 * What this build is: the release version and the git commit it was built
 * from (the Makefile passes both; a tarball made by `git archive` carries its
 * commit in the COMMIT file, so a build without git still knows it).
 */
#ifndef ISC_COMMON_VERSION_H
#define ISC_COMMON_VERSION_H

/* "0.1.0". */
const char *isc_version(void);
/* Short commit id, with "-dirty" when the tree had uncommitted changes; "unknown" if none. */
const char *isc_build_commit(void);

#endif
