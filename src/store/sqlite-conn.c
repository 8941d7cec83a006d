/* SPDX-License-Identifier: MIT */
/* Connections of the SQLite store: opening and tuning them, the per-connection statement
 * cache, the write lock and the pool of read connections. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "macros.h"
#include "sqlite-internal.h"

int store_sqlite_errno(int rc) {
        switch (rc & 0xff) {
        case SQLITE_BUSY:
        case SQLITE_LOCKED:
                return -EAGAIN;
        case SQLITE_NOMEM:
                return -ENOMEM;
        default:
                return -EIO;
        }
}

void store_sqlite_conn_close(SqliteConn *c) {
        if (!c)
                return;
        for (size_t i = 0; i < _STMT_MAX; i++)
                sqlite3_finalize(c->stmts[i]);
        /* Every statement is finalized, so close cannot be refused; the last connection to go
         * checkpoints the WAL and removes it. */
        sqlite3_close(c->db);
        free(c);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(SqliteConn *, store_sqlite_conn_close);

static int exec_sql(sqlite3 *db, const char *sql) {
        int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
        return rc == SQLITE_OK ? 0 : store_sqlite_errno(rc);
}

static int enable_wal(sqlite3 *db) {
        sqlite3_stmt *st = NULL;
        int rc, r = 0;

        rc = sqlite3_prepare_v2(db, "PRAGMA journal_mode = WAL", -1, &st, NULL);
        if (rc != SQLITE_OK)
                return store_sqlite_errno(rc);
        rc = sqlite3_step(st);
        if (rc != SQLITE_ROW)
                r = store_sqlite_errno(rc);
        else if (!sqlite3_column_text(st, 0) || strcmp((const char *) sqlite3_column_text(st, 0), "wal") != 0)
                r = -EIO; /* e.g. a filesystem without shared memory: refuse rather than run slow */
        sqlite3_finalize(st);
        return r;
}

int store_sqlite_conn_open(const char *path, uint64_t busy_timeout_ms, bool writer, SqliteConn **ret) {
        _cleanup_(store_sqlite_conn_closep) SqliteConn *c = NULL;
        int rc, r;

        c = calloc(1, sizeof *c);
        if (!c)
                return -ENOMEM;

        /* NOMUTEX: a connection is only ever used by one thread at a time (the write lock or
         * the pool hands it out), so SQLite's own per-connection mutex would be pure cost.
         * NOFOLLOW: the database is never reached through a symlink planted in the data dir. */
        rc = sqlite3_open_v2(path, &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW,
                             NULL);
        if (rc != SQLITE_OK)
                return store_sqlite_errno(rc);
        sqlite3_extended_result_codes(c->db, 1);
        rc = sqlite3_busy_timeout(c->db, (int) MIN(busy_timeout_ms, (uint64_t) INT_MAX));
        if (rc != SQLITE_OK)
                return store_sqlite_errno(rc);

        r = exec_sql(c->db, "PRAGMA foreign_keys = ON; PRAGMA trusted_schema = OFF");
        if (r < 0)
                return r;
        /* The page cache is per connection (the writer, up to STORE_SQLITE_READERS_MAX
         * readers, the checkpointer): SQLite's default of 2 MiB each lets the daemon's memory
         * grow by up to ~20 MiB with the database (10,000 idle sandboxes: +9.0 MiB RSS with
         * 4 MiB / 2 MiB, +7.5 with 2 MiB / 512 KiB, +5.2 with 256 / 128 KiB). A miss costs a
         * pread from the OS page cache. */
        r = exec_sql(c->db, writer ? "PRAGMA cache_size = -1024" : "PRAGMA cache_size = -256");
        if (r < 0)
                return r;

        if (writer) {
                r = enable_wal(c->db);
                if (r < 0)
                        return r;
                /* synchronous = NORMAL: in WAL mode a commit is an append to the WAL without an
                 * fsync; the WAL is synced at checkpoints. The database stays consistent in
                 * every case and a commit survives a crash of the daemon (what "the RUNNING
                 * record is durable before the process starts" needs: the data is in the
                 * kernel's page cache). Only a power loss or kernel crash can roll back the
                 * last commits, and that also takes every sandbox process with it. FULL would
                 * add an fsync to every commit -- milliseconds on ordinary disks, with two or
                 * more commits per exec -- which alone would cap the daemon far below its
                 * 500 execs/s target. */
                r = exec_sql(c->db, "PRAGMA synchronous = NORMAL");
        } else
                /* A read connection can never write, whatever bug calls it. */
                r = exec_sql(c->db, "PRAGMA query_only = ON");
        if (r < 0)
                return r;

        *ret = TAKE_PTR(c);
        return 0;
}

int store_sqlite_stmt(SqliteConn *c, SqliteStmt id, sqlite3_stmt **ret) {
        int rc;

        if ((unsigned) id >= _STMT_MAX)
                return -EINVAL;
        if (!c->stmts[id]) {
                rc = sqlite3_prepare_v3(c->db, store_sqlite_sql[id], -1, SQLITE_PREPARE_PERSISTENT,
                                        &c->stmts[id], NULL);
                if (rc != SQLITE_OK)
                        return store_sqlite_errno(rc);
        }
        *ret = c->stmts[id];
        return 0;
}

void store_sqlite_stmt_releasep(sqlite3_stmt **st) {
        if (!*st)
                return;
        sqlite3_reset(*st);
        sqlite3_clear_bindings(*st);
        *st = NULL;
}

int store_sqlite_binds(sqlite3_stmt *st, const char *types, ...) {
        va_list ap;
        int rc = SQLITE_OK, i = 1, r = 0;

        va_start(ap, types);
        for (const char *t = types; *t && rc == SQLITE_OK && r == 0; t++, i++)
                switch (*t) {
                case 't':
                        rc = sqlite3_bind_text(st, i, va_arg(ap, const char *), -1, SQLITE_STATIC);
                        break;
                case 'u': {
                        uint64_t v = va_arg(ap, uint64_t);
                        if (v > INT64_MAX)
                                r = -EINVAL;
                        else
                                rc = sqlite3_bind_int64(st, i, (sqlite3_int64) v);
                        break;
                }
                case 'c': {
                        uint64_t v = va_arg(ap, uint64_t);
                        rc = sqlite3_bind_int64(st, i, (sqlite3_int64) MIN(v, (uint64_t) INT64_MAX));
                        break;
                }
                case 'b':
                        rc = sqlite3_bind_int(st, i, va_arg(ap, int) != 0);
                        break;
                default:
                        r = -EINVAL;
                }
        va_end(ap);
        if (r < 0)
                return r;
        return rc == SQLITE_OK ? 0 : store_sqlite_errno(rc);
}

int store_sqlite_step(sqlite3_stmt *st) {
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
                return 1;
        if (rc == SQLITE_DONE)
                return 0;
        return store_sqlite_errno(rc);
}

int store_sqlite_run(SqliteConn *c, SqliteStmt id) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = store_sqlite_stmt(c, id, &st);
        if (r < 0)
                return r;
        do
                r = store_sqlite_step(st);
        while (r > 0);
        return r;
}

int store_sqlite_write_begin(SqliteStore *s, SqliteConn **ret) {
        int r;

        pthread_mutex_lock(&s->write_lock);
        r = store_sqlite_run(s->writer, STMT_BEGIN_IMMEDIATE);
        if (r < 0) {
                pthread_mutex_unlock(&s->write_lock);
                return r;
        }
        *ret = s->writer;
        return 0;
}

int store_sqlite_write_end(SqliteStore *s, int r) {
        if (r >= 0) {
                int q = store_sqlite_run(s->writer, STMT_COMMIT);
                if (q < 0)
                        r = q;
        }
        /* A failed COMMIT (BUSY) leaves the transaction open; some errors already rolled it
         * back. Either way nothing of it may stay. */
        if (r < 0 && !sqlite3_get_autocommit(s->writer->db))
                (void) store_sqlite_run(s->writer, STMT_ROLLBACK);
        pthread_mutex_unlock(&s->write_lock);
        return r;
}

static void reader_put(SqliteStore *s, SqliteConn *c) {
        pthread_mutex_lock(&s->pool_lock);
        c->next_free = s->free_readers;
        s->free_readers = c;
        pthread_cond_signal(&s->pool_cond);
        pthread_mutex_unlock(&s->pool_lock);
}

static int reader_get(SqliteStore *s, SqliteConn **ret) {
        SqliteConn *c;
        int r = 0;

        pthread_mutex_lock(&s->pool_lock);
        for (;;) {
                if (s->free_readers) {
                        c = s->free_readers;
                        s->free_readers = c->next_free;
                        c->next_free = NULL;
                        *ret = c;
                        break;
                }
                if (s->n_readers < STORE_SQLITE_READERS_MAX) {
                        /* Opened under the pool lock: it happens at most READERS_MAX times. */
                        r = store_sqlite_conn_open(s->path, s->busy_timeout_ms, false, &c);
                        if (r >= 0) {
                                s->readers[s->n_readers++] = c;
                                *ret = c;
                        }
                        break;
                }
                pthread_cond_wait(&s->pool_cond, &s->pool_lock);
        }
        pthread_mutex_unlock(&s->pool_lock);
        return r;
}

int store_sqlite_read_begin(SqliteStore *s, bool txn, SqliteConn **ret) {
        SqliteConn *c;
        int r;

        r = reader_get(s, &c);
        if (r < 0)
                return r;
        if (txn) {
                r = store_sqlite_run(c, STMT_BEGIN);
                if (r < 0) {
                        reader_put(s, c);
                        return r;
                }
        }
        *ret = c;
        return 0;
}

int store_sqlite_read_end(SqliteStore *s, SqliteConn *c, bool txn, int r) {
        if (txn) {
                int q = store_sqlite_run(c, STMT_COMMIT);
                if (q < 0 && r >= 0)
                        r = q;
                if (!sqlite3_get_autocommit(c->db))
                        (void) store_sqlite_run(c, STMT_ROLLBACK);
        }
        reader_put(s, c);
        return r;
}

void store_sqlite_pool_close(SqliteStore *s) {
        for (size_t i = 0; i < s->n_readers; i++)
                store_sqlite_conn_close(s->readers[i]);
        s->n_readers = 0;
        s->free_readers = NULL;
}
