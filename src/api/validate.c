/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "json-util.h"
#include "parse-util.h"
#include "request.h"
#include "string-util.h"

/* Request validation in the style of Sandloom's (pydantic) 422 answers: errors[] of
 * {loc, type, msg}, at most VALIDATION_ERRORS_MAX of them. A message never contains the
 * submitted value (it may be a secret); it may contain the bounds. */

#define VALIDATION_ERRORS_MAX 20

void validation_init(Validation *v) {
        *v = (Validation) { .errors = json_array() };
}

void validation_done(Validation *v) {
        json_decref(v->errors);
        *v = (Validation) {};
}

void validation_add(Validation *v, const char *where, const char *field, const char *type, const char *msg) {
        json_t *e;

        v->count++;
        if (!v->errors || json_array_size(v->errors) >= VALIDATION_ERRORS_MAX)
                return;
        if (field)
                e = json_pack("{s:[s,s], s:s, s:s}", "loc", where, field, "type", type, "msg", msg);
        else
                e = json_pack("{s:[s], s:s, s:s}", "loc", where, "type", type, "msg", msg);
        if (e)
                (void) json_array_append_new(v->errors, e);
}

_printf_(5, 6) static void add_bound(Validation *v, const char *where, const char *field, const char *type,
                                     const char *fmt, ...) {
        char msg[128];
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        validation_add(v, where, field, type, msg);
}

/* Present and not null? A JSON null counts as absent for an optional field (as
 * Optional[...] = None does in Sandloom); for a required one it is a type error. */
static json_t *field_get(Validation *v, json_t *body, const char *name, bool required, const char *type_error,
                         const char *type_msg, bool *ret_ok) {
        json_t *j = json_object_get(body, name);

        *ret_ok = true;
        if (!j) {
                if (required) {
                        validation_add(v, "body", name, "missing", "Field required");
                        *ret_ok = false;
                }
                return NULL;
        }
        if (json_is_null(j)) {
                if (required) {
                        validation_add(v, "body", name, type_error, type_msg);
                        *ret_ok = false;
                }
                return NULL;
        }
        return j;
}

bool field_string(Validation *v, json_t *body, const char *name, bool required, size_t minlen, size_t maxlen,
                  const char **ret) {
        const char *type_msg = "Input should be a valid string";
        size_t len;
        json_t *j;
        bool ok;

        j = field_get(v, body, name, required, "string_type", type_msg, &ok);
        if (!j)
                return ok;
        if (!json_is_string(j)) {
                validation_add(v, "body", name, "string_type", type_msg);
                return false;
        }
        /* Lengths are in bytes: callers size their buffers by them. */
        len = json_string_length(j);
        if (strlen(json_string_value(j)) != len) {
                validation_add(v, "body", name, "string_pattern_mismatch", "String should not contain NUL characters");
                return false;
        }
        if (len < minlen) {
                add_bound(v, "body", name, "string_too_short", "String should have at least %" PRIu64 " characters",
                          (uint64_t) minlen);
                return false;
        }
        if (len > maxlen) {
                add_bound(v, "body", name, "string_too_long", "String should have at most %" PRIu64 " characters",
                          (uint64_t) maxlen);
                return false;
        }
        *ret = json_string_value(j);
        return true;
}

static bool check_range(Validation *v, const char *where, const char *name, uint64_t x, uint64_t min, uint64_t max) {
        if (x < min) {
                add_bound(v, where, name, "greater_than_equal", "Input should be greater than or equal to %" PRIu64,
                          min);
                return false;
        }
        if (x > max) {
                add_bound(v, where, name, "less_than_equal", "Input should be less than or equal to %" PRIu64, max);
                return false;
        }
        return true;
}

bool field_u64(Validation *v, json_t *body, const char *name, bool required, uint64_t min, uint64_t max,
               uint64_t *ret) {
        const char *type_msg = "Input should be a valid integer";
        uint64_t x;
        json_t *j;
        bool ok;

        j = field_get(v, body, name, required, "int_type", type_msg, &ok);
        if (!j)
                return ok;
        if (json_is_integer(j)) {
                json_int_t i = json_integer_value(j);
                if (i < 0) {
                        add_bound(v, "body", name, "greater_than_equal",
                                  "Input should be greater than or equal to %" PRIu64, min);
                        return false;
                }
                x = (uint64_t) i;
        } else if (json_is_real(j)) {
                /* 3.0 is an integer (as pydantic's lax mode has it); 3.5 is not. */
                double d = json_real_value(j);
                /* NaN fails the range test; no libm needed. */
                if (!(d >= -9007199254740992.0 && d <= 9007199254740992.0) || d != (double) (int64_t) d) {
                        validation_add(v, "body", name, "int_from_float",
                                       "Input should be a valid integer, got a number with a fractional part");
                        return false;
                }
                if (d < 0) {
                        add_bound(v, "body", name, "greater_than_equal",
                                  "Input should be greater than or equal to %" PRIu64, min);
                        return false;
                }
                x = (uint64_t) d;
        } else {
                validation_add(v, "body", name, "int_type", type_msg);
                return false;
        }
        if (!check_range(v, "body", name, x, min, max))
                return false;
        *ret = x;
        return true;
}

bool field_bool(Validation *v, json_t *body, const char *name, bool def, bool *ret) {
        json_t *j;
        bool ok;

        j = field_get(v, body, name, false, "bool_type", "Input should be a valid boolean", &ok);
        if (!j) {
                *ret = def;
                return true;
        }
        if (!json_is_boolean(j)) {
                validation_add(v, "body", name, "bool_type", "Input should be a valid boolean");
                return false;
        }
        *ret = json_is_true(j);
        return true;
}

bool query_u64(Validation *v, Request *req, const char *name, bool required, uint64_t min, uint64_t max,
               uint64_t def, uint64_t *ret) {
        const char *s = req_query(req, name);
        uint64_t x;

        if (!s) {
                if (required) {
                        validation_add(v, "query", name, "missing", "Field required");
                        return false;
                }
                *ret = def;
                return true;
        }
        if (parse_u64(s, &x) < 0) {
                /* "-1" parses as a (negative) integer for pydantic: say so. */
                if (s[0] == '-' && s[1] && strspn(s + 1, "0123456789") == strlen(s + 1))
                        add_bound(v, "query", name, "greater_than_equal",
                                  "Input should be greater than or equal to %" PRIu64, min);
                else
                        validation_add(v, "query", name, "int_parsing",
                                       "Input should be a valid integer, unable to parse string as an integer");
                return false;
        }
        if (!check_range(v, "query", name, x, min, max))
                return false;
        *ret = x;
        return true;
}

int http_json_parse_body(const char *buf, size_t len, json_t **ret, Error *e, json_t **ret_errors) {
        _cleanup_json_ json_t *j = NULL;
        json_error_t jerr;
        char msg[160];

        if (len == 0)
                (void) bsprintf(msg, sizeof msg, "The request body is empty; a JSON object is expected.");
        else {
                j = json_loadb(buf, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
                /* jerr.text quotes the input near the error: never send it back. */
                if (!j && json_error_code(&jerr) == json_error_duplicate_key)
                        (void) bsprintf(msg, sizeof msg, "Invalid JSON: duplicate object key (line %d, column %d).",
                                        jerr.line, jerr.column);
                else if (!j)
                        (void) bsprintf(msg, sizeof msg, "Invalid JSON (line %d, column %d).", jerr.line,
                                        jerr.column);
                else if (!json_is_object(j))
                        (void) bsprintf(msg, sizeof msg, "The request body must be a JSON object.");
                else {
                        *ret = TAKE_PTR(j);
                        return 0;
                }
        }
        (void) error_set(e, -EINVAL, 422, "SANDBOX_INVALID_REQUEST", "%s", msg);
        if (ret_errors)
                *ret_errors = json_pack("[{s:[s], s:s, s:s}]", "loc", "body", "type", "json_invalid", "msg", msg);
        return -EINVAL;
}

json_t *req_json(Request *req, Error *e) {
        if (!req->json_parsed) {
                req->json_parsed = true;
                (void) http_json_parse_body(req->body, req->body_len, &req->json, &req->json_error,
                                            &req->json_errors);
        }
        if (req->json)
                return req->json;
        if (e && !error_is_set(e))
                *e = req->json_error;
        return NULL;
}
