/* SPDX-License-Identifier: MIT */
#include "disk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/dqblk_xfs.h>
#include <linux/fs.h>
#include <linux/quota.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "exec.h"
#include "json-util.h"
#include "log.h"
#include "sandbox-limits.h"
#include "macros.h"
#include "string-util.h"
#include "time-util.h"
#include "workspace.h"

#define RESERVE_NAME "reserve"
#define RESERVE_MAX_BYTES (UINT64_C(64) << 20)
#define STATVFS_CACHE_USEC (1 * USEC_PER_SEC)
#define WALK_MAX_DEPTH 64u
#define WALK_MAX_ENTRIES 1000000u
#define USAGE_BUCKETS 1024u
#define QUOTA_PROBE_DIR "quota-probe"

typedef enum {
        DISK_NONE,
        DISK_SOFT,
        DISK_PROJECT,
} DiskMechanism;

static const char *const mechanism_names[] = {
        [DISK_NONE] = "none",
        [DISK_SOFT] = "soft",
        [DISK_PROJECT] = "project-quota",
};

typedef struct Usage {
        struct Usage *next;
        char owner[OWNER_MAX + 1];
        char sandbox_id[SANDBOX_ID_MAX + 1];
        char internal_id[OPAQUE_ID_LEN + 1];
        uint32_t uid;
        uint64_t quota;                   /* its own (sandbox-limits.h) or the default; 0 = none */
        uint64_t bytes, inodes;
        usec_t measured_at;               /* CLOCK_MONOTONIC; 0 = never */
        bool truncated;                   /* the walk hit its bounds: at least this much */
} Usage;

struct Disk {
        Daemon *d;
        DiskMechanism mechanism;
        DiskMechanism probed;             /* what the filesystem offers, quota or not */
        char evidence[512];
        uint64_t reserve_bytes;

        pthread_mutex_t lock;             /* everything below */
        usec_t checked_at;
        uint64_t total, avail;
        unsigned used_percent;
        bool pressure;
        char pressure_reason[200];
        bool reserve_present;
        Usage *buckets[USAGE_BUCKETS];

        pthread_t thread;
        bool thread_started;
        bool stopping;
        pthread_cond_t wake;
};

static int quotactl_fd_call(int fd, unsigned cmd, unsigned id, void *addr) {
        if (syscall(SYS_quotactl_fd, fd, cmd, id, addr) < 0)
                return -errno;
        return 0;
}

/* ---- the filesystem: statvfs, watermarks, reserve ---- */

static void reserve_create(Disk *k) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        fd = openat(k->d->data_fd, RESERVE_NAME, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return;
        r = fallocate(fd, 0, 0, (off_t) k->reserve_bytes);
        if (r < 0) {
                (void) unlinkat(k->d->data_fd, RESERVE_NAME, 0);
                return;
        }
        k->reserve_present = true;
}

/* With k->lock held. */
static void refresh_locked(Disk *k, usec_t now) {
        const Config *c = &k->d->config;
        struct statvfs sv;
        uint64_t used, free_min;

        if (k->checked_at != 0 && now - k->checked_at < STATVFS_CACHE_USEC)
                return;
        k->checked_at = now;
        if (fstatvfs(k->d->data_fd, &sv) < 0)
                return; /* keep the last answer */
        k->total = (uint64_t) sv.f_blocks * sv.f_frsize;
        k->avail = (uint64_t) sv.f_bavail * sv.f_frsize;
        used = (uint64_t) (sv.f_blocks - sv.f_bfree) * sv.f_frsize;
        k->used_percent = used + k->avail == 0 ? 100 : (unsigned) ((used * 100 + used + k->avail - 1) / (used + k->avail));

        /* Nearly full: give the reserve back, so the store can still commit. */
        if (k->reserve_present && k->avail < k->reserve_bytes / 2) {
                if (unlinkat(k->d->data_fd, RESERVE_NAME, 0) >= 0 || errno == ENOENT) {
                        k->reserve_present = false;
                        log_warning("Data filesystem nearly full (%" PRIu64 " bytes available): released the %" PRIu64
                                    "-byte store reserve.", k->avail, k->reserve_bytes);
                }
        }

        free_min = c->min_free_bytes;
        if (c->disk_high_watermark_percent < 100 && k->used_percent > c->disk_high_watermark_percent) {
                k->pressure = true;
                (void) snprintf(k->pressure_reason, sizeof k->pressure_reason,
                                "the worker's data filesystem is %u%% used (limit %" PRIu64 "%%)", k->used_percent,
                                c->disk_high_watermark_percent);
        } else if (free_min > 0 && k->avail < free_min) {
                k->pressure = true;
                (void) snprintf(k->pressure_reason, sizeof k->pressure_reason,
                                "the worker's data filesystem has %" PRIu64 " bytes free (minimum %" PRIu64 ")",
                                k->avail, free_min);
        } else
                k->pressure = false;
}

/* ---- per-sandbox usage ---- */

static unsigned bucket_of(const char *owner, const char *sandbox_id) {
        uint32_t h = 2166136261u;

        for (const char *s = owner; *s; s++)
                h = (h ^ (uint8_t) *s) * 16777619u;
        h = (h ^ '/') * 16777619u;
        for (const char *s = sandbox_id; *s; s++)
                h = (h ^ (uint8_t) *s) * 16777619u;
        return h % USAGE_BUCKETS;
}

/* With k->lock held. */
static Usage *usage_find(Disk *k, const char *owner, const char *sandbox_id) {
        for (Usage *u = k->buckets[bucket_of(owner, sandbox_id)]; u; u = u->next)
                if (streq(u->owner, owner) && streq(u->sandbox_id, sandbox_id))
                        return u;
        return NULL;
}

/* How a sandbox with QUOTA is held to it: nothing without one, else what the filesystem
 * offers (the probe's finding), whatever the default quota is. */
static DiskMechanism quota_mechanism(const Disk *k, uint64_t quota) {
        return quota == 0 ? DISK_NONE : k->probed;
}

static uint64_t record_quota(const Disk *k, const SandboxRecord *rec) {
        SandboxLimits eff;

        sandbox_limits_effective(&k->d->config, &rec->limits, &eff);
        return eff.disk_quota_bytes;
}

/* With k->lock held. Registers (or updates) the sandbox. */
static Usage *usage_track(Disk *k, const SandboxRecord *rec) {
        Usage *u = usage_find(k, rec->owner, rec->sandbox_id);
        unsigned b;

        if (u) {
                u->quota = record_quota(k, rec);
                if (!streq(u->internal_id, rec->internal_id) || u->uid != rec->uid) {
                        (void) strscpy(u->internal_id, sizeof u->internal_id, rec->internal_id);
                        u->uid = rec->uid;
                        u->measured_at = 0;
                }
                return u;
        }
        u = calloc(1, sizeof *u);
        if (!u)
                return NULL;
        (void) strscpy(u->owner, sizeof u->owner, rec->owner);
        (void) strscpy(u->sandbox_id, sizeof u->sandbox_id, rec->sandbox_id);
        (void) strscpy(u->internal_id, sizeof u->internal_id, rec->internal_id);
        u->uid = rec->uid;
        u->quota = record_quota(k, rec);
        b = bucket_of(rec->owner, rec->sandbox_id);
        u->next = k->buckets[b];
        k->buckets[b] = u;
        return u;
}

typedef struct Walk {
        dev_t dev;
        uint64_t bytes, inodes, entries;
        bool truncated;
} Walk;

/* du-like: allocated blocks and inodes below DIR_FD, fd-relative, never following a
 * symlink, never leaving the filesystem, bounded in depth and entries. */
static void walk_dir(int dir_fd, unsigned depth, Walk *w) {
        DIR *dir;
        struct dirent *de;
        int fd;

        fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return;
        dir = fdopendir(fd);
        if (!dir) {
                safe_close(fd);
                return;
        }
        while ((de = readdir(dir))) {
                struct stat st;

                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (++w->entries > WALK_MAX_ENTRIES) {
                        w->truncated = true;
                        break;
                }
                if (fstatat(dirfd(dir), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                w->inodes++;
                w->bytes += (uint64_t) st.st_blocks * 512u;
                if (S_ISDIR(st.st_mode) && st.st_dev == w->dev) {
                        _cleanup_close_ int sub = -EBADF;

                        if (depth + 1 >= WALK_MAX_DEPTH) {
                                w->truncated = true;
                                continue;
                        }
                        sub = openat(dirfd(dir), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
                        if (sub >= 0)
                                walk_dir(sub, depth + 1, w);
                }
        }
        (void) closedir(dir);
}

static int measure_walk(Disk *k, const char *internal_id, Walk *ret) {
        _cleanup_close_ int fs_fd = -EBADF, dir_fd = -EBADF;
        struct stat st;
        Walk w = {};
        int r;

        r = workspace_open_fs(k->d->sandboxes_fd, internal_id, &fs_fd);
        if (r < 0)
                return r;
        dir_fd = openat(fs_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir_fd < 0)
                return -errno;
        if (fstat(dir_fd, &st) < 0)
                return -errno;
        w.dev = st.st_dev;
        walk_dir(dir_fd, 0, &w);
        *ret = w;
        return 0;
}

static int measure_project(Disk *k, uint32_t projid, uint64_t *ret_bytes, uint64_t *ret_inodes) {
        struct if_dqblk q = {};
        int r;

        r = quotactl_fd_call(k->d->data_fd, QCMD(Q_GETQUOTA, PRJQUOTA), projid, &q);
        if (r < 0)
                return r;
        *ret_bytes = q.dqb_curspace;
        *ret_inodes = q.dqb_curinodes;
        return 0;
}

/* Measures a sandbox (walk or quota), without holding the lock during the walk. CANCEL:
 * may stop its execs (the usage thread only; never a request). */
static void usage_measure(Disk *k, const char *owner, const char *sandbox_id, bool cancel) {
        char internal_id[OPAQUE_ID_LEN + 1];
        bool over_and_growing = false;
        uint64_t bytes = 0, inodes = 0;
        bool truncated = false;
        uint64_t quota;
        uint32_t uid;
        Usage *u;
        int r;

        pthread_mutex_lock(&k->lock);
        u = usage_find(k, owner, sandbox_id);
        if (!u) {
                pthread_mutex_unlock(&k->lock);
                return;
        }
        (void) strscpy(internal_id, sizeof internal_id, u->internal_id);
        uid = u->uid;
        quota = u->quota;
        pthread_mutex_unlock(&k->lock);

        if (quota_mechanism(k, quota) == DISK_PROJECT)
                r = measure_project(k, uid, &bytes, &inodes);
        else {
                Walk w = {};

                r = measure_walk(k, internal_id, &w);
                if (r >= 0) {
                        bytes = w.bytes;
                        inodes = w.inodes;
                        truncated = w.truncated;
                }
        }

        pthread_mutex_lock(&k->lock);
        u = usage_find(k, owner, sandbox_id);
        if (u && streq(u->internal_id, internal_id) && r >= 0) {
                /* Soft quota: something is writing past it (the usage grew and is over), so
                 * the sandbox's running execs are stopped (they end CANCELLED). */
                over_and_growing = quota_mechanism(k, quota) == DISK_SOFT && bytes >= quota &&
                                   (u->measured_at == 0 || bytes > u->bytes);
                u->bytes = bytes;
                u->inodes = inodes;
                u->truncated = truncated;
                u->measured_at = now_monotonic_usec();
        }
        pthread_mutex_unlock(&k->lock);

        if (over_and_growing && cancel && k->d->execs) {
                log_warning("Sandbox %s is over its %" PRIu64 "-byte disk quota (%" PRIu64
                            " bytes): cancelling its running execs.", sandbox_id, quota, bytes);
                exec_engine_release_begin(k->d->execs, internal_id);
                exec_engine_release_end(k->d->execs, internal_id);
        }
}

/* The usage thread: the watermarks and the reserve every second, each tracked sandbox's
 * usage every SANDBOX_DISK_USAGE_REFRESH_SECONDS, so that no request ever walks a tree. */
static void *disk_thread(void *arg) {
        Disk *k = arg;
        usec_t refresh = k->d->config.disk_usage_refresh_seconds * USEC_PER_SEC;

        pthread_mutex_lock(&k->lock);
        while (!k->stopping) {
                struct timespec ts;
                usec_t now = now_monotonic_usec();

                refresh_locked(k, now);
                if (!k->reserve_present && !k->pressure && k->avail > 4 * k->reserve_bytes)
                        reserve_create(k);

                for (unsigned b = 0; b < USAGE_BUCKETS && !k->stopping; b++)
                        for (Usage **p = &k->buckets[b]; *p && !k->stopping;) {
                                Usage *u = *p;
                                char owner[OWNER_MAX + 1], sid[SANDBOX_ID_MAX + 1];
                                _cleanup_close_ int fs_fd = -EBADF;

                                if (u->measured_at != 0 && u->measured_at + refresh > now) {
                                        p = &u->next;
                                        continue;
                                }
                                /* Released (the directory went to the trash): forget it. */
                                if (workspace_open_fs(k->d->sandboxes_fd, u->internal_id, &fs_fd) == -ENOENT) {
                                        *p = u->next;
                                        free(u);
                                        continue;
                                }
                                (void) strscpy(owner, sizeof owner, u->owner);
                                (void) strscpy(sid, sizeof sid, u->sandbox_id);
                                pthread_mutex_unlock(&k->lock);
                                usage_measure(k, owner, sid, true);
                                pthread_mutex_lock(&k->lock);
                                /* The list may have changed while unlocked: restart this bucket. */
                                p = &k->buckets[b];
                                for (Usage *v = *p; v; v = v->next)
                                        if (streq(v->owner, owner) && streq(v->sandbox_id, sid) && v->measured_at == 0)
                                                v->measured_at = now; /* failed: try again next period */
                        }

                (void) clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_sec += 1;
                (void) pthread_cond_timedwait(&k->wake, &k->lock, &ts);
        }
        pthread_mutex_unlock(&k->lock);
        return NULL;
}

/* ---- project quotas ---- */

static int set_project(int dir_fd, uint32_t projid) {
        struct fsxattr fa;

        if (ioctl(dir_fd, FS_IOC_FSGETXATTR, &fa) < 0)
                return -errno;
        fa.fsx_projid = projid;
        fa.fsx_xflags |= FS_XFLAG_PROJINHERIT;
        if (ioctl(dir_fd, FS_IOC_FSSETXATTR, &fa) < 0)
                return -errno;
        return 0;
}

static int set_project_limit(Disk *k, uint32_t projid, uint64_t bytes) {
        struct if_dqblk q = {
                /* In 1 KiB quota blocks. */
                .dqb_bhardlimit = (bytes + 1023) / 1024,
                .dqb_bsoftlimit = (bytes + 1023) / 1024,
                .dqb_valid = QIF_BLIMITS,
        };

        return quotactl_fd_call(k->d->data_fd, QCMD(Q_SETQUOTA, PRJQUOTA), projid, &q);
}

/* Does the data filesystem enforce project quotas, and may we set a project id and a
 * limit? Tries it on a scratch directory in DATA/tmp. Fills k->evidence either way. */
static DiskMechanism probe_project_quota(Disk *k) {
        struct fs_quota_statv sv = { .qs_version = FS_QSTATV_VERSION1 };
        _cleanup_close_ int fd = -EBADF;
        uint32_t probe_id = (uint32_t) k->d->config.uid_end;
        int r;

        r = quotactl_fd_call(k->d->data_fd, QCMD(Q_XGETQSTATV, PRJQUOTA), 0, &sv);
        if (r < 0) {
                (void) snprintf(k->evidence, sizeof k->evidence,
                                "quotactl(Q_XGETQSTATV, project) on the data directory: %s", strerror(-r));
                return DISK_SOFT;
        }
        if (!(sv.qs_flags & FS_QUOTA_PDQ_ENFD)) {
                (void) snprintf(k->evidence, sizeof k->evidence,
                                "project quotas are %s but not enforced on the data filesystem (mount with prjquota)",
                                (sv.qs_flags & FS_QUOTA_PDQ_ACCT) ? "accounted" : "off");
                return DISK_SOFT;
        }
        (void) mkdirat(k->d->tmp_fd, QUOTA_PROBE_DIR, 0700);
        fd = openat(k->d->tmp_fd, QUOTA_PROBE_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0) {
                r = -errno;
                (void) snprintf(k->evidence, sizeof k->evidence, "creating a probe directory: %s", strerror(-r));
                return DISK_SOFT;
        }
        r = set_project(fd, probe_id);
        if (r >= 0)
                r = set_project_limit(k, probe_id, 0);
        fd = safe_close(fd);
        (void) unlinkat(k->d->tmp_fd, QUOTA_PROBE_DIR, AT_REMOVEDIR);
        if (r < 0) {
                (void) snprintf(k->evidence, sizeof k->evidence,
                                "project quotas enforced, but setting a project id and limit failed: %s", strerror(-r));
                return DISK_SOFT;
        }
        (void) snprintf(k->evidence, sizeof k->evidence,
                        "project quotas enforced on the data filesystem; project id and limit set on a probe directory");
        return DISK_PROJECT;
}

/* ---- public ---- */

int disk_start(Daemon *d, Disk **ret, char *errbuf, size_t errlen) {
        _cleanup_free_ Disk *k = NULL;
        struct statvfs sv;
        int r;

        k = calloc(1, sizeof *k);
        if (!k)
                return -ENOMEM;
        k->d = d;
        pthread_mutex_init(&k->lock, NULL);
        pthread_cond_init(&k->wake, NULL);

        if (fstatvfs(d->data_fd, &sv) < 0) {
                r = -errno;
                (void) snprintf(errbuf, errlen, "statvfs on the data directory: %s", strerror(-r));
                return r;
        }
        k->reserve_bytes = MIN(RESERVE_MAX_BYTES, (uint64_t) sv.f_blocks * sv.f_frsize / 16);

        k->probed = probe_project_quota(k);
        k->mechanism = d->config.disk_quota_bytes == 0 ? DISK_NONE : k->probed;

        /* A reserve left by the previous run is kept; a missing one is made if there is room. */
        if (faccessat(d->data_fd, RESERVE_NAME, F_OK, AT_SYMLINK_NOFOLLOW) >= 0)
                k->reserve_present = true;
        pthread_mutex_lock(&k->lock);
        refresh_locked(k, now_monotonic_usec());
        if (!k->reserve_present && !k->pressure)
                reserve_create(k);
        pthread_mutex_unlock(&k->lock);

        r = -pthread_create(&k->thread, NULL, disk_thread, k);
        if (r < 0) {
                (void) snprintf(errbuf, errlen, "starting the disk usage thread: %s", strerror(-r));
                return r;
        }
        k->thread_started = true;
        *ret = TAKE_PTR(k);
        return 0;
}

void disk_free(Disk *k) {
        if (!k)
                return;
        if (k->thread_started) {
                pthread_mutex_lock(&k->lock);
                k->stopping = true;
                pthread_cond_signal(&k->wake);
                pthread_mutex_unlock(&k->lock);
                (void) pthread_join(k->thread, NULL);
        }
        for (unsigned b = 0; b < USAGE_BUCKETS; b++)
                while (k->buckets[b]) {
                        Usage *u = k->buckets[b];

                        k->buckets[b] = u->next;
                        free(u);
                }
        pthread_cond_destroy(&k->wake);
        pthread_mutex_destroy(&k->lock);
        free(k);
}

int disk_admit(Disk *k, const char *owner, const char *sandbox_id, Error *e) {
        SandboxRecord rec;
        bool known;
        uint64_t bytes = 0, quota = 0;
        uint32_t uid = 0;
        int r;

        if (!k)
                return 0;
        pthread_mutex_lock(&k->lock);
        refresh_locked(k, now_monotonic_usec());
        if (k->pressure) {
                char why[sizeof k->pressure_reason];

                (void) strscpy(why, sizeof why, k->pressure_reason);
                pthread_mutex_unlock(&k->lock);
                return error_set(e, -ENOSPC, 503, "SANDBOX_WORKER_DISK_PRESSURE", "%s; try again later or elsewhere",
                                 why);
        }
        if (!owner || !sandbox_id) {
                pthread_mutex_unlock(&k->lock);
                return 0;
        }
        /* Every sandbox may have a quota of its own, default or not. */
        Usage *u = usage_find(k, owner, sandbox_id);
        known = u != NULL;
        if (u) {
                bytes = u->bytes;
                uid = u->uid;
                quota = u->quota;
        }
        pthread_mutex_unlock(&k->lock);

        if (!known) {
                /* First sight since start-up: track it; the usage thread measures it. */
                r = k->d->store->ops->sandbox_get(k->d->store, owner, sandbox_id, &rec);
                if (r < 0)
                        return 0; /* the caller's own lookup answers 404 and friends */
                pthread_mutex_lock(&k->lock);
                u = usage_track(k, &rec);
                quota = u ? u->quota : 0;
                pthread_cond_signal(&k->wake);
                pthread_mutex_unlock(&k->lock);
                uid = rec.uid;
                if (quota_mechanism(k, quota) != DISK_PROJECT)
                        return 0;
        }
        if (quota_mechanism(k, quota) == DISK_NONE)
                return 0;
        if (quota_mechanism(k, quota) == DISK_PROJECT) {
                uint64_t inodes;

                /* One syscall: cheap enough for every admission, and always current. */
                if (measure_project(k, uid, &bytes, &inodes) < 0)
                        return 0;
        }
        if (bytes >= quota)
                return error_set(e, -EDQUOT, 507, "SANDBOX_DISK_QUOTA_EXCEEDED",
                                 "sandbox '%s' uses %" PRIu64 " bytes of its %" PRIu64 "-byte disk quota; delete files",
                                 sandbox_id, bytes, quota);
        return 0;
}

int disk_sandbox_prepare(Disk *k, const SandboxRecord *rec, int fs_fd) {
        static const char *const roots[] = { "workspace", "home/sandbox", "cache", "envs" };
        int r;

        if (!k)
                return 0;
        uint64_t quota = record_quota(k, rec);
        if (quota_mechanism(k, quota) == DISK_PROJECT) {
                for (size_t i = 0; i < ELEMENTSOF(roots); i++) {
                        _cleanup_close_ int fd = -EBADF;

                        fd = openat(fs_fd, roots[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
                        if (fd < 0)
                                return -errno;
                        r = set_project(fd, rec->uid);
                        if (r < 0)
                                return r;
                }
                r = set_project_limit(k, rec->uid, quota);
                if (r < 0)
                        return r;
        }
        pthread_mutex_lock(&k->lock);
        Usage *u = usage_track(k, rec);
        if (u) {
                /* A new lifecycle starts empty; the usage thread measures it next. */
                u->bytes = u->inodes = 0;
                u->measured_at = 0;
        }
        pthread_cond_signal(&k->wake);
        pthread_mutex_unlock(&k->lock);
        return u ? 0 : -ENOMEM;
}

json_t *disk_sandbox_json(Disk *k, const SandboxRecord *rec) {
        uint64_t bytes = 0, inodes = 0, quota;
        usec_t at = 0;
        bool truncated = false, fresh;
        Usage *u;

        if (!k || rec->status != SANDBOX_READY)
                return NULL;
        quota = record_quota(k, rec);
        pthread_mutex_lock(&k->lock);
        u = usage_track(k, rec);
        fresh = u && u->measured_at != 0;
        pthread_mutex_unlock(&k->lock);
        if (!u)
                return NULL;
        /* Never measured yet (first look after a start-up): once, here, on a read. */
        if (!fresh || quota_mechanism(k, quota) == DISK_PROJECT)
                usage_measure(k, rec->owner, rec->sandbox_id, false);

        pthread_mutex_lock(&k->lock);
        u = usage_find(k, rec->owner, rec->sandbox_id);
        if (u) {
                bytes = u->bytes;
                inodes = u->inodes;
                at = u->measured_at;
                truncated = u->truncated;
        }
        pthread_mutex_unlock(&k->lock);

        return json_pack("{s:I, s:I, s:I, s:s, s:I, s:b}", "bytes", (json_int_t) bytes, "inodes",
                         (json_int_t) inodes, "quota_bytes", (json_int_t) quota,
                         "enforcement", mechanism_names[quota_mechanism(k, quota)], "measured_at_ms",
                         (json_int_t) (at == 0 ? 0 : (now_realtime_usec() - (now_monotonic_usec() - at)) / USEC_PER_MSEC),
                         "truncated", truncated);
}

int disk_report(Daemon *d, json_t **ret) {
        Disk *k = d->disk;
        json_t *o;

        if (!k)
                return -ENODEV;
        pthread_mutex_lock(&k->lock);
        refresh_locked(k, now_monotonic_usec());
        o = json_pack("{s:s, s:b, s:I, s:I, s:I, s:I, s:I, s:i, s:b, s:I, s:s, s:s?}", "mechanism",
                      mechanism_names[k->mechanism], "project_quota_available", k->probed == DISK_PROJECT, "quota_bytes", (json_int_t) d->config.disk_quota_bytes,
                      "high_watermark_percent", (json_int_t) d->config.disk_high_watermark_percent, "min_free_bytes",
                      (json_int_t) d->config.min_free_bytes, "total_bytes", (json_int_t) k->total, "free_bytes",
                      (json_int_t) k->avail, "used_percent", (int) k->used_percent, "pressure", k->pressure,
                      "reserve_bytes", (json_int_t) (k->reserve_present ? k->reserve_bytes : 0), "evidence",
                      k->evidence, "pressure_reason", k->pressure ? k->pressure_reason : NULL);
        pthread_mutex_unlock(&k->lock);
        if (!o)
                return -ENOMEM;
        *ret = o;
        return 0;
}
