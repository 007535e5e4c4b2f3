/*
 * The scripted replies the driver unit tests (test_aws_driver, test_gcp_driver,
 * test_oci) answer their driver's HTTP calls with, in the order given: no network.
 * Each test file's transport records the request details its asserts read, then
 * hands the reply to driver_script_answer.
 */
#ifndef ISC_TESTS_UNIT_DRIVER_SCRIPT_H
#define ISC_TESTS_UNIT_DRIVER_SCRIPT_H

#include "common/err.h"
#include "net/http.h"

#include <stddef.h>

#define DRIVER_SCRIPT_MAX 64

struct driver_script {
	struct {
		long status;   /* 0: the connection fails */
		char *body;    /* owned */
		char *headers; /* owned; the reply's header block ("" for none) */
	} steps[DRIVER_SCRIPT_MAX];
	size_t n, pos;
	int repeat_last; /* calls past the script get its last reply again (batching) */
};

extern struct driver_script driver_script;

/* Forgets every reply (and repeat_last). */
void driver_script_reset(void);
/* Appends a reply: status, its header block (NULL: none) and printf-style body. */
void driver_script_reply(long status, const char *headers, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define reply(status, ...)            driver_script_reply(status, NULL, __VA_ARGS__)
#define reply_h(status, headers, ...) driver_script_reply(status, headers, __VA_ARGS__)

/*
 * The next reply into resp, for call number call (1-based, for the failure
 * message). A call the script has no reply for fails the test, naming it; a
 * status 0 is "cannot reach URL: Connection <how>" (ISC_ETRANSIENT).
 */
int driver_script_answer(const struct isc_http_request *req, size_t call, const char *how,
                         struct isc_http_response *resp, struct isc_err *err);

#endif
