/* SPDX-License-Identifier: MIT */
#include "cli-sse.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "string-util.h"

#define FIELD_SLACK 64 /* a line may be a little longer than its value: "data: " */

void cli_sse_init(CliSseParser *p, size_t max_event, CliSseHandler handler, void *userdata) {
        *p = (CliSseParser) { .handler = handler, .userdata = userdata, .max_event = max_event,
                              .line = BUF_INIT(max_event + FIELD_SLACK), .data = BUF_INIT(max_event) };
}

void cli_sse_done(CliSseParser *p) {
        buf_free(&p->line);
        buf_free(&p->data);
}

bool cli_sse_pending(const CliSseParser *p) {
        return p->line.size > 0 || p->has_data;
}

static int dispatch(CliSseParser *p) {
        int r = 0;

        if (p->has_data) {
                if (p->data.size > 0 && p->data.data[p->data.size - 1] == '\n')
                        p->data.size--; /* the LF after the last data line */
                p->data.data[p->data.size] = '\0';
                p->n_events++;
                r = p->handler(p->event[0] ? p->event : "message", p->data.data, p->data.size, p->userdata);
        }
        p->data.size = 0;
        p->has_data = false;
        p->event[0] = '\0';
        return r;
}

static int process_line(CliSseParser *p) {
        const char *line = p->line.data ? p->line.data : "", *colon, *value;
        size_t len = p->line.size, name_len, value_len;
        int r;

        p->line.size = 0; /* not buf_clear(): LINE is read below */
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
                if (p->data.size + value_len + 1 > p->max_event)
                        return -E2BIG;
                r = buf_append(&p->data, value, value_len);
                if (r >= 0)
                        r = buf_append(&p->data, "\n", 1);
                if (r < 0)
                        return r;
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
                                if (p->line.size >= 3 && memcmp(p->line.data, "\xEF\xBB\xBF", 3) == 0) {
                                        memmove(p->line.data, p->line.data + 3, p->line.size - 3 + 1); /* + NUL */
                                        p->line.size -= 3;
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
                if (p->line.size + (j - i) > p->max_event + FIELD_SLACK)
                        return -E2BIG;
                r = buf_append(&p->line, buf + i, j - i);
                if (r < 0)
                        return r;
                i = j;
        }
        return 0;
}
