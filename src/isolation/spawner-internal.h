/* SPDX-License-Identifier: MIT */
#pragma once

/* Inside the spawner helper process: its state, shared by the event loop (spawner.c) and
 * the exec lifecycle (spawner-exec.c). Nothing here is used by the daemon. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "cgroup-limits.h"
#include "launcher.h"
#include "spawner-proto.h"
#include "spawner.h"
#include "time-util.h"

#define CONTEXT_BUCKETS 256
#define EXEC_BUCKETS 1024

typedef struct Context Context;
typedef struct Exec Exec;

struct Context {
        char key[LAUNCH_SANDBOX_KEY_MAX + 1];
        unsigned active;                    /* execs not yet torn down */
        int netns_fd;                       /* -1 until an exec needs it */
        int cgroup_fd;                      /* the sandbox's cgroup; -1 without tracking */
        char cgroup_name[LAUNCH_SANDBOX_KEY_MAX + 8];
        CgroupLimitsSandbox limits;         /* v1: the limit cgroups; fds -EBADF otherwise */
        bool limits_ready;                  /* limits set up (v1 dirs made, or v2 limits written) */
        uint64_t generation;                /* execs started in this context, ever */
        usec_t linger_until;                /* when active == 0 */
        bool dropping;
        Context *next;
};

typedef enum ExecWatch {
        WATCH_NONE,
        WATCH_REPORT,                       /* the report pipe is in the epoll set */
        WATCH_EVENTS,                       /* cgroup.events is */
} ExecWatch;

struct Exec {
        uint64_t id;
        pid_t pid;
        IsolationLevel level;
        bool bwrap;                         /* pid is bwrap's monitor (LAUNCH_RUNTIME_BWRAP) */
        Context *ctx;
        int report_fd, status_fd, cgroup_fd, events_fd;
        char cgroup_name[32];
        int dirs[MOUNT_SANDBOX_DIRS];       /* until the clone */
        Exec *reaped_next;                  /* in Helper.reaped */
        ExecWatch watch;
        bool resolved;                      /* the launch answer was sent */
        bool failed;                        /* ... and it was a failure */
        bool reaped;
        bool killed;                        /* the rest of the tree was sent SIGKILL */
        int wait_status;
        struct rusage ru;
        uint64_t oom_kills_at_start;        /* the sandbox's memory cgroup counter */
        bool have_oom_counter;
        bool solo;                          /* the only exec of its sandbox so far (peak memory is its own) */
        uint64_t generation;                /* ctx->generation when it started */
        bool have_error, have_timings;
        LaunchReport error, timings;
        uint64_t at_usec[_LAUNCH_T_MAX];
        Exec *next;
};

typedef struct Helper {
        int channel, epoll_fd, signal_fd, home_netns_fd;
        pid_t pid, daemon_pid;
        const SpawnerOptions *opts;
        usec_t linger_usec;
        LaunchPlan plan;
        usec_t plan_at;
        int cgroup_base_fd;                 /* our own v2 cgroup; -1 without tracking */
        int cgroup_root_fd;                 /* base/sandloom-spawner-<pid> */
        char cgroup_root_name[64];
        char cgroup_path[256];
        char cgroup_error[160];
        CgroupLimitsRoot limits;            /* v1 limit roots; mode NONE otherwise */
        CgroupLimitsMode limits_mode;       /* in force: v1, v2 (on the tracking tree) or none */
        char limits_error[256];
        Context *contexts[CONTEXT_BUCKETS];
        unsigned n_contexts;
        Exec *execs[EXEC_BUCKETS];
        Exec *reaped;                       /* reaped, not yet processed */
        uint8_t *buf;                       /* one receive buffer, SPAWN_MESSAGE_MAX */
} Helper;

/* spawner.c */
void spawner_helper_send(Helper *h, void *msg, size_t size);

/* spawner-exec.c */
Exec *spawner_helper_exec_by_id(Helper *h, uint64_t id);
Exec *spawner_helper_exec_by_pid(Helper *h, pid_t pid);
/* Handles one SPAWN_LAUNCH: on success the answer follows once the child has exec'd. */
int spawner_helper_launch(Helper *h, const SpawnLaunch *m, size_t size, const int fds[SPAWN_LAUNCH_FDS],
                          LaunchError *err);
/* An event on the exec's watched fd (report pipe or cgroup.events). */
void spawner_helper_exec_event(Helper *h, Exec *e);
/* Reaps every child that ended. */
void spawner_helper_reap(Helper *h);
int spawner_helper_signal(Helper *h, Exec *e, int sig);
/* SIGKILL to every running exec. */
void spawner_helper_kill_all(Helper *h);
/* Kills the sandbox's execs and releases its context once they are gone. */
void spawner_helper_drop(Helper *h, const char *key);
/* Frees lingering contexts whose time is up; returns the epoll timeout until the next. */
int spawner_helper_expire(Helper *h);
