/* SPDX-License-Identifier: MIT */
#pragma once

#include <sys/types.h>

/* Identity of a sandbox process: its own uid and gid, no supplementary groups. Raw
 * syscalls throughout: the launch child is a clone3() copy in which glibc's per-thread
 * bookkeeping (used by its setxid broadcast) cannot be trusted. */

/* setgroups(0), setresgid(GID x3), setresuid(UID x3), then checks that nothing of root
 * remains (real, effective, saved and filesystem ids). Needs CAP_SETUID/CAP_SETGID. */
int ids_drop(uid_t uid, gid_t gid);

/* PR_SET_NO_NEW_PRIVS: execve() can never grant privileges again (setuid bits, file
 * capabilities), and a seccomp filter may be loaded without CAP_SYS_ADMIN. */
int ids_set_no_new_privs(void);

/* A new session and process group: no controlling terminal, out of the helper's group. */
int ids_new_session(void);
