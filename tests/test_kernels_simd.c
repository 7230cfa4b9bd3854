// ctest-labels: kernels
/* test_kernels_simd: every x86 matvec/matmul variant the host CPU can run, against the _ref
 * kernels and against itself under row splits, threads and token batching (kernels_check.h);
 * then the table install. Exits 77 (skipped) when the CPU has none of the ISAs. */
#if defined(QHX_HAVE_X86)
#include "core/cpu.h"
#include "kernels_check.h"
#include "kernels/vision.h"
#include "kernels/x86/ops_x86.h"
#include "kernels/x86/x86.h"
#include "i8x_builds.h"

static const int64_t sizes[] = {1, 3, 15, 16, 17, 63, 64, 65, 257, 1000, 2048};

/* The streaming read of the bandwidth probes: bit for bit the reference's fold, which is the XOR
 * of every whole 64-bit word (checked word by word here), at sizes around the 128-byte blocks
 * and from unaligned starts. */
static void check_read_fold(void) {
    enum { N = 4096 + 200 };
    static uint64_t words[N / 8 + 1];
    uint8_t *b = (uint8_t *)words;
    for (size_t i = 0; i < sizeof words; i++) b[i] = (uint8_t)(i * 167u + 13u);
    static const size_t ns[] = {0, 7, 8, 120, 127, 128, 129, 136, 255, 256, 1000, 4096, N};
    for (size_t off = 0; off < 2; off++)
        for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
            size_t n = off && ns[i] >= 8 ? ns[i] - 8 : ns[i];
            const uint8_t *p = b + 8 * off;
            uint64_t want = 0;
            for (size_t w = 0; w < n / 8; w++) want ^= ((const uint64_t *)p)[w];
            CHECK_EQ(qhx_k_read_fold_ref(p, n), want);
            CHECK_EQ(qhx_k_read_fold_avx2(p, n), want);
        }
}
static const int64_t q4cols[] = {32, 64, 96, 1024, 2048};

/* An activation block holding a NaN or an infinity must make every output NaN, as the f32 path
 * does, not a finite number from a saturated int8 code. Odd group counts (3, 9) take the tail
 * paths. */
static void check_i8x_nonfinite(qhx_matvec_fn mv, qhx_wfmt fmt) {
    static const int64_t cols[] = {96, 288, 2048};
    static const float bad[] = {NAN, INFINITY, -INFINITY};
    for (int c = 0; c < 3; c++)
        for (int b = 0; b < 3; b++) {
            qhx_weight w = kc_make_weight(fmt, 5, cols[c]);
            float *x = kc_nan((size_t)cols[c]), *y = kc_nan(5);
            for (int64_t i = 0; i < cols[c]; i++) x[i] = kc_unif();
            x[cols[c] / 2 + 1] = bad[b];
            mv(&w, x, y, 0, 5);
            CHECK(kc_all_nan(y, 5));
            x[cols[c] / 2 + 1] = 0.5f;
            mv(&w, x, y, 0, 5);
            CHECK(kc_all_finite(y, 5));
            free(x);
            free(y);
            kc_free_weight(&w);
        }
}

/* Two builds of one Q4 int8-activation matvec that compute the same integers in the same order
 * (q4i8x_avx2.c and its AVX-VNNI build): equal bit for bit, odd group counts included. */
static void check_same_matvec(qhx_matvec_fn a, qhx_matvec_fn b, qhx_wfmt fmt) {
    static const int64_t cols[] = {32, 96, 288, 2048, 6144};
    for (int c = 0; c < 5; c++) {
        qhx_weight w = kc_make_weight(fmt, 37, cols[c]);
        float *x = kc_nan((size_t)cols[c]), *ya = kc_nan(37), *yb = kc_nan(37);
        for (int64_t i = 0; i < cols[c]; i++) x[i] = kc_unif() * (float)(1 + i % 7);
        a(&w, x, ya, 0, 37);
        b(&w, x, yb, 0, 37);
        CHECK(memcmp(ya, yb, 37 * sizeof(float)) == 0);
        free(x), free(ya), free(yb);
        kc_free_weight(&w);
    }
}

/* The AVX-512 build of the chunked delta rule (delta_avx512.c) against the AVX2 build: the same
 * bits for the 128-wide heads it keeps in registers (one full chunk, a partial one, C = 16) and
 * for the sizes it hands on; the AVX2 build itself is checked against the reference in
 * test_kernels_attn. */
static void check_delta_avx512(void) {
    static const int64_t shapes[][4] = {/* n, dk, dv, C */ {150, 128, 128, 64}, {64, 128, 128, 64},
                                        {37, 128, 128, 16}, {33, 16, 16, 8}, {20, 128, 64, 64}};
    for (int si = 0; si < 5; si++) {
        int64_t n = shapes[si][0], dk = shapes[si][1], dv = shapes[si][2], C = shapes[si][3];
        float *q = kc_nan((size_t)(n * dk)), *kk = kc_nan((size_t)(n * dk)), *v = kc_nan((size_t)(n * dv));
        float *beta = kc_nan((size_t)n), *g = kc_nan((size_t)n);
        for (int64_t i = 0; i < n * dk; i++) q[i] = kc_unif(), kk[i] = kc_unif();
        for (int64_t i = 0; i < n * dv; i++) v[i] = kc_unif();
        for (int64_t t = 0; t < n; t++) {
            qhx_k_l2norm_f32_ref(q + t * dk, dk, 1e-6f);
            qhx_k_l2norm_f32_ref(kk + t * dk, dk, 1e-6f);
            beta[t] = 0.5f + 0.25f * (kc_unif() + 1.0f), g[t] = -0.05f * (kc_unif() + 1.0f);
        }
        float *S1 = kc_nan((size_t)(dk * dv)), *S2 = kc_nan((size_t)(dk * dv));
        for (int64_t i = 0; i < dk * dv; i++) S1[i] = S2[i] = 0.2f * kc_unif();
        float *o1 = kc_nan((size_t)(n * dv)), *o2 = kc_nan((size_t)(n * dv));
        float *work = kc_nan((size_t)qhx_k_delta_chunked_work(C, dk, dv));
        qhx_k_delta_chunked_f32_avx2(S1, q, dk, kk, dk, v, dv, beta, g, 1, o1, dv, n, dk, dv, C, work);
        qhx_k_delta_chunked_f32_avx512(S2, q, dk, kk, dk, v, dv, beta, g, 1, o2, dv, n, dk, dv, C, work);
        CHECK(kc_all_finite(o2, n * dv));
        CHECK(memcmp(o1, o2, (size_t)(n * dv) * sizeof(float)) == 0);
        CHECK(memcmp(S1, S2, (size_t)(dk * dv) * sizeof(float)) == 0);
        free(q), free(kk), free(v), free(beta), free(g), free(S1), free(S2), free(o1), free(o2), free(work);
    }
}

#define V(isa, f, F) {#f "_" #isa, F, qhx_k_matvec_##f##_##isa, qhx_k_matmul_##f##_##isa, 0}

int main(void) {
    qhx_cpu_info cpu;
    qhx_cpu_detect(&cpu);
    int has2 = (cpu.features & QHX_CPU_GROUP_AVX2) == QHX_CPU_GROUP_AVX2;
    int has512 = (cpu.features & QHX_CPU_GROUP_AVX512) == QHX_CPU_GROUP_AVX512;
    int nsz = (int)(sizeof sizes / sizeof sizes[0]), nq4 = (int)(sizeof q4cols / sizeof q4cols[0]);
    if (has2) {
        const kc_variant vs[] = {V(avx2, f32, QHX_W_F32), V(avx2, f16, QHX_W_F16),
                                 V(avx2, bf16, QHX_W_BF16), V(avx2, q8, QHX_W_Q8),
                                 V(avx2, q4, QHX_W_Q4)};
        kc_run_all(vs, 5, sizes, nsz, q4cols, nq4);
        const kc_variant vi[] = {{"q4_i8x_avx2", QHX_W_Q4, qhx_k_matvec_q4_i8x_avx2,
                                  qhx_k_matmul_q4_i8x_avx2, 1}};
        kc_run_all(vi, 1, sizes, nsz, q4cols, nq4);
        static const int64_t wide[] = {8192, 8224}; /* the last that quantizes x, the first that does not */
        kc_check_variant(&vi[0], sizes, 4, wide, 2, (const int[]){3}, 1);
        check_i8x_nonfinite(qhx_k_matvec_q4_i8x_avx2, QHX_W_Q4);
        const kc_variant v6[] = {{"q6_i8x_avx2", QHX_W_Q6, qhx_k_matvec_q6_i8x_avx2, qhx_k_matmul_q6_i8x_avx2, 1}};
        kc_run_all(v6, 1, sizes, nsz, q4cols, nq4);
        kc_check_variant(&v6[0], sizes, 4, wide, 2, (const int[]){3}, 1);
        check_i8x_nonfinite(qhx_k_matvec_q6_i8x_avx2, QHX_W_Q6);
        for (size_t i = 0; i < sizeof i8x_builds / sizeof i8x_builds[0]; i++) { /* the VNNI rebuilds */
            const i8x_build *b = &i8x_builds[i];
            if (!i8x_build_runs(b, cpu.features)) continue;
            const kc_variant vv[] = {{b->q4_name, QHX_W_Q4, b->q4, b->q4_mm, 1}, {b->q6_name, QHX_W_Q6, b->q6, b->q6_mm, 1}};
            kc_run_all(vv, 2, sizes, nsz, q4cols, nq4);
            kc_check_variant(&vv[0], sizes, 4, wide, 2, (const int[]){3}, 1);
            check_i8x_nonfinite(b->q4, QHX_W_Q4);
            check_i8x_nonfinite(b->q6, QHX_W_Q6);
            check_same_matvec(b->q4, qhx_k_matvec_q4_i8x_avx2, QHX_W_Q4);
            check_same_matvec(b->q6, qhx_k_matvec_q6_i8x_avx2, QHX_W_Q6);
        }
        kc_check_activations(qhx_k_silu_f32_avx2, qhx_k_swiglu_f32_avx2, qhx_k_gelu_tanh_f32_avx2);
        check_read_fold();
    } else {
        fprintf(stderr, "avx2: skipped, the CPU or OS lacks AVX2/FMA/F16C\n");
    }
    if (has512) {
        const kc_variant vs[] = {V(avx512, f32, QHX_W_F32), V(avx512, f16, QHX_W_F16),
                                 V(avx512, bf16, QHX_W_BF16), V(avx512, q8, QHX_W_Q8),
                                 V(avx512, q4, QHX_W_Q4)};
        kc_run_all(vs, 5, sizes, nsz, q4cols, nq4);
        check_delta_avx512();
        if (cpu.features & QHX_CPU_AVX512_VNNI) {
            const kc_variant vi[] = {{"q4_i8x_avx512", QHX_W_Q4, qhx_k_matvec_q4_i8x_avx512,
                                      qhx_k_matmul_q4_i8x_avx512, 1}};
            kc_run_all(vi, 1, sizes, nsz, q4cols, nq4);
        }
    } else {
        fprintf(stderr, "avx512: skipped, the CPU or OS lacks AVX-512 F/BW/VL/DQ\n");
    }

    /* install: REF/NEON leave the table alone; AVX2 and BEST fill every linear slot */
    qhx_kernels k;
    memset(&k, 0, sizeof k);
    qhx_kern_install_x86(&k, QHX_ISA_REF, &cpu);
    qhx_kern_install_x86(&k, QHX_ISA_NEON, &cpu);
    CHECK(k.matvec[QHX_W_BF16] == NULL && k.isa == QHX_ISA_REF);
    qhx_kern_install_x86(&k, QHX_ISA_BEST, NULL);
    if (has2) {
        CHECK(k.isa == (has512 ? QHX_ISA_AVX512 : QHX_ISA_AVX2));
        for (int f = QHX_W_F32; f <= QHX_W_Q4; f++) CHECK(k.matvec[f] && k.matmul[f]);
        memset(&k, 0, sizeof k);
        qhx_kern_install_x86(&k, QHX_ISA_AVX2, &cpu);
        CHECK(k.isa == QHX_ISA_AVX2 && k.matvec[QHX_W_F16] == qhx_k_matvec_f16_avx2);
    }
    /* the opt-in int8-activation Q4 variant */
    memset(&k, 0, sizeof k);
    qhx_kern_install_x86(&k, QHX_ISA_BEST, &cpu);
    qhx_kern_install_x86_i8x(&k, QHX_ISA_BEST, &cpu);
    qhx_matvec_fn i8x = has512 && (cpu.features & QHX_CPU_AVX512_VNNI) ? qhx_k_matvec_q4_i8x_avx512
                                                                       : qhx_k_matvec_q4_i8x_avx2;
    if (has2) CHECK(k.matvec[QHX_W_Q4] == i8x);
    qhx_kern_install_x86_i8x(&k, QHX_ISA_REF, &cpu); /* REF: leaves the table as it is */
    if (has2) CHECK(k.matvec[QHX_W_Q4] == i8x);
    qhx_kern_install_x86_i8x(&k, QHX_ISA_AVX2, &cpu);
    if (has2) CHECK(k.matvec[QHX_W_Q4] == qhx_k_matvec_q4_i8x_avx2);

    /* a CPU without the features gets nothing */
    qhx_cpu_info none = cpu;
    none.features = 0;
    memset(&k, 0, sizeof k);
    qhx_kern_install_x86(&k, QHX_ISA_BEST, &none);
    CHECK(k.matvec[QHX_W_F32] == NULL && k.isa == QHX_ISA_REF);

    int rc = t_done("test_kernels_simd");
    return rc ? rc : has2 || has512 ? 0 : 77;
}
#else
#include <stdio.h>

int main(void) {
    fprintf(stderr, "test_kernels_simd: no x86 variants on this architecture\n");
    return 77;
}
#endif
