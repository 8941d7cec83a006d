/* SPDX-License-Identifier: MIT */
#pragma once

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>

#include "http.h"
#include "router.h"
#include "time-util.h"

/* The HTTP layer's private view of a request (server.c, request.c, reply.c, validate.c).
 * Handlers only see the accessors of http.h.
 *
 * Lifetime: a Request is reference-counted. libmicrohttpd's connection holds one reference
 * from the URI callback to MHD_OPTION_NOTIFY_COMPLETED; a job running the handler on the
 * offload pool holds one; a handler that returned API_PARKED holds one until its reply_*()
 * call. So a late reply from another thread always finds valid memory, even when the
 * client went away or the daemon stopped meanwhile (the reply is then dropped).
 *
 * Replies: reply_*() never talks to libmicrohttpd's connection directly (it may run on any
 * thread): it builds the MHD_Response, stores it under LOCK and, if the connection is
 * suspended, resumes it. The access handler queues the stored response on its next call,
 * on the connection's own thread. */

typedef struct ParkList {
        pthread_mutex_t lock;
        Request *head;             /* suspended requests */
        unsigned count;
        bool closing;              /* the server is stopping: nothing new is suspended */
} ParkList;

typedef struct HeaderPair {
        char *name;
        char *value;
} HeaderPair;

typedef enum RequestPhase {
        PHASE_NEW,                 /* URI seen, headers not yet */
        PHASE_UPLOAD_BEGIN,        /* upload_begin running on the pool, connection suspended */
        PHASE_BODY,                /* headers checked, body being received */
        PHASE_DISPATCHED,          /* handler called (inline, offloaded or parked) */
        PHASE_QUEUED,              /* response handed to libmicrohttpd */
} RequestPhase;

struct Request {
        Daemon *daemon;
        ParkList *parks;                    /* NULL outside the server (unit tests) */
        atomic_uint refs;
        usec_t started;
        RequestPhase phase;

        char *uri;                          /* the raw request target, as received */
        char method[16];
        RouteMatch match;
        const Route *route;                 /* NULL if unmatched */
        Principal principal;
        bool authenticated;

        HeaderPair *headers;                /* copied: valid on any thread, any time */
        size_t n_headers;
        HeaderPair *query;                  /* percent-decoded */
        size_t n_query;

        /* Body, written by the connection's thread only, read by the handler after it. */
        bool has_body;
        char *body;
        size_t body_len, body_cap;
        uint64_t body_limit;
        uint64_t declared_length;           /* Content-Length, 0 if none */
        uint64_t bytes_in;
        uint64_t discarded;
        int upload_fd;                      /* borrowed from upload_begin */
        int body_error;                     /* -EFBIG: too large; -ECANCELED: answered early,
                                             * body dropped; else a write error */
        json_t *json;
        bool json_parsed;
        Error json_error;                   /* why JSON is NULL, for every req_json() call */
        json_t *json_errors;                /* its errors[], added to the 422 by reply_error() */

        void *userdata;
        void (*userdata_free)(void *);

        /* Reply state, under LOCK. */
        pthread_mutex_t lock;
        struct MHD_Connection *connection;  /* NULL once libmicrohttpd completed it */
        struct MHD_Response *response;      /* stored, not yet queued */
        unsigned status;
        uint64_t bytes_out;
        bool replied;
        bool suspended;
        bool abandoned;                     /* answered 503 at shutdown; a late reply is dropped */
        bool park_ref;                      /* a parked handler holds a reference */
        bool streaming;                     /* reply_stream(): suspended from the content reader */
        bool stream_wake;                   /* req_stream_wake() since the last read */
        bool stream_closed;                 /* shutdown: end the stream at the next read */
        Request *park_prev, *park_next;
        HeaderPair *reply_headers;
        size_t n_reply_headers;
};

/* request.c */
int request_new(Daemon *d, ParkList *parks, struct MHD_Connection *c, const char *uri, Request **ret);
Request *request_ref(Request *req);
void request_unref(Request *req);
DEFINE_TRIVIAL_CLEANUP_FUNC(Request *, request_unref);
int request_add_header(Request *req, const char *name, const char *value);
/* Splits and percent-decodes a raw query string (without '?'). -EINVAL on a bad encoding,
 * -E2BIG for too many parameters. */
int request_parse_query(Request *req, const char *query);

/* After the handler returned R (on whatever thread ran it): takes the parked reference for
 * API_PARKED, or answers 500 when the handler returned without replying. */
void request_after_handler(Request *req, int r);
/* Suspends the connection unless a reply is already stored. Call on the connection's
 * thread, from the access handler. Returns 0 if suspended, -EALREADY if a reply is ready
 * to be queued now. When the server is closing, stores a 503 instead and returns
 * -EALREADY. */
int request_suspend(Request *req);
bool request_replied(Request *req);
/* With REQ->lock held, after storing a reply: resumes REQ if it is suspended. */
void request_resume_locked(Request *req);
/* With REQ->lock held, from a stream's content reader: suspends the connection until
 * req_stream_wake(). Returns false (nothing done) when the server is closing. */
bool request_stream_suspend_locked(Request *req);

void parklist_init(ParkList *pl);
void parklist_destroy(ParkList *pl);
/* At shutdown: forbids new suspensions and answers every suspended request with 503
 * SANDBOX_SHUTTING_DOWN, resuming it, so that MHD_stop_daemon finds none suspended.
 * Returns how many it answered. */
unsigned parklist_abandon_all(ParkList *pl);

/* reply.c */
/* {"detail": {"code", "message"[, "errors"]}}; ERRORS (may be NULL) is borrowed. */
json_t *reply_error_body(const char *code, const char *message, json_t *errors);
/* 422 SANDBOX_INVALID_REQUEST with one error at loc [WHERE] ("path", "query"). */
int reply_invalid(Request *req, const char *where, const char *msg);
/* Stores a reply built from an MHD response (takes it), as every reply_*() does. */
int reply_store(Request *req, unsigned status, struct MHD_Response *resp, uint64_t bytes_out);

/* validate.c */
/* Parses a request body: one JSON object, duplicate keys refused. On failure fills E with
 * 422 SANDBOX_INVALID_REQUEST and *RET_ERRORS (may be NULL) with the errors[] list;
 * never echoes the input. */
int http_json_parse_body(const char *buf, size_t len, json_t **ret, Error *e, json_t **ret_errors);
