/* kernels/kernels.h: the op table. Model code calls kernels only through a qhx_kernels table
 * (one per model), filled with the scalar references (kernels/ref) and then overridden by the
 * best SIMD variant the CPU and OS support. Kernels never allocate, spawn threads or lock; they
 * take a row range [r0, r1) so callers can split work across the pool.
 *
 * Shapes are row-major. A weight is [rows = out_features, cols = in_features], as nn.Linear
 * stores it, and a linear layer computes y = W x. */
#ifndef QHX_KERNELS_H
#define QHX_KERNELS_H

#include "qhx.h"

#include <stddef.h>
#include <stdint.h>

/* Storage formats of a weight matrix (docs/formats.md has the byte layouts). */
typedef enum qhx_wfmt {
    QHX_W_F32 = 0,
    QHX_W_F16,
    QHX_W_BF16,
    QHX_W_Q8,   /* int8, symmetric, one f32 scale per row: w = q * scale[row] */
    QHX_W_Q4,   /* 4-bit groups along cols, one f16 scale per group (docs/formats.md) */
    QHX_W_Q6,   /* 6-bit groups of 32, one f16 scale per group: q4 bundles' tied head */
    QHX_W_Q4A,  /* 4-bit groups of 32 with an 8-bit scale and zero point each, under one f16 scale
                   per super-block of 8 groups (docs/formats.md, "Q4A") */
    QHX_W_GGML, /* a GGUF tensor's ggml blocks as the file stores them: gtype says which type
                   (docs/formats.md, "GGUF"); rows of qhx_ggml_row_bytes(gtype, cols) bytes */
    QHX_W_COUNT
} qhx_wfmt;

typedef struct qhx_weight {
    qhx_wfmt fmt;
    int64_t rows, cols;      /* out_features, in_features */
    const void *data;        /* f32/f16/bf16/int8: [rows, cols]; q4: packed per docs/formats.md */
    const float *scales;     /* q8: f32 [rows]; NULL otherwise */
    const uint16_t *gscales; /* q4, q6: f16 group scales [rows, cols / group];
                              * q4a: f16 super-block scales [rows, ceil(cols / 256)]; NULL otherwise */
    const uint8_t *high;     /* q6: the codes' high 2 bits [rows, cols / 4]; NULL otherwise */
    int64_t group;           /* q4, q6, q4a group size along cols (q4a: 32); 0 otherwise */
    const uint8_t *sub;      /* q4a: per group (scale, zero point) byte pairs [rows, cols / 16]; NULL otherwise */
    uint32_t gtype;          /* ggml: the block type (core/ggml_type.h); 0 otherwise */
    int64_t row_bytes;       /* ggml: bytes of one row of blocks; 0 otherwise */
} qhx_weight;

/* y[r] = sum_c W[r, c] * x[c] for r in [r0, r1). x: (cols,), y: (rows,). f32 accumulation. */
typedef void (*qhx_matvec_fn)(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);

/* The matvec of several independent activation rows at once (one decode step of several
 * sequences): y[b][r] = sum_c W[r, c] * x[b][c] for b in [0, nb), r in [r0, r1),
 * 1 <= nb <= QHX_MATVEC_MULTI_MAX. Each weight row is read and unpacked once for all nb rows;
 * y[b] gets exactly the bits the paired single-row kernel gives for x[b] (the same per-row
 * arithmetic in the same order). */
#define QHX_MATVEC_MULTI_MAX 8
typedef void (*qhx_matvec_multi_fn)(const qhx_weight *w, const float *const *x, float *const *y, int64_t nb,
                                    int64_t r0, int64_t r1);

/* Y[t, r] = sum_c W[r, c] * X[t, c] for t in [0, n), r in [r0, r1).
 * X: (n, cols) row stride ldx; Y: (n, rows) row stride ldy. */
typedef void (*qhx_matmul_fn)(const qhx_weight *w, const float *X, int64_t ldx, float *Y,
                              int64_t ldy, int64_t n, int64_t r0, int64_t r1);

/* out[c] = W[r, c] widened to f32, c in [0, cols). out: (cols,). Embedding lookup. */
typedef void (*qhx_row_fn)(const qhx_weight *w, int64_t r, float *out);

/* qhx_isa (QHX_ISA_REF ... QHX_ISA_BEST) is public: include/qhx.h. */

/* Blocked attention and the recurrent delta-rule step: kernels/attn.h. */
typedef void (*qhx_attn_block_fn)(const float *q, const float *K, const float *V, int64_t ld, int64_t n,
                                  int64_t rep, int64_t hd, float scale, float *scores, float *o, float *ml);
/* The same on f16 rows (ld in f16 elements): bit for bit attn_block on the rows widened to f32.
 * tile: 2 * n * hd floats a kernel may widen into. */
typedef void (*qhx_attn_block_f16_fn)(const float *q, const uint16_t *K, const uint16_t *V, int64_t ld, int64_t n,
                                      int64_t rep, int64_t hd, float scale, float *scores, float *tile, float *o,
                                      float *ml);
typedef void (*qhx_delta_step_fn)(float *S, const float *q, const float *k, const float *v, float beta,
                                  float g, float *o, int64_t dk, int64_t dv);
typedef void (*qhx_delta_chunked_fn)(float *S, const float *q, int64_t ldq, const float *k, int64_t ldk,
                                     const float *v, int64_t ldv, const float *beta, const float *g,
                                     int64_t ldg, float *o, int64_t ldo, int64_t n, int64_t dk, int64_t dv,
                                     int64_t C, float *work);

typedef struct qhx_kernels {
    qhx_isa isa;                       /* the best ISA in use */
    qhx_matvec_fn matvec[QHX_W_COUNT];
    /* the multi-row twin of matvec[fmt], NULL where it has none (callers loop matvec over the
     * rows); kept paired by qhx_kern_pair_multi, which the selection functions below call */
    qhx_matvec_multi_fn matvec_multi[QHX_W_COUNT];
    qhx_matmul_fn matmul[QHX_W_COUNT];
    qhx_row_fn row[QHX_W_COUNT];       /* NULL where a format has no kernel yet */
    qhx_attn_block_fn attn_block;      /* kernels/attn.h */
    /* attn_block's twin reading an f16 cache in place; NULL: the caller widens the rows into a
     * tile and runs attn_block (the same bits either way); kept paired with attn_block */
    qhx_attn_block_f16_fn attn_block_f16;
    qhx_delta_step_fn delta_step;      /* qhx_k_delta_step_f32_ref's contract */
    qhx_delta_chunked_fn delta_chunked; /* qhx_k_delta_chunked_f32_ref's contract */
    uint64_t (*read_fold)(const void *p, size_t n); /* qhx_k_read_fold_ref's contract (probes) */
    /* Activations: the contracts of qhx_k_silu_f32_ref, qhx_k_swiglu_f32_ref and
     * qhx_k_gelu_tanh_f32_ref (the SIMD ones within a few float32 ulps of them). Other
     * element-wise and row ops are added here as SIMD variants appear; until then model code
     * calls the qhx_k_*_ref functions directly. */
    void (*silu)(float *x, int64_t n);
    void (*swiglu)(const float *gate, const float *up, float *out, int64_t n);
    void (*gelu_tanh)(float *x, int64_t n);
    /* f16 <-> f32 of n contiguous values (the f16 KV cache): the contracts of core/fp16.h's
     * qhx_f16_to_f32_row and qhx_f32_to_f16_row, bit for bit (round to nearest even; NaN stays
     * NaN with the quiet bit set; the F16C variants quiet a signalling f16 NaN when widening,
     * which qhx_f32_to_f16 never produces). */
    void (*f16_to_f32)(const uint16_t *src, float *dst, int64_t n);
    void (*f32_to_f16)(const float *src, uint16_t *dst, int64_t n);
} qhx_kernels;

/* Fill k with the reference kernels, then the best variants allowed by max_isa and the CPU.
 * Slots of formats without a kernel stay NULL; model code refuses such weights at load. */
void qhx_kern_select(qhx_isa max_isa, qhx_kernels *k);
const char *qhx_isa_name(qhx_isa isa);

/* After qhx_kern_select(max_isa, k): put the kernels that quantize the activations to int8 per
 * block of 32 into k where this build and CPU have them (x86 with AVX2 kernels in k): the prefill
 * matmul for the formats in the bit mask `prefill_formats` (1u << QHX_W_Q8, 1u << QHX_W_Q4), the
 * decode matvec for those in `decode_formats` (only Q4 has one; other bits are ignored).
 * Elsewhere k is left as it is. Writes only *k. */
void qhx_kern_use_int8(qhx_isa max_isa, unsigned prefill_formats, unsigned decode_formats, qhx_kernels *k);

/* Set each matvec_multi[fmt] to the multi-row twin of the kernel now in matvec[fmt], or NULL.
 * qhx_kern_select and qhx_kern_use_int8 call it last; code that puts a matvec into a table by
 * hand calls it afterwards. */
void qhx_kern_pair_multi(qhx_kernels *k);

#endif
