/* SPDX-License-Identifier: MIT */
/* The spawner helper process: a single-threaded event loop over its channel to the daemon,
 * a signalfd (SIGCHLD, termination), the report pipes of launches in progress and the
 * cgroup.events of trees being torn down (those two: spawner-exec.c). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bwrap.h"
#include "caps.h"
#include "cgroup-track.h"
#include "fileio.h"
#include "macros.h"
#include "netns.h"
#include "parse-util.h"
#include "spawner-internal.h"
#include "string-util.h"

#define DEFAULT_LINGER_USEC (30 * USEC_PER_SEC)

/* epoll data: these two tags, or the pid of an exec (looked up again, so that an event
 * queued for an exec finished earlier in the same batch finds nothing). */
#define TAG_CHANNEL (UINT64_C(1) << 62)
#define TAG_SIGNAL (UINT64_C(1) << 61)

/* ---- sending ---- */

void spawner_helper_send(Helper *h, void *msg, size_t size) {
        /* A failed send means the daemon is gone; the loop notices the channel closing. */
        (void) send(h->channel, msg, size, MSG_NOSIGNAL);
}

static void spawner_send_ack(Helper *h, uint64_t id, int result, uint32_t value) {
        SpawnAck a = { .h = { SPAWN_ACK, sizeof a, id }, .result = result, .value = value };
        spawner_helper_send(h, &a, sizeof a);
}

/* ---- requests ---- */

static void on_launch(Helper *h, const SpawnLaunch *m, size_t size, int *fds, size_t n_fds) {
        LaunchError err = {};
        int r;

        if (n_fds != SPAWN_LAUNCH_FDS)
                r = -EBADF;
        else
                r = spawner_helper_launch(h, m, size, fds, &err);
        for (size_t i = 0; i < n_fds; i++)
                safe_close(fds[i]);             /* the child has its copies */
        if (r < 0) {
                SpawnLaunched a = { .h = { SPAWN_LAUNCHED, sizeof a, m->h.id }, .error = -r };
                (void) strscpy(a.step, sizeof a.step, isempty(err.step) ? "launch request" : err.step);
                if (isempty(err.message))
                        (void) bsprintf(a.message, sizeof a.message, "launch request: %s", strerror(-r));
                else
                        (void) strscpy(a.message, sizeof a.message, err.message);
                spawner_helper_send(h, &a, sizeof a);
        }
}

static void on_kill(Helper *h, const SpawnKill *m) {
        Exec *e = spawner_helper_exec_by_id(h, m->exec_id);

        if (!e || m->signal <= 0 || m->signal >= NSIG) {
                spawner_send_ack(h, m->h.id, e ? -EINVAL : -ESRCH, 0);
                return;
        }
        spawner_send_ack(h, m->h.id, spawner_helper_signal(h, e, m->signal), 0);
}

static void on_drop(Helper *h, const SpawnDrop *m) {
        char key[sizeof m->key];

        memcpy(key, m->key, sizeof key);
        key[sizeof key - 1] = '\0';
        spawner_helper_drop(h, key);
        spawner_send_ack(h, m->h.id, 0, 0);
}

/* Returns false when the channel is closed. */
static bool on_channel(Helper *h) {
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int) * SPAWN_LAUNCH_FDS)];
        } control;
        struct iovec iov = { .iov_base = h->buf, .iov_len = SPAWN_MESSAGE_MAX };
        struct msghdr mh = {
                .msg_iov = &iov, .msg_iovlen = 1,
                .msg_control = control.buf, .msg_controllen = sizeof control.buf,
        };
        int fds[SPAWN_LAUNCH_FDS];
        size_t n_fds = 0;
        const SpawnHeader *hdr = (const SpawnHeader *) h->buf;
        ssize_t n;

        n = recvmsg(h->channel, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        if (n < 0)
                return errno == EAGAIN || errno == EINTR;
        if (n == 0)
                return false;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                        int *p = (int *) CMSG_DATA(c);
                        for (size_t i = 0; i < k; i++) {
                                if (n_fds < SPAWN_LAUNCH_FDS)
                                        fds[n_fds++] = p[i];
                                else
                                        (void) close(p[i]);
                        }
                }
        if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || (size_t) n < sizeof *hdr || hdr->size != (size_t) n) {
                for (size_t i = 0; i < n_fds; i++)
                        (void) close(fds[i]);
                if ((size_t) n >= sizeof *hdr && hdr->type == SPAWN_LAUNCH) {
                        SpawnLaunched a = { .h = { SPAWN_LAUNCHED, sizeof a, hdr->id }, .error = EBADMSG };
                        (void) strscpy(a.step, sizeof a.step, "launch request");
                        (void) strscpy(a.message, sizeof a.message, "launch request: malformed message");
                        spawner_helper_send(h, &a, sizeof a);
                }
                return true;
        }

        switch (hdr->type) {
        case SPAWN_LAUNCH:
                on_launch(h, (const SpawnLaunch *) h->buf, (size_t) n, fds, n_fds);
                return true;
        case SPAWN_KILL:
                if ((size_t) n == sizeof(SpawnKill))
                        on_kill(h, (const SpawnKill *) h->buf);
                break;
        case SPAWN_DROP:
                if ((size_t) n == sizeof(SpawnDrop))
                        on_drop(h, (const SpawnDrop *) h->buf);
                break;
        case SPAWN_COUNT:
                spawner_send_ack(h, hdr->id, 0, h->n_contexts);
                break;
        default:
                break;
        }
        for (size_t i = 0; i < n_fds; i++)
                (void) close(fds[i]);
        return true;
}

/* ---- start and end ---- */

static void cleanup_stale_cgroups(int base_fd) {
        _cleanup_close_ int fd = -EBADF;
        DIR *d;
        struct dirent *de;

        fd = openat(base_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return;
        d = fdopendir(fd);
        if (!d)
                return;
        fd = -EBADF;
        while ((de = readdir(d))) {
                uint32_t pid;

                if (!startswith(de->d_name, "sandloom-spawner-") ||
                    parse_u32(de->d_name + strlen("sandloom-spawner-"), &pid) < 0)
                        continue;
                if (pid > 0 && (kill((pid_t) pid, 0) == 0 || errno != ESRCH))
                        continue;       /* another live spawner's */
                (void) cgroup_track_destroy_tree(dirfd(d), de->d_name, 2000);
        }
        closedir(d);
}

static void setup_cgroups(Helper *h) {
        char own[256];
        int r;

        h->cgroup_base_fd = h->cgroup_root_fd = -EBADF;
        r = cgroup_track_find_own(own, sizeof own);
        if (r < 0) {
                (void) bsprintf(h->cgroup_error, sizeof h->cgroup_error,
                                r == -ENOMEDIUM ? "no cgroup v2 hierarchy is mounted" : "cannot find our cgroup v2: %s",
                                strerror(-r));
                return;
        }
        h->cgroup_base_fd = open(own, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (h->cgroup_base_fd < 0) {
                (void) bsprintf(h->cgroup_error, sizeof h->cgroup_error, "opening %s: %s", own, strerror(errno));
                return;
        }
        cleanup_stale_cgroups(h->cgroup_base_fd);
        (void) bsprintf(h->cgroup_root_name, sizeof h->cgroup_root_name, "sandloom-spawner-%d", (int) h->pid);
        r = cgroup_track_mkdir(h->cgroup_base_fd, h->cgroup_root_name, &h->cgroup_root_fd);
        if (r < 0) {
                (void) bsprintf(h->cgroup_error, sizeof h->cgroup_error, "creating a cgroup in %s: %s", own,
                                strerror(-r));
                h->cgroup_base_fd = safe_close(h->cgroup_base_fd);
                return;
        }
        (void) strscpy(h->cgroup_path, sizeof h->cgroup_path, own);
}

/* The per-sandbox limit cgroups: v2 on the tracking tree when the daemon's cgroup delegates
 * the controllers, else v1 hierarchies, else none (rlimits only). */
static void setup_limits(Helper *h) {
        CgroupHost host;
        char name[64];
        int r;

        h->limits_mode = CGROUP_LIMITS_NONE;
        (void) cgroup_limits_root_init_v1(&h->limits, &(CgroupHost) { .mode = CGROUP_LIMITS_NONE }, &h->opts->limits, "");
        r = cgroup_limits_detect(NULL, NULL, &host);
        if (r < 0) {
                (void) bsprintf(h->limits_error, sizeof h->limits_error, "reading /proc/self/mountinfo: %s", strerror(-r));
                return;
        }
        if (host.mode == CGROUP_LIMITS_V2) {
                if (h->cgroup_root_fd < 0) {
                        (void) bsprintf(h->limits_error, sizeof h->limits_error, "cgroup v2: no tracking cgroup: %s",
                                        h->cgroup_error);
                        return;
                }
                /* Our own cgroup delegates to its children only if it holds no process
                 * (docs/OPERATIONS.md: the daemon runs in a leaf of its own). */
                r = cgroup_limits_v2_enable(h->cgroup_base_fd);
                if (r == -EBUSY) {
                        /* The daemon (and we) sit in it: move into a leaf of our own first. */
                        r = cgroup_limits_v2_vacate(h->cgroup_base_fd, "sandloom-daemon");
                        if (r >= 0)
                                r = cgroup_limits_v2_enable(h->cgroup_base_fd);
                }
                if (r >= 0)
                        r = cgroup_limits_v2_enable(h->cgroup_root_fd);
                if (r < 0) {
                        (void) bsprintf(h->limits_error, sizeof h->limits_error,
                                        "cgroup v2: enabling memory, pids and cpu below %s: %s (the daemon must run in a leaf cgroup of its own with the controllers delegated)",
                                        h->cgroup_path, strerror(-r));
                        return;
                }
                h->limits_mode = CGROUP_LIMITS_V2;
                return;
        }
        if (host.mode != CGROUP_LIMITS_V1) {
                (void) strscpy(h->limits_error, sizeof h->limits_error, host.evidence);
                return;
        }
        (void) bsprintf(name, sizeof name, "sandloom-spawner-%d", (int) h->pid);
        r = cgroup_limits_root_init_v1(&h->limits, &host, &h->opts->limits, name);
        (void) strscpy(h->limits_error, sizeof h->limits_error, h->limits.error);
        if (r >= 0)
                h->limits_mode = CGROUP_LIMITS_V1;
}

static _Noreturn void shutdown_helper(Helper *h) {
        /* Nothing of a sandbox may outlive the daemon. */
        spawner_helper_kill_all(h);
        if (h->cgroup_root_fd >= 0)
                (void) cgroup_track_destroy_tree(h->cgroup_base_fd, h->cgroup_root_name, 5000);
        cgroup_limits_root_done(&h->limits);
        /* An orderly stop (the daemon waits for us): the killed orphans are zombies of ours
         * (their subreaper), reaped now so that nothing is left when the daemon sees us gone.
         * Without the daemon, init inherits and reaps them together with us. */
        if (getppid() == h->daemon_pid)
                while (waitpid(-1, NULL, WNOHANG) > 0)
                        ;
        _exit(EXIT_SUCCESS);
}

static void reset_process(Helper *h) {
        struct sigaction dfl = { .sa_handler = SIG_DFL };
        int null_fd;

        /* Whatever the daemon had (SIGPIPE ignored, handlers) must not reach sandboxes. */
        for (int sig = 1; sig < NSIG; sig++)
                (void) sigaction(sig, &dfl, NULL);
        null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null_fd >= 0) {
                (void) dup2(null_fd, STDIN_FILENO);
                (void) dup2(null_fd, STDOUT_FILENO);
                (void) dup2(null_fd, STDERR_FILENO);
                if (null_fd > STDERR_FILENO)
                        (void) close(null_fd);
        }
        /* Only the channel: moved to fd 3. */
        if (h->channel != 3) {
                if (dup3(h->channel, 3, O_CLOEXEC) >= 0)
                        h->channel = 3;
        }
        (void) close_range(4, ~0U, 0);
        (void) prctl(PR_SET_NAME, "sandloom-spawn", 0, 0, 0);
        /* Out of the terminal's process group: no job-control stops. */
        (void) setsid();
        (void) prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        (void) umask(022);
        (void) chdir("/");
        /* Launch children inherit an empty bounding set (see caps.h). */
        (void) caps_drop_bounding();

        /* The helper itself is as protected from the OOM killer as the daemon. */
        int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
        if (fd >= 0) {
                (void) !write(fd, "-1000", 5);
                (void) close(fd);
        }
}

/* The helper is a fork of the daemon: its argument and environment strings are the daemon's
 * (the binary's path, the data directory, maybe SANDBOX_INTERNAL_TOKEN). Every launch child,
 * and at standard+ the sandbox's init, is a fork of the helper, and /proc/PID/cmdline is
 * readable without ptrace access. So overwrite both areas in place, once. */
static void wipe_inherited_strings(void) {
        _cleanup_free_ char *stat = NULL;
        unsigned long long v[4] = {};
        const char *p;
        int r;

        (void) clearenv();
        r = read_full_file_at(AT_FDCWD, "/proc/self/stat", 4096, &stat, NULL);
        if (r < 0)
                return;
        p = strrchr(stat, ')');
        if (!p)
                return;
        /* Fields after the command name, starting with field 3 (state): arg_start is 48. */
        for (unsigned field = 3; *p && field <= 51; field++) {
                p = strchr(p, ' ');
                if (!p)
                        return;
                p++;
                if (field >= 48)
                        v[field - 48] = strtoull(p, NULL, 10);
        }
        if (v[1] > v[0] && v[1] - v[0] < (1u << 24)) {
                static const char title[] = "sandloom-spawner";
                size_t n = (size_t) (v[1] - v[0]);
                memset((void *) (uintptr_t) v[0], 0, n);
                memcpy((void *) (uintptr_t) v[0], title, MIN(sizeof title, n) - 1);
        }
        if (v[3] > v[2] && v[3] - v[2] < (1u << 24))
                memset((void *) (uintptr_t) v[2], 0, (size_t) (v[3] - v[2]));
}

_Noreturn void spawner_helper_main(int channel, const SpawnerOptions *opts, pid_t daemon_pid) {
        static Helper helper;
        Helper *h = &helper;
        SpawnHello hello = { .h = { SPAWN_HELLO, sizeof hello, 0 } };
        sigset_t mask;
        int r;

        *h = (Helper) { .channel = channel, .opts = opts, .daemon_pid = daemon_pid, .pid = getpid() };
        h->linger_usec = opts->netns_linger_usec ?: DEFAULT_LINGER_USEC;

        /* The daemon's death (even by SIGKILL) ends us: the channel closes, and this
         * signal comes as a backstop. Termination signals aimed at the daemon's process
         * group or cgroup (Ctrl-C, systemd's stop) are not for us: the daemon shuts down
         * gracefully and then closes the channel. Blocked, not ignored: children must not
         * inherit SIG_IGN, and their mask is reset before execve(). */
        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        sigaddset(&mask, SIGUSR2);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        sigaddset(&mask, SIGQUIT);
        (void) sigprocmask(SIG_BLOCK, &mask, NULL);
        (void) prctl(PR_SET_PDEATHSIG, SIGUSR2, 0, 0, 0);
        if (getppid() != daemon_pid)
                _exit(EXIT_FAILURE);
        wipe_inherited_strings();
        reset_process(h);

        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        sigaddset(&mask, SIGUSR2);
        h->signal_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        h->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
        h->buf = malloc(SPAWN_MESSAGE_MAX);
        r = (h->signal_fd < 0 || h->epoll_fd < 0) ? negative_errno() : h->buf ? 0 : -ENOMEM;
        if (r >= 0)
                r = netns_open_current(&h->home_netns_fd);
        if (r >= 0) {
                r = launch_plan_init(&h->plan, opts->mask_paths, opts->runtime, opts->bwrap_path);
                h->plan_at = now_monotonic_usec();
                if (r < 0 && opts->runtime == LAUNCH_RUNTIME_BWRAP && (r == -ENOENT || r == -EACCES))
                        (void) bsprintf(hello.message, sizeof hello.message, "runtime bwrap: %s: %s",
                                        opts->bwrap_path ?: BWRAP_DEFAULT_PATH, strerror(-r));
                else if (r < 0)
                        (void) bsprintf(hello.message, sizeof hello.message, "preparing launches (seccomp, mounts): %s",
                                        strerror(-r));
        } else
                (void) bsprintf(hello.message, sizeof hello.message, "setting up the spawner: %s", strerror(-r));
        if (r < 0) {
                hello.error = -r;
                spawner_helper_send(h, &hello, sizeof hello);
                _exit(EXIT_FAILURE);
        }
        setup_cgroups(h);
        setup_limits(h);

        struct epoll_event ev = { .events = EPOLLIN, .data.u64 = TAG_CHANNEL };
        (void) epoll_ctl(h->epoll_fd, EPOLL_CTL_ADD, h->channel, &ev);
        ev = (struct epoll_event) { .events = EPOLLIN, .data.u64 = TAG_SIGNAL };
        (void) epoll_ctl(h->epoll_fd, EPOLL_CTL_ADD, h->signal_fd, &ev);

        hello.pid = h->pid;
        hello.cgroup_tracking = h->cgroup_root_fd >= 0;
        hello.clone3 = h->plan.clone3;
        if (h->cgroup_root_fd >= 0)
                (void) bsprintf(hello.cgroup_path, sizeof hello.cgroup_path, "%s/%s", h->cgroup_path, h->cgroup_root_name);
        (void) strscpy(hello.cgroup_error, sizeof hello.cgroup_error, h->cgroup_error);
        hello.limits_mode = h->limits_mode;
        for (int c = 0; c < _CGROUP_CONTROLLER_MAX; c++)
                if (h->limits_mode == CGROUP_LIMITS_V2 || (h->limits_mode == CGROUP_LIMITS_V1 && h->limits.root_fd[c] >= 0))
                        hello.limits_controllers |= 1u << c;
        (void) strscpy(hello.limits_error, sizeof hello.limits_error, h->limits_error);
        spawner_helper_send(h, &hello, sizeof hello);

        for (;;) {
                struct epoll_event events[32];
                int timeout = spawner_helper_expire(h), n;

                n = epoll_wait(h->epoll_fd, events, ELEMENTSOF(events), timeout);
                if (n < 0 && errno != EINTR)
                        shutdown_helper(h);
                for (int i = 0; i < n; i++) {
                        uint64_t tag = events[i].data.u64;

                        if (tag == TAG_CHANNEL) {
                                if (!on_channel(h) || (events[i].events & (EPOLLHUP | EPOLLERR)))
                                        shutdown_helper(h);
                        } else if (tag == TAG_SIGNAL) {
                                struct signalfd_siginfo si;
                                bool child = false;

                                while (read(h->signal_fd, &si, sizeof si) == (ssize_t) sizeof si) {
                                        if (si.ssi_signo == SIGCHLD)
                                                child = true;
                                        else if (getppid() != h->daemon_pid)
                                                shutdown_helper(h);     /* the parent-death signal */
                                }
                                if (child)
                                        spawner_helper_reap(h);
                        } else {
                                Exec *e = spawner_helper_exec_by_pid(h, (pid_t) tag);

                                if (e)
                                        spawner_helper_exec_event(h, e);
                        }
                        /* Ends collected along the way (see collect()) are handled now. */
                        if (h->reaped)
                                spawner_helper_reap(h);
                }
        }
}
