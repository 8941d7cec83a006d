/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the client's event-stream parser must never crash or overflow, and must
 * deliver the same events whether the stream arrives in one piece, byte by byte, or split at
 * a point the input chooses. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli-sse.h"

#define MAX_EVENT 4096

typedef struct Digest {
        unsigned long events;
        uint64_t hash;
} Digest;

static void mix(Digest *d, const void *p, size_t n) {
        const unsigned char *b = p;

        for (size_t i = 0; i < n; i++)
                d->hash = (d->hash ^ b[i]) * 1099511628211ULL;
        d->hash = (d->hash ^ 0xff) * 1099511628211ULL; /* field separator */
}

static int on_event(const char *event, const char *data, size_t size, void *userdata) {
        Digest *d = userdata;

        if (strlen(data) > size || size > MAX_EVENT)
                abort(); /* data must be NUL-terminated within SIZE, and bounded */
        d->events++;
        mix(d, event, strlen(event));
        mix(d, data, size);
        return 0;
}

/* Feeds DATA in pieces of STEP bytes (0 = all at once); returns the final status. */
static int run(const uint8_t *data, size_t size, size_t step, Digest *d) {
        CliSseParser p;
        int r = 0;

        *d = (Digest) { .hash = 1469598103934665603ULL };
        cli_sse_init(&p, MAX_EVENT, on_event, d);
        for (size_t off = 0; off < size && r >= 0;) {
                size_t n = step == 0 || step > size - off ? size - off : step;
                r = cli_sse_feed(&p, (const char *) data + off, n);
                off += n;
        }
        if (r >= 0 && cli_sse_pending(&p))
                r = 1;
        cli_sse_done(&p);
        return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        Digest whole, bytes, split;
        int r_whole, r_bytes, r_split;
        size_t cut;

        if (size > 64 * 1024)
                return 0;
        cut = size > 0 ? data[0] % (size + 1) : 0;
        r_whole = run(data, size, 0, &whole);
        r_bytes = run(data, size, 1, &bytes);
        r_split = run(data, size, cut ? cut : 1, &split);
        /* An over-long line or event stops the parse; where it stops may depend on the piece
         * boundaries, so only complete parses must agree. */
        if (r_whole >= 0 && (r_whole != r_bytes || whole.events != bytes.events || whole.hash != bytes.hash))
                abort();
        if (r_whole >= 0 && (r_whole != r_split || whole.events != split.events || whole.hash != split.hash))
                abort();
        return 0;
}
