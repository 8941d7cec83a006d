/* SPDX-License-Identifier: MIT */
#include "launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bwrap.h"
#include "caps.h"
#include "cgroup-limits.h"
#include "cgroup-track.h"
#include "ids.h"
#include "macros.h"
#include "namespaces.h"
#include "rlimits.h"
#include "sandbox-init.h"
#include "string-util.h"
#include "time-util.h"

#define DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"

int launch_plan_init(LaunchPlan *plan, const char *const *mask_paths, LaunchRuntime runtime,
                     const char *bwrap_path) {
        int r;

        *plan = (LaunchPlan) { .clone3 = true, .runtime = runtime };
        if (runtime == LAUNCH_RUNTIME_BWRAP) {
                r = bwrap_find(bwrap_path, plan->bwrap_path, sizeof plan->bwrap_path);
                if (r < 0)
                        return r;
        } else if (runtime != LAUNCH_RUNTIME_NATIVE)
                return -EINVAL;
        r = mounts_plan_init(&plan->mounts, mask_paths);
        if (r < 0)
                return r;
        for (IsolationLevel l = ISOLATION_LEVEL_MIN; l <= ISOLATION_LEVEL_MAX; l++) {
                r = seccomp_program_compile(l, &plan->seccomp[l]);
                if (r < 0) {
                        launch_plan_done(plan);
                        return r;
                }
        }
        return 0;
}

void launch_plan_done(LaunchPlan *plan) {
        for (size_t l = 0; l < ELEMENTSOF(plan->seccomp); l++)
                seccomp_program_free(&plan->seccomp[l]);
}

/* ---- the child ---- */

typedef struct Child {
        const LaunchPlan *plan;
        const LaunchJob *job;
        const LaunchSpec *spec;
        int report_fd;                      /* moves to fd 3 in the main process */
        bool into_cgroup;                   /* clone3 put us in the tracking cgroup already */
        bool late_cgroupns;                 /* CLONE_NEWCGROUP left out of the clone: unshare after joining the limit cgroups */
        bool filtered;                      /* the seccomp filter is in force already (inherited from our init) */
        size_t step;                        /* index into steps[] */
        sigset_t old_mask;
        char detail[160];
        LaunchReport report;
} Child;

static void report_write(Child *c, uint32_t kind) {
        LaunchReport *r = &c->report;

        r->kind = kind;
        (void) !write(c->report_fd, (const void *) r, sizeof(LaunchReport));
}

static _noreturn_ void child_fail(Child *c, const char *step, int r) {
        c->report.error = r < 0 ? -r : EIO;
        (void) strscpy(c->report.step, sizeof c->report.step, step);
        (void) strscpy(c->report.detail, sizeof c->report.detail, c->detail);
        report_write(c, LAUNCH_REPORT_ERROR);
        _exit(127);
}

/* close_range() over the gaps between the fds to keep (sorted here, at most a handful). */
static int close_all_but(const int *keep_in, size_t n) {
        int keep[16];
        size_t m = 0;
        unsigned next = 3;

        for (size_t i = 0; i < n && m < ELEMENTSOF(keep); i++)
                if (keep_in[i] >= 3)
                        keep[m++] = keep_in[i];
        for (size_t i = 1; i < m; i++)
                for (size_t j = i; j > 0 && keep[j - 1] > keep[j]; j--) {
                        int t = keep[j];
                        keep[j] = keep[j - 1];
                        keep[j - 1] = t;
                }
        for (size_t i = 0; i < m; i++) {
                if ((unsigned) keep[i] > next && close_range(next, (unsigned) keep[i] - 1, 0) < 0)
                        return negative_errno();
                next = (unsigned) keep[i] + 1;
        }
        if (close_range(next, ~0U, 0) < 0)
                return negative_errno();
        return 0;
}

static int step_close_inherited(Child *c) {
        /* The spawner's channel, other launches' pipes, namespace and cgroup fds: none of it
         * belongs here. (Another launch's report pipe held open would also delay its EOF.) */
        const int keep[] = {
                c->job->dirs[0], c->job->dirs[1], c->job->dirs[2], c->job->dirs[3],
                c->spec->stdin_fd, c->spec->stdout_fd, c->spec->stderr_fd,
                c->report_fd, c->job->status_fd, c->job->netns_fd, c->into_cgroup ? -1 : c->job->cgroup_fd,
                c->job->limit_fds[0], c->job->limit_fds[1], c->job->limit_fds[2], c->job->limit_fds[3],
        };
        return close_all_but(keep, ELEMENTSOF(keep));
}

static int step_join_cgroup(Child *c) {
        if (c->into_cgroup || c->job->cgroup_fd < 0)
                return 0;
        return cgroup_track_join(c->job->cgroup_fd);
}

/* The sandbox's v1 limit cgroups (memory, pids, cpu, cpuacct): before anything is charged
 * to the sandbox (mounts, tmpfs, the command). The fds go right after. */
static int step_join_limits(Child *c) {
        int r = cgroup_limits_join(c->job->limit_fds);

        for (size_t i = 0; i < ELEMENTSOF(c->job->limit_fds); i++)
                if (c->job->limit_fds[i] >= 0)
                        (void) close(c->job->limit_fds[i]);
        if (r < 0)
                return r;
        /* A cgroup namespace is rooted where its creator is at that moment: only now, in
         * the sandbox's own cgroups, may it be made (strict). */
        if (c->late_cgroupns && unshare(CLONE_NEWCGROUP) < 0)
                return negative_errno();
        return 0;
}

static int step_oom_score(Child *c) {
        _cleanup_close_ int fd = -EBADF;

        /* The daemon and the spawner protect themselves (-1000); a sandbox is an ordinary
         * candidate for the OOM killer. Through the host's /proc, still visible here. */
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

static int step_mounts(Child *c) {
        MountRequest req = {
                .dirs = c->job->dirs,
                .uid = c->spec->uid,
                .gid = c->spec->gid,
                .proc = c->spec->level >= ISOLATION_LEVEL_STANDARD,
                .tmpfs_bytes = c->spec->tmpfs_bytes,
                .shm_bytes = c->spec->shm_bytes,
        };
        return mounts_build_root(&c->plan->mounts, &req, c->detail, sizeof c->detail);
}

static int step_hostname(Child *c) {
        return namespaces_set_hostname(c->spec->hostname);
}

static int step_rlimits(Child *c) {
        return rlimits_apply(&c->spec->limits);
}

static int step_bounding(Child *c) {
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

static _noreturn_ void run_steps(Child *c, size_t first);

/* The main process's stack while it shares the init's memory (below). */
static char main_stack[64 * 1024] __attribute__((aligned(64)));

static int main_entry(void *userdata) {
        Child *c = userdata;
        int r;

        (void) close(c->job->status_fd);
        r = init_reset_signals_in_child(&c->old_mask);
        if (r < 0)
                child_fail(c, "start init", r);
        c->report.at_usec[LAUNCH_T_INIT_FORK] = now_monotonic_usec();
        run_steps(c, c->step + 1);
}

/* Standard and above: this process is pid 1 of the new PID namespace. It starts the main
 * process and becomes our init; only the main process goes on with the checklist.
 *
 * The main process shares the init's memory (CLONE_VM) on a stack of its own, and the
 * init waits (CLONE_VFORK) until it has called execve() or died: no copy of the address
 * space, and none to tear down again at execve(). Anything the init must not be while
 * sandbox code runs beside it (dumpable, without a parent-death signal) is settled before. */
static int step_init(Child *c) {
        const int keep[] = { c->job->status_fd };
        int report_fd = c->report_fd;
        pid_t pid;
        int r;

        if (c->spec->level < ISOLATION_LEVEL_STANDARD)
                return 0;

        if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 || prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
                return negative_errno();
        /* The filter goes on the init before the main process exists, which inherits it:
         * one filter (compiled and attached once per launch, not twice), the same program
         * on both. Nothing the main process still does before execve() is on the denylist
         * (setsid, prctl, dup2, close_range, chdir, sigprocmask; clone without namespace
         * flags here). Should it fail to load, the launch fails at this step. */
        r = seccomp_program_load(&c->plan->seccomp[c->spec->level]);
        if (r < 0) {
                (void) strscpy(c->detail, sizeof c->detail, "loading the seccomp filter");
                return r;
        }
        c->filtered = true;
        init_prepare_signals(&c->old_mask);
        pid = clone(main_entry, main_stack + sizeof main_stack, CLONE_VM | CLONE_VFORK | SIGCHLD, c);
        if (pid < 0)
                return negative_errno();

        /* The init, once the main process has called execve() (or failed). Let go of the
         * report pipe first: the spawner answers the launch when it closes. */
        (void) close(report_fd);
        (void) close_all_but(keep, ELEMENTSOF(keep));
        (void) close(STDIN_FILENO);
        (void) close(STDOUT_FILENO);
        (void) close(STDERR_FILENO);
        init_run(pid, c->job->status_fd);
}

static int step_session(Child *c) {
        return ids_new_session();
}

static int step_parent_death(Child *c) {
        /* Set after the identity change, which clears it. Our parent is the spawner at
         * basic, our init (pid 1 here) above. */
        pid_t expected = c->spec->level >= ISOLATION_LEVEL_STANDARD ? 1 : c->job->spawner_pid;

        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
                return negative_errno();
        if (getppid() != expected)
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
        /* Keep only stdio and the report pipe, moved to fd 3 and closed by execve(). */
        if (c->report_fd != 3) {
                if (dup3(c->report_fd, 3, O_CLOEXEC) < 0)
                        return negative_errno();
                c->report_fd = 3;
        }
        if (close_range(4, ~0U, 0) < 0)
                return negative_errno();
        return 0;
}

static int step_cwd(Child *c) {
        const char *cwd = c->spec->cwd ?: "/workspace";

        (void) strscpy(c->detail, sizeof c->detail, cwd);
        if (chdir(cwd) < 0)
                return negative_errno();
        c->detail[0] = '\0';
        return 0;
}

static int step_signals(Child *c) {
        sigset_t none;

        sigemptyset(&none);
        if (sigprocmask(SIG_SETMASK, &none, NULL) < 0)
                return negative_errno();
        return 0;
}

static int step_seccomp(Child *c) {
        if (c->filtered)
                return 0;               /* loaded by our init before it started us (step_init) */
        return seccomp_program_load(&c->plan->seccomp[c->spec->level]);
}

typedef struct LaunchStep {
        const char *name;
        int (*run)(Child *c);
        int timing;                         /* LaunchTiming recorded when the step ends, or -1 */
} LaunchStep;

/* The launch, top to bottom. The first part runs as root in the new namespaces; from
 * "start init" on, only in the process that will execve(). */
static const LaunchStep steps[] = {
        { "close inherited fds",     step_close_inherited, LAUNCH_T_FDS },
        { "join tracking cgroup",    step_join_cgroup,     -1 },
        { "join limit cgroups",      step_join_limits,     -1 },
        { "reset oom score",         step_oom_score,       -1 },
        { "join network namespace",  step_netns,           LAUNCH_T_NETNS },
        { "build root",              step_mounts,          LAUNCH_T_ROOT },
        { "set hostname",            step_hostname,        -1 },
        { "apply rlimits",           step_rlimits,         LAUNCH_T_SETUP },
        { "drop bounding set",       step_bounding,        -1 },
        { "drop identity",           step_identity,        -1 },
        { "set no_new_privs",        step_no_new_privs,    -1 },
        { "clear capabilities",      step_caps,            LAUNCH_T_CREDS },
        { "start init",              step_init,            LAUNCH_T_INIT_FORK },
        { "new session",             step_session,         -1 },
        { "set parent-death signal", step_parent_death,    -1 },
        { "set up stdio",            step_stdio,           -1 },
        { "close stray fds",         step_close_stray,     -1 },
        { "enter working directory", step_cwd,             LAUNCH_T_STDIO },
        { "reset signal mask",       step_signals,         -1 },
        { "apply seccomp",           step_seccomp,         LAUNCH_T_SECCOMP },  /* last: nothing after it may need a denied call */
};

static const char *env_path(const LaunchSpec *spec) {
        for (size_t i = 0; spec->envp && spec->envp[i]; i++)
                if (startswith(spec->envp[i], "PATH="))
                        return spec->envp[i] + 5;
        return DEFAULT_PATH;
}

/* execve() with the PATH of the child's own environment (execvpe() would search the
 * spawner's). Returns only on failure, with the most telling errno. */
static int exec_command(const LaunchSpec *spec) {
        static char *const empty_env[] = { NULL };
        char *const *envp = spec->envp ?: empty_env;
        const char *name = spec->argv[0], *p;
        char buf[4096];
        int best = -ENOENT;

        if (strchr(name, '/')) {
                execve(name, spec->argv, envp);
                return negative_errno();
        }
        p = env_path(spec);
        for (;;) {
                const char *end = strchrnul(p, ':');
                size_t len = (size_t) (end - p);

                if (len == 0)
                        len = 1, p = ".";
                if (len + 1 + strlen(name) < sizeof buf) {
                        memcpy(buf, p, len);
                        buf[len] = '/';
                        memcpy(buf + len + 1, name, strlen(name) + 1);
                        execve(buf, spec->argv, envp);
                        if (errno == EACCES)
                                best = -EACCES;     /* keep looking, but remember it */
                        else if (errno != ENOENT && errno != ENOTDIR)
                                return negative_errno();
                }
                if (*end == '\0')
                        break;
                p = end + 1;
        }
        return best;
}

static _noreturn_ void run_steps(Child *c, size_t first) {
        int r;

        for (c->step = first; c->step < ELEMENTSOF(steps); c->step++) {
                const LaunchStep *st = &steps[c->step];

                c->detail[0] = '\0';
                r = st->run(c);
                if (r < 0)
                        child_fail(c, st->name, r);
                if (st->timing >= 0 && (st->timing != LAUNCH_T_INIT_FORK || c->spec->level < ISOLATION_LEVEL_STANDARD))
                        c->report.at_usec[st->timing] = now_monotonic_usec();
        }
        if (c->spec->collect_timings)
                report_write(c, LAUNCH_REPORT_TIMINGS);

        r = exec_command(c->spec);
        (void) strscpy(c->detail, sizeof c->detail, c->spec->argv[0]);
        child_fail(c, "exec", r);
}

static _noreturn_ void child_main(Child *c) {
        c->report.at_usec[LAUNCH_T_CHILD_START] = now_monotonic_usec();
        run_steps(c, 0);
}

/* ---- the parent ---- */

int launch_clone(LaunchPlan *plan, const LaunchJob *job, pid_t *ret_pid) {
        bool bwrap = plan->runtime == LAUNCH_RUNTIME_BWRAP;
        uint64_t flags = bwrap ? bwrap_clone_flags() : namespaces_clone_flags(job->spec->level);
        Child c = {
                .plan = plan,
                .job = job,
                .spec = job->spec,
                .report_fd = job->report_fd,
        };
        pid_t pid = -1;

        for (size_t i = 0; i < ELEMENTSOF(job->limit_fds); i++)
                if (!bwrap && (flags & CLONE_NEWCGROUP) && job->limit_fds[i] >= 0) {
                        flags &= ~(uint64_t) CLONE_NEWCGROUP;
                        c.late_cgroupns = true;
                }
        if (plan->clone3) {
                struct clone_args args = {
                        .flags = flags | (job->cgroup_fd >= 0 ? CLONE_INTO_CGROUP : 0),
                        .exit_signal = SIGCHLD,
                        .cgroup = job->cgroup_fd >= 0 ? (uint64_t) job->cgroup_fd : 0,
                };

                pid = (pid_t) syscall(SYS_clone3, &args, sizeof args);
                if (pid < 0 && errno == ENOSYS)
                        plan->clone3 = false;
                else if (pid < 0)
                        return negative_errno();
                else
                        c.into_cgroup = job->cgroup_fd >= 0;
        }
        if (!plan->clone3) {
                /* Before Linux 5.3 (clone3) / 5.7 (CLONE_INTO_CGROUP): the child moves itself. */
                pid = (pid_t) syscall(SYS_clone, (unsigned long) flags | SIGCHLD, NULL, NULL, NULL, 0);
                if (pid < 0)
                        return negative_errno();
        }
        if (pid == 0) {
                if (bwrap)
                        bwrap_child_main(plan, job, c.into_cgroup);
                child_main(&c);
        }

        *ret_pid = pid;
        return 0;
}
