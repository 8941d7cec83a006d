/* SPDX-License-Identifier: MIT */
/* The fixture shared by the store's unit tests: a fresh SQLite store in its own temporary
 * directory per test. Include after cmocka.h. */
#pragma once

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "random-util.h"
#include "store.h"
#include "string-util.h"

typedef struct Fixture {
        char dir[64];
        Store *store;
} Fixture;

static Store *open_store(const char *dir) {
        StoreOptions o = { .data_dir = dir, .busy_timeout_ms = 5000 };
        char err[256] = "";
        Store *s = NULL;
        int r;

        r = store_open_sqlite(&o, &s, err, sizeof err);
        if (r < 0)
                fail_msg("store_open_sqlite: %s (%d)", err, r);
        return s;
}

static int setup(void **state) {
        Fixture *f = calloc(1, sizeof *f);

        assert_non_null(f);
        assert_int_equal(strscpy(f->dir, sizeof f->dir, "/tmp/sandloom-test-store-XXXXXX"), 0);
        assert_non_null(mkdtemp(f->dir));
        f->store = open_store(f->dir);
        *state = f;
        return 0;
}

/* Removes the files of the temporary directory (only plain files live there) and it. */
static int teardown(void **state) {
        Fixture *f = *state;
        DIR *d;
        struct dirent *de;

        store_close(f->store);
        d = opendir(f->dir);
        assert_non_null(d);
        while ((de = readdir(d)))
                if (!streq(de->d_name, ".") && !streq(de->d_name, ".."))
                        (void) unlinkat(dirfd(d), de->d_name, 0);
        closedir(d);
        assert_int_equal(rmdir(f->dir), 0);
        free(f);
        return 0;
}

static void new_id(char buf[OPAQUE_ID_LEN + 1]) {
        assert_int_equal(random_hex(buf, OPAQUE_ID_LEN + 1, OPAQUE_ID_LEN / 2), 0);
}
