/* kernels/ref.h: the scalar reference kernels, defined in kernels/ref/. They are the oracle
 * every SIMD variant is tested against, and what model code calls for element-wise and row ops
 * until the op table grows slots for them. Plain loops, fp32 arithmetic as the Hugging Face
 * reference does it (each contract names the function it mirrors). No allocation, no threads.
 *
 * Shapes are row-major, in comments after each pointer; "ld" is a row stride in elements. */
#ifndef QHX_KERNELS_REF_H
#define QHX_KERNELS_REF_H

#include "kernels/kernels.h"

#include <stdint.h>

/* ---- linear layers (op table slots for F32 / F16 / BF16) ---------------------------------- */

/* W (rows, cols) @ x (cols,) -> y (rows,), rows [r0, r1) only. f32 accumulation in a fixed
 * order that does not depend on [r0, r1), so any row split gives the same bits. */
void qhx_k_matvec_f32_ref(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);
void qhx_k_matvec_f16_ref(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);
void qhx_k_matvec_bf16_ref(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);

/* Y[t, r] = W[r, :] . X[t, :] for t in [0, n), r in [r0, r1). X (n, cols) stride ldx,
 * Y (n, rows) stride ldy. Each Y[t, r] equals the matvec result bit for bit. */
void qhx_k_matmul_f32_ref(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                          int64_t n, int64_t r0, int64_t r1);
void qhx_k_matmul_f16_ref(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                          int64_t n, int64_t r0, int64_t r1);
void qhx_k_matmul_bf16_ref(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                           int64_t n, int64_t r0, int64_t r1);

/* Row r of W (rows, cols) widened to f32 -> out (cols,). Embedding lookup. */
void qhx_k_row_f32_ref(const qhx_weight *w, int64_t r, float *out);
void qhx_k_row_f16_ref(const qhx_weight *w, int64_t r, float *out);
void qhx_k_row_bf16_ref(const qhx_weight *w, int64_t r, float *out);

/* ---- normalisation ------------------------------------------------------------------------ */

/* Zero-centred RMSNorm (HF Qwen3_5RMSNorm): y = (x * 1/sqrt(mean(x^2) + eps)) * (1 + w).
 * x, y (n,) (may alias); w (n,) the stored offset-from-one weight. */
void qhx_k_rmsnorm_zc_f32_ref(const float *x, const float *w, float *y, int64_t n, float eps);

/* Gated RMSNorm (HF Qwen3_5RMSNormGated), plain weight:
 * y = (w * (x * 1/sqrt(mean(x^2) + eps))) * silu(z). x, z, y (n,) (y may alias x); w (n,). */
void qhx_k_rmsnorm_gated_f32_ref(const float *x, const float *z, const float *w, float *y,
                                 int64_t n, float eps);

/* L2 norm as HF l2norm: x <- x * 1/sqrt(sum(x^2) + eps) (eps on the sum). x (n,) in place. */
void qhx_k_l2norm_f32_ref(float *x, int64_t n, float eps);

/* ---- activations -------------------------------------------------------------------------- */

float qhx_k_sigmoid_ref(float x);   /* 1 / (1 + exp(-x)) */
float qhx_k_silu_ref(float x);      /* x / (1 + exp(-x)), as torch silu */
float qhx_k_softplus_ref(float x);  /* x if x > 20 else log1p(exp(x)) (torch threshold 20) */

/* x (n,) <- silu(x), in place. */
void qhx_k_silu_f32_ref(float *x, int64_t n);
/* out (n,) <- silu(gate) * up; gate, up (n,); out may alias either. SwiGLU. */
void qhx_k_swiglu_f32_ref(const float *gate, const float *up, float *out, int64_t n);
/* x (n,) <- x * sigmoid(gate); gate (n,). The attention output gate. */
void qhx_k_mul_sigmoid_f32_ref(float *x, const float *gate, int64_t n);
/* y (n,) <- y + x; x (n,). Residual add. */
void qhx_k_add_f32_ref(float *y, const float *x, int64_t n);

/* ---- causal depthwise convolution --------------------------------------------------------- */

/* Causal depthwise conv over n tokens (PyTorch conv1d, groups = channels, no bias):
 * y[t, c] = sum_{j<K} w[c, j] * u[t + j, c], i.e. tap K-1 multiplies the current token.
 * u (n + K - 1, C): the K-1 previous inputs (the FIFO, oldest first) then the n new ones;
 * w (C, K); y (n, C). A decode step is n = 1. */
void qhx_k_conv1d_causal_f32_ref(const float *u, const float *w, float *y, int64_t n, int64_t C,
                                 int64_t K);

/* ---- gated delta rule (one value head) ---------------------------------------------------- */

/* One recurrent step (HF torch_recurrent_gated_delta_rule), S (dk, dv) fp32, in place:
 *   S <- exp(g) S;  d = beta (v - S^T k);  S <- S + k d^T;  o = S^T q.
 * q, k (dk,) already L2-normed (q also scaled); v, o (dv,). */
void qhx_k_delta_step_f32_ref(float *S, const float *q, const float *k, const float *v,
                              float beta, float g, float *o, int64_t dk, int64_t dv);

/* Floats of scratch the chunked kernel needs for chunk size C. */
int64_t qhx_k_delta_chunked_work(int64_t C, int64_t dk, int64_t dv);

/* n steps of the same rule in the chunked form (HF torch_chunk_gated_delta_rule, chunks of C
 * tokens, the last one partial), continuing from S (dk, dv). Algebraically equal to n calls of
 * qhx_k_delta_step_f32_ref; only rounding differs.
 * q (n, dk) stride ldq, k (n, dk) stride ldk, v (n, dv) stride ldv, beta and g (n,) stride ldg,
 * o (n, dv) stride ldo; work: qhx_k_delta_chunked_work(C, dk, dv) floats. */
void qhx_k_delta_chunked_f32_ref(float *S, const float *q, int64_t ldq, const float *k,
                                 int64_t ldk, const float *v, int64_t ldv, const float *beta,
                                 const float *g, int64_t ldg, float *o, int64_t ldo, int64_t n,
                                 int64_t dk, int64_t dv, int64_t C, float *work);

/* ---- rotary embedding and attention ------------------------------------------------------- */

/* NeoX ("rotate_half") partial rotary on n_heads head vectors x (n_heads, hd), in place: for
 * i < n_rot/2, (x[i], x[i + n_rot/2]) <- (x[i] c_i - x[i+h] s_i, x[i+h] c_i + x[i] s_i);
 * dims >= n_rot pass through. cos, sin (n_rot/2,) for this token's position. */
void qhx_k_rope_neox_f32_ref(float *x, int64_t n_heads, int64_t hd, int64_t n_rot,
                             const float *cos, const float *sin);

/* x (n,) <- softmax(x), fp32, max-subtracted. */
void qhx_k_softmax_f32_ref(float *x, int64_t n);

/* XOR of the n / 8 little 64-bit words at p (p 8-byte aligned; a tail of n % 8 bytes is ignored).
 * A streaming read whose result depends on every word, for the memory-bandwidth probes. */
uint64_t qhx_k_read_fold_ref(const void *p, size_t n);

/* Causal GQA attention of one query token over n_kv cached tokens, query heads [h0, h1):
 *   out_h = softmax_tau((q_h . K[tau, g]) * scale) . V[tau, g],  g = h / (n_heads / n_kv_heads).
 * q (n_heads, hd); K, V (n_kv, ld) with head g at columns [g hd, (g+1) hd); scores (n_kv,)
 * scratch; out (n_heads, hd). */
void qhx_k_attention_f32_ref(const float *q, const float *K, const float *V, int64_t ld,
                             int64_t n_kv, int64_t n_heads, int64_t n_kv_heads, int64_t hd,
                             float scale, float *scores, float *out, int64_t h0, int64_t h1);

#endif
