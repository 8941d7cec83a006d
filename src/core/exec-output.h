/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "time-util.h"

/* The output pump: ONE thread (epoll) for every exec of the worker — no thread per exec.
 * It drains each exec's stdout and stderr pipes into spool files, keeps the timers of the
 * exec engine (deadlines, kill-after-grace, admission and long-poll timeouts), and runs
 * small tasks handed to it from threads that must not block (the spawner's reader).
 *
 * A stream never blocks its process: past its cap the pump keeps reading and counting
 * but drops the bytes (truncated). The first EXEC_OUTPUT_HEAD_MAX bytes of a stream are
 * kept in memory; the spool file is created only when a stream grows past that (and then
 * holds the whole stream from byte 0), so the usual short command touches no file at all
 * (an ext4 create + unlink per stream was ~4 % of an exec's CPU). */

#define EXEC_OUTPUT_HEAD_MAX 4096

typedef struct ExecPump ExecPump;
typedef struct ExecOutput ExecOutput;
typedef struct PumpTimer PumpTimer;

struct ExecOutput {
        /* Set by the owner before exec_pump_add_output(), constant afterwards. */
        int dir_fd;                         /* where the spool file is created (borrowed) */
        char name[80];                      /* its name: "<exec_uid>.stdout" */
        uint64_t cap;                       /* bytes kept at most */
        void (*on_data)(ExecOutput *o);     /* pump thread: more bytes kept (or counted) */
        void (*on_eof)(ExecOutput *o);      /* pump thread: the pipe is closed; once */
        void *userdata;

        /* Written by the pump thread only; read by anyone. */
        int pipe_fd;                        /* the read end, owned by the pump once added */
        atomic_int spool_fd;                /* -1 until past the head; closed by exec_output_done() */
        char *head;                         /* the first bytes (EXEC_OUTPUT_HEAD_MAX), allocated at the
                                             * first byte, never moved, freed by exec_output_done() */
        atomic_uint_fast64_t produced;      /* every byte read from the pipe */
        atomic_uint_fast64_t kept;          /* bytes kept: in the head while spool_fd < 0, else in the file */
        atomic_bool eof;
        int spool_error;                    /* negative errno: the spool file could not be written */
        bool added;
};

/* Prepares O (not yet added): no pipe, no spool file. */
void exec_output_init(ExecOutput *o);
/* Closes the spool fd (the file stays) and frees the head. Only once O is no longer in the
 * pump and nobody reads it. */
void exec_output_done(ExecOutput *o);
/* Did the stream lose bytes: past the cap, or the spool failed? */
bool exec_output_truncated(const ExecOutput *o);
/* Reads kept bytes (from the head or the spool file): at most MAX at OFFSET, never past
 * `kept`. */
ssize_t exec_output_read(ExecOutput *o, uint64_t offset, void *buf, size_t max);

struct PumpTimer {
        usec_t when;                        /* CLOCK_MONOTONIC */
        void (*fn)(PumpTimer *t);           /* runs on the pump thread, without pump locks */
        size_t index;                       /* private: heap slot + 1, 0 = not armed */
};

int exec_pump_new(ExecPump **ret);
/* Stops the thread. Outputs still added are closed (EOF callbacks run). */
void exec_pump_free(ExecPump *p);

/* Hands O (with its pipe_fd set, O_NONBLOCK) to the pump. Thread-safe. */
int exec_pump_add_output(ExecPump *p, ExecOutput *o);
/* Pump thread only: reads what is there, then closes O's pipe as if at EOF (for a pipe
 * whose writer escaped the exec, e.g. passed to a process of another exec). */
void exec_pump_close_output(ExecPump *p, ExecOutput *o);

/* Runs FN(USERDATA) on the pump thread soon. Thread-safe, never blocks; for the
 * spawner's reader thread. */
int exec_pump_call(ExecPump *p, void (*fn)(void *userdata), void *userdata);

/* (Re)arms T to fire at WHEN (CLOCK_MONOTONIC). Returns true if T was armed already
 * (it moved), false if it was not. Thread-safe. */
bool exec_pump_timer_arm(ExecPump *p, PumpTimer *t, usec_t when);
/* Returns true if T was armed (it will not fire now), false if it was not armed, or
 * fired already, or is about to run on the pump thread. Callers that hold a reference
 * for an armed timer drop it exactly when this returns true or the callback ran. */
bool exec_pump_timer_disarm(ExecPump *p, PumpTimer *t);
