/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdint.h>

#include "isolation.h"

/* The namespaces a launch creates at clone time: mount, IPC and UTS always; PID at
 * standard and above; cgroup at strict. The network namespace is never created per exec:
 * the child joins its sandbox's (netns.h) or stays in the host's. */
uint64_t namespaces_clone_flags(IsolationLevel level);

/* setns() into the network namespace NETNS_FD. */
int namespaces_join_netns(int netns_fd);

/* Sets the UTS hostname (and the NIS domain name to "(none)") of the new UTS namespace. */
int namespaces_set_hostname(const char *hostname);
