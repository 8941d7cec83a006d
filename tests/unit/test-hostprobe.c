/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hostprobe.h"
#include "macros.h"
#include "resources.h"

static void test_word_in_matches_whole_words_only(void **state) {
        assert_true(hostprobe_word_in("cpu cpuacct memory", "cpuacct"));
        assert_true(hostprobe_word_in("rw,relatime,prjquota", "prjquota"));
        assert_false(hostprobe_word_in("cpuacct memory", "cpu"));
        assert_false(hostprobe_word_in("", "memory"));
        assert_false(hostprobe_word_in("memory", ""));
}

/* A plain directory stands in for a cgroup: the probe directory is created and removed
 * again, and the missing limit file is the failing step named in the evidence. */
static void test_cgroup_try_names_the_failing_step_and_cleans_up(void **state) {
        char dir[] = "/tmp/test-hostprobe-XXXXXX", ev[512] = "", probe[600];
        struct stat st;

        assert_non_null(mkdtemp(dir));
        assert_int_equal(hostprobe_cgroup_try(dir, "memory.limit_in_bytes", "1", ev, sizeof ev), -ENOENT);
        assert_non_null(strstr(ev, "memory.limit_in_bytes"));
        assert_non_null(strstr(ev, "No such file or directory"));
        (void) snprintf(probe, sizeof probe, "%s/sandloom-probe-%d", dir, (int) getpid());
        assert_int_equal(stat(probe, &st), -1);
        assert_int_equal(rmdir(dir), 0);
}

static void test_cgroup_try_reports_an_unusable_parent(void **state) {
        char ev[512] = "";

        assert_int_equal(hostprobe_cgroup_try("/nonexistent-hostprobe-dir", "pids.max", "1", ev, sizeof ev), -ENOENT);
        assert_non_null(strstr(ev, "/nonexistent-hostprobe-dir"));
}

static void test_mount_of_finds_proc(void **state) {
        char fstype[64], opts[512];

        assert_int_equal(hostprobe_mount_of("/proc/self", fstype, sizeof fstype, opts, sizeof opts), 0);
        assert_string_equal(fstype, "proc");
        assert_int_equal(hostprobe_mount_of("/nonexistent-hostprobe-dir", fstype, sizeof fstype, opts, sizeof opts), -ENOENT);
}

/* /proc has no project ids: "no", with the reason. */
static void test_project_quota_says_no_with_a_reason(void **state) {
        _cleanup_close_ int fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        char ev[512] = "";

        assert_true(fd >= 0);
        assert_int_equal(hostprobe_project_quota(fd, "/proc", ev, sizeof ev), 0);
        assert_true(ev[0] != '\0');
}

/* Every v1 hierarchy found is a real mount, and the caller's own cgroup in it exists. */
static void test_cgroup_layout_points_at_existing_directories(void **state) {
        CgroupLayout *l = calloc(1, sizeof *l);
        struct stat st;

        assert_non_null(l);
        assert_int_equal(hostprobe_cgroups(l), 0);
        for (size_t i = 0; i < l->n_v1; i++) {
                assert_true(l->v1[i].controllers[0] != '\0');
                assert_int_equal(stat(l->v1[i].mount, &st), 0);
                if (l->v1[i].own[0])
                        assert_int_equal(stat(l->v1[i].own, &st), 0);
        }
        if (l->v2 && l->v2_own[0])
                assert_int_equal(stat(l->v2_own, &st), 0);
        free(l);
}

static void test_mechanism_names_are_the_documented_ones(void **state) {
        assert_string_equal(resource_mechanism_to_string(RESOURCE_MECHANISM_CGROUP_V1), "cgroup-v1");
        assert_string_equal(resource_mechanism_to_string(RESOURCE_MECHANISM_CGROUP_V2), "cgroup-v2");
        assert_string_equal(resource_mechanism_to_string(RESOURCE_MECHANISM_PROJECT_QUOTA), "project-quota");
        assert_string_equal(resource_mechanism_to_string(RESOURCE_MECHANISM_RLIMIT), "rlimit");
        assert_string_equal(resource_mechanism_to_string(RESOURCE_MECHANISM_SAMPLED), "sampled");
        assert_string_equal(resource_mechanism_to_string(RESOURCE_MECHANISM_NONE), "none");
        assert_null(resource_mechanism_to_string((ResourceMechanism) 99));
        assert_string_equal(resource_kind_to_string(RESOURCE_OPEN_FILES), "open_files");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_word_in_matches_whole_words_only),
                cmocka_unit_test(test_cgroup_try_names_the_failing_step_and_cleans_up),
                cmocka_unit_test(test_cgroup_try_reports_an_unusable_parent),
                cmocka_unit_test(test_mount_of_finds_proc),
                cmocka_unit_test(test_project_quota_says_no_with_a_reason),
                cmocka_unit_test(test_cgroup_layout_points_at_existing_directories),
                cmocka_unit_test(test_mechanism_names_are_the_documented_ones),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
