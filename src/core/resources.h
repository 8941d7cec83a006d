/* SPDX-License-Identifier: MIT */
#pragma once

#include <jansson.h>

#include "config.h"

typedef struct Daemon Daemon;

/* Which mechanism really limits each resource of a sandbox on this host, found at start-up
 * by trying it (DESIGN §6, /healthz "resource_control"). A mechanism is reported only if
 * the probe showed the host honours it; the evidence says what was tried and what
 * happened. */

typedef enum ResourceKind {
        RESOURCE_MEMORY,
        RESOURCE_PIDS,
        RESOURCE_CPU,
        RESOURCE_DISK,
        RESOURCE_OPEN_FILES,
        _RESOURCE_MAX,
} ResourceKind;

typedef enum ResourceMechanism {
        RESOURCE_MECHANISM_NONE,
        RESOURCE_MECHANISM_CGROUP_V2,
        RESOURCE_MECHANISM_CGROUP_V1,
        RESOURCE_MECHANISM_PROJECT_QUOTA,
        RESOURCE_MECHANISM_RLIMIT,
        RESOURCE_MECHANISM_SAMPLED,
} ResourceMechanism;

#define RESOURCE_EVIDENCE_MAX 1024

typedef struct ResourceStatus {
        ResourceMechanism mechanism;
        char limit[64];                          /* the configured value as text; "" = unlimited/not configured */
        char evidence[RESOURCE_EVIDENCE_MAX];
} ResourceStatus;

const char *resource_kind_to_string(ResourceKind k);
const char *resource_mechanism_to_string(ResourceMechanism m);

/* Probes every resource for a daemon with configuration C whose data directory is
 * DATA_DIR (DATA_FD open on it). Creates and removes probe cgroups under the caller's own
 * cgroups; touches nothing else. Used by the daemon and by `sandloom doctor`. */
void resources_probe_all(const Config *c, const char *data_dir, int data_fd, ResourceStatus ret[_RESOURCE_MAX]);

/* At daemon start-up (before the HTTP server): probes and keeps the result. */
int resources_probe(Daemon *d);

/* /healthz "resource_control": { "memory": { mechanism, limit, evidence }, ... }: what the
 * start-up probe found, and for disk what the disk engine of D enforces now (its report). */
json_t *resources_report_json(Daemon *d);
