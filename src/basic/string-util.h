/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "macros.h"

/* Copies SRC into DST of size N, always NUL-terminating. Returns -ENAMETOOLONG if it did not fit. */
int strscpy(char *dst, size_t n, const char *src);

/* snprintf that reports truncation: returns -ENAMETOOLONG if the result did not fit. */
int bsprintf(char *dst, size_t n, const char *fmt, ...) _printf_(3, 4);

/* Allocating printf; returns NULL on failure. */
char *strprintf(const char *fmt, ...) _printf_(1, 2);

bool startswith(const char *s, const char *prefix);
bool endswith(const char *s, const char *suffix);

/* Constant-time comparison of two byte strings; lengths may differ (the result is then false). */
bool memeq_consttime(const void *a, size_t alen, const void *b, size_t blen);

/* Removes trailing whitespace (newline from a file) in place. */
void strstrip_trailing(char *s);

/* Zeroes a buffer in a way the compiler cannot remove. */
void explicit_zero(void *p, size_t n);

/* Is every byte of S in the set ALLOWED, and is its length in [MINLEN, MAXLEN]? */
bool str_in_charset(const char *s, const char *allowed, size_t minlen, size_t maxlen);

/* No C0 controls, no DEL, no C1 controls (UTF-8 C2 80..C2 9F): text that is stored and shown
 * back. S is NUL-terminated UTF-8 (the caller has checked it). */
bool string_is_printable(const char *s);

/* Undoes the \ooo escapes of /proc/self/mountinfo (space, tab, newline, backslash) in place. */
void string_unescape_octal(char *s);
