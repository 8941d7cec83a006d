/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "handlers.h"
#include "router.h"
#include "url.h"

/* The router is tested on its own: these weak stand-ins keep the real handlers (and all
 * they link) out of this test; the table's pointers then point here. */
#define STUB(name) \
        __attribute__((weak)) int name(Request *req) { return 0; }
STUB(handle_health)
STUB(handle_healthz)
STUB(handle_sandbox_resolve)
STUB(handle_sandbox_list)
STUB(handle_sandbox_get)
STUB(handle_sandbox_connect)
STUB(handle_sandbox_release)
STUB(handle_sandbox_audit)
STUB(handle_files_put)
STUB(handle_files_get)
STUB(handle_files_raw_get)
STUB(handle_files_raw_put)
STUB(handle_files_list)
STUB(handle_files_stat)
STUB(handle_files_mkdir)
STUB(handle_files_delete)
STUB(handle_files_move)
STUB(handle_files_archive_get)
STUB(handle_files_archive_put)
STUB(handle_exec_start)
STUB(handle_exec_get)
STUB(handle_exec_output)
STUB(handle_exec_events)
STUB(handle_exec_cancel)
STUB(handle_mcp)
__attribute__((weak)) int upload_files_raw(Request *req, int *ret_fd) { return 0; }
__attribute__((weak)) int upload_files_archive(Request *req, int *ret_fd) { return 0; }

static const Route *match_ok(const char *method, const char *path, RouteMatch *m) {
        int r = router_match(method, path, m);
        assert_int_equal(r, 0);
        return m->route;
}

static void test_every_handler_is_routed_once(void **state) {
        Handler handlers[] = {
                handle_health, handle_healthz, handle_sandbox_resolve, handle_sandbox_list,
                handle_sandbox_get, handle_sandbox_connect, handle_sandbox_release, handle_sandbox_audit,
                handle_files_put, handle_files_get, handle_files_raw_get, handle_files_raw_put,
                handle_files_list, handle_files_stat, handle_files_mkdir, handle_files_delete,
                handle_files_move, handle_files_archive_get, handle_files_archive_put,
                handle_exec_start, handle_exec_get, handle_exec_output, handle_exec_events, handle_exec_cancel,
        };

        for (size_t h = 0; h < sizeof handlers / sizeof handlers[0]; h++) {
                unsigned seen = 0;
                for (size_t i = 0; i < router_routes_count; i++)
                        seen += router_routes[i].handler == handlers[h];
                assert_int_equal(seen, 1);
        }
        /* MCP answers at two paths, /mcp and Sandloom's /api/v1/sandboxes/mcp/streamable-http. */
        {
                unsigned mcp = 0;
                for (size_t i = 0; i < router_routes_count; i++)
                        mcp += router_routes[i].handler == handle_mcp;
                assert_int_equal(mcp, 2);
                assert_int_equal(router_routes_count, sizeof handlers / sizeof handlers[0] + mcp);
        }
        /* Every (method, pattern) pair is unique. */
        for (size_t i = 0; i < router_routes_count; i++)
                for (size_t j = i + 1; j < router_routes_count; j++)
                        assert_false(strcmp(router_routes[i].method, router_routes[j].method) == 0 &&
                                     strcmp(router_routes[i].pattern, router_routes[j].pattern) == 0);
}

static void test_upload_routes_have_upload_begin(void **state) {
        for (size_t i = 0; i < router_routes_count; i++)
                assert_true(!!(router_routes[i].flags & ROUTE_UPLOAD) == !!router_routes[i].upload_begin);
}

static void test_only_health_routes_are_public(void **state) {
        for (size_t i = 0; i < router_routes_count; i++) {
                bool health = strcmp(router_routes[i].pattern, "/health") == 0 ||
                              strcmp(router_routes[i].pattern, "/healthz") == 0;
                assert_true(!!(router_routes[i].flags & ROUTE_PUBLIC) == health);
        }
}

static void test_literal_segment_wins_over_parameter(void **state) {
        RouteMatch m = {};

        assert_ptr_equal(match_ok("POST", "/api/v1/sandboxes/resolve", &m)->handler, handle_sandbox_resolve);
        assert_int_equal(m.n_params, 0);
        route_match_done(&m);

        assert_ptr_equal(match_ok("POST", "/api/v1/sandboxes/other", &m)->handler, handle_sandbox_connect);
        assert_string_equal(route_match_param(&m, "id"), "other");
        route_match_done(&m);

        assert_ptr_equal(match_ok("GET", "/api/v1/sandboxes/sb1/files/list", &m)->handler, handle_files_list);
        assert_string_equal(route_match_param(&m, "id"), "sb1");
        route_match_done(&m);

        assert_ptr_equal(match_ok("GET", "/api/v1/sandboxes/sb1/files", &m)->handler, handle_files_get);
        route_match_done(&m);
        assert_ptr_equal(match_ok("PUT", "/api/v1/sandboxes/sb1/files", &m)->handler, handle_files_put);
        route_match_done(&m);
        assert_ptr_equal(match_ok("PUT", "/api/v1/sandboxes/sb1/files/raw", &m)->handler, handle_files_raw_put);
        route_match_done(&m);
}

static void test_get_on_a_literal_only_posted_falls_to_the_parameter_route(void **state) {
        RouteMatch m = {};

        /* GET /resolve is "get sandbox 'resolve'": the id is validated by the handler. */
        assert_ptr_equal(match_ok("GET", "/api/v1/sandboxes/resolve", &m)->handler, handle_sandbox_get);
        assert_string_equal(route_match_param(&m, "id"), "resolve");
        route_match_done(&m);
}

static void test_methods_select_the_handler(void **state) {
        RouteMatch m = {};

        assert_ptr_equal(match_ok("GET", "/api/v1/sandboxes/x1", &m)->handler, handle_sandbox_get);
        route_match_done(&m);
        assert_ptr_equal(match_ok("DELETE", "/api/v1/sandboxes/x1", &m)->handler, handle_sandbox_release);
        route_match_done(&m);
        assert_ptr_equal(match_ok("GET", "/api/v1/sandboxes", &m)->handler, handle_sandbox_list);
        route_match_done(&m);
        assert_ptr_equal(match_ok("GET", "/health", &m)->handler, handle_health);
        route_match_done(&m);
        assert_ptr_equal(match_ok("GET", "/healthz", &m)->handler, handle_healthz);
        route_match_done(&m);
}

static void test_unknown_path_is_404_and_known_path_wrong_method_is_405(void **state) {
        RouteMatch m = {};
        char allow[64];

        assert_int_equal(router_match("GET", "/nope", &m), -ENOENT);
        assert_int_equal(router_match("GET", "/api/v1/sandboxes/a/b/c/d", &m), -ENOENT);
        assert_int_equal(router_match("GET", "/api/v2/sandboxes", &m), -ENOENT);
        assert_int_equal(router_match("GET", "", &m), -ENOENT);
        assert_int_equal(router_match("GET", "api/v1/sandboxes", &m), -ENOENT);

        assert_int_equal(router_match("POST", "/health", &m), -EOPNOTSUPP);
        assert_int_equal(router_allowed_methods("/health", allow, sizeof allow), 1);
        assert_string_equal(allow, "GET");

        assert_int_equal(router_match("DELETE", "/api/v1/sandboxes/x/files", &m), -EOPNOTSUPP);
        assert_int_equal(router_allowed_methods("/api/v1/sandboxes/x/files", allow, sizeof allow), 2);
        assert_string_equal(allow, "GET, PUT");

        assert_int_equal(router_match("PATCH", "/api/v1/sandboxes/x", &m), -EOPNOTSUPP);
        assert_int_equal(router_allowed_methods("/api/v1/sandboxes/x", allow, sizeof allow), 3);
        assert_string_equal(allow, "GET, POST, DELETE");

        /* HEAD is not served. */
        assert_int_equal(router_match("HEAD", "/health", &m), -EOPNOTSUPP);
        assert_int_equal(router_allowed_methods("/nope", allow, sizeof allow), 0);
        assert_string_equal(allow, "");
}

static void test_trailing_slash_and_empty_segments_do_not_match(void **state) {
        RouteMatch m = {};

        assert_int_equal(router_match("GET", "/health/", &m), -ENOENT);
        assert_int_equal(router_match("GET", "/api/v1/sandboxes/", &m), -ENOENT);
        assert_int_equal(router_match("GET", "/api/v1/sandboxes//files", &m), -ENOENT);
        assert_int_equal(router_match("GET", "//health", &m), -ENOENT);
        assert_int_equal(router_match("GET", "/", &m), -ENOENT);
        assert_int_equal(router_match("GET", "/api/v1/sandboxes/x/files/list/", &m), -ENOENT);
}

static void test_literal_segments_are_compared_exactly(void **state) {
        RouteMatch m = {};

        assert_int_equal(router_match("GET", "/Health", &m), -ENOENT);
        assert_int_equal(router_match("GET", "/healthzz", &m), -ENOENT);
        /* An encoded literal is not that literal. */
        assert_int_equal(router_match("GET", "/%68ealth", &m), -ENOENT);
}

static void test_parameters_are_percent_decoded(void **state) {
        RouteMatch m = {};

        assert_ptr_equal(match_ok("GET", "/api/v1/sandboxes/a%3Ab%20c/audit", &m)->handler, handle_sandbox_audit);
        assert_string_equal(route_match_param(&m, "id"), "a:b c");
        assert_null(route_match_param(&m, "exec_id"));
        route_match_done(&m);

        /* %2F decodes to '/' inside the one segment; it never splits the path. */
        assert_ptr_equal(match_ok("GET", "/api/v1/sandboxes/a%2Fb", &m)->handler, handle_sandbox_get);
        assert_string_equal(route_match_param(&m, "id"), "a/b");
        route_match_done(&m);

        /* '+' stays a '+' in a path. */
        assert_ptr_equal(match_ok("GET", "/api/v1/sandboxes/a+b", &m)->handler, handle_sandbox_get);
        assert_string_equal(route_match_param(&m, "id"), "a+b");
        route_match_done(&m);
}

static void test_bad_percent_encoding_in_a_parameter_is_refused(void **state) {
        RouteMatch m = {};

        assert_int_equal(router_match("GET", "/api/v1/sandboxes/a%00b", &m), -EINVAL);
        assert_int_equal(router_match("GET", "/api/v1/sandboxes/a%zz", &m), -EINVAL);
        assert_int_equal(router_match("GET", "/api/v1/sandboxes/a%4", &m), -EINVAL);
        assert_int_equal(router_match("GET", "/api/v1/sandboxes/%", &m), -EINVAL);
        assert_int_equal(router_match("GET", "/api/v1/sandboxes/%C3%28", &m), -EINVAL); /* not UTF-8 */
}

static void test_percent_decode(void **state) {
        char *s = NULL;

        assert_int_equal(http_percent_decode("a%20b+c", 7, true, &s), 0);
        assert_string_equal(s, "a b c");
        free(s);
        assert_int_equal(http_percent_decode("a%20b+c", 7, false, &s), 0);
        assert_string_equal(s, "a b+c");
        free(s);
        assert_int_equal(http_percent_decode("%e2%82%AC", 9, false, &s), 0);
        assert_string_equal(s, "\xe2\x82\xac");
        free(s);
        assert_int_equal(http_percent_decode("", 0, true, &s), 0);
        assert_string_equal(s, "");
        free(s);
        /* Only LEN bytes are read. */
        assert_int_equal(http_percent_decode("ab%41", 2, true, &s), 0);
        assert_string_equal(s, "ab");
        free(s);

        s = NULL;
        assert_int_equal(http_percent_decode("%00", 3, true, &s), -EINVAL);
        assert_int_equal(http_percent_decode("%0", 2, true, &s), -EINVAL);
        assert_int_equal(http_percent_decode("%g0", 3, true, &s), -EINVAL);
        assert_int_equal(http_percent_decode("%ff", 3, true, &s), -EINVAL);
        assert_int_equal(http_percent_decode("a\0b", 3, true, &s), -EINVAL);
        assert_null(s); /* untouched on failure */
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_every_handler_is_routed_once),
                cmocka_unit_test(test_upload_routes_have_upload_begin),
                cmocka_unit_test(test_only_health_routes_are_public),
                cmocka_unit_test(test_literal_segment_wins_over_parameter),
                cmocka_unit_test(test_get_on_a_literal_only_posted_falls_to_the_parameter_route),
                cmocka_unit_test(test_methods_select_the_handler),
                cmocka_unit_test(test_unknown_path_is_404_and_known_path_wrong_method_is_405),
                cmocka_unit_test(test_trailing_slash_and_empty_segments_do_not_match),
                cmocka_unit_test(test_literal_segments_are_compared_exactly),
                cmocka_unit_test(test_parameters_are_percent_decoded),
                cmocka_unit_test(test_bad_percent_encoding_in_a_parameter_is_refused),
                cmocka_unit_test(test_percent_decode),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
