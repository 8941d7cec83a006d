/* SPDX-License-Identifier: MIT */
/* In-root resolution and the files operations against hostile trees. Needs root.
 *
 * Every test builds a fake sandbox under a fresh mkdtemp() directory:
 *
 *   BASE/sbx/fs/                 root 0755
 *   BASE/sbx/fs/workspace        uid 0755      (+ home/sandbox, cache, envs)
 *   BASE/sbx/fs/home             root 0755
 *   BASE/decoy/                  uid 0755, canary files (owned by the sandbox uid, so only
 *                                path resolution, not permissions, keeps them safe)
 *   BASE/tmp/                    root 0700 (archive spools)
 *
 * Nothing here ever points at a real system path: the "outside" target is the decoy. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "files-internal.h"
#include "files.h"
#include "fsid.h"
#include "random-util.h"
#include "resolve.h"
#include "string-util.h"

#define UID ((uid_t) 1999990001u)
#define N_CANARIES 8

static char base[PATH_MAX], decoy_path[PATH_MAX], fs_path[PATH_MAX];
static int base_fd = -EBADF, fs_fd = -EBADF, ws_fd = -EBADF, decoy_fd = -EBADF, tmp_fd = -EBADF;
static SandboxHandle H;
static bool use_fallback;

typedef struct Canary {
        char rel[64];
        char content[96];
} Canary;
static Canary canaries[N_CANARIES + 2];
static size_t n_canaries;

/* ------------------------------------------------------------------ helpers --- */

static void put_file(int dirfd, const char *name, const char *content, uid_t uid, mode_t mode) {
        int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, content, strlen(content)), (ssize_t) strlen(content));
        assert_int_equal(fchown(fd, uid, uid), 0);
        assert_int_equal(fchmod(fd, mode), 0);
        close(fd);
}

static void put_dir(int dirfd, const char *name, uid_t uid, mode_t mode) {
        assert_int_equal(mkdirat(dirfd, name, mode), 0);
        assert_int_equal(fchownat(dirfd, name, uid, uid, AT_SYMLINK_NOFOLLOW), 0);
        assert_int_equal(fchmodat(dirfd, name, mode, 0), 0);
}

static void put_link(int dirfd, const char *name, const char *target) {
        assert_int_equal(symlinkat(target, dirfd, name), 0);
        assert_int_equal(fchownat(dirfd, name, UID, UID, AT_SYMLINK_NOFOLLOW), 0);
}

static int open_dir(int dirfd, const char *name) {
        int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        assert_true(fd >= 0);
        return fd;
}

static char *slurp_at(int dirfd, const char *name) {
        static char buf[4096];
        int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        ssize_t n;

        if (fd < 0)
                return NULL;
        n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n < 0)
                return NULL;
        buf[n] = '\0';
        return buf;
}

static bool exists_at(int dirfd, const char *name) {
        struct stat st;
        return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static void add_canary(int dirfd, const char *rel, const char *name) {
        Canary *c = &canaries[n_canaries++];
        char hex[17];

        assert_int_equal(random_hex(hex, sizeof hex, 8), 0);
        (void) bsprintf(c->rel, sizeof c->rel, "%s", rel);
        (void) bsprintf(c->content, sizeof c->content, "CANARY-%s-%s", rel, hex);
        put_file(dirfd, name, c->content, UID, 0666);
}

/* Does DATA contain any canary's content? */
static bool holds_canary(const void *data, size_t n) {
        for (size_t i = 0; i < n_canaries; i++)
                if (memmem(data, n, canaries[i].content, strlen(canaries[i].content)))
                        return true;
        return false;
}

static unsigned count_entries(int dirfd) {
        NameList l = { 0 };
        unsigned n;

        assert_int_equal(files_read_names(dirfd, 1000, 1 << 20, &l), 0);
        n = (unsigned) l.n;
        files_name_list_done(&l);
        return n;
}

static void assert_decoy_intact(void) {
        int sub = open_dir(decoy_fd, "sub");

        for (size_t i = 0; i < n_canaries; i++) {
                const char *got = slurp_at(decoy_fd, canaries[i].rel);
                if (!got || !streq(got, canaries[i].content))
                        fail_msg("canary %s was changed or removed", canaries[i].rel);
        }
        assert_int_equal(count_entries(decoy_fd), N_CANARIES + 2);        /* canaries, f, sub */
        assert_int_equal(count_entries(sub), 1);
        close(sub);
}

static void assert_error(int r, const Error *e, unsigned status, const char *code) {
        if (r >= 0)
                fail_msg("expected %u %s, got success", status, code);
        if (e->status != status || !e->code || !streq(e->code, code))
                fail_msg("expected %u %s, got %u %s (%s), r=%d", status, code, e->status, e->code ? e->code : "-",
                         e->message, r);
}

static void assert_no_residue(int dirfd) {
        NameList l = { 0 };

        assert_int_equal(files_read_names(dirfd, 100000, 1 << 24, &l), 0);
        for (size_t i = 0; i < l.n; i++)
                if (startswith(l.names[i], ".sandloom-"))
                        fail_msg("residue left behind: %s", l.names[i]);
        files_name_list_done(&l);
}

/* ------------------------------------------------------------------ fixture --- */

static int fixture_setup(void **state) {
        int sbx, home, sub;

        (void) bsprintf(base, sizeof base, "/tmp/sandloom-test-resolve-XXXXXX");
        assert_non_null(mkdtemp(base));
        base_fd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(base_fd >= 0);
        assert_int_equal(fchmod(base_fd, 0711), 0);        /* traversable by the sandbox uid (naive test) */
        (void) bsprintf(decoy_path, sizeof decoy_path, "%s/decoy", base);
        (void) bsprintf(fs_path, sizeof fs_path, "%s/sbx/fs", base);

        put_dir(base_fd, "sbx", 0, 0711);        /* traversable, so the naive resolver can work at all */
        sbx = open_dir(base_fd, "sbx");
        put_dir(sbx, "fs", 0, 0755);
        fs_fd = open(fs_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        assert_true(fs_fd >= 0);
        {
                int fsd = open_dir(sbx, "fs");
                put_dir(fsd, "workspace", UID, 0755);
                put_dir(fsd, "home", 0, 0755);
                home = open_dir(fsd, "home");
                put_dir(home, "sandbox", UID, 0700);
                put_dir(fsd, "cache", UID, 0755);
                put_dir(fsd, "envs", UID, 0755);
                ws_fd = open_dir(fsd, "workspace");
                close(home);
                close(fsd);
        }
        close(sbx);

        put_dir(base_fd, "decoy", UID, 0777);
        decoy_fd = open_dir(base_fd, "decoy");
        n_canaries = 0;
        for (unsigned i = 0; i < N_CANARIES; i++) {
                char name[32];
                (void) bsprintf(name, sizeof name, "canary-%u", i);
                add_canary(decoy_fd, name, name);
        }
        add_canary(decoy_fd, "f", "f");
        put_dir(decoy_fd, "sub", UID, 0777);
        sub = open_dir(decoy_fd, "sub");
        add_canary(decoy_fd, "sub/g", "g");        /* rel is relative to decoy_fd */
        (void) sub;
        /* add_canary wrote "g" into decoy_fd; move it into sub. */
        assert_int_equal(renameat(decoy_fd, "g", sub, "g"), 0);
        close(sub);

        put_dir(base_fd, "tmp", 0, 0700);
        tmp_fd = open_dir(base_fd, "tmp");

        H = (SandboxHandle) { .record = { .uid = UID }, .fs_fd = fs_fd };
        resolve_force_fallback(use_fallback);
        return 0;
}

static int fixture_teardown(void **state) {
        resolve_force_fallback(false);
        safe_close(ws_fd);
        safe_close(decoy_fd);
        safe_close(tmp_fd);
        safe_close(fs_fd);
        safe_close(base_fd);
        ws_fd = decoy_fd = tmp_fd = fs_fd = base_fd = -EBADF;
        {
                int top = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                assert_true(top >= 0);
                /* fd-relative, never follows a symlink: cannot wander outside BASE. */
                assert_int_equal(files_remove_tree_at(top, strrchr(base, '/') + 1, 64), 0);
                close(top);
        }
        return 0;
}

static int setup_kernel(void **state) {
        use_fallback = false;
        return fixture_setup(state);
}

static int setup_fallback(void **state) {
        use_fallback = true;
        return fixture_setup(state);
}

/* The hostile tree in /workspace. */
static void plant_hostile_links(void) {
        char target[PATH_MAX * 2];
        int real;

        put_dir(ws_fd, "real", UID, 0755);
        real = open_dir(ws_fd, "real");
        put_file(real, "ok", "INSIDE", UID, 0644);
        put_dir(real, "d", UID, 0755);
        close(real);

        put_link(ws_fd, "abs_decoy", decoy_path);                 /* the decoy by absolute host path */
        (void) bsprintf(target, sizeof target, "../../../decoy");   /* fs/workspace/../../../decoy = BASE/decoy */
        put_link(ws_fd, "dotdot_decoy", target);
        {
                /* Enough ".." to reach "/" from anywhere, then the decoy's host path. */
                size_t len = 0;
                for (int i = 0; i < 30; i++)
                        len += (size_t) snprintf(target + len, sizeof target - len, "../");
                (void) snprintf(target + len, sizeof target - len, "%s", decoy_path + 1);
                put_link(ws_fd, "deep_decoy", target);
        }
        put_link(ws_fd, "etc", "/etc");
        put_link(ws_fd, "loop1", "loop2");
        put_link(ws_fd, "loop2", "loop1");
        put_link(ws_fd, "self", "self");
        put_link(ws_fd, "home_link", "/home");
        put_link(ws_fd, "root_link", "/");
        put_link(ws_fd, "up_link", "..");
        put_link(ws_fd, "proc_link", "/proc/self/root");
        put_link(ws_fd, "inside_abs", "/workspace/real");
        put_link(ws_fd, "inside_rel", "real");
        put_link(ws_fd, "cache_link", "/cache");
}

/* ------------------------------------------------------------- fsid guard --- */

static void test_fsid_guard_denies_root_only_file_and_restores(void **state) {
        struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
        struct __user_cap_data_struct before[2], inside[2], after[2];
        gid_t groups_before[64], groups_after[64];
        FsIdSaved ids = FSID_SAVED_INIT;
        long ng_before, ng_after;
        int fd;

        put_file(base_fd, "secret", "root only", 0, 0600);
        /* Positive control: root (with CAP_DAC_OVERRIDE) opens it. */
        fd = openat(base_fd, "secret", O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        close(fd);

        assert_int_equal(syscall(SYS_capget, &hdr, before), 0);
        ng_before = syscall(SYS_getgroups, 64, groups_before);
        assert_true(ng_before >= 0);

        assert_int_equal(fsid_enter(UID, UID, &ids), 0);
        assert_int_equal(fsid_current_uid(), UID);
        assert_int_equal(fsid_current_gid(), UID);
        assert_int_equal(syscall(SYS_getgroups, 0, NULL), 0);
        assert_int_equal(syscall(SYS_capget, &hdr, inside), 0);
        assert_int_equal(inside[0].effective & (1u << CAP_DAC_OVERRIDE), 0);
        assert_int_equal(inside[0].effective & (1u << CAP_DAC_READ_SEARCH), 0);
        assert_int_equal(inside[0].effective & (1u << CAP_FOWNER), 0);
        assert_int_equal(inside[0].effective & (1u << CAP_SYS_RESOURCE), 0);
        assert_int_equal(inside[0].effective & (1u << CAP_CHOWN), 0);
        fd = openat(base_fd, "secret", O_RDONLY | O_CLOEXEC);
        assert_int_equal(fd, -1);
        assert_int_equal(errno, EACCES);
        /* Nesting is refused rather than corrupting the saved state. */
        assert_int_equal(fsid_enter(UID, UID, &ids), -EBUSY);
        fsid_leave(&ids);

        fd = openat(base_fd, "secret", O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        close(fd);
        assert_int_equal(fsid_current_uid(), 0);
        assert_int_equal(fsid_current_gid(), 0);
        assert_int_equal(syscall(SYS_capget, &hdr, after), 0);
        assert_memory_equal(before, after, sizeof before);
        ng_after = syscall(SYS_getgroups, 64, groups_after);
        assert_int_equal(ng_before, ng_after);
        assert_memory_equal(groups_before, groups_after, (size_t) ng_before * sizeof(gid_t));
        /* Leaving twice is harmless. */
        fsid_leave(&ids);
}

typedef struct ThreadProbe {
        atomic_int phase;
        uid_t seen;
} ThreadProbe;

static void *probe_thread(void *arg) {
        ThreadProbe *p = arg;

        while (atomic_load(&p->phase) == 0)
                ;
        p->seen = fsid_current_uid();
        atomic_store(&p->phase, 2);
        return NULL;
}

static void test_fsid_guard_is_per_thread(void **state) {
        FsIdSaved ids = FSID_SAVED_INIT;
        ThreadProbe p = { .seen = 12345 };
        pthread_t t;

        assert_int_equal(pthread_create(&t, NULL, probe_thread, &p), 0);
        assert_int_equal(fsid_enter(UID, UID, &ids), 0);
        atomic_store(&p.phase, 1);
        while (atomic_load(&p.phase) != 2)
                ;
        fsid_leave(&ids);
        assert_int_equal(pthread_join(t, NULL), 0);
        assert_int_equal(p.seen, 0);        /* the other thread kept root's fsuid */
}

static void test_operations_run_as_the_sandbox_uid(void **state) {
        Error e = ERROR_INIT;
        char *data = NULL;
        size_t size;
        struct stat st;

        put_file(ws_fd, "rootfile", "root only", 0, 0600);
        assert_error(files_read(&H, "rootfile", 1 << 20, &data, &size, &e), &e, 403, "SANDBOX_PERMISSION_DENIED");

        e = (Error) ERROR_INIT;
        assert_int_equal(files_write(&H, "/workspace/new.txt", "hello", 5, false, &e), 0);
        assert_int_equal(fstatat(ws_fd, "new.txt", &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_int_equal(st.st_uid, UID);
        assert_int_equal(st.st_gid, UID);
        assert_int_equal(st.st_mode & 07777, 0644);

        assert_int_equal(files_mkdir(&H, "a/b/c", true, &e), 0);
        assert_int_equal(fstatat(ws_fd, "a/b/c", &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_int_equal(st.st_uid, UID);
        assert_true(S_ISDIR(st.st_mode));
        assert_int_equal(fsid_current_uid(), 0);        /* restored after each call */
}

/* ----------------------------------------------------- basic operations --- */

static void test_basic_operations_work_inside(void **state) {
        Error e = ERROR_INIT;
        json_t *j = NULL;
        char *data = NULL;
        size_t size = 0;

        plant_hostile_links();
        assert_int_equal(files_write(&H, "x/y/z.txt", "abc", 3, true, &e), 0);
        assert_int_equal(files_read(&H, "/workspace/x/y/z.txt", 100, &data, &size, &e), 0);
        assert_int_equal(size, 3);
        assert_memory_equal(data, "abc", 3);
        free(data);

        /* Existing mode is kept on rewrite. */
        assert_int_equal(fchmodat(ws_fd, "x/y/z.txt", 0600, 0), 0);
        assert_int_equal(files_write(&H, "x/y/z.txt", "abcd", 4, false, &e), 0);
        {
                struct stat st;
                assert_int_equal(fstatat(ws_fd, "x/y/z.txt", &st, 0), 0);
                assert_int_equal(st.st_mode & 0777, 0600);
                assert_int_equal(st.st_size, 4);
        }

        /* Symlinks inside are followed in-root for reads. */
        assert_int_equal(files_read(&H, "inside_abs/ok", 100, &data, &size, &e), 0);
        assert_memory_equal(data, "INSIDE", 6);
        free(data);
        assert_int_equal(files_read(&H, "inside_rel/ok", 100, &data, &size, &e), 0);
        free(data);
        assert_int_equal(files_read(&H, "root_link/cache/../workspace/real/ok", 100, &data, &size, &e), 0);
        free(data);

        /* stat reports a link as a link. */
        assert_int_equal(files_stat(&H, "inside_abs", &j, &e), 0);
        assert_string_equal(json_string_value(json_object_get(j, "type")), "symlink");
        assert_string_equal(json_string_value(json_object_get(j, "path")), "/workspace/inside_abs");
        json_decref(j);
        assert_int_equal(files_stat(&H, "/workspace", &j, &e), 0);
        assert_string_equal(json_string_value(json_object_get(j, "type")), "directory");
        assert_string_equal(json_string_value(json_object_get(j, "name")), "workspace");
        json_decref(j);

        /* list: sorted, paged. */
        assert_int_equal(files_list(&H, "x/y", 10, 0, &j, &e), 0);
        assert_int_equal(json_integer_value(json_object_get(j, "total")), 1);
        assert_false(json_is_true(json_object_get(j, "has_more")));
        {
                json_t *ent = json_array_get(json_object_get(j, "entries"), 0);
                assert_string_equal(json_string_value(json_object_get(ent, "name")), "z.txt");
                assert_string_equal(json_string_value(json_object_get(ent, "path")), "/workspace/x/y/z.txt");
                assert_string_equal(json_string_value(json_object_get(ent, "type")), "file");
                assert_string_equal(json_string_value(json_object_get(ent, "mode")), "0600");
                assert_int_equal(json_integer_value(json_object_get(ent, "size_bytes")), 4);
        }
        json_decref(j);
        assert_int_equal(files_list(&H, "/workspace", 3, 2, &j, &e), 0);
        {
                json_t *ents = json_object_get(j, "entries");
                assert_int_equal(json_array_size(ents), 3);
                assert_true(strcmp(json_string_value(json_object_get(json_array_get(ents, 0), "name")),
                                   json_string_value(json_object_get(json_array_get(ents, 1), "name"))) < 0);
                assert_true(json_is_true(json_object_get(j, "has_more")));
        }
        json_decref(j);

        /* mkdir / move / delete. */
        assert_error(files_mkdir(&H, "x", false, &e), &e, 409, "SANDBOX_FILE_EXISTS");
        e = (Error) ERROR_INIT;
        assert_error(files_mkdir(&H, "nope/deeper", false, &e), &e, 404, "SANDBOX_FILE_NOT_FOUND");
        e = (Error) ERROR_INIT;
        assert_int_equal(files_mkdir(&H, "x", true, &e), 0);
        assert_int_equal(files_move(&H, "x/y/z.txt", "moved.txt", false, &e), 0);
        assert_true(exists_at(ws_fd, "moved.txt"));
        assert_int_equal(files_write(&H, "other.txt", "o", 1, false, &e), 0);
        assert_error(files_move(&H, "other.txt", "moved.txt", false, &e), &e, 409, "SANDBOX_FILE_EXISTS");
        e = (Error) ERROR_INIT;
        assert_int_equal(files_move(&H, "other.txt", "moved.txt", true, &e), 0);
        assert_error(files_move(&H, "x", "x/y/inner", false, &e), &e, 422, "SANDBOX_INVALID_REQUEST");
        e = (Error) ERROR_INIT;
        assert_error(files_delete(&H, "x", false, &e), &e, 409, "SANDBOX_DIRECTORY_NOT_EMPTY");
        e = (Error) ERROR_INIT;
        assert_int_equal(files_delete(&H, "x", true, &e), 0);
        assert_false(exists_at(ws_fd, "x"));
        assert_error(files_delete(&H, "x", true, &e), &e, 404, "SANDBOX_FILE_NOT_FOUND");
        e = (Error) ERROR_INIT;

        /* The roots. */
        assert_error(files_delete(&H, "/workspace", true, &e), &e, 400, "SANDBOX_PATH_IS_ROOT");
        e = (Error) ERROR_INIT;
        assert_error(files_delete(&H, "/home/sandbox", true, &e), &e, 400, "SANDBOX_PATH_IS_ROOT");
        e = (Error) ERROR_INIT;
        assert_error(files_move(&H, "/cache", "/workspace/c", false, &e), &e, 400, "SANDBOX_PATH_IS_ROOT");
        e = (Error) ERROR_INIT;
        assert_error(files_move(&H, "moved.txt", "/envs", true, &e), &e, 400, "SANDBOX_PATH_IS_ROOT");
        e = (Error) ERROR_INIT;
        assert_error(files_write(&H, "/workspace", "x", 1, false, &e), &e, 400, "SANDBOX_NOT_A_REGULAR_FILE");
        e = (Error) ERROR_INIT;
        assert_error(files_write(&H, "real/d", "x", 1, false, &e), &e, 400, "SANDBOX_NOT_A_REGULAR_FILE");
        e = (Error) ERROR_INIT;
        assert_error(files_read(&H, "real", 10, &data, &size, &e), &e, 400, "SANDBOX_NOT_A_REGULAR_FILE");
        e = (Error) ERROR_INIT;
        assert_error(files_list(&H, "real/ok", 10, 0, &j, &e), &e, 400, "SANDBOX_NOT_A_DIRECTORY");
        e = (Error) ERROR_INIT;
        assert_error(files_read(&H, "real/ok", 3, &data, &size, &e), &e, 413, "SANDBOX_FILE_TOO_LARGE");
        e = (Error) ERROR_INIT;

        /* Delete of a link removes the link, not its target. */
        assert_int_equal(files_delete(&H, "inside_rel", true, &e), 0);
        assert_true(exists_at(ws_fd, "real/ok"));
        assert_no_residue(ws_fd);
}

/* ------------------------------------------------------ hostile symlinks --- */

static void test_hostile_links_never_reach_the_decoy(void **state) {
        static const char *const escapes[] = {
                "abs_decoy/f", "dotdot_decoy/f", "deep_decoy/f", "abs_decoy/sub/g", "deep_decoy/canary-0",
                "etc/passwd", "proc_link/etc/passwd", "up_link/decoy/f", "root_link/decoy/f",
        };
        Error e;
        json_t *j = NULL;
        char *data = NULL;
        size_t size;
        int fd;
        uint64_t fsize;

        plant_hostile_links();
        for (size_t i = 0; i < ELEMENTSOF(escapes); i++) {
                char p[256];
                (void) bsprintf(p, sizeof p, "/workspace/%s", escapes[i]);

                e = (Error) ERROR_INIT;
                assert_error(files_read(&H, p, 1 << 20, &data, &size, &e), &e, 404, "SANDBOX_FILE_NOT_FOUND");
                e = (Error) ERROR_INIT;
                assert_error(files_open_read(&H, p, &fd, &fsize, &e), &e, 404, "SANDBOX_FILE_NOT_FOUND");
                e = (Error) ERROR_INIT;
                assert_true(files_stat(&H, p, &j, &e) < 0);
                e = (Error) ERROR_INIT;
                assert_true(files_write(&H, p, "PWNED", 5, false, &e) < 0);
                e = (Error) ERROR_INIT;
                assert_true(files_write(&H, p, "PWNED", 5, true, &e) < 0);
                e = (Error) ERROR_INIT;
                assert_true(files_delete(&H, p, true, &e) < 0);
                e = (Error) ERROR_INIT;
                assert_true(files_move(&H, p, "/workspace/stolen", true, &e) < 0);
                e = (Error) ERROR_INIT;
                assert_true(files_mkdir(&H, p, true, &e) < 0);
        }
        /* Whole-directory operations through the links. */
        e = (Error) ERROR_INIT;
        assert_true(files_list(&H, "abs_decoy", 100, 0, &j, &e) < 0);
        e = (Error) ERROR_INIT;
        assert_true(files_list(&H, "deep_decoy/sub", 100, 0, &j, &e) < 0);
        e = (Error) ERROR_INIT;
        assert_true(files_delete(&H, "abs_decoy/sub", true, &e) < 0);
        e = (Error) ERROR_INIT;
        assert_true(files_move(&H, "real/ok", "abs_decoy/f", true, &e) < 0);
        e = (Error) ERROR_INIT;
        assert_true(files_move(&H, "real/ok", "dotdot_decoy/new", true, &e) < 0);

        /* Loops are refused, not followed forever. */
        e = (Error) ERROR_INIT;
        assert_error(files_read(&H, "loop1", 10, &data, &size, &e), &e, 404, "SANDBOX_FILE_NOT_FOUND");
        e = (Error) ERROR_INIT;
        assert_error(files_read(&H, "self/x", 10, &data, &size, &e), &e, 404, "SANDBOX_FILE_NOT_FOUND");

        /* Links to fs/ and fs/home are outside. */
        e = (Error) ERROR_INIT;
        assert_error(files_list(&H, "root_link", 10, 0, &j, &e), &e, 400, "SANDBOX_PATH_OUTSIDE_WORKSPACE");
        e = (Error) ERROR_INIT;
        assert_error(files_list(&H, "home_link", 10, 0, &j, &e), &e, 400, "SANDBOX_PATH_OUTSIDE_WORKSPACE");
        e = (Error) ERROR_INIT;
        assert_error(files_list(&H, "up_link", 10, 0, &j, &e), &e, 400, "SANDBOX_PATH_OUTSIDE_WORKSPACE");
        e = (Error) ERROR_INIT;
        assert_error(files_write(&H, "root_link/planted", "x", 1, false, &e), &e, 400,
                     "SANDBOX_PATH_OUTSIDE_WORKSPACE");
        e = (Error) ERROR_INIT;
        assert_error(files_mkdir(&H, "home_link/other", false, &e), &e, 400, "SANDBOX_PATH_OUTSIDE_WORKSPACE");
        e = (Error) ERROR_INIT;
        assert_error(files_delete(&H, "root_link/workspace", true, &e), &e, 400, "SANDBOX_PATH_OUTSIDE_WORKSPACE");
        e = (Error) ERROR_INIT;
        assert_error(files_delete(&H, "home_link/sandbox", true, &e), &e, 400, "SANDBOX_PATH_OUTSIDE_WORKSPACE");
        e = (Error) ERROR_INIT;
        assert_error(files_move(&H, "root_link/cache", "/workspace/c", false, &e), &e, 400,
                     "SANDBOX_PATH_OUTSIDE_WORKSPACE");
        e = (Error) ERROR_INIT;
        assert_error(files_stat(&H, "root_link/home", &j, &e), &e, 400, "SANDBOX_PATH_OUTSIDE_WORKSPACE");
        /* ... but a root reached through them is fine (it is what the sandbox sees). */
        e = (Error) ERROR_INIT;
        assert_int_equal(files_read(&H, "root_link/workspace/real/ok", 100, &data, &size, &e), 0);
        free(data);
        assert_int_equal(files_stat(&H, "home_link/sandbox", &j, &e), 0);
        json_decref(j);

        /* Positive control: the decoy is reachable by its host path (so the above could fail). */
        assert_non_null(slurp_at(decoy_fd, "f"));
        assert_true(exists_at(fs_fd, "workspace/real/ok"));
        assert_decoy_intact();
        /* Nothing was created in fs/ or fs/home. */
        {
                int fsd = openat(fs_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                assert_int_equal(count_entries(fsd), 4);
                close(fsd);
        }
        assert_no_residue(ws_fd);
}

static void test_delete_of_links_removes_only_the_links(void **state) {
        static const char *const links[] = { "abs_decoy", "dotdot_decoy", "deep_decoy", "root_link", "home_link",
                                              "up_link" };
        Error e = ERROR_INIT;

        plant_hostile_links();
        for (size_t i = 0; i < ELEMENTSOF(links); i++) {
                assert_int_equal(files_delete(&H, links[i], true, &e), 0);
                assert_false(exists_at(ws_fd, links[i]));
        }
        assert_decoy_intact();
}

/* The userspace walk and openat2 agree on a table of paths. */
static void test_fallback_walk_matches_openat2(void **state) {
        static const char *const paths[] = {
                "workspace/real/ok", "workspace/inside_abs/ok", "workspace/inside_rel/ok", "workspace/abs_decoy/f",
                "workspace/dotdot_decoy/f", "workspace/deep_decoy/f", "workspace/loop1", "workspace/self",
                "workspace/root_link", "workspace/home_link", "workspace/up_link", "workspace/up_link/cache",
                "workspace/../../..", "workspace/real/ok/x", "workspace/cache_link/../envs", "",
                "workspace/proc_link", "workspace/real/../../workspace/real/ok", "workspace/nope",
        };
        static const int flags[] = { O_PATH, O_PATH | O_NOFOLLOW, O_RDONLY | O_NONBLOCK, O_PATH | O_DIRECTORY };

        plant_hostile_links();
        for (size_t i = 0; i < ELEMENTSOF(paths); i++)
                for (size_t f = 0; f < ELEMENTSOF(flags); f++) {
                        struct stat a, b;
                        int ka, fb;

                        resolve_force_fallback(false);
                        ka = resolve_open(fs_fd, paths[i], flags[f]);
                        resolve_force_fallback(true);
                        fb = resolve_open(fs_fd, paths[i], flags[f]);
                        resolve_force_fallback(use_fallback);
                        if ((ka < 0) != (fb < 0) || (ka < 0 && ka != fb))
                                fail_msg("'%s' flags %#x: openat2 %d, walk %d", paths[i], flags[f], ka, fb);
                        if (ka >= 0) {
                                assert_int_equal(fstat(ka, &a), 0);
                                assert_int_equal(fstat(fb, &b), 0);
                                if (a.st_ino != b.st_ino || a.st_dev != b.st_dev)
                                        fail_msg("'%s': openat2 and walk opened different objects", paths[i]);
                                close(ka);
                                close(fb);
                        }
                }
}

static void test_fifo_is_refused_without_hanging(void **state) {
        Error e = ERROR_INIT;
        char *data = NULL;
        size_t size;
        int fd;
        uint64_t fsize;

        assert_int_equal(mkfifoat(ws_fd, "fifo", 0666), 0);
        assert_int_equal(fchownat(ws_fd, "fifo", UID, UID, AT_SYMLINK_NOFOLLOW), 0);
        put_link(ws_fd, "fifo_link", "/workspace/fifo");
        alarm(20);        /* a hang kills the test binary: it fails, loudly */
        assert_error(files_read(&H, "fifo", 100, &data, &size, &e), &e, 400, "SANDBOX_NOT_A_REGULAR_FILE");
        e = (Error) ERROR_INIT;
        assert_error(files_read(&H, "fifo_link", 100, &data, &size, &e), &e, 400, "SANDBOX_NOT_A_REGULAR_FILE");
        e = (Error) ERROR_INIT;
        assert_error(files_open_read(&H, "fifo", &fd, &fsize, &e), &e, 400, "SANDBOX_NOT_A_REGULAR_FILE");
        e = (Error) ERROR_INIT;
        {
                uint64_t n = 0;
                ArchiveLimits lim = { .max_entries = 100, .max_bytes = 1 << 20 };
                assert_int_equal(files_archive_create(&H, tmp_fd, "/workspace", &lim, &fd, &n, &e), 0);
                close(fd);
        }
        alarm(0);
        /* Positive control: the FIFO is there and is a FIFO. */
        {
                struct stat st;
                assert_int_equal(fstatat(ws_fd, "fifo", &st, AT_SYMLINK_NOFOLLOW), 0);
                assert_true(S_ISFIFO(st.st_mode));
        }
}

/* ------------------------------------------------------------- archives --- */

typedef struct TarEntry {
        const char *name;
        mode_t type;                  /* AE_IFREG, AE_IFDIR, AE_IFLNK, AE_IFCHR, AE_IFIFO; 0 = hardlink */
        const char *data;             /* content, or link target */
        int64_t size;                 /* declared size (-1: strlen(data)) */
} TarEntry;

static int make_tar(const TarEntry *entries, size_t n) {
        struct archive *a = archive_write_new();
        int fd = openat(tmp_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);

        assert_true(fd >= 0);
        assert_int_equal(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
        assert_int_equal(archive_write_open_fd(a, fd), ARCHIVE_OK);
        for (size_t i = 0; i < n; i++) {
                struct archive_entry *ae = archive_entry_new();
                const TarEntry *t = &entries[i];

                archive_entry_set_pathname(ae, t->name);
                archive_entry_set_perm(ae, 0644);
                if (t->type == 0) {
                        archive_entry_set_filetype(ae, AE_IFREG);
                        archive_entry_set_hardlink(ae, t->data);
                        archive_entry_set_size(ae, 0);
                } else {
                        archive_entry_set_filetype(ae, t->type);
                        if (t->type == AE_IFLNK)
                                archive_entry_set_symlink(ae, t->data);
                        if (t->type == AE_IFREG)
                                archive_entry_set_size(ae, t->size >= 0 ? t->size : (int64_t) strlen(t->data));
                        else
                                archive_entry_set_size(ae, 0);
                        if (t->type == AE_IFDIR)
                                archive_entry_set_perm(ae, 0755);
                }
                assert_true(archive_write_header(a, ae) >= ARCHIVE_WARN);
                if (t->type == AE_IFREG && t->data) {
                        size_t len = strlen(t->data);
                        if (t->size < 0 || (size_t) t->size >= len)
                                assert_int_equal(archive_write_data(a, t->data, len), (ssize_t) len);
                }
                archive_entry_free(ae);
        }
        assert_int_equal(archive_write_close(a), ARCHIVE_OK);
        archive_write_free(a);
        assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
        return fd;
}

static int extract(const TarEntry *entries, size_t n, const char *path, uint64_t max_entries, uint64_t max_bytes,
                   uint64_t *ret_entries, Error *e) {
        ArchiveLimits lim = { .max_entries = max_entries, .max_bytes = max_bytes };
        int fd = make_tar(entries, n);
        uint64_t got = 0;
        int r = files_archive_extract(&H, path, fd, &lim, &got, e);

        close(fd);
        if (ret_entries)
                *ret_entries = got;
        return r;
}

static void test_archive_round_trip_and_merge(void **state) {
        static const TarEntry good[] = {
                { "./", AE_IFDIR, NULL, 0 },
                { "proj/", AE_IFDIR, NULL, 0 },
                { "proj/a.txt", AE_IFREG, "alpha", -1 },
                { "proj/sub/b.txt", AE_IFREG, "beta", -1 },        /* implicit parent */
                { "proj/link", AE_IFLNK, "sub/b.txt", 0 },
                { "proj/hard", 0, "proj/a.txt", 0 },
                { "top.txt", AE_IFREG, "top", -1 },
        };
        ArchiveLimits lim = { .max_entries = 1000, .max_bytes = 1 << 20 };
        Error e = ERROR_INIT;
        uint64_t entries = 0, size = 0;
        char *data = NULL;
        size_t dsize;
        int fd;

        put_file(ws_fd, "keep.txt", "keep", UID, 0644);
        put_file(ws_fd, "top.txt", "old", UID, 0644);
        assert_int_equal(extract(good, ELEMENTSOF(good), "/workspace", 100, 1 << 20, &entries, &e), 0);
        assert_int_equal(entries, ELEMENTSOF(good));
        assert_string_equal(slurp_at(ws_fd, "proj/a.txt"), "alpha");
        assert_string_equal(slurp_at(ws_fd, "proj/sub/b.txt"), "beta");
        assert_string_equal(slurp_at(ws_fd, "proj/hard"), "alpha");
        assert_string_equal(slurp_at(ws_fd, "top.txt"), "top");           /* replaced */
        assert_string_equal(slurp_at(ws_fd, "keep.txt"), "keep");         /* merged, not wiped */
        {
                char target[64];
                ssize_t n = readlinkat(ws_fd, "proj/link", target, sizeof target);
                assert_int_equal(n, 9);
                struct stat st;
                assert_int_equal(fstatat(ws_fd, "proj/a.txt", &st, AT_SYMLINK_NOFOLLOW), 0);
                assert_int_equal(st.st_uid, UID);
                assert_int_equal(fstatat(ws_fd, "proj", &st, AT_SYMLINK_NOFOLLOW), 0);
                assert_int_equal(st.st_mode & 0777, 0755);
        }
        assert_no_residue(ws_fd);

        /* A second extraction merges into the existing directory. */
        {
                static const TarEntry more[] = { { "proj/c.txt", AE_IFREG, "gamma", -1 } };
                assert_int_equal(extract(more, 1, "/workspace", 100, 1 << 20, NULL, &e), 0);
                assert_string_equal(slurp_at(ws_fd, "proj/c.txt"), "gamma");
                assert_string_equal(slurp_at(ws_fd, "proj/a.txt"), "alpha");
        }

        /* Download, then upload the tar into a new directory (created on the way). */
        assert_int_equal(files_archive_create(&H, tmp_fd, "proj", &lim, &fd, &size, &e), 0);
        assert_true(size > 0);
        assert_int_equal(files_archive_extract(&H, "/cache/copy/of/proj", fd, &lim, &entries, &e), 0);
        close(fd);
        assert_int_equal(files_read(&H, "/cache/copy/of/proj/sub/b.txt", 100, &data, &dsize, &e), 0);
        assert_memory_equal(data, "beta", 4);
        free(data);
        {
                json_t *j = NULL;
                assert_int_equal(files_stat(&H, "/cache/copy/of/proj/link", &j, &e), 0);
                assert_string_equal(json_string_value(json_object_get(j, "type")), "symlink");
                json_decref(j);
        }

        /* A file/directory conflict is refused before anything moves. */
        {
                static const TarEntry clash[] = { { "fresh.txt", AE_IFREG, "x", -1 },
                                                  { "proj", AE_IFREG, "not a dir", -1 } };
                e = (Error) ERROR_INIT;
                assert_error(extract(clash, 2, "/workspace", 100, 1 << 20, NULL, &e), &e, 409, "SANDBOX_FILE_EXISTS");
                assert_false(exists_at(ws_fd, "fresh.txt"));
                assert_no_residue(ws_fd);
        }
}

static void test_archive_download_stores_links_as_links(void **state) {
        ArchiveLimits lim = { .max_entries = 1000, .max_bytes = 1 << 20 };
        Error e = ERROR_INIT;
        uint64_t size = 0;
        char *buf;
        int fd;

        plant_hostile_links();
        assert_int_equal(files_archive_create(&H, tmp_fd, "/workspace", &lim, &fd, &size, &e), 0);
        buf = malloc(size + 1);
        assert_non_null(buf);
        assert_int_equal(pread(fd, buf, size, 0), (ssize_t) size);
        assert_false(holds_canary(buf, size));
        assert_non_null(memmem(buf, size, "INSIDE", 6));        /* positive control */
        free(buf);
        close(fd);

        e = (Error) ERROR_INIT;
        assert_error(files_archive_create(&H, tmp_fd, "abs_decoy", &lim, &fd, &size, &e), &e, 404,
                     "SANDBOX_FILE_NOT_FOUND");
        e = (Error) ERROR_INIT;
        assert_error(files_archive_create(&H, tmp_fd, "root_link", &lim, &fd, &size, &e), &e, 400,
                     "SANDBOX_PATH_OUTSIDE_WORKSPACE");
        e = (Error) ERROR_INIT;
        lim.max_entries = 3;
        assert_error(files_archive_create(&H, tmp_fd, "/workspace", &lim, &fd, &size, &e), &e, 413,
                     "SANDBOX_ARCHIVE_TOO_LARGE");
        assert_decoy_intact();
}

static void test_archive_bombs_are_refused_without_residue(void **state) {
        char abs_target[PATH_MAX + 16], hard_abs[PATH_MAX + 16];
        Error e;

        (void) bsprintf(abs_target, sizeof abs_target, "%s", decoy_path);
        (void) bsprintf(hard_abs, sizeof hard_abs, "%s/f", decoy_path);
        put_file(ws_fd, "existing.txt", "existing", UID, 0644);

        {
                TarEntry many[20];
                char names[20][16];
                for (int i = 0; i < 20; i++) {
                        (void) bsprintf(names[i], sizeof names[i], "f%02d", i);
                        many[i] = (TarEntry) { names[i], AE_IFREG, "x", -1 };
                }
                e = (Error) ERROR_INIT;
                assert_error(extract(many, 20, "/workspace", 10, 1 << 20, NULL, &e), &e, 413,
                             "SANDBOX_ARCHIVE_TOO_LARGE");
                assert_false(exists_at(ws_fd, "f00"));
                /* Positive control: the same archive passes with a higher limit. */
                e = (Error) ERROR_INIT;
                assert_int_equal(extract(many, 20, "/workspace/many", 20, 1 << 20, NULL, &e), 0);
                assert_true(exists_at(ws_fd, "many/f19"));
        }
        {
                const TarEntry big[] = { { "big.bin", AE_IFREG, "", 2 << 20 } };
                e = (Error) ERROR_INIT;
                assert_error(extract(big, 1, "/workspace", 10, 1 << 20, NULL, &e), &e, 413,
                             "SANDBOX_ARCHIVE_TOO_LARGE");
                assert_false(exists_at(ws_fd, "big.bin"));
        }
        {
                const TarEntry cases[][3] = {
                        { { "ok.txt", AE_IFREG, "ok", -1 }, { "../evil", AE_IFREG, "evil", -1 } },
                        { { "ok.txt", AE_IFREG, "ok", -1 }, { "a/../../evil", AE_IFREG, "evil", -1 } },
                        { { "ok.txt", AE_IFREG, "ok", -1 }, { "/evil", AE_IFREG, "evil", -1 } },
                        { { "l", AE_IFLNK, abs_target, 0 }, { "l/f", AE_IFREG, "PWNED", -1 } },
                        { { "l", AE_IFLNK, "../../../decoy", 0 }, { "l/f", AE_IFREG, "PWNED", -1 } },
                        { { "d/", AE_IFDIR, NULL, 0 }, { "d/l", AE_IFLNK, "../..", 0 } },
                        /* A link that stays inside, then a write through it: refused too. */
                        { { "sub/", AE_IFDIR, NULL, 0 }, { "l", AE_IFLNK, "sub", 0 }, { "l/f", AE_IFREG, "x", -1 } },
                        { { "h", 0, hard_abs, 0 } },
                        { { "h", 0, "../../../decoy/f", 0 } },
                        { { "h", 0, "missing", 0 } },
                        { { "dev", AE_IFCHR, NULL, 0 } },
                        { { "fifo", AE_IFIFO, NULL, 0 } },
                };
                for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                        size_t n = 0;
                        while (n < 3 && cases[i][n].name)
                                n++;
                        e = (Error) ERROR_INIT;
                        if (extract(cases[i], n, "/workspace", 100, 1 << 20, NULL, &e) >= 0)
                                fail_msg("bomb %zu was accepted", i);
                        if (e.status != 400 || !streq(e.code, "SANDBOX_INVALID_ARCHIVE"))
                                fail_msg("bomb %zu: %u %s (%s)", i, e.status, e.code, e.message);
                        assert_false(exists_at(ws_fd, "ok.txt"));
                        assert_false(exists_at(ws_fd, "l"));
                        assert_false(exists_at(ws_fd, "h"));
                        assert_no_residue(ws_fd);
                }
        }
        {
                /* Not an archive at all. */
                int fd = openat(tmp_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
                ArchiveLimits lim = { .max_entries = 10, .max_bytes = 1 << 20 };
                uint64_t n;
                char junk[4096];

                memset(junk, 'J', sizeof junk);
                assert_int_equal(write(fd, junk, sizeof junk), (ssize_t) sizeof junk);
                assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
                e = (Error) ERROR_INIT;
                assert_error(files_archive_extract(&H, "/workspace", fd, &lim, &n, &e), &e, 400,
                             "SANDBOX_INVALID_ARCHIVE");
                close(fd);
        }
        /* Extraction into a link to the decoy fails and creates nothing. */
        plant_hostile_links();
        {
                const TarEntry one[] = { { "f", AE_IFREG, "PWNED", -1 } };
                e = (Error) ERROR_INIT;
                assert_true(extract(one, 1, "/workspace/abs_decoy", 10, 1 << 20, NULL, &e) < 0);
                e = (Error) ERROR_INIT;
                assert_true(extract(one, 1, "/workspace/deep_decoy/sub", 10, 1 << 20, NULL, &e) < 0);
                e = (Error) ERROR_INIT;
                assert_error(extract(one, 1, "/workspace/root_link", 10, 1 << 20, NULL, &e), &e, 400,
                             "SANDBOX_PATH_OUTSIDE_WORKSPACE");
        }
        assert_string_equal(slurp_at(ws_fd, "existing.txt"), "existing");
        assert_no_residue(ws_fd);
        assert_decoy_intact();
}

/* ---------------------------------------------------------- write atomicity --- */

#define ATOMIC_SIZE (64 * 1024)

typedef struct AtomicRun {
        atomic_bool stop;
        atomic_uint torn, whole, writes, write_errors, next_id;
} AtomicRun;

/* Threads only count; the main thread asserts (cmocka asserts are not thread-safe). */
static void *atomic_writer(void *arg) {
        AtomicRun *run = arg;
        unsigned me = atomic_fetch_add(&run->next_id, 1);
        char *buf = malloc(ATOMIC_SIZE);

        for (unsigned i = 0; buf && i < 150; i++) {
                Error e = ERROR_INIT;
                memset(buf, 'A' + (int) ((me * 5 + i) % 26), ATOMIC_SIZE);
                if (files_write(&H, "atomic.bin", buf, ATOMIC_SIZE, false, &e) < 0)
                        atomic_fetch_add(&run->write_errors, 1);
                else
                        atomic_fetch_add(&run->writes, 1);
        }
        free(buf);
        return NULL;
}

static void *atomic_reader(void *arg) {
        AtomicRun *run = arg;

        while (!atomic_load(&run->stop)) {
                Error e = ERROR_INIT;
                char *data = NULL;
                size_t size = 0;
                bool ok;

                if (files_read(&H, "atomic.bin", ATOMIC_SIZE * 2, &data, &size, &e) < 0)
                        continue;
                ok = size == ATOMIC_SIZE;
                for (size_t i = 1; ok && i < size; i++)
                        ok = data[i] == data[0];
                atomic_fetch_add(ok ? &run->whole : &run->torn, 1);
                free(data);
        }
        return NULL;
}

static void test_concurrent_writers_never_expose_partial_files(void **state) {
        AtomicRun run = { 0 };
        pthread_t w[4], r[2];
        Error e = ERROR_INIT;
        char *init = malloc(ATOMIC_SIZE);

        memset(init, 'z', ATOMIC_SIZE);
        assert_int_equal(files_write(&H, "atomic.bin", init, ATOMIC_SIZE, false, &e), 0);
        free(init);
        for (int i = 0; i < 2; i++)
                assert_int_equal(pthread_create(&r[i], NULL, atomic_reader, &run), 0);
        for (int i = 0; i < 4; i++)
                assert_int_equal(pthread_create(&w[i], NULL, atomic_writer, &run), 0);
        for (int i = 0; i < 4; i++)
                pthread_join(w[i], NULL);
        atomic_store(&run.stop, true);
        for (int i = 0; i < 2; i++)
                pthread_join(r[i], NULL);
        assert_int_equal(atomic_load(&run.torn), 0);
        assert_int_equal(atomic_load(&run.write_errors), 0);
        assert_true(atomic_load(&run.whole) > 0);        /* the readers did read */
        assert_int_equal(atomic_load(&run.writes), 600);
        assert_no_residue(ws_fd);
}

/* --------------------------------------------------------- the swap race --- */

/* A thread keeps exchanging /workspace/d (a real directory) with /workspace/alt (a symlink
 * to the decoy by its absolute host path) while the main thread works through "d". */
typedef struct Race {
        atomic_bool stop;
        atomic_ulong swaps;
        atomic_ulong canary_reads;        /* data returned that was a canary */
        atomic_ulong inside_reads;        /* positive control: real content seen */
} Race;

/* For the swapper thread: no cmocka asserts off the main thread; the main thread may delete
 * what we are creating at any moment, so failures are expected and ignored. */
static void put_file_quiet(int dirfd, const char *name, const char *content) {
        int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);

        if (fd < 0)
                return;
        (void) write(fd, content, strlen(content));
        (void) fchown(fd, UID, UID);
        close(fd);
}

static void race_populate_dir(const char *name) {
        int d;

        if (mkdirat(ws_fd, name, 0755) < 0)
                return;
        (void) fchownat(ws_fd, name, UID, UID, AT_SYMLINK_NOFOLLOW);
        d = openat(ws_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (d < 0)
                return;
        put_file_quiet(d, "f", "INSIDE-F");
        if (mkdirat(d, "sub", 0755) == 0) {
                int s = openat(d, "sub", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                (void) fchownat(d, "sub", UID, UID, AT_SYMLINK_NOFOLLOW);
                if (s >= 0) {
                        put_file_quiet(s, "g", "INSIDE-G");
                        close(s);
                }
        }
        close(d);
}

static void *race_swapper(void *arg) {
        Race *race = arg;

        while (!atomic_load(&race->stop)) {
                struct stat a, b;
                bool ha = fstatat(ws_fd, "d", &a, AT_SYMLINK_NOFOLLOW) == 0;
                bool hb = fstatat(ws_fd, "alt", &b, AT_SYMLINK_NOFOLLOW) == 0;

                /* Put back whatever the operations deleted: one name a directory, the other
                 * the link to the decoy. */
                if (!ha && !hb) {
                        race_populate_dir("d");
                        (void) symlinkat(decoy_path, ws_fd, "alt");
                        continue;
                }
                if (!ha || !hb) {
                        const char *missing = ha ? "alt" : "d";
                        bool other_is_link = S_ISLNK((ha ? a : b).st_mode);
                        if (other_is_link)
                                race_populate_dir(missing);
                        else
                                (void) symlinkat(decoy_path, ws_fd, missing);
                        continue;
                }
                if (renameat2(ws_fd, "d", ws_fd, "alt", RENAME_EXCHANGE) == 0)
                        atomic_fetch_add(&race->swaps, 1);
        }
        return NULL;
}

typedef enum RaceOp { RACE_READ, RACE_READ_SUB, RACE_WRITE, RACE_DELETE, RACE_ARCHIVE, RACE_LIST, _RACE_OP_MAX } RaceOp;

/* One operation through "d" with the real files API. */
static void race_op_real(Race *race, RaceOp op) {
        ArchiveLimits lim = { .max_entries = 100, .max_bytes = 1 << 20 };
        Error e = ERROR_INIT;
        char *data = NULL;
        size_t size = 0;
        json_t *j = NULL;
        uint64_t asize;
        int fd;

        switch (op) {
        case RACE_READ:
        case RACE_READ_SUB:
                if (files_read(&H, op == RACE_READ ? "d/f" : "d/sub/g", 1 << 20, &data, &size, &e) == 0) {
                        atomic_fetch_add(holds_canary(data, size) ? &race->canary_reads : &race->inside_reads, 1);
                        free(data);
                }
                break;
        case RACE_WRITE:
                (void) files_write(&H, "d/f", "PWNED", 5, false, &e);
                (void) files_write(&H, "d/sub/g", "PWNED", 5, false, &e);
                break;
        case RACE_DELETE:
                (void) files_delete(&H, "d/sub", true, &e);
                (void) files_delete(&H, "d", true, &e);
                break;
        case RACE_ARCHIVE:
                if (files_archive_create(&H, tmp_fd, "d", &lim, &fd, &asize, &e) == 0) {
                        data = malloc(asize + 1);
                        if (data && pread(fd, data, asize, 0) == (ssize_t) asize)
                                atomic_fetch_add(holds_canary(data, asize) ? &race->canary_reads
                                                                           : &race->inside_reads,
                                                 1);
                        free(data);
                        close(fd);
                }
                break;
        case RACE_LIST:
                if (files_list(&H, "d", 100, 0, &j, &e) == 0) {
                        char *s = json_dumps(j, 0);
                        /* The decoy has canary-N names; the real directory does not. */
                        if (s && strstr(s, "canary-"))
                                atomic_fetch_add(&race->canary_reads, 1);
                        free(s);
                        json_decref(j);
                }
                break;
        default:
                break;
        }
}

/* The deliberately naive resolver the harness must catch: realpath() on the host path,
 * check the prefix, then open the (unresolved) host path again. Between the check and the
 * open, "d" can become the link to the decoy. Runs under the sandbox identity too, so
 * only path handling differs from the real thing. */
static int naive_open(const char *rel, int flags) {
        char host[PATH_MAX * 2], real[PATH_MAX];

        (void) bsprintf(host, sizeof host, "%s/workspace/%s", fs_path, rel);
        if (!realpath(host, real))
                return -errno;
        if (!startswith(real, fs_path) || (real[strlen(fs_path)] != '/' && real[strlen(fs_path)] != '\0'))
                return -EPERM;
        return open(host, flags | O_CLOEXEC, 0644);
}

static void race_op_naive(Race *race, RaceOp op) {
        FsIdSaved ids = FSID_SAVED_INIT;
        char buf[256];
        int fd;

        assert_int_equal(fsid_enter(UID, UID, &ids), 0);
        switch (op) {
        case RACE_READ:
        case RACE_READ_SUB:
        case RACE_LIST:
        case RACE_ARCHIVE:
                fd = naive_open(op == RACE_READ_SUB ? "d/sub/g" : "d/f", O_RDONLY);
                if (fd >= 0) {
                        ssize_t n = read(fd, buf, sizeof buf - 1);
                        if (n > 0)
                                atomic_fetch_add(holds_canary(buf, (size_t) n) ? &race->canary_reads
                                                                               : &race->inside_reads,
                                                 1);
                        close(fd);
                }
                break;
        case RACE_WRITE:
        case RACE_DELETE:
                fd = naive_open("d/f", O_WRONLY | O_TRUNC);
                if (fd >= 0) {
                        (void) write(fd, "PWNED", 5);
                        close(fd);
                }
                break;
        default:
                break;
        }
        fsid_leave(&ids);
}

/* Counts canaries that are no longer what they were. */
static unsigned decoy_damage(void) {
        unsigned bad = 0;
        int sub;

        for (size_t i = 0; i < n_canaries; i++) {
                const char *got = slurp_at(decoy_fd, canaries[i].rel);
                if (!got || !streq(got, canaries[i].content))
                        bad++;
        }
        if (count_entries(decoy_fd) != N_CANARIES + 2)
                bad++;
        sub = openat(decoy_fd, "sub", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0 || count_entries(sub) != 1)
                bad++;
        safe_close(sub);
        return bad;
}

/* Runs ITERATIONS rounds of every operation through "d" while the swapper runs. With
 * STOP_WHEN_CAUGHT the run ends at the first canary read or damage (for the naive test). */
static void run_race(Race *race, bool naive, unsigned iterations, bool stop_when_caught) {
        pthread_t t;

        race_populate_dir("d");
        assert_int_equal(symlinkat(decoy_path, ws_fd, "alt"), 0);
        assert_int_equal(pthread_create(&t, NULL, race_swapper, race), 0);
        for (unsigned i = 0; i < iterations; i++) {
                for (RaceOp op = 0; op < _RACE_OP_MAX; op++) {
                        if (naive)
                                race_op_naive(race, op);
                        else
                                race_op_real(race, op);
                }
                if (stop_when_caught && (atomic_load(&race->canary_reads) > 0 || (i % 64 == 0 && decoy_damage() > 0)))
                        break;
        }
        atomic_store(&race->stop, true);
        pthread_join(t, NULL);
}

static void test_symlink_swap_race_never_touches_the_decoy(void **state) {
        Race race = { 0 };

        run_race(&race, false, 3000, false);
        assert_int_equal(atomic_load(&race.canary_reads), 0);
        assert_int_equal(decoy_damage(), 0);
        assert_decoy_intact();
        /* The race really ran: the link was swapped in and out, and real content was read. */
        assert_true(atomic_load(&race.swaps) > 100);
        assert_true(atomic_load(&race.inside_reads) > 0);
}

static void test_swap_race_harness_catches_a_naive_resolver(void **state) {
        Race race = { 0 };

        run_race(&race, true, 200000, true);
        if (atomic_load(&race.canary_reads) == 0 && decoy_damage() == 0)
                fail_msg("the race harness did not catch the naive resolver (%lu swaps, %lu inside reads)",
                         atomic_load(&race.swaps), atomic_load(&race.inside_reads));
}

int main(void) {
#define BOTH(t) cmocka_unit_test_setup_teardown(t, setup_kernel, fixture_teardown), \
                cmocka_unit_test_setup_teardown(t, setup_fallback, fixture_teardown)
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_fsid_guard_denies_root_only_file_and_restores, setup_kernel,
                                                fixture_teardown),
                cmocka_unit_test_setup_teardown(test_fsid_guard_is_per_thread, setup_kernel, fixture_teardown),
                BOTH(test_operations_run_as_the_sandbox_uid),
                BOTH(test_basic_operations_work_inside),
                BOTH(test_hostile_links_never_reach_the_decoy),
                BOTH(test_delete_of_links_removes_only_the_links),
                cmocka_unit_test_setup_teardown(test_fallback_walk_matches_openat2, setup_kernel, fixture_teardown),
                BOTH(test_fifo_is_refused_without_hanging),
                BOTH(test_archive_round_trip_and_merge),
                BOTH(test_archive_download_stores_links_as_links),
                BOTH(test_archive_bombs_are_refused_without_residue),
                BOTH(test_concurrent_writers_never_expose_partial_files),
                BOTH(test_symlink_swap_race_never_touches_the_decoy),
                cmocka_unit_test_setup_teardown(test_swap_race_harness_catches_a_naive_resolver, setup_kernel,
                                                fixture_teardown),
        };

        if (geteuid() != 0) {
                fprintf(stderr, "test-resolve needs root (it switches fsuid and chowns a fake sandbox)\n");
                return 77;
        }
        return cmocka_run_group_tests(tests, NULL, NULL);
}
