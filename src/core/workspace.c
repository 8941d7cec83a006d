/* SPDX-License-Identifier: MIT */
#include "workspace.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macros.h"
#include "random-util.h"
#include "string-util.h"

/* How deep one walk goes before it hands the rest of a tree back to the trash top level.
 * Each level costs one fd and one DIR buffer. */
#define WALK_MAX_DEPTH 32u
/* Passes over the trash per workspace_empty_trash() call; each pass goes WALK_MAX_DEPTH
 * deeper into pathological trees. What is left is for the next call. */
#define TRASH_MAX_PASSES 64u
/* Re-reads of one directory while deleting it (entries created meanwhile by a process that
 * still has its cwd there, or readdir skipping entries under concurrent unlinks). */
#define DIR_MAX_PASSES 4u

#define OPAQUE_HEX_LEN 32
#define TRASH_NAME_MAX (OPAQUE_HEX_LEN + 1 + OPAQUE_HEX_LEN + 1)

static const char hexdigits[] = "0123456789abcdef";

bool workspace_id_is_valid(const char *name) {
        return name && str_in_charset(name, hexdigits, OPAQUE_HEX_LEN, OPAQUE_HEX_LEN);
}

static void closedirp(DIR **d) {
        if (*d)
                (void) closedir(*d);
}

/* mkdir NAME in PARENT_FD (EEXIST is fine), open it without following a symlink, and make
 * its owner and mode what they must be. Returns an O_RDONLY directory fd. */
static int ensure_dir(int parent_fd, const char *name, uid_t uid, gid_t gid, mode_t mode, int *ret_fd) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;

        if (mkdirat(parent_fd, name, mode) < 0 && errno != EEXIST)
                return -errno;
        fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno; /* a symlink gives ELOOP, anything else ENOTDIR */
        if (fstat(fd, &st) < 0)
                return -errno;
        if ((st.st_uid != uid || st.st_gid != gid) && fchown(fd, uid, gid) < 0)
                return -errno;
        /* fchown() clears set-id bits, so the mode is set after it. */
        if ((st.st_mode & 07777) != mode && fchmod(fd, mode) < 0)
                return -errno;
        if (ret_fd)
                *ret_fd = TAKE_FD(fd);
        return 0;
}

int workspace_create(int sandboxes_fd, const char *internal_id, uid_t uid, int *ret_fs_fd) {
        static const char *const uid_roots[] = { "workspace", "cache", "envs" };
        _cleanup_close_ int sandbox_fd = -EBADF, fs_fd = -EBADF, home_fd = -EBADF, path_fd = -EBADF;
        int r;

        if (!workspace_id_is_valid(internal_id) || uid == 0)
                return -EINVAL;

        r = ensure_dir(sandboxes_fd, internal_id, 0, 0, 0700, &sandbox_fd);
        if (r < 0)
                return r;
        r = ensure_dir(sandbox_fd, "fs", 0, 0, 0755, &fs_fd);
        if (r < 0)
                return r;
        for (size_t i = 0; i < ELEMENTSOF(uid_roots); i++) {
                r = ensure_dir(fs_fd, uid_roots[i], uid, (gid_t) uid, 0700, NULL);
                if (r < 0)
                        return r;
        }
        r = ensure_dir(fs_fd, "home", 0, 0, 0755, &home_fd);
        if (r < 0)
                return r;
        r = ensure_dir(home_fd, "sandbox", uid, (gid_t) uid, 0700, NULL);
        if (r < 0)
                return r;

        if (ret_fs_fd) {
                path_fd = openat(sandbox_fd, "fs", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (path_fd < 0)
                        return -errno;
                *ret_fs_fd = TAKE_FD(path_fd);
        }
        return 0;
}

int workspace_open_fs(int sandboxes_fd, const char *internal_id, int *ret_fd) {
        _cleanup_close_ int sandbox_fd = -EBADF;
        int fd;

        if (!workspace_id_is_valid(internal_id))
                return -EINVAL;
        sandbox_fd = openat(sandboxes_fd, internal_id, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sandbox_fd < 0)
                return -errno;
        fd = openat(sandbox_fd, "fs", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        *ret_fd = fd;
        return 0;
}

/* Renames FROM (in FROM_FD) into TRASH_FD under NAME, or NAME.<random> if NAME is taken
 * (never replacing anything there). */
static int rename_into_trash(int from_fd, const char *from, int trash_fd, const char *name) {
        char alt[NAME_MAX + 1], suffix[17];
        int r;

        if (renameat2(from_fd, from, trash_fd, name, RENAME_NOREPLACE) >= 0)
                return 0;
        if (errno != EEXIST)
                return -errno;
        for (int attempt = 0; attempt < 8; attempt++) {
                r = random_hex(suffix, sizeof suffix, 8);
                if (r < 0)
                        return r;
                r = bsprintf(alt, sizeof alt, "%.200s.%s", name, suffix);
                if (r < 0)
                        return r;
                if (renameat2(from_fd, from, trash_fd, alt, RENAME_NOREPLACE) >= 0)
                        return 0;
                if (errno != EEXIST)
                        return -errno;
        }
        return -EEXIST;
}

int workspace_move_to_trash(int sandboxes_fd, int trash_fd, const char *internal_id, const char *lifecycle_id) {
        char name[TRASH_NAME_MAX];
        int r;

        if (!workspace_id_is_valid(internal_id) || !workspace_id_is_valid(lifecycle_id))
                return -EINVAL;
        r = bsprintf(name, sizeof name, "%s.%s", internal_id, lifecycle_id);
        if (r < 0)
                return r;
        r = rename_into_trash(sandboxes_fd, internal_id, trash_fd, name);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        return 1;
}

static int delete_entry(int trash_fd, int dir_fd, const char *name, unsigned char d_type, unsigned depth);

/* Deletes everything inside the directory DIR_FD (which stays open and is not closed). */
static int delete_children(int trash_fd, int dir_fd, unsigned depth) {
        _cleanup_(closedirp) DIR *d = NULL;
        int fd, r = 0;

        fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        d = fdopendir(fd);
        if (!d) {
                r = -errno;
                (void) close(fd);
                return r;
        }

        for (unsigned pass = 0; pass < DIR_MAX_PASSES; pass++) {
                struct dirent *de;
                unsigned seen = 0;

                rewinddir(d);
                r = 0;
                errno = 0;
                while ((de = readdir(d))) {
                        int k;

                        if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                                continue;
                        seen++;
                        k = delete_entry(trash_fd, dirfd(d), de->d_name, de->d_type, depth);
                        if (k < 0 && k != -ENOENT && r == 0)
                                r = k;
                        errno = 0;
                }
                if (errno != 0 && r == 0)
                        r = -errno;
                if (seen == 0)
                        return 0;
        }
        return r < 0 ? r : -ENOTEMPTY;
}

static int move_deep_dir_aside(int trash_fd, int dir_fd, const char *name) {
        char deep[32], suffix[17];
        int r;

        r = random_hex(suffix, sizeof suffix, 8);
        if (r < 0)
                return r;
        r = bsprintf(deep, sizeof deep, "deep.%s", suffix);
        if (r < 0)
                return r;
        return rename_into_trash(dir_fd, name, trash_fd, deep);
}

static int delete_entry(int trash_fd, int dir_fd, const char *name, unsigned char d_type, unsigned depth) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        int r;

        if (d_type == DT_UNKNOWN) {
                if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        return -errno;
                d_type = S_ISDIR(st.st_mode) ? DT_DIR : DT_REG;
        }
        if (d_type != DT_DIR) {
                /* Files, symlinks (the link itself), FIFOs, sockets, devices: never opened. */
                if (unlinkat(dir_fd, name, 0) >= 0)
                        return 0;
                if (errno != EISDIR && errno != EPERM)
                        return -errno;
                /* It became a directory meanwhile: go on as one. */
        }

        if (depth + 1 >= WALK_MAX_DEPTH)
                return move_deep_dir_aside(trash_fd, dir_fd, name);

        fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) {
                if (errno == ENOTDIR || errno == ELOOP) {
                        /* Swapped for a symlink or a file since readdir: remove the link itself. */
                        if (unlinkat(dir_fd, name, 0) < 0)
                                return -errno;
                        return 0;
                }
                return -errno;
        }
        r = delete_children(trash_fd, fd, depth + 1);
        if (unlinkat(dir_fd, name, AT_REMOVEDIR) < 0) {
                if (errno == ENOENT)
                        return r;
                return r < 0 ? r : -errno;
        }
        return r;
}

int workspace_delete_tree(int trash_fd, int dir_fd, const char *name) {
        if (!name || isempty(name) || strchr(name, '/') || streq(name, ".") || streq(name, ".."))
                return -EINVAL;
        return delete_entry(trash_fd, dir_fd, name, DT_UNKNOWN, 0);
}

int workspace_empty_trash(int trash_fd) {
        _cleanup_(closedirp) DIR *d = NULL;
        int fd, first_error = 0, removed = 0;

        fd = openat(trash_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        d = fdopendir(fd);
        if (!d) {
                int r = -errno;
                (void) close(fd);
                return r;
        }

        for (unsigned pass = 0; pass < TRASH_MAX_PASSES; pass++) {
                struct dirent *de;
                unsigned seen = 0;

                first_error = 0;
                rewinddir(d);
                while ((de = readdir(d))) {
                        int r;

                        if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                                continue;
                        seen++;
                        r = delete_entry(trash_fd, trash_fd, de->d_name, de->d_type, 0);
                        if (r >= 0)
                                removed++;
                        else if (r != -ENOENT && first_error == 0)
                                first_error = r;
                }
                if (seen == 0 || first_error < 0)
                        break;
        }
        return first_error < 0 ? first_error : removed;
}

static void mark_owner(const struct stat *st, const uid_t *uids, size_t n, bool *found) {
        for (size_t i = 0; i < n; i++)
                if (st->st_uid == uids[i] || st->st_gid == (gid_t) uids[i])
                        found[i] = true;
}

static int scan_children(int dir_fd, unsigned depth, const uid_t *uids, size_t n, bool *found) {
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        int fd, r = 0;

        fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        d = fdopendir(fd);
        if (!d) {
                r = -errno;
                (void) close(fd);
                return r;
        }
        while ((de = readdir(d))) {
                _cleanup_close_ int sub = -EBADF;
                struct stat st;

                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        if (errno == ENOENT)
                                continue;
                        return -errno;
                }
                mark_owner(&st, uids, n, found);
                if (!S_ISDIR(st.st_mode))
                        continue;
                if (depth + 1 >= WALK_MAX_DEPTH)
                        return -ELOOP; /* too deep to tell: the caller must assume the worst */
                sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
                if (sub < 0) {
                        if (errno == ENOENT)
                                continue;
                        return -errno;
                }
                r = scan_children(sub, depth + 1, uids, n, found);
                if (r < 0)
                        return r;
        }
        return 0;
}

int workspace_trash_owned_by(int trash_fd, const uid_t *uids, size_t n, bool *ret_found) {
        _cleanup_free_ bool *found = NULL;
        int r;

        found = calloc(n ? n : 1, sizeof *found);
        if (!found)
                return -ENOMEM;
        r = scan_children(trash_fd, 0, uids, n, found);
        if (r < 0)
                return r;
        memcpy(ret_found, found, n * sizeof *found);
        return 0;
}
