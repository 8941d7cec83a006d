/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <unistd.h>

#include "doctor.h"
#include "macros.h"
#include "string-util.h"

#define DOCTOR_ARGS_MAX 64

static void usage(FILE *f) {
        fprintf(f,
                "Usage: sandloom doctor [--json] [--data-dir DIR] [any `sandloom serve` option]\n\n"
                "Checks whether this host can run the daemon: privileges, namespaces, mounts, seccomp,\n"
                "cgroups, overlayfs, project quotas, bubblewrap, disk space, the data directory and the\n"
                "store. Settings come from the environment (SANDBOX_*) and the options, as for `serve`.\n"
                "Exit status: 0 if nothing FAILs (the daemon can serve), 1 otherwise, 2 on bad usage.\n");
}

static void print_table(const Doctor *d, FILE *f) {
        size_t w = strlen("CHECK");

        for (size_t i = 0; i < d->n_rows; i++)
                w = MAX(w, strlen(d->rows[i].check));
        fprintf(f, "%-*s  %-4s  %s\n", (int) w, "CHECK", "", "DETAIL (and the fix)");
        for (size_t i = 0; i < d->n_rows; i++) {
                const DoctorRow *r = &d->rows[i];
                fprintf(f, "%-*s  %-4s  %s\n", (int) w, r->check, doctor_status_to_string(r->status), r->detail);
                if (r->fix[0])
                        fprintf(f, "%-*s        fix: %s\n", (int) w, "", r->fix);
        }
}

static int print_json(const Doctor *d, bool can_serve, FILE *f) {
        json_t *rows = json_array(), *o;
        int r;

        if (!rows)
                return -ENOMEM;
        for (size_t i = 0; i < d->n_rows; i++) {
                const DoctorRow *row = &d->rows[i];
                (void) json_array_append_new(rows, json_pack("{s:s, s:s, s:s, s:s?}", "check", row->check, "status",
                                                             doctor_status_to_string(row->status), "detail", row->detail,
                                                             "fix", row->fix[0] ? row->fix : NULL));
        }
        o = json_pack("{s:b, s:s, s:o}", "can_serve", can_serve, "data_dir", d->data_dir, "checks", rows);
        if (!o)
                return -ENOMEM;
        r = json_dumpf(o, f, JSON_INDENT(2));
        fputc('\n', f);
        json_decref(o);
        return r < 0 ? -EIO : 0;
}

int doctor_main(int argc, char **argv) {
        _cleanup_free_ char **rest = NULL;
        _cleanup_free_ Doctor *d = NULL;
        _cleanup_free_ char *abs_dir = NULL;
        bool json = false, can_serve = true;
        char err[512] = "";
        int n = 0, r;

        if (argc > DOCTOR_ARGS_MAX) {
                fprintf(stderr, "sandloom doctor: too many arguments.\n");
                return 2;
        }
        rest = calloc((size_t) argc + 1, sizeof *rest);
        d = calloc(1, sizeof *d);
        if (!rest || !d)
                return 1;
        for (int i = 0; i < argc; i++) {
                if (streq(argv[i], "--json"))
                        json = true;
                else if (streq(argv[i], "--help") || streq(argv[i], "-h")) {
                        usage(stdout);
                        return 0;
                } else
                        rest[n++] = argv[i];
        }
        r = config_load(&d->config, n, rest, stderr, err, sizeof err);
        if (r < 0) {
                fprintf(stderr, "sandloom doctor: %s\n", err);
                config_free(&d->config);
                return 2;
        }
        /* Absolute, as the daemon makes it: mount look-ups compare paths. */
        if (d->config.data_dir[0] != '/') {
                char cwd[PATH_MAX];
                if (!getcwd(cwd, sizeof cwd) || !(abs_dir = strprintf("%s/%s", cwd, d->config.data_dir))) {
                        fprintf(stderr, "sandloom doctor: cannot resolve the data directory %s.\n", d->config.data_dir);
                        config_free(&d->config);
                        return 2;
                }
        }
        d->data_dir = abs_dir ? abs_dir : d->config.data_dir;

        doctor_run_checks(d);
        for (size_t i = 0; i < d->n_rows; i++)
                if (d->rows[i].status == DOCTOR_FAIL)
                        can_serve = false;
        if (json)
                (void) print_json(d, can_serve, stdout);
        else {
                print_table(d, stdout);
                printf("\n%s\n", can_serve ? "The daemon can serve on this host."
                                           : "The daemon cannot serve on this host: fix the FAIL rows.");
        }
        fflush(stdout);
        config_free(&d->config);
        return can_serve ? 0 : 1;
}
