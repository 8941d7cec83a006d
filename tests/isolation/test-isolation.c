/* SPDX-License-Identifier: MIT */
/* The launcher's isolation suite: builds fake sandbox trees in a temporary directory,
 * launches commands through the real spawner at every level this host supports, on both
 * runtimes (native and bwrap), and asserts the exact failure of each attack next to a
 * positive control. Where bwrap 0.8.0 cannot behave like the native launcher, the test
 * asserts bwrap's documented behaviour instead and says why (see BWRAP_DIFFERS).
 * Usage (as root): test-isolation PATH-TO-sandbox-probe [native|bwrap]...
 * Under CI=true a level or runtime this host is expected to support must run. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bwrap.h"
#include "launch.h"
#include "macros.h"
#include "probe.h"
#include "spawner.h"
#include "string-util.h"
#include "time-util.h"

#define UID_A 1999990002u
#define UID_B 1999990003u
#define UID_C 1999990004u
#define UID_PROBE 1999990005u

typedef struct Sandbox {
        const char *key;
        const char *hostname;
        uid_t uid;
        char dir[256];
        int fs_fd;
} Sandbox;

static Spawner *spawner;
static const char *probe_binary;
static char root_dir[] = "/tmp/sandloom-iso-XXXXXX";
static unsigned passed, failed, skipped;
static const char *level_name = "-";
static LaunchRuntime runtime = LAUNCH_RUNTIME_NATIVE;
static SpawnerOptions spawner_opts;

/* Where the bwrap runtime knowingly differs from the native one (bwrap.h). */
#define BWRAP (runtime == LAUNCH_RUNTIME_BWRAP)
static Sandbox sb_a = { .key = "sbx-a", .hostname = "sbx-a", .uid = UID_A };
static Sandbox sb_b = { .key = "sbx-b", .hostname = "sbx-b", .uid = UID_B };
static Sandbox sb_c = { .key = "sbx-c", .hostname = "sbx-c", .uid = UID_C };
static int null_fd = -1;

static char *const test_env[] = {
        (char *) "PATH=/usr/local/bin:/usr/bin:/bin", (char *) "HOME=/home/sandbox", (char *) "USER=sandbox",
        (char *) "LANG=C.UTF-8", (char *) "TMPDIR=/tmp", (char *) "SANDLOOM_TEST=1", NULL,
};

_printf_(3, 4) static void check(const char *name, bool ok, const char *fmt, ...) {
        if (ok) {
                passed++;
                printf("ok - %s/%s/%s\n", launch_runtime_to_string(runtime), level_name, name);
                return;
        }
        failed++;
        printf("FAIL - %s/%s/%s: ", launch_runtime_to_string(runtime), level_name, name);
        va_list ap;
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        printf("\n");
}

static void skip(const char *name, const char *why) {
        skipped++;
        printf("skip - %s/%s/%s: %s\n", launch_runtime_to_string(runtime), level_name, name, why);
}

/* ---- fixtures ---- */

static int copy_file(const char *src, int dir_fd, const char *name, uid_t uid, mode_t mode) {
        char buf[65536];
        ssize_t n;
        int in = open(src, O_RDONLY | O_CLOEXEC), out;

        if (in < 0)
                return -errno;
        out = openat(dir_fd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0700);
        if (out < 0) {
                close(in);
                return -errno;
        }
        while ((n = read(in, buf, sizeof buf)) > 0)
                if (write(out, buf, (size_t) n) != n)
                        break;
        close(in);
        if (fchown(out, uid, uid) < 0 || fchmod(out, mode) < 0) {
                close(out);
                return -errno;
        }
        close(out);
        return 0;
}

static int make_sandbox(Sandbox *sb) {
        static const char *const sub[] = { "fs", "fs/workspace", "fs/home", "fs/home/sandbox", "fs/cache", "fs/envs" };
        char path[512];
        int ws;

        snprintf(sb->dir, sizeof sb->dir, "%s/%s", root_dir, sb->key);
        if (mkdir(sb->dir, 0700) < 0)
                return -errno;
        for (size_t i = 0; i < ELEMENTSOF(sub); i++) {
                snprintf(path, sizeof path, "%s/%s", sb->dir, sub[i]);
                if (mkdir(path, 0755) < 0)
                        return -errno;
                /* fs/ and fs/home stay root's; the four roots are the sandbox's */
                if (strcmp(sub[i], "fs") && strcmp(sub[i], "fs/home") && chown(path, sb->uid, sb->uid) < 0)
                        return -errno;
        }
        snprintf(path, sizeof path, "%s/fs", sb->dir);
        sb->fs_fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        snprintf(path, sizeof path, "%s/fs/workspace", sb->dir);
        ws = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (sb->fs_fd < 0 || ws < 0)
                return -errno;
        if (copy_file(probe_binary, ws, "probe", sb->uid, 0755) < 0)
                return -EIO;
        /* A setuid-root copy: the workspace is nosuid and no_new_privs is set. */
        if (copy_file(probe_binary, ws, "probe-suid", 0, 04755) < 0)
                return -EIO;
        int fd = openat(ws, "marker-of-this-sandbox", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0 || fchown(fd, sb->uid, sb->uid) < 0)
                return -errno;
        close(fd);
        close(ws);
        return 0;
}

static int remove_tree_at(int dir_fd, const char *name) {
        int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        DIR *d;
        struct dirent *de;

        if (fd < 0)
                return unlinkat(dir_fd, name, 0);
        d = fdopendir(fd);
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                        (void) remove_tree_at(dirfd(d), de->d_name);
        closedir(d);
        return unlinkat(dir_fd, name, AT_REMOVEDIR);
}

/* Processes of UID anywhere on the host. */
static unsigned count_uid_processes(uid_t uid) {
        DIR *d = opendir("/proc");
        struct dirent *de;
        unsigned n = 0;
        char path[300], want[64], buf[4096];

        snprintf(want, sizeof want, "\nUid:\t%u\t", (unsigned) uid);
        while (d && (de = readdir(d))) {
                int fd;
                ssize_t k;

                if (de->d_name[0] < '0' || de->d_name[0] > '9')
                        continue;
                snprintf(path, sizeof path, "/proc/%s/status", de->d_name);
                fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        continue;
                k = read(fd, buf, sizeof buf - 1);
                close(fd);
                if (k > 0) {
                        buf[k] = '\0';
                        if (strstr(buf, want))
                                n++;
                }
        }
        if (d)
                closedir(d);
        return n;
}

static bool wait_no_uid_processes(uid_t uid, int msec) {
        for (int i = 0; i <= msec / 10; i++) {
                if (count_uid_processes(uid) == 0)
                        return true;
                usleep(10000);
        }
        return false;
}

/* ---- running commands ---- */

typedef struct Run {
        int r;                      /* launch result */
        LaunchError err;
        SpawnerExit x;
        bool ended;
        char out[65536];
        size_t out_len;
        char errout[8192];
        size_t err_len;
        char cgroup[256];           /* the exec's tracking cgroup, absolute */
} Run;

static LaunchSpec make_spec(Sandbox *sb, IsolationLevel level, char *const argv[]) {
        return (LaunchSpec) {
                .sandbox_key = sb->key, .hostname = sb->hostname, .uid = sb->uid, .gid = sb->uid,
                .level = level, .network = NETWORK_MODE_NONE, .fs_fd = sb->fs_fd,
                .stdin_fd = null_fd, .argv = argv, .envp = test_env,
                .tmpfs_bytes = 64ull << 20,
                .limits = { .open_files = 1024, .file_size_bytes = 1ull << 30 },
        };
}

static void drain(int out, int err, Run *run, int timeout_ms) {
        struct pollfd p[2] = { { .fd = out, .events = POLLIN }, { .fd = err, .events = POLLIN } };
        usec_t deadline = now_monotonic_usec() + (usec_t) timeout_ms * 1000;

        while (p[0].fd >= 0 || p[1].fd >= 0) {
                usec_t now = now_monotonic_usec();
                if (now >= deadline || poll(p, 2, (int) ((deadline - now) / 1000) + 1) <= 0)
                        break;
                for (int i = 0; i < 2; i++) {
                        char *buf = i == 0 ? run->out : run->errout;
                        size_t *len = i == 0 ? &run->out_len : &run->err_len;
                        size_t cap = i == 0 ? sizeof run->out : sizeof run->errout;
                        ssize_t n;

                        if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP)))
                                continue;
                        n = read(p[i].fd, buf + *len, cap - 1 - *len);
                        if (n <= 0)
                                p[i].fd = -1;
                        else
                                *len += (size_t) n;
                        buf[*len] = '\0';
                }
        }
}

static void run_spec(LaunchSpec *spec, Run *run) {
        _cleanup_(spawner_exec_unrefp) SpawnerExec *e = NULL;
        int out[2], err[2];

        memset(run, 0, sizeof *run);
        if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) {
                run->r = -errno;
                return;
        }
        spec->stdout_fd = out[1];
        spec->stderr_fd = err[1];
        run->r = spawner_launch(spawner, spec, NULL, NULL, &e, &run->err, NULL);
        close(out[1]);
        close(err[1]);
        if (run->r >= 0) {
                SpawnerInfo info;
                spawner_get_info(spawner, &info);
                if (!isempty(spawner_exec_cgroup(e)))
                        snprintf(run->cgroup, sizeof run->cgroup, "%s", spawner_exec_cgroup(e));
                drain(out[0], err[0], run, 20000);
                run->ended = spawner_exec_wait(e, 20 * USEC_PER_SEC, &run->x) >= 0;
                if (!run->ended)
                        (void) spawner_exec_kill(e, SIGKILL);
        }
        close(out[0]);
        close(err[0]);
}

static void run_in(Sandbox *sb, IsolationLevel level, char *const argv[], Run *run) {
        LaunchSpec spec = make_spec(sb, level, argv);
        run_spec(&spec, run);
}

#define PROBE(sb, level, run, ...) \
        run_in((sb), (level), (char *const[]) { (char *) "/workspace/probe", __VA_ARGS__, NULL }, (run))
#define SH(sb, level, run, script) \
        run_in((sb), (level), (char *const[]) { (char *) "/bin/sh", (char *) "-c", (char *) (script), NULL }, (run))

static bool exited_ok(const Run *r) {
        return r->r >= 0 && r->ended && r->x.exited && r->x.exit_code == 0;
}

/* Checks that the probe printed exactly WANT (plus a newline) and exited 0. */
static void expect_probe(const char *name, Run *r, const char *want) {
        char line[512];

        snprintf(line, sizeof line, "%s\n", want);
        check(name, exited_ok(r) && streq(r->out, line), "launch %d (%s), exit %d signal %d, stdout '%s' stderr '%s', want '%s'",
              r->r, r->err.message, r->x.exit_code, r->x.signal, r->out, r->errout, want);
}

/* ---- the tests, per level ---- */

static void test_basics(IsolationLevel L) {
        Run r;

        run_in(&sb_a, L, (char *const[]) { (char *) "/bin/true", NULL }, &r);
        check("true_exits_zero", exited_ok(&r), "launch %d (%s) exit %d", r.r, r.err.message, r.x.exit_code);

        SH(&sb_a, L, &r, "echo out; echo err >&2; exit 7");
        check("exit_code_and_output_pass_through",
              r.r >= 0 && r.x.exited && r.x.exit_code == 7 && streq(r.out, "out\n") && streq(r.errout, "err\n"),
              "exit %d out '%s' err '%s'", r.x.exit_code, r.out, r.errout);

        SH(&sb_a, L, &r, "kill -KILL $$");
        check("death_by_signal_is_reported_as_signal", r.r >= 0 && !r.x.exited && r.x.signal == SIGKILL,
              "exited %d code %d signal %d", r.x.exited, r.x.exit_code, r.x.signal);

        /* bwrap execvp()s the command itself: its launch child looks it up first, so both
         * answer the same. */
        run_in(&sb_a, L, (char *const[]) { (char *) "no-such-command-xyz", NULL }, &r);
        check("unknown_command_fails_at_the_exec_step", r.r == -ENOENT && streq(r.err.step, "exec"),
              "r %d step '%s' message '%s'", r.r, r.err.step, r.err.message);
        run_in(&sb_a, L, (char *const[]) { (char *) "/workspace/not-there", NULL }, &r);
        check("missing_command_path_fails_at_the_exec_step", r.r == -ENOENT && streq(r.err.step, "exec"),
              "r %d step '%s' message '%s'", r.r, r.err.step, r.err.message);
        run_in(&sb_a, L, (char *const[]) { (char *) "/tmp/not-there", NULL }, &r);
        check("command_under_fresh_tmp_fails_at_the_exec_step", r.r == -ENOENT && streq(r.err.step, "exec"),
              "r %d step '%s' message '%s'", r.r, r.err.step, r.err.message);
        run_in(&sb_a, L, (char *const[]) { (char *) "/workspace/marker-of-this-sandbox", NULL }, &r);
        check("non_executable_command_fails_at_the_exec_step_with_eacces", r.r == -EACCES && streq(r.err.step, "exec"),
              "r %d step '%s' message '%s'", r.r, r.err.step, r.err.message);
        run_in(&sb_a, L, (char *const[]) { (char *) "/workspace", NULL }, &r);
        check("directory_as_command_fails_at_the_exec_step_with_eacces", r.r == -EACCES && streq(r.err.step, "exec"),
              "r %d step '%s' message '%s'", r.r, r.err.step, r.err.message);
        {
                char link[600];
                snprintf(link, sizeof link, "%s/fs/workspace/true-link", sb_a.dir);
                (void) unlink(link);
                if (symlink("/bin/true", link) < 0 || lchown(link, sb_a.uid, sb_a.uid) < 0)
                        check("workspace_symlink_created", false, "%m");
        }
        run_in(&sb_a, L, (char *const[]) { (char *) "/workspace/true-link", NULL }, &r);
        check("workspace_symlink_to_system_command_runs", exited_ok(&r), "r %d (%s) exit %d err '%s'",
              r.r, r.err.message, r.x.exit_code, r.errout);
        {
                LaunchSpec rel = make_spec(&sb_a, L, (char *const[]) { (char *) "./true-link", NULL });
                run_spec(&rel, &r);
                check("relative_command_is_found_from_the_working_directory", exited_ok(&r),
                      "r %d (%s) exit %d err '%s'", r.r, r.err.message, r.x.exit_code, r.errout);
                static char *const env[] = { (char *) "PATH=/workspace:/usr/bin", NULL };
                rel = make_spec(&sb_a, L, (char *const[]) { (char *) "true-link", NULL });
                rel.envp = env;
                run_spec(&rel, &r);
                check("path_of_the_environment_is_searched", exited_ok(&r),
                      "r %d (%s) exit %d err '%s'", r.r, r.err.message, r.x.exit_code, r.errout);
        }

        LaunchSpec spec = make_spec(&sb_a, L, (char *const[]) { (char *) "/bin/true", NULL });
        spec.cwd = "/workspace/does-not-exist";
        run_spec(&spec, &r);
        if (!BWRAP)
                check("missing_cwd_fails_naming_the_step", r.r == -ENOENT && streq(r.err.step, "enter working directory"),
                      "r %d step '%s' message '%s'", r.r, r.err.step, r.err.message);
        else    /* BWRAP_DIFFERS: the same, for --chdir */
                check("missing_cwd_exits_1_with_bwraps_message", r.r >= 0 && r.x.exited && r.x.exit_code == 1 &&
                      strstr(r.errout, "Can't chdir to /workspace/does-not-exist: No such file or directory"),
                      "r %d exit %d err '%s'", r.r, r.x.exit_code, r.errout);

        spec = make_spec(&sb_a, L, (char *const[]) { (char *) "/bin/pwd", NULL });
        spec.cwd = "/home/sandbox";
        run_spec(&spec, &r);
        check("cwd_is_honoured", exited_ok(&r) && streq(r.out, "/home/sandbox\n"), "out '%s'", r.out);

        run_in(&sb_a, L, (char *const[]) { (char *) "pwd", NULL }, &r);
        check("default_cwd_is_workspace_and_path_is_searched", exited_ok(&r) && streq(r.out, "/workspace\n"),
              "r %d out '%s' (%s)", r.r, r.out, r.err.message);

        if (access("/usr/bin/python3", X_OK) == 0) {
                run_in(&sb_a, L, (char *const[]) { (char *) "python3", (char *) "-c",
                        (char *) "import threading; t = threading.Thread(target=print, args=('thread',)); t.start(); t.join()",
                        NULL }, &r);
                check("threads_work_through_the_clone_fallback", exited_ok(&r) && streq(r.out, "thread\n"),
                      "exit %d out '%s' err '%s'", r.x.exit_code, r.out, r.errout);
        }

        {
                /* 200 arguments of 4 KiB: 800 KiB in one launch message */
                static char big[4096];
                char *args[204];
                size_t n = 0;
                memset(big, 'a', sizeof big - 1);
                args[n++] = (char *) "/bin/sh";
                args[n++] = (char *) "-c";
                args[n++] = (char *) "echo $#";
                args[n++] = (char *) "sh";
                for (size_t i = 0; i < 199; i++)
                        args[n++] = big;
                args[n] = NULL;
                run_in(&sb_a, L, args, &r);
                check("large_argv_passes", exited_ok(&r) && streq(r.out, "199\n"), "r %d (%s) out '%s'", r.r,
                      r.err.message, r.out);
        }

        spec = make_spec(&sb_a, L, (char *const[]) { (char *) "/bin/true", NULL });
        spec.uid = 0;
        run_spec(&spec, &r);
        check("root_uid_is_refused", r.r == -EINVAL, "r %d", r.r);

        /* Only the command gets the request's environment: on bwrap, not bwrap's own loader
         * (it runs outside the sandbox's namespaces and filter). */
        LaunchSpec pre = make_spec(&sb_a, L, (char *const[]) { (char *) "/bin/true", NULL });
        char *const pre_env[] = { (char *) "PATH=/usr/bin:/bin", (char *) "LD_PRELOAD=/nonexistent-sandloom.so", NULL };
        pre.envp = pre_env;
        run_spec(&pre, &r);
        const char *hit = strstr(r.errout, "nonexistent-sandloom.so");
        check("request_environment_reaches_only_the_command", exited_ok(&r) && hit &&
              !strstr(hit + 1, "nonexistent-sandloom.so"), "exit %d err '%s'", r.x.exit_code, r.errout);

        PROBE(&sb_a, L, &r, "env");
        char want[1024] = "";
        size_t used = 0;
        for (size_t i = 0; test_env[i]; i++)
                used += (size_t) snprintf(want + used, sizeof want - used, "%s\n", test_env[i]);
        if (BWRAP)      /* BWRAP_DIFFERS: bwrap always sets PWD to the directory it entered */
                (void) snprintf(want + used, sizeof want - used, "PWD=/workspace\n");
        check(BWRAP ? "environment_is_the_spec_and_pwd" : "environment_is_exactly_the_spec", exited_ok(&r) &&
              streq(r.out, want), "env '%s'", r.out);
}

static void test_identity(IsolationLevel L) {
        char want[512];
        Run r;

        snprintf(want, sizeof want,
                 "ruid=%u euid=%u suid=%u rgid=%u egid=%u sgid=%u groups=0 eff=000000000 prm=000000000 "
                 "inh=000000000 bnd=0 amb=0 nnp=1 seccomp=2",
                 UID_A, UID_A, UID_A, UID_A, UID_A, UID_A);
        PROBE(&sb_a, L, &r, "ids");
        expect_probe("own_uid_no_groups_no_caps_nnp_seccomp", &r, want);

        run_in(&sb_a, L, (char *const[]) { (char *) "/workspace/probe-suid", (char *) "ids", NULL }, &r);
        expect_probe("setuid_root_binary_does_not_elevate", &r, want);

        if (L >= ISOLATION_LEVEL_STANDARD) {
                SH(&sb_a, L, &r, "grep -E '^(Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status | tr -s '\\t ' ' '");
                snprintf(want, sizeof want,
                         "Uid: %u %u %u %u\nGid: %u %u %u %u\nGroups: \nCapInh: 0000000000000000\n"
                         "CapPrm: 0000000000000000\nCapEff: 0000000000000000\nCapBnd: 0000000000000000\n"
                         "CapAmb: 0000000000000000\nNoNewPrivs: 1\nSeccomp: 2\n",
                         UID_A, UID_A, UID_A, UID_A, UID_A, UID_A, UID_A, UID_A);
                check("proc_self_status_shows_no_privilege", exited_ok(&r) && streq(r.out, want), "got '%s'", r.out);

                SH(&sb_a, L, &r, "cat /proc/self/oom_score_adj");
                check("oom_score_adj_is_ordinary", exited_ok(&r) && streq(r.out, "0\n"), "got '%s'", r.out);
        }

        PROBE(&sb_a, L, &r, "rlimits");
        check("rlimits_applied_no_core_dumps", exited_ok(&r) && startswith(r.out, "core=0 nofile=1024 ") &&
              strstr(r.out, " fsize=1073741824 "), "got '%s'", r.out);
}

static void test_filesystem(IsolationLevel L) {
        char path[512];
        Run r;

        PROBE(&sb_a, L, &r, "statvfs", "/usr");
        expect_probe("usr_is_readonly_nosuid_nodev", &r, "ro=1 nosuid=1 nodev=1 noexec=0");
        PROBE(&sb_a, L, &r, "statvfs", "/etc");
        expect_probe("etc_is_readonly_nosuid_nodev", &r, "ro=1 nosuid=1 nodev=1 noexec=0");
        PROBE(&sb_a, L, &r, "statvfs", "/");
        expect_probe("root_is_readonly", &r, "ro=1 nosuid=1 nodev=1 noexec=0");
        PROBE(&sb_a, L, &r, "open-write", "/usr/sandloom-test-file");
        expect_probe("cannot_create_in_usr", &r, "errno=EROFS");
        PROBE(&sb_a, L, &r, "open-write", "/etc/passwd");
        expect_probe("cannot_write_etc_passwd", &r, "errno=EACCES");

        static const char *const rw[] = { "/workspace", "/home/sandbox", "/cache", "/envs", "/tmp" };
        for (size_t i = 0; i < ELEMENTSOF(rw); i++) {
                char name[64];
                snprintf(path, sizeof path, "%s/written-by-sandbox", rw[i]);
                PROBE(&sb_a, L, &r, "open-write", path);
                snprintf(name, sizeof name, "can_write_%s", rw[i] + 1);
                expect_probe(name, &r, "ok");
                PROBE(&sb_a, L, &r, "statvfs", (char *) rw[i]);
                snprintf(name, sizeof name, "%s_is_nosuid_nodev", rw[i] + 1);
                expect_probe(name, &r, "ro=0 nosuid=1 nodev=1 noexec=0");
        }
        PROBE(&sb_a, L, &r, "statvfs", "/dev/shm");
        expect_probe("dev_shm_is_nosuid_nodev_noexec", &r, "ro=0 nosuid=1 nodev=1 noexec=1");

        PROBE(&sb_a, L, &r, "open-read", "/etc/shadow");
        expect_probe("etc_shadow_is_masked", &r, "errno=EACCES");
        PROBE(&sb_a, L, &r, "open-read", "/etc/hostname");
        expect_probe("daemon_given_path_is_masked", &r, "errno=EACCES");
        PROBE(&sb_a, L, &r, "open-read", "/etc/hosts");
        expect_probe("unmasked_etc_file_is_readable", &r, "ok");
        if (access("/etc/ssl/private", F_OK) == 0) {
                PROBE(&sb_a, L, &r, "listdir", "/etc/ssl/private");
                expect_probe("masked_etc_directory_cannot_be_listed", &r, "errno=EACCES");
        }

        SH(&sb_a, L, &r, "grep '^sandbox:' /etc/passwd /etc/group; id -un; echo ~");
        char want[512];
        snprintf(want, sizeof want, "/etc/passwd:sandbox:x:%u:%u:sandbox:/home/sandbox:/bin/sh\n/etc/group:sandbox:x:%u:\nsandbox\n/home/sandbox\n",
                 UID_A, UID_A, UID_A);
        check("synthetic_passwd_and_group", exited_ok(&r) && streq(r.out, want), "got '%s' err '%s'", r.out, r.errout);

        PROBE(&sb_a, L, &r, "stat", sb_b.dir);
        expect_probe("other_sandbox_host_path_is_not_visible", &r, "errno=ENOENT");
        PROBE(&sb_a, L, &r, "listdir", "/workspace");
        check("workspace_is_this_sandboxs", exited_ok(&r) && strstr(r.out, "marker-of-this-sandbox") && strstr(r.out, "probe"),
              "got '%s'", r.out);
        PROBE(&sb_a, L, &r, "stat", "/sys/kernel");
        expect_probe("no_host_sys", &r, "errno=ENOENT");
        if (L == ISOLATION_LEVEL_BASIC) {
                PROBE(&sb_a, L, &r, "stat", "/proc/1");
                expect_probe("no_proc_at_basic", &r, "errno=ENOENT");
        }

        SH(&sb_a, L, &r, "echo x > /dev/null && head -c 4 /dev/zero | wc -c && head -c 4 /dev/urandom | wc -c");
        check("dev_nodes_work", exited_ok(&r) && streq(r.out, "4\n4\n"), "got '%s' err '%s'", r.out, r.errout);
        PROBE(&sb_a, L, &r, "mknod-dev", "/tmp/evil-null");
        expect_probe("cannot_create_device_nodes", &r, "errno=EPERM");
        SH(&sb_a, L, &r, "ls /dev | tr '\\n' ' '");
        /* BWRAP_DIFFERS: bwrap's --dev adds core -> /proc/kcore (unreadable without CAP_SYS_RAWIO) */
        check("dev_is_minimal", exited_ok(&r) && streq(r.out, BWRAP ? "core fd full null ptmx pts random shm stderr stdin stdout tty urandom zero "
                                                                    : "fd full null ptmx pts random shm stderr stdin stdout tty urandom zero "),
              "got '%s'", r.out);
}

static void test_syscalls(IsolationLevel L) {
        static const struct {
                const char *name, *cmd, *arg, *want;
        } denied[] = {
                { "mount_is_denied", "mount", NULL, "errno=EPERM" },
                { "umount_is_denied", "umount", NULL, "errno=EPERM" },
                { "pivot_root_is_denied", "pivot_root", NULL, "errno=EPERM" },
                { "open_tree_is_denied", "open_tree", NULL, "errno=EPERM" },
                { "fsopen_is_denied", "fsopen", NULL, "errno=EPERM" },
                { "chroot_is_denied", "chroot", NULL, "errno=EPERM" },
                { "unshare_user_is_denied", "unshare", "user", "errno=EPERM" },
                { "unshare_net_is_denied", "unshare", "net", "errno=EPERM" },
                { "unshare_mnt_is_denied", "unshare", "mnt", "errno=EPERM" },
                { "clone_newuser_is_denied", "clone-ns", "user", "errno=EPERM" },
                { "clone_newnet_is_denied", "clone-ns", "net", "errno=EPERM" },
                { "setns_is_denied", "setns", NULL, "errno=EPERM" },
                { "clone3_answers_enosys", "clone3", NULL, "errno=ENOSYS" },
                { "keyctl_is_denied", "keyctl", NULL, "errno=EPERM" },
                { "add_key_is_denied", "add_key", NULL, "errno=EPERM" },
                { "bpf_is_denied", "bpf", NULL, "errno=EPERM" },
                { "perf_event_open_is_denied", "perf_event_open", NULL, "errno=EPERM" },
                { "userfaultfd_is_denied", "userfaultfd", NULL, "errno=EPERM" },
                { "io_uring_is_denied", "io_uring_setup", NULL, "errno=EPERM" },
                { "name_to_handle_at_is_denied", "name_to_handle_at", "/workspace", "errno=EPERM" },
                { "tiocsti_is_denied", "tiocsti", NULL, "errno=EPERM" },
                { "fs_ioc_fssetxattr_is_denied", "fssetxattr", "/workspace/marker-of-this-sandbox", "errno=EPERM" },
                { "sethostname_is_denied", "sethostname", NULL, "errno=EPERM" },
                /* positive controls: the same primitives where they are allowed */
                { "fork_works", "fork", NULL, "ok" },
                { "unshare_without_namespace_flags_works", "unshare-files", NULL, "ok" },
                { "other_tty_ioctl_works", "tiocgwinsz", NULL, "ok" },
                { "personality_query_works", "personality-query", NULL, "ok" },
        };
        Run r;

        for (size_t i = 0; i < ELEMENTSOF(denied); i++) {
                if (denied[i].arg)
                        PROBE(&sb_a, L, &r, (char *) denied[i].cmd, (char *) denied[i].arg);
                else
                        PROBE(&sb_a, L, &r, (char *) denied[i].cmd);
                expect_probe(denied[i].name, &r, denied[i].want);
        }

        PROBE(&sb_a, L, &r, "ptrace");
        expect_probe(L >= ISOLATION_LEVEL_STRICT ? "ptrace_is_denied_at_strict" : "ptrace_own_child_works_below_strict",
                     &r, L >= ISOLATION_LEVEL_STRICT ? "errno=EPERM" : "ok");

        /* The parent is the spawner (native, basic), bwrap's monitor (bwrap, basic: same uid,
         * but outside the sandbox's user namespace and unfiltered, so it must stay out of
         * reach) or pid 1. BWRAP_DIFFERS at standard: bwrap's pid 1 is dumpable, in the
         * sandbox's own user namespace, and can be traced (see the /proc/1 test). */
        PROBE(&sb_a, L, &r, "ptrace-parent");
        if (BWRAP && L == ISOLATION_LEVEL_STANDARD)
                expect_probe("ptrace_of_bwraps_init_works_at_standard", &r, "ok");
        else
                expect_probe("ptrace_of_the_parent_is_denied", &r, "errno=EPERM");
        PROBE(&sb_a, L, &r, "personality");
        expect_probe(L >= ISOLATION_LEVEL_STRICT ? "personality_change_is_denied_at_strict"
                                                 : "personality_change_works_below_strict",
                     &r, L >= ISOLATION_LEVEL_STRICT ? "errno=EPERM" : "ok");

        PROBE(&sb_a, L, &r, "i386");
        check("i386_syscall_abi_kills_the_process", r.r >= 0 && !r.x.exited && r.x.signal == SIGSYS && r.out_len == 0,
              "exited %d code %d signal %d out '%s'", r.x.exited, r.x.exit_code, r.x.signal, r.out);
        PROBE(&sb_a, L, &r, "x32");
        check("x32_syscall_abi_kills_the_process", r.r >= 0 && !r.x.exited && r.x.signal == SIGSYS && r.out_len == 0,
              "exited %d code %d signal %d out '%s'", r.x.exited, r.x.exit_code, r.x.signal, r.out);
}

static void test_host_and_proc(IsolationLevel L) {
        char before[256], after[256];
        Run r;

        gethostname(before, sizeof before);
        PROBE(&sb_a, L, &r, "hostname");
        expect_probe("hostname_is_the_sandboxs", &r, "sbx-a");
        PROBE(&sb_a, L, &r, "sethostname");
        gethostname(after, sizeof after);
        check("host_hostname_unchanged", streq(before, after) && strstr(r.out, "errno=EPERM"), "before '%s' after '%s'",
              before, after);

        PROBE(&sb_a, L, &r, "fds");
        expect_probe("only_stdio_is_open", &r, "fds=0,1,2");

        if (L < ISOLATION_LEVEL_STANDARD) {
                /* The parent: the root spawner (native), or bwrap's monitor, which has the
                 * sandbox's uid (BWRAP_DIFFERS): killing it only ends this exec, all of it. */
                SH(&sb_c, L, &r, "kill -9 $PPID 2>/dev/null; echo $?; sleep 5");
                if (!BWRAP)
                        check("parent_cannot_be_signalled", r.r >= 0 && r.x.exited && r.x.exit_code == 0 &&
                              streq(r.out, "1\n"), "exit %d signal %d out '%s'", r.x.exit_code, r.x.signal, r.out);
                else
                        check("killing_bwraps_monitor_ends_only_this_exec", r.r >= 0 && !r.x.exited &&
                              r.x.signal == SIGKILL && (r.out_len == 0 || streq(r.out, "0\n")) &&
                              wait_no_uid_processes(UID_C, 10000),
                              "exit %d signal %d out '%s' left %u", r.x.exit_code, r.x.signal, r.out,
                              count_uid_processes(UID_C));
                return;
        }
        SH(&sb_a, L, &r, "cat /proc/1/comm; grep PPid /proc/1/status | tr -d '\\t'; ls /proc/self/fd | tr '\\n' ' '");
        /* BWRAP_DIFFERS: pid 1 is bwrap's own reaper */
        check(BWRAP ? "proc_1_is_bwraps_init_and_no_fd_leaks" : "proc_1_is_our_init_and_no_fd_leaks", exited_ok(&r) &&
              streq(r.out, BWRAP ? "bwrap\nPPid:0\n0 1 2 3 " : "sandloom-init\nPPid:0\n0 1 2 3 "), "got '%s'", r.out);
        if (!BWRAP) {
                PROBE(&sb_a, L, &r, "open-read", "/proc/1/environ");
                expect_probe("init_is_not_dumpable", &r, "errno=EACCES");
                SH(&sb_a, L, &r, "ls /proc/1/fd 2>&1 >/dev/null | grep -c 'Permission denied'");
                check("init_fds_cannot_be_listed", exited_ok(&r) && streq(r.out, "1\n"), "got '%s' err '%s'", r.out,
                      r.errout);
        } else {
                /* BWRAP_DIFFERS: bwrap's pid 1 stays dumpable (bwrap never clears the flag). It
                 * runs as the sandbox's uid in the sandbox's user namespace, without any
                 * capability and under the same seccomp filter, so what it exposes must be
                 * nothing the sandbox does not have: an empty environment (bwrap is exec'd
                 * with none), stdio, and the eventfd telling bwrap's monitor the exit status. */
                SH(&sb_a, L, &r, "wc -c < /proc/1/environ; for f in /proc/1/fd/*; do readlink $f; done | "
                                 "sed 's/^pipe:.*/pipe/' | LC_ALL=C sort | tr '\\n' ' '");
                check("bwraps_init_exposes_no_environment_and_only_stdio_and_its_eventfd", exited_ok(&r) &&
                      streq(r.out, "0\n/dev/null anon_inode:[eventfd] pipe pipe "), "got '%s' err '%s'", r.out, r.errout);
        }
        SH(&sb_a, L, &r, "echo /proc/[0-9]*");
        check("only_own_processes_visible", exited_ok(&r) && streq(r.out, "/proc/1 /proc/2\n"), "got '%s'", r.out);
        PROBE(&sb_a, L, &r, "kill", "1", "9");
        expect_probe("killing_init_from_inside_does_nothing", &r, "ok");

        SH(&sb_a, L, &r, "grep -v ':/$' /proc/self/cgroup | wc -l");
        if (L >= ISOLATION_LEVEL_STRICT)
                check("cgroup_namespace_hides_the_host_hierarchy", exited_ok(&r) && streq(r.out, "0\n"), "got '%s'", r.out);
        else
                check("without_cgroup_namespace_the_path_shows", exited_ok(&r) && !streq(r.out, "0\n"), "got '%s'", r.out);
}

static void test_trees(IsolationLevel L) {
        SpawnerInfo info;
        Run r;

        spawner_get_info(spawner, &info);
        if (!info.cgroup_tracking && L < ISOLATION_LEVEL_STANDARD) {
                skip("background_processes_do_not_survive", "no cgroup v2 tracking and no pid namespace");
                return;
        }
        SH(&sb_c, L, &r, "sleep 100 & setsid sleep 101 & (sleep 102 &); nohup sleep 103 >/dev/null 2>&1 & "
                         "sh -c 'setsid sh -c \"sleep 104 &\" &' ; echo started");
        /* At the notification every process has exited; an orphan may still be a zombie
         * for a moment (past cgroup_exit(), not yet reaped). */
        check("background_processes_do_not_survive", exited_ok(&r) && streq(r.out, "started\n") &&
              wait_no_uid_processes(UID_C, 10000), "exit %d out '%s' left %u", r.x.exit_code, r.out,
              count_uid_processes(UID_C));
        if (info.cgroup_tracking) {
                struct stat st;
                check("tracking_cgroup_is_gone_after_the_exit", !isempty(r.cgroup) && stat(r.cgroup, &st) < 0 &&
                      errno == ENOENT, "cgroup '%s'", r.cgroup);
        }

        /* A tree that ignores SIGTERM: TERM does nothing, KILL ends all of it. */
        _cleanup_(spawner_exec_unrefp) SpawnerExec *e = NULL;
        LaunchSpec spec = make_spec(&sb_c, L, (char *const[]) {
                (char *) "/bin/sh", (char *) "-c", (char *) "trap '' TERM; sleep 1000 & setsid sleep 1001 & sleep 1002", NULL });
        LaunchError err;
        SpawnerExit x = {};
        spec.stdout_fd = spec.stderr_fd = null_fd;
        int k = spawner_launch(spawner, &spec, NULL, NULL, &e, &err, NULL);
        if (k < 0) {
                check("sigterm_ignoring_tree_is_killed", false, "launch: %s", err.message);
                return;
        }
        usleep(200000);
        if (info.cgroup_tracking) {
                char path[512];
                struct stat st;
                snprintf(path, sizeof path, "%s/cgroup.procs", spawner_exec_cgroup(e));
                check("tracking_cgroup_exists_while_running", stat(path, &st) == 0, "no %s", path);
        }
        int t = spawner_exec_kill(e, SIGTERM);
        usleep(300000);
        bool alive = !spawner_exec_has_ended(e) && count_uid_processes(UID_C) >= 4;
        int kr = spawner_exec_kill(e, SIGKILL);
        int w = spawner_exec_wait(e, 5 * USEC_PER_SEC, &x);
        check("sigterm_ignoring_tree_is_killed", t == 0 && alive && kr == 0 && w == 0 && !x.exited &&
              x.signal == SIGKILL && wait_no_uid_processes(UID_C, 10000),
              "term %d alive %d kill %d wait %d signal %d left %u", t, alive, kr, w, x.signal,
              count_uid_processes(UID_C));
        check("kill_after_end_is_esrch", spawner_exec_kill(e, SIGKILL) == -ESRCH, "expected -ESRCH");
        spawner_exec_unref(TAKE_PTR(e));

        /* And a plain one: SIGTERM reaches the main process. */
        spec.argv = (char *const[]) { (char *) "/bin/sleep", (char *) "1000", NULL };
        k = spawner_launch(spawner, &spec, NULL, NULL, &e, &err, NULL);
        if (k >= 0) {
                usleep(100000);
                (void) spawner_exec_kill(e, SIGTERM);
                w = spawner_exec_wait(e, 5 * USEC_PER_SEC, &x);
        }
        check("sigterm_reaches_the_main_process", k >= 0 && w == 0 && !x.exited && x.signal == SIGTERM,
              "launch %d wait %d exited %d signal %d", k, w, x.exited, x.signal);
}

static int host_listener(uint16_t *ret_port) {
        struct sockaddr_in a = { .sin_family = AF_INET };
        socklen_t l = sizeof a;
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
        if (fd < 0 || bind(fd, (struct sockaddr *) &a, sizeof a) < 0 || listen(fd, 4) < 0 ||
            getsockname(fd, (struct sockaddr *) &a, &l) < 0)
                return -1;
        *ret_port = ntohs(a.sin_port);
        return fd;
}

static void test_network(IsolationLevel L) {
        char port[16], port2[16];
        uint16_t p = 0;
        int lfd = host_listener(&p);
        Run r;

        snprintf(port, sizeof port, "%u", p);
        PROBE(&sb_a, L, &r, "connect-only", port);
        expect_probe("host_loopback_port_is_unreachable", &r, "errno=ECONNREFUSED");
        {
                LaunchSpec hs = make_spec(&sb_a, L, (char *const[]) { (char *) "/workspace/probe", (char *) "connect-only", port, NULL });
                hs.network = NETWORK_MODE_HOST;
                run_spec(&hs, &r);
                expect_probe("host_network_mode_reaches_host_loopback", &r, "ok");
        }
        close(lfd);
        snprintf(port2, sizeof port2, "%u", 20000 + (unsigned) L * 100 + (unsigned) (getpid() % 97));
        PROBE(&sb_a, L, &r, "selfconnect", port2);
        expect_probe("loopback_inside_works", &r, "ok");

        /* A server from one launch answers the next launch of the same sandbox only. */
        _cleanup_(spawner_exec_unrefp) SpawnerExec *srv = NULL;
        int out[2];
        LaunchError err;
        char buf[64] = "";
        snprintf(port2, sizeof port2, "%u", 30000 + (unsigned) L * 100 + (unsigned) (getpid() % 97));
        LaunchSpec spec = make_spec(&sb_a, L, (char *const[]) {
                (char *) "/workspace/probe", (char *) "listen", port2, (char *) "10", NULL });
        if (pipe2(out, O_CLOEXEC) < 0)
                return;
        spec.stdout_fd = out[1];
        spec.stderr_fd = null_fd;
        int k = spawner_launch(spawner, &spec, NULL, NULL, &srv, &err, NULL);
        close(out[1]);
        struct pollfd pf = { .fd = out[0], .events = POLLIN };
        if (k >= 0 && poll(&pf, 1, 5000) == 1)
                (void) !read(out[0], buf, sizeof buf - 1);
        check("background_server_started", k >= 0 && streq(buf, "listening\n"), "launch %d out '%s'", k, buf);

        PROBE(&sb_a, L, &r, "connect", port2);
        expect_probe("server_reachable_from_next_launch_of_same_sandbox", &r, "ok hello");
        PROBE(&sb_b, L, &r, "connect", port2);
        expect_probe("server_unreachable_from_another_sandbox", &r, "errno=ECONNREFUSED");
        if (k >= 0) {
                (void) spawner_exec_kill(srv, SIGKILL);
                (void) spawner_exec_wait(srv, 5 * USEC_PER_SEC, NULL);
        }
        close(out[0]);
}

/* ---- once ---- */

/* The daemon killed with SIGKILL: its spawner must take every sandbox process along. */
static void test_daemon_death(void) {
        int ready[2];
        pid_t daemon;
        char c = 0;

        level_name = "all";
        if (pipe2(ready, O_CLOEXEC) < 0)
                return;
        daemon = fork();
        if (daemon == 0) {
                Spawner *s;
                char msg[256];

                if (spawner_start(&spawner_opts, &s, msg, sizeof msg) < 0)
                        _exit(1);
                for (IsolationLevel L = ISOLATION_LEVEL_MIN; L <= ISOLATION_LEVEL_MAX; L++) {
                        SpawnerExec *e;
                        LaunchError err;
                        LaunchSpec spec = make_spec(&sb_c, L, (char *const[]) {
                                (char *) "/bin/sh", (char *) "-c", (char *) "sleep 1000 & setsid sleep 1001 & sleep 1002", NULL });
                        spec.stdout_fd = spec.stderr_fd = null_fd;
                        if (spawner_launch(s, &spec, NULL, NULL, &e, &err, NULL) < 0)
                                _exit(2);
                }
                (void) !write(ready[1], "r", 1);
                for (;;)
                        pause();
        }
        close(ready[1]);
        bool started = read(ready[0], &c, 1) == 1;
        close(ready[0]);
        usleep(200000);
        unsigned before = count_uid_processes(UID_C);
        kill(daemon, SIGKILL);
        waitpid(daemon, NULL, 0);
        check("daemon_sigkill_takes_every_sandbox_process_along", started && before >= 9 && wait_no_uid_processes(UID_C, 5000),
              "started %d before %u after %u", started, before, count_uid_processes(UID_C));
}

/* The helper killed with SIGKILL: the daemon side kills what is left and reports the
 * running execs as lost. */
static void exit_seen(SpawnerExec *e, const SpawnerExit *x, void *userdata) {
        int *lost = userdata;
        if (x->lost)
                __atomic_add_fetch(lost, 1, __ATOMIC_SEQ_CST);
}

static void test_spawner_death(void) {
        SpawnerExec *e[ISOLATION_LEVEL_MAX + 1] = {};
        Spawner *s;
        SpawnerInfo info;
        char msg[256];
        int lost = 0, launched = 0;

        level_name = "all";
        if (spawner_start(&spawner_opts, &s, msg, sizeof msg) < 0) {
                check("spawner_sigkill_leaves_nothing", false, "start: %s", msg);
                return;
        }
        spawner_get_info(s, &info);
        for (IsolationLevel L = ISOLATION_LEVEL_MIN; L <= ISOLATION_LEVEL_MAX; L++) {
                LaunchError err;
                LaunchSpec spec = make_spec(&sb_c, L, (char *const[]) {
                        (char *) "/bin/sh", (char *) "-c", (char *) "setsid sleep 1001 & sleep 1002", NULL });
                spec.stdout_fd = spec.stderr_fd = null_fd;
                if (spawner_launch(s, &spec, exit_seen, &lost, &e[L], &err, NULL) == 0)
                        launched++;
        }
        usleep(200000);
        unsigned before = count_uid_processes(UID_C);
        kill(info.pid, SIGKILL);
        bool all_lost = true;
        for (IsolationLevel L = ISOLATION_LEVEL_MIN; L <= ISOLATION_LEVEL_MAX; L++) {
                SpawnerExit x = {};
                if (!e[L] || spawner_exec_wait(e[L], 10 * USEC_PER_SEC, &x) < 0 || !x.lost)
                        all_lost = false;
                spawner_exec_unref(e[L]);
        }
        bool gone = wait_no_uid_processes(UID_C, 5000);
        LaunchError err;
        SpawnerExec *late = NULL;
        LaunchSpec spec = make_spec(&sb_c, ISOLATION_LEVEL_BASIC, (char *const[]) { (char *) "/bin/true", NULL });
        spec.stdout_fd = spec.stderr_fd = null_fd;
        int r = spawner_launch(s, &spec, NULL, NULL, &late, &err, NULL);
        spawner_stop(s);
        check("spawner_sigkill_leaves_nothing_and_execs_are_lost",
              launched == 3 && before >= 6 && all_lost && lost == 3 && gone && r == -ESHUTDOWN,
              "launched %d before %u lost %d all_lost %d gone %d late launch %d", launched, before, lost, all_lost,
              gone, r);
}

typedef struct Worker {
        pthread_t t;
        Sandbox *sb;
        IsolationLevel level;
        int ok;
} Worker;

static void *worker_main(void *userdata) {
        Worker *w = userdata;

        for (int i = 0; i < 20; i++) {
                SpawnerExec *e = NULL;
                LaunchError err;
                SpawnerExit x;
                LaunchSpec spec = make_spec(w->sb, w->level, (char *const[]) { (char *) "/bin/true", NULL });
                spec.stdout_fd = spec.stderr_fd = null_fd;
                if (spawner_launch(spawner, &spec, NULL, NULL, &e, &err, NULL) < 0)
                        continue;
                if (spawner_exec_wait(e, 20 * USEC_PER_SEC, &x) == 0 && x.exited && x.exit_code == 0)
                        w->ok++;
                spawner_exec_unref(e);
        }
        return NULL;
}

static void test_concurrency(IsolationLevel strongest) {
        Worker w[8];
        int ok = 0;
        usec_t t0 = now_monotonic_usec();

        level_name = "all";
        for (size_t i = 0; i < ELEMENTSOF(w); i++) {
                w[i] = (Worker) { .sb = i % 3 == 0 ? &sb_a : i % 3 == 1 ? &sb_b : &sb_c,
                                  .level = i % 2 ? strongest : ISOLATION_LEVEL_BASIC };
                pthread_create(&w[i].t, NULL, worker_main, &w[i]);
        }
        for (size_t i = 0; i < ELEMENTSOF(w); i++) {
                pthread_join(w[i].t, NULL);
                ok += w[i].ok;
        }
        usec_t dt = now_monotonic_usec() - t0;
        printf("# 160 launches from 8 threads in %llu ms (%.0f/s)\n", (unsigned long long) (dt / 1000),
               160.0 * 1e6 / (double) dt);
        check("concurrent_launches_from_many_threads", ok == 160, "%d of 160 succeeded", ok);
}

static void test_contexts(void) {
        unsigned n = 99;
        Run r;

        level_name = "all";
        SpawnerInfo info;
        spawner_get_info(spawner, &info);
        kill(info.pid, SIGTERM);
        kill(info.pid, SIGINT);
        kill(info.pid, SIGHUP);
        usleep(100000);
        run_in(&sb_b, ISOLATION_LEVEL_BASIC, (char *const[]) { (char *) "/bin/true", NULL }, &r);
        check("spawner_ignores_termination_signals_meant_for_the_daemon", exited_ok(&r) && kill(info.pid, 0) == 0,
              "launch %d (%s)", r.r, r.err.message);
        check("context_kept_after_exec", spawner_count_contexts(spawner, &n) == 0 && n >= 1, "contexts %u", n);
        usleep(1600000);        /* linger: 1 s in this suite */
        (void) spawner_drop_sandbox(spawner, sb_a.key);
        (void) spawner_drop_sandbox(spawner, sb_c.key);
        (void) spawner_drop_sandbox(spawner, "probe-never-used");
        check("contexts_released_after_linger_and_drop", spawner_count_contexts(spawner, &n) == 0 && n == 0,
              "contexts %u", n);

        LaunchRuntime rt = LAUNCH_RUNTIME_NATIVE;
        check("runtime_names_round_trip", launch_runtime_from_string("bwrap", &rt) == 0 && rt == LAUNCH_RUNTIME_BWRAP &&
              streq(launch_runtime_to_string(LAUNCH_RUNTIME_NATIVE), "native") &&
              launch_runtime_from_string("runc", &rt) == -EINVAL, "runtime names");

        NetworkMode mode = NETWORK_MODE_HOST;
        check("level_names_round_trip", isolation_level_from_string("strict") == ISOLATION_LEVEL_STRICT &&
              streq(isolation_level_to_string(ISOLATION_LEVEL_BASIC), "basic") &&
              isolation_level_from_string("auto") == ISOLATION_LEVEL_INVALID, "level names");
        check("network_mode_isolated_means_none", network_mode_from_string("isolated", &mode) == 0 &&
              mode == NETWORK_MODE_NONE && network_mode_from_string("bridge", &mode) == -EINVAL, "modes");

        char buf[64];
        check("hostname_sanitised", launch_sanitize_hostname("My_Sandbox.v1:x--", buf, sizeof buf) == 0 &&
              streq(buf, "my-sandbox-v1-x"), "got '%s'", buf);
        check("hostname_sanitised_never_empty", launch_sanitize_hostname("::", buf, sizeof buf) == 0 &&
              streq(buf, "sandbox"), "got '%s'", buf);
}

/* A missing bwrap refuses the spawner's start; one that fails shows in the probe's message. */
static void test_bwrap_failures(void) {
        SpawnerOptions opts = { .runtime = LAUNCH_RUNTIME_BWRAP, .bwrap_path = "/nonexistent/bwrap" };
        char msg[256] = "";
        ProbeReport report = {};
        Spawner *s = NULL;
        int r, dir_fd;

        level_name = "all";
        r = spawner_start(&opts, &s, msg, sizeof msg);
        check("missing_bwrap_refuses_the_spawner", r == -ENOENT && strstr(msg, "runtime bwrap: /nonexistent/bwrap"),
              "r %d msg '%s'", r, msg);
        if (r >= 0)
                spawner_stop(s);

        /* A shell as bwrap: it rejects bwrap's options on stderr, as "bwrap: ...", exit 2. */
        opts.bwrap_path = "/bin/sh";
        r = spawner_start(&opts, &s, msg, sizeof msg);
        if (r < 0) {
                check("probe_shows_bwraps_error", false, "start: %s", msg);
                return;
        }
        dir_fd = open(root_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        r = probe_levels(s, dir_fd, UID_PROBE, NETWORK_MODE_NONE, &report);
        close(dir_fd);
        spawner_stop(s);
        check("probe_shows_bwraps_error", r == 0 && report.strongest == ISOLATION_LEVEL_INVALID &&
              startswith(report.levels[ISOLATION_LEVEL_BASIC].message, "/bin/true ended with exit code 2: bwrap: "),
              "r %d strongest %d basic '%s'", r, report.strongest, report.levels[ISOLATION_LEVEL_BASIC].message);
}

/* The whole suite on one runtime. */
static void run_suite(bool ci) {
        static const char *const masks[] = { "/etc/hostname", NULL };
        ProbeReport report;
        char msg[256];
        int r, dir_fd;

        spawner_opts = (SpawnerOptions) { .runtime = runtime };
        if (runtime == LAUNCH_RUNTIME_BWRAP)
                test_bwrap_failures();
        level_name = "all";
        test_daemon_death();
        test_spawner_death();

        SpawnerOptions opts = { .mask_paths = masks, .netns_linger_usec = USEC_PER_SEC, .runtime = runtime };
        r = spawner_start(&opts, &spawner, msg, sizeof msg);
        if (r < 0) {
                check("spawner_starts", false, "%s (%s)", msg, strerror(-r));
                return;
        }
        SpawnerInfo info;
        spawner_get_info(spawner, &info);
        check("spawner_reports_its_runtime", info.runtime == runtime, "runtime %d", info.runtime);

        dir_fd = open(root_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        r = probe_levels(spawner, dir_fd, UID_PROBE, NETWORK_MODE_NONE, &report);
        close(dir_fd);
        level_name = "probe";
        check("probe_runs", r == 0 && report.strongest != ISOLATION_LEVEL_INVALID, "r %d strongest %d", r, report.strongest);

        for (IsolationLevel L = ISOLATION_LEVEL_MIN; L <= ISOLATION_LEVEL_MAX; L++) {
                level_name = isolation_level_to_string(L);
                if (r < 0 || !report.levels[L].ok) {
                        if (ci)
                                check("level_works_on_ci", false, "%s", report.levels[L].message);
                        else
                                skip("level", report.levels[L].message);
                        continue;
                }
                test_basics(L);
                test_identity(L);
                test_filesystem(L);
                test_syscalls(L);
                test_host_and_proc(L);
                test_trees(L);
                test_network(L);
        }
        if (r == 0 && report.strongest != ISOLATION_LEVEL_INVALID)
                test_concurrency(report.strongest);
        test_contexts();

        spawner_stop(spawner);
        spawner = NULL;
        level_name = "all";
        check("nothing_left_after_stop", count_uid_processes(UID_A) + count_uid_processes(UID_B) +
              count_uid_processes(UID_C) == 0, "processes left");
}

int main(int argc, char **argv) {
        bool ci = getenv("CI") && streq(getenv("CI"), "true");
        LaunchRuntime runtimes[2] = { LAUNCH_RUNTIME_NATIVE, LAUNCH_RUNTIME_BWRAP };
        size_t n_runtimes = 2;

        setvbuf(stdout, NULL, _IOLBF, 0);
        if (argc < 2) {
                fprintf(stderr, "usage: test-isolation PATH-TO-sandbox-probe [native|bwrap]...\n");
                return 2;
        }
        probe_binary = argv[1];
        if (argc > 2) {
                n_runtimes = 0;
                for (int i = 2; i < argc && n_runtimes < ELEMENTSOF(runtimes); i++)
                        if (launch_runtime_from_string(argv[i], &runtimes[n_runtimes++]) < 0) {
                                fprintf(stderr, "unknown runtime %s\n", argv[i]);
                                return 2;
                        }
        }
        if (geteuid() != 0) {
                printf("the isolation suite needs root\n0 passed, 0 failed, 1 skipped\n");
                return ci ? 1 : 77;
        }
        if (!mkdtemp(root_dir) || chmod(root_dir, 0711) < 0) {
                perror("mkdtemp");
                return 1;
        }
        null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (make_sandbox(&sb_a) < 0 || make_sandbox(&sb_b) < 0 || make_sandbox(&sb_c) < 0) {
                perror("making the sandbox trees");
                return 1;
        }

        for (size_t i = 0; i < n_runtimes; i++) {
                runtime = runtimes[i];
                level_name = "all";
                /* CI installs bubblewrap (scripts/deps): there the bwrap runtime must run. */
                if (runtime == LAUNCH_RUNTIME_BWRAP && access(BWRAP_DEFAULT_PATH, X_OK) < 0) {
                        if (ci)
                                check("bwrap_is_installed_on_ci", false, "%s: %s", BWRAP_DEFAULT_PATH, strerror(errno));
                        else
                                skip("runtime", BWRAP_DEFAULT_PATH " is not installed");
                        continue;
                }
                run_suite(ci);
        }
        remove_tree_at(AT_FDCWD, root_dir);

        printf("%u passed, %u failed, %u skipped\n", passed, failed, skipped);
        return failed ? 1 : 0;
}
