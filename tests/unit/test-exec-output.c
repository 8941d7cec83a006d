/* SPDX-License-Identifier: MIT */
/* Unit tests for the output pump (src/core/exec-output.c): spooling with a cap that never
 * blocks the writer, the in-memory head and lazy spool files, EOF, calls and timers. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec-output.h"
#include "macros.h"

#define WAIT_USEC (10 * USEC_PER_SEC)

typedef struct Ctx {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        int eofs, datas, fired[4], n_fired, calls;
} Ctx;

static Ctx ctx;

static void signal_ctx(void) {
        pthread_cond_broadcast(&ctx.cond);
}

static void on_data(ExecOutput *o) {
        pthread_mutex_lock(&ctx.lock);
        ctx.datas++;
        pthread_mutex_unlock(&ctx.lock);
}

static void on_eof(ExecOutput *o) {
        pthread_mutex_lock(&ctx.lock);
        ctx.eofs++;
        signal_ctx();
        pthread_mutex_unlock(&ctx.lock);
}

static bool wait_for(int *counter, int value) {
        usec_t deadline = now_monotonic_usec() + WAIT_USEC;
        bool ok;

        pthread_mutex_lock(&ctx.lock);
        while (*counter < value && now_monotonic_usec() < deadline) {
                pthread_mutex_unlock(&ctx.lock);
                usleep(1000);
                pthread_mutex_lock(&ctx.lock);
        }
        ok = *counter >= value;
        pthread_mutex_unlock(&ctx.lock);
        return ok;
}

static int setup(void **state) {
        static char dir[64];

        memset(&ctx, 0, sizeof ctx);
        pthread_mutex_init(&ctx.lock, NULL);
        pthread_cond_init(&ctx.cond, NULL);
        strcpy(dir, "/tmp/sandloom-test-pump-XXXXXX");
        assert_non_null(mkdtemp(dir));
        *state = dir;
        return 0;
}

static int teardown(void **state) {
        int fd = open(*state, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        assert_true(fd >= 0);
        (void) unlinkat(fd, "u.stdout", 0);
        close(fd);
        assert_int_equal(rmdir(*state), 0);
        return 0;
}

typedef struct Writer {
        int fd;
        size_t bytes;
} Writer;

static void *writer_main(void *arg) {
        Writer *w = arg;
        char buf[8192];

        memset(buf, 'x', sizeof buf);
        for (size_t done = 0; done < w->bytes;) {
                size_t n = MIN(sizeof buf, w->bytes - done);
                ssize_t k = write(w->fd, buf, n);
                if (k <= 0)
                        break;
                done += (size_t) k;
        }
        close(w->fd);
        return NULL;
}

static void output_prepare(ExecOutput *o, int dir_fd, const char *name, uint64_t cap, int pipe_fd) {
        exec_output_init(o);
        o->dir_fd = dir_fd;
        strcpy(o->name, name);
        o->cap = cap;
        o->on_data = on_data;
        o->on_eof = on_eof;
        o->pipe_fd = pipe_fd;
}

static void test_output_past_the_cap_is_counted_and_never_blocks_the_writer(void **state) {
        ExecPump *p = NULL;
        ExecOutput o;
        Writer w;
        pthread_t t;
        int fds[2], dir_fd;
        char buf[16];
        struct stat st;

        dir_fd = open(*state, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(dir_fd >= 0);
        assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
        assert_int_equal(fcntl(fds[0], F_SETFL, O_NONBLOCK), 0);
        assert_int_equal(exec_pump_new(&p), 0);
        output_prepare(&o, dir_fd, "u.stdout", 1024 * 1024, fds[0]);
        assert_int_equal(exec_pump_add_output(p, &o), 0);

        /* 5 MiB through a 64 KiB pipe: finishes only if the pump keeps draining past the cap. */
        w = (Writer) { .fd = fds[1], .bytes = 5 * 1024 * 1024 };
        assert_int_equal(pthread_create(&t, NULL, writer_main, &w), 0);
        assert_true(wait_for(&ctx.eofs, 1));
        pthread_join(t, NULL);

        assert_true(atomic_load(&o.eof));
        assert_int_equal(atomic_load(&o.produced), 5 * 1024 * 1024);
        assert_int_equal(atomic_load(&o.kept), 1024 * 1024);
        assert_true(exec_output_truncated(&o));
        assert_int_equal(fstatat(dir_fd, "u.stdout", &st, 0), 0);
        assert_int_equal(st.st_size, 1024 * 1024);
        assert_int_equal(st.st_mode & 07777, 0600);
        assert_int_equal(exec_output_read(&o, 1024 * 1024 - 4, buf, sizeof buf), 4); /* never past kept */
        assert_memory_equal(buf, "xxxx", 4);
        exec_output_done(&o);
        exec_pump_free(p);
        close(dir_fd);
}

static void test_no_output_creates_no_spool_file(void **state) {
        ExecPump *p = NULL;
        ExecOutput o;
        int fds[2], dir_fd;
        struct stat st;

        dir_fd = open(*state, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_int_equal(pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0);
        assert_int_equal(exec_pump_new(&p), 0);
        output_prepare(&o, dir_fd, "quiet.stdout", 1024, fds[0]);
        assert_int_equal(exec_pump_add_output(p, &o), 0);
        close(fds[1]);
        assert_true(wait_for(&ctx.eofs, 1));
        assert_int_equal(atomic_load(&o.produced), 0);
        assert_false(exec_output_truncated(&o));
        assert_int_equal(fstatat(dir_fd, "quiet.stdout", &st, 0), -1);
        assert_int_equal(errno, ENOENT);
        exec_output_done(&o);
        exec_pump_free(p);
        close(dir_fd);
}

/* A short stream stays in memory (no file); once it grows past the head, the spool file holds
 * every byte from 0, and reads see the same bytes before and after. */
static void test_small_output_stays_in_memory_and_spills_whole(void **state) {
        ExecPump *p = NULL;
        ExecOutput o;
        int fds[2], dir_fd;
        char big[EXEC_OUTPUT_HEAD_MAX + 1000], back[sizeof big + 100];
        struct stat st;

        for (size_t i = 0; i < sizeof big; i++)
                big[i] = (char) ('a' + i % 26);
        dir_fd = open(*state, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_int_equal(pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0);
        assert_int_equal(exec_pump_new(&p), 0);
        output_prepare(&o, dir_fd, "u.stdout", 1024 * 1024, fds[0]);
        assert_int_equal(exec_pump_add_output(p, &o), 0);

        assert_int_equal(write(fds[1], big, 100), 100);
        assert_true(wait_for(&ctx.datas, 1));
        for (int i = 0; i < 1000 && atomic_load(&o.kept) < 100; i++)
                usleep(1000);
        assert_int_equal(atomic_load(&o.kept), 100);
        assert_int_equal(fstatat(dir_fd, "u.stdout", &st, 0), -1); /* in memory only */
        assert_int_equal(errno, ENOENT);
        assert_int_equal(exec_output_read(&o, 10, back, 50), 50);
        assert_memory_equal(back, big + 10, 50);

        assert_int_equal(write(fds[1], big + 100, sizeof big - 100), (ssize_t) (sizeof big - 100));
        close(fds[1]);
        assert_true(wait_for(&ctx.eofs, 1));
        assert_int_equal(atomic_load(&o.kept), sizeof big);
        assert_int_equal(fstatat(dir_fd, "u.stdout", &st, 0), 0);
        assert_int_equal(st.st_size, (off_t) sizeof big);
        assert_int_equal(exec_output_read(&o, 0, back, sizeof back), (ssize_t) sizeof big);
        assert_memory_equal(back, big, sizeof big);
        assert_false(exec_output_truncated(&o));
        exec_output_done(&o);
        exec_pump_free(p);
        close(dir_fd);
}

static void fired(PumpTimer *t) {
        pthread_mutex_lock(&ctx.lock);
        ctx.fired[ctx.n_fired++] = (int) (t->when % 1000);
        pthread_mutex_unlock(&ctx.lock);
}

static void test_timers_fire_in_order_and_disarmed_ones_never(void **state) {
        ExecPump *p = NULL;
        PumpTimer t[4] = { { .fn = fired }, { .fn = fired }, { .fn = fired }, { .fn = fired } };
        usec_t base = (now_monotonic_usec() / 1000 + 1) * 1000;

        assert_int_equal(exec_pump_new(&p), 0);
        /* when % 1000 tags each timer: 3, 1, 2, and 4 (disarmed). */
        assert_false(exec_pump_timer_arm(p, &t[0], base + 60000 + 3));
        assert_false(exec_pump_timer_arm(p, &t[1], base + 20000 + 1));
        assert_false(exec_pump_timer_arm(p, &t[2], base + 40000 + 2));
        assert_false(exec_pump_timer_arm(p, &t[3], base + 30000 + 4));
        assert_true(exec_pump_timer_disarm(p, &t[3]));
        assert_false(exec_pump_timer_disarm(p, &t[3]));
        assert_true(wait_for(&ctx.n_fired, 3));
        usleep(50000);
        assert_int_equal(ctx.n_fired, 3);
        assert_int_equal(ctx.fired[0], 1);
        assert_int_equal(ctx.fired[1], 2);
        assert_int_equal(ctx.fired[2], 3);
        /* Fired timers are no longer armed. */
        assert_false(exec_pump_timer_disarm(p, &t[0]));
        exec_pump_free(p);
}

static void count_call(void *userdata) {
        pthread_mutex_lock(&ctx.lock);
        ctx.calls += *(int *) userdata;
        pthread_mutex_unlock(&ctx.lock);
}

static void test_calls_run_on_the_pump(void **state) {
        ExecPump *p = NULL;
        static int one = 1;

        assert_int_equal(exec_pump_new(&p), 0);
        for (int i = 0; i < 100; i++)
                assert_int_equal(exec_pump_call(p, count_call, &one), 0);
        assert_true(wait_for(&ctx.calls, 100));
        exec_pump_free(p);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_output_past_the_cap_is_counted_and_never_blocks_the_writer, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(test_no_output_creates_no_spool_file, setup, teardown),
                cmocka_unit_test_setup_teardown(test_small_output_stays_in_memory_and_spills_whole, setup, teardown),
                cmocka_unit_test_setup_teardown(test_timers_fire_in_order_and_disarmed_ones_never, setup, teardown),
                cmocka_unit_test_setup_teardown(test_calls_run_on_the_pump, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
