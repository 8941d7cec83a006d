/* SPDX-License-Identifier: MIT */
/* Measures the launch path: N serial /bin/true launches through the spawner at one level,
 * with the per-step timings of each, and prints the median of every step.
 * Usage: bench-launch [basic|standard|strict] [N] [none|host] [native|bwrap]   (as root) */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "launch.h"
#include "macros.h"
#include "spawner.h"
#include "time-util.h"

#define UID 1999990009

static int cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
        return x < y ? -1 : x > y;
}

static uint64_t median(uint64_t *v, size_t n) {
        qsort(v, n, sizeof *v, cmp_u64);
        return n ? v[n / 2] : 0;
}

int main(int argc, char **argv) {
        IsolationLevel level = isolation_level_from_string(argc > 1 ? argv[1] : "standard");
        size_t n = argc > 2 ? (size_t) strtoul(argv[2], NULL, 10) : 200;
        NetworkMode net = NETWORK_MODE_NONE;
        char dir[] = "/tmp/sandloom-bench-XXXXXX", path[256], msg[256];
        const char *sub[] = { "fs", "fs/workspace", "fs/home", "fs/home/sandbox", "fs/cache", "fs/envs" };
        Spawner *s = NULL;
        int fs_fd, null_fd, r;
        uint64_t *steps[_LAUNCH_T_MAX + 2];

        SpawnerOptions opts = {};

        if (argc > 3 && network_mode_from_string(argv[3], &net) < 0)
                return 2;
        if (argc > 4 && launch_runtime_from_string(argv[4], &opts.runtime) < 0)
                return 2;
        if (level == ISOLATION_LEVEL_INVALID || n == 0)
                return 2;
        if (!mkdtemp(dir))
                return 1;
        for (size_t i = 0; i < ELEMENTSOF(sub); i++) {
                snprintf(path, sizeof path, "%s/%s", dir, sub[i]);
                if (mkdir(path, 0755) < 0 || chown(path, UID, UID) < 0)
                        return 1;
        }
        snprintf(path, sizeof path, "%s/fs", dir);
        fs_fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);

        r = spawner_start(&opts, &s, msg, sizeof msg);
        if (r < 0) {
                fprintf(stderr, "spawner: %s (%s)\n", msg, strerror(-r));
                return 1;
        }
        for (size_t t = 0; t < ELEMENTSOF(steps); t++)
                steps[t] = calloc(n, sizeof(uint64_t));

        char *const cmd[] = { (char *) "/bin/true", NULL };
        char *const env[] = { (char *) "PATH=/usr/bin:/bin", NULL };
        LaunchSpec spec = {
                .sandbox_key = "bench", .hostname = "bench", .uid = UID, .gid = UID, .level = level, .network = net,
                .fs_fd = fs_fd, .stdin_fd = null_fd, .stdout_fd = null_fd, .stderr_fd = null_fd,
                .argv = cmd, .envp = env, .tmpfs_bytes = 512ull << 20, .collect_timings = true,
        };
        for (size_t i = 0; i < n + 5; i++) {
                SpawnerExec *e = NULL;
                LaunchError err;
                LaunchTimings t = {};
                SpawnerExit x;
                uint64_t start = now_monotonic_usec();

                r = spawner_launch(s, &spec, NULL, NULL, &e, &err, &t);
                if (r < 0) {
                        fprintf(stderr, "launch: %s\n", err.message);
                        return 1;
                }
                (void) spawner_exec_wait(e, UINT64_MAX, &x);
                uint64_t end = now_monotonic_usec();
                spawner_exec_unref(e);
                if (!x.exited || x.exit_code != 0) {
                        fprintf(stderr, "/bin/true failed: %d/%d\n", x.exit_code, x.signal);
                        return 1;
                }
                if (i < 5)
                        continue;       /* warm-up */
                uint64_t prev = t.at_usec[LAUNCH_T_START];
                for (int k = 1; k < _LAUNCH_T_MAX; k++) {
                        if (t.at_usec[k] == 0)
                                continue;
                        steps[k][i - 5] = t.at_usec[k] >= prev ? t.at_usec[k] - prev : 0;
                        prev = t.at_usec[k];
                }
                steps[_LAUNCH_T_MAX][i - 5] = x.ended_usec - t.at_usec[LAUNCH_T_EXEC_SEEN];
                steps[_LAUNCH_T_MAX + 1][i - 5] = end - start;
        }
        printf("runtime %s, level %s, network %s, %zu serial /bin/true launches, median per step (us):\n",
               launch_runtime_to_string(opts.runtime), isolation_level_to_string(level), network_mode_to_string(net), n);
        for (int k = 1; k < _LAUNCH_T_MAX; k++)
                printf("  %-24s %6llu\n", launch_timing_name(k), (unsigned long long) median(steps[k], n));
        printf("  %-24s %6llu\n", "exec seen -> exit seen", (unsigned long long) median(steps[_LAUNCH_T_MAX], n));
        printf("  %-24s %6llu\n", "TOTAL launch+wait", (unsigned long long) median(steps[_LAUNCH_T_MAX + 1], n));

        spawner_stop(s);
        for (size_t i = ELEMENTSOF(sub); i > 0; i--) {
                snprintf(path, sizeof path, "%s/%s", dir, sub[i - 1]);
                rmdir(path);
        }
        rmdir(dir);
        return 0;
}
