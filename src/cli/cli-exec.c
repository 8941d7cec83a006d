/* SPDX-License-Identifier: MIT */
/* `sandloom exec ID [OPTIONS] [--] CMD ...`: runs a command in a sandbox and streams its output
 * live (Server-Sent Events), or prints the final record with --json. Every run has an exec_id
 * (made up when not given), so a dropped connection is re-attached to the same exec — by
 * GET .../events from the byte offsets already written, or by re-sending the identical request,
 * which the daemon answers from the running or stored exec — and the command never runs twice. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base64.h"
#include "buf.h"
#include "cli-sse.h"
#include "cli.h"
#include "fileio.h"
#include "json-util.h"
#include "parse-util.h"
#include "random-util.h"
#include "string-util.h"
#include "time-util.h"

#define SSE_EVENT_MAX (64u * 1024u * 1024u)     /* the end record carries up to 2 x 8 MiB of output, base64 */
#define STDIN_MAX (64u * 1024u * 1024u)         /* the daemon's own limit (32 MiB by default) decides */
#define STALL_DEFAULT_MS 60000L                 /* a stream silent this long is dropped (no keep-alive period known) */
#define RECONNECT_WINDOW_MS 60000               /* give up after this long without any progress */
#define WAIT_SECONDS_MAX 30u                    /* long-poll of --json after a dropped connection */

enum {
        OPT_CWD = CLI_OPT_COMMAND,
        OPT_ENV,
        OPT_TIMEOUT,
        OPT_SCOPE,
        OPT_EXEC_ID,
        OPT_STDIN,
};

static const CliOption exec_options[] = {
        { "cwd", 'w', "DIR", OPT_CWD, "Working directory in the sandbox (default /workspace; relative = under it)." },
        { "env", 'e', "NAME=VALUE", OPT_ENV, "Set an environment variable.", true },
        { "timeout", 't', "SECONDS", OPT_TIMEOUT,
          "Kill the command after SECONDS (1-86400; default: the daemon's, 300). Exit status 124." },
        { "scope", 's', "SCOPE", OPT_SCOPE,
          "Exec scope: commands in different scopes of one sandbox run in parallel (default: the whole sandbox)." },
        { "exec-id", 0, "ID", OPT_EXEC_ID,
          "Idempotency key (default: a random cli-...). Running the same command again with the same id "
          "re-attaches to it (or prints its stored result) instead of running it twice." },
        { "stdin", 'i', "FILE", OPT_STDIN, "Give FILE (or - for this process's stdin) to the command as its stdin "
                                          "(read whole first; else the command's stdin is /dev/null)." },
        {},
};

static const CliCommand exec_cmd = {
        .name = "exec",
        .args = "ID [--] CMD [ARG...]",
        .summary = "Run a command in a sandbox, streaming its stdout and stderr live.",
        .help = "Options go before CMD; everything from CMD on (or after --) is the command, passed as argv\n"
                "(no shell: use `sh -c '...'` for one). The output is copied byte for byte to this\n"
                "process's stdout and stderr as it is produced. A dropped connection is re-attached.\n"
                "Ctrl-C (or SIGTERM, SIGHUP) cancels the command in the sandbox; a second one quits at once.\n"
                "So does a closed stdout or stderr (`sandloom exec ID -- yes | head`: exit status 141).\n"
                "With --json nothing is streamed: the final exec record is printed (exit status as below).\n"
                "\n"
                "Exit status: the command's own exit code; 128+N if a signal N killed it; 124 if it timed\n"
                "out (TIMED_OUT); 130 if it was cancelled (CANCELLED); 127/126 if the command was not\n"
                "found / not executable; 1 with a \"sandloom: CODE: ...\" line if the call itself failed\n"
                "(e.g. SANDBOX_NOT_FOUND) or the daemon stopped while it ran (WORKER_LOST); 2 on bad usage.",
        .options = exec_options,
        .min_pos = 1,
        .max_pos = 1,
        .command_follows = true,
        .streams = true,
};

typedef struct ExecRun {
        Client *c;
        const char *sandbox_id;
        char exec_id[160];
        uint64_t generation;
        uint64_t off[2];         /* bytes of stdout/stderr already written */
        bool started;            /* a start event arrived: the exec exists on the daemon */
        bool progress;           /* this attempt received an event */
        unsigned refreshes;      /* generations learnt after a daemon restart */
        int write_error;         /* writing to our stdout/stderr failed */
        json_t *end;             /* the final record */
        json_t *error;           /* the detail of an error event */
        CliSseParser parser;
} ExecRun;

/* ---- Ctrl-C: cancel the exec in the sandbox ---- */

static const int cancel_signals[] = { SIGINT, SIGTERM, SIGHUP };
static int cancel_pipe[2] = { -1, -1 };
static volatile sig_atomic_t interrupts;

static void on_interrupt(int sig) {
        int saved = errno;

        if (interrupts++ > 0)
                _exit(130);
        (void) !write(cancel_pipe[1], "x", 1);
        errno = saved;
}

/* What the cancelling thread needs, copied: it may run while run_exec() returns. The strings
 * point into argv, which lives as long as the process. */
static struct {
        CliArgs args;
        const char *sandbox_id;
        char exec_id[160];
} cancel_target;

static void *cancel_thread(void *p) {
        _cleanup_client_ Client *c = NULL;
        _cleanup_free_ char *path = NULL, *eid = NULL, *suffix = NULL;
        uint64_t generation;
        char byte;

        while (read(cancel_pipe[0], &byte, 1) < 0 && errno == EINTR)
                ;
        if (cli_connect(&cancel_target.args, 30000, &c) != 0)
                return NULL;
        /* the current generation: a daemon restart may have moved it since the exec started */
        if (cli_sandbox_generation(c, cancel_target.sandbox_id, &generation) != 0)
                return NULL;
        eid = client_escape(cancel_target.exec_id);
        suffix = eid ? strprintf("/exec/%s/cancel?generation=%" PRIu64, eid, generation) : NULL;
        path = suffix ? cli_sandbox_path(cancel_target.sandbox_id, suffix) : NULL;
        if (!path)
                return NULL;
        /* Ctrl-C right after the request went out: the exec may not exist yet. */
        for (unsigned i = 0; i < 20; i++) {
                _cleanup_json_ json_t *answer = NULL;
                char err[256];
                long status = 0;
                const char *code;

                if (client_json(c, "POST", path, NULL, &status, &answer, err, sizeof err) < 0)
                        break;
                code = client_error_code(answer);
                if (status != 404 || !code || !streq(code, "EXEC_NOT_FOUND"))
                        break;
                (void) usleep(250 * 1000);
        }
        return NULL; /* the stream then ends with the CANCELLED record */
}

static int arm_cancel(const CliArgs *a, const ExecRun *x) {
        struct sigaction sa = { .sa_handler = on_interrupt };
        pthread_attr_t attr;
        pthread_t t;
        int r;

        cancel_target.args = (CliArgs) { .cmd = a->cmd, .url = a->url, .token = a->token,
                                         .token_file = a->token_file, .data_dir = a->data_dir };
        cancel_target.sandbox_id = x->sandbox_id;
        (void) strscpy(cancel_target.exec_id, sizeof cancel_target.exec_id, x->exec_id);
        if (pipe2(cancel_pipe, O_CLOEXEC) < 0)
                return -errno;
        if (pthread_attr_init(&attr) != 0)
                return -ENOMEM;
        (void) pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        r = pthread_create(&t, &attr, cancel_thread, NULL);
        (void) pthread_attr_destroy(&attr);
        if (r != 0)
                return -r;
        sigemptyset(&sa.sa_mask);
        for (size_t i = 0; i < ELEMENTSOF(cancel_signals); i++) {
                struct sigaction old;

                /* An ignored signal stays ignored: `nohup`, or a background job of a shell. */
                if (sigaction(cancel_signals[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
                        continue;
                (void) sigaction(cancel_signals[i], &sa, NULL);
        }
        return 0;
}

/* ---- the request ---- */

static int read_stdin_file(const char *path, void **ret, size_t *ret_size) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_(buf_free) Buf b = BUF_INIT(STDIN_MAX);
        int in = STDIN_FILENO, r;

        if (!streq(path, "-")) {
                fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
                if (fd < 0)
                        return -errno;
                in = fd;
        }
        for (;;) {
                char chunk[65536];
                ssize_t n = loop_read(in, chunk, sizeof chunk);

                if (n <= 0) {
                        if (n < 0)
                                return (int) n;
                        break;
                }
                r = buf_append(&b, chunk, (size_t) n); /* -EFBIG past STDIN_MAX */
                if (r < 0)
                        return r;
        }
        r = buf_reserve(&b, 0); /* empty input: an empty buffer, not NULL */
        if (r < 0)
                return r;
        *ret_size = b.size;
        *ret = buf_steal(&b);
        return 0;
}

/* The POST body. Returns 0, or an exit status after printing why. */
static int build_body(const CliArgs *a, const ExecRun *x, bool stream, json_t **ret) {
        _cleanup_json_ json_t *body = NULL, *argv = json_array(), *env = json_object();
        const char *v;

        if (!argv || !env)
                return cli_error(CLI_LOCAL_FILE, "out of memory");
        for (unsigned i = 0; i < a->n_rest; i++)
                if (json_array_append_new(argv, json_string(a->rest[i])) < 0)
                        return cli_usage_error(a, "argument %u is not valid UTF-8", i + 1);
        for (unsigned i = 0; i < a->n_values; i++) {
                const char *kv = a->values[i].value, *eq;
                _cleanup_free_ char *name = NULL;

                if (a->values[i].id != OPT_ENV)
                        continue;
                eq = strchr(kv, '=');
                if (!eq || eq == kv)
                        return cli_usage_error(a, "--env wants NAME=VALUE");
                name = strndup(kv, (size_t) (eq - kv));
                if (!name)
                        return cli_error(CLI_LOCAL_FILE, "out of memory");
                if (json_object_set_new(env, name, json_string(eq + 1)) < 0)
                        return cli_usage_error(a, "--env %s: not valid UTF-8", name);
        }
        body = json_pack("{s:s, s:I, s:O, s:O}", "exec_id", x->exec_id, "generation", (json_int_t) x->generation,
                         "argv", argv, "env", env);
        if (!body)
                return cli_error(CLI_LOCAL_FILE, "out of memory");
        if ((v = cli_value(a, OPT_CWD)) && json_object_set_new(body, "cwd", json_string(v)) < 0)
                return cli_usage_error(a, "--cwd is not valid UTF-8");
        if ((v = cli_value(a, OPT_SCOPE)) && json_object_set_new(body, "exec_scope", json_string(v)) < 0)
                return cli_usage_error(a, "--scope is not valid UTF-8");
        if ((v = cli_value(a, OPT_TIMEOUT))) {
                uint64_t t;
                if (parse_u64(v, &t) < 0 || t < 1 || t > 86400)
                        return cli_usage_error(a, "--timeout wants whole seconds from 1 to 86400");
                (void) json_object_set_new(body, "timeout_seconds", json_integer((json_int_t) t));
        }
        if ((v = cli_value(a, OPT_STDIN))) {
                _cleanup_free_ void *data = NULL;
                _cleanup_free_ char *enc = NULL;
                size_t size = 0, enc_len;
                int r = read_stdin_file(v, &data, &size);

                if (r < 0)
                        return cli_error(CLI_LOCAL_FILE, "--stdin %s: %s", v,
                                         r == -EFBIG ? "larger than 64 MiB" : strerror(-r));
                if (base64_encode(data, size, &enc, &enc_len) < 0 ||
                    json_object_set_new(body, "stdin_base64", json_stringn(enc, enc_len)) < 0)
                        return cli_error(CLI_LOCAL_FILE, "out of memory");
        }
        if (stream)
                (void) json_object_set_new(body, "output_encoding", json_string("base64"));
        *ret = TAKE_PTR(body);
        return 0;
}

/* ---- the result ---- */

static int exit_status(const ExecRun *x, const json_t *rec) {
        const char *status = json_string_value(json_object_get(rec, "status"));
        json_t *code = json_object_get(rec, "exit_code"), *sig = json_object_get(rec, "signal");

        if (json_is_true(json_object_get(rec, "truncated")))
                fprintf(stderr, "sandloom: warning: the output was truncated at the daemon's cap "
                                "(SANDBOX_MAX_OUTPUT_BYTES); the rest was dropped\n");
        if (!status)
                return cli_error(CLI_BAD_RESPONSE, "the exec record has no status");
        if (streq(status, "SUCCEEDED"))
                return 0;
        if (streq(status, "TIMED_OUT"))
                return 124;
        if (streq(status, "CANCELLED"))
                return 130;
        if (streq(status, "WORKER_LOST"))
                return cli_error("WORKER_LOST", "the daemon stopped while exec %s ran; its result is unknown",
                                 x->exec_id);
        if (streq(status, "RUNNING"))
                return cli_error(CLI_STREAM_LOST, "exec %s is still running", x->exec_id);
        if (json_is_integer(code) && json_integer_value(code) >= 0 && json_integer_value(code) <= 255)
                return (int) json_integer_value(code);
        if (json_is_integer(sig) && json_integer_value(sig) > 0 && json_integer_value(sig) < 128)
                return 128 + (int) json_integer_value(sig);
        return 1;
}

/* ---- streaming ---- */

static int write_chunk(ExecRun *x, int s, const json_t *ev) {
        _cleanup_free_ void *bytes = NULL;
        const char *b64 = json_string_value(json_object_get(ev, "data_base64"));
        const char *text = json_string_value(json_object_get(ev, "data"));
        json_t *o = json_object_get(ev, "offset");
        const char *p;
        uint64_t off, skip;
        size_t n;
        int r;

        if (!json_is_integer(o) || json_integer_value(o) < 0)
                return -EBADMSG;
        off = (uint64_t) json_integer_value(o);
        if (b64) {
                r = base64_decode(b64, strlen(b64), SSE_EVENT_MAX, &bytes, &n);
                if (r < 0)
                        return -EBADMSG;
                p = bytes;
        } else if (text) {
                p = text;
                n = json_string_length(json_object_get(ev, "data"));
        } else
                return -EBADMSG;
        /* After a reconnect the daemon may resend what we already wrote: write each byte once. */
        if (off + n <= x->off[s])
                return 0;
        skip = x->off[s] > off ? x->off[s] - off : 0;
        r = loop_write(s == 0 ? STDOUT_FILENO : STDERR_FILENO, p + skip, n - skip);
        if (r < 0)
                return x->write_error = r;
        x->off[s] = off + n;
        return 0;
}

static int on_event(const char *event, const char *data, size_t size, void *userdata) {
        _cleanup_json_ json_t *ev = NULL;
        ExecRun *x = userdata;

        ev = json_loadb(data, size, 0, NULL);
        if (!json_is_object(ev))
                return -EBADMSG;
        x->progress = true;
        if (streq(event, "start"))
                x->started = true;
        else if (streq(event, "stdout"))
                return write_chunk(x, 0, ev);
        else if (streq(event, "stderr"))
                return write_chunk(x, 1, ev);
        else if (streq(event, "end")) {
                x->started = true;
                json_decref(x->end);
                x->end = TAKE_PTR(ev);
        } else if (streq(event, "error")) {
                json_decref(x->error);
                x->error = TAKE_PTR(ev);
        }
        return 0;
}

static int sse_sink(const char *data, size_t size, void *userdata) {
        ExecRun *x = userdata;

        if (x->end || x->error)
                return 0; /* anything after the final event is ignored */
        return cli_sse_feed(&x->parser, data, size);
}

static void cancel_now(ExecRun *x) {
        _cleanup_free_ char *eid = client_escape(x->exec_id), *suffix = NULL, *path = NULL;
        _cleanup_json_ json_t *answer = NULL;
        char err[256];
        long status;

        suffix = eid ? strprintf("/exec/%s/cancel?generation=%" PRIu64, eid, x->generation) : NULL;
        path = suffix ? cli_sandbox_path(x->sandbox_id, suffix) : NULL;
        if (path)
                (void) client_json(x->c, "POST", path, NULL, &status, &answer, err, sizeof err);
}

static void pause_ms(unsigned ms) {
        struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long) (ms % 1000) * 1000000L };

        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

/* An answer that does not end a re-attach: a daemon that restarted meanwhile has moved the
 * sandbox to a new generation (same lifecycle, so the exec is still there: learn the generation
 * and ask again), or is still stopping. Returns true to try again. */
static bool retry_after(ExecRun *x, json_t *body, bool reattaching, long status, const json_t *answer) {
        const char *code = client_error_code(answer);
        _cleanup_json_ json_t *rec = NULL;
        _cleanup_free_ char *path = NULL;
        char err[256];
        long st = 0;
        json_t *g;

        if (!code || !reattaching)
                return false;
        if (status == 503 && streq(code, "SANDBOX_SHUTTING_DOWN"))
                return true;
        if (status != 409 || !streq(code, "STALE_SANDBOX_GENERATION") || x->refreshes >= 3)
                return false;
        x->refreshes++;
        path = cli_sandbox_path(x->sandbox_id, "");
        if (!path || client_json(x->c, "GET", path, NULL, &st, &rec, err, sizeof err) < 0 || st != 200)
                return false;
        g = json_object_get(rec, "generation");
        if (!json_is_integer(g) || (uint64_t) json_integer_value(g) == x->generation)
                return false;
        x->generation = (uint64_t) json_integer_value(g);
        (void) json_object_set_new(body, "generation", json_integer((json_int_t) x->generation));
        return true;
}

static int stream(ExecRun *x, json_t *body) {
        _cleanup_free_ char *post_path = cli_sandbox_path(x->sandbox_id, "/exec"), *eid = client_escape(x->exec_id);
        uint64_t last_progress = now_monotonic_usec() / 1000;
        unsigned backoff = 100;
        bool dropped = false;
        char err[1024];

        if (!post_path || !eid)
                return cli_error(CLI_LOCAL_FILE, "out of memory");
        for (;;) {
                _cleanup_free_ char *events_path = NULL, *suffix = NULL, *body_text = NULL;
                ClientResponse resp = {};
                ClientRequest req = {
                        .accept = "text/event-stream",
                        .sink = sse_sink,
                        .userdata = x,
                        .timeout_ms = -1,
                        /* Silent for 3 keep-alive periods (60 s if the daemon names none): dropped. */
                        .stall_ms = STALL_DEFAULT_MS,
                        .stall_header = "X-Sandloom-Keepalive-Seconds",
                };
                int r;

                if (x->started) {
                        suffix = strprintf("/exec/%s/events?generation=%" PRIu64 "&stdout_offset=%" PRIu64
                                           "&stderr_offset=%" PRIu64 "&output_encoding=base64",
                                           eid, x->generation, x->off[0], x->off[1]);
                        events_path = suffix ? cli_sandbox_path(x->sandbox_id, suffix) : NULL;
                        if (!events_path)
                                return cli_error(CLI_LOCAL_FILE, "out of memory");
                        req.method = "GET";
                        req.path = events_path;
                } else {
                        /* Not known to exist yet: the identical request creates it or attaches to it. */
                        body_text = json_dumps(body, JSON_COMPACT);
                        if (!body_text)
                                return cli_error(CLI_LOCAL_FILE, "out of memory");
                        req.method = "POST";
                        req.path = post_path;
                        req.content_type = "application/json";
                        req.body = body_text;
                        req.body_size = strlen(body_text);
                }
                cli_sse_done(&x->parser);
                cli_sse_init(&x->parser, SSE_EVENT_MAX, on_event, x);
                x->progress = false;
                err[0] = '\0';
                r = client_perform(x->c, &req, &resp, err, sizeof err);
                if (x->write_error < 0) {
                        /* Our stdout or stderr is gone (`... | head`): stop the command too, as a
                         * local pipeline would, instead of leaving it running for its timeout. */
                        client_response_done(&resp);
                        cancel_now(x);
                        if (x->write_error == -EPIPE)
                                return 128 + SIGPIPE;
                        return cli_error(CLI_LOCAL_FILE, "writing the command's output: %s", strerror(-x->write_error));
                }
                if (r == -EBADMSG || r == -E2BIG || r == -ENOMEM) {
                        client_response_done(&resp);
                        return cli_error(r == -ENOMEM ? CLI_LOCAL_FILE : CLI_BAD_RESPONSE, "%s",
                                         r == -ENOMEM ? "out of memory" : "the daemon sent a malformed event stream");
                }
                if (r >= 0 && (resp.status < 200 || resp.status >= 300)) {
                        _cleanup_json_ json_t *j = json_loadb(resp.body, resp.size, 0, NULL);
                        long status = resp.status;

                        client_response_done(&resp);
                        if (!retry_after(x, body, x->started || dropped, status, j))
                                return cli_http_error(status, j);
                        r = -EAGAIN;
                        (void) bsprintf(err, sizeof err, "%s", client_error_code(j));
                }
                if (r >= 0 && !x->end && !x->error && resp.content_type &&
                    !startswith(resp.content_type, "text/event-stream")) {
                        client_response_done(&resp);
                        return cli_error(CLI_BAD_RESPONSE, "the daemon does not stream events (it answered %s)",
                                         resp.content_type);
                }
                client_response_done(&resp);
                if (x->error)
                        return cli_http_error(0, x->error); /* the exec could not start */
                if (x->end)
                        return 0;
                /* No answer, or the stream ended before the end event: re-attach. */
                dropped = true;
                if (x->progress) {
                        last_progress = now_monotonic_usec() / 1000;
                        backoff = 100;
                }
                if (now_monotonic_usec() / 1000 - last_progress > RECONNECT_WINDOW_MS)
                        return cli_error(CLI_STREAM_LOST,
                                         "lost the connection to the daemon (%s); exec %s may still run: run the "
                                         "same command with --exec-id %s to re-attach",
                                         r < 0 ? err : "the stream ended early", x->exec_id, x->exec_id);
                pause_ms(backoff);
                backoff = MIN(backoff * 2, 2000u);
        }
}

/* --json: the foreground call answers with the final record; after a dropped connection the
 * record is long-polled (or the request re-sent if the daemon never saw it). */
static int wait_json(ExecRun *x, json_t *body, json_t **ret) {
        _cleanup_free_ char *post_path = cli_sandbox_path(x->sandbox_id, "/exec"), *eid = client_escape(x->exec_id);
        uint64_t last_progress = now_monotonic_usec() / 1000;
        unsigned backoff = 100, wait = WAIT_SECONDS_MAX;
        bool post = true, dropped = false;

        if (!post_path || !eid)
                return cli_error(CLI_LOCAL_FILE, "out of memory");
        for (;;) {
                _cleanup_free_ char *path = NULL, *suffix = NULL;
                _cleanup_json_ json_t *answer = NULL;
                char err[1024] = "";
                long status = 0;
                const char *st;
                int r;

                if (post)
                        r = client_json(x->c, "POST", post_path, body, &status, &answer, err, sizeof err);
                else {
                        suffix = strprintf("/exec/%s?generation=%" PRIu64 "&wait_seconds=%u", eid, x->generation,
                                           wait);
                        path = suffix ? cli_sandbox_path(x->sandbox_id, suffix) : NULL;
                        if (!path)
                                return cli_error(CLI_LOCAL_FILE, "out of memory");
                        r = client_json(x->c, "GET", path, NULL, &status, &answer, err, sizeof err);
                }
                if (r >= 0) {
                        const char *code = client_error_code(answer);

                        if (status == 404 && !post && code && streq(code, "EXEC_NOT_FOUND")) {
                                post = true; /* the first request never arrived */
                                continue;
                        }
                        if ((status < 200 || status >= 300) && retry_after(x, body, dropped, status, answer)) {
                                pause_ms(backoff);
                                backoff = MIN(backoff * 2, 2000u);
                                continue;
                        }
                        if (status < 200 || status >= 300)
                                return cli_http_error(status, answer);
                        st = json_string_value(json_object_get(answer, "status"));
                        if (!st)
                                return cli_error(CLI_BAD_RESPONSE, "the exec record has no status");
                        if (!streq(st, "RUNNING")) {
                                *ret = TAKE_PTR(answer);
                                return 0;
                        }
                        post = false;
                        last_progress = now_monotonic_usec() / 1000;
                        backoff = 100;
                        continue;
                }
                if (r == -ENOMEM)
                        return cli_request_error(r, err);
                /* A long-poll cut by the daemon's (or a proxy's) idle timeout: poll shorter. */
                if (!post)
                        wait = MAX(wait / 2, 1u);
                post = false;
                dropped = true;
                if (now_monotonic_usec() / 1000 - last_progress > RECONNECT_WINDOW_MS)
                        return cli_error(CLI_STREAM_LOST,
                                         "lost the connection to the daemon (%s); exec %s may still run: run the "
                                         "same command with --exec-id %s to re-attach", err, x->exec_id, x->exec_id);
                pause_ms(backoff);
                backoff = MIN(backoff * 2, 2000u);
        }
}

static int run_exec(CliArgs *a, Client *c) {
        _cleanup_json_ json_t *body = NULL, *rec = NULL;
        ExecRun x = { .c = c, .sandbox_id = a->pos[0] };
        const char *given = cli_value(a, OPT_EXEC_ID);
        int r;

        if (given) {
                if (strscpy(x.exec_id, sizeof x.exec_id, given) < 0)
                        return cli_usage_error(a, "--exec-id is too long");
        } else {
                char hex[17];
                if (random_hex(hex, sizeof hex, 8) < 0)
                        return cli_error(CLI_LOCAL_FILE, "no randomness for an exec id");
                (void) bsprintf(x.exec_id, sizeof x.exec_id, "cli-%s", hex);
        }
        r = build_body(a, &x, !a->json, &body);
        if (r != 0)
                return r;
        r = cli_sandbox_generation(c, x.sandbox_id, &x.generation);
        if (r != 0)
                return r;
        (void) json_object_set_new(body, "generation", json_integer((json_int_t) x.generation));
        if (arm_cancel(a, &x) < 0)
                return cli_error(CLI_LOCAL_FILE, "cannot set up Ctrl-C handling");

        if (a->json) {
                r = wait_json(&x, body, &rec);
                if (r != 0)
                        return r;
                r = cli_print_json(rec);
                return r != 0 ? r : exit_status(&x, rec);
        }
        (void) signal(SIGPIPE, SIG_IGN); /* a closed stdout is an EPIPE to handle, see stream() */
        r = stream(&x, body);
        cli_sse_done(&x.parser);
        if (r == 0)
                r = exit_status(&x, x.end);
        json_decref(x.end);
        json_decref(x.error);
        return r;
}

int cli_exec_main(int argc, char **argv) {
        return cli_run(&exec_cmd, run_exec, argc, argv);
}
