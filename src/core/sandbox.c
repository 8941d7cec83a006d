/* SPDX-License-Identifier: MIT */
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "disk.h"
#include "exec.h"
#include "json-util.h"
#include "macros.h"
#include "random-util.h"
#include "reaper.h"
#include "sandbox-limits.h"
#include "string-util.h"
#include "time-util.h"
#include "workspace.h"

/* Records fetched from the store per call when building a list answer. */
#define LIST_CHUNK 256u
/* How often resolve waits for a release caught between its two steps before giving up. */
#define RESOLVE_RELEASING_RETRIES 3
/* How often a release re-reads the record when its compare-and-set loses a race. */
#define RELEASE_CAS_RETRIES 4
/* Rows finished per round at start-up. */
#define RECOVER_BATCH 64u

static usec_t hold_wait(const Daemon *d) {
        return d->config.hold_wait_seconds * USEC_PER_SEC;
}

/* A store failure that is not a domain answer: the database is down or confused. */
static int store_error(Error *e, int r, const char *what) {
        if (r == -EIO || r == -EPROTO)
                return error_set(e, r, 503, "SANDBOX_STORE_UNAVAILABLE", "%s: the metadata store failed", what);
        error_fill_internal(e, r, what);
        return r;
}

static int not_found(Error *e, const char *sandbox_id) {
        return error_set(e, -ENOENT, 404, "SANDBOX_NOT_FOUND", "sandbox '%s' not found", sandbox_id);
}

static int busy(Error *e, const char *sandbox_id) {
        return error_set(e, -EBUSY, 409, "SANDBOX_BUSY",
                         "sandbox '%s' is busy with another operation; retry later", sandbox_id);
}

/* Reads the record of a sandbox that is there for clients: missing, RELEASING and RELEASED
 * are all "not found". */
static int get_live(Daemon *d, const char *owner, const char *sandbox_id, SandboxRecord *ret, Error *e) {
        SandboxRecord rec;
        int r;

        r = d->store->ops->sandbox_get(d->store, owner, sandbox_id, &rec);
        if (r == -ENOENT)
                return not_found(e, sandbox_id);
        if (r < 0)
                return store_error(e, r, "reading the sandbox");
        if (rec.status == SANDBOX_RELEASING || rec.status == SANDBOX_RELEASED)
                return not_found(e, sandbox_id);
        *ret = rec;
        return 0;
}

static int check_suspended(const SandboxRecord *rec, Error *e) {
        if (rec->status == SANDBOX_SUSPENDED || rec->status == SANDBOX_SUSPENDING)
                return error_set(e, -EBUSY, 409, "SANDBOX_SUSPENDED", "sandbox '%s' is suspended; resume it first",
                                 rec->sandbox_id);
        return 0;
}

int sandbox_resolve(Daemon *d, const Principal *p, const char *sandbox_id, const char *scope_id,
                    const char *profile, SandboxRecord *ret, Error *e) {
        return sandbox_resolve_limits(d, p, sandbox_id, scope_id, profile, NULL, ret, e);
}

int sandbox_resolve_limits(Daemon *d, const Principal *p, const char *sandbox_id, const char *scope_id,
                           const char *profile, const SandboxLimits *limits, SandboxRecord *ret, Error *e) {
        char internal_id[OPAQUE_ID_LEN + 1], lifecycle_id[OPAQUE_ID_LEN + 1];
        SandboxRecord rec;
        uint64_t preferred;
        bool created;
        int r;

        if (isempty(profile))
                profile = "default";
        r = random_range_u64(d->config.uid_start, d->config.uid_end, &preferred);
        if (r >= 0)
                r = random_hex(internal_id, sizeof internal_id, OPAQUE_ID_LEN / 2);
        if (r >= 0)
                r = random_hex(lifecycle_id, sizeof lifecycle_id, OPAQUE_ID_LEN / 2);
        if (r < 0) {
                error_fill_internal(e, r, "choosing sandbox identifiers");
                return r;
        }

        ResolveRequest req = {
                .owner = p->tenant,
                .sandbox_id = sandbox_id,
                .workspace_scope_id = scope_id,
                .profile = profile,
                .worker_id = d->worker_id,
                .worker_epoch = d->worker_epoch,
                .principal = p->name,
                .uid_start = (uint32_t) d->config.uid_start,
                .uid_end = (uint32_t) d->config.uid_end,
                .preferred_uid = (uint32_t) preferred,
                .new_internal_id = internal_id,
                .new_lifecycle_id = lifecycle_id,
                .limits = limits ? *limits : (SandboxLimits) {},
        };

        if (limits && sandbox_limits_check(&d->config, limits, e) < 0)
                return -E2BIG;

        for (int attempt = 0;; attempt++) {
                req.now = now_realtime_usec();
                r = d->store->ops->sandbox_resolve(d->store, &req, &rec, &created);
                if (r == -EXDEV)
                        return error_set(e, r, 409, "SANDBOX_SCOPE_MISMATCH",
                                         "sandbox '%s' is live in another workspace scope", sandbox_id);
                if (r == -ENOSPC)
                        return error_set(e, r, 503, "SANDBOX_UID_EXHAUSTED",
                                         "no free sandbox uid in the configured range; release sandboxes or widen "
                                         "SANDBOX_UID_START..SANDBOX_UID_END");
                if (r == -EINVAL)
                        return error_set(e, r, 422, "SANDBOX_INVALID_REQUEST", "the request is not valid");
                if (r < 0)
                        return store_error(e, r, "resolving the sandbox");
                if (rec.status != SANDBOX_RELEASING || attempt >= RESOLVE_RELEASING_RETRIES)
                        break;

                /* A release is between its steps (it holds the sandbox exclusively while it
                 * runs): wait for it to let go, then ask again. */
                Hold *h = NULL;
                if (holds_acquire(d->holds, rec.internal_id, HOLD_EXCLUSIVE, NULL, NULL, hold_wait(d), &h) >= 0)
                        hold_release(h);
        }
        if (rec.status == SANDBOX_RELEASING)
                return busy(e, sandbox_id);
        /* A live sandbox keeps the limits of its lifecycle: asking for others is a conflict,
         * not something to ignore silently. */
        if (!created && limits && !sandbox_limits_match(&d->config, &rec.limits, limits))
                return error_set(e, -EEXIST, 409, "SANDBOX_LIMITS_MISMATCH",
                                 "sandbox '%s' is live with other limits; release it to change them", sandbox_id);

        *ret = rec;
        return 0;
}

typedef int (*RecordCheck)(const SandboxRecord *rec, uint64_t generation, Error *e);

/* Takes a hold on a sandbox whose record REC already passed CHECK, then reads and checks the
 * record again under the hold: a release (or anything exclusive) may have completed while we
 * waited, and nothing can change it while we hold it. */
static int hold_and_recheck(Daemon *d, const Principal *p, const char *sandbox_id, uint64_t generation,
                            RecordCheck check, HoldKind kind, const char *path, const char *path2,
                            SandboxRecord *rec, Hold **ret_hold, Error *e) {
        _cleanup_(hold_releasep) Hold *hold = NULL;
        int r;

        r = holds_acquire(d->holds, rec->internal_id, kind, path, path2, hold_wait(d), &hold);
        if (r == -EBUSY)
                return busy(e, sandbox_id);
        if (r < 0) {
                error_fill_internal(e, r, "waiting for the sandbox");
                return r;
        }
        r = get_live(d, p->tenant, sandbox_id, rec, e);
        if (r < 0)
                return r;
        r = check(rec, generation, e);
        if (r < 0)
                return r;
        *ret_hold = TAKE_PTR(hold);
        return 0;
}

static int check_connectable(const SandboxRecord *rec, uint64_t generation, Error *e) {
        if (rec->generation != generation)
                return error_set(e, -ESTALE, 409, "STALE_SANDBOX_ROUTE",
                                 "generation %" PRIu64 " is not the current route of sandbox '%s' (now %" PRIu64
                                 "); resolve again",
                                 generation, rec->sandbox_id, rec->generation);
        return check_suspended(rec, e);
}

int sandbox_connect(Daemon *d, const Principal *p, const char *sandbox_id, uint64_t generation,
                    SandboxRecord *ret, Error *e) {
        _cleanup_(hold_releasep) Hold *hold = NULL;
        _cleanup_close_ int fs_fd = -EBADF;
        SandboxRecord rec, done;
        int r;

        r = get_live(d, p->tenant, sandbox_id, &rec, e);
        if (r < 0)
                return r;
        r = check_connectable(&rec, generation, e);
        if (r < 0)
                return r;
        if (rec.status == SANDBOX_READY) {
                *ret = rec;
                return 0;
        }

        /* Exclusive, so that a release cannot move the directory aside between our mkdir and
         * the status change (it would leave a directory of a released lifecycle behind). */
        r = hold_and_recheck(d, p, sandbox_id, generation, check_connectable, HOLD_EXCLUSIVE, NULL, NULL, &rec,
                             &hold, e);
        if (r < 0)
                return r;
        if (rec.status == SANDBOX_READY) {
                *ret = rec;
                return 0;
        }
        if (rec.status != SANDBOX_ASSIGNED)
                return busy(e, sandbox_id);

        r = workspace_create(d->sandboxes_fd, rec.internal_id, (uid_t) rec.uid, &fs_fd);
        if (r < 0) {
                error_fill_internal(e, r, "creating the workspace");
                return r;
        }
        r = disk_sandbox_prepare(d->disk, &rec, fs_fd);
        if (r < 0) {
                error_fill_internal(e, r, "setting the workspace's disk quota");
                return r;
        }

        r = d->store->ops->sandbox_transition(d->store, rec.owner, rec.sandbox_id, rec.generation, SANDBOX_ASSIGNED,
                                              SANDBOX_READY, "connected", p->name, "", now_realtime_usec(), &done);
        if (r == -ESTALE)
                return error_set(e, r, 409, "STALE_SANDBOX_ROUTE",
                                 "generation %" PRIu64 " is not the current route of sandbox '%s'; resolve again",
                                 generation, sandbox_id);
        if (r == -EBUSY)
                return busy(e, sandbox_id);
        if (r < 0)
                return store_error(e, r, "connecting the sandbox");
        *ret = done;
        return 0;
}

/* With the sandbox held exclusively (or at start-up, alone): RELEASING, the directory moved
 * into the trash, RELEASED. A row found already RELEASING (a crash mid-release) is finished.
 * If the move fails, the status goes back to what it was so the client can retry. */
static int release_locked(Daemon *d, const char *principal, const char *owner, const char *sandbox_id,
                          const char *reason, Error *e) {
        for (int attempt = 0; attempt < RELEASE_CAS_RETRIES; attempt++) {
                SandboxRecord rec, tmp;
                SandboxStatus from;
                int r;

                r = d->store->ops->sandbox_get(d->store, owner, sandbox_id, &rec);
                if (r == -ENOENT)
                        return 0;
                if (r < 0)
                        return store_error(e, r, "reading the sandbox");
                if (rec.status == SANDBOX_RELEASED)
                        return 0;

                from = rec.status;
                if (from != SANDBOX_RELEASING) {
                        r = d->store->ops->sandbox_transition(d->store, owner, sandbox_id, rec.generation, from,
                                                              SANDBOX_RELEASING, "releasing", principal, reason,
                                                              now_realtime_usec(), &tmp);
                        if (r == -EBUSY || r == -ESTALE)
                                continue; /* changed under us: look again */
                        if (r < 0)
                                return store_error(e, r, "releasing the sandbox");
                }

                r = workspace_move_to_trash(d->sandboxes_fd, d->trash_fd, rec.internal_id, rec.lifecycle_id);
                if (r < 0) {
                        if (from != SANDBOX_RELEASING)
                                (void) d->store->ops->sandbox_transition(d->store, owner, sandbox_id, rec.generation,
                                                                         SANDBOX_RELEASING, from, "release_failed",
                                                                         principal, reason, now_realtime_usec(),
                                                                         &tmp);
                        error_fill_internal(e, r, "moving the workspace aside");
                        return r;
                }

                r = d->store->ops->sandbox_transition(d->store, owner, sandbox_id, rec.generation, SANDBOX_RELEASING,
                                                      SANDBOX_RELEASED, "released", principal, reason,
                                                      now_realtime_usec(), &tmp);
                if (r < 0)
                        /* The directory is in the trash; the row stays RELEASING and the next
                         * start-up finishes it. */
                        return store_error(e, r, "releasing the sandbox");
                return 0;
        }
        return busy(e, sandbox_id);
}

int sandbox_release(Daemon *d, const Principal *p, const char *sandbox_id, const char *reason, bool *ret_known,
                    Error *e) {
        _cleanup_(hold_releasep) Hold *hold = NULL;
        SandboxRecord rec;
        int r;

        r = d->store->ops->sandbox_get(d->store, p->tenant, sandbox_id, &rec);
        if (r == -ENOENT) {
                *ret_known = false;
                return 0;
        }
        if (r < 0)
                return store_error(e, r, "reading the sandbox");
        if (rec.status == SANDBOX_RELEASED) {
                *ret_known = true;
                return 0;
        }

        /* Release does not wait for execs to end on their own: no new one starts, the
         * running ones are killed (they end CANCELLED and let go of their holds), and the
         * spawner drops the sandbox's context. */
        exec_engine_release_begin(d->execs, rec.internal_id);
        /* Waits for in-flight file calls (and the killed execs) to finish and keeps new
         * ones out. */
        r = holds_acquire(d->holds, rec.internal_id, HOLD_EXCLUSIVE, NULL, NULL, hold_wait(d), &hold);
        if (r == -EBUSY) {
                exec_engine_release_end(d->execs, rec.internal_id);
                return busy(e, sandbox_id);
        }
        if (r < 0) {
                exec_engine_release_end(d->execs, rec.internal_id);
                error_fill_internal(e, r, "waiting for the sandbox");
                return r;
        }
        r = release_locked(d, p->name, p->tenant, sandbox_id, isempty(reason) ? "api" : reason, e);
        exec_engine_release_end(d->execs, rec.internal_id);
        if (r < 0)
                return r;
        reaper_kick(d->reaper);
        *ret_known = true;
        return 0;
}

int sandbox_get(Daemon *d, const Principal *p, const char *sandbox_id, SandboxRecord *ret, Error *e) {
        SandboxRecord rec;
        int r;

        r = d->store->ops->sandbox_get(d->store, p->tenant, sandbox_id, &rec);
        if (r == -ENOENT)
                return not_found(e, sandbox_id);
        if (r < 0)
                return store_error(e, r, "reading the sandbox");
        *ret = rec;
        return 0;
}

static json_t *timestamp_json(usec_t t) {
        char buf[TIMESTAMP_MAX];

        if (t == 0 || format_timestamp(buf, sizeof buf, t) < 0)
                return json_null();
        return json_string(buf);
}

static json_int_t json_u64(uint64_t v) {
        return v > INT64_MAX ? INT64_MAX : (json_int_t) v;
}

json_t *sandbox_record_json(const Daemon *d, const SandboxRecord *r) {
        _cleanup_json_ json_t *o = NULL;
        const char *endpoint = NULL;

        /* Only this worker's endpoint is known here; with one worker that is every record's. */
        if (streq(r->worker_id, d->worker_id))
                endpoint = d->worker_endpoint;

        o = json_pack("{s:s, s:s, s:s, s:s?, s:I, s:I, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:[]}",
                      "sandbox_id", r->sandbox_id,
                      "worker_id", r->worker_id,
                      "worker_epoch", r->worker_epoch,
                      "worker_endpoint", endpoint,
                      "generation", json_u64(r->generation),
                      "sandbox_uid", (json_int_t) r->uid,
                      "status", sandbox_status_to_string(r->status),
                      "storage_mode", "local",
                      "workspace_scope_id", r->workspace_scope_id,
                      "profile", r->profile,
                      "lifecycle_id", r->lifecycle_id,
                      "lifecycle_count", json_u64(r->lifecycle_count),
                      "content_version", json_u64(r->content_version),
                      "templates");
        if (!o)
                return NULL;
        if (json_object_set_new(o, "created_at", timestamp_json(r->created_at)) < 0 ||
            json_object_set_new(o, "updated_at", timestamp_json(r->updated_at)) < 0 ||
            json_object_set_new(o, "connected_at", timestamp_json(r->connected_at)) < 0 ||
            json_object_set_new(o, "released_at", timestamp_json(r->released_at)) < 0 ||
            json_object_set_new(o, "limits", sandbox_limits_json(&d->config, &r->limits)) < 0)
                return NULL;
        return TAKE_PTR(o);
}

int sandbox_list(Daemon *d, const Principal *p, const char *scope_id, int status, uint64_t limit, uint64_t offset,
                 json_t **ret, Error *e) {
        _cleanup_json_ json_t *list = NULL, *answer = NULL;
        _cleanup_free_ SandboxRecord *buf = NULL;
        uint64_t fetched = 0, total = 0;
        bool first = true;
        int r;

        list = json_array();
        buf = calloc(LIST_CHUNK, sizeof *buf);
        if (!list || !buf) {
                error_fill_internal(e, -ENOMEM, "listing sandboxes");
                return -ENOMEM;
        }

        while (first || fetched < limit) {
                /* limit 0 asks for the total only; the store is still asked for one row
                 * so that no backend has to treat 0 specially. */
                uint64_t want = MIN(limit - fetched, (uint64_t) LIST_CHUNK);
                SandboxFilter f = {
                        .owner = p->tenant,
                        .workspace_scope_id = scope_id,
                        .status = status,
                        .limit = want ? want : 1,
                        .offset = offset + fetched,
                };
                size_t count = 0;
                uint64_t t = 0;

                r = d->store->ops->sandbox_list(d->store, &f, buf, &count, &t);
                if (r < 0)
                        return store_error(e, r, "listing sandboxes");
                if (first)
                        total = t;
                first = false;
                count = MIN(count, (size_t) want);
                for (size_t i = 0; i < count; i++) {
                        json_t *item = sandbox_record_json(d, &buf[i]);
                        if (!item || json_array_append_new(list, item) < 0) {
                                error_fill_internal(e, -ENOMEM, "listing sandboxes");
                                return -ENOMEM;
                        }
                }
                fetched += count;
                if (count < want || count == 0)
                        break;
        }

        answer = json_pack("{s:O, s:I, s:I, s:I, s:b}", "sandboxes", list, "total", json_u64(total), "limit",
                           json_u64(limit), "offset", json_u64(offset), "has_more", offset + fetched < total);
        if (!answer) {
                error_fill_internal(e, -ENOMEM, "listing sandboxes");
                return -ENOMEM;
        }
        *ret = TAKE_PTR(answer);
        return 0;
}

static json_t *event_json(const LifecycleEvent *ev) {
        _cleanup_json_ json_t *o = NULL;

        o = json_pack("{s:I, s:s, s:I, s:s, s:s?, s:s?, s:s?}", "seq", json_u64(ev->seq), "lifecycle_id",
                      ev->lifecycle_id, "generation", json_u64(ev->generation), "event", ev->event, "principal",
                      isempty(ev->principal) ? NULL : ev->principal, "reason",
                      isempty(ev->reason) ? NULL : ev->reason, "worker_id",
                      isempty(ev->worker_id) ? NULL : ev->worker_id);
        if (!o || json_object_set_new(o, "at", timestamp_json(ev->at)) < 0)
                return NULL;
        return TAKE_PTR(o);
}

int sandbox_audit(Daemon *d, const Principal *p, const char *sandbox_id, uint64_t limit, uint64_t offset,
                  json_t **ret, Error *e) {
        _cleanup_json_ json_t *events = NULL, *answer = NULL;
        _cleanup_free_ LifecycleEvent *buf = NULL;
        SandboxRecord rec;
        uint64_t fetched = 0, total = 0;
        bool first = true;
        int r;

        /* Owner check first: another tenant's sandbox is "not found", not an empty history. */
        r = sandbox_get(d, p, sandbox_id, &rec, e);
        if (r < 0)
                return r;

        events = json_array();
        buf = calloc(LIST_CHUNK, sizeof *buf);
        if (!events || !buf) {
                error_fill_internal(e, -ENOMEM, "reading the history");
                return -ENOMEM;
        }
        while (first || fetched < limit) {
                size_t max = (size_t) MIN(limit - fetched, (uint64_t) LIST_CHUNK), count = 0;
                uint64_t t = 0;

                r = d->store->ops->history_list(d->store, p->tenant, sandbox_id, offset + fetched, buf,
                                                max ? max : 1, &count, &t);
                if (r < 0)
                        return store_error(e, r, "reading the history");
                if (first)
                        total = t;
                first = false;
                count = MIN(count, max);
                for (size_t i = 0; i < count; i++) {
                        json_t *item = event_json(&buf[i]);
                        if (!item || json_array_append_new(events, item) < 0) {
                                error_fill_internal(e, -ENOMEM, "reading the history");
                                return -ENOMEM;
                        }
                }
                fetched += count;
                if (count < max || count == 0)
                        break;
        }

        answer = json_pack("{s:s, s:O, s:I}", "sandbox_id", sandbox_id, "events", events, "total", json_u64(total));
        if (!answer) {
                error_fill_internal(e, -ENOMEM, "reading the history");
                return -ENOMEM;
        }
        *ret = TAKE_PTR(answer);
        return 0;
}

static int check_open(const SandboxRecord *rec, uint64_t generation, Error *e) {
        if (rec->generation != generation)
                return error_set(e, -ESTALE, 409, "STALE_SANDBOX_GENERATION",
                                 "generation %" PRIu64 " is not current for sandbox '%s' (now %" PRIu64 ")",
                                 generation, rec->sandbox_id, rec->generation);
        if (rec->status == SANDBOX_ASSIGNED)
                return error_set(e, -EBUSY, 409, "SANDBOX_NOT_READY",
                                 "sandbox '%s' has no workspace yet; connect first", rec->sandbox_id);
        return check_suspended(rec, e);
}

int sandbox_open(Daemon *d, const Principal *p, const char *sandbox_id, uint64_t generation, HoldKind kind,
                 const char *path, const char *path2, SandboxHandle **ret, Error *e) {
        _cleanup_(hold_releasep) Hold *hold = NULL;
        _cleanup_close_ int fs_fd = -EBADF;
        SandboxHandle *h;
        SandboxRecord rec;
        int r;

        r = get_live(d, p->tenant, sandbox_id, &rec, e);
        if (r < 0)
                return r;
        r = check_open(&rec, generation, e);
        if (r < 0)
                return r;

        r = hold_and_recheck(d, p, sandbox_id, generation, check_open, kind, path, path2, &rec, &hold, e);
        if (r < 0)
                return r;

        r = workspace_open_fs(d->sandboxes_fd, rec.internal_id, &fs_fd);
        if (r < 0) {
                error_fill_internal(e, r, "opening the workspace");
                return r;
        }

        h = calloc(1, sizeof *h);
        if (!h) {
                error_fill_internal(e, -ENOMEM, "opening the sandbox");
                return -ENOMEM;
        }
        h->daemon = d;
        h->record = rec;
        h->fs_fd = TAKE_FD(fs_fd);
        h->hold = TAKE_PTR(hold);
        *ret = h;
        return 0;
}

void sandbox_handle_close(SandboxHandle *h) {
        if (!h)
                return;
        hold_release(h->hold);
        (void) safe_close(h->fs_fd);
        free(h);
}

void sandbox_handle_touch(SandboxHandle *h) {
        Daemon *d;

        if (!h)
                return;
        d = h->daemon;
        if (d->store->ops->sandbox_touch(d->store, h->record.owner, h->record.sandbox_id, h->record.generation,
                                         now_realtime_usec()) >= 0)
                h->record.content_version++;
}

int sandbox_recover(Daemon *d, const char *previous_epoch) {
        _cleanup_free_ SandboxRecord *buf = NULL;
        int r;

        buf = calloc(RECOVER_BATCH, sizeof *buf);
        if (!buf)
                return -ENOMEM;

        /* Releases a crash left half done: their directories go to the trash (if still in
         * place) and the rows to RELEASED. A row that cannot be finished stays for next time. */
        for (;;) {
                size_t count = 0, finished = 0;

                r = d->store->ops->sandbox_list_releasing(d->store, d->worker_id, buf, RECOVER_BATCH, &count);
                if (r < 0)
                        return r;
                for (size_t i = 0; i < count; i++) {
                        Error e = ERROR_INIT;
                        if (release_locked(d, "system", buf[i].owner, buf[i].sandbox_id, "recovered", &e) >= 0)
                                finished++;
                }
                if (count < RECOVER_BATCH || finished == 0)
                        break;
        }

        /* Then take over what the previous process of this worker owned: generation + 1,
         * files untouched (directories are named by internal_id, not by generation). */
        if (isempty(previous_epoch) || streq(previous_epoch, d->worker_epoch))
                return 0;
        return d->store->ops->sandbox_reown(d->store, d->worker_id, previous_epoch, d->worker_epoch,
                                            now_realtime_usec());
}
