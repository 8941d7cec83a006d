/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "store.h"

/* Who this daemon is: its API token and its worker identity. Library code: returns errors
 * with a sentence in ERRBUF and leaves logging to the caller. The token never appears in a
 * sentence. */

typedef enum TokenSource {
        TOKEN_FROM_ENV,        /* SANDBOX_INTERNAL_TOKEN */
        TOKEN_FROM_FILE,       /* SANDBOX_INTERNAL_TOKEN_FILE */
        TOKEN_FROM_DATA,       /* DATA/token, kept from an earlier start */
        TOKEN_GENERATED,       /* DATA/token, created now */
} TokenSource;

#define TOKEN_MAX 4096

typedef struct TokenInfo {
        TokenSource source;
        bool loose_permissions;  /* the token file is readable by others (worth a warning) */
} TokenInfo;

/* A token is 1..TOKEN_MAX printable ASCII characters without spaces. */
bool identity_token_is_valid(const char *t);

/* The token: SANDBOX_INTERNAL_TOKEN, else the first line of SANDBOX_INTERNAL_TOKEN_FILE,
 * else DATA/token (DATA_FD), created on first start as 64 hex characters (32 random
 * bytes), written atomically with mode 0600. */
int identity_load_token(const Config *c, int data_fd, char **ret_token, TokenInfo *ret_info, char *errbuf,
                        size_t errlen);

/* The worker id: SANDBOX_WORKER_ID, else DATA/worker_id, created on first start as
 * "w-" + 12 hex characters and kept. */
int identity_load_worker_id(const Config *c, int data_fd, char ret[WORKER_ID_MAX + 1], bool *ret_created,
                            char *errbuf, size_t errlen);

/* A fresh worker epoch: 32 random hex characters, new at every start. */
int identity_new_epoch(char ret[EPOCH_LEN + 1]);
