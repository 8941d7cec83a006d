/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "request.h"

/* The SECRET marker is put into submitted values: no error text may contain it. */
#define SECRET "s3cr3t-VALUE"

static json_t *parse(const char *text) {
        json_error_t e;
        json_t *j = json_loads(text, 0, &e);
        assert_non_null(j);
        return j;
}

static const char *error_field(const Validation *v, size_t i, const char *key) {
        return json_string_value(json_object_get(json_array_get(v->errors, i), key));
}

static void assert_no_echo(const Validation *v) {
        char *dump = json_dumps(v->errors, JSON_COMPACT);
        assert_non_null(dump);
        assert_null(strstr(dump, SECRET));
        assert_null(strstr(dump, "12345678901"));
        free(dump);
}

static void test_field_string_accepts_and_bounds_in_bytes(void **state) {
        json_t *body = parse("{\"a\": \"abc\", \"u\": \"\\u00e9\\u00e9\"}");
        const char *s = NULL;
        Validation v;

        validation_init(&v);
        assert_true(field_string(&v, body, "a", true, 3, 3, &s));
        assert_string_equal(s, "abc");
        /* Two characters, four bytes: bounds are bytes, as callers size buffers by them. */
        assert_false(field_string(&v, body, "u", true, 1, 3, &s));
        assert_string_equal(error_field(&v, 0, "type"), "string_too_long");
        assert_int_equal(v.count, 1);
        validation_done(&v);
        json_decref(body);
}

static void test_field_string_rejections_have_pydantic_types(void **state) {
        json_t *body = parse("{\"short\": \"" SECRET "\", \"long\": \"" SECRET "\", \"num\": 12345678901,"
                             " \"obj\": {\"k\": \"" SECRET "\"}, \"null\": null}");
        const char *s = "untouched";
        Validation v;

        /* The parser used by requests refuses \u0000; a jansson-built body may still carry one. */
        json_object_set_new(body, "nul", json_stringn("a\0" SECRET, 2 + strlen(SECRET)));

        validation_init(&v);
        assert_false(field_string(&v, body, "short", true, 100, 200, &s));
        assert_false(field_string(&v, body, "long", true, 1, 3, &s));
        assert_false(field_string(&v, body, "num", true, 1, 10, &s));
        assert_false(field_string(&v, body, "nul", true, 1, 100, &s));
        assert_false(field_string(&v, body, "obj", true, 1, 100, &s));
        assert_false(field_string(&v, body, "missing", true, 1, 100, &s));
        assert_false(field_string(&v, body, "null", true, 1, 100, &s));
        assert_string_equal(s, "untouched");

        assert_int_equal(v.count, 7);
        assert_string_equal(error_field(&v, 0, "type"), "string_too_short");
        assert_string_equal(error_field(&v, 1, "type"), "string_too_long");
        assert_string_equal(error_field(&v, 2, "type"), "string_type");
        assert_string_equal(error_field(&v, 3, "type"), "string_pattern_mismatch");
        assert_string_equal(error_field(&v, 4, "type"), "string_type");
        assert_string_equal(error_field(&v, 5, "type"), "missing");
        assert_string_equal(error_field(&v, 5, "msg"), "Field required");
        assert_string_equal(error_field(&v, 6, "type"), "string_type");
        /* loc is ["body", field]. */
        json_t *loc = json_object_get(json_array_get(v.errors, 1), "loc");
        assert_int_equal(json_array_size(loc), 2);
        assert_string_equal(json_string_value(json_array_get(loc, 0)), "body");
        assert_string_equal(json_string_value(json_array_get(loc, 1)), "long");
        assert_no_echo(&v);
        validation_done(&v);
        json_decref(body);
}

static void test_optional_absent_or_null_field_is_fine_and_untouched(void **state) {
        json_t *body = parse("{\"n\": null}");
        const char *s = "default";
        uint64_t u = 7;
        bool b = false;
        Validation v;

        validation_init(&v);
        assert_true(field_string(&v, body, "absent", false, 1, 10, &s));
        assert_true(field_string(&v, body, "n", false, 1, 10, &s));
        assert_string_equal(s, "default");
        assert_true(field_u64(&v, body, "absent", false, 0, 10, &u));
        assert_int_equal(u, 7);
        assert_true(field_bool(&v, body, "absent", true, &b));
        assert_true(b);
        assert_true(field_bool(&v, body, "n", false, &b));
        assert_false(b);
        assert_int_equal(v.count, 0);
        validation_done(&v);
        json_decref(body);
}

static void test_field_u64(void **state) {
        json_t *body = parse("{\"ok\": 5, \"real\": 6.0, \"frac\": 1.5, \"neg\": -12345678901, \"big\": 12345678901,"
                             " \"str\": \"12345678901\", \"bool\": true, \"max\": 9223372036854775807}");
        uint64_t x = 99;
        Validation v;

        validation_init(&v);
        assert_true(field_u64(&v, body, "ok", true, 1, 10, &x));
        assert_int_equal(x, 5);
        assert_true(field_u64(&v, body, "real", true, 1, 10, &x));
        assert_int_equal(x, 6);
        assert_true(field_u64(&v, body, "max", true, 0, UINT64_MAX, &x));
        assert_int_equal(x, INT64_MAX);
        x = 99;
        assert_false(field_u64(&v, body, "frac", true, 0, 10, &x));
        assert_false(field_u64(&v, body, "neg", true, 0, 10, &x));
        assert_false(field_u64(&v, body, "big", true, 0, 10, &x));
        assert_false(field_u64(&v, body, "str", true, 0, 10, &x));
        assert_false(field_u64(&v, body, "bool", true, 0, 10, &x));
        assert_false(field_u64(&v, body, "ok", true, 6, 10, &x));
        assert_false(field_u64(&v, body, "missing", true, 0, 10, &x));
        assert_int_equal(x, 99);

        assert_string_equal(error_field(&v, 0, "type"), "int_from_float");
        assert_string_equal(error_field(&v, 1, "type"), "greater_than_equal");
        assert_string_equal(error_field(&v, 2, "type"), "less_than_equal");
        assert_string_equal(error_field(&v, 2, "msg"), "Input should be less than or equal to 10");
        assert_string_equal(error_field(&v, 3, "type"), "int_type");
        assert_string_equal(error_field(&v, 4, "type"), "int_type");
        assert_string_equal(error_field(&v, 5, "type"), "greater_than_equal");
        assert_string_equal(error_field(&v, 6, "type"), "missing");
        assert_no_echo(&v);
        validation_done(&v);
        json_decref(body);
}

static void test_field_bool(void **state) {
        json_t *body = parse("{\"t\": true, \"f\": false, \"s\": \"true\", \"i\": 1}");
        bool b = false;
        Validation v;

        validation_init(&v);
        assert_true(field_bool(&v, body, "t", false, &b));
        assert_true(b);
        assert_true(field_bool(&v, body, "f", true, &b));
        assert_false(b);
        assert_false(field_bool(&v, body, "s", false, &b));
        assert_false(field_bool(&v, body, "i", false, &b));
        assert_int_equal(v.count, 2);
        assert_string_equal(error_field(&v, 0, "type"), "bool_type");
        validation_done(&v);
        json_decref(body);
}

static void test_errors_are_capped_at_20_but_counted(void **state) {
        Validation v;

        validation_init(&v);
        for (int i = 0; i < 50; i++)
                validation_add(&v, "body", "f", "missing", "Field required");
        assert_int_equal(v.count, 50);
        assert_int_equal(json_array_size(v.errors), 20);
        validation_done(&v);
        assert_null(v.errors);
        validation_done(&v); /* twice is harmless */
}

static void test_validation_add_without_field_has_a_one_element_loc(void **state) {
        Validation v;

        validation_init(&v);
        validation_add(&v, "body", NULL, "json_invalid", "Invalid JSON");
        json_t *loc = json_object_get(json_array_get(v.errors, 0), "loc");
        assert_int_equal(json_array_size(loc), 1);
        assert_string_equal(json_string_value(json_array_get(loc, 0)), "body");
        validation_done(&v);
}

static void parse_fails(const char *text, size_t len, const char *why) {
        json_t *j = NULL, *errors = NULL;
        Error e = ERROR_INIT;
        char *dump;

        assert_int_equal(http_json_parse_body(text, len, &j, &e, &errors), -EINVAL);
        assert_null(j);
        assert_int_equal(e.status, 422);
        assert_string_equal(e.code, "SANDBOX_INVALID_REQUEST");
        if (!strstr(e.message, why))
                fail_msg("'%s' does not say '%s'", e.message, why);
        assert_null(strstr(e.message, SECRET));
        assert_int_equal(json_array_size(errors), 1);
        assert_string_equal(json_string_value(json_object_get(json_array_get(errors, 0), "type")), "json_invalid");
        dump = json_dumps(errors, JSON_COMPACT);
        assert_null(strstr(dump, SECRET));
        free(dump);
        json_decref(errors);
}

static void test_json_body_must_be_one_object_and_is_never_echoed(void **state) {
        json_t *j = NULL;
        Error e = ERROR_INIT;

        parse_fails("", 0, "empty");
        parse_fails("{\"a\": " SECRET "}", strlen("{\"a\": " SECRET "}"), "Invalid JSON");
        parse_fails(SECRET, strlen(SECRET), "Invalid JSON");
        parse_fails("[\"" SECRET "\"]", strlen("[\"" SECRET "\"]"), "must be a JSON object");
        parse_fails("\"" SECRET "\"", strlen("\"" SECRET "\""), "must be a JSON object");
        parse_fails("{\"" SECRET "\": 1, \"" SECRET "\": 2}", strlen("{\"" SECRET "\": 1, \"" SECRET "\": 2}"),
                    "duplicate");
        parse_fails("{} {}", 5, "Invalid JSON");             /* trailing data */
        parse_fails("{\"a\": \"\\u0000\"}", 15, "Invalid JSON"); /* NUL in a string */
        parse_fails("{\"a\": \"\xff\"}", 10, "Invalid JSON");     /* not UTF-8 */
        parse_fails("{\"a\": 1}\0", 9, "Invalid JSON");           /* a NUL byte after it */

        assert_int_equal(http_json_parse_body("{\"a\": [1, {\"b\": null}]}", 23, &j, &e, NULL), 0);
        assert_true(json_is_object(j));
        assert_int_equal(e.status, 0);
        json_decref(j);
}

static void test_query_u64(void **state) {
        Request *req = NULL;
        uint64_t x = 42;
        Validation v;

        assert_int_equal(request_new(NULL, NULL, NULL, "/x?limit=10&offset=-1&bad=1x&big=99999999999999999999&e=",
                                     &req),
                         0);
        assert_int_equal(request_parse_query(req, "limit=10&offset=-1&bad=1x&big=99999999999999999999&e="), 0);

        validation_init(&v);
        assert_true(query_u64(&v, req, "limit", true, 1, 100, 5, &x));
        assert_int_equal(x, 10);
        assert_true(query_u64(&v, req, "absent", false, 1, 100, 5, &x));
        assert_int_equal(x, 5);
        x = 42;
        assert_false(query_u64(&v, req, "limit", true, 11, 100, 5, &x));
        assert_false(query_u64(&v, req, "offset", true, 0, 100, 5, &x));
        assert_false(query_u64(&v, req, "bad", true, 0, 100, 5, &x));
        assert_false(query_u64(&v, req, "big", true, 0, 100, 5, &x));
        assert_false(query_u64(&v, req, "e", true, 0, 100, 5, &x));
        assert_false(query_u64(&v, req, "absent", true, 0, 100, 5, &x));
        assert_int_equal(x, 42);
        assert_string_equal(error_field(&v, 0, "type"), "greater_than_equal");
        assert_string_equal(error_field(&v, 1, "type"), "greater_than_equal");
        assert_string_equal(error_field(&v, 2, "type"), "int_parsing");
        assert_string_equal(error_field(&v, 3, "type"), "int_parsing");
        assert_string_equal(error_field(&v, 4, "type"), "int_parsing");
        assert_string_equal(error_field(&v, 5, "type"), "missing");
        assert_string_equal(json_string_value(json_array_get(
                                    json_object_get(json_array_get(v.errors, 5), "loc"), 0)),
                            "query");
        validation_done(&v);
        request_unref(req);
}

static void test_query_string_is_decoded_and_bad_encoding_refused(void **state) {
        Request *req = NULL;

        assert_int_equal(request_new(NULL, NULL, NULL, "/", &req), 0);
        assert_int_equal(request_parse_query(req, "path=%2Fworkspace%2Fa+b.txt&flag&&x=1&x=2"), 0);
        assert_string_equal(req_query(req, "path"), "/workspace/a b.txt");
        assert_string_equal(req_query(req, "flag"), "");
        assert_string_equal(req_query(req, "x"), "1"); /* the first one counts */
        assert_null(req_query(req, "y"));
        request_unref(req);

        assert_int_equal(request_new(NULL, NULL, NULL, "/", &req), 0);
        assert_int_equal(request_parse_query(req, "path=a%00b"), -EINVAL);
        request_unref(req);
        assert_int_equal(request_new(NULL, NULL, NULL, "/", &req), 0);
        assert_int_equal(request_parse_query(req, "pa%zzth=a"), -EINVAL);
        request_unref(req);

        /* Bounded number of parameters. */
        assert_int_equal(request_new(NULL, NULL, NULL, "/", &req), 0);
        char many[2000] = "";
        for (int i = 0; i < 100; i++)
                strcat(many, "a=1&");
        assert_int_equal(request_parse_query(req, many), -E2BIG);
        request_unref(req);
}

static void test_headers_are_case_insensitive(void **state) {
        Request *req = NULL;

        assert_int_equal(request_new(NULL, NULL, NULL, "/", &req), 0);
        assert_int_equal(request_add_header(req, "Content-Type", "application/json"), 0);
        assert_string_equal(req_header(req, "content-type"), "application/json");
        assert_null(req_header(req, "Accept"));
        /* Reply headers refuse injection. */
        assert_int_equal(req_add_reply_header(req, "X-A", "b\r\nSet-Cookie: x"), -EINVAL);
        assert_int_equal(req_add_reply_header(req, "X-A:", "b"), -EINVAL);
        assert_int_equal(req_add_reply_header(req, "X-A", "b"), 0);
        request_unref(req);
}

static void test_error_body_shape(void **state) {
        json_t *errors = json_pack("[{s:[s], s:s, s:s}]", "loc", "body", "type", "missing", "msg", "Field required");
        json_t *b = reply_error_body("SANDBOX_NOT_FOUND", "No such sandbox.", NULL);
        json_t *detail = json_object_get(b, "detail");

        assert_int_equal(json_object_size(b), 1);
        assert_string_equal(json_string_value(json_object_get(detail, "code")), "SANDBOX_NOT_FOUND");
        assert_string_equal(json_string_value(json_object_get(detail, "message")), "No such sandbox.");
        assert_null(json_object_get(detail, "errors"));
        json_decref(b);

        b = reply_error_body("SANDBOX_INVALID_REQUEST", "Invalid request.", errors);
        assert_int_equal(json_array_size(json_object_get(json_object_get(b, "detail"), "errors")), 1);
        json_decref(b);
        json_decref(errors);
}

static void test_reply_is_stored_once(void **state) {
        Request *req = NULL;

        assert_int_equal(request_new(NULL, NULL, NULL, "/", &req), 0);
        assert_int_equal(reply_errorf(req, 404, "SANDBOX_NOT_FOUND", "No such sandbox."), 0);
        assert_true(req->replied);
        assert_int_equal(req->status, 404);
        /* A second reply is a bug: ignored, the first stands. */
        assert_int_equal(reply_text(req, 200, NULL, "ok"), 0);
        assert_int_equal(req->status, 404);
        request_unref(req);

        /* An unset Error is a generic 500. */
        Error e = ERROR_INIT;
        assert_int_equal(request_new(NULL, NULL, NULL, "/", &req), 0);
        assert_int_equal(reply_error(req, &e), 0);
        assert_int_equal(req->status, 500);
        request_unref(req);

        /* A handler that returns without a reply gets a 500. */
        assert_int_equal(request_new(NULL, NULL, NULL, "/", &req), 0);
        request_after_handler(req, 0);
        assert_int_equal(req->status, 500);
        request_unref(req);
}

static void test_parked_request_lives_until_its_late_reply(void **state) {
        Request *req = NULL;

        assert_int_equal(request_new(NULL, NULL, NULL, "/", &req), 0);
        request_after_handler(req, API_PARKED);
        assert_false(req->replied);
        assert_int_equal(atomic_load(&req->refs), 2);
        /* The connection completes (the client went away): its reference goes. */
        request_unref(req);
        /* The parked reply still finds the request, and frees it (ASan checks). */
        assert_int_equal(reply_text(req, 200, NULL, "late"), 0);
}

static void test_req_json_parses_once_and_422_carries_errors(void **state) {
        Request *req = NULL;
        Error e = ERROR_INIT, e2 = ERROR_INIT;

        assert_int_equal(request_new(NULL, NULL, NULL, "/", &req), 0);
        strcpy(req->method, "POST");
        req->body = strdup("{\"a\": 1}");
        req->body_len = strlen(req->body);
        json_t *j = req_json(req, &e);
        assert_non_null(j);
        assert_ptr_equal(req_json(req, &e), j);
        request_unref(req);

        assert_int_equal(request_new(NULL, NULL, NULL, "/", &req), 0);
        req->body = strdup("{" SECRET);
        req->body_len = strlen(req->body);
        assert_null(req_json(req, &e));
        assert_null(req_json(req, &e2));
        assert_int_equal(e.status, 422);
        assert_string_equal(e.message, e2.message);
        assert_int_equal(reply_error(req, &e), 0);
        assert_int_equal(req->status, 422);
        assert_int_equal(json_array_size(req->json_errors), 1);
        request_unref(req);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_field_string_accepts_and_bounds_in_bytes),
                cmocka_unit_test(test_field_string_rejections_have_pydantic_types),
                cmocka_unit_test(test_optional_absent_or_null_field_is_fine_and_untouched),
                cmocka_unit_test(test_field_u64),
                cmocka_unit_test(test_field_bool),
                cmocka_unit_test(test_errors_are_capped_at_20_but_counted),
                cmocka_unit_test(test_validation_add_without_field_has_a_one_element_loc),
                cmocka_unit_test(test_json_body_must_be_one_object_and_is_never_echoed),
                cmocka_unit_test(test_query_u64),
                cmocka_unit_test(test_query_string_is_decoded_and_bad_encoding_refused),
                cmocka_unit_test(test_headers_are_case_insensitive),
                cmocka_unit_test(test_error_body_shape),
                cmocka_unit_test(test_reply_is_stored_once),
                cmocka_unit_test(test_parked_request_lives_until_its_late_reply),
                cmocka_unit_test(test_req_json_parses_once_and_422_carries_errors),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
