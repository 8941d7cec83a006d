/* SPDX-License-Identifier: MIT */
#include "cli-sse.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "string-util.h"

#define FIELD_SLACK 64 /* a line may be a little longer than its value: "data: " */

void cli_sse_init(CliSseParser *p, size_t max_event, CliSseHandler handler, void *userdata) {
        *p = (CliSseParser) { .handler = handler, .userdata = userdata, .max_event = max_event };
}

void cli_sse_done(CliSseParser *p) {
        free(p->line);
        free(p->data);
        p->line = p->data = NULL;
        p->line_len = p->line_alloc = p->data_len = p->data_alloc = 0;
}

bool cli_sse_pending(const CliSseParser *p) {
        return p->line_len > 0 || p->has_data;
}

/* Grows *BUF to hold NEED bytes (+ NUL). */
static int reserve(char **buf, size_t *alloc, size_t need) {
        size_t a;
        char *n;

        if (need + 1 <= *alloc)
                return 0;
        a = *alloc ? *alloc : 256;
        while (a < need + 1)
                a *= 2;
        n = realloc(*buf, a);
        if (!n)
                return -ENOMEM;
        *buf = n;
        *alloc = a;
        return 0;
}

static int dispatch(CliSseParser *p) {
        int r = 0;

        if (p->has_data) {
                if (p->data_len > 0 && p->data[p->data_len - 1] == '\n')
                        p->data_len--; /* the LF after the last data line */
                p->data[p->data_len] = '\0';
                p->n_events++;
                r = p->handler(p->event[0] ? p->event : "message", p->data, p->data_len, p->userdata);
        }
        p->data_len = 0;
        p->has_data = false;
        p->event[0] = '\0';
        return r;
}

static int process_line(CliSseParser *p) {
        const char *line = p->line ? p->line : "", *colon, *value;
        size_t len = p->line_len, name_len, value_len;
        int r;

        p->line_len = 0;
        if (len == 0)
                return dispatch(p);
        if (line[0] == ':')
                return 0; /* a comment (keep-alive) */
        colon = memchr(line, ':', len);
        name_len = colon ? (size_t) (colon - line) : len;
        value = colon ? colon + 1 : line + len;
        value_len = (size_t) (line + len - value);
        if (value_len > 0 && value[0] == ' ') {
                value++;
                value_len--;
        }
        if (name_len == 5 && strneq(line, "event", 5)) {
                size_t n = MIN(value_len, sizeof p->event - 1);

                memcpy(p->event, value, n);
                p->event[n] = '\0';
        } else if (name_len == 4 && strneq(line, "data", 4)) {
                if (p->data_len + value_len + 1 > p->max_event)
                        return -E2BIG;
                r = reserve(&p->data, &p->data_alloc, p->data_len + value_len + 1);
                if (r < 0)
                        return r;
                memcpy(p->data + p->data_len, value, value_len);
                p->data_len += value_len;
                p->data[p->data_len++] = '\n';
                p->has_data = true;
        }
        /* id, retry and unknown fields: nothing to do for this client */
        return 0;
}

int cli_sse_feed(CliSseParser *p, const char *buf, size_t size) {
        size_t i = 0;
        int r;

        while (i < size) {
                char c = buf[i];

                if (p->after_cr) {
                        p->after_cr = false;
                        if (c == '\n') {
                                i++;
                                continue;
                        }
                }
                if (c == '\r' || c == '\n') {
                        i++;
                        p->after_cr = c == '\r';
                        if (!p->bom_checked) {
                                p->bom_checked = true;
                                if (p->line_len >= 3 && memcmp(p->line, "\xEF\xBB\xBF", 3) == 0) {
                                        memmove(p->line, p->line + 3, p->line_len - 3);
                                        p->line_len -= 3;
                                }
                        }
                        r = process_line(p);
                        if (r < 0)
                                return r;
                        continue;
                }
                /* the run of ordinary bytes up to the next line end, appended at once */
                size_t j = i;
                while (j < size && buf[j] != '\r' && buf[j] != '\n')
                        j++;
                if (p->line_len + (j - i) > p->max_event + FIELD_SLACK)
                        return -E2BIG;
                r = reserve(&p->line, &p->line_alloc, p->line_len + (j - i));
                if (r < 0)
                        return r;
                memcpy(p->line + p->line_len, buf + i, j - i);
                p->line_len += j - i;
                p->line[p->line_len] = '\0';
                i = j;
        }
        return 0;
}
