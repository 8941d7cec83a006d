/* SPDX-License-Identifier: MIT */
/* The floor: the same isolation done by bwrap, and a bare fork/exec of /bin/true, timed from this
 * process in the same run (interleaved, so noise from other load hits every variant alike). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "fileio.h"
#include "string-util.h"

#define BWRAP_ARGV_MAX 32

typedef struct Variant {
        const char *name;
        const char *argv[BWRAP_ARGV_MAX];
        BenchSamples lat;
        bool available;
        char reason[BENCH_ERR_MAX];
} Variant;

static char *const child_env[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C", NULL };

static int find_in_path(const char *name, char *buf, size_t n) {
        const char *path = getenv("PATH");
        _cleanup_free_ char *copy = strdup(isempty(path) ? "/usr/local/bin:/usr/bin:/bin" : path);
        char *save = NULL;

        if (!copy)
                return -ENOMEM;
        for (char *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
                if (bsprintf(buf, n, "%s/%s", d, name) < 0)
                        continue;
                if (access(buf, X_OK) == 0)
                        return 0;
        }
        return -ENOENT;
}

/* Reads what is in the pipe now (non-blocking): the first ERRLEN - 1 bytes are kept, the rest is
 * read and dropped, so a chatty child never blocks on a full pipe. Returns true at end of file. */
static bool drain(int fd, char *errbuf, size_t errlen, size_t *have) {
        char junk[4096];

        for (;;) {
                bool keep = *have + 1 < errlen;
                ssize_t k = keep ? read(fd, errbuf + *have, errlen - 1 - *have) : read(fd, junk, sizeof junk);
                if (k == 0)
                        return true;
                if (k < 0)
                        return errno != EINTR && errno != EAGAIN;
                if (keep)
                        *have += (size_t) k;
        }
}

/* fork + execve + waitpid. Returns the exit status (>= 0) or -errno; *ret_ms the wall time.
 * With ERRBUF, the child's stderr is captured there (its first line; the probe run), read while
 * the child runs; else it goes to /dev/null. */
static int run_once(const char *const *argv, double *ret_ms, char *errbuf, size_t errlen) {
        _cleanup_close_ int null_fd = -EBADF, rfd = -EBADF, wfd = -EBADF;
        size_t have = 0;
        bool eof = false;
        usec_t t0;
        pid_t pid;
        int status;

        null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null_fd < 0)
                return -errno;
        if (errbuf) {
                int p[2];
                if (errlen == 0 || pipe2(p, O_CLOEXEC) < 0)
                        return errlen == 0 ? -EINVAL : -errno;
                rfd = p[0];
                wfd = p[1];
                if (fcntl(rfd, F_SETFL, O_NONBLOCK) < 0)
                        return -errno;
        }
        t0 = now_monotonic_usec();
        pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                if (dup2(null_fd, STDIN_FILENO) < 0 || dup2(null_fd, STDOUT_FILENO) < 0 ||
                    dup2(errbuf ? wfd : null_fd, STDERR_FILENO) < 0)
                        _exit(126);
                execve(argv[0], (char *const *) argv, child_env);
                _exit(127);
        }
        wfd = safe_close(wfd);
        for (;;) {
                pid_t w;

                if (rfd >= 0 && !eof)
                        eof = drain(rfd, errbuf, errlen, &have);
                w = waitpid(pid, &status, rfd >= 0 ? WNOHANG : 0);
                if (w == pid)
                        break;
                if (w < 0 && errno != EINTR)
                        return -errno; /* the fds are closed on return */
                if (w == 0) {
                        /* Still running: wait for output, end of file, or at most 50 ms. */
                        struct pollfd pfd = { .fd = eof ? -1 : rfd, .events = POLLIN };
                        (void) poll(&pfd, 1, eof ? 10 : 50);
                }
        }
        *ret_ms = (double) (now_monotonic_usec() - t0) / 1000.0;
        if (errbuf) {
                if (!eof)
                        (void) drain(rfd, errbuf, errlen, &have); /* what was written before the exit */
                errbuf[have] = '\0';
                errbuf[strcspn(errbuf, "\n")] = '\0';
        }
        if (WIFEXITED(status))
                return WEXITSTATUS(status);
        return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

static void variant_argv(Variant *v, const char *bwrap, bool netns) {
        size_t i = 0;

        v->argv[i++] = bwrap;
        /* What docs/ISOLATION.md says the native runtime gives a command at level standard, network
         * none: new mount, IPC, UTS, PID (with a private /proc) and network namespaces, a root with the
         * host's files read-only, a minimal /dev, a private /tmp, a new session. */
        v->argv[i++] = "--unshare-ipc";
        v->argv[i++] = "--unshare-uts";
        v->argv[i++] = "--unshare-pid";
        if (netns)
                v->argv[i++] = "--unshare-net";
        v->argv[i++] = "--die-with-parent";
        v->argv[i++] = "--new-session";
        v->argv[i++] = "--ro-bind";
        v->argv[i++] = "/";
        v->argv[i++] = "/";
        v->argv[i++] = "--dev";
        v->argv[i++] = "/dev";
        v->argv[i++] = "--proc";
        v->argv[i++] = "/proc";
        v->argv[i++] = "--tmpfs";
        v->argv[i++] = "/tmp";
        v->argv[i++] = "--hostname";
        v->argv[i++] = "bench";
        v->argv[i++] = "/bin/true";
        v->argv[i] = NULL;
}

static json_t *variant_json(Variant *v) {
        json_t *o, *a;

        if (!v->available)
                return json_pack("{s:b, s:s}", "available", false, "reason", v->reason);
        o = bench_samples_json(&v->lat);
        a = json_array();
        for (size_t i = 0; a && v->argv[i]; i++)
                (void) json_array_append_new(a, json_string(v->argv[i]));
        if (o) {
                (void) json_object_set_new(o, "available", json_true());
                (void) json_object_set_new(o, "argv", a);
        } else
                json_decref(a);
        return o;
}

int bench_run_baseline(Bench *b, json_t *result, char *err, size_t errlen) {
        const BenchOptions *o = b->opt;
        char bwrap[4096];
        Variant v[3] = {
                { .name = "fork_exec", .argv = { "/bin/true", NULL }, .available = true },
                { .name = "bwrap" },
                { .name = "bwrap_no_netns" },
        };
        uint64_t total = o->warmup + o->count;
        double ms;
        int r;

        if (access("/bin/true", X_OK) < 0) {
                (void) bsprintf(err, errlen, "NO_TRUE: /bin/true is not executable: %s", strerror(errno));
                return -errno;
        }
        if (o->bwrap)
                r = strscpy(bwrap, sizeof bwrap, o->bwrap) < 0 ? -ENAMETOOLONG : access(o->bwrap, X_OK) < 0 ? -errno : 0;
        else
                r = find_in_path("bwrap", bwrap, sizeof bwrap);
        if (r < 0) {
                (void) bsprintf(v[1].reason, sizeof v[1].reason, "bwrap not found (%s): install bubblewrap or pass --bwrap",
                                strerror(-r));
                (void) strscpy(v[2].reason, sizeof v[2].reason, v[1].reason);
        } else
                for (int i = 1; i <= 2; i++) {
                        char msg[BENCH_ERR_MAX] = "";
                        variant_argv(&v[i], bwrap, i == 1);
                        r = run_once(v[i].argv, &ms, msg, sizeof msg);
                        v[i].available = r == 0;
                        if (r < 0)
                                (void) bsprintf(v[i].reason, sizeof v[i].reason, "cannot run %s: %s", bwrap, strerror(-r));
                        else if (r > 0)
                                (void) bsprintf(v[i].reason, sizeof v[i].reason, "%s exited with status %d: %s", bwrap, r,
                                                msg[0] ? msg : "(no message)");
                }

        for (uint64_t k = 0; k < total && !bench_interrupted; k++) {
                for (size_t i = 0; i < ELEMENTSOF(v); i++) {
                        if (!v[i].available)
                                continue;
                        r = run_once(v[i].argv, &ms, NULL, 0);
                        if (r != 0) {
                                bench_progress_clear(b);
                                (void) bsprintf(err, errlen, "BASELINE_FAILED: %s exited with %d on run %" PRIu64,
                                                v[i].argv[0], r, k + 1);
                                for (size_t j = 0; j < ELEMENTSOF(v); j++)
                                        bench_samples_done(&v[j].lat);
                                return -EPROTO;
                        }
                        if (k >= o->warmup && bench_samples_add(&v[i].lat, ms) < 0) {
                                for (size_t j = 0; j < ELEMENTSOF(v); j++)
                                        bench_samples_done(&v[j].lat);
                                return -ENOMEM;
                        }
                }
                bench_progress(b, false, "baseline: %" PRIu64 "/%" PRIu64, k + 1, total);
        }
        bench_progress_clear(b);

        (void) json_object_set_new(result, "runs", json_integer((json_int_t) o->count));
        (void) json_object_set_new(result, "warmup", json_integer((json_int_t) o->warmup));
        for (size_t i = 0; i < ELEMENTSOF(v); i++)
                (void) json_object_set_new(result, v[i].name, variant_json(&v[i]));
        if (v[1].available)
                (void) json_object_set_new(result, "bwrap_over_fork_exec_p50",
                                           json_real(bench_round3(bench_samples_percentile(&v[1].lat, 50) /
                                                            MAX(bench_samples_percentile(&v[0].lat, 50), 0.001))));
        for (size_t j = 0; j < ELEMENTSOF(v); j++)
                bench_samples_done(&v[j].lat);
        return 0;
}
