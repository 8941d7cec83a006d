/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <time.h>

typedef uint64_t usec_t;

usec_t now_realtime_usec(void);
usec_t now_monotonic_usec(void);

/* CLOCK_MONOTONIC now + TIMEOUT as a timespec, for pthread_cond_timedwait() on a condition
 * whose clock is CLOCK_MONOTONIC (and sem/ppoll-style deadlines). TIMEOUT is capped at 100
 * years, so that no sum overflows. */
struct timespec monotonic_deadline(usec_t timeout);

/* Seconds from T0 (a now_monotonic_usec() value) to now. */
double monotonic_seconds_since(usec_t t0);

/* Formats a wall-clock time as RFC 3339 UTC with microseconds: 2026-11-29T10:49:11.123456Z.
 * BUF must hold at least 32 bytes. */
int format_timestamp(char *buf, size_t n, usec_t t);
#define TIMESTAMP_MAX 32
