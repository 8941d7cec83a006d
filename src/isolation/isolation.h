/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>

/* Isolation levels (DESIGN §5). Every level has the seccomp denylist, its own uid, empty
 * capability sets, mount/IPC/UTS namespaces and a fresh root. */
typedef enum IsolationLevel {
        ISOLATION_LEVEL_INVALID = 0,
        ISOLATION_LEVEL_BASIC = 1,
        ISOLATION_LEVEL_STANDARD = 2,      /* + PID namespace, our own init, private /proc */
        ISOLATION_LEVEL_STRICT = 3,        /* + cgroup namespace, ptrace/personality denied */
} IsolationLevel;

#define ISOLATION_LEVEL_MIN ISOLATION_LEVEL_BASIC
#define ISOLATION_LEVEL_MAX ISOLATION_LEVEL_STRICT

typedef enum NetworkMode {
        NETWORK_MODE_NONE = 0,             /* a per-sandbox network namespace with loopback only */
        NETWORK_MODE_HOST = 1,             /* the worker's own network namespace (opt-in) */
} NetworkMode;

/* How a launch builds the sandbox (SANDBOX_RUNTIME). Both give the same guarantees
 * (DESIGN §5) and pass the same isolation suite; bwrap is for hosts where the native
 * launcher is not allowed. */
typedef enum LaunchRuntime {
        LAUNCH_RUNTIME_NATIVE = 0,         /* our own checklist (launch.c) */
        LAUNCH_RUNTIME_BWRAP = 1,          /* Debian's unprivileged bubblewrap (bwrap.c) */
} LaunchRuntime;

/* "basic", "standard", "strict"; NULL for anything else. */
const char *isolation_level_to_string(IsolationLevel level);
/* Accepts the names above; returns ISOLATION_LEVEL_INVALID otherwise ("auto" is the
 * caller's business: it means "the strongest the probe found"). */
IsolationLevel isolation_level_from_string(const char *s);

/* "none" or "host". */
const char *network_mode_to_string(NetworkMode mode);
/* Accepts "none", "isolated" (Sandloom's name for none) and "host". Returns 0 or -EINVAL. */
int network_mode_from_string(const char *s, NetworkMode *ret);

/* "native" or "bwrap"; NULL for anything else. */
const char *launch_runtime_to_string(LaunchRuntime runtime);
/* Accepts "native" and "bwrap". Returns 0 or -EINVAL. */
int launch_runtime_from_string(const char *s, LaunchRuntime *ret);
