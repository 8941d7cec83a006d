/* SPDX-License-Identifier: MIT */
#include "uid.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"
#include "macros.h"
#include "string-util.h"
#include "workspace.h"

static void closedirp(DIR **d) {
        if (*d)
                (void) closedir(*d);
}

static void mark(uint64_t id, const uid_t *uids, size_t n, bool *found) {
        for (size_t i = 0; i < n; i++)
                if (id == (uint64_t) uids[i])
                        found[i] = true;
}

/* Parses up to MAX decimal numbers separated by blanks from P (to the end of the line). */
static size_t parse_ids(const char *p, uint64_t *ret, size_t max) {
        size_t count = 0;

        while (count < max) {
                uint64_t v = 0;
                bool any = false;

                while (*p == ' ' || *p == '\t')
                        p++;
                while (*p >= '0' && *p <= '9') {
                        if (v > (UINT64_MAX - 9) / 10)
                                return count; /* absurd: stop */
                        v = v * 10 + (uint64_t) (*p - '0');
                        any = true;
                        p++;
                }
                if (!any)
                        break;
                ret[count++] = v;
        }
        return count;
}

/* Finds the line starting with KEY ("Uid:") in BUF and marks its ids. Returns -EBADMSG if
 * the line is missing. */
static int mark_status_line(const char *buf, const char *key, const uid_t *uids, size_t n, bool *found) {
        uint64_t ids[4];
        const char *p;
        size_t k;

        /* At a line start only: the Name: line before it is the process's own choice. */
        for (p = buf; p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
                if (startswith(p, key))
                        break;
        if (!p)
                return -EBADMSG;
        k = parse_ids(p + strlen(key), ids, ELEMENTSOF(ids));
        if (k == 0)
                return -EBADMSG;
        for (size_t i = 0; i < k; i++)
                mark(ids[i], uids, n, found);
        return 0;
}

static bool is_pid_name(const char *s) {
        if (!*s)
                return false;
        for (; *s; s++)
                if (*s < '0' || *s > '9')
                        return false;
        return true;
}

int uid_find_processes(const uid_t *uids, size_t n, bool *ret_found) {
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;

        d = opendir("/proc");
        if (!d)
                return -errno;
        errno = 0;
        while ((de = readdir(d))) {
                _cleanup_close_ int fd = -EBADF;
                char path[64], buf[4096];
                ssize_t k;

                if (!is_pid_name(de->d_name) || strlen(de->d_name) > 20)
                        continue;
                memcpy(path, de->d_name, strlen(de->d_name));
                memcpy(path + strlen(de->d_name), "/status", sizeof "/status");
                fd = openat(dirfd(d), path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
                if (fd < 0) {
                        if (errno == ENOENT || errno == ESRCH)
                                continue; /* exited meanwhile */
                        return -errno;
                }
                /* Uid: and Gid: come within the first few hundred bytes. */
                k = loop_read(fd, buf, sizeof buf - 1);
                if (k < 0) {
                        if (k == -ESRCH)
                                continue;
                        return (int) k;
                }
                buf[k] = '\0';
                if (k == 0)
                        continue;
                if (mark_status_line(buf, "Uid:", uids, n, ret_found) < 0 ||
                    mark_status_line(buf, "Gid:", uids, n, ret_found) < 0)
                        return -EBADMSG;
                errno = 0;
        }
        if (errno != 0)
                return -errno;
        return 0;
}

int uid_find_keys(const uid_t *uids, size_t n, bool *ret_found) {
        _cleanup_free_ char *text = NULL;
        size_t size;
        int r;

        r = read_full_file_at(AT_FDCWD, "/proc/key-users", 1024 * 1024, &text, &size);
        if (r == -ENOENT)
                return 0; /* no keyring support: no keys */
        if (r < 0)
                return r;
        /* Lines look like "    0:     9 8/8 3/1000000 40/25000000". */
        for (char *line = text; line && *line;) {
                char *nl = strchr(line, '\n');
                uint64_t id;

                if (nl)
                        *nl = '\0';
                if (parse_ids(line, &id, 1) == 1 && strchr(line, ':'))
                        mark(id, uids, n, ret_found);
                line = nl ? nl + 1 : NULL;
        }
        return 0;
}

int uid_find_remains(int trash_fd, const uid_t *uids, size_t n, bool *ret_found) {
        _cleanup_free_ bool *trash = NULL;
        int r;

        r = uid_find_processes(uids, n, ret_found);
        if (r >= 0)
                r = uid_find_keys(uids, n, ret_found);
        if (r >= 0) {
                trash = calloc(n ? n : 1, sizeof *trash);
                if (!trash)
                        r = -ENOMEM;
        }
        if (r >= 0)
                r = workspace_trash_owned_by(trash_fd, uids, n, trash);
        if (r < 0) {
                for (size_t i = 0; i < n; i++)
                        ret_found[i] = true;
                return r;
        }
        for (size_t i = 0; i < n; i++)
                if (trash[i])
                        ret_found[i] = true;
        return 0;
}
