/* SPDX-License-Identifier: MIT */
/* The files routes: validation, holds, and the mapping of core answers to HTTP. The file
 * operations themselves (in-root resolution, identity switch, atomic writes) are in
 * core/files*.c and core/archive.c. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base64.h"
#include "disk.h"
#include "files.h"
#include "handlers.h"
#include "json-util.h"
#include "macros.h"
#include "parse-util.h"
#include "sandbox.h"
#include "string-util.h"

#define ID_RULE "must be 3-128 characters of A-Z a-z 0-9 _ . : -"
#define GENERATION_MAX ((uint64_t) INT64_MAX)
#define OFFSET_MAX ((uint64_t) INT64_MAX)
#define LIST_LIMIT_DEFAULT 200u
#define LIST_LIMIT_MAX 10000u
/* Longer than any valid path, so that the path rules (with their own messages) decide. */
#define PATH_FIELD_MAX (4 * PATH_MAX)

/* The common parts of one files call: sandbox id, generation and canonical path(s). */
typedef struct FilesCall {
        Validation v;
        Error outside;                 /* 400 SANDBOX_PATH_OUTSIDE_WORKSPACE, reported after validation */
        const char *id;
        uint64_t generation;
} FilesCall;

static void files_call_done(FilesCall *c) {
        validation_done(&c->v);
}

static void files_call_init(FilesCall *c, Request *req) {
        *c = (FilesCall) { .outside = ERROR_INIT };
        validation_init(&c->v);
        c->id = req_param(req, "id");
        if (!c->id || !str_in_charset(c->id, ID_CHARSET, 3, SANDBOX_ID_MAX)) {
                validation_add(&c->v, "path", "sandbox_id", "string_pattern_mismatch", ID_RULE);
                c->id = NULL;
        }
}

/* Normalises RAW into CANON; a 422 becomes a validation entry, a 400 is kept for later. */
static void check_path(FilesCall *c, const char *where, const char *field, const char *raw, bool required,
                       char canon[static PATH_MAX]) {
        Error e = ERROR_INIT;

        if (!raw) {
                if (required)
                        validation_add(&c->v, where, field, "missing", "Field required");
                return;
        }
        if (files_normalize_path(raw, strlen(raw), canon, PATH_MAX, &e) >= 0)
                return;
        if (e.status == 422)
                validation_add(&c->v, where, field, "value_error", e.message);
        else if (!error_is_set(&c->outside))
                c->outside = e;
}

/* Query-style calls (GET, and the streamed uploads): generation and path in the query. */
static void query_common(FilesCall *c, Request *req, bool path_required, char canon[static PATH_MAX]) {
        (void) query_u64(&c->v, req, "generation", true, 1, GENERATION_MAX, 0, &c->generation);
        check_path(c, "query", "path", req_query(req, "path"), path_required, canon);
}

static bool query_bool(FilesCall *c, Request *req, const char *name, bool def) {
        const char *s = req_query(req, name);
        bool b;

        if (!s)
                return def;
        if (parse_bool(s, &b) < 0) {
                validation_add(&c->v, "query", name, "bool_parsing", "must be true or false");
                return def;
        }
        return b;
}

/* Replies for a finished validation: 422 with errors[], then the 400 outside-path error.
 * Returns 1 when it replied. */
static int reply_if_invalid(Request *req, FilesCall *c) {
        if (c->v.count > 0) {
                (void) reply_validation(req, &c->v);
                return 1;
        }
        if (error_is_set(&c->outside)) {
                (void) reply_error(req, &c->outside);
                return 1;
        }
        return 0;
}

static int reply_failure(Request *req, Error *e, int r, const char *what) {
        if (!error_is_set(e))
                error_fill_internal(e, r, what);
        return reply_error(req, e);
}

static int open_sandbox(Request *req, FilesCall *c, HoldKind kind, const char *path, const char *path2,
                        SandboxHandle **ret, Error *e) {
        return sandbox_open(req_daemon(req), req_principal(req), c->id, c->generation, kind, path, path2, ret, e);
}

/* For what makes the sandbox's data grow (writes, uploads, mkdir; not delete or move): the
 * disk watermarks and the sandbox's quota, checked once the sandbox is open. */
static int open_for_growth(Request *req, FilesCall *c, const char *path, SandboxHandle **ret, Error *e) {
        _cleanup_(sandbox_handle_closep) SandboxHandle *h = NULL;
        int r;

        r = open_sandbox(req, c, HOLD_FILE_WRITE, path, NULL, &h, e);
        if (r < 0)
                return r;
        r = disk_admit(req_daemon(req)->disk, h->record.owner, h->record.sandbox_id, e);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(h);
        return 0;
}

static json_t *body_common(Request *req, FilesCall *c, Error *e) {
        json_t *body = req_json(req, e);

        if (body)
                (void) field_u64(&c->v, body, "generation", true, 1, GENERATION_MAX, &c->generation);
        return body;
}

static int reply_ok_path(Request *req, const char *canon) {
        json_t *o = json_pack("{s:s, s:s}", "status", "ok", "path", canon);

        if (!o)
                return reply_errorf(req, 500, "SANDBOX_INTERNAL_ERROR", "building the answer failed");
        return reply_json(req, 200, o);
}

static ArchiveLimits archive_limits(Request *req) {
        const Config *cfg = &req_daemon(req)->config;

        return (ArchiveLimits) { .max_entries = cfg->max_archive_entries, .max_bytes = cfg->max_upload_bytes };
}

/* Content-Length against the upload limit, before any byte is read. */
static bool upload_size_ok(Request *req, FilesCall *c) {
        const char *cl = req_header(req, "Content-Length");
        uint64_t n;

        if (!cl)
                return true;        /* chunked: the server stops at the limit while streaming */
        if (parse_u64(cl, &n) < 0) {
                validation_add(&c->v, "header", "Content-Length", "int_parsing", "must be a byte count");
                return true;
        }
        return n <= req_daemon(req)->config.max_upload_bytes;
}

/* ------------------------------------------------------------- PUT/GET /files --- */

int handle_files_put(Request *req) {
        _cleanup_(files_call_done) FilesCall c;
        _cleanup_(sandbox_handle_closep) SandboxHandle *h = NULL;
        _cleanup_free_ void *data = NULL;
        const char *raw_path = NULL, *b64 = NULL;
        char canon[PATH_MAX];
        bool make_parents = false;
        Error e = ERROR_INIT;
        uint64_t max;
        size_t size = 0;
        json_t *body;
        int r;

        files_call_init(&c, req);
        if (reply_if_invalid(req, &c))
                return 0;
        body = body_common(req, &c, &e);
        if (!body)
                return reply_error(req, &e);
        if (field_string(&c.v, body, "path", true, 1, PATH_FIELD_MAX, &raw_path))
                check_path(&c, "body", "path", raw_path, true, canon);
        (void) field_string(&c.v, body, "content_base64", true, 0, SIZE_MAX, &b64);
        (void) field_bool(&c.v, body, "make_parents", false, &make_parents);
        if (reply_if_invalid(req, &c))
                return 0;

        max = req_daemon(req)->config.max_file_api_bytes;
        r = base64_decode(b64, strlen(b64), (size_t) MIN(max, (uint64_t) SIZE_MAX), &data, &size);
        if (r == -EFBIG)
                return reply_errorf(req, 413, "SANDBOX_FILE_TOO_LARGE",
                                    "content is larger than %" PRIu64 " bytes; use PUT .../files/raw", max);
        if (r < 0) {
                validation_add(&c.v, "body", "content_base64", "value_error", "must be standard base64");
                return reply_validation(req, &c.v);
        }

        r = open_for_growth(req, &c, canon, &h, &e);
        if (r < 0)
                return reply_failure(req, &e, r, "opening the sandbox");
        r = files_write(h, canon, data, size, make_parents, &e);
        if (r < 0)
                return reply_failure(req, &e, r, "writing the file");
        sandbox_handle_touch(h);
        return reply_ok_path(req, canon);
}

int handle_files_get(Request *req) {
        _cleanup_(files_call_done) FilesCall c;
        _cleanup_(sandbox_handle_closep) SandboxHandle *h = NULL;
        _cleanup_free_ char *data = NULL, *b64 = NULL;
        char canon[PATH_MAX];
        Error e = ERROR_INIT;
        size_t size = 0, b64_len = 0;
        uint64_t max;
        json_t *o;
        int r;

        files_call_init(&c, req);
        query_common(&c, req, true, canon);
        if (reply_if_invalid(req, &c))
                return 0;

        r = open_sandbox(req, &c, HOLD_FILE_READ, canon, NULL, &h, &e);
        if (r < 0)
                return reply_failure(req, &e, r, "opening the sandbox");
        max = req_daemon(req)->config.max_file_api_bytes;
        r = files_read(h, canon, max, &data, &size, &e);
        if (r == -EFBIG)
                return reply_errorf(req, 413, "SANDBOX_FILE_TOO_LARGE",
                                    "file is larger than %" PRIu64 " bytes; use GET .../files/raw", max);
        if (r < 0)
                return reply_failure(req, &e, r, "reading the file");
        r = base64_encode(data, size, &b64, &b64_len);
        if (r < 0)
                return reply_failure(req, &e, r, "encoding the file");
        o = json_pack("{s:s, s:s%}", "path", canon, "content_base64", b64, b64_len);
        if (!o)
                return reply_errorf(req, 500, "SANDBOX_INTERNAL_ERROR", "building the answer failed");
        return reply_json(req, 200, o);
}

/* --------------------------------------------------------------- /files/raw --- */

int handle_files_raw_get(Request *req) {
        _cleanup_(files_call_done) FilesCall c;
        _cleanup_(sandbox_handle_closep) SandboxHandle *h = NULL;
        char canon[PATH_MAX];
        Error e = ERROR_INIT;
        uint64_t size = 0;
        int fd = -EBADF, r;

        files_call_init(&c, req);
        query_common(&c, req, true, canon);
        if (reply_if_invalid(req, &c))
                return 0;

        r = open_sandbox(req, &c, HOLD_FILE_READ, canon, NULL, &h, &e);
        if (r < 0)
                return reply_failure(req, &e, r, "opening the sandbox");
        r = files_open_read(h, canon, &fd, &size, &e);
        if (r < 0)
                return reply_failure(req, &e, r, "reading the file");
        /* The open fd keeps this version of the file: a write renames a new inode in. */
        return reply_fd(req, 200, "application/octet-stream", fd, size);
}

typedef struct RawUpload {
        SandboxHandle *h;
        FileWrite *w;
        char path[PATH_MAX];
} RawUpload;

static void raw_upload_free(void *p) {
        RawUpload *u = p;

        if (!u)
                return;
        files_write_abort(u->w);        /* the client went away, or an error: no temp file stays */
        sandbox_handle_close(u->h);
        free(u);
}

int upload_files_raw(Request *req, int *ret_fd) {
        _cleanup_(files_call_done) FilesCall c;
        _cleanup_free_ RawUpload *u = NULL;
        Error e = ERROR_INIT;
        bool make_parents;
        int fd = -EBADF, r;

        *ret_fd = -EBADF;
        files_call_init(&c, req);
        u = calloc(1, sizeof *u);
        if (!u)
                return reply_errorf(req, 503, "SANDBOX_UNAVAILABLE", "out of memory");
        query_common(&c, req, true, u->path);
        make_parents = query_bool(&c, req, "make_parents", false);
        if (!upload_size_ok(req, &c))
                return reply_errorf(req, 413, "SANDBOX_FILE_TOO_LARGE", "body is larger than %" PRIu64 " bytes",
                                    req_daemon(req)->config.max_upload_bytes);
        if (reply_if_invalid(req, &c))
                return 0;

        r = open_for_growth(req, &c, u->path, &u->h, &e);
        if (r < 0)
                return reply_failure(req, &e, r, "opening the sandbox");
        r = files_write_begin(u->h, u->path, make_parents, &u->w, &fd, &e);
        if (r < 0) {
                sandbox_handle_close(u->h);
                return reply_failure(req, &e, r, "writing the file");
        }
        req_set_userdata(req, TAKE_PTR(u), raw_upload_free);
        *ret_fd = fd;
        return 0;
}

int handle_files_raw_put(Request *req) {
        RawUpload *u = req_userdata(req);
        Error e = ERROR_INIT;
        uint64_t size;
        json_t *o;
        int r;

        if (!u || !u->w)
                return reply_errorf(req, 500, "SANDBOX_INTERNAL_ERROR", "upload state missing");
        size = req_upload_size(req);
        r = files_write_commit(TAKE_PTR(u->w), &e);
        if (r < 0)
                return reply_failure(req, &e, r, "writing the file");
        sandbox_handle_touch(u->h);
        o = json_pack("{s:s, s:s, s:I}", "status", "ok", "path", u->path, "size_bytes", (json_int_t) size);
        if (!o)
                return reply_errorf(req, 500, "SANDBOX_INTERNAL_ERROR", "building the answer failed");
        return reply_json(req, 200, o);
}

/* ---------------------------------------------------------- list, stat, mkdir --- */

static int add_status_ok(json_t *o) {
        return json_object_set_new(o, "status", json_string("ok"));
}

int handle_files_list(Request *req) {
        _cleanup_(files_call_done) FilesCall c;
        _cleanup_(sandbox_handle_closep) SandboxHandle *h = NULL;
        char canon[PATH_MAX] = "/workspace";
        uint64_t limit = LIST_LIMIT_DEFAULT, offset = 0, max_limit;
        Error e = ERROR_INIT;
        json_t *o = NULL;
        int r;

        files_call_init(&c, req);
        query_common(&c, req, false, canon);
        max_limit = req_daemon(req)->config.max_list_limit;
        if (max_limit == 0 || max_limit > LIST_LIMIT_MAX)
                max_limit = LIST_LIMIT_MAX;
        (void) query_u64(&c.v, req, "limit", false, 1, max_limit, MIN((uint64_t) LIST_LIMIT_DEFAULT, max_limit),
                         &limit);
        (void) query_u64(&c.v, req, "offset", false, 0, OFFSET_MAX, 0, &offset);
        if (reply_if_invalid(req, &c))
                return 0;

        r = open_sandbox(req, &c, HOLD_FILE_READ, canon, NULL, &h, &e);
        if (r < 0)
                return reply_failure(req, &e, r, "opening the sandbox");
        r = files_list(h, canon, limit, offset, &o, &e);
        if (r < 0)
                return reply_failure(req, &e, r, "listing the directory");
        (void) add_status_ok(o);
        return reply_json(req, 200, o);
}

int handle_files_stat(Request *req) {
        _cleanup_(files_call_done) FilesCall c;
        _cleanup_(sandbox_handle_closep) SandboxHandle *h = NULL;
        char canon[PATH_MAX];
        Error e = ERROR_INIT;
        json_t *o = NULL;
        int r;

        files_call_init(&c, req);
        query_common(&c, req, true, canon);
        if (reply_if_invalid(req, &c))
                return 0;

        r = open_sandbox(req, &c, HOLD_FILE_READ, canon, NULL, &h, &e);
        if (r < 0)
                return reply_failure(req, &e, r, "opening the sandbox");
        r = files_stat(h, canon, &o, &e);
        if (r < 0)
                return reply_failure(req, &e, r, "reading the file's status");
        (void) add_status_ok(o);
        return reply_json(req, 200, o);
}

/* mkdir and delete: a path, one boolean flag, one operation that changes the tree. */
typedef int (*PathFlagOp)(SandboxHandle *h, const char *path, bool flag, Error *e);

static int handle_path_flag_op(Request *req, const char *flag_name, PathFlagOp op, const char *what) {
        _cleanup_(files_call_done) FilesCall c;
        _cleanup_(sandbox_handle_closep) SandboxHandle *h = NULL;
        const char *raw_path = NULL;
        char canon[PATH_MAX];
        bool flag = false;
        Error e = ERROR_INIT;
        json_t *body;
        int r;

        files_call_init(&c, req);
        if (reply_if_invalid(req, &c))
                return 0;
        body = body_common(req, &c, &e);
        if (!body)
                return reply_error(req, &e);
        if (field_string(&c.v, body, "path", true, 1, PATH_FIELD_MAX, &raw_path))
                check_path(&c, "body", "path", raw_path, true, canon);
        (void) field_bool(&c.v, body, flag_name, false, &flag);
        if (reply_if_invalid(req, &c))
                return 0;

        if (op == files_mkdir)
                r = open_for_growth(req, &c, canon, &h, &e);
        else
                r = open_sandbox(req, &c, HOLD_FILE_WRITE, canon, NULL, &h, &e);
        if (r < 0)
                return reply_failure(req, &e, r, "opening the sandbox");
        r = op(h, canon, flag, &e);
        if (r < 0)
                return reply_failure(req, &e, r, what);
        sandbox_handle_touch(h);
        return reply_ok_path(req, canon);
}

int handle_files_mkdir(Request *req) {
        return handle_path_flag_op(req, "parents", files_mkdir, "creating the directory");
}

/* ------------------------------------------------------------- delete, move --- */

int handle_files_delete(Request *req) {
        return handle_path_flag_op(req, "recursive", files_delete, "deleting");
}

int handle_files_move(Request *req) {
        _cleanup_(files_call_done) FilesCall c;
        _cleanup_(sandbox_handle_closep) SandboxHandle *h = NULL;
        const char *raw_src = NULL, *raw_dst = NULL;
        char src[PATH_MAX], dst[PATH_MAX];
        bool overwrite = false;
        Error e = ERROR_INIT;
        json_t *body, *o;
        int r;

        files_call_init(&c, req);
        if (reply_if_invalid(req, &c))
                return 0;
        body = body_common(req, &c, &e);
        if (!body)
                return reply_error(req, &e);
        if (field_string(&c.v, body, "source", true, 1, PATH_FIELD_MAX, &raw_src))
                check_path(&c, "body", "source", raw_src, true, src);
        if (field_string(&c.v, body, "destination", true, 1, PATH_FIELD_MAX, &raw_dst))
                check_path(&c, "body", "destination", raw_dst, true, dst);
        (void) field_bool(&c.v, body, "overwrite", false, &overwrite);
        if (reply_if_invalid(req, &c))
                return 0;

        /* Both paths are held for writing (the hold manager orders them). */
        r = open_sandbox(req, &c, HOLD_FILE_WRITE, src, dst, &h, &e);
        if (r < 0)
                return reply_failure(req, &e, r, "opening the sandbox");
        r = files_move(h, src, dst, overwrite, &e);
        if (r < 0)
                return reply_failure(req, &e, r, "moving");
        sandbox_handle_touch(h);
        o = json_pack("{s:s, s:s, s:s}", "status", "ok", "source", src, "destination", dst);
        if (!o)
                return reply_errorf(req, 500, "SANDBOX_INTERNAL_ERROR", "building the answer failed");
        return reply_json(req, 200, o);
}

/* ----------------------------------------------------------- /files/archive --- */

int handle_files_archive_get(Request *req) {
        _cleanup_(files_call_done) FilesCall c;
        _cleanup_(sandbox_handle_closep) SandboxHandle *h = NULL;
        char canon[PATH_MAX] = "/workspace";
        ArchiveLimits limits = archive_limits(req);
        Error e = ERROR_INIT;
        uint64_t size = 0;
        int fd = -EBADF, r;

        files_call_init(&c, req);
        query_common(&c, req, false, canon);
        if (reply_if_invalid(req, &c))
                return 0;

        r = open_sandbox(req, &c, HOLD_FILE_READ, canon, NULL, &h, &e);
        if (r < 0)
                return reply_failure(req, &e, r, "opening the sandbox");
        r = files_archive_create(h, req_daemon(req)->tmp_fd, canon, &limits, &fd, &size, &e);
        if (r < 0)
                return reply_failure(req, &e, r, "archiving the directory");
        (void) req_add_reply_header(req, "Content-Disposition", "attachment; filename=\"archive.tar\"");
        return reply_fd(req, 200, "application/x-tar", fd, size);
}

typedef struct ArchiveUpload {
        SandboxHandle *h;
        int fd;                        /* the spool, O_TMPFILE under DATA/tmp */
        char path[PATH_MAX];
} ArchiveUpload;

static void archive_upload_free(void *p) {
        ArchiveUpload *u = p;

        if (!u)
                return;
        safe_close(u->fd);
        sandbox_handle_close(u->h);
        free(u);
}

int upload_files_archive(Request *req, int *ret_fd) {
        _cleanup_(files_call_done) FilesCall c;
        _cleanup_free_ ArchiveUpload *u = NULL;
        Error e = ERROR_INIT;
        int r;

        *ret_fd = -EBADF;
        files_call_init(&c, req);
        u = calloc(1, sizeof *u);
        if (!u)
                return reply_errorf(req, 503, "SANDBOX_UNAVAILABLE", "out of memory");
        u->fd = -EBADF;
        (void) strscpy(u->path, sizeof u->path, "/workspace");
        query_common(&c, req, false, u->path);
        if (!upload_size_ok(req, &c))
                return reply_errorf(req, 413, "SANDBOX_ARCHIVE_TOO_LARGE", "body is larger than %" PRIu64 " bytes",
                                    req_daemon(req)->config.max_upload_bytes);
        if (reply_if_invalid(req, &c))
                return 0;

        /* Checked (generation, status) and held before any byte is read. */
        r = open_for_growth(req, &c, u->path, &u->h, &e);
        if (r < 0)
                return reply_failure(req, &e, r, "opening the sandbox");
        u->fd = openat(req_daemon(req)->tmp_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (u->fd < 0) {
                r = -errno;
                sandbox_handle_close(u->h);
                return reply_failure(req, &e, r, "creating the upload spool file");
        }
        *ret_fd = u->fd;
        req_set_userdata(req, TAKE_PTR(u), archive_upload_free);
        return 0;
}

int handle_files_archive_put(Request *req) {
        ArchiveUpload *u = req_userdata(req);
        ArchiveLimits limits = archive_limits(req);
        Error e = ERROR_INIT;
        uint64_t entries = 0;
        json_t *o;
        int r;

        if (!u || u->fd < 0)
                return reply_errorf(req, 500, "SANDBOX_INTERNAL_ERROR", "upload state missing");
        if (lseek(u->fd, 0, SEEK_SET) < 0)
                return reply_failure(req, &e, -errno, "reading the upload");
        r = files_archive_extract(u->h, u->path, u->fd, &limits, &entries, &e);
        if (r < 0)
                return reply_failure(req, &e, r, "extracting the archive");
        sandbox_handle_touch(u->h);
        o = json_pack("{s:s, s:s, s:I}", "status", "ok", "path", u->path, "entries", (json_int_t) entries);
        if (!o)
                return reply_errorf(req, 500, "SANDBOX_INTERNAL_ERROR", "building the answer failed");
        return reply_json(req, 200, o);
}
