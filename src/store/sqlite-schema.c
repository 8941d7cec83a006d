/* SPDX-License-Identifier: MIT */
/* The schema of the SQLite store as numbered migrations.
 *
 * Compatibility: every migration records min_binary, the oldest binary schema level that can
 * still use a database once the migration is applied. An additive migration (a new table, a
 * nullable or defaulted column, an index) keeps min_binary where it was, so an older binary
 * keeps working during a rolling upgrade; one that changes the meaning of existing data
 * raises it to its own version. A binary refuses a database whose highest min_binary is above
 * its own level, and otherwise applies the migrations it knows that are missing.
 *
 * Never edit a migration that has shipped: add the next one. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

#include "macros.h"
#include "sqlite-internal.h"
#include "string-util.h"
#include "time-util.h"

typedef struct Migration {
        unsigned version;
        unsigned min_binary;
        const char *sql;
} Migration;

/* Statuses are free text (no CHECK): SQLite cannot change a CHECK without rebuilding the
 * table, and later issues add statuses. Times are integers, microseconds since the epoch,
 * 0 = never. Rows of sandboxes are never deleted: a released sandbox keeps its internal_id
 * and its history for the next lifecycle. */
static const Migration migrations[] = {
        {
                .version = 1,
                .min_binary = 1,
                .sql =
                "CREATE TABLE workers ("
                "  worker_id TEXT PRIMARY KEY,"
                "  worker_epoch TEXT NOT NULL,"
                "  endpoint TEXT NOT NULL DEFAULT '',"
                "  capabilities TEXT NOT NULL DEFAULT '{}',"           /* a JSON object */
                "  started_at INTEGER NOT NULL,"
                "  heartbeat_at INTEGER NOT NULL"
                ") STRICT;"

                "CREATE TABLE sandboxes ("
                "  owner TEXT NOT NULL,"
                "  sandbox_id TEXT NOT NULL,"
                "  internal_id TEXT NOT NULL UNIQUE,"                  /* on-disk and kernel names */
                "  lifecycle_id TEXT NOT NULL UNIQUE,"                 /* the current lifecycle */
                "  workspace_scope_id TEXT NOT NULL,"
                "  profile TEXT NOT NULL,"
                "  generation INTEGER NOT NULL,"                       /* fencing token */
                "  uid INTEGER NOT NULL,"
                "  status TEXT NOT NULL,"
                "  worker_id TEXT NOT NULL,"
                "  worker_epoch TEXT NOT NULL,"
                "  lifecycle_count INTEGER NOT NULL,"
                "  content_version INTEGER NOT NULL DEFAULT 0,"
                "  created_at INTEGER NOT NULL,"
                "  updated_at INTEGER NOT NULL,"
                "  connected_at INTEGER NOT NULL DEFAULT 0,"
                "  released_at INTEGER NOT NULL DEFAULT 0,"
                "  PRIMARY KEY (owner, sandbox_id)"                    /* listing: owner, then id */
                ") STRICT;"
                "CREATE INDEX sandboxes_by_worker ON sandboxes (worker_id, status);"
                "CREATE INDEX sandboxes_by_scope ON sandboxes (owner, workspace_scope_id, sandbox_id);"

                /* Lifecycle history, kept forever. */
                "CREATE TABLE sandbox_events ("
                "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
                "  owner TEXT NOT NULL,"
                "  sandbox_id TEXT NOT NULL,"
                "  lifecycle_id TEXT NOT NULL,"
                "  generation INTEGER NOT NULL,"
                "  event TEXT NOT NULL,"
                "  principal TEXT NOT NULL,"
                "  reason TEXT NOT NULL,"
                "  worker_id TEXT NOT NULL,"
                "  worker_epoch TEXT NOT NULL,"
                "  at INTEGER NOT NULL,"
                "  FOREIGN KEY (owner, sandbox_id) REFERENCES sandboxes (owner, sandbox_id)"
                ") STRICT;"
                "CREATE INDEX sandbox_events_by_sandbox ON sandbox_events (owner, sandbox_id, seq);"

                /* The uid pool: a row is a uid that is not free. 'live' while its lifecycle
                 * lives, 'quarantined' from its release until the core has checked that
                 * nothing of it remains and deletes the row. */
                "CREATE TABLE uids ("
                "  uid INTEGER PRIMARY KEY,"
                "  state TEXT NOT NULL,"
                "  internal_id TEXT NOT NULL,"
                "  lifecycle_id TEXT NOT NULL,"
                "  since INTEGER NOT NULL"
                ") STRICT;"
                "CREATE INDEX uids_by_state ON uids (state, since);"

                /* Exec records (used from the exec issue on). One per (sandbox, lifecycle,
                 * exec_id): a retry in the same lifecycle finds it, a new lifecycle frees the
                 * id. The request's fingerprint tells a true retry from a conflicting reuse of
                 * the id. Environment values are never stored, only the names. */
                "CREATE TABLE execs ("
                "  owner TEXT NOT NULL,"
                "  sandbox_id TEXT NOT NULL,"
                "  lifecycle_id TEXT NOT NULL,"
                "  exec_id TEXT NOT NULL,"
                "  exec_uid TEXT NOT NULL UNIQUE,"                     /* spool files, cgroup */
                "  generation INTEGER NOT NULL,"
                "  fingerprint TEXT NOT NULL,"
                "  principal TEXT NOT NULL DEFAULT '',"
                "  argv TEXT NOT NULL,"                                /* JSON array */
                "  cwd TEXT NOT NULL,"
                "  env_keys TEXT NOT NULL DEFAULT '[]',"               /* JSON array of names */
                "  exec_scope TEXT,"                                   /* NULL: whole sandbox */
                "  background INTEGER NOT NULL DEFAULT 0,"
                "  timeout_seconds INTEGER NOT NULL,"
                "  status TEXT NOT NULL,"
                "  exit_code INTEGER,"
                "  signal INTEGER,"
                "  truncated INTEGER NOT NULL DEFAULT 0,"
                "  stdout BLOB,"                                       /* small output inline */
                "  stderr BLOB,"
                "  stdout_ref TEXT,"                                   /* else a spool file */
                "  stderr_ref TEXT,"
                "  stdout_bytes INTEGER NOT NULL DEFAULT 0,"
                "  stderr_bytes INTEGER NOT NULL DEFAULT 0,"
                "  cpu_ms INTEGER,"
                "  max_rss_bytes INTEGER,"
                "  oom_killed INTEGER NOT NULL DEFAULT 0,"
                "  worker_id TEXT NOT NULL,"
                "  worker_epoch TEXT NOT NULL,"
                "  created_at INTEGER NOT NULL,"
                "  started_at INTEGER NOT NULL DEFAULT 0,"
                "  finished_at INTEGER NOT NULL DEFAULT 0,"
                "  duration_ms INTEGER,"
                "  PRIMARY KEY (owner, sandbox_id, lifecycle_id, exec_id),"
                "  FOREIGN KEY (owner, sandbox_id) REFERENCES sandboxes (owner, sandbox_id)"
                ") STRICT;"
                /* "RUNNING under an old epoch" after a worker restart. */
                "CREATE INDEX execs_by_worker ON execs (worker_id, status, worker_epoch);"
                /* Retention pruning and the admin's recent-execs view. */
                "CREATE INDEX execs_by_finished ON execs (finished_at) WHERE finished_at > 0;"
                "CREATE INDEX execs_by_created ON execs (created_at);",
        },
        {
                /* Per-sandbox limits asked for at resolve (issue 4); 0 = the worker's default.
                 * Additive: an older binary ignores them (and enforces its defaults). */
                .version = 2,
                .min_binary = 1,
                .sql =
                "ALTER TABLE sandboxes ADD COLUMN limit_memory_bytes INTEGER NOT NULL DEFAULT 0;"
                "ALTER TABLE sandboxes ADD COLUMN limit_max_processes INTEGER NOT NULL DEFAULT 0;"
                "ALTER TABLE sandboxes ADD COLUMN limit_cpu_millicores INTEGER NOT NULL DEFAULT 0;"
                "ALTER TABLE sandboxes ADD COLUMN limit_disk_quota_bytes INTEGER NOT NULL DEFAULT 0;",
        },
};

_Static_assert(ELEMENTSOF(migrations) == STORE_SQLITE_SCHEMA_LEVEL,
               "the last migration is the binary's schema level");

static int exec_sql(sqlite3 *db, const char *sql) {
        int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
        return rc == SQLITE_OK ? 0 : store_sqlite_errno(rc);
}

static int read_state(sqlite3 *db, unsigned *ret_version, unsigned *ret_min_binary) {
        sqlite3_stmt *st = NULL;
        int rc, r = 0;

        rc = sqlite3_prepare_v2(db,
                                "SELECT coalesce(max(version), 0), coalesce(max(min_binary), 0) "
                                "FROM schema_migrations",
                                -1, &st, NULL);
        if (rc != SQLITE_OK)
                return store_sqlite_errno(rc);
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
                sqlite3_int64 v = sqlite3_column_int64(st, 0), m = sqlite3_column_int64(st, 1);
                if (v < 0 || v > UINT32_MAX || m < 0 || m > UINT32_MAX)
                        r = -EIO;
                else {
                        *ret_version = (unsigned) v;
                        *ret_min_binary = (unsigned) m;
                }
        } else
                r = store_sqlite_errno(rc);
        sqlite3_finalize(st);
        return r;
}

static int record_migration(sqlite3 *db, const Migration *m) {
        sqlite3_stmt *st = NULL;
        int rc;

        rc = sqlite3_prepare_v2(db, "INSERT INTO schema_migrations (version, min_binary, applied_at) VALUES (?1, ?2, ?3)",
                                -1, &st, NULL);
        if (rc != SQLITE_OK)
                return store_sqlite_errno(rc);
        sqlite3_bind_int64(st, 1, m->version);
        sqlite3_bind_int64(st, 2, m->min_binary);
        sqlite3_bind_int64(st, 3, (sqlite3_int64) now_realtime_usec());
        rc = sqlite3_step(st);
        sqlite3_finalize(st);
        return rc == SQLITE_DONE ? 0 : store_sqlite_errno(rc);
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

/* Inside the transaction: refuse a too-new database, apply what is missing. */
static int migrate_locked(sqlite3 *db, const char *path, unsigned *ret_version, char *errbuf, size_t errlen) {
        unsigned version = 0, min_binary = 0;
        int r;

        r = exec_sql(db, "CREATE TABLE IF NOT EXISTS schema_migrations ("
                         "  version INTEGER PRIMARY KEY,"
                         "  min_binary INTEGER NOT NULL,"
                         "  applied_at INTEGER NOT NULL"
                         ") STRICT");
        if (r < 0) {
                set_error(errbuf, errlen, "the database at %s cannot be read: %s", path, sqlite3_errmsg(db));
                return r;
        }
        r = read_state(db, &version, &min_binary);
        if (r < 0) {
                set_error(errbuf, errlen, "the database at %s cannot be read: %s", path, sqlite3_errmsg(db));
                return r;
        }
        if (min_binary > STORE_SQLITE_SCHEMA_LEVEL) {
                set_error(errbuf, errlen, "the database at %s needs sandloom schema level %u; this binary supports up to %u",
                          path, min_binary, STORE_SQLITE_SCHEMA_LEVEL);
                return -EPROTO;
        }

        for (size_t i = 0; i < ELEMENTSOF(migrations); i++) {
                const Migration *m = &migrations[i];

                if (m->version <= version)
                        continue;
                r = exec_sql(db, m->sql);
                if (r >= 0)
                        r = record_migration(db, m);
                if (r < 0) {
                        set_error(errbuf, errlen, "migrating the database at %s to schema version %u failed: %s", path,
                                  m->version, sqlite3_errmsg(db));
                        return r;
                }
                version = m->version;
        }

        *ret_version = version;
        return 0;
}

int store_sqlite_migrate(sqlite3 *db, const char *path, unsigned *ret_version, char *errbuf, size_t errlen) {
        unsigned version = 0;
        int r;

        r = exec_sql(db, "BEGIN IMMEDIATE");
        if (r < 0) {
                set_error(errbuf, errlen, "the database at %s cannot be locked: %s", path, sqlite3_errmsg(db));
                return r;
        }
        r = migrate_locked(db, path, &version, errbuf, errlen);
        if (r >= 0) {
                r = exec_sql(db, "COMMIT");
                if (r < 0)
                        set_error(errbuf, errlen, "committing the schema of the database at %s failed: %s", path,
                                  sqlite3_errmsg(db));
        }
        if (r < 0) {
                if (!sqlite3_get_autocommit(db))
                        (void) exec_sql(db, "ROLLBACK");
                return r;
        }
        *ret_version = version;
        return 0;
}
