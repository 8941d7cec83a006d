/* SPDX-License-Identifier: MIT */
#pragma once

/* A sandbox's network namespace: loopback only, up. Created by the spawner once per
 * active sandbox (never per exec: creating one costs far more than a launch) and kept as
 * an fd that launches join; it disappears when the last fd and process leave it. */

/* Creates one. HOME_FD is the caller's own network namespace (an fd it keeps open): the
 * caller is moved back into it before this returns. Returns 0 or -errno; -ENOTRECOVERABLE
 * if the caller could not be moved back (it must not go on). Single-threaded callers only:
 * unshare() moves the calling thread. */
int netns_create(int home_fd, int *ret_fd);

/* Opens the calling thread's network namespace. */
int netns_open_current(int *ret_fd);
