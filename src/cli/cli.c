/* SPDX-License-Identifier: MIT */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "json-util.h"
#include "string-util.h"

#define CLI_TIMEOUT_MS (10L * 60 * 1000) /* a JSON call that takes longer than this is stuck */
#define CLI_ERROR_MAX 2048
#define PAGES_MAX 100000 /* a daemon that keeps answering has_more cannot keep us forever */

static const CliOption global_options[] = {
        { "url", 0, "URL", CLI_OPT_URL,
          "The daemon (default: $SANDBOX_BASE_URL, else DATA_DIR/endpoint, else http://127.0.0.1:8080)." },
        { "token", 0, "TOKEN", CLI_OPT_TOKEN,
          "The API token (default: $SANDBOX_INTERNAL_TOKEN, the file named by $SANDBOX_INTERNAL_TOKEN_FILE, "
          "else DATA_DIR/token). Other users can see it in ps: prefer the environment or --token-file." },
        { "token-file", 0, "FILE", CLI_OPT_TOKEN_FILE, "Read the token from FILE." },
        { "data-dir", 0, "DIR", CLI_OPT_DATA_DIR,
          "A local daemon's data directory, for its endpoint and token files (default: $SANDBOX_DATA_DIR, "
          "else ./data)." },
        { "json", 0, NULL, CLI_OPT_JSON, "Print the daemon's answer as JSON." },
        { "help", 'h', NULL, CLI_OPT_HELP, "Show this help." },
        {},
};

/* Control characters would break the one-line promise (a message can quote a path). */
static void put_sanitized(FILE *f, const char *s) {
        for (; *s; s++)
                fputc((unsigned char) *s < 0x20 || *s == 0x7f ? '?' : *s, f);
}

int cli_error(const char *code, const char *fmt, ...) {
        char msg[CLI_ERROR_MAX];
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        fflush(stdout);
        fputs("sandloom: ", stderr);
        put_sanitized(stderr, code);
        fputs(": ", stderr);
        put_sanitized(stderr, msg);
        fputc('\n', stderr);
        return CLI_EXIT_ERROR;
}

int cli_usage_error(const CliArgs *a, const char *fmt, ...) {
        char msg[CLI_ERROR_MAX];
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        fflush(stdout);
        fprintf(stderr, "sandloom %s: ", a->cmd->name);
        put_sanitized(stderr, msg);
        fprintf(stderr, " (see `sandloom %s --help`)\n", a->cmd->name);
        return CLI_EXIT_USAGE;
}

int cli_http_error(long status, const json_t *body) {
        const json_t *detail = body ? json_object_get(body, "detail") : NULL;
        const char *code = NULL, *message = NULL;

        if (json_is_object(detail)) {
                code = client_error_code(body);
                message = json_string_value(json_object_get(detail, "message"));
        } else if (json_is_string(detail))
                code = json_string_value(detail); /* Sandloom's bare-string form */
        if (code && status == 0)
                return cli_error(code, "%s", message ?: "the daemon refused the request");
        if (code)
                return cli_error(code, "%s (HTTP %ld)", message ?: "the daemon refused the request", status);
        return cli_error(CLI_BAD_RESPONSE, "HTTP %ld from the daemon, without an error code", status);
}

int cli_request_error(int r, const char *err) {
        if (r == -ENOMEM)
                return cli_error(CLI_LOCAL_FILE, "out of memory");
        return cli_error(CLI_CONNECTION_FAILED, "%s", !isempty(err) ? err : strerror(-r));
}

/* ---- options ---- */

static const CliOption *find_option(const CliCommand *cmd, const char *name, size_t len, char short_name) {
        const CliOption *tables[] = { cmd->options, global_options };

        for (size_t t = 0; t < ELEMENTSOF(tables); t++)
                for (const CliOption *o = tables[t]; o && o->name; o++) {
                        if (o->id == CLI_OPT_JSON && cmd->no_json)
                                continue;
                        if (short_name ? o->short_name == short_name : strlen(o->name) == len && strneq(o->name, name, len))
                                return o;
                }
        return NULL;
}

static void store(CliArgs *a, const CliOption *o, const char *value) {
        switch (o->id) {
        case CLI_OPT_URL:
                a->url = value;
                break;
        case CLI_OPT_TOKEN:
                a->token = value;
                break;
        case CLI_OPT_TOKEN_FILE:
                a->token_file = value;
                break;
        case CLI_OPT_DATA_DIR:
                a->data_dir = value;
                break;
        case CLI_OPT_JSON:
                a->json = true;
                break;
        case CLI_OPT_HELP:
                a->help = true;
                break;
        default:
                a->values[a->n_values++] = (CliValue) { .id = o->id, .value = value };
        }
}

int cli_parse(const CliCommand *cmd, int argc, char **argv, CliArgs *a) {
        bool only_positionals = false;
        int i;

        *a = (CliArgs) { .cmd = cmd };
        a->pos = calloc((size_t) argc + 1, sizeof *a->pos);
        a->values = calloc((size_t) argc + 1, sizeof *a->values);
        if (!a->pos || !a->values) {
                fprintf(stderr, "sandloom: out of memory\n");
                return CLI_EXIT_ERROR;
        }
        for (i = 0; i < argc; i++) {
                const char *w = argv[i], *value = NULL;
                const CliOption *o;

                if (!only_positionals && streq(w, "--")) {
                        if (cmd->command_follows) {
                                if (a->n_pos < cmd->max_pos && !a->help)
                                        return cli_usage_error(a, "missing %s before --", a->n_pos == 0 ? "ID" : "argument");
                                i++;
                                break;
                        }
                        only_positionals = true;
                        continue;
                }
                if (only_positionals || w[0] != '-' || w[1] == '\0') {
                        if (cmd->command_follows && a->n_pos == cmd->max_pos)
                                break; /* the command starts here */
                        if (a->n_pos == cmd->max_pos)
                                return cli_usage_error(a, "unexpected argument '%.64s'", w);
                        a->pos[a->n_pos++] = w;
                        continue;
                }
                if (w[1] == '-') {
                        const char *name = w + 2, *eq = strchr(name, '=');
                        size_t len = eq ? (size_t) (eq - name) : strlen(name);

                        o = find_option(cmd, name, len, 0);
                        if (!o)
                                return cli_usage_error(a, "unknown option '--%.*s'", (int) MIN(len, 64), name);
                        if (eq) {
                                if (!o->arg)
                                        return cli_usage_error(a, "--%s takes no value", o->name);
                                value = eq + 1;
                        }
                } else {
                        if (w[2] != '\0')
                                return cli_usage_error(a, "unknown option '%.64s' (write long options with --)", w);
                        o = find_option(cmd, NULL, 0, w[1]);
                        if (!o)
                                return cli_usage_error(a, "unknown option '%.64s'", w);
                }
                if (o->arg && !value) {
                        if (i + 1 >= argc)
                                return cli_usage_error(a, "--%s needs a value (%s)", o->name, o->arg);
                        value = argv[++i];
                }
                store(a, o, value);
        }
        if (a->help)
                return 0;
        if (i < argc) {
                a->rest = argv + i;
                a->n_rest = (unsigned) (argc - i);
        }
        if (a->n_pos < cmd->min_pos)
                return cli_usage_error(a, "missing argument%s: expected %s", cmd->min_pos - a->n_pos > 1 ? "s" : "",
                                       cmd->args);
        if (cmd->command_follows && a->n_rest == 0)
                return cli_usage_error(a, "missing the command to run");
        return 0;
}

void cli_args_done(CliArgs *a) {
        free(a->pos);
        free(a->values);
        a->pos = NULL;
        a->values = NULL;
}

const char *cli_value(const CliArgs *a, int id) {
        for (unsigned i = a->n_values; i > 0; i--)
                if (a->values[i - 1].id == id)
                        return a->values[i - 1].value;
        return NULL;
}

bool cli_flag(const CliArgs *a, int id) {
        for (unsigned i = 0; i < a->n_values; i++)
                if (a->values[i].id == id)
                        return true;
        return false;
}

/* TEXT from column INDENT, wrapped at HELP_WIDTH on spaces. */
#define HELP_WIDTH 100
static void print_wrapped(FILE *f, const char *text, int indent) {
        int col = indent;

        while (*text) {
                size_t word = strcspn(text, " ");

                if (col > indent && col + 1 + (int) word > HELP_WIDTH) {
                        fprintf(f, "\n%*s", indent, "");
                        col = indent;
                } else if (col > indent) {
                        fputc(' ', f);
                        col++;
                }
                fprintf(f, "%.*s", (int) word, text);
                col += (int) word;
                text += word;
                text += strspn(text, " ");
        }
        fputc('\n', f);
}

static void print_options(const CliCommand *cmd, const CliOption *options, FILE *f) {
        for (const CliOption *o = options; o && o->name; o++) {
                char left[64], help[1024];

                if (o->id == CLI_OPT_JSON && cmd->no_json)
                        continue;
                if (o->short_name)
                        (void) bsprintf(left, sizeof left, "-%c, --%s%s%s", o->short_name, o->name, o->arg ? " " : "",
                                        o->arg ?: "");
                else
                        (void) bsprintf(left, sizeof left, "    --%s%s%s", o->name, o->arg ? " " : "", o->arg ?: "");
                (void) bsprintf(help, sizeof help, "%s%s", o->help, o->repeatable ? " (repeatable)" : "");
                if (strlen(left) > 24)
                        fprintf(f, "  %s\n%28s", left, "");
                else
                        fprintf(f, "  %-24s  ", left);
                print_wrapped(f, help, 28);
        }
}

void cli_print_help(const CliCommand *cmd, FILE *f) {
        fprintf(f, "Usage: sandloom %s [OPTIONS]%s%s\n\n%s\n", cmd->name, isempty(cmd->args) ? "" : " ",
                cmd->args ?: "", cmd->summary);
        if (!isempty(cmd->help))
                fprintf(f, "\n%s\n", cmd->help);
        if (cmd->options && cmd->options->name) {
                fprintf(f, "\nOptions:\n");
                print_options(cmd, cmd->options, f);
        }
        fprintf(f, "\nGlobal options:\n");
        print_options(cmd, global_options, f);
        if (!cmd->command_follows) /* exec explains its own */
                fprintf(f, "\nExit status: 0 on success, 1 on an error (one line on stderr: \"sandloom: CODE: "
                           "message\"), 2 on bad usage.\n");
}

/* ---- the client ---- */

int cli_connect(const CliArgs *a, long timeout_ms, Client **ret) {
        _cleanup_free_ char *token = NULL;
        char err[1024] = "";
        ClientOptions o = {
                .url = a->url,
                .token = a->token,
                .data_dir = a->data_dir,
                .timeout_ms = timeout_ms,
        };
        int r;

        if (a->token_file && !a->token) {
                r = client_read_token_file(a->token_file, &token);
                if (r == -ENODATA)
                        return cli_error(CLI_NO_TOKEN, "the token file %s is empty", a->token_file);
                if (r < 0)
                        return cli_error(CLI_NO_TOKEN, "cannot read the token file %s: %s", a->token_file, strerror(-r));
                o.token = token;
        }
        r = client_new(&o, ret, err, sizeof err);
        if (token)
                explicit_zero(token, strlen(token));
        if (r == -EINVAL)
                return cli_error("CLI_BAD_URL", "%s", err);
        if (r == -ENOMEM || r == -EIO)
                return cli_error(CLI_LOCAL_FILE, "%s", err);
        if (r < 0)
                return cli_error(CLI_NO_TOKEN, "%s", err);
        return 0;
}

int cli_call(Client *c, const char *method, const char *path, json_t *body, json_t **ret) {
        _cleanup_json_ json_t *answer = NULL;
        char err[1024] = "";
        long status = 0;
        int r;

        r = client_json(c, method, path, body, &status, &answer, err, sizeof err);
        if (r < 0)
                return cli_request_error(r, err);
        if (status < 200 || status >= 300)
                return cli_http_error(status, answer);
        if (!answer)
                return cli_error(CLI_BAD_RESPONSE, "the daemon's answer (HTTP %ld) is not JSON", status);
        if (ret)
                *ret = TAKE_PTR(answer);
        return 0;
}

char *cli_sandbox_path(const char *id, const char *suffix) {
        _cleanup_free_ char *e = client_escape(id);

        return e ? strprintf("/api/v1/sandboxes/%s%s", e, suffix) : NULL;
}

int cli_sandbox_generation(Client *c, const char *id, uint64_t *ret) {
        _cleanup_json_ json_t *rec = NULL;
        _cleanup_free_ char *path = cli_sandbox_path(id, "");
        json_t *g;
        int r;

        if (!path)
                return cli_error(CLI_LOCAL_FILE, "out of memory");
        r = cli_call(c, "GET", path, NULL, &rec);
        if (r != 0)
                return r;
        g = json_object_get(rec, "generation");
        if (!json_is_integer(g) || json_integer_value(g) < 0)
                return cli_error(CLI_BAD_RESPONSE, "the sandbox record has no generation");
        *ret = (uint64_t) json_integer_value(g);
        return 0;
}

/* Reads every page of a list (PATH has a query string already, or not) into one array. */
int cli_fetch_all(Client *c, const char *path, const char *key, json_t **ret_items, json_t **ret_first) {
        _cleanup_json_ json_t *items = json_array(), *first = NULL;
        uint64_t offset = 0;

        if (!items)
                return cli_error(CLI_LOCAL_FILE, "out of memory");
        for (unsigned page = 0; page < PAGES_MAX; page++) {
                _cleanup_free_ char *p = strprintf("%s%soffset=%" PRIu64, path, strchr(path, '?') ? "&" : "?", offset);
                _cleanup_json_ json_t *answer = NULL;
                json_t *list, *total;
                int r;

                if (!p)
                        return cli_error(CLI_LOCAL_FILE, "out of memory");
                r = cli_call(c, "GET", p, NULL, &answer);
                if (r != 0)
                        return r;
                list = json_object_get(answer, key);
                if (!json_is_array(list))
                        return cli_error(CLI_BAD_RESPONSE, "the answer has no \"%s\" list", key);
                if (json_array_extend(items, list) < 0)
                        return cli_error(CLI_LOCAL_FILE, "out of memory");
                offset += json_array_size(list);
                total = json_object_get(answer, "total");
                if (!first)
                        first = json_incref(answer);
                if (json_array_size(list) == 0 || !json_is_integer(total) ||
                    offset >= (uint64_t) json_integer_value(total))
                        break;
        }
        *ret_items = TAKE_PTR(items);
        if (ret_first)
                *ret_first = TAKE_PTR(first);
        return 0;
}

/* ---- output ---- */

int cli_print_json(const json_t *j) {
        if (json_dumpf(j, stdout, JSON_INDENT(2)) < 0 || fputc('\n', stdout) == EOF || fflush(stdout) == EOF)
                return cli_error(CLI_LOCAL_FILE, "cannot write to stdout: %s", strerror(errno));
        return 0;
}

const char *cli_cell(const json_t *v, char *buf, size_t buflen) {
        _cleanup_free_ char *text = NULL;

        if (!v || json_is_null(v))
                (void) strscpy(buf, buflen, "-");
        else if (json_is_string(v))
                (void) strscpy(buf, buflen, json_string_value(v));
        else if (json_is_integer(v))
                (void) bsprintf(buf, buflen, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        else if (json_is_true(v) || json_is_false(v))
                (void) strscpy(buf, buflen, json_is_true(v) ? "true" : "false");
        else {
                text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
                (void) strscpy(buf, buflen, text ?: "?");
        }
        for (char *p = buf; *p; p++)
                if ((unsigned char) *p < 0x20 || *p == 0x7f)
                        *p = '?';
        return buf;
}

void cli_print_fields(const json_t *obj, FILE *f) {
        const char *key;
        json_t *v;
        size_t w = 0;

        json_object_foreach((json_t *) obj, key, v)
                w = MAX(w, strlen(key));
        json_object_foreach((json_t *) obj, key, v) {
                char cell[4096];

                fprintf(f, "%s:%*s  %s\n", key, (int) (w - strlen(key)), "", cli_cell(v, cell, sizeof cell));
        }
}

/* ---- dispatch ---- */

/* A closed stdin/stdout/stderr would be reused by the next open (a socket, a pipe), and the
 * command's output written into it: park /dev/null there first. */
static void ensure_stdio(void) {
        for (int fd = 0; fd <= 2; fd++)
                if (fcntl(fd, F_GETFD) < 0 && errno == EBADF)
                        (void) open("/dev/null", O_RDWR | O_NOCTTY | O_CLOEXEC); /* lands on FD: the lowest free */
}

int cli_run(const CliCommand *cmd, CliRun run, int argc, char **argv) {
        _cleanup_(cli_args_done) CliArgs a = {};
        _cleanup_client_ Client *c = NULL;
        int r;

        ensure_stdio();

        r = cli_parse(cmd, argc, argv, &a);
        if (r != 0)
                return r;
        if (a.help) {
                cli_print_help(cmd, stdout);
                return 0;
        }
        r = cli_connect(&a, cmd->streams ? 0 : CLI_TIMEOUT_MS, &c);
        if (r != 0)
                return r;
        return run(&a, c);
}

static void group_usage(const char *group, const char *group_help, const CliVerb *verbs, size_t n, FILE *f) {
        fprintf(f, "Usage: sandloom %s COMMAND [OPTIONS] ...\n\n%s\n\nCommands:\n", group, group_help);
        for (size_t i = 0; i < n; i++) {
                const char *verb = verbs[i].cmd->name + strlen(group) + 1;
                fprintf(f, "  %-8s %s\n", verb, verbs[i].cmd->summary);
        }
        fprintf(f, "\nEvery command takes --url, --token, --token-file, --data-dir, --help and --json%s.\n"
                   "See `sandloom %s COMMAND --help`.\n", streq(group, "fs") ? " (but cat)" : "", group);
}

int cli_dispatch(const char *group, const char *group_help, const CliVerb *verbs, size_t n, int argc, char **argv) {
        if (argc < 1) {
                fprintf(stderr, "sandloom %s: missing COMMAND (see `sandloom %s --help`)\n", group, group);
                return CLI_EXIT_USAGE;
        }
        if (streq(argv[0], "--help") || streq(argv[0], "-h") || streq(argv[0], "help")) {
                group_usage(group, group_help, verbs, n, stdout);
                return 0;
        }
        for (size_t i = 0; i < n; i++)
                if (streq(argv[0], verbs[i].cmd->name + strlen(group) + 1))
                        return cli_run(verbs[i].cmd, verbs[i].run, argc - 1, argv + 1);
        fprintf(stderr, "sandloom %s: unknown command '", group);
        put_sanitized(stderr, argv[0]);
        fprintf(stderr, "' (see `sandloom %s --help`)\n", group);
        return CLI_EXIT_USAGE;
}
