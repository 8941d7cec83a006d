/* SPDX-License-Identifier: MIT */
/* `sandloom bench`: options, help, the daemon's identity, output (a table or one JSON object) and the
 * progress line. The measuring is in bench-run.c and bench-baseline.c. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "json-util.h"
#include "parse-util.h"
#include "random-util.h"
#include "string-util.h"

#define PROGRESS_EVERY_USEC (200 * USEC_PER_MSEC)
#define MASK(k) (1u << (k))
#define ALL_DAEMON (MASK(BENCH_SERIAL) | MASK(BENCH_LOAD) | MASK(BENCH_CREATE) | MASK(BENCH_IDLE) | MASK(BENCH_MEMORY))
#define ALL (ALL_DAEMON | MASK(BENCH_BASELINE))

static const struct {
        const char *name;
        const char *summary;
        const char *detail;
} kinds[_BENCH_KIND_MAX] = {
        [BENCH_SERIAL] = { "serial", "N runs of /bin/true in one sandbox, one at a time: p50/p95/p99/max",
                           "Resolves and connects one sandbox, runs --warmup then -n execs of /bin/true in it one after\n"
                           "the other (POST .../exec, foreground: the reply is the final record), and reports the latency\n"
                           "end to end over HTTP and the daemon's own duration_ms. --baseline adds the bwrap floor,\n"
                           "timed in the same run, and the ratio." },
        [BENCH_LOAD] = { "load", "Sandloom's capacity test: M short commands over N sandboxes at concurrency C",
                         "Resolves and connects --sandboxes sandboxes, then runs /bin/sh -c 'printf x' (--execs of them,\n"
                         "or for --duration) with --concurrency requests in flight, spread round robin over the\n"
                         "sandboxes, each exec in its own exec_scope (--exclusive: none, each needs its whole sandbox).\n"
                         "Throughput counts execs that SUCCEEDED with stdout \"x\"; 409 (scope busy) and 429 (parallel\n"
                         "limit) are counted apart from failures. A warm-up (default one exec per sandbox) runs first." },
        [BENCH_CREATE] = { "create", "resolve + connect rate of fresh sandboxes",
                           "Creates -n fresh sandboxes (resolve, then connect: the workspace exists and is READY) with\n"
                           "--concurrency in flight and reports creations/s and their latency; then releases them\n"
                           "(not timed)." },
        [BENCH_IDLE] = { "idle", "daemon RSS and host process count before and after N idle sandboxes",
                         "Reads the daemon's VmRSS and threads and the host's process count, creates --count idle\n"
                         "sandboxes (resolve + connect, no exec), waits --settle, reads them again, then releases\n"
                         "the sandboxes. Read from /proc when the daemon is local (the process listening on the URL's\n"
                         "port, or --daemon-pid), else from the \"process\" block of its authenticated /healthz." },
        [BENCH_MEMORY] = { "memory", "daemon memory per concurrent exec",
                           "Runs one exec in each of a few sandboxes, reads the daemon's RSS (idle), then keeps\n"
                           "--concurrency foreground execs of `sleep --hold` in flight and samples the RSS while all of\n"
                           "them run; reports (peak - idle) / concurrency for the daemon and its spawner helper." },
        [BENCH_BASELINE] = { "baseline", "the floor: bwrap with the same namespaces, and a bare fork/exec of /bin/true",
                             "Times, interleaved in one run, a bare fork/exec of /bin/true, bwrap with the namespaces the\n"
                             "native runtime uses at level standard with network none (mount, IPC, UTS, PID + /proc,\n"
                             "network), and the same without the network namespace. Needs no daemon." },
};

enum {
        OPT_URL = 1000, OPT_TOKEN, OPT_DATA_DIR, OPT_JSON, OPT_PROGRESS, OPT_NO_PROGRESS, OPT_TIMEOUT, OPT_COUNT,
        OPT_WARMUP, OPT_SANDBOXES, OPT_EXECS, OPT_CONCURRENCY, OPT_DURATION, OPT_EXCLUSIVE, OPT_SETTLE, OPT_HOLD,
        OPT_KEEP, OPT_BASELINE, OPT_DAEMON_PID, OPT_SOURCE, OPT_BWRAP, OPT_SAMPLES, OPT_HELP,
};

static const struct {
        struct option opt;
        unsigned kinds;
        const char *arg, *help;
} options[] = {
        { { "url", required_argument, NULL, OPT_URL }, ALL_DAEMON, "URL",
          "the daemon (else $SANDBOX_BASE_URL, DATA_DIR/endpoint, http://127.0.0.1:8080)" },
        { { "token", required_argument, NULL, OPT_TOKEN }, ALL_DAEMON, "TOKEN",
          "the API token (else $SANDBOX_INTERNAL_TOKEN, $SANDBOX_INTERNAL_TOKEN_FILE, DATA_DIR/token)" },
        { { "data-dir", required_argument, NULL, OPT_DATA_DIR }, ALL_DAEMON, "DIR",
          "a local daemon's data directory (default $SANDBOX_DATA_DIR or ./data)" },
        { { "json", no_argument, NULL, OPT_JSON }, ALL, NULL, "print one JSON object with every figure" },
        { { "progress", no_argument, NULL, OPT_PROGRESS }, ALL, NULL, "progress line on stderr even if not a terminal" },
        { { "no-progress", no_argument, NULL, OPT_NO_PROGRESS }, ALL, NULL, "no progress line" },
        { { "timeout", required_argument, NULL, OPT_TIMEOUT }, ALL_DAEMON, "TIME", "per request (default 120s)" },
        { { "count", required_argument, NULL, OPT_COUNT },
          MASK(BENCH_SERIAL) | MASK(BENCH_CREATE) | MASK(BENCH_IDLE) | MASK(BENCH_BASELINE), "N",
          "runs / sandboxes (-n; serial 200, create 200, idle 1000, baseline 200)" },
        { { "warmup", required_argument, NULL, OPT_WARMUP }, MASK(BENCH_SERIAL) | MASK(BENCH_LOAD) | MASK(BENCH_BASELINE),
          "N", "unmeasured runs first (serial, baseline 10; load: one per sandbox)" },
        { { "sandboxes", required_argument, NULL, OPT_SANDBOXES }, MASK(BENCH_LOAD) | MASK(BENCH_MEMORY), "N",
          "sandboxes the execs are spread over (load 60; memory: concurrency/8)" },
        { { "execs", required_argument, NULL, OPT_EXECS }, MASK(BENCH_LOAD), "N", "measured execs (600)" },
        { { "concurrency", required_argument, NULL, OPT_CONCURRENCY },
          MASK(BENCH_LOAD) | MASK(BENCH_CREATE) | MASK(BENCH_IDLE) | MASK(BENCH_MEMORY), "N",
          "requests in flight (-c; load 32, create 8, idle 16, memory 32)" },
        { { "duration", required_argument, NULL, OPT_DURATION }, MASK(BENCH_LOAD), "TIME",
          "run for this long instead of --execs (e.g. 10s)" },
        { { "exclusive", no_argument, NULL, OPT_EXCLUSIVE }, MASK(BENCH_LOAD), NULL,
          "no exec_scope: each exec needs its whole sandbox" },
        { { "settle", required_argument, NULL, OPT_SETTLE }, MASK(BENCH_IDLE), "TIME",
          "wait after creating before measuring (2s)" },
        { { "hold", required_argument, NULL, OPT_HOLD }, MASK(BENCH_MEMORY), "TIME", "how long each exec runs (3s)" },
        { { "keep", no_argument, NULL, OPT_KEEP }, ALL_DAEMON, NULL, "do not release the sandboxes afterwards" },
        { { "baseline", no_argument, NULL, OPT_BASELINE }, MASK(BENCH_SERIAL), NULL,
          "also time the bwrap floor (same -n) and print the ratios" },
        { { "daemon-pid", required_argument, NULL, OPT_DAEMON_PID }, MASK(BENCH_IDLE) | MASK(BENCH_MEMORY), "PID",
          "the daemon's pid (default: the local process listening on the URL's port)" },
        { { "source", required_argument, NULL, OPT_SOURCE }, MASK(BENCH_IDLE) | MASK(BENCH_MEMORY), "FROM",
          "proc (this host's /proc), daemon (its /healthz: works remotely) or auto (default)" },
        { { "bwrap", required_argument, NULL, OPT_BWRAP }, MASK(BENCH_BASELINE) | MASK(BENCH_SERIAL), "PATH",
          "the bwrap binary (default: bwrap in $PATH)" },
        { { "samples", required_argument, NULL, OPT_SAMPLES }, MASK(BENCH_SERIAL) | MASK(BENCH_LOAD), "FILE",
          "write every measured latency (ms, ascending) to FILE, one per line" },
        { { "help", no_argument, NULL, OPT_HELP }, ALL, NULL, "this help" },
};

/* ---- help ---- */

static void usage(FILE *f) {
        fprintf(f, "Usage: sandloom bench COMMAND [OPTIONS]\n\n"
                   "Measures a sandloom deployment: latency, throughput, creation rate, idle and per-exec memory,\n"
                   "side by side with the same isolation done by bwrap. A human table by default, --json for\n"
                   "programs. The daemon is found like every client command: --url/--token, SANDBOX_BASE_URL and\n"
                   "SANDBOX_INTERNAL_TOKEN, or a local --data-dir's endpoint and token files.\n\nCommands:\n");
        for (int k = 0; k < _BENCH_KIND_MAX; k++)
                fprintf(f, "  %-9s %s\n", kinds[k].name, kinds[k].summary);
        fprintf(f, "\n`sandloom bench COMMAND --help` lists its options. Exit status: 0 when the run completed (its\n"
                   "failures are in the output), 1 when the daemon is unreachable or refuses the set-up, 2 on bad usage.\n");
}

static void usage_kind(FILE *f, BenchKind k) {
        fprintf(f, "Usage: sandloom bench %s [OPTIONS]\n\n%s\n\nOptions:\n", kinds[k].name, kinds[k].detail);
        for (size_t i = 0; i < ELEMENTSOF(options); i++) {
                char left[64];
                if (!(options[i].kinds & MASK(k)))
                        continue;
                (void) bsprintf(left, sizeof left, "--%s%s%s", options[i].opt.name, options[i].arg ? " " : "",
                                options[i].arg ? options[i].arg : "");
                fprintf(f, "  %-22s %s\n", left, options[i].help);
        }
}

/* ---- parsing ---- */

static int parse_count(const char *s, uint64_t min, uint64_t max, uint64_t *ret) {
        uint64_t v;

        if (parse_u64(s, &v) < 0 || v < min || v > max)
                return -ERANGE;
        *ret = v;
        return 0;
}

/* "10s", "500ms", "2m", "1.5" (seconds). */
static int parse_time(const char *s, usec_t *ret) {
        char num[32];
        size_t n = strspn(s, "0123456789.");
        const char *unit = s + n;
        double v, mult;

        if (n == 0 || n >= sizeof num)
                return -EINVAL;
        memcpy(num, s, n);
        num[n] = '\0';
        if (parse_double(num, &v) < 0)
                return -EINVAL;
        if (isempty(unit) || streq(unit, "s"))
                mult = 1e6;
        else if (streq(unit, "ms"))
                mult = 1e3;
        else if (streq(unit, "m") || streq(unit, "min"))
                mult = 60e6;
        else if (streq(unit, "h"))
                mult = 3600e6;
        else
                return -EINVAL;
        if (v * mult > 7.0 * 24 * 3600e6)
                return -ERANGE;
        *ret = (usec_t) (v * mult + 0.5);
        return 0;
}

static int kind_from_string(const char *s) {
        for (int k = 0; k < _BENCH_KIND_MAX; k++)
                if (streq(s, kinds[k].name))
                        return k;
        return -EINVAL;
}

typedef struct Given {
        bool count, warmup, concurrency, sandboxes, timeout, settle;
} Given;

static int fail_usage(const char *fmt, ...) _printf_(1, 2);
static int fail_usage(const char *fmt, ...) {
        va_list ap;

        fputs("sandloom bench: ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputs(" (see `sandloom bench --help`)\n", stderr);
        return 2;
}

/* Returns -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, BenchOptions *o) {
        struct option longopts[ELEMENTSOF(options) + 1];
        unsigned given_mask[ELEMENTSOF(options)] = {};
        const char *kind_name = NULL;
        bool help = false, progress_set = false;
        Given g = {};
        char **args;
        int c, nargs;
        usec_t t;

        for (size_t i = 0; i < ELEMENTSOF(options); i++)
                longopts[i] = options[i].opt;
        longopts[ELEMENTSOF(options)] = (struct option) {};

        /* getopt wants argv[0]; permutation lets options come before or after the command. */
        args = calloc((size_t) argc + 2, sizeof *args);
        if (!args)
                return 1;
        args[0] = (char *) "sandloom bench";
        for (int i = 0; i < argc; i++)
                args[i + 1] = argv[i];
        nargs = argc + 1;
        optind = 0;
        opterr = 0;
        while ((c = getopt_long(nargs, args, "n:c:hj", longopts, NULL)) != -1) {
                size_t idx = ELEMENTSOF(options);
                int id = c == 'n' ? OPT_COUNT : c == 'c' ? OPT_CONCURRENCY : c == 'h' ? OPT_HELP : c == 'j' ? OPT_JSON : c;
                for (size_t i = 0; i < ELEMENTSOF(options); i++)
                        if (options[i].opt.val == id)
                                idx = i;
                if (c == '?' || c == ':' || idx == ELEMENTSOF(options)) {
                        const char *bad = optind > 0 && optind <= nargs ? args[optind - 1] : "?";
                        free(args);
                        return fail_usage("unknown option or missing value: '%.64s'", bad);
                }
                given_mask[idx] = 1;
                switch (id) {
                case OPT_URL:
                        o->client.url = optarg;
                        break;
                case OPT_TOKEN:
                        o->client.token = optarg;
                        break;
                case OPT_DATA_DIR:
                        o->client.data_dir = optarg;
                        break;
                case OPT_JSON:
                        o->json = true;
                        break;
                case OPT_PROGRESS:
                        o->progress = progress_set = true;
                        break;
                case OPT_NO_PROGRESS:
                        o->progress = false;
                        progress_set = true;
                        break;
                case OPT_TIMEOUT:
                        if (parse_time(optarg, &t) < 0 || t < USEC_PER_SEC || t > 3600 * USEC_PER_SEC) {
                                free(args);
                                return fail_usage("--timeout must be a time from 1s to 1h, e.g. 120s");
                        }
                        o->timeout_ms = (long) (t / USEC_PER_MSEC);
                        g.timeout = true;
                        break;
                case OPT_COUNT:
                case OPT_WARMUP:
                case OPT_SANDBOXES:
                case OPT_EXECS:
                case OPT_CONCURRENCY: {
                        uint64_t min = id == OPT_WARMUP ? 0 : 1;
                        uint64_t max = id == OPT_CONCURRENCY ? BENCH_MAX_CONCURRENCY
                                     : id == OPT_SANDBOXES    ? BENCH_MAX_SANDBOXES
                                                              : BENCH_MAX_COUNT;
                        uint64_t v;
                        if (parse_count(optarg, min, max, &v) < 0) {
                                free(args);
                                return fail_usage("--%s must be an integer from %" PRIu64 " to %" PRIu64,
                                                  options[idx].opt.name, min, max);
                        }
                        if (id == OPT_COUNT)
                                o->count = v, g.count = true;
                        else if (id == OPT_WARMUP)
                                o->warmup = v, g.warmup = true;
                        else if (id == OPT_SANDBOXES)
                                o->sandboxes = v, g.sandboxes = true;
                        else if (id == OPT_EXECS)
                                o->execs = v;
                        else
                                o->concurrency = v, g.concurrency = true;
                        break;
                }
                case OPT_DURATION:
                case OPT_SETTLE:
                case OPT_HOLD:
                        if (parse_time(optarg, &t) < 0 || (id != OPT_SETTLE && t < 100 * USEC_PER_MSEC) ||
                            t > 3600 * USEC_PER_SEC) {
                                free(args);
                                return fail_usage("--%s must be a time up to 1h, e.g. 10s or 500ms", options[idx].opt.name);
                        }
                        if (id == OPT_DURATION)
                                o->duration = t;
                        else if (id == OPT_SETTLE)
                                o->settle = t, g.settle = true;
                        else
                                o->hold = t;
                        break;
                case OPT_EXCLUSIVE:
                        o->exclusive = true;
                        break;
                case OPT_KEEP:
                        o->keep = true;
                        break;
                case OPT_BASELINE:
                        o->with_baseline = true;
                        break;
                case OPT_DAEMON_PID: {
                        uint32_t v;
                        if (parse_u32(optarg, &v) < 0 || v == 0 || v > INT_MAX) {
                                free(args);
                                return fail_usage("--daemon-pid must be a process id");
                        }
                        o->daemon_pid = (pid_t) v;
                        break;
                }
                case OPT_SOURCE:
                        if (streq(optarg, "auto"))
                                o->source = BENCH_SOURCE_AUTO;
                        else if (streq(optarg, "proc"))
                                o->source = BENCH_SOURCE_PROC;
                        else if (streq(optarg, "daemon"))
                                o->source = BENCH_SOURCE_DAEMON;
                        else {
                                free(args);
                                return fail_usage("--source must be auto, proc or daemon");
                        }
                        break;
                case OPT_BWRAP:
                        o->bwrap = optarg;
                        break;
                case OPT_SAMPLES:
                        o->samples_path = optarg;
                        break;
                case OPT_HELP:
                        help = true;
                        break;
                }
        }
        if (optind < nargs)
                kind_name = args[optind];
        if (optind + 1 < nargs) {
                int r = fail_usage("unexpected argument '%.64s'", args[optind + 1]);
                free(args);
                return r;
        }
        free(args);

        if (!kind_name) {
                usage(help ? stdout : stderr);
                return help ? 0 : 2;
        }
        c = kind_from_string(kind_name);
        if (c < 0)
                return fail_usage("unknown command '%.64s'", kind_name);
        o->kind = (BenchKind) c;
        if (help) {
                usage_kind(stdout, o->kind);
                return 0;
        }
        for (size_t i = 0; i < ELEMENTSOF(options); i++)
                if (given_mask[i] && !(options[i].kinds & MASK(o->kind)))
                        return fail_usage("--%s does not apply to `%s`", options[i].opt.name, kinds[o->kind].name);

        if (o->execs > 0 && o->duration > 0)
                return fail_usage("--execs and --duration exclude each other");

        /* Defaults per command. */
        switch (o->kind) {
        case BENCH_SERIAL:
        case BENCH_BASELINE:
                if (!g.count)
                        o->count = 200;
                if (!g.warmup)
                        o->warmup = 10;
                break;
        case BENCH_LOAD:
                if (!g.sandboxes)
                        o->sandboxes = 60;
                if (!o->execs)
                        o->execs = 600;
                if (!g.concurrency)
                        o->concurrency = 32;
                if (!g.warmup)
                        o->warmup = o->sandboxes;
                break;
        case BENCH_CREATE:
                if (!g.count)
                        o->count = 200;
                if (!g.concurrency)
                        o->concurrency = 8;
                break;
        case BENCH_IDLE:
                if (!g.count)
                        o->count = 1000;
                if (!g.concurrency)
                        o->concurrency = 16;
                if (!g.settle)
                        o->settle = 2 * USEC_PER_SEC;
                break;
        case BENCH_MEMORY:
                if (!g.concurrency)
                        o->concurrency = 32;
                if (!o->hold)
                        o->hold = 3 * USEC_PER_SEC;
                break;
        default:
                break;
        }
        if (o->source == BENCH_SOURCE_DAEMON && o->daemon_pid > 0)
                return fail_usage("--daemon-pid reads /proc: it does not go with --source daemon");
        if (!g.timeout)
                o->timeout_ms = 120000;
        if (o->kind == BENCH_MEMORY && !g.timeout)
                o->timeout_ms += (long) (o->hold / USEC_PER_MSEC);
        if (!progress_set)
                o->progress = isatty(STDERR_FILENO);
        return -1;
}

/* ---- progress ---- */

void bench_progress(Bench *b, bool force, const char *fmt, ...) {
        usec_t now = now_monotonic_usec();
        char line[256];
        va_list ap;

        if (!b->opt->progress)
                return;
        if (!force && now - b->progress_last < PROGRESS_EVERY_USEC)
                return;
        b->progress_last = now;
        va_start(ap, fmt);
        (void) vsnprintf(line, sizeof line, fmt, ap);
        va_end(ap);
        fprintf(stderr, "\r%s\033[K", line);
        fflush(stderr);
}

void bench_progress_clear(Bench *b) {
        if (!b->opt->progress || b->progress_last == 0)
                return;
        fprintf(stderr, "\r\033[K");
        fflush(stderr);
        b->progress_last = 0;
}

/* ---- the daemon ---- */

/* GET PATH expecting 200 and JSON: 0 with the body, or an error line "CODE: message (GET PATH)". */
int bench_get_json(const Bench *b, const char *path, json_t **ret, char *err, size_t errlen) {
        _cleanup_json_ json_t *h = NULL;
        char line[BENCH_ERR_MAX], cerr[BENCH_ERR_MAX] = "";
        long status = 0;
        int r;

        r = client_json(b->client, "GET", path, NULL, &status, &h, cerr, sizeof cerr);
        if (r < 0) {
                (void) bsprintf(err, errlen, "UNREACHABLE: %s", cerr[0] ? cerr : strerror(-r));
                return r;
        }
        if (status != 200) {
                (void) bsprintf(err, errlen, "%s (GET %s)", client_error_line(status, h, line, sizeof line), path);
                return -EPROTO;
        }
        *ret = TAKE_PTR(h);
        return 0;
}

/* GET /healthz with the token: proves the daemon is there and the token works, and says what is
 * measured (version, isolation level, network mode, runtime, store). */
static int daemon_identity(Bench *b, char *err, size_t errlen) {
        _cleanup_json_ json_t *h = NULL;
        json_t *iso, *id;
        int r;

        /* An authenticated call first: /healthz answers a wrong token too (with less). */
        r = bench_get_json(b, "/api/v1/sandboxes?limit=1", &h, err, errlen);
        if (r < 0)
                return r;
        json_decref(TAKE_PTR(h));
        r = bench_get_json(b, "/healthz", &h, err, errlen);
        if (r < 0)
                return r;
        iso = json_object_get(h, "isolation");
        if (!json_is_object(iso)) {
                (void) bsprintf(err, errlen, "BAD_REPLY: GET /healthz with the token has no isolation report (not a sandloom daemon, or the token was not accepted)");
                return -EPROTO;
        }
        id = json_pack("{s:s?, s:s?, s:s?, s:s?, s:s?, s:s?}", "version", json_string_value(json_object_get(h, "version")),
                       "worker_id", json_string_value(json_object_get(h, "worker_id")),
                       "isolation_level", json_string_value(json_object_get(iso, "level")),
                       "network_mode", json_string_value(json_object_get(iso, "network_mode")),
                       "runtime", json_string_value(json_object_get(iso, "runtime")),
                       "store", json_string_value(json_object_get(json_object_get(h, "store"), "backend")));
        if (!id)
                return -ENOMEM;
        json_int_t sp = json_integer_value(json_object_get(json_object_get(iso, "spawner"), "pid"));
        if (sp > 0)
                (void) json_object_set_new(id, "spawner_pid", json_integer(sp));
        b->daemon = id;
        return 0;
}

/* ---- output ---- */

static double num(const json_t *o, const char *key) {
        return json_number_value(json_object_get(o, key));
}

static bool from_daemon(const json_t *r) {
        const char *src = json_string_value(json_object_get(r, "source"));
        return src && streq(src, "daemon");
}

static long long inum(const json_t *o, const char *key) {
        return (long long) json_integer_value(json_object_get(o, key));
}

static void print_latency_header(FILE *f) {
        fprintf(f, "  %-26s %7s %9s %9s %9s %9s %9s\n", "latency (ms)", "count", "p50", "p95", "p99", "max", "mean");
}

static void print_latency(FILE *f, const char *label, const json_t *l) {
        if (!json_is_object(l))
                return;
        fprintf(f, "  %-26s %7lld %9.3f %9.3f %9.3f %9.3f %9.3f\n", label, inum(l, "count"), num(l, "p50_ms"),
                num(l, "p95_ms"), num(l, "p99_ms"), num(l, "max_ms"), num(l, "mean_ms"));
}

static void print_errors(FILE *f, const json_t *errors) {
        const char *k;
        json_t *v;

        json_object_foreach((json_t *) errors, k, v)
                fprintf(f, "    %6lld × %s\n", (long long) json_integer_value(v), k);
}

static void print_baseline(FILE *f, const json_t *r) {
        static const struct {
                const char *key, *label;
        } rows[] = {
                { "fork_exec", "fork/exec /bin/true" },
                { "bwrap", "bwrap /bin/true" },
                { "bwrap_no_netns", "bwrap, no network ns" },
        };

        print_latency_header(f);
        for (size_t i = 0; i < ELEMENTSOF(rows); i++) {
                const json_t *v = json_object_get(r, rows[i].key);
                if (json_is_true(json_object_get(v, "available")))
                        print_latency(f, rows[i].label, v);
                else if (v)
                        fprintf(f, "  %-26s unavailable: %s\n", rows[i].label, json_string_value(json_object_get(v, "reason")));
        }
}

static void print_human(const Bench *b, const json_t *r, FILE *f) {
        const BenchOptions *o = b->opt;
        const json_t *d = b->daemon;

        fprintf(f, "sandloom bench %s", kinds[o->kind].name);
        if (d)
                fprintf(f, " — %s (sandloom %s, level %s, network %s, runtime %s, store %s)", client_base_url(b->client),
                        json_string_value(json_object_get(d, "version")) ?: "?",
                        json_string_value(json_object_get(d, "isolation_level")) ?: "?",
                        json_string_value(json_object_get(d, "network_mode")) ?: "?",
                        json_string_value(json_object_get(d, "runtime")) ?: "?",
                        json_string_value(json_object_get(d, "store")) ?: "?");
        fputc('\n', f);

        switch (o->kind) {
        case BENCH_SERIAL:
                fprintf(f, "%lld runs of /bin/true in one sandbox, one at a time, after %lld warm-up runs\n",
                        inum(r, "runs"), inum(r, "warmup"));
                print_latency_header(f);
                print_latency(f, "end to end over HTTP", json_object_get(r, "latency"));
                print_latency(f, "daemon's duration_ms", json_object_get(r, "server_duration"));
                fprintf(f, "  failures: %lld\n", inum(r, "failures"));
                print_errors(f, json_object_get(r, "errors"));
                if (json_object_get(r, "baseline")) {
                        fprintf(f, "floor, timed in the same run:\n");
                        print_baseline(f, json_object_get(r, "baseline"));
                        if (json_object_get(r, "ratio_p50_vs_bwrap"))
                                fprintf(f, "  serial p50 / bwrap p50: %.2f×;  / fork/exec p50: %.2f×\n",
                                        num(r, "ratio_p50_vs_bwrap"), num(r, "ratio_p50_vs_fork_exec"));
                }
                break;
        case BENCH_LOAD:
                fprintf(f, "/bin/sh -c 'printf x' over %lld sandboxes at concurrency %lld, %s, ", inum(r, "sandboxes"),
                        inum(r, "concurrency"), json_is_true(json_object_get(r, "exclusive")) ? "no exec_scope (exclusive)"
                                                                                                : "each in its own exec_scope");
                if (json_object_get(r, "duration_s"))
                        fprintf(f, "for %.1f s", num(r, "duration_s"));
                else
                        fprintf(f, "%lld execs", inum(r, "execs"));
                fprintf(f, " (after %lld warm-up execs)\n", inum(r, "warmup"));
                fprintf(f, "  throughput: %.1f execs/s (%lld ok in %.3f s)\n", num(r, "throughput_per_s"),
                        inum(r, "execs_ok"), num(r, "wall_s"));
                print_latency_header(f);
                print_latency(f, "end to end over HTTP", json_object_get(r, "latency"));
                print_latency(f, "daemon's duration_ms", json_object_get(r, "server_duration"));
                fprintf(f, "  failures: %lld   scope conflicts (409): %lld   parallel limit (429): %lld\n",
                        inum(r, "failures"), inum(r, "conflicts_409"), inum(r, "limited_429"));
                fprintf(f, "  this client used %.1f%% of one core (%.0f µs of CPU per exec)\n", num(r, "client_cpu_percent"),
                        num(r, "client_cpu_us_per_exec"));
                print_errors(f, json_object_get(r, "errors"));
                break;
        case BENCH_CREATE:
                fprintf(f, "%lld fresh sandboxes (resolve + connect), concurrency %lld\n", inum(r, "count"),
                        inum(r, "concurrency"));
                fprintf(f, "  rate: %.1f creations/s (%lld created in %.3f s)\n", num(r, "creations_per_s"),
                        inum(r, "created"), num(r, "wall_s"));
                print_latency_header(f);
                print_latency(f, "resolve + connect", json_object_get(r, "latency"));
                fprintf(f, "  failures: %lld\n", inum(r, "failures"));
                print_errors(f, json_object_get(r, "errors"));
                break;
        case BENCH_IDLE: {
                const json_t *be = json_object_get(r, "before"), *af = json_object_get(r, "after");
                fprintf(f, "%lld idle sandboxes (resolve + connect, no exec; %.1f/s), daemon pid %lld (from %s), measured %.1f s after\n",
                        inum(r, "created"), num(r, "creations_per_s"), inum(r, "daemon_pid"),
                        from_daemon(r) ? "its /healthz" : "/proc",
                        num(r, "settle_s"));
                fprintf(f, "  daemon RSS:      %9.1f MiB -> %9.1f MiB  (%+.2f MiB, %.0f bytes per sandbox)\n",
                        (double) inum(be, "daemon_rss_kib") / 1024, (double) inum(af, "daemon_rss_kib") / 1024,
                        num(r, "daemon_rss_growth_mib"), num(r, "rss_per_sandbox_bytes"));
                fprintf(f, "  daemon threads:  %9lld     -> %9lld\n", inum(be, "daemon_threads"), inum(af, "daemon_threads"));
                if (json_object_get(r, "new_processes"))
                        fprintf(f, "  host processes:  %9lld     -> %9lld      (%+lld)\n", inum(be, "host_processes"),
                                inum(af, "host_processes"), inum(r, "new_processes"));
                if (json_object_get(r, "new_daemon_tree_processes"))
                        fprintf(f, "  daemon's tree:   %9lld     -> %9lld      (%+lld processes: the daemon, its spawner, sandbox processes)\n",
                                inum(be, "daemon_tree_processes"), inum(af, "daemon_tree_processes"),
                                inum(r, "new_daemon_tree_processes"));
                break;
        }
        case BENCH_MEMORY: {
                const json_t *id = json_object_get(r, "idle"), *pk = json_object_get(r, "busy_peak");
                fprintf(f, "%lld concurrent foreground execs of `sleep` over %lld sandbox%s, daemon pid %lld (%lld samples from %s)\n",
                        inum(r, "concurrency"), inum(r, "sandboxes"), inum(r, "sandboxes") == 1 ? "" : "es", inum(r, "daemon_pid"), inum(r, "samples"),
                        from_daemon(r) ? "its /healthz" : "/proc");
                fprintf(f, "  daemon RSS:   idle %9.1f MiB, busy peak %9.1f MiB  -> %.1f KiB per concurrent exec\n",
                        (double) inum(id, "daemon_rss_kib") / 1024, (double) inum(pk, "daemon_rss_kib") / 1024,
                        num(r, "daemon_kib_per_exec"));
                if (json_object_get(r, "spawner_kib_per_exec"))
                        fprintf(f, "  spawner RSS:  idle %9.1f MiB, busy peak %9.1f MiB  -> %.1f KiB per concurrent exec\n",
                                (double) inum(id, "spawner_rss_kib") / 1024, (double) inum(pk, "spawner_rss_kib") / 1024,
                                num(r, "spawner_kib_per_exec"));
                fprintf(f, "  daemon threads: idle %lld, busy peak %lld;  daemon's process tree: idle %lld, busy peak %lld;  failures: %lld\n",
                        inum(id, "daemon_threads"), inum(pk, "daemon_threads"), inum(id, "daemon_tree_processes"),
                        inum(pk, "daemon_tree_processes"), inum(r, "failures"));
                print_errors(f, json_object_get(r, "errors"));
                break;
        }
        case BENCH_BASELINE:
                fprintf(f, "%lld runs each, interleaved, after %lld warm-up runs\n", inum(r, "runs"), inum(r, "warmup"));
                print_baseline(f, r);
                if (json_object_get(r, "bwrap_over_fork_exec_p50"))
                        fprintf(f, "  bwrap p50 / fork/exec p50: %.2f×\n", num(r, "bwrap_over_fork_exec_p50"));
                break;
        default:
                break;
        }
}

/* ---- main ---- */

volatile sig_atomic_t bench_interrupted = 0;

static void on_signal(int sig) {
        bench_interrupted = 1;
}

/* The first Ctrl-C stops the run and releases what it created; a second one kills at once. */
static void catch_signals(void) {
        struct sigaction sa = { .sa_handler = on_signal, .sa_flags = SA_RESETHAND };

        (void) sigemptyset(&sa.sa_mask);
        (void) sigaction(SIGINT, &sa, NULL);
        (void) sigaction(SIGTERM, &sa, NULL);
}

static int run_kind(Bench *b, json_t *result, char *err, size_t errlen) {
        switch (b->opt->kind) {
        case BENCH_SERIAL:
                return bench_run_serial(b, result, err, errlen);
        case BENCH_LOAD:
                return bench_run_load(b, result, err, errlen);
        case BENCH_CREATE:
                return bench_run_create(b, result, err, errlen);
        case BENCH_IDLE:
                return bench_run_idle(b, result, err, errlen);
        case BENCH_MEMORY:
                return bench_run_memory(b, result, err, errlen);
        case BENCH_BASELINE:
                return bench_run_baseline(b, result, err, errlen);
        default:
                return -EINVAL;
        }
}

/* serial --baseline: the floor timed in the same run, and the ratios. */
static int add_baseline(Bench *b, json_t *result, char *err, size_t errlen) {
        _cleanup_json_ json_t *base = json_object();
        double p50 = json_number_value(json_object_get(json_object_get(result, "latency"), "p50_ms"));
        const json_t *bw, *fe;
        int r;

        if (!base)
                return -ENOMEM;
        r = bench_run_baseline(b, base, err, errlen);
        if (r < 0)
                return r;
        bw = json_object_get(base, "bwrap");
        fe = json_object_get(base, "fork_exec");
        if (json_is_true(json_object_get(bw, "available")) && num(bw, "p50_ms") > 0)
                (void) json_object_set_new(result, "ratio_p50_vs_bwrap", json_real(bench_round3(p50 / num(bw, "p50_ms"))));
        if (num(fe, "p50_ms") > 0)
                (void) json_object_set_new(result, "ratio_p50_vs_fork_exec",
                                           json_real(bench_round3(p50 / num(fe, "p50_ms"))));
        (void) json_object_set(result, "baseline", base);
        return 0;
}

int bench_main(int argc, char **argv) {
        _cleanup_client_ Client *client = NULL;
        _cleanup_(bench_http_freep) BenchHttp *http = NULL;
        _cleanup_json_ json_t *result = NULL, *daemon = NULL;
        BenchOptions o = {};
        Bench b = { .opt = &o };
        char err[BENCH_ERR_MAX] = "", ts[TIMESTAMP_MAX], host[256] = "";
        int r;

        r = parse_args(argc, argv, &o);
        if (r >= 0)
                return r;
        o.client.timeout_ms = o.timeout_ms;
        if (random_hex(b.run_tag, sizeof b.run_tag, 4) < 0) {
                fprintf(stderr, "sandloom bench: cannot get random bytes.\n");
                return 1;
        }
        result = json_object();
        if (!result)
                return 1;
        (void) format_timestamp(ts, sizeof ts, now_realtime_usec());
        (void) gethostname(host, sizeof host - 1);
        (void) json_object_set_new(result, "command", json_string(kinds[o.kind].name));
        (void) json_object_set_new(result, "started_at", json_string(ts));
        (void) json_object_set_new(result, "host", json_string(host));

        if (o.kind != BENCH_BASELINE) {
                r = client_new(&o.client, &client, err, sizeof err);
                if (r < 0) {
                        fprintf(stderr, "sandloom bench: CLIENT_SETUP: %s\n", err);
                        return 1;
                }
                b.client = client;
                r = daemon_identity(&b, err, sizeof err);
                if (r < 0) {
                        fprintf(stderr, "sandloom bench: %s\n", err);
                        return 1;
                }
                daemon = b.daemon;
                r = bench_http_new(client_base_url(client), client_token(client), client_no_proxy(client), o.timeout_ms,
                                   &http);
                if (r < 0) {
                        fprintf(stderr, "sandloom bench: out of memory\n");
                        return 1;
                }
                b.http = http;
                (void) json_object_set_new(result, "url", json_string(client_base_url(client)));
                (void) json_object_set(result, "daemon", daemon);
        }

        catch_signals();
        r = run_kind(&b, result, err, sizeof err);
        if (r >= 0 && o.kind == BENCH_SERIAL && o.with_baseline)
                r = add_baseline(&b, result, err, sizeof err);
        bench_progress_clear(&b);
        if (bench_interrupted) {
                fprintf(stderr, "sandloom bench: INTERRUPTED: stopped by a signal%s\n",
                        o.kind == BENCH_BASELINE ? "" : "; what the run created was released");
                return 130;
        }
        if (r < 0) {
                fprintf(stderr, "sandloom bench: %s\n", err[0] ? err : strerror(-r));
                return 1;
        }
        if (o.json) {
                if (json_dumpf(result, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(10)) < 0)
                        return 1;
                fputc('\n', stdout);
        } else
                print_human(&b, result, stdout);
        return fflush(stdout) == 0 ? 0 : 1;
}
