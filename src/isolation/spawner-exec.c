/* SPDX-License-Identifier: MIT */
/* The spawner's sandbox contexts and execs: from a launch request through the clone, the
 * child's report, the reaping and the teardown of the tree to the exit notification. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bwrap.h"
#include "cgroup-track.h"
#include "macros.h"
#include "netns.h"
#include "parse-util.h"
#include "spawner-internal.h"
#include "string-util.h"

#define PLAN_REFRESH_USEC (10 * USEC_PER_SEC)

static unsigned hash_str(const char *s) {
        unsigned h = 5381;
        for (; *s; s++)
                h = h * 33 + (unsigned char) *s;
        return h;
}

/* ---- contexts ---- */

static Context *context_find(Helper *h, const char *key) {
        for (Context *c = h->contexts[hash_str(key) % CONTEXT_BUCKETS]; c; c = c->next)
                if (streq(c->key, key))
                        return c;
        return NULL;
}

static int context_get(Helper *h, const char *key, Context **ret) {
        Context *c = context_find(h, key);
        unsigned b;

        if (c) {
                *ret = c;
                return 0;
        }
        c = calloc(1, sizeof *c);
        if (!c)
                return -ENOMEM;
        (void) strscpy(c->key, sizeof c->key, key);
        c->netns_fd = c->cgroup_fd = -EBADF;
        cgroup_limits_sandbox_init(&c->limits);
        b = hash_str(key) % CONTEXT_BUCKETS;
        c->next = h->contexts[b];
        h->contexts[b] = c;
        h->n_contexts++;
        *ret = c;
        return 0;
}

static void context_free(Helper *h, Context *c) {
        Context **p = &h->contexts[hash_str(c->key) % CONTEXT_BUCKETS];

        for (; *p; p = &(*p)->next)
                if (*p == c) {
                        *p = c->next;
                        break;
                }
        safe_close(c->netns_fd);
        cgroup_limits_sandbox_destroy(&h->limits, &c->limits);
        if (c->cgroup_fd >= 0) {
                safe_close(c->cgroup_fd);
                (void) cgroup_track_destroy_tree(h->cgroup_root_fd, c->cgroup_name, 1000);
        }
        h->n_contexts--;
        free(c);
}

static int context_prepare(Helper *h, Context *c, NetworkMode network, const LaunchLimits *own) {
        /* The sandbox's own limits where it has them, else the default. */
        CgroupLimits limits = {
                .memory_bytes = own->cgroup_memory_bytes ?: h->opts->limits.memory_bytes,
                .processes = own->cgroup_processes ?: h->opts->limits.processes,
                .cpu_millicores = own->cgroup_cpu_millicores ?: h->opts->limits.cpu_millicores,
        };
        int r;

        if (network == NETWORK_MODE_NONE && c->netns_fd < 0) {
                r = netns_create(h->home_netns_fd, &c->netns_fd);
                if (r == -ENOTRECOVERABLE)
                        _exit(EXIT_FAILURE);        /* stuck in a sandbox's netns: never launch from here */
                if (r < 0)
                        return r;
        }
        if (h->cgroup_root_fd >= 0 && c->cgroup_fd < 0) {
                (void) bsprintf(c->cgroup_name, sizeof c->cgroup_name, "s-%s", c->key);
                r = cgroup_track_mkdir(h->cgroup_root_fd, c->cgroup_name, &c->cgroup_fd);
                if (r < 0)
                        return r;
        }
        if (!c->limits_ready) {
                char name[LAUNCH_SANDBOX_KEY_MAX + 8];

                if (h->limits_mode == CGROUP_LIMITS_V2 && c->cgroup_fd >= 0) {
                        /* Limits and tracking share the tree: the sandbox cgroup holds the
                         * execs' tracking cgroups. */
                        r = cgroup_limits_v2_apply(c->cgroup_fd, &limits);
                        if (r < 0)
                                return r;
                        /* Each exec's tracking cgroup gets memory counters of its own: its
                         * OOM kills and peak are then exactly its own (best effort). */
                        (void) cgroup_limits_v2_delegate_memory(c->cgroup_fd);
                } else if (h->limits_mode == CGROUP_LIMITS_V1) {
                        (void) bsprintf(name, sizeof name, "s-%s", c->key);
                        r = cgroup_limits_sandbox_create(&h->limits, name, &limits, &c->limits);
                        if (r < 0)
                                return r;
                }
                c->limits_ready = true;
        }
        return 0;
}

/* The directory fd of the sandbox's memory cgroup, if it has one. */
static int context_memory_fd(Helper *h, Context *c, bool *ret_v2) {
        *ret_v2 = h->limits_mode == CGROUP_LIMITS_V2;
        if (h->limits_mode == CGROUP_LIMITS_V2)
                return c->cgroup_fd;
        if (h->limits_mode == CGROUP_LIMITS_V1)
                return c->limits.fd[CGROUP_MEMORY];
        return -EBADF;
}

/* At an exec's start, with its context ready: the memory counters to compare at its end. */
static void exec_memory_start(Helper *h, Exec *e) {
        CgroupMemoryCounters m;
        bool v2;
        int fd = context_memory_fd(h, e->ctx, &v2);

        e->generation = ++e->ctx->generation;
        e->solo = e->ctx->active == 1;
        if (fd < 0)
                return;
        /* Alone in its sandbox: the peak from here on is this exec's (v1 can reset it). */
        if (e->solo && !v2)
                (void) cgroup_limits_memory_reset_peak(fd);
        if (cgroup_limits_memory_counters(fd, v2, &m) >= 0) {
                e->oom_kills_at_start = m.oom_kills;
                e->have_oom_counter = true;
        }
}

/* At its end: was it killed for the sandbox's memory limit, and its peak memory charged. */
static void exec_memory_end(Helper *h, Exec *e, SpawnExited *m) {
        CgroupMemoryCounters c;
        bool v2, solo = e->solo && e->ctx->generation == e->generation;
        int fd = context_memory_fd(h, e->ctx, &v2);

        /* cgroup v2 with the memory controller on its tracking cgroup (fresh for this exec):
         * exact, also with other execs of the sandbox running. Any process of its tree killed
         * by the OOM killer counts, not only the main one. */
        if (v2 && e->cgroup_fd >= 0 && cgroup_limits_memory_counters(e->cgroup_fd, true, &c) >= 0) {
                m->oom_killed = c.oom_kills > 0;
                if (c.peak_bytes > 0) {
                        m->max_rss_bytes = c.peak_bytes;
                        m->max_rss_cgroup = 1;
                }
                return;
        }

        if (fd < 0 || cgroup_limits_memory_counters(fd, v2, &c) < 0)
                return;
        if (e->have_oom_counter && c.oom_kills > e->oom_kills_at_start && WIFSIGNALED(e->wait_status) &&
            WTERMSIG(e->wait_status) == SIGKILL)
                m->oom_killed = 1;
        /* v1 only: memory.max_usage_in_bytes was reset at the start (v2's memory.peak cannot
         * be reset before Linux 6.12 and may include earlier execs). */
        if (solo && !v2 && c.peak_bytes > 0) {
                m->max_rss_bytes = c.peak_bytes;
                m->max_rss_cgroup = 1;
        }
}

static void context_release_one(Helper *h, Context *c) {
        c->active--;
        if (c->active > 0)
                return;
        if (c->dropping)
                context_free(h, c);
        else
                c->linger_until = now_monotonic_usec() + h->linger_usec;
}

int spawner_helper_expire(Helper *h) {
        usec_t now = now_monotonic_usec(), next = 0;

        for (unsigned b = 0; b < CONTEXT_BUCKETS; b++)
                for (Context *c = h->contexts[b], *n; c; c = n) {
                        n = c->next;
                        if (c->active > 0)
                                continue;
                        if (c->linger_until <= now)
                                context_free(h, c);
                        else if (next == 0 || c->linger_until < next)
                                next = c->linger_until;
                }
        if (next == 0)
                return -1;
        return (int) MIN((next - now) / USEC_PER_MSEC + 1, (usec_t) 60000);
}

/* ---- execs ---- */

Exec *spawner_helper_exec_by_id(Helper *h, uint64_t id) {
        for (unsigned b = 0; b < EXEC_BUCKETS; b++)
                for (Exec *e = h->execs[b]; e; e = e->next)
                        if (e->id == id)
                                return e;
        return NULL;
}

Exec *spawner_helper_exec_by_pid(Helper *h, pid_t pid) {
        for (Exec *e = h->execs[(unsigned) pid % EXEC_BUCKETS]; e; e = e->next)
                if (e->pid == pid)
                        return e;
        return NULL;
}

static void exec_unlink(Helper *h, Exec *e) {
        Exec **p = &h->execs[(unsigned) e->pid % EXEC_BUCKETS];

        for (; *p; p = &(*p)->next)
                if (*p == e) {
                        *p = e->next;
                        return;
                }
}

static void watch(Helper *h, Exec *e, ExecWatch w) {
        if (e->watch == WATCH_REPORT)
                (void) epoll_ctl(h->epoll_fd, EPOLL_CTL_DEL, e->report_fd, NULL);
        else if (e->watch == WATCH_EVENTS)
                (void) epoll_ctl(h->epoll_fd, EPOLL_CTL_DEL, e->events_fd, NULL);
        e->watch = WATCH_NONE;
        if (w == WATCH_NONE)
                return;

        struct epoll_event ev = { .events = w == WATCH_REPORT ? EPOLLIN : EPOLLPRI, .data.u64 = (uint64_t) e->pid };
        if (epoll_ctl(h->epoll_fd, EPOLL_CTL_ADD, w == WATCH_REPORT ? e->report_fd : e->events_fd, &ev) == 0)
                e->watch = w;
}

static void exec_free(Helper *h, Exec *e) {
        watch(h, e, WATCH_NONE);
        exec_unlink(h, e);
        safe_close(e->report_fd);
        safe_close(e->status_fd);
        safe_close(e->events_fd);
        if (e->cgroup_fd >= 0) {
                safe_close(e->cgroup_fd);
                (void) cgroup_track_remove(e->ctx->cgroup_fd, e->cgroup_name);
        }
        context_release_one(h, e->ctx);
        free(e);
}

/* Reads what the child reported. Returns true once the pipe is closed (resolved). */
static bool read_report(Exec *e) {
        for (;;) {
                LaunchReport r;
                ssize_t n = read(e->report_fd, &r, sizeof r);

                if (n == 0)
                        return true;
                if (n < 0)
                        return errno != EAGAIN && errno != EINTR ? true : false;
                if ((size_t) n != sizeof r)
                        continue;
                if (r.kind == LAUNCH_REPORT_ERROR) {
                        e->error = r;
                        e->have_error = true;
                } else if (r.kind == LAUNCH_REPORT_TIMINGS) {
                        e->timings = r;
                        e->have_timings = true;
                }
        }
}

static void send_launched(Helper *h, Exec *e) {
        SpawnLaunched m = { .h = { SPAWN_LAUNCHED, sizeof m, e->id }, .pid = e->pid };

        e->at_usec[LAUNCH_T_EXEC_SEEN] = now_monotonic_usec();
        if (e->have_timings || e->have_error) {
                const LaunchReport *r = e->have_error ? &e->error : &e->timings;
                for (int t = LAUNCH_T_CHILD_START; t <= LAUNCH_T_SECCOMP; t++)
                        e->at_usec[t] = r->at_usec[t];
        }
        memcpy(m.at_usec, e->at_usec, sizeof m.at_usec);
        if (e->cgroup_fd >= 0)
                (void) bsprintf(m.cgroup, sizeof m.cgroup, "%s/%s/%s/%s", h->cgroup_path, h->cgroup_root_name,
                                e->ctx->cgroup_name, e->cgroup_name);

        if (e->have_error) {
                m.error = e->error.error > 0 ? e->error.error : EIO;
                (void) strscpy(m.step, sizeof m.step, e->error.step);
                if (isempty(e->error.detail))
                        (void) bsprintf(m.message, sizeof m.message, "%s: %s", e->error.step, strerror(m.error));
                else
                        (void) bsprintf(m.message, sizeof m.message, "%s: %s: %s", e->error.step, e->error.detail,
                                        strerror(m.error));
                e->failed = true;
        }
        e->resolved = true;
        spawner_helper_send(h, &m, sizeof m);
}

static void collect(Helper *h);

static void exec_finish(Helper *h, Exec *e) {
        SpawnExited m = { .h = { SPAWN_EXITED, sizeof m, e->id }, .wait_status = e->wait_status };
        uint64_t cpu = 0;
        bool send;

        /* Killed orphans (basic level) are zombies of ours until reaped: not even those
         * may be left when the end is reported. Reaped first: an orphan of the tree (bwrap's
         * init, which reaped the command) brings its peak RSS along. */
        collect(h);
        m.cpu_usec = (uint64_t) e->ru.ru_utime.tv_sec * USEC_PER_SEC + (uint64_t) e->ru.ru_utime.tv_usec +
                     (uint64_t) e->ru.ru_stime.tv_sec * USEC_PER_SEC + (uint64_t) e->ru.ru_stime.tv_usec;
        if (e->cgroup_fd >= 0 && cgroup_track_cpu_usec(e->cgroup_fd, &cpu) >= 0 && cpu > m.cpu_usec)
                m.cpu_usec = cpu;
        m.max_rss_bytes = (uint64_t) e->ru.ru_maxrss * 1024;
        exec_memory_end(h, e, &m);
        m.ended_usec = now_monotonic_usec();
        send = !e->failed;
        /* Its cgroup goes first: when the daemon hears of the end, nothing of it is left. */
        exec_free(h, e);
        if (send)
                spawner_helper_send(h, &m, sizeof m);
}

/* The main process (or our init) was reaped: make sure nothing of the tree is left. */
static void exec_reaped(Helper *h, Exec *e) {
        int r;

        if (!e->resolved) {
                (void) read_report(e);          /* every writer is gone: data, then EOF */
                watch(h, e, WATCH_NONE);
                send_launched(h, e);
        }
        if (e->bwrap)
                e->wait_status = bwrap_wait_status(e->wait_status);
        if (e->status_fd >= 0) {
                int32_t st;
                /* Our init wrote the main process's real status before it exited. */
                if (read(e->status_fd, &st, sizeof st) == (ssize_t) sizeof st)
                        e->wait_status = st;
        }
        if (e->cgroup_fd < 0) {
                exec_finish(h, e);
                return;
        }
        r = cgroup_track_populated(e->cgroup_fd);
        if (r == 0) {
                exec_finish(h, e);
                return;
        }
        /* Orphans (basic level, or a pid namespace not yet torn down): kill them all and
         * wait for "populated 0". */
        (void) cgroup_track_kill(e->cgroup_fd);
        e->killed = true;
        if (r < 0 || cgroup_track_open_events(e->cgroup_fd, &e->events_fd) < 0) {
                exec_finish(h, e);
                return;
        }
        watch(h, e, WATCH_EVENTS);
        if (cgroup_track_populated(e->cgroup_fd) == 0)
                exec_finish(h, e);
}

static void on_events(Helper *h, Exec *e) {
        if (cgroup_track_populated(e->cgroup_fd) != 0)
                return;
        exec_finish(h, e);
}

static void on_report(Helper *h, Exec *e) {
        if (!read_report(e))
                return;
        watch(h, e, WATCH_NONE);
        send_launched(h, e);
        if (e->failed && e->cgroup_fd >= 0)
                (void) cgroup_track_kill(e->cgroup_fd);
}

/* The exec whose tracking cgroup holds (or held) the ended orphan PID, not yet reaped:
 * /proc/PID/cgroup still names it while PID is a zombie. */
static Exec *orphan_owner(Helper *h, pid_t pid) {
        _cleanup_close_ int fd = -EBADF;
        char path[64], buf[512], *line, *nl, *name;
        uint64_t id;
        ssize_t n;
        Exec *e;

        if (h->cgroup_root_fd < 0)
                return NULL;
        (void) bsprintf(path, sizeof path, "/proc/%d/cgroup", (int) pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return NULL;
        n = read(fd, buf, sizeof buf - 1);
        if (n <= 0)
                return NULL;
        buf[n] = '\0';
        line = startswith(buf, "0::") ? buf : strstr(buf, "\n0::");
        if (!line)
                return NULL;
        line += line == buf ? 3 : 4;
        nl = strchr(line, '\n');
        if (nl)
                *nl = '\0';
        /* .../<context>/x<id> */
        name = strrchr(line, '/');
        if (!name || name[1] != 'x' || parse_u64(name + 2, &id) < 0)
                return NULL;
        e = spawner_helper_exec_by_id(h, id);
        if (!e || e->cgroup_fd < 0 || !streq(name + 1, e->cgroup_name))
                return NULL;
        *name = '\0';
        name = strrchr(line, '/');
        if (!name || !streq(name + 1, e->ctx->cgroup_name))
                return NULL;
        return e;
}

/* Collects every child that ended: orphans we are subreaper for are just reaped (their
 * peak RSS counted for the exec whose tree they were in); the main processes of execs
 * are marked and queued for spawner_helper_reap(). Safe to call from anywhere: it changes
 * nothing else. */
static void collect(Helper *h) {
        for (;;) {
                siginfo_t si = {};
                struct rusage ru;
                int status;
                pid_t pid;
                long maxrss;
                Exec *e, *owner = NULL;

                /* Who ended, before it is reaped and its cgroup forgotten. */
                if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) < 0 || si.si_pid <= 0)
                        return;
                e = spawner_helper_exec_by_pid(h, si.si_pid);
                if (!e)
                        owner = orphan_owner(h, si.si_pid);
                pid = wait4(si.si_pid, &status, WNOHANG, &ru);
                if (pid <= 0)
                        return;
                if (owner && ru.ru_maxrss > owner->ru.ru_maxrss)
                        owner->ru.ru_maxrss = ru.ru_maxrss;
                if (!e || e->reaped)
                        continue;
                e->reaped = true;
                e->wait_status = status;
                maxrss = e->ru.ru_maxrss;       /* an orphan's, if one came first */
                e->ru = ru;
                if (maxrss > e->ru.ru_maxrss)
                        e->ru.ru_maxrss = maxrss;
                e->reaped_next = h->reaped;
                h->reaped = e;
        }
}

void spawner_helper_reap(Helper *h) {
        collect(h);
        while (h->reaped) {
                Exec *e = h->reaped;

                h->reaped = e->reaped_next;
                exec_reaped(h, e);
        }
}

int spawner_helper_signal(Helper *h, Exec *e, int sig) {
        bool has_init = e->level >= ISOLATION_LEVEL_STANDARD;

        if (e->reaped)
                return -ESRCH;
        if (e->bwrap) {
                /* The main process is bwrap's monitor: it does not forward signals, and
                 * must live to report the command's end. Without a cgroup, signalling it
                 * is all there is (it dies, and --die-with-parent takes the rest along). */
                if (sig == SIGKILL) {
                        if (e->cgroup_fd >= 0)
                                (void) cgroup_track_kill(e->cgroup_fd);
                        (void) kill(e->pid, SIGKILL);
                        e->killed = true;
                        return 0;
                }
                if (e->cgroup_fd >= 0) {
                        int n = cgroup_track_signal(e->cgroup_fd, sig, e->pid);
                        return n < 0 ? n : 0;
                }
                return kill(e->pid, sig) < 0 ? negative_errno() : 0;
        }
        if (sig == SIGKILL) {
                if (e->cgroup_fd >= 0)
                        (void) cgroup_track_kill(e->cgroup_fd);
                /* Without a cgroup: our init takes its namespace along; at basic, the
                 * session's process group is the best there is. */
                (void) kill(e->pid, SIGKILL);
                if (!has_init && e->cgroup_fd < 0)
                        (void) kill(-e->pid, SIGKILL);
                e->killed = true;
                return 0;
        }
        if (e->cgroup_fd >= 0) {
                int n = cgroup_track_signal(e->cgroup_fd, sig, has_init ? e->pid : 0);
                return n < 0 ? n : 0;
        }
        if (has_init)
                return kill(e->pid, sig) < 0 ? negative_errno() : 0;        /* init forwards it */
        return kill(-e->pid, sig) < 0 ? negative_errno() : 0;
}

/* ---- requests ---- */

static int decode_strings(const SpawnLaunch *m, size_t size, LaunchSpec *spec, char ***ret_argv, char ***ret_envp) {
        const char *p = m->strings, *end;
        _cleanup_free_ char **argv = NULL, **envp = NULL;

        if (size < sizeof *m || m->strings_size != size - sizeof *m || m->argc == 0 ||
            m->argc > LAUNCH_ARGV_MAX || m->envc > LAUNCH_ENV_MAX)
                return -EBADMSG;
        end = m->strings + m->strings_size;
        if (m->strings_size == 0 || end[-1] != '\0')
                return -EBADMSG;

#define NEXT(var)                                       \
        do {                                            \
                if (p >= end)                           \
                        return -EBADMSG;                \
                (var) = (char *) p;                     \
                p += strlen(p) + 1;                     \
        } while (0)

        argv = calloc(m->argc + 1, sizeof *argv);
        envp = calloc(m->envc + 1, sizeof *envp);
        if (!argv || !envp)
                return -ENOMEM;
        NEXT(spec->sandbox_key);
        NEXT(spec->hostname);
        if (m->has_cwd)
                NEXT(spec->cwd);
        for (uint32_t i = 0; i < m->argc; i++)
                NEXT(argv[i]);
        for (uint32_t i = 0; i < m->envc; i++)
                NEXT(envp[i]);
#undef NEXT
        spec->argv = argv;
        spec->envp = envp;
        *ret_argv = TAKE_PTR(argv);
        *ret_envp = TAKE_PTR(envp);
        return 0;
}

static void refresh_plan(Helper *h) {
        usec_t now = now_monotonic_usec();
        MountPlan fresh;

        if (now - h->plan_at < PLAN_REFRESH_USEC)
                return;
        /* Secrets appear and vanish (ssh host keys regenerated, ...): look again now and then. */
        if (mounts_plan_init(&fresh, h->opts->mask_paths) >= 0)
                h->plan.mounts = fresh;
        h->plan_at = now;
}

static void close_dirs(Exec *e) {
        for (size_t i = 0; i < MOUNT_SANDBOX_DIRS; i++)
                e->dirs[i] = safe_close(e->dirs[i]);
}

static int launch_error(LaunchError *err, const char *step, int r) {
        err->error = -r;
        (void) strscpy(err->step, sizeof err->step, step);
        (void) bsprintf(err->message, sizeof err->message, "%s: %s", step, strerror(-r));
        return r;
}

/* Everything the helper does for one launch: context, cgroup, pipes, clone. On failure
 * the caller undoes it with exec_abort(). */
static int exec_start(Helper *h, Exec *e, const LaunchSpec *spec, LaunchError *err) {
        _cleanup_close_ int report_w = -EBADF, status_w = -EBADF;
        int p[2], dirs[MOUNT_SANDBOX_DIRS], r;
        char detail[160];

        r = context_prepare(h, e->ctx, spec->network, &spec->limits);
        if (r < 0)
                return launch_error(err, "sandbox context", r);
        e->at_usec[LAUNCH_T_CONTEXT] = now_monotonic_usec();
        exec_memory_start(h, e);

        if (e->ctx->cgroup_fd >= 0) {
                (void) bsprintf(e->cgroup_name, sizeof e->cgroup_name, "x%" PRIu64, e->id);
                r = cgroup_track_mkdir(e->ctx->cgroup_fd, e->cgroup_name, &e->cgroup_fd);
                if (r < 0)
                        return launch_error(err, "tracking cgroup", r);
        }
        e->at_usec[LAUNCH_T_CGROUP] = now_monotonic_usec();

        r = mounts_clone_sandbox_dirs(spec->fs_fd, dirs, detail, sizeof detail);
        if (r < 0) {
                launch_error(err, "sandbox directories", r);
                (void) bsprintf(err->message, sizeof err->message, "sandbox directories: %s: %s", detail, strerror(-r));
                return r;
        }
        memcpy(e->dirs, dirs, sizeof dirs);

        /* Packet mode: one read() per record. Non-blocking: a record never fills the pipe. */
        if (pipe2(p, O_CLOEXEC | O_DIRECT | O_NONBLOCK) < 0)
                return launch_error(err, "report pipe", negative_errno());
        e->report_fd = p[0];
        report_w = p[1];
        if (spec->level >= ISOLATION_LEVEL_STANDARD && !e->bwrap) {
                if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
                        return launch_error(err, "status pipe", negative_errno());
                e->status_fd = p[0];
                status_w = p[1];
        }

        LaunchJob job = {
                .spec = spec,
                .dirs = { e->dirs[0], e->dirs[1], e->dirs[2], e->dirs[3] },
                .netns_fd = spec->network == NETWORK_MODE_NONE ? e->ctx->netns_fd : -1,
                .cgroup_fd = e->cgroup_fd,
                .limit_fds = { e->ctx->limits.fd[0], e->ctx->limits.fd[1], e->ctx->limits.fd[2], e->ctx->limits.fd[3] },
                .report_fd = report_w,
                .status_fd = status_w,
                .spawner_pid = h->pid,
        };
        r = launch_clone(&h->plan, &job, &e->pid);
        if (r < 0)
                return launch_error(err, "clone", r);
        e->at_usec[LAUNCH_T_CLONE] = now_monotonic_usec();
        close_dirs(e);                          /* the child has them */
        return 0;
}

static void exec_abort(Helper *h, Exec *e) {
        close_dirs(e);
        if (e->cgroup_fd >= 0) {
                safe_close(e->cgroup_fd);
                (void) cgroup_track_remove(e->ctx->cgroup_fd, e->cgroup_name);
        }
        safe_close(e->report_fd);
        safe_close(e->status_fd);
        context_release_one(h, e->ctx);
        free(e);
}

int spawner_helper_launch(Helper *h, const SpawnLaunch *m, size_t size, const int fds[SPAWN_LAUNCH_FDS],
                          LaunchError *err) {
        _cleanup_free_ char **argv = NULL, **envp = NULL;
        LaunchSpec spec = {
                .uid = m->uid, .gid = m->gid, .level = (IsolationLevel) m->level, .network = (NetworkMode) m->network,
                .fs_fd = fds[0], .stdin_fd = fds[1], .stdout_fd = fds[2], .stderr_fd = fds[3],
                .tmpfs_bytes = m->tmpfs_bytes, .shm_bytes = m->shm_bytes, .limits = m->limits,
                .collect_timings = m->collect_timings,
        };
        Context *ctx;
        Exec *e;
        int r;

        r = decode_strings(m, size, &spec, &argv, &envp);
        if (r < 0)
                return r;
        r = launch_spec_validate(&spec, err);
        if (r < 0)
                return r;
        if (spawner_helper_exec_by_id(h, m->h.id))
                return -EEXIST;
        refresh_plan(h);

        r = context_get(h, spec.sandbox_key, &ctx);
        if (r < 0)
                return r;
        e = calloc(1, sizeof *e);
        if (!e)
                return -ENOMEM;
        *e = (Exec) {
                .id = m->h.id, .level = spec.level, .bwrap = h->plan.runtime == LAUNCH_RUNTIME_BWRAP, .ctx = ctx,
                .report_fd = -EBADF, .status_fd = -EBADF, .cgroup_fd = -EBADF, .events_fd = -EBADF,
                .dirs = { -EBADF, -EBADF, -EBADF, -EBADF },
        };
        e->at_usec[LAUNCH_T_START] = m->sent_usec;
        e->at_usec[LAUNCH_T_RECEIVED] = now_monotonic_usec();
        ctx->active++;                       /* exec_free()/exec_abort() balance it */
        ctx->dropping = false;

        r = exec_start(h, e, &spec, err);
        if (r < 0) {
                exec_abort(h, e);
                return r;
        }
        unsigned b = (unsigned) e->pid % EXEC_BUCKETS;
        e->next = h->execs[b];
        h->execs[b] = e;
        watch(h, e, WATCH_REPORT);
        return 0;
}

void spawner_helper_exec_event(Helper *h, Exec *e) {
        if (e->watch == WATCH_REPORT)
                on_report(h, e);
        else if (e->watch == WATCH_EVENTS)
                on_events(h, e);
}

void spawner_helper_kill_all(Helper *h) {
        for (unsigned b = 0; b < EXEC_BUCKETS; b++)
                for (Exec *e = h->execs[b]; e; e = e->next)
                        (void) spawner_helper_signal(h, e, SIGKILL);
}

void spawner_helper_drop(Helper *h, const char *key) {
        Context *c = context_find(h, key);

        if (!c)
                return;
        for (unsigned b = 0; b < EXEC_BUCKETS; b++)
                for (Exec *e = h->execs[b]; e; e = e->next)
                        if (e->ctx == c)
                                (void) spawner_helper_signal(h, e, SIGKILL);
        c->dropping = true;
        if (c->active == 0)
                context_free(h, c);
}
