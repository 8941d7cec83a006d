/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cgroup-limits.h"
#include "launch.h"
#include "mounts.h"
#include "seccomp-filter.h"

/* The launch itself, as the spawner runs it: internal to src/isolation (the daemon uses
 * spawner.h). */

/* What every launch shares, prepared once when the spawner starts: the mount plan and the
 * compiled seccomp programs. A launch child, being a copy of the spawner, reads it as is. */
typedef struct LaunchPlan {
        MountPlan mounts;
        SeccompProgram seccomp[ISOLATION_LEVEL_MAX + 1];
        bool clone3;                        /* false once clone3() answered ENOSYS */
        LaunchRuntime runtime;
        char bwrap_path[256];               /* LAUNCH_RUNTIME_BWRAP: the bwrap binary */
} LaunchPlan;

/* BWRAP_PATH: NULL = /usr/bin/bwrap; only used with LAUNCH_RUNTIME_BWRAP, and checked to be
 * an executable file (-ENOENT, -EACCES otherwise). */
int launch_plan_init(LaunchPlan *plan, const char *const *mask_paths, LaunchRuntime runtime,
                     const char *bwrap_path);
void launch_plan_done(LaunchPlan *plan);

/* One launch, as decoded by the spawner. Every fd belongs to the caller; the child gets
 * copies. */
typedef struct LaunchJob {
        const LaunchSpec *spec;
        int dirs[MOUNT_SANDBOX_DIRS];       /* detached sandbox directories (mounts_clone_sandbox_dirs) */
        int netns_fd;                       /* join this network namespace; -1 = stay (host) */
        int cgroup_fd;                      /* the exec's tracking cgroup; -1 = none */
        int limit_fds[_CGROUP_CONTROLLER_MAX]; /* v1 limit cgroups of the sandbox to join; -1 = none */
        int report_fd;                      /* write end of the CLOEXEC report pipe */
        int status_fd;                      /* write end of the init's status pipe; -1 at basic */
        pid_t spawner_pid;
} LaunchJob;

/* What the child writes to the report pipe: nothing at all when it reaches execve() (the
 * pipe just closes), an error record when a step fails, and a timing record just before
 * execve() when the spec asked for timings. One write() each: smaller than PIPE_BUF. */
enum {
        LAUNCH_REPORT_ERROR = 1,
        LAUNCH_REPORT_TIMINGS = 2,
};
typedef struct LaunchReport {
        uint32_t kind;
        int32_t error;                      /* positive errno */
        char step[48];
        char detail[160];
        uint64_t at_usec[_LAUNCH_T_MAX];
} LaunchReport;

/* Clones the child that runs the checklist of the plan's runtime (it never returns here).
 * Returns 0 and the child's pid, or -errno. The report pipe tells the rest. */
int launch_clone(LaunchPlan *plan, const LaunchJob *job, pid_t *ret_pid);
