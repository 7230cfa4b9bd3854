/* families/qwen3vl/qwen3vl.c: the Qwen3-VL family in float32 (contracts in families/family.h;
 * spec/qwen3_vl.md §4-§5). The text decoder is a dense Qwen3 stack: plain RMSNorm
 * x * rsqrt(mean(x^2) + eps) * w (not the zero-centred 1 + w of Qwen3.5), per-head q/k RMSNorm
 * before an interleaved M-RoPE over (t, h, w) positions, GQA, SwiGLU, a tied lm-head. Image-pad
 * rows take the vision tower's merger output and receive DeepStack feature l after layer l. */
#include "families/qwen3vl/qwen3vl.h"

#include "core/alloc.h"
#include "core/file.h"
#include "devices/device.h"
#include "ops/blocks.h"
#include "ops/imgplan.h"
#include "ops/mrope.h"
#include "ops/rope.h"
#include "ops/kv.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- model ------------------------------------------------------------------------------- */

typedef struct vl_layer {
    float *input_norm, *post_norm;             /* (hidden) */
    qhx_weight q_proj, k_proj, v_proj, o_proj; /* (Hq hd, hidden), (Hkv hd, hidden) x2, (hidden, Hq hd) */
    float *q_norm, *k_norm;                    /* (head_dim), shared by the heads */
    qhx_weight gate_proj, up_proj, down_proj;  /* (I, hidden) x2, (hidden, I) */
} vl_layer;

typedef struct qhx_qwen3vl {
    int64_t H, I, V, L, nh, nkv, hd;  /* hidden, intermediate, vocab, layers, heads, kv heads, head dim */
    float eps;
    int64_t image_token_id;
    qhx_st_set *set;
    qhx_wowned owned;
    qhx_weight embed, lm_head;        /* (V, H); lm_head is embed when tied */
    float *final_norm;                /* (H) */
    vl_layer *layers;                 /* (L) */
    float *inv_freq;                  /* (hd / 2): 1 / theta^(2j / hd), float32 as HF */
    unsigned char *axis;              /* (hd / 2): M-RoPE axis of each frequency slot, 0 T 1 H 2 W */
    qhx_vit *vit;                     /* NULL when the checkpoint has no vision tower */
    const qhx_device *dev;            /* the model's device */
} qhx_qwen3vl;

static void vl_free_impl(void *impl) {
    qhx_qwen3vl *q = impl;
    if (!q) return;
    qhx_vit_free(q->vit);
    qhx_wowned_free(&q->owned);
    qhx_free(q->layers);
    qhx_free(q->inv_freq);
    qhx_free(q->axis);
    qhx_st_free(q->set);
    qhx_free(q);
}

/* ---- open -------------------------------------------------------------------------------- */

static const qhx_net_vt VL_VT;

static qhx_status vec(qhx_qwen3vl *q, const char *name, int64_t n, float **out, qhx_error *err) {
    return qhx_wload_f32(q->set, name, 1, &n, &q->owned, out, NULL, err);
}

static qhx_status lin(qhx_qwen3vl *q, const char *name, int64_t rows, int64_t cols, qhx_weight *out,
                      qhx_error *err) {
    return qhx_wbind_linear(q->set, name, rows, cols, q->dev, &q->owned, out, err);
}

/* The tower, when the config has one and the set holds it; m->cfg.has_vision then says whether
 * it was bound (the vision graph exists). */
static qhx_status open_vision(qhx_qwen3vl *q, qhx_model_config *c, bool wanted, qhx_error *err) {
    if (!wanted || !c->has_vision || !qhx_st_find(q->set, QHX_QWEN3VL_VISION_PREFIX_PROBE)) {
        c->has_vision = false; /* text only */
        return QHX_OK;
    }
    return qhx_vit_load(q->set, &c->vision, QHX_QWEN3VL_VISION_PREFIX, q->dev, &q->vit, err);
}

qhx_status qhx_qwen3vl_bind(qhx_net *m, qhx_st_set *set, const qhx_net_bind_args *a, qhx_error *err) {
    qhx_qwen3vl *q = qhx_calloc(1, sizeof *q);
    if (!q) {
        qhx_st_free(set);
        return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    }
    q->set = set; /* owned from here on, also on failure */
    m->weights = set;
    m->impl = q;
    m->vt = &VL_VT;
    q->dev = m->dev;
    qhx_status rc;
    const qhx_model_config *c = &m->cfg;
    q->image_token_id = c->image_token_id;
    q->H = c->hidden_size;
    q->I = c->intermediate_size;
    q->V = c->vocab_size;
    q->L = c->num_hidden_layers;
    q->nh = c->num_attention_heads;
    q->nkv = c->num_key_value_heads;
    q->hd = c->head_dim;
    q->eps = (float)c->rms_norm_eps;

    char nm[512];
    const char *pre = "model.language_model.";
#define NAME(...) (snprintf(nm, sizeof nm, __VA_ARGS__), nm)
    if ((rc = vec(q, NAME("%snorm.weight", pre), q->H, &q->final_norm, err))) return rc;
    /* the table and the head, or one matrix for both in a tied bundle (ops/weights.h) */
    if ((rc = qhx_wbind_embed_head(q->set, qhx_st_file_path(q->set, 0), NAME("%sembed_tokens.weight", pre),
                                   c->tie_word_embeddings, q->V, q->H, q->dev, &q->owned, &q->embed, &q->lm_head, err)))
        return rc;
    q->layers = qhx_calloc((size_t)q->L, sizeof *q->layers);
    if (!q->layers) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    for (int64_t l = 0; l < q->L; l++) {
        vl_layer *Ly = &q->layers[l];
        long long i = (long long)l;
        if ((rc = vec(q, NAME("%slayers.%lld.input_layernorm.weight", pre, i), q->H, &Ly->input_norm, err))) return rc;
        if ((rc = vec(q, NAME("%slayers.%lld.post_attention_layernorm.weight", pre, i), q->H, &Ly->post_norm, err))) return rc;
        if ((rc = lin(q, NAME("%slayers.%lld.self_attn.q_proj.weight", pre, i), q->nh * q->hd, q->H, &Ly->q_proj, err))) return rc;
        if ((rc = lin(q, NAME("%slayers.%lld.self_attn.k_proj.weight", pre, i), q->nkv * q->hd, q->H, &Ly->k_proj, err))) return rc;
        if ((rc = lin(q, NAME("%slayers.%lld.self_attn.v_proj.weight", pre, i), q->nkv * q->hd, q->H, &Ly->v_proj, err))) return rc;
        if ((rc = lin(q, NAME("%slayers.%lld.self_attn.o_proj.weight", pre, i), q->H, q->nh * q->hd, &Ly->o_proj, err))) return rc;
        if ((rc = vec(q, NAME("%slayers.%lld.self_attn.q_norm.weight", pre, i), q->hd, &Ly->q_norm, err))) return rc;
        if ((rc = vec(q, NAME("%slayers.%lld.self_attn.k_norm.weight", pre, i), q->hd, &Ly->k_norm, err))) return rc;
        if ((rc = lin(q, NAME("%slayers.%lld.mlp.gate_proj.weight", pre, i), q->I, q->H, &Ly->gate_proj, err))) return rc;
        if ((rc = lin(q, NAME("%slayers.%lld.mlp.up_proj.weight", pre, i), q->I, q->H, &Ly->up_proj, err))) return rc;
        if ((rc = lin(q, NAME("%slayers.%lld.mlp.down_proj.weight", pre, i), q->H, q->I, &Ly->down_proj, err))) return rc;
    }
#undef NAME
    q->inv_freq = qhx_malloc((size_t)(q->hd / 2) * sizeof *q->inv_freq);
    q->axis = qhx_malloc((size_t)(q->hd / 2));
    if (!q->inv_freq || !q->axis) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    qhx_rope_inv_freq(c->rope_theta, q->hd, q->inv_freq); /* HF default rope init, float32 */
    qhx_rope_mrope_axes(c->mrope_section, c->mrope_interleaved, q->hd / 2, q->axis);
    return open_vision(q, &m->cfg, a->vision, err);
}

/* ---- the vision graph -------------------------------------------------------------------- */

static qhx_status vl_encode_image(const qhx_net *m, const qhx_image_patches *p, qhx_image_embed *out, qhx_error *err) {
    const qhx_qwen3vl *q = m->impl;
    if (!q->vit) return qhx_fail(err, QHX_E_UNSUPPORTED, "this checkpoint has no vision tower");
    if (out->row_width != qhx_vit_row_width(q->vit) || !out->embd)
        return qhx_fail(err, QHX_E_ARG, "vision: the output rows are not this model's (%lld floats)",
                        (long long)qhx_vit_row_width(q->vit));
    return qhx_vit_encode(q->vit, p, out->embd, err);
}

/* ---- state ------------------------------------------------------------------------------- */

typedef struct vl_state {
    const qhx_device *dev;
    qhx_dbuf *buf;             /* one device buffer: the KV cache, then the scratch */
    qhx_kv_cache kv;           /* (L, 2, n_ctx, Hkv hd): rotated keys, then values, per layer */
    int64_t next_pos;          /* position of the next text token: largest position so far + 1 */
    qhx_dbuf next_pos_buf;     /* next_pos as a host region (save/restore) */
    qhx_img_plan plan;         /* the announced prompt with its images (qhx_net_attach) */
    /* scratch for n_batch tokens */
    qhx_dv x, xn, tmp, q, kk, vv, att, mg, mu;
    qhx_dv attw;               /* the device's attention work for n_ctx keys */
    float *cosb, *sinb;        /* host (n_batch, hd / 2) */
    int64_t *pos;              /* (n_batch, 3) positions of the batch */
    const float **src;         /* (n_batch) image rows of the batch, NULL for text */
} vl_state;

static void vl_state_free(void *impl) {
    vl_state *s = impl;
    if (!s) return;
    qhx_img_plan_clear(&s->plan);
    if (s->dev) s->dev->op->buf_free(s->dev, s->buf);
    qhx_aligned_free(s->cosb);
    qhx_free(s->pos);
    qhx_free(s->src);
    qhx_free(s);
}

static qhx_status vl_state_create(qhx_seq *st, qhx_error *err) {
    const qhx_qwen3vl *q = st->m->impl;
    const qhx_device *dev = q->dev;
    qhx_status krc = qhx_kv_check(st->kv_type, q->hd, err);
    if (krc) return krc;
    size_t nb = (size_t)st->n_batch;
    size_t kvw = (size_t)(q->nkv * q->hd), qw = (size_t)(q->nh * q->hd), H = (size_t)q->H, I = (size_t)q->I;
    size_t kv;
    if (!qhx_kv_bytes(st->kv_type, q->L, st->n_ctx, (int64_t)kvw, &kv))
        return qhx_fail(err, QHX_E_LIMIT, "state: a KV cache of %lld tokens is too large", (long long)st->n_ctx);
    const int64_t rep = q->nh / q->nkv;
    const size_t attw = (size_t)dev->op->attn_work(dev, st->n_ctx, q->nkv, rep, q->hd, st->kv_type);
    vl_state *s = qhx_calloc(1, sizeof *s);
    if (!s) return qhx_fail(err, QHX_E_NOMEM, "state: out of memory");
    s->dev = dev;
    /* the cache, then the scratch in 64-byte pieces (counts in floats) */
    qhx_dv *f[] = {&s->x, &s->xn, &s->tmp, &s->q, &s->kk, &s->vv, &s->att, &s->mg, &s->mu, &s->attw};
    size_t n[] = {nb * H, nb * H, nb * H, nb * qw, nb * kvw, nb * kvw, nb * qw, nb * I, nb * I, attw};
    size_t at[sizeof n / sizeof n[0]], total = (kv + 63) & ~(size_t)63;
    for (size_t i = 0; i < sizeof n / sizeof n[0]; i++) {
        at[i] = total;
        total += (n[i] * sizeof(float) + 63) & ~(size_t)63;
    }
    int ok = dev->op->buf_alloc(dev, total, &s->buf, NULL) == QHX_OK;
    s->cosb = qhx_aligned_alloc(nb * (size_t)q->hd * sizeof(float));
    s->pos = qhx_malloc(nb * 3 * sizeof *s->pos);
    s->src = qhx_malloc(nb * sizeof *s->src);
    if (!ok || !s->cosb || !s->pos || !s->src) {
        vl_state_free(s);
        return qhx_fail(err, QHX_E_NOMEM, "state: out of memory (n_ctx %lld, n_batch %lld, %zu bytes of KV cache)",
                        (long long)st->n_ctx, (long long)st->n_batch, kv);
    }
    s->sinb = s->cosb + nb * (size_t)(q->hd / 2);
    s->kv = (qhx_kv_cache){st->kv_type, qhx_dv_of(s->buf, 0), q->L, st->n_ctx, (int64_t)kvw};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) *f[i] = qhx_dv_of(s->buf, at[i]);
    s->next_pos_buf = qhx_dbuf_host(&s->next_pos, sizeof s->next_pos);
    st->impl = s;
    return QHX_OK;
}

static void vl_state_reset(qhx_seq *st) {
    vl_state *s = st->impl;
    qhx_img_plan_clear(&s->plan);
    s->next_pos = 0;
}

/* HF get_rope_index over the images (ops/mrope.h): text tokens advance all three axes
 * together; image k's token (r, c) of its merged (gh, gw) grid sits at (s, s + r, s + c) with s
 * the next text position before it, and the text after it continues at s + max(gh, gw). */
static qhx_status vl_attach(qhx_seq *st, const qhx_image_embed *images, int n_images, const int32_t *ids,
                            int64_t n, qhx_error *err) {
    const qhx_qwen3vl *q = st->m->impl;
    vl_state *s = st->impl;
    if (n_images < 0 || n_images > QHX_MROPE_MAX_IMAGES)
        return qhx_fail(err, QHX_E_ARG, "attach: %d images (at most %d)", n_images, QHX_MROPE_MAX_IMAGES);
    if (n_images && !q->vit) return qhx_fail(err, QHX_E_ARG, "attach: this model has no vision tower");
    qhx_img_view *v = n_images ? qhx_malloc((size_t)n_images * sizeof *v) : NULL;
    if (n_images && !v) return qhx_fail(err, QHX_E_NOMEM, "attach: out of memory");
    for (int k = 0; k < n_images; k++)
        v[k] = (qhx_img_view){images[k].grid_h, images[k].grid_w, images[k].n_tokens, images[k].row_width, images[k].embd,
                                images[k].pad_id};
    const int64_t merge = q->vit ? q->vit->cfg.spatial_merge_size : 1, rw = q->vit ? qhx_vit_row_width(q->vit) : 0;
    qhx_status rc = qhx_img_plan_set(&s->plan, v, n_images, ids, n, (int32_t)q->image_token_id, merge, rw, st->n_past,
                                     s->next_pos, err);
    qhx_free(v);
    return rc;
}

static int64_t vl_attached_positions(const qhx_seq *st, const int64_t **pos) {
    const vl_state *s = st->impl;
    *pos = s->plan.n ? s->plan.pos : NULL;
    return s->plan.n;
}

/* ---- forward ----------------------------------------------------------------------------- */

/* Every op runs on the model's device (devices/device.h); results do not depend on how it
 * splits the work. */

/* The attention op of layer l over the n tokens in s (after the projections). */
static void attn_mix(const qhx_qwen3vl *q, const qhx_seq *st, const vl_state *s, const vl_layer *Ly, int64_t l,
                     int64_t n) {
    const qhx_dattn a = {.kv = &s->kv, .slot = l, .nh = q->nh, .nkv = q->nkv, .hd = q->hd, .rot = q->hd,
                         .norm = QHX_NORM_PLAIN, .q_norm = Ly->q_norm, .k_norm = Ly->k_norm, .eps = q->eps,
                         .scale = 1.0f / sqrtf((float)q->hd), .q = s->q, .k = s->kk, .v = s->vv, .cos = s->cosb,
                         .sin = s->sinb, .gate = {0}, .out = s->att, .work = s->attw, .n_past = st->n_past, .n = n};
    q->dev->op->attention(q->dev, &a);
}

/* Dense attention over n tokens at positions n_past ..: xn (n, H) -> tmp (n, H): plain q/k norms,
 * the full head rotated by M-RoPE, no output gate. */
static void attn_forward(const qhx_qwen3vl *q, const qhx_seq *st, vl_state *s, const vl_layer *Ly, int64_t l,
                         int64_t n) {
    const qhx_device *dev = q->dev;
    const int64_t H = q->H, qw = q->nh * q->hd, kvw = q->nkv * q->hd;
    const qhx_dlin in[3] = {{&Ly->q_proj, s->q, qw}, {&Ly->k_proj, s->kk, kvw}, {&Ly->v_proj, s->vv, kvw}};
    dev->op->linears(dev, in, 3, s->xn, H, n);
    attn_mix(q, st, s, Ly, l, n);
    dev->op->linear(dev, &Ly->o_proj, s->att, qw, s->tmp, H, n);
}

/* The input rows of n tokens (image rows or the embedding lookup) and their M-RoPE angles. */
static void input_rows(const qhx_qwen3vl *q, vl_state *s, const int32_t *ids, int64_t n) {
    const qhx_device *dev = q->dev;
    const int64_t H = q->H, half = q->hd / 2;
    for (int64_t t = 0; t < n; t++) {
        if (s->src[t]) dev->op->set(dev, qhx_dv_f(s->x, t * H), s->src[t], (size_t)H * sizeof(float));
        else dev->op->embed_rows(dev, &q->embed, ids + t, 1, qhx_dv_f(s->x, t * H));
        qhx_rope_angles(s->pos + t * 3, q->axis, q->inv_freq, half, s->cosb + t * half, s->sinb + t * half);
    }
}

/* n <= n_batch tokens through every layer; positions and image rows already in s->pos, s->src. */
static qhx_status run_batch(const qhx_net *m, qhx_seq *st, const int32_t *ids, int64_t n,
                            float *logits, bool all, const qhx_forward_opts *opts, qhx_error *err) {
    const qhx_qwen3vl *q = m->impl;
    const qhx_device *dev = q->dev;
    vl_state *s = st->impl;
    const int64_t H = q->H;
    const int64_t RW = s->plan.row_width, n_ds = RW ? RW / H - 1 : 0;

    input_rows(q, s, ids, n);
    if (opts->layer_cb) qhx_op_rows_cb_call(dev, opts->layer_cb, opts->layer_cb_user, -1, st->n_past, s->x, n, H);
    for (int64_t l = 0; l < q->L; l++) {
        const vl_layer *Ly = &q->layers[l];
        if (opts->abort_cb && opts->abort_cb(opts->abort_cb_user))
            return qhx_fail(err, QHX_E_ABORTED, "forward: aborted at layer %lld", (long long)l);
        dev->op->rmsnorm(dev, QHX_NORM_PLAIN, s->x, Ly->input_norm, s->xn, n, H, q->eps);
        attn_forward(q, st, s, Ly, l, n);
        dev->op->add_rmsnorm(dev, QHX_NORM_PLAIN, s->x, s->tmp, Ly->post_norm, s->xn, n, H, q->eps);
        qhx_op_swiglu_mlp(dev, &Ly->gate_proj, &Ly->up_proj, &Ly->down_proj, s->xn, H, s->mg, s->mu, q->I, s->tmp, n);
        dev->op->add(dev, s->x, s->tmp, n * H);
        /* the layer's output as HF hooks see it: before the DeepStack add */
        if (opts->layer_cb) qhx_op_rows_cb_call(dev, opts->layer_cb, opts->layer_cb_user, l, st->n_past, s->x, n, H);
        for (int64_t t = 0; l < n_ds && t < n; t++)
            if (s->src[t]) {
                qhx_dbuf row = qhx_dbuf_host((void *)(s->src[t] + (1 + l) * H), (size_t)H * sizeof(float));
                dev->op->add(dev, qhx_dv_f(s->x, t * H), qhx_dv_of(&row, 0), H);
            }
    }
    if (logits) {
        qhx_dbuf lb = qhx_dbuf_host(logits, (size_t)((all ? n : 1) * q->V) * sizeof(float));
        qhx_op_lm_head(dev, QHX_NORM_PLAIN, s->x, q->final_norm, q->eps, s->xn, &q->lm_head, qhx_dv_of(&lb, 0), H, q->V,
                       n, all);
    }
    st->n_past += n;
    return QHX_OK;
}

typedef struct vl_steps {
    const qhx_net *m;
    qhx_seq *st;
    const int32_t *ids;
    const qhx_forward_opts *opts;
    bool all;
} vl_steps;

/* One batch: the positions and image rows of its tokens (the announced ones from the plan,
 * text after it at the next text position), then the layers. */
static qhx_status vl_step(void *ctx, int64_t t0, int64_t nt, float *logits, qhx_error *err) {
    const vl_steps *c = ctx;
    qhx_seq *st = c->st;
    vl_state *s = st->impl;
    int64_t next = s->next_pos;
    qhx_img_plan_batch(&s->plan, st->n_past, nt, &next, s->pos, s->src);
    qhx_status rc = run_batch(c->m, st, c->ids + t0, nt, logits, c->all, c->opts, err);
    if (rc == QHX_OK) s->next_pos = next;
    return rc;
}

static qhx_status vl_forward(const qhx_net *m, qhx_seq *st, const int32_t *ids, int64_t n,
                             const qhx_forward_opts *opts, qhx_error *err) {
    vl_state *s = st->impl;
    /* Tokens inside the announced prompt must be the announced ones. Elsewhere every id is text,
     * the image-pad id too (as in HF decoding, which passes no pixels after the prompt). */
    qhx_status crc = qhx_img_plan_check(&s->plan, ids, n, st->n_past, err);
    if (crc) return crc;
    vl_steps c = {m, st, ids, opts, (opts->flags & QHX_FWD_LOGITS_ALL) != 0};
    const int64_t step = (opts->flags & QHX_FWD_SEQUENTIAL) ? 1 : st->n_batch;
    return qhx_op_batches(n, step, m->cfg.vocab_size, opts->logits, c.all, vl_step, &c, err);
}

/* ---- one decode step of several sequences ------------------------------------------------- */

/* Text tokens of nb sequences: every linear layer once for all of them (the device's
 * linears_multi, each row with the single-row bits), attention per sequence over its own cache
 * at its own M-RoPE positions, so each gets the bits of its one-token forward. A token that is
 * an image row of an announced prompt is QHX_E_UNSUPPORTED (the caller feeds them one by one). */

#define VL_MULTI_MAX QHX_DEV_MULTI_MAX

static qhx_status vl_decode_multi(const qhx_net *m, qhx_seq *const *sts, const int32_t *ids, int64_t nb,
                                  float *const *logits, qhx_error *err) {
    if (nb < 1 || nb > VL_MULTI_MAX) return qhx_fail(err, QHX_E_ARG, "decode: %lld sequences, 1 to %d", (long long)nb, VL_MULTI_MAX);
    const qhx_qwen3vl *q = m->impl;
    const qhx_device *dev = q->dev;
    const int64_t H = q->H;
    int64_t next[VL_MULTI_MAX];
    /* positions as vl_step gives them for one token; an image row is refused before anything
       runs (the caller feeds it on its own) */
    for (int64_t b = 0; b < nb; b++) {
        vl_state *s = sts[b]->impl;
        qhx_status rc = qhx_img_plan_check(&s->plan, &ids[b], 1, sts[b]->n_past, err);
        if (rc) return rc;
        next[b] = s->next_pos;
        qhx_img_plan_batch(&s->plan, sts[b]->n_past, 1, &next[b], s->pos, s->src);
        if (s->src[0]) return qhx_fail(err, QHX_E_UNSUPPORTED, "decode: sequence %lld is at an image row", (long long)b);
    }
    qhx_dv ya[VL_MULTI_MAX], yb[VL_MULTI_MAX], yc[VL_MULTI_MAX], xs[VL_MULTI_MAX];
    qhx_dbuf lb[VL_MULTI_MAX];
    for (int64_t b = 0; b < nb; b++) input_rows(q, sts[b]->impl, &ids[b], 1);
    for (int64_t l = 0; l < q->L; l++) {
        const vl_layer *Ly = &q->layers[l];
        for (int64_t b = 0; b < nb; b++) {
            vl_state *s = sts[b]->impl;
            dev->op->rmsnorm(dev, QHX_NORM_PLAIN, s->x, Ly->input_norm, s->xn, 1, H, q->eps);
            xs[b] = s->xn, ya[b] = s->q, yb[b] = s->kk, yc[b] = s->vv;
        }
        const qhx_dlin_multi in[3] = {{&Ly->q_proj, ya}, {&Ly->k_proj, yb}, {&Ly->v_proj, yc}};
        dev->op->linears_multi(dev, in, 3, xs, nb, false);
        for (int64_t b = 0; b < nb; b++) {
            vl_state *s = sts[b]->impl;
            attn_mix(q, sts[b], s, Ly, l, 1);
            xs[b] = s->att, ya[b] = s->tmp;
        }
        const qhx_dlin_multi o = {&Ly->o_proj, ya};
        dev->op->linears_multi(dev, &o, 1, xs, nb, false);
        for (int64_t b = 0; b < nb; b++) {
            vl_state *s = sts[b]->impl;
            dev->op->add_rmsnorm(dev, QHX_NORM_PLAIN, s->x, s->tmp, Ly->post_norm, s->xn, 1, H, q->eps);
            xs[b] = s->xn, ya[b] = s->mg, yb[b] = s->mu;
        }
        const qhx_dlin_multi gu[2] = {{&Ly->gate_proj, ya}, {&Ly->up_proj, yb}};
        dev->op->linears_multi(dev, gu, 2, xs, nb, true);
        for (int64_t b = 0; b < nb; b++) {
            vl_state *s = sts[b]->impl;
            xs[b] = s->mg, ya[b] = s->tmp;
        }
        const qhx_dlin_multi down = {&Ly->down_proj, ya};
        dev->op->linears_multi(dev, &down, 1, xs, nb, false);
        for (int64_t b = 0; b < nb; b++) {
            vl_state *s = sts[b]->impl;
            dev->op->add(dev, s->x, s->tmp, H);
        }
    }
    for (int64_t b = 0; b < nb; b++) {
        vl_state *s = sts[b]->impl;
        dev->op->rmsnorm(dev, QHX_NORM_PLAIN, s->x, q->final_norm, s->xn, 1, H, q->eps);
        lb[b] = qhx_dbuf_host(logits[b], (size_t)q->V * sizeof(float));
        xs[b] = s->xn, ya[b] = qhx_dv_of(&lb[b], 0);
    }
    const qhx_dlin_multi head = {&q->lm_head, ya};
    dev->op->linears_multi(dev, &head, 1, xs, nb, false);
    for (int64_t b = 0; b < nb; b++) {
        vl_state *s = sts[b]->impl;
        sts[b]->n_past++;
        s->next_pos = next[b];
    }
    return QHX_OK;
}

/* The lm-head graph alone: hidden (n, H) rows after the last layer -> logits (n, V). */
static qhx_status vl_lm_head(const qhx_net *m, const float *hidden, int64_t n, float *logits, qhx_error *err) {
    const qhx_qwen3vl *q = m->impl;
    return qhx_op_lm_head_rows(q->dev, QHX_NORM_PLAIN, hidden, q->final_norm, q->eps, &q->lm_head, logits, q->H, q->V, n,
                               err);
}

static qhx_status vl_final_norm(const qhx_net *m, const float *hidden, int64_t n, float *out, qhx_error *err) {
    const qhx_qwen3vl *q = m->impl;
    return qhx_op_final_norm_rows(q->dev, QHX_NORM_PLAIN, hidden, q->final_norm, q->eps, out, q->H, n, err);
}

/* Save/restore: the K and V caches (per layer, one row per position) and the next text
 * position (which runs ahead of n_past after an image). An announced image is not part of it. */
static int vl_state_regions(const qhx_seq *st, qhx_state_region *out, int cap) {
    vl_state *s = st->impl;
    int n = qhx_kv_regions(s->dev, &s->kv, out, cap); /* K then V of each layer */
    if (n < cap) out[n++] = (qhx_state_region){s->dev, qhx_dv_of(&s->next_pos_buf, 0), sizeof s->next_pos, 1, false};
    return n;
}

static const qhx_net_vt VL_VT = {
    .state_regions = vl_state_regions,
    .free_impl = vl_free_impl,
    .state_create = vl_state_create,
    .state_free = vl_state_free,
    .state_reset = vl_state_reset,
    .forward = vl_forward,
    .lm_head = vl_lm_head,
    .final_norm = vl_final_norm,
    .encode_image = vl_encode_image,
    .attach = vl_attach,
    .attached_positions = vl_attached_positions,
    .decode_multi = vl_decode_multi,
};
