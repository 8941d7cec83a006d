/* SPDX-License-Identifier: MIT */
#include "cgroup-track.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "macros.h"
#include "parse-util.h"
#include "string-util.h"
#include "time-util.h"

#define MOUNTINFO_MAX (1024 * 1024)

static int own_v2_path(char *buf, size_t size) {
        _cleanup_fclose_ FILE *f = NULL;
        char line[4096];

        f = fopen("/proc/self/cgroup", "re");
        if (!f)
                return negative_errno();
        while (fgets(line, sizeof line, f)) {
                if (!startswith(line, "0::"))
                        continue;
                strstrip_trailing(line);
                return strscpy(buf, size, line + 3);
        }
        return -ENOMEDIUM;
}

int cgroup_track_find_own(char *ret_path, size_t size) {
        _cleanup_fclose_ FILE *f = NULL;
        char own[2048], line[8192];
        int r;

        r = own_v2_path(own, sizeof own);
        if (r < 0)
                return r;

        f = fopen("/proc/self/mountinfo", "re");
        if (!f)
                return negative_errno();
        while (fgets(line, sizeof line, f)) {
                char *fields[10] = {}, *save = NULL, *dash;
                size_t n = 0, rootlen;
                const char *rest;

                dash = strstr(line, " - ");
                if (!dash || !startswith(dash + 3, "cgroup2 "))
                        continue;
                *dash = '\0';
                for (char *t = strtok_r(line, " ", &save); t && n < ELEMENTSOF(fields); t = strtok_r(NULL, " ", &save))
                        fields[n++] = t;
                if (n < 5)
                        continue;
                /* fields[3] = root of the mount within the hierarchy, fields[4] = mount point */
                string_unescape_octal(fields[3]);
                string_unescape_octal(fields[4]);
                rootlen = streq(fields[3], "/") ? 0 : strlen(fields[3]);
                if (rootlen > 0 && !(strneq(own, fields[3], rootlen) && (own[rootlen] == '/' || own[rootlen] == '\0')))
                        continue;       /* our cgroup is not below this mount */
                rest = own + rootlen;
                if (streq(rest, "/"))
                        rest = "";
                return bsprintf(ret_path, size, "%s%s", fields[4], rest);
        }
        return -ENOMEDIUM;
}

int cgroup_track_mkdir(int parent_fd, const char *name, int *ret_fd) {
        int fd;

        if (mkdirat(parent_fd, name, 0755) < 0 && errno != EEXIST)
                return negative_errno();
        fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return negative_errno();
        *ret_fd = fd;
        return 0;
}

static int write_attr(int cg_fd, const char *attr, const char *value) {
        _cleanup_close_ int fd = -EBADF;

        fd = openat(cg_fd, attr, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return negative_errno();
        if (write(fd, value, strlen(value)) < 0)
                return negative_errno();
        return 0;
}

int cgroup_track_join(int cg_fd) {
        return write_attr(cg_fd, "cgroup.procs", "0");
}

int cgroup_track_kill(int cg_fd) {
        return write_attr(cg_fd, "cgroup.kill", "1");
}

int cgroup_track_signal(int cg_fd, int sig, pid_t except) {
        _cleanup_free_ char *buf = NULL;
        char *save = NULL;
        size_t size;
        int r, n = 0;

        r = read_full_file_at(cg_fd, "cgroup.procs", 1024 * 1024, &buf, &size);
        if (r < 0)
                return r;
        for (char *t = strtok_r(buf, "\n", &save); t; t = strtok_r(NULL, "\n", &save)) {
                uint32_t pid;

                if (parse_u32(t, &pid) < 0 || pid == 0 || (pid_t) pid == except)
                        continue;
                if (kill((pid_t) pid, sig) == 0)
                        n++;
        }
        return n;
}

int cgroup_track_populated(int cg_fd) {
        char buf[256];
        const char *p;
        int r;

        r = read_attr_at(cg_fd, "cgroup.events", buf, sizeof buf);
        if (r < 0)
                return r;
        p = strstr(buf, "populated ");
        if (!p)
                return -EBADMSG;
        return p[10] == '1';
}

int cgroup_track_open_events(int cg_fd, int *ret_fd) {
        int fd = openat(cg_fd, "cgroup.events", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return negative_errno();
        *ret_fd = fd;
        return 0;
}

int cgroup_track_cpu_usec(int cg_fd, uint64_t *ret) {
        char buf[1024], num[32];
        const char *p;
        size_t n = 0;
        int r;

        r = read_attr_at(cg_fd, "cpu.stat", buf, sizeof buf);
        if (r < 0)
                return r;
        p = strstr(buf, "usage_usec ");
        if (!p)
                return -EBADMSG;
        for (p += 11; *p >= '0' && *p <= '9' && n + 1 < sizeof num; p++)
                num[n++] = *p;
        num[n] = '\0';
        return parse_u64(num, ret);
}

int cgroup_track_remove(int parent_fd, const char *name) {
        if (unlinkat(parent_fd, name, AT_REMOVEDIR) < 0)
                return negative_errno();
        return 0;
}

static int remove_children(int dir_fd, unsigned depth) {
        _cleanup_close_ int fd = -EBADF;
        DIR *d;
        struct dirent *de;
        int r = 0;

        if (depth > 64)
                return -ELOOP;
        fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        d = fdopendir(fd);
        if (!d)
                return negative_errno();
        fd = -EBADF;    /* owned by d now */
        while ((de = readdir(d))) {
                _cleanup_close_ int sub = -EBADF;

                if (de->d_type != DT_DIR || streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
                if (sub < 0)
                        continue;
                (void) remove_children(sub, depth + 1);
                if (unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR) < 0 && r == 0)
                        r = negative_errno();
        }
        closedir(d);
        return r;
}

int cgroup_track_destroy_tree(int parent_fd, const char *name, int timeout_msec) {
        _cleanup_close_ int fd = -EBADF, events = -EBADF;
        usec_t deadline = now_monotonic_usec() + (usec_t) timeout_msec * USEC_PER_MSEC;
        int r;

        fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return negative_errno();
        (void) cgroup_track_kill(fd);
        r = cgroup_track_open_events(fd, &events);
        if (r < 0)
                return r;
        for (;;) {
                usec_t now;
                struct pollfd p = { .fd = events, .events = POLLPRI };

                r = cgroup_track_populated(fd);
                if (r <= 0)
                        break;
                now = now_monotonic_usec();
                if (now >= deadline)
                        return -EBUSY;
                (void) poll(&p, 1, (int) MIN((deadline - now) / USEC_PER_MSEC + 1, 100));
        }
        (void) remove_children(fd, 0);
        return cgroup_track_remove(parent_fd, name);
}
