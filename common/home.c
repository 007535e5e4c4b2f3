/* The home folder (common/home.h). */
#include "common/home.h"

#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char *isc_home_resolve(const char *explicit_home, struct isc_err *err)
{
	const char *env = getenv("ISC_HOME");
	const char *home;
	char *out;

	if (explicit_home && *explicit_home)
		return strdup(explicit_home);
	if (env && *env)
		return strdup(env);
	home = getenv("HOME");
	if (!home || !*home) {
		struct passwd *pw = getpwuid(getuid());
		home = pw ? pw->pw_dir : NULL;
	}
	if (!home) {
		isc_err_set(err, ISC_EINVALID,
		            "cannot find a home folder: set ISC_HOME or pass --home");
		return NULL;
	}
	if (asprintf(&out, "%s/.isc", home) < 0) {
		isc_err_set(err, ISC_ENOMEM, "out of memory");
		return NULL;
	}
	return out;
}
