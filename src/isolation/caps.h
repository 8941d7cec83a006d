/* SPDX-License-Identifier: MIT */
#pragma once

/* Capabilities of a sandbox process: every set empty. */

/* Drops every capability from the bounding set (needs CAP_SETPCAP, so before the
 * identity changes) and locks the securebits so that uid 0 could never regain them. The
 * spawner calls it once for itself at start-up: the bounding set only limits what execve()
 * can grant, and the spawner never executes anything, so its children start with an empty
 * one and keep their full effective set for the launch steps. */
int caps_drop_bounding(void);

/* Clears the ambient set and sets permitted, effective and inheritable to empty, then
 * checks them. After ids_drop(). */
int caps_clear(void);
