/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* The "nothing of it remains" check a quarantined sandbox uid must pass before it goes
 * back to the pool (DESIGN §3): no process runs with it (real, effective, saved or fs uid
 * or gid), the kernel keeps no keys for it, and the trash holds no file of it. Each
 * function takes a batch of UIDS and sets RET_FOUND[i] for each uid that still has
 * something; entries already true are left true. Used by the reaper. */

/* Scans /proc/[0-9]* status files (one pass for the whole batch). */
int uid_find_processes(const uid_t *uids, size_t n, bool *ret_found);

/* Reads /proc/key-users (absent = no keys). */
int uid_find_keys(const uid_t *uids, size_t n, bool *ret_found);

/* All of the above plus the trash under TRASH_FD. On any error the whole batch is
 * reported as "remains" (never free a uid we could not check). */
int uid_find_remains(int trash_fd, const uid_t *uids, size_t n, bool *ret_found);
