/* SPDX-License-Identifier: MIT */
/* Unit tests for the pure parts of an exec (src/core/exec-env.c): the environment, the
 * idempotency fingerprint, the exec key and the UTF-8 carry-over of output chunks. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec-env.h"
#include "macros.h"

static const uint8_t key_a[EXEC_KEY_SIZE] = { 1, 2, 3 };
static const uint8_t key_b[EXEC_KEY_SIZE] = { 9, 9, 9 };

static const char *env_get(char **envp, const char *name) {
        size_t n = strlen(name);

        for (size_t i = 0; envp[i]; i++)
                if (strncmp(envp[i], name, n) == 0 && envp[i][n] == '=')
                        return envp[i] + n + 1;
        return NULL;
}

static size_t env_count(char **envp, const char *name) {
        size_t n = strlen(name), c = 0;

        for (size_t i = 0; envp[i]; i++)
                if (strncmp(envp[i], name, n) == 0 && envp[i][n] == '=')
                        c++;
        return c;
}

static void test_env_has_the_defaults_without_request_variables(void **state) {
        char **envp = NULL;

        assert_int_equal(exec_env_build(NULL, NULL, 0, &envp), 0);
        assert_string_equal(env_get(envp, "PATH"), "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
        assert_string_equal(env_get(envp, "HOME"), "/home/sandbox");
        assert_string_equal(env_get(envp, "USER"), "sandbox");
        assert_string_equal(env_get(envp, "LOGNAME"), "sandbox");
        assert_string_equal(env_get(envp, "LANG"), "C.UTF-8");
        assert_string_equal(env_get(envp, "TMPDIR"), "/tmp");
        assert_string_equal(env_get(envp, "XDG_CACHE_HOME"), "/cache");
        assert_string_equal(env_get(envp, "PIP_CACHE_DIR"), "/cache/pip");
        assert_string_equal(env_get(envp, "npm_config_cache"), "/cache/npm");
        free(envp);
}

static void test_request_variables_are_added_and_win_over_defaults(void **state) {
        const char *names[] = { "FOO", "HOME", "EMPTY" }, *values[] = { "bar=baz", "/elsewhere", "" };
        char **envp = NULL;

        assert_int_equal(exec_env_build(names, values, 3, &envp), 0);
        assert_string_equal(env_get(envp, "FOO"), "bar=baz");
        assert_string_equal(env_get(envp, "HOME"), "/elsewhere");
        assert_int_equal(env_count(envp, "HOME"), 1);
        assert_string_equal(env_get(envp, "EMPTY"), "");
        assert_string_equal(env_get(envp, "USER"), "sandbox");
        free(envp);
}

static void test_env_refuses_bad_names_and_too_many(void **state) {
        const char *bad[] = { "1X" }, *v[] = { "x" };
        const char *names[EXEC_ENV_MAX + 1], *values[EXEC_ENV_MAX + 1];
        char **envp = NULL;

        assert_int_equal(exec_env_build(bad, v, 1, &envp), -EINVAL);
        for (size_t i = 0; i <= EXEC_ENV_MAX; i++) {
                names[i] = "A";
                values[i] = "b";
        }
        assert_int_equal(exec_env_build(names, values, EXEC_ENV_MAX + 1, &envp), -E2BIG);
        assert_null(envp);
}

static void test_env_name_rule(void **state) {
        char long_name[EXEC_ENV_NAME_MAX + 2];

        assert_true(exec_env_name_is_valid("A"));
        assert_true(exec_env_name_is_valid("_a9"));
        assert_true(exec_env_name_is_valid("npm_config_cache"));
        assert_false(exec_env_name_is_valid(""));
        assert_false(exec_env_name_is_valid("9A"));
        assert_false(exec_env_name_is_valid("A-B"));
        assert_false(exec_env_name_is_valid("A=B"));
        assert_false(exec_env_name_is_valid("A B"));
        memset(long_name, 'A', sizeof long_name - 1);
        long_name[sizeof long_name - 1] = '\0';
        assert_false(exec_env_name_is_valid(long_name));
        long_name[EXEC_ENV_NAME_MAX] = '\0';
        assert_true(exec_env_name_is_valid(long_name));
}

/* ---- fingerprint ---- */

typedef struct Fp {
        const char *argv[3];
        const char *names[2], *values[2];
        ExecFingerprintInput in;
} Fp;

static void fp_init(Fp *f) {
        *f = (Fp) {
                .argv = { "echo", "hi", NULL },
                .names = { "A", "B" },
                .values = { "1", "2" },
        };
        f->in = (ExecFingerprintInput) {
                .argv = f->argv, .argc = 2, .cwd = "/workspace",
                .env_names = f->names, .env_values = f->values, .envc = 2,
                .timeout_seconds = 300, .exec_scope = "s",
        };
}

static void fp(const uint8_t *key, const ExecFingerprintInput *in, char out[EXEC_FINGERPRINT_HEX + 1]) {
        ExecHmac *h = NULL;

        assert_int_equal(exec_hmac_new(key, &h), 0);
        assert_int_equal(exec_fingerprint(h, in, out), 0);
        exec_hmac_free(h);
        assert_int_equal(strlen(out), EXEC_FINGERPRINT_HEX);
        assert_int_equal(strspn(out, "0123456789abcdef"), EXEC_FINGERPRINT_HEX);
}

static void test_fingerprint_is_stable_and_ignores_env_order(void **state) {
        char a[65], b[65];
        Fp f, g;

        fp_init(&f);
        fp_init(&g);
        g.names[0] = "B";
        g.values[0] = "2";
        g.names[1] = "A";
        g.values[1] = "1";
        fp(key_a, &f.in, a);
        fp(key_a, &g.in, b);
        assert_string_equal(a, b);
}

static void test_fingerprint_changes_with_every_field(void **state) {
        char base[65], other[65];
        static const char data[] = "in";
        Fp f;

        fp_init(&f);
        fp(key_a, &f.in, base);

#define CHANGED(stmt)                                   \
        do {                                            \
                fp_init(&f);                            \
                stmt;                                   \
                fp(key_a, &f.in, other);                \
                assert_string_not_equal(base, other);   \
        } while (0)

        CHANGED(f.argv[1] = "ho");
        CHANGED(f.in.argc = 1);
        CHANGED(f.in.cwd = "/workspace/x");
        CHANGED(f.values[0] = "secret");        /* env values count, not just names */
        CHANGED(f.names[1] = "C");
        CHANGED(f.in.envc = 1);
        CHANGED(f.in.timeout_seconds = 301);
        CHANGED(f.in.background = true);
        CHANGED(f.in.exec_scope = NULL);
        CHANGED((f.in.has_stdin = true, f.in.stdin_data = data, f.in.stdin_size = 0));
        CHANGED((f.in.has_stdin = true, f.in.stdin_data = data, f.in.stdin_size = 2));
        CHANGED(f.in.output_base64 = true);
#undef CHANGED

        /* Length prefixes: moving a byte between two arguments is another command. */
        fp_init(&f);
        f.argv[0] = "ech";
        f.argv[1] = "ohi";
        fp(key_a, &f.in, other);
        assert_string_not_equal(base, other);
}

static void test_fingerprint_is_the_same_from_one_keyed_state_many_times(void **state) {
        char a[65], b[65];
        ExecHmac *h = NULL;
        Fp f;

        fp_init(&f);
        assert_int_equal(exec_hmac_new(key_a, &h), 0);
        assert_int_equal(exec_fingerprint(h, &f.in, a), 0);
        assert_int_equal(exec_fingerprint(h, &f.in, b), 0);
        assert_string_equal(a, b);
        exec_hmac_free(h);
        fp(key_a, &f.in, b);
        assert_string_equal(a, b);
}

static void test_fingerprint_depends_on_the_key(void **state) {
        char a[65], b[65];
        Fp f;

        fp_init(&f);
        fp(key_a, &f.in, a);
        fp(key_b, &f.in, b);
        assert_string_not_equal(a, b);
}

static void test_exec_key_is_created_once_with_mode_0600(void **state) {
        char dir[] = "/tmp/sandloom-test-key-XXXXXX";
        uint8_t k1[EXEC_KEY_SIZE], k2[EXEC_KEY_SIZE];
        struct stat st;
        int fd;

        assert_non_null(mkdtemp(dir));
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(exec_key_load(fd, k1), 0);
        assert_int_equal(fstatat(fd, "exec_key", &st, 0), 0);
        assert_int_equal(st.st_mode & 07777, 0600);
        assert_int_equal(st.st_size, EXEC_KEY_SIZE);
        assert_int_equal(exec_key_load(fd, k2), 0);
        assert_memory_equal(k1, k2, EXEC_KEY_SIZE);

        /* A file of the wrong size is refused, never silently replaced. */
        assert_int_equal(unlinkat(fd, "exec_key", 0), 0);
        int kf = openat(fd, "exec_key", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        assert_true(kf >= 0);
        assert_int_equal(write(kf, "short", 5), 5);
        close(kf);
        assert_int_equal(exec_key_load(fd, k2), -EBADMSG);
        assert_int_equal(unlinkat(fd, "exec_key", 0), 0);
        close(fd);
        assert_int_equal(rmdir(dir), 0);
}

/* ---- UTF-8 carry-over ---- */

static void test_complete_text_is_taken_whole(void **state) {
        assert_int_equal(exec_utf8_complete_prefix("abc", 3), 3);
        assert_int_equal(exec_utf8_complete_prefix("a\xc3\xa9", 3), 3);         /* é */
        assert_int_equal(exec_utf8_complete_prefix("\xe2\x82\xac", 3), 3);     /* € */
        assert_int_equal(exec_utf8_complete_prefix("\xf0\x9f\x98\x80", 4), 4); /* 😀 */
        assert_int_equal(exec_utf8_complete_prefix("", 0), 0);
}

static void test_a_sequence_cut_by_the_chunk_is_carried_over(void **state) {
        assert_int_equal(exec_utf8_complete_prefix("a\xc3", 2), 1);
        assert_int_equal(exec_utf8_complete_prefix("ab\xe2\x82", 4), 2);
        assert_int_equal(exec_utf8_complete_prefix("ab\xe2", 3), 2);
        assert_int_equal(exec_utf8_complete_prefix("x\xf0\x9f\x98", 4), 1);
        assert_int_equal(exec_utf8_complete_prefix("\xf0\x9f", 2), 0);
}

static void test_invalid_bytes_are_not_held_back(void **state) {
        /* Never valid: they become U+FFFD, waiting would not help. */
        assert_int_equal(exec_utf8_complete_prefix("a\xff", 2), 2);
        assert_int_equal(exec_utf8_complete_prefix("a\x80", 2), 2);
        assert_int_equal(exec_utf8_complete_prefix("a\xc0", 2), 2);            /* overlong lead */
        assert_int_equal(exec_utf8_complete_prefix("a\xed\xa0", 3), 3);        /* surrogate */
        assert_int_equal(exec_utf8_complete_prefix("\x80\x80\x80\x80", 4), 4);
}

static void test_carry_over_reassembles_a_split_character(void **state) {
        /* A stream "x€y" read in chunks of 2 bytes, re-reading from the carried offset. */
        const char stream[] = "x\xe2\x82\xacy";
        size_t off = 0, len = sizeof stream - 1;
        char out[16] = "";

        while (off < len) {
                size_t n = MIN((size_t) 2, len - off), take;

                take = exec_utf8_complete_prefix(stream + off, n);
                if (take == 0) {
                        /* Nothing complete in this window: the reader waits for more bytes. */
                        n = MIN(n + 2, len - off);
                        take = exec_utf8_complete_prefix(stream + off, n);
                }
                strncat(out, stream + off, take);
                off += take;
        }
        assert_string_equal(out, stream);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_env_has_the_defaults_without_request_variables),
                cmocka_unit_test(test_request_variables_are_added_and_win_over_defaults),
                cmocka_unit_test(test_env_refuses_bad_names_and_too_many),
                cmocka_unit_test(test_env_name_rule),
                cmocka_unit_test(test_fingerprint_is_stable_and_ignores_env_order),
                cmocka_unit_test(test_fingerprint_changes_with_every_field),
                cmocka_unit_test(test_fingerprint_is_the_same_from_one_keyed_state_many_times),
                cmocka_unit_test(test_fingerprint_depends_on_the_key),
                cmocka_unit_test(test_exec_key_is_created_once_with_mode_0600),
                cmocka_unit_test(test_complete_text_is_taken_whole),
                cmocka_unit_test(test_a_sequence_cut_by_the_chunk_is_carried_over),
                cmocka_unit_test(test_invalid_bytes_are_not_held_back),
                cmocka_unit_test(test_carry_over_reassembles_a_split_character),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
