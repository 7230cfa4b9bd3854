/* kernels/x86/quant_x_avx2.h: the int8 quantization of activations shared by the kernels that
 * multiply int8 codes (gemm_i8_avx2.c for prefill, q4i8x_avx2.c for decode), so both round x the
 * same way. Include only from files built with -mavx2 -mfma -mf16c.
 *
 * Per block of 32 values: dx = max|x| / 127 (f32) and codes q = x * (1 / dx) rounded to nearest,
 * ties to even (vcvtps2dq under the default MXCSR, as nearbyintf), in [-127, 127]; all 0 when
 * max|x| = 0. So |x - q dx| <= dx / 2, plus the f32 rounding of x * (1 / dx) (< 2e-5 dx; below
 * dx = 2^-120, where 1 / dx could overflow, x / dx by division). A block holding a NaN or an
 * infinity gets dx = NaN, so every output it feeds is NaN, as in the f32 path. */
#ifndef QHX_KERNELS_X86_QUANT_X_AVX2_H
#define QHX_KERNELS_X86_QUANT_X_AVX2_H

#include <immintrin.h>
#include <stdint.h>

static inline __attribute__((always_inline)) int32_t qx_hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

/* 32 values of x -> 32 codes at q, the block scale and 8 * the sum of the codes. */
static inline __attribute__((always_inline)) void qx_quantize_block(const float *x, int8_t *q, float *dx,
                                                                    int32_t *sum8) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8);
    __m256 v2 = _mm256_loadu_ps(x + 16), v3 = _mm256_loadu_ps(x + 24);
    __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(v0, abs_mask), _mm256_and_ps(v1, abs_mask)),
                             _mm256_max_ps(_mm256_and_ps(v2, abs_mask), _mm256_and_ps(v3, abs_mask)));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    float d = _mm_cvtss_f32(h) / 127.0f;
    __m256i i0, i1, i2, i3;
    if (d >= 0x1p-120f || !(d == d)) { /* the usual case: 1 / d is finite (or d is NaN) */
        __m256 s = _mm256_set1_ps(1.0f / d);
        i0 = _mm256_cvtps_epi32(_mm256_mul_ps(v0, s)), i1 = _mm256_cvtps_epi32(_mm256_mul_ps(v1, s));
        i2 = _mm256_cvtps_epi32(_mm256_mul_ps(v2, s)), i3 = _mm256_cvtps_epi32(_mm256_mul_ps(v3, s));
    } else if (d > 0.0f) { /* tiny: 1 / d may overflow, divide instead */
        __m256 s = _mm256_set1_ps(d);
        i0 = _mm256_cvtps_epi32(_mm256_div_ps(v0, s)), i1 = _mm256_cvtps_epi32(_mm256_div_ps(v1, s));
        i2 = _mm256_cvtps_epi32(_mm256_div_ps(v2, s)), i3 = _mm256_cvtps_epi32(_mm256_div_ps(v3, s));
    } else { /* all zeros */
        i0 = i1 = i2 = i3 = _mm256_setzero_si256();
    }
    /* |x * id| <= 127 (plus rounding), so the saturating packs never clip; the packs interleave
     * 32-bit pieces of the two 128-bit lanes, the permutation restores column order */
    __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
    p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_store_si256((__m256i *)q, p);
    /* a NaN or infinity converts to INT32_MIN and packs to -128, a code no finite x gets */
    int bad = _mm256_movemask_epi8(_mm256_cmpeq_epi8(p, _mm256_set1_epi8(-128)));
    *dx = bad ? __builtin_nanf("") : d;
    *sum8 = bad ? 0 : 8 * qx_hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3)));
}

#endif
