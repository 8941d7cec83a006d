/* SPDX-License-Identifier: MIT */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "sandbox.h"

/* Safe file operations inside one sandbox, for the files API. Every path is what the
 * sandbox sees; each operation resolves it with the sandbox's fs/ directory as root
 * (openat2 RESOLVE_IN_ROOT|RESOLVE_NO_MAGICLINKS, or an O_NOFOLLOW walk where openat2 is
 * missing), refuses results outside the four roots, runs under the sandbox's fsuid/fsgid
 * without CAP_DAC_OVERRIDE/CAP_SYS_RESOURCE, and serves regular files and directories only.
 * Errors: -errno plus E filled with Sandloom's status/code:
 *   400 SANDBOX_PATH_OUTSIDE_WORKSPACE   outside /workspace /home/sandbox /cache /envs
 *   422 SANDBOX_INVALID_REQUEST          NUL byte, over-long path or component
 *   404 SANDBOX_FILE_NOT_FOUND           no such file or directory
 *   400 SANDBOX_NOT_A_REGULAR_FILE       FIFO, socket, device (or a dir where a file is needed)
 *   400 SANDBOX_NOT_A_DIRECTORY          list/archive of a non-directory
 *   409 SANDBOX_FILE_EXISTS              mkdir/move onto something that exists (no overwrite)
 *   409 SANDBOX_DIRECTORY_NOT_EMPTY      delete of a non-empty dir without recursive
 *   400 SANDBOX_PATH_IS_ROOT             delete/move of a root itself
 *   413 SANDBOX_FILE_TOO_LARGE           over the limit for this call
 *   403 SANDBOX_PERMISSION_DENIED        the sandbox uid may not do it
 */

/* The canonical sandbox path of IN (relative = under /workspace; "." and ".." resolved
 * lexically; no trailing slash), written into OUT (size PATH_MAX). */
int files_normalize_path(const char *in, size_t inlen, char *out, size_t outsz, Error *e);

/* Reads a whole regular file of at most MAX bytes. */
int files_read(SandboxHandle *h, const char *path, uint64_t max, char **ret_data, size_t *ret_size, Error *e);

/* Opens a regular file for streaming: *ret_fd (O_RDONLY) and its size. */
int files_open_read(SandboxHandle *h, const char *path, int *ret_fd, uint64_t *ret_size, Error *e);

/* Writes a whole file atomically (temp file in the same directory, fsync, renameat),
 * owned by the sandbox uid, mode 0644 (or the existing file's mode). Parent directories
 * must exist unless MAKE_PARENTS. */
int files_write(SandboxHandle *h, const char *path, const void *data, size_t size, bool make_parents, Error *e);

/* Streaming version for raw uploads: begin gives an fd to write into; commit fsyncs and
 * renames into place; abort removes the temp file. A FileWrite must end in exactly one of
 * commit/abort; abort(NULL) is fine. */
typedef struct FileWrite FileWrite;
int files_write_begin(SandboxHandle *h, const char *path, bool make_parents, FileWrite **ret, int *ret_fd, Error *e);
int files_write_commit(FileWrite *w, Error *e);
void files_write_abort(FileWrite *w);

/* One entry as JSON: name, path, type (file|directory|symlink|other), size_bytes,
 * modified_at (RFC 3339), mode ("0644"). lstat semantics: a symlink is reported, not followed. */
int files_stat(SandboxHandle *h, const char *path, json_t **ret, Error *e);

/* {"path", "entries": [...sorted by name...], "total", "has_more"}; LIMIT/OFFSET page it. */
int files_list(SandboxHandle *h, const char *path, uint64_t limit, uint64_t offset, json_t **ret, Error *e);

int files_mkdir(SandboxHandle *h, const char *path, bool parents, Error *e);
int files_delete(SandboxHandle *h, const char *path, bool recursive, Error *e);
int files_move(SandboxHandle *h, const char *source, const char *destination, bool overwrite, Error *e);

typedef struct ArchiveLimits {
        uint64_t max_entries;
        uint64_t max_bytes;              /* total unpacked bytes */
} ArchiveLimits;

/* Writes the directory PATH as a tar (paths relative to it) into a new unlinked spool file
 * under TMP_FD; returns that fd (seeked to 0) and its size. */
int files_archive_create(SandboxHandle *h, int tmp_fd, const char *path, const ArchiveLimits *limits, int *ret_fd,
                         uint64_t *ret_size, Error *e);

/* Extracts the tar (optionally gzip/zstd-compressed) read from TAR_FD into the directory PATH.
 * Refuses absolute names, "..", links pointing outside PATH, device nodes, FIFOs; enforces
 * LIMITS (413 SANDBOX_ARCHIVE_TOO_LARGE); on any failure removes what it created so nothing
 * half-written stays. *ret_entries = entries extracted. */
int files_archive_extract(SandboxHandle *h, const char *path, int tar_fd, const ArchiveLimits *limits,
                          uint64_t *ret_entries, Error *e);
