/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "isolation.h"

/* What one exec asks of the launcher. The exec engine fills it on a request thread and
 * hands it to spawner_launch(); nothing in it is kept after that call returns. */

#define LAUNCH_SANDBOX_KEY_MAX 64           /* [A-Za-z0-9_-]: the sandbox's internal_id */
#define LAUNCH_HOSTNAME_MAX 63              /* see launch_sanitize_hostname() */
#define LAUNCH_ARGV_MAX 256
#define LAUNCH_ENV_MAX 256                  /* the engine's own variables + the request's 128 */
#define LAUNCH_CWD_MAX 4096
#define LAUNCH_PAYLOAD_MAX (1024 * 1024)    /* argv + env + cwd + names, all bytes together */

typedef struct LaunchLimits {
        uint64_t cpu_seconds;               /* RLIMIT_CPU; 0 = unlimited */
        uint64_t open_files;                /* RLIMIT_NOFILE; 0 = keep the helper's */
        uint64_t file_size_bytes;           /* RLIMIT_FSIZE; 0 = unlimited */
        uint64_t processes;                 /* RLIMIT_NPROC, per uid (so per sandbox); 0 = unlimited */
        /* The sandbox's own cgroup limits (per-sandbox overrides), written when its context is
         * made; 0 = the spawner's default (SpawnerOptions.limits). */
        uint64_t cgroup_memory_bytes, cgroup_processes, cgroup_cpu_millicores;
} LaunchLimits;

typedef struct LaunchSpec {
        const char *sandbox_key;            /* internal_id: names the sandbox's context, netns, cgroups */
        const char *hostname;               /* already sanitised (launch_sanitize_hostname) */
        uid_t uid;                          /* the sandbox's uid; gid is the same number unless set */
        gid_t gid;
        IsolationLevel level;
        NetworkMode network;

        /* DATA/sandboxes/<internal_id>/fs, opened O_DIRECTORY (O_PATH is fine). Its
         * workspace, home/sandbox, cache and envs are mounted read-write. */
        int fs_fd;
        /* The exec's stdio: pipe ends or /dev/null, never a terminal of the daemon. */
        int stdin_fd, stdout_fd, stderr_fd;

        char *const *argv;                  /* 1..LAUNCH_ARGV_MAX; argv[0] searched in env PATH if it has no '/' */
        char *const *envp;                  /* exactly the child's environment; NULL = empty */
        const char *cwd;                    /* as the sandbox sees it; NULL = /workspace */

        uint64_t tmpfs_bytes;               /* size of the private /tmp (SANDBOX_TMPFS_BYTES) */
        uint64_t shm_bytes;                 /* size of /dev/shm; 0 = 64 MiB */
        LaunchLimits limits;

        bool collect_timings;               /* fill LaunchResult.timings (costs one pipe write) */
} LaunchSpec;

/* Where a launch failed: the step of the checklist and the errno, e.g. step "build root",
 * detail "mounting /workspace", error ENOENT. message is the sentence for the log:
 * "build root: mounting /workspace: No such file or directory". */
typedef struct LaunchError {
        int error;                          /* positive errno */
        char step[48];
        char message[256];
} LaunchError;

/* Per-step timings of one launch in microseconds, measured with CLOCK_MONOTONIC. Only
 * filled when the spec asked for them. Steps of the helper and of the child. */
typedef enum LaunchTiming {
        LAUNCH_T_START,                     /* client: spawner_launch() called */
        LAUNCH_T_RECEIVED,                  /* helper: request received and decoded */
        LAUNCH_T_CONTEXT,                   /* helper: sandbox context (netns, cgroup) ready */
        LAUNCH_T_CGROUP,                    /* helper: per-exec tracking cgroup created */
        LAUNCH_T_CLONE,                     /* helper: clone3() returned in the parent */
        LAUNCH_T_CHILD_START,               /* child: first instruction after clone3 */
        LAUNCH_T_FDS,                       /* child: inherited fds closed */
        LAUNCH_T_NETNS,                     /* child: network namespace joined */
        LAUNCH_T_ROOT,                      /* child: fresh root built and pivoted into */
        LAUNCH_T_SETUP,                     /* child: hostname, rlimits, oom score */
        LAUNCH_T_CREDS,                     /* child: identity and capabilities dropped */
        LAUNCH_T_INIT_FORK,                 /* child: the init forked the main process (standard+) */
        LAUNCH_T_STDIO,                     /* child: stdio set up, stray fds closed, cwd entered */
        LAUNCH_T_SECCOMP,                   /* child: filter loaded, about to execve */
        LAUNCH_T_EXEC_SEEN,                 /* helper: saw the exec (error pipe closed) */
        LAUNCH_T_REPLY,                     /* client: the launch answer arrived */
        _LAUNCH_T_MAX,
} LaunchTiming;

/* With the bwrap runtime (bwrap.h): ROOT = the sandbox's directories staged, SETUP = bwrap's
 * command line written and rlimits applied, SECCOMP = about to execve() bwrap (which builds
 * the root and loads the filter itself, before EXEC_SEEN..exit); INIT_FORK is not measured. */
typedef struct LaunchTimings {
        uint64_t at_usec[_LAUNCH_T_MAX];    /* CLOCK_MONOTONIC when the step ended; 0 = not measured */
} LaunchTimings;

const char *launch_timing_name(LaunchTiming t);

/* Makes a hostname out of a sandbox id: lowercase letters, digits and '-', at most
 * LAUNCH_HOSTNAME_MAX characters, never empty, not starting or ending with '-'. */
int launch_sanitize_hostname(const char *sandbox_id, char *buf, size_t size);

/* Checks a spec before it is sent (limits, fds, names). Returns 0 or -EINVAL/-E2BIG and
 * fills ERR with a sentence. */
int launch_spec_validate(const LaunchSpec *spec, LaunchError *err);
