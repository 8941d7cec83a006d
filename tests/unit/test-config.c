/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

static void clear_env(void) {
        for (size_t i = 0; i < config_settings_count; i++)
                unsetenv(config_settings[i].env);
}

static int setup(void **state) {
        clear_env();
        return 0;
}

/* Loads ARGV (NULL-terminated) into C; returns config_load's result, ERR filled. */
static int load(Config *c, char *err, size_t errlen, const char *const *argv) {
        int argc = 0;
        char *out = NULL;
        size_t outlen = 0;
        FILE *f;
        int r;

        while (argv && argv[argc])
                argc++;
        f = open_memstream(&out, &outlen);
        assert_non_null(f);
        err[0] = '\0';
        r = config_load(c, argc, (char *const *) argv, f, err, errlen);
        fclose(f);
        free(out);
        return r;
}

static void test_defaults(void **state) {
        Config c;
        char err[256];

        assert_int_equal(load(&c, err, sizeof err, NULL), 0);
        assert_string_equal(c.listen, "127.0.0.1:8080");
        assert_string_equal(c.data_dir, "./data");
        assert_string_equal(c.worker_id, "");
        assert_string_equal(c.log_level, "info");
        assert_int_equal(c.http_threads, 0);
        assert_int_equal(c.max_file_api_bytes, 32 * 1024 * 1024);
        assert_int_equal(c.max_upload_bytes, 1024 * 1024 * 1024);
        assert_int_equal(c.uid_start, 1900000000);
        assert_int_equal(c.uid_end, 1999999999);
        assert_int_equal(c.uid_quarantine_seconds, 300);
        assert_int_equal(c.shutdown_grace_seconds, 10);
        assert_string_equal(c.internal_token, "");
        config_free(&c);
}

static void test_environment_overrides_defaults(void **state) {
        Config c;
        char err[256];

        setenv("SANDBOX_LISTEN", "0.0.0.0:9000", 1);
        setenv("SANDBOX_MAX_FILE_API_BYTES", "4M", 1);
        setenv("SANDBOX_LOG_LEVEL", "debug", 1);
        setenv("SANDBOX_HTTP_THREADS", "8", 1);
        assert_int_equal(load(&c, err, sizeof err, NULL), 0);
        assert_string_equal(c.listen, "0.0.0.0:9000");
        assert_int_equal(c.max_file_api_bytes, 4 * 1024 * 1024);
        assert_string_equal(c.log_level, "debug");
        assert_int_equal(c.http_threads, 8);
        config_free(&c);
        clear_env();
}

static void test_flag_overrides_environment(void **state) {
        const char *argv[] = { "--listen", "127.0.0.1:0", "--max-file-api-bytes=2048", "--data-dir", "/tmp/x", NULL };
        Config c;
        char err[256];

        setenv("SANDBOX_LISTEN", "0.0.0.0:9000", 1);
        setenv("SANDBOX_MAX_FILE_API_BYTES", "4M", 1);
        assert_int_equal(load(&c, err, sizeof err, argv), 0);
        assert_string_equal(c.listen, "127.0.0.1:0");
        assert_int_equal(c.max_file_api_bytes, 2048);
        assert_string_equal(c.data_dir, "/tmp/x");
        config_free(&c);
        clear_env();
}

/* A bad value refuses with one sentence that names the setting. */
static void refuses(const char *env, const char *value, const char *const *argv, const char *named) {
        Config c;
        char err[256];

        if (env)
                setenv(env, value, 1);
        assert_int_equal(load(&c, err, sizeof err, argv), -EINVAL);
        if (!strstr(err, named))
                fail_msg("'%s' does not name %s", err, named);
        assert_true(strlen(err) > strlen(named));
        assert_int_equal(err[strlen(err) - 1], '.');
        config_free(&c);
        clear_env();
}

static void test_bad_values_refuse_with_a_sentence_naming_the_setting(void **state) {
        refuses("SANDBOX_HTTP_THREADS", "many", NULL, "SANDBOX_HTTP_THREADS");
        refuses("SANDBOX_HTTP_THREADS", "-1", NULL, "SANDBOX_HTTP_THREADS");
        refuses("SANDBOX_HTTP_THREADS", "100000", NULL, "SANDBOX_HTTP_THREADS");
        refuses("SANDBOX_MAX_FILE_API_BYTES", "lots", NULL, "SANDBOX_MAX_FILE_API_BYTES");
        refuses("SANDBOX_MAX_CONNECTIONS", "1", NULL, "SANDBOX_MAX_CONNECTIONS");
        refuses("SANDBOX_LOG_LEVEL", "loud", NULL, "SANDBOX_LOG_LEVEL");
        refuses("SANDBOX_LISTEN", "nowhere", NULL, "SANDBOX_LISTEN");
        refuses("SANDBOX_WORKER_ID", "bad id!", NULL, "SANDBOX_WORKER_ID");
        refuses("SANDBOX_UID_START", "2000000000", NULL, "SANDBOX_UID_START");

        const char *flag_bad[] = { "--shutdown-grace-seconds", "soon", NULL };
        refuses(NULL, NULL, flag_bad, "SANDBOX_SHUTDOWN_GRACE_SECONDS");
        const char *flag_missing[] = { "--listen", NULL };
        refuses(NULL, NULL, flag_missing, "--listen");
        const char *unknown[] = { "--frobnicate", NULL };
        refuses(NULL, NULL, unknown, "--frobnicate");
        const char *positional[] = { "stray", NULL };
        refuses(NULL, NULL, positional, "stray");
}

static void test_token_is_never_a_flag(void **state) {
        const char *a[] = { "--internal-token", "abc", NULL };
        const char *b[] = { "--internal-token=abc", NULL };
        const char *c[] = { "--internal-token-file", "/tmp/t", NULL };

        refuses(NULL, NULL, a, "SANDBOX_INTERNAL_TOKEN");
        refuses(NULL, NULL, b, "SANDBOX_INTERNAL_TOKEN");
        refuses(NULL, NULL, c, "SANDBOX_INTERNAL_TOKEN");
}

static void test_token_from_environment_is_kept_and_redacted(void **state) {
        Config c;
        char err[256], *v;

        setenv("SANDBOX_INTERNAL_TOKEN", "tok-123", 1);
        assert_int_equal(load(&c, err, sizeof err, NULL), 0);
        assert_string_equal(c.internal_token, "tok-123");
        for (size_t i = 0; i < config_settings_count; i++) {
                v = config_value_string(&c, &config_settings[i]);
                assert_non_null(v);
                assert_null(strstr(v, "tok-123"));
                if (strcmp(config_settings[i].env, "SANDBOX_INTERNAL_TOKEN") == 0)
                        assert_string_equal(v, "(set)");
                free(v);
        }
        config_free(&c);
        clear_env();
}

static char *capture(void (*fn)(FILE *)) {
        char *out = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&out, &len);

        assert_non_null(f);
        fn(f);
        fclose(f);
        return out;
}

static void test_help_lists_every_setting(void **state) {
        const char *argv[] = { "--help", NULL };
        char *out = NULL, err[256];
        size_t len = 0;
        Config c;
        FILE *f;

        f = open_memstream(&out, &len);
        assert_int_equal(config_load(&c, 1, (char *const *) argv, f, err, sizeof err), 1);
        fclose(f);
        config_free(&c);
        for (size_t i = 0; i < config_settings_count; i++) {
                assert_non_null(strstr(out, config_settings[i].env));
                if (config_settings[i].flag)
                        assert_non_null(strstr(out, config_settings[i].flag));
                assert_non_null(strstr(out, config_settings[i].help));
        }
        free(out);
}

static void test_secrets_have_no_flag(void **state) {
        for (size_t i = 0; i < config_settings_count; i++)
                if (strstr(config_settings[i].env, "TOKEN"))
                        assert_null(config_settings[i].flag);
}

static void test_markdown_lists_every_setting(void **state) {
        char *md = capture(config_print_markdown);

        for (size_t i = 0; i < config_settings_count; i++) {
                char cell[128];
                snprintf(cell, sizeof cell, "| `%s` |", config_settings[i].env);
                assert_non_null(strstr(md, cell));
                assert_non_null(strstr(md, config_settings[i].help));
        }
        free(md);
}

static void test_every_setting_has_a_valid_default(void **state) {
        Config c;
        char err[256];

        /* Each default parses on its own (load applies all of them). */
        assert_int_equal(load(&c, err, sizeof err, NULL), 0);
        for (size_t i = 0; i < config_settings_count; i++) {
                char *v = config_value_string(&c, &config_settings[i]);
                assert_non_null(v);
                free(v);
        }
        config_free(&c);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup(test_defaults, setup),
                cmocka_unit_test_setup(test_environment_overrides_defaults, setup),
                cmocka_unit_test_setup(test_flag_overrides_environment, setup),
                cmocka_unit_test_setup(test_bad_values_refuse_with_a_sentence_naming_the_setting, setup),
                cmocka_unit_test_setup(test_token_is_never_a_flag, setup),
                cmocka_unit_test_setup(test_token_from_environment_is_kept_and_redacted, setup),
                cmocka_unit_test_setup(test_help_lists_every_setting, setup),
                cmocka_unit_test_setup(test_secrets_have_no_flag, setup),
                cmocka_unit_test_setup(test_markdown_lists_every_setting, setup),
                cmocka_unit_test_setup(test_every_setting_has_a_valid_default, setup),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
