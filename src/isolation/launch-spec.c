/* SPDX-License-Identifier: MIT */
#include "launch.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "string-util.h"

#define KEY_CHARS "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
#define HOSTNAME_CHARS "abcdefghijklmnopqrstuvwxyz0123456789-"

static const char *const timing_names[_LAUNCH_T_MAX] = {
        [LAUNCH_T_START] = "launch called",
        [LAUNCH_T_RECEIVED] = "helper received",
        [LAUNCH_T_CONTEXT] = "sandbox context",
        [LAUNCH_T_CGROUP] = "tracking cgroup",
        [LAUNCH_T_CLONE] = "clone3",
        [LAUNCH_T_CHILD_START] = "child running",
        [LAUNCH_T_FDS] = "close inherited fds",
        [LAUNCH_T_NETNS] = "join netns",
        [LAUNCH_T_ROOT] = "build root",
        [LAUNCH_T_SETUP] = "hostname+rlimits+oom",
        [LAUNCH_T_CREDS] = "drop identity+caps",
        [LAUNCH_T_INIT_FORK] = "init forks main",
        [LAUNCH_T_STDIO] = "stdio+fds+cwd",
        [LAUNCH_T_SECCOMP] = "seccomp loaded",
        [LAUNCH_T_EXEC_SEEN] = "exec seen by helper",
        [LAUNCH_T_REPLY] = "reply received",
};

const char *launch_timing_name(LaunchTiming t) {
        if (t < 0 || t >= _LAUNCH_T_MAX)
                return NULL;
        return timing_names[t];
}

int launch_sanitize_hostname(const char *sandbox_id, char *buf, size_t size) {
        size_t n = 0;

        if (!sandbox_id || size < 8)
                return -EINVAL;
        for (const char *p = sandbox_id; *p && n < LAUNCH_HOSTNAME_MAX && n + 1 < size; p++) {
                char c = *p;

                if (c >= 'A' && c <= 'Z')
                        c = (char) (c - 'A' + 'a');
                else if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')))
                        c = '-';
                if (c == '-' && (n == 0 || buf[n - 1] == '-'))
                        continue;      /* no leading or doubled '-' */
                buf[n++] = c;
        }
        while (n > 0 && buf[n - 1] == '-')
                n--;
        if (n == 0)
                return strscpy(buf, size, "sandbox");
        buf[n] = '\0';
        return 0;
}

static int fail(LaunchError *err, int error, const char *what) {
        if (err) {
                err->error = error;
                (void) strscpy(err->step, sizeof err->step, "validate spec");
                (void) bsprintf(err->message, sizeof err->message, "validate spec: %s", what);
        }
        return -error;
}

static int count_strings(char *const *v, size_t max, size_t *ret_n, size_t *bytes) {
        size_t n = 0;

        if (!v) {
                *ret_n = 0;
                return 0;
        }
        for (; v[n]; n++) {
                if (n >= max)
                        return -E2BIG;
                *bytes += strlen(v[n]) + 1;
        }
        *ret_n = n;
        return 0;
}

int launch_spec_validate(const LaunchSpec *spec, LaunchError *err) {
        size_t argc, envc, bytes = 0;

        if (!spec)
                return fail(err, EINVAL, "no spec");
        if (!spec->sandbox_key || !str_in_charset(spec->sandbox_key, KEY_CHARS, 1, LAUNCH_SANDBOX_KEY_MAX))
                return fail(err, EINVAL, "the sandbox key must be 1-64 characters of [A-Za-z0-9_-]");
        if (!spec->hostname || !str_in_charset(spec->hostname, HOSTNAME_CHARS, 1, LAUNCH_HOSTNAME_MAX))
                return fail(err, EINVAL, "the hostname must be 1-63 characters of [a-z0-9-]");
        if (spec->uid == 0 || spec->uid == (uid_t) -1 || spec->gid == 0 || spec->gid == (gid_t) -1)
                return fail(err, EINVAL, "a sandbox never runs as root or as the invalid id");
        if (spec->level < ISOLATION_LEVEL_MIN || spec->level > ISOLATION_LEVEL_MAX)
                return fail(err, EINVAL, "unknown isolation level");
        if (spec->network != NETWORK_MODE_NONE && spec->network != NETWORK_MODE_HOST)
                return fail(err, EINVAL, "unknown network mode");
        if (spec->fs_fd < 0 || spec->stdin_fd < 0 || spec->stdout_fd < 0 || spec->stderr_fd < 0)
                return fail(err, EBADF, "the sandbox directory and all three stdio fds are required");
        if (count_strings(spec->argv, LAUNCH_ARGV_MAX, &argc, &bytes) < 0)
                return fail(err, E2BIG, "too many arguments");
        if (argc == 0 || isempty(spec->argv[0]))
                return fail(err, EINVAL, "argv[0] is missing");
        if (count_strings(spec->envp, LAUNCH_ENV_MAX, &envc, &bytes) < 0)
                return fail(err, E2BIG, "too many environment variables");
        for (size_t i = 0; i < envc; i++)
                if (!strchr(spec->envp[i], '=') || spec->envp[i][0] == '=')
                        return fail(err, EINVAL, "an environment entry is not NAME=value");
        if (spec->cwd) {
                size_t l = strlen(spec->cwd);
                if (spec->cwd[0] != '/' || l >= LAUNCH_CWD_MAX)
                        return fail(err, EINVAL, "the working directory must be an absolute path");
                bytes += l + 1;
        }
        bytes += strlen(spec->sandbox_key) + strlen(spec->hostname) + 2;
        if (bytes > LAUNCH_PAYLOAD_MAX)
                return fail(err, E2BIG, "argv, environment and working directory exceed 1 MiB");
        if (spec->tmpfs_bytes < 1024 * 1024)
                return fail(err, EINVAL, "the /tmp size must be at least 1 MiB");
        return 0;
}
