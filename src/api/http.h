/* SPDX-License-Identifier: MIT */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "daemon.h"
#include "error.h"
#include "principal.h"

/* The contract between the HTTP glue (server.c, on libmicrohttpd) and the handlers.
 * A handler never sees libmicrohttpd: it reads the request through these accessors and
 * answers with exactly one reply_*() call. */

typedef struct Request Request;

/* Handlers return 0 after calling a reply_*() function, or API_PARKED when they have
 * handed the request to another thread that will call reply_*() later (the connection is
 * then suspended with MHD_suspend_connection and holds no pool thread). A negative errno
 * without a reply becomes a 500 (a bug). */
#define API_PARKED 1

typedef int (*Handler)(Request *req);

/* For routes that stream their body to disk (raw and archive uploads): called once the
 * headers are in, before any body byte is read. Checks what can be checked early (auth is
 * done, path, generation, size) and returns, in *ret_fd, an fd the server writes the body
 * into (the handler keeps its own reference; the server never closes it). It may reply
 * with an error instead and return 0 with *ret_fd = -EBADF: the body is then discarded. */
typedef int (*UploadBegin)(Request *req, int *ret_fd);

typedef enum RouteFlags {
        ROUTE_PUBLIC = 1 << 0,       /* no token needed (/health, /healthz) */
        ROUTE_UPLOAD = 1 << 1,       /* body streamed via upload_begin, up to SANDBOX_MAX_UPLOAD_BYTES */
        ROUTE_OFFLOAD = 1 << 2,      /* slow work: run the handler on the job pool, connection parked */
} RouteFlags;

typedef struct Route {
        const char *method;          /* "GET", "POST", "PUT", "DELETE" */
        const char *pattern;         /* "/api/v1/sandboxes/{id}/files" */
        Handler handler;
        UploadBegin upload_begin;    /* only with ROUTE_UPLOAD */
        unsigned flags;
} Route;

/* --- reading the request --- */
Daemon *req_daemon(Request *req);
const Principal *req_principal(Request *req);
const char *req_method(Request *req);
const char *req_route_pattern(Request *req);
/* A path parameter ({id}, {exec_id}), percent-decoded. NULL if the route has none. */
const char *req_param(Request *req, const char *name);
/* A query parameter, percent-decoded; NULL if absent. */
const char *req_query(Request *req, const char *name);
/* A request header (case-insensitive); NULL if absent. */
const char *req_header(Request *req, const char *name);
/* The JSON body, which must be an object. On malformed JSON / not an object / empty body
 * fills E with 422 SANDBOX_INVALID_REQUEST and returns NULL. Borrowed: do not decref. */
json_t *req_json(Request *req, Error *e);
/* For ROUTE_UPLOAD routes, after the body is in: bytes received. */
uint64_t req_upload_size(Request *req);
/* Per-request slot for handler state carried from upload_begin to the handler; FREE is
 * called when the request ends (also when the client went away mid-upload). */
void req_set_userdata(Request *req, void *data, void (*free_fn)(void *));
void *req_userdata(Request *req);

/* --- answering: exactly one of these per request --- */
/* BODY is stolen. */
int reply_json(Request *req, unsigned status, json_t *body);
/* {"detail": {"code", "message"}}; E must be set (unset = 500 internal). */
int reply_error(Request *req, const Error *e);
/* Shortcut: reply_error with a fresh Error. */
int reply_errorf(Request *req, unsigned status, const char *code, const char *fmt, ...) _printf_(4, 5);
int reply_text(Request *req, unsigned status, const char *content_type, const char *text);
/* Streams SIZE bytes of FD from offset 0; FD is stolen (closed when sent). */
int reply_fd(Request *req, unsigned status, const char *content_type, int fd, uint64_t size);
/* Copies LEN bytes of DATA (binary) as the body. */
int reply_bytes(Request *req, unsigned status, const char *content_type, const void *data, size_t len);

/* A body produced while it is sent (Server-Sent Events): 200, chunked. READ(UD, POS, BUF,
 * MAX) runs on the connection's thread and returns the number of bytes it put in BUF,
 * 0 for "nothing now" (the connection is then suspended, holding no thread, until
 * req_stream_wake()), or a negative value at the end (STREAM_END: done; anything else:
 * abort the connection). FREE_UD(UD) runs once the response is gone (the client left, the
 * stream ended, or the daemon stopped); until then REQ stays valid for req_stream_wake(). */
#define STREAM_END ((ssize_t) -1)
typedef ssize_t (*StreamReadFn)(void *ud, uint64_t pos, char *buf, size_t max);
int reply_stream(Request *req, const char *content_type, StreamReadFn read, void *ud, void (*free_ud)(void *));
/* Any thread: there may be more to read; resumes a stream suspended on "nothing now". */
void req_stream_wake(Request *req);

/* Adds a response header to the reply about to be sent (call before reply_*). */
int req_add_reply_header(Request *req, const char *name, const char *value);

/* --- validation helpers: build the 422 errors[] list ({loc, type, msg}, at most 20) --- */
typedef struct Validation {
        json_t *errors;              /* array */
        unsigned count;
} Validation;

void validation_init(Validation *v);
void validation_done(Validation *v);
/* Records a problem with field LOC (e.g. "body", "sandbox_id"). Never echoes the value. */
void validation_add(Validation *v, const char *where, const char *field, const char *type, const char *msg);
/* Replies 422 SANDBOX_INVALID_REQUEST with the collected errors; returns 0. */
int reply_validation(Request *req, Validation *v);

/* Typed field getters over a JSON object: each records a validation error and returns
 * false when the field is present with a wrong type/range, or missing while required.
 * Strings with an embedded NUL are refused. */
bool field_string(Validation *v, json_t *body, const char *name, bool required, size_t minlen, size_t maxlen,
                  const char **ret);
bool field_u64(Validation *v, json_t *body, const char *name, bool required, uint64_t min, uint64_t max,
               uint64_t *ret);
bool field_bool(Validation *v, json_t *body, const char *name, bool def, bool *ret);
/* Query parameters: integer with bounds (absent = DEF). */
bool query_u64(Validation *v, Request *req, const char *name, bool required, uint64_t min, uint64_t max,
               uint64_t def, uint64_t *ret);
