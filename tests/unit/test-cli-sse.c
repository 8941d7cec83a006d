/* SPDX-License-Identifier: MIT */
/* Unit tests for src/cli/cli-sse.c: the event-stream parser `sandloom exec` reads the daemon's
 * output with. Every stream is also fed one byte at a time: a network read may cut anywhere. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli-sse.h"
#include "string-util.h"

#define MAX_EVENTS 16

typedef struct Seen {
        unsigned n;
        char name[MAX_EVENTS][CLI_SSE_EVENT_NAME_MAX];
        char data[MAX_EVENTS][256];
        size_t size[MAX_EVENTS];
        int stop_after;          /* > 0: the handler fails with -ECANCELED after this many events */
} Seen;

static int record(const char *event, const char *data, size_t size, void *userdata) {
        Seen *s = userdata;

        assert_true(s->n < MAX_EVENTS);
        assert_int_equal(data[size], '\0');
        assert_int_equal(strscpy(s->name[s->n], sizeof s->name[s->n], event), 0);
        assert_true(size < sizeof s->data[s->n]);
        memcpy(s->data[s->n], data, size + 1);
        s->size[s->n] = size;
        s->n++;
        if (s->stop_after > 0 && s->n >= (unsigned) s->stop_after)
                return -ECANCELED;
        return 0;
}

/* Parses TEXT whole, then byte by byte; both must give the same events. Returns the last result. */
static int parse_both_ways(const char *text, size_t max, Seen *whole) {
        CliSseParser p;
        Seen bytes = { .stop_after = whole->stop_after };
        int r1, r2 = 0;

        cli_sse_init(&p, max, record, whole);
        r1 = cli_sse_feed(&p, text, strlen(text));
        cli_sse_done(&p);

        cli_sse_init(&p, max, record, &bytes);
        for (size_t i = 0; text[i] && r2 == 0; i++)
                r2 = cli_sse_feed(&p, text + i, 1);
        cli_sse_done(&p);

        assert_int_equal(r1, r2);
        assert_int_equal(whole->n, bytes.n);
        for (unsigned i = 0; i < whole->n; i++) {
                assert_string_equal(whole->name[i], bytes.name[i]);
                assert_int_equal(whole->size[i], bytes.size[i]);
                assert_memory_equal(whole->data[i], bytes.data[i], whole->size[i]);
        }
        return r1;
}

static void test_named_events_in_order(void **state) {
        Seen s = {};

        assert_int_equal(parse_both_ways("event: start\ndata: {\"a\":1}\n\n"
                                         "event: stdout\ndata: {\"offset\":0}\n\n"
                                         "event: end\ndata: {}\n\n",
                                         1024, &s),
                         0);
        assert_int_equal(s.n, 3);
        assert_string_equal(s.name[0], "start");
        assert_string_equal(s.data[0], "{\"a\":1}");
        assert_string_equal(s.name[1], "stdout");
        assert_string_equal(s.name[2], "end");
        assert_string_equal(s.data[2], "{}");
}

static void test_crlf_and_cr_line_ends(void **state) {
        Seen s = {};

        assert_int_equal(parse_both_ways("event: a\r\ndata: 1\r\n\r\nevent: b\rdata: 2\r\revent: c\ndata: 3\n\n", 1024, &s),
                         0);
        assert_int_equal(s.n, 3);
        assert_string_equal(s.name[0], "a");
        assert_string_equal(s.data[0], "1");
        assert_string_equal(s.name[1], "b");
        assert_string_equal(s.data[1], "2");
        assert_string_equal(s.name[2], "c");
        assert_string_equal(s.data[2], "3");
}

static void test_multiline_data_joined_with_lf(void **state) {
        Seen s = {};

        assert_int_equal(parse_both_ways("data: first\ndata:second\ndata:  two spaces\ndata\n\n", 1024, &s), 0);
        assert_int_equal(s.n, 1);
        assert_string_equal(s.name[0], "message"); /* no event: field */
        /* one space after the colon is dropped, not two; "data" alone is an empty line */
        assert_string_equal(s.data[0], "first\nsecond\n two spaces\n");
}

static void test_comments_ids_unknown_fields_ignored(void **state) {
        Seen s = {};

        assert_int_equal(parse_both_ways(": keep-alive\n\nid: 7\nretry: 100\nfoo: bar\nevent: x\n: mid\ndata: v\n\n", 1024,
                                         &s),
                         0);
        assert_int_equal(s.n, 1); /* the blank line after a comment alone dispatches nothing */
        assert_string_equal(s.name[0], "x");
        assert_string_equal(s.data[0], "v");
}

static void test_event_without_data_is_not_dispatched_and_name_resets(void **state) {
        Seen s = {};

        assert_int_equal(parse_both_ways("event: lonely\n\ndata: d\n\n", 1024, &s), 0);
        assert_int_equal(s.n, 1);
        assert_string_equal(s.name[0], "message");
        assert_string_equal(s.data[0], "d");
}

static void test_empty_data_is_dispatched(void **state) {
        Seen s = {};

        assert_int_equal(parse_both_ways("event: e\ndata:\n\n", 1024, &s), 0);
        assert_int_equal(s.n, 1);
        assert_int_equal(s.size[0], 0);
}

static void test_unfinished_event_is_pending_not_dispatched(void **state) {
        CliSseParser p;
        Seen s = {};
        const char *text = "event: end\ndata: {\"status\":";

        cli_sse_init(&p, 1024, record, &s);
        assert_false(cli_sse_pending(&p));
        assert_int_equal(cli_sse_feed(&p, text, strlen(text)), 0);
        assert_int_equal(s.n, 0);
        assert_true(cli_sse_pending(&p)); /* a stream cut here must be re-attached */
        assert_int_equal(cli_sse_feed(&p, "1}\n\n", 4), 0);
        assert_int_equal(s.n, 1);
        assert_false(cli_sse_pending(&p));
        cli_sse_done(&p);
}

static void test_leading_bom_stripped(void **state) {
        Seen s = {};

        assert_int_equal(parse_both_ways("\xEF\xBB\xBF" "event: a\ndata: 1\n\n", 1024, &s), 0);
        assert_int_equal(s.n, 1);
        assert_string_equal(s.name[0], "a");
}

static void test_oversized_line_and_event_refused(void **state) {
        char big[200];
        Seen s = {};

        memset(big, 'x', sizeof big - 1);
        big[sizeof big - 1] = '\0';
        /* one line longer than the limit (+ slack for the field name) */
        {
                char text[500];
                assert_int_equal(bsprintf(text, sizeof text, "data: %s%s\n\n", big, big), 0);
                assert_int_equal(parse_both_ways(text, 100, &s), -E2BIG);
                assert_int_equal(s.n, 0);
        }
        /* many short data lines adding up past the limit */
        {
                char text[2000] = "";
                for (int i = 0; i < 40; i++)
                        strcat(text, "data: 0123456789\n");
                strcat(text, "\n");
                assert_int_equal(parse_both_ways(text, 100, &s), -E2BIG);
                assert_int_equal(s.n, 0);
        }
        /* exactly at the limit is fine */
        {
                Seen ok = {};
                assert_int_equal(parse_both_ways("data: 0123456789\n\n", 11, &ok), 0);
                assert_int_equal(ok.n, 1);
        }
}

static void test_handler_error_stops_the_feed(void **state) {
        Seen s = { .stop_after = 1 };

        assert_int_equal(parse_both_ways("data: 1\n\ndata: 2\n\n", 1024, &s), -ECANCELED);
        assert_int_equal(s.n, 1);
}

static void test_long_event_name_truncated_never_overflows(void **state) {
        char text[300];
        Seen s = {};

        memset(text, 0, sizeof text);
        strcpy(text, "event: ");
        memset(text + 7, 'n', 150);
        strcat(text, "\ndata: z\n\n");
        assert_int_equal(parse_both_ways(text, 1024, &s), 0);
        assert_int_equal(s.n, 1);
        assert_int_equal(strlen(s.name[0]), CLI_SSE_EVENT_NAME_MAX - 1);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_named_events_in_order),
                cmocka_unit_test(test_crlf_and_cr_line_ends),
                cmocka_unit_test(test_multiline_data_joined_with_lf),
                cmocka_unit_test(test_comments_ids_unknown_fields_ignored),
                cmocka_unit_test(test_event_without_data_is_not_dispatched_and_name_resets),
                cmocka_unit_test(test_empty_data_is_dispatched),
                cmocka_unit_test(test_unfinished_event_is_pending_not_dispatched),
                cmocka_unit_test(test_leading_bom_stripped),
                cmocka_unit_test(test_oversized_line_and_event_refused),
                cmocka_unit_test(test_handler_error_stops_the_feed),
                cmocka_unit_test(test_long_event_name_truncated_never_overflows),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
