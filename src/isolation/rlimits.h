/* SPDX-License-Identifier: MIT */
#pragma once

#include "launch.h"

/* Applies LIMITS (soft = hard, never above the helper's own hard limit) and always
 * RLIMIT_CORE = 0: a sandbox never dumps core (a core file could carry another process's
 * memory into the workspace). Before the identity drop. */
int rlimits_apply(const LaunchLimits *limits);
