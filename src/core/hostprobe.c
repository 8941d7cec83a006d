/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fileio.h"
#include "hostprobe.h"
#include "macros.h"
#include "string-util.h"

#define PROC_FILE_MAX (256u * 1024u)

bool hostprobe_word_in(const char *list, const char *word) {
        size_t n = strlen(word);

        for (const char *p = list; p && *p;) {
                p += strspn(p, " ,\n");
                size_t k = strcspn(p, " ,\n");
                if (k == n && k > 0 && !strncmp(p, word, n))
                        return true;
                p += k;
        }
        return false;
}

/* Splits one mountinfo line into its fields: 5 = mount point, 4 = root, after " - ":
 * fstype, source, super options. Returns false on a malformed line. */
typedef struct MountLine {
        char *root, *point, *opts, *fstype, *superopts;
} MountLine;

static bool parse_mount_line(char *line, MountLine *m) {
        char *fields[6], *save = NULL, *dash, *tok;
        size_t i = 0;

        dash = strstr(line, " - ");
        if (!dash)
                return false;
        *dash = '\0';
        for (tok = strtok_r(line, " ", &save); tok && i < 6; tok = strtok_r(NULL, " ", &save))
                fields[i++] = tok;
        if (i < 6)
                return false;
        m->root = fields[3];
        m->point = fields[4];
        m->opts = fields[5];
        save = NULL;
        m->fstype = strtok_r(dash + 3, " ", &save);
        (void) strtok_r(NULL, " ", &save);
        m->superopts = strtok_r(NULL, " \n", &save);
        return m->fstype && m->superopts;
}

/* The caller's cgroup path in the hierarchy whose /proc/self/cgroup controller field is
 * KEY ("" for v2), or NULL. */
static const char *own_path(char *cgroups, const char *controllers, char *buf, size_t len) {
        char *line, *save = NULL;
        _cleanup_free_ char *copy = strdup(cgroups);

        if (!copy)
                return NULL;
        for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                char *c1 = strchr(line, ':'), *c2;
                if (!c1 || !(c2 = strchr(c1 + 1, ':')))
                        continue;
                *c2 = '\0';
                const char *list = c1 + 1;
                bool match;
                if (!*controllers)
                        match = !*list && !strncmp(line, "0:", 2);
                else {
                        /* Every controller of the mount must be in the line's list. */
                        _cleanup_free_ char *want = strdup(controllers);
                        char *s2 = NULL, *w;
                        match = *list != '\0' && want;
                        for (w = want ? strtok_r(want, ",", &s2) : NULL; w && match; w = strtok_r(NULL, ",", &s2))
                                match = hostprobe_word_in(list, w);
                }
                if (match)
                        return strscpy(buf, len, c2 + 1) < 0 ? NULL : buf;
        }
        return NULL;
}

/* MOUNT + (OWN relative to ROOT) into RET, "" if OWN is not below ROOT. */
static void join_own(const char *mount, const char *root, const char *own, char *ret, size_t len) {
        size_t n = strlen(root);

        ret[0] = '\0';
        if (!own)
                return;
        if (streq(root, "/"))
                n = 0;
        else if (strncmp(own, root, n) || (own[n] != '/' && own[n] != '\0'))
                return;
        if (bsprintf(ret, len, "%s%s", mount, own + n) < 0)
                ret[0] = '\0';
        /* "/sys/fs/cgroup/memory/" for the root: drop the trailing slash. */
        if (strlen(ret) > 1 && ret[strlen(ret) - 1] == '/')
                ret[strlen(ret) - 1] = '\0';
}

static void read_small(const char *dir, const char *file, char *ret, size_t len) {
        _cleanup_free_ char *data = NULL;
        _cleanup_close_ int fd = -1;
        size_t n;

        ret[0] = '\0';
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0 || read_full_file_at(fd, file, 4096, &data, &n) < 0)
                return;
        strstrip_trailing(data);
        (void) strscpy(ret, len, data);
}

int hostprobe_cgroups(CgroupLayout *ret) {
        _cleanup_free_ char *mi = NULL, *cg = NULL;
        char *line, *save = NULL, own[PATH_MAX];
        size_t n;
        int r;

        *ret = (CgroupLayout) {};
        r = read_full_file_at(AT_FDCWD, "/proc/self/mountinfo", PROC_FILE_MAX, &mi, &n);
        if (r < 0)
                return r;
        if (read_full_file_at(AT_FDCWD, "/proc/self/cgroup", PROC_FILE_MAX, &cg, &n) < 0)
                cg = NULL;

        for (line = strtok_r(mi, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                MountLine m;
                if (!parse_mount_line(line, &m) || strchr(m.point, '\\'))
                        continue;
                if (streq(m.fstype, "cgroup2") && !ret->v2) {
                        ret->v2 = true;
                        (void) strscpy(ret->v2_mount, sizeof ret->v2_mount, m.point);
                        join_own(m.point, m.root, cg ? own_path(cg, "", own, sizeof own) : NULL, ret->v2_own,
                                 sizeof ret->v2_own);
                        if (ret->v2_own[0]) {
                                read_small(ret->v2_own, "cgroup.controllers", ret->v2_controllers, sizeof ret->v2_controllers);
                                read_small(ret->v2_own, "cgroup.subtree_control", ret->v2_subtree, sizeof ret->v2_subtree);
                        }
                } else if (streq(m.fstype, "cgroup") && ret->n_v1 < HOSTPROBE_V1_MAX) {
                        CgroupHierarchy *h = &ret->v1[ret->n_v1];
                        char ctl[128] = "", *o, *s2 = NULL;
                        /* Controllers are the super options that are neither rw/ro nor key=value. */
                        for (o = strtok_r(m.superopts, ",", &s2); o; o = strtok_r(NULL, ",", &s2)) {
                                if (streq(o, "rw") || streq(o, "ro") || strchr(o, '=') || streq(o, "noprefix") ||
                                    streq(o, "clone_children") || streq(o, "xattr") || streq(o, "cpuset_v2_mode"))
                                        continue;
                                size_t k = strlen(ctl);
                                (void) bsprintf(ctl + k, sizeof ctl - k, "%s%s", k ? "," : "", o);
                        }
                        if (!ctl[0])
                                continue; /* name=systemd and friends carry no controller */
                        (void) strscpy(h->controllers, sizeof h->controllers, ctl);
                        (void) strscpy(h->mount, sizeof h->mount, m.point);
                        join_own(m.point, m.root, cg ? own_path(cg, ctl, own, sizeof own) : NULL, h->own, sizeof h->own);
                        ret->n_v1++;
                }
        }
        return 0;
}

const CgroupHierarchy *hostprobe_v1_find(const CgroupLayout *l, const char *controller) {
        for (size_t i = 0; i < l->n_v1; i++)
                if (hostprobe_word_in(l->v1[i].controllers, controller))
                        return &l->v1[i];
        return NULL;
}

int hostprobe_cgroup_try(const char *dir, const char *file, const char *value, char *evidence, size_t len) {
        _cleanup_close_ int dfd = -1, cfd = -1, ffd = -1;
        char name[64], back[64] = "";
        ssize_t n;
        int r;

        (void) bsprintf(name, sizeof name, "sandloom-probe-%d", (int) getpid());
        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0) {
                r = -errno;
                (void) bsprintf(evidence, len, "open %s: %s", dir, strerror(-r));
                return r;
        }
        if (mkdirat(dfd, name, 0755) < 0 && errno != EEXIST) {
                r = -errno;
                (void) bsprintf(evidence, len, "mkdir %s/%s: %s", dir, name, strerror(-r));
                return r;
        }
        cfd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (cfd < 0) {
                r = -errno;
                (void) bsprintf(evidence, len, "open %s/%s: %s", dir, name, strerror(-r));
                goto out;
        }
        ffd = openat(cfd, file, O_RDWR | O_CLOEXEC);
        if (ffd < 0) {
                r = -errno;
                (void) bsprintf(evidence, len, "open %s/%s/%s: %s", dir, name, file, strerror(-r));
                goto out;
        }
        if (write(ffd, value, strlen(value)) < 0) {
                r = -errno;
                (void) bsprintf(evidence, len, "write %s to %s/%s/%s: %s", value, dir, name, file, strerror(-r));
                goto out;
        }
        n = pread(ffd, back, sizeof back - 1, 0);
        if (n < 0) {
                r = -errno;
                (void) bsprintf(evidence, len, "read back %s/%s/%s: %s", dir, name, file, strerror(-r));
                goto out;
        }
        back[n] = '\0';
        strstrip_trailing(back);
        r = 0;
        (void) bsprintf(evidence, len, "created %s/%s, wrote %s to %s, read back %s", dir, name, value, file, back);
out:
        ffd = safe_close(ffd);
        cfd = safe_close(cfd);
        if (unlinkat(dfd, name, AT_REMOVEDIR) < 0 && r == 0) {
                r = -errno;
                (void) bsprintf(evidence, len, "rmdir %s/%s: %s", dir, name, strerror(-r));
        }
        return r;
}

int hostprobe_mount_of(const char *path, char *ret_fstype, size_t fstype_len, char *ret_opts, size_t opts_len) {
        _cleanup_free_ char *mi = NULL;
        char *line, *save = NULL;
        struct stat st;
        size_t n, best = 0;
        bool found = false;
        int r;

        if (stat(path, &st) < 0)
                return -errno;
        r = read_full_file_at(AT_FDCWD, "/proc/self/mountinfo", PROC_FILE_MAX, &mi, &n);
        if (r < 0)
                return r;
        /* The last mount whose device matches and whose mount point is a prefix of PATH. */
        for (line = strtok_r(mi, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                unsigned maj, min;
                MountLine m;
                if (sscanf(line, "%*s %*s %u:%u", &maj, &min) != 2 || !parse_mount_line(line, &m))
                        continue;
                if (makedev(maj, min) != st.st_dev)
                        continue;
                size_t k = strlen(m.point);
                if (!streq(m.point, "/") && (strncmp(path, m.point, k) || (path[k] != '/' && path[k] != '\0')))
                        continue;
                if (k < best)
                        continue;
                best = k;
                found = true;
                (void) strscpy(ret_fstype, fstype_len, m.fstype);
                (void) bsprintf(ret_opts, opts_len, "%s,%s", m.opts, m.superopts);
        }
        return found ? 0 : -ENOENT;
}

int hostprobe_project_quota(int dir_fd, const char *path, char *evidence, size_t len) {
        struct fsxattr fa;
        char fstype[64] = "", opts[1024] = "";
        int r;

        if (ioctl(dir_fd, FS_IOC_FSGETXATTR, &fa) < 0) {
                r = -errno;
                (void) bsprintf(evidence, len, "FS_IOC_FSGETXATTR on %s: %s (the filesystem has no project ids)", path,
                                strerror(-r));
                return 0;
        }
        r = hostprobe_mount_of(path, fstype, sizeof fstype, opts, sizeof opts);
        if (r < 0) {
                (void) bsprintf(evidence, len, "the mount of %s is not in /proc/self/mountinfo: %s", path, strerror(-r));
                return 0;
        }
        if (hostprobe_word_in(opts, "prjquota") || hostprobe_word_in(opts, "pquota") ||
            hostprobe_word_in(opts, "pqnoenforce") || hostprobe_word_in(opts, "prjjquota")) {
                (void) bsprintf(evidence, len, "%s on %s: FS_IOC_FSGETXATTR works (project id %u), mounted with project quotas",
                                fstype, path, fa.fsx_projid);
                return 1;
        }
        (void) bsprintf(evidence, len,
                        "%s on %s: FS_IOC_FSGETXATTR works but the mount has no project quota option (%s needs %s)",
                        fstype, path, fstype, streq(fstype, "xfs") ? "-o prjquota" : "the project feature and -o prjquota");
        return 0;
}
