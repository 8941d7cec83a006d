/* SPDX-License-Identifier: MIT */
#include "fileio.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>

#include "macros.h"
#include "random-util.h"
#include "string-util.h"

int read_full_file_at(int dirfd, const char *path, size_t max, char **ret, size_t *ret_size) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *buf = NULL;
        ssize_t n;

        fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
        if (fd < 0)
                return -errno;
        buf = malloc(max + 1);
        if (!buf)
                return -ENOMEM;
        n = loop_read(fd, buf, max + 1);
        if (n < 0)
                return (int) n;
        if ((size_t) n > max)
                return -EFBIG;
        buf[n] = '\0';
        if (ret_size)
                *ret_size = (size_t) n;
        *ret = TAKE_PTR(buf);
        return 0;
}

int write_file_atomic_at(int dirfd, const char *path, const void *data, size_t size, mode_t mode) {
        char tmp[4096], suffix[17];
        _cleanup_close_ int fd = -EBADF;
        int r;

        r = random_hex(suffix, sizeof suffix, 8);
        if (r < 0)
                return r;
        r = bsprintf(tmp, sizeof tmp, "%s.tmp-%s", path, suffix);
        if (r < 0)
                return r;
        fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
        if (fd < 0)
                return -errno;
        r = loop_write(fd, data, size);
        if (r >= 0 && fchmod(fd, mode) < 0)
                r = -errno;
        if (r >= 0 && fsync(fd) < 0)
                r = -errno;
        if (r >= 0 && renameat(dirfd, tmp, dirfd, path) < 0)
                r = -errno;
        if (r < 0) {
                (void) unlinkat(dirfd, tmp, 0);
                return r;
        }
        if (dirfd != AT_FDCWD)
                (void) fsync(dirfd);
        return 0;
}

int loop_write(int fd, const void *buf, size_t n) {
        const char *p = buf;

        while (n > 0) {
                ssize_t k = write(fd, p, n);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        return -EIO;
                p += k;
                n -= (size_t) k;
        }
        return 0;
}

ssize_t loop_read(int fd, void *buf, size_t n) {
        char *p = buf;
        size_t done = 0;

        while (done < n) {
                ssize_t k = read(fd, p + done, n - done);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        break;
                done += (size_t) k;
        }
        return (ssize_t) done;
}

int read_attr_at(int dirfd, const char *name, char *buf, size_t size) {
        _cleanup_close_ int fd = -EBADF;
        ssize_t n;

        if (size == 0)
                return -EINVAL;
        fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return negative_errno();
        n = read(fd, buf, size - 1);
        if (n < 0)
                return negative_errno();
        buf[n] = '\0';
        return 0;
}
