/* SPDX-License-Identifier: MIT */
/* The embedded SQLite store: opening it (file, WAL, migrations), the SQL of every statement,
 * the worker table, the /healthz report, and the StoreOps table. The sandbox, uid and exec
 * operations live in sqlite-sandbox.c, sqlite-uid.c and sqlite-exec.c, connections in
 * sqlite-conn.c. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "macros.h"
#include "sqlite-internal.h"
#include "string-util.h"

#define SANDBOX_COLUMNS                                                                                   \
        "owner, sandbox_id, workspace_scope_id, profile, internal_id, lifecycle_id, generation, uid, "  \
        "status, worker_id, worker_epoch, lifecycle_count, content_version, created_at, updated_at, "    \
        "connected_at, released_at, limit_memory_bytes, limit_max_processes, limit_cpu_millicores, "     \
        "limit_disk_quota_bytes"

/* Filter used by list and count: ?1 owner, ?2 scope or NULL, ?3 'ANY', 'LIVE' or a status. */
#define SANDBOX_FILTER                                                                                    \
        " WHERE owner = ?1 AND (?2 IS NULL OR workspace_scope_id = ?2)"                                   \
        " AND CASE ?3 WHEN 'ANY' THEN 1 WHEN 'LIVE' THEN status <> 'RELEASED' ELSE status = ?3 END"

/* The order col_exec() in sqlite-exec.c reads. */
#define EXEC_COLUMNS                                                                                      \
        "owner, sandbox_id, lifecycle_id, exec_id, exec_uid, fingerprint, generation, exec_scope, "      \
        "background, timeout_seconds, status, exit_code, signal, truncated, stdout_bytes, stderr_bytes, " \
        "cpu_ms, max_rss_bytes, oom_killed, worker_id, worker_epoch, created_at, started_at, "            \
        "finished_at, duration_ms, stdout, stderr"

#define EXEC_KEY " owner = ?1 AND sandbox_id = ?2 AND lifecycle_id = ?3 AND exec_id = ?4"

#define EVENT_INSERT                                                                                      \
        "INSERT INTO sandbox_events (owner, sandbox_id, lifecycle_id, generation, event, principal, "     \
        "reason, worker_id, worker_epoch, at) "

const char *const store_sqlite_sql[_STMT_MAX] = {
        [STMT_BEGIN] = "BEGIN",
        [STMT_BEGIN_IMMEDIATE] = "BEGIN IMMEDIATE",
        [STMT_COMMIT] = "COMMIT",
        [STMT_ROLLBACK] = "ROLLBACK",

        [STMT_SANDBOX_GET] = "SELECT " SANDBOX_COLUMNS " FROM sandboxes WHERE owner = ?1 AND sandbox_id = ?2",
        [STMT_SANDBOX_GET_INTERNAL] = "SELECT " SANDBOX_COLUMNS " FROM sandboxes WHERE internal_id = ?1",
        [STMT_SANDBOX_FENCE] = "SELECT generation, status FROM sandboxes WHERE owner = ?1 AND sandbox_id = ?2",
        [STMT_SANDBOX_INSERT] =
                "INSERT INTO sandboxes (" SANDBOX_COLUMNS ") "
                "VALUES (?1, ?2, ?3, ?4, ?5, ?6, 1, ?7, 'ASSIGNED', ?8, ?9, 1, 0, ?10, ?10, 0, 0, ?11, ?12, ?13, ?14)",
        /* A new lifecycle of a released row: same internal_id, everything else starts again.
         * content_version keeps counting so (internal_id, content_version) never names two
         * different contents. */
        [STMT_SANDBOX_RENEW] =
                "UPDATE sandboxes SET workspace_scope_id = ?3, profile = ?4, lifecycle_id = ?5, "
                "generation = generation + 1, uid = ?6, status = 'ASSIGNED', worker_id = ?7, worker_epoch = ?8, "
                "lifecycle_count = lifecycle_count + 1, content_version = content_version + 1, "
                "created_at = ?9, updated_at = ?9, connected_at = 0, released_at = 0, "
                "limit_memory_bytes = ?10, limit_max_processes = ?11, limit_cpu_millicores = ?12, "
                "limit_disk_quota_bytes = ?13 "
                "WHERE owner = ?1 AND sandbox_id = ?2 AND status = 'RELEASED'",
        [STMT_SANDBOX_CAS_STATUS] =
                "UPDATE sandboxes SET status = ?5, updated_at = ?6, "
                "connected_at = CASE WHEN ?7 THEN ?6 ELSE connected_at END, "
                "released_at = CASE WHEN ?8 THEN ?6 ELSE released_at END "
                "WHERE owner = ?1 AND sandbox_id = ?2 AND generation = ?3 AND status = ?4",
        [STMT_SANDBOX_TOUCH] =
                "UPDATE sandboxes SET content_version = content_version + 1, updated_at = ?4 "
                "WHERE owner = ?1 AND sandbox_id = ?2 AND generation = ?3 AND status <> 'RELEASED'",
        /* Written before the update below, with the values it is about to set. */
        [STMT_SANDBOX_REOWN_EVENTS] =
                EVENT_INSERT
                "SELECT owner, sandbox_id, lifecycle_id, generation + 1, 'reowned', 'system', 'worker restarted', "
                "worker_id, ?3, ?4 FROM sandboxes "
                "WHERE worker_id = ?1 AND worker_epoch = ?2 AND status <> 'RELEASED' ORDER BY owner, sandbox_id",
        [STMT_SANDBOX_REOWN] =
                "UPDATE sandboxes SET generation = generation + 1, worker_epoch = ?3, updated_at = ?4 "
                "WHERE worker_id = ?1 AND worker_epoch = ?2 AND status <> 'RELEASED'",
        [STMT_SANDBOX_LIST] =
                "SELECT " SANDBOX_COLUMNS " FROM sandboxes" SANDBOX_FILTER " ORDER BY sandbox_id LIMIT ?4 OFFSET ?5",
        [STMT_SANDBOX_COUNT] = "SELECT count(*) FROM sandboxes" SANDBOX_FILTER,
        [STMT_SANDBOX_LIST_RELEASING] =
                "SELECT " SANDBOX_COLUMNS " FROM sandboxes WHERE worker_id = ?1 AND status = 'RELEASING' "
                "ORDER BY owner, sandbox_id LIMIT ?2",
        [STMT_SANDBOX_STATUS_COUNTS] = "SELECT status, count(*) FROM sandboxes GROUP BY status",

        [STMT_EVENT_APPEND] =
                EVENT_INSERT
                "SELECT owner, sandbox_id, lifecycle_id, generation, ?3, ?4, ?5, worker_id, worker_epoch, ?6 "
                "FROM sandboxes WHERE owner = ?1 AND sandbox_id = ?2",
        [STMT_EVENT_LIST] =
                "SELECT seq, lifecycle_id, generation, event, principal, reason, worker_id, worker_epoch, at "
                "FROM sandbox_events WHERE owner = ?1 AND sandbox_id = ?2 ORDER BY seq LIMIT ?3 OFFSET ?4",
        [STMT_EVENT_COUNT] = "SELECT count(*) FROM sandbox_events WHERE owner = ?1 AND sandbox_id = ?2",

        [STMT_UID_TAKEN] = "SELECT 1 FROM uids WHERE uid = ?1",
        /* The lowest free uid of [?1, ?2]: the start itself, or one just above a taken one. */
        [STMT_UID_FIRST_FREE] =
                "SELECT ?1 WHERE NOT EXISTS (SELECT 1 FROM uids WHERE uid = ?1) "
                "UNION ALL "
                "SELECT a.uid + 1 FROM uids AS a WHERE a.uid >= ?1 AND a.uid < ?2 "
                "AND NOT EXISTS (SELECT 1 FROM uids AS b WHERE b.uid = a.uid + 1) "
                "ORDER BY 1 LIMIT 1",
        [STMT_UID_INSERT] =
                "INSERT INTO uids (uid, state, internal_id, lifecycle_id, since) VALUES (?1, 'live', ?2, ?3, ?4)",
        [STMT_UID_QUARANTINE] =
                "UPDATE uids SET state = 'quarantined', since = ?3 "
                "WHERE (uid, lifecycle_id) = (SELECT uid, lifecycle_id FROM sandboxes WHERE owner = ?1 AND sandbox_id = ?2) "
                "AND state = 'live'",
        [STMT_UID_LIST_QUARANTINED] =
                "SELECT uid FROM uids WHERE state = 'quarantined' AND since < ?1 ORDER BY since, uid LIMIT ?2",
        [STMT_UID_STATE] = "SELECT state FROM uids WHERE uid = ?1",
        [STMT_UID_FREE] = "DELETE FROM uids WHERE uid = ?1 AND state = 'quarantined'",

        [STMT_WORKER_EPOCH] = "SELECT worker_epoch FROM workers WHERE worker_id = ?1",
        [STMT_WORKER_UPSERT] =
                "INSERT INTO workers (worker_id, worker_epoch, endpoint, capabilities, started_at, heartbeat_at) "
                "VALUES (?1, ?2, ?3, ?4, ?5, ?5) ON CONFLICT (worker_id) DO UPDATE SET "
                "started_at = CASE WHEN worker_epoch = excluded.worker_epoch THEN started_at ELSE excluded.started_at END, "
                "worker_epoch = excluded.worker_epoch, endpoint = excluded.endpoint, "
                "capabilities = excluded.capabilities, heartbeat_at = excluded.heartbeat_at",

        /* The fence and the insert in one statement: a row is inserted only when the sandbox is
         * READY in this lifecycle and generation and the exec_id is new in it. Inserting nothing
         * sends the caller to STMT_EXEC_FENCE/STMT_EXEC_GET to learn why, off the hot path. */
        [STMT_EXEC_INSERT] =
                "INSERT INTO execs (owner, sandbox_id, lifecycle_id, exec_id, exec_uid, generation, fingerprint, "
                "principal, argv, cwd, env_keys, exec_scope, background, timeout_seconds, status, worker_id, "
                "worker_epoch, created_at, started_at) "
                "SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, 'RUNNING', ?15, ?16, ?17, ?17 "
                "FROM sandboxes WHERE owner = ?1 AND sandbox_id = ?2 AND lifecycle_id = ?3 AND generation = ?6 "
                "AND status = 'READY' "
                "ON CONFLICT (owner, sandbox_id, lifecycle_id, exec_id) DO NOTHING",
        [STMT_EXEC_FENCE] = "SELECT lifecycle_id, generation, status FROM sandboxes WHERE owner = ?1 AND sandbox_id = ?2",
        [STMT_EXEC_GET] = "SELECT " EXEC_COLUMNS " FROM execs WHERE" EXEC_KEY,
        [STMT_EXEC_STATUS] = "SELECT status FROM execs WHERE" EXEC_KEY,
        [STMT_EXEC_FINISH] =
                "UPDATE execs SET status = ?6, exit_code = ?7, signal = ?8, truncated = ?9, stdout = ?10, "
                "stderr = ?11, stdout_bytes = ?12, stderr_bytes = ?13, cpu_ms = ?14, max_rss_bytes = ?15, "
                "oom_killed = ?16, started_at = ?17, finished_at = ?18, duration_ms = ?19 "
                "WHERE" EXEC_KEY " AND status = 'RUNNING' AND worker_epoch = ?5",
        [STMT_EXEC_MARK_LOST] =
                "UPDATE execs SET status = 'WORKER_LOST', finished_at = ?3, "
                "duration_ms = CASE WHEN ?3 > started_at THEN (?3 - started_at) / 1000 ELSE 0 END "
                "WHERE worker_id = ?1 AND status = 'RUNNING' AND worker_epoch <> ?2",
        /* Oldest first, at most ?2 rows per call so that a large backlog never holds the write
         * lock for long. "finished_at > 0" lets the partial index execs_by_finished serve it.
         * Selected, then deleted by rowid (not DELETE ... RETURNING: SQLite 3.40 evaluates
         * "column IS NULL" in a DELETE's RETURNING clause wrongly). */
        [STMT_EXEC_PRUNE_SELECT] =
                "SELECT rowid, exec_uid, stdout IS NULL OR stderr IS NULL FROM execs "
                "WHERE finished_at > 0 AND finished_at < ?1 AND status <> 'RUNNING' ORDER BY finished_at LIMIT ?2",
        [STMT_EXEC_DELETE] = "DELETE FROM execs WHERE rowid = ?1",
};

#define CAPABILITIES_MAX (64 * 1024)

static int worker_register_locked(SqliteConn *c, const WorkerInfo *w, char ret_previous[EPOCH_LEN + 1]) {
        _cleanup_stmt_ sqlite3_stmt *get = NULL, *put = NULL;
        int r;

        r = prepare_bind(c, STMT_WORKER_EPOCH, &get, "t", w->worker_id);
        if (r < 0)
                return r;
        r = store_sqlite_step(get);
        if (r < 0)
                return r;
        if (r > 0) {
                r = col_str(get, 0, ret_previous, EPOCH_LEN + 1);
                if (r < 0)
                        return r;
        } else
                ret_previous[0] = '\0';

        r = prepare_bind(c, STMT_WORKER_UPSERT, &put, "ttttu", w->worker_id, w->worker_epoch, w->endpoint ?: "",
                         w->capabilities_json ?: "{}", (uint64_t) w->now);
        if (r < 0)
                return r;
        return store_sqlite_step(put);
}

static int sqlite_worker_register(Store *s, const WorkerInfo *w, char ret_previous_epoch[EPOCH_LEN + 1]) {
        char previous[EPOCH_LEN + 1];
        SqliteConn *c;
        int r;

        if (!w || !ret_previous_epoch || !str_nonempty_ok(w->worker_id, WORKER_ID_MAX) ||
            !str_nonempty_ok(w->worker_epoch, EPOCH_LEN) || (w->endpoint && !str_ok(w->endpoint, ENDPOINT_MAX)) ||
            (w->capabilities_json && !str_ok(w->capabilities_json, CAPABILITIES_MAX)))
                return -EINVAL;

        r = store_sqlite_write_begin(sq(s), &c);
        if (r < 0)
                return r;
        r = store_sqlite_write_end(sq(s), worker_register_locked(c, w, previous));
        if (r < 0)
                return r;
        memcpy(ret_previous_epoch, previous, sizeof previous);
        return 0;
}

/* ---- report, open, close ---- */

static int report_locked(SqliteConn *c, json_t *counts) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        uint64_t total = 0;
        int r;

        r = store_sqlite_stmt(c, STMT_SANDBOX_STATUS_COUNTS, &st);
        if (r < 0)
                return r;
        for (;;) {
                const char *status;
                uint64_t n;

                r = store_sqlite_step(st);
                if (r <= 0)
                        break;
                status = (const char *) sqlite3_column_text(st, 0);
                n = col_u64(st, 1);
                total += n;
                if (status && sandbox_status_from_string(status) >= 0 &&
                    json_object_set_new(counts, status, json_integer((json_int_t) n)) < 0)
                        return -ENOMEM;
        }
        if (r < 0)
                return r;
        if (json_object_set_new(counts, "total", json_integer((json_int_t) total)) < 0)
                return -ENOMEM;
        return 0;
}

static int sqlite_report(Store *s, json_t **ret) {
        _cleanup_(json_decrefp) json_t *counts = NULL, *report = NULL;
        SqliteConn *c;
        int r;

        if (!ret)
                return -EINVAL;
        counts = json_object();
        if (!counts)
                return -ENOMEM;
        for (int i = 0; i < _SANDBOX_STATUS_MAX; i++)
                if (json_object_set_new(counts, sandbox_status_to_string(i), json_integer(0)) < 0)
                        return -ENOMEM;

        r = store_sqlite_read_begin(sq(s), false, &c);
        if (r < 0)
                return r;
        r = store_sqlite_read_end(sq(s), c, false, report_locked(c, counts));
        if (r < 0)
                return r;

        /* The base name only: the report is shown to API clients, host paths are not theirs. */
        report = json_pack("{s:s, s:I, s:I, s:s, s:s, s:O}", "backend", "sqlite", "schema_version",
                           (json_int_t) sq(s)->schema_version, "binary_schema_level",
                           (json_int_t) STORE_SQLITE_SCHEMA_LEVEL, "path", STORE_SQLITE_DB_NAME, "journal_mode", "wal",
                           "sandboxes", counts);
        if (!report)
                return -ENOMEM;
        *ret = TAKE_PTR(report);
        return 0;
}

/* ---- the WAL checkpointer ---- */

#define CHECKPOINT_INTERVAL_MSEC 200
/* Past this many WAL frames (4 KiB pages), readers kept a passive checkpoint from catching
 * up for long: one that waits for them (writers wait meanwhile) keeps the WAL bounded. */
#define CHECKPOINT_FORCE_FRAMES 16384

static void *checkpoint_main(void *userdata) {
        SqliteStore *s = userdata;
        struct timespec deadline;

        pthread_mutex_lock(&s->checkpoint_lock);
        while (!s->checkpoint_stop) {
                int log = 0, done = 0;

                (void) clock_gettime(CLOCK_MONOTONIC, &deadline);
                deadline.tv_nsec += CHECKPOINT_INTERVAL_MSEC * 1000000L;
                deadline.tv_sec += deadline.tv_nsec / 1000000000L;
                deadline.tv_nsec %= 1000000000L;
                (void) pthread_cond_timedwait(&s->checkpoint_cond, &s->checkpoint_lock, &deadline);
                if (s->checkpoint_stop)
                        break;
                pthread_mutex_unlock(&s->checkpoint_lock);
                /* PASSIVE: copies what no reader still needs, never waits for the writer,
                 * and the writer never waits for it. */
                if (sqlite3_wal_checkpoint_v2(s->checkpointer->db, NULL, SQLITE_CHECKPOINT_PASSIVE, &log, &done) ==
                            SQLITE_OK &&
                    log >= CHECKPOINT_FORCE_FRAMES && done < log)
                        (void) sqlite3_wal_checkpoint_v2(s->checkpointer->db, NULL, SQLITE_CHECKPOINT_FULL, NULL, NULL);
                pthread_mutex_lock(&s->checkpoint_lock);
        }
        pthread_mutex_unlock(&s->checkpoint_lock);
        return NULL;
}

/* Without the thread, the writer keeps SQLite's automatic checkpoints. */
static void checkpoint_start(SqliteStore *s) {
        sigset_t all, old;

        if (store_sqlite_conn_open(s->path, s->busy_timeout_ms, true, &s->checkpointer) < 0)
                return;
        /* It copies WAL frames into the database; it reads no tables. */
        (void) sqlite3_exec(s->checkpointer->db, "PRAGMA cache_size = -64", NULL, NULL, NULL);
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &old);
        s->checkpoint_running = pthread_create(&s->checkpoint_thread, NULL, checkpoint_main, s) == 0;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (!s->checkpoint_running) {
                store_sqlite_conn_close(TAKE_PTR(s->checkpointer));
                return;
        }
        (void) sqlite3_exec(s->writer->db, "PRAGMA wal_autocheckpoint = 0", NULL, NULL, NULL);
}

static void checkpoint_stop(SqliteStore *s) {
        if (s->checkpoint_running) {
                pthread_mutex_lock(&s->checkpoint_lock);
                s->checkpoint_stop = true;
                pthread_cond_signal(&s->checkpoint_cond);
                pthread_mutex_unlock(&s->checkpoint_lock);
                (void) pthread_join(s->checkpoint_thread, NULL);
                s->checkpoint_running = false;
        }
        store_sqlite_conn_close(TAKE_PTR(s->checkpointer));
}

static void sqlite_close(Store *base) {
        SqliteStore *s = sq(base);

        if (!s)
                return;
        checkpoint_stop(s);
        store_sqlite_pool_close(s);
        store_sqlite_conn_close(s->writer);
        pthread_cond_destroy(&s->pool_cond);
        pthread_mutex_destroy(&s->pool_lock);
        pthread_mutex_destroy(&s->write_lock);
        pthread_cond_destroy(&s->checkpoint_cond);
        pthread_mutex_destroy(&s->checkpoint_lock);
        free(s->path);
        free(s);
}

static const StoreOps sqlite_ops = {
        .name = "sqlite",
        .close = sqlite_close,
        .worker_register = sqlite_worker_register,
        .sandbox_resolve = store_sqlite_sandbox_resolve,
        .sandbox_get = store_sqlite_sandbox_get,
        .sandbox_get_internal = store_sqlite_sandbox_get_internal,
        .sandbox_list = store_sqlite_sandbox_list,
        .sandbox_transition = store_sqlite_sandbox_transition,
        .sandbox_touch = store_sqlite_sandbox_touch,
        .sandbox_reown = store_sqlite_sandbox_reown,
        .sandbox_list_releasing = store_sqlite_sandbox_list_releasing,
        .history_list = store_sqlite_history_list,
        .uid_list_quarantined = store_sqlite_uid_list_quarantined,
        .uid_free = store_sqlite_uid_free,
        .exec_begin = store_sqlite_exec_begin,
        .exec_finish = store_sqlite_exec_finish,
        .exec_get = store_sqlite_exec_get,
        .exec_mark_lost = store_sqlite_exec_mark_lost,
        .exec_prune = store_sqlite_exec_prune,
        .report = sqlite_report,
};

/* The database holds every tenant's metadata: 0600, created by us before SQLite opens it (SQLite
 * would create it 0644 under the usual umask); the WAL and shared-memory files SQLite creates
 * later copy the database's mode. Existing files are tightened too. */
static int secure_db_files(const char *path) {
        static const char *const suffixes[] = { "-wal", "-shm" };
        _cleanup_close_ int fd = -EBADF;
        struct stat st;

        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EINVAL;
        if ((st.st_mode & 07777) != 0600 && fchmod(fd, 0600) < 0)
                return -errno;

        for (size_t i = 0; i < ELEMENTSOF(suffixes); i++) {
                _cleanup_free_ char *p = strprintf("%s%s", path, suffixes[i]);
                _cleanup_close_ int f = -EBADF;

                if (!p)
                        return -ENOMEM;
                f = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
                if (f < 0) {
                        if (errno == ENOENT)
                                continue;
                        return -errno;
                }
                if (fstat(f, &st) < 0)
                        return -errno;
                if (S_ISREG(st.st_mode) && (st.st_mode & 07777) != 0600 && fchmod(f, 0600) < 0)
                        return -errno;
        }
        return 0;
}

static void set_error(char *errbuf, size_t errlen, const char *fmt, ...) _printf_(3, 4);
static void set_error(char *errbuf, size_t errlen, const char *fmt, ...) {
        va_list ap;

        if (!errbuf || errlen == 0)
                return;
        va_start(ap, fmt);
        (void) vsnprintf(errbuf, errlen, fmt, ap);
        va_end(ap);
}

static void sqlite_store_freep(SqliteStore **s) {
        if (*s)
                sqlite_close(&(*s)->base);
}

int store_open_sqlite(const StoreOptions *opts, Store **ret, char *errbuf, size_t errlen) {
        _cleanup_(sqlite_store_freep) SqliteStore *s = NULL;
        pthread_condattr_t attr;
        int r;

        if (!opts || isempty(opts->data_dir) || !ret)
                return -EINVAL;
        if (!sqlite3_threadsafe()) {
                set_error(errbuf, errlen, "the SQLite library was built without thread support");
                return -EIO;
        }

        s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        s->base.ops = &sqlite_ops;
        s->busy_timeout_ms = opts->busy_timeout_ms;
        pthread_mutex_init(&s->write_lock, NULL);
        pthread_mutex_init(&s->pool_lock, NULL);
        pthread_cond_init(&s->pool_cond, NULL);
        pthread_mutex_init(&s->checkpoint_lock, NULL);
        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        pthread_cond_init(&s->checkpoint_cond, &attr);
        pthread_condattr_destroy(&attr);
        s->path = strprintf("%s/%s", opts->data_dir, STORE_SQLITE_DB_NAME);
        if (!s->path)
                return -ENOMEM;

        r = secure_db_files(s->path);
        if (r < 0) {
                set_error(errbuf, errlen, "creating the database at %s: %s", s->path, strerror(-r));
                return r;
        }
        r = store_sqlite_conn_open(s->path, s->busy_timeout_ms, true, &s->writer);
        if (r < 0) {
                set_error(errbuf, errlen, "opening the database at %s in WAL mode: %s", s->path, strerror(-r));
                return r;
        }
        r = store_sqlite_migrate(s->writer->db, s->path, &s->schema_version, errbuf, errlen);
        if (r < 0)
                return r;
        checkpoint_start(s);

        *ret = &TAKE_PTR(s)->base;
        return 0;
}
