/* hub_http.c: HTTP through libcurl. Redirects are followed here, one hop at a time, so that the
 * token goes only to the endpoint's own origin (scheme, host and port) and never to the storage
 * host an LFS file redirects to. 429 and 5xx are retried a bounded number of times with
 * back-off (Retry-After honoured), a dropped connection resumes with a range request, and a
 * download is written to its partial file only: the caller renames it once its size and sha256
 * are right. */
#include "hub_internal.h"

#include "core/sha256.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

atomic_int hub_stop;

static void on_sigint(int sig) {
    (void)sig;
    atomic_store(&hub_stop, 1);
}

void hub_catch_sigint(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }
void hub_http_global_init(void) { pthread_once(&curl_once, curl_init_once); }

enum { MAX_HOPS = 5, MAX_TRIES = 6, MAX_ATTEMPTS = 40, RETRY_AFTER_CAP_S = 60 };
#define JSON_CAP ((size_t)64 << 20)

typedef enum { REQ_REVISION, REQ_TREE, REQ_FILE } req_kind;

/* What one response said, besides its body. */
typedef struct resp {
    long status;
    char error_code[64];
    char error_msg[300];
    long retry_after;             /* seconds; -1 when absent */
    long long range_start;        /* Content-Range's first byte; -1 when absent */
    char body_err[600];           /* the start of an error response's body */
    size_t body_err_n;
} resp;

static void trim_value(const char *v, size_t n, char *out, size_t cap) {
    while (n && (v[0] == ' ' || v[0] == '\t')) v++, n--;
    while (n && (v[n - 1] == '\r' || v[n - 1] == '\n' || v[n - 1] == ' ')) n--;
    if (n >= cap) n = cap - 1;
    memcpy(out, v, n);
    out[n] = '\0';
}

static size_t on_header(char *b, size_t size, size_t nitems, void *ud) {
    resp *r = ud;
    size_t n = size * nitems;
    if (n >= 5 && !strncmp(b, "HTTP/", 5)) { /* a new response (after a 100, say): forget the last */
        r->error_code[0] = r->error_msg[0] = '\0';
        r->retry_after = -1;
        r->range_start = -1;
        return n;
    }
    const char *colon = memchr(b, ':', n);
    if (!colon) return n;
    size_t k = (size_t)(colon - b);
    const char *v = colon + 1;
    size_t vn = n - k - 1;
    char val[300];
    if (k == 12 && !strncasecmp(b, "X-Error-Code", k)) {
        trim_value(v, vn, r->error_code, sizeof r->error_code);
    } else if (k == 15 && !strncasecmp(b, "X-Error-Message", k)) {
        trim_value(v, vn, r->error_msg, sizeof r->error_msg);
    } else if (k == 11 && !strncasecmp(b, "Retry-After", k)) {
        trim_value(v, vn, val, sizeof val);
        char *end;
        long s = strtol(val, &end, 10);
        r->retry_after = end != val && s >= 0 ? s : 5; /* an HTTP date: a few seconds */
    } else if (k == 13 && !strncasecmp(b, "Content-Range", k)) {
        trim_value(v, vn, val, sizeof val);
        long long a;
        if (sscanf(val, "bytes %lld-", &a) == 1) r->range_start = a;
    }
    return n;
}

static void keep_error_body(resp *r, const char *b, size_t n) {
    size_t room = sizeof r->body_err - 1 - r->body_err_n;
    if (n > room) n = room;
    memcpy(r->body_err + r->body_err_n, b, n);
    r->body_err_n += n;
    r->body_err[r->body_err_n] = '\0';
}

static int on_xfer(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un) {
    (void)ud, (void)dt, (void)dn, (void)ut, (void)un;
    return atomic_load(&hub_stop) ? 1 : 0;
}

/* Scheme, host and port of two URLs the same (where a token may go). */
static bool same_origin(const char *a, const char *b) {
    CURLU *ua = curl_url(), *ub = curl_url();
    bool same = false;
    if (ua && ub && !curl_url_set(ua, CURLUPART_URL, a, 0) && !curl_url_set(ub, CURLUPART_URL, b, 0)) {
        char *sa = NULL, *sb = NULL, *ha = NULL, *hb = NULL, *pa = NULL, *pb = NULL;
        if (!curl_url_get(ua, CURLUPART_SCHEME, &sa, 0) && !curl_url_get(ub, CURLUPART_SCHEME, &sb, 0) &&
            !curl_url_get(ua, CURLUPART_HOST, &ha, 0) && !curl_url_get(ub, CURLUPART_HOST, &hb, 0) &&
            !curl_url_get(ua, CURLUPART_PORT, &pa, CURLU_DEFAULT_PORT) &&
            !curl_url_get(ub, CURLUPART_PORT, &pb, CURLU_DEFAULT_PORT))
            same = !strcasecmp(sa, sb) && !strcasecmp(ha, hb) && !strcmp(pa, pb);
        curl_free(sa), curl_free(sb), curl_free(ha), curl_free(hb), curl_free(pa), curl_free(pb);
    }
    curl_url_cleanup(ua);
    curl_url_cleanup(ub);
    return same;
}

static long env_long(const char *name, long dflt) {
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    char *end;
    long x = strtol(v, &end, 10);
    return *end || x < 0 ? dflt : x;
}

/* Set up c for one hop to url; the token only for the endpoint's origin. */
static struct curl_slist *prepare(CURL *c, const hub_env *env, const char *url, long long range_from, resp *r,
                                  char *errbuf) {
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 20L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L); /* a connection silent this long is dropped */
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, env_long("QHX_HUB_STALL_S", 30));
    curl_easy_setopt(c, CURLOPT_BUFFERSIZE, 512L * 1024);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "qhx-hub/1 (qhexrt)");
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_xfer);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    errbuf[0] = '\0';
    struct curl_slist *h = NULL;
    h = curl_slist_append(h, "Accept-Encoding: identity");
    if (env->token[0] && same_origin(url, env->endpoint)) {
        char line[600];
        snprintf(line, sizeof line, "Authorization: Bearer %s", env->token);
        h = curl_slist_append(h, line);
    }
    if (range_from > 0) {
        char range[64];
        snprintf(range, sizeof range, "%lld-", range_from);
        curl_easy_setopt(c, CURLOPT_RANGE, range);
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    memset(r, 0, sizeof *r);
    r->retry_after = -1;
    r->range_start = -1;
    return h;
}

static bool transient_curl(CURLcode cc) {
    switch (cc) {
    case CURLE_COULDNT_CONNECT: case CURLE_PARTIAL_FILE: case CURLE_RECV_ERROR: case CURLE_SEND_ERROR:
    case CURLE_OPERATION_TIMEDOUT: case CURLE_GOT_NOTHING: case CURLE_HTTP2: case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR: case CURLE_COULDNT_RESOLVE_HOST:
        return true;
    default:
        return false;
    }
}

static void sleep_interruptible(long ms) {
    while (ms > 0 && !atomic_load(&hub_stop)) {
        long step = ms > 100 ? 100 : ms;
        struct timespec ts = {0, step * 1000000L};
        nanosleep(&ts, NULL);
        ms -= step;
    }
}

/* The wait before try number `tries` (1-based) after a 429 or 5xx: Retry-After when given (at
 * most a minute), else 1, 2, 4 ... seconds (QHX_HUB_RETRY_MS scales the base, for tests). */
static long backoff_ms(const resp *r, int tries) {
    if (r->retry_after >= 0) return (r->retry_after > RETRY_AFTER_CAP_S ? RETRY_AFTER_CAP_S : r->retry_after) * 1000L;
    long base = env_long("QHX_HUB_RETRY_MS", 1000);
    long ms = base << (tries - 1 < 5 ? tries - 1 : 5);
    return ms > 30000 ? 30000 : ms;
}

/* The hub's reason for an error: X-Error-Message, else the body's "error". */
static void error_reason(const resp *r, char *out, size_t cap) {
    out[0] = '\0';
    if (r->error_msg[0]) {
        snprintf(out, cap, "%s", r->error_msg);
        return;
    }
    json_t *j = json_loadb(r->body_err, r->body_err_n, 0, NULL);
    const char *s = j ? json_string_value(json_object_get(j, "error")) : NULL;
    if (s) snprintf(out, cap, "%s", s);
    json_decref(j);
}

/* One line for an HTTP error that is not worth retrying (or no longer). */
static int status_error(const hub_env *env, const resp *r, req_kind kind, const char *repo, const char *rev_or_file,
                        hub_err *e) {
    char why[320], tail[360] = "";
    error_reason(r, why, sizeof why);
    if (why[0]) snprintf(tail, sizeof tail, " (the hub: %s)", why);
    bool gated = !strcmp(r->error_code, "GatedRepo");
    const char *tok = env->token[0] ? "the token given was refused or lacks access to it" : "no token was given (HF_TOKEN, --token, or the token file `hf auth login` writes)";
    switch (r->status) {
    case 401:
    case 403:
        if (gated)
            return hub_fail(e, "%s is a gated repository (HTTP %ld): accept its licence at %s/%s, then use a token of that account; %s%s",
                            repo, r->status, env->endpoint, repo, tok, tail);
        if (r->status == 401)
            return hub_fail(e, "%s: repository not found, or private (HTTP 401): check the name; a private repository needs a token, and %s%s",
                            repo, tok, tail);
        return hub_fail(e, "%s: access refused (HTTP 403): a private or gated repository; %s, or the licence is not yet accepted on the hub%s",
                        repo, tok, tail);
    case 404:
        if (!strcmp(r->error_code, "RevisionNotFound") || (kind != REQ_FILE && !strcmp(r->error_code, "EntryNotFound")))
            return hub_fail(e, "%s: no revision '%s' (HTTP 404): check the branch, tag or commit%s", repo, rev_or_file, tail);
        if (!strcmp(r->error_code, "EntryNotFound") || kind == REQ_FILE)
            return hub_fail(e, "%s: no file '%s' in the repository (HTTP 404)%s", repo, rev_or_file, tail);
        return hub_fail(e, "%s: no such repository (HTTP 404): check ORG/NAME%s", repo, tail);
    case 429:
        return hub_fail(e, "%s: the hub keeps answering HTTP 429 (too many requests) after %d tries; wait and run the same command again%s",
                        repo, MAX_TRIES, tail);
    default:
        if (r->status >= 500)
            return hub_fail(e, "%s: the hub keeps answering HTTP %ld (a server error) after %d tries; try again later%s", repo,
                            r->status, MAX_TRIES, tail);
        return hub_fail(e, "%s: %s: HTTP %ld from %s%s", repo, rev_or_file, r->status, env->endpoint, tail);
    }
}

static int curl_error(const hub_env *env, CURLcode cc, const char *errbuf, const char *repo, const char *url, hub_err *e) {
    if (cc == CURLE_ABORTED_BY_CALLBACK && atomic_load(&hub_stop)) {
        e->interrupted = true;
        return hub_fail(e, "%s: stopped; the partial files are kept: the same command resumes them", repo);
    }
    (void)url;
    return hub_fail(e, "%s: cannot fetch from %s: %s (HF_HUB_OFFLINE=1 runs from the cache only)", repo, env->endpoint,
                    errbuf[0] ? errbuf : curl_easy_strerror(cc));
}

/* ---- JSON requests ---- */
typedef struct membuf {
    char *p;
    size_t n, cap;
    bool over;
    resp *r;
    CURL *c;
} membuf;

static size_t on_body_mem(char *b, size_t size, size_t nitems, void *ud) {
    membuf *m = ud;
    size_t n = size * nitems;
    long status = 0;
    curl_easy_getinfo(m->c, CURLINFO_RESPONSE_CODE, &status);
    if (status != 200) {
        keep_error_body(m->r, b, n);
        return n;
    }
    if (m->n + n + 1 > JSON_CAP) {
        m->over = true;
        return 0;
    }
    if (m->n + n + 1 > m->cap) {
        size_t cap = m->cap ? m->cap : 65536;
        while (cap < m->n + n + 1) cap *= 2;
        char *p = realloc(m->p, cap);
        if (!p) return 0;
        m->p = p, m->cap = cap;
    }
    memcpy(m->p + m->n, b, n);
    m->n += n;
    m->p[m->n] = '\0';
    return n;
}

int hub_http_get(const hub_env *env, const char *url, const char *repo, const char *what, char **body, size_t *len,
                 hub_err *e) {
    hub_http_global_init();
    CURL *c = curl_easy_init();
    if (!c) return hub_fail(e, "%s: libcurl could not start", repo);
    req_kind kind = strstr(url, "/tree/") ? REQ_TREE : REQ_REVISION;
    char cur[4096], errbuf[CURL_ERROR_SIZE];
    resp r;
    membuf m = {0};
    int rc = -1;
    for (int tries = 1;; tries++) {
        snprintf(cur, sizeof cur, "%s", url);
        CURLcode cc = CURLE_OK;
        for (int hop = 0; hop <= MAX_HOPS; hop++) {
            free(m.p);
            memset(&m, 0, sizeof m);
            struct curl_slist *h = prepare(c, env, cur, 0, &r, errbuf);
            m.r = &r, m.c = c;
            curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body_mem);
            curl_easy_setopt(c, CURLOPT_WRITEDATA, &m);
            cc = curl_easy_perform(c);
            curl_slist_free_all(h);
            curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
            char *next = NULL;
            if (cc || r.status < 300 || r.status >= 400 || curl_easy_getinfo(c, CURLINFO_REDIRECT_URL, &next) || !next) break;
            snprintf(cur, sizeof cur, "%s", next);
        }
        if (m.over) {
            hub_fail(e, "%s: the answer for %s is larger than %zu MiB", repo, what, JSON_CAP >> 20);
            break;
        }
        if (cc && transient_curl(cc) && tries < MAX_TRIES && !atomic_load(&hub_stop)) {
            sleep_interruptible(backoff_ms(&r, tries));
            continue;
        }
        if (cc) {
            curl_error(env, cc, errbuf, repo, url, e);
            break;
        }
        if ((r.status == 429 || r.status >= 500) && tries < MAX_TRIES) {
            sleep_interruptible(backoff_ms(&r, tries));
            if (atomic_load(&hub_stop)) {
                e->interrupted = true;
                hub_fail(e, "%s: stopped", repo);
                break;
            }
            continue;
        }
        if (r.status >= 300 && r.status < 400) {
            hub_fail(e, "%s: more than %d redirects for %s (the last to %.200s)", repo, MAX_HOPS, what, cur);
            break;
        }
        if (r.status != 200) {
            status_error(env, &r, kind, repo, what, e);
            break;
        }
        *body = m.p ? m.p : calloc(1, 1);
        *len = m.n;
        m.p = NULL;
        rc = 0;
        break;
    }
    free(m.p);
    curl_easy_cleanup(c);
    return rc;
}

/* ---- downloads ---- */

/* The sha256 runs on a thread of its own, reading the partial file behind the writer (from the
 * page cache): where a core is free the hash is off the receiving path, and a resumed file's
 * prefix is hashed while the rest arrives. */
typedef struct hasher {
    int fd;
    qhx_sha256 h;
    long long hashed;
    atomic_llong ready; /* bytes of the file written so far */
    atomic_int finish;  /* no more bytes will come */
    int err;            /* errno of a failed read */
    pthread_t th;
    bool running;
} hasher;

enum { HASH_CHUNK = 1 << 20 };

static void *hash_loop(void *arg) {
    hasher *hs = arg;
    char *buf = malloc(HASH_CHUNK);
    if (!buf) {
        hs->err = ENOMEM;
        return NULL;
    }
    for (;;) {
        long long ready = atomic_load(&hs->ready);
        if (hs->hashed < ready) {
            size_t want = ready - hs->hashed < HASH_CHUNK ? (size_t)(ready - hs->hashed) : HASH_CHUNK;
            ssize_t got = pread(hs->fd, buf, want, hs->hashed);
            if (got < 0 && errno == EINTR) continue;
            if (got <= 0) {
                hs->err = got ? errno : EIO;
                break;
            }
            qhx_sha256_update(&hs->h, buf, (size_t)got);
            hs->hashed += got;
        } else if (atomic_load(&hs->finish)) {
            if (hs->hashed >= atomic_load(&hs->ready)) break; /* the last bytes may have come just before */
        } else {
            usleep(500);
        }
    }
    free(buf);
    return NULL;
}

/* Hash the file from its start; `ready` bytes of it are there already. */
static int hasher_start(hasher *hs, int fd, long long ready) {
    qhx_sha256_init(&hs->h);
    hs->fd = fd;
    hs->hashed = 0;
    hs->err = 0;
    atomic_store(&hs->ready, ready);
    atomic_store(&hs->finish, 0);
    hs->running = !pthread_create(&hs->th, NULL, hash_loop, hs);
    return hs->running ? 0 : -1;
}

/* Wait until every byte written is hashed (or the thread gave up: err). */
static void hasher_stop(hasher *hs) {
    if (!hs->running) return;
    atomic_store(&hs->finish, 1);
    pthread_join(hs->th, NULL);
    hs->running = false;
}

typedef struct dl {
    int fd;
    hasher *hs;
    long long have, size;
    atomic_llong *progress;
    int werr;           /* errno of a failed write */
    bool too_long, bad_range, started;
    resp *r;
    CURL *c;
} dl;

static size_t on_body_file(char *b, size_t size, size_t nitems, void *ud) {
    dl *d = ud;
    size_t n = size * nitems;
    long status = 0;
    curl_easy_getinfo(d->c, CURLINFO_RESPONSE_CODE, &status);
    if (status != 200 && status != 206) {
        keep_error_body(d->r, b, n);
        return n;
    }
    if (!d->started) {
        d->started = true;
        if (status == 200 && d->have > 0) { /* the server ignored the range: start over */
            if (ftruncate(d->fd, 0) || lseek(d->fd, 0, SEEK_SET) < 0) {
                d->werr = errno;
                return 0;
            }
            if (d->progress) atomic_fetch_sub(d->progress, d->have);
            d->have = 0;
            hasher_stop(d->hs);
            if (hasher_start(d->hs, d->fd, 0)) {
                d->werr = EAGAIN;
                return 0;
            }
        } else if (status == 206 && d->r->range_start != d->have) {
            d->bad_range = true;
            return 0;
        }
    }
    if (d->have + (long long)n > d->size) {
        d->too_long = true;
        return 0;
    }
    for (size_t off = 0; off < n;) {
        ssize_t w = pwrite(d->fd, b + off, n - off, (off_t)(d->have + (long long)off)); /* at the end of what is there */
        if (w < 0) {
            if (errno == EINTR) continue;
            d->werr = errno;
            return 0;
        }
        off += (size_t)w;
    }
    d->have += (long long)n;
    atomic_store(&d->hs->ready, d->have);

    if (d->progress) atomic_fetch_add(d->progress, (long long)n);
    return n;
}

static int write_error(const char *repo, const char *file, const char *part, int err, hub_err *e) {
    if (err == ENOSPC || err == EDQUOT || err == EFBIG)
        return hub_fail(e, "%s: %s: the disk is full (%s) writing %s; free some space and run the same command again (it resumes)",
                        repo, file, strerror(err), part);
    return hub_fail(e, "%s: %s: cannot write %s: %s", repo, file, part, strerror(err));
}

int hub_http_download(const hub_env *env, const char *url, const char *repo, const char *file, const char *part_path,
                      int64_t size, const char *sha256, atomic_llong *progress, hub_err *e) {
    hub_http_global_init();
    int fd = open(part_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return hub_fail(e, "%s: cannot open %s: %s", repo, part_path, strerror(errno));
    struct stat st;
    hasher hs = {0};
    dl d = {.fd = fd, .hs = &hs, .size = size, .progress = progress};
    int rc = -1;
    CURL *c = NULL;
    if (fstat(fd, &st)) {
        hub_fail(e, "%s: %s", part_path, strerror(errno));
        goto out;
    }
    d.have = st.st_size;
    if (d.have > size) { /* not a prefix of this file: start over */
        if (ftruncate(fd, 0)) {
            write_error(repo, file, part_path, errno, e);
            goto out;
        }
        d.have = 0;
    }
    if (hasher_start(&hs, fd, d.have)) {
        hub_fail(e, "%s: cannot start a thread", repo);
        goto out;
    }
    if (progress) atomic_fetch_add(progress, d.have);
    c = curl_easy_init();
    if (!c) {
        hub_fail(e, "%s: libcurl could not start", repo);
        goto out;
    }
    char cur[4096], errbuf[CURL_ERROR_SIZE];
    resp r;
    int tries = 0;
    for (int attempt = 0; d.have < d.size || (d.size == 0 && attempt == 0); attempt++) {
        if (attempt >= MAX_ATTEMPTS) {
            hub_fail(e, "%s: %s: the connection kept dropping (%d attempts); run the same command again to resume", repo, file, attempt);
            goto out;
        }
        long long before = d.have;
        snprintf(cur, sizeof cur, "%s", url);
        CURLcode cc = CURLE_OK;
        for (int hop = 0; hop <= MAX_HOPS; hop++) {
            struct curl_slist *h = prepare(c, env, cur, d.have, &r, errbuf);
            d.r = &r, d.c = c, d.started = false;
            curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body_file);
            curl_easy_setopt(c, CURLOPT_WRITEDATA, &d);
            cc = curl_easy_perform(c);
            curl_slist_free_all(h);
            curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
            char *next = NULL;
            if (cc || r.status < 300 || r.status >= 400 || curl_easy_getinfo(c, CURLINFO_REDIRECT_URL, &next) || !next) break;
            snprintf(cur, sizeof cur, "%s", next);
        }
        if (d.werr) {
            write_error(repo, file, part_path, d.werr, e);
            goto out;
        }
        if (d.too_long || d.bad_range) {
            if (ftruncate(fd, 0) || lseek(fd, 0, SEEK_SET) < 0) {
                write_error(repo, file, part_path, errno, e);
                goto out;
            }
            unlink(part_path);
            hub_fail(e, "%s: %s: the server sent %s; the partial file was removed", repo, file,
                     d.too_long ? "more bytes than the file's announced size" : "a range that does not continue the partial file");
            goto out;
        }
        if (d.have > before) tries = 0; /* it moves: a drop is resumed at once */
        if (cc == CURLE_ABORTED_BY_CALLBACK || atomic_load(&hub_stop)) {
            e->interrupted = true;
            hub_fail(e, "%s: %s: stopped at %lld of %lld bytes; the partial file is kept: the same command resumes it", repo, file,
                     d.have, d.size);
            goto out;
        }
        if (r.status == 416 && d.have > 0) { /* our range is past the end: start over */
            if (ftruncate(fd, 0) || lseek(fd, 0, SEEK_SET) < 0) {
                write_error(repo, file, part_path, errno, e);
                goto out;
            }
            if (progress) atomic_fetch_sub(progress, d.have);
            d.have = 0;
            hasher_stop(&hs);
            if (hasher_start(&hs, fd, 0)) {
                hub_fail(e, "%s: cannot start a thread", repo);
                goto out;
            }
            continue;
        }
        bool retry_status = r.status == 429 || r.status >= 500;
        if ((cc && transient_curl(cc)) || retry_status || (!cc && (r.status == 200 || r.status == 206) && d.have < d.size)) {
            if (++tries >= MAX_TRIES) {
                if (retry_status) status_error(env, &r, REQ_FILE, repo, file, e);
                else if (cc) curl_error(env, cc, errbuf, repo, url, e);
                else hub_fail(e, "%s: %s: the connection kept closing early; run the same command again to resume", repo, file);
                goto out;
            }
            if (d.have == before || retry_status) sleep_interruptible(backoff_ms(&r, tries));
            continue;
        }
        if (cc) {
            curl_error(env, cc, errbuf, repo, url, e);
            goto out;
        }
        if (r.status >= 300 && r.status < 400) {
            hub_fail(e, "%s: %s: more than %d redirects (the last to %.200s)", repo, file, MAX_HOPS, cur);
            goto out;
        }
        if (r.status != 200 && r.status != 206) {
            status_error(env, &r, REQ_FILE, repo, file, e);
            goto out;
        }
        if (d.size == 0) break;
    }
    hasher_stop(&hs);
    if (hs.err || hs.hashed != d.have) {
        hub_fail(e, "%s: %s: cannot read back %s to hash it: %s", repo, file, part_path, strerror(hs.err ? hs.err : EIO));
        goto out;
    }
    uint8_t dig[32];
    char hex[65];
    qhx_sha256_final(&hs.h, dig);
    qhx_sha256_hex(dig, hex);
    if (sha256 && strcmp(hex, sha256)) {
        unlink(part_path);
        hub_fail(e, "%s: %s: sha256 mismatch (expected %s, got %s); the downloaded file was removed", repo, file, sha256, hex);
        goto out;
    }
    /* No fdatasync before the rename, as huggingface_hub: it would bind the download to the
     * disk's write speed. A blob cut short by a power loss has the wrong size, which the next
     * qhx pull sees (it compares every blob with the listing's size and fetches it again), and
     * the loaders refuse a short safetensors or GGUF file. */
    rc = 0;
out:
    hasher_stop(&hs);
    if (c) curl_easy_cleanup(c);
    if (close(fd) && rc == 0) rc = write_error(repo, file, part_path, errno, e);
    return rc;
}

void hub_url_escape(const char *s, bool keep_slash, char *out, size_t cap) {
    static const char hexd[] = "0123456789ABCDEF";
    size_t k = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p && k + 4 < cap; p++) {
        if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || strchr("-._~", *p) ||
            (keep_slash && *p == '/')) {
            out[k++] = (char)*p;
        } else {
            out[k++] = '%';
            out[k++] = hexd[*p >> 4];
            out[k++] = hexd[*p & 15];
        }
    }
    out[k] = '\0';
}
