/* SPDX-License-Identifier: MIT */
#include "parse-util.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <strings.h>

int parse_u64(const char *s, uint64_t *ret) {
        uint64_t v = 0;

        if (!s || !*s || strlen(s) > 20)
                return -EINVAL;
        for (const char *p = s; *p; p++) {
                if (*p < '0' || *p > '9')
                        return -EINVAL;
                unsigned d = (unsigned) (*p - '0');
                if (v > (UINT64_MAX - d) / 10)
                        return -ERANGE;
                v = v * 10 + d;
        }
        *ret = v;
        return 0;
}

int parse_u32(const char *s, uint32_t *ret) {
        uint64_t v;
        int r = parse_u64(s, &v);
        if (r < 0)
                return r;
        if (v > UINT32_MAX)
                return -ERANGE;
        *ret = (uint32_t) v;
        return 0;
}

int parse_bool(const char *s, bool *ret) {
        static const char *const yes[] = { "1", "true", "yes", "on" };
        static const char *const no[] = { "0", "false", "no", "off" };

        for (size_t i = 0; i < 4; i++) {
                if (strcasecmp(s, yes[i]) == 0) {
                        *ret = true;
                        return 0;
                }
                if (strcasecmp(s, no[i]) == 0) {
                        *ret = false;
                        return 0;
                }
        }
        return -EINVAL;
}

int parse_bytes(const char *s, uint64_t *ret) {
        char num[32];
        size_t n = strspn(s, "0123456789");
        const char *suffix = s + n;
        uint64_t v, mult = 1;
        int r;

        if (n == 0 || n >= sizeof num)
                return -EINVAL;
        memcpy(num, s, n);
        num[n] = '\0';
        r = parse_u64(num, &v);
        if (r < 0)
                return r;
        if (*suffix) {
                static const char units[] = "KMGT";
                const char *u = strchr(units, suffix[0] & ~0x20);
                if (!u || suffix[0] == '\0')
                        return -EINVAL;
                for (const char *p = units; p <= u; p++)
                        mult *= 1024;
                suffix++;
                if (*suffix && strcmp(suffix, "iB") != 0 && strcmp(suffix, "B") != 0)
                        return -EINVAL;
        }
        if (v > UINT64_MAX / mult)
                return -ERANGE;
        *ret = v * mult;
        return 0;
}

int parse_double(const char *s, double *ret) {
        char *end = NULL;
        double v;

        if (!s || !*s || strspn(s, "0123456789.") != strlen(s))
                return -EINVAL;
        errno = 0;
        v = strtod(s, &end);
        if (errno != 0 || !end || *end || !isfinite(v) || v < 0)
                return -EINVAL;
        *ret = v;
        return 0;
}

int parse_status_field(const char *text, const char *field, uint64_t *ret) {
        size_t flen = strlen(field);

        for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
                unsigned long long v;

                if (strncmp(l, field, flen) != 0 || l[flen] != ':')
                        continue;
                if (sscanf(l + flen + 1, " %llu", &v) != 1)
                        return -EBADMSG;
                *ret = v;
                return 0;
        }
        return -ENODATA;
}
