/* devices/cpu/cpu.c: the CPU device (cpu.h): host buffers, the linear layers over the pool,
 * the embedding lookup, norms and residuals. Attention, the Gated DeltaNet steps and the
 * vision ops are in cpu_attn.c, cpu_gdn.c and cpu_vit.c. */
#include "devices/cpu/cpu_impl.h"

#include "core/alloc.h"
#include "core/cpu.h"
#include "kernels/ref.h"
#include "kernels/vision.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* ---- memory ---------------------------------------------------------------------------- */

static qhx_status cpu_buf_alloc(const qhx_device *d, size_t bytes, qhx_dbuf **out, qhx_error *err) {
    *out = NULL;
    qhx_dbuf *b = qhx_malloc(sizeof *b);
    void *p = b ? qhx_aligned_alloc(bytes ? bytes : 1) : NULL; /* zeroed, 64-byte aligned */
    if (!p) {
        qhx_free(b);
        return qhx_fail(err, QHX_E_NOMEM, "device cpu: out of memory for %zu bytes", bytes);
    }
    *b = (qhx_dbuf){d, p, NULL, bytes};
    *out = b;
    return QHX_OK;
}

static void cpu_buf_free(const qhx_device *d, qhx_dbuf *b) {
    (void)d;
    if (!b) return;
    qhx_aligned_free(b->host);
    qhx_free(b);
}

static void cpu_set(const qhx_device *d, qhx_dv dst, const void *src, size_t bytes) {
    (void)d;
    if (bytes) memcpy(cpu_p(dst), src, bytes);
}

static void cpu_get(const qhx_device *d, qhx_dv src, void *dst, size_t bytes) {
    (void)d;
    if (bytes) memcpy(dst, cpu_p(src), bytes);
}

static void cpu_copy(const qhx_device *d, qhx_dv dst, qhx_dv src, size_t bytes) {
    (void)d;
    if (bytes) memmove(cpu_p(dst), cpu_p(src), bytes);
}

static void cpu_zero(const qhx_device *d, qhx_dv dst, size_t bytes) {
    (void)d;
    if (bytes) memset(cpu_p(dst), 0, bytes);
}

/* ---- weights ---------------------------------------------------------------------------- */

static bool cpu_supports(const qhx_device *d, qhx_wfmt fmt) {
    const qhx_kernels *k = &cpu_of(d)->kern;
    return fmt < QHX_W_COUNT && k->matvec[fmt] && k->matmul[fmt] && k->row[fmt];
}

static qhx_status cpu_weight_prepare(const qhx_device *d, qhx_weight *w, qhx_error *err) {
    (void)d, (void)w, (void)err; /* the kernels read the bound bytes in place */
    return QHX_OK;
}

/* ---- linear layers ---------------------------------------------------------------------- */

static void cpu_linear(const qhx_device *d, const qhx_weight *w, qhx_dv X, int64_t ldx, qhx_dv Y, int64_t ldy,
                       int64_t n) {
    const cpu_dev *c = cpu_of(d);
    qhx_par_linear(c->pool, &c->kern, w, cpu_f(X), ldx, cpu_f(Y), ldy, n);
}

#define LIN_GROUP 8 /* qhx_par_linears' layers per parallel region */

static void cpu_linears(const qhx_device *d, const qhx_dlin *ls, int n_ls, qhx_dv X, int64_t ldx, int64_t n) {
    const cpu_dev *c = cpu_of(d);
    for (int b = 0; b < n_ls; b += LIN_GROUP) {
        qhx_par_lin pl[LIN_GROUP];
        int m = n_ls - b < LIN_GROUP ? n_ls - b : LIN_GROUP;
        for (int i = 0; i < m; i++) pl[i] = (qhx_par_lin){ls[b + i].w, cpu_f(ls[b + i].Y), ls[b + i].ldy};
        qhx_par_linears(c->pool, &c->kern, pl, m, cpu_f(X), ldx, n);
    }
}

static void cpu_swiglu_linear(const qhx_device *d, const qhx_weight *gate, const qhx_weight *up, qhx_dv X,
                              int64_t ldx, qhx_dv G, qhx_dv U, int64_t ld, int64_t n) {
    const cpu_dev *c = cpu_of(d);
    qhx_par_swiglu(c->pool, &c->kern, gate, up, cpu_f(X), ldx, cpu_f(G), cpu_f(U), ld, n);
}

static void cpu_linears_multi(const qhx_device *d, const qhx_dlin_multi *ls, int n_ls, const qhx_dv *X, int64_t nb,
                              bool swiglu) {
    const cpu_dev *c = cpu_of(d);
    const float *xs[QHX_DEV_MULTI_MAX];
    float *ys[LIN_GROUP][QHX_DEV_MULTI_MAX];
    if (nb < 1 || nb > QHX_DEV_MULTI_MAX) return;
    for (int64_t r = 0; r < nb; r++) xs[r] = cpu_f(X[r]);
    for (int b = 0; b < n_ls; b += LIN_GROUP) {
        qhx_par_lin_multi pl[LIN_GROUP];
        int m = n_ls - b < LIN_GROUP ? n_ls - b : LIN_GROUP;
        for (int i = 0; i < m; i++) {
            for (int64_t r = 0; r < nb; r++) ys[i][r] = cpu_f(ls[b + i].Y[r]);
            pl[i] = (qhx_par_lin_multi){ls[b + i].w, ys[i]};
        }
        qhx_par_linears_multi(c->pool, &c->kern, pl, m, xs, nb, swiglu);
    }
}

static void cpu_embed_rows(const qhx_device *d, const qhx_weight *w, const int32_t *ids, int64_t n, qhx_dv out) {
    const qhx_kernels *k = &cpu_of(d)->kern;
    float *o = cpu_f(out);
    for (int64_t t = 0; t < n; t++) k->row[w->fmt](w, ids[t], o + t * w->cols);
}

/* ---- norms and residuals ---------------------------------------------------------------- */

void qhx_cpu_rmsnorm_row(qhx_norm_kind kind, const float *x, const float *w, float *out, int64_t H, float eps) {
    if (kind == QHX_NORM_ZERO_CENTRED) qhx_k_rmsnorm_zc_f32_ref(x, w, out, H, eps);
    else qhx_k_rmsnorm_f32_ref(x, w, out, H, eps);
}

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
    for (int64_t t = t0; t < t1; t++)
        qhx_cpu_rmsnorm_row(j->kind, j->x_in + t * j->H, j->w, j->out + t * j->H, j->H, j->eps);
}

static void add_norm_task(void *ctx, int64_t t0, int64_t t1, int ti) {
    (void)ti;
    const norm_job *j = ctx;
    for (int64_t t = t0; t < t1; t++) {
        qhx_k_add_f32_ref(j->x + t * j->H, j->add + t * j->H, j->H);
        qhx_cpu_rmsnorm_row(j->kind, j->x + t * j->H, j->w, j->out + t * j->H, j->H, j->eps);
    }
}

static void add_task(void *ctx, int64_t i0, int64_t i1, int ti) {
    (void)ti;
    const norm_job *j = ctx;
    qhx_k_add_f32_ref(j->x + i0, j->add + i0, i1 - i0);
}

static void cpu_rmsnorm(const qhx_device *d, qhx_norm_kind kind, qhx_dv x, const float *w, qhx_dv out, int64_t n,
                        int64_t H, float eps) {
    norm_job j = {.kind = kind, .x_in = cpu_f(x), .w = w, .out = cpu_f(out), .H = H, .eps = eps};
    qhx_par_range(cpu_of(d)->pool, n, CPU_TOK_CHUNK, norm_task, &j);
}

static void cpu_add_rmsnorm(const qhx_device *d, qhx_norm_kind kind, qhx_dv x, qhx_dv add, const float *w,
                            qhx_dv out, int64_t n, int64_t H, float eps) {
    norm_job j = {.kind = kind, .x = cpu_f(x), .add = cpu_f(add), .w = w, .out = cpu_f(out), .H = H, .eps = eps};
    qhx_par_range(cpu_of(d)->pool, n, CPU_TOK_CHUNK, add_norm_task, &j);
}

static void cpu_add(const qhx_device *d, qhx_dv x, qhx_dv add, int64_t count) {
    norm_job j = {.x = cpu_f(x), .add = cpu_f(add)};
    qhx_par_range(cpu_of(d)->pool, count, CPU_ELEM_CHUNK, add_task, &j);
}

typedef struct split_job {
    const float *src;
    float *a, *b;
    int64_t nh, hd;
} split_job;

static void split_task(void *ctx, int64_t t0, int64_t t1, int ti) {
    (void)ti;
    const split_job *j = ctx;
    const int64_t hd = j->hd, w = j->nh * hd;
    for (int64_t t = t0; t < t1; t++) {
        const float *s = j->src + t * 2 * w;
        float *a = j->a + t * w, *b = j->b + t * w;
        for (int64_t h = 0; h < j->nh; h++) {
            memcpy(a + h * hd, s + h * 2 * hd, (size_t)hd * sizeof(float));
            memcpy(b + h * hd, s + h * 2 * hd + hd, (size_t)hd * sizeof(float));
        }
    }
}

static void cpu_split_heads(const qhx_device *d, qhx_dv src, qhx_dv a, qhx_dv b, int64_t n, int64_t nh, int64_t hd) {
    split_job j = {cpu_f(src), cpu_f(a), cpu_f(b), nh, hd};
    qhx_par_range(cpu_of(d)->pool, n, CPU_TOK_CHUNK, split_task, &j);
}

/* ---- the device ------------------------------------------------------------------------- */

static void cpu_info(const qhx_device *d, qhx_device_info *out) {
    const cpu_dev *c = cpu_of(d);
    *out = (qhx_device_info){.n_threads = qhx_pool_n_threads(c->pool), .isa = qhx_isa_name(c->kern.isa)};
}

/* Every op has finished when it returns, and none can fail. */
static qhx_status cpu_sync(const qhx_device *d, qhx_error *err) {
    (void)d, (void)err;
    return QHX_OK;
}

static const qhx_device_ops CPU_OPS = {
    .destroy = qhx_cpu_device_free,
    .info = cpu_info,
    .sync = cpu_sync,
    .buf_alloc = cpu_buf_alloc,
    .buf_free = cpu_buf_free,
    .set = cpu_set,
    .get = cpu_get,
    .copy = cpu_copy,
    .zero = cpu_zero,
    .supports = cpu_supports,
    .weight_prepare = cpu_weight_prepare,
    .attn_work = qhx_cpu_attn_work,
    .gdn_work = qhx_cpu_gdn_work,
    .vit_attn_work = qhx_cpu_vit_attn_work,
    .linear = cpu_linear,
    .linears = cpu_linears,
    .swiglu_linear = cpu_swiglu_linear,
    .linears_multi = cpu_linears_multi,
    .embed_rows = cpu_embed_rows,
    .rmsnorm = cpu_rmsnorm,
    .add_rmsnorm = cpu_add_rmsnorm,
    .add = cpu_add,
    .split_heads = cpu_split_heads,
    .attention = qhx_cpu_attention,
    .gdn_prep = qhx_cpu_gdn_prep,
    .gdn_delta = qhx_cpu_gdn_delta,
    .bias_rows = qhx_cpu_bias_rows,
    .act = qhx_cpu_act,
    .layernorm = qhx_cpu_layernorm,
    .rope_rows = qhx_cpu_rope_rows,
    .vit_attention = qhx_cpu_vit_attention,
};

qhx_status qhx_cpu_device_create(const qhx_device_params *p, qhx_device **out, qhx_error *err) {
    *out = NULL;
    cpu_dev *c = qhx_calloc(1, sizeof *c);
    if (!c) return qhx_fail(err, QHX_E_NOMEM, "device cpu: out of memory");
    qhx_kern_select(p->max_isa, &c->kern);
    qhx_kern_use_int8(p->max_isa, p->int8_prefill_formats, p->int8_decode_formats, &c->kern);
    qhx_status rc = qhx_pool_create(p->n_threads, &c->pool, err);
    if (rc) {
        qhx_free(c);
        return rc;
    }
    c->dev = (qhx_device){.name = "cpu", .op = &CPU_OPS, .impl = c};
    *out = &c->dev;
    return QHX_OK;
}

void qhx_cpu_device_free(qhx_device *d) {
    if (!d) return;
    cpu_dev *c = (cpu_dev *)(void *)d;
    qhx_pool_free(c->pool);
    qhx_free(c);
}

/* The one CPU: its brand, threads and kernels; physical memory and what is available now. */
qhx_status qhx_cpu_device_list(qhx_device_entry *out, int cap, int *n, qhx_error *err) {
    (void)err;
    *n = 1;
    if (cap < 1) return QHX_OK;
    qhx_cpu_info ci;
    qhx_cpu_detect(&ci);
    qhx_kernels k;
    qhx_kern_select(QHX_ISA_BEST, &k);
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    const int64_t avail = qhx_mem_available_bytes();
    *out = (qhx_device_entry){.memory_bytes = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0,
                              .free_bytes = avail > 0 ? (uint64_t)avail : 0};
    snprintf(out->name, sizeof out->name, "cpu");
    snprintf(out->description, sizeof out->description, "the host CPU: %s, %d cores, %d threads, %s kernels",
             ci.brand[0] ? ci.brand : ci.arch, ci.n_physical, ci.n_logical, qhx_isa_name(k.isa));
    return QHX_OK;
}

const qhx_kernels *qhx_cpu_device_kernels(const qhx_device *d) { return &cpu_of(d)->kern; }
qhx_pool *qhx_cpu_device_pool(const qhx_device *d) { return cpu_of(d)->pool; }
