/* SPDX-License-Identifier: MIT */
/* The sandbox lifecycle routes: validation and the mapping of core answers to HTTP.
 * No business logic here: everything is in core/sandbox.c. */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "disk.h"
#include "handlers.h"
#include "json-util.h"
#include "macros.h"
#include "sandbox.h"
#include "string-util.h"

#define PATTERN_RULE "String should match pattern '^[A-Za-z0-9_.:-]+$'"
#define CONTROL_RULE "String should not contain control characters"
#define DEFAULT_LIST_LIMIT 100u
#define OFFSET_MAX ((uint64_t) INT64_MAX)

static bool sandbox_id_is_valid(const char *s) {
        return s && str_in_charset(s, ID_CHARSET, 3, SANDBOX_ID_MAX);
}

/* Text that will be stored and shown back: no C0 controls, no DEL, no C1 controls
 * (U+0080..U+009F, UTF-8 C2 80..C2 9F). jansson has already checked the UTF-8. */
static bool text_is_printable(const char *s, size_t minlen, size_t maxlen) {
        size_t n = strlen(s);

        if (n < minlen || n > maxlen)
                return false;
        return string_is_printable(s);
}

/* The {id} path parameter, which must follow the same rule as in a resolve body. */
static const char *path_sandbox_id(Request *req, Validation *v) {
        const char *id = req_param(req, "id");
        size_t n = id ? strlen(id) : 0;

        if (n < 3)
                validation_add(v, "path", "sandbox_id", "string_too_short", "String should have at least 3 characters");
        else if (n > SANDBOX_ID_MAX)
                validation_add(v, "path", "sandbox_id", "string_too_long",
                               "String should have at most 128 characters");
        else if (!sandbox_id_is_valid(id))
                validation_add(v, "path", "sandbox_id", "string_pattern_mismatch", PATTERN_RULE);
        else
                return id;
        return NULL;
}

static int reply_record(Request *req, const SandboxRecord *rec, bool with_uid) {
        json_t *o = sandbox_record_json(req_daemon(req), rec);

        if (o && with_uid && json_object_set_new(o, "uid", json_integer((json_int_t) rec->uid)) < 0) {
                json_decref(o);
                o = NULL;
        }
        if (!o)
                return reply_errorf(req, 500, "SANDBOX_INTERNAL_ERROR", "building the answer failed");
        return reply_json(req, 200, o);
}

/* One integer of "limits": LOC is "limits.<name>". */
static void limit_u64(Validation *v, json_t *l, const char *name, const char *loc, uint64_t min, uint64_t max,
                      uint64_t *ret) {
        json_t *j = json_object_get(l, name);
        json_int_t i;

        if (!j || json_is_null(j))
                return;
        if (!json_is_integer(j)) {
                validation_add(v, "body", loc, "int_type", "Input should be a valid integer");
                return;
        }
        i = json_integer_value(j);
        if (i < 0 || (uint64_t) i < min) {
                char msg[96];
                (void) bsprintf(msg, sizeof msg, "Input should be greater than or equal to %" PRIu64, min);
                validation_add(v, "body", loc, "greater_than_equal", msg);
                return;
        }
        if ((uint64_t) i > max) {
                char msg[96];
                (void) bsprintf(msg, sizeof msg, "Input should be less than or equal to %" PRIu64, max);
                validation_add(v, "body", loc, "less_than_equal", msg);
                return;
        }
        *ret = (uint64_t) i;
}

/* The optional "limits" object of a resolve: the sandbox's own limits (0 = not asked for).
 * Bounds here are sanity; the operator's maxima are checked by the core. */
static void parse_limits(Validation *v, json_t *body, SandboxLimits *ret, bool *ret_given) {
        static const char *const known[] = { "memory_bytes", "max_processes", "cpu_quota", "disk_quota_bytes" };
        json_t *l = json_object_get(body, "limits"), *j;
        const char *key;

        *ret = (SandboxLimits) {};
        *ret_given = false;
        if (!l || json_is_null(l))
                return;
        if (!json_is_object(l)) {
                validation_add(v, "body", "limits", "dict_type", "Input should be a valid dictionary");
                return;
        }
        json_object_foreach (l, key, j) {
                bool ok = false;
                for (size_t i = 0; i < ELEMENTSOF(known); i++)
                        ok = ok || streq(key, known[i]);
                if (!ok) {
                        validation_add(v, "body", "limits", "extra_forbidden",
                                       "limits takes memory_bytes, max_processes, cpu_quota and disk_quota_bytes only");
                        return;
                }
        }
        limit_u64(v, l, "memory_bytes", "limits.memory_bytes", UINT64_C(1) << 20, UINT64_C(1) << 50, &ret->memory_bytes);
        limit_u64(v, l, "max_processes", "limits.max_processes", 1, 4194304, &ret->max_processes);
        limit_u64(v, l, "disk_quota_bytes", "limits.disk_quota_bytes", UINT64_C(1) << 20, UINT64_C(1) << 50,
                  &ret->disk_quota_bytes);
        j = json_object_get(l, "cpu_quota");
        if (j && !json_is_null(j)) {
                /* Cores, at most 3 decimals: 0.5, 2, 1.25. */
                double cores = json_number_value(j), milli = cores * 1000.0;
                uint64_t m = 0;

                /* Converted only once in range: out of range, the cast is undefined. */
                if (cores >= 0.001 && cores <= 4096.0)
                        m = (uint64_t) (milli + 0.5);
                if (!json_is_number(j))
                        validation_add(v, "body", "limits.cpu_quota", "float_type", "Input should be a valid number");
                else if (!(cores >= 0.001 && cores <= 4096.0))
                        validation_add(v, "body", "limits.cpu_quota", "value_error",
                                       "Input should be a number of cores from 0.001 to 4096");
                else if (milli - (double) m > 1e-6 || (double) m - milli > 1e-6)
                        validation_add(v, "body", "limits.cpu_quota", "value_error",
                                       "Input should have at most 3 decimals");
                else
                        ret->cpu_millicores = m;
        }
        *ret_given = true;
}

int handle_sandbox_resolve(Request *req) {
        _cleanup_(validation_done) Validation v = {};
        const char *sandbox_id = NULL, *scope = NULL, *profile = NULL;
        Error e = ERROR_INIT;
        SandboxLimits limits;
        bool has_limits;
        SandboxRecord rec;
        json_t *body;
        int r;

        validation_init(&v);
        body = req_json(req, &e);
        if (!body)
                return reply_error(req, &e);

        if (field_string(&v, body, "sandbox_id", true, 3, SANDBOX_ID_MAX, &sandbox_id) && sandbox_id &&
            !sandbox_id_is_valid(sandbox_id))
                validation_add(&v, "body", "sandbox_id", "string_pattern_mismatch", PATTERN_RULE);
        if (field_string(&v, body, "workspace_scope_id", true, 1, SCOPE_ID_MAX, &scope) && scope &&
            !text_is_printable(scope, 1, SCOPE_ID_MAX))
                validation_add(&v, "body", "workspace_scope_id", "value_error", CONTROL_RULE);
        if (field_string(&v, body, "profile", false, 0, PROFILE_MAX, &profile) && !isempty(profile) &&
            !str_in_charset(profile, ID_CHARSET, 1, PROFILE_MAX))
                validation_add(&v, "body", "profile", "string_pattern_mismatch", PATTERN_RULE);
        parse_limits(&v, body, &limits, &has_limits);
        if (v.count > 0)
                return reply_validation(req, &v);

        /* Under disk pressure only a resolve that creates is refused; one of a live sandbox
         * answers as always. */
        r = disk_admit(req_daemon(req)->disk, NULL, NULL, &e);
        if (r < 0) {
                Error ignored = ERROR_INIT;

                if (sandbox_get(req_daemon(req), req_principal(req), sandbox_id, &rec, &ignored) < 0 ||
                    rec.status == SANDBOX_RELEASED || rec.status == SANDBOX_RELEASING)
                        return reply_error(req, &e);
                e = (Error) ERROR_INIT;
        }
        r = sandbox_resolve_limits(req_daemon(req), req_principal(req), sandbox_id, scope, profile,
                                   has_limits ? &limits : NULL, &rec, &e);
        if (r < 0)
                return reply_error(req, &e);
        return reply_record(req, &rec, false);
}

int handle_sandbox_connect(Request *req) {
        _cleanup_(validation_done) Validation v = {};
        Error e = ERROR_INIT;
        SandboxRecord rec;
        const char *id;
        uint64_t generation = 0;
        json_t *body;
        int r;

        validation_init(&v);
        id = path_sandbox_id(req, &v);
        if (v.count > 0)
                return reply_validation(req, &v);
        body = req_json(req, &e);
        if (!body)
                return reply_error(req, &e);
        (void) field_u64(&v, body, "generation", true, 0, OFFSET_MAX, &generation);
        if (v.count > 0)
                return reply_validation(req, &v);

        r = sandbox_connect(req_daemon(req), req_principal(req), id, generation, &rec, &e);
        if (r < 0)
                return reply_error(req, &e);
        return reply_record(req, &rec, true);
}

int handle_sandbox_release(Request *req) {
        _cleanup_(validation_done) Validation v = {};
        Error e = ERROR_INIT;
        const char *id, *reason;
        bool known = false;
        json_t *answer;
        int r;

        validation_init(&v);
        id = path_sandbox_id(req, &v);
        reason = req_query(req, "reason");
        if (reason && strlen(reason) > REASON_MAX)
                validation_add(&v, "query", "reason", "string_too_long", "String should have at most 128 characters");
        else if (reason && !text_is_printable(reason, 0, REASON_MAX))
                validation_add(&v, "query", "reason", "value_error", CONTROL_RULE);
        if (v.count > 0)
                return reply_validation(req, &v);

        r = sandbox_release(req_daemon(req), req_principal(req), id, reason, &known, &e);
        if (r < 0)
                return reply_error(req, &e);
        /* Sandloom answers RELEASED for an unknown id too: releasing is idempotent. */
        answer = json_pack("{s:s, s:s}", "sandbox_id", id, "status", "RELEASED");
        if (!answer)
                return reply_errorf(req, 500, "SANDBOX_INTERNAL_ERROR", "building the answer failed");
        return reply_json(req, 200, answer);
}

int handle_sandbox_get(Request *req) {
        _cleanup_(validation_done) Validation v = {};
        Error e = ERROR_INIT;
        SandboxRecord rec;
        json_t *o, *usage;
        const char *id;
        int r;

        validation_init(&v);
        id = path_sandbox_id(req, &v);
        if (v.count > 0)
                return reply_validation(req, &v);

        r = sandbox_get(req_daemon(req), req_principal(req), id, &rec, &e);
        if (r < 0)
                return reply_error(req, &e);
        o = sandbox_record_json(req_daemon(req), &rec);
        if (!o)
                return reply_errorf(req, 500, "SANDBOX_INTERNAL_ERROR", "building the answer failed");
        usage = disk_sandbox_json(req_daemon(req)->disk, &rec);
        if (usage && json_object_set_new(o, "disk", usage) < 0) {
                json_decref(o);
                return reply_errorf(req, 500, "SANDBOX_INTERNAL_ERROR", "building the answer failed");
        }
        return reply_json(req, 200, o);
}

/* status=: a store status name, or "live" (every status but RELEASED, the default) or
 * "any". */
static bool parse_status_filter(const char *s, int *ret) {
        int st;

        if (!s) {
                *ret = SANDBOX_FILTER_LIVE;
                return true;
        }
        if (strcasecmp(s, "live") == 0) {
                *ret = SANDBOX_FILTER_LIVE;
                return true;
        }
        if (strcasecmp(s, "any") == 0 || strcasecmp(s, "all") == 0) {
                *ret = SANDBOX_FILTER_ANY;
                return true;
        }
        st = sandbox_status_from_string(s);
        if (st < 0)
                return false;
        *ret = st;
        return true;
}

int handle_sandbox_list(Request *req) {
        _cleanup_(validation_done) Validation v = {};
        Daemon *d = req_daemon(req);
        Error e = ERROR_INIT;
        const char *scope, *status_s;
        uint64_t limit = 0, offset = 0, max_limit;
        int status = SANDBOX_FILTER_LIVE, r;
        json_t *answer = NULL;

        validation_init(&v);
        scope = req_query(req, "workspace_scope_id");
        if (scope && (isempty(scope) || strlen(scope) > SCOPE_ID_MAX))
                validation_add(&v, "query", "workspace_scope_id", "string_too_long",
                               "String should have 1 to 191 characters");
        else if (scope && !text_is_printable(scope, 1, SCOPE_ID_MAX))
                validation_add(&v, "query", "workspace_scope_id", "value_error", CONTROL_RULE);
        status_s = req_query(req, "status");
        if (!parse_status_filter(status_s, &status))
                validation_add(&v, "query", "status", "enum",
                               "Input should be 'ASSIGNED', 'READY', 'SUSPENDING', 'SUSPENDED', 'RELEASING', "
                               "'RELEASED', 'live' or 'any'");
        max_limit = MAX(d->config.max_list_limit, (uint64_t) 1);
        (void) query_u64(&v, req, "limit", false, 1, max_limit, MIN((uint64_t) DEFAULT_LIST_LIMIT, max_limit), &limit);
        (void) query_u64(&v, req, "offset", false, 0, OFFSET_MAX, 0, &offset);
        if (v.count > 0)
                return reply_validation(req, &v);

        r = sandbox_list(d, req_principal(req), scope, status, limit, offset, &answer, &e);
        if (r < 0)
                return reply_error(req, &e);
        return reply_json(req, 200, answer);
}

int handle_sandbox_audit(Request *req) {
        _cleanup_(validation_done) Validation v = {};
        Daemon *d = req_daemon(req);
        Error e = ERROR_INIT;
        uint64_t limit = 0, offset = 0, max_limit;
        json_t *answer = NULL;
        const char *id;
        int r;

        validation_init(&v);
        id = path_sandbox_id(req, &v);
        max_limit = MAX(d->config.max_list_limit, (uint64_t) 1);
        (void) query_u64(&v, req, "limit", false, 1, max_limit, MIN((uint64_t) DEFAULT_LIST_LIMIT, max_limit), &limit);
        (void) query_u64(&v, req, "offset", false, 0, OFFSET_MAX, 0, &offset);
        if (v.count > 0)
                return reply_validation(req, &v);

        r = sandbox_audit(d, req_principal(req), id, limit, offset, &answer, &e);
        if (r < 0)
                return reply_error(req, &e);
        return reply_json(req, 200, answer);
}
