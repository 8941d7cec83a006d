/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* The sandbox's file system view: a fresh root (tmpfs) holding
 *   /usr (+ /bin /sbin /lib* as the host has them)  host, read-only, recursively
 *   /etc            host, read-only, secrets masked, synthetic passwd and group
 *   /dev            null zero full random urandom tty, private devpts, /dev/shm
 *   /tmp            private tmpfs of the configured size
 *   /proc           private, standard level and above (no host /proc or /sys ever)
 *   /workspace /home/sandbox /cache /envs   the sandbox's own, read-write
 * every mount nosuid and nodev (/dev allows its device nodes), then pivot_root into it and
 * detach the old root. */

#define MOUNT_MASKS_MAX 64
#define MOUNT_PATH_MAX 256

typedef struct MountMask {
        char path[MOUNT_PATH_MAX];          /* host path, under /etc or /usr, no symlink */
        bool dir;
} MountMask;

typedef enum MountTopKind {
        MOUNT_TOP_ABSENT,
        MOUNT_TOP_SYMLINK,                  /* merged /usr: /bin -> usr/bin */
        MOUNT_TOP_DIR,                      /* a real directory: bound read-only */
} MountTopKind;

typedef struct MountTop {
        const char *name;                   /* "bin", "sbin", "lib", "lib32", "lib64", "libx32" */
        MountTopKind kind;
        char target[128];
} MountTop;

/* What does not change from one launch to the next, looked up once in the spawner (and
 * refreshed now and then); the launch child, a copy of the spawner, just reads it. */
typedef struct MountPlan {
        MountMask masks[MOUNT_MASKS_MAX];
        size_t n_masks;
        MountTop top[6];
} MountPlan;

/* Looks up the host's secrets (shadow, gshadow, sudoers, sudoers.d, ssh host keys,
 * ssl/private, ...) plus EXTRA_MASKS (NULL-terminated, may be NULL) and the layout of
 * /bin /sbin /lib*. Returns 0 or -errno (-E2BIG with more than MOUNT_MASKS_MAX masks). */
int mounts_plan_init(MountPlan *plan, const char *const *extra_masks);

/* The sandbox's own directories, in the order of MountRequest.dirs. */
#define MOUNT_SANDBOX_DIRS 4
extern const char *const mount_sandbox_dirs[MOUNT_SANDBOX_DIRS];   /* "workspace", "home/sandbox", ... */

/* In the spawner, before the clone: detached copies (open_tree(OPEN_TREE_CLONE)) of the
 * sandbox's workspace, home/sandbox, cache and envs below FS_FD. A mount of another mount
 * namespace cannot be bound from inside the child's new one, but a detached copy made here
 * can be moved into it. Opened without following any symlink: the sandbox owns these
 * directories and could plant one. On failure returns -errno and names the directory in
 * DETAIL; RET_FDS is then untouched. */
int mounts_clone_sandbox_dirs(int fs_fd, int ret_fds[MOUNT_SANDBOX_DIRS], char *detail, size_t size);

/* The synthetic /etc/passwd and /etc/group a sandbox sees: root, the user "sandbox" (UID,
 * GID, home /home/sandbox) and nobody. Both runtimes use them. */
#define MOUNT_PASSWD_MAX 512
#define MOUNT_GROUP_MAX 256
void mounts_identity_files(uid_t uid, gid_t gid, char passwd[static MOUNT_PASSWD_MAX], char group[static MOUNT_GROUP_MAX]);

typedef struct MountRequest {
        const int *dirs;                    /* MOUNT_SANDBOX_DIRS detached trees, moved into place */
        uid_t uid;
        gid_t gid;
        bool proc;                          /* mount a private /proc (needs a new PID namespace) */
        uint64_t tmpfs_bytes;
        uint64_t shm_bytes;
} MountRequest;

/* Builds the root described above and pivots into it. Runs in the launch child, in its new
 * mount namespace, as root. On failure returns -errno and writes what failed to DETAIL
 * ("mounting /workspace"). */
int mounts_build_root(const MountPlan *plan, const MountRequest *req, char *detail, size_t size);
