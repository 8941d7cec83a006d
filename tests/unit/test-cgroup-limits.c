/* SPDX-License-Identifier: MIT */
/* Unit tests for the pure parts of src/isolation/cgroup-limits.c: SANDBOX_CPU_QUOTA parsing and
 * the detection of cgroup v1 / v2 / none from mountinfo and /proc/self/cgroup texts (written to
 * temp files), and the v1 limit files written into a plain directory standing in for a cgroup. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup-limits.h"
#include "macros.h"
#include "string-util.h"

static void test_cpu_quota_accepts_decimal_cores(void **state) {
        uint64_t m = 1;

        assert_int_equal(cgroup_limits_parse_cpu_quota("", &m), 0);
        assert_int_equal(m, 0);
        assert_int_equal(cgroup_limits_parse_cpu_quota("0", &m), 0);
        assert_int_equal(m, 0);
        assert_int_equal(cgroup_limits_parse_cpu_quota("0.5", &m), 0);
        assert_int_equal(m, 500);
        assert_int_equal(cgroup_limits_parse_cpu_quota("2", &m), 0);
        assert_int_equal(m, 2000);
        assert_int_equal(cgroup_limits_parse_cpu_quota("1.25", &m), 0);
        assert_int_equal(m, 1250);
        assert_int_equal(cgroup_limits_parse_cpu_quota("0.001", &m), 0);
        assert_int_equal(m, 1);
}

static void test_cpu_quota_rejects_garbage(void **state) {
        static const char *const bad[] = { "half", "-1", ".5", "1.", "1.2345", "0x1", "1e3", "5000", " 1", "1 " };
        uint64_t m = 42;

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                assert_int_equal(cgroup_limits_parse_cpu_quota(bad[i], &m), -EINVAL);
                assert_int_equal(m, 42);
        }
}

static void write_file(const char *path, const char *text) {
        FILE *f = fopen(path, "we");

        assert_non_null(f);
        assert_int_equal(fputs(text, f) >= 0, 1);
        assert_int_equal(fclose(f), 0);
}

typedef struct Tmp {
        char dir[64], mountinfo[128], cgroup[128];
} Tmp;

static void tmp_setup(Tmp *t, const char *mountinfo, const char *cgroup) {
        (void) strscpy(t->dir, sizeof t->dir, "/tmp/test-cgroup-limits-XXXXXX");
        assert_non_null(mkdtemp(t->dir));
        (void) bsprintf(t->mountinfo, sizeof t->mountinfo, "%s/mountinfo", t->dir);
        (void) bsprintf(t->cgroup, sizeof t->cgroup, "%s/cgroup", t->dir);
        write_file(t->mountinfo, mountinfo);
        write_file(t->cgroup, cgroup);
}

static void tmp_done(Tmp *t) {
        (void) unlink(t->mountinfo);
        (void) unlink(t->cgroup);
        (void) rmdir(t->dir);
}

/* This project's CI hosts: cpu and cpuacct separate, memory below a container's cgroup, a v2
 * mount without controllers. */
static void test_detect_finds_v1_hierarchies_and_own_cgroups(void **state) {
        Tmp t;
        CgroupHost h;

        tmp_setup(&t,
                  "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
                  "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
                  "33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
                  "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
                  "39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
                  "40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n"
                  "41 31 0:38 / /nonexistent/unified rw,relatime - cgroup2 cgroup2 rw\n",
                  "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/abc\n2:cpuacct:/\n1:cpu:/\n0::/\n");
        assert_int_equal(cgroup_limits_detect(t.mountinfo, t.cgroup, &h), 0);
        assert_int_equal(h.mode, CGROUP_LIMITS_V1);
        assert_string_equal(h.path[CGROUP_MEMORY], "/sys/fs/cgroup/memory/process_api/abc");
        assert_string_equal(h.path[CGROUP_PIDS], "/sys/fs/cgroup/pids");
        assert_string_equal(h.path[CGROUP_CPU], "/sys/fs/cgroup/cpu");
        assert_string_equal(h.path[CGROUP_CPUACCT], "/sys/fs/cgroup/cpuacct");
        assert_non_null(strstr(h.evidence, "memory pids cpu cpuacct"));
        tmp_done(&t);
}

/* cpu,cpuacct co-mounted (most distributions), and a container whose mount root is its own cgroup. */
static void test_detect_handles_comounts_and_mount_roots(void **state) {
        Tmp t;
        CgroupHost h;

        tmp_setup(&t,
                  "32 31 0:29 /docker/x /sys/fs/cgroup/cpu,cpuacct ro - cgroup cgroup rw,cpu,cpuacct\n"
                  "35 31 0:32 /docker/x /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n",
                  "4:memory:/docker/x/sub\n1:cpu,cpuacct:/docker/x\n");
        assert_int_equal(cgroup_limits_detect(t.mountinfo, t.cgroup, &h), 0);
        assert_int_equal(h.mode, CGROUP_LIMITS_V1);
        assert_string_equal(h.path[CGROUP_MEMORY], "/sys/fs/cgroup/memory/sub");
        assert_string_equal(h.path[CGROUP_CPU], "/sys/fs/cgroup/cpu,cpuacct");
        assert_string_equal(h.path[CGROUP_CPUACCT], "/sys/fs/cgroup/cpu,cpuacct");
        assert_string_equal(h.path[CGROUP_PIDS], "");
        tmp_done(&t);
}

static void test_detect_prefers_v2_with_controllers(void **state) {
        Tmp t;
        CgroupHost h;
        char mi[512], ctl[256], own[128];

        /* The v2 "mount" is the temp dir; our cgroup is its subdirectory "svc". */
        tmp_setup(&t, "", "0::/svc\n");
        (void) bsprintf(own, sizeof own, "%s/svc", t.dir);
        assert_int_equal(mkdir(own, 0755), 0);
        (void) bsprintf(ctl, sizeof ctl, "%s/cgroup.controllers", own);
        write_file(ctl, "cpuset cpu io memory pids\n");
        (void) bsprintf(mi, sizeof mi, "30 23 0:26 / %s rw - cgroup2 cgroup2 rw\n", t.dir);
        write_file(t.mountinfo, mi);

        assert_int_equal(cgroup_limits_detect(t.mountinfo, t.cgroup, &h), 0);
        assert_int_equal(h.mode, CGROUP_LIMITS_V2);
        assert_string_equal(h.path[0], own);
        assert_true(h.v2_controllers[CGROUP_MEMORY] && h.v2_controllers[CGROUP_PIDS] && h.v2_controllers[CGROUP_CPU]);

        /* Without the memory controller delegated: not v2, and no v1 either. */
        write_file(ctl, "cpu pids\n");
        assert_int_equal(cgroup_limits_detect(t.mountinfo, t.cgroup, &h), 0);
        assert_int_equal(h.mode, CGROUP_LIMITS_NONE);
        assert_non_null(strstr(h.evidence, "without memory/pids"));
        (void) unlink(ctl);
        (void) rmdir(own);
        tmp_done(&t);
}

static void test_detect_none_without_cgroups(void **state) {
        Tmp t;
        CgroupHost h;

        tmp_setup(&t, "22 1 0:21 / /proc rw - proc proc rw\n", "0::/\n");
        assert_int_equal(cgroup_limits_detect(t.mountinfo, t.cgroup, &h), 0);
        assert_int_equal(h.mode, CGROUP_LIMITS_NONE);
        assert_string_equal(cgroup_limits_mode_to_string(h.mode), "none");
        tmp_done(&t);
}

/* v2 limits are plain writes: check them against a directory with the files present. */
static void test_v2_apply_writes_the_limit_files(void **state) {
        char dir[] = "/tmp/test-cgroup-v2-XXXXXX", path[128], buf[64];
        static const char *const files[] = { "memory.max", "memory.swap.max", "pids.max", "cpu.max" };
        static const char *const want[] = { "268435456", "0", "64", "50000 100000" };
        CgroupLimits l = { .memory_bytes = 256u << 20, .processes = 64, .cpu_millicores = 500 };
        int fd;

        assert_non_null(mkdtemp(dir));
        for (size_t i = 0; i < ELEMENTSOF(files); i++) {
                (void) bsprintf(path, sizeof path, "%s/%s", dir, files[i]);
                write_file(path, "");
        }
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(cgroup_limits_v2_apply(fd, &l), 0);
        for (size_t i = 0; i < ELEMENTSOF(files); i++) {
                FILE *f;
                size_t n;

                (void) bsprintf(path, sizeof path, "%s/%s", dir, files[i]);
                f = fopen(path, "re");
                assert_non_null(f);
                n = fread(buf, 1, sizeof buf - 1, f);
                buf[n] = '\0';
                fclose(f);
                assert_string_equal(buf, want[i]);
                (void) unlink(path);
        }
        close(fd);
        (void) rmdir(dir);
}

/* v2 per-exec memory: the sandbox cgroup hands memory to its execs' tracking cgroups, whose
 * own memory.events and memory.peak then say what happened to that exec alone. */
static void test_v2_per_exec_memory_counters(void **state) {
        char dir[] = "/tmp/test-cgroup-v2-XXXXXX", path[128], buf[64];
        CgroupMemoryCounters m;
        FILE *f;
        size_t n;
        int fd;

        assert_non_null(mkdtemp(dir));
        (void) bsprintf(path, sizeof path, "%s/cgroup.subtree_control", dir);
        write_file(path, "");
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(cgroup_limits_v2_delegate_memory(fd), 0);
        f = fopen(path, "re");
        assert_non_null(f);
        n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = '\0';
        fclose(f);
        assert_string_equal(buf, "+memory");
        (void) unlink(path);

        /* Without the controller there are no counters: the caller falls back. */
        assert_true(cgroup_limits_memory_counters(fd, true, &m) < 0);
        (void) bsprintf(path, sizeof path, "%s/memory.events", dir);
        write_file(path, "low 0\nhigh 0\nmax 7\noom 1\noom_kill 1\noom_group_kill 0\n");
        (void) bsprintf(path, sizeof path, "%s/memory.peak", dir);
        write_file(path, "134217728\n");
        assert_int_equal(cgroup_limits_memory_counters(fd, true, &m), 0);
        assert_int_equal(m.oom_kills, 1);
        assert_int_equal(m.failcnt, 7);
        assert_int_equal(m.peak_bytes, 134217728);
        (void) unlink(path);
        (void) bsprintf(path, sizeof path, "%s/memory.events", dir);
        (void) unlink(path);
        close(fd);
        (void) rmdir(dir);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_cpu_quota_accepts_decimal_cores),
                cmocka_unit_test(test_cpu_quota_rejects_garbage),
                cmocka_unit_test(test_detect_finds_v1_hierarchies_and_own_cgroups),
                cmocka_unit_test(test_detect_handles_comounts_and_mount_roots),
                cmocka_unit_test(test_detect_prefers_v2_with_controllers),
                cmocka_unit_test(test_detect_none_without_cgroups),
                cmocka_unit_test(test_v2_apply_writes_the_limit_files),
                cmocka_unit_test(test_v2_per_exec_memory_counters),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
