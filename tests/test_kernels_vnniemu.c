// ctest-labels: kernels
/* test_kernels_vnniemu: the AVX-VNNI build of the int8 prefill GEMM (kernels/x86/gemm_i8_avxvnni.c:
 * gemm_i8_avx2.c with QHX_I8_AVXVNNI) compiled here for plain AVX2, its one AVX-VNNI instruction
 * (the 256-bit vpdpbusd) replaced by an exact AVX2 stand-in, so that the code only that build has
 * (Q8's w + 128 packing and its 128 sum q, Q4's int32 offsets, Q4A's 16 P shift) runs on hosts
 * without AVX-VNNI. Its Q8 and Q4 results must be the AVX2 build's bit for bit, its Q4A results
 * the scalar model's (qhx_k_matmul_q4a_i8gemm_ref). Where the CPU has AVX-VNNI the real build is
 * tested too (test_kernels_i8gemm, test_kernels_q4a_gemm). Exits 77 without AVX2. */
#include "kernels_check.h"

#if defined(QHX_HAVE_X86)
#include "core/cpu.h"

/* The kernel source and the stand-in are AVX2 code; the rest of the test stays baseline, so the
 * skip on a CPU without AVX2 runs none of it. */
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif
#include <immintrin.h>

/* vpdpbusd: per 32-bit lane, src + the four products of an unsigned byte of a and the signed byte
 * of b at the same place, in int32 without saturation. Here: bytes widened to int16 (even and odd
 * bytes apart), vpmaddwd adds two products per lane (each |.| <= 255 * 128, exact in int32). */
static inline __attribute__((always_inline)) __m256i emu_dpbusd(__m256i src, __m256i a, __m256i b) {
    const __m256i lo8 = _mm256_set1_epi16(0xff);
    __m256i a_even = _mm256_and_si256(a, lo8), a_odd = _mm256_srli_epi16(a, 8);
    __m256i b_even = _mm256_srai_epi16(_mm256_slli_epi16(b, 8), 8), b_odd = _mm256_srai_epi16(b, 8);
    __m256i p = _mm256_add_epi32(_mm256_madd_epi16(a_even, b_even), _mm256_madd_epi16(a_odd, b_odd));
    return _mm256_add_epi32(src, p);
}
static void emu_dpbusd_store(const uint8_t *a, const int8_t *b, const int32_t *src, int32_t *out) {
    __m256i r = emu_dpbusd(_mm256_loadu_si256((const __m256i *)src), _mm256_loadu_si256((const __m256i *)a),
                           _mm256_loadu_si256((const __m256i *)b));
    _mm256_storeu_si256((__m256i *)out, r);
}

#define _mm256_dpbusd_avx_epi32 emu_dpbusd
/* the emulated build gets its own names, apart from the real one in the library */
#define qhx_k_matmul_q8_i8gemm_avxvnni emu_matmul_q8_i8gemm_avxvnni
#define qhx_k_matmul_q4_i8gemm_avxvnni emu_matmul_q4_i8gemm_avxvnni
#define qhx_k_matmul_q4a_i8gemm_avxvnni emu_matmul_q4a_i8gemm_avxvnni
#include "kernels/x86/gemm_i8_avxvnni.c"
#undef _mm256_dpbusd_avx_epi32

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

/* The stand-in against the instruction's definition, on random bytes including the extremes. */
static void check_dpbusd(void) {
    int bad = 0;
    for (int it = 0; it < 2000; it++) {
        uint8_t a[32];
        int8_t b[32];
        int32_t src[8], got[8];
        for (int i = 0; i < 32; i++) {
            a[i] = it < 4 ? (uint8_t)(it & 1 ? 255 : 0) : (uint8_t)kc_next();
            b[i] = it < 4 ? (int8_t)(it & 2 ? -128 : 127) : (int8_t)kc_next();
        }
        for (int j = 0; j < 8; j++) src[j] = (int32_t)(kc_next() % 2000001) - 1000000;
        emu_dpbusd_store(a, b, src, got);
        for (int j = 0; j < 8; j++) {
            int32_t want = src[j];
            for (int k = 0; k < 4; k++) want += (int32_t)a[4 * j + k] * (int32_t)b[4 * j + k];
            bad += got[j] != want;
        }
    }
    CHECK_EQ(bad, 0);
}

/* X (n, ldx): each block of 32 with its own magnitude in [0.01, 10]. */
static float *make_x(int64_t n, int64_t cols, int64_t ldx) {
    float *X = kc_nan((size_t)(n * ldx));
    for (int64_t t = 0; t < n; t++)
        for (int64_t b = 0; b < cols / 32; b++) {
            float mag = powf(10.0f, 3.0f * (kc_unif() + 1.0f) / 2.0f - 3.0f) * 10.0f;
            for (int i = 0; i < 32; i++) X[t * ldx + 32 * b + i] = mag * kc_unif();
        }
    return X;
}

/* The emulated build against `want` (the AVX2 build, or the Q4A model) bit for bit, the padding
 * of Y untouched; then two row pieces. A NaN in one token: its outputs NaN. */
static void check_one(qhx_wfmt fmt, qhx_matmul_fn emu, qhx_matmul_fn want, int64_t R, int64_t C, int64_t n) {
    qhx_weight w = kc_make_weight(fmt, R, C);
    const int64_t ldx = C + 3, ldy = R + 2;
    float *X = make_x(n, C, ldx), *Y = kc_nan((size_t)(n * ldy)), *Z = kc_nan((size_t)(n * ldy));
    emu(&w, X, ldx, Y, ldy, n, 0, R);
    want(&w, X, ldx, Z, ldy, n, 0, R);
    int same = memcmp(Y, Z, (size_t)(n * ldy) * sizeof(float)) == 0, finite = 1;
    for (int64_t t = 0; t < n; t++) finite &= kc_all_finite(Y + t * ldy, R) && kc_all_nan(Y + t * ldy + R, ldy - R);
    if (!same)
        fprintf(stderr, "%s %lldx%lld n=%lld: the emulated AVX-VNNI build differs\n", fmt == QHX_W_Q8 ? "q8" : fmt == QHX_W_Q4 ? "q4" : "q4a",
                (long long)R, (long long)C, (long long)n);
    CHECK(same);
    CHECK(finite);
    for (size_t k = 0; k < (size_t)(n * ldy); k++) Z[k] = NAN;
    emu(&w, X, ldx, Z, ldy, n, R / 2, R);
    emu(&w, X, ldx, Z, ldy, n, 0, R / 2);
    CHECK(memcmp(Y, Z, (size_t)(n * ldy) * sizeof(float)) == 0);
    X[(n - 1) * ldx + C / 2] = NAN;
    emu(&w, X, ldx, Z, ldy, n, 0, R);
    CHECK(kc_all_nan(Z + (n - 1) * ldy, R));
    free(X), free(Y), free(Z);
    kc_free_weight(&w);
}

int main(void) {
    (void)kc_run_all;
    qhx_cpu_info cpu;
    qhx_cpu_detect(&cpu);
    if ((cpu.features & QHX_CPU_GROUP_AVX2) != QHX_CPU_GROUP_AVX2) {
        fprintf(stderr, "test_kernels_vnniemu: skipped, the CPU or OS lacks AVX2/FMA/F16C\n");
        return 77;
    }
    check_dpbusd();
    static const int64_t rows[] = {1, 17, 50};
    static const int64_t cols[] = {32, 288, 2080};
    static const int64_t ns[] = {1, 5, 13};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 3; k++) {
                check_one(QHX_W_Q8, emu_matmul_q8_i8gemm_avxvnni, qhx_k_matmul_q8_i8gemm_avx2, rows[i], cols[j], ns[k]);
                check_one(QHX_W_Q4, emu_matmul_q4_i8gemm_avxvnni, qhx_k_matmul_q4_i8gemm_avx2, rows[i], cols[j], ns[k]);
                check_one(QHX_W_Q4A, emu_matmul_q4a_i8gemm_avxvnni, qhx_k_matmul_q4a_i8gemm_ref, rows[i], cols[j], ns[k]);
            }
    check_one(QHX_W_Q4A, emu_matmul_q4a_i8gemm_avxvnni, qhx_k_matmul_q4a_i8gemm_ref, 45, 2048, 131);
    check_one(QHX_W_Q4A, emu_matmul_q4a_i8gemm_avxvnni, qhx_k_matmul_q4a_i8gemm_avx2, 33, 6144, 7);
    return t_done("test_kernels_vnniemu");
}
#else
int main(void) {
    fprintf(stderr, "test_kernels_vnniemu: no x86 variants on this architecture\n");
    return 77;
}
#endif
