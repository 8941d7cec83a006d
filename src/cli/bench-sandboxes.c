/* SPDX-License-Identifier: MIT */
/* Creating and releasing the sandboxes a run works with, through the load generator: resolve then
 * connect on one slot, N of them in flight; release (DELETE) at the end, untimed. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "json-util.h"
#include "string-util.h"

/* "HTTP 409 SANDBOX_EXEC_SCOPE_BUSY" or "no response: ..." — short, for counting by kind. */
void bench_reply_error_kind(const BenchReply *rep, const json_t *body, char *buf, size_t n) {
        const char *code = client_error_code(body);

        if (rep->status == 0)
                (void) bsprintf(buf, n, "no response: %s", rep->error ? rep->error : "?");
        else if (code)
                (void) bsprintf(buf, n, "HTTP %ld %s", rep->status, code);
        else
                (void) bsprintf(buf, n, "HTTP %ld", rep->status);
}

/* The one-line error a failed set-up call ends the run with: "CODE: message". */
int bench_setup_error(const BenchReply *rep, const json_t *body, const char *what, char *err, size_t errlen) {
        char line[BENCH_ERR_MAX];

        if (rep->status == 0) {
                (void) bsprintf(err, errlen, "UNREACHABLE: %s: no response from the daemon: %s", what,
                                rep->error ? rep->error : "?");
                return -ECONNREFUSED;
        }
        (void) bsprintf(err, errlen, "%s (%s)", client_error_line(rep->status, body, line, sizeof line), what);
        return -EPROTO;
}

void bench_sandbox_id(const Bench *b, const char *kind, uint64_t i, char *buf, size_t n) {
        (void) bsprintf(buf, n, "bench-%s-%s-%" PRIu64, b->run_tag, kind, i);
}

/* ---- creating and releasing sandboxes ---- */

enum { PHASE_RESOLVE, PHASE_CONNECT };

static int creator_next(void *ud, unsigned slot, BenchCall *call) {
        BenchSandboxes *c = ud;
        char id[160];
        uint64_t i;

        if (c->next_index >= c->n || bench_interrupted)
                return 0;
        i = c->next_index++;
        bench_sandbox_id(c->b, c->kind, i, id, sizeof id);
        call->method = "POST";
        call->tag = i;
        call->tag2 = PHASE_RESOLVE;
        (void) bsprintf(call->path, sizeof call->path, "/api/v1/sandboxes/resolve");
        call->body = strprintf("{\"sandbox_id\":\"%s\",\"workspace_scope_id\":\"bench-%s\"}", id, c->b->run_tag);
        return call->body ? 1 : -ENOMEM;
}

/* Each slot creates one sandbox at a time: its resolve, then its connect as the slot's next call
 * (done() notes the generation, next() sends the connect before taking a new sandbox). */
typedef struct CreatorSlot {
        bool pending_connect;
        uint64_t index, generation;
        double resolve_ms;
} CreatorSlot;

typedef struct CreatorRun {
        BenchSandboxes *c;
        CreatorSlot *slots;
} CreatorRun;

static int creator_run_next(void *ud, unsigned slot, BenchCall *call) {
        CreatorRun *cr = ud;
        CreatorSlot *s = &cr->slots[slot];
        char id[160];

        if (!s->pending_connect)
                return creator_next(cr->c, slot, call);
        s->pending_connect = false;
        bench_sandbox_id(cr->c->b, cr->c->kind, s->index, id, sizeof id);
        call->method = "POST";
        call->tag = s->index;
        call->tag2 = PHASE_CONNECT;
        (void) bsprintf(call->path, sizeof call->path, "/api/v1/sandboxes/%s", id);
        call->body = strprintf("{\"generation\":%" PRIu64 "}", s->generation);
        return call->body ? 1 : -ENOMEM;
}

static int creator_run_done(void *ud, unsigned slot, BenchCall *call, const BenchReply *rep, char *err, size_t errlen) {
        CreatorRun *cr = ud;
        BenchSandboxes *c = cr->c;
        CreatorSlot *s = &cr->slots[slot];
        _cleanup_json_ json_t *body = NULL;
        char kind[160];
        json_int_t gen;

        body = rep->size > 0 ? json_loadb(rep->body, rep->size, 0, NULL) : NULL;
        if (rep->status != 200) {
                if (c->fatal)
                        return bench_setup_error(rep, body, call->tag2 == PHASE_RESOLVE ? "resolve" : "connect", err, errlen);
                bench_reply_error_kind(rep, body, kind, sizeof kind);
                bench_errors_add(&c->errors, kind);
                return 0;
        }
        if (call->tag2 == PHASE_RESOLVE) {
                gen = json_integer_value(json_object_get(body, "generation"));
                if (gen <= 0) {
                        (void) bsprintf(err, errlen, "BAD_REPLY: resolve answered without a generation");
                        return -EBADMSG;
                }
                c->resolved[call->tag] = true;
                s->pending_connect = true;
                s->index = call->tag;
                s->generation = (uint64_t) gen;
                s->resolve_ms = rep->latency_ms;
                return 0;
        }
        c->gens[call->tag] = s->generation;
        c->created++;
        if (bench_samples_add(&c->lat, s->resolve_ms + rep->latency_ms) < 0)
                return -ENOMEM;
        return 0;
}

static void creator_tick(void *ud, unsigned in_flight) {
        CreatorRun *cr = ud;
        BenchSandboxes *c = cr->c;

        bench_progress(c->b, false, "%s: %" PRIu64 "/%" PRIu64 " sandboxes", c->progress_label, c->created, c->n);
}

void bench_sandboxes_done(BenchSandboxes *c) {
        free(c->gens);
        free(c->resolved);
        bench_samples_done(&c->lat);
        bench_errors_done(&c->errors);
}

/* Resolves and connects N sandboxes "bench-TAG-KIND-i" with CONCURRENCY slots. */
int bench_sandboxes_create(Bench *b, BenchSandboxes *c, const char *kind, uint64_t n, unsigned concurrency, bool fatal,
                            const char *label, double *ret_wall_s, char *err, size_t errlen) {
        _cleanup_free_ CreatorSlot *slots = NULL;
        CreatorRun cr = { .c = c };
        BenchLoop loop = { .next = creator_run_next, .done = creator_run_done, .tick = creator_tick, .ud = &cr };
        usec_t t0;
        int r;

        *c = (BenchSandboxes) { .b = b, .kind = kind, .n = n, .fatal = fatal, .progress_label = label };
        c->gens = calloc(n ? n : 1, sizeof *c->gens);
        c->resolved = calloc(n ? n : 1, sizeof *c->resolved);
        slots = calloc(concurrency ? concurrency : 1, sizeof *slots);
        if (!c->gens || !c->resolved || !slots) {
                (void) bsprintf(err, errlen, "Out of memory.");
                return -ENOMEM;
        }
        cr.slots = slots;
        t0 = now_monotonic_usec();
        r = bench_http_run(b->http, (unsigned) MIN((uint64_t) concurrency, MAX(n, (uint64_t) 1)), &loop, err, errlen);
        if (ret_wall_s)
                *ret_wall_s = monotonic_seconds_since(t0);
        bench_progress_clear(b);
        return r;
}

typedef struct Releaser {
        Bench *b;
        const char *kind;
        const bool *resolved;
        uint64_t n, next_index, released, failed;
} Releaser;

static int releaser_next(void *ud, unsigned slot, BenchCall *call) {
        Releaser *rl = ud;
        char id[160];

        if (!rl->resolved)
                return 0; /* the set-up could not even allocate: nothing was created */
        while (rl->next_index < rl->n && !rl->resolved[rl->next_index])
                rl->next_index++;
        if (rl->next_index >= rl->n)
                return 0;
        bench_sandbox_id(rl->b, rl->kind, rl->next_index, id, sizeof id);
        call->method = "DELETE";
        call->tag = rl->next_index++;
        (void) bsprintf(call->path, sizeof call->path, "/api/v1/sandboxes/%s?reason=bench", id);
        return 1;
}

static int releaser_done(void *ud, unsigned slot, BenchCall *call, const BenchReply *rep, char *err, size_t errlen) {
        Releaser *rl = ud;

        if (rep->status == 200)
                rl->released++;
        else
                rl->failed++;
        return 0;
}

static void releaser_tick(void *ud, unsigned in_flight) {
        Releaser *rl = ud;
        bench_progress(rl->b, false, "releasing: %" PRIu64 "/%" PRIu64, rl->released, rl->n);
}

/* Releases (untimed) what create_sandboxes made; adds "released" to RESULT. Never fails the run. */
void bench_sandboxes_release(Bench *b, const BenchSandboxes *c, unsigned concurrency, json_t *result) {
        Releaser rl = { .b = b, .kind = c->kind, .resolved = c->resolved, .n = c->n };
        BenchLoop loop = { .next = releaser_next, .done = releaser_done, .tick = releaser_tick, .ud = &rl };
        char err[BENCH_ERR_MAX];

        if (b->opt->keep) {
                (void) json_object_set_new(result, "released", json_false());
                return;
        }
        (void) bench_http_run(b->http, MAX(1u, MIN(concurrency, 16u)), &loop, err, sizeof err);
        bench_progress_clear(b);
        (void) json_object_set_new(result, "released", json_integer((json_int_t) rl.released));
        if (rl.failed > 0)
                (void) json_object_set_new(result, "release_failures", json_integer((json_int_t) rl.failed));
}
