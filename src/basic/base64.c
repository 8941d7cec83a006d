/* SPDX-License-Identifier: MIT */
#include "base64.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "macros.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int base64_encode(const void *data, size_t size, char **ret, size_t *ret_len) {
        const unsigned char *in = data;
        size_t outlen, i, o = 0;
        char *out;

        if (size > (SIZE_MAX - 1) / 4 * 3 - 3)
                return -EFBIG;
        outlen = (size + 2) / 3 * 4;
        out = malloc(outlen + 1);
        if (!out)
                return -ENOMEM;
        for (i = 0; i + 2 < size; i += 3) {
                uint32_t v = (uint32_t) in[i] << 16 | (uint32_t) in[i + 1] << 8 | in[i + 2];
                out[o++] = alphabet[v >> 18 & 63];
                out[o++] = alphabet[v >> 12 & 63];
                out[o++] = alphabet[v >> 6 & 63];
                out[o++] = alphabet[v & 63];
        }
        if (i < size) {
                uint32_t v = (uint32_t) in[i] << 16;
                if (i + 1 < size)
                        v |= (uint32_t) in[i + 1] << 8;
                out[o++] = alphabet[v >> 18 & 63];
                out[o++] = alphabet[v >> 12 & 63];
                out[o++] = i + 1 < size ? alphabet[v >> 6 & 63] : '=';
                out[o++] = '=';
        }
        out[o] = '\0';
        *ret = out;
        if (ret_len)
                *ret_len = o;
        return 0;
}

static int decode_char(char c) {
        if (c >= 'A' && c <= 'Z')
                return c - 'A';
        if (c >= 'a' && c <= 'z')
                return c - 'a' + 26;
        if (c >= '0' && c <= '9')
                return c - '0' + 52;
        if (c == '+')
                return 62;
        if (c == '/')
                return 63;
        return -1;
}

int base64_decode(const char *s, size_t len, size_t max, void **ret, size_t *ret_size) {
        _cleanup_free_ unsigned char *out = NULL;
        size_t pad = 0, outlen, o = 0;

        if (len % 4 != 0)
                return -EINVAL;
        if (len >= 1 && s[len - 1] == '=')
                pad++;
        if (len >= 2 && s[len - 2] == '=')
                pad++;
        outlen = len / 4 * 3 - pad;
        if (outlen > max)
                return -EFBIG;
        out = malloc(outlen + 1);
        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < len; i += 4) {
                int c[4];
                bool last = i + 4 == len;
                for (int k = 0; k < 4; k++) {
                        if (last && s[i + k] == '=' && k >= 4 - (int) pad) {
                                c[k] = 0;
                                continue;
                        }
                        c[k] = decode_char(s[i + k]);
                        if (c[k] < 0)
                                return -EINVAL;
                }
                uint32_t v = (uint32_t) c[0] << 18 | (uint32_t) c[1] << 12 | (uint32_t) c[2] << 6 | (uint32_t) c[3];
                out[o++] = v >> 16 & 255;
                if (!last || pad < 2)
                        out[o++] = v >> 8 & 255;
                if (!last || pad < 1)
                        out[o++] = v & 255;
                /* Non-canonical trailing bits are malformed. */
                if (last && pad == 1 && (c[2] & 3))
                        return -EINVAL;
                if (last && pad == 2 && (c[1] & 15))
                        return -EINVAL;
        }
        out[o] = '\0';
        *ret = TAKE_PTR(out);
        if (ret_size)
                *ret_size = o;
        return 0;
}
