/* SPDX-License-Identifier: MIT */
/* Unit tests for the SQLite store: migrations and compatibility, the lifecycle operations and
 * their compare-and-set failures, the uid pool, re-owning, listing, tenant isolation and
 * concurrent use. Every test works in its own temporary data directory. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "random-util.h"
#include "store.h"
#include "string-util.h"
#include "time-util.h"

#define OWNER "default"
#define WORKER "worker-1"
#define EPOCH "e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1"
#define UID_START 1900000000U
#define UID_END 1999999999U

#include "store-fixture.h"

typedef struct Resolve {
        const char *owner, *sandbox_id, *scope;
        const char *worker, *epoch;
        uint32_t start, end;
        SandboxLimits limits;
} Resolve;

static int resolve_full(Store *s, const Resolve *x, SandboxRecord *ret, bool *ret_created) {
        char internal[OPAQUE_ID_LEN + 1], lifecycle[OPAQUE_ID_LEN + 1];
        uint32_t start = x->start ?: UID_START, end = x->end ?: UID_END;
        uint64_t preferred;

        new_id(internal);
        new_id(lifecycle);
        assert_int_equal(random_range_u64(start, end, &preferred), 0);
        ResolveRequest q = {
                .owner = x->owner ?: OWNER,
                .sandbox_id = x->sandbox_id,
                .workspace_scope_id = x->scope ?: "scope-a",
                .profile = "default",
                .worker_id = x->worker ?: WORKER,
                .worker_epoch = x->epoch ?: EPOCH,
                .principal = "admin",
                .uid_start = start,
                .uid_end = end,
                .preferred_uid = (uint32_t) preferred,
                .new_internal_id = internal,
                .new_lifecycle_id = lifecycle,
                .now = now_realtime_usec(),
                .limits = x->limits,
        };
        return s->ops->sandbox_resolve(s, &q, ret, ret_created);
}

static int resolve(Store *s, const char *sandbox_id, const char *scope, SandboxRecord *ret, bool *ret_created) {
        return resolve_full(s, &(Resolve) { .sandbox_id = sandbox_id, .scope = scope }, ret, ret_created);
}

static int transition(Store *s, const char *sandbox_id, uint64_t gen, SandboxStatus from, SandboxStatus to,
                      const char *event, SandboxRecord *ret) {
        return s->ops->sandbox_transition(s, OWNER, sandbox_id, gen, from, to, event, "admin", "test",
                                          now_realtime_usec(), ret);
}

static void release(Store *s, const SandboxRecord *r) {
        assert_int_equal(transition(s, r->sandbox_id, r->generation, r->status, SANDBOX_RELEASED, "released", NULL), 0);
}

/* Opens the database file directly, as a newer or older binary would. */
static sqlite3 *raw_db(const char *dir) {
        char path[128];
        sqlite3 *db = NULL;

        assert_int_equal(bsprintf(path, sizeof path, "%s/sandloom.db", dir), 0);
        assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
        return db;
}

static int64_t raw_int(sqlite3 *db, const char *sql) {
        sqlite3_stmt *st = NULL;
        int64_t v;

        assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
        assert_int_equal(sqlite3_step(st), SQLITE_ROW);
        v = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
        return v;
}

static void raw_exec(sqlite3 *db, const char *sql) {
        assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
}

/* ---- schema ---- */

static void test_fresh_database_is_migrated_private_and_wal(void **state) {
        Fixture *f = *state;
        char path[128];
        struct stat st;
        sqlite3 *db;
        json_t *report = NULL;

        assert_int_equal(bsprintf(path, sizeof path, "%s/sandloom.db", f->dir), 0);
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0600);
        assert_int_equal(bsprintf(path, sizeof path, "%s/sandloom.db-wal", f->dir), 0);
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0600);

        db = raw_db(f->dir);
        assert_int_equal(raw_int(db, "SELECT count(*) FROM schema_migrations"), 2);
        assert_int_equal(raw_int(db, "SELECT max(version) FROM schema_migrations"), 2);
        assert_int_equal(raw_int(db, "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name IN "
                                     "('workers', 'sandboxes', 'sandbox_events', 'uids', 'execs')"),
                         5);
        assert_int_equal(raw_int(db, "SELECT journal_mode = 'wal' FROM pragma_journal_mode"), 1);
        sqlite3_close(db);

        assert_int_equal(f->store->ops->report(f->store, &report), 0);
        assert_string_equal(json_string_value(json_object_get(report, "backend")), "sqlite");
        assert_string_equal(json_string_value(json_object_get(report, "path")), "sandloom.db");
        assert_int_equal(json_integer_value(json_object_get(report, "schema_version")), 2);
        json_decref(report);
}

static void test_reopen_applies_nothing_and_keeps_data(void **state) {
        Fixture *f = *state;
        SandboxRecord a, b;
        bool created;
        int64_t applied;
        sqlite3 *db;

        assert_int_equal(resolve(f->store, "keep-me", NULL, &a, &created), 0);
        db = raw_db(f->dir);
        applied = raw_int(db, "SELECT applied_at FROM schema_migrations WHERE version = 1");
        sqlite3_close(db);

        store_close(f->store);
        f->store = open_store(f->dir);

        db = raw_db(f->dir);
        assert_int_equal(raw_int(db, "SELECT count(*) FROM schema_migrations"), 2);
        assert_int_equal(raw_int(db, "SELECT applied_at FROM schema_migrations WHERE version = 1"), applied);
        sqlite3_close(db);
        assert_int_equal(f->store->ops->sandbox_get(f->store, OWNER, "keep-me", &b), 0);
        assert_memory_equal(&a, &b, sizeof a);
}

static void test_newer_compatible_schema_opens_but_one_needing_newer_binary_is_refused(void **state) {
        Fixture *f = *state;
        StoreOptions o = { .data_dir = f->dir, .busy_timeout_ms = 1000 };
        char err[256] = "";
        Store *s = (Store *) 0x1;
        json_t *report = NULL;
        sqlite3 *db;

        store_close(f->store);
        f->store = NULL;

        /* A newer binary added an additive migration: we can still use the database. */
        db = raw_db(f->dir);
        raw_exec(db, "INSERT INTO schema_migrations VALUES (3, 1, 0)");
        sqlite3_close(db);
        f->store = open_store(f->dir);
        assert_int_equal(f->store->ops->report(f->store, &report), 0);
        assert_int_equal(json_integer_value(json_object_get(report, "schema_version")), 3);
        json_decref(report);
        store_close(f->store);
        f->store = NULL;

        /* Then one that older binaries cannot understand. */
        db = raw_db(f->dir);
        raw_exec(db, "INSERT INTO schema_migrations VALUES (4, 4, 0)");
        sqlite3_close(db);
        assert_int_equal(store_open_sqlite(&o, &s, err, sizeof err), -EPROTO);
        assert_ptr_equal(s, (Store *) 0x1); /* untouched on failure */
        assert_non_null(strstr(err, "needs sandloom schema level 4; this binary supports up to 2"));
        assert_non_null(strstr(err, f->dir));

        /* Refusing changed nothing. */
        db = raw_db(f->dir);
        assert_int_equal(raw_int(db, "SELECT count(*) FROM schema_migrations"), 4);
        sqlite3_close(db);
}

/* ---- resolve ---- */

static void test_resolve_creates_then_returns_same_then_refuses_other_scope(void **state) {
        Fixture *f = *state;
        SandboxRecord a, b, c = { .generation = 77 };
        bool created = false;

        assert_int_equal(resolve(f->store, "sbx-1", "scope-a", &a, &created), 0);
        assert_true(created);
        assert_string_equal(a.owner, OWNER);
        assert_string_equal(a.sandbox_id, "sbx-1");
        assert_string_equal(a.workspace_scope_id, "scope-a");
        assert_string_equal(a.worker_id, WORKER);
        assert_string_equal(a.worker_epoch, EPOCH);
        assert_int_equal(a.generation, 1);
        assert_int_equal(a.lifecycle_count, 1);
        assert_int_equal(a.status, SANDBOX_ASSIGNED);
        assert_int_equal(strlen(a.internal_id), OPAQUE_ID_LEN);
        assert_int_equal(strlen(a.lifecycle_id), OPAQUE_ID_LEN);
        assert_in_range(a.uid, UID_START, UID_END);
        assert_int_equal(a.connected_at, 0);
        assert_int_equal(a.released_at, 0);

        assert_int_equal(resolve(f->store, "sbx-1", "scope-a", &b, &created), 0);
        assert_false(created);
        assert_memory_equal(&a, &b, sizeof a);

        assert_int_equal(resolve(f->store, "sbx-1", "scope-b", &c, &created), -EXDEV);
        assert_int_equal(c.generation, 77);

        assert_int_equal(f->store->ops->sandbox_get(f->store, OWNER, "sbx-1", &b), 0);
        assert_memory_equal(&a, &b, sizeof a);
        assert_int_equal(f->store->ops->sandbox_get_internal(f->store, a.internal_id, &b), 0);
        assert_memory_equal(&a, &b, sizeof a);
        assert_int_equal(f->store->ops->sandbox_get(f->store, OWNER, "sbx-2", &b), -ENOENT);
}

/* A sandbox's own limits belong to its lifecycle: kept while it lives (a resolve of the live
 * sandbox does not change them), replaced by the next lifecycle's. */
static void test_limits_are_kept_for_the_lifecycle_and_renewed_with_it(void **state) {
        Fixture *f = *state;
        SandboxLimits mine = { .memory_bytes = 256u << 20, .max_processes = 32, .cpu_millicores = 500,
                               .disk_quota_bytes = 64u << 20 };
        SandboxRecord a, b, c;
        bool created;

        assert_int_equal(resolve_full(f->store, &(Resolve) { .sandbox_id = "sbx-lim", .limits = mine }, &a, &created), 0);
        assert_true(created);
        assert_memory_equal(&a.limits, &mine, sizeof mine);
        assert_int_equal(f->store->ops->sandbox_get(f->store, OWNER, "sbx-lim", &b), 0);
        assert_memory_equal(&b.limits, &mine, sizeof mine);
        assert_int_equal(resolve_full(f->store, &(Resolve) { .sandbox_id = "sbx-lim", .limits = { .max_processes = 9 } },
                                      &b, &created), 0);
        assert_false(created);
        assert_memory_equal(&b.limits, &mine, sizeof mine);

        release(f->store, &a);
        assert_int_equal(resolve_full(f->store, &(Resolve) { .sandbox_id = "sbx-lim", .limits = { .max_processes = 9 } },
                                      &c, &created), 0);
        assert_true(created);
        assert_int_equal(c.limits.max_processes, 9);
        assert_int_equal(c.limits.memory_bytes, 0);
        assert_int_equal(c.limits.cpu_millicores, 0);
        assert_int_equal(c.limits.disk_quota_bytes, 0);
}

static void test_release_then_resolve_starts_new_lifecycle_and_keeps_both_histories(void **state) {
        Fixture *f = *state;
        SandboxRecord a, ready, released, b;
        LifecycleEvent ev[8];
        size_t n;
        uint64_t total;
        bool created;

        assert_int_equal(resolve(f->store, "sbx-life", "scope-a", &a, &created), 0);
        assert_int_equal(transition(f->store, "sbx-life", 1, SANDBOX_ASSIGNED, SANDBOX_READY, "connected", &ready), 0);
        assert_int_equal(ready.status, SANDBOX_READY);
        assert_true(ready.connected_at > 0);
        assert_int_equal(transition(f->store, "sbx-life", 1, SANDBOX_READY, SANDBOX_RELEASED, "released", &released), 0);
        assert_int_equal(released.status, SANDBOX_RELEASED);
        assert_true(released.released_at > 0);
        assert_int_equal(released.connected_at, ready.connected_at);

        /* After a release another scope is fine: it is a new lifecycle. */
        assert_int_equal(resolve(f->store, "sbx-life", "scope-b", &b, &created), 0);
        assert_true(created);
        assert_int_equal(b.generation, 2);
        assert_int_equal(b.lifecycle_count, 2);
        assert_int_equal(b.status, SANDBOX_ASSIGNED);
        assert_string_equal(b.internal_id, a.internal_id);
        assert_string_not_equal(b.lifecycle_id, a.lifecycle_id);
        assert_string_equal(b.workspace_scope_id, "scope-b");
        assert_int_equal(b.connected_at, 0);
        assert_int_equal(b.released_at, 0);

        assert_int_equal(f->store->ops->history_list(f->store, OWNER, "sbx-life", 0, ev, 8, &n, &total), 0);
        assert_int_equal(n, 4);
        assert_int_equal(total, 4);
        const char *expect[] = { "created", "connected", "released", "created" };
        for (size_t i = 0; i < 4; i++) {
                assert_string_equal(ev[i].event, expect[i]);
                assert_string_equal(ev[i].lifecycle_id, i < 3 ? a.lifecycle_id : b.lifecycle_id);
                assert_int_equal(ev[i].generation, i < 3 ? 1 : 2);
                assert_string_equal(ev[i].principal, "admin");
                if (i > 0)
                        assert_true(ev[i].seq > ev[i - 1].seq);
        }
        assert_string_equal(ev[0].reason, "resolve");
        assert_string_equal(ev[1].reason, "test");

        /* Paging: oldest first from an offset. */
        assert_int_equal(f->store->ops->history_list(f->store, OWNER, "sbx-life", 1, ev, 2, &n, &total), 0);
        assert_int_equal(n, 2);
        assert_int_equal(total, 4);
        assert_string_equal(ev[0].event, "connected");
        assert_string_equal(ev[1].event, "released");

        assert_int_equal(f->store->ops->history_list(f->store, OWNER, "nope", 0, ev, 8, &n, &total), -ENOENT);
}

/* ---- compare-and-set ---- */

static void test_transition_reports_enoent_estale_ebusy_and_changes_nothing(void **state) {
        Fixture *f = *state;
        SandboxRecord a, after, untouched = { .generation = 99 };
        bool created;
        LifecycleEvent ev[4];
        size_t n;
        uint64_t total;

        assert_int_equal(resolve(f->store, "sbx-cas", NULL, &a, &created), 0);

        assert_int_equal(transition(f->store, "sbx-none", 1, SANDBOX_ASSIGNED, SANDBOX_READY, "connected", &untouched),
                         -ENOENT);
        assert_int_equal(transition(f->store, "sbx-cas", 2, SANDBOX_ASSIGNED, SANDBOX_READY, "connected", &untouched),
                         -ESTALE);
        assert_int_equal(transition(f->store, "sbx-cas", UINT64_MAX, SANDBOX_ASSIGNED, SANDBOX_READY, "connected",
                                    &untouched),
                         -ESTALE);
        assert_int_equal(transition(f->store, "sbx-cas", 1, SANDBOX_READY, SANDBOX_SUSPENDING, "suspending", &untouched),
                         -EBUSY);
        assert_int_equal(untouched.generation, 99);

        assert_int_equal(f->store->ops->sandbox_get(f->store, OWNER, "sbx-cas", &after), 0);
        assert_memory_equal(&a, &after, sizeof a);
        assert_int_equal(f->store->ops->history_list(f->store, OWNER, "sbx-cas", 0, ev, 4, &n, &total), 0);
        assert_int_equal(total, 1);

        /* The right triple succeeds, exactly once. */
        assert_int_equal(transition(f->store, "sbx-cas", 1, SANDBOX_ASSIGNED, SANDBOX_READY, "connected", NULL), 0);
        assert_int_equal(transition(f->store, "sbx-cas", 1, SANDBOX_ASSIGNED, SANDBOX_READY, "connected", NULL), -EBUSY);

        /* A transition without an event leaves the history alone. */
        assert_int_equal(transition(f->store, "sbx-cas", 1, SANDBOX_READY, SANDBOX_SUSPENDING, NULL, &after), 0);
        assert_int_equal(after.status, SANDBOX_SUSPENDING);
        assert_int_equal(f->store->ops->history_list(f->store, OWNER, "sbx-cas", 0, ev, 4, &n, &total), 0);
        assert_int_equal(total, 2);

        /* Only resolve brings back a released sandbox. */
        release(f->store, &after);
        assert_int_equal(transition(f->store, "sbx-cas", 1, SANDBOX_RELEASED, SANDBOX_READY, "connected", NULL), -EINVAL);
}

static void test_touch_bumps_content_version_only_for_the_current_generation(void **state) {
        Fixture *f = *state;
        SandboxRecord a, b;
        bool created;
        usec_t now = now_realtime_usec();

        assert_int_equal(resolve(f->store, "sbx-touch", NULL, &a, &created), 0);
        assert_int_equal(a.content_version, 0);
        assert_int_equal(f->store->ops->sandbox_touch(f->store, OWNER, "sbx-touch", 1, now), 0);
        assert_int_equal(f->store->ops->sandbox_touch(f->store, OWNER, "sbx-touch", 1, now), 0);
        assert_int_equal(f->store->ops->sandbox_touch(f->store, OWNER, "sbx-touch", 2, now), -ESTALE);
        assert_int_equal(f->store->ops->sandbox_touch(f->store, OWNER, "sbx-none", 1, now), -ENOENT);
        assert_int_equal(f->store->ops->sandbox_get(f->store, OWNER, "sbx-touch", &b), 0);
        assert_int_equal(b.content_version, 2);

        release(f->store, &b);
        assert_int_equal(f->store->ops->sandbox_touch(f->store, OWNER, "sbx-touch", 1, now), -EBUSY);
}

/* ---- uids ---- */

static void test_tiny_uid_range_exhausts_and_quarantined_uid_waits_for_uid_free(void **state) {
        Fixture *f = *state;
        SandboxRecord r[3], x = { .generation = 42 };
        uint32_t q[8];
        size_t n;
        bool created;
        const uint32_t start = 5000, end = 5002;
        usec_t before_release;

        for (size_t i = 0; i < 3; i++) {
                char id[16];
                assert_int_equal(bsprintf(id, sizeof id, "tiny-%zu", i), 0);
                assert_int_equal(resolve_full(f->store, &(Resolve) { .sandbox_id = id, .start = start, .end = end },
                                              &r[i], &created),
                                 0);
        }
        assert_true(r[0].uid != r[1].uid && r[1].uid != r[2].uid && r[0].uid != r[2].uid);
        for (size_t i = 0; i < 3; i++)
                assert_in_range(r[i].uid, start, end);

        /* Exhausted: nothing of the attempt remains. */
        assert_int_equal(resolve_full(f->store, &(Resolve) { .sandbox_id = "tiny-3", .start = start, .end = end }, &x,
                                      &created),
                         -ENOSPC);
        assert_int_equal(x.generation, 42);
        assert_int_equal(f->store->ops->sandbox_get(f->store, OWNER, "tiny-3", &x), -ENOENT);

        before_release = now_realtime_usec();
        release(f->store, &r[1]);

        /* Quarantined is not free. */
        assert_int_equal(resolve_full(f->store, &(Resolve) { .sandbox_id = "tiny-3", .start = start, .end = end }, &x,
                                      &created),
                         -ENOSPC);
        assert_int_equal(f->store->ops->uid_list_quarantined(f->store, before_release, q, 8, &n), 0);
        assert_int_equal(n, 0);
        assert_int_equal(f->store->ops->uid_list_quarantined(f->store, now_realtime_usec() + 1, q, 8, &n), 0);
        assert_int_equal(n, 1);
        assert_int_equal(q[0], r[1].uid);

        assert_int_equal(f->store->ops->uid_free(f->store, r[0].uid), -EBUSY); /* live */
        assert_int_equal(f->store->ops->uid_free(f->store, 4999), -ENOENT);
        assert_int_equal(f->store->ops->uid_free(f->store, r[1].uid), 0);
        assert_int_equal(f->store->ops->uid_list_quarantined(f->store, now_realtime_usec() + 1, q, 8, &n), 0);
        assert_int_equal(n, 0);

        assert_int_equal(resolve_full(f->store, &(Resolve) { .sandbox_id = "tiny-3", .start = start, .end = end }, &x,
                                      &created),
                         0);
        assert_int_equal(x.uid, r[1].uid);
}

static void test_resolve_after_release_takes_a_fresh_uid(void **state) {
        Fixture *f = *state;
        SandboxRecord a, b;
        bool created;

        assert_int_equal(resolve_full(f->store, &(Resolve) { .sandbox_id = "again", .start = 6000, .end = 6001 }, &a,
                                      &created),
                         0);
        release(f->store, &a);
        assert_int_equal(resolve_full(f->store, &(Resolve) { .sandbox_id = "again", .start = 6000, .end = 6001 }, &b,
                                      &created),
                         0);
        assert_true(created);
        assert_int_not_equal(a.uid, b.uid);
}

/* ---- workers ---- */

static void test_reown_bumps_generation_only_for_the_worker_and_previous_epoch(void **state) {
        Fixture *f = *state;
        const char *e2 = "e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2";
        SandboxRecord mine, gone, old, other, x;
        LifecycleEvent ev[4];
        size_t n;
        uint64_t total;
        bool created;

        assert_int_equal(resolve_full(f->store, &(Resolve) { .sandbox_id = "mine" }, &mine, &created), 0);
        assert_int_equal(resolve_full(f->store, &(Resolve) { .sandbox_id = "gone" }, &gone, &created), 0);
        release(f->store, &gone);
        assert_int_equal(resolve_full(f->store, &(Resolve) { .sandbox_id = "old", .epoch = "e0" }, &old, &created), 0);
        assert_int_equal(resolve_full(f->store, &(Resolve) { .sandbox_id = "other", .worker = "worker-2" }, &other,
                                      &created),
                         0);

        assert_int_equal(f->store->ops->sandbox_reown(f->store, WORKER, EPOCH, e2, now_realtime_usec()), 1);

        assert_int_equal(f->store->ops->sandbox_get(f->store, OWNER, "mine", &x), 0);
        assert_int_equal(x.generation, 2);
        assert_string_equal(x.worker_epoch, e2);
        assert_string_equal(x.lifecycle_id, mine.lifecycle_id);
        assert_int_equal(x.lifecycle_count, 1);
        assert_int_equal(x.uid, mine.uid);
        assert_int_equal(f->store->ops->history_list(f->store, OWNER, "mine", 0, ev, 4, &n, &total), 0);
        assert_int_equal(n, 2);
        assert_string_equal(ev[1].event, "reowned");
        assert_int_equal(ev[1].generation, 2);
        assert_string_equal(ev[1].worker_epoch, e2);

        assert_int_equal(f->store->ops->sandbox_get(f->store, OWNER, "gone", &x), 0);
        assert_int_equal(x.generation, 1);
        assert_string_equal(x.worker_epoch, EPOCH);
        assert_int_equal(f->store->ops->sandbox_get(f->store, OWNER, "old", &x), 0);
        assert_int_equal(x.generation, 1);
        assert_int_equal(f->store->ops->sandbox_get(f->store, OWNER, "other", &x), 0);
        assert_int_equal(x.generation, 1);
        assert_string_equal(x.worker_epoch, EPOCH);

        /* A second attempt from the same previous epoch finds nothing left. */
        assert_int_equal(f->store->ops->sandbox_reown(f->store, WORKER, EPOCH, "e3", now_realtime_usec()), 0);
        /* The old generation is now stale. */
        assert_int_equal(transition(f->store, "mine", 1, SANDBOX_ASSIGNED, SANDBOX_READY, "connected", NULL), -ESTALE);
}

static void test_worker_register_returns_previous_epoch(void **state) {
        Fixture *f = *state;
        char prev[EPOCH_LEN + 1] = "x";
        WorkerInfo w = { .worker_id = WORKER, .worker_epoch = "e1", .endpoint = "http://127.0.0.1:8080",
                         .capabilities_json = "{}", .now = now_realtime_usec() };

        assert_int_equal(f->store->ops->worker_register(f->store, &w, prev), 0);
        assert_string_equal(prev, "");
        w.worker_epoch = "e2";
        assert_int_equal(f->store->ops->worker_register(f->store, &w, prev), 0);
        assert_string_equal(prev, "e1");
        assert_int_equal(f->store->ops->worker_register(f->store, &w, prev), 0);
        assert_string_equal(prev, "e2");
}

static void test_list_releasing_finds_this_workers_half_released_sandboxes(void **state) {
        Fixture *f = *state;
        SandboxRecord a, b, out[4];
        size_t n;
        bool created;

        assert_int_equal(resolve(f->store, "rel-a", NULL, &a, &created), 0);
        assert_int_equal(resolve(f->store, "rel-b", NULL, &b, &created), 0);
        assert_int_equal(transition(f->store, "rel-a", 1, SANDBOX_ASSIGNED, SANDBOX_RELEASING, "releasing", NULL), 0);

        assert_int_equal(f->store->ops->sandbox_list_releasing(f->store, WORKER, out, 4, &n), 0);
        assert_int_equal(n, 1);
        assert_string_equal(out[0].sandbox_id, "rel-a");
        assert_int_equal(f->store->ops->sandbox_list_releasing(f->store, "worker-2", out, 4, &n), 0);
        assert_int_equal(n, 0);
}

/* ---- listing and tenants ---- */

static void test_list_filters_pages_and_counts(void **state) {
        Fixture *f = *state;
        SandboxRecord out[16], r;
        SandboxFilter filter = { .owner = OWNER, .status = SANDBOX_FILTER_LIVE, .limit = 4 };
        size_t n;
        uint64_t total;
        bool created;

        /* Created out of order: the list is ordered by sandbox_id. */
        for (int i = 10; i >= 1; i--) {
                char id[16];
                assert_int_equal(bsprintf(id, sizeof id, "list-%02d", i), 0);
                assert_int_equal(resolve(f->store, id, i % 2 ? "odd" : "even", &r, &created), 0);
        }
        assert_int_equal(f->store->ops->sandbox_get(f->store, OWNER, "list-03", &r), 0);
        release(f->store, &r);
        assert_int_equal(f->store->ops->sandbox_get(f->store, OWNER, "list-04", &r), 0);
        assert_int_equal(transition(f->store, "list-04", 1, SANDBOX_ASSIGNED, SANDBOX_READY, "connected", NULL), 0);

        assert_int_equal(f->store->ops->sandbox_list(f->store, &filter, out, &n, &total), 0);
        assert_int_equal(total, 9);
        assert_int_equal(n, 4);
        assert_string_equal(out[0].sandbox_id, "list-01");
        assert_string_equal(out[1].sandbox_id, "list-02");
        assert_string_equal(out[2].sandbox_id, "list-04");
        assert_string_equal(out[3].sandbox_id, "list-05");

        filter.offset = 8;
        assert_int_equal(f->store->ops->sandbox_list(f->store, &filter, out, &n, &total), 0);
        assert_int_equal(total, 9);
        assert_int_equal(n, 1);
        assert_string_equal(out[0].sandbox_id, "list-10");

        filter.offset = 100;
        assert_int_equal(f->store->ops->sandbox_list(f->store, &filter, out, &n, &total), 0);
        assert_int_equal(n, 0);
        assert_int_equal(total, 9);

        filter = (SandboxFilter) { .owner = OWNER, .status = SANDBOX_FILTER_ANY, .limit = 16 };
        assert_int_equal(f->store->ops->sandbox_list(f->store, &filter, out, &n, &total), 0);
        assert_int_equal(total, 10);
        assert_int_equal(n, 10);

        filter.workspace_scope_id = "odd";
        assert_int_equal(f->store->ops->sandbox_list(f->store, &filter, out, &n, &total), 0);
        assert_int_equal(total, 5);
        for (size_t i = 0; i < n; i++)
                assert_string_equal(out[i].workspace_scope_id, "odd");

        filter.status = SANDBOX_FILTER_LIVE;
        assert_int_equal(f->store->ops->sandbox_list(f->store, &filter, out, &n, &total), 0);
        assert_int_equal(total, 4); /* list-03 is released */

        filter = (SandboxFilter) { .owner = OWNER, .status = SANDBOX_READY, .limit = 16 };
        assert_int_equal(f->store->ops->sandbox_list(f->store, &filter, out, &n, &total), 0);
        assert_int_equal(total, 1);
        assert_string_equal(out[0].sandbox_id, "list-04");

        filter = (SandboxFilter) { .owner = OWNER, .status = SANDBOX_RELEASED, .limit = 0 };
        assert_int_equal(f->store->ops->sandbox_list(f->store, &filter, NULL, &n, &total), 0);
        assert_int_equal(n, 0);
        assert_int_equal(total, 1);

        filter = (SandboxFilter) { .owner = NULL, .status = SANDBOX_FILTER_ANY, .limit = 16 };
        assert_int_equal(f->store->ops->sandbox_list(f->store, &filter, out, &n, &total), -EINVAL);
        filter = (SandboxFilter) { .owner = OWNER, .status = 42, .limit = 16 };
        assert_int_equal(f->store->ops->sandbox_list(f->store, &filter, out, &n, &total), -EINVAL);
}

static void test_owner_cannot_see_or_touch_another_owners_sandbox(void **state) {
        Fixture *f = *state;
        SandboxRecord a, b, out[4];
        SandboxFilter filter = { .owner = "tenant-b", .status = SANDBOX_FILTER_ANY, .limit = 4 };
        LifecycleEvent ev[4];
        size_t n;
        uint64_t total;
        bool created;

        assert_int_equal(resolve_full(f->store, &(Resolve) { .owner = "tenant-a", .sandbox_id = "same-id" }, &a,
                                      &created),
                         0);

        assert_int_equal(f->store->ops->sandbox_get(f->store, "tenant-b", "same-id", &b), -ENOENT);
        assert_int_equal(f->store->ops->sandbox_list(f->store, &filter, out, &n, &total), 0);
        assert_int_equal(total, 0);
        assert_int_equal(f->store->ops->history_list(f->store, "tenant-b", "same-id", 0, ev, 4, &n, &total), -ENOENT);
        assert_int_equal(f->store->ops->sandbox_transition(f->store, "tenant-b", "same-id", 1, SANDBOX_ASSIGNED,
                                                           SANDBOX_RELEASED, "released", "b", "x", now_realtime_usec(),
                                                           NULL),
                         -ENOENT);
        assert_int_equal(f->store->ops->sandbox_touch(f->store, "tenant-b", "same-id", 1, now_realtime_usec()), -ENOENT);

        /* The same id in another tenant is another sandbox, whatever its scope. */
        assert_int_equal(resolve_full(f->store,
                                      &(Resolve) { .owner = "tenant-b", .sandbox_id = "same-id", .scope = "scope-z" }, &b,
                                      &created),
                         0);
        assert_true(created);
        assert_string_not_equal(a.internal_id, b.internal_id);
        assert_int_not_equal(a.uid, b.uid);
        assert_int_equal(f->store->ops->history_list(f->store, "tenant-b", "same-id", 0, ev, 4, &n, &total), 0);
        assert_int_equal(total, 1);

        assert_int_equal(f->store->ops->sandbox_get(f->store, "tenant-a", "same-id", &b), 0);
        assert_memory_equal(&a, &b, sizeof a);
}

static void test_overlong_or_missing_strings_are_refused(void **state) {
        Fixture *f = *state;
        char long_id[SANDBOX_ID_MAX + 2], long_owner[OWNER_MAX + 2];
        SandboxRecord r;
        bool created;

        memset(long_id, 'a', sizeof long_id - 1);
        long_id[sizeof long_id - 1] = '\0';
        memset(long_owner, 'o', sizeof long_owner - 1);
        long_owner[sizeof long_owner - 1] = '\0';

        assert_int_equal(resolve(f->store, long_id, NULL, &r, &created), -EINVAL);
        assert_int_equal(resolve_full(f->store, &(Resolve) { .owner = long_owner, .sandbox_id = "x-1" }, &r, &created),
                         -EINVAL);
        assert_int_equal(f->store->ops->sandbox_get(f->store, OWNER, long_id, &r), -EINVAL);
        /* One character less is fine. */
        long_id[SANDBOX_ID_MAX] = '\0';
        assert_int_equal(resolve(f->store, long_id, NULL, &r, &created), 0);
        assert_string_equal(r.sandbox_id, long_id);
}

static void test_report_counts_sandboxes_by_status(void **state) {
        Fixture *f = *state;
        SandboxRecord a;
        bool created;
        json_t *report = NULL, *counts;

        assert_int_equal(resolve(f->store, "rep-1", NULL, &a, &created), 0);
        assert_int_equal(resolve(f->store, "rep-2", NULL, &a, &created), 0);
        release(f->store, &a);
        assert_int_equal(f->store->ops->report(f->store, &report), 0);
        counts = json_object_get(report, "sandboxes");
        assert_int_equal(json_integer_value(json_object_get(counts, "ASSIGNED")), 1);
        assert_int_equal(json_integer_value(json_object_get(counts, "RELEASED")), 1);
        assert_int_equal(json_integer_value(json_object_get(counts, "READY")), 0);
        assert_int_equal(json_integer_value(json_object_get(counts, "total")), 2);
        assert_null(strstr(json_string_value(json_object_get(report, "path")), "/"));
        json_decref(report);
}

/* ---- concurrency ---- */

#define CONC_THREADS 8
#define CONC_IDS 50

typedef struct ConcArg {
        Store *store;
        unsigned thread;
        int errors;
        int created;
} ConcArg;

static void *conc_worker(void *p) {
        ConcArg *a = p;

        for (unsigned i = 0; i < CONC_IDS; i++) {
                /* Each thread walks the ids from a different starting point. */
                unsigned k = (i + a->thread * 7) % CONC_IDS;
                char id[16];
                SandboxRecord r;
                bool created = false;

                if (bsprintf(id, sizeof id, "conc-%02u", k) < 0) {
                        a->errors++;
                        continue;
                }
                /* A range only twice the number of sandboxes: random picks collide. */
                if (resolve_full(a->store, &(Resolve) { .sandbox_id = id, .start = 70000, .end = 70099 }, &r, &created) <
                            0 ||
                    !streq(r.sandbox_id, id))
                        a->errors++;
                else if (created)
                        a->created++;
        }
        return NULL;
}

static void test_concurrent_resolves_create_each_sandbox_once_with_unique_uids(void **state) {
        Fixture *f = *state;
        pthread_t t[CONC_THREADS];
        ConcArg args[CONC_THREADS];
        SandboxRecord out[CONC_IDS + 1];
        SandboxFilter filter = { .owner = OWNER, .status = SANDBOX_FILTER_ANY, .limit = CONC_IDS + 1 };
        size_t n;
        uint64_t total;
        int created = 0;

        for (unsigned i = 0; i < CONC_THREADS; i++) {
                args[i] = (ConcArg) { .store = f->store, .thread = i };
                assert_int_equal(pthread_create(&t[i], NULL, conc_worker, &args[i]), 0);
        }
        for (unsigned i = 0; i < CONC_THREADS; i++) {
                assert_int_equal(pthread_join(t[i], NULL), 0);
                assert_int_equal(args[i].errors, 0);
                created += args[i].created;
        }
        assert_int_equal(created, CONC_IDS);

        assert_int_equal(f->store->ops->sandbox_list(f->store, &filter, out, &n, &total), 0);
        assert_int_equal(total, CONC_IDS);
        assert_int_equal(n, CONC_IDS);
        for (size_t i = 0; i < n; i++) {
                assert_int_equal(out[i].generation, 1);
                for (size_t j = i + 1; j < n; j++)
                        assert_int_not_equal(out[i].uid, out[j].uid);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
                T(test_fresh_database_is_migrated_private_and_wal),
                T(test_reopen_applies_nothing_and_keeps_data),
                T(test_newer_compatible_schema_opens_but_one_needing_newer_binary_is_refused),
                T(test_resolve_creates_then_returns_same_then_refuses_other_scope),
                T(test_release_then_resolve_starts_new_lifecycle_and_keeps_both_histories),
                T(test_limits_are_kept_for_the_lifecycle_and_renewed_with_it),
                T(test_transition_reports_enoent_estale_ebusy_and_changes_nothing),
                T(test_touch_bumps_content_version_only_for_the_current_generation),
                T(test_tiny_uid_range_exhausts_and_quarantined_uid_waits_for_uid_free),
                T(test_resolve_after_release_takes_a_fresh_uid),
                T(test_reown_bumps_generation_only_for_the_worker_and_previous_epoch),
                T(test_worker_register_returns_previous_epoch),
                T(test_list_releasing_finds_this_workers_half_released_sandboxes),
                T(test_list_filters_pages_and_counts),
                T(test_owner_cannot_see_or_touch_another_owners_sandbox),
                T(test_overlong_or_missing_strings_are_refused),
                T(test_report_counts_sandboxes_by_status),
                T(test_concurrent_resolves_create_each_sandbox_once_with_unique_uids),
#undef T
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
