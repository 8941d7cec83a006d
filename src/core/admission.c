/* SPDX-License-Identifier: MIT */
#include "admission.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "macros.h"

struct Admission {
        pthread_mutex_t lock;
        unsigned max_running, queue_max;
        unsigned running, queued;
        AdmissionWaiter *head, *tail;
        bool closed;
};

int admission_new(unsigned max_running, unsigned queue_max, Admission **ret) {
        Admission *a;

        if (max_running == 0)
                return -EINVAL;
        a = calloc(1, sizeof *a);
        if (!a)
                return -ENOMEM;
        if (pthread_mutex_init(&a->lock, NULL) != 0) {
                free(a);
                return -ENOMEM;
        }
        a->max_running = max_running;
        a->queue_max = queue_max;
        *ret = a;
        return 0;
}

void admission_free(Admission *a) {
        if (!a)
                return;
        (void) pthread_mutex_destroy(&a->lock);
        free(a);
}

static void unlink_waiter(Admission *a, AdmissionWaiter *w) {
        if (w->prev)
                w->prev->next = w->next;
        else
                a->head = w->next;
        if (w->next)
                w->next->prev = w->prev;
        else
                a->tail = w->prev;
        w->prev = w->next = NULL;
        w->queued = false;
        a->queued--;
}

int admission_enter(Admission *a, AdmissionWaiter *w) {
        int r;

        (void) pthread_mutex_lock(&a->lock);
        if (a->closed)
                r = -ESHUTDOWN;
        else if (a->running < a->max_running && a->queued == 0) {
                a->running++;
                r = 1;
        } else if (a->queued >= a->queue_max)
                r = -EAGAIN;
        else {
                w->next = NULL;
                w->prev = a->tail;
                if (a->tail)
                        a->tail->next = w;
                else
                        a->head = w;
                a->tail = w;
                w->queued = true;
                a->queued++;
                r = 0;
        }
        (void) pthread_mutex_unlock(&a->lock);
        return r;
}

bool admission_cancel(Admission *a, AdmissionWaiter *w) {
        bool was;

        (void) pthread_mutex_lock(&a->lock);
        was = w->queued;
        if (was)
                unlink_waiter(a, w);
        (void) pthread_mutex_unlock(&a->lock);
        return was;
}

void admission_leave(Admission *a) {
        AdmissionWaiter *w = NULL;

        (void) pthread_mutex_lock(&a->lock);
        if (a->head) {
                /* The slot passes on directly: running stays the same. */
                w = a->head;
                unlink_waiter(a, w);
        } else if (a->running > 0)
                a->running--;
        (void) pthread_mutex_unlock(&a->lock);
        if (w)
                w->granted(w);
}

void admission_counts(Admission *a, unsigned *ret_running, unsigned *ret_queued) {
        (void) pthread_mutex_lock(&a->lock);
        if (ret_running)
                *ret_running = a->running;
        if (ret_queued)
                *ret_queued = a->queued;
        (void) pthread_mutex_unlock(&a->lock);
}

void admission_close(Admission *a) {
        (void) pthread_mutex_lock(&a->lock);
        a->closed = true;
        (void) pthread_mutex_unlock(&a->lock);
}

void admission_cancel_all(Admission *a, void (*fn)(AdmissionWaiter *w, void *userdata), void *userdata) {
        for (;;) {
                AdmissionWaiter *w;

                (void) pthread_mutex_lock(&a->lock);
                w = a->head;
                if (w)
                        unlink_waiter(a, w);
                (void) pthread_mutex_unlock(&a->lock);
                if (!w)
                        return;
                fn(w, userdata);
        }
}
