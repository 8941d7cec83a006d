/* SPDX-License-Identifier: MIT */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int error_set(Error *e, int r, unsigned status, const char *code, const char *fmt, ...) {
        va_list ap;

        if (!e || e->status != 0)
                return r;
        e->status = status;
        e->code = code;
        va_start(ap, fmt);
        (void) vsnprintf(e->message, sizeof e->message, fmt, ap);
        va_end(ap);
        return r;
}

void error_fill_internal(Error *e, int r, const char *what) {
        if (!e || e->status != 0)
                return;
        switch (-r) {
        case ENOSPC:
        case EDQUOT:
                (void) error_set(e, r, 507, "SANDBOX_STORAGE_FULL", "%s: %s", what, strerror(-r));
                break;
        case EBUSY:
        case EAGAIN:
        case ENOMEM:
                (void) error_set(e, r, 503, "SANDBOX_UNAVAILABLE", "%s: %s", what, strerror(-r));
                break;
        default:
                (void) error_set(e, r, 500, "SANDBOX_INTERNAL_ERROR", "%s: %s", what, strerror(-r));
        }
}
