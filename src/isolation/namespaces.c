/* SPDX-License-Identifier: MIT */
#include "namespaces.h"

#include <errno.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

#include "macros.h"

uint64_t namespaces_clone_flags(IsolationLevel level) {
        uint64_t flags = CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS;

        if (level >= ISOLATION_LEVEL_STANDARD)
                flags |= CLONE_NEWPID;
        if (level >= ISOLATION_LEVEL_STRICT)
                flags |= CLONE_NEWCGROUP;
        return flags;
}

int namespaces_join_netns(int netns_fd) {
        if (setns(netns_fd, CLONE_NEWNET) < 0)
                return negative_errno();
        return 0;
}

int namespaces_set_hostname(const char *hostname) {
        if (sethostname(hostname, strlen(hostname)) < 0)
                return negative_errno();
        if (setdomainname("(none)", 6) < 0)
                return negative_errno();
        return 0;
}
