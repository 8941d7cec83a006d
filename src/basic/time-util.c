/* SPDX-License-Identifier: MIT */
#include "time-util.h"

#include <errno.h>
#include <stdio.h>
#include <time.h>

static usec_t now_usec(clockid_t clk) {
        struct timespec ts;
        (void) clock_gettime(clk, &ts);
        return (usec_t) ts.tv_sec * 1000000u + (usec_t) ts.tv_nsec / 1000u;
}

usec_t now_realtime_usec(void) {
        return now_usec(CLOCK_REALTIME);
}

usec_t now_monotonic_usec(void) {
        return now_usec(CLOCK_MONOTONIC);
}

struct timespec monotonic_deadline(usec_t timeout) {
        const usec_t cap = UINT64_C(100) * 365 * 86400 * 1000000u;
        struct timespec ts;
        usec_t t;

        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        if (timeout > cap)
                timeout = cap;
        t = (usec_t) ts.tv_nsec / 1000u + timeout;
        ts.tv_sec += (time_t) (t / 1000000u);
        ts.tv_nsec = (long) ((t % 1000000u) * 1000u);
        return ts;
}

double monotonic_seconds_since(usec_t t0) {
        return (double) (now_monotonic_usec() - t0) / 1e6;
}

int format_timestamp(char *buf, size_t n, usec_t t) {
        time_t sec = (time_t) (t / 1000000u);
        struct tm tm;
        int r;

        if (!gmtime_r(&sec, &tm))
                return -EINVAL;
        r = snprintf(buf, n, "%04d-%02d-%02dT%02d:%02d:%02d.%06uZ", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (unsigned) (t % 1000000u));
        if (r < 0 || (size_t) r >= n)
                return -ENAMETOOLONG;
        return 0;
}
