/* SPDX-License-Identifier: MIT */
/* Unit tests for the exec records of the SQLite store: begin (fencing, idempotency, conflicts,
 * a race of retries), finish under the right epoch only, inline output, marking a dead epoch's
 * execs lost, retention pruning, and a small benchmark of the hot path (printed, not asserted).
 * Every test works in its own temporary data directory. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "random-util.h"
#include "store.h"
#include "string-util.h"
#include "time-util.h"

#define OWNER "default"
#define WORKER "worker-1"
#define EPOCH "e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1"
#define EPOCH2 "e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2"
#define FP_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define FP_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

#include "store-fixture.h"

static int resolve(Store *s, const char *owner, const char *sandbox_id, SandboxRecord *ret) {
        char internal[OPAQUE_ID_LEN + 1], lifecycle[OPAQUE_ID_LEN + 1];
        uint64_t preferred;
        bool created;

        new_id(internal);
        new_id(lifecycle);
        assert_int_equal(random_range_u64(1900000000U, 1999999999U, &preferred), 0);
        ResolveRequest q = {
                .owner = owner,
                .sandbox_id = sandbox_id,
                .workspace_scope_id = "scope-a",
                .profile = "default",
                .worker_id = WORKER,
                .worker_epoch = EPOCH,
                .principal = "admin",
                .uid_start = 1900000000U,
                .uid_end = 1999999999U,
                .preferred_uid = (uint32_t) preferred,
                .new_internal_id = internal,
                .new_lifecycle_id = lifecycle,
                .now = now_realtime_usec(),
        };
        return s->ops->sandbox_resolve(s, &q, ret, &created);
}

/* A READY sandbox of OWNER: resolved and connected. */
static void ready_sandbox_of(Store *s, const char *owner, const char *sandbox_id, SandboxRecord *ret) {
        SandboxRecord a;

        assert_int_equal(resolve(s, owner, sandbox_id, &a), 0);
        assert_int_equal(s->ops->sandbox_transition(s, owner, sandbox_id, a.generation, SANDBOX_ASSIGNED, SANDBOX_READY,
                                                    "connected", "admin", "test", now_realtime_usec(), ret),
                         0);
}

static void ready_sandbox(Store *s, const char *sandbox_id, SandboxRecord *ret) {
        ready_sandbox_of(s, OWNER, sandbox_id, ret);
}

/* A begin request for EXEC_ID in SBX's current lifecycle; UID_BUF receives a fresh exec_uid. */
static ExecBegin begin_req(const SandboxRecord *sbx, const char *exec_id, const char *fingerprint,
                           char uid_buf[OPAQUE_ID_LEN + 1]) {
        new_id(uid_buf);
        return (ExecBegin) {
                .owner = sbx->owner,
                .sandbox_id = sbx->sandbox_id,
                .lifecycle_id = sbx->lifecycle_id,
                .exec_id = exec_id,
                .exec_uid = uid_buf,
                .fingerprint = fingerprint,
                .generation = sbx->generation,
                .principal = "admin",
                .argv_json = "[\"sh\",\"-c\",\"printf x\"]",
                .cwd = "/workspace",
                .env_keys_json = "[\"FOO\"]",
                .exec_scope = NULL,
                .timeout_seconds = 300,
                .worker_id = WORKER,
                .worker_epoch = EPOCH,
                .now = now_realtime_usec(),
        };
}

/* Begins EXEC_ID and asserts it was created; returns the record. */
static void begin_new(Store *s, const SandboxRecord *sbx, const char *exec_id, ExecRecord *ret) {
        char uid[OPAQUE_ID_LEN + 1];
        ExecBegin b = begin_req(sbx, exec_id, FP_A, uid);
        bool created = false;

        assert_int_equal(s->ops->exec_begin(s, &b, ret, &created), 0);
        assert_true(created);
}

static ExecFinish finish_req(const SandboxRecord *sbx, const char *exec_id, const char *epoch) {
        usec_t now = now_realtime_usec();

        return (ExecFinish) {
                .owner = sbx->owner,
                .sandbox_id = sbx->sandbox_id,
                .lifecycle_id = sbx->lifecycle_id,
                .exec_id = exec_id,
                .worker_epoch = epoch,
                .status = EXEC_SUCCEEDED,
                .has_exit_code = true,
                .exit_code = 0,
                .stdout_bytes = 1,
                .started_at = now - 2000,
                .finished_at = now,
                .duration_ms = 2,
        };
}

static void get(Store *s, const SandboxRecord *sbx, const char *exec_id, ExecRecord *ret) {
        assert_int_equal(s->ops->exec_get(s, sbx->owner, sbx->sandbox_id, sbx->lifecycle_id, exec_id, ret), 0);
}

/* ---- statuses ---- */

static void test_exec_status_names_roundtrip_and_unknown_is_refused(void **state) {
        (void) state;
        for (int i = 0; i < _EXEC_STATUS_MAX; i++) {
                assert_non_null(exec_status_to_string(i));
                assert_int_equal(exec_status_from_string(exec_status_to_string(i)), i);
        }
        assert_string_equal(exec_status_to_string(EXEC_WORKER_LOST), "WORKER_LOST");
        assert_string_equal(exec_status_to_string(EXEC_TIMED_OUT), "TIMED_OUT");
        assert_null(exec_status_to_string(_EXEC_STATUS_MAX));
        assert_int_equal(exec_status_from_string("running"), -EINVAL);
        assert_int_equal(exec_status_from_string(NULL), -EINVAL);
}

/* ---- begin ---- */

static void test_begin_creates_running_record_visible_by_get(void **state) {
        Fixture *f = *state;
        SandboxRecord sbx;
        ExecRecord a, g;
        char uid[OPAQUE_ID_LEN + 1];
        bool created = false;

        ready_sandbox(f->store, "sbx-1", &sbx);
        ExecBegin b = begin_req(&sbx, "exec-1", FP_A, uid);
        b.exec_scope = "tests";
        b.background = true;
        b.timeout_seconds = 42;
        assert_int_equal(f->store->ops->exec_begin(f->store, &b, &a, &created), 0);
        assert_true(created);
        assert_int_equal(a.status, EXEC_RUNNING);
        assert_string_equal(a.exec_uid, uid);
        assert_string_equal(a.exec_scope, "tests");
        assert_true(a.background);
        assert_int_equal(a.timeout_seconds, 42);
        assert_int_equal(a.created_at, b.now);
        assert_int_equal(a.started_at, b.now);
        assert_int_equal(a.finished_at, 0);
        assert_false(a.has_exit_code);
        assert_false(a.stdout_inline);
        assert_null(a.stdout_data);

        /* What begin answers without reading back is exactly what the store holds. */
        get(f->store, &sbx, "exec-1", &g);
        assert_memory_equal(&a, &g, sizeof a);
        assert_string_equal(g.owner, OWNER);
        assert_string_equal(g.sandbox_id, "sbx-1");
        assert_string_equal(g.lifecycle_id, sbx.lifecycle_id);
        assert_string_equal(g.fingerprint, FP_A);
        assert_string_equal(g.worker_id, WORKER);
        assert_string_equal(g.worker_epoch, EPOCH);
        assert_int_equal(g.generation, sbx.generation);
        exec_record_clear(&a);
        exec_record_clear(&g);

        /* No scope ("" or NULL) is the whole sandbox, read back as "". */
        ExecBegin b2 = begin_req(&sbx, "exec-2", FP_A, uid);
        b2.exec_scope = "";
        assert_int_equal(f->store->ops->exec_begin(f->store, &b2, &a, &created), 0);
        get(f->store, &sbx, "exec-2", &g);
        assert_string_equal(g.exec_scope, "");
        assert_false(g.background);
        exec_record_clear(&a);
        exec_record_clear(&g);

        assert_int_equal(f->store->ops->exec_get(f->store, OWNER, "sbx-1", sbx.lifecycle_id, "exec-3", &g), -ENOENT);
}

static void test_begin_is_fenced_by_lifecycle_generation_and_status(void **state) {
        Fixture *f = *state;
        SandboxRecord assigned, sbx, suspended;
        ExecRecord untouched = { .generation = 99 }, g;
        char uid[OPAQUE_ID_LEN + 1], other_lifecycle[OPAQUE_ID_LEN + 1];
        bool created = true;
        ExecBegin b;

        /* ASSIGNED (not connected yet): busy. */
        assert_int_equal(resolve(f->store, OWNER, "sbx-assigned", &assigned), 0);
        b = begin_req(&assigned, "x", FP_A, uid);
        assert_int_equal(f->store->ops->exec_begin(f->store, &b, &untouched, &created), -EBUSY);

        ready_sandbox(f->store, "sbx-1", &sbx);
        b = begin_req(&sbx, "x", FP_A, uid);
        b.generation = sbx.generation + 1;
        assert_int_equal(f->store->ops->exec_begin(f->store, &b, &untouched, &created), -ESTALE);
        b.generation = UINT64_MAX; /* cannot even be stored */
        assert_int_equal(f->store->ops->exec_begin(f->store, &b, &untouched, &created), -ESTALE);

        b = begin_req(&sbx, "x", FP_A, uid);
        new_id(other_lifecycle);
        b.lifecycle_id = other_lifecycle;
        assert_int_equal(f->store->ops->exec_begin(f->store, &b, &untouched, &created), -ENOENT);

        b = begin_req(&sbx, "x", FP_A, uid);
        b.sandbox_id = "sbx-missing";
        assert_int_equal(f->store->ops->exec_begin(f->store, &b, &untouched, &created), -ENOENT);
        b = begin_req(&sbx, "x", FP_A, uid);
        b.owner = "tenant-2"; /* another owner's sandbox of the same name does not exist for us */
        assert_int_equal(f->store->ops->exec_begin(f->store, &b, &untouched, &created), -ENOENT);

        /* Not READY any more: SUSPENDING. */
        assert_int_equal(f->store->ops->sandbox_transition(f->store, OWNER, "sbx-1", sbx.generation, SANDBOX_READY,
                                                           SANDBOX_SUSPENDING, NULL, NULL, NULL, now_realtime_usec(),
                                                           &suspended),
                         0);
        b = begin_req(&sbx, "x", FP_A, uid);
        assert_int_equal(f->store->ops->exec_begin(f->store, &b, &untouched, &created), -EBUSY);

        /* Nothing was written, and the out-parameters are untouched. */
        assert_int_equal(untouched.generation, 99);
        assert_true(created);
        assert_int_equal(f->store->ops->exec_get(f->store, OWNER, "sbx-1", sbx.lifecycle_id, "x", &g), -ENOENT);
        assert_int_equal(f->store->ops->exec_get(f->store, OWNER, "sbx-assigned", assigned.lifecycle_id, "x", &g),
                         -ENOENT);
}

static void test_begin_after_reown_needs_the_new_generation(void **state) {
        Fixture *f = *state;
        SandboxRecord sbx, now;
        ExecRecord r;
        char uid[OPAQUE_ID_LEN + 1];
        bool created;
        ExecBegin b;

        ready_sandbox(f->store, "sbx-1", &sbx);
        assert_int_equal(f->store->ops->sandbox_reown(f->store, WORKER, EPOCH, EPOCH2, now_realtime_usec()), 1);
        b = begin_req(&sbx, "x", FP_A, uid);
        assert_int_equal(f->store->ops->exec_begin(f->store, &b, &r, &created), -ESTALE);

        assert_int_equal(f->store->ops->sandbox_get(f->store, OWNER, "sbx-1", &now), 0);
        b = begin_req(&now, "x", FP_A, uid);
        assert_int_equal(f->store->ops->exec_begin(f->store, &b, &r, &created), 0);
        assert_true(created);
        assert_int_equal(r.generation, sbx.generation + 1);
        exec_record_clear(&r);
}

static void test_retry_with_same_fingerprint_returns_stored_record_also_after_finish(void **state) {
        Fixture *f = *state;
        SandboxRecord sbx;
        ExecRecord first, again, final;
        char uid[OPAQUE_ID_LEN + 1];
        bool created = true;
        ExecBegin b;

        ready_sandbox(f->store, "sbx-1", &sbx);
        begin_new(f->store, &sbx, "exec-1", &first);

        /* A retry carries a new exec_uid of its own; the stored one wins. */
        b = begin_req(&sbx, "exec-1", FP_A, uid);
        assert_int_equal(f->store->ops->exec_begin(f->store, &b, &again, &created), 0);
        assert_false(created);
        assert_int_equal(again.status, EXEC_RUNNING);
        assert_string_equal(again.exec_uid, first.exec_uid);
        assert_string_not_equal(again.exec_uid, uid);
        assert_memory_equal(&first, &again, sizeof first);
        exec_record_clear(&again);

        ExecFinish fin = finish_req(&sbx, "exec-1", EPOCH);
        fin.stdout_data = "x";
        fin.stdout_len = 1;
        fin.stderr_data = "";
        fin.stderr_len = 0;
        assert_int_equal(f->store->ops->exec_finish(f->store, &fin), 0);

        created = true;
        b = begin_req(&sbx, "exec-1", FP_A, uid);
        assert_int_equal(f->store->ops->exec_begin(f->store, &b, &final, &created), 0);
        assert_false(created);
        assert_int_equal(final.status, EXEC_SUCCEEDED);
        assert_true(final.has_exit_code);
        assert_int_equal(final.exit_code, 0);
        assert_int_equal(final.finished_at, fin.finished_at);
        assert_true(final.stdout_inline);
        assert_int_equal(final.stdout_len, 1);
        assert_memory_equal(final.stdout_data, "x", 1);
        assert_true(final.stderr_inline);
        assert_int_equal(final.stderr_len, 0);
        assert_string_equal(final.exec_uid, first.exec_uid);
        exec_record_clear(&final);
        exec_record_clear(&first);
}

static void test_reuse_with_other_fingerprint_is_refused_with_eexist(void **state) {
        Fixture *f = *state;
        SandboxRecord sbx;
        ExecRecord first, untouched = { .generation = 99 }, g;
        char uid[OPAQUE_ID_LEN + 1];
        bool created = true;
        ExecBegin b;

        ready_sandbox(f->store, "sbx-1", &sbx);
        begin_new(f->store, &sbx, "exec-1", &first);
        b = begin_req(&sbx, "exec-1", FP_B, uid);
        assert_int_equal(f->store->ops->exec_begin(f->store, &b, &untouched, &created), -EEXIST);
        assert_int_equal(untouched.generation, 99);
        assert_true(created);

        get(f->store, &sbx, "exec-1", &g);
        assert_string_equal(g.fingerprint, FP_A);
        assert_string_equal(g.exec_uid, first.exec_uid);
        exec_record_clear(&g);
        exec_record_clear(&first);
}

static void test_exec_id_is_free_again_after_release_and_re_resolve(void **state) {
        Fixture *f = *state;
        SandboxRecord one, two;
        ExecRecord a, b2, old;
        char uid[OPAQUE_ID_LEN + 1];
        bool created = false;
        ExecBegin b;

        ready_sandbox(f->store, "sbx-1", &one);
        begin_new(f->store, &one, "exec-1", &a);
        assert_int_equal(f->store->ops->sandbox_transition(f->store, OWNER, "sbx-1", one.generation, SANDBOX_READY,
                                                           SANDBOX_RELEASED, "released", "admin", "test",
                                                           now_realtime_usec(), NULL),
                         0);
        /* The released lifecycle is over for new execs. */
        b = begin_req(&one, "exec-2", FP_A, uid);
        assert_int_equal(f->store->ops->exec_begin(f->store, &b, &b2, &created), -ENOENT);

        ready_sandbox(f->store, "sbx-1", &two);
        assert_string_not_equal(two.lifecycle_id, one.lifecycle_id);
        /* Same exec_id, even another command: a new lifecycle, a new exec. */
        b = begin_req(&two, "exec-1", FP_B, uid);
        assert_int_equal(f->store->ops->exec_begin(f->store, &b, &b2, &created), 0);
        assert_true(created);
        assert_string_equal(b2.lifecycle_id, two.lifecycle_id);
        assert_string_not_equal(b2.exec_uid, a.exec_uid);

        /* The old lifecycle's record is still there under its own lifecycle. */
        get(f->store, &one, "exec-1", &old);
        assert_string_equal(old.fingerprint, FP_A);
        assert_string_equal(old.exec_uid, a.exec_uid);
        exec_record_clear(&old);
        exec_record_clear(&a);
        exec_record_clear(&b2);
}

static void test_retry_after_reopening_the_store_returns_the_stored_record(void **state) {
        Fixture *f = *state;
        SandboxRecord sbx;
        ExecRecord a, again;
        char uid[OPAQUE_ID_LEN + 1];
        bool created = true;
        ExecBegin b;

        ready_sandbox(f->store, "sbx-1", &sbx);
        begin_new(f->store, &sbx, "exec-1", &a);
        store_close(f->store);
        f->store = open_store(f->dir);

        b = begin_req(&sbx, "exec-1", FP_A, uid);
        assert_int_equal(f->store->ops->exec_begin(f->store, &b, &again, &created), 0);
        assert_false(created);
        assert_memory_equal(&a, &again, sizeof a);
        exec_record_clear(&a);
        exec_record_clear(&again);
}

/* ---- concurrency ---- */

#define RACE_THREADS 10

typedef struct RaceArg {
        Store *store;
        const SandboxRecord *sbx;
        pthread_barrier_t *barrier;
        int r;
        bool created;
        char exec_uid[OPAQUE_ID_LEN + 1];
} RaceArg;

static void *race_worker(void *p) {
        RaceArg *a = p;
        char uid[OPAQUE_ID_LEN + 1];
        ExecRecord rec;

        if (random_hex(uid, sizeof uid, OPAQUE_ID_LEN / 2) < 0) {
                a->r = -EIO;
                return NULL;
        }
        ExecBegin b = {
                .owner = a->sbx->owner,
                .sandbox_id = a->sbx->sandbox_id,
                .lifecycle_id = a->sbx->lifecycle_id,
                .exec_id = "same-key",
                .exec_uid = uid,
                .fingerprint = FP_A,
                .generation = a->sbx->generation,
                .argv_json = "[\"true\"]",
                .cwd = "/workspace",
                .timeout_seconds = 10,
                .worker_id = WORKER,
                .worker_epoch = EPOCH,
                .now = now_realtime_usec(),
        };
        (void) pthread_barrier_wait(a->barrier);
        a->r = a->store->ops->exec_begin(a->store, &b, &rec, &a->created);
        if (a->r >= 0) {
                (void) strscpy(a->exec_uid, sizeof a->exec_uid, rec.exec_uid);
                exec_record_clear(&rec);
        }
        return NULL;
}

static void test_ten_threads_racing_begin_on_one_key_create_exactly_one(void **state) {
        Fixture *f = *state;
        SandboxRecord sbx;
        pthread_t t[RACE_THREADS];
        RaceArg args[RACE_THREADS];
        pthread_barrier_t barrier;
        int created = 0;

        ready_sandbox(f->store, "sbx-race", &sbx);
        assert_int_equal(pthread_barrier_init(&barrier, NULL, RACE_THREADS), 0);
        for (unsigned i = 0; i < RACE_THREADS; i++) {
                args[i] = (RaceArg) { .store = f->store, .sbx = &sbx, .barrier = &barrier };
                assert_int_equal(pthread_create(&t[i], NULL, race_worker, &args[i]), 0);
        }
        for (unsigned i = 0; i < RACE_THREADS; i++)
                assert_int_equal(pthread_join(t[i], NULL), 0);
        pthread_barrier_destroy(&barrier);

        for (unsigned i = 0; i < RACE_THREADS; i++) {
                assert_int_equal(args[i].r, 0);
                created += args[i].created;
                /* Every retry got the one stored exec, not its own. */
                assert_string_equal(args[i].exec_uid, args[0].exec_uid);
        }
        assert_int_equal(created, 1);
}

/* ---- finish ---- */

static void test_finish_succeeds_once_and_only_under_its_epoch(void **state) {
        Fixture *f = *state;
        SandboxRecord sbx;
        ExecRecord a, g;
        ExecFinish fin;

        ready_sandbox(f->store, "sbx-1", &sbx);
        begin_new(f->store, &sbx, "exec-1", &a);

        fin = finish_req(&sbx, "exec-1", EPOCH2);
        assert_int_equal(f->store->ops->exec_finish(f->store, &fin), -EBUSY);
        get(f->store, &sbx, "exec-1", &g);
        assert_int_equal(g.status, EXEC_RUNNING);
        exec_record_clear(&g);

        fin = finish_req(&sbx, "exec-unknown", EPOCH);
        assert_int_equal(f->store->ops->exec_finish(f->store, &fin), -ENOENT);

        fin = finish_req(&sbx, "exec-1", EPOCH);
        fin.status = EXEC_TIMED_OUT;
        fin.has_exit_code = false;
        fin.exit_code = 7; /* ignored without has_exit_code */
        fin.signal = 9;
        fin.truncated = true;
        fin.stdout_bytes = 20 * 1024 * 1024;
        fin.stderr_bytes = 3;
        fin.cpu_ms = 1234;
        fin.max_rss_bytes = 5 << 20;
        fin.oom_killed = true;
        fin.duration_ms = 3000;
        assert_int_equal(f->store->ops->exec_finish(f->store, &fin), 0);

        get(f->store, &sbx, "exec-1", &g);
        assert_int_equal(g.status, EXEC_TIMED_OUT);
        assert_false(g.has_exit_code);
        assert_int_equal(g.exit_code, 0);
        assert_int_equal(g.signal, 9);
        assert_true(g.truncated);
        assert_int_equal(g.stdout_bytes, 20 * 1024 * 1024);
        assert_int_equal(g.stderr_bytes, 3);
        assert_int_equal(g.cpu_ms, 1234);
        assert_int_equal(g.max_rss_bytes, 5 << 20);
        assert_true(g.oom_killed);
        assert_int_equal(g.started_at, fin.started_at);
        assert_int_equal(g.finished_at, fin.finished_at);
        assert_int_equal(g.duration_ms, 3000);
        assert_int_equal(g.created_at, a.created_at);
        /* No output given: spooled, nothing inline. */
        assert_false(g.stdout_inline);
        assert_false(g.stderr_inline);
        assert_null(g.stdout_data);
        assert_null(g.stderr_data);
        exec_record_clear(&g);

        /* Only once: a second finish (also a different result) changes nothing. */
        fin = finish_req(&sbx, "exec-1", EPOCH);
        fin.status = EXEC_FAILED;
        fin.exit_code = 1;
        assert_int_equal(f->store->ops->exec_finish(f->store, &fin), -EBUSY);
        get(f->store, &sbx, "exec-1", &g);
        assert_int_equal(g.status, EXEC_TIMED_OUT);
        assert_false(g.has_exit_code);
        exec_record_clear(&g);
        exec_record_clear(&a);
}

static void test_finish_tells_exit_code_zero_from_no_exit_code(void **state) {
        Fixture *f = *state;
        SandboxRecord sbx;
        ExecRecord a, g;
        ExecFinish fin;

        ready_sandbox(f->store, "sbx-1", &sbx);
        begin_new(f->store, &sbx, "exec-1", &a);
        fin = finish_req(&sbx, "exec-1", EPOCH);
        fin.status = EXEC_SUCCEEDED;
        fin.has_exit_code = true;
        fin.exit_code = 0;
        assert_int_equal(f->store->ops->exec_finish(f->store, &fin), 0);
        get(f->store, &sbx, "exec-1", &g);
        assert_int_equal(g.status, EXEC_SUCCEEDED);
        assert_true(g.has_exit_code);
        assert_int_equal(g.exit_code, 0);
        assert_int_equal(g.signal, 0);
        exec_record_clear(&g);
        exec_record_clear(&a);
}

static void test_inline_output_roundtrips_binary_bytes(void **state) {
        Fixture *f = *state;
        static const char out[] = { 'a', '\0', 'b', (char) 0xff, (char) 0xfe, '\0', '\n' };
        SandboxRecord sbx;
        ExecRecord a, g;
        ExecFinish fin;
        char *big;

        ready_sandbox(f->store, "sbx-1", &sbx);
        begin_new(f->store, &sbx, "exec-1", &a);
        exec_record_clear(&a);
        fin = finish_req(&sbx, "exec-1", EPOCH);
        fin.stdout_data = out;
        fin.stdout_len = sizeof out;
        fin.stderr_data = NULL; /* spooled */
        assert_int_equal(f->store->ops->exec_finish(f->store, &fin), 0);

        get(f->store, &sbx, "exec-1", &g);
        assert_true(g.stdout_inline);
        assert_int_equal(g.stdout_len, sizeof out);
        assert_memory_equal(g.stdout_data, out, sizeof out);
        assert_int_equal(g.stdout_data[sizeof out], '\0'); /* terminated for text use */
        assert_false(g.stderr_inline);
        assert_null(g.stderr_data);
        exec_record_clear(&g);
        assert_null(g.stdout_data);
        exec_record_clear(&g); /* twice is fine */

        /* The largest inline output is accepted, one byte more is not (and changes nothing). */
        big = malloc(EXEC_INLINE_OUTPUT_MAX + 1);
        assert_non_null(big);
        for (size_t i = 0; i <= EXEC_INLINE_OUTPUT_MAX; i++)
                big[i] = (char) (i * 7);
        begin_new(f->store, &sbx, "exec-2", &a);
        exec_record_clear(&a);
        fin = finish_req(&sbx, "exec-2", EPOCH);
        fin.stderr_data = big;
        fin.stderr_len = EXEC_INLINE_OUTPUT_MAX + 1;
        assert_int_equal(f->store->ops->exec_finish(f->store, &fin), -EINVAL);
        get(f->store, &sbx, "exec-2", &g);
        assert_int_equal(g.status, EXEC_RUNNING);
        exec_record_clear(&g);
        fin.stderr_len = EXEC_INLINE_OUTPUT_MAX;
        assert_int_equal(f->store->ops->exec_finish(f->store, &fin), 0);
        get(f->store, &sbx, "exec-2", &g);
        assert_true(g.stderr_inline);
        assert_int_equal(g.stderr_len, EXEC_INLINE_OUTPUT_MAX);
        assert_memory_equal(g.stderr_data, big, EXEC_INLINE_OUTPUT_MAX);
        exec_record_clear(&g);
        free(big);
}

static void test_invalid_requests_are_refused(void **state) {
        Fixture *f = *state;
        SandboxRecord sbx;
        ExecRecord r;
        char uid[OPAQUE_ID_LEN + 1], long_id[EXEC_ID_MAX + 2];
        bool created;
        ExecBegin b;
        ExecFinish fin;

        ready_sandbox(f->store, "sbx-1", &sbx);
        memset(long_id, 'x', sizeof long_id - 1);
        long_id[sizeof long_id - 1] = '\0';

        b = begin_req(&sbx, long_id, FP_A, uid);
        assert_int_equal(f->store->ops->exec_begin(f->store, &b, &r, &created), -EINVAL);
        b = begin_req(&sbx, "", FP_A, uid);
        assert_int_equal(f->store->ops->exec_begin(f->store, &b, &r, &created), -EINVAL);
        b = begin_req(&sbx, "x", FP_A "a", uid);
        assert_int_equal(f->store->ops->exec_begin(f->store, &b, &r, &created), -EINVAL);
        b = begin_req(&sbx, "x", FP_A, uid);
        b.argv_json = NULL;
        assert_int_equal(f->store->ops->exec_begin(f->store, &b, &r, &created), -EINVAL);
        b = begin_req(&sbx, "x", FP_A, uid);
        b.worker_epoch = NULL;
        assert_int_equal(f->store->ops->exec_begin(f->store, &b, &r, &created), -EINVAL);
        assert_int_equal(f->store->ops->exec_begin(f->store, NULL, &r, &created), -EINVAL);

        begin_new(f->store, &sbx, "x", &r);
        exec_record_clear(&r);
        fin = finish_req(&sbx, "x", EPOCH);
        fin.status = EXEC_RUNNING; /* finishing means a final status */
        assert_int_equal(f->store->ops->exec_finish(f->store, &fin), -EINVAL);
        fin.status = _EXEC_STATUS_MAX;
        assert_int_equal(f->store->ops->exec_finish(f->store, &fin), -EINVAL);
        fin = finish_req(&sbx, long_id, EPOCH);
        assert_int_equal(f->store->ops->exec_finish(f->store, &fin), -EINVAL);

        assert_int_equal(f->store->ops->exec_get(f->store, OWNER, "sbx-1", sbx.lifecycle_id, long_id, &r), -EINVAL);
        assert_int_equal(f->store->ops->exec_mark_lost(f->store, WORKER, "", 1), -EINVAL);
}

/* ---- worker restart ---- */

/* Begins EXEC_ID under WORKER_ID/EPOCH, started START usec ago. */
static void begin_as(Store *s, const SandboxRecord *sbx, const char *exec_id, const char *worker_id,
                     const char *epoch, usec_t started) {
        char uid[OPAQUE_ID_LEN + 1];
        ExecBegin b = begin_req(sbx, exec_id, FP_A, uid);
        ExecRecord r;
        bool created = false;

        b.worker_id = worker_id;
        b.worker_epoch = epoch;
        b.now = started;
        assert_int_equal(s->ops->exec_begin(s, &b, &r, &created), 0);
        assert_true(created);
        exec_record_clear(&r);
}

static void test_mark_lost_only_touches_running_execs_of_older_epochs_of_this_worker(void **state) {
        Fixture *f = *state;
        SandboxRecord sbx;
        ExecRecord g;
        ExecFinish fin;
        usec_t now = now_realtime_usec(), started = now - 5 * USEC_PER_SEC;

        ready_sandbox(f->store, "sbx-1", &sbx);
        begin_as(f->store, &sbx, "old-running", WORKER, EPOCH, started);
        begin_as(f->store, &sbx, "old-finished", WORKER, EPOCH, started);
        begin_as(f->store, &sbx, "current", WORKER, EPOCH2, started);
        begin_as(f->store, &sbx, "other-worker", "worker-2", EPOCH, started);
        fin = finish_req(&sbx, "old-finished", EPOCH);
        assert_int_equal(f->store->ops->exec_finish(f->store, &fin), 0);

        assert_int_equal(f->store->ops->exec_mark_lost(f->store, WORKER, EPOCH2, now), 1);

        get(f->store, &sbx, "old-running", &g);
        assert_int_equal(g.status, EXEC_WORKER_LOST);
        assert_int_equal(g.finished_at, now);
        assert_int_equal(g.duration_ms, 5000);
        assert_false(g.has_exit_code);
        exec_record_clear(&g);
        get(f->store, &sbx, "old-finished", &g);
        assert_int_equal(g.status, EXEC_SUCCEEDED);
        assert_int_equal(g.finished_at, fin.finished_at);
        exec_record_clear(&g);
        get(f->store, &sbx, "current", &g);
        assert_int_equal(g.status, EXEC_RUNNING);
        exec_record_clear(&g);
        get(f->store, &sbx, "other-worker", &g);
        assert_int_equal(g.status, EXEC_RUNNING);
        exec_record_clear(&g);

        /* A lost exec cannot be finished late by its old epoch; marking again finds nothing. */
        fin = finish_req(&sbx, "old-running", EPOCH);
        assert_int_equal(f->store->ops->exec_finish(f->store, &fin), -EBUSY);
        assert_int_equal(f->store->ops->exec_mark_lost(f->store, WORKER, EPOCH2, now), 0);
}

/* ---- retention ---- */

static void finish_at(Store *s, const SandboxRecord *sbx, const char *exec_id, usec_t at, bool out_inline,
                      bool err_inline) {
        ExecFinish fin = finish_req(sbx, exec_id, EPOCH);

        fin.started_at = at - 1000;
        fin.finished_at = at;
        fin.stdout_data = out_inline ? "o" : NULL;
        fin.stdout_len = out_inline ? 1 : 0;
        fin.stderr_data = err_inline ? "" : NULL;
        assert_int_equal(s->ops->exec_finish(s, &fin), 0);
}

static bool uid_in(char (*uids)[OPAQUE_ID_LEN + 1], size_t n, const char *uid) {
        for (size_t i = 0; i < n; i++)
                if (streq(uids[i], uid))
                        return true;
        return false;
}

static void test_prune_deletes_only_old_finished_execs_in_batches_and_returns_spooled_ones(void **state) {
        Fixture *f = *state;
        SandboxRecord sbx;
        ExecRecord old_spooled, old_half, old_inline, reused, recent, g;
        char uids[8][OPAQUE_ID_LEN + 1], untouched[1][OPAQUE_ID_LEN + 1] = { "zz" };
        usec_t now = now_realtime_usec(), cutoff = now - 100 * USEC_PER_SEC;
        size_t n = 99, total_uids = 0;
        int r, deleted = 0;

        ready_sandbox(f->store, "sbx-1", &sbx);
        begin_new(f->store, &sbx, "old-spooled", &old_spooled);
        finish_at(f->store, &sbx, "old-spooled", cutoff - 3, false, false);
        begin_new(f->store, &sbx, "old-half", &old_half);
        finish_at(f->store, &sbx, "old-half", cutoff - 2, true, false);
        begin_new(f->store, &sbx, "old-inline", &old_inline);
        finish_at(f->store, &sbx, "old-inline", cutoff - 1, true, true);
        begin_as(f->store, &sbx, "old-running", WORKER, EPOCH, cutoff - 10 * USEC_PER_SEC);
        begin_new(f->store, &sbx, "recent", &recent);
        finish_at(f->store, &sbx, "recent", cutoff, false, false); /* not before the cutoff */

        assert_int_equal(f->store->ops->exec_prune(f->store, cutoff, untouched, 0, &n), -EINVAL);
        assert_int_equal(n, 99);
        assert_string_equal(untouched[0], "zz");

        /* Batches of two: oldest first, until a call deletes nothing. */
        for (unsigned calls = 0;; calls++) {
                assert_true(calls < 4);
                n = 99;
                r = f->store->ops->exec_prune(f->store, cutoff, uids + total_uids, 2, &n);
                assert_true(r >= 0);
                assert_true(r <= 2);
                assert_true(n <= (size_t) r);
                if (calls == 0) {
                        assert_int_equal(r, 2);
                        assert_int_equal(n, 2); /* old-spooled, old-half */
                }
                total_uids += n;
                deleted += r;
                if (r == 0)
                        break;
        }
        assert_int_equal(deleted, 3);
        assert_int_equal(total_uids, 2);
        assert_true(uid_in(uids, total_uids, old_spooled.exec_uid));
        assert_true(uid_in(uids, total_uids, old_half.exec_uid));
        assert_false(uid_in(uids, total_uids, old_inline.exec_uid));

        const char *gone[] = { "old-spooled", "old-half", "old-inline" };
        for (size_t i = 0; i < ELEMENTSOF(gone); i++)
                assert_int_equal(f->store->ops->exec_get(f->store, OWNER, "sbx-1", sbx.lifecycle_id, gone[i], &g),
                                 -ENOENT);
        get(f->store, &sbx, "old-running", &g);
        assert_int_equal(g.status, EXEC_RUNNING);
        exec_record_clear(&g);
        get(f->store, &sbx, "recent", &g);
        exec_record_clear(&g);

        /* A pruned exec_id is free again only as a new exec: its record is gone. */
        begin_new(f->store, &sbx, "old-inline", &reused);
        assert_string_not_equal(reused.exec_uid, old_inline.exec_uid);

        exec_record_clear(&old_spooled);
        exec_record_clear(&old_half);
        exec_record_clear(&old_inline);
        exec_record_clear(&recent);
        exec_record_clear(&reused);
}

/* ---- benchmark (printed, never asserted: timing does not decide pass/fail) ---- */

#define BENCH_PAIRS 1000
#define BENCH_THREADS 8

typedef struct BenchArg {
        Store *store;
        const SandboxRecord *sbx;
        unsigned thread, count;
        int errors;
        usec_t *begin_us, *finish_us; /* per-call latencies, COUNT each, or NULL */
} BenchArg;

static void *bench_worker(void *p) {
        BenchArg *a = p;

        for (unsigned i = 0; i < a->count; i++) {
                char id[32], uid[OPAQUE_ID_LEN + 1];
                ExecRecord rec;
                bool created;

                if (bsprintf(id, sizeof id, "bench-%u-%u", a->thread, i) < 0 ||
                    random_hex(uid, sizeof uid, OPAQUE_ID_LEN / 2) < 0) {
                        a->errors++;
                        continue;
                }
                usec_t now = now_realtime_usec();
                ExecBegin b = {
                        .owner = a->sbx->owner,
                        .sandbox_id = a->sbx->sandbox_id,
                        .lifecycle_id = a->sbx->lifecycle_id,
                        .exec_id = id,
                        .exec_uid = uid,
                        .fingerprint = FP_A,
                        .generation = a->sbx->generation,
                        .principal = "admin",
                        .argv_json = "[\"sh\",\"-c\",\"printf x\"]",
                        .cwd = "/workspace",
                        .env_keys_json = "[]",
                        .exec_scope = "bench",
                        .timeout_seconds = 300,
                        .worker_id = WORKER,
                        .worker_epoch = EPOCH,
                        .now = now,
                };
                ExecFinish fin = {
                        .owner = a->sbx->owner,
                        .sandbox_id = a->sbx->sandbox_id,
                        .lifecycle_id = a->sbx->lifecycle_id,
                        .exec_id = id,
                        .worker_epoch = EPOCH,
                        .status = EXEC_SUCCEEDED,
                        .has_exit_code = true,
                        .stdout_bytes = 1,
                        .started_at = now,
                        .finished_at = now + 1000,
                        .duration_ms = 1,
                        .stdout_data = "x",
                        .stdout_len = 1,
                        .stderr_data = "",
                };
                usec_t t0 = now_monotonic_usec(), t1, t2;
                if (a->store->ops->exec_begin(a->store, &b, &rec, &created) < 0 || !created)
                        a->errors++;
                else
                        exec_record_clear(&rec);
                t1 = now_monotonic_usec();
                if (a->store->ops->exec_finish(a->store, &fin) < 0)
                        a->errors++;
                t2 = now_monotonic_usec();
                if (a->begin_us) {
                        a->begin_us[i] = t1 - t0;
                        a->finish_us[i] = t2 - t1;
                }
        }
        return NULL;
}

static int cmp_usec(const void *a, const void *b) {
        usec_t x = *(const usec_t *) a, y = *(const usec_t *) b;
        return x < y ? -1 : x > y;
}

static void print_latencies(const char *what, usec_t *v, size_t n) {
        qsort(v, n, sizeof *v, cmp_usec);
        print_message("bench: %-11s p50 %4" PRIu64 " us, p99 %5" PRIu64 " us, max %6" PRIu64 " us\n", what, v[n / 2],
                      v[n * 99 / 100], v[n - 1]);
}

static void test_benchmark_begin_finish_pairs(void **state) {
        Fixture *f = *state;
        SandboxRecord sbx[BENCH_THREADS];
        pthread_t t[BENCH_THREADS];
        BenchArg args[BENCH_THREADS];
        usec_t t0, serial, parallel, begin_us[BENCH_PAIRS], finish_us[BENCH_PAIRS];

        for (unsigned i = 0; i < BENCH_THREADS; i++) {
                char id[32];

                assert_int_equal(bsprintf(id, sizeof id, "sbx-bench-%u", i), 0);
                ready_sandbox(f->store, id, &sbx[i]);
        }

        args[0] = (BenchArg) { .store = f->store, .sbx = &sbx[0], .thread = 0, .count = BENCH_PAIRS,
                               .begin_us = begin_us, .finish_us = finish_us };
        t0 = now_monotonic_usec();
        bench_worker(&args[0]);
        serial = now_monotonic_usec() - t0;
        assert_int_equal(args[0].errors, 0);

        t0 = now_monotonic_usec();
        for (unsigned i = 0; i < BENCH_THREADS; i++) {
                args[i] = (BenchArg) { .store = f->store, .sbx = &sbx[i], .thread = 100 + i,
                                       .count = BENCH_PAIRS / BENCH_THREADS };
                assert_int_equal(pthread_create(&t[i], NULL, bench_worker, &args[i]), 0);
        }
        for (unsigned i = 0; i < BENCH_THREADS; i++) {
                assert_int_equal(pthread_join(t[i], NULL), 0);
                assert_int_equal(args[i].errors, 0);
        }
        parallel = now_monotonic_usec() - t0;

        print_message("bench: %u serial exec_begin+exec_finish pairs in %.1f ms: %.1f us/pair, %.0f pairs/s\n",
                      BENCH_PAIRS, serial / 1000.0, (double) serial / BENCH_PAIRS,
                      BENCH_PAIRS * 1e6 / (double) serial);
        print_latencies("exec_begin", begin_us, BENCH_PAIRS);
        print_latencies("exec_finish", finish_us, BENCH_PAIRS);
        print_message("bench: %u pairs over %u threads in %.1f ms: %.0f pairs/s\n", BENCH_PAIRS, BENCH_THREADS,
                      parallel / 1000.0, BENCH_PAIRS * 1e6 / (double) parallel);
}

int main(void) {
        const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
                cmocka_unit_test(test_exec_status_names_roundtrip_and_unknown_is_refused),
                T(test_begin_creates_running_record_visible_by_get),
                T(test_begin_is_fenced_by_lifecycle_generation_and_status),
                T(test_begin_after_reown_needs_the_new_generation),
                T(test_retry_with_same_fingerprint_returns_stored_record_also_after_finish),
                T(test_reuse_with_other_fingerprint_is_refused_with_eexist),
                T(test_exec_id_is_free_again_after_release_and_re_resolve),
                T(test_retry_after_reopening_the_store_returns_the_stored_record),
                T(test_ten_threads_racing_begin_on_one_key_create_exactly_one),
                T(test_finish_succeeds_once_and_only_under_its_epoch),
                T(test_finish_tells_exit_code_zero_from_no_exit_code),
                T(test_inline_output_roundtrips_binary_bytes),
                T(test_invalid_requests_are_refused),
                T(test_mark_lost_only_touches_running_execs_of_older_epochs_of_this_worker),
                T(test_prune_deletes_only_old_finished_execs_in_batches_and_returns_spooled_ones),
                T(test_benchmark_begin_finish_pairs),
#undef T
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
