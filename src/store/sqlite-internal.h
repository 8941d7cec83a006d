/* SPDX-License-Identifier: MIT */
#pragma once

/* Shared between the files of the SQLite store; nothing outside src/store includes this. */

#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>

#include "store.h"
#include "string-util.h"

#define STORE_SQLITE_DB_NAME "sandloom.db"

/* The highest schema version this binary knows, which is also its compatibility level: it can
 * use any database whose migrations all say min_binary <= this. */
#define STORE_SQLITE_SCHEMA_LEVEL 2U

/* Read connections are opened on demand up to this many; more concurrent readers wait. */
#define STORE_SQLITE_READERS_MAX 8

/* Every statement the store runs, prepared once per connection on first use. */
typedef enum SqliteStmt {
        STMT_BEGIN,
        STMT_BEGIN_IMMEDIATE,
        STMT_COMMIT,
        STMT_ROLLBACK,
        STMT_SANDBOX_GET,
        STMT_SANDBOX_GET_INTERNAL,
        STMT_SANDBOX_FENCE,
        STMT_SANDBOX_INSERT,
        STMT_SANDBOX_RENEW,
        STMT_SANDBOX_CAS_STATUS,
        STMT_SANDBOX_TOUCH,
        STMT_SANDBOX_REOWN_EVENTS,
        STMT_SANDBOX_REOWN,
        STMT_SANDBOX_LIST,
        STMT_SANDBOX_COUNT,
        STMT_SANDBOX_LIST_RELEASING,
        STMT_SANDBOX_STATUS_COUNTS,
        STMT_EVENT_APPEND,
        STMT_EVENT_LIST,
        STMT_EVENT_COUNT,
        STMT_UID_TAKEN,
        STMT_UID_FIRST_FREE,
        STMT_UID_INSERT,
        STMT_UID_QUARANTINE,
        STMT_UID_LIST_QUARANTINED,
        STMT_UID_STATE,
        STMT_UID_FREE,
        STMT_WORKER_EPOCH,
        STMT_WORKER_UPSERT,
        STMT_EXEC_INSERT,
        STMT_EXEC_FENCE,
        STMT_EXEC_GET,
        STMT_EXEC_STATUS,
        STMT_EXEC_FINISH,
        STMT_EXEC_MARK_LOST,
        STMT_EXEC_PRUNE_SELECT,
        STMT_EXEC_DELETE,
        _STMT_MAX,
} SqliteStmt;

/* The SQL text of each statement (sqlite.c). */
extern const char *const store_sqlite_sql[_STMT_MAX];

typedef struct SqliteConn {
        sqlite3 *db;
        sqlite3_stmt *stmts[_STMT_MAX];
        struct SqliteConn *next_free;
} SqliteConn;

typedef struct SqliteStore {
        Store base; /* first: a Store * is a SqliteStore * */
        char *path;
        uint64_t busy_timeout_ms;
        unsigned schema_version; /* of the database (may be above ours if compatible) */

        /* One connection for all writes: the mutex orders them in-process, BEGIN IMMEDIATE
         * against other processes, so a transaction never has to be retried half-way. */
        pthread_mutex_t write_lock;
        SqliteConn *writer;

        /* Readers: WAL lets them run beside the writer on their own snapshot. */
        pthread_mutex_t pool_lock;
        pthread_cond_t pool_cond;
        SqliteConn *readers[STORE_SQLITE_READERS_MAX];
        size_t n_readers;
        SqliteConn *free_readers;

        /* The WAL checkpointer: commits never checkpoint (wal_autocheckpoint = 0 on the
         * writer); this thread does, on a connection of its own, a few times a second. */
        SqliteConn *checkpointer;
        pthread_t checkpoint_thread;
        bool checkpoint_running;
        bool checkpoint_stop;
        pthread_mutex_t checkpoint_lock;
        pthread_cond_t checkpoint_cond;
} SqliteStore;

/* SQLite result code -> negative errno (-EBUSY for BUSY/LOCKED, -ENOMEM, else -EIO). */
int store_sqlite_errno(int rc);

int store_sqlite_conn_open(const char *path, uint64_t busy_timeout_ms, bool writer, SqliteConn **ret);
void store_sqlite_conn_close(SqliteConn *c);

/* The cached statement ID of C, ready to bind. Release it with _cleanup_stmt_ (reset and
 * clear the bindings) before the transaction ends. */
int store_sqlite_stmt(SqliteConn *c, SqliteStmt id, sqlite3_stmt **ret);
void store_sqlite_stmt_releasep(sqlite3_stmt **st);
#define _cleanup_stmt_ _cleanup_(store_sqlite_stmt_releasep)

/* Binds parameters 1.. from TYPES: 't' const char * (NULL binds NULL), 'u' uint64_t (must fit
 * in int64, else -EINVAL), 'c' uint64_t clamped to INT64_MAX (limits and offsets), 'b' int as
 * a boolean. Pass exactly these types: the arguments are read with va_arg. */
int store_sqlite_binds(sqlite3_stmt *st, const char *types, ...);

/* Prepares statement ID of C and binds it; the caller releases *RET with _cleanup_stmt_. */
#define prepare_bind(c, id, ret, types, ...)                                                    \
        ({                                                                                       \
                int _r = store_sqlite_stmt((c), (id), (ret));                                    \
                if (_r >= 0)                                                                     \
                        _r = store_sqlite_binds(*(ret), (types), __VA_ARGS__);                   \
                _r;                                                                              \
        })

/* One step: 1 = a row, 0 = done, or -errno. */
int store_sqlite_step(sqlite3_stmt *st);
/* Runs a parameterless statement to completion. */
int store_sqlite_run(SqliteConn *c, SqliteStmt id);

/* Takes the write connection and opens BEGIN IMMEDIATE. Every write_begin that succeeded is
 * followed by write_end(R): commits when R >= 0, rolls back otherwise; returns R or the commit
 * error. */
int store_sqlite_write_begin(SqliteStore *s, SqliteConn **ret);
int store_sqlite_write_end(SqliteStore *s, int r);

/* Takes a read connection, in a read transaction when TXN (for a consistent snapshot across
 * several statements); read_end gives it back and returns R. */
int store_sqlite_read_begin(SqliteStore *s, bool txn, SqliteConn **ret);
int store_sqlite_read_end(SqliteStore *s, SqliteConn *c, bool txn, int r);

void store_sqlite_pool_close(SqliteStore *s);

/* Applies pending migrations in one transaction on DB, or refuses (-EPROTO) a database that
 * needs a newer binary. Writes a sentence to ERRBUF on failure. */
int store_sqlite_migrate(sqlite3 *db, const char *path, unsigned *ret_version, char *errbuf, size_t errlen);

/* The operations, one file per concern (sqlite-sandbox.c, sqlite-uid.c, sqlite-exec.c); sqlite.c assembles
 * them into the StoreOps table. */
int store_sqlite_sandbox_resolve(Store *s, const ResolveRequest *q, SandboxRecord *ret, bool *ret_created);
int store_sqlite_sandbox_get(Store *s, const char *owner, const char *sandbox_id, SandboxRecord *ret);
int store_sqlite_sandbox_get_internal(Store *s, const char *internal_id, SandboxRecord *ret);
int store_sqlite_sandbox_list(Store *s, const SandboxFilter *f, SandboxRecord *ret, size_t *ret_count,
                              uint64_t *ret_total);
int store_sqlite_sandbox_transition(Store *s, const char *owner, const char *sandbox_id, uint64_t generation,
                                    SandboxStatus from, SandboxStatus to, const char *event, const char *principal,
                                    const char *reason, usec_t now, SandboxRecord *ret);
int store_sqlite_sandbox_touch(Store *s, const char *owner, const char *sandbox_id, uint64_t generation, usec_t now);
int store_sqlite_sandbox_reown(Store *s, const char *worker_id, const char *previous_epoch, const char *new_epoch,
                               usec_t now);
int store_sqlite_sandbox_list_releasing(Store *s, const char *worker_id, SandboxRecord *ret, size_t max,
                                        size_t *ret_count);
int store_sqlite_history_list(Store *s, const char *owner, const char *sandbox_id, uint64_t offset,
                              LifecycleEvent *ret, size_t max, size_t *ret_count, uint64_t *ret_total);
int store_sqlite_uid_list_quarantined(Store *s, usec_t before, uint32_t *ret, size_t max, size_t *ret_count);
int store_sqlite_uid_free(Store *s, uint32_t uid);
int store_sqlite_exec_begin(Store *s, const ExecBegin *b, ExecRecord *ret, bool *ret_created);
int store_sqlite_exec_finish(Store *s, const ExecFinish *f);
int store_sqlite_exec_get(Store *s, const char *owner, const char *sandbox_id, const char *lifecycle_id,
                          const char *exec_id, ExecRecord *ret);
int store_sqlite_exec_mark_lost(Store *s, const char *worker_id, const char *current_epoch, usec_t now);
int store_sqlite_exec_prune(Store *s, usec_t before, char (*ret_exec_uids)[OPAQUE_ID_LEN + 1], size_t max,
                            size_t *ret_count);

/* Inside the write transaction of a resolve: takes a free uid of the request's range for
 * INTERNAL_ID's new lifecycle (-ENOSPC when there is none). */
int store_sqlite_uid_claim(SqliteConn *c, const ResolveRequest *q, const char *internal_id, uint32_t *ret);

/* Small helpers shared by the operation files. */
static inline SqliteStore *sq(Store *s) {
        return (SqliteStore *) s;
}

static inline bool str_ok(const char *s, size_t max) {
        return s && strnlen(s, max + 1) <= max;
}

static inline bool str_nonempty_ok(const char *s, size_t max) {
        return str_ok(s, max) && s[0] != '\0';
}

/* A text column into a record's buffer; longer than the record allows means the row was not
 * written by this binary: -EIO. */
static inline int col_str(sqlite3_stmt *st, int i, char *buf, size_t size) {
        const char *t = (const char *) sqlite3_column_text(st, i);
        return strscpy(buf, size, t ?: "") < 0 ? -EIO : 0;
}

static inline uint64_t col_u64(sqlite3_stmt *st, int i) {
        sqlite3_int64 v = sqlite3_column_int64(st, i);
        return v < 0 ? 0 : (uint64_t) v;
}
