/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>
#include <stdint.h>

typedef uint64_t usec_t;

usec_t now_realtime_usec(void);
usec_t now_monotonic_usec(void);

/* Seconds from T0 (a now_monotonic_usec() value) to now. */
double monotonic_seconds_since(usec_t t0);

/* Formats a wall-clock time as RFC 3339 UTC with microseconds: 2026-11-29T10:49:11.123456Z.
 * BUF must hold at least 32 bytes. */
int format_timestamp(char *buf, size_t n, usec_t t);
#define TIMESTAMP_MAX 32
