/* SPDX-License-Identifier: MIT */
#include "fsid.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Kept in the effective set while switched: only what is needed to switch back. */
#define KEEP_CAPS ((UINT64_C(1) << CAP_SETUID) | (UINT64_C(1) << CAP_SETGID))

/* The "query" form of setfsuid/setfsgid: an invalid id changes nothing and returns the
 * current value. */
uid_t fsid_current_uid(void) {
        return (uid_t) syscall(SYS_setfsuid, (uid_t) -1);
}

gid_t fsid_current_gid(void) {
        return (gid_t) syscall(SYS_setfsgid, (gid_t) -1);
}

static int caps_get(struct __user_cap_data_struct data[static _LINUX_CAPABILITY_U32S_3]) {
        struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };

        if (syscall(SYS_capget, &hdr, data) < 0)
                return negative_errno();
        return 0;
}

static int caps_set(const struct __user_cap_data_struct data[static _LINUX_CAPABILITY_U32S_3]) {
        struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };

        /* pid 0: the calling thread only. */
        if (syscall(SYS_capset, &hdr, data) < 0)
                return negative_errno();
        return 0;
}

static int set_fsuid(uid_t uid) {
        (void) syscall(SYS_setfsuid, uid);
        return fsid_current_uid() == uid ? 0 : -EPERM;
}

static int set_fsgid(gid_t gid) {
        (void) syscall(SYS_setfsgid, gid);
        return fsid_current_gid() == gid ? 0 : -EPERM;
}

static int save_groups(FsIdSaved *saved) {
        for (unsigned attempt = 0; attempt < 4; attempt++) {
                long n = syscall(SYS_getgroups, 0, NULL);
                gid_t *g;

                if (n < 0)
                        return negative_errno();
                if (n == 0) {
                        saved->groups = NULL;
                        saved->ngroups = 0;
                        return 0;
                }
                g = calloc((size_t) n, sizeof(gid_t));
                if (!g)
                        return -ENOMEM;
                n = syscall(SYS_getgroups, n, g);
                if (n >= 0) {
                        saved->groups = g;
                        saved->ngroups = (int) n;
                        return 0;
                }
                free(g);
                if (errno != EINVAL)      /* EINVAL: the list grew meanwhile, retry */
                        return -errno;
        }
        return -EAGAIN;
}

static void restore(FsIdSaved *saved) {
        /* setfsuid(0) raises the filesystem capabilities from the permitted set again;
         * the final capset then puts back exactly the effective set we found. */
        (void) set_fsuid(saved->fsuid);
        (void) set_fsgid(saved->fsgid);
        (void) syscall(SYS_setgroups, (size_t) saved->ngroups, saved->groups);
        (void) caps_set(saved->caps);
}

int fsid_enter(uid_t uid, gid_t gid, FsIdSaved *saved) {
        struct __user_cap_data_struct reduced[_LINUX_CAPABILITY_U32S_3];
        int r;

        if (!saved)
                return -EINVAL;
        if (saved->active)
                return -EBUSY;
        if (uid == (uid_t) -1 || gid == (gid_t) -1)
                return -EINVAL;

        r = caps_get(saved->caps);
        if (r < 0)
                return r;
        r = save_groups(saved);
        if (r < 0)
                return r;
        saved->fsuid = fsid_current_uid();
        saved->fsgid = fsid_current_gid();
        saved->active = true;

        /* Raw syscall: per thread (glibc's setgroups() would change every thread). */
        if (syscall(SYS_setgroups, 0, NULL) < 0) {
                r = negative_errno();
                goto fail;
        }
        r = set_fsgid(gid);
        if (r < 0)
                goto fail;
        r = set_fsuid(uid);
        if (r < 0)
                goto fail;

        memcpy(reduced, saved->caps, sizeof reduced);
        for (unsigned i = 0; i < _LINUX_CAPABILITY_U32S_3; i++)
                reduced[i].effective &= (uint32_t) (KEEP_CAPS >> (32 * i));
        r = caps_set(reduced);
        if (r < 0)
                goto fail;
        return 0;

fail:
        restore(saved);
        free(saved->groups);
        saved->groups = NULL;
        saved->active = false;
        return r;
}

void fsid_leave(FsIdSaved *saved) {
        if (!saved || !saved->active)
                return;
        restore(saved);
        free(saved->groups);
        saved->groups = NULL;
        saved->ngroups = 0;
        saved->active = false;
}
