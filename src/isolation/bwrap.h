/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "launcher.h"
#include "macros.h"

/* The bwrap runtime (SANDBOX_RUNTIME=bwrap): the sandbox of DESIGN §5 as a bubblewrap
 * command line, for hosts where the native launcher is not allowed.
 *
 * Debian's bwrap (0.8.0) is not setuid: it can only work unprivileged, in a user namespace
 * of its own. So the launch child (cloned by the spawner straight into the exec's tracking
 * cgroup and a private mount namespace) does what only root can, then becomes the sandbox
 * and execs bwrap, which builds the rest:
 *
 *   child, as root       joins the sandbox's network namespace (bwrap then shares it);
 *                        stages the sandbox's four directories (the spawner's detached
 *                        copies) and a noexec /dev/shm on a private tmpfs and hands them
 *                        over as fds (--bind-fd): the sandbox uid cannot reach the data
 *                        directory, and bwrap 0.8.0 resolves a --bind-fd by its path;
 *                        writes the synthetic passwd/group, the empty mask files and the
 *                        compiled seccomp program into memfds; resets the OOM score
 *   child, dropping      rlimits; the sandbox's uid/gid, no groups; no_new_privs; every
 *                        capability set empty; only stdio and the fds bwrap consumes
 *   bwrap, unprivileged  user + mount + IPC + UTS (+ PID at standard, + cgroup at strict)
 *                        namespaces; the same root: /usr /bin /sbin /lib* and /etc read-only,
 *                        secrets masked (mode 000), synthetic passwd/group, minimal /dev with
 *                        a private devpts, size-limited /tmp, /proc at standard+, the four
 *                        directories read-write, everything nosuid,nodev, / read-only;
 *                        hostname; new session; empty bounding set; our seccomp filter
 *                        loaded last, in its pid 1 as well as in the command.
 *
 * The child execs bwrap with an empty environment: the request's variables reach only the
 * command (--clearenv --setenv), never bwrap's own dynamic loader.
 *
 * The spawner's main process of such an exec is bwrap's monitor, outside the namespaces: it
 * exits when the command does, with the command's status in shell encoding (see
 * bwrap_wait_status()). Signals other than SIGKILL go to the rest of the tree only. */

#define BWRAP_DEFAULT_PATH "/usr/bin/bwrap"

/* Checks that PATH (NULL = BWRAP_DEFAULT_PATH) is an absolute path to a regular file that
 * any uid may execute, and copies it to RET_PATH. Returns 0, -ENOENT, -EACCES or -EINVAL. */
int bwrap_find(const char *path, char *ret_path, size_t size);

/* The namespaces the launch child is cloned with: only a mount namespace (for the staging
 * tmpfs); bwrap creates the rest. */
uint64_t bwrap_clone_flags(void);

/* The launch child of the bwrap runtime: runs its checklist and execs bwrap, or writes an
 * error record naming the failing step to the job's report pipe and exits. */
_noreturn_ void bwrap_child_main(const LaunchPlan *plan, const LaunchJob *job, bool into_cgroup);

/* bwrap's monitor exits with the command's exit code, or 128 + N when the command was killed
 * by signal N. Turns such a status back into a wait status as waitpid() gives it; a wait
 * status of the monitor itself being killed is kept. (An exit code of 129..192 chosen by
 * the command itself reads as a signal: bwrap 0.8.0 gives no way to tell them apart.) */
int bwrap_wait_status(int monitor_status);
