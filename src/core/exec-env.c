/* SPDX-License-Identifier: MIT */
#include "exec-env.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "macros.h"
#include "random-util.h"
#include "string-util.h"
#include "utf8.h"

#define EXEC_KEY_FILE "exec_key"
/* Bumped whenever the encoding below changes: old fingerprints then simply stop matching,
 * which is what a changed meaning should do. */
#define FINGERPRINT_DOMAIN "sandloom-exec-fingerprint-v1"

const char *const exec_env_defaults[] = {
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME=/home/sandbox",
        "USER=sandbox",
        "LOGNAME=sandbox",
        "LANG=C.UTF-8",
        "TMPDIR=/tmp",
        "XDG_CACHE_HOME=/cache",
        "PIP_CACHE_DIR=/cache/pip",
        "npm_config_cache=/cache/npm",
        NULL,
};

bool exec_env_name_is_valid(const char *name) {
        size_t n;

        if (!name)
                return false;
        n = strlen(name);
        if (n == 0 || n > EXEC_ENV_NAME_MAX)
                return false;
        if (!((name[0] >= 'A' && name[0] <= 'Z') || (name[0] >= 'a' && name[0] <= 'z') || name[0] == '_'))
                return false;
        return str_in_charset(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_", 1,
                              EXEC_ENV_NAME_MAX);
}

/* Index of the default variable called NAME, or -1. */
static int default_index(const char *name) {
        size_t n = strlen(name);

        for (size_t i = 0; exec_env_defaults[i]; i++)
                if (strneq(exec_env_defaults[i], name, n) && exec_env_defaults[i][n] == '=')
                        return (int) i;
        return -1;
}

int exec_env_build(const char *const *names, const char *const *values, size_t n, char ***ret) {
        size_t n_defaults = ELEMENTSOF(exec_env_defaults) - 1, slots = n_defaults + n, bytes = 0, k = 0;
        const char *override[ELEMENTSOF(exec_env_defaults)] = {};
        char **envp, *p;

        if (n > EXEC_ENV_MAX)
                return -E2BIG;
        for (size_t i = 0; i < n; i++) {
                if (!exec_env_name_is_valid(names[i]) || !values[i])
                        return -EINVAL;
                bytes += strlen(names[i]) + strlen(values[i]) + 2;
        }
        for (size_t i = 0; i < n_defaults; i++)
                bytes += strlen(exec_env_defaults[i]) + 1;

        /* One block: the pointer array, then the strings. */
        envp = malloc((slots + 1) * sizeof(char *) + bytes);
        if (!envp)
                return -ENOMEM;
        p = (char *) (envp + slots + 1);

        /* The last request entry for a name wins (the API refuses duplicates anyway). */
        for (size_t i = 0; i < n; i++) {
                int d = default_index(names[i]);
                if (d >= 0)
                        override[d] = names[i];
        }
        for (size_t i = 0; i < n_defaults; i++) {
                if (override[i])
                        continue;
                envp[k++] = p;
                p = stpcpy(p, exec_env_defaults[i]) + 1;
        }
        for (size_t i = 0; i < n; i++) {
                bool dup = false;

                for (size_t j = i + 1; j < n && !dup; j++)
                        dup = streq(names[i], names[j]);
                if (dup)
                        continue;
                envp[k++] = p;
                p = stpcpy(p, names[i]);
                *p++ = '=';
                p = stpcpy(p, values[i]) + 1;
        }
        envp[k] = NULL;
        *ret = envp;
        return 0;
}

/* ---- fingerprint ---- */

typedef struct Mac {
        EVP_MAC_CTX *ctx;
        int error;
} Mac;

static void mac_bytes(Mac *m, const void *p, size_t n) {
        if (m->error == 0 && n > 0 && EVP_MAC_update(m->ctx, p, n) != 1)
                m->error = -EIO;
}

static void mac_u64(Mac *m, uint64_t v) {
        unsigned char b[8];

        /* Fixed width, big-endian: no two encodings share a prefix. */
        for (int i = 7; i >= 0; i--) {
                b[i] = (unsigned char) (v & 0xff);
                v >>= 8;
        }
        mac_bytes(m, b, sizeof b);
}

static void mac_field(Mac *m, const void *p, size_t n) {
        mac_u64(m, n);
        mac_bytes(m, p, n);
}

static void mac_str(Mac *m, const char *s) {
        mac_field(m, s ?: "", s ? strlen(s) : 0);
}

static int env_order(const ExecFingerprintInput *in, size_t *order) {
        for (size_t i = 0; i < in->envc; i++)
                order[i] = i;
        /* Insertion sort by name: at most 128 entries. */
        for (size_t i = 1; i < in->envc; i++) {
                size_t x = order[i], j = i;

                while (j > 0 && strcmp(in->env_names[order[j - 1]], in->env_names[x]) > 0) {
                        order[j] = order[j - 1];
                        j--;
                }
                order[j] = x;
        }
        return 0;
}

struct ExecHmac {
        EVP_MAC_CTX *keyed;                 /* initialised with the key, never updated */
};

int exec_hmac_new(const uint8_t key[EXEC_KEY_SIZE], ExecHmac **ret) {
        char digest[] = "SHA256";
        OSSL_PARAM params[] = {
                OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                OSSL_PARAM_construct_end(),
        };
        EVP_MAC *mac;
        ExecHmac *h;

        h = calloc(1, sizeof *h);
        if (!h)
                return -ENOMEM;
        mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
        if (mac)
                h->keyed = EVP_MAC_CTX_new(mac);
        EVP_MAC_free(mac);
        if (!h->keyed || EVP_MAC_init(h->keyed, key, EXEC_KEY_SIZE, params) != 1) {
                exec_hmac_free(h);
                return -EIO;
        }
        *ret = h;
        return 0;
}

void exec_hmac_free(ExecHmac *h) {
        if (!h)
                return;
        EVP_MAC_CTX_free(h->keyed);
        free(h);
}

int exec_fingerprint(const ExecHmac *h, const ExecFingerprintInput *in, char ret[EXEC_FINGERPRINT_HEX + 1]) {
        static const char hex[] = "0123456789abcdef";
        size_t order[EXEC_ENV_MAX], outlen = 0;
        unsigned char out[EVP_MAX_MD_SIZE];
        Mac m = {};

        if (!h || !in || in->envc > EXEC_ENV_MAX || (in->argc > 0 && !in->argv))
                return -EINVAL;
        m.ctx = EVP_MAC_CTX_dup(h->keyed);
        if (!m.ctx)
                return -ENOMEM;

        mac_str(&m, FINGERPRINT_DOMAIN);
        mac_u64(&m, in->argc);
        for (size_t i = 0; i < in->argc; i++)
                mac_str(&m, in->argv[i]);
        mac_str(&m, in->cwd);
        (void) env_order(in, order);
        mac_u64(&m, in->envc);
        for (size_t i = 0; i < in->envc; i++) {
                mac_str(&m, in->env_names[order[i]]);
                mac_str(&m, in->env_values[order[i]]);
        }
        mac_u64(&m, in->timeout_seconds);
        mac_u64(&m, in->background);
        mac_str(&m, in->exec_scope);
        mac_u64(&m, in->has_stdin);
        if (in->has_stdin)
                mac_field(&m, in->stdin_data, in->stdin_size);
        mac_str(&m, in->output_base64 ? "base64" : "text");

        if (m.error == 0 && (EVP_MAC_final(m.ctx, out, &outlen, sizeof out) != 1 || outlen != 32))
                m.error = -EIO;
        EVP_MAC_CTX_free(m.ctx);
        if (m.error < 0)
                return m.error;
        for (size_t i = 0; i < 32; i++) {
                ret[2 * i] = hex[out[i] >> 4];
                ret[2 * i + 1] = hex[out[i] & 15];
        }
        ret[EXEC_FINGERPRINT_HEX] = '\0';
        return 0;
}

/* ---- the key ---- */

int exec_key_load(int data_fd, uint8_t ret[EXEC_KEY_SIZE]) {
        _cleanup_free_ char *data = NULL;
        uint8_t key[EXEC_KEY_SIZE];
        size_t size = 0;
        int r;

        r = read_full_file_at(data_fd, EXEC_KEY_FILE, EXEC_KEY_SIZE + 1, &data, &size);
        if (r == -ENOENT) {
                r = random_bytes(key, sizeof key);
                if (r < 0)
                        return r;
                r = write_file_atomic_at(data_fd, EXEC_KEY_FILE, key, sizeof key, 0600);
                if (r < 0) {
                        explicit_zero(key, sizeof key);
                        return r;
                }
                memcpy(ret, key, sizeof key);
                explicit_zero(key, sizeof key);
                return 0;
        }
        if (r < 0)
                return r;
        if (size != EXEC_KEY_SIZE) {
                explicit_zero(data, size);
                return -EBADMSG;
        }
        /* Whoever changed its mode, nobody but root reads it. */
        (void) fchmodat(data_fd, EXEC_KEY_FILE, 0600, AT_SYMLINK_NOFOLLOW);
        memcpy(ret, data, EXEC_KEY_SIZE);
        explicit_zero(data, size);
        return 0;
}

/* ---- UTF-8 ---- */

size_t exec_utf8_complete_prefix(const char *buf, size_t len) {
        const unsigned char *p = (const unsigned char *) buf;

        /* A cut-short sequence starts at most 3 bytes before the end. */
        for (size_t k = 1; k <= 3 && k <= len; k++) {
                size_t i = len - k;

                if ((p[i] & 0xC0) == 0x80)
                        continue; /* a continuation byte: its lead byte is further back */
                return utf8_sequence_length(p + i, len - i) == -1 ? i : len;
        }
        return len;
}
