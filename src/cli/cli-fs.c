/* SPDX-License-Identifier: MIT */
/* `sandloom fs ls|stat|cat|get|put|rm|mv|mkdir`: the files API. Paths are as the sandbox sees
 * them (/workspace/..., /home/sandbox/..., /cache/..., /envs/...; relative = under /workspace).
 * cat/get/put use the raw endpoints and stream: nothing is held whole in memory. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "fileio.h"
#include "json-util.h"
#include "string-util.h"

#define FS_PATHS_MAX 1000 /* rm and mkdir take several paths */

enum {
        OPT_LONG = CLI_OPT_COMMAND,
        OPT_PARENTS,
        OPT_RECURSIVE,
        OPT_OVERWRITE,
};

/* "/api/v1/sandboxes/ID/files<SUFFIX>?path=P&generation=G" */
static char *files_path(const char *id, const char *suffix, const char *path, uint64_t generation) {
        _cleanup_free_ char *p = client_escape(path), *s = NULL;

        if (!p)
                return NULL;
        s = strprintf("/files%s?path=%s&generation=%" PRIu64, suffix, p, generation);
        return s ? cli_sandbox_path(id, s) : NULL;
}

/* A POST of BODY (stolen) + generation to /files/<OP>; prints the answer with --json. */
static int files_post(const CliArgs *a, Client *c, uint64_t generation, const char *op, json_t *body) {
        _cleanup_json_ json_t *b = body, *answer = NULL;
        _cleanup_free_ char *suffix = strprintf("/files/%s", op), *path = NULL;
        int r;

        path = suffix ? cli_sandbox_path(a->pos[0], suffix) : NULL;
        if (!b || !path || json_object_set_new(b, "generation", json_integer((json_int_t) generation)) < 0)
                return cli_error(CLI_LOCAL_FILE, "out of memory (or a path that is not valid UTF-8)");
        r = cli_call(c, "POST", path, b, &answer);
        if (r != 0)
                return r;
        return a->json ? cli_print_json(answer) : 0;
}

/* ---- ls ---- */

static const CliOption ls_options[] = {
        { "long", 'l', NULL, OPT_LONG, "One line per entry: type, mode, size, modification time, name." },
        {},
};

static const CliCommand ls_cmd = {
        .name = "fs ls",
        .args = "ID [PATH]",
        .summary = "List a directory (default /workspace).",
        .help = "Names one per line, directories with a trailing /. --json prints {\"path\", \"entries\", \"total\"}\n"
                "with every page fetched; an entry is {name, path, type, size_bytes, modified_at, mode}.",
        .options = ls_options,
        .min_pos = 1,
        .max_pos = 2,
};

static char type_char(const char *type) {
        return streq(type, "directory") ? 'd' : streq(type, "symlink") ? 'l' : streq(type, "file") ? '-' : '?';
}

static int run_ls(CliArgs *a, Client *c) {
        _cleanup_json_ json_t *items = NULL, *first = NULL, *out = NULL;
        _cleanup_free_ char *path = NULL;
        const char *dir = a->n_pos > 1 ? a->pos[1] : "/workspace";
        uint64_t generation;
        size_t i;
        json_t *e;
        int r;

        r = cli_sandbox_generation(c, a->pos[0], &generation);
        if (r != 0)
                return r;
        path = files_path(a->pos[0], "/list", dir, generation);
        if (!path)
                return cli_error(CLI_LOCAL_FILE, "out of memory");
        r = cli_fetch_all(c, path, "entries", &items, &first);
        if (r != 0)
                return r;
        if (a->json) {
                out = json_pack("{s:O?, s:O, s:I}", "path", json_object_get(first, "path"), "entries", items, "total",
                                (json_int_t) json_array_size(items));
                return out ? cli_print_json(out) : cli_error(CLI_LOCAL_FILE, "out of memory");
        }
        json_array_foreach(items, i, e) {
                char name[1024], type[32], mode[32], size[32], mtime[64];
                bool is_dir;

                (void) cli_cell(json_object_get(e, "name"), name, sizeof name);
                (void) cli_cell(json_object_get(e, "type"), type, sizeof type);
                is_dir = streq(type, "directory");
                if (cli_flag(a, OPT_LONG))
                        printf("%c %s %12s %s %s%s\n", type_char(type),
                               cli_cell(json_object_get(e, "mode"), mode, sizeof mode),
                               cli_cell(json_object_get(e, "size_bytes"), size, sizeof size),
                               cli_cell(json_object_get(e, "modified_at"), mtime, sizeof mtime), name, is_dir ? "/" : "");
                else
                        printf("%s%s\n", name, is_dir ? "/" : "");
        }
        return 0;
}

/* ---- stat ---- */

static const CliCommand stat_cmd = {
        .name = "fs stat",
        .args = "ID PATH",
        .summary = "Show one file's entry (type, size, mode, modification time); a symlink itself, not its target.",
        .min_pos = 2,
        .max_pos = 2,
};

static int run_stat(CliArgs *a, Client *c) {
        _cleanup_json_ json_t *entry = NULL;
        _cleanup_free_ char *path = NULL;
        uint64_t generation;
        int r;

        r = cli_sandbox_generation(c, a->pos[0], &generation);
        if (r != 0)
                return r;
        path = files_path(a->pos[0], "/stat", a->pos[1], generation);
        if (!path)
                return cli_error(CLI_LOCAL_FILE, "out of memory");
        r = cli_call(c, "GET", path, NULL, &entry);
        if (r != 0)
                return r;
        if (a->json)
                return cli_print_json(entry);
        cli_print_fields(entry, stdout);
        return 0;
}

/* ---- cat, get: raw downloads ---- */

typedef struct Download {
        int fd;
        uint64_t bytes;
        int error;               /* a local write failed */
} Download;

static int download_sink(const char *data, size_t size, void *userdata) {
        Download *d = userdata;
        int r = loop_write(d->fd, data, size);

        if (r < 0)
                return d->error = r;
        d->bytes += size;
        return 0;
}

/* Streams the file at REMOTE into FD. Returns 0 or an exit status after printing why. */
static int download(const CliArgs *a, Client *c, const char *remote, int fd, uint64_t *ret_bytes) {
        _cleanup_free_ char *path = NULL;
        Download d = { .fd = fd };
        ClientResponse resp = {};
        ClientRequest req = {
                .method = "GET",
                .accept = "application/octet-stream",
                .sink = download_sink,
                .userdata = &d,
        };
        uint64_t generation;
        char err[1024] = "";
        int r;

        r = cli_sandbox_generation(c, a->pos[0], &generation);
        if (r != 0)
                return r;
        path = files_path(a->pos[0], "/raw", remote, generation);
        if (!path)
                return cli_error(CLI_LOCAL_FILE, "out of memory");
        req.path = path;
        r = client_perform(c, &req, &resp, err, sizeof err);
        if (r == -EPIPE)
                return CLI_EXIT_ERROR;
        if (d.error < 0)
                return cli_error(CLI_LOCAL_FILE, "writing the download: %s", strerror(-d.error));
        if (r < 0)
                return cli_request_error(r, err);
        if (resp.status < 200 || resp.status >= 300) {
                _cleanup_json_ json_t *j = json_loadb(resp.body, resp.size, 0, NULL);
                long status = resp.status;

                client_response_done(&resp);
                return cli_http_error(status, j);
        }
        client_response_done(&resp);
        if (ret_bytes)
                *ret_bytes = d.bytes;
        return 0;
}

static const CliCommand cat_cmd = {
        .name = "fs cat",
        .args = "ID PATH",
        .summary = "Write a file's bytes to stdout.",
        .min_pos = 2,
        .max_pos = 2,
        .no_json = true,
        .streams = true,
};

static int run_cat(CliArgs *a, Client *c) {
        return download(a, c, a->pos[1], STDOUT_FILENO, NULL);
}

static const CliCommand get_cmd = {
        .name = "fs get",
        .args = "ID REMOTE [LOCAL|-]",
        .summary = "Download a file.",
        .help = "LOCAL defaults to REMOTE's name in the current directory; an existing directory gets REMOTE's\n"
                "name inside it; - is stdout. The file appears complete or not at all (written to a temporary\n"
                "file beside it, then renamed). --json prints {\"path\", \"local\", \"size_bytes\"}.",
        .min_pos = 2,
        .max_pos = 3,
        .streams = true,
};

static const char *base_name(const char *p, char *buf, size_t buflen) {
        size_t n = strlen(p);
        const char *s;

        while (n > 0 && p[n - 1] == '/')
                n--;
        s = p + n;
        while (s > p && s[-1] != '/')
                s--;
        if (s == p + n || (p + n - s == 1 && s[0] == '.') || (p + n - s == 2 && strneq(s, "..", 2)))
                return NULL;
        if ((size_t) (p + n - s) >= buflen)
                return NULL;
        memcpy(buf, s, (size_t) (p + n - s));
        buf[p + n - s] = '\0';
        return buf;
}

static int run_get(CliArgs *a, Client *c) {
        _cleanup_free_ char *target = NULL, *tmp = NULL, *dir = NULL;
        _cleanup_close_ int fd = -EBADF;
        const char *remote = a->pos[1], *local = a->n_pos > 2 ? a->pos[2] : NULL;
        char name[256];
        struct stat st;
        uint64_t bytes = 0;
        mode_t mask;
        int r;

        if (local && streq(local, "-")) {
                r = download(a, c, remote, STDOUT_FILENO, &bytes);
                return r;
        }
        if (!local || (stat(local, &st) == 0 && S_ISDIR(st.st_mode))) {
                if (!base_name(remote, name, sizeof name))
                        return cli_usage_error(a, "name the local file: REMOTE has no file name");
                target = local ? strprintf("%s/%s", local, name) : strdup(name);
        } else
                target = strdup(local);
        if (!target)
                return cli_error(CLI_LOCAL_FILE, "out of memory");
        {
                const char *slash = strrchr(target, '/');
                dir = slash ? strndup(target, (size_t) (slash - target) + 1) : strdup("");
                if (!dir || !base_name(target, name, sizeof name))
                        return cli_error(CLI_LOCAL_FILE, "cannot use %s as a file name", target);
                tmp = strprintf("%s.%s.sandloom-XXXXXX", dir, name);
        }
        if (!tmp)
                return cli_error(CLI_LOCAL_FILE, "out of memory");
        fd = mkostemp(tmp, O_CLOEXEC);
        if (fd < 0)
                return cli_error(CLI_LOCAL_FILE, "cannot create a file in %s: %s", *dir ? dir : ".", strerror(errno));
        r = download(a, c, remote, fd, &bytes);
        if (r == 0) {
                mask = umask(0);
                (void) umask(mask);
                /* fsync before rename: after a crash the file is whole or absent, never empty. */
                if (fchmod(fd, 0666 & ~mask) < 0 || fsync(fd) < 0 || close(TAKE_FD(fd)) < 0 || rename(tmp, target) < 0)
                        r = cli_error(CLI_LOCAL_FILE, "cannot write %s: %s", target, strerror(errno));
        }
        if (r != 0) {
                (void) unlink(tmp);
                return r;
        }
        if (a->json) {
                _cleanup_json_ json_t *out = json_pack("{s:s, s:s, s:I}", "path", remote, "local", target, "size_bytes",
                                                       (json_int_t) bytes);
                return out ? cli_print_json(out) : cli_error(CLI_LOCAL_FILE, "out of memory");
        }
        return 0;
}

/* ---- put: raw upload ---- */

static const CliOption put_options[] = {
        { "parents", 'p', NULL, OPT_PARENTS, "Create missing parent directories." },
        {},
};

static const CliCommand put_cmd = {
        .name = "fs put",
        .args = "ID REMOTE [LOCAL|-]",
        .summary = "Upload a file (from LOCAL, or stdin when LOCAL is - or absent).",
        .help = "Streamed (a pipe is sent chunked), up to the daemon's SANDBOX_MAX_UPLOAD_BYTES (1 GiB).\n"
                "The remote file is replaced atomically. --json prints {\"status\", \"path\", \"size_bytes\"}.",
        .options = put_options,
        .min_pos = 2,
        .max_pos = 3,
        .streams = true,
};

static int run_put(CliArgs *a, Client *c) {
        _cleanup_free_ char *path = NULL, *full = NULL;
        _cleanup_json_ json_t *answer = NULL;
        const char *local = a->n_pos > 2 ? a->pos[2] : "-";
        ClientResponse resp = {};
        ClientRequest req = { .method = "PUT", .content_type = "application/octet-stream" };
        FILE *f = NULL;
        struct stat st;
        uint64_t generation;
        char err[1024] = "";
        long status;
        int r;

        if (a->n_pos < 3 && isatty(STDIN_FILENO))
                return cli_usage_error(a, "name the LOCAL file (or - to type the content)");
        if (streq(local, "-")) {
                f = stdin;
                req.body_size = CLIENT_BODY_SIZE_UNKNOWN;
        } else {
                int fd = open(local, O_RDONLY | O_CLOEXEC | O_NOCTTY);

                if (fd < 0)
                        return cli_error(CLI_LOCAL_FILE, "cannot open %s: %s", local, strerror(errno));
                r = fstat(fd, &st) < 0 ? errno : S_ISDIR(st.st_mode) ? EISDIR : 0; /* st unset if fstat() failed */
                if (r != 0) {
                        (void) close(fd);
                        return cli_error(CLI_LOCAL_FILE, "cannot read %s: %s", local, strerror(r));
                }
                f = fdopen(fd, "rb");
                if (!f) {
                        (void) close(fd);
                        return cli_error(CLI_LOCAL_FILE, "cannot read %s: %s", local, strerror(errno));
                }
                req.body_size = S_ISREG(st.st_mode) ? (size_t) st.st_size : CLIENT_BODY_SIZE_UNKNOWN;
        }
        req.body_file = f;

        r = cli_sandbox_generation(c, a->pos[0], &generation);
        if (r == 0) {
                path = files_path(a->pos[0], "/raw", a->pos[1], generation);
                full = path ? strprintf("%s%s", path, cli_flag(a, OPT_PARENTS) ? "&make_parents=true" : "") : NULL;
                if (!full)
                        r = cli_error(CLI_LOCAL_FILE, "out of memory");
        }
        if (r == 0) {
                req.path = full;
                r = client_perform(c, &req, &resp, err, sizeof err);
                if (r < 0)
                        r = ferror(f) ? cli_error(CLI_LOCAL_FILE, "reading %s failed", local) : cli_request_error(r, err);
        }
        if (f != stdin)
                (void) fclose(f);
        if (r != 0)
                return r;
        status = resp.status;
        answer = json_loadb(resp.body, resp.size, 0, NULL);
        client_response_done(&resp);
        if (status < 200 || status >= 300)
                return cli_http_error(status, answer);
        if (a->json)
                return answer ? cli_print_json(answer) : cli_error(CLI_BAD_RESPONSE, "the answer is not JSON");
        return 0;
}

/* ---- rm, mv, mkdir ---- */

static const CliOption rm_options[] = {
        { "recursive", 'r', NULL, OPT_RECURSIVE, "Delete a directory and everything in it (never follows symlinks)." },
        {},
};

static const CliCommand rm_cmd = {
        .name = "fs rm",
        .args = "ID PATH...",
        .summary = "Delete files (a directory only if empty, unless --recursive).",
        .help = "Stops at the first path that fails. A root (/workspace, ...) is never deleted.",
        .options = rm_options,
        .min_pos = 2,
        .max_pos = 1 + FS_PATHS_MAX,
};

static int run_rm(CliArgs *a, Client *c) {
        uint64_t generation;
        int r;

        r = cli_sandbox_generation(c, a->pos[0], &generation);
        for (unsigned i = 1; r == 0 && i < a->n_pos; i++)
                r = files_post(a, c, generation, "delete",
                               json_pack("{s:s, s:b}", "path", a->pos[i], "recursive", cli_flag(a, OPT_RECURSIVE)));
        return r;
}

static const CliOption mv_options[] = {
        { "force", 'f', NULL, OPT_OVERWRITE, "Replace DESTINATION if it exists." },
        {},
};

static const CliCommand mv_cmd = {
        .name = "fs mv",
        .args = "ID SOURCE DESTINATION",
        .summary = "Move or rename a file or directory.",
        .options = mv_options,
        .min_pos = 3,
        .max_pos = 3,
};

static int run_mv(CliArgs *a, Client *c) {
        uint64_t generation;
        int r;

        r = cli_sandbox_generation(c, a->pos[0], &generation);
        if (r != 0)
                return r;
        return files_post(a, c, generation, "move",
                          json_pack("{s:s, s:s, s:b}", "source", a->pos[1], "destination", a->pos[2], "overwrite",
                                    cli_flag(a, OPT_OVERWRITE)));
}

static const CliOption mkdir_options[] = {
        { "parents", 'p', NULL, OPT_PARENTS, "Create missing parents too." },
        {},
};

static const CliCommand mkdir_cmd = {
        .name = "fs mkdir",
        .args = "ID PATH...",
        .summary = "Create directories.",
        .options = mkdir_options,
        .min_pos = 2,
        .max_pos = 1 + FS_PATHS_MAX,
};

static int run_mkdir(CliArgs *a, Client *c) {
        uint64_t generation;
        int r;

        r = cli_sandbox_generation(c, a->pos[0], &generation);
        for (unsigned i = 1; r == 0 && i < a->n_pos; i++)
                r = files_post(a, c, generation, "mkdir",
                               json_pack("{s:s, s:b}", "path", a->pos[i], "parents", cli_flag(a, OPT_PARENTS)));
        return r;
}

static const CliVerb verbs[] = {
        { &ls_cmd, run_ls },   { &stat_cmd, run_stat }, { &cat_cmd, run_cat },     { &get_cmd, run_get },
        { &put_cmd, run_put }, { &rm_cmd, run_rm },     { &mkdir_cmd, run_mkdir }, { &mv_cmd, run_mv },
};

int cli_fs_main(int argc, char **argv) {
        return cli_dispatch("fs", "Read and write a sandbox's files (paths as the sandbox sees them; relative = "
                                  "under /workspace).",
                            verbs, ELEMENTSOF(verbs), argc, argv);
}
