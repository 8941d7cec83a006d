/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdio.h>

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _noreturn_ __attribute__((noreturn))
#define _likely_(x) (__builtin_expect(!!(x), 1))
#define _unlikely_(x) (__builtin_expect(!!(x), 0))

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))

/* The structure of type TYPE whose member MEMBER is at PTR. */
#define container_of(ptr, type, member) ((type *) ((char *) (ptr) - offsetof(type, member)))

/* Hands ownership over: returns the value and leaves the variable empty. */
#define TAKE_GENERIC(var, type, nullvalue)                 \
        ({                                                 \
                type *_pvar_ = &(var);                     \
                type _var_ = *_pvar_;                      \
                type _nullvalue_ = nullvalue;              \
                *_pvar_ = _nullvalue_;                     \
                _var_;                                     \
        })
#define TAKE_PTR(ptr) TAKE_GENERIC(ptr, typeof(ptr), NULL)
#define TAKE_FD(fd) TAKE_GENERIC(fd, int, -EBADF)

static inline void freep(void *p) {
        free(*(void **) p);
}
#define _cleanup_free_ _cleanup_(freep)

/* Closes FD if valid, preserving errno. Always returns -EBADF. */
static inline int safe_close(int fd) {
        if (fd >= 0) {
                int saved = errno;
                (void) close(fd);
                errno = saved;
        }
        return -EBADF;
}
static inline void closep(int *fd) {
        *fd = safe_close(*fd);
}
#define _cleanup_close_ _cleanup_(closep)

static inline void fclosep(FILE **f) {
        if (*f)
                (void) fclose(*f);
}
#define _cleanup_fclose_ _cleanup_(fclosep)

/* Declares NAMEp(T **) calling FUNC on a non-NULL pointer, for _cleanup_. */
#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)     \
        static inline void func##p(type *p) {       \
                if (*p)                             \
                        func(*p);                   \
        }

static inline int negative_errno(void) {
        return errno > 0 ? -errno : -EIO;
}

#define streq(a, b) (strcmp((a), (b)) == 0)
#define strneq(a, b, n) (strncmp((a), (b), (n)) == 0)
#define isempty(s) (!(s) || (s)[0] == '\0')

#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

#define USEC_PER_SEC UINT64_C(1000000)
#define USEC_PER_MSEC UINT64_C(1000)
#define NSEC_PER_USEC UINT64_C(1000)
