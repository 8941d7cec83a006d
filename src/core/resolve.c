/* SPDX-License-Identifier: MIT */
#include "resolve.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "macros.h"

/* Set once openat2 answered ENOSYS, or by tests. */
static atomic_bool use_fallback;

void resolve_force_fallback(bool force) {
        atomic_store(&use_fallback, force);
}

bool resolve_using_fallback(void) {
        return atomic_load(&use_fallback);
}

static int resolve_kernel(int root_fd, const char *path, int flags) {
        struct open_how how = {
                .flags = (uint64_t) (flags | O_CLOEXEC),
                .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
        };
        const char *p = isempty(path) ? "." : path;

        /* EAGAIN: a rename raced with ".." resolution; the kernel asks us to retry. */
        for (unsigned attempt = 0; attempt < 64; attempt++) {
                long fd = syscall(SYS_openat2, root_fd, p, &how, sizeof how);
                if (fd >= 0)
                        return (int) fd;
                if (errno != EAGAIN && errno != EINTR)
                        return -errno;
        }
        return -EAGAIN;
}

/* --- the userspace walk --- */

typedef struct Walk {
        int root_fd;
        /* The logical in-root path of the current directory, as components, each of which was
         * a real directory (not a symlink) when we stepped into it. */
        char done[PATH_MAX];
        size_t done_len;
        int cur_fd;           /* O_PATH on the current directory */
} Walk;

/* Re-opens the directory named by W->done from the root, one O_NOFOLLOW step at a time.
 * Used for "..": never openat(fd, ".."), whose meaning a concurrent rename can change. */
static int walk_reopen(Walk *w) {
        _cleanup_close_ int fd = -EBADF;
        const char *p = w->done;

        fd = openat(w->root_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        while (*p) {
                char name[NAME_MAX + 1];
                const char *q;
                int nfd;

                while (*p == '/')
                        p++;
                if (!*p)
                        break;
                q = strchrnul(p, '/');
                if ((size_t) (q - p) > NAME_MAX)
                        return -ENAMETOOLONG;
                memcpy(name, p, (size_t) (q - p));
                name[q - p] = '\0';
                nfd = openat(fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (nfd < 0)
                        return -errno;
                safe_close(fd);
                fd = nfd;
                p = q;
        }
        safe_close(w->cur_fd);
        w->cur_fd = TAKE_FD(fd);
        return 0;
}

static int walk_up(Walk *w) {
        char *slash;

        if (w->done_len == 0)
                return 0;        /* ".." at the root stays at the root */
        slash = strrchr(w->done, '/');
        w->done_len = slash ? (size_t) (slash - w->done) : 0;
        w->done[w->done_len] = '\0';
        return walk_reopen(w);
}

static int walk_to_root(Walk *w) {
        w->done_len = 0;
        w->done[0] = '\0';
        return walk_reopen(w);
}

static int walk_descend(Walk *w, const char *name, int fd) {
        size_t n = strlen(name);

        if (w->done_len + 1 + n >= sizeof w->done) {
                safe_close(fd);
                return -ENAMETOOLONG;
        }
        w->done[w->done_len++] = '/';
        memcpy(w->done + w->done_len, name, n + 1);
        w->done_len += n;
        safe_close(w->cur_fd);
        w->cur_fd = fd;
        return 0;
}

/* Opens the final object NAME in the current directory with the caller's flags. */
static int walk_open_final(Walk *w, const char *name, int flags) {
        int fd;

        if (!name)        /* the path ended on a directory already reached ("", "/", "..") */
                fd = openat(w->cur_fd, ".", (flags & ~O_NOFOLLOW) | O_CLOEXEC);
        else
                fd = openat(w->cur_fd, name, flags | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

static int resolve_walk(int root_fd, const char *path, int flags) {
        _cleanup_free_ char *todo = NULL;
        Walk w = { .root_fd = root_fd, .cur_fd = -EBADF };
        unsigned links = 0;
        size_t todo_len;
        char *p;
        int r;

        todo_len = strlen(path);
        if (todo_len >= PATH_MAX)
                return -ENAMETOOLONG;
        todo = strdup(path);
        if (!todo)
                return -ENOMEM;

        r = walk_to_root(&w);
        if (r < 0)
                return r;

        p = todo;
        for (;;) {
                _cleanup_close_ int fd = -EBADF;
                char name[NAME_MAX + 1], target[PATH_MAX];
                struct stat st;
                const char *q;
                bool last;
                ssize_t tl;

                while (*p == '/')
                        p++;
                if (!*p) {
                        r = walk_open_final(&w, NULL, flags);
                        break;
                }
                q = strchrnul(p, '/');
                if ((size_t) (q - p) > NAME_MAX) {
                        r = -ENAMETOOLONG;
                        break;
                }
                memcpy(name, p, (size_t) (q - p));
                name[q - p] = '\0';
                p = (char *) q;
                last = !p[strspn(p, "/")];

                if (streq(name, "."))
                        continue;
                if (streq(name, "..")) {
                        r = walk_up(&w);
                        if (r < 0)
                                break;
                        continue;
                }

                fd = openat(w.cur_fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0) {
                        r = -errno;
                        break;
                }
                if (fstat(fd, &st) < 0) {
                        r = -errno;
                        break;
                }

                if (S_ISLNK(st.st_mode) && !(last && (flags & O_NOFOLLOW))) {
                        char *joined;
                        size_t rest;

                        if (++links > RESOLVE_MAX_SYMLINKS) {
                                r = -ELOOP;
                                break;
                        }
                        tl = readlinkat(fd, "", target, sizeof target);
                        if (tl < 0) {
                                r = -errno;
                                break;
                        }
                        if ((size_t) tl >= sizeof target) {
                                r = -ENAMETOOLONG;
                                break;
                        }
                        target[tl] = '\0';
                        /* The rest of the path now follows the link's target. */
                        rest = strlen(p);
                        if ((size_t) tl + 1 + rest >= PATH_MAX) {
                                r = -ENAMETOOLONG;
                                break;
                        }
                        joined = malloc((size_t) tl + 1 + rest + 1);
                        if (!joined) {
                                r = -ENOMEM;
                                break;
                        }
                        memcpy(joined, target, (size_t) tl);
                        joined[tl] = '/';
                        memcpy(joined + tl + 1, p, rest + 1);
                        free(todo);
                        todo = joined;
                        p = todo;
                        if (target[0] == '/') {
                                r = walk_to_root(&w);
                                if (r < 0)
                                        break;
                        }
                        continue;
                }

                if (last) {
                        if (flags & O_PATH) {
                                if ((flags & O_DIRECTORY) && !S_ISDIR(st.st_mode)) {
                                        r = -ENOTDIR;
                                        break;
                                }
                                r = TAKE_FD(fd);
                        } else
                                /* Re-open by name in the verified parent, O_NOFOLLOW: whatever
                                 * is there now is still inside. */
                                r = walk_open_final(&w, name, flags);
                        break;
                }
                if (!S_ISDIR(st.st_mode)) {
                        r = -ENOTDIR;
                        break;
                }
                r = walk_descend(&w, name, TAKE_FD(fd));
                if (r < 0)
                        break;
        }
        safe_close(w.cur_fd);
        return r;
}

int resolve_open(int root_fd, const char *path, int flags) {
        int r;

        if (!path || (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE)
                return -EINVAL;
        if (!atomic_load(&use_fallback)) {
                r = resolve_kernel(root_fd, path, flags);
                if (r != -ENOSYS)
                        return r;
                atomic_store(&use_fallback, true);
        }
        return resolve_walk(root_fd, path, flags);
}
