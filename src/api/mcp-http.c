/* SPDX-License-Identifier: MIT */
/* The MCP streamable HTTP transport (POST /mcp, POST /api/v1/sandboxes/mcp/streamable-http)
 * and its JSON-RPC layer. Stateless: no Mcp-Session-Id is issued; each POST carries one
 * message (or, with protocol revision 2025-03-26, a batch) and is answered with JSON: the
 * response(s), or 202 Accepted with no body when it held only notifications or responses.
 * GET (a server-initiated stream) is not offered: the router answers 405.
 *
 * Order of checks: the bearer token (server.c, before the body), then Host and Origin
 * against SANDBOX_MCP_ALLOWED_HOSTS (403, against DNS rebinding), then MCP-Protocol-Version
 * (400 for a revision we do not speak), then the JSON-RPC message itself. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "handlers.h"
#include "json-util.h"
#include "log.h"
#include "macros.h"
#include "mcp.h"
#include "request.h"
#include "string-util.h"

/* JSON-RPC 2.0 error codes. */
#define RPC_PARSE_ERROR (-32700)
#define RPC_INVALID_REQUEST (-32600)
#define RPC_METHOD_NOT_FOUND (-32601)
#define RPC_INVALID_PARAMS (-32602)
#define RPC_INTERNAL_ERROR (-32603)

#define BATCH_MAX 64
#define HOST_MAX 256

/* --- protocol revisions --- */

static const char *const version_names[_MCP_VERSION_MAX] = {
        [MCP_2024_11_05] = "2024-11-05",
        [MCP_2025_03_26] = "2025-03-26",
        [MCP_2025_06_18] = "2025-06-18",
        [MCP_2025_11_25] = "2025-11-25",
};

const char *mcp_version_to_string(McpVersion v) {
        return (unsigned) v < _MCP_VERSION_MAX ? version_names[v] : NULL;
}

int mcp_version_from_string(const char *s, McpVersion *ret) {
        for (int v = 0; s && v < _MCP_VERSION_MAX; v++)
                if (streq(version_names[v], s)) {
                        *ret = (McpVersion) v;
                        return 0;
                }
        return -EINVAL;
}

const char *mcp_versions_list(void) {
        return "2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25";
}

/* --- Host and Origin --- */

/* Splits "host[:port]" / "[v6][:port]" of length LEN: the host (IPv6 kept in brackets,
 * lower-cased) into HOST, the port (or "") into PORT. */
static int split_hostport(const char *s, size_t len, char host[static HOST_MAX], char port[static 8]) {
        const char *end = s + len, *colon;
        size_t hlen;

        if (len == 0)
                return -EINVAL;
        if (s[0] == '[') {
                const char *rb = memchr(s, ']', len);
                if (!rb)
                        return -EINVAL;
                hlen = (size_t) (rb - s) + 1;
                colon = rb + 1 < end && rb[1] == ':' ? rb + 1 : NULL;
                if (!colon && rb + 1 != end)
                        return -EINVAL;
        } else {
                colon = memchr(s, ':', len);
                hlen = colon ? (size_t) (colon - s) : len;
        }
        if (hlen == 0 || hlen >= HOST_MAX)
                return -EINVAL;
        for (size_t i = 0; i < hlen; i++)
                host[i] = (char) ((s[i] >= 'A' && s[i] <= 'Z') ? s[i] - 'A' + 'a' : s[i]);
        host[hlen] = '\0';
        port[0] = '\0';
        if (colon) {
                size_t plen = (size_t) (end - colon - 1);
                if (plen == 0 || plen > 5 || strspn(colon + 1, "0123456789") < plen)
                        return -EINVAL;
                memcpy(port, colon + 1, plen);
                port[plen] = '\0';
        }
        return 0;
}

/* The host of a URL ("http://host:port/..."), into HOST. */
static int url_host(const char *url, char host[static HOST_MAX]) {
        const char *p = url ? strstr(url, "://") : NULL;
        char port[8];

        if (!p)
                return -EINVAL;
        p += 3;
        return split_hostport(p, strcspn(p, "/?#"), host, port);
}

static bool default_host_allowed(const Daemon *d, const char *host) {
        char h[HOST_MAX], port[8];

        if (streq(host, "localhost") || streq(host, "127.0.0.1") || streq(host, "[::1]"))
                return true;
        if (d->config.listen && split_hostport(d->config.listen, strlen(d->config.listen), h, port) >= 0 &&
            streq(h, host))
                return true;
        return url_host(d->worker_endpoint, h) >= 0 && streq(h, host);
}

/* HOSTPORT (a Host header, or the authority of an Origin) against the allowlist. */
static bool host_allowed(const Daemon *d, const char *hostport, size_t len) {
        const char *list = d->config.mcp_allowed_hosts;
        char host[HOST_MAX], port[8];

        if (split_hostport(hostport, len, host, port) < 0)
                return false;
        if (isempty(list))
                return default_host_allowed(d, host);
        for (const char *p = list; *p;) {
                size_t n = strcspn(p, ",");
                char eh[HOST_MAX], ep[8];
                const char *e = p;
                size_t elen = n;

                while (elen > 0 && (*e == ' ' || *e == '\t'))
                        e++, elen--;
                while (elen > 0 && (e[elen - 1] == ' ' || e[elen - 1] == '\t'))
                        elen--;
                if (elen == 1 && e[0] == '*')
                        return true;
                /* An entry with a port matches that port only; without, any port. */
                if (elen > 0 && split_hostport(e, elen, eh, ep) >= 0 && streq(eh, host) &&
                    (ep[0] == '\0' || streq(ep, port)))
                        return true;
                p += n;
                if (*p == ',')
                        p++;
        }
        return false;
}

static int check_origin_and_host(Request *req) {
        Daemon *d = req_daemon(req);
        const char *host = req_header(req, "Host"), *origin = req_header(req, "Origin");

        if (host && !host_allowed(d, host, strlen(host)))
                return reply_errorf(req, 403, "SANDBOX_MCP_HOST_NOT_ALLOWED",
                                    "The Host header names a host the MCP endpoint does not serve; add it to "
                                    "SANDBOX_MCP_ALLOWED_HOSTS."), 1;
        if (origin) {
                const char *p = strstr(origin, "://");
                bool ok = p && (startswith(origin, "http://") || startswith(origin, "https://")) &&
                          host_allowed(d, p + 3, strcspn(p + 3, "/?#"));
                if (!ok)
                        return reply_errorf(req, 403, "SANDBOX_MCP_ORIGIN_NOT_ALLOWED",
                                            "The Origin header names a site the MCP endpoint does not accept; add its "
                                            "host to SANDBOX_MCP_ALLOWED_HOSTS."), 1;
        }
        return 0;
}

/* --- JSON-RPC messages --- */

/* DATA (may be NULL) is stolen. */
static json_t *rpc_error(json_t *id, int code, const char *message, json_t *data) {
        json_t *err = json_pack("{s:i, s:s}", "code", code, "message", message);

        if (err && data && json_object_set_new(err, "data", TAKE_PTR(data)) < 0)
                json_decref(TAKE_PTR(err));
        json_decref(data);
        if (!err)
                return NULL;
        return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(), "error", err);
}

static json_t *rpc_result(json_t *id, json_t *result) {
        if (!result)
                return rpc_error(id, RPC_INTERNAL_ERROR, "Out of memory", NULL);
        return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result);
}

/* --- one exchange: the POST and every response it waits for --- */

typedef struct Exchange {
        Request *req;
        McpVersion version;           /* of the request: MCP-Protocol-Version, or the default */
        bool batch;
        unsigned status;              /* 200, or 400 for a single message that is not valid JSON-RPC */
        pthread_mutex_t lock;
        unsigned pending;             /* the handler itself + tool calls still running */
        json_t *responses;            /* array */
} Exchange;

typedef struct Slot {
        McpCall call;
        Exchange *x;
        json_t *id;
        const char *tool;
} Slot;

static void exchange_free(Exchange *x) {
        json_decref(x->responses);
        pthread_mutex_destroy(&x->lock);
        free(x);
}

/* Sends the answer: 202 without a body when there is no response, else the response (or
 * the batch's array). Frees X. */
static void exchange_reply(Exchange *x) {
        Request *req = x->req;
        size_t n = json_array_size(x->responses);

        if (n == 0)
                (void) reply_bytes(req, 202, "application/json", "", 0);
        else if (x->batch)
                (void) reply_json(req, 200, json_incref(x->responses));
        else
                (void) reply_json(req, x->status, json_incref(json_array_get(x->responses, 0)));
        exchange_free(x);
}

/* Adds RESPONSE (stolen; NULL = out of memory, answered as such) and drops one pending
 * count. Returns true if that was the last: the caller then replies. */
static bool exchange_add(Exchange *x, json_t *id, json_t *response, bool done) {
        bool last;

        if (!response)
                response = rpc_error(id, RPC_INTERNAL_ERROR, "Out of memory", NULL);
        pthread_mutex_lock(&x->lock);
        if (response)
                (void) json_array_append_new(x->responses, response);
        last = done && --x->pending == 0;
        pthread_mutex_unlock(&x->lock);
        return last;
}

static bool exchange_done(Exchange *x) {
        bool last;

        pthread_mutex_lock(&x->lock);
        last = --x->pending == 0;
        pthread_mutex_unlock(&x->lock);
        return last;
}

/* --- tools/call --- */

/* The CallToolResult of a finished call: the record as text and as structuredContent, or
 * isError with "CODE: message" as text. */
static json_t *tool_result(const McpCall *c) {
        _cleanup_free_ char *text = NULL;

        if (c->structured) {
                text = json_dumps(c->structured, JSON_COMPACT);
                if (!text)
                        return NULL;
                return json_pack("{s:[{s:s, s:s}], s:O, s:b}", "content", "type", "text", "text", text,
                                 "structuredContent", c->structured, "isError", 0);
        }
        text = strprintf("%s: %s", c->error.code ? c->error.code : "SANDBOX_INTERNAL_ERROR",
                         c->error.status ? c->error.message : "internal error; the daemon log has the details");
        if (!text)
                return NULL;
        return json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text", text, "isError", 1);
}

/* Invalid arguments: since 2025-11-25 a tool error the model can correct; before, the
 * protocol error -32602. */
static json_t *invalid_arguments(McpVersion v, json_t *id, const Error *e, json_t *errors) {
        McpCall c = { .error = *e };

        if (v >= MCP_2025_11_25)
                return rpc_result(id, tool_result(&c));
        return rpc_error(id, RPC_INVALID_PARAMS, e->message,
                         errors ? json_pack("{s:s, s:O}", "code", "SANDBOX_INVALID_REQUEST", "errors", errors)
                                : json_pack("{s:s}", "code", "SANDBOX_INVALID_REQUEST"));
}

static json_t *call_response(Slot *s) {
        McpCall *c = &s->call;

        if (!c->structured && c->error.status == 422 && c->error.code && streq(c->error.code, "SANDBOX_INVALID_REQUEST"))
                return invalid_arguments(c->version, s->id, &c->error, NULL);
        if (!c->structured && (c->error.status == 0 || c->error.status >= 500))
                log_emit(LOG_LEVEL_ERROR, json_pack("{s:s, s:s, s:i, s:s?}", "component", "mcp", "tool", s->tool,
                                                    "status", (int) c->error.status, "code", c->error.code),
                         "MCP tool failed: %s", c->error.status ? c->error.message : "no error set");
        return rpc_result(s->id, tool_result(c));
}

static void slot_free(Slot *s) {
        json_decref(s->call.structured);
        json_decref(s->call.args);
        json_decref(s->id);
        free(s);
}

/* A tool finished (on whatever thread): its response goes in; the last one replies. */
static void slot_done(McpCall *c) {
        Slot *s = c->userdata;
        Exchange *x = s->x;
        bool last;

        last = exchange_add(x, s->id, call_response(s), true);
        slot_free(s);
        if (last)
                exchange_reply(x);
}

static void tools_call(Exchange *x, json_t *id, json_t *params) {
        json_t *name = json_object_get(params, "name"), *args = json_object_get(params, "arguments");
        _cleanup_json_ json_t *errors = NULL;
        const McpTool *t;
        Error e = ERROR_INIT;
        Slot *s;

        if (!json_string_is_text(name) || !(t = mcp_tool_find(json_string_value(name)))) {
                (void) exchange_add(x, id, rpc_error(id, RPC_INVALID_PARAMS, "Unknown tool; tools/list names them", NULL),
                                    false);
                return;
        }
        if (args && !json_is_null(args) && !json_is_object(args)) {
                (void) exchange_add(x, id, rpc_error(id, RPC_INVALID_PARAMS, "params.arguments must be an object", NULL),
                                    false);
                return;
        }
        if (mcp_tool_validate(t, args, &e, &errors) < 0) {
                (void) exchange_add(x, id, invalid_arguments(x->version, id, &e, errors), false);
                return;
        }

        s = calloc(1, sizeof *s);
        if (!s) {
                (void) exchange_add(x, id, NULL, false);
                return;
        }
        *s = (Slot) {
                .call = {
                        .daemon = req_daemon(x->req),
                        .principal = req_principal(x->req),
                        .args = args ? json_incref(args) : json_object(),
                        .version = x->version,
                        .error = ERROR_INIT,
                        .done = slot_done,
                        .userdata = s,
                },
                .x = x,
                .id = json_incref(id),
                .tool = mcp_tool_name(t),
        };
        if (!s->call.args) {
                slot_free(s);
                (void) exchange_add(x, id, NULL, false);
                return;
        }
        pthread_mutex_lock(&x->lock);
        x->pending++;
        pthread_mutex_unlock(&x->lock);
        /* Answered now, or later by slot_done from the exec engine's pump thread. Either way
         * slot_done runs exactly once; the handler's own pending count keeps X alive. */
        if (mcp_tool_run(t, &s->call) != MCP_CALL_PENDING)
                slot_done(&s->call);
}

/* --- methods --- */

static json_t *initialize_result(Daemon *d, McpVersion v) {
        _cleanup_free_ char *instructions = NULL;
        json_t *info;

        instructions = strprintf(
                "sandloom runs commands in isolated, persistent sandboxes. Workflow: sandbox_resolve (pick a "
                "sandbox_id and a workspace_scope_id) -> sandbox_create with the returned generation -> "
                "sandbox_write_file / sandbox_exec / sandbox_read_file ... -> sandbox_release when done. Pass the "
                "generation from sandbox_resolve to every call; on STALE_SANDBOX_GENERATION call sandbox_resolve "
                "again. Files under /workspace persist between commands; processes do not (each sandbox_exec is a "
                "fresh process). sandbox_exec waits at most %" PRIu64 " s: a RUNNING answer means poll "
                "sandbox_exec_status with the same exec_id and wait_seconds. Give each command a new exec_id; "
                "retrying with the same one never runs it twice.",
                d->config.mcp_exec_wait_seconds);
        info = json_pack("{s:s, s:s}", "name", "sandloom", "version", SANDLOOM_VERSION_STRING);
        if (!instructions || !info) {
                json_decref(info);
                return NULL;
        }
        if (v >= MCP_2025_06_18)
                (void) json_object_set_new(info, "title", json_string("sandloom sandboxes"));
        if (v >= MCP_2025_11_25)
                (void) json_object_set_new(info, "description",
                                           json_string("Persistent, isolated sandboxes for AI agents: files, commands."));
        return json_pack("{s:s, s:{s:{s:b}}, s:o, s:s}", "protocolVersion", mcp_version_to_string(v), "capabilities",
                         "tools", "listChanged", 0, "serverInfo", info, "instructions", instructions);
}

static void method_initialize(Exchange *x, json_t *id, json_t *params) {
        json_t *pv = json_object_get(params, "protocolVersion");
        McpVersion v;

        if (!json_is_object(params) || !json_string_is_text(pv)) {
                (void) exchange_add(x, id, rpc_error(id, RPC_INVALID_PARAMS, "initialize needs params.protocolVersion", NULL),
                                    false);
                return;
        }
        /* The client's revision when we speak it, else our newest (the client then decides). */
        if (mcp_version_from_string(json_string_value(pv), &v) < 0)
                v = MCP_VERSION_LATEST;
        (void) exchange_add(x, id, rpc_result(id, initialize_result(req_daemon(x->req), v)), false);
}

/* One message of the POST (or of its batch). Responses go into X. */
static void handle_message(Exchange *x, json_t *msg) {
        json_t *id, *method, *params;
        const char *m;

        if (!json_is_object(msg) || !json_is_string(json_object_get(msg, "jsonrpc")) ||
            !streq(json_string_value(json_object_get(msg, "jsonrpc")), "2.0")) {
                x->status = 400;
                (void) exchange_add(x, NULL, rpc_error(NULL, RPC_INVALID_REQUEST, "Not a JSON-RPC 2.0 message", NULL), false);
                return;
        }
        id = json_object_get(msg, "id");
        method = json_object_get(msg, "method");
        params = json_object_get(msg, "params");
        if (!method) {
                /* A response to a request of ours: we send none, so there is nothing to match. */
                if (id && (json_object_get(msg, "result") || json_object_get(msg, "error")))
                        return;
                x->status = 400;
                (void) exchange_add(x, NULL, rpc_error(NULL, RPC_INVALID_REQUEST, "A JSON-RPC message needs a method", NULL),
                                    false);
                return;
        }
        if (!json_string_is_text(method) || (id && !json_is_string(id) && !json_is_integer(id))) {
                x->status = 400;
                (void) exchange_add(x, NULL,
                                    rpc_error(NULL, RPC_INVALID_REQUEST,
                                              "method must be a string and id a string or an integer", NULL),
                                    false);
                return;
        }
        m = json_string_value(method);
        if (!id)
                return; /* a notification (initialized, cancelled, ...): nothing to answer */
        if (params && !json_is_null(params) && !json_is_object(params)) {
                (void) exchange_add(x, id, rpc_error(id, RPC_INVALID_PARAMS, "params must be an object", NULL), false);
                return;
        }

        if (streq(m, "initialize")) {
                if (x->batch)
                        (void) exchange_add(x, id,
                                            rpc_error(id, RPC_INVALID_REQUEST, "initialize must not be part of a batch", NULL),
                                            false);
                else
                        method_initialize(x, id, params);
        } else if (streq(m, "ping"))
                (void) exchange_add(x, id, rpc_result(id, json_object()), false);
        else if (streq(m, "tools/list"))
                (void) exchange_add(x, id, rpc_result(id, mcp_tools_list_json(req_daemon(x->req), x->version)), false);
        else if (streq(m, "tools/call"))
                tools_call(x, id, params);
        else
                (void) exchange_add(x, id, rpc_error(id, RPC_METHOD_NOT_FOUND, "Method not found", NULL), false);
}

/* Answers a POST that is not a JSON-RPC message at all: 400 with a JSON-RPC error. */
static int reply_rpc_error(Request *req, int code, const char *message) {
        return reply_json(req, 400, rpc_error(NULL, code, message, NULL));
}

int handle_mcp(Request *req) {
        _cleanup_json_ json_t *doc = NULL;
        const char *pv = req_header(req, "MCP-Protocol-Version");
        McpVersion version = MCP_VERSION_DEFAULT;
        json_error_t jerr;
        Exchange *x;
        size_t i;
        json_t *msg;

        if (check_origin_and_host(req))
                return 0;
        /* Sent by clients after initialize (2025-06-18 on); a revision we do not speak is a 400. */
        if (pv && mcp_version_from_string(pv, &version) < 0) {
                _cleanup_free_ char *m = strprintf("Unsupported MCP-Protocol-Version; this server speaks %s",
                                                   mcp_versions_list());
                return reply_rpc_error(req, RPC_INVALID_REQUEST, m ? m : "Unsupported MCP-Protocol-Version");
        }
        if (!req->body || req->body_len == 0)
                return reply_rpc_error(req, RPC_PARSE_ERROR, "Parse error: empty body");
        doc = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL | JSON_DECODE_ANY, &jerr);
        if (!doc)
                return reply_rpc_error(req, RPC_PARSE_ERROR, "Parse error: the body is not valid JSON");
        if (json_is_array(doc)) {
                /* Batches exist in revision 2025-03-26 only (added then, removed in 2025-06-18). */
                if (version != MCP_2025_03_26)
                        return reply_rpc_error(req, RPC_INVALID_REQUEST,
                                               "JSON-RPC batches are only part of protocol revision 2025-03-26");
                if (json_array_size(doc) == 0 || json_array_size(doc) > BATCH_MAX)
                        return reply_rpc_error(req, RPC_INVALID_REQUEST, "A batch holds 1 to 64 messages");
        } else if (!json_is_object(doc))
                return reply_rpc_error(req, RPC_INVALID_REQUEST, "Not a JSON-RPC 2.0 message");

        x = calloc(1, sizeof *x);
        if (!x)
                return reply_errorf(req, 503, "SANDBOX_WORKER_BUSY", "out of memory");
        x->responses = json_array();
        if (!x->responses) {
                free(x);
                return reply_errorf(req, 503, "SANDBOX_WORKER_BUSY", "out of memory");
        }
        pthread_mutex_init(&x->lock, NULL);
        x->req = req;
        x->version = version;
        x->batch = json_is_array(doc);
        x->status = 200;
        x->pending = 1;

        if (x->batch)
                json_array_foreach(doc, i, msg)
                        handle_message(x, msg);
        else
                handle_message(x, doc);

        if (exchange_done(x)) {
                exchange_reply(x);
                return 0;
        }
        return API_PARKED; /* a tool is still running: slot_done replies */
}
