/* SPDX-License-Identifier: MIT */
/* sandloom-spawner: the spawner helper as a program of its own (see spawner.h).
 *
 * The daemon forks, and its child execs this small program (libc, libseccomp, libcrypto)
 * with the channel on fd 3, an empty environment and no arguments of interest. Every launch
 * clones the helper, and at standard and above the sandbox's init stays a copy of it for the
 * whole exec: a copy of this address space (~36 mappings, ~0.7 MiB anonymous) costs far less
 * to create, fault in and tear down than a copy of the daemon's (171 mappings: libmicrohttpd,
 * SQLite, libcurl, libarchive, ...): about 0.4 ms of CPU per exec.
 * It runs exactly the code a forked helper runs: spawner_helper_main(). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "macros.h"
#include "mounts.h"
#include "spawner-proto.h"

#define CHANNEL_FD 3

/* The daemon's first message. Exits (without a hello, so that the daemon falls back to a
 * helper of its own) if it is not what this build expects. */
static void receive_options(SpawnerOptions *ret, pid_t *ret_daemon_pid) {
        static const char *masks[MOUNT_MASKS_MAX + 1];
        const SpawnOptionsMsg *m;
        const char *p, *end;
        unsigned char *buf;
        ssize_t size, n;

        /* Its exact size first (kept for good: the strings are used from it). */
        do
                size = recv(CHANNEL_FD, NULL, 0, MSG_PEEK | MSG_TRUNC);
        while (size < 0 && errno == EINTR);
        if (size < (ssize_t) (sizeof *m + sizeof *ret) ||
            (size_t) size > sizeof *m + sizeof *ret + SPAWN_OPTIONS_STRINGS_MAX)
                _exit(EXIT_FAILURE);
        buf = malloc((size_t) size);
        if (!buf)
                _exit(EXIT_FAILURE);
        do
                n = recv(CHANNEL_FD, buf, (size_t) size, MSG_TRUNC);
        while (n < 0 && errno == EINTR);
        m = (const SpawnOptionsMsg *) buf;
        if (n != size || m->h.type != SPAWN_OPTIONS || m->h.size != (size_t) n || m->abi != SPAWN_OPTIONS_ABI ||
            m->daemon_pid <= 0)
                _exit(EXIT_FAILURE);
        memcpy(ret, m->options, sizeof *ret);
        *ret_daemon_pid = m->daemon_pid;

        p = (const char *) m->options + sizeof *ret;
        end = (const char *) buf + n;
        if (p < end && end[-1] != '\0')
                _exit(EXIT_FAILURE);
        if (m->has_bwrap_path) {
                if (p >= end)
                        _exit(EXIT_FAILURE);
                ret->bwrap_path = p;
                p += strlen(p) + 1;
        }
        /* More than the mount plan can hold would fail the helper's start anyway. */
        if (m->n_masks > MOUNT_MASKS_MAX)
                _exit(EXIT_FAILURE);
        for (uint32_t i = 0; i < m->n_masks; i++) {
                if (p >= end)
                        _exit(EXIT_FAILURE);
                masks[i] = p;
                p += strlen(p) + 1;
        }
        masks[m->n_masks] = NULL;
        ret->mask_paths = masks;
}

int main(int argc, char **argv) {
        static SpawnerOptions opts;
        pid_t daemon_pid;

        (void) argc;
        (void) argv;
        receive_options(&opts, &daemon_pid);
        /* exec'd with it inheritable; the helper's own children close it anyway. */
        if (fcntl(CHANNEL_FD, F_SETFD, FD_CLOEXEC) < 0)
                _exit(EXIT_FAILURE);
        spawner_helper_main(CHANNEL_FD, &opts, daemon_pid);
}
