/* SPDX-License-Identifier: MIT */
/* files_normalize_path: the lexical half of the files API's path rules. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <string.h>

#include "files.h"

typedef struct Case {
        const char *in;
        const char *out;          /* NULL: refused */
        unsigned status;          /* for refusals */
} Case;

static void check_case(const char *in, size_t inlen, const char *want, unsigned status) {
        char out[PATH_MAX] = "untouched";
        Error e = ERROR_INIT;
        int r;

        r = files_normalize_path(in, inlen, out, sizeof out, &e);
        if (want) {
                if (r != 0)
                        fail_msg("'%s': refused (%u %s: %s)", in, e.status, e.code, e.message);
                assert_string_equal(out, want);
                assert_int_equal(e.status, 0);
        } else {
                if (r >= 0)
                        fail_msg("'%s': accepted as '%s'", in, out);
                assert_int_equal(e.status, status);
                assert_string_equal(out, "untouched");        /* ret_ untouched on failure */
                assert_string_equal(e.code, status == 422 ? "SANDBOX_INVALID_REQUEST" : "SANDBOX_PATH_OUTSIDE_WORKSPACE");
        }
}

static void test_normalisation_table(void **state) {
        static const Case cases[] = {
                { "a.txt", "/workspace/a.txt", 0 },
                { "", "/workspace", 0 },
                { ".", "/workspace", 0 },
                { "./a/./b", "/workspace/a/b", 0 },
                { "a/../b", "/workspace/b", 0 },
                { "a//b///c", "/workspace/a/b/c", 0 },
                { "a/b/", "/workspace/a/b", 0 },
                { "/workspace", "/workspace", 0 },
                { "/workspace/", "/workspace", 0 },
                { "//workspace//x//", "/workspace/x", 0 },
                { "/home/sandbox", "/home/sandbox", 0 },
                { "/home/sandbox/.bashrc", "/home/sandbox/.bashrc", 0 },
                { "/cache", "/cache", 0 },
                { "/cache/pip/x", "/cache/pip/x", 0 },
                { "/envs", "/envs", 0 },
                { "/envs/py/bin", "/envs/py/bin", 0 },
                { "/cache/../workspace/a", "/workspace/a", 0 },
                { "/../../workspace/a", "/workspace/a", 0 },           /* ".." above / stays at / */
                { "/workspace/a/../../workspace/b", "/workspace/b", 0 },
                { "...", "/workspace/...", 0 },
                { "..a", "/workspace/..a", 0 },
                { "/workspace/..a", "/workspace/..a", 0 },

                { "..", NULL, 400 },
                { "../etc/passwd", NULL, 400 },
                { "a/../../x", NULL, 400 },
                { "/", NULL, 400 },
                { "/etc/passwd", NULL, 400 },
                { "/home", NULL, 400 },
                { "/home/other", NULL, 400 },
                { "/home/sandboxx", NULL, 400 },
                { "/workspacex", NULL, 400 },
                { "/cachex/a", NULL, 400 },
                { "/envs2", NULL, 400 },
                { "/workspace/../etc", NULL, 400 },
                { "/workspace/a/../../../etc", NULL, 400 },
                { "/proc/self/root", NULL, 400 },
        };

        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
                check_case(cases[i].in, strlen(cases[i].in), cases[i].out, cases[i].status);
}

static void test_nul_byte_is_a_validation_error(void **state) {
        static const char in[] = "/workspace/a\0/../../etc";

        check_case(in, sizeof in - 1, NULL, 422);
}

static void test_over_long_path_is_a_validation_error(void **state) {
        char buf[PATH_MAX + 16];

        /* 4095 bytes is fine, 4096 is not. */
        memset(buf, 'a', sizeof buf);
        memcpy(buf, "/workspace/", 11);
        for (size_t i = 11; i < sizeof buf; i += 200)
                buf[i] = '/';
        buf[PATH_MAX - 1] = '\0';
        {
                char out[PATH_MAX];
                Error e = ERROR_INIT;
                assert_int_equal(files_normalize_path(buf, strlen(buf), out, sizeof out, &e), 0);
        }
        buf[PATH_MAX - 1] = 'a';
        buf[PATH_MAX] = '\0';
        check_case(buf, strlen(buf), NULL, 422);
}

static void test_relative_path_too_long_after_prefix_is_refused(void **state) {
        char buf[PATH_MAX];

        /* 4090 bytes relative, becomes > 4095 with "/workspace/". */
        memset(buf, 'b', 4090);
        for (size_t i = 100; i < 4090; i += 200)
                buf[i] = '/';
        buf[4090] = '\0';
        check_case(buf, strlen(buf), NULL, 422);
}

static void test_long_component_is_a_validation_error(void **state) {
        char buf[512];

        memcpy(buf, "/workspace/", 11);
        memset(buf + 11, 'c', 255);
        buf[11 + 255] = '\0';
        {
                char out[PATH_MAX];
                Error e = ERROR_INIT;
                assert_int_equal(files_normalize_path(buf, strlen(buf), out, sizeof out, &e), 0);
        }
        memset(buf + 11, 'c', 256);
        buf[11 + 256] = '\0';
        check_case(buf, strlen(buf), NULL, 422);
        /* Even a long component that ".." would remove is refused: lengths are checked first. */
        memcpy(buf + 11 + 256, "/..", 4);
        check_case(buf, strlen(buf), NULL, 422);
}

static void test_validation_message_does_not_echo_the_path(void **state) {
        static const char in[] = "/workspace/secret-token-value\0x";
        char out[PATH_MAX];
        Error e = ERROR_INIT;

        assert_true(files_normalize_path(in, sizeof in - 1, out, sizeof out, &e) < 0);
        assert_null(strstr(e.message, "secret-token-value"));
}

static void test_small_output_buffer_is_refused(void **state) {
        char out[8];
        Error e = ERROR_INIT;

        assert_int_equal(files_normalize_path("a", 1, out, sizeof out, &e), -ENAMETOOLONG);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_normalisation_table),
                cmocka_unit_test(test_nul_byte_is_a_validation_error),
                cmocka_unit_test(test_over_long_path_is_a_validation_error),
                cmocka_unit_test(test_relative_path_too_long_after_prefix_is_refused),
                cmocka_unit_test(test_long_component_is_a_validation_error),
                cmocka_unit_test(test_validation_message_does_not_echo_the_path),
                cmocka_unit_test(test_small_output_buffer_is_refused),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
