/* SPDX-License-Identifier: MIT */
/* Starting one exec's process: its RUNNING record (exec_begin), the checks only the
 * filesystem can answer (the working directory), the pipes, spawner_launch, and handing
 * the running exec to the pump. Failures to start end the record like a shell would. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec-internal.h"
#include "json-util.h"
#include "log.h"
#include "resolve.h"
#include "sampler.h"
#include "sandbox-limits.h"
#include "string-util.h"
#include "workspace.h"

static int map_begin_error(Exec *x, int r, Error *err) {
        switch (r) {
        case -ENOENT:
                return error_set(err, r, 404, "SANDBOX_NOT_FOUND", "sandbox '%s' not found", x->sandbox_id);
        case -ESTALE:
                return error_set(err, r, 409, "STALE_SANDBOX_GENERATION",
                                 "generation %" PRIu64 " is not current for sandbox '%s'", x->generation, x->sandbox_id);
        case -EBUSY:
                return error_set(err, r, 409, "SANDBOX_NOT_READY", "sandbox '%s' is not ready for commands",
                                 x->sandbox_id);
        case -EEXIST:
                return error_set(err, r, 409, "EXEC_ID_CONFLICT",
                                 "exec_id '%s' was already used for a different command in this sandbox", x->exec_id);
        default:
                return exec_store_error(err, r, "recording the exec");
        }
}

/* Ends an exec whose RUNNING record exists but whose process never ran (or failed to
 * start): the record gets STATUS and MESSAGE as its stderr; ERR (may be NULL) is what the
 * request is answered instead of the record. */
static void end_without_process(Exec *x, ExecStatus status, bool has_exit_code, int exit_code, const char *message,
                                const Error *err) {
        Store *st = x->engine->d->store;
        ExecRecord rec = x->rec;
        ExecFinish f;
        usec_t now = now_realtime_usec();
        int r;

        f = (ExecFinish) {
                .owner = x->owner, .sandbox_id = x->sandbox_id, .lifecycle_id = x->lifecycle_id,
                .exec_id = x->exec_id, .worker_epoch = x->engine->d->worker_epoch,
                .status = status, .has_exit_code = has_exit_code, .exit_code = exit_code,
                .started_at = x->rec.started_at, .finished_at = now,
                .stdout_data = "", .stdout_len = 0,
                .stderr_data = message ?: "", .stderr_len = message ? strlen(message) : 0,
                .stderr_bytes = message ? strlen(message) : 0,
        };
        r = st->ops->exec_finish(st, &f);
        if (r < 0)
                log_warning("Recording the end of exec %s failed: %s", x->exec_uid, strerror(-r));

        /* The record as stored, built here: no read-back. */
        rec.stdout_data = strdup("");
        rec.stderr_data = strdup(f.stderr_data);
        if (rec.stdout_data && rec.stderr_data) {
                rec.stdout_inline = rec.stderr_inline = true;
                rec.stderr_len = f.stderr_len;
        } else {
                free(TAKE_PTR(rec.stdout_data));
                free(TAKE_PTR(rec.stderr_data));
        }
        rec.status = status;
        rec.has_exit_code = has_exit_code;
        rec.exit_code = exit_code;
        rec.stderr_bytes = f.stderr_bytes;
        rec.finished_at = now;
        x->rec = (ExecRecord) {};
        x->has_rec = false;
        exec_complete(x, err, &rec);
}

static void end_launch_failed(Exec *x, const LaunchError *lerr) {
        const char *argv0 = x->argv && x->argv[0] ? x->argv[0] : "?";
        Error err = ERROR_INIT;
        char msg[512];

        if (streq(lerr->step, "exec")) {
                /* As a shell reports it: 127 for an unknown command, 126 for one that
                 * cannot be run. */
                if (lerr->error == ENOENT) {
                        (void) bsprintf(msg, sizeof msg, "sandloom: %s: command not found\n", argv0);
                        end_without_process(x, EXEC_FAILED, true, 127, msg, NULL);
                } else {
                        (void) bsprintf(msg, sizeof msg, "sandloom: %s: %s\n", argv0, strerror(lerr->error));
                        end_without_process(x, EXEC_FAILED, true, 126, msg, NULL);
                }
                return;
        }
        if (streq(lerr->step, "enter working directory")) {
                (void) bsprintf(msg, sizeof msg, "sandloom: cannot enter working directory %s: %s\n", x->cwd,
                                strerror(lerr->error));
                (void) error_set(&err, -EINVAL, 400, "SANDBOX_INVALID_CWD", "cannot enter working directory %s: %s",
                                 x->cwd, strerror(lerr->error));
                end_without_process(x, EXEC_FAILED, false, 0, msg, &err);
                return;
        }
        log_emit(LOG_LEVEL_ERROR, json_pack("{s:s, s:s, s:s}", "event", "launch_failed", "exec_uid", x->exec_uid, "step", lerr->step),
                 "Launching exec %s failed: %s", x->exec_uid, lerr->message);
        (void) bsprintf(msg, sizeof msg, "sandloom: the command could not be started: %s\n", lerr->message);
        (void) error_set(&err, -EIO, 503, "SANDBOX_LAUNCH_FAILED", "the command could not be started: %s", lerr->message);
        end_without_process(x, EXEC_FAILED, false, 0, msg, &err);
}

static void log_launch_timings(const Exec *x, const LaunchTimings *t) {
        json_t *o = json_pack("{s:s, s:s}", "event", "launch_timing", "exec_uid", x->exec_uid);
        uint64_t prev = t->at_usec[LAUNCH_T_START];

        for (LaunchTiming i = LAUNCH_T_START + 1; o && i < _LAUNCH_T_MAX; i++) {
                if (t->at_usec[i] == 0)
                        continue;
                (void) json_object_set_new(o, launch_timing_name(i),
                                           json_integer(t->at_usec[i] > prev ? (json_int_t) (t->at_usec[i] - prev) : 0));
                prev = t->at_usec[i];
        }
        log_emit(LOG_LEVEL_DEBUG, o, "exec %s: launch steps", x->exec_uid);
}

static int make_pipe(int ret[2]) {
        if (pipe2(ret, O_CLOEXEC) < 0)
                return -errno;
        if (fcntl(ret[0], F_SETFL, O_NONBLOCK) < 0) {
                int r = -errno;
                ret[0] = safe_close(ret[0]);
                ret[1] = safe_close(ret[1]);
                return r;
        }
        return 0;
}

static void output_setup(Exec *x, ExecStream s, int pipe_fd) {
        ExecOutput *o = &x->out[s];

        o->pipe_fd = pipe_fd;
        o->dir_fd = x->engine->execs_fd;
        exec_spool_name(x->exec_uid, s, o->name, sizeof o->name);
        o->cap = x->engine->d->config.max_output_bytes;
        o->on_data = exec_on_output_data;
        o->on_eof = exec_on_output_eof;
        o->userdata = x;
}

/* Where the sampling supervisor limits memory or processes (sampler.h), the end of an exec
 * it killed says so: oom_killed for memory, and the reason as the last line of stderr,
 * written through a writer of the stderr pipe of our own (its own open file description,
 * non-blocking: the exit callback must not block; with the tree gone, the pipe is drained). */
typedef struct SampledExit {
        Exec *x;
        int stderr_fd;
} SampledExit;

static void sampled_exit_free(SampledExit *w) {
        safe_close(w->stderr_fd);
        free(w);
}

static void on_exit_sampled(SpawnerExec *sx, const SpawnerExit *exit, void *userdata) {
        SampledExit *w = userdata;
        Exec *x = w->x;
        SpawnerExit ex = *exit;
        SamplerKill k;

        if (!ex.lost && !ex.exited && ex.signal == SIGKILL && sampler_killed_since(x->uid, x->t_launched, &k)) {
                char msg[256];

                if (k.resource == SAMPLER_MEMORY)
                        ex.oom_killed = true;
                sampler_kill_message(&k, msg, sizeof msg);
                if (w->stderr_fd >= 0)
                        (void) !write(w->stderr_fd, msg, strlen(msg));
        }
        sampled_exit_free(w);
        sampler_exec_end();
        exec_on_spawner_exit(sx, &ex, x);
}

static SampledExit *sampled_exit_new(Exec *x, int stderr_w) {
        SampledExit *w = malloc(sizeof *w);
        char path[64];

        if (!w)
                return NULL;
        (void) bsprintf(path, sizeof path, "/proc/self/fd/%d", stderr_w);
        *w = (SampledExit) { .x = x, .stderr_fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC) };
        return w;
}

/* The limits in force for X's sandbox: its own (sandbox-limits.h) or the worker's. */
static void effective_limits(Exec *x, SandboxLimits *ret) {
        Store *st = x->engine->d->store;
        SandboxLimits own = {};
        SandboxRecord rec;

        if (!sandbox_limits_lookup(x->internal_id, &own)) {
                if (st->ops->sandbox_get_internal(st, x->internal_id, &rec) >= 0) {
                        own = rec.limits;
                        sandbox_limits_note(x->internal_id, &own);
                } else
                        log_warning("exec %s: cannot read its sandbox's limits; the worker's defaults apply",
                                    x->exec_uid);
        }
        sandbox_limits_effective(&x->engine->d->config, &own, ret);
}

/* Launches the process of X, whose RUNNING record is committed, in the sandbox at FS_FD. */
static void launch_process(Exec *x, int fs_fd) {
        ExecEngine *e = x->engine;
        const Config *c = &e->d->config;
        int out_pipe[2] = { -EBADF, -EBADF }, err_pipe[2] = { -EBADF, -EBADF };
        SpawnerExec *sx = NULL;
        char hostname[LAUNCH_HOSTNAME_MAX + 1];
        LaunchError lerr = {};
        bool exited, kill_now, waiters;
        ExecStatus forced;
        int r;

        r = make_pipe(out_pipe);
        if (r >= 0)
                r = make_pipe(err_pipe);
        if (r >= 0)
                r = launch_sanitize_hostname(x->sandbox_id, hostname, sizeof hostname);
        if (r < 0) {
                Error err = ERROR_INIT;

                safe_close(out_pipe[0]);
                safe_close(out_pipe[1]);
                safe_close(err_pipe[0]);
                safe_close(err_pipe[1]);
                (void) error_set(&err, r, 503, "SANDBOX_LAUNCH_FAILED", "preparing the command failed: %s",
                                 strerror(-r));
                end_without_process(x, EXEC_FAILED, false, 0, "sandloom: preparing the command failed\n", &err);
                return;
        }

        SandboxLimits limits;
        effective_limits(x, &limits);

        LaunchSpec spec = {
                .sandbox_key = x->internal_id,
                .hostname = hostname,
                .uid = x->uid,
                .gid = x->uid,
                .level = e->level,
                .network = e->network,
                .fs_fd = fs_fd,
                .stdin_fd = x->stdin_fd >= 0 ? x->stdin_fd : e->null_fd,
                .stdout_fd = out_pipe[1],
                .stderr_fd = err_pipe[1],
                .argv = x->argv,
                .envp = x->envp,
                .cwd = x->cwd,
                .tmpfs_bytes = c->tmpfs_bytes,
                .limits = {
                        .open_files = c->max_open_files,
                        .cpu_seconds = c->cpu_seconds,
                        .file_size_bytes = c->max_file_size_bytes,
                        /* Without a pids cgroup, RLIMIT_NPROC (per uid, so per sandbox) is the
                         * next best thing; with one, the cgroup is the limit. */
                        .processes = spawner_pids_limited(e->spawner) ? 0 : limits.max_processes,
                        .cgroup_memory_bytes = limits.memory_bytes,
                        .cgroup_processes = limits.max_processes,
                        .cgroup_cpu_millicores = limits.cpu_millicores,
                },
                .collect_timings = log_enabled(LOG_LEVEL_DEBUG),
        };
        LaunchTimings timings = {};

        SampledExit *sampled = NULL;
        if (sampler_active()) {
                sampler_set_limits(x->uid, limits.memory_bytes, limits.max_processes);
                /* Without memory for it (only then) the exec is neither counted nor marked. */
                sampled = sampled_exit_new(x, err_pipe[1]);
                if (sampled)
                        sampler_exec_begin();
        }

        (void) exec_ref(x); /* the exit callback's */
        x->t_launched = now_monotonic_usec();
        r = spawner_launch(e->spawner, &spec, sampled ? on_exit_sampled : exec_on_spawner_exit,
                           sampled ? (void *) sampled : (void *) x, &sx, &lerr, spec.collect_timings ? &timings : NULL);
        if (r < 0 && sampled) {
                sampled_exit_free(sampled); /* like the reference: never called after a failed launch */
                sampler_exec_end();
        }
        x->t_spawned = now_monotonic_usec();
        if (spec.collect_timings && r >= 0)
                log_launch_timings(x, &timings);
        /* The helper has its copies (or none): ours go now, so that EOF means "every
         * process of the exec closed them". */
        safe_close(out_pipe[1]);
        safe_close(err_pipe[1]);
        x->stdin_fd = safe_close(x->stdin_fd);
        if (r < 0) {
                exec_unref(x); /* the exit callback's: never called after a failed launch */
                safe_close(out_pipe[0]);
                safe_close(err_pipe[0]);
                end_launch_failed(x, &lerr);
                return;
        }

        output_setup(x, EXEC_STDOUT, out_pipe[0]);
        output_setup(x, EXEC_STDERR, err_pipe[0]);
        (void) pthread_mutex_lock(&e->lock);
        x->sx = sx;
        x->phase = EXEC_PHASE_RUNNING;
        (void) pthread_mutex_unlock(&e->lock);

        for (ExecStream s = EXEC_STDOUT; s <= EXEC_STDERR; s++) {
                (void) exec_ref(x); /* the pump's, dropped at EOF */
                r = exec_pump_add_output(e->pump, &x->out[s]);
                if (r < 0) {
                        log_warning("exec %s: cannot watch its output: %s", x->exec_uid, strerror(-r));
                        x->out[s].pipe_fd = safe_close(x->out[s].pipe_fd);
                        atomic_store(&x->out[s].eof, true);
                        exec_unref(x);
                }
        }
        exec_timer_arm(x, &x->deadline_timer, x->t_launched + x->timeout_seconds * USEC_PER_SEC);

        (void) pthread_mutex_lock(&e->lock);
        x->launched = true;
        exited = x->exited;
        forced = x->forced;
        kill_now = x->kill_now;
        waiters = x->waiters != NULL;
        (void) pthread_mutex_unlock(&e->lock);

        exec_free_payload(x);
        if (exited)
                (void) exec_call(x, exec_check_end_call);
        else if (forced != EXEC_RUNNING) /* cancelled, released or shut down while launching */
                (void) exec_call(x, kill_now ? exec_kill_call : exec_terminate_call);
        /* Background requests waiting for the start. */
        if (waiters)
                (void) exec_call(x, exec_notify_call);
}

/* The working directory as the sandbox will see it, resolved in-root the way the files
 * API resolves paths: it must exist, be a directory, and stay inside the four roots
 * after symlinks (a link to /etc is refused, not followed out). The launch's own chdir
 * still decides in the end (it runs as the sandbox's uid). */
static int check_cwd(Exec *x, int fs_fd, Error *err) {
        static const char *const roots[] = { "/workspace", "/home/sandbox", "/cache", "/envs" };
        _cleanup_close_ int fd = -EBADF;
        struct stat st, fs_st, home_st;

        for (size_t i = 0; i < ELEMENTSOF(roots); i++)
                if (streq(x->cwd, roots[i]))
                        return 0; /* the common case: no lookup */
        fd = resolve_open(fs_fd, x->cwd, O_PATH | O_DIRECTORY);
        if (fd < 0)
                return error_set(err, fd, 400, "SANDBOX_INVALID_CWD", "cannot enter working directory %s: %s", x->cwd,
                                 strerror(-fd));
        if (fstat(fd, &st) < 0 || fstat(fs_fd, &fs_st) < 0 || fstatat(fs_fd, "home", &home_st, AT_SYMLINK_NOFOLLOW) < 0)
                return error_set(err, -errno, 400, "SANDBOX_INVALID_CWD", "cannot enter working directory %s: %s",
                                 x->cwd, strerror(errno));
        /* Under fs/ only fs/ itself and fs/home are outside the roots (both root-owned). */
        if ((st.st_dev == fs_st.st_dev && st.st_ino == fs_st.st_ino) ||
            (st.st_dev == home_st.st_dev && st.st_ino == home_st.st_ino))
                return error_set(err, -EPERM, 400, "SANDBOX_INVALID_CWD",
                                 "working directory %s resolves outside /workspace, /home/sandbox, /cache and /envs",
                                 x->cwd);
        return 0;
}

void exec_launch(Exec *x) {
        ExecEngine *e = x->engine;
        Store *st = e->d->store;
        _cleanup_close_ int fs_fd = -EBADF;
        ExecRecord rec = {};
        ExecStatus forced;
        bool created = false, killing;
        Error err = ERROR_INIT;
        int r;

        (void) pthread_mutex_lock(&e->lock);
        x->phase = EXEC_PHASE_LAUNCHING;
        forced = x->forced;
        killing = e->killing;
        (void) pthread_mutex_unlock(&e->lock);
        x->t_admitted = now_monotonic_usec();

        if (killing || forced == EXEC_WORKER_LOST) {
                (void) error_set(&err, -ESHUTDOWN, 503, "SANDBOX_SHUTTING_DOWN",
                                 "The daemon is shutting down; retry on another worker.");
                exec_complete(x, &err, NULL);
                return;
        }

        r = workspace_open_fs(e->d->sandboxes_fd, x->internal_id, &fs_fd);
        if (r < 0) {
                if (r == -ENOENT)
                        (void) error_set(&err, r, 404, "SANDBOX_NOT_FOUND", "sandbox '%s' has no workspace",
                                         x->sandbox_id);
                else
                        error_fill_internal(&err, r, "opening the workspace");
                exec_complete(x, &err, NULL);
                return;
        }
        if (forced == EXEC_RUNNING && check_cwd(x, fs_fd, &err) < 0) {
                exec_complete(x, &err, NULL);
                return;
        }

        ExecBegin b = {
                .owner = x->owner, .sandbox_id = x->sandbox_id, .lifecycle_id = x->lifecycle_id,
                .exec_id = x->exec_id, .exec_uid = x->exec_uid, .fingerprint = x->fingerprint,
                .generation = x->generation, .principal = x->principal,
                .argv_json = x->argv_json, .cwd = x->cwd, .env_keys_json = x->env_keys_json,
                .exec_scope = x->scope, .background = x->background, .timeout_seconds = x->timeout_seconds,
                .worker_id = e->d->worker_id, .worker_epoch = e->d->worker_epoch,
                .now = now_realtime_usec(),
        };
        r = st->ops->exec_begin(st, &b, &rec, &created);
        x->t_begun = now_monotonic_usec();
        if (r < 0) {
                (void) map_begin_error(x, r, &err);
                exec_complete(x, &err, NULL);
                return;
        }
        if (!created) {
                /* Ran before (a retry after a restart, or a race we lost): its record. */
                exec_complete(x, NULL, &rec);
                return;
        }
        (void) pthread_mutex_lock(&e->lock);
        x->rec = rec;
        x->has_rec = true;
        forced = x->forced;
        (void) pthread_mutex_unlock(&e->lock);

        if (forced != EXEC_RUNNING) {
                /* Cancelled (or its sandbox released) before its process started. */
                end_without_process(x, forced, false, 0, NULL, NULL);
                return;
        }
        launch_process(x, fs_fd);
}

