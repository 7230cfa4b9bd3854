/* ops/blocks.c: the shared decoder pieces (ops/blocks.h). */
#include "ops/blocks.h"

#include "core/alloc.h"
#include "kernels/attn.h"
#include "kernels/ref.h"
#include "kernels/vision.h"
#include "ops/par.h"

#define OPS_TOK_CHUNK 16     /* tokens per piece of the per-token ops */
#define OPS_ELEM_CHUNK 24576 /* elements per piece of the element-wise ops */

static void rmsnorm_row(qhx_norm_kind kind, const float *x, const float *w, float *out, int64_t H, float eps) {
    if (kind == QHX_NORM_ZERO_CENTRED) qhx_k_rmsnorm_zc_f32_ref(x, w, out, H, eps);
    else qhx_k_rmsnorm_f32_ref(x, w, out, H, eps);
}

/* ---- norms and residuals ---------------------------------------------------------------- */

typedef struct norm_job {
    qhx_norm_kind kind;
    float *x;
    const float *x_in, *add, *w;
    float *out;
    int64_t H;
    float eps;
} norm_job;

static void norm_task(void *ctx, int64_t t0, int64_t t1, int ti) {
    (void)ti;
    const norm_job *j = ctx;
    for (int64_t t = t0; t < t1; t++) rmsnorm_row(j->kind, j->x_in + t * j->H, j->w, j->out + t * j->H, j->H, j->eps);
}

static void add_norm_task(void *ctx, int64_t t0, int64_t t1, int ti) {
    (void)ti;
    const norm_job *j = ctx;
    for (int64_t t = t0; t < t1; t++) {
        qhx_k_add_f32_ref(j->x + t * j->H, j->add + t * j->H, j->H);
        rmsnorm_row(j->kind, j->x + t * j->H, j->w, j->out + t * j->H, j->H, j->eps);
    }
}

static void add_task(void *ctx, int64_t i0, int64_t i1, int ti) {
    (void)ti;
    const norm_job *j = ctx;
    qhx_k_add_f32_ref(j->x + i0, j->add + i0, i1 - i0);
}

void qhx_op_rmsnorm_rows(struct qhx_pool *pool, qhx_norm_kind kind, const float *x, const float *w, float *out,
                         int64_t n, int64_t H, float eps) {
    norm_job j = {.kind = kind, .x_in = x, .w = w, .out = out, .H = H, .eps = eps};
    qhx_par_range(pool, n, OPS_TOK_CHUNK, norm_task, &j);
}

void qhx_op_add_rmsnorm_rows(struct qhx_pool *pool, qhx_norm_kind kind, float *x, const float *add, const float *w,
                             float *out, int64_t n, int64_t H, float eps) {
    norm_job j = {.kind = kind, .x = x, .add = add, .w = w, .out = out, .H = H, .eps = eps};
    qhx_par_range(pool, n, OPS_TOK_CHUNK, add_norm_task, &j);
}

void qhx_op_add(struct qhx_pool *pool, float *x, const float *add, int64_t count) {
    norm_job j = {.x = x, .add = add};
    qhx_par_range(pool, count, OPS_ELEM_CHUNK, add_task, &j);
}

/* ---- MLP and head ----------------------------------------------------------------------- */

void qhx_op_swiglu_mlp(struct qhx_pool *pool, const qhx_kernels *k, const qhx_weight *gate, const qhx_weight *up,
                       const qhx_weight *down, const float *xn, int64_t H, float *mg, float *mu, int64_t I,
                       float *out, int64_t n) {
    qhx_par_swiglu(pool, k, gate, up, xn, H, mg, mu, I, n);
    qhx_par_linear(pool, k, down, mg, I, out, H, n);
}

void qhx_op_lm_head(struct qhx_pool *pool, const qhx_kernels *k, qhx_norm_kind kind, const float *x,
                    const float *final_norm, float eps, float *xn, const qhx_weight *head, float *logits,
                    int64_t H, int64_t V, int64_t n, bool all) {
    int64_t t0 = all ? 0 : n - 1, nr = all ? n : 1;
    for (int64_t t = t0; t < n; t++) rmsnorm_row(kind, x + t * H, final_norm, xn + t * H, H, eps);
    qhx_par_linear(pool, k, head, xn + t0 * H, H, logits, V, nr);
}

qhx_status qhx_op_lm_head_rows(struct qhx_pool *pool, const qhx_kernels *k, qhx_norm_kind kind, const float *hidden,
                               const float *final_norm, float eps, const qhx_weight *head, float *logits, int64_t H,
                               int64_t V, int64_t n, qhx_error *err) {
    size_t bytes;
    if (n < 1 || !qhx_size_mul((size_t)n, (size_t)H * sizeof(float), &bytes))
        return qhx_fail(err, QHX_E_LIMIT, "lm_head: %lld rows of %lld values", (long long)n, (long long)H);
    float *xn = qhx_aligned_alloc(bytes);
    if (!xn) return qhx_fail(err, QHX_E_NOMEM, "lm_head: out of memory for %lld rows", (long long)n);
    qhx_op_lm_head(pool, k, kind, hidden, final_norm, eps, xn, head, logits, H, V, n, true);
    qhx_aligned_free(xn);
    return QHX_OK;
}

/* ---- attention -------------------------------------------------------------------------- */

/* tokens [t0, t1): q/k RMSNorm per head, the rotary, then the finished f32 K and V rows into
 * the cache (f16: rounded to nearest even; q8: per block) */
static void attn_prep_task(void *ctx, int64_t t0, int64_t t1, int ti) {
    (void)ti;
    const qhx_op_attn *a = ctx;
    const int64_t hd = a->hd, half = a->rot / 2, qw = a->nh * hd, kvw = a->nkv * hd;
    for (int64_t t = t0; t < t1; t++) {
        float *qt = a->q + t * qw, *kt = a->k + t * kvw;
        for (int64_t h = 0; h < a->nh; h++) rmsnorm_row(a->norm, qt + h * hd, a->q_norm, qt + h * hd, hd, a->eps);
        for (int64_t h = 0; h < a->nkv; h++) rmsnorm_row(a->norm, kt + h * hd, a->k_norm, kt + h * hd, hd, a->eps);
        qhx_k_rope_neox_f32_ref(qt, a->nh, hd, a->rot, a->cos + t * half, a->sin + t * half);
        qhx_k_rope_neox_f32_ref(kt, a->nkv, hd, a->rot, a->cos + t * half, a->sin + t * half);
    }
    qhx_kv_store(a->kern, a->kv, a->slot, 0, a->n_past + t0, a->k + t0 * kvw, t1 - t0);
    qhx_kv_store(a->kern, a->kv, a->slot, 1, a->n_past + t0, a->v + t0 * kvw, t1 - t0);
}

/* prompt: (token, KV head) pairs; token t sees the cache up to and including itself */
static void attn_tok_task(void *ctx, int64_t i0, int64_t i1, int ti) {
    const qhx_op_attn *a = ctx;
    const int64_t hd = a->hd, rep = a->nh / a->nkv, qw = a->nh * hd;
    for (int64_t i = i0; i < i1; i++) {
        int64_t t = i / a->nkv, g = i % a->nkv;
        float *at = a->out + t * qw + g * rep * hd;
        qhx_kv_view kv = qhx_kv_head(a->kv, a->slot, g, hd);
        qhx_attn_group_kv(a->kern, a->q + t * qw + g * rep * hd, &kv, a->n_past + t + 1, rep, hd, a->scale,
                          a->work + ti * a->work_floats, at);
        if (a->gate) qhx_k_mul_sigmoid_f32_ref(at, a->gate + t * qw + g * rep * hd, rep * hd);
    }
}

typedef struct attn_blk_job {
    const qhx_op_attn *a;
    int64_t nb; /* key blocks of this decode step */
} attn_blk_job;

/* decode: (KV head, key block) pairs into the partials */
static void attn_blk_task(void *ctx, int64_t i0, int64_t i1, int ti) {
    const attn_blk_job *j = ctx;
    const qhx_op_attn *a = j->a;
    const int64_t hd = a->hd, rep = a->nh / a->nkv, pf = qhx_attn_part_floats(rep, hd);
    for (int64_t i = i0; i < i1; i++) {
        int64_t g = i / j->nb, b = i % j->nb;
        qhx_kv_view kv = qhx_kv_head(a->kv, a->slot, g, hd);
        qhx_attn_block_kv(a->kern, a->q + g * rep * hd, &kv, a->n_past + 1, b, rep, hd, a->scale,
                          a->work + ti * a->work_floats, a->part + i * pf);
    }
}

void qhx_op_attention(const qhx_op_attn *a) {
    qhx_par_range(a->pool, a->n, OPS_TOK_CHUNK, attn_prep_task, (void *)a);
    if (a->n > 1) {
        qhx_par_range(a->pool, a->n * a->nkv, 1, attn_tok_task, (void *)a);
        return;
    }
    const int64_t hd = a->hd, rep = a->nh / a->nkv, pf = qhx_attn_part_floats(rep, hd);
    attn_blk_job j = {a, qhx_attn_n_blocks(a->n_past + 1)};
    qhx_par_range(a->pool, a->nkv * j.nb, 1, attn_blk_task, &j);
    for (int64_t g = 0; g < a->nkv; g++) {
        float *at = a->out + g * rep * hd;
        qhx_attn_combine(a->part + g * j.nb * pf, j.nb, rep, hd, at);
        if (a->gate) qhx_k_mul_sigmoid_f32_ref(at, a->gate + g * rep * hd, rep * hd);
    }
}

/* ---- the batch loop --------------------------------------------------------------------- */

qhx_status qhx_op_batches(int64_t n, int64_t step, int64_t V, float *logits, bool all, qhx_op_step_fn fn, void *ctx,
                          qhx_error *err) {
    for (int64_t t0 = 0; t0 < n; t0 += step) {
        int64_t nt = n - t0 < step ? n - t0 : step;
        float *lg = NULL;
        if (logits && all) lg = logits + t0 * V;
        else if (logits && t0 + nt == n) lg = logits;
        qhx_status rc = fn(ctx, t0, nt, lg, err);
        if (rc) return rc;
    }
    return QHX_OK;
}
