/* SPDX-License-Identifier: MIT */
/* What a local daemon costs, read from /proc: its pid (the process listening on the URL's port),
 * VmRSS, threads, and the number of processes on the host. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "fileio.h"
#include "parse-util.h"
#include "string-util.h"

#define STATUS_MAX (64u * 1024u)
#define NET_TCP_MAX (16u * 1024u * 1024u)
#define LISTENERS_MAX 64

static bool all_digits(const char *s) {
        if (isempty(s))
                return false;
        for (; *s; s++)
                if (!isdigit((unsigned char) *s))
                        return false;
        return true;
}

/* The port of "http://host:port/..." (80 when absent), and whether the host is this machine. */
static int url_local_port(const char *url, unsigned *ret) {
        const char *h, *p, *end;
        char host[256], port[8];
        uint32_t v;

        if (startswith(url, "http://"))
                h = url + 7;
        else
                return -EPROTONOSUPPORT;
        end = h + strcspn(h, "/");
        if (*h == '[') {
                p = memchr(h, ']', (size_t) (end - h));
                if (!p)
                        return -EINVAL;
                if ((size_t) (p - h - 1) >= sizeof host)
                        return -EINVAL;
                memcpy(host, h + 1, (size_t) (p - h - 1));
                host[p - h - 1] = '\0';
                p++;
        } else {
                p = memchr(h, ':', (size_t) (end - h));
                if (!p)
                        p = end;
                if ((size_t) (p - h) >= sizeof host)
                        return -EINVAL;
                memcpy(host, h, (size_t) (p - h));
                host[p - h] = '\0';
        }
        if (!streq(host, "127.0.0.1") && !streq(host, "localhost") && !streq(host, "::1") && !streq(host, "0.0.0.0"))
                return -EREMOTE;
        if (p == end || *p != ':') {
                *ret = 80;
                return 0;
        }
        p++;
        if ((size_t) (end - p) >= sizeof port || end == p)
                return -EINVAL;
        memcpy(port, p, (size_t) (end - p));
        port[end - p] = '\0';
        if (parse_u32(port, &v) < 0 || v == 0 || v > 65535)
                return -EINVAL;
        *ret = v;
        return 0;
}

/* Socket inodes in LISTEN state (0A) on PORT from /proc/net/tcp or tcp6. */
static int listening_inodes(const char *file, unsigned port, unsigned long *inodes, size_t *n) {
        _cleanup_free_ char *text = NULL;
        char *line, *save = NULL;
        int r;

        r = read_full_file_at(AT_FDCWD, file, NET_TCP_MAX, &text, NULL);
        if (r < 0)
                return r;
        line = strtok_r(text, "\n", &save); /* header */
        while (line && (line = strtok_r(NULL, "\n", &save))) {
                char local[128], remote[128], state[8];
                unsigned long inode;
                unsigned lport;
                const char *colon;

                /* sl local rem st tx:rx tr:when retrnsmt uid timeout inode */
                if (sscanf(line, " %*s %127s %127s %7s %*s %*s %*s %*s %*s %lu", local, remote, state, &inode) != 4)
                        continue;
                colon = strrchr(local, ':');
                if (!colon || sscanf(colon + 1, "%x", &lport) != 1)
                        continue;
                if (lport == port && streq(state, "0A") && *n < LISTENERS_MAX)
                        inodes[(*n)++] = inode;
        }
        return 0;
}

static bool pid_has_socket(const char *pid, const unsigned long *inodes, size_t n) {
        _cleanup_free_ char *dir = strprintf("/proc/%s/fd", pid);
        DIR *d;
        struct dirent *de;
        bool found = false;

        if (!dir)
                return false;
        d = opendir(dir);
        if (!d)
                return false;
        while (!found && (de = readdir(d))) {
                char link[64], path[128];
                unsigned long ino;
                ssize_t k;

                if (!all_digits(de->d_name))
                        continue;
                if (bsprintf(path, sizeof path, "%s/%s", dir, de->d_name) < 0)
                        continue;
                k = readlink(path, link, sizeof link - 1);
                if (k <= 0)
                        continue;
                link[k] = '\0';
                if (sscanf(link, "socket:[%lu]", &ino) != 1)
                        continue;
                for (size_t i = 0; i < n; i++)
                        if (inodes[i] == ino)
                                found = true;
        }
        closedir(d);
        return found;
}

static int read_status_field(pid_t pid, const char *field, uint64_t *ret) {
        _cleanup_free_ char *text = NULL;
        char path[64];
        int r;

        if (bsprintf(path, sizeof path, "/proc/%d/status", (int) pid) < 0)
                return -EINVAL;
        r = read_full_file_at(AT_FDCWD, path, STATUS_MAX, &text, NULL);
        if (r < 0)
                return r;
        return parse_status_field(text, field, ret);
}

int bench_proc_rss_kib(pid_t pid, uint64_t *ret) {
        return read_status_field(pid, "VmRSS", ret);
}

int bench_proc_threads(pid_t pid, uint64_t *ret) {
        return read_status_field(pid, "Threads", ret);
}

int bench_proc_find_listener(const char *url, pid_t *ret) {
        unsigned long inodes[LISTENERS_MAX];
        pid_t pids[LISTENERS_MAX];
        size_t n = 0, n_pids = 0;
        unsigned port;
        DIR *d;
        struct dirent *de;
        int r;

        r = url_local_port(url, &port);
        if (r < 0)
                return r;
        (void) listening_inodes("/proc/net/tcp", port, inodes, &n);
        (void) listening_inodes("/proc/net/tcp6", port, inodes, &n);
        if (n == 0)
                return -ESRCH;
        d = opendir("/proc");
        if (!d)
                return -errno;
        while ((de = readdir(d)) && n_pids < LISTENERS_MAX) {
                uint32_t v;
                if (!all_digits(de->d_name) || parse_u32(de->d_name, &v) < 0)
                        continue;
                if (pid_has_socket(de->d_name, inodes, n))
                        pids[n_pids++] = (pid_t) v;
        }
        closedir(d);
        if (n_pids == 0)
                return -ESRCH;
        /* Several holders (a child that inherited the socket): the one whose parent is not a holder. */
        for (size_t i = 0; i < n_pids; i++) {
                uint64_t ppid = 0;
                bool parent_holds = false;
                (void) read_status_field(pids[i], "PPid", &ppid);
                for (size_t j = 0; j < n_pids; j++)
                        if ((uint64_t) pids[j] == ppid)
                                parent_holds = true;
                if (!parent_holds) {
                        *ret = pids[i];
                        return 0;
                }
        }
        *ret = pids[0];
        return 0;
}

int bench_proc_count(uint64_t *ret) {
        DIR *d = opendir("/proc");
        struct dirent *de;
        uint64_t n = 0;

        if (!d)
                return -errno;
        while ((de = readdir(d)))
                if (all_digits(de->d_name))
                        n++;
        closedir(d);
        *ret = n;
        return 0;
}

/* The parent of PID from /proc/PID/stat ("pid (comm) state ppid ..."; comm may hold spaces and ')'). */
static int read_ppid(const char *pid, pid_t *ret) {
        char path[64], buf[1024];
        _cleanup_close_ int fd = -EBADF;
        const char *p;
        ssize_t k;
        int ppid;

        if (bsprintf(path, sizeof path, "/proc/%s/stat", pid) < 0)
                return -EINVAL;
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        k = read(fd, buf, sizeof buf - 1);
        if (k <= 0)
                return -EIO;
        buf[k] = '\0';
        p = strrchr(buf, ')');
        if (!p || sscanf(p + 1, " %*c %d", &ppid) != 1)
                return -EBADMSG;
        *ret = (pid_t) ppid;
        return 0;
}

typedef struct ProcEdge {
        pid_t ppid, pid;
} ProcEdge;

static int cmp_edge(const void *a, const void *b) {
        const ProcEdge *x = a, *y = b;
        return x->ppid < y->ppid ? -1 : x->ppid > y->ppid ? 1 : 0;
}

/* The first edge whose parent is PPID (edges sorted by parent), or N. */
static size_t first_child(const ProcEdge *e, size_t n, pid_t ppid) {
        size_t lo = 0, hi = n;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (e[mid].ppid < ppid)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

/* One pass over /proc builds a parent -> children index (the edges sorted by parent), then a walk
 * from ROOT counts its tree: O(n log n) per sample, whatever the depth. */
int bench_proc_tree_count(pid_t root, uint64_t *ret) {
        _cleanup_free_ ProcEdge *edges = NULL;
        _cleanup_free_ pid_t *queue = NULL;
        size_t n = 0, alloc = 0, q_n = 0;
        DIR *d = opendir("/proc");
        struct dirent *de;
        bool root_seen = false;
        int r = 0;

        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                uint32_t v;
                pid_t pp;
                if (!all_digits(de->d_name) || parse_u32(de->d_name, &v) < 0 || read_ppid(de->d_name, &pp) < 0)
                        continue;
                if (n == alloc) {
                        size_t a = alloc ? alloc * 2 : 1024;
                        ProcEdge *x = reallocarray(edges, a, sizeof *x);
                        if (!x) {
                                r = -ENOMEM;
                                break;
                        }
                        edges = x;
                        alloc = a;
                }
                edges[n++] = (ProcEdge) { .ppid = pp, .pid = (pid_t) v };
                root_seen = root_seen || (pid_t) v == root;
        }
        closedir(d);
        if (r < 0)
                return r;
        if (!root_seen)
                return -ESRCH;
        qsort(edges, n, sizeof *edges, cmp_edge);
        /* Every pid is enqueued at most once (a process has one parent), so N + 1 slots suffice. */
        queue = reallocarray(NULL, n + 1, sizeof *queue);
        if (!queue)
                return -ENOMEM;
        queue[q_n++] = root;
        for (size_t i = 0; i < q_n; i++)
                for (size_t k = first_child(edges, n, queue[i]); k < n && edges[k].ppid == queue[i]; k++)
                        if (edges[k].pid != root && q_n < n + 1)
                                queue[q_n++] = edges[k].pid;
        *ret = q_n;
        return 0;
}
