/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Tracking cgroups: every exec gets a cgroup of its own in the cgroup v2 hierarchy,
 * whenever one is mounted, even without controllers (hybrid hosts): the child is cloned
 * straight into it (CLONE_INTO_CGROUP), "kill the tree" is one write to cgroup.kill, and
 * "populated 0" in cgroup.events means nothing of the tree is left — setsid() and double
 * forks cannot leave a cgroup. Everything is fd-relative to directory fds. */

/* Finds the cgroup2 mount in /proc/self/mountinfo and the caller's own v2 cgroup in
 * /proc/self/cgroup; writes the absolute directory to RET_PATH. -ENOMEDIUM if there is no
 * v2 hierarchy; -ENOENT if the caller's cgroup is not visible through the mount. */
int cgroup_track_find_own(char *ret_path, size_t size);

/* Creates PARENT_FD/NAME and opens it (O_DIRECTORY, usable with CLONE_INTO_CGROUP). */
int cgroup_track_mkdir(int parent_fd, const char *name, int *ret_fd);

/* Moves the calling process into the cgroup (when CLONE_INTO_CGROUP is unavailable). */
int cgroup_track_join(int cg_fd);

/* SIGKILL to every process of the cgroup and its descendants, atomically. */
int cgroup_track_kill(int cg_fd);

/* Sends SIG to every process listed in cgroup.procs of CG_FD except EXCEPT (0 = none).
 * Returns the number signalled or -errno. Not atomic (a fork can race it): use
 * cgroup_track_kill() to end a tree. */
int cgroup_track_signal(int cg_fd, int sig, pid_t except);

/* 1 if processes remain in the cgroup or below, 0 if none, or -errno. */
int cgroup_track_populated(int cg_fd);

/* Opens cgroup.events for poll(POLLPRI): it signals every change of "populated". */
int cgroup_track_open_events(int cg_fd, int *ret_fd);

/* usage_usec of cpu.stat (present without the cpu controller since Linux 4.15). */
int cgroup_track_cpu_usec(int cg_fd, uint64_t *ret);

/* Removes the empty cgroup PARENT_FD/NAME. -EBUSY while populated. */
int cgroup_track_remove(int parent_fd, const char *name);

/* Kills everything in PARENT_FD/NAME and below, waits up to TIMEOUT_MSEC until it is
 * empty, and removes the whole subtree, children first. */
int cgroup_track_destroy_tree(int parent_fd, const char *name, int timeout_msec);
