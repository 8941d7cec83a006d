/* SPDX-License-Identifier: MIT */
/* The MCP tool catalogue: Sandloom's tool names and argument names, the annotations, the
 * input schemas (generated from one parameter table, which also drives the validation, so
 * the two cannot disagree) and the output schemas of the records the tools answer. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "json-util.h"
#include "macros.h"
#include "mcp.h"
#include "string-util.h"

#define ID_PATTERN "^[A-Za-z0-9_.:-]+$"
#define ERRORS_MAX 20
#define PATH_ARG_MAX 16384     /* longer than any valid path: the path rules (and their messages) decide */

typedef enum ParamType {
        P_ID,                  /* string of ID_CHARSET */
        P_STRING,              /* any string without NUL */
        P_TEXT,                /* a string that is stored and shown back: no control characters */
        P_INTEGER,
        P_BOOLEAN,
        P_STRING_ARRAY,
        P_STRING_MAP,
} ParamType;

typedef struct Param {
        const char *name;
        ParamType type;
        bool required;
        uint64_t min, max;     /* string: bytes; integer: value; array, map: items */
        const char *def;       /* default, as JSON text; NULL = none */
        const char *description;
} Param;

#define PARAMS_MAX 12

typedef struct Annotations {
        bool read_only, destructive, idempotent;
} Annotations;

struct McpTool {
        const char *name;
        const char *title;
        const char *description;
        Annotations annotations;
        McpToolFn fn;
        const char *output_schema;          /* JSON text */
        Param params[PARAMS_MAX];
};

/* --- parameters shared by several tools --- */

#define A_SANDBOX_ID                                                                                     \
        { "sandbox_id", P_ID, true, 3, 128, NULL,                                                          \
          "The sandbox's id, chosen by you when you resolve it (3-128 characters of A-Z a-z 0-9 _ . : -), " \
          "e.g. a task or conversation id." }
#define A_GENERATION                                                                                     \
        { "generation", P_INTEGER, true, 1, INT64_MAX, NULL,                                               \
          "The sandbox's current generation, as returned by sandbox_resolve. A call with an old one fails " \
          "with STALE_SANDBOX_GENERATION (sandbox_create: STALE_SANDBOX_ROUTE): then call sandbox_resolve " \
          "again and use the generation it returns." }
#define A_EXEC_ID(what)                                                                                  \
        { "exec_id", P_ID, true, 1, 128, NULL, what }

/* --- output schemas: what structuredContent holds (the same JSON as the text content) --- */

#define S_STR "{\"type\":\"string\"}"
#define S_INT "{\"type\":\"integer\"}"
#define S_BOOL "{\"type\":\"boolean\"}"
#define S_STR_OR_NULL "{\"type\":[\"string\",\"null\"]}"
#define S_INT_OR_NULL "{\"type\":[\"integer\",\"null\"]}"
#define S_SANDBOX_STATUS \
        "{\"type\":\"string\",\"enum\":[\"ASSIGNED\",\"READY\",\"SUSPENDING\",\"SUSPENDED\",\"RELEASING\",\"RELEASED\"]}"

#define OUT_RECORD                                                                                     \
        "{\"type\":\"object\",\"properties\":{"                                                        \
        "\"sandbox_id\":" S_STR ",\"generation\":" S_INT ",\"status\":" S_SANDBOX_STATUS ","           \
        "\"worker_id\":" S_STR ",\"worker_epoch\":" S_STR ",\"worker_endpoint\":" S_STR_OR_NULL ","    \
        "\"sandbox_uid\":" S_INT ",\"storage_mode\":" S_STR ",\"workspace_scope_id\":" S_STR ","       \
        "\"profile\":" S_STR ",\"profile_id\":" S_STR ",\"profile_hash\":" S_STR ","                    \
        "\"lifecycle_id\":" S_STR ",\"lifecycle_count\":" S_INT ",\"content_version\":" S_INT ","       \
        "\"created_at\":" S_STR_OR_NULL ",\"updated_at\":" S_STR_OR_NULL ","                            \
        "\"connected_at\":" S_STR_OR_NULL ",\"released_at\":" S_STR_OR_NULL "},"                        \
        "\"required\":[\"sandbox_id\",\"generation\",\"status\",\"worker_id\",\"storage_mode\"]}"

#define OUT_EXEC                                                                                       \
        "{\"type\":\"object\",\"properties\":{"                                                        \
        "\"exec_id\":" S_STR ",\"sandbox_id\":" S_STR ",\"generation\":" S_INT ","                     \
        "\"status\":{\"type\":\"string\",\"enum\":[\"RUNNING\",\"SUCCEEDED\",\"FAILED\",\"TIMED_OUT\","   \
        "\"CANCELLED\",\"WORKER_LOST\"]},"                                                             \
        "\"exit_code\":" S_INT_OR_NULL ",\"signal\":" S_INT_OR_NULL ","                                \
        "\"stdout\":" S_STR ",\"stderr\":" S_STR ",\"truncated\":" S_BOOL ","                          \
        "\"stdout_bytes\":" S_INT ",\"stderr_bytes\":" S_INT ",\"duration_ms\":" S_INT ","             \
        "\"cpu_ms\":" S_INT ",\"max_rss_bytes\":" S_INT ",\"oom_killed\":" S_BOOL ","                  \
        "\"background\":" S_BOOL ",\"exec_scope\":" S_STR_OR_NULL ","                                  \
        "\"started_at\":" S_STR_OR_NULL ",\"finished_at\":" S_STR_OR_NULL "},"                          \
        "\"required\":[\"exec_id\",\"status\",\"exit_code\",\"stdout\",\"stderr\",\"truncated\","       \
        "\"duration_ms\"]}"

#define OUT_PATH_OK                                                                                    \
        "{\"type\":\"object\",\"properties\":{\"sandbox_id\":" S_STR ",\"generation\":" S_INT ","      \
        "\"status\":{\"type\":\"string\",\"const\":\"ok\"},\"path\":" S_STR "},"                          \
        "\"required\":[\"sandbox_id\",\"generation\",\"status\",\"path\"]}"

static const McpTool tools[] = {
        {
                .name = "sandbox_profile",
                .title = "Worker runtime profile",
                .description =
                        "Describe this sandloom worker: its runtime profile (profile_id, profile_hash), health, "
                        "how commands are isolated (level, network mode, resource limits), and how many "
                        "sandboxes and commands are live. Read-only; takes no arguments.",
                .annotations = { .read_only = true, .idempotent = true },
                .fn = mcp_call_profile,
                .output_schema =
                        "{\"type\":\"object\",\"properties\":{\"profile_id\":" S_STR ",\"profile_hash\":" S_STR
                        ",\"version\":" S_STR ",\"transport\":" S_STR ",\"stateless\":" S_BOOL
                        ",\"worker_id\":" S_STR ",\"healthy\":" S_BOOL ",\"running_sessions\":" S_INT
                        ",\"running_execs\":" S_INT ",\"capabilities\":{\"type\":\"object\"}},"
                        "\"required\":[\"profile_id\",\"profile_hash\",\"worker_id\",\"healthy\"]}",
        },
        {
                .name = "sandbox_resolve",
                .title = "Resolve a sandbox",
                .description =
                        "Find or create the sandbox named sandbox_id (step 1 of 2; then call sandbox_create). A sandbox "
                        "is a persistent workspace: files under /workspace survive between commands until "
                        "sandbox_release. Idempotent: resolving a live sandbox again returns it unchanged. "
                        "Returns the route record; keep its `generation` and pass it to every other call on this "
                        "sandbox. Fails with SANDBOX_SCOPE_MISMATCH if the sandbox lives in another "
                        "workspace_scope_id.",
                .annotations = { .idempotent = true },
                .fn = mcp_call_resolve,
                .output_schema = OUT_RECORD,
                .params = {
                        A_SANDBOX_ID,
                        { "workspace_scope_id", P_TEXT, true, 1, 191, NULL,
                          "The owner scope of the sandbox (1-191 characters), e.g. a user or project id. The same "
                          "sandbox_id cannot be used from two scopes at once." },
                        { "profile", P_ID, false, 1, 64, "\"default\"",
                          "A profile name recorded with the sandbox (1-64 characters of A-Z a-z 0-9 _ . : -). This "
                          "worker runs every sandbox with its one runtime profile (see sandbox_profile)." },
                },
        },
        {
                .name = "sandbox_create",
                .title = "Create the sandbox's workspace",
                .description =
                        "Create the workspace of a resolved sandbox (step 2 of 2, after sandbox_resolve) and make it "
                        "READY for files and commands. Idempotent once READY. Pass the generation sandbox_resolve "
                        "returned; another one fails with STALE_SANDBOX_ROUTE (resolve again).",
                .annotations = { .idempotent = true },
                .fn = mcp_call_create,
                .output_schema = OUT_RECORD,
                .params = { A_SANDBOX_ID, A_GENERATION },
        },
        {
                .name = "sandbox_status",
                .title = "Sandbox status",
                .description =
                        "Return the sandbox's current route record: status (ASSIGNED, READY, RELEASED, ...), "
                        "generation, worker, profile and disk usage. Use it to learn the current generation. "
                        "Fails with SANDBOX_NOT_FOUND for an id that was never resolved.",
                .annotations = { .read_only = true, .idempotent = true },
                .fn = mcp_call_status,
                .output_schema = OUT_RECORD,
                .params = { A_SANDBOX_ID },
        },
        {
                .name = "sandbox_audit_get",
                .title = "Sandbox lifecycle history",
                .description =
                        "Return the sandbox's lifecycle history, oldest first: when each generation was created, "
                        "connected and released, by whom and why, plus its current status and generation.",
                .annotations = { .read_only = true, .idempotent = true },
                .fn = mcp_call_audit_get,
                .output_schema =
                        "{\"type\":\"object\",\"properties\":{\"sandbox_id\":" S_STR ",\"events\":{\"type\":\"array\","
                        "\"items\":{\"type\":\"object\"}},\"total\":" S_INT ",\"status\":" S_SANDBOX_STATUS
                        ",\"generation\":" S_INT ",\"workspace_scope_id\":" S_STR ",\"lifecycle_count\":" S_INT "},"
                        "\"required\":[\"sandbox_id\",\"events\",\"total\"]}",
                .params = {
                        A_SANDBOX_ID,
                        { "limit", P_INTEGER, false, 1, 10000, "100", "Most events to return." },
                        { "offset", P_INTEGER, false, 0, INT64_MAX, "0", "Events to skip (oldest first)." },
                },
        },
        {
                .name = "sandbox_exec",
                .title = "Run a command",
                .description =
                        "Run a command in the sandbox: a fresh isolated process as the sandbox's own user, with "
                        "/workspace, /home/sandbox, /cache and /envs of the sandbox. argv is the command and its "
                        "arguments, not a shell line: use [\"sh\", \"-c\", \"...\"] for pipes, redirections or "
                        "&&. Waits for the command to end, but at most a bounded time (see the server's "
                        "instructions, 45 s by default); if it is still RUNNING then, the record says so: call "
                        "sandbox_exec_status with the same exec_id (and wait_seconds) until the status is final "
                        "(SUCCEEDED, FAILED, TIMED_OUT, CANCELLED, WORKER_LOST). A non-zero exit is FAILED with "
                        "its exit_code and stderr, not an error of this tool. Idempotent per exec_id: a retry with "
                        "the same exec_id and arguments returns the first run's record and never runs the "
                        "command twice; choose a new exec_id for each new command.",
                .annotations = { .destructive = true, .idempotent = true },
                .fn = mcp_call_exec,
                .output_schema = OUT_EXEC,
                .params = {
                        A_SANDBOX_ID,
                        A_GENERATION,
                        A_EXEC_ID("Your id for this command (1-128 characters of A-Z a-z 0-9 _ . : -), unique within "
                                  "the sandbox, e.g. \"step-3-tests\". Reusing it returns the earlier result."),
                        { "argv", P_STRING_ARRAY, true, 1, 256, NULL,
                          "The command and its arguments, e.g. [\"python3\", \"main.py\"] or [\"sh\", \"-c\", "
                          "\"make && ./app\"]. argv[0] without a slash is looked up in PATH." },
                        { "cwd", P_STRING, false, 1, PATH_ARG_MAX, "\"/workspace\"",
                          "Working directory: an existing directory under /workspace, /home/sandbox, /cache or "
                          "/envs; a relative path is under /workspace." },
                        { "env", P_STRING_MAP, false, 0, 128, NULL,
                          "Extra environment variables (names like ^[A-Za-z_][A-Za-z0-9_]*$, string values). "
                          "HOME=/home/sandbox and a standard PATH are set already." },
                        { "timeout_seconds", P_INTEGER, false, 1, 86400, NULL,
                          "Kill the command (status TIMED_OUT) after this many seconds; default 300 (the "
                          "server's SANDBOX_DEFAULT_TIMEOUT_SECONDS). Independent of how long this call waits." },
                        { "background", P_BOOLEAN, false, 0, 0, "false",
                          "true: return as soon as the command runs (status RUNNING) and let it go on, e.g. for a "
                          "server; poll it with sandbox_exec_status, stop it with sandbox_cancel. Give background "
                          "commands an exec_scope, or they block every other command of the sandbox." },
                        { "exec_scope", P_ID, false, 1, 128, NULL,
                          "Commands in different scopes run in parallel; two in the same scope conflict "
                          "(SANDBOX_EXEC_SCOPE_BUSY). Without a scope the command needs the whole sandbox." },
                        { "stdin", P_STRING, false, 0, UINT64_MAX, NULL,
                          "Text given to the command on its standard input (default: empty)." },
                },
        },
        {
                .name = "sandbox_exec_status",
                .title = "Command status and output",
                .description =
                        "Return the record of a command started with sandbox_exec: status, exit_code, stdout, "
                        "stderr (the output so far while it runs). With wait_seconds, first waits until the "
                        "command ends or that time is up (capped by the server, 45 s by default), so polling a "
                        "long command needs few calls. Fails with EXEC_NOT_FOUND for an unknown exec_id.",
                .annotations = { .read_only = true, .idempotent = true },
                .fn = mcp_call_exec_status,
                .output_schema = OUT_EXEC,
                .params = {
                        A_SANDBOX_ID,
                        A_GENERATION,
                        A_EXEC_ID("The exec_id given to sandbox_exec."),
                        { "wait_seconds", P_INTEGER, false, 0, 300, "0",
                          "Wait up to this many seconds for the command to end before answering (0 = answer at "
                          "once). The server caps the wait (45 s by default)." },
                },
        },
        {
                .name = "sandbox_cancel",
                .title = "Cancel a command",
                .description =
                        "Stop a running command: SIGTERM to its whole process tree, SIGKILL a few seconds later; it "
                        "ends CANCELLED. Answers cancelled: false if it had already ended. Files it wrote stay.",
                .annotations = { .destructive = true, .idempotent = true },
                .fn = mcp_call_cancel,
                .output_schema = "{\"type\":\"object\",\"properties\":{\"exec_id\":" S_STR ",\"cancelled\":" S_BOOL
                                 "},\"required\":[\"exec_id\",\"cancelled\"]}",
                .params = { A_SANDBOX_ID, A_GENERATION, A_EXEC_ID("The exec_id of the command to stop.") },
        },
        {
                .name = "sandbox_write_file",
                .title = "Write a file",
                .description =
                        "Create or replace a file in the sandbox, atomically. Give the content as text in `content` "
                        "or as bytes in `content_base64` (exactly one). Paths are as the sandbox sees them: under "
                        "/workspace (a relative path is relative to /workspace), /home/sandbox, /cache or /envs. "
                        "Parent directories must exist unless make_parents is true. Returns status WRITTEN.",
                .annotations = { .destructive = true, .idempotent = true },
                .fn = mcp_call_write_file,
                .output_schema =
                        "{\"type\":\"object\",\"properties\":{\"sandbox_id\":" S_STR ",\"generation\":" S_INT
                        ",\"status\":{\"type\":\"string\",\"const\":\"WRITTEN\"},\"path\":" S_STR
                        ",\"size_bytes\":" S_INT "},\"required\":[\"sandbox_id\",\"generation\",\"status\"]}",
                .params = {
                        A_SANDBOX_ID,
                        A_GENERATION,
                        { "path", P_STRING, true, 1, PATH_ARG_MAX, NULL,
                          "The file, e.g. \"main.py\" (= /workspace/main.py) or \"/workspace/src/app.js\"." },
                        { "content", P_STRING, false, 0, UINT64_MAX, NULL, "The file's content as UTF-8 text." },
                        { "content_base64", P_STRING, false, 0, UINT64_MAX, NULL,
                          "The file's content as standard base64 (for binary files)." },
                        { "make_parents", P_BOOLEAN, false, 0, 0, "false", "Create missing parent directories." },
                },
        },
        {
                .name = "sandbox_read_file",
                .title = "Read a file",
                .description =
                        "Read a whole file of the sandbox. Returns content_base64 (the exact bytes) and, when the "
                        "file is valid UTF-8, the same as text in `content` (null otherwise). Fails with "
                        "SANDBOX_FILE_NOT_FOUND, SANDBOX_NOT_A_REGULAR_FILE or SANDBOX_FILE_TOO_LARGE (over the "
                        "files-API limit, 32 MiB by default).",
                .annotations = { .read_only = true, .idempotent = true },
                .fn = mcp_call_read_file,
                .output_schema =
                        "{\"type\":\"object\",\"properties\":{\"path\":" S_STR ",\"content_base64\":" S_STR
                        ",\"content\":" S_STR_OR_NULL ",\"size_bytes\":" S_INT "},"
                        "\"required\":[\"path\",\"content_base64\"]}",
                .params = {
                        A_SANDBOX_ID,
                        A_GENERATION,
                        { "path", P_STRING, true, 1, PATH_ARG_MAX, NULL,
                          "The file, e.g. \"out/report.txt\" (= /workspace/out/report.txt)." },
                },
        },
        {
                .name = "sandbox_release",
                .title = "Release a sandbox",
                .description =
                        "Release the sandbox: stop its running commands and delete its workspace and every file in "
                        "it. Call it when the task is done. Answers RELEASED, also for a sandbox that does not "
                        "exist or was released already. Resolving the same sandbox_id later starts a new, empty "
                        "workspace with a new generation.",
                .annotations = { .destructive = true, .idempotent = true },
                .fn = mcp_call_release,
                .output_schema = "{\"type\":\"object\",\"properties\":{\"sandbox_id\":" S_STR
                                 ",\"status\":{\"type\":\"string\",\"const\":\"RELEASED\"}},"
                                 "\"required\":[\"sandbox_id\",\"status\"]}",
                .params = {
                        A_SANDBOX_ID,
                        { "reason", P_TEXT, false, 0, 128, NULL, "Why, recorded in the sandbox's history." },
                },
        },
        {
                .name = "sandbox_list_files",
                .title = "List a directory",
                .description =
                        "List a directory of the sandbox (default /workspace), sorted by name: each entry's name, "
                        "path, type (file, directory, symlink, other), size_bytes, modified_at and mode. A symlink "
                        "is reported as such, not followed. Page large directories with limit and offset.",
                .annotations = { .read_only = true, .idempotent = true },
                .fn = mcp_call_list_files,
                .output_schema =
                        "{\"type\":\"object\",\"properties\":{\"path\":" S_STR ",\"entries\":{\"type\":\"array\","
                        "\"items\":{\"type\":\"object\",\"properties\":{\"name\":" S_STR ",\"path\":" S_STR
                        ",\"type\":{\"type\":\"string\",\"enum\":[\"file\",\"directory\",\"symlink\",\"other\"]}"
                        ",\"size_bytes\":" S_INT ",\"modified_at\":" S_STR ",\"mode\":" S_STR "}}},"
                        "\"total\":" S_INT ",\"has_more\":" S_BOOL "},"
                        "\"required\":[\"path\",\"entries\",\"total\",\"has_more\"]}",
                .params = {
                        A_SANDBOX_ID,
                        A_GENERATION,
                        { "path", P_STRING, false, 1, PATH_ARG_MAX, "\"/workspace\"", "The directory." },
                        { "limit", P_INTEGER, false, 1, 10000, "200", "Most entries to return." },
                        { "offset", P_INTEGER, false, 0, INT64_MAX, "0", "Entries to skip." },
                },
        },
        {
                .name = "sandbox_mkdir",
                .title = "Create a directory",
                .description =
                        "Create a directory in the sandbox. With parents true, missing parents are created too. "
                        "Fails with SANDBOX_FILE_EXISTS if the path exists.",
                .annotations = { .idempotent = true },
                .fn = mcp_call_mkdir,
                .output_schema = OUT_PATH_OK,
                .params = {
                        A_SANDBOX_ID,
                        A_GENERATION,
                        { "path", P_STRING, true, 1, PATH_ARG_MAX, NULL, "The directory to create, e.g. \"src/lib\"." },
                        { "parents", P_BOOLEAN, false, 0, 0, "false", "Also create missing parent directories." },
                },
        },
        {
                .name = "sandbox_delete_file",
                .title = "Delete a file or directory",
                .description =
                        "Delete a file, symlink or directory of the sandbox. A non-empty directory needs recursive "
                        "true (SANDBOX_DIRECTORY_NOT_EMPTY otherwise); a recursive delete never follows symlinks. "
                        "The roots (/workspace, /home/sandbox, /cache, /envs) cannot be deleted.",
                .annotations = { .destructive = true, .idempotent = true },
                .fn = mcp_call_delete_file,
                .output_schema = OUT_PATH_OK,
                .params = {
                        A_SANDBOX_ID,
                        A_GENERATION,
                        { "path", P_STRING, true, 1, PATH_ARG_MAX, NULL, "What to delete." },
                        { "recursive", P_BOOLEAN, false, 0, 0, "false", "Delete a directory with everything in it." },
                },
        },
        {
                .name = "sandbox_move_file",
                .title = "Move or rename",
                .description =
                        "Move or rename a file or directory within the sandbox. An existing destination is "
                        "replaced only with overwrite true (SANDBOX_FILE_EXISTS otherwise).",
                .annotations = { .destructive = true },
                .fn = mcp_call_move_file,
                .output_schema =
                        "{\"type\":\"object\",\"properties\":{\"sandbox_id\":" S_STR ",\"generation\":" S_INT
                        ",\"status\":{\"type\":\"string\",\"const\":\"ok\"},\"source\":" S_STR
                        ",\"destination\":" S_STR "},\"required\":[\"sandbox_id\",\"generation\",\"status\","
                        "\"source\",\"destination\"]}",
                .params = {
                        A_SANDBOX_ID,
                        A_GENERATION,
                        { "source", P_STRING, true, 1, PATH_ARG_MAX, NULL, "What to move." },
                        { "destination", P_STRING, true, 1, PATH_ARG_MAX, NULL, "The new path." },
                        { "overwrite", P_BOOLEAN, false, 0, 0, "false", "Replace an existing destination." },
                },
        },
};

size_t mcp_tools_count(void) {
        return ELEMENTSOF(tools);
}

const McpTool *mcp_tool_find(const char *name) {
        for (size_t i = 0; name && i < ELEMENTSOF(tools); i++)
                if (streq(tools[i].name, name))
                        return &tools[i];
        return NULL;
}

const char *mcp_tool_name(const McpTool *t) {
        return t->name;
}

int mcp_tool_run(const McpTool *t, McpCall *c) {
        return t->fn(c);
}

/* --- schemas --- */

static json_t *param_schema(const Param *p) {
        _cleanup_json_ json_t *s = NULL;
        int r = 0;

        switch (p->type) {
        case P_ID:
                s = json_pack("{s:s, s:I, s:I, s:s}", "type", "string", "minLength", (json_int_t) p->min, "maxLength",
                              (json_int_t) p->max, "pattern", ID_PATTERN);
                break;
        case P_STRING:
        case P_TEXT:
                s = json_pack("{s:s}", "type", "string");
                if (s && p->min > 0)
                        r |= json_object_set_new(s, "minLength", json_integer((json_int_t) p->min));
                if (s && p->max < INT64_MAX)
                        r |= json_object_set_new(s, "maxLength", json_integer((json_int_t) p->max));
                break;
        case P_INTEGER:
                s = json_pack("{s:s, s:I, s:I}", "type", "integer", "minimum", (json_int_t) p->min, "maximum",
                              (json_int_t) MIN(p->max, (uint64_t) INT64_MAX));
                break;
        case P_BOOLEAN:
                s = json_pack("{s:s}", "type", "boolean");
                break;
        case P_STRING_ARRAY:
                s = json_pack("{s:s, s:{s:s}, s:I, s:I}", "type", "array", "items", "type", "string", "minItems",
                              (json_int_t) p->min, "maxItems", (json_int_t) p->max);
                break;
        case P_STRING_MAP:
                s = json_pack("{s:s, s:{s:s}, s:I}", "type", "object", "additionalProperties", "type", "string",
                              "maxProperties", (json_int_t) p->max);
                break;
        }
        if (!s || r < 0)
                return NULL;
        if (json_object_set_new(s, "description", json_string(p->description)) < 0)
                return NULL;
        if (p->def) {
                json_t *d = json_loads(p->def, JSON_DECODE_ANY, NULL);
                if (!d || json_object_set_new(s, "default", d) < 0)
                        return NULL;
        }
        return TAKE_PTR(s);
}

static json_t *input_schema(const McpTool *t) {
        _cleanup_json_ json_t *s = NULL;
        json_t *props, *required;

        s = json_pack("{s:s, s:{}, s:[], s:b}", "type", "object", "properties", "required", "additionalProperties", 0);
        if (!s)
                return NULL;
        props = json_object_get(s, "properties");
        required = json_object_get(s, "required");
        for (const Param *p = t->params; p < t->params + PARAMS_MAX && p->name; p++) {
                if (json_object_set_new(props, p->name, param_schema(p)) < 0)
                        return NULL;
                if (p->required && json_array_append_new(required, json_string(p->name)) < 0)
                        return NULL;
        }
        if (json_array_size(required) == 0)
                (void) json_object_del(s, "required");
        return TAKE_PTR(s);
}

static json_t *tool_json(const McpTool *t, McpVersion v) {
        _cleanup_json_ json_t *o = NULL;

        o = json_pack("{s:s, s:s, s:o}", "name", t->name, "description", t->description, "inputSchema",
                      input_schema(t));
        if (!o)
                return NULL;
        /* Annotations came with 2025-03-26; title and structured output with 2025-06-18. Every
         * hint is given explicitly (the defaults assume the worst: destructive, open world). */
        if (v >= MCP_2025_03_26) {
                json_t *a = json_pack("{s:s, s:b, s:b, s:b, s:b}", "title", t->title, "readOnlyHint",
                                      t->annotations.read_only, "destructiveHint", t->annotations.destructive,
                                      "idempotentHint", t->annotations.idempotent, "openWorldHint", 0);
                if (!a || json_object_set_new(o, "annotations", a) < 0)
                        return NULL;
        }
        if (v >= MCP_2025_06_18) {
                json_t *out = json_loads(t->output_schema, 0, NULL);
                if (!out || json_object_set_new(o, "outputSchema", out) < 0 ||
                    json_object_set_new(o, "title", json_string(t->title)) < 0)
                        return NULL;
        }
        return TAKE_PTR(o);
}

json_t *mcp_tools_list_json(const Daemon *d, McpVersion v) {
        _cleanup_json_ json_t *list = json_array();

        if (!list)
                return NULL;
        for (size_t i = 0; i < ELEMENTSOF(tools); i++)
                if (json_array_append_new(list, tool_json(&tools[i], v)) < 0)
                        return NULL;
        return json_pack("{s:O}", "tools", list);
}

/* --- validation --- */

typedef struct Problems {
        json_t *list;
        unsigned count;
        char first[256];
} Problems;

static void problem(Problems *pr, const char *field, const char *type, const char *msg) {
        if (pr->count == 0)
                (void) bsprintf(pr->first, sizeof pr->first, "%s: %s", field, msg);
        pr->count++;
        if (pr->list && json_array_size(pr->list) < ERRORS_MAX)
                (void) json_array_append_new(pr->list, json_pack("{s:[s,s], s:s, s:s}", "loc", "arguments", field,
                                                                 "type", type, "msg", msg));
}

static void check_string(Problems *pr, const Param *p, json_t *v) {
        size_t len;

        if (!json_string_is_text(v)) {
                problem(pr, p->name, "string_type", "Input should be a string without NUL characters");
                return;
        }
        len = json_string_length(v);
        if (len < p->min)
                problem(pr, p->name, "string_too_short", p->min == 1 ? "String should not be empty" : "String is too short");
        else if (len > p->max)
                problem(pr, p->name, "string_too_long", "String is too long");
        else if (p->type == P_ID && !str_in_charset(json_string_value(v), ID_CHARSET, 0, SIZE_MAX))
                problem(pr, p->name, "string_pattern_mismatch", "String should match pattern '" ID_PATTERN "'");
        else if (p->type == P_TEXT && !string_is_printable(json_string_value(v)))
                problem(pr, p->name, "value_error", "String should not contain control characters");
}

static void check_param(Problems *pr, const Param *p, json_t *v) {
        switch (p->type) {
        case P_ID:
        case P_STRING:
        case P_TEXT:
                check_string(pr, p, v);
                return;
        case P_INTEGER:
                /* 3.0 is not an integer to JSON Schema's "integer" as jansson parses it: refused. */
                if (!json_is_integer(v))
                        problem(pr, p->name, "int_type", "Input should be a valid integer");
                else if (json_integer_value(v) < 0 || (uint64_t) json_integer_value(v) < p->min ||
                         (uint64_t) json_integer_value(v) > p->max)
                        problem(pr, p->name, "range_error", "Input is out of range (see the tool's input schema)");
                return;
        case P_BOOLEAN:
                if (!json_is_boolean(v))
                        problem(pr, p->name, "bool_type", "Input should be true or false");
                return;
        case P_STRING_ARRAY: {
                json_t *item;
                size_t i;

                if (!json_is_array(v)) {
                        problem(pr, p->name, "list_type", "Input should be a list of strings");
                        return;
                }
                if (json_array_size(v) < p->min || json_array_size(v) > p->max) {
                        problem(pr, p->name, json_array_size(v) < p->min ? "too_short" : "too_long",
                                "List has too few or too many items (see the tool's input schema)");
                        return;
                }
                json_array_foreach(v, i, item)
                        if (!json_string_is_text(item)) {
                                problem(pr, p->name, "string_type", "Every item should be a string without NUL characters");
                                return;
                        }
                return;
        }
        case P_STRING_MAP: {
                const char *k;
                json_t *item;

                if (!json_is_object(v)) {
                        problem(pr, p->name, "dict_type", "Input should be an object of strings");
                        return;
                }
                if (json_object_size(v) > p->max) {
                        problem(pr, p->name, "too_long", "Object has too many entries");
                        return;
                }
                json_object_foreach(v, k, item)
                        if (!json_string_is_text(item)) {
                                problem(pr, p->name, "string_type", "Every value should be a string without NUL characters");
                                return;
                        }
                return;
        }
        }
}

int mcp_tool_validate(const McpTool *t, json_t *args, Error *e, json_t **ret_errors) {
        _cleanup_json_ json_t *list = json_array();
        Problems pr = { .list = list };
        const char *key;
        json_t *v;

        if (args && !json_is_null(args) && !json_is_object(args))
                problem(&pr, "arguments", "dict_type", "The arguments should be an object");
        else if (args && json_is_object(args)) {
                /* An unknown argument is refused rather than ignored: a misspelt "timeout" must not
                 * silently become the default. Its name is not echoed (it is client input). */
                json_object_foreach(args, key, v) {
                        bool known = false;
                        for (const Param *p = t->params; p < t->params + PARAMS_MAX && p->name; p++)
                                known = known || streq(p->name, key);
                        if (!known) {
                                problem(&pr, "arguments", "extra_forbidden",
                                        "Unknown argument; the tool's input schema lists the allowed ones");
                                break;
                        }
                }
                for (const Param *p = t->params; p < t->params + PARAMS_MAX && p->name; p++) {
                        v = json_object_get(args, p->name);
                        if (v && !json_is_null(v))
                                check_param(&pr, p, v);
                        else if (p->required)
                                problem(&pr, p->name, "missing", "Field required");
                }
        } else
                for (const Param *p = t->params; p < t->params + PARAMS_MAX && p->name; p++)
                        if (p->required)
                                problem(&pr, p->name, "missing", "Field required");

        if (pr.count == 0)
                return 0;
        if (ret_errors)
                *ret_errors = TAKE_PTR(list);
        return error_set(e, -EINVAL, 422, "SANDBOX_INVALID_REQUEST", "Invalid arguments for %s: %s%s", t->name, pr.first,
                         pr.count > 1 ? " (and more)" : "");
}
