/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>

#include "config.h"
#include "store.h"
#include "time-util.h"

typedef struct Holds Holds;
typedef struct Reaper Reaper;
typedef struct Spawner Spawner;
typedef struct ExecEngine ExecEngine;

/* The daemon's state, shared by every request. Set up once by daemon_run() before the
 * HTTP server starts; read-only afterwards except where a member says otherwise. */
typedef struct Daemon {
        Config config;
        Store *store;
        char *data_dir;                       /* absolute */
        int data_fd;                          /* DATA (O_DIRECTORY), root-owned 0711 */
        int sandboxes_fd;                     /* DATA/sandboxes: one directory per internal_id */
        int trash_fd;                         /* DATA/trash: released workspaces awaiting deletion */
        int tmp_fd;                           /* DATA/tmp: spool files (uploads, archives) */
        char worker_id[WORKER_ID_MAX + 1];
        char worker_epoch[EPOCH_LEN + 1];
        char *worker_endpoint;
        char *token;                          /* never logged */
        size_t token_len;
        Holds *holds;
        Reaper *reaper;
        Spawner *spawner;                     /* the launch helper (forked before any thread); NULL if unavailable */
        ExecEngine *execs;
        struct Disk *disk;                    /* watermarks, usage, quotas (disk.h) */
        json_t *isolation_report;             /* /healthz: level, probe results, tracking; fixed at start */
        usec_t started_at;
        atomic_bool shutting_down;            /* set on the first SIGTERM/SIGINT */
} Daemon;

/* `sandloom serve`: parses the configuration, prepares the data directory, opens the
 * store, takes over this worker's sandboxes, serves HTTP until a signal. Returns the
 * process exit status. */
int daemon_run(int argc, char **argv);

#define SANDLOOM_VERSION_STRING "0.1.0"
