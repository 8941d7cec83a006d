/* SPDX-License-Identifier: MIT */
#pragma once

/* The HTTP client every client-side subcommand shares (the CLI, `sandloom mcp` over stdio,
 * `sandloom bench`'s set-up calls): where the daemon is, its token, and blocking requests
 * over one keep-alive libcurl handle. Library code: returns negative errno, never prints. */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "macros.h"

#define CLIENT_MAX_RESPONSE_BYTES (64u * 1024u * 1024u) /* a buffered reply larger than this: -EFBIG */

#define CLIENT_BODY_SIZE_UNKNOWN ((size_t) -1)

typedef struct Client Client;

/* Where the daemon is and how to authenticate, in order of precedence:
 *   url:   the flag, $SANDBOX_BASE_URL, DATA_DIR/endpoint (written by a running daemon),
 *          http://127.0.0.1:8080;
 *   token: the flag, $SANDBOX_INTERNAL_TOKEN, the file named by $SANDBOX_INTERNAL_TOKEN_FILE,
 *          DATA_DIR/token;
 *   data_dir: the flag, $SANDBOX_DATA_DIR, ./data.
 * Any field may be NULL (not given). */
typedef struct ClientOptions {
        const char *url;
        const char *token;
        const char *data_dir;
        long timeout_ms;         /* whole-request timeout; 0 = none (streams) */
} ClientOptions;

/* The token in the file PATH (symlinks followed): its first line, trimmed. -ENODATA if empty. */
int client_read_token_file(const char *path, char **ret);

/* Resolves the options and opens the handle. On failure fills ERR with a sentence. */
int client_new(const ClientOptions *opts, Client **ret, char *err, size_t errlen);
Client *client_free(Client *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(Client *, client_free);
#define _cleanup_client_ _cleanup_(client_freep)
const char *client_base_url(const Client *c);
const char *client_token(const Client *c); /* for callers that open their own connections */
const char *client_no_proxy(const Client *c); /* their CURLOPT_NOPROXY: loopback never via a proxy */

typedef struct ClientResponse {
        long status;             /* HTTP status; 0 when no response arrived */
        char *body;              /* NUL-terminated, owned */
        size_t size;
        char *content_type;      /* owned, may be NULL */
} ClientResponse;

void client_response_done(ClientResponse *r);

/* Called with each piece of a streamed 2xx body as it arrives (any other body is buffered into
 * response->body); return < 0 to stop (the request then fails with that value). */
typedef int (*ClientSink)(const char *data, size_t size, void *userdata);

typedef struct ClientRequest {
        const char *method;      /* "GET", "POST", "PUT", "DELETE" */
        const char *path;        /* "/api/v1/..." incl. any query string, already URL-encoded */
        const char *content_type;
        const void *body;        /* sent as is; or */
        size_t body_size;
        FILE *body_file;         /* streamed from this file (raw uploads), size body_size, or
                                  * CLIENT_BODY_SIZE_UNKNOWN (a pipe): sent chunked */
        const char *accept;      /* e.g. "text/event-stream" */
        const char *const *headers; /* extra "Name: value" lines, NULL-terminated; may be NULL */
        ClientSink sink;         /* when set, the body goes here instead of into response->body */
        void *userdata;
        long timeout_ms;         /* overrides the client's default when > 0; < 0 = no timeout */
        /* Stall detection for long streams: no byte at all for STALL_MS fails the request with
         * -ETIMEDOUT (0 = off). When the response has header STALL_HEADER ("N" seconds, N > 0),
         * the limit becomes 3 x N seconds instead (the daemon's keep-alive period). */
        long stall_ms;
        const char *stall_header;
} ClientRequest;

/* Performs one request. Returns 0 when any HTTP response arrived (check ret->status), -ECONNREFUSED/
 * -ETIMEDOUT/-EHOSTUNREACH/-EIO when none did (ERR says why), or a sink's negative value. */
int client_perform(Client *c, const ClientRequest *req, ClientResponse *ret, char *err, size_t errlen);

/* JSON in, JSON out: sends BODY (may be NULL) as application/json and parses the reply.
 * *ret_json is the parsed body (NULL if it was not JSON). */
int client_json(Client *c, const char *method, const char *path, json_t *body, long *ret_status,
                json_t **ret_json, char *err, size_t errlen);

/* "CODE: message" from a sandloom error body ({"detail": {"code", "message"}}), or the HTTP
 * status when the body is not one. Writes into BUF. */
const char *client_error_line(long status, const json_t *body, char *buf, size_t buflen);

/* The "detail.code" of a sandloom error body, or NULL (also for no body or another shape). */
const char *client_error_code(const json_t *body);

/* Percent-encodes S for a query-string value or a path segment. Returns malloc'ed or NULL. */
char *client_escape(const char *s);

/* Builds PATH from a printf format, escaping nothing: callers escape pieces with client_escape. */
char *client_pathf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
