/* SPDX-License-Identifier: MIT */
/* Unit tests for src/basic: the helpers every other module leans on. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base64.h"
#include "fileio.h"
#include "json-util.h"
#include "parse-util.h"
#include "random-util.h"
#include "string-util.h"
#include "time-util.h"
#include "utf8.h"

static void test_base64_roundtrips_every_length(void **state) {
        unsigned char buf[70];
        for (size_t i = 0; i < sizeof buf; i++)
                buf[i] = (unsigned char) (i * 37 + 11);
        for (size_t n = 0; n <= sizeof buf; n++) {
                _cleanup_free_ char *enc = NULL;
                _cleanup_free_ void *dec = NULL;
                size_t enclen, declen;

                assert_int_equal(base64_encode(buf, n, &enc, &enclen), 0);
                assert_int_equal(enclen % 4, 0);
                assert_int_equal(base64_decode(enc, enclen, 1024, &dec, &declen), 0);
                assert_int_equal(declen, n);
                assert_memory_equal(dec, buf, n);
        }
}

static void test_base64_known_vectors(void **state) {
        static const char *const vec[][2] = {
                { "", "" }, { "f", "Zg==" }, { "fo", "Zm8=" }, { "foo", "Zm9v" }, { "foobar", "Zm9vYmFy" },
        };
        for (size_t i = 0; i < ELEMENTSOF(vec); i++) {
                _cleanup_free_ char *enc = NULL;
                assert_int_equal(base64_encode(vec[i][0], strlen(vec[i][0]), &enc, NULL), 0);
                assert_string_equal(enc, vec[i][1]);
        }
}

static void test_base64_rejects_malformed_input(void **state) {
        static const char *const bad[] = { "Zg=", "Zg", "Z===", "Zm9v!A==", "Zm 9v", "Zh==", "Zm9=", "====", "Zg==Zg==" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                void *dec = NULL;
                size_t n;
                assert_int_equal(base64_decode(bad[i], strlen(bad[i]), 1024, &dec, &n), -EINVAL);
                assert_null(dec);
        }
}

static void test_base64_decode_enforces_the_size_limit(void **state) {
        void *dec = NULL;
        size_t n;
        assert_int_equal(base64_decode("Zm9vYmFy", 8, 5, &dec, &n), -EFBIG);
        assert_int_equal(base64_decode("Zm9vYmFy", 8, 6, &dec, &n), 0);
        free(dec);
}

static void test_utf8_validation(void **state) {
        assert_true(utf8_is_valid("plain", 5));
        assert_true(utf8_is_valid("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9));
        assert_false(utf8_is_valid("\xc0\xaf", 2));         /* overlong */
        assert_false(utf8_is_valid("\xed\xa0\x80", 3));     /* surrogate */
        assert_false(utf8_is_valid("\xf4\x90\x80\x80", 4)); /* > U+10FFFF */
        assert_false(utf8_is_valid("\xe2\x82", 2));         /* cut short */
        assert_int_equal(utf8_sequence_length((const unsigned char *) "\xe2\x82", 2), -1);
        assert_int_equal(utf8_sequence_length((const unsigned char *) "\xff", 1), 0);
}

static void test_utf8_sanitize_replaces_invalid_sequences(void **state) {
        _cleanup_free_ char *out = NULL;
        size_t n;
        assert_int_equal(utf8_sanitize("a\xff" "b\xe2\x82" "c", 6, &out, &n), 0);
        assert_string_equal(out, "a\xef\xbf\xbd" "b\xef\xbf\xbd" "c");
        assert_int_equal(n, strlen(out));
}

static void test_json_string_lossy_never_fails_on_bytes(void **state) {
        json_t *j = json_string_lossy("x\x80y", 3);
        assert_non_null(j);
        assert_string_equal(json_string_value(j), "x\xef\xbf\xbdy");
        json_decref(j);
}

static void test_parse_u64_is_strict(void **state) {
        uint64_t v;
        assert_int_equal(parse_u64("0", &v), 0);
        assert_int_equal(v, 0);
        assert_int_equal(parse_u64("18446744073709551615", &v), 0);
        assert_true(v == UINT64_MAX);
        assert_int_equal(parse_u64("18446744073709551616", &v), -ERANGE);
        assert_int_equal(parse_u64("-1", &v), -EINVAL);
        assert_int_equal(parse_u64(" 1", &v), -EINVAL);
        assert_int_equal(parse_u64("1x", &v), -EINVAL);
        assert_int_equal(parse_u64("", &v), -EINVAL);
}

static void test_parse_bytes_suffixes(void **state) {
        uint64_t v;
        assert_int_equal(parse_bytes("32M", &v), 0);
        assert_true(v == 32u * 1024 * 1024);
        assert_int_equal(parse_bytes("1GiB", &v), 0);
        assert_true(v == 1024u * 1024 * 1024);
        assert_int_equal(parse_bytes("4k", &v), 0);
        assert_true(v == 4096);
        assert_int_equal(parse_bytes("12", &v), 0);
        assert_true(v == 12);
        assert_int_equal(parse_bytes("1Q", &v), -EINVAL);
        assert_int_equal(parse_bytes("M", &v), -EINVAL);
        assert_int_equal(parse_bytes("99999999999T", &v), -ERANGE);
}

static void test_parse_status_field_finds_whole_field_names(void **state) {
        const char *text = "Name:\tsandloom\nVmRSSx:\t1 kB\nVmRSS:\t  2048 kB\nThreads:\t7\nBad:\tx\n";
        uint64_t v = 0;

        assert_int_equal(parse_status_field(text, "VmRSS", &v), 0);
        assert_true(v == 2048);
        assert_int_equal(parse_status_field(text, "Threads", &v), 0);
        assert_true(v == 7);
        assert_int_equal(parse_status_field(text, "Vm", &v), -ENODATA);
        assert_int_equal(parse_status_field(text, "Missing", &v), -ENODATA);
        assert_int_equal(parse_status_field(text, "Bad", &v), -EBADMSG);
        assert_int_equal(parse_status_field("", "VmRSS", &v), -ENODATA);
}

static void test_unescape_octal_as_mountinfo_writes_it(void **state) {
        char s[] = "/mnt/a\\040b\\011c\\134d\\12x\\999";

        string_unescape_octal(s);
        /* \040 space, \011 tab, \134 backslash; a short or non-octal escape is kept as is */
        assert_string_equal(s, "/mnt/a b\tc\\d\\12x\\999");
}

static void test_consttime_compare(void **state) {
        assert_true(memeq_consttime("abc", 3, "abc", 3));
        assert_false(memeq_consttime("abc", 3, "abd", 3));
        assert_false(memeq_consttime("abc", 3, "abcd", 4));
        assert_false(memeq_consttime("", 0, "a", 1));
        assert_true(memeq_consttime("", 0, "", 0));
}

static void test_strscpy_and_bsprintf_report_truncation(void **state) {
        char b[4];
        assert_int_equal(strscpy(b, sizeof b, "abc"), 0);
        assert_int_equal(strscpy(b, sizeof b, "abcd"), -ENAMETOOLONG);
        assert_string_equal(b, "abc");
        assert_int_equal(bsprintf(b, sizeof b, "%d", 123), 0);
        assert_int_equal(bsprintf(b, sizeof b, "%d", 1234), -ENAMETOOLONG);
}

static void test_random_range_stays_in_bounds(void **state) {
        for (int i = 0; i < 1000; i++) {
                uint64_t v;
                assert_int_equal(random_range_u64(5, 7, &v), 0);
                assert_true(v >= 5 && v <= 7);
        }
        char hex[33];
        assert_int_equal(random_hex(hex, sizeof hex, 16), 0);
        assert_int_equal(strlen(hex), 32);
        assert_int_equal(random_hex(hex, 32, 16), -EINVAL);
}

static void test_write_file_atomic_then_read(void **state) {
        char dir[] = "/tmp/sandloom-test-XXXXXX";
        _cleanup_close_ int dfd = -EBADF;
        _cleanup_free_ char *data = NULL;
        struct stat st;
        size_t n;

        assert_non_null(mkdtemp(dir));
        dfd = open(dir, O_DIRECTORY | O_CLOEXEC);
        assert_true(dfd >= 0);
        assert_int_equal(write_file_atomic_at(dfd, "f", "hello", 5, 0600), 0);
        assert_int_equal(read_full_file_at(dfd, "f", 100, &data, &n), 0);
        assert_string_equal(data, "hello");
        assert_int_equal(fstatat(dfd, "f", &st, 0), 0);
        assert_int_equal(st.st_mode & 07777, 0600);
        free(TAKE_PTR(data));
        assert_int_equal(read_full_file_at(dfd, "f", 4, &data, &n), -EFBIG);
        assert_int_equal(symlinkat("f", dfd, "link"), 0);
        assert_int_equal(read_full_file_at(dfd, "link", 100, &data, &n), -ELOOP);
        (void) unlinkat(dfd, "f", 0);
        (void) unlinkat(dfd, "link", 0);
        (void) rmdir(dir);
}

static void test_format_timestamp_is_rfc3339_utc(void **state) {
        char buf[TIMESTAMP_MAX];
        assert_int_equal(format_timestamp(buf, sizeof buf, UINT64_C(1700000000123456)), 0);
        assert_string_equal(buf, "2023-11-14T22:13:20.123456Z");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_base64_roundtrips_every_length),
                cmocka_unit_test(test_base64_known_vectors),
                cmocka_unit_test(test_base64_rejects_malformed_input),
                cmocka_unit_test(test_base64_decode_enforces_the_size_limit),
                cmocka_unit_test(test_utf8_validation),
                cmocka_unit_test(test_utf8_sanitize_replaces_invalid_sequences),
                cmocka_unit_test(test_json_string_lossy_never_fails_on_bytes),
                cmocka_unit_test(test_parse_u64_is_strict),
                cmocka_unit_test(test_parse_bytes_suffixes),
                cmocka_unit_test(test_parse_status_field_finds_whole_field_names),
                cmocka_unit_test(test_unescape_octal_as_mountinfo_writes_it),
                cmocka_unit_test(test_consttime_compare),
                cmocka_unit_test(test_strscpy_and_bsprintf_report_truncation),
                cmocka_unit_test(test_random_range_stays_in_bounds),
                cmocka_unit_test(test_write_file_atomic_then_read),
                cmocka_unit_test(test_format_timestamp_is_rfc3339_utc),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
