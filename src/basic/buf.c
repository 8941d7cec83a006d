/* SPDX-License-Identifier: MIT */
#include "buf.h"

#include <stdint.h>
#include <string.h>

#define BUF_ALLOC_MIN 256u

int buf_reserve(Buf *b, size_t extra) {
        size_t need, a;
        char *p;

        if (b->size > b->max || extra > b->max - b->size)
                return -EFBIG;
        need = b->size + extra + 1; /* <= max + 1: cannot overflow while max < SIZE_MAX */
        if (need <= b->alloc)
                return 0;
        a = b->alloc ? b->alloc : BUF_ALLOC_MIN;
        while (a < need)
                a = a > SIZE_MAX / 2 ? need : a * 2;
        if (a > b->max + 1)
                a = b->max + 1; /* never more than the cap allows */
        p = realloc(b->data, a);
        if (!p)
                return -ENOMEM;
        if (b->alloc == 0)
                p[0] = '\0';
        b->data = p;
        b->alloc = a;
        return 0;
}

int buf_append(Buf *b, const void *p, size_t n) {
        int r = buf_reserve(b, n);

        if (r < 0)
                return r;
        if (n > 0)
                memcpy(b->data + b->size, p, n);
        b->size += n;
        b->data[b->size] = '\0';
        return 0;
}

void buf_clear(Buf *b) {
        b->size = 0;
        if (b->data)
                b->data[0] = '\0';
}

void buf_free(Buf *b) {
        free(b->data);
        b->data = NULL;
        b->size = b->alloc = 0;
}

char *buf_steal(Buf *b) {
        char *p = b->data;

        b->data = NULL;
        b->size = b->alloc = 0;
        return p;
}
