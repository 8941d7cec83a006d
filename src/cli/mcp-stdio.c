/* SPDX-License-Identifier: MIT */
/* `sandloom mcp`: the MCP stdio transport, as a bridge. Reads JSON-RPC messages, one per
 * line, on stdin; POSTs each to the daemon's /mcp (streamable HTTP, through the shared
 * client); writes the answers, one per line, on stdout. Nothing but JSON-RPC goes to stdout;
 * messages for people go to stderr. A few workers forward in parallel, so a ping or a second
 * tool call is not stuck behind a long sandbox_exec. The daemon is stateless, so the bridge
 * keeps the one piece of session state there is: the protocol revision negotiated by
 * initialize, sent as MCP-Protocol-Version from then on. Exits 0 at the end of stdin, once
 * the requests in flight are answered. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "client.h"
#include "fileio.h"
#include "json-util.h"
#include "macros.h"
#include "mcp-stdio.h"
#include "string-util.h"

#define WORKERS 4
#define QUEUE_MAX 64
/* A message larger than the daemon accepts (SANDBOX_MAX_FILE_API_BYTES + 1 MiB, 33 MiB by
 * default) is answered by it with 413; past this the bridge does not even buffer the line. */
#define LINE_MAX_BYTES (256u * 1024u * 1024u)
#define READ_CHUNK (64u * 1024u)
/* An answer carries its record twice (text and structuredContent): reading a file at the
 * files-API limit (32 MiB, base64 and text) makes an answer of some 150 MB. */
#define ANSWER_MAX_BYTES (1024u * 1024u * 1024u)
#define RPC_PARSE_ERROR (-32700)
#define RPC_SERVER_ERROR (-32000)   /* "implementation-defined server error": the daemon is unreachable or refused */

typedef struct Line {
        char *data;
        size_t len;
        json_t *msg;                        /* parsed; NULL: not JSON */
        bool initialize;                    /* an initialize request: later lines wait for its answer */
        struct Line *next;
} Line;

typedef struct Bridge {
        ClientOptions opts;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        Line *head, *tail;
        unsigned queued;
        bool eof;
        unsigned initializing;              /* initialize requests in flight */
        bool stdout_broken;
        char protocol_version[32];          /* negotiated by initialize; "" before */
        pthread_mutex_t out_lock;
} Bridge;

static void usage(FILE *f) {
        fprintf(f,
                "Usage: sandloom mcp [--url URL] [--token TOKEN] [--data-dir DIR]\n\n"
                "Serves MCP over stdio (JSON-RPC, one message per line) by bridging to a sandloom daemon's\n"
                "streamable HTTP endpoint (URL/mcp). Register it in an MCP client as a stdio server; see\n"
                "docs/MCP.md. Only JSON-RPC is written to stdout; diagnostics go to stderr.\n\n"
                "Options:\n"
                "  --url URL        the daemon (default: $SANDBOX_BASE_URL, else DIR/endpoint, else\n"
                "                   http://127.0.0.1:8080)\n"
                "  --token TOKEN    the API token (default: $SANDBOX_INTERNAL_TOKEN, the file named by\n"
                "                   $SANDBOX_INTERNAL_TOKEN_FILE, else DIR/token)\n"
                "  --data-dir DIR   a local daemon's data directory (default: $SANDBOX_DATA_DIR, else ./data)\n"
                "  -h, --help       show this help\n");
}

static void note(const char *fmt, ...) _printf_(1, 2);
static void note(const char *fmt, ...) {
        va_list ap;

        flockfile(stderr); /* one line per note, whichever worker writes it */
        fputs("sandloom mcp: ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        funlockfile(stderr);
}

/* --- output --- */

/* Writes MSG (stolen) as one line. JSON_COMPACT escapes control characters inside strings,
 * so the line holds exactly one message. */
static void emit(Bridge *b, json_t *msg) {
        _cleanup_json_ json_t *m = msg;
        _cleanup_free_ char *text = NULL, *line = NULL;

        if (!m)
                return;
        text = json_dumps(m, JSON_COMPACT);
        line = text ? strprintf("%s\n", text) : NULL;
        if (!line) {
                note("out of memory writing a response");
                return;
        }
        pthread_mutex_lock(&b->out_lock);
        if (!b->stdout_broken && loop_write(STDOUT_FILENO, line, strlen(line)) < 0) {
                b->stdout_broken = true;
                note("cannot write to stdout; stopping");
        }
        pthread_mutex_unlock(&b->out_lock);
}

static json_t *rpc_error(json_t *id, int code, const char *message, json_t *data) {
        json_t *err = json_pack("{s:i, s:s}", "code", code, "message", message);

        if (err && data)
                (void) json_object_set_new(err, "data", data);
        else
                json_decref(data);
        if (!err)
                return NULL;
        return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(), "error", err);
}

/* The ids of the requests in MSG (a message or a batch): each gets an answer even when the
 * daemon cannot give one. */
static json_t *request_ids(json_t *msg) {
        json_t *ids = json_array(), *m;
        size_t i;

        if (!ids)
                return NULL;
        if (json_is_object(msg)) {
                if (json_object_get(msg, "method") && json_object_get(msg, "id"))
                        (void) json_array_append(ids, json_object_get(msg, "id"));
        } else if (json_is_array(msg))
                json_array_foreach(msg, i, m)
                        if (json_is_object(m) && json_object_get(m, "method") && json_object_get(m, "id"))
                                (void) json_array_append(ids, json_object_get(m, "id"));
        return ids;
}

static void fail_requests(Bridge *b, json_t *ids, const char *message, long status, const char *code) {
        json_t *id;
        size_t i;

        if (json_array_size(ids) == 0)
                note("%s", message); /* only notifications: nobody to tell but the log */
        json_array_foreach(ids, i, id) {
                json_t *data = status ? json_pack("{s:I, s:s?}", "http_status", (json_int_t) status, "code", code)
                                      : NULL;
                emit(b, rpc_error(id, RPC_SERVER_ERROR, message, data));
        }
}

/* The id of MSG when it is an initialize request, else NULL (borrowed). */
static json_t *initialize_id(json_t *msg) {
        json_t *method = json_is_object(msg) ? json_object_get(msg, "method") : NULL;

        if (json_is_string(method) && streq(json_string_value(method), "initialize"))
                return json_object_get(msg, "id");
        return NULL;
}

static void learn_version(Bridge *b, json_t *init_id, json_t *answer) {
        const char *v;

        if (!init_id || !json_is_object(answer) || !json_equal(json_object_get(answer, "id"), init_id))
                return;
        v = json_string_value(json_object_get(json_object_get(answer, "result"), "protocolVersion"));
        if (!v || strlen(v) >= sizeof b->protocol_version || strspn(v, "0123456789-") != strlen(v))
                return;
        pthread_mutex_lock(&b->lock);
        (void) strscpy(b->protocol_version, sizeof b->protocol_version, v);
        pthread_mutex_unlock(&b->lock);
}

/* --- forwarding one message --- */

/* Collects a 2xx answer into a Buf (the shared client's own buffer stops at CLIENT_MAX_RESPONSE_BYTES). */
static int body_sink(const char *data, size_t size, void *userdata) {
        return buf_append(userdata, data, size);
}

static void forward(Bridge *b, Client *c, const Line *l) {
        _cleanup_json_ json_t *ids = NULL, *answer = NULL;
        char err[512] = "", header[64] = "", line[512];
        const char *headers[2] = { NULL, NULL };
        json_t *msg = l->msg;
        _cleanup_(buf_free) Buf body = BUF_INIT(ANSWER_MAX_BYTES);
        ClientResponse resp = {};
        int r;

        if (!msg) {
                emit(b, rpc_error(NULL, RPC_PARSE_ERROR, "Parse error: the line is not valid JSON", NULL));
                return;
        }
        ids = request_ids(msg);
        pthread_mutex_lock(&b->lock);
        if (b->protocol_version[0])
                (void) bsprintf(header, sizeof header, "MCP-Protocol-Version: %s", b->protocol_version);
        pthread_mutex_unlock(&b->lock);
        if (header[0])
                headers[0] = header;

        r = client_perform(c,
                           &(ClientRequest) {
                                   .method = "POST",
                                   .path = "/mcp",
                                   .content_type = "application/json",
                                   .accept = "application/json, text/event-stream",
                                   .body = l->data,
                                   .body_size = l->len,
                                   .headers = headers,
                                   .sink = body_sink,
                                   .userdata = &body,
                           },
                           &resp, err, sizeof err);
        if (r == -EFBIG || r == -ENOMEM) {
                fail_requests(b, ids, r == -EFBIG ? "the daemon's answer is larger than the bridge accepts (1 GiB)"
                                                  : "out of memory reading the daemon's answer", 0, NULL);
                return;
        }
        if (r < 0) {
                _cleanup_free_ char *m = strprintf("sandloom daemon unreachable: %s", err[0] ? err : strerror(-r));
                fail_requests(b, ids, m ? m : "sandloom daemon unreachable", 0, NULL);
                return;
        }
        if (resp.status == 202) {
                client_response_done(&resp);
                return;
        }
        /* A 2xx answer went to the sink; any other is in resp.body. */
        if (body.size > 0)
                answer = json_loadb(body.data, body.size, JSON_ALLOW_NUL, NULL);
        else if (resp.size > 0)
                answer = json_loadb(resp.body, resp.size, JSON_ALLOW_NUL, NULL);
        /* A JSON-RPC answer (also a 400 carrying a JSON-RPC error) goes out as it is. */
        if ((json_is_object(answer) && json_object_get(answer, "jsonrpc")) || json_is_array(answer)) {
                learn_version(b, initialize_id(msg), answer);
                emit(b, TAKE_PTR(answer));
        } else {
                /* The HTTP layer refused (401 token, 403 host, 413 size, 503 stopping, ...). */
                const char *code = client_error_code(answer);

                fail_requests(b, ids, client_error_line(resp.status, answer, line, sizeof line), resp.status, code);
        }
        client_response_done(&resp);
}

/* --- the queue --- */

static void *worker(void *arg) {
        Bridge *b = arg;
        _cleanup_client_ Client *c = NULL;
        char err[512];

        if (client_new(&b->opts, &c, err, sizeof err) < 0)
                note("%s", err); /* checked at start-up already; forward() is then skipped */

        for (;;) {
                Line *l;

                pthread_mutex_lock(&b->lock);
                /* What follows an initialize waits for its answer: it carries the negotiated
                 * revision (MCP-Protocol-Version) that the stateless daemon needs. */
                while (!(b->head && b->initializing == 0) && !(b->eof && !b->head))
                        pthread_cond_wait(&b->cond, &b->lock);
                l = b->head;
                if (l) {
                        b->head = l->next;
                        if (!b->head)
                                b->tail = NULL;
                        b->queued--;
                        if (l->initialize)
                                b->initializing++;
                        pthread_cond_broadcast(&b->cond);
                }
                pthread_mutex_unlock(&b->lock);
                if (!l)
                        return NULL; /* end of input and nothing left */
                if (c)
                        forward(b, c, l);
                else {
                        /* Every request still gets an answer: a client waits for each id. */
                        _cleanup_json_ json_t *ids = request_ids(l->msg);

                        fail_requests(b, ids, "cannot set up the connection to the daemon", 0, NULL);
                }
                if (l->initialize) {
                        pthread_mutex_lock(&b->lock);
                        b->initializing--;
                        pthread_cond_broadcast(&b->cond);
                        pthread_mutex_unlock(&b->lock);
                }
                json_decref(l->msg);
                free(l->data);
                free(l);
        }
}

static int enqueue(Bridge *b, char *data, size_t len) {
        Line *l = calloc(1, sizeof *l);

        if (!l)
                return -ENOMEM;
        *l = (Line) { .data = data, .len = len };
        l->msg = json_loadb(data, len, JSON_ALLOW_NUL | JSON_DECODE_ANY, NULL);
        l->initialize = initialize_id(l->msg) != NULL;
        pthread_mutex_lock(&b->lock);
        while (b->queued >= QUEUE_MAX)
                pthread_cond_wait(&b->cond, &b->lock);
        if (b->tail)
                b->tail->next = l;
        else
                b->head = l;
        b->tail = l;
        b->queued++;
        pthread_cond_broadcast(&b->cond);
        pthread_mutex_unlock(&b->lock);
        return 0;
}

static bool blank(const char *s, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (!strchr(" \t\r", s[i]))
                        return false;
        return true;
}

/* Reads stdin to its end, queueing each non-blank line. */
static int read_input(Bridge *b) {
        _cleanup_free_ char *buf = NULL;
        size_t len = 0, cap = 0;
        bool skipping = false;   /* inside an over-long line: dropped up to its newline */

        for (;;) {
                char *nl;
                ssize_t n;

                if (cap - len < READ_CHUNK) {
                        size_t ncap = MAX(cap * 2, len + READ_CHUNK);
                        char *nb = realloc(buf, ncap);
                        if (!nb)
                                return -ENOMEM;
                        buf = nb;
                        cap = ncap;
                }
                n = read(STDIN_FILENO, buf + len, cap - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        break;
                len += (size_t) n;

                while ((nl = memchr(buf, '\n', len))) {
                        size_t ll = (size_t) (nl - buf);

                        if (!skipping && !blank(buf, ll)) {
                                char *copy = malloc(ll + 1);
                                if (!copy)
                                        return -ENOMEM;
                                memcpy(copy, buf, ll);
                                copy[ll] = '\0';
                                if (enqueue(b, copy, ll) < 0) {
                                        free(copy);
                                        return -ENOMEM;
                                }
                        }
                        skipping = false;
                        memmove(buf, nl + 1, len - ll - 1);
                        len -= ll + 1;
                }
                if (len > LINE_MAX_BYTES) {
                        if (!skipping)
                                emit(b, rpc_error(NULL, RPC_PARSE_ERROR, "Parse error: message too large", NULL));
                        skipping = true;
                        len = 0;
                }
        }
        if (len > 0 && !skipping && !blank(buf, len)) {
                char *copy = strndup(buf, len);
                if (!copy || enqueue(b, copy, len) < 0) {
                        free(copy);
                        return -ENOMEM;
                }
        }
        return 0;
}

int mcp_stdio_main(int argc, char **argv) {
        Bridge b = {};
        _cleanup_client_ Client *probe = NULL;
        pthread_t threads[WORKERS];
        unsigned started = 0;
        char err[512];
        int r;

        for (int i = 0; i < argc; i++) {
                const char *a = argv[i], **target = NULL, *value;
                size_t flen;

                if (streq(a, "-h") || streq(a, "--help")) {
                        usage(stdout);
                        return 0;
                }
                if (startswith(a, "--url"))
                        target = &b.opts.url, flen = strlen("--url");
                else if (startswith(a, "--token"))
                        target = &b.opts.token, flen = strlen("--token");
                else if (startswith(a, "--data-dir"))
                        target = &b.opts.data_dir, flen = strlen("--data-dir");
                else
                        flen = 0;
                if (!target || (a[flen] != '\0' && a[flen] != '=')) {
                        /* Up to '=' only: a mistyped --token=... must not print the token. */
                        note("unknown argument '%.*s'; see --help", (int) MIN(strcspn(a, "="), (size_t) 64), a);
                        return 2;
                }
                if (a[flen] == '=')
                        value = a + flen + 1;
                else if (i + 1 < argc)
                        value = argv[++i];
                else {
                        note("%s needs a value", a);
                        return 2;
                }
                *target = value;
        }

        /* Resolve the URL and token once, so that a missing token is said at start-up. */
        r = client_new(&b.opts, &probe, err, sizeof err);
        if (r < 0) {
                note("%s", err);
                return 1;
        }
        note("bridging stdio to %s/mcp", client_base_url(probe));
        probe = client_free(probe);

        (void) signal(SIGPIPE, SIG_IGN);
        pthread_mutex_init(&b.lock, NULL);
        pthread_mutex_init(&b.out_lock, NULL);
        pthread_cond_init(&b.cond, NULL);
        for (; started < WORKERS; started++)
                if (pthread_create(&threads[started], NULL, worker, &b) != 0)
                        break;
        if (started == 0) {
                note("cannot start a thread");
                return 1;
        }

        r = read_input(&b);
        if (r < 0)
                note("reading stdin: %s", strerror(-r));

        pthread_mutex_lock(&b.lock);
        b.eof = true;
        pthread_cond_broadcast(&b.cond);
        pthread_mutex_unlock(&b.lock);
        for (unsigned i = 0; i < started; i++)
                (void) pthread_join(threads[i], NULL);

        pthread_cond_destroy(&b.cond);
        pthread_mutex_destroy(&b.out_lock);
        pthread_mutex_destroy(&b.lock);
        return r < 0 ? 1 : 0;
}
