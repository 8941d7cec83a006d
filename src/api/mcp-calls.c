/* SPDX-License-Identifier: MIT */
/* The MCP tools: each one calls the same core functions as its HTTP route (core/sandbox.c,
 * core/files*.c, core/exec*.c) with the same checks, and answers the record the route would
 * answer (Sandloom's MCP fields where they differ). Arguments arrive validated against the
 * tool's parameter table (mcp-tools.c); what only the core can judge (paths, cwd) comes back
 * as an Error. Runs on a job-pool thread (the route is ROUTE_OFFLOAD: file calls may wait for
 * a sandbox hold); a command still running is answered later from the exec engine's pump
 * thread, the HTTP request parked meanwhile. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "disk.h"
#include "exec-env.h"
#include "exec.h"
#include "files.h"
#include "json-util.h"
#include "macros.h"
#include "mcp.h"
#include "sandbox.h"
#include "string-util.h"
#include "utf8.h"


/* --- arguments (validated: types and bounds hold) --- */

static const char *arg_str(McpCall *c, const char *name) {
        return json_string_value(json_object_get(c->args, name));
}

static uint64_t arg_u64(McpCall *c, const char *name, uint64_t def) {
        json_t *v = json_object_get(c->args, name);

        return json_is_integer(v) ? (uint64_t) json_integer_value(v) : def;
}

static bool arg_bool(McpCall *c, const char *name, bool def) {
        json_t *v = json_object_get(c->args, name);

        return json_is_boolean(v) ? json_is_true(v) : def;
}

/* --- outcomes --- */

static int fail(McpCall *c, int r, const char *what) {
        if (!error_is_set(&c->error))
                error_fill_internal(&c->error, r, what);
        return 0;
}

static int answer(McpCall *c, json_t *o) {
        if (!o)
                return fail(c, -ENOMEM, "building the answer");
        c->structured = o;
        return 0;
}

static int invalid(McpCall *c, const char *field, const char *msg) {
        (void) error_set(&c->error, -EINVAL, 422, "SANDBOX_INVALID_REQUEST", "Invalid arguments for this tool: %s: %s",
                         field, msg);
        return 0;
}

/* A path argument as a canonical sandbox path: 422 (invalid arguments) for a malformed one,
 * 400 SANDBOX_PATH_OUTSIDE_WORKSPACE for one outside the four roots. */
static int canonical_path(McpCall *c, const char *field, const char *raw, char out[static PATH_MAX]) {
        Error e = ERROR_INIT;
        int r;

        r = files_normalize_path(raw, strlen(raw), out, PATH_MAX, &e);
        if (r >= 0)
                return 0;
        if (e.status == 422)
                (void) error_set(&c->error, r, 422, "SANDBOX_INVALID_REQUEST", "Invalid arguments: %s: %s", field,
                                 e.message);
        else
                c->error = e;
        return r;
}

/* --- the runtime profile --- */

int mcp_profile_hash(const Daemon *d, char *buf, size_t n) {
        const Config *cfg = &d->config;
        const char *level = json_string_value(json_object_get(d->isolation_report, "level"));
        _cleanup_free_ char *canon = NULL;
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned len = 0;
        char hex[2 * EVP_MAX_MD_SIZE + 1];

        canon = strprintf("sandloom/%s\nlevel=%s\nruntime=%s\nnetwork=%s\ntmpfs=%" PRIu64 "\nnofile=%" PRIu64
                          "\nmemory=%" PRIu64 "\npids=%" PRIu64 "\ncpu=%s\ncpu_seconds=%" PRIu64 "\nfsize=%" PRIu64
                          "\ntimeout=%" PRIu64 "\noutput=%" PRIu64 "\ngrace=%" PRIu64 "\nquota=%" PRIu64 "\n",
                          SANDLOOM_VERSION_STRING, level ? level : "none", cfg->runtime, cfg->network_mode,
                          cfg->tmpfs_bytes, cfg->max_open_files, cfg->memory_limit_bytes, cfg->max_processes,
                          cfg->cpu_quota ? cfg->cpu_quota : "", cfg->cpu_seconds, cfg->max_file_size_bytes,
                          cfg->default_timeout_seconds, cfg->max_output_bytes, cfg->terminate_grace_seconds,
                          cfg->disk_quota_bytes);
        if (!canon)
                return -ENOMEM;
        if (EVP_Digest(canon, strlen(canon), md, &len, EVP_sha256(), NULL) != 1)
                return -EIO;
        for (unsigned i = 0; i < len; i++)
                (void) bsprintf(hex + 2 * i, 3, "%02x", md[i]);
        return bsprintf(buf, n, "sha256:%s", hex);
}

int mcp_call_profile(McpCall *c) {
        Daemon *d = c->daemon;
        _cleanup_json_ json_t *list = NULL, *execs = NULL, *caps = NULL;
        Error ignored = ERROR_INIT;
        char hash[80] = "";
        json_int_t live = 0, running = 0;
        const char *level;

        (void) mcp_profile_hash(d, hash, sizeof hash);
        if (sandbox_list(d, c->principal, NULL, SANDBOX_FILTER_LIVE, 1, 0, &list, &ignored) >= 0)
                live = json_integer_value(json_object_get(list, "total"));
        execs = exec_engine_report(d->execs);
        running = json_integer_value(json_object_get(execs, "running"));
        level = json_string_value(json_object_get(d->isolation_report, "level"));
        caps = json_pack("{s:o, s:O?, s:{s:I, s:I, s:s, s:I, s:I, s:I, s:I}}",
                         "isolation", d->isolation_report ? json_deep_copy(d->isolation_report) : json_null(),
                         "execs", execs,
                         "limits",
                         "memory_limit_bytes", (json_int_t) d->config.memory_limit_bytes,
                         "max_processes", (json_int_t) d->config.max_processes,
                         "cpu_quota", d->config.cpu_quota ? d->config.cpu_quota : "",
                         "default_timeout_seconds", (json_int_t) d->config.default_timeout_seconds,
                         "max_output_bytes", (json_int_t) d->config.max_output_bytes,
                         "max_file_api_bytes", (json_int_t) d->config.max_file_api_bytes,
                         "mcp_exec_wait_seconds", (json_int_t) d->config.mcp_exec_wait_seconds);
        return answer(c, json_pack("{s:s, s:s, s:s, s:s, s:b, s:s, s:b, s:I, s:I, s:O?}",
                                   "profile_id", "default",
                                   "profile_hash", hash,
                                   "version", SANDLOOM_VERSION_STRING,
                                   "transport", "streamable-http",
                                   "stateless", 1,
                                   "worker_id", d->worker_id,
                                   "healthy", !atomic_load(&d->shutting_down) && level != NULL,
                                   "running_sessions", live,
                                   "running_execs", running,
                                   "capabilities", caps));
}

/* --- sandboxes --- */

/* The route record, with Sandloom's MCP names for the profile. */
static json_t *record_json(McpCall *c, const SandboxRecord *rec) {
        _cleanup_json_ json_t *o = sandbox_record_json(c->daemon, rec);
        char hash[80] = "";

        if (!o)
                return NULL;
        (void) mcp_profile_hash(c->daemon, hash, sizeof hash);
        if (json_object_set_new(o, "profile_id", json_string(rec->profile)) < 0 ||
            json_object_set_new(o, "profile_hash", json_string(hash)) < 0)
                return NULL;
        return TAKE_PTR(o);
}

int mcp_call_resolve(McpCall *c) {
        const char *id = arg_str(c, "sandbox_id"), *scope = arg_str(c, "workspace_scope_id");
        const char *profile = arg_str(c, "profile");
        SandboxRecord rec;
        int r;

        /* Under disk pressure only a resolve that creates is refused (as the HTTP route). */
        r = disk_admit(c->daemon->disk, NULL, NULL, &c->error);
        if (r < 0) {
                Error ignored = ERROR_INIT;

                if (sandbox_get(c->daemon, c->principal, id, &rec, &ignored) < 0 || rec.status == SANDBOX_RELEASED ||
                    rec.status == SANDBOX_RELEASING)
                        return 0;
                c->error = (Error) ERROR_INIT;
        }
        r = sandbox_resolve(c->daemon, c->principal, id, scope, profile, &rec, &c->error);
        if (r < 0)
                return fail(c, r, "resolving the sandbox");
        return answer(c, record_json(c, &rec));
}

int mcp_call_create(McpCall *c) {
        SandboxRecord rec;
        json_t *o;
        int r;

        r = sandbox_connect(c->daemon, c->principal, arg_str(c, "sandbox_id"), arg_u64(c, "generation", 0), &rec,
                            &c->error);
        if (r < 0)
                return fail(c, r, "creating the workspace");
        o = record_json(c, &rec);
        if (o && json_object_set_new(o, "uid", json_integer((json_int_t) rec.uid)) < 0)
                json_decref(TAKE_PTR(o));
        return answer(c, o);
}

int mcp_call_status(McpCall *c) {
        SandboxRecord rec;
        json_t *o, *usage;
        int r;

        r = sandbox_get(c->daemon, c->principal, arg_str(c, "sandbox_id"), &rec, &c->error);
        if (r < 0)
                return fail(c, r, "reading the sandbox");
        o = record_json(c, &rec);
        usage = o ? disk_sandbox_json(c->daemon->disk, &rec) : NULL;
        if (usage && json_object_set_new(o, "disk", usage) < 0)
                json_decref(TAKE_PTR(o));
        return answer(c, o);
}

int mcp_call_audit_get(McpCall *c) {
        const char *id = arg_str(c, "sandbox_id");
        _cleanup_json_ json_t *o = NULL;
        SandboxRecord rec;
        uint64_t limit;
        int r;

        limit = MIN(arg_u64(c, "limit", 100), MAX(c->daemon->config.max_list_limit, (uint64_t) 1));
        r = sandbox_audit(c->daemon, c->principal, id, limit, arg_u64(c, "offset", 0), &o, &c->error);
        if (r < 0)
                return fail(c, r, "reading the history");
        /* Sandloom's audit answer leads with the current state: add it. */
        if (sandbox_get(c->daemon, c->principal, id, &rec, &(Error) ERROR_INIT) >= 0 &&
            (json_object_set_new(o, "workspace_scope_id", json_string(rec.workspace_scope_id)) < 0 ||
             json_object_set_new(o, "generation", json_integer((json_int_t) rec.generation)) < 0 ||
             json_object_set_new(o, "status", json_string(sandbox_status_to_string(rec.status))) < 0 ||
             json_object_set_new(o, "lifecycle_count", json_integer((json_int_t) rec.lifecycle_count)) < 0))
                return fail(c, -ENOMEM, "building the answer");
        return answer(c, TAKE_PTR(o));
}

int mcp_call_release(McpCall *c) {
        const char *id = arg_str(c, "sandbox_id");
        bool known = false;
        int r;

        r = sandbox_release(c->daemon, c->principal, id, arg_str(c, "reason"), &known, &c->error);
        if (r < 0)
                return fail(c, r, "releasing the sandbox");
        /* RELEASED for an unknown id too: releasing is idempotent (as Sandloom). */
        return answer(c, json_pack("{s:s, s:s}", "sandbox_id", id, "status", "RELEASED"));
}

/* --- files --- */

/* Opens the sandbox for one file operation on PATH (and PATH2), taking the hold. GROWS: the
 * operation makes the sandbox's data grow, so the disk watermarks and quota apply. */
static int open_files(McpCall *c, HoldKind kind, const char *path, const char *path2, bool grows,
                      SandboxHandle **ret) {
        _cleanup_(sandbox_handle_closep) SandboxHandle *h = NULL;
        int r;

        r = sandbox_open(c->daemon, c->principal, arg_str(c, "sandbox_id"), arg_u64(c, "generation", 0), kind, path,
                         path2, &h, &c->error);
        if (r < 0)
                return r;
        if (grows) {
                r = disk_admit(c->daemon->disk, h->record.owner, h->record.sandbox_id, &c->error);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(h);
        return 0;
}

static json_t *path_ok_json(McpCall *c, const char *canon) {
        return json_pack("{s:s, s:I, s:s, s:s}", "sandbox_id", arg_str(c, "sandbox_id"), "generation",
                         (json_int_t) arg_u64(c, "generation", 0), "status", "ok", "path", canon);
}

static int too_large(McpCall *c, uint64_t max) {
        (void) error_set(&c->error, -EFBIG, 413, "SANDBOX_FILE_TOO_LARGE",
                         "content is larger than %" PRIu64 " bytes (SANDBOX_MAX_FILE_API_BYTES); write it in parts "
                         "or use the HTTP API's PUT .../files/raw", max);
        return 0;
}

int mcp_call_write_file(McpCall *c) {
        _cleanup_(sandbox_handle_closep) SandboxHandle *h = NULL;
        const char *text = arg_str(c, "content"), *b64 = arg_str(c, "content_base64");
        uint64_t max = c->daemon->config.max_file_api_bytes;
        _cleanup_free_ void *decoded = NULL;
        char canon[PATH_MAX];
        const void *data;
        size_t size;
        int r;

        if (!!text == !!b64)
                return invalid(c, "content", "give exactly one of content and content_base64");
        if (canonical_path(c, "path", arg_str(c, "path"), canon) < 0)
                return 0;
        if (b64) {
                r = base64_decode(b64, strlen(b64), (size_t) MIN(max, (uint64_t) SIZE_MAX), &decoded, &size);
                if (r == -EFBIG)
                        return too_large(c, max);
                if (r < 0)
                        return invalid(c, "content_base64", "must be standard base64");
                data = decoded;
        } else {
                data = text;
                size = strlen(text);
                if (size > max)
                        return too_large(c, max);
        }

        r = open_files(c, HOLD_FILE_WRITE, canon, NULL, true, &h);
        if (r < 0)
                return fail(c, r, "opening the sandbox");
        r = files_write(h, canon, data, size, arg_bool(c, "make_parents", false), &c->error);
        if (r < 0)
                return fail(c, r, "writing the file");
        sandbox_handle_touch(h);
        return answer(c, json_pack("{s:s, s:I, s:s, s:s, s:I}", "sandbox_id", arg_str(c, "sandbox_id"), "generation",
                                   (json_int_t) arg_u64(c, "generation", 0), "status", "WRITTEN", "path", canon,
                                   "size_bytes", (json_int_t) size));
}

int mcp_call_read_file(McpCall *c) {
        _cleanup_(sandbox_handle_closep) SandboxHandle *h = NULL;
        _cleanup_free_ char *data = NULL, *b64 = NULL;
        uint64_t max = c->daemon->config.max_file_api_bytes;
        size_t size = 0, b64_len = 0;
        char canon[PATH_MAX];
        json_t *text;
        int r;

        if (canonical_path(c, "path", arg_str(c, "path"), canon) < 0)
                return 0;
        r = open_files(c, HOLD_FILE_READ, canon, NULL, false, &h);
        if (r < 0)
                return fail(c, r, "opening the sandbox");
        r = files_read(h, canon, max, &data, &size, &c->error);
        if (r == -EFBIG) {
                /* The core already said "too large": replace it with the hint for agents. */
                c->error = (Error) ERROR_INIT;
                (void) error_set(&c->error, r, 413, "SANDBOX_FILE_TOO_LARGE",
                                 "file is larger than %" PRIu64 " bytes; read a part with sandbox_exec (head, tail, "
                                 "sed -n) or use the HTTP API's GET .../files/raw", max);
        }
        if (r < 0)
                return fail(c, r, "reading the file");
        r = base64_encode(data, size, &b64, &b64_len);
        if (r < 0)
                return fail(c, r, "encoding the file");
        /* A NUL byte is valid UTF-8 but not in a JSON-encoded C string: jansson takes the length. */
        text = utf8_is_valid(data, size) ? json_stringn(data, size) : json_null();
        return answer(c, json_pack("{s:s, s:s%, s:o, s:I}", "path", canon, "content_base64", b64, b64_len, "content",
                                   text ? text : json_null(), "size_bytes", (json_int_t) size));
}

int mcp_call_list_files(McpCall *c) {
        _cleanup_(sandbox_handle_closep) SandboxHandle *h = NULL;
        const char *raw = arg_str(c, "path");
        char canon[PATH_MAX] = "/workspace";
        uint64_t max_limit = MAX(MIN(c->daemon->config.max_list_limit, (uint64_t) 10000), (uint64_t) 1);
        json_t *o = NULL;
        int r;

        if (raw && canonical_path(c, "path", raw, canon) < 0)
                return 0;
        r = open_files(c, HOLD_FILE_READ, canon, NULL, false, &h);
        if (r < 0)
                return fail(c, r, "opening the sandbox");
        r = files_list(h, canon, MIN(arg_u64(c, "limit", 200), max_limit), arg_u64(c, "offset", 0), &o, &c->error);
        if (r < 0)
                return fail(c, r, "listing the directory");
        return answer(c, o);
}

int mcp_call_mkdir(McpCall *c) {
        _cleanup_(sandbox_handle_closep) SandboxHandle *h = NULL;
        char canon[PATH_MAX];
        int r;

        if (canonical_path(c, "path", arg_str(c, "path"), canon) < 0)
                return 0;
        r = open_files(c, HOLD_FILE_WRITE, canon, NULL, true, &h);
        if (r < 0)
                return fail(c, r, "opening the sandbox");
        r = files_mkdir(h, canon, arg_bool(c, "parents", false), &c->error);
        if (r < 0)
                return fail(c, r, "creating the directory");
        sandbox_handle_touch(h);
        return answer(c, path_ok_json(c, canon));
}

int mcp_call_delete_file(McpCall *c) {
        _cleanup_(sandbox_handle_closep) SandboxHandle *h = NULL;
        char canon[PATH_MAX];
        int r;

        if (canonical_path(c, "path", arg_str(c, "path"), canon) < 0)
                return 0;
        r = open_files(c, HOLD_FILE_WRITE, canon, NULL, false, &h);
        if (r < 0)
                return fail(c, r, "opening the sandbox");
        r = files_delete(h, canon, arg_bool(c, "recursive", false), &c->error);
        if (r < 0)
                return fail(c, r, "deleting");
        sandbox_handle_touch(h);
        return answer(c, path_ok_json(c, canon));
}

int mcp_call_move_file(McpCall *c) {
        _cleanup_(sandbox_handle_closep) SandboxHandle *h = NULL;
        char src[PATH_MAX], dst[PATH_MAX];
        int r;

        if (canonical_path(c, "source", arg_str(c, "source"), src) < 0 ||
            canonical_path(c, "destination", arg_str(c, "destination"), dst) < 0)
                return 0;
        r = open_files(c, HOLD_FILE_WRITE, src, dst, false, &h);
        if (r < 0)
                return fail(c, r, "opening the sandbox");
        r = files_move(h, src, dst, arg_bool(c, "overwrite", false), &c->error);
        if (r < 0)
                return fail(c, r, "moving");
        sandbox_handle_touch(h);
        return answer(c, json_pack("{s:s, s:I, s:s, s:s, s:s}", "sandbox_id", arg_str(c, "sandbox_id"), "generation",
                                   (json_int_t) arg_u64(c, "generation", 0), "status", "ok", "source", src,
                                   "destination", dst));
}

/* --- exec --- */

/* The outcome for X: its record, or the error it ended with (e.g. 503 SANDBOX_WORKER_BUSY
 * after waiting in the admission queue). */
static void exec_outcome(McpCall *c, Exec *x) {
        const Error *err = exec_error(x);

        if (err)
                c->error = *err;
        else
                (void) answer(c, exec_to_json(x, false));
}

typedef struct ExecCallWaiter {
        ExecWaiter w;
        McpCall *call;
} ExecCallWaiter;

/* On the pump thread: the exec ended (or runs, for a background one), or the wait is over. */
static void exec_waiter_fn(ExecWaiter *w, Exec *x) {
        ExecCallWaiter *ew = container_of(w, ExecCallWaiter, w);
        McpCall *c = ew->call;

        free(ew);
        exec_outcome(c, x);
        c->done(c);
}

/* Answers with X's record once X ends (or, with UNTIL_END false, once it runs), or when
 * WAIT_SECONDS are up, whichever is first: at once if that holds now, else later. */
static int answer_when(McpCall *c, Exec *x, bool until_end, uint64_t wait_seconds) {
        ExecCallWaiter *ew;

        if (wait_seconds == 0 || exec_has_ended(x)) {
                exec_outcome(c, x);
                return 0;
        }
        ew = calloc(1, sizeof *ew);
        if (!ew)
                return fail(c, -ENOMEM, "waiting for the command");
        ew->w = (ExecWaiter) { .fn = exec_waiter_fn, .until_end = until_end };
        ew->call = c;
        if (exec_wait(x, &ew->w, wait_seconds * USEC_PER_SEC) > 0) {
                free(ew);
                exec_outcome(c, x);
                return 0;
        }
        return MCP_CALL_PENDING;
}

typedef struct ExecArgs {
        ExecRequest r;
        char cwd[PATH_MAX];
        const char **argv;
        const char **env_names, **env_values;
} ExecArgs;

static void exec_args_done(ExecArgs *a) {
        free(a->argv);
        free(a->env_names);
        free(a->env_values);
}

/* Fills A from the arguments; 0, or a negative errno with C's error set. */
static int exec_args(McpCall *c, ExecArgs *a) {
        json_t *argv = json_object_get(c->args, "argv"), *env = json_object_get(c->args, "env"), *v;
        const char *cwd = arg_str(c, "cwd"), *name, *scope = arg_str(c, "exec_scope"), *in = arg_str(c, "stdin");
        size_t i, n = 0, bytes = 0;

        a->argv = calloc(json_array_size(argv) + 1, sizeof *a->argv);
        a->env_names = calloc(json_object_size(env) + 1, sizeof *a->env_names);
        a->env_values = calloc(json_object_size(env) + 1, sizeof *a->env_values);
        if (!a->argv || !a->env_names || !a->env_values)
                return fail(c, -ENOMEM, "reading the command"), -ENOMEM;
        json_array_foreach(argv, i, v) {
                a->argv[i] = json_string_value(v);
                bytes += json_string_length(v) + 1;
        }
        if (isempty(a->argv[0]))
                return invalid(c, "argv", "argv[0] (the command) must not be empty"), -EINVAL;
        json_object_foreach(env, name, v) {
                /* Names are reported by rule, never echoed (nor values: they may be secrets). */
                if (!exec_env_name_is_valid(name) || strlen(name) != strcspn(name, "="))
                        return invalid(c, "env", "variable names must match ^[A-Za-z_][A-Za-z0-9_]*$ "
                                          "(at most 128 characters)"), -EINVAL;
                a->env_names[n] = name;
                a->env_values[n] = json_string_value(v);
                bytes += strlen(name) + json_string_length(v) + 2;
                n++;
        }
        if (bytes + EXEC_PAYLOAD_RESERVE > EXEC_PAYLOAD_MAX)
                return invalid(c, "argv", "argv and env together are larger than 1 MiB (less 8 KiB)"), -EINVAL;
        if (in && strlen(in) > c->daemon->config.max_file_api_bytes)
                return invalid(c, "stdin", "larger than SANDBOX_MAX_FILE_API_BYTES"), -EINVAL;
        if (cwd) {
                Error e = ERROR_INIT;
                if (files_normalize_path(cwd, strlen(cwd), a->cwd, sizeof a->cwd, &e) < 0) {
                        if (e.status == 422)
                                return invalid(c, "cwd", e.message), -EINVAL;
                        return error_set(&c->error, -EINVAL, 400, "SANDBOX_INVALID_CWD",
                                         "cwd is outside /workspace, /home/sandbox, /cache and /envs");
                }
        } else
                (void) strscpy(a->cwd, sizeof a->cwd, "/workspace");

        a->r = (ExecRequest) {
                .sandbox_id = arg_str(c, "sandbox_id"),
                .generation = arg_u64(c, "generation", 0),
                .exec_id = arg_str(c, "exec_id"),
                .argv = a->argv,
                .argc = json_array_size(argv),
                .cwd = a->cwd,
                .env_names = a->env_names,
                .env_values = a->env_values,
                .envc = n,
                .timeout_seconds = arg_u64(c, "timeout_seconds", c->daemon->config.default_timeout_seconds),
                .background = arg_bool(c, "background", false),
                .exec_scope = scope,
                .has_stdin = in != NULL,
                .stdin_data = in,
                .stdin_size = in ? strlen(in) : 0,
        };
        return 0;
}

int mcp_call_exec(McpCall *c) {
        _cleanup_(exec_args_done) ExecArgs a = {};
        _cleanup_(exec_unrefp) Exec *x = NULL;
        int r;

        if (exec_args(c, &a) < 0)
                return 0;
        r = disk_admit(c->daemon->disk, c->principal->tenant, a.r.sandbox_id, &c->error);
        if (r < 0)
                return 0;
        r = exec_start(c->daemon->execs, c->principal, &a.r, &x, &c->error);
        if (r < 0)
                return fail(c, r, "starting the command");
        /* Foreground: until it ends; background: until it runs. Either way at most the MCP wait
         * (clients commonly give up on a request after 60 s): then the RUNNING record. */
        return answer_when(c, x, !a.r.background, c->daemon->config.mcp_exec_wait_seconds);
}

int mcp_call_exec_status(McpCall *c) {
        _cleanup_(exec_unrefp) Exec *x = NULL;
        uint64_t wait;
        int r;

        r = exec_lookup(c->daemon->execs, c->principal, arg_str(c, "sandbox_id"), arg_u64(c, "generation", 0),
                        arg_str(c, "exec_id"), &x, &c->error);
        if (r < 0)
                return fail(c, r, "reading the command");
        wait = MIN(arg_u64(c, "wait_seconds", 0), c->daemon->config.mcp_exec_wait_seconds);
        return answer_when(c, x, true, wait);
}

int mcp_call_cancel(McpCall *c) {
        const char *eid = arg_str(c, "exec_id");
        bool cancelled = false;
        int r;

        r = exec_cancel(c->daemon->execs, c->principal, arg_str(c, "sandbox_id"), arg_u64(c, "generation", 0), eid,
                        &cancelled, &c->error);
        if (r < 0)
                return fail(c, r, "cancelling the command");
        return answer(c, json_pack("{s:s, s:b}", "exec_id", eid, "cancelled", cancelled));
}
