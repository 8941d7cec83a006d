/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "config.h"

/* `sandloom doctor`: checks the host the way an operator needs before deploying. Each
 * check adds rows; a FAIL row means the daemon cannot serve (exit 1). */

typedef enum DoctorStatus {
        DOCTOR_OK,
        DOCTOR_WARN,
        DOCTOR_FAIL,
} DoctorStatus;

typedef struct DoctorRow {
        char check[40];
        DoctorStatus status;
        char detail[640];
        char fix[320];                 /* one line; "" when OK */
} DoctorRow;

#define DOCTOR_ROWS_MAX 48

typedef struct Doctor {
        Config config;
        const char *data_dir;          /* as given (absolute or relative) */
        DoctorRow rows[DOCTOR_ROWS_MAX];
        size_t n_rows;
} Doctor;

const char *doctor_status_to_string(DoctorStatus s);

/* Runs every check, in the order of the table. Never prints. */
void doctor_run_checks(Doctor *d);

/* `sandloom doctor [--data-dir DIR] [--json]`: returns the exit status. */
int doctor_main(int argc, char **argv);
