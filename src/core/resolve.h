/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>

/* In-root path resolution: PATH is resolved as if ROOT_FD were "/" for the process doing
 * it. Absolute symlink targets start again at ROOT_FD, ".." never climbs above it, magic
 * links (/proc/self/fd/...) are refused. The kernel does it (openat2 with
 * RESOLVE_IN_ROOT|RESOLVE_NO_MAGICLINKS); where openat2 is missing (ENOSYS) a userspace
 * walk does the same: one component at a time with O_PATH|O_NOFOLLOW, symlinks expanded
 * by hand against the logical in-root path, at most 40 of them, ".." re-walked from the
 * root rather than opened, so a directory moved meanwhile cannot lead above the root.
 *
 * FLAGS are open(2) flags for the final object (O_CLOEXEC is always added). A symlink as
 * the final component is followed (in-root) unless FLAGS has O_NOFOLLOW: then O_PATH gives
 * an fd on the link itself, and any other open fails with -ELOOP. O_CREAT is not supported
 * here: create with openat/mkdirat on a resolved parent. Returns an fd or -errno. */
int resolve_open(int root_fd, const char *path, int flags);

/* Tests: force the userspace walk even where openat2 works. */
void resolve_force_fallback(bool force);
bool resolve_using_fallback(void);

#define RESOLVE_MAX_SYMLINKS 40
