/* SPDX-License-Identifier: MIT */
#include "auth.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

#include "macros.h"
#include "string-util.h"

#define TOKEN_MAX 4096

int auth_authenticate(Daemon *d, const char *authorization, Principal *ret) {
        const char *token;
        size_t len;

        if (!d || !d->token || d->token_len == 0 || !authorization)
                return -EACCES;
        /* The scheme is case-insensitive (RFC 7235); one or more spaces follow it. */
        if (strncasecmp(authorization, "Bearer ", 7) != 0)
                return -EACCES;
        token = authorization + 7;
        token += strspn(token, " ");
        /* Nothing is trimmed: a token with extra characters, spaces included, is not the token. */
        len = strnlen(token, TOKEN_MAX + 1);
        if (len == 0 || len > TOKEN_MAX)
                return -EACCES;
        if (!memeq_consttime(token, len, d->token, d->token_len))
                return -EACCES;

        *ret = (Principal) { .admin = true };
        (void) strscpy(ret->name, sizeof ret->name, "admin");
        (void) strscpy(ret->tenant, sizeof ret->tenant, "default");
        return 0;
}
