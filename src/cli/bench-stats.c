/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"
#include "string-util.h"

#define BENCH_ERRORS_DISTINCT_MAX 16

int bench_samples_add(BenchSamples *s, double ms) {
        if (s->n == s->alloc) {
                size_t a = s->alloc ? s->alloc * 2 : 1024;
                double *p = reallocarray(s->v, a, sizeof *p);
                if (!p)
                        return -ENOMEM;
                s->v = p;
                s->alloc = a;
        }
        s->v[s->n++] = ms;
        s->sorted = false;
        return 0;
}

void bench_samples_done(BenchSamples *s) {
        free(s->v);
        *s = (BenchSamples) {};
}

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : x > y ? 1 : 0;
}

static void samples_sort(BenchSamples *s) {
        if (!s->sorted && s->n > 0)
                qsort(s->v, s->n, sizeof *s->v, cmp_double);
        s->sorted = true;
}

/* Nearest rank: the smallest sample such that at least P% of the samples are <= it. No
 * interpolation, so every figure reported is a latency that really happened. */
double bench_samples_percentile(BenchSamples *s, double p) {
        size_t rank;
        double x;

        if (s->n == 0)
                return 0;
        samples_sort(s);
        x = p / 100.0 * (double) s->n;
        rank = (size_t) x;
        if ((double) rank < x)
                rank++;
        if (rank < 1)
                rank = 1;
        if (rank > s->n)
                rank = s->n;
        return s->v[rank - 1];
}

/* Three decimals, without libm. */
double bench_round3(double v) {
        double x = v * 1000.0;
        long long k = (long long) (x < 0 ? x - 0.5 : x + 0.5);
        return (double) k / 1000.0;
}

double bench_samples_mean(const BenchSamples *s) {
        double sum = 0;

        if (s->n == 0)
                return 0;
        for (size_t i = 0; i < s->n; i++)
                sum += s->v[i];
        return sum / (double) s->n;
}

double bench_samples_max(BenchSamples *s) {
        return bench_samples_percentile(s, 100);
}

json_t *bench_samples_json(BenchSamples *s) {
        return json_pack("{s:I, s:f, s:f, s:f, s:f, s:f, s:f}", "count", (json_int_t) s->n,
                         "min_ms", bench_round3(bench_samples_percentile(s, 0)),
                         "p50_ms", bench_round3(bench_samples_percentile(s, 50)),
                         "p95_ms", bench_round3(bench_samples_percentile(s, 95)),
                         "p99_ms", bench_round3(bench_samples_percentile(s, 99)),
                         "max_ms", bench_round3(bench_samples_max(s)),
                         "mean_ms", bench_round3(bench_samples_mean(s)));
}

void bench_errors_add(BenchErrors *e, const char *line) {
        json_t *v;

        e->total++;
        if (!e->counts)
                e->counts = json_object();
        if (!e->counts)
                return;
        v = json_object_get(e->counts, line);
        if (v)
                (void) json_integer_set(v, json_integer_value(v) + 1);
        else if (json_object_size(e->counts) < BENCH_ERRORS_DISTINCT_MAX)
                (void) json_object_set_new(e->counts, line, json_integer(1));
        else {
                v = json_object_get(e->counts, "(other)");
                if (v)
                        (void) json_integer_set(v, json_integer_value(v) + 1);
                else
                        (void) json_object_set_new(e->counts, "(other)", json_integer(1));
        }
}

void bench_errors_done(BenchErrors *e) {
        json_decref(e->counts);
        *e = (BenchErrors) {};
}

static int samples_write_to(BenchSamples *s, FILE *f) {
        samples_sort(s);
        for (size_t i = 0; i < s->n; i++)
                if (fprintf(f, "%.3f\n", s->v[i]) < 0)
                        return -EIO;
        return fflush(f) != 0 ? -errno : 0;
}

/* Atomically: a temporary file next to PATH, renamed over it once complete, so a reader never sees
 * a half-written list and a failed run leaves no partial file behind. An existing PATH that is not
 * a regular file (/dev/stdout, a FIFO) is written directly. */
int bench_samples_write(BenchSamples *s, const char *path) {
        _cleanup_free_ char *tmp = NULL;
        struct stat st;
        FILE *f;
        int fd, r = 0;

        if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
                f = fopen(path, "we");
                if (!f)
                        return -errno;
                r = samples_write_to(s, f);
                if (fclose(f) != 0 && r == 0)
                        r = -errno;
                return r;
        }
        tmp = strprintf("%s.tmp.XXXXXX", path);
        if (!tmp)
                return -ENOMEM;
        fd = mkostemp(tmp, O_CLOEXEC);
        if (fd < 0)
                return -errno;
        f = fdopen(fd, "w");
        if (!f) {
                r = -errno;
                (void) close(fd);
                (void) unlink(tmp);
                return r;
        }
        r = samples_write_to(s, f);
        if (r == 0 && fchmod(fileno(f), 0644) < 0)
                r = -errno;
        if (fclose(f) != 0 && r == 0)
                r = -errno;
        if (r == 0 && rename(tmp, path) < 0)
                r = -errno;
        if (r < 0)
                (void) unlink(tmp);
        return r;
}
