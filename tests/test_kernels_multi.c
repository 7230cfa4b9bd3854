// ctest-labels: unit;kernels
/* test_kernels_multi: the multi-row matvecs (kernels.h qhx_matvec_multi_fn, Q4 and Q6) against their
 * single-row kernels, bit for bit: y[b] of one multi-row call over nb activation rows must equal
 * the single-row call on x[b], for nb = 1..8 and beyond the bound (in turn), odd group counts,
 * the shapes that fall back to other paths, a row with a NaN, and the row range cut into pieces
 * the way the pool cuts it. Then the pairing in the op table. */
#include "kernels_check.h"
#if defined(QHX_HAVE_X86)
#include "core/cpu.h"
#include "kernels/x86/ops_x86.h"
#include "kernels/x86/x86.h"
#include "i8x_builds.h"
#endif

#include <string.h>

enum { MAX_NB = 11, ROWS = 37 };

/* Cut [0, rows) at these points (then rows): whole, one row, odd pieces, the pool's tiles. */
static const int64_t cuts[][4] = {{ROWS, 0, 0, 0}, {1, ROWS, 0, 0}, {5, 6, 21, ROWS}, {16, 32, ROWS, 0}};
static const int n_cuts[] = {1, 2, 4, 3};

static qhx_wfmt pair_fmt = QHX_W_Q4; /* the weight format check_pair_shape makes */

static void check_pair_shape(const char *name, qhx_matvec_fn one, qhx_matvec_multi_fn multi, int64_t cols,
                             int64_t group, int nb) {
    kc_q4_group = group;
    qhx_weight w = kc_make_weight(pair_fmt, ROWS, cols);
    float *x[MAX_NB], *want[MAX_NB], *got[MAX_NB];
    for (int b = 0; b < nb; b++) {
        x[b] = kc_nan((size_t)cols), want[b] = kc_nan(ROWS), got[b] = kc_nan(ROWS);
        float mag = (float)(1 + b) * (b % 3 == 2 ? 100.0f : 1.0f);
        for (int64_t i = 0; i < cols; i++) x[b][i] = mag * kc_unif() * (float)(1 + (i + b) % 7);
    }
    if (nb > 2) x[2][cols / 2] = NAN; /* row 2 only: every other row stays finite */
    for (int b = 0; b < nb; b++) one(&w, x[b], want[b], 0, ROWS);
    for (int c = 0; c < (int)(sizeof cuts / sizeof cuts[0]); c++) {
        for (int b = 0; b < nb; b++)
            for (int64_t r = 0; r < ROWS; r++) got[b][r] = -1.0f;
        int64_t r0 = 0;
        for (int p = 0; p < n_cuts[c]; p++) {
            multi(&w, (const float *const *)x, got, nb, r0, cuts[c][p]);
            r0 = cuts[c][p];
        }
        for (int b = 0; b < nb; b++) {
            int same = memcmp(want[b], got[b], ROWS * sizeof(float)) == 0;
            if (!same)
                fprintf(stderr, "%s: cols %lld group %lld nb %d cut %d: row %d differs\n", name, (long long)cols,
                        (long long)group, nb, c, b);
            CHECK(same);
            if (b != 2) CHECK(kc_all_finite(got[b], ROWS));
        }
    }
    if (nb > 2) CHECK(kc_all_nan(got[2], ROWS));
    for (int b = 0; b < nb; b++) free(x[b]), free(want[b]), free(got[b]);
    kc_free_weight(&w);
    kc_q4_group = QHX_Q4_GROUP;
}

/* cols: one group, odd group counts (3, 9, 65), the 2B shapes, the widest that quantizes x
 * (8192) and one past it (the exact fallback); group 64 also takes a fallback on x86. */
static void check_pair(const char *name, qhx_matvec_fn one, qhx_matvec_multi_fn multi) {
    static const int64_t cols[] = {32, 96, 288, 2080, 2048, 6144, 8192, 8224};
    for (int c = 0; c < (int)(sizeof cols / sizeof cols[0]); c++)
        for (int nb = 1; nb <= MAX_NB; nb++) {
            if (cols[c] >= 6144 && nb % 3 != 1 && nb != 8) continue; /* the wide ones at nb 1, 4, 7, 8, 10 */
            check_pair_shape(name, one, multi, cols[c], 32, nb);
        }
    for (int nb = 1; nb <= 8; nb += 3) check_pair_shape(name, one, multi, 256, 64, nb);
}

#if defined(QHX_HAVE_X86)
/* The float-activation twins (F32, F16, BF16, Q8): cols with and without a vector tail. */
static void check_float_pairs(const char *isa, const qhx_matvec_fn one[4], const qhx_matvec_multi_fn multi[4]) {
    static const qhx_wfmt fmts[4] = {QHX_W_F32, QHX_W_F16, QHX_W_BF16, QHX_W_Q8};
    static const char *names[4] = {"f32", "f16", "bf16", "q8"};
    static const int64_t cols[] = {3, 17, 32, 100, 2048, 2051};
    for (int f = 0; f < 4; f++) {
        char name[64];
        snprintf(name, sizeof name, "%s_%s", names[f], isa);
        pair_fmt = fmts[f];
        for (int c = 0; c < (int)(sizeof cols / sizeof cols[0]); c++)
            for (int nb = 1; nb <= MAX_NB; nb += (cols[c] > 1000 ? 3 : 1)) check_pair_shape(name, one[f], multi[f], cols[c], 32, nb);
    }
    pair_fmt = QHX_W_Q4;
}
#endif

/* The table pairs a multi-row kernel only with its own single-row kernel. */
static void check_pairing(void) {
    qhx_kernels k;
    qhx_kern_select(QHX_ISA_REF, &k);
    CHECK(k.matvec_multi[QHX_W_Q4] == qhx_k_matvec_multi_q4_ref);
    CHECK(k.matvec_multi[QHX_W_Q8] == NULL && k.matvec_multi[QHX_W_F32] == NULL); /* the references have none */
    k.matvec[QHX_W_Q4] = qhx_k_matvec_q8_ref; /* a kernel without a twin */
    qhx_kern_pair_multi(&k);
    CHECK(k.matvec_multi[QHX_W_Q4] == NULL);
#if defined(QHX_HAVE_X86)
    qhx_cpu_info cpu;
    qhx_cpu_detect(&cpu);
    if ((cpu.features & QHX_CPU_GROUP_AVX2) != QHX_CPU_GROUP_AVX2) return;
    qhx_kern_select(QHX_ISA_AVX2, &k);
    CHECK(k.matvec_multi[QHX_W_Q4] == NULL); /* the int16-activation decode kernel has none */
    qhx_kern_use_int8(QHX_ISA_AVX2, 0, 1u << QHX_W_Q4, &k);
    qhx_matvec_multi_fn want = cpu.features & QHX_CPU_AVX_VNNI ? qhx_k_matvec_multi_q4_i8x_avxvnni
                                                                : qhx_k_matvec_multi_q4_i8x_avx2;
    CHECK(k.matvec_multi[QHX_W_Q4] == want);
    CHECK(k.matvec_multi[QHX_W_Q8] == qhx_k_matvec_multi_q8_x16_avx2); /* the AVX2 table's int16 Q8 decode */
    CHECK(k.matvec_multi[QHX_W_F16] == qhx_k_matvec_multi_f16_avx2);
    CHECK(k.matvec_multi[QHX_W_Q6] == NULL); /* the Q6 matvec is the reference until the int8 switch */
    qhx_kern_use_int8(QHX_ISA_AVX2, 0, 1u << QHX_W_Q6, &k);
    CHECK(k.matvec_multi[QHX_W_Q6] == (cpu.features & QHX_CPU_AVX_VNNI ? qhx_k_matvec_multi_q6_i8x_avxvnni
                                                                       : qhx_k_matvec_multi_q6_i8x_avx2));
    /* an AVX-512 table on a VNNI CPU: the EVEX build and its twin, whose tiles are the widest */
    const unsigned vnni512 = QHX_CPU_GROUP_AVX512 | QHX_CPU_AVX512_VNNI;
    if ((cpu.features & vnni512) != vnni512) return;
    qhx_kern_select(QHX_ISA_AVX512, &k);
    qhx_kern_use_int8(QHX_ISA_AVX512, 0, 1u << QHX_W_Q4 | 1u << QHX_W_Q6, &k);
    CHECK(k.matvec_multi[QHX_W_Q4] == qhx_k_matvec_multi_q4_i8x_evex);
    CHECK(k.matvec_multi[QHX_W_Q6] == qhx_k_matvec_multi_q6_i8x_evex);
    CHECK(k.matvec_multi[QHX_W_Q8] == qhx_k_matvec_multi_q8_avx512);
#endif
}

int main(void) {
    (void)kc_run_all; /* kernels_check.h's full variant checks: test_kernels_simd runs them */
    check_pair("q4_ref", qhx_k_matvec_q4_ref, qhx_k_matvec_multi_q4_ref);
#if defined(QHX_HAVE_X86)
    qhx_cpu_info cpu;
    qhx_cpu_detect(&cpu);
    if ((cpu.features & QHX_CPU_GROUP_AVX2) == QHX_CPU_GROUP_AVX2) {
        check_pair("q4_i8x_avx2", qhx_k_matvec_q4_i8x_avx2, qhx_k_matvec_multi_q4_i8x_avx2);
        pair_fmt = QHX_W_Q6;
        check_pair("q6_i8x_avx2", qhx_k_matvec_q6_i8x_avx2, qhx_k_matvec_multi_q6_i8x_avx2);
        pair_fmt = QHX_W_Q4;
        const qhx_matvec_fn one2[4] = {qhx_k_matvec_f32_avx2, qhx_k_matvec_f16_avx2, qhx_k_matvec_bf16_avx2,
                                       qhx_k_matvec_q8_avx2};
        const qhx_matvec_multi_fn multi2[4] = {qhx_k_matvec_multi_f32_avx2, qhx_k_matvec_multi_f16_avx2,
                                               qhx_k_matvec_multi_bf16_avx2, qhx_k_matvec_multi_q8_avx2};
        check_float_pairs("avx2", one2, multi2);
        pair_fmt = QHX_W_Q8;
        check_pair("q8_x16_avx2", qhx_k_matvec_q8_x16_avx2, qhx_k_matvec_multi_q8_x16_avx2);
        pair_fmt = QHX_W_Q4;
        if ((cpu.features & QHX_CPU_GROUP_AVX512) == QHX_CPU_GROUP_AVX512) {
            const qhx_matvec_fn one5[4] = {qhx_k_matvec_f32_avx512, qhx_k_matvec_f16_avx512, qhx_k_matvec_bf16_avx512,
                                           qhx_k_matvec_q8_avx512};
            const qhx_matvec_multi_fn multi5[4] = {qhx_k_matvec_multi_f32_avx512, qhx_k_matvec_multi_f16_avx512,
                                                   qhx_k_matvec_multi_bf16_avx512, qhx_k_matvec_multi_q8_avx512};
            check_float_pairs("avx512", one5, multi5);
        } else {
            fprintf(stderr, "avx-512: skipped, the CPU or OS lacks AVX-512\n");
        }
        for (size_t i = 0; i < sizeof i8x_builds / sizeof i8x_builds[0]; i++) { /* the VNNI rebuilds */
            const i8x_build *b = &i8x_builds[i];
            if (!i8x_build_runs(b, cpu.features)) continue;
            check_pair(b->q4_name, b->q4, b->q4_multi);
            pair_fmt = QHX_W_Q6;
            check_pair(b->q6_name, b->q6, b->q6_multi);
            pair_fmt = QHX_W_Q4;
        }
    } else {
        fprintf(stderr, "avx2: skipped, the CPU or OS lacks AVX2\n");
    }
#endif
    check_pairing();
    return t_done("test_kernels_multi");
}
