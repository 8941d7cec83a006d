/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
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

/* Like the sandbox statuses: stored and answered on the wire, never rename one. */
static const char *const exec_status_names[_EXEC_STATUS_MAX] = {
        [EXEC_RUNNING] = "RUNNING",     [EXEC_SUCCEEDED] = "SUCCEEDED", [EXEC_FAILED] = "FAILED",
        [EXEC_TIMED_OUT] = "TIMED_OUT", [EXEC_CANCELLED] = "CANCELLED", [EXEC_WORKER_LOST] = "WORKER_LOST",
};

const char *exec_status_to_string(ExecStatus s) {
        if ((unsigned) s >= _EXEC_STATUS_MAX)
                return NULL;
        return exec_status_names[s];
}

int exec_status_from_string(const char *s) {
        if (!s)
                return -EINVAL;
        for (int i = 0; i < _EXEC_STATUS_MAX; i++)
                if (streq(exec_status_names[i], s))
                        return i;
        return -EINVAL;
}

/* Frees the inline output of R (the only allocated members) and leaves R safe to clear again. */
void exec_record_clear(ExecRecord *r) {
        if (!r)
                return;
        free(r->stdout_data);
        free(r->stderr_data);
        r->stdout_data = r->stderr_data = NULL;
        r->stdout_len = r->stderr_len = 0;
        r->stdout_inline = r->stderr_inline = false;
}
