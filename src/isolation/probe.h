/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "isolation.h"
#include "spawner.h"

/* The start-up probe (DESIGN §5): really launch /bin/true at every level through the
 * spawner, in a scratch sandbox, and report which levels work. "auto" takes the strongest. */

typedef struct ProbeLevelResult {
        bool ok;
        char message[256];                  /* the failing step, when !ok */
} ProbeLevelResult;

typedef struct ProbeReport {
        ProbeLevelResult levels[ISOLATION_LEVEL_MAX + 1];
        IsolationLevel strongest;           /* ISOLATION_LEVEL_INVALID if none works */
} ProbeReport;

/* SCRATCH_DIR_FD: a root-owned directory of the daemon (DATA/tmp) where a throwaway
 * sandbox tree is made and removed again. UID: an id no sandbox uses (the probe's). */
int probe_levels(Spawner *s, int scratch_dir_fd, uid_t uid, NetworkMode network, ProbeReport *ret);
