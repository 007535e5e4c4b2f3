/*
 * Where an isc home is: the folder of config.toml, the SQLite store, keys and
 * logs. Both programs resolve it the same way before anything else opens.
 */
#ifndef ISC_COMMON_HOME_H
#define ISC_COMMON_HOME_H

#include "common/err.h"

/* Resolves the home folder: explicit (--home), else $ISC_HOME, else ~/.isc. Caller frees. */
char *isc_home_resolve(const char *explicit_home, struct isc_err *err);

#endif
