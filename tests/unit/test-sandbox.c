/* SPDX-License-Identifier: MIT */
/* The sandbox manager (src/core/sandbox.c, workspace.c, uid.c, reaper.c) against the real
 * SQLite store in a temp data directory. Needs root (owners, chown). Everything it creates
 * or deletes lives under mkdtemp() directories in /tmp. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "holds.h"
#include "json-util.h"
#include "random-util.h"
#include "reaper.h"
#include "sandbox.h"
#include "string-util.h"
#include "uid.h"
#include "workspace.h"

#define UID_START 1900000000u
#define UID_END 1999999999u

typedef struct Fixture {
        char dir[64];
        char decoy[64];
        Daemon d;
        Principal p;
} Fixture;

static void make_epoch(char epoch[EPOCH_LEN + 1]) {
        assert_int_equal(random_hex(epoch, EPOCH_LEN + 1, EPOCH_LEN / 2), 0);
}

static void register_worker(Fixture *f, char previous[EPOCH_LEN + 1]) {
        WorkerInfo w = {
                .worker_id = f->d.worker_id,
                .worker_epoch = f->d.worker_epoch,
                .endpoint = f->d.worker_endpoint,
                .capabilities_json = "{}",
                .now = now_realtime_usec(),
        };
        assert_int_equal(f->d.store->ops->worker_register(f->d.store, &w, previous), 0);
}

static int open_dir(int at, const char *name) {
        int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        assert_true(fd >= 0);
        return fd;
}

static int setup(void **state) {
        char err[256] = "", previous[EPOCH_LEN + 1];
        Fixture *f;
        int r;

        f = calloc(1, sizeof *f);
        assert_non_null(f);
        (void) strscpy(f->dir, sizeof f->dir, "/tmp/sandloom-test-sandbox-XXXXXX");
        (void) strscpy(f->decoy, sizeof f->decoy, "/tmp/sandloom-test-decoy-XXXXXX");
        assert_non_null(mkdtemp(f->dir));
        assert_non_null(mkdtemp(f->decoy));

        f->d.data_dir = strdup(f->dir);
        f->d.data_fd = open_dir(AT_FDCWD, f->dir);
        assert_int_equal(fchmod(f->d.data_fd, 0711), 0);
        assert_int_equal(mkdirat(f->d.data_fd, "sandboxes", 0711), 0);
        assert_int_equal(mkdirat(f->d.data_fd, "trash", 0700), 0);
        assert_int_equal(mkdirat(f->d.data_fd, "tmp", 0700), 0);
        f->d.sandboxes_fd = open_dir(f->d.data_fd, "sandboxes");
        f->d.trash_fd = open_dir(f->d.data_fd, "trash");
        f->d.tmp_fd = open_dir(f->d.data_fd, "tmp");

        f->d.config.uid_start = UID_START;
        f->d.config.uid_end = UID_END;
        f->d.config.hold_wait_seconds = 1;
        f->d.config.uid_quarantine_seconds = 0;
        f->d.config.max_list_limit = 1000;

        StoreOptions o = { .data_dir = f->dir, .busy_timeout_ms = 5000 };
        r = store_open_sqlite(&o, &f->d.store, err, sizeof err);
        if (r < 0)
                fail_msg("store_open_sqlite: %s (%s)", strerror(-r), err);

        (void) strscpy(f->d.worker_id, sizeof f->d.worker_id, "worker-test");
        make_epoch(f->d.worker_epoch);
        f->d.worker_endpoint = strdup("http://127.0.0.1:8080");
        register_worker(f, previous);
        assert_int_equal(holds_new(&f->d.holds), 0);

        (void) strscpy(f->p.name, sizeof f->p.name, "admin");
        (void) strscpy(f->p.tenant, sizeof f->p.tenant, "default");
        f->p.admin = true;

        /* the decoy: what a planted symlink points at; it must survive everything */
        int dfd = open_dir(AT_FDCWD, f->decoy);
        int cfd = openat(dfd, "canary", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        assert_true(cfd >= 0);
        assert_int_equal(write(cfd, "canary", 6), 6);
        close(cfd);
        assert_int_equal(mkdirat(dfd, "canary_dir", 0755), 0);
        close(dfd);

        *state = f;
        return 0;
}

static void remove_tree(const char *path) {
        _cleanup_close_ int tmp = open_dir(AT_FDCWD, "/tmp");
        _cleanup_close_ int scratch = -EBADF;
        const char *name = strrchr(path, '/') + 1;
        char scratch_name[64];

        /* Our own deleter (never follows links); deep parts go to a scratch dir next to the
         * tree, which is then emptied too. */
        assert_true(startswith(path, "/tmp/sandloom-test-"));
        (void) bsprintf(scratch_name, sizeof scratch_name, "sandloom-test-scratch-%d", (int) getpid());
        (void) mkdirat(tmp, scratch_name, 0700);
        scratch = open_dir(tmp, scratch_name);
        (void) workspace_delete_tree(scratch, tmp, name);
        (void) workspace_empty_trash(scratch);
        (void) unlinkat(tmp, scratch_name, AT_REMOVEDIR);
}

static int teardown(void **state) {
        Fixture *f = *state;

        reaper_stop(f->d.reaper);
        store_close(f->d.store);
        holds_free(f->d.holds);
        close(f->d.sandboxes_fd);
        close(f->d.trash_fd);
        close(f->d.tmp_fd);
        close(f->d.data_fd);
        remove_tree(f->dir);
        remove_tree(f->decoy);
        free(f->d.data_dir);
        free(f->d.worker_endpoint);
        free(f);
        return 0;
}

static void resolve_ok(Fixture *f, const char *id, const char *scope, SandboxRecord *ret) {
        Error e = ERROR_INIT;
        int r = sandbox_resolve(&f->d, &f->p, id, scope, NULL, ret, &e);
        if (r < 0)
                fail_msg("resolve %s: %s %s", id, e.code ? e.code : "?", e.message);
}

static void connect_ok(Fixture *f, const char *id, uint64_t generation, SandboxRecord *ret) {
        Error e = ERROR_INIT;
        int r = sandbox_connect(&f->d, &f->p, id, generation, ret, &e);
        if (r < 0)
                fail_msg("connect %s: %s %s", id, e.code ? e.code : "?", e.message);
}

static void assert_dir(int at, const char *path, uid_t uid, mode_t mode) {
        struct stat st;

        assert_int_equal(fstatat(at, path, &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_true(S_ISDIR(st.st_mode));
        assert_int_equal(st.st_uid, uid);
        assert_int_equal(st.st_gid, (gid_t) uid);
        assert_int_equal(st.st_mode & 07777, mode);
}

static bool exists_at(int at, const char *path) {
        struct stat st;
        return fstatat(at, path, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static void test_resolve_is_idempotent_in_the_same_scope(void **state) {
        Fixture *f = *state;
        SandboxRecord a, b;

        resolve_ok(f, "sbx-1", "scope-a", &a);
        assert_int_equal(a.status, SANDBOX_ASSIGNED);
        assert_true(a.uid >= UID_START && a.uid <= UID_END);
        assert_string_equal(a.profile, "default");
        assert_true(workspace_id_is_valid(a.internal_id));
        assert_true(workspace_id_is_valid(a.lifecycle_id));
        assert_string_equal(a.worker_id, "worker-test");

        resolve_ok(f, "sbx-1", "scope-a", &b);
        assert_int_equal(b.generation, a.generation);
        assert_int_equal(b.uid, a.uid);
        assert_string_equal(b.internal_id, a.internal_id);
        assert_string_equal(b.lifecycle_id, a.lifecycle_id);
}

static void test_resolve_in_another_scope_is_a_mismatch(void **state) {
        Fixture *f = *state;
        SandboxRecord a, b;
        Error e = ERROR_INIT;

        resolve_ok(f, "sbx-1", "scope-a", &a);
        assert_true(sandbox_resolve(&f->d, &f->p, "sbx-1", "scope-b", NULL, &b, &e) < 0);
        assert_int_equal(e.status, 409);
        assert_string_equal(e.code, "SANDBOX_SCOPE_MISMATCH");
}

static void test_resolve_with_an_exhausted_uid_range_is_503(void **state) {
        Fixture *f = *state;
        SandboxRecord a, b;
        Error e = ERROR_INIT;

        f->d.config.uid_start = f->d.config.uid_end = 1950000000u;
        resolve_ok(f, "only-one", "s", &a);
        assert_int_equal(a.uid, 1950000000u);
        assert_true(sandbox_resolve(&f->d, &f->p, "second", "s", NULL, &b, &e) < 0);
        assert_int_equal(e.status, 503);
        assert_string_equal(e.code, "SANDBOX_UID_EXHAUSTED");
}

static void test_connect_creates_the_layout_with_owners_and_modes(void **state) {
        Fixture *f = *state;
        SandboxRecord a, c, again;
        _cleanup_close_ int sfd = -EBADF;

        resolve_ok(f, "sbx-1", "scope", &a);
        assert_false(exists_at(f->d.sandboxes_fd, a.internal_id)); /* resolve alone makes no directory */
        connect_ok(f, "sbx-1", a.generation, &c);
        assert_int_equal(c.status, SANDBOX_READY);
        assert_true(c.connected_at > 0);

        sfd = open_dir(f->d.sandboxes_fd, a.internal_id);
        assert_dir(f->d.sandboxes_fd, a.internal_id, 0, 0700);
        assert_dir(sfd, "fs", 0, 0755);
        assert_dir(sfd, "fs/workspace", a.uid, 0700);
        assert_dir(sfd, "fs/home", 0, 0755);
        assert_dir(sfd, "fs/home/sandbox", a.uid, 0700);
        assert_dir(sfd, "fs/cache", a.uid, 0700);
        assert_dir(sfd, "fs/envs", a.uid, 0700);

        /* connecting again is idempotent */
        connect_ok(f, "sbx-1", a.generation, &again);
        assert_int_equal(again.status, SANDBOX_READY);
        assert_int_equal(again.generation, a.generation);
}

static void test_record_json_has_the_wire_fields_and_no_internals(void **state) {
        Fixture *f = *state;
        _cleanup_json_ json_t *j = NULL;
        _cleanup_free_ char *text = NULL;
        SandboxRecord a;

        resolve_ok(f, "sbx-json", "scope", &a);
        j = sandbox_record_json(&f->d, &a);
        assert_non_null(j);
        assert_string_equal(json_string_value(json_object_get(j, "sandbox_id")), "sbx-json");
        assert_string_equal(json_string_value(json_object_get(j, "status")), "ASSIGNED");
        assert_string_equal(json_string_value(json_object_get(j, "storage_mode")), "local");
        assert_string_equal(json_string_value(json_object_get(j, "worker_endpoint")), "http://127.0.0.1:8080");
        assert_int_equal(json_integer_value(json_object_get(j, "generation")), (json_int_t) a.generation);
        assert_int_equal(json_integer_value(json_object_get(j, "sandbox_uid")), (json_int_t) a.uid);
        assert_true(json_is_array(json_object_get(j, "templates")));
        assert_true(json_is_string(json_object_get(j, "created_at")));
        assert_true(json_is_null(json_object_get(j, "connected_at")));
        assert_true(json_is_null(json_object_get(j, "released_at")));
        assert_null(json_object_get(j, "internal_id"));
        text = json_dumps(j, 0);
        assert_non_null(text);
        assert_null(strstr(text, a.internal_id));
        assert_null(strstr(text, f->dir));
}

static void test_stale_generation_is_refused(void **state) {
        Fixture *f = *state;
        SandboxRecord a, c;
        SandboxHandle *h = NULL;
        Error e = ERROR_INIT;

        resolve_ok(f, "sbx-1", "scope", &a);
        assert_true(sandbox_connect(&f->d, &f->p, "sbx-1", a.generation + 1, &c, &e) < 0);
        assert_int_equal(e.status, 409);
        assert_string_equal(e.code, "STALE_SANDBOX_ROUTE");

        e = (Error) ERROR_INIT;
        assert_true(sandbox_open(&f->d, &f->p, "sbx-1", a.generation, HOLD_FILE_READ, "/workspace", NULL, &h, &e) <
                    0);
        assert_string_equal(e.code, "SANDBOX_NOT_READY");
        assert_int_equal(e.status, 409);

        connect_ok(f, "sbx-1", a.generation, &c);
        e = (Error) ERROR_INIT;
        assert_true(sandbox_open(&f->d, &f->p, "sbx-1", a.generation + 7, HOLD_FILE_READ, "/workspace", NULL, &h,
                                 &e) < 0);
        assert_int_equal(e.status, 409);
        assert_string_equal(e.code, "STALE_SANDBOX_GENERATION");
        assert_null(h);

        e = (Error) ERROR_INIT;
        assert_int_equal(sandbox_open(&f->d, &f->p, "sbx-1", a.generation, HOLD_FILE_READ, "/workspace", NULL, &h, &e),
                         0);
        assert_non_null(h);
        assert_true(exists_at(h->fs_fd, "workspace"));
        assert_true(exists_at(h->fs_fd, "home/sandbox"));
        assert_int_equal(h->record.status, SANDBOX_READY);
        sandbox_handle_touch(h);
        sandbox_handle_close(h);

        SandboxRecord after;
        assert_int_equal(sandbox_get(&f->d, &f->p, "sbx-1", &after, &e), 0);
        assert_int_equal(after.content_version, c.content_version + 1);

        e = (Error) ERROR_INIT;
        assert_true(sandbox_open(&f->d, &f->p, "nope", 1, HOLD_FILE_READ, "/workspace", NULL, &h, &e) < 0);
        assert_int_equal(e.status, 404);
        assert_string_equal(e.code, "SANDBOX_NOT_FOUND");
}

static void test_another_tenant_sees_nothing(void **state) {
        Fixture *f = *state;
        Principal other = { .name = "bob" };
        SandboxRecord a, x;
        SandboxHandle *h = NULL;
        _cleanup_json_ json_t *list = NULL;
        Error e = ERROR_INIT;
        bool known = true;

        (void) strscpy(other.tenant, sizeof other.tenant, "tenant-b");
        resolve_ok(f, "sbx-1", "scope", &a);
        connect_ok(f, "sbx-1", a.generation, &x);

        assert_true(sandbox_get(&f->d, &other, "sbx-1", &x, &e) < 0);
        assert_int_equal(e.status, 404);
        e = (Error) ERROR_INIT;
        assert_true(sandbox_open(&f->d, &other, "sbx-1", a.generation, HOLD_FILE_READ, "/workspace", NULL, &h, &e) <
                    0);
        assert_int_equal(e.status, 404);
        e = (Error) ERROR_INIT;
        assert_int_equal(sandbox_list(&f->d, &other, NULL, SANDBOX_FILTER_ANY, 100, 0, &list, &e), 0);
        assert_int_equal(json_array_size(json_object_get(list, "sandboxes")), 0);
        assert_int_equal(json_integer_value(json_object_get(list, "total")), 0);
        assert_int_equal(sandbox_release(&f->d, &other, "sbx-1", NULL, &known, &e), 0);
        assert_false(known);
        /* still ours, still live */
        assert_int_equal(sandbox_get(&f->d, &f->p, "sbx-1", &x, &e), 0);
        assert_int_equal(x.status, SANDBOX_READY);
}

static void test_list_filters_and_pages(void **state) {
        Fixture *f = *state;
        _cleanup_json_ json_t *all = NULL, *scoped = NULL, *page = NULL, *live = NULL, *released = NULL;
        SandboxRecord a;
        Error e = ERROR_INIT;
        bool known;

        resolve_ok(f, "a-1", "s1", &a);
        resolve_ok(f, "a-2", "s1", &a);
        resolve_ok(f, "b-1", "s2", &a);
        assert_int_equal(sandbox_release(&f->d, &f->p, "a-2", NULL, &known, &e), 0);

        assert_int_equal(sandbox_list(&f->d, &f->p, NULL, SANDBOX_FILTER_ANY, 100, 0, &all, &e), 0);
        assert_int_equal(json_integer_value(json_object_get(all, "total")), 3);
        assert_false(json_is_true(json_object_get(all, "has_more")));

        assert_int_equal(sandbox_list(&f->d, &f->p, NULL, SANDBOX_FILTER_LIVE, 100, 0, &live, &e), 0);
        assert_int_equal(json_integer_value(json_object_get(live, "total")), 2);

        assert_int_equal(sandbox_list(&f->d, &f->p, NULL, SANDBOX_RELEASED, 100, 0, &released, &e), 0);
        assert_int_equal(json_array_size(json_object_get(released, "sandboxes")), 1);

        assert_int_equal(sandbox_list(&f->d, &f->p, "s1", SANDBOX_FILTER_ANY, 100, 0, &scoped, &e), 0);
        assert_int_equal(json_integer_value(json_object_get(scoped, "total")), 2);

        assert_int_equal(sandbox_list(&f->d, &f->p, NULL, SANDBOX_FILTER_ANY, 1, 1, &page, &e), 0);
        assert_int_equal(json_array_size(json_object_get(page, "sandboxes")), 1);
        assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(page, "sandboxes"), 0),
                                                              "sandbox_id")),
                            "a-2"); /* ordered by sandbox_id */
        assert_true(json_is_true(json_object_get(page, "has_more")));
}

/* Plants, inside the sandbox's workspace, what a hostile sandbox could leave behind:
 * symlinks to a decoy outside, a FIFO, a socket, a chmod 000 directory with content, and a
 * tree deeper than one deletion walk goes. */
static void plant_hostile_tree(Fixture *f, const SandboxRecord *rec) {
        _cleanup_close_ int ws = -EBADF, locked = -EBADF, fd = -EBADF;
        char target[128];
        int cur;

        (void) bsprintf(target, sizeof target, "%s/fs/workspace", rec->internal_id);
        ws = open_dir(f->d.sandboxes_fd, target);

        fd = openat(ws, "file", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, "data", 4), 4);
        assert_int_equal(fchown(fd, rec->uid, rec->uid), 0);
        assert_int_equal(symlinkat(f->decoy, ws, "to_decoy_dir"), 0);
        (void) bsprintf(target, sizeof target, "%s/canary", f->decoy);
        assert_int_equal(symlinkat(target, ws, "to_canary"), 0);
        assert_int_equal(mkfifoat(ws, "fifo", 0600), 0);
        assert_int_equal(mknodat(ws, "sock", S_IFSOCK | 0600, 0), 0);
        assert_int_equal(mkdirat(ws, "locked", 0700), 0);
        locked = open_dir(ws, "locked");
        assert_int_equal(mkdirat(locked, "inner", 0700), 0);
        assert_int_equal(symlinkat(f->decoy, locked, "inner_link"), 0);
        assert_int_equal(fchmod(locked, 0), 0);
        assert_int_equal(fchown(locked, rec->uid, rec->uid), 0);

        cur = dup(ws);
        for (int i = 0; i < 100; i++) {
                int next;
                assert_int_equal(mkdirat(cur, "d", 0700), 0);
                next = open_dir(cur, "d");
                if (i % 10 == 0)
                        assert_int_equal(symlinkat(f->decoy, next, "link"), 0);
                close(cur);
                cur = next;
        }
        close(cur);
}

static void assert_decoy_intact(Fixture *f) {
        _cleanup_close_ int dfd = open_dir(AT_FDCWD, f->decoy);
        char buf[16] = "";
        int fd;

        fd = openat(dfd, "canary", O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(read(fd, buf, sizeof buf - 1), 6);
        assert_string_equal(buf, "canary");
        close(fd);
        assert_true(exists_at(dfd, "canary_dir"));
        assert_true(exists_at(AT_FDCWD, "/tmp"));
}

static bool trash_is_empty(Fixture *f) {
        _cleanup_close_ int fd = openat(f->d.trash_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fdopendir(fd);
        struct dirent *de;
        bool empty = true;

        assert_non_null(d);
        fd = -EBADF; /* owned by d */
        while ((de = readdir(d)))
                if (!streq(de->d_name, ".") && !streq(de->d_name, ".."))
                        empty = false;
        closedir(d);
        return empty;
}

static size_t quarantined_count(Fixture *f) {
        uint32_t uids[16];
        size_t n = 0;

        assert_int_equal(f->d.store->ops->uid_list_quarantined(f->d.store, now_realtime_usec() + 3600 * USEC_PER_SEC,
                                                                uids, 16, &n),
                         0);
        return n;
}

static void test_release_moves_aside_and_the_reaper_deletes_without_following_links(void **state) {
        Fixture *f = *state;
        SandboxRecord a, c, after;
        char trashname[80];
        Error e = ERROR_INIT;
        bool known = false;
        int i;

        resolve_ok(f, "sbx-1", "scope", &a);
        connect_ok(f, "sbx-1", a.generation, &c);
        plant_hostile_tree(f, &a);

        assert_int_equal(sandbox_release(&f->d, &f->p, "sbx-1", "test", &known, &e), 0);
        assert_true(known);
        assert_false(exists_at(f->d.sandboxes_fd, a.internal_id));
        (void) bsprintf(trashname, sizeof trashname, "%s.%s", a.internal_id, a.lifecycle_id);
        assert_true(exists_at(f->d.trash_fd, trashname));

        assert_int_equal(sandbox_get(&f->d, &f->p, "sbx-1", &after, &e), 0);
        assert_int_equal(after.status, SANDBOX_RELEASED);
        assert_true(after.released_at > 0);
        assert_int_equal(quarantined_count(f), 1);

        /* releasing again: still RELEASED, known */
        assert_int_equal(sandbox_release(&f->d, &f->p, "sbx-1", NULL, &known, &e), 0);
        assert_true(known);

        /* the reaper deletes the tree (quarantine is 0 here), then frees the uid */
        assert_int_equal(reaper_start(&f->d, &f->d.reaper), 0);
        for (i = 0; i < 2000 && !(trash_is_empty(f) && quarantined_count(f) == 0); i++) {
                reaper_kick(f->d.reaper);
                usleep(10 * 1000);
        }
        assert_true(trash_is_empty(f));
        assert_int_equal(quarantined_count(f), 0);
        assert_decoy_intact(f);
}

static void test_release_of_an_unknown_id_is_not_an_error(void **state) {
        Fixture *f = *state;
        Error e = ERROR_INIT;
        bool known = true;

        assert_int_equal(sandbox_release(&f->d, &f->p, "never-was", NULL, &known, &e), 0);
        assert_false(known);
        assert_false(error_is_set(&e));
}

static void test_release_waits_for_a_hold_then_gives_busy(void **state) {
        Fixture *f = *state;
        SandboxRecord a, c;
        SandboxHandle *h = NULL, *h2 = NULL;
        Error e = ERROR_INIT;
        bool known = false;

        resolve_ok(f, "sbx-1", "scope", &a);
        connect_ok(f, "sbx-1", a.generation, &c);
        assert_int_equal(sandbox_open(&f->d, &f->p, "sbx-1", a.generation, HOLD_FILE_READ, "/workspace/x", NULL, &h, &e),
                         0);
        /* readers share */
        assert_int_equal(sandbox_open(&f->d, &f->p, "sbx-1", a.generation, HOLD_FILE_READ, "/workspace/x", NULL, &h2,
                                      &e),
                         0);
        sandbox_handle_close(h2);

        assert_true(sandbox_release(&f->d, &f->p, "sbx-1", NULL, &known, &e) < 0);
        assert_int_equal(e.status, 409);
        assert_string_equal(e.code, "SANDBOX_BUSY");
        assert_int_equal(sandbox_get(&f->d, &f->p, "sbx-1", &c, &e), 0);
        assert_int_equal(c.status, SANDBOX_READY); /* nothing changed */

        sandbox_handle_close(h);
        e = (Error) ERROR_INIT;
        assert_int_equal(sandbox_release(&f->d, &f->p, "sbx-1", NULL, &known, &e), 0);
        assert_true(known);
        assert_int_equal(holds_active(f->d.holds), 0);
}

typedef struct Racer {
        Fixture *f;
        uint64_t generation;
        int result;
        Error e;
        SandboxHandle *h;
} Racer;

static void *release_thread(void *arg) {
        Racer *r = arg;
        bool known;
        r->result = sandbox_release(&r->f->d, &r->f->p, "sbx-1", NULL, &known, &r->e);
        return NULL;
}

static void *open_thread(void *arg) {
        Racer *r = arg;
        r->result = sandbox_open(&r->f->d, &r->f->p, "sbx-1", r->generation, HOLD_FILE_WRITE, "/workspace/y", NULL,
                                 &r->h, &r->e);
        return NULL;
}

static void test_open_queued_behind_a_release_sees_it_released(void **state) {
        Fixture *f = *state;
        SandboxRecord a, c;
        SandboxHandle *h = NULL;
        Racer rel = { .f = f }, op = { .f = f };
        pthread_t t1, t2;
        Error e = ERROR_INIT;
        int i;

        f->d.config.hold_wait_seconds = 30;
        resolve_ok(f, "sbx-1", "scope", &a);
        connect_ok(f, "sbx-1", a.generation, &c);
        assert_int_equal(sandbox_open(&f->d, &f->p, "sbx-1", a.generation, HOLD_FILE_READ, "/workspace/x", NULL, &h, &e),
                         0);

        assert_int_equal(pthread_create(&t1, NULL, release_thread, &rel), 0);
        /* wait until the release is queued for its exclusive hold */
        for (i = 0; i < 10000; i++) {
                Hold *probe = NULL;
                if (holds_acquire(f->d.holds, a.internal_id, HOLD_FILE_READ, "/cache", NULL, 0, &probe) == -EBUSY)
                        break;
                hold_release(probe);
                usleep(1000);
        }
        assert_true(i < 10000);

        op.generation = a.generation;
        assert_int_equal(pthread_create(&t2, NULL, open_thread, &op), 0);
        usleep(100 * 1000); /* let it queue (if it does not, it fails its first check the same way) */
        sandbox_handle_close(h);

        assert_int_equal(pthread_join(t1, NULL), 0);
        assert_int_equal(pthread_join(t2, NULL), 0);
        assert_int_equal(rel.result, 0);
        assert_true(op.result < 0);
        assert_null(op.h);
        assert_int_equal(op.e.status, 404);
        assert_string_equal(op.e.code, "SANDBOX_NOT_FOUND");
}

static void test_resolve_after_release_starts_a_new_lifecycle(void **state) {
        Fixture *f = *state;
        SandboxRecord a, c, b, c2;
        _cleanup_close_ int ws = -EBADF;
        char path[80];
        Error e = ERROR_INIT;
        bool known;

        resolve_ok(f, "sbx-1", "scope", &a);
        connect_ok(f, "sbx-1", a.generation, &c);
        plant_hostile_tree(f, &a);
        assert_int_equal(sandbox_release(&f->d, &f->p, "sbx-1", NULL, &known, &e), 0);

        /* after a release, another scope is fine too */
        resolve_ok(f, "sbx-1", "another-scope", &b);
        assert_int_equal(b.status, SANDBOX_ASSIGNED);
        assert_int_equal(b.generation, a.generation + 1);
        assert_string_not_equal(b.lifecycle_id, a.lifecycle_id);
        assert_string_equal(b.internal_id, a.internal_id);
        assert_int_equal(b.lifecycle_count, 2);
        assert_int_not_equal(b.uid, a.uid); /* the old one is in quarantine */

        e = (Error) ERROR_INIT;
        assert_true(sandbox_connect(&f->d, &f->p, "sbx-1", a.generation, &c2, &e) < 0);
        assert_string_equal(e.code, "STALE_SANDBOX_ROUTE");
        connect_ok(f, "sbx-1", b.generation, &c2);

        /* a fresh, empty workspace owned by the new uid */
        (void) bsprintf(path, sizeof path, "%s/fs/workspace", b.internal_id);
        assert_dir(f->d.sandboxes_fd, path, b.uid, 0700);
        ws = open_dir(f->d.sandboxes_fd, path);
        assert_false(exists_at(ws, "file"));
        assert_false(exists_at(ws, "to_decoy_dir"));
}

static void test_audit_keeps_every_lifecycle(void **state) {
        Fixture *f = *state;
        static const char *const expected[] = { "created", "connected", "releasing", "released", "created" };
        _cleanup_json_ json_t *audit = NULL, *page = NULL, *x = NULL;
        SandboxRecord a, c, b;
        Error e = ERROR_INIT;
        json_t *events;
        bool known;

        resolve_ok(f, "sbx-1", "scope", &a);
        connect_ok(f, "sbx-1", a.generation, &c);
        assert_int_equal(sandbox_release(&f->d, &f->p, "sbx-1", "done here", &known, &e), 0);
        resolve_ok(f, "sbx-1", "scope", &b);

        assert_int_equal(sandbox_audit(&f->d, &f->p, "sbx-1", 100, 0, &audit, &e), 0);
        assert_string_equal(json_string_value(json_object_get(audit, "sandbox_id")), "sbx-1");
        assert_int_equal(json_integer_value(json_object_get(audit, "total")), ELEMENTSOF(expected));
        events = json_object_get(audit, "events");
        assert_int_equal(json_array_size(events), ELEMENTSOF(expected));
        for (size_t i = 0; i < ELEMENTSOF(expected); i++) {
                json_t *ev = json_array_get(events, i);
                assert_string_equal(json_string_value(json_object_get(ev, "event")), expected[i]);
                assert_true(json_is_string(json_object_get(ev, "at")));
                assert_true(json_is_integer(json_object_get(ev, "seq")));
        }
        assert_string_equal(json_string_value(json_object_get(json_array_get(events, 3), "reason")), "done here");
        assert_string_equal(json_string_value(json_object_get(json_array_get(events, 3), "principal")), "admin");
        assert_string_equal(json_string_value(json_object_get(json_array_get(events, 0), "lifecycle_id")),
                            a.lifecycle_id);
        assert_string_equal(json_string_value(json_object_get(json_array_get(events, 4), "lifecycle_id")),
                            b.lifecycle_id);

        assert_int_equal(sandbox_audit(&f->d, &f->p, "sbx-1", 2, 3, &page, &e), 0);
        assert_int_equal(json_array_size(json_object_get(page, "events")), 2);
        assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(page, "events"), 0),
                                                              "event")),
                            "released");

        assert_true(sandbox_audit(&f->d, &f->p, "nope", 10, 0, &x, &e) < 0);
        assert_int_equal(e.status, 404);
}

static void test_recover_reowns_with_the_next_generation_and_files_intact(void **state) {
        Fixture *f = *state;
        char old_epoch[EPOCH_LEN + 1], previous[EPOCH_LEN + 1];
        SandboxRecord a, c, after;
        SandboxHandle *h = NULL;
        Error e = ERROR_INIT;
        int fd;

        resolve_ok(f, "sbx-1", "scope", &a);
        connect_ok(f, "sbx-1", a.generation, &c);
        assert_int_equal(sandbox_open(&f->d, &f->p, "sbx-1", a.generation, HOLD_FILE_WRITE, "/workspace/kept", NULL, &h,
                                      &e),
                         0);
        fd = openat(h->fs_fd, "workspace/kept", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, "kept", 4), 4);
        close(fd);
        sandbox_handle_close(h);
        h = NULL;

        /* a restart: a new epoch for the same worker */
        memcpy(old_epoch, f->d.worker_epoch, sizeof old_epoch);
        make_epoch(f->d.worker_epoch);
        register_worker(f, previous);
        assert_string_equal(previous, old_epoch);
        assert_int_equal(sandbox_recover(&f->d, previous), 1);
        assert_int_equal(sandbox_recover(&f->d, previous), 0); /* nothing left with the old epoch */

        assert_int_equal(sandbox_get(&f->d, &f->p, "sbx-1", &after, &e), 0);
        assert_int_equal(after.generation, a.generation + 1);
        assert_string_equal(after.worker_epoch, f->d.worker_epoch);
        assert_int_equal(after.status, SANDBOX_READY);
        assert_string_equal(after.lifecycle_id, a.lifecycle_id); /* same lifecycle */
        assert_int_equal(after.uid, a.uid);

        e = (Error) ERROR_INIT;
        assert_true(sandbox_open(&f->d, &f->p, "sbx-1", a.generation, HOLD_FILE_READ, "/workspace/kept", NULL, &h, &e) <
                    0);
        assert_string_equal(e.code, "STALE_SANDBOX_GENERATION");
        e = (Error) ERROR_INIT;
        assert_int_equal(sandbox_open(&f->d, &f->p, "sbx-1", after.generation, HOLD_FILE_READ, "/workspace/kept", NULL,
                                      &h, &e),
                         0);
        assert_true(exists_at(h->fs_fd, "workspace/kept"));
        sandbox_handle_close(h);
}

static void test_recover_finishes_a_half_done_release(void **state) {
        Fixture *f = *state;
        SandboxRecord a, c, mid, after;
        char trashname[80];
        Error e = ERROR_INIT;

        resolve_ok(f, "sbx-1", "scope", &a);
        connect_ok(f, "sbx-1", a.generation, &c);
        /* a crash right after the first step of a release */
        assert_int_equal(f->d.store->ops->sandbox_transition(f->d.store, "default", "sbx-1", a.generation,
                                                             SANDBOX_READY, SANDBOX_RELEASING, "releasing", "admin",
                                                             "api", now_realtime_usec(), &mid),
                         0);
        assert_true(exists_at(f->d.sandboxes_fd, a.internal_id));

        assert_int_equal(sandbox_recover(&f->d, ""), 0);
        assert_int_equal(sandbox_get(&f->d, &f->p, "sbx-1", &after, &e), 0);
        assert_int_equal(after.status, SANDBOX_RELEASED);
        assert_false(exists_at(f->d.sandboxes_fd, a.internal_id));
        (void) bsprintf(trashname, sizeof trashname, "%s.%s", a.internal_id, a.lifecycle_id);
        assert_true(exists_at(f->d.trash_fd, trashname));
}

static void test_workspace_create_refuses_a_planted_symlink(void **state) {
        Fixture *f = *state;
        static const char id[] = "0123456789abcdef0123456789abcdef";
        _cleanup_close_ int sfd = -EBADF, fsfd = -EBADF;
        struct stat before, after;

        /* positive control: the same call works on a clean tree, and repairs modes */
        assert_int_equal(workspace_create(f->d.sandboxes_fd, id, 1900000123, NULL), 0);
        sfd = open_dir(f->d.sandboxes_fd, id);
        assert_int_equal(fchmodat(sfd, "fs/workspace", 0777, 0), 0);
        assert_int_equal(workspace_create(f->d.sandboxes_fd, id, 1900000123, &fsfd), 0);
        assert_dir(sfd, "fs/workspace", 1900000123, 0700);
        assert_true(exists_at(fsfd, "cache"));

        /* fs/cache replaced by a symlink to the decoy: refused, the decoy untouched */
        assert_int_equal(stat(f->decoy, &before), 0);
        assert_int_equal(unlinkat(sfd, "fs/cache", AT_REMOVEDIR), 0);
        assert_int_equal(symlinkat(f->decoy, sfd, "fs/cache"), 0);
        assert_true(workspace_create(f->d.sandboxes_fd, id, 1900000123, NULL) < 0);
        assert_int_equal(stat(f->decoy, &after), 0);
        assert_int_equal(after.st_uid, before.st_uid);
        assert_int_equal(after.st_mode, before.st_mode);

        assert_int_equal(workspace_create(f->d.sandboxes_fd, "../../etc", 1900000123, NULL), -EINVAL);
        assert_int_equal(workspace_create(f->d.sandboxes_fd, id, 0, NULL), -EINVAL);
}

static void test_uid_check_finds_a_process_of_the_uid(void **state) {
        const uid_t root[1] = { 0 };
        const uid_t target[1] = { 1999999001 };
        bool found[1] = { false };
        int pipefd[2];
        pid_t pid;
        char c;

        /* positive control: we run as root */
        assert_int_equal(uid_find_processes(root, 1, found), 0);
        assert_true(found[0]);

        found[0] = false;
        assert_int_equal(uid_find_processes(target, 1, found), 0);
        assert_false(found[0]);

        assert_int_equal(pipe2(pipefd, O_CLOEXEC), 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                if (setresgid(target[0], target[0], target[0]) < 0 || setresuid(target[0], target[0], target[0]) < 0)
                        _exit(1);
                (void) write(pipefd[1], "x", 1);
                pause();
                _exit(0);
        }
        close(pipefd[1]);
        assert_int_equal(read(pipefd[0], &c, 1), 1);
        close(pipefd[0]);

        assert_int_equal(uid_find_processes(target, 1, found), 0);
        assert_true(found[0]);

        assert_int_equal(kill(pid, SIGKILL), 0);
        assert_int_equal(waitpid(pid, NULL, 0), pid);
        found[0] = false;
        assert_int_equal(uid_find_processes(target, 1, found), 0);
        assert_false(found[0]);
}

static void test_uid_check_finds_a_file_left_in_the_trash(void **state) {
        Fixture *f = *state;
        const uid_t uids[2] = { 1999999002, 1999999003 };
        bool found[2] = { false, false };
        _cleanup_close_ int dir = -EBADF;
        int fd;

        assert_int_equal(mkdirat(f->d.trash_fd, "x.y", 0700), 0);
        dir = open_dir(f->d.trash_fd, "x.y");
        fd = openat(dir, "left", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        assert_int_equal(fchown(fd, uids[1], uids[1]), 0);
        close(fd);

        assert_int_equal(uid_find_remains(f->d.trash_fd, uids, 2, found), 0);
        assert_false(found[0]);
        assert_true(found[1]);

        assert_true(workspace_empty_trash(f->d.trash_fd) >= 1);
        found[1] = false;
        assert_int_equal(uid_find_remains(f->d.trash_fd, uids, 2, found), 0);
        assert_false(found[0]);
        assert_false(found[1]);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_resolve_is_idempotent_in_the_same_scope, setup, teardown),
                cmocka_unit_test_setup_teardown(test_resolve_in_another_scope_is_a_mismatch, setup, teardown),
                cmocka_unit_test_setup_teardown(test_resolve_with_an_exhausted_uid_range_is_503, setup, teardown),
                cmocka_unit_test_setup_teardown(test_connect_creates_the_layout_with_owners_and_modes, setup, teardown),
                cmocka_unit_test_setup_teardown(test_record_json_has_the_wire_fields_and_no_internals, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stale_generation_is_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_another_tenant_sees_nothing, setup, teardown),
                cmocka_unit_test_setup_teardown(test_list_filters_and_pages, setup, teardown),
                cmocka_unit_test_setup_teardown(test_release_moves_aside_and_the_reaper_deletes_without_following_links,
                                                setup, teardown),
                cmocka_unit_test_setup_teardown(test_release_of_an_unknown_id_is_not_an_error, setup, teardown),
                cmocka_unit_test_setup_teardown(test_release_waits_for_a_hold_then_gives_busy, setup, teardown),
                cmocka_unit_test_setup_teardown(test_open_queued_behind_a_release_sees_it_released, setup, teardown),
                cmocka_unit_test_setup_teardown(test_resolve_after_release_starts_a_new_lifecycle, setup, teardown),
                cmocka_unit_test_setup_teardown(test_audit_keeps_every_lifecycle, setup, teardown),
                cmocka_unit_test_setup_teardown(test_recover_reowns_with_the_next_generation_and_files_intact, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(test_recover_finishes_a_half_done_release, setup, teardown),
                cmocka_unit_test_setup_teardown(test_workspace_create_refuses_a_planted_symlink, setup, teardown),
                cmocka_unit_test_setup_teardown(test_uid_check_finds_a_process_of_the_uid, NULL, NULL),
                cmocka_unit_test_setup_teardown(test_uid_check_finds_a_file_left_in_the_trash, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
