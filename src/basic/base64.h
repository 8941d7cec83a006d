/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>

/* Standard base64 (RFC 4648, with padding). Encode never fails except on allocation. */
int base64_encode(const void *data, size_t size, char **ret, size_t *ret_len);

/* Strict decoder: standard alphabet, padding required when the length is not a multiple
 * of 4 chunks, no whitespace. Returns -EINVAL on malformed input. MAX bounds the decoded
 * size (-EFBIG beyond it). */
int base64_decode(const char *s, size_t len, size_t max, void **ret, size_t *ret_size);
