/* SPDX-License-Identifier: MIT */
#include "daemon.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec.h"
#include "fileio.h"
#include "holds.h"
#include "identity.h"
#include "jobs.h"
#include "json-util.h"
#include "disk.h"
#include "log.h"
#include "probe.h"
#include "reaper.h"
#include "resources.h"
#include "sampler.h"
#include "sandbox.h"
#include "server.h"
#include "spawner.h"
#include "string-util.h"

/* `sandloom serve`, top to bottom: configuration, data directory, identity, store,
 * recovery, housekeeping, HTTP, then wait for a signal and shut down in reverse. Every
 * failure before serving is one sentence on stderr and a non-zero exit. */

#define EXIT_CONFIG 2
#define EXIT_SECOND_SIGNAL 130
#define RM_DEPTH_MAX 64
/* Launches of execs that waited in the admission queue, and pruning: never on the pump or
 * the spawner's reader thread (a launch waits for an answer the reader delivers). */
#define EXEC_JOB_THREADS 4u
#define EXEC_JOB_QUEUE 4096u
/* After the grace period, how long killed execs get to have their end recorded. */
#define EXEC_KILL_WAIT_USEC (10 * USEC_PER_SEC)

static JobPool *exec_jobs;

static void fail(const char *fmt, ...) _printf_(1, 2);
static void fail(const char *fmt, ...) {
        va_list ap;

        fputs("sandloom: ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
}

static LogLevel log_level_from_string(const char *s) {
        if (streq(s, "debug"))
                return LOG_LEVEL_DEBUG;
        if (streq(s, "warning"))
                return LOG_LEVEL_WARNING;
        if (streq(s, "error"))
                return LOG_LEVEL_ERROR;
        return LOG_LEVEL_INFO;
}

/* Creates (if needed) and opens subdirectory NAME of DIR_FD with MODE, fixing the mode
 * of an existing one. Never follows a symlink. */
static int open_subdir(int dir_fd, const char *name, mode_t mode) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;

        if (mkdirat(dir_fd, name, mode) < 0 && errno != EEXIST)
                return -errno;
        fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (geteuid() == 0 && (st.st_uid != 0 || st.st_gid != 0) && fchown(fd, 0, 0) < 0)
                return -errno;
        if ((st.st_mode & 07777) != mode && fchmod(fd, mode) < 0)
                return -errno;
        return TAKE_FD(fd);
}

/* Removes everything inside DIR_FD, fd-relative, never following a link. Best effort:
 * returns the number of entries that could not be removed. */
static unsigned rm_children(int dir_fd, unsigned depth) {
        unsigned failed = 0;
        struct dirent *de;
        DIR *dir;
        int fd;

        fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return 1;
        dir = fdopendir(fd);
        if (!dir) {
                safe_close(fd);
                return 1;
        }
        while ((de = readdir(dir))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (unlinkat(dirfd(dir), de->d_name, 0) >= 0)
                        continue;
                if (errno == EISDIR && depth < RM_DEPTH_MAX) {
                        int sub = openat(dirfd(dir), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
                        if (sub >= 0) {
                                failed += rm_children(sub, depth + 1);
                                safe_close(sub);
                        }
                        if (unlinkat(dirfd(dir), de->d_name, AT_REMOVEDIR) >= 0)
                                continue;
                }
                failed++;
        }
        closedir(dir);
        return failed;
}

/* DATA root-owned 0711 (others may traverse to their own sandbox directory, not list);
 * sandboxes/ 0711, trash/ and tmp/ 0700. */
static int setup_data_dir(Daemon *d) {
        char path[PATH_MAX];
        int r;

        if (mkdir(d->config.data_dir, 0711) < 0 && errno != EEXIST) {
                fail("Cannot create the data directory %s (SANDBOX_DATA_DIR): %s.", d->config.data_dir, strerror(errno));
                return -errno;
        }
        d->data_fd = open(d->config.data_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (d->data_fd < 0) {
                r = -errno;
                fail("Cannot open the data directory %s (SANDBOX_DATA_DIR): %s.", d->config.data_dir, strerror(-r));
                return r;
        }
        if (!realpath(d->config.data_dir, path) || !(d->data_dir = strdup(path))) {
                fail("Cannot resolve the data directory %s: %s.", d->config.data_dir, strerror(errno));
                return -ENOMEM;
        }
        r = open_subdir(d->data_fd, ".", 0711);
        if (r < 0) {
                fail("Cannot make the data directory %s root-owned with mode 0711: %s.", d->data_dir, strerror(-r));
                return r;
        }
        safe_close(r);

        static const struct {
                const char *name;
                mode_t mode;
                size_t offset;
        } subdirs[] = {
                { "sandboxes", 0711, offsetof(Daemon, sandboxes_fd) },
                { "trash", 0700, offsetof(Daemon, trash_fd) },
                { "tmp", 0700, offsetof(Daemon, tmp_fd) },
        };
        for (size_t i = 0; i < ELEMENTSOF(subdirs); i++) {
                r = open_subdir(d->data_fd, subdirs[i].name, subdirs[i].mode);
                if (r < 0) {
                        fail("Cannot prepare %s/%s: %s.", d->data_dir, subdirs[i].name, strerror(-r));
                        return r;
                }
                *(int *) ((char *) d + subdirs[i].offset) = r;
        }

        /* Spool files of requests that were cut short by the last stop. */
        if (rm_children(d->tmp_fd, 0) > 0)
                log_warning("Could not remove every leftover in %s/tmp.", d->data_dir);
        return 0;
}

static int setup_identity(Daemon *d, bool *ret_token_generated) {
        char err[512];
        TokenInfo info;
        bool created;
        int r;

        r = identity_load_token(&d->config, d->data_fd, &d->token, &info, err, sizeof err);
        if (r < 0) {
                fail("%s", err);
                return r;
        }
        d->token_len = strlen(d->token);
        if (info.loose_permissions && info.source == TOKEN_FROM_FILE)
                log_warning("SANDBOX_INTERNAL_TOKEN_FILE is readable by other users; make it mode 0600 or 0400.");
        *ret_token_generated = info.source == TOKEN_GENERATED;

        r = identity_load_worker_id(&d->config, d->data_fd, d->worker_id, &created, err, sizeof err);
        if (r < 0) {
                fail("%s", err);
                return r;
        }
        r = identity_new_epoch(d->worker_epoch);
        if (r < 0) {
                fail("Cannot generate a worker epoch: %s.", strerror(-r));
                return r;
        }
        return 0;
}

static int setup_store(Daemon *d, char previous_epoch[EPOCH_LEN + 1]) {
        StoreOptions opts = { .data_dir = d->data_dir, .busy_timeout_ms = d->config.sqlite_busy_timeout_ms };
        char err[512] = "";
        int r;

        r = store_open_sqlite(&opts, &d->store, err, sizeof err);
        if (r < 0) {
                if (err[0] == '\0')
                        fail("Cannot open the database in %s: %s.", d->data_dir, strerror(-r));
                else
                        fail("%s", err);
                return r;
        }
        r = d->store->ops->worker_register(d->store,
                                           &(WorkerInfo) {
                                                   .worker_id = d->worker_id,
                                                   .worker_epoch = d->worker_epoch,
                                                   .endpoint = d->worker_endpoint,
                                                   .capabilities_json = "{}",
                                                   .now = now_realtime_usec(),
                                           },
                                           previous_epoch);
        if (r < 0) {
                fail("Cannot register worker %s in the database: %s.", d->worker_id, strerror(-r));
                return r;
        }
        return 0;
}

/* The daemon protects itself from the OOM killer (DESIGN §6); best effort. */
static void protect_from_oom(void) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (geteuid() != 0)
                return;
        fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
        r = fd < 0 ? -errno : loop_write(fd, "-1000", 5);
        if (r < 0)
                log_info("Could not protect the daemon from the OOM killer: %s.", strerror(-r));
}

/* ---- isolation: the spawner, the probe, the level ---- */

typedef struct ExecJob {
        void (*fn)(void *arg);
        void *arg;
} ExecJob;

static void exec_job_run(void *p) {
        ExecJob *j = p;

        j->fn(j->arg);
        free(j);
}

static int exec_submit(void *userdata, void (*fn)(void *arg), void *arg) {
        ExecJob *j = malloc(sizeof *j);
        int r;

        if (!j)
                return -ENOMEM;
        *j = (ExecJob) { fn, arg };
        r = jobpool_submit(userdata, j);
        if (r < 0)
                free(j);
        return r;
}

/* The uid the probe runs as: outside the sandbox range, so that no sandbox ever shares
 * it: SANDBOX_UID_END + 1, or SANDBOX_UID_START - 1 when the range ends at the top. */
static uid_t probe_uid(const Config *c) {
        return c->uid_end < UINT32_C(4294967294) ? (uid_t) (c->uid_end + 1) : (uid_t) (c->uid_start - 1);
}

static json_t *isolation_json(const Daemon *d, const SpawnerInfo *info, const ProbeReport *probe, IsolationLevel level,
                              NetworkMode net, const char *spawner_error) {
        json_t *o, *levels = json_object();

        for (IsolationLevel l = ISOLATION_LEVEL_MIN; levels && l <= ISOLATION_LEVEL_MAX; l++) {
                json_t *lj = probe ? json_pack("{s:b}", "ok", probe->levels[l].ok) : json_pack("{s:b}", "ok", false);
                if (lj && (!probe || !probe->levels[l].ok))
                        (void) json_object_set_new(lj, "error",
                                                   json_string_lossy(probe ? probe->levels[l].message : spawner_error,
                                                                     strlen(probe ? probe->levels[l].message
                                                                                  : spawner_error)));
                (void) json_object_set_new(levels, isolation_level_to_string(l), lj);
        }
        o = json_pack("{s:s?, s:s, s:o, s:s, s:s, s:s, s:I}", "level", isolation_level_to_string(level), "requested",
                      d->config.isolation_level, "levels", levels, "network_mode", network_mode_to_string(net),
                      "runtime", d->config.runtime, "seccomp", level != ISOLATION_LEVEL_INVALID ? "enforced" : "none",
                      "probe_uid", (json_int_t) probe_uid(&d->config));
        if (!o)
                return NULL;
        if (net == NETWORK_MODE_HOST)
                (void) json_object_set_new(o, "warning",
                                           json_string("network mode host exposes the host's loopback and abstract sockets "
                                                       "to every sandbox"));
        if (info)
                (void) json_object_set_new(o, "tracking",
                                           info->cgroup_tracking
                                                   ? json_pack("{s:s, s:s}", "mechanism", "cgroup2", "path", info->cgroup_path)
                                                   : json_pack("{s:s, s:s}", "mechanism", "pid namespace", "error",
                                                               info->cgroup_error));
        if (info)
                (void) json_object_set_new(o, "spawner", json_pack("{s:i, s:b}", "pid", (int) info->pid, "clone3", info->clone3));
        if (spawner_error)
                (void) json_object_set_new(o, "error", json_string_lossy(spawner_error, strlen(spawner_error)));
        return o;
}

/* Forks the spawner (before any thread of ours exists), probes every level, picks one.
 * An explicitly requested level that fails refuses start-up; with "auto" and nothing
 * working, the daemon serves everything but exec (503 SANDBOX_ISOLATION_UNAVAILABLE). */
static int setup_isolation(Daemon *d, IsolationLevel *ret_level, NetworkMode *ret_net, char *unavailable,
                           size_t unavailable_len) {
        const char *masks[] = { isempty(d->config.internal_token_file) ? NULL : d->config.internal_token_file, NULL };
        bool explicit_level = !streq(d->config.isolation_level, "auto");
        IsolationLevel want = isolation_level_from_string(d->config.isolation_level), level;
        SpawnerOptions opts = {
                .mask_paths = masks,
                .netns_linger_usec = d->config.netns_linger_seconds * USEC_PER_SEC ?: 1,
                .limits = { .memory_bytes = d->config.memory_limit_bytes, .processes = d->config.max_processes },
        };
        ProbeReport probe = {};
        SpawnerInfo info;
        NetworkMode net;
        char msg[512] = "";
        int r;

        if (network_mode_from_string(d->config.network_mode, &net) < 0) {
                fail("SANDBOX_NETWORK_MODE must be none, isolated or host.");
                return -EINVAL;
        }
        if (cgroup_limits_parse_cpu_quota(d->config.cpu_quota, &opts.limits.cpu_millicores) < 0) {
                fail("SANDBOX_CPU_QUOTA must be a number of cores such as 0.5 or 2 (at most 3 decimals), or empty.");
                return -EINVAL;
        }
        if (launch_runtime_from_string(d->config.runtime, &opts.runtime) < 0) {
                fail("SANDBOX_RUNTIME must be native or bwrap.");
                return -EINVAL;
        }
        *ret_net = net;

        r = spawner_start(&opts, &d->spawner, msg, sizeof msg);
        if (r < 0) {
                /* An explicit choice that cannot be honoured refuses start-up. */
                if (explicit_level || opts.runtime != LAUNCH_RUNTIME_NATIVE) {
                        fail("SANDBOX_ISOLATION_LEVEL=%s, SANDBOX_RUNTIME=%s: the launch helper could not start: %s (%s).",
                             d->config.isolation_level, d->config.runtime, msg, strerror(-r));
                        return -EPERM;
                }
                log_warning("Commands cannot run on this host: the launch helper could not start: %s (%s).", msg,
                            strerror(-r));
                (void) bsprintf(unavailable, unavailable_len, "Commands cannot run on this worker: %s.", msg);
                d->isolation_report = isolation_json(d, NULL, NULL, ISOLATION_LEVEL_INVALID, net, msg);
                *ret_level = ISOLATION_LEVEL_INVALID;
                return 0;
        }
        spawner_get_info(d->spawner, &info);
        if (!info.helper_exec)
                log_warning("sandloom-spawner was not found beside this binary (or could not run): the launch "
                            "helper runs in a forked copy of the daemon, which costs about 0.5 ms more CPU per exec.");

        r = probe_levels(d->spawner, d->tmp_fd, probe_uid(&d->config), net, &probe);
        if (r < 0) {
                fail("The isolation probe could not run: %s.", strerror(-r));
                return r;
        }
        if (explicit_level) {
                if (!probe.levels[want].ok) {
                        fail("SANDBOX_ISOLATION_LEVEL=%s does not work on this host: %s.", d->config.isolation_level,
                             probe.levels[want].message);
                        return -EPERM;
                }
                level = want;
        } else
                level = probe.strongest;

        d->isolation_report = isolation_json(d, &info, &probe, level, net, NULL);
        if (level == ISOLATION_LEVEL_INVALID && opts.runtime != LAUNCH_RUNTIME_NATIVE) {
                fail("SANDBOX_RUNTIME=%s does not work on this host: %s.", d->config.runtime,
                     probe.levels[ISOLATION_LEVEL_BASIC].message);
                return -EPERM;
        }
        if (level == ISOLATION_LEVEL_INVALID) {
                log_warning("No isolation level works on this host (basic: %s); commands are refused.",
                            probe.levels[ISOLATION_LEVEL_BASIC].message);
                (void) bsprintf(unavailable, unavailable_len,
                                "No isolation level works on this worker (basic: %s); see /healthz.",
                                probe.levels[ISOLATION_LEVEL_BASIC].message);
                spawner_stop(TAKE_PTR(d->spawner));
        } else
                log_emit(LOG_LEVEL_INFO,
                         json_pack("{s:s, s:s, s:s, s:b}", "event", "isolation", "level", isolation_level_to_string(level),
                                   "network_mode", network_mode_to_string(net), "cgroup_tracking", info.cgroup_tracking),
                         "Isolation level %s (requested %s), runtime %s, network %s, tree tracking by %s",
                         isolation_level_to_string(level), d->config.isolation_level, d->config.runtime,
                         network_mode_to_string(net),
                         info.cgroup_tracking ? "cgroup v2" : "PID namespace");
        *ret_level = level;
        return 0;
}

static int setup_execs(Daemon *d, IsolationLevel level, NetworkMode net, const char *unavailable) {
        char err[512] = "";
        int r;

        r = d->store->ops->exec_mark_lost(d->store, d->worker_id, d->worker_epoch, now_realtime_usec());
        if (r < 0) {
                fail("Cannot mark the execs of the previous run as lost: %s.", strerror(-r));
                return r;
        }
        if (r > 0)
                log_info("%d exec(s) of the previous run of worker %s ended WORKER_LOST.", r, d->worker_id);

        r = jobpool_new(EXEC_JOB_THREADS, EXEC_JOB_QUEUE, exec_job_run, exec_job_run, &exec_jobs);
        if (r < 0) {
                fail("Cannot start the exec launch threads: %s.", strerror(-r));
                return r;
        }
        ExecEngineOptions opts = {
                .spawner = d->spawner,
                .level = level,
                .network = net,
                .submit = exec_submit,
                .submit_userdata = exec_jobs,
                .unavailable_reason = unavailable,
        };
        r = exec_engine_new(d, &opts, &d->execs, err, sizeof err);
        if (r < 0) {
                fail("%s", err);
                return r;
        }
        return 0;
}

static int wait_signal(int sfd, int timeout_ms) {
        struct signalfd_siginfo si;
        struct pollfd p = { .fd = sfd, .events = POLLIN };
        int r;

        r = poll(&p, 1, timeout_ms);
        if (r <= 0)
                return 0;
        if (read(sfd, &si, sizeof si) != (ssize_t) sizeof si)
                return 0;
        return (int) si.ssi_signo;
}

static void daemon_free(Daemon *d) {
        disk_free(TAKE_PTR(d->disk)); /* first: its thread may cancel execs */
        /* Launch jobs and launch threads first (they use the spawner and the sampler), then
         * the spawner (whose last exit reports go through the engine's pump and ask the
         * sampler), then the sampler (it kills through children of its own, not the
         * helper), then the engine. */
        if (exec_jobs)
                jobpool_stop(exec_jobs);
        exec_engine_stop_launches(d->execs);
        spawner_stop(TAKE_PTR(d->spawner));
        sampler_stop();
        exec_engine_free(TAKE_PTR(d->execs));
        jobpool_free(TAKE_PTR(exec_jobs));
        json_decref(TAKE_PTR(d->isolation_report));
        if (d->reaper)
                reaper_stop(d->reaper);
        if (d->holds)
                holds_free(d->holds);
        store_close(d->store);
        safe_close(d->tmp_fd);
        safe_close(d->trash_fd);
        safe_close(d->sandboxes_fd);
        safe_close(d->data_fd);
        if (d->token)
                explicit_zero(d->token, d->token_len);
        free(d->token);
        free(d->worker_endpoint);
        free(d->data_dir);
        config_free(&d->config);
}

/* Everything up to a running HTTP server. Returns 0 or an exit status. */
static int daemon_start(Daemon *d, Server **ret_server) {
        char previous_epoch[EPOCH_LEN + 1] = "", url[128], err[512], unavailable[512] = "";
        _cleanup_close_ int listen_fd = -EBADF;
        IsolationLevel level = ISOLATION_LEVEL_INVALID;
        NetworkMode net = NETWORK_MODE_NONE;
        bool generated = false;
        int r;

        log_set_level(log_level_from_string(d->config.log_level));
        umask(077);

        /* Bound first: a bad or busy address fails before anything is written, and port 0
         * gets its real port before the worker registers its endpoint. */
        listen_fd = server_listen(d->config.listen, url, sizeof url, err, sizeof err);
        if (listen_fd < 0) {
                fail("%s", err);
                return listen_fd == -EINVAL ? EXIT_CONFIG : EXIT_FAILURE;
        }

        if (setup_data_dir(d) < 0)
                return EXIT_FAILURE;
        /* Fork safety: the spawner is a copy of this process, made before any thread. */
        r = setup_isolation(d, &level, &net, unavailable, sizeof unavailable);
        if (r < 0)
                return r == -EINVAL || r == -EPERM ? EXIT_CONFIG : EXIT_FAILURE;
        (void) resources_probe(d); /* /healthz resource_control: what really limits a sandbox here */
        r = setup_identity(d, &generated);
        if (r < 0)
                return r == -EINVAL ? EXIT_CONFIG : EXIT_FAILURE;
        d->worker_endpoint = strdup(isempty(d->config.worker_endpoint) ? url : d->config.worker_endpoint);
        if (!d->worker_endpoint)
                return EXIT_FAILURE;

        if (setup_store(d, previous_epoch) < 0)
                return EXIT_FAILURE;
        r = disk_start(d, &d->disk, err, sizeof err);
        if (r < 0) {
                fail("%s", err);
                return EXIT_FAILURE;
        }
        r = holds_new(&d->holds);
        if (r < 0) {
                fail("Cannot create the hold manager: %s.", strerror(-r));
                return EXIT_FAILURE;
        }
        r = sandbox_recover(d, previous_epoch);
        if (r < 0) {
                fail("Cannot take over this worker's sandboxes: %s.", strerror(-r));
                return EXIT_FAILURE;
        }
        if (r > 0)
                log_info("Took over %d sandbox(es) from the previous run of worker %s.", r, d->worker_id);
        if (setup_execs(d, level, net, unavailable) < 0)
                return EXIT_FAILURE;
        r = reaper_start(d, &d->reaper);
        if (r < 0) {
                fail("Cannot start the reaper: %s.", strerror(-r));
                return EXIT_FAILURE;
        }
        protect_from_oom();

        r = server_start(d, listen_fd, ret_server, err, sizeof err);
        if (r < 0) {
                fail("%s", err);
                return EXIT_FAILURE;
        }
        TAKE_FD(listen_fd);

        /* DATA/endpoint: where a local client (`sandloom exec`, `sandloom mcp`, ...) finds this
         * daemon when it is given only the data directory. The URL is not a secret. */
        r = write_file_atomic_at(d->data_fd, "endpoint", url, strlen(url), 0644);
        if (r < 0)
                log_warning("Cannot write %s/endpoint: %s.", d->data_dir, strerror(-r));

        /* scripts/run and the integration tests take the URL from the line starting with
         * "sandloom listening on ": keep that prefix and the URL right after it. The token
         * itself is shown only on a terminal or right after it was created. */
        if (generated || isatty(STDOUT_FILENO))
                printf("sandloom listening on %s (token: %s)\n", url, d->token);
        else if (!isempty(d->config.internal_token))
                printf("sandloom listening on %s (token from SANDBOX_INTERNAL_TOKEN)\n", url);
        else if (!isempty(d->config.internal_token_file))
                printf("sandloom listening on %s (token in %s)\n", url, d->config.internal_token_file);
        else
                printf("sandloom listening on %s (token in %s/token)\n", url, d->data_dir);
        fflush(stdout);
        log_emit(LOG_LEVEL_INFO,
                 json_pack("{s:s, s:s, s:s, s:s}", "event", "started", "worker_id", d->worker_id, "worker_epoch",
                           d->worker_epoch, "endpoint", d->worker_endpoint),
                 "sandloom %s serving on %s", SANDLOOM_VERSION_STRING, url);
        return 0;
}

/* After the first signal: no new connections, in-flight requests get up to the grace
 * period. Returns EXIT_SECOND_SIGNAL if a second signal cuts it short. */
static int drain(Daemon *d, Server *s, int sfd) {
        usec_t deadline = now_monotonic_usec() + d->config.shutdown_grace_seconds * USEC_PER_SEC;

        atomic_store(&d->shutting_down, true);
        server_quiesce(s);
        exec_engine_stop_admitting(d->execs);
        log_info("Shutting down: waiting up to %" PRIu64 " s for %u request(s) and %u exec(s) in flight.",
                 d->config.shutdown_grace_seconds, server_active_requests(s), exec_engine_active(d->execs));
        while ((server_active_requests(s) > 0 || exec_engine_active(d->execs) > 0) && now_monotonic_usec() < deadline)
                if (wait_signal(sfd, 50) > 0) {
                        log_warning("Second signal: exiting now.");
                        return EXIT_SECOND_SIGNAL;
                }
        if (exec_engine_active(d->execs) > 0) {
                log_warning("Grace period over with %u exec(s) running; killing them (WORKER_LOST).",
                            exec_engine_active(d->execs));
                exec_engine_kill_all(d->execs, EXEC_KILL_WAIT_USEC);
        }
        if (server_active_requests(s) > 0)
                log_warning("Grace period over with %u request(s) still in flight; answering them 503.",
                            server_active_requests(s));
        return 0;
}

int daemon_run(int argc, char **argv) {
        Daemon d = {
                .data_fd = -EBADF,
                .sandboxes_fd = -EBADF,
                .trash_fd = -EBADF,
                .tmp_fd = -EBADF,
                .started_at = now_realtime_usec(),
        };
        _cleanup_close_ int sfd = -EBADF;
        Server *server = NULL;
        char err[512] = "";
        sigset_t mask;
        int r;

        r = config_load(&d.config, argc, argv, stdout, err, sizeof err);
        if (r != 0) {
                if (r < 0)
                        fail("%s", err);
                config_free(&d.config);
                return r > 0 ? EXIT_SUCCESS : EXIT_CONFIG;
        }

        /* Before any thread exists, so that every thread inherits the mask and the signals
         * are only ever read here, from the signalfd. */
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        if (pthread_sigmask(SIG_BLOCK, &mask, NULL) != 0 || (sfd = signalfd(-1, &mask, SFD_CLOEXEC)) < 0) {
                fail("Cannot set up signal handling: %s.", strerror(errno));
                config_free(&d.config);
                return EXIT_FAILURE;
        }
        (void) signal(SIGPIPE, SIG_IGN);

        r = daemon_start(&d, &server);
        if (r == 0) {
                while (wait_signal(sfd, -1) == 0)
                        ;
                r = drain(&d, server, sfd);
                if (r == EXIT_SECOND_SIGNAL) {
                        /* The operator asked to stop now: no clean-up, no exit handlers (and no
                         * leak report under a sanitizer for what we deliberately left). */
                        fflush(NULL);
                        _exit(r);
                }
                server_stop(server);
                log_info("Stopped.");
        }
        daemon_free(&d);
        return r;
}
