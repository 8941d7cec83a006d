/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdint.h>

#include "macros.h"
#include "time-util.h"

/* The per-sandbox hold manager: one place that arbitrates everything touching a sandbox.
 *  - HOLD_FILE_READ / HOLD_FILE_WRITE on a path: readers share; a writer conflicts with any
 *    hold on the same path, an ancestor or a descendant (a move holds both its paths);
 *  - HOLD_EXCLUSIVE: the whole sandbox (release now; suspend and template builds later);
 *    waits for every other hold to drain and keeps new ones out meanwhile;
 *  - HOLD_EXEC on an exec scope (PATH = the scope, NULL = the whole sandbox): two execs in
 *    the same scope conflict, an unscoped one conflicts with every other exec. Exec holds
 *    never conflict with file holds (agents read files while a background server runs)
 *    and never wait: a conflict is -EBUSY at once. Release does not wait for execs to
 *    end on their own: it cancels them first (exec.h), then takes its exclusive hold.
 * A caller that cannot get its hold within the wait gets -EBUSY. Entries exist only
 * while held: an idle sandbox costs nothing here. */
typedef enum HoldKind {
        HOLD_FILE_READ,
        HOLD_FILE_WRITE,
        HOLD_EXCLUSIVE,
        HOLD_EXEC,
} HoldKind;

typedef struct Holds Holds;
typedef struct Hold Hold;

int holds_new(Holds **ret);
void holds_free(Holds *h);

/* KEY names the sandbox (its internal_id). PATH is the canonical sandbox path
 * ("/workspace/a") for file holds, the scope (or NULL) for EXEC, NULL for EXCLUSIVE; a second path (PATH2, may be NULL)
 * is held too (the destination of a move). Waits up to TIMEOUT. */
int holds_acquire(Holds *h, const char *key, HoldKind kind, const char *path, const char *path2, usec_t timeout,
                  Hold **ret);
void hold_release(Hold *hold);
DEFINE_TRIVIAL_CLEANUP_FUNC(Hold *, hold_release);

/* Number of sandboxes with a hold right now (for /healthz and tests of idle cost). */
unsigned holds_active(Holds *h);
