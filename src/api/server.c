/* SPDX-License-Identifier: MIT */
#include "server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "fileio.h"
#include "jobs.h"
#include "log.h"
#include "parse-util.h"
#include "request.h"
#include "router.h"
#include "string-util.h"

#define MiB (UINT64_C(1024) * 1024)
/* Two pools, so that work holding a sandbox hold never waits behind work waiting for one:
 *  - WAIT: ROUTE_OFFLOAD handlers and upload_begin, which may block for a hold (up to
 *    SANDBOX_HOLD_WAIT_SECONDS): sized for many sleepers;
 *  - FINISH: the handlers of uploads after their body, which already own their hold.
 * Nothing that may block on a hold runs on an HTTP thread: a blocked HTTP thread would stall
 * every other connection it serves, including the upload that holds what it waits for. */
#define WAIT_THREADS 16u
#define FINISH_THREADS 4u
#define JOB_QUEUE_MAX 1024u
/* After a 413 on a chunked body we read and drop the rest so the client sees the answer;
 * past this much more we close the connection instead. */
#define DISCARD_MAX (64 * MiB)
#define BODY_PREALLOC_MAX (1 * MiB)

/* Level-triggered poll(), not epoll, with libmicrohttpd 0.9.75: its edge-triggered epoll
 * loop stops reading a connection after a short recv(), so when the last body bytes and the
 * client's FIN arrive together the FIN is never read. A client that dies mid-upload then
 * keeps its request (and the sandbox hold of an upload) alive until the idle timeout,
 * minutes later. poll() sees the EOF at once. Each pool thread polls only its own
 * connections, so the cost is small at our connection limit. */
#define SERVER_POLL_MODE MHD_USE_POLL

struct Server {
        Daemon *daemon;
        struct MHD_Daemon *mhd;
        int listen_fd;                /* owned by libmicrohttpd until quiesced */
        int quiesced_fd;              /* ours to close after MHD_stop_daemon */
        ParkList parks;
        JobPool *wait_jobs;
        JobPool *finish_jobs;
        atomic_uint active;
};

/* --- the listening socket --- */

typedef union SockAddr {
        struct sockaddr sa;
        struct sockaddr_in in4;
        struct sockaddr_in6 in6;
        struct sockaddr_storage ss;
} SockAddr;

/* "IPV4:PORT", "localhost:PORT" or "[IPV6]:PORT" -> a socket address. */
static int parse_listen(const char *s, SockAddr *ret, socklen_t *ret_len) {
        char host[INET6_ADDRSTRLEN + 1];
        const char *sep, *port_s;
        SockAddr a = {};
        uint32_t port;
        size_t hlen;

        if (s[0] == '[') {
                sep = strchr(s, ']');
                if (!sep || sep[1] != ':')
                        return -EINVAL;
                hlen = (size_t) (sep - s - 1);
                port_s = sep + 2;
                s++;
        } else {
                sep = strrchr(s, ':');
                if (!sep)
                        return -EINVAL;
                hlen = (size_t) (sep - s);
                port_s = sep + 1;
        }
        if (hlen == 0 || hlen >= sizeof host)
                return -EINVAL;
        memcpy(host, s, hlen);
        host[hlen] = '\0';
        if (parse_u32(port_s, &port) < 0 || port > 65535)
                return -EINVAL;

        if (inet_pton(AF_INET6, host, &a.in6.sin6_addr) == 1 && sep[0] == ']') {
                a.in6.sin6_family = AF_INET6;
                a.in6.sin6_port = htons((uint16_t) port);
                *ret_len = sizeof a.in6;
        } else if (inet_pton(AF_INET, streq(host, "localhost") ? "127.0.0.1" : host, &a.in4.sin_addr) == 1) {
                a.in4.sin_family = AF_INET;
                a.in4.sin_port = htons((uint16_t) port);
                *ret_len = sizeof a.in4;
        } else
                return -EINVAL;
        *ret = a;
        return 0;
}

int server_listen(const char *listen_addr, char *ret_url, size_t url_len, char *err, size_t errlen) {
        _cleanup_close_ int fd = -EBADF;
        char shown[INET6_ADDRSTRLEN];
        SockAddr addr;
        socklen_t alen;
        int one = 1, r;

        r = parse_listen(listen_addr, &addr, &alen);
        if (r < 0) {
                (void) bsprintf(err, errlen, "SANDBOX_LISTEN must be IPV4:PORT or [IPV6]:PORT, for example "
                                             "127.0.0.1:8080 or [::1]:8080.");
                return r;
        }
        fd = socket(addr.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
                r = -errno;
                (void) bsprintf(err, errlen, "Cannot create a socket for SANDBOX_LISTEN: %s.", strerror(-r));
                return r;
        }
        (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, &addr.sa, alen) < 0 || listen(fd, SOMAXCONN) < 0) {
                r = -errno;
                (void) bsprintf(err, errlen, "Cannot listen on %s (SANDBOX_LISTEN): %s.", listen_addr, strerror(-r));
                return r;
        }
        alen = sizeof addr;
        if (getsockname(fd, &addr.sa, &alen) < 0)
                return -errno;
        if (addr.sa.sa_family == AF_INET6) {
                (void) inet_ntop(AF_INET6, &addr.in6.sin6_addr, shown, sizeof shown);
                (void) bsprintf(ret_url, url_len, "http://[%s]:%u", shown, ntohs(addr.in6.sin6_port));
        } else {
                (void) inet_ntop(AF_INET, &addr.in4.sin_addr, shown, sizeof shown);
                (void) bsprintf(ret_url, url_len, "http://%s:%u", shown, ntohs(addr.in4.sin_port));
        }
        return TAKE_FD(fd);
}

/* --- answering --- */

/* Hands the stored reply to libmicrohttpd. Connection's own thread only. */
static enum MHD_Result queue_stored(Request *req) {
        struct MHD_Response *resp;
        enum MHD_Result ret;
        unsigned status;
        bool replied;

        pthread_mutex_lock(&req->lock);
        replied = req->replied;
        resp = TAKE_PTR(req->response);
        status = req->status;
        pthread_mutex_unlock(&req->lock);

        if (!replied)
                return MHD_YES; /* not yet: a later call queues it */
        if (!resp)
                return MHD_NO;  /* no response could be built: close the connection */
        req->phase = PHASE_QUEUED;
        ret = MHD_queue_response(req->connection, status, resp);
        MHD_destroy_response(resp);
        return ret;
}

static enum MHD_Result reply_too_large(Request *req) {
        (void) reply_errorf(req, 413, "SANDBOX_REQUEST_TOO_LARGE",
                            "The request body is larger than the limit of %" PRIu64 " bytes.", req->body_limit);
        return MHD_YES;
}

static bool expects_continue(Request *req) {
        const char *e = req_header(req, "Expect");
        return e && strcasecmp(e, "100-continue") == 0;
}

/* An answer decided before the body (401, 404, 413, an upload refused...). Without a body
 * it goes out on the final call, keeping the connection alive. With one:
 *  - a client waiting for "100 Continue", or one announcing more than we would read, gets
 *    it now; libmicrohttpd then skips the body and closes the connection;
 *  - otherwise the body is read and dropped first: closing a socket with unread data
 *    resets it, and a client still sending would never see the answer. */
static enum MHD_Result answer_early(Request *req) {
        if (!req->has_body) {
                req->phase = PHASE_DISPATCHED;
                return MHD_YES;
        }
        if (expects_continue(req) || req->declared_length > DISCARD_MAX) {
                req->phase = PHASE_DISPATCHED;
                return queue_stored(req);
        }
        req->phase = PHASE_BODY;
        req->body_error = -ECANCELED;
        return MHD_YES;
}

/* A body announced larger than the limit: answered at once, never read. */
static enum MHD_Result answer_too_large_now(Request *req) {
        (void) reply_too_large(req);
        req->phase = PHASE_DISPATCHED;
        return req->has_body ? queue_stored(req) : MHD_YES;
}

/* --- binary and streamed bodies --- */

int reply_bytes(Request *req, unsigned status, const char *content_type, const void *data, size_t len) {
        struct MHD_Response *resp;

        resp = MHD_create_response_from_buffer(len, (void *) data, MHD_RESPMEM_MUST_COPY);
        if (!resp)
                return reply_store(req, status, NULL, 0);
        (void) MHD_add_response_header(resp, "Content-Type", content_type ? content_type : "application/octet-stream");
        return reply_store(req, status, resp, len);
}

typedef struct Stream {
        Request *req;                 /* a reference: valid for req_stream_wake() until freed */
        StreamReadFn read;
        void *ud;
        void (*free_ud)(void *);
} Stream;

/* libmicrohttpd's content reader, on the connection's thread. "Nothing now" suspends the
 * connection (from inside the reader, which libmicrohttpd allows) instead of returning 0,
 * which its internal polling would call again at once: a busy loop. */
static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
        Stream *st = cls;
        Request *req = st->req;

        for (;;) {
                ssize_t n;
                bool closed;

                pthread_mutex_lock(&req->lock);
                req->stream_wake = false;
                closed = req->stream_closed;
                pthread_mutex_unlock(&req->lock);
                if (closed)
                        return MHD_CONTENT_READER_END_WITH_ERROR;

                n = st->read(st->ud, pos, buf, max);
                if (n > 0) {
                        pthread_mutex_lock(&req->lock);
                        req->bytes_out += (uint64_t) n;
                        pthread_mutex_unlock(&req->lock);
                        return n;
                }
                if (n == STREAM_END)
                        return MHD_CONTENT_READER_END_OF_STREAM;
                if (n < 0)
                        return MHD_CONTENT_READER_END_WITH_ERROR;

                /* Nothing now. A wake that came while we read means: look again. */
                pthread_mutex_lock(&req->lock);
                if (req->stream_wake) {
                        pthread_mutex_unlock(&req->lock);
                        continue;
                }
                if (!request_stream_suspend_locked(req)) {
                        pthread_mutex_unlock(&req->lock);
                        return MHD_CONTENT_READER_END_WITH_ERROR; /* the server is stopping */
                }
                pthread_mutex_unlock(&req->lock);
                return 0;
        }
}

static void stream_free(void *cls) {
        Stream *st = cls;

        if (st->free_ud)
                st->free_ud(st->ud);
        request_unref(st->req);
        free(st);
}

int reply_stream(Request *req, const char *content_type, StreamReadFn read, void *ud, void (*free_ud)(void *)) {
        struct MHD_Response *resp;
        Stream *st;

        st = calloc(1, sizeof *st);
        if (!st) {
                if (free_ud)
                        free_ud(ud);
                return reply_store(req, 500, NULL, 0);
        }
        *st = (Stream) { .req = request_ref(req), .read = read, .ud = ud, .free_ud = free_ud };
        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_reader, st, stream_free);
        if (!resp) {
                stream_free(st);
                return reply_store(req, 500, NULL, 0);
        }
        (void) MHD_add_response_header(resp, "Content-Type", content_type);
        (void) MHD_add_response_header(resp, "Cache-Control", "no-cache");
        (void) MHD_add_response_header(resp, "X-Accel-Buffering", "no");
        pthread_mutex_lock(&req->lock);
        req->streaming = true;
        pthread_mutex_unlock(&req->lock);
        return reply_store(req, 200, resp, 0);
}

void req_stream_wake(Request *req) {
        pthread_mutex_lock(&req->lock);
        req->stream_wake = true;
        if (req->streaming && req->suspended)
                request_resume_locked(req);
        pthread_mutex_unlock(&req->lock);
}

/* --- dispatch --- */

static void job_run(void *arg) {
        Request *req = arg;

        if (req->phase == PHASE_UPLOAD_BEGIN) {
                int fd = -EBADF, r;

                r = req->route->upload_begin(req, &fd);
                if (r >= 0 && fd >= 0) {
                        /* Ready for the body: wake the connection without a reply. */
                        pthread_mutex_lock(&req->lock);
                        req->upload_fd = fd;
                        request_resume_locked(req);
                        pthread_mutex_unlock(&req->lock);
                } else
                        request_after_handler(req, r < 0 ? r : 0); /* 500 unless it replied */
        } else
                request_after_handler(req, req->route->handler(req));
        request_unref(req);
}

static void job_cancel(void *arg) {
        Request *req = arg;

        (void) reply_errorf(req, 503, "SANDBOX_SHUTTING_DOWN", "The daemon is shutting down; retry on another worker.");
        request_unref(req);
}

/* Suspends REQ and hands it to POOL. Returns what the access handler returns. */
static enum MHD_Result offload(Request *req, JobPool *pool) {
        int r;

        /* Suspend first, so that the job's reply always finds the connection suspended and
         * resumes it. */
        if (request_suspend(req) < 0)
                return queue_stored(req); /* already answered, or the server is closing */
        r = jobpool_submit(pool, request_ref(req));
        if (r < 0) {
                request_unref(req);
                if (r == -ESHUTDOWN)
                        (void) reply_errorf(req, 503, "SANDBOX_SHUTTING_DOWN",
                                            "The daemon is shutting down; retry on another worker.");
                else
                        (void) reply_errorf(req, 503, "SANDBOX_WORKER_BUSY",
                                            "Too many slow operations are queued on this worker; retry later.");
        }
        return MHD_YES;
}

/* --- request set-up --- */

static enum MHD_Result collect_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
        return request_add_header(cls, key, value) < 0 ? MHD_NO : MHD_YES;
}

static uint64_t body_limit(const Daemon *d, const Route *route) {
        if (route && (route->flags & ROUTE_UPLOAD))
                return d->config.max_upload_bytes;
        return d->config.max_file_api_bytes + 1 * MiB;
}

static enum MHD_Result on_headers(Server *s, Request *req, const char *method) {
        Daemon *d = s->daemon;
        _cleanup_free_ char *path = NULL;
        const char *cl, *query;
        uint64_t length = 0;
        bool length_known;
        char allow[64];
        int r;

        req->phase = PHASE_BODY;
        if (strscpy(req->method, sizeof req->method, method) < 0)
                (void) strscpy(req->method, sizeof req->method, "?");
        (void) MHD_get_connection_values(req->connection, MHD_HEADER_KIND, collect_header, req);
        cl = req_header(req, "Content-Length");
        length_known = cl && parse_u64(cl, &length) >= 0;
        req->declared_length = length_known ? length : 0;
        req->has_body = (length_known && length > 0) || req_header(req, "Transfer-Encoding");

        if (atomic_load(&d->shutting_down)) {
                (void) req_add_reply_header(req, "Connection", "close");
                (void) reply_errorf(req, 503, "SANDBOX_SHUTTING_DOWN",
                                    "The daemon is shutting down; retry on another worker.");
                return answer_early(req);
        }

        query = strchr(req->uri, '?');
        path = strndup(req->uri, query ? (size_t) (query - req->uri) : strlen(req->uri));
        if (!path)
                return MHD_NO;
        r = router_match(req->method, path, &req->match);
        if (r == -EOPNOTSUPP) {
                (void) router_allowed_methods(path, allow, sizeof allow);
                (void) req_add_reply_header(req, "Allow", allow);
                (void) reply_errorf(req, 405, "SANDBOX_METHOD_NOT_ALLOWED", "Method %s is not allowed here (allowed: %s).",
                                    streq(req->method, "?") ? "(unknown)" : req->method, allow);
                return answer_early(req);
        }
        if (r == -EINVAL) {
                (void) reply_invalid(req, "path", "A path parameter has an invalid percent-encoding.");
                return answer_early(req);
        }
        if (r < 0) {
                (void) reply_errorf(req, 404, "SANDBOX_ROUTE_NOT_FOUND", "No such API route; see docs/API.md.");
                return answer_early(req);
        }
        req->route = req->match.route;

        /* Authenticate before anything of the body is read. A public route takes a valid
         * token into account (/healthz says more) and ignores a bad one. */
        r = auth_authenticate(d, req_header(req, "Authorization"), &req->principal);
        req->authenticated = r >= 0;
        if (r < 0 && !(req->route->flags & ROUTE_PUBLIC)) {
                (void) reply_errorf(req, 401, "SANDBOX_UNAUTHORIZED",
                                    "Missing or invalid bearer token (Authorization: Bearer <token>).");
                return answer_early(req);
        }

        if (query) {
                r = request_parse_query(req, query + 1);
                if (r < 0) {
                        (void) reply_invalid(req, "query",
                                             r == -E2BIG ? "Too many query parameters."
                                                         : "The query string has an invalid percent-encoding.");
                        return answer_early(req);
                }
        }

        req->body_limit = body_limit(d, req->route);
        if (length_known && length > req->body_limit)
                return answer_too_large_now(req);

        if (req->route->flags & ROUTE_UPLOAD) {
                /* upload_begin may wait for a hold: on the WAIT pool, the connection
                 * suspended before any body byte is read. libmicrohttpd calls the access
                 * handler again (still without body) once it is resumed. */
                req->phase = PHASE_UPLOAD_BEGIN;
                return offload(req, s->wait_jobs);
        } else if (length_known && length > 0) {
                /* Sized up front, but a client that announces a big body and sends nothing
                 * does not get to pin it all: larger bodies grow as they arrive. */
                req->body_cap = (size_t) MIN(length, BODY_PREALLOC_MAX);
                req->body = malloc(req->body_cap);
                if (!req->body)
                        return MHD_NO;
        }
        return MHD_YES;
}

/* --- the body --- */

static int body_append(Request *req, const char *data, size_t size) {
        if (req->body_len + size > req->body_cap) {
                size_t cap = MAX(req->body_cap * 2, req->body_len + size);
                char *nb;

                cap = MIN(cap, (size_t) req->body_limit);
                nb = realloc(req->body, cap);
                if (!nb)
                        return -ENOMEM;
                req->body = nb;
                req->body_cap = cap;
        }
        memcpy(req->body + req->body_len, data, size);
        req->body_len += size;
        return 0;
}

static enum MHD_Result on_body_chunk(Request *req, const char *data, size_t size) {
        int r;

        req->bytes_in += size;
        if (req->body_error == 0 && req->bytes_in > req->body_limit) {
                /* A chunked body grew past the limit: stop keeping it. */
                req->body_error = -EFBIG;
                free(TAKE_PTR(req->body));
                req->body_len = req->body_cap = 0;
        }
        if (req->body_error != 0) {
                req->discarded += size;
                return req->discarded > DISCARD_MAX ? MHD_NO : MHD_YES;
        }
        if (req->route->flags & ROUTE_UPLOAD)
                r = loop_write(req->upload_fd, data, size);
        else
                r = body_append(req, data, size);
        if (r < 0)
                req->body_error = r;
        return MHD_YES;
}

static enum MHD_Result on_body_done(Server *s, Request *req) {
        int r;

        req->phase = PHASE_DISPATCHED;
        if (req->body_error == -ECANCELED) /* answered early, body dropped */
                return queue_stored(req);
        if (req->body_error == -EFBIG) {
                (void) reply_too_large(req);
                return queue_stored(req);
        }
        if (req->body_error < 0) {
                Error e = ERROR_INIT;

                error_fill_internal(&e, req->body_error, "receiving the request body");
                (void) reply_error(req, &e);
                return queue_stored(req);
        }

        if (req->route->flags & ROUTE_UPLOAD)
                return offload(req, s->finish_jobs);
        if (req->route->flags & ROUTE_OFFLOAD)
                return offload(req, s->wait_jobs);

        r = req->route->handler(req);
        request_after_handler(req, r);
        if (r == API_PARKED && request_suspend(req) == 0)
                return MHD_YES;
        return queue_stored(req);
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                 const char *version, const char *upload_data, size_t *upload_data_size,
                                 void **con_cls) {
        Server *s = cls;
        Request *req = *con_cls;

        if (!req)
                return MHD_NO; /* the URI callback ran out of memory */

        switch (req->phase) {
        case PHASE_NEW:
                return on_headers(s, req, method);
        case PHASE_UPLOAD_BEGIN:
                /* Resumed after upload_begin: an answer (an error) goes out before the body
                 * is read; otherwise the body comes next. */
                if (request_replied(req))
                        return answer_early(req);
                req->phase = PHASE_BODY;
                return MHD_YES;
        case PHASE_BODY:
                if (*upload_data_size > 0) {
                        size_t n = *upload_data_size;
                        *upload_data_size = 0;
                        return on_body_chunk(req, upload_data, n);
                }
                return on_body_done(s, req);
        case PHASE_DISPATCHED:
        case PHASE_QUEUED:
                *upload_data_size = 0; /* a body after an early answer: dropped */
                return queue_stored(req);
        }
        return MHD_NO;
}

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c) {
        Server *s = cls;
        Request *req;

        if (request_new(s->daemon, &s->parks, c, uri, &req) < 0)
                return NULL;
        atomic_fetch_add(&s->active, 1);
        return req;
}

static const char *termination_name(enum MHD_RequestTerminationCode toe) {
        switch (toe) {
        case MHD_REQUEST_TERMINATED_COMPLETED_OK:
                return "ok";
        case MHD_REQUEST_TERMINATED_TIMEOUT_REACHED:
                return "timeout";
        case MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN:
                return "shutdown";
        case MHD_REQUEST_TERMINATED_CLIENT_ABORT:
        case MHD_REQUEST_TERMINATED_READ_ERROR:
                return "client_closed";
        default:
                return "error";
        }
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
        Server *s = cls;
        Request *req = *con_cls;
        const char *route;
        unsigned status;
        uint64_t bytes_out;

        if (!req)
                return;
        *con_cls = NULL;

        pthread_mutex_lock(&req->lock);
        req->connection = NULL; /* a late reply from another thread is dropped from now on */
        status = req->status;
        bytes_out = req->bytes_out;
        pthread_mutex_unlock(&req->lock);

        /* The access log: the route PATTERN only (paths carry ids, queries may carry
         * anything), never bodies, tokens or query values. */
        route = req_route_pattern(req) ? req_route_pattern(req) : "(unmatched)";
        log_emit(LOG_LEVEL_INFO,
                 json_pack("{s:s, s:s, s:s, s:i, s:f, s:I, s:I, s:s}",
                           "event", "access",
                           "method", req->method,
                           "route", route,
                           "status", (int) status,
                           "duration_ms", (double) (now_monotonic_usec() - req->started) / 1000.0,
                           "bytes_in", (json_int_t) req->bytes_in,
                           "bytes_out", (json_int_t) bytes_out,
                           "result", termination_name(toe)),
                 "%s %s %u", req->method, route, status);

        atomic_fetch_sub(&s->active, 1);
        request_unref(req);
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
        char msg[512];

        (void) vsnprintf(msg, sizeof msg, fmt, ap);
        strstrip_trailing(msg);
        log_emit(LOG_LEVEL_WARNING, json_pack("{s:s}", "component", "http"), "%s", msg);
}
#pragma GCC diagnostic pop

/* --- start / stop --- */

static unsigned pool_size(const Config *c) {
        long cores;

        if (c->http_threads > 0)
                return (unsigned) c->http_threads;
        cores = sysconf(_SC_NPROCESSORS_ONLN);
        return (unsigned) MAX(2 * (cores > 0 ? cores : 1), 4L);
}

int server_start(Daemon *d, int listen_fd, Server **ret, char *err, size_t errlen) {
        Server *s;
        int r;

        s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        s->daemon = d;
        s->listen_fd = listen_fd;
        s->quiesced_fd = -EBADF;
        parklist_init(&s->parks);
        r = jobpool_new(WAIT_THREADS, JOB_QUEUE_MAX, job_run, job_cancel, &s->wait_jobs);
        if (r >= 0)
                r = jobpool_new(FINISH_THREADS, JOB_QUEUE_MAX, job_run, job_cancel, &s->finish_jobs);
        if (r < 0) {
                (void) bsprintf(err, errlen, "Cannot start the worker threads: %s.", strerror(-r));
                jobpool_free(s->wait_jobs);
                parklist_destroy(&s->parks);
                free(s);
                return r;
        }

        s->mhd = MHD_start_daemon(
                MHD_USE_INTERNAL_POLLING_THREAD | SERVER_POLL_MODE | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC |
                        MHD_USE_ERROR_LOG,
                0, NULL, NULL, on_access, s,
                MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, s,
                MHD_OPTION_LISTEN_SOCKET, listen_fd,
                MHD_OPTION_THREAD_POOL_SIZE, pool_size(&d->config),
                MHD_OPTION_CONNECTION_LIMIT, (unsigned) d->config.max_connections,
                MHD_OPTION_CONNECTION_TIMEOUT, (unsigned) d->config.http_idle_timeout_seconds,
                MHD_OPTION_URI_LOG_CALLBACK, on_uri, s,
                MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                MHD_OPTION_SIGPIPE_HANDLED_BY_APP, 1,
                MHD_OPTION_END);
        if (!s->mhd) {
                (void) bsprintf(err, errlen, "Cannot start the HTTP server (libmicrohttpd); see the log above.");
                jobpool_free(s->wait_jobs);
                jobpool_free(s->finish_jobs);
                parklist_destroy(&s->parks);
                free(s);
                return -EIO;
        }
        *ret = s;
        return 0;
}

void server_quiesce(Server *s) {
        if (!s || s->quiesced_fd >= 0)
                return;
        s->quiesced_fd = (int) MHD_quiesce_daemon(s->mhd);
        /* Refuse new connections at once rather than leave them in the backlog until the
         * grace period is over. The fd itself stays open until MHD_stop_daemon (its threads
         * may still look at it); on Linux, shutdown() of a listening socket stops it. */
        if (s->quiesced_fd >= 0)
                (void) shutdown(s->quiesced_fd, SHUT_RDWR);
}

unsigned server_active_requests(Server *s) {
        return s ? atomic_load(&s->active) : 0;
}

static void wait_idle(Server *s, usec_t timeout) {
        usec_t deadline = now_monotonic_usec() + timeout;

        while (atomic_load(&s->active) > 0 && now_monotonic_usec() < deadline)
                (void) poll(NULL, 0, 10);
}

void server_stop(Server *s) {
        if (!s)
                return;
        server_quiesce(s);
        /* Queued jobs get 503, running ones finish (their reply resumes them). Waiters
         * first: what they wait for may be a finisher. */
        jobpool_stop(s->wait_jobs);
        jobpool_stop(s->finish_jobs);
        /* libmicrohttpd must not be stopped with a suspended connection: answer every
         * parked request with 503 and resume it, then let those answers go out — and the
         * answers stored just before (a parked request resumed with its own reply, e.g. an
         * exec's WORKER_LOST record at the end of the grace period): wait for every request
         * in flight, not only the ones abandoned here. */
        (void) parklist_abandon_all(&s->parks);
        wait_idle(s, 2 * USEC_PER_SEC);
        MHD_stop_daemon(s->mhd);
        safe_close(s->quiesced_fd);
        jobpool_free(s->wait_jobs);
        jobpool_free(s->finish_jobs);
        parklist_destroy(&s->parks);
        free(s);
}
