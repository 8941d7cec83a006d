/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <string.h>

#include "macros.h"
#include "store.h"

/* These strings are stored in the database and answered on the wire: never rename one. */
static const char *const status_names[_SANDBOX_STATUS_MAX] = {
        [SANDBOX_ASSIGNED] = "ASSIGNED",   [SANDBOX_READY] = "READY",
        [SANDBOX_SUSPENDING] = "SUSPENDING", [SANDBOX_SUSPENDED] = "SUSPENDED",
        [SANDBOX_RELEASING] = "RELEASING", [SANDBOX_RELEASED] = "RELEASED",
};

const char *sandbox_status_to_string(SandboxStatus s) {
        if ((unsigned) s >= _SANDBOX_STATUS_MAX)
                return NULL;
        return status_names[s];
}

int sandbox_status_from_string(const char *s) {
        if (!s)
                return -EINVAL;
        for (int i = 0; i < _SANDBOX_STATUS_MAX; i++)
                if (streq(status_names[i], s))
                        return i;
        return -EINVAL;
}
