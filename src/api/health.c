/* SPDX-License-Identifier: MIT */
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "config.h"
#include "exec.h"
#include "handlers.h"
#include "holds.h"
#include "json-util.h"
#include "resources.h"
#include "spawner.h"
#include "time-util.h"

int handle_health(Request *req) {
        Daemon *d = req_daemon(req);

        return reply_text(req, 200, "text/plain; charset=utf-8", atomic_load(&d->shutting_down) ? "stopping" : "ok");
}

static json_t *disk_report(const Daemon *d) {
        struct statvfs st;
        uint64_t total, avail, free_all;

        if (fstatvfs(d->data_fd, &st) < 0)
                return json_pack("{s:s}", "status", "unknown");
        total = (uint64_t) st.f_blocks * st.f_frsize;
        free_all = (uint64_t) st.f_bfree * st.f_frsize;
        avail = (uint64_t) st.f_bavail * st.f_frsize;
        return json_pack("{s:I, s:I, s:f}", "total_bytes", (json_int_t) total, "free_bytes", (json_int_t) avail,
                         "used_percent",
                         total ? (double) (total - free_all) * 100.0 / (double) total : 0.0);
}

static json_t *config_report(const Config *c) {
        json_t *o = json_object();

        /* Every setting from the one table; secrets only as "(set)"/"(unset)". */
        for (size_t i = 0; o && i < config_settings_count; i++) {
                char *v = config_value_string(c, &config_settings[i]);
                if (v)
                        (void) json_object_set_new(o, config_settings[i].env, json_string_lossy(v, strlen(v)));
                free(v);
        }
        return o;
}

static json_t *store_report(Daemon *d) {
        json_t *j = NULL;

        if (!d->store)
                return json_pack("{s:s}", "status", "unavailable");
        if (d->store->ops->report(d->store, &j) < 0 || !j)
                return json_pack("{s:s, s:s}", "backend", d->store->ops->name, "status", "error");
        return j;
}

/* What is enforced (fixed at start-up), plus the network namespaces alive now. */
static json_t *isolation_report(Daemon *d) {
        json_t *o;
        unsigned contexts;

        if (!d->isolation_report)
                return json_pack("{s:s}", "status", "unavailable");
        o = json_deep_copy(d->isolation_report);
        if (o && d->spawner && spawner_count_contexts(d->spawner, &contexts) >= 0)
                (void) json_object_set_new(o, "sandbox_contexts", json_integer(contexts));
        return o;
}

int handle_healthz(Request *req) {
        Daemon *d = req_daemon(req);
        const char *status = atomic_load(&d->shutting_down) ? "stopping" : "ok";
        char started[TIMESTAMP_MAX];
        usec_t now = now_realtime_usec();

        /* Without the token: liveness and version only. */
        if (!req_principal(req))
                return reply_json(req, 200, json_pack("{s:s, s:s}", "status", status, "version", SANDLOOM_VERSION_STRING));

        (void) format_timestamp(started, sizeof started, d->started_at);
        return reply_json(
                req, 200,
                json_pack("{s:s, s:s, s:s, s:s, s:s?, s:s, s:I, s:o, s:o, s:i, s:o, s:o, s:o, s:o}",
                          "status", status,
                          "version", SANDLOOM_VERSION_STRING,
                          "worker_id", d->worker_id,
                          "worker_epoch", d->worker_epoch,
                          "worker_endpoint", d->worker_endpoint,
                          "started_at", started,
                          "uptime_seconds", (json_int_t) (now > d->started_at ? (now - d->started_at) / USEC_PER_SEC : 0),
                          "store", store_report(d),
                          "disk", disk_report(d),
                          "holds_active", d->holds ? (int) holds_active(d->holds) : 0,
                          "config", config_report(&d->config),
                          "isolation", isolation_report(d),
                          "resource_control", resources_report_json(d),
                          "execs", exec_engine_report(d->execs)));
}
