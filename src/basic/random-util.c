/* SPDX-License-Identifier: MIT */
#include "random-util.h"

#include <errno.h>
#include <openssl/rand.h>

int random_bytes(void *p, size_t n) {
        if (n > INT32_MAX)
                return -EINVAL;
        return RAND_bytes(p, (int) n) == 1 ? 0 : -EIO;
}

int random_hex(char *buf, size_t bufsz, size_t nbytes) {
        static const char hex[] = "0123456789abcdef";
        unsigned char raw[64];
        int r;

        if (nbytes > sizeof raw || bufsz < 2 * nbytes + 1)
                return -EINVAL;
        r = random_bytes(raw, nbytes);
        if (r < 0)
                return r;
        for (size_t i = 0; i < nbytes; i++) {
                buf[2 * i] = hex[raw[i] >> 4];
                buf[2 * i + 1] = hex[raw[i] & 15];
        }
        buf[2 * nbytes] = '\0';
        return 0;
}

int random_range_u64(uint64_t lo, uint64_t hi, uint64_t *ret) {
        uint64_t span, v, limit;
        int r;

        if (lo > hi)
                return -EINVAL;
        span = hi - lo + 1;
        if (span == 0) { /* the whole 64-bit range */
                r = random_bytes(&v, sizeof v);
                if (r < 0)
                        return r;
                *ret = v;
                return 0;
        }
        /* Rejection sampling avoids modulo bias. */
        limit = UINT64_MAX - UINT64_MAX % span;
        do {
                r = random_bytes(&v, sizeof v);
                if (r < 0)
                        return r;
        } while (v >= limit);
        *ret = lo + v % span;
        return 0;
}
