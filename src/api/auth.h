/* SPDX-License-Identifier: MIT */
#pragma once

#include "daemon.h"
#include "principal.h"

/* THE one function that turns a request into a principal. AUTHORIZATION is the request's
 * Authorization header (NULL if absent). Today: "Bearer <token>" compared in constant time
 * with the daemon's token gives the admin principal of the "default" tenant. Returns 0 and
 * fills RET, or -EACCES (missing, malformed or wrong: the caller answers 401 without
 * saying which). Tenants with their own API keys will be added here, nowhere else. */
int auth_authenticate(Daemon *d, const char *authorization, Principal *ret);
