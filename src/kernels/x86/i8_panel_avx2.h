/* kernels/x86/i8_panel_avx2.h: the pieces of the int8 GEMM's weight packing that the AVX2,
 * AVX-VNNI and AVX-512 builds share (gemm_i8_avx2.c, gemm_i8_avxvnni.c, gemm_i8_avx512.c): the
 * codes of 32 columns of one row, the 8 x 8 transpose of 4-column quads, and the Q4A group
 * factors. Include only from
 * files built with at least -mavx2 -mfma -mf16c. */
#ifndef QHX_KERNELS_X86_I8_PANEL_AVX2_H
#define QHX_KERNELS_X86_I8_PANEL_AVX2_H

#include <immintrin.h>
#include <stdint.h>

#include "kernels/kernels.h"
#include "kernels/x86/f16_x86.h"

/* 8 x 8 transpose of 32-bit elements: in v[i] element j is row i's quad j; out v[j] holds quad
 * j of rows 0..7. */
static inline __attribute__((always_inline)) void transpose_quads(__m256i v[8]) {
    __m256i t0 = _mm256_unpacklo_epi32(v[0], v[1]), t1 = _mm256_unpackhi_epi32(v[0], v[1]);
    __m256i t2 = _mm256_unpacklo_epi32(v[2], v[3]), t3 = _mm256_unpackhi_epi32(v[2], v[3]);
    __m256i t4 = _mm256_unpacklo_epi32(v[4], v[5]), t5 = _mm256_unpackhi_epi32(v[4], v[5]);
    __m256i t6 = _mm256_unpacklo_epi32(v[6], v[7]), t7 = _mm256_unpackhi_epi32(v[6], v[7]);
    __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
    __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
    __m256i u4 = _mm256_unpacklo_epi64(t4, t6), u5 = _mm256_unpackhi_epi64(t4, t6);
    __m256i u6 = _mm256_unpacklo_epi64(t5, t7), u7 = _mm256_unpackhi_epi64(t5, t7);
    v[0] = _mm256_permute2x128_si256(u0, u4, 0x20);
    v[1] = _mm256_permute2x128_si256(u1, u5, 0x20);
    v[2] = _mm256_permute2x128_si256(u2, u6, 0x20);
    v[3] = _mm256_permute2x128_si256(u3, u7, 0x20);
    v[4] = _mm256_permute2x128_si256(u0, u4, 0x31);
    v[5] = _mm256_permute2x128_si256(u1, u5, 0x31);
    v[6] = _mm256_permute2x128_si256(u2, u6, 0x31);
    v[7] = _mm256_permute2x128_si256(u3, u7, 0x31);
}

/* The 32 codes of row `row`, columns [k, k + 32): Q8 bytes as stored; Q4 nibbles (0..15) in
 * column order (docs/formats.md: byte i holds value i low and value i + 16 high). */
static inline __attribute__((always_inline)) __m256i load_codes(const qhx_weight *w, int q4, int64_t row, int64_t k) {
    if (!q4) return _mm256_loadu_si256((const __m256i *)((const int8_t *)w->data + row * w->cols + k));
    __m128i b = _mm_loadu_si128((const __m128i *)((const uint8_t *)w->data + row * (w->cols / 2) + k / 2));
    const __m128i lo4 = _mm_set1_epi8(0x0f);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), lo4), _mm_and_si128(b, lo4));
}

/* Q4A row `row`, groups [g0, g0 + nb): c[b * stride] = f32(d) 2^-12 s (exact, as
 * kernels/ref/quant_q4a.c forms it) and z[b * stride] = the zero point; both 0 where !valid (a
 * panel row past the end). docs/formats.md, "Q4A". */
static inline void q4a_factors(const qhx_weight *w, int64_t row, int valid, int64_t g0, int nb, float *c, int32_t *z,
                               int stride) {
    const int64_t ng = w->cols / 32, ns = (ng + 7) / 8;
    for (int b = 0; b < nb; b++) {
        const int64_t g = g0 + b;
        c[b * stride] = valid ? qhx_x86_f16(w->gscales + row * ns + g / 8) * 0x1p-12f * (float)w->sub[row * 2 * ng + 2 * g] : 0.0f;
        z[b * stride] = valid ? w->sub[row * 2 * ng + 2 * g + 1] : 0;
    }
}

#endif
