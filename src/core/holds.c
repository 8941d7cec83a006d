/* SPDX-License-Identifier: MIT */
#include "holds.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "macros.h"
#include "time-util.h"

/* One mutex for the whole manager: every critical section is a few list walks, far
 * shorter than the file operation a hold protects. Each sandbox with a hold (or a waiter)
 * has an entry with its own condition variable, so a release only wakes the waiters of
 * that sandbox; the entry goes away with its last user. */

#define HOLDS_BUCKETS 256u

typedef struct HoldEntry HoldEntry;

struct Hold {
        Holds *holds;
        HoldEntry *entry;
        HoldKind kind;
        char *path;   /* NULL = the whole sandbox */
        char *path2;
        Hold *prev, *next;
};

struct HoldEntry {
        char *key;
        HoldEntry *next_in_bucket;
        Hold *held;                  /* holds granted right now */
        unsigned users;              /* granted holds + threads waiting */
        unsigned exclusive_waiting;  /* while > 0, no new non-exclusive hold is granted */
        pthread_cond_t changed;
};

struct Holds {
        pthread_mutex_t lock;
        HoldEntry *buckets[HOLDS_BUCKETS];
};

static unsigned key_hash(const char *key) {
        uint32_t h = 2166136261u; /* FNV-1a */
        for (const unsigned char *p = (const unsigned char *) key; *p; p++) {
                h ^= *p;
                h *= 16777619u;
        }
        return h % HOLDS_BUCKETS;
}

int holds_new(Holds **ret) {
        Holds *h;

        h = calloc(1, sizeof *h);
        if (!h)
                return -ENOMEM;
        if (pthread_mutex_init(&h->lock, NULL) != 0) {
                free(h);
                return -ENOMEM;
        }
        *ret = h;
        return 0;
}

static void entry_free(HoldEntry *e) {
        if (!e)
                return;
        (void) pthread_cond_destroy(&e->changed);
        free(e->key);
        free(e);
}

static void hold_free_struct(Hold *hold) {
        if (!hold)
                return;
        free(hold->path);
        free(hold->path2);
        free(hold);
}

void holds_free(Holds *h) {
        if (!h)
                return;
        /* Callers release every hold first; whatever is left is freed without waking anyone. */
        for (unsigned i = 0; i < HOLDS_BUCKETS; i++)
                while (h->buckets[i]) {
                        HoldEntry *e = h->buckets[i];
                        h->buckets[i] = e->next_in_bucket;
                        while (e->held) {
                                Hold *x = e->held;
                                e->held = x->next;
                                hold_free_struct(x);
                        }
                        entry_free(e);
                }
        (void) pthread_mutex_destroy(&h->lock);
        free(h);
}

/* With the lock held. */
static HoldEntry *entry_find(Holds *h, const char *key, HoldEntry ***ret_link) {
        HoldEntry **link = &h->buckets[key_hash(key)];

        for (; *link; link = &(*link)->next_in_bucket)
                if (streq((*link)->key, key))
                        break;
        if (ret_link)
                *ret_link = link;
        return *link;
}

/* With the lock held: finds or creates the entry for KEY and counts one more user. */
static int entry_get(Holds *h, const char *key, HoldEntry **ret) {
        pthread_condattr_t attr;
        HoldEntry **link, *e;
        int r;

        e = entry_find(h, key, &link);
        if (!e) {
                e = calloc(1, sizeof *e);
                if (!e)
                        return -ENOMEM;
                e->key = strdup(key);
                if (!e->key) {
                        free(e);
                        return -ENOMEM;
                }
                if (pthread_condattr_init(&attr) != 0) {
                        free(e->key);
                        free(e);
                        return -ENOMEM;
                }
                (void) pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
                r = pthread_cond_init(&e->changed, &attr);
                (void) pthread_condattr_destroy(&attr);
                if (r != 0) {
                        free(e->key);
                        free(e);
                        return -ENOMEM;
                }
                *link = e;
        }
        e->users++;
        *ret = e;
        return 0;
}

/* With the lock held: one user less; the entry is freed with its last user. */
static void entry_put(Holds *h, HoldEntry *e) {
        HoldEntry **link;

        if (--e->users > 0)
                return;
        (void) entry_find(h, e->key, &link);
        if (*link == e)
                *link = e->next_in_bucket;
        entry_free(e);
}

/* Is one path equal to or an ancestor of the other? "/workspace/a" and "/workspace/a/b"
 * overlap, "/workspace/a" and "/workspace/ab" do not. NULL is the whole sandbox. */
static bool paths_overlap(const char *a, const char *b) {
        const char *shorter, *longer;
        size_t la, lb, n;

        if (!a || !b)
                return true;
        la = strlen(a);
        lb = strlen(b);
        shorter = la <= lb ? a : b;
        longer = la <= lb ? b : a;
        n = MIN(la, lb);
        if (!strneq(shorter, longer, n))
                return false;
        return longer[n] == '\0' || longer[n] == '/' || (n > 0 && shorter[n - 1] == '/');
}

static bool hold_conflicts(const Hold *held, HoldKind kind, const char *path, const char *path2) {
        if (held->kind == HOLD_EXCLUSIVE || kind == HOLD_EXCLUSIVE)
                return true;
        /* Execs and file calls never exclude each other. */
        if ((held->kind == HOLD_EXEC) != (kind == HOLD_EXEC))
                return false;
        if (kind == HOLD_EXEC)
                return !held->path || !path || streq(held->path, path);
        if (held->kind == HOLD_FILE_READ && kind == HOLD_FILE_READ)
                return false;
        if (paths_overlap(held->path, path))
                return true;
        if (path2 && paths_overlap(held->path, path2))
                return true;
        if (held->path2 && paths_overlap(held->path2, path))
                return true;
        if (held->path2 && path2 && paths_overlap(held->path2, path2))
                return true;
        return false;
}

static bool can_grant(const HoldEntry *e, HoldKind kind, const char *path, const char *path2) {
        /* A waiting exclusive hold keeps new ones out, so a steady stream of file calls
         * cannot starve a release. */
        if (kind != HOLD_EXCLUSIVE && e->exclusive_waiting > 0)
                return false;
        for (const Hold *x = e->held; x; x = x->next)
                if (hold_conflicts(x, kind, path, path2))
                        return false;
        return true;
}

int holds_acquire(Holds *h, const char *key, HoldKind kind, const char *path, const char *path2, usec_t timeout,
                  Hold **ret) {
        struct timespec deadline;
        HoldEntry *e;
        Hold *hold;
        bool counted_exclusive = false;
        int r = 0;

        if (!h || !key || !ret || kind < HOLD_FILE_READ || kind > HOLD_EXEC)
                return -EINVAL;

        hold = calloc(1, sizeof *hold);
        if (!hold)
                return -ENOMEM;
        hold->holds = h;
        hold->kind = kind;
        if (kind != HOLD_EXCLUSIVE) {
                if (path) {
                        hold->path = strdup(path);
                        if (!hold->path) {
                                hold_free_struct(hold);
                                return -ENOMEM;
                        }
                }
                if (path && path2) {
                        hold->path2 = strdup(path2);
                        if (!hold->path2) {
                                hold_free_struct(hold);
                                return -ENOMEM;
                        }
                }
        }

        deadline = monotonic_deadline(timeout);

        (void) pthread_mutex_lock(&h->lock);
        r = entry_get(h, key, &e);
        if (r < 0) {
                (void) pthread_mutex_unlock(&h->lock);
                hold_free_struct(hold);
                return r;
        }

        while (!can_grant(e, kind, hold->path, hold->path2)) {
                int k;

                if (kind == HOLD_EXEC) {
                        r = -EBUSY; /* an exec never queues behind another */
                        break;
                }

                if (kind == HOLD_EXCLUSIVE && !counted_exclusive) {
                        e->exclusive_waiting++;
                        counted_exclusive = true;
                }
                k = pthread_cond_timedwait(&e->changed, &h->lock, &deadline);
                if (k == ETIMEDOUT && !can_grant(e, kind, hold->path, hold->path2)) {
                        r = -EBUSY;
                        break;
                }
                if (k != 0 && k != ETIMEDOUT) {
                        r = -k;
                        break;
                }
        }
        if (counted_exclusive) {
                e->exclusive_waiting--;
                /* Holds kept out by this waiter may go now (if it gave up) or re-check
                 * against it (if it got in). */
                (void) pthread_cond_broadcast(&e->changed);
        }
        if (r < 0) {
                entry_put(h, e);
                (void) pthread_mutex_unlock(&h->lock);
                hold_free_struct(hold);
                return r;
        }

        hold->entry = e;
        hold->next = e->held;
        if (e->held)
                e->held->prev = hold;
        e->held = hold;
        (void) pthread_mutex_unlock(&h->lock);

        *ret = hold;
        return 0;
}

void hold_release(Hold *hold) {
        Holds *h;
        HoldEntry *e;

        if (!hold)
                return;
        h = hold->holds;
        e = hold->entry;

        (void) pthread_mutex_lock(&h->lock);
        if (hold->prev)
                hold->prev->next = hold->next;
        else
                e->held = hold->next;
        if (hold->next)
                hold->next->prev = hold->prev;
        if (e->users > 1)
                (void) pthread_cond_broadcast(&e->changed);
        entry_put(h, e);
        (void) pthread_mutex_unlock(&h->lock);

        hold_free_struct(hold);
}

unsigned holds_active(Holds *h) {
        unsigned n = 0;

        if (!h)
                return 0;
        (void) pthread_mutex_lock(&h->lock);
        for (unsigned i = 0; i < HOLDS_BUCKETS; i++)
                for (const HoldEntry *e = h->buckets[i]; e; e = e->next_in_bucket)
                        if (e->held)
                                n++;
        (void) pthread_mutex_unlock(&h->lock);
        return n;
}
