/* SPDX-License-Identifier: MIT */
#include "sandbox-init.h"

#include <errno.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static const int forwarded[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };

static void nop_handler(int sig) {
        (void) sig;
}

void init_prepare_signals(sigset_t *ret_old_mask) {
        struct sigaction sa = { .sa_handler = nop_handler };
        sigset_t set;

        /* Named before the main process exists: it may look at /proc/1 at once. */
        (void) prctl(PR_SET_NAME, "sandloom-init", 0, 0, 0);

        sigemptyset(&set);
        sigaddset(&set, SIGCHLD);
        for (size_t i = 0; i < ELEMENTSOF(forwarded); i++) {
                sigaddset(&set, forwarded[i]);
                (void) sigaction(forwarded[i], &sa, NULL);
        }
        (void) sigprocmask(SIG_BLOCK, &set, ret_old_mask);
}

int init_reset_signals_in_child(const sigset_t *old_mask) {
        struct sigaction sa = { .sa_handler = SIG_DFL };

        for (size_t i = 0; i < ELEMENTSOF(forwarded); i++)
                if (sigaction(forwarded[i], &sa, NULL) < 0)
                        return negative_errno();
        if (sigprocmask(SIG_SETMASK, old_mask, NULL) < 0)
                return negative_errno();
        return 0;
}

_noreturn_ void init_run(pid_t main_pid, int status_fd) {
        sigset_t set;

        sigemptyset(&set);
        sigaddset(&set, SIGCHLD);
        for (size_t i = 0; i < ELEMENTSOF(forwarded); i++)
                sigaddset(&set, forwarded[i]);

        for (;;) {
                siginfo_t si;
                int sig = sigwaitinfo(&set, &si);

                if (sig < 0)
                        continue;
                if (sig != SIGCHLD) {
                        (void) kill(main_pid, sig);
                        continue;
                }
                for (;;) {
                        int status;
                        pid_t pid = waitpid(-1, &status, WNOHANG);

                        if (pid <= 0)
                                break;
                        if (pid != main_pid)
                                continue;
                        /* The main process is gone: report its real status, then go (taking
                         * the rest of the namespace with us). */
                        int32_t raw = status;
                        (void) !write(status_fd, &raw, sizeof raw);
                        _exit(WIFEXITED(status) ? WEXITSTATUS(status)
                                                : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 255);
                }
        }
}
