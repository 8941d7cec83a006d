/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "json-util.h"
#include "log.h"
#include "macros.h"
#include "request.h"
#include "string-util.h"

/* Every reply goes through reply_store(): safe from any thread, at most once per request. */

#define INTERNAL_MESSAGE "Internal error; the daemon log has the details."

json_t *reply_error_body(const char *code, const char *message, json_t *errors) {
        json_t *detail;

        detail = json_pack("{s:s, s:s}", "code", code, "message", message);
        if (!detail)
                return NULL;
        if (errors && json_object_set(detail, "errors", errors) < 0) {
                json_decref(detail);
                return NULL;
        }
        return json_pack("{s:o}", "detail", detail);
}

int reply_store(Request *req, unsigned status, struct MHD_Response *resp, uint64_t bytes_out) {
        bool drop_park_ref, duplicate, quiet;

        pthread_mutex_lock(&req->lock);
        drop_park_ref = req->park_ref;
        req->park_ref = false;
        duplicate = req->replied;
        quiet = req->abandoned;
        if (!duplicate) {
                for (size_t i = 0; resp && i < req->n_reply_headers; i++)
                        (void) MHD_add_response_header(resp, req->reply_headers[i].name, req->reply_headers[i].value);
                /* A NULL response (out of memory) makes the access handler close the connection. */
                req->response = resp;
                req->status = status;
                req->bytes_out = bytes_out;
                req->replied = true;
                request_resume_locked(req);
        }
        pthread_mutex_unlock(&req->lock);

        if (duplicate) {
                if (resp)
                        MHD_destroy_response(resp);
                /* After a shutdown 503 a parked handler's late reply is expected; otherwise
                 * a second reply is a bug in the handler. */
                if (!quiet)
                        log_emit(LOG_LEVEL_ERROR,
                                 json_pack("{s:s, s:s?, s:i}", "http_method", req->method, "route",
                                           req_route_pattern(req), "status", (int) status),
                                 "Second reply to one request ignored (a handler bug)");
        }
        if (drop_park_ref)
                request_unref(req);
        return 0;
}

static int reply_buffer(Request *req, unsigned status, const char *content_type, char *data, size_t len) {
        struct MHD_Response *resp;

        /* DATA is malloc()ed and handed to libmicrohttpd, which frees it. */
        resp = MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
        if (!resp) {
                free(data);
                return reply_store(req, status, NULL, 0);
        }
        (void) MHD_add_response_header(resp, "Content-Type", content_type);
        return reply_store(req, status, resp, len);
}

static int reply_json_borrowed(Request *req, unsigned status, const json_t *body) {
        char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;

        if (!text)
                return reply_store(req, 500, NULL, 0);
        return reply_buffer(req, status, "application/json", text, strlen(text));
}

int reply_json(Request *req, unsigned status, json_t *body) {
        _cleanup_json_ json_t *b = body;

        if (!b) {
                log_error("reply_json() without a body (out of memory?)");
                return reply_errorf(req, 500, "SANDBOX_INTERNAL_ERROR", INTERNAL_MESSAGE);
        }
        return reply_json_borrowed(req, status, b);
}

/* Where a generic 422 points: the body for calls that carry one, the query otherwise. */
static const char *default_loc(Request *req) {
        return streq(req->method, "GET") || streq(req->method, "DELETE") ? "query" : "body";
}

int reply_error(Request *req, const Error *e) {
        _cleanup_json_ json_t *body = NULL, *errors = NULL;
        const char *code, *message;
        unsigned status;

        if (!error_is_set(e)) {
                log_emit(LOG_LEVEL_ERROR,
                         json_pack("{s:s, s:s?}", "http_method", req->method, "route", req_route_pattern(req)),
                         "Internal error without a domain error; answering 500");
                status = 500;
                code = "SANDBOX_INTERNAL_ERROR";
                message = INTERNAL_MESSAGE;
        } else {
                status = e->status;
                code = e->code ? e->code : "SANDBOX_INTERNAL_ERROR";
                message = e->message;
        }

        if (status >= 500)
                log_emit(LOG_LEVEL_ERROR,
                         json_pack("{s:s, s:s?, s:i, s:s}", "http_method", req->method, "route", req_route_pattern(req),
                                   "status", (int) status, "code", code),
                         "%s", error_is_set(e) ? e->message : "no error set");
        if (status == 401)
                (void) req_add_reply_header(req, "WWW-Authenticate", "Bearer");

        if (status == 422) {
                /* Every 422 has errors[]: the JSON parser's own list for req_json()'s error,
                 * else one entry carrying the message (which never echoes a value). */
                if (req->json_errors && error_is_set(e) && streq(e->message, req->json_error.message))
                        errors = json_incref(req->json_errors);
                else
                        errors = json_pack("[{s:[s], s:s, s:s}]", "loc", default_loc(req), "type", "value_error",
                                           "msg", message);
        }
        body = reply_error_body(code, message, errors);
        return reply_json_borrowed(req, status, body);
}

int reply_errorf(Request *req, unsigned status, const char *code, const char *fmt, ...) {
        Error e = ERROR_INIT;
        va_list ap;

        e.status = status;
        e.code = code;
        va_start(ap, fmt);
        (void) vsnprintf(e.message, sizeof e.message, fmt, ap);
        va_end(ap);
        return reply_error(req, &e);
}

int reply_text(Request *req, unsigned status, const char *content_type, const char *text) {
        char *copy = strdup(text ? text : "");

        if (!copy)
                return reply_store(req, status, NULL, 0);
        return reply_buffer(req, status, content_type ? content_type : "text/plain; charset=utf-8", copy,
                            strlen(copy));
}

int reply_fd(Request *req, unsigned status, const char *content_type, int fd, uint64_t size) {
        struct MHD_Response *resp;

        if (size == 0) {
                safe_close(fd);
                return reply_text(req, status, content_type, "");
        }
        /* libmicrohttpd owns FD from here (closed with the response), and sends it with
         * sendfile() where it can. */
        resp = MHD_create_response_from_fd64(size, fd);
        if (!resp) {
                safe_close(fd);
                return reply_store(req, status, NULL, 0);
        }
        (void) MHD_add_response_header(resp, "Content-Type",
                                       content_type ? content_type : "application/octet-stream");
        return reply_store(req, status, resp, size);
}

int reply_invalid(Request *req, const char *where, const char *msg) {
        _cleanup_json_ json_t *errors = NULL, *body = NULL;

        errors = json_pack("[{s:[s], s:s, s:s}]", "loc", where, "type", "value_error", "msg", msg);
        body = reply_error_body("SANDBOX_INVALID_REQUEST", msg, errors);
        return reply_json_borrowed(req, 422, body);
}

int reply_validation(Request *req, Validation *v) {
        _cleanup_json_ json_t *body = NULL, *empty = NULL;
        char message[512];
        json_t *first;

        first = v->errors ? json_array_get(v->errors, 0) : NULL;
        if (first) {
                json_t *loc = json_object_get(first, "loc");
                const char *field = json_string_value(json_array_get(loc, json_array_size(loc) - 1));
                const char *msg = json_string_value(json_object_get(first, "msg"));

                (void) bsprintf(message, sizeof message, "Invalid request: %s: %s%s", field ? field : "request",
                                msg ? msg : "invalid", v->count > 1 ? " (and more, see errors)" : "");
        } else
                (void) bsprintf(message, sizeof message, "Invalid request.");

        if (!v->errors)
                empty = json_array();
        body = reply_error_body("SANDBOX_INVALID_REQUEST", message, v->errors ? v->errors : empty);
        /* The list is spent: reset V so that validation_done() after this is harmless. */
        validation_done(v);
        return reply_json_borrowed(req, 422, body);
}
