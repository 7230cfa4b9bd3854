/* kernels/x86/tile_avx2.h: loading and storing the f32 accumulators of a GEMM register tile of
 * T tokens x 16 rows (two vectors of 8 row lanes per token), shared by the packed f32 GEMM
 * (gemm_avx2.c) and the int8 GEMM (gemm_i8_avx2.c). Include only from files built with
 * -mavx2 -mfma -mf16c. */
#ifndef QHX_KERNELS_X86_TILE_AVX2_H
#define QHX_KERNELS_X86_TILE_AVX2_H

#include <immintrin.h>
#include <stdint.h>

/* Lane masks for a panel holding nr of its 16 rows. */
static inline __attribute__((always_inline)) void tile_masks(int nr, __m256i *m0, __m256i *m1) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    *m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(nr), lane);
    *m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(nr - 8), lane);
}

/* Accumulators of T tokens x 16 rows: zeros at the first column block, else the partial sums
 * stored in Y (rows of stride ldy; only nr of the 16 lanes exist). */
static inline __attribute__((always_inline)) void tile_acc_load(__m256 acc[][2], const float *Y, int64_t ldy, int T,
                                                                int nr, int first) {
    __m256i m0, m1;
    tile_masks(nr, &m0, &m1);
    _Pragma("GCC unroll 32")
    for (int t = 0; t < T; t++) {
        if (first) {
            acc[t][0] = acc[t][1] = _mm256_setzero_ps();
        } else if (nr == 16) {
            acc[t][0] = _mm256_loadu_ps(Y + t * ldy);
            acc[t][1] = _mm256_loadu_ps(Y + t * ldy + 8);
        } else {
            acc[t][0] = _mm256_maskload_ps(Y + t * ldy, m0);
            acc[t][1] = _mm256_maskload_ps(Y + t * ldy + 8, m1);
        }
    }
}

/* Store the accumulators, times the row scales `scale` when given (16 readable floats; lanes
 * past nr are not stored). */
static inline __attribute__((always_inline)) void tile_acc_store(__m256 acc[][2], float *Y, int64_t ldy, int T, int nr,
                                                                 const float *scale) {
    __m256i m0, m1;
    tile_masks(nr, &m0, &m1);
    _Pragma("GCC unroll 32")
    for (int t = 0; t < T; t++) {
        __m256 a0 = acc[t][0], a1 = acc[t][1];
        if (scale) {
            a0 = _mm256_mul_ps(a0, _mm256_loadu_ps(scale));
            a1 = _mm256_mul_ps(a1, _mm256_loadu_ps(scale + 8));
        }
        if (nr == 16) {
            _mm256_storeu_ps(Y + t * ldy, a0);
            _mm256_storeu_ps(Y + t * ldy + 8, a1);
        } else {
            _mm256_maskstore_ps(Y + t * ldy, m0, a0);
            _mm256_maskstore_ps(Y + t * ldy + 8, m1, a1);
        }
    }
}

#endif
