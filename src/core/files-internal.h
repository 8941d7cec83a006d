/* SPDX-License-Identifier: MIT */
#pragma once

/* Shared by path.c, files.c, files-tree.c and archive.c; not an interface for other modules. */

#include <jansson.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>

#include "error.h"
#include "fsid.h"
#include "sandbox.h"

/* Which of the four roots CANON is in (0..3), or -1. */
int files_path_root_index(const char *canon);
/* Is CANON exactly one of the four roots? */
bool files_path_is_root(const char *canon);

/* Deepest directory tree that delete and archive walk. */
#define FILES_MAX_DEPTH 256

/* One files operation: the calling thread runs under the sandbox's fsuid/fsgid until
 * files_op_end() (a cleanup), and fs/ and fs/home are stat'ed once so results can be
 * compared with them: they are the only places under fs/ outside the four roots. */
typedef struct FilesOp {
        FsIdSaved ids;
        int fs_fd;                /* borrowed from the handle */
        uid_t uid;
        struct stat fs_st, home_st;
} FilesOp;

#define FILES_OP_INIT { .ids = FSID_SAVED_INIT, .fs_fd = -EBADF }

int files_op_begin(FilesOp *op, SandboxHandle *h, Error *e);
void files_op_end(FilesOp *op);

/* Is ST (of a resolved object) fs/ or fs/home, i.e. outside the four roots? */
bool files_op_is_outside(const FilesOp *op, const struct stat *st);

/* Resolves CANON in-root with FLAGS (see resolve_open), fstat()s the result into *RET_ST,
 * refuses fs/ and fs/home (400 SANDBOX_PATH_OUTSIDE_WORKSPACE). */
int files_op_open(FilesOp *op, const char *canon, int flags, int *ret_fd, struct stat *ret_st, Error *e);

/* Opens the parent directory of CANON (not a root) in-root as O_PATH|O_DIRECTORY and
 * returns it with a pointer to CANON's last component. A parent that is fs/ or fs/home is
 * outside (400). */
int files_op_open_parent(FilesOp *op, const char *canon, int *ret_dirfd, const char **ret_name, Error *e);

/* mkdir -p of CANON under the op's identity, every step resolved in-root. A non-directory
 * on the way is 400 SANDBOX_NOT_A_DIRECTORY, or 409 SANDBOX_FILE_EXISTS for CANON itself
 * when EXISTS_CONFLICT. */
int files_op_mkdir_parents(FilesOp *op, const char *canon, bool exists_conflict, Error *e);

/* mkdirat + chmod to MODE (the daemon's umask must not decide the mode). -EEXIST if there. */
int files_mkdirat_mode(int dirfd, const char *name, mode_t mode);

/* Turns a failed syscall R while doing WHAT on CANON into an Error with Sandloom's code. */
int files_errno_error(Error *e, int r, const char *what, const char *canon);

/* A client path made safe for an error message: valid UTF-8, at most ~200 bytes. */
const char *files_path_for_message(const char *canon, char *buf, size_t bufsz);
#define FILES_MSG_PATH_MAX 256

/* {name, path, type, size_bytes, modified_at, mode} for ST. NULL on allocation failure. */
json_t *files_entry_json(const char *name, size_t name_len, const char *path, const struct stat *st);

/* Removes NAME in DIRFD and, if it is a directory, everything below it, fd-relative, never
 * following a symlink, at most MAX_DEPTH levels deep (-ELOOP beyond). */
int files_remove_tree_at(int dirfd, const char *name, unsigned max_depth);

/* Every name of a directory, read into memory (to sort, or to delete while reading). A
 * directory with more names (or name bytes) than the limits gives -E2BIG: list refuses it
 * with 413 rather than answering half-sorted. */
#define LIST_MAX_NAMES 1000000u
#define LIST_MAX_NAME_BYTES (64u * 1024u * 1024u)

typedef struct NameList {
        char **names;
        size_t n, cap;
        size_t bytes;
} NameList;

/* The names in directory FD (not consumed), without "." and "..". */
int files_read_names(int fd, size_t max_names, size_t max_bytes, NameList *ret);
void files_name_list_sort(NameList *l);
void files_name_list_done(NameList *l);

/* The last component of CANON. */
static inline const char *files_path_basename(const char *canon) {
        const char *s = strrchr(canon, '/');
        return s ? s + 1 : canon;
}
