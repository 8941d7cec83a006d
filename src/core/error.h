/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>

#include "macros.h"

/* A domain error on its way to the API boundary: an HTTP status, a stable code for
 * programs and a sentence with context for people. Core functions return a negative
 * errno AND fill an Error when they know what went wrong in domain terms; an Error
 * left unset means "internal", which the API turns into a generic 500/503. */
typedef struct Error {
        unsigned status;         /* 0 = unset */
        const char *code;        /* static string, e.g. "STALE_SANDBOX_GENERATION" */
        char message[512];
} Error;

#define ERROR_INIT { 0 }

/* Fills E (if not NULL and not already set) and returns R (a negative errno), so that
 * `return error_set(e, -ESTALE, 409, "STALE_SANDBOX_GENERATION", "...")` reads naturally. */
int error_set(Error *e, int r, unsigned status, const char *code, const char *fmt, ...) _printf_(5, 6);

static inline bool error_is_set(const Error *e) {
        return e && e->status != 0;
}

/* For an unset error after a failure R: a status and code that say "internal" without
 * leaking host paths (503 for -ENOSPC/-EBUSY-ish resource trouble, else 500). */
void error_fill_internal(Error *e, int r, const char *what);
