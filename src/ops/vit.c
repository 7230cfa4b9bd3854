/* ops/vit: the Qwen3-VL vision tower in float32 (contract in vit.h; spec/qwen3_vl.md §3).
 * Patch rows arrive in merge-window order and stay in it: position embeddings and rotary
 * coordinates are permuted to match, exactly as the reference does. */
#include "ops/vit.h"

#include "core/alloc.h"
#include "kernels/attn.h"
#include "kernels/ref.h"
#include "kernels/vision.h"
#include "ops/par.h"

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
    return qhx_wbind_linear(st, name, rows, cols, &v->kern, &v->owned, out, err);
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
    if (!v->kern.matmul[w->fmt])
        return qhx_fail(err, QHX_E_UNSUPPORTED, "tensor '%s': no kernel for dtype %s", name, qhx_dtype_name(t->dtype));
    if ((uintptr_t)t->data % qhx_dtype_size(t->dtype)) { /* misaligned for its type: copy */
        if (!(v->patch_copy = qhx_aligned_alloc(t->size)))
            return qhx_fail(err, QHX_E_NOMEM, "tensor '%s': out of memory for %zu bytes", name, t->size);
        memcpy(v->patch_copy, t->data, t->size);
        w->data = v->patch_copy;
    }
    return QHX_OK;
}

qhx_status qhx_vit_load(const qhx_st_set *st, const qhx_vit_config *cfg, const char *prefix,
                        const qhx_kernels *k, qhx_vit **out, qhx_error *err) {
    *out = NULL;
    qhx_vit *v = qhx_calloc(1, sizeof *v);
    if (!v) return qhx_fail(err, QHX_E_NOMEM, "vision tower: out of memory");
    v->cfg = *cfg;
    v->kern = *k;
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

typedef struct vit_scratch {
    float *x, *h, *qkv, *att, *mlp, *scores, *cos, *sin, *pe, *g, *g1, *kv;
} vit_scratch;

/* Work is split over the model's pool in pieces fixed by the problem size (ops/par.h):
 * output rows of the linear layers, patch ranges, (patch, head) pairs of attention. */

#define PATCH_CHUNK 16
#define ELEM_CHUNK 4096

typedef struct bias_job {
    float *Y;
    const float *b;
    int64_t ldy, rows;
} bias_job;

static void bias_task(void *ctx, int64_t t0, int64_t t1, int ti) {
    (void)ti;
    const bias_job *j = ctx;
    for (int64_t t = t0; t < t1; t++) qhx_k_add_f32_ref(j->Y + t * j->ldy, j->b, j->rows);
}

/* Y (n, rows) stride ldy = X (n, cols) stride ldx @ W^T + b, through the op table. */
static void linear(const qhx_vit *v, const qhx_weight *w, const float *b, const float *X, int64_t ldx,
                   float *Y, int64_t ldy, int64_t n) {
    qhx_par_linear(v->pool, &v->kern, w, X, ldx, Y, ldy, n);
    bias_job j = {.Y = Y, .b = b, .ldy = ldy, .rows = w->rows};
    qhx_par_range(v->pool, n, PATCH_CHUNK, bias_task, &j);
}

typedef struct act_job {
    const qhx_kernels *k;
    qhx_act a;
    float *x;
} act_job;

static void act_task(void *ctx, int64_t i0, int64_t i1, int ti) {
    (void)ti;
    const act_job *j = ctx;
    float *x = j->x + i0;
    int64_t n = i1 - i0;
    if (j->a == QHX_ACT_GELU_TANH) j->k->gelu_tanh(x, n);
    else if (j->a == QHX_ACT_GELU_ERF) qhx_k_gelu_erf_f32_ref(x, n);
    else
        j->k->silu(x, n);
}

static void act(const qhx_vit *v, qhx_act a, float *x, int64_t n) {
    act_job j = {.k = &v->kern, .a = a, .x = x};
    qhx_par_range(v->pool, n, ELEM_CHUNK, act_task, &j);
}

typedef struct ln_job {
    const float *x, *w, *b;
    float *y;
    int64_t width;
    float eps;
} ln_job;

static void ln_task(void *ctx, int64_t r0, int64_t r1, int ti) {
    (void)ti;
    const ln_job *j = ctx;
    for (int64_t r = r0; r < r1; r++) qhx_k_layernorm_f32_ref(j->x + r * j->width, j->w, j->b, j->y + r * j->width, j->width, j->eps);
}

/* LayerNorm of n rows of `width` */
static void layernorm_rows(const qhx_vit *v, const float *x, const float *w, const float *b, float *y, int64_t n,
                           int64_t width, float eps) {
    ln_job j = {.x = x, .w = w, .b = b, .y = y, .width = width, .eps = eps};
    qhx_par_range(v->pool, n, PATCH_CHUNK, ln_task, &j);
}

/* Merger m over x (N, D) rows in merge-window order -> out rows of stride ldo, G = N / M^2. */
static void merger_forward(const qhx_vit *v, const qhx_vit_merger *m, const float *x, int64_t N,
                           vit_scratch *s, float *out, int64_t ldo) {
    int64_t D = v->cfg.hidden_size, M2 = v->cfg.spatial_merge_size * v->cfg.spatial_merge_size;
    int64_t HM = D * M2, G = N / M2;
    /* Grouping M^2 consecutive rows of (N, D) is a reshape to (G, M^2 D). */
    if (m->postshuffle)
        layernorm_rows(v, x, m->norm_w, m->norm_b, s->g, G, HM, v->cfg.layer_norm_eps);
    else
        layernorm_rows(v, x, m->norm_w, m->norm_b, s->g, N, D, v->cfg.layer_norm_eps);
    linear(v, &m->fc1, m->fc1_b, s->g, HM, s->g1, HM, G);
    act(v, QHX_ACT_GELU_ERF, s->g1, G * HM); /* nn.GELU(): exact, in every merger */
    linear(v, &m->fc2, m->fc2_b, s->g1, HM, out, ldo, G);
}

typedef struct att_job {
    const qhx_kernels *k;
    const float *qkv;
    float *kv, *work, *att;
    int64_t N, D, H, work_floats;
} att_job;

/* Queries of this many consecutive patches go through the kernel together, as the query heads
 * of one GQA group: they share every key and value load, and each keeps its own accumulators,
 * so the result is the same as one patch at a time. */
#define ATT_QUERIES 4

/* patches [p0, p1): q, k and v of each head into kv = [q heads | k heads | v heads], each
 * (H, N, hd) */
static void kv_pack_task(void *ctx, int64_t p0, int64_t p1, int ti) {
    (void)ti;
    const att_job *j = ctx;
    const int64_t D = j->D, H = j->H, N = j->N, hd = D / H;
    for (int64_t p = p0; p < p1; p++)
        for (int64_t part = 0; part < 3; part++)
            for (int64_t h = 0; h < H; h++)
                memcpy(j->kv + ((part * H + h) * N + p) * hd, j->qkv + p * 3 * D + part * D + h * hd,
                       (size_t)hd * sizeof(float));
}

/* pieces: (head, block of ATT_QUERIES patches) pairs; work: att_work_floats per thread */
static void att_task(void *ctx, int64_t i0, int64_t i1, int ti) {
    const att_job *j = ctx;
    const int64_t D = j->D, H = j->H, N = j->N, hd = D / H, n_blk = (N + ATT_QUERIES - 1) / ATT_QUERIES;
    float scale = 1.0f / sqrtf((float)hd);
    float *out = j->work + ti * j->work_floats, *work = out + ATT_QUERIES * hd;
    for (int64_t i = i0; i < i1; i++) {
        int64_t h = i / n_blk, p0 = (i % n_blk) * ATT_QUERIES, nq = N - p0 < ATT_QUERIES ? N - p0 : ATT_QUERIES;
        const float *q = j->kv + (h * N + p0) * hd;
        const float *K = j->kv + (H + h) * N * hd, *V = j->kv + (2 * H + h) * N * hd;
        qhx_attn_group(j->k, q, K, V, hd, N, nq, hd, scale, work, out);
        for (int64_t r = 0; r < nq; r++)
            memcpy(j->att + (p0 + r) * D + h * hd, out + r * hd, (size_t)hd * sizeof(float));
    }
}

/* Scratch floats one thread needs for attention over N patches. */
static int64_t att_work_floats(int64_t N, int64_t hd) {
    return ATT_QUERIES * hd + qhx_attn_group_work(N, ATT_QUERIES, hd);
}

/* Full (non-causal) multi-head attention over the N patches of one image: every query reads
 * all N keys, through the decoder's blocked attention kernel (blocks of QHX_ATTN_BLOCK keys,
 * partial softmaxes combined in block order: HF's softmax up to float rounding, and the same
 * bits whichever thread runs which piece). qkv: (N, 3D) = [q | k | v] with RoPE applied to q
 * and k; att: (N, D); work: (n_threads, att_work_floats). Each head's queries, keys and values
 * are first copied to contiguous rows (kv: 3 N D floats): read in place they sit 3D floats
 * apart, and every query walks all the keys. */
static void attention(const qhx_vit *v, const float *qkv, int64_t N, int64_t D, int64_t H, float *kv, float *work,
                      float *att) {
    att_job j = {.k = &v->kern, .qkv = qkv, .kv = kv, .work = work, .att = att, .N = N, .D = D, .H = H,
                 .work_floats = att_work_floats(N, D / H)};
    qhx_par_range(v->pool, N, PATCH_CHUNK, kv_pack_task, &j);
    qhx_par_range(v->pool, H * ((N + ATT_QUERIES - 1) / ATT_QUERIES), 1, att_task, &j);
}

qhx_status qhx_vit_encode(const qhx_vit *v, const qhx_image_patches *p, float *out, qhx_error *err) {
    const qhx_vit_config *c = &v->cfg;
    int64_t D = c->hidden_size, H = c->num_heads, hd = D / H, I = c->intermediate_size;
    int64_t M = c->spatial_merge_size, M2 = M * M;
    int64_t pdim = c->in_channels * c->temporal_patch_size * c->patch_size * c->patch_size;
    if (!p || !p->data || p->patch_dim != pdim || p->grid_t != 1 || p->grid_h % M || p->grid_w % M ||
        p->n_patches != p->grid_h * p->grid_w || p->n_patches < 1)
        return qhx_fail(err, QHX_E_ARG, "vision: patches do not fit the tower (patch_dim %lld, grid %lldx%lldx%lld; want patch_dim %lld, merge %lld)",
                        p ? (long long)p->patch_dim : 0LL, p ? (long long)p->grid_t : 0LL, p ? (long long)p->grid_h : 0LL,
                        p ? (long long)p->grid_w : 0LL, (long long)pdim, (long long)M);
    int64_t N = p->n_patches, gh = p->grid_h, gw = p->grid_w, G = N / M2, HM = D * M2;
    if (N > 65536) return qhx_fail(err, QHX_E_LIMIT, "vision: %lld patches exceed the cap of 65536", (long long)N);
    vit_scratch s;
    memset(&s, 0, sizeof s);
    size_t fz = sizeof(float);
    s.x = qhx_aligned_alloc((size_t)(N * D) * fz);
    s.h = qhx_aligned_alloc((size_t)(N * D) * fz);
    s.qkv = qhx_aligned_alloc((size_t)(N * 3 * D) * fz);
    s.att = qhx_aligned_alloc((size_t)(N * D) * fz);
    s.mlp = qhx_aligned_alloc((size_t)(N * I) * fz);
    s.kv = qhx_aligned_alloc((size_t)(3 * N * D) * fz);
    s.scores = qhx_aligned_alloc((size_t)qhx_pool_n_threads(v->pool) * (size_t)att_work_floats(N, hd) * fz);
    s.cos = qhx_aligned_alloc((size_t)(N * hd / 2) * fz);
    s.sin = qhx_aligned_alloc((size_t)(N * hd / 2) * fz);
    s.pe = qhx_aligned_alloc((size_t)(N * D) * fz);
    s.g = qhx_aligned_alloc((size_t)(G * HM) * fz);
    s.g1 = qhx_aligned_alloc((size_t)(G * HM) * fz);
    qhx_status rc = QHX_OK;
    if (!s.x || !s.h || !s.qkv || !s.att || !s.mlp || !s.scores || !s.kv || !s.cos || !s.sin || !s.pe || !s.g || !s.g1) {
        rc = qhx_fail(err, QHX_E_NOMEM, "vision: out of memory for %lld patches", (long long)N);
        goto done;
    }
    /* Patch embedding: Conv3d with kernel = stride is a linear map of the flattened patch. */
    linear(v, &v->patch_embed, v->patch_b, p->data, pdim, s.x, D, N);

    /* Learned positions, resampled in row-major (pr, pc) order, added in merge-window order. */
    int64_t side = (int64_t)llround(sqrt((double)c->num_position_embeddings));
    qhx_k_pos_embed_bilinear_f32_ref(v->pos_embed, side, D, gh, gw, s.pe);
    /* 2-D rotary: pair j < hd/4 turns with the patch row, hd/4 <= j < hd/2 with the column;
     * inv_freq[k] = 1 / theta^(2k / (hd/2)) in float32 as the reference's rotary module. */
    int64_t nf = hd / 4;
    float inv_freq[1024];
    if (nf > 1024) { rc = qhx_fail(err, QHX_E_UNSUPPORTED, "vision: head_dim %lld too large", (long long)hd); goto done; }
    for (int64_t k = 0; k < nf; k++) inv_freq[k] = 1.0f / powf(c->rope_theta, (float)(2 * k) / (float)(hd / 2));
    for (int64_t n = 0; n < N; n++) {
        int64_t win = n / M2, in = n % M2;
        int64_t pr = (win / (gw / M)) * M + in / M, pc = (win % (gw / M)) * M + in % M;
        float *xr = s.x + n * D;
        const float *per = s.pe + (pr * gw + pc) * D;
        for (int64_t i = 0; i < D; i++) xr[i] += per[i];
        for (int64_t k = 0; k < nf; k++) {
            float ar = (float)pr * inv_freq[k], ac = (float)pc * inv_freq[k];
            s.cos[n * hd / 2 + k] = cosf(ar);
            s.sin[n * hd / 2 + k] = sinf(ar);
            s.cos[n * hd / 2 + nf + k] = cosf(ac);
            s.sin[n * hd / 2 + nf + k] = sinf(ac);
        }
    }

    int64_t W = qhx_vit_row_width(v), OH = c->out_hidden_size;
    for (int64_t l = 0; l < c->depth; l++) {
        const qhx_vit_block *B = &v->blocks[l];
        layernorm_rows(v, s.x, B->norm1_w, B->norm1_b, s.h, N, D, c->layer_norm_eps);
        linear(v, &B->qkv, B->qkv_b, s.h, D, s.qkv, 3 * D, N);
        for (int64_t n = 0; n < N; n++) {
            const float *cs = s.cos + n * hd / 2, *sn = s.sin + n * hd / 2;
            qhx_k_rope_neox_f32_ref(s.qkv + n * 3 * D, H, hd, hd, cs, sn);     /* q */
            qhx_k_rope_neox_f32_ref(s.qkv + n * 3 * D + D, H, hd, hd, cs, sn); /* k */
        }
        attention(v, s.qkv, N, D, H, s.kv, s.scores, s.att);
        linear(v, &B->proj, B->proj_b, s.att, D, s.h, D, N);
        qhx_k_add_f32_ref(s.x, s.h, N * D);
        layernorm_rows(v, s.x, B->norm2_w, B->norm2_b, s.h, N, D, c->layer_norm_eps);
        linear(v, &B->fc1, B->fc1_b, s.h, D, s.mlp, I, N);
        act(v, c->hidden_act, s.mlp, N * I);
        linear(v, &B->fc2, B->fc2_b, s.mlp, I, s.h, D, N);
        qhx_k_add_f32_ref(s.x, s.h, N * D);
        for (int64_t j = 0; j < c->n_deepstack; j++)
            if (c->deepstack_visual_indexes[j] == l) merger_forward(v, &v->deepstack[j], s.x, N, &s, out + (1 + j) * OH, W);
    }
    merger_forward(v, &v->merger, s.x, N, &s, out, W);
done:
    qhx_aligned_free(s.x);
    qhx_aligned_free(s.h);
    qhx_aligned_free(s.qkv);
    qhx_aligned_free(s.att);
    qhx_aligned_free(s.mlp);
    qhx_aligned_free(s.scores);
    qhx_aligned_free(s.kv);
    qhx_aligned_free(s.cos);
    qhx_aligned_free(s.sin);
    qhx_aligned_free(s.pe);
    qhx_aligned_free(s.g);
    qhx_aligned_free(s.g1);
    return rc;
}
