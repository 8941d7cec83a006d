/* SPDX-License-Identifier: MIT */
#include "ids.h"

#include <errno.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "macros.h"

int ids_drop(uid_t uid, gid_t gid) {
        uid_t ru, eu, su;
        gid_t rg, eg, sg;

        if (uid == 0 || gid == 0)
                return -EINVAL;
        if (syscall(SYS_setgroups, 0, NULL) < 0)
                return negative_errno();
        if (syscall(SYS_setresgid, gid, gid, gid) < 0)
                return negative_errno();
        if (syscall(SYS_setresuid, uid, uid, uid) < 0)
                return negative_errno();

        /* Belt and braces: a kernel that silently kept an id must not run the command. */
        if (syscall(SYS_getresuid, &ru, &eu, &su) < 0 || syscall(SYS_getresgid, &rg, &eg, &sg) < 0)
                return negative_errno();
        if (ru != uid || eu != uid || su != uid || rg != gid || eg != gid || sg != gid)
                return -EPERM;
        if ((uid_t) syscall(SYS_setfsuid, (uid_t) -1) != uid || (gid_t) syscall(SYS_setfsgid, (gid_t) -1) != gid)
                return -EPERM;
        if (syscall(SYS_getgroups, 0, NULL) != 0)
                return -EPERM;
        return 0;
}

int ids_set_no_new_privs(void) {
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return negative_errno();
        if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
                return -EPERM;
        return 0;
}

int ids_new_session(void) {
        if (setsid() < 0)
                return negative_errno();
        return 0;
}
