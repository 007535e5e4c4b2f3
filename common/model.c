/* The shared model's rules (common/model.h). */
#include "common/model.h"

#include <string.h>

int isc_status_is_final(const char *status)
{
	static const char *const finals[] = {"completed", "failed", "cancelled", "stopped"};
	for (size_t i = 0; i < sizeof(finals) / sizeof(finals[0]); i++)
		if (strcmp(status, finals[i]) == 0)
			return 1;
	return 0;
}
