/* http.c: the HTTP side of qhx serve on libmicrohttpd (docs/server.md says why that library).
 *
 * One thread per connection (MHD_USE_THREAD_PER_CONNECTION): a connection waiting for its job
 * blocks in its own thread, and a streamed response's reader waits on the job's condition
 * variable. While waiting, both look at the socket every WAIT_MS for the client having gone
 * (recv with MSG_PEEK reads 0 or fails): the job is then marked cancelled and the engine drops
 * it before its next decode step. Limits: connections in all and per address, an idle timeout,
 * a header memory cap (libmicrohttpd's connection memory), a body size cap (413) and a deadline
 * for the body to arrive; a slow client holds its connection thread, never an engine slot (a
 * job exists only once its whole body has been read). */
#include "serve.h"

#include "cli.h"


#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define WAIT_MS 20

struct srv_http {
    struct MHD_Daemon *d;
    const qhx_model *m;
    const srv_config *cfg;
    srv_engine *e;
    srv_stats *stats;
    int64_t started;
    atomic_int in_flight; /* requests between their first byte and their last response byte */
};

/* What one request collects while its body arrives. */
typedef struct req_ctx {
    srv_buf body;
    bool too_big;
    double t0;
} req_ctx;

/* ---- responses ------------------------------------------------------------------------------ */

static enum MHD_Result send_text(struct MHD_Connection *c, int status, char *text, const char *type) {
    if (!text) {
        static char fallback[] = "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,\"code\":503}}";
        text = strdup(fallback);
        status = 503;
        if (!text) return MHD_NO;
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (status == 503 || status == 429) MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    if (status == 401) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_json(struct MHD_Connection *c, int status, json_t *v) {
    char *t = v ? json_dumps(v, JSON_COMPACT) : NULL;
    json_decref(v);
    return send_text(c, status, t, "application/json");
}

static enum MHD_Result send_error(srv_http *h, struct MHD_Connection *c, int status, const char *msg) {
    if (status >= 400) atomic_fetch_add(&h->stats->errors, 1);
    return send_text(c, status, srv_error_json(status, msg), "application/json");
}

/* ---- the client going away ------------------------------------------------------------------ */

static int conn_fd(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

/* 1 when the peer closed its end (or the socket failed). Bytes it sent ahead (a pipelined
 * request) are left in place. */
static int peer_gone(int fd) {
    if (fd < 0) return 0;
    char ch;
    ssize_t r = recv(fd, &ch, 1, MSG_PEEK | MSG_DONTWAIT);
    if (r == 0) return 1;
    if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return 1;
    return 0;
}

static void deadline_in(struct timespec *ts, int ms) {
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_nsec += (long)ms * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec += 1;
        ts->tv_nsec -= 1000000000L;
    }
}

/* Wait (j->mu held) until cond holds or WAIT_MS passed. */
static void wait_a_little(srv_job *j) {
    struct timespec ts;
    deadline_in(&ts, WAIT_MS);
    pthread_cond_timedwait(&j->cv, &j->mu, &ts);
}

/* ---- streaming ------------------------------------------------------------------------------ */

typedef struct stream_ctx {
    srv_job *job;
    int fd;
} stream_ctx;

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream_ctx *sc = cls;
    srv_job *j = sc->job;
    pthread_mutex_lock(&j->mu);
    while (j->sse_sent == j->sse.n && !j->done) {
        pthread_mutex_unlock(&j->mu);
        if (peer_gone(sc->fd)) {
            atomic_store(&j->cancelled, 1);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        pthread_mutex_lock(&j->mu);
        if (j->sse_sent == j->sse.n && !j->done) wait_a_little(j);
    }
    size_t n = j->sse.n - j->sse_sent;
    if (n == 0 && j->done) {
        pthread_mutex_unlock(&j->mu);
        return MHD_CONTENT_READER_END_OF_STREAM;
    }
    if (n > max) n = max;
    memcpy(buf, j->sse.p + j->sse_sent, n);
    j->sse_sent += n;
    pthread_mutex_unlock(&j->mu);
    return (ssize_t)n;
}

static void stream_free(void *cls) {
    stream_ctx *sc = cls;
    atomic_store(&sc->job->cancelled, 1); /* no-op once done; stops it when the client left */
    srv_job_unref(sc->job);
    free(sc);
}

static enum MHD_Result respond_stream(srv_http *h, struct MHD_Connection *c, srv_job *j) {
    /* wait for the first bytes (or an early failure) so that a refused prompt still gets its
       4xx status rather than a 200 stream */
    int fd = conn_fd(c);
    pthread_mutex_lock(&j->mu);
    while (!j->done && j->sse.n == 0) {
        pthread_mutex_unlock(&j->mu);
        if (peer_gone(fd)) {
            atomic_store(&j->cancelled, 1);
            return MHD_NO;
        }
        pthread_mutex_lock(&j->mu);
        if (!j->done && j->sse.n == 0) wait_a_little(j);
    }
    bool failed = j->done && j->http_status != 0 && j->sse.n == 0;
    int status = j->http_status;
    char msg[QHX_ERROR_MSG_SIZE];
    snprintf(msg, sizeof msg, "%s", j->error);
    pthread_mutex_unlock(&j->mu);
    if (failed) {
        if (status == 499) return MHD_NO;
        return send_error(h, c, status, msg);
    }
    stream_ctx *sc = calloc(1, sizeof *sc);
    if (!sc) return send_error(h, c, 503, "out of memory");
    srv_job_ref(j);
    sc->job = j;
    sc->fd = fd;
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_reader, sc, stream_free);
    if (!r) {
        stream_free(sc);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

/* ---- generation endpoints ------------------------------------------------------------------- */

static enum MHD_Result respond_wait(srv_http *h, struct MHD_Connection *c, srv_job *j) {
    int fd = conn_fd(c);
    pthread_mutex_lock(&j->mu);
    while (!j->done) {
        pthread_mutex_unlock(&j->mu);
        if (peer_gone(fd)) {
            atomic_store(&j->cancelled, 1);
            return MHD_NO;
        }
        pthread_mutex_lock(&j->mu);
        if (!j->done) wait_a_little(j);
    }
    pthread_mutex_unlock(&j->mu);
    if (j->http_status == 499) return MHD_NO;
    if (j->http_status) {
        return send_error(h, c, j->http_status, j->error);
    }
    return send_text(c, 200, srv_output_body(j), "application/json");
}

static enum MHD_Result generate(srv_http *h, struct MHD_Connection *c, srv_kind kind, const char *body, size_t len) {
    int status = 400;
    qhx_error err = {0};
    srv_job *j = kind == SRV_CHAT ? srv_request_chat(h->m, h->cfg, body, len, &status, &err)
                                  : srv_request_completion(h->m, h->cfg, body, len, &status, &err);
    if (!j) return send_error(h, c, status, err.msg[0] ? err.msg : "bad request");
    j->model_name = h->cfg->alias;
    if (srv_engine_submit(h->e, j)) {
        srv_job_unref(j);
        return send_error(h, c, 503, "the server is busy: every slot is taken and the queue is full; retry later");
    }
    enum MHD_Result r = j->stream ? respond_stream(h, c, j) : respond_wait(h, c, j);
    srv_job_unref(j);
    return r;
}

/* ---- small endpoints ------------------------------------------------------------------------ */

static json_t *load_object(const char *body, size_t len, char *why, size_t why_n) {
    json_error_t je;
    json_t *v = json_loadb(body, len, 0, &je);
    if (!v) snprintf(why, why_n, "the body is not valid JSON (line %d, column %d: %s)", je.line, je.column, je.text);
    else if (!json_is_object(v)) {
        snprintf(why, why_n, "the body must be a JSON object");
        json_decref(v);
        v = NULL;
    }
    return v;
}

static enum MHD_Result tokenize(srv_http *h, struct MHD_Connection *c, const char *body, size_t len) {
    char why[256];
    json_t *root = load_object(body, len, why, sizeof why);
    if (!root) return send_error(h, c, 400, why);
    json_t *content = json_object_get(root, "content");
    if (!json_is_string(content)) {
        json_decref(root);
        return send_error(h, c, 400, "'content' must be a string");
    }
    qhx_error err = {0};
    size_t n = 0;
    const char *s = json_string_value(content);
    size_t sl = json_string_length(content);
    qhx_status rc = qhx_tokenize(h->m, s, sl, NULL, 0, &n, &err);
    qhx_token *ids = rc == QHX_OK || rc == QHX_E_LIMIT ? malloc((n ? n : 1) * sizeof *ids) : NULL;
    if (ids) rc = qhx_tokenize(h->m, s, sl, ids, n, &n, &err);
    json_decref(root);
    if (!ids || rc) {
        free(ids);
        return send_error(h, c, rc == QHX_E_NOMEM || !ids ? 503 : 400, err.msg[0] ? err.msg : "out of memory");
    }
    json_t *list = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(list, json_integer(ids[i]));
    free(ids);
    return send_json(c, 200, json_pack("{s:o}", "tokens", list));
}

static enum MHD_Result detokenize(srv_http *h, struct MHD_Connection *c, const char *body, size_t len) {
    char why[256];
    json_t *root = load_object(body, len, why, sizeof why);
    if (!root) return send_error(h, c, 400, why);
    json_t *list = json_object_get(root, "tokens");
    if (!json_is_array(list)) {
        json_decref(root);
        return send_error(h, c, 400, "'tokens' must be a list of token ids");
    }
    size_t n = json_array_size(list);
    if ((int64_t)n > h->cfg->lim.max_prompt_ids) {
        json_decref(root);
        return send_error(h, c, 413, "'tokens': too many ids");
    }
    qhx_token *ids = malloc((n ? n : 1) * sizeof *ids);
    if (!ids) {
        json_decref(root);
        return send_error(h, c, 503, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(list, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= qhx_model_n_vocab(h->m)) {
            free(ids);
            json_decref(root);
            snprintf(why, sizeof why, "'tokens'[%zu] is not a token id in [0, %lld)", i, (long long)qhx_model_n_vocab(h->m));
            return send_error(h, c, 400, why);
        }
        ids[i] = (qhx_token)json_integer_value(v);
    }
    json_decref(root);
    qhx_error err = {0};
    size_t tl = 0;
    qhx_detokenize(h->m, ids, n, NULL, 0, &tl, &err);
    char *text = malloc(tl + 1);
    qhx_status rc = text ? qhx_detokenize(h->m, ids, n, text, tl + 1, &tl, &err) : QHX_E_NOMEM;
    free(ids);
    if (rc) {
        free(text);
        return send_error(h, c, rc == QHX_E_NOMEM ? 503 : 400, err.msg[0] ? err.msg : "out of memory");
    }
    json_t *s = json_stringn(text, tl);
    free(text);
    return send_json(c, 200, json_pack("{s:o}", "content", s ? s : json_string("")));
}

static enum MHD_Result models(srv_http *h, struct MHD_Connection *c) {
    json_t *m = json_pack("{s:s,s:s,s:I,s:s,s:{s:s,s:I,s:I}}", "id", h->cfg->alias, "object", "model", "created",
                          (json_int_t)h->started, "owned_by", "qhexrt", "meta", "family", qhx_model_family_name(h->m),
                          "n_ctx", (json_int_t)(h->cfg->ctx ? h->cfg->ctx : qhx_model_max_context(h->m)), "n_vocab",
                          (json_int_t)qhx_model_n_vocab(h->m));
    return send_json(c, 200, json_pack("{s:s,s:[o]}", "object", "list", "data", m));
}

static enum MHD_Result metrics(srv_http *h, struct MHD_Connection *c) {
    srv_stats *s = h->stats;
    double dsec = (double)atomic_load(&s->decode_ns) / 1e9;
    const struct {
        const char *name, *type, *help;
        double value;
    } rows[] = {
        {"qhx_requests_total", "counter", "Generation requests accepted.", (double)atomic_load(&s->requests)},
        {"qhx_request_errors_total", "counter", "Responses with an error status.", (double)atomic_load(&s->errors)},
        {"qhx_requests_cancelled_total", "counter", "Requests whose client went away.", (double)atomic_load(&s->cancelled)},
        {"qhx_requests_rejected_total", "counter", "Requests refused with 503 (queue full).", (double)atomic_load(&s->rejected)},
        {"qhx_prompt_tokens_total", "counter", "Prompt tokens of started requests.", (double)atomic_load(&s->prompt_tokens)},
        {"qhx_prompt_cached_tokens_total", "counter", "Prompt tokens reused from a slot's state.",
         (double)atomic_load(&s->cached_tokens)},
        {"qhx_generated_tokens_total", "counter", "Tokens generated.", (double)atomic_load(&s->generated_tokens)},
        {"qhx_queue_length", "gauge", "Requests waiting for a slot.", (double)srv_engine_queue_length(h->e)},
        {"qhx_slots_busy", "gauge", "Slots with a request.", (double)srv_engine_busy_slots(h->e)},
        {"qhx_slots_total", "gauge", "Slots.", (double)h->cfg->parallel},
        {"qhx_decode_tokens_per_second", "gauge", "Tokens per second of the decode steps so far (all slots together).",
         dsec > 0 ? (double)atomic_load(&s->decode_tokens) / dsec : 0.0},
    };
    const size_t n_rows = sizeof rows / sizeof rows[0];
    srv_buf b = {0};
    char line[512];
    int bad = 0;
    for (size_t i = 0; i < n_rows; i++) {
        int digits = i + 1 == n_rows ? 3 : 0; /* counts are whole; the rate has decimals */
        snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s %s\n%s %.*f\n", rows[i].name, rows[i].help, rows[i].name,
                 rows[i].type, rows[i].name, digits, rows[i].value);
        bad |= srv_buf_puts(&b, line);
    }
    if (bad) {
        srv_buf_free(&b);
        return send_text(c, 200, NULL, "text/plain; version=0.0.4");
    }
    return send_text(c, 200, b.p, "text/plain; version=0.0.4"); /* send_text frees it */
}

/* ---- routing -------------------------------------------------------------------------------- */

static bool authorized(srv_http *h, struct MHD_Connection *c) {
    if (!h->cfg->api_key) return true;
    const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!a || strncmp(a, "Bearer ", 7)) return false;
    const char *k = a + 7, *want = h->cfg->api_key;
    size_t nk = strlen(k), nw = strlen(want);
    unsigned diff = (unsigned)(nk ^ nw); /* compare every byte: the time says nothing of the key */
    for (size_t i = 0; i < nw; i++) diff |= (unsigned)(unsigned char)want[i] ^ (unsigned)(unsigned char)(i < nk ? k[i] : 0);
    return diff == 0;
}

static const char *strip_v1(const char *url) { return strncmp(url, "/v1/", 4) ? url : url + 3; }

static enum MHD_Result route(srv_http *h, struct MHD_Connection *c, const char *url, const char *method,
                             const char *body, size_t len) {
    bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
    if (!strcmp(url, "/health") && get) return send_json(c, 200, json_pack("{s:s}", "status", "ok"));
    if (!authorized(h, c)) return send_error(h, c, 401, "a valid API key is needed: Authorization: Bearer KEY");
    const char *u = strip_v1(url);
    struct {
        const char *path;
        bool post;
    } known[] = {{"/chat/completions", true}, {"/completions", true}, {"/models", false},
                 {"/tokenize", true},         {"/detokenize", true},  {"/metrics", false}};
    int k = -1;
    for (int i = 0; i < (int)(sizeof known / sizeof known[0]); i++)
        if (!strcmp(u, known[i].path)) k = i;
    if (k < 0) return send_error(h, c, 404, "no such endpoint");
    if ((known[k].post && !post) || (!known[k].post && !get))
        return send_error(h, c, 405, known[k].post ? "this endpoint takes POST" : "this endpoint takes GET");
    switch (k) {
    case 0:
    case 1: atomic_fetch_add(&h->stats->requests, 1); return generate(h, c, k == 0 ? SRV_CHAT : SRV_COMPLETION, body, len);
    case 2: return models(h, c);
    case 3: return tokenize(h, c, body, len);
    case 4: return detokenize(h, c, body, len);
    default: return metrics(h, c);
    }
}

static enum MHD_Result too_large(srv_http *h, struct MHD_Connection *c) {
    char msg[128];
    snprintf(msg, sizeof msg, "the request body is larger than the cap of %zu bytes", h->cfg->lim.max_body);
    return send_error(h, c, 413, msg);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    srv_http *h = cls;
    req_ctx *r = *con_cls;
    if (!r) { /* headers are in: a body that announces more than the cap is refused now */
        if (!(r = calloc(1, sizeof *r))) return MHD_NO;
        atomic_fetch_add(&h->in_flight, 1);
        r->t0 = srv_now();
        *con_cls = r;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > h->cfg->lim.max_body) {
            r->too_big = true;
            return too_large(h, c); /* before the body is read; the connection closes after */
        }
        return MHD_YES;
    }
    if (*upload_size) {
        if (srv_now() - r->t0 > h->cfg->lim.body_timeout_s) return MHD_NO; /* too slow: drop it */
        if (!r->too_big && r->body.n + *upload_size > h->cfg->lim.max_body) r->too_big = true;
        if (!r->too_big && srv_buf_put(&r->body, upload, *upload_size)) return MHD_NO;
        *upload_size = 0;
        return MHD_YES;
    }
    if (r->too_big) return too_large(h, c);
    return route(h, c, url, method, r->body.p ? r->body.p : "", r->body.n);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)c, (void)toe;
    srv_http *h = cls;
    req_ctx *r = *con_cls;
    if (!r) return;
    atomic_fetch_sub(&h->in_flight, 1);
    srv_buf_free(&r->body);
    free(r);
    *con_cls = NULL;
}

/* ---- lifetime ------------------------------------------------------------------------------- */

srv_http *srv_http_start(const qhx_model *m, const srv_config *cfg, srv_engine *e, srv_stats *stats, int *port_out,
                         qhx_error *err) {
    srv_http *h = calloc(1, sizeof *h);
    if (!h) {
        qhx_cli_fail(err, QHX_E_NOMEM, "serve: out of memory");
        return NULL;
    }
    *h = (srv_http){.m = m, .cfg = cfg, .e = e, .stats = stats, .started = (int64_t)srv_now()};
    struct sockaddr_in a4 = {0};
    struct sockaddr_in6 a6 = {0};
    struct sockaddr *sa;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC;
    if (inet_pton(AF_INET, cfg->host, &a4.sin_addr) == 1) {
        a4.sin_family = AF_INET;
        a4.sin_port = htons((uint16_t)cfg->port);
        sa = (struct sockaddr *)&a4;
    } else if (inet_pton(AF_INET6, cfg->host, &a6.sin6_addr) == 1) {
        a6.sin6_family = AF_INET6;
        a6.sin6_port = htons((uint16_t)cfg->port);
        sa = (struct sockaddr *)&a6;
        flags |= MHD_USE_IPv6;
    } else {
        qhx_cli_fail(err, QHX_E_ARG, "serve: --host '%s' is not an IPv4 or IPv6 address", cfg->host);
        free(h);
        return NULL;
    }
    h->d = MHD_start_daemon(flags, (uint16_t)cfg->port, NULL, NULL, on_request, h, MHD_OPTION_SOCK_ADDR, sa,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)cfg->lim.conn_timeout_s,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned int)cfg->lim.max_connections,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned int)cfg->lim.max_per_ip,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)64 * 1024,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_END);
    if (!h->d) {
        qhx_cli_fail(err, QHX_E_IO, "serve: cannot listen on %s:%d (%s)", cfg->host, cfg->port,
                 errno ? strerror(errno) : "libmicrohttpd refused the options");
        free(h);
        return NULL;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    *port_out = di ? di->port : cfg->port;
    return h;
}

void srv_http_quiesce(srv_http *h) {
    if (h && h->d) {
        MHD_socket s = MHD_quiesce_daemon(h->d);
        if (s != MHD_INVALID_SOCKET) close(s);
    }
}

void srv_http_drain(srv_http *h, int max_s) {
    double t0 = srv_now();
    while (h && atomic_load(&h->in_flight) > 0 && srv_now() - t0 < max_s) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

void srv_http_stop(srv_http *h) {
    if (!h) return;
    if (h->d) MHD_stop_daemon(h->d);
    free(h);
}
