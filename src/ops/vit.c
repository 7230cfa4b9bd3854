/* ops/vit: the Qwen3-VL vision tower in float32 (contract in vit.h; spec/qwen3_vl.md §3).
 * Patch rows arrive in merge-window order and stay in it: position embeddings and rotary
 * coordinates are permuted to match, exactly as the reference does. */
#include "ops/vit.h"

#include "core/alloc.h"
#include "kernels/vision.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- config ------------------------------------------------------------------- */

qhx_status qhx_vit_config_parse(const json_t *vc, const char *label, qhx_vit_config *c,
                                qhx_error *err) {
    memset(c, 0, sizeof *c);
    const char *p = "vision_config";
    const int64_t big = 1 << 20;
    qhx_status rc;
    if (!json_is_object(vc)) return qhx_fail(err, QHX_E_FORMAT, "%s: vision_config: expected an object", label);
#define GETI(key, lo, hi, dst, req) \
    if ((rc = qhx_json_get_int(vc, key, label, p, req, lo, hi, dst, err))) return rc
    GETI("depth", 1, QHX_VIT_MAX_DEPTH, &c->depth, true);
    GETI("hidden_size", 1, big, &c->hidden_size, true);
    GETI("num_heads", 1, 4096, &c->num_heads, true);
    GETI("intermediate_size", 1, big, &c->intermediate_size, true);
    c->in_channels = 3;
    GETI("in_channels", 3, 3, &c->in_channels, false);
    GETI("patch_size", 1, 1024, &c->patch_size, true);
    c->temporal_patch_size = 2;
    GETI("temporal_patch_size", 1, 64, &c->temporal_patch_size, false);
    c->spatial_merge_size = 2;
    GETI("spatial_merge_size", 1, 64, &c->spatial_merge_size, false);
    GETI("out_hidden_size", 1, big, &c->out_hidden_size, true);
    GETI("num_position_embeddings", 1, big, &c->num_position_embeddings, true);
#undef GETI
    if (c->hidden_size % c->num_heads || (c->hidden_size / c->num_heads) % 4)
        return qhx_fail(err, QHX_E_FORMAT, "%s: vision_config: hidden_size %lld / num_heads %lld must be a multiple of 4",
                        label, (long long)c->hidden_size, (long long)c->num_heads);
    int64_t side = (int64_t)llround(sqrt((double)c->num_position_embeddings));
    if (side * side != c->num_position_embeddings)
        return qhx_fail(err, QHX_E_FORMAT, "%s: vision_config.num_position_embeddings: %lld is not a square",
                        label, (long long)c->num_position_embeddings);
    const char *act = "gelu_pytorch_tanh";
    if ((rc = qhx_json_get_str(vc, "hidden_act", label, p, false, &act, err))) return rc;
    if (!strcmp(act, "gelu_pytorch_tanh") || !strcmp(act, "gelu_new") || !strcmp(act, "gelu_fast"))
        c->hidden_act = QHX_ACT_GELU_TANH;
    else if (!strcmp(act, "gelu"))
        c->hidden_act = QHX_ACT_GELU_ERF;
    else if (!strcmp(act, "silu"))
        c->hidden_act = QHX_ACT_SILU;
    else
        return qhx_fail(err, QHX_E_UNSUPPORTED, "%s: vision_config.hidden_act: '%s' is not supported", label, act);
    json_t *ds = json_object_get(vc, "deepstack_visual_indexes");
    if (ds) {
        if (!json_is_array(ds) || json_array_size(ds) > QHX_VIT_MAX_DEEPSTACK)
            return qhx_fail(err, QHX_E_FORMAT, "%s: vision_config.deepstack_visual_indexes: expected a list of at most %d block indexes",
                            label, QHX_VIT_MAX_DEEPSTACK);
        for (size_t i = 0; i < json_array_size(ds); i++) {
            json_t *v = json_array_get(ds, i);
            if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= c->depth)
                return qhx_fail(err, QHX_E_FORMAT, "%s: vision_config.deepstack_visual_indexes[%zu]: expected a block index below %lld",
                                label, i, (long long)c->depth);
            c->deepstack_visual_indexes[c->n_deepstack++] = json_integer_value(v);
        }
    }
    c->layer_norm_eps = 1e-6f;
    c->rope_theta = 10000.0f;
    return QHX_OK;
}

/* ---- loading ------------------------------------------------------------------- */

void qhx_vit_free(qhx_vit *v) {
    if (!v) return;
    qhx_wowned_free(&v->owned);
    qhx_aligned_free(v->patch_copy);
    qhx_free(v->blocks);
    qhx_free(v);
}

/* A vector of n floats as a float32 copy owned by v. */
static qhx_status vec(qhx_vit *v, const qhx_st_set *st, const char *name, int64_t n, float **out, qhx_error *err) {
    return qhx_wload_f32(st, name, 1, &n, &v->owned, out, NULL, err);
}

static qhx_status lin(qhx_vit *v, const qhx_st_set *st, const char *name, int64_t rows, int64_t cols,
                      qhx_weight *out, qhx_error *err) {
    return qhx_wbind_linear(st, name, rows, cols, v->dev, &v->owned, out, err);
}

static qhx_status load_merger(qhx_vit *v, const qhx_st_set *st, const char *base, int postshuffle,
                              qhx_vit_merger *m, qhx_error *err) {
    const qhx_vit_config *c = &v->cfg;
    char name[512];
    int64_t D = c->hidden_size, M2 = c->spatial_merge_size * c->spatial_merge_size, HM = D * M2;
    qhx_status rc;
    m->postshuffle = postshuffle;
    m->norm_dim = postshuffle ? HM : D;
#define NAME(suffix) (snprintf(name, sizeof name, "%s%s", base, suffix), name)
    if ((rc = vec(v, st, NAME("norm.weight"), m->norm_dim, &m->norm_w, err))) return rc;
    if ((rc = vec(v, st, NAME("norm.bias"), m->norm_dim, &m->norm_b, err))) return rc;
    if ((rc = lin(v, st, NAME("linear_fc1.weight"), HM, HM, &m->fc1, err))) return rc;
    if ((rc = vec(v, st, NAME("linear_fc1.bias"), HM, &m->fc1_b, err))) return rc;
    if ((rc = lin(v, st, NAME("linear_fc2.weight"), c->out_hidden_size, HM, &m->fc2, err))) return rc;
    if ((rc = vec(v, st, NAME("linear_fc2.bias"), c->out_hidden_size, &m->fc2_b, err))) return rc;
#undef NAME
    return QHX_OK;
}

/* The Conv3d kernel [hidden, C, Tp, P, P] viewed as the (hidden, C Tp P P) matrix of the
 * equivalent linear map (row-major flattening of the last four dims). */
static qhx_status patch_weight(qhx_vit *v, const qhx_st_set *st, const char *name, qhx_error *err) {
    const qhx_vit_config *c = &v->cfg;
    int64_t shape[5] = {c->hidden_size, c->in_channels, c->temporal_patch_size, c->patch_size, c->patch_size};
    const qhx_st_tensor *t;
    qhx_status rc = qhx_st_get(st, name, QHX_DT_FLOATS, 5, shape, &t, err);
    if (rc == QHX_OK) rc = qhx_wcheck_finite(st, t, name, err);
    if (rc) return rc;
    qhx_weight *w = &v->patch_embed;
    w->fmt = t->dtype == QHX_DTYPE_F32 ? QHX_W_F32 : t->dtype == QHX_DTYPE_F16 ? QHX_W_F16 : QHX_W_BF16;
    w->rows = shape[0];
    w->cols = shape[1] * shape[2] * shape[3] * shape[4];
    w->data = t->data;
    if (!v->dev->op->supports(v->dev, w->fmt))
        return qhx_fail(err, QHX_E_UNSUPPORTED, "tensor '%s': no kernel for dtype %s", name, qhx_dtype_name(t->dtype));
    if ((uintptr_t)t->data % qhx_dtype_size(t->dtype)) { /* misaligned for its type: copy */
        if (!(v->patch_copy = qhx_aligned_alloc(t->size)))
            return qhx_fail(err, QHX_E_NOMEM, "tensor '%s': out of memory for %zu bytes", name, t->size);
        memcpy(v->patch_copy, t->data, t->size);
        w->data = v->patch_copy;
    }
    return v->dev->op->weight_prepare(v->dev, w, err);
}

qhx_status qhx_vit_load(const qhx_st_set *st, const qhx_vit_config *cfg, const char *prefix,
                        const qhx_device *d, qhx_vit **out, qhx_error *err) {
    *out = NULL;
    qhx_vit *v = qhx_calloc(1, sizeof *v);
    if (!v) return qhx_fail(err, QHX_E_NOMEM, "vision tower: out of memory");
    v->cfg = *cfg;
    v->dev = d;
    const qhx_vit_config *c = cfg;
    int64_t D = c->hidden_size, I = c->intermediate_size;
    char name[512];
    qhx_status rc;
    int64_t pe_shape[2] = {c->num_position_embeddings, D};
#define NAME(...) (snprintf(name, sizeof name, __VA_ARGS__), name)
    if ((rc = patch_weight(v, st, NAME("%spatch_embed.proj.weight", prefix), err))) goto fail;
    if ((rc = vec(v, st, NAME("%spatch_embed.proj.bias", prefix), D, &v->patch_b, err))) goto fail;
    if ((rc = qhx_wload_f32(st, NAME("%spos_embed.weight", prefix), 2, pe_shape, &v->owned, &v->pos_embed, NULL, err))) goto fail;
    v->blocks = qhx_calloc((size_t)c->depth, sizeof *v->blocks);
    if (!v->blocks) { rc = qhx_fail(err, QHX_E_NOMEM, "vision tower: out of memory"); goto fail; }
    for (int64_t l = 0; l < c->depth; l++) {
        qhx_vit_block *B = &v->blocks[l];
        const char *pf = prefix;
        long long li = (long long)l;
        if ((rc = vec(v, st, NAME("%sblocks.%lld.norm1.weight", pf, li), D, &B->norm1_w, err))) goto fail;
        if ((rc = vec(v, st, NAME("%sblocks.%lld.norm1.bias", pf, li), D, &B->norm1_b, err))) goto fail;
        if ((rc = vec(v, st, NAME("%sblocks.%lld.norm2.weight", pf, li), D, &B->norm2_w, err))) goto fail;
        if ((rc = vec(v, st, NAME("%sblocks.%lld.norm2.bias", pf, li), D, &B->norm2_b, err))) goto fail;
        if ((rc = lin(v, st, NAME("%sblocks.%lld.attn.qkv.weight", pf, li), 3 * D, D, &B->qkv, err))) goto fail;
        if ((rc = vec(v, st, NAME("%sblocks.%lld.attn.qkv.bias", pf, li), 3 * D, &B->qkv_b, err))) goto fail;
        if ((rc = lin(v, st, NAME("%sblocks.%lld.attn.proj.weight", pf, li), D, D, &B->proj, err))) goto fail;
        if ((rc = vec(v, st, NAME("%sblocks.%lld.attn.proj.bias", pf, li), D, &B->proj_b, err))) goto fail;
        if ((rc = lin(v, st, NAME("%sblocks.%lld.mlp.linear_fc1.weight", pf, li), I, D, &B->fc1, err))) goto fail;
        if ((rc = vec(v, st, NAME("%sblocks.%lld.mlp.linear_fc1.bias", pf, li), I, &B->fc1_b, err))) goto fail;
        if ((rc = lin(v, st, NAME("%sblocks.%lld.mlp.linear_fc2.weight", pf, li), D, I, &B->fc2, err))) goto fail;
        if ((rc = vec(v, st, NAME("%sblocks.%lld.mlp.linear_fc2.bias", pf, li), D, &B->fc2_b, err))) goto fail;
    }
    char base[400];
    snprintf(base, sizeof base, "%smerger.", prefix);
    if ((rc = load_merger(v, st, base, 0, &v->merger, err))) goto fail;
    for (int64_t j = 0; j < c->n_deepstack; j++) {
        snprintf(base, sizeof base, "%sdeepstack_merger_list.%lld.", prefix, (long long)j);
        if ((rc = load_merger(v, st, base, 1, &v->deepstack[j], err))) goto fail;
    }
#undef NAME
    *out = v;
    return QHX_OK;
fail:
    qhx_vit_free(v);
    return rc;
}

int64_t qhx_vit_row_width(const qhx_vit *v) { return v->cfg.out_hidden_size * (1 + v->cfg.n_deepstack); }

/* ---- forward -------------------------------------------------------------------- */

/* The scratch of one image, carved from one device buffer. */
typedef struct vit_scratch {
    qhx_dv x, h, qkv, att, mlp, work, kv, g, g1;
} vit_scratch;

/* Y (n, rows) stride ldy = X (n, cols) stride ldx @ W^T + b. */
static void linear(const qhx_vit *v, const qhx_weight *w, const float *b, qhx_dv X, int64_t ldx, qhx_dv Y,
                   int64_t ldy, int64_t n) {
    const qhx_device *d = v->dev;
    d->op->linear(d, w, X, ldx, Y, ldy, n);
    d->op->bias_rows(d, Y, ldy, b, w->rows, n);
}

/* Merger m over x (N, D) rows in merge-window order -> out rows of stride ldo, G = N / M^2. */
static void merger_forward(const qhx_vit *v, const qhx_vit_merger *m, qhx_dv x, int64_t N, const vit_scratch *s,
                           qhx_dv out, int64_t ldo) {
    const qhx_device *d = v->dev;
    int64_t D = v->cfg.hidden_size, M2 = v->cfg.spatial_merge_size * v->cfg.spatial_merge_size;
    int64_t HM = D * M2, G = N / M2;
    /* Grouping M^2 consecutive rows of (N, D) is a reshape to (G, M^2 D). */
    if (m->postshuffle)
        d->op->layernorm(d, x, m->norm_w, m->norm_b, s->g, G, HM, v->cfg.layer_norm_eps);
    else
        d->op->layernorm(d, x, m->norm_w, m->norm_b, s->g, N, D, v->cfg.layer_norm_eps);
    linear(v, &m->fc1, m->fc1_b, s->g, HM, s->g1, HM, G);
    d->op->act(d, QHX_ACT_GELU_ERF, s->g1, G * HM); /* nn.GELU(): exact, in every merger */
    linear(v, &m->fc2, m->fc2_b, s->g1, HM, out, ldo, G);
}

/* Learned positions resampled in row-major (pr, pc) order, permuted into merge-window order
 * (pe_win, N x D), and the 2-D rotary of each patch (cos / sin, N x hd / 2): pair k < hd/4
 * turns with the patch row, hd/4 <= k < hd/2 with the column, inv_freq[k] = 1 / theta^(2k /
 * (hd/2)) in float32 as the reference's rotary module. Host arrays. */
static void positions(const qhx_vit *v, int64_t gh, int64_t gw, const float *pe, float *pe_win, float *cs, float *sn) {
    const qhx_vit_config *c = &v->cfg;
    const int64_t D = c->hidden_size, hd = D / c->num_heads, M = c->spatial_merge_size, M2 = M * M, nf = hd / 4;
    float inv_freq[1024];
    for (int64_t k = 0; k < nf; k++) inv_freq[k] = 1.0f / powf(c->rope_theta, (float)(2 * k) / (float)(hd / 2));
    for (int64_t n = 0; n < gh * gw; n++) {
        int64_t win = n / M2, in = n % M2;
        int64_t pr = (win / (gw / M)) * M + in / M, pc = (win % (gw / M)) * M + in % M;
        memcpy(pe_win + n * D, pe + (pr * gw + pc) * D, (size_t)D * sizeof(float));
        for (int64_t k = 0; k < nf; k++) {
            float ar = (float)pr * inv_freq[k], ac = (float)pc * inv_freq[k];
            cs[n * hd / 2 + k] = cosf(ar);
            sn[n * hd / 2 + k] = sinf(ar);
            cs[n * hd / 2 + nf + k] = cosf(ac);
            sn[n * hd / 2 + nf + k] = sinf(ac);
        }
    }
}

/* Carve the scratch of N patches from one buffer of d (64-byte aligned pieces). */
static qhx_status scratch_alloc(const qhx_vit *v, int64_t N, qhx_dbuf **buf, vit_scratch *s, qhx_error *err) {
    const qhx_vit_config *c = &v->cfg;
    const qhx_device *d = v->dev;
    const int64_t D = c->hidden_size, I = c->intermediate_size, M2 = c->spatial_merge_size * c->spatial_merge_size;
    const int64_t G = N / M2, HM = D * M2;
    int64_t n[9] = {N * D, N * D, N * 3 * D, N * D, N * I, d->op->vit_attn_work(d, N, D, c->num_heads), 3 * N * D,
                    G * HM, G * HM};
    qhx_dv *f[9] = {&s->x, &s->h, &s->qkv, &s->att, &s->mlp, &s->work, &s->kv, &s->g, &s->g1};
    size_t at[9], total = 0;
    for (int i = 0; i < 9; i++) {
        at[i] = total;
        total += ((size_t)n[i] * sizeof(float) + 63) & ~(size_t)63;
    }
    if (d->op->buf_alloc(d, total, buf, NULL))
        return qhx_fail(err, QHX_E_NOMEM, "vision: out of memory for %lld patches", (long long)N);
    for (int i = 0; i < 9; i++) *f[i] = qhx_dv_of(*buf, at[i]);
    return QHX_OK;
}

/* The blocks of the tower over x (N, D), the DeepStack mergers at their layers into out. */
static void blocks_forward(const qhx_vit *v, const vit_scratch *s, int64_t N, const float *cs, const float *sn,
                           qhx_dv out, int64_t W) {
    const qhx_vit_config *c = &v->cfg;
    const qhx_device *d = v->dev;
    const int64_t D = c->hidden_size, H = c->num_heads, hd = D / H, I = c->intermediate_size;
    for (int64_t l = 0; l < c->depth; l++) {
        const qhx_vit_block *B = &v->blocks[l];
        d->op->layernorm(d, s->x, B->norm1_w, B->norm1_b, s->h, N, D, c->layer_norm_eps);
        linear(v, &B->qkv, B->qkv_b, s->h, D, s->qkv, 3 * D, N);
        d->op->rope_rows(d, s->qkv, 3 * D, N, H, hd, cs, sn);             /* q */
        d->op->rope_rows(d, qhx_dv_f(s->qkv, D), 3 * D, N, H, hd, cs, sn); /* k */
        d->op->vit_attention(d, s->qkv, N, D, H, s->kv, s->work, s->att);
        linear(v, &B->proj, B->proj_b, s->att, D, s->h, D, N);
        d->op->add(d, s->x, s->h, N * D);
        d->op->layernorm(d, s->x, B->norm2_w, B->norm2_b, s->h, N, D, c->layer_norm_eps);
        linear(v, &B->fc1, B->fc1_b, s->h, D, s->mlp, I, N);
        d->op->act(d, c->hidden_act, s->mlp, N * I);
        linear(v, &B->fc2, B->fc2_b, s->mlp, I, s->h, D, N);
        d->op->add(d, s->x, s->h, N * D);
        for (int64_t j = 0; j < c->n_deepstack; j++)
            if (c->deepstack_visual_indexes[j] == l)
                merger_forward(v, &v->deepstack[j], s->x, N, s, qhx_dv_f(out, (1 + j) * c->out_hidden_size), W);
    }
}

qhx_status qhx_vit_encode(const qhx_vit *v, const qhx_image_patches *p, float *out, qhx_error *err) {
    const qhx_vit_config *c = &v->cfg;
    const qhx_device *d = v->dev;
    int64_t D = c->hidden_size, H = c->num_heads, hd = D / H;
    int64_t M = c->spatial_merge_size, M2 = M * M;
    int64_t pdim = c->in_channels * c->temporal_patch_size * c->patch_size * c->patch_size;
    if (!p || !p->data || p->patch_dim != pdim || p->grid_t != 1 || p->grid_h % M || p->grid_w % M ||
        p->n_patches != p->grid_h * p->grid_w || p->n_patches < 1)
        return qhx_fail(err, QHX_E_ARG, "vision: patches do not fit the tower (patch_dim %lld, grid %lldx%lldx%lld; want patch_dim %lld, merge %lld)",
                        p ? (long long)p->patch_dim : 0LL, p ? (long long)p->grid_t : 0LL, p ? (long long)p->grid_h : 0LL,
                        p ? (long long)p->grid_w : 0LL, (long long)pdim, (long long)M);
    int64_t N = p->n_patches, gh = p->grid_h, gw = p->grid_w, G = N / M2;
    if (N > 65536) return qhx_fail(err, QHX_E_LIMIT, "vision: %lld patches exceed the cap of 65536", (long long)N);
    if (hd / 4 > 1024) return qhx_fail(err, QHX_E_UNSUPPORTED, "vision: head_dim %lld too large", (long long)hd);
    const size_t fz = sizeof(float);
    float *pe = qhx_aligned_alloc((size_t)(N * D) * fz), *pe_win = qhx_aligned_alloc((size_t)(N * D) * fz);
    float *cs = qhx_aligned_alloc((size_t)(N * hd / 2) * fz), *sn = qhx_aligned_alloc((size_t)(N * hd / 2) * fz);
    qhx_dbuf *buf = NULL;
    vit_scratch s;
    qhx_status rc = QHX_OK;
    if (!pe || !pe_win || !cs || !sn) {
        rc = qhx_fail(err, QHX_E_NOMEM, "vision: out of memory for %lld patches", (long long)N);
        goto done;
    }
    if ((rc = scratch_alloc(v, N, &buf, &s, err))) goto done;
    const int64_t W = qhx_vit_row_width(v);
    qhx_dbuf in = qhx_dbuf_host((void *)p->data, (size_t)(N * pdim) * fz), ob = qhx_dbuf_host(out, (size_t)(G * W) * fz);
    qhx_dbuf peb = qhx_dbuf_host(pe_win, (size_t)(N * D) * fz);
    /* Patch embedding: Conv3d with kernel = stride is a linear map of the flattened patch. */
    linear(v, &v->patch_embed, v->patch_b, qhx_dv_of(&in, 0), pdim, s.x, D, N);
    int64_t side = (int64_t)llround(sqrt((double)c->num_position_embeddings));
    qhx_k_pos_embed_bilinear_f32_ref(v->pos_embed, side, D, gh, gw, pe);
    positions(v, gh, gw, pe, pe_win, cs, sn);
    d->op->add(d, s.x, qhx_dv_of(&peb, 0), N * D);
    blocks_forward(v, &s, N, cs, sn, qhx_dv_of(&ob, 0), W);
    merger_forward(v, &v->merger, s.x, N, &s, qhx_dv_of(&ob, 0), W);
done:
    d->op->buf_free(d, buf);
    qhx_aligned_free(pe);
    qhx_aligned_free(pe_win);
    qhx_aligned_free(cs);
    qhx_aligned_free(sn);
    return rc;
}
