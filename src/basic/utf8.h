/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Strict UTF-8 (no overlongs, no surrogates, max U+10FFFF); NUL bytes are valid. */
bool utf8_is_valid(const char *s, size_t len);

/* Copies S, replacing each maximal invalid subsequence by U+FFFD. */
int utf8_sanitize(const char *s, size_t len, char **ret, size_t *ret_len);

/* Length of a valid sequence starting at S (1..4), or 0 if invalid, or -1 if S is a
 * valid prefix cut short by the end of the buffer (carry it over to the next chunk). */
int utf8_sequence_length(const unsigned char *s, size_t avail);
