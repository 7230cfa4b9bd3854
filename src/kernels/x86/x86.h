/* kernels/x86/x86.h: the x86 SIMD variants of the kernels.h ops, and the function that puts the
 * best of them the CPU and OS support into a qhx_kernels table. Each *_avx2.c / *_avx512.c file
 * is built with its own ISA flags; only the install function (baseline code) may call into them
 * after checking the CPU, so nothing here may be called directly on a host that lacks the ISA.
 *
 * Every variant has the signature and contract of qhx_matvec_fn / qhx_matmul_fn (kernels.h) and
 * accepts any shape (odd rows, odd cols, tails). Numerics: f32 accumulation, weights widened to
 * f32 exactly (f16, bf16, int8), activations used in f32 as given. Results are reproducible:
 * the value of output row r depends only on row r of W and the input vector, never on the row
 * range [r0, r1) of the call, and matmul's Y[t, r] is bitwise equal to the same variant's matvec
 * of X[t]. They differ from the _ref kernels only by summation order (float32 rounding noise). */
#ifndef QHX_KERNELS_X86_H
#define QHX_KERNELS_X86_H

#include <stdbool.h>

#include "kernels/kernels.h"

/* ---- CPU features -------------------------------------------------------------------------- */

/* What the CPU reports and the OS has enabled (XCR0: YMM state for AVX2, opmask + ZMM state for
 * AVX-512). A flag is true only when both agree, so a true flag means the instructions run. */
typedef struct qhx_x86_features {
    bool avx2, fma, f16c;                                  /* with OS YMM support */
    bool avx512f, avx512bw, avx512vl, avx512dq, avx512vnni, avx512bf16; /* with OS ZMM support */
} qhx_x86_features;

/* Fill *out from CPUID and XGETBV. Thread-safe, no side effects. */
void qhx_x86_detect(qhx_x86_features *out);

/* True when every feature the variants of that ISA were compiled for is present. */
bool qhx_x86_has_avx2(const qhx_x86_features *cpu);
bool qhx_x86_has_avx512(const qhx_x86_features *cpu);

/* ---- install ------------------------------------------------------------------------------- */

/* Override k->matvec[fmt] / k->matmul[fmt] with the best x86 variant allowed by max_isa and cpu
 * (cpu == NULL: detect here), and raise k->isa to the ISA used (k->isa is left as it was when
 * nothing is installed). Slots without a variant for that ISA are left untouched, so call it
 * after k has been filled with the _ref kernels. max_isa QHX_ISA_REF or QHX_ISA_NEON installs
 * nothing; QHX_ISA_BEST means no limit. Thread-safe; writes only *k. */
void qhx_kern_install_x86(qhx_kernels *k, qhx_isa max_isa, const qhx_x86_features *cpu);

/* ---- AVX2 + FMA + F16C (linear_avx2.c) ----------------------------------------------------- */

void qhx_k_matvec_f32_avx2(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);
void qhx_k_matvec_f16_avx2(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);
void qhx_k_matvec_bf16_avx2(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);
void qhx_k_matvec_q8_avx2(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);

void qhx_k_matmul_f32_avx2(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                           int64_t n, int64_t r0, int64_t r1);
void qhx_k_matmul_f16_avx2(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                           int64_t n, int64_t r0, int64_t r1);
void qhx_k_matmul_bf16_avx2(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                            int64_t n, int64_t r0, int64_t r1);
void qhx_k_matmul_q8_avx2(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                          int64_t n, int64_t r0, int64_t r1);

/* ---- AVX-512 F/BW/VL/DQ (linear_avx512.c) -------------------------------------------------- */

void qhx_k_matvec_f32_avx512(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);
void qhx_k_matvec_f16_avx512(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);
void qhx_k_matvec_bf16_avx512(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);
void qhx_k_matvec_q8_avx512(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);

void qhx_k_matmul_f32_avx512(const qhx_weight *w, const float *X, int64_t ldx, float *Y,
                             int64_t ldy, int64_t n, int64_t r0, int64_t r1);
void qhx_k_matmul_f16_avx512(const qhx_weight *w, const float *X, int64_t ldx, float *Y,
                             int64_t ldy, int64_t n, int64_t r0, int64_t r1);
void qhx_k_matmul_bf16_avx512(const qhx_weight *w, const float *X, int64_t ldx, float *Y,
                              int64_t ldy, int64_t n, int64_t r0, int64_t r1);
void qhx_k_matmul_q8_avx512(const qhx_weight *w, const float *X, int64_t ldx, float *Y,
                            int64_t ldy, int64_t n, int64_t r0, int64_t r1);

#endif
