/* SPDX-License-Identifier: MIT */
/* The files API's single-object operations: read, write (atomic), stat, mkdir, move, and the
 * per-operation context (identity switch + in-root resolution) the others share.
 *
 * Symlinks as the final component: stat and list report the link itself (lstat); delete
 * and move act on the link itself; a write replaces the link by a regular file (the
 * temp file is renamed over the name, as `sed -i` does); read, list and archive of a
 * path whose last component is a link follow it, in-root, exactly as `cat` or `ls` run
 * inside the sandbox would. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files-internal.h"
#include "files.h"
#include "fileio.h"
#include "json-util.h"
#include "random-util.h"
#include "resolve.h"
#include "string-util.h"
#include "time-util.h"
#include "utf8.h"

#define OPEN_READ_FLAGS (O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)

/* --- the per-operation context --- */

static int stat_fs_and_home(FilesOp *op) {
        _cleanup_close_ int home_fd = -EBADF;

        if (fstat(op->fs_fd, &op->fs_st) < 0)
                return -errno;
        home_fd = openat(op->fs_fd, "home", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (home_fd < 0 || fstat(home_fd, &op->home_st) < 0)
                return -errno;
        return 0;
}

int files_op_begin(FilesOp *op, SandboxHandle *h, Error *e) {
        int r;

        if (!h || h->fs_fd < 0)
                return -EBADF;
        op->fs_fd = h->fs_fd;
        op->uid = (uid_t) h->record.uid;

        r = fsid_enter(op->uid, (gid_t) h->record.uid, &op->ids);
        if (r < 0) {
                error_fill_internal(e, r, "switching to the sandbox's identity");
                return r;
        }
        r = stat_fs_and_home(op);
        if (r < 0) {
                fsid_leave(&op->ids);
                error_fill_internal(e, r, "opening the sandbox's file tree");
                return r;
        }
        return 0;
}

void files_op_end(FilesOp *op) {
        fsid_leave(&op->ids);
}

bool files_op_is_outside(const FilesOp *op, const struct stat *st) {
        return (st->st_dev == op->fs_st.st_dev && st->st_ino == op->fs_st.st_ino) ||
               (st->st_dev == op->home_st.st_dev && st->st_ino == op->home_st.st_ino);
}

static int outside_error(Error *e) {
        return error_set(e, -EPERM, 400, "SANDBOX_PATH_OUTSIDE_WORKSPACE",
                         "path resolves outside /workspace, /home/sandbox, /cache and /envs");
}

int files_op_open(FilesOp *op, const char *canon, int flags, int *ret_fd, struct stat *ret_st, Error *e) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;

        fd = resolve_open(op->fs_fd, canon + 1, flags);
        if (fd < 0)
                return files_errno_error(e, fd, "opening", canon);
        if (fstat(fd, &st) < 0)
                return files_errno_error(e, -errno, "opening", canon);
        if (files_op_is_outside(op, &st))
                return outside_error(e);
        *ret_fd = TAKE_FD(fd);
        if (ret_st)
                *ret_st = st;
        return 0;
}

int files_op_open_parent(FilesOp *op, const char *canon, int *ret_dirfd, const char **ret_name, Error *e) {
        char parent[PATH_MAX];
        const char *slash = strrchr(canon, '/');
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        int r;

        if (!slash || slash == canon || files_path_is_root(canon))
                return -EINVAL;        /* callers handle the roots before */
        memcpy(parent, canon, (size_t) (slash - canon));
        parent[slash - canon] = '\0';

        r = files_op_open(op, parent, O_PATH | O_DIRECTORY, &fd, &st, e);
        if (r < 0)
                return r;
        *ret_dirfd = TAKE_FD(fd);
        *ret_name = slash + 1;
        return 0;
}

int files_mkdirat_mode(int dirfd, const char *name, mode_t mode) {
        _cleanup_close_ int fd = -EBADF;

        if (mkdirat(dirfd, name, mode) < 0)
                return -errno;
        /* Fix the mode against the umask; O_NOFOLLOW so a swapped-in link is not touched. */
        fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0)
                (void) fchmod(fd, mode);
        return 0;
}

int files_op_mkdir_parents(FilesOp *op, const char *canon, bool exists_conflict, Error *e) {
        char buf[PATH_MAX];
        _cleanup_close_ int prev = -EBADF;
        size_t len, i;
        int r;

        len = strlen(canon);
        if (len >= sizeof buf)
                return -ENAMETOOLONG;
        memcpy(buf, canon, len + 1);

        /* Start at the root the path is in: /workspace or /home/sandbox ... */
        i = startswith(buf, "/home/sandbox") ? strlen("/home/sandbox") : strcspn(buf + 1, "/") + 1;
        for (;;) {
                _cleanup_close_ int fd = -EBADF;
                struct stat st;
                char saved = buf[i];
                const char *name;

                buf[i] = '\0';
                fd = resolve_open(op->fs_fd, buf + 1, O_PATH | O_DIRECTORY);
                if (fd == -ENOENT && prev >= 0) {
                        name = strrchr(buf, '/') + 1;
                        r = files_mkdirat_mode(prev, name, 0755);
                        if (r < 0 && r != -EEXIST) {
                                buf[i] = saved;
                                return files_errno_error(e, r, "creating a parent of", canon);
                        }
                        fd = resolve_open(op->fs_fd, buf + 1, O_PATH | O_DIRECTORY);
                }
                buf[i] = saved;
                if (fd == -ENOTDIR && saved == '\0' && exists_conflict)
                        return error_set(e, -EEXIST, 409, "SANDBOX_FILE_EXISTS",
                                         "the path exists and is not a directory");
                if (fd == -ENOTDIR)
                        return error_set(e, fd, 400, "SANDBOX_NOT_A_DIRECTORY",
                                         "a parent on the path exists and is not a directory");
                if (fd < 0)
                        return files_errno_error(e, fd, "creating the parents of", canon);
                if (fstat(fd, &st) < 0)
                        return files_errno_error(e, -errno, "creating the parents of", canon);
                if (files_op_is_outside(op, &st))
                        return outside_error(e);
                safe_close(prev);
                prev = TAKE_FD(fd);
                if (saved == '\0')
                        return 0;
                i++;
                i += strcspn(buf + i, "/");
        }
}

const char *files_path_for_message(const char *canon, char *buf, size_t bufsz) {
        size_t full = strlen(canon), n = full;
        unsigned backoff = 0;

        if (bufsz < 8)
                return "(path)";
        n = MIN(n, (size_t) 200);
        n = MIN(n, bufsz - 4);
        /* Back off (at most 3 bytes) to a UTF-8 sequence boundary. */
        while (!utf8_is_valid(canon, n)) {
                if (n == 0 || ++backoff > 3)
                        return "(path)";
                n--;
        }
        for (size_t k = 0; k < n; k++)
                if ((unsigned char) canon[k] < 0x20 || canon[k] == 0x7f)
                        return "(path)";
        memcpy(buf, canon, n);
        if (n < strlen(canon))
                memcpy(buf + n, "...", 4);
        else
                buf[n] = '\0';
        return buf;
}

int files_errno_error(Error *e, int r, const char *what, const char *canon) {
        char pbuf[FILES_MSG_PATH_MAX];
        const char *p = canon ? files_path_for_message(canon, pbuf, sizeof pbuf) : "(path)";

        switch (-r) {
        case ENOENT:
                return error_set(e, r, 404, "SANDBOX_FILE_NOT_FOUND", "%s %s: no such file or directory", what, p);
        case ELOOP:
                return error_set(e, r, 404, "SANDBOX_FILE_NOT_FOUND", "%s %s: too many levels of symbolic links",
                                 what, p);
        case ENAMETOOLONG:
                return error_set(e, r, 404, "SANDBOX_FILE_NOT_FOUND", "%s %s: name too long after symbolic links",
                                 what, p);
        case ENOTDIR:
                return error_set(e, r, 400, "SANDBOX_NOT_A_DIRECTORY", "%s %s: a component is not a directory",
                                 what, p);
        case EISDIR:
                return error_set(e, r, 400, "SANDBOX_NOT_A_REGULAR_FILE", "%s %s: is a directory", what, p);
        case EACCES:
        case EPERM:
        case EROFS:
                return error_set(e, r, 403, "SANDBOX_PERMISSION_DENIED", "%s %s: permission denied", what, p);
        case EEXIST:
                return error_set(e, r, 409, "SANDBOX_FILE_EXISTS", "%s %s: already exists", what, p);
        case ENOTEMPTY:
                return error_set(e, r, 409, "SANDBOX_DIRECTORY_NOT_EMPTY", "%s %s: directory not empty", what, p);
        case EFBIG:
                return error_set(e, r, 413, "SANDBOX_FILE_TOO_LARGE", "%s %s: file too large", what, p);
        case ENXIO:
        case ENODEV:
                return error_set(e, r, 400, "SANDBOX_NOT_A_REGULAR_FILE", "%s %s: not a regular file", what, p);
        default:
                error_fill_internal(e, r, what);
                return r;
        }
}

json_t *files_entry_json(const char *name, size_t name_len, const char *path, const struct stat *st) {
        char ts[TIMESTAMP_MAX], mode[8];
        const char *type;
        usec_t mtime = 0;

        if (S_ISREG(st->st_mode))
                type = "file";
        else if (S_ISDIR(st->st_mode))
                type = "directory";
        else if (S_ISLNK(st->st_mode))
                type = "symlink";
        else
                type = "other";
        if (st->st_mtim.tv_sec > 0)
                mtime = (usec_t) st->st_mtim.tv_sec * USEC_PER_SEC + (usec_t) st->st_mtim.tv_nsec / NSEC_PER_USEC;
        if (format_timestamp(ts, sizeof ts, mtime) < 0)
                (void) strscpy(ts, sizeof ts, "1970-01-01T00:00:00.000000Z");
        (void) bsprintf(mode, sizeof mode, "%04o", (unsigned) (st->st_mode & 07777));

        return json_pack("{s:o?, s:o?, s:s, s:I, s:s, s:s}",
                         "name", json_string_lossy(name, name_len),
                         "path", json_string_lossy(path, strlen(path)),
                         "type", type,
                         "size_bytes", (json_int_t) st->st_size,
                         "modified_at", ts,
                         "mode", mode);
}

/* --- read --- */

static int open_regular(FilesOp *op, const char *canon, int *ret_fd, struct stat *ret_st, Error *e) {
        _cleanup_close_ int pfd = -EBADF, fd = -EBADF;
        struct stat st;
        int r;

        /* Look before opening: an O_PATH open has no side effects on a FIFO or device. */
        r = files_op_open(op, canon, O_PATH, &pfd, &st, e);
        if (r < 0)
                return r;
        if (S_ISDIR(st.st_mode))
                return error_set(e, -EISDIR, 400, "SANDBOX_NOT_A_REGULAR_FILE", "path is a directory");
        if (!S_ISREG(st.st_mode))
                return error_set(e, -EBADFD, 400, "SANDBOX_NOT_A_REGULAR_FILE",
                                 "path is not a regular file (FIFO, socket or device)");

        /* O_NONBLOCK: if a FIFO was swapped in meanwhile, opening it does not block. */
        r = files_op_open(op, canon, OPEN_READ_FLAGS, &fd, &st, e);
        if (r < 0)
                return r;
        if (!S_ISREG(st.st_mode))
                return error_set(e, -EBADFD, 400, "SANDBOX_NOT_A_REGULAR_FILE", "path is not a regular file");
        *ret_fd = TAKE_FD(fd);
        *ret_st = st;
        return 0;
}

int files_read(SandboxHandle *h, const char *path, uint64_t max, char **ret_data, size_t *ret_size, Error *e) {
        _cleanup_(files_op_end) FilesOp op = FILES_OP_INIT;
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *buf = NULL;
        char canon[PATH_MAX];
        struct stat st;
        size_t size = 0, cap;
        int r;

        r = files_normalize_path(path, strlen(path), canon, sizeof canon, e);
        if (r < 0)
                return r;
        r = files_op_begin(&op, h, e);
        if (r < 0)
                return r;
        r = open_regular(&op, canon, &fd, &st, e);
        if (r < 0)
                return r;
        if ((uint64_t) st.st_size > max)
                return error_set(e, -EFBIG, 413, "SANDBOX_FILE_TOO_LARGE", "file is larger than %" PRIu64 " bytes",
                                 max);

        /* The file may grow while we read: read at most MAX + 1 bytes and check. */
        cap = (size_t) st.st_size + 1;
        buf = malloc(cap + 1);
        if (!buf)
                return -ENOMEM;
        for (;;) {
                ssize_t n;

                if (size == cap) {
                        size_t ncap;
                        char *nbuf;

                        if ((uint64_t) size > max)
                                return error_set(e, -EFBIG, 413, "SANDBOX_FILE_TOO_LARGE",
                                                 "file is larger than %" PRIu64 " bytes", max);
                        ncap = (size_t) MIN((uint64_t) cap * 2, max + 1);
                        nbuf = realloc(buf, ncap + 1);
                        if (!nbuf)
                                return -ENOMEM;
                        buf = nbuf;
                        cap = ncap;
                }
                n = read(fd, buf + size, cap - size);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return files_errno_error(e, -errno, "reading", canon);
                }
                if (n == 0)
                        break;
                size += (size_t) n;
        }
        if ((uint64_t) size > max)
                return error_set(e, -EFBIG, 413, "SANDBOX_FILE_TOO_LARGE", "file is larger than %" PRIu64 " bytes",
                                 max);
        buf[size] = '\0';
        *ret_data = TAKE_PTR(buf);
        *ret_size = size;
        return 0;
}

int files_open_read(SandboxHandle *h, const char *path, int *ret_fd, uint64_t *ret_size, Error *e) {
        _cleanup_(files_op_end) FilesOp op = FILES_OP_INIT;
        _cleanup_close_ int fd = -EBADF;
        char canon[PATH_MAX];
        struct stat st;
        int r;

        r = files_normalize_path(path, strlen(path), canon, sizeof canon, e);
        if (r < 0)
                return r;
        r = files_op_begin(&op, h, e);
        if (r < 0)
                return r;
        r = open_regular(&op, canon, &fd, &st, e);
        if (r < 0)
                return r;
        *ret_fd = TAKE_FD(fd);
        *ret_size = (uint64_t) st.st_size;
        return 0;
}

/* --- write --- */

struct FileWrite {
        uid_t uid;
        int dir_fd;                        /* O_PATH on the target's directory */
        int fd;                            /* the temp file, written by the caller */
        bool anonymous;                    /* O_TMPFILE: gets a name only at commit */
        char tmp_name[64];
        char name[NAME_MAX + 1];
        char canon[PATH_MAX];
};

#define IN_SET_TMPFILE_UNSUPPORTED(err) ((err) == EOPNOTSUPP || (err) == EISDIR || (err) == EINVAL)

/* Gives an O_TMPFILE file a temporary name in its directory. linkat() through /proc/self/fd
 * needs no capability, unlike AT_EMPTY_PATH (CAP_DAC_READ_SEARCH). */
static int write_link_anonymous(FileWrite *w) {
        char proc[64], hex[17];
        int r;

        r = bsprintf(proc, sizeof proc, "/proc/self/fd/%d", w->fd);
        if (r < 0)
                return r;
        for (unsigned attempt = 0;; attempt++) {
                r = random_hex(hex, sizeof hex, 8);
                if (r < 0)
                        return r;
                (void) bsprintf(w->tmp_name, sizeof w->tmp_name, ".sandloom-tmp-%s", hex);
                if (linkat(AT_FDCWD, proc, w->dir_fd, w->tmp_name, AT_SYMLINK_FOLLOW) >= 0)
                        break;
                if (errno != EEXIST || attempt >= 8)
                        return -errno;
        }
        w->anonymous = false;
        return 0;
}

static void file_write_free(FileWrite *w) {
        if (!w)
                return;
        safe_close(w->fd);
        safe_close(w->dir_fd);
        free(w);
}

int files_write_begin(SandboxHandle *h, const char *path, bool make_parents, FileWrite **ret, int *ret_fd,
                      Error *e) {
        _cleanup_(files_op_end) FilesOp op = FILES_OP_INIT;
        _cleanup_close_ int dir_fd = -EBADF, fd = -EBADF;
        _cleanup_free_ FileWrite *w = NULL;
        char canon[PATH_MAX], hex[17];
        const char *name;
        mode_t mode = 0644;
        struct stat st;
        int r;

        r = files_normalize_path(path, strlen(path), canon, sizeof canon, e);
        if (r < 0)
                return r;
        if (files_path_is_root(canon))
                return error_set(e, -EISDIR, 400, "SANDBOX_NOT_A_REGULAR_FILE", "path is a directory");
        r = files_op_begin(&op, h, e);
        if (r < 0)
                return r;

        if (make_parents) {
                char parent[PATH_MAX];
                size_t plen = (size_t) (strrchr(canon, '/') - canon);

                memcpy(parent, canon, plen);
                parent[plen] = '\0';
                r = files_op_mkdir_parents(&op, parent, false, e);
                if (r < 0)
                        return r;
        }
        r = files_op_open_parent(&op, canon, &dir_fd, &name, e);
        if (r < 0)
                return r;

        if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) >= 0) {
                if (S_ISDIR(st.st_mode))
                        return error_set(e, -EISDIR, 400, "SANDBOX_NOT_A_REGULAR_FILE", "path is a directory");
                if (S_ISREG(st.st_mode))
                        mode = st.st_mode & 0777;
        } else if (errno != ENOENT)
                return files_errno_error(e, -errno, "writing", canon);

        w = calloc(1, sizeof *w);
        if (!w)
                return -ENOMEM;
        w->fd = w->dir_fd = -EBADF;
        /* An unnamed file first: a crash mid-upload then leaves nothing behind in the sandbox.
         * Filesystems without O_TMPFILE get a named temp file instead. */
        fd = openat(dir_fd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, mode);
        if (fd >= 0)
                w->anonymous = true;
        else if (!IN_SET_TMPFILE_UNSUPPORTED(errno))
                return files_errno_error(e, -errno, "writing", canon);
        for (unsigned attempt = 0; fd < 0; attempt++) {
                r = random_hex(hex, sizeof hex, 8);
                if (r < 0)
                        return r;
                (void) bsprintf(w->tmp_name, sizeof w->tmp_name, ".sandloom-tmp-%s", hex);
                fd = openat(dir_fd, w->tmp_name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
                if (fd >= 0)
                        break;
                if (errno != EEXIST || attempt >= 8)
                        return files_errno_error(e, -errno, "writing", canon);
        }
        /* Against the daemon's umask; the file is ours (created under the fsuid). */
        (void) fchmod(fd, mode);

        w->uid = op.uid;
        (void) strscpy(w->name, sizeof w->name, name);
        (void) strscpy(w->canon, sizeof w->canon, canon);
        w->dir_fd = TAKE_FD(dir_fd);
        w->fd = TAKE_FD(fd);
        *ret_fd = w->fd;
        *ret = TAKE_PTR(w);
        return 0;
}

static int write_commit_as_sandbox(FileWrite *w, Error *e) {
        _cleanup_(fsid_leave) FsIdSaved ids = FSID_SAVED_INIT;
        _cleanup_close_ int dfd = -EBADF;
        struct stat st;
        int r;

        /* Commit may run on another thread than begin: switch identity here too. */
        r = fsid_enter(w->uid, (gid_t) w->uid, &ids);
        if (r < 0) {
                error_fill_internal(e, r, "switching to the sandbox's identity");
                return r;
        }
        if (fsync(w->fd) < 0)
                return files_errno_error(e, -errno, "writing", w->canon);
        if (fstatat(w->dir_fd, w->name, &st, AT_SYMLINK_NOFOLLOW) >= 0 && S_ISDIR(st.st_mode))
                return error_set(e, -EISDIR, 400, "SANDBOX_NOT_A_REGULAR_FILE", "path is a directory");
        if (w->anonymous) {
                r = write_link_anonymous(w);
                if (r < 0)
                        return files_errno_error(e, r, "writing", w->canon);
        }
        if (renameat(w->dir_fd, w->tmp_name, w->dir_fd, w->name) < 0)
                return files_errno_error(e, -errno, "writing", w->canon);
        dfd = openat(w->dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0)
                (void) fsync(dfd);
        return 0;
}

int files_write_commit(FileWrite *w, Error *e) {
        int r;

        if (!w)
                return -EINVAL;
        r = write_commit_as_sandbox(w, e);
        if (r < 0) {
                files_write_abort(w);
                return r;
        }
        file_write_free(w);
        return 0;
}

void files_write_abort(FileWrite *w) {
        _cleanup_(fsid_leave) FsIdSaved ids = FSID_SAVED_INIT;

        if (!w)
                return;
        /* Best effort under the sandbox's identity; the temp name is ours either way. */
        if (!w->anonymous) {
                (void) fsid_enter(w->uid, (gid_t) w->uid, &ids);
                (void) unlinkat(w->dir_fd, w->tmp_name, 0);
        }
        file_write_free(w);
}

int files_write(SandboxHandle *h, const char *path, const void *data, size_t size, bool make_parents, Error *e) {
        FileWrite *w = NULL;
        int fd = -EBADF, r;

        r = files_write_begin(h, path, make_parents, &w, &fd, e);
        if (r < 0)
                return r;
        r = loop_write(fd, data, size);
        if (r < 0) {
                files_write_abort(w);
                return files_errno_error(e, r, "writing", path);
        }
        return files_write_commit(w, e);
}

/* --- stat, mkdir, move --- */

int files_stat(SandboxHandle *h, const char *path, json_t **ret, Error *e) {
        _cleanup_(files_op_end) FilesOp op = FILES_OP_INIT;
        _cleanup_close_ int fd = -EBADF;
        char canon[PATH_MAX];
        const char *name;
        struct stat st;
        json_t *j;
        int r;

        r = files_normalize_path(path, strlen(path), canon, sizeof canon, e);
        if (r < 0)
                return r;
        r = files_op_begin(&op, h, e);
        if (r < 0)
                return r;
        /* O_PATH|O_NOFOLLOW: a final symlink is reported, not followed. */
        r = files_op_open(&op, canon, O_PATH | O_NOFOLLOW, &fd, &st, e);
        if (r < 0)
                return r;
        name = files_path_basename(canon);
        j = files_entry_json(name, strlen(name), canon, &st);
        if (!j)
                return -ENOMEM;
        *ret = j;
        return 0;
}

int files_mkdir(SandboxHandle *h, const char *path, bool parents, Error *e) {
        _cleanup_(files_op_end) FilesOp op = FILES_OP_INIT;
        _cleanup_close_ int dir_fd = -EBADF;
        char canon[PATH_MAX];
        const char *name;
        int r;

        r = files_normalize_path(path, strlen(path), canon, sizeof canon, e);
        if (r < 0)
                return r;
        if (files_path_is_root(canon)) {
                if (parents)
                        return 0;
                return error_set(e, -EEXIST, 409, "SANDBOX_FILE_EXISTS", "%s already exists", canon);
        }
        r = files_op_begin(&op, h, e);
        if (r < 0)
                return r;
        if (parents)
                return files_op_mkdir_parents(&op, canon, true, e);

        r = files_op_open_parent(&op, canon, &dir_fd, &name, e);
        if (r < 0)
                return r;
        r = files_mkdirat_mode(dir_fd, name, 0755);
        if (r < 0)
                return files_errno_error(e, r, "creating", canon);
        return 0;
}

int files_move(SandboxHandle *h, const char *source, const char *destination, bool overwrite, Error *e) {
        _cleanup_(files_op_end) FilesOp op = FILES_OP_INIT;
        _cleanup_close_ int sdir = -EBADF, ddir = -EBADF;
        char src[PATH_MAX], dst[PATH_MAX];
        const char *sname, *dname;
        struct stat st;
        size_t slen;
        int r;

        r = files_normalize_path(source, strlen(source), src, sizeof src, e);
        if (r < 0)
                return r;
        r = files_normalize_path(destination, strlen(destination), dst, sizeof dst, e);
        if (r < 0)
                return r;
        if (files_path_is_root(src) || files_path_is_root(dst))
                return error_set(e, -EBUSY, 400, "SANDBOX_PATH_IS_ROOT", "a root directory cannot be moved or replaced");
        slen = strlen(src);
        if (strneq(dst, src, slen) && dst[slen] == '/')
                return error_set(e, -EINVAL, 422, "SANDBOX_INVALID_REQUEST", "cannot move a directory into itself");

        r = files_op_begin(&op, h, e);
        if (r < 0)
                return r;
        r = files_op_open_parent(&op, src, &sdir, &sname, e);
        if (r < 0)
                return r;
        r = files_op_open_parent(&op, dst, &ddir, &dname, e);
        if (r < 0)
                return r;
        if (fstatat(sdir, sname, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return files_errno_error(e, -errno, "moving", src);
        if (streq(src, dst))
                return 0;

        if (overwrite)
                r = renameat(sdir, sname, ddir, dname) < 0 ? -errno : 0;
        else
                r = renameat2(sdir, sname, ddir, dname, RENAME_NOREPLACE) < 0 ? -errno : 0;
        if (r == -EINVAL)
                return error_set(e, r, 422, "SANDBOX_INVALID_REQUEST", "cannot move a directory into itself");
        if (r == -EEXIST && !overwrite)
                return error_set(e, r, 409, "SANDBOX_FILE_EXISTS", "the destination already exists");
        if (r == -ENOTDIR || r == -EISDIR)
                return error_set(e, r, 409, "SANDBOX_FILE_EXISTS",
                                 "the destination exists and is of another type (file vs directory)");
        if (r < 0)
                return files_errno_error(e, r, "moving", src);
        return 0;
}
