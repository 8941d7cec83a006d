/* SPDX-License-Identifier: MIT */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "daemon.h"
#include "error.h"
#include "holds.h"
#include "principal.h"
#include "store.h"

/* The sandbox manager: lifecycle rules, generation fencing and the workspace on disk.
 * Every function scopes by the principal's tenant; errors come back as -errno plus a
 * filled Error with Sandloom's status and code. */

/* resolve: idempotent for a live sandbox in the same scope; 409 SANDBOX_SCOPE_MISMATCH for
 * another scope; a new lifecycle after release. 503 SANDBOX_UID_EXHAUSTED when no uid. */
int sandbox_resolve(Daemon *d, const Principal *p, const char *sandbox_id, const char *scope_id,
                    const char *profile, SandboxRecord *ret, Error *e);

/* The same with the sandbox's own LIMITS (NULL or 0 = the worker's default) for a lifecycle
 * it creates: 422 SANDBOX_LIMIT_EXCEEDS_MAXIMUM above the operator's maxima, 409
 * SANDBOX_LIMITS_MISMATCH for a live sandbox whose limits differ (sandbox-limits.h). */
int sandbox_resolve_limits(Daemon *d, const Principal *p, const char *sandbox_id, const char *scope_id,
                           const char *profile, const SandboxLimits *limits, SandboxRecord *ret, Error *e);

/* connect: creates DATA/sandboxes/<internal_id>/fs/{workspace,home/sandbox,cache,envs}
 * owned by the uid (idempotent) and moves ASSIGNED -> READY. A wrong generation gives
 * 409 STALE_SANDBOX_ROUTE. */
int sandbox_connect(Daemon *d, const Principal *p, const char *sandbox_id, uint64_t generation,
                    SandboxRecord *ret, Error *e);

/* release: RELEASED at once (also for an unknown id: returns 0 with *ret_known = false);
 * the directory is renamed into DATA/trash and deleted by the reaper. */
int sandbox_release(Daemon *d, const Principal *p, const char *sandbox_id, const char *reason, bool *ret_known,
                    Error *e);

int sandbox_get(Daemon *d, const Principal *p, const char *sandbox_id, SandboxRecord *ret, Error *e);

/* The list answer {"sandboxes": [...], "total", "limit", "offset", "has_more"}. */
int sandbox_list(Daemon *d, const Principal *p, const char *scope_id, int status, uint64_t limit, uint64_t offset,
                 json_t **ret, Error *e);

/* The lifecycle history {"sandbox_id", "events": [...], "total"}; 404 for an unknown id. */
int sandbox_audit(Daemon *d, const Principal *p, const char *sandbox_id, uint64_t limit, uint64_t offset,
                  json_t **ret, Error *e);

/* The route record as the API answers it (Sandloom's fields plus ours). */
json_t *sandbox_record_json(const Daemon *d, const SandboxRecord *r);

/* A READY sandbox opened for one operation: its record, an fd on its fs/ directory, and
 * a hold. Checks the generation (409 STALE_SANDBOX_GENERATION), the status (409
 * SANDBOX_NOT_READY / SANDBOX_SUSPENDED), and takes the hold (409 SANDBOX_BUSY if it cannot
 * be had in time). */
typedef struct SandboxHandle {
        Daemon *daemon;
        SandboxRecord record;
        int fs_fd;                /* DATA/sandboxes/<internal_id>/fs, O_DIRECTORY|O_PATH */
        Hold *hold;
} SandboxHandle;

int sandbox_open(Daemon *d, const Principal *p, const char *sandbox_id, uint64_t generation, HoldKind kind,
                 const char *path, const char *path2, SandboxHandle **ret, Error *e);
void sandbox_handle_close(SandboxHandle *h);
DEFINE_TRIVIAL_CLEANUP_FUNC(SandboxHandle *, sandbox_handle_close);

/* Marks the files as changed (content_version + 1). Best effort. */
void sandbox_handle_touch(SandboxHandle *h);

/* At start-up: finish releases left half done by a crash; re-own this worker's sandboxes
 * from the previous epoch. Returns the number re-owned. */
int sandbox_recover(Daemon *d, const char *previous_epoch);
