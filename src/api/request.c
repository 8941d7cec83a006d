/* SPDX-License-Identifier: MIT */
#include "request.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "json-util.h"
#include "log.h"
#include "macros.h"
#include "string-util.h"
#include "url.h"

#define QUERY_PARAMS_MAX 64
#define HEADERS_MAX 128

int request_new(Daemon *d, ParkList *parks, struct MHD_Connection *c, const char *uri, Request **ret) {
        Request *req;

        req = calloc(1, sizeof *req);
        if (!req)
                return -ENOMEM;
        req->uri = strdup(uri ? uri : "");
        if (!req->uri) {
                free(req);
                return -ENOMEM;
        }
        if (pthread_mutex_init(&req->lock, NULL) != 0) {
                free(req->uri);
                free(req);
                return -ENOMEM;
        }
        atomic_init(&req->refs, 1);
        req->daemon = d;
        req->parks = parks;
        req->connection = c;
        req->started = now_monotonic_usec();
        req->upload_fd = -EBADF;
        *ret = req;
        return 0;
}

Request *request_ref(Request *req) {
        atomic_fetch_add(&req->refs, 1);
        return req;
}

static void pairs_free(HeaderPair *p, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(p[i].name);
                free(p[i].value);
        }
        free(p);
}

void request_unref(Request *req) {
        if (!req || atomic_fetch_sub(&req->refs, 1) != 1)
                return;
        if (req->userdata_free)
                req->userdata_free(req->userdata);
        if (req->response)
                MHD_destroy_response(req->response);
        route_match_done(&req->match);
        pairs_free(req->headers, req->n_headers);
        pairs_free(req->query, req->n_query);
        pairs_free(req->reply_headers, req->n_reply_headers);
        json_decref(req->json);
        json_decref(req->json_errors);
        free(req->body);
        free(req->uri);
        pthread_mutex_destroy(&req->lock);
        free(req);
}

static int pairs_append(HeaderPair **p, size_t *n, size_t max, char *name, char *value) {
        HeaderPair *np;

        if (*n >= max)
                return -E2BIG;
        np = reallocarray(*p, *n + 1, sizeof **p);
        if (!np)
                return -ENOMEM;
        *p = np;
        np[(*n)++] = (HeaderPair) { name, value };
        return 0;
}

int request_add_header(Request *req, const char *name, const char *value) {
        _cleanup_free_ char *n = strdup(name), *v = strdup(value ? value : "");
        int r;

        if (!n || !v)
                return -ENOMEM;
        r = pairs_append(&req->headers, &req->n_headers, HEADERS_MAX, n, v);
        if (r < 0)
                return r;
        TAKE_PTR(n);
        TAKE_PTR(v);
        return 0;
}

int request_parse_query(Request *req, const char *query) {
        const char *p = query;

        while (*p) {
                size_t len = strcspn(p, "&");
                const char *eq = memchr(p, '=', len);
                size_t klen = eq ? (size_t) (eq - p) : len;
                _cleanup_free_ char *k = NULL, *v = NULL;
                int r;

                if (len > 0) {
                        r = http_percent_decode(p, klen, true, &k);
                        if (r < 0)
                                return r;
                        r = http_percent_decode(eq ? eq + 1 : "", eq ? len - klen - 1 : 0, true, &v);
                        if (r < 0)
                                return r;
                        r = pairs_append(&req->query, &req->n_query, QUERY_PARAMS_MAX, k, v);
                        if (r < 0)
                                return r;
                        TAKE_PTR(k);
                        TAKE_PTR(v);
                }
                p += len;
                if (*p == '&')
                        p++;
        }
        return 0;
}

/* --- accessors (http.h) --- */

Daemon *req_daemon(Request *req) {
        return req->daemon;
}

const Principal *req_principal(Request *req) {
        return req->authenticated ? &req->principal : NULL;
}

const char *req_method(Request *req) {
        return req->method;
}

const char *req_route_pattern(Request *req) {
        return req->route ? req->route->pattern : NULL;
}

const char *req_param(Request *req, const char *name) {
        return route_match_param(&req->match, name);
}

const char *req_query(Request *req, const char *name) {
        for (size_t i = 0; i < req->n_query; i++)
                if (streq(req->query[i].name, name))
                        return req->query[i].value;
        return NULL;
}

const char *req_header(Request *req, const char *name) {
        for (size_t i = 0; i < req->n_headers; i++)
                if (strcasecmp(req->headers[i].name, name) == 0)
                        return req->headers[i].value;
        return NULL;
}

uint64_t req_upload_size(Request *req) {
        return req->bytes_in;
}

void req_set_userdata(Request *req, void *data, void (*free_fn)(void *)) {
        if (req->userdata_free && req->userdata != data)
                req->userdata_free(req->userdata);
        req->userdata = data;
        req->userdata_free = free_fn;
}

void *req_userdata(Request *req) {
        return req->userdata;
}

int req_add_reply_header(Request *req, const char *name, const char *value) {
        _cleanup_free_ char *n = NULL, *v = NULL;
        int r;

        /* No header injection, whatever a handler passes. */
        if (isempty(name) || strpbrk(name, "\r\n: ") || !value || strpbrk(value, "\r\n"))
                return -EINVAL;
        n = strdup(name);
        v = strdup(value);
        if (!n || !v)
                return -ENOMEM;
        pthread_mutex_lock(&req->lock);
        r = pairs_append(&req->reply_headers, &req->n_reply_headers, HEADERS_MAX, n, v);
        pthread_mutex_unlock(&req->lock);
        if (r < 0)
                return r;
        TAKE_PTR(n);
        TAKE_PTR(v);
        return 0;
}

/* --- parking --- */

void parklist_init(ParkList *pl) {
        *pl = (ParkList) {};
        pthread_mutex_init(&pl->lock, NULL);
}

void parklist_destroy(ParkList *pl) {
        pthread_mutex_destroy(&pl->lock);
}

static void park_link(ParkList *pl, Request *req) {
        req->park_prev = NULL;
        req->park_next = pl->head;
        if (pl->head)
                pl->head->park_prev = req;
        pl->head = req;
        pl->count++;
}

static void park_unlink(ParkList *pl, Request *req) {
        if (req->park_prev)
                req->park_prev->park_next = req->park_next;
        else
                pl->head = req->park_next;
        if (req->park_next)
                req->park_next->park_prev = req->park_prev;
        req->park_prev = req->park_next = NULL;
        pl->count--;
}

bool request_replied(Request *req) {
        bool r;

        pthread_mutex_lock(&req->lock);
        r = req->replied;
        pthread_mutex_unlock(&req->lock);
        return r;
}

void request_resume_locked(Request *req) {
        if (!req->suspended)
                return;
        req->suspended = false;
        if (req->parks) {
                pthread_mutex_lock(&req->parks->lock);
                park_unlink(req->parks, req);
                pthread_mutex_unlock(&req->parks->lock);
        }
        if (req->connection)
                MHD_resume_connection(req->connection);
}

bool request_stream_suspend_locked(Request *req) {
        bool ok = false;

        if (!req->parks || !req->connection || req->stream_closed)
                return false;
        pthread_mutex_lock(&req->parks->lock);
        if (!req->parks->closing) {
                MHD_suspend_connection(req->connection);
                park_link(req->parks, req);
                req->suspended = true;
                ok = true;
        }
        pthread_mutex_unlock(&req->parks->lock);
        return ok;
}

/* Stores a 503 SANDBOX_SHUTTING_DOWN with REQ->lock held; a later reply is dropped. */
static void store_shutdown_reply_locked(Request *req) {
        _cleanup_json_ json_t *body = NULL;
        struct MHD_Response *resp = NULL;
        char *text;

        body = reply_error_body("SANDBOX_SHUTTING_DOWN", "The daemon is shutting down; retry on another worker.", NULL);
        text = body ? json_dumps(body, JSON_COMPACT) : NULL;
        if (text) {
                size_t len = strlen(text);
                resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
                if (!resp)
                        free(text);
                else {
                        (void) MHD_add_response_header(resp, "Content-Type", "application/json");
                        (void) MHD_add_response_header(resp, "Connection", "close");
                        req->bytes_out = len;
                }
        }
        /* A NULL response makes the access handler close the connection instead. */
        req->response = resp;
        req->status = 503;
        req->replied = true;
        req->abandoned = true;
}

int request_suspend(Request *req) {
        int r = 0;

        pthread_mutex_lock(&req->lock);
        if (req->replied)
                r = -EALREADY;
        else if (req->parks) {
                pthread_mutex_lock(&req->parks->lock);
                if (req->parks->closing)
                        r = -ESHUTDOWN;
                else {
                        MHD_suspend_connection(req->connection);
                        park_link(req->parks, req);
                        req->suspended = true;
                }
                pthread_mutex_unlock(&req->parks->lock);
                if (r == -ESHUTDOWN) {
                        store_shutdown_reply_locked(req);
                        r = -EALREADY;
                }
        } else
                r = -EALREADY; /* no server: nothing to suspend (unit tests) */
        pthread_mutex_unlock(&req->lock);
        return r;
}

unsigned parklist_abandon_all(ParkList *pl) {
        unsigned abandoned = 0;
        Request **all = NULL;
        size_t n = 0;

        pthread_mutex_lock(&pl->lock);
        pl->closing = true;
        if (pl->count > 0)
                all = calloc(pl->count, sizeof *all);
        for (Request *r = pl->head; all && r; r = r->park_next)
                all[n++] = request_ref(r);
        pthread_mutex_unlock(&pl->lock);
        if (pl->count > 0 && !all)
                log_error("Out of memory while resuming parked requests at shutdown.");

        for (size_t i = 0; i < n; i++) {
                Request *req = all[i];

                pthread_mutex_lock(&req->lock);
                if (req->suspended && req->streaming) {
                        /* A stream waiting for data: its reader ends it when resumed. */
                        req->stream_closed = true;
                        request_resume_locked(req);
                        abandoned++;
                } else if (req->suspended && !req->replied) {
                        store_shutdown_reply_locked(req);
                        request_resume_locked(req);
                        abandoned++;
                }
                pthread_mutex_unlock(&req->lock);
                request_unref(req);
        }
        free(all);
        return abandoned;
}

void request_after_handler(Request *req, int r) {
        bool replied;

        pthread_mutex_lock(&req->lock);
        replied = req->replied;
        if (r == API_PARKED && !replied) {
                /* The handler handed REQ to another thread: keep it alive until that
                 * thread's reply_*() (which drops this reference). */
                req->park_ref = true;
                request_ref(req);
        }
        pthread_mutex_unlock(&req->lock);
        if (r == API_PARKED || replied)
                return;

        if (r < 0)
                log_emit(LOG_LEVEL_ERROR,
                         json_pack("{s:s, s:s?}", "http_method", req->method, "route", req_route_pattern(req)),
                         "Handler failed without a reply: %s", strerror(-r));
        else
                log_emit(LOG_LEVEL_ERROR,
                         json_pack("{s:s, s:s?}", "http_method", req->method, "route", req_route_pattern(req)),
                         "Handler returned without a reply");
        (void) reply_error(req, NULL);
}
