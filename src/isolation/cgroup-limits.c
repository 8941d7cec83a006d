/* SPDX-License-Identifier: MIT */
#include "cgroup-limits.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fileio.h"
#include "macros.h"
#include "parse-util.h"
#include "string-util.h"

#define V1_CFS_PERIOD_US 100000

static const char *const controller_names[_CGROUP_CONTROLLER_MAX] = {
        [CGROUP_MEMORY] = "memory",
        [CGROUP_PIDS] = "pids",
        [CGROUP_CPU] = "cpu",
        [CGROUP_CPUACCT] = "cpuacct",
};

const char *cgroup_controller_to_string(CgroupController c) {
        return c >= 0 && c < _CGROUP_CONTROLLER_MAX ? controller_names[c] : NULL;
}

const char *cgroup_limits_mode_to_string(CgroupLimitsMode m) {
        switch (m) {
        case CGROUP_LIMITS_V1:
                return "cgroup-v1";
        case CGROUP_LIMITS_V2:
                return "cgroup-v2";
        default:
                return "none";
        }
}

int cgroup_limits_parse_cpu_quota(const char *s, uint64_t *ret_millicores) {
        uint64_t whole = 0, frac = 0;
        unsigned ndec = 0;
        const char *p = s;

        if (!s || *s == '\0') {
                *ret_millicores = 0;
                return 0;
        }
        if (*p < '0' || *p > '9')
                return -EINVAL;
        for (; *p >= '0' && *p <= '9'; p++) {
                whole = whole * 10 + (uint64_t) (*p - '0');
                if (whole > 4096)
                        return -EINVAL;
        }
        if (*p == '.') {
                p++;
                if (*p < '0' || *p > '9')
                        return -EINVAL;
                for (; *p >= '0' && *p <= '9'; p++) {
                        if (++ndec > 3)
                                return -EINVAL;
                        frac = frac * 10 + (uint64_t) (*p - '0');
                }
        }
        if (*p != '\0')
                return -EINVAL;
        for (; ndec < 3; ndec++)
                frac *= 10;
        *ret_millicores = whole * 1000 + frac;
        return 0;
}

/* ---- detection ---- */

/* True if the comma-separated LIST contains WORD. */
static bool list_has(const char *list, const char *word) {
        size_t n = strlen(word);

        for (const char *p = list; p && *p;) {
                const char *comma = strchr(p, ',');
                size_t len = comma ? (size_t) (comma - p) : strlen(p);

                if (len == n && strncmp(p, word, n) == 0)
                        return true;
                p = comma ? comma + 1 : NULL;
        }
        return false;
}

static void strip_nl(char *s) {
        size_t n = strlen(s);
        while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == ' '))
                s[--n] = '\0';
}

/* The own cgroup of controller C (v1) or of the v2 hierarchy (C < 0), from /proc/self/cgroup. */
static int own_cgroup(const char *cgroup_file, int c, char *buf, size_t size) {
        _cleanup_fclose_ FILE *f = NULL;
        char line[4096];

        f = fopen(cgroup_file, "re");
        if (!f)
                return negative_errno();
        while (fgets(line, sizeof line, f)) {
                char *ctl = strchr(line, ':'), *path;

                if (!ctl)
                        continue;
                ctl++;
                path = strchr(ctl, ':');
                if (!path)
                        continue;
                *path++ = '\0';
                strip_nl(path);
                if (c < 0 ? *ctl == '\0' : list_has(ctl, controller_names[c]))
                        return strscpy(buf, size, path);
        }
        return -ENOENT;
}

/* Mount point + own path → directory, if the own cgroup is below the mount's root. */
static int join_mount(const char *root, const char *mnt, const char *own, char *buf, size_t size) {
        size_t rootlen = streq(root, "/") ? 0 : strlen(root);
        const char *rest;

        if (rootlen > 0 && !(strncmp(own, root, rootlen) == 0 && (own[rootlen] == '/' || own[rootlen] == '\0')))
                return -ENOENT;
        rest = own + rootlen;
        if (streq(rest, "/"))
                rest = "";
        return bsprintf(buf, size, "%s%s", mnt, rest);
}

static bool v2_lists(const char *dir, const char *controller) {
        char path[600], buf[512] = "";
        _cleanup_close_ int fd = -EBADF;
        ssize_t n;
        char *save = NULL;

        if (bsprintf(path, sizeof path, "%s/cgroup.controllers", dir) < 0)
                return false;
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return false;
        n = read(fd, buf, sizeof buf - 1);
        if (n <= 0)
                return false;
        buf[n] = '\0';
        for (char *t = strtok_r(buf, " \n", &save); t; t = strtok_r(NULL, " \n", &save))
                if (streq(t, controller))
                        return true;
        return false;
}

int cgroup_limits_detect(const char *mountinfo, const char *cgroup, CgroupHost *ret) {
        _cleanup_fclose_ FILE *f = NULL;
        CgroupHost h = {};
        char line[8192], v2own[2048] = "", v2path[512] = "";
        bool have_v1 = false;

        if (!mountinfo)
                mountinfo = "/proc/self/mountinfo";
        if (!cgroup)
                cgroup = "/proc/self/cgroup";
        f = fopen(mountinfo, "re");
        if (!f)
                return negative_errno();
        (void) own_cgroup(cgroup, -1, v2own, sizeof v2own);
        while (fgets(line, sizeof line, f)) {
                char *fields[10] = {}, *save = NULL, *dash, *fstype, *opts;
                size_t n = 0;

                dash = strstr(line, " - ");
                if (!dash)
                        continue;
                *dash = '\0';
                fstype = dash + 3;
                opts = strchr(fstype, ' ');
                if (!opts)
                        continue;
                *opts++ = '\0';
                opts = strchr(opts, ' ');       /* skip the source */
                if (!opts)
                        continue;
                opts++;
                strip_nl(opts);
                for (char *t = strtok_r(line, " ", &save); t && n < ELEMENTSOF(fields); t = strtok_r(NULL, " ", &save))
                        fields[n++] = t;
                if (n < 5)
                        continue;
                string_unescape_octal(fields[3]);
                string_unescape_octal(fields[4]);
                if (streq(fstype, "cgroup2")) {
                        if (v2own[0] != '\0' && v2path[0] == '\0')
                                (void) join_mount(fields[3], fields[4], v2own, v2path, sizeof v2path);
                        continue;
                }
                if (!streq(fstype, "cgroup"))
                        continue;
                for (int c = 0; c < _CGROUP_CONTROLLER_MAX; c++) {
                        char own[2048];

                        if (!list_has(opts, controller_names[c]) || h.path[c][0] != '\0')
                                continue;
                        if (own_cgroup(cgroup, c, own, sizeof own) < 0)
                                continue;
                        if (join_mount(fields[3], fields[4], own, h.path[c], sizeof h.path[c]) < 0)
                                h.path[c][0] = '\0';
                        else if (c == CGROUP_MEMORY || c == CGROUP_PIDS)
                                have_v1 = true;
                }
        }

        if (v2path[0] != '\0')
                for (int c = 0; c < _CGROUP_CONTROLLER_MAX; c++)
                        h.v2_controllers[c] = v2_lists(v2path, controller_names[c]);
        if (v2path[0] != '\0' && h.v2_controllers[CGROUP_MEMORY] && h.v2_controllers[CGROUP_PIDS]) {
                h.mode = CGROUP_LIMITS_V2;
                for (int c = 0; c < _CGROUP_CONTROLLER_MAX; c++)
                        h.path[c][0] = '\0';
                (void) strscpy(h.path[0], sizeof h.path[0], v2path);
                (void) bsprintf(h.evidence, sizeof h.evidence, "cgroup v2 at %s lists memory and pids in cgroup.controllers",
                                v2path);
        } else if (have_v1) {
                h.mode = CGROUP_LIMITS_V1;
                (void) bsprintf(h.evidence, sizeof h.evidence, "cgroup v1 hierarchies:%s%s%s%s%s",
                                h.path[CGROUP_MEMORY][0] ? " memory" : "", h.path[CGROUP_PIDS][0] ? " pids" : "",
                                h.path[CGROUP_CPU][0] ? " cpu" : "", h.path[CGROUP_CPUACCT][0] ? " cpuacct" : "",
                                v2path[0] ? "; the v2 hierarchy has no memory/pids controllers" : "");
        } else {
                h.mode = CGROUP_LIMITS_NONE;
                (void) bsprintf(h.evidence, sizeof h.evidence, "%s",
                                v2path[0] ? "cgroup v2 without memory/pids controllers, no v1 memory/pids hierarchy"
                                          : "no cgroup hierarchy with memory or pids controllers is mounted");
        }
        *ret = h;
        return 0;
}

/* ---- attribute files ---- */

static int write_attr(int dir_fd, const char *attr, const char *value) {
        _cleanup_close_ int fd = -EBADF;
        size_t len = strlen(value);
        ssize_t n;

        fd = openat(dir_fd, attr, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return negative_errno();
        n = write(fd, value, len);
        if (n < 0)
                return negative_errno();
        return (size_t) n == len ? 0 : -EIO;
}

static int write_u64(int dir_fd, const char *attr, uint64_t v) {
        char buf[32];

        (void) bsprintf(buf, sizeof buf, "%" PRIu64, v);
        return write_attr(dir_fd, attr, buf);
}

/* "KEY N" in a key-value file such as memory.oom_control or memory.events. */
static int keyed_u64(const char *text, const char *key, uint64_t *ret) {
        size_t klen = strlen(key);

        for (const char *p = text; p && *p;) {
                const char *nl = strchr(p, '\n');

                if (strncmp(p, key, klen) == 0 && p[klen] == ' ') {
                        char num[32];
                        size_t n = 0;

                        for (const char *q = p + klen + 1; *q >= '0' && *q <= '9' && n + 1 < sizeof num; q++)
                                num[n++] = *q;
                        num[n] = '\0';
                        return parse_u64(num, ret);
                }
                p = nl ? nl + 1 : NULL;
        }
        return -ENOENT;
}

static int read_u64(int dir_fd, const char *attr, uint64_t *ret) {
        char buf[64];
        int r;

        r = read_attr_at(dir_fd, attr, buf, sizeof buf);
        if (r < 0)
                return r;
        strip_nl(buf);
        return parse_u64(buf, ret);
}

/* ---- v1 roots and sandboxes ---- */

static int mkdir_open(int parent_fd, const char *name, int *ret_fd) {
        int fd;

        if (mkdirat(parent_fd, name, 0755) < 0 && errno != EEXIST)
                return negative_errno();
        fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return negative_errno();
        *ret_fd = fd;
        return 0;
}

static void sleep_msec(unsigned ms) {
        struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long) (ms % 1000) * 1000000L };
        (void) nanosleep(&ts, NULL);
}

/* v1 has no cgroup.kill: SIGKILL whatever cgroup.procs lists until it is empty (a fork
 * racing the reading is caught by the next round). */
static void kill_procs(int dir_fd) {
        for (unsigned round = 0; round < 50; round++) {
                char buf[4096];
                char *save = NULL;
                unsigned n = 0;

                if (read_attr_at(dir_fd, "cgroup.procs", buf, sizeof buf) < 0)
                        return;
                for (char *t = strtok_r(buf, "\n", &save); t; t = strtok_r(NULL, "\n", &save)) {
                        uint32_t pid;

                        if (parse_u32(t, &pid) < 0 || pid == 0)
                                continue;
                        (void) kill((pid_t) pid, SIGKILL);
                        n++;
                }
                if (n == 0)
                        return;
                sleep_msec(10);
        }
}

/* Removes PARENT/NAME, killing what is in it and below (depth-first). */
static int remove_tree(int parent_fd, const char *name, unsigned depth) {
        _cleanup_close_ int fd = -EBADF;
        DIR *d;
        struct dirent *de;

        if (depth > 16)
                return -ELOOP;
        fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return negative_errno();
        {
                int dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
                if (dup_fd < 0)
                        return negative_errno();
                d = fdopendir(dup_fd);
                if (!d) {
                        safe_close(dup_fd);
                        return negative_errno();
                }
        }
        while ((de = readdir(d)))
                if (de->d_type == DT_DIR && !streq(de->d_name, ".") && !streq(de->d_name, ".."))
                        (void) remove_tree(dirfd(d), de->d_name, depth + 1);
        closedir(d);
        kill_procs(fd);
        for (unsigned i = 0; i < 100; i++) {
                if (unlinkat(parent_fd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
                        return 0;
                if (errno != EBUSY)
                        return negative_errno();
                sleep_msec(10);         /* processes killed, not yet gone */
                kill_procs(fd);
        }
        return -EBUSY;
}

/* Roots of spawners that are gone (crash, SIGKILL): their sandboxes' processes died with
 * them (PR_SET_PDEATHSIG), their directories did not. */
static void remove_stale(int base_fd) {
        _cleanup_close_ int dup_fd = -EBADF;
        DIR *d;
        struct dirent *de;

        dup_fd = fcntl(base_fd, F_DUPFD_CLOEXEC, 3);
        if (dup_fd < 0)
                return;
        d = fdopendir(dup_fd);
        if (!d)
                return;
        dup_fd = -EBADF;
        while ((de = readdir(d))) {
                uint32_t pid;
                char path[64];

                if (de->d_type != DT_DIR || !startswith(de->d_name, "sandloom-spawner-"))
                        continue;
                if (parse_u32(de->d_name + strlen("sandloom-spawner-"), &pid) < 0)
                        continue;
                (void) bsprintf(path, sizeof path, "/proc/%" PRIu32, pid);
                if (pid != 0 && access(path, F_OK) == 0)
                        continue;               /* a live spawner (another daemon's) */
                (void) remove_tree(dirfd(d), de->d_name, 0);
        }
        closedir(d);
}

static void append_error(CgroupLimitsRoot *r, const char *fmt_controller, const char *what, int err) {
        size_t len = strlen(r->error);

        (void) bsprintf(r->error + len, sizeof r->error - len, "%s%s: %s: %s", len > 0 ? "; " : "", fmt_controller,
                        what, strerror(err));
}

int cgroup_limits_root_init_v1(CgroupLimitsRoot *r, const CgroupHost *host, const CgroupLimits *limits,
                               const char *name) {
        unsigned ok = 0;
        int r2;

        *r = (CgroupLimitsRoot) { .mode = CGROUP_LIMITS_NONE, .limits = *limits };
        for (int c = 0; c < _CGROUP_CONTROLLER_MAX; c++)
                r->base_fd[c] = r->root_fd[c] = -EBADF;
        (void) strscpy(r->name, sizeof r->name, name);
        if (host->mode != CGROUP_LIMITS_V1)
                return -EOPNOTSUPP;

        for (int c = 0; c < _CGROUP_CONTROLLER_MAX; c++) {
                if (host->path[c][0] == '\0')
                        continue;
                r->base_fd[c] = open(host->path[c], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (r->base_fd[c] < 0) {
                        append_error(r, controller_names[c], "opening our cgroup", errno);
                        continue;
                }
                remove_stale(r->base_fd[c]);
                r2 = mkdir_open(r->base_fd[c], name, &r->root_fd[c]);
                if (r2 < 0) {
                        append_error(r, controller_names[c], "creating a cgroup", -r2);
                        r->base_fd[c] = safe_close(r->base_fd[c]);
                        continue;
                }
                if (c == CGROUP_MEMORY) {
                        /* Children are accounted in their parent (the default since 2019,
                         * but set where it is still writable). */
                        (void) write_attr(r->root_fd[c], "memory.use_hierarchy", "1");
                        r->memsw = faccessat(r->root_fd[c], "memory.memsw.limit_in_bytes", W_OK, 0) == 0;
                }
                ok++;
        }
        if (ok == 0)
                return -ENOMEDIUM;
        r->mode = CGROUP_LIMITS_V1;
        return 0;
}

void cgroup_limits_root_done(CgroupLimitsRoot *r) {
        for (int c = 0; c < _CGROUP_CONTROLLER_MAX; c++) {
                if (r->root_fd[c] >= 0 && r->base_fd[c] >= 0) {
                        r->root_fd[c] = safe_close(r->root_fd[c]);
                        (void) remove_tree(r->base_fd[c], r->name, 0);
                }
                r->root_fd[c] = safe_close(r->root_fd[c]);
                r->base_fd[c] = safe_close(r->base_fd[c]);
        }
        r->mode = CGROUP_LIMITS_NONE;
}

void cgroup_limits_sandbox_init(CgroupLimitsSandbox *s) {
        for (int c = 0; c < _CGROUP_CONTROLLER_MAX; c++)
                s->fd[c] = -EBADF;
        s->name[0] = '\0';
}

static int v1_apply(int c, int fd, const CgroupLimits *l, bool memsw) {
        int r;

        switch (c) {
        case CGROUP_MEMORY:
                if (l->memory_bytes == 0)
                        return 0;
                r = write_u64(fd, "memory.limit_in_bytes", l->memory_bytes);
                if (r < 0)
                        return r;
                /* memsw >= limit always: with it equal, swap adds nothing. */
                if (memsw)
                        (void) write_u64(fd, "memory.memsw.limit_in_bytes", l->memory_bytes);
                return 0;
        case CGROUP_PIDS:
                return l->processes == 0 ? 0 : write_u64(fd, "pids.max", l->processes);
        case CGROUP_CPU:
                if (l->cpu_millicores == 0)
                        return 0;
                r = write_u64(fd, "cpu.cfs_period_us", V1_CFS_PERIOD_US);
                if (r < 0)
                        return r;
                return write_u64(fd, "cpu.cfs_quota_us", l->cpu_millicores * V1_CFS_PERIOD_US / 1000);
        default:
                return 0;
        }
}

int cgroup_limits_sandbox_create(CgroupLimitsRoot *r, const char *name, const CgroupLimits *limits,
                                 CgroupLimitsSandbox *s) {
        int k;

        if (!limits)
                limits = &r->limits;
        if (strscpy(s->name, sizeof s->name, name) < 0)
                return -ENAMETOOLONG;
        for (int c = 0; c < _CGROUP_CONTROLLER_MAX; c++) {
                if (r->root_fd[c] < 0)
                        continue;
                k = mkdir_open(r->root_fd[c], name, &s->fd[c]);
                if (k >= 0)
                        k = v1_apply(c, s->fd[c], limits, r->memsw);
                if (k < 0) {
                        cgroup_limits_sandbox_destroy(r, s);
                        return k;
                }
        }
        return 0;
}

void cgroup_limits_sandbox_destroy(CgroupLimitsRoot *r, CgroupLimitsSandbox *s) {
        for (int c = 0; c < _CGROUP_CONTROLLER_MAX; c++) {
                if (s->fd[c] < 0)
                        continue;
                s->fd[c] = safe_close(s->fd[c]);
                if (r->root_fd[c] >= 0 && s->name[0] != '\0')
                        (void) remove_tree(r->root_fd[c], s->name, 0);
        }
}

int cgroup_limits_join(const int fds[_CGROUP_CONTROLLER_MAX]) {
        for (int c = 0; c < _CGROUP_CONTROLLER_MAX; c++) {
                int r;

                if (fds[c] < 0)
                        continue;
                r = write_attr(fds[c], "cgroup.procs", "0");
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- v2 ---- */

int cgroup_limits_v2_enable(int parent_fd) {
        return write_attr(parent_fd, "cgroup.subtree_control", "+memory +pids +cpu");
}

int cgroup_limits_v2_vacate(int base_fd, const char *leaf) {
        _cleanup_close_ int leaf_fd = -EBADF;
        int r;

        r = mkdir_open(base_fd, leaf, &leaf_fd);
        if (r < 0)
                return r;
        for (unsigned round = 0; round < 10; round++) {
                char buf[4096];
                char *save = NULL;
                unsigned n = 0;

                r = read_attr_at(base_fd, "cgroup.procs", buf, sizeof buf);
                if (r < 0)
                        return r;
                for (char *t = strtok_r(buf, "\n", &save); t; t = strtok_r(NULL, "\n", &save)) {
                        uint32_t pid;

                        if (parse_u32(t, &pid) < 0 || pid == 0)
                                continue;
                        r = write_attr(leaf_fd, "cgroup.procs", t);
                        if (r < 0 && r != -ESRCH)
                                return r;
                        n++;
                }
                if (n == 0)
                        return 0;
        }
        return -EBUSY;
}

int cgroup_limits_v2_apply(int cg_fd, const CgroupLimits *l) {
        char buf[64];
        int r;

        if (l->memory_bytes > 0) {
                r = write_u64(cg_fd, "memory.max", l->memory_bytes);
                if (r < 0)
                        return r;
                (void) write_attr(cg_fd, "memory.swap.max", "0");     /* absent without swap accounting */
        }
        if (l->processes > 0) {
                r = write_u64(cg_fd, "pids.max", l->processes);
                if (r < 0)
                        return r;
        }
        if (l->cpu_millicores > 0) {
                (void) bsprintf(buf, sizeof buf, "%" PRIu64 " %u", l->cpu_millicores * V1_CFS_PERIOD_US / 1000,
                                V1_CFS_PERIOD_US);
                r = write_attr(cg_fd, "cpu.max", buf);
                if (r < 0)
                        return r;
        }
        return 0;
}

int cgroup_limits_v2_delegate_memory(int cg_fd) {
        return write_attr(cg_fd, "cgroup.subtree_control", "+memory");
}

/* ---- counters ---- */

int cgroup_limits_memory_counters(int mem_fd, bool v2, CgroupMemoryCounters *ret) {
        CgroupMemoryCounters m = {};
        char buf[1024];
        int r;

        if (v2) {
                r = read_attr_at(mem_fd, "memory.events", buf, sizeof buf);
                if (r < 0)
                        return r;
                (void) keyed_u64(buf, "oom_kill", &m.oom_kills);
                (void) keyed_u64(buf, "max", &m.failcnt);
                (void) read_u64(mem_fd, "memory.peak", &m.peak_bytes);
        } else {
                r = read_attr_at(mem_fd, "memory.oom_control", buf, sizeof buf);
                if (r < 0)
                        return r;
                (void) keyed_u64(buf, "oom_kill", &m.oom_kills);
                (void) read_u64(mem_fd, "memory.failcnt", &m.failcnt);
                (void) read_u64(mem_fd, "memory.max_usage_in_bytes", &m.peak_bytes);
        }
        *ret = m;
        return 0;
}

int cgroup_limits_memory_reset_peak(int mem_fd) {
        return write_attr(mem_fd, "memory.max_usage_in_bytes", "0");
}

/* ---- report ---- */

/* Appends S to BUF as a JSON string (quotes included). */
static void json_str(char *buf, size_t size, const char *s) {
        size_t len = strlen(buf);

        if (len + 1 < size)
                buf[len++] = '"';
        for (; *s && len + 8 < size; s++) {
                unsigned char ch = (unsigned char) *s;

                if (ch == '"' || ch == '\\') {
                        buf[len++] = '\\';
                        buf[len++] = (char) ch;
                } else if (ch < 0x20)
                        len += (size_t) snprintf(buf + len, size - len, "\\u%04x", ch);
                else
                        buf[len++] = (char) ch;
        }
        if (len + 1 < size)
                buf[len++] = '"';
        buf[len < size ? len : size - 1] = '\0';
}

static void append(char *buf, size_t size, const char *text) {
        size_t len = strlen(buf);
        (void) strscpy(buf + len, size - len, text);
}

/* Creates a probe cgroup under the own one, writes one limit file, removes it. */
static void probe_v1(const char *dir, CgroupController c, char *evidence, size_t size, bool *ok) {
        _cleanup_close_ int base = -EBADF, fd = -EBADF;
        char name[64];
        static const char *const attr[_CGROUP_CONTROLLER_MAX] = {
                [CGROUP_MEMORY] = "memory.limit_in_bytes",
                [CGROUP_PIDS] = "pids.max",
                [CGROUP_CPU] = "cpu.cfs_quota_us",
                [CGROUP_CPUACCT] = "cpuacct.usage",
        };
        static const char *const value[_CGROUP_CONTROLLER_MAX] = {
                [CGROUP_MEMORY] = "1073741824", [CGROUP_PIDS] = "256", [CGROUP_CPU] = "50000", [CGROUP_CPUACCT] = "0",
        };
        int r;

        *ok = false;
        base = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (base < 0) {
                (void) bsprintf(evidence, size, "opening %s: %s", dir, strerror(errno));
                return;
        }
        (void) bsprintf(name, sizeof name, "sandloom-probe-%d", (int) getpid());
        r = mkdir_open(base, name, &fd);
        if (r < 0) {
                (void) bsprintf(evidence, size, "creating a cgroup in %s: %s", dir, strerror(-r));
                return;
        }
        r = write_attr(fd, attr[c], value[c]);
        fd = safe_close(fd);
        (void) unlinkat(base, name, AT_REMOVEDIR);
        if (r < 0) {
                (void) bsprintf(evidence, size, "writing %s in a cgroup under %s: %s", attr[c], dir, strerror(-r));
                return;
        }
        (void) bsprintf(evidence, size, "created a cgroup under %s and wrote %s", dir, attr[c]);
        *ok = true;
}

int cgroup_limits_report(char *ret, size_t size) {
        static const CgroupController shown[] = { CGROUP_MEMORY, CGROUP_PIDS, CGROUP_CPU };
        CgroupHost host;
        char out[4096] = "";
        int r;

        r = cgroup_limits_detect(NULL, NULL, &host);
        if (r < 0) {
                host = (CgroupHost) { .mode = CGROUP_LIMITS_NONE };
                (void) bsprintf(host.evidence, sizeof host.evidence, "reading /proc/self/mountinfo: %s", strerror(-r));
        }
        append(out, sizeof out, "{\"mode\":");
        json_str(out, sizeof out, cgroup_limits_mode_to_string(host.mode));
        append(out, sizeof out, ",\"evidence\":");
        json_str(out, sizeof out, host.evidence);
        for (size_t i = 0; i < ELEMENTSOF(shown); i++) {
                CgroupController c = shown[i];
                const char *mech = "none", *path = "";
                char evidence[600];
                bool ok = false;

                if (host.mode == CGROUP_LIMITS_V1 && host.path[c][0] != '\0') {
                        path = host.path[c];
                        probe_v1(path, c, evidence, sizeof evidence, &ok);
                        mech = ok ? "cgroup-v1" : "none";
                } else if (host.mode == CGROUP_LIMITS_V2 && host.v2_controllers[c]) {
                        path = host.path[0];
                        mech = "cgroup-v2";
                        (void) bsprintf(evidence, sizeof evidence, "%s is listed in %s/cgroup.controllers",
                                        controller_names[c], path);
                } else
                        (void) bsprintf(evidence, sizeof evidence, "no usable %s controller (%s)", controller_names[c],
                                        host.evidence);
                append(out, sizeof out, ",");
                json_str(out, sizeof out, controller_names[c]);
                append(out, sizeof out, ":{\"mechanism\":");
                json_str(out, sizeof out, mech);
                append(out, sizeof out, ",\"path\":");
                json_str(out, sizeof out, path);
                append(out, sizeof out, ",\"evidence\":");
                json_str(out, sizeof out, evidence);
                append(out, sizeof out, "}");
        }
        append(out, sizeof out, "}");
        if (strlen(out) + 1 >= sizeof out)
                return -ENOBUFS;
        return strscpy(ret, size, out) < 0 ? -ENOBUFS : 0;
}
