/* SPDX-License-Identifier: MIT */
/* The exec routes: validation, the mapping of the engine's answers to HTTP, parking of
 * foreground calls and long-polls, raw output, and Server-Sent Events. The lifecycle
 * itself is in core/exec.c. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "exec-env.h"
#include "disk.h"
#include "exec.h"
#include "files.h"
#include "handlers.h"
#include "json-util.h"
#include "macros.h"
#include "parse-util.h"
#include "string-util.h"
#include "time-util.h"

#define GENERATION_MAX ((uint64_t) INT64_MAX)
#define WAIT_SECONDS_MAX 300u
#define SSE_CHUNK (32 * 1024)
#define CWD_FIELD_MAX (4 * PATH_MAX)

/* ---- common ---- */

static const char *path_sandbox_id(Request *req, Validation *v) {
        const char *id = req_param(req, "id");

        if (!id || !str_in_charset(id, ID_CHARSET, 3, SANDBOX_ID_MAX)) {
                validation_add(v, "path", "sandbox_id", "string_pattern_mismatch",
                               "must be 3-128 characters of A-Z a-z 0-9 _ . : -");
                return NULL;
        }
        return id;
}

static const char *path_exec_id(Request *req, Validation *v) {
        const char *id = req_param(req, "exec_id");

        if (!id || !str_in_charset(id, ID_CHARSET, 1, EXEC_ID_MAX)) {
                validation_add(v, "path", "exec_id", "string_pattern_mismatch",
                               "must be 1-128 characters of A-Z a-z 0-9 _ . : -");
                return NULL;
        }
        return id;
}

static ExecEngine *engine(Request *req) {
        return req_daemon(req)->execs;
}

static int reply_failure(Request *req, Error *e, int r, const char *what) {
        if (!error_is_set(e))
                error_fill_internal(e, r, what);
        return reply_error(req, e);
}

/* The answer for X: its record, or the error it ended with. */
static int reply_exec(Request *req, Exec *x, bool base64) {
        const Error *err = exec_error(x);

        if (err)
                return reply_error(req, err);
        return reply_json(req, 200, exec_to_json(x, base64));
}

static bool query_encoding(Request *req, Validation *v, bool *ret_base64) {
        const char *s = req_query(req, "output_encoding");

        *ret_base64 = false;
        if (!s || streq(s, "text"))
                return true;
        if (streq(s, "base64")) {
                *ret_base64 = true;
                return true;
        }
        validation_add(v, "query", "output_encoding", "literal_error", "Input should be 'text' or 'base64'");
        return false;
}

/* ---- parked answers ---- */

typedef struct ReplyWaiter {
        ExecWaiter w;
        Request *req;
        bool base64;
} ReplyWaiter;

static void reply_waiter_fn(ExecWaiter *w, Exec *x) {
        ReplyWaiter *rw = container_of(w, ReplyWaiter, w);

        (void) reply_exec(rw->req, x, rw->base64);
        free(rw);
}

/* Answers when X ends (or, with UNTIL_END false, once it runs), or after TIMEOUT: parked. */
static int reply_when(Request *req, Exec *x, bool until_end, usec_t timeout, bool base64) {
        ReplyWaiter *rw = calloc(1, sizeof *rw);
        int r;

        if (!rw)
                return reply_errorf(req, 500, "SANDBOX_INTERNAL_ERROR", "out of memory");
        rw->w = (ExecWaiter) { .fn = reply_waiter_fn, .until_end = until_end };
        rw->req = req;
        rw->base64 = base64;
        r = exec_wait(x, &rw->w, timeout);
        if (r > 0) {
                free(rw);
                return reply_exec(req, x, base64);
        }
        return API_PARKED; /* reply_waiter_fn answers, on the pump thread */
}

/* ---- Server-Sent Events ---- */

#define SSE_KEEPALIVE ": keep-alive\n\n"
/* A tick this close to its due time counts as due (timers round to milliseconds). */
#define SSE_KEEPALIVE_SLACK_USEC (20 * USEC_PER_MSEC)

typedef struct SseStream SseStream;

/* The keep-alive clock of a stream: an exec waiter with a timeout, so the pump's timer
 * heap wakes a silent stream, which then sends a comment line; no thread per stream.
 * Shared by the stream and its waiter (each holds a reference) because the waiter cannot
 * be withdrawn: it lives until its timeout or the exec's end, whichever comes first. */
typedef struct SseTicker {
        ExecWaiter w;
        pthread_mutex_t lock;
        unsigned refs;
        SseStream *ss;                      /* NULL once the stream is gone */
        usec_t period;
        usec_t last_sent;                   /* monotonic time of the last byte handed out */
} SseTicker;

struct SseStream {
        Exec *x;
        Request *req;
        ExecObserver obs;
        SseTicker *ticker;                  /* NULL: keep-alives off */
        bool base64;
        bool sent_start, finished;
        uint64_t off[2];
        char *pending;
        size_t pending_len, pending_pos;
        char chunk[SSE_CHUNK];
};

static void sse_ticker_unref(SseTicker *t) {
        unsigned refs;

        pthread_mutex_lock(&t->lock);
        refs = --t->refs;
        pthread_mutex_unlock(&t->lock);
        if (refs > 0)
                return;
        (void) pthread_mutex_destroy(&t->lock);
        free(t);
}

/* Pump thread: the period passed (or the exec ended). Wakes the stream, whose reader sends
 * a comment if it has been silent for a period, and waits again until the next due time. */
static void sse_ticker_fn(ExecWaiter *w, Exec *x) {
        SseTicker *t = container_of(w, SseTicker, w);
        usec_t now = now_monotonic_usec(), next = 0;

        pthread_mutex_lock(&t->lock);
        if (t->ss && !exec_has_ended(x)) {
                req_stream_wake(t->ss->req);
                next = t->last_sent + t->period;
                if (next <= now + SSE_KEEPALIVE_SLACK_USEC)
                        next = now + t->period; /* the reader sends one now */
        }
        pthread_mutex_unlock(&t->lock);
        if (next > 0) {
                t->w = (ExecWaiter) { .fn = sse_ticker_fn, .until_end = true };
                if (exec_wait(x, &t->w, next - now) == 0)
                        return; /* the waiter keeps its reference */
        }
        sse_ticker_unref(t);
}

static int sse_ticker_start(SseStream *ss, uint64_t seconds) {
        SseTicker *t;

        if (seconds == 0 || exec_has_ended(ss->x))
                return 0;
        t = calloc(1, sizeof *t);
        if (!t)
                return -ENOMEM;
        (void) pthread_mutex_init(&t->lock, NULL);
        t->refs = 2;
        t->ss = ss;
        t->period = (usec_t) seconds * USEC_PER_SEC;
        t->last_sent = now_monotonic_usec();
        t->w = (ExecWaiter) { .fn = sse_ticker_fn, .until_end = true };
        ss->ticker = t;
        if (exec_wait(ss->x, &t->w, t->period) != 0)
                t->refs--; /* ended meanwhile (or could not wait): no waiter holds it */
        return 0;
}

/* Reader: notes that bytes go out now; returns whether a keep-alive is due instead. */
static bool sse_ticker_note(SseStream *ss, bool sending) {
        SseTicker *t = ss->ticker;
        usec_t now;
        bool due;

        if (!t)
                return false;
        now = now_monotonic_usec();
        pthread_mutex_lock(&t->lock);
        due = !sending && now + SSE_KEEPALIVE_SLACK_USEC >= t->last_sent + t->period;
        if (sending || due)
                t->last_sent = now;
        pthread_mutex_unlock(&t->lock);
        return due;
}

static void sse_wake(ExecObserver *o) {
        SseStream *ss = container_of(o, SseStream, obs);

        req_stream_wake(ss->req);
}

/* Queues "event: NAME\ndata: JSON\n\n"; DATA is stolen. */
static int sse_event(SseStream *ss, const char *name, json_t *data) {
        _cleanup_free_ char *text = NULL;

        if (!data)
                return -ENOMEM;
        text = json_dumps(data, JSON_COMPACT);
        json_decref(data);
        if (!text)
                return -ENOMEM;
        free(ss->pending);
        ss->pending = strprintf("event: %s\ndata: %s\n\n", name, text);
        if (!ss->pending)
                return -ENOMEM;
        ss->pending_len = strlen(ss->pending);
        ss->pending_pos = 0;
        return 1;
}

static int sse_chunk(SseStream *ss, ExecStream s, size_t n) {
        json_t *data;

        if (ss->base64) {
                _cleanup_free_ char *enc = NULL;
                size_t enc_len;
                int r = base64_encode(ss->chunk, n, &enc, &enc_len);

                if (r < 0)
                        return r;
                data = json_pack("{s:I, s:s%}", "offset", (json_int_t) ss->off[s], "data_base64", enc, enc_len);
        } else
                data = json_pack("{s:I, s:o}", "offset", (json_int_t) ss->off[s], "data",
                                 json_string_lossy(ss->chunk, n));
        ss->off[s] += n;
        return sse_event(ss, s == EXEC_STDOUT ? "stdout" : "stderr", data);
}

/* Produces the next event: 1, or 0 for "nothing now", or -errno. */
static int sse_next(SseStream *ss) {
        Exec *x = ss->x;
        bool ended = exec_has_ended(x);
        const Error *err = ended ? exec_error(x) : NULL;

        if (err) {
                ss->finished = true;
                return sse_event(ss, "error", json_pack("{s:{s:s, s:s}}", "detail", "code", err->code ?: "SANDBOX_INTERNAL_ERROR",
                                                         "message", err->message));
        }
        if (!ss->sent_start) {
                if (!ended && !exec_has_started(x))
                        return 0;
                ss->sent_start = true;
                return sse_event(ss, "start", exec_start_json(x));
        }
        for (ExecStream s = EXEC_STDOUT; s <= EXEC_STDERR; s++) {
                uint64_t avail;
                bool final;
                ssize_t n;
                size_t take;

                exec_output_state(x, s, &avail, &final);
                if (ss->off[s] >= avail)
                        continue;
                n = exec_read(x, s, ss->off[s], ss->chunk, sizeof ss->chunk);
                if (n < 0)
                        return (int) n;
                if (n == 0)
                        continue;
                /* A UTF-8 sequence cut by the chunk waits for its rest (re-read from its
                 * offset next time), unless no more can come. */
                take = (size_t) n;
                if (!ss->base64 && !(final && ss->off[s] + (uint64_t) n >= avail))
                        take = exec_utf8_complete_prefix(ss->chunk, (size_t) n);
                if (take == 0)
                        continue;
                return sse_chunk(ss, s, take);
        }
        if (ended) {
                ss->finished = true;
                return sse_event(ss, "end", exec_to_json(x, ss->base64));
        }
        return 0;
}

static ssize_t sse_read(void *ud, uint64_t pos, char *buf, size_t max) {
        SseStream *ss = ud;

        for (;;) {
                int r;

                if (ss->pending_pos < ss->pending_len) {
                        size_t n = MIN(max, ss->pending_len - ss->pending_pos);

                        memcpy(buf, ss->pending + ss->pending_pos, n);
                        ss->pending_pos += n;
                        (void) sse_ticker_note(ss, true);
                        return (ssize_t) n;
                }
                if (ss->finished)
                        return STREAM_END;
                r = sse_next(ss);
                if (r < 0)
                        return -2;
                if (r == 0) {
                        /* Silent: a comment line (between events, never inside one). */
                        if (!sse_ticker_note(ss, false))
                                return 0;
                        if (max < strlen(SSE_KEEPALIVE))
                                return 0;
                        memcpy(buf, SSE_KEEPALIVE, strlen(SSE_KEEPALIVE));
                        return (ssize_t) strlen(SSE_KEEPALIVE);
                }
        }
}

static void sse_free(void *ud) {
        SseStream *ss = ud;

        exec_unobserve(ss->x, &ss->obs);
        if (ss->ticker) {
                pthread_mutex_lock(&ss->ticker->lock);
                ss->ticker->ss = NULL;
                pthread_mutex_unlock(&ss->ticker->lock);
                sse_ticker_unref(ss->ticker);
        }
        exec_unref(ss->x);
        free(ss->pending);
        free(ss);
}

static int reply_sse(Request *req, Exec *x, bool base64, uint64_t off_out, uint64_t off_err) {
        uint64_t keepalive = req_daemon(req)->config.sse_keepalive_seconds;
        SseStream *ss = calloc(1, sizeof *ss);
        char num[32];

        if (!ss)
                return reply_errorf(req, 500, "SANDBOX_INTERNAL_ERROR", "out of memory");
        ss->x = exec_ref(x);
        ss->req = req;
        ss->base64 = base64;
        ss->off[EXEC_STDOUT] = off_out;
        ss->off[EXEC_STDERR] = off_err;
        ss->obs.wake = sse_wake;
        exec_observe(x, &ss->obs);
        if (sse_ticker_start(ss, keepalive) < 0) {
                sse_free(ss);
                return reply_errorf(req, 500, "SANDBOX_INTERNAL_ERROR", "out of memory");
        }
        /* Tells clients how long a silence may last before the stream counts as dropped. */
        (void) bsprintf(num, sizeof num, "%" PRIu64, keepalive);
        (void) req_add_reply_header(req, "X-Sandloom-Keepalive-Seconds", num);
        return reply_stream(req, "text/event-stream", sse_read, ss, sse_free);
}

static bool wants_sse(Request *req) {
        const char *a = req_header(req, "Accept");

        return a && strstr(a, "text/event-stream");
}

/* ---- POST /exec: validation ---- */

typedef struct StartCall {
        Validation v;
        Error cwd_error;
        ExecRequest r;
        char cwd[PATH_MAX];
        const char **argv;
        const char **env_names, **env_values;
        void *stdin_buf;
} StartCall;

static void start_call_done(StartCall *c) {
        validation_done(&c->v);
        free(c->argv);
        free(c->env_names);
        free(c->env_values);
        free(c->stdin_buf);
}

static void parse_argv(StartCall *c, json_t *body, size_t *bytes) {
        json_t *a = json_object_get(body, "argv"), *item;
        size_t i;

        if (!a || json_is_null(a)) {
                validation_add(&c->v, "body", "argv", "missing", "Field required");
                return;
        }
        if (!json_is_array(a)) {
                validation_add(&c->v, "body", "argv", "list_type", "Input should be a valid list");
                return;
        }
        if (json_array_size(a) < 1 || json_array_size(a) > EXEC_ARGV_MAX) {
                validation_add(&c->v, "body", "argv", json_array_size(a) < 1 ? "too_short" : "too_long",
                               "List should have 1 to 256 items");
                return;
        }
        c->argv = calloc(json_array_size(a) + 1, sizeof *c->argv);
        if (!c->argv) {
                validation_add(&c->v, "body", "argv", "value_error", "out of memory");
                return;
        }
        json_array_foreach(a, i, item) {
                if (!json_string_is_text(item)) {
                        validation_add(&c->v, "body", "argv", "string_type",
                                       "Every argument should be a string without NUL characters");
                        return;
                }
                c->argv[i] = json_string_value(item);
                *bytes += json_string_length(item) + 1;
        }
        if (isempty(c->argv[0])) {
                validation_add(&c->v, "body", "argv", "value_error", "argv[0] (the command) must not be empty");
                return;
        }
        c->r.argv = c->argv;
        c->r.argc = json_array_size(a);
}

static void parse_env(StartCall *c, json_t *body, size_t *bytes) {
        json_t *o = json_object_get(body, "env"), *value;
        const char *name;
        size_t n = 0;

        if (!o || json_is_null(o))
                return;
        if (!json_is_object(o)) {
                validation_add(&c->v, "body", "env", "dict_type", "Input should be a valid dictionary");
                return;
        }
        if (json_object_size(o) > EXEC_ENV_MAX) {
                validation_add(&c->v, "body", "env", "too_long", "Dictionary should have at most 128 items");
                return;
        }
        c->env_names = calloc(json_object_size(o) + 1, sizeof *c->env_names);
        c->env_values = calloc(json_object_size(o) + 1, sizeof *c->env_values);
        if (!c->env_names || !c->env_values) {
                validation_add(&c->v, "body", "env", "value_error", "out of memory");
                return;
        }
        json_object_foreach(o, name, value) {
                /* Names are reported by rule, values never (they may be secrets). */
                if (!exec_env_name_is_valid(name) || strlen(name) != strcspn(name, "=")) {
                        validation_add(&c->v, "body", "env", "string_pattern_mismatch",
                                       "Variable names must match ^[A-Za-z_][A-Za-z0-9_]*$ (at most 128 characters)");
                        return;
                }
                if (!json_string_is_text(value)) {
                        validation_add(&c->v, "body", "env", "string_type",
                                       "Every value should be a string without NUL characters");
                        return;
                }
                c->env_names[n] = name;
                c->env_values[n] = json_string_value(value);
                *bytes += strlen(name) + json_string_length(value) + 2;
                n++;
        }
        c->r.env_names = c->env_names;
        c->r.env_values = c->env_values;
        c->r.envc = n;
}

static void parse_cwd(StartCall *c, json_t *body) {
        const char *raw = NULL;
        Error e = ERROR_INIT;

        if (!field_string(&c->v, body, "cwd", false, 1, CWD_FIELD_MAX, &raw))
                return;
        if (!raw)
                raw = "/workspace";
        if (files_normalize_path(raw, strlen(raw), c->cwd, sizeof c->cwd, &e) >= 0) {
                c->r.cwd = c->cwd;
                return;
        }
        if (e.status == 422)
                validation_add(&c->v, "body", "cwd", "value_error", e.message);
        else
                (void) error_set(&c->cwd_error, -EINVAL, 400, "SANDBOX_INVALID_CWD",
                                 "cwd is outside /workspace, /home/sandbox, /cache and /envs");
}

static void parse_stdin(StartCall *c, Request *req, json_t *body) {
        uint64_t max = req_daemon(req)->config.max_file_api_bytes;
        const char *text = NULL, *b64 = NULL;
        size_t size;
        int r;

        if (!field_string(&c->v, body, "stdin", false, 0, (size_t) max, &text) ||
            !field_string(&c->v, body, "stdin_base64", false, 0, (size_t) max * 2, &b64))
                return;
        if (text && b64) {
                validation_add(&c->v, "body", "stdin", "value_error", "Give stdin or stdin_base64, not both");
                return;
        }
        if (text) {
                c->r.has_stdin = true;
                c->r.stdin_data = text;
                c->r.stdin_size = strlen(text);
        } else if (b64) {
                r = base64_decode(b64, strlen(b64), (size_t) max, &c->stdin_buf, &size);
                if (r < 0) {
                        validation_add(&c->v, "body", "stdin_base64", "value_error",
                                       r == -EFBIG ? "Decoded stdin is larger than SANDBOX_MAX_FILE_API_BYTES"
                                                   : "Invalid base64");
                        return;
                }
                c->r.has_stdin = true;
                c->r.stdin_data = c->stdin_buf;
                c->r.stdin_size = size;
        }
}

/* 1 when it replied (400 for sensitive_env), 0 otherwise. */
static int parse_start(StartCall *c, Request *req, json_t *body) {
        const Config *cfg = &req_daemon(req)->config;
        const char *eid = NULL, *scope = NULL, *enc = NULL;
        json_t *sens;
        size_t bytes = 0;

        c->r.sandbox_id = path_sandbox_id(req, &c->v);
        (void) field_u64(&c->v, body, "generation", true, 1, GENERATION_MAX, &c->r.generation);
        if (field_string(&c->v, body, "exec_id", false, 1, EXEC_ID_MAX, &eid) && eid &&
            !str_in_charset(eid, ID_CHARSET, 1, EXEC_ID_MAX))
                validation_add(&c->v, "body", "exec_id", "string_pattern_mismatch",
                               "String should match pattern '^[A-Za-z0-9_.:-]+$'");
        c->r.exec_id = eid;
        parse_argv(c, body, &bytes);
        parse_env(c, body, &bytes);
        if (bytes + EXEC_PAYLOAD_RESERVE > EXEC_PAYLOAD_MAX)
                validation_add(&c->v, "body", "argv", "value_error",
                               "argv and env together are larger than 1 MiB (less 8 KiB kept for the daemon)");
        parse_cwd(c, body);
        c->r.timeout_seconds = cfg->default_timeout_seconds;
        (void) field_u64(&c->v, body, "timeout_seconds", false, 1, 86400, &c->r.timeout_seconds);
        (void) field_bool(&c->v, body, "background", false, &c->r.background);
        if (field_string(&c->v, body, "exec_scope", false, 0, EXEC_SCOPE_MAX, &scope) && !isempty(scope) &&
            !str_in_charset(scope, ID_CHARSET, 1, EXEC_SCOPE_MAX))
                validation_add(&c->v, "body", "exec_scope", "string_pattern_mismatch",
                               "String should match pattern '^[A-Za-z0-9_.:-]*$'");
        c->r.exec_scope = scope;
        parse_stdin(c, req, body);
        if (field_string(&c->v, body, "output_encoding", false, 1, 16, &enc) && enc) {
                if (streq(enc, "base64"))
                        c->r.output_base64 = true;
                else if (!streq(enc, "text"))
                        validation_add(&c->v, "body", "output_encoding", "literal_error",
                                       "Input should be 'text' or 'base64'");
        }

        sens = json_object_get(body, "sensitive_env");
        if (sens && !json_is_null(sens) && !((json_is_object(sens) && json_object_size(sens) == 0) ||
                                            (json_is_array(sens) && json_array_size(sens) == 0))) {
                (void) reply_errorf(req, 400, "SANDBOX_SENSITIVE_ENV_UNSUPPORTED",
                                    "sensitive_env needs a credential broker, which this worker does not have; "
                                    "pass the variables in env");
                return 1;
        }
        return 0;
}

/* ---- handlers ---- */

int handle_exec_start(Request *req) {
        _cleanup_(start_call_done) StartCall c = { .cwd_error = ERROR_INIT };
        _cleanup_(exec_unrefp) Exec *x = NULL;
        Error e = ERROR_INIT;
        json_t *body;
        int r;

        validation_init(&c.v);
        body = req_json(req, &e);
        if (!body)
                return reply_error(req, &e);
        if (parse_start(&c, req, body) > 0)
                return 0;
        if (c.v.count > 0)
                return reply_validation(req, &c.v);
        if (error_is_set(&c.cwd_error))
                return reply_error(req, &c.cwd_error);

        r = disk_admit(req_daemon(req)->disk, req_principal(req)->tenant, c.r.sandbox_id, &e);
        if (r < 0)
                return reply_error(req, &e);
        r = exec_start(engine(req), req_principal(req), &c.r, &x, &e);
        if (r < 0)
                return reply_failure(req, &e, r, "starting the exec");
        if (wants_sse(req))
                return reply_sse(req, x, c.r.output_base64, 0, 0);
        /* Background: answered once it runs. Foreground: once it ended. */
        return reply_when(req, x, !c.r.background, 0, c.r.output_base64);
}

int handle_exec_get(Request *req) {
        _cleanup_(validation_done) Validation v = {};
        _cleanup_(exec_unrefp) Exec *x = NULL;
        const char *id, *eid;
        uint64_t generation = 0, wait = 0;
        Error e = ERROR_INIT;
        bool base64;
        int r;

        validation_init(&v);
        id = path_sandbox_id(req, &v);
        eid = path_exec_id(req, &v);
        (void) query_u64(&v, req, "generation", true, 1, GENERATION_MAX, 0, &generation);
        (void) query_u64(&v, req, "wait_seconds", false, 0, WAIT_SECONDS_MAX, 0, &wait);
        (void) query_encoding(req, &v, &base64);
        if (v.count > 0)
                return reply_validation(req, &v);

        r = exec_lookup(engine(req), req_principal(req), id, generation, eid, &x, &e);
        if (r < 0)
                return reply_failure(req, &e, r, "reading the exec");
        if (wait == 0)
                return reply_exec(req, x, base64);
        return reply_when(req, x, true, wait * USEC_PER_SEC, base64);
}

int handle_exec_output(Request *req) {
        _cleanup_(validation_done) Validation v = {};
        _cleanup_(exec_unrefp) Exec *x = NULL;
        _cleanup_free_ char *buf = NULL;
        const char *id, *eid, *stream_s;
        uint64_t generation = 0, offset = 0, limit = 0, avail;
        ExecStream s = EXEC_STDOUT;
        Error e = ERROR_INIT;
        char num[32];
        size_t n, got = 0;
        bool final;
        int r;

        validation_init(&v);
        id = path_sandbox_id(req, &v);
        eid = path_exec_id(req, &v);
        (void) query_u64(&v, req, "generation", true, 1, GENERATION_MAX, 0, &generation);
        (void) query_u64(&v, req, "offset", false, 0, INT64_MAX, 0, &offset);
        (void) query_u64(&v, req, "limit", false, 1, req_daemon(req)->config.max_output_bytes,
                         req_daemon(req)->config.max_output_bytes, &limit);
        stream_s = req_query(req, "stream");
        if (stream_s && streq(stream_s, "stderr"))
                s = EXEC_STDERR;
        else if (stream_s && !streq(stream_s, "stdout"))
                validation_add(&v, "query", "stream", "literal_error", "Input should be 'stdout' or 'stderr'");
        if (v.count > 0)
                return reply_validation(req, &v);

        r = exec_lookup(engine(req), req_principal(req), id, generation, eid, &x, &e);
        if (r < 0)
                return reply_failure(req, &e, r, "reading the exec");

        exec_output_state(x, s, &avail, &final);
        n = offset < avail ? (size_t) MIN(limit, avail - offset) : 0;
        buf = malloc(MAX(n, (size_t) 1));
        if (!buf)
                return reply_errorf(req, 500, "SANDBOX_INTERNAL_ERROR", "out of memory");
        while (got < n) {
                ssize_t k = exec_read(x, s, offset + got, buf + got, n - got);
                if (k <= 0)
                        break;
                got += (size_t) k;
        }
        (void) req_add_reply_header(req, "X-Sandloom-Exec-Status",
                                    final ? exec_status_to_string(exec_status(x)) : "RUNNING");
        (void) bsprintf(num, sizeof num, "%" PRIu64, avail);
        (void) req_add_reply_header(req, "X-Sandloom-Output-Size", num);
        return reply_bytes(req, 200, "application/octet-stream", buf, got);
}

int handle_exec_events(Request *req) {
        _cleanup_(validation_done) Validation v = {};
        _cleanup_(exec_unrefp) Exec *x = NULL;
        const char *id, *eid;
        uint64_t generation = 0, offset = 0, off_out, off_err;
        Error e = ERROR_INIT;
        bool base64;
        int r;

        validation_init(&v);
        id = path_sandbox_id(req, &v);
        eid = path_exec_id(req, &v);
        (void) query_u64(&v, req, "generation", true, 1, GENERATION_MAX, 0, &generation);
        (void) query_u64(&v, req, "offset", false, 0, INT64_MAX, 0, &offset);
        (void) query_u64(&v, req, "stdout_offset", false, 0, INT64_MAX, offset, &off_out);
        (void) query_u64(&v, req, "stderr_offset", false, 0, INT64_MAX, offset, &off_err);
        (void) query_encoding(req, &v, &base64);
        if (v.count > 0)
                return reply_validation(req, &v);

        r = exec_lookup(engine(req), req_principal(req), id, generation, eid, &x, &e);
        if (r < 0)
                return reply_failure(req, &e, r, "reading the exec");
        return reply_sse(req, x, base64 || (!req_query(req, "output_encoding") && exec_output_base64(x)), off_out,
                         off_err);
}

int handle_exec_cancel(Request *req) {
        _cleanup_(validation_done) Validation v = {};
        const char *id, *eid;
        uint64_t generation = 0;
        Error e = ERROR_INIT;
        bool cancelled = false;
        int r;

        validation_init(&v);
        id = path_sandbox_id(req, &v);
        eid = path_exec_id(req, &v);
        if (req_query(req, "generation"))
                (void) query_u64(&v, req, "generation", true, 1, GENERATION_MAX, 0, &generation);
        else {
                json_t *body = req_json(req, &e);
                if (!body)
                        return reply_error(req, &e);
                (void) field_u64(&v, body, "generation", true, 1, GENERATION_MAX, &generation);
        }
        if (v.count > 0)
                return reply_validation(req, &v);

        r = exec_cancel(engine(req), req_principal(req), id, generation, eid, &cancelled, &e);
        if (r < 0)
                return reply_failure(req, &e, r, "cancelling the exec");
        return reply_json(req, 200, json_pack("{s:s, s:b}", "exec_id", eid, "cancelled", cancelled));
}
