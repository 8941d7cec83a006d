/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>

#include "macros.h"

/* A growing byte buffer with a hard cap: DATA holds SIZE bytes and, once anything was
 * reserved, a NUL after them (so text can be read as a C string). Start it with BUF_INIT(max). */
typedef struct Buf {
        char *data;
        size_t size;
        size_t alloc;
        size_t max;    /* SIZE never exceeds this; must be < SIZE_MAX */
} Buf;

#define BUF_INIT(cap) ((Buf) { .max = (cap) })

/* Makes room for EXTRA more bytes (and the NUL). Returns -EFBIG if SIZE + EXTRA would pass MAX
 * (nothing changes), -ENOMEM. */
int buf_reserve(Buf *b, size_t extra);

/* Appends N bytes of P and NUL-terminates. Returns -EFBIG over MAX (nothing appended), -ENOMEM. */
int buf_append(Buf *b, const void *p, size_t n);

/* Empties the buffer, keeping its memory. */
void buf_clear(Buf *b);

/* Frees the memory; the buffer is empty (same MAX) and usable again. */
void buf_free(Buf *b);

/* Hands the memory over (NULL if nothing was ever reserved); the buffer is empty. */
char *buf_steal(Buf *b);
