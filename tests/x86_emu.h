/* x86_emu.h: plain-C stand-ins for the AVX-512 intrinsics that kernels/x86/linear_avx512.c uses,
 * so its tiling, tail and reduction logic can be tested on hosts without AVX-512. Include it
 * (with QHX_X86_EMU defined) instead of <immintrin.h>, never together with it.
 *
 * Each function does what Intel's guide says for its lanes: FMA rounds once (fmaf), masked loads
 * read only the selected elements and zero the rest, f16 widening is exact. Not emulated: speed,
 * floating-point exceptions and MXCSR modes (the kernels use default rounding and no DAZ/FTZ). */
#ifndef QHX_TEST_X86_EMU_H
#define QHX_TEST_X86_EMU_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/fp16.h"

typedef struct { float f[16]; } __m512;
typedef struct { int32_t i[16]; } __m512i;
typedef struct { uint8_t b[32]; } __m256i;
typedef struct { uint8_t b[16]; } __m128i;
typedef uint16_t __mmask16;

static inline __m512 _mm512_setzero_ps(void) { __m512 r; memset(&r, 0, sizeof r); return r; }

static inline __m512 _mm512_loadu_ps(const void *p) { __m512 r; memcpy(r.f, p, 64); return r; }

static inline __m512 _mm512_maskz_loadu_ps(__mmask16 m, const void *p) {
    __m512 r = _mm512_setzero_ps();
    for (int i = 0; i < 16; i++)
        if (m >> i & 1) memcpy(&r.f[i], (const char *)p + 4 * i, 4);
    return r;
}

static inline void _mm512_storeu_ps(void *p, __m512 a) { memcpy(p, a.f, 64); }

static inline __m512 _mm512_fmadd_ps(__m512 a, __m512 b, __m512 c) {
    __m512 r;
    for (int i = 0; i < 16; i++) r.f[i] = fmaf(a.f[i], b.f[i], c.f[i]);
    return r;
}

static inline __m256i _mm256_loadu_si256(const __m256i *p) { __m256i r; memcpy(r.b, p, 32); return r; }

static inline __m256i _mm256_maskz_loadu_epi16(__mmask16 m, const void *p) {
    __m256i r;
    memset(&r, 0, sizeof r);
    for (int i = 0; i < 16; i++)
        if (m >> i & 1) memcpy(&r.b[2 * i], (const char *)p + 2 * i, 2);
    return r;
}

static inline __m128i _mm_loadu_si128(const __m128i *p) { __m128i r; memcpy(r.b, p, 16); return r; }

static inline __m128i _mm_maskz_loadu_epi8(__mmask16 m, const void *p) {
    __m128i r;
    memset(&r, 0, sizeof r);
    for (int i = 0; i < 16; i++)
        if (m >> i & 1) r.b[i] = ((const uint8_t *)p)[i];
    return r;
}

static inline __m512i _mm512_cvtepu16_epi32(__m256i a) {
    __m512i r;
    for (int i = 0; i < 16; i++) {
        uint16_t h;
        memcpy(&h, &a.b[2 * i], 2);
        r.i[i] = h;
    }
    return r;
}

static inline __m512i _mm512_cvtepi8_epi32(__m128i a) {
    __m512i r;
    for (int i = 0; i < 16; i++) r.i[i] = (int8_t)a.b[i];
    return r;
}

static inline __m512i _mm512_slli_epi32(__m512i a, unsigned n) {
    __m512i r;
    for (int i = 0; i < 16; i++) r.i[i] = n > 31 ? 0 : (int32_t)((uint32_t)a.i[i] << n);
    return r;
}

static inline __m512 _mm512_castsi512_ps(__m512i a) { __m512 r; memcpy(r.f, a.i, 64); return r; }

static inline __m512 _mm512_cvtepi32_ps(__m512i a) {
    __m512 r;
    for (int i = 0; i < 16; i++) r.f[i] = (float)a.i[i];
    return r;
}

static inline __m512 _mm512_cvtph_ps(__m256i a) {
    __m512 r;
    for (int i = 0; i < 16; i++) {
        uint16_t h;
        memcpy(&h, &a.b[2 * i], 2);
        r.f[i] = qhx_f16_to_f32(h);
    }
    return r;
}

static inline __m512 _mm512_set1_ps(float v) {
    __m512 r;
    for (int i = 0; i < 16; i++) r.f[i] = v;
    return r;
}

static inline __m512 _mm512_mul_ps(__m512 a, __m512 b) {
    __m512 r;
    for (int i = 0; i < 16; i++) r.f[i] = a.f[i] * b.f[i];
    return r;
}

static inline __m128i _mm_set1_epi8(char v) {
    __m128i r;
    memset(r.b, (unsigned char)v, 16);
    return r;
}

static inline __m128i _mm_and_si128(__m128i a, __m128i b) {
    for (int i = 0; i < 16; i++) a.b[i] &= b.b[i];
    return a;
}

static inline __m128i _mm_sub_epi8(__m128i a, __m128i b) {
    for (int i = 0; i < 16; i++) a.b[i] = (uint8_t)(a.b[i] - b.b[i]);
    return a;
}

/* Shift each 16-bit lane right, bits crossing from the high byte into the low one. */
static inline __m128i _mm_srli_epi16(__m128i a, int n) {
    for (int i = 0; i < 8; i++) {
        uint16_t h = (uint16_t)(a.b[2 * i] | a.b[2 * i + 1] << 8);
        h = n > 15 ? 0 : (uint16_t)(h >> n);
        a.b[2 * i] = (uint8_t)h;
        a.b[2 * i + 1] = (uint8_t)(h >> 8);
    }
    return a;
}

/* ---- for q4i8x_avx512.c -------------------------------------------------------------------- */

#define _MM_SHUFFLE(a, b, c, d) (((a) << 6) | ((b) << 4) | ((c) << 2) | (d))

static inline __m256i _mm256_set1_epi8(char v) {
    __m256i r;
    memset(r.b, (unsigned char)v, 32);
    return r;
}

static inline __m256i _mm256_zextsi128_si256(__m128i a) {
    __m256i r;
    memset(&r, 0, sizeof r);
    memcpy(r.b, a.b, 16);
    return r;
}

static inline __m256i _mm256_and_si256(__m256i a, __m256i b) {
    for (int i = 0; i < 32; i++) a.b[i] &= b.b[i];
    return a;
}

static inline __m256i _mm256_srli_epi16(__m256i a, int n) {
    for (int i = 0; i < 16; i++) {
        uint16_t h = (uint16_t)(a.b[2 * i] | a.b[2 * i + 1] << 8);
        h = n > 15 ? 0 : (uint16_t)(h >> n);
        a.b[2 * i] = (uint8_t)h;
        a.b[2 * i + 1] = (uint8_t)(h >> 8);
    }
    return a;
}

/* Upper 256 bits undefined on hardware; zero here. */
static inline __m512i _mm512_castsi256_si512(__m256i a) {
    __m512i r;
    memset(&r, 0, sizeof r);
    memcpy(r.i, a.b, 32);
    return r;
}

static inline __m512i _mm512_inserti64x4(__m512i a, __m256i b, int imm) {
    memcpy((char *)a.i + 32 * (imm & 1), b.b, 32);
    return a;
}

/* 128-bit lanes: dst 0, 1 from a, 2, 3 from b, each chosen by two bits of imm. */
static inline __m512i _mm512_shuffle_i64x2(__m512i a, __m512i b, int imm) {
    __m512i r;
    for (int l = 0; l < 4; l++)
        memcpy((char *)r.i + 16 * l, (const char *)(l < 2 ? a.i : b.i) + 16 * (imm >> (2 * l) & 3), 16);
    return r;
}

static inline __m512i _mm512_load_si512(const void *p) { __m512i r; memcpy(r.i, p, 64); return r; }

/* src + sum of the 4 products u8(a) * s8(b) in each 32-bit lane, wrapping (no saturation). */
static inline __m512i _mm512_dpbusd_epi32(__m512i src, __m512i a, __m512i b) {
    const uint8_t *ua = (const uint8_t *)a.i;
    const int8_t *sb = (const int8_t *)b.i;
    for (int l = 0; l < 16; l++) {
        int32_t s = 0;
        for (int k = 0; k < 4; k++) s += (int32_t)ua[4 * l + k] * sb[4 * l + k];
        src.i[l] = (int32_t)((uint32_t)src.i[l] + (uint32_t)s);
    }
    return src;
}

static inline __m512 _mm512_mask_blend_ps(__mmask16 m, __m512 a, __m512 b) {
    for (int i = 0; i < 16; i++)
        if (m >> i & 1) a.f[i] = b.f[i];
    return a;
}

#endif
