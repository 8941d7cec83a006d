/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

/* A sandbox's directory on disk, laid out as the sandbox sees itself:
 *
 *   DATA/sandboxes/<internal_id>/           root 0700 (nothing but the daemon goes through it: the
 *                                           launcher and the files API start from an fd on fs/)
 *                                fs/        root 0755
 *                                fs/workspace, fs/cache, fs/envs       uid:gid 0700
 *                                fs/home/   root 0755
 *                                fs/home/sandbox                       uid:gid 0700
 *
 * Every function works fd-relative and never follows a symlink, so nothing a sandbox
 * plants can lead the daemon (root) elsewhere. Library code: no logging. */

/* Is NAME a well-formed internal id (32 lowercase hex characters)? Only such names are
 * ever used as directory names. */
bool workspace_id_is_valid(const char *name);

/* Creates (or repairs: owners and modes fixed up) the layout for INTERNAL_ID under
 * SANDBOXES_FD, for UID (gid = uid). Idempotent. If RET_FS_FD is not NULL, returns an
 * O_PATH|O_DIRECTORY fd on fs/. */
int workspace_create(int sandboxes_fd, const char *internal_id, uid_t uid, int *ret_fs_fd);

/* Opens DATA/sandboxes/<internal_id>/fs as O_PATH|O_DIRECTORY. -ENOENT if missing. */
int workspace_open_fs(int sandboxes_fd, const char *internal_id, int *ret_fd);

/* Renames DATA/sandboxes/<internal_id> to DATA/trash/<internal_id>.<lifecycle_id>.
 * Returns 1 if moved, 0 if there was nothing to move. */
int workspace_move_to_trash(int sandboxes_fd, int trash_fd, const char *internal_id, const char *lifecycle_id);

/* Deletes the entry NAME inside DIR_FD (a file, or a directory tree), as root, without
 * following any symlink. Trees deeper than the walk allows are not recursed into: their
 * deep parts are renamed into TRASH_FD (as "deep.<random>") to be deleted by a later
 * call, so depth never exhausts stack or fds. -ENOENT if NAME is missing. */
int workspace_delete_tree(int trash_fd, int dir_fd, const char *name);

/* Deletes everything in the trash directory. Returns the number of entries removed, or
 * the first error after trying them all (what failed stays for the next call). */
int workspace_empty_trash(int trash_fd);

/* Does the trash still hold any inode owned by (or with group) one of UIDS? Sets
 * RET_FOUND[i] for each uid found. A bounded fd-relative walk: the trash is normally empty
 * when this runs, right after workspace_empty_trash(). */
int workspace_trash_owned_by(int trash_fd, const uid_t *uids, size_t n, bool *ret_found);
