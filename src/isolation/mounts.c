/* SPDX-License-Identifier: MIT */
#include "mounts.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "macros.h"
#include "string-util.h"

/* Where the new root is assembled: any directory of the host will do, the tmpfs mounted
 * over it exists only in the child's own mount namespace. */
#define STAGE "/tmp"

/* Host secrets under /etc, masked by an empty, mode 000 file or directory. */
static const char *const secret_paths[] = {
        "/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-",
        "/etc/sudoers", "/etc/sudoers.d", "/etc/ssl/private", "/etc/security/opasswd",
        "/etc/krb5.keytab", "/etc/sandloom",
};

static const char *const top_names[] = { "bin", "sbin", "lib", "lib32", "lib64", "libx32" };

/* ---- the plan, in the spawner ---- */

static bool visible_in_sandbox(const char *path) {
        return startswith(path, "/etc/") || startswith(path, "/usr/");
}

static int plan_add_mask(MountPlan *plan, const char *path) {
        char resolved[PATH_MAX];
        struct stat st;

        if (!path || path[0] != '/')
                return 0;
        /* A symlinked secret is masked where it really is, if the sandbox can see that. */
        if (!realpath(path, resolved))
                return 0;               /* absent: nothing to hide */
        if (!visible_in_sandbox(resolved) || lstat(resolved, &st) < 0)
                return 0;
        for (size_t i = 0; i < plan->n_masks; i++)
                if (streq(plan->masks[i].path, resolved))
                        return 0;
        if (plan->n_masks >= MOUNT_MASKS_MAX)
                return -E2BIG;
        if (strscpy(plan->masks[plan->n_masks].path, MOUNT_PATH_MAX, resolved) < 0)
                return 0;               /* longer than any secret we mask: skip it */
        plan->masks[plan->n_masks].dir = S_ISDIR(st.st_mode);
        plan->n_masks++;
        return 0;
}

int mounts_plan_init(MountPlan *plan, const char *const *extra_masks) {
        glob_t g = {};
        int r = 0;

        *plan = (MountPlan) {};
        for (size_t i = 0; i < ELEMENTSOF(secret_paths) && r >= 0; i++)
                r = plan_add_mask(plan, secret_paths[i]);
        if (r >= 0 && glob("/etc/ssh/ssh_host_*", GLOB_NOSORT, NULL, &g) == 0) {
                for (size_t i = 0; i < g.gl_pathc && r >= 0; i++)
                        if (!endswith(g.gl_pathv[i], ".pub"))
                                r = plan_add_mask(plan, g.gl_pathv[i]);
                globfree(&g);
        }
        for (size_t i = 0; extra_masks && extra_masks[i] && r >= 0; i++)
                r = plan_add_mask(plan, extra_masks[i]);
        if (r < 0)
                return r;

        for (size_t i = 0; i < ELEMENTSOF(top_names); i++) {
                MountTop *t = &plan->top[i];
                char path[64];
                struct stat st;
                ssize_t n;

                t->name = top_names[i];
                t->kind = MOUNT_TOP_ABSENT;
                (void) bsprintf(path, sizeof path, "/%s", t->name);
                if (lstat(path, &st) < 0)
                        continue;
                if (S_ISLNK(st.st_mode)) {
                        n = readlink(path, t->target, sizeof t->target - 1);
                        if (n <= 0 || (size_t) n >= sizeof t->target - 1)
                                continue;
                        t->target[n] = '\0';
                        t->kind = MOUNT_TOP_SYMLINK;
                } else if (S_ISDIR(st.st_mode))
                        t->kind = MOUNT_TOP_DIR;
        }
        return 0;
}

/* ---- the build, in the launch child ---- */

#define FAIL(what) do { (void) bsprintf(detail, size, "%s", (what)); return negative_errno(); } while (0)
#define FAILF(fmt, ...) do { (void) bsprintf(detail, size, fmt, __VA_ARGS__); return negative_errno(); } while (0)

static int write_file_at(int dir_fd, const char *name, const char *content, mode_t mode) {
        _cleanup_close_ int fd = -EBADF;
        size_t len = strlen(content);

        fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
        if (fd < 0)
                return -1;
        if (write(fd, content, len) != (ssize_t) len) {
                if (errno == 0)
                        errno = EIO;
                return -1;
        }
        return 0;
}

static int set_attr(int dir_fd, const char *path, unsigned flags, uint64_t set, uint64_t clr) {
        /* Private throughout: the sandbox directories come from the host's mount
         * namespace, whose peer groups they would otherwise still be part of. */
        struct mount_attr attr = { .attr_set = set, .attr_clr = clr, .propagation = MS_PRIVATE };

        return mount_setattr(dir_fd, path, flags | (isempty(path) ? AT_EMPTY_PATH : 0), &attr, sizeof attr);
}

static int build_skeleton(const MountPlan *plan, const MountRequest *req, int root_fd, char *detail, size_t size) {
        static const char *const dirs[] = {
                "usr", "etc", "dev", "tmp", "proc", "workspace", "home", "home/sandbox", "cache", "envs", "var", "run",
        };
        char passwd[MOUNT_PASSWD_MAX], group[MOUNT_GROUP_MAX];

        for (size_t i = 0; i < ELEMENTSOF(dirs); i++)
                if (mkdirat(root_fd, dirs[i], 0755) < 0)
                        FAILF("creating /%s", dirs[i]);
        if (symlinkat("../tmp", root_fd, "var/tmp") < 0)
                FAIL("creating /var/tmp");
        for (size_t i = 0; i < ELEMENTSOF(plan->top); i++) {
                const MountTop *t = &plan->top[i];

                if (t->kind == MOUNT_TOP_SYMLINK && symlinkat(t->target, root_fd, t->name) < 0)
                        FAILF("creating /%s", t->name);
                if (t->kind == MOUNT_TOP_DIR && mkdirat(root_fd, t->name, 0755) < 0)
                        FAILF("creating /%s", t->name);
        }

        /* Mask sources: bound over the secrets, then unlinked (a bind keeps its inode). */
        if (write_file_at(root_fd, ".mask", "", 0) < 0)
                FAIL("creating the mask file");
        if (mkdirat(root_fd, ".maskdir", 0) < 0)
                FAIL("creating the mask directory");

        mounts_identity_files(req->uid, req->gid, passwd, group);
        if (write_file_at(root_fd, ".passwd", passwd, 0644) < 0 || write_file_at(root_fd, ".group", group, 0644) < 0)
                FAIL("writing /etc/passwd and /etc/group");
        return 0;
}

void mounts_identity_files(uid_t uid, gid_t gid, char passwd[static MOUNT_PASSWD_MAX], char group[static MOUNT_GROUP_MAX]) {
        (void) bsprintf(passwd, MOUNT_PASSWD_MAX,
                        "root:x:0:0:root:/root:/usr/sbin/nologin\n"
                        "sandbox:x:%" PRIu32 ":%" PRIu32 ":sandbox:/home/sandbox:/bin/sh\n"
                        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
                        (uint32_t) uid, (uint32_t) gid);
        (void) bsprintf(group, MOUNT_GROUP_MAX, "root:x:0:\ntty:x:5:\nsandbox:x:%" PRIu32 ":\nnogroup:x:65534:\n",
                        (uint32_t) gid);
}

static int bind_system(const MountPlan *plan, char *detail, size_t size) {
        char target[64];

        if (mount("/usr", STAGE "/usr", NULL, MS_BIND | MS_REC, NULL) < 0)
                FAIL("binding /usr");
        for (size_t i = 0; i < ELEMENTSOF(plan->top); i++) {
                char source[64];

                if (plan->top[i].kind != MOUNT_TOP_DIR)
                        continue;
                (void) bsprintf(source, sizeof source, "/%s", plan->top[i].name);
                (void) bsprintf(target, sizeof target, STAGE "/%s", plan->top[i].name);
                if (mount(source, target, NULL, MS_BIND | MS_REC, NULL) < 0)
                        FAILF("binding %s", source);
        }
        if (mount("/etc", STAGE "/etc", NULL, MS_BIND | MS_REC, NULL) < 0)
                FAIL("binding /etc");
        return 0;
}

static int mask_secrets(const MountPlan *plan, int root_fd, char *detail, size_t size) {
        char target[MOUNT_PATH_MAX + 16];

        for (size_t i = 0; i < plan->n_masks; i++) {
                const MountMask *m = &plan->masks[i];

                if (bsprintf(target, sizeof target, STAGE "%s", m->path) < 0)
                        continue;
                if (mount(m->dir ? STAGE "/.maskdir" : STAGE "/.mask", target, NULL, MS_BIND, NULL) < 0) {
                        if (errno == ENOENT)
                                continue;       /* gone since the plan was made */
                        FAILF("masking %s", m->path);
                }
        }
        if (mount(STAGE "/.passwd", STAGE "/etc/passwd", NULL, MS_BIND, NULL) < 0 && errno != ENOENT)
                FAIL("mounting /etc/passwd");
        if (mount(STAGE "/.group", STAGE "/etc/group", NULL, MS_BIND, NULL) < 0 && errno != ENOENT)
                FAIL("mounting /etc/group");

        if (unlinkat(root_fd, ".mask", 0) < 0 || unlinkat(root_fd, ".maskdir", AT_REMOVEDIR) < 0 ||
            unlinkat(root_fd, ".passwd", 0) < 0 || unlinkat(root_fd, ".group", 0) < 0)
                FAIL("removing the mask sources");
        return 0;
}

static int build_dev(const MountRequest *req, char *detail, size_t size) {
        static const struct {
                const char *name;
                unsigned major, minor;
        } nodes[] = {
                { "null", 1, 3 }, { "zero", 1, 5 }, { "full", 1, 7 },
                { "random", 1, 8 }, { "urandom", 1, 9 }, { "tty", 5, 0 },
        };
        static const struct {
                const char *name, *target;
        } links[] = {
                { "fd", "/proc/self/fd" }, { "stdin", "/proc/self/fd/0" }, { "stdout", "/proc/self/fd/1" },
                { "stderr", "/proc/self/fd/2" }, { "ptmx", "pts/ptmx" },
        };
        _cleanup_close_ int dev_fd = -EBADF;
        char opts[64];

        if (mount("sandloom-dev", STAGE "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k,nr_inodes=64") < 0)
                FAIL("mounting /dev");
        dev_fd = open(STAGE "/dev", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dev_fd < 0)
                FAIL("opening /dev");
        for (size_t i = 0; i < ELEMENTSOF(nodes); i++)
                if (mknodat(dev_fd, nodes[i].name, S_IFCHR | 0666, makedev(nodes[i].major, nodes[i].minor)) < 0)
                        FAILF("creating /dev/%s", nodes[i].name);
        for (size_t i = 0; i < ELEMENTSOF(links); i++)
                if (symlinkat(links[i].target, dev_fd, links[i].name) < 0)
                        FAILF("creating /dev/%s", links[i].name);
        if (mkdirat(dev_fd, "pts", 0755) < 0 || mkdirat(dev_fd, "shm", 01777) < 0)
                FAIL("creating /dev/pts and /dev/shm");

        if (mount("devpts", STAGE "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
                  "newinstance,ptmxmode=0666,mode=0620,gid=5") < 0)
                FAIL("mounting /dev/pts");
        (void) bsprintf(opts, sizeof opts, "mode=1777,size=%" PRIu64, req->shm_bytes ? req->shm_bytes : UINT64_C(64) << 20);
        if (mount("sandloom-shm", STAGE "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts) < 0)
                FAIL("mounting /dev/shm");
        return 0;
}

const char *const mount_sandbox_dirs[MOUNT_SANDBOX_DIRS] = { "workspace", "home/sandbox", "cache", "envs" };

int mounts_clone_sandbox_dirs(int fs_fd, int ret_fds[MOUNT_SANDBOX_DIRS], char *detail, size_t size) {
        int fds[MOUNT_SANDBOX_DIRS];
        size_t n;
        int r = 0;

        for (n = 0; n < MOUNT_SANDBOX_DIRS; n++) {
                _cleanup_close_ int src = -EBADF;
                struct open_how how = {
                        .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
                };

                src = (int) syscall(SYS_openat2, fs_fd, mount_sandbox_dirs[n], &how, sizeof how);
                if (src < 0) {
                        r = negative_errno();
                        (void) bsprintf(detail, size, "opening the sandbox's %s", mount_sandbox_dirs[n]);
                        break;
                }
                fds[n] = open_tree(src, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
                if (fds[n] < 0) {
                        r = negative_errno();
                        (void) bsprintf(detail, size, "cloning the sandbox's %s", mount_sandbox_dirs[n]);
                        break;
                }
        }
        if (r < 0) {
                while (n > 0)
                        safe_close(fds[--n]);
                return r;
        }
        memcpy(ret_fds, fds, sizeof fds);
        return 0;
}

static int attach_sandbox_dirs(const MountRequest *req, int root_fd, char *detail, size_t size) {
        for (size_t i = 0; i < MOUNT_SANDBOX_DIRS; i++) {
                if (move_mount(req->dirs[i], "", root_fd, mount_sandbox_dirs[i], MOVE_MOUNT_F_EMPTY_PATH) < 0)
                        FAILF("mounting /%s", mount_sandbox_dirs[i]);
                (void) close(req->dirs[i]);
        }
        return 0;
}

static int set_attributes(const MountPlan *plan, int root_fd, char *detail, size_t size) {
        if (set_attr(root_fd, "", AT_RECURSIVE, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0) < 0)
                FAIL("making every mount nosuid,nodev");
        if (set_attr(root_fd, "usr", AT_RECURSIVE, MOUNT_ATTR_RDONLY, 0) < 0)
                FAIL("making /usr read-only");
        for (size_t i = 0; i < ELEMENTSOF(plan->top); i++)
                if (plan->top[i].kind == MOUNT_TOP_DIR &&
                    set_attr(root_fd, plan->top[i].name, AT_RECURSIVE, MOUNT_ATTR_RDONLY, 0) < 0)
                        FAILF("making /%s read-only", plan->top[i].name);
        if (set_attr(root_fd, "etc", AT_RECURSIVE, MOUNT_ATTR_RDONLY, 0) < 0)
                FAIL("making /etc read-only");
        /* /dev itself and its private devpts: their device nodes must work. /dev/shm stays nodev. */
        if (set_attr(root_fd, "dev", 0, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOEXEC, MOUNT_ATTR_NODEV) < 0)
                FAIL("making /dev read-only");
        if (set_attr(root_fd, "dev/pts", 0, MOUNT_ATTR_NOEXEC, MOUNT_ATTR_NODEV) < 0)
                FAIL("allowing the devpts nodes");
        if (set_attr(root_fd, "", 0, MOUNT_ATTR_RDONLY, 0) < 0)
                FAIL("making / read-only");
        return 0;
}

int mounts_build_root(const MountPlan *plan, const MountRequest *req, char *detail, size_t size) {
        _cleanup_close_ int root_fd = -EBADF;
        char opts[64];
        mode_t old_umask;
        int r;

        /* Nothing we mount may propagate back to the host, nor the host's into us. */
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                FAIL("making / private");
        if (mount("sandloom-root", STAGE, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m,nr_inodes=1024") < 0)
                FAIL("mounting the root tmpfs");
        root_fd = open(STAGE, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root_fd < 0)
                FAIL("opening the new root");

        old_umask = umask(0);
        r = build_skeleton(plan, req, root_fd, detail, size);
        if (r >= 0)
                r = bind_system(plan, detail, size);
        if (r >= 0)
                r = mask_secrets(plan, root_fd, detail, size);
        if (r >= 0)
                r = build_dev(req, detail, size);
        (void) umask(old_umask);
        if (r < 0)
                return r;

        (void) bsprintf(opts, sizeof opts, "mode=1777,size=%" PRIu64, req->tmpfs_bytes);
        if (mount("sandloom-tmp", STAGE "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
                FAIL("mounting /tmp");
        if (req->proc && mount("proc", STAGE "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
                FAIL("mounting /proc");
        r = attach_sandbox_dirs(req, root_fd, detail, size);
        if (r < 0)
                return r;
        r = set_attributes(plan, root_fd, detail, size);
        if (r < 0)
                return r;

        if (fchdir(root_fd) < 0)
                FAIL("entering the new root");
        if (syscall(SYS_pivot_root, ".", ".") < 0)
                FAIL("pivot_root");
        /* The old root now sits on top of the new one: detach it, and every host mount with it. */
        if (umount2(".", MNT_DETACH) < 0)
                FAIL("detaching the old root");
        if (chdir("/") < 0)
                FAIL("entering /");
        return 0;
}
