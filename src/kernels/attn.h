/* kernels/attn.h: attention over a KV cache in fixed key blocks, and the recurrent gated delta
 * rule, as op-table slots (qhx_kernels.attn_block / delta_step) with scalar references here and
 * SIMD variants in kernels/x86.
 *
 * Attention is computed per KV head for the `rep` query heads that share it (GQA), over keys in
 * blocks of QHX_ATTN_BLOCK: each block yields a partial softmax (max, sum, unnormalised output),
 * and the partials are combined in block order. Block boundaries depend only on the key count,
 * so the result is the same whichever thread computes which block, and a prompt token gets the
 * same bits as the same token decoded alone. */
#ifndef QHX_KERNELS_ATTN_H
#define QHX_KERNELS_ATTN_H

#include "kernels/kernels.h"

#include <stdbool.h>
#include <stdint.h>

#define QHX_ATTN_BLOCK 256

/* One block of n (1..QHX_ATTN_BLOCK) keys for rep query heads:
 *   s[r, t] = (q_r . K[t]) * scale,  m_r = max_t s[r, t],  l_r = sum_t exp(s[r, t] - m_r),
 *   o_r = sum_t exp(s[r, t] - m_r) V[t].
 * q (rep, hd) contiguous; K, V (n, ld): row t holds this KV head's hd values at column 0 (the
 * caller offsets the pointers); scores (rep, n) scratch; o (rep, hd); ml (rep, 2) = (m_r, l_r).
 * (qhx_attn_block_fn in kernels.h.) */
void qhx_k_attn_block_f32_ref(const float *q, const float *K, const float *V, int64_t ld, int64_t n,
                              int64_t rep, int64_t hd, float scale, float *scores, float *o, float *ml);

/* Floats of one block's partial result: o (rep, hd) then ml (rep, 2). */
static inline int64_t qhx_attn_part_floats(int64_t rep, int64_t hd) { return rep * (hd + 2); }
static inline int64_t qhx_attn_n_blocks(int64_t n_kv) { return (n_kv + QHX_ATTN_BLOCK - 1) / QHX_ATTN_BLOCK; }

/* Block b of n_kv keys into part (qhx_attn_part_floats), scores: rep * QHX_ATTN_BLOCK floats. */
void qhx_attn_block(const qhx_kernels *k, const float *q, const float *K, const float *V, int64_t ld,
                    int64_t n_kv, int64_t b, int64_t rep, int64_t hd, float scale, float *scores, float *part);

/* Combine the n_blocks partials at part (consecutive, in block order) into out: head r at
 * out + r * hd, normalised. */
void qhx_attn_combine(const float *part, int64_t n_blocks, int64_t rep, int64_t hd, float *out);

/* Floats of scratch qhx_attn_group needs for up to n_kv keys. */
int64_t qhx_attn_group_work(int64_t n_kv, int64_t rep, int64_t hd);

/* All blocks of n_kv keys, then the combine: out (rep, hd) for the rep heads of one KV head. */
void qhx_attn_group(const qhx_kernels *k, const float *q, const float *K, const float *V, int64_t ld,
                    int64_t n_kv, int64_t rep, int64_t hd, float scale, float *work, float *out);

/* ---- keys and values in f32, f16 or q8 (the KV cache element types) ---- */

/* q8: per row of a cache, the scales of every block of QHX_KV_Q8_BLOCK values (f32), then the
 * values (int8): x = scale[j / QHX_KV_Q8_BLOCK] * q[j] (ops/kv.h stores them). */
#define QHX_KV_Q8_BLOCK 32

/* One KV head's keys and values in a cache. f32 / f16: row t of K at K + t * ld elements
 * (likewise V). q8: row t starts at (const char *)K + t * ld bytes; this head's scales at byte
 * q8_scales of a row, its values at byte q8_values. */
typedef struct qhx_kv_view {
    const void *K, *V;
    int64_t ld;
    qhx_kv_type type;  /* QHX_KV_F32, QHX_KV_F16 or QHX_KV_Q8 */
    int64_t q8_scales, q8_values;
} qhx_kv_view;

/* Floats of scratch qhx_attn_block_kv needs: the scores and, unless the cache is f32, the
 * widened tile of one block (K then V, QHX_ATTN_BLOCK x hd each). */
int64_t qhx_attn_block_kv_work(int64_t rep, int64_t hd, qhx_kv_type type);
/* Floats of scratch qhx_attn_group_kv needs for up to n_kv keys. */
int64_t qhx_attn_group_kv_work(int64_t n_kv, int64_t rep, int64_t hd, qhx_kv_type type);

/* qhx_attn_block / qhx_attn_group over a view. f32: the same calls on the cache in place.
 * f16 / q8: each block's rows are widened (f16 exactly; q8 as scale * q, one f32 product) into a
 * tile of ld = hd and the same block kernel
 * runs on it, so the result equals the f32 path on the widened values, and the prompt and
 * decode paths give the same bits for a token, as they do in f32. */
void qhx_attn_block_kv(const qhx_kernels *k, const float *q, const qhx_kv_view *kv, int64_t n_kv, int64_t b,
                       int64_t rep, int64_t hd, float scale, float *work, float *part);
void qhx_attn_group_kv(const qhx_kernels *k, const float *q, const qhx_kv_view *kv, int64_t n_kv, int64_t rep,
                       int64_t hd, float scale, float *work, float *out);

#endif
