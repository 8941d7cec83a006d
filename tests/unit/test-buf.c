/* SPDX-License-Identifier: MIT */
/* Unit tests for the shared small helpers: Buf (src/basic/buf.c), json_string_is_text() and
 * string_is_printable(). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "buf.h"
#include "json-util.h"
#include "string-util.h"

static void test_buf_appends_and_terminates(void **state) {
        Buf b = BUF_INIT(1024 * 1024);
        char big[5000];

        assert_null(b.data);
        assert_int_equal(buf_append(&b, "abc", 3), 0);
        assert_int_equal(b.size, 3);
        assert_string_equal(b.data, "abc");
        assert_int_equal(buf_append(&b, "", 0), 0);
        assert_int_equal(b.size, 3);
        memset(big, 'x', sizeof big);
        assert_int_equal(buf_append(&b, big, sizeof big), 0); /* grows past the first allocation */
        assert_int_equal(b.size, 3 + sizeof big);
        assert_true(b.alloc > b.size);
        assert_memory_equal(b.data, "abc", 3);
        assert_memory_equal(b.data + 3, big, sizeof big);
        assert_int_equal(b.data[b.size], '\0');
        /* embedded NUL bytes are kept: SIZE counts them */
        assert_int_equal(buf_append(&b, "\0z", 2), 0);
        assert_int_equal(b.size, 5005);
        assert_int_equal(b.data[5004], 'z');
        buf_free(&b);
        assert_null(b.data);
        assert_int_equal(b.size, 0);
}

static void test_buf_reserve_zero_gives_an_empty_string(void **state) {
        Buf b = BUF_INIT(16);

        assert_int_equal(buf_reserve(&b, 0), 0);
        assert_non_null(b.data);
        assert_string_equal(b.data, "");
        buf_free(&b);
}

static void test_buf_cap_is_exact(void **state) {
        Buf b = BUF_INIT(10);
        char *p;

        assert_int_equal(buf_append(&b, "0123456789", 10), 0); /* exactly the cap */
        assert_int_equal(b.size, 10);
        assert_true(b.alloc <= 11);                            /* never allocates past the cap */
        assert_int_equal(buf_append(&b, "x", 1), -EFBIG);
        assert_int_equal(buf_reserve(&b, 1), -EFBIG);
        assert_int_equal(buf_reserve(&b, 0), 0);
        assert_int_equal(b.size, 10);                          /* a refused append changes nothing */
        assert_string_equal(b.data, "0123456789");

        buf_clear(&b);                                         /* memory kept, room again */
        assert_int_equal(b.size, 0);
        assert_string_equal(b.data, "");
        assert_int_equal(buf_append(&b, "01234", 5), 0);
        assert_int_equal(buf_append(&b, "567890", 6), -EFBIG); /* 11 > 10 */
        assert_int_equal(buf_append(&b, "56789", 5), 0);
        assert_string_equal(b.data, "0123456789");

        p = buf_steal(&b);
        assert_string_equal(p, "0123456789");
        assert_null(b.data);
        assert_int_equal(b.size, 0);
        free(p);
        assert_null(buf_steal(&b));
}

static void test_buf_refuses_sizes_that_would_overflow(void **state) {
        Buf b = BUF_INIT(SIZE_MAX - 1);

        assert_int_equal(buf_append(&b, "ab", 2), 0);
        /* size + extra (+ NUL) would wrap around: refused, not a tiny allocation */
        assert_int_equal(buf_reserve(&b, SIZE_MAX), -EFBIG);
        assert_int_equal(buf_reserve(&b, SIZE_MAX - 2), -EFBIG);
        assert_int_equal(b.size, 2);
        assert_string_equal(b.data, "ab");
        buf_free(&b);

        b = BUF_INIT(0); /* a cap of 0: only the empty string */
        assert_int_equal(buf_append(&b, "a", 1), -EFBIG);
        assert_int_equal(buf_append(&b, "", 0), 0);
        assert_string_equal(b.data, "");
        buf_free(&b);
}

static void test_json_string_is_text(void **state) {
        json_t *s = json_string("plain"), *nul = json_stringn("a\0b", 3), *n = json_integer(1);
        json_t *empty = json_string("");

        assert_true(json_string_is_text(s));
        assert_true(json_string_is_text(empty));
        assert_false(json_string_is_text(nul)); /* an embedded NUL would cut the C string */
        assert_false(json_string_is_text(n));
        assert_false(json_string_is_text(NULL));
        json_decref(s);
        json_decref(nul);
        json_decref(n);
        json_decref(empty);
}

static void test_string_is_printable(void **state) {
        assert_true(string_is_printable(""));
        assert_true(string_is_printable("ordinary text, ümlaut \xe2\x82\xac"));
        assert_true(string_is_printable("\xc2\xa0")); /* U+00A0 is not a control */
        assert_false(string_is_printable("tab\there"));
        assert_false(string_is_printable("nl\n"));
        assert_false(string_is_printable("del\x7f"));
        assert_false(string_is_printable("c1 \xc2\x80"));
        assert_false(string_is_printable("c1 \xc2\x9f"));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_buf_appends_and_terminates),
                cmocka_unit_test(test_buf_reserve_zero_gives_an_empty_string),
                cmocka_unit_test(test_buf_cap_is_exact),
                cmocka_unit_test(test_buf_refuses_sizes_that_would_overflow),
                cmocka_unit_test(test_json_string_is_text),
                cmocka_unit_test(test_string_is_printable),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
