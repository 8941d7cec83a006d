/* SPDX-License-Identifier: MIT */
/* Directory operations of the files API: list and (recursive) delete. Both walk
 * fd-relative: every step is openat(dirfd, name, O_NOFOLLOW), so a symlink swapped in while
 * we walk is never followed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files-internal.h"
#include "files.h"
#include "json-util.h"
#include "string-util.h"

void files_name_list_done(NameList *l) {
        for (size_t i = 0; i < l->n; i++)
                free(l->names[i]);
        free(l->names);
        *l = (NameList) { 0 };
}

static int name_cmp(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

void files_name_list_sort(NameList *l) {
        if (l->n > 1)
                qsort(l->names, l->n, sizeof(char *), name_cmp);
}

static void closedirp(DIR **d) {
        if (*d)
                (void) closedir(*d);
}

int files_read_names(int fd, size_t max_names, size_t max_bytes, NameList *ret) {
        _cleanup_(closedirp) DIR *d = NULL;
        NameList l = { 0 };
        int dfd;

        dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        d = fdopendir(dfd);
        if (!d) {
                safe_close(dfd);
                return -errno;
        }
        for (;;) {
                struct dirent *de;
                char *copy;

                errno = 0;
                de = readdir(d);
                if (!de) {
                        if (errno != 0) {
                                int r = -errno;
                                files_name_list_done(&l);
                                return r;
                        }
                        break;
                }
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (l.n >= max_names || l.bytes + strlen(de->d_name) > max_bytes) {
                        files_name_list_done(&l);
                        return -E2BIG;
                }
                if (l.n == l.cap) {
                        size_t ncap = l.cap ? l.cap * 2 : 64;
                        char **nn = reallocarray(l.names, ncap, sizeof(char *));
                        if (!nn) {
                                files_name_list_done(&l);
                                return -ENOMEM;
                        }
                        l.names = nn;
                        l.cap = ncap;
                }
                copy = strdup(de->d_name);
                if (!copy) {
                        files_name_list_done(&l);
                        return -ENOMEM;
                }
                l.names[l.n++] = copy;
                l.bytes += strlen(copy);
        }
        *ret = l;
        return 0;
}

int files_list(SandboxHandle *h, const char *path, uint64_t limit, uint64_t offset, json_t **ret, Error *e) {
        _cleanup_(files_op_end) FilesOp op = FILES_OP_INIT;
        _cleanup_(files_name_list_done) NameList l = { 0 };
        _cleanup_close_ int fd = -EBADF;
        _cleanup_json_ json_t *entries = NULL, *answer = NULL;
        char canon[PATH_MAX];
        struct stat st;
        size_t shown = 0;
        int r;

        r = files_normalize_path(path, strlen(path), canon, sizeof canon, e);
        if (r < 0)
                return r;
        r = files_op_begin(&op, h, e);
        if (r < 0)
                return r;
        /* Follows a final symlink (in-root), as `ls DIR` inside the sandbox would. */
        r = files_op_open(&op, canon, O_PATH, &fd, &st, e);
        if (r < 0)
                return r;
        if (!S_ISDIR(st.st_mode))
                return error_set(e, -ENOTDIR, 400, "SANDBOX_NOT_A_DIRECTORY", "path is not a directory");

        r = files_read_names(fd, LIST_MAX_NAMES, LIST_MAX_NAME_BYTES, &l);
        if (r == -E2BIG)
                return error_set(e, r, 413, "SANDBOX_FILE_TOO_LARGE",
                                 "directory has more than %u entries; list a subdirectory", LIST_MAX_NAMES);
        if (r < 0)
                return files_errno_error(e, r, "listing", canon);
        files_name_list_sort(&l);

        entries = json_array();
        if (!entries)
                return -ENOMEM;
        for (size_t i = offset < l.n ? (size_t) offset : l.n; i < l.n && shown < limit; i++) {
                _cleanup_free_ char *child = NULL;
                struct stat cst;
                json_t *j;

                if (fstatat(fd, l.names[i], &cst, AT_SYMLINK_NOFOLLOW) < 0) {
                        if (errno == ENOENT)        /* removed meanwhile */
                                continue;
                        return files_errno_error(e, -errno, "listing", canon);
                }
                child = strprintf("%s/%s", canon, l.names[i]);
                if (!child)
                        return -ENOMEM;
                j = files_entry_json(l.names[i], strlen(l.names[i]), child, &cst);
                if (!j || json_array_append_new(entries, j) < 0)
                        return -ENOMEM;
                shown++;
        }

        answer = json_pack("{s:s, s:O, s:I, s:b}", "path", canon, "entries", entries, "total", (json_int_t) l.n,
                           "has_more", offset < l.n && l.n - offset > shown);
        if (!answer)
                return -ENOMEM;
        *ret = TAKE_PTR(answer);
        return 0;
}

static int remove_tree(int dirfd, const char *name, unsigned levels_left);

/* Empties the directory FD (not consumed); LEVELS_LEFT more directory levels may follow. */
static int remove_contents(int fd, unsigned levels_left) {
        /* New entries may appear while we delete (the sandbox keeps running): a few passes,
         * then give up rather than loop forever. */
        for (unsigned pass = 0; pass < 8; pass++) {
                _cleanup_(files_name_list_done) NameList l = { 0 };
                int r;

                r = files_read_names(fd, LIST_MAX_NAMES, LIST_MAX_NAME_BYTES, &l);
                if (r < 0)
                        return r;
                if (l.n == 0)
                        return 0;
                for (size_t i = 0; i < l.n; i++) {
                        r = remove_tree(fd, l.names[i], levels_left);
                        if (r < 0 && r != -ENOENT)
                                return r;
                }
        }
        return -ENOTEMPTY;
}

static int remove_tree(int dirfd, const char *name, unsigned levels_left) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (unlinkat(dirfd, name, 0) >= 0)
                return 0;
        if (errno != EISDIR && errno != EPERM)        /* EPERM: unlink of a directory on Linux */
                return -errno;
        if (unlinkat(dirfd, name, AT_REMOVEDIR) >= 0)
                return 0;
        if (errno != ENOTEMPTY && errno != EEXIST)
                return -errno;
        if (levels_left == 0)
                return -ELOOP;

        /* O_NOFOLLOW|O_DIRECTORY: if a symlink was swapped in, this fails instead of
         * following it, and the next unlinkat() removes the link itself. */
        fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) {
                if (errno == ELOOP || errno == ENOTDIR)
                        return unlinkat(dirfd, name, 0) < 0 ? -errno : 0;
                return -errno;
        }
        r = remove_contents(fd, levels_left - 1);
        if (r < 0)
                return r;
        if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0)
                return -errno;
        return 0;
}

int files_remove_tree_at(int dirfd, const char *name, unsigned max_depth) {
        return remove_tree(dirfd, name, max_depth);
}

int files_delete(SandboxHandle *h, const char *path, bool recursive, Error *e) {
        _cleanup_(files_op_end) FilesOp op = FILES_OP_INIT;
        _cleanup_close_ int dir_fd = -EBADF;
        char canon[PATH_MAX];
        const char *name;
        struct stat st;
        int r;

        r = files_normalize_path(path, strlen(path), canon, sizeof canon, e);
        if (r < 0)
                return r;
        if (files_path_is_root(canon))
                return error_set(e, -EBUSY, 400, "SANDBOX_PATH_IS_ROOT", "a root directory cannot be deleted");
        r = files_op_begin(&op, h, e);
        if (r < 0)
                return r;
        r = files_op_open_parent(&op, canon, &dir_fd, &name, e);
        if (r < 0)
                return r;

        /* The final component itself: a symlink is removed, never followed. */
        if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return files_errno_error(e, -errno, "deleting", canon);
        if (!S_ISDIR(st.st_mode)) {
                if (unlinkat(dir_fd, name, 0) < 0)
                        return files_errno_error(e, -errno, "deleting", canon);
                return 0;
        }
        if (unlinkat(dir_fd, name, AT_REMOVEDIR) >= 0)
                return 0;
        r = -errno;
        if ((r == -ENOTEMPTY || r == -EEXIST) && !recursive)
                return error_set(e, -ENOTEMPTY, 409, "SANDBOX_DIRECTORY_NOT_EMPTY",
                                 "directory is not empty (use recursive)");
        if (r != -ENOTEMPTY && r != -EEXIST)
                return files_errno_error(e, r, "deleting", canon);

        r = files_remove_tree_at(dir_fd, name, FILES_MAX_DEPTH);
        if (r == -ELOOP)
                return error_set(e, r, 413, "SANDBOX_FILE_TOO_LARGE", "directory tree is deeper than %u levels",
                                 FILES_MAX_DEPTH);
        if (r == -E2BIG)
                return error_set(e, r, 413, "SANDBOX_FILE_TOO_LARGE", "a directory has more than %u entries",
                                 LIST_MAX_NAMES);
        if (r < 0)
                return files_errno_error(e, r, "deleting", canon);
        return 0;
}
