/* SPDX-License-Identifier: MIT */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "daemon.h"
#include "error.h"
#include "principal.h"

/* The MCP server, in three parts:
 *   mcp-http.c   the streamable HTTP transport and JSON-RPC: checks (Origin/Host,
 *                MCP-Protocol-Version), parsing, batches, version negotiation, dispatch;
 *   mcp-tools.c  the tool catalogue: names, descriptions, annotations, input and output
 *                schemas, and the generic validation of a call's arguments;
 *   mcp-calls.c  the tools themselves, calling the same core functions as the HTTP
 *                handlers (never HTTP to ourselves).
 * A tool either answers at once or, for execs still running, later from the exec engine's
 * pump thread; the transport then answers the HTTP request (parked meanwhile). */

/* Protocol revisions we speak, oldest first. */
typedef enum McpVersion {
        MCP_2024_11_05,
        MCP_2025_03_26,
        MCP_2025_06_18,
        MCP_2025_11_25,
        _MCP_VERSION_MAX,
} McpVersion;

#define MCP_VERSION_LATEST MCP_2025_11_25
/* What a request without MCP-Protocol-Version is taken to speak (the transport spec's rule). */
#define MCP_VERSION_DEFAULT MCP_2025_03_26

const char *mcp_version_to_string(McpVersion v);
/* -EINVAL for a revision we do not speak. */
int mcp_version_from_string(const char *s, McpVersion *ret);
/* "2024-11-05, 2025-03-26, ..." for messages. */
const char *mcp_versions_list(void);

typedef struct McpCall McpCall;

/* One tools/call. The transport fills the inputs; the tool fills exactly one of STRUCTURED
 * (success: the JSON record) or ERROR (a failure with its stable code). */
struct McpCall {
        Daemon *daemon;
        const Principal *principal;
        json_t *args;                       /* validated against the tool's parameters; borrowed */
        McpVersion version;

        json_t *structured;                 /* owned */
        Error error;

        /* For a tool that answered MCP_CALL_PENDING: called once, from any thread, when the
         * outcome is set. */
        void (*done)(McpCall *c);
        void *userdata;
};

#define MCP_CALL_PENDING 1

typedef int (*McpToolFn)(McpCall *c);

typedef struct McpTool McpTool;

/* The tool named NAME, or NULL. */
const McpTool *mcp_tool_find(const char *name);
const char *mcp_tool_name(const McpTool *t);
/* Validates ARGS (NULL = no arguments) against the tool's parameters. On failure fills E
 * with 422 SANDBOX_INVALID_REQUEST and a message naming the argument (never its value), and
 * *RET_ERRORS (may be NULL) with the list of problems {loc, type, msg}. */
int mcp_tool_validate(const McpTool *t, json_t *args, Error *e, json_t **ret_errors);
/* Runs the tool: 0 when C's outcome is set, MCP_CALL_PENDING when C->done will be called. */
int mcp_tool_run(const McpTool *t, McpCall *c);
/* The tools/list answer for protocol revision V. */
json_t *mcp_tools_list_json(const Daemon *d, McpVersion v);
size_t mcp_tools_count(void);

/* --- the tools (mcp-calls.c) --- */
int mcp_call_profile(McpCall *c);
int mcp_call_resolve(McpCall *c);
int mcp_call_create(McpCall *c);
int mcp_call_status(McpCall *c);
int mcp_call_audit_get(McpCall *c);
int mcp_call_exec(McpCall *c);
int mcp_call_exec_status(McpCall *c);
int mcp_call_cancel(McpCall *c);
int mcp_call_write_file(McpCall *c);
int mcp_call_read_file(McpCall *c);
int mcp_call_release(McpCall *c);
int mcp_call_list_files(McpCall *c);
int mcp_call_mkdir(McpCall *c);
int mcp_call_delete_file(McpCall *c);
int mcp_call_move_file(McpCall *c);

/* A SHA-256 over the settings that shape what a command sees (isolation, network, limits),
 * "sha256:<hex>": changes when the worker's runtime profile changes. */
int mcp_profile_hash(const Daemon *d, char *buf, size_t n);
