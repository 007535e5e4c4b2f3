/* The build's identity; ISC_VERSION and ISC_COMMIT come from the Makefile. */
#include "common/version.h"

#ifndef ISC_VERSION
#define ISC_VERSION "0.0.0"
#endif
#ifndef ISC_COMMIT
#define ISC_COMMIT "unknown"
#endif

const char *isc_version(void)
{
	return ISC_VERSION;
}

const char *isc_build_commit(void)
{
	return ISC_COMMIT[0] ? ISC_COMMIT : "unknown";
}
