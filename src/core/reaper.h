/* SPDX-License-Identifier: MIT */
#pragma once

#include "daemon.h"

/* The daemon's background housekeeping thread: deletes released workspaces from
 * DATA/trash (fd-relative, never following links), and returns quarantined uids to the
 * pool once their quarantine is over and nothing of them remains (no process, no kernel
 * key, no file left in the trash). */
int reaper_start(Daemon *d, Reaper **ret);
/* Wakes the reaper now (after a release). */
void reaper_kick(Reaper *r);
void reaper_stop(Reaper *r);
