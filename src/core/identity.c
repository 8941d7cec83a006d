/* SPDX-License-Identifier: MIT */
#include "identity.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fileio.h"
#include "macros.h"
#include "random-util.h"
#include "string-util.h"

#define WORKER_ID_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:-"

bool identity_token_is_valid(const char *t) {
        size_t n = strlen(t);

        if (n == 0 || n > TOKEN_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if ((unsigned char) t[i] <= 0x20 || (unsigned char) t[i] >= 0x7f)
                        return false;
        return true;
}

/* Reads the first line of the regular file FD (at most MAX bytes), trimmed. */
static int read_first_line(int fd, size_t max, char **ret, bool *ret_loose) {
        _cleanup_free_ char *buf = NULL;
        struct stat st;
        size_t start;
        ssize_t n;

        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EBADFD;
        buf = malloc(max + 1);
        if (!buf)
                return -ENOMEM;
        n = loop_read(fd, buf, max);
        if (n < 0)
                return (int) n;
        buf[n] = '\0';
        buf[strcspn(buf, "\n")] = '\0';
        strstrip_trailing(buf);
        start = strspn(buf, " \t");
        memmove(buf, buf + start, strlen(buf + start) + 1);
        if (ret_loose)
                *ret_loose = (st.st_mode & (S_IRGRP | S_IROTH)) != 0;
        *ret = TAKE_PTR(buf);
        return 0;
}

static int token_from_data(int data_fd, char **ret, TokenInfo *info, char *err, size_t errlen) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *token = NULL;
        char hex[2 * 32 + 2];
        bool loose = false;
        int r;

        fd = openat(data_fd, "token", O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
        if (fd < 0 && errno != ENOENT) {
                r = -errno;
                (void) bsprintf(err, errlen, "Cannot read DATA/token: %s.", strerror(-r));
                return r;
        }
        if (fd >= 0) {
                r = read_first_line(fd, TOKEN_MAX + 2, &token, &loose);
                if (r < 0 || !identity_token_is_valid(token)) {
                        (void) bsprintf(err, errlen,
                                        "DATA/token is not a valid token (1-%d printable characters, no spaces); "
                                        "delete it to have a new one generated.",
                                        TOKEN_MAX);
                        return r < 0 ? r : -EINVAL;
                }
                /* Tighten what an operator loosened; the data directory is ours. */
                if (loose)
                        (void) fchmod(fd, 0600);
                info->source = TOKEN_FROM_DATA;
                *ret = TAKE_PTR(token);
                return 0;
        }

        r = random_hex(hex, sizeof hex, 32);
        if (r < 0) {
                (void) bsprintf(err, errlen, "Cannot generate a token: no randomness.");
                return r;
        }
        token = strdup(hex);
        if (!token)
                return -ENOMEM;
        (void) strscpy(hex + 64, sizeof hex - 64, "\n");
        r = write_file_atomic_at(data_fd, "token", hex, 65, 0600);
        explicit_zero(hex, sizeof hex);
        if (r < 0) {
                (void) bsprintf(err, errlen, "Cannot write DATA/token: %s.", strerror(-r));
                return r;
        }
        info->source = TOKEN_GENERATED;
        *ret = TAKE_PTR(token);
        return 0;
}

int identity_load_token(const Config *c, int data_fd, char **ret_token, TokenInfo *ret_info, char *err,
                        size_t errlen) {
        _cleanup_free_ char *token = NULL;
        TokenInfo info = {};
        int r;

        if (!isempty(c->internal_token)) {
                token = strdup(c->internal_token);
                if (!token)
                        return -ENOMEM;
                strstrip_trailing(token);
                if (!identity_token_is_valid(token)) {
                        (void) bsprintf(err, errlen,
                                        "SANDBOX_INTERNAL_TOKEN must be 1-%d printable characters without spaces.",
                                        TOKEN_MAX);
                        return -EINVAL;
                }
                info.source = TOKEN_FROM_ENV;
        } else if (!isempty(c->internal_token_file)) {
                _cleanup_close_ int fd = -EBADF;

                /* Followed if a symlink: secret mounts (Kubernetes) are symlinks. */
                fd = open(c->internal_token_file, O_RDONLY | O_CLOEXEC | O_NOCTTY);
                if (fd < 0) {
                        r = -errno;
                        (void) bsprintf(err, errlen, "SANDBOX_INTERNAL_TOKEN_FILE cannot be read: %s.", strerror(-r));
                        return r;
                }
                r = read_first_line(fd, TOKEN_MAX + 2, &token, &info.loose_permissions);
                if (r < 0 || !identity_token_is_valid(token)) {
                        (void) bsprintf(err, errlen,
                                        "SANDBOX_INTERNAL_TOKEN_FILE must be a regular file whose first line is the "
                                        "token (1-%d printable characters without spaces).",
                                        TOKEN_MAX);
                        return r < 0 ? r : -EINVAL;
                }
                info.source = TOKEN_FROM_FILE;
        } else {
                r = token_from_data(data_fd, &token, &info, err, errlen);
                if (r < 0)
                        return r;
        }
        *ret_info = info;
        *ret_token = TAKE_PTR(token);
        return 0;
}

int identity_load_worker_id(const Config *c, int data_fd, char ret[WORKER_ID_MAX + 1], bool *ret_created,
                            char *err, size_t errlen) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *id = NULL;
        char buf[WORKER_ID_MAX + 2];
        int r;

        if (!isempty(c->worker_id)) {
                if (!str_in_charset(c->worker_id, WORKER_ID_CHARS, 1, WORKER_ID_MAX)) {
                        (void) bsprintf(err, errlen, "SANDBOX_WORKER_ID must be 1-%d characters of A-Z a-z 0-9 _ . : -.",
                                        WORKER_ID_MAX);
                        return -EINVAL;
                }
                (void) strscpy(ret, WORKER_ID_MAX + 1, c->worker_id);
                *ret_created = false;
                return 0;
        }

        fd = openat(data_fd, "worker_id", O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
        if (fd >= 0) {
                r = read_first_line(fd, WORKER_ID_MAX + 2, &id, NULL);
                if (r < 0 || !str_in_charset(id, WORKER_ID_CHARS, 1, WORKER_ID_MAX)) {
                        (void) bsprintf(err, errlen,
                                        "DATA/worker_id is not a valid worker id (1-%d characters of A-Z a-z 0-9 _ . : -).",
                                        WORKER_ID_MAX);
                        return r < 0 ? r : -EINVAL;
                }
                (void) strscpy(ret, WORKER_ID_MAX + 1, id);
                *ret_created = false;
                return 0;
        }
        if (errno != ENOENT) {
                r = -errno;
                (void) bsprintf(err, errlen, "Cannot read DATA/worker_id: %s.", strerror(-r));
                return r;
        }

        (void) strscpy(buf, sizeof buf, "w-");
        r = random_hex(buf + 2, sizeof buf - 2, 6);
        if (r < 0)
                return r;
        (void) strscpy(buf + 14, sizeof buf - 14, "\n");
        r = write_file_atomic_at(data_fd, "worker_id", buf, 15, 0644);
        if (r < 0) {
                (void) bsprintf(err, errlen, "Cannot write DATA/worker_id: %s.", strerror(-r));
                return r;
        }
        buf[14] = '\0';
        (void) strscpy(ret, WORKER_ID_MAX + 1, buf);
        *ret_created = true;
        return 0;
}

int identity_new_epoch(char ret[EPOCH_LEN + 1]) {
        return random_hex(ret, EPOCH_LEN + 1, EPOCH_LEN / 2);
}
