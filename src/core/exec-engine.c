/* SPDX-License-Identifier: MIT */
/* The engine around the execs: set-up, the in-memory registry by sandbox, release,
 * shutdown, retention pruning and the /healthz numbers. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "exec-internal.h"
#include "json-util.h"
#include "log.h"
#include "string-util.h"
#include "time-util.h"

#define PRUNE_FIRST_USEC (60 * USEC_PER_SEC)
#define PRUNE_INTERVAL_USEC (3600 * USEC_PER_SEC)
#define PRUNE_BATCH 1000u

/* ---- the registry (e->lock held) ---- */

static unsigned slot_hash(const char *key) {
        uint32_t h = 2166136261u; /* FNV-1a */

        for (const unsigned char *p = (const unsigned char *) key; *p; p++) {
                h ^= *p;
                h *= 16777619u;
        }
        return h % EXEC_SLOT_BUCKETS;
}

ExecSlot *exec_slot_find(ExecEngine *e, const char *key) {
        for (ExecSlot *s = e->slots[slot_hash(key)]; s; s = s->next)
                if (streq(s->key, key))
                        return s;
        return NULL;
}

ExecSlot *exec_slot_get(ExecEngine *e, const char *key) {
        ExecSlot *s = exec_slot_find(e, key);
        unsigned b;

        if (!s) {
                s = calloc(1, sizeof *s);
                if (!s)
                        return NULL;
                if (strscpy(s->key, sizeof s->key, key) < 0) {
                        free(s);
                        return NULL;
                }
                b = slot_hash(key);
                s->next = e->slots[b];
                e->slots[b] = s;
        }
        s->users++;
        return s;
}

void exec_slot_put(ExecEngine *e, ExecSlot *slot) {
        ExecSlot **p;

        if (--slot->users > 0)
                return;
        for (p = &e->slots[slot_hash(slot->key)]; *p; p = &(*p)->next)
                if (*p == slot) {
                        *p = slot->next;
                        break;
                }
        free(slot);
}

Exec *exec_slot_find_exec(ExecSlot *slot, const char *lifecycle_id, const char *exec_id_) {
        for (Exec *x = slot->execs; x; x = x->slot_next)
                if (streq(x->exec_id, exec_id_) && streq(x->lifecycle_id, lifecycle_id))
                        return x;
        return NULL;
}

void exec_register(ExecSlot *slot, Exec *x) {
        x->slot = slot;
        x->slot_prev = NULL;
        x->slot_next = slot->execs;
        if (slot->execs)
                slot->execs->slot_prev = x;
        slot->execs = x;
        slot->count++;
        x->registered = true;
}

void exec_unregister(Exec *x) {
        ExecSlot *slot = x->slot;

        if (x->slot_prev)
                x->slot_prev->slot_next = x->slot_next;
        else
                slot->execs = x->slot_next;
        if (x->slot_next)
                x->slot_next->slot_prev = x->slot_prev;
        x->slot_prev = x->slot_next = NULL;
        slot->count--;
        x->registered = false;
        x->slot = NULL;
        exec_slot_put(x->engine, slot);
}

/* Every registered exec (of sandbox KEY, or all), referenced, to act on outside the lock.
 * Out of memory: as many as fit. */
static size_t collect(ExecEngine *e, const char *key, Exec ***ret) {
        size_t n = 0, cap = 0;
        Exec **v = NULL;
        bool full = false;

        for (unsigned b = 0; b < EXEC_SLOT_BUCKETS && !full; b++)
                for (ExecSlot *s = e->slots[b]; s && !full; s = s->next) {
                        if (key && !streq(s->key, key))
                                continue;
                        for (Exec *x = s->execs; x && !full; x = x->slot_next) {
                                if (n == cap) {
                                        size_t nc = MAX(cap * 2, (size_t) 16);
                                        Exec **nv = reallocarray(v, nc, sizeof *nv);
                                        if (!nv) {
                                                full = true;
                                                break;
                                        }
                                        v = nv;
                                        cap = nc;
                                }
                                v[n++] = exec_ref(x);
                        }
                }
        *ret = v;
        return n;
}

/* Marks X to be stopped now with STATUS (unless something else already decided its
 * end); with e->lock held. Returns what to do outside the lock. */
typedef enum StopAction { STOP_NOTHING, STOP_DEQUEUE, STOP_KILL } StopAction;

static StopAction stop_locked(Exec *x, ExecStatus status) {
        if (x->phase == EXEC_PHASE_DONE)
                return STOP_NOTHING;
        if (x->forced == EXEC_RUNNING)
                x->forced = status;
        x->kill_now = true;
        if (x->phase == EXEC_PHASE_QUEUED)
                return STOP_DEQUEUE;
        if (x->phase == EXEC_PHASE_RUNNING)
                return STOP_KILL;
        return STOP_NOTHING; /* pending or launching: exec_launch sees the flags */
}

static void stop_apply(ExecEngine *e, Exec *x, StopAction a, const Error *dequeued_error) {
        if (a == STOP_KILL)
                (void) exec_call(x, exec_kill_call);
        else if (a == STOP_DEQUEUE && admission_cancel(e->admission, &x->adm)) {
                if (exec_pump_timer_disarm(e->pump, &x->queue_timer))
                        exec_unref(x);
                if (dequeued_error)
                        exec_complete(x, dequeued_error, NULL);
                else if (exec_launch_submit(x) < 0) {
                        /* Recorded CANCELLED by a launch thread normally; without one, not at all. */
                        Error err = ERROR_INIT;

                        (void) error_set(&err, -ECANCELED, 404, "SANDBOX_NOT_FOUND", "the sandbox was released");
                        exec_complete(x, &err, NULL);
                }
        }
}

/* ---- release ---- */

void exec_engine_release_begin(ExecEngine *e, const char *internal_id) {
        _cleanup_free_ StopAction *actions = NULL;
        _cleanup_free_ Exec **v = NULL;
        ExecSlot *slot;
        size_t n;
        int r;

        if (!e)
                return;
        (void) pthread_mutex_lock(&e->lock);
        slot = exec_slot_get(e, internal_id);
        if (slot)
                slot->releasing++;
        n = collect(e, internal_id, &v);
        actions = calloc(MAX(n, (size_t) 1), sizeof *actions);
        for (size_t i = 0; i < n; i++) {
                StopAction a = stop_locked(v[i], EXEC_CANCELLED);
                if (actions)
                        actions[i] = a;
        }
        (void) pthread_mutex_unlock(&e->lock);

        for (size_t i = 0; i < n; i++) {
                if (actions)
                        stop_apply(e, v[i], actions[i], NULL);
                exec_unref(v[i]);
        }
        if (e->spawner) {
                /* Kills whatever of the sandbox still runs and frees its network namespace
                 * without waiting for the linger time. */
                r = spawner_drop_sandbox(e->spawner, internal_id);
                if (r < 0)
                        log_warning("Dropping the spawner context of a released sandbox failed: %s", strerror(-r));
        }
}

void exec_engine_release_end(ExecEngine *e, const char *internal_id) {
        ExecSlot *slot;

        if (!e)
                return;
        (void) pthread_mutex_lock(&e->lock);
        slot = exec_slot_find(e, internal_id);
        if (slot && slot->releasing > 0) {
                slot->releasing--;
                exec_slot_put(e, slot);
        }
        (void) pthread_mutex_unlock(&e->lock);
}

/* ---- shutdown ---- */

static void refuse_queued(AdmissionWaiter *w, void *userdata) {
        Exec *x = container_of(w, Exec, adm);
        ExecEngine *e = userdata;
        Error err = ERROR_INIT;

        if (exec_pump_timer_disarm(e->pump, &x->queue_timer))
                exec_unref(x);
        (void) error_set(&err, -ESHUTDOWN, 503, "SANDBOX_SHUTTING_DOWN",
                         "The daemon is shutting down; retry on another worker.");
        exec_complete(x, &err, NULL);
}

void exec_engine_stop_admitting(ExecEngine *e) {
        if (!e)
                return;
        (void) pthread_mutex_lock(&e->lock);
        e->shutting_down = true;
        (void) pthread_mutex_unlock(&e->lock);
        admission_close(e->admission);
        admission_cancel_all(e->admission, refuse_queued, e);
}

unsigned exec_engine_active(ExecEngine *e) {
        unsigned n;

        if (!e)
                return 0;
        (void) pthread_mutex_lock(&e->lock);
        n = e->registered;
        (void) pthread_mutex_unlock(&e->lock);
        return n;
}

void exec_engine_kill_all(ExecEngine *e, usec_t timeout_usec) {
        _cleanup_free_ StopAction *actions = NULL;
        _cleanup_free_ Exec **v = NULL;
        struct timespec deadline = monotonic_deadline(timeout_usec);
        Error lost = ERROR_INIT;
        size_t n;

        if (!e)
                return;
        (void) error_set(&lost, -ESHUTDOWN, 503, "SANDBOX_SHUTTING_DOWN",
                         "The daemon is shutting down; retry on another worker.");
        (void) pthread_mutex_lock(&e->lock);
        e->shutting_down = e->killing = true;
        n = collect(e, NULL, &v);
        actions = calloc(MAX(n, (size_t) 1), sizeof *actions);
        for (size_t i = 0; i < n; i++) {
                StopAction a = stop_locked(v[i], EXEC_WORKER_LOST);
                if (actions)
                        actions[i] = a;
        }
        (void) pthread_mutex_unlock(&e->lock);
        for (size_t i = 0; i < n; i++) {
                if (actions)
                        stop_apply(e, v[i], actions[i], &lost);
                exec_unref(v[i]);
        }

        (void) pthread_mutex_lock(&e->lock);
        while (e->registered > 0)
                if (pthread_cond_timedwait(&e->idle, &e->lock, &deadline) == ETIMEDOUT)
                        break;
        if (e->registered > 0)
                log_warning("%u exec(s) did not end in time at shutdown; the spawner kills them.", e->registered);
        (void) pthread_mutex_unlock(&e->lock);
}

/* ---- retention ---- */

static void prune_job(void *userdata) {
        ExecEngine *e = userdata;
        Store *st = e->d->store;
        usec_t now = now_realtime_usec(), keep = e->d->config.exec_retention_seconds * USEC_PER_SEC;
        char (*uids)[OPAQUE_ID_LEN + 1] = calloc(PRUNE_BATCH, sizeof *uids);
        uint64_t total = 0;

        if (!uids || e->shutting_down || now <= keep) {
                free(uids);
                return;
        }
        for (;;) {
                size_t count = 0;
                int r = st->ops->exec_prune(st, now - keep, uids, PRUNE_BATCH, &count);

                if (r < 0) {
                        log_warning("Pruning old exec records failed: %s", strerror(-r));
                        break;
                }
                for (size_t i = 0; i < count; i++)
                        for (ExecStream s = EXEC_STDOUT; s <= EXEC_STDERR; s++) {
                                char name[96];

                                exec_spool_name(uids[i], s, name, sizeof name);
                                (void) unlinkat(e->execs_fd, name, 0);
                        }
                total += (uint64_t) r;
                if ((unsigned) r < PRUNE_BATCH)
                        break;
        }
        free(uids);
        if (total > 0)
                log_info("Pruned %" PRIu64 " exec record(s) older than SANDBOX_EXEC_RETENTION_SECONDS.", total);
}

static void prune_timer_fired(PumpTimer *t) {
        ExecEngine *e = container_of(t, ExecEngine, prune_timer);

        if (!e->shutting_down)
                (void) e->submit(e->submit_userdata, prune_job, e);
        (void) exec_pump_timer_arm(e->pump, &e->prune_timer, now_monotonic_usec() + PRUNE_INTERVAL_USEC);
}

/* ---- set-up ---- */

json_t *exec_engine_report(ExecEngine *e) {
        unsigned running = 0, queued = 0;

        if (!e)
                return json_pack("{s:s}", "status", "unavailable");
        admission_counts(e->admission, &running, &queued);
        return json_pack("{s:i, s:i, s:I, s:I, s:I}", "running", (int) running, "queued", (int) queued, "max_running",
                         (json_int_t) e->d->config.max_running_execs, "queue_length",
                         (json_int_t) e->d->config.admission_queue_length, "max_parallel_per_sandbox",
                         (json_int_t) e->d->config.max_parallel_execs_per_sandbox);
}

static int open_execs_dir(int data_fd) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;

        if (mkdirat(data_fd, "execs", 0700) < 0 && errno != EEXIST)
                return -errno;
        fd = openat(data_fd, "execs", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if ((st.st_uid != 0 || st.st_gid != 0) && geteuid() == 0 && fchown(fd, 0, 0) < 0)
                return -errno;
        if ((st.st_mode & 07777) != 0700 && fchmod(fd, 0700) < 0)
                return -errno;
        return TAKE_FD(fd);
}

/* ---- launch threads ---- */

static void *launcher_main(void *userdata) {
        ExecEngine *e = userdata;

        (void) pthread_mutex_lock(&e->launch_lock);
        for (;;) {
                Exec *x = e->launch_head;

                if (!x) {
                        if (e->launch_stopping)
                                break;
                        (void) pthread_cond_wait(&e->launch_cond, &e->launch_lock);
                        continue;
                }
                e->launch_head = x->launch_next;
                if (!e->launch_head)
                        e->launch_tail = NULL;
                x->launch_next = NULL;
                (void) pthread_mutex_unlock(&e->launch_lock);
                exec_launch(x);
                exec_unref(x);
                (void) pthread_mutex_lock(&e->launch_lock);
        }
        (void) pthread_mutex_unlock(&e->launch_lock);
        return NULL;
}

int exec_launch_submit(Exec *x) {
        ExecEngine *e = x->engine;

        (void) pthread_mutex_lock(&e->launch_lock);
        if (e->launch_stopping || e->n_launchers == 0) {
                (void) pthread_mutex_unlock(&e->launch_lock);
                return -ESHUTDOWN;
        }
        x->launch_next = NULL;
        if (e->launch_tail)
                e->launch_tail->launch_next = exec_ref(x);
        else
                e->launch_head = exec_ref(x);
        e->launch_tail = x;
        (void) pthread_cond_signal(&e->launch_cond);
        (void) pthread_mutex_unlock(&e->launch_lock);
        return 0;
}

static int launchers_start(ExecEngine *e) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        unsigned want = (unsigned) MIN(MAX(2 * cores, 4L), (long) EXEC_LAUNCH_THREADS_MAX);
        sigset_t all, old;
        int r = 0;

        /* No process-directed signal for these threads: they are the main thread's. */
        sigfillset(&all);
        (void) pthread_sigmask(SIG_BLOCK, &all, &old);
        for (; e->n_launchers < want; e->n_launchers++) {
                r = -pthread_create(&e->launchers[e->n_launchers], NULL, launcher_main, e);
                if (r < 0)
                        break;
        }
        (void) pthread_sigmask(SIG_SETMASK, &old, NULL);
        return e->n_launchers > 0 ? 0 : r;
}

/* Runs what is still queued (each launch sees the engine killing or shutting down and
 * ends its exec), then joins the threads. */
static void launchers_stop(ExecEngine *e) {
        (void) pthread_mutex_lock(&e->launch_lock);
        e->launch_stopping = true;
        (void) pthread_cond_broadcast(&e->launch_cond);
        (void) pthread_mutex_unlock(&e->launch_lock);
        for (unsigned i = 0; i < e->n_launchers; i++)
                (void) pthread_join(e->launchers[i], NULL);
        e->n_launchers = 0;
}

void exec_engine_stop_launches(ExecEngine *e) {
        if (e)
                launchers_stop(e);
}

int exec_engine_new(Daemon *d, const ExecEngineOptions *opts, ExecEngine **ret, char *errbuf, size_t errlen) {
        const Config *c = &d->config;
        pthread_condattr_t attr;
        ExecEngine *e;
        int r;

        e = calloc(1, sizeof *e);
        if (!e)
                return -ENOMEM;
        e->d = d;
        e->spawner = opts->spawner;
        e->level = opts->level;
        e->network = opts->network;
        e->submit = opts->submit;
        e->submit_userdata = opts->submit_userdata;
        e->execs_fd = e->null_fd = -EBADF;
        e->prune_timer.fn = prune_timer_fired;
        (void) strscpy(e->unavailable, sizeof e->unavailable,
                       opts->unavailable_reason ?: "No isolation level works on this host; see /healthz.");
        (void) pthread_mutex_init(&e->lock, NULL);
        (void) pthread_mutex_init(&e->launch_lock, NULL);
        (void) pthread_cond_init(&e->launch_cond, NULL);
        (void) pthread_condattr_init(&attr);
        (void) pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        (void) pthread_cond_init(&e->idle, &attr);
        (void) pthread_condattr_destroy(&attr);

        uint8_t key[EXEC_KEY_SIZE];
        r = exec_key_load(d->data_fd, key);
        if (r < 0) {
                (void) bsprintf(errbuf, errlen, "Cannot read or create %s/exec_key: %s.", d->data_dir,
                                r == -EBADMSG ? "it does not hold exactly 32 bytes" : strerror(-r));
                exec_engine_free(e);
                return r;
        }
        r = exec_hmac_new(key, &e->hmac);
        explicit_zero(key, sizeof key);
        if (r < 0) {
                (void) bsprintf(errbuf, errlen, "Cannot set up HMAC-SHA256 (OpenSSL): %s.", strerror(-r));
                exec_engine_free(e);
                return r;
        }
        r = open_execs_dir(d->data_fd);
        if (r < 0) {
                (void) bsprintf(errbuf, errlen, "Cannot prepare %s/execs: %s.", d->data_dir, strerror(-r));
                exec_engine_free(e);
                return r;
        }
        e->execs_fd = r;
        e->null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (e->null_fd < 0) {
                r = -errno;
                (void) bsprintf(errbuf, errlen, "Cannot open /dev/null: %s.", strerror(-r));
                exec_engine_free(e);
                return r;
        }
        r = admission_new((unsigned) c->max_running_execs, (unsigned) c->admission_queue_length, &e->admission);
        if (r >= 0)
                r = exec_pump_new(&e->pump);
        if (r >= 0)
                r = launchers_start(e);
        if (r < 0) {
                (void) bsprintf(errbuf, errlen, "Cannot start the exec engine: %s.", strerror(-r));
                exec_engine_free(e);
                return r;
        }
        (void) exec_pump_timer_arm(e->pump, &e->prune_timer, now_monotonic_usec() + PRUNE_FIRST_USEC);
        *ret = e;
        return 0;
}

void exec_engine_free(ExecEngine *e) {
        if (!e)
                return;
        launchers_stop(e);
        if (e->pump) {
                (void) exec_pump_timer_disarm(e->pump, &e->prune_timer);
                exec_pump_free(e->pump);
        }
        admission_free(e->admission);
        for (unsigned b = 0; b < EXEC_SLOT_BUCKETS; b++)
                while (e->slots[b]) {
                        ExecSlot *s = e->slots[b];
                        e->slots[b] = s->next;
                        free(s);
                }
        safe_close(e->execs_fd);
        safe_close(e->null_fd);
        exec_hmac_free(e->hmac);
        (void) pthread_cond_destroy(&e->idle);
        (void) pthread_mutex_destroy(&e->lock);
        (void) pthread_cond_destroy(&e->launch_cond);
        (void) pthread_mutex_destroy(&e->launch_lock);
        free(e);
}
