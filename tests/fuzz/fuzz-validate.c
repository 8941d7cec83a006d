/* SPDX-License-Identifier: MIT */
/* libFuzzer target: bytes as a JSON request body, through the same parse and field
 * getters the resolve and files handlers use, and as a query string through the same
 * percent-decoding. Checks the contract beyond "no crash": at most 20 errors listed,
 * every accepted string within its bounds and NUL-free, no error message quoting input. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "request.h"
#include "url.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_string(Validation *v, json_t *body, const char *name, bool required, size_t min, size_t max) {
        const char *s = NULL;

        if (field_string(v, body, name, required, min, max, &s) && s) {
                size_t len = strlen(s);
                assert(len >= min && len <= max);
                assert(len == json_string_length(json_object_get(body, name)));
        }
}

static void check_errors(const Validation *v) {
        size_t n = json_array_size(v->errors);

        assert(n <= 20);
        assert(n <= v->count);
        for (size_t i = 0; i < n; i++) {
                json_t *e = json_array_get(v->errors, i);
                assert(json_is_array(json_object_get(e, "loc")));
                assert(json_is_string(json_object_get(e, "type")));
                assert(json_is_string(json_object_get(e, "msg")));
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        json_t *body = NULL, *errors = NULL;
        Error e = ERROR_INIT;
        char *decoded = NULL;
        Validation v;

        if (http_json_parse_body((const char *) data, size, &body, &e, &errors) < 0) {
                assert(e.status == 422 && body == NULL);
                assert(json_array_size(errors) == 1);
                /* The message is built from positions only, never from the input. */
                assert(strncmp(e.message, "Invalid JSON", 12) == 0 || strncmp(e.message, "The request body", 16) == 0);
                json_decref(errors);
        } else {
                uint64_t u = 0;
                bool b = false;

                assert(json_is_object(body));
                validation_init(&v);
                /* resolve */
                check_string(&v, body, "sandbox_id", true, 3, 128);
                check_string(&v, body, "workspace_scope_id", true, 1, 191);
                check_string(&v, body, "profile", false, 1, 64);
                /* files */
                (void) field_u64(&v, body, "generation", true, 1, UINT64_MAX, &u);
                check_string(&v, body, "path", true, 1, 4096);
                check_string(&v, body, "content_base64", false, 0, 48 * 1024 * 1024);
                check_string(&v, body, "source", false, 1, 4096);
                check_string(&v, body, "destination", false, 1, 4096);
                (void) field_bool(&v, body, "recursive", false, &b);
                (void) field_bool(&v, body, "parents", false, &b);
                (void) field_bool(&v, body, "overwrite", false, &b);
                (void) field_u64(&v, body, "limit", false, 1, 10000, &u);
                check_errors(&v);
                validation_done(&v);
                json_decref(body);
        }

        /* The same bytes as a query string / path segment. */
        if (http_percent_decode((const char *) data, size, true, &decoded) == 0) {
                assert(strlen(decoded) <= size);
                free(decoded);
        }
        return 0;
}
