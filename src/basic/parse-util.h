/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* Strict decimal parse: digits only (no sign, no spaces, no trailing junk), no overflow. */
int parse_u64(const char *s, uint64_t *ret);
int parse_u32(const char *s, uint32_t *ret);

/* "true/false/1/0/yes/no/on/off" */
int parse_bool(const char *s, bool *ret);

/* Sizes: a plain byte count or with a K/M/G/T suffix (binary units, optional "iB"/"B"). */
int parse_bytes(const char *s, uint64_t *ret);

/* Non-negative decimal number such as 0.5 or 2. */
int parse_double(const char *s, double *ret);

/* The number after "FIELD:" on its own line of a /proc/<pid>/status-style TEXT (leading spaces
 * skipped, a unit such as " kB" after it ignored). -ENODATA if there is no such line, -EBADMSG
 * if it holds no number. */
int parse_status_field(const char *text, const char *field, uint64_t *ret);
