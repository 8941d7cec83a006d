/* SPDX-License-Identifier: MIT */
#pragma once

/* Shared by exec.c (the lifecycle), exec-record.c (records, JSON, reading) and
 * exec-engine.c (engine set-up, release, shutdown, pruning); not an interface. */

#include <pthread.h>
#include <stdatomic.h>

#include "admission.h"
#include "exec-env.h"
#include "exec-output.h"
#include "exec.h"
#include "holds.h"
#include "launch.h"
#include "spawner.h"


#define EXEC_SLOT_BUCKETS 256u
/* Threads that run launches (exec_begin + the spawner round trip): an HTTP thread only
 * hands the exec over, so that it never waits for a launch while the other connections of
 * its poll set (replies of ended execs among them) wait behind it. Twice the cores, at
 * least 4: more launches at once only contend in the kernel (the mount namespace lock,
 * cgroup v1 migrations) without starting more per second. */
#define EXEC_LAUNCH_THREADS_MAX 32u

typedef enum ExecPhase {
        EXEC_PHASE_PENDING,                 /* registered, not yet admitted */
        EXEC_PHASE_QUEUED,                  /* waiting in the admission queue */
        EXEC_PHASE_LAUNCHING,               /* exec_begin and spawner_launch under way */
        EXEC_PHASE_RUNNING,                 /* launched: output and exit come to the pump */
        EXEC_PHASE_DONE,                    /* record final (or a start error) */
} ExecPhase;

/* The execs of one sandbox in memory; exists while it has a user. */
typedef struct ExecSlot {
        char key[OPAQUE_ID_LEN + 1];        /* internal_id */
        Exec *execs;                        /* registered (not DONE) */
        unsigned count;
        unsigned users;                     /* registered execs + release markers */
        unsigned releasing;
        struct ExecSlot *next;
} ExecSlot;

struct ExecEngine {
        Daemon *d;
        Spawner *spawner;
        IsolationLevel level;
        NetworkMode network;
        ExecSubmitFn submit;
        void *submit_userdata;
        char unavailable[256];
        ExecPump *pump;
        Admission *admission;
        int execs_fd;                       /* DATA/execs: spool files */
        int null_fd;                        /* /dev/null: stdin without stdin */
        ExecHmac *hmac;                     /* keyed with DATA/exec_key */
        PumpTimer prune_timer;

        pthread_mutex_t launch_lock;        /* the launch queue */
        pthread_cond_t launch_cond;
        Exec *launch_head, *launch_tail;
        bool launch_stopping;
        pthread_t launchers[EXEC_LAUNCH_THREADS_MAX];
        unsigned n_launchers;

        pthread_mutex_t lock;               /* everything below, and every Exec's mutable state */
        pthread_cond_t idle;                /* registered dropped */
        ExecSlot *slots[EXEC_SLOT_BUCKETS];
        unsigned registered;
        bool shutting_down;                 /* no new exec */
        bool killing;                       /* kill_all: whatever still starts is refused */
};

struct Exec {
        atomic_uint refs;
        ExecEngine *engine;
        ExecSlot *slot;                     /* while registered */
        Exec *slot_prev, *slot_next;
        Exec *launch_next;                  /* in the launch queue */
        bool registered;
        ExecPhase phase;

        char owner[OWNER_MAX + 1];
        char sandbox_id[SANDBOX_ID_MAX + 1];
        char internal_id[OPAQUE_ID_LEN + 1];
        char lifecycle_id[OPAQUE_ID_LEN + 1];
        char exec_id[EXEC_ID_MAX + 1];
        char exec_uid[OPAQUE_ID_LEN + 1];
        char fingerprint[FINGERPRINT_LEN + 1];
        char principal[PRINCIPAL_NAME_MAX + 1];
        char scope[EXEC_SCOPE_MAX + 1];
        uint32_t uid;
        uint64_t generation;
        uint64_t timeout_seconds;
        bool background;
        bool output_base64;

        /* The request's payload, freed once launched. */
        char **argv;
        char **envp;
        char *argv_json;
        char *env_keys_json;
        char *cwd;
        int stdin_fd;

        Hold *hold;
        bool admitted;
        AdmissionWaiter adm;
        SpawnerExec *sx;
        ExecOutput out[2];
        bool launched;                      /* outputs in the pump: the end may be handled */
        bool exited;
        bool finishing;
        bool kill_now;                      /* release / shutdown: SIGKILL, no grace */
        SpawnerExit exit;
        ExecStatus forced;                  /* EXEC_RUNNING = none; else TIMED_OUT, CANCELLED, WORKER_LOST */
        PumpTimer deadline_timer, kill_timer, queue_timer, drain_timer;

        /* Per-step timing (CLOCK_MONOTONIC), logged at debug level. */
        usec_t t_request, t_admitted, t_begun, t_launched, t_spawned, t_exit, t_finished;

        ExecRecord rec;                     /* from exec_begin on; final once DONE */
        bool has_rec;
        Error error;                        /* a start failure: answered instead of the record */
        ExecWaiter *waiters;
        ExecObserver *observers;
};

/* exec.c */
Exec *exec_alloc(ExecEngine *e);
void exec_free_payload(Exec *x);
/* Timers hold a reference to X while armed. */
void exec_timer_arm(Exec *x, PumpTimer *t, usec_t when);
void exec_timer_disarm(Exec *x, PumpTimer *t);
/* Callbacks of a launched exec: the spawner's reader thread (exit), the pump (output). */
void exec_on_spawner_exit(SpawnerExec *sx, const SpawnerExit *exit, void *userdata);
void exec_on_output_data(ExecOutput *o);
void exec_on_output_eof(ExecOutput *o);
/* Pump calls; each takes over the reference exec_call() passed. */
void exec_check_end_call(void *userdata);
void exec_terminate_call(void *userdata);
void exec_notify_call(void *userdata);

/* exec-launch.c */
void exec_launch(Exec *x);
/* Ends X without a process: with ERR (may be NULL) as the answer and/or REC (taken; may be
 * NULL) as its record. Any thread. */
void exec_complete(Exec *x, const Error *err, ExecRecord *rec);
/* Pump thread: SIGTERM (then SIGKILL after the grace) or SIGKILL to X's tree. */
void exec_terminate(Exec *x, int sig);
int exec_call(Exec *x, void (*fn)(void *userdata));
void exec_kill_call(void *userdata);
/* Hands X (a reference is taken) to a launch thread: exec_launch() runs there. 0 or -errno
 * (stopping): then nothing was queued. Any thread; never blocks. */
int exec_launch_submit(Exec *x);

/* exec-record.c */
/* The sandbox record for an exec call: 404 / 409 as the API answers them. FOR_START also
 * requires READY. */
int exec_get_sandbox(ExecEngine *e, const Principal *p, const char *sandbox_id, uint64_t generation, bool for_start,
                     SandboxRecord *ret, Error *err);
int exec_store_error(Error *err, int r, const char *what);
/* An ended Exec (not registered) for a record read from the store; takes REC. */
int exec_from_record(ExecEngine *e, ExecRecord *rec, Exec **ret);
/* Opens the spool file of a stored (not inline) stream for reading. */
void exec_open_spooled(Exec *x, ExecStream s);
void exec_spool_name(const char *exec_uid, ExecStream s, char *buf, size_t size);

/* exec-engine.c: the in-memory registry (with e->lock held) */
ExecSlot *exec_slot_get(ExecEngine *e, const char *key);
ExecSlot *exec_slot_find(ExecEngine *e, const char *key);
void exec_slot_put(ExecEngine *e, ExecSlot *slot);
Exec *exec_slot_find_exec(ExecSlot *slot, const char *lifecycle_id, const char *exec_id);
void exec_register(ExecSlot *slot, Exec *x);
void exec_unregister(Exec *x);
