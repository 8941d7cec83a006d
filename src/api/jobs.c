/* SPDX-License-Identifier: MIT */
#include "jobs.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "macros.h"

struct JobPool {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        JobFn run, cancel;
        void **queue;                 /* ring buffer */
        unsigned queue_max, head, len;
        bool stopping;
        pthread_t *threads;
        unsigned n_threads;
};

static void *worker(void *arg) {
        JobPool *p = arg;

        for (;;) {
                void *job;

                pthread_mutex_lock(&p->lock);
                while (p->len == 0 && !p->stopping)
                        pthread_cond_wait(&p->cond, &p->lock);
                if (p->len == 0) {
                        pthread_mutex_unlock(&p->lock);
                        return NULL;
                }
                job = p->queue[p->head];
                p->head = (p->head + 1) % p->queue_max;
                p->len--;
                pthread_mutex_unlock(&p->lock);
                p->run(job);
        }
}

void jobpool_stop(JobPool *p) {
        void **left;
        unsigned n = 0;

        pthread_mutex_lock(&p->lock);
        p->stopping = true;
        /* Take what is still queued: it is cancelled, not run. */
        left = calloc(p->len ? p->len : 1, sizeof *left);
        while (left && p->len > 0) {
                left[n++] = p->queue[p->head];
                p->head = (p->head + 1) % p->queue_max;
                p->len--;
        }
        pthread_cond_broadcast(&p->cond);
        pthread_mutex_unlock(&p->lock);

        for (unsigned i = 0; i < n; i++)
                p->cancel(left[i]);
        free(left);
        for (unsigned i = 0; i < p->n_threads; i++)
                (void) pthread_join(p->threads[i], NULL);
        p->n_threads = 0;
}

void jobpool_free(JobPool *p) {
        if (!p)
                return;
        jobpool_stop(p);
        pthread_cond_destroy(&p->cond);
        pthread_mutex_destroy(&p->lock);
        free(p->threads);
        free(p->queue);
        free(p);
}

int jobpool_new(unsigned threads, unsigned queue_max, JobFn run, JobFn cancel, JobPool **ret) {
        JobPool *p;
        int r;

        if (threads == 0 || queue_max == 0)
                return -EINVAL;
        p = calloc(1, sizeof *p);
        if (!p)
                return -ENOMEM;
        pthread_mutex_init(&p->lock, NULL);
        pthread_cond_init(&p->cond, NULL);
        p->run = run;
        p->cancel = cancel;
        p->queue_max = queue_max;
        p->queue = calloc(queue_max, sizeof *p->queue);
        p->threads = calloc(threads, sizeof *p->threads);
        if (!p->queue || !p->threads) {
                jobpool_free(p);
                return -ENOMEM;
        }
        for (unsigned i = 0; i < threads; i++) {
                r = pthread_create(&p->threads[i], NULL, worker, p);
                if (r != 0) {
                        jobpool_free(p);
                        return -r;
                }
                p->n_threads++;
        }
        *ret = p;
        return 0;
}

int jobpool_submit(JobPool *p, void *arg) {
        int r = 0;

        pthread_mutex_lock(&p->lock);
        if (p->stopping)
                r = -ESHUTDOWN;
        else if (p->len == p->queue_max)
                r = -EAGAIN;
        else {
                p->queue[(p->head + p->len) % p->queue_max] = arg;
                p->len++;
                pthread_cond_signal(&p->cond);
        }
        pthread_mutex_unlock(&p->lock);
        return r;
}
