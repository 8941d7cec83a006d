/* SPDX-License-Identifier: MIT */
#include "rlimits.h"

#include <errno.h>
#include <sys/resource.h>

#include "macros.h"

/* Lowers only: the helper may lack CAP_SYS_RESOURCE (containers often drop it), and a
 * sandbox never needs more than the daemon was given. */
static int set_limit(int resource, uint64_t value) {
        struct rlimit rl;

        if (getrlimit(resource, &rl) < 0)
                return negative_errno();
        if (rl.rlim_max != RLIM_INFINITY && (value == RLIM_INFINITY || value > rl.rlim_max))
                value = rl.rlim_max;
        rl.rlim_cur = rl.rlim_max = (rlim_t) value;
        if (setrlimit(resource, &rl) < 0)
                return negative_errno();
        return 0;
}

int rlimits_apply(const LaunchLimits *l) {
        int r;

        r = set_limit(RLIMIT_CORE, 0);
        if (r < 0)
                return r;
        r = set_limit(RLIMIT_CPU, l->cpu_seconds ? l->cpu_seconds : RLIM_INFINITY);
        if (r < 0)
                return r;
        r = set_limit(RLIMIT_FSIZE, l->file_size_bytes ? l->file_size_bytes : RLIM_INFINITY);
        if (r < 0)
                return r;
        r = set_limit(RLIMIT_NPROC, l->processes ? l->processes : RLIM_INFINITY);
        if (r < 0)
                return r;
        if (l->open_files) {
                r = set_limit(RLIMIT_NOFILE, l->open_files);
                if (r < 0)
                        return r;
        }
        return 0;
}
