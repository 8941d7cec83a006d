/* SPDX-License-Identifier: MIT */
/* The load generator. One libcurl multi handle drives CONCURRENCY slots; each slot owns one easy
 * handle and has at most one request in flight, so there is one connection per in-flight request,
 * and connections are kept alive across requests and runs (the multi handle's connection cache).
 * Everything happens in one thread: a bench process uses a few percent of a core at 1000 req/s,
 * which keeps the client out of the way of the daemon it measures. */
#include <curl/curl.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "buf.h"
#include "string-util.h"

#define BENCH_REPLY_MAX (16u * 1024u * 1024u)
#define TICK_USEC (100 * USEC_PER_MSEC)

typedef struct Slot {
        CURL *easy;
        BenchCall call;
        bool busy;
        usec_t started;
        Buf reply;              /* capped at BENCH_REPLY_MAX */
        bool too_big;
        char url[1024];
        char errbuf[CURL_ERROR_SIZE];
} Slot;

struct BenchHttp {
        CURLM *multi;
        char *base_url;
        char *no_proxy;
        struct curl_slist *headers;
        long timeout_ms;
        Slot *slots;
        unsigned n_slots;
        uint64_t connects;              /* connections opened so far (keep-alive check) */
};

static size_t write_cb(char *data, size_t one, size_t n, void *userdata) {
        Slot *s = userdata;
        int r = buf_append(&s->reply, data, n);

        if (r == -EFBIG)
                s->too_big = true;
        return r < 0 ? 0 : n;
}

int bench_http_new(const char *base_url, const char *token, const char *no_proxy, long timeout_ms, BenchHttp **ret) {
        _cleanup_free_ char *auth = NULL;
        BenchHttp *h;

        h = calloc(1, sizeof *h);
        if (!h)
                return -ENOMEM;
        h->multi = curl_multi_init();
        h->base_url = strdup(base_url);
        h->no_proxy = strdup(no_proxy);
        auth = strprintf("Authorization: Bearer %s", token);
        if (!h->multi || !h->base_url || !h->no_proxy || !auth) {
                bench_http_free(h);
                return -ENOMEM;
        }
        h->headers = curl_slist_append(NULL, auth);
        explicit_zero(auth, strlen(auth));
        if (h->headers)
                h->headers = curl_slist_append(h->headers, "Content-Type: application/json");
        if (h->headers)
                h->headers = curl_slist_append(h->headers, "Accept: application/json");
        if (h->headers)
                h->headers = curl_slist_append(h->headers, "Expect:");
        if (!h->headers) {
                bench_http_free(h);
                return -ENOMEM;
        }
        h->timeout_ms = timeout_ms;
        *ret = h;
        return 0;
}

BenchHttp *bench_http_free(BenchHttp *h) {
        if (!h)
                return NULL;
        for (unsigned i = 0; i < h->n_slots; i++) {
                Slot *s = &h->slots[i];
                if (s->easy) {
                        if (s->busy)
                                (void) curl_multi_remove_handle(h->multi, s->easy);
                        curl_easy_cleanup(s->easy);
                }
                free(s->call.body);
                buf_free(&s->reply);
        }
        free(h->slots);
        if (h->multi)
                (void) curl_multi_cleanup(h->multi);
        if (h->headers) {
                /* The first header holds the token. */
                explicit_zero(h->headers->data, strlen(h->headers->data));
                curl_slist_free_all(h->headers);
        }
        free(h->base_url);
        free(h->no_proxy);
        free(h);
        return NULL;
}

static int ensure_slots(BenchHttp *h, unsigned n) {
        Slot *p;

        if (n <= h->n_slots)
                return 0;
        p = reallocarray(h->slots, n, sizeof *p);
        if (!p)
                return -ENOMEM;
        h->slots = p;
        for (unsigned i = h->n_slots; i < n; i++) {
                h->slots[i] = (Slot) { .reply = BUF_INIT(BENCH_REPLY_MAX) };
                h->slots[i].easy = curl_easy_init();
                if (!h->slots[i].easy) {
                        h->n_slots = i;
                        return -ENOMEM;
                }
        }
        h->n_slots = n;
        /* Keep one idle connection per slot in the cache, so every request finds a warm one. */
        (void) curl_multi_setopt(h->multi, CURLMOPT_MAXCONNECTS, (long) n + 4);
        return 0;
}

static int slot_start(BenchHttp *h, Slot *s, char *err, size_t errlen) {
        CURL *e = s->easy;
        const char *m = s->call.method;

        if (bsprintf(s->url, sizeof s->url, "%s%s", h->base_url, s->call.path) < 0) {
                (void) bsprintf(err, errlen, "URL too long.");
                return -ENAMETOOLONG;
        }
        buf_clear(&s->reply);
        s->too_big = false;
        s->errbuf[0] = '\0';
        (void) curl_easy_setopt(e, CURLOPT_URL, s->url);
        (void) curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
        (void) curl_easy_setopt(e, CURLOPT_NOPROXY, h->no_proxy);
        (void) curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
        (void) curl_easy_setopt(e, CURLOPT_HTTPHEADER, h->headers);
        (void) curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, write_cb);
        (void) curl_easy_setopt(e, CURLOPT_WRITEDATA, s);
        (void) curl_easy_setopt(e, CURLOPT_ERRORBUFFER, s->errbuf);
        (void) curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
        (void) curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, h->timeout_ms);
        (void) curl_easy_setopt(e, CURLOPT_PRIVATE, s);
        if (streq(m, "GET")) {
                (void) curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
                (void) curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, NULL);
        } else {
                const char *b = s->call.body ? s->call.body : "";
                (void) curl_easy_setopt(e, CURLOPT_POSTFIELDS, b);
                (void) curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long) strlen(b));
                (void) curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, streq(m, "POST") ? NULL : m);
        }
        s->started = now_monotonic_usec();
        if (curl_multi_add_handle(h->multi, e) != CURLM_OK) {
                (void) bsprintf(err, errlen, "libcurl refused a request.");
                return -EIO;
        }
        s->busy = true;
        return 0;
}

/* Asks the loop for SLOT's next request and starts it. Returns 1 if one started, 0 if none. */
static int slot_next(BenchHttp *h, unsigned i, const BenchLoop *loop, char *err, size_t errlen) {
        Slot *s = &h->slots[i];
        int r;

        free(s->call.body);
        s->call = (BenchCall) {};
        r = loop->next(loop->ud, i, &s->call);
        if (r < 0) {
                if (!err[0])
                        (void) bsprintf(err, errlen, "Cannot build a request: %s.", strerror(-r));
                return r;
        }
        if (r == 0)
                return 0;
        r = slot_start(h, s, err, errlen);
        return r < 0 ? r : 1;
}

static int slot_finish(BenchHttp *h, Slot *s, CURLcode cc, const BenchLoop *loop, char *err, size_t errlen) {
        BenchReply reply = {};
        long connects = 0;

        reply.latency_ms = (double) (now_monotonic_usec() - s->started) / 1000.0;
        (void) curl_multi_remove_handle(h->multi, s->easy);
        s->busy = false;
        if (curl_easy_getinfo(s->easy, CURLINFO_NUM_CONNECTS, &connects) == CURLE_OK && connects > 0)
                h->connects += (uint64_t) connects;
        if (cc == CURLE_OK) {
                (void) curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &reply.status);
                reply.body = s->reply.data ? s->reply.data : "";
                reply.size = s->reply.size;
        } else
                reply.error = s->too_big ? "reply too large" : s->errbuf[0] ? s->errbuf : curl_easy_strerror(cc);
        return loop->done(loop->ud, (unsigned) (s - h->slots), &s->call, &reply, err, errlen);
}

uint64_t bench_http_connects(const BenchHttp *h) {
        return h->connects;
}

int bench_http_run(BenchHttp *h, unsigned concurrency, const BenchLoop *loop, char *err, size_t errlen) {
        unsigned in_flight = 0;
        usec_t last_tick = now_monotonic_usec();
        int r;

        err[0] = '\0';
        if (concurrency == 0)
                return 0;
        r = ensure_slots(h, concurrency);
        if (r < 0) {
                (void) bsprintf(err, errlen, "Out of memory.");
                return r;
        }
        for (unsigned i = 0; i < concurrency; i++) {
                r = slot_next(h, i, loop, err, errlen);
                if (r < 0)
                        goto fail;
                in_flight += (unsigned) r;
        }
        while (in_flight > 0) {
                CURLMsg *msg;
                int running, left;
                usec_t now;

                if (curl_multi_perform(h->multi, &running) != CURLM_OK) {
                        (void) bsprintf(err, errlen, "libcurl failed.");
                        r = -EIO;
                        goto fail;
                }
                while ((msg = curl_multi_info_read(h->multi, &left))) {
                        Slot *s = NULL;
                        if (msg->msg != CURLMSG_DONE)
                                continue;
                        (void) curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **) &s);
                        in_flight--;
                        r = slot_finish(h, s, msg->data.result, loop, err, errlen);
                        if (r < 0)
                                goto fail;
                        r = slot_next(h, (unsigned) (s - h->slots), loop, err, errlen);
                        if (r < 0)
                                goto fail;
                        in_flight += (unsigned) r;
                }
                now = now_monotonic_usec();
                if (loop->tick && now - last_tick >= TICK_USEC) {
                        loop->tick(loop->ud, in_flight);
                        last_tick = now;
                }
                if (in_flight > 0 && curl_multi_poll(h->multi, NULL, 0, 100, NULL) != CURLM_OK) {
                        (void) bsprintf(err, errlen, "libcurl failed while waiting.");
                        r = -EIO;
                        goto fail;
                }
        }
        return 0;

fail:
        /* Abandon whatever is still in flight; the connections are closed with their handles. */
        for (unsigned i = 0; i < h->n_slots; i++)
                if (h->slots[i].busy) {
                        (void) curl_multi_remove_handle(h->multi, h->slots[i].easy);
                        h->slots[i].busy = false;
                }
        if (!err[0])
                (void) bsprintf(err, errlen, "%s.", strerror(-r));
        return r;
}
