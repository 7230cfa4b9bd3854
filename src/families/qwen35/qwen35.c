/* families/qwen35/qwen35.c: the Qwen3.5 text model (Gated DeltaNet + gated attention hybrid) on
 * the model's device (devices/device.h): weight binding (in place from the mapped safetensors), the per-sequence
 * state, and the forward pass in two forms: the prompt path (batched projections, chunked delta
 * rule) and the single-token decode path (recurrent delta rule). The math follows
 * spec/qwen3_5.md and the Hugging Face reference (transformers models/qwen3_5); every number is
 * fp32. With an image host-op the vision tower (model.visual.*, the shared ViT of ops/vit.h
 * without DeepStack, as Qwen3_5VisionModel) is bound too: announced image rows replace the
 * embedding rows at their pads and the attention layers turn with 3-D M-RoPE positions through
 * the partial rotary (docs/vision.md). When the caller asks for it, the multi-token-prediction
 * block (mtp.*) too: draft logits from the last layer's rows and the next tokens, with its own
 * KV cache in the state (see "multi-token prediction" below). Not here: tokenizing, sampling,
 * the speculative loop. */
#include "families/qwen35/qwen35.h"

#include "core/alloc.h"
#include "devices/device.h"
#include "ops/blocks.h"
#include "ops/imgplan.h"
#include "ops/mrope.h"
#include "ops/kv.h"
#include "ops/rope.h"
#include "ops/weights.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- bound weights ----------------------------------------------------------------------- */

typedef struct q35_dims {
    int64_t H, I, V, L;
    int64_t nh, nkv, hd, rot, q_out, attn_dim, kv_dim;             /* full attention */
    int64_t nk, nv, dk, dv, K, key_dim, value_dim, conv_dim, rep;  /* Gated DeltaNet */
    int64_t n_full, n_lin;
    float eps;
    /* the decoder's RMSNorms: x (1 + w) on Hugging Face weights; plain on llama.cpp's, whose
     * converter stored 1 + w (qhx_model_config.llama_cpp_layout) */
    qhx_norm_kind norm;
    bool v_tiled; /* value heads in llama.cpp's tiled order (device.h qhx_dgdn) */
} q35_dims;

typedef struct q35_layer {
    qhx_layer_type type;
    int64_t slot;                /* index among layers of the same type (state slot) */
    const float *input_norm;     /* (H,) zero-centred */
    const float *post_norm;      /* (H,) zero-centred */
    qhx_weight gate_proj;        /* (I, H) */
    qhx_weight up_proj;          /* (I, H) */
    qhx_weight down_proj;        /* (H, I) */
    /* Gated DeltaNet */
    qhx_weight in_proj_qkv;      /* (conv_dim, H): rows [q (nk dk) | k (nk dk) | v (nv dv)] */
    qhx_weight in_proj_z;        /* (value_dim, H) */
    qhx_weight in_proj_b;        /* (nv, H) */
    qhx_weight in_proj_a;        /* (nv, H) */
    qhx_weight out_proj;         /* (H, value_dim) */
    const float *conv_w;         /* (conv_dim, K); tap K-1 = current token */
    const float *A;              /* (nv,) -exp(A_log), as HF computes it in fp32 */
    const float *dt_bias;        /* (nv,) */
    const float *gnorm_w;        /* (dv,) plain weight of the gated RMSNorm */
    /* gated attention */
    qhx_weight q_proj;           /* (nh 2 hd, H): per head [query (hd) | gate (hd)] */
    qhx_weight k_proj;           /* (kv_dim, H) */
    qhx_weight v_proj;           /* (kv_dim, H) */
    qhx_weight o_proj;           /* (H, attn_dim) */
    const float *q_norm;         /* (hd,) zero-centred, shared by heads */
    const float *k_norm;         /* (hd,) */
} q35_layer;

/* The multi-token-prediction block of the released Qwen3.5 checkpoints (vLLM's
 * Qwen3_5MultiTokenPredictor): e = norm_emb(embed(next token)), h = norm_hidden(final_norm(x)),
 * y = layer(fc([e | h])) (one full-attention decoder layer at the position of x), logits =
 * head(norm(y)) with the main model's (tied) head. */
typedef struct q35_mtp {
    q35_layer layer;             /* mtp.layers.0, full attention; its cache is the state's mtp_kv */
    qhx_weight fc;               /* (H, 2 H): input [embedding | hidden] */
    const float *norm_emb;       /* (H,) zero-centred: pre_fc_norm_embedding */
    const float *norm_hidden;    /* (H,) zero-centred: pre_fc_norm_hidden */
    const float *norm;           /* (H,) zero-centred: the block's final norm */
} q35_mtp;

typedef struct q35_model {
    q35_dims d;
    qhx_st_set *set;             /* the mapped checkpoint; weights point into it */
    qhx_wowned owned;            /* aligned copies and f32 vectors */
    qhx_weight embed;            /* (V, H) */
    qhx_weight lm_head;          /* (V, H): embed when tied */
    const float *final_norm;     /* (H,) zero-centred */
    float *inv_freq;             /* (rot / 2,) */
    unsigned char *axis;         /* (rot / 2,): M-RoPE axis of each frequency slot, 0 T 1 H 2 W */
    q35_layer *layers;           /* (L,) */
    qhx_vit *vit;                /* NULL: a text host-op, or no tower in the checkpoint */
    q35_mtp *mtp;                /* NULL: not asked for, or no mtp.* in the checkpoint */
} q35_model;

static void q35_free_impl(void *impl) {
    q35_model *q = impl;
    if (!q) return;
    qhx_vit_free(q->vit);
    qhx_wowned_free(&q->owned);
    qhx_free(q->inv_freq);
    qhx_free(q->axis);
    qhx_free(q->layers);
    qhx_free(q->mtp);
    qhx_st_free(q->set);
    qhx_free(q);
}

static qhx_status bind_linear(q35_model *q, const qhx_net *m, const char *name, int64_t rows,
                              int64_t cols, qhx_weight *w, qhx_error *err) {
    return qhx_wbind_linear(q->set, name, rows, cols, m->dev, &q->owned, w, err);
}

/* A (n,) vector of any float dtype as a model-owned f32 copy. */
static qhx_status load_vec(q35_model *q, const char *name, int64_t n, const float **out, qhx_error *err) {
    float *p;
    int64_t shape[1] = {n};
    qhx_status rc = qhx_wload_f32(q->set, name, 1, shape, &q->owned, &p, NULL, err);
    *out = p;
    return rc;
}

static qhx_status bind_layer(q35_model *q, const qhx_net *m, const char *pre, int64_t i,
                             q35_layer *L, qhx_error *err) {
    const q35_dims *d = &q->d;
    char nm[512];
    qhx_status rc;
#define NAME(suffix) (snprintf(nm, sizeof nm, "%slayers.%lld.%s", pre, (long long)i, suffix), nm)
    if ((rc = load_vec(q, NAME("input_layernorm.weight"), d->H, &L->input_norm, err))) return rc;
    if ((rc = load_vec(q, NAME("post_attention_layernorm.weight"), d->H, &L->post_norm, err))) return rc;
    if ((rc = bind_linear(q, m, NAME("mlp.gate_proj.weight"), d->I, d->H, &L->gate_proj, err))) return rc;
    if ((rc = bind_linear(q, m, NAME("mlp.up_proj.weight"), d->I, d->H, &L->up_proj, err))) return rc;
    if ((rc = bind_linear(q, m, NAME("mlp.down_proj.weight"), d->H, d->I, &L->down_proj, err))) return rc;
    if (L->type == QHX_LAYER_LINEAR_ATTENTION) {
        if ((rc = bind_linear(q, m, NAME("linear_attn.in_proj_qkv.weight"), d->conv_dim, d->H, &L->in_proj_qkv, err)))
            return rc;
        if ((rc = bind_linear(q, m, NAME("linear_attn.in_proj_z.weight"), d->value_dim, d->H, &L->in_proj_z, err)))
            return rc;
        if ((rc = bind_linear(q, m, NAME("linear_attn.in_proj_b.weight"), d->nv, d->H, &L->in_proj_b, err))) return rc;
        if ((rc = bind_linear(q, m, NAME("linear_attn.in_proj_a.weight"), d->nv, d->H, &L->in_proj_a, err))) return rc;
        if ((rc = bind_linear(q, m, NAME("linear_attn.out_proj.weight"), d->H, d->value_dim, &L->out_proj, err)))
            return rc;
        float *conv;
        int64_t cshape[3] = {d->conv_dim, 1, d->K};
        if ((rc = qhx_wload_f32(q->set, NAME("linear_attn.conv1d.weight"), 3, cshape, &q->owned, &conv, NULL, err)))
            return rc;
        L->conv_w = conv;
        float *A; /* owned f32 copy of A_log, turned into -exp(A_log) in place */
        int64_t ashape[1] = {d->nv};
        if (m->cfg.llama_cpp_layout) { /* the converter stored -exp(A_log) itself: used as it is */
            if ((rc = qhx_wload_f32(q->set, NAME("linear_attn.A"), 1, ashape, &q->owned, &A, NULL, err))) return rc;
        } else {
            if ((rc = qhx_wload_f32(q->set, NAME("linear_attn.A_log"), 1, ashape, &q->owned, &A, NULL, err))) return rc;
            for (int64_t j = 0; j < d->nv; j++) A[j] = -expf(A[j]);
        }
        L->A = A;
        if ((rc = load_vec(q, NAME("linear_attn.dt_bias"), d->nv, &L->dt_bias, err))) return rc;
        if ((rc = load_vec(q, NAME("linear_attn.norm.weight"), d->dv, &L->gnorm_w, err))) return rc;
    } else {
        if ((rc = bind_linear(q, m, NAME("self_attn.q_proj.weight"), d->q_out, d->H, &L->q_proj, err))) return rc;
        if ((rc = bind_linear(q, m, NAME("self_attn.k_proj.weight"), d->kv_dim, d->H, &L->k_proj, err))) return rc;
        if ((rc = bind_linear(q, m, NAME("self_attn.v_proj.weight"), d->kv_dim, d->H, &L->v_proj, err))) return rc;
        if ((rc = bind_linear(q, m, NAME("self_attn.o_proj.weight"), d->H, d->attn_dim, &L->o_proj, err))) return rc;
        if ((rc = load_vec(q, NAME("self_attn.q_norm.weight"), d->hd, &L->q_norm, err))) return rc;
        if ((rc = load_vec(q, NAME("self_attn.k_norm.weight"), d->hd, &L->k_norm, err))) return rc;
    }
#undef NAME
    return QHX_OK;
}

static qhx_status bind_mtp(q35_model *q, const qhx_net *m, qhx_error *err) {
    const int64_t H = q->d.H;
    if (!(q->mtp = qhx_calloc(1, sizeof *q->mtp))) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    q35_mtp *t = q->mtp;
    t->layer.type = QHX_LAYER_FULL_ATTENTION;
    t->layer.slot = 0;
    qhx_status rc = bind_layer(q, m, "mtp.", 0, &t->layer, err);
    if (!rc) rc = bind_linear(q, m, "mtp.fc.weight", H, 2 * H, &t->fc, err);
    if (!rc) rc = load_vec(q, "mtp.pre_fc_norm_embedding.weight", H, &t->norm_emb, err);
    if (!rc) rc = load_vec(q, "mtp.pre_fc_norm_hidden.weight", H, &t->norm_hidden, err);
    if (!rc) rc = load_vec(q, "mtp.norm.weight", H, &t->norm, err);
    return rc;
}

static const qhx_net_vt Q35_VT;

qhx_status qhx_qwen35_bind(qhx_net *m, qhx_st_set *set, const qhx_net_bind_args *a, qhx_error *err) {
    const char *dir = a->label;
    const qhx_model_config *c = &m->cfg;
    q35_model *q = qhx_calloc(1, sizeof *q);
    if (!q) {
        qhx_st_free(set);
        return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    }
    m->impl = q;
    m->vt = &Q35_VT;
    q35_dims *d = &q->d;
    d->H = c->hidden_size;
    d->I = c->intermediate_size;
    d->V = c->vocab_size;
    d->L = c->num_hidden_layers;
    d->nh = c->num_attention_heads;
    d->nkv = c->num_key_value_heads;
    d->hd = c->head_dim;
    d->rot = c->rotary_dim;
    d->q_out = 2 * d->nh * d->hd;
    d->attn_dim = d->nh * d->hd;
    d->kv_dim = d->nkv * d->hd;
    d->nk = c->linear_num_key_heads;
    d->nv = c->linear_num_value_heads;
    d->dk = c->linear_key_head_dim;
    d->dv = c->linear_value_head_dim;
    d->K = c->linear_conv_kernel_dim;
    d->key_dim = d->nk * d->dk;
    d->value_dim = d->nv * d->dv;
    d->conv_dim = 2 * d->key_dim + d->value_dim;
    d->rep = d->nv / d->nk;
    d->eps = (float)c->rms_norm_eps;
    d->norm = c->llama_cpp_layout ? QHX_NORM_PLAIN : QHX_NORM_ZERO_CENTRED;
    d->v_tiled = c->llama_cpp_layout;

    q->set = set; /* owned from here on, also on failure */
    m->weights = set;
    qhx_status rc;

    /* text weights live under model.language_model. (VLM checkpoint) or model. (text-only) */
    const char *pre = qhx_st_find(q->set, "model.language_model.norm.weight") ? "model.language_model." : "model.";
    char nm[512];
    snprintf(nm, sizeof nm, "%snorm.weight", pre);
    if ((rc = load_vec(q, nm, d->H, &q->final_norm, err))) return rc;
    snprintf(nm, sizeof nm, "%sembed_tokens.weight", pre);
    if ((rc = qhx_wbind_embed_head(q->set, dir, nm, m->cfg.tie_word_embeddings, d->V, d->H, m->dev, &q->owned,
                                   &q->embed, &q->lm_head, err)))
        return rc;

    q->layers = qhx_calloc((size_t)d->L, sizeof *q->layers);
    if (!q->layers) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    for (int64_t i = 0; i < d->L; i++) {
        q35_layer *L = &q->layers[i];
        L->type = c->layer_types[i];
        L->slot = L->type == QHX_LAYER_FULL_ATTENTION ? d->n_full++ : d->n_lin++;
        if ((rc = bind_layer(q, m, pre, i, L, err))) return rc;
    }

    /* HF default RoPE: inv_freq_i = 1 / theta^(2i / rot), the exponent and power in fp32 */
    q->inv_freq = qhx_malloc((size_t)(d->rot / 2) * sizeof(float));
    if (!q->inv_freq) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    qhx_rope_inv_freq(c->rope_theta, d->rot, q->inv_freq);
    /* Qwen3_5TextRotaryEmbedding: mrope_section splits the rot / 2 frequencies, interleaved as
     * the released configs say (recomposition_frequencies) */
    q->axis = qhx_malloc((size_t)(d->rot / 2));
    if (!q->axis) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    qhx_rope_mrope_axes(c->mrope_section, c->mrope_interleaved, d->rot / 2, q->axis);
    m->weights = q->set;
    if (a->mtp && c->mtp_num_hidden_layers > 0 && qhx_st_find(q->set, "mtp.fc.weight") &&
        (rc = bind_mtp(q, m, err)))
        return rc;
    /* the tower when the plan feeds images and the set holds it; m->cfg.has_vision then says
     * whether it was bound (the vision graph exists) */
    if (!a->vision || !c->has_vision || !qhx_st_find(q->set, QHX_QWEN35_VISION_PREFIX_PROBE)) {
        m->cfg.has_vision = false;
        return QHX_OK;
    }
    return qhx_vit_load(q->set, &c->vision, QHX_QWEN35_VISION_PREFIX, m->dev, &q->vit, err);
}

/* ---- state ------------------------------------------------------------------------------- */

typedef struct q35_state {
    const qhx_device *dev;
    qhx_dbuf *buf;         /* one device buffer, carved below */
    size_t persist_bytes;  /* kv + conv + ssm at its start, zeroed by reset */
    qhx_kv_cache kv;       /* (n_full, 2, n_ctx, kv_dim): K rows then V rows per layer */
    qhx_kv_cache mtp_kv;   /* (1, 2, n_ctx, kv_dim): the MTP layer's; rows 0 with no block */
    int64_t mtp_rows;      /* rows of mtp_kv filled */
    qhx_dv cat;            /* (n_batch, 2 H) MTP fc input; a null view with no block */
    qhx_dv conv;           /* (n_lin, K - 1, conv_dim): pre-conv qkv FIFO, oldest first */
    qhx_dv ssm;            /* (n_lin, nv, dk, dv) recurrent state */
    qhx_dv x;              /* (n_batch, H) residual stream */
    qhx_dv xn;             /* (n_batch, H) normed input of a block */
    qhx_dv tmp;            /* (n_batch, H) block output */
    qhx_dv ext;            /* (K - 1 + n_batch, conv_dim) conv window: FIFO then new qkv */
    qhx_dv cv;             /* (n_batch, conv_dim) conv + SiLU output: [q | k | v] */
    qhx_dv z;              /* (n_batch, value_dim) output gate */
    qhx_dv beta;           /* (n_batch, nv) */
    qhx_dv g;              /* (n_batch, nv) log decay */
    qhx_dv core;           /* (n_batch, value_dim) delta-rule output, then gated-norm output */
    qhx_dv qg;             /* (n_batch, q_out) q_proj output */
    qhx_dv kk, vv;         /* (n_batch, kv_dim) keys (normed, rotated in place) and values, f32 */
    qhx_dv q;              /* (n_batch, attn_dim) normed, rotated queries */
    qhx_dv gate;           /* (n_batch, attn_dim) */
    qhx_dv att;            /* (n_batch, attn_dim) attention output */
    qhx_dv attw;           /* the device's attention work for n_ctx keys */
    qhx_dv mg;             /* (n_batch, I) gate_proj, then SwiGLU */
    qhx_dv mu;             /* (n_batch, I) up_proj */
    qhx_dv dwork;          /* the device's delta-rule work */
    float *cosb, *sinb;    /* host (n_batch, rot / 2) */
    /* images: the announced prompt; the next text position (behind n_past after an image); the
     * batch's positions (n_batch, 3) and image rows (n_batch, NULL for text) */
    qhx_img_plan plan;
    int64_t next_pos;
    qhx_dbuf next_pos_buf; /* next_pos as a host region (save/restore) */
    int64_t *pos;
    const float **src;
    /* speculative verification: the recurrent state (conv FIFO + delta-rule state, one
     * contiguous block) after each of the first ver_n - 1 tokens of the last verify, made on
     * first use; ver_p0 / ver_next0: n_past and next_pos before it; ver_n 0: none to cut */
    qhx_dbuf *snap;
    int64_t snap_cap;      /* snapshots snap holds */
    int64_t ver_n, ver_p0, ver_next0;
} q35_state;

/* Round a float count up to 64 bytes and add it to *total; false on overflow. */
static bool plan_add(size_t *total, size_t *at, size_t a, size_t b) {
    size_t n;
    if (!qhx_size_mul(a, b, &n)) return false;
    n = (n + 15) & ~(size_t)15;
    *at = *total;
    return qhx_size_add(*total, n, total);
}

static qhx_status q35_state_create(qhx_seq *st, qhx_error *err) {
    const q35_model *q = st->m->impl;
    const q35_dims *d = &q->d;
    const qhx_device *dev = st->m->dev;
    size_t nb = (size_t)st->n_batch, nc = (size_t)st->n_ctx, total = 0;
    size_t o_kv, o_conv, o_ssm, o_x, o_xn, o_tmp, o_ext, o_cv, o_z, o_beta, o_g, o_core, o_qg, o_q,
        o_gate, o_att, o_attw, o_mg, o_mu, o_dwork, o_kk, o_vv, kvn, o_mkv, o_cat;
    const int64_t rep = d->nh / d->nkv;
    const size_t attw = (size_t)dev->op->attn_work(dev, st->n_ctx, d->nkv, rep, d->hd, st->kv_type);
    const size_t dwork = (size_t)dev->op->gdn_work(dev, d->dk, d->dv);
    qhx_status krc = qhx_kv_check(st->kv_type, d->hd, err);
    if (krc) return krc;
    /* the cache in floats: per position a K and a V row, rounded up to whole floats */
    const size_t kv_pos_floats = (2 * qhx_kv_row_bytes(st->kv_type, d->kv_dim) + sizeof(float) - 1) / sizeof(float);
    bool ok = qhx_size_mul(nc, kv_pos_floats, &kvn) &&
              plan_add(&total, &o_kv, (size_t)d->n_full, kvn) &&
              plan_add(&total, &o_mkv, q->mtp ? 1u : 0u, kvn) &&
              plan_add(&total, &o_conv, (size_t)d->n_lin, (size_t)((d->K - 1) * d->conv_dim)) &&
              plan_add(&total, &o_ssm, (size_t)(d->n_lin * d->nv), (size_t)(d->dk * d->dv));
    size_t persist = total;
    ok = ok && plan_add(&total, &o_x, nb, (size_t)d->H) && plan_add(&total, &o_xn, nb, (size_t)d->H) &&
         plan_add(&total, &o_tmp, nb, (size_t)d->H) &&
         plan_add(&total, &o_ext, nb + (size_t)d->K - 1, (size_t)d->conv_dim) &&
         plan_add(&total, &o_cv, nb, (size_t)d->conv_dim) && plan_add(&total, &o_z, nb, (size_t)d->value_dim) &&
         plan_add(&total, &o_beta, nb, (size_t)d->nv) && plan_add(&total, &o_g, nb, (size_t)d->nv) &&
         plan_add(&total, &o_core, nb, (size_t)d->value_dim) && plan_add(&total, &o_qg, nb, (size_t)d->q_out) &&
         plan_add(&total, &o_kk, nb, (size_t)d->kv_dim) && plan_add(&total, &o_vv, nb, (size_t)d->kv_dim) &&
         plan_add(&total, &o_q, nb, (size_t)d->attn_dim) && plan_add(&total, &o_gate, nb, (size_t)d->attn_dim) &&
         plan_add(&total, &o_att, nb, (size_t)d->attn_dim) && plan_add(&total, &o_attw, 1, attw) &&
         plan_add(&total, &o_mg, nb, (size_t)d->I) && plan_add(&total, &o_mu, nb, (size_t)d->I) &&
         plan_add(&total, &o_dwork, 1, dwork) &&
         plan_add(&total, &o_cat, q->mtp ? nb : 0u, (size_t)(2 * d->H));
    size_t bytes, rope_bytes;
    if (!ok || !qhx_size_mul(total, sizeof(float), &bytes) ||
        !qhx_size_mul(nb, (size_t)d->rot * sizeof(float), &rope_bytes))
        return qhx_fail(err, QHX_E_LIMIT, "state: n_ctx %lld / n_batch %lld need more memory than can be addressed",
                        (long long)st->n_ctx, (long long)st->n_batch);
    q35_state *s = qhx_calloc(1, sizeof *s);
    if (!s) return qhx_fail(err, QHX_E_NOMEM, "state: out of memory");
    s->dev = dev;
    if (dev->op->buf_alloc(dev, bytes, &s->buf, NULL)) {
        qhx_free(s);
        return qhx_fail(err, QHX_E_NOMEM, "state: out of memory for %zu bytes (n_ctx %lld, n_batch %lld)", bytes,
                        (long long)st->n_ctx, (long long)st->n_batch);
    }
#define AT(o) qhx_dv_of(s->buf, (o) * sizeof(float))
    s->persist_bytes = persist * sizeof(float);
    s->kv = (qhx_kv_cache){st->kv_type, AT(o_kv), d->n_full, st->n_ctx, d->kv_dim};
    s->mtp_kv = (qhx_kv_cache){st->kv_type, AT(o_mkv), q->mtp ? 1 : 0, st->n_ctx, d->kv_dim};
    s->cat = q->mtp ? AT(o_cat) : (qhx_dv){0};
    s->conv = AT(o_conv);
    s->ssm = AT(o_ssm);
    s->x = AT(o_x);
    s->xn = AT(o_xn);
    s->tmp = AT(o_tmp);
    s->ext = AT(o_ext);
    s->cv = AT(o_cv);
    s->z = AT(o_z);
    s->beta = AT(o_beta);
    s->g = AT(o_g);
    s->core = AT(o_core);
    s->qg = AT(o_qg);
    s->kk = AT(o_kk);
    s->vv = AT(o_vv);
    s->q = AT(o_q);
    s->gate = AT(o_gate);
    s->att = AT(o_att);
    s->attw = AT(o_attw);
    s->mg = AT(o_mg);
    s->mu = AT(o_mu);
    s->dwork = AT(o_dwork);
#undef AT
    s->next_pos_buf = qhx_dbuf_host(&s->next_pos, sizeof s->next_pos);
    s->cosb = qhx_aligned_alloc(rope_bytes);
    s->sinb = s->cosb ? s->cosb + nb * (size_t)(d->rot / 2) : NULL;
    s->pos = qhx_malloc(nb * 3 * sizeof *s->pos);
    s->src = qhx_calloc(nb, sizeof *s->src);
    if (!s->pos || !s->src || !s->cosb) {
        qhx_free(s->pos);
        qhx_free(s->src);
        qhx_aligned_free(s->cosb);
        dev->op->buf_free(dev, s->buf);
        qhx_free(s);
        return qhx_fail(err, QHX_E_NOMEM, "state: out of memory");
    }
    st->impl = s; /* device buffers start zeroed: the state starts reset */
    return QHX_OK;
}

static void q35_state_free(void *impl) {
    q35_state *s = impl;
    if (!s) return;
    qhx_img_plan_clear(&s->plan);
    qhx_free(s->pos);
    qhx_free(s->src);
    qhx_aligned_free(s->cosb);
    s->dev->op->buf_free(s->dev, s->snap);
    s->dev->op->buf_free(s->dev, s->buf);
    qhx_free(s);
}

static void q35_state_reset(qhx_seq *st) {
    q35_state *s = st->impl;
    s->dev->op->zero(s->dev, qhx_dv_of(s->buf, 0), s->persist_bytes);
    qhx_img_plan_clear(&s->plan);
    s->next_pos = 0;
    s->mtp_rows = 0;
    s->ver_n = 0;
}

static int q35_state_regions(const qhx_seq *st, qhx_state_region *out, int cap) {
    const q35_model *q = st->m->impl;
    const q35_dims *d = &q->d;
    q35_state *s = st->impl;
    int n = 0;
    n = qhx_kv_regions(s->dev, &s->kv, out, cap); /* K then V of each attention layer */
    if (n < cap)
        out[n++] = (qhx_state_region){s->dev, s->conv, (size_t)d->conv_dim * sizeof(float), d->n_lin * (d->K - 1), false};
    if (n < cap)
        out[n++] = (qhx_state_region){s->dev, s->ssm, (size_t)(d->dk * d->dv) * sizeof(float), d->n_lin * d->nv, false};
    /* with a tower: the next text position, which falls behind n_past after an image (a text
     * plan's positions are the rows, and its session files keep their layout) */
    if (q->vit && n < cap)
        out[n++] = (qhx_state_region){s->dev, qhx_dv_of(&s->next_pos_buf, 0), sizeof s->next_pos, 1, false};
    return n;
}

/* ---- forward ----------------------------------------------------------------------------- */

/* Every op runs on the model's device (devices/device.h); how it splits the work is the
 * device's business and never changes the bits. */

/* One batch step: what the mixers share. */
typedef struct q35_fw {
    const qhx_net *m;
    const q35_model *q;
    const qhx_seq *st;
    q35_state *s;
    const q35_layer *L;
    int64_t n;
    qhx_kv_cache *kv;            /* the attention layers' cache: the state's kv, or mtp_kv */
    int64_t n_past;              /* position of the first of the n tokens */
} q35_fw;

/* ---- Gated DeltaNet ---- */

/* The delta-rule parameters of layer L over the f->n tokens in s. */
static qhx_dgdn gdn_args(const q35_fw *f) {
    const q35_dims *d = &f->q->d;
    const q35_state *s = f->s;
    const q35_layer *L = f->L;
    return (qhx_dgdn){.n = f->n, .nk = d->nk, .nv = d->nv, .dk = d->dk, .dv = d->dv, .K = d->K, .rep = d->rep, .v_tiled = d->v_tiled,
                      .eps = d->eps, .conv_w = L->conv_w, .A = L->A, .dt_bias = L->dt_bias, .gnorm_w = L->gnorm_w,
                      .ext = s->ext, .cv = s->cv, .z = s->z, .beta = s->beta, .g = s->g,
                      .S = qhx_dv_f(s->ssm, L->slot * d->nv * d->dk * d->dv), .out = s->core, .work = s->dwork};
}

/* After the input projections: the FIFO's rows and the new qkv through conv + SiLU + norms
 * (gdn_prep), the FIFO advanced to the window's last K - 1 rows, the delta rule and the gated
 * norm (gdn_delta). */
static void gdn_mix(const q35_fw *f) {
    const qhx_device *dev = f->m->dev;
    const q35_dims *d = &f->q->d;
    const int64_t C = d->conv_dim, K = d->K;
    const qhx_dgdn g = gdn_args(f);
    dev->op->gdn_prep(dev, &g);
    dev->op->copy(dev, qhx_dv_f(f->s->conv, f->L->slot * (K - 1) * C), qhx_dv_f(f->s->ext, f->n * C),
                  (size_t)((K - 1) * C) * sizeof(float));
    dev->op->gdn_delta(dev, &g);
}

/* The window starts with the layer's FIFO (K - 1 rows of qkv before these tokens). */
static void gdn_window(const q35_fw *f) {
    const qhx_device *dev = f->m->dev;
    const q35_dims *d = &f->q->d;
    const int64_t C = d->conv_dim, K = d->K;
    dev->op->copy(dev, f->s->ext, qhx_dv_f(f->s->conv, f->L->slot * (K - 1) * C), (size_t)((K - 1) * C) * sizeof(float));
}

/* Gated DeltaNet mixer over n tokens: xn (n, H) -> tmp (n, H). n == 1: recurrent form. */
static void gdn_forward(q35_fw *f) {
    const qhx_device *dev = f->m->dev;
    const q35_dims *d = &f->q->d;
    q35_state *s = f->s;
    const q35_layer *L = f->L;
    const int64_t C = d->conv_dim, K = d->K, n = f->n;
    /* window = [FIFO; qkv of the n tokens]; projections write straight into it */
    gdn_window(f);
    const qhx_dlin in[4] = {{&L->in_proj_qkv, qhx_dv_f(s->ext, (K - 1) * C), C},
                            {&L->in_proj_z, s->z, d->value_dim},
                            {&L->in_proj_b, s->beta, d->nv},
                            {&L->in_proj_a, s->g, d->nv}};
    dev->op->linears(dev, in, 4, s->xn, d->H, n);
    gdn_mix(f);
    dev->op->linear(dev, &L->out_proj, s->core, d->value_dim, s->tmp, d->H, n);
}

/* ---- gated attention ---- */

/* The attention op over the f->n tokens in s: q_proj gave per head [query | gate], split. */
static void attn_mix(const q35_fw *f) {
    const qhx_device *dev = f->m->dev;
    const q35_dims *d = &f->q->d;
    const q35_state *s = f->s;
    const q35_layer *L = f->L;
    dev->op->split_heads(dev, s->qg, s->q, s->gate, f->n, d->nh, d->hd);
    const qhx_dattn a = {.kv = f->kv, .slot = L->slot, .nh = d->nh, .nkv = d->nkv, .hd = d->hd, .rot = d->rot,
                         .norm = d->norm, .q_norm = L->q_norm, .k_norm = L->k_norm, .eps = d->eps,
                         .scale = (float)(1.0 / sqrt((double)d->hd)), .q = s->q, .k = s->kk, .v = s->vv,
                         .cos = s->cosb, .sin = s->sinb, .gate = s->gate, .out = s->att, .work = s->attw,
                         .n_past = f->n_past, .n = f->n};
    dev->op->attention(dev, &a);
}

/* Gated attention mixer over n tokens at positions n_past ..: xn (n, H) -> tmp (n, H): zero-
 * centred q/k norms, partial rotary (rot of hd dims), output gated by sigmoid(gate). */
static void attn_forward(q35_fw *f) {
    const qhx_device *dev = f->m->dev;
    const q35_dims *d = &f->q->d;
    q35_state *s = f->s;
    const q35_layer *L = f->L;
    const int64_t kvd = d->kv_dim, n = f->n;
    const qhx_dlin in[3] = {{&L->q_proj, s->qg, d->q_out}, {&L->k_proj, s->kk, kvd}, {&L->v_proj, s->vv, kvd}};
    dev->op->linears(dev, in, 3, s->xn, d->H, n);
    attn_mix(f);
    dev->op->linear(dev, &L->o_proj, s->att, d->attn_dim, s->tmp, d->H, n);
}

/* The input rows of n tokens: image rows (Qwen3_5Model.forward: masked_scatter of the merger
 * output at the pads; no DeepStack) or the embedding lookup; then M-RoPE: frequency slot j
 * turns with the position of its axis (all three equal for text, which is 1-D RoPE). */
static void input_rows(const qhx_net *m, q35_state *s, const int32_t *ids, int64_t n) {
    const qhx_device *dev = m->dev;
    const q35_model *q = m->impl;
    const int64_t H = q->d.H, half = q->d.rot / 2;
    for (int64_t t = 0; t < n; t++) {
        if (s->src[t]) dev->op->set(dev, qhx_dv_f(s->x, t * H), s->src[t], (size_t)H * sizeof(float));
        else dev->op->embed_rows(dev, &q->embed, ids + t, 1, qhx_dv_f(s->x, t * H));
        qhx_rope_angles(s->pos + t * 3, q->axis, q->inv_freq, half, s->cosb + t * half, s->sinb + t * half);
    }
}

/* One decoder layer on the residual stream s->x of f->n tokens (the main layers and the MTP
 * block's). */
static void layer_forward(q35_fw *f) {
    const qhx_device *dev = f->m->dev;
    const q35_dims *d = &f->q->d;
    q35_state *s = f->s;
    const q35_layer *L = f->L;
    const int64_t H = d->H, n = f->n;
    dev->op->rmsnorm(dev, d->norm, s->x, L->input_norm, s->xn, n, H, d->eps);
    if (L->type == QHX_LAYER_LINEAR_ATTENTION)
        gdn_forward(f);
    else
        attn_forward(f);
    dev->op->add_rmsnorm(dev, d->norm, s->x, s->tmp, L->post_norm, s->xn, n, H, d->eps);
    qhx_op_swiglu_mlp(dev, &L->gate_proj, &L->up_proj, &L->down_proj, s->xn, H, s->mg, s->mu, d->I, s->tmp, n);
    dev->op->add(dev, s->x, s->tmp, n * H);
}

/* n <= n_batch tokens through every layer. logits: NULL, (n, V) when all, else (V) of the last. */
static qhx_status run_batch(const qhx_net *m, qhx_seq *st, const int32_t *ids, int64_t n,
                            float *logits, bool all, const qhx_forward_opts *opts, qhx_error *err) {
    const qhx_device *dev = m->dev;
    const q35_model *q = m->impl;
    const q35_dims *d = &q->d;
    q35_state *s = st->impl;
    q35_fw f = {.m = m, .q = q, .st = st, .s = s, .n = n, .kv = &s->kv, .n_past = st->n_past};

    input_rows(m, s, ids, n);
    if (opts->layer_cb) qhx_op_rows_cb_call(dev, opts->layer_cb, opts->layer_cb_user, -1, st->n_past, s->x, n, d->H);
    for (int64_t l = 0; l < d->L; l++) {
        const q35_layer *L = &q->layers[l];
        f.L = L;
        if (opts->abort_cb && opts->abort_cb(opts->abort_cb_user))
            return qhx_fail(err, QHX_E_ABORTED, "forward: aborted at layer %lld", (long long)l);
        layer_forward(&f);
        if (opts->layer_cb) qhx_op_rows_cb_call(dev, opts->layer_cb, opts->layer_cb_user, l, st->n_past, s->x, n, d->H);
    }
    if (logits) {
        qhx_dbuf lb = qhx_dbuf_host(logits, (size_t)((all ? n : 1) * d->V) * sizeof(float));
        qhx_op_lm_head(dev, d->norm, s->x, q->final_norm, d->eps, s->xn, &q->lm_head,
                       qhx_dv_of(&lb, 0), d->H, d->V, n, all);
    }
    st->n_past += n;
    return QHX_OK;
}

typedef struct q35_steps {
    const qhx_net *m;
    qhx_seq *st;
    const int32_t *ids;
    const qhx_forward_opts *opts;
    bool all;
} q35_steps;

/* One batch: positions and image rows of its tokens (the announced ones from the plan, text
 * after it at the next text position; a text plan's positions are its rows), then the layers. */
static qhx_status q35_step(void *ctx, int64_t t0, int64_t nt, float *logits, qhx_error *err) {
    const q35_steps *c = ctx;
    const q35_model *q = c->m->impl;
    q35_state *s = c->st->impl;
    int64_t next = q->vit ? s->next_pos : c->st->n_past;
    qhx_img_plan_batch(&s->plan, c->st->n_past, nt, &next, s->pos, s->src);
    qhx_status rc = run_batch(c->m, c->st, c->ids + t0, nt, logits, c->all, c->opts, err);
    if (rc == QHX_OK) s->next_pos = next;
    return rc;
}

static qhx_status q35_forward(const qhx_net *m, qhx_seq *st, const int32_t *ids, int64_t n,
                              const qhx_forward_opts *opts, qhx_error *err) {
    q35_state *s = st->impl;
    /* inside an announced prompt only the announced ids; elsewhere every id is text */
    qhx_status crc = qhx_img_plan_check(&s->plan, ids, n, st->n_past, err);
    if (crc) return crc;
    s->ver_n = 0; /* the last verify can no longer be cut */
    q35_steps c = {m, st, ids, opts, (opts->flags & QHX_FWD_LOGITS_ALL) != 0};
    const int64_t step = (opts->flags & QHX_FWD_SEQUENTIAL) ? 1 : st->n_batch;
    return qhx_op_batches(n, step, m->cfg.vocab_size, opts->logits, c.all, q35_step, &c, err);
}

/* The lm-head graph alone: hidden (n, H) rows after the last layer -> logits (n, V). */
static qhx_status q35_lm_head(const qhx_net *m, const float *hidden, int64_t n, float *logits, qhx_error *err) {
    const q35_model *q = m->impl;
    return qhx_op_lm_head_rows(m->dev, q->d.norm, hidden, q->final_norm, q->d.eps, &q->lm_head, logits,
                               q->d.H, q->d.V, n, err);
}

static qhx_status q35_final_norm(const qhx_net *m, const float *hidden, int64_t n, float *out, qhx_error *err) {
    const q35_model *q = m->impl;
    return qhx_op_final_norm_rows(m->dev, q->d.norm, hidden, q->final_norm, q->d.eps, out, q->d.H, n, err);
}

/* ---- images ------------------------------------------------------------------------------ */

static qhx_status q35_encode_image(const qhx_net *m, const qhx_image_patches *p, qhx_image_embed *out, qhx_error *err) {
    const q35_model *q = m->impl;
    if (!q->vit) return qhx_fail(err, QHX_E_UNSUPPORTED, "this checkpoint has no vision tower");
    if (out->row_width != qhx_vit_row_width(q->vit) || !out->embd)
        return qhx_fail(err, QHX_E_ARG, "vision: the output rows are not this model's (%lld floats)",
                        (long long)qhx_vit_row_width(q->vit));
    return qhx_vit_encode(q->vit, p, out->embd, err);
}

/* HF get_rope_index over the images (ops/mrope.h), the same rule as Qwen3-VL's. */
static qhx_status q35_attach(qhx_seq *st, const qhx_image_embed *images, int n_images, const int32_t *ids,
                             int64_t n, qhx_error *err) {
    const q35_model *q = st->m->impl;
    q35_state *s = st->impl;
    if (n_images < 0 || n_images > QHX_MROPE_MAX_IMAGES)
        return qhx_fail(err, QHX_E_ARG, "attach: %d images (at most %d)", n_images, QHX_MROPE_MAX_IMAGES);
    if (n_images && !q->vit) return qhx_fail(err, QHX_E_ARG, "attach: this model has no vision tower");
    if (!q->vit) s->next_pos = st->n_past; /* a text plan: positions are the rows */
    qhx_img_view *v = n_images ? qhx_malloc((size_t)n_images * sizeof *v) : NULL;
    if (n_images && !v) return qhx_fail(err, QHX_E_NOMEM, "attach: out of memory");
    for (int k = 0; k < n_images; k++)
        v[k] = (qhx_img_view){images[k].grid_h, images[k].grid_w, images[k].n_tokens, images[k].row_width, images[k].embd,
                                images[k].pad_id};
    const int64_t merge = q->vit ? q->vit->cfg.spatial_merge_size : 1, rw = q->vit ? qhx_vit_row_width(q->vit) : 0;
    /* without a tower every id is text, the image-pad id too (a text plan reads no images) */
    const int32_t pad = q->vit ? (int32_t)st->m->cfg.image_token_id : -1;
    qhx_status rc = qhx_img_plan_set(&s->plan, v, n_images, ids, n, pad, merge, rw, st->n_past, s->next_pos, err);
    qhx_free(v);
    return rc;
}

static int64_t q35_attached_positions(const qhx_seq *st, const int64_t **pos) {
    const q35_state *s = st->impl;
    *pos = s->plan.n ? s->plan.pos : NULL;
    return s->plan.n;
}

/* ---- one decode step of several sequences ------------------------------------------------- */

/* Every linear layer runs once for all nb sequences (the device's linears_multi: the weights
 * read once per step, each row with the single-row bits), the mixers run per sequence on its
 * own state exactly as the one-token forward does, so each sequence gets the bits it gets
 * alone. */

#define MULTI_MAX QHX_DEV_MULTI_MAX

typedef struct multi_rows {
    qhx_dv a[MULTI_MAX], b[MULTI_MAX], c[MULTI_MAX], d[MULTI_MAX];
    qhx_dv x[MULTI_MAX];
} multi_rows;

static void q35_layer_multi(const qhx_net *m, q35_fw *f, int64_t nb, const q35_layer *L, multi_rows *r) {
    const qhx_device *dev = m->dev;
    const q35_dims *d = &f[0].q->d;
    const int64_t H = d->H;
    for (int64_t b = 0; b < nb; b++) {
        f[b].L = L;
        dev->op->rmsnorm(dev, d->norm, f[b].s->x, L->input_norm, f[b].s->xn, 1, H, d->eps);
        r->x[b] = f[b].s->xn;
    }
    if (L->type == QHX_LAYER_LINEAR_ATTENTION) {
        for (int64_t b = 0; b < nb; b++) {
            q35_state *s = f[b].s;
            gdn_window(&f[b]);
            r->a[b] = qhx_dv_f(s->ext, (d->K - 1) * d->conv_dim), r->b[b] = s->z, r->c[b] = s->beta, r->d[b] = s->g;
        }
        const qhx_dlin_multi in[4] = {{&L->in_proj_qkv, r->a}, {&L->in_proj_z, r->b}, {&L->in_proj_b, r->c},
                                      {&L->in_proj_a, r->d}};
        dev->op->linears_multi(dev, in, 4, r->x, nb, false);
        for (int64_t b = 0; b < nb; b++) gdn_mix(&f[b]);
        for (int64_t b = 0; b < nb; b++) r->x[b] = f[b].s->core, r->a[b] = f[b].s->tmp;
        const qhx_dlin_multi out = {&L->out_proj, r->a};
        dev->op->linears_multi(dev, &out, 1, r->x, nb, false);
    } else {
        for (int64_t b = 0; b < nb; b++) r->a[b] = f[b].s->qg, r->b[b] = f[b].s->kk, r->c[b] = f[b].s->vv;
        const qhx_dlin_multi in[3] = {{&L->q_proj, r->a}, {&L->k_proj, r->b}, {&L->v_proj, r->c}};
        dev->op->linears_multi(dev, in, 3, r->x, nb, false);
        for (int64_t b = 0; b < nb; b++) attn_mix(&f[b]);
        for (int64_t b = 0; b < nb; b++) r->x[b] = f[b].s->att, r->a[b] = f[b].s->tmp;
        const qhx_dlin_multi out = {&L->o_proj, r->a};
        dev->op->linears_multi(dev, &out, 1, r->x, nb, false);
    }
    for (int64_t b = 0; b < nb; b++) {
        q35_state *s = f[b].s;
        dev->op->add_rmsnorm(dev, d->norm, s->x, s->tmp, L->post_norm, s->xn, 1, H, d->eps);
        r->x[b] = s->xn, r->a[b] = s->mg, r->b[b] = s->mu;
    }
    const qhx_dlin_multi gu[2] = {{&L->gate_proj, r->a}, {&L->up_proj, r->b}};
    dev->op->linears_multi(dev, gu, 2, r->x, nb, true);
    for (int64_t b = 0; b < nb; b++) r->x[b] = f[b].s->mg, r->a[b] = f[b].s->tmp;
    const qhx_dlin_multi down = {&L->down_proj, r->a};
    dev->op->linears_multi(dev, &down, 1, r->x, nb, false);
    for (int64_t b = 0; b < nb; b++) dev->op->add(dev, f[b].s->x, f[b].s->tmp, H);
}

static qhx_status q35_decode_multi(const qhx_net *m, qhx_seq *const *sts, const int32_t *ids, int64_t nb,
                                   float *const *logits, qhx_error *err) {
    if (nb < 1 || nb > MULTI_MAX) return qhx_fail(err, QHX_E_ARG, "decode: %lld sequences, 1 to %d", (long long)nb, MULTI_MAX);
    const qhx_device *dev = m->dev;
    const q35_model *q = m->impl;
    const q35_dims *d = &q->d;
    const int64_t H = d->H;
    q35_fw f[MULTI_MAX];
    int64_t next[MULTI_MAX];
    multi_rows r;
    qhx_dbuf lb[MULTI_MAX];
    /* positions as q35_step gives them for one token; a token that is an image row is refused
       before anything runs (the caller feeds it on its own) */
    for (int64_t b = 0; b < nb; b++) {
        qhx_seq *st = sts[b];
        q35_state *s = st->impl;
        qhx_status rc = qhx_img_plan_check(&s->plan, &ids[b], 1, st->n_past, err);
        if (rc) return rc;
        next[b] = q->vit ? s->next_pos : st->n_past;
        qhx_img_plan_batch(&s->plan, st->n_past, 1, &next[b], s->pos, s->src);
        if (s->src[0]) return qhx_fail(err, QHX_E_UNSUPPORTED, "decode: sequence %lld is at an image row", (long long)b);
    }
    for (int64_t b = 0; b < nb; b++) {
        qhx_seq *st = sts[b];
        q35_state *s = st->impl;
        s->ver_n = 0;
        f[b] = (q35_fw){.m = m, .q = q, .st = st, .s = s, .n = 1, .kv = &s->kv, .n_past = st->n_past};
        input_rows(m, s, &ids[b], 1);
    }
    for (int64_t l = 0; l < d->L; l++) q35_layer_multi(m, f, nb, &q->layers[l], &r);
    for (int64_t b = 0; b < nb; b++) {
        q35_state *s = f[b].s;
        dev->op->rmsnorm(dev, d->norm, s->x, q->final_norm, s->xn, 1, H, d->eps);
        lb[b] = qhx_dbuf_host(logits[b], (size_t)d->V * sizeof(float));
        r.x[b] = s->xn;
        r.a[b] = qhx_dv_of(&lb[b], 0);
    }
    const qhx_dlin_multi head = {&q->lm_head, r.a};
    dev->op->linears_multi(dev, &head, 1, r.x, nb, false);
    for (int64_t b = 0; b < nb; b++) {
        q35_state *s = sts[b]->impl;
        s->next_pos = next[b];
        sts[b]->n_past++;
    }
    return QHX_OK;
}

/* ---- multi-token prediction ------------------------------------------------------------- */

static bool q35_has_mtp(const qhx_net *m) { return ((const q35_model *)m->impl)->mtp != NULL; }

/* n <= n_batch rows at positions pos0..: the block's input, its layer (attention over mtp_kv),
 * its norm and the head. The hidden rows go to the device first (they pass x, which the fc
 * then overwrites); each half of a cat row is one normed row. */
static void mtp_batch(const qhx_net *m, qhx_seq *st, int64_t pos0, const float *hidden, bool normed,
                      const int32_t *ids, int64_t n, float *logits, float *hidden_out) {
    const qhx_device *dev = m->dev;
    const q35_model *q = m->impl;
    const q35_mtp *t = q->mtp;
    const q35_dims *d = &q->d;
    q35_state *s = st->impl;
    const int64_t H = d->H, half = d->rot / 2;
    dev->op->embed_rows(dev, &q->embed, ids, n, s->tmp);
    dev->op->set(dev, s->x, hidden, (size_t)(n * H) * sizeof(float));
    for (int64_t i = 0; i < n; i++) {
        const qhx_dv c = qhx_dv_f(s->cat, i * 2 * H);
        dev->op->rmsnorm(dev, d->norm, qhx_dv_f(s->tmp, i * H), t->norm_emb, c, 1, H, d->eps);
        /* the main model's final norm (unless the rows are the block's own normed output), then
           the block's own norm of the hidden half */
        qhx_dv hin = qhx_dv_f(s->x, i * H);
        if (!normed) {
            dev->op->rmsnorm(dev, d->norm, hin, q->final_norm, qhx_dv_f(s->xn, i * H), 1, H, d->eps);
            hin = qhx_dv_f(s->xn, i * H);
        }
        dev->op->rmsnorm(dev, d->norm, hin, t->norm_hidden, qhx_dv_f(c, H), 1, H, d->eps);
        const int64_t p3[3] = {pos0 + i, pos0 + i, pos0 + i}; /* text: 1-D RoPE at the row's position */
        qhx_rope_angles(p3, q->axis, q->inv_freq, half, s->cosb + i * half, s->sinb + i * half);
    }
    dev->op->linear(dev, &t->fc, s->cat, 2 * H, s->x, H, n);
    q35_fw f = {.m = m, .q = q, .st = st, .s = s, .n = n, .L = &t->layer, .kv = &s->mtp_kv, .n_past = pos0};
    layer_forward(&f);
    qhx_dbuf lb = qhx_dbuf_host(logits, logits ? (size_t)(n * d->V) * sizeof(float) : 0);
    if (logits)
        qhx_op_lm_head(dev, d->norm, s->x, t->norm, d->eps, s->xn, &q->lm_head, qhx_dv_of(&lb, 0), H,
                       d->V, n, true);
    else if (hidden_out) /* no head: the cache rows (and the normed output) only */
        dev->op->rmsnorm(dev, d->norm, s->x, t->norm, s->xn, n, H, d->eps);
    if (hidden_out) dev->op->get(dev, s->xn, hidden_out, (size_t)(n * H) * sizeof(float)); /* norm(y): the head's rows */
}

static qhx_status q35_mtp_ex(const qhx_net *m, qhx_seq *st, int64_t pos0, const float *hidden, bool normed,
                             const int32_t *ids, int64_t n, float *logits, float *hidden_out, qhx_error *err) {
    const q35_model *q = m->impl;
    q35_state *s = st->impl;
    if (!q->mtp) return qhx_fail(err, QHX_E_UNSUPPORTED, "mtp: the multi-token-prediction block is not loaded");
    if (n < 1 || pos0 < 0) return qhx_fail(err, QHX_E_ARG, "mtp: %lld rows at position %lld", (long long)n, (long long)pos0);
    if (pos0 > s->mtp_rows)
        return qhx_fail(err, QHX_E_ARG, "mtp: position %lld leaves a gap (the block holds %lld rows)", (long long)pos0,
                        (long long)s->mtp_rows);
    if (n > st->n_ctx - pos0)
        return qhx_fail(err, QHX_E_LIMIT, "mtp: rows %lld .. %lld exceed the context of %lld", (long long)pos0,
                        (long long)(pos0 + n - 1), (long long)st->n_ctx);
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= q->d.V)
            return qhx_fail(err, QHX_E_ARG, "mtp: id %d is outside the vocabulary [0, %lld)", ids[i], (long long)q->d.V);
    for (int64_t i0 = 0; i0 < n; i0 += st->n_batch) {
        const int64_t nb = n - i0 < st->n_batch ? n - i0 : st->n_batch;
        mtp_batch(m, st, pos0 + i0, hidden + i0 * q->d.H, normed, ids + i0, nb, logits ? logits + i0 * q->d.V : NULL,
                  hidden_out ? hidden_out + i0 * q->d.H : NULL);
    }
    s->mtp_rows = pos0 + n;
    return QHX_OK;
}

static qhx_status q35_mtp_forward(const qhx_net *m, qhx_seq *st, int64_t pos0, const float *hidden,
                                  const int32_t *ids, int64_t n, float *logits, qhx_error *err) {
    return q35_mtp_ex(m, st, pos0, hidden, false, ids, n, logits, NULL, err);
}

/* ---- speculative verification ------------------------------------------------------------ */

/* The n tokens of a verify run as n one-token steps that share every linear layer: the rows go
 * through linears_multi (each row with the single-row bits, as in q35_decode_multi) and the
 * mixers run token after token on the one state, each on a copy of the state whose scratch
 * views start at that token's row. The conv window of token i is rows i .. i + K - 1 of ext
 * (the FIFO, then the new qkv rows), which the one-token path reads the same way. Several
 * sequences verify together the same way: their rows are one list for the linear layers, and
 * each sequence's mixers run on its own state in its own token order, so every sequence gets
 * the bits of its verify alone. */

/* The state seen by token i of a verify: scratch views moved to its row. */
static q35_state shifted(const q35_state *s, const q35_dims *d, int64_t i) {
    q35_state r = *s;
    r.x = qhx_dv_f(s->x, i * d->H), r.xn = qhx_dv_f(s->xn, i * d->H), r.tmp = qhx_dv_f(s->tmp, i * d->H);
    r.ext = qhx_dv_f(s->ext, i * d->conv_dim), r.cv = qhx_dv_f(s->cv, i * d->conv_dim);
    r.z = qhx_dv_f(s->z, i * d->value_dim), r.core = qhx_dv_f(s->core, i * d->value_dim);
    r.beta = qhx_dv_f(s->beta, i * d->nv), r.g = qhx_dv_f(s->g, i * d->nv);
    r.qg = qhx_dv_f(s->qg, i * d->q_out), r.q = qhx_dv_f(s->q, i * d->attn_dim);
    r.gate = qhx_dv_f(s->gate, i * d->attn_dim), r.att = qhx_dv_f(s->att, i * d->attn_dim);
    r.kk = qhx_dv_f(s->kk, i * d->kv_dim), r.vv = qhx_dv_f(s->vv, i * d->kv_dim);
    r.mg = qhx_dv_f(s->mg, i * d->I), r.mu = qhx_dv_f(s->mu, i * d->I);
    r.cosb = s->cosb + i * (d->rot / 2), r.sinb = s->sinb + i * (d->rot / 2);
    return r;
}

/* Bytes of the recurrent block (conv FIFOs then delta-rule states, contiguous in the buffer). */
static size_t rec_bytes(const q35_state *s, const q35_dims *d) {
    return s->ssm.off - s->conv.off + (size_t)(d->n_lin * d->nv * d->dk * d->dv) * sizeof(float);
}

/* Keep layer L's recurrent state after token i in snapshot i. */
static void snap_layer(const qhx_device *dev, q35_state *s, const q35_dims *d, const q35_layer *L, int64_t i) {
    const size_t blk = rec_bytes(s, d), cb = (size_t)((d->K - 1) * d->conv_dim) * sizeof(float),
                 sb = (size_t)(d->nv * d->dk * d->dv) * sizeof(float);
    const qhx_dv c = qhx_dv_of(s->buf, s->conv.off + (size_t)L->slot * cb),
                 S = qhx_dv_of(s->buf, s->ssm.off + (size_t)L->slot * sb);
    dev->op->copy(dev, qhx_dv_of(s->snap, i * blk + (c.off - s->conv.off)), c, cb);
    dev->op->copy(dev, qhx_dv_of(s->snap, i * blk + (S.off - s->conv.off)), S, sb);
}

/* One sequence of a verify: its state and its rows r0 .. r0 + n - 1 of the rows of all. */
typedef struct verify_seq {
    qhx_seq *st;
    q35_state *s;
    int64_t r0, n, next, next0; /* next0, next: the text position before and after it */
} verify_seq;

/* One layer for the nr rows of ns sequences: f[i], sh[i] are row i's step and state view. */
static void verify_layer(const qhx_net *m, q35_fw *f, q35_state *sh, int64_t nr, const verify_seq *vs, int64_t ns,
                         const q35_layer *L, multi_rows *r) {
    const qhx_device *dev = m->dev;
    const q35_dims *d = &f[0].q->d;
    const int64_t H = d->H;
    for (int64_t i = 0; i < nr; i++) {
        f[i].L = L;
        dev->op->rmsnorm(dev, d->norm, sh[i].x, L->input_norm, sh[i].xn, 1, H, d->eps);
        r->x[i] = sh[i].xn;
    }
    if (L->type == QHX_LAYER_LINEAR_ATTENTION) {
        /* each sequence's FIFO once: its token j's window is ext rows j .. j + K - 1 */
        for (int64_t k = 0; k < ns; k++) gdn_window(&f[vs[k].r0]);
        for (int64_t i = 0; i < nr; i++)
            r->a[i] = qhx_dv_f(sh[i].ext, (d->K - 1) * d->conv_dim), r->b[i] = sh[i].z, r->c[i] = sh[i].beta,
            r->d[i] = sh[i].g;
        const qhx_dlin_multi in[4] = {{&L->in_proj_qkv, r->a}, {&L->in_proj_z, r->b}, {&L->in_proj_b, r->c},
                                      {&L->in_proj_a, r->d}};
        dev->op->linears_multi(dev, in, 4, r->x, nr, false);
        for (int64_t k = 0; k < ns; k++)
            for (int64_t j = 0; j < vs[k].n; j++) {
                gdn_mix(&f[vs[k].r0 + j]);
                if (j + 1 < vs[k].n) snap_layer(dev, vs[k].s, d, L, j);
            }
        for (int64_t i = 0; i < nr; i++) r->x[i] = sh[i].core, r->a[i] = sh[i].tmp;
        const qhx_dlin_multi out = {&L->out_proj, r->a};
        dev->op->linears_multi(dev, &out, 1, r->x, nr, false);
    } else {
        for (int64_t i = 0; i < nr; i++) r->a[i] = sh[i].qg, r->b[i] = sh[i].kk, r->c[i] = sh[i].vv;
        const qhx_dlin_multi in[3] = {{&L->q_proj, r->a}, {&L->k_proj, r->b}, {&L->v_proj, r->c}};
        dev->op->linears_multi(dev, in, 3, r->x, nr, false);
        for (int64_t i = 0; i < nr; i++) attn_mix(&f[i]);
        for (int64_t i = 0; i < nr; i++) r->x[i] = sh[i].att, r->a[i] = sh[i].tmp;
        const qhx_dlin_multi out = {&L->o_proj, r->a};
        dev->op->linears_multi(dev, &out, 1, r->x, nr, false);
    }
    for (int64_t i = 0; i < nr; i++) {
        dev->op->add_rmsnorm(dev, d->norm, sh[i].x, sh[i].tmp, L->post_norm, sh[i].xn, 1, H, d->eps);
        r->x[i] = sh[i].xn, r->a[i] = sh[i].mg, r->b[i] = sh[i].mu;
    }
    const qhx_dlin_multi gu[2] = {{&L->gate_proj, r->a}, {&L->up_proj, r->b}};
    dev->op->linears_multi(dev, gu, 2, r->x, nr, true);
    for (int64_t i = 0; i < nr; i++) r->x[i] = sh[i].mg, r->a[i] = sh[i].tmp;
    const qhx_dlin_multi down = {&L->down_proj, r->a};
    dev->op->linears_multi(dev, &down, 1, r->x, nr, false);
    for (int64_t i = 0; i < nr; i++) dev->op->add(dev, sh[i].x, sh[i].tmp, H);
}

/* Sequence b's checks and its text positions in vs; nothing of its state changes but scratch
 * (the batch's positions) and the snapshot buffer, grown to the longest verify seen. */
static qhx_status verify_check(const qhx_net *m, qhx_seq *st, const int32_t *ids, int64_t n, int64_t b,
                               verify_seq *vs, qhx_error *err) {
    const q35_model *q = m->impl;
    q35_state *s = st->impl;
    const int64_t cap = st->n_batch < QHX_VERIFY_MAX ? st->n_batch : QHX_VERIFY_MAX;
    if (n < 1 || n > cap)
        return qhx_fail(err, QHX_E_ARG, "verify: sequence %lld: %lld tokens, 1 to %lld", (long long)b, (long long)n,
                        (long long)cap);
    if (n > st->n_ctx - st->n_past)
        return qhx_fail(err, QHX_E_LIMIT, "verify: sequence %lld: %lld tokens after %lld exceed the context of %lld",
                        (long long)b, (long long)n, (long long)st->n_past, (long long)st->n_ctx);
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= q->d.V)
            return qhx_fail(err, QHX_E_ARG, "verify: id %d is outside the vocabulary [0, %lld)", ids[i], (long long)q->d.V);
    qhx_status rc = qhx_img_plan_check(&s->plan, ids, n, st->n_past, err);
    if (rc) return rc;
    vs->next0 = vs->next = q->vit ? s->next_pos : st->n_past;
    qhx_img_plan_batch(&s->plan, st->n_past, n, &vs->next, s->pos, s->src);
    for (int64_t i = 0; i < n; i++)
        if (s->src[i])
            return qhx_fail(err, QHX_E_UNSUPPORTED, "verify: sequence %lld: token %lld is an image row", (long long)b,
                            (long long)i);
    if (n - 1 > s->snap_cap) {
        m->dev->op->buf_free(m->dev, s->snap);
        s->snap = NULL, s->snap_cap = 0, s->ver_n = 0;
        if (m->dev->op->buf_alloc(m->dev, (size_t)(n - 1) * rec_bytes(s, &q->d), &s->snap, NULL))
            return qhx_fail(err, QHX_E_NOMEM, "verify: out of memory for %lld recurrent-state snapshots",
                            (long long)(n - 1));
        s->snap_cap = n - 1;
    }
    return QHX_OK;
}

static qhx_status q35_verify_multi(const qhx_net *m, qhx_seq *const *sts, const int32_t *const *ids, const int64_t *n,
                                   int64_t ns, float *const *logits, float *const *hidden, qhx_error *err) {
    if (ns < 1 || ns > MULTI_MAX)
        return qhx_fail(err, QHX_E_ARG, "verify: %lld sequences, 1 to %d", (long long)ns, MULTI_MAX);
    verify_seq vs[MULTI_MAX];
    int64_t nr = 0;
    for (int64_t b = 0; b < ns; b++) {
        qhx_status rc = verify_check(m, sts[b], ids[b], n[b], b, &vs[b], err);
        if (rc) return rc;
        if (n[b] > MULTI_MAX - nr)
            return qhx_fail(err, QHX_E_ARG, "verify: more than %d rows in all", MULTI_MAX);
        vs[b].st = sts[b], vs[b].s = sts[b]->impl, vs[b].r0 = nr, vs[b].n = n[b];
        nr += n[b];
    }
    const qhx_device *dev = m->dev;
    const q35_model *q = m->impl;
    const q35_dims *d = &q->d;
    q35_state sh[MULTI_MAX];
    q35_fw f[MULTI_MAX];
    multi_rows r = {0}; /* the rows set below (zeroed: the compiler cannot see nr >= 1) */
    qhx_dbuf lb[MULTI_MAX];
    for (int64_t b = 0; b < ns; b++) {
        const verify_seq *v = &vs[b];
        input_rows(m, v->s, ids[b], v->n);
        for (int64_t j = 0; j < v->n; j++) {
            sh[v->r0 + j] = shifted(v->s, d, j);
            f[v->r0 + j] = (q35_fw){.m = m, .q = q, .st = v->st, .s = &sh[v->r0 + j], .n = 1, .kv = &v->s->kv,
                                    .n_past = v->st->n_past + j};
        }
    }
    for (int64_t l = 0; l < d->L; l++) verify_layer(m, f, sh, nr, vs, ns, &q->layers[l], &r);
    for (int64_t b = 0; b < ns; b++) {
        const verify_seq *v = &vs[b];
        lb[b] = qhx_dbuf_host(logits[b], (size_t)(v->n * d->V) * sizeof(float));
        for (int64_t j = 0; j < v->n; j++) {
            q35_state *x = &sh[v->r0 + j];
            dev->op->rmsnorm(dev, d->norm, x->x, q->final_norm, x->xn, 1, d->H, d->eps);
            r.x[v->r0 + j] = x->xn;
            r.a[v->r0 + j] = qhx_dv_of(&lb[b], (size_t)(j * d->V) * sizeof(float));
        }
    }
    const qhx_dlin_multi head = {&q->lm_head, r.a};
    dev->op->linears_multi(dev, &head, 1, r.x, nr, false);
    for (int64_t b = 0; b < ns; b++) {
        const verify_seq *v = &vs[b];
        if (hidden && hidden[b]) dev->op->get(dev, v->s->x, hidden[b], (size_t)(v->n * d->H) * sizeof(float));
        v->s->ver_n = v->n, v->s->ver_p0 = v->st->n_past, v->s->ver_next0 = v->next0;
        v->s->next_pos = v->next;
        v->st->n_past += v->n;
    }
    return QHX_OK;
}

/* Back to the first k tokens of the last verify: position (the KV rows past it are simply
 * overwritten later) and the recurrent state kept after token k - 1. */
static qhx_status q35_verify_keep(qhx_seq *st, int64_t k, qhx_error *err) {
    q35_state *s = st->impl;
    const q35_dims *d = &((const q35_model *)st->m->impl)->d;
    if (s->ver_n < 1 || st->n_past != s->ver_p0 + s->ver_n)
        return qhx_fail(err, QHX_E_ARG, "verify: nothing to cut back (no verify was the last call)");
    if (k < 1 || k > s->ver_n)
        return qhx_fail(err, QHX_E_ARG, "verify: keep %lld of %lld tokens", (long long)k, (long long)s->ver_n);
    if (k < s->ver_n) {
        const size_t blk = rec_bytes(s, d);
        s->dev->op->copy(s->dev, s->conv, qhx_dv_of(s->snap, (size_t)(k - 1) * blk), blk);
    }
    s->next_pos = s->ver_next0 + k; /* text rows: one position each */
    st->n_past = s->ver_p0 + k;
    s->ver_n = k; /* a smaller k may still follow */
    return QHX_OK;
}

static const qhx_net_vt Q35_VT = {
    .free_impl = q35_free_impl,
    .state_create = q35_state_create,
    .state_free = q35_state_free,
    .state_reset = q35_state_reset,
    .forward = q35_forward,
    .state_regions = q35_state_regions,
    .lm_head = q35_lm_head,
    .final_norm = q35_final_norm,
    .encode_image = q35_encode_image,
    .attach = q35_attach,
    .attached_positions = q35_attached_positions,
    .decode_multi = q35_decode_multi,
    .has_mtp = q35_has_mtp,
    .mtp = q35_mtp_forward,
    .mtp_ex = q35_mtp_ex,
    .verify_multi = q35_verify_multi,
    .verify_keep = q35_verify_keep,
};
