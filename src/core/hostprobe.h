/* SPDX-License-Identifier: MIT */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

/* What the host's cgroup hierarchies offer the calling process, found from
 * /proc/self/mountinfo and /proc/self/cgroup. Shared by the start-up resource probe
 * (resources.c) and `sandloom doctor`. */

#define HOSTPROBE_V1_MAX 16

typedef struct CgroupHierarchy {
        char controllers[128];        /* comma-separated, as in the mount options: "memory", "cpu" */
        char mount[PATH_MAX];         /* where it is mounted */
        char own[PATH_MAX];           /* the caller's own cgroup in it (absolute directory); "" if not visible */
} CgroupHierarchy;

typedef struct CgroupLayout {
        bool v2;                      /* a cgroup2 mount exists */
        char v2_mount[PATH_MAX];
        char v2_own[PATH_MAX];        /* "" if the caller's v2 cgroup is not visible through the mount */
        char v2_controllers[256];     /* cgroup.controllers of v2_own (available to it) */
        char v2_subtree[256];         /* cgroup.subtree_control of v2_own (delegated to its children) */
        size_t n_v1;
        CgroupHierarchy v1[HOSTPROBE_V1_MAX];
} CgroupLayout;

/* Fills RET. Never fails for a host without cgroups (n_v1 == 0, !v2); -errno only when
 * /proc/self/mountinfo cannot be read. */
int hostprobe_cgroups(CgroupLayout *ret);

/* The v1 hierarchy that carries CONTROLLER, or NULL. */
const CgroupHierarchy *hostprobe_v1_find(const CgroupLayout *l, const char *controller);

/* true if the space-separated LIST contains WORD. */
bool hostprobe_word_in(const char *list, const char *word);

/* Really tries what a limit needs: mkdir DIR/<probe name>, write VALUE to FILE in it, read
 * it back, rmdir. Writes one sentence of evidence ("mkdir ...: Permission denied") to
 * EVIDENCE. Returns 0 if the write took effect, else -errno of the failing step. */
int hostprobe_cgroup_try(const char *dir, const char *file, const char *value, char *evidence, size_t len);

/* Mount options (the per-mount and the superblock ones, comma-joined) of the mount that
 * holds PATH, and its filesystem type. -ENOENT if not found. */
int hostprobe_mount_of(const char *path, char *ret_fstype, size_t fstype_len, char *ret_opts, size_t opts_len);

/* Whether the filesystem of DIR_FD can enforce project quotas: the FS_IOC_FSGETXATTR ioctl
 * works and the mount has project quota accounting on (XFS prjquota/pquota, ext4 prjquota).
 * 1 yes, 0 no (reason in EVIDENCE), -errno on a failure to look. */
int hostprobe_project_quota(int dir_fd, const char *path, char *evidence, size_t len);
