/* SPDX-License-Identifier: MIT */
/* Lexical normalisation of the paths clients send to the files API. A pure function: no
 * filesystem access, fuzzed by tests/fuzz/fuzz-path.c. */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "files-internal.h"
#include "files.h"

static const char *const roots[] = { "/workspace", "/home/sandbox", "/cache", "/envs" };

int files_path_root_index(const char *canon) {
        for (size_t i = 0; i < ELEMENTSOF(roots); i++) {
                size_t n = strlen(roots[i]);

                if (strneq(canon, roots[i], n) && (canon[n] == '\0' || canon[n] == '/'))
                        return (int) i;
        }
        return -1;
}

bool files_path_is_root(const char *canon) {
        for (size_t i = 0; i < ELEMENTSOF(roots); i++)
                if (streq(canon, roots[i]))
                        return true;
        return false;
}

static int invalid(Error *e, const char *msg) {
        return error_set(e, -EINVAL, 422, "SANDBOX_INVALID_REQUEST", "%s", msg);
}

int files_normalize_path(const char *in, size_t inlen, char *out, size_t outsz, Error *e) {
        /* Offsets into BUF where each kept component starts, for "..". A component takes at
         * least two bytes ("/x"), so PATH_MAX/2 + 1 entries are always enough. */
        size_t starts[PATH_MAX / 2 + 1];
        char buf[PATH_MAX];
        size_t len = 0, depth = 0;
        const char *p, *end;
        bool relative;

        if (!in || !out || outsz == 0)
                return -EINVAL;
        if (memchr(in, '\0', inlen))
                return invalid(e, "path contains a NUL byte");
        if (inlen > PATH_MAX - 1)
                return invalid(e, "path is longer than 4095 bytes");

        relative = inlen == 0 || in[0] != '/';
        if (relative) {
                memcpy(buf, "/workspace", 10);
                len = 10;
                starts[depth++] = 0;
        }

        p = in;
        end = in + inlen;
        while (p < end) {
                const char *c;
                size_t n;

                while (p < end && *p == '/')
                        p++;
                if (p >= end)
                        break;
                c = p;
                while (p < end && *p != '/')
                        p++;
                n = (size_t) (p - c);

                if (n > NAME_MAX)
                        return invalid(e, "a path component is longer than 255 bytes");
                if (n == 1 && c[0] == '.')
                        continue;
                if (n == 2 && c[0] == '.' && c[1] == '.') {
                        /* ".." above "/" stays at "/", as the kernel does. */
                        if (depth > 0)
                                len = starts[--depth];
                        continue;
                }
                if (len + 1 + n > PATH_MAX - 1)
                        return invalid(e, "path is longer than 4095 bytes");
                starts[depth++] = len;
                buf[len++] = '/';
                memcpy(buf + len, c, n);
                len += n;
        }
        if (len == 0)
                buf[len++] = '/';
        buf[len] = '\0';

        if (files_path_root_index(buf) < 0)
                return error_set(e, -EPERM, 400, "SANDBOX_PATH_OUTSIDE_WORKSPACE",
                                 "path is outside /workspace, /home/sandbox, /cache and /envs");
        if (len + 1 > outsz)
                return -ENAMETOOLONG;
        memcpy(out, buf, len + 1);
        return 0;
}
