/* SPDX-License-Identifier: MIT */
#pragma once

/* `sandloom mcp [--url URL] [--token TOKEN] [--data-dir DIR]`: the MCP stdio transport,
 * bridging JSON-RPC lines on stdin/stdout to the daemon's streamable HTTP endpoint. Returns
 * the exit status (0 at the end of stdin). */
int mcp_stdio_main(int argc, char **argv);
