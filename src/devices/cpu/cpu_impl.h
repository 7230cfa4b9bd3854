/* devices/cpu/cpu_impl.h: what the CPU device's files share (not for model code). */
#ifndef QHX_DEVICES_CPU_IMPL_H
#define QHX_DEVICES_CPU_IMPL_H

#include "devices/cpu/cpu.h"
#include "devices/cpu/par.h"

typedef struct cpu_dev {
    qhx_device dev; /* first: a qhx_device * is a cpu_dev * */
    qhx_kernels kern;
    qhx_pool *pool;
} cpu_dev;

static inline const cpu_dev *cpu_of(const qhx_device *d) { return (const cpu_dev *)(const void *)d; }
/* Every CPU buffer and every host wrapper is host memory. */
static inline float *cpu_f(qhx_dv v) { return v.b ? (float *)(void *)((char *)v.b->host + v.off) : NULL; }
static inline void *cpu_p(qhx_dv v) { return v.b ? (void *)((char *)v.b->host + v.off) : NULL; }

#define CPU_TOK_CHUNK 16     /* tokens per piece of the per-token ops */
#define CPU_ELEM_CHUNK 24576 /* elements per piece of the element-wise ops */

/* cpu_attn.c, cpu_gdn.c, cpu_vit.c */
int64_t qhx_cpu_attn_work(const qhx_device *d, int64_t n_ctx, int64_t nkv, int64_t rep, int64_t hd, qhx_kv_type t);
void qhx_cpu_attention(const qhx_device *d, const qhx_dattn *a);
int64_t qhx_cpu_gdn_work(const qhx_device *d, int64_t dk, int64_t dv);
void qhx_cpu_gdn_prep(const qhx_device *d, const qhx_dgdn *g);
void qhx_cpu_gdn_delta(const qhx_device *d, const qhx_dgdn *g);
int64_t qhx_cpu_vit_attn_work(const qhx_device *d, int64_t N, int64_t D, int64_t H);
void qhx_cpu_bias_rows(const qhx_device *d, qhx_dv Y, int64_t ldy, const float *b, int64_t cols, int64_t n);
void qhx_cpu_act(const qhx_device *d, qhx_act a, qhx_dv x, int64_t count);
void qhx_cpu_layernorm(const qhx_device *d, qhx_dv x, const float *w, const float *b, qhx_dv y, int64_t n,
                       int64_t width, float eps);
void qhx_cpu_rope_rows(const qhx_device *d, qhx_dv x, int64_t ld, int64_t n, int64_t nh, int64_t hd,
                       const float *cos, const float *sin);
void qhx_cpu_vit_attention(const qhx_device *d, qhx_dv qkv, int64_t N, int64_t D, int64_t H, qhx_dv kv, qhx_dv work,
                           qhx_dv att);
/* the per-row RMSNorm both kinds use */
void qhx_cpu_rmsnorm_row(qhx_norm_kind kind, const float *x, const float *w, float *out, int64_t H, float eps);

#endif
