/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup-limits.h"
#include "daemon.h"
#include "disk.h"
#include "hostprobe.h"
#include "log.h"
#include "macros.h"
#include "resources.h"
#include "parse-util.h"
#include "sampler.h"
#include "spawner.h"
#include "string-util.h"

/* Fixed once by resources_probe() before the HTTP server starts; read-only afterwards. */
static ResourceStatus probed[_RESOURCE_MAX];
static bool probed_set;

static const char *const kind_names[_RESOURCE_MAX] = {
        [RESOURCE_MEMORY] = "memory",
        [RESOURCE_PIDS] = "pids",
        [RESOURCE_CPU] = "cpu",
        [RESOURCE_DISK] = "disk",
        [RESOURCE_OPEN_FILES] = "open_files",
};

static const char *const mechanism_names[] = {
        [RESOURCE_MECHANISM_NONE] = "none",
        [RESOURCE_MECHANISM_CGROUP_V2] = "cgroup-v2",
        [RESOURCE_MECHANISM_CGROUP_V1] = "cgroup-v1",
        [RESOURCE_MECHANISM_PROJECT_QUOTA] = "project-quota",
        [RESOURCE_MECHANISM_RLIMIT] = "rlimit",
        [RESOURCE_MECHANISM_SAMPLED] = "sampled",
};

const char *resource_kind_to_string(ResourceKind k) {
        return k >= 0 && k < _RESOURCE_MAX ? kind_names[k] : NULL;
}

const char *resource_mechanism_to_string(ResourceMechanism m) {
        return m >= 0 && m < (ResourceMechanism) ELEMENTSOF(mechanism_names) ? mechanism_names[m] : NULL;
}

/* The configured value of the setting named ENV ("" if this build has no such setting or
 * it is 0 = unlimited). Looked up by name so a setting added later is picked up. */
static void configured(const Config *c, const char *env, char *ret, size_t len) {
        ret[0] = '\0';
        for (size_t i = 0; i < config_settings_count; i++)
                if (streq(config_settings[i].env, env)) {
                        _cleanup_free_ char *v = config_value_string(c, &config_settings[i]);
                        if (v && !streq(v, "0"))
                                (void) strscpy(ret, len, v);
                        return;
                }
}

#define SAMPLED_MEMORY                                                                                                 \
        "the sampling supervisor sums each sandbox uid's anonymous resident memory every "                    \
        "SANDBOX_SAMPLE_INTERVAL_MS and kills all its processes once over the limit (it may go over for one "         \
        "interval; page cache and tmpfs are not counted)"
#define SAMPLED_PIDS                                                                                                   \
        "the sampling supervisor counts each sandbox uid's processes every SANDBOX_SAMPLE_INTERVAL_MS and "   \
        "kills them all once over the limit"

static void append(char *buf, size_t len, const char *s) {
        size_t k = strlen(buf);

        if (k + 3 < len)
                (void) bsprintf(buf + k, len - k, "%s%s", k ? "; " : "", s);
}

/* The cgroup limits engine's own report (cgroup-limits.c): what it will use for each
 * controller. NULL if it could not report. */
static json_t *limits_engine_report(void) {
        _cleanup_free_ char *buf = malloc(8192);

        if (!buf || cgroup_limits_report(buf, 8192) < 0)
                return NULL;
        return json_loads(buf, 0, NULL);
}

/* Memory, pids and cpu go through the limits engine: its mechanism for CONTROLLER is the
 * one in force. Returns true if it enforces it by a cgroup (RET filled); false with its
 * evidence appended if it does not; false with nothing appended if there is no engine
 * report (then the caller probes the cgroups itself). */
static bool from_engine(json_t *engine, const char *controller, bool *ret_answered, ResourceStatus *ret) {
        json_t *e = engine ? json_object_get(engine, controller) : NULL;
        const char *mech = json_string_value(json_object_get(e, "mechanism"));
        const char *ev = json_string_value(json_object_get(e, "evidence"));

        *ret_answered = false;
        if (!mech)
                return false;
        *ret_answered = true;
        if (ev)
                append(ret->evidence, sizeof ret->evidence, ev);
        if (streq(mech, "cgroup-v1"))
                ret->mechanism = RESOURCE_MECHANISM_CGROUP_V1;
        else if (streq(mech, "cgroup-v2"))
                ret->mechanism = RESOURCE_MECHANISM_CGROUP_V2;
        else
                return false;
        return true;
}

/* Tries a limit file in a child of the caller's own cgroup: v2 first when the controller is
 * bound to the unified hierarchy, else its v1 hierarchy. Sets RET's mechanism on success. */
static bool try_cgroup(const CgroupLayout *l, const char *controller, const char *v2_file, const char *v2_value,
                       const char *v1_file, const char *v1_value, ResourceStatus *ret) {
        char ev[768];
        const CgroupHierarchy *h;

        if (l->v2 && l->v2_own[0] && hostprobe_word_in(l->v2_controllers, controller)) {
                if (!hostprobe_word_in(l->v2_subtree, controller)) {
                        char s[512];
                        (void) bsprintf(s, sizeof s,
                                        "cgroup v2: %s is available in %s but not enabled in its cgroup.subtree_control "
                                        "(no delegation)",
                                        controller, l->v2_own);
                        append(ret->evidence, sizeof ret->evidence, s);
                } else if (hostprobe_cgroup_try(l->v2_own, v2_file, v2_value, ev, sizeof ev) >= 0) {
                        append(ret->evidence, sizeof ret->evidence, ev);
                        ret->mechanism = RESOURCE_MECHANISM_CGROUP_V2;
                        return true;
                } else
                        append(ret->evidence, sizeof ret->evidence, ev);
        }
        h = hostprobe_v1_find(l, controller);
        if (!h) {
                char s[128];
                (void) bsprintf(s, sizeof s, "cgroup v1: no %s hierarchy is mounted", controller);
                append(ret->evidence, sizeof ret->evidence, s);
                return false;
        }
        if (!h->own[0]) {
                char s[512];
                (void) bsprintf(s, sizeof s, "cgroup v1: the daemon's %s cgroup is not visible under %s", controller, h->mount);
                append(ret->evidence, sizeof ret->evidence, s);
                return false;
        }
        if (hostprobe_cgroup_try(h->own, v1_file, v1_value, ev, sizeof ev) < 0) {
                append(ret->evidence, sizeof ret->evidence, ev);
                return false;
        }
        append(ret->evidence, sizeof ret->evidence, ev);
        ret->mechanism = RESOURCE_MECHANISM_CGROUP_V1;
        return true;
}

/* Whether a forked child can set RESOURCE to VALUE (soft and hard): what the launcher
 * does for every exec. */
static int try_rlimit(int resource, rlim_t value) {
        struct rlimit rl = { value, value };
        int status;
        pid_t pid;

        pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0)
                _exit(setrlimit(resource, &rl) < 0 ? (errno & 0x7f) : 0);
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        if (!WIFEXITED(status))
                return -ECHILD;
        return -WEXITSTATUS(status);
}

static void probe_memory(const Config *c, const CgroupLayout *l, json_t *engine, ResourceStatus *ret) {
        bool answered;

        configured(c, "SANDBOX_MEMORY_LIMIT_BYTES", ret->limit, sizeof ret->limit);
        if (from_engine(engine, "memory", &answered, ret))
                return;
        if (!answered && try_cgroup(l, "memory", "memory.max", "268435456", "memory.limit_in_bytes", "268435456", ret)) {
                const CgroupHierarchy *h = hostprobe_v1_find(l, "memory");
                if (ret->mechanism == RESOURCE_MECHANISM_CGROUP_V1 && h) {
                        _cleanup_free_ char *p = strprintf("%s/memory.memsw.limit_in_bytes", h->own);
                        append(ret->evidence, sizeof ret->evidence,
                               p && access(p, F_OK) == 0 ? "swap is counted (memory.memsw.limit_in_bytes exists)"
                                                         : "swap is not counted (no swap accounting: memory.memsw.* "
                                                           "missing)");
                }
                return;
        }
        /* No cgroup: the sampling supervisor (sampler.h) is what limits it. */
        ret->mechanism = RESOURCE_MECHANISM_SAMPLED;
        append(ret->evidence, sizeof ret->evidence, SAMPLED_MEMORY);
}

static void probe_pids(const Config *c, const CgroupLayout *l, json_t *engine, ResourceStatus *ret) {
        bool answered;

        configured(c, "SANDBOX_MAX_PROCESSES", ret->limit, sizeof ret->limit);
        if (from_engine(engine, "pids", &answered, ret))
                return;
        if (!answered && try_cgroup(l, "pids", "pids.max", "256", "pids.max", "256", ret))
                return;
        int r = try_rlimit(RLIMIT_NPROC, 256);
        char s[200];
        (void) bsprintf(s, sizeof s,
                        "setrlimit(RLIMIT_NPROC, 256) in a forked child: %s (per uid, and every sandbox has a uid of its "
                        "own: it refuses forks past the limit)",
                        r < 0 ? strerror(-r) : "ok");
        append(ret->evidence, sizeof ret->evidence, s);
        /* No cgroup: RLIMIT_NPROC where it can be set, and the sampling supervisor. */
        ret->mechanism = RESOURCE_MECHANISM_SAMPLED;
        append(ret->evidence, sizeof ret->evidence, SAMPLED_PIDS);
}

static void probe_cpu(const Config *c, const CgroupLayout *l, json_t *engine, ResourceStatus *ret) {
        bool answered;

        configured(c, "SANDBOX_CPU_QUOTA", ret->limit, sizeof ret->limit);
        if (from_engine(engine, "cpu", &answered, ret))
                return;
        if (!answered && try_cgroup(l, "cpu", "cpu.max", "50000 100000", "cpu.cfs_quota_us", "50000", ret))
                return;
        int r = try_rlimit(RLIMIT_CPU, 3600);
        char s[160];
        (void) bsprintf(s, sizeof s, "setrlimit(RLIMIT_CPU, 3600) in a forked child: %s (CPU seconds, not a quota)",
                        r < 0 ? strerror(-r) : "ok");
        append(ret->evidence, sizeof ret->evidence, s);
        if (r >= 0)
                ret->mechanism = RESOURCE_MECHANISM_RLIMIT;
}

static void probe_disk(const Config *c, const char *data_dir, int data_fd, ResourceStatus *ret) {
        char ev[768];
        int r;

        configured(c, "SANDBOX_DISK_QUOTA_BYTES", ret->limit, sizeof ret->limit);
        r = hostprobe_project_quota(data_fd, data_dir, ev, sizeof ev);
        if (r < 0)
                (void) bsprintf(ev, sizeof ev, "looking for project quotas on %s: %s", data_dir, strerror(-r));
        if (!ret->limit[0]) {
                append(ret->evidence, sizeof ret->evidence, "SANDBOX_DISK_QUOTA_BYTES is 0: no per-sandbox quota");
                append(ret->evidence, sizeof ret->evidence, ev);
                return;
        }
        append(ret->evidence, sizeof ret->evidence, ev);
        if (r > 0) {
                ret->mechanism = RESOURCE_MECHANISM_PROJECT_QUOTA;
                return;
        }
        /* Without project quotas the disk engine measures usage and refuses writes once over. */
        append(ret->evidence, sizeof ret->evidence, "usage is measured and writes are refused once over (soft quota)");
        ret->mechanism = RESOURCE_MECHANISM_SAMPLED;
}

static void probe_open_files(const Config *c, ResourceStatus *ret) {
        char s[160];
        uint64_t n = c->max_open_files;
        int r;

        (void) bsprintf(ret->limit, sizeof ret->limit, "%" PRIu64, n);
        r = try_rlimit(RLIMIT_NOFILE, (rlim_t) n);
        (void) bsprintf(s, sizeof s, "setrlimit(RLIMIT_NOFILE, %" PRIu64 ") in a forked child: %s", n,
                        r < 0 ? strerror(-r) : "ok");
        append(ret->evidence, sizeof ret->evidence, s);
        if (r >= 0)
                ret->mechanism = RESOURCE_MECHANISM_RLIMIT;
}

void resources_probe_all(const Config *c, const char *data_dir, int data_fd, ResourceStatus ret[_RESOURCE_MAX]) {
        CgroupLayout *l = calloc(1, sizeof *l);
        int r;

        for (size_t i = 0; i < _RESOURCE_MAX; i++)
                ret[i] = (ResourceStatus) { .mechanism = RESOURCE_MECHANISM_NONE };
        r = l ? hostprobe_cgroups(l) : -ENOMEM;
        if (r < 0) {
                char s[128];
                (void) bsprintf(s, sizeof s, "cannot read the cgroup layout: %s", strerror(-r));
                for (size_t i = 0; i < _RESOURCE_MAX; i++)
                        append(ret[i].evidence, sizeof ret[i].evidence, s);
                if (l)
                        *l = (CgroupLayout) {};
        }
        if (l) {
                json_t *engine = limits_engine_report();
                probe_memory(c, l, engine, &ret[RESOURCE_MEMORY]);
                probe_pids(c, l, engine, &ret[RESOURCE_PIDS]);
                probe_cpu(c, l, engine, &ret[RESOURCE_CPU]);
                json_decref(engine);
        }
        probe_disk(c, data_dir, data_fd, &ret[RESOURCE_DISK]);
        probe_open_files(c, &ret[RESOURCE_OPEN_FILES]);
        free(l);
}

/* The probe says what the host offers; the spawner says what it really set up for the
 * sandboxes (its limit cgroups). Memory and pids go by the spawner: a controller it does not
 * use is left to the sampling supervisor, which is started here for exactly those. */
static void reconcile(Daemon *d, ResourceKind k, CgroupController c, SamplerResource sr, SamplerOptions *so) {
        ResourceStatus *st = &probed[k];
        SpawnerInfo info;
        char s[400];

        if (!d->spawner) {
                st->mechanism = RESOURCE_MECHANISM_NONE;
                append(st->evidence, sizeof st->evidence, "commands cannot run on this worker: nothing to limit");
                return;
        }
        spawner_get_info(d->spawner, &info);
        if (info.limits_mode != CGROUP_LIMITS_NONE && info.limits_controllers[c]) {
                if (st->mechanism != RESOURCE_MECHANISM_CGROUP_V1 && st->mechanism != RESOURCE_MECHANISM_CGROUP_V2) {
                        (void) bsprintf(s, sizeof s, "but the launch helper's sandbox cgroups do have the %s controller",
                                        cgroup_controller_to_string(c));
                        append(st->evidence, sizeof st->evidence, s);
                }
                st->mechanism = info.limits_mode == CGROUP_LIMITS_V2 ? RESOURCE_MECHANISM_CGROUP_V2
                                                                       : RESOURCE_MECHANISM_CGROUP_V1;
                return;
        }
        if (st->mechanism != RESOURCE_MECHANISM_SAMPLED) {
                (void) bsprintf(s, sizeof s, "the launch helper has no %s cgroup for sandboxes (%s)",
                                cgroup_controller_to_string(c), isempty(info.limits_error) ? "not set up" : info.limits_error);
                append(st->evidence, sizeof st->evidence, s);
                append(st->evidence, sizeof st->evidence, sr == SAMPLER_MEMORY ? SAMPLED_MEMORY : SAMPLED_PIDS);
                st->mechanism = RESOURCE_MECHANISM_SAMPLED;
        }
        so->enforce[sr] = true;
}

int resources_probe(Daemon *d) {
        const Config *c = &d->config;
        SamplerOptions so = {
                .uid_start = (uint32_t) c->uid_start,
                .uid_end = (uint32_t) c->uid_end,
                .interval_usec = c->sample_interval_ms * USEC_PER_MSEC,
                .memory_bytes = c->memory_limit_bytes,
                .processes = c->max_processes,
        };
        int r;

        resources_probe_all(c, d->data_dir, d->data_fd, probed);
        reconcile(d, RESOURCE_MEMORY, CGROUP_MEMORY, SAMPLER_MEMORY, &so);
        reconcile(d, RESOURCE_PIDS, CGROUP_PIDS, SAMPLER_PIDS, &so);
        probed_set = true;
        r = sampler_start(&so);
        if (r < 0) {
                /* Then nothing limits them: say so rather than "sampled". */
                for (ResourceKind k = RESOURCE_MEMORY; k <= RESOURCE_PIDS; k++)
                        if (probed[k].mechanism == RESOURCE_MECHANISM_SAMPLED) {
                                char s[128];
                                (void) bsprintf(s, sizeof s, "the sampling supervisor could not start: %s", strerror(-r));
                                append(probed[k].evidence, sizeof probed[k].evidence, s);
                                probed[k].mechanism = k == RESOURCE_PIDS ? RESOURCE_MECHANISM_RLIMIT : RESOURCE_MECHANISM_NONE;
                        }
                return r;
        }
        if (sampler_active())
                log_info("Sampling supervisor: every %" PRIu64 " ms for%s%s (no cgroup limits them here).",
                         c->sample_interval_ms, so.enforce[SAMPLER_MEMORY] ? " memory" : "",
                         so.enforce[SAMPLER_PIDS] ? " processes" : "");
        return 0;
}

static json_t *entry_json(ResourceMechanism m, const char *limit_text, const char *evidence) {
        json_t *limit = NULL;
        uint64_t n;

        if (limit_text && limit_text[0])
                limit = parse_u64(limit_text, &n) >= 0 ? json_integer((json_int_t) n) : json_string(limit_text);
        return json_pack("{s:s, s:o, s:s}", "mechanism", resource_mechanism_to_string(m), "limit", limit ? limit : json_null(),
                         "evidence", evidence);
}

/* Disk: the disk engine's own report (disk.c) says what it enforces now; without one, the
 * start-up probe's finding. */
static json_t *disk_entry(Daemon *d) {
        _cleanup_(json_decrefp) json_t *j = NULL;
        const char *m, *ev;
        ResourceMechanism mech;
        json_int_t quota;
        char limit[32] = "";

        if (!d || disk_report(d, &j) < 0 || !j)
                return entry_json(probed[RESOURCE_DISK].mechanism, probed[RESOURCE_DISK].limit, probed[RESOURCE_DISK].evidence);
        m = json_string_value(json_object_get(j, "mechanism"));
        ev = json_string_value(json_object_get(j, "evidence"));
        quota = json_integer_value(json_object_get(j, "quota_bytes"));
        if (m && streq(m, "project-quota"))
                mech = RESOURCE_MECHANISM_PROJECT_QUOTA;
        else if (m && streq(m, "soft"))
                mech = RESOURCE_MECHANISM_SAMPLED;  /* measured usage, writes refused once over */
        else
                mech = RESOURCE_MECHANISM_NONE;
        if (quota > 0)
                (void) bsprintf(limit, sizeof limit, "%lld", (long long) quota);
        return entry_json(mech, limit, ev && *ev ? ev : probed[RESOURCE_DISK].evidence);
}

json_t *resources_report_json(Daemon *d) {
        json_t *o = json_object();

        if (!o || !probed_set)
                return o;
        for (size_t i = 0; i < _RESOURCE_MAX; i++) {
                const ResourceStatus *s = &probed[i];
                (void) json_object_set_new(o, kind_names[i],
                                           i == RESOURCE_DISK ? disk_entry(d) : entry_json(s->mechanism, s->limit, s->evidence));
        }
        json_t *sampler = sampler_report_json();
        if (sampler)
                (void) json_object_set_new(o, "sampler", sampler);
        return o;
}
