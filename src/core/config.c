/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cgroup-limits.h"
#include "macros.h"
#include "parse-util.h"
#include "string-util.h"

#define KiB UINT64_C(1024)
#define MiB (1024 * KiB)
#define GiB (1024 * MiB)

static const char *const log_levels[] = { "debug", "info", "warning", "error", NULL };
static const char *const isolation_levels[] = { "auto", "basic", "standard", "strict", NULL };
static const char *const network_modes[] = { "none", "isolated", "host", NULL };
static const char *const runtimes[] = { "native", "bwrap", NULL };

#define FIELD(f) offsetof(Config, f)

const ConfigSetting config_settings[] = {
        { "SANDBOX_LISTEN", "--listen", CONFIG_STRING, "127.0.0.1:8080", 0, 0, NULL,
          "Address the HTTP API listens on, as HOST:PORT (IPv4 or [IPv6]).", FIELD(listen), false },
        { "SANDBOX_DATA_DIR", "--data-dir", CONFIG_STRING, "./data", 0, 0, NULL,
          "Directory for the database, workspaces, token and worker identity.", FIELD(data_dir), false },
        { "SANDBOX_WORKER_ID", "--worker-id", CONFIG_STRING, "", 0, 0, NULL,
          "This worker's id; empty = chosen on first start and kept in DATA/worker_id.", FIELD(worker_id), false },
        { "SANDBOX_WORKER_ENDPOINT", "--worker-endpoint", CONFIG_STRING, "", 0, 0, NULL,
          "URL other replicas and clients use to reach this worker; empty = http://LISTEN.", FIELD(worker_endpoint), false },
        { "SANDBOX_LOG_LEVEL", "--log-level", CONFIG_ENUM, "info", 0, 0, log_levels,
          "Least severe log level written to stderr.", FIELD(log_level), false },
        { "SANDBOX_HTTP_THREADS", "--http-threads", CONFIG_UINT, "0", 0, 256, NULL,
          "HTTP worker threads; 0 = twice the number of cores (at least 4).", FIELD(http_threads), false },
        { "SANDBOX_MAX_CONNECTIONS", "--max-connections", CONFIG_UINT, "1024", 16, 65536, NULL,
          "Most client connections open at once.", FIELD(max_connections), false },
        { "SANDBOX_HTTP_IDLE_TIMEOUT_SECONDS", "--http-idle-timeout-seconds", CONFIG_UINT, "120", 5, 3600, NULL,
          "A connection idle this long (no bytes either way) is closed.", FIELD(http_idle_timeout_seconds), false },
        { "SANDBOX_SSE_KEEPALIVE_SECONDS", "--sse-keepalive-seconds", CONFIG_UINT, "15", 0, 3600, NULL,
          "An exec event stream silent this long gets a `: keep-alive` comment; 0 = none.", FIELD(sse_keepalive_seconds), false },
        { "SANDBOX_MAX_FILE_API_BYTES", "--max-file-api-bytes", CONFIG_BYTES, "32M", 1024, 1 * GiB, NULL,
          "Largest file content in a JSON files-API call; JSON bodies may be 1 MiB larger.", FIELD(max_file_api_bytes), false },
        { "SANDBOX_MAX_UPLOAD_BYTES", "--max-upload-bytes", CONFIG_BYTES, "1G", 1024, 1024 * GiB, NULL,
          "Largest raw or archive upload (streamed to disk).", FIELD(max_upload_bytes), false },
        { "SANDBOX_MAX_ARCHIVE_ENTRIES", "--max-archive-entries", CONFIG_UINT, "100000", 1, 10000000, NULL,
          "Most entries accepted in one archive upload or produced by one download.", FIELD(max_archive_entries), false },
        { "SANDBOX_MAX_LIST_LIMIT", "--max-list-limit", CONFIG_UINT, "10000", 1, 1000000, NULL,
          "Largest `limit` a list call accepts.", FIELD(max_list_limit), false },
        { "SANDBOX_UID_START", "--uid-start", CONFIG_UINT, "1900000000", 1000, 4294967294u, NULL,
          "First uid (and gid) given to sandboxes.", FIELD(uid_start), false },
        { "SANDBOX_UID_END", "--uid-end", CONFIG_UINT, "1999999999", 1000, 4294967294u, NULL,
          "Last uid (and gid) given to sandboxes.", FIELD(uid_end), false },
        { "SANDBOX_UID_QUARANTINE_SECONDS", "--uid-quarantine-seconds", CONFIG_UINT, "300", 0, 86400 * 30, NULL,
          "How long a released sandbox uid rests before it may be given out again.", FIELD(uid_quarantine_seconds), false },
        { "SANDBOX_HOLD_WAIT_SECONDS", "--hold-wait-seconds", CONFIG_UINT, "30", 1, 3600, NULL,
          "How long a file call waits for a conflicting operation on the same sandbox.", FIELD(hold_wait_seconds), false },
        { "SANDBOX_SHUTDOWN_GRACE_SECONDS", "--shutdown-grace-seconds", CONFIG_UINT, "10", 0, 3600, NULL,
          "On SIGTERM, how long in-flight requests may run before the daemon exits.", FIELD(shutdown_grace_seconds), false },
        { "SANDBOX_SQLITE_BUSY_TIMEOUT_MS", "--sqlite-busy-timeout-ms", CONFIG_UINT, "5000", 0, 600000, NULL,
          "How long an SQLite statement waits for a lock.", FIELD(sqlite_busy_timeout_ms), false },
        { "SANDBOX_ISOLATION_LEVEL", "--isolation-level", CONFIG_ENUM, "auto", 0, 0, isolation_levels,
          "Isolation of commands; auto = the strongest level the start-up probe found working. An explicit level that fails the probe refuses start-up.", FIELD(isolation_level), false },
        { "SANDBOX_NETWORK_MODE", "--network-mode", CONFIG_ENUM, "none", 0, 0, network_modes,
          "none (or isolated): one loopback-only network namespace per sandbox; host: the worker's network, including its loopback services.", FIELD(network_mode), false },
        { "SANDBOX_RUNTIME", "--runtime", CONFIG_ENUM, "native", 0, 0, runtimes,
          "How commands are isolated: native (our own launcher) or bwrap (the host's bubblewrap, for hosts where the native launcher is not allowed; same guarantees, about 4 ms more per exec).", FIELD(runtime), false },
        { "SANDBOX_NETNS_LINGER_SECONDS", "--netns-linger-seconds", CONFIG_UINT, "30", 0, 86400, NULL,
          "How long a sandbox's network namespace outlives its last running exec.", FIELD(netns_linger_seconds), false },
        { "SANDBOX_TMPFS_BYTES", "--tmpfs-bytes", CONFIG_BYTES, "512M", 1024 * 1024, 1024 * GiB, NULL,
          "Size of each exec's private /tmp.", FIELD(tmpfs_bytes), false },
        { "SANDBOX_MAX_OPEN_FILES", "--max-open-files", CONFIG_UINT, "4096", 64, 1048576, NULL,
          "Open files per sandbox process (RLIMIT_NOFILE).", FIELD(max_open_files), false },
        { "SANDBOX_MEMORY_LIMIT_BYTES", "--memory-limit-bytes", CONFIG_BYTES, "1G", 0, 1024 * 1024 * GiB, NULL,
          "Memory of a whole sandbox (all its concurrent execs, page cache and tmpfs included; swap too where the host counts it), enforced by its cgroup, else sampled (SANDBOX_SAMPLE_INTERVAL_MS); a resolve may ask for its own (limits.memory_bytes); 0 = unlimited.", FIELD(memory_limit_bytes), false },
        { "SANDBOX_MAX_PROCESSES", "--max-processes", CONFIG_UINT, "256", 0, 4194304, NULL,
          "Processes and threads of a whole sandbox (cgroup pids.max; without one RLIMIT_NPROC of its uid, and sampled); a resolve may ask for its own (limits.max_processes); 0 = unlimited.", FIELD(max_processes), false },
        { "SANDBOX_SAMPLE_INTERVAL_MS", "--sample-interval-ms", CONFIG_UINT, "200", 10, 10000, NULL,
          "Where no cgroup limits a sandbox's memory or processes: how often the sampling supervisor sums each sandbox uid's memory and processes and kills those over their limit.", FIELD(sample_interval_ms), false },
        { "SANDBOX_MAX_MEMORY_LIMIT_BYTES", "--max-memory-limit-bytes", CONFIG_BYTES, "0", 0, 1024 * 1024 * GiB, NULL,
          "Largest limits.memory_bytes a resolve may ask for (more: 422 SANDBOX_LIMIT_EXCEEDS_MAXIMUM); 0 = SANDBOX_MEMORY_LIMIT_BYTES is the maximum.", FIELD(max_memory_limit_bytes), false },
        { "SANDBOX_MAX_PROCESSES_LIMIT", "--max-processes-limit", CONFIG_UINT, "0", 0, 4194304, NULL,
          "Largest limits.max_processes a resolve may ask for; 0 = SANDBOX_MAX_PROCESSES is the maximum.", FIELD(max_processes_limit), false },
        { "SANDBOX_MAX_CPU_QUOTA", "--max-cpu-quota", CONFIG_STRING, "", 0, 0, NULL,
          "Largest limits.cpu_quota (cores) a resolve may ask for; empty = SANDBOX_CPU_QUOTA is the maximum.", FIELD(max_cpu_quota), false },
        { "SANDBOX_MAX_DISK_QUOTA_BYTES", "--max-disk-quota-bytes", CONFIG_BYTES, "0", 0, 1024 * 1024 * GiB, NULL,
          "Largest limits.disk_quota_bytes a resolve may ask for; 0 = SANDBOX_DISK_QUOTA_BYTES is the maximum.", FIELD(max_disk_quota_bytes), false },
        { "SANDBOX_CPU_QUOTA", "--cpu-quota", CONFIG_STRING, "", 0, 0, NULL,
          "CPU of a whole sandbox in cores, as a decimal (0.5, 2); empty or 0 = unlimited.", FIELD(cpu_quota), false },
        { "SANDBOX_CPU_SECONDS", "--cpu-seconds", CONFIG_UINT, "0", 0, 86400 * 365, NULL,
          "CPU seconds per sandbox process (RLIMIT_CPU); 0 = unlimited.", FIELD(cpu_seconds), false },
        { "SANDBOX_MAX_FILE_SIZE_BYTES", "--max-file-size-bytes", CONFIG_BYTES, "0", 0, 1024 * 1024 * GiB, NULL,
          "Largest file a sandbox process may write (RLIMIT_FSIZE); 0 = unlimited.", FIELD(max_file_size_bytes), false },
        { "SANDBOX_DEFAULT_TIMEOUT_SECONDS", "--default-timeout-seconds", CONFIG_UINT, "300", 1, 86400, NULL,
          "Timeout of an exec that does not set timeout_seconds.", FIELD(default_timeout_seconds), false },
        { "SANDBOX_MAX_OUTPUT_BYTES", "--max-output-bytes", CONFIG_BYTES, "8M", 1024, 1 * GiB, NULL,
          "Output kept per stream (stdout, stderr) of one exec; past it the exec runs on and `truncated` is set.", FIELD(max_output_bytes), false },
        { "SANDBOX_TERMINATE_GRACE_SECONDS", "--terminate-grace-seconds", CONFIG_UINT, "5", 0, 3600, NULL,
          "After a timeout or cancel, how long the tree has between SIGTERM and SIGKILL.", FIELD(terminate_grace_seconds), false },
        { "SANDBOX_MAX_PARALLEL_EXECS_PER_SANDBOX", "--max-parallel-execs-per-sandbox", CONFIG_UINT, "16", 1, 4096, NULL,
          "Execs one sandbox may run at once; more get 429 SANDBOX_PARALLEL_EXEC_LIMIT.", FIELD(max_parallel_execs_per_sandbox), false },
        { "SANDBOX_MAX_RUNNING_EXECS", "--max-running-execs", CONFIG_UINT, "64", 1, 65536, NULL,
          "Execs this worker runs at once; more wait in the admission queue.", FIELD(max_running_execs), false },
        { "SANDBOX_ADMISSION_QUEUE_LENGTH", "--admission-queue-length", CONFIG_UINT, "256", 0, 65536, NULL,
          "Exec requests that may wait for a free slot; more get 503 SANDBOX_WORKER_BUSY at once.", FIELD(admission_queue_length), false },
        { "SANDBOX_ADMISSION_TIMEOUT_SECONDS", "--admission-timeout-seconds", CONFIG_UINT, "10", 1, 3600, NULL,
          "How long a queued exec request waits for a slot before 503 SANDBOX_WORKER_BUSY.", FIELD(admission_timeout_seconds), false },
        { "SANDBOX_EXEC_RETENTION_SECONDS", "--exec-retention-seconds", CONFIG_UINT, "1296000", 60, 3650u * 86400u, NULL,
          "How long finished exec records and their output are kept.", FIELD(exec_retention_seconds), false },
        { "SANDBOX_DISK_HIGH_WATERMARK_PERCENT", "--disk-high-watermark-percent", CONFIG_UINT, "90", 1, 100, NULL,
          "Use% of the data directory's filesystem (as df shows it) above which new sandboxes, uploads and execs get 503 SANDBOX_WORKER_DISK_PRESSURE; 100 = off.", FIELD(disk_high_watermark_percent), false },
        { "SANDBOX_MIN_FREE_BYTES", "--min-free-bytes", CONFIG_BYTES, "1G", 0, 1024 * 1024 * GiB, NULL,
          "Free bytes on the data directory's filesystem below which new sandboxes, uploads and execs get 503 SANDBOX_WORKER_DISK_PRESSURE; 0 = off.", FIELD(min_free_bytes), false },
        { "SANDBOX_DISK_QUOTA_BYTES", "--disk-quota-bytes", CONFIG_BYTES, "0", 0, 1024 * 1024 * GiB, NULL,
          "Disk space of one sandbox: a project quota where the data filesystem enforces them (XFS prjquota, ext4 project+prjquota), else soft (writes and execs refused with 507 SANDBOX_DISK_QUOTA_EXCEEDED, running execs cancelled); 0 = none.", FIELD(disk_quota_bytes), false },
        { "SANDBOX_DISK_USAGE_REFRESH_SECONDS", "--disk-usage-refresh-seconds", CONFIG_UINT, "5", 1, 3600, NULL,
          "How often a sandbox's disk usage is measured by walking its files when no project quota counts it.", FIELD(disk_usage_refresh_seconds), false },
        { "SANDBOX_MCP_ALLOWED_HOSTS", "--mcp-allowed-hosts", CONFIG_STRING, "", 0, 0, NULL,
          "Host names (optionally host:port) the MCP endpoint accepts in Host and Origin headers, comma-separated, against DNS rebinding; empty = localhost, 127.0.0.1, [::1], the listen address and the worker endpoint's host; * = any. Others get 403.", FIELD(mcp_allowed_hosts), false },
        { "SANDBOX_MCP_EXEC_WAIT_SECONDS", "--mcp-exec-wait-seconds", CONFIG_UINT, "45", 1, 3600, NULL,
          "How long the MCP tools sandbox_exec and sandbox_exec_status wait for a command before answering with its RUNNING record (MCP clients commonly give up on a request after 60 s).", FIELD(mcp_exec_wait_seconds), false },
        { "SANDBOX_INTERNAL_TOKEN", NULL, CONFIG_STRING, "", 0, 0, NULL,
          "Bearer token for the API (environment only). Unset: read DATA/token, or create it on first start.",
          FIELD(internal_token), true },
        { "SANDBOX_INTERNAL_TOKEN_FILE", NULL, CONFIG_STRING, "", 0, 0, NULL,
          "File holding the bearer token (environment only); used when SANDBOX_INTERNAL_TOKEN is unset.",
          FIELD(internal_token_file), false },
};
const size_t config_settings_count = ELEMENTSOF(config_settings);

static char **field_str(Config *c, const ConfigSetting *s) {
        return (char **) ((char *) c + s->offset);
}
static uint64_t *field_u64(Config *c, const ConfigSetting *s) {
        return (uint64_t *) ((char *) c + s->offset);
}

/* Parses VALUE for S into C. SOURCE says where it came from, for the error sentence;
 * secrets never have their value echoed. */
static int apply(Config *c, const ConfigSetting *s, const char *value, const char *source, char *err, size_t errlen) {
        uint64_t v;
        int r;

        switch (s->type) {
        case CONFIG_STRING: {
                char *copy = strdup(value);
                if (!copy)
                        return -ENOMEM;
                free(*field_str(c, s));
                *field_str(c, s) = copy;
                return 0;
        }
        case CONFIG_ENUM:
                for (const char *const *ch = s->choices; *ch; ch++)
                        if (streq(*ch, value)) {
                                char *copy = strdup(value);
                                if (!copy)
                                        return -ENOMEM;
                                free(*field_str(c, s));
                                *field_str(c, s) = copy;
                                return 0;
                        }
                (void) bsprintf(err, errlen, "%s (%s) must be one of the documented choices, see --help.",
                                s->env, source);
                return -EINVAL;
        case CONFIG_UINT:
        case CONFIG_BYTES:
                r = s->type == CONFIG_UINT ? parse_u64(value, &v) : parse_bytes(value, &v);
                if (r < 0) {
                        (void) bsprintf(err, errlen, "%s (%s) must be %s.", s->env, source,
                                        s->type == CONFIG_UINT ? "a whole number" : "a byte count such as 1048576 or 32M");
                        return -EINVAL;
                }
                if (v < s->min || v > s->max) {
                        (void) bsprintf(err, errlen, "%s (%s) must be between %" PRIu64 " and %" PRIu64 ".", s->env,
                                        source, s->min, s->max);
                        return -EINVAL;
                }
                *field_u64(c, s) = v;
                return 0;
        }
        return -EINVAL;
}

static const ConfigSetting *find_flag(const char *flag, size_t len) {
        for (size_t i = 0; i < config_settings_count; i++) {
                const char *f = config_settings[i].flag;
                if (f && strlen(f) == len && strneq(f, flag, len))
                        return &config_settings[i];
        }
        return NULL;
}

int config_load(Config *c, int argc, char *const *argv, FILE *out, char *err, size_t errlen) {
        int r;

        *c = (Config) {};
        for (size_t i = 0; i < config_settings_count; i++) {
                r = apply(c, &config_settings[i], config_settings[i].def, "default", err, errlen);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < config_settings_count; i++) {
                const char *v = getenv(config_settings[i].env);
                if (v) {
                        r = apply(c, &config_settings[i], v, "environment", err, errlen);
                        if (r < 0)
                                return r;
                }
        }
        for (int i = 0; i < argc; i++) {
                const char *a = argv[i], *eq, *value;
                const ConfigSetting *s;

                if (streq(a, "--help") || streq(a, "-h")) {
                        config_print_help(out);
                        return 1;
                }
                if (!startswith(a, "--")) {
                        (void) bsprintf(err, errlen, "Unexpected argument '%.64s'; see --help.", a);
                        return -EINVAL;
                }
                eq = strchr(a, '=');
                s = find_flag(a, eq ? (size_t) (eq - a) : strlen(a));
                if (!s) {
                        /* Secrets are environment-only: say so rather than "unknown". */
                        if (startswith(a, "--internal-token"))
                                (void) bsprintf(err, errlen,
                                                "The token is never a flag (flags show in /proc/*/cmdline); set "
                                                "SANDBOX_INTERNAL_TOKEN or SANDBOX_INTERNAL_TOKEN_FILE.");
                        else
                                (void) bsprintf(err, errlen, "Unknown option '%.*s'; see --help.",
                                                (int) MIN(strcspn(a, "="), (size_t) 64), a);
                        return -EINVAL;
                }
                if (eq)
                        value = eq + 1;
                else if (i + 1 < argc)
                        value = argv[++i];
                else {
                        (void) bsprintf(err, errlen, "Option %s needs a value.", s->flag);
                        return -EINVAL;
                }
                r = apply(c, s, value, s->flag, err, errlen);
                if (r < 0)
                        return r;
        }
        return config_validate(c, err, errlen);
}

int config_validate(const Config *c, char *err, size_t errlen) {
        uint64_t millicores;

        if (cgroup_limits_parse_cpu_quota(c->max_cpu_quota, &millicores) < 0) {
                (void) bsprintf(err, errlen, "SANDBOX_MAX_CPU_QUOTA must be a number of cores such as 0.5 or 2 (at most 3 decimals), or empty.");
                return -EINVAL;
        }
        if (c->uid_start > c->uid_end) {
                (void) bsprintf(err, errlen, "SANDBOX_UID_START must not be greater than SANDBOX_UID_END.");
                return -EINVAL;
        }
        if (isempty(c->listen) || !strchr(c->listen, ':')) {
                (void) bsprintf(err, errlen, "SANDBOX_LISTEN must be HOST:PORT, for example 127.0.0.1:8080.");
                return -EINVAL;
        }
        if (isempty(c->data_dir)) {
                (void) bsprintf(err, errlen, "SANDBOX_DATA_DIR must not be empty.");
                return -EINVAL;
        }
        if (c->worker_id && strlen(c->worker_id) > 0 &&
            !str_in_charset(c->worker_id,
                            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:-", 1, 64)) {
                (void) bsprintf(err, errlen, "SANDBOX_WORKER_ID must be 1-64 characters of A-Z a-z 0-9 _ . : -.");
                return -EINVAL;
        }
        return 0;
}

void config_free(Config *c) {
        for (size_t i = 0; i < config_settings_count; i++) {
                const ConfigSetting *s = &config_settings[i];
                if (s->type == CONFIG_STRING || s->type == CONFIG_ENUM) {
                        char **p = field_str(c, s);
                        if (*p && s->secret)
                                explicit_zero(*p, strlen(*p));
                        free(*p);
                        *p = NULL;
                }
        }
}

static void print_choices(FILE *out, const ConfigSetting *s) {
        for (const char *const *ch = s->choices; *ch; ch++)
                fprintf(out, "%s%s", ch == s->choices ? "" : "|", *ch);
}

void config_print_help(FILE *out) {
        fprintf(out, "Usage: sandloom serve [OPTIONS]\n\n"
                     "Runs the sandloom daemon. Every option can also be set by its environment variable;\n"
                     "a flag wins over the environment.\n\nOptions:\n");
        for (size_t i = 0; i < config_settings_count; i++) {
                const ConfigSetting *s = &config_settings[i];
                if (s->flag)
                        fprintf(out, "  %s ", s->flag);
                else
                        fprintf(out, "  (environment only) ");
                if (s->type == CONFIG_ENUM)
                        print_choices(out, s);
                else
                        fputs(s->type == CONFIG_STRING ? "TEXT" : s->type == CONFIG_BYTES ? "BYTES" : "N", out);
                fprintf(out, "\n      %s\n      env %s", s->help, s->env);
                if (!s->secret && !isempty(s->def))
                        fprintf(out, ", default %s", s->def);
                if (s->type == CONFIG_UINT)
                        fprintf(out, ", range %" PRIu64 "-%" PRIu64, s->min, s->max);
                fputc('\n', out);
        }
        fprintf(out, "  -h, --help\n      Show this help.\n");
}

void config_print_markdown(FILE *out) {
        fprintf(out, "# Configuration\n\n"
                     "<!-- Generated by `sandloom config-doc` from the table in src/core/config.c; do not edit. -->\n\n"
                     "Every setting is an environment variable and (except secrets) a flag of `sandloom serve`;\n"
                     "a flag wins over the environment. A bad value refuses start-up with a sentence naming the\n"
                     "setting. Byte sizes accept a plain number or a K/M/G/T suffix (binary units).\n\n"
                     "| environment | flag | type | default | allowed | meaning |\n"
                     "|---|---|---|---|---|---|\n");
        for (size_t i = 0; i < config_settings_count; i++) {
                const ConfigSetting *s = &config_settings[i];
                fprintf(out, "| `%s` | %s%s%s | %s | %s%s%s | ", s->env, s->flag ? "`" : "",
                        s->flag ? s->flag : "(environment only)", s->flag ? "`" : "",
                        s->type == CONFIG_STRING ? "text" : s->type == CONFIG_BYTES ? "bytes" : s->type == CONFIG_UINT ? "integer" : "choice",
                        isempty(s->def) ? "" : "`", isempty(s->def) ? "(empty)" : s->def, isempty(s->def) ? "" : "`");
                if (s->type == CONFIG_ENUM)
                        print_choices(out, s);
                else if (s->type == CONFIG_UINT || s->type == CONFIG_BYTES)
                        fprintf(out, "%" PRIu64 "–%" PRIu64, s->min, s->max);
                fprintf(out, " | %s |\n", s->help);
        }
}

char *config_value_string(const Config *c, const ConfigSetting *s) {
        const void *p = (const char *) c + s->offset;

        if (s->secret)
                return strdup(*(char *const *) p && **(char *const *) p ? "(set)" : "(unset)");
        if (s->type == CONFIG_STRING || s->type == CONFIG_ENUM)
                return strdup(*(char *const *) p ? *(char *const *) p : "");
        return strprintf("%" PRIu64, *(const uint64_t *) p);
}
