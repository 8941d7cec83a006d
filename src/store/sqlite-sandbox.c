/* SPDX-License-Identifier: MIT */
/* Sandboxes and their lifecycle history in the SQLite store. Every write is one BEGIN
 * IMMEDIATE transaction whose changes are conditioned on what it read inside it
 * (compare-and-set); reads run on a pooled read connection. */
#include <errno.h>
#include <string.h>

#include "sqlite-internal.h"

static int col_sandbox(sqlite3_stmt *st, SandboxRecord *ret) {
        SandboxRecord rec = {};
        uint64_t uid;
        int status;

        if (col_str(st, 0, rec.owner, sizeof rec.owner) < 0 ||
            col_str(st, 1, rec.sandbox_id, sizeof rec.sandbox_id) < 0 ||
            col_str(st, 2, rec.workspace_scope_id, sizeof rec.workspace_scope_id) < 0 ||
            col_str(st, 3, rec.profile, sizeof rec.profile) < 0 ||
            col_str(st, 4, rec.internal_id, sizeof rec.internal_id) < 0 ||
            col_str(st, 5, rec.lifecycle_id, sizeof rec.lifecycle_id) < 0 ||
            col_str(st, 9, rec.worker_id, sizeof rec.worker_id) < 0 ||
            col_str(st, 10, rec.worker_epoch, sizeof rec.worker_epoch) < 0)
                return -EIO;
        rec.generation = col_u64(st, 6);
        uid = col_u64(st, 7);
        if (uid == 0 || uid > UINT32_MAX)
                return -EIO;
        rec.uid = (uint32_t) uid;
        status = sandbox_status_from_string((const char *) sqlite3_column_text(st, 8));
        if (status < 0)
                return -EIO; /* a status from a newer binary would have raised min_binary */
        rec.status = (SandboxStatus) status;
        rec.lifecycle_count = col_u64(st, 11);
        rec.content_version = col_u64(st, 12);
        rec.created_at = col_u64(st, 13);
        rec.updated_at = col_u64(st, 14);
        rec.connected_at = col_u64(st, 15);
        rec.released_at = col_u64(st, 16);
        rec.limits = (SandboxLimits) { col_u64(st, 17), col_u64(st, 18), col_u64(st, 19), col_u64(st, 20) };
        *ret = rec;
        return 0;
}

static int get_locked(SqliteConn *c, const char *owner, const char *sandbox_id, SandboxRecord *ret) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = prepare_bind(c, STMT_SANDBOX_GET, &st, "tt", owner, sandbox_id);
        if (r < 0)
                return r;
        r = store_sqlite_step(st);
        if (r < 0)
                return r;
        if (r == 0)
                return -ENOENT;
        return col_sandbox(st, ret);
}

/* Why a compare-and-set on (owner, sandbox_id, generation, status) found nothing. */
static int diagnose_locked(SqliteConn *c, const char *owner, const char *sandbox_id, uint64_t generation) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = prepare_bind(c, STMT_SANDBOX_FENCE, &st, "tt", owner, sandbox_id);
        if (r < 0)
                return r;
        r = store_sqlite_step(st);
        if (r < 0)
                return r;
        if (r == 0)
                return -ENOENT;
        if (col_u64(st, 0) != generation)
                return -ESTALE;
        return -EBUSY;
}

static int event_append_locked(SqliteConn *c, const char *owner, const char *sandbox_id, const char *event,
                               const char *principal, const char *reason, usec_t now) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = prepare_bind(c, STMT_EVENT_APPEND, &st, "tttttu", owner, sandbox_id, event, principal ?: "",
                         reason ?: "", (uint64_t) now);
        if (r < 0)
                return r;
        r = store_sqlite_step(st);
        if (r < 0)
                return r;
        return sqlite3_changes(c->db) == 1 ? 0 : -EIO;
}

static bool resolve_request_ok(const ResolveRequest *q) {
        return q && str_nonempty_ok(q->owner, OWNER_MAX) && str_nonempty_ok(q->sandbox_id, SANDBOX_ID_MAX) &&
               str_nonempty_ok(q->workspace_scope_id, SCOPE_ID_MAX) && (!q->profile || str_ok(q->profile, PROFILE_MAX)) &&
               str_nonempty_ok(q->worker_id, WORKER_ID_MAX) && str_ok(q->worker_epoch, EPOCH_LEN) &&
               (!q->principal || str_ok(q->principal, PRINCIPAL_NAME_MAX)) &&
               str_nonempty_ok(q->new_internal_id, OPAQUE_ID_LEN) && str_nonempty_ok(q->new_lifecycle_id, OPAQUE_ID_LEN) &&
               /* uid 0 (root) can never be a sandbox's, whatever the configuration says. */
               q->uid_start > 0 && q->uid_start <= q->uid_end;
}

static int resolve_locked(SqliteConn *c, const ResolveRequest *q, SandboxRecord *ret, bool *ret_created) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        SandboxRecord cur;
        const char *internal_id;
        bool exists;
        uint32_t uid;
        int r;

        r = get_locked(c, q->owner, q->sandbox_id, &cur);
        if (r < 0 && r != -ENOENT)
                return r;
        exists = r >= 0;
        if (exists && cur.status != SANDBOX_RELEASED) {
                if (!streq(cur.workspace_scope_id, q->workspace_scope_id))
                        return -EXDEV;
                *ret = cur;
                *ret_created = false;
                return 0;
        }

        /* A released row keeps its internal_id: the directory name of the sandbox is stable
         * across lifecycles, the lifecycle_id is not. */
        internal_id = exists ? cur.internal_id : q->new_internal_id;
        r = store_sqlite_uid_claim(c, q, internal_id, &uid);
        if (r < 0)
                return r;

        if (exists)
                r = prepare_bind(c, STMT_SANDBOX_RENEW, &st, "tttttuttuuuuu", q->owner, q->sandbox_id,
                                 q->workspace_scope_id, q->profile ?: "", q->new_lifecycle_id, (uint64_t) uid,
                                 q->worker_id, q->worker_epoch, (uint64_t) q->now, q->limits.memory_bytes,
                                 q->limits.max_processes, q->limits.cpu_millicores, q->limits.disk_quota_bytes);
        else
                r = prepare_bind(c, STMT_SANDBOX_INSERT, &st, "ttttttuttuuuuu", q->owner, q->sandbox_id,
                                 q->workspace_scope_id, q->profile ?: "", internal_id, q->new_lifecycle_id,
                                 (uint64_t) uid, q->worker_id, q->worker_epoch, (uint64_t) q->now,
                                 q->limits.memory_bytes, q->limits.max_processes, q->limits.cpu_millicores,
                                 q->limits.disk_quota_bytes);
        if (r < 0)
                return r;
        r = store_sqlite_step(st);
        if (r < 0)
                return r;
        if (sqlite3_changes(c->db) != 1)
                return -EIO;

        r = event_append_locked(c, q->owner, q->sandbox_id, "created", q->principal, "resolve", q->now);
        if (r < 0)
                return r;
        r = get_locked(c, q->owner, q->sandbox_id, ret);
        if (r < 0)
                return r;
        *ret_created = true;
        return 0;
}

/* The common case -- resolving a sandbox that is already live -- is answered from a read
 * connection without waiting for the write lock. A snapshot that says "live" is as good an
 * answer as any later one: the caller's next call is fenced by generation anyway. */
static int resolve_fast(SqliteStore *s, const ResolveRequest *q, SandboxRecord *ret) {
        SandboxRecord cur;
        SqliteConn *c;
        int r;

        r = store_sqlite_read_begin(s, false, &c);
        if (r < 0)
                return r;
        r = store_sqlite_read_end(s, c, false, get_locked(c, q->owner, q->sandbox_id, &cur));
        if (r < 0)
                return r;
        if (cur.status == SANDBOX_RELEASED)
                return -ENOENT;
        if (!streq(cur.workspace_scope_id, q->workspace_scope_id))
                return -EXDEV;
        *ret = cur;
        return 0;
}

int store_sqlite_sandbox_resolve(Store *s, const ResolveRequest *q, SandboxRecord *ret, bool *ret_created) {
        SandboxRecord rec;
        bool created = false;
        SqliteConn *c;
        int r;

        if (!ret || !ret_created || !resolve_request_ok(q))
                return -EINVAL;

        r = resolve_fast(sq(s), q, &rec);
        if (r == -ENOENT) {
                r = store_sqlite_write_begin(sq(s), &c);
                if (r < 0)
                        return r;
                r = store_sqlite_write_end(sq(s), resolve_locked(c, q, &rec, &created));
        }
        if (r < 0)
                return r;
        *ret = rec;
        *ret_created = created;
        return 0;
}

int store_sqlite_sandbox_get(Store *s, const char *owner, const char *sandbox_id, SandboxRecord *ret) {
        SandboxRecord rec;
        SqliteConn *c;
        int r;

        if (!ret || !str_nonempty_ok(owner, OWNER_MAX) || !str_nonempty_ok(sandbox_id, SANDBOX_ID_MAX))
                return -EINVAL;
        r = store_sqlite_read_begin(sq(s), false, &c);
        if (r < 0)
                return r;
        r = store_sqlite_read_end(sq(s), c, false, get_locked(c, owner, sandbox_id, &rec));
        if (r < 0)
                return r;
        *ret = rec;
        return 0;
}

static int get_internal_locked(SqliteConn *c, const char *internal_id, SandboxRecord *ret) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = prepare_bind(c, STMT_SANDBOX_GET_INTERNAL, &st, "t", internal_id);
        if (r < 0)
                return r;
        r = store_sqlite_step(st);
        if (r < 0)
                return r;
        if (r == 0)
                return -ENOENT;
        return col_sandbox(st, ret);
}

int store_sqlite_sandbox_get_internal(Store *s, const char *internal_id, SandboxRecord *ret) {
        SandboxRecord rec;
        SqliteConn *c;
        int r;

        if (!ret || !str_nonempty_ok(internal_id, OPAQUE_ID_LEN))
                return -EINVAL;
        r = store_sqlite_read_begin(sq(s), false, &c);
        if (r < 0)
                return r;
        r = store_sqlite_read_end(sq(s), c, false, get_internal_locked(c, internal_id, &rec));
        if (r < 0)
                return r;
        *ret = rec;
        return 0;
}

static int list_locked(SqliteConn *c, const SandboxFilter *f, const char *status, SandboxRecord *ret,
                       size_t *ret_count, uint64_t *ret_total) {
        _cleanup_stmt_ sqlite3_stmt *count = NULL, *list = NULL;
        size_t n = 0;
        int r;

        r = prepare_bind(c, STMT_SANDBOX_COUNT, &count, "ttt", f->owner, f->workspace_scope_id, status);
        if (r < 0)
                return r;
        r = store_sqlite_step(count);
        if (r <= 0)
                return r < 0 ? r : -EIO;
        *ret_total = col_u64(count, 0);

        if (f->limit > 0) {
                r = prepare_bind(c, STMT_SANDBOX_LIST, &list, "tttcc", f->owner, f->workspace_scope_id, status,
                                 f->limit, f->offset);
                if (r < 0)
                        return r;
                while (n < f->limit) {
                        r = store_sqlite_step(list);
                        if (r < 0)
                                return r;
                        if (r == 0)
                                break;
                        r = col_sandbox(list, &ret[n]);
                        if (r < 0)
                                return r;
                        n++;
                }
        }
        *ret_count = n;
        return 0;
}

int store_sqlite_sandbox_list(Store *s, const SandboxFilter *f, SandboxRecord *ret, size_t *ret_count,
                               uint64_t *ret_total) {
        const char *status;
        uint64_t total = 0;
        size_t n = 0;
        SqliteConn *c;
        int r;

        if (!f || !ret_count || !ret_total || (f->limit > 0 && !ret) || !str_nonempty_ok(f->owner, OWNER_MAX) ||
            (f->workspace_scope_id && !str_ok(f->workspace_scope_id, SCOPE_ID_MAX)))
                return -EINVAL;
        if (f->status == SANDBOX_FILTER_ANY)
                status = "ANY";
        else if (f->status == SANDBOX_FILTER_LIVE)
                status = "LIVE";
        else if (!(status = sandbox_status_to_string((SandboxStatus) f->status)))
                return -EINVAL;

        /* One read transaction: the total and the page come from the same snapshot. */
        r = store_sqlite_read_begin(sq(s), true, &c);
        if (r < 0)
                return r;
        r = store_sqlite_read_end(sq(s), c, true, list_locked(c, f, status, ret, &n, &total));
        if (r < 0)
                return r;
        *ret_count = n;
        *ret_total = total;
        return 0;
}

static int transition_locked(SqliteConn *c, const char *owner, const char *sandbox_id, uint64_t generation,
                             SandboxStatus from, SandboxStatus to, const char *event, const char *principal,
                             const char *reason, usec_t now, SandboxRecord *ret) {
        _cleanup_stmt_ sqlite3_stmt *cas = NULL, *quarantine = NULL;
        int r;

        if (generation > INT64_MAX) /* cannot be stored, so cannot match */
                return diagnose_locked(c, owner, sandbox_id, generation);

        r = prepare_bind(c, STMT_SANDBOX_CAS_STATUS, &cas, "ttuttubb", owner, sandbox_id, generation,
                         sandbox_status_to_string(from), sandbox_status_to_string(to), (uint64_t) now,
                         (int) (from == SANDBOX_ASSIGNED && to == SANDBOX_READY), (int) (to == SANDBOX_RELEASED));
        if (r < 0)
                return r;
        r = store_sqlite_step(cas);
        if (r < 0)
                return r;
        if (sqlite3_changes(c->db) == 0)
                return diagnose_locked(c, owner, sandbox_id, generation);

        if (to == SANDBOX_RELEASED) {
                r = prepare_bind(c, STMT_UID_QUARANTINE, &quarantine, "ttu", owner, sandbox_id, (uint64_t) now);
                if (r < 0)
                        return r;
                r = store_sqlite_step(quarantine);
                if (r < 0)
                        return r;
        }

        if (event) {
                r = event_append_locked(c, owner, sandbox_id, event, principal, reason, now);
                if (r < 0)
                        return r;
        }
        if (ret)
                return get_locked(c, owner, sandbox_id, ret);
        return 0;
}

int store_sqlite_sandbox_transition(Store *s, const char *owner, const char *sandbox_id, uint64_t generation,
                                     SandboxStatus from, SandboxStatus to, const char *event, const char *principal,
                                     const char *reason, usec_t now, SandboxRecord *ret) {
        SandboxRecord rec;
        SqliteConn *c;
        int r;

        if (!str_nonempty_ok(owner, OWNER_MAX) || !str_nonempty_ok(sandbox_id, SANDBOX_ID_MAX) ||
            (unsigned) from >= _SANDBOX_STATUS_MAX || (unsigned) to >= _SANDBOX_STATUS_MAX ||
            (event && !str_nonempty_ok(event, sizeof ((LifecycleEvent *) NULL)->event - 1)) ||
            (principal && !str_ok(principal, PRINCIPAL_NAME_MAX)) || (reason && !str_ok(reason, REASON_MAX)))
                return -EINVAL;
        /* A released lifecycle is over: only resolve starts the next one (with a fresh uid). */
        if (from == SANDBOX_RELEASED)
                return -EINVAL;

        r = store_sqlite_write_begin(sq(s), &c);
        if (r < 0)
                return r;
        r = store_sqlite_write_end(sq(s), transition_locked(c, owner, sandbox_id, generation, from, to, event,
                                                             principal, reason, now, ret ? &rec : NULL));
        if (r < 0)
                return r;
        if (ret)
                *ret = rec;
        return 0;
}

static int touch_locked(SqliteConn *c, const char *owner, const char *sandbox_id, uint64_t generation, usec_t now) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        if (generation > INT64_MAX)
                return diagnose_locked(c, owner, sandbox_id, generation);
        r = prepare_bind(c, STMT_SANDBOX_TOUCH, &st, "ttuu", owner, sandbox_id, generation, (uint64_t) now);
        if (r < 0)
                return r;
        r = store_sqlite_step(st);
        if (r < 0)
                return r;
        if (sqlite3_changes(c->db) == 0)
                return diagnose_locked(c, owner, sandbox_id, generation);
        return 0;
}

int store_sqlite_sandbox_touch(Store *s, const char *owner, const char *sandbox_id, uint64_t generation, usec_t now) {
        SqliteConn *c;
        int r;

        if (!str_nonempty_ok(owner, OWNER_MAX) || !str_nonempty_ok(sandbox_id, SANDBOX_ID_MAX))
                return -EINVAL;
        r = store_sqlite_write_begin(sq(s), &c);
        if (r < 0)
                return r;
        return store_sqlite_write_end(sq(s), touch_locked(c, owner, sandbox_id, generation, now));
}

static int reown_locked(SqliteConn *c, const char *worker_id, const char *previous_epoch, const char *new_epoch,
                        usec_t now) {
        _cleanup_stmt_ sqlite3_stmt *events = NULL, *update = NULL;
        int r, n;

        r = prepare_bind(c, STMT_SANDBOX_REOWN_EVENTS, &events, "tttu", worker_id, previous_epoch, new_epoch,
                         (uint64_t) now);
        if (r < 0)
                return r;
        r = store_sqlite_step(events);
        if (r < 0)
                return r;
        n = sqlite3_changes(c->db);

        r = prepare_bind(c, STMT_SANDBOX_REOWN, &update, "tttu", worker_id, previous_epoch, new_epoch, (uint64_t) now);
        if (r < 0)
                return r;
        r = store_sqlite_step(update);
        if (r < 0)
                return r;
        /* Same rows in the same transaction: one event per re-owned sandbox. */
        if (sqlite3_changes(c->db) != n)
                return -EIO;
        return n;
}

int store_sqlite_sandbox_reown(Store *s, const char *worker_id, const char *previous_epoch, const char *new_epoch,
                                usec_t now) {
        SqliteConn *c;
        int r;

        if (!str_nonempty_ok(worker_id, WORKER_ID_MAX) || !str_nonempty_ok(previous_epoch, EPOCH_LEN) ||
            !str_nonempty_ok(new_epoch, EPOCH_LEN))
                return -EINVAL;
        if (streq(previous_epoch, new_epoch))
                return 0; /* nothing changed hands */
        r = store_sqlite_write_begin(sq(s), &c);
        if (r < 0)
                return r;
        return store_sqlite_write_end(sq(s), reown_locked(c, worker_id, previous_epoch, new_epoch, now));
}

static int list_releasing_locked(SqliteConn *c, const char *worker_id, SandboxRecord *ret, size_t max,
                                 size_t *ret_count) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        size_t n = 0;
        int r;

        r = prepare_bind(c, STMT_SANDBOX_LIST_RELEASING, &st, "tc", worker_id, (uint64_t) max);
        if (r < 0)
                return r;
        while (n < max) {
                r = store_sqlite_step(st);
                if (r < 0)
                        return r;
                if (r == 0)
                        break;
                r = col_sandbox(st, &ret[n]);
                if (r < 0)
                        return r;
                n++;
        }
        *ret_count = n;
        return 0;
}

int store_sqlite_sandbox_list_releasing(Store *s, const char *worker_id, SandboxRecord *ret, size_t max,
                                         size_t *ret_count) {
        SqliteConn *c;
        size_t n = 0;
        int r;

        if (!ret_count || (max > 0 && !ret) || !str_nonempty_ok(worker_id, WORKER_ID_MAX))
                return -EINVAL;
        r = store_sqlite_read_begin(sq(s), false, &c);
        if (r < 0)
                return r;
        r = store_sqlite_read_end(sq(s), c, false, list_releasing_locked(c, worker_id, ret, max, &n));
        if (r < 0)
                return r;
        *ret_count = n;
        return 0;
}

static int col_event(sqlite3_stmt *st, LifecycleEvent *ret) {
        LifecycleEvent e = {};

        if (col_str(st, 1, e.lifecycle_id, sizeof e.lifecycle_id) < 0 || col_str(st, 3, e.event, sizeof e.event) < 0 ||
            col_str(st, 4, e.principal, sizeof e.principal) < 0 || col_str(st, 5, e.reason, sizeof e.reason) < 0 ||
            col_str(st, 6, e.worker_id, sizeof e.worker_id) < 0 ||
            col_str(st, 7, e.worker_epoch, sizeof e.worker_epoch) < 0)
                return -EIO;
        e.seq = col_u64(st, 0);
        e.generation = col_u64(st, 2);
        e.at = col_u64(st, 8);
        *ret = e;
        return 0;
}

static int history_locked(SqliteConn *c, const char *owner, const char *sandbox_id, uint64_t offset,
                          LifecycleEvent *ret, size_t max, size_t *ret_count, uint64_t *ret_total) {
        _cleanup_stmt_ sqlite3_stmt *fence = NULL, *count = NULL, *list = NULL;
        size_t n = 0;
        int r;

        r = prepare_bind(c, STMT_SANDBOX_FENCE, &fence, "tt", owner, sandbox_id);
        if (r < 0)
                return r;
        r = store_sqlite_step(fence);
        if (r <= 0)
                return r < 0 ? r : -ENOENT;

        r = prepare_bind(c, STMT_EVENT_COUNT, &count, "tt", owner, sandbox_id);
        if (r < 0)
                return r;
        r = store_sqlite_step(count);
        if (r <= 0)
                return r < 0 ? r : -EIO;
        *ret_total = col_u64(count, 0);

        if (max > 0) {
                r = prepare_bind(c, STMT_EVENT_LIST, &list, "ttcc", owner, sandbox_id, (uint64_t) max, offset);
                if (r < 0)
                        return r;
                while (n < max) {
                        r = store_sqlite_step(list);
                        if (r < 0)
                                return r;
                        if (r == 0)
                                break;
                        r = col_event(list, &ret[n]);
                        if (r < 0)
                                return r;
                        n++;
                }
        }
        *ret_count = n;
        return 0;
}

int store_sqlite_history_list(Store *s, const char *owner, const char *sandbox_id, uint64_t offset,
                               LifecycleEvent *ret, size_t max, size_t *ret_count, uint64_t *ret_total) {
        uint64_t total = 0;
        SqliteConn *c;
        size_t n = 0;
        int r;

        if (!ret_count || !ret_total || (max > 0 && !ret) || !str_nonempty_ok(owner, OWNER_MAX) ||
            !str_nonempty_ok(sandbox_id, SANDBOX_ID_MAX))
                return -EINVAL;
        r = store_sqlite_read_begin(sq(s), true, &c);
        if (r < 0)
                return r;
        r = store_sqlite_read_end(sq(s), c, true,
                                  history_locked(c, owner, sandbox_id, offset, ret, max, &n, &total));
        if (r < 0)
                return r;
        *ret_count = n;
        *ret_total = total;
        return 0;
}
