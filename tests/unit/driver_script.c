/* The driver unit tests' scripted replies (tests/unit/driver_script.h). */
#include "tests/unit/driver_script.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct driver_script driver_script;

void driver_script_reset(void)
{
	for (size_t i = 0; i < driver_script.n; i++) {
		free(driver_script.steps[i].body);
		free(driver_script.steps[i].headers);
	}
	memset(&driver_script, 0, sizeof(driver_script));
}

void driver_script_reply(long status, const char *headers, const char *fmt, ...)
{
	struct driver_script *s = &driver_script;
	va_list ap;
	assert_true(s->n < DRIVER_SCRIPT_MAX);
	va_start(ap, fmt);
	assert_true(vasprintf(&s->steps[s->n].body, fmt, ap) >= 0);
	va_end(ap);
	assert_non_null(s->steps[s->n].headers = strdup(headers ? headers : ""));
	s->steps[s->n++].status = status;
}

int driver_script_answer(const struct isc_http_request *req, size_t call, const char *how,
                         struct isc_http_response *resp, struct isc_err *err)
{
	struct driver_script *s = &driver_script;
	if (s->pos >= s->n && s->repeat_last && s->n)
		s->pos = s->n - 1;
	if (s->pos >= s->n) {
		print_error("unscripted call %zu: %s %s\n", call, req->method, req->url);
		fail();
	}
	if (s->steps[s->pos].status == 0) {
		s->pos++;
		return isc_err_set(err, ISC_ETRANSIENT, "cannot reach %s: Connection %s", req->url,
		                   how);
	}
	resp->status = s->steps[s->pos].status;
	if (s->steps[s->pos].headers[0])
		isc_buf_puts(&resp->headers, s->steps[s->pos].headers);
	return isc_buf_puts(&resp->body, s->steps[s->pos++].body);
}
