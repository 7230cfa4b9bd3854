/* kernels/x86/ggml_blocks_avx2.h: what the AVX2 kernels of the ggml block types share (the f32
 * ones, ggml_avx2.c, and the integer ones, ggml_i8_avx2.c): each type's block geometry and the
 * loads that widen a block's nibbles and fifth bits. Included only by those files, which are
 * built with AVX2 and F16C. */
#ifndef QHX_KERNELS_X86_GGML_BLOCKS_AVX2_H
#define QHX_KERNELS_X86_GGML_BLOCKS_AVX2_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "core/ggml_type.h"

#define AI static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 32")
#define QK_K QHX_GGML_QK_K

/* ---- block geometry (constants once the type is) ------------------------------------------- */

AI int blk_vals(uint32_t t) {
    switch (t) {
    case QHX_GGML_Q8_0: case QHX_GGML_Q4_0: case QHX_GGML_Q4_1: case QHX_GGML_Q5_0: case QHX_GGML_Q5_1:
    case QHX_GGML_IQ4_NL: return 32;
    default: return QK_K;
    }
}

AI int blk_bytes(uint32_t t) {
    switch (t) {
    case QHX_GGML_Q8_0: return 34;
    case QHX_GGML_Q4_0: return 18;
    case QHX_GGML_Q4_1: return 20;
    case QHX_GGML_Q5_0: return 22;
    case QHX_GGML_Q5_1: return 24;
    case QHX_GGML_IQ4_NL: return 18;
    case QHX_GGML_Q2_K: return 84;
    case QHX_GGML_Q3_K: return 110;
    case QHX_GGML_Q4_K: return 144;
    case QHX_GGML_Q5_K: return 176;
    case QHX_GGML_Q6_K: return 210;
    default: return 136; /* IQ4_XS */
    }
}

/* ---- loads and widening -------------------------------------------------------------------- */

AI float f16at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h); /* exact, as core/fp16.h's widening */
}
AI __m256i ld32(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }
AI __m128i ld16(const uint8_t *p) { return _mm_loadu_si128((const __m128i *)p); }
AI __m256i bytes(int v) { return _mm256_set1_epi8((char)v); }

/* The 16 bytes at p as 32 nibbles in value order: low nibbles (values 0-15), then high (16-31). */
AI __m256i nibbles16(const uint8_t *p) {
    __m128i q = ld16(p), m = _mm_set1_epi8(15);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m), _mm_and_si128(q, m));
}

/* Byte j = 16 where bit j of the little-endian 32-bit word at p is set, else 0 (Q5's fifth bits). */
AI __m256i bit4_of_bits32(const uint8_t *p) {
    uint32_t x;
    memcpy(&x, p, 4);
    const __m256i spread = _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL, 0x0303030303030303LL);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)x), spread); /* byte j = byte j / 8 of x */
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit), bytes(16));
}

/* Q6_K's 256 codes less 32, 32 per vector in value order: per 128 values, ql[l] and ql[l + 32]
 * give the low nibbles of values l + 32 k, qh[l] their top two bits (bits 2k, 2k + 1). */
AI void q6k_codes(const uint8_t *b, __m256i q[8]) {
    const __m256i m15 = bytes(15), m3 = bytes(3), bias = bytes(32);
    UNROLL
    for (int h = 0; h < 2; h++) {
        __m256i ql0 = ld32(b + 64 * h), ql1 = ld32(b + 64 * h + 32), qh = ld32(b + 128 + 32 * h);
        __m256i lo[4] = {_mm256_and_si256(ql0, m15), _mm256_and_si256(ql1, m15),
                         _mm256_and_si256(_mm256_srli_epi16(ql0, 4), m15), _mm256_and_si256(_mm256_srli_epi16(ql1, 4), m15)};
        UNROLL
        for (int k = 0; k < 4; k++) {
            __m256i hi = _mm256_slli_epi16(_mm256_and_si256(qh, m3), 4);
            qh = _mm256_srli_epi16(qh, 2);
            q[4 * h + k] = _mm256_sub_epi8(_mm256_or_si256(lo[k], hi), bias);
        }
    }
}

#endif
