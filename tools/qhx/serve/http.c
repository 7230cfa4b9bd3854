/* http.c: the HTTP/1.1 side of qhx serve, on plain sockets (docs/server.md says why not a
 * library): connections, limits, deadlines, routing, responses and streaming.
 *
 * One thread per connection: a connection waiting for its job blocks in its own thread, and a
 * streamed response waits on the job's condition variable. While waiting, both look at the
 * socket every WAIT_MS for the client having gone (recv with MSG_PEEK reads 0 or fails): the job
 * is then marked cancelled and the engine drops it before its next decode step. The framing
 * (http_parse.c) is strict and every error it finds is answered in the OpenAI error shape with
 * the connection closed. Limits: connections in all and per address, an idle timeout between
 * requests, one deadline for the whole header section and one for the whole body (408), a
 * header cap (414 for the request line, 431 for the section), a body cap (413), and a write
 * that makes no progress for the idle timeout drops the connection. A slow client holds its
 * connection thread, never an engine slot (a job exists only once its whole body is in). */
#include "serve.h"

#include "cli.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define WAIT_MS 20
#define IN_CAP (SRV_HTTP_MAX_HEAD + 16 * 1024) /* a connection's input buffer */
#define PATH_CAP (SRV_HTTP_MAX_LINE + 1)       /* any target within the request line fits */

struct srv_http {
    const qhx_model *m;
    const srv_config *cfg;
    srv_engine *e;
    srv_stats *stats;
    int64_t started;
    atomic_int in_flight; /* requests between their header section and their last response byte */
    atomic_int quiesced, stopping;
    int lfd, wake[2];
    pthread_t acceptor;
    bool acceptor_running;
    pthread_mutex_t mu; /* the connection table */
    pthread_cond_t cv;
    int n_conns;
    struct srv_conn **conns; /* max_connections entries, NULL where free */
};

/* One connection and the request it is on. */
typedef struct srv_conn {
    srv_http *h;
    int fd;
    struct sockaddr_storage addr;
    char *in; /* bytes read and not yet used (IN_CAP) */
    size_t n_in;
    srv_http_head head;
    char path[PATH_CAP];
    bool head_only; /* HEAD: the GET answer without its body */
    bool close;     /* close after this response */
    const char *allow; /* a 405's Allow header */
    bool ollama;       /* an /api/ request: errors in ollama's shape, {"error": "..."} */
    /* the access log's line of this request */
    double t0;          /* its header section in */
    int status;         /* the status sent (0: none) */
    int64_t n_prompt, n_generated;
} srv_conn;

static double mono_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- socket I/O ------------------------------------------------------------------------------ */

/* Wait for fd to be ready for ev until deadline (a mono_now time). 1 ready, 0 timed out. */
static int wait_fd(int fd, short ev, double deadline) {
    for (;;) {
        double left = deadline - mono_now();
        if (left <= 0) return 0;
        struct pollfd p = {fd, ev, 0};
        int r = poll(&p, 1, (int)(left * 1000) + 1);
        if (r > 0) return 1;
        if (r < 0 && errno != EINTR) return 1; /* let the read or write report it */
    }
}

/* Read more bytes into c->in. >0 bytes read, 0 the peer closed or failed, -2 deadline passed,
 * -3 the buffer is full. */
static int conn_read(srv_conn *c, double deadline) {
    if (c->n_in >= IN_CAP) return -3;
    for (;;) {
        if (!wait_fd(c->fd, POLLIN, deadline)) return -2;
        ssize_t r = recv(c->fd, c->in + c->n_in, IN_CAP - c->n_in, MSG_DONTWAIT);
        if (r > 0) {
            c->n_in += (size_t)r;
            return (int)r;
        }
        if (r == 0) return 0;
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return 0;
    }
}

static void conn_consume(srv_conn *c, size_t k) {
    memmove(c->in, c->in + k, c->n_in - k);
    c->n_in -= k;
}

/* Write all of p; a write that makes no progress for the idle timeout fails (-1). */
static int conn_write(srv_conn *c, const char *p, size_t n) {
    while (n) {
        if (!wait_fd(c->fd, POLLOUT, mono_now() + c->h->cfg->lim.conn_timeout_s)) return -1;
        ssize_t r = send(c->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (r > 0) {
            p += r;
            n -= (size_t)r;
        } else if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return -1;
    }
    return 0;
}

/* ---- responses ------------------------------------------------------------------------------ */

static const char *reason(int status) {
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 417: return "Expectation Failed";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return status >= 500 ? "Internal Server Error" : "Bad Request";
    }
}

/* The status line and the headers every response has; len -1: a chunked body, -2: a body
 * that ends when the connection closes (a stream to an HTTP/1.0 client). */
static int put_head(srv_conn *c, srv_buf *b, int status, const char *type, long long len, const char *extra) {
    char date[64], line[512];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    if (atomic_load(&c->h->quiesced)) c->close = true;
    int k = snprintf(line, sizeof line, "HTTP/1.1 %d %s\r\nDate: %s\r\nServer: qhx\r\nContent-Type: %s\r\n", status,
                     reason(status), date, type);
    int bad = srv_buf_put(b, line, (size_t)k);
    if (len >= 0) k = snprintf(line, sizeof line, "Content-Length: %lld\r\n", len);
    else if (len == -1) k = snprintf(line, sizeof line, "Transfer-Encoding: chunked\r\n");
    else k = 0;
    bad |= srv_buf_put(b, line, (size_t)k);
    if (c->close) bad |= srv_buf_puts(b, "Connection: close\r\n");
    if (extra) bad |= srv_buf_puts(b, extra);
    bad |= srv_buf_puts(b, "\r\n");
    return bad;
}

/* A complete response; takes text (freed here). 0, or -1 when the connection must end. */
static int send_text(srv_conn *c, int status, char *text, const char *type) {
    if (!text) {
        static const char fallback[] =
            "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,\"code\":503}}";
        text = strdup(fallback);
        status = 503;
        if (!text) return -1;
    }
    char extra[256] = "";
    if (status == 503 || status == 429) snprintf(extra, sizeof extra, "Retry-After: 1\r\n");
    if (status == 401) snprintf(extra, sizeof extra, "WWW-Authenticate: Bearer\r\n");
    if (status == 405 && c->allow) snprintf(extra, sizeof extra, "Allow: %s\r\n", c->allow);
    size_t len = strlen(text);
    srv_buf b = {0};
    c->status = status;
    int bad = put_head(c, &b, status, type, (long long)len, extra[0] ? extra : NULL);
    if (!c->head_only) bad |= srv_buf_put(&b, text, len);
    free(text);
    int rc = bad ? -1 : conn_write(c, b.p, b.n);
    srv_buf_free(&b);
    return rc || c->close ? -1 : 0;
}

static int send_json(srv_conn *c, int status, json_t *v) {
    char *t = v ? json_dumps(v, JSON_COMPACT) : NULL;
    json_decref(v);
    return send_text(c, status, t, "application/json");
}

static int send_error(srv_http *h, srv_conn *c, int status, const char *msg) {
    if (status >= 400) atomic_fetch_add(&h->stats->errors, 1);
    if (c->ollama) return send_json(c, status, json_pack("{s:s}", "error", msg));
    return send_text(c, status, srv_error_json(status, msg), "application/json");
}

/* ---- the client going away ------------------------------------------------------------------ */

static int conn_fd(srv_conn *c) { return c->fd; }

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

/* Wait for the job's next stream bytes (or its end), copy at most max of them into buf.
 * Returns the bytes copied, 0 at the end of the stream, -1 when the client went away. */
static ssize_t stream_next(srv_job *j, int fd, char *buf, size_t max) {
    pthread_mutex_lock(&j->mu);
    while (j->sse_sent == j->sse.n && !j->done) {
        pthread_mutex_unlock(&j->mu);
        if (peer_gone(fd)) return -1;
        pthread_mutex_lock(&j->mu);
        if (j->sse_sent == j->sse.n && !j->done) wait_a_little(j);
    }
    size_t n = j->sse.n - j->sse_sent;
    if (n > max) n = max;
    memcpy(buf, j->sse.p + j->sse_sent, n);
    j->sse_sent += n;
    pthread_mutex_unlock(&j->mu);
    return (ssize_t)n;
}

/* The SSE bytes as a chunked body (as they are for HTTP/1.0, which has no chunks: the end of
 * the connection ends the body); the client leaving (or not reading) cancels the job. */
static int stream_body(srv_conn *c, srv_job *j) {
    bool chunks = c->head.minor >= 1;
    enum { PIECE = 16 * 1024 };
    char *buf = malloc(PIECE + 32);
    if (!buf) return -1;
    for (;;) {
        ssize_t n = stream_next(j, c->fd, buf + 24, PIECE);
        if (n < 0) break;
        if (n == 0) {
            free(buf);
            return (chunks && conn_write(c, "0\r\n\r\n", 5)) || c->close ? -1 : 0;
        }
        if (!chunks) {
            if (conn_write(c, buf + 24, (size_t)n)) break;
            continue;
        }
        char size[24];
        int k = snprintf(size, sizeof size, "%zx\r\n", (size_t)n);
        memcpy(buf + 24 - k, size, (size_t)k);
        memcpy(buf + 24 + n, "\r\n", 2);
        if (conn_write(c, buf + 24 - k, (size_t)k + (size_t)n + 2)) break;
    }
    free(buf);
    atomic_store(&j->cancelled, 1);
    return -1;
}

static int respond_stream(srv_http *h, srv_conn *c, srv_job *j) {
    /* wait for the first bytes (or an early failure) so that a refused prompt still gets its
       4xx status rather than a 200 stream */
    int fd = conn_fd(c);
    pthread_mutex_lock(&j->mu);
    while (!j->done && j->sse.n == 0) {
        pthread_mutex_unlock(&j->mu);
        if (peer_gone(fd)) {
            atomic_store(&j->cancelled, 1);
            return -1;
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
        if (status == 499) return -1;
        return send_error(h, c, status, msg);
    }
    srv_buf b = {0};
    if (c->head.minor == 0) c->close = true;
    c->status = 200;
    int bad = put_head(c, &b, 200, j->ollama ? "application/x-ndjson" : "text/event-stream", c->head.minor ? -1 : -2,
                       "Cache-Control: no-cache\r\n");
    int rc = bad ? -1 : conn_write(c, b.p, b.n);
    srv_buf_free(&b);
    if (rc) {
        atomic_store(&j->cancelled, 1);
        return -1;
    }
    int r = stream_body(c, j);
    pthread_mutex_lock(&j->mu);
    status = j->done ? j->http_status : 0;
    pthread_mutex_unlock(&j->mu);
    if (status && status != 499) atomic_fetch_add(&h->stats->errors, 1); /* ended by its error event */
    return r;
}

/* ---- generation endpoints ------------------------------------------------------------------- */

/* Wait for the job's end; -1 when the client went away first (the job is then cancelled). */
static int wait_done(srv_conn *c, srv_job *j) {
    int fd = conn_fd(c);
    pthread_mutex_lock(&j->mu);
    while (!j->done) {
        pthread_mutex_unlock(&j->mu);
        if (peer_gone(fd)) {
            atomic_store(&j->cancelled, 1);
            return -1;
        }
        pthread_mutex_lock(&j->mu);
        if (!j->done) wait_a_little(j);
    }
    pthread_mutex_unlock(&j->mu);
    return 0;
}

static int respond_wait(srv_http *h, srv_conn *c, srv_job *j) {
    int fd = conn_fd(c);
    pthread_mutex_lock(&j->mu);
    while (!j->done) {
        pthread_mutex_unlock(&j->mu);
        if (peer_gone(fd)) {
            atomic_store(&j->cancelled, 1);
            return -1;
        }
        pthread_mutex_lock(&j->mu);
        if (!j->done) wait_a_little(j);
    }
    pthread_mutex_unlock(&j->mu);
    if (j->http_status == 499) return -1;
    if (j->http_status) {
        return send_error(h, c, j->http_status, j->error);
    }
    return send_text(c, 200, srv_output_body(j), "application/json");
}

static json_t *load_object(const char *body, size_t len, char *why, size_t why_n);
static int wrong_method(srv_http *h, srv_conn *c, bool post);

/* Bytes of a streamed body: a chunk (HTTP/1.1), or as they are (HTTP/1.0: the connection's end
 * ends the body). */
static int write_piece(srv_conn *c, const char *p, size_t n) {
    if (c->head.minor == 0) return conn_write(c, p, n);
    char size[24];
    int k = snprintf(size, sizeof size, "%zx\r\n", n);
    return conn_write(c, size, (size_t)k) || conn_write(c, p, n) || conn_write(c, "\r\n", 2) ? -1 : 0;
}

/* Copy out what job j has streamed beyond what was sent (whole events: the engine appends them
 * whole under mu). Returns the bytes (malloc'd; *n) or NULL when there are none; *done: the job
 * has ended and every byte is out. */
static char *take_stream(srv_job *j, size_t *n, bool *done) {
    pthread_mutex_lock(&j->mu);
    *n = j->sse.n - j->sse_sent;
    char *p = *n ? malloc(*n) : NULL;
    if (p) {
        memcpy(p, j->sse.p + j->sse_sent, *n);
        j->sse_sent = j->sse.n;
    } else *n = 0;
    *done = j->done && j->sse_sent == j->sse.n;
    pthread_mutex_unlock(&j->mu);
    return p;
}

/* Several choices streamed: each job's events (their choices[].index set) as they come, on one
 * stream, then one usage chunk (when asked for) and one [DONE]. A failure before the first byte
 * of any choice is answered with its status; the client leaving cancels every choice. */
static int stream_choices(srv_http *h, srv_conn *c, srv_job **jobs, int n) {
    for (int i = 0; i < n; i++) { /* the first bytes (or an early failure) of every choice */
        pthread_mutex_lock(&jobs[i]->mu);
        while (!jobs[i]->done && jobs[i]->sse.n == 0) {
            pthread_mutex_unlock(&jobs[i]->mu);
            if (peer_gone(conn_fd(c))) return -1;
            pthread_mutex_lock(&jobs[i]->mu);
            if (!jobs[i]->done && jobs[i]->sse.n == 0) wait_a_little(jobs[i]);
        }
        bool failed = jobs[i]->done && jobs[i]->http_status && jobs[i]->sse.n == 0;
        pthread_mutex_unlock(&jobs[i]->mu);
        if (failed) return jobs[i]->http_status == 499 ? -1 : send_error(h, c, jobs[i]->http_status, jobs[i]->error);
    }
    srv_buf b = {0};
    if (c->head.minor == 0) c->close = true;
    c->status = 200;
    int bad = put_head(c, &b, 200, "text/event-stream", c->head.minor ? -1 : -2, "Cache-Control: no-cache\r\n");
    bad = bad || conn_write(c, b.p, b.n);
    srv_buf_free(&b);
    int open = n;
    bool ended[SRV_MAX_CHOICES] = {false};
    while (!bad && open > 0) {
        bool any = false;
        for (int i = 0; i < n && !bad; i++) {
            if (ended[i]) continue;
            size_t k = 0;
            bool done = false;
            char *p = take_stream(jobs[i], &k, &done);
            if (p) bad = write_piece(c, p, k);
            free(p);
            any |= k > 0;
            if (done) {
                ended[i] = true;
                open--;
            }
        }
        if (!bad && !any && open > 0) {
            if (peer_gone(conn_fd(c))) bad = 1;
            else nanosleep(&(struct timespec){0, 2 * 1000000L}, NULL);
        }
    }
    if (bad) return -1;
    int64_t gen = 0;
    for (int i = 0; i < n; i++) gen += jobs[i]->n_generated;
    c->n_prompt = jobs[0]->n_prompt;
    c->n_generated = gen;
    if (jobs[0]->include_usage) {
        json_t *u = json_pack("{s:s,s:s,s:I,s:s,s:[],s:{s:I,s:I,s:I}}", "id", jobs[0]->id, "object",
                              jobs[0]->kind == SRV_CHAT ? "chat.completion.chunk" : "text_completion", "created",
                              (json_int_t)jobs[0]->created, "model", jobs[0]->model_name, "choices", "usage",
                              "prompt_tokens", (json_int_t)c->n_prompt, "completion_tokens", (json_int_t)gen,
                              "total_tokens", (json_int_t)(c->n_prompt + gen));
        char *t = u ? json_dumps(u, JSON_COMPACT) : NULL;
        json_decref(u);
        srv_buf e = {0};
        bad = !t || srv_buf_puts(&e, "data: ") || srv_buf_puts(&e, t) || srv_buf_puts(&e, "\n\n") ||
              write_piece(c, e.p, e.n);
        free(t);
        srv_buf_free(&e);
    }
    bad = bad || write_piece(c, "data: [DONE]\n\n", 14) || (c->head.minor && conn_write(c, "0\r\n\r\n", 5));
    return bad || c->close ? -1 : 0;
}

/* "n" > 1: one job per choice, each parsed from the same body (choice i samples with seed + i,
 * so that sampled choices differ and each is reproducible), all submitted at once: the engine
 * decodes the slots they take together, in one batched step (qhx_sessions_decode), and the
 * choices beyond the free slots wait in the queue. The answer: every job's choice, its index
 * set, and one usage (the prompt counted once, the completion tokens summed). */
static int generate_choices(srv_http *h, srv_conn *c, srv_job *first, const char *body, size_t len) {
    int n = first->n_choices, status = 400, submitted = 0, rc = -1;
    srv_job *jobs[SRV_MAX_CHOICES] = {first};
    qhx_error err = {0};
    for (int i = 1; i < n; i++) {
        jobs[i] = first->kind == SRV_CHAT ? srv_request_chat(h->m, h->cfg, body, len, &status, &err)
                                          : srv_request_completion(h->m, h->cfg, body, len, &status, &err);
        if (!jobs[i]) {
            rc = send_error(h, c, status, err.msg[0] ? err.msg : "bad request");
            goto out;
        }
        jobs[i]->model_name = first->model_name;
        jobs[i]->sampling.seed = first->sampling.seed + (uint64_t)i;
        memcpy(jobs[i]->id, first->id, sizeof first->id);
        jobs[i]->created = first->created;
    }
    for (int i = 0; i < n; i++) {
        jobs[i]->choice_index = i;
        jobs[i]->one_of_many = first->stream;
    }
    for (; submitted < n; submitted++)
        if (srv_engine_submit(h->e, jobs[submitted])) {
            rc = send_error(h, c, 503, "the server is busy: every slot is taken and the queue is full; retry later");
            goto out;
        }
    if (first->stream) {
        rc = stream_choices(h, c, jobs, n);
        goto out;
    }
    json_t *all = NULL;
    for (int i = 0; i < n; i++) {
        if (wait_done(c, jobs[i])) goto out;
        if (jobs[i]->http_status == 499) goto out;
        if (jobs[i]->http_status) {
            rc = send_error(h, c, jobs[i]->http_status, jobs[i]->error);
            goto out;
        }
        char *t = srv_output_body(jobs[i]);
        json_t *one = t ? json_loads(t, 0, NULL) : NULL;
        free(t);
        json_t *choice = json_array_get(json_object_get(one, "choices"), 0);
        if (!one || !choice) {
            json_decref(one);
            rc = send_error(h, c, 503, "out of memory");
            goto out;
        }
        json_object_set_new(choice, "index", json_integer(i));
        if (!all) all = one;
        else {
            json_array_append(json_object_get(all, "choices"), choice);
            json_decref(one);
        }
        c->n_generated += jobs[i]->n_generated;
    }
    c->n_prompt = first->n_prompt;
    json_t *usage = json_object_get(all, "usage");
    json_object_set_new(usage, "completion_tokens", json_integer(c->n_generated));
    json_object_set_new(usage, "total_tokens", json_integer(c->n_prompt + c->n_generated));
    rc = send_json(c, 200, all);
out:
    for (int i = 0; i < n; i++) {
        if (i < submitted) atomic_store(&jobs[i]->cancelled, 1); /* no-op for the finished */
        if (jobs[i]) srv_job_unref(jobs[i]);
    }
    return rc;
}

/* llama-server's /completion body in the OpenAI completions' words: n_predict is max_tokens
 * (-1 or absent: until the context or the server's cap), n_probs is logprobs; its other
 * fields the server has (temperature, top_k, top_p, min_p, seed, stop, stream, grammar,
 * json_schema, ignore_eos, repeat_penalty ...) have the same names, and the ones it has not
 * (cache_prompt: prompts are always reused; id_slot; samplers ...) are ignored, as llama-server
 * ignores what it does not know. NULL: not a JSON object (why says so). */
static char *llama_body(const char *body, size_t len, bool *until_end, char *why, size_t why_n) {
    json_t *root = load_object(body, len, why, why_n);
    if (!root) return NULL;
    json_t *np = json_object_get(root, "n_predict");
    *until_end = !np || (json_is_integer(np) && json_integer_value(np) < 0);
    if (np && *until_end) json_object_del(root, "n_predict");
    else if (np) {
        json_object_set(root, "max_tokens", np);
        json_object_del(root, "n_predict");
    }
    json_t *probs = json_object_get(root, "n_probs");
    if (probs) {
        if (!json_is_integer(probs) || json_integer_value(probs) > 0) json_object_set(root, "logprobs", probs);
        json_object_del(root, "n_probs");
    }
    char *t = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    if (!t) snprintf(why, why_n, "out of memory");
    return t;
}

static int generate(srv_http *h, srv_conn *c, srv_kind kind, bool llama, const char *body, size_t len) {
    int status = 400;
    qhx_error err = {0};
    char *own = NULL, why[256];
    bool until_end = false;
    if (llama && !(body = own = llama_body(body, len, &until_end, why, sizeof why))) return send_error(h, c, 400, why);
    if (own) len = strlen(own);
    srv_job *j = kind == SRV_CHAT ? srv_request_chat(h->m, h->cfg, body, len, &status, &err)
                                  : srv_request_completion(h->m, h->cfg, body, len, &status, &err);
    if (j && llama) j->n_choices = 1; /* llama-server's /completion has one answer */
    free(own);
    if (!j) return send_error(h, c, status, err.msg[0] ? err.msg : "bad request");
    j->model_name = h->cfg->alias;
    if (llama) {
        j->llama = true;
        if (until_end) j->max_tokens = -1; /* the engine's room: the context, at most the server's cap */
    }
    if (j->n_choices > 1) return generate_choices(h, c, j, body, len); /* takes j */
    if (srv_engine_submit(h->e, j)) {
        srv_job_unref(j);
        return send_error(h, c, 503, "the server is busy: every slot is taken and the queue is full; retry later");
    }
    int r = j->stream ? respond_stream(h, c, j) : respond_wait(h, c, j);
    pthread_mutex_lock(&j->mu);
    if (j->done) { /* the engine's counts are final once done is set (under mu) */
        c->n_prompt = j->n_prompt;
        c->n_generated = j->n_generated;
    }
    pthread_mutex_unlock(&j->mu);
    srv_job_unref(j);
    return r;
}

/* The embeddings endpoints (embed.c): one job for every input, waited for, answered whole. */
static int embeddings(srv_http *h, srv_conn *c, srv_embed_api api, const char *body, size_t len) {
    int status = 400;
    bool b64 = false;
    qhx_error err = {0};
    atomic_fetch_add(&h->stats->requests, 1);
    srv_job *j = srv_request_embed(h->m, h->cfg, body, len, api, &b64, &status, &err);
    if (!j) return send_error(h, c, status, err.msg[0] ? err.msg : "bad request");
    j->model_name = h->cfg->alias;
    if (srv_engine_submit(h->e, j)) {
        srv_job_unref(j);
        return send_error(h, c, 503, "the server is busy: every slot is taken and the queue is full; retry later");
    }
    int r = -1;
    if (!wait_done(c, j) && j->http_status != 499) {
        c->n_prompt = j->n_prompt;
        if (j->http_status) r = send_error(h, c, j->http_status, j->error);
        else {
            char *t = srv_embed_body(h->m, j, api, b64);
            r = t ? send_text(c, 200, t, "application/json") : send_error(h, c, 503, "out of memory");
        }
    }
    atomic_store(&j->cancelled, 1); /* no-op once done */
    srv_job_unref(j);
    return r;
}

/* ollama's /api/chat and /api/generate: the body said again in the OpenAI words, then the same
 * path as /v1/chat/completions and /v1/completions; the answer in ollama's shapes. */
static int ollama_generate(srv_http *h, srv_conn *c, int which, const char *body, size_t len) {
    char why[512] = "";
    bool stream = true, raw = false, load_only = false;
    char *t = which == SRV_OLLAMA_CHAT ? srv_ollama_chat_body(body, len, h->cfg->ctx, &stream, why, sizeof why)
                                       : srv_ollama_generate_body(body, len, h->cfg->ctx, &stream, &raw, &load_only, why,
                                                                  sizeof why);
    if (!t) return send_error(h, c, 400, why);
    if (load_only) { /* ollama: a generate without a prompt loads the model and says so */
        free(t);
        char when[48];
        srv_ollama_time(srv_now(), when, sizeof when);
        return send_json(c, 200, json_pack("{s:s,s:s,s:s,s:b,s:s}", "model", h->cfg->alias, "created_at", when, "response",
                                           "", "done", 1, "done_reason", "load"));
    }
    int status = 400;
    qhx_error err = {0};
    /* our own compact JSON: a quote inside a string is escaped, so this finds the key only */
    bool until_end = !strstr(t, "\"max_tokens\":");
    srv_job *j = which == SRV_OLLAMA_CHAT || !raw ? srv_request_chat(h->m, h->cfg, t, strlen(t), &status, &err)
                                                  : srv_request_completion(h->m, h->cfg, t, strlen(t), &status, &err);
    free(t);
    if (!j) return send_error(h, c, status, err.msg[0] ? err.msg : "bad request");
    j->model_name = h->cfg->alias;
    j->ollama = which;
    j->stream = stream;
    if (until_end) j->max_tokens = -1; /* ollama's default: until the end or the context (not OpenAI's 16) */
    if (srv_engine_submit(h->e, j)) {
        srv_job_unref(j);
        return send_error(h, c, 503, "the server is busy: every slot is taken and the queue is full; retry later");
    }
    int r = j->stream ? respond_stream(h, c, j) : respond_wait(h, c, j);
    pthread_mutex_lock(&j->mu);
    if (j->done) {
        c->n_prompt = j->n_prompt;
        c->n_generated = j->n_generated;
    }
    pthread_mutex_unlock(&j->mu);
    srv_job_unref(j);
    return r;
}

static int ollama_route(srv_http *h, srv_conn *c, bool get, bool post, const char *body, size_t len) {
    const char *u = c->path + 4; /* past "/api" */
    c->ollama = true;
    static const struct {
        const char *path;
        bool post;
    } known[] = {{"/chat", true},     {"/generate", true}, {"/tags", false},  {"/show", true},
                 {"/version", false}, {"/ps", false},      {"/embed", true}, {"/embeddings", true}};
    int k = -1;
    for (int i = 0; i < (int)(sizeof known / sizeof known[0]); i++)
        if (!strcmp(u, known[i].path)) k = i;
    if (k < 0) return send_error(h, c, 404, "no such endpoint");
    if ((known[k].post && !post) || (!known[k].post && !get)) return wrong_method(h, c, known[k].post);
    switch (k) {
    case 0:
    case 1: atomic_fetch_add(&h->stats->requests, 1); return ollama_generate(h, c, k == 0 ? SRV_OLLAMA_CHAT : SRV_OLLAMA_GENERATE, body, len);
    case 2: return send_json(c, 200, srv_ollama_tags(h->m, h->cfg, (double)h->started));
    case 3: {
        char why[256];
        json_t *root = load_object(body, len, why, sizeof why);
        if (!root) return send_error(h, c, 400, why);
        json_decref(root); /* the one model, whatever name it is asked by */
        return send_json(c, 200, srv_ollama_show(h->m, h->cfg));
    }
    case 4: return send_json(c, 200, json_pack("{s:s}", "version", qhx_version()));
    case 5: return send_json(c, 200, srv_ollama_ps(h->m, h->cfg));
    case 6: return embeddings(h, c, SRV_EMBED_OLLAMA, body, len);
    default: return embeddings(h, c, SRV_EMBED_OLLAMA_OLD, body, len);
    }
}

/* ---- small endpoints ------------------------------------------------------------------------ */

static json_t *load_object(const char *body, size_t len, char *why, size_t why_n) {
    json_error_t je;
    json_t *v = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je); /* as the chat body: one value per key */
    if (!v) snprintf(why, why_n, "the body is not valid JSON (line %d, column %d: %s)", je.line, je.column, je.text);
    else if (!json_is_object(v)) {
        snprintf(why, why_n, "the body must be a JSON object");
        json_decref(v);
        v = NULL;
    }
    return v;
}

static int tokenize(srv_http *h, srv_conn *c, const char *body, size_t len) {
    char why[256];
    json_t *root = load_object(body, len, why, sizeof why);
    if (!root) return send_error(h, c, 400, why);
    json_t *content = json_object_get(root, "content"), *wp = json_object_get(root, "with_pieces"),
           *as = json_object_get(root, "add_special");
    if (!json_is_string(content)) {
        json_decref(root);
        return send_error(h, c, 400, "'content' must be a string");
    }
    if ((wp && !json_is_boolean(wp) && !json_is_null(wp)) || (as && !json_is_boolean(as) && !json_is_null(as))) {
        json_decref(root);
        return send_error(h, c, 400, "'with_pieces' and 'add_special' must be true or false");
    }
    /* add_special: the model family adds no BOS token (Qwen), so it changes nothing */
    bool with_pieces = json_is_true(wp);
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
        return send_error(h, c, ids ? srv_http_status(rc) : 503, err.msg[0] ? err.msg : "out of memory");
    }
    json_t *list = json_array();
    /* with_pieces: each id with its text, as the streaming detokenizer completes it: the bytes
       of a character split over several tokens come whole with its last token (llama-server
       gives such a token's bytes as a list of numbers; the pieces here are always text, and
       joined they are the content) */
    qhx_text_stream *ts = NULL;
    if (with_pieces && qhx_text_stream_new(h->m, &ts, &err)) {
        free(ids);
        json_decref(list);
        return send_error(h, c, 503, "out of memory");
    }
    for (size_t i = 0; i < n && list; i++) {
        const char *piece = "";
        size_t pl = 0;
        if (!ts) json_array_append_new(list, json_integer(ids[i]));
        else if (qhx_text_stream_push(ts, ids[i], &piece, &pl, &err) == QHX_OK)
            json_array_append_new(list, json_pack("{s:i,s:s%}", "id", (int)ids[i], "piece", piece, pl));
    }
    qhx_text_stream_free(ts);
    free(ids);
    return send_json(c, 200, list ? json_pack("{s:o}", "tokens", list) : NULL);
}

static int detokenize(srv_http *h, srv_conn *c, const char *body, size_t len) {
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
        return send_error(h, c, srv_http_status(rc), err.msg[0] ? err.msg : "out of memory");
    }
    json_t *s = json_stringn(text, tl);
    free(text);
    return send_json(c, 200, json_pack("{s:o}", "content", s ? s : json_string("")));
}

static int models(srv_http *h, srv_conn *c) {
    json_t *m = json_pack("{s:s,s:s,s:I,s:s,s:{s:s,s:I,s:I}}", "id", h->cfg->alias, "object", "model", "created",
                          (json_int_t)h->started, "owned_by", "qhexrt", "meta", "family", qhx_model_family_name(h->m),
                          "n_ctx", (json_int_t)(h->cfg->ctx ? h->cfg->ctx : qhx_model_max_context(h->m)), "n_vocab",
                          (json_int_t)qhx_model_n_vocab(h->m));
    json_t *meta = json_object_get(m, "meta"); /* what the web page offers: an image button, a thinking switch */
    json_object_set_new(meta, "vision", json_boolean(qhx_model_takes_images(h->m) == 1));
    json_object_set_new(meta, "thinking", json_boolean(qhx_model_has_thinking(h->m) == 1));
    return send_json(c, 200, json_pack("{s:s,s:[o]}", "object", "list", "data", m));
}

/* A slot's settings as llama-server's /props and /slots show them: the context, and the
 * sampling a request gets for the fields it leaves out. */
static json_t *slot_json(srv_http *h, int id, bool processing, int64_t n_state) {
    qhx_sample_params sp = qhx_session_default_params(h->m).sampling;
    json_t *params = json_pack("{s:I,s:f,s:i,s:f,s:f,s:f,s:i,s:f,s:f,s:[],s:b}", "n_predict", (json_int_t)-1,
                               "temperature", (double)sp.temperature, "top_k", (int)sp.top_k, "top_p", (double)sp.top_p,
                               "min_p", (double)sp.min_p, "repeat_penalty", (double)sp.repeat_penalty, "repeat_last_n",
                               (int)sp.repeat_last_n, "presence_penalty", (double)sp.presence_penalty, "frequency_penalty",
                               (double)sp.frequency_penalty, "stop", "ignore_eos", 0);
    return json_pack("{s:i,s:I,s:b,s:I,s:b,s:o}", "id", id, "n_ctx", (json_int_t)h->cfg->ctx, "is_processing",
                     processing, "n_past", (json_int_t)n_state, "speculative", h->cfg->spec_draft > 0, "params", params);
}

static int props(srv_http *h, srv_conn *c) {
    char build[64];
    snprintf(build, sizeof build, "qhexrt %s", qhx_version());
    return send_json(c, 200,
                     json_pack("{s:o,s:i,s:s,s:s,s:{s:b,s:b},s:s}", "default_generation_settings",
                               slot_json(h, 0, false, 0), "total_slots", h->cfg->parallel, "model_path",
                               h->cfg->model_path, "model_alias", h->cfg->alias, "modalities", "vision",
                               qhx_model_takes_images(h->m) != 0, "audio", 0, "build_info", build));
}

static int slots(srv_http *h, srv_conn *c) {
    json_t *list = json_array();
    for (int i = 0; i < h->cfg->parallel && list; i++) {
        bool busy = false;
        int64_t n_state = 0;
        if (srv_engine_slot_state(h->e, i, &busy, &n_state)) break;
        json_array_append_new(list, slot_json(h, i, busy, n_state));
    }
    return send_json(c, 200, list);
}

static int metrics(srv_http *h, srv_conn *c) {
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
        {"qhx_spec_verify_steps_total", "counter", "Speculative decoding: verify passes.",
         (double)atomic_load(&s->spec_steps)},
        {"qhx_spec_drafted_total", "counter", "Speculative decoding: draft tokens proposed.",
         (double)atomic_load(&s->spec_drafted)},
        {"qhx_spec_accepted_total", "counter", "Speculative decoding: draft tokens accepted.",
         (double)atomic_load(&s->spec_accepted)},
        {"qhx_spec_tokens_total", "counter", "Speculative decoding: tokens the verify passes gave.",
         (double)atomic_load(&s->spec_tokens)},
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

/* ---- the web chat page ---------------------------------------------------------------------- */

/* tools/qhx/serve/web/index.html and its policy, embedded at build time (cmake/embed_web.cmake) */
extern const unsigned char qhx_web_page[];
extern const size_t qhx_web_page_len;
extern const char qhx_web_csp[];

/* The page is served to anyone who reaches the server, key or not: it holds no data, and it asks
 * for the key itself (its API calls carry it). Revalidated on every load (no-cache), so a new
 * binary's page is never hidden behind an old one. */
static int web_page(srv_conn *c) {
    srv_buf b = {0};
    srv_buf extra = {0};
    int bad = srv_buf_puts(&extra, "Cache-Control: no-cache\r\nX-Content-Type-Options: nosniff\r\n"
                                   "Referrer-Policy: no-referrer\r\nContent-Security-Policy: ");
    bad |= srv_buf_puts(&extra, qhx_web_csp);
    bad |= srv_buf_puts(&extra, "\r\n");
    if (!bad) bad = put_head(c, &b, 200, "text/html; charset=utf-8", (long long)qhx_web_page_len, extra.p);
    if (!bad && !c->head_only) bad = srv_buf_put(&b, (const char *)qhx_web_page, qhx_web_page_len);
    int rc = bad ? -1 : conn_write(c, b.p, b.n);
    srv_buf_free(&b);
    srv_buf_free(&extra);
    return rc || c->close ? -1 : 0;
}

/* ---- routing -------------------------------------------------------------------------------- */

static bool authorized(srv_http *h, srv_conn *c) {
    if (!h->cfg->api_key) return true;
    const char *a = srv_http_field(&c->head, "Authorization");
    if (!a || strncmp(a, "Bearer ", 7)) return false;
    const char *k = a + 7, *want = h->cfg->api_key;
    size_t nk = strlen(k), nw = strlen(want);
    unsigned diff = (unsigned)(nk ^ nw); /* compare every byte: the time says nothing of the key */
    for (size_t i = 0; i < nw; i++) diff |= (unsigned)(unsigned char)want[i] ^ (unsigned)(unsigned char)(i < nk ? k[i] : 0);
    return diff == 0;
}

static const char *strip_v1(const char *url) { return strncmp(url, "/v1/", 4) ? url : url + 3; }

/* A wrong method on a known path: 405 with the methods it takes (RFC 9110 §15.5.6). */
static int wrong_method(srv_http *h, srv_conn *c, bool post) {
    c->allow = post ? "POST" : "GET, HEAD";
    c->head_only = false;
    return send_error(h, c, 405, post ? "this endpoint takes POST" : "this endpoint takes GET");
}

static int route(srv_http *h, srv_conn *c, const char *body, size_t len) {
    const char *method = c->head.method, *url = c->path;
    bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), post = !strcmp(method, "POST");
    c->head_only = !strcmp(method, "HEAD");
    if (!strcmp(url, "/health")) {
        if (!get) return wrong_method(h, c, false);
        return send_json(c, 200, json_pack("{s:s}", "status", "ok"));
    }
    if (!strcmp(url, "/") || !strcmp(url, "/index.html")) {
        if (!get) return wrong_method(h, c, false);
        return web_page(c);
    }
    if (!authorized(h, c)) return send_error(h, c, 401, "a valid API key is needed: Authorization: Bearer KEY");
    if (!strncmp(url, "/api/", 5)) return ollama_route(h, c, get, post, body, len);
    const char *u = strip_v1(url);
    struct {
        const char *path;
        bool post;
    } known[] = {{"/chat/completions", true}, {"/completions", true}, {"/models", false}, {"/tokenize", true},
                 {"/detokenize", true},       {"/metrics", false},    {"/props", false},  {"/slots", false},
                 {"/completion", true},       {"/embeddings", true},  {"/embedding", true}};
    int k = -1;
    for (int i = 0; i < (int)(sizeof known / sizeof known[0]); i++)
        if (!strcmp(u, known[i].path)) k = i;
    if (k < 0) return send_error(h, c, 404, "no such endpoint");
    if ((known[k].post && !post) || (!known[k].post && !get)) return wrong_method(h, c, known[k].post);
    switch (k) {
    case 0:
    case 1: atomic_fetch_add(&h->stats->requests, 1); return generate(h, c, k == 0 ? SRV_CHAT : SRV_COMPLETION, false, body, len);
    case 2: return models(h, c);
    case 3: return tokenize(h, c, body, len);
    case 4: return detokenize(h, c, body, len);
    case 5: return metrics(h, c);
    case 6: return props(h, c);
    case 7: return slots(h, c);
    case 9: return embeddings(h, c, SRV_EMBED_OPENAI, body, len);
    case 10: return embeddings(h, c, SRV_EMBED_LLAMA, body, len);
    default: atomic_fetch_add(&h->stats->requests, 1); return generate(h, c, SRV_COMPLETION, true, body, len);
    }
}

/* ---- one request ---------------------------------------------------------------------------- */

/* An error of the framing (or a deadline): answered, then the connection closes. */
static int refuse(srv_conn *c, int status, const char *why) {
    c->close = true;
    c->head_only = false;
    send_error(c->h, c, status, why);
    return -1;
}

/* The header section: the idle timeout until its first byte, then one deadline for all of it.
 * 0 with *end, -1 to close quietly (the peer left, or idled out between requests), or a status
 * to answer with *why. */
static int read_head(srv_conn *c, size_t *end, const char **why) {
    const srv_limits *lim = &c->h->cfg->lim;
    bool started = c->n_in > 0;
    double deadline = mono_now() + (started ? lim->head_timeout_s : lim->conn_timeout_s);
    for (;;) {
        if (c->n_in) {
            int r = srv_http_head_end(c->in, c->n_in, end, why);
            if (r != 1) return r;
            if (!started) {
                started = true;
                deadline = mono_now() + lim->head_timeout_s;
            }
        }
        int r = conn_read(c, deadline);
        if (r == -2 && started) {
            *why = "the request header section did not arrive within the timeout";
            return 408;
        }
        if (r <= 0) return -1;
    }
}

/* The body as the framing says (Content-Length, chunked or none), within one deadline. 0, -1
 * to close quietly, or a status with *why. */
static int read_body(srv_conn *c, srv_buf *body, const char **why) {
    const srv_limits *lim = &c->h->cfg->lim;
    double deadline = mono_now() + lim->body_timeout_s;
    srv_chunked ch = {0};
    for (;;) {
        if (c->head.chunked) {
            size_t used = 0;
            int r = srv_chunked_feed(&ch, c->in, c->n_in, &used, body, lim->max_body);
            conn_consume(c, r >= 0 ? used : c->n_in);
            if (r == SRV_CHUNK_DONE) return 0;
            if (r == SRV_CHUNK_BAD) return *why = "a malformed chunked body", 400;
            if (r == SRV_CHUNK_TOO_BIG) return *why = "the request body is larger than the cap", 413;
            if (r == SRV_CHUNK_NOMEM) return *why = "out of memory", 503;
        } else {
            size_t want = (size_t)(c->head.content_length > 0 ? c->head.content_length : 0) - body->n;
            size_t k = c->n_in < want ? c->n_in : want;
            if (k && srv_buf_put(body, c->in, k)) return *why = "out of memory", 503;
            conn_consume(c, k);
            if (k == want) return 0;
        }
        int r = conn_read(c, deadline);
        if (r == -2) return *why = "the request body did not arrive within the timeout", 408;
        if (r <= 0) return -1;
    }
}

/* ---- the access log ------------------------------------------------------------------------ */

/* s (at most cap bytes of it) with every byte outside printable ASCII, and the quote and the
 * backslash, as \xNN: a path is the client's bytes, and a log line must stay one line. */
static void log_escape(const char *s, char *out, size_t cap) {
    size_t k = 0;
    for (; *s && k + 5 < cap; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch < 0x20 || ch >= 0x7f || ch == '"' || ch == '\\') k += (size_t)snprintf(out + k, cap - k, "\\x%02x", ch);
        else out[k++] = (char)ch;
    }
    out[k] = 0;
}

static void client_address(const struct sockaddr_storage *a, char *out, size_t n) {
    const void *p = a->ss_family == AF_INET6 ? (const void *)&((const struct sockaddr_in6 *)a)->sin6_addr
                                             : (const void *)&((const struct sockaddr_in *)a)->sin_addr;
    if (!inet_ntop(a->ss_family, p, out, (socklen_t)n)) snprintf(out, n, "-");
}

/* One line on stderr per request answered: time, client, method, path, status, prompt and
 * generated tokens, milliseconds. One write(2) per line, so that lines of concurrent
 * connections never interleave. */
static void access_log(srv_conn *c) {
    char when[32], who[INET6_ADDRSTRLEN], path[512], method[80], line[1024];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    client_address(&c->addr, who, sizeof who);
    log_escape(c->path[0] ? c->path : "-", path, sizeof path);
    log_escape(c->head.method[0] ? c->head.method : "-", method, sizeof method);
    int status = c->status ? c->status : 499; /* nothing sent: the client left first (nginx's 499) */
    double ms = (mono_now() - c->t0) * 1e3;
    int k;
    if (c->h->cfg->log_json) { /* the same fields; jansson writes the JSON string escapes */
        json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:i,s:I,s:I,s:f}", "time", when, "client", who, "method", method, "path",
                              path, "status", status, "prompt_tokens", (json_int_t)c->n_prompt, "generated_tokens",
                              (json_int_t)c->n_generated, "ms", (double)(long long)(ms * 10 + 0.5) / 10);
        char *t = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        json_decref(o);
        k = t ? snprintf(line, sizeof line, "%s\n", t) : 0;
        free(t);
    }
    else
        k = snprintf(line, sizeof line, "%s %s \"%s %s\" %d prompt=%lld generated=%lld %.1f ms\n", when, who, method, path,
                     status, (long long)c->n_prompt, (long long)c->n_generated, ms);
    if (k > 0) {
        ssize_t w = write(STDERR_FILENO, line, (size_t)k < sizeof line ? (size_t)k : sizeof line - 1);
        (void)w;
    }
}

/* Read, check and answer one request. 0 to go on with the next one on this connection. */
static int serve_one(srv_conn *c) {
    srv_http *h = c->h;
    size_t end = 0;
    const char *why = "";
    memset(&c->head, 0, sizeof c->head); /* nothing of the last request's (its buffer is gone) */
    c->head.minor = 1;
    c->path[0] = 0;
    c->allow = NULL;
    c->head_only = false;
    c->close = false;
    c->ollama = false;
    c->status = 0;
    c->n_prompt = c->n_generated = 0;
    int st = read_head(c, &end, &why);
    if (st < 0) return -1;
    c->t0 = mono_now();
    atomic_fetch_add(&h->in_flight, 1);
    int rc = -1;
    srv_buf body = {0};
    if (st) {
        rc = refuse(c, st, why);
        goto out;
    }
    char *head = malloc(end + 1);
    if (!head) {
        rc = refuse(c, 503, "out of memory");
        goto out;
    }
    memcpy(head, c->in, end);
    head[end] = 0;
    conn_consume(c, end);
    st = srv_http_parse_head(head, end, &c->head, &why);
    if (!st) st = srv_http_decode_path(c->head.target, c->path, sizeof c->path, &why);
    if (st) {
        c->path[0] = 0;
        rc = refuse(c, st, why);
    } else if (c->head.content_length > (int64_t)h->cfg->lim.max_body) {
        char msg[128];
        snprintf(msg, sizeof msg, "the request body is larger than the cap of %zu bytes", h->cfg->lim.max_body);
        rc = refuse(c, 413, msg); /* before the body is read */
    } else {
        c->close = !c->head.persistent;
        if (c->head.expect_continue && c->head.minor >= 1 && (c->head.chunked || c->head.content_length > 0) &&
            conn_write(c, "HTTP/1.1 100 Continue\r\n\r\n", 25))
            st = -1;
        if (!st) st = read_body(c, &body, &why);
        if (st > 0) rc = refuse(c, st, why);
        else if (st == 0) rc = route(h, c, body.p ? body.p : "", body.n);
    }
    free(head);
out:
    srv_buf_free(&body);
    access_log(c);
    atomic_fetch_sub(&h->in_flight, 1);
    return rc;
}

/* ---- connections ---------------------------------------------------------------------------- */

static bool same_address(const struct sockaddr_storage *a, const struct sockaddr_storage *b) {
    if (a->ss_family != b->ss_family) return false;
    if (a->ss_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr == ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr, &((const struct sockaddr_in6 *)b)->sin6_addr, 16);
}

/* A place in the table, within the limits in all and per address; -1 when refused. */
static int admit(srv_http *h, srv_conn *c) {
    int slot = -1, same = 0;
    pthread_mutex_lock(&h->mu);
    for (int i = 0; i < h->cfg->lim.max_connections; i++) {
        if (!h->conns[i]) {
            if (slot < 0) slot = i;
        } else if (same_address(&h->conns[i]->addr, &c->addr))
            same++;
    }
    if (same >= h->cfg->lim.max_per_ip || atomic_load(&h->stopping)) slot = -1;
    if (slot >= 0) {
        h->conns[slot] = c;
        h->n_conns++;
    }
    pthread_mutex_unlock(&h->mu);
    return slot;
}

/* Leave the table and close the socket (under the lock, so that a stop never shuts down a
 * descriptor number that has been reused). */
static void leave(srv_conn *c) {
    srv_http *h = c->h;
    pthread_mutex_lock(&h->mu);
    for (int i = 0; i < h->cfg->lim.max_connections; i++)
        if (h->conns[i] == c) h->conns[i] = NULL;
    h->n_conns--;
    close(c->fd);
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

static void *conn_main(void *arg) {
    srv_conn *c = arg;
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    while (!atomic_load(&c->h->stopping) && !serve_one(c)) {}
    free(c->in);
    leave(c); /* c->h may be freed once this returns */
    free(c);
    return NULL;
}

static void accept_one(srv_http *h) {
    srv_conn *c = calloc(1, sizeof *c);
    socklen_t alen = sizeof c->addr;
    int fd = accept4(h->lfd, (struct sockaddr *)(c ? &c->addr : &(struct sockaddr_storage){0}), &alen, SOCK_CLOEXEC);
    if (fd < 0) {
        free(c);
        if (errno == EMFILE || errno == ENFILE || errno == ENOMEM || errno == ENOBUFS) {
            struct timespec ts = {0, 10 * 1000000L};
            nanosleep(&ts, NULL);
        }
        return;
    }
    if (!c || !(c->in = malloc(IN_CAP))) {
        close(fd);
        free(c);
        return;
    }
    c->h = h;
    c->fd = fd;
    if (admit(h, c) < 0) { /* over a connection limit: refused */
        close(fd);
        free(c->in);
        free(c);
        return;
    }
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    if (pthread_create(&t, &at, conn_main, c)) {
        free(c->in);
        leave(c);
        free(c);
    }
    pthread_attr_destroy(&at);
}

static void *acceptor_main(void *arg) {
    srv_http *h = arg;
    for (;;) {
        struct pollfd p[2] = {{h->lfd, POLLIN, 0}, {h->wake[0], POLLIN, 0}};
        if (poll(p, 2, -1) < 0 && errno != EINTR) break;
        if (p[1].revents) break;
        if (p[0].revents & POLLIN) accept_one(h);
    }
    return NULL;
}

/* ---- lifetime ------------------------------------------------------------------------------- */

/* Bind and listen on one address; 0, or the errno of the failure. */
static int try_listen(const struct addrinfo *ai, int *fd_out) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol), one = 1;
    if (fd < 0) return errno;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (ai->ai_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 128)) {
        int e = errno;
        close(fd);
        return e;
    }
    *fd_out = fd;
    return 0;
}

/* --host as an address (127.0.0.1, ::1, 0.0.0.0, ::) or a name this machine resolves
 * (localhost). A name with both families is bound on its IPv4 address: clients that resolve
 * the same name try each of its addresses, and IPv4 is the one every stack has. */
static int listen_on(const srv_config *cfg, qhx_error *err) {
    char port[16];
    snprintf(port, sizeof port, "%d", cfg->port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *res = NULL;
    int g = getaddrinfo(cfg->host, port, &hints, &res);
    if (g) {
        qhx_cli_fail(err, QHX_E_ARG, "--host '%s' is neither an IPv4 or IPv6 address nor a name this machine resolves (%s)",
                     cfg->host, gai_strerror(g));
        return -1;
    }
    int fd = -1, e = EADDRNOTAVAIL;
    for (int pass = 0; pass < 2 && fd < 0; pass++) /* IPv4 first, then the rest */
        for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next)
            if ((ai->ai_family == AF_INET) == (pass == 0)) e = try_listen(ai, &fd);
    freeaddrinfo(res);
    if (fd >= 0) return fd;
    const char *l = strchr(cfg->host, ':') ? "[" : "", *r = *l ? "]" : "";
    if (e == EADDRINUSE)
        qhx_cli_fail(err, QHX_E_IO, "cannot listen on %s%s%s:%d: the port is in use (another server listens there); "
                     "choose another with --port, or --port 0 for any free one", l, cfg->host, r, cfg->port);
    else if (e == EACCES)
        qhx_cli_fail(err, QHX_E_IO, "cannot listen on %s%s%s:%d: permission denied (ports below 1024 need privileges)",
                     l, cfg->host, r, cfg->port);
    else
        qhx_cli_fail(err, QHX_E_IO, "cannot listen on %s%s%s:%d: %s", l, cfg->host, r, cfg->port, strerror(e));
    return -1;
}

static int bound_port(int fd) {
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len)) return -1;
    return ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port : ((struct sockaddr_in6 *)&ss)->sin6_port);
}

srv_http *srv_http_start(const qhx_model *m, const srv_config *cfg, srv_engine *e, srv_stats *stats, int *port_out,
                         qhx_error *err) {
    srv_http *h = calloc(1, sizeof *h);
    struct srv_conn **conns = calloc((size_t)cfg->lim.max_connections, sizeof *conns);
    if (!h || !conns) {
        free(h);
        free(conns);
        qhx_cli_fail(err, QHX_E_NOMEM, "serve: out of memory");
        return NULL;
    }
    *h = (srv_http){.m = m, .cfg = cfg, .e = e, .stats = stats, .started = (int64_t)srv_now(), .conns = conns, .lfd = -1,
                    .wake = {-1, -1}};
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    if ((h->lfd = listen_on(cfg, err)) < 0) goto fail;
    if (pipe2(h->wake, O_CLOEXEC)) {
        qhx_cli_fail(err, QHX_E_IO, "serve: %s", strerror(errno));
        goto fail;
    }
    *port_out = bound_port(h->lfd);
    if (pthread_create(&h->acceptor, NULL, acceptor_main, h)) {
        qhx_cli_fail(err, QHX_E_NOMEM, "serve: cannot start a thread");
        goto fail;
    }
    h->acceptor_running = true;
    return h;
fail:
    srv_http_stop(h);
    return NULL;
}

void srv_http_quiesce(srv_http *h) {
    if (!h || atomic_exchange(&h->quiesced, 1)) return;
    if (h->acceptor_running) {
        ssize_t w = write(h->wake[1], "x", 1);
        (void)w;
        pthread_join(h->acceptor, NULL);
        h->acceptor_running = false;
    }
    if (h->lfd >= 0) close(h->lfd);
    h->lfd = -1;
}

void srv_http_drain(srv_http *h, int max_s) {
    double t0 = mono_now();
    while (h && atomic_load(&h->in_flight) > 0 && mono_now() - t0 < max_s) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

void srv_http_stop(srv_http *h) {
    if (!h) return;
    srv_http_quiesce(h);
    atomic_store(&h->stopping, 1);
    pthread_mutex_lock(&h->mu);
    for (int i = 0; i < h->cfg->lim.max_connections; i++)
        if (h->conns[i]) shutdown(h->conns[i]->fd, SHUT_RDWR); /* wakes its thread: it sees EOF */
    while (h->n_conns > 0) pthread_cond_wait(&h->cv, &h->mu);
    pthread_mutex_unlock(&h->mu);
    for (int i = 0; i < 2; i++)
        if (h->wake[i] >= 0) close(h->wake[i]);
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cv);
    free(h->conns);
    free(h);
}
