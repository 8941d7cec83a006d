/* SPDX-License-Identifier: MIT */
#pragma once

#include <linux/capability.h>
#include <stdbool.h>
#include <sys/types.h>

#include "macros.h"

/* A per-thread identity switch for file operations done on behalf of a sandbox: the
 * calling thread's fsuid/fsgid become the sandbox's, its supplementary groups are cleared
 * and every capability but CAP_SETUID/CAP_SETGID (needed to switch back) leaves its
 * effective set, so the kernel checks permissions exactly as for the sandbox's own
 * processes (no DAC override, no FOWNER, no SYS_RESOURCE reserve). Everything is done
 * with raw syscalls, which act on the calling thread only: glibc's setgroups() and
 * friends broadcast to every thread of the process and must never be used here.
 *
 *   _cleanup_(fsid_leave) FsIdSaved ids = FSID_SAVED_INIT;
 *   r = fsid_enter(uid, uid, &ids);
 *   ... file operations ...
 *   (leaving the scope restores the thread exactly) */
typedef struct FsIdSaved {
        bool active;
        uid_t fsuid;
        gid_t fsgid;
        int ngroups;
        gid_t *groups;
        struct __user_cap_data_struct caps[_LINUX_CAPABILITY_U32S_3];
} FsIdSaved;

#define FSID_SAVED_INIT { .active = false }

/* Switches the calling thread. On failure the thread is left as it was. Calling it on an
 * active SAVED is -EBUSY (no nesting). */
int fsid_enter(uid_t uid, gid_t gid, FsIdSaved *saved);

/* Restores what fsid_enter() saved; a no-op on an inactive SAVED. Usable as a cleanup. */
void fsid_leave(FsIdSaved *saved);

/* The calling thread's current fsuid / fsgid (for tests and assertions). */
uid_t fsid_current_uid(void);
gid_t fsid_current_gid(void);
