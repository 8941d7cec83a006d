/* SPDX-License-Identifier: MIT */
/* The daemon's side of the spawner: any thread launches, one reader thread dispatches the
 * helper's answers and exit notifications by id. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cgroup-track.h"
#include "macros.h"
#include "spawner-proto.h"
#include "spawner.h"
#include "string-util.h"
#include "time-util.h"

#define EXEC_BUCKETS 256
#define HELLO_TIMEOUT_MSEC 30000
#define LAUNCH_TIMEOUT_USEC (120 * USEC_PER_SEC)    /* a launch step stuck (e.g. a hung mount) */
#define ACK_TIMEOUT_USEC (30 * USEC_PER_SEC)

typedef enum ExecState {
        EXEC_PENDING,
        EXEC_RUNNING,
        EXEC_FAILED,
        EXEC_ENDED,
} ExecState;

typedef struct Ack {
        uint64_t id;
        bool done;
        int result;
        uint32_t value;
        struct Ack *next;
} Ack;

struct Spawner {
        atomic_uint refs;
        int fd;
        pid_t pid;
        pthread_t reader;
        bool reader_running;
        pthread_mutex_t lock;
        pthread_cond_t ack_cond;
        bool dead;
        SpawnerExec *execs[EXEC_BUCKETS];
        Ack *acks;
        atomic_uint_fast64_t next_id;
        SpawnerInfo info;
};

struct SpawnerExec {
        atomic_uint refs;
        Spawner *s;
        uint64_t id;
        pthread_cond_t cond;                /* with s->lock */
        ExecState state;
        bool abandoned;                     /* the launch call gave up waiting */
        bool in_table;
        pid_t pid;
        char cgroup[128];
        LaunchError error;
        LaunchTimings timings;
        SpawnerExit exit;
        SpawnerExitCallback on_exit;
        void *userdata;
        SpawnerExec *next;
};

/* Every wait has a CLOCK_MONOTONIC deadline: wall-clock jumps must not cut it short. */
static void cond_init_monotonic(pthread_cond_t *c) {
        pthread_condattr_t a;

        pthread_condattr_init(&a);
        pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
        pthread_cond_init(c, &a);
        pthread_condattr_destroy(&a);
}

static Spawner *spawner_ref(Spawner *s) {
        atomic_fetch_add(&s->refs, 1);
        return s;
}

static void spawner_unref(Spawner *s) {
        if (!s || atomic_fetch_sub(&s->refs, 1) != 1)
                return;
        pthread_mutex_destroy(&s->lock);
        pthread_cond_destroy(&s->ack_cond);
        free(s);
}

SpawnerExec *spawner_exec_ref(SpawnerExec *e) {
        atomic_fetch_add(&e->refs, 1);
        return e;
}

void spawner_exec_unref(SpawnerExec *e) {
        if (!e || atomic_fetch_sub(&e->refs, 1) != 1)
                return;
        pthread_cond_destroy(&e->cond);
        spawner_unref(e->s);
        free(e);
}

/* ---- the table (under s->lock) ---- */

static void table_add(Spawner *s, SpawnerExec *e) {
        unsigned b = (unsigned) (e->id % EXEC_BUCKETS);

        e->next = s->execs[b];
        s->execs[b] = spawner_exec_ref(e);
        e->in_table = true;
}

static SpawnerExec *table_find(Spawner *s, uint64_t id) {
        for (SpawnerExec *e = s->execs[id % EXEC_BUCKETS]; e; e = e->next)
                if (e->id == id)
                        return e;
        return NULL;
}

/* Unlinks E; the caller then drops the table's reference (outside the lock is fine). */
static void table_remove(Spawner *s, SpawnerExec *e) {
        SpawnerExec **p = &s->execs[e->id % EXEC_BUCKETS];

        for (; *p; p = &(*p)->next)
                if (*p == e) {
                        *p = e->next;
                        e->in_table = false;
                        return;
                }
}

/* ---- the reader thread ---- */

static void fill_exit(SpawnerExit *x, const SpawnExited *m) {
        int st = m->wait_status;

        *x = (SpawnerExit) {
                .wait_status = st,
                .exited = WIFEXITED(st),
                .exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1,
                .signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0,
                .cpu_usec = m->cpu_usec,
                .max_rss_bytes = m->max_rss_bytes,
                .max_rss_cgroup = m->max_rss_cgroup != 0,
                .oom_killed = m->oom_killed != 0,
                .ended_usec = m->ended_usec,
        };
}

static void on_launched(Spawner *s, const SpawnLaunched *m) {
        SpawnerExec *e, *drop = NULL;

        pthread_mutex_lock(&s->lock);
        e = table_find(s, m->h.id);
        if (e) {
                memcpy(e->timings.at_usec, m->at_usec, sizeof m->at_usec);
                e->timings.at_usec[LAUNCH_T_REPLY] = now_monotonic_usec();
                if (m->error != 0) {
                        e->state = EXEC_FAILED;
                        e->error.error = m->error;
                        (void) strscpy(e->error.step, sizeof e->error.step, m->step);
                        (void) strscpy(e->error.message, sizeof e->error.message, m->message);
                        table_remove(s, e);
                        drop = e;
                } else {
                        e->state = EXEC_RUNNING;
                        e->pid = m->pid;
                        (void) strscpy(e->cgroup, sizeof e->cgroup, m->cgroup);
                }
                pthread_cond_broadcast(&e->cond);
        }
        pthread_mutex_unlock(&s->lock);
        spawner_exec_unref(drop);
}

static void end_exec(Spawner *s, SpawnerExec *e, const SpawnerExit *x) {
        SpawnerExitCallback cb;
        void *userdata;

        /* Under s->lock; returns with it released. The table's reference is dropped here. */
        e->exit = *x;
        e->state = EXEC_ENDED;
        table_remove(s, e);
        cb = e->abandoned ? NULL : e->on_exit;
        userdata = e->userdata;
        pthread_cond_broadcast(&e->cond);
        pthread_mutex_unlock(&s->lock);
        if (cb)
                cb(e, x, userdata);
        spawner_exec_unref(e);
}

static void on_exited(Spawner *s, const SpawnExited *m) {
        SpawnerExec *e;
        SpawnerExit x;

        fill_exit(&x, m);
        pthread_mutex_lock(&s->lock);
        e = table_find(s, m->h.id);
        if (!e) {
                pthread_mutex_unlock(&s->lock);
                return;
        }
        if (e->state == EXEC_PENDING)
                e->state = EXEC_RUNNING;        /* cannot happen: the answer comes first */
        end_exec(s, e, &x);
}

static void on_ack(Spawner *s, const SpawnAck *m) {
        pthread_mutex_lock(&s->lock);
        for (Ack *a = s->acks; a; a = a->next)
                if (a->id == m->h.id) {
                        a->done = true;
                        a->result = m->result;
                        a->value = m->value;
                        pthread_cond_broadcast(&s->ack_cond);
                        break;
                }
        pthread_mutex_unlock(&s->lock);
}

/* The helper is gone: every launch in progress fails, every running exec is lost. */
static void on_dead(Spawner *s) {
        SpawnerExit lost = { .exit_code = -1, .lost = true };

        pthread_mutex_lock(&s->lock);
        s->dead = true;
        pthread_cond_broadcast(&s->ack_cond);
        for (;;) {
                SpawnerExec *e = NULL;

                for (unsigned b = 0; b < EXEC_BUCKETS && !e; b++)
                        e = s->execs[b];
                if (!e)
                        break;
                if (e->state == EXEC_PENDING) {
                        e->state = EXEC_FAILED;
                        e->error.error = ESHUTDOWN;
                        (void) strscpy(e->error.step, sizeof e->error.step, "spawner");
                        (void) strscpy(e->error.message, sizeof e->error.message,
                                       "spawner: the helper process is gone");
                        table_remove(s, e);
                        pthread_cond_broadcast(&e->cond);
                        pthread_mutex_unlock(&s->lock);
                        spawner_exec_unref(e);
                } else {
                        lost.ended_usec = now_monotonic_usec();
                        end_exec(s, e, &lost);
                }
                pthread_mutex_lock(&s->lock);
        }
        pthread_mutex_unlock(&s->lock);
}

/* The helper is gone. If it died without cleaning up (SIGKILL, a crash), the processes of
 * basic-level execs (which have no init to take them along) may still run: its cgroups
 * hold them all, and we can kill them just as well. */
static void destroy_helper_cgroups(Spawner *s) {
        char parent[sizeof s->info.cgroup_path];
        char *slash;
        int fd;

        if (!s->info.cgroup_tracking || strscpy(parent, sizeof parent, s->info.cgroup_path) < 0)
                return;
        slash = strrchr(parent, '/');
        if (!slash || slash == parent)
                return;
        *slash = '\0';
        fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return;
        (void) cgroup_track_destroy_tree(fd, slash + 1, 5000);
        (void) close(fd);
}

static void *reader_main(void *userdata) {
        Spawner *s = userdata;
        union {
                SpawnHeader h;
                SpawnLaunched launched;
                SpawnExited exited;
                SpawnAck ack;
                char buf[4096];
        } m;

        for (;;) {
                ssize_t n = recv(s->fd, &m, sizeof m, 0);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                if ((size_t) n < sizeof m.h || m.h.size != (size_t) n)
                        continue;
                if (m.h.type == SPAWN_LAUNCHED && (size_t) n == sizeof m.launched)
                        on_launched(s, &m.launched);
                else if (m.h.type == SPAWN_EXITED && (size_t) n == sizeof m.exited)
                        on_exited(s, &m.exited);
                else if (m.h.type == SPAWN_ACK && (size_t) n == sizeof m.ack)
                        on_ack(s, &m.ack);
        }
        destroy_helper_cgroups(s);
        on_dead(s);
        return NULL;
}

/* ---- start and stop ---- */

static int receive_hello(Spawner *s, char *message, size_t message_size) {
        struct pollfd p = { .fd = s->fd, .events = POLLIN };
        SpawnHello hello;
        ssize_t n;
        int r;

        r = poll(&p, 1, HELLO_TIMEOUT_MSEC);
        if (r < 0)
                return negative_errno();
        if (r == 0) {
                (void) bsprintf(message, message_size, "the spawner did not start within %d s",
                                HELLO_TIMEOUT_MSEC / 1000);
                return -ETIMEDOUT;
        }
        n = recv(s->fd, &hello, sizeof hello, 0);
        if (n != (ssize_t) sizeof hello || hello.h.type != SPAWN_HELLO) {
                (void) bsprintf(message, message_size, "the spawner exited during start-up");
                return -EPROTO;
        }
        if (hello.error != 0) {
                (void) strscpy(message, message_size, hello.message);
                return -hello.error;
        }
        s->info.pid = hello.pid;
        s->info.cgroup_tracking = hello.cgroup_tracking;
        s->info.clone3 = hello.clone3;
        (void) strscpy(s->info.cgroup_path, sizeof s->info.cgroup_path, hello.cgroup_path);
        (void) strscpy(s->info.cgroup_error, sizeof s->info.cgroup_error, hello.cgroup_error);
        s->info.limits_mode = hello.limits_mode <= CGROUP_LIMITS_V2 ? (CgroupLimitsMode) hello.limits_mode
                                                                    : CGROUP_LIMITS_NONE;
        for (int c = 0; c < _CGROUP_CONTROLLER_MAX; c++)
                s->info.limits_controllers[c] = hello.limits_controllers & (1u << c);
        (void) strscpy(s->info.limits_error, sizeof s->info.limits_error, hello.limits_error);
        return 0;
}

/* The helper program beside our own binary, or "" if there is none (or OPTS says so). */
/* The helper becomes a root process that every sandbox is cloned from: run it only if no one
 * but root (or our own user) can have changed it — a regular file owned by root or by us, not
 * writable by group or others. Checked on an O_PATH fd that is then the one executed, so a
 * rename in its directory between the check and the exec changes nothing. */
static int open_trusted_helper(const char *path) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;

        fd = open(path, O_PATH | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode) || !(st.st_mode & S_IXUSR))
                return -EACCES;
        if ((st.st_uid != 0 && st.st_uid != geteuid()) || (st.st_mode & (S_IWGRP | S_IWOTH)))
                return -EPERM;
        return TAKE_FD(fd);
}

static bool helper_trusted(const char *path) {
        _cleanup_close_ int fd = open_trusted_helper(path);

        return fd >= 0;
}

static void find_helper(const SpawnerOptions *opts, char *buf, size_t size) {
        char self[PATH_MAX];
        ssize_t n;
        char *slash;

        buf[0] = '\0';
        if (opts->helper_path) {
                if (!isempty(opts->helper_path) && helper_trusted(opts->helper_path))
                        (void) strscpy(buf, size, opts->helper_path);
                return;
        }
        n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n <= 0)
                return;
        self[n] = '\0';
        slash = strrchr(self, '/');
        if (!slash)
                return;
        slash[1] = '\0';
        if (bsprintf(buf, size, "%s%s", self, SPAWNER_HELPER_NAME) < 0 || !helper_trusted(buf))
                buf[0] = '\0';
}

/* In the forked child: become the helper program, the channel on fd 3. */
static _Noreturn void exec_helper(int channel, const char *path) {
        char *const argv[] = { (char *) SPAWNER_HELPER_NAME, NULL };
        char *const envp[] = { NULL };
        int fd;

        /* Checked again on the fd that is executed (find_helper() looked at the path). */
        fd = open_trusted_helper(path);
        if (fd < 0)
                _exit(127);
        if (fd == 3) {
                fd = fcntl(3, F_DUPFD_CLOEXEC, 4);
                if (fd < 0)
                        _exit(127);
        }
        if (channel != 3) {
                if (dup2(channel, 3) < 0)
                        _exit(127);
        } else if (fcntl(3, F_SETFD, 0) < 0)
                _exit(127);
        if (fd >= 4) {
                /* Keep the helper's fd across close_range(): move it to 4, close from 5 on. */
                if (fd != 4 && dup3(fd, 4, O_CLOEXEC) < 0)
                        _exit(127);
                fd = 4;
        }
        (void) close_range(5, ~0U, 0);
        execveat(fd, "", argv, envp, AT_EMPTY_PATH);
        _exit(127);
}

/* The options, as the exec'd helper's first message (see SpawnOptionsMsg). */
static int send_options(int fd, const SpawnerOptions *opts, pid_t daemon_pid) {
        _cleanup_free_ SpawnOptionsMsg *m = NULL;
        size_t strings = 0, size, off;
        uint32_t n_masks = 0;
        SpawnerOptions copy = *opts;

        if (opts->bwrap_path)
                strings += strlen(opts->bwrap_path) + 1;
        for (size_t i = 0; opts->mask_paths && opts->mask_paths[i]; i++, n_masks++)
                strings += strlen(opts->mask_paths[i]) + 1;
        if (strings > SPAWN_OPTIONS_STRINGS_MAX)
                return -E2BIG;
        size = sizeof *m + sizeof copy + strings;
        m = calloc(1, size);
        if (!m)
                return -ENOMEM;
        copy.mask_paths = NULL;
        copy.bwrap_path = NULL;
        copy.helper_path = NULL;
        *m = (SpawnOptionsMsg) {
                .h = { SPAWN_OPTIONS, (uint32_t) size, 0 },
                .abi = SPAWN_OPTIONS_ABI,
                .daemon_pid = daemon_pid,
                .n_masks = n_masks,
                .has_bwrap_path = opts->bwrap_path != NULL,
        };
        memcpy(m->options, &copy, sizeof copy);
        off = sizeof copy;
        if (opts->bwrap_path) {
                memcpy(m->options + off, opts->bwrap_path, strlen(opts->bwrap_path) + 1);
                off += strlen(opts->bwrap_path) + 1;
        }
        for (size_t i = 0; i < n_masks; i++) {
                memcpy(m->options + off, opts->mask_paths[i], strlen(opts->mask_paths[i]) + 1);
                off += strlen(opts->mask_paths[i]) + 1;
        }
        if (send(fd, m, size, MSG_NOSIGNAL) != (ssize_t) size)
                return negative_errno();
        return 0;
}

static int start_one(const SpawnerOptions *opts, const char *helper, Spawner **ret, char *message,
                     size_t message_size) {
        Spawner *s;
        int sv[2], size = (int) SPAWN_MESSAGE_MAX * 2, r;
        pid_t parent = getpid();

        message[0] = '\0';
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                return negative_errno();
        /* A launch message carries up to 1 MiB of argv and environment. */
        if (setsockopt(sv[0], SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof size) < 0)
                (void) setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &size, sizeof size);

        s = calloc(1, sizeof *s);
        if (!s) {
                (void) close(sv[0]);
                (void) close(sv[1]);
                return -ENOMEM;
        }
        atomic_init(&s->refs, 1);
        atomic_init(&s->next_id, 1);
        s->fd = sv[0];
        pthread_mutex_init(&s->lock, NULL);
        cond_init_monotonic(&s->ack_cond);

        s->pid = fork();
        if (s->pid < 0) {
                r = negative_errno();
                (void) close(sv[0]);
                (void) close(sv[1]);
                spawner_unref(s);
                return r;
        }
        if (s->pid == 0) {
                (void) close(sv[0]);
                if (!isempty(helper))
                        exec_helper(sv[1], helper);
                spawner_helper_main(sv[1], opts, parent);
        }
        (void) close(sv[1]);

        r = isempty(helper) ? 0 : send_options(s->fd, opts, parent);
        if (r < 0)
                (void) bsprintf(message, message_size, "sending the options to %s: %s", helper, strerror(-r));
        else
                r = receive_hello(s, message, message_size);
        if (r < 0 && !isempty(helper)) {
                char first[256];

                (void) strscpy(first, sizeof first, message);
                (void) bsprintf(message, message_size, "%s (helper program %s)", first, helper);
        }
        s->info.runtime = opts->runtime;
        s->info.helper_exec = !isempty(helper);
        if (r >= 0) {
                sigset_t all, old;

                /* The reader thread takes no process-directed signal: they are the daemon's. */
                sigfillset(&all);
                pthread_sigmask(SIG_BLOCK, &all, &old);
                r = -pthread_create(&s->reader, NULL, reader_main, s);
                pthread_sigmask(SIG_SETMASK, &old, NULL);
                if (r < 0)
                        (void) bsprintf(message, message_size, "starting the spawner's reader thread: %s", strerror(-r));
        }
        if (r < 0) {
                (void) close(s->fd);
                (void) kill(s->pid, SIGKILL);
                (void) waitpid(s->pid, NULL, 0);
                spawner_unref(s);
                return r;
        }
        s->reader_running = true;
        *ret = s;
        return 0;
}

int spawner_start(const SpawnerOptions *opts, Spawner **ret, char *message, size_t message_size) {
        static const SpawnerOptions defaults = {};
        char dummy[8], helper[PATH_MAX];
        int r;

        if (!message) {
                message = dummy;
                message_size = sizeof dummy;
        }
        if (!opts)
                opts = &defaults;
        find_helper(opts, helper, sizeof helper);
        r = start_one(opts, helper, ret, message, message_size);
        /* The program could not run at all (not executable here, another build): the
         * helper in a fork of ours does the same, a little more slowly. A helper that ran
         * and refused (cgroups, bwrap, ...) would refuse the same way: that is the answer. */
        if (r == -EPROTO && helper[0] != '\0')
                r = start_one(opts, "", ret, message, message_size);
        return r;
}

void spawner_stop(Spawner *s) {
        if (!s)
                return;
        /* The helper sees its channel close, kills every sandbox process and exits; our
         * reader sees the end and reports every exec still running as lost. */
        (void) shutdown(s->fd, SHUT_RDWR);
        if (s->reader_running)
                (void) pthread_join(s->reader, NULL);
        (void) close(s->fd);
        (void) waitpid(s->pid, NULL, 0);
        spawner_unref(s);
}

void spawner_get_info(Spawner *s, SpawnerInfo *ret) {
        *ret = s->info;
}

bool spawner_pids_limited(Spawner *s) {
        return s && s->info.limits_mode != CGROUP_LIMITS_NONE && s->info.limits_controllers[CGROUP_PIDS];
}

/* ---- requests ---- */

static int send_with_fds(Spawner *s, const void *msg, size_t size, const int *fds, size_t n_fds) {
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int) * SPAWN_LAUNCH_FDS)];
        } control = {};
        struct iovec iov = { .iov_base = (void *) msg, .iov_len = size };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

        if (n_fds > 0) {
                struct cmsghdr *c;

                mh.msg_control = control.buf;
                mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
                c = CMSG_FIRSTHDR(&mh);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
                memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
        }
        for (;;) {
                ssize_t n = sendmsg(s->fd, &mh, MSG_NOSIGNAL);
                if (n >= 0)
                        return 0;
                if (errno == EINTR)
                        continue;
                if (errno == EMSGSIZE)
                        return -E2BIG;
                if (errno == EPIPE || errno == ECONNRESET)
                        return -ESHUTDOWN;
                return negative_errno();
        }
}

/* Sends MSG (whose header id is set here) and waits for its SPAWN_ACK. */
static int request_ack(Spawner *s, SpawnHeader *msg, size_t size, uint32_t *ret_value) {
        Ack a = { .id = atomic_fetch_add(&s->next_id, 1) };
        struct timespec deadline = monotonic_deadline(ACK_TIMEOUT_USEC);
        int r;

        msg->id = a.id;
        pthread_mutex_lock(&s->lock);
        if (s->dead) {
                pthread_mutex_unlock(&s->lock);
                return -ESHUTDOWN;
        }
        a.next = s->acks;
        s->acks = &a;
        pthread_mutex_unlock(&s->lock);

        r = send_with_fds(s, msg, size, NULL, 0);

        pthread_mutex_lock(&s->lock);
        while (r >= 0 && !a.done && !s->dead)
                if (pthread_cond_timedwait(&s->ack_cond, &s->lock, &deadline) == ETIMEDOUT)
                        r = -ETIMEDOUT;
        if (r >= 0)
                r = a.done ? a.result : -ESHUTDOWN;
        for (Ack **p = &s->acks; *p; p = &(*p)->next)
                if (*p == &a) {
                        *p = a.next;
                        break;
                }
        pthread_mutex_unlock(&s->lock);
        if (r >= 0 && ret_value)
                *ret_value = a.value;
        return r;
}

static void *build_launch(const LaunchSpec *spec, uint64_t id, size_t *ret_size) {
        size_t argc = 0, envc = 0, strings = 0, size;
        SpawnLaunch *m;
        char *p;

#define ADD(str) (strings += strlen(str) + 1)
        ADD(spec->sandbox_key);
        ADD(spec->hostname);
        if (spec->cwd)
                ADD(spec->cwd);
        for (; spec->argv[argc]; argc++)
                ADD(spec->argv[argc]);
        for (; spec->envp && spec->envp[envc]; envc++)
                ADD(spec->envp[envc]);
#undef ADD
        size = sizeof *m + strings;
        m = calloc(1, size);
        if (!m)
                return NULL;
        *m = (SpawnLaunch) {
                .h = { SPAWN_LAUNCH, (uint32_t) size, id },
                .uid = spec->uid, .gid = spec->gid, .level = spec->level, .network = spec->network,
                .tmpfs_bytes = spec->tmpfs_bytes, .shm_bytes = spec->shm_bytes, .limits = spec->limits,
                .argc = (uint32_t) argc, .envc = (uint32_t) envc,
                .has_cwd = spec->cwd != NULL, .collect_timings = spec->collect_timings,
                .strings_size = (uint32_t) strings,
        };
        p = m->strings;
#define PUT(str) do { size_t l = strlen(str) + 1; memcpy(p, (str), l); p += l; } while (0)
        PUT(spec->sandbox_key);
        PUT(spec->hostname);
        if (spec->cwd)
                PUT(spec->cwd);
        for (size_t i = 0; i < argc; i++)
                PUT(spec->argv[i]);
        for (size_t i = 0; i < envc; i++)
                PUT(spec->envp[i]);
#undef PUT
        *ret_size = size;
        return m;
}

int spawner_launch(Spawner *s, const LaunchSpec *spec, SpawnerExitCallback on_exit, void *userdata,
                   SpawnerExec **ret, LaunchError *err, LaunchTimings *timings) {
        LaunchError dummy;
        uint64_t start = now_monotonic_usec();
        _cleanup_free_ SpawnLaunch *m = NULL;
        struct timespec deadline;
        SpawnerExec *e;
        size_t size;
        int r;

        if (!err)
                err = &dummy;
        *err = (LaunchError) {};
        r = launch_spec_validate(spec, err);
        if (r < 0)
                return r;

        e = calloc(1, sizeof *e);
        if (!e)
                return -ENOMEM;
        atomic_init(&e->refs, 1);
        e->s = spawner_ref(s);
        e->id = atomic_fetch_add(&s->next_id, 1);
        e->on_exit = on_exit;
        e->userdata = userdata;
        cond_init_monotonic(&e->cond);

        m = build_launch(spec, e->id, &size);
        if (!m) {
                spawner_exec_unref(e);
                return -ENOMEM;
        }
        m->sent_usec = start;

        pthread_mutex_lock(&s->lock);
        if (s->dead) {
                pthread_mutex_unlock(&s->lock);
                spawner_exec_unref(e);
                err->error = ESHUTDOWN;
                (void) strscpy(err->step, sizeof err->step, "spawner");
                (void) strscpy(err->message, sizeof err->message, "spawner: the helper process is gone");
                return -ESHUTDOWN;
        }
        table_add(s, e);
        pthread_mutex_unlock(&s->lock);

        const int fds[SPAWN_LAUNCH_FDS] = { spec->fs_fd, spec->stdin_fd, spec->stdout_fd, spec->stderr_fd };
        r = send_with_fds(s, m, size, fds, SPAWN_LAUNCH_FDS);

        pthread_mutex_lock(&s->lock);
        if (r < 0) {
                if (e->in_table) {
                        table_remove(s, e);
                        pthread_mutex_unlock(&s->lock);
                        spawner_exec_unref(e);              /* the table's */
                } else
                        pthread_mutex_unlock(&s->lock);
                spawner_exec_unref(e);
                err->error = -r;
                (void) strscpy(err->step, sizeof err->step, "send launch request");
                (void) bsprintf(err->message, sizeof err->message, "send launch request: %s", strerror(-r));
                return r;
        }
        deadline = monotonic_deadline(LAUNCH_TIMEOUT_USEC);
        while (e->state == EXEC_PENDING)
                if (pthread_cond_timedwait(&e->cond, &s->lock, &deadline) == ETIMEDOUT)
                        break;
        if (e->state == EXEC_PENDING) {
                e->abandoned = true;
                pthread_mutex_unlock(&s->lock);
                SpawnKill k = { .h = { SPAWN_KILL, sizeof k, 0 }, .exec_id = e->id, .signal = SIGKILL };
                (void) request_ack(s, &k.h, sizeof k, NULL);
                spawner_exec_unref(e);
                err->error = ETIMEDOUT;
                (void) strscpy(err->step, sizeof err->step, "launch");
                (void) strscpy(err->message, sizeof err->message, "launch: the child did not reach execve in time");
                return -ETIMEDOUT;
        }
        if (timings)
                *timings = e->timings;
        if (e->state == EXEC_FAILED) {
                *err = e->error;
                r = -e->error.error;
                pthread_mutex_unlock(&s->lock);
                spawner_exec_unref(e);
                return r;
        }
        pthread_mutex_unlock(&s->lock);
        if (timings)
                timings->at_usec[LAUNCH_T_START] = start;
        *ret = e;
        return 0;
}

int spawner_exec_kill(SpawnerExec *e, int sig) {
        SpawnKill k = { .h = { SPAWN_KILL, sizeof k, 0 }, .exec_id = e->id, .signal = sig };
        bool ended;

        if (sig <= 0 || sig >= NSIG)
                return -EINVAL;
        pthread_mutex_lock(&e->s->lock);
        ended = e->state == EXEC_ENDED;
        pthread_mutex_unlock(&e->s->lock);
        if (ended)
                return -ESRCH;
        return request_ack(e->s, &k.h, sizeof k, NULL);
}

int spawner_exec_wait(SpawnerExec *e, uint64_t timeout_usec, SpawnerExit *ret) {
        struct timespec deadline = monotonic_deadline(timeout_usec == UINT64_MAX ? 0 : timeout_usec);
        int r = 0;

        pthread_mutex_lock(&e->s->lock);
        while (e->state != EXEC_ENDED && r == 0) {
                if (timeout_usec == UINT64_MAX)
                        pthread_cond_wait(&e->cond, &e->s->lock);
                else if (pthread_cond_timedwait(&e->cond, &e->s->lock, &deadline) == ETIMEDOUT)
                        r = -ETIMEDOUT;
        }
        if (e->state == EXEC_ENDED) {
                r = 0;
                if (ret)
                        *ret = e->exit;
        }
        pthread_mutex_unlock(&e->s->lock);
        return r;
}

bool spawner_exec_has_ended(SpawnerExec *e) {
        bool ended;

        pthread_mutex_lock(&e->s->lock);
        ended = e->state == EXEC_ENDED;
        pthread_mutex_unlock(&e->s->lock);
        return ended;
}

pid_t spawner_exec_pid(SpawnerExec *e) {
        return e->pid;
}

const char *spawner_exec_cgroup(SpawnerExec *e) {
        return e->cgroup;
}

int spawner_drop_sandbox(Spawner *s, const char *sandbox_key) {
        SpawnDrop d = { .h = { SPAWN_DROP, sizeof d, 0 } };

        if (strscpy(d.key, sizeof d.key, sandbox_key) < 0)
                return -EINVAL;
        return request_ack(s, &d.h, sizeof d, NULL);
}

int spawner_count_contexts(Spawner *s, unsigned *ret) {
        SpawnHeader h = { SPAWN_COUNT, sizeof h, 0 };
        uint32_t v = 0;
        int r = request_ack(s, &h, sizeof h, &v);

        if (r >= 0)
                *ret = v;
        return r;
}
