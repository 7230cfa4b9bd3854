/* kernels/x86/ops_x86.h: x86 variants of the attention and delta-rule slots (kernels/attn.h).
 * Reached only through kernels/select.c after the CPU check. */
#ifndef QHX_KERNELS_OPS_X86_H
#define QHX_KERNELS_OPS_X86_H

#include "kernels/attn.h"
#include "kernels/ref.h"

void qhx_k_attn_block_f32_avx2(const float *q, const float *K, const float *V, int64_t ld, int64_t n, int64_t rep,
                               int64_t hd, float scale, float *scores, float *o, float *ml);
void qhx_k_attn_block_f16_avx2(const float *q, const uint16_t *K, const uint16_t *V, int64_t ld, int64_t n,
                               int64_t rep, int64_t hd, float scale, float *scores, float *tile, float *o,
                               float *ml);
void qhx_k_delta_step_f32_avx2(float *S, const float *q, const float *k, const float *v, float beta, float g,
                               float *o, int64_t dk, int64_t dv);
void qhx_k_delta_chunked_f32_avx2(float *S, const float *q, int64_t ldq, const float *k, int64_t ldk, const float *v,
                                  int64_t ldv, const float *beta, const float *g, int64_t ldg, float *o, int64_t ldo,
                                  int64_t n, int64_t dk, int64_t dv, int64_t C, float *work);
/* The same built for AVX-512 (delta_avx512.c): rows of 128 floats in zmm registers for dk = dv =
 * 128, bitwise the AVX2 build's results; other sizes call the AVX2 build. */
void qhx_k_delta_chunked_f32_avx512(float *S, const float *q, int64_t ldq, const float *k, int64_t ldk,
                                    const float *v, int64_t ldv, const float *beta, const float *g, int64_t ldg,
                                    float *o, int64_t ldo, int64_t n, int64_t dk, int64_t dv, int64_t C,
                                    float *work);

/* Q8 / Q4 decode matvec with the activation vector as int16 blocks (linear_x16_avx2.c). */
void qhx_k_matvec_q8_x16_avx2(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);
/* its multi-row twin (kernels.h qhx_matvec_multi_fn; bitwise its results per row) */
void qhx_k_matvec_multi_q8_x16_avx2(const qhx_weight *w, const float *const *x, float *const *y, int64_t nb,
                                    int64_t r0, int64_t r1);
void qhx_k_matvec_q4_x16_avx2(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);

/* Prefill matmul as a packed-panel GEMM (gemm_avx2.c). */
void qhx_k_matmul_f32_gemm_avx2(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t n,
                                int64_t r0, int64_t r1);
void qhx_k_matmul_f16_gemm_avx2(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t n,
                                int64_t r0, int64_t r1);
void qhx_k_matmul_bf16_gemm_avx2(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t n,
                                 int64_t r0, int64_t r1);
void qhx_k_matmul_q8_gemm_avx2(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t n,
                               int64_t r0, int64_t r1);
void qhx_k_matmul_q4_gemm_avx2(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t n,
                               int64_t r0, int64_t r1);

/* Activations (ops_avx2.c): qhx_k_silu_f32_ref, qhx_k_swiglu_f32_ref and qhx_k_gelu_tanh_f32_ref
 * with a polynomial exp (~2 ulp); results within a few float32 ulps of the references (of |x|
 * for GELU's negative tail, where the reference itself loses digits to 1 + tanh). NaN in, NaN
 * out. */
void qhx_k_silu_f32_avx2(float *x, int64_t n);
void qhx_k_swiglu_f32_avx2(const float *gate, const float *up, float *out, int64_t n);
void qhx_k_gelu_tanh_f32_avx2(float *x, int64_t n);

/* qhx_k_read_fold_ref with 32-byte loads (ops_avx2.c); the same result, bit for bit. */
uint64_t qhx_k_read_fold_avx2(const void *p, size_t n);

#endif
