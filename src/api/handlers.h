/* SPDX-License-Identifier: MIT */
#pragma once

#include "http.h"

/* Every handler, by resource. The route table in router.c maps method + pattern to these. */

/* health.c */
int handle_health(Request *req);            /* GET /health */
int handle_healthz(Request *req);           /* GET /healthz (public; more with the token) */

/* sandboxes.c */
int handle_sandbox_resolve(Request *req);   /* POST   /api/v1/sandboxes/resolve */
int handle_sandbox_list(Request *req);      /* GET    /api/v1/sandboxes */
int handle_sandbox_get(Request *req);       /* GET    /api/v1/sandboxes/{id} */
int handle_sandbox_connect(Request *req);   /* POST   /api/v1/sandboxes/{id} */
int handle_sandbox_release(Request *req);   /* DELETE /api/v1/sandboxes/{id} */
int handle_sandbox_audit(Request *req);     /* GET    /api/v1/sandboxes/{id}/audit */

/* files.c */
int handle_files_put(Request *req);         /* PUT  /api/v1/sandboxes/{id}/files */
int handle_files_get(Request *req);         /* GET  /api/v1/sandboxes/{id}/files */
int handle_files_raw_get(Request *req);     /* GET  /api/v1/sandboxes/{id}/files/raw */
int upload_files_raw(Request *req, int *ret_fd);
int handle_files_raw_put(Request *req);     /* PUT  /api/v1/sandboxes/{id}/files/raw (ROUTE_UPLOAD) */
int handle_files_list(Request *req);        /* GET  /api/v1/sandboxes/{id}/files/list */
int handle_files_stat(Request *req);        /* GET  /api/v1/sandboxes/{id}/files/stat */
int handle_files_mkdir(Request *req);       /* POST /api/v1/sandboxes/{id}/files/mkdir */
int handle_files_delete(Request *req);      /* POST /api/v1/sandboxes/{id}/files/delete (ROUTE_OFFLOAD) */
int handle_files_move(Request *req);        /* POST /api/v1/sandboxes/{id}/files/move */
int handle_files_archive_get(Request *req); /* GET  /api/v1/sandboxes/{id}/files/archive (ROUTE_OFFLOAD) */
int upload_files_archive(Request *req, int *ret_fd);
int handle_files_archive_put(Request *req); /* PUT  /api/v1/sandboxes/{id}/files/archive (ROUTE_UPLOAD|ROUTE_OFFLOAD) */

/* exec.c */
int handle_exec_start(Request *req);        /* POST /api/v1/sandboxes/{id}/exec (JSON or SSE) */
int handle_exec_get(Request *req);          /* GET  /api/v1/sandboxes/{id}/exec/{exec_id} (wait_seconds: long-poll) */
int handle_exec_output(Request *req);       /* GET  /api/v1/sandboxes/{id}/exec/{exec_id}/output */
int handle_exec_events(Request *req);       /* GET  /api/v1/sandboxes/{id}/exec/{exec_id}/events (SSE) */
int handle_exec_cancel(Request *req);       /* POST /api/v1/sandboxes/{id}/exec/{exec_id}/cancel */

/* mcp-http.c */
int handle_mcp(Request *req);               /* POST /mcp, POST /api/v1/sandboxes/mcp/streamable-http (ROUTE_OFFLOAD) */
