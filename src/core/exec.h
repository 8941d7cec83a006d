/* SPDX-License-Identifier: MIT */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon.h"
#include "error.h"
#include "exec-output.h"
#include "isolation.h"
#include "principal.h"
#include "store.h"

/* The exec engine: the lifecycle of one exec, from the request to its stored record.
 *
 *   request -> fence + idempotency in memory -> scope hold + per-sandbox cap -> admission
 *   (maybe queued, parked) -> store exec_begin (RUNNING, committed) -> spawner_launch ->
 *   output pump + deadline -> exit (spawner reader thread) -> pump drains to EOF ->
 *   store exec_finish -> every waiter answered -> hold, count and slot released.
 *
 * A running exec lives in memory (an Exec, reference-counted) and is found again by
 * (sandbox, exec_id) for retries, long-polls, output reads, SSE and cancel; once it has
 * ended, its record comes from the store. Callers never see the difference: every lookup
 * returns an Exec, live or built from the stored record.
 *
 * Threads: the start and the launch run on the caller's thread (an HTTP thread on the fast
 * path; a job-pool thread for execs leaving the admission queue). Everything after the
 * launch runs on the pump thread. Waiter callbacks always run on the pump thread. */

typedef struct ExecEngine ExecEngine;
typedef struct Exec Exec;
typedef struct Spawner Spawner;

typedef enum ExecStream {
        EXEC_STDOUT = 0,
        EXEC_STDERR = 1,
} ExecStream;

/* Runs FN(ARG) on a job-pool thread. 0, or -errno (then FN is not called). */
typedef int (*ExecSubmitFn)(void *userdata, void (*fn)(void *arg), void *arg);

typedef struct ExecEngineOptions {
        Spawner *spawner;                   /* NULL: execs answer 503 SANDBOX_ISOLATION_UNAVAILABLE */
        IsolationLevel level;
        NetworkMode network;
        ExecSubmitFn submit;
        void *submit_userdata;
        const char *unavailable_reason;     /* with spawner == NULL: why */
} ExecEngineOptions;

/* Creates DATA/execs (root 0700) and DATA/exec_key, starts the output pump. */
int exec_engine_new(Daemon *d, const ExecEngineOptions *opts, ExecEngine **ret, char *errbuf, size_t errlen);
void exec_engine_free(ExecEngine *e);

/* A validated request (the API layer checks every field first). */
typedef struct ExecRequest {
        const char *sandbox_id;
        uint64_t generation;
        const char *exec_id;                /* NULL = generated */
        const char *const *argv;
        size_t argc;
        const char *cwd;                    /* normalised, inside the four roots */
        const char *const *env_names;
        const char *const *env_values;
        size_t envc;
        uint64_t timeout_seconds;
        bool background;
        const char *exec_scope;             /* NULL or "" = the whole sandbox */
        bool has_stdin;
        const void *stdin_data;
        size_t stdin_size;
        bool output_base64;
} ExecRequest;

/* Starts an exec, or attaches to the one with the same exec_id (same request: attached;
 * another request: 409 EXEC_ID_CONFLICT; finished: its stored record). Returns 0 and an
 * Exec reference in *RET (which may already have ended, or failed: see exec_error()), or
 * -errno with E filled for what is refused before anything is registered (404, 409, 429,
 * 503). */
int exec_start(ExecEngine *e, const Principal *p, const ExecRequest *req, Exec **ret, Error *err);

/* The exec (live or stored) of a sandbox the principal may see, with the generation
 * checked: 404 SANDBOX_NOT_FOUND / EXEC_NOT_FOUND, 409 STALE_SANDBOX_GENERATION. */
int exec_lookup(ExecEngine *e, const Principal *p, const char *sandbox_id, uint64_t generation,
                const char *exec_id, Exec **ret, Error *err);

/* Cancels: SIGTERM to the tree, SIGKILL after SANDBOX_TERMINATE_GRACE_SECONDS; the exec
 * ends CANCELLED. *RET_CANCELLED = false if it had ended already. */
int exec_cancel(ExecEngine *e, const Principal *p, const char *sandbox_id, uint64_t generation,
                const char *exec_id, bool *ret_cancelled, Error *err);

Exec *exec_ref(Exec *x);
void exec_unref(Exec *x);
static inline void exec_unrefp(Exec **x) {
        if (*x)
                exec_unref(*x);
}

/* --- waiting --- */

typedef struct ExecWaiter ExecWaiter;
struct ExecWaiter {
        /* Called once, on the pump thread, without engine locks; may free W. */
        void (*fn)(ExecWaiter *w, Exec *x);
        bool until_end;                     /* false: also satisfied once the exec runs */
        /* Private. */
        Exec *exec;
        ExecWaiter *prev, *next;
        PumpTimer timer;
        bool linked;
};

/* Returns 1 if W's condition holds now (FN is not called: answer at once), or 0: FN will
 * be called when it holds, or after TIMEOUT_USEC (0 = no timeout) at the latest. */
int exec_wait(Exec *x, ExecWaiter *w, usec_t timeout_usec);

/* Observers (SSE streams): WAKE is called whenever output arrives and at the end, with
 * the engine's lock held: it must only wake something. */
typedef struct ExecObserver ExecObserver;
struct ExecObserver {
        void (*wake)(ExecObserver *o);
        ExecObserver *prev, *next;          /* private */
        bool linked;
};
void exec_observe(Exec *x, ExecObserver *o);
/* After it returns, WAKE is not running and will not be called again. */
void exec_unobserve(Exec *x, ExecObserver *o);

/* --- reading --- */

/* Set when the exec could not start (503 SANDBOX_WORKER_BUSY, 400 SANDBOX_INVALID_CWD, ...):
 * answer the error instead of the record. NULL otherwise. Stable once ended. */
const Error *exec_error(Exec *x);
bool exec_has_ended(Exec *x);
/* Launched (RUNNING) or ended. */
bool exec_has_started(Exec *x);
ExecStatus exec_status(Exec *x);
bool exec_output_base64(Exec *x);
const char *exec_id(Exec *x);

/* The record as the API answers it (Sandloom's fields plus ours), with the output so far
 * as text (U+FFFD for invalid UTF-8) or base64. */
json_t *exec_to_json(Exec *x, bool base64);
/* {"exec_id", "status", "started_at"} for the SSE start event. */
json_t *exec_start_json(Exec *x);

/* Output bytes available in STREAM now, and whether more may come. */
void exec_output_state(Exec *x, ExecStream stream, uint64_t *ret_available, bool *ret_final);
/* Reads up to MAX bytes of STREAM at OFFSET (never past what is available). */
ssize_t exec_read(Exec *x, ExecStream stream, uint64_t offset, void *buf, size_t max);

/* --- sandbox release and daemon lifecycle --- */

/* Before a release: no new exec starts for this sandbox until release_end; every running
 * or queued exec of it is killed and ends CANCELLED; the spawner drops the sandbox's
 * context. Returns once the kills are sent (the exclusive hold then waits for the ends). */
void exec_engine_release_begin(ExecEngine *e, const char *internal_id);
void exec_engine_release_end(ExecEngine *e, const char *internal_id);

/* Shutdown, step 1: new execs get 503 SANDBOX_SHUTTING_DOWN, queued ones too. */
void exec_engine_stop_admitting(ExecEngine *e);
/* Execs registered (queued, starting or running). */
unsigned exec_engine_active(ExecEngine *e);
/* Shutdown, step 2: kills everything still running; those end WORKER_LOST. Waits up to
 * TIMEOUT_USEC for their records. */
void exec_engine_kill_all(ExecEngine *e, usec_t timeout_usec);
/* Shutdown, step 3: runs what is still in the launch queue and joins the launch threads
 * (they use the spawner and the sampler: call before stopping either). Idempotent. */
void exec_engine_stop_launches(ExecEngine *e);

/* For /healthz: {"running", "queued", "max_running", "queue_length"}. */
json_t *exec_engine_report(ExecEngine *e);
