/* SPDX-License-Identifier: MIT */
#include "isolation.h"

#include <errno.h>
#include <string.h>

#include "macros.h"

static const char *const level_names[] = {
        [ISOLATION_LEVEL_BASIC] = "basic",
        [ISOLATION_LEVEL_STANDARD] = "standard",
        [ISOLATION_LEVEL_STRICT] = "strict",
};

const char *isolation_level_to_string(IsolationLevel level) {
        if (level < ISOLATION_LEVEL_MIN || level > ISOLATION_LEVEL_MAX)
                return NULL;
        return level_names[level];
}

IsolationLevel isolation_level_from_string(const char *s) {
        if (!s)
                return ISOLATION_LEVEL_INVALID;
        for (IsolationLevel l = ISOLATION_LEVEL_MIN; l <= ISOLATION_LEVEL_MAX; l++)
                if (streq(s, level_names[l]))
                        return l;
        return ISOLATION_LEVEL_INVALID;
}

const char *network_mode_to_string(NetworkMode mode) {
        switch (mode) {
        case NETWORK_MODE_NONE:
                return "none";
        case NETWORK_MODE_HOST:
                return "host";
        }
        return NULL;
}

int network_mode_from_string(const char *s, NetworkMode *ret) {
        if (!s)
                return -EINVAL;
        if (streq(s, "none") || streq(s, "isolated")) {
                *ret = NETWORK_MODE_NONE;
                return 0;
        }
        if (streq(s, "host")) {
                *ret = NETWORK_MODE_HOST;
                return 0;
        }
        return -EINVAL;
}

const char *launch_runtime_to_string(LaunchRuntime runtime) {
        switch (runtime) {
        case LAUNCH_RUNTIME_NATIVE:
                return "native";
        case LAUNCH_RUNTIME_BWRAP:
                return "bwrap";
        }
        return NULL;
}

int launch_runtime_from_string(const char *s, LaunchRuntime *ret) {
        if (!s)
                return -EINVAL;
        if (streq(s, "native")) {
                *ret = LAUNCH_RUNTIME_NATIVE;
                return 0;
        }
        if (streq(s, "bwrap")) {
                *ret = LAUNCH_RUNTIME_BWRAP;
                return 0;
        }
        return -EINVAL;
}
