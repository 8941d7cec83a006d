/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "launch.h"
#include "spawner.h"

/* The messages between the daemon and its spawner, over a SOCK_SEQPACKET socketpair (one
 * message = one datagram, fds with SCM_RIGHTS). Both ends are the same binary, so the
 * structs travel as they are. Every message starts with a SpawnHeader; ID is the exec (or
 * request) id chosen by the daemon. */

enum {
        SPAWN_HELLO = 1,        /* helper → daemon, once: SpawnHello */
        SPAWN_LAUNCH,           /* daemon → helper: SpawnLaunch + strings; fds: fs, stdin, stdout, stderr */
        SPAWN_LAUNCHED,         /* helper → daemon: SpawnLaunched (error != 0: the launch failed) */
        SPAWN_EXITED,           /* helper → daemon: SpawnExited */
        SPAWN_KILL,             /* daemon → helper: SpawnKill; answered by SPAWN_ACK */
        SPAWN_DROP,             /* daemon → helper: SpawnDrop; answered by SPAWN_ACK */
        SPAWN_COUNT,            /* daemon → helper: SpawnHeader; SPAWN_ACK value = contexts */
        SPAWN_ACK,              /* helper → daemon: SpawnAck */
        SPAWN_OPTIONS,          /* daemon → exec'd helper, first: SpawnOptionsMsg + strings */
};

#define SPAWN_LAUNCH_FDS 4

typedef struct SpawnHeader {
        uint32_t type;
        uint32_t size;          /* of the whole message */
        uint64_t id;
} SpawnHeader;

typedef struct SpawnHello {
        SpawnHeader h;
        int32_t error;          /* start-up failed: errno, with message */
        int32_t pid;
        uint32_t cgroup_tracking;
        uint32_t clone3;
        char cgroup_path[256];
        char cgroup_error[160];
        char message[256];
        uint32_t limits_mode;
        uint32_t limits_controllers;        /* bit per CgroupController */
        char limits_error[256];
} SpawnHello;

typedef struct SpawnLaunch {
        SpawnHeader h;
        uint32_t uid, gid, level, network;
        uint64_t tmpfs_bytes, shm_bytes;
        LaunchLimits limits;
        uint32_t argc, envc;
        uint32_t has_cwd, collect_timings;
        uint64_t sent_usec;
        uint32_t strings_size;
        uint32_t _pad;
        /* key\0 hostname\0 [cwd\0] argv[0]\0 ... envp[0]\0 ... */
        char strings[];
} SpawnLaunch;

typedef struct SpawnLaunched {
        SpawnHeader h;
        int32_t error;          /* 0 = running */
        int32_t pid;
        char step[48];
        char message[256];
        char cgroup[128];
        uint64_t at_usec[_LAUNCH_T_MAX];
} SpawnLaunched;

typedef struct SpawnExited {
        SpawnHeader h;
        int32_t wait_status;
        uint8_t oom_killed;
        uint8_t max_rss_cgroup;
        uint16_t _pad;
        uint64_t cpu_usec;
        uint64_t max_rss_bytes;
        uint64_t ended_usec;
} SpawnExited;

typedef struct SpawnKill {
        SpawnHeader h;          /* id: this request's, for the ack */
        uint64_t exec_id;
        int32_t signal;
        uint32_t _pad;
} SpawnKill;

typedef struct SpawnDrop {
        SpawnHeader h;
        char key[LAUNCH_SANDBOX_KEY_MAX + 1];
} SpawnDrop;

typedef struct SpawnAck {
        SpawnHeader h;
        int32_t result;         /* 0 or -errno */
        uint32_t value;
} SpawnAck;

/* The helper as a program of its own (sandloom-spawner, see spawner_start()): the daemon's
 * first message carries the options. The structs travel as they are (pointers cleared), so
 * both binaries must come from the same build: ABI says which, from the size of every struct
 * on the channel (a daemon rebuilt without its helper falls back to the in-process helper
 * rather than misread a message). */
#define SPAWN_ABI_SIZES                                                                       \
        ((uint32_t) sizeof(struct SpawnerOptions) + 31u * (uint32_t) sizeof(SpawnHello) +     \
         961u * (uint32_t) sizeof(SpawnLaunch) + 29791u * (uint32_t) sizeof(SpawnLaunched) +  \
         923521u * (uint32_t) sizeof(SpawnExited) + 28629151u * (uint32_t) sizeof(SpawnKill) + \
         887503681u * (uint32_t) sizeof(SpawnAck) + 1u * (uint32_t) sizeof(LaunchLimits))
#define SPAWN_OPTIONS_ABI (UINT32_C(0x5350) << 16 ^ SPAWN_ABI_SIZES)
#define SPAWN_OPTIONS_STRINGS_MAX 65536

typedef struct SpawnOptionsMsg {
        SpawnHeader h;
        uint32_t abi;           /* SPAWN_OPTIONS_ABI of the sender */
        int32_t daemon_pid;
        uint32_t n_masks;
        uint32_t has_bwrap_path;
        unsigned char options[]; /* struct SpawnerOptions, then [bwrap_path\0] mask\0 ... */
} SpawnOptionsMsg;

/* The largest message either side sends. */
#define SPAWN_MESSAGE_MAX (sizeof(SpawnLaunch) + LAUNCH_PAYLOAD_MAX + 64)

/* Runs the helper in the forked child (never returns). FD is its end of the channel. */
_Noreturn void spawner_helper_main(int fd, const struct SpawnerOptions *opts, pid_t daemon_pid);
