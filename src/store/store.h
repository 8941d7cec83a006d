/* SPDX-License-Identifier: MIT */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "time-util.h"

/* The metadata store: an interface of atomic domain operations. Each operation is one
 * statement or one transaction (a compare-and-set), never a read followed by a blind write,
 * so that the PostgreSQL backend can implement the same operations for a fleet.
 *
 * Every function returns 0 (or a count) on success or a negative errno:
 *   -ENOENT   no such sandbox (for this owner)
 *   -ESTALE   the generation given is not the current one
 *   -EXDEV    the sandbox is live in another workspace scope
 *   -EBUSY    the sandbox is not in a status that allows the operation
 *   -ENOSPC   no free uid in the configured range
 *   -EPROTO   the database schema is newer than this binary understands
 *   -EAGAIN   the database stayed locked past the busy timeout
 *   -EIO      anything else from the database
 * ret_* parameters are written only on success. Strings inside records are bounded by
 * the API's validation; the store rejects longer ones with -EINVAL. */

typedef enum SandboxStatus {
        SANDBOX_ASSIGNED,
        SANDBOX_READY,
        SANDBOX_SUSPENDING,
        SANDBOX_SUSPENDED,
        SANDBOX_RELEASING,
        SANDBOX_RELEASED,
        _SANDBOX_STATUS_MAX,
} SandboxStatus;

const char *sandbox_status_to_string(SandboxStatus s);
int sandbox_status_from_string(const char *s); /* -EINVAL if unknown */

#define OWNER_MAX 64
#define SANDBOX_ID_MAX 128
/* The characters of a sandbox id, exec id, profile and exec scope: ^[A-Za-z0-9_.:-]+$ */
#define ID_CHARSET "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:-"
#define SCOPE_ID_MAX 191
#define PROFILE_MAX 64
#define OPAQUE_ID_LEN 32 /* internal_id, lifecycle_id: 32 lowercase hex characters */
#define WORKER_ID_MAX 64
#define EPOCH_LEN 32
#define ENDPOINT_MAX 256
#define PRINCIPAL_NAME_MAX 64
#define REASON_MAX 128

/* A sandbox's own limits, asked for at the resolve that created its lifecycle, within the
 * operator's maxima (core/sandbox-limits.h); 0 = the worker's default. */
typedef struct SandboxLimits {
        uint64_t memory_bytes;
        uint64_t max_processes;
        uint64_t cpu_millicores;               /* 1000 = one core */
        uint64_t disk_quota_bytes;
} SandboxLimits;

typedef struct SandboxRecord {
        char owner[OWNER_MAX + 1];
        char sandbox_id[SANDBOX_ID_MAX + 1];
        char workspace_scope_id[SCOPE_ID_MAX + 1];
        char profile[PROFILE_MAX + 1];
        char internal_id[OPAQUE_ID_LEN + 1];   /* stable for the (owner, sandbox_id) row */
        char lifecycle_id[OPAQUE_ID_LEN + 1];  /* new at every resolve that (re)creates it */
        uint64_t generation;
        uint32_t uid;                          /* gid = uid */
        SandboxStatus status;
        char worker_id[WORKER_ID_MAX + 1];
        char worker_epoch[EPOCH_LEN + 1];
        uint64_t lifecycle_count;              /* lifecycles so far, this one included */
        uint64_t content_version;              /* bumped by every change to the files */
        usec_t created_at;                     /* this lifecycle's creation */
        usec_t updated_at;
        usec_t connected_at;                   /* 0 = never */
        usec_t released_at;                    /* 0 = live */
        SandboxLimits limits;                  /* this lifecycle's own limits */
} SandboxRecord;

typedef struct LifecycleEvent {
        uint64_t seq;
        char lifecycle_id[OPAQUE_ID_LEN + 1];
        uint64_t generation;
        char event[32];                        /* created, connected, released, reowned, ... */
        char principal[PRINCIPAL_NAME_MAX + 1];
        char reason[REASON_MAX + 1];
        char worker_id[WORKER_ID_MAX + 1];
        char worker_epoch[EPOCH_LEN + 1];
        usec_t at;
} LifecycleEvent;

typedef struct ResolveRequest {
        const char *owner;
        const char *sandbox_id;
        const char *workspace_scope_id;
        const char *profile;
        const char *worker_id;
        const char *worker_epoch;
        const char *principal;
        /* uid pool: a fresh uid is taken from [uid_start, uid_end] that no live or
         * quarantined sandbox holds; PREFERRED_UID (random, chosen by the caller) is tried
         * first, then others. */
        uint32_t uid_start, uid_end, preferred_uid;
        /* New ids for the case where a lifecycle is created (the caller makes them random). */
        const char *new_internal_id;
        const char *new_lifecycle_id;
        usec_t now;
        SandboxLimits limits;                  /* for a lifecycle it creates; a live one keeps its own */
} ResolveRequest;

#define SANDBOX_FILTER_LIVE (-1) /* every status but RELEASED */
#define SANDBOX_FILTER_ANY (-2)

typedef struct SandboxFilter {
        const char *owner;                     /* required */
        const char *workspace_scope_id;        /* NULL = any */
        int status;                            /* SANDBOX_FILTER_LIVE, SANDBOX_FILTER_ANY, or a SandboxStatus */
        uint64_t limit, offset;
} SandboxFilter;

typedef struct WorkerInfo {
        const char *worker_id;
        const char *worker_epoch;
        const char *endpoint;
        const char *capabilities_json;         /* a JSON object as text */
        usec_t now;
} WorkerInfo;

/* --- execs --- */

typedef enum ExecStatus {
        EXEC_RUNNING,
        EXEC_SUCCEEDED,
        EXEC_FAILED,
        EXEC_TIMED_OUT,
        EXEC_CANCELLED,
        EXEC_WORKER_LOST,
        _EXEC_STATUS_MAX,
} ExecStatus;

const char *exec_status_to_string(ExecStatus s);
int exec_status_from_string(const char *s); /* -EINVAL if unknown */

#define EXEC_ID_MAX 128
#define EXEC_SCOPE_MAX 128
#define FINGERPRINT_LEN 64 /* sha256, lowercase hex */
#define EXEC_INLINE_OUTPUT_MAX (64 * 1024)

typedef struct ExecRecord {
        char owner[OWNER_MAX + 1];
        char sandbox_id[SANDBOX_ID_MAX + 1];
        char lifecycle_id[OPAQUE_ID_LEN + 1];
        char exec_id[EXEC_ID_MAX + 1];
        char exec_uid[OPAQUE_ID_LEN + 1];      /* opaque, names spool files and cgroups */
        char fingerprint[FINGERPRINT_LEN + 1];
        uint64_t generation;
        char exec_scope[EXEC_SCOPE_MAX + 1];   /* "" = the whole sandbox */
        bool background;
        uint64_t timeout_seconds;
        ExecStatus status;
        bool has_exit_code;
        int exit_code;
        int signal;                            /* 0 = none */
        bool truncated;
        uint64_t stdout_bytes, stderr_bytes;   /* produced, raw (may exceed what was kept) */
        uint64_t cpu_ms, max_rss_bytes;
        bool oom_killed;
        char worker_id[WORKER_ID_MAX + 1];
        char worker_epoch[EPOCH_LEN + 1];
        usec_t created_at, started_at, finished_at;
        uint64_t duration_ms;
        /* Output kept inline in the store (small outputs, <= EXEC_INLINE_OUTPUT_MAX each) when
         * *_inline is true; otherwise the exec engine's spool file named by exec_uid holds it.
         * Allocated; exec_record_clear() frees them. */
        bool stdout_inline, stderr_inline;
        char *stdout_data, *stderr_data;
        size_t stdout_len, stderr_len;
} ExecRecord;

void exec_record_clear(ExecRecord *r);

typedef struct ExecBegin {
        const char *owner, *sandbox_id, *lifecycle_id, *exec_id, *exec_uid, *fingerprint;
        uint64_t generation;
        const char *principal;
        const char *argv_json;                 /* JSON array text */
        const char *cwd;
        const char *env_keys_json;             /* JSON array of names, never values */
        const char *exec_scope;                /* NULL or "" = whole sandbox */
        bool background;
        uint64_t timeout_seconds;
        const char *worker_id, *worker_epoch;
        usec_t now;
} ExecBegin;

typedef struct ExecFinish {
        const char *owner, *sandbox_id, *lifecycle_id, *exec_id;
        const char *worker_epoch;              /* finishes only a RUNNING record of this epoch */
        ExecStatus status;
        bool has_exit_code;
        int exit_code, signal;
        bool truncated;
        uint64_t stdout_bytes, stderr_bytes, cpu_ms, max_rss_bytes;
        bool oom_killed;
        usec_t started_at, finished_at;
        uint64_t duration_ms;
        /* Inline output (NULL = kept in the spool file). */
        const char *stdout_data, *stderr_data;
        size_t stdout_len, stderr_len;
} ExecFinish;

typedef struct Store Store;

typedef struct StoreOps {
        const char *name;                      /* "sqlite" */

        void (*close)(Store *s);

        /* Registers this worker (insert or update) and returns the epoch it had before,
         * "" when new. */
        int (*worker_register)(Store *s, const WorkerInfo *w, char ret_previous_epoch[EPOCH_LEN + 1]);

        /* Resolve or create: a live sandbox in the same scope is returned as is (*ret_created
         * = false); one in another scope gives -EXDEV; a missing or RELEASED one starts a new
         * lifecycle: generation + 1, a new lifecycle_id, status ASSIGNED, a fresh uid, a
         * "created" event (*ret_created = true). */
        int (*sandbox_resolve)(Store *s, const ResolveRequest *req, SandboxRecord *ret, bool *ret_created);

        int (*sandbox_get)(Store *s, const char *owner, const char *sandbox_id, SandboxRecord *ret);

        /* Looks a sandbox up by its internal id, any owner (for the daemon's own jobs). */
        int (*sandbox_get_internal)(Store *s, const char *internal_id, SandboxRecord *ret);

        /* Fills up to FILTER->limit records into RET (caller-allocated array of that size),
         * *RET_COUNT of them, and *RET_TOTAL = number matching overall. Ordered by sandbox_id. */
        int (*sandbox_list)(Store *s, const SandboxFilter *filter, SandboxRecord *ret, size_t *ret_count,
                            uint64_t *ret_total);

        /* Compare-and-set of the status: succeeds only when (owner, sandbox_id, generation)
         * match and the status is FROM; then sets TO and appends EVENT (if not NULL) to the
         * history. -ESTALE on a generation mismatch, -EBUSY on a status mismatch. For
         * TO == SANDBOX_READY from ASSIGNED, connected_at is set; for RELEASED, released_at
         * is set and the uid goes into quarantine from NOW. */
        int (*sandbox_transition)(Store *s, const char *owner, const char *sandbox_id, uint64_t generation,
                                  SandboxStatus from, SandboxStatus to, const char *event, const char *principal,
                                  const char *reason, usec_t now, SandboxRecord *ret);

        /* Bumps content_version (after a change to the files) if GENERATION is current. */
        int (*sandbox_touch)(Store *s, const char *owner, const char *sandbox_id, uint64_t generation, usec_t now);

        /* Re-owns every live sandbox of WORKER_ID whose epoch is PREVIOUS_EPOCH: sets NEW_EPOCH,
         * generation + 1, and a "reowned" event. Returns the number re-owned. */
        int (*sandbox_reown)(Store *s, const char *worker_id, const char *previous_epoch, const char *new_epoch,
                             usec_t now);

        /* Sandboxes of this worker left in RELEASING (a crash mid-release): up to MAX. */
        int (*sandbox_list_releasing)(Store *s, const char *worker_id, SandboxRecord *ret, size_t max,
                                      size_t *ret_count);

        /* History of one sandbox, oldest first: up to MAX events from offset. */
        int (*history_list)(Store *s, const char *owner, const char *sandbox_id, uint64_t offset,
                            LifecycleEvent *ret, size_t max, size_t *ret_count, uint64_t *ret_total);

        /* uids whose quarantine started before BEFORE: up to MAX of them, to be checked for
         * remnants; then uid_free() returns a clean one to the pool. */
        int (*uid_list_quarantined)(Store *s, usec_t before, uint32_t *ret, size_t max, size_t *ret_count);
        int (*uid_free)(Store *s, uint32_t uid);

        /* Exec idempotency and fencing, atomically: the sandbox (owner, sandbox_id) must be READY
         * with this generation and lifecycle (-ENOENT no sandbox or another lifecycle, -ESTALE
         * generation, -EBUSY status). If (owner, sandbox_id, lifecycle_id, exec_id) exists: the
         * same fingerprint returns it with *ret_created = false, another gives -EEXIST. Else a
         * RUNNING record is inserted and committed (durable before the process starts). */
        int (*exec_begin)(Store *s, const ExecBegin *b, ExecRecord *ret, bool *ret_created);

        /* RUNNING (under F->worker_epoch) -> a final status. -ENOENT unknown, -EBUSY if not RUNNING
         * or another epoch (already finished or lost). */
        int (*exec_finish)(Store *s, const ExecFinish *f);

        /* The record, with inline output if any. */
        int (*exec_get)(Store *s, const char *owner, const char *sandbox_id, const char *lifecycle_id,
                        const char *exec_id, ExecRecord *ret);

        /* Every RUNNING exec of WORKER_ID under an epoch other than CURRENT_EPOCH becomes
         * WORKER_LOST (finished_at = NOW). Returns the count. */
        int (*exec_mark_lost)(Store *s, const char *worker_id, const char *current_epoch, usec_t now);

        /* Deletes finished execs with finished_at < BEFORE; returns up to MAX exec_uids (of those
         * whose output was spooled) in RET so their spool files can go too, and the count. */
        int (*exec_prune)(Store *s, usec_t before, char (*ret_exec_uids)[OPAQUE_ID_LEN + 1], size_t max,
                          size_t *ret_count);

        /* A small report for /healthz: backend, schema version, counts. */
        int (*report)(Store *s, json_t **ret);
} StoreOps;

struct Store {
        const StoreOps *ops;
};

typedef struct StoreOptions {
        const char *data_dir;          /* the sqlite file lives at DATA/sandloom.db */
        uint64_t busy_timeout_ms;
} StoreOptions;

/* Opens the embedded SQLite store, applying pending migrations. A database whose schema
 * needs a newer binary gives -EPROTO and a sentence in ERRBUF. */
int store_open_sqlite(const StoreOptions *opts, Store **ret, char *errbuf, size_t errlen);

static inline void store_close(Store *s) {
        if (s)
                s->ops->close(s);
}
