/* Fuzz target: qhx serve's request path: the HTTP/1.1 framing (tools/qhx/serve/http_parse.c)
 * and the request-to-prompt path (tools/qhx/serve/request.c): a request body from arbitrary
 * bytes, parsed, checked and rendered into a tokenized prompt (images decoded and encoded) on
 * the tiny parity fixtures, opened once.
 *
 * Input byte 0: bit 2 set: the rest is what a client wrote on the socket: the header section is
 * found and parsed, the target decoded, and a chunked body decoded twice (in one piece, and in
 * pieces cut where byte 0's high bits say), which must agree. Otherwise bit 0 picks the model
 * (0: Qwen3.5, 1: Qwen3-VL), bit 1 the endpoint (0: chat completions, 1: completions); the rest
 * is the body. Properties checked:
 *   - framing: the header end inside the input, every refusal a 4xx/5xx status with a message,
 *     a decoded path without control bytes, a chunked body within its cap, split-invariant;
 *   - a refused body gets a 4xx status (400 or 413; 503 only when out of memory) and a message;
 *   - an accepted one gives a prompt of at least one id, every id inside the vocabulary, and a
 *     reusable prefix inside it.
 * Without the fixtures (QHX_DATA_DIR) the body inputs are a no-op (the framing ones still run). */
#include "qhx.h"
#include "serve/serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static qhx_model *models[2];
static srv_config cfg;
static int ready;

static void setup(void) {
    ready = 1;
    const char *names[2] = {"qwen35-tiny-f32", "qwen3vl-tiny-f32"};
    for (int i = 0; i < 2; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/fixtures/parity/%s", QHX_DATA_DIR, names[i]);
        qhx_error err = {0};
        qhx_model_params mp = qhx_model_default_params();
        mp.n_threads = 1;
        if (qhx_model_open(path, &mp, &models[i], &err))
            fprintf(stderr, "fuzz_serve_request: %s: fixture not usable, its inputs are not run\n", err.msg);
    }
    cfg = (srv_config){.host = "127.0.0.1", .parallel = 1, .queue = 1, .alias = "fuzz", .lim = srv_default_limits()};
    cfg.lim.max_image_pixels = 1 << 16; /* keep the vision tower's work small */
}

static void refusal(int st, const char *why) {
    if (st < 400 || st > 599 || !why || !why[0]) {
        fprintf(stderr, "framing refused with status %d and message '%s'\n", st, why ? why : "(null)");
        abort();
    }
}

/* Decode a chunked body fed in pieces of `step` bytes (0: all at once). */
static int chunked(const char *p, size_t n, size_t step, srv_buf *out, size_t *used_all) {
    srv_chunked ch = {0};
    size_t off = 0;
    int r = SRV_CHUNK_MORE;
    while (off < n && r == SRV_CHUNK_MORE) {
        size_t k = step && n - off > step ? step : n - off, used = 0;
        r = srv_chunked_feed(&ch, p + off, k, &used, out, 4096);
        if (used > k) abort();
        off += r >= 0 ? used : k;
        if (r == SRV_CHUNK_MORE && used != k) abort();
    }
    if (out->n > 4096) abort();
    *used_all = off;
    return r;
}

static void framing(const uint8_t *data, size_t size) {
    const char *in = (const char *)data + 1, *why = "";
    size_t n = size - 1, end = 0;
    int st = srv_http_head_end(in, n, &end, &why);
    if (st == 1) return;
    if (st) {
        refusal(st, why);
        return;
    }
    if (end == 0 || end > n || end > SRV_HTTP_MAX_HEAD) abort();
    char *head = malloc(end + 1);
    if (!head) return;
    memcpy(head, in, end);
    head[end] = 0;
    static srv_http_head h;
    st = srv_http_parse_head(head, end, &h, &why);
    if (!st) {
        static char path[SRV_HTTP_MAX_LINE + 1];
        st = srv_http_decode_path(h.target, path, sizeof path, &why);
        if (!st)
            for (const char *q = path; *q; q++)
                if ((unsigned char)*q < 0x20 || *q == 0x7f) abort();
        if (!st && h.has_te && (!h.chunked || h.content_length >= 0 || h.other_coding)) abort();
    }
    if (st) {
        refusal(st, why);
    } else if (h.chunked) {
        srv_buf a = {0}, b = {0};
        size_t ua = 0, ub = 0;
        int ra = chunked(in + end, n - end, 0, &a, &ua);
        int rb = chunked(in + end, n - end, 1 + (data[0] >> 3), &b, &ub);
        if (ra != rb || (ra >= 0 && (a.n != b.n || (a.n && memcmp(a.p, b.p, a.n)) || ua != ub))) abort();
        srv_buf_free(&a);
        srv_buf_free(&b);
    }
    free(head);
}

/* An embeddings body (the api from the first byte's high bits): refused with a 4xx/503 and a
 * message, or every input a non-empty run of ids in the vocabulary, within the context. */
static void embed_request(const qhx_model *m, uint8_t sel, const char *body, size_t len) {
    int status = 0;
    bool b64 = false;
    qhx_error err = {0};
    srv_job *j = srv_request_embed(m, &cfg, body, len, (srv_embed_api)((sel >> 4) & 3), &b64, &status, &err);
    if (!j) {
        if (!(status == 400 || status == 413 || status == 503) || !err.msg[0]) abort();
        return;
    }
    if (j->n_embed == 0 || !j->embd) abort();
    for (size_t k = 0; k < j->n_embed; k++) {
        if (j->embed_n[k] == 0 || (cfg.ctx > 0 && (int64_t)j->embed_n[k] > cfg.ctx)) abort();
        for (size_t i = 0; i < j->embed_n[k]; i++)
            if (j->embed_ids[k][i] < 0 || j->embed_ids[k][i] >= qhx_model_n_vocab(m)) abort();
    }
    srv_job_unref(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!ready) setup();
    if (size < 1) return 0;
    if (data[0] & 4) {
        framing(data, size);
        return 0;
    }
    const qhx_model *m = models[data[0] & 1];
    if (!m) return 0;
    int status = 0;
    qhx_error err = {0};
    const char *body = (const char *)data + 1;
    if (data[0] & 8) {
        embed_request(m, data[0], body, size - 1);
        return 0;
    }
    srv_job *j = data[0] & 2 ? srv_request_completion(m, &cfg, body, size - 1, &status, &err)
                             : srv_request_chat(m, &cfg, body, size - 1, &status, &err);
    if (!j) {
        if (!(status == 400 || status == 413 || status == 503) || !err.msg[0]) {
            fprintf(stderr, "refused with status %d and message '%s'\n", status, err.msg);
            abort();
        }
        return 0;
    }
    size_t n = 0;
    const qhx_token *ids = qhx_prompt_ids(j->prompt, &n);
    if (n == 0 || qhx_prompt_reusable(j->prompt) > n) abort();
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= qhx_model_n_vocab(m)) abort();
    srv_job_unref(j);
    return 0;
}
