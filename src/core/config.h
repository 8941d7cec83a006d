/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Every setting of the daemon. The one table in config.c defines each of them once:
 * name, environment variable, flag, type, default, bounds and help. Parsing, `serve --help`,
 * docs/CONFIGURATION.md and the /healthz report are generated from it. */
typedef struct Config {
        char *listen;                 /* HOST:PORT */
        char *data_dir;
        char *worker_id;              /* "" = chosen on first start, kept in DATA/worker_id */
        char *worker_endpoint;        /* "" = http://<listen> */
        char *log_level;
        uint64_t http_threads;        /* 0 = from the number of cores */
        uint64_t max_connections;
        uint64_t http_idle_timeout_seconds;
        uint64_t sse_keepalive_seconds; /* 0 = no keep-alive comments */
        uint64_t max_file_api_bytes;
        uint64_t max_upload_bytes;
        uint64_t max_archive_entries;
        uint64_t max_list_limit;
        uint64_t uid_start;
        uint64_t uid_end;
        uint64_t uid_quarantine_seconds;
        uint64_t hold_wait_seconds;
        uint64_t shutdown_grace_seconds;
        uint64_t sqlite_busy_timeout_ms;
        char *isolation_level;        /* auto|basic|standard|strict */
        char *network_mode;           /* none|isolated|host */
        char *runtime;                /* native|bwrap (SANDBOX_RUNTIME) */
        uint64_t netns_linger_seconds;
        uint64_t tmpfs_bytes;
        uint64_t max_open_files;
        uint64_t memory_limit_bytes;  /* 0 = unlimited */
        uint64_t max_processes;       /* 0 = unlimited */
        uint64_t sample_interval_ms;  /* the sampling supervisor's period (sampler.h) */
        /* What a resolve may ask for in "limits" (sandbox-limits.h); 0/"" = the default is the maximum. */
        uint64_t max_memory_limit_bytes;
        uint64_t max_processes_limit;
        char *max_cpu_quota;
        uint64_t max_disk_quota_bytes;
        char *cpu_quota;              /* cores as a decimal; "" or 0 = unlimited */
        uint64_t cpu_seconds;         /* 0 = unlimited */
        uint64_t max_file_size_bytes; /* 0 = unlimited */
        uint64_t default_timeout_seconds;
        uint64_t max_output_bytes;
        uint64_t terminate_grace_seconds;
        uint64_t max_parallel_execs_per_sandbox;
        uint64_t max_running_execs;
        uint64_t admission_queue_length;
        uint64_t admission_timeout_seconds;
        uint64_t exec_retention_seconds;
        uint64_t disk_high_watermark_percent; /* Use% of the data filesystem above which writes are refused */
        uint64_t min_free_bytes;      /* free bytes below which writes are refused */
        uint64_t disk_quota_bytes;    /* per sandbox; 0 = none */
        uint64_t disk_usage_refresh_seconds;
        char *mcp_allowed_hosts;      /* MCP: hosts/origins allowed (comma-separated); "" = the local defaults */
        uint64_t mcp_exec_wait_seconds; /* MCP: how long sandbox_exec waits before answering RUNNING */

        /* Secrets: environment or file only, never a flag; never printed. */
        char *internal_token;
        char *internal_token_file;
} Config;

typedef enum {
        CONFIG_STRING,
        CONFIG_UINT,
        CONFIG_BYTES,
        CONFIG_ENUM,
} ConfigType;

typedef struct ConfigSetting {
        const char *env;              /* SANDBOX_... */
        const char *flag;             /* --... or NULL for secrets */
        ConfigType type;
        const char *def;              /* default, as text */
        uint64_t min, max;            /* for UINT/BYTES */
        const char *const *choices;   /* for ENUM, NULL-terminated */
        const char *help;
        size_t offset;                /* into Config */
        bool secret;
} ConfigSetting;

extern const ConfigSetting config_settings[];
extern const size_t config_settings_count;

/* Fills C from defaults, then the environment, then ARGV (flags of `serve`). On a bad value
 * returns -EINVAL with one sentence naming the setting in ERRBUF. Returns 1 if --help was
 * given (help printed to OUT). */
int config_load(Config *c, int argc, char *const *argv, FILE *out, char *errbuf, size_t errlen);

/* Cross-setting checks (uid range order, ...). */
int config_validate(const Config *c, char *errbuf, size_t errlen);

void config_free(Config *c);

void config_print_help(FILE *out);
void config_print_markdown(FILE *out);

/* The effective value of SETTING as text (secrets redacted), caller frees. */
char *config_value_string(const Config *c, const ConfigSetting *setting);
