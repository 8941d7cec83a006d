/* SPDX-License-Identifier: MIT */
#include "url.h"

#include <errno.h>
#include <stdlib.h>

#include "macros.h"
#include "utf8.h"

static int hexval(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

int http_percent_decode(const char *s, size_t len, bool plus_is_space, char **ret) {
        _cleanup_free_ char *out = NULL;
        size_t k = 0;

        out = malloc(len + 1);
        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < len; i++) {
                char c = s[i];

                if (c == '%') {
                        int hi, lo;

                        if (i + 2 >= len)
                                return -EINVAL;
                        hi = hexval(s[i + 1]);
                        lo = hexval(s[i + 2]);
                        if (hi < 0 || lo < 0)
                                return -EINVAL;
                        c = (char) (hi << 4 | lo);
                        if (c == '\0')
                                return -EINVAL;
                        i += 2;
                } else if (c == '+' && plus_is_space)
                        c = ' ';
                else if (c == '\0')
                        return -EINVAL;
                out[k++] = c;
        }
        out[k] = '\0';
        if (!utf8_is_valid(out, k))
                return -EINVAL;
        *ret = TAKE_PTR(out);
        return 0;
}
