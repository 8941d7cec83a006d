/* SPDX-License-Identifier: MIT */
/* The lifecycle of one exec: start (or attach), admission, exec_begin, launch, the end
 * (exit + EOF on both pipes), exec_finish, and the answers. See exec.h for the threads. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec-internal.h"
#include "fileio.h"
#include "json-util.h"
#include "log.h"
#include "string-util.h"

/* After the exit, how long the pipes may stay open: a writer that escaped the exec (an fd
 * passed to a process of another exec) must not keep the record RUNNING forever. */
#define DRAIN_AFTER_EXIT_USEC (2 * USEC_PER_SEC)

/* ---- references ---- */

Exec *exec_alloc(ExecEngine *e) {
        Exec *x = calloc(1, sizeof *x);

        if (!x)
                return NULL;
        atomic_init(&x->refs, 1);
        x->engine = e;
        x->stdin_fd = -EBADF;
        x->forced = EXEC_RUNNING;
        exec_output_init(&x->out[EXEC_STDOUT]);
        exec_output_init(&x->out[EXEC_STDERR]);
        return x;
}

void exec_free_payload(Exec *x) {
        free(TAKE_PTR(x->argv));
        free(TAKE_PTR(x->envp));
        free(TAKE_PTR(x->argv_json));
        free(TAKE_PTR(x->env_keys_json));
        free(TAKE_PTR(x->cwd));
        x->stdin_fd = safe_close(x->stdin_fd);
}

Exec *exec_ref(Exec *x) {
        atomic_fetch_add(&x->refs, 1);
        return x;
}

void exec_unref(Exec *x) {
        if (!x || atomic_fetch_sub(&x->refs, 1) != 1)
                return;
        /* Nothing refers to X any more: not registered, no timer armed, not in the pump. */
        exec_free_payload(x);
        exec_output_done(&x->out[EXEC_STDOUT]);
        exec_output_done(&x->out[EXEC_STDERR]);
        spawner_exec_unref(x->sx);
        hold_release(x->hold);
        exec_record_clear(&x->rec);
        free(x);
}

/* Timers hold a reference while armed. */
void exec_timer_arm(Exec *x, PumpTimer *t, usec_t when) {
        if (!exec_pump_timer_arm(x->engine->pump, t, when))
                (void) exec_ref(x);
}

void exec_timer_disarm(Exec *x, PumpTimer *t) {
        if (exec_pump_timer_disarm(x->engine->pump, t))
                exec_unref(x);
}

int exec_call(Exec *x, void (*fn)(void *userdata)) {
        int r = exec_pump_call(x->engine->pump, fn, exec_ref(x));

        if (r < 0)
                exec_unref(x);
        return r;
}

/* ---- waiters and observers ---- */

static bool waiter_satisfied(const Exec *x, const ExecWaiter *w) {
        return x->phase == EXEC_PHASE_DONE || (!w->until_end && x->phase == EXEC_PHASE_RUNNING);
}

static void waiter_unlink(Exec *x, ExecWaiter *w) {
        if (w->prev)
                w->prev->next = w->next;
        else
                x->waiters = w->next;
        if (w->next)
                w->next->prev = w->prev;
        w->prev = w->next = NULL;
        w->linked = false;
}

static void wake_observers_locked(Exec *x) {
        for (ExecObserver *o = x->observers; o; o = o->next)
                o->wake(o);
}

/* Pump thread: answers every waiter whose condition holds. */
static void notify_waiters(Exec *x) {
        ExecEngine *e = x->engine;
        ExecWaiter *ready = NULL;

        (void) pthread_mutex_lock(&e->lock);
        for (ExecWaiter *w = x->waiters, *next; w; w = next) {
                next = w->next;
                if (!waiter_satisfied(x, w))
                        continue;
                waiter_unlink(x, w);
                w->next = ready;
                ready = w;
        }
        (void) pthread_mutex_unlock(&e->lock);

        while (ready) {
                ExecWaiter *w = ready;

                ready = w->next;
                w->next = NULL;
                /* Timers run on this thread too: disarmed here, it cannot fire later. */
                exec_timer_disarm(x, &w->timer);
                w->fn(w, x);
        }
}

void exec_notify_call(void *userdata) {
        Exec *x = userdata;

        notify_waiters(x);
        exec_unref(x);
}

static void waiter_timeout(PumpTimer *t) {
        ExecWaiter *w = container_of(t, ExecWaiter, timer);
        Exec *x = w->exec;
        bool linked;

        (void) pthread_mutex_lock(&x->engine->lock);
        linked = w->linked;
        if (linked)
                waiter_unlink(x, w);
        (void) pthread_mutex_unlock(&x->engine->lock);
        if (linked)
                w->fn(w, x);
        exec_unref(x);
}

int exec_wait(Exec *x, ExecWaiter *w, usec_t timeout_usec) {
        ExecEngine *e = x->engine;

        w->exec = x;
        w->timer = (PumpTimer) { .fn = waiter_timeout };
        (void) pthread_mutex_lock(&e->lock);
        if (waiter_satisfied(x, w)) {
                (void) pthread_mutex_unlock(&e->lock);
                return 1;
        }
        w->prev = NULL;
        w->next = x->waiters;
        if (x->waiters)
                x->waiters->prev = w;
        x->waiters = w;
        w->linked = true;
        if (timeout_usec > 0)
                exec_timer_arm(x, &w->timer, now_monotonic_usec() + timeout_usec);
        (void) pthread_mutex_unlock(&e->lock);
        return 0;
}

void exec_observe(Exec *x, ExecObserver *o) {
        (void) pthread_mutex_lock(&x->engine->lock);
        o->prev = NULL;
        o->next = x->observers;
        if (x->observers)
                x->observers->prev = o;
        x->observers = o;
        o->linked = true;
        (void) pthread_mutex_unlock(&x->engine->lock);
}

void exec_unobserve(Exec *x, ExecObserver *o) {
        (void) pthread_mutex_lock(&x->engine->lock);
        if (o->linked) {
                if (o->prev)
                        o->prev->next = o->next;
                else
                        x->observers = o->next;
                if (o->next)
                        o->next->prev = o->prev;
                o->linked = false;
        }
        (void) pthread_mutex_unlock(&x->engine->lock);
}

/* ---- the end ---- */

/* With the lock held: DONE, out of the registry; returns what to release after unlock. */
static void end_locked(Exec *x, Hold **ret_hold, bool *ret_admitted) {
        ExecEngine *e = x->engine;

        x->phase = EXEC_PHASE_DONE;
        *ret_hold = TAKE_PTR(x->hold);
        *ret_admitted = x->admitted;
        x->admitted = false;
        if (x->registered) {
                exec_unregister(x);
                if (--e->registered == 0)
                        (void) pthread_cond_broadcast(&e->idle);
        }
        wake_observers_locked(x);
}

static void release_after_end(Exec *x, Hold *hold, bool admitted) {
        hold_release(hold);
        if (admitted)
                admission_leave(x->engine->admission);
}

static void disarm_all(Exec *x) {
        exec_timer_disarm(x, &x->deadline_timer);
        exec_timer_disarm(x, &x->kill_timer);
        exec_timer_disarm(x, &x->queue_timer);
        exec_timer_disarm(x, &x->drain_timer);
}

void exec_complete(Exec *x, const Error *err, ExecRecord *rec) {
        ExecEngine *e = x->engine;
        bool admitted, was_registered;
        Hold *hold;

        disarm_all(x);
        (void) pthread_mutex_lock(&e->lock);
        if (x->phase == EXEC_PHASE_DONE) {
                (void) pthread_mutex_unlock(&e->lock);
                if (rec)
                        exec_record_clear(rec);
                return;
        }
        if (err && error_is_set(err))
                x->error = *err;
        if (rec) {
                exec_record_clear(&x->rec);
                x->rec = *rec;
                *rec = (ExecRecord) {};
                x->has_rec = true;
        }
        was_registered = x->registered;
        end_locked(x, &hold, &admitted);
        (void) pthread_mutex_unlock(&e->lock);

        /* A stored record whose output is spooled: readable from its files. */
        if (x->has_rec && !error_is_set(&x->error)) {
                if (!x->rec.stdout_inline)
                        exec_open_spooled(x, EXEC_STDOUT);
                if (!x->rec.stderr_inline)
                        exec_open_spooled(x, EXEC_STDERR);
        }
        exec_free_payload(x);
        release_after_end(x, hold, admitted);
        (void) exec_call(x, exec_notify_call);
        if (was_registered)
                exec_unref(x); /* the registry's */
}

static ExecStatus final_status(const Exec *x) {
        if (x->forced != EXEC_RUNNING)
                return x->forced;
        if (x->exit.lost)
                return EXEC_WORKER_LOST;
        return x->exit.exited && x->exit.exit_code == 0 ? EXEC_SUCCEEDED : EXEC_FAILED;
}

/* Reads a whole small stream from its spool for the inline copy in the store. */
static int read_inline(Exec *x, ExecStream s, char **ret, size_t *ret_len) {
        uint64_t kept = atomic_load(&x->out[s].kept);
        _cleanup_free_ char *buf = malloc((size_t) kept + 1);
        size_t got = 0;

        if (!buf)
                return -ENOMEM;
        while (got < kept) {
                ssize_t n = exec_output_read(&x->out[s], got, buf + got, (size_t) kept - got);
                if (n < 0)
                        return (int) n;
                if (n == 0)
                        return -EIO;
                got += (size_t) n;
        }
        buf[got] = '\0';
        *ret_len = got;
        *ret = TAKE_PTR(buf);
        return 0;
}

static void log_timing(const Exec *x) {
        if (!log_enabled(LOG_LEVEL_DEBUG))
                return;
        /* Steps of the exec path, each from the end of the previous one (microseconds). */
        log_emit(LOG_LEVEL_DEBUG,
                 json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I}", "event", "exec_timing", "exec_uid", x->exec_uid,
                           "admit_us", (json_int_t) (x->t_admitted - x->t_request),
                           "begin_us", (json_int_t) (x->t_begun - x->t_admitted),
                           "prepare_us", (json_int_t) (x->t_launched - x->t_begun),
                           "launch_us", (json_int_t) (x->t_spawned - x->t_launched),
                           "run_us", (json_int_t) (x->t_exit > x->t_spawned ? x->t_exit - x->t_spawned : 0),
                           "finish_us", (json_int_t) (x->t_finished > x->t_exit ? x->t_finished - x->t_exit : 0)),
                 "exec %s: admitted %" PRIu64 " us, begun +%" PRIu64 " us, launched +%" PRIu64 " us, finished %" PRIu64
                 " us after its exit",
                 x->exec_uid, x->t_admitted - x->t_request, x->t_begun - x->t_admitted, x->t_spawned - x->t_begun,
                 x->t_finished > x->t_exit ? x->t_finished - x->t_exit : 0);
}

/* Pump thread: the process is gone and both pipes are closed. */
static void finish(Exec *x) {
        ExecEngine *e = x->engine;
        Store *st = e->d->store;
        char *data[2] = {}, name[96];
        size_t len[2] = {};
        bool admitted;
        Hold *hold;
        ExecFinish f;
        usec_t now = now_realtime_usec(), ended;
        int r;

        for (ExecStream s = EXEC_STDOUT; s <= EXEC_STDERR; s++)
                if (atomic_load(&x->out[s].kept) <= EXEC_INLINE_OUTPUT_MAX && x->out[s].spool_error == 0 &&
                    read_inline(x, s, &data[s], &len[s]) < 0)
                        data[s] = NULL; /* stays in its spool file */

        ended = x->exit.ended_usec ?: now_monotonic_usec();
        f = (ExecFinish) {
                .owner = x->owner, .sandbox_id = x->sandbox_id, .lifecycle_id = x->lifecycle_id,
                .exec_id = x->exec_id, .worker_epoch = e->d->worker_epoch,
                .status = final_status(x),
                .has_exit_code = x->exit.exited, .exit_code = x->exit.exit_code, .signal = x->exit.signal,
                .truncated = exec_output_truncated(&x->out[0]) || exec_output_truncated(&x->out[1]),
                .stdout_bytes = atomic_load(&x->out[0].produced), .stderr_bytes = atomic_load(&x->out[1].produced),
                .cpu_ms = x->exit.cpu_usec / 1000, .max_rss_bytes = x->exit.max_rss_bytes,
                .oom_killed = x->exit.oom_killed,
                .started_at = x->rec.started_at, .finished_at = now,
                .duration_ms = ended > x->t_launched ? (ended - x->t_launched) / 1000 : 0,
                .stdout_data = data[0], .stdout_len = len[0], .stderr_data = data[1], .stderr_len = len[1],
        };
        r = st->ops->exec_finish(st, &f);
        if (r < 0)
                log_emit(LOG_LEVEL_WARNING, json_pack("{s:s, s:s}", "event", "exec_finish_failed", "exec_uid", x->exec_uid),
                         "Recording the end of exec %s failed: %s", x->exec_uid, strerror(-r));
        for (ExecStream s = EXEC_STDOUT; s <= EXEC_STDERR; s++)
                if (data[s] && atomic_load(&x->out[s].spool_fd) >= 0) {
                        /* Inline in the store: the file goes (our fd keeps it readable). */
                        exec_spool_name(x->exec_uid, s, name, sizeof name);
                        (void) unlinkat(e->execs_fd, name, 0);
                }

        disarm_all(x);
        (void) pthread_mutex_lock(&e->lock);
        x->rec.status = f.status;
        x->rec.has_exit_code = f.has_exit_code;
        x->rec.exit_code = f.exit_code;
        x->rec.signal = f.signal;
        x->rec.truncated = f.truncated;
        x->rec.stdout_bytes = f.stdout_bytes;
        x->rec.stderr_bytes = f.stderr_bytes;
        x->rec.cpu_ms = f.cpu_ms;
        x->rec.max_rss_bytes = f.max_rss_bytes;
        x->rec.oom_killed = f.oom_killed;
        x->rec.finished_at = f.finished_at;
        x->rec.duration_ms = f.duration_ms;
        x->rec.stdout_inline = data[0] != NULL;
        x->rec.stdout_data = data[0];
        x->rec.stdout_len = len[0];
        x->rec.stderr_inline = data[1] != NULL;
        x->rec.stderr_data = data[1];
        x->rec.stderr_len = len[1];
        end_locked(x, &hold, &admitted);
        (void) pthread_mutex_unlock(&e->lock);

        release_after_end(x, hold, admitted);
        spawner_exec_unref(TAKE_PTR(x->sx));
        x->t_finished = now_monotonic_usec();
        log_timing(x);
        notify_waiters(x);
        exec_unref(x); /* the registry's */
}

static void check_end(Exec *x) {
        ExecEngine *e = x->engine;
        bool eof, go = false;

        (void) pthread_mutex_lock(&e->lock);
        if (x->phase == EXEC_PHASE_RUNNING && x->launched && x->exited && !x->finishing) {
                eof = atomic_load(&x->out[0].eof) && atomic_load(&x->out[1].eof);
                if (eof)
                        go = x->finishing = true;
                else if (x->drain_timer.index == 0)
                        exec_timer_arm(x, &x->drain_timer, now_monotonic_usec() + DRAIN_AFTER_EXIT_USEC);
        }
        (void) pthread_mutex_unlock(&e->lock);
        if (go)
                finish(x);
}

void exec_check_end_call(void *userdata) {
        Exec *x = userdata;

        check_end(x);
        exec_unref(x);
}

static void drain_timeout(PumpTimer *t) {
        Exec *x = container_of(t, Exec, drain_timer);

        exec_pump_close_output(x->engine->pump, &x->out[EXEC_STDOUT]);
        exec_pump_close_output(x->engine->pump, &x->out[EXEC_STDERR]);
        exec_unref(x);
}

void exec_on_output_data(ExecOutput *o) {
        Exec *x = o->userdata;

        (void) pthread_mutex_lock(&x->engine->lock);
        wake_observers_locked(x);
        (void) pthread_mutex_unlock(&x->engine->lock);
}

void exec_on_output_eof(ExecOutput *o) {
        Exec *x = o->userdata;

        check_end(x);
        exec_unref(x); /* the pump's, taken in exec_launch */
}

/* The spawner's reader thread: must not block. Takes over the reference passed as
 * userdata to spawner_launch. */
void exec_on_spawner_exit(SpawnerExec *sx, const SpawnerExit *exit, void *userdata) {
        Exec *x = userdata;

        (void) pthread_mutex_lock(&x->engine->lock);
        x->exit = *exit;
        x->exited = true;
        x->t_exit = now_monotonic_usec();
        (void) pthread_mutex_unlock(&x->engine->lock);
        if (exec_pump_call(x->engine->pump, exec_check_end_call, x) < 0)
                /* Out of memory: the drain timer of a launched exec is not armed yet; the
                 * launch path arms the check itself if it runs after us. Leak the
                 * reference rather than free X under the pump. */
                log_error("exec %s: cannot hand its end to the output pump", x->exec_uid);
}

/* ---- signals ---- */

static void kill_timeout(PumpTimer *t) {
        Exec *x = container_of(t, Exec, kill_timer);

        exec_terminate(x, SIGKILL);
        exec_unref(x);
}

void exec_terminate(Exec *x, int sig) {
        ExecEngine *e = x->engine;
        SpawnerExec *sx = NULL;
        int r;

        (void) pthread_mutex_lock(&e->lock);
        if (x->phase == EXEC_PHASE_RUNNING && !x->exited && x->sx)
                sx = spawner_exec_ref(x->sx);
        if (sx && sig == SIGTERM)
                exec_timer_arm(x, &x->kill_timer, now_monotonic_usec() + e->d->config.terminate_grace_seconds * USEC_PER_SEC);
        (void) pthread_mutex_unlock(&e->lock);
        if (!sx)
                return;
        r = spawner_exec_kill(sx, sig);
        if (r < 0 && r != -ESRCH)
                log_warning("exec %s: sending signal %d failed: %s", x->exec_uid, sig, strerror(-r));
        spawner_exec_unref(sx);
}

void exec_terminate_call(void *userdata) {
        Exec *x = userdata;

        exec_terminate(x, SIGTERM);
        exec_unref(x);
}

void exec_kill_call(void *userdata) {
        Exec *x = userdata;

        exec_terminate(x, SIGKILL);
        exec_unref(x);
}

static void deadline_reached(PumpTimer *t) {
        Exec *x = container_of(t, Exec, deadline_timer);
        bool go = false;

        (void) pthread_mutex_lock(&x->engine->lock);
        if (x->phase == EXEC_PHASE_RUNNING && !x->exited && x->forced == EXEC_RUNNING) {
                x->forced = EXEC_TIMED_OUT;
                go = true;
        }
        (void) pthread_mutex_unlock(&x->engine->lock);
        if (go)
                exec_terminate(x, SIGTERM);
        exec_unref(x);
}

/* ---- admission ---- */

static void admission_granted(AdmissionWaiter *w) {
        Exec *x = container_of(w, Exec, adm);
        ExecEngine *e = x->engine;
        Error err = ERROR_INIT;
        int r;

        (void) pthread_mutex_lock(&e->lock);
        x->admitted = true;
        (void) pthread_mutex_unlock(&e->lock);
        exec_timer_disarm(x, &x->queue_timer);

        /* Never on this thread: it may be the pump, and the launch waits for the spawner. */
        r = exec_launch_submit(x);
        if (r < 0) {
                (void) error_set(&err, r, 503, "SANDBOX_WORKER_BUSY", "No thread is free to start the command; retry later.");
                exec_complete(x, &err, NULL);
        }
}

static void queue_timeout(PumpTimer *t) {
        Exec *x = container_of(t, Exec, queue_timer);
        ExecEngine *e = x->engine;
        Error err = ERROR_INIT;

        if (admission_cancel(e->admission, &x->adm)) {
                (void) error_set(&err, -EBUSY, 503, "SANDBOX_WORKER_BUSY",
                                 "All %" PRIu64 " exec slots of this worker stayed busy for %" PRIu64 " s; retry later.",
                                 e->d->config.max_running_execs, e->d->config.admission_timeout_seconds);
                exec_complete(x, &err, NULL);
        }
        exec_unref(x);
}

/* ---- start ---- */

/* Ids that only need to be unique, from the kernel directly: OpenSSL's per-thread
 * generators cost more than the rest of the exec's set-up on a cold HTTP thread. */
static int random_id(char *buf, size_t bufsz, size_t nbytes) {
        static const char hex[] = "0123456789abcdef";
        uint8_t raw[32];
        ssize_t n;

        if (nbytes > sizeof raw || bufsz < 2 * nbytes + 1)
                return -EINVAL;
        do
                n = getrandom(raw, nbytes, 0);
        while (n < 0 && errno == EINTR);
        if (n != (ssize_t) nbytes)
                return n < 0 ? -errno : -EIO;
        for (size_t i = 0; i < nbytes; i++) {
                buf[2 * i] = hex[raw[i] >> 4];
                buf[2 * i + 1] = hex[raw[i] & 15];
        }
        buf[2 * nbytes] = '\0';
        return 0;
}

static int prepare_payload(Exec *x, const ExecRequest *req) {
        ExecEngine *e = x->engine;
        _cleanup_json_ json_t *argv = json_array(), *keys = json_array();
        size_t bytes = 0;
        char *p;
        int r;

        if (!argv || !keys)
                return -ENOMEM;
        for (size_t i = 0; i < req->argc; i++) {
                if (json_array_append_new(argv, json_string(req->argv[i])) < 0)
                        return -ENOMEM;
                bytes += strlen(req->argv[i]) + 1;
        }
        for (size_t i = 0; i < req->envc; i++)
                if (json_array_append_new(keys, json_string(req->env_names[i])) < 0)
                        return -ENOMEM;
        x->argv_json = json_dumps(argv, JSON_COMPACT);
        x->env_keys_json = json_dumps(keys, JSON_COMPACT);
        x->cwd = strdup(req->cwd ?: "/workspace");
        x->argv = malloc((req->argc + 1) * sizeof(char *) + bytes);
        if (!x->argv_json || !x->env_keys_json || !x->cwd || !x->argv)
                return -ENOMEM;
        p = (char *) (x->argv + req->argc + 1);
        for (size_t i = 0; i < req->argc; i++) {
                x->argv[i] = p;
                p = stpcpy(p, req->argv[i]) + 1;
        }
        x->argv[req->argc] = NULL;
        r = exec_env_build(req->env_names, req->env_values, req->envc, &x->envp);
        if (r < 0)
                return r;

        if (req->has_stdin) {
                /* Unnamed, root-only, gone with its last fd: the stdin bytes never sit in a
                 * file anyone could open. */
                _cleanup_close_ int fd = openat(e->d->tmp_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
                if (fd < 0)
                        return -errno;
                r = loop_write(fd, req->stdin_data, req->stdin_size);
                if (r < 0)
                        return r;
                if (lseek(fd, 0, SEEK_SET) < 0)
                        return -errno;
                x->stdin_fd = TAKE_FD(fd);
        }
        return 0;
}

/* Refused for the scope or the cap: unless the exec_id already names a finished exec of
 * this lifecycle (a retry: its record), in which case that is the answer. */
static int busy_or_stored(ExecEngine *e, const SandboxRecord *sb, const char *exec_id_, const char *fingerprint,
                          const Error *busy, Exec **ret, Error *err) {
        Store *st = e->d->store;
        ExecRecord rec = {};
        int r;

        r = st->ops->exec_get(st, sb->owner, sb->sandbox_id, sb->lifecycle_id, exec_id_, &rec);
        if (r == -ENOENT) {
                *err = *busy;
                return -EBUSY;
        }
        if (r < 0)
                return exec_store_error(err, r, "reading the exec");
        if (!streq(rec.fingerprint, fingerprint)) {
                exec_record_clear(&rec);
                return error_set(err, -EEXIST, 409, "EXEC_ID_CONFLICT",
                                 "exec_id '%s' was already used for a different command in this sandbox", exec_id_);
        }
        return exec_from_record(e, &rec, ret);
}

static void identity_from(Exec *x, const SandboxRecord *sb, const Principal *p, const ExecRequest *req,
                          const char *exec_id_, const char *exec_uid, const char *fingerprint) {
        (void) strscpy(x->owner, sizeof x->owner, sb->owner);
        (void) strscpy(x->sandbox_id, sizeof x->sandbox_id, sb->sandbox_id);
        (void) strscpy(x->internal_id, sizeof x->internal_id, sb->internal_id);
        (void) strscpy(x->lifecycle_id, sizeof x->lifecycle_id, sb->lifecycle_id);
        (void) strscpy(x->exec_id, sizeof x->exec_id, exec_id_);
        (void) strscpy(x->exec_uid, sizeof x->exec_uid, exec_uid);
        (void) strscpy(x->fingerprint, sizeof x->fingerprint, fingerprint);
        (void) strscpy(x->principal, sizeof x->principal, p->name);
        (void) strscpy(x->scope, sizeof x->scope, req->exec_scope ?: "");
        x->uid = sb->uid;
        x->generation = req->generation;
        x->timeout_seconds = req->timeout_seconds;
        x->background = req->background;
        x->output_base64 = req->output_base64;
        x->adm.granted = admission_granted;
        x->deadline_timer.fn = deadline_reached;
        x->kill_timer.fn = kill_timeout;
        x->queue_timer.fn = queue_timeout;
        x->drain_timer.fn = drain_timeout;
}

int exec_start(ExecEngine *e, const Principal *p, const ExecRequest *req, Exec **ret, Error *err) {
        const Config *c = &e->d->config;
        char fingerprint[EXEC_FINGERPRINT_HEX + 1], generated[40], exec_uid[OPAQUE_ID_LEN + 1];
        _cleanup_(exec_unrefp) Exec *x = NULL;
        const char *eid = req->exec_id;
        Error busy = ERROR_INIT;
        SandboxRecord sb;
        ExecSlot *slot;
        usec_t t0 = now_monotonic_usec();
        int r;

        if (!e->spawner)
                return error_set(err, -EOPNOTSUPP, 503, "SANDBOX_ISOLATION_UNAVAILABLE", "%s", e->unavailable);
        if (atomic_load(&e->d->shutting_down) || e->shutting_down)
                return error_set(err, -ESHUTDOWN, 503, "SANDBOX_SHUTTING_DOWN",
                                 "The daemon is shutting down; retry on another worker.");

        ExecFingerprintInput fin = {
                .argv = req->argv, .argc = req->argc, .cwd = req->cwd ?: "/workspace",
                .env_names = req->env_names, .env_values = req->env_values, .envc = req->envc,
                .timeout_seconds = req->timeout_seconds, .background = req->background,
                .exec_scope = req->exec_scope, .has_stdin = req->has_stdin,
                .stdin_data = req->stdin_data, .stdin_size = req->stdin_size,
                .output_base64 = req->output_base64,
        };
        r = exec_fingerprint(e->hmac, &fin, fingerprint);
        if (r >= 0)
                r = random_id(exec_uid, sizeof exec_uid, OPAQUE_ID_LEN / 2);
        if (r >= 0 && !eid) {
                char hex[25];
                r = random_id(hex, sizeof hex, 12);
                if (r >= 0)
                        (void) bsprintf(generated, sizeof generated, "exec-%s", hex);
                eid = generated;
        }
        if (r < 0) {
                error_fill_internal(err, r, "preparing the exec");
                return r;
        }

        r = exec_get_sandbox(e, p, req->sandbox_id, req->generation, true, &sb, err);
        if (r < 0)
                return r;

        x = exec_alloc(e);
        if (!x) {
                error_fill_internal(err, -ENOMEM, "preparing the exec");
                return -ENOMEM;
        }
        identity_from(x, &sb, p, req, eid, exec_uid, fingerprint);
        x->t_request = t0;

        (void) pthread_mutex_lock(&e->lock);
        slot = exec_slot_get(e, sb.internal_id);
        if (!slot) {
                (void) pthread_mutex_unlock(&e->lock);
                error_fill_internal(err, -ENOMEM, "registering the exec");
                return -ENOMEM;
        }
        if (slot->releasing > 0) {
                exec_slot_put(e, slot);
                (void) pthread_mutex_unlock(&e->lock);
                return error_set(err, -ENOENT, 404, "SANDBOX_NOT_FOUND", "sandbox '%s' is being released",
                                 req->sandbox_id);
        }
        Exec *found = exec_slot_find_exec(slot, sb.lifecycle_id, eid);
        if (found) {
                bool same = streq(found->fingerprint, fingerprint);

                if (same)
                        *ret = exec_ref(found);
                exec_slot_put(e, slot);
                (void) pthread_mutex_unlock(&e->lock);
                if (!same)
                        return error_set(err, -EEXIST, 409, "EXEC_ID_CONFLICT",
                                         "exec_id '%s' is running a different command in this sandbox", eid);
                return 0; /* a retry: attached to the running exec */
        }
        if (slot->count >= c->max_parallel_execs_per_sandbox)
                (void) error_set(&busy, -EBUSY, 429, "SANDBOX_PARALLEL_EXEC_LIMIT",
                                 "sandbox '%s' already runs %u execs (SANDBOX_MAX_PARALLEL_EXECS_PER_SANDBOX)",
                                 req->sandbox_id, slot->count);
        else {
                r = holds_acquire(e->d->holds, sb.internal_id, HOLD_EXEC, isempty(req->exec_scope) ? NULL : req->exec_scope,
                                  NULL, 0, &x->hold);
                if (r == -EBUSY)
                        (void) error_set(&busy, r, 409, "SANDBOX_EXEC_SCOPE_BUSY",
                                         isempty(req->exec_scope)
                                                 ? "sandbox '%s' runs another exec; an exec without exec_scope needs the whole sandbox"
                                                 : "sandbox '%s' already runs an exec in this exec_scope (or one without a scope)",
                                         req->sandbox_id);
                else if (r < 0)
                        error_fill_internal(&busy, r, "taking the exec scope");
        }
        if (error_is_set(&busy)) {
                exec_slot_put(e, slot);
                (void) pthread_mutex_unlock(&e->lock);
                return busy_or_stored(e, &sb, eid, fingerprint, &busy, ret, err);
        }
        exec_register(slot, exec_ref(x));
        e->registered++;
        (void) pthread_mutex_unlock(&e->lock);

        r = prepare_payload(x, req);
        if (r < 0) {
                error_fill_internal(err, r, "preparing the command");
                exec_complete(x, err, NULL);
                *ret = TAKE_PTR(x);
                return 0;
        }

        r = admission_enter(e->admission, &x->adm);
        if (r == 1) {
                (void) pthread_mutex_lock(&e->lock);
                x->admitted = true;
                (void) pthread_mutex_unlock(&e->lock);
                /* On a launch thread: this (HTTP) thread serves other connections meanwhile. */
                if (exec_launch_submit(x) < 0)
                        exec_launch(x);
        } else if (r == 0) {
                /* Queued. A grant may already have come (then no timer: it is admitted). */
                (void) pthread_mutex_lock(&e->lock);
                if (!x->admitted && x->phase == EXEC_PHASE_PENDING) {
                        x->phase = EXEC_PHASE_QUEUED;
                        exec_timer_arm(x, &x->queue_timer,
                                  now_monotonic_usec() + c->admission_timeout_seconds * USEC_PER_SEC);
                }
                (void) pthread_mutex_unlock(&e->lock);
        } else {
                Error e2 = ERROR_INIT;

                if (r == -ESHUTDOWN)
                        (void) error_set(&e2, r, 503, "SANDBOX_SHUTTING_DOWN",
                                         "The daemon is shutting down; retry on another worker.");
                else
                        (void) error_set(&e2, r, 503, "SANDBOX_WORKER_BUSY",
                                         "The worker runs %" PRIu64 " execs and its queue of %" PRIu64
                                         " is full; retry later.",
                                         c->max_running_execs, c->admission_queue_length);
                exec_complete(x, &e2, NULL);
        }
        *ret = TAKE_PTR(x);
        return 0;
}

/* ---- cancel ---- */

int exec_cancel(ExecEngine *e, const Principal *p, const char *sandbox_id, uint64_t generation, const char *exec_id_,
                bool *ret_cancelled, Error *err) {
        _cleanup_(exec_unrefp) Exec *x = NULL;
        bool cancelled = false, dequeue = false, running = false;
        int r;

        r = exec_lookup(e, p, sandbox_id, generation, exec_id_, &x, err);
        if (r < 0)
                return r;

        (void) pthread_mutex_lock(&e->lock);
        if (x->phase != EXEC_PHASE_DONE) {
                cancelled = true;
                if (x->forced == EXEC_RUNNING)
                        x->forced = EXEC_CANCELLED;
                dequeue = x->phase == EXEC_PHASE_QUEUED;
                running = x->phase == EXEC_PHASE_RUNNING;
        }
        (void) pthread_mutex_unlock(&e->lock);

        if (dequeue && admission_cancel(e->admission, &x->adm)) {
                /* Out of the queue without a slot: record it CANCELLED, launching nothing. */
                exec_timer_disarm(x, &x->queue_timer);
                if (exec_launch_submit(x) < 0) {
                        Error e2 = ERROR_INIT;

                        (void) error_set(&e2, -EBUSY, 503, "SANDBOX_WORKER_BUSY", "The exec was cancelled while queued.");
                        exec_complete(x, &e2, NULL);
                }
        } else if (running)
                (void) exec_call(x, exec_terminate_call);
        /* Starting: exec_launch sees the flag after its launch. */
        *ret_cancelled = cancelled;
        return 0;
}
