/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>

#include "store.h"

/* Who is asking. Every request becomes one of these in exactly one function
 * (api/auth.c: auth_authenticate), and every core call and list query is scoped by
 * its tenant. Today there is one admin principal in the "default" tenant; tenants with
 * their own keys will fill the same struct. */
typedef struct Principal {
        char name[PRINCIPAL_NAME_MAX + 1];   /* for the audit trail: "admin" */
        char tenant[OWNER_MAX + 1];          /* the owner of what it creates: "default" */
        bool admin;                          /* may see operator views */
} Principal;
