/* kernels/x86/exp_avx2.h: the 8-lane helpers the AVX2 element-wise ops and the chunked delta
 * rule share (ops_avx2.c, delta_avx2.c, delta_avx512.c): a horizontal sum and Cephes-style exp.
 * Include only from files built with at least -mavx2 -mfma. */
#ifndef QHX_KERNELS_X86_EXP_AVX2_H
#define QHX_KERNELS_X86_EXP_AVX2_H

#include <immintrin.h>

#ifndef AI
#define AI static inline __attribute__((always_inline))
#endif

AI float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Cephes expf's core: x = n ln 2 + r (n = round(x / ln 2), ln 2 split in two for the
 * subtraction), exp(r) by a degree-5 polynomial; returns exp(r) and sets *n. ~2 ulp. */
AI __m256 exp_reduce(__m256 x, __m256i *n) {
    __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    *n = _mm256_cvtps_epi32(fx);
    return _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
}

/* 2^n as a float, for n in [-126, 127]. */
AI __m256 pow2i(__m256i n) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23));
}

/* exp(x) for x <= 0. Inputs below -87.3 give 0. */
AI __m256 exp_neg(__m256 x) {
    const __m256 lo = _mm256_set1_ps(-87.3f);
    __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    __m256i n;
    __m256 p = exp_reduce(_mm256_max_ps(x, lo), &n);
    return _mm256_andnot_ps(under, _mm256_mul_ps(p, pow2i(n)));
}

/* exp(x) over the whole float range: 2^n applied as two factors 2^(n/2) 2^(n - n/2), so that
 * results past the float range overflow to +inf and tiny ones underflow gradually (to
 * subnormals, then 0) as expf's do, instead of wrapping the exponent. Inputs are clamped to
 * [-104, 88.8], beyond which both are settled. NaN in gives a finite value here; the callers
 * below carry NaN through x itself. */
AI __m256 exp_any(__m256 x) {
    __m256i n;
    __m256 p = exp_reduce(_mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-104.0f)), _mm256_set1_ps(88.8f)), &n);
    __m256i n1 = _mm256_srai_epi32(n, 1);
    return _mm256_mul_ps(_mm256_mul_ps(p, pow2i(n1)), pow2i(_mm256_sub_epi32(n, n1)));
}

#endif
