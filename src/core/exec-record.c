/* SPDX-License-Identifier: MIT */
/* An exec as the API sees it: the sandbox checks, lookups (memory first, then the store),
 * the record as JSON, and reading the output of a running or finished exec. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base64.h"
#include "exec-internal.h"
#include "json-util.h"
#include "sandbox-limits.h"
#include "string-util.h"

int exec_store_error(Error *err, int r, const char *what) {
        if (r == -EIO || r == -EPROTO || r == -EAGAIN)
                return error_set(err, r, 503, "SANDBOX_STORE_UNAVAILABLE", "%s: the metadata store failed", what);
        error_fill_internal(err, r, what);
        return r;
}

int exec_get_sandbox(ExecEngine *e, const Principal *p, const char *sandbox_id, uint64_t generation, bool for_start,
                     SandboxRecord *ret, Error *err) {
        Store *st = e->d->store;
        SandboxRecord rec;
        int r;

        r = st->ops->sandbox_get(st, p->tenant, sandbox_id, &rec);
        if (r == -ENOENT || (r >= 0 && (rec.status == SANDBOX_RELEASING || rec.status == SANDBOX_RELEASED)))
                return error_set(err, -ENOENT, 404, "SANDBOX_NOT_FOUND", "sandbox '%s' not found", sandbox_id);
        if (r < 0)
                return exec_store_error(err, r, "reading the sandbox");
        if (rec.generation != generation)
                return error_set(err, -ESTALE, 409, "STALE_SANDBOX_GENERATION",
                                 "generation %" PRIu64 " is not current for sandbox '%s' (now %" PRIu64 ")", generation,
                                 sandbox_id, rec.generation);
        if (for_start && rec.status == SANDBOX_ASSIGNED)
                return error_set(err, -EBUSY, 409, "SANDBOX_NOT_READY", "sandbox '%s' has no workspace yet; connect first",
                                 sandbox_id);
        if (for_start && (rec.status == SANDBOX_SUSPENDED || rec.status == SANDBOX_SUSPENDING))
                return error_set(err, -EBUSY, 409, "SANDBOX_SUSPENDED", "sandbox '%s' is suspended; resume it first",
                                 sandbox_id);
        if (for_start && rec.status != SANDBOX_READY)
                return error_set(err, -EBUSY, 409, "SANDBOX_NOT_READY", "sandbox '%s' is not ready for commands",
                                 sandbox_id);
        if (for_start)
                sandbox_limits_note(rec.internal_id, &rec.limits); /* for the launch: no second read */
        *ret = rec;
        return 0;
}

void exec_spool_name(const char *exec_uid, ExecStream s, char *buf, size_t size) {
        (void) bsprintf(buf, size, "%s.%s", exec_uid, s == EXEC_STDOUT ? "stdout" : "stderr");
}

void exec_open_spooled(Exec *x, ExecStream s) {
        ExecOutput *o = &x->out[s];
        char name[96];
        struct stat st;
        int fd;

        if (atomic_load(&o->spool_fd) >= 0)
                return;
        exec_spool_name(x->exec_uid, s, name, sizeof name);
        fd = openat(x->engine->execs_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return; /* never written (no output), or pruned: empty */
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                safe_close(fd);
                return;
        }
        atomic_store(&o->kept, (uint64_t) st.st_size);
        atomic_store(&o->spool_fd, fd);
        atomic_store(&o->eof, true);
}

int exec_from_record(ExecEngine *e, ExecRecord *rec, Exec **ret) {
        Exec *x = exec_alloc(e);

        if (!x) {
                exec_record_clear(rec);
                return -ENOMEM;
        }
        (void) strscpy(x->owner, sizeof x->owner, rec->owner);
        (void) strscpy(x->sandbox_id, sizeof x->sandbox_id, rec->sandbox_id);
        (void) strscpy(x->lifecycle_id, sizeof x->lifecycle_id, rec->lifecycle_id);
        (void) strscpy(x->exec_id, sizeof x->exec_id, rec->exec_id);
        (void) strscpy(x->exec_uid, sizeof x->exec_uid, rec->exec_uid);
        (void) strscpy(x->fingerprint, sizeof x->fingerprint, rec->fingerprint);
        (void) strscpy(x->scope, sizeof x->scope, rec->exec_scope);
        x->generation = rec->generation;
        x->background = rec->background;
        x->timeout_seconds = rec->timeout_seconds;
        x->rec = *rec;
        *rec = (ExecRecord) {};
        x->has_rec = true;
        x->phase = EXEC_PHASE_DONE;
        if (!x->rec.stdout_inline)
                exec_open_spooled(x, EXEC_STDOUT);
        if (!x->rec.stderr_inline)
                exec_open_spooled(x, EXEC_STDERR);
        *ret = x;
        return 0;
}

int exec_lookup(ExecEngine *e, const Principal *p, const char *sandbox_id, uint64_t generation, const char *exec_id_,
                Exec **ret, Error *err) {
        Store *st = e->d->store;
        ExecRecord rec = {};
        SandboxRecord sb;
        ExecSlot *slot;
        Exec *x = NULL;
        int r;

        r = exec_get_sandbox(e, p, sandbox_id, generation, false, &sb, err);
        if (r < 0)
                return r;

        (void) pthread_mutex_lock(&e->lock);
        slot = exec_slot_find(e, sb.internal_id);
        if (slot)
                x = exec_slot_find_exec(slot, sb.lifecycle_id, exec_id_);
        if (x)
                (void) exec_ref(x);
        (void) pthread_mutex_unlock(&e->lock);
        if (x) {
                *ret = x;
                return 0;
        }

        /* Not in memory: ended (its record was written before it left memory), or unknown. */
        r = st->ops->exec_get(st, sb.owner, sb.sandbox_id, sb.lifecycle_id, exec_id_, &rec);
        if (r == -ENOENT)
                return error_set(err, r, 404, "EXEC_NOT_FOUND", "exec '%s' not found in sandbox '%s'", exec_id_,
                                 sandbox_id);
        if (r < 0)
                return exec_store_error(err, r, "reading the exec");
        r = exec_from_record(e, &rec, ret);
        if (r < 0)
                error_fill_internal(err, r, "reading the exec");
        return r;
}

/* ---- state ---- */

const Error *exec_error(Exec *x) {
        const Error *err;

        (void) pthread_mutex_lock(&x->engine->lock);
        err = x->phase == EXEC_PHASE_DONE && error_is_set(&x->error) ? &x->error : NULL;
        (void) pthread_mutex_unlock(&x->engine->lock);
        return err;
}

bool exec_has_ended(Exec *x) {
        bool done;

        (void) pthread_mutex_lock(&x->engine->lock);
        done = x->phase == EXEC_PHASE_DONE;
        (void) pthread_mutex_unlock(&x->engine->lock);
        return done;
}

bool exec_has_started(Exec *x) {
        bool started;

        (void) pthread_mutex_lock(&x->engine->lock);
        started = x->phase >= EXEC_PHASE_RUNNING;
        (void) pthread_mutex_unlock(&x->engine->lock);
        return started;
}

ExecStatus exec_status(Exec *x) {
        ExecStatus s;

        (void) pthread_mutex_lock(&x->engine->lock);
        s = x->phase == EXEC_PHASE_DONE && x->has_rec ? x->rec.status : EXEC_RUNNING;
        (void) pthread_mutex_unlock(&x->engine->lock);
        return s;
}

bool exec_output_base64(Exec *x) {
        return x->output_base64;
}

const char *exec_id(Exec *x) {
        return x->exec_id;
}

/* With the lock held: the inline copy of stream S of an ended exec, if it has one. */
static bool inline_locked(Exec *x, ExecStream s, const char **ret, size_t *ret_len) {
        if (x->phase != EXEC_PHASE_DONE || !x->has_rec)
                return false;
        if (s == EXEC_STDOUT && x->rec.stdout_inline) {
                *ret = x->rec.stdout_data;
                *ret_len = x->rec.stdout_len;
                return true;
        }
        if (s == EXEC_STDERR && x->rec.stderr_inline) {
                *ret = x->rec.stderr_data;
                *ret_len = x->rec.stderr_len;
                return true;
        }
        return false;
}

void exec_output_state(Exec *x, ExecStream s, uint64_t *ret_available, bool *ret_final) {
        const char *data;
        size_t len;

        (void) pthread_mutex_lock(&x->engine->lock);
        if (inline_locked(x, s, &data, &len))
                *ret_available = len;
        else
                *ret_available = atomic_load(&x->out[s].kept);
        *ret_final = x->phase == EXEC_PHASE_DONE;
        (void) pthread_mutex_unlock(&x->engine->lock);
}

ssize_t exec_read(Exec *x, ExecStream s, uint64_t offset, void *buf, size_t max) {
        const char *data = NULL;
        size_t len = 0;
        bool is_inline;

        (void) pthread_mutex_lock(&x->engine->lock);
        is_inline = inline_locked(x, s, &data, &len);
        (void) pthread_mutex_unlock(&x->engine->lock);
        /* An ended exec's inline data never changes again: read without the lock. */
        if (is_inline) {
                if (offset >= len)
                        return 0;
                max = (size_t) MIN((uint64_t) max, len - offset);
                memcpy(buf, data + offset, max);
                return (ssize_t) max;
        }
        return exec_output_read(&x->out[s], offset, buf, max);
}

/* ---- JSON ---- */

static json_t *timestamp_json(usec_t t) {
        char buf[TIMESTAMP_MAX];

        if (t == 0 || format_timestamp(buf, sizeof buf, t) < 0)
                return json_null();
        return json_string(buf);
}

static json_int_t ju64(uint64_t v) {
        return v > INT64_MAX ? INT64_MAX : (json_int_t) v;
}

/* The whole stream as it is now (at most the cap). */
static int read_stream(Exec *x, ExecStream s, char **ret, size_t *ret_len) {
        uint64_t avail;
        bool final;
        _cleanup_free_ char *buf = NULL;
        size_t got = 0;

        exec_output_state(x, s, &avail, &final);
        buf = malloc((size_t) avail + 1);
        if (!buf)
                return -ENOMEM;
        while (got < avail) {
                ssize_t n = exec_read(x, s, got, buf + got, (size_t) avail - got);
                if (n < 0)
                        return (int) n;
                if (n == 0)
                        break; /* a spool shorter than announced (disk error): what there is */
                got += (size_t) n;
        }
        buf[got] = '\0';
        *ret = TAKE_PTR(buf);
        *ret_len = got;
        return 0;
}

static int add_output(json_t *o, Exec *x, ExecStream s, bool base64) {
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        json_t *v;
        int r;

        r = read_stream(x, s, &data, &len);
        if (r < 0)
                return r;
        if (base64) {
                _cleanup_free_ char *enc = NULL;
                size_t enc_len;

                r = base64_encode(data, len, &enc, &enc_len);
                if (r < 0)
                        return r;
                v = json_stringn(enc, enc_len);
        } else
                v = json_string_lossy(data, len);
        if (!v)
                return -ENOMEM;
        return json_object_set_new(o, s == EXEC_STDOUT ? (base64 ? "stdout_base64" : "stdout")
                                                       : (base64 ? "stderr_base64" : "stderr"),
                                   v) < 0
                       ? -ENOMEM
                       : 0;
}

json_t *exec_to_json(Exec *x, bool base64) {
        _cleanup_json_ json_t *o = NULL;
        ExecRecord r = {};
        bool done, has_rec, truncated;
        uint64_t produced[2];
        usec_t launched;

        (void) pthread_mutex_lock(&x->engine->lock);
        done = x->phase == EXEC_PHASE_DONE;
        has_rec = x->has_rec;
        if (has_rec) {
                r = x->rec;
                r.stdout_data = r.stderr_data = NULL; /* scalars only: the data is read below */
        }
        launched = x->launched ? x->t_launched : 0;
        produced[0] = atomic_load(&x->out[0].produced);
        produced[1] = atomic_load(&x->out[1].produced);
        truncated = exec_output_truncated(&x->out[0]) || exec_output_truncated(&x->out[1]);
        (void) pthread_mutex_unlock(&x->engine->lock);

        if (!done) {
                /* Running (or not yet started): the output so far. */
                r.status = EXEC_RUNNING;
                r.has_exit_code = false;
                r.signal = 0;
                r.truncated = truncated;
                r.stdout_bytes = produced[0];
                r.stderr_bytes = produced[1];
                r.cpu_ms = r.max_rss_bytes = 0;
                r.oom_killed = false;
                r.finished_at = 0;
                r.duration_ms = launched ? (now_monotonic_usec() - launched) / 1000 : 0;
        }

        o = json_pack("{s:s, s:s, s:I, s:s, s:b, s:I, s:I, s:I, s:I, s:I, s:b}",
                      "exec_id", x->exec_id,
                      "sandbox_id", x->sandbox_id,
                      "generation", ju64(x->generation),
                      "status", exec_status_to_string(r.status),
                      "truncated", r.truncated,
                      "stdout_bytes", ju64(r.stdout_bytes),
                      "stderr_bytes", ju64(r.stderr_bytes),
                      "duration_ms", ju64(r.duration_ms),
                      "cpu_ms", ju64(r.cpu_ms),
                      "max_rss_bytes", ju64(r.max_rss_bytes),
                      "background", x->background);
        if (o && json_object_set_new(o, "oom_killed", json_boolean(r.oom_killed)) < 0)
                json_decref(TAKE_PTR(o));
        if (!o)
                return NULL;
        if (json_object_set_new(o, "exit_code", r.has_exit_code ? json_integer(r.exit_code) : json_null()) < 0 ||
            json_object_set_new(o, "signal", r.signal ? json_integer(r.signal) : json_null()) < 0 ||
            json_object_set_new(o, "started_at", timestamp_json(has_rec ? r.started_at : 0)) < 0 ||
            json_object_set_new(o, "finished_at", timestamp_json(r.finished_at)) < 0 ||
            json_object_set_new(o, "exec_scope", isempty(x->scope) ? json_null() : json_string(x->scope)) < 0)
                return NULL;
        if (add_output(o, x, EXEC_STDOUT, base64) < 0 || add_output(o, x, EXEC_STDERR, base64) < 0)
                return NULL;
        return TAKE_PTR(o);
}

json_t *exec_start_json(Exec *x) {
        _cleanup_json_ json_t *o = NULL;
        usec_t started;

        (void) pthread_mutex_lock(&x->engine->lock);
        started = x->has_rec ? x->rec.started_at : 0;
        (void) pthread_mutex_unlock(&x->engine->lock);
        o = json_pack("{s:s, s:s, s:s}", "exec_id", x->exec_id, "sandbox_id", x->sandbox_id, "status", "RUNNING");
        if (!o || json_object_set_new(o, "started_at", timestamp_json(started)) < 0)
                return NULL;
        return TAKE_PTR(o);
}
