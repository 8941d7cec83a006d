/* SPDX-License-Identifier: MIT */
#include "probe.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macros.h"
#include "random-util.h"
#include "string-util.h"

#define PROBE_TIMEOUT_USEC (30 * USEC_PER_SEC)

static const char *const tree[] = { "fs", "fs/workspace", "fs/home", "fs/home/sandbox", "fs/cache", "fs/envs" };

static int make_tree(int dir_fd, uid_t uid) {
        for (size_t i = 0; i < ELEMENTSOF(tree); i++) {
                if (mkdirat(dir_fd, tree[i], 0755) < 0)
                        return negative_errno();
                if (fchownat(dir_fd, tree[i], uid, uid, AT_SYMLINK_NOFOLLOW) < 0)
                        return negative_errno();
        }
        return 0;
}

static void remove_tree(int parent_fd, const char *name) {
        _cleanup_close_ int fd = openat(parent_fd, name, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);

        if (fd < 0)
                return;
        /* /bin/true writes nothing: the tree holds only our empty directories. */
        for (size_t i = ELEMENTSOF(tree); i > 0; i--)
                (void) unlinkat(fd, tree[i - 1], AT_REMOVEDIR);
        (void) unlinkat(parent_fd, name, AT_REMOVEDIR);
}

/* The first line the probe command (or bwrap, which reports its failures there) wrote to
 * stderr, appended to RES's message. */
static void add_stderr(int fd, ProbeLevelResult *res) {
        char buf[160], *nl;
        ssize_t n;

        if (fd < 0)
                return;
        n = read(fd, buf, sizeof buf - 1);
        if (n <= 0)
                return;
        buf[n] = '\0';
        nl = strchr(buf, '\n');
        if (nl)
                *nl = '\0';
        (void) bsprintf(res->message + strlen(res->message), sizeof res->message - strlen(res->message), ": %s", buf);
}

static int probe_one(Spawner *s, int fs_fd, int null_fd, uid_t uid, const char *key, IsolationLevel level,
                     NetworkMode network, ProbeLevelResult *res) {
        _cleanup_(spawner_exec_unrefp) SpawnerExec *e = NULL;
        _cleanup_close_ int err_r = -EBADF, err_w = -EBADF;
        int p[2];
        char *const argv[] = { (char *) "/bin/true", NULL };
        char *const envp[] = { (char *) "PATH=/usr/bin:/bin", NULL };
        LaunchSpec spec = {
                .sandbox_key = key, .hostname = "probe", .uid = uid, .gid = uid,
                .level = level, .network = network,
                .fs_fd = fs_fd, .stdin_fd = null_fd, .stdout_fd = null_fd, .stderr_fd = null_fd,
                .argv = argv, .envp = envp, .tmpfs_bytes = 1024 * 1024,
        };
        LaunchError err;
        SpawnerExit x;
        int r;

        if (pipe2(p, O_CLOEXEC | O_NONBLOCK) >= 0) {
                err_r = p[0];
                err_w = p[1];
                spec.stderr_fd = err_w;
        }
        r = spawner_launch(s, &spec, NULL, NULL, &e, &err, NULL);
        err_w = safe_close(err_w);
        if (r < 0) {
                (void) strscpy(res->message, sizeof res->message, err.message);
                return 0;
        }
        r = spawner_exec_wait(e, PROBE_TIMEOUT_USEC, &x);
        if (r < 0) {
                (void) spawner_exec_kill(e, SIGKILL);
                (void) strscpy(res->message, sizeof res->message, "/bin/true did not end within 30 s");
                return 0;
        }
        if (!x.exited || x.exit_code != 0) {
                (void) bsprintf(res->message, sizeof res->message, "/bin/true ended with %s %d",
                                x.exited ? "exit code" : "signal", x.exited ? x.exit_code : x.signal);
                add_stderr(err_r, res);
                return 0;
        }
        res->ok = true;
        return 0;
}

static int probe_in(Spawner *s, int scratch_dir_fd, const char *name, uid_t uid, NetworkMode network,
                    ProbeReport *report) {
        _cleanup_close_ int dir_fd = -EBADF, fs_fd = -EBADF, null_fd = -EBADF;
        int r;

        dir_fd = openat(scratch_dir_fd, name, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (dir_fd < 0)
                return negative_errno();
        r = make_tree(dir_fd, uid);
        if (r < 0)
                return r;
        fs_fd = openat(dir_fd, "fs", O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fs_fd < 0)
                return negative_errno();
        null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null_fd < 0)
                return negative_errno();

        for (IsolationLevel l = ISOLATION_LEVEL_MIN; l <= ISOLATION_LEVEL_MAX; l++) {
                r = probe_one(s, fs_fd, null_fd, uid, name, l, network, &report->levels[l]);
                if (r < 0)
                        return r;
                if (report->levels[l].ok)
                        report->strongest = l;
        }
        (void) spawner_drop_sandbox(s, name);
        return 0;
}

int probe_levels(Spawner *s, int scratch_dir_fd, uid_t uid, NetworkMode network, ProbeReport *ret) {
        ProbeReport report = {};
        char name[48], hex[17];
        int r;

        r = random_hex(hex, sizeof hex, 8);
        if (r < 0)
                return r;
        (void) bsprintf(name, sizeof name, "probe-%s", hex);
        if (mkdirat(scratch_dir_fd, name, 0700) < 0)
                return negative_errno();
        r = probe_in(s, scratch_dir_fd, name, uid, network, &report);
        remove_tree(scratch_dir_fd, name);
        if (r < 0)
                return r;
        *ret = report;
        return 0;
}
