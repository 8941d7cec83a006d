/* SPDX-License-Identifier: MIT */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "config.h"
#include "error.h"
#include "store.h"

/* Per-sandbox limits (issue 4): a resolve may ask for its own memory, processes, CPU quota
 * and disk quota ("limits" in the body), within the operator's maxima
 * (SANDBOX_MAX_MEMORY_LIMIT_BYTES, SANDBOX_MAX_PROCESSES_LIMIT, SANDBOX_MAX_CPU_QUOTA,
 * SANDBOX_MAX_DISK_QUOTA_BYTES; unset = the worker's default is the maximum, so a client may
 * always lower its limits but raise them only as far as the operator allows). They are kept
 * in the sandbox's record for its lifecycle and enforced by the same code as the defaults:
 * the sandbox's cgroups (or the sampling supervisor), RLIMIT_NPROC, and the disk quota. */

/* The limits in force for a sandbox whose own are OWN (NULL = none): each one its own, else
 * the worker's default. 0 = unlimited. */
void sandbox_limits_effective(const Config *c, const SandboxLimits *own, SandboxLimits *ret);

/* 0, or -E2BIG with 422 SANDBOX_LIMIT_EXCEEDS_MAXIMUM for the first asked-for value (non-zero
 * in ASKED) above its maximum. */
int sandbox_limits_check(const Config *c, const SandboxLimits *asked, Error *err);

/* True if a live sandbox with OWN limits has every value ASKED asks for. */
bool sandbox_limits_match(const Config *c, const SandboxLimits *own, const SandboxLimits *asked);

/* {"memory_bytes", "max_processes", "cpu_quota" (cores), "disk_quota_bytes"}, null where
 * unlimited: the effective limits, for the sandbox record. */
json_t *sandbox_limits_json(const Config *c, const SandboxLimits *own);

/* The exec path's table of a sandbox's own limits by internal_id, filled whenever a record
 * is read for an exec, so that the launch needs no second read. */
void sandbox_limits_note(const char *internal_id, const SandboxLimits *own);
/* False if INTERNAL_ID is not in the table (then read its record). */
bool sandbox_limits_lookup(const char *internal_id, SandboxLimits *ret);
