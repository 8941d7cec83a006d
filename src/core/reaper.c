/* SPDX-License-Identifier: MIT */
#include "reaper.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "macros.h"
#include "uid.h"
#include "workspace.h"
#include "time-util.h"

/* How often the reaper looks even when nobody kicks it (quarantines run out on their own). */
#define REAPER_INTERVAL_USEC (5 * USEC_PER_SEC)
/* Quarantined uids checked per pass. */
#define REAPER_UID_BATCH 256u

struct Reaper {
        Daemon *daemon;
        pthread_t thread;
        pthread_mutex_t lock;
        pthread_cond_t wake;         /* CLOCK_MONOTONIC */
        bool kicked;
        bool stopping;
};

static void reap_trash(Daemon *d) {
        int r;

        if (d->trash_fd < 0)
                return;
        r = workspace_empty_trash(d->trash_fd);
        if (r < 0)
                log_warning("reaper: emptying the trash failed, will retry: %s", strerror(-r));
        else if (r > 0)
                log_debug("reaper: deleted %d released workspace(s)", r);
}

static void reap_uids(Daemon *d) {
        uint32_t ids[REAPER_UID_BATCH];
        uid_t uids[REAPER_UID_BATCH];
        bool remains[REAPER_UID_BATCH] = {};
        usec_t now = now_realtime_usec(), quarantine, before;
        size_t n = 0;
        unsigned freed = 0;
        int r;

        if (!d->store)
                return;
        quarantine = d->config.uid_quarantine_seconds * USEC_PER_SEC;
        before = now > quarantine ? now - quarantine : 0;
        r = d->store->ops->uid_list_quarantined(d->store, before, ids, ELEMENTSOF(ids), &n);
        if (r < 0) {
                log_warning("reaper: listing quarantined uids failed: %s", strerror(-r));
                return;
        }
        if (n == 0)
                return;
        for (size_t i = 0; i < n; i++)
                uids[i] = (uid_t) ids[i];
        r = uid_find_remains(d->trash_fd, uids, n, remains);
        if (r < 0)
                log_debug("reaper: checking quarantined uids failed, keeping them: %s", strerror(-r));
        for (size_t i = 0; i < n; i++) {
                if (remains[i])
                        continue;
                r = d->store->ops->uid_free(d->store, ids[i]);
                if (r < 0)
                        log_warning("reaper: returning uid %u to the pool failed: %s", (unsigned) ids[i],
                                    strerror(-r));
                else
                        freed++;
        }
        if (freed > 0)
                log_debug("reaper: %u uid(s) back in the pool, %zu still quarantined", freed, n - freed);
}

static void *reaper_main(void *arg) {
        Reaper *rp = arg;

        for (;;) {
                struct timespec deadline = monotonic_deadline(REAPER_INTERVAL_USEC);

                (void) pthread_mutex_lock(&rp->lock);
                while (!rp->kicked && !rp->stopping)
                        if (pthread_cond_timedwait(&rp->wake, &rp->lock, &deadline) == ETIMEDOUT)
                                break;
                if (rp->stopping) {
                        (void) pthread_mutex_unlock(&rp->lock);
                        break;
                }
                rp->kicked = false;
                (void) pthread_mutex_unlock(&rp->lock);

                /* Trash first: a uid is only freed once none of its files is left there. */
                reap_trash(rp->daemon);
                reap_uids(rp->daemon);
        }
        return NULL;
}

int reaper_start(Daemon *d, Reaper **ret) {
        pthread_condattr_t attr;
        sigset_t all, saved;
        Reaper *rp;
        int r;

        rp = calloc(1, sizeof *rp);
        if (!rp)
                return -ENOMEM;
        rp->daemon = d;
        rp->kicked = true; /* a first pass at once: finishes deletions a restart left behind */
        if (pthread_mutex_init(&rp->lock, NULL) != 0) {
                free(rp);
                return -ENOMEM;
        }
        if (pthread_condattr_init(&attr) != 0) {
                (void) pthread_mutex_destroy(&rp->lock);
                free(rp);
                return -ENOMEM;
        }
        (void) pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        r = pthread_cond_init(&rp->wake, &attr);
        (void) pthread_condattr_destroy(&attr);
        if (r != 0) {
                (void) pthread_mutex_destroy(&rp->lock);
                free(rp);
                return -r;
        }

        /* The thread takes no signals: they belong to the daemon's main loop. */
        (void) sigfillset(&all);
        (void) pthread_sigmask(SIG_SETMASK, &all, &saved);
        r = pthread_create(&rp->thread, NULL, reaper_main, rp);
        (void) pthread_sigmask(SIG_SETMASK, &saved, NULL);
        if (r != 0) {
                (void) pthread_cond_destroy(&rp->wake);
                (void) pthread_mutex_destroy(&rp->lock);
                free(rp);
                return -r;
        }
        *ret = rp;
        return 0;
}

void reaper_kick(Reaper *rp) {
        if (!rp)
                return;
        (void) pthread_mutex_lock(&rp->lock);
        rp->kicked = true;
        (void) pthread_cond_signal(&rp->wake);
        (void) pthread_mutex_unlock(&rp->lock);
}

void reaper_stop(Reaper *rp) {
        if (!rp)
                return;
        (void) pthread_mutex_lock(&rp->lock);
        rp->stopping = true;
        (void) pthread_cond_signal(&rp->wake);
        (void) pthread_mutex_unlock(&rp->lock);
        (void) pthread_join(rp->thread, NULL);
        (void) pthread_cond_destroy(&rp->wake);
        (void) pthread_mutex_destroy(&rp->lock);
        free(rp);
}
