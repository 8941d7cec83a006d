/* SPDX-License-Identifier: MIT */
#include "sandbox-limits.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cgroup-limits.h"
#include "macros.h"
#include "string-util.h"

#define NOTE_BUCKETS 1024u
#define NOTE_ENTRIES_MAX 65536u

static uint64_t default_cpu(const Config *c) {
        uint64_t m = 0;

        (void) cgroup_limits_parse_cpu_quota(c->cpu_quota, &m); /* checked at start-up */
        return m;
}

/* The largest value a sandbox may ask for: the maximum if the operator set one (but never
 * below the default), else the default; UINT64_MAX when both are unlimited (0). */
static uint64_t maximum(uint64_t max, uint64_t def) {
        if (max == 0 && def == 0)
                return UINT64_MAX;
        return MAX(max, def);
}

/* A sandbox's own value (0 = the default), never above today's maximum: an operator who
 * lowers a maximum and restarts lowers the sandboxes that asked for more, too. */
static uint64_t own_or_default(uint64_t own, uint64_t max, uint64_t def) {
        return own ? MIN(own, maximum(max, def)) : def;
}

void sandbox_limits_effective(const Config *c, const SandboxLimits *own, SandboxLimits *ret) {
        SandboxLimits o = own ? *own : (SandboxLimits) {};
        uint64_t max_cpu = 0;

        /* Checked at start-up (config.c); unparsable cannot happen here, and 0 = no maximum. */
        (void) cgroup_limits_parse_cpu_quota(c->max_cpu_quota, &max_cpu);
        *ret = (SandboxLimits) {
                .memory_bytes = own_or_default(o.memory_bytes, c->max_memory_limit_bytes, c->memory_limit_bytes),
                .max_processes = own_or_default(o.max_processes, c->max_processes_limit, c->max_processes),
                .cpu_millicores = own_or_default(o.cpu_millicores, max_cpu, default_cpu(c)),
                .disk_quota_bytes = own_or_default(o.disk_quota_bytes, c->max_disk_quota_bytes, c->disk_quota_bytes),
        };
}

int sandbox_limits_check(const Config *c, const SandboxLimits *a, Error *err) {
        uint64_t max_cpu = 0, m;

        (void) cgroup_limits_parse_cpu_quota(c->max_cpu_quota, &max_cpu);
        m = maximum(c->max_memory_limit_bytes, c->memory_limit_bytes);
        if (a->memory_bytes > m)
                return error_set(err, -E2BIG, 422, "SANDBOX_LIMIT_EXCEEDS_MAXIMUM",
                                 "limits.memory_bytes is above this worker's maximum of %" PRIu64
                                 " (SANDBOX_MAX_MEMORY_LIMIT_BYTES)", m);
        m = maximum(c->max_processes_limit, c->max_processes);
        if (a->max_processes > m)
                return error_set(err, -E2BIG, 422, "SANDBOX_LIMIT_EXCEEDS_MAXIMUM",
                                 "limits.max_processes is above this worker's maximum of %" PRIu64
                                 " (SANDBOX_MAX_PROCESSES_LIMIT)", m);
        m = maximum(max_cpu, default_cpu(c));
        if (a->cpu_millicores > m)
                return error_set(err, -E2BIG, 422, "SANDBOX_LIMIT_EXCEEDS_MAXIMUM",
                                 "limits.cpu_quota is above this worker's maximum of %" PRIu64 ".%03" PRIu64
                                 " cores (SANDBOX_MAX_CPU_QUOTA)", m / 1000, m % 1000);
        m = maximum(c->max_disk_quota_bytes, c->disk_quota_bytes);
        if (a->disk_quota_bytes > m)
                return error_set(err, -E2BIG, 422, "SANDBOX_LIMIT_EXCEEDS_MAXIMUM",
                                 "limits.disk_quota_bytes is above this worker's maximum of %" PRIu64
                                 " (SANDBOX_MAX_DISK_QUOTA_BYTES)", m);
        return 0;
}

bool sandbox_limits_match(const Config *c, const SandboxLimits *own, const SandboxLimits *asked) {
        SandboxLimits e;

        sandbox_limits_effective(c, own, &e);
        return (!asked->memory_bytes || asked->memory_bytes == e.memory_bytes) &&
               (!asked->max_processes || asked->max_processes == e.max_processes) &&
               (!asked->cpu_millicores || asked->cpu_millicores == e.cpu_millicores) &&
               (!asked->disk_quota_bytes || asked->disk_quota_bytes == e.disk_quota_bytes);
}

static json_t *u64_or_null(uint64_t v) {
        return v == 0 ? json_null() : json_integer(v > INT64_MAX ? INT64_MAX : (json_int_t) v);
}

json_t *sandbox_limits_json(const Config *c, const SandboxLimits *own) {
        SandboxLimits e;

        sandbox_limits_effective(c, own, &e);
        return json_pack("{s:o, s:o, s:o, s:o}", "memory_bytes", u64_or_null(e.memory_bytes), "max_processes",
                         u64_or_null(e.max_processes), "cpu_quota",
                         e.cpu_millicores ? json_real((double) e.cpu_millicores / 1000.0) : json_null(),
                         "disk_quota_bytes", u64_or_null(e.disk_quota_bytes));
}

/* ---- the exec path's table ---- */

typedef struct Note {
        struct Note *next;
        char internal_id[OPAQUE_ID_LEN + 1];
        SandboxLimits own;
} Note;

static pthread_mutex_t notes_lock = PTHREAD_MUTEX_INITIALIZER;
static Note *notes[NOTE_BUCKETS];
static size_t n_notes;

static unsigned note_bucket(const char *id) {
        uint32_t h = 2166136261u;

        for (; *id; id++)
                h = (h ^ (uint8_t) *id) * 16777619u;
        return h % NOTE_BUCKETS;
}

void sandbox_limits_note(const char *internal_id, const SandboxLimits *own) {
        unsigned b = note_bucket(internal_id);
        Note *n;

        pthread_mutex_lock(&notes_lock);
        for (n = notes[b]; n; n = n->next)
                if (streq(n->internal_id, internal_id))
                        break;
        if (!n) {
                /* Bounded; a sandbox forgotten is read from the store at its next launch. */
                if (n_notes >= NOTE_ENTRIES_MAX)
                        for (size_t i = 0; i < NOTE_BUCKETS; i++)
                                while (notes[i]) {
                                        Note *x = notes[i];
                                        notes[i] = x->next;
                                        free(x);
                                        n_notes--;
                                }
                n = calloc(1, sizeof *n);
                if (n) {
                        (void) strscpy(n->internal_id, sizeof n->internal_id, internal_id);
                        n->next = notes[b];
                        notes[b] = n;
                        n_notes++;
                }
        }
        if (n)
                n->own = *own;
        pthread_mutex_unlock(&notes_lock);
}

bool sandbox_limits_lookup(const char *internal_id, SandboxLimits *ret) {
        bool found = false;

        pthread_mutex_lock(&notes_lock);
        for (Note *n = notes[note_bucket(internal_id)]; n; n = n->next)
                if (streq(n->internal_id, internal_id)) {
                        *ret = n->own;
                        found = true;
                        break;
                }
        pthread_mutex_unlock(&notes_lock);
        return found;
}
