/* kernels/arm/arm.h: the aarch64 Advanced SIMD (NEON) variants of the kernels.h ops, and the
 * function that puts them into a qhx_kernels table. Only baseline ARMv8-A instructions are used
 * (ASIMD, with its f16 <-> f32 conversions), which every aarch64 CPU has; the install function
 * still checks the hwcaps the kernel reports (core/cpu.c), as the x86 one checks CPUID.
 *
 * The linear variants have the signatures and contracts of qhx_matvec_fn / qhx_matmul_fn
 * (kernels.h) and accept any shape (odd rows, odd cols, tails). Numerics: f32 accumulation,
 * weights widened to f32 exactly (f16, bf16, int8, 4-bit codes), activations used in f32 as
 * given. Output row r depends only on row r of W and the input vector, never on the row range
 * of the call, and matmul's Y[t, r] is bitwise equal to the same variant's matvec of X[t].
 * Q4 variants handle group 32 (what forge writes); any other group goes to the _ref kernels. */
#ifndef QHX_KERNELS_ARM_H
#define QHX_KERNELS_ARM_H

#include "core/cpu.h"
#include "kernels/kernels.h"

/* ---- install ------------------------------------------------------------------------------- */

/* Override the F32, F16, BF16, Q8 and Q4 matvec/matmul slots, attn_block, delta_step,
 * delta_chunked and the activations of k with the NEON variants when max_isa allows them (QHX_ISA_NEON or
 * QHX_ISA_BEST) and cpu reports QHX_CPU_NEON (cpu NULL: detect here with qhx_cpu_detect);
 * k->isa becomes QHX_ISA_NEON. Any other max_isa, or a CPU without NEON, leaves k as it is.
 * Call it after k holds the _ref kernels. Thread-safe; writes only *k. */
void qhx_kern_install_arm(qhx_kernels *k, qhx_isa max_isa, const qhx_cpu_info *cpu);

/* The int8-activation kernels, installed where the caller asks for int8 math (qhx_kern_use_int8):
 * Q4A's matvec / matmul follow Q4's bits of decode_formats / prefill_formats, as on x86. Only on
 * a table that holds the NEON variants (k->isa == QHX_ISA_NEON). */
void qhx_kern_install_arm_int8(qhx_kernels *k, unsigned prefill_formats, unsigned decode_formats);

/* ---- linear layers (linear_neon.c) ---------------------------------------------------------- */

void qhx_k_matvec_f32_neon(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);
void qhx_k_matvec_f16_neon(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);
void qhx_k_matvec_bf16_neon(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);
void qhx_k_matvec_q8_neon(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);
void qhx_k_matvec_q4_neon(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);

void qhx_k_matmul_f32_neon(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                           int64_t n, int64_t r0, int64_t r1);
void qhx_k_matmul_f16_neon(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                           int64_t n, int64_t r0, int64_t r1);
void qhx_k_matmul_bf16_neon(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                            int64_t n, int64_t r0, int64_t r1);
void qhx_k_matmul_q8_neon(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                          int64_t n, int64_t r0, int64_t r1);
void qhx_k_matmul_q4_neon(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                          int64_t n, int64_t r0, int64_t r1);

/* ---- Q4A with int8 activations (q4a_neon.c) -------------------------------------------------
 * qhx_k_matvec_q4a_i8x_ref / qhx_k_matmul_q4a_i8x_ref bit for bit (the x86 builds' bits);
 * rows longer than QHX_Q4A_I8X_MAX_COLS take qhx_k_matvec_q4a_ref, as they do. */
void qhx_k_matvec_q4a_i8x_neon(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);
void qhx_k_matmul_q4a_i8x_neon(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                               int64_t n, int64_t r0, int64_t r1);
/* The prefill matmul in the x86 int8 GEMM's order: qhx_k_matmul_q4a_i8gemm_ref bit for bit, any
 * cols that is a multiple of 32 (others: qhx_k_matmul_q4a_ref). */
void qhx_k_matmul_q4a_i8gemm_neon(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                                  int64_t n, int64_t r0, int64_t r1);

/* ---- attention and the delta rule (ops_neon.c) ---------------------------------------------
 * attn_block: qhx_attn_block_fn (kernels/attn.h), within float rounding of the reference; head
 * dims that are not a multiple of 4 go to the reference. delta_step: bitwise the reference's
 * qhx_k_delta_step_f32_ref (dv a multiple of 4, at most 512; else the reference). delta_chunked:
 * qhx_k_delta_chunked_f32_ref's algebra, within float rounding (dk, dv multiples of 4, C <= 256;
 * else the reference). */
void qhx_k_attn_block_f32_neon(const float *q, const float *K, const float *V, int64_t ld, int64_t n, int64_t rep,
                               int64_t hd, float scale, float *scores, float *o, float *ml);
void qhx_k_delta_step_f32_neon(float *S, const float *q, const float *k, const float *v, float beta, float g,
                               float *o, int64_t dk, int64_t dv);
void qhx_k_delta_chunked_f32_neon(float *S, const float *q, int64_t ldq, const float *k, int64_t ldk, const float *v,
                                  int64_t ldv, const float *beta, const float *g, int64_t ldg, float *o, int64_t ldo,
                                  int64_t n, int64_t dk, int64_t dv, int64_t C, float *work);

/* ---- activations (ops_neon.c) ----------------------------------------------------------------
 * qhx_k_silu_f32_ref, qhx_k_swiglu_f32_ref and qhx_k_gelu_tanh_f32_ref with a polynomial exp,
 * within a few float32 ulps of them, as the AVX2 ones (kernels/x86/ops_x86.h). */
void qhx_k_silu_f32_neon(float *x, int64_t n);
void qhx_k_swiglu_f32_neon(const float *gate, const float *up, float *out, int64_t n);
void qhx_k_gelu_tanh_f32_neon(float *x, int64_t n);

#endif
