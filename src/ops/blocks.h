/* ops/blocks.h: the decoder pieces both families use, written once over the kernel table and
 * the thread pool: RMSNorm rows (plain or zero-centred), the residual add, the SwiGLU MLP,
 * attention over the KV cache, the lm-head and the loop that cuts a prompt into batches.
 *
 * Work is spread over the pool in pieces fixed by the problem size (ops/par.h): token ranges of
 * OPS_TOK_CHUNK, element ranges, (token, KV head) pairs and fixed key blocks of attention; so
 * results do not depend on the thread count. */
#ifndef QHX_OPS_BLOCKS_H
#define QHX_OPS_BLOCKS_H

#include "core/status.h"
#include "kernels/kernels.h"
#include "ops/kv.h"

#include <stdbool.h>
#include <stdint.h>

struct qhx_pool;

/* Qwen3-VL's RMSNorm is x * rsqrt(mean(x^2) + eps) * w; Qwen3.5's multiplies by (1 + w). */
typedef enum qhx_norm_kind { QHX_NORM_PLAIN = 0, QHX_NORM_ZERO_CENTRED = 1 } qhx_norm_kind;

/* out (n, H) = norm(x (n, H)) with weight w; out may be x. */
void qhx_op_rmsnorm_rows(struct qhx_pool *pool, qhx_norm_kind kind, const float *x, const float *w, float *out,
                         int64_t n, int64_t H, float eps);
/* The residual add of a mixer's output, then the next norm: x += add; out = norm(x). */
void qhx_op_add_rmsnorm_rows(struct qhx_pool *pool, qhx_norm_kind kind, float *x, const float *add, const float *w,
                             float *out, int64_t n, int64_t H, float eps);
/* x (count,) += add (count,). */
void qhx_op_add(struct qhx_pool *pool, float *x, const float *add, int64_t count);

/* out (n, H) = down(silu(gate(xn)) * up(xn)); mg, mu: (n, I) scratch. */
void qhx_op_swiglu_mlp(struct qhx_pool *pool, const qhx_kernels *k, const qhx_weight *gate, const qhx_weight *up,
                       const qhx_weight *down, const float *xn, int64_t H, float *mg, float *mu, int64_t I,
                       float *out, int64_t n);

/* logits = head(norm(x)) for the last of n rows, or every row when all: logits (1 or n, V);
 * xn: (n, H) scratch. */
void qhx_op_lm_head(struct qhx_pool *pool, const qhx_kernels *k, qhx_norm_kind kind, const float *x,
                    const float *final_norm, float eps, float *xn, const qhx_weight *head, float *logits,
                    int64_t H, int64_t V, int64_t n, bool all);

/* The lm-head graph alone: logits (n, V) = head(norm(hidden (n, H))) for every row, with its
 * scratch allocated here (n checked against overflow). QHX_E_NOMEM, QHX_E_LIMIT. */
qhx_status qhx_op_lm_head_rows(struct qhx_pool *pool, const qhx_kernels *k, qhx_norm_kind kind, const float *hidden,
                               const float *final_norm, float eps, const qhx_weight *head, float *logits, int64_t H,
                               int64_t V, int64_t n, qhx_error *err);

/* One attention mixer over n tokens at positions n_past .. n_past + n - 1 (GQA): the q and k
 * heads are RMS-normed and rotated (the first rot dims, NeoX halves) in place, k and v stored in
 * the cache, then each token attends to the cache up to itself (n > 1: (token, KV head) pairs;
 * n == 1: (KV head, key block) partials combined), scores scaled by `scale`; with a gate, the
 * output is multiplied by sigmoid(gate) (Qwen3.5's attn_output_gate). */
typedef struct qhx_op_attn {
    const qhx_kernels *kern;
    struct qhx_pool *pool;
    const qhx_kv_cache *kv;
    int64_t slot;                  /* the layer's slot in the cache */
    int64_t nh, nkv, hd, rot;
    qhx_norm_kind norm;
    const float *q_norm, *k_norm;  /* (hd), shared by the heads */
    float eps;
    float scale;                   /* 1 / sqrt(hd), rounded as the family's reference does */
    float *q, *k, *v;              /* (n, nh hd), (n, nkv hd), (n, nkv hd) */
    const float *cos, *sin;        /* (n, rot / 2) */
    const float *gate;             /* (n, nh hd) or NULL */
    float *out;                    /* (n, nh hd) */
    float *work;                   /* (threads, work_floats) */
    int64_t work_floats;           /* qhx_attn_group_kv_work for the cache's n_ctx */
    float *part;                   /* decode partials: (nkv, key blocks of n_ctx, part floats) */
    int64_t n_past, n;
} qhx_op_attn;
void qhx_op_attention(const qhx_op_attn *a);

/* The batch loop of a prompt: tokens [0, n) in steps of at most `step`, each through
 * fn(ctx, t0, nt, logits of that step or NULL); with all, step t0's logits start at row t0 of
 * logits (n, V), else only the last step gets logits (V). Stops at the first error. */
typedef qhx_status (*qhx_op_step_fn)(void *ctx, int64_t t0, int64_t nt, float *logits, qhx_error *err);
qhx_status qhx_op_batches(int64_t n, int64_t step, int64_t V, float *logits, bool all, qhx_op_step_fn fn, void *ctx,
                          qhx_error *err);

#endif
