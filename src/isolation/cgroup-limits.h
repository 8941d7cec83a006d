/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Limit cgroups: memory, pids and CPU of a whole sandbox, aggregated over all its concurrent
 * execs (DESIGN §6). One cgroup per sandbox, made by the spawner when the sandbox's first
 * exec starts and removed with its context (the linger timer).
 *
 * cgroup v1 (one hierarchy per controller, found in /proc/self/mountinfo): one directory
 *   per controller, HIERARCHY/<own cgroup>/sandloom-spawner-<pid>/s-<key>; the launch child
 *   joins them itself ("join limit cgroups"). No per-exec v1 cgroups.
 * cgroup v2 with delegated controllers: the sandbox's tracking cgroup (cgroup-track.h) is
 *   the limit cgroup; the controllers are enabled on the spawner's root below the daemon's
 *   cgroup, which must therefore hold no process itself (docs/OPERATIONS.md).
 * none: only rlimits. */

typedef enum CgroupLimitsMode {
        CGROUP_LIMITS_NONE,
        CGROUP_LIMITS_V1,
        CGROUP_LIMITS_V2,
} CgroupLimitsMode;

typedef enum CgroupController {
        CGROUP_MEMORY,
        CGROUP_PIDS,
        CGROUP_CPU,
        CGROUP_CPUACCT,
        _CGROUP_CONTROLLER_MAX,
} CgroupController;

typedef struct CgroupLimits {
        uint64_t memory_bytes;              /* 0 = unlimited */
        uint64_t processes;                 /* 0 = unlimited */
        uint64_t cpu_millicores;            /* 0 = unlimited; 500 = half a core */
} CgroupLimits;

/* What the host offers, found from /proc/self/mountinfo and /proc/self/cgroup. */
typedef struct CgroupHost {
        CgroupLimitsMode mode;
        /* v1: the caller's own cgroup directory in each controller's hierarchy ("" = not
         * mounted); v2: path[0] is the caller's own v2 cgroup. */
        char path[_CGROUP_CONTROLLER_MAX][512];
        bool v2_controllers[_CGROUP_CONTROLLER_MAX];  /* listed in the own v2 cgroup.controllers */
        char evidence[256];                 /* one sentence: what was found */
} CgroupHost;

const char *cgroup_limits_mode_to_string(CgroupLimitsMode m);      /* "cgroup-v1", "cgroup-v2", "none" */
const char *cgroup_controller_to_string(CgroupController c);

/* Parses SANDBOX_CPU_QUOTA: cores as a decimal ("0.5", "2", "1.25"; at most 3 decimals);
 * "" and "0" mean unlimited (0). -EINVAL otherwise. */
int cgroup_limits_parse_cpu_quota(const char *s, uint64_t *ret_millicores);

/* Fills RET. v2 is chosen when the own v2 cgroup lists memory and pids in cgroup.controllers,
 * else v1 when a v1 memory or pids hierarchy is mounted, else none. Never fails for lack of
 * cgroups (mode none); -errno only when /proc cannot be read. MOUNTINFO and CGROUP are
 * paths (NULL = /proc/self/...), for tests. */
int cgroup_limits_detect(const char *mountinfo, const char *cgroup, CgroupHost *ret);

/* The spawner's limit roots: HIERARCHY/<own>/NAME per v1 controller. */
typedef struct CgroupLimitsRoot {
        CgroupLimitsMode mode;
        CgroupLimits limits;
        int base_fd[_CGROUP_CONTROLLER_MAX];        /* the own cgroup; -EBADF = not used */
        int root_fd[_CGROUP_CONTROLLER_MAX];        /* base/NAME */
        char name[64];
        bool memsw;                                 /* memory.memsw.limit_in_bytes writable */
        char error[256];                            /* why a controller is not used, "" if all are */
} CgroupLimitsRoot;

/* v1: removes stale sandloom-spawner-* roots left by a dead spawner, creates NAME in each
 * controller's hierarchy. Controllers that fail are left out (and named in ERROR); -errno
 * only if none works. Call cgroup_limits_root_done() in any case. */
int cgroup_limits_root_init_v1(CgroupLimitsRoot *r, const CgroupHost *host, const CgroupLimits *limits,
                               const char *name);
void cgroup_limits_root_done(CgroupLimitsRoot *r);

/* The directory fds of one sandbox's v1 cgroups (-EBADF where a controller is not used). */
typedef struct CgroupLimitsSandbox {
        int fd[_CGROUP_CONTROLLER_MAX];
        char name[80];
} CgroupLimitsSandbox;

void cgroup_limits_sandbox_init(CgroupLimitsSandbox *s);
/* Creates ROOT/NAME in each hierarchy and writes LIMITS (NULL = the root's). */
int cgroup_limits_sandbox_create(CgroupLimitsRoot *r, const char *name, const CgroupLimits *limits,
                                 CgroupLimitsSandbox *s);
/* Kills what is left (v1 cannot do it atomically: signals cgroup.procs until empty), removes
 * the directories and closes the fds. */
void cgroup_limits_sandbox_destroy(CgroupLimitsRoot *r, CgroupLimitsSandbox *s);

/* In the launch child: moves the calling process into each of S's cgroups (cgroup.procs).
 * FDS are directory fds; async-signal-safe. */
int cgroup_limits_join(const int fds[_CGROUP_CONTROLLER_MAX]);

/* v2: enables memory, pids and cpu for the children of PARENT_FD (cgroup.subtree_control),
 * then writes LIMITS into the sandbox cgroup CG_FD (memory.max, memory.swap.max 0, pids.max,
 * cpu.max). */
int cgroup_limits_v2_enable(int parent_fd);
/* v2: moves every process of BASE_FD into its child LEAF (created if needed), so that BASE may
 * hand controllers to its children (no process may stay in a cgroup that does). */
int cgroup_limits_v2_vacate(int base_fd, const char *leaf);
int cgroup_limits_v2_apply(int cg_fd, const CgroupLimits *limits);
/* v2: enables the memory controller for the children of the sandbox cgroup CG_FD (its execs'
 * tracking cgroups), so that each exec has memory.events and memory.peak of its own. */
int cgroup_limits_v2_delegate_memory(int cg_fd);

/* Counters of a sandbox's memory cgroup (v1 or v2 dir fd). */
typedef struct CgroupMemoryCounters {
        uint64_t oom_kills;                 /* v1 memory.oom_control oom_kill, v2 memory.events oom_kill */
        uint64_t failcnt;                   /* v1 memory.failcnt; v2 memory.events max */
        uint64_t peak_bytes;                /* v1 memory.max_usage_in_bytes; v2 memory.peak (0 if absent) */
} CgroupMemoryCounters;

int cgroup_limits_memory_counters(int mem_fd, bool v2, CgroupMemoryCounters *ret);
/* v1: resets memory.max_usage_in_bytes to the current usage. */
int cgroup_limits_memory_reset_peak(int mem_fd);

/* The report for /healthz and `sandloom doctor` (DESIGN §6), probing for real: detects the
 * host and, for each of memory, pids, cpu, tries to create (and removes) a cgroup under the
 * caller's own one and write a limit. Fills RET with a NUL-terminated JSON object text:
 *   {"mode":"cgroup-v1"|"cgroup-v2"|"none",
 *    "memory":{"mechanism":"cgroup-v1"|"cgroup-v2"|"none","path":"...","evidence":"..."},
 *    "pids":{...}, "cpu":{...}}
 * (jansson is not linked into the isolation library: parse it with json_loads). Returns 0
 * or -ENOBUFS if SIZE is too small (4096 is enough). */
int cgroup_limits_report(char *ret, size_t size);
