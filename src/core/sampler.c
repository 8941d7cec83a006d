/* SPDX-License-Identifier: MIT */
#include "sampler.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "macros.h"
#include "parse-util.h"
#include "string-util.h"

/* A root-owned process's real uid is read again every this many ticks (about 5 s at the
 * default interval): the window in which a process that turned non-dumpable before the
 * sampler first saw it as its own uid goes uncounted. */
#define SAMPLER_RECHECK_TICKS 25u
#define UID_BUCKETS 1024u
#define UID_ENTRIES_MAX 65536u

static const char *const resource_names[_SAMPLER_RESOURCE_MAX] = {
        [SAMPLER_MEMORY] = "memory",
        [SAMPLER_PIDS] = "pids",
};

/* What is known of one sandbox uid: its own limits, its last kill. */
typedef struct UidEntry {
        struct UidEntry *next;
        uint32_t uid;
        uint64_t memory_bytes, processes;   /* 0 = the default */
        bool killed;
        SamplerKill kill;
} UidEntry;

/* One tick's sum for a uid (open addressing; uid 0 is never in the range: empty slot). */
typedef struct Tally {
        uint32_t uid;
        uint32_t processes;
        uint64_t bytes;
} Tally;

/* What the last tick learnt of a pid (open addressing; pid 0 = empty): its uid (for a
 * root-owned one, the real uid read from status) and, for a sandbox process, its statm
 * kept open. A /proc/<pid> fd stays bound to its process: once that is gone, reads fail,
 * also when the pid number is reused, so a read that works is the same process, whose uid
 * cannot have changed (no capabilities, no_new_privs). */
typedef struct PidEntry {
        uint32_t pid;
        uint32_t uid;
        int fd;                             /* statm, or -1 */
} PidEntry;

typedef struct PidTable {
        PidEntry *v;
        size_t cap, n;
} PidTable;

typedef struct Sampler {
        SamplerOptions o;
        pthread_t thread;

        pthread_mutex_t lock;               /* the uid table, the stats, stopping */
        pthread_cond_t wake;
        bool stopping;
        UidEntry *uids[UID_BUCKETS];
        size_t n_uids;
        uint64_t ticks, scans, kills[_SAMPLER_RESOURCE_MAX];
        usec_t last_scan, max_scan, total_scan;      /* wall time */
        usec_t last_scan_cpu, total_scan_cpu;        /* the thread's CPU time: the cost itself */
        unsigned last_processes, last_sandbox_processes, last_status_reads;

        /* The thread's own. */
        DIR *proc;
        long page_size;
        Tally *tally;
        size_t tally_cap, tally_n;
        PidTable known, next;               /* the last tick's pids, this tick's */
        unsigned fds, fds_max;              /* statm fds kept open, at most */
} Sampler;

static Sampler *sampler;
static atomic_bool active;
/* Execs launched and not yet ended: no sandbox process exists without one, so an idle
 * worker does not scan /proc at all. */
static atomic_uint running;

static bool in_range(const Sampler *s, uint32_t uid) {
        return uid >= s->o.uid_start && uid <= s->o.uid_end;
}

static size_t hash32(uint32_t v) {
        return (size_t) ((v * UINT32_C(2654435761)) >> 7);
}

/* ---- the uid table (under the lock) ---- */

static UidEntry *uid_find(Sampler *s, uint32_t uid) {
        for (UidEntry *e = s->uids[hash32(uid) % UID_BUCKETS]; e; e = e->next)
                if (e->uid == uid)
                        return e;
        return NULL;
}

static void uid_clear(Sampler *s) {
        for (size_t b = 0; b < UID_BUCKETS; b++)
                while (s->uids[b]) {
                        UidEntry *e = s->uids[b];
                        s->uids[b] = e->next;
                        free(e);
                }
        s->n_uids = 0;
}

static UidEntry *uid_get(Sampler *s, uint32_t uid) {
        UidEntry *e = uid_find(s, uid);
        size_t b;

        if (e)
                return e;
        /* Bounded: far more sandboxes than ever run at once. Forgetting is harmless: the
         * limits come back with the next launch, and an old kill matters to no exec. */
        if (s->n_uids >= UID_ENTRIES_MAX)
                uid_clear(s);
        e = calloc(1, sizeof *e);
        if (!e)
                return NULL;
        e->uid = uid;
        b = hash32(uid) % UID_BUCKETS;
        e->next = s->uids[b];
        s->uids[b] = e;
        s->n_uids++;
        return e;
}

/* ---- per-tick tables (the thread only) ---- */

static int tally_add(Sampler *s, uint32_t uid, uint64_t bytes) {
        size_t i;

        if ((s->tally_n + 1) * 2 > s->tally_cap) {
                size_t cap = s->tally_cap ? s->tally_cap * 2 : 256;
                Tally *t = calloc(cap, sizeof *t);

                if (!t)
                        return -ENOMEM;
                for (size_t k = 0; k < s->tally_cap; k++) {
                        if (s->tally[k].uid == 0)
                                continue;
                        for (i = hash32(s->tally[k].uid) & (cap - 1); t[i].uid != 0; i = (i + 1) & (cap - 1))
                                ;
                        t[i] = s->tally[k];
                }
                free(s->tally);
                s->tally = t;
                s->tally_cap = cap;
        }
        for (i = hash32(uid) & (s->tally_cap - 1); s->tally[i].uid != 0 && s->tally[i].uid != uid;
             i = (i + 1) & (s->tally_cap - 1))
                ;
        if (s->tally[i].uid == 0) {
                s->tally[i].uid = uid;
                s->tally_n++;
        }
        s->tally[i].processes++;
        s->tally[i].bytes += bytes;
        return 0;
}

static PidEntry *pids_find(PidTable *t, uint32_t pid) {
        if (t->cap == 0)
                return NULL;
        for (size_t i = hash32(pid) & (t->cap - 1); t->v[i].pid != 0; i = (i + 1) & (t->cap - 1))
                if (t->v[i].pid == pid)
                        return &t->v[i];
        return NULL;
}

/* Returns false (nothing stored) only when out of memory: it is just a cache. */
static bool pids_put(PidTable *t, uint32_t pid, uint32_t uid, int fd) {
        size_t i;

        if ((t->n + 1) * 2 > t->cap) {
                size_t cap = t->cap ? t->cap * 2 : 512;
                PidEntry *v = calloc(cap, sizeof *v);

                if (!v)
                        return false;
                for (size_t k = 0; k < t->cap; k++) {
                        if (t->v[k].pid == 0)
                                continue;
                        for (i = hash32(t->v[k].pid) & (cap - 1); v[i].pid != 0; i = (i + 1) & (cap - 1))
                                ;
                        v[i] = t->v[k];
                }
                free(t->v);
                t->v = v;
                t->cap = cap;
        }
        for (i = hash32(pid) & (t->cap - 1); t->v[i].pid != 0; i = (i + 1) & (t->cap - 1))
                if (t->v[i].pid == pid)
                        return false;
        t->v[i] = (PidEntry) { pid, uid, fd };
        t->n++;
        return true;
}

/* Closes the fds left in T (processes that are gone) and empties it. */
static void pids_clear(Sampler *s, PidTable *t) {
        for (size_t i = 0; i < t->cap; i++)
                if (t->v[i].pid != 0 && t->v[i].fd >= 0) {
                        (void) close(t->v[i].fd);
                        s->fds--;
                }
        if (t->v)
                memset(t->v, 0, t->cap * sizeof *t->v);
        t->n = 0;
}

/* ---- /proc ---- */

static ssize_t read_proc(int proc_fd, const char *pid, const char *file, char *buf, size_t size) {
        char path[64];
        ssize_t n;
        int fd;

        if (bsprintf(path, sizeof path, "%s/%s", pid, file) < 0)
                return -ENAMETOOLONG;
        fd = openat(proc_fd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        do
                n = read(fd, buf, size - 1);
        while (n < 0 && errno == EINTR);
        n = n < 0 ? -errno : n;
        (void) close(fd);
        if (n >= 0)
                buf[n] = '\0';
        return n;
}

/* Anonymous resident memory from a statm fd: resident minus shared (file and shmem
 * pages), that is the kernel's MM_ANONPAGES. */
static int statm_anon_bytes(Sampler *s, int fd, uint64_t *ret) {
        unsigned long long size, resident, shared;
        char buf[256];
        ssize_t n;

        do
                n = pread(fd, buf, sizeof buf - 1, 0);
        while (n < 0 && errno == EINTR);
        if (n <= 0)
                return n < 0 ? -errno : -ESRCH;
        buf[n] = '\0';
        if (sscanf(buf, "%llu %llu %llu", &size, &resident, &shared) != 3)
                return -EBADMSG;
        *ret = (uint64_t) (resident > shared ? resident - shared : 0) * (uint64_t) s->page_size;
        return 0;
}

/* The real uid from /proc/<pid>/status ("Uid:\t<real>\t<effective>..."). */
static int read_real_uid(int proc_fd, const char *pid, uint32_t *ret) {
        char buf[1024], *p;
        ssize_t n = read_proc(proc_fd, pid, "status", buf, sizeof buf);
        unsigned long v;
        char *end;

        if (n <= 0)
                return n < 0 ? (int) n : -ESRCH;
        p = strstr(buf, "\nUid:");
        if (!p)
                return -EBADMSG;
        errno = 0;
        v = strtoul(p + 5, &end, 10);
        if (errno != 0 || end == p + 5 || v > UINT32_MAX)
                return -EBADMSG;
        *ret = (uint32_t) v;
        return 0;
}

/* A root-owned /proc/<pid>: a root process, a kernel thread, or a sandbox process that is
 * not dumpable. Its real uid is read when it is new, and again every SAMPLER_RECHECK_TICKS
 * (spread over the ticks by pid); KNOWN is what the last tick found. */
static uint32_t root_owner(Sampler *s, int proc_fd, uint32_t pid, const char *name, const PidEntry *known,
                           unsigned *status_reads) {
        uint32_t uid = 0;

        if (known && (s->ticks + pid) % SAMPLER_RECHECK_TICKS != 0)
                return known->uid;
        (*status_reads)++;
        if (read_real_uid(proc_fd, name, &uid) < 0)
                return 0;
        return uid;
}

/* ---- the kill ---- */

/* Every process of UID, at once: a child that is UID (and nothing more) sends kill(-1),
 * which the kernel delivers to all processes it may signal, atomically against forks. */
static int kill_uid(uint32_t uid) {
        int status;
        pid_t pid;

        pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
                struct __user_cap_data_struct caps[2] = {};

                /* Raw syscalls: this thread is the child's only one, and nothing of libc's
                 * state may be needed after a fork of a threaded process. The capabilities go
                 * explicitly: a daemon that is not root keeps them across setresuid, and
                 * CAP_KILL would make kill(-1) reach every process on the host. */
                if (syscall(SYS_setgroups, 0, NULL) < 0 || syscall(SYS_setresgid, uid, uid, uid) < 0 ||
                    syscall(SYS_setresuid, uid, uid, uid) < 0 ||
                    syscall(SYS_capset, &h, caps) < 0 || syscall(SYS_geteuid) != (long) uid)
                        _exit(2);
                _exit(kill(-1, SIGKILL) < 0 && errno != ESRCH ? 3 : 0);
        }
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                return -EPERM;
        return 0;
}

static void do_kill(Sampler *s, uint32_t uid, SamplerResource r, uint64_t value, uint64_t limit) {
        SamplerKill k = { .resource = r, .value = value, .limit = limit };
        UidEntry *e;
        int ret;

        /* Recorded before the signal: an exec whose end is reported right after it must
         * find it. */
        pthread_mutex_lock(&s->lock);
        k.at = now_monotonic_usec();
        e = uid_get(s, uid);
        if (e) {
                e->killed = true;
                e->kill = k;
        }
        s->kills[r]++;
        pthread_mutex_unlock(&s->lock);

        ret = kill_uid(uid);
        pthread_mutex_lock(&s->lock);
        e = uid_find(s, uid);
        if (e && e->killed && e->kill.at == k.at)
                e->kill.ended = now_monotonic_usec();
        pthread_mutex_unlock(&s->lock);
        log_emit(LOG_LEVEL_WARNING,
                 json_pack("{s:s, s:I, s:s, s:I, s:I, s:b}", "event", "sampler_kill", "uid", (json_int_t) uid, "resource",
                           resource_names[r], "value", (json_int_t) value, "limit", (json_int_t) limit, "killed",
                           ret >= 0),
                 "Sandbox uid %" PRIu32 " is over its %s limit (%" PRIu64 " > %" PRIu64 "%s): %s", uid,
                 resource_names[r], value, limit, r == SAMPLER_MEMORY ? " bytes" : " processes",
                 ret >= 0 ? "killed every process of the uid" : strerror(-ret));
}

/* ---- the thread ---- */

/* One sandbox process: its memory (if memory is enforced) into the tally, and its statm
 * kept open for the next tick when FD is -1 (a new one). */
static void count_process(Sampler *s, int proc_fd, uint32_t pid, const char *name, uint32_t uid, int fd) {
        uint64_t bytes = 0;

        if (s->o.enforce[SAMPLER_MEMORY]) {
                if (fd < 0) {
                        char path[64];

                        (void) bsprintf(path, sizeof path, "%s/statm", name);
                        fd = openat(proc_fd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
                        if (fd >= 0)
                                s->fds++;
                }
                /* Counted even if its memory cannot be read (a zombie has none). */
                if (fd >= 0 && statm_anon_bytes(s, fd, &bytes) < 0) {
                        (void) close(fd);
                        s->fds--;
                        fd = -1;
                }
                if (fd >= 0 && s->fds > s->fds_max) {
                        (void) close(fd);
                        s->fds--;
                        fd = -1;
                }
        }
        (void) tally_add(s, uid, bytes);
        if (!pids_put(&s->next, pid, uid, fd) && fd >= 0) {
                (void) close(fd);
                s->fds--;
        }
}

static usec_t thread_cpu_usec(void) {
        struct timespec ts;

        if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) < 0)
                return 0;
        return (usec_t) ts.tv_sec * USEC_PER_SEC + (usec_t) ts.tv_nsec / NSEC_PER_USEC;
}

static void tick(Sampler *s) {
        usec_t t0 = now_monotonic_usec(), c0 = thread_cpu_usec(), took, cpu;
        unsigned processes = 0, sandbox_processes = 0, status_reads = 0;
        int proc_fd = dirfd(s->proc);
        struct dirent *de;

        if (atomic_load(&running) == 0) {
                /* Nothing to look at. What was known may be stale by the next scan (pids are
                 * reused over minutes): forget it, so that every pid is new again. */
                pids_clear(s, &s->known);
                pthread_mutex_lock(&s->lock);
                s->ticks++;
                pthread_mutex_unlock(&s->lock);
                return;
        }

        memset(s->tally, 0, s->tally_cap * sizeof *s->tally);
        s->tally_n = 0;
        pids_clear(s, &s->next);

        rewinddir(s->proc);
        while ((de = readdir(s->proc))) {
                PidEntry *known;
                struct stat st;
                uint32_t pid, uid;

                if (de->d_name[0] < '1' || de->d_name[0] > '9' || parse_u32(de->d_name, &pid) < 0)
                        continue;
                processes++;
                known = pids_find(&s->known, pid);
                if (known && known->fd >= 0) {
                        /* A sandbox process seen before, statm open: if it still reads, it is
                         * the same process. No stat needed. */
                        int fd = TAKE_FD(known->fd);
                        uint64_t bytes;

                        if (statm_anon_bytes(s, fd, &bytes) >= 0) {
                                sandbox_processes++;
                                (void) tally_add(s, known->uid, bytes);
                                if (!pids_put(&s->next, pid, known->uid, fd)) {
                                        (void) close(fd);
                                        s->fds--;
                                }
                                continue;
                        }
                        (void) close(fd); /* gone: the pid is another process now */
                        s->fds--;
                        known = NULL;
                }
                if (fstatat(proc_fd, de->d_name, &st, 0) < 0)
                        continue; /* gone */
                uid = (uint32_t) st.st_uid;
                if (uid == 0) {
                        uid = root_owner(s, proc_fd, pid, de->d_name, known, &status_reads);
                        if (!in_range(s, uid)) {
                                (void) pids_put(&s->next, pid, uid, -1);
                                continue;
                        }
                }
                if (!in_range(s, uid))
                        continue;
                sandbox_processes++;
                count_process(s, proc_fd, pid, de->d_name, uid, -1);
        }

        /* Whatever is left of the last tick is gone; this tick's pids are the next one's. */
        pids_clear(s, &s->known);
        PidTable t = s->known;
        s->known = s->next;
        s->next = t;

        took = now_monotonic_usec() - t0;
        cpu = thread_cpu_usec() - c0;
        pthread_mutex_lock(&s->lock);
        s->ticks++;
        s->scans++;
        s->last_scan = took;
        s->max_scan = MAX(s->max_scan, took);
        s->total_scan += took;
        s->last_scan_cpu = cpu;
        s->total_scan_cpu += cpu;
        s->last_processes = processes;
        s->last_sandbox_processes = sandbox_processes;
        s->last_status_reads = status_reads;
        pthread_mutex_unlock(&s->lock);

        for (size_t i = 0; i < s->tally_cap; i++) {
                const Tally *t2 = &s->tally[i];
                uint64_t mem = s->o.memory_bytes, procs = s->o.processes;
                UidEntry *e;

                if (t2->uid == 0)
                        continue;
                pthread_mutex_lock(&s->lock);
                e = uid_find(s, t2->uid);
                if (e && e->memory_bytes > 0)
                        mem = e->memory_bytes;
                if (e && e->processes > 0)
                        procs = e->processes;
                pthread_mutex_unlock(&s->lock);

                if (s->o.enforce[SAMPLER_MEMORY] && mem > 0 && t2->bytes > mem)
                        do_kill(s, t2->uid, SAMPLER_MEMORY, t2->bytes, mem);
                else if (s->o.enforce[SAMPLER_PIDS] && procs > 0 && t2->processes > procs)
                        do_kill(s, t2->uid, SAMPLER_PIDS, t2->processes, procs);
        }
}

static void *sampler_thread(void *arg) {
        Sampler *s = arg;

        (void) pthread_setname_np(pthread_self(), "sandloom-sample");

        pthread_mutex_lock(&s->lock);
        while (!s->stopping) {
                struct timespec ts;
                usec_t until;

                pthread_mutex_unlock(&s->lock);
                tick(s);
                pthread_mutex_lock(&s->lock);
                until = now_monotonic_usec() + s->o.interval_usec;
                ts = (struct timespec) { .tv_sec = (time_t) (until / USEC_PER_SEC),
                                         .tv_nsec = (long) (until % USEC_PER_SEC * NSEC_PER_USEC) };
                while (!s->stopping && now_monotonic_usec() < until)
                        (void) pthread_cond_timedwait(&s->wake, &s->lock, &ts);
        }
        pthread_mutex_unlock(&s->lock);
        return NULL;
}

static void sampler_free(Sampler *s) {
        if (!s)
                return;
        uid_clear(s);
        if (s->proc)
                (void) closedir(s->proc);
        free(s->tally);
        pids_clear(s, &s->known);
        pids_clear(s, &s->next);
        free(s->known.v);
        free(s->next.v);
        pthread_cond_destroy(&s->wake);
        pthread_mutex_destroy(&s->lock);
        free(s);
}

int sampler_start(const SamplerOptions *o) {
        pthread_condattr_t ca;
        Sampler *s;
        int r;

        if (sampler)
                return -EALREADY;
        if (!o->enforce[SAMPLER_MEMORY] && !o->enforce[SAMPLER_PIDS])
                return 0;
        if (o->uid_start == 0 || o->uid_start > o->uid_end || o->interval_usec == 0)
                return -EINVAL;
        s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        s->o = *o;
        s->page_size = sysconf(_SC_PAGESIZE);
        /* statm fds kept open: a quarter of what the daemon may open, at most 8192. */
        struct rlimit rl;
        s->fds_max = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? (unsigned) MIN(rl.rlim_cur / 4, 8192) : 1024;
        (void) pthread_condattr_init(&ca);
        (void) pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        (void) pthread_cond_init(&s->wake, &ca);
        (void) pthread_condattr_destroy(&ca);
        (void) pthread_mutex_init(&s->lock, NULL);
        s->proc = opendir("/proc");
        if (!s->proc) {
                r = -errno;
                sampler_free(s);
                return r;
        }
        if (tally_add(s, o->uid_start, 0) < 0) { /* allocates the table */
                sampler_free(s);
                return -ENOMEM;
        }
        r = -pthread_create(&s->thread, NULL, sampler_thread, s);
        if (r < 0) {
                sampler_free(s);
                return r;
        }
        sampler = s;
        atomic_store(&active, true);
        return 0;
}

void sampler_stop(void) {
        Sampler *s = sampler;

        if (!s)
                return;
        atomic_store(&active, false);
        pthread_mutex_lock(&s->lock);
        s->stopping = true;
        pthread_cond_signal(&s->wake);
        pthread_mutex_unlock(&s->lock);
        (void) pthread_join(s->thread, NULL);
        sampler = NULL;
        sampler_free(s);
}

void sampler_exec_begin(void) {
        atomic_fetch_add(&running, 1);
}

void sampler_exec_end(void) {
        atomic_fetch_sub(&running, 1);
}

bool sampler_active(void) {
        return atomic_load(&active);
}

bool sampler_enforces(SamplerResource r) {
        return sampler_active() && r >= 0 && r < _SAMPLER_RESOURCE_MAX && sampler->o.enforce[r];
}

void sampler_set_limits(uint32_t uid, uint64_t memory_bytes, uint64_t processes) {
        Sampler *s = sampler;
        UidEntry *e;

        if (!sampler_active() || !in_range(s, uid))
                return;
        pthread_mutex_lock(&s->lock);
        e = memory_bytes || processes ? uid_get(s, uid) : uid_find(s, uid);
        if (e) {
                e->memory_bytes = memory_bytes;
                e->processes = processes;
        }
        pthread_mutex_unlock(&s->lock);
}

bool sampler_killed_since(uint32_t uid, usec_t since, SamplerKill *ret) {
        Sampler *s = sampler;
        bool found = false;
        UidEntry *e;

        if (!sampler_active())
                return false;
        pthread_mutex_lock(&s->lock);
        e = uid_find(s, uid);
        if (e && e->killed && (e->kill.ended == 0 || e->kill.ended >= since)) {
                *ret = e->kill;
                found = true;
        }
        pthread_mutex_unlock(&s->lock);
        return found;
}

void sampler_kill_message(const SamplerKill *k, char *buf, size_t size) {
        if (k->resource == SAMPLER_MEMORY)
                (void) bsprintf(buf, size,
                                "sandloom: killed: the sandbox's processes held %" PRIu64 " MiB of memory, over its "
                                "limit of %" PRIu64 " MiB (sampled; no memory cgroup on this worker)\n",
                                k->value >> 20, k->limit >> 20);
        else
                (void) bsprintf(buf, size,
                                "sandloom: killed: the sandbox had %" PRIu64 " processes, over its limit of %" PRIu64
                                " (sampled; no pids cgroup on this worker)\n",
                                k->value, k->limit);
}

json_t *sampler_report_json(void) {
        Sampler *s = sampler;
        json_t *o, *enforces;

        if (!sampler_active())
                return NULL;
        enforces = json_array();
        for (size_t r = 0; enforces && r < _SAMPLER_RESOURCE_MAX; r++)
                if (s->o.enforce[r])
                        (void) json_array_append_new(enforces, json_string(resource_names[r]));
        pthread_mutex_lock(&s->lock);
        o = json_pack("{s:I, s:o*, s:I, s:I, s:i, s:I, s:I, s:I, s:I, s:I, s:i, s:i, s:i, s:{s:I, s:I}}",
                      "interval_ms", (json_int_t) (s->o.interval_usec / USEC_PER_MSEC),
                      "enforces", enforces,
                      "ticks", (json_int_t) s->ticks,
                      "scans", (json_int_t) s->scans,
                      "execs_running", (int) atomic_load(&running),
                      "last_scan_us", (json_int_t) s->last_scan,
                      "max_scan_us", (json_int_t) s->max_scan,
                      "mean_scan_us", (json_int_t) (s->scans ? s->total_scan / s->scans : 0),
                      "last_scan_cpu_us", (json_int_t) s->last_scan_cpu,
                      "mean_scan_cpu_us", (json_int_t) (s->scans ? s->total_scan_cpu / s->scans : 0),
                      "processes_seen", (int) s->last_processes,
                      "sandbox_processes", (int) s->last_sandbox_processes,
                      "status_reads", (int) s->last_status_reads,
                      "kills", "memory", (json_int_t) s->kills[SAMPLER_MEMORY], "pids", (json_int_t) s->kills[SAMPLER_PIDS]);
        pthread_mutex_unlock(&s->lock);
        return o;
}
