/* SPDX-License-Identifier: MIT */
#include "router.h"

#include <errno.h>
#include <string.h>

#include "handlers.h"
#include "macros.h"
#include "string-util.h"
#include "url.h"

#define SBX "/api/v1/sandboxes"

/* Every route of the API. Order does not matter: the most literal match wins. */
const Route router_routes[] = {
        { "GET", "/health", handle_health, NULL, ROUTE_PUBLIC },
        { "GET", "/healthz", handle_healthz, NULL, ROUTE_PUBLIC },

        { "POST", SBX "/resolve", handle_sandbox_resolve, NULL, 0 },
        { "GET", SBX, handle_sandbox_list, NULL, 0 },
        { "GET", SBX "/{id}", handle_sandbox_get, NULL, 0 },
        { "POST", SBX "/{id}", handle_sandbox_connect, NULL, 0 },
        { "GET", SBX "/{id}/audit", handle_sandbox_audit, NULL, 0 },

        /* Exec calls never wait on an HTTP thread: a foreground exec, a queued one and a
         * long-poll are parked (no thread), SSE suspends between chunks. The launch itself
         * (~2 ms) runs inline: the fast path has no thread hand-off before it. */
        { "POST", SBX "/{id}/exec", handle_exec_start, NULL, 0 },
        { "GET", SBX "/{id}/exec/{exec_id}", handle_exec_get, NULL, 0 },
        { "GET", SBX "/{id}/exec/{exec_id}/output", handle_exec_output, NULL, 0 },
        { "GET", SBX "/{id}/exec/{exec_id}/events", handle_exec_events, NULL, 0 },
        { "POST", SBX "/{id}/exec/{exec_id}/cancel", handle_exec_cancel, NULL, 0 },

        /* Whatever takes a sandbox hold may wait for it (SANDBOX_HOLD_WAIT_SECONDS): never on
         * an HTTP thread, which serves other connections too (the one holding the hold may
         * be among them). */
        { "DELETE", SBX "/{id}", handle_sandbox_release, NULL, ROUTE_OFFLOAD },
        { "PUT", SBX "/{id}/files", handle_files_put, NULL, ROUTE_OFFLOAD },
        { "GET", SBX "/{id}/files", handle_files_get, NULL, ROUTE_OFFLOAD },
        { "GET", SBX "/{id}/files/raw", handle_files_raw_get, NULL, ROUTE_OFFLOAD },
        { "PUT", SBX "/{id}/files/raw", handle_files_raw_put, upload_files_raw, ROUTE_UPLOAD },
        { "GET", SBX "/{id}/files/list", handle_files_list, NULL, ROUTE_OFFLOAD },
        { "GET", SBX "/{id}/files/stat", handle_files_stat, NULL, ROUTE_OFFLOAD },
        { "POST", SBX "/{id}/files/mkdir", handle_files_mkdir, NULL, ROUTE_OFFLOAD },
        { "POST", SBX "/{id}/files/delete", handle_files_delete, NULL, ROUTE_OFFLOAD },
        { "POST", SBX "/{id}/files/move", handle_files_move, NULL, ROUTE_OFFLOAD },
        { "GET", SBX "/{id}/files/archive", handle_files_archive_get, NULL, ROUTE_OFFLOAD },
        /* Uploads: upload_begin (takes the hold) runs on the wait pool before the body, the
         * handler on the finish pool after it (see server.c). */
        { "PUT", SBX "/{id}/files/archive", handle_files_archive_put, upload_files_archive,
          ROUTE_UPLOAD | ROUTE_OFFLOAD },
        /* MCP (docs/MCP.md): tools take holds like the files routes; a command still running is parked. */
        { "POST", "/mcp", handle_mcp, NULL, ROUTE_OFFLOAD },
        { "POST", SBX "/mcp/streamable-http", handle_mcp, NULL, ROUTE_OFFLOAD },
};
const size_t router_routes_count = ELEMENTSOF(router_routes);

typedef struct Segment {
        const char *p;
        size_t len;
} Segment;

/* Splits an absolute PATH into its segments. Returns the count, or -1 if PATH is not
 * absolute, has an empty segment (including a trailing '/') or too many segments. */
static int split_path(const char *path, Segment segs[ROUTE_SEGMENTS_MAX]) {
        int n = 0;

        if (path[0] != '/')
                return -1;
        for (const char *p = path + 1;;) {
                size_t len = strcspn(p, "/");
                if (len == 0 || n == ROUTE_SEGMENTS_MAX)
                        return -1;
                segs[n++] = (Segment) { p, len };
                if (p[len] == '\0')
                        return n;
                p += len + 1;
        }
}

static bool segment_is_param(const Segment *s) {
        return s->len >= 3 && s->p[0] == '{' && s->p[s->len - 1] == '}';
}

/* Does ROUTE's pattern match the path segments? Returns a specificity score (higher =
 * more literal segments, earlier ones counting more) or -1. */
static int route_score(const Route *route, const Segment *segs, int n) {
        Segment pat[ROUTE_SEGMENTS_MAX];
        int m, score = 0;

        m = split_path(route->pattern, pat);
        if (m != n)
                return -1;
        for (int i = 0; i < n; i++) {
                if (segment_is_param(&pat[i]))
                        continue;
                if (pat[i].len != segs[i].len || memcmp(pat[i].p, segs[i].p, segs[i].len) != 0)
                        return -1;
                score |= 1 << (ROUTE_SEGMENTS_MAX - 1 - i);
        }
        return score;
}

static int fill_params(const Route *route, const Segment *segs, int n, RouteMatch *ret) {
        Segment pat[ROUTE_SEGMENTS_MAX];
        RouteMatch m = { .route = route };
        int r;

        (void) split_path(route->pattern, pat);
        for (int i = 0; i < n; i++) {
                if (!segment_is_param(&pat[i]))
                        continue;
                if (m.n_params == ROUTE_PARAMS_MAX) {
                        route_match_done(&m);
                        return -E2BIG; /* a bug in the table */
                }
                r = http_percent_decode(segs[i].p, segs[i].len, false, &m.params[m.n_params].value);
                if (r < 0) {
                        route_match_done(&m);
                        return r;
                }
                m.params[m.n_params].name = pat[i].p + 1;
                m.params[m.n_params].name_len = pat[i].len - 2;
                m.n_params++;
        }
        *ret = m;
        return 0;
}

int router_match(const char *method, const char *path, RouteMatch *ret) {
        Segment segs[ROUTE_SEGMENTS_MAX];
        const Route *best = NULL;
        bool path_exists = false;
        int n, best_score = -1;

        n = split_path(path, segs);
        if (n < 0)
                return -ENOENT;
        for (size_t i = 0; i < router_routes_count; i++) {
                const Route *route = &router_routes[i];
                int score = route_score(route, segs, n);

                if (score < 0)
                        continue;
                path_exists = true;
                if (streq(route->method, method) && score > best_score) {
                        best = route;
                        best_score = score;
                }
        }
        if (!best)
                return path_exists ? -EOPNOTSUPP : -ENOENT;
        return fill_params(best, segs, n, ret);
}

size_t router_allowed_methods(const char *path, char *buf, size_t n) {
        static const char *const methods[] = { "GET", "POST", "PUT", "DELETE" };
        Segment segs[ROUTE_SEGMENTS_MAX];
        size_t count = 0, used = 0;
        int nseg;

        if (n > 0)
                buf[0] = '\0';
        nseg = split_path(path, segs);
        if (nseg < 0)
                return 0;
        /* In a fixed order, each method once, whatever the table's order. */
        for (size_t m = 0; m < ELEMENTSOF(methods); m++)
                for (size_t i = 0; i < router_routes_count; i++) {
                        const Route *route = &router_routes[i];

                        if (!streq(route->method, methods[m]) || route_score(route, segs, nseg) < 0)
                                continue;
                        if (used < n && bsprintf(buf + used, n - used, "%s%s", count ? ", " : "", methods[m]) >= 0)
                                used += strlen(buf + used);
                        count++;
                        break;
                }
        return count;
}
