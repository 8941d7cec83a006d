/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>

#include "daemon.h"

/* The HTTP server on libmicrohttpd: epoll, a thread pool, suspend/resume for parked
 * requests, an offload pool for slow handlers. */

typedef struct Server Server;

/* Creates the listening socket for LISTEN ("127.0.0.1:8080", "0.0.0.0:0", "[::1]:8080"):
 * SO_REUSEADDR, bound, listening, so that port 0 works and the real port is known before
 * the server starts. Writes the URL clients use (with the real port) into RET_URL.
 * Returns the fd or a negative errno, with a sentence in ERRBUF. */
int server_listen(const char *listen, char *ret_url, size_t url_len, char *errbuf, size_t errlen);

/* Starts serving D on LISTEN_FD (taken over). */
int server_start(Daemon *d, int listen_fd, Server **ret, char *errbuf, size_t errlen);

/* Stops accepting new connections; existing ones are served (new requests on them get
 * 503 SANDBOX_SHUTTING_DOWN once d->shutting_down is set). */
void server_quiesce(Server *s);

/* Requests received and not yet completed (parked ones included). */
unsigned server_active_requests(Server *s);

/* Cancels queued offload jobs, waits for running ones, answers parked requests with 503,
 * stops libmicrohttpd and frees S. */
void server_stop(Server *s);
