/* SPDX-License-Identifier: MIT */
/* Unit tests for worker admission (src/core/admission.c) and the exec scopes of the hold
 * manager (HOLD_EXEC in src/core/holds.c). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>

#include "admission.h"
#include "holds.h"
#include "time-util.h"

typedef struct W {
        AdmissionWaiter w;
        int granted;
} W;

static void on_granted(AdmissionWaiter *w) {
        ((W *) w)->granted++;
}

static void test_admits_up_to_the_cap_then_queues_then_refuses(void **state) {
        Admission *a = NULL;
        W w[5] = {};
        unsigned running, queued;

        for (size_t i = 0; i < 5; i++)
                w[i].w.granted = on_granted;
        assert_int_equal(admission_new(2, 2, &a), 0);
        assert_int_equal(admission_enter(a, &w[0].w), 1);
        assert_int_equal(admission_enter(a, &w[1].w), 1);
        assert_int_equal(admission_enter(a, &w[2].w), 0);
        assert_int_equal(admission_enter(a, &w[3].w), 0);
        assert_int_equal(admission_enter(a, &w[4].w), -EAGAIN);
        admission_counts(a, &running, &queued);
        assert_int_equal(running, 2);
        assert_int_equal(queued, 2);

        /* A slot passes to the first in the queue, in order. */
        admission_leave(a);
        assert_int_equal(w[2].granted, 1);
        assert_int_equal(w[3].granted, 0);
        admission_counts(a, &running, &queued);
        assert_int_equal(running, 2);
        assert_int_equal(queued, 1);
        admission_free(a);
}

static void test_a_cancelled_waiter_is_never_granted(void **state) {
        Admission *a = NULL;
        W w[3] = {};
        unsigned running, queued;

        for (size_t i = 0; i < 3; i++)
                w[i].w.granted = on_granted;
        assert_int_equal(admission_new(1, 4, &a), 0);
        assert_int_equal(admission_enter(a, &w[0].w), 1);
        assert_int_equal(admission_enter(a, &w[1].w), 0);
        assert_int_equal(admission_enter(a, &w[2].w), 0);
        assert_true(admission_cancel(a, &w[1].w));
        assert_false(admission_cancel(a, &w[1].w));
        admission_leave(a);
        assert_int_equal(w[1].granted, 0);
        assert_int_equal(w[2].granted, 1);
        /* Granted already: cancel says so, and the waiter owns its slot. */
        assert_false(admission_cancel(a, &w[2].w));
        admission_leave(a);
        admission_counts(a, &running, &queued);
        assert_int_equal(running, 0);
        assert_int_equal(queued, 0);
        admission_free(a);
}

static void test_nobody_jumps_the_queue(void **state) {
        Admission *a = NULL;
        W w[3] = {};

        for (size_t i = 0; i < 3; i++)
                w[i].w.granted = on_granted;
        assert_int_equal(admission_new(1, 4, &a), 0);
        assert_int_equal(admission_enter(a, &w[0].w), 1);
        assert_int_equal(admission_enter(a, &w[1].w), 0);
        /* Even if a slot were free, a newcomer queues behind a waiter. */
        assert_int_equal(admission_enter(a, &w[2].w), 0);
        admission_leave(a);
        assert_int_equal(w[1].granted, 1);
        assert_int_equal(w[2].granted, 0);
        admission_leave(a);
        admission_leave(a);
        admission_free(a);
}

static void refuse(AdmissionWaiter *w, void *userdata) {
        (*(int *) userdata)++;
}

static void test_closing_refuses_new_and_cancel_all_empties_the_queue(void **state) {
        Admission *a = NULL;
        W w[3] = {};
        int refused = 0;
        unsigned queued;

        for (size_t i = 0; i < 3; i++)
                w[i].w.granted = on_granted;
        assert_int_equal(admission_new(1, 4, &a), 0);
        assert_int_equal(admission_enter(a, &w[0].w), 1);
        assert_int_equal(admission_enter(a, &w[1].w), 0);
        admission_close(a);
        assert_int_equal(admission_enter(a, &w[2].w), -ESHUTDOWN);
        admission_cancel_all(a, refuse, &refused);
        assert_int_equal(refused, 1);
        admission_counts(a, NULL, &queued);
        assert_int_equal(queued, 0);
        admission_leave(a);
        assert_int_equal(w[1].granted, 0);
        admission_free(a);
}

/* ---- exec scopes in the hold manager ---- */

static void test_execs_in_one_scope_conflict_at_once(void **state) {
        Holds *h = NULL;
        Hold *a = NULL, *b = NULL, *c = NULL;
        usec_t t0;

        assert_int_equal(holds_new(&h), 0);
        assert_int_equal(holds_acquire(h, "sbx", HOLD_EXEC, "s1", NULL, 0, &a), 0);
        t0 = now_monotonic_usec();
        /* Never waits, whatever the timeout says. */
        assert_int_equal(holds_acquire(h, "sbx", HOLD_EXEC, "s1", NULL, 5 * USEC_PER_SEC, &b), -EBUSY);
        assert_true(now_monotonic_usec() - t0 < USEC_PER_SEC);
        assert_int_equal(holds_acquire(h, "sbx", HOLD_EXEC, "s2", NULL, 0, &c), 0);
        hold_release(a);
        assert_int_equal(holds_acquire(h, "sbx", HOLD_EXEC, "s1", NULL, 0, &b), 0);
        hold_release(b);
        hold_release(c);
        holds_free(h);
}

static void test_an_unscoped_exec_conflicts_with_every_exec(void **state) {
        Holds *h = NULL;
        Hold *a = NULL, *b = NULL;

        assert_int_equal(holds_new(&h), 0);
        assert_int_equal(holds_acquire(h, "sbx", HOLD_EXEC, "s1", NULL, 0, &a), 0);
        assert_int_equal(holds_acquire(h, "sbx", HOLD_EXEC, NULL, NULL, 0, &b), -EBUSY);
        hold_release(a);
        assert_int_equal(holds_acquire(h, "sbx", HOLD_EXEC, NULL, NULL, 0, &b), 0);
        assert_int_equal(holds_acquire(h, "sbx", HOLD_EXEC, "s1", NULL, 0, &a), -EBUSY);
        /* Another sandbox is another story. */
        assert_int_equal(holds_acquire(h, "other", HOLD_EXEC, NULL, NULL, 0, &a), 0);
        hold_release(a);
        hold_release(b);
        holds_free(h);
}

static void test_exec_holds_do_not_conflict_with_file_holds(void **state) {
        Holds *h = NULL;
        Hold *x = NULL, *w = NULL, *r = NULL;

        assert_int_equal(holds_new(&h), 0);
        assert_int_equal(holds_acquire(h, "sbx", HOLD_EXEC, NULL, NULL, 0, &x), 0);
        assert_int_equal(holds_acquire(h, "sbx", HOLD_FILE_WRITE, "/workspace", NULL, 0, &w), 0);
        assert_int_equal(holds_acquire(h, "sbx", HOLD_FILE_READ, "/cache/a", NULL, 0, &r), 0);
        hold_release(x);
        hold_release(w);
        hold_release(r);
        holds_free(h);
}

static void test_exclusive_excludes_execs(void **state) {
        Holds *h = NULL;
        Hold *x = NULL, *e = NULL;

        assert_int_equal(holds_new(&h), 0);
        assert_int_equal(holds_acquire(h, "sbx", HOLD_EXEC, "s", NULL, 0, &x), 0);
        assert_int_equal(holds_acquire(h, "sbx", HOLD_EXCLUSIVE, NULL, NULL, 10 * 1000, &e), -EBUSY);
        hold_release(x);
        assert_int_equal(holds_acquire(h, "sbx", HOLD_EXCLUSIVE, NULL, NULL, 0, &e), 0);
        assert_int_equal(holds_acquire(h, "sbx", HOLD_EXEC, "s", NULL, 0, &x), -EBUSY);
        hold_release(e);
        holds_free(h);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_admits_up_to_the_cap_then_queues_then_refuses),
                cmocka_unit_test(test_a_cancelled_waiter_is_never_granted),
                cmocka_unit_test(test_nobody_jumps_the_queue),
                cmocka_unit_test(test_closing_refuses_new_and_cancel_all_empties_the_queue),
                cmocka_unit_test(test_execs_in_one_scope_conflict_at_once),
                cmocka_unit_test(test_an_unscoped_exec_conflicts_with_every_exec),
                cmocka_unit_test(test_exec_holds_do_not_conflict_with_file_holds),
                cmocka_unit_test(test_exclusive_excludes_execs),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
