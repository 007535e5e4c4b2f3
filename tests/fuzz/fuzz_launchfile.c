/*
 * libFuzzer target for launch-file validation: any bytes either validate (and then
 * serialize to JSON) or produce at least one positioned problem, never a crash,
 * leak or runaway. Problems are also formatted, as the CLI would print them.
 */
#include "common/buf.h"
#include "launchfile/launchfile.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct isc_launch_problems probs;
	struct isc_launch *l = NULL;
	struct isc_err err;
	struct isc_buf out;
	int rc;

	isc_launch_problems_init(&probs);
	rc = isc_launch_parse("fuzz.isc", (const char *)data, size, &l, &probs, &err);
	if (rc == 0) {
		json_t *j = isc_launch_to_json(l);
		char *s;
		if (!j || probs.len)
			__builtin_trap();
		s = json_dumps(j, 0);
		if (!s)
			__builtin_trap(); /* validated strings must be valid JSON strings */
		free(s);
		json_decref(j);
		isc_launch_free(l);
	} else if (rc == ISC_EINVALID) {
		if (probs.len == 0 || l)
			__builtin_trap();
		for (size_t i = 0; i < probs.len; i++)
			if (probs.items[i].line < 1 || probs.items[i].col < 1)
				__builtin_trap();
		isc_buf_init(&out, 0);
		isc_launch_problems_write(&probs, "fuzz.isc", &out);
		isc_buf_cleanup(&out);
	}
	isc_launch_problems_cleanup(&probs);
	return 0;
}
