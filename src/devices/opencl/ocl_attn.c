/* devices/opencl/ocl_attn.c: attention over the KV cache, the Gated DeltaNet steps and the
 * vision tower's ops on the OpenCL device (kernels/30_attn.cl, 40_gdn.cl, 20_norm.cl). The
 * kernels need no work space of the caller's: the attention keeps its online softmax in local
 * memory, the delta rule works on the state in place. */
#include "devices/opencl/ocl_impl.h"

#include <math.h>

int64_t qhx_ocl_attn_work(const qhx_device *d, int64_t n_ctx, int64_t nkv, int64_t rep, int64_t hd, qhx_kv_type t) {
    (void)d, (void)n_ctx, (void)nkv, (void)rep, (void)hd, (void)t;
    return 16;
}
int64_t qhx_ocl_gdn_work(const qhx_device *d, int64_t dk, int64_t dv) {
    (void)d, (void)dk, (void)dv;
    return 16;
}
int64_t qhx_ocl_vit_attn_work(const qhx_device *d, int64_t N, int64_t D, int64_t H) {
    (void)d, (void)N, (void)D, (void)H;
    return 16;
}

static int kv_code(qhx_kv_type t) { return t == QHX_KV_F16 ? 1 : t == QHX_KV_Q8 ? 2 : 0; }

static size_t row_offset(const qhx_kv_cache *c, int64_t layer, int which, int64_t pos) {
    return (((size_t)layer * 2 + (size_t)which) * (size_t)c->n_ctx + (size_t)pos) * qhx_kv_row_bytes(c->type, c->width);
}

static void attn_prep(ocl_dev *o, const qhx_dattn *a, ocl_ref q, ocl_ref k) {
    ocl_args g = qhx_ocl_args(o, OK_ATTN_PREP);
    qhx_ocl_a_ref(&g, q);
    qhx_ocl_a_ref(&g, k);
    qhx_ocl_a_i64(&g, a->nh);
    qhx_ocl_a_i64(&g, a->nkv);
    qhx_ocl_a_i64(&g, a->hd);
    qhx_ocl_a_i64(&g, a->rot);
    qhx_ocl_a_i32(&g, a->norm == QHX_NORM_ZERO_CENTRED);
    qhx_ocl_a_ref(&g, qhx_ocl_host(o, a->q_norm, (size_t)a->hd * sizeof(float)));
    qhx_ocl_a_ref(&g, qhx_ocl_host(o, a->k_norm, (size_t)a->hd * sizeof(float)));
    qhx_ocl_a_f32(&g, a->eps);
    const size_t cs = (size_t)(a->n * (a->rot / 2)) * sizeof(float);
    qhx_ocl_a_ref(&g, qhx_ocl_host(o, a->cos, cs));
    qhx_ocl_a_ref(&g, qhx_ocl_host(o, a->sin, cs));
    qhx_ocl_launch(&g, (size_t)(a->nh + a->nkv) * o->wg, (size_t)a->n, 1, o->wg);
}

static void kv_store(ocl_dev *o, const qhx_dattn *a, ocl_ref k, ocl_ref v, ocl_ref cache) {
    const qhx_kv_cache *c = a->kv;
    const bool q8 = c->type == QHX_KV_Q8;
    ocl_args g = qhx_ocl_args(o, q8 ? OK_KV_STORE_Q8 : OK_KV_STORE);
    if (!q8) qhx_ocl_a_i32(&g, kv_code(c->type));
    qhx_ocl_a_ref(&g, k);
    qhx_ocl_a_ref(&g, v);
    cl_mem m = cache.m;
    clSetKernelArg(g.k, g.i++, sizeof m, &m);
    const cl_ulong kd = cache.off + row_offset(c, a->slot, 0, a->n_past), vd = cache.off + row_offset(c, a->slot, 1, a->n_past);
    const cl_ulong rb = qhx_kv_row_bytes(c->type, c->width);
    clSetKernelArg(g.k, g.i++, sizeof kd, &kd);
    clSetKernelArg(g.k, g.i++, sizeof vd, &vd);
    clSetKernelArg(g.k, g.i++, sizeof rb, &rb);
    qhx_ocl_a_i64(&g, c->width);
    qhx_ocl_launch(&g, (size_t)(q8 ? c->width / QHX_KV_Q8_BLOCK : c->width), (size_t)a->n, 2, 0);
}

/* the k_attn launch: queries q (ld ldq) of nh heads over the keys and values of a cache-shaped
 * buffer (rows of rowb bytes from kbase / vbase) */
typedef struct attn_call {
    ocl_ref q, cache, gate, out;
    int64_t ldq, ldo, nh, hd, rep, n_past, n, width;
    cl_ulong kbase, vbase, rowb;
    int type, causal, has_gate;
    float scale;
} attn_call;

static void attn_launch(ocl_dev *o, const attn_call *c) {
    ocl_args g = qhx_ocl_args(o, OK_ATTN);
    qhx_ocl_a_ref(&g, c->q);
    qhx_ocl_a_i64(&g, c->ldq);
    cl_mem m = c->cache.m;
    const cl_ulong kb = c->cache.off + c->kbase, vb = c->cache.off + c->vbase;
    clSetKernelArg(g.k, g.i++, sizeof m, &m);
    clSetKernelArg(g.k, g.i++, sizeof kb, &kb);
    clSetKernelArg(g.k, g.i++, sizeof vb, &vb);
    clSetKernelArg(g.k, g.i++, sizeof c->rowb, &c->rowb);
    qhx_ocl_a_i32(&g, c->type);
    qhx_ocl_a_i64(&g, c->width);
    qhx_ocl_a_i64(&g, c->hd);
    qhx_ocl_a_i64(&g, c->rep);
    qhx_ocl_a_i64(&g, c->n_past);
    qhx_ocl_a_i32(&g, c->causal);
    qhx_ocl_a_f32(&g, c->scale);
    qhx_ocl_a_ref(&g, c->gate);
    qhx_ocl_a_i32(&g, c->has_gate);
    qhx_ocl_a_ref(&g, c->out);
    qhx_ocl_a_i64(&g, c->ldo);
    qhx_ocl_launch(&g, (size_t)c->nh * o->wg, (size_t)c->n, 1, o->wg);
}

void qhx_ocl_attention(const qhx_device *d, const qhx_dattn *a) {
    ocl_dev *o = ocl_of(d);
    if (a->n < 1) return;
    if (a->hd > OCL_HD_MAX) {
        qhx_ocl_refuse(o, QHX_E_UNSUPPORTED, "attention over heads of %lld values (at most %d)", (long long)a->hd, OCL_HD_MAX);
        return;
    }
    qhx_ocl_op_begin(o);
    ocl_ref q = qhx_ocl_view(o, a->q, true), k = qhx_ocl_view(o, a->k, true), v = qhx_ocl_view(o, a->v, false);
    ocl_ref cache = qhx_ocl_view(o, a->kv->at, true);
    attn_prep(o, a, q, k);
    kv_store(o, a, k, v, cache);
    const qhx_kv_cache *c = a->kv;
    const attn_call ac = {.q = q, .cache = cache, .gate = qhx_ocl_view(o, a->gate, false),
                          .out = qhx_ocl_view(o, a->out, true), .ldq = a->nh * a->hd, .ldo = a->nh * a->hd,
                          .nh = a->nh, .hd = a->hd, .rep = a->nh / a->nkv, .n_past = a->n_past, .n = a->n,
                          .width = c->width, .kbase = row_offset(c, a->slot, 0, 0), .vbase = row_offset(c, a->slot, 1, 0),
                          .rowb = qhx_kv_row_bytes(c->type, c->width), .type = kv_code(c->type), .causal = 1,
                          .has_gate = !qhx_dv_null(a->gate), .scale = a->scale};
    attn_launch(o, &ac);
    qhx_ocl_op_end(o);
}

/* ---- Gated DeltaNet ---------------------------------------------------------------------- */

void qhx_ocl_gdn_prep(const qhx_device *d, const qhx_dgdn *g) {
    ocl_dev *o = ocl_of(d);
    const int64_t C = 2 * g->nk * g->dk + g->nv * g->dv;
    qhx_ocl_op_begin(o);
    ocl_ref cv = qhx_ocl_view(o, g->cv, true);
    ocl_args a = qhx_ocl_args(o, OK_GDN_CONV);
    qhx_ocl_a_ref(&a, qhx_ocl_view(o, g->ext, false));
    qhx_ocl_a_ref(&a, qhx_ocl_host(o, g->conv_w, (size_t)(C * g->K) * sizeof(float)));
    qhx_ocl_a_ref(&a, cv);
    qhx_ocl_a_i64(&a, C);
    qhx_ocl_a_i64(&a, g->K);
    qhx_ocl_launch(&a, (size_t)C, (size_t)g->n, 1, 0);
    a = qhx_ocl_args(o, OK_GDN_L2);
    qhx_ocl_a_ref(&a, cv);
    qhx_ocl_a_i64(&a, C);
    qhx_ocl_a_i64(&a, g->nk);
    qhx_ocl_a_i64(&a, g->dk);
    qhx_ocl_a_f32(&a, (float)(1.0 / sqrt((double)g->dk)));
    qhx_ocl_launch(&a, (size_t)(2 * g->nk) * o->wg, (size_t)g->n, 1, o->wg);
    a = qhx_ocl_args(o, OK_GDN_GATES);
    qhx_ocl_a_ref(&a, qhx_ocl_view(o, g->beta, true));
    qhx_ocl_a_ref(&a, qhx_ocl_view(o, g->g, true));
    qhx_ocl_a_ref(&a, qhx_ocl_host(o, g->A, (size_t)g->nv * sizeof(float)));
    qhx_ocl_a_ref(&a, qhx_ocl_host(o, g->dt_bias, (size_t)g->nv * sizeof(float)));
    qhx_ocl_a_i64(&a, g->nv);
    qhx_ocl_launch(&a, (size_t)g->nv, (size_t)g->n, 1, 0);
    qhx_ocl_op_end(o);
}

void qhx_ocl_gdn_delta(const qhx_device *d, const qhx_dgdn *g) {
    ocl_dev *o = ocl_of(d);
    if (g->dk > OCL_HD_MAX) {
        qhx_ocl_refuse(o, QHX_E_UNSUPPORTED, "a delta rule over key heads of %lld values (at most %d)", (long long)g->dk, OCL_HD_MAX);
        return;
    }
    const int64_t C = 2 * g->nk * g->dk + g->nv * g->dv;
    qhx_ocl_op_begin(o);
    ocl_ref out = qhx_ocl_view(o, g->out, true);
    ocl_args a = qhx_ocl_args(o, OK_GDN_DELTA);
    qhx_ocl_a_ref(&a, qhx_ocl_view(o, g->cv, false));
    qhx_ocl_a_ref(&a, qhx_ocl_view(o, g->beta, false));
    qhx_ocl_a_ref(&a, qhx_ocl_view(o, g->g, false));
    qhx_ocl_a_ref(&a, qhx_ocl_view(o, g->S, true));
    qhx_ocl_a_ref(&a, out);
    const int64_t v[7] = {g->n, C, g->nk, g->nv, g->dk, g->dv, g->v_tiled ? -1 : g->rep};
    for (int i = 0; i < 7; i++) qhx_ocl_a_i64(&a, v[i]);
    qhx_ocl_launch(&a, (size_t)g->nv * o->wg, 1, 1, o->wg);
    a = qhx_ocl_args(o, OK_GATED_NORM);
    qhx_ocl_a_ref(&a, out);
    qhx_ocl_a_ref(&a, qhx_ocl_view(o, g->z, false));
    qhx_ocl_a_ref(&a, qhx_ocl_host(o, g->gnorm_w, (size_t)g->dv * sizeof(float)));
    qhx_ocl_a_i64(&a, g->nv);
    qhx_ocl_a_i64(&a, g->dv);
    qhx_ocl_a_f32(&a, g->eps);
    qhx_ocl_launch(&a, (size_t)g->nv * o->wg, (size_t)g->n, 1, o->wg);
    qhx_ocl_op_end(o);
}

/* ---- the vision tower ------------------------------------------------------------------ */

void qhx_ocl_bias_rows(const qhx_device *d, qhx_dv Y, int64_t ldy, const float *b, int64_t cols, int64_t n) {
    ocl_dev *o = ocl_of(d);
    qhx_ocl_op_begin(o);
    ocl_args a = qhx_ocl_args(o, OK_BIAS_ROWS);
    qhx_ocl_a_ref(&a, qhx_ocl_view(o, Y, true));
    qhx_ocl_a_i64(&a, ldy);
    qhx_ocl_a_ref(&a, qhx_ocl_host(o, b, (size_t)cols * sizeof *b));
    qhx_ocl_a_i64(&a, cols);
    qhx_ocl_launch(&a, (size_t)cols, (size_t)n, 1, 0);
    qhx_ocl_op_end(o);
}

void qhx_ocl_act(const qhx_device *d, qhx_act act, qhx_dv x, int64_t count) {
    ocl_dev *o = ocl_of(d);
    qhx_ocl_op_begin(o);
    ocl_args a = qhx_ocl_args(o, OK_ACT);
    qhx_ocl_a_ref(&a, qhx_ocl_view(o, x, true));
    qhx_ocl_a_i64(&a, count);
    qhx_ocl_a_i32(&a, act == QHX_ACT_GELU_TANH ? 0 : act == QHX_ACT_GELU_ERF ? 1 : 2);
    qhx_ocl_launch(&a, (size_t)count, 1, 1, 0);
    qhx_ocl_op_end(o);
}

void qhx_ocl_layernorm(const qhx_device *d, qhx_dv x, const float *w, const float *b, qhx_dv y, int64_t n,
                       int64_t width, float eps) {
    ocl_dev *o = ocl_of(d);
    qhx_ocl_op_begin(o);
    ocl_args a = qhx_ocl_args(o, OK_LAYERNORM);
    qhx_ocl_a_ref(&a, qhx_ocl_view(o, x, false));
    qhx_ocl_a_ref(&a, qhx_ocl_host(o, w, (size_t)width * sizeof *w));
    qhx_ocl_a_ref(&a, qhx_ocl_host(o, b, (size_t)width * sizeof *b));
    qhx_ocl_a_i32(&a, b != NULL);
    qhx_ocl_a_ref(&a, qhx_ocl_view(o, y, true));
    qhx_ocl_a_i64(&a, width);
    qhx_ocl_a_f32(&a, eps);
    qhx_ocl_launch(&a, (size_t)n * o->wg, 1, 1, o->wg);
    qhx_ocl_op_end(o);
}

void qhx_ocl_rope_rows(const qhx_device *d, qhx_dv x, int64_t ld, int64_t n, int64_t nh, int64_t hd,
                       const float *cos, const float *sin) {
    ocl_dev *o = ocl_of(d);
    qhx_ocl_op_begin(o);
    const size_t cs = (size_t)(n * (hd / 2)) * sizeof(float);
    ocl_args a = qhx_ocl_args(o, OK_ROPE_ROWS);
    qhx_ocl_a_ref(&a, qhx_ocl_view(o, x, true));
    qhx_ocl_a_i64(&a, ld);
    qhx_ocl_a_i64(&a, hd);
    qhx_ocl_a_i64(&a, hd);
    qhx_ocl_a_ref(&a, qhx_ocl_host(o, cos, cs));
    qhx_ocl_a_ref(&a, qhx_ocl_host(o, sin, cs));
    qhx_ocl_launch(&a, (size_t)(hd / 2), (size_t)nh, (size_t)n, 0);
    qhx_ocl_op_end(o);
}

/* Full attention over the N patches, read in place from qkv (N, 3D) = [q | k | v]: the
 * decoder's kernel with rows of 3D floats, no causal mask, one KV head per head. */
void qhx_ocl_vit_attention(const qhx_device *d, qhx_dv qkv, int64_t N, int64_t D, int64_t H, qhx_dv kv, qhx_dv work,
                           qhx_dv att) {
    (void)kv, (void)work;
    ocl_dev *o = ocl_of(d);
    const int64_t hd = D / H;
    if (hd > OCL_HD_MAX) {
        qhx_ocl_refuse(o, QHX_E_UNSUPPORTED, "vision attention over heads of %lld values (at most %d)", (long long)hd, OCL_HD_MAX);
        return;
    }
    qhx_ocl_op_begin(o);
    ocl_ref q = qhx_ocl_view(o, qkv, false);
    const attn_call ac = {.q = q, .cache = q, .gate = {o->dummy, 0}, .out = qhx_ocl_view(o, att, true), .ldq = 3 * D,
                          .ldo = D, .nh = H, .hd = hd, .rep = 1, .n_past = N, .n = N, .width = D,
                          .kbase = (cl_ulong)D * 4, .vbase = (cl_ulong)(2 * D) * 4, .rowb = (cl_ulong)(3 * D) * 4,
                          .type = 0, .causal = 0, .has_gate = 0, .scale = 1.0f / sqrtf((float)hd)};
    attn_launch(o, &ac);
    qhx_ocl_op_end(o);
}
