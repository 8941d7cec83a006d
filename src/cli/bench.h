/* SPDX-License-Identifier: MIT */
#pragma once

/* `sandloom bench`: measures a deployment the way Sandloom's published capacity test does (N
 * sandboxes, M short commands at concurrency C, a serial /bin/true run), plus creation rate, idle
 * cost, memory per concurrent exec, and the same isolation done by bwrap as the floor.
 *
 * bench.c        options, help, output (table / JSON), progress line
 * bench-http.c   the load generator: libcurl multi, one keep-alive connection per in-flight request
 * bench-run.c    the subcommands that talk to the daemon
 * bench-sandboxes.c  creating and releasing the sandboxes a run uses
 * bench-proc.c   the daemon's pid, RSS and the host's process count from /proc
 * bench-baseline.c  the floor: bwrap and a bare fork/exec, timed from this process
 * bench-stats.c  latency samples and percentiles */

#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "client.h"
#include "time-util.h"

#define BENCH_MAX_COUNT 1000000u        /* -n, --execs, --count */
#define BENCH_MAX_CONCURRENCY 1024u
#define BENCH_MAX_SANDBOXES 100000u
#define BENCH_ERR_MAX 512

/* ---- stats ---- */

typedef struct BenchSamples {
        double *v;                      /* milliseconds */
        size_t n, alloc;
        bool sorted;
} BenchSamples;

int bench_samples_add(BenchSamples *s, double ms);
void bench_samples_done(BenchSamples *s);
/* Nearest-rank percentile (P in [0,100]); 0 when empty. Sorts in place. */
double bench_samples_percentile(BenchSamples *s, double p);
double bench_samples_mean(const BenchSamples *s);
double bench_round3(double v);
/* Writes every sample (ms, ascending) to PATH, one per line. */
int bench_samples_write(BenchSamples *s, const char *path);
double bench_samples_max(BenchSamples *s);
/* {"count", "min_ms", "p50_ms", "p95_ms", "p99_ms", "max_ms", "mean_ms"} */
json_t *bench_samples_json(BenchSamples *s);
/* Counts by error line ("HTTP 503 SANDBOX_WORKER_BUSY"), at most a few distinct ones kept. */
typedef struct BenchErrors {
        json_t *counts;                 /* object line -> count */
        uint64_t total;
} BenchErrors;
void bench_errors_add(BenchErrors *e, const char *line);
void bench_errors_done(BenchErrors *e);

/* ---- the load generator ---- */

typedef struct BenchHttp BenchHttp;

typedef struct BenchCall {
        const char *method;             /* "GET", "POST", "DELETE" */
        char path[512];
        char *body;                     /* JSON, owned by the call (freed after done) */
        uint64_t tag;                   /* for the caller: which sandbox, which phase */
        uint64_t tag2;
} BenchCall;

typedef struct BenchReply {
        long status;                    /* 0: no HTTP response */
        const char *body;
        size_t size;
        double latency_ms;              /* from handing the request to libcurl to the end of the reply */
        const char *error;              /* libcurl's sentence when status is 0 */
} BenchReply;

typedef struct BenchLoop {
        /* Fills CALL with SLOT's next request: 1 = filled, 0 = this slot is done, < 0 = abort. */
        int (*next)(void *ud, unsigned slot, BenchCall *call);
        /* Every reply; < 0 aborts the run (the error sentence in ERR). */
        int (*done)(void *ud, unsigned slot, BenchCall *call, const BenchReply *reply, char *err, size_t errlen);
        /* Called about every 100 ms while requests are in flight (progress, sampling); may be NULL. */
        void (*tick)(void *ud, unsigned in_flight);
        void *ud;
} BenchLoop;

/* NO_PROXY as client_no_proxy(): the token never goes to $http_proxy for a loopback daemon. */
int bench_http_new(const char *base_url, const char *token, const char *no_proxy, long timeout_ms, BenchHttp **ret);
BenchHttp *bench_http_free(BenchHttp *h);
DEFINE_TRIVIAL_CLEANUP_FUNC(BenchHttp *, bench_http_free);
/* TCP connections opened so far: with keep-alive, about one per slot over a whole run. */
uint64_t bench_http_connects(const BenchHttp *h);
/* Runs CONCURRENCY slots until each has no next request. Returns 0, or < 0 with ERR filled. */
int bench_http_run(BenchHttp *h, unsigned concurrency, const BenchLoop *loop, char *err, size_t errlen);

/* ---- options and output ---- */

typedef enum BenchKind {
        BENCH_SERIAL,
        BENCH_LOAD,
        BENCH_CREATE,
        BENCH_IDLE,
        BENCH_MEMORY,
        BENCH_BASELINE,
        _BENCH_KIND_MAX,
} BenchKind;

/* Where idle/memory read the daemon's RSS, threads and process tree. */
typedef enum BenchSource {
        BENCH_SOURCE_AUTO,              /* proc when the daemon is found on this host, else daemon */
        BENCH_SOURCE_PROC,              /* /proc on this host */
        BENCH_SOURCE_DAEMON,            /* the "process" block of the daemon's authenticated /healthz */
} BenchSource;

typedef struct BenchOptions {
        BenchKind kind;
        ClientOptions client;
        bool json, progress;
        uint64_t count;                 /* serial/baseline -n, create -n, idle --count */
        uint64_t warmup;
        uint64_t sandboxes;
        uint64_t execs;
        uint64_t concurrency;
        usec_t duration;                /* load --duration; 0 = by --execs */
        usec_t settle;                  /* idle: wait before measuring after */
        usec_t hold;                    /* memory: how long each exec runs */
        bool exclusive;
        bool keep;                      /* do not release what was created */
        bool with_baseline;             /* serial --baseline */
        pid_t daemon_pid;
        BenchSource source;
        const char *bwrap;
        const char *samples_path;       /* serial/load: every measured latency (ms), one per line */
        long timeout_ms;
} BenchOptions;

/* The state a subcommand works with. */
typedef struct Bench {
        const BenchOptions *opt;
        Client *client;                 /* set-up calls (blocking) */
        BenchHttp *http;                /* measured calls */
        json_t *daemon;                 /* what /healthz says: version, level, network, runtime, store */
        char run_tag[24];               /* random, names this run's sandboxes */
        usec_t progress_last;
} Bench;

/* ---- sandboxes (bench-sandboxes.c) ---- */

typedef struct BenchSandboxes {
        Bench *b;
        const char *kind;
        uint64_t n, next_index;
        uint64_t *gens;                 /* per sandbox: its generation once resolved */
        bool *resolved;                 /* per sandbox: exists on the daemon (to release) */
        BenchSamples lat;               /* resolve + connect */
        BenchErrors errors;
        uint64_t created;
        bool fatal;                     /* a failure ends the run (set-up), else it is counted */
        const char *progress_label;
} BenchSandboxes;

/* Resolves and connects N sandboxes "bench-TAG-KIND-i" with CONCURRENCY in flight. FATAL: the first
 * refusal ends the run (set-up); else refusals are counted in ->errors. */
int bench_sandboxes_create(Bench *b, BenchSandboxes *c, const char *kind, uint64_t n, unsigned concurrency, bool fatal,
                           const char *label, double *ret_wall_s, char *err, size_t errlen);
/* Releases (untimed) every sandbox that was resolved; adds "released" to RESULT. Never fails. */
void bench_sandboxes_release(Bench *b, const BenchSandboxes *c, unsigned concurrency, json_t *result);
void bench_sandboxes_done(BenchSandboxes *c);
void bench_sandbox_id(const Bench *b, const char *kind, uint64_t i, char *buf, size_t n);
/* "HTTP 409 SANDBOX_EXEC_SCOPE_BUSY" or "no response: ...": short, for counting by kind. */
void bench_reply_error_kind(const BenchReply *rep, const json_t *body, char *buf, size_t n);
/* Fills ERR with the one-line "CODE: message (WHAT)" a refused set-up call ends the run with. */
int bench_setup_error(const BenchReply *rep, const json_t *body, const char *what, char *err, size_t errlen);

/* Progress line on stderr (only if enabled); bench_progress_clear() before other output. */
void bench_progress(Bench *b, bool force, const char *fmt, ...) _printf_(3, 4);
void bench_progress_clear(Bench *b);

/* Subcommands: fill RESULT (an object), return 0 or < 0 with ERR filled ("CODE: message"). */
int bench_run_serial(Bench *b, json_t *result, char *err, size_t errlen);
int bench_run_load(Bench *b, json_t *result, char *err, size_t errlen);
int bench_run_create(Bench *b, json_t *result, char *err, size_t errlen);
int bench_run_idle(Bench *b, json_t *result, char *err, size_t errlen);
int bench_run_memory(Bench *b, json_t *result, char *err, size_t errlen);
int bench_run_baseline(Bench *b, json_t *result, char *err, size_t errlen);

/* ---- /proc ---- */

/* The pid listening on the URL's TCP port on this host, or -ESRCH. */
int bench_proc_find_listener(const char *url, pid_t *ret);
/* VmRSS in KiB, or -errno. */
int bench_proc_rss_kib(pid_t pid, uint64_t *ret);
int bench_proc_threads(pid_t pid, uint64_t *ret);
/* Processes on the host (numeric entries of /proc). */
int bench_proc_count(uint64_t *ret);
/* Processes in PID's tree (PID itself and every descendant: the spawner, sandbox processes). */
int bench_proc_tree_count(pid_t pid, uint64_t *ret);

/* Set by SIGINT/SIGTERM: the runs stop issuing requests, what was created is released. */
extern volatile sig_atomic_t bench_interrupted;

int bench_main(int argc, char **argv);

/* GET PATH expecting 200 and JSON: 0 with the body in *RET, or < 0 with ERR set to
 * "CODE: message (GET PATH)" (UNREACHABLE when no answer came). */
int bench_get_json(const Bench *b, const char *path, json_t **ret, char *err, size_t errlen);
