/* runtime/embed.c: text embeddings (qhx.h, "embeddings"). The rows are the residual stream after
 * the last decoder layer (the forward's layer callback hands them over, chunk by chunk) put
 * through the model's final norm: the rows the lm-head reads, which is what llama.cpp's
 * embedding output is. Pooling and normalisation follow llama.cpp's --pooling and
 * embd_normalize. */
#include "runtime/session_impl.h"

#include "core/alloc.h"

#include <math.h>
#include <string.h>

qhx_embed_params qhx_embed_default_params(void) { return (qhx_embed_params){.pooling = QHX_POOLING_LAST, .normalize = 2}; }

int64_t qhx_model_n_embd(const qhx_model *m) { return m ? m->cfg.hidden_size : 0; }

/* Where the last layer's rows go: every row (mean pooling) or the one row the pooling reads. */
typedef struct embed_rows {
    int64_t last_layer, H;
    int64_t want;  /* the position kept, or -1: every position */
    float *rows;   /* (n, H) or (1, H) */
    bool got;
} embed_rows;

static void keep_rows(void *user, int64_t layer, int64_t pos0, const float *x, int64_t n) {
    embed_rows *e = user;
    if (layer != e->last_layer) return;
    if (e->want < 0) {
        memcpy(e->rows + pos0 * e->H, x, (size_t)(n * e->H) * sizeof(float));
        e->got = true;
    } else if (e->want >= pos0 && e->want < pos0 + n) {
        memcpy(e->rows, x + (e->want - pos0) * e->H, (size_t)e->H * sizeof(float));
        e->got = true;
    }
}

/* out /= its norm as llama.cpp's common_embd_normalize computes it (double sums, the int16
 * scale for 0); a zero norm leaves out as it is. */
static void normalize(float *out, int64_t H, int p) {
    double sum = 0;
    if (p < 0) return;
    if (p == 0) {
        for (int64_t i = 0; i < H; i++) sum = fmax(sum, fabs((double)out[i]));
        sum /= 32760.0;
    } else if (p == 2) {
        for (int64_t i = 0; i < H; i++) sum += (double)out[i] * out[i];
        sum = sqrt(sum);
    } else {
        for (int64_t i = 0; i < H; i++) sum += pow(fabs((double)out[i]), p);
        sum = pow(sum, 1.0 / p);
    }
    const float scale = sum > 0.0 ? (float)(1.0 / sum) : 0.0f;
    if (scale > 0.0f)
        for (int64_t i = 0; i < H; i++) out[i] *= scale;
}

static qhx_status check_args(const qhx_session *s, const qhx_token *ids, size_t n, const qhx_embed_params *p,
                             const float *out, size_t n_out, qhx_error *err) {
    if (!ids || !p || !out || n == 0) return qhx_fail(err, QHX_E_ARG, "embed: ids, params and out are required, n >= 1");
    if ((unsigned)p->pooling > QHX_POOLING_CLS)
        return qhx_fail(err, QHX_E_ARG, "embed: pooling %d is not last (0), mean (1) or cls (2)", (int)p->pooling);
    if (p->normalize < -1) return qhx_fail(err, QHX_E_ARG, "embed: normalize %d is below -1 (none)", p->normalize);
    int64_t H = qhx_model_n_embd(s->m);
    if ((int64_t)n_out != H)
        return qhx_fail(err, QHX_E_ARG, "embed: out holds %zu values; an embedding of this model has %lld", n_out,
                        (long long)H);
    /* checked here, before the reset, so that a refusal leaves the session as it was */
    if ((uint64_t)n > (uint64_t)qhx_session_n_ctx(s))
        return qhx_fail(err, QHX_E_LIMIT, "embed: %zu tokens exceed the context of %lld", n,
                        (long long)qhx_session_n_ctx(s));
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= s->n_vocab)
            return qhx_fail(err, QHX_E_ARG, "embed: token %zu: id %d is outside the vocabulary [0, %lld)", i, ids[i],
                            (long long)s->n_vocab);
    return QHX_OK;
}

static qhx_status embed_rows_of(qhx_session *s, const qhx_token *ids, size_t n, embed_rows *e, qhx_error *err) {
    qhx_forward_opts o = {.layer_cb = keep_rows, .layer_cb_user = e, .abort_cb = s->params.abort_cb,
                          .abort_cb_user = s->params.abort_user};
    qhx_status rc = qhx_model_forward(s->m, s->st, ids, (int64_t)n, &o, err);
    if (rc == QHX_OK && !e->got) rc = qhx_fail(err, QHX_E_UNSUPPORTED, "embed: the model gave no hidden rows");
    return rc;
}

qhx_status qhx_session_embed(qhx_session *s, const qhx_token *ids, size_t n, const qhx_embed_params *p, float *out,
                             size_t n_out, qhx_error *err) {
    if (!s) return qhx_fail(err, QHX_E_ARG, "embed: session is NULL");
    qhx_status rc = check_args(s, ids, n, p, out, n_out, err);
    if (rc) return rc;
    const int64_t H = qhx_model_n_embd(s->m);
    embed_rows e = {.last_layer = s->m->cfg.num_hidden_layers - 1, .H = H,
                    .want = p->pooling == QHX_POOLING_MEAN ? -1 : p->pooling == QHX_POOLING_CLS ? 0 : (int64_t)n - 1};
    const int64_t kept = e.want < 0 ? (int64_t)n : 1;
    size_t bytes;
    if (!qhx_size_mul((size_t)kept, (size_t)H * 2 * sizeof(float), &bytes) || !(e.rows = qhx_malloc(bytes)))
        return qhx_fail(err, QHX_E_NOMEM, "embed: out of memory for %lld rows of %lld values", (long long)kept,
                        (long long)H);
    float *normed = e.rows + kept * H;
    if (!s->busy) qhx_session_reset(s); /* a busy session is refused by the guard, untouched */
    if (!(rc = qhx_session_guard_enter(s, "embed", err))) {
        rc = embed_rows_of(s, ids, n, &e, err);
        if (!rc) rc = qhx_model_final_norm(s->m, e.rows, kept, normed, err);
        qhx_session_guard_leave(s, rc);
        qhx_session_reset(s);
    }
    if (!rc) {
        for (int64_t i = 0; i < H; i++) { /* the mean in double: one rounding per value */
            double sum = 0;
            for (int64_t r = 0; r < kept; r++) sum += normed[r * H + i];
            out[i] = (float)(sum / (double)kept);
        }
        normalize(out, H, p->normalize);
    }
    qhx_free(e.rows);
    return rc;
}
