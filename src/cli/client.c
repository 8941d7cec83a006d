/* SPDX-License-Identifier: MIT */
#include "client.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "fileio.h"
#include "parse-util.h"
#include "string-util.h"
#include "time-util.h"

#define DEFAULT_URL "http://127.0.0.1:8080"
#define MAX_TOKEN_FILE 4096

struct Client {
        CURL *curl;
        char *base_url;          /* without a trailing slash */
        char *auth_header;       /* "Authorization: Bearer ..." */
        char *token;
        char *no_proxy;          /* $no_proxy plus the loopback names */
        long timeout_ms;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_result;

static void curl_init_once(void) {
        curl_init_result = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static const char *first_set(const char *a, const char *b) {
        if (!isempty(a))
                return a;
        return isempty(b) ? NULL : b;
}

int client_read_token_file(const char *path, char **ret) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *s = NULL;
        size_t start;
        ssize_t n;

        /* Followed if a symlink, as the daemon does: secret mounts (Kubernetes) are symlinks. */
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        s = malloc(MAX_TOKEN_FILE + 1);
        if (!s)
                return -ENOMEM;
        n = loop_read(fd, s, MAX_TOKEN_FILE + 1);
        if (n < 0)
                return (int) n;
        if ((size_t) n > MAX_TOKEN_FILE)
                return -EFBIG;
        s[n] = '\0';
        /* The first line, trimmed, as the daemon reads it: a second line never reaches a header. */
        s[strcspn(s, "\r\n")] = '\0';
        strstrip_trailing(s);
        start = strspn(s, " \t");
        memmove(s, s + start, strlen(s + start) + 1);
        if (isempty(s))
                return -ENODATA;
        *ret = TAKE_PTR(s);
        return 0;
}

/* Reads a small file relative to the working directory, strips the trailing newline. */
static int read_small(const char *path, char **ret) {
        _cleanup_free_ char *s = NULL;
        int r;

        r = read_full_file_at(AT_FDCWD, path, MAX_TOKEN_FILE, &s, NULL);
        if (r < 0)
                return r;
        strstrip_trailing(s);
        if (isempty(s))
                return -ENODATA;
        *ret = TAKE_PTR(s);
        return 0;
}

static int resolve_url(const ClientOptions *o, const char *data_dir, char **ret) {
        _cleanup_free_ char *path = NULL, *s = NULL;
        const char *v;

        v = first_set(o->url, getenv("SANDBOX_BASE_URL"));
        if (v)
                s = strdup(v);
        else {
                path = strprintf("%s/endpoint", data_dir);
                if (!path)
                        return -ENOMEM;
                if (read_small(path, &s) < 0)
                        s = strdup(DEFAULT_URL);
        }
        if (!s)
                return -ENOMEM;
        while (endswith(s, "/"))
                s[strlen(s) - 1] = '\0';
        if (!startswith(s, "http://") && !startswith(s, "https://"))
                return -EINVAL;
        *ret = TAKE_PTR(s);
        return 0;
}

static int resolve_token(const ClientOptions *o, const char *data_dir, char **ret, char *err, size_t errlen) {
        _cleanup_free_ char *path = NULL, *s = NULL;
        const char *v;
        int r;

        v = first_set(o->token, getenv("SANDBOX_INTERNAL_TOKEN"));
        if (v) {
                s = strdup(v);
                if (!s)
                        return -ENOMEM;
                *ret = TAKE_PTR(s);
                return 0;
        }
        v = getenv("SANDBOX_INTERNAL_TOKEN_FILE");
        if (!isempty(v)) {
                r = client_read_token_file(v, &s);
                if (r < 0) {
                        (void) bsprintf(err, errlen, "Cannot read the token file named by SANDBOX_INTERNAL_TOKEN_FILE: %s.",
                                        strerror(-r));
                        return r;
                }
                *ret = TAKE_PTR(s);
                return 0;
        }
        path = strprintf("%s/token", data_dir);
        if (!path)
                return -ENOMEM;
        r = read_small(path, &s);
        if (r < 0) {
                (void) bsprintf(err, errlen,
                                "No token: pass --token, set SANDBOX_INTERNAL_TOKEN, or point --data-dir at the daemon's "
                                "data directory (%s/token: %s).", data_dir, strerror(-r));
                return r;
        }
        *ret = TAKE_PTR(s);
        return 0;
}

int client_new(const ClientOptions *opts, Client **ret, char *err, size_t errlen) {
        _cleanup_client_ Client *c = NULL;
        const char *data_dir;
        int r;

        (void) pthread_once(&curl_once, curl_init_once);
        if (curl_init_result != CURLE_OK) {
                (void) bsprintf(err, errlen, "Cannot initialise libcurl.");
                return -EIO;
        }
        c = calloc(1, sizeof *c);
        if (!c)
                return -ENOMEM;
        data_dir = first_set(opts->data_dir, getenv("SANDBOX_DATA_DIR"));
        if (!data_dir)
                data_dir = "./data";
        r = resolve_url(opts, data_dir, &c->base_url);
        if (r < 0) {
                (void) bsprintf(err, errlen, r == -EINVAL ? "The URL must start with http:// or https://."
                                                          : "Out of memory.");
                return r;
        }
        r = resolve_token(opts, data_dir, &c->token, err, errlen);
        if (r < 0)
                return r;
        /* A CR or LF would end the Authorization header early and start another one. */
        for (const char *p = c->token; *p; p++)
                if ((unsigned char) *p < 0x20 || *p == 0x7f) {
                        (void) bsprintf(err, errlen, "The token contains control characters.");
                        return -EBADMSG; /* not -EINVAL: that is the URL's */
                }
        c->auth_header = strprintf("Authorization: Bearer %s", c->token);
        c->curl = curl_easy_init();
        if (!c->auth_header || !c->curl) {
                (void) bsprintf(err, errlen, "Out of memory.");
                return -ENOMEM;
        }
        /* A loopback daemon is never reached through $http_proxy: that would fail, and hand the
         * token to the proxy. CURLOPT_NOPROXY replaces $no_proxy, so it is kept in the list. */
        c->no_proxy = strprintf("%s%slocalhost,127.0.0.1,::1", first_set(getenv("no_proxy"), getenv("NO_PROXY")) ?: "",
                                first_set(getenv("no_proxy"), getenv("NO_PROXY")) ? "," : "");
        if (!c->no_proxy) {
                (void) bsprintf(err, errlen, "Out of memory.");
                return -ENOMEM;
        }
        c->timeout_ms = opts->timeout_ms;
        *ret = TAKE_PTR(c);
        return 0;
}

Client *client_free(Client *c) {
        if (!c)
                return NULL;
        if (c->curl)
                curl_easy_cleanup(c->curl);
        if (c->token)
                explicit_bzero(c->token, strlen(c->token));
        if (c->auth_header)
                explicit_bzero(c->auth_header, strlen(c->auth_header));
        free(c->token);
        free(c->auth_header);
        free(c->no_proxy);
        free(c->base_url);
        free(c);
        return NULL;
}

const char *client_base_url(const Client *c) {
        return c->base_url;
}

const char *client_token(const Client *c) {
        return c->token;
}

const char *client_no_proxy(const Client *c) {
        return c->no_proxy;
}

void client_response_done(ClientResponse *r) {
        free(r->body);
        free(r->content_type);
        *r = (ClientResponse) {};
}

typedef struct Sink {
        const ClientRequest *req;
        CURL *handle;
        long status;             /* known once the first piece of the body arrives */
        Buf body;                /* capped at CLIENT_MAX_RESPONSE_BYTES */
        int sink_error;
        bool too_big;
        long stall_ms;           /* see ClientRequest.stall_ms; 0 = off */
        uint64_t last_byte_ms;   /* monotonic time of the last byte received (or sent) */
        curl_off_t last_ulnow;
        bool stalled;
} Sink;

static uint64_t mono_ms(void) {
        return now_monotonic_usec() / 1000;
}

/* Response headers: each counts as a sign of life; STALL_HEADER sets the stall limit. */
static size_t header_cb(char *data, size_t one, size_t n, void *userdata) {
        Sink *s = userdata;
        size_t len = strlen(s->req->stall_header ?: "");
        char value[32];
        uint64_t secs;

        s->last_byte_ms = mono_ms();
        if (len == 0 || n <= len + 1 || n - len - 1 >= sizeof value || strncasecmp(data, s->req->stall_header, len) != 0 ||
            data[len] != ':')
                return one * n;
        memcpy(value, data + len + 1, n - len - 1);
        value[n - len - 1] = '\0';
        strstrip_trailing(value);
        if (parse_u64(value + strspn(value, " \t"), &secs) >= 0 && secs > 0 && secs <= 3600)
                s->stall_ms = (long) secs * 3000;
        return one * n;
}

/* Called about once a second during the transfer: a silent stream is aborted. A request body
 * still going out (a large stdin) is not silence. */
static int xferinfo_cb(void *userdata, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow) {
        Sink *s = userdata;

        (void) dltotal, (void) dlnow, (void) ultotal;
        if (ulnow != s->last_ulnow) {
                s->last_ulnow = ulnow;
                s->last_byte_ms = mono_ms();
        }
        if (s->stall_ms > 0 && mono_ms() - s->last_byte_ms > (uint64_t) s->stall_ms) {
                s->stalled = true;
                return 1;
        }
        return 0;
}

static size_t write_cb(char *data, size_t one, size_t n, void *userdata) {
        Sink *s = userdata;
        int q;

        s->last_byte_ms = mono_ms();
        if (s->status == 0)
                (void) curl_easy_getinfo(s->handle, CURLINFO_RESPONSE_CODE, &s->status);
        /* Only a success body goes to the sink: an error body (JSON) is buffered for the caller,
         * never written into the caller's file or terminal. */
        if (s->req->sink && s->status >= 200 && s->status < 300) {
                int r = s->req->sink(data, n, s->req->userdata);
                if (r < 0) {
                        s->sink_error = r;
                        return 0; /* aborts the transfer */
                }
                return n;
        }
        q = buf_append(&s->body, data, n);
        if (q == -EFBIG)
                s->too_big = true;
        return q < 0 ? 0 : n;
}

static int curl_to_errno(CURLcode cc) {
        switch (cc) {
        case CURLE_COULDNT_CONNECT:
                return -ECONNREFUSED;
        case CURLE_OPERATION_TIMEDOUT:
                return -ETIMEDOUT;
        case CURLE_COULDNT_RESOLVE_HOST:
                return -EHOSTUNREACH;
        case CURLE_OUT_OF_MEMORY:
                return -ENOMEM;
        default:
                return -EIO;
        }
}

int client_perform(Client *c, const ClientRequest *req, ClientResponse *ret, char *err, size_t errlen) {
        _cleanup_free_ char *url = NULL, *accept = NULL, *ctype = NULL;
        struct curl_slist *headers = NULL;
        Sink s = { .req = req, .handle = c->curl, .body = BUF_INIT(CLIENT_MAX_RESPONSE_BYTES) };
        const char *ct = NULL;
        long timeout;
        CURLcode cc;
        CURL *h = c->curl;

        url = strprintf("%s%s", c->base_url, req->path);
        if (!url)
                return -ENOMEM;
        curl_easy_reset(h);
        (void) curl_easy_setopt(h, CURLOPT_URL, url);
        (void) curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        (void) curl_easy_setopt(h, CURLOPT_NOPROXY, c->no_proxy);
        (void) curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
        (void) curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_cb);
        (void) curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
        (void) curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req->method);
        if (streq(req->method, "GET"))
                (void) curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
        timeout = req->timeout_ms > 0 ? req->timeout_ms : req->timeout_ms < 0 ? 0 : c->timeout_ms;
        (void) curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout);

        headers = curl_slist_append(headers, c->auth_header);
        headers = curl_slist_append(headers, "Expect:");
        if (req->accept) {
                accept = strprintf("Accept: %s", req->accept);
                headers = accept ? curl_slist_append(headers, accept) : NULL;
        }
        if (headers && req->content_type) {
                ctype = strprintf("Content-Type: %s", req->content_type);
                headers = ctype ? curl_slist_append(headers, ctype) : NULL;
        }
        for (const char *const *x = req->headers; headers && x && *x; x++)
                headers = curl_slist_append(headers, *x);
        if (!headers)
                return -ENOMEM;
        (void) curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);

        if (req->body_file) {
                (void) curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
                (void) curl_easy_setopt(h, CURLOPT_READDATA, req->body_file);
                (void) curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, req->body_size == CLIENT_BODY_SIZE_UNKNOWN
                                                                             ? (curl_off_t) -1 /* chunked */
                                                                             : (curl_off_t) req->body_size);
                (void) curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req->method);
        } else if (req->body || streq(req->method, "POST") || streq(req->method, "PUT")) {
                (void) curl_easy_setopt(h, CURLOPT_POSTFIELDS, req->body ? (const char *) req->body : "");
                (void) curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) req->body_size);
        }

        if (req->stall_ms > 0) {
                s.stall_ms = req->stall_ms;
                s.last_byte_ms = mono_ms();
                (void) curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, header_cb);
                (void) curl_easy_setopt(h, CURLOPT_HEADERDATA, &s);
                (void) curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, xferinfo_cb);
                (void) curl_easy_setopt(h, CURLOPT_XFERINFODATA, &s);
                (void) curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
        }
        cc = curl_easy_perform(h);
        curl_slist_free_all(headers);
        if (s.stalled && s.sink_error == 0) {
                buf_free(&s.body);
                (void) bsprintf(err, errlen, "No data from %s for %ld s: the stream counts as dropped.", c->base_url,
                                s.stall_ms / 1000);
                return -ETIMEDOUT;
        }
        if (s.sink_error < 0) {
                buf_free(&s.body);
                return s.sink_error;
        }
        if (s.too_big) {
                buf_free(&s.body);
                (void) bsprintf(err, errlen, "The response is larger than %u bytes.", CLIENT_MAX_RESPONSE_BYTES);
                return -EFBIG;
        }
        if (cc != CURLE_OK) {
                buf_free(&s.body);
                (void) bsprintf(err, errlen, "Cannot reach %s: %s.", c->base_url, curl_easy_strerror(cc));
                return curl_to_errno(cc);
        }
        *ret = (ClientResponse) {};
        (void) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &ret->status);
        if (curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, &ct) == CURLE_OK && ct)
                ret->content_type = strdup(ct);
        ret->size = s.body.size;
        ret->body = s.body.data ? buf_steal(&s.body) : strdup("");
        if (!ret->body) {
                client_response_done(ret);
                return -ENOMEM;
        }
        return 0;
}

int client_json(Client *c, const char *method, const char *path, json_t *body, long *ret_status,
                json_t **ret_json, char *err, size_t errlen) {
        _cleanup_free_ char *text = NULL;
        ClientResponse resp = {};
        ClientRequest req = { .method = method, .path = path, .accept = "application/json" };
        int r;

        if (body) {
                text = json_dumps(body, JSON_COMPACT);
                if (!text)
                        return -ENOMEM;
                req.body = text;
                req.body_size = strlen(text);
                req.content_type = "application/json";
        }
        r = client_perform(c, &req, &resp, err, errlen);
        if (r < 0)
                return r;
        *ret_status = resp.status;
        *ret_json = resp.size > 0 ? json_loadb(resp.body, resp.size, 0, NULL) : NULL;
        client_response_done(&resp);
        return 0;
}

const char *client_error_code(const json_t *body) {
        /* json_object_get() answers NULL for NULL or a non-object, json_string_value() for a non-string. */
        return json_string_value(json_object_get(json_object_get(body, "detail"), "code"));
}

const char *client_error_line(long status, const json_t *body, char *buf, size_t buflen) {
        const char *code = NULL, *message = NULL;
        json_t *detail = body ? json_object_get(body, "detail") : NULL;

        if (json_is_object(detail)) {
                code = client_error_code(body);
                message = json_string_value(json_object_get(detail, "message"));
        }
        if (code && message)
                (void) bsprintf(buf, buflen, "%s: %s", code, message);
        else if (code)
                (void) bsprintf(buf, buflen, "%s (HTTP %ld)", code, status);
        else
                (void) bsprintf(buf, buflen, "HTTP %ld from the daemon", status);
        return buf;
}

char *client_escape(const char *s) {
        static const char hex[] = "0123456789ABCDEF";
        size_t n = strlen(s);
        char *out, *p;

        out = malloc(n * 3 + 1);
        if (!out)
                return NULL;
        p = out;
        for (const unsigned char *q = (const unsigned char *) s; *q; q++) {
                if ((*q >= 'A' && *q <= 'Z') || (*q >= 'a' && *q <= 'z') || (*q >= '0' && *q <= '9') ||
                    strchr("-._~", *q))
                        *p++ = (char) *q;
                else {
                        *p++ = '%';
                        *p++ = hex[*q >> 4];
                        *p++ = hex[*q & 15];
                }
        }
        *p = '\0';
        return out;
}

char *client_pathf(const char *fmt, ...) {
        va_list ap;
        char *s = NULL;

        va_start(ap, fmt);
        if (vasprintf(&s, fmt, ap) < 0)
                s = NULL;
        va_end(ap);
        return s;
}
