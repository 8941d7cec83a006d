/* SPDX-License-Identifier: MIT */
#pragma once

/* An incremental parser for a text/event-stream body (the WHATWG "event stream" format): feed
 * it bytes as they arrive, in pieces of any size; it calls the handler once per complete event.
 * Lines end in LF, CRLF or CR (also split across pieces); `event:` names the event ("message"
 * if none), `data:` lines are joined with LF, one space after the colon is dropped, lines
 * starting with ':' are comments, `id:`/`retry:` and unknown fields are ignored, an event
 * without data is not dispatched. Pure: no I/O. */

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"

#define CLI_SSE_EVENT_NAME_MAX 64

/* DATA is NUL-terminated (SIZE bytes). Return < 0 to stop: cli_sse_feed() returns it. */
typedef int (*CliSseHandler)(const char *event, const char *data, size_t size, void *userdata);

typedef struct CliSseParser {
        CliSseHandler handler;
        void *userdata;
        size_t max_event;        /* bytes of data (and of one line) before -E2BIG */
        Buf line;                /* the line being read */
        Buf data;                /* the data lines of the event being read, each + LF */
        bool has_data;
        bool after_cr;           /* the last piece ended in CR: a following LF belongs to it */
        bool bom_checked;
        char event[CLI_SSE_EVENT_NAME_MAX];
        unsigned long n_events;
} CliSseParser;

void cli_sse_init(CliSseParser *p, size_t max_event, CliSseHandler handler, void *userdata);
void cli_sse_done(CliSseParser *p);

/* Returns 0, -E2BIG for a line or event over the limit, -ENOMEM, or the handler's value. */
int cli_sse_feed(CliSseParser *p, const char *buf, size_t size);

/* Whether bytes of an unfinished event are buffered (a stream that ends here was cut). */
bool cli_sse_pending(const CliSseParser *p);
