/* SPDX-License-Identifier: MIT */
/* `sandloom sandbox create|ls|show|rm|audit`. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "cli.h"
#include "json-util.h"
#include "random-util.h"
#include "string-util.h"

enum {
        OPT_SCOPE = CLI_OPT_COMMAND,
        OPT_PROFILE,
        OPT_STATUS,
        OPT_ALL,
        OPT_REASON,
};

/* Column widths over the rows, then the rows: a plain table, no truncation. */
static void print_table(const char *const *heads, size_t ncols, json_t *rows, const char *const *keys) {
        size_t w[8] = {};
        char cell[1024];
        size_t i;
        json_t *row;

        for (size_t k = 0; k < ncols; k++)
                w[k] = strlen(heads[k]);
        json_array_foreach(rows, i, row)
                for (size_t k = 0; k < ncols; k++)
                        w[k] = MAX(w[k], strlen(cli_cell(json_object_get(row, keys[k]), cell, sizeof cell)));
        for (size_t k = 0; k < ncols; k++)
                printf("%-*s%s", k + 1 < ncols ? (int) w[k] : 0, heads[k], k + 1 < ncols ? "  " : "\n");
        json_array_foreach(rows, i, row)
                for (size_t k = 0; k < ncols; k++)
                        printf("%-*s%s", k + 1 < ncols ? (int) w[k] : 0,
                               cli_cell(json_object_get(row, keys[k]), cell, sizeof cell), k + 1 < ncols ? "  " : "\n");
}

/* ---- create ---- */

static const CliOption create_options[] = {
        { "scope", 's', "SCOPE", OPT_SCOPE, "The workspace_scope_id (default: \"default\", as the Python SDK)." },
        { "profile", 0, "PROFILE", OPT_PROFILE, "The profile to record." },
        {},
};

static const CliCommand create_cmd = {
        .name = "sandbox create",
        .args = "[ID]",
        .summary = "Create a sandbox (or find the live one) and make it ready: resolve + connect.",
        .help = "Without ID a random one (sbx-...) is made up. Prints \"ID GENERATION\"; with --json the record.\n"
                "Idempotent: creating a live sandbox again from the same scope answers the same sandbox.",
        .options = create_options,
        .max_pos = 1,
};

static int run_create(CliArgs *a, Client *c) {
        _cleanup_json_ json_t *body = NULL, *rec = NULL, *ready = NULL, *conn = NULL;
        _cleanup_free_ char *path = NULL;
        const char *id = a->n_pos > 0 ? a->pos[0] : NULL, *scope = cli_value(a, OPT_SCOPE),
                   *profile = cli_value(a, OPT_PROFILE);
        char made[32], hex[13];
        json_t *g;
        int r;

        if (!id) {
                if (random_hex(hex, sizeof hex, 6) < 0)
                        return cli_error(CLI_LOCAL_FILE, "no randomness for a sandbox id");
                (void) bsprintf(made, sizeof made, "sbx-%s", hex);
                id = made;
        }
        body = json_pack("{s:s, s:s}", "sandbox_id", id, "workspace_scope_id", scope ?: "default");
        if (!body || (profile && json_object_set_new(body, "profile", json_string(profile)) < 0))
                return cli_error(CLI_LOCAL_FILE, "out of memory");
        r = cli_call(c, "POST", "/api/v1/sandboxes/resolve", body, &rec);
        if (r != 0)
                return r;
        g = json_object_get(rec, "generation");
        if (!json_is_integer(g))
                return cli_error(CLI_BAD_RESPONSE, "the resolve answer has no generation");
        conn = json_pack("{s:O}", "generation", g);
        path = cli_sandbox_path(id, "");
        if (!conn || !path)
                return cli_error(CLI_LOCAL_FILE, "out of memory");
        r = cli_call(c, "POST", path, conn, &ready);
        if (r != 0)
                return r;
        if (a->json)
                return cli_print_json(ready);
        printf("%s %" JSON_INTEGER_FORMAT "\n", id, json_integer_value(json_object_get(ready, "generation")));
        return 0;
}

/* ---- ls ---- */

static const CliOption ls_options[] = {
        { "scope", 's', "SCOPE", OPT_SCOPE, "Only the sandboxes of this workspace_scope_id." },
        { "status", 0, "STATUS", OPT_STATUS, "A status (READY, ASSIGNED, ...), live (the default) or any." },
        { "all", 'a', NULL, OPT_ALL, "Released sandboxes too (--status any)." },
        {},
};

static const CliCommand ls_cmd = {
        .name = "sandbox ls",
        .summary = "List the sandboxes.",
        .help = "One line per sandbox: id, status, generation, scope, creation time. --json prints\n"
                "{\"sandboxes\": [records], \"total\"} with every page fetched.",
        .options = ls_options,
};

static int run_ls(CliArgs *a, Client *c) {
        static const char *const heads[] = { "SANDBOX_ID", "STATUS", "GEN", "SCOPE", "CREATED" };
        static const char *const keys[] = { "sandbox_id", "status", "generation", "workspace_scope_id", "created_at" };
        _cleanup_json_ json_t *items = NULL, *out = NULL;
        _cleanup_free_ char *path = NULL, *scope = NULL, *status = NULL;
        const char *st = cli_flag(a, OPT_ALL) ? "any" : cli_value(a, OPT_STATUS);
        int r;

        if (cli_value(a, OPT_SCOPE) && !(scope = client_escape(cli_value(a, OPT_SCOPE))))
                return cli_error(CLI_LOCAL_FILE, "out of memory");
        if (st && !(status = client_escape(st)))
                return cli_error(CLI_LOCAL_FILE, "out of memory");
        path = strprintf("/api/v1/sandboxes?status=%s%s%s", status ?: "live", scope ? "&workspace_scope_id=" : "",
                         scope ?: "");
        if (!path)
                return cli_error(CLI_LOCAL_FILE, "out of memory");
        r = cli_fetch_all(c, path, "sandboxes", &items, NULL);
        if (r != 0)
                return r;
        if (a->json) {
                out = json_pack("{s:O, s:I}", "sandboxes", items, "total", (json_int_t) json_array_size(items));
                return out ? cli_print_json(out) : cli_error(CLI_LOCAL_FILE, "out of memory");
        }
        print_table(heads, ELEMENTSOF(heads), items, keys);
        return 0;
}

/* ---- show ---- */

static const CliCommand show_cmd = {
        .name = "sandbox show",
        .args = "ID",
        .summary = "Show a sandbox's record (status, generation, uid, worker, disk usage, ...).",
        .min_pos = 1,
        .max_pos = 1,
};

static int run_show(CliArgs *a, Client *c) {
        _cleanup_json_ json_t *rec = NULL;
        _cleanup_free_ char *path = cli_sandbox_path(a->pos[0], "");
        int r;

        if (!path)
                return cli_error(CLI_LOCAL_FILE, "out of memory");
        r = cli_call(c, "GET", path, NULL, &rec);
        if (r != 0)
                return r;
        if (a->json)
                return cli_print_json(rec);
        cli_print_fields(rec, stdout);
        return 0;
}

/* ---- rm ---- */

static const CliOption rm_options[] = {
        { "reason", 0, "TEXT", OPT_REASON, "Recorded in the sandbox's history (at most 128 characters)." },
        {},
};

static const CliCommand rm_cmd = {
        .name = "sandbox rm",
        .args = "ID",
        .summary = "Release a sandbox: cancel its commands and delete its files.",
        .help = "Answers RELEASED also for an unknown id (as the API does). Prints \"ID RELEASED\".",
        .options = rm_options,
        .min_pos = 1,
        .max_pos = 1,
};

static int run_rm(CliArgs *a, Client *c) {
        _cleanup_json_ json_t *answer = NULL;
        _cleanup_free_ char *reason = NULL, *path = NULL;
        int r;

        if (cli_value(a, OPT_REASON) && !(reason = client_escape(cli_value(a, OPT_REASON))))
                return cli_error(CLI_LOCAL_FILE, "out of memory");
        path = cli_sandbox_path(a->pos[0], "");
        if (path && reason) {
                char *p = strprintf("%s?reason=%s", path, reason);
                free(path);
                path = p;
        }
        if (!path)
                return cli_error(CLI_LOCAL_FILE, "out of memory");
        r = cli_call(c, "DELETE", path, NULL, &answer);
        if (r != 0)
                return r;
        if (a->json)
                return cli_print_json(answer);
        printf("%s %s\n", a->pos[0], json_string_value(json_object_get(answer, "status")) ?: "RELEASED");
        return 0;
}

/* ---- audit ---- */

static const CliCommand audit_cmd = {
        .name = "sandbox audit",
        .args = "ID",
        .summary = "Show a sandbox's lifecycle history (created, connected, released, ...).",
        .help = "Oldest first, every page fetched. --json prints {\"sandbox_id\", \"events\", \"total\"}.",
        .min_pos = 1,
        .max_pos = 1,
};

static int run_audit(CliArgs *a, Client *c) {
        static const char *const heads[] = { "SEQ", "AT", "EVENT", "GEN", "PRINCIPAL", "REASON" };
        static const char *const keys[] = { "seq", "at", "event", "generation", "principal", "reason" };
        _cleanup_json_ json_t *items = NULL, *first = NULL, *out = NULL;
        _cleanup_free_ char *path = cli_sandbox_path(a->pos[0], "/audit");
        int r;

        if (!path)
                return cli_error(CLI_LOCAL_FILE, "out of memory");
        r = cli_fetch_all(c, path, "events", &items, &first);
        if (r != 0)
                return r;
        if (a->json) {
                out = json_pack("{s:O?, s:O, s:I}", "sandbox_id", json_object_get(first, "sandbox_id"), "events", items,
                                "total", (json_int_t) json_array_size(items));
                return out ? cli_print_json(out) : cli_error(CLI_LOCAL_FILE, "out of memory");
        }
        print_table(heads, ELEMENTSOF(heads), items, keys);
        return 0;
}

static const CliVerb verbs[] = {
        { &create_cmd, run_create }, { &ls_cmd, run_ls }, { &show_cmd, run_show },
        { &rm_cmd, run_rm },         { &audit_cmd, run_audit },
};

int cli_sandbox_main(int argc, char **argv) {
        return cli_dispatch("sandbox", "Create, list, inspect and release sandboxes.", verbs, ELEMENTSOF(verbs), argc,
                            argv);
}
