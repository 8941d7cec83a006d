/* SPDX-License-Identifier: MIT */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>

#include "time-util.h"

static LogLevel min_level = LOG_LEVEL_INFO;
static const char *const level_names[] = { "debug", "info", "warning", "error" };

void log_set_level(LogLevel level) {
        min_level = level;
}

bool log_enabled(LogLevel level) {
        return level >= min_level;
}

void log_emit(LogLevel level, json_t *fields, const char *fmt, ...) {
        char ts[TIMESTAMP_MAX], msg[1024];
        json_t *o;
        char *line;
        va_list ap;

        if (!log_enabled(level)) {
                json_decref(fields);
                return;
        }
        va_start(ap, fmt);
        (void) vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        (void) format_timestamp(ts, sizeof ts, now_realtime_usec());

        o = json_is_object(fields) ? fields : json_object();
        if (!json_is_object(fields))
                json_decref(fields);
        if (!o)
                return;
        json_object_set_new(o, "ts", json_string(ts));
        json_object_set_new(o, "level", json_string(level_names[level]));
        json_object_set_new(o, "msg", json_string(msg));
        line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
        json_decref(o);
        if (!line)
                return;
        /* One write per line so concurrent threads do not interleave. */
        fprintf(stderr, "%s\n", line);
        free(line);
}
