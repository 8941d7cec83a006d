/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Cryptographically strong random bytes (OpenSSL). Returns 0 or -EIO. */
int random_bytes(void *p, size_t n);

/* Writes 2*NBYTES lowercase hex characters plus NUL into BUF (size BUFSZ). */
int random_hex(char *buf, size_t bufsz, size_t nbytes);

/* A uniformly random integer in [lo, hi]. */
int random_range_u64(uint64_t lo, uint64_t hi, uint64_t *ret);
