/* SPDX-License-Identifier: MIT */
/* Directory <-> tar for the files API, through libarchive.
 *
 * Create walks the directory fd-relative (O_NOFOLLOW at every step) and stores regular files,
 * directories and symlinks (as links, never followed).
 *
 * Extract never uses archive_write_disk: every entry is created by us, fd-relative, with
 * O_NOFOLLOW and O_EXCL, into a staging directory made inside the target directory, under
 * the sandbox's identity. Absolute names, "..", devices, FIFOs, sockets, and links whose
 * target leaves the extraction directory are refused; entries and bytes (declared and
 * written) are bounded. Only a complete, accepted archive is moved into place: staged
 * top-level entries are merged into the target (directories merged, files replaced); any
 * failure removes the staging directory. The staging directory lives inside the target
 * rather than beside it because the target may be a root, whose parent the sandbox uid
 * cannot write. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files-internal.h"
#include "files.h"
#include "random-util.h"
#include "string-util.h"

static void archive_write_freep(struct archive **a) {
        if (*a)
                (void) archive_write_free(*a);
}

static void archive_read_freep(struct archive **a) {
        if (*a)
                (void) archive_read_free(*a);
}

static void archive_entry_freep(struct archive_entry **e) {
        if (*e)
                archive_entry_free(*e);
}

static int too_large(Error *e, const char *what, uint64_t limit) {
        return error_set(e, -EFBIG, 413, "SANDBOX_ARCHIVE_TOO_LARGE", "archive has more than %" PRIu64 " %s", limit,
                         what);
}

static int invalid_archive(Error *e, const char *msg) {
        return error_set(e, -EBADMSG, 400, "SANDBOX_INVALID_ARCHIVE", "%s", msg);
}

/* ---------------------------------------------------------------- create --- */

typedef struct Packer {
        struct archive *a;
        const ArchiveLimits *limits;
        uint64_t entries, bytes;
        Error *e;
} Packer;

static int archive_write_failed(Packer *p) {
        int err = archive_errno(p->a);

        if (err > 0) {
                error_fill_internal(p->e, -err, "writing the archive");
                return -err;
        }
        error_fill_internal(p->e, -EIO, "writing the archive");
        return -EIO;
}

static int pack_header(Packer *p, const char *rel, const struct stat *st, const char *link_target) {
        _cleanup_(archive_entry_freep) struct archive_entry *ae = NULL;

        if (++p->entries > p->limits->max_entries)
                return too_large(p->e, "entries", p->limits->max_entries);
        ae = archive_entry_new();
        if (!ae)
                return -ENOMEM;
        archive_entry_set_pathname(ae, rel);
        archive_entry_set_mode(ae, st->st_mode);
        archive_entry_set_mtime(ae, st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
        archive_entry_set_uid(ae, 0);
        archive_entry_set_gid(ae, 0);
        if (S_ISREG(st->st_mode))
                archive_entry_set_size(ae, st->st_size);
        else
                archive_entry_set_size(ae, 0);
        if (link_target)
                archive_entry_set_symlink(ae, link_target);
        if (archive_write_header(p->a, ae) < ARCHIVE_WARN)
                return archive_write_failed(p);
        return 0;
}

static __attribute__((noinline)) int pack_file(Packer *p, int dirfd, const char *name, const char *rel) {
        _cleanup_close_ int fd = -EBADF;
        uint64_t left;
        struct stat st;
        char buf[65536];
        int r;

        fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT || errno == ELOOP ? 0 : -errno;        /* changed meanwhile */
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return 0;
        p->bytes += (uint64_t) st.st_size;
        if (p->bytes > p->limits->max_bytes)
                return too_large(p->e, "bytes", p->limits->max_bytes);
        r = pack_header(p, rel, &st, NULL);
        if (r < 0)
                return r;
        /* Exactly st_size bytes: if the file shrank meanwhile, libarchive pads the entry. */
        for (left = (uint64_t) st.st_size; left > 0;) {
                ssize_t n = read(fd, buf, (size_t) MIN(left, (uint64_t) sizeof buf));
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        break;
                if (archive_write_data(p->a, buf, (size_t) n) != n)
                        return archive_write_failed(p);
                left -= (uint64_t) n;
        }
        if (archive_write_finish_entry(p->a) < ARCHIVE_WARN)
                return archive_write_failed(p);
        return 0;
}

/* Not inlined: keeps the PATH_MAX buffer out of pack_dir()'s recursive frame. */
static __attribute__((noinline)) int pack_symlink(Packer *p, int dirfd, const char *name, const char *rel,
                                                  const struct stat *st) {
        char target[PATH_MAX];
        ssize_t n = readlinkat(dirfd, name, target, sizeof target - 1);

        if (n < 0)
                return 0;        /* gone meanwhile */
        target[n] = '\0';
        return pack_header(p, rel, st, target);
}

static int pack_dir(Packer *p, int dirfd, const char *prefix, unsigned levels_left) {
        _cleanup_(files_name_list_done) NameList l = { 0 };
        int r;

        r = files_read_names(dirfd, LIST_MAX_NAMES, LIST_MAX_NAME_BYTES, &l);
        if (r == -E2BIG)
                return too_large(p->e, "entries", p->limits->max_entries);
        if (r < 0)
                return r;
        files_name_list_sort(&l);

        for (size_t i = 0; i < l.n; i++) {
                const char *name = l.names[i];
                _cleanup_free_ char *rel = NULL;
                struct stat st;

                if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        if (errno == ENOENT)
                                continue;
                        return -errno;
                }
                rel = isempty(prefix) ? strdup(name) : strprintf("%s/%s", prefix, name);
                if (!rel)
                        return -ENOMEM;

                if (S_ISREG(st.st_mode))
                        r = pack_file(p, dirfd, name, rel);
                else if (S_ISLNK(st.st_mode))
                        r = pack_symlink(p, dirfd, name, rel, &st);
                else if (S_ISDIR(st.st_mode)) {
                        _cleanup_close_ int fd = -EBADF;

                        if (levels_left == 0)
                                return too_large(p->e, "directory levels", FILES_MAX_DEPTH);
                        fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
                        if (fd < 0) {
                                if (errno == ENOENT || errno == ELOOP || errno == ENOTDIR)
                                        continue;        /* replaced meanwhile: skip, never follow */
                                return -errno;
                        }
                        r = pack_header(p, rel, &st, NULL);
                        if (r >= 0)
                                r = pack_dir(p, fd, rel, levels_left - 1);
                } else
                        r = 0;        /* FIFOs, sockets, devices are not archived */
                if (r < 0)
                        return r;
        }
        return 0;
}

static int open_spool(int tmp_fd) {
        char name[64], hex[17];
        int fd, r;

        fd = openat(tmp_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR))
                return fd >= 0 ? fd : -errno;
        /* No O_TMPFILE on this filesystem: a named file, unlinked at once. */
        r = random_hex(hex, sizeof hex, 8);
        if (r < 0)
                return r;
        (void) bsprintf(name, sizeof name, "archive-%s", hex);
        fd = openat(tmp_fd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        (void) unlinkat(tmp_fd, name, 0);
        return fd;
}

static int pack_tree(FilesOp *op, const char *canon, int spool, const ArchiveLimits *limits, Error *e) {
        _cleanup_(archive_write_freep) struct archive *a = NULL;
        _cleanup_close_ int pfd = -EBADF, dfd = -EBADF;
        Packer p = { .limits = limits, .e = e };
        struct stat st;
        int r;

        /* Follows a final symlink in-root, as `tar -C DIR` inside the sandbox would. */
        r = files_op_open(op, canon, O_PATH, &pfd, &st, e);
        if (r < 0)
                return r;
        if (!S_ISDIR(st.st_mode))
                return error_set(e, -ENOTDIR, 400, "SANDBOX_NOT_A_DIRECTORY", "path is not a directory");
        dfd = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return files_errno_error(e, -errno, "archiving", canon);

        a = archive_write_new();
        if (!a)
                return -ENOMEM;
        if (archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
            archive_write_open_fd(a, spool) != ARCHIVE_OK)
                return -EIO;
        p.a = a;
        r = pack_dir(&p, dfd, "", FILES_MAX_DEPTH);
        if (r < 0)
                return error_is_set(e) ? r : files_errno_error(e, r, "archiving", canon);
        if (archive_write_close(a) != ARCHIVE_OK)
                return archive_write_failed(&p);
        return 0;
}

int files_archive_create(SandboxHandle *h, int tmp_fd, const char *path, const ArchiveLimits *limits, int *ret_fd,
                         uint64_t *ret_size, Error *e) {
        _cleanup_close_ int spool = -EBADF;
        char canon[PATH_MAX];
        off_t size;
        int r;

        r = files_normalize_path(path, strlen(path), canon, sizeof canon, e);
        if (r < 0)
                return r;
        /* The spool is the daemon's (DATA/tmp), made before switching to the sandbox's identity. */
        spool = open_spool(tmp_fd);
        if (spool < 0) {
                error_fill_internal(e, spool, "creating the archive spool file");
                return spool;
        }
        {
                _cleanup_(files_op_end) FilesOp op = FILES_OP_INIT;

                r = files_op_begin(&op, h, e);
                if (r < 0)
                        return r;
                r = pack_tree(&op, canon, spool, limits, e);
                if (r < 0)
                        return r;
        }
        size = lseek(spool, 0, SEEK_END);
        if (size < 0 || lseek(spool, 0, SEEK_SET) < 0) {
                error_fill_internal(e, -errno, "sizing the archive");
                return -errno;
        }
        *ret_fd = TAKE_FD(spool);
        *ret_size = (uint64_t) size;
        return 0;
}

/* --------------------------------------------------------------- extract --- */

typedef struct DirMode {
        char *rel;
        mode_t mode;
        struct timespec mtime;
} DirMode;

typedef struct Unpacker {
        struct archive *a;
        const ArchiveLimits *limits;
        int stage_fd;
        uint64_t entries, declared, written;
        DirMode *dirs;
        size_t n_dirs;
        Error *e;
} Unpacker;

static void unpacker_done(Unpacker *u) {
        for (size_t i = 0; i < u->n_dirs; i++)
                free(u->dirs[i].rel);
        free(u->dirs);
}

/* Validates an archive member name and writes it cleaned ("./a//b" -> "a/b") into OUT.
 * Refuses absolute names and "..". An empty result means the extraction root itself. */
static int clean_member_name(const char *name, char *out, size_t outsz) {
        size_t len = 0;
        const char *p = name;

        if (!name)
                return -EINVAL;
        if (name[0] == '/')
                return -EPERM;
        if (strlen(name) >= PATH_MAX)
                return -ENAMETOOLONG;
        while (*p) {
                const char *q;
                size_t n;

                while (*p == '/')
                        p++;
                if (!*p)
                        break;
                q = strchrnul(p, '/');
                n = (size_t) (q - p);
                if (n > NAME_MAX)
                        return -ENAMETOOLONG;
                if (n == 2 && p[0] == '.' && p[1] == '.')
                        return -EPERM;
                if (!(n == 1 && p[0] == '.')) {
                        if (len + n + 2 > outsz)
                                return -ENAMETOOLONG;
                        if (len > 0)
                                out[len++] = '/';
                        memcpy(out + len, p, n);
                        len += n;
                }
                p = q;
        }
        out[len] = '\0';
        return 0;
}

/* Does a symlink at member REL with TARGET stay inside the extraction directory? */
static bool link_target_stays_inside(const char *rel, const char *target) {
        long depth = 0;
        const char *p;

        if (isempty(target) || target[0] == '/')
                return false;
        for (p = rel; *p; p++)        /* the link's own directory depth */
                if (*p == '/')
                        depth++;
        p = target;
        while (*p) {
                const char *q = strchrnul(p, '/');
                size_t n = (size_t) (q - p);

                if (n == 2 && p[0] == '.' && p[1] == '.') {
                        if (--depth < 0)
                                return false;
                } else if (n > 0 && !(n == 1 && p[0] == '.'))
                        depth++;
                p = *q ? q + 1 : q;
        }
        return true;
}

/* Opens the directory holding member REL inside the staging dir, creating missing
 * directories (0700 until the end); every step O_NOFOLLOW. Returns the dir fd and sets
 * *RET_NAME to REL's last component. */
static int open_member_parent(Unpacker *u, char *rel, bool create, const char **ret_name) {
        _cleanup_close_ int fd = -EBADF;
        char *p = rel, *slash;

        fd = openat(u->stage_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        while ((slash = strchr(p, '/'))) {
                int nfd;

                *slash = '\0';
                if (create) {
                        /* An implicit parent (no entry of its own) gets the usual 0755. */
                        int r = files_mkdirat_mode(fd, p, 0755);
                        if (r < 0 && r != -EEXIST) {
                                *slash = '/';
                                return r;
                        }
                }
                nfd = openat(fd, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                *slash = '/';
                if (nfd < 0)
                        return errno == ELOOP || errno == ENOTDIR ? -ENOTDIR : -errno;
                safe_close(fd);
                fd = nfd;
                p = slash + 1;
        }
        *ret_name = p;
        return TAKE_FD(fd);
}

/* Frees NAME in DIRFD for a new non-directory entry (a later entry replaces an earlier
 * one, as tar does); a directory there is a conflict. */
static int replace_nondir(int dirfd, const char *name) {
        struct stat st;

        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (S_ISDIR(st.st_mode))
                return -EISDIR;
        return unlinkat(dirfd, name, 0) < 0 ? -errno : 0;
}

static int unpack_data(Unpacker *u, int fd, int64_t size) {
        for (;;) {
                const void *buf;
                size_t n;
                la_int64_t off;
                int r = archive_read_data_block(u->a, &buf, &n, &off);

                if (r == ARCHIVE_EOF)
                        return 0;
                if (r < ARCHIVE_WARN)
                        return invalid_archive(u->e, "the archive is truncated or corrupt");
                if (off < 0 || (uint64_t) off + n > (uint64_t) MAX(size, 0))
                        return invalid_archive(u->e, "an entry holds more data than its header declares");
                u->written += n;
                if (u->written > u->limits->max_bytes)
                        return too_large(u->e, "bytes", u->limits->max_bytes);
                for (size_t done = 0; done < n;) {
                        ssize_t w = pwrite(fd, (const char *) buf + done, n - done, off + (off_t) done);
                        if (w < 0) {
                                if (errno == EINTR)
                                        continue;
                                return files_errno_error(u->e, -errno, "extracting", NULL);
                        }
                        done += (size_t) w;
                }
        }
}

static int unpack_file(Unpacker *u, struct archive_entry *ae, int dirfd, const char *name) {
        _cleanup_close_ int fd = -EBADF;
        int64_t size = archive_entry_size_is_set(ae) ? archive_entry_size(ae) : 0;
        struct timespec ts[2];
        int r;

        r = replace_nondir(dirfd, name);
        if (r < 0)
                return r == -EISDIR ? invalid_archive(u->e, "a file entry has the name of a directory") : r;
        fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        r = unpack_data(u, fd, size);
        if (r < 0)
                return r;
        if (size > 0 && ftruncate(fd, size) < 0)        /* a sparse tail */
                return -errno;
        (void) fchmod(fd, archive_entry_perm(ae) & 0777);
        ts[0] = (struct timespec) { .tv_nsec = UTIME_OMIT };
        ts[1] = (struct timespec) { .tv_sec = archive_entry_mtime(ae), .tv_nsec = archive_entry_mtime_nsec(ae) };
        (void) futimens(fd, ts);
        return 0;
}

static int unpack_hardlink(Unpacker *u, const char *target, int dirfd, const char *name) {
        _cleanup_close_ int sdir = -EBADF;
        char src[PATH_MAX];
        const char *sname;
        struct stat st;
        int r;

        r = clean_member_name(target, src, sizeof src);
        if (r < 0 || src[0] == '\0')
                return invalid_archive(u->e, "a hard link points outside the extraction directory");
        sdir = open_member_parent(u, src, false, &sname);
        if (sdir < 0)
                return invalid_archive(u->e, "a hard link points to an entry that is not in the archive");
        if (fstatat(sdir, sname, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
                return invalid_archive(u->e, "a hard link points to an entry that is not a file of the archive");
        r = replace_nondir(dirfd, name);
        if (r < 0)
                return r == -EISDIR ? invalid_archive(u->e, "a link entry has the name of a directory") : r;
        if (linkat(sdir, sname, dirfd, name, 0) < 0)
                return -errno;
        return 0;
}

static int unpack_entry(Unpacker *u, struct archive_entry *ae) {
        _cleanup_close_ int dirfd = -EBADF;
        char rel[PATH_MAX];
        const char *name, *hardlink = archive_entry_hardlink(ae);
        mode_t type = archive_entry_filetype(ae);
        int r;

        r = clean_member_name(archive_entry_pathname(ae), rel, sizeof rel);
        if (r == -EPERM)
                return invalid_archive(u->e, "an entry has an absolute name or a \"..\" component");
        if (r < 0)
                return invalid_archive(u->e, "an entry has an invalid name");
        if (rel[0] == '\0')
                return 0;        /* "./": the extraction directory itself */

        if (!hardlink && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK)
                return invalid_archive(u->e, "devices, FIFOs and sockets are not allowed in an archive");
        if (!hardlink && type == AE_IFREG && archive_entry_size_is_set(ae)) {
                int64_t size = archive_entry_size(ae);

                if (size < 0)
                        return invalid_archive(u->e, "an entry has a negative size");
                u->declared += (uint64_t) size;
                if (u->declared > u->limits->max_bytes)
                        return too_large(u->e, "bytes", u->limits->max_bytes);
        }
        if (type == AE_IFLNK && !hardlink && !link_target_stays_inside(rel, archive_entry_symlink(ae)))
                return invalid_archive(u->e, "a symbolic link points outside the extraction directory");

        dirfd = open_member_parent(u, rel, true, &name);
        if (dirfd == -ENOTDIR)
                return invalid_archive(u->e, "an entry goes through a symbolic link or a file");
        if (dirfd < 0)
                return dirfd;

        if (hardlink)
                return unpack_hardlink(u, hardlink, dirfd, name);
        switch (type) {
        case AE_IFREG:
                return unpack_file(u, ae, dirfd, name);
        case AE_IFLNK:
                r = replace_nondir(dirfd, name);
                if (r < 0)
                        return r == -EISDIR ? invalid_archive(u->e, "a link entry has the name of a directory") : r;
                return symlinkat(archive_entry_symlink(ae), dirfd, name) < 0 ? -errno : 0;
        case AE_IFDIR: {
                DirMode *nd;
                struct stat st;

                if (mkdirat(dirfd, name, 0700) < 0) {
                        if (errno != EEXIST)
                                return -errno;
                        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
                                return invalid_archive(u->e, "a directory entry has the name of another entry");
                }
                nd = reallocarray(u->dirs, u->n_dirs + 1, sizeof(DirMode));
                if (!nd)
                        return -ENOMEM;
                u->dirs = nd;
                nd[u->n_dirs] = (DirMode) {
                        .rel = strdup(rel),
                        .mode = archive_entry_perm(ae) & 0777,
                        .mtime = { .tv_sec = archive_entry_mtime(ae), .tv_nsec = archive_entry_mtime_nsec(ae) },
                };
                if (!nd[u->n_dirs].rel)
                        return -ENOMEM;
                u->n_dirs++;
                return 0;
        }
        default:
                return invalid_archive(u->e, "unsupported entry type");
        }
}

static int unpack_all(Unpacker *u, int tar_fd) {
        _cleanup_(archive_read_freep) struct archive *a = NULL;
        int r;

        a = archive_read_new();
        if (!a)
                return -ENOMEM;
        (void) archive_read_support_filter_gzip(a);
        (void) archive_read_support_filter_zstd(a);
        (void) archive_read_support_format_tar(a);
        (void) archive_read_support_format_empty(a);
        if (archive_read_open_fd(a, tar_fd, 65536) != ARCHIVE_OK)
                return invalid_archive(u->e, "the upload is not a tar archive (plain, gzip or zstd)");
        u->a = a;
        for (;;) {
                struct archive_entry *ae;

                r = archive_read_next_header(a, &ae);
                if (r == ARCHIVE_EOF)
                        break;
                if (r < ARCHIVE_WARN)
                        return invalid_archive(u->e, "the upload is not a readable tar archive");
                if (++u->entries > u->limits->max_entries)
                        return too_large(u->e, "entries", u->limits->max_entries);
                r = unpack_entry(u, ae);
                if (r < 0)
                        return r;
        }
        u->a = NULL;
        return 0;
}

/* Moves what is staged in SRC into DST: new names are renamed over, directories present on
 * both sides are merged, a file replaces a file. With DRY_RUN, only checks that no staged
 * entry meets an existing entry of the other kind (file vs directory), so a conflict is
 * found before anything moves. */
static int merge_staged(int src, int dst, bool dry_run, unsigned levels_left, Error *e) {
        _cleanup_(files_name_list_done) NameList l = { 0 };
        int r;

        r = files_read_names(src, LIST_MAX_NAMES, LIST_MAX_NAME_BYTES, &l);
        if (r < 0)
                return r;
        for (size_t i = 0; i < l.n; i++) {
                const char *name = l.names[i];
                struct stat sst, dst_st;

                if (fstatat(src, name, &sst, AT_SYMLINK_NOFOLLOW) < 0)
                        return -errno;
                if (fstatat(dst, name, &dst_st, AT_SYMLINK_NOFOLLOW) < 0) {
                        if (errno != ENOENT)
                                return -errno;
                        if (!dry_run && renameat2(src, name, dst, name, RENAME_NOREPLACE) < 0)
                                return -errno;
                        continue;
                }
                if (S_ISDIR(sst.st_mode) && S_ISDIR(dst_st.st_mode)) {
                        _cleanup_close_ int s = -EBADF, d = -EBADF;

                        if (levels_left == 0)
                                return too_large(e, "directory levels", FILES_MAX_DEPTH);
                        s = openat(src, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        d = openat(dst, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (s < 0 || d < 0)
                                return -errno;
                        r = merge_staged(s, d, dry_run, levels_left - 1, e);
                        if (r < 0)
                                return r;
                } else if (!S_ISDIR(sst.st_mode) && !S_ISDIR(dst_st.st_mode)) {
                        if (!dry_run && renameat(src, name, dst, name) < 0)
                                return -errno;
                } else
                        return error_set(e, -EEXIST, 409, "SANDBOX_FILE_EXISTS",
                                         "an archive entry and an existing entry differ in kind (file vs directory)");
        }
        return 0;
}

/* Applies the archived directory modes last: a read-only directory would otherwise stop
 * the extraction of its own contents. Best effort. */
static void apply_dir_modes(Unpacker *u, int target_fd) {
        for (size_t i = u->n_dirs; i > 0; i--) {
                DirMode *d = &u->dirs[i - 1];
                _cleanup_close_ int fd = -EBADF;
                char *p = d->rel, *slash;
                struct timespec ts[2];

                fd = openat(target_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                for (; fd >= 0; p = slash + 1) {
                        int nfd;

                        slash = strchr(p, '/');
                        if (slash)
                                *slash = '\0';
                        nfd = openat(fd, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (slash)
                                *slash = '/';
                        safe_close(fd);
                        fd = nfd;
                        if (!slash)
                                break;
                }
                if (fd < 0)
                        continue;
                (void) fchmod(fd, d->mode);
                ts[0] = (struct timespec) { .tv_nsec = UTIME_OMIT };
                ts[1] = d->mtime;
                (void) futimens(fd, ts);
        }
}

static int extract_staged(FilesOp *op, const char *canon, int tar_fd, const ArchiveLimits *limits,
                          uint64_t *ret_entries, Error *e) {
        _cleanup_(unpacker_done) Unpacker u = { .limits = limits, .stage_fd = -EBADF, .e = e };
        _cleanup_close_ int target = -EBADF, stage = -EBADF;
        char stage_name[64], hex[17];
        bool created = false;
        struct stat st;
        int r;

        Error first = ERROR_INIT;

        r = files_op_open(op, canon, O_PATH, &target, &st, &first);
        if (r == -ENOENT) {
                /* A missing target directory is created (with its parents). */
                r = files_op_mkdir_parents(op, canon, false, e);
                if (r < 0)
                        return r;
                created = true;
                r = files_op_open(op, canon, O_PATH, &target, &st, e);
                if (r < 0)
                        return r;
        } else if (r < 0) {
                if (e)
                        *e = first;
                return r;
        }
        if (!S_ISDIR(st.st_mode))
                return error_set(e, -ENOTDIR, 400, "SANDBOX_NOT_A_DIRECTORY", "path is not a directory");

        r = random_hex(hex, sizeof hex, 8);
        if (r < 0)
                return r;
        (void) bsprintf(stage_name, sizeof stage_name, ".sandloom-stage-%s", hex);
        if (mkdirat(target, stage_name, 0700) < 0)
                return files_errno_error(e, -errno, "extracting into", canon);
        stage = openat(target, stage_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (stage >= 0) {
                u.stage_fd = stage;
                r = unpack_all(&u, tar_fd);
                if (r >= 0)
                        r = merge_staged(stage, target, true, FILES_MAX_DEPTH, e);
                if (r >= 0)
                        r = merge_staged(stage, target, false, FILES_MAX_DEPTH, e);
        } else
                r = -errno;

        /* Whatever is left in the staging directory goes: everything on failure, the
         * emptied husks of merged directories on success. */
        (void) files_remove_tree_at(target, stage_name, FILES_MAX_DEPTH + 1);
        if (r < 0) {
                if (created) {
                        _cleanup_close_ int pfd = -EBADF;
                        const char *name;
                        Error ignore = ERROR_INIT;

                        if (files_op_open_parent(op, canon, &pfd, &name, &ignore) >= 0)
                                (void) unlinkat(pfd, name, AT_REMOVEDIR);
                }
                return error_is_set(e) ? r : files_errno_error(e, r, "extracting into", canon);
        }
        apply_dir_modes(&u, target);
        *ret_entries = u.entries;
        return 0;
}

int files_archive_extract(SandboxHandle *h, const char *path, int tar_fd, const ArchiveLimits *limits,
                          uint64_t *ret_entries, Error *e) {
        _cleanup_(files_op_end) FilesOp op = FILES_OP_INIT;
        char canon[PATH_MAX];
        int r;

        r = files_normalize_path(path, strlen(path), canon, sizeof canon, e);
        if (r < 0)
                return r;
        r = files_op_begin(&op, h, e);
        if (r < 0)
                return r;
        return extract_staged(&op, canon, tar_fd, limits, ret_entries, e);
}
