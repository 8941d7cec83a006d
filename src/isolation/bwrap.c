/* SPDX-License-Identifier: MIT */
#include "bwrap.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/openat2.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "caps.h"
#include "cgroup-limits.h"
#include "cgroup-track.h"
#include "ids.h"
#include "namespaces.h"
#include "rlimits.h"
#include "string-util.h"
#include "time-util.h"

/* Where the launch child stages what it hands to bwrap: only in the child's own mount
 * namespace. bwrap mounts its own root tmpfs over /tmp too, but pivots away from it before
 * it binds anything, so the stage below is what it finds at /oldroot/tmp. */
#define STAGE "/tmp"

/* The staged directories, in the order of mount_sandbox_dirs[], then /dev/shm. */
static const char *const stage_names[] = { "workspace", "home", "cache", "envs", "shm" };
#define STAGED ELEMENTSOF(stage_names)
#define STAGE_SHM (STAGED - 1)

/* Bounds of bwrap's command line: every option but the masks, the environment and argv
 * takes fewer than 160 entries; a mask takes at most 6. On the child's stack: no malloc
 * (and no page copied from the spawner's heap) on the launch path. */
#define MAX_ARGS (160 + MOUNT_MASKS_MAX * 6 + LAUNCH_ENV_MAX * 3 + LAUNCH_ARGV_MAX + 1)
#define MAX_PASS (STAGED + MOUNT_MASKS_MAX + 8)
#define MAX_NUMS (32 + MOUNT_MASKS_MAX * 2)
#define NUM_LEN 24

/* What bwrap's execvp() searches without a PATH in the spec's environment: as launch.c's
 * (a superset of glibc's default, so never a false "not found"). */
#define DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"

int bwrap_find(const char *path, char *ret_path, size_t size) {
        struct stat st;

        path = path ?: BWRAP_DEFAULT_PATH;
        if (path[0] != '/')
                return -EINVAL;
        if (stat(path, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode))
                return -EACCES;
        /* The child runs it as the sandbox's uid: "other" must be allowed to. */
        if (!(st.st_mode & S_IXOTH))
                return -EACCES;
        return strscpy(ret_path, size, path) < 0 ? -ENAMETOOLONG : 0;
}

uint64_t bwrap_clone_flags(void) {
        return CLONE_NEWNS;
}

int bwrap_wait_status(int st) {
        if (WIFEXITED(st) && WEXITSTATUS(st) > 128 && WEXITSTATUS(st) - 128 < NSIG)
                return WEXITSTATUS(st) - 128;       /* as WIFSIGNALED, WTERMSIG, no core */
        return st;
}

/* ---- the child ---- */

typedef struct Child {
        const LaunchPlan *plan;
        const LaunchJob *job;
        const LaunchSpec *spec;
        int report_fd;
        int bwrap_fd;                   /* the binary, opened before /tmp is staged over */
        bool into_cgroup;

        int staged[STAGED];             /* O_PATH fds of the staged directories, for --bind-fd */
        int pass[MAX_PASS + 2];         /* every fd bwrap consumes (it closes them before exec) */
        size_t n_pass;
        char *argv[MAX_ARGS + 1];
        size_t argc;
        char nums[MAX_NUMS][NUM_LEN];   /* storage for the numbers in argv */
        size_t n_nums;
        const char *cmd_path;           /* the PATH bwrap's execvp() will search */

        char detail[160];
        LaunchReport report;
} Child;

static void report_write(Child *c, uint32_t kind) {
        c->report.kind = kind;
        (void) !write(c->report_fd, (const void *) &c->report, sizeof(LaunchReport));
}

static _noreturn_ void child_fail(Child *c, const char *step, int r) {
        c->report.error = r < 0 ? -r : EIO;
        (void) strscpy(c->report.step, sizeof c->report.step, step);
        (void) strscpy(c->report.detail, sizeof c->report.detail, c->detail);
        report_write(c, LAUNCH_REPORT_ERROR);
        _exit(127);
}

static int cmp_int(const void *a, const void *b) {
        int x = *(const int *) a, y = *(const int *) b;
        return x < y ? -1 : x > y;
}

/* Closes every fd from 3 up except those in KEEP (any number of them, any order). */
static int close_all_except(int *keep, size_t n) {
        unsigned next = 3;

        qsort(keep, n, sizeof *keep, cmp_int);
        for (size_t i = 0; i < n; i++) {
                if (keep[i] < 3 || (unsigned) keep[i] < next)
                        continue;
                if ((unsigned) keep[i] > next && close_range(next, (unsigned) keep[i] - 1, 0) < 0)
                        return negative_errno();
                next = (unsigned) keep[i] + 1;
        }
        if (close_range(next, ~0U, 0) < 0)
                return negative_errno();
        return 0;
}

/* ---- bwrap's command line ---- */

static void arg(Child *c, const char *s) {
        /* MAX_ARGS covers every command line we build: overflowing would be a bug of ours. */
        if (c->argc >= MAX_ARGS)
                child_fail(c, "prepare bwrap", -E2BIG);
        c->argv[c->argc++] = (char *) s;
        c->argv[c->argc] = NULL;
}

static void arg_u64(Child *c, uint64_t v) {
        if (c->n_nums >= MAX_NUMS)
                child_fail(c, "prepare bwrap", -E2BIG);
        (void) bsprintf(c->nums[c->n_nums], NUM_LEN, "%" PRIu64, v);
        arg(c, c->nums[c->n_nums++]);
}

static void arg_octal(Child *c, unsigned mode) {
        if (c->n_nums >= MAX_NUMS)
                child_fail(c, "prepare bwrap", -E2BIG);
        (void) bsprintf(c->nums[c->n_nums], NUM_LEN, "0%o", mode);
        arg(c, c->nums[c->n_nums++]);
}

static void arg_fd(Child *c, int fd) {
        if (c->n_pass >= MAX_PASS)
                child_fail(c, "prepare bwrap", -E2BIG);
        c->pass[c->n_pass++] = fd;
        arg_u64(c, (uint64_t) fd);
}

/* An fd bwrap reads DATA from (to EOF), inherited across its execve. */
static int data_fd(const void *data, size_t size) {
        _cleanup_close_ int fd = -EBADF;
        const char *p = data;

        fd = memfd_create("sandloom-bwrap", 0);
        if (fd < 0)
                return negative_errno();
        while (size > 0) {
                ssize_t n = write(fd, p, size);
                if (n < 0)
                        return negative_errno();
                p += n;
                size -= (size_t) n;
        }
        if (lseek(fd, 0, SEEK_SET) < 0)
                return negative_errno();
        return TAKE_FD(fd);
}

/* ---- the steps ---- */

static int step_close_inherited(Child *c) {
        /* The spawner's channel, other launches' pipes and fds: none of it belongs here. */
        int keep[] = {
                c->job->dirs[0], c->job->dirs[1], c->job->dirs[2], c->job->dirs[3],
                c->spec->stdin_fd, c->spec->stdout_fd, c->spec->stderr_fd,
                c->report_fd, c->job->netns_fd, c->into_cgroup ? -1 : c->job->cgroup_fd,
                c->job->limit_fds[0], c->job->limit_fds[1], c->job->limit_fds[2], c->job->limit_fds[3],
        };
        return close_all_except(keep, ELEMENTSOF(keep));
}

static int step_join_cgroup(Child *c) {
        int r;

        if (c->into_cgroup || c->job->cgroup_fd < 0)
                return 0;
        r = cgroup_track_join(c->job->cgroup_fd);
        (void) close(c->job->cgroup_fd);
        return r;
}

/* The sandbox's v1 limit cgroups, before bwrap (and the command) is charged to it. */
static int step_join_limits(Child *c) {
        int r = cgroup_limits_join(c->job->limit_fds);

        for (size_t i = 0; i < ELEMENTSOF(c->job->limit_fds); i++)
                if (c->job->limit_fds[i] >= 0)
                        (void) close(c->job->limit_fds[i]);
        return r;
}

static int step_oom_score(Child *c) {
        _cleanup_close_ int fd = -EBADF;

        /* The spawner protects itself (-1000); a sandbox is an ordinary OOM candidate. */
        fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        if (write(fd, "0", 1) != 1)
                return negative_errno();
        return 0;
}

static int step_netns(Child *c) {
        int r;

        if (c->job->netns_fd < 0)
                return 0;
        r = namespaces_join_netns(c->job->netns_fd);
        (void) close(c->job->netns_fd);
        return r;
}

static int step_open_bwrap(Child *c) {
        /* By path at every launch (an upgraded bwrap is used at once), but before the
         * staging tmpfs covers /tmp in this mount namespace. */
        c->bwrap_fd = open(c->plan->bwrap_path, O_PATH | O_CLOEXEC);
        if (c->bwrap_fd < 0) {
                (void) strscpy(c->detail, sizeof c->detail, c->plan->bwrap_path);
                return negative_errno();
        }
        return 0;
}

#define FAIL(what) do { (void) strscpy(c->detail, sizeof c->detail, (what)); return negative_errno(); } while (0)

static int step_stage(Child *c) {
        _cleanup_close_ int stage_fd = -EBADF;
        uint64_t shm = c->spec->shm_bytes ? c->spec->shm_bytes : UINT64_C(64) << 20;
        char opts[64];

        /* Nothing staged here may propagate to the host. */
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                FAIL("making / private");
        if (mount("sandloom-stage", STAGE, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  "mode=0755,size=64k,nr_inodes=16") < 0)
                FAIL("mounting the staging tmpfs");
        stage_fd = open(STAGE, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (stage_fd < 0)
                FAIL("opening the staging tmpfs");
        for (size_t i = 0; i < STAGED; i++)
                if (mkdirat(stage_fd, stage_names[i], 0755) < 0)
                        FAIL("creating the staging directories");

        for (size_t i = 0; i < MOUNT_SANDBOX_DIRS; i++) {
                if (move_mount(c->job->dirs[i], "", stage_fd, stage_names[i], MOVE_MOUNT_F_EMPTY_PATH) < 0) {
                        (void) bsprintf(c->detail, sizeof c->detail, "staging /%s", mount_sandbox_dirs[i]);
                        return negative_errno();
                }
                (void) close(c->job->dirs[i]);
        }

        /* bwrap can mount a tmpfs but not a noexec one: this one is ours, bound by bwrap. */
        (void) bsprintf(opts, sizeof opts, "mode=1777,size=%" PRIu64, shm);
        if (mount("sandloom-shm", STAGE "/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts) < 0)
                FAIL("mounting /dev/shm");

        /* Not O_CLOEXEC: bwrap gets them, checks that what it mounted is what they name,
         * and closes them. */
        for (size_t i = 0; i < STAGED; i++) {
                c->staged[i] = openat(stage_fd, stage_names[i], O_PATH | O_DIRECTORY | O_NOFOLLOW);
                if (c->staged[i] < 0)
                        FAIL("opening the staged directories");
        }
        return 0;
}

static bool host_has(const char *path) {
        struct stat st;
        return lstat(path, &st) == 0;
}

/* Masks the host's secrets the plan found (still there now). bwrap cannot bind one path of
 * the new root onto another, so each masked file gets a read-only copy of nothing, mode
 * 000, and each masked directory an empty tmpfs, mode 000, then read-only. */
static int add_masks(Child *c, int empty_fd) {
        const MountPlan *plan = &c->plan->mounts;

        for (size_t i = 0; i < plan->n_masks; i++) {
                const MountMask *m = &plan->masks[i];

                if (!host_has(m->path))
                        continue;
                arg(c, "--perms");
                arg_octal(c, 0);
                if (m->dir) {
                        arg(c, "--tmpfs");
                        arg(c, m->path);
                        arg(c, "--remount-ro");
                        arg(c, m->path);
                        continue;
                }
                int fd = dup(empty_fd);         /* one each: bwrap closes them one by one */
                if (fd < 0)
                        FAIL("duplicating the mask fd");
                arg(c, "--ro-bind-data");
                arg_fd(c, fd);
                arg(c, m->path);
        }
        return 0;
}

static int add_identity_files(Child *c) {
        static const char *const paths[] = { "/etc/passwd", "/etc/group" };
        char passwd[MOUNT_PASSWD_MAX], group[MOUNT_GROUP_MAX];
        const char *content[] = { passwd, group };
        int fd;

        mounts_identity_files(c->spec->uid, c->spec->gid, passwd, group);
        for (size_t i = 0; i < ELEMENTSOF(paths); i++) {
                if (!host_has(paths[i]))
                        continue;       /* bwrap could not create it in the read-only /etc */
                fd = data_fd(content[i], strlen(content[i]));
                if (fd < 0) {
                        (void) strscpy(c->detail, sizeof c->detail, "writing /etc/passwd and /etc/group");
                        return fd;
                }
                /* Read-only for its owner too: bwrap's files belong to the sandbox's uid. */
                arg(c, "--perms");
                arg_octal(c, 0444);
                arg(c, "--ro-bind-data");
                arg_fd(c, fd);
                arg(c, paths[i]);
        }
        return 0;
}

static int step_prepare(Child *c) {
        const LaunchSpec *spec = c->spec;
        const SeccompProgram *prog = &c->plan->seccomp[spec->level];
        _cleanup_close_ int empty_fd = -EBADF;
        int fd, r;

        /* Namespaces. The user namespace is bwrap's own (it is not setuid); the network
         * namespace is the one the child joined. */
        arg(c, "bwrap");
        arg(c, "--unshare-user");
        arg(c, "--unshare-ipc");
        arg(c, "--unshare-uts");
        if (spec->level >= ISOLATION_LEVEL_STANDARD)
                arg(c, "--unshare-pid");
        if (spec->level >= ISOLATION_LEVEL_STRICT)
                arg(c, "--unshare-cgroup");
        arg(c, "--hostname");
        arg(c, spec->hostname);
        arg(c, "--new-session");
        arg(c, "--die-with-parent");

        /* The host's system directories, read-only (bwrap adds nosuid,nodev to every bind,
         * recursively). */
        arg(c, "--ro-bind");
        arg(c, "/usr");
        arg(c, "/usr");
        for (size_t i = 0; i < ELEMENTSOF(c->plan->mounts.top); i++) {
                const MountTop *t = &c->plan->mounts.top[i];
                char *path;

                if (t->kind == MOUNT_TOP_ABSENT)
                        continue;
                if (c->n_nums >= MAX_NUMS)
                        return -E2BIG;
                path = c->nums[c->n_nums++];    /* "/libx32" fits */
                (void) bsprintf(path, NUM_LEN, "/%s", t->name);
                if (t->kind == MOUNT_TOP_SYMLINK) {
                        arg(c, "--symlink");
                        arg(c, t->target);
                } else {
                        arg(c, "--ro-bind");
                        arg(c, path);
                }
                arg(c, path);
        }
        arg(c, "--ro-bind");
        arg(c, "/etc");
        arg(c, "/etc");

        empty_fd = memfd_create("sandloom-mask", MFD_CLOEXEC);
        if (empty_fd < 0)
                FAIL("creating the mask fd");
        r = add_masks(c, empty_fd);
        if (r < 0)
                return r;
        r = add_identity_files(c);
        if (r < 0)
                return r;

        /* bwrap's /dev: null zero full random urandom tty bound from the host, a private
         * devpts, the fd symlinks (and a "core" symlink to /proc/kcore, which the sandbox
         * cannot read). /dev/shm is our noexec tmpfs. */
        arg(c, "--dev");
        arg(c, "/dev");
        arg(c, "--bind-fd");
        arg_fd(c, c->staged[STAGE_SHM]);
        arg(c, "/dev/shm");
        arg(c, "--remount-ro");
        arg(c, "/dev");

        arg(c, "--size");
        arg_u64(c, spec->tmpfs_bytes);
        arg(c, "--perms");
        arg_octal(c, 01777);
        arg(c, "--tmpfs");
        arg(c, "/tmp");
        if (spec->level >= ISOLATION_LEVEL_STANDARD) {
                arg(c, "--proc");
                arg(c, "/proc");
        }

        static const char *const targets[MOUNT_SANDBOX_DIRS] = { "/workspace", "/home/sandbox", "/cache", "/envs" };
        arg(c, "--dir");
        arg(c, "/home");
        for (size_t i = 0; i < MOUNT_SANDBOX_DIRS; i++) {
                arg(c, "--bind-fd");
                arg_fd(c, c->staged[i]);
                arg(c, targets[i]);
        }
        arg(c, "--dir");
        arg(c, "/var");
        arg(c, "--symlink");
        arg(c, "../tmp");
        arg(c, "/var/tmp");
        arg(c, "--dir");
        arg(c, "/run");
        arg(c, "--remount-ro");
        arg(c, "/");

        arg(c, "--chdir");
        arg(c, spec->cwd ?: "/workspace");

        /* Exactly the spec's environment for the command; bwrap itself runs with none. */
        arg(c, "--clearenv");
        for (size_t i = 0; spec->envp && spec->envp[i]; i++) {
                char *eq = strchr(spec->envp[i], '=');      /* validated: NAME=value */
                *eq = '\0';                                 /* our own copy of the spec */
                if (streq(spec->envp[i], "PATH"))
                        c->cmd_path = eq + 1;               /* bwrap's setenv: the last wins */
                arg(c, "--setenv");
                arg(c, spec->envp[i]);
                arg(c, eq + 1);
        }

        fd = data_fd(prog->prog.filter, (size_t) prog->prog.len * sizeof(struct sock_filter));
        if (fd < 0) {
                (void) strscpy(c->detail, sizeof c->detail, "writing the seccomp program");
                return fd;
        }
        arg(c, "--seccomp");
        arg_fd(c, fd);

        arg(c, "--");
        for (size_t i = 0; spec->argv[i]; i++)
                arg(c, spec->argv[i]);
        return 0;
}

static int step_rlimits(Child *c) {
        return rlimits_apply(&c->spec->limits);
}

static int step_bounding(Child *c) {
        /* Already empty (the spawner's own), and bwrap needs none of it: the capabilities
         * it uses are those of its own user namespace. */
        return caps_drop_bounding();
}

static int step_identity(Child *c) {
        return ids_drop(c->spec->uid, c->spec->gid);
}

static int step_no_new_privs(Child *c) {
        return ids_set_no_new_privs();
}

static int step_caps(Child *c) {
        return caps_clear();
}

static int step_parent_death(Child *c) {
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
                return negative_errno();
        if (getppid() != c->job->spawner_pid)
                return -ESRCH;
        return 0;
}

static int step_stdio(Child *c) {
        if (dup2(c->spec->stdin_fd, STDIN_FILENO) < 0 || dup2(c->spec->stdout_fd, STDOUT_FILENO) < 0 ||
            dup2(c->spec->stderr_fd, STDERR_FILENO) < 0)
                return negative_errno();
        return 0;
}

static int step_close_stray(Child *c) {
        /* Stdio, the fds bwrap consumes, the report pipe and bwrap's binary (both closed by
         * execve()). */
        c->pass[c->n_pass] = c->report_fd;
        c->pass[c->n_pass + 1] = c->bwrap_fd;
        return close_all_except(c->pass, c->n_pass + 2);
}

static int step_signals(Child *c) {
        sigset_t none;

        sigemptyset(&none);
        if (sigprocmask(SIG_SETMASK, &none, NULL) < 0)
                return negative_errno();
        return 0;
}

/* ---- the command, looked up as bwrap's execvp() will inside the sandbox ---- */

/* An unknown command would end as bwrap's own "execvp: No such file" and exit code 1; the
 * native launcher fails its "exec" step instead (127 or 126 to the engine). So, as the
 * sandbox's uid and right before bwrap, look the command up where the child sees the
 * sandbox's paths: the host's for the system directories, the staged ones for the four
 * sandbox directories. Only a certain miss fails the launch: every doubt (a symlink, "..",
 * /proc, /dev, an unexpected error) lets bwrap run it and answer for itself. */

#define FIND_MAYBE 1                    /* not a certain miss: bwrap decides */

static bool has_dotdot(const char *path) {
        for (const char *p = path; (p = strstr(p, "..")); p += 2)
                if ((p == path || p[-1] == '/') && (p[2] == '\0' || p[2] == '/'))
                        return true;
        return false;
}

/* The component of PATH (absolute, no "..") after its slashes: NAME, then REST (its
 * slashes included) if it matches. */
static const char *after_top(const char *path, const char *name) {
        size_t n = strlen(name);

        path += strspn(path, "/");
        if (strncmp(path, name, n) != 0 || (path[n] != '\0' && path[n] != '/'))
                return NULL;
        return path + n;
}

/* Opens the sandbox's PATH (absolute, normalized enough) as O_PATH in *RET_FD. Returns 0,
 * a certain miss as -ENOENT/-ENOTDIR/-EACCES, or FIND_MAYBE. */
static int find_open(Child *c, int root_fd, const char *path, unsigned depth, int *ret_fd) {
        struct open_how how = {
                .flags = O_PATH | O_CLOEXEC,
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };
        const char *rest = NULL, *first;
        int dir_fd = -EBADF, fd;

        if (path[0] != '/' || has_dotdot(path) || depth > 4)
                return FIND_MAYBE;
        first = path + strspn(path, "/");

        for (size_t i = 0; i < MOUNT_SANDBOX_DIRS && !rest; i++)
                if ((rest = after_top(path, mount_sandbox_dirs[i])))
                        dir_fd = c->staged[i];
        if (!rest && ((rest = after_top(path, "usr")) || (rest = after_top(path, "etc")))) {
                dir_fd = root_fd;
                rest = first;           /* the same path on the host */
        }
        for (size_t i = 0; i < ELEMENTSOF(c->plan->mounts.top) && !rest; i++) {
                const MountTop *t = &c->plan->mounts.top[i];
                char buf[PATH_MAX];

                if (t->kind == MOUNT_TOP_ABSENT || !(rest = after_top(path, t->name)))
                        continue;
                if (t->kind == MOUNT_TOP_DIR) {
                        dir_fd = root_fd;
                        rest = first;
                        break;
                }
                /* bwrap's --symlink: the same target, followed from "/". */
                if (bsprintf(buf, sizeof buf, "%s%s%s", t->target[0] == '/' ? "" : "/", t->target, rest) < 0)
                        return FIND_MAYBE;
                return find_open(c, root_fd, buf, depth + 1, ret_fd);
        }
        if (!rest) {
                /* /proc and /dev hold magic links (/proc/self/exe, /dev/fd/N); anything
                 * else is bwrap's fresh root, /tmp or /dev/shm: nothing there yet. A path
                 * spelled unusually ("/./workspace", "/home//sandbox") is not judged. */
                if (after_top(path, "proc") || after_top(path, "dev") || strstr(path, "//") ||
                    strstr(path, "/./") || endswith(path, "/."))
                        return FIND_MAYBE;
                return -ENOENT;
        }

        rest += strspn(rest, "/");
        fd = (int) syscall(SYS_openat2, dir_fd, *rest ? rest : ".", &how, sizeof how);
        if (fd < 0) {
                if (errno == ENOENT || errno == ENOTDIR || errno == EACCES)
                        return -errno;
                return FIND_MAYBE;      /* ELOOP (a symlink), EXDEV, EAGAIN, ENOSYS... */
        }
        *ret_fd = fd;
        return 0;
}

/* As execve() would answer for PATH: 0 (or FIND_MAYBE) if it may run. */
static int find_exec(Child *c, int root_fd, const char *path) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        int r;

        r = find_open(c, root_fd, path, 0, &fd);
        if (r != 0)
                return r;
        if (fstat(fd, &st) < 0)
                return FIND_MAYBE;
        if (!S_ISREG(st.st_mode))
                return -EACCES;
        /* As the sandbox's uid already: its permissions, and the mount's noexec. */
        if (faccessat(fd, "", X_OK, AT_EACCESS | AT_EMPTY_PATH) < 0)
                return errno == EACCES ? -EACCES : FIND_MAYBE;
        return 0;
}

/* DIR/NAME, DIR relative to the working directory if it is. */
static int find_join(Child *c, char *buf, size_t size, const char *dir, size_t dir_len, const char *name) {
        const char *cwd = c->spec->cwd ?: "/workspace";

        if (dir_len > 0 && dir[0] == '/')
                return bsprintf(buf, size, "%.*s/%s", (int) dir_len, dir, name);
        if (dir_len == 0)
                return bsprintf(buf, size, "%s/%s", cwd, name);
        return bsprintf(buf, size, "%s/%.*s/%s", cwd, (int) dir_len, dir, name);
}

static int step_find_command(Child *c) {
        _cleanup_close_ int root_fd = -EBADF;
        const char *name = c->spec->argv[0], *p;
        char buf[PATH_MAX];
        int best = -ENOENT, fd, r;

        if (isempty(name))
                return 0;
        root_fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root_fd < 0)
                return 0;
        /* bwrap enters the working directory first: if that fails, it says so itself. */
        fd = -EBADF;
        r = find_open(c, root_fd, c->spec->cwd ?: "/workspace", 0, &fd);
        (void) safe_close(fd);
        if (r < 0)
                return 0;
        (void) strscpy(c->detail, sizeof c->detail, name);

        if (strchr(name, '/')) {
                if (name[0] == '/')
                        r = find_exec(c, root_fd, name);
                else
                        r = find_join(c, buf, sizeof buf, "", 0, name) < 0 ? FIND_MAYBE : find_exec(c, root_fd, buf);
                return r > 0 ? 0 : r;
        }
        for (p = c->cmd_path ?: DEFAULT_PATH;; ) {
                const char *end = strchrnul(p, ':');

                if (find_join(c, buf, sizeof buf, p, (size_t) (end - p), name) < 0)
                        return 0;
                r = find_exec(c, root_fd, buf);
                if (r >= 0)
                        return 0;
                if (r == -EACCES)
                        best = r;       /* execvp() goes on, and answers EACCES at the end */
                if (*end == '\0')
                        return best;
                p = end + 1;
        }
}

typedef struct BwrapStep {
        const char *name;
        int (*run)(Child *c);
        int timing;                     /* LaunchTiming recorded when the step ends, or -1 */
} BwrapStep;

/* The launch, top to bottom: as root in the tracking cgroup and a private mount namespace
 * first, then as the sandbox's uid without any privilege, and finally bwrap. */
static const BwrapStep steps[] = {
        { "close inherited fds",       step_close_inherited, LAUNCH_T_FDS },
        { "join tracking cgroup",      step_join_cgroup,     -1 },
        { "join limit cgroups",        step_join_limits,     -1 },
        { "reset oom score",           step_oom_score,       -1 },
        { "join network namespace",    step_netns,           LAUNCH_T_NETNS },
        { "open bwrap",                step_open_bwrap,      -1 },
        { "stage sandbox directories", step_stage,           LAUNCH_T_ROOT },
        { "prepare bwrap",             step_prepare,         -1 },
        { "apply rlimits",             step_rlimits,         LAUNCH_T_SETUP },
        { "drop bounding set",         step_bounding,        -1 },
        { "drop identity",             step_identity,        -1 },
        { "set no_new_privs",          step_no_new_privs,    -1 },
        { "clear capabilities",        step_caps,            LAUNCH_T_CREDS },
        { "set parent-death signal",   step_parent_death,    -1 },
        { "set up stdio",              step_stdio,           -1 },
        { "close stray fds",           step_close_stray,     LAUNCH_T_STDIO },
        { "reset signal mask",         step_signals,         LAUNCH_T_SECCOMP },
        { "exec",                      step_find_command,    -1 },                 /* last before bwrap */
};

_noreturn_ void bwrap_child_main(const LaunchPlan *plan, const LaunchJob *job, bool into_cgroup) {
        static char *const no_env[] = { NULL };
        Child c;
        int r;

        /* Only the scalars: the arrays are written before they are read. */
        c.plan = plan;
        c.job = job;
        c.spec = job->spec;
        c.report_fd = job->report_fd;
        c.bwrap_fd = -EBADF;
        c.into_cgroup = into_cgroup;
        c.n_pass = c.argc = c.n_nums = 0;
        c.cmd_path = NULL;
        c.argv[0] = NULL;
        c.report = (LaunchReport) {};
        c.report.at_usec[LAUNCH_T_CHILD_START] = now_monotonic_usec();
        for (size_t i = 0; i < STAGED; i++)
                c.staged[i] = -EBADF;

        for (size_t i = 0; i < ELEMENTSOF(steps); i++) {
                c.detail[0] = '\0';
                r = steps[i].run(&c);
                if (r < 0)
                        child_fail(&c, steps[i].name, r);
                if (steps[i].timing >= 0)
                        c.report.at_usec[steps[i].timing] = now_monotonic_usec();
        }
        if (c.spec->collect_timings)
                report_write(&c, LAUNCH_REPORT_TIMINGS);

        /* An ELF binary: a script would need its own fd open across the exec. */
        (void) execveat(c.bwrap_fd, "", c.argv, no_env, AT_EMPTY_PATH);
        r = negative_errno();
        (void) strscpy(c.detail, sizeof c.detail, plan->bwrap_path);
        child_fail(&c, "exec bwrap", r);
}
