/* SPDX-License-Identifier: MIT */
/* Exec records in the SQLite store: begin (fence + idempotency + insert, committed before the
 * process starts), finish (compare-and-set on RUNNING and the worker epoch), get, marking the
 * execs of a dead epoch lost, and retention pruning.
 *
 * exec_begin and exec_finish run for every command, so each is one short BEGIN IMMEDIATE
 * transaction of cached statements whose common case is a single statement; reading back
 * why a compare-and-set matched nothing happens only on the failure path. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite-internal.h"

/* Bounds on what the exec engine hands over (the API validates far tighter limits first). */
#define EXEC_ARGV_JSON_MAX (4U * 1024 * 1024)
#define EXEC_ENV_KEYS_JSON_MAX (256U * 1024)
#define EXEC_CWD_MAX 4096
/* Rows one exec_prune call may delete: bounds how long it holds the write lock. */
#define EXEC_PRUNE_BATCH_MAX 10000U

/* Columns of STMT_EXEC_GET (EXEC_COLUMNS in sqlite.c), in order. */
enum {
        COL_OWNER,
        COL_SANDBOX_ID,
        COL_LIFECYCLE_ID,
        COL_EXEC_ID,
        COL_EXEC_UID,
        COL_FINGERPRINT,
        COL_GENERATION,
        COL_EXEC_SCOPE,
        COL_BACKGROUND,
        COL_TIMEOUT_SECONDS,
        COL_STATUS,
        COL_EXIT_CODE,
        COL_SIGNAL,
        COL_TRUNCATED,
        COL_STDOUT_BYTES,
        COL_STDERR_BYTES,
        COL_CPU_MS,
        COL_MAX_RSS_BYTES,
        COL_OOM_KILLED,
        COL_WORKER_ID,
        COL_WORKER_EPOCH,
        COL_CREATED_AT,
        COL_STARTED_AT,
        COL_FINISHED_AT,
        COL_DURATION_MS,
        COL_STDOUT,
        COL_STDERR,
};

static int col_int(sqlite3_stmt *st, int i, int *ret) {
        sqlite3_int64 v = sqlite3_column_int64(st, i);

        if (v < INT_MIN || v > INT_MAX)
                return -EIO;
        *ret = (int) v;
        return 0;
}

/* An output column: NULL means spooled; anything else (also an empty blob) is inline. The copy
 * is NUL-terminated for the convenience of callers that treat it as text. */
static int col_output(sqlite3_stmt *st, int i, bool *ret_inline, char **ret_data, size_t *ret_len) {
        const void *p;
        char *data;
        int n;

        if (sqlite3_column_type(st, i) == SQLITE_NULL) {
                *ret_inline = false;
                *ret_data = NULL;
                *ret_len = 0;
                return 0;
        }
        p = sqlite3_column_blob(st, i);
        n = sqlite3_column_bytes(st, i);
        if (n < 0 || (n > 0 && !p))
                return -ENOMEM; /* SQLite failed to produce the value */
        data = malloc((size_t) n + 1);
        if (!data)
                return -ENOMEM;
        if (n > 0)
                memcpy(data, p, (size_t) n);
        data[n] = '\0';
        *ret_inline = true;
        *ret_data = data;
        *ret_len = (size_t) n;
        return 0;
}

static int col_exec(sqlite3_stmt *st, ExecRecord *ret) {
        _cleanup_free_ char *out = NULL, *err = NULL;
        ExecRecord rec = {};
        int status, r;

        if (col_str(st, COL_OWNER, rec.owner, sizeof rec.owner) < 0 ||
            col_str(st, COL_SANDBOX_ID, rec.sandbox_id, sizeof rec.sandbox_id) < 0 ||
            col_str(st, COL_LIFECYCLE_ID, rec.lifecycle_id, sizeof rec.lifecycle_id) < 0 ||
            col_str(st, COL_EXEC_ID, rec.exec_id, sizeof rec.exec_id) < 0 ||
            col_str(st, COL_EXEC_UID, rec.exec_uid, sizeof rec.exec_uid) < 0 ||
            col_str(st, COL_FINGERPRINT, rec.fingerprint, sizeof rec.fingerprint) < 0 ||
            col_str(st, COL_EXEC_SCOPE, rec.exec_scope, sizeof rec.exec_scope) < 0 ||
            col_str(st, COL_WORKER_ID, rec.worker_id, sizeof rec.worker_id) < 0 ||
            col_str(st, COL_WORKER_EPOCH, rec.worker_epoch, sizeof rec.worker_epoch) < 0)
                return -EIO;

        status = exec_status_from_string((const char *) sqlite3_column_text(st, COL_STATUS));
        if (status < 0)
                return -EIO; /* a status from a newer binary would have raised min_binary */
        rec.status = (ExecStatus) status;

        rec.generation = col_u64(st, COL_GENERATION);
        rec.background = sqlite3_column_int(st, COL_BACKGROUND) != 0;
        rec.timeout_seconds = col_u64(st, COL_TIMEOUT_SECONDS);
        rec.has_exit_code = sqlite3_column_type(st, COL_EXIT_CODE) != SQLITE_NULL;
        if (rec.has_exit_code && col_int(st, COL_EXIT_CODE, &rec.exit_code) < 0)
                return -EIO;
        if (col_int(st, COL_SIGNAL, &rec.signal) < 0) /* NULL reads as 0: none */
                return -EIO;
        rec.truncated = sqlite3_column_int(st, COL_TRUNCATED) != 0;
        rec.stdout_bytes = col_u64(st, COL_STDOUT_BYTES);
        rec.stderr_bytes = col_u64(st, COL_STDERR_BYTES);
        rec.cpu_ms = col_u64(st, COL_CPU_MS);
        rec.max_rss_bytes = col_u64(st, COL_MAX_RSS_BYTES);
        rec.oom_killed = sqlite3_column_int(st, COL_OOM_KILLED) != 0;
        rec.created_at = col_u64(st, COL_CREATED_AT);
        rec.started_at = col_u64(st, COL_STARTED_AT);
        rec.finished_at = col_u64(st, COL_FINISHED_AT);
        rec.duration_ms = col_u64(st, COL_DURATION_MS);

        r = col_output(st, COL_STDOUT, &rec.stdout_inline, &out, &rec.stdout_len);
        if (r < 0)
                return r;
        r = col_output(st, COL_STDERR, &rec.stderr_inline, &err, &rec.stderr_len);
        if (r < 0)
                return r;
        rec.stdout_data = TAKE_PTR(out);
        rec.stderr_data = TAKE_PTR(err);
        *ret = rec;
        return 0;
}

static int get_locked(SqliteConn *c, const char *owner, const char *sandbox_id, const char *lifecycle_id,
                      const char *exec_id, ExecRecord *ret) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = prepare_bind(c, STMT_EXEC_GET, &st, "tttt", owner, sandbox_id, lifecycle_id, exec_id);
        if (r < 0)
                return r;
        r = store_sqlite_step(st);
        if (r < 0)
                return r;
        if (r == 0)
                return -ENOENT;
        return col_exec(st, ret);
}

/* ---- begin ---- */

static bool exec_begin_ok(const ExecBegin *b) {
        return b && str_nonempty_ok(b->owner, OWNER_MAX) && str_nonempty_ok(b->sandbox_id, SANDBOX_ID_MAX) &&
               str_nonempty_ok(b->lifecycle_id, OPAQUE_ID_LEN) && str_nonempty_ok(b->exec_id, EXEC_ID_MAX) &&
               str_nonempty_ok(b->exec_uid, OPAQUE_ID_LEN) && str_nonempty_ok(b->fingerprint, FINGERPRINT_LEN) &&
               (!b->principal || str_ok(b->principal, PRINCIPAL_NAME_MAX)) &&
               str_nonempty_ok(b->argv_json, EXEC_ARGV_JSON_MAX) && str_nonempty_ok(b->cwd, EXEC_CWD_MAX) &&
               (!b->env_keys_json || str_ok(b->env_keys_json, EXEC_ENV_KEYS_JSON_MAX)) &&
               (!b->exec_scope || str_ok(b->exec_scope, EXEC_SCOPE_MAX)) && b->timeout_seconds <= INT64_MAX &&
               str_nonempty_ok(b->worker_id, WORKER_ID_MAX) && str_nonempty_ok(b->worker_epoch, EPOCH_LEN) &&
               b->now <= INT64_MAX;
}

/* The record exec_begin just inserted, built from the request instead of read back. */
static void record_from_begin(const ExecBegin *b, ExecRecord *ret) {
        memset(ret, 0, sizeof *ret); /* padding too: records are compared with memcmp in tests */
        /* Every length was checked by exec_begin_ok(). */
        (void) strscpy(ret->owner, sizeof ret->owner, b->owner);
        (void) strscpy(ret->sandbox_id, sizeof ret->sandbox_id, b->sandbox_id);
        (void) strscpy(ret->lifecycle_id, sizeof ret->lifecycle_id, b->lifecycle_id);
        (void) strscpy(ret->exec_id, sizeof ret->exec_id, b->exec_id);
        (void) strscpy(ret->exec_uid, sizeof ret->exec_uid, b->exec_uid);
        (void) strscpy(ret->fingerprint, sizeof ret->fingerprint, b->fingerprint);
        (void) strscpy(ret->exec_scope, sizeof ret->exec_scope, b->exec_scope ?: "");
        (void) strscpy(ret->worker_id, sizeof ret->worker_id, b->worker_id);
        (void) strscpy(ret->worker_epoch, sizeof ret->worker_epoch, b->worker_epoch);
        ret->generation = b->generation;
        ret->background = b->background;
        ret->timeout_seconds = b->timeout_seconds;
        ret->status = EXEC_RUNNING;
        ret->created_at = ret->started_at = b->now;
}

/* Why the insert of exec_begin inserted nothing: the fence (-ENOENT, -ESTALE, -EBUSY, in that
 * order; a RELEASED sandbox is -ENOENT), else the exec_id exists in this lifecycle: a retry
 * (its record) or a conflict (-EEXIST). */
static int begin_diagnose_locked(SqliteConn *c, const ExecBegin *b, ExecRecord *ret) {
        _cleanup_stmt_ sqlite3_stmt *fence = NULL;
        ExecRecord rec;
        const char *lifecycle, *status;
        int r;

        r = prepare_bind(c, STMT_EXEC_FENCE, &fence, "tt", b->owner, b->sandbox_id);
        if (r < 0)
                return r;
        r = store_sqlite_step(fence);
        if (r < 0)
                return r;
        if (r == 0)
                return -ENOENT;
        /* Another lifecycle, or this one released: for this request there is no sandbox (as the
         * core answers a RELEASED one: not found). */
        lifecycle = (const char *) sqlite3_column_text(fence, 0);
        status = (const char *) sqlite3_column_text(fence, 2);
        if (!lifecycle || !status || !streq(lifecycle, b->lifecycle_id) ||
            streq(status, sandbox_status_to_string(SANDBOX_RELEASED)))
                return -ENOENT;
        if (col_u64(fence, 1) != b->generation)
                return -ESTALE;
        if (!streq(status, sandbox_status_to_string(SANDBOX_READY)))
                return -EBUSY;

        r = get_locked(c, b->owner, b->sandbox_id, b->lifecycle_id, b->exec_id, &rec);
        if (r == -ENOENT)
                return -EIO; /* the fence passed and the key is free: the insert cannot have done nothing */
        if (r < 0)
                return r;
        if (!streq(rec.fingerprint, b->fingerprint)) {
                exec_record_clear(&rec);
                return -EEXIST;
        }
        *ret = rec;
        return 0;
}

/* Returns 1 when a record was created (and *RET built from B), 0 when an existing one was
 * returned in *RET, or -errno. */
static int begin_locked(SqliteConn *c, const ExecBegin *b, ExecRecord *ret) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        const char *scope = isempty(b->exec_scope) ? NULL : b->exec_scope;
        int r;

        /* A generation that cannot be stored cannot be current either. */
        if (b->generation > INT64_MAX)
                return begin_diagnose_locked(c, b, ret);

        r = prepare_bind(c, STMT_EXEC_INSERT, &st, "tttttuttttttbuttu", b->owner, b->sandbox_id, b->lifecycle_id,
                         b->exec_id, b->exec_uid, b->generation, b->fingerprint, b->principal ?: "", b->argv_json,
                         b->cwd, b->env_keys_json ?: "[]", scope, (int) b->background, b->timeout_seconds,
                         b->worker_id, b->worker_epoch, (uint64_t) b->now);
        if (r < 0)
                return r;
        r = store_sqlite_step(st);
        if (r < 0)
                return r;
        if (sqlite3_changes(c->db) == 0)
                return begin_diagnose_locked(c, b, ret);
        record_from_begin(b, ret);
        return 1;
}

int store_sqlite_exec_begin(Store *s, const ExecBegin *b, ExecRecord *ret, bool *ret_created) {
        ExecRecord rec = {};
        SqliteConn *c;
        int r;

        if (!ret || !ret_created || !exec_begin_ok(b))
                return -EINVAL;

        r = store_sqlite_write_begin(sq(s), &c);
        if (r < 0)
                return r;
        /* Committed before we return: the RUNNING record is durable before the process starts. */
        r = store_sqlite_write_end(sq(s), begin_locked(c, b, &rec));
        if (r < 0) {
                exec_record_clear(&rec); /* an existing record read before a failed commit */
                return r;
        }
        *ret = rec;
        *ret_created = r > 0;
        return 0;
}

/* ---- finish ---- */

static bool exec_finish_ok(const ExecFinish *f) {
        return f && str_nonempty_ok(f->owner, OWNER_MAX) && str_nonempty_ok(f->sandbox_id, SANDBOX_ID_MAX) &&
               str_nonempty_ok(f->lifecycle_id, OPAQUE_ID_LEN) && str_nonempty_ok(f->exec_id, EXEC_ID_MAX) &&
               str_nonempty_ok(f->worker_epoch, EPOCH_LEN) && f->status > EXEC_RUNNING &&
               f->status < _EXEC_STATUS_MAX && (!f->stdout_data || f->stdout_len <= EXEC_INLINE_OUTPUT_MAX) &&
               (!f->stderr_data || f->stderr_len <= EXEC_INLINE_OUTPUT_MAX) && f->started_at <= INT64_MAX &&
               f->finished_at <= INT64_MAX;
}

static int bind_output(sqlite3_stmt *st, int i, const char *data, size_t len) {
        int rc;

        if (!data)
                rc = sqlite3_bind_null(st, i);
        else if (len == 0)
                rc = sqlite3_bind_zeroblob(st, i, 0); /* empty but inline: not NULL */
        else
                rc = sqlite3_bind_blob(st, i, data, (int) len, SQLITE_STATIC);
        return rc == SQLITE_OK ? 0 : store_sqlite_errno(rc);
}

static int bind_finish(sqlite3_stmt *st, const ExecFinish *f) {
        int rc, r;

        r = store_sqlite_binds(st, "ttttt", f->owner, f->sandbox_id, f->lifecycle_id, f->exec_id, f->worker_epoch);
        if (r < 0)
                return r;
        rc = sqlite3_bind_text(st, 6, exec_status_to_string(f->status), -1, SQLITE_STATIC);
        if (rc == SQLITE_OK)
                rc = f->has_exit_code ? sqlite3_bind_int(st, 7, f->exit_code) : sqlite3_bind_null(st, 7);
        if (rc == SQLITE_OK)
                rc = f->signal != 0 ? sqlite3_bind_int(st, 8, f->signal) : sqlite3_bind_null(st, 8);
        if (rc == SQLITE_OK)
                rc = sqlite3_bind_int(st, 9, f->truncated);
        if (rc != SQLITE_OK)
                return store_sqlite_errno(rc);
        r = bind_output(st, 10, f->stdout_data, f->stdout_len);
        if (r < 0)
                return r;
        r = bind_output(st, 11, f->stderr_data, f->stderr_len);
        if (r < 0)
                return r;

        /* Parameters 12..19, bound through a second call (the helper numbers from 1). */
        rc = sqlite3_bind_int64(st, 12, (sqlite3_int64) MIN(f->stdout_bytes, (uint64_t) INT64_MAX));
        if (rc == SQLITE_OK)
                rc = sqlite3_bind_int64(st, 13, (sqlite3_int64) MIN(f->stderr_bytes, (uint64_t) INT64_MAX));
        if (rc == SQLITE_OK)
                rc = sqlite3_bind_int64(st, 14, (sqlite3_int64) MIN(f->cpu_ms, (uint64_t) INT64_MAX));
        if (rc == SQLITE_OK)
                rc = sqlite3_bind_int64(st, 15, (sqlite3_int64) MIN(f->max_rss_bytes, (uint64_t) INT64_MAX));
        if (rc == SQLITE_OK)
                rc = sqlite3_bind_int(st, 16, f->oom_killed);
        if (rc == SQLITE_OK)
                rc = sqlite3_bind_int64(st, 17, (sqlite3_int64) f->started_at);
        if (rc == SQLITE_OK)
                rc = sqlite3_bind_int64(st, 18, (sqlite3_int64) f->finished_at);
        if (rc == SQLITE_OK)
                rc = sqlite3_bind_int64(st, 19, (sqlite3_int64) MIN(f->duration_ms, (uint64_t) INT64_MAX));
        return rc == SQLITE_OK ? 0 : store_sqlite_errno(rc);
}

static int finish_locked(SqliteConn *c, const ExecFinish *f) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL, *look = NULL;
        int r;

        r = store_sqlite_stmt(c, STMT_EXEC_FINISH, &st);
        if (r < 0)
                return r;
        r = bind_finish(st, f);
        if (r < 0)
                return r;
        r = store_sqlite_step(st);
        if (r < 0)
                return r;
        if (sqlite3_changes(c->db) > 0)
                return 0;

        /* Nothing matched: unknown, or no longer RUNNING under this epoch. */
        r = prepare_bind(c, STMT_EXEC_STATUS, &look, "tttt", f->owner, f->sandbox_id, f->lifecycle_id, f->exec_id);
        if (r < 0)
                return r;
        r = store_sqlite_step(look);
        if (r < 0)
                return r;
        return r == 0 ? -ENOENT : -EBUSY;
}

int store_sqlite_exec_finish(Store *s, const ExecFinish *f) {
        SqliteConn *c;
        int r;

        if (!exec_finish_ok(f))
                return -EINVAL;
        r = store_sqlite_write_begin(sq(s), &c);
        if (r < 0)
                return r;
        return store_sqlite_write_end(sq(s), finish_locked(c, f));
}

/* ---- get ---- */

int store_sqlite_exec_get(Store *s, const char *owner, const char *sandbox_id, const char *lifecycle_id,
                          const char *exec_id, ExecRecord *ret) {
        ExecRecord rec = {};
        SqliteConn *c;
        int r;

        if (!ret || !str_nonempty_ok(owner, OWNER_MAX) || !str_nonempty_ok(sandbox_id, SANDBOX_ID_MAX) ||
            !str_nonempty_ok(lifecycle_id, OPAQUE_ID_LEN) || !str_nonempty_ok(exec_id, EXEC_ID_MAX))
                return -EINVAL;
        r = store_sqlite_read_begin(sq(s), false, &c);
        if (r < 0)
                return r;
        r = store_sqlite_read_end(sq(s), c, false, get_locked(c, owner, sandbox_id, lifecycle_id, exec_id, &rec));
        if (r < 0)
                return r;
        *ret = rec;
        return 0;
}

/* ---- worker restart, retention ---- */

static int mark_lost_locked(SqliteConn *c, const char *worker_id, const char *current_epoch, usec_t now) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = prepare_bind(c, STMT_EXEC_MARK_LOST, &st, "ttu", worker_id, current_epoch, (uint64_t) now);
        if (r < 0)
                return r;
        r = store_sqlite_step(st);
        if (r < 0)
                return r;
        return sqlite3_changes(c->db);
}

int store_sqlite_exec_mark_lost(Store *s, const char *worker_id, const char *current_epoch, usec_t now) {
        SqliteConn *c;
        int r;

        if (!str_nonempty_ok(worker_id, WORKER_ID_MAX) || !str_nonempty_ok(current_epoch, EPOCH_LEN) ||
            now > INT64_MAX)
                return -EINVAL;
        r = store_sqlite_write_begin(sq(s), &c);
        if (r < 0)
                return r;
        return store_sqlite_write_end(sq(s), mark_lost_locked(c, worker_id, current_epoch, now));
}

/* One batch: selects up to MAX rows, collects the exec_uids of the spooled ones into RET (so at
 * most MAX: they always fit), then deletes the rows. The selection is read completely before
 * the first delete (deleting from a table under a pending scan of it is undefined in SQLite);
 * ROWIDS is the caller's scratch array of MAX entries. Returns the number of rows deleted. */
static int prune_locked(SqliteConn *c, usec_t before, char (*ret)[OPAQUE_ID_LEN + 1], sqlite3_int64 *rowids,
                        size_t max, size_t *ret_count) {
        _cleanup_stmt_ sqlite3_stmt *sel = NULL;
        size_t n = 0, rows = 0;
        int r;

        r = prepare_bind(c, STMT_EXEC_PRUNE_SELECT, &sel, "uc", (uint64_t) before, (uint64_t) max);
        if (r < 0)
                return r;
        while (rows < max) {
                r = store_sqlite_step(sel);
                if (r < 0)
                        return r;
                if (r == 0)
                        break;
                rowids[rows++] = sqlite3_column_int64(sel, 0);
                if (sqlite3_column_int(sel, 2) == 0)
                        continue; /* both outputs were inline: nothing on disk */
                r = col_str(sel, 1, ret[n], OPAQUE_ID_LEN + 1);
                if (r < 0)
                        return r;
                n++;
        }
        store_sqlite_stmt_releasep(&sel);

        for (size_t i = 0; i < rows; i++) {
                _cleanup_stmt_ sqlite3_stmt *del = NULL;

                r = store_sqlite_stmt(c, STMT_EXEC_DELETE, &del);
                if (r < 0)
                        return r;
                if (sqlite3_bind_int64(del, 1, rowids[i]) != SQLITE_OK)
                        return -EIO;
                r = store_sqlite_step(del);
                if (r < 0)
                        return r;
                if (sqlite3_changes(c->db) != 1)
                        return -EIO; /* under the write lock nothing else can have deleted it */
        }
        *ret_count = n;
        return (int) rows;
}

int store_sqlite_exec_prune(Store *s, usec_t before, char (*ret_exec_uids)[OPAQUE_ID_LEN + 1], size_t max,
                            size_t *ret_count) {
        _cleanup_free_ char(*uids)[OPAQUE_ID_LEN + 1] = NULL;
        _cleanup_free_ sqlite3_int64 *rowids = NULL;
        size_t n = 0;
        SqliteConn *c;
        int r;

        if (!ret_exec_uids || !ret_count || max == 0 || max > EXEC_PRUNE_BATCH_MAX || before > INT64_MAX)
                return -EINVAL;
        /* Collected aside: a transaction that rolls back must leave RET untouched. */
        uids = calloc(max, sizeof *uids);
        rowids = calloc(max, sizeof *rowids);
        if (!uids || !rowids)
                return -ENOMEM;
        r = store_sqlite_write_begin(sq(s), &c);
        if (r < 0)
                return r;
        r = store_sqlite_write_end(sq(s), prune_locked(c, before, uids, rowids, max, &n));
        if (r < 0)
                return r;
        memcpy(ret_exec_uids, uids, n * sizeof *uids);
        *ret_count = n;
        return r;
}
