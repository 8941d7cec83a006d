/* SPDX-License-Identifier: MIT */
#include "exec-output.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "macros.h"

#define READ_CHUNK (64 * 1024)
/* Reads per stream and wake-up: a chatty exec cannot starve the others (epoll is level-
 * triggered: what is left is reported again at once). */
#define READS_PER_EVENT 4
#define EVENTS_MAX 64

typedef struct PumpCall {
        void (*fn)(void *userdata);
        void *userdata;
        struct PumpCall *next;
} PumpCall;

struct ExecPump {
        int epoll_fd;
        int event_fd;
        pthread_t thread;
        bool thread_running;

        pthread_mutex_t lock;               /* calls, timers, stopping */
        PumpCall *calls_head, *calls_tail;
        PumpTimer **heap;
        size_t heap_len, heap_cap;
        usec_t planned;                     /* the pump wakes by then at the latest */
        bool stopping;

        char buf[READ_CHUNK];               /* pump thread only */
};

/* ---- outputs ---- */

void exec_output_init(ExecOutput *o) {
        *o = (ExecOutput) { .dir_fd = -EBADF, .pipe_fd = -EBADF };
        atomic_init(&o->spool_fd, -1);
        atomic_init(&o->produced, 0);
        atomic_init(&o->kept, 0);
        atomic_init(&o->eof, false);
}

void exec_output_done(ExecOutput *o) {
        int fd = atomic_exchange(&o->spool_fd, -1);

        safe_close(fd);
        o->pipe_fd = safe_close(o->pipe_fd);
        free(o->head);
        o->head = NULL;
}

bool exec_output_truncated(const ExecOutput *o) {
        return o->spool_error < 0 || atomic_load(&o->produced) > atomic_load(&o->kept);
}

ssize_t exec_output_read(ExecOutput *o, uint64_t offset, void *buf, size_t max) {
        /* `kept` first: the pump sets spool_fd (and writes the head) before it lets `kept`
         * pass what the head holds, so whatever this sees is readable. */
        uint64_t kept = atomic_load(&o->kept);
        int fd = atomic_load(&o->spool_fd);
        ssize_t n;

        if (offset >= kept || max == 0)
                return 0;
        max = (size_t) MIN((uint64_t) max, kept - offset);
        if (fd < 0) {
                /* Never past the head while there is no file (kept ≤ EXEC_OUTPUT_HEAD_MAX). */
                if (!o->head || kept > EXEC_OUTPUT_HEAD_MAX)
                        return -EIO;
                memcpy(buf, o->head + offset, max);
                return (ssize_t) max;
        }
        do
                n = pread(fd, buf, max, (off_t) offset);
        while (n < 0 && errno == EINTR);
        return n < 0 ? -errno : n;
}

/* The spool file, not yet published in o->spool_fd. */
static int spool_open(ExecOutput *o) {
        int fd;

        fd = openat(o->dir_fd, o->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0 && errno == EEXIST) /* a leftover of a crash: the uid is random, so stale */
                fd = openat(o->dir_fd, o->name, O_RDWR | O_TRUNC | O_CLOEXEC | O_NOFOLLOW);
        return fd < 0 ? -errno : fd;
}

/* Past the head: the file gets the head's bytes first and only then is published (a
 * reader that sees spool_fd reads from it, and must find bytes 0..kept there). */
static int spill(ExecOutput *o, uint64_t kept) {
        int fd = spool_open(o);
        size_t done = 0;

        if (fd < 0)
                return fd;
        while (done < kept) {
                ssize_t w = pwrite(fd, o->head + done, (size_t) kept - done, (off_t) done);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0) {
                        int r = w < 0 ? -errno : -EIO;
                        safe_close(fd);
                        return r;
                }
                done += (size_t) w;
        }
        atomic_store(&o->spool_fd, fd);
        return 0;
}

static void keep(ExecOutput *o, const char *data, size_t n) {
        uint64_t kept = atomic_load(&o->kept);
        size_t m;

        atomic_fetch_add(&o->produced, n);
        if (o->spool_error < 0 || kept >= o->cap)
                return; /* counted, dropped: the process runs on undisturbed */
        m = (size_t) MIN((uint64_t) n, o->cap - kept);
        if (atomic_load(&o->spool_fd) < 0 && kept + m <= EXEC_OUTPUT_HEAD_MAX) {
                if (!o->head) {
                        o->head = malloc(EXEC_OUTPUT_HEAD_MAX);
                        if (!o->head) {
                                o->spool_error = -ENOMEM;
                                return;
                        }
                }
                memcpy(o->head + kept, data, m);
                /* After the copy: a reader that sees the new `kept` finds the bytes. */
                atomic_store(&o->kept, kept + m);
                return;
        }
        if (atomic_load(&o->spool_fd) < 0) {
                int r = spill(o, kept);
                if (r < 0) {
                        o->spool_error = r;
                        return;
                }
        }
        for (size_t done = 0; done < m;) {
                ssize_t w = pwrite(atomic_load(&o->spool_fd), data + done, m - done, (off_t) (kept + done));
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0) {
                        o->spool_error = w < 0 ? -errno : -EIO;
                        atomic_store(&o->kept, kept + done);
                        return;
                }
                done += (size_t) w;
        }
        /* After the write: a reader that sees the new `kept` finds the bytes in the file. */
        atomic_store(&o->kept, kept + m);
}

/* Reads what the pipe has. Returns true at EOF (or a read error: the same to us). */
static bool drain(ExecPump *p, ExecOutput *o, unsigned max_reads, bool *ret_data) {
        for (unsigned i = 0; i < max_reads; i++) {
                ssize_t n = read(o->pipe_fd, p->buf, sizeof p->buf);

                if (n < 0 && errno == EINTR) {
                        i--;
                        continue;
                }
                if (n < 0 && errno == EAGAIN)
                        return false;
                if (n <= 0)
                        return true;
                keep(o, p->buf, (size_t) n);
                *ret_data = true;
        }
        return false;
}

static void close_pipe(ExecPump *p, ExecOutput *o) {
        (void) epoll_ctl(p->epoll_fd, EPOLL_CTL_DEL, o->pipe_fd, NULL);
        o->pipe_fd = safe_close(o->pipe_fd);
        o->added = false;
        atomic_store(&o->eof, true);
}

int exec_pump_add_output(ExecPump *p, ExecOutput *o) {
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = o };

        if (o->pipe_fd < 0 || o->dir_fd < 0)
                return -EBADF;
        o->added = true;
        if (epoll_ctl(p->epoll_fd, EPOLL_CTL_ADD, o->pipe_fd, &ev) < 0) {
                o->added = false;
                return -errno;
        }
        return 0;
}

void exec_pump_close_output(ExecPump *p, ExecOutput *o) {
        bool data = false;

        if (!o->added)
                return;
        /* What is already in the pipe still counts; a writer that escaped does not. */
        (void) drain(p, o, UINT32_MAX / 2, &data);
        close_pipe(p, o);
        if (data && o->on_data)
                o->on_data(o);
        if (o->on_eof)
                o->on_eof(o);
}

/* ---- timers: a binary min-heap under p->lock ---- */

static void heap_set(ExecPump *p, size_t i, PumpTimer *t) {
        p->heap[i] = t;
        t->index = i + 1;
}

static void heap_up(ExecPump *p, size_t i) {
        PumpTimer *t = p->heap[i];

        while (i > 0) {
                size_t parent = (i - 1) / 2;
                if (p->heap[parent]->when <= t->when)
                        break;
                heap_set(p, i, p->heap[parent]);
                i = parent;
        }
        heap_set(p, i, t);
}

static void heap_down(ExecPump *p, size_t i) {
        PumpTimer *t = p->heap[i];

        for (;;) {
                size_t l = 2 * i + 1, r = l + 1, m = i;
                usec_t mw = t->when;

                if (l < p->heap_len && p->heap[l]->when < mw) {
                        m = l;
                        mw = p->heap[l]->when;
                }
                if (r < p->heap_len && p->heap[r]->when < mw)
                        m = r;
                if (m == i)
                        break;
                heap_set(p, i, p->heap[m]);
                i = m;
        }
        heap_set(p, i, t);
}

static void heap_remove(ExecPump *p, PumpTimer *t) {
        size_t i = t->index - 1;
        PumpTimer *last;

        t->index = 0;
        last = p->heap[--p->heap_len];
        if (i == p->heap_len)
                return;
        heap_set(p, i, last);
        heap_up(p, i);
        heap_down(p, last->index - 1);
}

static void wake(ExecPump *p) {
        uint64_t one = 1;

        (void) !write(p->event_fd, &one, sizeof one);
}

/* The heap grows before it is needed: arming never fails. */
static int heap_reserve(ExecPump *p) {
        if (p->heap_len < p->heap_cap)
                return 0;
        size_t cap = MAX(p->heap_cap * 2, (size_t) 256);
        PumpTimer **nh = reallocarray(p->heap, cap, sizeof *nh);
        if (!nh)
                return -ENOMEM;
        p->heap = nh;
        p->heap_cap = cap;
        return 0;
}

bool exec_pump_timer_arm(ExecPump *p, PumpTimer *t, usec_t when) {
        bool earliest, was;

        (void) pthread_mutex_lock(&p->lock);
        was = t->index > 0;
        if (was)
                heap_remove(p, t);
        while (heap_reserve(p) < 0) {
                /* Out of memory with timers that must not be lost: wait for memory. */
                (void) pthread_mutex_unlock(&p->lock);
                (void) usleep(1000);
                (void) pthread_mutex_lock(&p->lock);
        }
        t->when = when;
        heap_set(p, p->heap_len++, t);
        heap_up(p, p->heap_len - 1);
        /* Wake the pump only if it would sleep past this timer: a deadline minutes away
         * (every exec has one) costs no wake-up. */
        earliest = t->index == 1 && when < p->planned;
        (void) pthread_mutex_unlock(&p->lock);
        if (earliest)
                wake(p);
        return was;
}

bool exec_pump_timer_disarm(ExecPump *p, PumpTimer *t) {
        bool was;

        (void) pthread_mutex_lock(&p->lock);
        was = t->index > 0;
        if (was)
                heap_remove(p, t);
        (void) pthread_mutex_unlock(&p->lock);
        return was;
}

#define PUMP_MAX_SLEEP_MSEC 60000

/* Milliseconds until the first timer (rounded up), at most a minute. */
static int next_timeout(ExecPump *p) {
        usec_t now = now_monotonic_usec(), when;
        int ms = PUMP_MAX_SLEEP_MSEC;

        (void) pthread_mutex_lock(&p->lock);
        if (p->heap_len > 0) {
                when = p->heap[0]->when;
                ms = when <= now ? 0 : (int) MIN((when - now + 999) / 1000, (usec_t) PUMP_MAX_SLEEP_MSEC);
        }
        p->planned = now + (usec_t) ms * USEC_PER_MSEC;
        (void) pthread_mutex_unlock(&p->lock);
        return ms;
}

static void run_timers(ExecPump *p) {
        usec_t now = now_monotonic_usec();

        for (;;) {
                PumpTimer *t = NULL;

                (void) pthread_mutex_lock(&p->lock);
                if (p->heap_len > 0 && p->heap[0]->when <= now) {
                        t = p->heap[0];
                        heap_remove(p, t);
                }
                (void) pthread_mutex_unlock(&p->lock);
                if (!t)
                        return;
                t->fn(t);
        }
}

/* ---- calls ---- */

int exec_pump_call(ExecPump *p, void (*fn)(void *userdata), void *userdata) {
        PumpCall *c = malloc(sizeof *c);

        if (!c)
                return -ENOMEM;
        *c = (PumpCall) { .fn = fn, .userdata = userdata };
        (void) pthread_mutex_lock(&p->lock);
        if (p->calls_tail)
                p->calls_tail->next = c;
        else
                p->calls_head = c;
        p->calls_tail = c;
        (void) pthread_mutex_unlock(&p->lock);
        wake(p);
        return 0;
}

static void run_calls(ExecPump *p) {
        PumpCall *c;
        uint64_t v;

        (void) !read(p->event_fd, &v, sizeof v);
        (void) pthread_mutex_lock(&p->lock);
        c = p->calls_head;
        p->calls_head = p->calls_tail = NULL;
        (void) pthread_mutex_unlock(&p->lock);
        while (c) {
                PumpCall *next = c->next;
                c->fn(c->userdata);
                free(c);
                c = next;
        }
}

/* ---- the thread ---- */

static void *pump_main(void *arg) {
        ExecPump *p = arg;
        struct epoll_event events[EVENTS_MAX];
        ExecOutput *ended[EVENTS_MAX], *fresh[EVENTS_MAX];

        for (;;) {
                size_t n_ended = 0, n_fresh = 0;
                bool calls = false, stopping;
                int n;

                n = epoll_wait(p->epoll_fd, events, EVENTS_MAX, next_timeout(p));
                if (n < 0 && errno != EINTR)
                        break;
                /* First every read; callbacks after the batch, so that nothing they free
                 * can still be referenced by an event of this batch. */
                for (int i = 0; i < n; i++) {
                        ExecOutput *o = events[i].data.ptr;
                        bool data = false;

                        if (!o) {
                                calls = true;
                                continue;
                        }
                        if (drain(p, o, READS_PER_EVENT, &data)) {
                                close_pipe(p, o);
                                ended[n_ended++] = o;
                        }
                        if (data)
                                fresh[n_fresh++] = o;
                }
                for (size_t i = 0; i < n_fresh; i++)
                        if (fresh[i]->on_data)
                                fresh[i]->on_data(fresh[i]);
                for (size_t i = 0; i < n_ended; i++)
                        if (ended[i]->on_eof)
                                ended[i]->on_eof(ended[i]);
                if (calls)
                        run_calls(p);
                run_timers(p);

                (void) pthread_mutex_lock(&p->lock);
                stopping = p->stopping && !p->calls_head;
                (void) pthread_mutex_unlock(&p->lock);
                if (stopping)
                        break;
        }
        return NULL;
}

int exec_pump_new(ExecPump **ret) {
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
        sigset_t all, saved;
        ExecPump *p;
        int r;

        p = calloc(1, sizeof *p);
        if (!p)
                return -ENOMEM;
        p->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
        p->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (p->epoll_fd < 0 || p->event_fd < 0 || epoll_ctl(p->epoll_fd, EPOLL_CTL_ADD, p->event_fd, &ev) < 0) {
                r = negative_errno();
                safe_close(p->epoll_fd);
                safe_close(p->event_fd);
                free(p);
                return r;
        }
        (void) pthread_mutex_init(&p->lock, NULL);

        /* The pump takes no signals: they belong to the daemon's main loop. */
        (void) sigfillset(&all);
        (void) pthread_sigmask(SIG_SETMASK, &all, &saved);
        r = -pthread_create(&p->thread, NULL, pump_main, p);
        (void) pthread_sigmask(SIG_SETMASK, &saved, NULL);
        if (r < 0) {
                safe_close(p->epoll_fd);
                safe_close(p->event_fd);
                (void) pthread_mutex_destroy(&p->lock);
                free(p);
                return r;
        }
        p->thread_running = true;
        *ret = p;
        return 0;
}

void exec_pump_free(ExecPump *p) {
        if (!p)
                return;
        (void) pthread_mutex_lock(&p->lock);
        p->stopping = true;
        (void) pthread_mutex_unlock(&p->lock);
        wake(p);
        if (p->thread_running)
                (void) pthread_join(p->thread, NULL);
        /* Calls queued after the stop are dropped (their owners are gone too). */
        while (p->calls_head) {
                PumpCall *c = p->calls_head;
                p->calls_head = c->next;
                free(c);
        }
        free(p->heap);
        safe_close(p->epoll_fd);
        safe_close(p->event_fd);
        (void) pthread_mutex_destroy(&p->lock);
        free(p);
}
