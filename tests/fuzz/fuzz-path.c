/* SPDX-License-Identifier: MIT */
/* libFuzzer target: files_normalize_path must never crash, never overflow, and whatever it
 * accepts must be canonical, inside one of the four roots, and a fixed point. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "files.h"

static bool inside_a_root(const char *p) {
        static const char *const roots[] = { "/workspace", "/home/sandbox", "/cache", "/envs" };

        for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++) {
                size_t n = strlen(roots[i]);
                if (strncmp(p, roots[i], n) == 0 && (p[n] == '\0' || p[n] == '/'))
                        return true;
        }
        return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char out[PATH_MAX], again[PATH_MAX];
        Error e = ERROR_INIT, e2 = ERROR_INIT;
        char *in;
        size_t len;

        if (size > 2 * PATH_MAX)
                return 0;
        in = malloc(size + 1);
        if (!in)
                return 0;
        memcpy(in, data, size);
        in[size] = '\0';

        if (files_normalize_path(in, size, out, sizeof out, &e) < 0) {
                if (e.status != 400 && e.status != 422)
                        abort();
                free(in);
                return 0;
        }
        len = strlen(out);
        if (out[0] != '/' || len >= PATH_MAX || !inside_a_root(out))
                abort();
        if (len > 1 && out[len - 1] == '/')
                abort();
        if (strstr(out, "//") || strstr(out, "/./") || strstr(out, "/../"))
                abort();
        if (len >= 2 && strcmp(out + len - 2, "/.") == 0)
                abort();
        if (len >= 3 && strcmp(out + len - 3, "/..") == 0)
                abort();
        /* Normalising a canonical path changes nothing. */
        if (files_normalize_path(out, len, again, sizeof again, &e2) < 0 || strcmp(out, again) != 0)
                abort();
        free(in);
        return 0;
}
