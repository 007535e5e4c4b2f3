/*
 * launcher/tail.h: what the launcher keeps of a node's output. 100 MiB streamed
 * through it in uneven pieces leaves exactly its last 4 KiB, in fixed memory;
 * the exit code is read from the last line only.
 */
#include "launcher/tail.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#define HEAP_BY_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HEAP_BY_ASAN 1
#endif
#endif
#ifdef HEAP_BY_ASAN
/* libasan's own count of live heap bytes (sanitizer/allocator_interface.h, not always
 * installed); under ASan, mallinfo2 does not see its allocator. */
size_t __sanitizer_get_current_allocated_bytes(void);
#endif

static size_t heap_in_use(void)
{
#ifdef HEAP_BY_ASAN
	return __sanitizer_get_current_allocated_bytes();
#else
	return mallinfo2().uordblks;
#endif
}

/* Byte i of the stream: a pattern that tells positions apart. */
static char stream_byte(uint64_t i)
{
	return (char)('a' + (i * 7 + i / 4099) % 26);
}

static void test_100_mib_keeps_the_tail_in_fixed_memory(void **state)
{
	const uint64_t total = 100ull * 1024 * 1024;
	static const size_t pieces[] = {1, 7, 4095, 4096, 4097, 16384, 65537, 3};
	struct isc_tail *t = malloc(sizeof(*t));
	char *chunk = malloc(70000);
	uint64_t off = 0;
	size_t base, peak = 0, k = 0;
	(void)state;

	assert_non_null(t);
	assert_non_null(chunk);
	isc_tail_init(t);
	base = heap_in_use();
	while (off < total) {
		size_t n = pieces[k++ % (sizeof(pieces) / sizeof(pieces[0]))], now;
		if (n > total - off)
			n = (size_t)(total - off);
		for (size_t i = 0; i < n; i++)
			chunk[i] = stream_byte(off + i);
		isc_tail_add(t, chunk, n);
		off += n;
		if ((now = heap_in_use()) > peak)
			peak = now;
	}
	assert_true(peak <= base); /* not one byte more than before the stream */
	assert_int_equal(t->total, total);
	assert_int_equal(t->len, ISC_TAIL_MAX);
	for (size_t i = 0; i < ISC_TAIL_MAX; i++)
		assert_int_equal(t->data[i], stream_byte(total - ISC_TAIL_MAX + i));
	assert_int_equal(strlen(isc_tail_cstr(t)), ISC_TAIL_MAX);
	free(chunk);
	free(t);
}

static void test_short_output_is_kept_whole(void **state)
{
	struct isc_tail t;
	(void)state;
	isc_tail_init(&t);
	assert_string_equal(isc_tail_cstr(&t), "");
	isc_tail_add(&t, "docker: ", 8);
	isc_tail_add(&t, "pull access denied\r\n\n", 21);
	isc_tail_trim(&t);
	assert_string_equal(isc_tail_cstr(&t), "docker: pull access denied");
	assert_int_equal(t.total, 29);
}

static void test_exit_code_is_the_last_line(void **state)
{
	struct isc_tail t;
	(void)state;
	isc_tail_init(&t);
	assert_int_equal(isc_tail_last_int(&t), -1);
	isc_tail_add(&t, "0\n", 2);
	assert_int_equal(isc_tail_last_int(&t), 0);
	isc_tail_init(&t);
	isc_tail_add(&t, "xxxx\nyyyy\n137\n", 14);
	assert_int_equal(isc_tail_last_int(&t), 137);
	isc_tail_init(&t);
	isc_tail_add(&t, "3\njunk", 6);
	assert_int_equal(isc_tail_last_int(&t), -1); /* the last line decides */
	isc_tail_init(&t);
	isc_tail_add(&t, "99999999999999999999\n", 21);
	assert_int_equal(isc_tail_last_int(&t), -1);
	isc_tail_init(&t);
	isc_tail_add(&t, "1-2\n", 4);
	assert_int_equal(isc_tail_last_int(&t), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_100_mib_keeps_the_tail_in_fixed_memory),
	    cmocka_unit_test(test_short_output_is_kept_whole),
	    cmocka_unit_test(test_exit_code_is_the_last_line),
	};
	return cmocka_run_group_tests_name("tail", tests, NULL, NULL);
}
