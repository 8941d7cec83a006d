/* SPDX-License-Identifier: MIT */
#pragma once

/* A small fixed pool of threads with a bounded queue, for handlers too slow for an HTTP
 * thread (ROUTE_OFFLOAD). Full queue = refuse at once (the caller answers 503): work is
 * never queued without bound. */

typedef struct JobPool JobPool;

/* RUN(arg) runs a job on a pool thread; CANCEL(arg) disposes of a job still queued when
 * the pool is freed (on the freeing thread). */
typedef void (*JobFn)(void *arg);

int jobpool_new(unsigned threads, unsigned queue_max, JobFn run, JobFn cancel, JobPool **ret);
/* -EAGAIN if the queue is full, -ESHUTDOWN once the pool is stopping. */
int jobpool_submit(JobPool *p, void *arg);
/* Cancels the queued jobs, waits for the running ones, joins the threads; submit fails
 * with -ESHUTDOWN afterwards. Idempotent. */
void jobpool_stop(JobPool *p);
/* Stops (if not yet) and frees. */
void jobpool_free(JobPool *p);
