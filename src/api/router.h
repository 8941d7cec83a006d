/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"

/* The route table (method + path pattern -> handler) and the matcher. Pure code: no
 * libmicrohttpd, so it is unit-tested on its own.
 *
 * Patterns are absolute paths of literal segments and "{name}" parameters. A parameter
 * matches one non-empty segment (no '/'); a literal segment wins over a parameter at the
 * first position where two matching routes differ, so POST /api/v1/sandboxes/resolve is
 * resolve, never connect with id "resolve". Empty segments ("//", a trailing '/') never
 * match. Parameters are percent-decoded after the match. */

#define ROUTE_PARAMS_MAX 4
#define ROUTE_SEGMENTS_MAX 16

extern const Route router_routes[];
extern const size_t router_routes_count;

typedef struct RouteParam {
        const char *name;          /* points into the route's pattern, not NUL-terminated */
        size_t name_len;
        char *value;               /* percent-decoded, owned */
} RouteParam;

typedef struct RouteMatch {
        const Route *route;
        size_t n_params;
        RouteParam params[ROUTE_PARAMS_MAX];
} RouteMatch;

/* Matches METHOD and PATH (the raw path, without the query string). Returns 0 and fills
 * RET, or:
 *   -ENOENT      no route has this path (404)
 *   -EOPNOTSUPP  the path exists, but not for METHOD (405; see router_allowed_methods)
 *   -EINVAL      a path parameter has an invalid percent-encoding or encodes NUL (422)
 *   -ENOMEM */
int router_match(const char *method, const char *path, RouteMatch *ret);

/* Inline so that users of a RouteMatch (the request) do not pull the route table, and
 * with it every handler, into what they link. */
static inline void route_match_done(RouteMatch *m) {
        if (!m)
                return;
        for (size_t i = 0; i < m->n_params; i++)
                free(m->params[i].value);
        *m = (RouteMatch) {};
}

/* The decoded value of parameter NAME, or NULL. */
static inline const char *route_match_param(const RouteMatch *m, const char *name) {
        size_t len = strlen(name);

        for (size_t i = 0; i < m->n_params; i++)
                if (m->params[i].name_len == len && memcmp(m->params[i].name, name, len) == 0)
                        return m->params[i].value;
        return NULL;
}

/* Writes the methods PATH exists for ("GET, PUT") into BUF, for the Allow header of a 405.
 * Returns how many there are. */
size_t router_allowed_methods(const char *path, char *buf, size_t n);
