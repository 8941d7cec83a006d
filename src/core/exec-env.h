/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The pure parts of an exec: its environment, its idempotency fingerprint, and where a
 * chunk of output may be cut without splitting a UTF-8 sequence. No I/O except the key
 * file (exec_key_load). */

#define EXEC_ENV_MAX 128                   /* variables a request may set */
#define EXEC_ENV_NAME_MAX 128
#define EXEC_ARGV_MAX 256
#define EXEC_PAYLOAD_MAX (1024 * 1024)     /* argv + env bytes together */
#define EXEC_PAYLOAD_RESERVE (8 * 1024)    /* of it, room the daemon keeps in the launch message
                                            * for its own variables, cwd and names */
#define EXEC_KEY_SIZE 32
#define EXEC_FINGERPRINT_HEX 64            /* HMAC-SHA256, lowercase hex */

/* The variables every exec starts with, in this order; the request's env then overrides
 * or adds (the request wins, also over PATH and HOME). */
extern const char *const exec_env_defaults[];

/* ^[A-Za-z_][A-Za-z0-9_]*$, 1..EXEC_ENV_NAME_MAX bytes. */
bool exec_env_name_is_valid(const char *name);

/* Builds the child's environment: the defaults, then NAMES[i]=VALUES[i] for each request
 * variable (a default of the same name is replaced in place). Returns a NULL-terminated
 * array of "NAME=value" strings in one allocation (free() it once). */
int exec_env_build(const char *const *names, const char *const *values, size_t n, char ***ret);

/* Everything that makes two exec requests "the same" for idempotency. */
typedef struct ExecFingerprintInput {
        const char *const *argv;
        size_t argc;
        const char *cwd;                   /* normalised */
        const char *const *env_names;      /* in any order: sorted before hashing */
        const char *const *env_values;
        size_t envc;
        uint64_t timeout_seconds;
        bool background;
        const char *exec_scope;            /* NULL = "" */
        bool has_stdin;
        const void *stdin_data;
        size_t stdin_size;
        bool output_base64;
} ExecFingerprintInput;

/* HMAC-SHA256 keyed with the worker's exec key, prepared once: each fingerprint then
 * starts from a copy of the keyed state (no algorithm lookup, no key schedule per exec). */
typedef struct ExecHmac ExecHmac;
int exec_hmac_new(const uint8_t key[EXEC_KEY_SIZE], ExecHmac **ret);
void exec_hmac_free(ExecHmac *h);

/* HMAC-SHA256 over a canonical, length-prefixed encoding of IN, as lowercase hex. Keyed
 * so that the values of env variables (secrets) cannot be brute-forced from the
 * fingerprints stored in the database. Thread-safe. */
int exec_fingerprint(const ExecHmac *h, const ExecFingerprintInput *in, char ret[EXEC_FINGERPRINT_HEX + 1]);

/* Reads DATA/exec_key (exactly EXEC_KEY_SIZE bytes, root, 0600), creating it with random
 * bytes on first start. -EBADMSG if it has the wrong size. */
int exec_key_load(int data_fd, uint8_t ret[EXEC_KEY_SIZE]);

/* The longest prefix of BUF[0..LEN) that does not end inside a valid UTF-8 sequence cut
 * short by the end of the buffer: the bytes after it are carried over to the next chunk
 * (re-read from that offset) instead of being turned into U+FFFD. Invalid bytes are not
 * held back (they become U+FFFD whatever follows). At the end of a stream the caller
 * takes everything instead. */
size_t exec_utf8_complete_prefix(const char *buf, size_t len);
