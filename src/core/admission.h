/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>

/* Worker admission (DESIGN §3): at most MAX_RUNNING execs run at once; past that a
 * request waits in a bounded FIFO queue until a slot frees up (its waiter is then handed
 * the slot) or its caller gives up (admission_cancel, on its own timer). Nothing in here
 * blocks or sleeps: a waiter is a callback, so a queued request holds no thread.
 *
 * Thread-safe. Callbacks run outside the lock, on the thread that freed the slot. */

typedef struct Admission Admission;
typedef struct AdmissionWaiter AdmissionWaiter;

struct AdmissionWaiter {
        /* Called once when the waiter got its slot (it owns it: admission_leave() later). */
        void (*granted)(AdmissionWaiter *w);
        /* Private. */
        AdmissionWaiter *prev, *next;
        bool queued;
};

int admission_new(unsigned max_running, unsigned queue_max, Admission **ret);
void admission_free(Admission *a);

/* Returns 1 when W got a slot now (no callback), 0 when it was queued (W->granted comes
 * later, unless cancelled), -EAGAIN when the queue is full, -ESHUTDOWN once closed. */
int admission_enter(Admission *a, AdmissionWaiter *w);

/* Takes W out of the queue. Returns true if it was still queued (it will never be
 * granted); false if it was granted meanwhile (it owns a slot) or never queued. */
bool admission_cancel(Admission *a, AdmissionWaiter *w);

/* Gives a slot back; hands it to the first waiter in the queue, if any. */
void admission_leave(Admission *a);

void admission_counts(Admission *a, unsigned *ret_running, unsigned *ret_queued);

/* Refuses new entries from now on (-ESHUTDOWN). Queued waiters stay: take them out with
 * admission_cancel_all(). */
void admission_close(Admission *a);

/* Removes every queued waiter and calls FN on each (outside the lock). */
void admission_cancel_all(Admission *a, void (*fn)(AdmissionWaiter *w, void *userdata), void *userdata);
