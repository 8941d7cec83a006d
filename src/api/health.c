/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "config.h"
#include "exec.h"
#include "fileio.h"
#include "handlers.h"
#include "holds.h"
#include "json-util.h"
#include "parse-util.h"
#include "resources.h"
#include "string-util.h"
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

/* ---- the daemon's own process (for `sandloom bench idle|memory` against a daemon it cannot see) ---- */

#define PROC_STATUS_MAX (64u * 1024u)
#define PROC_CHILDREN_MAX (1024u * 1024u)      /* one task's children file */
#define PROC_TREE_MAX 100000u                  /* processes walked per report, at most */

/* Appends the children of every thread of PID (from /proc/PID/task/TID/children) to the queue. */
static int queue_children(pid_t pid, pid_t **queue, size_t *n, size_t *alloc) {
        char dir[64];
        DIR *d;
        struct dirent *de;
        int r = 0;

        if (bsprintf(dir, sizeof dir, "/proc/%d/task", (int) pid) < 0)
                return -EINVAL;
        d = opendir(dir);
        if (!d)
                return errno == ENOENT ? 0 : -errno; /* gone meanwhile */
        while (r >= 0 && (de = readdir(d))) {
                _cleanup_free_ char *text = NULL;
                char path[128], *save = NULL;

                if (de->d_name[0] == '.')
                        continue;
                if (bsprintf(path, sizeof path, "%s/%s/children", dir, de->d_name) < 0)
                        continue;
                r = read_full_file_at(AT_FDCWD, path, PROC_CHILDREN_MAX, &text, NULL);
                if (r == -ENOENT || r == -ESRCH) {
                        r = 0; /* the thread or the process ended */
                        continue;
                }
                if (r < 0)
                        break;
                for (char *t = strtok_r(text, " \n", &save); t; t = strtok_r(NULL, " \n", &save)) {
                        uint32_t v;
                        if (parse_u32(t, &v) < 0 || v == 0)
                                continue;
                        if (*n >= PROC_TREE_MAX) {
                                r = -E2BIG;
                                break;
                        }
                        if (*n == *alloc) {
                                size_t a = *alloc ? *alloc * 2 : 256;
                                pid_t *q = reallocarray(*queue, a, sizeof *q);
                                if (!q) {
                                        r = -ENOMEM;
                                        break;
                                }
                                *queue = q;
                                *alloc = a;
                        }
                        (*queue)[(*n)++] = (pid_t) v;
                }
        }
        closedir(d);
        return r;
}

/* Every descendant of this process (the spawner helper, sandbox processes), breadth first. */
static int count_descendants(uint64_t *ret) {
        _cleanup_free_ pid_t *queue = NULL;
        size_t n = 0, alloc = 0;
        char probe[64];
        int r;

        /* The children files need CONFIG_PROC_CHILDREN: without them there is no honest count. */
        if (bsprintf(probe, sizeof probe, "/proc/%d/task/%d/children", (int) getpid(), (int) getpid()) < 0)
                return -EINVAL;
        if (access(probe, R_OK) < 0)
                return -errno;
        r = queue_children(getpid(), &queue, &n, &alloc);
        for (size_t i = 0; r >= 0 && i < n; i++)
                r = queue_children(queue[i], &queue, &n, &alloc);
        if (r < 0)
                return r;
        *ret = n;
        return 0;
}

/* {pid, rss_bytes, threads, children}: what this process costs, from /proc/self (null when unreadable). */
static json_t *process_report(void) {
        _cleanup_free_ char *text = NULL;
        uint64_t rss_kib = 0, threads = 0, children = 0;
        bool have_rss, have_threads, have_children;
        json_t *o;

        have_rss = have_threads = read_full_file_at(AT_FDCWD, "/proc/self/status", PROC_STATUS_MAX, &text, NULL) >= 0;
        have_rss = have_rss && parse_status_field(text, "VmRSS", &rss_kib) >= 0;
        have_threads = have_threads && parse_status_field(text, "Threads", &threads) >= 0;
        have_children = count_descendants(&children) >= 0;
        o = json_pack("{s:i}", "pid", (int) getpid());
        if (!o)
                return NULL;
        (void) json_object_set_new(o, "rss_bytes", have_rss ? json_integer((json_int_t) (rss_kib * 1024)) : json_null());
        (void) json_object_set_new(o, "threads", have_threads ? json_integer((json_int_t) threads) : json_null());
        (void) json_object_set_new(o, "children", have_children ? json_integer((json_int_t) children) : json_null());
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
                json_pack("{s:s, s:s, s:s, s:s, s:s?, s:s, s:I, s:o, s:o, s:i, s:o, s:o, s:o, s:o, s:o?}",
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
                          "execs", exec_engine_report(d->execs),
                          "process", process_report()));
}
