/* SPDX-License-Identifier: MIT */
/* The uid pool of the SQLite store. A row of `uids` is a uid that is not free: 'live' while
 * its lifecycle lives, 'quarantined' from its release until the core has checked that nothing
 * of it remains and calls uid_free(). */
#include <errno.h>

#include "random-util.h"
#include "sqlite-internal.h"

/* Random probes of the uid range before scanning it for a gap. */
#define UID_RANDOM_PROBES 8

static int uid_taken_locked(SqliteConn *c, uint32_t uid) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = prepare_bind(c, STMT_UID_TAKEN, &st, "u", (uint64_t) uid);
        if (r < 0)
                return r;
        return store_sqlite_step(st); /* 1 taken, 0 free */
}

/* Picks a free uid: the caller's (random) preference, a few random probes, then the lowest gap.
 * Runs inside the write transaction, so "free" cannot change before the insert. */
static int uid_pick_locked(SqliteConn *c, const ResolveRequest *q, uint32_t *ret) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        sqlite3_int64 v;
        int r;

        if (q->preferred_uid >= q->uid_start && q->preferred_uid <= q->uid_end) {
                r = uid_taken_locked(c, q->preferred_uid);
                if (r < 0)
                        return r;
                if (r == 0) {
                        *ret = q->preferred_uid;
                        return 0;
                }
        }

        for (unsigned i = 0; q->uid_end > q->uid_start && i < UID_RANDOM_PROBES; i++) {
                uint64_t u;

                r = random_range_u64(q->uid_start, q->uid_end, &u);
                if (r < 0)
                        return r;
                r = uid_taken_locked(c, (uint32_t) u);
                if (r < 0)
                        return r;
                if (r == 0) {
                        *ret = (uint32_t) u;
                        return 0;
                }
        }

        r = prepare_bind(c, STMT_UID_FIRST_FREE, &st, "uu", (uint64_t) q->uid_start, (uint64_t) q->uid_end);
        if (r < 0)
                return r;
        r = store_sqlite_step(st);
        if (r < 0)
                return r;
        if (r == 0)
                return -ENOSPC;
        v = sqlite3_column_int64(st, 0);
        if (v < q->uid_start || v > q->uid_end)
                return -EIO;
        *ret = (uint32_t) v;
        return 0;
}

int store_sqlite_uid_claim(SqliteConn *c, const ResolveRequest *q, const char *internal_id, uint32_t *ret) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        uint32_t uid;
        int r;

        r = uid_pick_locked(c, q, &uid);
        if (r < 0)
                return r;
        r = prepare_bind(c, STMT_UID_INSERT, &st, "uttu", (uint64_t) uid, internal_id, q->new_lifecycle_id,
                         (uint64_t) q->now);
        if (r < 0)
                return r;
        r = store_sqlite_step(st);
        if (r < 0)
                return r;
        *ret = uid;
        return 0;
}

int store_sqlite_uid_list_quarantined(Store *s, usec_t before, uint32_t *ret, size_t max, size_t *ret_count) {
        SqliteConn *c;
        size_t n = 0;
        int r;

        if (!ret_count || (max > 0 && !ret))
                return -EINVAL;

        r = store_sqlite_read_begin(sq(s), false, &c);
        if (r < 0)
                return r;
        {
                _cleanup_stmt_ sqlite3_stmt *st = NULL;

                r = prepare_bind(c, STMT_UID_LIST_QUARANTINED, &st, "cc", (uint64_t) before, (uint64_t) max);
                while (r >= 0 && n < max) {
                        r = store_sqlite_step(st);
                        if (r <= 0)
                                break;
                        uint64_t u = col_u64(st, 0);
                        if (u == 0 || u > UINT32_MAX) {
                                r = -EIO;
                                break;
                        }
                        ret[n++] = (uint32_t) u;
                }
        }
        r = store_sqlite_read_end(sq(s), c, false, r);
        if (r < 0)
                return r;
        *ret_count = n;
        return 0;
}

static int uid_free_locked(SqliteConn *c, uint32_t uid) {
        _cleanup_stmt_ sqlite3_stmt *del = NULL, *state = NULL;
        const char *t;
        int r;

        r = prepare_bind(c, STMT_UID_FREE, &del, "u", (uint64_t) uid);
        if (r < 0)
                return r;
        r = store_sqlite_step(del);
        if (r < 0)
                return r;
        if (sqlite3_changes(c->db) > 0)
                return 0;

        r = prepare_bind(c, STMT_UID_STATE, &state, "u", (uint64_t) uid);
        if (r < 0)
                return r;
        r = store_sqlite_step(state);
        if (r < 0)
                return r;
        if (r == 0)
                return -ENOENT;
        t = (const char *) sqlite3_column_text(state, 0);
        return t && streq(t, "live") ? -EBUSY : -EIO;
}

int store_sqlite_uid_free(Store *s, uint32_t uid) {
        SqliteConn *c;
        int r;

        r = store_sqlite_write_begin(sq(s), &c);
        if (r < 0)
                return r;
        return store_sqlite_write_end(sq(s), uid_free_locked(c, uid));
}
