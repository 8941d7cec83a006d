/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Percent-decodes LEN bytes of S into a new NUL-terminated string. With PLUS_IS_SPACE
 * (query strings) '+' becomes ' '. Refuses (-EINVAL) a '%' not followed by two hex digits,
 * a NUL (encoded or not), and a result that is not valid UTF-8. */
int http_percent_decode(const char *s, size_t len, bool plus_is_space, char **ret);
