/* SPDX-License-Identifier: MIT */
#pragma once

/* The `sandloom sandbox|exec|fs` client commands: option parsing from one table per command
 * (which also writes --help), one-line errors with a code, and the small calls every command
 * shares. Exit statuses: 0 ok, 1 an error (the line names its code), 2 bad usage. */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "client.h"

#define CLI_EXIT_OK 0
#define CLI_EXIT_ERROR 1
#define CLI_EXIT_USAGE 2

/* Client-side error codes (the daemon's are SANDBOX_*, EXEC_*, STALE_*). */
#define CLI_CONNECTION_FAILED "CLI_CONNECTION_FAILED"
#define CLI_NO_TOKEN "CLI_NO_TOKEN"
#define CLI_BAD_RESPONSE "CLI_BAD_RESPONSE"
#define CLI_LOCAL_FILE "CLI_LOCAL_FILE"
#define CLI_STREAM_LOST "CLI_STREAM_LOST"

/* Ids of the options every command takes; a command's own start at CLI_OPT_COMMAND. */
enum {
        CLI_OPT_URL = 1,
        CLI_OPT_TOKEN,
        CLI_OPT_TOKEN_FILE,
        CLI_OPT_DATA_DIR,
        CLI_OPT_JSON,
        CLI_OPT_HELP,
        CLI_OPT_COMMAND = 100,
};

typedef struct CliOption {
        const char *name;        /* long name without "--"; NULL ends a table */
        char short_name;         /* 0 if none */
        const char *arg;         /* the value's name in --help ("DIR"), NULL for a flag */
        int id;
        const char *help;
        bool repeatable;         /* may be given more than once (else the last one wins) */
} CliOption;

typedef struct CliCommand {
        const char *name;        /* "fs put" */
        const char *args;        /* "ID REMOTE [LOCAL|-]" */
        const char *summary;     /* one line, for the group's --help */
        const char *help;        /* paragraphs after the usage line */
        const CliOption *options;
        unsigned min_pos, max_pos;
        bool command_follows;    /* exec: after max_pos positionals, the rest (or what follows --) is argv */
        bool no_json;            /* --json makes no sense (raw output) */
        bool streams;            /* long transfers: no whole-request timeout */
} CliCommand;

typedef struct CliValue {
        int id;
        const char *value;       /* NULL for a flag */
} CliValue;

typedef struct CliArgs {
        const CliCommand *cmd;
        const char *url, *token, *token_file, *data_dir;
        bool json;
        const char **pos;
        unsigned n_pos;
        char **rest;             /* the command of `exec`, NULL-terminated */
        unsigned n_rest;
        CliValue *values;        /* the command's own options, in order */
        unsigned n_values;
        bool help;
} CliArgs;

/* Parses ARGV (the words after the command's name) against CMD. Returns 0, or CLI_EXIT_USAGE
 * after printing the problem. --help sets args->help (the caller prints it and exits 0). */
int cli_parse(const CliCommand *cmd, int argc, char **argv, CliArgs *args);
void cli_args_done(CliArgs *args);

void cli_print_help(const CliCommand *cmd, FILE *f);

/* The value of the last OPTION given, or NULL; whether a flag was given. */
const char *cli_value(const CliArgs *a, int id);
bool cli_flag(const CliArgs *a, int id);

/* "sandloom: CODE: message" on stderr. Returns CLI_EXIT_ERROR. */
int cli_error(const char *code, const char *fmt, ...) _printf_(2, 3);
/* "sandloom CMD: message (see `sandloom CMD --help`)" on stderr. Returns CLI_EXIT_USAGE. */
int cli_usage_error(const CliArgs *a, const char *fmt, ...) _printf_(2, 3);
/* The error of an HTTP answer: its code and message (STATUS 0: not shown). Returns CLI_EXIT_ERROR. */
int cli_http_error(long status, const json_t *body);
/* The error of a request that got no answer (R < 0, ERR from the client). Returns CLI_EXIT_ERROR. */
int cli_request_error(int r, const char *err);

/* Opens the client from --url/--token/--token-file/--data-dir and the environment. TIMEOUT_MS as
 * in ClientOptions. Returns 0 or CLI_EXIT_ERROR after printing why. */
int cli_connect(const CliArgs *a, long timeout_ms, Client **ret);

/* One JSON call; a non-2xx answer or no answer is printed and gives CLI_EXIT_ERROR; on success
 * *ret (may be NULL) is the body. */
int cli_call(Client *c, const char *method, const char *path, json_t *body, json_t **ret);

/* The sandbox's current generation (GET /api/v1/sandboxes/ID). Returns 0 or CLI_EXIT_ERROR. */
int cli_sandbox_generation(Client *c, const char *id, uint64_t *ret);

/* Every page of a list answer (PATH with or without a query string; "offset=" is appended) with
 * the items under KEY in one array; *ret_first (may be NULL) is the first page's answer. */
int cli_fetch_all(Client *c, const char *path, const char *key, json_t **ret_items, json_t **ret_first);

/* "/api/v1/sandboxes/<escaped ID>" + SUFFIX (may be ""). NULL on OOM. */
char *cli_sandbox_path(const char *id, const char *suffix);

/* Pretty JSON on stdout with a newline. Returns 0 or CLI_EXIT_ERROR. */
int cli_print_json(const json_t *j);
/* "key: value" lines for the fields of an object (nested values as compact JSON). */
void cli_print_fields(const json_t *obj, FILE *f);
/* A value as text for a table cell ("-" for null/absent). Writes into BUF. */
const char *cli_cell(const json_t *v, char *buf, size_t buflen);

typedef int (*CliRun)(CliArgs *a, Client *c);

typedef struct CliVerb {
        const CliCommand *cmd;
        CliRun run;
} CliVerb;

/* Parses, answers --help, connects, runs. Returns the exit status. */
int cli_run(const CliCommand *cmd, CliRun run, int argc, char **argv);

/* `sandloom GROUP VERB ...`: VERBS[i].cmd->name is "GROUP VERB". */
int cli_dispatch(const char *group, const char *group_help, const CliVerb *verbs, size_t n, int argc, char **argv);

/* The commands, called from main.c's table with the words after their own name. */
int cli_sandbox_main(int argc, char **argv);
int cli_exec_main(int argc, char **argv);
int cli_fs_main(int argc, char **argv);
