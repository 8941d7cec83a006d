/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "daemon.h"
#include "bench.h"
#include "cli.h"
#include "doctor.h"
#include "mcp-stdio.h"

/* `sandloom <command> [args]`: one binary, subcommands in a table. */

static int cmd_serve(int argc, char **argv) {
        return daemon_run(argc, argv);
}

static int cmd_config_doc(int argc, char **argv) {
        config_print_markdown(stdout);
        return 0;
}

static int cmd_doctor(int argc, char **argv) {
        return doctor_main(argc, argv);
}

static int cmd_version(int argc, char **argv) {
        printf("sandloom %s\n", SANDLOOM_VERSION_STRING);
        return 0;
}

static const struct {
        const char *name;
        int (*run)(int argc, char **argv);
        const char *help;
} commands[] = {
        { "serve", cmd_serve, "Run the daemon (see `sandloom serve --help`)." },
        { "bench", bench_main, "Measure a deployment: latency, throughput, creation, memory (see `sandloom bench --help`)." },
        { "sandbox", cli_sandbox_main, "Create, list, show, release sandboxes (see `sandloom sandbox --help`)." },
        { "exec", cli_exec_main, "Run a command in a sandbox, streaming its output (see `sandloom exec --help`)." },
        { "fs", cli_fs_main, "Read and write a sandbox's files (see `sandloom fs --help`)." },
        { "mcp", mcp_stdio_main, "Serve MCP over stdio, bridged to the daemon (see `sandloom mcp --help`, docs/MCP.md)." },
        { "doctor", cmd_doctor, "Check whether this host can run the daemon (see `sandloom doctor --help`)." },
        { "config-doc", cmd_config_doc, "Print the configuration reference (docs/CONFIGURATION.md) as Markdown." },
        { "version", cmd_version, "Print the version." },
};

static void usage(FILE *f) {
        fprintf(f, "Usage: sandloom COMMAND [OPTIONS]\n\nCommands:\n");
        for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
                fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].help);
        fprintf(f, "  %-12s %s\n", "help", "Show this help.");
}

int main(int argc, char **argv) {
        const char *cmd = argc > 1 ? argv[1] : NULL;

        if (!cmd) {
                usage(stderr);
                return 2;
        }
        if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
                usage(stdout);
                return 0;
        }
        if (!strcmp(cmd, "--version"))
                return cmd_version(0, NULL);
        for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
                if (!strcmp(cmd, commands[i].name))
                        return commands[i].run(argc - 2, argv + 2);
        fprintf(stderr, "sandloom: unknown command '%.64s'.\n\n", cmd);
        usage(stderr);
        return 2;
}
