/* SPDX-License-Identifier: MIT */
#pragma once

#include <jansson.h>

#include "macros.h"

/* jansson provides json_decrefp(). */
#define _cleanup_json_ _cleanup_(json_decrefp)

/* json_string for bytes that may not be valid UTF-8: invalid sequences become U+FFFD. */
json_t *json_string_lossy(const char *s, size_t len);

/* Is J a string without an embedded NUL (so json_string_value() is all of it)? */
bool json_string_is_text(const json_t *j);
