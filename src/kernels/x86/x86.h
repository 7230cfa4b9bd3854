/* kernels/x86/x86.h: the x86 SIMD variants of the kernels.h ops, and the function that puts the
 * best of them the CPU and OS support into a qhx_kernels table. Each *_avx2.c / *_avx512.c file
 * is built with its own ISA flags; only the install function (baseline code) may call into them
 * after checking the CPU, so nothing here may be called directly on a host that lacks the ISA.
 *
 * Every variant has the signature and contract of qhx_matvec_fn / qhx_matmul_fn (kernels.h) and
 * accepts any shape (odd rows, odd cols, tails). Numerics: f32 accumulation, weights widened to
 * f32 exactly (f16, bf16, int8, 4-bit codes), activations used in f32 as given (no int8
 * quantization of x). Q4 variants handle group 32 (what forge writes); for any other group they
 * call qhx_k_matvec_q4_ref / qhx_k_matmul_q4_ref, so every weight still runs.
 * Results are reproducible: output row r depends only on row r of W and the input vector, never
 * on the row range [r0, r1) of the call, and matmul's Y[t, r] is bitwise equal to the same
 * variant's matvec of X[t]. They differ from the _ref kernels only by summation order (float32 rounding noise).
 * Exceptions, each with its own error bound and install function: the *_i8x variants and the
 * *_i8gemm prefill GEMM quantize x to int8 per block of 32 (and the i8gemm has no matvec twin). */
#ifndef QHX_KERNELS_X86_H
#define QHX_KERNELS_X86_H

#include "core/cpu.h"
#include "kernels/kernels.h"

/* ---- install ------------------------------------------------------------------------------- */

/* Override k->matvec[fmt] / k->matmul[fmt] (F32, F16, BF16, Q8, Q4) with the best x86 variant
 * allowed by max_isa and cpu (NULL: detect here with qhx_cpu_detect), and set k->isa to the ISA
 * installed (k->isa is left as it was when nothing is). Call it after k holds the _ref kernels:
 * slots without a variant are left untouched. max_isa QHX_ISA_REF or QHX_ISA_NEON installs
 * nothing; QHX_ISA_BEST means no limit. AVX2 needs QHX_CPU_GROUP_AVX2, AVX-512 needs
 * QHX_CPU_GROUP_AVX512 (core/cpu.h reports a feature only with its OS register state).
 * Thread-safe; writes only *k. */
void qhx_kern_install_x86(qhx_kernels *k, qhx_isa max_isa, const qhx_cpu_info *cpu);

/* Opt-in: after qhx_kern_install_x86, replace the Q4 slots with the variants that quantize the
 * activations to int8 per block of 32 (q4i8x_avx2.c: about 1.5x fewer instructions per weight,
 * 2x the exact path's in-cache rate; q4i8x_avx512.c with VNNI where AVX-512 is installed),
 * results within the bound given there instead of float32 noise. Does nothing unless AVX2 is
 * allowed by max_isa and present. Thread-safe; writes only *k. */
void qhx_kern_install_x86_i8x(qhx_kernels *k, qhx_isa max_isa, const qhx_cpu_info *cpu);

/* Where k holds the AVX2 or AVX-512 kernels (k->isa == QHX_ISA_AVX2 or QHX_ISA_AVX512), put in
 * the kernels that quantize the activations to int8 per block of 32 (results within the bounds
 * given in their files instead of float32 noise): the prefill GEMM in the matmul slots of the
 * formats in the bit mask `prefill_formats` (1u << QHX_W_Q8, 1u << QHX_W_Q4), and the decode
 * matvec in the Q4 matvec slot when `decode_formats` has 1u << QHX_W_Q4; other bits are ignored.
 * The build of each (AVX2, AVX-VNNI, AVX-512 VNNI; all return the same bits) is the fastest
 * measured for the CPU's features (install_x86.c has the rule and its figures). Does nothing
 * unless AVX2 is allowed by max_isa and present (cpu NULL: detect here), or when k holds other
 * kernels. Reached through qhx_kern_use_int8 (qhx_model_params.prefill_math, decode_math).
 * Thread-safe; writes only *k. */
void qhx_kern_install_x86_int8(qhx_kernels *k, unsigned prefill_formats, unsigned decode_formats, qhx_isa max_isa,
                                const qhx_cpu_info *cpu);

/* ---- AVX2 + FMA + F16C (linear_avx2.c) ----------------------------------------------------- */

void qhx_k_matvec_f32_avx2(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);
void qhx_k_matvec_f16_avx2(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);
void qhx_k_matvec_bf16_avx2(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);
void qhx_k_matvec_q8_avx2(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);
void qhx_k_matvec_q4_avx2(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);

void qhx_k_matmul_f32_avx2(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                           int64_t n, int64_t r0, int64_t r1);
void qhx_k_matmul_f16_avx2(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                           int64_t n, int64_t r0, int64_t r1);
void qhx_k_matmul_bf16_avx2(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                            int64_t n, int64_t r0, int64_t r1);
void qhx_k_matmul_q8_avx2(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                          int64_t n, int64_t r0, int64_t r1);
void qhx_k_matmul_q4_avx2(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                          int64_t n, int64_t r0, int64_t r1);

/* kernels.h's qhx_matvec_multi_fn twins of the F32, F16, BF16 and Q8 matvecs above (bitwise their
 * results per row): each weight row widened once for every activation row of the call. */
void qhx_k_matvec_multi_f32_avx2(const qhx_weight *w, const float *const *x, float *const *y, int64_t nb,
                                 int64_t r0, int64_t r1);
void qhx_k_matvec_multi_f16_avx2(const qhx_weight *w, const float *const *x, float *const *y, int64_t nb,
                                 int64_t r0, int64_t r1);
void qhx_k_matvec_multi_bf16_avx2(const qhx_weight *w, const float *const *x, float *const *y, int64_t nb,
                                  int64_t r0, int64_t r1);
void qhx_k_matvec_multi_q8_avx2(const qhx_weight *w, const float *const *x, float *const *y, int64_t nb,
                                int64_t r0, int64_t r1);

/* ---- AVX2 + F16C, GGUF blocks in place (ggml_avx2.c) ----------------------------------------
 * QHX_W_GGML's matvec, matmul and row lookup, bit for bit the references of kernels/ref/gguf_linear.c
 * (the same dequantized floats, the same 8-lane sums): Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K,
 * Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS dequantize in registers; other types call the reference. */
void qhx_k_matvec_ggml_avx2(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);
void qhx_k_matmul_ggml_avx2(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t n,
                            int64_t r0, int64_t r1);
void qhx_k_row_ggml_avx2(const qhx_weight *w, int64_t r, float *out);
/* Whether the kernels above have their own path for this ggml type id (else they run the reference). */
int qhx_ggml_avx2_has(uint32_t type);
/* The integer form of the GGUF matvec and matmul (ggml_i8_avx2.c), bit for bit
 * qhx_k_matvec_ggml_dot_ref / qhx_k_matmul_ggml_dot_ref (kernels/ref/gguf_dot.c) for Q8_0, Q5_0,
 * Q4_K, Q5_K and Q6_K; other types run the kernels above. */
void qhx_k_matvec_ggml_i8_avx2(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);
void qhx_k_matmul_ggml_i8_avx2(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t n,
                               int64_t r0, int64_t r1);

/* ---- AVX2, Q4 with int8 activations (q4i8x_avx2.c; the matvec through qhx_kern_install_x86_int8) */

void qhx_k_matvec_q4_i8x_avx2(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);
void qhx_k_matmul_q4_i8x_avx2(const qhx_weight *w, const float *X, int64_t ldx, float *Y,
                              int64_t ldy, int64_t n, int64_t r0, int64_t r1);
/* kernels.h's qhx_matvec_multi_fn twin of qhx_k_matvec_q4_i8x_avx2 (bitwise its results per row) */
void qhx_k_matvec_multi_q4_i8x_avx2(const qhx_weight *w, const float *const *x, float *const *y, int64_t nb,
                                    int64_t r0, int64_t r1);

/* The same kernels for Q6 weights (6-bit codes; group 32, cols a multiple of 32 and at most 8192,
 * else the scalar reference): Q6's only SIMD kernels, through qhx_kern_install_x86_int8. */
void qhx_k_matvec_q6_i8x_avx2(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);
void qhx_k_matmul_q6_i8x_avx2(const qhx_weight *w, const float *X, int64_t ldx, float *Y,
                              int64_t ldy, int64_t n, int64_t r0, int64_t r1);
void qhx_k_matvec_multi_q6_i8x_avx2(const qhx_weight *w, const float *const *x, float *const *y, int64_t nb,
                                    int64_t r0, int64_t r1);

/* Q4A weights (docs/formats.md, "Q4A"): decode matvec, prefill matmul and the multi-row decode on
 * int8 activations, bitwise qhx_k_matvec_q4a_i8x_ref (cols a multiple of 32 and at most 8192,
 * else the f32 reference qhx_k_matvec_q4a_ref): Q4A's only SIMD kernels, through
 * qhx_kern_install_x86_int8 (they follow Q4's switches). */
void qhx_k_matvec_q4a_i8x_avx2(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);
void qhx_k_matmul_q4a_i8x_avx2(const qhx_weight *w, const float *X, int64_t ldx, float *Y,
                               int64_t ldy, int64_t n, int64_t r0, int64_t r1);
void qhx_k_matvec_multi_q4a_i8x_avx2(const qhx_weight *w, const float *const *x, float *const *y, int64_t nb,
                                     int64_t r0, int64_t r1);

/* ---- AVX2, Q8 / Q4 / Q4A prefill GEMM with int8 activations (gemm_i8_avx2.c; prefill_math) -
 * The Q4A one is bitwise qhx_k_matmul_q4a_i8gemm_ref (not the per-token kernels above). */

void qhx_k_matmul_q8_i8gemm_avx2(const qhx_weight *w, const float *X, int64_t ldx, float *Y,
                                 int64_t ldy, int64_t n, int64_t r0, int64_t r1);
void qhx_k_matmul_q4_i8gemm_avx2(const qhx_weight *w, const float *X, int64_t ldx, float *Y,
                                 int64_t ldy, int64_t n, int64_t r0, int64_t r1);
void qhx_k_matmul_q4a_i8gemm_avx2(const qhx_weight *w, const float *X, int64_t ldx, float *Y,
                                  int64_t ldy, int64_t n, int64_t r0, int64_t r1);

/* ---- AVX-VNNI (256-bit vpdpbusd): the int8 kernels above, rebuilt with -mavxvnni -------------
 * (gemm_i8_avxvnni.c, q4i8x_avxvnni.c); bitwise the AVX2 builds' results. */

/* The per-token int8 kernels of one rebuild of q4i8x_avx2.c, functions suffixed _sfx. */
#define QHX_I8X_BUILD_DECLS(sfx)                                                                              \
    void qhx_k_matvec_q4_i8x_##sfx(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);     \
    void qhx_k_matmul_q4_i8x_##sfx(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,    \
                                   int64_t n, int64_t r0, int64_t r1);                                         \
    void qhx_k_matvec_multi_q4_i8x_##sfx(const qhx_weight *w, const float *const *x, float *const *y,          \
                                         int64_t nb, int64_t r0, int64_t r1);                                  \
    void qhx_k_matvec_q6_i8x_##sfx(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);     \
    void qhx_k_matmul_q6_i8x_##sfx(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,    \
                                   int64_t n, int64_t r0, int64_t r1);                                         \
    void qhx_k_matvec_multi_q6_i8x_##sfx(const qhx_weight *w, const float *const *x, float *const *y,          \
                                         int64_t nb, int64_t r0, int64_t r1);                                  \
    void qhx_k_matvec_q4a_i8x_##sfx(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);    \
    void qhx_k_matmul_q4a_i8x_##sfx(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,   \
                                    int64_t n, int64_t r0, int64_t r1);                                        \
    void qhx_k_matvec_multi_q4a_i8x_##sfx(const qhx_weight *w, const float *const *x, float *const *y,         \
                                          int64_t nb, int64_t r0, int64_t r1);

QHX_I8X_BUILD_DECLS(avxvnni)
void qhx_k_matmul_q8_i8gemm_avxvnni(const qhx_weight *w, const float *X, int64_t ldx, float *Y,
                                    int64_t ldy, int64_t n, int64_t r0, int64_t r1);
void qhx_k_matmul_q4_i8gemm_avxvnni(const qhx_weight *w, const float *X, int64_t ldx, float *Y,
                                    int64_t ldy, int64_t n, int64_t r0, int64_t r1);
void qhx_k_matmul_q4a_i8gemm_avxvnni(const qhx_weight *w, const float *X, int64_t ldx, float *Y,
                                     int64_t ldy, int64_t n, int64_t r0, int64_t r1);

/* ---- AVX-512 VNNI on 256-bit vectors (q4i8x_evex_avx512.c): the int8 decode kernels of
 * q4i8x_avx2.c with EVEX-encoded vpdpbusd and 32 registers; bitwise the AVX2 builds' results. */

QHX_I8X_BUILD_DECLS(evex)

/* ---- AVX-512 VNNI int8 prefill GEMM (gemm_i8_avx512.c): bitwise the AVX2 int8 GEMM's results */

void qhx_k_matmul_q8_i8gemm_avx512(const qhx_weight *w, const float *X, int64_t ldx, float *Y,
                                   int64_t ldy, int64_t n, int64_t r0, int64_t r1);
void qhx_k_matmul_q4_i8gemm_avx512(const qhx_weight *w, const float *X, int64_t ldx, float *Y,
                                   int64_t ldy, int64_t n, int64_t r0, int64_t r1);
void qhx_k_matmul_q4a_i8gemm_avx512(const qhx_weight *w, const float *X, int64_t ldx, float *Y,
                                    int64_t ldy, int64_t n, int64_t r0, int64_t r1);

/* ---- AVX-512 F/BW/VL/DQ (linear_avx512.c) -------------------------------------------------- */

void qhx_k_matvec_f32_avx512(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);
void qhx_k_matvec_f16_avx512(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);
void qhx_k_matvec_bf16_avx512(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);
void qhx_k_matvec_q8_avx512(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);
void qhx_k_matvec_q4_avx512(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);

void qhx_k_matmul_f32_avx512(const qhx_weight *w, const float *X, int64_t ldx, float *Y,
                             int64_t ldy, int64_t n, int64_t r0, int64_t r1);
void qhx_k_matmul_f16_avx512(const qhx_weight *w, const float *X, int64_t ldx, float *Y,
                             int64_t ldy, int64_t n, int64_t r0, int64_t r1);
void qhx_k_matmul_bf16_avx512(const qhx_weight *w, const float *X, int64_t ldx, float *Y,
                              int64_t ldy, int64_t n, int64_t r0, int64_t r1);
void qhx_k_matmul_q8_avx512(const qhx_weight *w, const float *X, int64_t ldx, float *Y,
                            int64_t ldy, int64_t n, int64_t r0, int64_t r1);
void qhx_k_matmul_q4_avx512(const qhx_weight *w, const float *X, int64_t ldx, float *Y,
                            int64_t ldy, int64_t n, int64_t r0, int64_t r1);

/* The multi-row twins of the F32, F16, BF16 and Q8 matvecs above (bitwise their results per row). */
void qhx_k_matvec_multi_f32_avx512(const qhx_weight *w, const float *const *x, float *const *y, int64_t nb,
                                   int64_t r0, int64_t r1);
void qhx_k_matvec_multi_f16_avx512(const qhx_weight *w, const float *const *x, float *const *y, int64_t nb,
                                   int64_t r0, int64_t r1);
void qhx_k_matvec_multi_bf16_avx512(const qhx_weight *w, const float *const *x, float *const *y, int64_t nb,
                                    int64_t r0, int64_t r1);
void qhx_k_matvec_multi_q8_avx512(const qhx_weight *w, const float *const *x, float *const *y, int64_t nb,
                                  int64_t r0, int64_t r1);

/* ---- AVX-512 + VNNI, Q4 with int8 activations (q4i8x_avx512.c; not installed by default) --- */

void qhx_k_matvec_q4_i8x_avx512(const qhx_weight *w, const float *x, float *y, int64_t r0,
                                int64_t r1);
void qhx_k_matmul_q4_i8x_avx512(const qhx_weight *w, const float *X, int64_t ldx, float *Y,
                                int64_t ldy, int64_t n, int64_t r0, int64_t r1);

#endif
