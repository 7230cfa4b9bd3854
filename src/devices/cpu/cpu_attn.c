/* devices/cpu/cpu_attn.c: attention over the KV cache on the CPU device (device.h qhx_dattn):
 * the q/k norms and the rotary per token, the K and V rows stored in the cache's type, then
 * (token, KV head) pairs for a prompt, (KV head, key block) partials combined in block order
 * for one token. Work: per-thread tiles (qhx_attn_group_kv_work for n_ctx keys), then the
 * decode partials. */
#include "devices/cpu/cpu_impl.h"

#include "kernels/ref.h"

#include <math.h>
#include <string.h>

/* ---- the cache's rows ---- */

/* Byte offset of row pos of layer's K (which 0) or V (1). */
static size_t row_offset(const qhx_kv_cache *c, int64_t layer, int which, int64_t pos) {
    return (((size_t)layer * 2 + (size_t)which) * (size_t)c->n_ctx + (size_t)pos) * qhx_kv_row_bytes(c->type, c->width);
}

static char *kv_base(const qhx_kv_cache *c) { return (char *)cpu_p(c->at); }

/* One row of width values as q8: per block of QHX_KV_Q8_BLOCK, scale = max |x| / 127 and
 * q = round(x / scale) (halves away from zero, as llama.cpp's q8_0), computed as x * (127 / max). */
static void quantize_row_q8(const float *x, int64_t width, char *row) {
    float *d = (float *)(void *)row;
    int8_t *q = (int8_t *)(row + (width / QHX_KV_Q8_BLOCK) * (int64_t)sizeof(float));
    for (int64_t b = 0; b < width / QHX_KV_Q8_BLOCK; b++) {
        const float *xb = x + b * QHX_KV_Q8_BLOCK;
        float amax = 0.0f;
        for (int j = 0; j < QHX_KV_Q8_BLOCK; j++) amax = fabsf(xb[j]) > amax ? fabsf(xb[j]) : amax;
        const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
        d[b] = amax / 127.0f;
        for (int j = 0; j < QHX_KV_Q8_BLOCK; j++) q[b * QHX_KV_Q8_BLOCK + j] = (int8_t)roundf(xb[j] * id);
    }
}

/* Rows [pos, pos + n) of layer's keys (which 0) or values (1) from src (n, width) f32. */
static void kv_store(const qhx_kernels *k, const qhx_kv_cache *c, int64_t layer, int which, int64_t pos,
                     const float *src, int64_t n) {
    char *dst = kv_base(c) + row_offset(c, layer, which, pos);
    const size_t count = (size_t)(n * c->width);
    switch (c->type) {
    case QHX_KV_F16: k->f32_to_f16(src, (uint16_t *)(void *)dst, (int64_t)count); break;
    case QHX_KV_Q8:
        for (int64_t t = 0; t < n; t++)
            quantize_row_q8(src + t * c->width, c->width, dst + (size_t)t * qhx_kv_row_bytes(c->type, c->width));
        break;
    default: memcpy(dst, src, count * sizeof(float)); break;
    }
}

/* KV head g (head_dim hd) of a layer, for the attention kernels. */
static qhx_kv_view kv_head(const qhx_kv_cache *c, int64_t layer, int64_t g, int64_t hd) {
    const char *K = kv_base(c) + row_offset(c, layer, 0, 0);
    const char *V = kv_base(c) + row_offset(c, layer, 1, 0);
    if (c->type == QHX_KV_Q8) {
        const int64_t n_scales = c->width / QHX_KV_Q8_BLOCK;
        return (qhx_kv_view){K, V, (int64_t)qhx_kv_row_bytes(c->type, c->width), QHX_KV_Q8,
                             (g * hd / QHX_KV_Q8_BLOCK) * (int64_t)sizeof(float),
                             n_scales * (int64_t)sizeof(float) + g * hd};
    }
    const size_t off = (size_t)(g * hd) * (c->type == QHX_KV_F16 ? 2 : 4);
    return (qhx_kv_view){K + off, V + off, c->width, c->type, 0, 0};
}

/* ---- attention ---- */

typedef struct attn_job {
    const qhx_kernels *k;
    const qhx_dattn *a;
    float *q, *kk, *v, *gate, *out, *work, *part;
    int64_t work_floats;
    int64_t nb; /* key blocks of a decode step */
} attn_job;

int64_t qhx_cpu_attn_work(const qhx_device *d, int64_t n_ctx, int64_t nkv, int64_t rep, int64_t hd, qhx_kv_type t) {
    const int64_t nthr = qhx_pool_n_threads(cpu_of(d)->pool);
    int64_t w = nthr * qhx_attn_group_kv_work(n_ctx, rep, hd, t);
    w = (w + 15) & ~(int64_t)15;
    return w + nkv * qhx_attn_n_blocks(n_ctx) * qhx_attn_part_floats(rep, hd);
}

/* tokens [t0, t1): q/k RMSNorm per head, the rotary, then the finished f32 K and V rows into
 * the cache (f16: rounded to nearest even; q8: per block) */
static void attn_prep_task(void *ctx, int64_t t0, int64_t t1, int ti) {
    (void)ti;
    const attn_job *j = ctx;
    const qhx_dattn *a = j->a;
    const int64_t hd = a->hd, half = a->rot / 2, qw = a->nh * hd, kvw = a->nkv * hd;
    for (int64_t t = t0; t < t1; t++) {
        float *qt = j->q + t * qw, *kt = j->kk + t * kvw;
        for (int64_t h = 0; h < a->nh; h++) qhx_cpu_rmsnorm_row(a->norm, qt + h * hd, a->q_norm, qt + h * hd, hd, a->eps);
        for (int64_t h = 0; h < a->nkv; h++) qhx_cpu_rmsnorm_row(a->norm, kt + h * hd, a->k_norm, kt + h * hd, hd, a->eps);
        qhx_k_rope_neox_f32_ref(qt, a->nh, hd, a->rot, a->cos + t * half, a->sin + t * half);
        qhx_k_rope_neox_f32_ref(kt, a->nkv, hd, a->rot, a->cos + t * half, a->sin + t * half);
    }
    kv_store(j->k, a->kv, a->slot, 0, a->n_past + t0, j->kk + t0 * kvw, t1 - t0);
    kv_store(j->k, a->kv, a->slot, 1, a->n_past + t0, j->v + t0 * kvw, t1 - t0);
}

/* prompt: (token, KV head) pairs; token t sees the cache up to and including itself */
static void attn_tok_task(void *ctx, int64_t i0, int64_t i1, int ti) {
    const attn_job *j = ctx;
    const qhx_dattn *a = j->a;
    const int64_t hd = a->hd, rep = a->nh / a->nkv, qw = a->nh * hd;
    for (int64_t i = i0; i < i1; i++) {
        int64_t t = i / a->nkv, g = i % a->nkv;
        float *at = j->out + t * qw + g * rep * hd;
        qhx_kv_view kv = kv_head(a->kv, a->slot, g, hd);
        qhx_attn_group_kv(j->k, j->q + t * qw + g * rep * hd, &kv, a->n_past + t + 1, rep, hd, a->scale,
                          j->work + ti * j->work_floats, at);
        if (j->gate) qhx_k_mul_sigmoid_f32_ref(at, j->gate + t * qw + g * rep * hd, rep * hd);
    }
}

/* decode: (KV head, key block) pairs into the partials */
static void attn_blk_task(void *ctx, int64_t i0, int64_t i1, int ti) {
    const attn_job *j = ctx;
    const qhx_dattn *a = j->a;
    const int64_t hd = a->hd, rep = a->nh / a->nkv, pf = qhx_attn_part_floats(rep, hd);
    for (int64_t i = i0; i < i1; i++) {
        int64_t g = i / j->nb, b = i % j->nb;
        qhx_kv_view kv = kv_head(a->kv, a->slot, g, hd);
        qhx_attn_block_kv(j->k, j->q + g * rep * hd, &kv, a->n_past + 1, b, rep, hd, a->scale,
                          j->work + ti * j->work_floats, j->part + i * pf);
    }
}

void qhx_cpu_attention(const qhx_device *d, const qhx_dattn *a) {
    const cpu_dev *c = cpu_of(d);
    const int64_t hd = a->hd, rep = a->nh / a->nkv, pf = qhx_attn_part_floats(rep, hd);
    const int64_t wf = qhx_attn_group_kv_work(a->kv->n_ctx, rep, hd, a->kv->type);
    int64_t parts_at = qhx_pool_n_threads(c->pool) * wf;
    parts_at = (parts_at + 15) & ~(int64_t)15;
    attn_job j = {.k = &c->kern, .a = a, .q = cpu_f(a->q), .kk = cpu_f(a->k), .v = cpu_f(a->v),
                  .gate = cpu_f(a->gate), .out = cpu_f(a->out), .work = cpu_f(a->work),
                  .part = cpu_f(a->work) + parts_at, .work_floats = wf};
    qhx_par_range(c->pool, a->n, CPU_TOK_CHUNK, attn_prep_task, &j);
    if (a->n > 1) {
        qhx_par_range(c->pool, a->n * a->nkv, 1, attn_tok_task, &j);
        return;
    }
    j.nb = qhx_attn_n_blocks(a->n_past + 1);
    qhx_par_range(c->pool, a->nkv * j.nb, 1, attn_blk_task, &j);
    for (int64_t g = 0; g < a->nkv; g++) {
        float *at = j.out + g * rep * hd;
        qhx_attn_combine(j.part + g * j.nb * pf, j.nb, rep, hd, at);
        if (j.gate) qhx_k_mul_sigmoid_f32_ref(at, j.gate + g * rep * hd, rep * hd);
    }
}
