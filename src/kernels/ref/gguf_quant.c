/* kernels/ref/gguf_quant: reference dequantization of ggml's block formats. Every product is
 * written in the order ggml computes it (a scale times a sub-scale first, then times the code,
 * then the minimum subtracted), so each float32 rounding happens where ggml's does; the build
 * compiles this file with -ffp-contract=off (CMakeLists.txt). */
#include "kernels/gguf_quant.h"

#include "core/fp16.h"

#include <string.h>

#define QK_K QHX_GGML_QK_K

static float f16_at(const uint8_t *p) { return qhx_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

static void deq_f32(const uint8_t *b, float *y) { memcpy(y, b, 4); }
static void deq_f16(const uint8_t *b, float *y) { y[0] = f16_at(b); }
static void deq_bf16(const uint8_t *b, float *y) { y[0] = qhx_bf16_to_f32((uint16_t)(b[0] | b[1] << 8)); }

/* Q8_0: d (f16), 32 int8 codes. */
static void deq_q8_0(const uint8_t *b, float *y) {
    float d = f16_at(b);
    for (int i = 0; i < 32; i++) y[i] = (float)(int8_t)b[2 + i] * d;
}

/* Q4_0: d, 16 bytes; byte i holds value i (low nibble) and value i + 16 (high), code - 8. */
static void deq_q4_0(const uint8_t *b, float *y) {
    float d = f16_at(b);
    for (int i = 0; i < 16; i++) {
        y[i] = d * (float)((b[2 + i] & 15) - 8);
        y[i + 16] = d * (float)((b[2 + i] >> 4) - 8);
    }
}

/* Q4_1: d, m, 16 bytes as Q4_0; value = d * code + m. */
static void deq_q4_1(const uint8_t *b, float *y) {
    float d = f16_at(b), m = f16_at(b + 2);
    for (int i = 0; i < 16; i++) {
        y[i] = d * (float)(b[4 + i] & 15) + m;
        y[i + 16] = d * (float)(b[4 + i] >> 4) + m;
    }
}

/* The fifth bit of value j of a Q5 block: bit j of the little-endian 32-bit qh. */
static int q5_high(const uint8_t *qh, int j) { return (qh[j >> 3] >> (j & 7)) & 1; }

/* Q5_0: d, qh (4 bytes), 16 bytes of low nibbles as Q4_0; code - 16. */
static void deq_q5_0(const uint8_t *b, float *y) {
    float d = f16_at(b);
    const uint8_t *qh = b + 2, *qs = b + 6;
    for (int i = 0; i < 16; i++) {
        y[i] = d * (float)(((qs[i] & 15) | q5_high(qh, i) << 4) - 16);
        y[i + 16] = d * (float)(((qs[i] >> 4) | q5_high(qh, i + 16) << 4) - 16);
    }
}

/* Q5_1: d, m, qh, 16 bytes; d * code + m. */
static void deq_q5_1(const uint8_t *b, float *y) {
    float d = f16_at(b), m = f16_at(b + 2);
    const uint8_t *qh = b + 4, *qs = b + 8;
    for (int i = 0; i < 16; i++) {
        y[i] = d * (float)((qs[i] & 15) | q5_high(qh, i) << 4) + m;
        y[i + 16] = d * (float)((qs[i] >> 4) | q5_high(qh, i + 16) << 4) + m;
    }
}

/* Q2_K: 16 scale bytes (low nibble scale, high nibble min, per 16 values), 64 bytes of 2-bit
 * codes, d, dmin. Code byte l of a 128-value half holds values l, l + 32, l + 64, l + 96 in
 * bits 0-1, 2-3, 4-5, 6-7. */
static void deq_q2_k(const uint8_t *b, float *y) {
    const uint8_t *sc = b, *qs = b + 16;
    float d = f16_at(b + 80), dmin = f16_at(b + 82);
    for (int j = 0; j < QK_K; j++) {
        int half = j / 128, shift = (j % 128) / 32 * 2, l = j % 32, group = j / 16;
        float dl = d * (float)(sc[group] & 15), ml = dmin * (float)(sc[group] >> 4);
        y[j] = dl * (float)((qs[half * 32 + l] >> shift) & 3) - ml;
    }
}

/* The 16 six-bit scales of Q3_K, packed in 12 bytes: low nibbles in bytes 0-7 (scale s in byte
 * s % 8, high nibble for s >= 8), the top two bits in bytes 8-11 (byte 8 + s % 4, bits
 * 2 * (s / 4)). Stored biased by 32. */
static int q3_scale(const uint8_t *s, int i) {
    int lo = (s[i % 8] >> (i / 8 * 4)) & 15, hi = (s[8 + i % 4] >> (i / 4 * 2)) & 3;
    return (lo | hi << 4) - 32;
}

/* Q3_K: hmask (32 bytes), 64 bytes of 2-bit codes (laid out as Q2_K's), 12 scale bytes, d.
 * The code is low - 4 where the value's hmask bit is clear, low where it is set; the hmask bit
 * of value j is bit j / 32 of byte j % 32. */
static void deq_q3_k(const uint8_t *b, float *y) {
    const uint8_t *hm = b, *qs = b + 32, *sc = b + 96;
    float d = f16_at(b + 108);
    for (int j = 0; j < QK_K; j++) {
        int half = j / 128, shift = (j % 128) / 32 * 2, l = j % 32;
        int low = (qs[half * 32 + l] >> shift) & 3, high = (hm[l] >> (j / 32)) & 1;
        float dl = d * (float)q3_scale(sc, j / 16);
        y[j] = dl * (float)(low - (high ? 0 : 4));
    }
}

/* The eight 6-bit scales and mins of Q4_K / Q5_K in 12 bytes: for sub-block i < 4 the low six
 * bits of byte i (scale) and i + 4 (min); for i >= 4 a nibble of byte i + 4 and the top two bits
 * of bytes i - 4 (scale) and i (min). */
static void k_scale_min(const uint8_t *s, int i, int *sc, int *m) {
    if (i < 4) {
        *sc = s[i] & 63;
        *m = s[i + 4] & 63;
    } else {
        *sc = (s[i + 4] & 15) | (s[i - 4] >> 6) << 4;
        *m = (s[i + 4] >> 4) | (s[i] >> 6) << 4;
    }
}

/* Q4_K: d, dmin, 12 scale bytes, 128 bytes of nibbles: 32 bytes per 64 values, low nibbles the
 * first 32, high nibbles the next. */
static void deq_q4_k(const uint8_t *b, float *y) {
    float d = f16_at(b), dmin = f16_at(b + 2);
    const uint8_t *sc = b + 4, *qs = b + 16;
    for (int j = 0; j < QK_K; j++) {
        int sub = j / 32, sv, mv;
        k_scale_min(sc, sub, &sv, &mv);
        float d1 = d * (float)sv, m1 = dmin * (float)mv;
        int q = (qs[(j / 64) * 32 + j % 32] >> ((sub & 1) * 4)) & 15;
        y[j] = d1 * (float)q - m1;
    }
}

/* Q5_K: Q4_K's layout with 32 bytes of fifth bits before the nibbles: bit sub of byte j % 32. */
static void deq_q5_k(const uint8_t *b, float *y) {
    float d = f16_at(b), dmin = f16_at(b + 2);
    const uint8_t *sc = b + 4, *qh = b + 16, *qs = b + 48;
    for (int j = 0; j < QK_K; j++) {
        int sub = j / 32, sv, mv;
        k_scale_min(sc, sub, &sv, &mv);
        float d1 = d * (float)sv, m1 = dmin * (float)mv;
        int q = ((qs[(j / 64) * 32 + j % 32] >> ((sub & 1) * 4)) & 15) | ((qh[j % 32] >> sub) & 1) << 4;
        y[j] = d1 * (float)q - m1;
    }
}

/* Q6_K: 128 bytes of low nibbles, 64 bytes of high 2-bit pairs, 16 int8 scales, d. Per 128-value
 * half: value l + 32 k (k = 0..3) takes the low nibble of ql[l] (k = 0), ql[l + 32] (k = 1),
 * the high nibble of ql[l] (k = 2), ql[l + 32] (k = 3), and bits 2k..2k+1 of qh[l]; code - 32. */
static void deq_q6_k(const uint8_t *b, float *y) {
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    float d = f16_at(b + 208);
    for (int j = 0; j < QK_K; j++) {
        int half = j / 128, k = (j % 128) / 32, l = j % 32;
        int lo = (ql[half * 64 + l + (k & 1) * 32] >> ((k >> 1) * 4)) & 15;
        int hi = (qh[half * 32 + l] >> (2 * k)) & 3;
        float dl = d * (float)sc[j / 16];
        y[j] = dl * (float)((lo | hi << 4) - 32);
    }
}

/* The non-linear 4-bit code book of IQ4_NL and IQ4_XS. */
static const int8_t IQ4_VALUES[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* IQ4_NL: d, 16 bytes laid out as Q4_0, each nibble an index into the code book. */
static void deq_iq4_nl(const uint8_t *b, float *y) {
    float d = f16_at(b);
    for (int i = 0; i < 16; i++) {
        y[i] = d * (float)IQ4_VALUES[b[2 + i] & 15];
        y[i + 16] = d * (float)IQ4_VALUES[b[2 + i] >> 4];
    }
}

/* IQ4_XS: d, scales_h (16-bit: two bits per 32 values), scales_l (4 bytes: a nibble per 32
 * values), 128 bytes, each 32 values as one IQ4_NL block's nibbles; six-bit scale - 32. */
static void deq_iq4_xs(const uint8_t *b, float *y) {
    float d = f16_at(b);
    int sh = b[2] | b[3] << 8;
    const uint8_t *sl = b + 4, *qs = b + 8;
    for (int ib = 0; ib < QK_K / 32; ib++) {
        int ls = (((sl[ib / 2] >> (4 * (ib % 2))) & 15) | ((sh >> (2 * ib)) & 3) << 4) - 32;
        float dl = d * (float)ls;
        for (int i = 0; i < 16; i++) {
            y[ib * 32 + i] = dl * (float)IQ4_VALUES[qs[ib * 16 + i] & 15];
            y[ib * 32 + i + 16] = dl * (float)IQ4_VALUES[qs[ib * 16 + i] >> 4];
        }
    }
}

typedef void (*deq_block_fn)(const uint8_t *block, float *out);

static deq_block_fn block_fn(uint32_t type) {
    switch (type) {
    case QHX_GGML_F32: return deq_f32;
    case QHX_GGML_F16: return deq_f16;
    case QHX_GGML_BF16: return deq_bf16;
    case QHX_GGML_Q8_0: return deq_q8_0;
    case QHX_GGML_Q4_0: return deq_q4_0;
    case QHX_GGML_Q4_1: return deq_q4_1;
    case QHX_GGML_Q5_0: return deq_q5_0;
    case QHX_GGML_Q5_1: return deq_q5_1;
    case QHX_GGML_Q2_K: return deq_q2_k;
    case QHX_GGML_Q3_K: return deq_q3_k;
    case QHX_GGML_Q4_K: return deq_q4_k;
    case QHX_GGML_Q5_K: return deq_q5_k;
    case QHX_GGML_Q6_K: return deq_q6_k;
    case QHX_GGML_IQ4_NL: return deq_iq4_nl;
    case QHX_GGML_IQ4_XS: return deq_iq4_xs;
    default: return NULL;
    }
}

int qhx_gguf_can_dequant(uint32_t type) { return block_fn(type) != NULL; }

int qhx_gguf_dequant_row(uint32_t type, const uint8_t *src, int64_t n, float *out) {
    deq_block_fn fn = block_fn(type);
    int block = qhx_ggml_type_block(type), bytes = qhx_ggml_type_block_bytes(type);
    if (!fn || n < 0 || n % block) return -1;
    for (int64_t i = 0; i < n / block; i++) fn(src + i * bytes, out + i * block);
    return 0;
}
