/* SPDX-License-Identifier: MIT */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "daemon.h"
#include "error.h"
#include "store.h"

/* Disk protection: worker watermarks, per-sandbox usage and quotas, the store's reserve.
 *
 * For `sandloom doctor` and /healthz: disk_report(d, &json) gives
 *   {"mechanism": "project-quota"|"soft"|"none", "quota_bytes", "high_watermark_percent",
 *    "min_free_bytes", "total_bytes", "free_bytes", "used_percent", "pressure": bool,
 *    "reserve_bytes", "evidence": "what the start-up probe tried and what happened"}
 * It is cheap (statvfs cached for about a second) and safe from any thread.
 *
 *  - Watermarks: while the data directory's filesystem is over SANDBOX_DISK_HIGH_WATERMARK_PERCENT
 *    used (df's Use%: used / (used + available), rounded up) or has less than
 *    SANDBOX_MIN_FREE_BYTES available, disk_admit() answers 503 SANDBOX_WORKER_DISK_PRESSURE.
 *  - Quota (SANDBOX_DISK_QUOTA_BYTES > 0): a filesystem project quota (project id = the
 *    sandbox uid, set with PROJINHERIT on its four roots at connect) where the data
 *    filesystem enforces project quotas; otherwise "soft": disk_admit() answers 507
 *    SANDBOX_DISK_QUOTA_EXCEEDED once the measured usage is over.
 *  - Reserve: DATA/reserve, a preallocated file the daemon deletes when the filesystem is
 *    nearly full, so the SQLite store still has room to commit (recreated once there is room). */
typedef struct Disk Disk;

/* Probes the data filesystem, creates the reserve, starts the usage thread. Needs
 * d->data_fd, d->sandboxes_fd, d->tmp_fd and d->store. */
int disk_start(Daemon *d, Disk **ret, char *errbuf, size_t errlen);
void disk_free(Disk *k);

/* Before anything that makes a sandbox's data grow (a new sandbox, an upload, an exec):
 * 0, or -ENOSPC with 503 SANDBOX_WORKER_DISK_PRESSURE, or -EDQUOT with 507
 * SANDBOX_DISK_QUOTA_EXCEEDED. OWNER/SANDBOX_ID NULL: only the watermarks. Never walks. */
int disk_admit(Disk *k, const char *owner, const char *sandbox_id, Error *e);

/* At connect, FS_FD = the sandbox's fs/ directory: assigns its project id and limit where
 * project quotas are enforced, and starts tracking its usage. */
int disk_sandbox_prepare(Disk *k, const SandboxRecord *rec, int fs_fd);

/* {"bytes", "inodes", "quota_bytes", "enforcement", "measured_at"} for GET /sandboxes/{id};
 * NULL when there is nothing to report (no workspace). */
json_t *disk_sandbox_json(Disk *k, const SandboxRecord *rec);

/* See above. */
int disk_report(Daemon *d, json_t **ret);
