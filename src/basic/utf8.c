/* SPDX-License-Identifier: MIT */
#include "utf8.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Checks the sequence starting at S. Returns its length (1..4) when valid; otherwise 0 and
 * *ret_bad = the length of the maximal invalid subpart (the lead byte plus the continuation
 * bytes that were still acceptable), or -1 when S is a valid prefix cut short by the end. */
static int check_sequence(const unsigned char *s, size_t avail, size_t *ret_bad) {
        unsigned char c = s[0];
        int need;
        unsigned char lo = 0x80, hi = 0xBF;

        *ret_bad = 1;
        if (c < 0x80)
                return 1;
        if (c >= 0xC2 && c <= 0xDF)
                need = 2;
        else if (c >= 0xE0 && c <= 0xEF) {
                need = 3;
                if (c == 0xE0)
                        lo = 0xA0; /* no overlongs */
                else if (c == 0xED)
                        hi = 0x9F; /* no surrogates */
        } else if (c >= 0xF0 && c <= 0xF4) {
                need = 4;
                if (c == 0xF0)
                        lo = 0x90;
                else if (c == 0xF4)
                        hi = 0x8F;
        } else
                return 0;

        for (int i = 1; i < need; i++) {
                if ((size_t) i >= avail) {
                        *ret_bad = (size_t) i;
                        return -1;
                }
                unsigned char b = s[i];
                unsigned char l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
                if (b < l || b > h) {
                        *ret_bad = (size_t) i;
                        return 0;
                }
        }
        return need;
}

int utf8_sequence_length(const unsigned char *s, size_t avail) {
        size_t bad;
        return check_sequence(s, avail, &bad);
}

bool utf8_is_valid(const char *s, size_t len) {
        const unsigned char *p = (const unsigned char *) s;
        size_t i = 0;

        while (i < len) {
                int k = utf8_sequence_length(p + i, len - i);
                if (k <= 0)
                        return false;
                i += (size_t) k;
        }
        return true;
}

int utf8_sanitize(const char *s, size_t len, char **ret, size_t *ret_len) {
        const unsigned char *p = (const unsigned char *) s;
        char *out;
        size_t i = 0, o = 0;

        if (len > (SIZE_MAX - 1) / 3)
                return -EFBIG;
        out = malloc(len * 3 + 1);
        if (!out)
                return -ENOMEM;
        while (i < len) {
                size_t bad;
                int k = check_sequence(p + i, len - i, &bad);
                if (k > 0) {
                        memcpy(out + o, p + i, (size_t) k);
                        o += (size_t) k;
                        i += (size_t) k;
                        continue;
                }
                /* One replacement per maximal invalid subpart (Unicode's recommended practice). */
                i += bad;
                memcpy(out + o, "\xEF\xBF\xBD", 3);
                o += 3;
        }
        out[o] = '\0';
        *ret = out;
        *ret_len = o;
        return 0;
}
