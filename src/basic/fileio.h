/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>
#include <sys/types.h>

/* Reads a whole small file (at most MAX bytes) relative to DIRFD. NUL-terminates. */
int read_full_file_at(int dirfd, const char *path, size_t max, char **ret, size_t *ret_size);

/* Writes DATA to PATH (relative to DIRFD) atomically: temp file, fsync, rename, fsync dir. */
int write_file_atomic_at(int dirfd, const char *path, const void *data, size_t size, mode_t mode);

/* One read() of the small file NAME (relative to DIRFD, a final symlink not followed) into BUF,
 * at most SIZE - 1 bytes, NUL-terminated: for kernel attribute files (cgroup, /proc), which
 * answer a read whole. */
int read_attr_at(int dirfd, const char *name, char *buf, size_t size);

/* Full-length write/read loops over EINTR and short counts. */
int loop_write(int fd, const void *buf, size_t n);
ssize_t loop_read(int fd, void *buf, size_t n);
