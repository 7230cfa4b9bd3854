/* embed.c: the embeddings endpoints, their requests and answers. One job carries every input
 * of a request; the engine runs them one after another on one slot (qhx_session_embed).
 *   POST /v1/embeddings  OpenAI's: "input" a string, a list of strings, a list of ids or a list
 *                        of id lists; "encoding_format" float or base64 (little-endian float32,
 *                        what the openai client asks for by default); "dimensions" only as the
 *                        model's own size
 *   POST /embedding      llama-server's: "content" as "input"; [{"index", "embedding": [[...]]}]
 *   POST /api/embed      ollama's: "input" a string or a list; "truncate" (default true) cuts an
 *                        input to the context instead of refusing it
 *   POST /api/embeddings ollama's older one: "prompt", one text, not normalised
 * "embd_normalize" (llama.cpp's: -1 none, 0 int16 range, 1 taxicab, 2 Euclidean, p > 2) on each;
 * the pooling is the server's (--pooling). */
#include "serve.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_INPUTS 2048 /* OpenAI's limit on the inputs of one request */

static int fail(int *status, int code, qhx_error *err, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(int *status, int code, qhx_error *err, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    err->code = QHX_E_ARG;
    *status = code;
    return -1;
}

/* ---- the inputs ------------------------------------------------------------------------------- */

typedef struct embed_req {
    const qhx_model *m;
    int64_t ctx;   /* a slot's context: the most ids one input may have */
    bool truncate; /* cut an input past ctx (ollama) instead of refusing it */
    const char *field;
} embed_req;

static int add_input(srv_job *j, qhx_token *ids, size_t n) {
    j->embed_ids[j->n_embed] = ids;
    j->embed_n[j->n_embed++] = n;
    return 0;
}

/* n ids past the context: cut (truncate) or refused. */
static int fit(const embed_req *r, size_t k, size_t *n, int *status, qhx_error *err) {
    if (r->ctx > 0 && (int64_t)*n > r->ctx) {
        if (!r->truncate)
            return fail(status, 400, err, "'%s'[%zu] has %zu tokens; the context is %lld tokens", r->field, k, *n,
                        (long long)r->ctx);
        *n = (size_t)r->ctx;
    }
    return 0;
}

static int text_input(const embed_req *r, srv_job *j, json_t *v, size_t k, int *status, qhx_error *err) {
    if (!qhx_model_has_tokenizer(r->m)) return fail(status, 400, err, "this model has no tokenizer: send token ids");
    const char *s = json_string_value(v);
    size_t len = json_string_length(v), n = 0;
    qhx_status rc = qhx_tokenize(r->m, s, len, NULL, 0, &n, err);
    if (rc && rc != QHX_E_LIMIT) return fail(status, 400, err, "'%s'[%zu]: %s", r->field, k, err->msg);
    if (n == 0) return fail(status, 400, err, "'%s'[%zu] is empty", r->field, k);
    qhx_token *ids = malloc(n * sizeof *ids);
    if (!ids) return fail(status, 503, err, "out of memory");
    if ((rc = qhx_tokenize(r->m, s, len, ids, n, &n, err))) {
        free(ids);
        return fail(status, 400, err, "'%s'[%zu]: %s", r->field, k, err->msg);
    }
    if (fit(r, k, &n, status, err)) {
        free(ids);
        return -1;
    }
    return add_input(j, ids, n);
}

static int id_input(const embed_req *r, srv_job *j, json_t *list, size_t k, int *status, qhx_error *err) {
    size_t n = json_array_size(list);
    if (n == 0) return fail(status, 400, err, "'%s'[%zu] is empty", r->field, k);
    if (fit(r, k, &n, status, err)) return -1;
    qhx_token *ids = malloc(n * sizeof *ids);
    if (!ids) return fail(status, 503, err, "out of memory");
    const int64_t V = qhx_model_n_vocab(r->m);
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(list, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= V) {
            free(ids);
            return fail(status, 400, err, "'%s'[%zu][%zu] is not a token id in [0, %lld)", r->field, k, i, (long long)V);
        }
        ids[i] = (qhx_token)json_integer_value(v);
    }
    return add_input(j, ids, n);
}

/* A string, a list of strings, a list of ids (one input) or a list of id lists. */
static int inputs_of(const embed_req *r, srv_job *j, json_t *in, int *status, qhx_error *err) {
    bool one = json_is_string(in) || (json_is_array(in) && json_is_integer(json_array_get(in, 0)));
    size_t n = one ? 1 : json_array_size(in);
    if (!json_is_string(in) && !json_is_array(in))
        return fail(status, 400, err, "'%s' must be a string, a list of strings or a list of token ids", r->field);
    if (n == 0) return fail(status, 400, err, "'%s' is empty", r->field);
    if (n > MAX_INPUTS) return fail(status, 413, err, "'%s' holds %zu inputs, at most %d", r->field, n, MAX_INPUTS);
    const int64_t H = qhx_model_n_embd(r->m);
    if (!(j->embed_ids = calloc(n, sizeof *j->embed_ids)) || !(j->embed_n = calloc(n, sizeof *j->embed_n)) ||
        !(j->embd = calloc(n * (size_t)H, sizeof *j->embd)))
        return fail(status, 503, err, "out of memory");
    for (size_t k = 0; k < n; k++) {
        json_t *v = one ? in : json_array_get(in, k);
        int bad = json_is_string(v)  ? text_input(r, j, v, k, status, err)
                  : json_is_array(v) ? id_input(r, j, v, k, status, err)
                                     : fail(status, 400, err, "'%s'[%zu] is not a string or a list of token ids",
                                            r->field, k);
        if (bad) return -1;
    }
    return 0;
}

static int options_of(const qhx_model *m, json_t *root, srv_job *j, bool *b64, int *status, qhx_error *err) {
    json_t *f = json_object_get(root, "encoding_format"), *d = json_object_get(root, "dimensions"),
           *p = json_object_get(root, "embd_normalize");
    if (f && !json_is_null(f)) {
        const char *s = json_string_value(f);
        if (!s || (strcmp(s, "float") && strcmp(s, "base64")))
            return fail(status, 400, err, "'encoding_format' must be \"float\" or \"base64\"");
        *b64 = !strcmp(s, "base64");
    }
    const int64_t H = qhx_model_n_embd(m);
    if (d && !json_is_null(d) && (!json_is_integer(d) || json_integer_value(d) != H))
        return fail(status, 400, err, "'dimensions': this model's embeddings have %lld values and cannot be shortened",
                    (long long)H);
    if (p && !json_is_null(p)) {
        if (!json_is_integer(p) || json_integer_value(p) < -1 || json_integer_value(p) > 64)
            return fail(status, 400, err, "'embd_normalize' must be an integer in [-1, 64] (-1: none, 2: Euclidean)");
        j->embed.normalize = (int)json_integer_value(p);
    }
    return 0;
}

srv_job *srv_request_embed(const qhx_model *m, const srv_config *cfg, const char *body, size_t len, srv_embed_api api,
                           bool *b64, int *status, qhx_error *err) {
    *b64 = false;
    json_t *root = srv_request_body(cfg, body, len, status, err);
    if (!root) return NULL;
    srv_job *j = srv_job_new();
    if (!j) {
        json_decref(root);
        fail(status, 503, err, "out of memory");
        return NULL;
    }
    j->kind = SRV_EMBED;
    j->embed = qhx_embed_default_params();
    j->embed.pooling = cfg->pooling;
    if (api == SRV_EMBED_OLLAMA_OLD) j->embed.normalize = -1; /* ollama's /api/embeddings gives them as they are */
    embed_req r = {m, cfg->ctx, false, api == SRV_EMBED_LLAMA ? "content" : api == SRV_EMBED_OLLAMA_OLD ? "prompt" : "input"};
    json_t *in = json_object_get(root, r.field), *t = json_object_get(root, "truncate");
    int bad = 0;
    if (api == SRV_EMBED_OLLAMA) {
        r.truncate = !t || json_is_null(t) || json_is_true(t);
        if (t && !json_is_null(t) && !json_is_boolean(t)) bad = fail(status, 400, err, "'truncate' must be true or false");
    }
    if (!bad && !in) bad = fail(status, 400, err, "'%s' is required", r.field);
    if (!bad && api == SRV_EMBED_OLLAMA_OLD && !json_is_string(in)) bad = fail(status, 400, err, "'prompt' must be a string");
    if (!bad) bad = options_of(m, root, j, b64, status, err) || inputs_of(&r, j, in, status, err);
    json_decref(root);
    if (bad) {
        srv_job_unref(j);
        return NULL;
    }
    return j;
}

/* ---- the answers ------------------------------------------------------------------------------ */

static char *base64_of(const float *v, size_t n) {
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const size_t bytes = n * sizeof(float);
    unsigned char *b = malloc(bytes ? bytes : 1);
    char *out = malloc(4 * ((bytes + 2) / 3) + 1);
    if (!b || !out) {
        free(b);
        free(out);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) { /* little-endian float32, as numpy's frombuffer reads it */
        uint32_t u;
        memcpy(&u, &v[i], 4);
        for (int k = 0; k < 4; k++) b[4 * i + (size_t)k] = (unsigned char)(u >> (8 * k));
    }
    size_t o = 0;
    for (size_t i = 0; i < bytes; i += 3) {
        uint32_t w = (uint32_t)b[i] << 16 | (i + 1 < bytes ? (uint32_t)b[i + 1] << 8 : 0) | (i + 2 < bytes ? b[i + 2] : 0);
        out[o++] = A[w >> 18 & 63];
        out[o++] = A[w >> 12 & 63];
        out[o++] = i + 1 < bytes ? A[w >> 6 & 63] : '=';
        out[o++] = i + 2 < bytes ? A[w & 63] : '=';
    }
    out[o] = 0;
    free(b);
    return out;
}

static json_t *floats(const float *v, int64_t n) {
    json_t *a = json_array();
    for (int64_t i = 0; a && i < n; i++)
        if (json_array_append_new(a, json_real((double)v[i]))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

static json_t *openai_answer(const srv_job *j, int64_t H, bool b64) {
    json_t *data = json_array();
    for (size_t i = 0; data && i < j->n_embed; i++) {
        const float *v = j->embd + (size_t)H * i;
        json_t *e;
        if (b64) {
            char *s = base64_of(v, (size_t)H);
            e = s ? json_string(s) : NULL;
            free(s);
        } else e = floats(v, H);
        if (!e || json_array_append_new(data, json_pack("{s:s,s:I,s:o}", "object", "embedding", "index", (json_int_t)i,
                                                        "embedding", e))) {
            json_decref(data);
            return NULL;
        }
    }
    return data ? json_pack("{s:s,s:o,s:s,s:{s:I,s:I}}", "object", "list", "data", data, "model", j->model_name, "usage",
                            "prompt_tokens", (json_int_t)j->n_prompt, "total_tokens", (json_int_t)j->n_prompt)
                : NULL;
}

static json_t *llama_answer(const srv_job *j, int64_t H) {
    json_t *all = json_array();
    for (size_t i = 0; all && i < j->n_embed; i++)
        if (json_array_append_new(all, json_pack("{s:I,s:[o]}", "index", (json_int_t)i, "embedding",
                                                 floats(j->embd + (size_t)H * i, H)))) {
            json_decref(all);
            return NULL;
        }
    return all;
}

static json_t *ollama_answer(const srv_job *j, int64_t H, bool old) {
    const long long ns = (long long)((j->t_done - j->t_submit) * 1e9);
    if (old) return json_pack("{s:o}", "embedding", floats(j->embd, H)); /* /api/embeddings: one */
    json_t *all = json_array();
    for (size_t i = 0; all && i < j->n_embed; i++)
        if (json_array_append_new(all, floats(j->embd + (size_t)H * i, H))) {
            json_decref(all);
            return NULL;
        }
    return all ? json_pack("{s:s,s:o,s:I,s:I,s:I}", "model", j->model_name, "embeddings", all, "total_duration",
                           (json_int_t)ns, "load_duration", (json_int_t)0, "prompt_eval_count", (json_int_t)j->n_prompt)
               : NULL;
}

/* The answer's text (JSON; floats with 9 significant digits, which give every float32 back
 * exactly), or NULL out of memory. */
char *srv_embed_body(const qhx_model *m, const srv_job *j, srv_embed_api api, bool b64) {
    const int64_t H = qhx_model_n_embd(m);
    json_t *v = api == SRV_EMBED_OPENAI ? openai_answer(j, H, b64)
                : api == SRV_EMBED_LLAMA ? llama_answer(j, H)
                                         : ollama_answer(j, H, api == SRV_EMBED_OLLAMA_OLD);
    char *t = v ? json_dumps(v, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
    json_decref(v);
    return t;
}
