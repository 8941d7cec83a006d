/* SPDX-License-Identifier: MIT */
#include "json-util.h"

#include <stdlib.h>
#include <string.h>

#include "utf8.h"

json_t *json_string_lossy(const char *s, size_t len) {
        _cleanup_free_ char *clean = NULL;
        size_t clean_len;

        if (utf8_is_valid(s, len))
                return json_stringn(s, len);
        if (utf8_sanitize(s, len, &clean, &clean_len) < 0)
                return NULL;
        return json_stringn(clean, clean_len);
}

bool json_string_is_text(const json_t *j) {
        return json_is_string(j) && strlen(json_string_value(j)) == json_string_length(j);
}
