/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cgroup-limits.h"
#include "launch.h"

/* The spawner: one long-lived helper process that launches every exec (DESIGN §5).
 *
 * The daemon forks it with spawner_start() BEFORE it starts any thread (the helper is then
 * a small copy of a small process, and its parent-death signal follows the main thread,
 * which lives as long as the daemon). Afterwards any thread may call spawner_launch()
 * etc. concurrently: requests go over one SOCK_SEQPACKET channel, and one reader thread
 * in the daemon dispatches answers and exit notifications by request id — there is no
 * thread per exec.
 *
 * The helper keeps one refcounted context per active sandbox (its network namespace and
 * its tracking cgroup), released SpawnerOptions.netns_linger_usec after the sandbox's last
 * exec ended. It reaps its children; every exec gets a tracking cgroup of its own (cgroup
 * v2, CLONE_INTO_CGROUP) or, without a v2 hierarchy, the PID namespace as tracker. When
 * the main process of an exec ends, the rest of its tree is killed, and the exit is
 * reported once nothing of the exec remains.
 *
 * If the daemon dies (even by SIGKILL), the helper kills every sandbox process and exits;
 * if the helper dies, the reader thread kills what is left through its cgroups and reports
 * every running exec lost. The helper ignores termination signals meant for the daemon
 * (Ctrl-C, systemd's stop): the daemon shuts down gracefully, then calls spawner_stop(). */

/* The helper program's file name (installed beside sandloom). */
#define SPAWNER_HELPER_NAME "sandloom-spawner"

typedef struct Spawner Spawner;
typedef struct SpawnerExec SpawnerExec;

typedef struct SpawnerOptions {
        /* Extra host paths to hide from sandboxes (the daemon's config and env files, ...),
         * NULL-terminated; only paths under /etc or /usr can be visible anyway. */
        const char *const *mask_paths;
        uint64_t netns_linger_usec;         /* 0 = 30 s */
        /* SANDBOX_RUNTIME: native (default) or bwrap. With bwrap, each launch child prepares
         * what only root can (tracking cgroup, network namespace, the sandbox's directories
         * as fds), drops to the sandbox's identity and execs the unprivileged bubblewrap,
         * which builds the rest of the sandbox in a user namespace (see bwrap.h). */
        LaunchRuntime runtime;
        const char *bwrap_path;             /* NULL = /usr/bin/bwrap */
        /* Per-sandbox limits over all its concurrent execs (cgroup-limits.h); zero = none. */
        CgroupLimits limits;
        /* The helper program (sandloom-spawner, a small static binary built from the same
         * sources). NULL: the one beside /proc/self/exe if there is one. "" or none found:
         * the helper runs in a fork of this process instead (the same code; each launch
         * then copies this larger address space, ~0.3 ms more CPU per exec). */
        const char *helper_path;
} SpawnerOptions;

/* What the helper found at start-up (not the probe: see probe.h). */
typedef struct SpawnerInfo {
        pid_t pid;
        bool cgroup_tracking;               /* per-exec cgroup v2 tracking available */
        char cgroup_path[256];              /* where the exec cgroups live, "" if none */
        char cgroup_error[160];             /* why there is no tracking, "" if there is */
        bool clone3;                        /* clone3() available (else clone()) */
        bool helper_exec;                   /* the helper is the separate program (else a fork of ours) */
        LaunchRuntime runtime;
        /* Per-sandbox limit cgroups as the helper set them up: the mode in force, which
         * controllers it uses (v1: each is a hierarchy of its own; v2: all or none), and
         * why something is missing ("" if nothing is). */
        CgroupLimitsMode limits_mode;
        bool limits_controllers[_CGROUP_CONTROLLER_MAX];
        char limits_error[256];
} SpawnerInfo;

/* The end of an exec: the main process's wait status and what the whole tree used. Sent
 * once nothing of the exec remains (with tracking), else when the main process is reaped. */
typedef struct SpawnerExit {
        int wait_status;                    /* as from waitpid(): WIFEXITED/WIFSIGNALED */
        bool exited;                        /* WIFEXITED */
        int exit_code;                      /* WEXITSTATUS, or -1 */
        int signal;                         /* WTERMSIG, or 0 */
        uint64_t cpu_usec;                  /* user + system CPU of the tree */
        /* The peak memory charged to the sandbox's cgroup while the exec ran (page cache and
         * tmpfs included) when it was the sandbox's only exec from start to end and the host
         * measures it (max_rss_cgroup); else the peak RSS of the largest process. */
        uint64_t max_rss_bytes;
        bool max_rss_cgroup;
        /* Killed by the kernel for the sandbox's memory limit: the main process died of
         * SIGKILL and the memory cgroup's OOM-kill counter moved during the exec. */
        bool oom_killed;
        uint64_t ended_usec;                /* CLOCK_MONOTONIC when the helper saw the end */
        bool lost;                          /* the helper died: the exec's fate is unknown */
} SpawnerExit;

/* Called on the daemon's reader thread when an exec ends. Must be quick and must not
 * block (wake a waiter, resume a connection, queue work). E stays valid during the call. */
typedef void (*SpawnerExitCallback)(SpawnerExec *e, const SpawnerExit *exit, void *userdata);

/* Forks the helper and starts the reader thread. Call before the daemon starts threads.
 * Returns 0 or -errno; on failure MESSAGE (if given) holds a sentence. */
int spawner_start(const SpawnerOptions *opts, Spawner **ret, char *message, size_t message_size);

/* Closes the channel: the helper kills every sandbox process still running, removes its
 * cgroups and exits; waits for it. Every exec not yet ended is reported lost. NULL is fine. */
void spawner_stop(Spawner *s);

void spawner_get_info(Spawner *s, SpawnerInfo *ret);
/* True if every sandbox's processes are limited by a pids cgroup (v1 or v2). */
bool spawner_pids_limited(Spawner *s);

/* Launches one exec and waits (briefly) until it has really started: the child has called
 * execve(), or a step failed. Thread-safe. ON_EXIT (may be NULL) is called once, on the
 * reader thread, when the exec ends; alternatively wait with spawner_exec_wait().
 *
 * Returns 0 and a handle (the caller owns one reference) on success. On failure returns
 * -errno with ERR filled: the failing step and errno (e.g. step "exec", ENOENT for an
 * unknown command, which the engine may present as exit code 127). TIMINGS (may be NULL)
 * is filled when the spec asked for timings. */
int spawner_launch(Spawner *s, const LaunchSpec *spec,
                   SpawnerExitCallback on_exit, void *userdata,
                   SpawnerExec **ret, LaunchError *err, LaunchTimings *timings);

/* Signals the exec's tree. SIGKILL is atomic over the whole tree (cgroup.kill, or the PID
 * namespace's init); any other signal goes to every process of the tree (the main process
 * included) except our init. Returns 0, -ESRCH if the exec already ended, or -errno. */
int spawner_exec_kill(SpawnerExec *e, int sig);

/* Waits until the exec ended or TIMEOUT_USEC passed (UINT64_MAX = forever). Returns 0 and
 * fills RET, or -ETIMEDOUT. */
int spawner_exec_wait(SpawnerExec *e, uint64_t timeout_usec, SpawnerExit *ret);

bool spawner_exec_has_ended(SpawnerExec *e);
/* The main process (our init at standard and above) as the daemon's PID namespace sees it. */
pid_t spawner_exec_pid(SpawnerExec *e);
/* The tracking cgroup's directory, an absolute path ("" without tracking). */
const char *spawner_exec_cgroup(SpawnerExec *e);

SpawnerExec *spawner_exec_ref(SpawnerExec *e);
void spawner_exec_unref(SpawnerExec *e);
static inline void spawner_exec_unrefp(SpawnerExec **e) {
        if (*e)
                spawner_exec_unref(*e);
}

/* Kills every running exec of the sandbox and releases its context (network namespace,
 * cgroup) as soon as its last exec is gone, without waiting for the linger time. For
 * release. Returns 0 (also when the helper had no context for it) or -errno. */
int spawner_drop_sandbox(Spawner *s, const char *sandbox_key);

/* How many sandbox contexts the helper holds now (for tests and /healthz). */
int spawner_count_contexts(Spawner *s, unsigned *ret);
