/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "doctor.h"
#include "fileio.h"
#include "hostprobe.h"
#include "macros.h"
#include "parse-util.h"
#include "resources.h"
#include "string-util.h"

#define GIB (1024ull * 1024ull * 1024ull)

const char *doctor_status_to_string(DoctorStatus s) {
        return s == DOCTOR_OK ? "OK" : s == DOCTOR_WARN ? "WARN" : "FAIL";
}

_printf_(5, 6) static DoctorRow *add(Doctor *d, const char *check, DoctorStatus st, const char *fix, const char *fmt, ...) {
        DoctorRow *row;
        va_list ap;

        if (d->n_rows >= DOCTOR_ROWS_MAX)
                return NULL;
        row = &d->rows[d->n_rows++];
        *row = (DoctorRow) { .status = st };
        (void) strscpy(row->check, sizeof row->check, check);
        (void) strscpy(row->fix, sizeof row->fix, st == DOCTOR_OK ? "" : fix);
        va_start(ap, fmt);
        (void) vsnprintf(row->detail, sizeof row->detail, fmt, ap);
        va_end(ap);
        return row;
}

/* The configured value of the setting named ENV, or DEF if this build has none. */
static uint64_t setting_u64(const Doctor *d, const char *env, uint64_t def) {
        for (size_t i = 0; i < config_settings_count; i++)
                if (streq(config_settings[i].env, env)) {
                        _cleanup_free_ char *v = config_value_string(&d->config, &config_settings[i]);
                        uint64_t n;
                        return v && parse_u64(v, &n) >= 0 ? n : def;
                }
        return def;
}

/* ---- running things in a forked child ---- */

typedef int (*ChildFn)(void *userdata, char *msg, size_t len);

/* Runs FN in a forked child (the doctor is single-threaded). Returns 0 if it succeeded, or
 * -EIO with its one-line message in MSG. */
static int in_child(ChildFn fn, void *userdata, char *msg, size_t len) {
        int p[2], status;
        ssize_t n;
        pid_t pid;

        msg[0] = '\0';
        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        pid = fork();
        if (pid < 0) {
                int r = -errno;
                (void) close(p[0]);
                (void) close(p[1]);
                (void) bsprintf(msg, len, "fork: %s", strerror(-r));
                return r;
        }
        if (pid == 0) {
                char m[512] = "";
                (void) close(p[0]);
                if (fn(userdata, m, sizeof m) < 0) {
                        (void) loop_write(p[1], m, strlen(m));
                        _exit(1);
                }
                _exit(0);
        }
        (void) close(p[1]);
        n = loop_read(p[0], msg, len - 1);
        msg[n > 0 ? n : 0] = '\0';
        (void) close(p[0]);
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
                return 0;
        if (!msg[0])
                (void) bsprintf(msg, len, "the check's child %s", WIFSIGNALED(status) ? "was killed" : "failed");
        return -EIO;
}

static int fail_errno(char *msg, size_t len, const char *what) {
        int r = -errno;
        (void) bsprintf(msg, len, "%s: %s", what, strerror(-r));
        return r;
}

/* ---- privileges ---- */

static const struct {
        int cap;
        const char *name;
        bool required;              /* without it the daemon cannot run commands at all */
} caps[] = {
        { 21, "cap_sys_admin", true }, { 7, "cap_setuid", true }, { 6, "cap_setgid", true },
        { 0, "cap_chown", true },      { 1, "cap_dac_override", true }, { 3, "cap_fowner", true },
        { 5, "cap_kill", true },       { 24, "cap_sys_resource", false }, { 12, "cap_net_admin", false },
        { 8, "cap_setpcap", false },   { 18, "cap_sys_chroot", false },
};

static void check_privileges(Doctor *d) {
        _cleanup_free_ char *status = NULL;
        char missing_req[256] = "", missing_opt[256] = "";
        uint64_t eff = 0;
        size_t n;
        char *p;

        if (geteuid() != 0)
                add(d, "privileges", DOCTOR_FAIL, "Run the daemon as root (or in a container as uid 0).",
                    "running as uid %u, not root", (unsigned) geteuid());
        else
                add(d, "privileges", DOCTOR_OK, "", "running as root");

        if (read_full_file_at(AT_FDCWD, "/proc/self/status", 64 * 1024, &status, &n) < 0 ||
            !(p = strstr(status, "\nCapEff:")) || sscanf(p + 8, "%" SCNx64, &eff) != 1) {
                add(d, "capabilities", DOCTOR_WARN, "Mount /proc.", "cannot read CapEff from /proc/self/status");
                return;
        }
        for (size_t i = 0; i < ELEMENTSOF(caps); i++) {
                if (eff & (UINT64_C(1) << caps[i].cap))
                        continue;
                char *buf = caps[i].required ? missing_req : missing_opt;
                size_t k = strlen(buf);
                (void) bsprintf(buf + k, 256 - k, "%s%s", k ? " " : "", caps[i].name);
        }
        if (missing_req[0])
                add(d, "capabilities", DOCTOR_FAIL,
                    "Grant the missing capabilities (Docker: --cap-add SYS_ADMIN ..., or --privileged).",
                    "missing %s%s%s%s", missing_req, missing_opt[0] ? " (and optional " : "", missing_opt, missing_opt[0] ? ")" : "");
        else if (missing_opt[0])
                add(d, "capabilities", DOCTOR_WARN,
                    "Grant them for rlimits above the hard limit, the OOM guard and network namespaces.",
                    "missing optional %s", missing_opt);
        else
                add(d, "capabilities", DOCTOR_OK, "", "CapEff %016" PRIx64 " has every capability the daemon uses", eff);
}

/* ---- namespaces ---- */

static int child_unshare(void *userdata, char *msg, size_t len) {
        int flag = *(int *) userdata;

        if (unshare(flag) < 0)
                return fail_errno(msg, len, "unshare");
        if (flag == CLONE_NEWPID) {
                /* The next child is the namespace's init. */
                int status;
                pid_t pid = fork();
                if (pid < 0)
                        return fail_errno(msg, len, "fork into the new PID namespace");
                if (pid == 0)
                        _exit(getpid() == 1 ? 0 : 1);
                if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                        (void) bsprintf(msg, len, "the first child of the new PID namespace is not pid 1");
                        return -EIO;
                }
        }
        return 0;
}

static const struct {
        int flag;
        const char *name, *flag_name, *needed_by;
        DoctorStatus missing;
} namespaces[] = {
        { CLONE_NEWNS, "mount", "CLONE_NEWNS", "every level", DOCTOR_FAIL },
        { CLONE_NEWIPC, "ipc", "CLONE_NEWIPC", "every level", DOCTOR_FAIL },
        { CLONE_NEWUTS, "uts", "CLONE_NEWUTS", "every level", DOCTOR_FAIL },
        { CLONE_NEWNET, "net", "CLONE_NEWNET", "network mode none", DOCTOR_FAIL },
        { CLONE_NEWPID, "pid", "CLONE_NEWPID", "level standard", DOCTOR_WARN },
        { CLONE_NEWCGROUP, "cgroup", "CLONE_NEWCGROUP", "level strict", DOCTOR_WARN },
        { CLONE_NEWUSER, "user", "CLONE_NEWUSER", "bwrap without root", DOCTOR_WARN },
};

/* Bits of what works, for the level summary. */
enum {
        HAVE_MOUNT = 1 << 0,
        HAVE_IPC = 1 << 1,
        HAVE_UTS = 1 << 2,
        HAVE_NET = 1 << 3,
        HAVE_PID = 1 << 4,
        HAVE_CGROUPNS = 1 << 5,
        HAVE_USER = 1 << 6,
        HAVE_PIVOT = 1 << 7,
        HAVE_SECCOMP = 1 << 8,
};

static unsigned check_namespaces(Doctor *d) {
        bool host_net = streq(d->config.network_mode, "host");
        unsigned have = 0;

        for (size_t i = 0; i < ELEMENTSOF(namespaces); i++) {
                char msg[512], check[40];
                int flag = namespaces[i].flag;
                DoctorStatus missing = namespaces[i].missing;

                if (flag == CLONE_NEWNET && host_net)
                        missing = DOCTOR_WARN;
                (void) bsprintf(check, sizeof check, "namespace %s", namespaces[i].name);
                if (in_child(child_unshare, &flag, msg, sizeof msg) >= 0) {
                        have |= 1u << i;
                        add(d, check, DOCTOR_OK, "", "unshare(%s) works in a child", namespaces[i].flag_name);
                } else
                        add(d, check, missing,
                            "Allow unshare: CAP_SYS_ADMIN and a seccomp profile permitting clone/unshare "
                            "(Docker: --security-opt seccomp=unconfined or a custom profile).",
                            "%s: %s (needed by %s)", namespaces[i].flag_name, msg, namespaces[i].needed_by);
        }
        return have;
}

/* ---- mount, pivot_root, overlayfs ---- */

typedef struct Scratch {
        char dir[64];
        bool overlay;
} Scratch;

static int child_mounts(void *userdata, char *msg, size_t len) {
        Scratch *s = userdata;
        char a[128], b[128], c[128], m[128], opts[512];

        if (unshare(CLONE_NEWNS) < 0)
                return fail_errno(msg, len, "unshare(CLONE_NEWNS)");
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return fail_errno(msg, len, "making / rprivate");
        if (mount("tmpfs", s->dir, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755") < 0)
                return fail_errno(msg, len, "mounting a tmpfs");
        if (s->overlay) {
                (void) bsprintf(a, sizeof a, "%s/lower", s->dir);
                (void) bsprintf(b, sizeof b, "%s/upper", s->dir);
                (void) bsprintf(c, sizeof c, "%s/work", s->dir);
                (void) bsprintf(m, sizeof m, "%s/merged", s->dir);
                if (mkdir(a, 0755) < 0 || mkdir(b, 0755) < 0 || mkdir(c, 0755) < 0 || mkdir(m, 0755) < 0)
                        return fail_errno(msg, len, "mkdir on the tmpfs");
                (void) bsprintf(opts, sizeof opts, "lowerdir=%s,upperdir=%s,workdir=%s", a, b, c);
                if (mount("overlay", m, "overlay", MS_NOSUID | MS_NODEV, opts) < 0)
                        return fail_errno(msg, len, "mount -t overlay");
                return 0;
        }
        (void) bsprintf(a, sizeof a, "%s/old", s->dir);
        if (mkdir(a, 0700) < 0)
                return fail_errno(msg, len, "mkdir on the tmpfs");
        if (syscall(SYS_pivot_root, s->dir, a) < 0)
                return fail_errno(msg, len, "pivot_root");
        if (chdir("/") < 0)
                return fail_errno(msg, len, "chdir to the new root");
        if (umount2("/old", MNT_DETACH) < 0)
                return fail_errno(msg, len, "detaching the old root");
        return 0;
}

static bool check_mounts(Doctor *d, bool overlay) {
        Scratch s = { .overlay = overlay };
        char msg[512];
        int r;

        (void) strscpy(s.dir, sizeof s.dir, "/tmp/sandloom-doctor-XXXXXX");
        if (!mkdtemp(s.dir)) {
                add(d, overlay ? "overlayfs" : "mount + pivot_root", DOCTOR_WARN, "Make /tmp writable.",
                    "cannot make a scratch directory in /tmp: %s", strerror(errno));
                return false;
        }
        r = in_child(child_mounts, &s, msg, sizeof msg);
        (void) rmdir(s.dir);
        if (overlay) {
                if (r >= 0)
                        add(d, "overlayfs", DOCTOR_OK, "", "mounted an overlay on a tmpfs in a child's mount namespace");
                else
                        add(d, "overlayfs", DOCTOR_WARN, "Load the overlay module (modprobe overlay) and allow mounts (see mount + pivot_root); only templates need it.",
                            "%s", msg);
                return r >= 0;
        }
        if (r >= 0)
                add(d, "mount + pivot_root", DOCTOR_OK, "", "pivot_root into a tmpfs in a child's mount namespace works");
        else
                add(d, "mount + pivot_root", DOCTOR_FAIL,
                    "Allow mount and pivot_root: CAP_SYS_ADMIN, apparmor=unconfined (or a profile allowing mount), "
                    "seccomp allowing mount/pivot_root.",
                    "%s", msg);
        return r >= 0;
}

/* ---- seccomp ---- */

static int child_seccomp(void *userdata, char *msg, size_t len) {
        scmp_filter_ctx ctx;
        int r;

        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return fail_errno(msg, len, "PR_SET_NO_NEW_PRIVS");
        ctx = seccomp_init(SCMP_ACT_ALLOW);
        if (!ctx) {
                (void) bsprintf(msg, len, "seccomp_init failed");
                return -ENOMEM;
        }
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOTRECOVERABLE), SCMP_SYS(getppid), 0);
        if (r >= 0)
                r = seccomp_load(ctx);
        seccomp_release(ctx);
        if (r < 0) {
                (void) bsprintf(msg, len, "loading a filter: %s", strerror(-r));
                return r;
        }
        if (syscall(SYS_getppid) != -1 || errno != ENOTRECOVERABLE) {
                (void) bsprintf(msg, len, "a loaded filter did not take effect");
                return -EIO;
        }
        return 0;
}

static bool check_seccomp(Doctor *d) {
        char msg[512];

        if (in_child(child_seccomp, NULL, msg, sizeof msg) >= 0) {
                add(d, "seccomp", DOCTOR_OK, "", "a filter loaded in a child answers as written");
                return true;
        }
        add(d, "seccomp", DOCTOR_FAIL, "Use a kernel with CONFIG_SECCOMP_FILTER and allow seccomp() in the container profile.",
            "%s", msg);
        return false;
}

static void check_level(Doctor *d, unsigned have) {
        unsigned basic = HAVE_MOUNT | HAVE_IPC | HAVE_UTS | HAVE_PIVOT | HAVE_SECCOMP;
        const char *level = NULL;

        if (!streq(d->config.network_mode, "host"))
                basic |= HAVE_NET;
        if (geteuid() == 0 && (have & basic) == basic)
                level = (have & HAVE_PID) ? ((have & HAVE_CGROUPNS) ? "strict" : "standard") : "basic";
        if (!level)
                add(d, "isolation level", DOCTOR_FAIL, "Fix the FAIL rows above; see docs/OPERATIONS.md.",
                    "no isolation level can work here: commands would be refused");
        else if (!streq(level, "strict"))
                add(d, "isolation level", DOCTOR_WARN, "Allow the missing namespaces for a stronger level.",
                    "the strongest level expected to work is %s", level);
        else
                add(d, "isolation level", DOCTOR_OK, "", "strict, standard and basic are expected to work (the daemon probes at start)");
}

/* ---- cgroups ---- */

static void check_cgroups(Doctor *d) {
        _cleanup_free_ CgroupLayout *l = calloc(1, sizeof *l);
        char detail[640] = "", ev[512];
        int r;

        r = l ? hostprobe_cgroups(l) : -ENOMEM;
        if (r < 0) {
                add(d, "cgroups", DOCTOR_WARN, "Mount /proc.", "cannot read the mount table: %s", strerror(-r));
                return;
        }
        {
                char ctl[256] = "";
                for (size_t i = 0; i < l->n_v1; i++) {
                        size_t k = strlen(ctl);
                        (void) bsprintf(ctl + k, sizeof ctl - k, "%s%s", k ? " " : "", l->v1[i].controllers);
                }
                if (l->v2 && l->n_v1 == 0)
                        add(d, "cgroup version", l->v2_controllers[0] ? DOCTOR_OK : DOCTOR_WARN,
                            "Enable controllers for the daemon's cgroup (systemd: Delegate=yes).",
                            "v2 (unified) at %s; controllers of the daemon's cgroup: %s", l->v2_mount,
                            l->v2_controllers[0] ? l->v2_controllers : "none");
                else if (l->n_v1 > 0)
                        add(d, "cgroup version", DOCTOR_OK, "", "v1 hierarchies: %s%s%s", ctl,
                            l->v2 ? "; v2 also mounted at " : "", l->v2 ? l->v2_mount : "");
                else
                        add(d, "cgroup version", DOCTOR_WARN, "Mount cgroup2 at /sys/fs/cgroup (or the v1 hierarchies).",
                            "no cgroup hierarchy is mounted: limits fall back to rlimits");
        }
        if (!l->v2)
                add(d, "cgroup v2 (tracking)", DOCTOR_WARN,
                    "Mount cgroup2 (e.g. at /sys/fs/cgroup/unified) for atomic tree kills; the PID namespace is used instead.",
                    "no cgroup2 hierarchy is mounted");
        else if (!l->v2_own[0])
                add(d, "cgroup v2 (tracking)", DOCTOR_WARN,
                    "Run with a private cgroup namespace (Docker: --cgroupns=private) or mount the host's hierarchy.",
                    "cgroup2 at %s, but the daemon's own cgroup is not visible through it", l->v2_mount);
        else if (hostprobe_cgroup_try(l->v2_own, "cgroup.max.depth", "max", ev, sizeof ev) < 0)
                add(d, "cgroup v2 (tracking)", DOCTOR_WARN,
                    "Delegate the daemon's cgroup (systemd: Delegate=yes; Docker: --cgroupns=private with a writable /sys/fs/cgroup).",
                    "cgroup2 at %s: %s", l->v2_mount, ev);
        else
                add(d, "cgroup v2 (tracking)", DOCTOR_OK, "",
                    "cgroup2 at %s, own cgroup %s can have children; controllers: %s; delegated to children: %s", l->v2_mount,
                    l->v2_own, l->v2_controllers[0] ? l->v2_controllers : "none",
                    l->v2_subtree[0] ? l->v2_subtree : "none");

        if (l->n_v1 == 0) {
                add(d, "cgroup v1", l->v2 && l->v2_controllers[0] ? DOCTOR_OK : DOCTOR_WARN,
                    "Mount the cgroup controllers (v2 unified with memory pids cpu, or v1 hierarchies).",
                    "no v1 hierarchy is mounted");
                return;
        }
        bool all_ok = true;
        for (size_t i = 0; i < l->n_v1; i++) {
                const CgroupHierarchy *h = &l->v1[i];
                size_t k = strlen(detail);
                bool ok = h->own[0] && hostprobe_cgroup_try(h->own, "notify_on_release", "0", ev, sizeof ev) >= 0;
                if (!h->own[0])
                        (void) strscpy(ev, sizeof ev, "own cgroup not visible");
                all_ok = all_ok && ok;
                (void) bsprintf(detail + k, sizeof detail - k, "%s%s: %s", k ? ", " : "", h->controllers,
                                ok ? "can create" : (strstr(ev, ": ") ? strstr(ev, ": ") + 2 : ev));
        }
        add(d, "cgroup v1", all_ok ? DOCTOR_OK : DOCTOR_WARN,
            "Make the daemon's cgroups writable (Docker: -v /sys/fs/cgroup:/sys/fs/cgroup:rw, --cgroupns=host).",
            "%s", detail);
}

static const char *const resource_fix[_RESOURCE_MAX] = {
        [RESOURCE_MEMORY] = "Make the memory controller available and writable (v2 delegation or the v1 memory hierarchy).",
        [RESOURCE_PIDS] = "Make the pids controller available and writable (v2 delegation or the v1 pids hierarchy).",
        [RESOURCE_CPU] = "Make the cpu controller available and writable (v2 delegation or the v1 cpu hierarchy).",
        [RESOURCE_DISK] = "Put the data dir on XFS mounted with prjquota, or ext4 with the project feature and prjquota.",
        [RESOURCE_OPEN_FILES] = "Raise the daemon's hard RLIMIT_NOFILE or grant CAP_SYS_RESOURCE.",
};

static void check_resources(Doctor *d, int data_fd, const char *probe_dir) {
        ResourceStatus *st = calloc(_RESOURCE_MAX, sizeof *st);

        if (!st)
                return;
        resources_probe_all(&d->config, probe_dir, data_fd, st);
        for (size_t i = 0; i < _RESOURCE_MAX; i++) {
                char check[40];
                ResourceMechanism m = st[i].mechanism;
                bool good = m == RESOURCE_MECHANISM_CGROUP_V1 || m == RESOURCE_MECHANISM_CGROUP_V2 ||
                            m == RESOURCE_MECHANISM_PROJECT_QUOTA ||
                            (i == RESOURCE_OPEN_FILES && m == RESOURCE_MECHANISM_RLIMIT) ||
                            (i == RESOURCE_DISK && !st[i].limit[0]); /* no quota configured: nothing to enforce */
                (void) bsprintf(check, sizeof check, "limit %s", resource_kind_to_string((ResourceKind) i));
                add(d, check, good ? DOCTOR_OK : DOCTOR_WARN, resource_fix[i], "%s: %.560s",
                    resource_mechanism_to_string(m), st[i].evidence);
        }
        free(st);
}

/* ---- bubblewrap ---- */

static void check_bwrap(Doctor *d) {
        bool wanted = streq(d->config.runtime, "bwrap");
        char out[256] = "";
        int p[2], status;
        pid_t pid;
        ssize_t n;

        if (access("/usr/bin/bwrap", X_OK) < 0 && access("/usr/local/bin/bwrap", X_OK) < 0) {
                add(d, "bubblewrap", wanted ? DOCTOR_FAIL : DOCTOR_WARN, "apt-get install bubblewrap (only SANDBOX_RUNTIME=bwrap needs it).",
                    "bwrap is not installed");
                return;
        }
        if (pipe2(p, O_CLOEXEC) < 0)
                return;
        pid = fork();
        if (pid < 0) {
                (void) close(p[0]);
                (void) close(p[1]);
                return;
        }
        if (pid == 0) {
                if (dup2(p[1], STDOUT_FILENO) < 0)
                        _exit(127);
                int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
                if (devnull >= 0)
                        (void) dup2(devnull, STDERR_FILENO);
                execlp("bwrap", "bwrap", "--version", (char *) NULL);
                _exit(127);
        }
        (void) close(p[1]);
        n = loop_read(p[0], out, sizeof out - 1);
        out[n > 0 ? n : 0] = '\0';
        (void) close(p[0]);
        (void) waitpid(pid, &status, 0);
        strstrip_trailing(out);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && out[0])
                add(d, "bubblewrap", DOCTOR_OK, "", "%s", out);
        else
                add(d, "bubblewrap", wanted ? DOCTOR_FAIL : DOCTOR_WARN, "Reinstall bubblewrap.", "bwrap --version failed");
}

/* ---- data directory, disk, store ---- */

static void check_disk(Doctor *d, const char *dir) {
        uint64_t high = setting_u64(d, "SANDBOX_DISK_HIGH_WATERMARK_PERCENT", 90);
        uint64_t min_free = setting_u64(d, "SANDBOX_MIN_FREE_BYTES", GIB);
        struct statvfs st;
        uint64_t used, avail, pct;

        if (statvfs(dir, &st) < 0) {
                add(d, "disk space", DOCTOR_WARN, "Create the data directory's parent.", "statvfs %s: %s", dir, strerror(errno));
                return;
        }
        used = (uint64_t) (st.f_blocks - st.f_bfree) * st.f_frsize;
        avail = (uint64_t) st.f_bavail * st.f_frsize;
        /* df's Use%: used / (used + available), rounded up. */
        pct = used + avail ? (used * 100 + used + avail - 1) / (used + avail) : 0;
        if (pct > high || avail < min_free)
                add(d, "disk space", DOCTOR_FAIL, "Free space or move SANDBOX_DATA_DIR; new work would get 503 SANDBOX_WORKER_DISK_PRESSURE.",
                    "%" PRIu64 "%% used, %" PRIu64 " MiB free on %s (watermark %" PRIu64 "%%, minimum free %" PRIu64 " MiB)", pct,
                    avail >> 20, dir, high, min_free >> 20);
        else if (pct + 5 > high || avail < 2 * min_free)
                add(d, "disk space", DOCTOR_WARN, "Free space soon: the watermark is near.",
                    "%" PRIu64 "%% used, %" PRIu64 " MiB free on %s (watermark %" PRIu64 "%%, minimum free %" PRIu64 " MiB)", pct,
                    avail >> 20, dir, high, min_free >> 20);
        else
                add(d, "disk space", DOCTOR_OK, "",
                    "%" PRIu64 "%% used, %" PRIu64 " MiB free on %s (watermark %" PRIu64 "%%, minimum free %" PRIu64 " MiB)", pct,
                    avail >> 20, dir, high, min_free >> 20);
}

/* A secret file: owner root, nobody else may read it. Never reads its content. */
static void check_secret_file(Doctor *d, int dir_fd, const char *dir, const char *name, const char *check) {
        struct stat st;

        if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                if (errno == ENOENT)
                        add(d, check, DOCTOR_OK, "", "%s/%s not created yet (the daemon creates it mode 0600)", dir, name);
                else
                        add(d, check, DOCTOR_FAIL, "Make it readable by root.", "%s/%s: %s", dir, name, strerror(errno));
                return;
        }
        if (!S_ISREG(st.st_mode))
                add(d, check, DOCTOR_FAIL, "Replace it with a regular file.", "%s/%s is not a regular file", dir, name);
        else if (st.st_mode & 0077)
                add(d, check, DOCTOR_FAIL, "chmod 0600 it (and chown root:root).", "%s/%s has mode %04o: others can read it", dir,
                    name, (unsigned) (st.st_mode & 07777));
        else if (st.st_uid != 0)
                add(d, check, DOCTOR_WARN, "chown root:root it.", "%s/%s is owned by uid %u, not root", dir, name,
                    (unsigned) st.st_uid);
        else
                add(d, check, DOCTOR_OK, "", "%s/%s: root-owned, mode %04o", dir, name, (unsigned) (st.st_mode & 07777));
}

static void check_token_file(Doctor *d, int dir_fd, const char *dir) {
        const char *f = d->config.internal_token_file;
        _cleanup_free_ char *copy = NULL;

        if (d->config.internal_token && d->config.internal_token[0]) {
                add(d, "token", DOCTOR_OK, "", "given by SANDBOX_INTERNAL_TOKEN (not stored in the data directory)");
                return;
        }
        if (f && f[0]) {
                copy = strdup(f);
                if (!copy)
                        return;
                char *slash = strrchr(copy, '/');
                _cleanup_close_ int fd = -1;
                if (slash) {
                        *slash = '\0';
                        fd = open(slash == copy ? "/" : copy, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                } else
                        fd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (fd < 0) {
                        add(d, "token", DOCTOR_FAIL, "Create the token file's directory.", "SANDBOX_INTERNAL_TOKEN_FILE's directory: %s",
                            strerror(errno));
                        return;
                }
                check_secret_file(d, fd, slash ? (slash == copy ? "" : copy) : ".", slash ? slash + 1 : copy, "token");
                return;
        }
        check_secret_file(d, dir_fd, dir, "token", "token");
}

static void check_store(Doctor *d, const char *dir) {
        _cleanup_free_ char *path = strprintf("%s/sandloom.db", dir);
        sqlite3 *db = NULL;
        sqlite3_stmt *st = NULL;
        struct stat s;
        int rc;

        if (!path)
                return;
        if (stat(path, &s) < 0) {
                add(d, "store", DOCTOR_OK, "", "%s not created yet (the daemon creates it at start)", path);
                return;
        }
        rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL);
        if (rc == SQLITE_OK)
                rc = sqlite3_prepare_v2(db, "SELECT coalesce(max(version), 0) FROM schema_migrations", -1, &st, NULL);
        if (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
                add(d, "store", DOCTOR_OK, "", "%s opens read-only, schema version %lld", path,
                    (long long) sqlite3_column_int64(st, 0));
        else
                add(d, "store", DOCTOR_FAIL, "Restore the database from a backup or move it away to start afresh.",
                    "%s: %s", path, db ? sqlite3_errmsg(db) : "cannot open");
        sqlite3_finalize(st);
        sqlite3_close(db);
}

/* The data directory itself. Returns an fd on it (or on its nearest existing parent) for the
 * filesystem checks, and the path that fd names in RET_DIR. */
static int check_data_dir(Doctor *d, char *ret_dir, size_t len) {
        const char *dir = d->data_dir;
        struct stat st;
        int fd;

        (void) strscpy(ret_dir, len, dir);
        if (lstat(dir, &st) < 0) {
                char parent[PATH_MAX];
                if (errno != ENOENT) {
                        add(d, "data directory", DOCTOR_FAIL, "Make it reachable by root.", "%s: %s", dir, strerror(errno));
                        return -errno;
                }
                (void) strscpy(parent, sizeof parent, dir);
                char *slash = strrchr(parent, '/');
                if (slash)
                        *(slash == parent ? slash + 1 : slash) = '\0';
                else
                        (void) strscpy(parent, sizeof parent, ".");
                fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (fd < 0) {
                        add(d, "data directory", DOCTOR_FAIL, "Create its parent directory (the daemon creates one level only).",
                            "%s does not exist, nor its parent %s", dir, parent);
                        return -ENOENT;
                }
                add(d, "data directory", DOCTOR_OK, "", "%s not created yet (the daemon creates it root-owned 0711)", dir);
                (void) strscpy(ret_dir, len, parent);
                return fd;
        }
        if (!S_ISDIR(st.st_mode)) {
                add(d, "data directory", DOCTOR_FAIL, "Point SANDBOX_DATA_DIR at a directory (not a symlink).",
                    "%s is not a directory", dir);
                return -ENOTDIR;
        }
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0) {
                add(d, "data directory", DOCTOR_FAIL, "Make it readable by root.", "%s: %s", dir, strerror(errno));
                return -errno;
        }
        if (st.st_mode & 0022)
                add(d, "data directory", DOCTOR_FAIL, "chmod 0711 it: others can plant files in the daemon's data.",
                    "%s has mode %04o: writable by group or others", dir, (unsigned) (st.st_mode & 07777));
        else if (st.st_uid != 0 || (st.st_mode & 07777) != 0711)
                add(d, "data directory", DOCTOR_WARN, "chown root:root and chmod 0711 it (the daemon also fixes this at start).",
                    "%s is owned by uid %u with mode %04o (want root, 0711)", dir, (unsigned) st.st_uid,
                    (unsigned) (st.st_mode & 07777));
        else
                add(d, "data directory", DOCTOR_OK, "", "%s: root-owned, mode 0711", dir);
        return fd;
}

static void check_project_quota(Doctor *d, int fd, const char *dir) {
        char ev[512];
        int r = hostprobe_project_quota(fd, dir, ev, sizeof ev);

        if (r > 0)
                add(d, "project quotas", DOCTOR_OK, "", "%s", ev);
        else
                add(d, "project quotas", DOCTOR_WARN, resource_fix[RESOURCE_DISK], "%s; per-sandbox quotas are soft",
                    r < 0 ? strerror(-r) : ev);
}

void doctor_run_checks(Doctor *d) {
        char dir[PATH_MAX];
        unsigned have;
        _cleanup_close_ int fd = -1;

        check_privileges(d);
        have = check_namespaces(d);
        if (check_mounts(d, false))
                have |= HAVE_PIVOT;
        if (check_seccomp(d))
                have |= HAVE_SECCOMP;
        check_level(d, have);
        (void) check_mounts(d, true);
        check_cgroups(d);
        check_bwrap(d);

        fd = check_data_dir(d, dir, sizeof dir);
        if (fd >= 0) {
                check_project_quota(d, fd, dir);
                check_resources(d, fd, dir);
                check_disk(d, dir);
        }
        if (streq(dir, d->data_dir) && fd >= 0) {
                check_token_file(d, fd, d->data_dir);
                check_secret_file(d, fd, d->data_dir, "sandloom.db", "database file");
                check_store(d, d->data_dir);
        } else
                add(d, "store", DOCTOR_OK, "", "%s/sandloom.db not created yet", d->data_dir);
}
