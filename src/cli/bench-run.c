/* SPDX-License-Identifier: MIT */
/* The subcommands that talk to the daemon. Each builds its sandboxes through the load generator
 * (untimed unless creation is what is measured), runs its measured phase, releases what it made
 * (untimed) and fills one JSON object with every figure. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench.h"
#include "json-util.h"
#include "string-util.h"

#define SANDBOX_PARALLEL_DEFAULT 16     /* SANDBOX_MAX_PARALLEL_EXECS_PER_SANDBOX's default */

static const char *const cmd_true[] = { "/bin/true", NULL };
static const char *const cmd_printf[] = { "/bin/sh", "-c", "printf x", NULL };

/* ---- exec runs ---- */

typedef struct Execer {
        Bench *b;
        const BenchSandboxes *sandboxes;
        const char *const *argv;
        const char *expect_stdout;      /* NULL: any */
        bool scoped;                    /* each exec in its own exec_scope */
        uint64_t limit;                 /* execs to issue (0: by deadline) */
        usec_t deadline;
        uint64_t issued, warmup;        /* the first WARMUP replies are not counted */
        uint64_t replies;
        uint64_t rr;                    /* round robin */
        unsigned *busy;                 /* per sandbox: our requests in flight */
        uint64_t ok, failures, conflicts, limited;
        BenchSamples lat, server;
        BenchErrors errors;
        usec_t t_start, t_end;          /* the measured phase: first measured request to last reply */
        usec_t client_cpu;              /* this process's CPU time during the run */
        uint64_t connects;              /* TCP connections opened during the run */
        const char *label;
        unsigned in_flight_max;
        /* memory: sampling while every slot is in flight */
        void (*sample)(struct Execer *e, unsigned in_flight);
        void *sample_ud;
} Execer;

static uint64_t pick_sandbox(Execer *e) {
        uint64_t n = e->sandboxes->n, i;

        /* Round robin; an unscoped exec needs the whole sandbox, so skip the ones we keep busy. */
        for (uint64_t k = 0; k < n; k++) {
                i = (e->rr + k) % n;
                if (e->scoped ? e->busy[i] < SANDBOX_PARALLEL_DEFAULT : e->busy[i] == 0) {
                        e->rr = i + 1;
                        return i;
                }
        }
        i = e->rr % n;
        e->rr++;
        return i;
}

static int append_argv(char **json_out, const char *const *argv) {
        _cleanup_json_ json_t *a = json_array();

        if (!a)
                return -ENOMEM;
        for (size_t i = 0; argv[i]; i++)
                if (json_array_append_new(a, json_string(argv[i])) < 0)
                        return -ENOMEM;
        *json_out = json_dumps(a, JSON_COMPACT);
        return *json_out ? 0 : -ENOMEM;
}

static int execer_next(void *ud, unsigned slot, BenchCall *call) {
        Execer *e = ud;
        _cleanup_free_ char *argv = NULL;
        char id[160];
        uint64_t i;
        int r;

        if (bench_interrupted)
                return 0;
        if (e->issued >= e->warmup) {
                if (e->limit > 0 && e->issued >= e->warmup + e->limit)
                        return 0;
                if (e->deadline > 0 && now_monotonic_usec() >= e->deadline)
                        return 0;
        }
        r = append_argv(&argv, e->argv);
        if (r < 0)
                return r;
        i = pick_sandbox(e);
        bench_sandbox_id(e->b, e->sandboxes->kind, i, id, sizeof id);
        call->method = "POST";
        call->tag = i;
        call->tag2 = e->issued;
        (void) bsprintf(call->path, sizeof call->path, "/api/v1/sandboxes/%s/exec", id);
        if (e->scoped)
                call->body = strprintf("{\"generation\":%" PRIu64 ",\"argv\":%s,\"exec_scope\":\"b%" PRIu64 "\"}",
                                       e->sandboxes->gens[i], argv, e->issued);
        else
                call->body = strprintf("{\"generation\":%" PRIu64 ",\"argv\":%s}", e->sandboxes->gens[i], argv);
        if (!call->body)
                return -ENOMEM;
        if (e->issued == e->warmup && e->t_start == 0)
                e->t_start = now_monotonic_usec();
        e->issued++;
        e->busy[i]++;
        e->in_flight_max = MAX(e->in_flight_max, (unsigned) (e->issued - e->replies));
        return 1;
}

static int execer_done(void *ud, unsigned slot, BenchCall *call, const BenchReply *rep, char *err, size_t errlen) {
        Execer *e = ud;
        _cleanup_json_ json_t *body = NULL;
        bool measured = call->tag2 >= e->warmup;
        const char *status, *out;
        char kind[200];

        e->busy[call->tag]--;
        e->replies++;
        body = rep->size > 0 ? json_loadb(rep->body, rep->size, 0, NULL) : NULL;
        if (rep->status == 200) {
                status = json_string_value(json_object_get(body, "status"));
                out = json_string_value(json_object_get(body, "stdout"));
                if (status && streq(status, "SUCCEEDED") && (!e->expect_stdout || (out && streq(out, e->expect_stdout)))) {
                        if (!measured)
                                return 0;
                        e->ok++;
                        e->t_end = now_monotonic_usec();
                        if (bench_samples_add(&e->lat, rep->latency_ms) < 0 ||
                            bench_samples_add(&e->server, (double) json_integer_value(json_object_get(body, "duration_ms"))) < 0)
                                return -ENOMEM;
                        return 0;
                }
                (void) bsprintf(kind, sizeof kind, "exec %s (exit %" JSON_INTEGER_FORMAT ")", status ? status : "?",
                                json_integer_value(json_object_get(body, "exit_code")));
        } else
                bench_reply_error_kind(rep, body, kind, sizeof kind);
        if (!measured) {
                /* A warm-up conflict is only a busy sandbox; any other failure is a set-up failure:
                 * the daemon cannot run the command at all. */
                if (rep->status == 409 || rep->status == 429)
                        return 0;
                if (rep->status == 200)
                        (void) bsprintf(err, errlen, "EXEC_FAILED: the warm-up exec ended %s", kind);
                else
                        (void) bench_setup_error(rep, body, "warm-up exec", err, errlen);
                return -EPROTO;
        }
        e->t_end = now_monotonic_usec();
        if (rep->status == 409 || rep->status == 429) {
                if (rep->status == 409)
                        e->conflicts++;
                else
                        e->limited++;
        } else
                e->failures++;
        bench_errors_add(&e->errors, kind);
        return 0;
}

static void execer_tick(void *ud, unsigned in_flight) {
        Execer *e = ud;
        double s = e->t_start ? monotonic_seconds_since(e->t_start) : 0;

        if (e->sample)
                e->sample(e, in_flight);
        if (e->issued <= e->warmup)
                bench_progress(e->b, false, "%s: warm-up %" PRIu64 "/%" PRIu64, e->label, e->replies, e->warmup);
        else
                bench_progress(e->b, false, "%s: %" PRIu64 " ok, %.0f/s, %" PRIu64 " failed, %" PRIu64 " conflicts, %u in flight, %.1f s",
                               e->label, e->ok, s > 0 ? (double) e->ok / s : 0.0, e->failures, e->conflicts + e->limited,
                               in_flight, s);
}

static int execer_init(Execer *e, Bench *b, const BenchSandboxes *sandboxes, const char *label) {
        *e = (Execer) { .b = b, .sandboxes = sandboxes, .label = label };
        e->busy = calloc(sandboxes->n, sizeof *e->busy);
        return e->busy ? 0 : -ENOMEM;
}

static void execer_done_free(Execer *e) {
        free(e->busy);
        bench_samples_done(&e->lat);
        bench_samples_done(&e->server);
        bench_errors_done(&e->errors);
}

static usec_t cpu_usec(void) {
        struct rusage ru;

        if (getrusage(RUSAGE_SELF, &ru) < 0)
                return 0;
        return (usec_t) ru.ru_utime.tv_sec * USEC_PER_SEC + (usec_t) ru.ru_utime.tv_usec +
               (usec_t) ru.ru_stime.tv_sec * USEC_PER_SEC + (usec_t) ru.ru_stime.tv_usec;
}

static int execer_run(Execer *e, unsigned concurrency, char *err, size_t errlen) {
        BenchLoop loop = { .next = execer_next, .done = execer_done, .tick = execer_tick, .ud = e };
        usec_t cpu0 = cpu_usec();
        uint64_t conn0 = bench_http_connects(e->b->http);
        int r;

        r = bench_http_run(e->b->http, concurrency, &loop, err, errlen);
        e->client_cpu = cpu_usec() - cpu0;
        e->connects = bench_http_connects(e->b->http) - conn0;
        bench_progress_clear(e->b);
        return r;
}

/* The figures every exec run reports. */
static int execer_result(Execer *e, json_t *result, char *err, size_t errlen) {
        double wall = e->t_end > e->t_start ? (double) (e->t_end - e->t_start) / 1e6 : 0;

        (void) json_object_set_new(result, "execs_ok", json_integer((json_int_t) e->ok));
        (void) json_object_set_new(result, "failures", json_integer((json_int_t) e->failures));
        (void) json_object_set_new(result, "conflicts_409", json_integer((json_int_t) e->conflicts));
        (void) json_object_set_new(result, "limited_429", json_integer((json_int_t) e->limited));
        (void) json_object_set_new(result, "errors", e->errors.counts ? json_incref(e->errors.counts) : json_object());
        (void) json_object_set_new(result, "wall_s", json_real(bench_round3(wall)));
        (void) json_object_set_new(result, "throughput_per_s", json_real(bench_round3(wall > 0 ? (double) e->ok / wall : 0)));
        (void) json_object_set_new(result, "latency", bench_samples_json(&e->lat));
        (void) json_object_set_new(result, "server_duration", bench_samples_json(&e->server));
        /* Evidence that the client is not the bottleneck: its own CPU per exec and its share of a core. */
        (void) json_object_set_new(result, "client_cpu_us_per_exec",
                                   json_real(bench_round3(e->issued ? (double) e->client_cpu / (double) e->issued : 0)));
        (void) json_object_set_new(result, "client_cpu_percent",
                                   json_real(bench_round3(wall > 0 ? (double) e->client_cpu / 1e4 / wall : 0)));
        (void) json_object_set_new(result, "connections_opened", json_integer((json_int_t) e->connects));
        if (e->b->opt->samples_path) {
                int r = bench_samples_write(&e->lat, e->b->opt->samples_path);
                if (r < 0) {
                        (void) bsprintf(err, errlen, "SAMPLES_FILE: cannot write %s: %s", e->b->opt->samples_path,
                                        strerror(-r));
                        return r;
                }
        }
        return 0;
}

static json_t *argv_json(const char *const *argv) {
        json_t *a = json_array();
        for (size_t i = 0; a && argv[i]; i++)
                (void) json_array_append_new(a, json_string(argv[i]));
        return a;
}

/* ---- serial ---- */

int bench_run_serial(Bench *b, json_t *result, char *err, size_t errlen) {
        const BenchOptions *o = b->opt;
        BenchSandboxes c;
        Execer e;
        int r;

        r = bench_sandboxes_create(b, &c, "serial", 1, 1, true, "set-up", NULL, err, errlen);
        if (r >= 0)
                r = execer_init(&e, b, &c, "serial");
        if (r < 0) {
                bench_sandboxes_release(b, &c, 1, result); /* what the set-up made before it failed */
                bench_sandboxes_done(&c);
                return r;
        }
        e.argv = cmd_true;
        e.expect_stdout = NULL;
        e.scoped = false;
        e.limit = o->count;
        e.warmup = o->warmup;
        r = execer_run(&e, 1, err, errlen);
        if (r >= 0) {
                (void) json_object_set_new(result, "runs", json_integer((json_int_t) o->count));
                (void) json_object_set_new(result, "warmup", json_integer((json_int_t) o->warmup));
                (void) json_object_set_new(result, "argv", argv_json(cmd_true));
                (void) json_object_set_new(result, "concurrency", json_integer(1));
                r = execer_result(&e, result, err, errlen);
        }
        bench_sandboxes_release(b, &c, 1, result);
        execer_done_free(&e);
        bench_sandboxes_done(&c);
        return r;
}

/* ---- load ---- */

int bench_run_load(Bench *b, json_t *result, char *err, size_t errlen) {
        const BenchOptions *o = b->opt;
        unsigned conc = (unsigned) o->concurrency;
        BenchSandboxes c;
        Execer e;
        int r;

        r = bench_sandboxes_create(b, &c, "load", o->sandboxes, MIN(conc, 16u), true, "set-up", NULL, err, errlen);
        if (r >= 0)
                r = execer_init(&e, b, &c, "load");
        if (r < 0) {
                bench_sandboxes_release(b, &c, conc, result); /* what the set-up made before it failed */
                bench_sandboxes_done(&c);
                return r;
        }
        e.argv = cmd_printf;
        e.expect_stdout = "x";
        e.scoped = !o->exclusive;
        e.limit = o->duration > 0 ? 0 : o->execs;
        /* The warm-up runs first, at full concurrency, as its own run: the measured phase (and the
         * --duration clock) starts with every connection open and every sandbox used once. */
        if (o->warmup > 0) {
                Execer w;
                r = execer_init(&w, b, &c, "load");
                if (r >= 0) {
                        w.argv = cmd_printf;
                        w.expect_stdout = "x";
                        w.scoped = e.scoped;
                        w.warmup = o->warmup;
                        w.deadline = 1; /* only the warm-up */
                        r = execer_run(&w, conc, err, errlen);
                        execer_done_free(&w);
                }
        }
        if (o->duration > 0)
                e.deadline = now_monotonic_usec() + o->duration;
        if (r >= 0)
                r = execer_run(&e, conc, err, errlen);
        if (r >= 0) {
                (void) json_object_set_new(result, "sandboxes", json_integer((json_int_t) o->sandboxes));
                (void) json_object_set_new(result, "concurrency", json_integer(conc));
                (void) json_object_set_new(result, "exclusive", json_boolean(o->exclusive));
                if (o->duration > 0)
                        (void) json_object_set_new(result, "duration_s", json_real(bench_round3((double) o->duration / 1e6)));
                else
                        (void) json_object_set_new(result, "execs", json_integer((json_int_t) o->execs));
                (void) json_object_set_new(result, "warmup", json_integer((json_int_t) o->warmup));
                (void) json_object_set_new(result, "argv", argv_json(cmd_printf));
                (void) json_object_set_new(result, "in_flight_max", json_integer(e.in_flight_max));
                r = execer_result(&e, result, err, errlen);
        }
        bench_sandboxes_release(b, &c, conc, result);
        execer_done_free(&e);
        bench_sandboxes_done(&c);
        return r;
}

/* ---- create ---- */

int bench_run_create(Bench *b, json_t *result, char *err, size_t errlen) {
        const BenchOptions *o = b->opt;
        BenchSandboxes c;
        double wall = 0;
        int r;

        r = bench_sandboxes_create(b, &c, "create", o->count, (unsigned) o->concurrency, false, "create", &wall, err, errlen);
        if (r >= 0) {
                (void) json_object_set_new(result, "count", json_integer((json_int_t) o->count));
                (void) json_object_set_new(result, "concurrency", json_integer((json_int_t) o->concurrency));
                (void) json_object_set_new(result, "created", json_integer((json_int_t) c.created));
                (void) json_object_set_new(result, "failures", json_integer((json_int_t) c.errors.total));
                (void) json_object_set_new(result, "errors", c.errors.counts ? json_incref(c.errors.counts) : json_object());
                (void) json_object_set_new(result, "wall_s", json_real(bench_round3(wall)));
                (void) json_object_set_new(result, "creations_per_s",
                                           json_real(bench_round3(wall > 0 ? (double) c.created / wall : 0)));
                (void) json_object_set_new(result, "latency", bench_samples_json(&c.lat));
        }
        bench_sandboxes_release(b, &c, (unsigned) o->concurrency, result);
        bench_sandboxes_done(&c);
        return r;
}

/* ---- the daemon's memory ---- */

typedef struct ProcSnapshot {
        uint64_t rss_kib, threads, spawner_rss_kib, host_processes, daemon_tree_processes;
        bool have_spawner, have_host, have_tree;
} ProcSnapshot;

/* Where the figures come from, resolved once per run. */
typedef struct DaemonProbe {
        BenchSource source;             /* PROC or DAEMON */
        pid_t pid;                      /* PROC: on this host; DAEMON: as the daemon sees itself */
} DaemonProbe;

static pid_t spawner_pid(const Bench *b) {
        json_int_t v = json_integer_value(json_object_get(b->daemon, "spawner_pid"));
        return v > 0 ? (pid_t) v : 0;
}

static int proc_snapshot(const Bench *b, pid_t pid, ProcSnapshot *ret, char *err, size_t errlen) {
        ProcSnapshot s = {};
        pid_t sp = spawner_pid(b);
        int r;

        r = bench_proc_rss_kib(pid, &s.rss_kib);
        if (r < 0) {
                (void) bsprintf(err, errlen, "NO_DAEMON_PID: cannot read /proc/%d/status: %s", (int) pid, strerror(-r));
                return r;
        }
        (void) bench_proc_threads(pid, &s.threads);
        s.have_host = bench_proc_count(&s.host_processes) >= 0;
        s.have_tree = bench_proc_tree_count(pid, &s.daemon_tree_processes) >= 0;
        s.have_spawner = sp > 0 && bench_proc_rss_kib(sp, &s.spawner_rss_kib) >= 0;
        *ret = s;
        return 0;
}

/* The "process" block of the authenticated /healthz: {pid, rss_bytes, threads, children}. */
static int daemon_process(const Bench *b, json_t **ret_h, const json_t **ret_p, char *err, size_t errlen) {
        _cleanup_json_ json_t *h = NULL;
        const json_t *p;
        int r;

        r = bench_get_json(b, "/healthz", &h, err, errlen);
        if (r < 0)
                return r;
        p = json_object_get(h, "process");
        if (!json_is_object(p) || json_integer_value(json_object_get(p, "pid")) <= 0 ||
            !json_is_integer(json_object_get(p, "rss_bytes"))) {
                (void) bsprintf(err, errlen, "NO_PROCESS_REPORT: GET /healthz has no \"process\" block with pid and rss_bytes "
                                "(a daemon older than this client?)");
                return -EPROTO;
        }
        *ret_p = p;
        *ret_h = TAKE_PTR(h);
        return 0;
}

static int api_snapshot(const Bench *b, ProcSnapshot *ret, char *err, size_t errlen) {
        _cleanup_json_ json_t *h = NULL;
        const json_t *p, *ch;
        ProcSnapshot s = {};
        int r;

        r = daemon_process(b, &h, &p, err, errlen);
        if (r < 0)
                return r;
        s.rss_kib = (uint64_t) MAX(json_integer_value(json_object_get(p, "rss_bytes")), 0) / 1024;
        s.threads = (uint64_t) MAX(json_integer_value(json_object_get(p, "threads")), 0);
        ch = json_object_get(p, "children");
        s.have_tree = json_is_integer(ch) && json_integer_value(ch) >= 0;
        if (s.have_tree)
                s.daemon_tree_processes = (uint64_t) json_integer_value(ch) + 1; /* + the daemon, as from /proc */
        *ret = s;
        return 0;
}

static int snapshot(const Bench *b, const DaemonProbe *p, ProcSnapshot *ret, char *err, size_t errlen) {
        return p->source == BENCH_SOURCE_DAEMON ? api_snapshot(b, ret, err, errlen) : proc_snapshot(b, p->pid, ret, err, errlen);
}

static json_t *snapshot_json(const ProcSnapshot *s) {
        json_t *o = json_pack("{s:I, s:I}", "daemon_rss_kib", (json_int_t) s->rss_kib, "daemon_threads", (json_int_t) s->threads);

        if (o && s->have_host)
                (void) json_object_set_new(o, "host_processes", json_integer((json_int_t) s->host_processes));
        if (o && s->have_tree)
                (void) json_object_set_new(o, "daemon_tree_processes", json_integer((json_int_t) s->daemon_tree_processes));
        if (o && s->have_spawner)
                (void) json_object_set_new(o, "spawner_rss_kib", json_integer((json_int_t) s->spawner_rss_kib));
        return o;
}

/* --source auto: /proc when the daemon is found on this host (--daemon-pid, or the listener on the
 * URL's port), else the daemon's own report. */
static int daemon_probe(const Bench *b, DaemonProbe *ret, char *err, size_t errlen) {
        BenchSource src = b->opt->source;
        int r;

        if (b->opt->daemon_pid > 0) {
                *ret = (DaemonProbe) { BENCH_SOURCE_PROC, b->opt->daemon_pid };
                return 0;
        }
        if (src != BENCH_SOURCE_DAEMON) {
                pid_t pid;
                r = bench_proc_find_listener(client_base_url(b->client), &pid);
                if (r >= 0) {
                        *ret = (DaemonProbe) { BENCH_SOURCE_PROC, pid };
                        return 0;
                }
                if (src == BENCH_SOURCE_PROC) {
                        (void) bsprintf(err, errlen,
                                        "NO_DAEMON_PID: cannot find the process listening on %s (%s); pass --daemon-pid PID "
                                        "or --source daemon",
                                        client_base_url(b->client),
                                        r == -EREMOTE ? "not a local address" : r == -ESRCH ? "no listener found" : strerror(-r));
                        return r;
                }
        }
        {
                _cleanup_json_ json_t *h = NULL;
                const json_t *p;
                r = daemon_process(b, &h, &p, err, errlen);
                if (r < 0)
                        return r;
                *ret = (DaemonProbe) { BENCH_SOURCE_DAEMON, (pid_t) json_integer_value(json_object_get(p, "pid")) };
        }
        return 0;
}

static void probe_json(const DaemonProbe *p, json_t *result) {
        (void) json_object_set_new(result, "daemon_pid", json_integer(p->pid));
        (void) json_object_set_new(result, "source", json_string(p->source == BENCH_SOURCE_DAEMON ? "daemon" : "proc"));
}

/* With /proc as the source, the daemon's own report next to it (a cross-check: same process, read
 * a moment apart); left out when the daemon has none. */
static void cross_check_json(const Bench *b, const DaemonProbe *p, json_t *result) {
        _cleanup_json_ json_t *h = NULL;
        const json_t *proc;
        char ignored[BENCH_ERR_MAX];

        if (p->source != BENCH_SOURCE_PROC || daemon_process(b, &h, &proc, ignored, sizeof ignored) < 0)
                return;
        (void) json_object_set_new(result, "daemon_report", json_deep_copy(proc));
}

int bench_run_idle(Bench *b, json_t *result, char *err, size_t errlen) {
        const BenchOptions *o = b->opt;
        ProcSnapshot before, after;
        BenchSandboxes c = {};
        double wall = 0;
        DaemonProbe dp;
        int r;

        r = daemon_probe(b, &dp, err, errlen);
        if (r < 0)
                return r;
        r = snapshot(b, &dp, &before, err, errlen);
        if (r < 0)
                return r;
        r = bench_sandboxes_create(b, &c, "idle", o->count, (unsigned) o->concurrency, true, "idle: creating", &wall, err, errlen);
        if (r >= 0 && o->settle > 0) {
                bench_progress(b, true, "idle: %" PRIu64 " sandboxes created, settling", c.created);
                (void) usleep((useconds_t) MIN(o->settle, (usec_t) 3600 * USEC_PER_SEC));
                bench_progress_clear(b);
        }
        if (r >= 0)
                r = snapshot(b, &dp, &after, err, errlen);
        if (r >= 0) {
                int64_t drss = (int64_t) after.rss_kib - (int64_t) before.rss_kib;
                probe_json(&dp, result);
                cross_check_json(b, &dp, result);
                (void) json_object_set_new(result, "count", json_integer((json_int_t) o->count));
                (void) json_object_set_new(result, "created", json_integer((json_int_t) c.created));
                (void) json_object_set_new(result, "creations_per_s",
                                           json_real(bench_round3(wall > 0 ? (double) c.created / wall : 0)));
                (void) json_object_set_new(result, "settle_s", json_real(bench_round3((double) o->settle / 1e6)));
                (void) json_object_set_new(result, "before", snapshot_json(&before));
                (void) json_object_set_new(result, "after", snapshot_json(&after));
                (void) json_object_set_new(result, "daemon_rss_growth_kib", json_integer(drss));
                (void) json_object_set_new(result, "daemon_rss_growth_mib", json_real(bench_round3((double) drss / 1024.0)));
                (void) json_object_set_new(result, "rss_per_sandbox_bytes",
                                           json_real(bench_round3(c.created ? (double) drss * 1024.0 / (double) c.created : 0)));
                if (before.have_host && after.have_host)
                        (void) json_object_set_new(result, "new_processes",
                                                   json_integer((json_int_t) after.host_processes - (json_int_t) before.host_processes));
                if (before.have_tree && after.have_tree)
                        (void) json_object_set_new(result, "new_daemon_tree_processes",
                                                   json_integer((json_int_t) after.daemon_tree_processes -
                                                                (json_int_t) before.daemon_tree_processes));
                (void) json_object_set_new(result, "new_daemon_threads",
                                           json_integer((json_int_t) after.threads - (json_int_t) before.threads));
        }
        bench_sandboxes_release(b, &c, (unsigned) o->concurrency, result);
        bench_sandboxes_done(&c);
        return r;
}

typedef struct MemorySampler {
        const Bench *b;
        DaemonProbe probe;
        unsigned want;
        usec_t full_since;
        ProcSnapshot peak;
        unsigned samples;
} MemorySampler;

/* While every slot has its exec in flight (and for at least half a second, so the daemon has
 * admitted and launched them all), sample the daemon and keep the peak. */
static void memory_sample(Execer *e, unsigned in_flight) {
        MemorySampler *m = e->sample_ud;
        ProcSnapshot s;
        char err[BENCH_ERR_MAX];

        if (e->issued < e->warmup + m->want || in_flight < m->want) {
                m->full_since = 0;
                return;
        }
        if (m->full_since == 0)
                m->full_since = now_monotonic_usec();
        if (now_monotonic_usec() - m->full_since < 500 * USEC_PER_MSEC)
                return;
        if (snapshot(m->b, &m->probe, &s, err, sizeof err) < 0)
                return;
        m->peak.rss_kib = MAX(m->peak.rss_kib, s.rss_kib);
        m->peak.threads = MAX(m->peak.threads, s.threads);
        m->peak.spawner_rss_kib = MAX(m->peak.spawner_rss_kib, s.spawner_rss_kib);
        m->peak.have_spawner = s.have_spawner;
        m->peak.have_host = s.have_host;
        m->peak.have_tree = s.have_tree;
        m->peak.host_processes = MAX(m->peak.host_processes, s.host_processes);
        m->peak.daemon_tree_processes = MAX(m->peak.daemon_tree_processes, s.daemon_tree_processes);
        m->samples++;
}

int bench_run_memory(Bench *b, json_t *result, char *err, size_t errlen) {
        const BenchOptions *o = b->opt;
        unsigned conc = (unsigned) o->concurrency;
        uint64_t n_sandboxes = o->sandboxes ? o->sandboxes : (conc + 7) / 8;
        _cleanup_free_ char *sleep_arg = NULL;
        MemorySampler m = { .b = b, .want = conc };
        ProcSnapshot idle;
        BenchSandboxes c = {};
        Execer e;
        const char *argv[3];
        int r;

        r = daemon_probe(b, &m.probe, err, errlen);
        if (r < 0)
                return r;
        sleep_arg = strprintf("%.3f", (double) o->hold / 1e6);
        if (!sleep_arg)
                return -ENOMEM;
        argv[0] = "/bin/sleep";
        argv[1] = sleep_arg;
        argv[2] = NULL;
        r = bench_sandboxes_create(b, &c, "memory", n_sandboxes, 8, true, "set-up", NULL, err, errlen);
        /* One exec per sandbox first, so the idle figure includes what a used sandbox keeps. */
        if (r >= 0) {
                Execer w;
                r = execer_init(&w, b, &c, "memory: warm-up");
                if (r >= 0) {
                        w.argv = cmd_true;
                        w.scoped = true;
                        w.warmup = n_sandboxes;
                        w.deadline = 1;
                        r = execer_run(&w, 1, err, errlen);
                        execer_done_free(&w);
                }
        }
        if (r >= 0)
                r = snapshot(b, &m.probe, &idle, err, errlen);
        if (r >= 0)
                r = execer_init(&e, b, &c, "memory");
        if (r < 0) {
                bench_sandboxes_release(b, &c, 8, result);
                bench_sandboxes_done(&c);
                return r;
        }
        e.argv = argv;
        e.scoped = true;
        e.limit = conc;
        e.sample = memory_sample;
        e.sample_ud = &m;
        r = execer_run(&e, conc, err, errlen);
        if (r >= 0 && m.samples == 0) {
                (void) bsprintf(err, errlen,
                                "NO_SAMPLE: the %u execs were never all in flight for 0.5 s (%" PRIu64 " of them failed); "
                                "use a longer --hold", conc, e.failures + e.conflicts + e.limited);
                r = -EAGAIN;
        }
        if (r >= 0) {
                int64_t d = (int64_t) m.peak.rss_kib - (int64_t) idle.rss_kib;
                int64_t ds = (int64_t) m.peak.spawner_rss_kib - (int64_t) idle.spawner_rss_kib;
                probe_json(&m.probe, result);
                (void) json_object_set_new(result, "concurrency", json_integer(conc));
                (void) json_object_set_new(result, "sandboxes", json_integer((json_int_t) n_sandboxes));
                (void) json_object_set_new(result, "argv", argv_json(argv));
                (void) json_object_set_new(result, "execs_ok", json_integer((json_int_t) e.ok));
                (void) json_object_set_new(result, "failures", json_integer((json_int_t) (e.failures + e.conflicts + e.limited)));
                (void) json_object_set_new(result, "errors", e.errors.counts ? json_incref(e.errors.counts) : json_object());
                (void) json_object_set_new(result, "samples", json_integer(m.samples));
                (void) json_object_set_new(result, "idle", snapshot_json(&idle));
                (void) json_object_set_new(result, "busy_peak", snapshot_json(&m.peak));
                (void) json_object_set_new(result, "daemon_rss_growth_kib", json_integer(d));
                (void) json_object_set_new(result, "daemon_kib_per_exec", json_real(bench_round3((double) d / conc)));
                (void) json_object_set_new(result, "daemon_mib_per_exec", json_real(bench_round3((double) d / conc / 1024.0)));
                if (idle.have_spawner && m.peak.have_spawner)
                        (void) json_object_set_new(result, "spawner_kib_per_exec", json_real(bench_round3((double) ds / conc)));
        }
        bench_sandboxes_release(b, &c, 8, result);
        execer_done_free(&e);
        bench_sandboxes_done(&c);
        return r;
}
