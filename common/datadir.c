#include "common/datadir.h"

/* The Makefile passes -DISC_DATADIR from PREFIX; a build without it gets its default. */
#ifndef ISC_DATADIR
#define ISC_DATADIR "/usr/local/share/isc"
#endif

const char *isc_data_dir(void)
{
	return ISC_DATADIR;
}
