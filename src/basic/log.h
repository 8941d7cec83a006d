/* SPDX-License-Identifier: MIT */
#pragma once

#include <jansson.h>

#include "macros.h"

/* Structured logging for the daemon layer (never from library code): one JSON object per
 * line on stderr. Never pass bodies, tokens or query values. */
typedef enum { LOG_LEVEL_DEBUG, LOG_LEVEL_INFO, LOG_LEVEL_WARNING, LOG_LEVEL_ERROR } LogLevel;

void log_set_level(LogLevel level);
bool log_enabled(LogLevel level);

/* Logs a message built from FMT; FIELDS (may be NULL; stolen) adds structured fields. */
void log_emit(LogLevel level, json_t *fields, const char *fmt, ...) _printf_(3, 4);

#define log_info(...) log_emit(LOG_LEVEL_INFO, NULL, __VA_ARGS__)
#define log_warning(...) log_emit(LOG_LEVEL_WARNING, NULL, __VA_ARGS__)
#define log_error(...) log_emit(LOG_LEVEL_ERROR, NULL, __VA_ARGS__)
#define log_debug(...) log_emit(LOG_LEVEL_DEBUG, NULL, __VA_ARGS__)
