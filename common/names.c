#include "common/names.h"

#include <string.h>

int isc_name_valid(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	if (n == 0 || n > 64)
		return 0;
	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		if (*p <= ' ' || *p == 0x7f || *p == '/' || *p == '\\' || *p == ',')
			return 0;
	return 1;
}
