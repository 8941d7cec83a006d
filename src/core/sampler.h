/* SPDX-License-Identifier: MIT */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "time-util.h"

/* The sampling supervisor (DESIGN §6, issue 4): on a host where no cgroup limits a
 * sandbox's memory or its number of processes, one thread looks at /proc every
 * SANDBOX_SAMPLE_INTERVAL_MS, sums per sandbox uid the anonymous resident memory of its
 * processes and counts them, and kills every process of a uid that is over its limit.
 * It is "sampled", never "enforced": between two looks a sandbox may go over (by what it
 * can allocate in one interval), and memory the kernel charges elsewhere (page cache,
 * tmpfs, kernel memory) is not counted. It runs only for the resources that no cgroup
 * enforces (resources.c decides, from what the spawner really set up).
 *
 * The scan is cheap: one getdents pass over /proc, one fstatat() of /proc/<pid> for its
 * owner, and /proc/<pid>/statm only for processes owned by a uid of the sandbox range. A
 * non-dumpable process shows as root in /proc: root-owned processes are checked (their
 * real uid, from /proc/<pid>/status) when first seen and then every SAMPLER_RECHECK_TICKS.
 *
 * The kill: a short-lived child drops to the uid (setresuid, no capabilities) and sends
 * kill(-1, SIGKILL), which reaches exactly the processes of that uid and is atomic against
 * a fork racing it. Every exec of the sandbox dies with it; the exec path asks
 * sampler_killed_since() to mark its end (oom_killed for memory, a line on stderr). */

typedef enum SamplerResource {
        SAMPLER_MEMORY,
        SAMPLER_PIDS,
        _SAMPLER_RESOURCE_MAX,
} SamplerResource;

typedef struct SamplerOptions {
        uint32_t uid_start, uid_end;        /* the sandbox uid range (inclusive) */
        usec_t interval_usec;
        bool enforce[_SAMPLER_RESOURCE_MAX];
        uint64_t memory_bytes;              /* defaults for a uid without its own limits; 0 = none */
        uint64_t processes;
} SamplerOptions;

/* One kill, as the exec path and the log see it. */
typedef struct SamplerKill {
        SamplerResource resource;
        uint64_t value;                     /* bytes or processes seen */
        uint64_t limit;
        usec_t at;                          /* CLOCK_MONOTONIC, taken before the signal */
        usec_t ended;                       /* after it (0 while under way) */
} SamplerKill;

/* Starts the thread (one per process). -EALREADY if it runs; nothing is started when no
 * resource is to be enforced (returns 0, sampler_active() stays false). */
int sampler_start(const SamplerOptions *o);
/* Stops and joins the thread. Safe if it never started. */
void sampler_stop(void);

/* True while the thread runs (the exec path prepares for kills only then). */
bool sampler_active(void);
bool sampler_enforces(SamplerResource r);

/* Around every exec launched while the sampler is active (from before the launch to its
 * end, or its failure): with none running, no tick scans /proc. */
void sampler_exec_begin(void);
void sampler_exec_end(void);

/* The limits of UID (a sandbox's own, from its record; 0 = the default). Called at each
 * launch, so a uid given to another sandbox later gets that sandbox's limits. */
void sampler_set_limits(uint32_t uid, uint64_t memory_bytes, uint64_t processes);

/* Was UID's latest kill under way at or after SINCE (CLOCK_MONOTONIC), i.e. could it have
 * hit a process started then? Fills RET with it. */
bool sampler_killed_since(uint32_t uid, usec_t since, SamplerKill *ret);

/* "sandloom: killed by the sampling supervisor: ..." with a newline. */
void sampler_kill_message(const SamplerKill *k, char *buf, size_t size);

/* For /healthz: {"interval_ms", "enforces": [...], "ticks", "scans" (ticks that looked at
 * /proc: only while execs run), "execs_running", "last_scan_us", "max_scan_us",
 * "mean_scan_us" (wall time), "last_scan_cpu_us", "mean_scan_cpu_us" (the thread's CPU time:
 * the cost), "processes_seen", "sandbox_processes", "status_reads", "kills": {"memory",
 * "pids"}}, or NULL when it does not run. */
json_t *sampler_report_json(void);
