/* SPDX-License-Identifier: MIT */
#pragma once

#include <linux/filter.h>

#include "isolation.h"

/* The seccomp denylist of DESIGN §5, compiled once by libseccomp when the spawner starts
 * and kept as a ready BPF program; a launch child loads it with one seccomp() call as the
 * last step before execve(). (The header is not called seccomp.h: that is libseccomp's.) */
typedef struct SeccompProgram {
        struct sock_fprog prog;
} SeccompProgram;

/* Compiles the filter for LEVEL (basic and standard share it; strict adds ptrace,
 * process_vm_*, pidfd_getfd and personality changes). Returns 0 or -errno. */
int seccomp_program_compile(IsolationLevel level, SeccompProgram *ret);

void seccomp_program_free(SeccompProgram *p);

/* Loads P into the calling thread. Needs no_new_privs (or CAP_SYS_ADMIN). */
int seccomp_program_load(const SeccompProgram *p);
