/* devices/cpu/cpu_vit.c: the vision tower's ops on the CPU device: bias rows, activations,
 * LayerNorm, the 2-D rotary and full attention over one image's patches. Pieces: patch ranges
 * of 16, element ranges of 4096, (head, block of 4 patches) pairs of attention. */
#include "devices/cpu/cpu_impl.h"

#include "kernels/ref.h"
#include "kernels/vision.h"

#include <math.h>
#include <string.h>

#define PATCH_CHUNK 16
#define ELEM_CHUNK 4096

typedef struct row_job {
    float *x;
    const float *w, *b, *cos, *sin;
    float *y;
    int64_t ld, width, nh, hd;
    float eps;
    qhx_act a;
    const qhx_kernels *k;
} row_job;

static void bias_task(void *ctx, int64_t t0, int64_t t1, int ti) {
    (void)ti;
    const row_job *j = ctx;
    for (int64_t t = t0; t < t1; t++) qhx_k_add_f32_ref(j->x + t * j->ld, j->b, j->width);
}

void qhx_cpu_bias_rows(const qhx_device *d, qhx_dv Y, int64_t ldy, const float *b, int64_t cols, int64_t n) {
    row_job j = {.x = cpu_f(Y), .b = b, .ld = ldy, .width = cols};
    qhx_par_range(cpu_of(d)->pool, n, PATCH_CHUNK, bias_task, &j);
}

static void act_task(void *ctx, int64_t i0, int64_t i1, int ti) {
    (void)ti;
    const row_job *j = ctx;
    float *x = j->x + i0;
    int64_t n = i1 - i0;
    if (j->a == QHX_ACT_GELU_TANH) j->k->gelu_tanh(x, n);
    else if (j->a == QHX_ACT_GELU_ERF) qhx_k_gelu_erf_f32_ref(x, n);
    else j->k->silu(x, n);
}

void qhx_cpu_act(const qhx_device *d, qhx_act a, qhx_dv x, int64_t count) {
    row_job j = {.k = &cpu_of(d)->kern, .a = a, .x = cpu_f(x)};
    qhx_par_range(cpu_of(d)->pool, count, ELEM_CHUNK, act_task, &j);
}

static void ln_task(void *ctx, int64_t r0, int64_t r1, int ti) {
    (void)ti;
    const row_job *j = ctx;
    for (int64_t r = r0; r < r1; r++)
        qhx_k_layernorm_f32_ref(j->x + r * j->width, j->w, j->b, j->y + r * j->width, j->width, j->eps);
}

void qhx_cpu_layernorm(const qhx_device *d, qhx_dv x, const float *w, const float *b, qhx_dv y, int64_t n,
                       int64_t width, float eps) {
    row_job j = {.x = cpu_f(x), .w = w, .b = b, .y = cpu_f(y), .width = width, .eps = eps};
    qhx_par_range(cpu_of(d)->pool, n, PATCH_CHUNK, ln_task, &j);
}

static void rope_task(void *ctx, int64_t r0, int64_t r1, int ti) {
    (void)ti;
    const row_job *j = ctx;
    const int64_t half = j->hd / 2;
    for (int64_t r = r0; r < r1; r++)
        qhx_k_rope_neox_f32_ref(j->x + r * j->ld, j->nh, j->hd, j->hd, j->cos + r * half, j->sin + r * half);
}

void qhx_cpu_rope_rows(const qhx_device *d, qhx_dv x, int64_t ld, int64_t n, int64_t nh, int64_t hd,
                       const float *cos, const float *sin) {
    row_job j = {.x = cpu_f(x), .ld = ld, .nh = nh, .hd = hd, .cos = cos, .sin = sin};
    qhx_par_range(cpu_of(d)->pool, n, PATCH_CHUNK, rope_task, &j);
}

/* ---- attention over the patches ---- */

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

/* Scratch floats one thread needs for attention over N patches. */
static int64_t att_work_floats(int64_t N, int64_t hd) { return ATT_QUERIES * hd + qhx_attn_group_work(N, ATT_QUERIES, hd); }

int64_t qhx_cpu_vit_attn_work(const qhx_device *d, int64_t N, int64_t D, int64_t H) {
    return qhx_pool_n_threads(cpu_of(d)->pool) * att_work_floats(N, D / H);
}

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
        for (int64_t r = 0; r < nq; r++) memcpy(j->att + (p0 + r) * D + h * hd, out + r * hd, (size_t)hd * sizeof(float));
    }
}

/* Full (non-causal) multi-head attention over the N patches of one image through the
 * decoder's blocked attention kernel (blocks of QHX_ATTN_BLOCK keys, partial softmaxes combined
 * in block order). Each head's queries, keys and values are first copied to contiguous rows
 * (kv: 3 N D floats): read in place they sit 3D floats apart, and every query walks all keys. */
void qhx_cpu_vit_attention(const qhx_device *d, qhx_dv qkv, int64_t N, int64_t D, int64_t H, qhx_dv kv, qhx_dv work,
                           qhx_dv att) {
    const cpu_dev *c = cpu_of(d);
    att_job j = {.k = &c->kern, .qkv = cpu_f(qkv), .kv = cpu_f(kv), .work = cpu_f(work), .att = cpu_f(att), .N = N,
                 .D = D, .H = H, .work_floats = att_work_floats(N, D / H)};
    qhx_par_range(c->pool, N, PATCH_CHUNK, kv_pack_task, &j);
    qhx_par_range(c->pool, H * ((N + ATT_QUERIES - 1) / ATT_QUERIES), 1, att_task, &j);
}
