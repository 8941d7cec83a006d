/* SPDX-License-Identifier: MIT */
/* Unit tests for the per-sandbox hold manager (src/core/holds.c). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <unistd.h>

#include "holds.h"
#include "time-util.h"

#define LONG_WAIT (30 * USEC_PER_SEC)

static int setup(void **state) {
        Holds *h = NULL;

        assert_int_equal(holds_new(&h), 0);
        *state = h;
        return 0;
}

static int teardown(void **state) {
        holds_free(*state);
        return 0;
}

static void test_readers_share_a_path(void **state) {
        Holds *h = *state;
        Hold *a = NULL, *b = NULL;

        assert_int_equal(holds_acquire(h, "sbx", HOLD_FILE_READ, "/workspace/a", NULL, 0, &a), 0);
        assert_int_equal(holds_acquire(h, "sbx", HOLD_FILE_READ, "/workspace/a", NULL, 0, &b), 0);
        assert_int_equal(holds_active(h), 1);
        hold_release(a);
        hold_release(b);
        assert_int_equal(holds_active(h), 0);
}

static void test_writer_excludes_overlapping_paths_only(void **state) {
        Holds *h = *state;
        Hold *w = NULL, *x = NULL;

        assert_int_equal(holds_acquire(h, "sbx", HOLD_FILE_WRITE, "/workspace/a", NULL, 0, &w), 0);

        /* same path, descendant, ancestor: refused */
        assert_int_equal(holds_acquire(h, "sbx", HOLD_FILE_READ, "/workspace/a", NULL, 0, &x), -EBUSY);
        assert_int_equal(holds_acquire(h, "sbx", HOLD_FILE_READ, "/workspace/a/b", NULL, 0, &x), -EBUSY);
        assert_int_equal(holds_acquire(h, "sbx", HOLD_FILE_WRITE, "/workspace", NULL, 0, &x), -EBUSY);
        assert_int_equal(holds_acquire(h, "sbx", HOLD_FILE_READ, "/", NULL, 0, &x), -EBUSY);
        /* a move whose destination overlaps */
        assert_int_equal(holds_acquire(h, "sbx", HOLD_FILE_WRITE, "/cache/x", "/workspace/a/c", 0, &x), -EBUSY);
        assert_null(x);

        /* a sibling sharing a name prefix is not a descendant */
        assert_int_equal(holds_acquire(h, "sbx", HOLD_FILE_WRITE, "/workspace/ab", NULL, 0, &x), 0);
        hold_release(x);
        x = NULL;
        /* another root of the same sandbox */
        assert_int_equal(holds_acquire(h, "sbx", HOLD_FILE_WRITE, "/cache/a", "/home/sandbox/a", 0, &x), 0);
        hold_release(x);
        x = NULL;
        /* the same path in another sandbox */
        assert_int_equal(holds_acquire(h, "other", HOLD_FILE_WRITE, "/workspace/a", NULL, 0, &x), 0);
        assert_int_equal(holds_active(h), 2);
        hold_release(x);

        hold_release(w);
        assert_int_equal(holds_active(h), 0);
}

static void test_move_destination_is_held_too(void **state) {
        Holds *h = *state;
        Hold *m = NULL, *x = NULL;

        assert_int_equal(holds_acquire(h, "sbx", HOLD_FILE_WRITE, "/workspace/src", "/workspace/dst", 0, &m), 0);
        assert_int_equal(holds_acquire(h, "sbx", HOLD_FILE_READ, "/workspace/dst/f", NULL, 0, &x), -EBUSY);
        assert_int_equal(holds_acquire(h, "sbx", HOLD_FILE_READ, "/workspace/src", NULL, 0, &x), -EBUSY);
        assert_int_equal(holds_acquire(h, "sbx", HOLD_FILE_READ, "/workspace/other", NULL, 0, &x), 0);
        hold_release(x);
        hold_release(m);
}

static void test_exclusive_excludes_everything(void **state) {
        Holds *h = *state;
        Hold *ex = NULL, *x = NULL;

        assert_int_equal(holds_acquire(h, "sbx", HOLD_EXCLUSIVE, NULL, NULL, 0, &ex), 0);
        assert_int_equal(holds_acquire(h, "sbx", HOLD_FILE_READ, "/cache/z", NULL, 0, &x), -EBUSY);
        assert_int_equal(holds_acquire(h, "sbx", HOLD_EXCLUSIVE, NULL, NULL, 0, &x), -EBUSY);
        assert_int_equal(holds_acquire(h, "other", HOLD_EXCLUSIVE, NULL, NULL, 0, &x), 0);
        hold_release(x);
        hold_release(ex);
        assert_int_equal(holds_active(h), 0);
}

static void test_timeout_gives_ebusy_after_waiting(void **state) {
        Holds *h = *state;
        Hold *w = NULL, *x = NULL;
        usec_t start;

        assert_int_equal(holds_acquire(h, "sbx", HOLD_FILE_WRITE, "/workspace/f", NULL, 0, &w), 0);
        start = now_monotonic_usec();
        assert_int_equal(holds_acquire(h, "sbx", HOLD_FILE_WRITE, "/workspace/f", NULL, 50 * USEC_PER_MSEC, &x),
                         -EBUSY);
        /* it did wait (a lower bound only: never an upper bound on timing) */
        assert_true(now_monotonic_usec() - start >= 50 * USEC_PER_MSEC);
        assert_null(x);
        hold_release(w);
        assert_int_equal(holds_active(h), 0);
}

typedef struct Waiter {
        Holds *holds;
        HoldKind kind;
        const char *path;
        usec_t timeout;
        atomic_int result;   /* 1 = still waiting */
        Hold *hold;
} Waiter;

static void *waiter_thread(void *arg) {
        Waiter *w = arg;
        int r = holds_acquire(w->holds, "sbx", w->kind, w->path, NULL, w->timeout, &w->hold);
        atomic_store(&w->result, r);
        return NULL;
}

static void start_waiter(pthread_t *t, Waiter *w) {
        atomic_store(&w->result, 1);
        assert_int_equal(pthread_create(t, NULL, waiter_thread, w), 0);
}

/* Polls until a probe READ on an unrelated path is refused, i.e. an exclusive waiter has
 * registered. Bounded so a broken manager fails the test rather than hanging. */
static void wait_for_exclusive_waiter(Holds *h) {
        for (int i = 0; i < 10000; i++) {
                Hold *probe = NULL;
                int r = holds_acquire(h, "sbx", HOLD_FILE_READ, "/envs/probe", NULL, 0, &probe);
                if (r == -EBUSY)
                        return;
                assert_int_equal(r, 0);
                hold_release(probe);
                usleep(1000);
        }
        fail_msg("the exclusive waiter never registered");
}

static void test_exclusive_waits_for_holds_to_drain(void **state) {
        Holds *h = *state;
        Hold *r1 = NULL, *x = NULL;
        Waiter w = { .holds = h, .kind = HOLD_EXCLUSIVE, .timeout = LONG_WAIT };
        pthread_t t;

        assert_int_equal(holds_acquire(h, "sbx", HOLD_FILE_READ, "/workspace/a", NULL, 0, &r1), 0);
        start_waiter(&t, &w);
        wait_for_exclusive_waiter(h);
        assert_int_equal(atomic_load(&w.result), 1); /* still waiting while the read is held */

        hold_release(r1);
        assert_int_equal(pthread_join(t, NULL), 0);
        assert_int_equal(atomic_load(&w.result), 0);
        assert_non_null(w.hold);

        /* and once in, it excludes */
        assert_int_equal(holds_acquire(h, "sbx", HOLD_FILE_READ, "/workspace/zz", NULL, 0, &x), -EBUSY);
        hold_release(w.hold);
        assert_int_equal(holds_acquire(h, "sbx", HOLD_FILE_READ, "/workspace/zz", NULL, 0, &x), 0);
        hold_release(x);
        assert_int_equal(holds_active(h), 0);
}

static void test_waiting_exclusive_is_not_starved_by_new_readers(void **state) {
        Holds *h = *state;
        Hold *r1 = NULL, *late = NULL;
        Waiter w = { .holds = h, .kind = HOLD_EXCLUSIVE, .timeout = LONG_WAIT };
        Waiter reader = { .holds = h, .kind = HOLD_FILE_READ, .path = "/workspace/a", .timeout = LONG_WAIT };
        pthread_t t, tr;

        assert_int_equal(holds_acquire(h, "sbx", HOLD_FILE_READ, "/workspace/a", NULL, 0, &r1), 0);
        start_waiter(&t, &w);
        wait_for_exclusive_waiter(h);

        /* a reader that would share with r1 is kept out while the exclusive waits */
        assert_int_equal(holds_acquire(h, "sbx", HOLD_FILE_READ, "/workspace/a", NULL, 0, &late), -EBUSY);
        start_waiter(&tr, &reader);

        hold_release(r1);
        assert_int_equal(pthread_join(t, NULL), 0);
        assert_int_equal(atomic_load(&w.result), 0);
        /* the exclusive got in first; the queued reader is still out */
        assert_int_equal(atomic_load(&reader.result), 1);
        hold_release(w.hold);
        assert_int_equal(pthread_join(tr, NULL), 0);
        assert_int_equal(atomic_load(&reader.result), 0);
        hold_release(reader.hold);
        assert_int_equal(holds_active(h), 0);
}

static void test_exclusive_that_gives_up_lets_readers_in_again(void **state) {
        Holds *h = *state;
        Hold *r1 = NULL, *ex = NULL, *x = NULL;

        assert_int_equal(holds_acquire(h, "sbx", HOLD_FILE_READ, "/workspace/a", NULL, 0, &r1), 0);
        assert_int_equal(holds_acquire(h, "sbx", HOLD_EXCLUSIVE, NULL, NULL, 20 * USEC_PER_MSEC, &ex), -EBUSY);
        assert_null(ex);
        assert_int_equal(holds_acquire(h, "sbx", HOLD_FILE_READ, "/workspace/a", NULL, 0, &x), 0);
        hold_release(x);
        hold_release(r1);
        assert_int_equal(holds_active(h), 0);
}

static void test_idle_sandboxes_cost_no_entries(void **state) {
        Holds *h = *state;
        Hold *hs[64] = {};
        char key[16];

        for (unsigned i = 0; i < 64; i++) {
                (void) snprintf(key, sizeof key, "s%u", i);
                assert_int_equal(holds_acquire(h, key, i % 2 ? HOLD_EXCLUSIVE : HOLD_FILE_WRITE, "/workspace", NULL,
                                               0, &hs[i]),
                                 0);
        }
        assert_int_equal(holds_active(h), 64);
        for (unsigned i = 0; i < 64; i++)
                hold_release(hs[i]);
        assert_int_equal(holds_active(h), 0);
        hold_release(NULL); /* accepts NULL */
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_readers_share_a_path, setup, teardown),
                cmocka_unit_test_setup_teardown(test_writer_excludes_overlapping_paths_only, setup, teardown),
                cmocka_unit_test_setup_teardown(test_move_destination_is_held_too, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exclusive_excludes_everything, setup, teardown),
                cmocka_unit_test_setup_teardown(test_timeout_gives_ebusy_after_waiting, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exclusive_waits_for_holds_to_drain, setup, teardown),
                cmocka_unit_test_setup_teardown(test_waiting_exclusive_is_not_starved_by_new_readers, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exclusive_that_gives_up_lets_readers_in_again, setup, teardown),
                cmocka_unit_test_setup_teardown(test_idle_sandboxes_cost_no_entries, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
