/* SPDX-License-Identifier: MIT */
#pragma once

#include <signal.h>
#include <sys/types.h>

#include "macros.h"

/* Our own pid 1 for standard and above. It reaps every orphan of the PID namespace,
 * forwards SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 to the main process, and
 * when the main process ends, writes its wait status (an int) to STATUS_FD and exits with
 * its exit code (128 + n after a signal): the kernel then kills whatever is left in the
 * namespace. It does nothing else: it reads no input, holds no other fd, is non-dumpable,
 * runs as the sandbox uid without capabilities and under the same seccomp filter. */

/* Names the process "sandloom-init" and prepares the signals it forwards: blocked (and
 * given a handler: a SIG_DFL signal to a namespace's init is dropped) before the main
 * process is started, so none is lost. */
void init_prepare_signals(sigset_t *ret_old_mask);

/* In the main process right after the fork: back to default dispositions, mask OLD_MASK. */
int init_reset_signals_in_child(const sigset_t *old_mask);

_noreturn_ void init_run(pid_t main_pid, int status_fd);
