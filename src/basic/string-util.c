/* SPDX-License-Identifier: MIT */
#include "string-util.h"

#include <stdio.h>
#include <stdlib.h>

int strscpy(char *dst, size_t n, const char *src) {
        size_t len = strlen(src);

        if (n == 0)
                return -ENAMETOOLONG;
        if (len >= n) {
                memcpy(dst, src, n - 1);
                dst[n - 1] = '\0';
                return -ENAMETOOLONG;
        }
        memcpy(dst, src, len + 1);
        return 0;
}

int bsprintf(char *dst, size_t n, const char *fmt, ...) {
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vsnprintf(dst, n, fmt, ap);
        va_end(ap);
        if (r < 0)
                return -EINVAL;
        if ((size_t) r >= n)
                return -ENAMETOOLONG;
        return 0;
}

char *strprintf(const char *fmt, ...) {
        va_list ap;
        char *s = NULL;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&s, fmt, ap);
        va_end(ap);
        return r < 0 ? NULL : s;
}

bool startswith(const char *s, const char *prefix) {
        return strncmp(s, prefix, strlen(prefix)) == 0;
}

bool endswith(const char *s, const char *suffix) {
        size_t l = strlen(s), k = strlen(suffix);
        return l >= k && memcmp(s + l - k, suffix, k) == 0;
}

bool memeq_consttime(const void *a, size_t alen, const void *b, size_t blen) {
        const unsigned char *x = a, *y = b;
        unsigned char diff = alen != blen;
        size_t n = MAX(alen, blen);

        /* Walk the longer length so timing depends only on that; compare against
         * 0 past the end of the shorter one. */
        for (size_t i = 0; i < n; i++) {
                unsigned char cx = i < alen ? x[i] : 0;
                unsigned char cy = i < blen ? y[i] : 0;
                diff |= cx ^ cy;
        }
        return diff == 0;
}

void strstrip_trailing(char *s) {
        size_t l = strlen(s);
        while (l > 0 && strchr(" \t\r\n", s[l - 1]))
                s[--l] = '\0';
}

void explicit_zero(void *p, size_t n) {
        explicit_bzero(p, n);
}

bool str_in_charset(const char *s, const char *allowed, size_t minlen, size_t maxlen) {
        size_t l = strlen(s);
        if (l < minlen || l > maxlen)
                return false;
        return strspn(s, allowed) == l;
}

bool string_is_printable(const char *s) {
        for (const unsigned char *p = (const unsigned char *) s; *p; p++) {
                if (*p < 0x20 || *p == 0x7f)
                        return false;
                if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)
                        return false;
        }
        return true;
}

void string_unescape_octal(char *s) {
        char *w = s;

        for (char *r = s; *r;) {
                if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' && r[3] >= '0' &&
                    r[3] <= '7') {
                        *w++ = (char) (((r[1] - '0') << 6) | ((r[2] - '0') << 3) | (r[3] - '0'));
                        r += 4;
                } else
                        *w++ = *r++;
        }
        *w = '\0';
}
